/*
 * Stream capture and CUDA graphs. The capture itself happens on the server, on the real
 * streams; the client tracks which streams take part (the one that began it, and those that
 * joined by waiting on an event recorded inside it) so that cuStreamIsCapturing and
 * cuStreamGetCaptureInfo cost no round trip — libraries ask them around every operation.
 * Graphs and executable graphs are client handles like every other object.
 *
 * Graphs built node by node, node handles, and the dependency lists of cuStreamGetCaptureInfo
 * are gnode.c's.
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
#include <string.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"

static atomic_ullong next_capture_id;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/*
 * A thread that began a capture that is not relaxed. Allocated on its first such capture and
 * never freed, so that a capture outliving its thread (abandoned with its stream later) still
 * has somewhere to count down.
 */
struct ip_capture_thread {
	atomic_int strict; /* its active captures in global or thread-local mode */
};
static __thread struct ip_capture_thread *this_thread;

static atomic_int global_captures; /* active captures begun in global mode */
static atomic_int active_captures; /* every active capture: the list below is not empty */
static pthread_mutex_t captures_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ip_capture *captures; /* the active ones (under captures_lock) */

static struct ip_graph *graph_new(struct ip_ctx *c)
{
	struct ip_graph *g = ip_obj_new(sizeof(*g), ST_KIND_GRAPH, c);
	if (g)
		g->ctx = c;
	return g;
}

static void graph_forget(struct ip_graph *g)
{
	ip_obj_unregister(&g->o); /* not freed: a stale handle stays recognisably dead */
}

/* g goes, on both sides */
static CUresult graph_destroy(struct ip_graph *g)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;

	m.graph = g->o.id;
	m.ctx = g->ctx->o.id;
	ip_graph_forget_nodes(g);
	graph_forget(g);
	return ip_post(RGPU_MSG_GRAPH_DESTROY, &m.base, NULL, 0);
}

/* ---- capture ----------------------------------------------------------------------------- */

void ip_capture_set(struct ip_capture **slot, struct ip_capture *cap)
{
	struct ip_capture *old = *slot;

	if (old == cap)
		return;
	if (cap)
		atomic_fetch_add(&cap->refs, 1);
	*slot = cap;
	if (old && atomic_fetch_sub(&old->refs, 1) == 1)
		free(old);
}

static const char *mode_name(CUstreamCaptureMode m)
{
	return m == CU_STREAM_CAPTURE_MODE_GLOBAL	  ? "global"
	       : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread-local"
							  : "relaxed";
}

/* cap starts counting against capture modes (this_thread is there for one not relaxed) */
static void capture_start(struct ip_capture *cap)
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
static void capture_stop(struct ip_capture *cap)
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
		call, mode_name(hit), mode_name(mode));
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult ip_capture_guard_stream(struct ip_stream *s, const char *call)
{
	struct ip_capture *cap = ip_capture_of(s);

	if (!cap)
		return ip_capture_guard(call);
	capture_invalidate(cap);
	pr_warn("%s refused: the stream is capturing (%s mode); the capture is invalidated", call,
		mode_name(cap->mode));
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
		call, mode_name(mode));
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult ip_capture_guard_legacy(struct ip_ctx *c, const char *call)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

	if (!invalidate_in_ctx(c, 1, &mode))
		return CUDA_SUCCESS;
	pr_warn("%s on the legacy stream refused: it would wait for a blocking stream that is "
		"capturing (%s mode); the capture is invalidated",
		call, mode_name(mode));
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
	capture_stop(cap);
	cap->active = 0;
	cap->graph->capturing = NULL;
	if (!cap->to_graph)
		graph_forget(cap->graph);
}

/*
 * A capture begins on stream h: into a new graph, or (into, cuStreamBeginCaptureToGraph) into a
 * graph that exists, after its nodes deps.
 */
static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptds, CUgraph into,
			      const CUgraphNode *deps, const CUgraphEdgeData *ed, size_t ndeps)
{
	Rgpu__CaptureOp m = RGPU__CAPTURE_OP__INIT;
	struct ip_capture *cap;
	struct ip_stream *s;
	struct ip_ctx *c;
	uint64_t *ids = NULL;
	CUresult r = ip_stream_get(h, ptds, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if (!s)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy NULL stream */
	if (ip_capture_of(s))
		return CUDA_ERROR_ILLEGAL_STATE;
	if (mode != CU_STREAM_CAPTURE_MODE_RELAXED && !this_thread &&
	    !(this_thread = calloc(1, sizeof(*this_thread))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	cap = calloc(1, sizeof(*cap));
	if (!cap)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (into) {
		r = ip_graph_into(into, deps, ed, ndeps, &cap->graph, &ids);
		if (r != CUDA_SUCCESS) {
			free(cap);
			return r;
		}
		cap->to_graph = 1;
		m.to_graph = 1;
		m.deps = ids;
		m.n_deps = ndeps;
	} else if (!(cap->graph = graph_new(c))) {
		free(cap);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	cap->id = atomic_fetch_add(&next_capture_id, 1) + 1;
	cap->origin = s;
	cap->ctx = c;
	cap->mode = mode;
	cap->blocking = capture_blocking(s);
	cap->graph->opaque = 1;
	cap->graph->capturing = cap;
	m.stream = s->o.id;
	m.ctx = c->o.id;
	m.mode = mode;
	m.graph = cap->graph->o.id;
	r = ip_call_status(RGPU_MSG_CAPTURE_BEGIN, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	free(ids);
	if (r != CUDA_SUCCESS) {
		cap->graph->capturing = NULL;
		if (!cap->to_graph)
			graph_forget(cap->graph);
		free(cap);
		return r;
	}
	capture_start(cap);
	cap->active = 1;
	ip_capture_set(&s->capture, cap);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
	return begin_capture(h, mode, 0, NULL, NULL, NULL, 0);
}
IP_API CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{
	return begin_capture(h, mode, 1, NULL, NULL, NULL, 0);
}
/* CUDA 10.0's form had no mode: it captured in global mode */
IP_API CUresult CUDAAPI cuStreamBeginCapture(CUstream h)
{
	return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0, NULL, NULL, NULL, 0);
}
IP_API CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream h)
{
	return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1, NULL, NULL, NULL, 0);
}
IP_API CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream h, CUgraph g, const CUgraphNode *deps,
						    const CUgraphEdgeData *ed, size_t n,
						    CUstreamCaptureMode mode)
{
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	return begin_capture(h, mode, 0, g, deps, ed, n);
}
IP_API CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph g,
							 const CUgraphNode *deps,
							 const CUgraphEdgeData *ed, size_t n,
							 CUstreamCaptureMode mode)
{
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	return begin_capture(h, mode, 1, g, deps, ed, n);
}

static CUresult end_capture(CUstream h, CUgraph *out, int ptds)
{
	Rgpu__CaptureOp m = RGPU__CAPTURE_OP__INIT;
	struct ip_capture *cap;
	struct ip_stream *s;
	struct ip_ctx *c;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_get(h, ptds, &c, &s);
	if (r != CUDA_SUCCESS)
		return r;
	cap = ip_capture_of(s);
	if (!cap)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (cap->origin != s)
		return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	if (cap->thread && cap->thread != this_thread) {
		/* the driver's rule for global and thread-local captures; the capture goes on */
		pr_warn("cuStreamEndCapture refused: a %s-mode capture ends on its own thread",
			mode_name(cap->mode));
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	}
	m.stream = s->o.id;
	m.ctx = c->o.id;
	m.graph = cap->graph->o.id;
	m.mode = (uint32_t)cap->mode;
	m.to_graph = cap->to_graph;
	r = ip_call_status(RGPU_MSG_CAPTURE_END, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	/* ended either way: every stream that took part stops capturing */
	capture_stop(cap);
	cap->active = 0;
	cap->graph->capturing = NULL;
	cap->graph->synced = 0; /* its nodes are listed again when asked */
	if (r == CUDA_SUCCESS && atomic_load(&cap->invalidated)) {
		/*
		 * Invalidated here, by a call the worker never saw: its capture ended well, and the
		 * graph it made goes as an application's cuGraphDestroy would take it (a graph that
		 * existed before, cuStreamBeginCaptureToGraph's, stays the application's)
		 */
		if (!cap->to_graph)
			graph_destroy(cap->graph);
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else if (r != CUDA_SUCCESS && !cap->to_graph) {
		graph_forget(cap->graph);
	}
	*out = r == CUDA_SUCCESS ? (CUgraph)cap->graph : NULL;
	ip_capture_set(&s->capture, NULL); /* may free cap */
	return r;
}

IP_API CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph *g)
{
	return end_capture(h, g, 0);
}
IP_API CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream h, CUgraph *g)
{
	return end_capture(h, g, 1);
}

static CUstreamCaptureStatus capture_status(const struct ip_capture *cap)
{
	return !cap				? CU_STREAM_CAPTURE_STATUS_NONE
	       : atomic_load(&cap->invalidated) ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
						: CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, int ptds)
{
	struct ip_stream *s;
	struct ip_ctx *c;
	CUresult r;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_get(h, ptds, &c, &s);
	if (r == CUDA_SUCCESS)
		*st = capture_status(ip_capture_of(s));
	return r;
}

IP_API CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
	return is_capturing(h, st, 0);
}
IP_API CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
	return is_capturing(h, st, 1);
}

/* The dependency list costs a round trip (gnode.c); the rest is known here. */
static CUresult capture_info(CUstream h, int ptds, CUstreamCaptureStatus *st, cuuint64_t *id,
			     CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	static __thread CUgraphEdgeData *zero;
	static __thread size_t nzero;
	struct ip_capture *cap;
	struct ip_stream *s;
	struct ip_ctx *c;
	CUresult r;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_get(h, ptds, &c, &s);
	if (r != CUDA_SUCCESS)
		return r;
	cap = ip_capture_of(s);
	*st = capture_status(cap);
	if (cap && id)
		*id = cap->id;
	if (*st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
		/* the graph and the dependencies are the active capture's only */
		if (graph)
			*graph = NULL;
		if (deps)
			*deps = NULL;
		if (edges)
			*edges = NULL;
		if (ndeps)
			*ndeps = 0;
		return CUDA_SUCCESS;
	}
	if (cap && graph)
		*graph = (CUgraph)cap->graph;
	if (cap && (deps || ndeps)) {
		const CUgraphNode *d = NULL;
		size_t n = 0;
		r = ip_capture_deps(s, cap, &d, &n);
		if (r != CUDA_SUCCESS)
			return r;
		if (deps)
			*deps = d;
		if (ndeps)
			*ndeps = n;
		if (edges && n > nzero) {
			CUgraphEdgeData *z = realloc(zero, n * sizeof(*z));
			if (!z)
				return CUDA_ERROR_OUT_OF_MEMORY;
			zero = z;
			nzero = n;
		}
		if (edges && n)
			memset(zero, 0, n * sizeof(*zero));
		if (edges)
			*edges = n ? zero : NULL;
	}
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st,
						  cuuint64_t *id, CUgraph *g,
						  const CUgraphNode **deps,
						  const CUgraphEdgeData **edges, size_t *n)
{
	return capture_info(h, 0, st, id, g, deps, edges, n);
}
IP_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st,
						       cuuint64_t *id, CUgraph *g,
						       const CUgraphNode **deps,
						       const CUgraphEdgeData **edges, size_t *n)
{
	return capture_info(h, 1, st, id, g, deps, edges, n);
}
IP_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st,
						  cuuint64_t *id, CUgraph *g,
						  const CUgraphNode **deps, size_t *n)
{
	return capture_info(h, 0, st, id, g, deps, NULL, n);
}
IP_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st,
						       cuuint64_t *id, CUgraph *g,
						       const CUgraphNode **deps, size_t *n)
{
	return capture_info(h, 1, st, id, g, deps, NULL, n);
}
IP_API CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st,
					       cuuint64_t *id)
{
	return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL);
}
IP_API CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st,
						    cuuint64_t *id)
{
	return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL);
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

/* ---- graphs ------------------------------------------------------------------------------ */

IP_API CUresult CUDAAPI cuGraphCreate(CUgraph *out, unsigned int flags)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	struct ip_graph *g;
	struct ip_ctx *c;
	CUresult r;
	if (!out || flags)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!(g = graph_new(c)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	m.graph = g->o.id;
	m.ctx = c->o.id;
	r = ip_post(RGPU_MSG_GRAPH_CREATE, &m.base, NULL, 0);
	if (r != CUDA_SUCCESS) {
		graph_forget(g);
		return r;
	}
	*out = (CUgraph)g;
	return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	struct ip_graph_exec *e;
	struct ip_graph *g;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	g = ip_obj_get(h, ST_KIND_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	/* an executable graph outlives its graph, but not its context */
	e = ip_obj_new(sizeof(*e), ST_KIND_GRAPH_EXEC, g->ctx);
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ctx = g->ctx;
	pthread_mutex_init(&e->lock, NULL);
	m.graph = g->o.id;
	m.exec = e->o.id;
	m.ctx = g->ctx->o.id;
	m.flags = flags;
	r = ip_call_status(RGPU_MSG_GRAPH_INSTANTIATE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (r == CUDA_SUCCESS)
		r = ip_exec_snapshot(e, g);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(e);
		return r;
	}
	*out = (CUgraphExec)e;
	return CUDA_SUCCESS;
}

static CUresult update_deps(CUstream h, int ptds, CUgraphNode *deps, const CUgraphEdgeData *ed,
			    size_t n, unsigned flags)
{
	struct ip_capture *cap;
	struct ip_stream *s;
	struct ip_ctx *c;
	CUresult r = ip_stream_get(h, ptds, &c, &s);
	if (r != CUDA_SUCCESS)
		return r;
	cap = ip_capture_of(s);
	if (!cap)
		return CUDA_ERROR_ILLEGAL_STATE;
	return ip_capture_update_deps(s, cap, deps, ed, n, flags);
}

IP_API CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream h, CUgraphNode *deps, size_t n,
							  unsigned int flags)
{
	return update_deps(h, 0, deps, NULL, n, flags);
}
IP_API CUresult CUDAAPI cuStreamUpdateCaptureDependencies_ptsz(CUstream h, CUgraphNode *deps,
							       size_t n, unsigned int flags)
{
	return update_deps(h, 1, deps, NULL, n, flags);
}
IP_API CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream h, CUgraphNode *deps,
							     const CUgraphEdgeData *ed, size_t n,
							     unsigned int flags)
{
	return update_deps(h, 0, deps, ed, n, flags);
}
IP_API CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream h, CUgraphNode *deps,
								  const CUgraphEdgeData *ed,
								  size_t n, unsigned int flags)
{
	return update_deps(h, 1, deps, ed, n, flags);
}

IP_API CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g,
						    unsigned long long flags)
{
	return instantiate(out, g, flags);
}

IP_API CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err_node,
					      char *log, size_t log_size)
{
	CUresult r = instantiate(out, g, 0);
	if (err_node)
		*err_node = NULL;
	if (log && log_size)
		log[0] = '\0';
	return r;
}

static CUresult graph_stream_op(uint16_t type, CUgraphExec h, CUstream s, int ptds)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	struct ip_graph_exec *e;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(h, ST_KIND_GRAPH_EXEC);
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_resolve(s, ptds, &c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	m.exec = e->o.id;
	m.stream = sid;
	m.ctx = c->o.id;
	if (type != RGPU_MSG_GRAPH_LAUNCH)
		return ip_post(type, &m.base, NULL, 0);
	/* memcpy nodes' host sides: to the device before, back after (gnode.c) */
	r = ip_exec_hcopies(e, s, ptds, 0);
	if (r == CUDA_SUCCESS)
		r = ip_post(type, &m.base, NULL, 0);
	if (r == CUDA_SUCCESS)
		r = ip_exec_hcopies(e, s, ptds, 1);
	return r;
}

IP_API CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g,
						     CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = instantiate(out, g, p->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	p->hErrNode_out = NULL;
	p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
					  : CUDA_GRAPH_INSTANTIATE_ERROR;
	if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
		r = graph_stream_op(RGPU_MSG_GRAPH_UPLOAD, *out, p->hUploadStream, 0);
	return r;
}
IP_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g,
							  CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return cuGraphInstantiateWithParams(out, g, p);
}

IP_API CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s)
{
	return graph_stream_op(RGPU_MSG_GRAPH_LAUNCH, e, s, 0);
}
IP_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
	return graph_stream_op(RGPU_MSG_GRAPH_LAUNCH, e, s, 1);
}
IP_API CUresult CUDAAPI cuGraphUpload(CUgraphExec e, CUstream s)
{
	return graph_stream_op(RGPU_MSG_GRAPH_UPLOAD, e, s, 0);
}
IP_API CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec e, CUstream s)
{
	return graph_stream_op(RGPU_MSG_GRAPH_UPLOAD, e, s, 1);
}

IP_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec h)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	struct ip_graph_exec *e;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	e = ip_obj_get(h, ST_KIND_GRAPH_EXEC);
	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	m.exec = e->o.id;
	m.ctx = e->ctx->o.id;
	ip_exec_forget(e);
	ip_obj_unregister(&e->o);
	return ip_post(RGPU_MSG_GRAPH_EXEC_DESTROY, &m.base, NULL, 0);
}

IP_API CUresult CUDAAPI cuGraphDestroy(CUgraph h)
{
	struct ip_graph *g;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	g = ip_obj_get(h, ST_KIND_GRAPH);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	return graph_destroy(g);
}
