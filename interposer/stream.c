/*
 * Streams and events. Creating and destroying them, recording events and making streams wait
 * are fire-and-forget (the ids are ours); synchronizing and querying wait for the server.
 * Each thread's per-thread default stream is an ordinary blocking stream, created on the
 * server the first time the thread uses it in a context.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "rgpu/util.h"

#define PTDS_SLOTS 8

/* this thread's per-thread default streams, one per context it used */
static __thread struct ip_stream *tls_ptds[PTDS_SLOTS];

/* who hears that a stream is idle (pool.c) */
static ip_synced_fn synced_listener;

void ip_stream_on_synced(ip_synced_fn fn)
{
	synced_listener = fn;
}

static CUresult stream_new(struct ip_ctx *c, unsigned flags, int prio, int per_thread,
			   struct ip_stream **out)
{
	Rgpu__StreamCreate m = RGPU__STREAM_CREATE__INIT;
	struct ip_stream *s = ip_obj_new(sizeof(*s), ST_KIND_STREAM, c);
	CUresult r;

	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->ctx = c;
	s->flags = flags;
	s->priority = prio;
	s->per_thread = per_thread;
	m.stream = s->o.id;
	m.ctx = c->o.id;
	m.flags = flags;
	m.priority = prio;
	r = ip_post(RGPU_MSG_STREAM_CREATE, &m.base, NULL, 0);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(s);
		return r;
	}
	*out = s;
	return CUDA_SUCCESS;
}

uint64_t ip_stream_io(struct ip_ctx *c)
{
	struct ip_stream *s = c->io_stream;

	if (s && ip_obj_get(s, ST_KIND_STREAM))
		return s->o.id;
	/* per_thread: the application never has its handle, and could not destroy it */
	if (stream_new(c, CU_STREAM_NON_BLOCKING, 0, 1, &s) != CUDA_SUCCESS)
		return 0;
	c->io_stream = s;
	return s->o.id;
}

static CUresult per_thread_stream(struct ip_ctx *c, struct ip_stream **out)
{
	int free_slot = -1;
	for (int i = 0; i < PTDS_SLOTS; i++) {
		struct ip_stream *s = tls_ptds[i];
		if (s && !ip_obj_get(s, ST_KIND_STREAM))
			s = tls_ptds[i] = NULL; /* its context went away */
		if (s && s->ctx == c) {
			*out = s;
			return CUDA_SUCCESS;
		}
		if (!s && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		free_slot = 0; /* more contexts than slots: start a fresh one for this context */
	CUresult r = stream_new(c, 0, 0, 1, out);
	if (r == CUDA_SUCCESS)
		tls_ptds[free_slot] = *out;
	return r;
}

CUresult ip_stream_get(CUstream h, int ptds, struct ip_ctx **ctx, struct ip_stream **out)
{
	struct ip_stream *s;
	CUresult r;

	*out = NULL;
	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		r = ip_ctx_require(ctx);
		if (r != CUDA_SUCCESS)
			return r;
		ip_route_ctx(*ctx);
		if (h == CU_STREAM_PER_THREAD || (h == NULL && ptds))
			return per_thread_stream(*ctx, out);
		return CUDA_SUCCESS; /* the context's legacy NULL stream */
	}
	r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	s = ip_obj_get(h, ST_KIND_STREAM);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	*ctx = s->ctx;
	*out = s;
	ip_route_ctx(s->ctx);
	return CUDA_SUCCESS;
}

CUresult ip_stream_resolve(CUstream h, int ptds, struct ip_ctx **ctx, uint64_t *id)
{
	struct ip_stream *s;
	CUresult r = ip_stream_get(h, ptds, ctx, &s);
	if (r == CUDA_SUCCESS)
		*id = s ? s->o.id : 0;
	return r;
}

void ip_stream_ctx_teardown(struct ip_ctx *c)
{
	struct ip_obj **v = NULL;
	size_t n = 0;
	/* the server destroys them with the context: only the handles die here */
	ip_obj_collect(c, ST_KIND_STREAM, &v, &n);
	for (size_t i = 0; i < n; i++) {
		ip_obj_unregister(v[i]);
		ip_capture_abandon((struct ip_stream *)v[i]);
	}
	free(v);
	c->io_stream = NULL;
	ip_obj_collect(c, ST_KIND_EVENT, &v, &n);
	for (size_t i = 0; i < n; i++)
		ip_obj_unregister(v[i]);
	free(v);
	ip_obj_collect(c, ST_KIND_GRAPH, &v, &n);
	for (size_t i = 0; i < n; i++)
		ip_obj_unregister(v[i]);
	free(v);
	ip_obj_collect(c, ST_KIND_GRAPH_EXEC, &v, &n);
	for (size_t i = 0; i < n; i++)
		ip_obj_unregister(v[i]);
	free(v);
}

/* ---- streams ----------------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int prio)
{
	struct ip_ctx *c;
	CUresult r;
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags & ~CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	/* the driver clamps priorities into its range */
	if (prio > 0)
		prio = 0;
	if (prio < -5)
		prio = -5;
	return stream_new(c, flags, prio, 0, (struct ip_stream **)ph);
}

IP_API CUresult CUDAAPI cuStreamCreate(CUstream *ph, unsigned int flags)
{
	return cuStreamCreateWithPriority(ph, flags, 0);
}

IP_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream h)
{
	Rgpu__StreamOp m = RGPU__STREAM_OP__INIT;
	struct ip_stream *s;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	s = ip_obj_get(h, ST_KIND_STREAM);
	if (!s || s->per_thread)
		return CUDA_ERROR_INVALID_HANDLE;
	m.stream = s->o.id;
	m.ctx = s->ctx->o.id;
	ip_route_ctx(s->ctx);
	ip_obj_unregister(&s->o);
	ip_capture_abandon(s);
	ip_capture_set(&s->capture, NULL);
	return ip_post(RGPU_MSG_STREAM_DESTROY, &m.base, NULL, 0);
}

/* call: the application's call, checked against capture modes; NULL: the interposer's own */
static CUresult stream_call(uint16_t type, CUstream h, int ptds, const char *call)
{
	Rgpu__StreamOp m = RGPU__STREAM_OP__INIT;
	struct ip_stream *s;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_get(h, ptds, &c, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (call && (r = ip_capture_guard_stream(s, call)) != CUDA_SUCCESS)
		return r;
	sid = s ? s->o.id : 0;
	m.stream = sid;
	m.ctx = c->o.id;
	if (type != RGPU_MSG_STREAM_SYNC || !ip_call_idle(c->o.id, &r))
		r = ip_call_status(type, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	/* everything queued on the stream is done: what waits for that may go ahead */
	if (r == CUDA_SUCCESS && synced_listener)
		synced_listener(c, sid ? sid : IP_STREAM_LEGACY_ID);
	return r;
}

CUresult ip_stream_sync(CUstream h, int ptds)
{
	return stream_call(RGPU_MSG_STREAM_SYNC, h, ptds, NULL);
}

IP_API CUresult CUDAAPI cuStreamSynchronize(CUstream h)
{
	return stream_call(RGPU_MSG_STREAM_SYNC, h, 0, "cuStreamSynchronize");
}
IP_API CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h)
{
	return stream_call(RGPU_MSG_STREAM_SYNC, h, 1, "cuStreamSynchronize");
}
IP_API CUresult CUDAAPI cuStreamQuery(CUstream h)
{
	return stream_call(RGPU_MSG_STREAM_QUERY, h, 0, "cuStreamQuery");
}
IP_API CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h)
{
	return stream_call(RGPU_MSG_STREAM_QUERY, h, 1, "cuStreamQuery");
}

/*
 * A stream waits for an event of another server's device. No worker can see the other's
 * events, so this thread waits for the event itself before anything more is queued on the
 * stream: everything the program queues there afterwards starts after the event, as natively,
 * at the price of the host's wait. A capture cannot record such a wait: refused, logged.
 */
static CUresult wait_across(CUstream h, int ptds, struct ip_ctx *c, struct ip_event *e)
{
	Rgpu__EventOp m = RGPU__EVENT_OP__INIT;
	struct ip_stream *so = NULL;
	CUresult r;

	if (ip_stream_get(h, ptds, &c, &so) == CUDA_SUCCESS && ip_capture_of(so)) {
		pr_warn("cuStreamWaitEvent: a capturing stream of device %d cannot wait for an event "
			"of device %d, on another server (%s)", c->device, e->ctx->device,
			ip_dev_server_name(e->ctx->device));
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	m.event = e->o.id;
	m.ctx = e->ctx->o.id;
	int prev = ip_pin_dev(e->ctx->device);
	r = ip_call_status(RGPU_MSG_EVENT_SYNC, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	ip_pin_server(prev);
	return r;
}

static CUresult stream_wait(CUstream h, CUevent eh, unsigned flags, int ptds)
{
	Rgpu__StreamOp m = RGPU__STREAM_OP__INIT;
	struct ip_event *e;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(h, ptds, &c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(eh, ST_KIND_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	if (ip_dev_server(e->ctx->device) != ip_dev_server(c->device))
		return wait_across(h, ptds, c, e);
	m.stream = sid;
	m.ctx = c->o.id;
	m.event = e->o.id;
	m.flags = flags;
	r = ip_post(RGPU_MSG_STREAM_WAIT_EVENT, &m.base, NULL, 0);
	/* waiting on an event recorded inside a capture pulls this stream into it */
	if (r == CUDA_SUCCESS && e->capture && e->capture->active) {
		struct ip_stream *so;
		if (ip_stream_get(h, ptds, &c, &so) == CUDA_SUCCESS && so)
			ip_capture_join(so, e->capture);
	}
	return r;
}

IP_API CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{
	return stream_wait(h, e, flags, 0);
}
IP_API CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags)
{
	return stream_wait(h, e, flags, 1);
}

/* Local queries. */
#define STREAM_QUERY_FN(name, ptds, T, arg, expr)                                               \
	IP_API CUresult CUDAAPI name(CUstream h, T *arg)                                        \
	{                                                                                      \
		struct ip_stream *s;                                                           \
		struct ip_ctx *c;                                                              \
		CUresult r;                                                                    \
		if (!arg)                                                                      \
			return CUDA_ERROR_INVALID_VALUE;                                       \
		r = ip_stream_get(h, ptds, &c, &s);                                            \
		if (r == CUDA_SUCCESS)                                                         \
			*arg = (expr);                                                         \
		return r;                                                                      \
	}

STREAM_QUERY_FN(cuStreamGetFlags, 0, unsigned int, flags, s ? s->flags : 0)
STREAM_QUERY_FN(cuStreamGetFlags_ptsz, 1, unsigned int, flags, s ? s->flags : 0)
STREAM_QUERY_FN(cuStreamGetPriority, 0, int, prio, s ? s->priority : 0)
STREAM_QUERY_FN(cuStreamGetPriority_ptsz, 1, int, prio, s ? s->priority : 0)
STREAM_QUERY_FN(cuStreamGetCtx, 0, CUcontext, pctx, (CUcontext)c)
STREAM_QUERY_FN(cuStreamGetCtx_ptsz, 1, CUcontext, pctx, (CUcontext)c)
STREAM_QUERY_FN(cuStreamGetDevice, 0, CUdevice, dev, c->device)
STREAM_QUERY_FN(cuStreamGetDevice_ptsz, 1, CUdevice, dev, c->device)
STREAM_QUERY_FN(cuStreamGetId, 0, unsigned long long, id, s ? s->o.id : (h == CU_STREAM_LEGACY ? 1 : 0))
STREAM_QUERY_FN(cuStreamGetId_ptsz, 1, unsigned long long, id, s ? s->o.id : 0)

IP_API CUresult CUDAAPI cuStreamGetCtx_v2(CUstream h, CUcontext *pctx, CUgreenCtx *green)
{
	if (green)
		*green = NULL;
	return cuStreamGetCtx(h, pctx);
}
IP_API CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext *pctx, CUgreenCtx *green)
{
	if (green)
		*green = NULL;
	return cuStreamGetCtx_ptsz(h, pctx);
}

/*
 * Stream attributes: set on the server's driver (they change how the stream's work runs) and
 * recorded; read from it, since it may adjust what was set (a priority is clamped).
 */
static CUresult stream_attr(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *v, int set,
			    int ptds)
{
	Rgpu__StreamAttr m = RGPU__STREAM_ATTR__INIT;
	Rgpu__StreamAttrReply *rep = NULL;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r;

	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_resolve(h, ptds, &c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	m.stream = sid;
	m.ctx = c->o.id;
	m.attr = (int32_t)attr;
	if (set) {
		m.value.data = (uint8_t *)v;
		m.value.len = RGPU_STREAM_ATTR_BYTES;
		r = ip_call_status(RGPU_MSG_STREAM_SET_ATTR, &m.base, NULL, 0, NULL, 0, NULL, NULL);
		if (r == CUDA_SUCCESS && attr == CU_STREAM_ATTRIBUTE_PRIORITY) {
			/* cuStreamGetPriority answers here: take what the driver made of it */
			CUstreamAttrValue now;
			struct ip_stream *s;
			if (stream_attr(h, attr, &now, 0, ptds) == CUDA_SUCCESS &&
			    ip_stream_get(h, ptds, &c, &s) == CUDA_SUCCESS && s)
				s->priority = now.priority;
		}
		return r;
	}
	r = ip_call_status(RGPU_MSG_STREAM_GET_ATTR, &m.base, NULL, 0, NULL, 0,
			   &rgpu__stream_attr_reply__descriptor, (ProtobufCMessage **)&rep);
	if (rep) {
		if (r == CUDA_SUCCESS)
			memcpy(v, rep->value.data, MIN(rep->value.len, (size_t)RGPU_STREAM_ATTR_BYTES));
		rgpu__stream_attr_reply__free_unpacked(rep, NULL);
	}
	return r;
}

IP_API CUresult CUDAAPI cuStreamSetAttribute(CUstream h, CUstreamAttrID attr,
					     const CUstreamAttrValue *v)
{
	return stream_attr(h, attr, (CUstreamAttrValue *)v, 1, 0);
}
IP_API CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID attr,
						  const CUstreamAttrValue *v)
{
	return stream_attr(h, attr, (CUstreamAttrValue *)v, 1, 1);
}
IP_API CUresult CUDAAPI cuStreamGetAttribute(CUstream h, CUstreamAttrID attr,
					     CUstreamAttrValue *v)
{
	return stream_attr(h, attr, v, 0, 0);
}
IP_API CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID attr,
						  CUstreamAttrValue *v)
{
	return stream_attr(h, attr, v, 0, 1);
}

/* ---- events ------------------------------------------------------------------------------ */

IP_API CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags)
{
	Rgpu__EventCreate m = RGPU__EVENT_CREATE__INIT;
	struct ip_event *e;
	struct ip_ctx *c;
	CUresult r;

	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_EVENT_INTERPROCESS) {
		ip_refused("cuEventCreate with CU_EVENT_INTERPROCESS",
			   "interprocess events are not forwarded");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	e = ip_obj_new(sizeof(*e), ST_KIND_EVENT, c);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ctx = c;
	e->flags = flags;
	m.event = e->o.id;
	m.ctx = c->o.id;
	m.flags = flags;
	r = ip_post(RGPU_MSG_EVENT_CREATE, &m.base, NULL, 0);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(e);
		return r;
	}
	*ph = (CUevent)e;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuEventDestroy_v2(CUevent h)
{
	Rgpu__EventOp m = RGPU__EVENT_OP__INIT;
	struct ip_event *e;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(h, ST_KIND_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	m.event = e->o.id;
	m.ctx = e->ctx->o.id;
	ip_route_ctx(e->ctx);
	ip_obj_unregister(&e->o);
	ip_capture_set(&e->capture, NULL);
	return ip_post(RGPU_MSG_EVENT_DESTROY, &m.base, NULL, 0);
}

static CUresult event_record(CUevent h, CUstream s, unsigned flags, int ptds)
{
	Rgpu__EventOp m = RGPU__EVENT_OP__INIT;
	struct ip_event *e;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(h, ST_KIND_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	struct ip_stream *so;
	r = ip_stream_get(s, ptds, &c, &so);
	if (r != CUDA_SUCCESS)
		return r;
	if (c != e->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	sid = so ? so->o.id : 0;
	ip_capture_set(&e->capture, ip_capture_of(so));
	m.event = e->o.id;
	m.stream = sid;
	m.ctx = c->o.id;
	m.flags = flags;
	return ip_post(RGPU_MSG_EVENT_RECORD, &m.base, NULL, 0);
}

IP_API CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
	return event_record(e, s, 0, 0);
}
IP_API CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s)
{
	return event_record(e, s, 0, 1);
}
IP_API CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
	return event_record(e, s, flags, 0);
}
IP_API CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags)
{
	return event_record(e, s, flags, 1);
}

static CUresult event_call(uint16_t type, CUevent h, const char *call)
{
	Rgpu__EventOp m = RGPU__EVENT_OP__INIT;
	struct ip_event *e;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(h, ST_KIND_EVENT);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((r = ip_capture_guard(call)) != CUDA_SUCCESS)
		return r;
	m.event = e->o.id;
	m.ctx = e->ctx->o.id;
	ip_route_ctx(e->ctx);
	/* a CU_EVENT_BLOCKING_SYNC event's synchronization blocks, as natively */
	int block = type == RGPU_MSG_EVENT_SYNC && (e->flags & CU_EVENT_BLOCKING_SYNC);
	if (block)
		ip_wait_block(1);
	r = ip_call_status(type, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (block)
		ip_wait_block(0);
	return r;
}

IP_API CUresult CUDAAPI cuEventSynchronize(CUevent e)
{
	return event_call(RGPU_MSG_EVENT_SYNC, e, "cuEventSynchronize");
}

IP_API CUresult CUDAAPI cuEventQuery(CUevent e)
{
	return event_call(RGPU_MSG_EVENT_QUERY, e, "cuEventQuery");
}

IP_API CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
	Rgpu__EventOp m = RGPU__EVENT_OP__INIT;
	Rgpu__ElapsedReply *rep = NULL;
	struct ip_event *a, *b;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	a = ip_obj_get(start, ST_KIND_EVENT);
	b = ip_obj_get(end, ST_KIND_EVENT);
	if (!a || !b)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (ip_dev_server(a->ctx->device) != ip_dev_server(b->ctx->device))
		return CUDA_ERROR_INVALID_HANDLE; /* events of two contexts, as natively */
	m.event = a->o.id;
	m.end_event = b->o.id;
	m.ctx = a->ctx->o.id;
	ip_route_ctx(a->ctx);
	r = ip_call_status(RGPU_MSG_EVENT_ELAPSED, &m.base, NULL, 0, NULL, 0,
			   &rgpu__elapsed_reply__descriptor, (ProtobufCMessage **)&rep);
	if (rep) {
		if (r == CUDA_SUCCESS)
			*ms = rep->ms;
		rgpu__elapsed_reply__free_unpacked(rep, NULL);
	}
	return r;
}

IP_API CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	return cuEventElapsedTime_v2(ms, start, end);
}
