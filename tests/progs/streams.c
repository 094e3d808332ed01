/*
 * Several streams, events and cuStreamWaitEvent. Stream A fills a buffer, then spins for
 * SPIN_MS on the device and records an event; stream B waits for that event, then copies the
 * buffer, scales it and copies it back. B's results prove the wait (they can only be right if
 * A's fill came first); the queries prove the work really was asynchronous.
 */
#include "common.h"

#define SPIN_MS 200

int main(void)
{
	const unsigned long long n = 1 << 20;
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction fill, spin, scale;
	CUstream a, b, nb;
	CUevent start, done, bdone;
	CUdeviceptr x, y;
	unsigned *hx;
	float *hy;
	unsigned seed = 0x1234abcd;
	unsigned long long ns = SPIN_MS * 1000000ull;
	float ms = 0, sc = 2.0f, tc = 1.0f;
	int prio = 1, nint = (int)n;
	unsigned flags = 0;

	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	CHECK(cuModuleGetFunction(&scale, mod, "scale_add"));
	CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreateWithPriority(&b, CU_STREAM_NON_BLOCKING, -1));
	CHECK(cuStreamCreate(&nb, 0));
	CHECK(cuStreamGetPriority(b, &prio));
	EXPECT(prio == -1, "priority %d", prio);
	CHECK(cuStreamGetFlags(a, &flags));
	EXPECT(flags == CU_STREAM_NON_BLOCKING, "flags %u", flags);
	CHECK(cuEventCreate(&start, 0));
	CHECK(cuEventCreate(&done, 0));
	CHECK(cuEventCreate(&bdone, CU_EVENT_DISABLE_TIMING));
	CHECK(cuMemAlloc(&x, n * 4));
	CHECK(cuMemAlloc(&y, n * 4));
	CHECK(cuMemHostAlloc((void **)&hy, n * 4, 0));
	/* pinned: an async copy into pageable memory would complete before returning */
	CHECK(cuMemAllocHost((void **)&hx, n * 4));

	void *fargs[] = {&x, &seed, (void *)&n};
	void *sargs[] = {&ns};
	void *cargs[] = {&y, &sc, &tc, &nint};
	CHECK(cuEventRecord(start, a));
	CHECK(cuLaunchKernel(fill, 256, 1, 1, 256, 1, 1, 0, a, fargs, NULL));
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, sargs, NULL));
	CHECK(cuEventRecord(done, a));
	CHECK(cuStreamWaitEvent(b, done, 0));
	CHECK(cuMemcpyDtoDAsync(y, x, n * 4, b));
	CHECK(cuMemcpyDtoHAsync(hx, x, n * 4, b));
	/* y holds the fill's bits; scale_add treats them as floats: compute the same on the host */
	CHECK(cuLaunchKernel(scale, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, b, cargs, NULL));
	CHECK(cuMemcpyDtoHAsync(hy, y, n * 4, b));
	CHECK(cuEventRecord(bdone, b));

	/* the spin is still running: nothing downstream of it can be complete */
	EXPECT_RESULT(cuEventQuery(done), CUDA_ERROR_NOT_READY);
	EXPECT_RESULT(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
	CHECK(cuEventSynchronize(bdone));
	CHECK(cuEventQuery(done));
	CHECK(cuStreamQuery(b));
	CHECK(cuEventElapsedTime(&ms, start, done));
	EXPECT(ms >= SPIN_MS * 0.9f && ms < SPIN_MS * 20, "elapsed %.3f ms for a %d ms spin", ms,
	       SPIN_MS);
	EXPECT_RESULT(cuEventElapsedTime(&ms, start, bdone), CUDA_ERROR_INVALID_HANDLE);

	for (unsigned long long i = 0; i < n; i++) {
		unsigned want = seed ^ (unsigned)(i * 2654435761u);
		float f;
		EXPECT(hx[i] == want, "x[%llu] = %08x want %08x", i, hx[i], want);
		memcpy(&f, &want, 4);
		f = f * sc + tc;
		EXPECT(memcmp(&hy[i], &f, 4) == 0 || (hy[i] != hy[i] && f != f),
		       "y[%llu] = %g want %g", i, hy[i], f);
	}

	/* the legacy NULL stream orders itself after blocking streams */
	unsigned seed2 = 99;
	void *f2[] = {&x, &seed2, (void *)&n};
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nb, sargs, NULL));
	CHECK(cuLaunchKernel(fill, 256, 1, 1, 256, 1, 1, 0, nb, f2, NULL));
	CHECK(cuMemcpyDtoH(hx, x, n * 4)); /* NULL stream: waits for nb */
	for (unsigned long long i = 0; i < n; i++)
		EXPECT(hx[i] == (seed2 ^ (unsigned)(i * 2654435761u)), "NULL stream x[%llu]", i);

	/* sets of pinned host memory (XLA sets flags there): in stream order, behind a spin */
	unsigned *hs;
	CHECK(cuMemHostAlloc((void **)&hs, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	memset(hs, 0x11, 4096);
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, sargs, NULL));
	CHECK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)hs, 0xdeadbeefu, 512, a));
	CHECK(cuMemsetD2D16Async((CUdeviceptr)(uintptr_t)(hs + 512), 256, 0x5a5a, 64, 4, a));
	CHECK(cuStreamSynchronize(a));
	for (int i = 0; i < 512; i++)
		EXPECT(hs[i] == 0xdeadbeefu, "host set word %d: %#x", i, hs[i]);
	for (int row = 0; row < 4; row++)
		for (int i = 0; i < 256; i++) {
			unsigned char v = ((unsigned char *)(hs + 512))[row * 256 + i];
			EXPECT(v == (i < 128 ? 0x5a : 0x11), "host 2D set row %d byte %d: %#x", row, i, v);
		}
	CHECK(cuMemsetD8((CUdeviceptr)(uintptr_t)hs, 0x7f, 4096)); /* synchronous: done on return */
	for (int i = 0; i < 1024; i++)
		EXPECT(hs[i] == 0x7f7f7f7fu, "host set (sync) word %d: %#x", i, hs[i]);
	/* copies that name it as device memory (XLA reads its flag word back so) */
	unsigned long long flag = 0, back = 1;
	CHECK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)hs, 0x01020304u, 2, a));
	CHECK(cuMemcpyDtoHAsync(&flag, (CUdeviceptr)(uintptr_t)hs, sizeof(flag), a));
	CHECK(cuStreamSynchronize(a));
	EXPECT(flag == 0x0102030401020304ull, "host flag read back %#llx", flag);
	CHECK(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)(hs + 4), &flag, sizeof(flag)));
	CHECK(cuMemcpyDtoD(x, (CUdeviceptr)(uintptr_t)(hs + 4), sizeof(flag))); /* host -> device */
	CHECK(cuMemcpyDtoD((CUdeviceptr)(uintptr_t)(hs + 8), x, sizeof(flag))); /* device -> host */
	CHECK(cuMemcpyDtoH(&back, (CUdeviceptr)(uintptr_t)(hs + 8), sizeof(back)));
	EXPECT(back == flag, "host -> device -> host %#llx", back);
	CHECK(cuMemFreeHost(hs));

	CHECK(cuStreamDestroy(a));
	CHECK(cuStreamDestroy(b));
	CHECK(cuStreamDestroy(nb));
	CHECK(cuEventDestroy(start));
	CHECK(cuEventDestroy(done));
	CHECK(cuEventDestroy(bdone));
	CHECK(cuMemFreeHost(hy));
	CHECK(cuMemFreeHost(hx));
	CHECK(cuMemFree(x));
	CHECK(cuMemFree(y));
	printf("streams: spin %.1f ms observed, %llu elements OK\n", ms, n);
	return 0;
}
