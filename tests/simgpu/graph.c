/*
 * Stream capture and graphs, as far as CUDA graph programs need them: work queued on a
 * capturing stream is recorded instead of run, and an instantiated graph replays it in order
 * on the stream it is launched on, as many times as it is launched.
 *
 * A graph here is the captured operations in capture order. Capture order is a valid
 * topological order of the real graph (an operation is only ever captured after the
 * operations it depends on), so replaying it in sequence on one stream keeps every
 * dependency; it only gives up concurrency between branches. Events recorded during capture
 * mark capture points: a stream that waits on one joins the capture (fork), a wait inside
 * the same capture needs no node (join). CU_EVENT_RECORD_EXTERNAL / CU_EVENT_WAIT_EXTERNAL
 * become real record and wait nodes. Capture state is under sim_sched.
 */
#include <stdlib.h>

#include "sim.h"

struct sim_graph {
	struct sim_op *head, *tail;
	unsigned nops;
};

struct sim_gexec {
	struct sim_op **ops;
	unsigned nops;
};

struct sim_capture {
	struct sim_link node; /* in captures */
	unsigned long long id;
	struct sim_graph *g;
	struct sim_stream *origin;
	bool invalid;
	CUgraphNode last[1]; /* what cuStreamGetCaptureInfo reports as the dependency set */
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

static void graph_free(struct sim_graph *g, bool locked);

/* Under sim_sched: end capture c for every stream of ctx in it and free it. */
static void capture_end(struct sim_capture *c, struct sim_ctx *ctx)
{
	for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct sim_stream *t = sim_entry(l, struct sim_stream, node);
		if (t->capture == c)
			t->capture = NULL;
	}
	sim_list_del(&c->node);
	free(c);
}

/*
 * sim_capture_abandon() - under sim_sched, s is going away: it leaves its capture, and a
 * capture it started ends with its graph discarded, as an invalidated capture.
 */
void sim_capture_abandon(struct sim_stream *s)
{
	struct sim_capture *c = s->capture;

	if (!c)
		return;
	s->capture = NULL;
	if (c->origin != s)
		return;
	sim_handle_del(c->g);
	graph_free(c->g, true);
	capture_end(c, s->ctx);
}

static void graph_free(struct sim_graph *g, bool locked)
{
	while (g->head) {
		struct sim_op *op = g->head;
		g->head = op->next;
		if (locked)
			sim_op_free_locked(op);
		else
			sim_op_free(op);
	}
	free(g);
}

/*
 * sim_capture_op() - under sim_sched, for every operation queued on s: record it if s is
 * capturing (*consumed set: the op now belongs to the graph, or was dropped), or join s to a
 * capture it waits on. Returns CUDA_SUCCESS or a capture error (the op is then the caller's).
 */
CUresult sim_capture_op(struct sim_stream *s, struct sim_op *op, bool *consumed)
{
	struct sim_capture *c = s->capture;
	struct sim_event *ev =
	    op->type == SIM_OP_RECORD || op->type == SIM_OP_WAIT ? op->u.ev.ev : NULL;

	*consumed = false;
	if (!c) {
		struct sim_capture *joined;
		if (op->type != SIM_OP_WAIT || !ev->cap_id || !(joined = find(ev->cap_id)))
			return CUDA_SUCCESS;
		if (s == s->ctx->null_stream)
			return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		s->capture = joined; /* fork: s is now part of the capture */
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
	case SIM_OP_RECORD:
		ev->cap_id = c->id;
		ev->gen++; /* an older record still queued must not stamp it any more */
		if (!(op->u.ev.flags & CU_EVENT_RECORD_EXTERNAL)) {
			sim_op_free_locked(op);
			*consumed = true;
			return CUDA_SUCCESS;
		}
		break;
	case SIM_OP_WAIT:
		if (ev->cap_id == c->id) { /* join inside the capture: order is already kept */
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
	op->next = NULL;
	if (c->g->tail)
		c->g->tail->next = op;
	else
		c->g->head = op;
	c->g->tail = op;
	c->g->nops++;
	c->last[0] = (CUgraphNode)op;
	*consumed = true;
	return CUDA_SUCCESS;
}

static CUresult begin(CUstream h, CUstreamCaptureMode mode)
{
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r;

	SIM_ENTER();
	if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	if (s == s->ctx->null_stream)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->g = calloc(1, sizeof(*c->g)))) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (sim_handle_add(c->g, SIM_GRAPH)) {
		free(c->g);
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&sim_sched);
	if (s->capture) {
		pthread_mutex_unlock(&sim_sched);
		sim_handle_del(c->g);
		free(c->g);
		free(c);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	c->id = next_id++;
	c->origin = s;
	sim_list_add(&captures, &c->node);
	s->capture = c;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	return begin(hStream, mode);
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
	return begin(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

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
		sim_handle_del(c->g);
		graph_free(c->g, true);
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

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
			     CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	struct sim_stream *s;
	struct sim_capture *c;
	CUresult r;

	SIM_ENTER();
	if (!status)
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
	if (c) {
		if (id)
			*id = c->id;
		if (graph)
			*graph = (CUgraph)c->g;
		if (deps)
			*deps = c->g->nops ? c->last : NULL;
		if (edges)
			*edges = NULL; /* all edges are default ones */
		if (ndeps)
			*ndeps = c->g->nops ? 1 : 0;
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

/* --- graphs ---------------------------------------------------------------------------- */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct sim_graph *g;

	SIM_ENTER();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g || sim_handle_add(g, SIM_GRAPH)) {
		free(g);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	SIM_ENTER();
	if (!sim_handle_is(hGraph, SIM_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	for (struct sim_link *l = captures.next; l != &captures; l = l->next) {
		if (sim_entry(l, struct sim_capture, node)->g == (struct sim_graph *)hGraph) {
			pthread_mutex_unlock(&sim_sched);
			return CUDA_ERROR_ILLEGAL_STATE; /* still being captured into */
		}
	}
	pthread_mutex_unlock(&sim_sched);
	sim_handle_del(hGraph);
	graph_free((struct sim_graph *)hGraph, false);
	return CUDA_SUCCESS;
}

static void exec_free(struct sim_gexec *x)
{
	for (unsigned i = 0; i < x->nops; i++)
		sim_op_free(x->ops[i]);
	free(x->ops);
	free(x);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
					 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
	struct sim_graph *g = (struct sim_graph *)hGraph;
	struct sim_gexec *x;

	SIM_ENTER();
	if (!phGraphExec || !sim_handle_is(hGraph, SIM_GRAPH) || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	x = calloc(1, sizeof(*x));
	if (!x || !(x->ops = calloc(g->nops ? g->nops : 1, sizeof(*x->ops))))
		goto oom;
	for (struct sim_op *op = g->head; op; op = op->next) {
		if (!(x->ops[x->nops] = sim_op_clone(op)))
			goto oom;
		x->nops++;
	}
	if (sim_handle_add(x, SIM_GRAPHEXEC))
		goto oom;
	*phGraphExec = (CUgraphExec)x;
	return CUDA_SUCCESS;
oom:
	if (x && x->ops)
		exec_free(x);
	else
		free(x);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	SIM_ENTER();
	if (!sim_handle_is(hGraphExec, SIM_GRAPHEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	sim_handle_del(hGraphExec);
	exec_free((struct sim_gexec *)hGraphExec);
	return CUDA_SUCCESS;
}

/* Each launch queues a fresh copy of the graph's operations, all at once. */
CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	struct sim_gexec *x = (struct sim_gexec *)hGraphExec;
	struct sim_stream *s;
	struct sim_op **ops;
	CUresult r;

	SIM_ENTER();
	if (!sim_handle_is(hGraphExec, SIM_GRAPHEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(hStream, &s)))
		return r;
	if (!x->nops)
		return CUDA_SUCCESS;
	ops = calloc(x->nops, sizeof(*ops));
	if (!ops)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < x->nops; i++) {
		if (!(ops[i] = sim_op_clone(x->ops[i]))) {
			while (i--)
				sim_op_free(ops[i]);
			free(ops);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	r = sim_enqueue_list(s, ops, x->nops);
	free(ops);
	return r;
}

/* Every captured operation is one node of a straight chain. */
CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	struct sim_graph *g = (struct sim_graph *)hGraph;
	SIM_ENTER();
	if (!numNodes || !sim_handle_is(hGraph, SIM_GRAPH))
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes) {
		/* node handles are not modelled: name each by its position */
		for (size_t i = 0; i < *numNodes && i < g->nops; i++)
			nodes[i] = (CUgraphNode)(uintptr_t)(i + 1);
		if (*numNodes > g->nops)
			*numNodes = g->nops;
	} else {
		*numNodes = g->nops;
	}
	return CUDA_SUCCESS;
}
