/*
 * Stream capture: work queued on a capturing stream becomes nodes of the capture's graph
 * instead of running.
 *
 * Each stream in a capture has a dependency set, the nodes its next captured operation will
 * depend on: empty at cuStreamBeginCapture, the given nodes at cuStreamBeginCaptureToGraph,
 * then the node each captured operation made (a chain in capture order), or whatever
 * cuStreamUpdateCaptureDependencies put there. An event recorded during capture marks the
 * recording stream's set: a stream outside the capture that waits on it joins the capture with
 * that set (fork), a stream inside adds it to its own (join); no node is made for either.
 * CU_EVENT_RECORD_EXTERNAL / CU_EVENT_WAIT_EXTERNAL make real record and wait nodes. Nodes the
 * caller adds to the graph being captured (cuGraphAdd*Node after cuStreamGetCaptureInfo) are
 * ordinary nodes; the stream depends on them once its set is updated.
 *
 * Capture state is under sim_sched; sim_capture_op() runs inside sim_enqueue(), which holds
 * it. This file never waits for a stream.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

struct sim_capture {
	struct sim_link node; /* in captures */
	unsigned long long id;
	struct sim_graph *g;
	bool own_graph; /* made by cuStreamBeginCapture (not ...ToGraph): dropped if invalidated */
	struct sim_stream *origin;
	bool invalid;
};

static struct sim_link captures = {&captures, &captures};
static unsigned long long next_id = 1;

static struct sim_capture *find(unsigned long long id)
{
	for (struct sim_link *l = captures.next; l != &captures; l = l->next) {
		struct sim_capture *c = sim_entry(l, struct sim_capture, node);
		if (c->id == id)
			return c;
	}
	return NULL;
}

/* sim_graph_capturing() - under sim_sched, whether a capture adds nodes to g. */
bool sim_graph_capturing(const struct sim_graph *g)
{
	for (struct sim_link *l = captures.next; l != &captures; l = l->next)
		if (sim_entry(l, struct sim_capture, node)->g == g)
			return true;
	return false;
}

/* Legacy-stream work would have to wait for a capturing blocking stream: not allowed. */
bool sim_capture_blocks_legacy(struct sim_ctx *ctx)
{
	for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct sim_stream *s = sim_entry(l, struct sim_stream, node);
		if (s->capture && !(s->flags & CU_STREAM_NON_BLOCKING))
			return true;
	}
	return false;
}

/* Under sim_sched: end capture c for every stream of ctx in it and free it. */
static void capture_end(struct sim_capture *c, struct sim_ctx *ctx)
{
	for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct sim_stream *t = sim_entry(l, struct sim_stream, node);
		if (t->capture == c) {
			t->capture = NULL;
			t->cap_deps.n = 0;
		}
	}
	sim_list_del(&c->node);
	free(c);
}

/*
 * sim_capture_abandon() - under sim_sched, s is going away: it leaves its capture, and a
 * capture it started ends as an invalidated one (a graph it made is discarded).
 */
void sim_capture_abandon(struct sim_stream *s)
{
	struct sim_capture *c = s->capture;

	if (!c)
		return;
	s->capture = NULL;
	s->cap_deps.n = 0;
	if (c->origin != s)
		return;
	if (c->own_graph)
		sim_graph_free(c->g);
	capture_end(c, s->ctx);
}

/*
 * Under sim_sched: n (type and parameters set) becomes a node of s's capture after s's
 * dependency set, which becomes {n}. On failure n is still the caller's.
 */
static CUresult capture_add(struct sim_stream *s, struct sim_gnode *n)
{
	CUresult r;

	if (sim_set_reserve(&s->cap_deps, 1))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = sim_gnode_insert(s->capture->g, n, s->cap_deps.v, s->cap_deps.n);
	if (r != CUDA_SUCCESS)
		return r;
	s->cap_deps.v[0] = n;
	s->cap_deps.n = 1;
	return CUDA_SUCCESS;
}

/* A 1D copy as the CUDA_MEMCPY3D of its memcpy node. */
static void copy_params(const struct sim_op *op, CUDA_MEMCPY3D *p)
{
	memset(p, 0, sizeof(*p));
	p->srcMemoryType = op->u.copy.src_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
	if (op->u.copy.src_dev)
		p->srcDevice = op->u.copy.src;
	else
		p->srcHost = (const void *)op->u.copy.src;
	p->dstMemoryType = op->u.copy.dst_dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
	if (op->u.copy.dst_dev)
		p->dstDevice = op->u.copy.dst;
	else
		p->dstHost = (void *)op->u.copy.dst;
	p->WidthInBytes = op->u.copy.n;
	p->Height = 1;
	p->Depth = 1;
}

/*
 * Under sim_sched: op becomes a node of s's capture. On success the op is consumed (a
 * kernel's launch is the node's now); on failure it is still the caller's.
 */
static CUresult capture_node(struct sim_stream *s, struct sim_op *op)
{
	struct sim_gnode *n = calloc(1, sizeof(*n));
	CUresult r;

	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	switch (op->type) {
	case SIM_OP_KERNEL:
		n->type = CU_GRAPH_NODE_TYPE_KERNEL;
		n->u.k.op = op;
		n->u.k.ctx = (CUcontext)op->u.k.mod->ctx;
		break;
	case SIM_OP_COPY:
		n->type = CU_GRAPH_NODE_TYPE_MEMCPY;
		copy_params(op, &n->u.copy.p);
		n->u.copy.ctx = (CUcontext)s->ctx;
		/* a pageable source snapshot taken just before the capture began */
		n->u.copy.owned = op->u.copy.owned;
		n->u.copy.owned_n = op->u.copy.n;
		break;
	case SIM_OP_SET:
		n->type = CU_GRAPH_NODE_TYPE_MEMSET;
		n->u.set.p.dst = op->u.set.dst;
		n->u.set.p.pitch = op->u.set.pitch;
		n->u.set.p.value = op->u.set.value;
		n->u.set.p.elementSize = op->u.set.esize;
		n->u.set.p.width = op->u.set.width;
		n->u.set.p.height = op->u.set.height;
		n->u.set.ctx = (CUcontext)s->ctx;
		break;
	case SIM_OP_HOSTFN:
		n->type = CU_GRAPH_NODE_TYPE_HOST;
		n->u.host.fn = op->u.host.fn;
		n->u.host.userData = op->u.host.ud;
		break;
	case SIM_OP_RECORD:
	case SIM_OP_WAIT:
		n->type = op->type == SIM_OP_RECORD ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
						    : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
		n->u.ev = op->u.ev.ev;
		n->u.ev->refs++;
		break;
	default:
		free(n);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	r = capture_add(s, n);
	if (r != CUDA_SUCCESS) {
		/* what the node took from op goes back to it */
		if (n->type == CU_GRAPH_NODE_TYPE_KERNEL)
			n->u.k.op = NULL;
		if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY)
			n->u.copy.owned = NULL;
		sim_gnode_free(n);
		return r;
	}
	if (op->type == SIM_OP_COPY)
		op->u.copy.owned = NULL;
	if (op->type != SIM_OP_KERNEL)
		sim_op_free_locked(op);
	return CUDA_SUCCESS;
}

/*
 * sim_capture_op() - under sim_sched, for every operation queued on s: turn it into a node if
 * s is capturing (*consumed set: the op now belongs to the graph, or was dropped), or join s
 * to a capture it waits on. Returns CUDA_SUCCESS or a capture error (the op is then the
 * caller's).
 */
CUresult sim_capture_op(struct sim_stream *s, struct sim_op *op, bool *consumed)
{
	struct sim_capture *c = s->capture;
	struct sim_event *ev =
	    op->type == SIM_OP_RECORD || op->type == SIM_OP_WAIT ? op->u.ev.ev : NULL;
	CUresult r;

	*consumed = false;
	if (!c) {
		struct sim_capture *joined;
		if (op->type != SIM_OP_WAIT || !ev->cap_id || !(joined = find(ev->cap_id)))
			return CUDA_SUCCESS;
		if (s == s->ctx->null_stream)
			return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		/* fork: s is now part of the capture, after what the event marked */
		if (sim_set_copy(&s->cap_deps, &ev->cap_nodes))
			return CUDA_ERROR_OUT_OF_MEMORY;
		s->capture = joined;
		sim_op_free_locked(op);
		*consumed = true;
		return CUDA_SUCCESS;
	}
	if (c->invalid)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	switch (op->type) {
	case SIM_OP_CALLBACK:
		c->invalid = true;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	case SIM_OP_RECORD: {
		bool external = op->u.ev.flags & CU_EVENT_RECORD_EXTERNAL;
		if (sim_set_reserve(&ev->cap_nodes, s->cap_deps.n > 1 ? s->cap_deps.n : 1))
			return CUDA_ERROR_OUT_OF_MEMORY;
		/* a record node takes op, and a reference to ev of its own */
		if (external && (r = capture_node(s, op)))
			return r;
		/* the event marks the stream's set: the record node itself when there is one */
		sim_set_copy(&ev->cap_nodes, &s->cap_deps); /* reserved: cannot fail */
		ev->cap_id = c->id;
		ev->gen++; /* an older record still queued must not stamp it any more */
		if (!external)
			sim_op_free_locked(op);
		*consumed = true;
		return CUDA_SUCCESS;
	}
	case SIM_OP_WAIT:
		if (ev->cap_id == c->id) { /* join inside the capture: no node */
			if (sim_set_union(&s->cap_deps, &ev->cap_nodes))
				return CUDA_ERROR_OUT_OF_MEMORY;
			sim_op_free_locked(op);
			*consumed = true;
			return CUDA_SUCCESS;
		}
		if (!(op->u.ev.flags & CU_EVENT_WAIT_EXTERNAL)) {
			c->invalid = true;
			return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
		}
		break;
	}
	if ((r = capture_node(s, op)))
		return r;
	*consumed = true;
	return CUDA_SUCCESS;
}

/*
 * sim_capture_copy3d() - a 2D or 3D copy queued on s: if s is capturing, one memcpy node of
 * the whole copy (*captured set), as the driver makes, rather than a node for each row.
 * Returns CUDA_SUCCESS or the error of the copy's check or of the capture.
 */
CUresult sim_capture_copy3d(struct sim_stream *s, const CUDA_MEMCPY3D *c, bool *captured)
{
	struct sim_gnode *n;
	CUresult r;

	*captured = false;
	if (!sim_stream_capturing(s))
		return CUDA_SUCCESS;
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = sim_gnode_memcpy(n, c, (CUcontext)s->ctx))) {
		free(n);
		return r;
	}
	pthread_mutex_lock(&sim_sched);
	if (!s->capture) { /* ended meanwhile: the copy runs */
		sim_gnode_free(n);
		pthread_mutex_unlock(&sim_sched);
		return CUDA_SUCCESS;
	}
	r = s->capture->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : capture_add(s, n);
	if (r != CUDA_SUCCESS)
		sim_gnode_free(n);
	*captured = r == CUDA_SUCCESS;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/*
 * sim_capture_graph() - under sim_sched, a graph launched on capturing stream s: a child graph
 * node holding a clone of g (an executable's copy: its disabled nodes stay disabled). One with
 * conditional nodes cannot be a child graph: the capture fails, as the H200's does.
 */
CUresult sim_capture_graph(struct sim_stream *s, struct sim_graph *g)
{
	struct sim_gnode *n;
	CUresult r;

	if (s->capture->invalid)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (sim_graph_has_cond(g)) {
		s->capture->invalid = true;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->type = CU_GRAPH_NODE_TYPE_GRAPH;
	n->u.child = sim_graph_clone(g, true, n);
	r = n->u.child ? capture_add(s, n) : CUDA_ERROR_OUT_OF_MEMORY;
	if (r != CUDA_SUCCESS)
		sim_gnode_free(n);
	return r;
}

/* Under sim_sched: deps are n distinct nodes of g. */
static CUresult deps_check(struct sim_graph *g, const CUgraphNode *deps, size_t n)
{
	if (n && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++) {
		struct sim_gnode *d = sim_gnode_get(deps[i]);
		if (!d || d->g != g)
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static bool default_edges(const CUgraphEdgeData *e, size_t n)
{
	static const CUgraphEdgeData zero;

	for (size_t i = 0; e && i < n; i++)
		if (memcmp(&e[i], &zero, sizeof(zero)))
			return false;
	return true;
}

/*
 * Begin a capture on h: into a new graph (to NULL), or into graph `to` after deps (the first
 * node captured depends on them).
 */
static CUresult begin(CUstream h, CUgraph to, const CUgraphNode *deps, const CUgraphEdgeData *edata,
		      size_t ndeps, CUstreamCaptureMode mode)
{
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	if (s == s->ctx->null_stream)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (to && !default_edges(edata, ndeps))
		return CUDA_ERROR_NOT_SUPPORTED;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!to) {
		c->own_graph = true;
		if (!(c->g = sim_graph_new(true))) {
			free(c);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	pthread_mutex_lock(&sim_sched);
	if (to && !(c->g = sim_graph_get(to)))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (s->capture)
		r = CUDA_ERROR_ILLEGAL_STATE;
	else if (to && !(r = deps_check(c->g, deps, ndeps)) && sim_set_reserve(&s->cap_deps, ndeps))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r != CUDA_SUCCESS) {
		if (c->own_graph)
			sim_graph_free(c->g);
		pthread_mutex_unlock(&sim_sched);
		free(c);
		return r;
	}
	s->cap_deps.n = 0;
	for (size_t i = 0; to && i < ndeps; i++)
		s->cap_deps.v[s->cap_deps.n++] = (struct sim_gnode *)deps[i];
	c->id = next_id++;
	c->origin = s;
	sim_list_add(&captures, &c->node);
	s->capture = c;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin(hStream, NULL, NULL, NULL, 0, mode);
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
	return begin(hStream, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
					     const CUgraphNode *dependencies,
					     const CUgraphEdgeData *dependencyData,
					     size_t numDependencies, CUstreamCaptureMode mode)
{
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	return begin(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
}

/* Returns the graph captured into: the new one, or the one given to ...ToGraph. */
CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph *phGraph)
{
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r;

	SIM_ENTER();
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	c = s->capture;
	if (!c || c->origin != s) {
		pthread_mutex_unlock(&sim_sched);
		return c ? CUDA_ERROR_STREAM_CAPTURE_UNMATCHED : CUDA_ERROR_ILLEGAL_STATE;
	}
	if (c->invalid) {
		if (c->own_graph)
			sim_graph_free(c->g);
		*phGraph = NULL;
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		*phGraph = (CUgraph)c->g;
	}
	capture_end(c, s->ctx);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	if (s == s->ctx->null_stream && sim_capture_blocks_legacy(s->ctx))
		r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	*status = !s->capture		? CU_STREAM_CAPTURE_STATUS_NONE
		  : s->capture->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
					: CU_STREAM_CAPTURE_STATUS_ACTIVE;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/*
 * The dependency set is the stream's own array, valid until the next call on the stream, as
 * the driver's is; its edge data, all default, is a zeroed array of the same length.
 */
static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
			     CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r;

	SIM_ENTER();
	if (!status || (edges && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	c = s->capture;
	if (s == s->ctx->null_stream && sim_capture_blocks_legacy(s->ctx))
		r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	*status = !c	       ? CU_STREAM_CAPTURE_STATUS_NONE
		  : c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
			       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (c && edges) {
		free(s->cap_edata);
		s->cap_edata = NULL;
		if (s->cap_deps.n && !(s->cap_edata = calloc(s->cap_deps.n, sizeof(*s->cap_edata))))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		*edges = s->cap_edata;
	}
	if (c) {
		if (id)
			*id = c->id;
		if (graph)
			*graph = (CUgraph)c->g;
		if (deps)
			*deps = s->cap_deps.n ? (const CUgraphNode *)s->cap_deps.v : NULL;
		if (ndeps)
			*ndeps = s->cap_deps.n;
	}
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   const CUgraphEdgeData **edgeData_out,
					   size_t *numDependencies_out)
{
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
			    edgeData_out, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   size_t *numDependencies_out)
{
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
			    numDependencies_out);
}

/*
 * Add deps to the stream's dependency set, or replace the set with them (the pattern of
 * NCCL and PyTorch: a node added to the capture graph by hand, then made the stream's set).
 * deps may be the set itself, as cuStreamGetCaptureInfo returned it.
 */
static CUresult update_deps(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *edata, size_t n,
			    unsigned flags)
{
	struct sim_nodeset next = {0};
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r;

	SIM_ENTER();
	if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	if (!default_edges(edata, n))
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	c = s->capture;
	if (!c) {
		r = CUDA_ERROR_ILLEGAL_STATE;
	} else if (c->invalid) {
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
			struct sim_gnode *d = sim_gnode_get(deps[i]);
			if (!d || d->g != c->g)
				r = CUDA_ERROR_INVALID_VALUE;
		}
		if (r == CUDA_SUCCESS && flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
		    sim_set_copy(&next, &s->cap_deps))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS && sim_set_reserve(&next, next.n + n))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
			if (!sim_set_has(&next, (struct sim_gnode *)deps[i]))
				next.v[next.n++] = (struct sim_gnode *)deps[i];
	}
	if (r == CUDA_SUCCESS) {
		struct sim_nodeset old = s->cap_deps;
		s->cap_deps = next;
		next = old;
	}
	pthread_mutex_unlock(&sim_sched);
	free(next.v);
	return r;
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData,
						      size_t numDependencies, unsigned int flags)
{
	return update_deps(hStream, dependencies, dependencyData, numDependencies, flags);
}

CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
						   size_t numDependencies, unsigned int flags)
{
	return update_deps(hStream, dependencies, NULL, numDependencies, flags);
}
