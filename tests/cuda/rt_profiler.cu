// cudaProfilerStart / cudaProfilerStop around a kernel (issue 7, item 2: through rgpu they
// returned cudaErrorCallRequiresNewerDriver). Both must return cudaSuccess, also when called
// twice in a row, and the kernel between them must still compute its result. The driver's own
// entry points, found through cudaGetDriverEntryPointByVersion, must answer as documented:
// cuProfilerStart/Stop CUDA_ERROR_INVALID_CONTEXT with no current context, and the deprecated
// cuProfilerInitialize CUDA_ERROR_NOT_SUPPORTED (always, since CUDA 12.0).
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>

#include "rt_check.h"

// The same kernel as rt_basic's add(): simgpu runs it through the C twin of that name.
__global__ void add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

typedef CUresult (*pfn_void)(void);
typedef CUresult (*pfn_init)(const char *config, const char *output, CUoutput_mode mode);
typedef CUresult (*pfn_ctx)(CUcontext *ctx);
typedef CUresult (*pfn_push)(CUcontext ctx);

static void *driver_fn(const char *name, int version)
{
	cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	CK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q));
	if (q != cudaDriverEntryPointSuccess || !fn) {
		fprintf(stderr, "FAIL: %s not found (query result %d)\n", name, (int)q);
		exit(1);
	}
	return fn;
}

// expect_cu() - a driver call's result, printed and compared.
static void expect_cu(const char *what, CUresult got, CUresult want)
{
	printf("%s: %d\n", what, (int)got);
	if (got != want)
		rt_fail("%s = %d, want %d", what, (int)got, (int)want);
}

int main()
{
	const int n = 1 << 16;
	float *ha = (float *)malloc(n * 4), *hb = (float *)malloc(n * 4),
	      *hc = (float *)malloc(n * 4);
	float *want = (float *)malloc(n * 4);
	float *a, *b, *c;

	if (!ha || !hb || !hc || !want) {
		fprintf(stderr, "out of host memory\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		ha[i] = (float)(i % 1013);
		hb[i] = (float)(i % 97) * 0.5f;
		want[i] = ha[i] + hb[i];
	}
	CK(cudaMalloc(&a, n * 4));
	CK(cudaMalloc(&b, n * 4));
	CK(cudaMalloc(&c, n * 4));
	CK(cudaMemcpy(a, ha, n * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, hb, n * 4, cudaMemcpyHostToDevice));

	CK(cudaProfilerStart());
	add<<<(n + 255) / 256, 256>>>(a, b, c, n);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaProfilerStop());
	CK(cudaMemcpy(hc, c, n * 4, cudaMemcpyDeviceToHost));
	rt_expect_f32("c", hc, want, n);

	// Starting and stopping again (and twice in a row) is not an error either.
	CK(cudaProfilerStart());
	CK(cudaProfilerStart());
	CK(cudaProfilerStop());
	CK(cudaProfilerStop());
	CK(cudaGetLastError());

	// The driver's entry points, with and without a current context.
	pfn_void start = (pfn_void)driver_fn("cuProfilerStart", 4000);
	pfn_void stop = (pfn_void)driver_fn("cuProfilerStop", 4000);
	pfn_init init = (pfn_init)driver_fn("cuProfilerInitialize", 4000);
	pfn_ctx pop = (pfn_ctx)driver_fn("cuCtxPopCurrent", 4000);
	pfn_ctx get = (pfn_ctx)driver_fn("cuCtxGetCurrent", 4000);
	CUcontext ctx = NULL, none = NULL;
	expect_cu("cuProfilerStart", start(), CUDA_SUCCESS);
	expect_cu("cuProfilerStop", stop(), CUDA_SUCCESS);
	expect_cu("cuProfilerInitialize", init("/nonexistent.cfg", "/dev/null", CU_OUT_CSV),
		  CUDA_ERROR_NOT_SUPPORTED);
	expect_cu("cuCtxPopCurrent", pop(&ctx), CUDA_SUCCESS);
	expect_cu("cuCtxGetCurrent", get(&none), CUDA_SUCCESS);
	if (none)
		rt_fail("a context is still current after cuCtxPopCurrent");
	expect_cu("cuProfilerStart without a context", start(), CUDA_ERROR_INVALID_CONTEXT);
	expect_cu("cuProfilerStop without a context", stop(), CUDA_ERROR_INVALID_CONTEXT);
	expect_cu("cuProfilerInitialize without a context",
		  init("/nonexistent.cfg", "/dev/null", CU_OUT_CSV), CUDA_ERROR_NOT_SUPPORTED);
	pfn_push push = (pfn_push)driver_fn("cuCtxPushCurrent", 4000);
	expect_cu("cuCtxPushCurrent", push(ctx), CUDA_SUCCESS);
	CK(cudaProfilerStart());
	CK(cudaProfilerStop());

	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	free(ha);
	free(hb);
	free(hc);
	free(want);
	return rt_done("rt_profiler", "profiler start/stop around a kernel");
}
