/*
 * rgpud's configuration file (server/config.c): a good file gives exactly the [server]
 * arguments and tenant limits it says, with [tenant NAME] over [defaults] over the built-in
 * defaults; every kind of error is refused with its exact message and line.
 */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "srv.h"

/* a few of rgpud's options, as main.c declares them */
static const struct option opts[] = {
    {"listen", required_argument, NULL, 'l'},
    {"max-sessions", required_argument, NULL, 'M'},
    {"idle-timeout", required_argument, NULL, 'I'},
    {"insecure", no_argument, NULL, 'N'},
    {"config", required_argument, NULL, 'c'},
    {"replay", required_argument, NULL, 'R'},
    {0},
};

static char path[64];

static void write_file(const char *text)
{
	FILE *f;
	snprintf(path, sizeof(path), "/tmp/rgpu-config-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void good(void **state)
{
	struct srv_conf c;
	struct srv_config cfg = {.max_queued = 256u << 20, .idle_timeout_s = 600};
	struct srv_limits l;
	char err[600] = "";

	(void)state;
	write_file("; rgpud.conf\n"
		   "# comments of both kinds\n"
		   "[server]\n"
		   "listen = 0.0.0.0:7070\n"
		   "max-sessions = 8   ; inline comment\n"
		   "insecure = true\n"
		   "\n"
		   "[defaults]\n"
		   "memory = 1G\n"
		   "idle_timeout = 30\n"
		   "[tenant alice]\n"
		   "memory = 64M\n"
		   "sessions = 2\n"
		   "queued = 8M\n"
		   "module_cache = 512K\n"
		   "[ tenant  bob ]\n"
		   "sessions = unlimited\n"
		   "memory = unlimited\n"
		   "idle_timeout = 0\n"
		   "[server]\n"
		   "insecure = off\n"
		   "[tenant alice]\n"
		   "sessions = 3\n");
	assert_int_equal(srv_conf_load(path, opts, &c, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(c.argc, 3);
	assert_string_equal(c.argv[0], "--listen=0.0.0.0:7070");
	assert_string_equal(c.argv[1], "--max-sessions=8");
	assert_string_equal(c.argv[2], "--insecure");
	assert_null(c.argv[3]);
	char want[96];
	snprintf(want, sizeof(want), "%s:5", path);
	assert_string_equal(c.where[1], want);
	assert_int_equal(c.ntenants, 2);

	cfg.tenant_defaults = c.defaults;
	cfg.tenants = c.tenants;
	cfg.ntenants = c.ntenants;
	/* alice: her own over [defaults]; a second [tenant alice] adds to the first */
	srv_limits_for(&cfg, "alice", &l);
	assert_int_equal(l.memory, 64ull << 20);
	assert_int_equal(l.sessions, 3);
	assert_int_equal(l.queued, 8ull << 20);
	assert_int_equal(l.module_cache, 512ull << 10);
	assert_int_equal(l.idle_timeout_s, 30);
	/* bob: unlimited where [defaults] has a limit; idle_timeout 0 (never) over its 30 */
	srv_limits_for(&cfg, "bob", &l);
	assert_int_equal(l.memory, SRV_UNLIMITED);
	assert_int_equal(l.sessions, SRV_UNLIMITED);
	assert_int_equal(l.queued, 256ull << 20);
	assert_int_equal(l.module_cache, SRV_UNLIMITED);
	assert_int_equal(l.idle_timeout_s, 0);
	/* a tenant without a section, and the anonymous one: [defaults], then the server's */
	srv_limits_for(&cfg, "carol", &l);
	assert_int_equal(l.memory, 1ull << 30);
	assert_int_equal(l.sessions, SRV_UNLIMITED);
	assert_int_equal(l.queued, 256ull << 20);
	assert_int_equal(l.idle_timeout_s, 30);
	srv_limits_for(&cfg, "", &l);
	assert_int_equal(l.memory, 1ull << 30);
	srv_conf_free(&c);
	unlink(path);

	/* no file at all: the built-in defaults, the server's queued and idle timeout */
	cfg.tenant_defaults = (struct srv_limits){0};
	cfg.ntenants = 0;
	srv_limits_init(&cfg.tenant_defaults);
	srv_limits_for(&cfg, "alice", &l);
	assert_int_equal(l.memory, SRV_UNLIMITED);
	assert_int_equal(l.sessions, SRV_UNLIMITED);
	assert_int_equal(l.module_cache, SRV_UNLIMITED);
	assert_int_equal(l.queued, 256ull << 20);
	assert_int_equal(l.idle_timeout_s, 600);
}

/* text is refused with "PATH:LINE: msg" */
static void refused(const char *text, int line, const char *msg)
{
	struct srv_conf c;
	char err[700], want[700];

	write_file(text);
	assert_int_equal(srv_conf_load(path, opts, &c, err, sizeof(err)), RGPU_EINVAL);
	snprintf(want, sizeof(want), "%s:%d: %s", path, line, msg);
	assert_string_equal(err, want);
	assert_int_equal(c.argc, 0);
	assert_null(c.tenants);
	unlink(path);
}

static void errors(void **state)
{
	char longline[400];

	(void)state;
	refused("[server]\nlisten = a:1\n[frobnicate]\n", 3,
		"unknown section [frobnicate] (there are [server], [defaults] and [tenant NAME])");
	/* an unknown section without keys, at the end */
	refused("[server]\n\n[tenants]\n", 3,
		"unknown section [tenants] (there are [server], [defaults] and [tenant NAME])");
	refused("[server extra]\n", 1,
		"unknown section [server extra] (there are [server], [defaults] and [tenant "
		"NAME])");
	refused("[server]\nmax-session = 3\n", 2,
		"[server]: unknown option 'max-session' (the long options of rgpud --help, without "
		"their dashes)");
	refused("[server]\nreplay = x.stlog\n", 2, "[server]: 'replay' is a command-line option only");
	refused("[server]\nconfig = /etc/x\n", 2, "[server]: 'config' is a command-line option only");
	refused("[server]\ninsecure = maybe\n", 2, "[server] insecure: 'maybe' is not true or false");
	refused("[server]\nlisten =\n", 2, "[server] listen: no value");
	refused("\n[tenant alice]\nmemory = 64Q\n", 3,
		"[tenant alice] memory: '64Q' is not a size (bytes, or a number with K, M, G or T; "
		"or unlimited)");
	refused("[defaults]\nmemory = -5\n", 2,
		"[defaults] memory: '-5' is not a size (bytes, or a number with K, M, G or T; or "
		"unlimited)");
	refused("[defaults]\nqueued = 1K\n", 2,
		"[defaults] queued: '1K' is not a size of at least 1M (bytes, or a number with K, M, "
		"G or T)");
	refused("[defaults]\nqueued = unlimited\n", 2,
		"[defaults] queued: 'unlimited' is not a size of at least 1M (bytes, or a number "
		"with K, M, G or T)");
	refused("[tenant a]\nsessions = -1\n", 2,
		"[tenant a] sessions: '-1' is not a number of sessions from 0 to 100000, or "
		"unlimited");
	refused("[tenant a]\nsessions = 100001\n", 2,
		"[tenant a] sessions: '100001' is not a number of sessions from 0 to 100000, or "
		"unlimited");
	refused("[tenant a]\nidle_timeout = 5m\n", 2,
		"[tenant a] idle_timeout: '5m' is not a number of seconds from 0 to 2678400");
	refused("[tenant a]\nmemroy = 1G\n", 2,
		"[tenant a] memroy: unknown limit (there are memory, sessions, queued, module_cache "
		"and idle_timeout)");
	refused("[tenant bad/name]\n", 1,
		"[tenant bad/name]: not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -, not starting "
		"with '.')");
	refused("[tenant]\n", 1,
		"[tenant ]: not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -, not starting with "
		"'.')");
	refused("memory = 1G\n[defaults]\n", 1,
		"'memory' outside a section (put it under [server], [defaults] or [tenant NAME])");
	refused("[defaults]\nmemory = 1G\njust words\n", 3,
		"not a 'key = value' line, a [section] or a comment");
	refused("[defaults\n", 1, "a section header without its ']'");
	/* the first error wins */
	refused("[defaults]\nmemory = x\nsessions = y\n", 2,
		"[defaults] memory: 'x' is not a size (bytes, or a number with K, M, G or T; or "
		"unlimited)");
	memset(longline, 'a', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	memcpy(longline, "# ", 2);
	char text[512];
	snprintf(text, sizeof(text), "[defaults]\n%s\n", longline);
	refused(text, 2, "a line longer than 198 characters");
}

/* a byte-order mark before the first section, and CRLF line ends */
static void bom(void **state)
{
	struct srv_conf c;
	char err[600] = "";

	(void)state;
	write_file("\xEF\xBB\xBF[defaults]\r\nsessions = 5\r\n[tenant a]\r\nmemory = 2M\r\n");
	assert_int_equal(srv_conf_load(path, opts, &c, err, sizeof(err)), 0);
	assert_int_equal(c.defaults.sessions, 5);
	assert_int_equal(c.ntenants, 1);
	assert_string_equal(c.tenants[0].name, "a");
	assert_int_equal(c.tenants[0].lim.memory, 2ull << 20);
	srv_conf_free(&c);
	unlink(path);
}

static void missing(void **state)
{
	struct srv_conf c;
	char err[200];

	(void)state;
	assert_int_equal(srv_conf_load("/nonexistent/rgpud.conf", opts, &c, err, sizeof(err)),
			 RGPU_ENOTFOUND);
	assert_string_equal(err, "/nonexistent/rgpud.conf: No such file or directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(good),
	    cmocka_unit_test(errors),
	    cmocka_unit_test(bom),
	    cmocka_unit_test(missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
