/* Vector add through the driver API: allocate, copy in, launch, copy out, check every value. */
#include "common.h"

int main(void)
{
	const int n = 1 << 20;
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction f, bogus;
	CUdeviceptr a, b, c;
	float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float)),
	      *hc = malloc(n * sizeof(float));
	size_t off, size;

	for (int i = 0; i < n; i++) {
		ha[i] = (float)(i % 1000) * 0.5f;
		hb[i] = (float)(pattern32(i, 7) % 4096);
		hc[i] = -1.0f;
	}
	CHECK(cuModuleGetFunction(&f, mod, "vec_add"));
	EXPECT_RESULT(cuModuleGetFunction(&bogus, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	/* the parameter layout the driver reports: three pointers and an int */
	CHECK(cuFuncGetParamInfo(f, 0, &off, &size));
	EXPECT(off == 0 && size == 8, "param 0 at %zu size %zu", off, size);
	CHECK(cuFuncGetParamInfo(f, 3, &off, &size));
	EXPECT(off == 24 && size == 4, "param 3 at %zu size %zu", off, size);
	EXPECT_RESULT(cuFuncGetParamInfo(f, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);

	CHECK(cuMemAlloc(&a, n * sizeof(float)));
	CHECK(cuMemAlloc(&b, n * sizeof(float)));
	CHECK(cuMemAlloc(&c, n * sizeof(float)));
	CHECK(cuMemcpyHtoD(a, ha, n * sizeof(float)));
	CHECK(cuMemcpyHtoD(b, hb, n * sizeof(float)));
	CHECK(cuMemsetD32(c, 0xdeadbeef, n));
	int nn = n;
	void *args[] = {&a, &b, &c, &nn};
	CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(hc, c, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		EXPECT(hc[i] == ha[i] + hb[i], "c[%d] = %g, want %g", i, hc[i], ha[i] + hb[i]);

	size_t fr = 0, tot = 0;
	CHECK(cuMemGetInfo(&fr, &tot));
	EXPECT(tot > 0 && fr <= tot, "free %zu total %zu", fr, tot);
	CUdeviceptr base;
	CHECK(cuMemGetAddressRange(&base, &size, c + 100));
	EXPECT(base == c && size == n * sizeof(float), "range %llx+%zu", (unsigned long long)base, size);

	CHECK(cuMemFree(a));
	CHECK(cuMemFree(b));
	CHECK(cuMemFree(c));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(0));
	printf("vecadd: %d elements OK\n", n);
	free(ha);
	free(hb);
	free(hc);
	return 0;
}
