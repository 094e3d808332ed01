/* Small helpers with no other home: time, hex, address and size parsing. */
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

void *rgpu_map_at(uint64_t base, uint64_t size, int prot, const char **why)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE |
		    (prot == PROT_NONE ? MAP_NORESERVE : 0);
	void *p = base ? mmap((void *)(uintptr_t)base, size, prot, flags, -1, 0) : MAP_FAILED;

	if (p == (void *)(uintptr_t)base)
		return p;
	*why = p == MAP_FAILED ? (base ? strerror(errno) : "no address") : "placed elsewhere";
	if (p != MAP_FAILED)
		munmap(p, size);
	return NULL;
}

void rgpu_deadline(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

uint64_t rgpu_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rgpu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rgpu_deadline_after(int ms)
{
	return ms < 0 ? 0 : rgpu_now_ns() + (uint64_t)ms * 1000000ull;
}

int rgpu_ms_until(uint64_t deadline)
{
	uint64_t now;
	if (!deadline)
		return -1;
	now = rgpu_now_ns();
	if (now >= deadline)
		return 0;
	return (int)MIN((deadline - now + 999999ull) / 1000000ull, (uint64_t)INT32_MAX);
}

long rgpu_cpus(void)
{
	static long cpus;
	if (!cpus) {
		cpu_set_t set;
		long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
		if (n < 1) /* more CPUs than a cpu_set_t holds, or no answer */
			n = sysconf(_SC_NPROCESSORS_ONLN);
		cpus = n < 1 ? 1 : n;
	}
	return cpus;
}

uint64_t rgpu_spin_budget_ns(uint64_t want_ns)
{
	/* read once: it is asked on every synchronous call, and getenv walks the environment */
	static int64_t forced = -2; /* -2: not read yet, -1: not set */
	if (forced == -2) {
		const char *env = getenv("RGPU_SPIN_NS");
		uint64_t v = env && *env ? strtoull(env, NULL, 0) : 0;
		forced = env && *env ? (int64_t)(v > 1000000000ull ? 1000000000ull : v) : -1;
	}
	if (forced >= 0)
		return (uint64_t)forced; /* at most a second */
	return rgpu_cpus() >= 4 ? want_ns : 0;
}

uint64_t rgpu_sync_spin_ns(void)
{
	static int64_t v = -1;
	if (v < 0) {
		const char *env = getenv("RGPU_SYNC_SPIN_NS");
		uint64_t n = env && *env ? strtoull(env, NULL, 0) : rgpu_spin_budget_ns(1000000);
		v = (int64_t)(n > 1000000000ull ? 1000000000ull : n);
	}
	return (uint64_t)v;
}

const char *rgpu_host_id(void)
{
	static char id[64];
	if (!id[0]) {
		char buf[64] = "";
		FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
		if (f) {
			if (fgets(buf, sizeof(buf), f))
				buf[strcspn(buf, "\n")] = 0;
			fclose(f);
		}
		memcpy(id, buf, sizeof(id)); /* the same bytes whichever thread gets here */
	}
	return id;
}

char *rgpu_hex(const void *data, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
	return out;
}

int rgpu_addr_complete(const char *s)
{
	char host[256];
	int port;
	/* no default host: a bare port, or ":PORT", leaves it empty */
	return s && rgpu_parse_hostport(s, "", host, sizeof(host), &port) == 0 && host[0] &&
	       port >= 1 && port <= 65535;
}

int rgpu_parse_hostport(const char *s, const char *def_host, char *host, size_t hostlen,
			int *port)
{
	const char *colon;
	size_t hl;
	char *end;
	long p;

	if (!s || !*s)
		return RGPU_EINVAL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return RGPU_EINVAL;
		hl = (size_t)(rb - s - 1);
		if (hl + 1 > hostlen)
			return RGPU_EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			/* a bare port */
			colon = s - 1;
			hl = 0;
		} else {
			hl = (size_t)(colon - s);
		}
		if (hl == 0) {
			if (strlen(def_host) + 1 > hostlen)
				return RGPU_EINVAL;
			strcpy(host, def_host);
		} else {
			if (hl + 1 > hostlen)
				return RGPU_EINVAL;
			memcpy(host, s, hl);
			host[hl] = '\0';
		}
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return RGPU_EINVAL;
	*port = (int)p;
	return 0;
}

void rgpu_reach_addr(const char *listen, const char *via, char *out, size_t len)
{
	char host[256], vhost[256];
	int port, vport;

	snprintf(out, len, "%s", listen ? listen : "");
	if (!listen || !via || rgpu_parse_hostport(listen, "0.0.0.0", host, sizeof(host), &port) ||
	    rgpu_parse_hostport(via, "127.0.0.1", vhost, sizeof(vhost), &vport))
		return;
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !*host)
		snprintf(out, len, strchr(vhost, ':') ? "[%s]:%d" : "%s:%d", vhost, port);
}

int rgpu_label_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return 0;
	for (; s[n]; n++)
		if (!(isalnum((unsigned char)s[n]) || strchr("._:-", s[n])) || n >= RGPU_LABEL_MAX)
			return 0;
	return n > 0;
}

int rgpu_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || !*s || *s == '-')
		return RGPU_EINVAL;
	errno = 0;
	/* decimal, or 0x-prefixed hexadecimal: a leading 0 is not octal ("010M" is 10 MiB) */
	v = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
	if (errno || end == s)
		return RGPU_EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return RGPU_EINVAL;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return RGPU_EINVAL;
	if (shift && v > (~0ull >> shift))
		return RGPU_ETOOBIG;
	*out = (uint64_t)v << shift;
	return 0;
}

int rgpu_fault(const char *site)
{
	static const char *env;
	static int read;
	size_t n = strlen(site);

	if (!read) {
		env = getenv("RGPU_FAULT");
		read = 1;
	}
	for (const char *p = env; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, site, n)) {
			pr_warn("fault site %s fired (RGPU_FAULT)", site);
			return 1;
		}
		p = e ? e + 1 : NULL;
	}
	return 0;
}
