/*
 * Hold device memory while a test looks at the server: allocate MIB MiB, fill it with a
 * pattern, create READY_FILE, wait until it is removed (at most 120 s), then read the memory
 * back, check every word and exit. Used by the rgpuctl status/jobs test. With `array`, it also
 * holds a 256 x 64 CUDA array of floats with the same pattern and a texture object over it,
 * checked too: a job whose checkpoint and migration are refused (e2e arrays_refused.sh).
 *
 * Usage: hold MIB READY_FILE [array]
 */
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUdeviceptr d;
	size_t mib, n;
	uint32_t *h;
	FILE *f;

	CUDA_ARRAY3D_DESCRIPTOR ad = {256, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
	CUDA_RESOURCE_DESC rd = {.resType = CU_RESOURCE_TYPE_ARRAY};
	CUDA_TEXTURE_DESC td = {.filterMode = CU_TR_FILTER_MODE_POINT};
	CUDA_MEMCPY2D c = {.WidthInBytes = 256 * 4, .Height = 64};
	CUarray arr = NULL;
	CUtexObject tex = 0;
	int with_array = argc == 4 && strcmp(argv[3], "array") == 0;

	if ((argc != 3 && !with_array) || (mib = strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: hold MIB READY_FILE [array]\n");
		return 2;
	}
	n = mib << 18; /* 32-bit words */
	h = malloc(n * sizeof(*h));
	EXPECT(h != NULL, "no host memory for %zu MiB", mib);
	for (size_t i = 0; i < n; i++)
		h[i] = pattern32((int)i, 11);
	setup(&ctx);
	CHECK(cuMemAlloc(&d, n * sizeof(*h)));
	CHECK(cuMemcpyHtoD(d, h, n * sizeof(*h)));
	if (with_array) {
		CHECK(cuArray3DCreate(&arr, &ad));
		c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = h, c.srcPitch = 256 * 4;
		c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = arr;
		CHECK(cuMemcpy2D(&c));
		rd.res.array.hArray = arr;
		CHECK(cuTexObjectCreate(&tex, &rd, &td, NULL));
	}
	CHECK(cuCtxSynchronize());
	f = fopen(argv[2], "w");
	EXPECT(f != NULL, "cannot create %s", argv[2]);
	fclose(f);
	for (int i = 0; i < 6000 && access(argv[2], F_OK) == 0; i++)
		usleep(20000);
	memset(h, 0, n * sizeof(*h));
	CHECK(cuMemcpyDtoH(h, d, n * sizeof(*h)));
	for (size_t i = 0; i < n; i++)
		EXPECT(h[i] == pattern32((int)i, 11), "word %zu = %08x", i, h[i]);
	CHECK(cuMemFree(d));
	if (with_array) {
		memset(h, 0, 256 * 64 * sizeof(*h));
		memset(&c, 0, sizeof(c));
		c.WidthInBytes = 256 * 4, c.Height = 64;
		c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = arr;
		c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = h, c.dstPitch = 256 * 4;
		CHECK(cuMemcpy2D(&c));
		for (size_t i = 0; i < 256 * 64; i++)
			EXPECT(h[i] == pattern32((int)i, 11), "array word %zu = %08x", i, h[i]);
		CHECK(cuTexObjectDestroy(tex));
		CHECK(cuArrayDestroy(arr));
		printf("hold: the array held and verified\n");
	}
	printf("hold: %zu MiB held and verified\n", mib);
	free(h);
	return 0;
}
