/*
 * Graphs inside simgpu: the structures graph.c (graphs and their nodes), capture.c (stream
 * capture), gexec.c (executable graphs) and cond.c (conditional nodes) share. Private to
 * those files.
 *
 * Every field here is under sim_sched: captures add nodes from inside sim_enqueue(), which
 * holds it, so every graph entry point takes it too.
 */
#ifndef SIMGPU_GRAPH_H
#define SIMGPU_GRAPH_H

#include "sim.h"

/* a conditional handle (cond.c), made on a graph for one conditional node there or below */
struct sim_cond_handle {
	CUgraphConditionalHandle value; /* 1, 2, ... in each graph tree, as the driver numbers */
	unsigned dflt;			/* defaultLaunchValue */
	unsigned flags;			/* CU_GRAPH_COND_ASSIGN_DEFAULT or 0 */
	CUcontext ctx;
};

struct sim_graph {
	struct sim_link nodes; /* struct sim_gnode.link, in creation order */
	size_t nnodes;
	struct sim_gnode *parent; /* a child graph's or a conditional body's node, which owns it */
	bool registered;	  /* a handle, as are its nodes (not an executable's copy) */
	struct sim_gnode **order; /* an executable's copy: the launch order (gexec.c) */
	uint64_t id;		  /* unique in the process, never reused */
	struct sim_cond_handle *handles; /* the conditional handles made on this graph */
	size_t nhandles;
	CUgraphConditionalHandle last_handle; /* a tree's root: the last handle value it gave */
	int nexec; /* a root with conditional nodes: its live executables (the driver allows one) */
};

struct sim_gnode {
	struct sim_link link; /* in g->nodes */
	struct sim_graph *g;  /* NULL until inserted */
	uint64_t id;	      /* unique in the process, never reused */
	uint64_t origin;      /* a clone's or an executable's copy: the id of the node copied */
	CUgraphNodeType type;
	bool disabled;		    /* an executable's copy: runs as an empty node */
	struct sim_nodeset in, out; /* dependencies and dependents, in the order edges were made */
	struct sim_gnode *twin;	    /* scratch: the paired node of a clone or an update */
	size_t pending;		    /* scratch: dependencies not yet ordered (gexec.c) */
	union {
		struct {
			struct sim_op *op; /* the launch, ready to be cloned onto a stream */
			CUfunction func;   /* as set: func, or kern in ctx */
			CUkernel kern;
			CUcontext ctx;
			bool extra; /* set through `extra`: its parameters are read back so */
			void *xarg[5];
			size_t xsize;
		} k;
		struct {
			CUDA_MEMCPY3D p;
			CUcontext ctx;
			void *owned; /* a captured copy's snapshot of a pageable source (srcHost) */
			size_t owned_n;
		} copy;
		struct {
			CUDA_MEMSET_NODE_PARAMS p;
			CUcontext ctx;
		} set;
		CUDA_HOST_NODE_PARAMS host;
		struct sim_graph *child; /* owned: the node's own clone */
		struct sim_event *ev;	 /* a reference */
		struct {
			CUgraphConditionalHandle handle;
			CUgraphConditionalNodeType type;
			unsigned size;
			CUcontext ctx;
			/* size bodies (struct sim_graph), owned: what cuGraphAddNode hands out */
			CUgraph *body;
		} cond;
	} u;
};

/* a list of operations, built under sim_sched (gexec.c, cond.c) */
struct sim_opvec {
	struct sim_op **v;
	size_t n, cap;
};

/* every node n of graph g, in creation order */
#define for_each_node(n, g)                                                                        \
	for (struct sim_link *l_ = (g)->nodes.next;                                                \
	     l_ != &(g)->nodes && ((n) = sim_entry(l_, struct sim_gnode, link)); l_ = l_->next)

/*
 * The graphs node n owns, i from 0: a child graph node's graph, a conditional node's bodies;
 * NULL past the last one.
 */
static inline struct sim_graph *sim_gnode_sub(const struct sim_gnode *n, unsigned i)
{
	if (n->type == CU_GRAPH_NODE_TYPE_GRAPH)
		return i == 0 ? n->u.child : NULL;
	if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
		return i < n->u.cond.size ? (struct sim_graph *)n->u.cond.body[i] : NULL;
	return NULL;
}

/* node sets: 0, or -1 when out of memory */
int sim_set_reserve(struct sim_nodeset *s, size_t n);
bool sim_set_has(const struct sim_nodeset *s, const struct sim_gnode *n);
void sim_set_del(struct sim_nodeset *s, const struct sim_gnode *n);
int sim_set_copy(struct sim_nodeset *dst, const struct sim_nodeset *src);
int sim_set_union(struct sim_nodeset *dst, const struct sim_nodeset *src);

struct sim_graph *sim_graph_new(bool registered);
void sim_graph_free(struct sim_graph *g);
struct sim_graph *sim_graph_clone(struct sim_graph *src, bool registered, struct sim_gnode *parent);
struct sim_graph *sim_graph_get(CUgraph h); /* a live graph handle, or NULL */
struct sim_gnode *sim_gnode_get(CUgraphNode h);
CUresult sim_gnode_insert(struct sim_graph *g, struct sim_gnode *n, struct sim_gnode *const *deps,
			  size_t ndeps);
void sim_gnode_free(struct sim_gnode *n);

/* parameters: building them (outside sim_sched), copying and dropping them (under it) */
CUresult sim_gnode_kernel(struct sim_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p);
CUresult sim_gnode_memcpy(struct sim_gnode *n, const CUDA_MEMCPY3D *p, CUcontext ctx);
CUresult sim_gnode_memset(struct sim_gnode *n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx);
CUresult sim_gnode_host(struct sim_gnode *n, const CUDA_HOST_NODE_PARAMS *p);
CUresult sim_gnode_event(struct sim_gnode *n, CUgraphNodeType type, CUevent ev);
int sim_gnode_params_copy(struct sim_gnode *dst, const struct sim_gnode *src, bool registered);
void sim_gnode_params_free(struct sim_gnode *n);

/* graph.c: whether g or a graph below it is being captured into (it may then not go) */
bool sim_graph_tree_capturing(const struct sim_graph *g);

/* capture.c: whether g is being captured into (it may then neither go nor lose nodes) */
bool sim_graph_capturing(const struct sim_graph *g);
/* capture.c: a graph launched on a capturing stream becomes a child graph node */
CUresult sim_capture_graph(struct sim_stream *s, struct sim_graph *g);

/* --- conditional nodes (cond.c), under sim_sched -------------------------------------------- */

struct sim_graph *sim_graph_root(struct sim_graph *g);
bool sim_graph_has_cond(const struct sim_graph *g);
CUresult sim_gnode_cond(struct sim_graph *g, struct sim_gnode *n, CUDA_CONDITIONAL_NODE_PARAMS *p,
			CUcontext ctx);
int sim_gnode_cond_copy(struct sim_gnode *dst, const struct sim_gnode *src, bool registered);
void sim_gnode_cond_free(struct sim_gnode *n);
int sim_graph_handles_copy(struct sim_graph *dst, const struct sim_graph *src);
CUresult sim_cond_instantiable(struct sim_graph *g);
int sim_condvals_new(struct sim_graph *xg, struct sim_condvals **out);
void sim_condvals_update(struct sim_condvals *vals, struct sim_graph *g);
CUresult sim_cond_reset_op(struct sim_condvals *vals, struct sim_op **out);
CUresult sim_cond_node_op(const struct sim_gnode *n, struct sim_condvals *vals,
			  struct sim_opvec *bodies, struct sim_op **out);
void sim_opvec_free(struct sim_opvec *v, bool locked);

#endif
