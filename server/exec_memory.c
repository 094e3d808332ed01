/*
 * Handlers for device memory: backing and releasing ranges of the window (MSG_MEM_ALLOC and
 * MSG_MEM_FREE, through window_map.c), memory information, copies and memsets, and the
 * application's own virtual memory (MSG_VMM_*: its physical memory, its mappings inside the
 * window, their access). Bulk bytes move through the worker's pinned staging buffers: a
 * host-to-device chunk arrives in one, a device-to-host chunk is copied into one in stream
 * order and sent from it, so the data reaches the client before any later reply that depends
 * on the stream. Every device address the client names passes srv_dev_range_ok() before it
 * reaches the driver (the application's mappings are checked against the window's mappings).
 */
#define LOG_PREFIX "exec: "
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- memory ----------------------------------------------------------------------------- */

/*
 * A memset writes height rows (one when height is 0 or 1) of width elements, pitch bytes
 * apart: [dst, dst + pitch * (rows - 1) + width * elem_size). That span is computed without
 * wrapping around 2^64, or the window check would see a few bytes where the driver is asked to
 * write exabytes.
 */
static int memset_ok(struct srv_worker *w, Rgpu__Memset *m)
{
	uint64_t row, span;

	if (m->elem_size != 1 && m->elem_size != 2 && m->elem_size != 4) {
		pr_warn_once("memset refused: element size %u (1, 2 or 4)", m->elem_size);
		return 0;
	}
	if (rgpu_range_end(0, m->width, m->elem_size, &row) ||
	    rgpu_range_end(row, m->height > 1 ? m->height - 1 : 0, m->pitch, &span)) {
		pr_warn_once(
		    "memset refused: %llu rows of %llu %u-byte elements, %llu bytes apart, "
		    "span more than 2^64 bytes",
		    (unsigned long long)m->height, (unsigned long long)m->width, m->elem_size,
		    (unsigned long long)m->pitch);
		return 0;
	}
	return srv_dev_range(w, "memset", &m->dst, span);
}

/*
 * A pitched copy (Memcpy.width != 0): depth slices of height rows of width bytes. Its bytes
 * cross the wire packed, row after row; on the device each row is pitch bytes after the last
 * and each slice slice bytes after the last.
 */
struct pitched {
	uint64_t base, pitch, slice, width, height, depth;
	uint64_t array, y, z; /* a CUDA array side: its id; it starts at (base bytes, y, z) */
	CUarray arr;	      /* ... and its driver handle, once pitched_ok() found it */
};

static struct pitched pitched_of(const Rgpu__Memcpy *m, int src)
{
	struct pitched p = {.base = src ? m->src : m->dst, .pitch = src ? m->src_pitch : m->dst_pitch,
			    .slice = src ? m->src_slice : m->dst_slice, .width = m->width,
			    .height = m->height, .depth = m->depth,
			    .array = src ? m->src_array : m->dst_array, .y = src ? m->src_y : m->dst_y,
			    .z = src ? m->src_z : m->dst_z};
	return p;
}

/*
 * An array side: the job's array, and the box [x, x+width) x [y, y+height) x [z, z+depth)
 * inside its extent (the driver checks it too, but simgpu's copies are told the truth here
 * first, and no wrapped sum reaches either).
 */
static int array_ok(struct srv_worker *w, const char *what, struct pitched *p)
{
	const struct srv_obj *o = srv_obj_find(w, p->array, ST_KIND_ARRAY);
	uint64_t end[3];

	if (!o) {
		pr_warn_once("%s refused: %llu is not an array of this job", what,
			     (unsigned long long)p->array);
		return 0;
	}
	if (rgpu_range_end(p->base, 1, p->width, &end[0]) ||
	    rgpu_range_end(p->y, 1, p->height, &end[1]) ||
	    rgpu_range_end(p->z, 1, p->depth, &end[2]) || end[0] > o->extent[0] ||
	    end[1] > o->extent[1] || end[2] > o->extent[2]) {
		pr_warn_once("%s refused: %llu x %llu x %llu bytes at (%llu, %llu, %llu) do not fit "
			     "array %llu (%llu x %llu x %llu bytes)",
			     what, (unsigned long long)p->width, (unsigned long long)p->height,
			     (unsigned long long)p->depth, (unsigned long long)p->base,
			     (unsigned long long)p->y, (unsigned long long)p->z,
			     (unsigned long long)p->array, (unsigned long long)o->extent[0],
			     (unsigned long long)o->extent[1], (unsigned long long)o->extent[2]);
		return 0;
	}
	p->arr = o->h;
	return 1;
}

/*
 * May the client name this device side? *packed: its packed size (width * height * depth), the
 * span checked against the window is [base, base + (depth-1)*slice + (height-1)*pitch + width),
 * computed without wrapping. p->base becomes the driver's address.
 */
static int pitched_ok(struct srv_worker *w, const char *what, struct pitched *p, uint64_t *packed)
{
	uint64_t a, span = 0;

	/* an array side has no pitch: its box is checked against the array's extent */
	if (!p->width || !p->height || !p->depth ||
	    (!p->array && p->height > 1 && p->pitch < p->width) ||
	    rgpu_range_end(0, p->height, p->width, &a) || rgpu_range_end(0, p->depth, a, packed) ||
	    (!p->array && (rgpu_range_end(p->width, p->height - 1, p->pitch, &a) ||
			   rgpu_range_end(a, p->depth - 1, p->slice, &span)))) {
		pr_warn_once("%s refused: %llu x %llu x %llu bytes, pitch %llu, slice %llu: empty, "
			     "rows wider than their pitch, or more than 2^64 bytes",
			     what, (unsigned long long)p->width, (unsigned long long)p->height,
			     (unsigned long long)p->depth, (unsigned long long)p->pitch,
			     (unsigned long long)p->slice);
		return 0;
	}
	if (p->array)
		return array_ok(w, what, p);
	return srv_dev_range(w, what, &p->base, span);
}

/*
 * One side of a CUDA_MEMCPY3D of one slice: the array at (x, y, z) of its origin's offsets,
 * or device memory at the side's address of that position.
 */
static void side3d(CUDA_MEMCPY3D *c, int src, const struct pitched *p, uint64_t x, uint64_t y,
		   uint64_t z)
{
	if (p->arr && src) {
		c->srcMemoryType = CU_MEMORYTYPE_ARRAY, c->srcArray = p->arr;
		c->srcXInBytes = p->base + x, c->srcY = p->y + y, c->srcZ = p->z + z;
	} else if (p->arr) {
		c->dstMemoryType = CU_MEMORYTYPE_ARRAY, c->dstArray = p->arr;
		c->dstXInBytes = p->base + x, c->dstY = p->y + y, c->dstZ = p->z + z;
	} else if (src) {
		c->srcMemoryType = CU_MEMORYTYPE_DEVICE;
		c->srcDevice = p->base + z * p->slice + y * p->pitch + x;
		c->srcPitch = p->pitch;
	} else {
		c->dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c->dstDevice = p->base + z * p->slice + y * p->pitch + x;
		c->dstPitch = p->pitch;
	}
}

/*
 * pitched_copy() for an array side: each piece (a part of a row, or whole rows of one slice)
 * one cuMemcpy3DAsync between the packed host bytes and the array.
 */
static CUresult array_copy(struct srv_worker *w, const struct pitched *p, uint64_t off,
			   uint64_t len, uint8_t *host, int to_dev, CUstream s)
{
	CUresult r = CUDA_SUCCESS;

	while (r == CUDA_SUCCESS && len) {
		uint64_t row = off / p->width, col = off % p->width;
		uint64_t y = row % p->height, rows = 1, n;
		CUDA_MEMCPY3D c = {.Depth = 1};

		if (col || len < p->width) {
			n = MIN(p->width - col, len);
			c.WidthInBytes = n;
		} else {
			rows = MIN(len / p->width, p->height - y);
			n = rows * p->width;
			c.WidthInBytes = p->width;
		}
		c.Height = rows;
		side3d(&c, !to_dev, p, col, y, row / p->height);
		if (to_dev) {
			c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host;
			c.srcPitch = c.WidthInBytes, c.srcHeight = rows;
		} else {
			c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host;
			c.dstPitch = c.WidthInBytes, c.dstHeight = rows;
		}
		r = w->drv.cuMemcpy3DAsync(&c, s);
		host += n;
		off += n;
		len -= n;
	}
	return r;
}

/*
 * Copy the packed bytes [off, off + len) between host (packed) and the device side p: a run of
 * whole rows of one slice in one 2D copy, a part of a row (a chunk that starts or ends inside
 * one) in a 1D copy.
 */
static CUresult pitched_copy(struct srv_worker *w, const struct pitched *p, uint64_t off,
			     uint64_t len, uint8_t *host, int to_dev, CUstream s)
{
	CUresult r = CUDA_SUCCESS;

	if (p->arr)
		return array_copy(w, p, off, len, host, to_dev, s);
	while (r == CUDA_SUCCESS && len) {
		uint64_t row = off / p->width, col = off % p->width;
		uint64_t y = row % p->height, rows = 1, n;
		CUdeviceptr dev = p->base + row / p->height * p->slice + y * p->pitch + col;

		if (col || len < p->width) {
			n = MIN(p->width - col, len);
			r = to_dev ? w->drv.cuMemcpyHtoDAsync(dev, host, n, s)
				   : w->drv.cuMemcpyDtoHAsync(host, dev, n, s);
		} else {
			CUDA_MEMCPY2D c = {.WidthInBytes = p->width};
			rows = MIN(len / p->width, p->height - y);
			c.Height = rows;
			n = rows * p->width;
			if (to_dev) {
				c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host;
				c.srcPitch = p->width;
				c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dev;
				c.dstPitch = p->pitch;
			} else {
				c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = dev;
				c.srcPitch = p->pitch;
				c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host;
				c.dstPitch = p->width;
			}
			r = rows == 1 ? (to_dev ? w->drv.cuMemcpyHtoDAsync(dev, host, n, s)
						: w->drv.cuMemcpyDtoHAsync(host, dev, n, s))
				      : w->drv.cuMemcpy2DAsync(&c, s);
		}
		host += n;
		off += n;
		len -= n;
	}
	return r;
}

/* A device-to-host copy's bytes [off, off + len) into a staging buffer, in stream order. */
static CUresult stage_out(struct srv_worker *w, const Rgpu__Memcpy *m, const struct pitched *p,
			  uint64_t off, uint64_t len, void *buf, CUstream s)
{
	if (m->width)
		return pitched_copy(w, p, off, len, buf, 0, s);
	return w->drv.cuMemcpyDtoHAsync(buf, m->src + off, len, s);
}

/* A host-to-device frame's payload (or a captured copy's own copy of it) onto the device. */
static CUresult land(struct srv_worker *w, const Rgpu__Memcpy *m, const struct pitched *p,
		     void *bytes, uint64_t len, CUstream s)
{
	if (m->width)
		return pitched_copy(w, p, m->offset, len, bytes, 1, s);
	return w->drv.cuMemcpyHtoDAsync(m->dst, bytes, len, s);
}

int h_mem_alloc(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, MemAlloc, mem_alloc, w, f);
	CUresult r = CUDA_SUCCESS;
	int ret = 0;

	if (m->map_size) {
		int dev = srv_dev_local(w, m->device, "allocation");
		r = dev < 0 ? CUDA_ERROR_INVALID_VALUE
			    : srv_map_range(w, m->map_addr, m->map_size, dev);
		ret = srv_reply_status(w, f, r);
	} else if (!srv_in_window(w, m->addr, m->size)) {
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "allocation record");
	}
	rgpu__mem_alloc__free_unpacked(m, NULL);
	return ret;
}

/* The mapping is released by the state log's removal of its record (statelog.c). */
int h_mem_free(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, MemFree, mem_free, w, f);
	if (m->unmap_size && !srv_mapped(w, m->unmap_addr, m->unmap_size))
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "unmap");
	rgpu__mem_free__free_unpacked(m, NULL);
	return 0;
}

int h_mem_info(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, DeviceRef, device_ref, w, f);
	Rgpu__MemInfoReply rep = RGPU__MEM_INFO_REPLY__INIT;
	size_t fr = 0, tot = 0;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuMemGetInfo(&fr, &tot);
	rep.result = (int32_t)r;
	rep.free = fr;
	rep.total = tot;
	rgpu__device_ref__free_unpacked(m, NULL);
	return srv_reply(w, f, &rep.base);
}

/* Host functions that run on driver threads once the stream reaches them. */
struct put_staging {
	struct srv_worker *w;
	void *buf;                /* a staging buffer, or NULL: */
	struct rgpu_payload pref; /* bytes where the client put them (shared memory) */
};
static void CUDA_CB release_staging_cb(void *arg)
{
	struct put_staging *p = arg;
	if (p->buf)
		srv_staging_put(p->w->staging, p->buf);
	else
		rgpu_payload_release(&p->pref); /* a slot goes back to the client */
	free(p);
}

int h_memcpy_htod(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	struct pitched dev = pitched_of(m, 0);
	uint64_t packed = 0;
	CUstream s = NULL;
	/* ctx 0: a library's __managed__ variable (srv_use_ctx_or_base) */
	CUresult r = srv_use_ctx_or_base(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && !m->width && (m->dst_array || m->src_array))
		r = CUDA_ERROR_INVALID_VALUE; /* an array side is always pitched */
	if (r == CUDA_SUCCESS && m->width) {
		if (!pitched_ok(w, "host-to-device copy", &dev, &packed) ||
		    !rgpu_range_in(m->offset, f->hdr.payload_len, 1, packed))
			r = CUDA_ERROR_INVALID_VALUE;
	} else if (r == CUDA_SUCCESS &&
		   !srv_dev_range(w, "host-to-device copy", &m->dst, f->hdr.payload_len)) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS && f->hdr.payload_len && srv_capturing(w, s)) {
		/*
		 * A captured copy reads its source at every replay: give the graph its own pinned
		 * copy of the bytes, kept for the life of the worker.
		 */
		void *keep = NULL;
		r = w->drv.cuMemHostAlloc(&keep, f->hdr.payload_len, CU_MEMHOSTALLOC_PORTABLE);
		if (r == CUDA_SUCCESS) {
			memcpy(keep, f->payload, f->hdr.payload_len);
			r = land(w, m, &dev, keep, f->hdr.payload_len, s);
		}
		srv_async_error(w, r, "captured host-to-device copy");
		srv_quiet_off(w);
		rgpu__memcpy__free_unpacked(m, NULL);
		return 0;
	}
	/*
	 * The program's pinned memory, shared: registered, so the copy engine reads it there (in
	 * the arena as this worker mapped it for the job's life; NULL: not that one)
	 */
	void *arena = NULL;
	if (r == CUDA_SUCCESS && f->pref.in_arena)
		arena = srv_shm_arena_at(w, f->pref.arena_at, f->hdr.payload_len, f->pref.arena_off,
					 f->pref.arena_len);
	if (r == CUDA_SUCCESS && f->hdr.payload_len)
		r = land(w, m, &dev, arena ? arena : f->payload, f->hdr.payload_len, s);
	if (r == CUDA_SUCCESS && !(m->flags & RGPU__COPY_FLAG__COPY_ASYNC)) {
		/*
		 * The last chunk of a synchronous copy: as with the driver, the copy is complete
		 * before anything the client issued after it starts, on any stream. The buffer
		 * is free again once the stream is.
		 */
		r = w->drv.cuStreamSynchronize(s);
		srv_quiet_copy(w, m->ctx, s, 1, r);
		srv_async_error(w, r, "host-to-device copy");
		rgpu__memcpy__free_unpacked(m, NULL);
		return 0;
	}
	srv_quiet_copy(w, m->ctx, s, 0, r);
	if (r == CUDA_SUCCESS && arena) {
		/*
		 * The program's pinned memory: it must stay unchanged until the copy is seen
		 * complete, as natively, and the arena stays mapped for the job's life. Nothing to
		 * give back, so no host function holds up the stream.
		 */
	} else if (r == CUDA_SUCCESS && (f->payload_staged || f->pref.map)) {
		/* pinned source: the copy reads it later, so the stream gives it back */
		struct put_staging *p = malloc(sizeof(*p));
		if (p) {
			p->w = w;
			p->buf = f->payload_staged ? f->payload : NULL;
			p->pref = f->pref;
			if (w->drv.cuLaunchHostFunc(s, release_staging_cb, p) == CUDA_SUCCESS) {
				f->payload_staged = 0;
				f->payload = NULL;
				memset(&f->pref, 0, sizeof(f->pref));
			} else {
				free(p);
				w->drv.cuStreamSynchronize(s);
			}
		} else {
			w->drv.cuStreamSynchronize(s);
		}
	} else if (r == CUDA_SUCCESS) {
		/*
		 * Pageable source: the driver stages it before returning (cuda.h, "API
		 * synchronization behavior"), so the buffer may be freed with the frame.
		 */
	}
	srv_async_error(w, r, "host-to-device copy");
	rgpu__memcpy__free_unpacked(m, NULL);
	return 0;
}

struct send_chunk {
	struct srv_worker *w;
	uint64_t seq;
	uint64_t offset;
	void *buf;
	size_t len;
};
static void CUDA_CB send_chunk_cb(void *arg)
{
	struct send_chunk *c = arg;
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	dc.offset = c->offset;
	/* the chunk keeps its staging buffer until the client has it (link.c) */
	srv_send_staged(c->w, RGPU_MSG_DATA, c->seq, &dc.base, c->buf, c->len);
	free(c);
}

/*
 * Device-to-host, asynchronous: each chunk is copied into a pinned staging buffer in stream
 * order, and a host function on the same stream sends it when the copy is done. Data therefore
 * always reaches the client before any later reply that depends on the stream (a synchronize,
 * an event), and the caller returns at once.
 */
static CUresult dtoh_async(struct srv_worker *w, const Rgpu__Memcpy *m, const struct pitched *p,
			   uint64_t seq, CUstream s, uint64_t *queued)
{
	CUresult r = CUDA_SUCCESS;
	uint64_t chunk = srv_staging_size(w->staging);
	*queued = 0;
	for (uint64_t off = 0; r == CUDA_SUCCESS && off < m->size; off += chunk) {
		struct send_chunk *c = malloc(sizeof(*c));
		if (!c)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->w = w;
		c->seq = seq;
		c->offset = off;
		c->len = (size_t)MIN(chunk, m->size - off);
		c->buf = srv_staging_get(w->staging);
		size_t len = c->len; /* once launched, the chunk is the stream's: it may be freed */
		r = stage_out(w, m, p, off, c->len, c->buf, s);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuLaunchHostFunc(s, send_chunk_cb, c);
		if (r != CUDA_SUCCESS) {
			srv_staging_put(w->staging, c->buf);
			free(c);
		} else {
			*queued += len;
		}
	}
	return r;
}

/*
 * An asynchronous copy back that failed: the client is told that the bytes no chunk will bring
 * count as come (a zero-length MSG_DATA that says they landed), so that it stops waiting for
 * them; the error itself is the stream's, reported at the next synchronization.
 */
static void dtoh_abandoned(struct srv_worker *w, uint64_t seq, uint64_t bytes)
{
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	if (!bytes)
		return;
	dc.landed = bytes;
	srv_send(w, RGPU_MSG_DATA, 0, seq, &dc.base, NULL, 0);
}

/*
 * Device-to-host, synchronous: the executor copies a chunk, waits for the stream, and sends it
 * itself while the copy of the next chunk runs, so the copy engine and the network overlap and
 * no host function sits on the path of a small copy's round trip.
 */
static CUresult dtoh_sync(struct srv_worker *w, const Rgpu__Memcpy *m, const struct pitched *p,
			  uint64_t seq, CUstream s)
{
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	void *cur = srv_staging_get(w->staging), *next_buf = NULL;
	uint64_t chunk = srv_staging_size(w->staging);
	uint64_t off = 0, len = MIN(chunk, m->size);
	CUresult r;

	r = stage_out(w, m, p, 0, len, cur, s);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamSynchronize(s);
	while (r == CUDA_SUCCESS && off < m->size) {
		uint64_t next = off + len, nlen = MIN(chunk, m->size - next);
		next_buf = NULL;
		if (next < m->size) {
			next_buf = srv_staging_get(w->staging);
			r = stage_out(w, m, p, next, nlen, next_buf, s);
		}
		dc.offset = off;
		/* the chunk keeps its staging buffer until the client has it (link.c) */
		int ret = srv_send_staged(w, RGPU_MSG_DATA, seq, &dc.base, cur, len);
		cur = next_buf;
		if (ret)
			break; /* the job ends */
		if (r == CUDA_SUCCESS && next < m->size)
			r = w->drv.cuStreamSynchronize(s);
		off = next;
		len = nlen;
	}
	if (cur) {
		/* a failed copy: nothing was sent from it; let any copy into it finish first */
		w->drv.cuStreamSynchronize(s);
		srv_staging_put(w->staging, cur);
	}
	return r;
}

/* The data of an asynchronous copy landed in the client's memory: tell it how much. */
struct landed {
	struct srv_worker *w;
	uint64_t seq, size;
};
static void CUDA_CB landed_cb(void *arg)
{
	struct landed *l = arg;
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	dc.landed = l->size;
	srv_send(l->w, RGPU_MSG_DATA, 0, l->seq, &dc.base, NULL, 0);
	free(l);
}

/*
 * Device-to-host into the client's pinned memory, which this worker maps (shared memory): the
 * copy engine writes it there. A synchronous copy waits for the stream; an asynchronous one
 * says how much landed when the stream reaches its end. Returns CUDA_ERROR_NOT_SUPPORTED when
 * the destination is not in the arena this worker maps (the caller sends the bytes instead).
 */
static CUresult dtoh_direct(struct srv_worker *w, const Rgpu__Memcpy *m, uint64_t seq,
			    CUstream s)
{
	void *dst;
	CUresult r;

	if (!m->host_arena || m->width)
		return CUDA_ERROR_NOT_SUPPORTED;
	dst = srv_shm_arena_at(w, m->host_arena - 1, m->size, m->host_reg_off, m->host_reg_len);
	if (!dst)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = w->drv.cuMemcpyDtoHAsync(dst, m->src, m->size, s);
	if (r != CUDA_SUCCESS)
		return r;
	if (!(m->flags & RGPU__COPY_FLAG__COPY_ASYNC))
		return w->drv.cuStreamSynchronize(s);
	struct landed *l = malloc(sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*l = (struct landed){w, seq, m->size};
	r = w->drv.cuLaunchHostFunc(s, landed_cb, l);
	if (r != CUDA_SUCCESS)
		free(l);
	return r;
}

int h_memcpy_dtoh(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	struct pitched p = pitched_of(m, 1);
	uint64_t packed = 0;
	CUstream s = NULL;
	/* ctx 0: a library's __managed__ variable (srv_use_ctx_or_base) */
	CUresult r = srv_use_ctx_or_base(w, m->ctx);
	int ret = 0;

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && !m->width && (m->dst_array || m->src_array))
		r = CUDA_ERROR_INVALID_VALUE; /* an array side is always pitched */
	if (r == CUDA_SUCCESS && m->width) {
		if (!pitched_ok(w, "device-to-host copy", &p, &packed) || packed != m->size)
			r = CUDA_ERROR_INVALID_VALUE;
	} else if (r == CUDA_SUCCESS && !srv_dev_range(w, "device-to-host copy", &m->src, m->size)) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS && srv_capturing(w, s)) {
		/*
		 * the client refuses these itself: its bytes travel once, and the host functions
		 * that send or land them free themselves, which a graph would run again
		 */
		pr_warn_once("job %s: a device-to-host copy refused: its stream is being captured",
			     w->job_hex);
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (r == CUDA_SUCCESS && m->size) {
		CUresult d = dtoh_direct(w, m, f->hdr.seq, s);
		if (d != CUDA_ERROR_NOT_SUPPORTED) {
			srv_quiet_copy(w, m->ctx, s, !(m->flags & RGPU__COPY_FLAG__COPY_ASYNC), d);
			if (m->flags & RGPU__COPY_FLAG__COPY_ASYNC) {
				srv_async_error(w, d, "device-to-host copy");
				if (d != CUDA_SUCCESS)
					dtoh_abandoned(w, f->hdr.seq, m->size);
			} else
				ret = srv_reply_status(w, f, d);
			rgpu__memcpy__free_unpacked(m, NULL);
			return ret;
		}
	}
	if (m->flags & RGPU__COPY_FLAG__COPY_ASYNC) {
		uint64_t queued = 0;
		if (r == CUDA_SUCCESS && m->size)
			r = dtoh_async(w, m, &p, f->hdr.seq, s, &queued);
		srv_quiet_copy(w, m->ctx, s, 0, r);
		srv_async_error(w, r, "device-to-host copy");
		if (r != CUDA_SUCCESS)
			dtoh_abandoned(w, f->hdr.seq, m->size - queued);
	} else if (m->size <= RGPU_MAX_REPLY_DATA && (w->client_caps & RGPU_CAP_SHM)) {
		/* small: the bytes come in the reply, one frame for the whole call */
		void *buf = m->size ? srv_staging_get(w->staging) : NULL;
		if (r == CUDA_SUCCESS && m->size)
			r = stage_out(w, m, &p, 0, m->size, buf, s);
		if (r == CUDA_SUCCESS && m->size)
			r = w->drv.cuStreamSynchronize(s);
		srv_quiet_copy(w, m->ctx, s, m->size != 0, r);
		ret = srv_reply_data(w, f, r, buf, m->size);
		if (buf)
			srv_staging_put(w->staging, buf);
	} else {
		if (r == CUDA_SUCCESS && m->size)
			r = dtoh_sync(w, m, &p, f->hdr.seq, s);
		srv_quiet_copy(w, m->ctx, s, m->size != 0, r);
		ret = srv_reply_status(w, f, r);
	}
	rgpu__memcpy__free_unpacked(m, NULL);
	return ret;
}

/* A pitched device-to-device copy: a 2D copy per slice (one for all when the slices are rows). */
static CUresult dtod_pitched(struct srv_worker *w, const Rgpu__Memcpy *m, CUstream s)
{
	struct pitched d = pitched_of(m, 0), src = pitched_of(m, 1);
	uint64_t packed, slices = m->depth, rows = m->height;
	CUresult r = CUDA_SUCCESS;

	if (!pitched_ok(w, "device-to-device copy", &d, &packed) ||
	    !pitched_ok(w, "device-to-device copy", &src, &packed))
		return CUDA_ERROR_INVALID_VALUE;
	if (d.arr || src.arr) {
		/* an array side: one 3D copy of each slice, on the server alone */
		for (uint64_t z = 0; r == CUDA_SUCCESS && z < slices; z++) {
			CUDA_MEMCPY3D c = {.WidthInBytes = m->width, .Height = rows, .Depth = 1};
			side3d(&c, 1, &src, 0, 0, z);
			side3d(&c, 0, &d, 0, 0, z);
			r = w->drv.cuMemcpy3DAsync(&c, s);
		}
		return r;
	}
	if (d.slice == d.pitch * rows && src.slice == src.pitch * rows && rows * slices > rows) {
		rows *= slices;
		slices = 1;
	}
	for (uint64_t z = 0; r == CUDA_SUCCESS && z < slices; z++) {
		CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
				   .srcDevice = src.base + z * src.slice, .srcPitch = src.pitch,
				   .dstMemoryType = CU_MEMORYTYPE_DEVICE,
				   .dstDevice = d.base + z * d.slice, .dstPitch = d.pitch,
				   .WidthInBytes = m->width, .Height = rows};
		r = w->drv.cuMemcpy2DAsync(&c, s);
	}
	return r;
}

int h_memcpy_dtod(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && !m->width && (m->dst_array || m->src_array))
		r = CUDA_ERROR_INVALID_VALUE; /* an array side is always pitched */
	if (r == CUDA_SUCCESS && m->width) {
		r = dtod_pitched(w, m, s);
	} else if (r == CUDA_SUCCESS && m->size) {
		if (!srv_dev_range(w, "device-to-device copy", &m->dst, m->size) ||
		    !srv_dev_range(w, "device-to-device copy", &m->src, m->size))
			r = CUDA_ERROR_INVALID_VALUE;
		else
			r = w->drv.cuMemcpyDtoDAsync(m->dst, m->src, m->size, s);
	}
	srv_async_error(w, r, "device-to-device copy");
	rgpu__memcpy__free_unpacked(m, NULL);
	return 0;
}

int h_memset(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memset, memset, w, f);
	struct srv_driver *d = &w->drv;
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && m->width && !memset_ok(w, m))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && m->width) {
		if (m->height <= 1) {
			switch (m->elem_size) {
			case 1: r = d->cuMemsetD8Async(m->dst, (unsigned char)m->value, m->width, s); break;
			case 2: r = d->cuMemsetD16Async(m->dst, (unsigned short)m->value, m->width, s); break;
			case 4: r = d->cuMemsetD32Async(m->dst, m->value, m->width, s); break;
			default: r = CUDA_ERROR_INVALID_VALUE;
			}
		} else {
			switch (m->elem_size) {
			case 1: r = d->cuMemsetD2D8Async(m->dst, m->pitch, (unsigned char)m->value, m->width, m->height, s); break;
			case 2: r = d->cuMemsetD2D16Async(m->dst, m->pitch, (unsigned short)m->value, m->width, m->height, s); break;
			case 4: r = d->cuMemsetD2D32Async(m->dst, m->pitch, m->value, m->width, m->height, s); break;
			default: r = CUDA_ERROR_INVALID_VALUE;
			}
		}
	}
	srv_async_error(w, r, "memset");
	rgpu__memset__free_unpacked(m, NULL);
	return 0;
}

/* ---- the application's virtual memory --------------------------------------------------- */

/*
 * The application's physical memory (cuMemCreate): pinned memory of the device, made for the
 * worker's own use only (no export handle types: a descriptor of this machine would mean
 * nothing to the client), kept in the object map under the client's id.
 */
int h_vmm_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, VmmCreate, vmm_create, w, f);
	int dev = srv_dev_local(w, m->device, "physical memory create");
	struct srv_obj o = {.id = m->handle, .kind = ST_KIND_PHYSMEM, .device = dev,
			    .size = m->size};
	CUmemAllocationProp prop = {0};
	CUmemGenericAllocationHandle h = 0;
	CUresult r = CUDA_SUCCESS;

	if (dev < 0)
		r = CUDA_ERROR_INVALID_DEVICE;
	else if (!m->size || m->size % RGPU_GRANULE)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (srv_obj_find(w, m->handle, 0))
		r = CUDA_ERROR_INVALID_HANDLE;
	/* counted first: over the tenant's quota the driver is never asked (quota.c) */
	if (r == CUDA_SUCCESS)
		r = srv_mem_charge(w, dev, m->size);
	if (r == CUDA_SUCCESS) {
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = w->dev[dev];
		r = w->drv.cuMemCreate(&h, m->size, &prop, 0);
		if (r != CUDA_SUCCESS)
			srv_mem_uncharge(w, dev, m->size);
	}
	if (r == CUDA_SUCCESS) {
		/* a refused registration releases the memory, and uncounts it (objects.c) */
		o.h = (void *)(uintptr_t)h;
		r = srv_obj_create(w, &o);
	}
	rgpu__vmm_create__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

/* The physical memory is released by the state log's removal of its record (objects.c). */
int h_vmm_release(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, VmmRelease, vmm_release, w, f);
	if (!srv_obj_find(w, m->handle, ST_KIND_PHYSMEM))
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "physical memory release");
	rgpu__vmm_release__free_unpacked(m, NULL);
	return 0;
}

int h_vmm_map(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, VmmMap, vmm_map, w, f);
	const struct srv_obj *pm = srv_obj_find(w, m->handle, ST_KIND_PHYSMEM);
	CUresult r = CUDA_ERROR_INVALID_VALUE;

	/* the device the record names (the client's number) must be the memory's own */
	if (pm && pm->device == srv_dev_local(w, m->device, "map"))
		r = srv_map_app(w, m->addr, m->size, m->offset, pm);
	srv_async_error(w, r, "map");
	rgpu__vmm_map__free_unpacked(m, NULL);
	return 0;
}

/* The mapping (and the physical memory it names) go with their records (statelog.c). */
int h_vmm_unmap(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, VmmUnmap, vmm_unmap, w, f);
	const struct srv_map *map = srv_map_find(w, m->addr, m->size);

	if (!map || !map->owner || (m->release && m->release != map->owner))
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "unmap");
	rgpu__vmm_unmap__free_unpacked(m, NULL);
	return 0;
}

int h_vmm_access(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, VmmAccess, vmm_access, w, f);
	const struct srv_map *map = srv_map_find(w, m->addr, m->size);
	CUmemAccessDesc desc[16];
	size_t n = 0;
	CUresult r = CUDA_SUCCESS;

	if (!map || !map->owner || map->owner != m->handle || map->offset != m->offset ||
	    map->device != srv_dev_local(w, m->device, "set access") || m->devices >> 16)
		r = CUDA_ERROR_INVALID_VALUE;
	/* bit d of devices and bits 2d..2d+1 of access are the client's device d */
	for (int d = 0; r == CUDA_SUCCESS && d < 16; d++) {
		if (!(m->devices >> d & 1))
			continue;
		int i = srv_dev_local(w, d, "set access");
		if (i < 0) {
			r = CUDA_ERROR_INVALID_DEVICE;
			break;
		}
		desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		desc[n].location.id = w->dev[i];
		desc[n].flags = (CUmemAccess_flags)(m->access >> (2 * d) & 3);
		n++;
	}
	if (r == CUDA_SUCCESS && n)
		r = w->drv.cuMemSetAccess(m->addr, m->size, desc, n);
	else if (r == CUDA_SUCCESS)
		r = CUDA_ERROR_INVALID_VALUE; /* names no device */
	srv_async_error(w, r, "set access");
	rgpu__vmm_access__free_unpacked(m, NULL);
	return 0;
}
