// A program whose very first CUDA call is a kernel launch: the runtime then loads its code
// (cuLibraryLoadData) before any context is current, and sets up the context inside that
// launch. The kernel and its __device__ data must work as natively.
#include "rt_check.h"

__device__ unsigned g_out[64];
__device__ unsigned g_seed = 5;

// each thread mixes the seed into its slot; the kernel bumps the seed for the next launch
__global__ void first_fill(unsigned k)
{
	unsigned t = threadIdx.x;
	g_out[t] = g_seed * 2654435761u + k * 40503u + t;
	__syncthreads();
	if (t == 0)
		g_seed += 1;
}

static void check_fill(unsigned k, unsigned seed, const char *when)
{
	unsigned h[64], s = 0;
	CK(cudaMemcpyFromSymbol(h, g_out, sizeof(h)));
	CK(cudaMemcpyFromSymbol(&s, g_seed, sizeof(s)));
	for (unsigned t = 0; t < 64; t++)
		if (h[t] != seed * 2654435761u + k * 40503u + t) {
			fprintf(stderr, "FAIL %s: slot %u is %u\n", when, t, h[t]);
			exit(1);
		}
	if (s != seed + 1) {
		fprintf(stderr, "FAIL %s: seed %u, want %u\n", when, s, seed + 1);
		exit(1);
	}
}

int main(void)
{
	first_fill<<<1, 64>>>(1); // the first CUDA call of the process
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	check_fill(1, 5, "first launch");
	first_fill<<<1, 64>>>(2);
	CK(cudaDeviceSynchronize());
	check_fill(2, 6, "second launch");

	printf("rt_first_launch: a launch as the first call, then another: OK\n");
	return 0;
}
