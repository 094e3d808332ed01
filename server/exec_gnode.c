/*
 * Graphs built node by node (docs/architecture.md, "Graphs built node by node"): the handlers
 * of MSG_GRAPH_NODE .. MSG_GRAPH_COND, and the node ids of each graph.
 *
 * Nodes are client objects: each graph keeps here which of the driver's nodes an id names. Ids
 * mean something only within their graph (a clone or a child graph node's copy of a graph has
 * its own), so a table belongs to a graph: one made by cuGraphCreate or a clone (an object of
 * the job), one being captured (found through its capturing stream), or a child graph node's
 * copy (found through the node).
 *
 * A kernel, memcpy, memset or host node is made by capturing: the client sends the frames the
 * same call would have queued on a stream (cuLaunchKernel, cuMemcpy3DAsync, ...), and the
 * worker runs them through their own handlers on a stream of its own that captures into a
 * scratch graph (cuStreamBeginCaptureToGraph). Every rule of those handlers holds (parameters
 * packed at the function's layout, copies checked against the window, host-to-device bytes
 * kept in pinned memory of their own, host functions kept registered). The scratch graph's one
 * node then lends its parameters (cuGraph*NodeGetParams): to a node added to the graph after
 * its dependencies (add_like), or to a node's Set call in the graph or the exec.
 *
 * A replay (replay.c) may have to use a graph as it was when a message named it (a child graph
 * added, a clone, an exec update): w->graph_at builds it again from its journal under a
 * scratch id, which w->gredir redirects the frames' ids to while they run.
 */
#define LOG_PREFIX "exec: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "srv.h"
#include "srv_handlers.h"

struct srv_gnodes {
	uint64_t graph;      /* the graph's id */
	CUgraph h;           /* a child graph node's copy (else found by id, see graph_h) */
	CUstream capture;    /* being captured on this stream */
	size_t n, cap;
	uint64_t *id;
	CUgraphNode *node;
	struct srv_gnodes *next;
};

struct srv_gexec {
	uint64_t exec;
	uint64_t src;        /* the graph (its id here) it was instantiated from */
	uint64_t owned;      /* a scratch graph built for it by a replay: released with it */
	uint64_t flags;      /* cuGraphInstantiateWithFlags' */
	uint64_t *off;       /* nodes turned off (cuGraphNodeSetEnabled) */
	size_t noff;
	struct srv_gexec *next;
};

struct srv_nstream {
	uint64_t ctx;
	CUstream s;
	struct srv_nstream *next;
};

/* ---- tables -------------------------------------------------------------------------------- */

uint64_t srv_graph_redirect(const struct srv_worker *w, uint64_t id)
{
	for (int i = w->ngredir - 1; i >= 0; i--)
		if (w->gredir[i].from == id)
			return w->gredir[i].to;
	return id;
}

static void released(struct srv_worker *w, int kind, uint64_t id)
{
	if (kind == ST_KIND_GRAPH)
		srv_gnodes_forget(w, id);
	else
		srv_gexec_forget(w, id);
}

/* The objects' release and the worker's end reach what this file keeps through these. */
static void hook(struct srv_worker *w)
{
	w->graph_released = released;
	w->graph_fini = srv_gnodes_fini;
}

static struct srv_gnodes *gnodes(struct srv_worker *w, uint64_t id, int make)
{
	struct srv_gnodes *g;

	for (g = w->gnodes; g; g = g->next)
		if (g->graph == id)
			return g;
	if (!make || !(g = calloc(1, sizeof(*g))))
		return NULL;
	hook(w);
	g->graph = id;
	g->next = w->gnodes;
	w->gnodes = g;
	return g;
}

void srv_gnodes_forget(struct srv_worker *w, uint64_t graph)
{
	for (struct srv_gnodes **pp = &w->gnodes; *pp; pp = &(*pp)->next)
		if ((*pp)->graph == graph) {
			struct srv_gnodes *g = *pp;
			*pp = g->next;
			free(g->id);
			free(g->node);
			free(g);
			return;
		}
}

static struct srv_gexec *gexec(struct srv_worker *w, uint64_t exec)
{
	for (struct srv_gexec *e = w->gexecs; e; e = e->next)
		if (e->exec == exec)
			return e;
	return NULL;
}

void srv_gexec_forget(struct srv_worker *w, uint64_t exec)
{
	for (struct srv_gexec **pp = &w->gexecs; *pp; pp = &(*pp)->next)
		if ((*pp)->exec == exec) {
			struct srv_gexec *e = *pp;
			struct srv_obj *t = e->owned ? srv_obj_find(w, e->owned, ST_KIND_GRAPH) : NULL;
			*pp = e->next;
			if (t)
				srv_obj_release(w, t);
			if (e->owned)
				srv_gnodes_forget(w, e->owned);
			free(e->off);
			free(e);
			return;
		}
}

int srv_gexec_note(struct srv_worker *w, uint64_t exec, uint64_t graph, uint64_t flags)
{
	struct srv_gexec *e = gexec(w, exec);

	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return RGPU_ENOMEM;
		hook(w);
		e->exec = exec;
		e->next = w->gexecs;
		w->gexecs = e;
	}
	e->src = srv_graph_redirect(w, graph);
	e->flags = flags;
	return 0;
}

/* Which nodes of exec x are off: kept for an exec made again by a replay (h_graph_update). */
static CUresult note_enabled(struct srv_gexec *x, uint64_t node, int on)
{
	size_t i;

	for (i = 0; i < x->noff && x->off[i] != node; i++)
		;
	if (on && i < x->noff) {
		x->off[i] = x->off[--x->noff];
	} else if (!on && i == x->noff) {
		uint64_t *v = realloc(x->off, (x->noff + 1) * sizeof(*v));
		if (!v)
			return CUDA_ERROR_OUT_OF_MEMORY;
		x->off = v;
		x->off[x->noff++] = node;
	}
	return CUDA_SUCCESS;
}

void srv_gexec_own(struct srv_worker *w, uint64_t exec, uint64_t scratch)
{
	struct srv_gexec *e = gexec(w, exec);
	if (e)
		e->owned = scratch;
}

void srv_gnodes_capture(struct srv_worker *w, uint64_t graph, CUstream s)
{
	struct srv_gnodes *g;

	if (!graph)
		return;
	g = gnodes(w, srv_graph_redirect(w, graph), s != NULL);
	if (g)
		g->capture = s;
}

static CUresult bind(struct srv_gnodes *g, uint64_t id, CUgraphNode n)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->id[i] == id || g->node[i] == n) {
			g->id[i] = id;
			g->node[i] = n;
			return CUDA_SUCCESS;
		}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		uint64_t *ids = realloc(g->id, cap * sizeof(*ids));
		CUgraphNode *nodes = ids ? realloc(g->node, cap * sizeof(*nodes)) : NULL;
		if (ids)
			g->id = ids;
		if (!nodes)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->node = nodes;
		g->cap = cap;
	}
	g->id[g->n] = id;
	g->node[g->n++] = n;
	return CUDA_SUCCESS;
}

static void unbind(struct srv_gnodes *g, uint64_t id)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->id[i] == id) {
			g->id[i] = g->id[--g->n];
			g->node[i] = g->node[g->n];
			return;
		}
}

static CUresult node_h(const struct srv_gnodes *g, uint64_t id, CUgraphNode *out)
{
	for (size_t i = 0; g && i < g->n; i++)
		if (g->id[i] == id) {
			*out = g->node[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

static uint64_t node_id(const struct srv_gnodes *g, CUgraphNode n)
{
	for (size_t i = 0; g && n && i < g->n; i++)
		if (g->node[i] == n)
			return g->id[i];
	return 0;
}

/* The driver's graph for id (redirected), and its node table (made if need be). */
static CUresult graph_h(struct srv_worker *w, uint64_t id, CUgraph *out, struct srv_gnodes **tab)
{
	struct srv_obj *o;
	struct srv_gnodes *g;

	id = srv_graph_redirect(w, id);
	o = srv_obj_find(w, id, ST_KIND_GRAPH);
	g = gnodes(w, id, 0);
	if (o) {
		*out = o->h;
	} else if (g && g->h) {
		*out = g->h;
	} else if (g && g->capture) {
		CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
		CUresult r = w->drv.cuStreamGetCaptureInfo(g->capture, &st, NULL, out, NULL, NULL,
							   NULL);
		if (r != CUDA_SUCCESS)
			return r;
		if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
			return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (tab && !(*tab = g ? g : gnodes(w, id, 1)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

/* A graph as a message used it: live, or (a replay) built again from its journal. */
static CUresult graph_at(struct srv_worker *w, const Rgpu__GraphAt *at, CUgraph *out,
			 uint64_t *scratch)
{
	static uint64_t next_scratch;
	const struct rgpu_journal *j;
	CUresult r;

	*scratch = 0;
	if (!at)
		return CUDA_ERROR_INVALID_VALUE;
	j = srv_log_journal(w, srv_graph_redirect(w, at->graph));
	if (!w->graph_at || (j ? j->total : 0) == at->len)
		return graph_h(w, at->graph, out, NULL);
	*scratch = (1ull << 61) | ++next_scratch;
	r = w->graph_at(w, at, *scratch);
	if (r == CUDA_SUCCESS)
		r = graph_h(w, *scratch, out, NULL);
	return r;
}

static void scratch_done(struct srv_worker *w, uint64_t scratch)
{
	struct srv_obj *o = scratch ? srv_obj_find(w, scratch, ST_KIND_GRAPH) : NULL;
	if (o)
		srv_obj_release(w, o);
	if (scratch)
		srv_gnodes_forget(w, scratch);
}

static CUresult node_list(const struct srv_gnodes *g, const uint64_t *ids, size_t n,
			  CUgraphNode **out)
{
	*out = NULL;
	if (!n)
		return CUDA_SUCCESS;
	*out = malloc(n * sizeof(**out));
	if (!*out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n; i++)
		if (node_h(g, ids[i], &(*out)[i]) != CUDA_SUCCESS) {
			free(*out);
			*out = NULL;
			return CUDA_ERROR_INVALID_VALUE;
		}
	return CUDA_SUCCESS;
}

static CUresult all_nodes(struct srv_worker *w, CUgraph g, CUgraphNode **out, size_t *n)
{
	CUresult r;

	*out = NULL;
	*n = 0;
	r = w->drv.cuGraphGetNodes(g, NULL, n);
	if (r != CUDA_SUCCESS || !*n)
		return r;
	*out = malloc(*n * sizeof(**out));
	if (!*out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = w->drv.cuGraphGetNodes(g, *out, n);
	if (r != CUDA_SUCCESS) {
		free(*out);
		*out = NULL;
	}
	return r;
}

void srv_gnodes_fini(struct srv_worker *w)
{
	while (w->gexecs)
		srv_gexec_forget(w, w->gexecs->exec);
	while (w->gnodes)
		srv_gnodes_forget(w, w->gnodes->graph);
	while (w->nstreams) {
		struct srv_nstream *n = w->nstreams;
		w->nstreams = n->next;
		free(n); /* the streams go with their contexts */
	}
}

/* cuStreamBeginCaptureToGraph: s captures into graph (which exists) after its nodes deps. */
CUresult srv_capture_to_graph(struct srv_worker *w, CUstream s, uint64_t graph,
			      const uint64_t *deps, size_t n, unsigned mode)
{
	struct srv_gnodes *gn = NULL;
	CUgraphNode *d = NULL;
	CUgraph g = NULL;
	CUresult r = graph_h(w, graph, &g, &gn);

	if (r == CUDA_SUCCESS)
		r = node_list(gn, deps, n, &d);
	if (r == CUDA_SUCCESS && !w->drv.cuStreamBeginCaptureToGraph) {
		pr_warn("the driver lacks cuStreamBeginCaptureToGraph (CUDA 12.3)");
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamBeginCaptureToGraph(s, g, d, NULL, n, (CUstreamCaptureMode)mode);
	free(d);
	return r;
}

/* ---- the stream node frames are captured on ------------------------------------------------ */

static CUresult nstream(struct srv_worker *w, uint64_t ctx, CUstream *out)
{
	struct srv_nstream *n;
	CUresult r;

	for (n = w->nstreams; n; n = n->next)
		if (n->ctx == ctx) {
			*out = n->s;
			return CUDA_SUCCESS;
		}
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = w->drv.cuStreamCreate(&n->s, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS) {
		free(n);
		return r;
	}
	n->ctx = ctx;
	n->next = w->nstreams;
	w->nstreams = n;
	*out = n->s;
	return CUDA_SUCCESS;
}

/* Only the work a stream call queues can describe a node. */
static int node_frame_ok(unsigned type)
{
	return type == RGPU_MSG_LAUNCH || type == RGPU_MSG_MEMCPY_HTOD || type == RGPU_MSG_MEMCPY_DTOD ||
	       type == RGPU_MSG_MEMSET ||
	       type == RGPU_MSG_HOST_FUNC;
}

/*
 * Run m's frames on the node stream of its context, captured into a scratch graph of its own
 * (*scratch, the caller's to destroy, even on failure), and return the one node they made.
 * Their handlers' errors are this call's answer, not a sticky error. (Never into the node's own
 * graph: see add_like.)
 */
static CUresult capture_node(struct srv_worker *w, const Rgpu__GraphNode *m,
			     const struct srv_frame *f, CUgraph *scratch, CUgraphNode *out)
{
	struct srv_driver *d = &w->drv;
	CUresult saved = w->async_err, r, end;
	const CUgraphNode *made = NULL;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	uint64_t off = 0;
	size_t nmade = 0;
	CUgraph ended = NULL;
	CUstream s;

	if (!m->n_frame_type || m->n_frame_type != m->n_frame_body ||
	    m->n_frame_type != m->n_frame_plen)
		return CUDA_ERROR_INVALID_VALUE;
	if (!d->cuStreamBeginCaptureToGraph) {
		pr_warn("the driver lacks cuStreamBeginCaptureToGraph (CUDA 12.3): graph nodes "
			"with work cannot be made");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	r = nstream(w, m->ctx, &s);
	if (r == CUDA_SUCCESS)
		r = d->cuGraphCreate(scratch, 0);
	if (r == CUDA_SUCCESS)
		r = d->cuStreamBeginCaptureToGraph(s, *scratch, NULL, NULL, 0,
						   CU_STREAM_CAPTURE_MODE_RELAXED);
	if (r != CUDA_SUCCESS)
		return r;
	w->node_stream = s;
	w->async_err = CUDA_SUCCESS;
	for (size_t i = 0; i < m->n_frame_type && w->async_err == CUDA_SUCCESS; i++) {
		const struct rgpu_msg_info *mi = rgpu_msg_info(m->frame_type[i]);
		struct srv_frame sub = {0};
		uint64_t plen = m->frame_plen[i];

		if (!node_frame_ok(m->frame_type[i]) || !mi || plen > mi->rule->max_payload ||
		    plen > f->hdr.payload_len - off || m->frame_body[i].len > RGPU_MAX_BODY) {
			pr_warn("a graph node's frame %zu (%s, %llu payload bytes) is not work a "
				"node can be made of",
				i, rgpu_msg_name(m->frame_type[i]), (unsigned long long)plen);
			w->async_err = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		sub.hdr = f->hdr;
		sub.hdr.type = (uint16_t)m->frame_type[i];
		sub.hdr.body_len = (uint32_t)m->frame_body[i].len;
		sub.hdr.payload_len = plen;
		sub.body = m->frame_body[i].data;
		sub.payload = plen ? (uint8_t *)f->payload + off : NULL;
		off += plen;
		if (srv_handlers[sub.hdr.type](w, &sub) != 0 && w->async_err == CUDA_SUCCESS)
			w->async_err = CUDA_ERROR_INVALID_VALUE;
	}
	r = w->async_err;
	w->async_err = saved;
	w->node_stream = NULL;
	if (r == CUDA_SUCCESS)
		r = d->cuStreamGetCaptureInfo(s, &st, NULL, NULL, &made, NULL, &nmade);
	if (r == CUDA_SUCCESS && (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || nmade != 1 || !made[0]))
		r = CUDA_ERROR_INVALID_VALUE; /* no node, or more than one */
	if (r == CUDA_SUCCESS)
		*out = made[0];
	end = d->cuStreamEndCapture(s, &ended);
	return r != CUDA_SUCCESS ? r : end;
}

static int capture_kind(uint32_t type)
{
	return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
	       type == CU_GRAPH_NODE_TYPE_MEMSET || type == CU_GRAPH_NODE_TYPE_HOST;
}

/* Copy a node's parameters onto another node of the same type, in a graph or in exec e. */
static CUresult copy_params(struct srv_worker *w, CUgraphNode from, CUgraphNode to, CUgraphExec e,
			    CUcontext ctx)
{
	struct srv_driver *d = &w->drv;
	CUgraphNodeType a, b;
	CUresult r = d->cuGraphNodeGetType(from, &a);

	if (r == CUDA_SUCCESS)
		r = d->cuGraphNodeGetType(to, &b);
	if (r != CUDA_SUCCESS)
		return r;
	if (a != b)
		return CUDA_ERROR_INVALID_VALUE;
	switch (a) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		CUDA_KERNEL_NODE_PARAMS p;
		r = d->cuGraphKernelNodeGetParams(from, &p);
		if (r == CUDA_SUCCESS)
			r = e ? d->cuGraphExecKernelNodeSetParams(e, to, &p)
			      : d->cuGraphKernelNodeSetParams(to, &p);
		return r;
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		CUDA_MEMCPY3D p;
		r = d->cuGraphMemcpyNodeGetParams(from, &p);
		if (r == CUDA_SUCCESS)
			r = e ? d->cuGraphExecMemcpyNodeSetParams(e, to, &p, ctx)
			      : d->cuGraphMemcpyNodeSetParams(to, &p);
		return r;
	}
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		CUDA_MEMSET_NODE_PARAMS p;
		r = d->cuGraphMemsetNodeGetParams(from, &p);
		if (r == CUDA_SUCCESS)
			r = e ? d->cuGraphExecMemsetNodeSetParams(e, to, &p, ctx)
			      : d->cuGraphMemsetNodeSetParams(to, &p);
		return r;
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		CUDA_HOST_NODE_PARAMS p;
		r = d->cuGraphHostNodeGetParams(from, &p);
		if (r == CUDA_SUCCESS)
			r = e ? d->cuGraphExecHostNodeSetParams(e, to, &p)
			      : d->cuGraphHostNodeSetParams(to, &p);
		return r;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/*
 * A node like `from` (a scratch graph's) in graph g after deps: made with the Add call of its
 * type and its parameters. (Capturing into g itself is not possible while g is being captured:
 * the H200's driver does not take a second capture into a graph.)
 */
static CUresult add_like(struct srv_worker *w, CUgraphNode from, CUgraph g,
			 const CUgraphNode *deps, size_t n, CUcontext ctx, CUgraphNode *out)
{
	struct srv_driver *d = &w->drv;
	CUgraphNodeType t;
	CUresult r = d->cuGraphNodeGetType(from, &t);

	if (r != CUDA_SUCCESS)
		return r;
	switch (t) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		CUDA_KERNEL_NODE_PARAMS p;
		r = d->cuGraphKernelNodeGetParams(from, &p);
		return r == CUDA_SUCCESS ? d->cuGraphAddKernelNode(out, g, deps, n, &p) : r;
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		CUDA_MEMCPY3D p;
		r = d->cuGraphMemcpyNodeGetParams(from, &p);
		return r == CUDA_SUCCESS ? d->cuGraphAddMemcpyNode(out, g, deps, n, &p, ctx) : r;
	}
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		CUDA_MEMSET_NODE_PARAMS p;
		r = d->cuGraphMemsetNodeGetParams(from, &p);
		return r == CUDA_SUCCESS ? d->cuGraphAddMemsetNode(out, g, deps, n, &p, ctx) : r;
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		CUDA_HOST_NODE_PARAMS p;
		r = d->cuGraphHostNodeGetParams(from, &p);
		return r == CUDA_SUCCESS ? d->cuGraphAddHostNode(out, g, deps, n, &p) : r;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* New parameters for `to` from m's frames, made in a scratch graph. */
static CUresult set_by_capture(struct srv_worker *w, const Rgpu__GraphNode *m,
			       const struct srv_frame *f, CUgraphNode to, CUgraphExec e,
			       CUcontext ctx)
{
	CUgraph scratch = NULL;
	CUgraphNode n = NULL;
	CUresult r = capture_node(w, m, f, &scratch, &n);

	if (r == CUDA_SUCCESS)
		r = copy_params(w, n, to, e, ctx);
	if (scratch)
		w->drv.cuGraphDestroy(scratch);
	return r;
}

/* A child graph node's copy gets the child's ids, node for node in the driver's order. */
static CUresult bind_copy(struct srv_worker *w, uint64_t child, CUgraph from, uint64_t copy,
			  CUgraph to)
{
	struct srv_gnodes *src = gnodes(w, srv_graph_redirect(w, child), 0), *dst;
	CUgraphNode *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	CUresult r;

	if (!copy)
		return CUDA_SUCCESS;
	srv_gnodes_forget(w, copy);
	dst = gnodes(w, copy, 1);
	if (!dst)
		return CUDA_ERROR_OUT_OF_MEMORY;
	dst->h = to;
	r = all_nodes(w, from, &a, &na);
	if (r == CUDA_SUCCESS)
		r = all_nodes(w, to, &b, &nb);
	if (r == CUDA_SUCCESS && na != nb) {
		pr_err("job %s: a child graph's copy has %zu nodes where its graph has %zu: "
		       "CUDA_ERROR_UNKNOWN",
		       w->job_hex, nb, na);
		r = CUDA_ERROR_UNKNOWN;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < na; i++) {
		uint64_t id = node_id(src, a[i]);
		if (id)
			r = bind(dst, id, b[i]);
	}
	free(a);
	free(b);
	return r;
}

static CUresult node_add(struct srv_worker *w, const Rgpu__GraphNode *m, const struct srv_frame *f)
{
	struct srv_driver *d = &w->drv;
	struct srv_gnodes *gn = NULL;
	CUgraphNode *deps = NULL, n = NULL;
	CUgraph g = NULL;
	CUresult r = graph_h(w, m->graph, &g, &gn);

	if (r == CUDA_SUCCESS && (!m->node || node_h(gn, m->node, &n) == CUDA_SUCCESS))
		r = CUDA_ERROR_INVALID_VALUE; /* an id taken in this graph */
	if (r == CUDA_SUCCESS)
		r = node_list(gn, m->deps, m->n_deps, &deps);
	if (r != CUDA_SUCCESS)
		return r;
	if (capture_kind(m->type)) {
		/* made in a scratch graph, then added like it (add_like) */
		struct srv_obj *ctx = srv_obj_find(w, m->ctx, ST_KIND_CONTEXT);
		CUgraph scratch = NULL;
		CUgraphNode made = NULL;
		r = capture_node(w, m, f, &scratch, &made);
		if (r == CUDA_SUCCESS)
			r = add_like(w, made, g, deps, m->n_deps, ctx ? ctx->h : NULL, &n);
		if (scratch)
			d->cuGraphDestroy(scratch);
	} else if (m->type == CU_GRAPH_NODE_TYPE_EMPTY) {
		r = d->cuGraphAddEmptyNode(&n, g, deps, m->n_deps);
	} else if (m->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ||
		   m->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) {
		struct srv_obj *ev = srv_obj_find(w, m->event, ST_KIND_EVENT);
		r = !ev ? CUDA_ERROR_INVALID_HANDLE
		    : m->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD
			? d->cuGraphAddEventRecordNode(&n, g, deps, m->n_deps, ev->h)
			: d->cuGraphAddEventWaitNode(&n, g, deps, m->n_deps, ev->h);
	} else if (m->type == CU_GRAPH_NODE_TYPE_GRAPH) {
		uint64_t scratch = 0;
		CUgraph child = NULL, copy = NULL;
		r = graph_at(w, m->child_at, &child, &scratch);
		if (r == CUDA_SUCCESS)
			r = d->cuGraphAddChildGraphNode(&n, g, deps, m->n_deps, child);
		if (r == CUDA_SUCCESS)
			r = d->cuGraphChildGraphNodeGetGraph(n, &copy);
		if (r == CUDA_SUCCESS)
			r = bind_copy(w, scratch ? scratch : m->child_at->graph, child, m->child_copy,
				      copy);
		scratch_done(w, scratch);
	} else if (m->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
		struct srv_obj *ctx = srv_obj_find(w, m->ctx, ST_KIND_CONTEXT);
		CUgraphNodeParams p;
		CUgraph *bodies = calloc(m->n_bodies + 1, sizeof(*bodies));
		memset(&p, 0, sizeof(p));
		p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
		p.conditional.handle = m->cond_handle;
		p.conditional.type = (CUgraphConditionalNodeType)m->cond_type;
		p.conditional.size = (unsigned)m->n_bodies;
		p.conditional.phGraph_out = bodies;
		p.conditional.ctx = ctx ? ctx->h : NULL;
		r = !bodies ? CUDA_ERROR_OUT_OF_MEMORY
		    : d->cuGraphAddNode ? d->cuGraphAddNode(&n, g, deps, NULL, m->n_deps, &p)
					: CUDA_ERROR_NOT_SUPPORTED;
		if (r == CUDA_ERROR_NOT_SUPPORTED)
			pr_warn("the driver lacks cuGraphAddNode (CUDA 12.3): no conditional node");
		/*
		 * the bodies are graphs of the client's ids, found through the node (the H200's
		 * driver points phGraph_out at an array of its own)
		 */
		for (size_t i = 0; r == CUDA_SUCCESS && i < m->n_bodies; i++) {
			struct srv_gnodes *b;
			srv_gnodes_forget(w, m->bodies[i]);
			b = gnodes(w, m->bodies[i], 1);
			if (!b)
				r = CUDA_ERROR_OUT_OF_MEMORY;
			else
				b->h = p.conditional.phGraph_out[i];
		}
		free(bodies);
	} else {
		pr_warn("a graph node of type %u cannot be made here", m->type);
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	free(deps);
	if (r == CUDA_SUCCESS)
		r = bind(gn, m->node, n);
	return r;
}

static CUresult node_set(struct srv_worker *w, const Rgpu__GraphNode *m, const struct srv_frame *f)
{
	struct srv_driver *d = &w->drv;
	struct srv_obj *e = NULL, *ctx = srv_obj_find(w, m->ctx, ST_KIND_CONTEXT);
	struct srv_gnodes *gn = NULL;
	struct srv_obj *ev;
	CUgraphNode n = NULL;
	CUgraph g = NULL;
	CUresult r;

	if (m->op == RGPU__GRAPH_NODE_OP__NODE_SET) {
		r = graph_h(w, m->graph, &g, &gn);
	} else {
		struct srv_gexec *x = gexec(w, m->exec);
		e = srv_obj_find(w, m->exec, ST_KIND_GRAPH_EXEC);
		r = e && x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
		gn = x ? gnodes(w, x->src, 0) : NULL;
	}
	if (r == CUDA_SUCCESS)
		r = node_h(gn, m->node, &n);
	if (r != CUDA_SUCCESS)
		return r;
	if (m->op == RGPU__GRAPH_NODE_OP__NODE_EXEC_ENABLE) {
		r = d->cuGraphNodeSetEnabled(e->h, n, m->enabled);
		return r == CUDA_SUCCESS ? note_enabled(gexec(w, m->exec), m->node, m->enabled) : r;
	}
	if (capture_kind(m->type))
		return set_by_capture(w, m, f, n, e ? e->h : NULL, ctx ? ctx->h : NULL);
	switch (m->type) {
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		ev = srv_obj_find(w, m->event, ST_KIND_EVENT);
		if (!ev)
			return CUDA_ERROR_INVALID_HANDLE;
		if (m->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
			return e ? d->cuGraphExecEventRecordNodeSetEvent(e->h, n, ev->h)
				 : d->cuGraphEventRecordNodeSetEvent(n, ev->h);
		return e ? d->cuGraphExecEventWaitNodeSetEvent(e->h, n, ev->h)
			 : d->cuGraphEventWaitNodeSetEvent(n, ev->h);
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (e) {
			uint64_t scratch = 0;
			CUgraph child = NULL;
			r = graph_at(w, m->child_at, &child, &scratch);
			if (r == CUDA_SUCCESS)
				r = d->cuGraphExecChildGraphNodeSetParams(e->h, n, child);
			scratch_done(w, scratch);
			return r;
		}
		break;
	}
	pr_warn("new parameters for a graph node of type %u are not supported", m->type);
	return CUDA_ERROR_NOT_SUPPORTED;
}

int h_graph_node(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphNode, graph_node, w, f);
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = m->op == RGPU__GRAPH_NODE_OP__NODE_ADD ? node_add(w, m, f) : node_set(w, m, f);
	rgpu__graph_node__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

/* ---- edges, node removal, capture dependencies --------------------------------------------- */

int h_graph_edit(struct srv_worker *w, struct srv_frame *f)
{
	struct srv_driver *d = &w->drv;
	struct srv_gnodes *gn = NULL;
	CUgraphNode *a = NULL, *b = NULL, n;
	CUgraph g = NULL;
	CUresult r;
	int ret;

	if (f->hdr.type == RGPU_MSG_GRAPH_COND) {
		DECODE(m, GraphCond, graph_cond, w, f);
		struct srv_obj *ctx = srv_obj_find(w, m->ctx, ST_KIND_CONTEXT);
		CUgraphConditionalHandle h = 0;
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = graph_h(w, m->graph, &g, NULL);
		if (r == CUDA_SUCCESS && !d->cuGraphConditionalHandleCreate) {
			pr_warn("the driver lacks cuGraphConditionalHandleCreate (CUDA 12.3)");
			r = CUDA_ERROR_NOT_SUPPORTED;
		}
		if (r == CUDA_SUCCESS)
			r = d->cuGraphConditionalHandleCreate(&h, g, ctx ? ctx->h : NULL,
							      m->default_value, m->flags);
		/*
		 * A replay must give the kernels' value again (they hold it as a value): a handle
		 * that cannot be placed fails it, naming both (docs/architecture.md)
		 */
		if (r == CUDA_SUCCESS && m->want && h != m->want) {
			pr_err("a graph's conditional handle is %#llx now, where the program holds "
			       "%#llx: it cannot be placed",
			       (unsigned long long)h, (unsigned long long)m->want);
			r = CUDA_ERROR_INVALID_VALUE;
		}
		rgpu__graph_cond__free_unpacked(m, NULL);
		return srv_reply_value(w, f, r, (int64_t)h);
	}
	if (f->hdr.type == RGPU_MSG_CAPTURE_DEPS) {
		DECODE(m, CaptureDeps, capture_deps, w, f);
		CUstream s = NULL;
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS)
			r = graph_h(w, m->graph, &g, &gn);
		if (r == CUDA_SUCCESS)
			r = node_list(gn, m->nodes, m->n_nodes, &a);
		if (r == CUDA_SUCCESS)
			r = d->cuStreamUpdateCaptureDependencies(s, a, NULL, m->n_nodes, m->flags);
		free(a);
		rgpu__capture_deps__free_unpacked(m, NULL);
		return srv_reply_status(w, f, r);
	}
	DECODE(m, GraphEdit, graph_edit, w, f);
	r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = graph_h(w, m->graph, &g, &gn);
	if (r == CUDA_SUCCESS && m->op == RGPU__GRAPH_EDIT_OP__NODE_DESTROY) {
		r = node_h(gn, m->node, &n);
		if (r == CUDA_SUCCESS)
			r = d->cuGraphDestroyNode(n);
		if (r == CUDA_SUCCESS)
			unbind(gn, m->node);
	} else if (r == CUDA_SUCCESS) {
		r = m->n_from == m->n_to ? node_list(gn, m->from, m->n_from, &a)
					 : CUDA_ERROR_INVALID_VALUE;
		if (r == CUDA_SUCCESS)
			r = node_list(gn, m->to, m->n_to, &b);
		if (r == CUDA_SUCCESS)
			r = m->op == RGPU__GRAPH_EDIT_OP__EDGES_ADD
				? d->cuGraphAddDependencies(g, a, b, NULL, m->n_from)
				: d->cuGraphRemoveDependencies(g, a, b, NULL, m->n_from);
	}
	free(a);
	free(b);
	rgpu__graph_edit__free_unpacked(m, NULL);
	ret = srv_reply_status(w, f, r);
	return ret;
}

/* ---- clones --------------------------------------------------------------------------------- */

int h_graph_clone(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphClone, graph_clone, w, f);
	struct srv_obj c = {.id = srv_graph_redirect(w, m->clone), .kind = ST_KIND_GRAPH,
			    .ctx = m->ctx};
	struct srv_gnodes *src = NULL, *dst = NULL;
	uint64_t scratch = 0;
	CUgraph g = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = m->n_orig == m->n_copy && m->src ? graph_at(w, m->src, &g, &scratch)
						     : CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		r = w->drv.cuGraphClone((CUgraph *)&c.h, g);
	if (r == CUDA_SUCCESS) {
		src = gnodes(w, scratch ? scratch : srv_graph_redirect(w, m->src->graph), 0);
		srv_gnodes_forget(w, c.id);
		dst = gnodes(w, c.id, 1);
		if (!dst)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < m->n_orig; i++) {
		CUgraphNode o, n = NULL;
		r = node_h(src, m->orig[i], &o);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuGraphNodeFindInClone(&n, o, c.h);
		if (r == CUDA_SUCCESS)
			r = bind(dst, m->copy[i], n);
	}
	if (r == CUDA_SUCCESS)
		r = srv_obj_create(w, &c); /* releases c.h when it fails */
	else if (c.h)
		w->drv.cuGraphDestroy(c.h);
	if (r != CUDA_SUCCESS && dst)
		srv_gnodes_forget(w, c.id);
	scratch_done(w, scratch);
	rgpu__graph_clone__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

/* ---- what a graph holds: nodes, capture dependencies, the dot file -------------------------- */

static int reply_nodes(struct srv_worker *w, const struct srv_frame *f, const Rgpu__GraphOp *m)
{
	Rgpu__GraphNodesReply rep = RGPU__GRAPH_NODES_REPLY__INIT;
	struct srv_gnodes *gn = NULL;
	CUgraphNode *n = NULL, *from = NULL, *to = NULL;
	size_t nn = 0, ne = 0;
	CUgraph g = NULL;
	CUresult r = graph_h(w, m->graph, &g, &gn);
	int ret;

	if (r == CUDA_SUCCESS)
		r = all_nodes(w, g, &n, &nn);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuGraphGetEdges(g, NULL, NULL, NULL, &ne);
	if (r == CUDA_SUCCESS && ne) {
		from = malloc(ne * sizeof(*from));
		to = malloc(ne * sizeof(*to));
		r = from && to ? w->drv.cuGraphGetEdges(g, from, to, NULL, &ne)
			       : CUDA_ERROR_OUT_OF_MEMORY;
	}
	rep.type = calloc(nn + 1, sizeof(*rep.type));
	rep.id = calloc(nn + 1, sizeof(*rep.id));
	rep.edge_from = calloc(ne + 1, sizeof(*rep.edge_from));
	rep.edge_to = calloc(ne + 1, sizeof(*rep.edge_to));
	if (r == CUDA_SUCCESS && (!rep.type || !rep.id || !rep.edge_from || !rep.edge_to))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < nn; i++) {
		CUgraphNodeType t;
		r = w->drv.cuGraphNodeGetType(n[i], &t);
		rep.type[i] = (uint32_t)t;
		rep.id[i] = node_id(gn, n[i]);
	}
	for (size_t e = 0; r == CUDA_SUCCESS && e < ne; e++) {
		size_t i, j;
		for (i = 0; i < nn && n[i] != from[e]; i++)
			;
		for (j = 0; j < nn && n[j] != to[e]; j++)
			;
		if (i == nn || j == nn) {
			pr_err("job %s: the driver listed an edge of a graph between nodes it did "
			       "not list: CUDA_ERROR_UNKNOWN",
			       w->job_hex);
			r = CUDA_ERROR_UNKNOWN;
		}
		rep.edge_from[e] = (uint32_t)i;
		rep.edge_to[e] = (uint32_t)j;
	}
	if (r == CUDA_SUCCESS) {
		rep.n_type = rep.n_id = nn;
		rep.n_edge_from = rep.n_edge_to = ne;
	}
	rep.result = r;
	ret = srv_reply(w, f, &rep.base);
	free(rep.type);
	free(rep.id);
	free(rep.edge_from);
	free(rep.edge_to);
	free(n);
	free(from);
	free(to);
	return ret;
}

static int reply_capture_info(struct srv_worker *w, const struct srv_frame *f,
			      const Rgpu__GraphOp *m)
{
	Rgpu__CaptureInfoReply rep = RGPU__CAPTURE_INFO_REPLY__INIT;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	const CUgraphNode *deps = NULL;
	struct srv_gnodes *gn = NULL;
	size_t n = 0;
	CUgraph g = NULL;
	CUstream s = NULL;
	CUresult r = srv_stream(w, m->stream, &s);
	int ret;

	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &n);
	if (r == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE)
		r = graph_h(w, m->graph, &g, &gn);
	if (r == CUDA_SUCCESS && n && !(rep.id = calloc(n, sizeof(*rep.id))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		rep.id[i] = node_id(gn, deps[i]);
	if (r == CUDA_SUCCESS && rep.id)
		rep.n_id = n;
	rep.status = (uint32_t)st;
	rep.result = r;
	ret = srv_reply(w, f, &rep.base);
	free(rep.id);
	return ret;
}

static int reply_dot(struct srv_worker *w, const struct srv_frame *f, const Rgpu__GraphOp *m)
{
	Rgpu__GraphDotReply rep = RGPU__GRAPH_DOT_REPLY__INIT;
	char path[] = "/tmp/rgpu-dot-XXXXXX";
	uint8_t *text = NULL;
	size_t len = 0;
	CUgraph g = NULL;
	CUresult r = graph_h(w, m->graph, &g, NULL);
	int fd = -1, ret;

	if (r == CUDA_SUCCESS && (fd = mkstemp(path)) < 0) {
		pr_warn("job %s: cuGraphDebugDotPrint: cannot make a file in /tmp (%s): "
			"CUDA_ERROR_OPERATING_SYSTEM",
			w->job_hex, strerror(errno));
		r = CUDA_ERROR_OPERATING_SYSTEM;
	}
	if (r == CUDA_SUCCESS)
		r = w->drv.cuGraphDebugDotPrint(g, path, (unsigned)m->flags);
	if (r == CUDA_SUCCESS) {
		FILE *fp = fopen(path, "rb");
		long sz = -1;
		if (fp && fseek(fp, 0, SEEK_END) == 0)
			sz = ftell(fp);
		if (sz >= 0 && sz < (long)(RGPU_MAX_BODY - 64) && fseek(fp, 0, SEEK_SET) == 0 &&
		    (text = malloc((size_t)sz + 1)) != NULL)
			len = fread(text, 1, (size_t)sz, fp);
		if (sz >= (long)(RGPU_MAX_BODY - 64))
			pr_warn("job %s: cuGraphDebugDotPrint: the graph's %ld bytes of DOT text "
				"exceed what a reply holds (%u): CUDA_ERROR_OPERATING_SYSTEM",
				w->job_hex, sz, (unsigned)(RGPU_MAX_BODY - 64));
		else if (!text || len != (size_t)sz)
			pr_warn("job %s: cuGraphDebugDotPrint: cannot read the driver's DOT file "
				"back: CUDA_ERROR_OPERATING_SYSTEM",
				w->job_hex);
		if (!text || len != (size_t)sz)
			r = CUDA_ERROR_OPERATING_SYSTEM;
		if (fp)
			fclose(fp);
	}
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	rep.result = r;
	rep.text.data = text;
	rep.text.len = r == CUDA_SUCCESS ? len : 0;
	ret = srv_reply(w, f, &rep.base);
	free(text);
	return ret;
}

int h_graph_nodes(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphOp, graph_op, w, f);
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret;

	if (r != CUDA_SUCCESS) {
		/* a reply of the type asked for, with the error */
		Rgpu__GraphNodesReply a = RGPU__GRAPH_NODES_REPLY__INIT;
		Rgpu__GraphDotReply b = RGPU__GRAPH_DOT_REPLY__INIT;
		Rgpu__CaptureInfoReply c = RGPU__CAPTURE_INFO_REPLY__INIT;
		a.result = b.result = c.result = r;
		ret = srv_reply(w, f,
				f->hdr.type == RGPU_MSG_GRAPH_NODES  ? &a.base
				: f->hdr.type == RGPU_MSG_GRAPH_DOT ? &b.base
								    : &c.base);
	} else if (f->hdr.type == RGPU_MSG_GRAPH_NODES) {
		ret = reply_nodes(w, f, m);
	} else if (f->hdr.type == RGPU_MSG_GRAPH_DOT) {
		ret = reply_dot(w, f, m);
	} else {
		ret = reply_capture_info(w, f, m);
	}
	rgpu__graph_op__free_unpacked(m, NULL);
	return ret;
}

/* Ids for nodes the client learned of (MSG_GRAPH_NODES, MSG_CAPTURE_INFO), by position now. */
int h_graph_bind(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphBind, graph_bind, w, f);
	struct srv_gnodes *gn = NULL;
	CUgraphNode *all = NULL;
	const CUgraphNode *deps = NULL;
	size_t n = 0;
	CUgraph g = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS)
		r = graph_h(w, m->graph, &g, &gn);
	if (r == CUDA_SUCCESS && m->capture) {
		CUstreamCaptureStatus st;
		CUstream s = NULL;
		r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n);
	} else if (r == CUDA_SUCCESS) {
		r = all_nodes(w, g, &all, &n);
		deps = all;
	}
	if (r == CUDA_SUCCESS && m->n_index != m->n_id)
		r = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; r == CUDA_SUCCESS && i < m->n_index; i++)
		r = m->index[i] < n && m->id[i] ? bind(gn, m->id[i], deps[m->index[i]])
						: CUDA_ERROR_INVALID_VALUE;
	free(all);
	srv_async_error(w, r, "graph node ids");
	rgpu__graph_bind__free_unpacked(m, NULL);
	return 0;
}

/* ---- cuGraphExecUpdate ----------------------------------------------------------------------- */

/* Exec e (x its note) instantiated again from graph g (id src here), its off nodes off. */
static CUresult remake_exec(struct srv_worker *w, struct srv_obj *e, struct srv_gexec *x,
			    CUgraph g, uint64_t src)
{
	struct srv_driver *d = &w->drv;
	struct srv_gnodes *gn = gnodes(w, src, 0);
	CUgraphExec now = NULL;
	CUresult r = d->cuGraphInstantiateWithFlags(&now, g, x->flags);

	for (size_t i = 0; r == CUDA_SUCCESS && i < x->noff; i++) {
		CUgraphNode n;
		r = node_h(gn, x->off[i], &n);
		if (r == CUDA_SUCCESS)
			r = d->cuGraphNodeSetEnabled(now, n, 0);
	}
	if (r != CUDA_SUCCESS) {
		if (now)
			d->cuGraphExecDestroy(now);
		return r;
	}
	d->cuGraphExecDestroy((CUgraphExec)e->h);
	e->h = now;
	if (x->owned && x->owned != src) {
		struct srv_obj *t = srv_obj_find(w, x->owned, ST_KIND_GRAPH);
		if (t)
			srv_obj_release(w, t);
		srv_gnodes_forget(w, x->owned);
	}
	x->owned = src >> 60 ? src : 0; /* a scratch graph goes with the exec */
	x->src = src;
	return CUDA_SUCCESS;
}

int h_graph_update(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphExecUpdate, graph_exec_update, w, f);
	Rgpu__GraphExecUpdateReply rep = RGPU__GRAPH_EXEC_UPDATE_REPLY__INIT;
	CUgraphExecUpdateResultInfo info = {0};
	struct srv_obj *e = srv_obj_find(w, m->exec, ST_KIND_GRAPH_EXEC);
	struct srv_gexec *x = gexec(w, m->exec);
	uint64_t scratch = 0;
	CUgraph g = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret;

	if (r == CUDA_SUCCESS)
		r = e && x ? graph_at(w, m->src, &g, &scratch) : CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && w->replaying) {
		/*
		 * A replay makes the exec again from the graph as it was at the update (the update
		 * succeeded then: the exec became that graph's nodes and parameters), with its nodes
		 * that were off turned off again. The H200's driver refused the update itself from a
		 * graph built again (a pitched copy's parameters "changed"), where it had taken it
		 * from the graph the exec came from.
		 */
		r = remake_exec(w, e, x, g, scratch ? scratch : srv_graph_redirect(w, m->src->graph));
		if (r == CUDA_SUCCESS)
			scratch = 0; /* the exec's now */
		rep.update_result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
	} else if (r == CUDA_SUCCESS || r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
		r = w->drv.cuGraphExecUpdate(e->h, g, &info);
		rep.update_result = (uint32_t)info.result;
		rep.error_node = node_id(gnodes(w, scratch ? scratch : srv_graph_redirect(w, m->src->graph), 0),
					 info.errorNode);
		rep.error_from_node = node_id(gnodes(w, x->src, 0), info.errorFromNode);
		if (r != CUDA_SUCCESS && w->replaying)
			pr_warn("cuGraphExecUpdate of exec %llu from graph %llu as it was (%llu bytes "
				"of its journal) refused: result %u, error node %llu (from node %llu)",
				(unsigned long long)m->exec, (unsigned long long)m->src->graph,
				(unsigned long long)m->src->len, rep.update_result,
				(unsigned long long)rep.error_node,
				(unsigned long long)rep.error_from_node);
	}
	scratch_done(w, scratch);
	rep.result = r;
	ret = srv_reply(w, f, &rep.base);
	rgpu__graph_exec_update__free_unpacked(m, NULL);
	return ret;
}
