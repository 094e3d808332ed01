/*
 * The driver's 2D and 3D copies and sets, every entry point (cuMemcpy2D, cuMemcpy2DUnaligned,
 * cuMemcpy2DAsync, cuMemcpy3D, cuMemcpy3DAsync, cuMemcpy3DPeer, cuMemcpy3DPeerAsync,
 * cuMemsetD2D8/16/32 and their async forms), with unified-addressing sides, every byte of each
 * destination checked (the gaps between rows keep their old bytes), and the error codes of bad
 * descriptors printed: the output is the same natively and through rgpu.
 */
#include "common.h"

#define W 200u   /* bytes per row */
#define H 24u    /* rows */
#define D 3u     /* slices */
#define PITCH 256u
#define SLICE (PITCH * (H + 2))
#define BYTES (SLICE * D)

static unsigned char src[BYTES], got[BYTES], want[BYTES];

static void fill_src(uint32_t seed)
{
	for (size_t i = 0; i < BYTES; i++)
		src[i] = (unsigned char)(pattern32(i, seed) >> 24);
}

/* want = old everywhere, src's box (w x h x d at pitch/slice) copied over at offset 0 */
static void box_over(unsigned char old, unsigned w, unsigned h, unsigned d)
{
	memset(want, old, BYTES);
	for (unsigned z = 0; z < d; z++)
		for (unsigned y = 0; y < h; y++)
			memcpy(want + z * SLICE + y * PITCH, src + z * SLICE + y * PITCH, w);
}

static void check(const char *what, CUdeviceptr d)
{
	CHECK(cuMemcpyDtoH(got, d, BYTES));
	for (size_t i = 0; i < BYTES; i++)
		EXPECT(got[i] == want[i], "%s: byte %zu is %#x, want %#x", what, i, got[i], want[i]);
	printf("%s: ok\n", what);
}

static CUDA_MEMCPY2D desc2d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt,
			    void *dh, CUdeviceptr dd)
{
	CUDA_MEMCPY2D c = {.srcMemoryType = st, .srcHost = sh, .srcDevice = sd, .srcPitch = PITCH,
			   .dstMemoryType = dt, .dstHost = dh, .dstDevice = dd, .dstPitch = PITCH,
			   .WidthInBytes = W, .Height = H};
	return c;
}

static CUDA_MEMCPY3D desc3d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt,
			    void *dh, CUdeviceptr dd)
{
	CUDA_MEMCPY3D c = {.srcMemoryType = st, .srcHost = sh, .srcDevice = sd, .srcPitch = PITCH,
			   .srcHeight = H + 2, .dstMemoryType = dt, .dstHost = dh,
			   .dstDevice = dd, .dstPitch = PITCH, .dstHeight = H + 2,
			   .WidthInBytes = W, .Height = H, .Depth = D};
	return c;
}

int main(void)
{
	CUcontext ctx;
	CUdeviceptr a, b;
	CUstream s;
	CUDA_MEMCPY2D c2;
	CUDA_MEMCPY3D c3;
	unsigned char *pinned;

	setup(&ctx);
	/* a blocking stream: it waits for the synchronous sets (asynchronous to the host) before it */
	CHECK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CHECK(cuMemAlloc(&a, BYTES));
	CHECK(cuMemAlloc(&b, BYTES));
	CHECK(cuMemAllocHost((void **)&pinned, BYTES));

	/* 2D: host to device, device to device, device to host, each entry point */
	fill_src(1);
	CHECK(cuMemsetD8(a, 0xA1, BYTES));
	c2 = desc2d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	CHECK(cuMemcpy2D(&c2));
	box_over(0xA1, W, H, 1);
	check("cuMemcpy2D host to device", a);

	CHECK(cuMemsetD8(b, 0xB2, BYTES));
	c2 = desc2d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b);
	CHECK(cuMemcpy2DUnaligned(&c2));
	box_over(0xB2, W, H, 1);
	check("cuMemcpy2DUnaligned device to device", b);

	memset(pinned, 0xC3, BYTES);
	c2 = desc2d(CU_MEMORYTYPE_DEVICE, NULL, b, CU_MEMORYTYPE_HOST, pinned, 0);
	CHECK(cuMemcpy2DAsync(&c2, s));
	CHECK(cuStreamSynchronize(s));
	box_over(0xC3, W, H, 1);
	EXPECT(memcmp(pinned, want, BYTES) == 0, "cuMemcpy2DAsync device to pinned host");
	printf("cuMemcpy2DAsync device to pinned host: ok\n");

	/* unified addressing on both sides: the pointers say where */
	fill_src(2);
	CHECK(cuMemsetD8(a, 0x0F, BYTES));
	c2 = desc2d(CU_MEMORYTYPE_UNIFIED, NULL, (CUdeviceptr)(uintptr_t)src, CU_MEMORYTYPE_UNIFIED,
		    NULL, a);
	CHECK(cuMemcpy2DAsync(&c2, s));
	CHECK(cuStreamSynchronize(s));
	box_over(0x0F, W, H, 1);
	check("cuMemcpy2DAsync unified host to device", a);

	/* 3D */
	fill_src(3);
	CHECK(cuMemsetD8(a, 0x44, BYTES));
	c3 = desc3d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	CHECK(cuMemcpy3D(&c3));
	box_over(0x44, W, H, D);
	check("cuMemcpy3D host to device", a);

	CHECK(cuMemsetD8(b, 0x55, BYTES));
	c3 = desc3d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b);
	CHECK(cuMemcpy3DAsync(&c3, s));
	CHECK(cuStreamSynchronize(s));
	box_over(0x55, W, H, D);
	check("cuMemcpy3DAsync device to device", b);

	memset(got, 0x66, BYTES);
	c3 = desc3d(CU_MEMORYTYPE_DEVICE, NULL, b, CU_MEMORYTYPE_HOST, got, 0);
	CHECK(cuMemcpy3D(&c3));
	box_over(0x66, W, H, D);
	EXPECT(memcmp(got, want, BYTES) == 0, "cuMemcpy3D device to host");
	printf("cuMemcpy3D device to host: ok\n");

	/* 3D peer, both contexts the same */
	CUDA_MEMCPY3D_PEER p = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src,
				.srcPitch = PITCH, .srcHeight = H + 2, .srcContext = ctx,
				.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = a,
				.dstPitch = PITCH, .dstHeight = H + 2, .dstContext = ctx,
				.WidthInBytes = W, .Height = H, .Depth = D};
	fill_src(4);
	CHECK(cuMemsetD8(a, 0x77, BYTES));
	CHECK(cuMemcpy3DPeer(&p));
	box_over(0x77, W, H, D);
	check("cuMemcpy3DPeer host to device", a);
	fill_src(5);
	CHECK(cuMemsetD8(a, 0x78, BYTES));
	CHECK(cuMemcpy3DPeerAsync(&p, s));
	CHECK(cuStreamSynchronize(s));
	box_over(0x78, W, H, D);
	check("cuMemcpy3DPeerAsync host to device", a);

	/* 2D sets of each element size, synchronous and on a stream */
	CHECK(cuMemsetD8(a, 0x00, BYTES));
	CHECK(cuMemsetD2D8(a, PITCH, 0x5D, W, H));
	memset(want, 0, BYTES);
	for (unsigned y = 0; y < H; y++)
		memset(want + y * PITCH, 0x5D, W);
	check("cuMemsetD2D8", a);
	CHECK(cuMemsetD2D16Async(a, PITCH, 0x1234, W / 2, H, s));
	CHECK(cuMemsetD2D32Async(a + 4 * PITCH, PITCH, 0xDEADBEEF, W / 4, 3, s));
	CHECK(cuStreamSynchronize(s));
	for (unsigned y = 0; y < H; y++)
		for (unsigned x = 0; x < W; x += 2) {
			want[y * PITCH + x] = 0x34;
			want[y * PITCH + x + 1] = 0x12;
		}
	for (unsigned y = 4; y < 7; y++)
		for (unsigned x = 0; x < W; x += 4)
			memcpy(want + y * PITCH + x, &(uint32_t){0xDEADBEEF}, 4);
	check("cuMemsetD2D16Async, cuMemsetD2D32Async", a);

	/* bad descriptors: the driver's answers, printed */
	c2 = desc2d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	c2.srcPitch = W - 1;
	printf("source pitch narrower than a row: %s\n", cu_name(cuMemcpy2D(&c2)));
	c2 = desc2d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	c2.dstXInBytes = PITCH - W + 1;
	printf("destination x past its pitch: %s\n", cu_name(cuMemcpy2D(&c2)));
	c2 = desc2d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	c2.Height = 0;
	printf("no rows: %s\n", cu_name(cuMemcpy2D(&c2)));
	c3 = desc3d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, a);
	c3.dstHeight = H - 1;
	printf("3D destination slice shorter than the rows: %s\n", cu_name(cuMemcpy3D(&c3)));
	printf("NULL descriptor: %s\n", cu_name(cuMemcpy2D(NULL)));

	CHECK(cuMemFreeHost(pinned));
	CHECK(cuMemFree(a));
	CHECK(cuMemFree(b));
	CHECK(cuStreamDestroy(s));
	printf("pitched: all checks passed\n");
	return 0;
}
