// Stream capture into a CUDA graph: memset, kernel, device-to-device copy, kernel, captured
// in global mode on a non-blocking stream, instantiated and launched three times. The graph
// adds a fixed amount to an accumulator, so the result says how many times it ran (exactly
// three), that capturing ran nothing, and that the memset is replayed each time (without it
// the scratch buffer would grow from one launch to the next). As PyTorch does, the graph is
// destroyed once instantiated: the executable graph outlives it, and the launches are timed
// with two events (so the job's largest state log holds an executable graph without its graph,
// which the replay test must rebuild from the capture journal).
#include "rt_check.h"

__global__ void add_index(unsigned *t, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		t[i] += (unsigned)i;
}

__global__ void accumulate(unsigned *acc, const unsigned *t, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		acc[i] += t[i] * 3u;
}

static void expect_capturing(cudaStream_t s, cudaStreamCaptureStatus want, const char *when)
{
	cudaStreamCaptureStatus st;
	cudaError_t e = cudaStreamIsCapturing(s, &st);

	if (e != cudaSuccess)
		rt_fail("cudaStreamIsCapturing %s: %s", when, cudaGetErrorName(e));
	else if (st != want)
		rt_fail("cudaStreamIsCapturing %s = %d, want %d", when, (int)st, (int)want);
}

int main()
{
	const int n = 100003, launches = 3;
	const size_t bytes = n * sizeof(unsigned);
	unsigned *acc, *tmp, *tmp2;
	unsigned *init = new unsigned[n], *want = new unsigned[n], *got = new unsigned[n];
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;

	for (int i = 0; i < n; i++) {
		init[i] = (unsigned)i * 0x9e3779b9u;
		// one launch: tmp = 0x01010101 + i, acc += 3 * tmp
		want[i] = init[i] + (unsigned)launches * 3u * (0x01010101u + (unsigned)i);
	}
	CK(cudaMalloc(&acc, bytes));
	CK(cudaMalloc(&tmp, bytes));
	CK(cudaMalloc(&tmp2, bytes));
	CK(cudaMemcpy(acc, init, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemset(tmp, 0x77, bytes));
	CK(cudaMemset(tmp2, 0x77, bytes));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	expect_capturing(s, cudaStreamCaptureStatusNone, "before the capture");
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	expect_capturing(s, cudaStreamCaptureStatusActive, "inside the capture");
	CK(cudaMemsetAsync(tmp, 0x01, bytes, s));
	add_index<<<(n + 255) / 256, 256, 0, s>>>(tmp, n);
	CK_LAUNCH();
	CK(cudaMemcpyAsync(tmp2, tmp, bytes, cudaMemcpyDeviceToDevice, s));
	accumulate<<<(n + 127) / 128, 128, 0, s>>>(acc, tmp2, n);
	CK_LAUNCH();
	CK(cudaStreamEndCapture(s, &graph));
	expect_capturing(s, cudaStreamCaptureStatusNone, "after the capture");
	// one node per captured operation: memset, kernel, copy, kernel
	size_t nodes = 0;
	CK(cudaGraphGetNodes(graph, nullptr, &nodes));
	if (nodes != 4)
		rt_fail("the captured graph has %zu nodes, want 4", nodes);

	// capturing ran nothing
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(got, acc, bytes, cudaMemcpyDeviceToHost));
	rt_expect_u32("acc after capture", got, init, n);

	CK(cudaGraphInstantiate(&exec, graph, 0));
	CK(cudaGraphDestroy(graph));
	cudaEvent_t t0, t1;
	float ms = -1;
	CK(cudaEventCreate(&t0));
	CK(cudaEventCreate(&t1));
	CK(cudaEventRecord(t0, s));
	for (int i = 0; i < launches; i++)
		CK(cudaGraphLaunch(exec, s));
	CK(cudaEventRecord(t1, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaEventElapsedTime(&ms, t0, t1));
	if (!(ms >= 0))
		rt_fail("the launches took %f ms", (double)ms);
	CK(cudaEventDestroy(t0));
	CK(cudaEventDestroy(t1));
	CK(cudaMemcpy(got, acc, bytes, cudaMemcpyDeviceToHost));
	rt_expect_u32("acc after 3 launches", got, want, n);
	CK(cudaGraphExecDestroy(exec));

	CK(cudaStreamDestroy(s));
	CK(cudaFree(acc));
	CK(cudaFree(tmp));
	CK(cudaFree(tmp2));
	delete[] init;
	delete[] want;
	delete[] got;
	return rt_done("rt_graph", "4 captured nodes x 3 launches");
}
