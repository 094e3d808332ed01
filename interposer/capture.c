/*
 * The bookkeeping of active stream captures, below every area that asks about it: which stream
 * takes part in which capture (ip_capture_of, ip_capture_set, ip_capture_join), and the capture
 * modes. graph.c begins and ends captures; streams, memory, launches and contexts ask the
 * guards here before a call a capture may forbid.
 *
 * Capture modes are enforced here, because the worker cannot: it runs every client thread's
 * requests from one thread in relaxed mode. The rules are the driver's, as tests/gpu/
 * capture_probe.cu measured them (driver 580, CUDA 13.0):
 *  - a potentially unsafe call (ip_capture_guard) fails with CUDA_ERROR_STREAM_CAPTURE_
 *    UNSUPPORTED, and invalidates the captures it conflicts with, when the calling thread is
 *    not in relaxed mode and began a capture that is not relaxed, or when it is in global mode
 *    and any thread began a global-mode capture;
 *  - synchronising or querying a capturing stream, and synchronising a context with a capturing
 *    stream, fail the same way in every mode, from every thread;
 *  - work on the legacy stream fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking
 *    stream of its context is capturing.
 * A refused call is never sent: the worker's capture goes on, and the capture's end ends it there
 * and destroys its graph (GRAPH_DESTROY), so both sides' state logs stay equal. The checks must
 * stay cheap (cuStreamQuery, cuEventQuery are polled): a thread-local mode, a per-thread count
 * of the thread's non-relaxed captures and a global count of global-mode ones; the list of
 * active captures is only walked to refuse, or while some capture is active.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>

#include "ip.h"
#include "rgpu/log.h"

static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/*
 * A thread that began a capture that is not relaxed. Allocated on its first such capture and
 * never freed, so that a capture outliving its thread (abandoned with its stream later) still
 * has somewhere to count down.
 */
struct ip_capture_thread {
	atomic_int strict; /* its active captures in global or thread-local mode */
	struct ip_capture_thread *next; /* every one made: kept for good (and reachable) */
};
static struct ip_capture_thread *capture_threads; /* under captures_lock */
static __thread struct ip_capture_thread *this_thread;

static atomic_int global_captures; /* active captures begun in global mode */
static atomic_int active_captures; /* every active capture: the list below is not empty */
static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ip_capture *captures; /* the active ones (under captures_lock) */

struct ip_capture *ip_capture_of(const struct ip_stream *s)
{
	return s && s->capture && s->capture->active ? s->capture : NULL;
}

int ip_capture_thread_ready(CUstreamCaptureMode mode)
{
	struct ip_capture_thread *t;

	if (mode == CU_STREAM_CAPTURE_MODE_RELAXED || this_thread)
		return 1;
	t = calloc(1, sizeof(*t));
	if (!t)
		return 0;
	pthread_mutex_lock(&captures_lock);
	t->next = capture_threads;
	capture_threads = t;
	pthread_mutex_unlock(&captures_lock);
	this_thread = t;
	return 1;
}

int ip_capture_wrong_thread(const struct ip_capture *cap)
{
	return cap->thread && cap->thread != this_thread;
}

void ip_capture_set(struct ip_capture **slot, struct ip_capture *cap)
{
	struct ip_capture *old = *slot;

	if (old == cap)
		return;
	if (cap)
		atomic_fetch_add(&cap->refs, 1);
	*slot = cap;
	if (old && atomic_fetch_sub(&old->refs, 1) == 1) {
		free(old->deps);
		free(old);
	}
}

const char *ip_capture_mode_name(CUstreamCaptureMode m)
{
	return m == CU_STREAM_CAPTURE_MODE_GLOBAL	  ? "global"
	       : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread-local"
							  : "relaxed";
}

/* cap starts counting against capture modes (this_thread is there for one not relaxed) */
void ip_capture_start(struct ip_capture *cap)
{
	if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
		cap->thread = this_thread;
		atomic_fetch_add(&this_thread->strict, 1);
	}
	if (cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
		atomic_fetch_add(&global_captures, 1);
	pthread_mutex_lock(&captures_lock);
	cap->next = captures;
	captures = cap;
	atomic_fetch_add(&active_captures, 1);
	pthread_mutex_unlock(&captures_lock);
}

/* cap ends: it no longer counts (from any thread) */
void ip_capture_stop(struct ip_capture *cap)
{
	struct ip_capture **p;

	pthread_mutex_lock(&captures_lock);
	for (p = &captures; *p && *p != cap; p = &(*p)->next)
		;
	if (*p) {
		*p = cap->next;
		atomic_fetch_sub(&active_captures, 1);
		if (cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
			atomic_fetch_sub(&global_captures, 1);
		if (cap->thread)
			atomic_fetch_sub(&cap->thread->strict, 1);
	}
	pthread_mutex_unlock(&captures_lock);
}

static int capture_blocking(const struct ip_stream *s)
{
	return !(s->flags & CU_STREAM_NON_BLOCKING);
}

void ip_capture_join(struct ip_stream *s, struct ip_capture *cap)
{
	if (ip_capture_of(s) == cap)
		return;
	ip_capture_set(&s->capture, cap);
	if (capture_blocking(s))
		atomic_fetch_add(&cap->blocking, 1);
}

static void capture_invalidate(struct ip_capture *cap)
{
	atomic_store(&cap->invalidated, 1);
}

/* Under captures_lock: does the unsafe-call rule of a thread in `mode` make cap fail? */
static int conflicts(const struct ip_capture *cap, CUstreamCaptureMode mode)
{
	if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return 0;
	if (cap->thread && cap->thread == this_thread)
		return 1; /* the thread's own capture, global or thread-local */
	return mode == CU_STREAM_CAPTURE_MODE_GLOBAL && cap->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult ip_capture_guard(const char *call)
{
	CUstreamCaptureMode mode = thread_mode;
	CUstreamCaptureMode hit = mode;
	int n = 0;

	if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	if (!(this_thread && atomic_load_explicit(&this_thread->strict, memory_order_relaxed)) &&
	    (mode != CU_STREAM_CAPTURE_MODE_GLOBAL ||
	     !atomic_load_explicit(&global_captures, memory_order_relaxed)))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&captures_lock);
	for (struct ip_capture *cap = captures; cap; cap = cap->next) {
		if (!conflicts(cap, mode))
			continue;
		if (!n++)
			hit = cap->mode;
		capture_invalidate(cap);
	}
	pthread_mutex_unlock(&captures_lock);
	if (!n)
		return CUDA_SUCCESS; /* the capture ended meanwhile */
	pr_warn("%s refused: potentially unsafe during a %s-mode stream capture (this thread is in "
		"%s mode); the capture is invalidated",
		call, ip_capture_mode_name(hit), ip_capture_mode_name(mode));
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult ip_capture_guard_stream(struct ip_stream *s, const char *call)
{
	struct ip_capture *cap = ip_capture_of(s);

	if (!cap)
		return ip_capture_guard(call);
	capture_invalidate(cap);
	pr_warn("%s refused: the stream is capturing (%s mode); the capture is invalidated", call,
		ip_capture_mode_name(cap->mode));
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/*
 * Invalidate c's captures (blocking_only: those with a blocking stream); returns how many, with
 * the mode of the first in *mode.
 */
static int invalidate_in_ctx(struct ip_ctx *c, int blocking_only, CUstreamCaptureMode *mode)
{
	int n = 0;

	if (!atomic_load_explicit(&active_captures, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&captures_lock);
	for (struct ip_capture *cap = captures; cap; cap = cap->next) {
		if (cap->ctx != c || (blocking_only && !atomic_load(&cap->blocking)))
			continue;
		if (!n++)
			*mode = cap->mode;
		capture_invalidate(cap);
	}
	pthread_mutex_unlock(&captures_lock);
	return n;
}

CUresult ip_capture_guard_ctx(struct ip_ctx *c, const char *call)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

	if (!invalidate_in_ctx(c, 0, &mode))
		return ip_capture_guard(call);
	pr_warn("%s refused: a stream of the context is capturing (%s mode); the capture is "
		"invalidated",
		call, ip_capture_mode_name(mode));
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult ip_capture_guard_legacy(struct ip_ctx *c, const char *call)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

	if (!invalidate_in_ctx(c, 1, &mode))
		return CUDA_SUCCESS;
	pr_warn("%s on the legacy stream refused: it would wait for a blocking stream that is "
		"capturing (%s mode); the capture is invalidated",
		call, ip_capture_mode_name(mode));
	return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

int ip_capture_in_ctx(struct ip_ctx *c)
{
	int n = 0;

	if (!atomic_load_explicit(&active_captures, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&captures_lock);
	for (struct ip_capture *cap = captures; cap && !n; cap = cap->next)
		n = cap->ctx == c;
	pthread_mutex_unlock(&captures_lock);
	return n;
}

void ip_capture_abandon(struct ip_stream *s)
{
	struct ip_capture *cap = ip_capture_of(s);

	if (!cap)
		return;
	if (cap->origin != s) {
		if (capture_blocking(s))
			atomic_fetch_sub(&cap->blocking, 1);
		return;
	}
	ip_capture_stop(cap);
	cap->active = 0;
	cap->graph->capturing = NULL;
	if (!cap->to_graph)
		ip_obj_unregister(&cap->graph->o); /* the graph being built dies with it */
}

/*
 * The mode only decides which calls a capture forbids: the guards above read it. The worker
 * never hears of it (its executor serves every client thread in relaxed mode).
 */
IP_API CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old;
	if (!mode || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	old = thread_mode;
	thread_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

