/*
 * Pinned host memory named as device memory inside a captured graph: with unified addressing a
 * program may copy to and set memory from cuMemAllocHost through the device-pointer calls
 * (XLA keeps a flag word there), and may capture those calls into a graph. Each launch of the
 * graph must copy the source's bytes as they are then and set the words again, every time;
 * the graph is launched four times (rgpu runs such a copy as a host function, which must stay
 * alive for every launch). Natively it passes the same way.
 */
#include "common.h"

#define WORDS 64

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUstream s;
	CUgraph g;
	CUgraphExec ge;
	unsigned *src, *dst, *set;

	(void)mod;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAllocHost((void **)&src, WORDS * 4));
	CHECK(cuMemAllocHost((void **)&dst, WORDS * 4));
	CHECK(cuMemAllocHost((void **)&set, WORDS * 4));
	memset(src, 0, WORDS * 4);

	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, WORDS * 4, s));
	CHECK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)set, 0x5e7u, WORDS, s));
	CHECK(cuStreamEndCapture(s, &g));
	CHECK(cuGraphInstantiate(&ge, g, 0));
	/* the capture itself did nothing yet */
	for (unsigned i = 0; i < WORDS; i++)
		EXPECT(dst[i] == 0 || dst[i] == src[i], "word %u copied before any launch", i);

	for (unsigned round = 1; round <= 4; round++) {
		for (unsigned i = 0; i < WORDS; i++) {
			src[i] = pattern32(i, round);
			dst[i] = 0;
			set[i] = 0;
		}
		CHECK(cuGraphLaunch(ge, s));
		CHECK(cuStreamSynchronize(s));
		for (unsigned i = 0; i < WORDS; i++) {
			EXPECT(dst[i] == pattern32(i, round), "launch %u: word %u copied as %#x, want %#x",
			       round, i, dst[i], pattern32(i, round));
			EXPECT(set[i] == 0x5e7u, "launch %u: word %u set to %#x", round, i, set[i]);
		}
	}
	CHECK(cuGraphExecDestroy(ge));
	CHECK(cuGraphDestroy(g));
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFreeHost(src));
	CHECK(cuMemFreeHost(dst));
	CHECK(cuMemFreeHost(set));
	printf("hostgraph: ok, 4 launches\n");
	return 0;
}
