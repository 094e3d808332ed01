/*
 * Errors the real driver returns, returned the same way: out-of-range copies and sets, a launch
 * with a made-up or stale handle, bad launch shapes, freed memory, a destroyed stream, calls
 * before cuInit. The expected codes are the real driver's (checked on the GPU host natively).
 */
#include "common.h"

int main(void)
{
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr d, gone;
	CUstream s;
	char host[4096];
	int dummy;

	EXPECT_RESULT(cuMemAlloc(&d, 16), CUDA_ERROR_NOT_INITIALIZED);
	EXPECT_RESULT(cuDeviceGetCount(&dummy), CUDA_ERROR_NOT_INITIALIZED);
	mod = setup(&ctx);
	CHECK(cuModuleGetFunction(&f, mod, "vec_add"));
	CHECK(cuMemAlloc(&d, 1 << 20));

	/* far outside any allocation */
	EXPECT_RESULT(cuMemcpyHtoD(d + (64ull << 30), host, sizeof(host)), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemcpyDtoH(host, d + (64ull << 30), sizeof(host)), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemsetD8(d + (64ull << 30), 0, 16), CUDA_ERROR_INVALID_VALUE);
	/* a freed allocation */
	CHECK(cuMemAlloc(&gone, 64 << 20));
	CHECK(cuMemFree(gone));
	EXPECT_RESULT(cuMemcpyHtoD(gone, host, sizeof(host)), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemFree(gone), CUDA_ERROR_INVALID_VALUE);
	/* device pointer 0 */
	EXPECT_RESULT(cuMemcpyHtoD(0, host, sizeof(host)), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemAlloc(&gone, 0), CUDA_ERROR_INVALID_VALUE);

	/* launches */
	int n = 4;
	void *args[] = {&d, &d, &d, &n};
	EXPECT_RESULT(cuLaunchKernel((CUfunction)(uintptr_t)0x1234567, 1, 1, 1, 1, 1, 1, 0, NULL,
				     args, NULL),
		      CUDA_ERROR_INVALID_HANDLE);
	EXPECT_RESULT(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
		      CUDA_ERROR_INVALID_HANDLE);
	EXPECT_RESULT(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL),
		      CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL),
		      CUDA_ERROR_INVALID_VALUE);
	CHECK(cuStreamCreate(&s, 0));
	CHECK(cuStreamDestroy(s));
	CHECK(cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, NULL, args, NULL));
	CHECK(cuCtxSynchronize());
	EXPECT_RESULT(cuEventQuery(NULL), CUDA_ERROR_INVALID_HANDLE);
	EXPECT_RESULT(cuModuleGetFunction(&f, NULL, "vec_add"), CUDA_ERROR_INVALID_HANDLE);
	EXPECT_RESULT(cuDeviceGet(&dummy, 99), CUDA_ERROR_INVALID_DEVICE);
	const char *name = NULL;
	CHECK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &name));
	EXPECT(!strcmp(name, "CUDA_ERROR_INVALID_VALUE"), "name %s", name);
	CHECK(cuMemFree(d));
	printf("errors: driver error codes OK\n");
	return 0;
}
