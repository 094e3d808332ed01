/*
 * Host functions and stream callbacks (cuLaunchHostFunc, cuStreamAddCallback): the registry of
 * what the application asked to run, and the callback thread that runs each one when the
 * server's stream reaches it, in the order the server triggers them, then acknowledges it.
 * They run here, never on the receiver thread, so a slow callback cannot stall data; the
 * acknowledgement is urgent (never held back by flow control) because the server's stream waits
 * for it. A host function captured into a graph stays registered and runs at every replay.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "session_state.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"

static __thread int in_callback;

int ip_in_callback(void)
{
	return in_callback;
}

uint64_t ip_callback_register(CUhostFn fn, CUstreamCallback cb, CUstream stream, void *user,
			      int persistent)
{
	struct cbreg *r = malloc(sizeof(*r));
	if (!r)
		return 0;
	r->id = atomic_fetch_add(&S.cb_next, 1) + 1;
	r->persistent = persistent;
	r->fn = fn;
	r->cb = cb;
	r->stream = stream;
	r->user = user;
	pthread_mutex_lock(&S.cb_lock);
	r->next = S.cbregs;
	S.cbregs = r;
	pthread_mutex_unlock(&S.cb_lock);
	return r->id;
}

/* registration id (NULL: none), taken off the list unless it stays (persistent); S.cb_lock */
static struct cbreg *take_locked(uint64_t id, int keep_persistent)
{
	for (struct cbreg **pp = &S.cbregs; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			struct cbreg *r = *pp;
			if (!(keep_persistent && r->persistent))
				*pp = r->next;
			return r;
		}
	return NULL;
}

void ip_callback_forget(uint64_t id)
{
	pthread_mutex_lock(&S.cb_lock);
	struct cbreg *r = take_locked(id, 0);
	pthread_mutex_unlock(&S.cb_lock);
	free(r);
}

void *ip_callback_main(void *arg)
{
	ip_sess_bind(arg);
	pthread_mutex_lock(&S.cb_lock);
	for (;;) {
		struct cbreg *r;
		uint64_t id;

		while (S.cbq_n == 0 && !atomic_load(&S.dead))
			pthread_cond_wait(&S.cb_cond, &S.cb_lock);
		if (atomic_load(&S.dead))
			break;
		id = S.cbq[0];
		memmove(S.cbq, S.cbq + 1, --S.cbq_n * sizeof(*S.cbq));
		r = take_locked(id, 1);
		pthread_mutex_unlock(&S.cb_lock);
		if (r) {
			in_callback = 1;
			if (r->fn)
				r->fn(r->user);
			else
				r->cb(r->stream, CUDA_SUCCESS, r->user);
			in_callback = 0;
			if (!r->persistent)
				free(r);
		} else {
			pr_warn("trigger for unknown host function %llu", (unsigned long long)id);
		}
		/* the server's stream waits for this acknowledgement: urgent, never held back */
		Rgpu__Callback done = RGPU__CALLBACK__INIT;
		done.callback = id;
		if (!ip_link_enqueue(RGPU_MSG_CALLBACK_DONE, &done.base, NULL, 0, 1, NULL, NULL))
			ip_link_flush();
		pthread_mutex_lock(&S.cb_lock);
	}
	pthread_mutex_unlock(&S.cb_lock);
	return NULL;
}

void ip_callback_push(uint64_t id)
{
	pthread_mutex_lock(&S.cb_lock);
	if (S.cbq_n == S.cbq_cap) {
		size_t cap = S.cbq_cap ? 2 * S.cbq_cap : 16;
		uint64_t *n = realloc(S.cbq, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&S.cb_lock);
			ip_session_die(CUDA_ERROR_OUT_OF_MEMORY,
				       "out of memory queueing a callback");
			return;
		}
		S.cbq = n;
		S.cbq_cap = cap;
	}
	S.cbq[S.cbq_n++] = id;
	pthread_cond_signal(&S.cb_cond);
	pthread_mutex_unlock(&S.cb_lock);
}
