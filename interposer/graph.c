/*
 * Stream capture and CUDA graphs. The capture itself happens on the server, on the real
 * streams; the client tracks which streams take part (the one that began it, and those that
 * joined by waiting on an event recorded inside it) so that cuStreamIsCapturing and
 * cuStreamGetCaptureInfo cost no round trip — libraries ask them around every operation.
 * Graphs and executable graphs are client handles like every other object.
 *
 * Graphs built node by node, node handles, and the dependency lists of cuStreamGetCaptureInfo
 * are gnode.c's.
 * Capture modes and the bookkeeping of active captures are capture.c's.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"

static atomic_ullong next_capture_id;
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
	ip_route_ctx(g->ctx);
	ip_graph_forget_nodes(g);
	graph_forget(g);
	return ip_post(RGPU_MSG_GRAPH_DESTROY, &m.base, NULL, 0);
}

/* ---- capture ----------------------------------------------------------------------------- */

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
	if (!ip_capture_thread_ready(mode))
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
	cap->blocking = !(s->flags & CU_STREAM_NON_BLOCKING);
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
	ip_capture_start(cap);
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
	if (ip_capture_wrong_thread(cap)) {
		/* the driver's rule for global and thread-local captures; the capture goes on */
		pr_warn("cuStreamEndCapture refused: a %s-mode capture ends on its own thread",
			ip_capture_mode_name(cap->mode));
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	}
	m.stream = s->o.id;
	m.ctx = c->o.id;
	m.graph = cap->graph->o.id;
	m.mode = (uint32_t)cap->mode;
	m.to_graph = cap->to_graph;
	r = ip_call_status(RGPU_MSG_CAPTURE_END, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	/* ended either way: every stream that took part stops capturing */
	ip_capture_stop(cap);
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
	ip_route_ctx(g->ctx);
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
	ip_route_ctx(e->ctx);
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
