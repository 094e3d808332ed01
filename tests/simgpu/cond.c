/*
 * Conditional nodes (CU_GRAPH_NODE_TYPE_CONDITIONAL): their handles, their bodies, the rules a
 * graph holding them must keep, and how they run.
 *
 * A handle is made on a graph (cuGraphConditionalHandleCreate) and numbered 1, 2, ... across
 * that graph's tree (the root graph and every body below it), as the driver numbers them. A
 * kernel names a handle by that value alone (cudaGraphSetConditional), so the value means
 * something only inside a launch of an executable graph: each executable has a table of its
 * handles' values (struct sim_condvals), zero at instantiation; at the start of each launch a
 * CU_GRAPH_COND_ASSIGN_DEFAULT handle takes its default, any other keeps its value from the
 * last launch and ignores its default (what an H200 with driver 580 does; the programming
 * guide leaves that value undefined). Every kernel operation of a launch holds a reference to
 * the table, and sim_graph_set_conditional(), which the C twins call where the device code
 * calls cudaGraphSetConditional, writes into the table of the kernel running on this thread; a
 * kernel run outside a graph faults, as on the H200 (CUDA_ERROR_ILLEGAL_ADDRESS).
 *
 * A conditional node runs as one operation (SIM_OP_COND) holding the operations of each body,
 * built at the launch like the rest of the graph's. The stream's thread reads the value when it
 * reaches the node and runs the chosen body's operations there, in their order, again and
 * again for a WHILE node. Bodies hold only kernels, copies, memsets, empty nodes, child graphs
 * and conditional nodes (checked at instantiation, as the driver checks), so their operations
 * wait for nothing and record nothing.
 *
 * The driver's other rules, measured on the H200: a graph with conditional nodes cannot be
 * cloned nor become a child graph, and may have one executable at a time; a graph one of whose
 * handles no node uses does not instantiate; a handle serves one node; a body can be neither
 * destroyed nor instantiated by itself. This file never takes sim_lock.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

struct sim_condval {
	CUgraphConditionalHandle handle;
	unsigned dflt, flags; /* under sim_sched */
	unsigned value;	      /* atomic: kernels write it on stream threads */
};

struct sim_condvals {
	int refs; /* atomic: the executable and each operation of its launches */
	size_t n;
	struct sim_condval v[];
};

/* what a SIM_OP_COND operation does */
struct sim_cond {
	struct sim_condvals *vals; /* a reference */
	/* a launch's first operation: the ASSIGN_DEFAULT handles take the defaults of snap */
	bool reset;
	struct sim_condval *snap; /* vals->n entries, as they were when the launch was queued */
	/* otherwise a conditional node: */
	CUgraphConditionalHandle handle;
	CUgraphConditionalNodeType type;
	unsigned nbodies;
	struct sim_opvec *body; /* nbodies lists of operations, owned */
};

static __thread struct sim_condvals *running; /* the values of the kernel running here */

/* --- graph trees --------------------------------------------------------------------------- */

/* sim_graph_root() - the graph at the top of g's tree (g itself unless a node owns it). */
struct sim_graph *sim_graph_root(struct sim_graph *g)
{
	while (g->parent && g->parent->g)
		g = g->parent->g;
	return g;
}

/* sim_graph_has_cond() - whether g or a graph below it holds a conditional node. */
bool sim_graph_has_cond(const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for_each_node(n, g)
	{
		if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
			return true;
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			if (sim_graph_has_cond(sub))
				return true;
	}
	return false;
}

/* whether a node is owned by a conditional node, directly or through child graphs */
static bool in_body(const struct sim_graph *g)
{
	for (; g->parent; g = g->parent->g) {
		if (g->parent->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
			return true;
		if (!g->parent->g)
			break;
	}
	return false;
}

/* The handle h made on g or on a graph above it, or NULL. */
static struct sim_cond_handle *handle_find_up(struct sim_graph *g, CUgraphConditionalHandle h)
{
	for (; g; g = g->parent ? g->parent->g : NULL)
		for (size_t i = 0; i < g->nhandles; i++)
			if (g->handles[i].value == h)
				return &g->handles[i];
	return NULL;
}

/* Whether a conditional node of g's tree, from g down, uses handle h. */
static bool handle_used(const struct sim_graph *g, CUgraphConditionalHandle h)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for_each_node(n, g)
	{
		if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && n->u.cond.handle == h)
			return true;
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			if (handle_used(sub, h))
				return true;
	}
	return false;
}

/* sim_graph_handles_copy() - dst gets src's handles. Returns 0, or -1 out of memory. */
int sim_graph_handles_copy(struct sim_graph *dst, const struct sim_graph *src)
{
	dst->last_handle = src->last_handle;
	if (!src->nhandles)
		return 0;
	dst->handles = malloc(src->nhandles * sizeof(*dst->handles));
	if (!dst->handles)
		return -1;
	memcpy(dst->handles, src->handles, src->nhandles * sizeof(*dst->handles));
	dst->nhandles = src->nhandles;
	return 0;
}

/* --- handles and nodes --------------------------------------------------------------------- */

/*
 * The handle's value is the next number of hGraph's tree. ctx NULL is the current context.
 * Returns CUDA_ERROR_INVALID_VALUE for flags other than CU_GRAPH_COND_ASSIGN_DEFAULT (as the
 * H200 does) or a bad graph, a context error for a bad ctx.
 */
CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
						CUgraph hGraph, CUcontext ctx,
						unsigned int defaultLaunchValue, unsigned int flags)
{
	struct sim_cond_handle *v;
	struct sim_graph *g;
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!pHandle_out || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(ctx, &c)))
		return r;
	pthread_mutex_lock(&sim_sched);
	g = sim_graph_get(hGraph);
	if (!g) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	v = realloc(g->handles, (g->nhandles + 1) * sizeof(*v));
	if (!v) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	g->handles = v;
	v = &g->handles[g->nhandles++];
	v->value = ++sim_graph_root(g)->last_handle;
	v->dflt = defaultLaunchValue;
	v->flags = flags;
	v->ctx = (CUcontext)c;
	*pHandle_out = v->value;
out:
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/*
 * sim_gnode_cond() - under sim_sched, make n (not yet in a graph) a conditional node of p
 * that will join g, in context ctx (resolved by the caller), with p->size empty bodies it
 * owns. The handle must have been made on g or above it and serve no other node.
 * Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE (type, size, handle, context) or
 * CUDA_ERROR_OUT_OF_MEMORY; on failure n holds nothing.
 */
CUresult sim_gnode_cond(struct sim_graph *g, struct sim_gnode *n, CUDA_CONDITIONAL_NODE_PARAMS *p,
			CUcontext ctx)
{
	struct sim_cond_handle *h;
	unsigned max;
	CUgraph *body;

	switch (p->type) {
	case CU_GRAPH_COND_TYPE_IF:
		max = 2; /* the second body: the ELSE */
		break;
	case CU_GRAPH_COND_TYPE_WHILE:
		max = 1;
		break;
	case CU_GRAPH_COND_TYPE_SWITCH:
		max = UINT_MAX;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!p->size || p->size > max)
		return CUDA_ERROR_INVALID_VALUE;
	h = handle_find_up(g, p->handle);
	if (!h || h->ctx != ctx || handle_used(sim_graph_root(g), p->handle))
		return CUDA_ERROR_INVALID_VALUE;
	body = calloc(p->size, sizeof(*body));
	if (!body)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (unsigned i = 0; i < p->size; i++) {
		struct sim_graph *b = sim_graph_new(true);
		if (!b) {
			while (i--)
				sim_graph_free((struct sim_graph *)body[i]);
			free(body);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		b->parent = n;
		body[i] = (CUgraph)b;
	}
	n->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	n->u.cond.handle = p->handle;
	n->u.cond.type = p->type;
	n->u.cond.size = p->size;
	n->u.cond.ctx = ctx;
	n->u.cond.body = body;
	return CUDA_SUCCESS;
}

/*
 * sim_gnode_cond_copy() - under sim_sched, dst (whose u is a copy of src's) gets its own clones
 * of src's bodies, registered as asked. Returns 0, or -1 out of memory (dst holds nothing).
 */
int sim_gnode_cond_copy(struct sim_gnode *dst, const struct sim_gnode *src, bool registered)
{
	unsigned size = src->u.cond.size;
	CUgraph *body = calloc(size, sizeof(*body));

	dst->u.cond.body = NULL;
	if (!body)
		return -1;
	for (unsigned i = 0; i < size; i++) {
		struct sim_graph *b =
		    sim_graph_clone((struct sim_graph *)src->u.cond.body[i], registered, dst);
		if (!b) {
			while (i--)
				sim_graph_free((struct sim_graph *)body[i]);
			free(body);
			return -1;
		}
		body[i] = (CUgraph)b;
	}
	dst->u.cond.body = body;
	return 0;
}

/* sim_gnode_cond_free() - under sim_sched, free n's bodies. */
void sim_gnode_cond_free(struct sim_gnode *n)
{
	if (!n->u.cond.body)
		return;
	for (unsigned i = 0; i < n->u.cond.size; i++)
		if (n->u.cond.body[i])
			sim_graph_free((struct sim_graph *)n->u.cond.body[i]);
	free(n->u.cond.body);
	n->u.cond.body = NULL;
}

/* --- instantiation ------------------------------------------------------------------------- */

/*
 * Under sim_sched: whether the nodes of g may run where they are; body says that g is (or is
 * below) a conditional body, where only kernels, copies between device or host memory,
 * memsets, empty nodes, child graphs and conditional nodes are allowed.
 */
static bool nodes_allowed(const struct sim_graph *g, bool body)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for_each_node(n, g)
	{
		if (body) {
			switch (n->type) {
			case CU_GRAPH_NODE_TYPE_KERNEL:
			case CU_GRAPH_NODE_TYPE_MEMSET:
			case CU_GRAPH_NODE_TYPE_EMPTY:
			case CU_GRAPH_NODE_TYPE_GRAPH:
			case CU_GRAPH_NODE_TYPE_CONDITIONAL:
				break;
			case CU_GRAPH_NODE_TYPE_MEMCPY:
				if (n->u.copy.p.srcMemoryType == CU_MEMORYTYPE_ARRAY ||
				    n->u.copy.p.dstMemoryType == CU_MEMORYTYPE_ARRAY)
					return false;
				break;
			default:
				return false;
			}
		}
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			if (!nodes_allowed(sub, body || n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL))
				return false;
	}
	return true;
}

/* Under sim_sched: whether every handle made in the tree below top serves a node of it. */
static bool handles_all_used(const struct sim_graph *top, const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for (size_t i = 0; i < g->nhandles; i++)
		if (!handle_used(top, g->handles[i].value))
			return false;
	for_each_node(n, g)
	{
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			if (!handles_all_used(top, sub))
				return false;
	}
	return true;
}

/*
 * sim_cond_instantiable() - under sim_sched, whether g may be instantiated as far as
 * conditional nodes go. Returns CUDA_SUCCESS, CUDA_ERROR_NOT_SUPPORTED (g is a body, or an
 * executable of g with conditional nodes exists) or CUDA_ERROR_INVALID_VALUE (a node a body
 * cannot hold, a handle no node uses), as the H200 answers.
 */
CUresult sim_cond_instantiable(struct sim_graph *g)
{
	if (in_body(g))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (g->nexec && sim_graph_has_cond(g))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!nodes_allowed(g, false) || !handles_all_used(g, g))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* --- values -------------------------------------------------------------------------------- */

static size_t count_handles(const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;
	size_t count = g->nhandles;

	for_each_node(n, g)
	{
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			count += count_handles(sub);
	}
	return count;
}

static void fill_handles(struct sim_condvals *vals, const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for (size_t i = 0; i < g->nhandles; i++) {
		struct sim_condval *v = &vals->v[vals->n++];
		v->handle = g->handles[i].value;
		v->dflt = g->handles[i].dflt;
		v->flags = g->handles[i].flags;
		v->value = 0;
	}
	for_each_node(n, g)
	{
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			fill_handles(vals, sub);
	}
}

/*
 * sim_condvals_new() - under sim_sched, the value table of an executable's copy xg: every
 * handle of its tree, valued 0. *out is NULL when the tree has no handle.
 * Returns 0, or -1 out of memory.
 */
int sim_condvals_new(struct sim_graph *xg, struct sim_condvals **out)
{
	size_t n = count_handles(xg);
	struct sim_condvals *vals;

	*out = NULL;
	if (!n)
		return 0;
	vals = calloc(1, sizeof(*vals) + n * sizeof(vals->v[0]));
	if (!vals)
		return -1;
	vals->refs = 1;
	fill_handles(vals, xg);
	*out = vals;
	return 0;
}

static struct sim_condval *val_find(struct sim_condvals *vals, CUgraphConditionalHandle h)
{
	for (size_t i = 0; vals && i < vals->n; i++)
		if (vals->v[i].handle == h)
			return &vals->v[i];
	return NULL;
}

static void update_handles(struct sim_condvals *vals, const struct sim_graph *g)
{
	struct sim_gnode *n;
	struct sim_graph *sub;

	for (size_t i = 0; i < g->nhandles; i++) {
		struct sim_condval *v = val_find(vals, g->handles[i].value);
		if (v) {
			v->dflt = g->handles[i].dflt;
			v->flags = g->handles[i].flags;
		}
	}
	for_each_node(n, g)
	{
		for (unsigned i = 0; (sub = sim_gnode_sub(n, i)); i++)
			update_handles(vals, sub);
	}
}

/*
 * sim_condvals_update() - under sim_sched, cuGraphExecUpdate: the handles take the flags and
 * defaults of g's handles of the same value; their values stay.
 */
void sim_condvals_update(struct sim_condvals *vals, struct sim_graph *g)
{
	if (vals)
		update_handles(vals, g);
}

void sim_condvals_get(struct sim_condvals *vals)
{
	if (vals)
		__atomic_add_fetch(&vals->refs, 1, __ATOMIC_RELAXED);
}

void sim_condvals_put(struct sim_condvals *vals)
{
	if (vals && __atomic_sub_fetch(&vals->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(vals);
}

/* --- operations ---------------------------------------------------------------------------- */

/*
 * sim_cond_reset_op() - under sim_sched, the first operation of a launch: the
 * CU_GRAPH_COND_ASSIGN_DEFAULT handles of vals take their defaults (as they are now: an update
 * changes only later launches). *out is NULL when vals has no such handle.
 * Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY.
 */
CUresult sim_cond_reset_op(struct sim_condvals *vals, struct sim_op **out)
{
	struct sim_cond *c;
	bool any = false;

	*out = NULL;
	for (size_t i = 0; vals && i < vals->n; i++)
		any |= (vals->v[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT) != 0;
	if (!any)
		return CUDA_SUCCESS;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->snap = malloc(vals->n * sizeof(*c->snap))) ||
	    !(*out = sim_op_new(SIM_OP_COND))) {
		if (c)
			free(c->snap);
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(c->snap, vals->v, vals->n * sizeof(*c->snap));
	c->reset = true;
	c->vals = vals;
	sim_condvals_get(vals);
	(*out)->u.cond.c = c;
	return CUDA_SUCCESS;
}

/* sim_opvec_free() - free the operations of v and its array. */
void sim_opvec_free(struct sim_opvec *v, bool locked)
{
	for (size_t i = 0; i < v->n; i++) {
		if (locked)
			sim_op_free_locked(v->v[i]);
		else
			sim_op_free(v->v[i]);
	}
	free(v->v);
	v->v = NULL;
	v->n = v->cap = 0;
}

/*
 * sim_cond_node_op() - under sim_sched, the operation of conditional node n of a launch whose
 * values are vals: bodies holds the operations of each of its n->u.cond.size bodies and is
 * taken in every case. Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY.
 */
CUresult sim_cond_node_op(const struct sim_gnode *n, struct sim_condvals *vals,
			  struct sim_opvec *bodies, struct sim_op **out)
{
	struct sim_cond *c = calloc(1, sizeof(*c));

	if (!c || !(*out = sim_op_new(SIM_OP_COND))) {
		for (unsigned i = 0; i < n->u.cond.size; i++)
			sim_opvec_free(&bodies[i], true);
		free(bodies);
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->vals = vals;
	sim_condvals_get(vals);
	c->handle = n->u.cond.handle;
	c->type = n->u.cond.type;
	c->nbodies = n->u.cond.size;
	c->body = bodies;
	(*out)->u.cond.c = c;
	return CUDA_SUCCESS;
}

/* sim_cond_free() - free what a SIM_OP_COND operation holds. */
void sim_cond_free(struct sim_cond *c, bool locked)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->nbodies; i++)
		sim_opvec_free(&c->body[i], locked);
	free(c->body);
	free(c->snap);
	sim_condvals_put(c->vals);
	free(c);
}

/* The body a conditional node runs for value v, or -1 for none. */
static int pick(const struct sim_cond *c, unsigned v)
{
	switch (c->type) {
	case CU_GRAPH_COND_TYPE_IF:
		return v ? 0 : c->nbodies == 2 ? 1 : -1;
	case CU_GRAPH_COND_TYPE_WHILE:
		return v ? 0 : -1;
	default: /* SWITCH */
		return v < c->nbodies ? (int)v : -1;
	}
}

static bool faulted(const struct sim_stream *s)
{
	bool f;

	pthread_mutex_lock(&sim_sched);
	f = s->ctx->sticky != CUDA_SUCCESS;
	pthread_mutex_unlock(&sim_sched);
	return f;
}

/*
 * sim_cond_run() - on s's thread, without sim_sched: do what SIM_OP_COND operation c says. A
 * WHILE node stops early once the context has faulted (its body would never end the loop).
 */
void sim_cond_run(struct sim_stream *s, struct sim_cond *c)
{
	struct sim_condval *v;
	int b;

	if (c->reset) {
		for (size_t i = 0; i < c->vals->n; i++)
			if (c->snap[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
				__atomic_store_n(&c->vals->v[i].value, c->snap[i].dflt,
						 __ATOMIC_RELEASE);
		return;
	}
	v = val_find(c->vals, c->handle);
	if (!v) /* cannot happen: instantiation collected every handle of the tree */
		return;
	while ((b = pick(c, __atomic_load_n(&v->value, __ATOMIC_ACQUIRE))) >= 0) {
		for (size_t i = 0; i < c->body[b].n; i++)
			sim_op_run(s, c->body[b].v[i]);
		if (c->type != CU_GRAPH_COND_TYPE_WHILE || faulted(s))
			break;
	}
}

/* sim_cond_scope() - the values the kernel about to run on this thread sets (NULL: none). */
void sim_cond_scope(struct sim_condvals *vals)
{
	running = vals;
}

void sim_graph_set_conditional(unsigned long long handle, unsigned value)
{
	struct sim_condval *v = val_find(running, handle);

	if (!v) {
		sim_kernel_fault();
		return;
	}
	__atomic_store_n(&v->value, value, __ATOMIC_RELEASE);
}
