/*
 * rgpu's first benchmarks, written against the plain driver API so the same binary measures
 * the real driver (native) and rgpu (through rgpuctl run); tests/gpu/run.sh runs it both ways
 * and prints the two side by side with their ratio.
 *
 *   bench rtt       synchronous round trip: cuStreamQuery on an idle stream (median, p99)
 *   bench launch    back-to-back empty kernels on one stream, launches per second
 *   bench launchsync  one empty kernel then cuStreamSynchronize, repeated (median)
 *   bench bw        host-to-device and device-to-host, pinned memory, 4 KiB .. 1 GiB
 *
 * Output: one "metric value unit" line per result, for tests/gpu/report.py. Warm-up first;
 * medians of many repeats; times are what the application sees (host clock around the call,
 * synchronised), which is the cost rgpu adds.
 */
#include <math.h>

#include "../progs/common.h"

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

static void bench_launch(CUmodule mod)
{
	enum { N = 200000, REPS = 5 };
	double rates[REPS];
	CUfunction f;
	CUstream s;
	CHECK(cuModuleGetFunction(&f, mod, "empty_kernel"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 1000; i++)
		CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CHECK(cuStreamSynchronize(s));
	for (int r = 0; r < REPS; r++) {
		double t0 = now_s();
		for (int i = 0; i < N; i++)
			CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
		CHECK(cuStreamSynchronize(s));
		rates[r] = N / (now_s() - t0);
	}
	printf("launch_rate %.0f launches/s\n", pct(rates, REPS, 0.5));

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

static void bench_bw(void)
{
	static const size_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1ul << 30};
	size_t max = 1ul << 30;
	void *h;
	CUdeviceptr d;
	CHECK(cuMemAllocHost(&h, max));
	CHECK(cuMemAlloc(&d, max));
	memset(h, 0x5a, max);
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		int reps = n <= (1 << 20) ? 200 : n <= (16 << 20) ? 30 : 5;
		double th[200], td[200];
		CHECK(cuMemcpyHtoD(d, h, n));
		CHECK(cuMemcpyDtoH(h, d, n));
		for (int r = 0; r < reps; r++) {
			double t0 = now_s();
			CHECK(cuMemcpyHtoD(d, h, n));
			CHECK(cuCtxSynchronize());
			double t1 = now_s();
			CHECK(cuMemcpyDtoH(h, d, n));
			double t2 = now_s();
			th[r] = t1 - t0;
			td[r] = t2 - t1;
		}
		const char *unit = n >= (1 << 30) ? "G" : n >= (1 << 20) ? "M" : "K";
		size_t shown = n >= (1 << 30) ? n >> 30 : n >= (1 << 20) ? n >> 20 : n >> 10;
		printf("h2d_%zu%s %.3f GB/s\n", shown, unit, n / pct(th, reps, 0.5) / 1e9);
		printf("d2h_%zu%s %.3f GB/s\n", shown, unit, n / pct(td, reps, 0.5) / 1e9);
	}
	CHECK(cuMemFree(d));
	CHECK(cuMemFreeHost(h));
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "rtt"))
			bench_rtt();
		else if (!strcmp(argv[i], "launch"))
			bench_launch(mod);
		else if (!strcmp(argv[i], "bw"))
			bench_bw();
		else {
			fprintf(stderr, "usage: bench rtt|launch|bw...\n");
			return 2;
		}
		fflush(stdout);
	}
	return 0;
}
