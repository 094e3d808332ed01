/*
 * Driver queries that change nothing, as libraries reach them: tensor maps (cuTensorMapEncode*,
 * as JAX/XLA and Triton build TMA descriptors) and three private export tables (21318c60 slots
 * 51/39 as cuBLAS uses them, 1734dc26 slots 4/13 as cuBLASLt does, 6e163fbe slot 7 as cuFFT
 * does). Prints lines that are the same natively and through rgpu on one GPU (tests/gpu/run.sh
 * compares them); --simgpu also checks the exact values simgpu fabricates.
 */
#include "common.h"

typedef CUresult (*stream_handle_fn)(CUcontext, CUstream, void **, unsigned);
typedef CUresult (*stream_id_fn)(CUcontext, void *, unsigned long long *);
typedef CUresult (*tpc_map_fn)(unsigned char **, unsigned char **);
typedef CUresult (*tpc_free_fn)(unsigned char *, unsigned char *);
typedef uint64_t (*each_fn)(CUcontext, CUmodule, void (*)(void *, void *, uint64_t), void *);

static const CUuuid tools_ctx = {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41,
				  0xff, 0x73, 0x24, 0xc8, 0xf2}};
static const CUuuid cluster = {{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0,
				0xf1, 0xe7, 0xdd, 0x8b, 0xca}};
static const CUuuid tools_mod = {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1,
				  0x82, 0xaf, 0xf1, 0x99, 0x1e}};

/* an aligned device address no allocation needs to back: the encoding only packs it */
#define TMAP_ADDR ((void *)(uintptr_t)0x100000000000ULL)

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static void tensor_maps(int sim)
{
	cuuint64_t dim[2] = {1024, 512}, strides[1] = {1024 * 2};
	cuuint32_t box[2] = {64, 32}, es[2] = {1, 1};
	CUtensorMap a, b, c;

	CHECK(cuTensorMapEncodeTiled(&a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, TMAP_ADDR, dim, strides,
				     box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
				     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
				     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
	CHECK(cuTensorMapEncodeTiled(&b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, TMAP_ADDR, dim, strides,
				     box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
				     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
				     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
	EXPECT(memcmp(&a, &b, sizeof(a)) == 0, "two encodings of one tensor differ");
	/* moving the descriptor equals encoding at the new address */
	CHECK(cuTensorMapEncodeTiled(&c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
				     (char *)TMAP_ADDR + 4096, dim, strides, box, es,
				     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
				     CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
				     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
	CHECK(cuTensorMapReplaceAddress(&b, (char *)TMAP_ADDR + 4096));
	EXPECT(memcmp(&b, &c, sizeof(b)) == 0, "replace address differs from a new encoding");
	/* documented refusals: a misaligned address, rank 0 */
	EXPECT_RESULT(cuTensorMapEncodeTiled(&c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
					     (char *)TMAP_ADDR + 8, dim, strides, box, es,
					     CU_TENSOR_MAP_INTERLEAVE_NONE,
					     CU_TENSOR_MAP_SWIZZLE_128B,
					     CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
					     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
		      CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuTensorMapEncodeTiled(&c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 0, TMAP_ADDR, dim,
					     strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
					     CU_TENSOR_MAP_SWIZZLE_128B,
					     CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
					     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
		      CUDA_ERROR_INVALID_VALUE);
	if (sim) { /* simgpu's layout (tests/simgpu/query.c) */
		const unsigned char *p = (const unsigned char *)a.opaque;
		uint64_t addr;
		uint32_t d0, d1;
		memcpy(&addr, p, 8);
		memcpy(&d0, p + 16, 4);
		memcpy(&d1, p + 20, 4);
		EXPECT(addr == 0x100000000000ULL && p[8] == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&
			       p[9] == 2 && p[11] == CU_TENSOR_MAP_SWIZZLE_128B && d0 == 1024 &&
			       d1 == 512 && p[52] == 64 && p[53] == 32,
		       "simgpu's tiled map fields");
	}
	printf("tensor map: tiled %016llx moved %016llx\n", (unsigned long long)fnv(&a, sizeof(a)),
	       (unsigned long long)fnv(&b, sizeof(b)));
}

static void stream_handles(CUcontext ctx)
{
	const void *const *t;
	void *h = NULL, *hs = NULL;
	unsigned long long id = 0, want = 0;
	CUstream s;

	CHECK(cuGetExportTable((const void **)&t, &tools_ctx));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(((stream_handle_fn)t[51])(ctx, NULL, &h, 0));
	CHECK(((stream_id_fn)t[39])(ctx, h, &id));
	CHECK(cuStreamGetId(NULL, &want));
	EXPECT(id == want, "NULL stream: tools id %llu, cuStreamGetId %llu", id, want);
	CHECK(((stream_handle_fn)t[51])(ctx, s, &hs, 0));
	EXPECT(hs != h, "one tools handle for two streams");
	CHECK(((stream_id_fn)t[39])(ctx, hs, &id));
	CHECK(cuStreamGetId(s, &want));
	EXPECT(id == want, "created stream: tools id %llu, cuStreamGetId %llu", id, want);
	CHECK(cuStreamDestroy(s));
	printf("stream handles: NULL and created streams name their cuStreamGetId\n");
}

static void tpc_maps(int sim)
{
	const void *const *t;
	unsigned char *a = NULL, *b = NULL;
	int sms = 0, tpcs;

	CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	tpcs = sms / 2;
	CHECK(cuGetExportTable((const void **)&t, &cluster));
	EXPECT((uintptr_t)t[0] >= 14 * 8, "table 1734dc26 of %lu bytes", (unsigned long)(uintptr_t)t[0]);
	CHECK(((tpc_map_fn)t[4])(&a, &b));
	EXPECT(a && b, "no TPC maps");
	if (sim)
		for (int i = 0; i < 66; i++)
			EXPECT(a[i] == i % 8 && b[i] == i / 8, "simgpu's TPC %d: %u %u", i, a[i], b[i]);
	printf("tpc maps (%d TPCs): vgpc %016llx mtpc %016llx\n", tpcs,
	       (unsigned long long)fnv(a, (size_t)tpcs), (unsigned long long)fnv(b, (size_t)tpcs));
	CHECK(((tpc_free_fn)t[13])(a, b));
}

static struct {
	void *fn[64];
	int n;
} heard;

static void hear(void *opaque, void *fn, uint64_t owner)
{
	(void)owner;
	if (opaque == &heard && heard.n < 64)
		heard.fn[heard.n++] = fn;
}

static void module_functions(CUmodule mod)
{
	const void *const *t;
	CUfunction fs[64];
	unsigned n = 0;
	uint64_t got;

	CHECK(cuGetExportTable((const void **)&t, &tools_mod));
	CHECK(cuModuleGetFunctionCount(&n, mod));
	EXPECT(n > 0 && n <= 64, "%u functions", n);
	CHECK(cuModuleEnumerateFunctions(fs, n, mod));
	got = ((each_fn)t[7])(NULL, mod, hear, &heard);
	EXPECT(got == n && heard.n == (int)n, "iterator: %llu returned, %d heard, %u functions",
	       (unsigned long long)got, heard.n, n);
	/* the order is the driver's; each heard function is one of the module's, once */
	for (int i = 0; i < heard.n; i++) {
		int found = 0;
		for (unsigned k = 0; k < n; k++)
			found += heard.fn[i] == (void *)fs[k];
		EXPECT(found == 1, "heard function %d is not one of the module's", i);
	}
	/* a heard function is a CUfunction like any other */
	const char *name = NULL;
	CHECK(cuFuncGetName(&name, (CUfunction)heard.fn[0]));
	printf("module iterator: %u functions, each heard once\n", n);
}

int main(int argc, char **argv)
{
	int sim = argc > 1 && !strcmp(argv[1], "--simgpu");
	CUcontext ctx;
	CUmodule mod = setup(&ctx);

	tensor_maps(sim);
	stream_handles(ctx);
	tpc_maps(sim);
	module_functions(mod);
	printf("queries: OK\n");
	return 0;
}
