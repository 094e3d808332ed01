/*
 * What rgpuctl's commands share: the command line (servers from --server, --cluster or the
 * environment; the operator key; TLS), output helpers (sizes, ages, JSON) and the progress bar
 * long operations draw from the servers' PROGRESS frames.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"

struct rgpu_admin_peer ctl_peer;
static struct rgpu_key admin_key;
/* rgpuctl --admin-key FILE CMD ...: main() keeps it here before the command parses */
const char *ctl_admin_key_file;

static int add_server(struct ctl_opts *o, const char *a)
{
	if (o->nserver == CTL_MAX_SERVERS) {
		fprintf(stderr, "rgpuctl: more than %d servers\n", CTL_MAX_SERVERS);
		return CTL_USAGE;
	}
	o->server[o->nserver] = strdup(a);
	if (!o->server[o->nserver])
		return CTL_FAILED;
	o->nserver++;
	return 0;
}

static int read_cluster(struct ctl_opts *o, const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int ret = 0;

	if (!f) {
		fprintf(stderr, "rgpuctl: cannot read the cluster file %s: %s\n", path,
			strerror(errno));
		return CTL_USAGE;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		char *p = line, *e, *eq;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#')
			continue; /* a comment line */
		/*
		 * a setting: power-off = CMD, power-on = CMD (run by sh, $RGPU_HOST set), taken whole:
		 * a command may hold a '#' (a URL's fragment, a quoted string)
		 */
		if ((eq = strchr(p, '=')) && (!strchr(p, '#') || eq < strchr(p, '#'))) {
			char *k = p, *v = eq + 1, **dst = NULL;
			for (e = eq; e > k && (e[-1] == ' ' || e[-1] == '\t'); e--)
				;
			*e = '\0';
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\r\n")] = '\0';
			if (!strcmp(k, "power-off"))
				dst = &o->power_off_cmd;
			else if (!strcmp(k, "power-on"))
				dst = &o->power_on_cmd;
			if (!dst || !*v) {
				fprintf(stderr, "rgpuctl: the cluster file %s: '%s' is no setting (power-off = "
						"CMD, power-on = CMD)\n",
					path, k);
				ret = CTL_USAGE;
				break;
			}
			free(*dst);
			*dst = strdup(v);
			continue;
		}
		/* a server's address; a '#' after it starts a comment */
		for (e = p; *e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r' && *e != '#'; e++)
			;
		*e = '\0';
		if (*p)
			ret = add_server(o, p);
	}
	fclose(f);
	if (!ret && o->nserver == 0) {
		fprintf(stderr, "rgpuctl: the cluster file %s names no server\n", path);
		return CTL_USAGE;
	}
	return ret;
}

static int parse(int argc, char **argv, const char *cmd, const char *allowed, int max_args,
		 struct ctl_opts *o);

int ctl_parse(int argc, char **argv, const char *cmd, const char *allowed, int max_args,
	      struct ctl_opts *o)
{
	int ret = parse(argc, argv, cmd, allowed, max_args, o);

	if (ret) /* a usage error or --help: nothing the caller would free is left */
		ctl_opts_free(o);
	return ret;
}

static int parse(int argc, char **argv, const char *cmd, const char *allowed, int max_args,
		 struct ctl_opts *o)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"cluster", required_argument, NULL, 'C'},
		{"json", no_argument, NULL, 'j'},
		{"admin-key", required_argument, NULL, 'k'},
		{"tls", no_argument, NULL, 'T'},
		{"tls-ca", required_argument, NULL, 'A'},
		{"tls-name", required_argument, NULL, 'N'},
		{"progress", no_argument, NULL, 'p'},
		{"to", required_argument, NULL, 't'},
		{"client-address", required_argument, NULL, 'a'},
		{"cold", no_argument, NULL, 'c'},
		{"rounds", required_argument, NULL, 'r'},
		{"dry-run", no_argument, NULL, 'n'},
		{"power-off", no_argument, NULL, 'P'},
		{"headroom", required_argument, NULL, 'H'},
		{"keep", required_argument, NULL, 'K'},
		{"settle", required_argument, NULL, 'W'},
		{"lock", required_argument, NULL, 'L'},
		{"state", required_argument, NULL, 'S'},
		{"gpus", required_argument, NULL, 'g'},
		{"mem", required_argument, NULL, 'm'},
		{"write", required_argument, NULL, 'w'},
		{"reconfigure", no_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *cluster = NULL, *tls_ca = getenv("RGPU_TLS_CA"),
		   *tls_name = getenv("RGPU_TLS_NAME"), *tls_env = getenv("RGPU_TLS");
	int c, ret, tls = tls_env && !strcmp(tls_env, "1");

	/* first: on any error the caller frees o (ctl_parse) */
	memset(o, 0, sizeof(*o));
	/* as the interposer: RGPU_TLS=0 means none, even with RGPU_TLS_CA set (options win) */
	if (tls_env && *tls_env && strcmp(tls_env, "0") && strcmp(tls_env, "1")) {
		fprintf(stderr, "rgpuctl %s: RGPU_TLS='%s': want 1 (TLS) or 0 (none)\n", cmd,
			tls_env);
		return CTL_USAGE;
	}
	if (tls_env && !strcmp(tls_env, "0"))
		tls_ca = NULL;

	o->headroom = 0.10;
	o->keep = 1;
	o->settle_s = 30;
	optind = 1;
	while ((c = getopt_long(argc, argv, "s:jh", opts, NULL)) != -1) {
		if (strchr("tacrnPHKLSWgmwR", c) && !strchr(allowed, c)) {
			fprintf(stderr, "rgpuctl %s: option %s does not apply here\n", cmd,
				argv[optind - 1]);
			return CTL_USAGE;
		}
		switch (c) {
		case 'k': ctl_admin_key_file = optarg; break;
		case 'T': tls = 1; break;
		case 'A': tls_ca = optarg; break;
		case 'N': tls_name = optarg; break;
		case 's':
			o->explicit_server = 1;
			if ((ret = add_server(o, optarg)))
				return ret;
			break;
		case 'C': cluster = optarg; break;
		case 'j': o->json = 1; break;
		case 'p': o->progress = 1; break;
		case 't': o->to = optarg; break;
		case 'a':
			if (!rgpu_addr_complete(optarg)) {
				fprintf(stderr, "rgpuctl %s: --client-address '%s': want HOST:PORT, "
						"the address the job's client reaches the target at\n",
					cmd, optarg);
				return CTL_USAGE;
			}
			o->client_address = optarg;
			break;
		case 'c': o->cold = 1; break;
		case 'r': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > 100) {
				fprintf(stderr, "rgpuctl %s: --rounds takes 1 to 100, not '%s'\n", cmd,
					optarg);
				return CTL_USAGE;
			}
			o->rounds = (unsigned)v;
			break;
		}
		case 'n': o->dry_run = 1; break;
		case 'P': o->power_off = 1; break;
		case 'L': o->lock_path = optarg; break;
		case 'S': o->state_path = optarg; break;
		case 'w': o->write_path = optarg; break;
		case 'R': o->reconfigure = 1; break;
		case 'g': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > 16) {
				fprintf(stderr, "rgpuctl %s: --gpus takes 1 to 16, not '%s'\n", cmd,
					optarg);
				return CTL_USAGE;
			}
			o->gpus = (unsigned)v;
			break;
		}
		case 'm':
			/* a plain number is MiB, as in --rgpu=N:MEM; else a size (4G) */
			if (rgpu_parse_size(optarg, &o->mem)) {
				fprintf(stderr, "rgpuctl %s: --mem takes a size (MiB, or 512M, 4G), not "
						"'%s'\n",
					cmd, optarg);
				return CTL_USAGE;
			}
			if (strspn(optarg, "0123456789") == strlen(optarg))
				o->mem <<= 20;
			break;
		case 'H':
		case 'K': {
			char *end;
			double v = strtod(optarg, &end);
			/* a number of servers is whole: 1.5 is refused, not read as 1 */
			if (!*optarg || *end || v < 0 || (c == 'H' ? v >= 100 : v > 256) ||
			    (c == 'K' && strspn(optarg, "0123456789") != strlen(optarg))) {
				fprintf(stderr, "rgpuctl %s: --%s takes %s, not '%s'\n", cmd,
					c == 'H' ? "headroom" : "keep",
					c == 'H' ? "a percentage below 100" : "0 to 256 servers", optarg);
				return CTL_USAGE;
			}
			if (c == 'H')
				o->headroom = v / 100.0;
			else
				o->keep = (unsigned)v;
			break;
		}
		case 'W': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 0 || v > 3600) {
				fprintf(stderr, "rgpuctl %s: --settle takes 0 to 3600 seconds, not "
						"'%s'\n",
					cmd, optarg);
				return CTL_USAGE;
			}
			o->settle_s = (unsigned)v;
			break;
		}
		case 'h': return -1; /* the caller prints the usage */
		default: return CTL_USAGE;
		}
	}
	while (optind < argc) {
		if (o->nargs >= max_args) {
			fprintf(stderr, "rgpuctl %s: unexpected argument '%s'\n", cmd, argv[optind]);
			return CTL_USAGE;
		}
		o->args[o->nargs++] = argv[optind++];
	}
	if (!ctl_admin_key_file)
		ctl_admin_key_file = getenv("RGPU_ADMIN_KEY_FILE");
	if (ctl_admin_key_file && *ctl_admin_key_file) {
		char why[600];
		if (rgpu_key_load(ctl_admin_key_file, &admin_key, why, sizeof(why))) {
			fprintf(stderr, "rgpuctl %s: --admin-key: %s\n", cmd, why);
			return CTL_USAGE;
		}
		ctl_peer.key = &admin_key;
	}
	if (tls || (tls_ca && *tls_ca)) {
		char why[800];
		if (rgpu_tls_client_new(tls_ca, &ctl_peer.tls, why, sizeof(why))) {
			fprintf(stderr, "rgpuctl %s: TLS: %s\n", cmd, why);
			return CTL_USAGE;
		}
		ctl_peer.tls_name = tls_name && *tls_name ? tls_name : NULL;
	}
	if (!cluster && o->nserver == 0)
		cluster = getenv("RGPU_CLUSTER");
	if (cluster && *cluster && (ret = read_cluster(o, cluster)))
		return ret;
	if (o->nserver == 0) {
		const char *a = getenv("RGPU_ADMIN");
		return add_server(o, a && *a ? a : RGPU_DEFAULT_ADMIN);
	}
	return 0;
}

void ctl_opts_free(struct ctl_opts *o)
{
	free(o->power_off_cmd);
	free(o->power_on_cmd);
	o->power_off_cmd = o->power_on_cmd = NULL;
	for (int i = 0; i < o->nserver; i++)
		free(o->server[i]);
	o->nserver = 0;
}

int ctl_status_of(int ret)
{
	switch (ret) {
	case 0: return CTL_OK;
	case RGPU_EINVAL: return CTL_USAGE; /* a bad address */
	case RGPU_ENOTFOUND: return CTL_NOTFOUND;
	case RGPU_ECORRUPT: return CTL_DAMAGED;
	case RGPU_ECONNECT:
	case RGPU_ETIMEDOUT:
	case RGPU_ETLS:
	case RGPU_EAUTH:
	case RGPU_ECLOSED:
	case RGPU_EIO:
	case RGPU_ETRUNC:
	case RGPU_EVERSION:
		return CTL_UNREACHABLE;
	default:
		return CTL_FAILED;
	}
}

void ctl_fmt_bytes(uint64_t b, char *out, size_t len)
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

void ctl_fmt_age(uint64_t s, char *out, size_t len)
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

void ctl_hex(const ProtobufCBinaryData *b, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < b->len && 2 * i + 2 < len; i++)
		snprintf(out + 2 * i, 3, "%02x", b->data[i]);
}

const char *ctl_basename(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : (p ? p : "");
}

void ctl_json_print(json_t *root)
{
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text) {
		puts(text);
		free(text);
	}
	json_decref(root);
}

/* ---- progress ------------------------------------------------------------------------------ */

void ctl_progress_init(struct ctl_progress *p, const struct ctl_opts *o)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(2);
	p->on = p->tty || o->progress;
	p->last_pct = -1;
}

void ctl_progress_cb(const Rgpu__Progress *pr, void *arg)
{
	struct ctl_progress *p = arg;
	uint64_t now = rgpu_now_ns();
	const char *phase = pr->phase ? pr->phase : "";
	int bytes = pr->unit && !strcmp(pr->unit, "bytes");
	char done[32], total[32], rate[32] = "", eta[32] = "";
	int pct = pr->total ? (int)(100.0 * (double)pr->done / (double)pr->total) : -1;

	if (!p->on)
		return;
	if (strcmp(p->phase, phase)) {
		if (p->tty && p->phase[0])
			fputc('\n', stderr);
		snprintf(p->phase, sizeof(p->phase), "%s", phase);
		p->t0 = now;
		p->last_pct = -1;
		p->last_draw = 0;
	}
	/* a terminal: at most 10 redraws a second; otherwise a line each 10% */
	if (p->tty ? now - p->last_draw < 100000000ull && pr->done != pr->total
		   : pct / 10 == p->last_pct / 10 && pct != 100)
		return;
	p->last_draw = now;
	p->last_pct = pct;
	if (bytes) {
		ctl_fmt_bytes(pr->done, done, sizeof(done));
		ctl_fmt_bytes(pr->total, total, sizeof(total));
	} else {
		snprintf(done, sizeof(done), "%llu", (unsigned long long)pr->done);
		snprintf(total, sizeof(total), "%llu %s", (unsigned long long)pr->total,
			 pr->unit ? pr->unit : "");
	}
	double secs = (double)(now - p->t0) / 1e9;
	if (secs > 0.05 && pr->done) {
		double r = (double)pr->done / secs;
		if (bytes)
			snprintf(rate, sizeof(rate), "  %.2f GB/s", r / 1e9);
		if (pr->total > pr->done)
			snprintf(eta, sizeof(eta), "  ETA %.1fs",
				 (double)(pr->total - pr->done) / r);
	}
	if (!pr->total && !pr->done)
		fprintf(stderr, p->tty ? "\r%-8s ...%20s" : "%s\n", phase, "");
	else if (pct >= 0)
		fprintf(stderr, p->tty ? "\r%-8s %3d%%  %s / %s%s%s   " : "%s %d%% %s / %s%s%s\n",
			phase, pct, done, total, rate, eta);
	else
		fprintf(stderr, p->tty ? "\r%-8s %s%s   " : "%s %s%s\n", phase, done, rate);
	fflush(stderr);
}

void ctl_progress_end(struct ctl_progress *p)
{
	if (p->on && p->tty && p->phase[0])
		fputc('\n', stderr);
	p->phase[0] = '\0';
}

const struct Rgpu__Reservation *ctl_reservation(const struct Rgpu__StatusReply *st,
						const char *name)
{
	for (size_t i = 0; st && name && i < st->n_reservations; i++)
		if (!strcmp(st->reservations[i]->name, name))
			return st->reservations[i];
	return NULL;
}

uint64_t ctl_gpu_free(const struct Rgpu__GpuInfo *g)
{
	uint64_t used = g->memory_used + g->memory_reserved;

	return used >= g->memory_used && g->memory_total > used ? g->memory_total - used : 0;
}

/* One action, as a JSON line (--json) or a sentence. */
void ctl_action(const struct ctl_opts *o, json_t *j, const char *fmt, ...)
{
	va_list ap;

	if (o->json) {
		char *s = json_dumps(j, JSON_COMPACT);
		if (s)
			printf("%s\n", s);
		free(s);
	} else {
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		putchar('\n');
	}
	fflush(stdout);
	json_decref(j);
}
