/*
 * rgpuctl's checkpoint commands: checkpoint (and checkpoint verify / rm), checkpoints, restore
 * and migrate (docs/operator-guide.md, "Checkpoints and migration"). Each asks the server that
 * holds the job or the checkpoint; a job is found by asking every server named (--server,
 * --cluster) for its jobs. Tables by default, --json for scripts, a progress bar on a terminal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/err.h"
#include "rgpu/util.h"

/* A reply's result as an exit status. */
static int status_of_result(int r)
{
	return r == 0 ? CTL_OK : r == RGPU_ENOTFOUND ? CTL_NOTFOUND
			     : r == RGPU_ECORRUPT ? CTL_DAMAGED
						  : CTL_FAILED;
}

static int fail_json(const struct ctl_opts *o, const char *cmd, const char *server,
		     const char *err, int status)
{
	if (o->json)
		ctl_json_print(json_pack("{s:s,s:s,s:i}", "server", server ? server : "", "error",
					 err, "status", status));
	else
		fprintf(stderr, "rgpuctl %s: %s\n", cmd, err);
	return status;
}

static int is_hex(const char *s, size_t min)
{
	size_t n = strlen(s);
	return n >= min && n <= 32 && strspn(s, "0123456789abcdefABCDEF") == n;
}

static int parse_id(const char *s, uint64_t *id)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || v == 0)
		return -1;
	*id = v;
	return 0;
}

/*
 * The server (index into o->server) that runs the job whose id starts with prefix: with one
 * server named, that one (it says if it has no such job); with several, the one whose jobs
 * hold it. Returns the index, or -(exit status) with the reason said.
 */
/*
 * 1: server answers and serves no job prefix names (asked for up to 2 s: a worker that just
 * ended is listed until the supervisor reaps it); 0: it does, or it cannot be asked.
 */
static int job_gone(const char *server, const char *prefix)
{
	for (int t = 0; t < 10; t++) {
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		Rgpu__JobsReply *jr = NULL;
		char err[512];
		int gone = 1;
		if (rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_JOBS, &req.base,
				    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL,
				    NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)))
			return 0;
		for (size_t k = 0; k < jr->n_jobs; k++) {
			char hex[40];
			ctl_hex(&jr->jobs[k]->job_id, hex, sizeof(hex));
			if (!strncasecmp(hex, prefix, strlen(prefix)))
				gone = 0;
		}
		rgpu__jobs_reply__free_unpacked(jr, NULL);
		if (gone)
			return 1;
		nanosleep(&(struct timespec){0, 200000000}, NULL);
	}
	return 0;
}

static int find_job(struct ctl_opts *o, const char *cmd, const char *prefix)
{
	int found = -1, n = 0;
	char why[600];

	if (!is_hex(prefix, 4)) {
		snprintf(why, sizeof(why),
			 "'%s' is not a job id (4 to 32 hex digits of one: rgpuctl jobs)", prefix);
		return -fail_json(o, cmd, NULL, why, CTL_USAGE);
	}
	if (o->nserver == 1)
		return 0;
	for (int i = 0; i < o->nserver; i++) {
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		Rgpu__JobsReply *jr = NULL;
		char err[512];
		if (rgpu_admin_once(&ctl_peer, o->server[i], RGPU_ADMIN_MSG_JOBS, &req.base,
				    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL,
				    NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err))) {
			if (o->json) /* a line of its own, as every line under --json */
				ctl_json_print(json_pack("{s:s,s:s}", "server", o->server[i],
							 "warning", err));
			else
				fprintf(stderr, "rgpuctl %s: %s (looking for job %s)\n", cmd, err,
					prefix);
			continue;
		}
		for (size_t k = 0; k < jr->n_jobs; k++) {
			char hex[40];
			ctl_hex(&jr->jobs[k]->job_id, hex, sizeof(hex));
			if (!strncasecmp(hex, prefix, strlen(prefix))) {
				found = i;
				n++;
			}
		}
		rgpu__jobs_reply__free_unpacked(jr, NULL);
	}
	if (n == 1)
		return found;
	if (n)
		snprintf(why, sizeof(why), "job id %s names %d jobs: give more of it", prefix, n);
	else
		snprintf(why, sizeof(why), "no job %s on any server asked", prefix);
	return -fail_json(o, cmd, NULL, why, n ? CTL_USAGE : CTL_NOTFOUND);
}

/* The one server a checkpoint id refers to: --server, or the only one named. */
static int one_server(const struct ctl_opts *o, const char *cmd)
{
	if (o->nserver == 1)
		return 0;
	return -fail_json(o, cmd, NULL,
			  "a checkpoint id names a checkpoint of one server: say which with "
			  "--server ADDR",
			  CTL_USAGE);
}

static void ms(uint64_t ns, char *out, size_t len)
{
	if (ns < 1000000000ull)
		snprintf(out, len, "%.1f ms", ns / 1e6);
	else
		snprintf(out, len, "%.2f s", ns / 1e9);
}

static json_t *info_json(const char *server, const Rgpu__CkptInfo *ci)
{
	char job[40];

	ctl_hex(&ci->job_id, job, sizeof(job));
	return json_pack("{s:s,s:I,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:I,s:s}",
			 "server", server, "id", (json_int_t)ci->id, "job", job, "tenant",
			 ci->tenant ? ci->tenant : "", "client_host",
			 ci->client_host ? ci->client_host : "", "program",
			 ci->client_program ? ci->client_program : "", "created_unix_ms",
			 (json_int_t)ci->created_unix_ms, "device_bytes",
			 (json_int_t)ci->device_bytes, "array_bytes", (json_int_t)ci->array_bytes,
			 "chunks", (json_int_t)ci->chunks,
			 "new_chunks", (json_int_t)ci->new_chunks, "new_bytes",
			 (json_int_t)ci->new_bytes, "stored_bytes", (json_int_t)ci->stored_bytes,
			 "pause_ns", (json_int_t)ci->pause_ns, "duration_ns",
			 (json_int_t)ci->duration_ns, "snapshot", ci->snapshot, "records",
			 (json_int_t)ci->records, "server_host",
			 ci->server_host ? ci->server_host : "");
}

/* ---- checkpoint verify / rm ---------------------------------------------------------------- */

static int ckpt_op(struct ctl_opts *o, const char *what, const char *idstr)
{
	Rgpu__CkptRef req = RGPU__CKPT_REF__INIT;
	Rgpu__CkptOpReply *rep = NULL;
	struct ctl_progress pg;
	struct rgpu_admin *a = NULL;
	int verify = !strcmp(what, "verify"), s, ret;
	char err[800], cmd[32];
	uint64_t id;

	snprintf(cmd, sizeof(cmd), "checkpoint %s", what);
	if (parse_id(idstr, &id)) {
		char why[300];
		snprintf(why, sizeof(why), "'%s' is not a checkpoint id (rgpuctl checkpoints)",
			 idstr);
		return fail_json(o, cmd, NULL, why, CTL_USAGE);
	}
	if ((s = one_server(o, cmd)) < 0)
		return -s;
	req.id = id;
	ctl_progress_init(&pg, o);
	ret = rgpu_admin_open(&ctl_peer, o->server[s], &a, err, sizeof(err));
	if (!ret)
		ret = rgpu_admin_call(a, verify ? RGPU_ADMIN_MSG_CKPT_VERIFY : RGPU_ADMIN_MSG_CKPT_RM,
				      &req.base, NULL, 0, &rgpu__ckpt_op_reply__descriptor,
				      (ProtobufCMessage **)&rep, NULL, NULL, ctl_progress_cb, &pg,
				      RGPU_ADMIN_LONG_TIMEOUT_MS, err, sizeof(err));
	rgpu_admin_close(a);
	ctl_progress_end(&pg);
	if (ret)
		return fail_json(o, cmd, o->server[s], err, ctl_status_of(ret));
	if (rep->result) {
		snprintf(err, sizeof(err), "%s: %s", o->server[s],
			 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
		ret = fail_json(o, cmd, o->server[s], err, status_of_result(rep->result));
		rgpu__ckpt_op_reply__free_unpacked(rep, NULL);
		return ret;
	}
	if (o->json) {
		ctl_json_print(json_pack("{s:s,s:I,s:s,s:I,s:I}", "server", o->server[s], "id",
					 (json_int_t)id, "result", verify ? "verified" : "removed",
					 verify ? "chunks" : "chunks_freed", (json_int_t)rep->chunks,
					 verify ? "bytes" : "bytes_freed", (json_int_t)rep->bytes));
	} else {
		char b[32];
		ctl_fmt_bytes(rep->bytes, b, sizeof(b));
		if (verify)
			printf("checkpoint %llu on %s: %llu chunks (%s) read, every one equal to its "
			       "hash\n",
			       (unsigned long long)id, o->server[s], (unsigned long long)rep->chunks,
			       b);
		else
			printf("checkpoint %llu on %s removed; %llu chunks (%s) no other checkpoint "
			       "named were freed\n",
			       (unsigned long long)id, o->server[s], (unsigned long long)rep->chunks,
			       b);
	}
	rgpu__ckpt_op_reply__free_unpacked(rep, NULL);
	return CTL_OK;
}

/* ---- checkpoint JOB -------------------------------------------------------------------------- */

int ctl_cmd_checkpoint(int argc, char **argv)
{
	struct ctl_opts o;
	Rgpu__CheckpointRequest req = RGPU__CHECKPOINT_REQUEST__INIT;
	Rgpu__CheckpointReply *rep = NULL;
	struct ctl_progress pg;
	struct rgpu_admin *a = NULL;
	char err[800];
	int ret = ctl_parse(argc, argv, "checkpoint", "", 2, &o), s;

	if (ret < 0) {
		printf("Usage: rgpuctl checkpoint JOB | checkpoint verify CKPT | checkpoint rm CKPT "
		       "[--server ADDR]... [--json]\n");
		return 0;
	}
	if (ret)
		return ret;
	if (o.nargs == 2 && (!strcmp(o.args[0], "verify") || !strcmp(o.args[0], "rm"))) {
		ret = ckpt_op(&o, o.args[0], o.args[1]);
		goto out;
	}
	if (o.nargs != 1) {
		fprintf(stderr, "rgpuctl checkpoint: name one job (rgpuctl checkpoint JOB), or "
				"verify CKPT / rm CKPT\n");
		ret = CTL_USAGE;
		goto out;
	}
	if ((s = find_job(&o, "checkpoint", o.args[0])) < 0) {
		ret = -s;
		goto out;
	}
	req.job = o.args[0];
	ctl_progress_init(&pg, &o);
	ret = rgpu_admin_open(&ctl_peer, o.server[s], &a, err, sizeof(err));
	if (!ret)
		ret = rgpu_admin_call(a, RGPU_ADMIN_MSG_CHECKPOINT, &req.base, NULL, 0,
				      &rgpu__checkpoint_reply__descriptor,
				      (ProtobufCMessage **)&rep, NULL, NULL, ctl_progress_cb, &pg,
				      RGPU_ADMIN_LONG_TIMEOUT_MS, err, sizeof(err));
	rgpu_admin_close(a);
	ctl_progress_end(&pg);
	if (ret) {
		ret = fail_json(&o, "checkpoint", o.server[s], err, ctl_status_of(ret));
		goto out;
	}
	if (rep->result || !rep->info) {
		snprintf(err, sizeof(err), "%s: %s", o.server[s],
			 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
		ret = fail_json(&o, "checkpoint", o.server[s], err, status_of_result(rep->result));
	} else if (o.json) {
		ctl_json_print(info_json(o.server[s], rep->info));
		ret = CTL_OK;
	} else {
		const Rgpu__CkptInfo *ci = rep->info;
		char job[40], dev[32], nb[32], st[32], pause[32], dur[32], arr[32], arrs[64] = "";
		ctl_hex(&ci->job_id, job, sizeof(job));
		ctl_fmt_bytes(ci->device_bytes, dev, sizeof(dev));
		if (ci->array_bytes) {
			ctl_fmt_bytes(ci->array_bytes, arr, sizeof(arr));
			snprintf(arrs, sizeof(arrs), " (%s of it in CUDA arrays)", arr);
		}
		ctl_fmt_bytes(ci->new_bytes, nb, sizeof(nb));
		ctl_fmt_bytes(ci->stored_bytes, st, sizeof(st));
		ms(ci->pause_ns, pause, sizeof(pause));
		ms(ci->duration_ns, dur, sizeof(dur));
		printf("checkpoint %llu of job %.12s on %s: %s of device memory%s in %llu chunks, "
		       "%llu new (%s, %s stored); the job was held %s%s; %s in all\n",
		       (unsigned long long)ci->id, job, o.server[s], dev, arrs,
		       (unsigned long long)ci->chunks, (unsigned long long)ci->new_chunks, nb, st,
		       pause, ci->snapshot ? " (a snapshot on the GPU drained after)" : "", dur);
		ret = CTL_OK;
	}
	rgpu__checkpoint_reply__free_unpacked(rep, NULL);
out:
	ctl_opts_free(&o);
	return ret;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

int ctl_cmd_checkpoints(int argc, char **argv)
{
	struct ctl_opts o;
	json_t *arr = NULL, *errs = NULL, *stores = NULL;
	int ret = ctl_parse(argc, argv, "checkpoints", "", 1, &o), failed = 0;

	if (ret < 0) {
		printf("Usage: rgpuctl checkpoints [JOB] [--server ADDR]... [--json]\n");
		return 0;
	}
	if (ret)
		return ret;
	if (o.nargs && !is_hex(o.args[0], 1)) {
		fprintf(stderr, "rgpuctl checkpoints: '%s' is not (the start of) a job id\n",
			o.args[0]);
		ctl_opts_free(&o);
		return CTL_USAGE;
	}
	if (o.json) {
		arr = json_array();
		errs = json_array();
		stores = json_array();
	} else {
		printf("%-22s %5s %-12s %-19s %-16s %10s %10s %10s %9s\n", "SERVER", "ID", "JOB",
		       "CREATED", "PROGRAM", "DEVMEM", "NEW", "STORED", "PAUSE");
	}
	for (int i = 0; i < o.nserver; i++) {
		Rgpu__CkptListRequest req = RGPU__CKPT_LIST_REQUEST__INIT;
		Rgpu__CkptListReply *rep = NULL;
		char err[600];
		req.job = o.nargs ? o.args[0] : "";
		ret = rgpu_admin_once(&ctl_peer, o.server[i], RGPU_ADMIN_MSG_CHECKPOINTS, &req.base,
				      &rgpu__ckpt_list_reply__descriptor, (ProtobufCMessage **)&rep,
				      NULL, NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err));
		if (!ret && rep->result) {
			snprintf(err, sizeof(err), "%s: %s", o.server[i],
				 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
			ret = rep->result;
			rgpu__ckpt_list_reply__free_unpacked(rep, NULL);
		}
		if (ret) {
			failed = failed ? failed : ctl_status_of(ret);
			if (o.json)
				json_array_append_new(errs, json_pack("{s:s,s:s}", "server",
								      o.server[i], "error", err));
			else
				fprintf(stderr, "rgpuctl checkpoints: %s\n", err);
			continue;
		}
		if (o.json)
			json_array_append_new(stores, json_pack("{s:s,s:I,s:I}", "server", o.server[i],
								"chunks", (json_int_t)rep->store_chunks,
								"bytes", (json_int_t)rep->store_bytes));
		for (size_t k = 0; k < rep->n_checkpoints; k++) {
			const Rgpu__CkptInfo *ci = rep->checkpoints[k];
			char job[40], when[32], dev[32], nb[32], st[32], pause[32];
			time_t t = (time_t)(ci->created_unix_ms / 1000);
			struct tm tm;
			if (o.json) {
				json_array_append_new(arr, info_json(o.server[i], ci));
				continue;
			}
			ctl_hex(&ci->job_id, job, sizeof(job));
			job[12] = '\0';
			localtime_r(&t, &tm);
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
			ctl_fmt_bytes(ci->device_bytes, dev, sizeof(dev));
			ctl_fmt_bytes(ci->new_bytes, nb, sizeof(nb));
			ctl_fmt_bytes(ci->stored_bytes, st, sizeof(st));
			ms(ci->pause_ns, pause, sizeof(pause));
			printf("%-22s %5llu %-12s %-19s %-16.16s %10s %10s %10s %9s\n", o.server[i],
			       (unsigned long long)ci->id, job, when,
			       ctl_basename(ci->client_program), dev, nb, st, pause);
		}
		rgpu__ckpt_list_reply__free_unpacked(rep, NULL);
	}
	if (o.json)
		ctl_json_print(json_pack("{s:o,s:o,s:o}", "checkpoints", arr, "stores", stores,
					 "errors", errs));
	ctl_opts_free(&o);
	return failed;
}

/* ---- restore ---------------------------------------------------------------------------------- */

int ctl_cmd_restore(int argc, char **argv)
{
	struct ctl_opts o;
	Rgpu__RestoreRequest req = RGPU__RESTORE_REQUEST__INIT;
	Rgpu__RestoreReply *rep = NULL;
	struct ctl_progress pg;
	struct rgpu_admin *a = NULL;
	char err[800];
	uint64_t id;
	int ret = ctl_parse(argc, argv, "restore", "ta", 1, &o), s;

	if (ret < 0) {
		printf("Usage: rgpuctl restore CKPT --to TARGET [--server ADDR] "
		       "[--client-address HOST:PORT] [--json]\n");
		return 0;
	}
	if (ret)
		return ret;
	if (o.nargs != 1 || parse_id(o.args[0], &id) || !o.to) {
		fprintf(stderr, "rgpuctl restore: name a checkpoint id and its target: rgpuctl "
				"restore CKPT --to TARGET [--server ADDR]\n");
		ret = CTL_USAGE;
		goto out;
	}
	if ((s = one_server(&o, "restore")) < 0) {
		ret = -s;
		goto out;
	}
	req.id = id;
	req.target = (char *)o.to;
	req.client_address = (char *)(o.client_address ? o.client_address : "");
	ctl_progress_init(&pg, &o);
	ret = rgpu_admin_open(&ctl_peer, o.server[s], &a, err, sizeof(err));
	if (!ret)
		ret = rgpu_admin_call(a, RGPU_ADMIN_MSG_RESTORE, &req.base, NULL, 0,
				      &rgpu__restore_reply__descriptor, (ProtobufCMessage **)&rep,
				      NULL, NULL, ctl_progress_cb, &pg, RGPU_ADMIN_LONG_TIMEOUT_MS,
				      err, sizeof(err));
	rgpu_admin_close(a);
	ctl_progress_end(&pg);
	if (ret) {
		ret = fail_json(&o, "restore", o.server[s], err, ctl_status_of(ret));
		goto out;
	}
	if (rep->result) {
		snprintf(err, sizeof(err), "%s: %s", o.server[s],
			 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
		ret = fail_json(&o, "restore", o.server[s], err, status_of_result(rep->result));
	} else {
		char job[40], sent[32], dur[32], rest[32];
		ctl_hex(&rep->job_id, job, sizeof(job));
		ctl_fmt_bytes(rep->bytes_sent, sent, sizeof(sent));
		ms(rep->duration_ns, dur, sizeof(dur));
		ms(rep->restore_ns, rest, sizeof(rest));
		if (o.json)
			ctl_json_print(json_pack("{s:s,s:I,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "server",
						 o.server[s], "id", (json_int_t)id, "target", o.to,
						 "job", job, "client_address", rep->client_address,
						 "chunks_sent", (json_int_t)rep->chunks_sent,
						 "bytes_sent", (json_int_t)rep->bytes_sent,
						 "duration_ns", (json_int_t)rep->duration_ns,
						 "restore_ns", (json_int_t)rep->restore_ns));
		else
			printf("checkpoint %llu of %s restored on %s as job %.12s (%llu chunks, %s "
			       "sent; rebuilt in %s, %s in all); it waits for its client at %s\n",
			       (unsigned long long)id, o.server[s], o.to, job,
			       (unsigned long long)rep->chunks_sent, sent, rest, dur,
			       rep->client_address);
		ret = CTL_OK;
	}
	rgpu__restore_reply__free_unpacked(rep, NULL);
out:
	ctl_opts_free(&o);
	return ret;
}

/* ---- migrate ---------------------------------------------------------------------------------- */

/*
 * MIGRATE job (full id or prefix) from server to target, showing progress. 0 with *rep (its
 * result may be an error), or an admin error with err filled.
 */
int ctl_migrate_call(const struct ctl_opts *o, const char *server, const char *job,
		     const char *target, Rgpu__MigrateReply **rep, char *err, size_t errlen)
{
	Rgpu__MigrateRequest req = RGPU__MIGRATE_REQUEST__INIT;
	struct ctl_progress pg;
	struct rgpu_admin *a = NULL;
	int ret;

	req.job = (char *)job;
	req.target = (char *)target;
	req.cold = o->cold;
	req.max_rounds = o->rounds;
	req.client_address = (char *)(o->client_address ? o->client_address : "");
	ctl_progress_init(&pg, o);
	ret = rgpu_admin_open(&ctl_peer, server, &a, err, errlen);
	if (!ret)
		ret = rgpu_admin_call(a, RGPU_ADMIN_MSG_MIGRATE, &req.base, NULL, 0,
				      &rgpu__migrate_reply__descriptor, (ProtobufCMessage **)rep,
				      NULL, NULL, ctl_progress_cb, &pg, RGPU_ADMIN_LONG_TIMEOUT_MS,
				      err, errlen);
	rgpu_admin_close(a);
	ctl_progress_end(&pg);
	return ret;
}

int ctl_cmd_migrate(int argc, char **argv)
{
	struct ctl_opts o;
	Rgpu__MigrateReply *rep = NULL;
	char err[800];
	int ret = ctl_parse(argc, argv, "migrate", "tacr", 1, &o), s;

	if (ret < 0) {
		printf("Usage: rgpuctl migrate JOB --to TARGET [--cold | --rounds N] [--server ADDR]... "
		       "[--client-address HOST:PORT] [--json] [--progress]\n"
		       "  live (default): device memory copied in rounds while the job runs, then the\n"
		       "  job held for what changed last; --cold: held from its checkpoint until it\n"
		       "  runs on the target. --rounds: pre-copy rounds at most (default 8).\n");
		return 0;
	}
	if (ret)
		return ret;
	if (o.nargs != 1 || !o.to) {
		fprintf(stderr, "rgpuctl migrate: name the job and its target: rgpuctl migrate JOB "
				"--to TARGET\n");
		ret = CTL_USAGE;
		goto out;
	}
	if (o.cold && o.rounds) {
		fprintf(stderr, "rgpuctl migrate: --rounds is for a live migration, not --cold\n");
		ret = CTL_USAGE;
		goto out;
	}
	if ((s = find_job(&o, "migrate", o.args[0])) < 0) {
		ret = -s;
		goto out;
	}
	ret = ctl_migrate_call(&o, o.server[s], o.args[0], o.to, &rep, err, sizeof(err));
	if (ret == RGPU_ECLOSED && job_gone(o.server[s], o.args[0])) {
		/* its worker went with it: nobody was left to answer */
		snprintf(err, sizeof(err),
			 "%s: job %s ended during the migration (its program finished, or its "
			 "client went away for good); nothing moved",
			 o.server[s], o.args[0]);
		ret = fail_json(&o, "migrate", o.server[s], err, CTL_FAILED);
		goto out;
	}
	if (ret) {
		ret = fail_json(&o, "migrate", o.server[s], err, ctl_status_of(ret));
		goto out;
	}
	if (rep->result) {
		snprintf(err, sizeof(err), "%s: %s (the job runs on there)", o.server[s],
			 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
		ret = fail_json(&o, "migrate", o.server[s], err, status_of_result(rep->result));
	} else {
		char job[40], sent[32], dur[32], pause[32], resv[64];
		ctl_hex(&rep->job_id, job, sizeof(job));
		/* a batch job's reservation goes where its last program goes */
		ctl_follow_reservation(o.server[s], o.to, job, resv, sizeof(resv));
		ctl_fmt_bytes(rep->bytes_sent, sent, sizeof(sent));
		ms(rep->duration_ns, dur, sizeof(dur));
		ms(rep->pause_ns, pause, sizeof(pause));
		char fin[32];
		ctl_fmt_bytes(rep->final_bytes, fin, sizeof(fin));
		if (o.json)
			ctl_json_print(json_pack(
			    "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:s}", "server",
			    o.server[s], "target", o.to, "job", job, "kind", o.cold ? "cold" : "live",
			    "client_address", rep->client_address, "checkpoint",
			    (json_int_t)rep->checkpoint, "rounds", (json_int_t)rep->rounds,
			    "chunks_sent", (json_int_t)rep->chunks_sent, "bytes_sent",
			    (json_int_t)rep->bytes_sent, "final_bytes", (json_int_t)rep->final_bytes,
			    "pause_ns", (json_int_t)rep->pause_ns, "duration_ns",
			    (json_int_t)rep->duration_ns, "restaged", rep->restaged, "reservation",
			    resv));
		else if (o.cold)
			printf("job %.12s moved from %s to %s (client address %s): checkpoint %llu, "
			       "%llu chunks (%s) sent, held %s, %s in all\n",
			       job, o.server[s], o.to, rep->client_address,
			       (unsigned long long)rep->checkpoint,
			       (unsigned long long)rep->chunks_sent, sent, pause, dur);
		else
			printf("job %.12s moved live from %s to %s (client address %s): %s in all, "
			       "%u round(s), %s sent (%s while held), paused %s%s\n",
			       job, o.server[s], o.to, rep->client_address, dur, rep->rounds, sent,
			       fin, pause,
			       rep->restaged ? " (its state changed at the switchover: restored "
					       "whole)"
					     : "");
		if (*resv && !o.json)
			printf("reservation %s moved with it\n", resv);
		ret = CTL_OK;
	}
	rgpu__migrate_reply__free_unpacked(rep, NULL);
out:
	ctl_opts_free(&o);
	return ret;
}

/* ---- drain, undrain ------------------------------------------------------------------------- */

static int drain_call(const char *server, int drain, Rgpu__DrainReply **rep, char *err,
		      size_t errlen)
{
	Rgpu__DrainRequest req = RGPU__DRAIN_REQUEST__INIT;

	req.drained = drain;
	return rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_DRAIN, &req.base,
			       &rgpu__drain_reply__descriptor, (ProtobufCMessage **)rep, NULL, NULL,
			       RGPU_ADMIN_TIMEOUT_MS, err, errlen);
}

const char *ctl_pick_target(char **cands, int n, uint64_t need, char *client, size_t clen,
			    char *why, size_t whylen)
{
	const char *best = NULL;
	uint64_t best_free = 0;
	size_t off = 0;

	why[0] = '\0';
	for (int i = 0; i < n; i++) {
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		Rgpu__StatusReply *st = NULL;
		char err[400];
		const char *no = NULL;
		uint64_t free_b = 0;
		if (rgpu_admin_once(&ctl_peer, cands[i], RGPU_ADMIN_MSG_STATUS, &req.base,
				    &rgpu__status_reply__descriptor, (ProtobufCMessage **)&st, NULL,
				    NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err))) {
			no = "unreachable";
		} else if (st->drained) {
			no = "drained";
		} else if (!st->n_gpus) {
			no = "no GPU";
		} else {
			free_b = ctl_gpu_free(st->gpus[0]);
			if (free_b < need)
				no = "not enough free GPU memory";
		}
		if (no)
			off += (size_t)snprintf(why + off, off < whylen ? whylen - off : 0, "%s%s: %s",
						off ? "; " : "", cands[i], no);
		else if (!best || free_b > best_free) {
			best = cands[i];
			best_free = free_b;
			if (client)
				rgpu_reach_addr(st->listen, cands[i], client, clen);
		}
		if (st)
			rgpu__status_reply__free_unpacked(st, NULL);
	}
	return best;
}

int ctl_cmd_drain(int argc, char **argv, int drain)
{
	const char *cmd = drain ? "drain" : "undrain";
	struct ctl_opts o;
	Rgpu__DrainReply *dr = NULL;
	Rgpu__JobsReply *jr = NULL;
	Rgpu__AdminRequest jreq = RGPU__ADMIN_REQUEST__INIT;
	char err[800], *cands[CTL_MAX_SERVERS], *tolist = NULL;
	json_t *moved = json_array(), *left = json_array();
	int ret = ctl_parse(argc, argv, cmd, drain ? "tcr" : "", 1, &o), ncand = 0, nleft = 0;

	if (ret < 0) {
		if (drain)
			printf("Usage: rgpuctl drain SERVER --to TARGET[,TARGET...] [--cold | --rounds N] "
			       "[--json] [--progress]\n");
		else
			printf("Usage: rgpuctl undrain SERVER [--json]\n");
		return 0;
	}
	if (ret)
		goto out;
	if (o.nargs != 1 || (drain && !o.to)) {
		fprintf(stderr, "rgpuctl %s: name the server%s\n", cmd,
			drain ? " and where its jobs may go: rgpuctl drain SERVER --to TARGET[,...]"
			      : ": rgpuctl undrain SERVER");
		ret = CTL_USAGE;
		goto out;
	}
	const char *server = o.args[0];
	if (drain) {
		tolist = strdup(o.to);
		for (char *sv, *t = strtok_r(tolist, ",", &sv); t && ncand < CTL_MAX_SERVERS;
		     t = strtok_r(NULL, ",", &sv))
			if (strcmp(t, server))
				cands[ncand++] = t;
	}
	ret = drain_call(server, drain, &dr, err, sizeof(err));
	if (!ret && dr->result) {
		snprintf(err, sizeof(err), "%s: %s", server,
			 dr->error && *dr->error ? dr->error : rgpu_strerror(dr->result));
		ret = fail_json(&o, cmd, server, err, CTL_FAILED);
		goto out;
	}
	if (ret) {
		ret = fail_json(&o, cmd, server, err, ctl_status_of(ret));
		goto out;
	}
	if (!drain) {
		if (o.json)
			ctl_json_print(json_pack("{s:s,s:b,s:i}", "server", server, "drained", 0,
						 "jobs", (int)dr->jobs));
		else
			printf("%s takes new sessions and jobs again (%u job(s) running there)\n",
			       server, dr->jobs);
		ret = CTL_OK;
		goto out;
	}
	if (!o.json)
		printf("%s drained: no new session or job lands there; moving its %u job(s)\n",
		       server, dr->jobs);
	ret = rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_JOBS, &jreq.base,
			      &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL, NULL,
			      RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err));
	if (ret) {
		ret = fail_json(&o, cmd, server, err, ctl_status_of(ret));
		goto out;
	}
	for (size_t k = 0; k < jr->n_jobs; k++) {
		const Rgpu__JobInfo *j = jr->jobs[k];
		Rgpu__MigrateReply *rep = NULL;
		char job[40], why[800] = "";
		const char *target;
		ctl_hex(&j->job_id, job, sizeof(job));
		target = ctl_pick_target(cands, ncand, j->device_memory, NULL, 0, why, sizeof(why));
		if (!target) {
			snprintf(err, sizeof(err), "no target can take it (%s)", why);
		} else if ((ret = ctl_migrate_call(&o, server, job, target, &rep, err, sizeof(err))) ==
			   0 && rep->result) {
			snprintf(err, sizeof(err), "%s (it runs on there)",
				 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
			ret = rep->result;
		} else if (!ret) {
			char pause[32], resv[64];
			ms(rep->pause_ns, pause, sizeof(pause));
			ctl_follow_reservation(server, target, job, resv, sizeof(resv));
			if (!o.json)
				printf("job %.12s (%s) moved to %s: paused %s%s%s\n", job,
				       ctl_basename(j->client_program), target, pause,
				       *resv ? "; its reservation too: " : "", resv);
			json_array_append_new(moved, json_pack("{s:s,s:s,s:I}", "job", job, "target",
							       target, "pause_ns",
							       (json_int_t)rep->pause_ns));
		}
		if (!target || ret) {
			nleft++;
			if (!o.json)
				printf("job %.12s (%s) stays on %s: %s\n", job,
				       ctl_basename(j->client_program), server, err);
			json_array_append_new(left, json_pack("{s:s,s:s}", "job", job, "error", err));
		}
		if (rep)
			rgpu__migrate_reply__free_unpacked(rep, NULL);
		ret = 0;
	}
	if (o.json)
		ctl_json_print(json_pack("{s:s,s:b,s:O,s:O}", "server", server, "drained", 1,
					 "moved", moved, "left", left));
	else
		printf("%s: %zu job(s) moved, %d left\n", server, jr->n_jobs - (size_t)nleft, nleft);
	ret = nleft ? CTL_FAILED : CTL_OK;
out:
	if (dr)
		rgpu__drain_reply__free_unpacked(dr, NULL);
	if (jr)
		rgpu__jobs_reply__free_unpacked(jr, NULL);
	json_decref(moved);
	json_decref(left);
	free(tolist);
	ctl_opts_free(&o);
	return ret;
}
