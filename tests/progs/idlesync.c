/*
 * Synchronizing after synchronous copies (issue 14). rgpu answers cuCtxSynchronize and
 * cuStreamSynchronize itself when the worker's last reply said the context had nothing
 * pending and nothing was sent since (server/exec.c, "Whether a context is idle"). This
 * checks that such a synchronization still waits for everything it must: a kernel spinning
 * on another stream, an asynchronous copy queued behind it, a kernel on the same stream; and
 * that the copies' bytes are right throughout. Natively it passes the same way.
 */
#include "common.h"

#define SPIN_MS 300
#define N (1u << 20) /* words */

static CUfunction spin, fill;

/* a SPIN_MS kernel on s, then the fill of d with seed behind it on s */
static void busy(CUstream s, CUdeviceptr d, unsigned seed)
{
	unsigned long long ns = SPIN_MS * 1000000ull, n = N;
	void *sargs[] = {&ns};
	void *fargs[] = {&d, &seed, &n};
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL));
	CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, s, fargs, NULL));
}

static void expect_filled(const unsigned *h, unsigned seed, const char *what)
{
	for (unsigned i = 0; i < N; i++)
		EXPECT(h[i] == (seed ^ (unsigned)(i * 2654435761u)), "%s: word %u is %#x", what, i,
		       h[i]);
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUstream b;
	CUdeviceptr d, e;
	unsigned *h, *g, *p = malloc(N * 4);
	double t0, el;

	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&d, N * 4));
	CHECK(cuMemAlloc(&e, N * 4));
	CHECK(cuMemAllocHost((void **)&h, N * 4));
	CHECK(cuMemAllocHost((void **)&g, N * 4));
	EXPECT(p != NULL, "malloc");

	/* 1. copies each followed by a synchronization, both ways, pinned and pageable */
	for (unsigned r = 0; r < 20; r++) {
		for (unsigned i = 0; i < N; i++)
			h[i] = pattern32(i, r);
		memset(g, 0, N * 4);
		CHECK(cuMemcpyHtoD(d, h, N * 4));
		CHECK(cuCtxSynchronize());
		CHECK(cuMemcpyDtoH(g, d, N * 4));
		CHECK(cuStreamSynchronize(NULL));
		CHECK(cuCtxSynchronize());
		memset(p, 0, N * 4);
		CHECK(cuMemcpyDtoH(p, d, N * 4));
		CHECK(cuCtxSynchronize());
		for (unsigned i = 0; i < N; i++)
			EXPECT(g[i] == h[i] && p[i] == h[i], "round %u: word %u is %#x / %#x, sent %#x",
			       r, i, g[i], p[i], h[i]);
	}

	/* 2. a synchronous copy on the NULL stream, then cuCtxSynchronize: it waits for b */
	t0 = now_s();
	busy(b, e, 0x51);
	CHECK(cuMemcpyHtoD(d, h, N * 4));
	CHECK(cuCtxSynchronize());
	el = now_s() - t0;
	EXPECT(el >= SPIN_MS * 0.9e-3, "cuCtxSynchronize returned %.3f s after a %d ms kernel", el,
	       SPIN_MS);
	EXPECT_RESULT(cuStreamQuery(b), CUDA_SUCCESS);
	CHECK(cuMemcpyDtoH(g, e, N * 4));
	expect_filled(g, 0x51, "after cuCtxSynchronize");

	/* 3. the same, with a device-to-host copy and cuStreamSynchronize(b) */
	t0 = now_s();
	busy(b, e, 0x52);
	CHECK(cuMemcpyDtoH(g, d, N * 4));
	CHECK(cuStreamSynchronize(b));
	el = now_s() - t0;
	EXPECT(el >= SPIN_MS * 0.9e-3, "cuStreamSynchronize returned %.3f s after a %d ms kernel",
	       el, SPIN_MS);
	CHECK(cuMemcpyDtoH(g, e, N * 4));
	expect_filled(g, 0x52, "after cuStreamSynchronize");

	/* 4. an asynchronous copy queued on b behind the kernel lands before cuCtxSynchronize
	 * returns, though a synchronous copy came between */
	memset(h, 0, N * 4);
	busy(b, e, 0x53);
	CHECK(cuMemcpyDtoHAsync(h, e, N * 4, b));
	CHECK(cuMemcpyHtoD(d, g, N * 4));
	CHECK(cuCtxSynchronize());
	expect_filled(h, 0x53, "an asynchronous copy after cuCtxSynchronize");

	/* 5. a kernel on the copy's own stream, after a synchronization */
	CHECK(cuMemcpyHtoD(d, g, N * 4));
	CHECK(cuCtxSynchronize());
	busy(NULL, e, 0x54);
	CHECK(cuCtxSynchronize());
	CHECK(cuMemcpyDtoH(p, e, N * 4));
	expect_filled(p, 0x54, "a kernel on the NULL stream");

	CHECK(cuMemFreeHost(h));
	CHECK(cuMemFreeHost(g));
	CHECK(cuMemFree(d));
	CHECK(cuMemFree(e));
	CHECK(cuStreamDestroy(b));
	free(p);
	printf("idlesync ok\n");
	return 0;
}
