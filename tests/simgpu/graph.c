/*
 * Graphs and their nodes: a graph is a set of nodes kept in creation order, joined by
 * dependency edges; each node holds its own parameters (a kernel node its launch prepared as
 * for cuLaunchKernel, a memcpy node its CUDA_MEMCPY3D, a child graph node its own clone of the
 * child graph, an event node a reference to its event, a conditional node its bodies). This
 * file builds, queries, edits, clones and prints graphs; capture.c adds nodes from stream
 * capture, gexec.c copies a graph into an executable graph and runs it, and cond.c keeps what
 * is particular to conditional nodes.
 *
 * Node handles are registered in the handle table (SIM_GNODE), so a destroyed node is refused,
 * never touched; an executable's private copy is not registered and cannot be named. All graph
 * state is under sim_sched (graph.h); parameters are checked and built before it is taken,
 * since building a kernel launch may take sim_lock. Only the default edge type exists here:
 * non-zero edge data is refused with CUDA_ERROR_NOT_SUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

static uint64_t last_node_id;  /* under sim_sched */
static uint64_t last_graph_id; /* under sim_sched */

/* --- node sets -------------------------------------------------------------------------- */

int sim_set_reserve(struct sim_nodeset *s, size_t n)
{
	struct sim_gnode **v;
	size_t cap;

	if (n <= s->cap)
		return 0;
	cap = s->cap ? s->cap : 4;
	while (cap < n)
		cap *= 2;
	v = realloc(s->v, cap * sizeof(*v));
	if (!v)
		return -1;
	s->v = v;
	s->cap = cap;
	return 0;
}

bool sim_set_has(const struct sim_nodeset *s, const struct sim_gnode *n)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == n)
			return true;
	return false;
}

/* removes n, keeping the order of the others */
void sim_set_del(struct sim_nodeset *s, const struct sim_gnode *n)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i] == n) {
			memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
			s->n--;
			return;
		}
	}
}

int sim_set_copy(struct sim_nodeset *dst, const struct sim_nodeset *src)
{
	if (sim_set_reserve(dst, src->n))
		return -1;
	if (src->n)
		memcpy(dst->v, src->v, src->n * sizeof(src->v[0]));
	dst->n = src->n;
	return 0;
}

int sim_set_union(struct sim_nodeset *dst, const struct sim_nodeset *src)
{
	if (sim_set_reserve(dst, dst->n + src->n))
		return -1;
	for (size_t i = 0; i < src->n; i++)
		if (!sim_set_has(dst, src->v[i]))
			dst->v[dst->n++] = src->v[i];
	return 0;
}

/* --- graphs and nodes ------------------------------------------------------------------- */

struct sim_graph *sim_graph_new(bool registered)
{
	struct sim_graph *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	sim_list_init(&g->nodes);
	g->registered = registered;
	g->id = __atomic_add_fetch(&last_graph_id, 1, __ATOMIC_RELAXED);
	if (registered && sim_handle_add(g, SIM_GRAPH)) {
		free(g);
		return NULL;
	}
	return g;
}

struct sim_graph *sim_graph_get(CUgraph h)
{
	return sim_handle_is(h, SIM_GRAPH) ? (struct sim_graph *)h : NULL;
}

struct sim_gnode *sim_gnode_get(CUgraphNode h)
{
	return sim_handle_is(h, SIM_GNODE) ? (struct sim_gnode *)h : NULL;
}

/* Under sim_sched. */
void sim_gnode_params_free(struct sim_gnode *n)
{
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		if (n->u.k.op)
			sim_op_free_locked(n->u.k.op);
		n->u.k.op = NULL;
		break;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		free(n->u.copy.owned);
		n->u.copy.owned = NULL;
		break;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (n->u.child)
			sim_graph_free(n->u.child);
		n->u.child = NULL;
		break;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		if (n->u.ev)
			sim_event_put_locked(n->u.ev);
		n->u.ev = NULL;
		break;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		sim_gnode_cond_free(n);
		break;
	default:
		break;
	}
}

/* sim_gnode_free() - under sim_sched, free a node already out of its graph's list. */
void sim_gnode_free(struct sim_gnode *n)
{
	if (!n)
		return;
	if (n->g && n->g->registered)
		sim_handle_del(n);
	sim_gnode_params_free(n);
	free(n->in.v);
	free(n->out.v);
	free(n);
}

/* sim_graph_free() - under sim_sched, free g, its nodes and their child graphs. */
void sim_graph_free(struct sim_graph *g)
{
	while (!sim_list_empty(&g->nodes)) {
		struct sim_gnode *n = sim_entry(g->nodes.next, struct sim_gnode, link);
		sim_list_del(&n->link);
		sim_gnode_free(n);
	}
	if (g->registered)
		sim_handle_del(g);
	free(g->order);
	free(g->handles);
	free(g);
}

/*
 * sim_gnode_insert() - under sim_sched, n (its type and parameters set) becomes the newest
 * node of g, depending on deps (distinct nodes of g). Returns CUDA_SUCCESS or
 * CUDA_ERROR_OUT_OF_MEMORY (n is then still the caller's, out of g).
 */
CUresult sim_gnode_insert(struct sim_graph *g, struct sim_gnode *n, struct sim_gnode *const *deps,
			  size_t ndeps)
{
	if (sim_set_reserve(&n->in, ndeps))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < ndeps; i++)
		if (sim_set_reserve(&deps[i]->out, deps[i]->out.n + 1))
			return CUDA_ERROR_OUT_OF_MEMORY;
	if (g->registered && sim_handle_add(n, SIM_GNODE))
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->g = g;
	n->id = ++last_node_id;
	sim_list_add(&g->nodes, &n->link);
	g->nnodes++;
	/* deps may be a capture's own set (cuStreamGetCaptureInfo): read it before it changes */
	for (size_t i = 0; i < ndeps; i++) {
		n->in.v[n->in.n++] = deps[i];
		deps[i]->out.v[deps[i]->out.n++] = n;
	}
	return CUDA_SUCCESS;
}

/*
 * sim_gnode_params_copy() - under sim_sched, give dst (of src's type) its own copy of src's
 * parameters: a kernel launch, a snapshot, a child graph or conditional bodies (registered as
 * asked), an event reference. Returns 0, or -1 out of memory (dst then holds nothing to free).
 */
int sim_gnode_params_copy(struct sim_gnode *dst, const struct sim_gnode *src, bool registered)
{
	dst->u = src->u;
	switch (src->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		dst->u.k.op = sim_op_clone(src->u.k.op); /* takes no lock for a kernel */
		return dst->u.k.op ? 0 : -1;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (!src->u.copy.owned)
			return 0;
		dst->u.copy.owned = malloc(src->u.copy.owned_n ? src->u.copy.owned_n : 1);
		if (!dst->u.copy.owned)
			return -1;
		memcpy(dst->u.copy.owned, src->u.copy.owned, src->u.copy.owned_n);
		dst->u.copy.p.srcHost = dst->u.copy.owned;
		return 0;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		dst->u.child = sim_graph_clone(src->u.child, registered, dst);
		return dst->u.child ? 0 : -1;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		src->u.ev->refs++;
		return 0;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		return sim_gnode_cond_copy(dst, src, registered);
	default:
		return 0;
	}
}

/*
 * sim_graph_clone() - under sim_sched, a copy of src: the same nodes in the same creation
 * order, each remembering the node it copies (origin), the same edges in the same order, child
 * graphs and conditional bodies cloned in turn, the same conditional handles. registered: the
 * copy and its nodes are handles (cuGraphClone, a child graph node) or not (an executable's
 * copy). parent: the node that will own the copy. Returns NULL when out of memory.
 */
struct sim_graph *sim_graph_clone(struct sim_graph *src, bool registered, struct sim_gnode *parent)
{
	struct sim_graph *g = sim_graph_new(registered);
	struct sim_gnode *s;

	if (!g)
		return NULL;
	g->parent = parent;
	if (sim_graph_handles_copy(g, src))
		goto fail;
	for_each_node(s, src)
	{
		struct sim_gnode *n = calloc(1, sizeof(*n));
		if (!n)
			goto fail;
		n->type = s->type;
		n->disabled = s->disabled;
		n->origin = s->id;
		if (sim_gnode_params_copy(n, s, registered) || sim_set_reserve(&n->in, s->in.n) ||
		    sim_set_reserve(&n->out, s->out.n) ||
		    (registered && sim_handle_add(n, SIM_GNODE))) {
			sim_gnode_free(n); /* n->g is still NULL: no handle to drop */
			goto fail;
		}
		n->g = g;
		n->id = ++last_node_id;
		sim_list_add(&g->nodes, &n->link);
		g->nnodes++;
		s->twin = n;
	}
	for_each_node(s, src)
	{
		struct sim_gnode *n = s->twin;
		for (size_t i = 0; i < s->in.n; i++)
			n->in.v[i] = s->in.v[i]->twin;
		n->in.n = s->in.n;
		for (size_t i = 0; i < s->out.n; i++)
			n->out.v[i] = s->out.v[i]->twin;
		n->out.n = s->out.n;
	}
	return g;
fail:
	sim_graph_free(g);
	return NULL;
}

/* --- graph entry points ----------------------------------------------------------------- */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct sim_graph *g;

	SIM_ENTER();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = sim_graph_new(true);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

/* sim_graph_tree_capturing() - under sim_sched, whether a capture adds nodes to g or below. */
bool sim_graph_tree_capturing(const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	if (sim_graph_capturing(g))
		return true;
	for_each_node(n, g)
	{
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			if (sim_graph_tree_capturing(sub))
				return true;
	}
	return false;
}

/*
 * A graph being captured into (or with a body being captured into), a child graph node's own
 * graph or a conditional node's body cannot be destroyed.
 */
CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	struct sim_graph *g;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(hGraph);
	if (!g || g->parent)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (sim_graph_tree_capturing(g))
		r = CUDA_ERROR_ILLEGAL_STATE;
	else
		sim_graph_free(g);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/* A graph with conditional nodes cannot be cloned (cuda.h; the H200: CUDA_ERROR_NOT_SUPPORTED). */
CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	struct sim_graph *g, *c = NULL;
	bool cond = false;

	SIM_ENTER();
	if (!phGraphClone)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(originalGraph);
	if (g && !(cond = sim_graph_has_cond(g)))
		c = sim_graph_clone(g, true, NULL);
	pthread_mutex_unlock(&sim_sched);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	if (cond)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraphClone = (CUgraph)c;
	return CUDA_SUCCESS;
}

/* The copy of node id in g, looked for in its child graphs too. */
static struct sim_gnode *find_copy(struct sim_graph *g, uint64_t id)
{
	struct sim_gnode *n, *found = NULL;
	struct sim_graph *sub;

	for_each_node(n, g)
	{
		if (n->origin == id)
			return n;
		for (unsigned i = 0; !found && (sub = sim_gnode_sub(n, i)); i++)
			found = find_copy(sub, id);
	}
	return found;
}

CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
					CUgraph hClonedGraph)
{
	struct sim_gnode *o, *n = NULL;
	struct sim_graph *g;

	SIM_ENTER();
	if (!phNode)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	o = sim_gnode_get(hOriginalNode);
	g = sim_graph_get(hClonedGraph);
	if (o && g)
		n = find_copy(g, o->id);
	pthread_mutex_unlock(&sim_sched);
	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	*phNode = (CUgraphNode)n;
	return CUDA_SUCCESS;
}

/*
 * The common answer of the listing calls: with out NULL, the count; else up to *num entries,
 * NULL past the last one, and *num lowered to the count.
 */
static void answer(CUgraphNode *out, size_t *num, size_t i, struct sim_gnode *n)
{
	if (out && i < *num)
		out[i] = (CUgraphNode)n;
}

static void answer_end(CUgraphNode *out, size_t *num, size_t count)
{
	if (!out) {
		*num = count;
		return;
	}
	for (size_t i = count; i < *num; i++)
		out[i] = NULL;
	if (*num > count)
		*num = count;
}

static CUresult list_nodes(CUgraph h, CUgraphNode *nodes, size_t *num, bool roots_only)
{
	struct sim_graph *g;
	struct sim_gnode *n;
	size_t count = 0;

	SIM_ENTER();
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(h);
	if (!g) {
		pthread_mutex_unlock(&sim_sched);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for_each_node(n, g)
	{
		if (roots_only && n->in.n)
			continue;
		answer(nodes, num, count++, n);
	}
	answer_end(nodes, num, count);
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	return list_nodes(hGraph, nodes, numNodes, false);
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	return list_nodes(hGraph, rootNodes, numRootNodes, true);
}

static void zero_edges(CUgraphEdgeData *e, size_t n)
{
	if (e && n)
		memset(e, 0, n * sizeof(*e));
}

static bool default_edges(const CUgraphEdgeData *e, size_t n)
{
	static const CUgraphEdgeData zero;

	for (size_t i = 0; e && i < n; i++)
		if (memcmp(&e[i], &zero, sizeof(zero)))
			return false;
	return true;
}

/* Edges grouped by the node they lead to, in creation order, each group in edge order. */
static CUresult get_edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *edata,
			  size_t *num)
{
	struct sim_graph *g;
	struct sim_gnode *n;
	size_t count = 0;

	SIM_ENTER();
	if (!num || !from != !to || (edata && !from))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(h);
	if (!g) {
		pthread_mutex_unlock(&sim_sched);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for_each_node(n, g)
	{
		for (size_t i = 0; i < n->in.n; i++, count++) {
			answer(from, num, count, n->in.v[i]);
			answer(to, num, count, n);
		}
	}
	if (from) {
		zero_edges(edata, *num);
		for (size_t i = count; i < *num; i++)
			to[i] = NULL;
	}
	answer_end(from, num, count);
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				    CUgraphEdgeData *edgeData, size_t *numEdges)
{
	return get_edges(hGraph, from, to, edgeData, numEdges);
}

CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				 size_t *numEdges)
{
	return get_edges(hGraph, from, to, NULL, numEdges);
}

/* A node's dependencies (out false) or dependents (out true), in the order the edges were made. */
static CUresult node_edges(CUgraphNode h, CUgraphNode *nodes, CUgraphEdgeData *edata, size_t *num,
			   bool out)
{
	const struct sim_nodeset *set;
	struct sim_gnode *n;

	SIM_ENTER();
	if (!num || (edata && !nodes))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	n = sim_gnode_get(h);
	if (!n) {
		pthread_mutex_unlock(&sim_sched);
		return CUDA_ERROR_INVALID_VALUE;
	}
	set = out ? &n->out : &n->in;
	for (size_t i = 0; i < set->n; i++)
		answer(nodes, num, i, set->v[i]);
	if (nodes)
		zero_edges(edata, *num);
	answer_end(nodes, num, set->n);
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
					       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
	return node_edges(hNode, dependencies, edgeData, numDependencies, false);
}

CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
					    size_t *numDependencies)
{
	return node_edges(hNode, dependencies, NULL, numDependencies, false);
}

CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
						 CUgraphEdgeData *edgeData,
						 size_t *numDependentNodes)
{
	return node_edges(hNode, dependentNodes, edgeData, numDependentNodes, true);
}

CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
					      size_t *numDependentNodes)
{
	return node_edges(hNode, dependentNodes, NULL, numDependentNodes, true);
}

/*
 * Under sim_sched: edge i of (from, to) joins two distinct nodes of g, exists (exist) or not,
 * and appears once in the request.
 */
static CUresult edges_check(struct sim_graph *g, const CUgraphNode *from, const CUgraphNode *to,
			    size_t n, bool exist)
{
	for (size_t i = 0; i < n; i++) {
		struct sim_gnode *a = sim_gnode_get(from[i]), *b = sim_gnode_get(to[i]);
		if (!a || !b || a->g != g || b->g != g || a == b)
			return CUDA_ERROR_INVALID_VALUE;
		if (sim_set_has(&b->in, a) != exist)
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; j < i; j++)
			if (from[j] == from[i] && to[j] == to[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult change_edges(CUgraph h, const CUgraphNode *from, const CUgraphNode *to,
			     const CUgraphEdgeData *edata, size_t n, bool add)
{
	struct sim_graph *g;
	CUresult r;

	SIM_ENTER();
	if (n && (!from || !to))
		return CUDA_ERROR_INVALID_VALUE;
	if (!default_edges(edata, n))
		return add ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(h);
	r = g ? edges_check(g, from, to, n, !add) : CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; r == CUDA_SUCCESS && add && i < n; i++) {
		struct sim_gnode *a = (struct sim_gnode *)from[i], *b = (struct sim_gnode *)to[i];
		if (sim_set_reserve(&b->in, b->in.n + n) || sim_set_reserve(&a->out, a->out.n + n))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
		struct sim_gnode *a = (struct sim_gnode *)from[i], *b = (struct sim_gnode *)to[i];
		if (add) {
			b->in.v[b->in.n++] = a;
			a->out.v[a->out.n++] = b;
		} else {
			sim_set_del(&b->in, a);
			sim_set_del(&a->out, b);
		}
	}
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
					   const CUgraphNode *to, const CUgraphEdgeData *edgeData,
					   size_t numDependencies)
{
	return change_edges(hGraph, from, to, edgeData, numDependencies, true);
}

CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
					const CUgraphNode *to, size_t numDependencies)
{
	return change_edges(hGraph, from, to, NULL, numDependencies, true);
}

CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
					      const CUgraphNode *to,
					      const CUgraphEdgeData *edgeData,
					      size_t numDependencies)
{
	return change_edges(hGraph, from, to, edgeData, numDependencies, false);
}

CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from,
					   const CUgraphNode *to, size_t numDependencies)
{
	return change_edges(hGraph, from, to, NULL, numDependencies, false);
}

/*
 * Removes the node and its edges; refused while its graph is captured into (the driver's rule)
 * or a graph the node owns is.
 */
CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
	struct sim_gnode *n;
	struct sim_graph *sub;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	n = sim_gnode_get(hNode);
	if (!n)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (sim_graph_capturing(n->g))
		r = CUDA_ERROR_ILLEGAL_STATE;
	for (unsigned i = 0; r == CUDA_SUCCESS && (sub = sim_gnode_sub(n, i)); i++)
		if (sim_graph_tree_capturing(sub))
			r = CUDA_ERROR_ILLEGAL_STATE;
	if (r == CUDA_SUCCESS) {
		for (size_t i = 0; i < n->in.n; i++)
			sim_set_del(&n->in.v[i]->out, n);
		for (size_t i = 0; i < n->out.n; i++)
			sim_set_del(&n->out.v[i]->in, n);
		sim_list_del(&n->link);
		n->g->nnodes--;
		sim_gnode_free(n);
	}
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!type)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	n = sim_gnode_get(hNode);
	if (n)
		*type = n->type;
	pthread_mutex_unlock(&sim_sched);
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* --- node parameters -------------------------------------------------------------------- */

/*
 * sim_gnode_kernel() - make n a kernel node launching p: func, or kern in ctx (NULL: the
 * current context); the parameter values are copied now, in the layout of the image.
 */
CUresult sim_gnode_kernel(struct sim_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct sim_ctx *ctx = NULL;
	struct sim_func *f;
	struct sim_op *op;
	CUresult r;

	if (!p || (!p->func && !p->kern))
		return CUDA_ERROR_INVALID_VALUE;
	if (p->func) {
		if (sim_func_get(p->func, &f))
			return CUDA_ERROR_INVALID_VALUE;
	} else {
		if (!sim_handle_is(p->kern, SIM_KERNEL))
			return CUDA_ERROR_INVALID_VALUE;
		if ((r = sim_ctx_get(p->ctx, &ctx)) ||
		    (r = sim_func_get_in((CUfunction)p->kern, ctx, &f)))
			return r;
	}
	const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
	const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
	if ((r = sim_kernel_op(f, grid, block, p->sharedMemBytes, p->kernelParams, p->extra, &op)))
		return r;
	n->type = CU_GRAPH_NODE_TYPE_KERNEL;
	n->u.k.op = op;
	n->u.k.func = p->func;
	n->u.k.kern = p->func ? NULL : p->kern;
	n->u.k.ctx = (CUcontext)f->mod->ctx;
	n->u.k.extra = p->extra && !p->kernelParams;
	return CUDA_SUCCESS;
}

/* sim_gnode_memcpy() - make n a memcpy node of p, checked as cuMemcpy3DAsync checks it. */
CUresult sim_gnode_memcpy(struct sim_gnode *n, const CUDA_MEMCPY3D *p, CUcontext hctx)
{
	struct sim_ctx *ctx;
	struct sim_op *ops;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(hctx, &ctx)) || (r = sim_copy3d_ops(p, &ops)))
		return r;
	while (ops) {
		struct sim_op *next = ops->next;
		sim_op_free(ops);
		ops = next;
	}
	n->type = CU_GRAPH_NODE_TYPE_MEMCPY;
	n->u.copy.p = *p;
	n->u.copy.ctx = (CUcontext)ctx;
	return CUDA_SUCCESS;
}

/* sim_gnode_memset() - make n a memset node of p (1, 2 or 4-byte elements, pitched rows). */
CUresult sim_gnode_memset(struct sim_gnode *n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext hctx)
{
	struct sim_ctx *ctx;
	struct sim_op *op;
	CUresult r;

	if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(hctx, &ctx)) ||
	    (r = sim_set_op(p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, &op)))
		return r;
	sim_op_free(op);
	n->type = CU_GRAPH_NODE_TYPE_MEMSET;
	n->u.set.p = *p;
	n->u.set.ctx = (CUcontext)ctx;
	return CUDA_SUCCESS;
}

CUresult sim_gnode_host(struct sim_gnode *n, const CUDA_HOST_NODE_PARAMS *p)
{
	if (!p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	n->type = CU_GRAPH_NODE_TYPE_HOST;
	n->u.host = *p;
	return CUDA_SUCCESS;
}

/* sim_gnode_event() - make n an event record or wait node holding a reference to ev. */
CUresult sim_gnode_event(struct sim_gnode *n, CUgraphNodeType type, CUevent h)
{
	struct sim_event *ev = (struct sim_event *)h;

	if (!sim_handle_is(h, SIM_EVENT))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_sched);
	ev->refs++;
	pthread_mutex_unlock(&sim_sched);
	n->type = type;
	n->u.ev = ev;
	return CUDA_SUCCESS;
}

/* Under sim_sched, the end of every cuGraphAdd*Node: n joins g (NULL: gone) after deps. */
static CUresult add_node_locked(CUgraphNode *ph, struct sim_graph *g, const CUgraphNode *deps,
				size_t ndeps, struct sim_gnode *n)
{
	CUresult r = CUDA_SUCCESS;

	if (!g || (ndeps && !deps))
		r = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; r == CUDA_SUCCESS && i < ndeps; i++) {
		struct sim_gnode *d = sim_gnode_get(deps[i]);
		if (!d || d->g != g)
			r = CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; r == CUDA_SUCCESS && j < i; j++)
			if (deps[j] == deps[i])
				r = CUDA_ERROR_INVALID_VALUE; /* a duplicate dependency */
	}
	if (r == CUDA_SUCCESS)
		r = sim_gnode_insert(g, n, (struct sim_gnode *const *)deps, ndeps);
	if (r == CUDA_SUCCESS)
		*ph = (CUgraphNode)n;
	else
		sim_gnode_free(n);
	return r;
}

/* The end of every cuGraphAdd*Node: n joins h after deps, or is freed. */
static CUresult add_node(CUgraphNode *ph, CUgraph h, const CUgraphNode *deps, size_t ndeps,
			 struct sim_gnode *n)
{
	CUresult r;

	pthread_mutex_lock(&sim_sched);
	r = add_node_locked(ph, sim_graph_get(h), deps, ndeps, n);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/* A fresh node, or NULL: the checks every cuGraphAdd*Node makes before its parameters. */
static CUresult new_node(CUgraphNode *ph, CUgraph h, struct sim_gnode **out)
{
	if (!ph || !sim_graph_get(h))
		return CUDA_ERROR_INVALID_VALUE;
	*out = calloc(1, sizeof(**out));
	return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Frees n after its parameters failed, under sim_sched (a kernel op drops its module). */
static CUresult drop_node(struct sim_gnode *n, CUresult r)
{
	pthread_mutex_lock(&sim_sched);
	sim_gnode_free(n);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	n->type = CU_GRAPH_NODE_TYPE_EMPTY;
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	if ((r = sim_gnode_kernel(n, nodeParams)))
		return drop_node(n, r);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

static void kernel_params_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *p, CUDA_KERNEL_NODE_PARAMS *v2)
{
	memset(v2, 0, sizeof(*v2));
	memcpy(v2, p, sizeof(*p)); /* v2 begins with the fields of v1 */
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS p;

	if (!nodeParams)
		return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies,
					       NULL);
	kernel_params_v2(nodeParams, &p);
	return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	if ((r = sim_gnode_memcpy(n, copyParams, ctx)))
		return drop_node(n, r);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	if ((r = sim_gnode_memset(n, memsetParams, ctx)))
		return drop_node(n, r);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				    const CUgraphNode *dependencies, size_t numDependencies,
				    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	if ((r = sim_gnode_host(n, nodeParams)))
		return drop_node(n, r);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

static CUresult add_event_node(CUgraphNode *ph, CUgraph h, const CUgraphNode *deps, size_t ndeps,
			       CUevent ev, CUgraphNodeType type)
{
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(ph, h, &n)))
		return r;
	if ((r = sim_gnode_event(n, type, ev)))
		return drop_node(n, r);
	return add_node(ph, h, deps, ndeps, n);
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					   const CUgraphNode *dependencies, size_t numDependencies,
					   CUevent event)
{
	return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
			      CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 CUevent event)
{
	return add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
			      CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/*
 * The node gets its own clone of childGraph, made now: later changes to childGraph stay there.
 * A graph with conditional nodes cannot be a child graph (CUDA_ERROR_NOT_SUPPORTED, as cuda.h
 * and the H200 say).
 */
CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					  const CUgraphNode *dependencies, size_t numDependencies,
					  CUgraph childGraph)
{
	struct sim_graph *child;
	struct sim_gnode *n;
	CUresult r;

	SIM_ENTER();
	if ((r = new_node(phGraphNode, hGraph, &n)))
		return r;
	n->type = CU_GRAPH_NODE_TYPE_GRAPH;
	pthread_mutex_lock(&sim_sched);
	child = sim_graph_get(childGraph);
	if (child && sim_graph_has_cond(child))
		r = CUDA_ERROR_NOT_SUPPORTED;
	else if (child && !(n->u.child = sim_graph_clone(child, true, n)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_unlock(&sim_sched);
	if (!n->u.child)
		return drop_node(n, child ? r : CUDA_ERROR_INVALID_VALUE);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, n);
}

/*
 * A conditional node: its bodies are made with it, and nodeParams->conditional.phGraph_out is
 * set to the node's own array of them, valid while the node lives (the driver's
 * "CUDA-owned array").
 */
static CUresult add_cond_node(CUgraphNode *ph, CUgraph h, const CUgraphNode *deps, size_t ndeps,
			      CUDA_CONDITIONAL_NODE_PARAMS *p)
{
	struct sim_graph *g;
	struct sim_gnode *n;
	struct sim_ctx *ctx;
	CUresult r;

	if ((r = sim_ctx_get(p->ctx, &ctx)))
		return r;
	if ((r = new_node(ph, h, &n)))
		return r;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(h);
	r = g ? sim_gnode_cond(g, n, p, (CUcontext)ctx) : CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		sim_gnode_free(n);
	else if ((r = add_node_locked(ph, g, deps, ndeps, n)) == CUDA_SUCCESS)
		p->phGraph_out = n->u.cond.body;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/*
 * cuGraphAddNode_v2: a node of any type simgpu knows, the typed cuGraphAdd*Node doing the work
 * for all but conditional nodes. Edge data other than the default is refused with
 * CUDA_ERROR_NOT_SUPPORTED, as everywhere here; so is a child graph moved into its node
 * (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) and any other node type.
 */
CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
				   const CUgraphNode *dependencies,
				   const CUgraphEdgeData *dependencyData, size_t numDependencies,
				   CUgraphNodeParams *nodeParams)
{
	const CUgraphNode *d = dependencies;
	size_t nd = numDependencies;
	CUgraphNode *ph = phGraphNode;

	SIM_ENTER();
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!default_edges(dependencyData, numDependencies))
		return CUDA_ERROR_NOT_SUPPORTED;
	switch (nodeParams->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		const CUDA_KERNEL_NODE_PARAMS_v3 *k = &nodeParams->kernel;
		CUDA_KERNEL_NODE_PARAMS p = {
		    .func = k->func,
		    .gridDimX = k->gridDimX,
		    .gridDimY = k->gridDimY,
		    .gridDimZ = k->gridDimZ,
		    .blockDimX = k->blockDimX,
		    .blockDimY = k->blockDimY,
		    .blockDimZ = k->blockDimZ,
		    .sharedMemBytes = k->sharedMemBytes,
		    .kernelParams = k->kernelParams,
		    .extra = k->extra,
		    .kern = k->kern,
		    .ctx = k->ctx,
		};
		return cuGraphAddKernelNode_v2(ph, hGraph, d, nd, &p);
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		if (nodeParams->memcpy.flags || nodeParams->memcpy.reserved)
			return CUDA_ERROR_INVALID_VALUE;
		return cuGraphAddMemcpyNode(ph, hGraph, d, nd, &nodeParams->memcpy.copyParams,
					    nodeParams->memcpy.copyCtx);
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		const CUDA_MEMSET_NODE_PARAMS_v2 *m = &nodeParams->memset;
		CUDA_MEMSET_NODE_PARAMS p = {
		    .dst = m->dst,
		    .pitch = m->pitch,
		    .value = m->value,
		    .elementSize = m->elementSize,
		    .width = m->width,
		    .height = m->height,
		};
		return cuGraphAddMemsetNode(ph, hGraph, d, nd, &p, m->ctx);
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		CUDA_HOST_NODE_PARAMS p = {.fn = nodeParams->host.fn,
					   .userData = nodeParams->host.userData};
		return cuGraphAddHostNode(ph, hGraph, d, nd, &p);
	}
	case CU_GRAPH_NODE_TYPE_GRAPH:
		if (nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
			return CUDA_ERROR_NOT_SUPPORTED;
		return cuGraphAddChildGraphNode(ph, hGraph, d, nd, nodeParams->graph.graph);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return cuGraphAddEmptyNode(ph, hGraph, d, nd);
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return cuGraphAddEventWaitNode(ph, hGraph, d, nd, nodeParams->eventWait.event);
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return cuGraphAddEventRecordNode(ph, hGraph, d, nd, nodeParams->eventRecord.event);
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		return add_cond_node(ph, hGraph, d, nd, &nodeParams->conditional);
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* The CUDA 12.2 form, without edge data. */
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				const CUgraphNode *dependencies, size_t numDependencies,
				CUgraphNodeParams *nodeParams)
{
	return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies,
				 nodeParams);
}

/*
 * Looks up node h of the given type under sim_sched, which the caller releases with
 * pthread_mutex_unlock(); NULL (and sim_sched released) when h is not such a node.
 */
static struct sim_gnode *lock_node(CUgraphNode h, CUgraphNodeType type)
{
	struct sim_gnode *n;

	pthread_mutex_lock(&sim_sched);
	n = sim_gnode_get(h);
	if (n && n->type == type)
		return n;
	pthread_mutex_unlock(&sim_sched);
	return NULL;
}

CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(hNode, CU_GRAPH_NODE_TYPE_GRAPH)))
		return CUDA_ERROR_INVALID_VALUE;
	*phGraph = (CUgraph)n->u.child;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

/*
 * The parameters of a kernel node as the driver reads them back: the node's own copies of the
 * argument values, through kernelParams or, when they were last set through `extra`, through
 * an `extra` array of its own.
 */
static void kernel_params_get(struct sim_gnode *n, CUDA_KERNEL_NODE_PARAMS *p)
{
	const struct sim_op *op = n->u.k.op;
	size_t hdr = op->u.k.l.nparams * sizeof(void *);

	memset(p, 0, sizeof(*p));
	p->func = n->u.k.func;
	p->kern = n->u.k.kern;
	p->ctx = n->u.k.ctx;
	if (!p->func && !p->kern) /* captured: the function that was launched */
		p->func = (CUfunction)op->u.k.func;
	p->gridDimX = op->u.k.l.grid[0];
	p->gridDimY = op->u.k.l.grid[1];
	p->gridDimZ = op->u.k.l.grid[2];
	p->blockDimX = op->u.k.l.block[0];
	p->blockDimY = op->u.k.l.block[1];
	p->blockDimZ = op->u.k.l.block[2];
	p->sharedMemBytes = op->u.k.l.shared_mem;
	if (n->u.k.extra) {
		n->u.k.xsize = op->u.k.blk_size - hdr;
		n->u.k.xarg[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
		n->u.k.xarg[1] = (char *)op->u.k.blk + hdr;
		n->u.k.xarg[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
		n->u.k.xarg[3] = &n->u.k.xsize;
		n->u.k.xarg[4] = CU_LAUNCH_PARAM_END;
		p->extra = n->u.k.xarg;
	} else {
		p->kernelParams = (void **)op->u.k.l.params;
	}
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(hNode, CU_GRAPH_NODE_TYPE_KERNEL)))
		return CUDA_ERROR_INVALID_VALUE;
	kernel_params_get(n, p);
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS v2;
	CUresult r;

	if (!p)
		return cuGraphKernelNodeGetParams_v2(hNode, NULL);
	if ((r = cuGraphKernelNodeGetParams_v2(hNode, &v2)))
		return r;
	memcpy(p, &v2, sizeof(*p));
	return CUDA_SUCCESS;
}

/*
 * Replaces the parameters of graph node h (of n->type) with those built in tmp, under
 * sim_sched; tmp's old ones are freed. Returns CUDA_ERROR_INVALID_VALUE when h is not such
 * a node (tmp's are freed).
 */
static CUresult swap_params(CUgraphNode h, struct sim_gnode *tmp)
{
	struct sim_gnode *n;
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_sched);
	n = sim_gnode_get(h);
	if (n && n->type == tmp->type) {
		typeof(n->u) old = n->u;
		n->u = tmp->u;
		tmp->u = old;
	} else {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	sim_gnode_params_free(tmp);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
					       const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if (!sim_gnode_get(hNode))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_gnode_kernel(&tmp, nodeParams)))
		return r;
	return swap_params(hNode, &tmp);
}

CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS p;

	if (!nodeParams)
		return cuGraphKernelNodeSetParams_v2(hNode, NULL);
	kernel_params_v2(nodeParams, &p);
	return cuGraphKernelNodeSetParams_v2(hNode, &p);
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(hNode, CU_GRAPH_NODE_TYPE_MEMCPY)))
		return CUDA_ERROR_INVALID_VALUE;
	*nodeParams = n->u.copy.p;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

/* The node keeps running in its context: the current one is not asked for. */
CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
	struct sim_gnode tmp = {0}, *n;
	CUcontext ctx = NULL;
	CUresult r;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	if ((n = sim_gnode_get(hNode)) && n->type == CU_GRAPH_NODE_TYPE_MEMCPY)
		ctx = n->u.copy.ctx;
	pthread_mutex_unlock(&sim_sched);
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_gnode_memcpy(&tmp, nodeParams, ctx)))
		return r;
	return swap_params(hNode, &tmp);
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(hNode, CU_GRAPH_NODE_TYPE_MEMSET)))
		return CUDA_ERROR_INVALID_VALUE;
	*nodeParams = n->u.set.p;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode,
					    const CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
	struct sim_gnode tmp = {0}, *n;
	CUcontext ctx = NULL;
	CUresult r;

	SIM_ENTER();
	pthread_mutex_lock(&sim_sched);
	if ((n = sim_gnode_get(hNode)) && n->type == CU_GRAPH_NODE_TYPE_MEMSET)
		ctx = n->u.set.ctx;
	pthread_mutex_unlock(&sim_sched);
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_gnode_memset(&tmp, nodeParams, ctx)))
		return r;
	return swap_params(hNode, &tmp);
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(hNode, CU_GRAPH_NODE_TYPE_HOST)))
		return CUDA_ERROR_INVALID_VALUE;
	*nodeParams = n->u.host;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode,
					  const CUDA_HOST_NODE_PARAMS *nodeParams)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = sim_gnode_host(&tmp, nodeParams)))
		return r;
	return swap_params(hNode, &tmp);
}

static CUresult event_get(CUgraphNode h, CUevent *out, CUgraphNodeType type)
{
	struct sim_gnode *n;

	SIM_ENTER();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(n = lock_node(h, type)))
		return CUDA_ERROR_INVALID_VALUE;
	*out = (CUevent)n->u.ev;
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

static CUresult event_set(CUgraphNode h, CUevent ev, CUgraphNodeType type)
{
	struct sim_gnode tmp = {0};
	CUresult r;

	SIM_ENTER();
	if ((r = sim_gnode_event(&tmp, type, ev)))
		return r;
	return swap_params(h, &tmp);
}

CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return event_get(hNode, event_out, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return event_set(hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
	return event_get(hNode, event_out, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event)
{
	return event_set(hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* --- Graphviz --------------------------------------------------------------------------- */

static const char *const type_names[] = {
    [CU_GRAPH_NODE_TYPE_KERNEL] = "KERNEL",
    [CU_GRAPH_NODE_TYPE_MEMCPY] = "MEMCPY",
    [CU_GRAPH_NODE_TYPE_MEMSET] = "MEMSET",
    [CU_GRAPH_NODE_TYPE_HOST] = "HOST",
    [CU_GRAPH_NODE_TYPE_GRAPH] = "GRAPH",
    [CU_GRAPH_NODE_TYPE_EMPTY] = "EMPTY",
    [CU_GRAPH_NODE_TYPE_WAIT_EVENT] = "WAIT_EVENT",
    [CU_GRAPH_NODE_TYPE_EVENT_RECORD] = "EVENT_RECORD",
    [CU_GRAPH_NODE_TYPE_CONDITIONAL] = "CONDITIONAL",
};

static const char *const cond_names[] = {
    [CU_GRAPH_COND_TYPE_IF] = "IF",
    [CU_GRAPH_COND_TYPE_WHILE] = "WHILE",
    [CU_GRAPH_COND_TYPE_SWITCH] = "SWITCH",
};

/* One node's label: its type, then what it does. */
static void dot_label(FILE *f, const struct sim_gnode *n)
{
	const char *t =
	    (unsigned)n->type < sizeof(type_names) / sizeof(type_names[0]) && type_names[n->type]
		? type_names[n->type]
		: "UNKNOWN";

	fprintf(f, "%s\\n", t);
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		const struct sim_launch *l = &n->u.k.op->u.k.l;
		fprintf(f, "%s\\n<<<(%u,%u,%u),(%u,%u,%u),%u>>>", n->u.k.op->u.k.func->ki->name,
			l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
			l->shared_mem);
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		const CUDA_MEMCPY3D *p = &n->u.copy.p;
		fprintf(f, "%zu x %zu x %zu bytes, memory type %d to %d", p->WidthInBytes,
			p->Height, p->Depth, (int)p->srcMemoryType, (int)p->dstMemoryType);
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		const CUDA_MEMSET_NODE_PARAMS *p = &n->u.set.p;
		fprintf(f, "0x%llx: %zu x %zu elements of %u bytes = 0x%x",
			(unsigned long long)p->dst, p->width, p->height, p->elementSize, p->value);
		break;
	}
	case CU_GRAPH_NODE_TYPE_HOST:
		fprintf(f, "fn %p, userData %p", (void *)(uintptr_t)n->u.host.fn,
			n->u.host.userData);
		break;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		fprintf(f, "event %p", (void *)n->u.ev);
		break;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		fprintf(f, "%s, handle %llu, %u bod%s", cond_names[n->u.cond.type],
			(unsigned long long)n->u.cond.handle, n->u.cond.size,
			n->u.cond.size == 1 ? "y" : "ies");
		break;
	default:
		break;
	}
}

static void dot_graph(FILE *f, const struct sim_graph *g, int depth)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for_each_node(n, g)
	{
		fprintf(f, "%*sn%llu [label=\"", depth * 4, "", (unsigned long long)n->id);
		dot_label(f, n);
		fprintf(f, "\"];\n");
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++) {
			/* a cluster per graph: n<id> for a child graph, n<id>_<i> for body i */
			fprintf(f, "%*ssubgraph cluster_n%llu", depth * 4, "",
				(unsigned long long)n->id);
			if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
				fprintf(f, "_%u", i);
			fprintf(f, " {\n");
			if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
				fprintf(f, "%*slabel=\"body %u of n%llu\";\n", depth * 4 + 4, "", i,
					(unsigned long long)n->id);
			else
				fprintf(f, "%*slabel=\"child graph of n%llu\";\n", depth * 4 + 4,
					"", (unsigned long long)n->id);
			dot_graph(f, sub, depth + 1);
			fprintf(f, "%*s}\n", depth * 4, "");
		}
	}
	for_each_node(n, g) for (size_t i = 0; i < n->in.n; i++)
	    fprintf(f, "%*sn%llu -> n%llu;\n", depth * 4, "", (unsigned long long)n->in.v[i]->id,
		    (unsigned long long)n->id);
}

/*
 * A Graphviz digraph of the graph: every node (n<id>, labelled with its type and, for a
 * kernel, the function's name and launch shape), every edge, child graphs as clusters. The
 * flags only choose detail in the driver; every node is always printed in full here.
 */
CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
	struct sim_graph *g;
	CUresult r = CUDA_SUCCESS;
	FILE *f;

	(void)flags;
	SIM_ENTER();
	if (!path || !sim_graph_get(hGraph))
		return CUDA_ERROR_INVALID_VALUE;
	f = fopen(path, "w");
	if (!f)
		return CUDA_ERROR_OPERATING_SYSTEM;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(hGraph);
	if (g) {
		fprintf(f, "digraph \"graph_%p\" {\n    node [shape=box];\n", (void *)g);
		dot_graph(f, g, 1);
		fprintf(f, "}\n");
	} else {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&sim_sched);
	if (fclose(f) && r == CUDA_SUCCESS)
		r = CUDA_ERROR_OPERATING_SYSTEM;
	return r;
}
