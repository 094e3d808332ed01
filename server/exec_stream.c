/*
 * Handlers for streams and events: create, destroy, synchronise, query, wait on an event,
 * record, elapsed time, stream attributes. Synchronise, query and elapsed time reply; the rest are
 * fire-and-forget. Every stream and event id is looked up in the object map with its kind
 * before a handle reaches the driver.
 */
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/record.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- streams and events ----------------------------------------------------------------- */

int h_stream_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, StreamCreate, stream_create, w, f);
	struct srv_obj o = {.id = m->stream, .kind = ST_KIND_STREAM, .ctx = m->ctx};
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamCreateWithPriority((CUstream *)&o.h, m->flags, m->priority);
	if (r == CUDA_SUCCESS)
		r = srv_obj_create(w, &o);
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
		/* the state log's removal destroys it (statelog.c) */
		if (r == CUDA_SUCCESS && !m->stream)
			r = CUDA_ERROR_INVALID_HANDLE;
		srv_async_error(w, r, "stream destroy");
		break;
	case RGPU_MSG_STREAM_SYNC:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamSynchronize(s);
		srv_quiet_stream_synced(w, m->ctx, s, r);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_STREAM_QUERY:
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamQuery(s);
		ret = srv_reply_status(w, f, r);
		break;
	case RGPU_MSG_STREAM_WAIT_EVENT: {
		struct srv_obj *e = srv_obj_find(w, m->event, ST_KIND_EVENT);
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

/* cuStreamSetAttribute / cuStreamGetAttribute: the attribute value's first 32 bytes cross */
int h_stream_attr(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, StreamAttr, stream_attr, w, f);
	Rgpu__StreamAttrReply rep = RGPU__STREAM_ATTR_REPLY__INIT;
	CUstreamAttrValue v;
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret;

	memset(&v, 0, sizeof(v));
	if (m->value.len) /* a get sends none: no memcpy from NULL */
		memcpy(&v, m->value.data, MIN(m->value.len, (size_t)RGPU_STREAM_ATTR_BYTES));
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (f->hdr.type == RGPU_MSG_STREAM_SET_ATTR) {
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamSetAttribute(s, (CUstreamAttrID)m->attr, &v);
		ret = srv_reply_status(w, f, r);
	} else {
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamGetAttribute(s, (CUstreamAttrID)m->attr, &v);
		rep.result = (int32_t)r;
		if (r == CUDA_SUCCESS) {
			rep.value.data = (uint8_t *)&v;
			rep.value.len = RGPU_STREAM_ATTR_BYTES;
		}
		ret = srv_reply(w, f, &rep.base);
	}
	rgpu__stream_attr__free_unpacked(m, NULL);
	return ret;
}

int h_event_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, EventCreate, event_create, w, f);
	struct srv_obj o = {.id = m->event, .kind = ST_KIND_EVENT, .ctx = m->ctx};
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuEventCreate((CUevent *)&o.h, m->flags);
	if (r == CUDA_SUCCESS)
		r = srv_obj_create(w, &o);
	srv_async_error(w, r, "event create");
	rgpu__event_create__free_unpacked(m, NULL);
	return 0;
}

int h_event_op(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, EventOp, event_op, w, f);
	struct srv_obj *e = srv_obj_find(w, m->event, ST_KIND_EVENT);
	CUresult r = e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	int ret = 0;

	switch (f->hdr.type) {
	case RGPU_MSG_EVENT_DESTROY:
		/* the state log's removal destroys it (statelog.c) */
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
		/* recorded for real (not into a capture): a restore records it again (ckpt.c) */
		if (r == CUDA_SUCCESS && !srv_capturing(w, s))
			e->recorded = f->hdr.seq;
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
		struct srv_obj *e2 = srv_obj_find(w, m->end_event, ST_KIND_EVENT);
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
