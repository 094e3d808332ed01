// Mapped pinned host memory that kernels dereference (zero copy), as programs use it: a kernel
// writes its results into host memory the host reads after a synchronisation; a kernel reads
// inputs the host wrote before the launch; and a kernel spins on a host flag until the host
// releases it after the launch, as XLA's GPU timer does (its "delay kernel") before an event is
// waited for. Each allocation is small (the host area, interposer/hostmirror.c). Every value is
// checked; the lines printed are the same natively and through rgpu. The kernels' C twins are
// in tests/simgpu/kernels.c.
#include <cstdint>

#include "rt_check.h"

#define ZC_N 2048u
#define ZC_RELEASE 0x600dcafeu

__global__ void zc_fill(unsigned *out, unsigned n, unsigned salt)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		out[i] = i * 2654435761u ^ salt;
}

// One thread: the sum of in[0..n) into *sum (device memory).
__global__ void zc_sum(const unsigned *in, unsigned n, unsigned long long *sum)
{
	unsigned long long s = 0;
	for (unsigned i = 0; i < n; i++)
		s += in[i];
	*sum = s;
}

// Spin until *flag holds `release` (state 1) or about 20 s of clock pass (state 2).
__global__ void zc_wait(volatile unsigned *flag, unsigned release, unsigned *state,
			long long timeout_cycles)
{
	long long t0 = clock64();
	while (*flag != release) {
		if (clock64() - t0 > timeout_cycles) {
			*state = 2;
			return;
		}
	}
	*state = 1;
}

static unsigned fill_value(unsigned i, unsigned salt)
{
	return i * 2654435761u ^ salt;
}

int main()
{
	unsigned *out, *in, *flag, *dev_out;
	unsigned long long *dsum, sum = 0, want = 0;
	cudaEvent_t ev;
	cudaStream_t s;
	int clock_khz = 0;

	CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	CK(cudaHostAlloc((void **)&out, ZC_N * sizeof(unsigned), cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&in, ZC_N * sizeof(unsigned), cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&flag, 2 * sizeof(unsigned), cudaHostAllocMapped));
	CK(cudaMalloc((void **)&dsum, sizeof(*dsum)));

	// 1. the device writes host memory; the host reads it after synchronising
	CK(cudaHostGetDevicePointer((void **)&dev_out, out, 0));
	if (dev_out != out)
		rt_fail("cudaHostGetDevicePointer gave %p for %p (unified addressing)", dev_out, out);
	zc_fill<<<4, 128>>>(dev_out, ZC_N, 0x5a5a0001u);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	unsigned bad = 0;
	for (unsigned i = 0; i < ZC_N; i++)
		bad += out[i] != fill_value(i, 0x5a5a0001u);
	printf("zero copy: the device wrote %u values into host memory, %u wrong\n", ZC_N, bad);
	if (bad)
		rt_fail("%u of %u values the device wrote into host memory are wrong", bad, ZC_N);

	// 2. the host writes host memory; a kernel launched after reads it
	for (unsigned i = 0; i < ZC_N; i++) {
		in[i] = fill_value(i, 0x0badf00du) >> 8;
		want += in[i];
	}
	zc_sum<<<1, 1>>>(in, ZC_N, dsum);
	CK_LAUNCH();
	CK(cudaMemcpy(&sum, dsum, sizeof(sum), cudaMemcpyDeviceToHost));
	printf("zero copy: the device summed the host's %u values: %llu (want %llu)\n", ZC_N, sum,
	       want);
	if (sum != want)
		rt_fail("the device's sum of host memory: %llu, want %llu", sum, want);

	// 3. a kernel spins on a host flag that the host sets after the launch and an event
	flag[0] = 0;
	flag[1] = 0;
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&ev));
	zc_wait<<<1, 1, 0, s>>>(flag, ZC_RELEASE, flag + 1, (long long)clock_khz * 1000 * 20);
	CK_LAUNCH();
	CK(cudaEventRecord(ev, s));
	flag[0] = ZC_RELEASE;
	CK(cudaEventSynchronize(ev));
	printf("zero copy: the spinning kernel %s\n",
	       flag[1] == 1 ? "saw the host's release" : flag[1] == 2 ? "timed out" : "left no state");
	if (flag[1] != 1)
		rt_fail("the spinning kernel's state: %u, want 1 (released)", flag[1]);

	// the same memory again, after the first regions are freed and made anew
	CK(cudaFreeHost(out));
	CK(cudaHostAlloc((void **)&out, 64, cudaHostAllocMapped));
	zc_fill<<<1, 16>>>(out, 16, 7u);
	CK_LAUNCH();
	CK(cudaStreamSynchronize(0));
	bad = 0;
	for (unsigned i = 0; i < 16; i++)
		bad += out[i] != fill_value(i, 7u);
	printf("zero copy: a new region, %u wrong of 16\n", bad);
	if (bad)
		rt_fail("%u of 16 values in a new region are wrong", bad);

	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(out));
	CK(cudaFreeHost(in));
	CK(cudaFreeHost(flag));
	CK(cudaFree(dsum));
	return rt_done("rt_zerocopy", "mapped host memory");
}
