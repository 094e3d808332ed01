// A failed device assert, as an unmodified program sees it: the driver's message on stderr
// ("FILE:LINE: FUNCTION: block: [...], thread: [...] Assertion `EXPR` failed."), and
// cudaErrorAssert from the next synchronisation and from every one after it (the error is
// sticky: the context is unusable). Before it, a kernel's printf line reaches stdout as usual.
// The ctest compares the whole stdout with rt_assert.expected and looks for the message on
// stderr; tests/gpu/run.sh compares the whole output (stdout and stderr in one file) with the
// native run's. The kernels' C twins are in tests/simgpu/kernels.c.
#include <cassert>

#include "rt_check.h"

__global__ void say(int v)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		printf("say: %d\n", v);
}

// One thread of one block fails: one message.
__global__ void fail_once(int v)
{
	if (blockIdx.x == 1 && threadIdx.x == 2)
		assert(v != 7); // line 22: the twin in tests/simgpu/kernels.c names it
}

int main()
{
	cudaError_t e1, e2;
	void *p;

	printf("rt_assert: the host prints first\n");
	CK(cudaMalloc(&p, 256)); // not a launch first: see rt_printf.cu
	say<<<1, 1>>>(1);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	fail_once<<<2, 4>>>(6); // no assert fails
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	printf("host: fail_once(6) passed\n");
	// The message goes to stderr. Where stdout and stderr share one file (2>&1), their order
	// depends on stdio's buffering, natively as through rgpu: the program flushes stdout first.
	fflush(stdout);
	fail_once<<<2, 4>>>(7);
	CK_LAUNCH();
	e1 = cudaDeviceSynchronize();
	e2 = cudaDeviceSynchronize();
	printf("host: cudaDeviceSynchronize after the assert: %s, then %s\n", cudaGetErrorName(e1),
	       cudaGetErrorName(e2));
	if (e1 != cudaErrorAssert || e2 != cudaErrorAssert)
		rt_fail("a failed device assert: %s then %s, want cudaErrorAssert twice",
			cudaGetErrorName(e1), cudaGetErrorName(e2));
	return rt_done("rt_assert", "device assert");
}
