// Several kinds of kernel through the runtime API: 1D integer arithmetic, a 3D grid of 2D
// blocks indexed with blockIdx.y/z and threadIdx.y, a per-block reduction in dynamic shared
// memory, a template instantiated for two types, and overloads inside a namespace (so the
// mangled names are not trivial). Every result is compared exactly with the host's; a launch
// the device must refuse is refused once and then forgotten by cudaGetLastError().
#include "rt_check.h"

__global__ void isaxpy(int n, unsigned a, const unsigned *x, unsigned *y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

// Each (x, y, z) records its block and thread coordinates, so a wrong grid shows.
__global__ void grid2d(unsigned *out, int width, int height)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < width && y < height)
		out[((size_t)blockIdx.z * height + y) * width + x] =
		    ((unsigned)y << 16) ^ (unsigned)x ^ ((blockIdx.x + 31u * blockIdx.y) << 8) ^
		    (threadIdx.y << 4) ^ (blockIdx.z << 28);
}

// blockDim.x must be a power of two; shared memory holds blockDim.x sums.
__global__ void block_sum(const unsigned *in, unsigned long long *out, int n)
{
	extern __shared__ unsigned long long part[];
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	part[threadIdx.x] = i < n ? in[i] : 0;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			part[threadIdx.x] += part[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = part[0];
}

template <typename T> __global__ void scale_by(T *x, T k, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * k;
}

namespace rtk
{
__global__ void mix(unsigned *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = (x[i] * 2654435761u) ^ (unsigned)i;
}

__global__ void mix(unsigned *x, unsigned salt, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] ^= salt + (unsigned)i;
}
} // namespace rtk

static const int N = 300001; // not a multiple of any block size used

static void test_isaxpy(void)
{
	unsigned *hx = new unsigned[N], *hy = new unsigned[N], *want = new unsigned[N];
	unsigned *got = new unsigned[N], *x, *y;
	const unsigned a = 40503u;

	for (int i = 0; i < N; i++) {
		hx[i] = (unsigned)i * 2246822519u + 7u;
		hy[i] = (unsigned)i ^ 0xdeadbeefu;
		want[i] = a * hx[i] + hy[i];
	}
	CK(cudaMalloc(&x, N * sizeof(unsigned)));
	CK(cudaMalloc(&y, N * sizeof(unsigned)));
	CK(cudaMemcpy(x, hx, N * sizeof(unsigned), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(y, hy, N * sizeof(unsigned), cudaMemcpyHostToDevice));
	isaxpy<<<(N + 127) / 128, 128>>>(N, a, x, y);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got, y, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
	rt_expect_u32("isaxpy y", got, want, N);
	CK(cudaFree(x));
	CK(cudaFree(y));
	delete[] hx;
	delete[] hy;
	delete[] want;
	delete[] got;
}

static void test_grid2d(void)
{
	const int w = 1000, h = 333, depth = 3;
	const dim3 block(16, 8), grid((w + 15) / 16, (h + 7) / 8, depth);
	const size_t count = (size_t)w * h * depth;
	unsigned *want = new unsigned[count], *got = new unsigned[count], *out;

	for (int z = 0; z < depth; z++)
		for (int y = 0; y < h; y++)
			for (int x = 0; x < w; x++)
				want[((size_t)z * h + y) * w + x] =
				    ((unsigned)y << 16) ^ (unsigned)x ^
				    ((unsigned)(x / 16 + 31 * (y / 8)) << 8) ^
				    ((unsigned)(y % 8) << 4) ^ ((unsigned)z << 28);
	CK(cudaMalloc(&out, count * sizeof(unsigned)));
	CK(cudaMemset(out, 0xa5, count * sizeof(unsigned)));
	grid2d<<<grid, block>>>(out, w, h);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got, out, count * sizeof(unsigned), cudaMemcpyDeviceToHost));
	rt_expect_u32("grid2d out", got, want, count);
	CK(cudaFree(out));
	delete[] want;
	delete[] got;
}

static void test_block_sum(void)
{
	const int threads = 256, blocks = (N + threads - 1) / threads;
	unsigned *hin = new unsigned[N], *in;
	unsigned long long *want = new unsigned long long[blocks]();
	unsigned long long *got = new unsigned long long[blocks], *out;

	for (int i = 0; i < N; i++) {
		hin[i] = 0xfff00000u + (unsigned)i * 977u; // large: the sums need 64 bits
		want[i / threads] += hin[i];
	}
	CK(cudaMalloc(&in, N * sizeof(unsigned)));
	CK(cudaMalloc(&out, blocks * sizeof(unsigned long long)));
	CK(cudaMemcpy(in, hin, N * sizeof(unsigned), cudaMemcpyHostToDevice));
	block_sum<<<blocks, threads, threads * sizeof(unsigned long long)>>>(in, out, N);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got, out, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
	rt_expect_u64("block_sum out", got, want, blocks);
	CK(cudaFree(in));
	CK(cudaFree(out));
	delete[] hin;
	delete[] want;
	delete[] got;
}

static void test_templates_and_overloads(void)
{
	int *hi = new int[N], *wi = new int[N], *gi = new int[N], *di;
	double *hd = new double[N], *wd = new double[N], *gd = new double[N], *dd;
	unsigned *hu = new unsigned[N], *wu = new unsigned[N], *gu = new unsigned[N], *du;
	const unsigned salt = 0x9e3779b9u;

	for (int i = 0; i < N; i++) {
		hi[i] = i % 20011 - 10000;
		wi[i] = hi[i] * -37;
		hd[i] = (double)i * 0.125 - 1000.0;
		wd[i] = hd[i] * 1.5;
		hu[i] = (unsigned)i * 0x01000193u;
		wu[i] = ((hu[i] * 2654435761u) ^ (unsigned)i) ^ (salt + (unsigned)i);
	}
	CK(cudaMalloc(&di, N * sizeof(int)));
	CK(cudaMalloc(&dd, N * sizeof(double)));
	CK(cudaMalloc(&du, N * sizeof(unsigned)));
	CK(cudaMemcpy(di, hi, N * sizeof(int), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dd, hd, N * sizeof(double), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(du, hu, N * sizeof(unsigned), cudaMemcpyHostToDevice));
	scale_by<int><<<(N + 255) / 256, 256>>>(di, -37, N);
	CK_LAUNCH();
	scale_by<double><<<(N + 511) / 512, 512>>>(dd, 1.5, N);
	CK_LAUNCH();
	rtk::mix<<<(N + 63) / 64, 64>>>(du, N);
	CK_LAUNCH();
	rtk::mix<<<(N + 1023) / 1024, 1024>>>(du, salt, N);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(gi, di, N * sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(gd, dd, N * sizeof(double), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(gu, du, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
	rt_expect_i32("scale_by<int>", gi, wi, N);
	rt_expect_f64("scale_by<double>", gd, wd, N);
	rt_expect_u32("rtk::mix", gu, wu, N);
	CK(cudaFree(di));
	CK(cudaFree(dd));
	CK(cudaFree(du));
	delete[] hi;
	delete[] wi;
	delete[] gi;
	delete[] hd;
	delete[] wd;
	delete[] gd;
	delete[] hu;
	delete[] wu;
	delete[] gu;
}

// More than 1024 threads per block: the launch fails, cudaGetLastError() reports it once.
// cudart passes the block to cuLaunchKernel unchecked and returns cudaErrorInvalidValue for
// the driver's CUDA_ERROR_INVALID_VALUE: measured natively on the H200 (driver 580.159.04),
// whatever the documentation's cudaErrorInvalidConfiguration suggests.
static const char *test_bad_launch(void)
{
	cudaError_t e, first;

	isaxpy<<<1, 2048>>>(0, 1u, nullptr, nullptr);
	first = cudaGetLastError();
	if (first != cudaErrorInvalidValue)
		rt_fail("launch of 2048 threads per block: %s, want cudaErrorInvalidValue",
			cudaGetErrorName(first));
	e = cudaGetLastError();
	if (e != cudaSuccess)
		rt_fail("cudaGetLastError() after reporting the error: %s", cudaGetErrorName(e));
	CK(cudaDeviceSynchronize());
	return cudaGetErrorName(first);
}

int main()
{
	test_isaxpy();
	test_grid2d();
	test_block_sum();
	test_templates_and_overloads();
	const char *refused = test_bad_launch();
	char summary[128];
	snprintf(summary, sizeof(summary), "7 kernels, 7 launches, 2048 threads refused with %s",
		 refused);
	return rt_done("rt_kernels", summary);
}
