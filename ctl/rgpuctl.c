/*
 * rgpuctl: the command-line tool. `run` starts a program with the interposer in front of the
 * CUDA driver; `status` and `jobs` ask one or more rgpud servers over the admin protocol
 * (ctl/admin.c) and print a table, or JSON with --json.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/auth.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"


static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rgpuctl COMMAND [OPTIONS]\n"
		"\n"
		"Commands:\n"
		"  run [--server HOST:PORT[/DEV,...] ... | --server unix:PATH | --cluster FILE] [--key FILE]\n"
		"      [--tenant NAME] [--log LEVEL] [--tls] [--tls-ca FILE] [--tls-name NAME] -- CMD [ARGS...]\n"
		"      Run CMD with its CUDA calls served by the rgpud at HOST:PORT (default\n"
		"      $RGPU_SERVER, else %s). --server again adds the devices of another\n"
		"      server: CMD sees them all, in order (sets RGPU_SERVERS); /DEV,... chooses\n"
		"      some of a server's devices; unix:PATH, this host's rgpud by its socket\n"
		"      (shared memory). The program is not modified: rgpu's\n"
		"      libcuda.so.1 is put first on LD_LIBRARY_PATH. --key names the tenant key\n"
		"      file (sets RGPU_KEY_FILE; the tenant is --tenant, else the file's name\n"
		"      without .key: $RGPU_TENANT is dropped). --log sets RGPU_LOG for the\n"
		"      interposer (warn by default: connection problems and driver calls rgpu\n"
		"      does not implement are reported on stderr). --tls-ca FILE speaks TLS to\n"
		"      the server and trusts its certificate if it chains to a CA in FILE (sets\n"
		"      RGPU_TLS_CA); --tls alone trusts the system's CAs (RGPU_TLS=1); --tls-name\n"
		"      NAME is the name the certificate must carry, if not the server's host\n"
		"      (RGPU_TLS_NAME).\n"
		"      --cluster FILE [--need MIB] [--state FILE]: in place of --server, the\n"
		"      cluster's server with the most free GPU memory (at least MIB, default\n"
		"      1024) that is not drained; when none has room, one that consolidate\n"
		"      powered off is woken (the cluster file's power-on) and used.\n"
		"  status [--server ADDR]... [--cluster FILE] [--json]\n"
		"      Each server's host, driver, GPUs (memory used by rgpu jobs / total), jobs,\n"
		"      uptime and resume grace period.\n"
		"  jobs [--server ADDR]... [--cluster FILE] [--json]\n"
		"      Every job: id, client host/pid/program, device memory, objects, bytes in and\n"
		"      out, age and state (running, or disconnected: waiting for its client to\n"
		"      resume).\n"
		"  checkpoint JOB [--server ADDR]... [--cluster FILE] [--json] [--progress]\n"
		"      Checkpoint the running job JOB (its id, or 4+ hex digits of it) into the\n"
		"      store of the server that runs it: the job is held only while its changed\n"
		"      memory is copied aside on the GPU. Prints the checkpoint's id, what it\n"
		"      stored and the pause the job saw.\n"
		"  checkpoint verify CKPT [--server ADDR] [--json]\n"
		"      Read every chunk of checkpoint CKPT (its id in that server's store) and\n"
		"      check it against its hash; a damaged one is named.\n"
		"  checkpoint rm CKPT [--server ADDR] [--json]\n"
		"      Remove checkpoint CKPT and the chunks no other checkpoint names.\n"
		"  checkpoints [JOB] [--server ADDR]... [--cluster FILE] [--json]\n"
		"      The checkpoints in each server's store (of JOB only, if given).\n"
		"  restore CKPT --to TARGET [--server ADDR] [--client-address HOST:PORT] [--json]\n"
		"      Rebuild checkpoint CKPT of the server ADDR on the server whose admin address\n"
		"      is TARGET (ADDR itself for a local restore): its chunks that TARGET lacks\n"
		"      are sent there, the job is replayed at the same addresses and waits for its\n"
		"      client, which is sent there when it comes back to ADDR. Refused while the\n"
		"      job still runs on ADDR: use migrate.\n"
		"  migrate JOB --to TARGET [--cold | --rounds N] [--client-address HOST:PORT]\n"
		"          [--json] [--progress]\n"
		"      Move the running job JOB to TARGET. Live (default): its device memory is\n"
		"      copied there in rounds while it runs (each round only what changed), then\n"
		"      it is held for the last changes and sent there. --cold: held from its\n"
		"      checkpoint until it runs on TARGET. Until TARGET holds the job, any failure\n"
		"      leaves the job running where it was. --client-address: where the client\n"
		"      reaches TARGET's job port (default: the address TARGET listens on, with\n"
		"      TARGET's host for a wildcard).\n"
		"  drain SERVER --to TARGET[,TARGET...] [--cold | --rounds N] [--json] [--progress]\n"
		"      Mark SERVER drained (no new session or restored job lands on it, across\n"
		"      restarts), then migrate each of its jobs to the TARGET with the most free\n"
		"      GPU memory that holds it and is not drained. Exit 0 when SERVER serves no\n"
		"      job any more; a job that could not move runs on there (exit 1).\n"
		"  undrain SERVER [--json]\n"
		"      SERVER takes new sessions and jobs again.\n"
		"  consolidate [--dry-run] [--power-off [--settle S]] [--headroom PCT] [--keep N]\n"
		"              [--lock FILE] [--state FILE] [--json]\n"
		"      Pack the cluster's running jobs onto the fewest servers (each kept PCT%%\n"
		"      below its GPU memory, default 10; never onto a drained or powered-off\n"
		"      server; at least N servers stay on, default 1) by live migration, and with\n"
		"      --power-off run the cluster file's power-off command for each server left\n"
		"      without a job (once the clients of the jobs moved off it reached their new\n"
		"      servers, waiting S seconds at most, default 30), recording it in the state\n"
		"      file (default\n"
		"      /var/lib/rgpu/consolidate.json). One run at a time (exit 6 while another\n"
		"      holds the lock, default /run/lock/rgpu-consolidate.lock). --json: a JSON\n"
		"      line per action. For cron.\n"
		"  wake SERVER [--lock FILE] [--state FILE] [--json]\n"
		"      Run the cluster file's power-on command for SERVER; consolidate plans onto\n"
		"      it again.\n"
		"  slurm place JOBID --gpus N [--mem SIZE] | slurm where JOBID | slurm release JOBID\n"
		"  slurm licenses [--write FILE [--reconfigure]]   (also --cluster, --state, --json)\n"
		"      For the Slurm plugin: reserve N GPUs of the cluster (SIZE free on each; MiB,\n"
		"      or 4G) for Slurm job JOBID as reservation slurm-JOBID and print the\n"
		"      RGPU_SERVERS that reaches them (where they are now, if reserved before;\n"
		"      where: only that, exit 4 if none);\n"
		"      end its reservations; count the GPUs the cluster offers as Slurm's rgpu\n"
		"      license ('Licenses=rgpu:N' into FILE when it changed; then scontrol\n"
		"      reconfigure).\n"
		"  help\n"
		"\n"
		"ADDR is an rgpud admin address (rgpud --admin, default %s). Without\n"
		"--server or --cluster, $RGPU_ADMIN or the default is asked. A cluster file lists one\n"
		"admin address per line ('#' starts a comment, but not inside a command), and the\n"
		"settings 'power-off = CMD' and 'power-on = CMD' (run by /bin/sh with $RGPU_SERVER\n"
		"and $RGPU_HOST set); $RGPU_CLUSTER names one too.\n"
		"--admin-key FILE (also before the command, or $RGPU_ADMIN_KEY_FILE) is the operator\n"
		"key of servers started with rgpud --admin-key; a server that does not prove it\n"
		"holds the same key is not believed. --tls-ca FILE, --tls and --tls-name NAME (also\n"
		"$RGPU_TLS_CA, $RGPU_TLS=1, $RGPU_TLS_NAME) speak TLS to servers started with\n"
		"rgpud --tls-cert, as for run. Long operations draw a progress bar on a terminal's\n"
		"stderr (--progress: lines, without a terminal too).\n"
		"\n"
		"Exit status: 0 done; 1 the operation failed (the server said why, on stderr or\n"
		"in the JSON's \"error\"; a job is left as it was); 2 usage; 3 a server could not\n"
		"be reached or did not prove the operator key (status and jobs still show the\n"
		"others); 4 no such job or checkpoint; 5 a checkpoint is damaged; 6 another\n"
		"consolidate holds the lock.\n",
		RGPU_DEFAULT_SERVER, RGPU_DEFAULT_ADMIN);
}

/*
 * The interposer's folder: $RGPU_INTERPOSER_DIR when set (and then that one alone), else
 * ../lib/interposer next to this binary (the build tree), else RGPU_INTERPOSER_INSTALL_DIR,
 * where rgpu-client installs it (off the loader's path). The first that holds libcuda.so.1
 * goes to out; when none does, the error names every place tried.
 */
static int interposer_dir(char *out, size_t len)
{
	const char *env = getenv("RGPU_INTERPOSER_DIR");
	char exe[PATH_MAX], cand[2][PATH_MAX], probe[PATH_MAX + 32];
	int n = 0;
	ssize_t r;
	struct stat st;

	if (env && *env) {
		snprintf(cand[n++], sizeof(cand[0]), "%s", env);
	} else {
		r = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (r > 0) {
			exe[r] = '\0';
			snprintf(cand[n++], sizeof(cand[0]), "%s/../lib/interposer", dirname(exe));
		}
		snprintf(cand[n++], sizeof(cand[0]), "%s", RGPU_INTERPOSER_INSTALL_DIR);
	}
	for (int i = 0; i < n; i++) {
		snprintf(probe, sizeof(probe), "%.*s/libcuda.so.1", (int)sizeof(cand[0]), cand[i]);
		if (stat(probe, &st) == 0) {
			size_t k = strnlen(cand[i], sizeof(cand[0]));
			if (k >= len)
				continue; /* a folder name too long to use */
			memcpy(out, cand[i], k + 1);
			return 0;
		}
	}
	fprintf(stderr, "rgpuctl: rgpu's libcuda.so.1 (the interposer) is not in %s%s%s%s\n",
		cand[0], n > 1 ? " nor in " : "", n > 1 ? cand[1] : "",
		env && *env ? " ($RGPU_INTERPOSER_DIR)" : " (set RGPU_INTERPOSER_DIR)");
	return -1;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"log", required_argument, NULL, 'l'},
		{"key", required_argument, NULL, 'k'},
		{"tenant", required_argument, NULL, 't'},
		{"tls", no_argument, NULL, 'T'},
		{"tls-ca", required_argument, NULL, 'C'},
		{"tls-name", required_argument, NULL, 'N'},
		{"cluster", required_argument, NULL, 'c'},
		{"state", required_argument, NULL, 'S'},
		{"need", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *server = getenv("RGPU_SERVER"), *log = NULL, *key = NULL, *tenant = NULL;
	const char *cluster = NULL, *state = NULL;
	unsigned long long need = 1ull << 30;
	char placed[300];
	const char *tls_ca = NULL, *tls_name = NULL;
	int tls = 0;
	char dir[PATH_MAX], host[256], *ldpath;
	char servers[4096] = "";
	size_t nservers = 0;
	const char *old;
	int c, port;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+s:l:k:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			server = optarg;
			if (strlen(servers) + strlen(optarg) + 2 > sizeof(servers)) {
				fprintf(stderr, "rgpuctl run: too many --server options\n");
				return 2;
			}
			if (nservers++)
				strcat(servers, ",");
			strcat(servers, optarg);
			break;
		case 'l': log = optarg; break;
		case 'k': key = optarg; break;
		case 't': tenant = optarg; break;
		case 'T': tls = 1; break;
		case 'C': tls_ca = optarg; break;
		case 'N': tls_name = optarg; break;
		case 'c': cluster = optarg; break;
		case 'S': state = optarg; break;
		case 'n': {
			char *end;
			errno = 0;
			need = strtoull(optarg, &end, 10);
			if (!*optarg || *end || errno || need > (1ull << 40)) {
				fprintf(stderr, "rgpuctl run: --need takes MiB (0 to 2^40), not '%s'\n",
					optarg);
				return 2;
			}
			need <<= 20;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rgpuctl run: no command given (rgpuctl run -- CMD [ARGS...])\n");
		return 2;
	}
	if (cluster) {
		/* the server with room, a powered-off one woken when none has (consolidate.c) */
		int cmd = optind; /* ctl_place parses options of its own */
		int r = ctl_place(cluster, state, need, placed, sizeof(placed));
		optind = cmd;
		if (r)
			return r;
		server = placed;
	}
	if (!server || !*server)
		server = RGPU_DEFAULT_SERVER;
	if (nservers > 1 && cluster) {
		fprintf(stderr, "rgpuctl run: --cluster places one server; not with --server\n");
		return 2;
	}
	/* unix:PATH: this host's rgpud by its socket (shared memory), one server alone */
	int is_unix = nservers <= 1 && !strncmp(server, "unix:", 5);
	if (is_unix && !server[5]) {
		fprintf(stderr, "rgpuctl run: bad server address '%s' (want unix:PATH)\n", server);
		return 2;
	}
	/* every server's HOST:PORT; a /DEV,... choice is the interposer's to check */
	for (char *list = nservers > 1 ? servers : (char *)server, *p = is_unix ? NULL : list;
	     p && *p;) {
		char one[300], *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		snprintf(one, sizeof(one), "%.*s", (int)MIN(n, sizeof(one) - 1), p);
		p = end ? end + 1 : NULL;
		if (strchr(one, '/'))
			*strchr(one, '/') = '\0';
		else if (one[0] >= '0' && one[0] <= '9' && !strchr(one, ':'))
			continue; /* one more device of the server before */
		if (rgpu_parse_hostport(one, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
			fprintf(stderr, "rgpuctl run: bad server address '%s' (want HOST:PORT)\n",
				one);
			return 2;
		}
	}
	if (interposer_dir(dir, sizeof(dir)))
		return 1;
	old = getenv("LD_LIBRARY_PATH");
	if (asprintf(&ldpath, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", ldpath, 1);
	if (nservers > 1 || (!is_unix && strchr(server, '/'))) {
		setenv("RGPU_SERVERS", nservers > 1 ? servers : server, 1);
		unsetenv("RGPU_SERVER");
	} else {
		setenv("RGPU_SERVER", server, 1);
		unsetenv("RGPU_SERVERS");
	}
	/* the interposer reads the key itself (and checks its file), in the program */
	if (key)
		setenv("RGPU_KEY_FILE", key, 1);
	if (tenant)
		setenv("RGPU_TENANT", tenant, 1);
	else if (key)
		unsetenv("RGPU_TENANT"); /* the file's name says, not an older $RGPU_TENANT */
	/* the interposer reads the CA itself, and touches OpenSSL only then */
	if (tls || tls_ca)
		setenv("RGPU_TLS", "1", 1);
	if (tls_ca)
		setenv("RGPU_TLS_CA", tls_ca, 1);
	if (tls_name)
		setenv("RGPU_TLS_NAME", tls_name, 1);
	if (log)
		setenv("RGPU_LOG", log, 1);
	else if (!getenv("RGPU_LOG"))
		setenv("RGPU_LOG", "warn", 1);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "rgpuctl run: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- status and jobs ---------------------------------------------------------------------- */

static int cmd_status(int argc, char **argv)
{
	struct ctl_opts t;
	json_t *arr = NULL;
	int ret = ctl_parse(argc, argv, "status", "", 0, &t), failed = 0;

	if (ret < 0) {
		usage(stdout);
		return 0;
	}
	if (ret)
		return ret;
	if (t.json)
		arr = json_array();
	else
		printf("%-22s %-16s %-8s %4s %5s %8s %6s\n", "SERVER", "HOST", "DRIVER", "GPUS",
		       "JOBS", "UPTIME", "GRACE");
	for (int i = 0; i < t.nserver; i++) {
		Rgpu__StatusReply *st = NULL;
		char err[512], drv[32], up[32];
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		ret = rgpu_admin_once(&ctl_peer, t.server[i], RGPU_ADMIN_MSG_STATUS, &req.base,
				      &rgpu__status_reply__descriptor, (ProtobufCMessage **)&st, NULL,
				      NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err));
		if (ret) {
			failed = 1;
			if (t.json)
				json_array_append_new(arr, json_pack("{s:s,s:s}", "server", t.server[i],
								     "error", err));
			else
				fprintf(stderr, "rgpuctl status: %s\n", err);
			continue;
		}
		snprintf(drv, sizeof(drv), "%d.%d", st->driver_version / 1000,
			 st->driver_version % 1000 / 10);
		ctl_fmt_age(st->uptime_s, up, sizeof(up));
		if (t.json) {
			json_t *g = json_array();
			for (size_t k = 0; k < st->n_gpus; k++) {
				char uuid[40];
				ctl_hex(&st->gpus[k]->uuid, uuid, sizeof(uuid));
				const Rgpu__GpuInfo *x = st->gpus[k];
				json_t *gj = json_pack("{s:i,s:s,s:s,s:I,s:I,s:I}", "index",
						       (int)x->index, "name", x->name, "uuid", uuid,
						       "memory_used", (json_int_t)x->memory_used,
						       "memory_total", (json_int_t)x->memory_total,
						       "memory_reserved",
						       (json_int_t)x->memory_reserved);
				json_t *tj = NULL;
				if (x->telemetry && *x->telemetry)
					tj = json_pack("{s:s,s:f,s:f,s:i,s:i,s:I,s:i,s:i,s:i}",
							  "telemetry", x->telemetry, "power_w",
							  x->power_w, "power_limit_w", x->power_limit_w,
							  "utilization", (int)x->utilization,
							  "memory_utilization",
							  (int)x->memory_utilization, "device_memory_used",
							  (json_int_t)x->device_memory_used, "sm_clock_mhz",
							  (int)x->sm_clock_mhz, "memory_clock_mhz",
							  (int)x->memory_clock_mhz, "temperature_c",
							  (int)x->temperature_c);
				if (tj) {
					json_object_update(gj, tj);
					json_decref(tj);
				}
				json_array_append_new(g, gj);
			}
			json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:o,s:i,s:I,s:i,s:b}", "server",
					      t.server[i], "host", st->server_host, "version",
					      st->version, "listen", st->listen, "driver", st->driver,
					      "driver_version", st->driver_version, "gpus", g, "jobs",
					      (int)st->jobs, "uptime_s", (json_int_t)st->uptime_s,
					      "resume_grace_s", (int)st->resume_grace_s, "drained",
					      st->drained);
			if (st->error && *st->error)
				json_object_set_new(o, "error", json_string(st->error));
			json_t *rv = json_array();
			for (size_t k = 0; k < st->n_reservations; k++) {
				const Rgpu__Reservation *r = st->reservations[k];
				json_array_append_new(rv, json_pack("{s:s,s:i,s:I,s:I}", "name", r->name,
								    "gpu", (int)r->gpu, "bytes",
								    (json_int_t)r->bytes,
								    "created_unix_ms",
								    (json_int_t)r->created_unix_ms));
			}
			json_object_set_new(o, "reservations", rv);
			json_array_append_new(arr, o);
		} else {
			printf("%-22s %-16s %-8s %4zu %5u %8s %5us\n", t.server[i], st->server_host,
			       st->driver_version ? drv : "-", st->n_gpus, st->jobs, up,
			       st->resume_grace_s);
			if (st->error && *st->error)
				printf("  (%s)\n", st->error);
			if (st->drained)
				printf("  drained: no new sessions or restored jobs (rgpuctl undrain)\n");
			for (size_t k = 0; k < st->n_gpus; k++) {
				char used[32], total[32];
				ctl_fmt_bytes(st->gpus[k]->memory_used, used, sizeof(used));
				ctl_fmt_bytes(st->gpus[k]->memory_total, total, sizeof(total));
				const Rgpu__GpuInfo *x = st->gpus[k];
				printf("  GPU %u  %-28s %10s / %-10s used by rgpu jobs\n", x->index,
				       x->name, used, total);
				if (x->telemetry && *x->telemetry)
					printf("         %.1f W of %.0f W, %u%% busy, SM %u MHz, memory %u "
					       "MHz, %u C (%s)\n",
					       x->power_w, x->power_limit_w, x->utilization,
					       x->sm_clock_mhz, x->memory_clock_mhz, x->temperature_c,
					       !strcmp(x->telemetry, "nvml") ? "NVML" : "modelled");
			}
			for (size_t k = 0; k < st->n_reservations; k++) {
				const Rgpu__Reservation *r = st->reservations[k];
				char sz[32], rs[32];
				ctl_fmt_bytes(r->bytes, sz, sizeof(sz));
				ctl_fmt_bytes(r->gpu < st->n_gpus ? st->gpus[r->gpu]->memory_reserved : 0,
					      rs, sizeof(rs));
				printf("  GPU %u  reserved for %s (%s asked; %s of the GPU's reservations "
				       "not mapped yet)\n",
				       r->gpu, r->name, sz, rs);
			}
		}
		rgpu__status_reply__free_unpacked(st, NULL);
	}
	if (t.json)
		ctl_json_print(json_pack("{s:o}", "servers", arr));
	ctl_opts_free(&t);
	return failed ? CTL_UNREACHABLE : CTL_OK;
}

static int cmd_jobs(int argc, char **argv)
{
	struct ctl_opts t;
	json_t *arr = NULL, *errs = NULL;
	int ret = ctl_parse(argc, argv, "jobs", "", 0, &t), failed = 0;
	uint64_t now_ms = rgpu_wall_ms();

	if (ret < 0) {
		usage(stdout);
		return 0;
	}
	if (ret)
		return ret;
	if (t.json) {
		arr = json_array();
		errs = json_array();
	} else {
		printf("%-22s %-12s %-16s %7s %-16s %10s %5s %10s %10s %7s %s\n", "SERVER", "JOB",
		       "CLIENT", "PID", "PROGRAM", "DEVMEM", "OBJS", "IN", "OUT", "AGE", "STATE LABEL");
	}
	for (int i = 0; i < t.nserver; i++) {
		Rgpu__JobsReply *jr = NULL;
		char err[512];
		Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
		ret = rgpu_admin_once(&ctl_peer, t.server[i], RGPU_ADMIN_MSG_JOBS, &req.base,
				      &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL,
				      NULL, RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err));
		if (ret) {
			failed = 1;
			if (t.json)
				json_array_append_new(errs, json_pack("{s:s,s:s}", "server", t.server[i],
								      "error", err));
			else
				fprintf(stderr, "rgpuctl jobs: %s\n", err);
			continue;
		}
		for (size_t k = 0; k < jr->n_jobs; k++) {
			const Rgpu__JobInfo *j = jr->jobs[k];
			uint64_t age = now_ms > j->started_unix_ms ? (now_ms - j->started_unix_ms) / 1000 : 0;
			char id[40], mem[32], in[32], out[32], ag[32];
			ctl_hex(&j->job_id, id, sizeof(id));
			if (t.json) {
				json_array_append_new(
					arr, json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:i,s:I,s:i,s:I,s:I,s:I,s:I,s:i,s:s,s:f}",
						       "server", t.server[i], "job", id, "state", j->state,
						       "client_host", j->client_host, "client_pid",
						       j->client_pid, "program", j->client_program,
						       "peer", j->peer, "worker_pid", j->worker_pid,
						       "device_memory", (json_int_t)j->device_memory,
						       "objects", (int)j->objects, "bytes_in",
						       (json_int_t)j->bytes_in, "bytes_out",
						       (json_int_t)j->bytes_out, "started_unix_ms",
						       (json_int_t)j->started_unix_ms, "age_s",
						       (json_int_t)age, "resumes", (int)j->resumes,
						       "tenant", j->tenant ? j->tenant : "",
						       "in_bytes_per_s", j->in_bytes_per_s));
				json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
						    "label", json_string(j->label ? j->label : ""));
				continue;
			}
			ctl_fmt_bytes(j->device_memory, mem, sizeof(mem));
			ctl_fmt_bytes(j->bytes_in, in, sizeof(in));
			ctl_fmt_bytes(j->bytes_out, out, sizeof(out));
			ctl_fmt_age(age, ag, sizeof(ag));
			id[12] = '\0';
			printf("%-22s %-12s %-16.16s %7d %-16.16s %10s %5u %10s %10s %7s %s%s%s\n",
			       t.server[i], id, j->client_host, j->client_pid,
			       ctl_basename(j->client_program), mem, j->objects, in, out, ag,
			       j->state, j->label && *j->label ? " " : "", j->label ? j->label : "");
		}
		rgpu__jobs_reply__free_unpacked(jr, NULL);
	}
	if (t.json)
		ctl_json_print(json_pack("{s:o,s:o}", "jobs", arr, "errors", errs));
	ctl_opts_free(&t);
	return failed ? CTL_UNREACHABLE : CTL_OK;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--admin-key") && argc > 3) {
		ctl_admin_key_file = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(argv[1], "jobs"))
		return cmd_jobs(argc - 1, argv + 1);
	if (!strcmp(argv[1], "checkpoint"))
		return ctl_cmd_checkpoint(argc - 1, argv + 1);
	if (!strcmp(argv[1], "checkpoints"))
		return ctl_cmd_checkpoints(argc - 1, argv + 1);
	if (!strcmp(argv[1], "restore"))
		return ctl_cmd_restore(argc - 1, argv + 1);
	if (!strcmp(argv[1], "migrate"))
		return ctl_cmd_migrate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "drain"))
		return ctl_cmd_drain(argc - 1, argv + 1, 1);
	if (!strcmp(argv[1], "undrain"))
		return ctl_cmd_drain(argc - 1, argv + 1, 0);
	if (!strcmp(argv[1], "consolidate"))
		return ctl_cmd_consolidate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "slurm"))
		return ctl_cmd_slurm(argc - 1, argv + 1);
	if (!strcmp(argv[1], "wake"))
		return ctl_cmd_wake(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "rgpuctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
