/*
 * The job's object map: every client id of a context, stream, event, module, library, function,
 * kernel or graph, mapped to the driver handle behind it (a tsearch tree keyed by id). The
 * client chooses the ids, so a handler looks each one up here, with the kind it expects, before a
 * handle reaches the driver; an id the map does not hold is a CUDA error, never a guess. Only the
 * executor thread touches the map; other threads read only the object count (nobjs).
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

int srv_obj_add(struct srv_worker *w, const struct srv_obj *o)
{
	struct srv_obj *n, **p;
	if (o->id == 0 || srv_obj_find(w, o->id, 0))
		return RGPU_EEXIST;
	n = malloc(sizeof(*n));
	if (!n)
		return RGPU_ENOMEM;
	*n = *o;
	p = tsearch(n, &w->objs, obj_cmp);
	if (!p) {
		free(n);
		return RGPU_ENOMEM;
	}
	atomic_fetch_add(&w->nobjs, 1);
	return 0;
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
	o = srv_obj_find(w, ctx, SRV_CTX);
	if (!o)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = w->drv.cuCtxSetCurrent(o->h);
	if (r == CUDA_SUCCESS)
		w->cur_ctx_id = ctx;
	return r;
}

CUresult srv_stream(struct srv_worker *w, uint64_t id, CUstream *out)
{
	struct srv_obj *o;
	if (id == 0) {
		*out = NULL;
		return CUDA_SUCCESS;
	}
	o = srv_obj_find(w, id, SRV_STREAM);
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
