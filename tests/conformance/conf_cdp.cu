// Dynamic parallelism (CUDA Dynamic Parallelism, CDP2): a parent kernel launches child grids
// from the device, one per row, each child summing its row into the parent's output, and a
// second level where a child launches a grandchild into a tail stream (cudaStreamTailLaunch),
// so the parent's results depend on launches no host ever made. Built as CDP must be: -rdc=true
// with cudadevrt. Integers only, checked exactly against the CPU. simgpu cannot run device-side
// launches: skipped there (exit 77).
#include <vector>

#include "conf.h"

#define PROG "cdp"
#define ROWS 64
#define COLS 1024

__global__ void row_sum(const unsigned *m, unsigned long long *out, int row)
{
	__shared__ unsigned long long part[256];
	unsigned long long s = 0;
	for (int c = threadIdx.x; c < COLS; c += blockDim.x)
		s += m[(size_t)row * COLS + c];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[row] = part[0];
}

// runs after its parent grid (a tail launch): doubles the parent's row result
__global__ void double_it(unsigned long long *out, int row)
{
	out[row] *= 2;
}

__global__ void row_then_double(const unsigned *m, unsigned long long *out, int row)
{
	row_sum<<<1, 256>>>(m, out, row);
	double_it<<<1, 1, 0, cudaStreamTailLaunch>>>(out, row);
}

__global__ void parent(const unsigned *m, unsigned long long *sums, unsigned long long *doubled)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= ROWS)
		return;
	row_sum<<<1, 256, 0, cudaStreamFireAndForget>>>(m, sums, row);
	row_then_double<<<1, 1, 0, cudaStreamFireAndForget>>>(m, doubled, row);
}

int main()
{
	conf_skip_on_simulated(PROG, "device-side launches have no C twin");
	std::vector<unsigned> h((size_t)ROWS * COLS);
	for (size_t i = 0; i < h.size(); i++)
		h[i] = (unsigned)(i * 2654435761u) >> 8;
	unsigned *dm;
	unsigned long long *ds, *dd;
	CK(cudaMalloc(&dm, h.size() * sizeof(unsigned)));
	CK(cudaMalloc(&ds, ROWS * sizeof(unsigned long long)));
	CK(cudaMalloc(&dd, ROWS * sizeof(unsigned long long)));
	CK(cudaMemcpy(dm, h.data(), h.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
	CK(cudaMemset(ds, 0, ROWS * sizeof(unsigned long long)));
	CK(cudaMemset(dd, 0, ROWS * sizeof(unsigned long long)));
	parent<<<2, 32>>>(dm, ds, dd);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	std::vector<unsigned long long> sums(ROWS), doubled(ROWS), want(ROWS);
	CK(cudaMemcpy(sums.data(), ds, ROWS * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(doubled.data(), dd, ROWS * sizeof(unsigned long long),
		      cudaMemcpyDeviceToHost));
	for (int r = 0; r < ROWS; r++) {
		unsigned long long s = 0;
		for (int c = 0; c < COLS; c++)
			s += h[(size_t)r * COLS + c];
		want[r] = s;
		if (sums[r] != s)
			conf_fail("row %d: child sum %llu, want %llu", r, sums[r], s);
		if (doubled[r] != 2 * s)
			conf_fail("row %d: tail-launched double %llu, want %llu", r, doubled[r], 2 * s);
	}
	CK(cudaFree(dm));
	CK(cudaFree(ds));
	CK(cudaFree(dd));
	return conf_result(PROG, "sums=%016llx doubled=%016llx",
			   (unsigned long long)conf_fnv(sums.data(), ROWS * 8),
			   (unsigned long long)conf_fnv(doubled.data(), ROWS * 8));
}
