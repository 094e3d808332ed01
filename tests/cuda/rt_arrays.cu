// CUDA arrays, texture and surface objects as programs use them through the runtime
// (cudaMallocArray, cudaMalloc3DArray, cudaMallocMipmappedArray, cudaMemcpy2DToArray,
// cudaMemcpy2DFromArray, cudaMemcpy2DArrayToArray, cudaMemcpy3D with array sides,
// cudaCreateTextureObject, cudaCreateSurfaceObject), which reach the driver's cuArray3DCreate,
// cuMipmappedArray*, cuMemcpy2D/3D with CU_MEMORYTYPE_ARRAY sides and cuTexObject*/cuSurfObject*.
// Every element size (1, 2, 4, 8, 16 bytes) in 1D, 2D, 3D, layered 1D and layered 2D shapes:
// host -> array -> array -> device -> array -> host, sub-boxes at offsets, every byte checked.
// Kernels read through texture objects (point sampling, clamp, unnormalised coordinates) over an
// array, a layered array, linear and pitched memory, and write through a surface object; their C
// twins are in tests/simgpu/kernels.c. The lines printed are the same natively and through rgpu.
#include <cstdint>
#include <vector>

#include "rt_check.h"

__global__ void tex_read2d(cudaTextureObject_t t, unsigned w, unsigned h, float *out)
{
	unsigned n = (w + 4) * (h + 4);
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		int x = (int)(i % (w + 4)) - 2, y = (int)(i / (w + 4)) - 2;
		out[i] = tex2D<float>(t, x + 0.5f, y + 0.5f);
	}
}

__global__ void tex_fetch1d(cudaTextureObject_t t, unsigned n, float *out)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		out[i] = tex1Dfetch<float>(t, (int)i);
}

__global__ void tex_layered(cudaTextureObject_t t, unsigned w, unsigned h, unsigned layers,
			    float *out)
{
	unsigned n = w * h * layers;
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		unsigned x = i % w, y = i / w % h, l = i / (w * h);
		out[i] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, (int)l);
	}
}

__global__ void surf_write2d(cudaSurfaceObject_t s, unsigned w, unsigned h)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < w * h;
	     i += gridDim.x * blockDim.x) {
		unsigned x = i % w, y = i / w;
		surf2Dwrite((float)(y * 1000 + x) * 0.5f, s, (int)(x * 4), (int)y);
	}
}

static unsigned char pat(uint64_t i, unsigned salt)
{
	uint64_t v = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)salt << 40);
	return (unsigned char)(v >> 29);
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static bool same(const char *what, const unsigned char *got, const unsigned char *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			rt_fail("%s: byte %zu is %#x, want %#x", what, i, got[i], want[i]);
			return false;
		}
	return true;
}

struct fmt {
	const char *name;
	cudaChannelFormatDesc desc;
	unsigned size;
};

struct shape {
	const char *name;
	size_t w, h, d; // d: depth or layers; h 0 for 1D
	unsigned flags;
};

// One array of format f and shape s, every byte through every kind of copy.
static void round_trip(const fmt &f, const shape &s, unsigned salt)
{
	cudaExtent ext = make_cudaExtent(s.w, s.h, s.d);
	size_t rows = s.h ? s.h : 1, slices = s.d ? s.d : 1, row = s.w * f.size;
	size_t bytes = row * rows * slices;
	cudaArray_t a, b;
	char name[96];

	snprintf(name, sizeof(name), "%s %s", f.name, s.name);
	if (s.d || s.flags)
		CK(cudaMalloc3DArray(&a, &f.desc, ext, s.flags));
	else
		CK(cudaMallocArray(&a, &f.desc, s.w, s.h, s.flags));
	CK(cudaMalloc3DArray(&b, &f.desc, ext, s.flags));

	cudaChannelFormatDesc got;
	cudaExtent gext;
	unsigned gflags;
	CK(cudaArrayGetInfo(&got, &gext, &gflags, a));
	printf("%s: info %d,%d,%d,%d kind %d extent %zux%zux%zu flags %#x\n", name, got.x, got.y,
	       got.z, got.w, (int)got.f, gext.width, gext.height, gext.depth, gflags);

	// host rows with a gap (pitch row + 24): only the rows reach the array
	size_t hp = row + 24;
	std::vector<unsigned char> src(hp * rows * slices), back(hp * rows * slices, 0xEE),
	    want(hp * rows * slices, 0xEE);
	for (size_t i = 0; i < src.size(); i++)
		src[i] = pat(i, salt);
	for (size_t z = 0; z < slices; z++)
		for (size_t y = 0; y < rows; y++)
			memcpy(&want[(z * rows + y) * hp], &src[(z * rows + y) * hp], row);

	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(src.data(), hp, s.w, rows);
	p.dstArray = a;
	p.extent = make_cudaExtent(s.w, rows, slices);
	p.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&p));

	// array to array, then through pitched device memory and back into the first array
	cudaMemcpy3DParms q = {};
	q.srcArray = a;
	q.dstArray = b;
	q.extent = p.extent;
	q.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3D(&q));
	cudaPitchedPtr dev;
	CK(cudaMalloc3D(&dev, make_cudaExtent(row, rows, slices)));
	cudaMemcpy3DParms r = {};
	r.srcArray = b;
	r.dstPtr = dev;
	r.extent = p.extent;
	r.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3D(&r));
	std::vector<unsigned char> zero(bytes, 0);
	cudaMemcpy3DParms zp = {};
	zp.srcPtr = make_cudaPitchedPtr(zero.data(), row, s.w, rows);
	zp.dstArray = a;
	zp.extent = p.extent;
	zp.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&zp));
	cudaMemcpy3DParms t = {};
	t.srcPtr = dev;
	t.dstArray = a;
	t.extent = p.extent;
	t.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3D(&t));

	cudaMemcpy3DParms u = {};
	u.srcArray = a;
	u.dstPtr = make_cudaPitchedPtr(back.data(), hp, s.w, rows);
	u.extent = p.extent;
	u.kind = cudaMemcpyDeviceToHost;
	CK(cudaMemcpy3D(&u));
	if (same(name, back.data(), want.data(), back.size()))
		printf("%s: %zu bytes ok, fnv %016llx\n", name, bytes,
		       (unsigned long long)fnv(back.data(), back.size()));

	// a sub-box at an offset: (1, 1, 1) elements in, half the extent
	if (s.w > 2 && rows > 2) {
		size_t bw = s.w / 2, bh = rows / 2, bd = slices > 2 ? slices / 2 : 1;
		size_t oz = slices > 2 ? 1 : 0;
		std::vector<unsigned char> box(bw * f.size * bh * bd), bb(box.size());
		for (size_t i = 0; i < box.size(); i++)
			box[i] = pat(i, salt + 100);
		cudaMemcpy3DParms v = {};
		v.srcPtr = make_cudaPitchedPtr(box.data(), bw * f.size, bw, bh);
		v.dstArray = a;
		v.dstPos = make_cudaPos(1, 1, oz);
		v.extent = make_cudaExtent(bw, bh, bd);
		v.kind = cudaMemcpyHostToDevice;
		CK(cudaMemcpy3D(&v));
		std::vector<unsigned char> all(bytes), expect(bytes);
		for (size_t z = 0; z < slices; z++)
			for (size_t y = 0; y < rows; y++)
				memcpy(&expect[(z * rows + y) * row], &src[(z * rows + y) * hp], row);
		for (size_t z = 0; z < bd; z++)
			for (size_t y = 0; y < bh; y++)
				memcpy(&expect[((z + oz) * rows + y + 1) * row + f.size],
				       &box[(z * bh + y) * bw * f.size], bw * f.size);
		cudaMemcpy3DParms w2 = {};
		w2.srcArray = a;
		w2.dstPtr = make_cudaPitchedPtr(all.data(), row, s.w, rows);
		w2.extent = p.extent;
		w2.kind = cudaMemcpyDeviceToHost;
		CK(cudaMemcpy3D(&w2));
		// and the box alone, back out of the array at its offset
		cudaMemcpy3DParms w3 = {};
		w3.srcArray = a;
		w3.srcPos = make_cudaPos(1, 1, oz);
		w3.dstPtr = make_cudaPitchedPtr(bb.data(), bw * f.size, bw, bh);
		w3.extent = make_cudaExtent(bw, bh, bd);
		w3.kind = cudaMemcpyDeviceToHost;
		CK(cudaMemcpy3D(&w3));
		if (same(name, all.data(), expect.data(), bytes) &&
		    same(name, bb.data(), box.data(), box.size()))
			printf("%s: box %zux%zux%zu at (1,1,%zu) ok\n", name, bw, bh, bd, oz);
	}
	CK(cudaFree(dev.ptr));
	CK(cudaFreeArray(a));
	CK(cudaFreeArray(b));
}

// The 2D runtime copies: cudaMemcpy2DToArray, ...FromArray, ...ArrayToArray, async ones too.
static void copies_2d(void)
{
	cudaChannelFormatDesc d = cudaCreateChannelDesc<ushort2>();
	cudaArray_t a, b;
	const size_t w = 300, h = 70, row = w * 4, hp = row + 40;
	std::vector<unsigned char> src(hp * h), back(row * h), want(row * h);
	cudaStream_t st;

	CK(cudaStreamCreate(&st));
	CK(cudaMallocArray(&a, &d, w, h));
	CK(cudaMallocArray(&b, &d, w, h));
	for (size_t i = 0; i < src.size(); i++)
		src[i] = pat(i, 77);
	CK(cudaMemcpy2DToArray(a, 0, 0, src.data(), hp, row, h, cudaMemcpyHostToDevice));
	CK(cudaMemcpy2DArrayToArray(b, 8, 3, a, 0, 0, row - 8, h - 3, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy2DToArrayAsync(b, 0, 0, src.data(), hp, 8, h, cudaMemcpyHostToDevice, st));
	CK(cudaMemcpy2DToArrayAsync(b, 8, 0, src.data() + 8, hp, row - 8, 3,
				    cudaMemcpyHostToDevice, st));
	CK(cudaMemcpy2DFromArrayAsync(back.data(), row, b, 0, 0, row, h, cudaMemcpyDeviceToHost,
				      st));
	CK(cudaStreamSynchronize(st));
	for (size_t y = 0; y < h; y++)
		for (size_t x = 0; x < row; x++)
			want[y * row + x] = x < 8 || y < 3 ? src[y * hp + x]
							   : src[(y - 3) * hp + x - 8];
	if (same("2D copies", back.data(), want.data(), back.size()))
		printf("2D copies: %zu bytes ok, fnv %016llx\n", back.size(),
		       (unsigned long long)fnv(back.data(), back.size()));
	// the runtime's checks: a box beyond the array
	cudaError_t e = cudaMemcpy2DToArray(a, 4, 0, src.data(), hp, row, h, cudaMemcpyHostToDevice);
	printf("2D copy beyond the array: %s\n", cudaGetErrorName(e));
	(void)cudaGetLastError(); // the runtime keeps it for the next launch check: clear it
	CK(cudaStreamDestroy(st));
	CK(cudaFreeArray(a));
	CK(cudaFreeArray(b));
}

static float clampf_at(const std::vector<float> &v, int x, int y, int w, int h)
{
	x = x < 0 ? 0 : x >= w ? w - 1 : x;
	y = y < 0 ? 0 : y >= h ? h - 1 : y;
	return v[(size_t)y * w + x];
}

static cudaTextureDesc point_clamp(void)
{
	cudaTextureDesc td = {};
	td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeClamp;
	td.filterMode = cudaFilterModePoint;
	td.readMode = cudaReadModeElementType;
	td.normalizedCoords = 0;
	return td;
}

static void textures(void)
{
	const unsigned w = 37, h = 23, n = (w + 4) * (h + 4);
	cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
	std::vector<float> img(w * h), got(n), want(n);
	cudaArray_t a;
	float *out;

	for (unsigned i = 0; i < w * h; i++)
		img[i] = (float)i * 0.25f - 17.0f;
	CK(cudaMallocArray(&a, &fd, w, h));
	CK(cudaMemcpy2DToArray(a, 0, 0, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&out, n * sizeof(float)));

	cudaResourceDesc rd = {};
	rd.resType = cudaResourceTypeArray;
	rd.res.array.array = a;
	cudaTextureDesc td = point_clamp();
	cudaTextureObject_t tex;
	CK(cudaCreateTextureObject(&tex, &rd, &td, nullptr));
	tex_read2d<<<4, 64>>>(tex, w, h, out);
	CK_LAUNCH();
	CK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (unsigned i = 0; i < n; i++)
		want[i] = clampf_at(img, (int)(i % (w + 4)) - 2, (int)(i / (w + 4)) - 2, w, h);
	if (rt_expect_f32("tex2D array", got.data(), want.data(), n))
		printf("texture over a 2D array: %u texels ok (clamped at the edges)\n", n);

	// what the object says about itself
	cudaResourceDesc qr;
	cudaTextureDesc qt;
	CK(cudaGetTextureObjectResourceDesc(&qr, tex));
	CK(cudaGetTextureObjectTextureDesc(&qt, tex));
	printf("texture descriptors: resType %d array %s address %d,%d filter %d read %d "
	       "normalized %d\n",
	       (int)qr.resType, qr.res.array.array == a ? "same" : "other", (int)qt.addressMode[0],
	       (int)qt.addressMode[1], (int)qt.filterMode, (int)qt.readMode, qt.normalizedCoords);
	CK(cudaDestroyTextureObject(tex));

	// linear memory: tex1Dfetch
	const unsigned ln = 1000;
	std::vector<float> lin(ln), lgot(ln);
	float *dl;
	for (unsigned i = 0; i < ln; i++)
		lin[i] = (float)(i * 3) + 0.5f;
	CK(cudaMalloc(&dl, ln * sizeof(float)));
	CK(cudaMemcpy(dl, lin.data(), ln * sizeof(float), cudaMemcpyHostToDevice));
	cudaResourceDesc lr = {};
	lr.resType = cudaResourceTypeLinear;
	lr.res.linear.devPtr = dl;
	lr.res.linear.desc = fd;
	lr.res.linear.sizeInBytes = ln * sizeof(float);
	CK(cudaCreateTextureObject(&tex, &lr, &td, nullptr));
	tex_fetch1d<<<4, 128>>>(tex, ln, out);
	CK_LAUNCH();
	CK(cudaMemcpy(lgot.data(), out, ln * sizeof(float), cudaMemcpyDeviceToHost));
	if (rt_expect_f32("tex1Dfetch linear", lgot.data(), lin.data(), ln))
		printf("texture over linear memory: %u elements ok\n", ln);
	CK(cudaGetTextureObjectResourceDesc(&qr, tex));
	printf("linear descriptor: resType %d size %zu same pointer %d\n", (int)qr.resType,
	       qr.res.linear.sizeInBytes, qr.res.linear.devPtr == dl);
	CK(cudaDestroyTextureObject(tex));

	// pitched memory: tex2D over rows of a cudaMallocPitch allocation
	float *dp;
	size_t pitch;
	CK(cudaMallocPitch((void **)&dp, &pitch, w * 4, h));
	CK(cudaMemcpy2D(dp, pitch, img.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
	cudaResourceDesc pr = {};
	pr.resType = cudaResourceTypePitch2D;
	pr.res.pitch2D.devPtr = dp;
	pr.res.pitch2D.desc = fd;
	pr.res.pitch2D.width = w;
	pr.res.pitch2D.height = h;
	pr.res.pitch2D.pitchInBytes = pitch;
	CK(cudaCreateTextureObject(&tex, &pr, &td, nullptr));
	tex_read2d<<<4, 64>>>(tex, w, h, out);
	CK_LAUNCH();
	CK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
	if (rt_expect_f32("tex2D pitch2D", got.data(), want.data(), n))
		printf("texture over pitched memory: %u texels ok\n", n);
	CK(cudaDestroyTextureObject(tex));
	CK(cudaFree(dp));
	CK(cudaFree(dl));

	// a layered 2D array
	const unsigned lw = 16, lh = 9, layers = 5, nl = lw * lh * layers;
	std::vector<float> lay(nl), lagot(nl);
	cudaArray_t la;
	for (unsigned i = 0; i < nl; i++)
		lay[i] = (float)i * -1.5f;
	CK(cudaMalloc3DArray(&la, &fd, make_cudaExtent(lw, lh, layers), cudaArrayLayered));
	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(lay.data(), lw * 4, lw, lh);
	p.dstArray = la;
	p.extent = make_cudaExtent(lw, lh, layers);
	p.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&p));
	rd.res.array.array = la;
	CK(cudaCreateTextureObject(&tex, &rd, &td, nullptr));
	tex_layered<<<4, 64>>>(tex, lw, lh, layers, out);
	CK_LAUNCH();
	CK(cudaMemcpy(lagot.data(), out, nl * sizeof(float), cudaMemcpyDeviceToHost));
	if (rt_expect_f32("tex2DLayered", lagot.data(), lay.data(), nl))
		printf("texture over a layered array: %u texels ok\n", nl);
	CK(cudaDestroyTextureObject(tex));
	CK(cudaFreeArray(la));

	// a surface written by a kernel, read back as an array
	cudaArray_t sa;
	std::vector<float> sgot(w * h), swant(w * h);
	CK(cudaMallocArray(&sa, &fd, w, h, cudaArraySurfaceLoadStore));
	cudaResourceDesc sr = {};
	sr.resType = cudaResourceTypeArray;
	sr.res.array.array = sa;
	cudaSurfaceObject_t surf;
	CK(cudaCreateSurfaceObject(&surf, &sr));
	surf_write2d<<<4, 64>>>(surf, w, h);
	CK_LAUNCH();
	CK(cudaMemcpy2DFromArray(sgot.data(), w * 4, sa, 0, 0, w * 4, h, cudaMemcpyDeviceToHost));
	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++)
			swant[y * w + x] = (float)(y * 1000 + x) * 0.5f;
	if (rt_expect_f32("surf2Dwrite", sgot.data(), swant.data(), w * h))
		printf("surface written by a kernel: %u elements ok\n", w * h);
	CK(cudaGetSurfaceObjectResourceDesc(&qr, surf));
	printf("surface descriptor: resType %d array %s\n", (int)qr.resType,
	       qr.res.array.array == sa ? "same" : "other");
	CK(cudaDestroySurfaceObject(surf));
	CK(cudaFreeArray(sa));
	CK(cudaFreeArray(a));
	CK(cudaFree(out));
}

static void mipmapped(void)
{
	cudaChannelFormatDesc fd = cudaCreateChannelDesc<uchar4>();
	cudaMipmappedArray_t mm;
	cudaArray_t lv[3];
	const unsigned w = 64, h = 32;

	CK(cudaMallocMipmappedArray(&mm, &fd, make_cudaExtent(w, h, 0), 3));
	for (unsigned l = 0; l < 3; l++) {
		CK(cudaGetMipmappedArrayLevel(&lv[l], mm, l));
		cudaChannelFormatDesc g;
		cudaExtent e;
		unsigned fl;
		CK(cudaArrayGetInfo(&g, &e, &fl, lv[l]));
		size_t lw = w >> l, lh = h >> l, bytes = lw * 4 * lh;
		std::vector<unsigned char> src(bytes), back(bytes);
		for (size_t i = 0; i < bytes; i++)
			src[i] = pat(i, 300 + l);
		CK(cudaMemcpy2DToArray(lv[l], 0, 0, src.data(), lw * 4, lw * 4, lh,
				       cudaMemcpyHostToDevice));
		CK(cudaMemcpy2DFromArray(back.data(), lw * 4, lv[l], 0, 0, lw * 4, lh,
					 cudaMemcpyDeviceToHost));
		if (same("mipmap level", back.data(), src.data(), bytes))
			printf("mipmap level %u: extent %zux%zux%zu, %zu bytes ok\n", l, e.width,
			       e.height, e.depth, bytes);
	}
	cudaArray_t again;
	CK(cudaGetMipmappedArrayLevel(&again, mm, 1));
	printf("mipmap level 1 again: %s handle\n", again == lv[1] ? "the same" : "another");
	CK(cudaFreeMipmappedArray(mm));
}

int main(void)
{
	static const fmt fmts[] = {
	    {"uchar", cudaCreateChannelDesc<unsigned char>(), 1},
	    {"ushort", cudaCreateChannelDesc<unsigned short>(), 2},
	    {"float", cudaCreateChannelDesc<float>(), 4},
	    {"float2", cudaCreateChannelDesc<float2>(), 8},
	    {"float4", cudaCreateChannelDesc<float4>(), 16},
	};
	static const shape shapes[] = {
	    {"1D", 1000, 0, 0, 0},
	    {"2D", 300, 70, 0, 0},
	    {"3D", 40, 30, 9, 0},
	    {"layered 1D", 100, 0, 4, cudaArrayLayered},
	    {"layered 2D", 50, 20, 5, cudaArrayLayered},
	};
	int dev;
	unsigned salt = 1;

	CK(cudaGetDevice(&dev));
	for (const fmt &f : fmts)
		for (const shape &s : shapes)
			round_trip(f, s, salt++);
	copies_2d();
	textures();
	mipmapped();
	return rt_done("rt_arrays", "arrays, textures and surfaces");
}
