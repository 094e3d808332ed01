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

#include "admin.h"
#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/auth.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"

#define MAX_SERVERS 256


static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rgpuctl COMMAND [OPTIONS]\n"
		"\n"
		"Commands:\n"
		"  run [--server HOST:PORT] [--key FILE] [--tenant NAME] [--log LEVEL]\n"
		"      [--tls] [--tls-ca FILE] [--tls-name NAME] -- CMD [ARGS...]\n"
		"      Run CMD with its CUDA calls served by the rgpud at HOST:PORT (default\n"
		"      $RGPU_SERVER, else %s). The program is not modified: rgpu's\n"
		"      libcuda.so.1 is put first on LD_LIBRARY_PATH. --key names the tenant key\n"
		"      file (sets RGPU_KEY_FILE; the tenant is --tenant, $RGPU_TENANT, or the\n"
		"      file's name without .key). --log sets RGPU_LOG for the interposer (warn by\n"
		"      default: connection problems and driver calls rgpu does not implement are\n"
		"      reported on stderr). --tls-ca FILE speaks TLS to the server and trusts its\n"
		"      certificate if it chains to a CA in FILE (sets RGPU_TLS_CA); --tls alone\n"
		"      trusts the system's CAs (RGPU_TLS=1); --tls-name NAME is the name the\n"
		"      certificate must carry, if not the server's host (RGPU_TLS_NAME).\n"
		"  status [--server ADDR]... [--cluster FILE] [--admin-key FILE] [--json]\n"
		"      Each server's host, driver, GPUs (memory used by rgpu jobs / total), jobs,\n"
		"      uptime and resume grace period.\n"
		"  jobs [--server ADDR]... [--cluster FILE] [--admin-key FILE] [--json]\n"
		"      Every job: id, client host/pid/program, device memory, objects, bytes in and\n"
		"      out, age and state (running, or disconnected: waiting for its client to\n"
		"      resume).\n"
		"  help\n"
		"\n"
		"ADDR is an rgpud admin address (rgpud --admin, default %s). Without\n"
		"--server or --cluster, $RGPU_ADMIN or the default is asked. A cluster file lists one\n"
		"admin address per line ('#' starts a comment); $RGPU_CLUSTER names one too.\n"
		"--admin-key FILE (also before the command, or $RGPU_ADMIN_KEY_FILE) is the operator\n"
		"key of servers started with rgpud --admin-key; a server that does not prove it\n"
		"holds the same key is not believed. --tls-ca FILE, --tls and --tls-name NAME (also\n"
		"$RGPU_TLS_CA, $RGPU_TLS=1, $RGPU_TLS_NAME) speak TLS to servers started with\n"
		"rgpud --tls-cert, as for run.\n"
		"\n"
		"Exit status: 0 every server answered; 1 some server could not be asked (the others\n"
		"are still shown; with --json each failure is an entry with \"error\"); 2 usage.\n",
		RGPU_DEFAULT_SERVER, RGPU_DEFAULT_ADMIN);
}

/* The interposer's folder: $RGPU_INTERPOSER_DIR, else ../lib/interposer next to this binary. */
static int interposer_dir(char *out, size_t len)
{
	const char *env = getenv("RGPU_INTERPOSER_DIR");
	char exe[PATH_MAX], probe[PATH_MAX + 32];
	struct stat st;
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return -1;
		exe[n] = '\0';
		snprintf(out, len, "%s/../lib/interposer", dirname(exe));
	}
	snprintf(probe, sizeof(probe), "%s/libcuda.so.1", out);
	if (stat(probe, &st)) {
		fprintf(stderr, "rgpuctl: the interposer is not at %s (set RGPU_INTERPOSER_DIR)\n",
			probe);
		return -1;
	}
	return 0;
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
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *server = getenv("RGPU_SERVER"), *log = NULL, *key = NULL, *tenant = NULL;
	const char *tls_ca = NULL, *tls_name = NULL;
	int tls = 0;
	char dir[PATH_MAX], host[256], *ldpath;
	const char *old;
	int c, port;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+s:l:k:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': server = optarg; break;
		case 'l': log = optarg; break;
		case 'k': key = optarg; break;
		case 't': tenant = optarg; break;
		case 'T': tls = 1; break;
		case 'C': tls_ca = optarg; break;
		case 'N': tls_name = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rgpuctl run: no command given (rgpuctl run -- CMD [ARGS...])\n");
		return 2;
	}
	if (!server || !*server)
		server = RGPU_DEFAULT_SERVER;
	if (rgpu_parse_hostport(server, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
		fprintf(stderr, "rgpuctl run: bad server address '%s' (want HOST:PORT)\n", server);
		return 2;
	}
	if (interposer_dir(dir, sizeof(dir)))
		return 1;
	old = getenv("LD_LIBRARY_PATH");
	if (asprintf(&ldpath, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", ldpath, 1);
	setenv("RGPU_SERVER", server, 1);
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

struct targets {
	char *addr[MAX_SERVERS];
	int n;
	int json;
};

/* the operator key: rgpuctl [--admin-key FILE] CMD, CMD --admin-key FILE, $RGPU_ADMIN_KEY_FILE */
static const char *admin_key_file;
static struct rgpu_key admin_key;

static int add_target(struct targets *t, const char *a)
{
	if (t->n == MAX_SERVERS) {
		fprintf(stderr, "rgpuctl: more than %d servers\n", MAX_SERVERS);
		return 2;
	}
	t->addr[t->n] = strdup(a);
	if (!t->addr[t->n])
		return 1;
	t->n++;
	return 0;
}

static int read_cluster(struct targets *t, const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int ret = 0;

	if (!f) {
		fprintf(stderr, "rgpuctl: cannot read the cluster file %s: %s\n", path,
			strerror(errno));
		return 2;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		char *p = line, *e;
		char *hash = strchr(p, '#');
		if (hash)
			*hash = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		for (e = p; *e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r'; e++)
			;
		*e = '\0';
		if (*p)
			ret = add_target(t, p);
	}
	fclose(f);
	if (!ret && t->n == 0) {
		fprintf(stderr, "rgpuctl: the cluster file %s names no server\n", path);
		return 2;
	}
	return ret;
}

static int parse_targets(int argc, char **argv, struct targets *t, const char *cmd)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"cluster", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"admin-key", required_argument, NULL, 'k'},
		{"tls", no_argument, NULL, 'T'},
		{"tls-ca", required_argument, NULL, 'C'},
		{"tls-name", required_argument, NULL, 'N'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *cluster = NULL, *tls_ca = getenv("RGPU_TLS_CA"), *tls_name = getenv("RGPU_TLS_NAME");
	const char *tls_env = getenv("RGPU_TLS");
	int c, ret, tls = tls_env && !strcmp(tls_env, "1");

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:c:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'k': admin_key_file = optarg; break;
		case 'T': tls = 1; break;
		case 'C': tls_ca = optarg; break;
		case 'N': tls_name = optarg; break;
		case 's':
			if ((ret = add_target(t, optarg)))
				return ret;
			break;
		case 'c': cluster = optarg; break;
		case 'j': t->json = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rgpuctl %s: unexpected argument '%s'\n", cmd, argv[optind]);
		return 2;
	}
	if (!admin_key_file)
		admin_key_file = getenv("RGPU_ADMIN_KEY_FILE");
	if (admin_key_file && *admin_key_file) {
		char why[600];
		if (rgpu_key_load(admin_key_file, &admin_key, why, sizeof(why))) {
			fprintf(stderr, "rgpuctl %s: --admin-key: %s\n", cmd, why);
			return 2;
		}
	}
	if (tls || (tls_ca && *tls_ca)) {
		static struct rgpu_tls *ctx;
		char why[800];
		if (rgpu_tls_client_new(tls_ca, &ctx, why, sizeof(why))) {
			fprintf(stderr, "rgpuctl %s: TLS: %s\n", cmd, why);
			return 2;
		}
		ctl_admin_set_tls(ctx, tls_name && *tls_name ? tls_name : NULL);
	}
	if (!cluster && t->n == 0)
		cluster = getenv("RGPU_CLUSTER");
	if (cluster && *cluster && (ret = read_cluster(t, cluster)))
		return ret;
	if (t->n == 0) {
		const char *a = getenv("RGPU_ADMIN");
		return add_target(t, a && *a ? a : RGPU_DEFAULT_ADMIN);
	}
	return 0;
}

static void fmt_bytes(uint64_t b, char *out, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, len, "%llu B", (unsigned long long)b);
	else
		snprintf(out, len, "%.1f %s", v, unit[u]);
}

static void fmt_age(uint64_t s, char *out, size_t len)
{
	if (s < 60)
		snprintf(out, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(out, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(out, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s / 60 % 60));
	else
		snprintf(out, len, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s / 3600 % 24));
}

static void hexstr(const ProtobufCBinaryData *b, char *out, size_t len)
{
	size_t i;
	out[0] = '\0';
	for (i = 0; i < b->len && 2 * i + 2 < len; i++)
		snprintf(out + 2 * i, 3, "%02x", b->data[i]);
}

static const char *basename_of(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : (p ? p : "");
}

static void json_print(json_t *root)
{
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text) {
		puts(text);
		free(text);
	}
	json_decref(root);
}

static int cmd_status(int argc, char **argv)
{
	struct targets t = {0};
	json_t *arr = NULL;
	int ret = parse_targets(argc, argv, &t, "status"), failed = 0;

	if (ret)
		return ret;
	if (t.json)
		arr = json_array();
	else
		printf("%-22s %-16s %-8s %4s %5s %8s %6s\n", "SERVER", "HOST", "DRIVER", "GPUS",
		       "JOBS", "UPTIME", "GRACE");
	for (int i = 0; i < t.n; i++) {
		Rgpu__StatusReply *st = NULL;
		char err[512], drv[32], up[32];
		ret = ctl_admin_call(t.addr[i], RGPU_ADMIN_MSG_STATUS,
				     &rgpu__status_reply__descriptor, &admin_key,
				     (ProtobufCMessage **)&st, err, sizeof(err));
		if (ret) {
			failed = 1;
			if (t.json)
				json_array_append_new(arr, json_pack("{s:s,s:s}", "server", t.addr[i],
								     "error", err));
			else
				fprintf(stderr, "rgpuctl status: %s\n", err);
			continue;
		}
		snprintf(drv, sizeof(drv), "%d.%d", st->driver_version / 1000,
			 st->driver_version % 1000 / 10);
		fmt_age(st->uptime_s, up, sizeof(up));
		if (t.json) {
			json_t *g = json_array();
			for (size_t k = 0; k < st->n_gpus; k++) {
				char uuid[40];
				hexstr(&st->gpus[k]->uuid, uuid, sizeof(uuid));
				json_array_append_new(
					g, json_pack("{s:i,s:s,s:s,s:I,s:I}", "index",
						     (int)st->gpus[k]->index, "name", st->gpus[k]->name,
						     "uuid", uuid, "memory_used",
						     (json_int_t)st->gpus[k]->memory_used, "memory_total",
						     (json_int_t)st->gpus[k]->memory_total));
			}
			json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:o,s:i,s:I,s:i}", "server",
					      t.addr[i], "host", st->server_host, "version",
					      st->version, "listen", st->listen, "driver", st->driver,
					      "driver_version", st->driver_version, "gpus", g, "jobs",
					      (int)st->jobs, "uptime_s", (json_int_t)st->uptime_s,
					      "resume_grace_s", (int)st->resume_grace_s);
			if (st->error && *st->error)
				json_object_set_new(o, "error", json_string(st->error));
			json_array_append_new(arr, o);
		} else {
			printf("%-22s %-16s %-8s %4zu %5u %8s %5us\n", t.addr[i], st->server_host,
			       st->driver_version ? drv : "-", st->n_gpus, st->jobs, up,
			       st->resume_grace_s);
			if (st->error && *st->error)
				printf("  (%s)\n", st->error);
			for (size_t k = 0; k < st->n_gpus; k++) {
				char used[32], total[32];
				fmt_bytes(st->gpus[k]->memory_used, used, sizeof(used));
				fmt_bytes(st->gpus[k]->memory_total, total, sizeof(total));
				printf("  GPU %u  %-28s %10s / %-10s used by rgpu jobs\n",
				       st->gpus[k]->index, st->gpus[k]->name, used, total);
			}
		}
		rgpu__status_reply__free_unpacked(st, NULL);
	}
	if (t.json)
		json_print(json_pack("{s:o}", "servers", arr));
	for (int i = 0; i < t.n; i++)
		free(t.addr[i]);
	return failed;
}

static int cmd_jobs(int argc, char **argv)
{
	struct targets t = {0};
	json_t *arr = NULL, *errs = NULL;
	int ret = parse_targets(argc, argv, &t, "jobs"), failed = 0;
	uint64_t now_ms = rgpu_wall_ms();

	if (ret)
		return ret;
	if (t.json) {
		arr = json_array();
		errs = json_array();
	} else {
		printf("%-22s %-12s %-16s %7s %-16s %10s %5s %10s %10s %7s %s\n", "SERVER", "JOB",
		       "CLIENT", "PID", "PROGRAM", "DEVMEM", "OBJS", "IN", "OUT", "AGE", "STATE");
	}
	for (int i = 0; i < t.n; i++) {
		Rgpu__JobsReply *jr = NULL;
		char err[512];
		ret = ctl_admin_call(t.addr[i], RGPU_ADMIN_MSG_JOBS,
				     &rgpu__jobs_reply__descriptor, &admin_key,
				     (ProtobufCMessage **)&jr, err, sizeof(err));
		if (ret) {
			failed = 1;
			if (t.json)
				json_array_append_new(errs, json_pack("{s:s,s:s}", "server", t.addr[i],
								      "error", err));
			else
				fprintf(stderr, "rgpuctl jobs: %s\n", err);
			continue;
		}
		for (size_t k = 0; k < jr->n_jobs; k++) {
			const Rgpu__JobInfo *j = jr->jobs[k];
			uint64_t age = now_ms > j->started_unix_ms ? (now_ms - j->started_unix_ms) / 1000 : 0;
			char id[40], mem[32], in[32], out[32], ag[32];
			hexstr(&j->job_id, id, sizeof(id));
			if (t.json) {
				json_array_append_new(
					arr, json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:i,s:I,s:i,s:I,s:I,s:I,s:I,s:i,s:s}",
						       "server", t.addr[i], "job", id, "state", j->state,
						       "client_host", j->client_host, "client_pid",
						       j->client_pid, "program", j->client_program,
						       "peer", j->peer, "worker_pid", j->worker_pid,
						       "device_memory", (json_int_t)j->device_memory,
						       "objects", (int)j->objects, "bytes_in",
						       (json_int_t)j->bytes_in, "bytes_out",
						       (json_int_t)j->bytes_out, "started_unix_ms",
						       (json_int_t)j->started_unix_ms, "age_s",
						       (json_int_t)age, "resumes", (int)j->resumes,
						       "tenant", j->tenant ? j->tenant : ""));
				continue;
			}
			fmt_bytes(j->device_memory, mem, sizeof(mem));
			fmt_bytes(j->bytes_in, in, sizeof(in));
			fmt_bytes(j->bytes_out, out, sizeof(out));
			fmt_age(age, ag, sizeof(ag));
			id[12] = '\0';
			printf("%-22s %-12s %-16.16s %7d %-16.16s %10s %5u %10s %10s %7s %s\n",
			       t.addr[i], id, j->client_host, j->client_pid,
			       basename_of(j->client_program), mem, j->objects, in, out, ag,
			       j->state);
		}
		rgpu__jobs_reply__free_unpacked(jr, NULL);
	}
	if (t.json)
		json_print(json_pack("{s:o,s:o}", "jobs", arr, "errors", errs));
	for (int i = 0; i < t.n; i++)
		free(t.addr[i]);
	return failed;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--admin-key") && argc > 3) {
		admin_key_file = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(argv[1], "jobs"))
		return cmd_jobs(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "rgpuctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
