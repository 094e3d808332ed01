/*
 * Device code of the test programs' kernels. Each kernel has a C twin in tests/simgpu/kernels.c
 * that computes exactly the same result, so the same programs run on a GPU and on simgpu.
 * extern "C" keeps the names unmangled; the parameter lists are chosen to exercise packing
 * (sizes 1 to 4000 bytes, alignments 1 to 8).
 */
#include <stdint.h>

struct p48 {
	int a[12];
};
struct p4000 {
	unsigned char b[4000];
};

__device__ int g_counter;
__device__ float g_table[256];

extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

extern "C" __global__ void scale_add(float *x, float s, float t, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * s + t;
}

extern "C" __global__ void fill_u32(unsigned *x, unsigned seed, unsigned long long n)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		x[i] = seed ^ (unsigned)(i * 2654435761u);
}

/* graphnodes.c: in-place steps whose order shows in the result (x * mul + add does not commute) */
extern "C" __global__ void affine_u32(unsigned *x, unsigned mul, unsigned add, unsigned long long n)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		x[i] = x[i] * mul + add;
}

extern "C" __global__ void empty_kernel(void)
{
}

extern "C" __global__ void spin_ns(unsigned long long ns)
{
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
}

extern "C" __global__ void add_counter(int v)
{
	atomicAdd(&g_counter, v);
}

extern "C" __global__ void table_sum(float *out)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		float s = 0.0f;
		for (int i = 0; i < 256; i++)
			s += g_table[i];
		out[0] = s;
	}
}

extern "C" __global__ void mixed_params(char c, short s, struct p48 m, struct p4000 big, int i,
					double d, unsigned long long *out)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		long long sm = 0, sb = 0;
		for (int k = 0; k < 12; k++)
			sm += m.a[k];
		for (int k = 0; k < 4000; k++)
			sb += big.b[k];
		out[0] = (unsigned long long)(long long)c;
		out[1] = (unsigned long long)(long long)s;
		out[2] = (unsigned long long)sm;
		out[3] = (unsigned long long)sb;
		out[4] = (unsigned long long)(long long)i;
		out[5] = (unsigned long long)(long long)(d * 1000);
	}
}

/*
 * Conditional graph nodes (test_simgpu_graph): the value of handle h, set from device code.
 * One thread sets it; the others do nothing.
 */
extern "C" __global__ void cond_set(cudaGraphConditionalHandle h, unsigned v)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		cudaGraphSetConditional(h, v);
}

/* the value x[0] % mod: which body of a SWITCH runs, whether an IF's */
extern "C" __global__ void cond_pick(const unsigned *x, unsigned mod, cudaGraphConditionalHandle h)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		cudaGraphSetConditional(h, x[0] % mod);
}

/*
 * One turn of a WHILE loop counting down: c[0] goes down by one, c[1] keeps a trace of the
 * values it took (their order shows), and the loop goes on while c[0] is not zero.
 */
extern "C" __global__ void cond_countdown(unsigned *c, cudaGraphConditionalHandle h)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		c[0] -= 1;
		c[1] = c[1] * 3 + c[0];
		cudaGraphSetConditional(h, c[0] != 0);
	}
}
