// zdtm arrays: CUDA arrays, a mipmapped array, texture and surface objects over arrays.
//
// State, every element from a seeded pattern (zd_byte of its byte index, a seed per array and
// round), written with cudaMemcpy3D unless said:
//   a1    1D, 3001 elements of 1 byte (unsigned char)
//   a2    2D, 67 x 45 of 4 bytes (unsigned), surface load/store: written by a kernel through a
//         surface object (zd_surf_fill), read by a kernel through a texture object
//   a3    layered 2D, 31 x 17 x 5 layers of 2 bytes (unsigned short), read through a layered
//         texture object
//   a4    3D, 13 x 11 x 7 of 16 bytes (uint4)
//   a5    cubemap, 16 x 16 x 6 faces of 2 bytes (uchar2)
//   mm    mipmapped 2D, 64 x 40, 4 levels (64 x 40 down to 8 x 5) of 8 bytes (ushort4), every
//         level written through cudaGetMipmappedArrayLevel
// The texture and surface objects are made once, before the first READY: a restore must give
// them the values the program holds (docs/architecture.md, "Arrays, textures and surfaces").
// At READY it holds no device memory (its scratch buffers are freed before): its checkpoint has
// no device chunk at all, and its live migration's rounds none either. ZDTM_ARRAYS_MIB=N (at
// most 1024) adds a 2D array of N MiB (4096 x 64N elements of 4 bytes, seeded PRNG data, new
// each round), to measure what arrays cost a checkpoint or a live migration's switchover
// (docs/architecture.md).
//
// Checks after the signal: every level's extent (cudaArrayGetInfo); every byte of every array,
// level, layer, face and slice read back with cudaMemcpy3D; a2 and a3 read by kernels through
// their texture objects, every texel. Then it uses them: every array written again with the
// next round's seeds (a2 by the surface kernel), all read back again; with ZDTM_ROUNDS=N that
// is the state the next round verifies, so each checkpoint must carry new contents.
#include "zdtm.h"

#include <vector>

// out[i] = the texel (i % w, i / w) of a 2D texture of 32-bit elements, at its centre
__global__ void zd_tex_read2d(cudaTextureObject_t t, unsigned w, unsigned h, unsigned *out)
{
	ZD_GRID_STRIDE(i, (unsigned long long)w * h)
	out[i] = tex2D<unsigned>(t, (float)(i % w) + 0.5f, (float)(i / w) + 0.5f);
}

// out[i] = the texel (x, y) of layer l of a layered texture of 16-bit elements, i = (l*h + y)*w + x
__global__ void zd_tex_layered16(cudaTextureObject_t t, unsigned w, unsigned h, unsigned layers,
				 unsigned short *out)
{
	ZD_GRID_STRIDE(i, (unsigned long long)w * h * layers)
	{
		unsigned x = i % w, y = i / w % h, l = i / (w * h);
		out[i] = tex2DLayered<unsigned short>(t, (float)x + 0.5f, (float)y + 0.5f, (int)l);
	}
}

// element (x, y) of a 2D surface of 32-bit elements = zd_hash(y * w + x, seed)
__global__ void zd_surf_fill(cudaSurfaceObject_t s, unsigned w, unsigned h, unsigned seed)
{
	ZD_GRID_STRIDE(i, (unsigned long long)w * h)
	surf2Dwrite(zd_hash(i, seed), s, (int)(i % w * 4), (int)(i / w));
}

// One array (or one level of the mipmapped one): its extent, element size, pattern.
struct arr {
	const char *name;
	cudaArray_t a;
	size_t w, h, d; // elements, rows, slices (each at least 1)
	size_t esz;
	int kernel;     // written by zd_surf_fill (a2), not by a copy
	std::vector<unsigned char> want;
	int rng;        // the big array: PRNG data (zd_rand_fill), not zd_byte per byte
};

static size_t bytes_of(const arr &x)
{
	return x.w * x.h * x.d * x.esz;
}

static unsigned seed_of(int k, int round)
{
	return 0xa7700u + (unsigned)k * 64u + (unsigned)round;
}

static cudaSurfaceObject_t surf;

// fill x with the pattern of seed (the surface kernel for a2), remember what it must hold
static void write_arr(arr &x, unsigned seed)
{
	x.want.resize(bytes_of(x));
	if (x.kernel) {
		for (size_t i = 0; i < x.w * x.h; i++) {
			unsigned v = zd_hash(i, seed);
			memcpy(&x.want[i * 4], &v, 4);
		}
		zd_surf_fill<<<zd_blocks(x.w * x.h), 256>>>(surf, (unsigned)x.w, (unsigned)x.h, seed);
		ZK_LAUNCH();
		return;
	}
	if (x.rng) {
		struct zd_rng r = {seed * 0x9e3779b97f4a7c15ull};
		zd_rand_fill(&r, x.want.data(), x.want.size());
	} else {
		for (size_t i = 0; i < x.want.size(); i++)
			x.want[i] = zd_byte(i, seed);
	}
	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(x.want.data(), x.w * x.esz, x.w, x.h);
	p.dstArray = x.a;
	p.extent = make_cudaExtent(x.w, x.h, x.d);
	p.kind = cudaMemcpyHostToDevice;
	ZK(cudaMemcpy3D(&p));
}

// every byte of x read back and compared; its extent as the runtime reports it
static void check_arr(const arr &x, const char *when, int round)
{
	cudaChannelFormatDesc cd;
	cudaExtent e;
	unsigned flags;
	char what[160];

	ZK(cudaArrayGetInfo(&cd, &e, &flags, x.a));
	size_t eh = e.height ? e.height : 1, ed = e.depth ? e.depth : 1;
	zd_expect(e.width == x.w && eh == x.h && ed == x.d,
		  "round %d %s: %s: extent %zux%zux%zu, want %zux%zux%zu", round + 1, when, x.name,
		  e.width, eh, ed, x.w, x.h, x.d);
	zd_expect((size_t)(cd.x + cd.y + cd.z + cd.w) / 8 == x.esz,
		  "round %d %s: %s: %d+%d+%d+%d bits an element, want %zu bytes", round + 1, when,
		  x.name, cd.x, cd.y, cd.z, cd.w, x.esz);
	std::vector<unsigned char> got(bytes_of(x), 0xee);
	cudaMemcpy3DParms p = {};
	p.srcArray = x.a;
	p.dstPtr = make_cudaPitchedPtr(got.data(), x.w * x.esz, x.w, x.h);
	p.extent = make_cudaExtent(x.w, x.h, x.d);
	p.kind = cudaMemcpyDeviceToHost;
	ZK(cudaMemcpy3D(&p));
	snprintf(what, sizeof(what), "round %d %s: %s read back", round + 1, when, x.name);
	zd_compare(what, got.data(), x.want.data(), got.size(), x.esz < 8 ? x.esz : 8);
}

// a2 and a3 read through their texture objects, every texel
static void check_textures(const arr &a2, const arr &a3, cudaTextureObject_t t2,
			   cudaTextureObject_t t3, const char *when, int round)
{
	char what[160];
	unsigned *d2;
	unsigned short *d3;
	size_t n2 = a2.w * a2.h, n3 = a3.w * a3.h * a3.d;
	std::vector<unsigned char> g2(n2 * 4), g3(n3 * 2);

	ZK(cudaMalloc(&d2, n2 * 4));
	ZK(cudaMalloc(&d3, n3 * 2));
	zd_tex_read2d<<<zd_blocks(n2), 256>>>(t2, (unsigned)a2.w, (unsigned)a2.h, d2);
	ZK_LAUNCH();
	zd_tex_layered16<<<zd_blocks(n3), 256>>>(t3, (unsigned)a3.w, (unsigned)a3.h,
						 (unsigned)a3.d, d3);
	ZK_LAUNCH();
	ZK(cudaMemcpy(g2.data(), d2, n2 * 4, cudaMemcpyDeviceToHost));
	ZK(cudaMemcpy(g3.data(), d3, n3 * 2, cudaMemcpyDeviceToHost));
	snprintf(what, sizeof(what), "round %d %s: %s through its texture object", round + 1, when,
		 a2.name);
	zd_compare(what, g2.data(), a2.want.data(), g2.size(), 4);
	snprintf(what, sizeof(what), "round %d %s: %s through its texture object", round + 1, when,
		 a3.name);
	zd_compare(what, g3.data(), a3.want.data(), g3.size(), 2);
	ZK(cudaFree(d2));
	ZK(cudaFree(d3));
}

int main()
{
	enum { LEVELS = 4 };
	cudaChannelFormatDesc u8 = cudaCreateChannelDesc<unsigned char>(),
			      u32 = cudaCreateChannelDesc<unsigned>(),
			      u16 = cudaCreateChannelDesc<unsigned short>(),
			      u32x4 = cudaCreateChannelDesc<uint4>(),
			      u8x2 = cudaCreateChannelDesc<uchar2>(),
			      u16x4 = cudaCreateChannelDesc<ushort4>();
	cudaMipmappedArray_t mm;
	cudaTextureObject_t t2 = 0, t3 = 0;
	std::vector<arr> v;
	unsigned long long texels = 0;

	zd_init("arrays");
	ZK(cudaSetDevice(0));

	v.push_back({"a1 (1D, 1-byte)", NULL, 3001, 1, 1, 1, 0, {}, 0});
	ZK(cudaMallocArray(&v.back().a, &u8, 3001, 0));
	v.push_back({"a2 (2D, 4-byte, surface)", NULL, 67, 45, 1, 4, 1, {}, 0});
	ZK(cudaMallocArray(&v.back().a, &u32, 67, 45, cudaArraySurfaceLoadStore));
	v.push_back({"a3 (layered 2D, 2-byte)", NULL, 31, 17, 5, 2, 0, {}, 0});
	ZK(cudaMalloc3DArray(&v.back().a, &u16, make_cudaExtent(31, 17, 5), cudaArrayLayered));
	v.push_back({"a4 (3D, 16-byte)", NULL, 13, 11, 7, 16, 0, {}, 0});
	ZK(cudaMalloc3DArray(&v.back().a, &u32x4, make_cudaExtent(13, 11, 7), 0));
	v.push_back({"a5 (cubemap, 2-byte)", NULL, 16, 16, 6, 2, 0, {}, 0});
	ZK(cudaMalloc3DArray(&v.back().a, &u8x2, make_cudaExtent(16, 16, 6), cudaArrayCubemap));
	ZK(cudaMallocMipmappedArray(&mm, &u16x4, make_cudaExtent(64, 40, 0), LEVELS, 0));
	static const char *const level_names[LEVELS] = {
	    "mm level 0 (64 x 40, 8-byte)", "mm level 1 (32 x 20)", "mm level 2 (16 x 10)",
	    "mm level 3 (8 x 5)"};
	for (unsigned l = 0; l < LEVELS; l++) {
		v.push_back({level_names[l], NULL, 64u >> l, 40u >> l, 1, 8, 0, {}, 0});
		ZK(cudaGetMipmappedArrayLevel(&v.back().a, mm, l));
	}
	const char *big = getenv("ZDTM_ARRAYS_MIB");
	size_t big_mib = big ? strtoul(big, NULL, 10) : 0;
	if (big_mib) {
		v.push_back({"big (2D, 4-byte)", NULL, 4096, 64 * big_mib, 1, 4, 0, {}, 1});
		ZK(cudaMallocArray(&v.back().a, &u32, 4096, 64 * big_mib));
	}

	// the objects over a2 and a3: point sampling, clamped, unnormalised coordinates
	cudaResourceDesc rd = {};
	cudaTextureDesc td = {};
	rd.resType = cudaResourceTypeArray;
	td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
	td.filterMode = cudaFilterModePoint;
	td.readMode = cudaReadModeElementType;
	rd.res.array.array = v[1].a;
	ZK(cudaCreateSurfaceObject(&surf, &rd));
	ZK(cudaCreateTextureObject(&t2, &rd, &td, NULL));
	rd.res.array.array = v[2].a;
	ZK(cudaCreateTextureObject(&t3, &rd, &td, NULL));

	for (size_t k = 0; k < v.size(); k++)
		write_arr(v[k], seed_of((int)k, 0));
	ZK(cudaDeviceSynchronize());
	for (size_t k = 0; k < v.size(); k++)
		check_arr(v[k], "before READY", -1);
	check_textures(v[1], v[2], t2, t3, "before READY", -1);
	zd_round_end(-1);
	ZK(cudaDeviceSynchronize());

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		for (size_t k = 0; k < v.size(); k++)
			check_arr(v[k], "after the signal", round);
		check_textures(v[1], v[2], t2, t3, "after the signal", round);
		texels += v[1].w * v[1].h + v[2].w * v[2].h * v[2].d;
		zd_round_end(round);

		// use them: every array rewritten with the next round's seeds, then read back
		for (size_t k = 0; k < v.size(); k++)
			write_arr(v[k], seed_of((int)k, round + 1));
		ZK(cudaDeviceSynchronize());
		for (size_t k = 0; k < v.size(); k++)
			check_arr(v[k], "after use", round);
		check_textures(v[1], v[2], t2, t3, "after use", round);
		texels += v[1].w * v[1].h + v[2].w * v[2].h * v[2].d;
		ZK(cudaDeviceSynchronize());
		zd_round_end(round);
	}

	size_t array_bytes = 0;
	for (size_t k = 0; k < v.size(); k++)
		array_bytes += bytes_of(v[k]);
	ZK(cudaDestroyTextureObject(t2));
	ZK(cudaDestroyTextureObject(t3));
	ZK(cudaDestroySurfaceObject(surf));
	for (size_t k = 0; k < v.size(); k++)
		if (k < 5 || k >= 5 + LEVELS)
			ZK(cudaFreeArray(v[k].a));
	ZK(cudaFreeMipmappedArray(mm));

	char summary[160];
	snprintf(summary, sizeof(summary), "arrays=5 mipmap_levels=%d array_bytes=%zu texels=%llu",
		 LEVELS, array_bytes, texels);
	return zd_ok(summary);
}
