/*
 * rgpuctl slurm: what the Slurm plugin (slurm/spank_rgpu.c) asks of rgpu, and what keeps
 * Slurm's `rgpu` license in step with the cluster (docs/operator-guide.md, "Slurm").
 *
 *   place JOBID --gpus N [--mem SIZE]   reserve SIZE on N distinct GPUs of the cluster's
 *                                       servers for Slurm job JOBID (reservation
 *                                       "slurm-JOBID"), the ones with the most free memory,
 *                                       waking a powered-off server if none has room; print
 *                                       the RGPU_SERVERS value that reaches them. Asked again
 *                                       for a job that has them, it prints where they are now
 *                                       (they move with consolidate).
 *   where JOBID                         print where the job's reservations are (exit 4: none)
 *   release JOBID                       end the job's reservations wherever they are
 *   licenses [--write FILE [--reconfigure]]
 *                                       how many GPUs the cluster offers (servers that answer
 *                                       and are not drained, their GPUs; a server consolidate
 *                                       powered off, one); written as "Licenses=rgpu:N" into
 *                                       FILE (slurm.conf includes it) when it changed, then
 *                                       `scontrol reconfigure`
 *
 * Slurm counts GPUs as jobs ask for them (--rgpu=N takes N licenses), one job per GPU the
 * cluster has; rgpu places each on a GPU with the room asked, and GPUs are shared underneath
 * as any rgpu jobs share them, so consolidate may pack them onto fewer servers and power the
 * rest off, which still count: a placement that finds no room wakes one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/err.h"
#include "rgpu/util.h"

#define SLURM_MAX_GPUS 16

/* One server as the cluster file names it: its status (NULL: it did not answer, or is off). */
struct srv {
	const char *admin;
	Rgpu__StatusReply *st;
	char client[300]; /* where clients reach it */
	int off;          /* consolidate powered it off (state file) */
};

/* Every server's status, but those consolidate powered off (its state file, --state). */
static void ask_all(const struct ctl_opts *o, struct srv *s)
{
	json_t *off = ctl_state_load(o->state_path ? o->state_path : CTL_DEFAULT_STATE);

	for (int i = 0; i < o->nserver; i++) {
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		char err[400];
		s[i] = (struct srv){.admin = o->server[i], .off = ctl_state_has(off, o->server[i]) != 0};
		if (s[i].off)
			continue;
		if (rgpu_admin_once(&ctl_peer, o->server[i], RGPU_ADMIN_MSG_STATUS, &req.base,
				    &rgpu__status_reply__descriptor, (ProtobufCMessage **)&s[i].st,
				    NULL, NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err))) {
			fprintf(stderr, "rgpuctl slurm: %s\n", err);
			continue;
		}
		rgpu_reach_addr(s[i].st->listen, o->server[i], s[i].client, sizeof(s[i].client));
	}
	json_decref(off);
}

static void free_all(struct srv *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i].st)
			rgpu__status_reply__free_unpacked(s[i].st, NULL);
}

/* The reservation's name for Slurm job id (digits, an array task's "_" too), or an error. */
static int resv_name(const char *job, char *out, size_t len)
{
	if (!*job || strspn(job, "0123456789_") != strlen(job) || strlen(job) > 40) {
		fprintf(stderr, "rgpuctl slurm: '%s' is not a Slurm job id\n", job);
		return CTL_USAGE;
	}
	snprintf(out, len, "slurm-%s", job);
	return 0;
}

/* A GPU chosen for the job. */
struct pick {
	int srv;
	unsigned gpu;
	uint64_t free;
};

static int cmp_pick(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;
	if (x->free != y->free)
		return x->free > y->free ? -1 : 1;
	if (x->srv != y->srv)
		return x->srv - y->srv;
	return (int)x->gpu - (int)y->gpu;
}

/* RGPU_SERVERS for the picks: HOST:PORT/G[,G...] per server, in the picks' order. */
static void servers_value(const struct srv *s, const struct pick *p, int n, char *out, size_t len)
{
	size_t off = 0;
	int done[SLURM_MAX_GPUS] = {0};

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (done[i])
			continue;
		off += (size_t)snprintf(out + off, off < len ? len - off : 0, "%s%s/%u",
					off ? "," : "", s[p[i].srv].client, p[i].gpu);
		for (int k = i + 1; k < n; k++)
			if (p[k].srv == p[i].srv) {
				off += (size_t)snprintf(out + off, off < len ? len - off : 0, ",%u",
							p[k].gpu);
				done[k] = 1;
			}
	}
}

static void print_place(const struct ctl_opts *o, const char *name, const struct srv *s,
			const struct pick *p, int n, int existed)
{
	char value[4096];

	servers_value(s, p, n, value, sizeof(value));
	if (!o->json) {
		printf("%s\n", value);
		return;
	}
	json_t *g = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(g, json_pack("{s:s,s:s,s:i}", "server", s[p[i].srv].admin,
						   "client", s[p[i].srv].client, "gpu",
						   (int)p[i].gpu));
	ctl_json_print(json_pack("{s:s,s:s,s:o,s:b}", "reservation", name, "servers", value,
				 "gpus", g, "existed", existed));
}

/* Where the reservation name is now: its GPUs in p, how many. */
static int find_resv(const struct srv *s, int ns, const char *name, struct pick *p)
{
	int n = 0;

	for (int i = 0; i < ns; i++)
		for (size_t r = 0; s[i].st && r < s[i].st->n_reservations; r++)
			if (!strcmp(s[i].st->reservations[r]->name, name) && n < SLURM_MAX_GPUS)
				p[n++] = (struct pick){i, s[i].st->reservations[r]->gpu, 0};
	return n;
}

/*
 * One attempt: the GPUs with room that no one reserved, the emptiest first; reserved one by
 * one (another placement may win a GPU between our look and our RESERVE: the next is tried).
 * Returns 0 with p[0..want) reserved, or CTL_FAILED with none left reserved.
 */
static int try_place(struct srv *s, int ns, const char *name, unsigned want, uint64_t need,
		     struct pick *p, char *why, size_t len)
{
	struct pick c[CTL_MAX_SERVERS * 4];
	int nc = 0, got = 0;
	size_t off = 0;

	why[0] = '\0';
	for (int i = 0; i < ns; i++) {
		const char *no = NULL;
		int any = 0;
		if (s[i].off)
			no = "powered off";
		else if (!s[i].st)
			no = "unreachable";
		else if (s[i].st->drained)
			no = "drained";
		else if (!s[i].st->n_gpus)
			no = "no GPU";
		for (unsigned g = 0; !no && g < s[i].st->n_gpus && nc < (int)(sizeof(c) / sizeof(*c));
		     g++) {
			uint64_t f = ctl_gpu_free(s[i].st->gpus[g]);
			if (f < need)
				continue;
			c[nc++] = (struct pick){i, g, f};
			any = 1;
		}
		if (!no && !any)
			no = "no GPU with room";
		if (no)
			off += (size_t)snprintf(why + off, off < len ? len - off : 0, "%s%s: %s",
						off ? "; " : "", s[i].admin, no);
	}
	qsort(c, (size_t)nc, sizeof(*c), cmp_pick);
	for (int k = 0; k < nc && got < (int)want; k++) {
		char err[600];
		int r = ctl_reserve(s[c[k].srv].admin, name, c[k].gpu, need, 0, err, sizeof(err));
		if (r) {
			fprintf(stderr, "rgpuctl slurm place: %s\n", err);
			continue;
		}
		p[got++] = c[k];
	}
	if (got == (int)want)
		return 0;
	/* not all: none, so that a retry (or the next job) starts clean */
	for (int k = 0; k < got; k++) {
		char err[600];
		if (ctl_reserve(s[p[k].srv].admin, name, p[k].gpu, 0, 1, err, sizeof(err)))
			fprintf(stderr, "rgpuctl slurm place: cannot undo: %s\n", err);
	}
	if (!*why || got)
		snprintf(why + off, off < len ? len - off : 0, "%s%d of %u GPU(s) free",
			 off ? "; " : "", nc, want);
	return CTL_FAILED;
}

static int cmd_place(struct ctl_opts *o, const char *name)
{
	const char *state = o->state_path ? o->state_path : CTL_DEFAULT_STATE;
	struct srv s[CTL_MAX_SERVERS];
	struct pick p[SLURM_MAX_GPUS];
	char why[4000];
	int n, ret;

	if (o->gpus < 1 || o->gpus > SLURM_MAX_GPUS) {
		fprintf(stderr, "rgpuctl slurm place: --gpus takes 1 to %d\n", SLURM_MAX_GPUS);
		return CTL_USAGE;
	}
	for (int attempt = 0;; attempt++) {
		ask_all(o, s);
		n = find_resv(s, o->nserver, name, p);
		if (n) {
			/* placed before (an earlier step of the job): where its GPUs are now */
			print_place(o, name, s, p, n, 1);
			free_all(s, o->nserver);
			return CTL_OK;
		}
		ret = try_place(s, o->nserver, name, o->gpus, o->mem, p, why, sizeof(why));
		if (!ret) {
			print_place(o, name, s, p, (int)o->gpus, 0);
			free_all(s, o->nserver);
			return CTL_OK;
		}
		free_all(s, o->nserver);
		/* no room: a server consolidate powered off is woken, and the placement tried again */
		char woke[300];
		json_t *info;
		if (attempt >= 4 || ctl_wake_one(o, state, "rgpuctl slurm place", woke, sizeof(woke),
						 &info))
			break;
		json_decref(info);
	}
	fprintf(stderr, "rgpuctl slurm place: no room for %u GPU(s) with %" PRIu64 " MiB free for %s: %s\n",
		o->gpus, o->mem >> 20, name, why);
	return CTL_FAILED;
}

static int cmd_where(struct ctl_opts *o, const char *name)
{
	struct srv s[CTL_MAX_SERVERS];
	struct pick p[SLURM_MAX_GPUS];
	int n;

	ask_all(o, s);
	n = find_resv(s, o->nserver, name, p);
	if (n)
		print_place(o, name, s, p, n, 1);
	else
		fprintf(stderr, "rgpuctl slurm where: no reservation %s\n", name);
	free_all(s, o->nserver);
	return n ? CTL_OK : CTL_NOTFOUND;
}

static int cmd_release(struct ctl_opts *o, const char *name)
{
	struct srv s[CTL_MAX_SERVERS];
	struct pick p[SLURM_MAX_GPUS];
	int n, failed = 0, unreachable = 0, ended = 0;

	ask_all(o, s);
	for (int i = 0; i < o->nserver; i++)
		unreachable |= !s[i].off && !s[i].st;
	n = find_resv(s, o->nserver, name, p);
	for (int i = 0; i < n; i++) {
		char err[600];
		/* one RESERVE release ends every GPU of the name on that server */
		if (i && p[i].srv == p[i - 1].srv)
			continue;
		if (ctl_reserve(s[p[i].srv].admin, name, 0, 0, 1, err, sizeof(err))) {
			fprintf(stderr, "rgpuctl slurm release: %s\n", err);
			failed = 1;
		} else {
			ended++;
		}
	}
	if (o->json)
		ctl_json_print(json_pack("{s:s,s:i,s:b}", "reservation", name, "servers_released",
					 ended, "complete", !failed && !unreachable));
	else
		printf("%s: %s on %d server(s)%s\n", name, n ? "released" : "no reservation",
		       ended, unreachable ? " (some servers did not answer)" : "");
	free_all(s, o->nserver);
	return failed ? CTL_FAILED : unreachable ? CTL_UNREACHABLE : CTL_OK;
}

/* Write "Licenses=rgpu:N" into path when it says something else. 1: changed, 0: not, -1. */
static int write_licenses(const char *path, unsigned n)
{
	char want[64], have[256] = "", tmp[4200];
	FILE *f = fopen(path, "re");

	snprintf(want, sizeof(want), "Licenses=rgpu:%u\n", n);
	if (f) {
		size_t r = fread(have, 1, sizeof(have) - 1, f);
		have[r] = '\0';
		fclose(f);
		if (!strcmp(have, want))
			return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "we");
	if (!f)
		return -1;
	int ok = fputs(want, f) >= 0 && !fflush(f) && !fsync(fileno(f));
	if (fclose(f) || !ok || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 1;
}

static int cmd_licenses(struct ctl_opts *o)
{
	struct srv s[CTL_MAX_SERVERS];
	unsigned total = 0;
	int changed = 0, ret = CTL_OK;
	json_t *per = json_array();

	ask_all(o, s);
	for (int i = 0; i < o->nserver; i++) {
		/* consolidate plans one GPU per server: a powered-off one is woken for one */
		unsigned g = s[i].off ? 1 : s[i].st && !s[i].st->drained ? (unsigned)s[i].st->n_gpus : 0;
		total += g;
		json_array_append_new(per, json_pack("{s:s,s:i,s:s}", "server", s[i].admin, "gpus",
						     (int)g, "state",
						     s[i].off    ? "powered off"
						     : !s[i].st  ? "unreachable"
						     : s[i].st->drained ? "drained"
									: "up"));
	}
	free_all(s, o->nserver);
	if (o->write_path) {
		changed = write_licenses(o->write_path, total);
		if (changed < 0) {
			fprintf(stderr, "rgpuctl slurm licenses: cannot write %s: %s\n", o->write_path,
				strerror(errno));
			json_decref(per);
			return CTL_FAILED;
		}
		if (changed && o->reconfigure) {
			int st = system("scontrol reconfigure");
			if (st != 0) {
				fprintf(stderr, "rgpuctl slurm licenses: scontrol reconfigure failed "
						"(status %d); Slurm still counts the old total\n",
					st);
				ret = CTL_FAILED;
			}
		}
	}
	if (o->json)
		ctl_json_print(json_pack("{s:i,s:b,s:o}", "licenses", (int)total, "changed", changed,
					 "servers", per));
	else {
		printf("rgpu:%u%s\n", total,
		       !o->write_path ? "" : changed ? " (written; was different)" : " (unchanged)");
		json_decref(per);
	}
	return ret;
}

int ctl_cmd_slurm(int argc, char **argv)
{
	struct ctl_opts o;
	const char *sub = argc > 1 ? argv[1] : "";
	char name[64];
	int ret;

	if (strcmp(sub, "place") && strcmp(sub, "where") && strcmp(sub, "release") &&
	    strcmp(sub, "licenses")) {
		fprintf(stderr, "usage: rgpuctl slurm place JOBID --gpus N [--mem SIZE]\n"
				"       rgpuctl slurm where JOBID\n"
				"       rgpuctl slurm release JOBID\n"
				"       rgpuctl slurm licenses [--write FILE [--reconfigure]]\n"
				"  (each with --cluster FILE | --server ADDR..., --state FILE, --json)\n");
		return !strcmp(sub, "--help") || !strcmp(sub, "-h") ? CTL_OK : CTL_USAGE;
	}
	ret = ctl_parse(argc - 1, argv + 1, "slurm",
			!strcmp(sub, "licenses") ? "SwR" : !strcmp(sub, "place") ? "Sgm" : "S",
			!strcmp(sub, "licenses") ? 0 : 1, &o);
	if (ret)
		return ret < 0 ? CTL_OK : ret;
	if (!strcmp(sub, "licenses")) {
		ret = cmd_licenses(&o);
	} else if (o.nargs != 1) {
		fprintf(stderr, "rgpuctl slurm %s: name the Slurm job id\n", sub);
		ret = CTL_USAGE;
	} else if (!(ret = resv_name(o.args[0], name, sizeof(name)))) {
		ret = !strcmp(sub, "place")   ? cmd_place(&o, name)
		      : !strcmp(sub, "where") ? cmd_where(&o, name)
					      : cmd_release(&o, name);
	}
	ctl_opts_free(&o);
	return ret;
}
