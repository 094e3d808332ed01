// __managed__ variables: the host reads their initial values, a kernel changes them, the host
// reads the kernel's results and writes its own, a kernel sees those; a small counter, an array
// that shares its blocks with it, and one of 2.4 MB that spans several blocks. The lines printed
// are the same natively and through rgpu. The kernels' C twins are in tests/simgpu/kernels.c.
#include <cstdint>

#include "rt_check.h"

__managed__ int mv_counter = 5;
__managed__ float mv_small[1000];
__managed__ unsigned long long mv_big[300000];

// every thread adds k to its element of mv_small and mv_big; thread 0 adds k to the counter
__global__ void mv_step(int k)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i == 0)
		mv_counter += k;
	if (i < 1000)
		mv_small[i] += (float)k;
	for (unsigned j = i; j < 300000; j += gridDim.x * blockDim.x)
		mv_big[j] += (unsigned long long)k * j;
}

int main(void)
{
	CK(cudaSetDevice(0));
	printf("initial counter: %d\n", mv_counter);
	for (unsigned i = 0; i < 1000; i++)
		mv_small[i] = (float)i;
	for (unsigned j = 0; j < 300000; j++)
		mv_big[j] = j;
	mv_step<<<64, 256>>>(3);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	unsigned bad = 0;
	for (unsigned i = 0; i < 1000; i++)
		bad += mv_small[i] != (float)i + 3.0f;
	for (unsigned j = 0; j < 300000; j++)
		bad += mv_big[j] != j + 3ull * j;
	printf("after a kernel: counter %d, %u wrong\n", mv_counter, bad);
	if (mv_counter != 8 || bad)
		rt_fail("after the first kernel: counter %d, %u wrong", mv_counter, bad);
	// the host's turn, then the kernel's again
	mv_counter = 100;
	mv_big[299999] = 7;
	mv_step<<<64, 256>>>(1);
	CK(cudaDeviceSynchronize());
	printf("host writes seen by a kernel: counter %d, last %llu, small[999] %g\n", mv_counter,
	       mv_big[299999], mv_small[999]);
	if (mv_counter != 101 || mv_big[299999] != 7 + 299999ull || mv_small[999] != 1003.0f)
		rt_fail("host writes: counter %d, last %llu", mv_counter, mv_big[299999]);
	cudaPointerAttributes pa;
	CK(cudaPointerGetAttributes(&pa, &mv_counter));
	printf("attributes: type %d (managed %d)\n", (int)pa.type, (int)cudaMemoryTypeManaged);
	if (rt_failures) {
		printf("rt_managed_var: %d checks failed\n", rt_failures);
		return 1;
	}
	printf("rt_managed_var: all checks passed\n");
	return 0;
}
