/*
 * rgpud: the rgpu GPU server. A thin main() over the supervisor (supervisor.c), or over the
 * replay of a state log (replay.c) with --replay.
 */
#define LOG_PREFIX ""
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "rgpu/auth.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rgpud [OPTIONS]\n"
		"       rgpud --replay FILE.stlog [--driver PATH] [--state-dir DIR]\n"
		"Serve this machine's GPUs to rgpu clients: one worker process per session.\n"
		"\n"
		"      --config FILE       read options and tenant limits from FILE (default\n"
		"                          " SRV_CONFIG_FILE " when it exists; 'none': no file);\n"
		"                          options on the command line override it\n"
		"  -l, --listen HOST:PORT  address to listen on (default " RGPU_DEFAULT_SERVER "; loopback\n"
		"                          only unless you name another address; PORT 0 picks one)\n"
		"      --socket PATH       the Unix-domain socket clients on this host use, moving\n"
		"                          to shared memory (default STATE_DIR/rgpud-PORT.sock;\n"
		"                          'none': TCP only)\n"
		"  -k, --keys DIR          authenticate clients: one key per tenant, DIR/TENANT.key\n"
		"                          (32+ random bytes, hex or raw, mode 0600); clients\n"
		"                          without a right key are refused before any CUDA call\n"
		"      --admin-key FILE    every admin request must prove this operator key\n"
		"                          (same format); without it the admin port stays on loopback\n"
		"      --tls-cert FILE     TLS 1.3 on the client and admin ports with this certificate\n"
		"      --tls-key FILE      (PEM chain, the server's first) and its private key (PEM);\n"
		"                          given, TLS is on; beyond loopback it is required\n"
		"      --tls               require TLS (an error without --tls-cert/--tls-key)\n"
		"      --no-tls            plaintext, even with a certificate configured nowhere else:\n"
		"                          on loopback, or beyond it with --insecure\n"
		"      --insecure          allow listening beyond loopback without --keys (or, for\n"
		"                          --admin, without --admin-key), or without TLS\n"
		"  -d, --driver PATH       CUDA driver library to load (default libcuda.so.1)\n"
		"  -s, --data DIR          the server's data: the store (DIR/store), which holds the\n"
		"                          checkpoints and the module cache; default /var/lib/rgpu,\n"
		"                          or $XDG_CACHE_HOME/rgpu when that is not writable\n"
		"                          (--state-dir is the same option)\n"
		"      --barrier-timeout SECONDS  how long a checkpoint waits for the job to reach a\n"
		"                          barrier between two calls (default 30)\n"
		"      --peer-tls-ca FILE  the CA that other servers' certificates chain to, for a\n"
		"                          migration's target (with TLS; default: the system's CAs)\n"
		"      --module-cache-bytes SIZE  bound of the module cache: least recently used\n"
		"                          images are evicted beyond it (default 1G, at most 1T;\n"
		"                          0: no cache, every image is shipped)\n"
		"  -w, --window BASE:SIZE  device address window (default 0x%llx:16T); must be the\n"
		"                          same on every server a job may move between\n"
		"      --staging N         pinned 16 MiB staging buffers per session (default 4)\n"
		"      --port-file PATH    write the port listened on to PATH\n"
		"      --admin HOST:PORT   admin protocol address for rgpuctl (default " RGPU_DEFAULT_ADMIN ";\n"
		"                          'none' turns it off)\n"
		"      --admin-port-file PATH  write the admin port to PATH\n"
		"      --metrics HOST:PORT  serve Prometheus metrics (GPU power, utilisation, memory,\n"
		"                          clocks; jobs) at http://HOST:PORT/metrics (default: off)\n"
		"      --metrics-port-file PATH  write the metrics port to PATH\n"
		"      --resume-grace SECONDS  keep a job this long after its client's link breaks,\n"
		"                          waiting for it to resume (default 60; 0: free at once)\n"
		"      --hello-timeout SECONDS  a new connection's handshake must arrive whole within\n"
		"                          this of its accept, else it is closed (default 30)\n"
		"      --frame-timeout SECONDS  every frame must arrive whole within this of its\n"
		"                          first byte, else the link is closed; a migration\n"
		"                          target taking no byte, or a live migration's target\n"
		"                          saying nothing, this long fails it (default 30)\n"
		"      --max-queued SIZE   bytes of frames a session may queue ahead of its GPU work;\n"
		"                          past it, its worker stops reading (default 256M)\n"
		"      --max-sessions N    serve at most N sessions at once; more are refused with\n"
		"                          CUDA_ERROR_DEVICE_UNAVAILABLE (default 64; 0: no limit)\n"
		"      --idle-timeout SECONDS  end a session that sent no frame and ran nothing for\n"
		"                          this long, freeing its job (default 0: never)\n"
		"      --replay FILE       rebuild the job recorded in the state log FILE (a\n"
		"                          RGPU_STATE_DUMP .stlog, with its captured graphs from\n"
		"                          FILE's .journals beside it, and its device numbering from\n"
		"                          its .devices if there) on a fresh worker, with images\n"
		"                          from the module cache of --state-dir; check that every id\n"
		"                          and address came out the same and print one line. Exit\n"
		"                          status 0: equal; 3: equal but for module globals\n"
		"                          the driver placed elsewhere (each named; a migration of the\n"
		"                          job would abort); 1: it failed, and why\n"
		"  -v, --log-level LEVEL   error, warn, info (default; warn with --replay) or debug\n"
		"      --log-file PATH     log to PATH instead of stderr\n"
		"  -h, --help              this text\n"
		"      --version           print the version\n",
		RGPU_WINDOW_BASE);
}

static int parse_window(const char *s, struct srv_config *cfg)
{
	char buf[128];
	char *colon;
	uint64_t base, size;

	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (!colon)
		return -1;
	*colon = '\0';
	if (rgpu_parse_size(buf, &base) || rgpu_parse_size(colon + 1, &size))
		return -1;
	if (base % RGPU_GRANULE || size % RGPU_GRANULE || size == 0)
		return -1;
	cfg->window_base = base;
	cfg->window_size = size;
	return 0;
}

/* A whole number in [lo, hi] for option opt (unit: for the message), or a message and -1. */
static int parse_int(const char *opt, const char *s, int lo, int hi, const char *unit, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end || v < lo || v > hi) {
		fprintf(stderr, "rgpud: --%s wants %d..%d %s\n", opt, lo, hi, unit);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static const char *default_state_dir(void)
{
	static char path[4096];
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (access("/var/lib/rgpu", W_OK) == 0 || (access("/var/lib", W_OK) == 0 && getuid() == 0))
		return "/var/lib/rgpu";
	if (x && *x)
		snprintf(path, sizeof(path), "%s/rgpu", x);
	else
		snprintf(path, sizeof(path), "%s/.cache/rgpu", home ? home : "/tmp");
	return path;
}

/* "FILE:LINE" of the configuration file's option being parsed; NULL: the command line's */
static const char *conf_from;
static char **config_argv; /* read_config's argument vector, freed by main */
static struct srv_conf conf;

/*
 * --config FILE, or the default file when it exists: its [server] options go before the
 * command line's in *argv, so that one parser reads both and the command line wins; its limits
 * stay in conf. Returns 0, or 2 (said why).
 */
static int read_config(int *argc, char ***argv, const struct option *opts, const char *shortopts)
{
	const char *path = NULL;
	char err[1024], **nargv;
	int c, ret;

	opterr = 0; /* only --config is looked for here; the real pass says what is wrong */
	while ((c = getopt_long(*argc, *argv, shortopts, opts, NULL)) != -1)
		if (c == 'c')
			path = optarg;
	opterr = 1;
	optind = 0; /* the next getopt_long() starts afresh */
	if (path && !strcmp(path, "none"))
		return 0;
	ret = srv_conf_load(path ? path : SRV_CONFIG_FILE, opts, &conf, err, sizeof(err));
	if (ret == RGPU_ENOTFOUND && !path)
		return 0; /* no file where the default is: the built-in defaults */
	if (ret) {
		fprintf(stderr, "rgpud: %s\n", err);
		return 2;
	}
	/* the daemon's argument vector from now on (main frees it) */
	nargv = config_argv = calloc((size_t)(*argc + conf.argc + 1), sizeof(*nargv));
	if (!nargv) {
		fprintf(stderr, "rgpud: out of memory\n");
		return 2;
	}
	nargv[0] = (*argv)[0];
	if (conf.argc) /* (a file with no [server] options has no vector) */
		memcpy(nargv + 1, conf.argv, (size_t)conf.argc * sizeof(*nargv));
	memcpy(nargv + 1 + conf.argc, *argv + 1, (size_t)(*argc - 1) * sizeof(*nargv));
	*argc += conf.argc;
	*argv = nargv;
	return 0;
}

static int rgpud(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"socket", required_argument, NULL, 'U'},
		{"driver", required_argument, NULL, 'd'},
		{"state-dir", required_argument, NULL, 's'},
		{"data", required_argument, NULL, 's'},
		{"peer-tls-ca", required_argument, NULL, 'X'},
		{"barrier-timeout", required_argument, NULL, 'B'},
		{"window", required_argument, NULL, 'w'},
		{"config", required_argument, NULL, 'c'},
		{"staging", required_argument, NULL, 'S'},
		{"port-file", required_argument, NULL, 'P'},
		{"admin", required_argument, NULL, 'A'},
		{"admin-port-file", required_argument, NULL, 'a'},
		{"metrics", required_argument, NULL, 'm'},
		{"metrics-port-file", required_argument, NULL, 'p'},
		{"resume-grace", required_argument, NULL, 'g'},
		{"hello-timeout", required_argument, NULL, 'H'},
		{"frame-timeout", required_argument, NULL, 'F'},
		{"max-queued", required_argument, NULL, 'Q'},
		{"max-sessions", required_argument, NULL, 'M'},
		{"idle-timeout", required_argument, NULL, 'I'},
		{"log-level", required_argument, NULL, 'v'},
		{"log-file", required_argument, NULL, 'L'},
		{"replay", required_argument, NULL, 'R'},
		{"module-cache-bytes", required_argument, NULL, 'C'},
		{"keys", required_argument, NULL, 'k'},
		{"insecure", no_argument, NULL, 'N'},
		{"admin-key", required_argument, NULL, 'K'},
		{"tls-cert", required_argument, NULL, 'T'},
		{"tls-key", required_argument, NULL, 'Y'},
		{"tls", no_argument, NULL, 'E'},
		{"no-tls", no_argument, NULL, 'O'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct srv_config cfg = {
		.listen = RGPU_DEFAULT_SERVER,
		.window_base = RGPU_WINDOW_BASE,
		.window_size = RGPU_WINDOW_SIZE,
		.staging_buffers = 4,
		.admin = RGPU_DEFAULT_ADMIN,
		.resume_grace_s = 60,
		.module_cache_bytes = SRV_MODULE_CACHE_BYTES,
		.hello_timeout_s = 30,
		.frame_timeout_s = 30,
		.max_queued = SRV_MAX_QUEUED_DEFAULT,
		.max_sessions = 64,
		.barrier_timeout_s = 30,
	};
	const char *replay = NULL, *admin_key_file = NULL;
	static struct rgpu_key admin_key;
	int c, lvl, level_set = 0, tls_mode = 0; /* --tls: 1, --no-tls: -1 */

	rgpu_log_set_tag("rgpud");
	srv_limits_init(&cfg.tenant_defaults);
	if (read_config(&argc, &argv, opts, "l:d:s:w:v:k:h"))
		return 2;
	while ((c = getopt_long(argc, argv, "l:d:s:w:v:k:h", opts, NULL)) != -1) {
		conf_from = optind - 2 >= 0 && optind - 2 < conf.argc ? conf.where[optind - 2] : NULL;
		switch (c) {
		case 'l': cfg.listen = optarg; break;
		case 'U': cfg.socket = optarg; break;
		case 'd': cfg.driver = optarg; break;
		case 's': cfg.state_dir = optarg; break;
		case 'w':
			if (parse_window(optarg, &cfg)) {
				fprintf(stderr, "rgpud: bad --window '%s' (want BASE:SIZE, both "
						"multiples of 2 MiB)\n", optarg);
				return 2;
			}
			break;
		case 'S':
			cfg.staging_buffers = atoi(optarg);
			if (cfg.staging_buffers < 2 || cfg.staging_buffers > 1024) {
				fprintf(stderr, "rgpud: --staging wants 2..1024\n");
				return 2;
			}
			break;
		case 'P': cfg.port_file = optarg; break;
		case 'A': cfg.admin = strcmp(optarg, "none") ? optarg : NULL; break;
		case 'a': cfg.admin_port_file = optarg; break;
		case 'm': cfg.metrics = optarg; break;
		case 'p': cfg.metrics_port_file = optarg; break;
		case 'g':
			if (parse_int("resume-grace", optarg, 0, 86400, "seconds", &cfg.resume_grace_s))
				return 2;
			break;
		case 'H':
			if (parse_int("hello-timeout", optarg, 1, 3600, "seconds", &cfg.hello_timeout_s))
				return 2;
			break;
		case 'F':
			if (parse_int("frame-timeout", optarg, 1, 3600, "seconds", &cfg.frame_timeout_s))
				return 2;
			break;
		case 'M':
			if (parse_int("max-sessions", optarg, 0, 100000, "sessions (0: no limit)",
				      &cfg.max_sessions))
				return 2;
			break;
		case 'I':
			if (parse_int("idle-timeout", optarg, 0, 31 * 86400, "seconds", &cfg.idle_timeout_s))
				return 2;
			break;
		case 'Q':
			if (rgpu_parse_size(optarg, &cfg.max_queued) || cfg.max_queued < (1u << 20)) {
				fprintf(stderr, "rgpud: --max-queued wants a size of at least 1M\n");
				return 2;
			}
			break;
		case 'v':
			lvl = rgpu_log_parse_level(optarg);
			if (lvl < 0) {
				fprintf(stderr, "rgpud: bad --log-level '%s'\n", optarg);
				return 2;
			}
			rgpu_log_set_level(lvl);
			level_set = 1;
			break;
		case 'L':
			if (rgpu_log_open(optarg)) {
				perror(optarg);
				return 1;
			}
			break;
		case 'R': replay = optarg; break;
		case 'c': break; /* read_config() */
		case 'k': cfg.keys_dir = optarg; break;
		case 'N': cfg.insecure = 1; break;
		case 'X': cfg.peer_tls_ca = optarg; break;
		case 'B':
			if (parse_int("barrier-timeout", optarg, 1, 3600, "seconds",
				      &cfg.barrier_timeout_s))
				return 2;
			break;
		case 'K': admin_key_file = optarg; break;
		case 'T': cfg.tls_cert = optarg; break;
		case 'Y': cfg.tls_key = optarg; break;
		case 'E': tls_mode = 1; break;
		case 'O': tls_mode = -1; break;
		case 'C':
			if (rgpu_parse_size(optarg, &cfg.module_cache_bytes) ||
			    cfg.module_cache_bytes > SRV_MODULE_CACHE_MAX) {
				fprintf(stderr, "rgpud: --module-cache-bytes wants 0..1T\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("rgpud %s (protocol %d)\n", RGPU_VERSION, RGPU_PROTO_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	conf_from = NULL;
	if (optind < argc) {
		fprintf(stderr, "rgpud: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	cfg.tenant_defaults = conf.defaults;
	cfg.tenants = conf.tenants;
	cfg.ntenants = conf.ntenants;
	if (!cfg.state_dir)
		cfg.state_dir = default_state_dir();
	srv_layout_say(cfg.window_base, cfg.window_size);
	if (replay) {
		/* one line of result on stdout; the handlers' progress only when asked for */
		if (!level_set)
			rgpu_log_set_level(RGPU_LOG_WARN);
		return srv_replay_file(&cfg, replay);
	}
	if (cfg.keys_dir) {
		int n = srv_keys_check(cfg.keys_dir);
		if (n < 0)
			return 2;
		pr_info("authentication: %d tenant key(s) in %s", n, cfg.keys_dir);
	}
	for (size_t i = 0; i < cfg.ntenants; i++) {
		char key[4200];
		snprintf(key, sizeof(key), "%s/%s.key", cfg.keys_dir ? cfg.keys_dir : "",
			 cfg.tenants[i].name);
		/* tenants come and go with their key files: a section may wait for its key */
		if (!cfg.keys_dir || access(key, F_OK))
			pr_warn("the configuration's [tenant %s] has no key %s: its limits apply once "
				"it has one", cfg.tenants[i].name, cfg.keys_dir ? key : "(no --keys)");
	}
	if (admin_key_file) {
		char why[600];
		if (rgpu_key_load(admin_key_file, &admin_key, why, sizeof(why))) {
			pr_err("--admin-key: %s", why);
			return 2;
		}
		cfg.admin_key = &admin_key;
	}
	/*
	 * TLS: on when a certificate is given (unless --no-tls); --tls insists on it. Whether a
	 * port beyond loopback may go without is the supervisor's check (listen_on).
	 */
	if (!cfg.tls_cert != !cfg.tls_key) {
		pr_err("--tls-cert and --tls-key go together: give both (the certificate and its "
		       "private key, PEM)");
		return 2;
	}
	if (tls_mode < 0 && cfg.tls_cert) {
		pr_err("--no-tls contradicts --tls-cert/--tls-key: give one or the other");
		return 2;
	}
	if (tls_mode > 0 && !cfg.tls_cert) {
		pr_err("--tls needs a certificate: give --tls-cert FILE --tls-key FILE");
		return 2;
	}
	if (cfg.tls_cert) {
		char why[800];
		if (rgpu_tls_server_new(cfg.tls_cert, cfg.tls_key, &cfg.tls, why, sizeof(why))) {
			pr_err("TLS: %s", why);
			return 2;
		}
		pr_info("TLS 1.3 on the client and admin ports (certificate %s)", cfg.tls_cert);
	}
	return srv_supervise(&cfg);
}

int main(int argc, char **argv)
{
	srv_layout_reexec(argv); /* returns in the second start, or where it cannot */
	int rc = rgpud(argc, argv);

	free(config_argv);
	/* the option's own message named it; a value from the configuration file needs its place */
	if (rc && conf_from)
		fprintf(stderr, "rgpud: (that option is set in %s)\n", conf_from);
	return rc;
}
