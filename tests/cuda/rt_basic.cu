// The runtime API as most programs use it: device properties, cudaMalloc, cudaMemcpy and
// <<<>>> launches of two kernels, checked element by element. Built by nvcc twice: with the
// default static cudart and with -cudart shared.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#define CK(call)                                                                               \
	do {                                                                                   \
		cudaError_t e_ = (call);                                                       \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
				cudaGetErrorString(e_));                                       \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

__global__ void add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void square(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * x[i];
}

int main()
{
	const int n = 1 << 20;
	int count = 0;
	cudaDeviceProp prop;
	CK(cudaGetDeviceCount(&count));
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("%d device(s); device 0: %s, cc %d.%d, %d SMs, %zu MiB\n", count, prop.name,
	       prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 20);
	float *ha = (float *)malloc(n * 4), *hb = (float *)malloc(n * 4), *hc = (float *)malloc(n * 4);
	for (int i = 0; i < n; i++) {
		ha[i] = (float)(i % 977);
		hb[i] = (float)(i % 131) * 0.25f;
	}
	float *a, *b, *c;
	CK(cudaMalloc(&a, n * 4));
	CK(cudaMalloc(&b, n * 4));
	CK(cudaMalloc(&c, n * 4));
	CK(cudaMemcpy(a, ha, n * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, hb, n * 4, cudaMemcpyHostToDevice));
	add<<<(n + 255) / 256, 256>>>(a, b, c, n);
	CK(cudaGetLastError());
	square<<<(n + 255) / 256, 256>>>(c, n);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(hc, c, n * 4, cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++) {
		float want = (ha[i] + hb[i]) * (ha[i] + hb[i]);
		if (hc[i] != want) {
			fprintf(stderr, "FAIL: c[%d] = %g, want %g\n", i, hc[i], want);
			return 1;
		}
	}
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	printf("rt_basic: %d elements OK\n", n);
	free(ha);
	free(hb);
	free(hc);
	return 0;
}
