/*
 * rgpu's benchmarks, written against the plain driver API so that the same binary measures the
 * real driver (native) and rgpu (through rgpuctl run, over either transport: RGPU_TRANSPORT);
 * tests/gpu/run.sh runs it each way and tests/gpu/report.py prints the results side by side.
 *
 *   bench rtt       synchronous round trip: cuStreamQuery on an idle stream (median, p99)
 *   bench launch    back-to-back empty kernels on one stream, launches per second (the
 *                   parameters as kernelParams, then as an `extra` buffer); then one empty
 *                   kernel and cuStreamSynchronize, repeated (median)
 *   bench small     synchronous 4-byte copies with a host variable: device to host (median,
 *                   p99) and host to device (median, p99)
 *   bench bw        host to device and device to host, pinned memory, 4 KiB .. 1 GiB
 *   bench pageable  the same with malloc'd (pageable, touched) memory, 1 MiB .. 1 GiB
 *   bench streams   4 streams, each an asynchronous pinned copy of 64 MiB, all at once: the
 *                   aggregate host to device, then device to host
 *
 * Output: one "metric value unit" line per result, for tests/gpu/report.py. Warm-up first;
 * medians of many repeats; times are what the application sees (host clock around the call,
 * synchronised), which is the cost rgpu adds. Every copy is checked before it is timed, so that
 * a transport that loses, skips or fakes bytes exits 1 instead of printing a fast number.
 * RGPU_BENCH_MAX_MIB=N leaves out the sizes above N MiB (and shrinks the streams' copies to
 * it): the smoke test on simgpu, where timings mean nothing.
 */
#include <math.h>

#include "../progs/common.h"

#define MIB (1ul << 20)
enum { MAX_REPS = 200, NSTREAMS = 4 };

static size_t max_bytes = 1ul << 30; /* RGPU_BENCH_MAX_MIB */
static CUstream streams[NSTREAMS];

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	int i = (int)ceil(p * n) - 1;
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void bench_rtt(void)
{
	enum { N = 20000 };
	static double t[N];
	CUstream s;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 2000; i++)
		CHECK(cuStreamQuery(s));
	for (int i = 0; i < N; i++) {
		double t0 = now_s();
		CHECK(cuStreamQuery(s));
		t[i] = (now_s() - t0) * 1e6;
	}
	printf("rtt_median %.2f us\n", pct(t, N, 0.5));
	printf("rtt_p99 %.2f us\n", pct(t, N, 0.99));
	CHECK(cuStreamDestroy(s));
}

/* N back-to-back launches of f on s, then a synchronise: the median rate of 5 repeats */
static double launch_rate(CUfunction f, CUstream s, void **extra)
{
	enum { N = 200000, REPS = 5 };
	double rates[REPS];
	for (int r = 0; r < REPS; r++) {
		double t0 = now_s();
		for (int i = 0; i < N; i++)
			CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, extra));
		CHECK(cuStreamSynchronize(s));
		rates[r] = N / (now_s() - t0);
	}
	return pct(rates, REPS, 0.5);
}

static void bench_launch(CUmodule mod)
{
	CUfunction f;
	CUstream s;
	CHECK(cuModuleGetFunction(&f, mod, "empty_kernel"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 1000; i++)
		CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CHECK(cuStreamSynchronize(s));
	printf("launch_rate %.0f launches/s\n", launch_rate(f, s, NULL));
	/* the same with an empty parameter buffer (CU_LAUNCH_PARAM_BUFFER_POINTER): natively,
	 * what that form costs the driver itself; through rgpu, the interposer's path for it */
	static char none[8];
	size_t none_size = 0;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, none, CU_LAUNCH_PARAM_BUFFER_SIZE,
			 &none_size, CU_LAUNCH_PARAM_END};
	printf("launch_extra_rate %.0f launches/s\n", launch_rate(f, s, extra));

	enum { M = 5000 };
	static double t[M];
	for (int i = 0; i < M; i++) {
		double t0 = now_s();
		CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
		CHECK(cuStreamSynchronize(s));
		t[i] = (now_s() - t0) * 1e6;
	}
	printf("launch_sync_median %.2f us\n", pct(t, M, 0.5));
	CHECK(cuStreamDestroy(s));
}

/*
 * One word on the device, copied synchronously to and from a host variable (the way a program
 * reads back a flag or a loss). Every read must see the value the device wrote with
 * cuMemsetD32, and the last write must read back.
 */
static void bench_small(void)
{
	enum { N = 20000, WARM = 2000 };
	static double t[N];
	const uint32_t want = 0x14c0ffee;
	uint32_t v;
	CUdeviceptr d;

	CHECK(cuMemAlloc(&d, 4));
	CHECK(cuMemsetD32(d, want, 1));
	for (int i = 0; i < WARM + N; i++) {
		v = 0;
		double t0 = now_s();
		CHECK(cuMemcpyDtoH(&v, d, 4));
		if (i >= WARM)
			t[i - WARM] = (now_s() - t0) * 1e6;
		EXPECT(v == want, "small: 4-byte read %d gave %#x, the device holds %#x", i, v,
		       want);
	}
	printf("d2h4_median %.2f us\n", pct(t, N, 0.5));
	printf("d2h4_p99 %.2f us\n", pct(t, N, 0.99));

	for (int i = 0; i < WARM + N; i++) {
		v = pattern32((uint64_t)i, 14);
		double t0 = now_s();
		CHECK(cuMemcpyHtoD(d, &v, 4));
		if (i >= WARM)
			t[i - WARM] = (now_s() - t0) * 1e6;
	}
	uint32_t last = v;
	v = 0;
	CHECK(cuMemcpyDtoH(&v, d, 4));
	EXPECT(v == last, "small: the last 4-byte write was %#x, the device holds %#x", last, v);
	printf("h2d4_median %.2f us\n", pct(t, N, 0.5));
	printf("h2d4_p99 %.2f us\n", pct(t, N, 0.99));
	CHECK(cuMemFree(d));
}

/* A copy of n bytes between d and host memory h, the way one benchmark times it. */
typedef void copy_fn(CUdeviceptr d, void *h, size_t n, int to_device);

/* cuMemcpyHtoD (then cuCtxSynchronize) or cuMemcpyDtoH. */
static void copy_sync(CUdeviceptr d, void *h, size_t n, int to_device)
{
	if (to_device) {
		CHECK(cuMemcpyHtoD(d, h, n));
		CHECK(cuCtxSynchronize());
	} else {
		CHECK(cuMemcpyDtoH(h, d, n));
	}
}

/* n bytes in NSTREAMS equal parts, each an asynchronous copy on its own stream, all queued
 * before one cuCtxSynchronize. */
static void copy_streams(CUdeviceptr d, void *h, size_t n, int to_device)
{
	size_t part = n / NSTREAMS;
	for (int s = 0; s < NSTREAMS; s++) {
		char *hs = (char *)h + s * part;
		if (to_device)
			CHECK(cuMemcpyHtoDAsync(d + s * part, hs, part, streams[s]));
		else
			CHECK(cuMemcpyDtoHAsync(hs, d + s * part, part, streams[s]));
	}
	CHECK(cuCtxSynchronize());
}

/*
 * Exits 1 unless copy() moves n bytes whole both ways: a fresh pattern (seed) sent to the
 * device and read back into a cleared buffer, then a range the device itself wrote
 * (cuMemsetD32) read back. Neither side held these bytes before, so a copy skipped, cut
 * short or answered from a stale buffer fails.
 */
static void check_copy(const char *what, copy_fn *copy, CUdeviceptr d, uint32_t *src, uint32_t *dst,
		       size_t n, uint32_t seed)
{
	size_t words = n / 4;
	for (size_t i = 0; i < words; i++)
		src[i] = pattern32(i, seed);
	memset(dst, 0, n);
	copy(d, src, n, 1);
	copy(d, dst, n, 0);
	for (size_t i = 0; i < words; i++)
		EXPECT(dst[i] == src[i], "%s: %zu bytes there and back: word %zu is %#x, sent %#x",
		       what, n, i, dst[i], src[i]);
	CHECK(cuMemsetD32(d, ~seed, words));
	CHECK(cuCtxSynchronize());
	copy(d, dst, n, 0);
	for (size_t i = 0; i < words; i++)
		EXPECT(dst[i] == ~seed, "%s: %zu bytes from the device: word %zu is %#x, set %#x",
		       what, n, i, dst[i], ~seed);
}

/* "4K", "64M", "1G" */
static const char *size_name(size_t n, char *buf, size_t len)
{
	if (n >= (1ul << 30))
		snprintf(buf, len, "%zuG", n >> 30);
	else if (n >= MIB)
		snprintf(buf, len, "%zuM", n >> 20);
	else
		snprintf(buf, len, "%zuK", n >> 10);
	return buf;
}

/* Checks copy() at n bytes, then times it both ways (reps each, median): "<h2d> X GB/s" and
 * "<d2h> X GB/s". */
static void time_copy(const char *h2d, const char *d2h, copy_fn *copy, CUdeviceptr d, uint32_t *src,
		      uint32_t *dst, size_t n, int reps, uint32_t seed)
{
	double th[MAX_REPS], td[MAX_REPS];

	check_copy(h2d, copy, d, src, dst, n, seed);
	for (int r = 0; r < reps; r++) {
		double t0 = now_s();
		copy(d, src, n, 1);
		double t1 = now_s();
		copy(d, dst, n, 0);
		double t2 = now_s();
		th[r] = t1 - t0;
		td[r] = t2 - t1;
	}
	printf("%s %.3f GB/s\n", h2d, n / pct(th, reps, 0.5) / 1e9);
	printf("%s %.3f GB/s\n", d2h, n / pct(td, reps, 0.5) / 1e9);
	fflush(stdout);
}

/* Fewer repeats as copies grow: the whole run must fit tests/gpu/run.sh's time over TCP. */
static int reps_for(size_t n)
{
	return n <= MIB ? MAX_REPS : n <= 16 * MIB ? 30 : n <= 64 * MIB ? 10 : 5;
}

static const size_t copy_sizes[] = {4 << 10,  64 << 10, 1 * MIB,   4 * MIB,
				    16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB};

/* bw (pinned) or pageable: every size from min up to max_bytes, metric names
 * <prefix>h2d_<size> and <prefix>d2h_<size>. */
static void bench_bw(int pinned)
{
	const char *prefix = pinned ? "" : "p";
	size_t min = pinned ? 0 : MIB, max = 0;
	void *src, *dst;
	CUdeviceptr d;

	for (unsigned k = 0; k < sizeof(copy_sizes) / sizeof(copy_sizes[0]); k++)
		if (copy_sizes[k] >= min && copy_sizes[k] <= max_bytes)
			max = copy_sizes[k];
	if (!max)
		return;
	if (pinned) {
		CHECK(cuMemAllocHost(&src, max));
		CHECK(cuMemAllocHost(&dst, max));
	} else {
		src = malloc(max);
		dst = malloc(max);
		EXPECT(src && dst, "pageable: cannot allocate 2 x %zu bytes", max);
	}
	memset(src, 0x5a, max); /* touched: the pageable pages exist before any timing */
	memset(dst, 0xa5, max);
	CHECK(cuMemAlloc(&d, max));
	for (unsigned k = 0; k < sizeof(copy_sizes) / sizeof(copy_sizes[0]); k++) {
		size_t n = copy_sizes[k];
		char sz[16], h2d[32], d2h[32];
		if (n < min || n > max)
			continue;
		size_name(n, sz, sizeof(sz));
		snprintf(h2d, sizeof(h2d), "%sh2d_%s", prefix, sz);
		snprintf(d2h, sizeof(d2h), "%sd2h_%s", prefix, sz);
		time_copy(h2d, d2h, copy_sync, d, src, dst, n, reps_for(n),
			  0xb0 + k + 16 * !pinned);
	}
	CHECK(cuMemFree(d));
	if (pinned) {
		CHECK(cuMemFreeHost(src));
		CHECK(cuMemFreeHost(dst));
	} else {
		free(src);
		free(dst);
	}
}

static void bench_streams(void)
{
	size_t part = max_bytes < 64 * MIB ? max_bytes : 64 * MIB, n = NSTREAMS * part;
	void *src, *dst;
	CUdeviceptr d;

	for (int s = 0; s < NSTREAMS; s++)
		CHECK(cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAllocHost(&src, n));
	CHECK(cuMemAllocHost(&dst, n));
	CHECK(cuMemAlloc(&d, n));
	time_copy("h2d_4streams", "d2h_4streams", copy_streams, d, src, dst, n, 10, 0x5743);
	CHECK(cuMemFree(d));
	CHECK(cuMemFreeHost(src));
	CHECK(cuMemFreeHost(dst));
	for (int s = 0; s < NSTREAMS; s++)
		CHECK(cuStreamDestroy(streams[s]));
}

int main(int argc, char **argv)
{
	const char *cap = getenv("RGPU_BENCH_MAX_MIB");
	CUcontext ctx;
	CUmodule mod;

	if (cap && *cap) {
		char *end;
		unsigned long mib = strtoul(cap, &end, 10);
		if (*end || mib == 0 || mib > 1024) {
			fprintf(stderr, "bench: RGPU_BENCH_MAX_MIB=%s: want 1 to 1024 MiB\n", cap);
			return 2;
		}
		max_bytes = mib * MIB;
	}
	for (int i = 1; i < argc; i++) {
		static const char *const modes[] = {"rtt", "launch",   "small",
						    "bw",  "pageable", "streams"};
		unsigned k = 0;
		while (k < sizeof(modes) / sizeof(modes[0]) && strcmp(argv[i], modes[k]))
			k++;
		if (k == sizeof(modes) / sizeof(modes[0])) {
			fprintf(stderr, "usage: bench rtt|launch|small|bw|pageable|streams...\n");
			return 2;
		}
	}
	mod = setup(&ctx);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "rtt"))
			bench_rtt();
		else if (!strcmp(argv[i], "launch"))
			bench_launch(mod);
		else if (!strcmp(argv[i], "small"))
			bench_small();
		else if (!strcmp(argv[i], "bw"))
			bench_bw(1);
		else if (!strcmp(argv[i], "pageable"))
			bench_bw(0);
		else
			bench_streams();
		fflush(stdout);
	}
	return 0;
}
