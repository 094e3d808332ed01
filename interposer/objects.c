/*
 * Handles: every CUcontext, CUstream, CUevent, CUmodule, CUlibrary, CUfunction and CUkernel the
 * application holds is the address of one of our objects (design.md §3, invariant 1). The
 * registry is the set of live addresses, so a stale or made-up handle is refused with the
 * driver's error instead of being dereferenced. Ids are what the server knows objects by.
 */
#include <search.h>
#include <stdlib.h>

#include "ip.h"
#include "rgpu/err.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static void *registry;
static struct ip_obj *dead; /* unregistered objects, kept: never freed, never reused */
static atomic_uint_fast64_t next_id;

static int ptr_cmp(const void *a, const void *b)
{
	return a < b ? -1 : a > b;
}

uint64_t ip_new_id(void)
{
	return atomic_fetch_add(&next_id, 1) + 1;
}

int ip_obj_register(struct ip_obj *o, int kind)
{
	void *r;
	o->kind = (uint32_t)kind;
	o->dead = 0;
	o->id = ip_new_id();
	pthread_mutex_lock(&reg_lock);
	r = tsearch(o, &registry, ptr_cmp);
	pthread_mutex_unlock(&reg_lock);
	return r ? 0 : RGPU_ENOMEM;
}

void *ip_obj_new(size_t size, int kind, struct ip_ctx *owner)
{
	struct ip_obj *o = calloc(1, size);

	if (!o || ip_obj_register(o, kind)) {
		free(o);
		return NULL;
	}
	o->owner = owner;
	return o;
}

void ip_obj_drop(void *obj)
{
	if (!obj)
		return;
	ip_obj_forget(obj);
	free(obj);
}

void ip_obj_forget(struct ip_obj *o)
{
	pthread_mutex_lock(&reg_lock);
	tdelete(o, &registry, ptr_cmp);
	o->dead = 1;
	pthread_mutex_unlock(&reg_lock);
}

void ip_obj_unregister(struct ip_obj *o)
{
	pthread_mutex_lock(&reg_lock);
	if (tdelete(o, &registry, ptr_cmp)) {
		o->dead = 1;
		o->dead_next = dead;
		dead = o;
	}
	pthread_mutex_unlock(&reg_lock);
}

void *ip_obj_get(const void *h, int kind)
{
	struct ip_obj **p;
	struct ip_obj *o = NULL;

	if (!h)
		return NULL;
	pthread_mutex_lock(&reg_lock);
	p = tfind(h, &registry, ptr_cmp);
	if (p && !(*p)->dead && (!kind || (int)(*p)->kind == kind))
		o = *p;
	pthread_mutex_unlock(&reg_lock);
	return o;
}

static struct {
	struct ip_ctx *ctx;
	int kind;
	struct ip_obj **v;
	size_t n, cap;
	int err;
} coll;

static void collect_walk(const void *node, VISIT which, int depth)
{
	struct ip_obj *o = *(struct ip_obj *const *)node;
	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (o->owner != coll.ctx || (coll.kind && (int)o->kind != coll.kind))
		return;
	if (coll.n == coll.cap) {
		size_t cap = coll.cap ? 2 * coll.cap : 16;
		struct ip_obj **n = realloc(coll.v, cap * sizeof(*n));
		if (!n) {
			coll.err = RGPU_ENOMEM;
			return;
		}
		coll.v = n;
		coll.cap = cap;
	}
	coll.v[coll.n++] = o;
}

int ip_obj_collect(struct ip_ctx *ctx, int kind, struct ip_obj ***out, size_t *n)
{
	int err;
	pthread_mutex_lock(&reg_lock);
	coll.ctx = ctx;
	coll.kind = kind;
	coll.v = NULL;
	coll.n = coll.cap = 0;
	coll.err = 0;
	twalk(registry, collect_walk);
	*out = coll.v;
	*n = coll.n;
	err = coll.err;
	pthread_mutex_unlock(&reg_lock);
	return err;
}
