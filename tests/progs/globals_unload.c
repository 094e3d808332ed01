/*
 * Module __device__ globals after their module is unloaded: copies to and from their
 * addresses fail with CUDA_ERROR_INVALID_VALUE, as natively (the address is no memory of the
 * context any more), for a module (cuModuleUnload) and for a library (cuLibraryUnload), and
 * the context keeps working.
 */
#include "common.h"

/* The global g's bytes round-trip while its module is loaded. */
static void round_trip(CUdeviceptr g, const float *h, size_t n)
{
	float back[256];

	CHECK(cuMemcpyHtoD(g, h, n));
	memset(back, 0, sizeof(back));
	CHECK(cuMemcpyDtoH(back, g, n));
	EXPECT(memcmp(back, h, n) == 0, "a global's bytes did not come back");
}

/* Every copy that names the unloaded global g fails, and nothing is written to back. */
static void gone(CUdeviceptr g, CUdeviceptr live, const float *h, size_t n, const char *what)
{
	float back[256];

	memset(back, 0x5a, sizeof(back));
	EXPECT_RESULT(cuMemcpyHtoD(g, h, n), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemcpyDtoH(back, g, n), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemcpyDtoD(live, g, n), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemcpyDtoD(g, live, n), CUDA_ERROR_INVALID_VALUE);
	for (size_t i = 0; i < sizeof(back); i++)
		EXPECT(((unsigned char *)back)[i] == 0x5a, "%s: a failed copy wrote byte %zu", what,
		       i);
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUlibrary lib;
	CUdeviceptr table, counter, live, ltable;
	size_t tsize, csize;
	float h[256], back[256];
	int v = 41;
	void *img;

	for (int i = 0; i < 256; i++)
		h[i] = (float)(pattern32(i, 11) % 4096) / 4.0f;
	CHECK(cuMemAlloc(&live, sizeof(h)));
	CHECK(cuModuleGetGlobal(&table, &tsize, mod, "g_table"));
	CHECK(cuModuleGetGlobal(&counter, &csize, mod, "g_counter"));
	EXPECT(tsize == sizeof(h) && csize == sizeof(int), "sizes %zu %zu", tsize, csize);
	round_trip(table, h, sizeof(h));
	CHECK(cuMemcpyHtoD(counter, &v, sizeof(v)));

	CHECK(cuModuleUnload(mod));
	gone(table, live, h, sizeof(h), "module g_table");
	EXPECT_RESULT(cuMemcpyHtoD(counter, &v, sizeof(v)), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemcpyDtoH(&v, counter, sizeof(v)), CUDA_ERROR_INVALID_VALUE);
	EXPECT(v == 41, "a failed copy changed the host value to %d", v);

	/* the context still serves */
	CHECK(cuMemcpyHtoD(live, h, sizeof(h)));
	CHECK(cuMemcpyDtoH(back, live, sizeof(back)));
	EXPECT(memcmp(back, h, sizeof(h)) == 0, "device memory after the refusals");

	/* the same for a library's global */
	img = load_image();
	CHECK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
	free(img);
	CHECK(cuLibraryGetGlobal(&ltable, &tsize, lib, "g_table"));
	EXPECT(tsize == sizeof(h), "library g_table size %zu", tsize);
	round_trip(ltable, h, sizeof(h));
	CHECK(cuLibraryUnload(lib));
	gone(ltable, live, h, sizeof(h), "library g_table");

	CHECK(cuMemFree(live));
	printf("globals_unload: copies to unloaded module and library globals refused OK\n");
	return 0;
}
