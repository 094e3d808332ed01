/*
 * Hold device memory while a test looks at the server: allocate MIB MiB, fill it with a
 * pattern, create READY_FILE, wait until it is removed (at most 120 s), then read the memory
 * back, check every word and exit. Used by the rgpuctl status/jobs test.
 *
 * Usage: hold MIB READY_FILE
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

	if (argc != 3 || (mib = strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: hold MIB READY_FILE\n");
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
	printf("hold: %zu MiB held and verified\n", mib);
	free(h);
	return 0;
}
