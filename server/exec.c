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

/* Destroy every object that belongs to client context ctx (its streams, events, modules). */
static void destroy_ctx_children(struct srv_worker *w, uint64_t ctx)
{
	struct collect c = {.ctx = ctx};
	srv_collect_arg = &c;
	twalk(w->objs, srv_collect_walk);
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
