/*
 * Graphs inside simgpu: the structures graph.c (graphs and their nodes), capture.c (stream
 * capture) and gexec.c (executable graphs) share. Private to those three files.
 *
 * Every field here is under sim_sched: captures add nodes from inside sim_enqueue(), which
 * holds it, so every graph entry point takes it too.
 */
#ifndef SIMGPU_GRAPH_H
#define SIMGPU_GRAPH_H

#include "sim.h"

struct sim_graph {
	struct sim_link nodes; /* struct sim_gnode.link, in creation order */
	size_t nnodes;
	struct sim_gnode *parent; /* a child graph node's own graph: that node owns it */
	bool registered;	  /* a handle, as are its nodes (not an executable's copy) */
	struct sim_gnode **order; /* an executable's copy: the launch order (gexec.c) */
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
	} u;
};

/* every node n of graph g, in creation order */
#define for_each_node(n, g)                                                                        \
	for (struct sim_link *l_ = (g)->nodes.next;                                                \
	     l_ != &(g)->nodes && ((n) = sim_entry(l_, struct sim_gnode, link)); l_ = l_->next)

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

/* capture.c: whether g is being captured into (it may then neither go nor lose nodes) */
bool sim_graph_capturing(const struct sim_graph *g);
/* capture.c: a graph launched on a capturing stream becomes a child graph node */
CUresult sim_capture_graph(struct sim_stream *s, struct sim_graph *g);

#endif
