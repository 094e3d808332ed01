// cudaDeviceReset in the middle of a program. A reset destroys the primary context, so
// afterwards the same kernel must launch again, its __device__ data must start from its
// initial value, and memory can be allocated again, as natively. (Through rgpu the worker
// gives up its own reference on the context and takes it back: server/staging.c,
// srv_base_ctx_renew.) A sticky fault is not tested: CUDA documents that the process must end.
#include "rt_check.h"

__device__ unsigned g_out[64];
__device__ unsigned g_seed = 5;

__global__ void reset_fill(unsigned k)
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
	unsigned *d;
	CK(cudaMalloc(&d, 64));
	reset_fill<<<1, 64>>>(1);
	CK(cudaDeviceSynchronize());
	check_fill(1, 5, "before a reset");

	CK(cudaDeviceReset()); // the allocation and the globals' values go with the context
	reset_fill<<<1, 64>>>(2);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	check_fill(2, 5, "after a reset");

	CK(cudaMalloc(&d, 64));
	CK(cudaFree(d));
	printf("rt_reset: after a reset the globals start fresh: OK\n");
	return 0;
}
