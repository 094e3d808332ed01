// After a sticky fault (a kernel's illegal address) every later call of the program, as it
// sees it: one line per call with the error it returned. The native run's lines are the
// reference; through rgpu they must be the same, including for the calls the interposer
// answers itself (cudaMalloc from the window, pointer attributes). The kernel's C twin is in
// tests/simgpu/kernels.c; rt_sticky.expected is the H100's native output (driver 580).
#include "rt_check.h"

__global__ void sticky_poke(unsigned *p, unsigned v)
{
	*p = v;
}

static void R(const char *what, cudaError_t e)
{
	printf("%s: %s\n", what, cudaGetErrorName(e));
}

int main()
{
	unsigned *a, *b, h = 5;
	void *q = NULL, *hp = NULL;
	cudaStream_t s0, s1;
	cudaEvent_t e0, e1;
	cudaPointerAttributes pa;
	cudaFuncAttributes fa;
	size_t fr, tot;
	int dev = -1, v = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	CK(cudaMalloc((void **)&a, 256));
	CK(cudaMalloc((void **)&b, 256));
	CK(cudaStreamCreate(&s0));
	CK(cudaEventCreate(&e0));
	sticky_poke<<<1, 1>>>(a, 1);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	sticky_poke<<<1, 1>>>((unsigned *)0x10, 2);
	R("launch", cudaGetLastError());
	R("cudaDeviceSynchronize", cudaDeviceSynchronize());
	R("cudaDeviceSynchronize again", cudaDeviceSynchronize());
	R("cudaGetLastError", cudaGetLastError());
	R("cudaPeekAtLastError", cudaPeekAtLastError());
	R("cudaMalloc", cudaMalloc(&q, 256));
	R("cudaFree", cudaFree(b));
	R("cudaMemcpy HtoD", cudaMemcpy(a, &h, 4, cudaMemcpyHostToDevice));
	R("cudaMemcpy DtoH", cudaMemcpy(&h, a, 4, cudaMemcpyDeviceToHost));
	R("cudaMemset", cudaMemset(a, 0, 4));
	R("cudaMemsetAsync", cudaMemsetAsync(a, 0, 4, s0));
	R("cudaStreamCreate", cudaStreamCreate(&s1));
	R("cudaEventCreate", cudaEventCreate(&e1));
	R("cudaEventRecord", cudaEventRecord(e0, s0));
	R("cudaStreamSynchronize", cudaStreamSynchronize(s0));
	R("cudaEventQuery", cudaEventQuery(e0));
	R("cudaStreamQuery", cudaStreamQuery(s0));
	R("cudaGetDevice", cudaGetDevice(&dev));
	R("cudaPointerGetAttributes", cudaPointerGetAttributes(&pa, a));
	R("cudaFuncGetAttributes", cudaFuncGetAttributes(&fa, sticky_poke));
	R("cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));
	R("cudaMallocHost", cudaMallocHost(&hp, 64));
	R("cudaDeviceGetAttribute", cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0));
	sticky_poke<<<1, 1>>>(a, 3);
	R("launch after", cudaGetLastError());
	R("cudaStreamDestroy", cudaStreamDestroy(s0));
	R("cudaEventDestroy", cudaEventDestroy(e0));
	R("cudaDeviceReset", cudaDeviceReset());
	R("cudaMalloc after reset", cudaMalloc(&q, 256));
	R("cudaDeviceSynchronize after reset", cudaDeviceSynchronize());
	R("cudaGetLastError at the end", cudaGetLastError());
	return 0;
}
