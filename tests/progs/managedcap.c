/*
 * Managed memory and a stream capture: the CPU writes managed memory, a kernel that changes it
 * is captured into a graph (not run), the CPU reads and writes the memory meanwhile (it holds
 * what the CPU wrote: the kernel has not run), then the graph is launched three times and each
 * launch's result is read back on the CPU. Natively it passes the same way.
 */
#include "common.h"

#define WORDS 4096u

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction affine;
	CUstream s;
	CUgraph g;
	CUgraphExec ge;
	CUdeviceptr d;
	unsigned *m, mul = 3, add = 7;
	unsigned long long n = WORDS;

	CHECK(cuModuleGetFunction(&affine, mod, "affine_u32"));
	CHECK(cuStreamCreate(&s, 0));
	CHECK(cuMemAllocManaged(&d, WORDS * 4, CU_MEM_ATTACH_GLOBAL));
	m = (unsigned *)(uintptr_t)d;
	for (unsigned i = 0; i < WORDS; i++)
		m[i] = i;

	void *args[] = {&d, &mul, &add, &n};
	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CHECK(cuLaunchKernel(affine, WORDS / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	/* captured, not run: the CPU's values stand, and it may change them */
	for (unsigned i = 0; i < WORDS; i++)
		EXPECT(m[i] == i, "word %u is %u during the capture", i, m[i]);
	for (unsigned i = 0; i < WORDS; i++)
		m[i] = 2 * i;
	CHECK(cuStreamEndCapture(s, &g));
	CHECK(cuGraphInstantiate(&ge, g, 0));

	unsigned long long want[WORDS];
	for (unsigned i = 0; i < WORDS; i++)
		want[i] = 2 * i;
	for (int round = 0; round < 3; round++) {
		CHECK(cuGraphLaunch(ge, s));
		CHECK(cuStreamSynchronize(s));
		for (unsigned i = 0; i < WORDS; i++) {
			want[i] = (unsigned)(want[i] * 3 + 7);
			EXPECT(m[i] == (unsigned)want[i], "launch %d: word %u is %u, want %u", round,
			       i, m[i], (unsigned)want[i]);
		}
	}
	CHECK(cuGraphExecDestroy(ge));
	CHECK(cuGraphDestroy(g));
	CHECK(cuMemFree(d));
	printf("managedcap: ok, 3 launches\n");
	return 0;
}
