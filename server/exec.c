/*
 * The executor's handlers: one per request type, each decoding its message, mapping client ids
 * to driver handles, calling the driver and, for synchronous calls, replying. Which handler
 * serves which type is a column of proto/messages.tbl; the generated srv_handlers.h declares
 * them and srv_handlers[] (srv_handlers.c) dispatches to them.
 *
 * Fire-and-forget calls never reply: their failures are kept (srv_async_error) and reported
 * with the next reply, as CUDA reports asynchronous errors. A message that does not decode ends
 * the session with a protocol error. Every address and size from the client is checked before
 * it reaches the driver where the driver itself would not refuse it safely.
 */
#define LOG_PREFIX "exec: "
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/image.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "exec.h"
#include "srv.h"
#include "srv_handlers.h"

#define UNPACK(type, fn, f) rgpu__##fn##__unpack(NULL, (f)->hdr.body_len, (f)->body)

/* Decode or end the session. */
#define DECODE(var, Type, fn, w, f)                                                            \
	Rgpu__##Type *var = UNPACK(Type, fn, f);                                               \
	if (!var) {                                                                            \
		srv_protocol_error(w, RGPU_EPROTO, "undecodable %s", rgpu_msg_name((f)->hdr.type)); \
		return RGPU_EPROTO;                                                            \
	}

/* ---- contexts --------------------------------------------------------------------------- */

/* Destroy every object that belongs to client context ctx (its streams, events, modules). */
#define COLLECT_ALL UINT64_MAX
struct collect {
	uint64_t ctx;
	uint64_t *ids;
	size_t n, cap;
};
static struct collect *collect_arg;
static void collect_walk(const void *node, VISIT which, int depth)
{
	const struct srv_obj *o = *(const struct srv_obj *const *)node;
	struct collect *c = collect_arg;
	(void)depth;
	if ((which != postorder && which != leaf) || (c->ctx != COLLECT_ALL && o->ctx != c->ctx))
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 32;
		uint64_t *n = realloc(c->ids, cap * sizeof(*n));
		if (!n)
			return;
		c->ids = n;
		c->cap = cap;
	}
	c->ids[c->n++] = o->id;
}

static void destroy_obj(struct srv_worker *w, struct srv_obj *o)
{
	struct srv_driver *d = &w->drv;
	switch (o->kind) {
	case SRV_STREAM: d->cuStreamDestroy(o->h); break;
	case SRV_EVENT: d->cuEventDestroy(o->h); break;
	case SRV_MODULE: d->cuModuleUnload(o->h); break;
	case SRV_LIBRARY: d->cuLibraryUnload(o->h); break;
	case SRV_GRAPH_EXEC: d->cuGraphExecDestroy(o->h); break;
	case SRV_GRAPH: d->cuGraphDestroy(o->h); break;
	default: break;
	}
	srv_obj_del(w, o->id);
}

static void destroy_ctx_children(struct srv_worker *w, uint64_t ctx)
{
	struct collect c = {.ctx = ctx};
	collect_arg = &c;
	twalk(w->objs, collect_walk);
	/* functions and kernels first: their modules go after them */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < c.n; i++) {
			struct srv_obj *o = srv_obj_find(w, c.ids[i], 0);
			int leafish = o && (o->kind == SRV_FUNC || o->kind == SRV_KERNEL);
			if (o && (pass == 0) == leafish)
				destroy_obj(w, o);
		}
	free(c.ids);
}

int h_ctx_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxCreate, ctx_create, w, f);
	struct srv_obj o = {.id = m->ctx, .kind = SRV_CTX, .device = m->device,
			    .primary = m->primary};
	CUresult r = CUDA_SUCCESS;
	CUcontext c = NULL;

	if (m->device < 0 || m->device >= w->ndev) {
		r = CUDA_ERROR_INVALID_DEVICE;
	} else if (m->primary) {
		/*
		 * The flags the client set while its primary context was inactive. The worker
		 * already holds device 0's primary context (its staging buffers live there), so
		 * the driver may find it active and keep its flags: best effort, result ignored.
		 */
		w->drv.cuDevicePrimaryCtxSetFlags(w->dev[m->device], m->flags);
		r = w->drv.cuDevicePrimaryCtxRetain(&c, w->dev[m->device]);
	} else {
		r = w->drv.cuCtxCreate(&c, NULL, m->flags, w->dev[m->device]);
		w->cur_ctx_id = 0; /* cuCtxCreate pushed it */
	}
	if (r == CUDA_SUCCESS) {
		o.h = c;
		if (srv_obj_add(w, &o))
			r = CUDA_ERROR_INVALID_HANDLE;
	}
	srv_async_error(w, r, "context create");
	rgpu__ctx_create__free_unpacked(m, NULL);
	return 0;
}

int h_ctx_destroy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxRef, ctx_ref, w, f);
	struct srv_obj *o = srv_obj_find(w, m->ctx, SRV_CTX);
	CUresult r = CUDA_ERROR_INVALID_CONTEXT;

	if (o) {
		destroy_ctx_children(w, o->id);
		if (o->primary) {
			/*
			 * The worker keeps its own reference on device 0's primary context (the
			 * staging buffers live in it), so a release never tears it down under us;
			 * the client's objects in it were destroyed just above.
			 */
			r = w->drv.cuDevicePrimaryCtxRelease(w->dev[o->device]);
		} else {
			r = w->drv.cuCtxDestroy(o->h);
		}
		if (w->cur_ctx_id == o->id || !o->primary) {
			w->cur_ctx_id = 0;
			w->drv.cuCtxSetCurrent(w->base_ctx);
		}
		srv_obj_del(w, m->ctx);
	}
	srv_async_error(w, r, "context destroy");
	rgpu__ctx_ref__free_unpacked(m, NULL);
	return 0;
}

int h_ctx_sync(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxRef, ctx_ref, w, f);
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuCtxSynchronize();
	rgpu__ctx_ref__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

int h_ctx_limit(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxLimit, ctx_limit, w, f);
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret = 0;
	if (f->hdr.type == RGPU_MSG_CTX_SET_LIMIT) {
		if (r == CUDA_SUCCESS)
			r = w->drv.cuCtxSetLimit((CUlimit)m->limit, m->value);
		ret = srv_reply_status(w, f, r);
	} else {
		size_t v = 0;
		if (r == CUDA_SUCCESS)
			r = w->drv.cuCtxGetLimit(&v, (CUlimit)m->limit);
		ret = srv_reply_value(w, f, r, (int64_t)v);
	}
	rgpu__ctx_limit__free_unpacked(m, NULL);
	return ret;
}

/* ---- memory ----------------------------------------------------------------------------- */

/* Is s being captured into a graph? Work queued there runs at every replay, not now. */
static int capturing(struct srv_worker *w, CUstream s)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	return w->drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
	       st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int h_mem_alloc(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, MemAlloc, mem_alloc, w, f);
	CUresult r = CUDA_SUCCESS;
	int ret = 0;

	if (m->map_size) {
		r = map_range(w, m->map_addr, m->map_size, m->device);
		ret = srv_reply_status(w, f, r);
	} else if (!in_window(w, m->addr, m->size)) {
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "allocation record");
	}
	rgpu__mem_alloc__free_unpacked(m, NULL);
	return ret;
}

int h_mem_free(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, MemFree, mem_free, w, f);
	if (m->unmap_size)
		srv_async_error(w, unmap_range(w, m->unmap_addr, m->unmap_size), "unmap");
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
	void *buf;
};
static void CUDA_CB release_staging_cb(void *arg)
{
	struct put_staging *p = arg;
	srv_staging_put(p->w->staging, p->buf);
	free(p);
}

int h_memcpy_htod(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && !dev_range_ok(w, m->dst, f->hdr.payload_len))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && f->hdr.payload_len && capturing(w, s)) {
		/*
		 * A captured copy reads its source at every replay: give the graph its own pinned
		 * copy of the bytes, kept for the life of the worker.
		 */
		void *keep = NULL;
		r = w->drv.cuMemHostAlloc(&keep, f->hdr.payload_len, CU_MEMHOSTALLOC_PORTABLE);
		if (r == CUDA_SUCCESS) {
			memcpy(keep, f->payload, f->hdr.payload_len);
			r = w->drv.cuMemcpyHtoDAsync(m->dst, keep, f->hdr.payload_len, s);
		}
		srv_async_error(w, r, "captured host-to-device copy");
		rgpu__memcpy__free_unpacked(m, NULL);
		return 0;
	}
	if (r == CUDA_SUCCESS && f->hdr.payload_len)
		r = w->drv.cuMemcpyHtoDAsync(m->dst, f->payload, f->hdr.payload_len, s);
	if (r == CUDA_SUCCESS && !(m->flags & RGPU__COPY_FLAG__COPY_ASYNC)) {
		/*
		 * The last chunk of a synchronous copy: as with the driver, the copy is complete
		 * before anything the client issued after it starts, on any stream. The buffer
		 * is free again once the stream is.
		 */
		r = w->drv.cuStreamSynchronize(s);
		srv_async_error(w, r, "host-to-device copy");
		rgpu__memcpy__free_unpacked(m, NULL);
		return 0;
	}
	if (r == CUDA_SUCCESS && f->payload_staged) {
		/* pinned source: the copy reads it later, so the stream gives it back */
		struct put_staging *p = malloc(sizeof(*p));
		if (p) {
			p->w = w;
			p->buf = f->payload;
			if (w->drv.cuLaunchHostFunc(s, release_staging_cb, p) == CUDA_SUCCESS) {
				f->payload_staged = 0;
				f->payload = NULL;
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
static CUresult dtoh_async(struct srv_worker *w, const Rgpu__Memcpy *m, uint64_t seq, CUstream s)
{
	CUresult r = CUDA_SUCCESS;
	for (uint64_t off = 0; r == CUDA_SUCCESS && off < m->size; off += RGPU_COPY_CHUNK) {
		struct send_chunk *c = malloc(sizeof(*c));
		if (!c)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->w = w;
		c->seq = seq;
		c->offset = off;
		c->len = (size_t)MIN(RGPU_COPY_CHUNK, m->size - off);
		c->buf = srv_staging_get(w->staging);
		r = w->drv.cuMemcpyDtoHAsync(c->buf, m->src + off, c->len, s);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuLaunchHostFunc(s, send_chunk_cb, c);
		if (r != CUDA_SUCCESS) {
			srv_staging_put(w->staging, c->buf);
			free(c);
		}
	}
	return r;
}

/*
 * Device-to-host, synchronous: the executor copies a chunk, waits for the stream, and sends it
 * itself while the copy of the next chunk runs, so the copy engine and the network overlap and
 * no host function sits on the path of a small copy's round trip.
 */
static CUresult dtoh_sync(struct srv_worker *w, const Rgpu__Memcpy *m, uint64_t seq, CUstream s)
{
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	void *cur = srv_staging_get(w->staging), *next_buf = NULL;
	uint64_t off = 0, len = MIN(RGPU_COPY_CHUNK, m->size);
	CUresult r;

	r = w->drv.cuMemcpyDtoHAsync(cur, m->src, len, s);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamSynchronize(s);
	while (r == CUDA_SUCCESS && off < m->size) {
		uint64_t next = off + len, nlen = MIN(RGPU_COPY_CHUNK, m->size - next);
		next_buf = NULL;
		if (next < m->size) {
			next_buf = srv_staging_get(w->staging);
			r = w->drv.cuMemcpyDtoHAsync(next_buf, m->src + next, nlen, s);
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

int h_memcpy_dtoh(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret = 0;

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && !dev_range_ok(w, m->src, m->size))
		r = CUDA_ERROR_INVALID_VALUE;
	if (m->flags & RGPU__COPY_FLAG__COPY_ASYNC) {
		if (r == CUDA_SUCCESS && m->size)
			r = dtoh_async(w, m, f->hdr.seq, s);
		srv_async_error(w, r, "device-to-host copy");
	} else {
		if (r == CUDA_SUCCESS && m->size)
			r = dtoh_sync(w, m, f->hdr.seq, s);
		ret = srv_reply_status(w, f, r);
	}
	rgpu__memcpy__free_unpacked(m, NULL);
	return ret;
}

int h_memcpy_dtod(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Memcpy, memcpy, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && m->size &&
	    (!dev_range_ok(w, m->dst, m->size) || !dev_range_ok(w, m->src, m->size)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && m->size)
		r = w->drv.cuMemcpyDtoDAsync(m->dst, m->src, m->size, s);
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
	if (r == CUDA_SUCCESS && m->width) {
		uint64_t row = m->width * m->elem_size, span;
		span = m->height <= 1 ? row : m->pitch * (m->height - 1) + row;
		if (m->elem_size > 4 || m->width > (1ull << 48) || m->height > (1ull << 32) ||
		    m->pitch > (1ull << 40) || !dev_range_ok(w, m->dst, span))
			r = CUDA_ERROR_INVALID_VALUE;
	}
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

/* ---- modules ---------------------------------------------------------------------------- */

/* Every function of a loaded module or library with its parameter layout. */
static CUresult list_functions(struct srv_worker *w, struct srv_obj *o,
			       Rgpu__ModuleLoadReply *rep)
{
	struct srv_driver *d = &w->drv;
	unsigned n = 0;
	void **hs;
	CUresult r;

	r = o->kind == SRV_LIBRARY ? d->cuLibraryGetKernelCount(&n, o->h)
				   : d->cuModuleGetFunctionCount(&n, o->h);
	if (r != CUDA_SUCCESS || n == 0)
		return r;
	hs = calloc(n, sizeof(*hs));
	rep->functions = calloc(n, sizeof(*rep->functions));
	if (!hs || !rep->functions) {
		free(hs);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = o->kind == SRV_LIBRARY ? d->cuLibraryEnumerateKernels((CUkernel *)hs, n, o->h)
				   : d->cuModuleEnumerateFunctions((CUfunction *)hs, n, o->h);
	for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++) {
		Rgpu__FuncInfo *fi = calloc(1, sizeof(*fi));
		const char *name = NULL;
		uint32_t offs[1024], sizes[1024];
		size_t np = 0;

		if (!fi) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		rgpu__func_info__init(fi);
		rep->functions[rep->n_functions++] = fi;
		r = o->kind == SRV_LIBRARY ? d->cuKernelGetName(&name, hs[i])
					   : d->cuFuncGetName(&name, hs[i]);
		if (r != CUDA_SUCCESS)
			break;
		fi->name = strdup(name);
		for (np = 0; np < ARRAY_SIZE(offs); np++) {
			size_t off = 0, sz = 0;
			CUresult pr = o->kind == SRV_LIBRARY
					      ? d->cuKernelGetParamInfo(hs[i], np, &off, &sz)
					      : d->cuFuncGetParamInfo(hs[i], np, &off, &sz);
			if (pr != CUDA_SUCCESS)
				break;
			offs[np] = (uint32_t)off;
			sizes[np] = (uint32_t)sz;
		}
		fi->n_param_offset = fi->n_param_size = np;
		fi->param_offset = malloc(np * sizeof(uint32_t) + 1);
		fi->param_size = malloc(np * sizeof(uint32_t) + 1);
		if (!fi->name || !fi->param_offset || !fi->param_size) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		memcpy(fi->param_offset, offs, np * sizeof(uint32_t));
		memcpy(fi->param_size, sizes, np * sizeof(uint32_t));
	}
	free(hs);
	return r;
}

static void free_functions(Rgpu__ModuleLoadReply *rep)
{
	for (size_t i = 0; i < rep->n_functions; i++) {
		free(rep->functions[i]->name);
		free(rep->functions[i]->param_offset);
		free(rep->functions[i]->param_size);
		free(rep->functions[i]);
	}
	free(rep->functions);
}

int h_module_load(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ModuleLoad, module_load, w, f);
	Rgpu__ModuleLoadReply rep = RGPU__MODULE_LOAD_REPLY__INIT;
	struct srv_obj o = {.id = m->module, .kind = m->library ? SRV_LIBRARY : SRV_MODULE,
			    .ctx = m->ctx};
	void *image = NULL;
	size_t len = 0;
	int owned = 0, ret;
	char hexbuf[16];
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r != CUDA_SUCCESS)
		goto reply;
	if (m->hash.len != RGPU_HASH_LEN || srv_obj_find(w, m->module, 0)) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto reply;
	}
	if (m->has_image) {
		uint8_t h[RGPU_HASH_LEN];
		image = f->payload;
		len = f->hdr.payload_len;
		rgpu_sha256(image, len, h);
		if (len != m->image_size || memcmp(h, m->hash.data, RGPU_HASH_LEN) ||
		    rgpu_image_check(image, len)) {
			pr_warn("module image refused: size, hash or headers do not match");
			r = CUDA_ERROR_INVALID_IMAGE;
			goto reply;
		}
		pr_info("module image %s: %zu bytes received%s", rgpu_hex(h, 6, hexbuf), len,
			w->modcache && srv_modcache_put(w->modcache, h, image, len) == 0
				? " and cached"
				: " (not cached)");
	} else if (!w->modcache ||
		   srv_modcache_get(w->modcache, m->hash.data, &image, &len) != 0) {
		rep.need_image = 1;
		goto reply;
	} else {
		owned = 1;
		pr_info("module image %s: %zu bytes from the cache",
			rgpu_hex(m->hash.data, 6, hexbuf), len);
	}
	if (m->library)
		r = w->drv.cuLibraryLoadData((CUlibrary *)&o.h, image, NULL, NULL, 0, NULL, NULL, 0);
	else
		r = w->drv.cuModuleLoadData((CUmodule *)&o.h, image);
	if (r != CUDA_SUCCESS)
		goto reply;
	r = list_functions(w, &o, &rep);
	if (r != CUDA_SUCCESS || srv_obj_add(w, &o)) {
		if (m->library)
			w->drv.cuLibraryUnload(o.h);
		else
			w->drv.cuModuleUnload(o.h);
		if (r == CUDA_SUCCESS)
			r = CUDA_ERROR_INVALID_VALUE;
	}
reply:
	if (owned)
		free(image);
	rep.result = (int32_t)r;
	ret = srv_reply(w, f, &rep.base);
	free_functions(&rep);
	rgpu__module_load__free_unpacked(m, NULL);
	return ret;
}

int h_module_unload(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ObjRef, obj_ref, w, f);
	struct srv_obj *o = srv_obj_find(w, m->id, 0);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	if (o && (o->kind == SRV_MODULE || o->kind == SRV_LIBRARY)) {
		struct collect c = {0};
		/* forget its functions and kernels (a kernel's functions may live in any context) */
		c.ctx = COLLECT_ALL;
		collect_arg = &c;
		twalk(w->objs, collect_walk);
		/* kernels first remember their per-context functions, then both go */
		for (size_t i = 0; i < c.n; i++) {
			struct srv_obj *ch = srv_obj_find(w, c.ids[i], 0);
			if (ch && ch->parent == o->id && ch->kind == SRV_KERNEL)
				for (size_t j = 0; j < c.n; j++) {
					struct srv_obj *kf = srv_obj_find(w, c.ids[j], 0);
					if (kf && kf->parent == ch->id)
						srv_obj_del(w, kf->id);
				}
		}
		for (size_t i = 0; i < c.n; i++) {
			struct srv_obj *ch = srv_obj_find(w, c.ids[i], 0);
			if (ch && ch->parent == o->id)
				srv_obj_del(w, ch->id);
		}
		free(c.ids);
		r = o->kind == SRV_LIBRARY ? w->drv.cuLibraryUnload(o->h)
					   : w->drv.cuModuleUnload(o->h);
		srv_obj_del(w, o->id);
	}
	srv_async_error(w, r, "module unload");
	rgpu__obj_ref__free_unpacked(m, NULL);
	return 0;
}

int h_func_get(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, FuncGet, func_get, w, f);
	struct srv_obj *p = srv_obj_find(w, m->parent, 0);
	struct srv_obj o = {.id = m->func, .parent = m->parent, .ctx = p ? p->ctx : 0};
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	if (p && m->kind == RGPU__FUNC_KIND__FUNC_MODULE && p->kind == SRV_MODULE) {
		o.kind = SRV_FUNC;
		r = w->drv.cuModuleGetFunction((CUfunction *)&o.h, p->h, m->name);
	} else if (p && m->kind == RGPU__FUNC_KIND__FUNC_LIBRARY_KERNEL &&
		   p->kind == SRV_LIBRARY) {
		o.kind = SRV_KERNEL;
		r = w->drv.cuLibraryGetKernel((CUkernel *)&o.h, p->h, m->name);
	} else if (p && m->kind == RGPU__FUNC_KIND__FUNC_KERNEL_FUNCTION &&
		   p->kind == SRV_KERNEL) {
		o.kind = SRV_FUNC;
		o.ctx = m->ctx;
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuKernelGetFunction((CUfunction *)&o.h, p->h);
	}
	if (r == CUDA_SUCCESS && srv_obj_add(w, &o))
		r = CUDA_ERROR_INVALID_HANDLE;
	srv_async_error(w, r, "function lookup");
	rgpu__func_get__free_unpacked(m, NULL);
	return 0;
}

int h_global_get(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GlobalGet, global_get, w, f);
	Rgpu__GlobalReply rep = RGPU__GLOBAL_REPLY__INIT;
	struct srv_obj *o = srv_obj_find(w, m->module, m->library ? SRV_LIBRARY : SRV_MODULE);
	CUdeviceptr p = 0;
	size_t sz = 0;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int ret;

	if (o) {
		r = srv_use_ctx(w, m->ctx ? m->ctx : o->ctx);
		if (r == CUDA_SUCCESS)
			r = m->library ? w->drv.cuLibraryGetGlobal(&p, &sz, o->h, m->name)
				       : w->drv.cuModuleGetGlobal(&p, &sz, o->h, m->name);
	}
	if (r == CUDA_SUCCESS)
		remember_global(w, p, sz);
	rep.result = (int32_t)r;
	rep.addr = p;
	rep.size = sz;
	ret = srv_reply(w, f, &rep.base);
	rgpu__global_get__free_unpacked(m, NULL);
	return ret;
}

int h_func_attr(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, FuncAttr, func_attr, w, f);
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	int set = f->hdr.type == RGPU_MSG_FUNC_SET_ATTR;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int v = 0, ret = 0;

	if (o && (o->kind == SRV_FUNC || o->kind == SRV_KERNEL)) {
		CUfunction_attribute a = (CUfunction_attribute)m->attrib;
		int dev = m->device >= 0 && m->device < w->ndev ? w->dev[m->device] : -1;
		if (o->kind == SRV_FUNC) {
			r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
			if (r == CUDA_SUCCESS)
				r = set ? w->drv.cuFuncSetAttribute(o->h, a, (int)m->value)
					: w->drv.cuFuncGetAttribute(&v, a, o->h);
		} else if (dev < 0) {
			r = CUDA_ERROR_INVALID_DEVICE;
		} else {
			r = set ? w->drv.cuKernelSetAttribute(a, (int)m->value, o->h, dev)
				: w->drv.cuKernelGetAttribute(&v, a, o->h, dev);
		}
	}
	if (set) {
		srv_async_error(w, r, "function attribute");
	} else {
		ret = srv_reply_value(w, f, r, v);
	}
	rgpu__func_attr__free_unpacked(m, NULL);
	return ret;
}

/* ---- execution -------------------------------------------------------------------------- */

#define MAX_LAUNCH_ATTRS 32

struct launch_dims {
	uint32_t grid[3], block[3], shared_mem;
};

/*
 * A CUlaunchConfig from the client's dimensions and attributes (CUlaunchAttribute structs as
 * cuda.h lays them out); event ids inside attributes become our events. attrs must hold
 * MAX_LAUNCH_ATTRS entries.
 */
static CUresult build_config(struct srv_worker *w, const struct launch_dims *d,
			     const ProtobufCBinaryData *raw, CUstream s, CUlaunchConfig *cfg,
			     CUlaunchAttribute *attrs)
{
	size_t n = raw->len / sizeof(CUlaunchAttribute);

	if (raw->len % sizeof(CUlaunchAttribute) || n > MAX_LAUNCH_ATTRS)
		return CUDA_ERROR_INVALID_VALUE;
	if (raw->len)
		memcpy(attrs, raw->data, raw->len);
	for (size_t i = 0; i < n; i++) {
		if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
		    attrs[i].id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
			uint64_t id;
			struct srv_obj *e;
			memcpy(&id, &attrs[i].value, sizeof(id));
			e = srv_obj_find(w, id, SRV_EVENT);
			if (!e)
				return CUDA_ERROR_INVALID_HANDLE;
			attrs[i].value.launchCompletionEvent.event = e->h;
		}
	}
	memset(cfg, 0, sizeof(*cfg));
	cfg->gridDimX = d->grid[0];
	cfg->gridDimY = d->grid[1];
	cfg->gridDimZ = d->grid[2];
	cfg->blockDimX = d->block[0];
	cfg->blockDimY = d->block[1];
	cfg->blockDimZ = d->block[2];
	cfg->sharedMemBytes = d->shared_mem;
	cfg->hStream = s;
	cfg->attrs = attrs;
	cfg->numAttrs = (unsigned)n;
	return CUDA_SUCCESS;
}

/* cuLaunchKernelEx with the client's attributes. */
static CUresult launch_with_attrs(struct srv_worker *w, void *fn, const Rgpu__Launch *m,
				  CUstream s, void **extra)
{
	CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
	CUlaunchConfig cfg;
	struct launch_dims d = {{m->grid_x, m->grid_y, m->grid_z},
				{m->block_x, m->block_y, m->block_z}, m->shared_mem};
	CUresult r = build_config(w, &d, &m->attrs, s, &cfg, attrs);
	return r == CUDA_SUCCESS ? w->drv.cuLaunchKernelEx(&cfg, fn, NULL, extra) : r;
}

/*
 * The client packs the parameters at the offsets the module-load reply gave it, which is the
 * layout CU_LAUNCH_PARAM_BUFFER_POINTER expects; an application's own `extra` buffer arrives
 * as it was given. Either way the launch needs no per-parameter pointers here.
 */
int h_launch(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Launch, launch, w, f);
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	CUstream s = NULL;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	if (o && (o->kind == SRV_FUNC || o->kind == SRV_KERNEL)) {
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS) {
			size_t size = f->hdr.payload_len;
			static char empty[8];
			void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
					 f->payload ? f->payload : empty,
					 CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
			if (m->attrs.len)
				r = launch_with_attrs(w, o->h, m, s, extra);
			else
				r = w->drv.cuLaunchKernel(o->h, m->grid_x, m->grid_y, m->grid_z,
							  m->block_x, m->block_y, m->block_z,
							  m->shared_mem, s, NULL, extra);
		}
	}
	srv_async_error(w, r, "launch");
	rgpu__launch__free_unpacked(m, NULL);
	return 0;
}

struct host_trigger {
	struct srv_worker *w;
	uint64_t id;
	int persistent;  /* captured into a graph: runs at every replay, never freed */
};
static void CUDA_CB host_trigger_cb(void *arg)
{
	struct host_trigger *t = arg;
	Rgpu__Callback cb = RGPU__CALLBACK__INIT;
	cb.callback = t->id;
	/* the stream waits here until the client's function has returned */
	if (!atomic_load(&t->w->dead) &&
	    srv_send(t->w, RGPU_MSG_CALLBACK, 0, 0, &cb.base, NULL, 0) == 0)
		srv_wait_callback(t->w, t->id);
	if (!t->persistent)
		free(t);
}


int h_host_func(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, HostFunc, host_func, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS) {
		struct host_trigger *t = malloc(sizeof(*t));
		if (!t) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			t->w = w;
			t->id = m->callback;
			t->persistent = capturing(w, s);
			r = w->drv.cuLaunchHostFunc(s, host_trigger_cb, t);
			if (r != CUDA_SUCCESS)
				free(t);
		}
	}
	srv_async_error(w, r, "host function");
	rgpu__host_func__free_unpacked(m, NULL);
	return 0;
}

/* ---- streams and events ----------------------------------------------------------------- */

int h_stream_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, StreamCreate, stream_create, w, f);
	struct srv_obj o = {.id = m->stream, .kind = SRV_STREAM, .ctx = m->ctx};
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamCreateWithPriority((CUstream *)&o.h, m->flags, m->priority);
	if (r == CUDA_SUCCESS && srv_obj_add(w, &o)) {
		w->drv.cuStreamDestroy(o.h);
		r = CUDA_ERROR_INVALID_HANDLE;
	}
	srv_async_error(w, r, "stream create");
	rgpu__stream_create__free_unpacked(m, NULL);
	return 0;
}

int h_stream_op(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, StreamOp, stream_op, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret = 0;

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	switch (f->hdr.type) {
	case RGPU_MSG_STREAM_DESTROY:
		if (r == CUDA_SUCCESS && m->stream) {
			r = w->drv.cuStreamDestroy(s);
			srv_obj_del(w, m->stream);
		}
		srv_async_error(w, r, "stream destroy");
		break;
	case RGPU_MSG_STREAM_SYNC:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamSynchronize(s);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_STREAM_QUERY:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamQuery(s);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_STREAM_WAIT_EVENT: {
		struct srv_obj *e = srv_obj_find(w, m->event, SRV_EVENT);
		if (r == CUDA_SUCCESS)
			r = e ? w->drv.cuStreamWaitEvent(s, e->h, m->flags)
			      : CUDA_ERROR_INVALID_HANDLE;
		srv_async_error(w, r, "stream wait event");
		break;
	}
	}
	rgpu__stream_op__free_unpacked(m, NULL);
	return ret;
}

int h_event_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, EventCreate, event_create, w, f);
	struct srv_obj o = {.id = m->event, .kind = SRV_EVENT, .ctx = m->ctx};
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuEventCreate((CUevent *)&o.h, m->flags);
	if (r == CUDA_SUCCESS && srv_obj_add(w, &o)) {
		w->drv.cuEventDestroy(o.h);
		r = CUDA_ERROR_INVALID_HANDLE;
	}
	srv_async_error(w, r, "event create");
	rgpu__event_create__free_unpacked(m, NULL);
	return 0;
}

int h_event_op(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, EventOp, event_op, w, f);
	struct srv_obj *e = srv_obj_find(w, m->event, SRV_EVENT);
	CUresult r = e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	int ret = 0;

	switch (f->hdr.type) {
	case RGPU_MSG_EVENT_DESTROY:
		if (e) {
			r = w->drv.cuEventDestroy(e->h);
			srv_obj_del(w, m->event);
		}
		srv_async_error(w, r, "event destroy");
		break;
	case RGPU_MSG_EVENT_RECORD: {
		CUstream s = NULL;
		if (r == CUDA_SUCCESS)
			r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS)
			r = m->flags ? w->drv.cuEventRecordWithFlags(e->h, s, m->flags)
				     : w->drv.cuEventRecord(e->h, s);
		srv_async_error(w, r, "event record");
		break;
	}
	case RGPU_MSG_EVENT_SYNC:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuEventSynchronize(e->h);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_EVENT_QUERY:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuEventQuery(e->h);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_EVENT_ELAPSED: {
		Rgpu__ElapsedReply rep = RGPU__ELAPSED_REPLY__INIT;
		struct srv_obj *e2 = srv_obj_find(w, m->end_event, SRV_EVENT);
		float ms = 0;
		if (r == CUDA_SUCCESS)
			r = e2 ? w->drv.cuEventElapsedTime(&ms, e->h, e2->h)
			       : CUDA_ERROR_INVALID_HANDLE;
		rep.result = (int32_t)r;
		rep.ms = ms;
		ret = srv_reply(w, f, &rep.base);
		break;
	}
	}
	rgpu__event_op__free_unpacked(m, NULL);
	return ret;
}

/* ---- stream capture and graphs ---------------------------------------------------------- */

int h_capture(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CaptureOp, capture_op, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && f->hdr.type == RGPU_MSG_CAPTURE_BEGIN) {
		r = w->drv.cuStreamBeginCapture(s, (CUstreamCaptureMode)m->mode);
	} else if (r == CUDA_SUCCESS) {
		struct srv_obj g = {.id = m->graph, .kind = SRV_GRAPH, .ctx = m->ctx};
		r = w->drv.cuStreamEndCapture(s, (CUgraph *)&g.h);
		if (r == CUDA_SUCCESS && srv_obj_add(w, &g)) {
			w->drv.cuGraphDestroy(g.h);
			r = CUDA_ERROR_INVALID_VALUE;
		}
	}
	rgpu__capture_op__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

int h_graph(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphOp, graph_op, w, f);
	struct srv_driver *d = &w->drv;
	struct srv_obj *g = srv_obj_find(w, m->graph, SRV_GRAPH);
	struct srv_obj *e = srv_obj_find(w, m->exec, SRV_GRAPH_EXEC);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret = 0;

	switch (f->hdr.type) {
	case RGPU_MSG_GRAPH_CREATE: {
		struct srv_obj n = {.id = m->graph, .kind = SRV_GRAPH, .ctx = m->ctx};
		if (r == CUDA_SUCCESS)
			r = d->cuGraphCreate((CUgraph *)&n.h, (unsigned)m->flags);
		if (r == CUDA_SUCCESS && srv_obj_add(w, &n)) {
			d->cuGraphDestroy(n.h);
			r = CUDA_ERROR_INVALID_VALUE;
		}
		srv_async_error(w, r, "graph create");
		break;
	}
	case RGPU_MSG_GRAPH_INSTANTIATE: {
		struct srv_obj n = {.id = m->exec, .kind = SRV_GRAPH_EXEC, .ctx = m->ctx};
		if (r == CUDA_SUCCESS)
			r = g ? d->cuGraphInstantiateWithFlags((CUgraphExec *)&n.h, g->h, m->flags)
			      : CUDA_ERROR_INVALID_VALUE;
		if (r == CUDA_SUCCESS && srv_obj_add(w, &n)) {
			d->cuGraphExecDestroy(n.h);
			r = CUDA_ERROR_INVALID_VALUE;
		}
		ret = srv_reply_status(w, f, r);
		break;
	}
	case RGPU_MSG_GRAPH_LAUNCH:
	case RGPU_MSG_GRAPH_UPLOAD:
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS)
			r = !e ? CUDA_ERROR_INVALID_VALUE
			       : f->hdr.type == RGPU_MSG_GRAPH_LAUNCH ? d->cuGraphLaunch(e->h, s)
								      : d->cuGraphUpload(e->h, s);
		srv_async_error(w, r, "graph launch");
		break;
	case RGPU_MSG_GRAPH_EXEC_DESTROY:
		r = e ? d->cuGraphExecDestroy(e->h) : CUDA_ERROR_INVALID_VALUE;
		if (e)
			srv_obj_del(w, e->id);
		srv_async_error(w, r, "graph exec destroy");
		break;
	case RGPU_MSG_GRAPH_NODE_COUNT: {
		size_t n = 0;
		if (r == CUDA_SUCCESS)
			r = g ? d->cuGraphGetNodes(g->h, NULL, &n) : CUDA_ERROR_INVALID_VALUE;
		ret = srv_reply_value(w, f, r, (int64_t)n);
		break;
	}
	case RGPU_MSG_GRAPH_DESTROY:
		r = g ? d->cuGraphDestroy(g->h) : CUDA_ERROR_INVALID_VALUE;
		if (g)
			srv_obj_del(w, g->id);
		srv_async_error(w, r, "graph destroy");
		break;
	}
	rgpu__graph_op__free_unpacked(m, NULL);
	return ret;
}

/* ---- occupancy -------------------------------------------------------------------------- */

#define OCC_MAX_QUERIES 1024

int h_occupancy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Occupancy, occupancy, w, f);
	Rgpu__OccupancyReply rep = RGPU__OCCUPANCY_REPLY__INIT;
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int64_t vals[OCC_MAX_QUERIES];
	size_t n = MIN(m->n_block_size, m->n_dyn_smem);
	int ret;

	if (n > OCC_MAX_QUERIES || m->n_block_size != m->n_dyn_smem) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (o && (o->kind == SRV_FUNC || o->kind == SRV_KERNEL) &&
		   (m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_ACTIVE_CLUSTERS ||
		    m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_CLUSTER_SIZE)) {
		CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
		CUlaunchConfig cfg;
		struct launch_dims d = {{m->grid_x, m->grid_y, m->grid_z},
					{m->block_x, m->block_y, m->block_z}, m->shared_mem};
		int v = 0;
		r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
		if (r == CUDA_SUCCESS)
			r = build_config(w, &d, &m->attrs, NULL, &cfg, attrs);
		if (r == CUDA_SUCCESS)
			r = m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_ACTIVE_CLUSTERS
				    ? w->drv.cuOccupancyMaxActiveClusters(&v, o->h, &cfg)
				    : w->drv.cuOccupancyMaxPotentialClusterSize(&v, o->h, &cfg);
		vals[0] = v;
		n = 1;
	} else if (o && (o->kind == SRV_FUNC || o->kind == SRV_KERNEL)) {
		r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
		for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
			if (m->kind == RGPU__OCCUPANCY_KIND__OCC_ACTIVE_BLOCKS) {
				int blocks = 0;
				r = w->drv.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
					&blocks, o->h, (int)m->block_size[i], (size_t)m->dyn_smem[i],
					m->flags);
				vals[i] = blocks;
			} else {
				size_t smem = 0;
				r = w->drv.cuOccupancyAvailableDynamicSMemPerBlock(
					&smem, o->h, (int)m->dyn_smem[i], (int)m->block_size[i]);
				vals[i] = (int64_t)smem;
			}
		}
	}
	rep.result = (int32_t)r;
	if (r == CUDA_SUCCESS) {
		rep.n_value = n;
		rep.value = vals;
	}
	ret = srv_reply(w, f, &rep.base);
	rgpu__occupancy__free_unpacked(m, NULL);
	return ret;
}

/* ---- the link itself, and dispatch (srv_handlers[] comes from proto/messages.tbl) ------- */

int h_ping(struct srv_worker *w, struct srv_frame *f)
{
	return srv_reply_status(w, f, CUDA_SUCCESS);
}

int h_goodbye(struct srv_worker *w, struct srv_frame *f)
{
	(void)f;
	pr_debug("client said goodbye");
	return RGPU_ECLOSED;
}

int srv_exec(struct srv_worker *w, struct srv_frame *f)
{
	unsigned t = f->hdr.type;
	if (t >= ARRAY_SIZE(srv_handlers) || !srv_handlers[t]) {
		/* a known type that a client may not send as a request here (e.g. a second hello) */
		srv_protocol_error(w, RGPU_EPROTO, "unexpected %s", rgpu_msg_name(t));
		return RGPU_EPROTO;
	}
	pr_debug("%s seq %llu", rgpu_msg_name(t), (unsigned long long)f->hdr.seq);
	return srv_handlers[t](w, f);
}
