/*
 * Large patterned copies in both directions (1 GiB by default; argv[1] MiB otherwise), plus a
 * device-to-device copy, an async round trip through pinned memory, a synchronous copy from
 * pinned memory behind a kernel and pinned memory freed under a copy. Every word is checked.
 */
#include "common.h"

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024, n = mib << 20, words = n / 4;
	CUcontext ctx;
	CUdeviceptr d, d2;
	uint32_t *src = malloc(n), *dst = malloc(n), *pinned;
	double t0, t1, t2;

	CUmodule mod = setup(&ctx);
	EXPECT(src && dst, "no host memory for %zu MiB", mib);
	for (size_t i = 0; i < words; i++)
		src[i] = pattern32(i, 0xabcdef);
	memset(dst, 0, n);
	CHECK(cuMemAlloc(&d, n));
	CHECK(cuMemAlloc(&d2, n));
	t0 = now_s();
	CHECK(cuMemcpyHtoD(d, src, n));
	CHECK(cuCtxSynchronize());
	t1 = now_s();
	CHECK(cuMemcpyDtoD(d2, d, n));
	CHECK(cuMemcpyDtoH(dst, d2, n));
	t2 = now_s();
	for (size_t i = 0; i < words; i++)
		EXPECT(dst[i] == src[i], "word %zu: %08x want %08x", i, dst[i], src[i]);

	/* async through pinned memory, on a stream, in a few pieces */
	CUstream s;
	size_t piece = n / 4;
	CHECK(cuStreamCreate(&s, 0));
	CHECK(cuMemAllocHost((void **)&pinned, n));
	for (size_t i = 0; i < words; i++)
		pinned[i] = ~src[i];
	for (size_t off = 0; off < n; off += piece)
		CHECK(cuMemcpyHtoDAsync(d + off, (char *)pinned + off, piece, s));
	/* the copies may still be reading the pinned buffer until the stream says otherwise */
	CHECK(cuStreamSynchronize(s));
	memset(pinned, 0, n);
	for (size_t off = 0; off < n; off += piece)
		CHECK(cuMemcpyDtoHAsync((char *)pinned + off, d + off, piece, s));
	CHECK(cuStreamSynchronize(s));
	for (size_t i = 0; i < words; i++)
		EXPECT(pinned[i] == ~src[i], "async word %zu", i);

	/*
	 * A synchronous copy from pinned memory is complete when it returns, also when it waited
	 * behind a kernel: the buffer may be written at once
	 */
	CUfunction spin;
	unsigned long long ns = 100000000ull;
	void *sa[] = {&ns};
	size_t m = n < (8u << 20) ? n : 8u << 20;
	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	memcpy(pinned, src, m);
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, sa, NULL));
	CHECK(cuMemcpyHtoD(d, pinned, m));
	memset(pinned, 0, m);
	CHECK(cuMemcpyDtoH(dst, d, m));
	for (size_t i = 0; i < m / 4; i++)
		EXPECT(dst[i] == src[i], "word %zu after a synchronous copy from pinned memory: %08x "
					 "want %08x", i, dst[i], src[i]);

	/*
	 * Pinned memory freed while a copy into it waits on a stream: cuMemFreeHost waits for the
	 * copy, so nothing of it lands in pinned memory allocated afterwards (often the same place)
	 */
	uint8_t *late, *next;
	CHECK(cuMemAllocHost((void **)&late, m));
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sa, NULL));
	CHECK(cuMemcpyDtoHAsync(late, d, m, s));
	CHECK(cuMemFreeHost(late));
	CHECK(cuMemAllocHost((void **)&next, m));
	memset(next, 0x11, m);
	CHECK(cuStreamSynchronize(s));
	for (size_t i = 0; i < m; i++)
		EXPECT(next[i] == 0x11, "byte %zu of pinned memory allocated after a free: %02x "
					"(a copy into the freed memory landed there)", i, next[i]);
	CHECK(cuMemFreeHost(next));
	CHECK(cuMemFreeHost(pinned));
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(d));
	CHECK(cuMemFree(d2));
	printf("bigcopy: %zu MiB both ways OK (H2D %.2f GB/s, D2D+D2H %.2f GB/s)\n", mib,
	       n / (t1 - t0) / 1e9, n / (t2 - t1) / 1e9);
	free(src);
	free(dst);
	return 0;
}
