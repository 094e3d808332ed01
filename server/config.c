/*
 * rgpud's configuration file (docs/operator-guide.md, "The configuration file"): an INI file
 * read with inih (Debian's libinih) at start-up, before the command line.
 *
 *   [server]         the long options of rgpud, under the same names ("max-sessions = 8",
 *                    "insecure = true"); handed back as arguments, so main.c parses a value
 *                    from the file exactly as it parses it from the command line, and options
 *                    given there come after, and win
 *   [defaults]       limits for every tenant (memory, sessions, queued, module_cache,
 *                    idle_timeout)
 *   [tenant NAME]    the same for tenant NAME, over [defaults]
 *
 * inih parses the lines (comments, key = value, a byte-order mark); this file reads the
 * section headers itself, through the line reader it gives inih, for two reasons: inih cuts
 * section names at 50 characters, shorter than "tenant " and a 64-character tenant name, and
 * it tells its handler nothing about a section without keys, which must still be refused
 * when it is unknown. The reader also counts lines, so every error names FILE:LINE.
 *
 * It must never start anything: a bad file is refused whole, with the first error.
 */
#define LOG_PREFIX "config: "
#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/util.h"
#include "srv.h"

enum section { SEC_NONE, SEC_SERVER, SEC_DEFAULTS, SEC_TENANT };

struct parse {
	const char *path;
	FILE *f;
	int line;            /* the line inih is on */
	int line_done;       /* the last read ended its line */
	enum section sec;
	struct srv_limits *lim; /* [defaults] or the current [tenant NAME] */
	char label[96];      /* the section, for messages: "[tenant alice]" */
	const struct option *opts;
	struct srv_conf *out;
	int err_line;        /* the first error, 0: none */
	char err[512];
};

/* The first error wins; later ones are not said. Returns 0, what an inih handler returns then. */
__attribute__((format(printf, 2, 3))) static int fail(struct parse *p, const char *fmt, ...)
{
	va_list ap;

	if (p->err_line)
		return 0;
	p->err_line = p->line;
	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return 0;
}

void srv_limits_init(struct srv_limits *l)
{
	*l = (struct srv_limits){.memory = SRV_UNLIMITED,
				 .sessions = SRV_UNLIMITED,
				 .queued = 0,
				 .module_cache = SRV_UNLIMITED,
				 .idle_timeout_s = -1};
}

static char *trim(char *s)
{
	char *e;
	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static struct srv_limits *tenant_section(struct parse *p, const char *name)
{
	struct srv_conf *c = p->out;
	struct srv_tenant_limits *t;

	/* a second [tenant NAME] adds to the first */
	for (size_t i = 0; i < c->ntenants; i++)
		if (!strcmp(c->tenants[i].name, name))
			return &c->tenants[i].lim;
	t = realloc(c->tenants, (c->ntenants + 1) * sizeof(*t));
	if (!t)
		return NULL;
	c->tenants = t;
	t += c->ntenants++;
	snprintf(t->name, sizeof(t->name), "%s", name);
	srv_limits_init(&t->lim);
	return &t->lim;
}

/* A section header line ("[...]"), read before inih sees it. */
static void section_line(struct parse *p, char *s)
{
	char *end = strchr(s, ']'), *name, *arg;

	if (!end) {
		fail(p, "a section header without its ']'");
		return;
	}
	*end = '\0';
	name = trim(s + 1);
	arg = name + strcspn(name, " \t");
	if (*arg) {
		*arg++ = '\0';
		arg = trim(arg);
	}
	p->lim = NULL;
	snprintf(p->label, sizeof(p->label), "[%.24s%s%.64s]", name, *arg ? " " : "", arg);
	if (!strcmp(name, "server") && !*arg) {
		p->sec = SEC_SERVER;
	} else if (!strcmp(name, "defaults") && !*arg) {
		p->sec = SEC_DEFAULTS;
		p->lim = &p->out->defaults;
	} else if (!strcmp(name, "tenant")) {
		if (!rgpu_tenant_valid(arg)) {
			fail(p,
			     "[tenant %.80s]: not a tenant name (1 to %d of A-Z a-z 0-9 . _ -, not "
			     "starting with '.')",
			     arg, RGPU_TENANT_MAX);
			return;
		}
		p->sec = SEC_TENANT;
		p->lim = tenant_section(p, arg);
		if (!p->lim)
			fail(p, "out of memory");
	} else {
		fail(p, "unknown section [%.80s%s%.80s] (there are [server], [defaults] and "
			"[tenant NAME])",
		     name, *arg ? " " : "", arg);
	}
}

/*
 * inih's line reader: fgets, counting lines, refusing a line longer than inih takes whole
 * (it would parse the rest as a line of its own), and reading section headers.
 */
static char *read_line(char *str, int num, void *stream)
{
	struct parse *p = stream;
	char *s = fgets(str, num, p->f);
	size_t len;

	if (!s)
		return NULL;
	if (p->line_done)
		p->line++;
	len = strlen(s);
	p->line_done = len && s[len - 1] == '\n';
	if (!p->line_done && len == (size_t)num - 1 && !feof(p->f)) {
		fail(p, "a line longer than %d characters", num - 2);
		return NULL;
	}
	if (p->err_line)
		return NULL; /* the first error is enough */
	s = str;
	if (p->line == 1 && !strncmp(s, "\xEF\xBB\xBF", 3))
		s += 3; /* a byte-order mark: inih skips it too */
	s = trim(s);
	if (*s == '[') {
		char copy[INI_MAX_LINE + 1];
		snprintf(copy, sizeof(copy), "%s", s);
		section_line(p, copy);
	}
	return p->err_line ? NULL : str;
}

static int is_word(const char *v, const char *const *words)
{
	for (; *words; words++)
		if (!strcasecmp(v, *words))
			return 1;
	return 0;
}

static const char *const yes_words[] = {"true", "yes", "on", "1", NULL};
static const char *const no_words[] = {"false", "no", "off", "0", NULL};

/* An option of [server]: kept as an argument for main.c's parser. */
static int server_key(struct parse *p, const char *name, const char *value)
{
	static const char *const not_here[] = {"config", "replay", "help", "version", NULL};
	struct srv_conf *c = p->out;
	const struct option *o;
	char *arg, *where, **argv, **wv;

	for (o = p->opts; o->name; o++)
		if (!strcmp(o->name, name))
			break;
	if (!o->name)
		return fail(p, "[server]: unknown option '%.80s' (the long options of rgpud --help, "
			       "without their dashes)",
			    name);
	if (is_word(name, not_here))
		return fail(p, "[server]: '%s' is a command-line option only", name);
	if (o->has_arg == no_argument) {
		if (is_word(value, no_words))
			return 1;
		if (!is_word(value, yes_words))
			return fail(p, "[server] %s: '%.80s' is not true or false", name, value);
		if (asprintf(&arg, "--%s", name) < 0)
			return fail(p, "out of memory");
	} else {
		if (!*value)
			return fail(p, "[server] %s: no value", name);
		if (asprintf(&arg, "--%s=%s", name, value) < 0)
			return fail(p, "out of memory");
	}
	if (asprintf(&where, "%s:%d", p->path, p->line) < 0) {
		free(arg);
		return fail(p, "out of memory");
	}
	argv = realloc(c->argv, (size_t)(c->argc + 2) * sizeof(*argv));
	if (argv)
		c->argv = argv;
	wv = argv ? realloc(c->where, (size_t)(c->argc + 1) * sizeof(*wv)) : NULL;
	if (!wv) {
		free(arg);
		free(where);
		return fail(p, "out of memory");
	}
	c->where = wv;
	c->argv[c->argc] = arg;
	c->where[c->argc] = where;
	c->argv[++c->argc] = NULL;
	return 1;
}

/* "unlimited", or a size (K, M, G, T: powers of 1024) */
static int size_value(struct parse *p, const char *key, const char *v, int unlimited,
		      uint64_t min, uint64_t *out)
{
	if (unlimited && !strcasecmp(v, "unlimited")) {
		*out = SRV_UNLIMITED;
		return 1;
	}
	if (rgpu_parse_size(v, out) || *out < min || *out == SRV_UNLIMITED)
		return fail(p, "%s: '%.80s' is not a size%s (bytes, or a number with K, M, G or T%s)",
			    key, v, min > 1 ? " of at least 1M" : "",
			    unlimited ? "; or unlimited" : "");
	return 1;
}

static int count_value(struct parse *p, const char *key, const char *v, int unlimited,
		       uint64_t max, const char *unit, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (unlimited && !strcasecmp(v, "unlimited")) {
		*out = SRV_UNLIMITED;
		return 1;
	}
	errno = 0;
	n = strtoull(v, &end, 10);
	if (!*v || *v == '-' || *end || errno || n > max)
		return fail(p, "%s: '%.80s' is not a number of %s from 0 to %llu%s", key, v, unit,
			    (unsigned long long)max, unlimited ? ", or unlimited" : "");
	*out = n;
	return 1;
}

/* A limit of [defaults] or [tenant NAME]. */
static int limit_key(struct parse *p, const char *name, const char *value)
{
	struct srv_limits *l = p->lim;
	uint64_t v;
	char key[128];

	snprintf(key, sizeof(key), "%s %s", p->label, name);
	if (!strcmp(name, "memory")) {
		if (!size_value(p, key, value, 1, 0, &l->memory))
			return 0;
		l->set |= SRV_LIM_MEMORY;
	} else if (!strcmp(name, "sessions")) {
		if (!count_value(p, key, value, 1, 100000, "sessions", &l->sessions))
			return 0;
		l->set |= SRV_LIM_SESSIONS;
	} else if (!strcmp(name, "queued")) {
		if (!size_value(p, key, value, 0, 1u << 20, &l->queued))
			return 0;
		l->set |= SRV_LIM_QUEUED;
	} else if (!strcmp(name, "module_cache")) {
		if (!size_value(p, key, value, 1, 0, &l->module_cache))
			return 0;
		l->set |= SRV_LIM_MODULE_CACHE;
	} else if (!strcmp(name, "idle_timeout")) {
		if (!count_value(p, key, value, 0, 31 * 86400, "seconds", &v))
			return 0;
		l->idle_timeout_s = (int)v;
		l->set |= SRV_LIM_IDLE;
	} else {
		return fail(p, "%s: unknown limit (there are memory, sessions, queued, "
			       "module_cache and idle_timeout)",
			    key);
	}
	return 1;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;

	(void)section; /* read by read_line(), whole */
	if (p->err_line)
		return 0;
	switch (p->sec) {
	case SEC_SERVER: return server_key(p, name, value);
	case SEC_DEFAULTS:
	case SEC_TENANT: return limit_key(p, name, value);
	case SEC_NONE: break;
	}
	return fail(p, "'%.80s' outside a section (put it under [server], [defaults] or "
		       "[tenant NAME])",
		    name);
}

int srv_conf_load(const char *path, const struct option *opts, struct srv_conf *out, char *err,
		  size_t errlen)
{
	struct parse p = {.path = path, .line_done = 1, .opts = opts, .out = out};
	int bad;

	memset(out, 0, sizeof(*out));
	srv_limits_init(&out->defaults);
	p.f = fopen(path, "r");
	if (!p.f) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return e == ENOENT ? RGPU_ENOTFOUND : RGPU_ESYS;
	}
	bad = ini_parse_stream(read_line, &p, on_key, &p);
	if (!p.err_line && ferror(p.f))
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	fclose(p.f);
	if (bad > 0 && (!p.err_line || bad < p.err_line)) {
		/* inih's own refusal came first: a line that is none of its kinds */
		p.err_line = bad;
		snprintf(p.err, sizeof(p.err),
			 "not a 'key = value' line, a [section] or a comment");
	} else if (bad < 0 && !p.err_line) {
		snprintf(p.err, sizeof(p.err), "out of memory");
		p.err_line = p.line;
	}
	if (p.err_line) {
		snprintf(err, errlen, "%s:%d: %s", path, p.err_line, p.err);
		srv_conf_free(out);
		return RGPU_EINVAL;
	}
	return 0;
}

void srv_conf_free(struct srv_conf *c)
{
	for (int i = 0; i < c->argc; i++) {
		free(c->argv[i]);
		free(c->where[i]);
	}
	free(c->argv);
	free(c->where);
	free(c->tenants);
	memset(c, 0, sizeof(*c));
}

void srv_limits_for(const struct srv_config *cfg, const char *tenant, struct srv_limits *out)
{
	const struct srv_limits *d = &cfg->tenant_defaults, *t = NULL;

	srv_limits_init(out);
	for (size_t i = 0; i < cfg->ntenants; i++)
		if (!strcmp(cfg->tenants[i].name, tenant))
			t = &cfg->tenants[i].lim;
	for (int k = 0; k < 2; k++) {
		const struct srv_limits *s = k ? t : d;
		if (!s)
			continue;
		if (s->set & SRV_LIM_MEMORY)
			out->memory = s->memory;
		if (s->set & SRV_LIM_SESSIONS)
			out->sessions = s->sessions;
		if (s->set & SRV_LIM_QUEUED)
			out->queued = s->queued;
		if (s->set & SRV_LIM_MODULE_CACHE)
			out->module_cache = s->module_cache;
		if (s->set & SRV_LIM_IDLE)
			out->idle_timeout_s = s->idle_timeout_s;
		out->set |= s->set;
	}
	if (!(out->set & SRV_LIM_QUEUED))
		out->queued = cfg->max_queued;
	if (!(out->set & SRV_LIM_IDLE))
		out->idle_timeout_s = cfg->idle_timeout_s;
}
