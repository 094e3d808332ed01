/*
 * Handlers for driver queries that change nothing on the worker: the device's TPC maps (slot 4
 * of the driver's private export table 1734dc26, asked by cuBLASLt) and tensor-map encoding
 * (cuTensorMapEncode*, cuTensorMapReplaceAddress: TMA descriptors the driver builds on the host
 * from addresses that are the same on every server).
 */
#define LOG_PREFIX "exec: "
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- TPC maps -------------------------------------------------------------------------------- */

static const CUuuid cluster_table_id = {{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26,
					 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca}};
#define CLUSTER_SLOT_TPC_MAP 4
#define CLUSTER_SLOT_TPC_MAP_FREE 13
/* more than any GPU has TPCs; the bound of what a reply carries */
#define TPC_MAP_MAX 4096

typedef CUresult (*tpc_map_fn)(unsigned char **vgpc, unsigned char **mtpc);
typedef CUresult (*tpc_free_fn)(unsigned char *vgpc, unsigned char *mtpc);

/*
 * The slot allocates both arrays with malloc (measured: its free slot hands them back to glibc)
 * and does not say how long they are, so each is sent as long as its allocation: at least the
 * driver's length, never more than TPC_MAP_MAX bytes.
 */
int h_tpc_map(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, DeviceRef, device_ref, w, f);
	Rgpu__TpcMapReply rep = RGPU__TPC_MAP_REPLY__INIT;
	const void *const *t = NULL;
	unsigned char *a = NULL, *b = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = w->drv.cuGetExportTable((const void **)&t, &cluster_table_id);
	if (r == CUDA_SUCCESS &&
	    (!t || (uintptr_t)t[0] <= 8 * CLUSTER_SLOT_TPC_MAP_FREE || !t[CLUSTER_SLOT_TPC_MAP] ||
	     !t[CLUSTER_SLOT_TPC_MAP_FREE]))
		r = CUDA_ERROR_NOT_SUPPORTED;
	if (r == CUDA_SUCCESS)
		r = ((tpc_map_fn)t[CLUSTER_SLOT_TPC_MAP])(&a, &b);
	if (r == CUDA_SUCCESS && a && b) {
		rep.vgpc.len = MIN(malloc_usable_size(a), (size_t)TPC_MAP_MAX);
		rep.mtpc.len = MIN(malloc_usable_size(b), (size_t)TPC_MAP_MAX);
		rep.vgpc.data = a;
		rep.mtpc.data = b;
	} else if (r != CUDA_SUCCESS) {
		pr_warn("TPC map of device %d: %s", m->device, srv_cu_name(&w->drv, r));
	}
	rep.result = (int32_t)r;
	rgpu__device_ref__free_unpacked(m, NULL);
	int ret = srv_reply(w, f, &rep.base);
	if (a || b)
		((tpc_free_fn)t[CLUSTER_SLOT_TPC_MAP_FREE])(a, b);
	return ret;
}

/* ---- tensor maps ----------------------------------------------------------------------------- */

enum { TMAP_TILED = 1, TMAP_IM2COL = 2, TMAP_IM2COL_WIDE = 3, TMAP_REPLACE = 4 };

/* Do the repeated fields have the lengths cuda.h gives them for this rank? */
static int tmap_shape_ok(const Rgpu__TensorMapEncode *m)
{
	size_t r = m->rank;

	if (r < 1 || r > 5 || m->n_global_dim != r || m->n_global_strides != r - 1 ||
	    m->n_element_strides != r)
		return 0;
	switch (m->kind) {
	case TMAP_TILED:
		return m->n_box_dim == r;
	case TMAP_IM2COL:
		return r >= 3 && m->n_lower_corner == r - 2 && m->n_upper_corner == r - 2;
	case TMAP_IM2COL_WIDE:
		return r >= 3;
	default:
		return 0;
	}
}

int h_tensor_map(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, TensorMapEncode, tensor_map_encode, w, f);
	Rgpu__TensorMapReply rep = RGPU__TENSOR_MAP_REPLY__INIT;
	struct srv_driver *d = &w->drv;
	CUtensorMap map;
	CUresult r;

	memset(&map, 0, sizeof(map));
	if (m->kind == TMAP_REPLACE) {
		r = CUDA_ERROR_INVALID_VALUE;
		if (m->map.len == sizeof(map)) {
			memcpy(&map, m->map.data, sizeof(map));
			r = d->cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)m->address);
		}
	} else if (!tmap_shape_ok(m)) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (m->kind == TMAP_TILED) {
		r = d->cuTensorMapEncodeTiled(&map, m->data_type, m->rank,
					      (void *)(uintptr_t)m->address, m->global_dim,
					      m->global_strides, m->box_dim, m->element_strides,
					      m->interleave, m->swizzle, m->l2_promotion, m->oob_fill);
	} else if (m->kind == TMAP_IM2COL) {
		r = d->cuTensorMapEncodeIm2col(
			&map, m->data_type, m->rank, (void *)(uintptr_t)m->address, m->global_dim,
			m->global_strides, m->lower_corner, m->upper_corner, m->channels_per_pixel,
			m->pixels_per_column, m->element_strides, m->interleave, m->swizzle,
			m->l2_promotion, m->oob_fill);
	} else {
		r = d->cuTensorMapEncodeIm2colWide(
			&map, m->data_type, m->rank, (void *)(uintptr_t)m->address, m->global_dim,
			m->global_strides, m->lower_corner_w, m->upper_corner_w,
			m->channels_per_pixel, m->pixels_per_column, m->element_strides,
			m->interleave, m->mode, m->swizzle, m->l2_promotion, m->oob_fill);
	}
	rep.result = (int32_t)r;
	if (r == CUDA_SUCCESS) {
		rep.map.data = (uint8_t *)&map;
		rep.map.len = sizeof(map);
	}
	rgpu__tensor_map_encode__free_unpacked(m, NULL);
	return srv_reply(w, f, &rep.base);
}
