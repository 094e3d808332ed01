/*
 * darktrace: a libcuda.so.1 that forwards every driver entry point to the real driver and
 * wraps the private export tables (dark-api.md) so that each call into a slot is logged with
 * its caller, its arguments, the bytes its pointer arguments point at before and after, and
 * its result. It is how rgpu learns what a table slot does before implementing it: put this
 * library first on LD_LIBRARY_PATH on the GPU host, run a program natively, read the log.
 *
 *   DARKTRACE_REAL  path of the real driver (default: the usual places)
 *   DARKTRACE_LOG   log file (default stderr); lines start with the pid
 *   DARKTRACE_LIMIT calls logged per slot (default 6); every call is counted, counts at exit
 *
 * The CUDART_INTERFACE and INTEGRITY_CHECK tables are handed out unwrapped: the runtime
 * hashes their addresses and the real driver's answer covers the real ones.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TABLES 16
#define SLOTS 128

extern const unsigned dt_nsyms;
extern void *dt_real[] __attribute__((visibility("hidden")));
extern const char *const dt_names[];
extern void *const dt_thunks[TABLES][SLOTS];

typedef int (*export_fn)(const void **, const void *);
typedef int (*procaddr_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*procaddr4_fn)(const char *, void **, int, unsigned long long);

static struct {
	unsigned char uuid[16];
	const void *const *real;
	void **proxy;
	unsigned nslots, first;
	unsigned long calls[SLOTS];
} tables[TABLES];
static unsigned ntables;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *logf;
static unsigned long limit = 6;
static export_fn real_export;
static procaddr_fn real_procaddr_v2;
static procaddr4_fn real_procaddr;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	flockfile(logf);
	fprintf(logf, "[%d] ", getpid());
	vfprintf(logf, fmt, ap);
	fputc('\n', logf);
	funlockfile(logf);
	fflush(logf);
	va_end(ap);
}

/* Read n bytes at a without faulting: 0 on success. */
static int peek(uint64_t a, void *buf, size_t n)
{
	struct iovec l = {buf, n}, r = {(void *)a, n};

	if (a < 0x10000 || a >= 0x800000000000ULL)
		return -1;
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static void hex(char *out, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 3 * i, i % 8 == 7 ? "%02x|" : "%02x ", b[i]);
}

/* Name an address: an exported driver function if it is one, else library+offset. */
static void name_of(uint64_t a, char *out, size_t n)
{
	Dl_info di;

	for (unsigned i = 0; i < dt_nsyms; i++)
		if (dt_real[i] == (void *)a) {
			snprintf(out, n, "=%s", dt_names[i]);
			return;
		}
	if (a && dladdr((void *)a, &di) && di.dli_fname) {
		const char *b = strrchr(di.dli_fname, '/');
		snprintf(out, n, "%s+%#lx", b ? b + 1 : di.dli_fname,
			 (unsigned long)(a - (uint64_t)di.dli_fbase));
		return;
	}
	snprintf(out, n, "%#lx", (unsigned long)a);
}

static void dump_args(const char *when, unsigned t, unsigned s, const uint64_t *a)
{
	unsigned char b[64];
	char h[64 * 3 + 1];

	for (int i = 0; i < 6; i++) {
		if (peek(a[i], b, sizeof(b)))
			continue;
		hex(h, b, sizeof(b));
		say("  %02x%02x%02x%02x[%u] %s *a%d = %s", tables[t].uuid[0], tables[t].uuid[1],
		    tables[t].uuid[2], tables[t].uuid[3], s, when, i, h);
	}
}

uint64_t dt_slot(unsigned t, unsigned s, void *ret, uint64_t a0, uint64_t a1, uint64_t a2,
		 uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7);
uint64_t dt_slot(unsigned t, unsigned s, void *ret, uint64_t a0, uint64_t a1, uint64_t a2,
		 uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7)
{
	typedef uint64_t (*fn8)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
				uint64_t, uint64_t);
	fn8 f = (fn8)tables[t].real[s];
	uint64_t a[6] = {a0, a1, a2, a3, a4, a5}, rc;
	unsigned long n = __atomic_add_fetch(&tables[t].calls[s], 1, __ATOMIC_RELAXED);
	const unsigned char *u = tables[t].uuid;
	char who[256];

	if (n > limit)
		return f(a0, a1, a2, a3, a4, a5, a6, a7);
	name_of((uint64_t)ret, who, sizeof(who));
	say("%02x%02x%02x%02x[%u] #%lu from %s (%#lx, %#lx, %#lx, %#lx, %#lx, %#lx, %#lx, %#lx)",
	    u[0], u[1], u[2], u[3], s, n, who, (unsigned long)a0, (unsigned long)a1,
	    (unsigned long)a2, (unsigned long)a3, (unsigned long)a4, (unsigned long)a5,
	    (unsigned long)a6, (unsigned long)a7);
	dump_args("before", t, s, a);
	rc = f(a0, a1, a2, a3, a4, a5, a6, a7);
	say("%02x%02x%02x%02x[%u] #%lu = %#lx", u[0], u[1], u[2], u[3], s, n, (unsigned long)rc);
	dump_args("after", t, s, a);
	return rc;
}

static const void *wrap(const unsigned char *uuid, const void *const *real)
{
	uint64_t q0 = (uint64_t)real[0];
	unsigned t;
	char nm[256];

	for (t = 0; t < ntables; t++)
		if (!memcmp(tables[t].uuid, uuid, 16))
			return tables[t].proxy;
	if (ntables == TABLES)
		return real;
	t = ntables;
	memcpy(tables[t].uuid, uuid, 16);
	tables[t].real = real;
	if (q0 < 0x10000 && q0 % 8 == 0) {
		tables[t].nslots = (unsigned)(q0 / 8);
		tables[t].first = 1;
	} else {
		unsigned n = 0;
		while (n < SLOTS - 1 && real[n])
			n++;
		tables[t].nslots = n + 1;
		tables[t].first = 0;
	}
	if (tables[t].nslots > SLOTS)
		return real;
	tables[t].proxy = calloc(tables[t].nslots, sizeof(void *));
	if (!tables[t].proxy)
		return real;
	tables[t].proxy[0] = (void *)real[0];
	for (unsigned s = tables[t].first; s < tables[t].nslots; s++) {
		name_of((uint64_t)real[s], nm, sizeof(nm));
		say("  table %02x%02x%02x%02x slot %u: %s", uuid[0], uuid[1], uuid[2], uuid[3], s,
		    real[s] ? nm : "NULL");
		tables[t].proxy[s] = real[s] ? dt_thunks[t][s] : NULL;
	}
	ntables++;
	return tables[t].proxy;
}

int cuGetExportTable(const void **out, const void *id);
int cuGetExportTable(const void **out, const void *id)
{
	const unsigned char *u = id;
	char h[16 * 3 + 1] = "";
	int rc = real_export(out, id);

	if (u)
		hex(h, u, 16);
	say("cuGetExportTable(%s) = %d, table %p, slot0 %#lx", h, rc, out ? (void *)*out : NULL,
	    rc == 0 && out && *out ? (unsigned long)((const uint64_t *)*out)[0] : 0UL);
	if (rc != 0 || !out || !*out || !u)
		return rc;
	/* CUDART_INTERFACE and INTEGRITY_CHECK: their addresses are hashed (dark-api.md §5) */
	if (!memcmp(u, "\x6b\xd5\xfb\x6c", 4) || !memcmp(u, "\xd4\x08\x20\x55", 4))
		return rc;
	pthread_mutex_lock(&lock);
	*out = wrap(u, *out);
	pthread_mutex_unlock(&lock);
	return rc;
}

int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
			int *status);
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
			int *status)
{
	int rc = real_procaddr_v2(sym, pfn, ver, flags, status);

	if (rc == 0 && pfn && *pfn && sym) {
		if (!strcmp(sym, "cuGetExportTable"))
			*pfn = (void *)cuGetExportTable;
		else if (!strcmp(sym, "cuGetProcAddress") && ver >= 12000)
			*pfn = (void *)cuGetProcAddress_v2;
	}
	return rc;
}

int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
	int rc = real_procaddr(sym, pfn, ver, flags);

	if (rc == 0 && pfn && *pfn && sym) {
		if (!strcmp(sym, "cuGetExportTable"))
			*pfn = (void *)cuGetExportTable;
		else if (!strcmp(sym, "cuGetProcAddress"))
			*pfn = ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
	}
	return rc;
}

__attribute__((constructor)) static void dt_init(void)
{
	static const char *const where[] = {"/usr/local/nvidia/lib64/libcuda.so.1",
					    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
					    "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1"};
	const char *path = getenv("DARKTRACE_REAL"), *l = getenv("DARKTRACE_LOG");
	void *h = NULL;

	logf = l ? fopen(l, "a") : NULL;
	if (!logf)
		logf = stderr;
	if (getenv("DARKTRACE_LIMIT"))
		limit = strtoul(getenv("DARKTRACE_LIMIT"), NULL, 0);
	if (path)
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	for (size_t i = 0; !h && i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], R_OK) == 0)
			h = dlopen(where[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		say("darktrace: cannot open the real driver (%s); set DARKTRACE_REAL", dlerror());
		abort();
	}
	for (unsigned i = 0; i < dt_nsyms; i++)
		dt_real[i] = dlsym(h, dt_names[i]);
	real_export = (export_fn)dlsym(h, "cuGetExportTable");
	real_procaddr_v2 = (procaddr_fn)dlsym(h, "cuGetProcAddress_v2");
	real_procaddr = (procaddr4_fn)dlsym(h, "cuGetProcAddress");
	if (!real_export || !real_procaddr_v2 || !real_procaddr) {
		say("darktrace: the real driver lacks cuGetExportTable/cuGetProcAddress");
		abort();
	}
	say("darktrace: forwarding to %s", path ? path : "the first driver found");
}

__attribute__((destructor)) static void dt_fini(void)
{
	for (unsigned t = 0; t < ntables; t++)
		for (unsigned s = 0; s < SLOTS; s++)
			if (tables[t].calls[s])
				say("count %02x%02x%02x%02x[%u] = %lu", tables[t].uuid[0],
				    tables[t].uuid[1], tables[t].uuid[2], tables[t].uuid[3], s,
				    tables[t].calls[s]);
}
