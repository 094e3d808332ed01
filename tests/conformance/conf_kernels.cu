// One kernel program, built the ways real projects build (tests/conformance/CMakeLists.txt):
// plain nvcc, -rdc=true with a device link, CMake separable compilation, -G, -lineinfo, a
// fatbin of several architectures, PTX only. Each build prints the same result line.
//
// saxpy (y = a*x + y) over a patterned vector, and a reduction of a patterned integer vector
// weighted by a __device__ variable set with cudaMemcpyToSymbol, into a __device__ total read
// back with cudaMemcpyFromSymbol. Both are checked bit for bit against the CPU. Also asks
// cudaFuncGetAttributes, cudaFuncSetAttribute and the occupancy calculator about the kernels,
// which need the module's functions as much as a launch does.
//
// simgpu runs the kernels through their C twins (tests/simgpu/kernels.c: conf_saxpy,
// conf_reduce).
#include "conf.h"

#ifndef CONF_VARIANT
#define CONF_VARIANT "kernels"
#endif

#ifdef CONF_SEPARATE
extern __device__ unsigned conf_scale;
extern __device__ unsigned long long conf_total;
extern __constant__ unsigned conf_table[4];
extern __device__ float conf_axpy(float a, float x, float y);
extern __device__ unsigned long long conf_weight(unsigned v);
#else
#include "conf_device.cu"
#endif

#define BLOCK 256

__global__ void conf_saxpy(int n, float a, const float *x, float *y)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		y[i] = conf_axpy(a, x[i], y[i]);
}

// Launched with BLOCK threads per block: a tree in shared memory, one atomic per block.
__global__ void conf_reduce(const unsigned *v, int n)
{
	__shared__ unsigned long long part[BLOCK];
	unsigned long long s = 0;

	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		s += conf_weight(v[i]);
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = BLOCK / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(&conf_total, part[0]);
}

int main()
{
	const int n = 100003; // not a multiple of the block
	const float a = 1.8125f;
	const unsigned scale = 2654435761u;
	float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
	float *ref = (float *)malloc(n * sizeof(float));
	unsigned *hv = (unsigned *)malloc(n * sizeof(unsigned));
	unsigned long long want = 0, total = 0, zero = 0;
	unsigned table[4];
	float *dx, *dy;
	unsigned *dv;

	for (int i = 0; i < n; i++) {
		hx[i] = (float)(i % 1000) * 0.001953125f - 0.75f;
		hy[i] = (float)((i * 7) % 501) * 0.25f;
		hv[i] = (unsigned)i * 2246822519u ^ 0x5bd1e995u;
		ref[i] = fmaf(a, hx[i], hy[i]);
		want += (unsigned long long)hv[i] * scale;
	}
	CK(cudaMalloc(&dx, n * sizeof(float)));
	CK(cudaMalloc(&dy, n * sizeof(float)));
	CK(cudaMalloc(&dv, n * sizeof(unsigned)));
	CK(cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dv, hv, n * sizeof(unsigned), cudaMemcpyHostToDevice));

	// what the runtime asks of the module besides launches
	cudaFuncAttributes attr;
	int blocks = 0;
	CK(cudaFuncGetAttributes(&attr, conf_reduce));
	if (attr.maxThreadsPerBlock < BLOCK || attr.numRegs <= 0)
		conf_fail("conf_reduce: maxThreadsPerBlock %d, numRegs %d", attr.maxThreadsPerBlock,
			  attr.numRegs);
	if (attr.sharedSizeBytes != BLOCK * sizeof(unsigned long long))
		conf_fail("conf_reduce: %zu bytes of static shared memory, want %zu",
			  attr.sharedSizeBytes, BLOCK * sizeof(unsigned long long));
	CK(cudaFuncSetAttribute(conf_saxpy, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, conf_reduce, BLOCK, 0));
	if (blocks <= 0)
		conf_fail("occupancy of conf_reduce: %d blocks per multiprocessor", blocks);

	CK(cudaMemcpyFromSymbol(table, conf_table, sizeof(table)));
	if (table[0] != 0x9e3779b9u || table[3] != 0x5ced1b2du)
		conf_fail("conf_table = {%#x, ..., %#x}: not the image's initialiser", table[0],
			  table[3]);
	CK(cudaMemcpyToSymbol(conf_scale, &scale, sizeof(scale)));
	CK(cudaMemcpyToSymbol(conf_total, &zero, sizeof(zero)));

	conf_saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, a, dx, dy);
	CK_LAUNCH();
	conf_reduce<<<64, BLOCK>>>(dv, n); // fewer threads than elements: the loop strides
	CK_LAUNCH();
	CK(cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
	CK(cudaMemcpyFromSymbol(&total, conf_total, sizeof(total)));

	if (memcmp(hy, ref, n * sizeof(float))) {
		for (int i = 0, bad = 0; i < n && bad < 5; i++)
			if (memcmp(&hy[i], &ref[i], sizeof(float)))
				conf_fail("y[%d] = %.9g, want %.9g", i, hy[i], ref[i]), bad++;
	}
	if (total != want)
		conf_fail("total = %llu, want %llu", total, want);
	CK(cudaFree(dx));
	CK(cudaFree(dy));
	CK(cudaFree(dv));
	int rc = conf_result("kernels_" CONF_VARIANT, "saxpy=%016llx total=%llu",
			     (unsigned long long)conf_fnv(hy, n * sizeof(float)), total);
	free(hx);
	free(hy);
	free(ref);
	free(hv);
	return rc;
}
