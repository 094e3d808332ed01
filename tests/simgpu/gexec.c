/*
 * Executable graphs: cuGraphInstantiate copies a graph (later changes to the graph do not
 * reach the copy), cuGraphLaunch queues the copy's work on a stream, and the
 * cuGraphExec*SetParams calls, cuGraphNodeSetEnabled and cuGraphExecUpdate change the copy
 * only. The copy's nodes are named by the nodes of the graph it was instantiated from: each
 * remembers the id of its original (origin).
 *
 * A launch queues the nodes' operations in one topological order fixed at instantiation
 * (Kahn's algorithm from the roots in creation order, so a captured chain runs in capture
 * order), a child graph's nodes in place of its node, a disabled node as an empty one, a
 * conditional node as one operation holding its bodies' (cond.c), all at once so that no other
 * work lands between them. One stream in topological order keeps every dependency and gives up
 * only the concurrency between branches. A launch on a capturing stream becomes a child graph
 * node of the capture, as in the driver.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

struct sim_gexec {
	struct sim_graph *g; /* the private copy */
	unsigned long long flags;
	struct sim_condvals *vals; /* its conditional handles' values, or NULL */
	/* a graph with conditional nodes has one executable at a time: the graph, and its id */
	struct sim_graph *src;
	uint64_t src_id;
};

static struct sim_gexec *exec_get(CUgraphExec h)
{
	return sim_handle_is(h, SIM_GRAPHEXEC) ? (struct sim_gexec *)h : NULL;
}

/*
 * Under sim_sched: g->order, and the orders of the graphs its nodes own. Returns 0, -1 out of
 * memory, or 1 when a graph has a cycle.
 */
static int graph_order(struct sim_graph *g)
{
	struct sim_gnode **q, *n;
	size_t head = 0, tail = 0;

	q = malloc((g->nnodes ? g->nnodes : 1) * sizeof(*q));
	if (!q)
		return -1;
	for_each_node(n, g)
	{
		n->pending = n->in.n;
		if (!n->pending)
			q[tail++] = n;
	}
	while (head < tail) {
		n = q[head++];
		for (size_t i = 0; i < n->out.n; i++)
			if (--n->out.v[i]->pending == 0)
				q[tail++] = n->out.v[i];
	}
	if (tail != g->nnodes) {
		free(q);
		return 1;
	}
	g->order = q;
	for (size_t i = 0; i < g->nnodes; i++) {
		struct sim_graph *sub;
		for (unsigned j = 0; (sub = sim_gnode_sub(q[i], j)); j++) {
			int r = graph_order(sub);
			if (r)
				return r;
		}
	}
	return 0;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					     unsigned long long flags)
{
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
					 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
	struct sim_graph *g;
	struct sim_gexec *x;
	CUresult r = CUDA_SUCCESS;
	int o = -1;

	SIM_ENTER();
	if (!phGraphExec || !sim_graph_get(hGraph) || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->flags = flags;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(hGraph);
	if (!g) {
		r = CUDA_ERROR_INVALID_VALUE; /* gone meanwhile */
		goto out;
	}
	if ((r = sim_cond_instantiable(g)))
		goto out;
	if ((x->g = sim_graph_clone(g, false, NULL)))
		o = graph_order(x->g);
	if (o > 0)
		r = CUDA_ERROR_INVALID_VALUE; /* a cycle */
	else if (o < 0 || sim_condvals_new(x->g, &x->vals) || sim_handle_add(x, SIM_GRAPHEXEC))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS && sim_graph_has_cond(g)) {
		g->nexec++;
		x->src = g;
		x->src_id = g->id;
	}
out:
	if (r != CUDA_SUCCESS) {
		if (x->g)
			sim_graph_free(x->g);
		sim_condvals_put(x->vals);
	}
	pthread_mutex_unlock(&sim_sched);
	if (r != CUDA_SUCCESS) {
		free(x);
		return r;
	}
	*phGraphExec = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	struct sim_gexec *x = exec_get(hGraphExec);

	SIM_ENTER();
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	sim_handle_del(x);
	pthread_mutex_lock(&sim_sched);
	sim_graph_free(x->g);
	if (x->src && sim_graph_get((CUgraph)x->src) == x->src && x->src->id == x->src_id)
		x->src->nexec--;
	pthread_mutex_unlock(&sim_sched);
	sim_condvals_put(x->vals); /* launches still queued hold their own references */
	free(x);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	struct sim_gexec *x = exec_get(hGraphExec);

	SIM_ENTER();
	if (!x || !flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = x->flags;
	return CUDA_SUCCESS;
}

/* --- launch ----------------------------------------------------------------------------- */

/* Takes op (NULL: nothing to add). Returns 0, or -1 out of memory (op is then freed). */
static int opvec_add(struct sim_opvec *v, struct sim_op *op)
{
	if (!op)
		return 0;
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 16;
		struct sim_op **nv = realloc(v->v, cap * sizeof(*nv));
		if (!nv) {
			sim_op_free_locked(op);
			return -1;
		}
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = op;
	return 0;
}

static struct sim_op *event_op(int type, struct sim_event *ev)
{
	struct sim_op *op = sim_op_new(type);

	if (op) {
		ev->refs++;
		op->u.ev.ev = ev;
	}
	return op;
}

static CUresult graph_ops(struct sim_graph *g, struct sim_opvec *v, struct sim_condvals *vals);

/* Under sim_sched: the operations of conditional node n, its bodies' made now. */
static CUresult cond_op(struct sim_gnode *n, struct sim_condvals *vals, struct sim_op **op)
{
	unsigned size = n->u.cond.size;
	struct sim_opvec *bodies = calloc(size, sizeof(*bodies));
	CUresult r = CUDA_SUCCESS;

	if (!bodies)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; r == CUDA_SUCCESS && i < size; i++)
		r = graph_ops((struct sim_graph *)n->u.cond.body[i], &bodies[i], vals);
	if (r != CUDA_SUCCESS) {
		for (unsigned i = 0; i < size; i++)
			sim_opvec_free(&bodies[i], true);
		free(bodies);
		return r;
	}
	return sim_cond_node_op(n, vals, bodies, op);
}

/*
 * Under sim_sched: the operations that run node n, added to v; its kernels set the
 * conditional values vals (NULL: the graph has no handle).
 */
static CUresult node_ops(struct sim_gnode *n, struct sim_opvec *v, struct sim_condvals *vals)
{
	struct sim_op *op = NULL;
	CUresult r = CUDA_SUCCESS;

	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		if (!(op = sim_op_clone(n->u.k.op)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		op->u.k.vals = vals;
		sim_condvals_get(vals);
		break;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		/* the memory is checked again: it may have been freed since the node was made */
		if ((r = sim_copy3d_ops(&n->u.copy.p, &op)))
			return r;
		while (op) {
			struct sim_op *next = op->next;
			op->next = NULL;
			if (opvec_add(v, op)) {
				for (op = next; op; op = next) {
					next = op->next;
					sim_op_free_locked(op);
				}
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			op = next;
		}
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		const CUDA_MEMSET_NODE_PARAMS *p = &n->u.set.p;
		if ((r = sim_set_op(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height,
				    &op)))
			return r;
		break;
	}
	case CU_GRAPH_NODE_TYPE_HOST:
		if (!(op = sim_op_new(SIM_OP_HOSTFN)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		op->u.host.fn = n->u.host.fn;
		op->u.host.ud = n->u.host.userData;
		break;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return graph_ops(n->u.child, v, vals);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		if ((r = cond_op(n, vals, &op)))
			return r;
		break;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		op = event_op(n->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? SIM_OP_RECORD
									 : SIM_OP_WAIT,
			      n->u.ev);
		if (!op)
			return CUDA_ERROR_OUT_OF_MEMORY;
		break;
	default: /* empty */
		return CUDA_SUCCESS;
	}
	return opvec_add(v, op) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult graph_ops(struct sim_graph *g, struct sim_opvec *v, struct sim_condvals *vals)
{
	CUresult r = CUDA_SUCCESS;

	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nnodes; i++)
		if (!g->order[i]->disabled)
			r = node_ops(g->order[i], v, vals);
	return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	struct sim_gexec *x = exec_get(hGraphExec);
	struct sim_opvec v = {0};
	struct sim_stream *s;
	struct sim_op *reset;
	CUresult r;

	SIM_ENTER();
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(hStream, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	if (s->capture) {
		r = sim_capture_graph(s, x->g);
		pthread_mutex_unlock(&sim_sched);
		return r;
	}
	/* first, the handles that take their default at each launch */
	if ((r = sim_cond_reset_op(x->vals, &reset)) == CUDA_SUCCESS && opvec_add(&v, reset) == 0)
		r = graph_ops(x->g, &v, x->vals);
	else if (r == CUDA_SUCCESS)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r != CUDA_SUCCESS)
		for (size_t i = 0; i < v.n; i++)
			sim_op_free_locked(v.v[i]);
	pthread_mutex_unlock(&sim_sched);
	if (r == CUDA_SUCCESS && v.n)
		r = sim_enqueue_list(s, v.v, (unsigned)v.n);
	free(v.v);
	return r;
}

/* --- changing an executable ------------------------------------------------------------- */

/* Under sim_sched: the copy in x of graph node h, or NULL. */
static struct sim_gnode *exec_node(struct sim_gexec *x, CUgraphNode h)
{
	struct sim_gnode *o = sim_gnode_get(h), *n;

	if (!o)
		return NULL;
	for_each_node(n, x->g) if (n->origin == o->id) return n;
	return NULL;
}

static bool same_ctx(const struct sim_gnode *a, const struct sim_gnode *b)
{
	return a->u.k.op->u.k.mod->ctx == b->u.k.op->u.k.mod->ctx;
}

static bool same_memory_types(const struct sim_gnode *a, const struct sim_gnode *b)
{
	return a->u.copy.p.srcMemoryType == b->u.copy.p.srcMemoryType &&
	       a->u.copy.p.dstMemoryType == b->u.copy.p.dstMemoryType;
}

/*
 * The parameters built in tmp replace those of the copy of h in x, within the driver's limits
 * (a kernel keeps its context, a copy its memory types); tmp's are freed in every case.
 */
static CUresult exec_swap(CUgraphExec hx, CUgraphNode h, struct sim_gnode *tmp)
{
	struct sim_gexec *x;
	struct sim_gnode *n = NULL;
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_sched);
	if ((x = exec_get(hx)))
		n = exec_node(x, h);
	if (!n || n->type != tmp->type)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && !same_ctx(n, tmp))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY && !same_memory_types(n, tmp))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		typeof(n->u) old = n->u;
		n->u = tmp->u;
		tmp->u = old;
	}
	sim_gnode_params_free(tmp);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/* The cheap checks before parameters are built: a live executable and a live node. */
static CUresult exec_args(CUgraphExec hx, CUgraphNode h)
{
	return exec_get(hx) && sim_gnode_get(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
						   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = exec_args(hGraphExec, hNode)) || (r = sim_gnode_kernel(&tmp, nodeParams)))
		return r;
	return exec_swap(hGraphExec, hNode, &tmp);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS p;

	if (!nodeParams)
		return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, NULL);
	memset(&p, 0, sizeof(p));
	memcpy(&p, nodeParams, sizeof(*nodeParams)); /* v2 begins with the fields of v1 */
	return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &p);
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = exec_args(hGraphExec, hNode)) || (r = sim_gnode_memcpy(&tmp, copyParams, ctx)))
		return r;
	return exec_swap(hGraphExec, hNode, &tmp);
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_MEMSET_NODE_PARAMS *memsetParams,
						CUcontext ctx)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = exec_args(hGraphExec, hNode)) || (r = sim_gnode_memset(&tmp, memsetParams, ctx)))
		return r;
	return exec_swap(hGraphExec, hNode, &tmp);
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
					      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = exec_args(hGraphExec, hNode)) || (r = sim_gnode_host(&tmp, nodeParams)))
		return r;
	return exec_swap(hGraphExec, hNode, &tmp);
}

static CUresult exec_event(CUgraphExec hx, CUgraphNode h, CUevent ev, CUgraphNodeType type)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = exec_args(hx, h)) || (r = sim_gnode_event(&tmp, type, ev)))
		return r;
	return exec_swap(hx, h, &tmp);
}

CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
						    CUevent event)
{
	return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
						  CUevent event)
{
	return exec_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* Only kernel, memcpy and memset nodes can be disabled, as in the driver. */
static CUresult enabled(CUgraphExec hx, CUgraphNode h, unsigned *get, unsigned set)
{
	struct sim_gexec *x;
	struct sim_gnode *n = NULL;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	if ((x = exec_get(hx)))
		n = exec_node(x, h);
	if (!n || (n->type != CU_GRAPH_NODE_TYPE_KERNEL && n->type != CU_GRAPH_NODE_TYPE_MEMCPY &&
		   n->type != CU_GRAPH_NODE_TYPE_MEMSET))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (get)
		*get = !n->disabled;
	else
		n->disabled = !set;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
				       unsigned int isEnabled)
{
	return enabled(hGraphExec, hNode, NULL, isEnabled);
}

CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
				       unsigned int *isEnabled)
{
	if (!isEnabled)
		return CUDA_ERROR_INVALID_VALUE;
	return enabled(hGraphExec, hNode, isEnabled, 0);
}

/* --- update ----------------------------------------------------------------------------- */

static CUresult update_fail(CUgraphExecUpdateResultInfo *info, CUgraphExecUpdateResult result,
			    struct sim_gnode *node, struct sim_gnode *from)
{
	info->result = result;
	info->errorNode = (CUgraphNode)node;
	info->errorFromNode = (CUgraphNode)from;
	return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

/*
 * Under sim_sched: whether the nodes of g can replace the parameters of xg's, paired in
 * creation order: as many nodes, of the same types, with the same edges (each dependency of
 * a node of g paired with a dependency of its pair), within the driver's limits on changes.
 * A conditional node keeps its parameters (type, bodies, handle: the H200 answers
 * CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED otherwise) and its bodies are checked as child
 * graphs are. The error nodes are g's, as the driver names them.
 */
static CUresult update_check(struct sim_graph *xg, struct sim_graph *g,
			     CUgraphExecUpdateResultInfo *info)
{
	struct sim_link *xl = xg->nodes.next;
	struct sim_gnode *gn;
	CUresult r;

	if (xg->nnodes != g->nnodes)
		return update_fail(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, NULL, NULL);
	for_each_node(gn, g)
	{
		gn->twin = sim_entry(xl, struct sim_gnode, link);
		xl = xl->next;
	}
	for_each_node(gn, g)
	{
		struct sim_gnode *xn = gn->twin;
		if (gn->type != xn->type)
			return update_fail(info, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, gn,
					   NULL);
		if (gn->in.n != xn->in.n)
			return update_fail(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, gn,
					   NULL);
		for (size_t i = 0; i < gn->in.n; i++)
			if (!sim_set_has(&xn->in, gn->in.v[i]->twin))
				return update_fail(info,
						   CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, gn,
						   gn->in.v[i]);
		if (gn->type == CU_GRAPH_NODE_TYPE_KERNEL && !same_ctx(gn, xn))
			return update_fail(
			    info, CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE, gn, NULL);
		if (gn->type == CU_GRAPH_NODE_TYPE_MEMCPY && !same_memory_types(gn, xn))
			return update_fail(info, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, gn,
					   NULL);
		if (gn->type == CU_GRAPH_NODE_TYPE_CONDITIONAL &&
		    (gn->u.cond.type != xn->u.cond.type || gn->u.cond.size != xn->u.cond.size ||
		     gn->u.cond.handle != xn->u.cond.handle))
			return update_fail(info, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, gn,
					   NULL);
		for (unsigned i = 0; sim_gnode_sub(gn, i); i++)
			if ((r = update_check(sim_gnode_sub(xn, i), sim_gnode_sub(gn, i), info)))
				return r;
	}
	return CUDA_SUCCESS;
}

struct pending {
	struct sim_gnode *x;   /* the executable's node */
	struct sim_gnode *tmp; /* holding its new parameters */
};

struct pendvec {
	struct pending *v;
	size_t n, cap;
};

static void pend_free(struct pendvec *p)
{
	for (size_t i = 0; i < p->n; i++) {
		sim_gnode_params_free(p->v[i].tmp);
		free(p->v[i].tmp);
	}
	free(p->v);
}

/* Under sim_sched: copies of g's parameters for xg's nodes (update_check() passed). */
static int update_prepare(struct sim_graph *xg, struct sim_graph *g, struct pendvec *p)
{
	struct sim_link *xl = xg->nodes.next;
	struct sim_gnode *gn;

	for_each_node(gn, g)
	{
		struct sim_gnode *xn = sim_entry(xl, struct sim_gnode, link), *tmp;
		xl = xl->next;
		if (gn->type == CU_GRAPH_NODE_TYPE_GRAPH ||
		    gn->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
			for (unsigned i = 0; sim_gnode_sub(gn, i); i++)
				if (update_prepare(sim_gnode_sub(xn, i), sim_gnode_sub(gn, i), p))
					return -1;
			continue;
		}
		if (p->n == p->cap) {
			size_t cap = p->cap ? 2 * p->cap : 16;
			struct pending *v = realloc(p->v, cap * sizeof(*v));
			if (!v)
				return -1;
			p->v = v;
			p->cap = cap;
		}
		if (!(tmp = calloc(1, sizeof(*tmp))))
			return -1;
		tmp->type = gn->type;
		if (sim_gnode_params_copy(tmp, gn, false)) {
			free(tmp);
			return -1;
		}
		p->v[p->n].x = xn;
		p->v[p->n++].tmp = tmp;
	}
	return 0;
}

/* Under sim_sched: update xg from g, all or nothing. */
static CUresult update(struct sim_graph *xg, struct sim_graph *g, CUgraphExecUpdateResultInfo *info)
{
	struct pendvec p = {0};
	CUresult r;

	memset(info, 0, sizeof(*info));
	if ((r = update_check(xg, g, info)))
		return r;
	if (update_prepare(xg, g, &p)) {
		pend_free(&p);
		info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < p.n; i++) {
		typeof(p.v[i].x->u) old = p.v[i].x->u;
		p.v[i].x->u = p.v[i].tmp->u;
		p.v[i].tmp->u = old; /* freed with the temporaries */
	}
	pend_free(&p);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
				      CUgraphExecUpdateResultInfo *resultInfo)
{
	struct sim_gexec *x;
	struct sim_graph *g;
	CUresult r;

	SIM_ENTER();
	if (!resultInfo)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	x = exec_get(hGraphExec);
	g = sim_graph_get(hGraph);
	if (x && g) {
		r = update(x->g, g, resultInfo);
		/* the handles take g's flags and defaults (cuda.h) */
		if (r == CUDA_SUCCESS)
			sim_condvals_update(x->vals, g);
	} else {
		memset(resultInfo, 0, sizeof(*resultInfo));
		resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR;
		r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
				   CUgraphNode *hErrorNode_out,
				   CUgraphExecUpdateResult *updateResult_out)
{
	CUgraphExecUpdateResultInfo info;
	CUresult r;

	if (!hErrorNode_out || !updateResult_out)
		return CUDA_ERROR_INVALID_VALUE;
	r = cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
	*hErrorNode_out = info.errorNode;
	*updateResult_out = info.result;
	return r;
}

/*
 * The child graph of the copy of hNode takes the parameters of childGraph, which must have
 * the same topology and node creation order as the graph the node holds.
 */
CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						    CUgraph childGraph)
{
	CUgraphExecUpdateResultInfo info;
	struct sim_gexec *x;
	struct sim_gnode *n = NULL;
	struct sim_graph *g;
	CUresult r;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	if ((x = exec_get(hGraphExec)))
		n = exec_node(x, hNode);
	g = sim_graph_get(childGraph);
	if (!n || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !g)
		r = CUDA_ERROR_INVALID_VALUE;
	else if ((r = update(n->u.child, g, &info)) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
		r = CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&sim_sched);
	return r;
}
