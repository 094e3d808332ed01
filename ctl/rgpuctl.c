/*
 * rgpuctl: the command-line tool. Today it has one command, `run`, which starts a program with
 * the interposer in front of the CUDA driver; the operator commands (status, checkpoint,
 * migrate, drain, consolidate) come with the admin protocol.
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

#include "rgpu/transport.h"
#include "rgpu/util.h"


static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rgpuctl COMMAND [OPTIONS]\n"
		"\n"
		"Commands:\n"
		"  run [--server HOST:PORT] [--log LEVEL] -- CMD [ARGS...]\n"
		"      Run CMD with its CUDA calls served by the rgpud at HOST:PORT (default\n"
		"      $RGPU_SERVER, else %s). The program is not modified: rgpu's\n"
		"      libcuda.so.1 is put first on LD_LIBRARY_PATH. --log sets RGPU_LOG for the\n"
		"      interposer (warn by default: connection problems and driver calls rgpu\n"
		"      does not implement are reported on stderr).\n"
		"  help\n",
		RGPU_DEFAULT_SERVER);
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
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *server = getenv("RGPU_SERVER"), *log = NULL;
	char dir[PATH_MAX], host[256], *ldpath;
	const char *old;
	int c, port;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+s:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': server = optarg; break;
		case 'l': log = optarg; break;
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
	if (log)
		setenv("RGPU_LOG", log, 1);
	else if (!getenv("RGPU_LOG"))
		setenv("RGPU_LOG", "warn", 1);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "rgpuctl run: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "rgpuctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
