/*
 * The job's object map: every client id of a context, stream, event, module, library, function,
 * kernel, graph or physical memory, mapped to the driver handle behind it (a tsearch tree keyed
 * by id). The client chooses the ids, so a handler looks each one up here, with the kind it
 * expects, before a handle reaches the driver; an id the map does not hold is a CUDA error, never
 * a guess. Only the executor thread touches the map; other threads read only the object count
 * (nobjs).
 */
#include <search.h>
#include <stdlib.h>

#include "rgpu/err.h"
#include "srv.h"

static int obj_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct srv_obj *)a)->id, y = ((const struct srv_obj *)b)->id;
	return x < y ? -1 : x > y;
}

struct srv_obj *srv_obj_find(struct srv_worker *w, uint64_t id, int kind)
{
	struct srv_obj key = {.id = id};
	struct srv_obj **p = tfind(&key, &w->objs, obj_cmp);
	if (!p || (kind && (*p)->kind != kind))
		return NULL;
	return *p;
}

static void release_handle(struct srv_worker *w, const struct srv_obj *o)
{
	struct srv_driver *d = &w->drv;
	CUresult r = CUDA_SUCCESS;

	switch (o->kind) {
	case ST_KIND_CONTEXT:
		/*
		 * A primary context's object is one activation by the application: its removal is
		 * the application's last release or a reset. The worker keeps its own reference
		 * on the job's first GPU's (the staging buffers live in it), so it gives that up
		 * and takes it back (srv_base_ctx_renew), and the driver tears the context down as
		 * natively. o->device is the index in w->dev (h_ctx_create translated the client's
		 * number), so 0 is that first GPU whatever the client calls it.
		 */
		if (o->primary) {
			/* finish the context's work and flush its device printf buffer first */
			CUresult sr = d->cuCtxSetCurrent(o->h);
			if (sr == CUDA_SUCCESS) {
				w->cur_ctx_id = o->id;
				sr = d->cuCtxSynchronize();
			}
			r = d->cuDevicePrimaryCtxRelease(w->dev[o->device]);
			/*
			 * Not after a sticky fault: the driver then refuses the context to this
			 * process for good (measured after a device assert: CUDA_ERROR_ASSERT), as
			 * CUDA documents, so the worker keeps what it has.
			 */
			if (o->device == 0 && w->staging && sr == CUDA_SUCCESS)
				srv_base_ctx_renew(w);
		} else
			r = d->cuCtxDestroy(o->h);
		if (w->cur_ctx_id == o->id || !o->primary) {
			w->cur_ctx_id = 0;
			d->cuCtxSetCurrent(w->base_ctx);
		}
		/*
		 * The context is gone whatever its teardown answered: a sticky fault it held (the
		 * answer of a release after a kernel fault) died with it, and a reset is how a
		 * program recovers from one. Kept, it would fail the next call of a fresh context.
		 */
		r = CUDA_SUCCESS;
		break;
	case ST_KIND_STREAM: r = d->cuStreamDestroy(o->h); break;
	case ST_KIND_EVENT: r = d->cuEventDestroy(o->h); break;
	case ST_KIND_MODULE:
		r = o->library ? d->cuLibraryUnload(o->h) : d->cuModuleUnload(o->h);
		break;
	case ST_KIND_GRAPH_EXEC:
	case ST_KIND_GRAPH:
		r = o->kind == ST_KIND_GRAPH ? d->cuGraphDestroy(o->h) : d->cuGraphExecDestroy(o->h);
		/* what exec_gnode.c keeps for it (its node ids, its scratch graph) goes too */
		if (w->graph_released)
			w->graph_released(w, o->kind, o->id);
		break;
	case ST_KIND_PHYSMEM:
		/* the application's physical memory: its mappings went first (the state log) */
		r = d->cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)o->h);
		srv_mem_uncharge(w, o->device, o->size);
		break;
	case ST_KIND_ARRAY:
		/* a level of a mipmapped array goes with it */
		if (!o->parent)
			r = d->cuArrayDestroy(o->h);
		break;
	case ST_KIND_MIPMAP: r = d->cuMipmappedArrayDestroy(o->h); break;
	case ST_KIND_TEXOBJ:
		r = o->elem ? d->cuSurfObjectDestroy((CUsurfObject)(uintptr_t)o->h)
			    : d->cuTexObjectDestroy((CUtexObject)(uintptr_t)o->h);
		break;
	default: break; /* functions and kernels go with their module */
	}
	srv_async_error(w, r, st_kind_name((uint32_t)o->kind));
}

CUresult srv_obj_create(struct srv_worker *w, const struct srv_obj *o)
{
	struct srv_obj *n, **p;

	if (o->id == 0 || srv_obj_find(w, o->id, 0)) {
		release_handle(w, o);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	n = malloc(sizeof(*n));
	p = n ? (*n = *o, tsearch(n, &w->objs, obj_cmp)) : NULL;
	if (!p) {
		free(n);
		release_handle(w, o);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	atomic_fetch_add(&w->nobjs, 1);
	return CUDA_SUCCESS;
}

void srv_obj_release(struct srv_worker *w, struct srv_obj *o)
{
	uint64_t id = o->id;
	int registered = srv_obj_find(w, id, 0) == o;

	/* a module's globals: copies to their addresses fail from now on, as they do natively */
	if (registered && o->kind == ST_KIND_MODULE)
		srv_forget_globals(w, id);
	release_handle(w, o);
	if (registered)
		srv_obj_del(w, id);
}

void srv_obj_del(struct srv_worker *w, uint64_t id)
{
	struct srv_obj *o = srv_obj_find(w, id, 0);
	if (!o)
		return;
	tdelete(o, &w->objs, obj_cmp);
	atomic_fetch_sub(&w->nobjs, 1);
	free(o);
}

CUresult srv_use_ctx(struct srv_worker *w, uint64_t ctx)
{
	struct srv_obj *o;
	CUresult r;

	if (ctx == w->cur_ctx_id && ctx)
		return CUDA_SUCCESS;
	o = srv_obj_find(w, ctx, ST_KIND_CONTEXT);
	if (!o)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = w->drv.cuCtxSetCurrent(o->h);
	if (r == CUDA_SUCCESS)
		w->cur_ctx_id = ctx;
	return r;
}

CUresult srv_use_ctx_or_base(struct srv_worker *w, uint64_t ctx)
{
	CUresult r;

	if (ctx)
		return srv_use_ctx(w, ctx);
	r = w->drv.cuCtxSetCurrent(w->base_ctx);
	if (r == CUDA_SUCCESS)
		w->cur_ctx_id = 0;
	return r;
}

CUresult srv_stream(struct srv_worker *w, uint64_t id, CUstream *out)
{
	struct srv_obj *o;
	if (id == 0) {
		*out = NULL;
		return CUDA_SUCCESS;
	}
	if (id == RGPU_NODE_STREAM) {
		/* the stream a MSG_GRAPH_NODE's frames are captured on, while it runs */
		*out = w->node_stream;
		return w->node_stream ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	}
	o = srv_obj_find(w, id, ST_KIND_STREAM);
	if (!o)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = o->h;
	return CUDA_SUCCESS;
}

/* ---- collecting the objects of a context ------------------------------------------------ */

struct collect *srv_collect_arg;
void srv_collect_walk(const void *node, VISIT which, int depth)
{
	const struct srv_obj *o = *(const struct srv_obj *const *)node;
	struct collect *c = srv_collect_arg;
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
