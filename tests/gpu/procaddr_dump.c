/*
 * procaddr_dump: ask a libcuda.so.1 (the real driver on the GPU host, by default) every query
 * of procaddr_queries.txt through cuGetProcAddress_v2 and print one answer per line:
 *
 *	name version flags -> symbol[|alias...]
 *	name version flags -> NULL rc=R status=S
 *	name version flags -> symbol rc=R status=S     (a pointer together with rc/status != 0)
 *
 * A query line is "name version flags", or "name version flags v1" to ask the 4-argument
 * cuGetProcAddress instead (status is then printed as "-"); '""' is the empty name. The
 * returned pointer is named by comparing it with dlsym() of every plausible exported name
 * (each queried name with _v2.._v9 and _ptsz/_ptds), then by dladdr(). Links nothing but libdl;
 * never calls cuInit; never dereferences what it gets back.
 *
 * After the queries it prints, for every CUresult value 0..1000 the library names,
 *
 *	error N -> NAME: string
 *
 * from cuGetErrorName and cuGetErrorString (rgpu takes both from cuda.h and from memory of the
 * driver's strings, so they are worth checking too).
 *
 * Built a second time with -DPROCADDR_SELFDUMP and linked with procaddr.c and the generated
 * tables, the same program is procaddr_selfdump: it answers the same queries with rgpu's own
 * resolver and names pointers through ip_entries[], so that tests/gpu/procaddr_compare.py can
 * put the two outputs side by side.
 *
 * Usage: procaddr_dump [-l libcuda.so.1] [-o out.txt] procaddr_queries.txt
 *	  procaddr_selfdump [-o out.txt] procaddr_queries.txt
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PROCADDR_SELFDUMP
#include "ip_entries.h"
#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				  cuuint64_t flags);
#endif

typedef int (*getproc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*getproc_v1_fn)(const char *, void **, int, unsigned long long);
typedef int (*geterr_fn)(int, const char **);

struct query {
	char name[128];
	int version;
	unsigned long long flags;
	int v1;
};

struct addr_name {
	uintptr_t addr;
	const char *name;
};

static struct addr_name *names;
static size_t n_names, cap_names;

static void add_name(uintptr_t addr, const char *name)
{
	if (n_names == cap_names) {
		size_t cap = cap_names ? 2 * cap_names : 1024;
		struct addr_name *p = realloc(names, cap * sizeof(*p));
		if (!p) {
			fprintf(stderr, "procaddr_dump: out of memory\n");
			exit(2);
		}
		names = p;
		cap_names = cap;
	}
	names[n_names].addr = addr;
	names[n_names].name = strdup(name);
	if (!names[n_names].name) {
		fprintf(stderr, "procaddr_dump: out of memory\n");
		exit(2);
	}
	n_names++;
}

static int cmp_addr_name(const void *a, const void *b)
{
	const struct addr_name *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* sort_names() - sort by address, then name, and drop exact duplicates. */
static void sort_names(void)
{
	size_t o = 0;

	qsort(names, n_names, sizeof(names[0]), cmp_addr_name);
	for (size_t i = 0; i < n_names; i++) {
		if (!o || names[i].addr != names[o - 1].addr ||
		    strcmp(names[i].name, names[o - 1].name))
			names[o++] = names[i];
		else
			free((void *)names[i].name);
	}
	n_names = o;
}

/* name_pointer() - write the name(s) of p into buf: "a|b", "sym+0x10", or "?0x7f..". */
static void name_pointer(void *p, char *buf, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	size_t lo = 0, hi = n_names, used = 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (names[mid].addr < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	buf[0] = '\0';
	for (size_t i = lo; i < n_names && names[i].addr == a; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", used ? "|" : "", names[i].name);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
	if (used)
		return;
#ifndef PROCADDR_SELFDUMP
	Dl_info info;
	if (dladdr(p, &info) && info.dli_sname) {
		uintptr_t off = a - (uintptr_t)info.dli_saddr;
		if (off)
			snprintf(buf, len, "%s+%#lx", info.dli_sname, (unsigned long)off);
		else
			snprintf(buf, len, "%s", info.dli_sname);
		return;
	}
#endif
	snprintf(buf, len, "?%#lx", (unsigned long)a);
}

/* parse_line() - 1 for a query, 0 for a comment or blank line, -1 for garbage. */
static int parse_line(char *line, struct query *q)
{
	char name[sizeof(q->name)], extra[8] = "";
	int n;

	line[strcspn(line, "\r\n")] = '\0';
	if (line[strspn(line, " \t")] == '\0' || line[strspn(line, " \t")] == '#')
		return 0;
	n = sscanf(line, "%127s %d %llu %7s", name, &q->version, &q->flags, extra);
	if (n < 3)
		return -1;
	q->v1 = n == 4 && !strcmp(extra, "v1");
	if (n == 4 && !q->v1)
		return -1;
	snprintf(q->name, sizeof(q->name), "%s", strcmp(name, "\"\"") ? name : "");
	return 1;
}

int main(int argc, char **argv)
{
	const char *lib = "libcuda.so.1", *out_path = NULL;
	getproc_v2_fn v2;
	getproc_v1_fn v1;
	geterr_fn err_name = NULL, err_string = NULL;
	struct query *qs = NULL;
	size_t nq = 0, capq = 0;
	char line[512];
	FILE *in, *out = stdout;
	int opt, lineno = 0;

	while ((opt = getopt(argc, argv, "l:o:h")) != -1) {
		switch (opt) {
		case 'l':
			lib = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-l libcuda.so.1] [-o out] procaddr_queries.txt\n",
				argv[0]);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s [-l libcuda.so.1] [-o out] procaddr_queries.txt\n",
			argv[0]);
		return 2;
	}
	in = fopen(argv[optind], "r");
	if (!in) {
		fprintf(stderr, "%s: %s: %s\n", argv[0], argv[optind], strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), in)) {
		struct query q;
		int r;

		lineno++;
		r = parse_line(line, &q);
		if (r < 0) {
			fprintf(stderr, "%s: %s:%d: cannot parse\n", argv[0], argv[optind], lineno);
			return 2;
		}
		if (!r)
			continue;
		if (nq == capq) {
			capq = capq ? 2 * capq : 4096;
			qs = realloc(qs, capq * sizeof(*qs));
			if (!qs) {
				fprintf(stderr, "%s: out of memory\n", argv[0]);
				return 2;
			}
		}
		qs[nq++] = q;
	}
	fclose(in);

#ifdef PROCADDR_SELFDUMP
	(void)lib;
	(void)err_name;
	(void)err_string;
	v2 = (getproc_v2_fn)(void *)cuGetProcAddress_v2;
	v1 = (getproc_v1_fn)(void *)cuGetProcAddress;
	for (unsigned i = 0; i < ip_entry_count; i++)
		add_name((uintptr_t)ip_entries[i].fn, ip_entries[i].name);
#else
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "%s: dlopen %s: %s\n", argv[0], lib, dlerror());
		return 2;
	}
	v2 = (getproc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
	v1 = (getproc_v1_fn)dlsym(h, "cuGetProcAddress");
	err_name = (geterr_fn)dlsym(h, "cuGetErrorName");
	err_string = (geterr_fn)dlsym(h, "cuGetErrorString");
	if (!v2) {
		fprintf(stderr, "%s: %s exports no cuGetProcAddress_v2\n", argv[0], lib);
		return 2;
	}
	/* Every plausible exported name of every queried name. */
	static const char *const vers[] = {"",	  "_v2", "_v3", "_v4", "_v5",
					   "_v6", "_v7", "_v8", "_v9"};
	static const char *const sfx[] = {"", "_ptsz", "_ptds"};
	for (size_t i = 0; i < nq; i++) {
		if (i && !strcmp(qs[i].name, qs[i - 1].name))
			continue;
		if (!qs[i].name[0])
			continue;
		for (size_t a = 0; a < sizeof(vers) / sizeof(vers[0]); a++)
			for (size_t b = 0; b < sizeof(sfx) / sizeof(sfx[0]); b++) {
				char sym[160];
				void *p;

				snprintf(sym, sizeof(sym), "%s%s%s", qs[i].name, vers[a], sfx[b]);
				p = dlsym(h, sym);
				if (p)
					add_name((uintptr_t)p, sym);
			}
	}
#endif
	sort_names();

	if (out_path) {
		out = fopen(out_path, "w");
		if (!out) {
			fprintf(stderr, "%s: %s: %s\n", argv[0], out_path, strerror(errno));
			return 2;
		}
	}
	for (size_t i = 0; i < nq; i++) {
		const struct query *q = &qs[i];
		void *p = NULL;
		int status = -1, rc;
		char who[1024], st[16];

		if (q->v1 && !v1) {
			fprintf(out, "%s %d %llu v1 -> NOSYM\n", q->name[0] ? q->name : "\"\"",
				q->version, q->flags);
			continue;
		}
		if (q->v1)
			rc = v1(q->name, &p, q->version, q->flags);
		else
			rc = v2(q->name, &p, q->version, q->flags, &status);
		if (status == -1)
			snprintf(st, sizeof(st), "-");
		else
			snprintf(st, sizeof(st), "%d", status);
		fprintf(out, "%s %d %llu%s -> ", q->name[0] ? q->name : "\"\"", q->version,
			q->flags, q->v1 ? " v1" : "");
		if (!p) {
			fprintf(out, "NULL rc=%d status=%s\n", rc, st);
			continue;
		}
		name_pointer(p, who, sizeof(who));
		if (rc == 0 && (status == 0 || (q->v1 && status == -1)))
			fprintf(out, "%s\n", who);
		else
			fprintf(out, "%s rc=%d status=%s\n", who, rc, st);
	}
	for (int v = 0; v <= 1000; v++) {
		const char *n = NULL, *str = NULL;

#ifdef PROCADDR_SELFDUMP
		n = ip_error_name((CUresult)v);
		str = ip_error_string((CUresult)v);
#else
		if (!err_name || err_name(v, &n) != 0)
			n = NULL;
		if (err_string && err_string(v, &str) != 0)
			str = NULL;
#endif
		if (n)
			fprintf(out, "error %d -> %s: %s\n", v, n, str ? str : "(null)");
	}
	for (size_t i = 0; i < n_names; i++)
		free((void *)names[i].name);
	free(names);
	free(qs);
	if (out != stdout && fclose(out)) {
		fprintf(stderr, "%s: %s: %s\n", argv[0], out_path, strerror(errno));
		return 2;
	}
	return 0;
}
