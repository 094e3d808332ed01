/*
 * The executor's entry point and the session's own handlers. srv_exec() runs one frame through
 * the generated dispatch array srv_handlers[] (which handler serves which type is a column of
 * proto/messages.tbl; srv_handlers.h declares them), and refuses a type that no handler takes.
 * The handlers of contexts, ping and goodbye live here; those of each other area have a file
 * named for it (exec_memory.c, exec_module.c, exec_stream.c, exec_graph.c, exec_launch.c), and
 * exec.h says what every handler must do.
 */
#define LOG_PREFIX "exec: "
#include <search.h>
#include <stdlib.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- contexts --------------------------------------------------------------------------- */

int h_ctx_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxCreate, ctx_create, w, f);
	/* the client's device number; the object keeps the index of its GPU here */
	int dev = srv_dev_local(w, m->device, "context create");
	struct srv_obj o = {.id = m->ctx, .kind = ST_KIND_CONTEXT, .device = dev,
			    .primary = m->primary};
	CUresult r = CUDA_SUCCESS;
	CUcontext c = NULL;

	if (dev < 0) {
		r = CUDA_ERROR_INVALID_DEVICE;
	} else if (m->primary) {
		/*
		 * The flags the client set while its primary context was inactive. The worker
		 * already holds the primary context of the job's first GPU (its staging buffers
		 * live there), so the driver may find it active and keep its flags: best effort,
		 * result ignored.
		 */
		w->drv.cuDevicePrimaryCtxSetFlags(w->dev[dev], m->flags);
		r = w->drv.cuDevicePrimaryCtxRetain(&c, w->dev[dev]);
	} else {
		r = w->drv.cuCtxCreate(&c, NULL, m->flags, w->dev[dev]);
		w->cur_ctx_id = 0; /* cuCtxCreate pushed it */
	}
	if (r == CUDA_SUCCESS) {
		o.h = c;
		r = srv_obj_create(w, &o);
	}
	srv_async_error(w, r, "context create");
	rgpu__ctx_create__free_unpacked(m, NULL);
	return 0;
}

/*
 * Its streams, events, modules (and their functions) go first, newest first, then the context
 * itself: the state log's removal (statelog.c, srv_obj_release).
 */
int h_ctx_destroy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxRef, ctx_ref, w, f);
	struct srv_obj *o = srv_obj_find(w, m->ctx, ST_KIND_CONTEXT);

	srv_async_error(w, o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT, "context destroy");
	rgpu__ctx_ref__free_unpacked(m, NULL);
	return 0;
}

/*
 * Whether a context is idle (issue 14): a program's synchronous copy followed by
 * cuCtxSynchronize, or by cuStreamSynchronize, is common (a loss read back, a benchmark's
 * copy), and the synchronization then costs a round trip for nothing. The executor follows
 * one context from its last cuCtxSynchronize: as long as only copies on one stream were put
 * on it since, and that stream was synchronized after them, nothing of the context can be
 * pending, and every Status reply says so (idle_ctx). The client answers the next
 * synchronization itself if it sent nothing after that reply (calls.c). Every other frame
 * that may put work on a stream, or any failure, ends it until the next cuCtxSynchronize.
 */
static int quiet_keeps(unsigned t)
{
	switch (t) {
	case RGPU_MSG_PING: /* these two put nothing on a stream */
	case RGPU_MSG_MEM_INFO:
	case RGPU_MSG_CTX_SYNC: /* these four say what they did (srv_quiet_*) */
	case RGPU_MSG_STREAM_SYNC:
	case RGPU_MSG_MEMCPY_HTOD:
	case RGPU_MSG_MEMCPY_DTOH:
		return 1;
	default:
		return 0;
	}
}

int h_ctx_sync(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxRef, ctx_ref, w, f);
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuCtxSynchronize();
	srv_quiet_ctx_synced(w, m->ctx, r);
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

/*
 * Cache and shared-memory configuration of a context or (CtxConfig.func) a function, and the
 * context's stream priority range.
 */
int h_ctx_config(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CtxConfig, ctx_config, w, f);
	Rgpu__CtxConfigReply rep = RGPU__CTX_CONFIG_REPLY__INIT;
	struct srv_obj *o = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret;

	if (r == CUDA_SUCCESS && m->func) {
		o = srv_obj_find(w, m->func, 0);
		if (!o || (o->kind != ST_KIND_FUNCTION && o->kind != ST_KIND_KERNEL))
			r = CUDA_ERROR_INVALID_HANDLE;
		else if (o->ctx)
			r = srv_use_ctx(w, o->ctx);
	}
	if (f->hdr.type == RGPU_MSG_CTX_SET_CONFIG) {
		if (r == CUDA_SUCCESS && m->kind == RGPU__CONFIG_KIND__CONFIG_CACHE)
			r = o ? w->drv.cuFuncSetCacheConfig(o->h, (CUfunc_cache)m->value)
			      : w->drv.cuCtxSetCacheConfig((CUfunc_cache)m->value);
		else if (r == CUDA_SUCCESS && m->kind == RGPU__CONFIG_KIND__CONFIG_SHARED_MEM)
			r = o ? w->drv.cuFuncSetSharedMemConfig(o->h, (CUsharedconfig)m->value)
			      : w->drv.cuCtxSetSharedMemConfig((CUsharedconfig)m->value);
		else if (r == CUDA_SUCCESS)
			r = CUDA_ERROR_INVALID_VALUE;
		ret = srv_reply_status(w, f, r);
	} else {
		CUfunc_cache cc = CU_FUNC_CACHE_PREFER_NONE;
		CUsharedconfig sc = CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE;
		int least = 0, greatest = 0;
		if (r == CUDA_SUCCESS && o)
			r = CUDA_ERROR_INVALID_VALUE; /* the driver answers these for contexts only */
		if (r == CUDA_SUCCESS && m->kind == RGPU__CONFIG_KIND__CONFIG_CACHE) {
			r = w->drv.cuCtxGetCacheConfig(&cc);
			rep.value = (int32_t)cc;
		} else if (r == CUDA_SUCCESS && m->kind == RGPU__CONFIG_KIND__CONFIG_SHARED_MEM) {
			r = w->drv.cuCtxGetSharedMemConfig(&sc);
			rep.value = (int32_t)sc;
		} else if (r == CUDA_SUCCESS && m->kind == RGPU__CONFIG_KIND__CONFIG_PRIORITY_RANGE) {
			r = w->drv.cuCtxGetStreamPriorityRange(&least, &greatest);
			rep.value = least;
			rep.greatest = greatest;
		} else if (r == CUDA_SUCCESS) {
			r = CUDA_ERROR_INVALID_VALUE;
		}
		rep.result = (int32_t)r;
		ret = srv_reply(w, f, &rep.base);
	}
	rgpu__ctx_config__free_unpacked(m, NULL);
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
	srv_link_lanes_said(w);
	/* what a driver thread wrote since the last flush; the client waits for it (session.c) */
	srv_stdio_flush(w);
	return RGPU_ECLOSED;
}

/*
 * RGPU_VERIFY_LOG: a synchronising request carries the client's digest; if this worker's log
 * differs, the request is not executed and the reply carries this log instead.
 */
static int refuse_mismatch(struct srv_worker *w, struct srv_frame *f)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	if (srv_log_verify(w, f, &buf, &len))
		return 0;
	if (f->hdr.type == RGPU_MSG_GOODBYE) {
		free(buf);
		return 0;
	}
	w->exec_recorded = 1; /* not executed: nothing to record */
	st.result = CUDA_ERROR_ILLEGAL_STATE;
	st.server_log.data = buf;
	st.server_log.len = len;
	ret = srv_reply(w, f, &st.base);
	free(buf);
	return ret ? ret : 1;
}

int srv_exec(struct srv_worker *w, struct srv_frame *f)
{
	unsigned t = f->hdr.type;
	int ret;

	if (t >= ARRAY_SIZE(srv_handlers) || !srv_handlers[t]) {
		/* a known type that a client may not send as a request here (e.g. a second hello) */
		srv_protocol_error(w, RGPU_EPROTO, "unexpected %s", rgpu_msg_name(t));
		return RGPU_EPROTO;
	}
	pr_debug("%s seq %llu", rgpu_msg_name(t), (unsigned long long)f->hdr.seq);
	w->exec_result = CUDA_SUCCESS;
	w->exec_recorded = 0;
	if (!quiet_keeps(t))
		srv_quiet_off(w);
	if (!w->replaying && (t == RGPU_MSG_GOODBYE || rgpu_msg_info(t)->effect == RGPU_EFFECT_SYNC)) {
		ret = refuse_mismatch(w, f);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	ret = srv_handlers[t](w, f);
	if (ret == 0 && !w->exec_recorded)
		srv_log_record(w, f, NULL);
	/*
	 * A module unloaded or a context destroyed (by the log's removal, just now): the driver
	 * flushed the device printf buffer. Calls that flush send the output before their reply
	 * (reply.c).
	 */
	if (ret == 0 && !w->replaying && srv_stdio_flush_point(t) &&
	    rgpu_msg_info(t)->call_class == RGPU_CLASS_POST)
		srv_stdio_flush(w);
	if (ret == 0 && !w->replaying)
		srv_log_dump(w);
	return ret;
}
