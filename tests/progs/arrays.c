/*
 * CUDA arrays through the driver API: cuArrayCreate and cuArray3DCreate (1D, 2D, 3D, layered,
 * cubemap and layered cubemap shapes), their descriptors, the 1D array copies (cuMemcpyHtoA,
 * cuMemcpyAtoH, cuMemcpyAtoA, cuMemcpyDtoA, cuMemcpyAtoD and the async ones), 2D and 3D copies
 * between arrays, device memory and the host at offsets, mipmapped arrays and their levels,
 * a texture and a surface object's descriptors, and the error codes of bad descriptors and
 * copies. Every byte checked; the output is the same natively and through rgpu.
 */
#include "common.h"

static unsigned char src[1 << 16], got[1 << 16];

static void fill(size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)(pattern32(i, seed) >> 24);
}

static void same(const char *what, size_t n)
{
	for (size_t i = 0; i < n; i++)
		EXPECT(got[i] == src[i], "%s: byte %zu is %#x, want %#x", what, i, got[i], src[i]);
	printf("%s: %zu bytes ok\n", what, n);
}

static void print_desc(const char *what, CUarray a)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CHECK(cuArray3DGetDescriptor(&d, a));
	printf("%s: %zux%zux%zu format %#x channels %u flags %#x\n", what, d.Width, d.Height,
	       d.Depth, (unsigned)d.Format, d.NumChannels, d.Flags);
}

/* the 1D copies, on a 1D array of 1000 uint16 pairs (4000 bytes) */
static void copies_1d(CUstream s)
{
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 1000, .Height = 0,
				   .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 2};
	CUDA_ARRAY_DESCRIPTOR q;
	CUarray a, b;
	CUdeviceptr dev;

	CHECK(cuArrayCreate(&a, &d));
	CHECK(cuArrayCreate(&b, &d));
	CHECK(cuArrayGetDescriptor(&q, a));
	printf("1D array: width %zu height %zu format %#x channels %u\n", q.Width, q.Height,
	       (unsigned)q.Format, q.NumChannels);
	CHECK(cuMemAlloc(&dev, 4000));
	fill(4000, 1);
	CHECK(cuMemcpyHtoA(a, 0, src, 4000));
	CHECK(cuMemcpyAtoA(b, 0, a, 0, 4000));
	CHECK(cuMemcpyAtoD(dev, b, 0, 4000));
	CHECK(cuMemcpyDtoA(a, 0, dev, 4000));
	memset(got, 0, 4000);
	CHECK(cuMemcpyAtoH(got, a, 0, 4000));
	same("HtoA AtoA AtoD DtoA AtoH", 4000);
	/* at offsets, and async on a stream */
	fill(1000, 2);
	CHECK(cuMemcpyHtoAAsync(b, 1000, src, 1000, s));
	memset(got, 0, 1000);
	CHECK(cuMemcpyAtoHAsync(got, b, 1000, 1000, s));
	CHECK(cuStreamSynchronize(s));
	same("HtoAAsync AtoHAsync at 1000", 1000);
	printf("HtoA beyond the array: %s\n", cu_name(cuMemcpyHtoA(a, 3999, src, 2)));
	printf("AtoH beyond the array: %s\n", cu_name(cuMemcpyAtoH(got, a, 4000, 1)));
	CHECK(cuMemFree(dev));
	CHECK(cuArrayDestroy(a));
	CHECK(cuArrayDestroy(b));
}

/* shapes: a 2D array of float4, 3D, layered, cubemap, layered cubemap; a 3D copy each way */
static void shapes(void)
{
	static const struct {
		const char *name;
		CUDA_ARRAY3D_DESCRIPTOR d;
	} v[] = {
	    {"2D float4", {40, 12, 0, CU_AD_FORMAT_FLOAT, 4, 0}},
	    {"3D uint8", {33, 7, 5, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0}},
	    {"layered 2D int16x2", {20, 9, 6, CU_AD_FORMAT_SIGNED_INT16, 2, CUDA_ARRAY3D_LAYERED}},
	    {"cubemap half", {16, 16, 6, CU_AD_FORMAT_HALF, 1, CUDA_ARRAY3D_CUBEMAP}},
	    {"layered cubemap uint32",
	     {8, 8, 12, CU_AD_FORMAT_UNSIGNED_INT32, 1,
	      CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED}},
	    {"surface 2D float", {30, 10, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST}},
	};
	static const unsigned fmt_bytes[] = {[CU_AD_FORMAT_UNSIGNED_INT8] = 1,
					     [CU_AD_FORMAT_SIGNED_INT16] = 2,
					     [CU_AD_FORMAT_HALF] = 2,
					     [CU_AD_FORMAT_UNSIGNED_INT32] = 4,
					     [CU_AD_FORMAT_FLOAT] = 4};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const CUDA_ARRAY3D_DESCRIPTOR *d = &v[i].d;
		size_t row = d->Width * fmt_bytes[d->Format] * d->NumChannels;
		size_t rows = d->Height ? d->Height : 1, slices = d->Depth ? d->Depth : 1;
		CUarray a;
		CUDA_MEMCPY3D c = {0};

		CHECK(cuArray3DCreate(&a, d));
		print_desc(v[i].name, a);
		fill(row * rows * slices, 10 + (uint32_t)i);
		c.srcMemoryType = CU_MEMORYTYPE_HOST;
		c.srcHost = src;
		c.srcPitch = row;
		c.srcHeight = rows;
		c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
		c.dstArray = a;
		c.WidthInBytes = row;
		c.Height = rows;
		c.Depth = slices;
		CHECK(cuMemcpy3D(&c));
		memset(got, 0, row * rows * slices);
		memset(&c, 0, sizeof(c));
		c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
		c.srcArray = a;
		c.dstMemoryType = CU_MEMORYTYPE_HOST;
		c.dstHost = got;
		c.dstPitch = row;
		c.dstHeight = rows;
		c.WidthInBytes = row;
		c.Height = rows;
		c.Depth = slices;
		CHECK(cuMemcpy3D(&c));
		same(v[i].name, row * rows * slices);
		CHECK(cuArrayDestroy(a));
	}
}

static void bad_descriptors(void)
{
	CUDA_ARRAY3D_DESCRIPTOR d = {16, 16, 0, CU_AD_FORMAT_FLOAT, 3, 0};
	CUarray a;

	printf("3 channels: %s\n", cu_name(cuArray3DCreate(&a, &d)));
	d.NumChannels = 1;
	d.Width = 0;
	printf("width 0: %s\n", cu_name(cuArray3DCreate(&a, &d)));
	d.Width = 16;
	d.Height = 8;
	d.Depth = 6;
	d.Flags = CUDA_ARRAY3D_CUBEMAP;
	printf("cubemap not square: %s\n", cu_name(cuArray3DCreate(&a, &d)));
	d.Height = 16;
	d.Depth = 5;
	printf("cubemap of 5 faces: %s\n", cu_name(cuArray3DCreate(&a, &d)));
	printf("destroy of NULL: %s\n", cu_name(cuArrayDestroy(NULL)));
}

static void mipmapped(void)
{
	CUDA_ARRAY3D_DESCRIPTOR d = {64, 32, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
	CUmipmappedArray mm;
	CUarray lv, again;

	CHECK(cuMipmappedArrayCreate(&mm, &d, 4));
	for (unsigned l = 0; l < 4; l++) {
		CUDA_MEMCPY2D c = {0};
		char what[64];
		size_t row = (64u >> l) * 4, rows = 32u >> l;

		CHECK(cuMipmappedArrayGetLevel(&lv, mm, l));
		snprintf(what, sizeof(what), "mipmap level %u", l);
		print_desc(what, lv);
		fill(row * rows, 30 + l);
		c.srcMemoryType = CU_MEMORYTYPE_HOST;
		c.srcHost = src;
		c.srcPitch = row;
		c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
		c.dstArray = lv;
		c.WidthInBytes = row;
		c.Height = rows;
		CHECK(cuMemcpy2D(&c));
		memset(&c, 0, sizeof(c));
		memset(got, 0, row * rows);
		c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
		c.srcArray = lv;
		c.dstMemoryType = CU_MEMORYTYPE_HOST;
		c.dstHost = got;
		c.dstPitch = row;
		c.WidthInBytes = row;
		c.Height = rows;
		CHECK(cuMemcpy2D(&c));
		same(what, row * rows);
	}
	CHECK(cuMipmappedArrayGetLevel(&again, mm, 3));
	printf("level 3 again: %s handle\n", again == lv ? "the same" : "another");
	printf("level 4 of 4: %s\n", cu_name(cuMipmappedArrayGetLevel(&lv, mm, 4)));

	/* a texture object over the mipmapped array, and what it says */
	CUDA_RESOURCE_DESC rd = {.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY};
	CUDA_TEXTURE_DESC td = {.addressMode = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP},
				.filterMode = CU_TR_FILTER_MODE_POINT,
				.maxMipmapLevelClamp = 3.0f};
	CUDA_RESOURCE_DESC qr;
	CUDA_TEXTURE_DESC qt;
	CUtexObject t;
	rd.res.mipmap.hMipmappedArray = mm;
	CHECK(cuTexObjectCreate(&t, &rd, &td, NULL));
	CHECK(cuTexObjectGetResourceDesc(&qr, t));
	CHECK(cuTexObjectGetTextureDesc(&qt, t));
	printf("mipmapped texture: resType %d same array %d address %d,%d max level %.1f\n",
	       (int)qr.resType, qr.res.mipmap.hMipmappedArray == mm, (int)qt.addressMode[0],
	       (int)qt.addressMode[1], qt.maxMipmapLevelClamp);
	CHECK(cuTexObjectDestroy(t));
	CHECK(cuMipmappedArrayDestroy(mm));
}

static void objects(void)
{
	CUDA_ARRAY3D_DESCRIPTOR d = {32, 8, 0, CU_AD_FORMAT_FLOAT, 1, 0};
	CUDA_RESOURCE_DESC rd = {.resType = CU_RESOURCE_TYPE_ARRAY}, qr;
	CUDA_RESOURCE_VIEW_DESC vd = {.format = CU_RES_VIEW_FORMAT_FLOAT_1X32, .width = 32,
				      .height = 8},
				qv;
	CUDA_TEXTURE_DESC td = {.filterMode = CU_TR_FILTER_MODE_POINT};
	CUarray a;
	CUtexObject t;
	CUsurfObject s;

	CHECK(cuArray3DCreate(&a, &d));
	rd.res.array.hArray = a;
	CHECK(cuTexObjectCreate(&t, &rd, &td, &vd));
	CHECK(cuTexObjectGetResourceViewDesc(&qv, t));
	printf("view: format %#x %zux%zu\n", (unsigned)qv.format, qv.width, qv.height);
	printf("surface over an array without surface load/store: %s\n",
	       cu_name(cuSurfObjectCreate(&s, &rd)));
	/* not destroyed twice: the H200's driver answers CUDA_SUCCESS for a stale handle */
	CHECK(cuTexObjectDestroy(t));
	CHECK(cuArrayDestroy(a));
	d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
	CHECK(cuArray3DCreate(&a, &d));
	rd.res.array.hArray = a;
	CHECK(cuSurfObjectCreate(&s, &rd));
	CHECK(cuSurfObjectGetResourceDesc(&qr, s));
	printf("surface: resType %d same array %d\n", (int)qr.resType, qr.res.array.hArray == a);
	CHECK(cuSurfObjectDestroy(s));
	CHECK(cuArrayDestroy(a));
}

int main(void)
{
	CUcontext ctx;
	CUstream s;

	setup(&ctx);
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	copies_1d(s);
	shapes();
	bad_descriptors();
	mipmapped();
	objects();
	CHECK(cuStreamDestroy(s));
	printf("arrays: all checks passed\n");
	return 0;
}
