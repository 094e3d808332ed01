/*
 * What simgpu answers to the queries that change nothing: the private export table 1734dc26
 * (its TPC maps, slots 4 and 13, with fabricated contents: 66 TPCs, vGPC i % 8, mTPC i / 8)
 * and tensor-map encoding. The real encoding is the driver's secret; simgpu checks the
 * arguments as cuda.h documents them and packs them into the 128 bytes in a fixed layout of
 * its own, so a test can see that what the application gave arrived unchanged:
 *   0 address (u64), 8 data type, 9 rank, 10 interleave, 11 swizzle, 12 L2 promotion,
 *   13 OOB fill, 14 kind (1 tiled, 2 im2col, 3 im2col wide), 16 dims (u32 x5),
 *   36 strides / 16 (u32 x4), 52 box dims or corners (u8 x5), 57 element strides (u8 x5).
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define SIM_TPCS 66

static CUresult tpc_map(unsigned char **vgpc, unsigned char **mtpc)
{
	unsigned char *a, *b;

	if (!vgpc || !mtpc)
		return CUDA_ERROR_INVALID_VALUE;
	a = malloc(SIM_TPCS);
	b = malloc(SIM_TPCS);
	if (!a || !b) {
		free(a);
		free(b);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < SIM_TPCS; i++) {
		a[i] = (unsigned char)(i % 8);
		b[i] = (unsigned char)(i / 8);
	}
	*vgpc = a;
	*mtpc = b;
	return CUDA_SUCCESS;
}

static CUresult tpc_map_free(unsigned char *vgpc, unsigned char *mtpc)
{
	free(vgpc);
	free(mtpc);
	return CUDA_SUCCESS;
}

static CUresult cluster_stub(void)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* 17 slots as on driver 580: slot 0 the size, 4 and 13 the maps, the others answer 801 */
static const void *const cluster_table[17] = {
	(const void *)(uintptr_t)(17 * 8), (const void *)cluster_stub, (const void *)cluster_stub,
	(const void *)cluster_stub,	   (const void *)tpc_map,	(const void *)cluster_stub,
	(const void *)cluster_stub,	   (const void *)cluster_stub,	(const void *)cluster_stub,
	(const void *)cluster_stub,	   (const void *)cluster_stub,	(const void *)cluster_stub,
	(const void *)cluster_stub,	   (const void *)tpc_map_free,	(const void *)cluster_stub,
	(const void *)cluster_stub,	   (const void *)cluster_stub,
};

CUresult CUDAAPI cuGetExportTable(const void **out, const CUuuid *id)
{
	static const unsigned char cluster_id[16] = {0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d,
						     0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1,
						     0xe7, 0xdd, 0x8b, 0xca};
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = NULL;
	if (!id || memcmp(id->bytes, cluster_id, 16))
		return CUDA_ERROR_INVALID_VALUE;
	*out = cluster_table;
	return CUDA_SUCCESS;
}

/* ---- tensor maps ------------------------------------------------------------------------------ */

struct tmap_args {
	int kind;
	CUtensorMapDataType type;
	cuuint32_t rank;
	void *addr;
	const cuuint64_t *dim, *stride;
	const cuuint32_t *box, *estride;
	const int *lower, *upper;
	CUtensorMapInterleave interleave;
	CUtensorMapSwizzle swizzle;
	CUtensorMapL2promotion l2;
	CUtensorMapFloatOOBfill oob;
};

/* The argument rules of cuda.h's cuTensorMapEncodeTiled, shared by the im2col forms. */
static CUresult tmap_check(const struct tmap_args *a)
{
	uintptr_t align = a->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE ? 16 : 32;

	if (a->rank < 1 || a->rank > 5 || (a->kind != 1 && a->rank < 3) || !a->dim ||
	    (a->rank > 1 && !a->stride) || !a->estride || (uintptr_t)a->addr % align ||
	    a->type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
	    a->interleave > CU_TENSOR_MAP_INTERLEAVE_32B || a->swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
	    a->l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
	    a->oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < a->rank; i++) {
		if (a->dim[i] == 0 || a->dim[i] > (1ULL << 32) || a->estride[i] == 0 ||
		    a->estride[i] > 8)
			return CUDA_ERROR_INVALID_VALUE;
		if (i + 1 < a->rank && (a->stride[i] % 16 || a->stride[i] >= (1ULL << 40)))
			return CUDA_ERROR_INVALID_VALUE;
		if (a->kind == 1 && (a->box[i] == 0 || a->box[i] > 256))
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult tmap_pack(CUtensorMap *m, const struct tmap_args *a)
{
	unsigned char *b = (unsigned char *)m->opaque;
	uint64_t addr = (uintptr_t)a->addr;
	CUresult r;

	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = tmap_check(a)))
		return r;
	memset(m, 0, sizeof(*m));
	memcpy(b, &addr, 8);
	b[8] = (unsigned char)a->type;
	b[9] = (unsigned char)a->rank;
	b[10] = (unsigned char)a->interleave;
	b[11] = (unsigned char)a->swizzle;
	b[12] = (unsigned char)a->l2;
	b[13] = (unsigned char)a->oob;
	b[14] = (unsigned char)a->kind;
	for (cuuint32_t i = 0; i < a->rank; i++) {
		uint32_t d = (uint32_t)a->dim[i];
		memcpy(b + 16 + 4 * i, &d, 4);
		if (i + 1 < a->rank) {
			uint32_t s = (uint32_t)(a->stride[i] / 16);
			memcpy(b + 36 + 4 * i, &s, 4);
		}
		if (a->kind == 1)
			b[52 + i] = (unsigned char)a->box[i];
		else if (a->kind == 2 && i + 2 < a->rank)
			b[52 + i] = (unsigned char)(a->lower[i] - a->upper[i]);
		b[57 + i] = (unsigned char)a->estride[i];
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType type, cuuint32_t rank,
					void *addr, const cuuint64_t *dim,
					const cuuint64_t *stride, const cuuint32_t *box,
					const cuuint32_t *estride, CUtensorMapInterleave interleave,
					CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
					CUtensorMapFloatOOBfill oob)
{
	struct tmap_args a = {1, type, rank, addr, dim, stride, box, estride, NULL, NULL,
			      interleave, swizzle, l2, oob};
	if (!box)
		return CUDA_ERROR_INVALID_VALUE;
	return tmap_pack(m, &a);
}

CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap *m, CUtensorMapDataType type, cuuint32_t rank,
					 void *addr, const cuuint64_t *dim,
					 const cuuint64_t *stride, const int *lower,
					 const int *upper, cuuint32_t channels, cuuint32_t pixels,
					 const cuuint32_t *estride, CUtensorMapInterleave interleave,
					 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
					 CUtensorMapFloatOOBfill oob)
{
	struct tmap_args a = {2, type, rank, addr, dim, stride, NULL, estride, lower, upper,
			      interleave, swizzle, l2, oob};
	if (!lower || !upper || channels == 0 || channels > 256 || pixels == 0 || pixels > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	return tmap_pack(m, &a);
}

CUresult CUDAAPI cuTensorMapEncodeIm2colWide(CUtensorMap *m, CUtensorMapDataType type,
					     cuuint32_t rank, void *addr, const cuuint64_t *dim,
					     const cuuint64_t *stride, int lower, int upper,
					     cuuint32_t channels, cuuint32_t pixels,
					     const cuuint32_t *estride,
					     CUtensorMapInterleave interleave,
					     CUtensorMapIm2ColWideMode mode,
					     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
					     CUtensorMapFloatOOBfill oob)
{
	struct tmap_args a = {3, type, rank, addr, dim, stride, NULL, estride, NULL, NULL,
			      interleave, swizzle, l2, oob};
	CUresult r;

	if (channels == 0 || channels > 256 || pixels == 0 || pixels > 1024 ||
	    mode > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = tmap_pack(m, &a)))
		return r;
	((unsigned char *)m->opaque)[52] = (unsigned char)(lower - upper);
	((unsigned char *)m->opaque)[53] = (unsigned char)mode;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *m, void *addr)
{
	uint64_t a = (uintptr_t)addr;
	unsigned char *b;

	if (!m || a % 16)
		return CUDA_ERROR_INVALID_VALUE;
	b = (unsigned char *)m->opaque;
	if (b[9] < 1 || b[9] > 5) /* not a map this driver encoded */
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(b, &a, 8);
	return CUDA_SUCCESS;
}
