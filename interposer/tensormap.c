/*
 * Tensor maps: the 128-byte TMA descriptors of cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress. The driver builds them on the host
 * in a format it does not document, so the worker's driver encodes each one (MSG_TENSOR_MAP)
 * and the bytes come back. A descriptor holds only the application's arguments and a device
 * address, which is the same on every server: it stays valid after the job moves. Nothing is
 * recorded; the application keeps the descriptor.
 */
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"

enum { TMAP_TILED = 1, TMAP_IM2COL = 2, TMAP_IM2COL_WIDE = 3, TMAP_REPLACE = 4 };

static CUresult tensor_map_call(CUtensorMap *out, Rgpu__TensorMapEncode *m)
{
	Rgpu__TensorMapReply *rep = NULL;
	CUresult r;

	if (!ip.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	r = ip_call_status(RGPU_MSG_TENSOR_MAP, &m->base, NULL, 0, NULL, 0,
			   &rgpu__tensor_map_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS && (!rep || rep->map.len != sizeof(*out)))
		r = ip_reply_wrong("cuTensorMapEncode", "holds no 128-byte map");
	if (r == CUDA_SUCCESS)
		memcpy(out, rep->map.data, sizeof(*out));
	if (rep)
		rgpu__tensor_map_reply__free_unpacked(rep, NULL);
	return r;
}

/*
 * The arguments every form shares. Arrays are read here for the lengths cuda.h gives them
 * (rank, rank - 1 strides); the rank itself is checked first so that a bad one reads nothing.
 */
static CUresult tensor_map_common(Rgpu__TensorMapEncode *m, CUtensorMap *map, unsigned kind,
				  CUtensorMapDataType type, cuuint32_t rank, void *addr,
				  const cuuint64_t *dim, const cuuint64_t *strides,
				  const cuuint32_t *estrides, CUtensorMapInterleave interleave,
				  CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
				  CUtensorMapFloatOOBfill oob)
{
	if (!map || rank < 1 || rank > 5 || !dim || !estrides || (rank > 1 && !strides))
		return CUDA_ERROR_INVALID_VALUE;
	m->kind = kind;
	m->data_type = (uint32_t)type;
	m->rank = rank;
	m->address = (uint64_t)(uintptr_t)addr;
	m->n_global_dim = rank;
	m->global_dim = (uint64_t *)dim;
	m->n_global_strides = rank - 1;
	m->global_strides = (uint64_t *)strides;
	m->n_element_strides = rank;
	m->element_strides = (uint32_t *)estrides;
	m->interleave = interleave;
	m->swizzle = swizzle;
	m->l2_promotion = l2;
	m->oob_fill = oob;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuTensorMapEncodeTiled(
	CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
	const cuuint64_t *dim, const cuuint64_t *strides, const cuuint32_t *box,
	const cuuint32_t *estrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
	CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	Rgpu__TensorMapEncode m = RGPU__TENSOR_MAP_ENCODE__INIT;
	CUresult r = tensor_map_common(&m, map, TMAP_TILED, type, rank, addr, dim, strides,
				       estrides, interleave, swizzle, l2, oob);

	if (r != CUDA_SUCCESS || !box)
		return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
	m.n_box_dim = rank;
	m.box_dim = (uint32_t *)box;
	return tensor_map_call(map, &m);
}

IP_API CUresult CUDAAPI cuTensorMapEncodeIm2col(
	CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
	const cuuint64_t *dim, const cuuint64_t *strides, const int *lower, const int *upper,
	cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estrides,
	CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
	CUtensorMapFloatOOBfill oob)
{
	Rgpu__TensorMapEncode m = RGPU__TENSOR_MAP_ENCODE__INIT;
	CUresult r = tensor_map_common(&m, map, TMAP_IM2COL, type, rank, addr, dim, strides,
				       estrides, interleave, swizzle, l2, oob);

	if (r != CUDA_SUCCESS)
		return r;
	if (rank < 3 || !lower || !upper)
		return CUDA_ERROR_INVALID_VALUE;
	m.n_lower_corner = m.n_upper_corner = rank - 2;
	m.lower_corner = (int32_t *)lower;
	m.upper_corner = (int32_t *)upper;
	m.channels_per_pixel = channels;
	m.pixels_per_column = pixels;
	return tensor_map_call(map, &m);
}

IP_API CUresult CUDAAPI cuTensorMapEncodeIm2colWide(
	CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr,
	const cuuint64_t *dim, const cuuint64_t *strides, int lower, int upper,
	cuuint32_t channels, cuuint32_t pixels, const cuuint32_t *estrides,
	CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
	CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	Rgpu__TensorMapEncode m = RGPU__TENSOR_MAP_ENCODE__INIT;
	CUresult r = tensor_map_common(&m, map, TMAP_IM2COL_WIDE, type, rank, addr, dim, strides,
				       estrides, interleave, swizzle, l2, oob);

	if (r != CUDA_SUCCESS)
		return r;
	if (rank < 3)
		return CUDA_ERROR_INVALID_VALUE;
	m.lower_corner_w = lower;
	m.upper_corner_w = upper;
	m.channels_per_pixel = channels;
	m.pixels_per_column = pixels;
	m.mode = mode;
	return tensor_map_call(map, &m);
}

IP_API CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *map, void *addr)
{
	Rgpu__TensorMapEncode m = RGPU__TENSOR_MAP_ENCODE__INIT;

	if (!map)
		return CUDA_ERROR_INVALID_VALUE;
	m.kind = TMAP_REPLACE;
	m.address = (uint64_t)(uintptr_t)addr;
	m.map.data = (uint8_t *)map;
	m.map.len = sizeof(*map);
	return tensor_map_call(map, &m);
}
