/*
 * Two threads retaining and releasing the primary context at once: one drops the last
 * reference (the context is torn down) while the other takes it again, over and over. A
 * thread that retained must always get a working context (an allocation, a set, a copy back),
 * as natively, where retain and release are thread-safe. ROUNDS rounds each.
 */
#include <pthread.h>

#include "common.h"

#define ROUNDS 200

static CUdevice dev;

static void *rounds(void *arg)
{
	unsigned base = (unsigned)(uintptr_t)arg, back[64];
	for (unsigned i = 0; i < ROUNDS; i++) {
		CUcontext c;
		CUdeviceptr d;
		CHECK(cuDevicePrimaryCtxRetain(&c, dev));
		CHECK(cuCtxSetCurrent(c));
		CHECK(cuMemAlloc(&d, sizeof(back)));
		CHECK(cuMemsetD32(d, base + i, 64));
		CHECK(cuMemcpyDtoH(back, d, sizeof(back)));
		for (int k = 0; k < 64; k++)
			EXPECT(back[k] == base + i, "thread %#x round %u: word %d is %#x", base, i, k,
			       back[k]);
		CHECK(cuMemFree(d));
		CHECK(cuDevicePrimaryCtxRelease(dev));
		usleep((i * 37u + base / 4096u) % 300u); /* now one, now the other releases last */
	}
	return NULL;
}

int main(void)
{
	pthread_t t;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	EXPECT(pthread_create(&t, NULL, rounds, (void *)(uintptr_t)0x10000u) == 0,
	       "pthread_create");
	rounds((void *)(uintptr_t)0x20000u);
	EXPECT(pthread_join(t, NULL) == 0, "pthread_join");
	printf("primaryrace: ok, %d rounds\n", ROUNDS);
	return 0;
}
