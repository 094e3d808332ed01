/*
 * Copies from two threads at once: one thread reads 48 MiB back through pageable memory (a
 * synchronous copy, larger than one staging buffer) behind a 300 ms kernel, while another
 * thread, meanwhile, queues three 1 MiB pinned host-to-device copies on its own stream. Over
 * TCP the worker's reader puts such copies in the staging buffers the synchronous copy needs
 * next: it must leave it enough, or the job hangs. Every byte is checked both ways. Natively
 * it passes the same way.
 */
#include <pthread.h>

#include "common.h"

#define BIG (48u << 20)
#define SMALL (1u << 20)
#define NSMALL 3

static CUcontext ctx;
static CUdeviceptr small_d[NSMALL];
static unsigned *small_h;
static volatile int big_started;

static void *small_copies(void *arg)
{
	CUstream s;
	(void)arg;
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	while (!big_started)
		usleep(1000);
	usleep(50000); /* the read-back is waiting for its kernel by now */
	for (int k = 0; k < NSMALL; k++)
		CHECK(cuMemcpyHtoDAsync(small_d[k], small_h + (size_t)k * (SMALL / 4), SMALL, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuStreamDestroy(s));
	return NULL;
}

int main(void)
{
	CUmodule mod = setup(&ctx);
	CUfunction spin, fill;
	CUstream s;
	CUdeviceptr big_d;
	pthread_t t;
	unsigned *big_h = malloc(BIG), *back = malloc(SMALL);
	unsigned long long ns = 300000000ull, n = BIG / 4;
	unsigned seed = 0xc0ffee;
	void *sargs[] = {&ns}, *fargs[] = {&big_d, &seed, &n};

	EXPECT(big_h && back, "malloc");
	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&big_d, BIG));
	CHECK(cuMemAllocHost((void **)&small_h, (size_t)SMALL * NSMALL));
	for (int k = 0; k < NSMALL; k++) {
		CHECK(cuMemAlloc(&small_d[k], SMALL));
		for (unsigned i = 0; i < SMALL / 4; i++)
			small_h[(size_t)k * (SMALL / 4) + i] = pattern32(i, 100u + (unsigned)k);
	}
	EXPECT(pthread_create(&t, NULL, small_copies, NULL) == 0, "pthread_create");

	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL));
	CHECK(cuLaunchKernel(fill, BIG / 4 / 256, 1, 1, 256, 1, 1, 0, s, fargs, NULL));
	big_started = 1;
	/* into pageable memory: complete when it returns */
	CHECK(cuMemcpyDtoHAsync(big_h, big_d, BIG, s));
	for (unsigned i = 0; i < BIG / 4; i++)
		EXPECT(big_h[i] == (seed ^ (unsigned)(i * 2654435761u)), "read-back word %u is %#x",
		       i, big_h[i]);
	EXPECT(pthread_join(t, NULL) == 0, "pthread_join");
	for (int k = 0; k < NSMALL; k++) {
		CHECK(cuMemcpyDtoH(back, small_d[k], SMALL));
		for (unsigned i = 0; i < SMALL / 4; i++)
			EXPECT(back[i] == pattern32(i, 100u + (unsigned)k), "copy %d word %u is %#x",
			       k, i, back[i]);
	}
	printf("copymix: ok, %u MiB read back while %d pinned copies went in\n", BIG >> 20,
	       NSMALL);
	free(big_h);
	free(back);
	return 0;
}
