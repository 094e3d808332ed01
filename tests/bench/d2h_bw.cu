// d2h_bw: the GPU's own device-to-host bandwidth into pinned memory, natively, to compare
// checkpoint throughput with (tests/bench/ckpt_bench.sh):   d2h_bw [MIB]
// Copies MIB (default 1024) five times after a warm-up, timed with events; prints the median.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024, n = mib << 20;
	void *d, *h;
	cudaEvent_t a, b;
	float ms[5];

	if (cudaMalloc(&d, n) || cudaMallocHost(&h, n) || cudaEventCreate(&a) ||
	    cudaEventCreate(&b) || cudaMemset(d, 1, n) || cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)) {
		printf("d2h_bw: CUDA failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	for (int i = 0; i < 5; i++) {
		cudaEventRecord(a);
		cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
		cudaEventRecord(b);
		cudaEventSynchronize(b);
		cudaEventElapsedTime(&ms[i], a, b);
	}
	std::sort(ms, ms + 5);
	printf("device-to-host %.2f GB/s (%zu MiB, pinned, median of 5)\n", n / (ms[2] * 1e6), mib);
	return 0;
}
