// cudaMalloc against a tenant's device memory quota (tests/e2e/quota.sh runs it as a tenant
// with memory = 64M): 48 MiB are granted; 32 MiB more are refused with
// cudaErrorMemoryAllocation, what cudart makes of the driver's CUDA_ERROR_OUT_OF_MEMORY on a full
// GPU; the error is not sticky (the next call succeeds, the 48 MiB keep their bytes); once they
// are freed the 32 MiB are granted.
#include "rt_check.h"

int main()
{
	const size_t MiB = 1 << 20;
	unsigned char *a = nullptr, *b = nullptr;
	static unsigned char h[48 << 20];

	CK(cudaMalloc(&a, 48 * MiB));
	CK(cudaMemset(a, 0x5a, 48 * MiB));
	cudaError_t e = cudaMalloc(&b, 32 * MiB);
	if (e != cudaErrorMemoryAllocation) {
		fprintf(stderr, "FAIL: cudaMalloc of 32 MiB over the quota: %s, want "
				"cudaErrorMemoryAllocation\n", cudaGetErrorName(e));
		return 1;
	}
	printf("rt_quota: 32 MiB over the quota: %s (%d)\n", cudaGetErrorName(e), (int)e);
	e = cudaGetLastError();
	if (e != cudaErrorMemoryAllocation) {
		fprintf(stderr, "FAIL: cudaGetLastError after it: %s\n", cudaGetErrorName(e));
		return 1;
	}
	CK(cudaGetLastError()); // cleared: not sticky
	CK(cudaMemcpy(h, a, 48 * MiB, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < 48 * MiB; i++)
		if (h[i] != 0x5a) {
			fprintf(stderr, "FAIL: byte %zu of the 48 MiB = %#x\n", i, h[i]);
			return 1;
		}
	CK(cudaFree(a));
	CK(cudaMalloc(&b, 32 * MiB));
	CK(cudaMemset(b, 0xa5, 32 * MiB));
	CK(cudaMemcpy(h, b + 32 * MiB - 4096, 4096, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < 4096; i++)
		if (h[i] != 0xa5) {
			fprintf(stderr, "FAIL: byte %zu of the 32 MiB's last page = %#x\n", i, h[i]);
			return 1;
		}
	CK(cudaFree(b));
	printf("rt_quota: 48 MiB granted, 32 MiB more refused, then granted once the 48 were freed\n");
	return 0;
}
