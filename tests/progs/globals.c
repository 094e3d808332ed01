/* Module __device__ globals read and written through cuModuleGetGlobal. */
#include "common.h"

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUdeviceptr counter, table, out, again;
	size_t csize, tsize;
	CUfunction add, sum;
	float h[256], result = -1, want = 0;
	int v = 5, c = 0, inc = 3;

	CHECK(cuModuleGetGlobal(&counter, &csize, mod, "g_counter"));
	CHECK(cuModuleGetGlobal(&table, &tsize, mod, "g_table"));
	EXPECT(csize == 4 && tsize == 1024, "sizes %zu %zu", csize, tsize);
	CHECK(cuModuleGetGlobal(&again, NULL, mod, "g_table"));
	EXPECT(again == table, "two lookups disagree");
	EXPECT_RESULT(cuModuleGetGlobal(&again, NULL, mod, "g_missing"), CUDA_ERROR_NOT_FOUND);
	for (int i = 0; i < 256; i++) {
		h[i] = (float)(pattern32(i, 3) % 1000) / 8.0f;
		want += h[i];
	}
	CHECK(cuMemcpyHtoD(table, h, sizeof(h)));
	CHECK(cuMemcpyHtoD(counter, &v, sizeof(v)));
	CHECK(cuModuleGetFunction(&add, mod, "add_counter"));
	CHECK(cuModuleGetFunction(&sum, mod, "table_sum"));
	CHECK(cuMemAlloc(&out, sizeof(float)));
	void *aargs[] = {&inc};
	void *sargs[] = {&out};
	CHECK(cuLaunchKernel(add, 2, 1, 1, 32, 1, 1, 0, NULL, aargs, NULL));
	CHECK(cuLaunchKernel(sum, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL));
	CHECK(cuMemcpyDtoH(&c, counter, sizeof(c)));
	CHECK(cuMemcpyDtoH(&result, out, sizeof(result)));
	EXPECT(c == 5 + 64 * 3, "counter %d", c);
	/* the device adds in index order as the host did, so the sums are bit-identical */
	EXPECT(result == want, "table sum %.6f want %.6f", result, want);
	/* a global is device memory to cuMemcpy and to pointer queries */
	CUdeviceptr base;
	size_t bsize;
	CHECK(cuMemGetAddressRange(&base, &bsize, table + 16));
	EXPECT(base == table && bsize == 1024, "range of a global");
	float back[256];
	CHECK(cuMemcpy((CUdeviceptr)(uintptr_t)back, table, sizeof(back)));
	EXPECT(memcmp(back, h, sizeof(h)) == 0, "cuMemcpy from a global");
	CHECK(cuMemFree(out));
	printf("globals: counter %d, table sum %.3f OK\n", c, result);
	return 0;
}
