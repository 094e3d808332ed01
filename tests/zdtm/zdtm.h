// The zdtm protocol and the checks shared by the state programs (tests/zdtm/README.md).
//
// A program calls zd_init() first (it installs the SIGUSR1 handler, so a signal sent as soon as
// READY shows is never lost), builds its state, then for each round calls zd_ready_wait(),
// verifies everything and exercises it. zd_ready_wait() prints READY and sleeps until SIGUSR1
// without one CUDA call, so a checkpoint or a migration finds the job quiet. Every check that
// fails prints one `zdtm NAME: FAIL ...` line; zd_round_end() ends the program (exit 1) after a
// round with failures, zd_ok() prints the OK line. A failing CUDA call ends it at once (ZK()).
//
// The kernels here are shared by several programs and have C twins in tests/simgpu/kernels.c,
// registered under their mangled names: change one, change the other. They loop grid-stride,
// so every element below n is written whatever the grid, and use only 32-bit unsigned
// arithmetic, which C computes bit for bit the same.
#ifndef ZDTM_H
#define ZDTM_H

#include <cerrno>
#include <cstdarg>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <cuda_runtime.h>

static const char *zd_name = "?";
static int zd_rounds = 1;	     // ZDTM_ROUNDS
static bool zd_no_wait;		     // ZDTM_NO_WAIT=1
static int zd_failures;		     // failed checks (a round with any ends the program)
static unsigned long long zd_bytes;  // bytes compared, all rounds
static unsigned long long zd_checks; // handle and attribute checks passed, all rounds
static volatile sig_atomic_t zd_signalled;

#ifndef ZD_WAIT_SECONDS // -D for a quick check of the timeout path
#define ZD_WAIT_SECONDS 300
#endif

// ZK() ends the program on any CUDA error, naming the call. Launch errors show at
// cudaGetLastError() (ZK_LAUNCH), errors of the kernel itself at the next synchronisation.
#define ZK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			printf("zdtm %s: FAIL %s:%d: %s: %s (%s)\n", zd_name, __FILE__, __LINE__,  \
			       #call, cudaGetErrorName(e_), cudaGetErrorString(e_));               \
			fflush(stdout);                                                            \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define ZK_LAUNCH() ZK(cudaGetLastError())

// zd_vfail() - one failed check: prints `zdtm NAME: FAIL <what>` and counts it.
static void zd_vfail(const char *fmt, va_list ap)
{
	printf("zdtm %s: FAIL ", zd_name);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	zd_failures++;
}

// zd_fail() - zd_vfail() with its arguments.
static void zd_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void zd_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	zd_vfail(fmt, ap);
	va_end(ap);
}

// zd_expect() - an exact value check (a handle, an attribute, a status): counted when it passes.
static bool zd_expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool zd_expect(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		zd_checks++;
		return true;
	}
	va_start(ap, fmt);
	zd_vfail(fmt, ap);
	va_end(ap);
	return false;
}

// zd_expect_err() - call returned exactly want (an error a wrong restore would not give). An
// expected error is cleared from cudaGetLastError() so that the next ZK_LAUNCH() does not see it.
#define zd_expect_err(call, want)                                                                  \
	do {                                                                                       \
		cudaError_t g_ = (call);                                                           \
		zd_expect(g_ == (want), "%s returned %s, expected %s", #call,                      \
			  cudaGetErrorName(g_), cudaGetErrorName(want));                           \
		if (g_ != cudaSuccess)                                                             \
			(void)cudaGetLastError();                                                  \
	} while (0)

// zd_compare() - got against want, n bytes of elements of esize (1, 4 or 8) bytes. On a
// difference prints the first differing byte offset, the element there (expected/got) and how
// many elements differ. Adds n to the bytes verified either way.
static bool zd_compare(const char *what, const void *got, const void *want, size_t n, size_t esize)
{
	const unsigned char *g = (const unsigned char *)got, *w = (const unsigned char *)want;
	size_t bad = 0, first = 0;

	zd_bytes += n;
	if (memcmp(g, w, n) == 0)
		return true;
	for (size_t i = 0; i + esize <= n; i += esize)
		if (memcmp(g + i, w + i, esize) && bad++ == 0)
			first = i;
	unsigned long long ev = 0, gv = 0;
	memcpy(&ev, w + first, esize);
	memcpy(&gv, g + first, esize);
	zd_fail("%s: %zu of %zu elements differ, first at byte offset %zu: expected 0x%0*llx got "
		"0x%0*llx",
		what, bad, n / esize, first, (int)esize * 2, ev, (int)esize * 2, gv);
	return false;
}

// zd_compare_dev() - read n bytes of device memory at dev back (cudaMemcpy) and compare.
static bool zd_compare_dev(const char *what, const void *dev, const void *want, size_t n,
			   size_t esize)
{
	void *got = malloc(n ? n : 1);

	if (!got) {
		zd_fail("%s: no host memory for %zu bytes", what, n);
		return false;
	}
	ZK(cudaMemcpy(got, dev, n, cudaMemcpyDeviceToHost));
	bool ok = zd_compare(what, got, want, n, esize);
	free(got);
	return ok;
}

static void zd_on_usr1(int sig)
{
	(void)sig;
	zd_signalled = 1;
}

// zd_init() - read ZDTM_NO_WAIT and ZDTM_ROUNDS, install the SIGUSR1 handler. SA_RESTART: a
// signal that lands while the CUDA library waits in a system call does not fail that call.
static void zd_init(const char *name)
{
	const char *nw = getenv("ZDTM_NO_WAIT"), *r = getenv("ZDTM_ROUNDS");
	struct sigaction sa;

	zd_name = name;
	zd_no_wait = nw && strcmp(nw, "1") == 0;
	if (r && *r) {
		char *end;
		long v = strtol(r, &end, 10);
		if (*end || v < 1 || v > 1000) {
			printf("zdtm %s: FAIL ZDTM_ROUNDS='%s' is not a number from 1 to 1000\n",
			       name, r);
			exit(1);
		}
		zd_rounds = (int)v;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = zd_on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL)) {
		printf("zdtm %s: FAIL sigaction: %s\n", name, strerror(errno));
		exit(1);
	}
}

// zd_ready_wait() - print READY, then (unless ZDTM_NO_WAIT=1) sleep in 10 ms steps until
// SIGUSR1, making no CUDA call. Ends the program after ZD_WAIT_SECONDS without the signal.
static void zd_ready_wait(void)
{
	struct timespec t0, now, step = {0, 10 * 1000 * 1000};

	zd_signalled = 0;
	printf("READY\n");
	fflush(stdout);
	if (zd_no_wait)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!zd_signalled) {
		nanosleep(&step, NULL); // EINTR (the signal itself) just ends this step
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000000000ll + (now.tv_nsec - t0.tv_nsec) >=
		    ZD_WAIT_SECONDS * 1000000000ll) {
			printf("FAIL timeout waiting for SIGUSR1\n");
			fflush(stdout);
			exit(1);
		}
	}
}

// zd_round_end() - after a round's checks: exit 1 if any failed.
static void zd_round_end(int round)
{
	if (!zd_failures)
		return;
	printf("zdtm %s: FAIL %d check(s) failed in round %d of %d\n", zd_name, zd_failures,
	       round + 1, zd_rounds);
	fflush(stdout);
	exit(1);
}

// zd_ok() - the last line: `zdtm NAME: OK rounds=R bytes=B checks=C <extra>`.
static int zd_ok(const char *extra)
{
	printf("zdtm %s: OK rounds=%d bytes=%llu checks=%llu%s%s\n", zd_name, zd_rounds, zd_bytes,
	       zd_checks, extra && *extra ? " " : "", extra ? extra : "");
	fflush(stdout);
	return 0;
}

// --- patterns: a seeded hash of the index, the same on host and device ---------------------

// zd_hash() - 32 bits of a 64-bit index i under seed (the "lowbias32" finaliser).
__host__ __device__ static inline unsigned zd_hash(unsigned long long i, unsigned seed)
{
	unsigned x = (unsigned)i ^ ((unsigned)(i >> 32) * 0x9e3779b9u) ^ (seed * 0x85ebca6bu);
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

__host__ __device__ static inline unsigned char zd_byte(unsigned long long i, unsigned seed)
{
	return (unsigned char)(zd_hash(i, seed) >> 24);
}

// The host's seeded PRNG (splitmix64) for data that is not a function of the index.
struct zd_rng {
	unsigned long long s;
};
static inline unsigned long long zd_next(struct zd_rng *r)
{
	unsigned long long z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline void zd_rand_fill(struct zd_rng *r, void *p, size_t n)
{
	unsigned char *b = (unsigned char *)p;
	for (size_t i = 0; i < n; i += 8) {
		unsigned long long v = zd_next(r);
		memcpy(b + i, &v, n - i < 8 ? n - i : 8);
	}
}

// Host copies of the shared kernels below, for the expected values.
static inline unsigned char zd_mix_byte(unsigned char src, unsigned long long i, unsigned seed)
{
	return (unsigned char)(src * 7u + zd_hash(i, seed));
}
static inline unsigned zd_step_word(unsigned x, unsigned long long i, unsigned k)
{
	return ((x ^ k) * 1664525u) + 1013904223u + (unsigned)i;
}
static inline unsigned zd_combine_word(unsigned a, unsigned b)
{
	return a * 3u + (b ^ 0x5bd1e995u);
}

// --- shared kernels (twins: tests/simgpu/kernels.c, "zdtm") -----------------------------------

#define ZD_GRID_STRIDE(i, n)                                                                       \
	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;     \
	     i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

// p[i] = zd_byte(i, seed)
__global__ void zd_fill_bytes(unsigned char *p, unsigned long long n, unsigned seed)
{
	ZD_GRID_STRIDE(i, n)
	p[i] = zd_byte(i, seed);
}

// dst[i] = src[i] * 7 + zd_hash(i, seed), mod 256 (dst may be src)
__global__ void zd_mix_bytes(unsigned char *dst, const unsigned char *src, unsigned long long n,
			     unsigned seed)
{
	ZD_GRID_STRIDE(i, n)
	dst[i] = (unsigned char)(src[i] * 7u + zd_hash(i, seed));
}

// p[i] = zd_hash(i, seed)
__global__ void zd_fill_u32(unsigned *p, unsigned long long n, unsigned seed)
{
	ZD_GRID_STRIDE(i, n)
	p[i] = zd_hash(i, seed);
}

// p[i] = ((p[i] ^ k) * 1664525 + 1013904223 + i): one link of a chain whose order matters
__global__ void zd_step_u32(unsigned *p, unsigned long long n, unsigned k)
{
	ZD_GRID_STRIDE(i, n)
	p[i] = ((p[i] ^ k) * 1664525u) + 1013904223u + (unsigned)i;
}

// dst[i] = a[i] * 3 + (b[i] ^ 0x5bd1e995) (dst may be a or b)
__global__ void zd_combine_u32(unsigned *dst, const unsigned *a, const unsigned *b,
			       unsigned long long n)
{
	ZD_GRID_STRIDE(i, n)
	dst[i] = a[i] * 3u + (b[i] ^ 0x5bd1e995u);
}

// Every thread spins ns nanoseconds on %globaltimer: keeps a stream busy (the twin sleeps).
__global__ void zd_spin(unsigned long long ns)
{
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
}

// A grid for n elements: 256 threads a block, at most 1024 blocks (the loops stride).
static inline unsigned zd_blocks(unsigned long long n)
{
	unsigned long long b = (n + 255) / 256;
	return b == 0 ? 1 : b > 1024 ? 1024 : (unsigned)b;
}

#endif
