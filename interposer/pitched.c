/*
 * 2D and 3D copies (cuMemcpy2D*, cuMemcpy3D*, cuMemcpy3DPeer*): depth slices of height rows of
 * WidthInBytes bytes. Each side is this process's memory or the worker's device memory; only
 * the rows cross the wire, packed one after another (Memcpy's pitched fields, capability
 * PITCHED): a host source is gathered into frames of RGPU_COPY_CHUNK bytes, a host destination
 * is filled row by row as the server's MSG_DATA arrives, and a device-to-device copy is one
 * request. Pinned host memory named as device memory (unified addressing) is this process's
 * memory, as in memory.c. A side may be a CUDA array (array.c): it is then the worker's, named
 * by its id and its origin (x bytes, y, z), checked here against the array's extent; so are the
 * 1D array copies (cuMemcpyHtoA, cuMemcpyAtoH, cuMemcpyAtoD, cuMemcpyDtoA, cuMemcpyAtoA), one
 * row of a 2D copy each.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

/* One side of a copy: its first byte, and how its rows and slices are laid out. */
struct side {
	int dev; /* 1: the worker's device memory or array; 0: this process's memory */
	uint64_t addr, pitch, slice;
	uint64_t array;	 /* an array side: its id; addr is then x, in bytes ... */
	uint64_t y, z;	 /* ... and these its row and slice (or layer) */
	uint64_t ext[3]; /* the array's width in bytes, height, depth */
};

/* A copy as cuMemcpy3D describes it (a 2D copy is one slice). */
struct shape {
	uint64_t width, height, depth;
	struct side src, dst;
};

/*
 * Where a side of a copy starts: (x, y, z) inside memory of type t, rows pitch apart and
 * slices `rows` rows apart, or inside an array.
 */
static CUresult side_of(CUmemorytype t, const void *host, CUdeviceptr dptr,
			CUarray array, size_t x, size_t y, size_t z, size_t pitch, size_t rows,
			struct side *s)
{
	uint64_t base;

	switch (t) {
	case CU_MEMORYTYPE_HOST:
		base = (uint64_t)(uintptr_t)host;
		s->dev = ip_mem_managed(base, 1); /* managed memory is device memory */
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		base = dptr;
		s->dev = ip_is_devptr(dptr) && !ip_host_range(dptr, 1);
		break;
	case CU_MEMORYTYPE_ARRAY: {
		CUresult r = ip_array_box(array, &s->array, s->ext);
		if (r != CUDA_SUCCESS)
			return r;
		s->dev = 1;
		s->addr = x;
		s->y = y;
		s->z = z;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!base)
		return CUDA_ERROR_INVALID_VALUE;
	s->pitch = pitch;
	s->slice = (uint64_t)pitch * rows;
	s->addr = base + z * s->slice + y * (uint64_t)pitch + x;
	return CUDA_SUCCESS;
}

/* Does the copy's box fit the array of side s? */
static int box_ok(const struct shape *c, const struct side *s)
{
	return s->addr <= s->ext[0] && c->width <= s->ext[0] - s->addr && s->y <= s->ext[1] &&
	       c->height <= s->ext[1] - s->y && s->z <= s->ext[2] && c->depth <= s->ext[2] - s->z;
}

/* The bytes a side spans: from its first row's first byte to its last row's last. */
static int span_of(const struct shape *c, const struct side *s, uint64_t *span)
{
	uint64_t a;

	return rgpu_range_end(c->width, c->height - 1, s->pitch, &a) ||
	       rgpu_range_end(a, c->depth - 1, s->slice, span);
}

/* The packed byte `off` of the copy, at side s. */
static uint64_t at(const struct shape *c, const struct side *s, uint64_t off)
{
	uint64_t row = off / c->width;

	return s->addr + row / c->height * s->slice + row % c->height * s->pitch + off % c->width;
}

/* Gather packed bytes [off, off + len) of a host side into buf. */
static void gather(const struct shape *c, uint64_t off, uint64_t len, uint8_t *buf)
{
	while (len) {
		uint64_t n = MIN(c->width - off % c->width, len);
		memcpy(buf, (const void *)(uintptr_t)at(c, &c->src, off), n);
		buf += n;
		off += n;
		len -= n;
	}
}

static void fill_req(Rgpu__Memcpy *m, const struct shape *c, struct ip_ctx *ctx, uint64_t sid)
{
	m->width = c->width;
	m->height = c->height;
	m->depth = c->depth;
	m->dst = c->dst.addr;
	m->dst_pitch = c->dst.pitch;
	m->dst_slice = c->dst.slice;
	m->src = c->src.addr;
	m->src_pitch = c->src.pitch;
	m->src_slice = c->src.slice;
	m->dst_array = c->dst.array;
	m->dst_y = c->dst.y;
	m->dst_z = c->dst.z;
	m->src_array = c->src.array;
	m->src_y = c->src.y;
	m->src_z = c->src.z;
	m->stream = sid;
	m->ctx = ctx->o.id;
}

/* Host to device: frames of packed rows; the last frame of a synchronous copy is waited for. */
static CUresult to_device(const struct shape *c, struct ip_ctx *ctx, uint64_t sid, int async,
			  uint64_t total)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	uint8_t *buf = malloc(MIN(total, RGPU_COPY_CHUNK));
	CUresult r = CUDA_SUCCESS;

	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fill_req(&m, c, ctx, sid);
	for (uint64_t off = 0; off < total && r == CUDA_SUCCESS; off += RGPU_COPY_CHUNK) {
		uint64_t len = MIN(RGPU_COPY_CHUNK, total - off);

		gather(c, off, len, buf);
		m.offset = off;
		m.size = len;
		m.flags = async || off + len < total ? RGPU__COPY_FLAG__COPY_ASYNC : 0;
		r = ip_post(RGPU_MSG_MEMCPY_HTOD, &m.base, buf, len);
	}
	free(buf);
	return r;
}

/*
 * Device to host. Into pinned memory an async copy lands in stream order without a wait; into
 * pageable memory the driver returns once the copy is complete, and so does this.
 */
static CUresult to_host(const struct shape *c, struct ip_ctx *ctx, struct ip_stream *so,
			int async, uint64_t total)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	struct ip_rows rows = {c->width, c->height, c->dst.pitch, c->dst.slice};
	void *dst = (void *)(uintptr_t)c->dst.addr;

	fill_req(&m, c, ctx, so ? so->o.id : 0);
	m.size = total;
	if (async && ip_host_range(c->dst.addr, 1)) {
		if (ip_capture_of(so)) {
			pr_warn("a device-to-host copy inside a stream capture is not supported");
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
		m.flags = RGPU__COPY_FLAG__COPY_ASYNC;
		return ip_post_dtoh(&m.base, dst, total, &rows);
	}
	return ip_dtoh_rows(&m.base, dst, total, &rows);
}

/* Both sides this process's memory: after the stream's earlier work, as the driver orders it. */
static CUresult host_to_host(const struct shape *c, CUstream s, int ptds, uint64_t total)
{
	CUresult r = ip_stream_sync(s, ptds);

	for (uint64_t off = 0; r == CUDA_SUCCESS && off < total; off += c->width)
		memmove((void *)(uintptr_t)at(c, &c->dst, off),
			(const void *)(uintptr_t)at(c, &c->src, off), c->width);
	return r;
}

/*
 * copy3d() - every 2D/3D copy ends here. The checks are the driver's: a pitch narrower than a
 * row (with its x offset) is CUDA_ERROR_INVALID_VALUE, and so is device memory a side does not
 * lie in.
 */
static CUresult copy3d(struct shape *c, size_t src_x, size_t dst_x, CUstream s, int async,
		       int ptds)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	struct ip_stream *so;
	struct ip_ctx *ctx;
	uint64_t total, span;
	CUresult r = ip_stream_get(s, ptds, &ctx, &so);

	if (r != CUDA_SUCCESS)
		return r;
	if (!c->width || !c->height || !c->depth)
		return CUDA_SUCCESS;
	if (!so && (r = ip_capture_guard_legacy(ctx, "cuMemcpy2D/3D")) != CUDA_SUCCESS)
		return r;
	/* an array side has no pitch: its box must fit the array instead */
	if ((c->height > 1 || c->depth > 1) &&
	    ((!c->src.array && c->src.pitch < c->width + src_x) ||
	     (!c->dst.array && c->dst.pitch < c->width + dst_x)))
		return CUDA_ERROR_INVALID_VALUE;
	if (rgpu_range_end(0, c->width, c->height, &total) ||
	    rgpu_range_end(0, total, c->depth, &total))
		return CUDA_ERROR_INVALID_VALUE;
	if (c->src.array ? !box_ok(c, &c->src)
			 : span_of(c, &c->src, &span) ||
			       (c->src.dev && !ip_devptr_ok(c->src.addr, span)))
		return CUDA_ERROR_INVALID_VALUE;
	if (c->dst.array ? !box_ok(c, &c->dst)
			 : span_of(c, &c->dst, &span) ||
			       (c->dst.dev && !ip_devptr_ok(c->dst.addr, span)))
		return CUDA_ERROR_INVALID_VALUE;
	/* device sides on another server than the stream's: not relayed (route.c) */
	if (ip_multi_server() &&
	    ((c->src.dev && ip_addr_device(c->src.addr) >= 0 &&
	      ip_dev_server(ip_addr_device(c->src.addr)) != ip_dev_server(ctx->device)) ||
	     (c->dst.dev && ip_addr_device(c->dst.addr) >= 0 &&
	      ip_dev_server(ip_addr_device(c->dst.addr)) != ip_dev_server(ctx->device)))) {
		pr_warn_once("refused: a 2D/3D copy with device memory of another server than its "
			     "stream's (device %d, %s): copy it with a 1D copy",
			     ctx->device, ip_dev_server_name(ctx->device));
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!c->src.dev && !c->dst.dev)
		return host_to_host(c, s, ptds, total);
	if (!c->src.dev)
		return to_device(c, ctx, so ? so->o.id : 0, async, total);
	if (!c->dst.dev)
		return to_host(c, ctx, so, async, total);
	fill_req(&m, c, ctx, so ? so->o.id : 0);
	m.size = total;
	return ip_post(RGPU_MSG_MEMCPY_DTOD, &m.base, NULL, 0);
}

static CUresult copy2d(const char *fn, const CUDA_MEMCPY2D *p, CUstream s, int async, int ptds)
{
	struct shape c = {0};
	CUresult r;

	(void)fn; /* every copy is named; only a refusal would say it */
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
		    p->srcY, 0, p->srcPitch, 0, &c.src);
	if (r == CUDA_SUCCESS)
		r = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
			    p->dstXInBytes, p->dstY, 0, p->dstPitch, 0, &c.dst);
	if (r != CUDA_SUCCESS)
		return r;
	c.width = p->WidthInBytes;
	c.height = p->Height;
	c.depth = 1;
	return copy3d(&c, p->srcXInBytes, p->dstXInBytes, s, async, ptds);
}

static CUresult copy3d_desc(const char *fn, const CUDA_MEMCPY3D *p, CUstream s, int async,
			    int ptds)
{
	struct shape c = {0};
	CUresult r;

	(void)fn;
	if (!p || p->reserved0 || p->reserved1)
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * Levels of detail are reserved (a mipmapped array's level is an array of its own);
	 * slices of memory need room for Height rows (an array's slices are its own).
	 */
	if (p->srcLOD || p->dstLOD ||
	    (p->Depth > 1 && ((p->srcMemoryType != CU_MEMORYTYPE_ARRAY &&
			       p->srcHeight < p->Height + p->srcY) ||
			      (p->dstMemoryType != CU_MEMORYTYPE_ARRAY &&
			       p->dstHeight < p->Height + p->dstY))))
		return CUDA_ERROR_INVALID_VALUE;
	r = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
		    p->srcY, p->srcZ, p->srcPitch, p->srcHeight, &c.src);
	if (r == CUDA_SUCCESS)
		r = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray,
			    p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight, &c.dst);
	if (r != CUDA_SUCCESS)
		return r;
	c.width = p->WidthInBytes;
	c.height = p->Height;
	c.depth = p->Depth;
	return copy3d(&c, p->srcXInBytes, p->dstXInBytes, s, async, ptds);
}

/*
 * A peer copy between two contexts: one GPU per server and no peer access (user guide), so
 * both contexts must be on the same device; it is then the 3D copy it describes.
 */
static CUresult copy3d_peer(const char *fn, const CUDA_MEMCPY3D_PEER *p, CUstream s, int async,
			    int ptds)
{
	const struct ip_ctx *sc, *dc;
	CUDA_MEMCPY3D d;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	sc = ip_obj_get(p->srcContext, ST_KIND_CONTEXT);
	dc = ip_obj_get(p->dstContext, ST_KIND_CONTEXT);
	if (!sc || !dc)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (sc->device != dc->device) {
		ip_refused(fn, "a copy between two devices (peer access is not forwarded)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	d = (CUDA_MEMCPY3D){
	    .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
	    .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
	    .srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
	    .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
	    .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
	    .dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
	    .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth};
	return copy3d_desc(fn, &d, s, async, ptds);
}

#define COPY_SYNC(name, kind, T, ptds)                                                         \
	IP_API CUresult CUDAAPI name(const T *p)                                               \
	{                                                                                      \
		return kind(#name, p, NULL, 0, ptds);                                          \
	}
#define COPY_ASYNC(name, kind, T, ptds)                                                        \
	IP_API CUresult CUDAAPI name(const T *p, CUstream s)                                   \
	{                                                                                      \
		return kind(#name, p, s, 1, ptds);                                             \
	}

COPY_SYNC(cuMemcpy2D_v2, copy2d, CUDA_MEMCPY2D, 0)
COPY_SYNC(cuMemcpy2D_v2_ptds, copy2d, CUDA_MEMCPY2D, 1)
/* unaligned pitches are the driver's concern on the server: the same request */
COPY_SYNC(cuMemcpy2DUnaligned_v2, copy2d, CUDA_MEMCPY2D, 0)
COPY_SYNC(cuMemcpy2DUnaligned_v2_ptds, copy2d, CUDA_MEMCPY2D, 1)
COPY_ASYNC(cuMemcpy2DAsync_v2, copy2d, CUDA_MEMCPY2D, 0)
COPY_ASYNC(cuMemcpy2DAsync_v2_ptsz, copy2d, CUDA_MEMCPY2D, 1)
COPY_SYNC(cuMemcpy3D_v2, copy3d_desc, CUDA_MEMCPY3D, 0)
COPY_SYNC(cuMemcpy3D_v2_ptds, copy3d_desc, CUDA_MEMCPY3D, 1)
COPY_ASYNC(cuMemcpy3DAsync_v2, copy3d_desc, CUDA_MEMCPY3D, 0)
COPY_ASYNC(cuMemcpy3DAsync_v2_ptsz, copy3d_desc, CUDA_MEMCPY3D, 1)
COPY_SYNC(cuMemcpy3DPeer, copy3d_peer, CUDA_MEMCPY3D_PEER, 0)
COPY_SYNC(cuMemcpy3DPeer_ptds, copy3d_peer, CUDA_MEMCPY3D_PEER, 1)
COPY_ASYNC(cuMemcpy3DPeerAsync, copy3d_peer, CUDA_MEMCPY3D_PEER, 0)
COPY_ASYNC(cuMemcpy3DPeerAsync_ptsz, copy3d_peer, CUDA_MEMCPY3D_PEER, 1)

/*
 * The 1D array copies: bytes [offset, offset + n) of an array's first row (they are meant for
 * 1D arrays: a range beyond the row is CUDA_ERROR_INVALID_VALUE), as a one-row 2D copy.
 */
static CUresult copy1d(const char *fn, CUmemorytype dt, void *dh, CUdeviceptr dd, CUarray da,
		       size_t doff, CUmemorytype st, const void *sh, CUdeviceptr sd, CUarray sa,
		       size_t soff, size_t n, CUstream s, int async, int ptds)
{
	CUDA_MEMCPY2D p = {.srcXInBytes = soff, .srcMemoryType = st, .srcHost = sh,
			   .srcDevice = sd, .srcArray = sa, .srcPitch = n,
			   .dstXInBytes = doff, .dstMemoryType = dt, .dstHost = dh,
			   .dstDevice = dd, .dstArray = da, .dstPitch = n,
			   .WidthInBytes = n, .Height = 1};

	/* a memory side's offset is already in its address */
	if (st != CU_MEMORYTYPE_ARRAY)
		p.srcXInBytes = 0;
	if (dt != CU_MEMORYTYPE_ARRAY)
		p.dstXInBytes = 0;
	return copy2d(fn, &p, s, async, ptds);
}

#define A CU_MEMORYTYPE_ARRAY
#define H CU_MEMORYTYPE_HOST
#define D CU_MEMORYTYPE_DEVICE

#define HTOA(name, ...)                                                                       \
	IP_API CUresult CUDAAPI name(CUarray dst, size_t off, const void *src, size_t n __VA_ARGS__)
HTOA(cuMemcpyHtoA_v2, )
{
	return copy1d(__func__, A, NULL, 0, dst, off, H, src, 0, NULL, 0, n, NULL, 0, 0);
}
HTOA(cuMemcpyHtoA_v2_ptds, )
{
	return copy1d(__func__, A, NULL, 0, dst, off, H, src, 0, NULL, 0, n, NULL, 0, 1);
}
HTOA(cuMemcpyHtoAAsync_v2, , CUstream s)
{
	return copy1d(__func__, A, NULL, 0, dst, off, H, src, 0, NULL, 0, n, s, 1, 0);
}
HTOA(cuMemcpyHtoAAsync_v2_ptsz, , CUstream s)
{
	return copy1d(__func__, A, NULL, 0, dst, off, H, src, 0, NULL, 0, n, s, 1, 1);
}

#define ATOH(name, ...)                                                                        \
	IP_API CUresult CUDAAPI name(void *dst, CUarray src, size_t off, size_t n __VA_ARGS__)
ATOH(cuMemcpyAtoH_v2, )
{
	return copy1d(__func__, H, dst, 0, NULL, 0, A, NULL, 0, src, off, n, NULL, 0, 0);
}
ATOH(cuMemcpyAtoH_v2_ptds, )
{
	return copy1d(__func__, H, dst, 0, NULL, 0, A, NULL, 0, src, off, n, NULL, 0, 1);
}
ATOH(cuMemcpyAtoHAsync_v2, , CUstream s)
{
	return copy1d(__func__, H, dst, 0, NULL, 0, A, NULL, 0, src, off, n, s, 1, 0);
}
ATOH(cuMemcpyAtoHAsync_v2_ptsz, , CUstream s)
{
	return copy1d(__func__, H, dst, 0, NULL, 0, A, NULL, 0, src, off, n, s, 1, 1);
}

IP_API CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray src, size_t off, size_t n)
{
	return copy1d(__func__, D, NULL, dst, NULL, 0, A, NULL, 0, src, off, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dst, CUarray src, size_t off, size_t n)
{
	return copy1d(__func__, D, NULL, dst, NULL, 0, A, NULL, 0, src, off, n, NULL, 0, 1);
}
IP_API CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray dst, size_t off, CUdeviceptr src, size_t n)
{
	return copy1d(__func__, A, NULL, 0, dst, off, D, NULL, src, NULL, 0, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray dst, size_t off, CUdeviceptr src, size_t n)
{
	return copy1d(__func__, A, NULL, 0, dst, off, D, NULL, src, NULL, 0, n, NULL, 0, 1);
}
IP_API CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff,
					size_t n)
{
	return copy1d(__func__, A, NULL, 0, dst, doff, A, NULL, 0, src, soff, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff,
					     size_t n)
{
	return copy1d(__func__, A, NULL, 0, dst, doff, A, NULL, 0, src, soff, n, NULL, 0, 1);
}
