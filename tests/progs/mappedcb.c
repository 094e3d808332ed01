/*
 * A host function that reads what a kernel just wrote into mapped pinned memory (zero copy:
 * cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP, the kernel writes it through its device
 * pointer, cuLaunchHostFunc behind the kernel checks it on the CPU). 1 MiB, larger than rgpu's
 * host mirror, so rgpu fetches it while the host function runs: three rounds, the main thread
 * waiting with cuStreamQuery (user guide, "Managed memory": a synchronisation meanwhile would
 * hang). Natively it passes the same way.
 */
#include "common.h"

#define WORDS (256u * 1024u) /* 1 MiB */

struct check {
	const unsigned *h;
	unsigned seed;
	volatile unsigned bad; /* words the host function found wrong, or ~0u: it never ran */
};

static void CUDA_CB check_fn(void *arg)
{
	struct check *c = arg;
	unsigned bad = 0;
	for (unsigned i = 0; i < WORDS; i++)
		bad += c->h[i] != (c->seed ^ (unsigned)(i * 2654435761u));
	c->bad = bad;
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction fill;
	CUstream s;
	CUdeviceptr d;
	unsigned *h;
	unsigned long long n = WORDS;

	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuStreamCreate(&s, 0)); /* a blocking stream: the legacy one waits for it */
	CHECK(cuMemHostAlloc((void **)&h, WORDS * 4, CU_MEMHOSTALLOC_DEVICEMAP));
	CHECK(cuMemHostGetDevicePointer(&d, h, 0));
	for (unsigned round = 0; round < 3; round++) {
		struct check c = {.h = h, .seed = 0x1000u + round, .bad = ~0u};
		void *fargs[] = {&d, &c.seed, &n};
		CUresult q;
		CHECK(cuLaunchKernel(fill, WORDS / 256, 1, 1, 256, 1, 1, 0, s, fargs, NULL));
		CHECK(cuLaunchHostFunc(s, check_fn, &c));
		while ((q = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY)
			usleep(1000);
		EXPECT(q == CUDA_SUCCESS, "cuStreamQuery: %s", cu_name(q));
		EXPECT(c.bad == 0, "round %u: the host function found %u words wrong%s", round, c.bad,
		       c.bad == ~0u ? " (it never ran)" : "");
		for (unsigned i = 0; i < WORDS; i++)
			EXPECT(h[i] == (c.seed ^ (unsigned)(i * 2654435761u)),
			       "round %u: word %u is %#x on the main thread", round, i, h[i]);
	}
	CHECK(cuMemFreeHost(h));
	printf("mappedcb: ok, 3 rounds\n");
	return 0;
}
