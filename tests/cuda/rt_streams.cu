// Two non-blocking streams ordered only by an event. Stream A copies pinned input to the
// device and runs a slow kernel (~100 ms of spinning on the GPU) that rewrites it; stream B
// waits for A's event, transforms A's output and copies it back into pinned memory. B's result
// is right only if it ran after A had finished, and A's own copy back proves A's result.
// Also: elapsed time between events on the two streams, and cudaStreamQuery /
// cudaEventQuery == cudaSuccess once everything has been waited for.
#include "rt_check.h"

// Every thread spins first, then rewrites its elements (grid-stride).
__global__ void slow_fill(unsigned *a, int n, long long spin_cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < spin_cycles)
		;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		a[i] = a[i] * 3u + 1u;
}

__global__ void transform(const unsigned *a, unsigned *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		b[i] = (a[i] ^ ((unsigned)i * 2654435761u)) + 7u;
}

int main()
{
	const int n = 1 << 20;
	const size_t bytes = n * sizeof(unsigned);
	const long long spin = 200000000; // ~100 ms at the H200's 1.98 GHz
	unsigned *h_in, *h_a, *h_b, *d_a, *d_b;
	unsigned *want_a = new unsigned[n], *want_b = new unsigned[n];
	cudaStream_t sa, sb;
	cudaEvent_t start, a_done, stop;
	cudaError_t e;
	float ms = -1.0f;

	CK(cudaMallocHost(&h_in, bytes));
	CK(cudaMallocHost(&h_a, bytes));
	CK(cudaMallocHost(&h_b, bytes));
	CK(cudaMalloc(&d_a, bytes));
	CK(cudaMalloc(&d_b, bytes));
	CK(cudaMemset(d_a, 0, bytes));
	CK(cudaMemset(d_b, 0, bytes));
	// the memsets run on the legacy stream, which non-blocking streams do not wait for
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < n; i++) {
		h_in[i] = (unsigned)i ^ 0x5a5a5a5au;
		want_a[i] = h_in[i] * 3u + 1u;
		want_b[i] = (want_a[i] ^ ((unsigned)i * 2654435761u)) + 7u;
	}
	memset(h_a, 0xee, bytes);
	memset(h_b, 0xee, bytes);
	CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	CK(cudaEventCreate(&start));
	CK(cudaEventCreate(&a_done));
	CK(cudaEventCreate(&stop));

	CK(cudaEventRecord(start, sa));
	CK(cudaMemcpyAsync(d_a, h_in, bytes, cudaMemcpyHostToDevice, sa));
	slow_fill<<<132, 256, 0, sa>>>(d_a, n, spin);
	CK_LAUNCH();
	CK(cudaEventRecord(a_done, sa));
	CK(cudaMemcpyAsync(h_a, d_a, bytes, cudaMemcpyDeviceToHost, sa));

	CK(cudaStreamWaitEvent(sb, a_done, 0));
	transform<<<(n + 255) / 256, 256, 0, sb>>>(d_a, d_b, n);
	CK_LAUNCH();
	CK(cudaMemcpyAsync(h_b, d_b, bytes, cudaMemcpyDeviceToHost, sb));
	CK(cudaEventRecord(stop, sb));
	// Not checked: that A is still busy here is likely, not certain.
	e = cudaStreamQuery(sa);
	if (e != cudaSuccess && e != cudaErrorNotReady)
		rt_fail("cudaStreamQuery(A) while busy: %s", cudaGetErrorName(e));
	const bool busy = e == cudaErrorNotReady;

	CK(cudaStreamSynchronize(sb));
	CK(cudaEventSynchronize(stop));
	rt_expect_u32("B's output", h_b, want_b, n);
	CK(cudaStreamSynchronize(sa));
	rt_expect_u32("A's output", h_a, want_a, n);

	CK(cudaEventElapsedTime(&ms, start, stop));
	if (!(ms >= 0.0f))
		rt_fail("cudaEventElapsedTime(start on A, stop on B) = %g ms, want >= 0", ms);
	if ((e = cudaStreamQuery(sa)) != cudaSuccess)
		rt_fail("cudaStreamQuery(A) after sync: %s", cudaGetErrorName(e));
	if ((e = cudaStreamQuery(sb)) != cudaSuccess)
		rt_fail("cudaStreamQuery(B) after sync: %s", cudaGetErrorName(e));
	if ((e = cudaEventQuery(a_done)) != cudaSuccess)
		rt_fail("cudaEventQuery(A's event) after sync: %s", cudaGetErrorName(e));
	if ((e = cudaEventQuery(stop)) != cudaSuccess)
		rt_fail("cudaEventQuery(stop) after sync: %s", cudaGetErrorName(e));

	CK(cudaEventDestroy(start));
	CK(cudaEventDestroy(a_done));
	CK(cudaEventDestroy(stop));
	CK(cudaStreamDestroy(sa));
	CK(cudaStreamDestroy(sb));
	CK(cudaFree(d_a));
	CK(cudaFree(d_b));
	CK(cudaFreeHost(h_in));
	CK(cudaFreeHost(h_a));
	CK(cudaFreeHost(h_b));
	delete[] want_a;
	delete[] want_b;

	char summary[96];
	snprintf(summary, sizeof(summary), "%d elements in order, %.1f ms between events%s", n, ms,
		 busy ? ", A seen busy" : "");
	return rt_done("rt_streams", summary);
}
