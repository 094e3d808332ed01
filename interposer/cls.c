/*
 * Context-local storage, the c693336e table (dark-api.md §4.4): every CUDA runtime copy keeps
 * its per-context state here under a key that is an address inside that copy, and expects its
 * destructor to run when the context goes away. This file owns the (context, key) -> (value,
 * destructor) entries and runs the destructors when the core reports a teardown through
 * ip_cls_teardown().
 *
 * It is purely client-side: values and destructors are pointers into the application, so it
 * must never forward anything to the server and never become part of migration state. It must
 * never call a destructor while holding its lock, because the runtime's destructor calls back
 * into the driver (and may come back here).
 *
 * A process holds a handful of entries (one per runtime copy per context), so a single list,
 * newest first, under one mutex is enough; the newest-first order is the teardown order.
 */
#include <pthread.h>
#include <stdlib.h>

#define LOG_PREFIX "dark: "
#include "rgpu/log.h"

#include "dark_priv.h"
#include "ip_dark.h"

struct cls_entry {
	struct cls_entry *next; /* older entries follow */
	CUcontext ctx;
	void *key;
	void *value;
	ip_cls_dtor dtor;
	int tearing; /* ip_cls_teardown has taken this entry's destructor */
};

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry *cls_head;

/* The link that points at (ctx, key)'s entry, or NULL. Call with cls_lock held. */
static struct cls_entry **cls_find(CUcontext ctx, void *key)
{
	for (struct cls_entry **pp = &cls_head; *pp; pp = &(*pp)->next)
		if ((*pp)->ctx == ctx && (*pp)->key == key)
			return pp;
	return NULL;
}

/* NULL means the calling thread's current context; none at all is 201 (§4.4, measured). */
static CUresult cls_resolve(CUcontext *ctx)
{
	if (!*ctx)
		*ctx = ip_ctx_current();
	return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult ip_cls_put(CUcontext ctx, void *key, void *value, ip_cls_dtor dtor)
{
	struct cls_entry *e;
	CUresult rc;

	rc = cls_resolve(&ctx);
	if (rc)
		return rc;
	/*
	 * An entry on a destroyed handle would never see a teardown, and its destructor could
	 * later run for an unrelated context that reuses the handle: refuse it like a get on
	 * such a handle is refused.
	 */
	if (!ip_ctx_alive(ctx))
		return CUDA_ERROR_INVALID_HANDLE;

	e = malloc(sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*e = (struct cls_entry){.ctx = ctx, .key = key, .value = value, .dtor = dtor};

	pthread_mutex_lock(&cls_lock);
	if (cls_find(ctx, key)) {
		pthread_mutex_unlock(&cls_lock);
		free(e);
		return CUDA_ERROR_INVALID_HANDLE; /* the old value stays */
	}
	e->next = cls_head;
	cls_head = e;
	pthread_mutex_unlock(&cls_lock);
	return CUDA_SUCCESS;
}

CUresult ip_cls_del(CUcontext ctx, void *key)
{
	struct cls_entry **pp, *e = NULL;
	CUresult rc;

	rc = cls_resolve(&ctx);
	if (rc)
		return rc;

	pthread_mutex_lock(&cls_lock);
	pp = cls_find(ctx, key);
	if (pp) {
		e = *pp;
		*pp = e->next;
	}
	pthread_mutex_unlock(&cls_lock);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	free(e); /* deleting never runs the destructor */
	return CUDA_SUCCESS;
}

CUresult ip_cls_get(void **value, CUcontext ctx, void *key)
{
	struct cls_entry **pp;
	CUresult rc;

	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	rc = cls_resolve(&ctx);
	if (rc)
		return rc;

	/*
	 * A torn-down or destroyed handle needs no check of its own: teardown forgot its
	 * entries, so the lookup misses and answers 400 like the real driver.
	 */
	pthread_mutex_lock(&cls_lock);
	pp = cls_find(ctx, key);
	if (pp)
		*value = (*pp)->value;
	pthread_mutex_unlock(&cls_lock);
	return pp ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/*
 * ip_cls_teardown() - run ctx's remaining destructors, newest first, then forget its entries
 * (ip_dark.h). The entries stay visible while the destructors run, so a destructor that looks
 * up its own or another runtime's state for ctx still finds it; an entry deleted meanwhile loses
 * its destructor, as a delete always does. Each destructor runs at most once, also if two
 * threads tear the same context down.
 *
 * @ctx:  the context being destroyed, reset or released to zero; NULL does nothing
 */
void ip_cls_teardown(CUcontext ctx)
{
	struct cls_entry *e, **pp;
	unsigned ran = 0;

	if (!ctx)
		return;

	pthread_mutex_lock(&cls_lock);
	for (;;) {
		void *key, *value;
		ip_cls_dtor dtor;

		/* The list is newest first: the first untaken entry of ctx is the newest. */
		for (e = cls_head; e; e = e->next)
			if (e->ctx == ctx && !e->tearing)
				break;
		if (!e)
			break;
		e->tearing = 1;
		key = e->key;
		value = e->value;
		dtor = e->dtor;

		pthread_mutex_unlock(&cls_lock);
		if (dtor) {
			dtor(ctx, key, value);
			ran++;
		}
		pthread_mutex_lock(&cls_lock);
	}
	/* Still under the lock that found nothing left to run: forget everything of ctx. */
	for (pp = &cls_head; *pp;) {
		e = *pp;
		if (e->ctx == ctx) {
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&cls_lock);

	if (ran)
		pr_debug("cls: context %p torn down, %u destructor(s) run", (void *)ctx, ran);
}
