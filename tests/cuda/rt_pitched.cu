// 2D and 3D copies and sets, as programs make them with the runtime (cudaMallocPitch,
// cudaMemcpy2D*, cudaMalloc3D, cudaMemcpy3D*, cudaMemset2D/3D), which reach the driver's
// cuMemcpy2D*, cuMemcpy3D* and cuMemsetD2D*. Every destination is checked whole, its gaps
// included: a copy writes its rows and nothing between them. Sizes are chosen so that rows
// straddle rgpu's 2 MiB frames. A kernel reads a pitched array (its C twin is in
// tests/simgpu/kernels.c). The lines printed are the same natively and through rgpu.
#include <cstdint>
#include <vector>

#include "rt_check.h"

// out[y] = the sum of row y's w bytes
__global__ void pitch_row_sums(const unsigned char *p, size_t pitch, unsigned w, unsigned h,
			       unsigned *out)
{
	for (unsigned y = blockIdx.x * blockDim.x + threadIdx.x; y < h; y += gridDim.x * blockDim.x) {
		unsigned s = 0;
		for (unsigned x = 0; x < w; x++)
			s += p[y * pitch + x];
		out[y] = s;
	}
}

static unsigned char pat(uint64_t i, unsigned salt)
{
	uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
	return (unsigned char)(v >> 29);
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

// Compare the whole of got with want; name the first differing byte.
static void expect_bytes(const char *what, const unsigned char *got, const unsigned char *want,
			 size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			rt_fail("%s: byte %zu is %#x, want %#x", what, i, got[i], want[i]);
			return;
		}
	printf("%s: %zu bytes ok, fnv %016llx\n", what, n, (unsigned long long)fnv(got, n));
}

// A 2D round trip of w x h bytes: host rows (host pitch hp) into a pitched allocation at
// (x, y), checked whole; back into other host rows, checked whole; device to device.
static void round_2d(size_t w, size_t h, size_t hp, size_t x, size_t y, bool async,
		     bool pinned, unsigned salt)
{
	char name[96];
	size_t dpitch;
	unsigned char *d, *d2;
	size_t rows = h + y, dbytes;
	cudaStream_t st;

	CK(cudaStreamCreate(&st));
	CK(cudaMallocPitch((void **)&d, &dpitch, w + x, rows));
	CK(cudaMallocPitch((void **)&d2, &dpitch, w + x, rows));
	dbytes = dpitch * rows;
	CK(cudaMemset(d, 0xAB, dbytes));
	CK(cudaMemset(d2, 0xCD, dbytes));

	unsigned char *src, *back;
	size_t hbytes = hp * h;
	if (pinned) {
		CK(cudaMallocHost((void **)&src, hbytes));
		CK(cudaMallocHost((void **)&back, hbytes));
	} else {
		src = (unsigned char *)malloc(hbytes);
		back = (unsigned char *)malloc(hbytes);
	}
	for (size_t i = 0; i < hbytes; i++)
		src[i] = pat(i, salt);
	memset(back, 0x5A, hbytes);

	unsigned char *at = d + y * dpitch + x;
	if (async) {
		CK(cudaMemcpy2DAsync(at, dpitch, src, hp, w, h, cudaMemcpyHostToDevice, st));
		CK(cudaStreamSynchronize(st));
	} else {
		CK(cudaMemcpy2D(at, dpitch, src, hp, w, h, cudaMemcpyHostToDevice));
	}

	// the device array whole: rows where they belong, 0xAB everywhere else
	std::vector<unsigned char> want(dbytes, 0xAB), got(dbytes);
	for (size_t r = 0; r < h; r++)
		memcpy(&want[(y + r) * dpitch + x], src + r * hp, w);
	CK(cudaMemcpy(got.data(), d, dbytes, cudaMemcpyDeviceToHost));
	snprintf(name, sizeof(name), "2d %zux%zu at (%zu,%zu) hp %zu%s%s to device", w, h, x, y, hp,
		 async ? " async" : "", pinned ? " pinned" : "");
	expect_bytes(name, got.data(), want.data(), dbytes);

	// back into host rows: the gaps of `back` keep 0x5A
	if (async) {
		CK(cudaMemcpy2DAsync(back, hp, at, dpitch, w, h, cudaMemcpyDeviceToHost, st));
		CK(cudaStreamSynchronize(st));
	} else {
		CK(cudaMemcpy2D(back, hp, at, dpitch, w, h, cudaMemcpyDeviceToHost));
	}
	std::vector<unsigned char> hwant(hbytes, 0x5A);
	for (size_t r = 0; r < h; r++)
		memcpy(&hwant[r * hp], src + r * hp, w);
	snprintf(name, sizeof(name), "2d %zux%zu hp %zu%s%s to host", w, h, hp,
		 async ? " async" : "", pinned ? " pinned" : "");
	expect_bytes(name, back, hwant.data(), hbytes);

	// device to device, one row down and x bytes left in d2
	CK(cudaMemcpy2D(d2 + dpitch, dpitch, at, dpitch, w, h - 1, cudaMemcpyDeviceToDevice));
	std::vector<unsigned char> dwant(dbytes, 0xCD);
	for (size_t r = 0; r + 1 < h; r++)
		memcpy(&dwant[(1 + r) * dpitch], src + r * hp, w);
	CK(cudaMemcpy(got.data(), d2, dbytes, cudaMemcpyDeviceToHost));
	snprintf(name, sizeof(name), "2d %zux%zu device to device", w, h - 1);
	expect_bytes(name, got.data(), dwant.data(), dbytes);

	// a kernel reads the pitched rows
	unsigned *sums;
	CK(cudaMalloc((void **)&sums, h * sizeof(unsigned)));
	pitch_row_sums<<<4, 64>>>(at, dpitch, (unsigned)w, (unsigned)h, sums);
	CK_LAUNCH();
	std::vector<unsigned> gs(h), ws(h, 0);
	CK(cudaMemcpy(gs.data(), sums, h * sizeof(unsigned), cudaMemcpyDeviceToHost));
	for (size_t r = 0; r < h; r++)
		for (size_t i = 0; i < w; i++)
			ws[r] += src[r * hp + i];
	rt_expect_u32("row sums", gs.data(), ws.data(), h);

	CK(cudaFree(sums));
	if (pinned) {
		CK(cudaFreeHost(src));
		CK(cudaFreeHost(back));
	} else {
		free(src);
		free(back);
	}
	CK(cudaFree(d));
	CK(cudaFree(d2));
	CK(cudaStreamDestroy(st));
}

// A 3D round trip: host boxes of w x h x depth bytes (host pitch hp, host slice height hh) into
// a cudaMalloc3D allocation at (x, y, z), back, and device to device, every byte checked.
static void round_3d(size_t w, size_t h, size_t depth, size_t hp, size_t hh, size_t x, size_t y,
		     size_t z, bool async, unsigned salt)
{
	char name[96];
	cudaExtent ext = make_cudaExtent(w + x, h + y, depth + z);
	cudaPitchedPtr d, d2;
	cudaStream_t st;

	CK(cudaStreamCreate(&st));
	CK(cudaMalloc3D(&d, ext));
	CK(cudaMalloc3D(&d2, ext));
	size_t dslice = d.pitch * ext.height, dbytes = dslice * ext.depth;
	CK(cudaMemset(d.ptr, 0x11, dbytes));
	CK(cudaMemset(d2.ptr, 0x22, dbytes));

	size_t hbytes = hp * hh * depth;
	std::vector<unsigned char> src(hbytes), back(hbytes, 0x77);
	for (size_t i = 0; i < hbytes; i++)
		src[i] = pat(i, salt);

	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(src.data(), hp, w, hh);
	p.dstPtr = d;
	p.dstPos = make_cudaPos(x, y, z);
	p.extent = make_cudaExtent(w, h, depth);
	p.kind = cudaMemcpyHostToDevice;
	if (async) {
		CK(cudaMemcpy3DAsync(&p, st));
		CK(cudaStreamSynchronize(st));
	} else {
		CK(cudaMemcpy3D(&p));
	}
	std::vector<unsigned char> want(dbytes, 0x11), got(dbytes);
	for (size_t k = 0; k < depth; k++)
		for (size_t r = 0; r < h; r++)
			memcpy(&want[(z + k) * dslice + (y + r) * d.pitch + x], &src[k * hp * hh + r * hp],
			       w);
	CK(cudaMemcpy(got.data(), d.ptr, dbytes, cudaMemcpyDeviceToHost));
	snprintf(name, sizeof(name), "3d %zux%zux%zu at (%zu,%zu,%zu)%s to device", w, h, depth, x, y,
		 z, async ? " async" : "");
	expect_bytes(name, got.data(), want.data(), dbytes);

	// back to the host boxes, whose gaps keep 0x77
	cudaMemcpy3DParms b = {};
	b.srcPtr = d;
	b.srcPos = make_cudaPos(x, y, z);
	b.dstPtr = make_cudaPitchedPtr(back.data(), hp, w, hh);
	b.extent = make_cudaExtent(w, h, depth);
	b.kind = cudaMemcpyDeviceToHost;
	if (async) {
		CK(cudaMemcpy3DAsync(&b, st));
		CK(cudaStreamSynchronize(st));
	} else {
		CK(cudaMemcpy3D(&b));
	}
	std::vector<unsigned char> hwant(hbytes, 0x77);
	for (size_t k = 0; k < depth; k++)
		for (size_t r = 0; r < h; r++)
			memcpy(&hwant[k * hp * hh + r * hp], &src[k * hp * hh + r * hp], w);
	snprintf(name, sizeof(name), "3d %zux%zux%zu%s to host", w, h, depth, async ? " async" : "");
	expect_bytes(name, back.data(), hwant.data(), hbytes);

	// device to device, to the origin of d2
	cudaMemcpy3DParms dd = {};
	dd.srcPtr = d;
	dd.srcPos = make_cudaPos(x, y, z);
	dd.dstPtr = d2;
	dd.extent = make_cudaExtent(w, h, depth);
	dd.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3D(&dd));
	std::vector<unsigned char> dwant(dbytes, 0x22);
	for (size_t k = 0; k < depth; k++)
		for (size_t r = 0; r < h; r++)
			memcpy(&dwant[k * dslice + r * d2.pitch], &src[k * hp * hh + r * hp], w);
	CK(cudaMemcpy(got.data(), d2.ptr, dbytes, cudaMemcpyDeviceToHost));
	snprintf(name, sizeof(name), "3d %zux%zux%zu device to device", w, h, depth);
	expect_bytes(name, got.data(), dwant.data(), dbytes);

	CK(cudaFree(d.ptr));
	CK(cudaFree(d2.ptr));
	CK(cudaStreamDestroy(st));
}

// cudaMemset2D on part of a pitched allocation: the rest keeps its bytes.
static void set_2d(void)
{
	size_t pitch, w = 300, h = 40;
	unsigned char *d;
	CK(cudaMallocPitch((void **)&d, &pitch, w, h));
	CK(cudaMemset(d, 0x01, pitch * h));
	CK(cudaMemset2D(d + 3 * pitch + 7, pitch, 0xEE, 200, 30));
	std::vector<unsigned char> got(pitch * h), want(pitch * h, 0x01);
	for (size_t r = 3; r < 33; r++)
		memset(&want[r * pitch + 7], 0xEE, 200);
	CK(cudaMemcpy(got.data(), d, pitch * h, cudaMemcpyDeviceToHost));
	expect_bytes("memset2d 200x30", got.data(), want.data(), pitch * h);
	CK(cudaFree(d));
}

// cudaMemset3D on a box inside a cudaMalloc3D allocation: the rest keeps its bytes.
static void set_3d(void)
{
	cudaExtent ext = make_cudaExtent(120, 10, 6);
	cudaPitchedPtr d;
	CK(cudaMalloc3D(&d, ext));
	size_t slice = d.pitch * ext.height, bytes = slice * ext.depth;
	CK(cudaMemset(d.ptr, 0x02, bytes));
	cudaPitchedPtr at = d;
	at.ptr = (char *)d.ptr + 1 * slice + 2 * d.pitch + 5;
	CK(cudaMemset3D(at, 0x9C, make_cudaExtent(100, 7, 4)));
	std::vector<unsigned char> got(bytes), want(bytes, 0x02);
	for (size_t k = 1; k < 5; k++)
		for (size_t r = 2; r < 9; r++)
			memset(&want[k * slice + r * d.pitch + 5], 0x9C, 100);
	CK(cudaMemcpy(got.data(), d.ptr, bytes, cudaMemcpyDeviceToHost));
	expect_bytes("memset3d 100x7x4", got.data(), want.data(), bytes);
	CK(cudaFree(d.ptr));
}

int main(void)
{
	int dev;
	CK(cudaGetDevice(&dev));
	round_2d(100, 37, 128, 3, 2, false, false, 1);
	round_2d(100, 37, 100, 0, 0, true, true, 2);
	round_2d(100, 37, 160, 5, 1, true, false, 3);
	// rows of 3000 bytes: 2 MiB frames end inside rows
	round_2d(3000, 1500, 3000, 0, 0, false, false, 4);
	round_2d(3000, 1500, 3333, 17, 4, true, true, 5);
	round_3d(64, 20, 7, 64, 20, 0, 0, 0, false, 6);
	round_3d(50, 9, 5, 80, 12, 4, 3, 2, false, 7);
	round_3d(50, 9, 5, 80, 12, 4, 3, 2, true, 8);
	round_3d(2000, 700, 3, 2048, 701, 1, 1, 1, false, 9);
	set_2d();
	set_3d();

	// the runtime's own checks, the same natively: a pitch narrower than the row
	unsigned char *d, h[64];
	size_t pitch;
	CK(cudaMallocPitch((void **)&d, &pitch, 64, 4));
	cudaError_t e = cudaMemcpy2D(d, pitch, h, 32, 64, 4, cudaMemcpyHostToDevice);
	printf("narrow source pitch: %s\n", cudaGetErrorName(e));
	CK(cudaFree(d));

	if (rt_failures) {
		printf("rt_pitched: %d checks failed\n", rt_failures);
		return 1;
	}
	printf("rt_pitched: all checks passed\n");
	return 0;
}
