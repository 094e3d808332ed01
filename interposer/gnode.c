/*
 * Graphs built node by node (docs/architecture.md, "Graphs built node by node"): cuGraphAdd*Node,
 * the node queries and parameter calls, edges, clones, executable-graph updates, and the
 * dependency lists of stream captures.
 *
 * Nodes are client objects. Each graph keeps its nodes here in creation order with their
 * dependencies and the parameters they were given, so the queries cost no round trip; the
 * worker keeps the driver's node under the same id within the same graph (server/exec_gnode.c).
 * A graph the client did not build (captured, or a child graph node's copy) is listed by the
 * worker when first asked (MSG_GRAPH_NODES) and its nodes get ids then (MSG_GRAPH_BIND); their
 * parameters stay unknown here.
 *
 * A kernel, memcpy, memset or host node is described by the frames the same stream call would
 * send: the call runs as usual on a stand-in stream of its context (id RGPU_NODE_STREAM, which
 * looks captured to the rest of the interposer, so its rules for captured work hold), while
 * the recorder below keeps its work frames instead of sending them; MSG_GRAPH_NODE carries
 * them, and the worker captures them into the graph.
 *
 * A memcpy node's host side cannot be reached by the worker's GPU. It is replaced by a scratch
 * buffer in the window, and every launch of an executable graph moves the host side: host to
 * scratch on the launch stream before the launch, scratch to host after it (ip_hcopy). The
 * host memory is therefore read when the launch is queued and written when the launch's stream
 * gets there, which is what a program sees unless a host node of the same graph reads a
 * device-to-host node's bytes or writes a host-to-device node's (documented).
 *
 * Graph memory nodes (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode) are empty nodes on the
 * worker: the allocation is made here from the window when the node is added, so its address is
 * the same on every server, and it is freed with its graph unless an exec was made from it.
 */
#define LOG_PREFIX "rgpu: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "ip_entries.h"
#include "rgpu/log.h"
#include "rgpu/record.h"

struct ip_gnode {
	struct ip_obj o;
	struct ip_graph *g;
	CUgraphNodeType type;
	struct ip_gnode **deps;
	size_t ndeps;
	int known;                 /* its parameters are known here */
	CUcontext pctx;            /* memcpy and memset nodes: the context they were given */
	union {
		struct {
			CUDA_KERNEL_NODE_PARAMS p; /* kernelParams / extra point into args */
			uint8_t *args;
			void **argv;
			void *extra[5];
			size_t extra_size;
		} k;
		struct {
			CUDA_MEMCPY3D p;
			struct ip_scratch *scratch; /* a host side: its stand-in */
			int host_src;
		} c;
		CUDA_MEMSET_NODE_PARAMS s;
		CUDA_HOST_NODE_PARAMS h;
		CUevent ev;
		struct {
			struct ip_graph *copy; /* the node's own copy of the graph */
			struct ip_hcopy *hc;   /* the host sides of its memcpy nodes */
			size_t nhc;
		} ch;
		struct {
			CUDA_MEM_ALLOC_NODE_PARAMS p;
			int owned;          /* the allocation is freed with the graph */
		} a;
		CUdeviceptr freed;
		struct {
			CUDA_CONDITIONAL_NODE_PARAMS p; /* phGraph_out: bodies */
			CUgraph *bodies;
		} cond;
	};
	struct ip_gnode *orig;      /* in a clone: the node it copies */
};

/* ---- the recorder: a node's work frames, kept instead of sent ----------------------------- */

#define REC_MAX_FRAMES 64

struct recorder {
	unsigned n;
	uint32_t type[REC_MAX_FRAMES];
	ProtobufCBinaryData body[REC_MAX_FRAMES];
	uint64_t plen[REC_MAX_FRAMES];
	uint8_t *payload;
	uint64_t total, cap;
	CUresult err;
};

static __thread struct recorder *rec;

static CUresult record(uint16_t type, const ProtobufCMessage *req, const void *payload,
		       uint64_t plen)
{
	size_t blen = protobuf_c_message_get_packed_size(req);
	uint8_t *body;

	if (rec->n == REC_MAX_FRAMES || rec->total + plen > RGPU_MAX_IMAGE) {
		pr_warn("a graph node's work needs more than %d requests or %llu bytes",
			REC_MAX_FRAMES, (unsigned long long)RGPU_MAX_IMAGE);
		return rec->err = CUDA_ERROR_NOT_SUPPORTED;
	}
	body = malloc(blen ? blen : 1);
	if (!body)
		return rec->err = CUDA_ERROR_OUT_OF_MEMORY;
	protobuf_c_message_pack(req, body);
	if (plen && rec->total + plen > rec->cap) {
		uint64_t cap = rec->cap ? rec->cap : 4096;
		uint8_t *p;
		while (cap < rec->total + plen)
			cap *= 2;
		p = realloc(rec->payload, cap);
		if (!p) {
			free(body);
			return rec->err = CUDA_ERROR_OUT_OF_MEMORY;
		}
		rec->payload = p;
		rec->cap = cap;
	}
	if (plen)
		memcpy(rec->payload + rec->total, payload, plen);
	rec->total += plen;
	rec->type[rec->n] = type;
	rec->body[rec->n].data = body;
	rec->body[rec->n].len = blen;
	rec->plen[rec->n++] = plen;
	return CUDA_SUCCESS;
}

/* calls.c's post taker: while a node is described, its work frames are kept, not sent */
static int take_post(uint16_t type, const ProtobufCMessage *req, const void *payload,
		     uint64_t plen, CUresult *r)
{
	if (!rec || (type != RGPU_MSG_LAUNCH && type != RGPU_MSG_MEMCPY_HTOD &&
		     type != RGPU_MSG_MEMCPY_DTOD && type != RGPU_MSG_MEMSET &&
		     type != RGPU_MSG_HOST_FUNC))
		return 0;
	*r = record(type, req, payload, plen);
	return 1;
}

__attribute__((constructor)) static void gnode_listen(void)
{
	ip_calls_on_post(take_post);
}

static void recorder_free(struct recorder *r)
{
	for (unsigned i = 0; i < r->n; i++)
		free(r->body[i].data);
	free(r->payload);
}

/* The stand-in stream node work is recorded on: captured for good, as far as the rest knows. */
static struct ip_capture node_capture = {.active = 1, .refs = 1 << 30};

static CUstream node_stream(struct ip_ctx *c)
{
	struct ip_stream *s = c->node_stream;

	if (s && ip_obj_get(s, ST_KIND_STREAM))
		return (CUstream)s;
	s = ip_obj_new(sizeof(*s), ST_KIND_STREAM, c);
	if (!s)
		return NULL;
	s->o.id = RGPU_NODE_STREAM;
	s->ctx = c;
	s->capture = &node_capture;
	c->node_stream = s;
	return (CUstream)s;
}

/* ---- the mirror ------------------------------------------------------------------------------ */

/* a graph's calls go to its context's server (route.c), as do its nodes' and execs' */
static struct ip_gnode *gnode_get(CUgraphNode h)
{
	struct ip_gnode *n = ip_obj_get(h, IP_KIND_GNODE);

	if (n && n->g)
		ip_route_ctx(n->g->ctx);
	return n;
}

static struct ip_graph *graph_get(CUgraph h)
{
	struct ip_graph *g = ip_obj_get(h, ST_KIND_GRAPH);

	if (g)
		ip_route_ctx(g->ctx);
	return g;
}

static struct ip_gnode *node_new(struct ip_graph *g, CUgraphNodeType type)
{
	struct ip_gnode *n = ip_obj_new(sizeof(*n), IP_KIND_GNODE, g->ctx);

	if (!n)
		return NULL;
	if (g->nnodes == g->capnodes) {
		size_t cap = g->capnodes ? 2 * g->capnodes : 8;
		struct ip_gnode **v = realloc(g->nodes, cap * sizeof(*v));
		if (!v) {
			ip_obj_drop(n);
			return NULL;
		}
		g->nodes = v;
		g->capnodes = cap;
	}
	n->g = g;
	n->type = type;
	g->nodes[g->nnodes++] = n;
	return n;
}

static void scratch_put(struct ip_scratch *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
		ip_mem_free(s->addr);
		free(s);
	}
}

static void params_free(struct ip_gnode *n)
{
	if (!n->known)
		return;
	switch (n->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		free(n->k.args);
		free(n->k.argv);
		break;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		scratch_put(n->c.scratch);
		break;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		for (size_t i = 0; i < n->ch.nhc; i++)
			scratch_put(n->ch.hc[i].scratch);
		free(n->ch.hc);
		break;
	default:
		break;
	}
	n->known = 0;
}

static void graph_free_nodes(struct ip_graph *g);

/* n leaves its graph (already removed from the graph's list and from its dependents). */
static void node_kill(struct ip_gnode *n)
{
	if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && n->known && n->ch.copy) {
		graph_free_nodes(n->ch.copy);
		ip_obj_unregister(&n->ch.copy->o);
	}
	if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && n->known && n->cond.bodies) {
		for (unsigned i = 0; i < n->cond.p.size; i++) {
			graph_free_nodes((struct ip_graph *)n->cond.bodies[i]);
			ip_obj_unregister(&((struct ip_graph *)n->cond.bodies[i])->o);
		}
		free(n->cond.bodies);
		n->cond.bodies = NULL;
	}
	if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->known && n->a.owned &&
	    !n->g->instantiated)
		ip_mem_free(n->a.p.dptr);
	params_free(n);
	free(n->deps);
	n->deps = NULL;
	n->ndeps = 0;
	ip_obj_unregister(&n->o);
}

static void graph_free_nodes(struct ip_graph *g)
{
	for (size_t i = 0; i < g->nnodes; i++)
		node_kill(g->nodes[i]);
	free(g->nodes);
	g->nodes = NULL;
	g->nnodes = g->capnodes = 0;
}

void ip_graph_forget_nodes(struct ip_graph *g)
{
	graph_free_nodes(g);
}

static struct ip_gnode *node_by_id(const struct ip_graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->nnodes; i++)
		if (g->nodes[i]->o.id == id)
			return g->nodes[i];
	return NULL;
}

static int add_dep(struct ip_gnode *to, struct ip_gnode *from)
{
	struct ip_gnode **v = realloc(to->deps, (to->ndeps + 1) * sizeof(*v));
	if (!v)
		return RGPU_ENOMEM;
	to->deps = v;
	to->deps[to->ndeps++] = from;
	return 0;
}

static int has_dep(const struct ip_gnode *to, const struct ip_gnode *from)
{
	for (size_t i = 0; i < to->ndeps; i++)
		if (to->deps[i] == from)
			return 1;
	return 0;
}

static void drop_dep(struct ip_gnode *to, const struct ip_gnode *from)
{
	for (size_t i = 0; i < to->ndeps; i++)
		if (to->deps[i] == from) {
			memmove(to->deps + i, to->deps + i + 1, (to->ndeps - i - 1) * sizeof(*to->deps));
			to->ndeps--;
			return;
		}
}

/*
 * An opaque graph's nodes from the worker: new ones get objects (and ids, bound there), those
 * the client knows keep theirs; the dependencies are the worker's. Done once, or at every
 * question while the graph is being captured.
 */
static CUresult graph_sync(struct ip_graph *g)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	Rgpu__GraphNodesReply *rep = NULL;
	Rgpu__GraphBind b = RGPU__GRAPH_BIND__INIT;
	struct ip_gnode **list = NULL;
	uint32_t *idx = NULL;
	uint64_t *ids = NULL;
	size_t nb = 0;
	CUresult r;

	if (!g->opaque || (g->synced && !(g->capturing && g->capturing->active)))
		return CUDA_SUCCESS;
	m.graph = g->o.id;
	m.ctx = g->ctx->o.id;
	r = ip_call(RGPU_MSG_GRAPH_NODES, &m.base, NULL, 0, NULL, 0,
		    &rgpu__graph_nodes_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS && rep->result != CUDA_SUCCESS)
		r = (CUresult)rep->result;
	if (r == CUDA_SUCCESS && rep->n_type != rep->n_id) {
		pr_err("graph %llu: the GPU server listed %zu node types for %zu nodes: "
		       "CUDA_ERROR_UNKNOWN",
		       (unsigned long long)g->o.id, rep->n_type, rep->n_id);
		r = CUDA_ERROR_UNKNOWN;
	}
	if (r == CUDA_SUCCESS && rep->n_type) {
		list = calloc(rep->n_type, sizeof(*list));
		idx = calloc(rep->n_type, sizeof(*idx));
		ids = calloc(rep->n_type, sizeof(*ids));
		if (!list || !idx || !ids)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < rep->n_type; i++) {
		struct ip_gnode *n = rep->id[i] ? node_by_id(g, rep->id[i]) : NULL;
		if (n && !n->known)
			n->type = (CUgraphNodeType)rep->type[i];
		if (!n) {
			n = node_new(g, (CUgraphNodeType)rep->type[i]);
			if (!n) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			if (rep->id[i]) {
				n->o.id = rep->id[i]; /* named by the worker's copy of a child */
			} else {
				idx[nb] = (uint32_t)i;
				ids[nb++] = n->o.id;
			}
		}
		list[i] = n;
	}
	/* the worker's order and dependencies are the truth now */
	for (size_t i = 0; r == CUDA_SUCCESS && i < rep->n_type; i++) {
		g->nodes[i] = list[i];
		free(list[i]->deps);
		list[i]->deps = NULL;
		list[i]->ndeps = 0;
	}
	for (size_t e = 0; r == CUDA_SUCCESS && e < rep->n_edge_from && e < rep->n_edge_to; e++) {
		if (rep->edge_from[e] >= rep->n_type || rep->edge_to[e] >= rep->n_type) {
			pr_err("graph %llu: the GPU server listed an edge between nodes it did not "
			       "list: CUDA_ERROR_UNKNOWN",
			       (unsigned long long)g->o.id);
			r = CUDA_ERROR_UNKNOWN;
		} else if (add_dep(list[rep->edge_to[e]], list[rep->edge_from[e]]))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS && nb) {
		b.graph = g->o.id;
		b.ctx = g->ctx->o.id;
		b.index = idx;
		b.n_index = nb;
		b.id = ids;
		b.n_id = nb;
		r = ip_post(RGPU_MSG_GRAPH_BIND, &b.base, NULL, 0);
		if (r == CUDA_SUCCESS)
			ip_statelog_edit(RGPU_MSG_GRAPH_BIND, &b.base, NULL, 0);
	}
	if (r == CUDA_SUCCESS)
		g->synced = 1;
	free(list);
	free(idx);
	free(ids);
	if (rep)
		rgpu__graph_nodes_reply__free_unpacked(rep, NULL);
	return r;
}

/* ---- one node to the worker --------------------------------------------------------------- */

struct node_req {
	uint32_t op;
	struct ip_graph *g;
	struct ip_graph_exec *e;
	uint64_t node;
	CUgraphNodeType type;
	struct ip_gnode *const *deps;
	size_t ndeps;
	uint64_t event;
	struct ip_graph *child;
	uint64_t child_copy;
	int enabled;
	struct recorder *frames;
	uint64_t *body_ids;       /* a conditional node: ids for its bodies */
	size_t nbodies;
	uint64_t cond_handle;
	uint32_t cond_type;
};

static CUresult send_node(const struct node_req *q)
{
	Rgpu__GraphNode m = RGPU__GRAPH_NODE__INIT;
	Rgpu__GraphAt at = RGPU__GRAPH_AT__INIT;
	uint64_t *deps = NULL;
	CUresult r;

	m.graph = q->g ? q->g->o.id : 0;
	m.exec = q->e ? q->e->o.id : 0;
	m.node = q->node;
	m.op = q->op;
	m.type = (uint32_t)q->type;
	m.ctx = q->g ? q->g->ctx->o.id : q->e->ctx->o.id;
	m.event = q->event;
	m.enabled = q->enabled;
	if (q->ndeps) {
		deps = malloc(q->ndeps * sizeof(*deps));
		if (!deps)
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; i < q->ndeps; i++)
			deps[i] = q->deps[i]->o.id;
		m.deps = deps;
		m.n_deps = q->ndeps;
	}
	if (q->child) {
		ip_statelog_graph_at(q->child->o.id, &at);
		m.child = q->child->o.id;
		m.child_at = &at;
		m.child_copy = q->child_copy;
	}
	m.cond_handle = q->cond_handle;
	m.cond_type = q->cond_type;
	m.bodies = q->body_ids;
	m.n_bodies = q->nbodies;
	if (q->frames) {
		m.frame_type = q->frames->type;
		m.n_frame_type = q->frames->n;
		m.frame_body = q->frames->body;
		m.n_frame_body = q->frames->n;
		m.frame_plen = q->frames->plen;
		m.n_frame_plen = q->frames->n;
	}
	r = ip_call_status(RGPU_MSG_GRAPH_NODE, &m.base, q->frames ? q->frames->payload : NULL,
			   q->frames ? q->frames->total : 0, NULL, 0, NULL, NULL);
	if (r == CUDA_SUCCESS)
		ip_statelog_edit(RGPU_MSG_GRAPH_NODE, &m.base, q->frames ? q->frames->payload : NULL,
				 q->frames ? q->frames->total : 0);
	free(deps);
	return r;
}

/* ---- describing a node's work --------------------------------------------------------------- */

static int memtype_host(CUmemorytype t, const void *host, CUdeviceptr d)
{
	if (t == CU_MEMORYTYPE_HOST)
		return !ip_mem_managed((uint64_t)(uintptr_t)host, 1);
	if (t == CU_MEMORYTYPE_UNIFIED)
		return !ip_is_devptr(d) || ip_host_range(d, 1);
	return 0;
}

/* Bytes a side spans from its first byte (x, y, z) to its last. */
static uint64_t side_span(const CUDA_MEMCPY3D *p, size_t pitch, size_t height)
{
	size_t rows = height ? height : p->Height;
	return ((uint64_t)(p->Depth - 1) * rows + (p->Height - 1)) * pitch + p->WidthInBytes;
}

/*
 * What the worker captures for a memcpy node: p with its host side (at most one) replaced by a
 * scratch buffer laid out as the host side is (same pitch and rows), starting at its first byte.
 */
static CUresult memcpy_work(const CUDA_MEMCPY3D *p, struct ip_ctx *c, CUDA_MEMCPY3D *dev,
			    struct ip_scratch **scratch, int *host_src)
{
	int hs = memtype_host(p->srcMemoryType, p->srcHost, p->srcDevice);
	int hd = memtype_host(p->dstMemoryType, p->dstHost, p->dstDevice);
	struct ip_scratch *s;
	CUresult r;

	*dev = *p;
	*scratch = NULL;
	*host_src = hs;
	if (!p->WidthInBytes || !p->Height || !p->Depth)
		return CUDA_ERROR_INVALID_VALUE;
	if (hs && hd) {
		pr_warn("a host-to-host memcpy node is not supported");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!hs && !hd)
		return CUDA_SUCCESS;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t pitch = hs ? (p->srcPitch ? p->srcPitch : p->WidthInBytes)
			  : (p->dstPitch ? p->dstPitch : p->WidthInBytes);
	size_t rows = hs ? p->srcHeight : p->dstHeight;
	r = ip_mem_alloc(c, side_span(p, pitch, rows), &s->addr);
	if (r != CUDA_SUCCESS) {
		free(s);
		return r;
	}
	atomic_init(&s->refs, 1);
	if (hs) {
		dev->srcMemoryType = CU_MEMORYTYPE_DEVICE;
		dev->srcDevice = s->addr;
		dev->srcHost = NULL;
		dev->srcXInBytes = dev->srcY = dev->srcZ = 0;
		dev->srcPitch = pitch;
		dev->srcHeight = rows ? rows : p->Height;
	} else {
		dev->dstMemoryType = CU_MEMORYTYPE_DEVICE;
		dev->dstDevice = s->addr;
		dev->dstHost = NULL;
		dev->dstXInBytes = dev->dstY = dev->dstZ = 0;
		dev->dstPitch = pitch;
		dev->dstHeight = rows ? rows : p->Height;
	}
	*scratch = s;
	return CUDA_SUCCESS;
}

/* The launch-time move of a memcpy node's host side (see the top of the file). */
static void hcopy_of(const struct ip_gnode *n, struct ip_hcopy *h)
{
	const CUDA_MEMCPY3D *p = &n->c.p;
	CUDA_MEMCPY3D *x = &h->xfer;

	memset(h, 0, sizeof(*h));
	h->node = n->o.id;
	h->to_device = n->c.host_src;
	h->scratch = n->c.scratch;
	atomic_fetch_add(&n->c.scratch->refs, 1);
	*x = *p;
	if (n->c.host_src) {
		x->dstMemoryType = CU_MEMORYTYPE_DEVICE;
		x->dstDevice = n->c.scratch->addr;
		x->dstArray = NULL;
		x->dstXInBytes = x->dstY = x->dstZ = 0;
		x->dstPitch = p->srcPitch ? p->srcPitch : p->WidthInBytes;
		x->dstHeight = p->srcHeight ? p->srcHeight : p->Height;
	} else {
		x->srcMemoryType = CU_MEMORYTYPE_DEVICE;
		x->srcDevice = n->c.scratch->addr;
		x->srcArray = NULL;
		x->srcXInBytes = x->srcY = x->srcZ = 0;
		x->srcPitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
		x->srcHeight = p->dstHeight ? p->dstHeight : p->Height;
	}
}

static CUresult ctx_of(CUcontext h, struct ip_ctx *dflt, struct ip_ctx **out)
{
	*out = h ? ip_obj_get(h, ST_KIND_CONTEXT) : dflt;
	return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Run fn's stream call on the node stream of c with the recorder on. */
#define RECORD(rc, c, call)                                                                    \
	do {                                                                                   \
		CUstream ns_ = node_stream(c);                                                 \
		(void)ns_;                                                                     \
		if (!ns_) {                                                                    \
			(rc) = CUDA_ERROR_OUT_OF_MEMORY;                                       \
			break;                                                                 \
		}                                                                              \
		rec = &frames;                                                                 \
		(rc) = (call);                                                                 \
		rec = NULL;                                                                    \
		if ((rc) == CUDA_SUCCESS && frames.err != CUDA_SUCCESS)                        \
			(rc) = frames.err;                                                     \
		if ((rc) == CUDA_SUCCESS && !frames.n)                                         \
			(rc) = CUDA_ERROR_INVALID_VALUE;                                       \
	} while (0)

static CUresult kernel_copy(struct ip_gnode *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct ip_func *f = ip_obj_get(p->func ? (void *)p->func : (void *)p->kern,
				       ST_KIND_FUNCTION);
	const struct ip_funcinfo *fi;

	if (!f)
		f = ip_obj_get(p->func ? (void *)p->func : (void *)p->kern, ST_KIND_KERNEL);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	fi = f->info;
	memset(&n->k, 0, sizeof(n->k));
	n->k.p = *p;
	if (p->extra) {
		void *buf = NULL;
		size_t size = 0;
		for (int i = 0; p->extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
			if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = p->extra[i + 1];
			else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				size = p->extra[i + 1] ? *(size_t *)p->extra[i + 1] : 0;
		}
		if (size > RGPU_MAX_PARAMS || (size && !buf))
			return CUDA_ERROR_INVALID_VALUE;
		n->k.args = malloc(size ? size : 1);
		if (!n->k.args)
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(n->k.args, buf, size);
		n->k.extra_size = size;
		n->k.extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
		n->k.extra[1] = n->k.args;
		n->k.extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
		n->k.extra[3] = &n->k.extra_size;
		n->k.extra[4] = CU_LAUNCH_PARAM_END;
		n->k.p.extra = n->k.extra;
		n->k.p.kernelParams = NULL;
		return CUDA_SUCCESS;
	}
	if (fi->nparams && !p->kernelParams)
		return CUDA_ERROR_INVALID_VALUE;
	n->k.args = calloc(1, fi->argbytes ? fi->argbytes : 1);
	n->k.argv = calloc(fi->nparams + 1, sizeof(void *));
	if (!n->k.args || !n->k.argv)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (fi->nparams && ip_pack_params(fi, p->kernelParams, n->k.args))
		return CUDA_ERROR_INVALID_VALUE;
	for (uint32_t i = 0; i < fi->nparams; i++)
		n->k.argv[i] = n->k.args + fi->offset[i];
	n->k.p.kernelParams = n->k.argv;
	n->k.p.extra = NULL;
	return CUDA_SUCCESS;
}

/*
 * Keep p as node n's parameters (for its queries) and record the work that makes it. On
 * failure n's parameters are as before.
 */
static CUresult describe(struct ip_gnode *n, CUgraphNodeType type, const void *params,
			 CUcontext pctx, struct recorder *out)
{
	struct ip_gnode keep = *n;
	struct recorder frames = {0};
	struct ip_ctx *c;
	CUresult r = CUDA_SUCCESS;

	n->known = 0;
	n->type = type;
	switch (type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: {
		const CUDA_KERNEL_NODE_PARAMS *p = params;
		r = kernel_copy(n, p);
		if (r == CUDA_SUCCESS && p->ctx && !ip_obj_get(p->ctx, ST_KIND_CONTEXT))
			r = CUDA_ERROR_INVALID_CONTEXT;
		c = p->ctx ? ip_obj_get(p->ctx, ST_KIND_CONTEXT) : n->g->ctx;
		if (r == CUDA_SUCCESS)
			RECORD(r, c,
			       cuLaunchKernel(n->k.p.func ? n->k.p.func : (CUfunction)n->k.p.kern,
					      p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX,
					      p->blockDimY, p->blockDimZ, p->sharedMemBytes, ns_,
					      n->k.p.kernelParams, n->k.p.extra));
		if (r != CUDA_SUCCESS) {
			free(n->k.args);
			free(n->k.argv);
		}
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEMCPY: {
		CUDA_MEMCPY3D dev;
		r = ctx_of(pctx, n->g->ctx, &c);
		if (r == CUDA_SUCCESS)
			r = memcpy_work(params, c, &dev, &n->c.scratch, &n->c.host_src);
		if (r == CUDA_SUCCESS) {
			RECORD(r, c, cuMemcpy3DAsync_v2(&dev, ns_));
			if (r != CUDA_SUCCESS)
				scratch_put(n->c.scratch);
		}
		n->c.p = *(const CUDA_MEMCPY3D *)params;
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEMSET: {
		const CUDA_MEMSET_NODE_PARAMS *p = params;
		r = ctx_of(pctx, n->g->ctx, &c);
		if (r == CUDA_SUCCESS && (!p->width || !p->height))
			r = CUDA_ERROR_INVALID_VALUE;
		if (r != CUDA_SUCCESS)
			break;
		switch (p->elementSize) {
		case 1:
			RECORD(r, c, cuMemsetD2D8Async(p->dst, p->pitch ? p->pitch : p->width,
						      (unsigned char)p->value, p->width, p->height,
						      ns_));
			break;
		case 2:
			RECORD(r, c, cuMemsetD2D16Async(p->dst, p->pitch ? p->pitch : 2 * p->width,
						       (unsigned short)p->value, p->width, p->height,
						       ns_));
			break;
		case 4:
			RECORD(r, c, cuMemsetD2D32Async(p->dst, p->pitch ? p->pitch : 4 * p->width,
						       p->value, p->width, p->height, ns_));
			break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
		}
		n->s = *p;
		break;
	}
	case CU_GRAPH_NODE_TYPE_HOST: {
		const CUDA_HOST_NODE_PARAMS *p = params;
		if (!p->fn) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		RECORD(r, n->g->ctx, cuLaunchHostFunc(ns_, p->fn, p->userData));
		n->h = *p;
		break;
	}
	default:
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r != CUDA_SUCCESS) {
		recorder_free(&frames);
		*n = keep;
		return r;
	}
	n->pctx = pctx;
	*out = frames;
	return CUDA_SUCCESS;
}

/*
 * The host sides of g's memcpy nodes, its child graph nodes' included: what an exec holding
 * them moves at every launch (each takes a reference on its scratch).
 */
static CUresult host_sides(const struct ip_graph *g, struct ip_hcopy **out, size_t *nout)
{
	struct ip_hcopy *v = NULL;
	size_t n = 0;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < g->nnodes; i++) {
		const struct ip_gnode *x = g->nodes[i];
		size_t add = !x->known ? 0
			     : x->type == CU_GRAPH_NODE_TYPE_MEMCPY ? x->c.scratch != NULL
			     : x->type == CU_GRAPH_NODE_TYPE_GRAPH  ? x->ch.nhc
								    : 0;
		struct ip_hcopy *w;
		if (!add)
			continue;
		w = realloc(v, (n + add) * sizeof(*v));
		if (!w) {
			for (size_t k = 0; k < n; k++)
				scratch_put(v[k].scratch);
			free(v);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		v = w;
		if (x->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
			hcopy_of(x, &v[n++]);
		} else {
			for (size_t k = 0; k < x->ch.nhc; k++, n++) {
				v[n] = x->ch.hc[k];
				atomic_fetch_add(&v[n].scratch->refs, 1);
			}
		}
	}
	*out = v;
	*nout = n;
	return CUDA_SUCCESS;
}

/*
 * A conditional node's body graphs: client objects owned by the node (their changes go into
 * the journal of the node's graph), made by the driver on the worker under their ids.
 */
static CUresult cond_bodies(struct ip_graph *g, struct ip_gnode *n, const void *params,
			    struct node_req *q)
{
	const CUDA_CONDITIONAL_NODE_PARAMS *p = params;
	unsigned want = p->type == CU_GRAPH_COND_TYPE_WHILE ? 1 : p->type == CU_GRAPH_COND_TYPE_IF ? 2 : ~0u;

	if (!p->size || p->size > want || p->type > CU_GRAPH_COND_TYPE_SWITCH || !p->handle ||
	    p->size > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	n->cond.p = *p;
	n->cond.bodies = calloc(p->size, sizeof(*n->cond.bodies));
	q->body_ids = calloc(p->size, sizeof(*q->body_ids));
	if (!n->cond.bodies || !q->body_ids)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->cond.p.phGraph_out = n->cond.bodies;
	for (unsigned i = 0; i < p->size; i++) {
		struct ip_graph *b = ip_obj_new(sizeof(*b), ST_KIND_GRAPH, g->ctx);
		if (!b)
			return CUDA_ERROR_OUT_OF_MEMORY;
		b->ctx = g->ctx;
		b->owner = n;
		b->synced = 1;
		n->cond.bodies[i] = (CUgraph)b;
		q->body_ids[i] = b->o.id;
	}
	q->nbodies = p->size;
	q->cond_handle = p->handle;
	q->cond_type = p->type;
	return CUDA_SUCCESS;
}

/* ---- adding nodes --------------------------------------------------------------------------- */

static CUresult deps_check(struct ip_graph *g, const CUgraphNode *deps, size_t n,
			   struct ip_gnode ***out)
{
	*out = NULL;
	if (n && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	if (!n)
		return CUDA_SUCCESS;
	*out = malloc(n * sizeof(**out));
	if (!*out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n; i++) {
		struct ip_gnode *d = gnode_get(deps[i]);
		int dup = 0;
		for (size_t j = 0; j < i; j++)
			dup |= (*out)[j] == d;
		if (!d || d->g != g || dup) {
			free(*out);
			*out = NULL;
			return CUDA_ERROR_INVALID_VALUE;
		}
		(*out)[i] = d;
	}
	return CUDA_SUCCESS;
}

/* The new node is in the mirror from the start; it leaves it again when the worker refused it. */
static void node_unlist(struct ip_gnode *n)
{
	struct ip_graph *g = n->g;
	for (size_t i = 0; i < g->nnodes; i++)
		if (g->nodes[i] == n) {
			memmove(g->nodes + i, g->nodes + i + 1, (g->nnodes - i - 1) * sizeof(*g->nodes));
			g->nnodes--;
			break;
		}
	for (size_t i = 0; i < g->nnodes; i++)
		drop_dep(g->nodes[i], n);
}

static CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
			 CUgraphNodeType type, const void *params, CUcontext pctx)
{
	struct node_req q = {.op = RGPU__GRAPH_NODE_OP__NODE_ADD, .type = type, .ndeps = ndeps};
	struct ip_gnode **dv = NULL, *n = NULL;
	struct recorder frames = {0};
	struct ip_graph *g, *copy = NULL;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	g = graph_get(hg);
	if (!out || !g || (!params && type != CU_GRAPH_NODE_TYPE_EMPTY))
		return CUDA_ERROR_INVALID_VALUE;
	/* (the dependencies are nodes the client has: no listing of the graph is needed) */
	r = deps_check(g, deps, ndeps, &dv);
	if (r != CUDA_SUCCESS)
		return r;
	n = node_new(g, type);
	if (!n) {
		free(dv);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	q.g = g;
	q.node = n->o.id;
	q.deps = dv;
	switch (type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
	case CU_GRAPH_NODE_TYPE_MEMCPY:
	case CU_GRAPH_NODE_TYPE_MEMSET:
	case CU_GRAPH_NODE_TYPE_HOST:
		r = describe(n, type, params, pctx, &frames);
		q.frames = &frames;
		break;
	case CU_GRAPH_NODE_TYPE_EMPTY:
		break;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
		struct ip_event *e = ip_obj_get(*(const CUevent *)params, ST_KIND_EVENT);
		if (!e)
			r = CUDA_ERROR_INVALID_HANDLE;
		else
			q.event = e->o.id, n->ev = *(const CUevent *)params;
		break;
	}
	case CU_GRAPH_NODE_TYPE_GRAPH: {
		struct ip_graph *child = graph_get(*(const CUgraph *)params);
		if (!child || child == g) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		r = graph_sync(child);
		copy = r == CUDA_SUCCESS ? ip_obj_new(sizeof(*copy), ST_KIND_GRAPH, g->ctx) : NULL;
		if (r == CUDA_SUCCESS && !copy)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		if (r == CUDA_SUCCESS) {
			copy->ctx = g->ctx;
			copy->opaque = 1;
			copy->owner = n;
			q.child = child;
			q.child_copy = copy->o.id;
			n->ch.copy = copy;
			r = host_sides(child, &n->ch.hc, &n->ch.nhc);
		}
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
		const CUDA_MEM_ALLOC_NODE_PARAMS *p = params;
		struct ip_ctx *c = g->ctx;
		if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
		    p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    p->poolProps.location.id != c->device || !p->bytesize) {
			pr_warn("a graph memory node not of pinned memory on the graph's device is "
				"not supported");
			r = CUDA_ERROR_NOT_SUPPORTED;
			break;
		}
		n->a.p = *p;
		r = ip_mem_alloc(c, p->bytesize, &n->a.p.dptr);
		n->a.owned = r == CUDA_SUCCESS;
		q.type = CU_GRAPH_NODE_TYPE_EMPTY;
		break;
	}
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		n->freed = *(const CUdeviceptr *)params;
		if (!ip_is_devptr(n->freed))
			r = CUDA_ERROR_INVALID_VALUE;
		q.type = CU_GRAPH_NODE_TYPE_EMPTY;
		break;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL:
		r = cond_bodies(g, n, params, &q);
		break;
	default:
		pr_warn("graph nodes of type %d are not supported", (int)type);
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	if (r == CUDA_SUCCESS)
		r = send_node(&q);
	recorder_free(&frames);
	free(q.body_ids);
	if (r != CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_CONDITIONAL && n->cond.bodies) {
		for (unsigned i = 0; i < n->cond.p.size; i++)
			if (n->cond.bodies[i])
				ip_obj_unregister(&((struct ip_graph *)n->cond.bodies[i])->o);
		free(n->cond.bodies);
		n->cond.bodies = NULL;
	}
	/* as the H200's driver does: phGraph_out points at the node's own array */
	if (r == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
		((CUDA_CONDITIONAL_NODE_PARAMS *)params)->phGraph_out = n->cond.bodies;
	if (r == CUDA_SUCCESS) {
		for (size_t i = 0; i < ndeps && r == CUDA_SUCCESS; i++)
			if (add_dep(n, dv[i]))
				r = CUDA_ERROR_OUT_OF_MEMORY;
		n->known = 1;
		*out = (CUgraphNode)n;
	} else {
		node_unlist(n);
		if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && n->a.owned)
			ip_mem_free(n->a.p.dptr);
		if (copy)
			ip_obj_unregister(&copy->o);
		/* what describe() or host_sides() kept */
		if (type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
		    type == CU_GRAPH_NODE_TYPE_GRAPH) {
			n->known = 1;
			params_free(n);
		}
		ip_obj_unregister(&n->o);
	}
	free(dv);
	return r;
}

IP_API CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
						size_t n, const CUDA_KERNEL_NODE_PARAMS *p)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_KERNEL, p, NULL);
}

static void kparams_from_v1(CUDA_KERNEL_NODE_PARAMS *to, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	memset(to, 0, sizeof(*to));
	to->func = p->func;
	to->gridDimX = p->gridDimX;
	to->gridDimY = p->gridDimY;
	to->gridDimZ = p->gridDimZ;
	to->blockDimX = p->blockDimX;
	to->blockDimY = p->blockDimY;
	to->blockDimZ = p->blockDimZ;
	to->sharedMemBytes = p->sharedMemBytes;
	to->kernelParams = p->kernelParams;
	to->extra = p->extra;
}

IP_API CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					     size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS v2;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	kparams_from_v1(&v2, p);
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_KERNEL, &v2, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					     size_t n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_MEMCPY, p, ctx);
}

IP_API CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					     size_t n, const CUDA_MEMSET_NODE_PARAMS *p,
					     CUcontext ctx)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_MEMSET, p, ctx);
}

IP_API CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					   size_t n, const CUDA_HOST_NODE_PARAMS *p)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_HOST, p, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g,
						 const CUgraphNode *d, size_t n, CUgraph child)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_GRAPH, &child, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					    size_t n)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_EMPTY, NULL, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g,
						  const CUgraphNode *d, size_t n, CUevent e)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_EVENT_RECORD, &e, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
						size_t n, CUevent e)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_WAIT_EVENT, &e, NULL);
}

IP_API CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					       size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	CUresult r = add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_MEM_ALLOC, p, NULL);
	if (r == CUDA_SUCCESS)
		p->dptr = ((struct ip_gnode *)*out)->a.p.dptr;
	return r;
}

IP_API CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					      size_t n, CUdeviceptr dptr)
{
	return add_node(out, g, d, n, CU_GRAPH_NODE_TYPE_MEM_FREE, &dptr, NULL);
}

/* cuGraphAddNode's parameters as the add calls above take them. */
static CUresult generic(CUgraphNodeParams *p, const void **params, CUcontext *ctx)
{
	*ctx = NULL;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL: *params = &p->kernel; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		*params = &p->memcpy.copyParams;
		*ctx = p->memcpy.copyCtx;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMSET:
		*params = &p->memset;
		*ctx = p->memset.ctx;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_HOST: *params = &p->host; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_GRAPH: *params = &p->graph.graph; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_EMPTY: *params = NULL; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD: *params = &p->eventRecord.event; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT: *params = &p->eventWait.event; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC: *params = &p->alloc; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_FREE: *params = &p->free.dptr; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_CONDITIONAL: *params = &p->conditional; return CUDA_SUCCESS;
	default:
		pr_warn("cuGraphAddNode/cuGraphNodeSetParams: nodes of type %d (semaphore or "
			"batch memory nodes) are not supported",
			(int)p->type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

IP_API CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
					  const CUgraphEdgeData *ed, size_t n, CUgraphNodeParams *p)
{
	const void *params;
	CUcontext ctx;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; ed && i < n; i++)
		if (ed[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || ed[i].from_port ||
		    ed[i].to_port) {
			pr_warn("graph edges other than default ones are not supported");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	r = generic(p, &params, &ctx);
	if (r == CUDA_SUCCESS)
		r = add_node(out, g, d, n, p->type, params, ctx);
	if (r == CUDA_SUCCESS && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		p->alloc.dptr = ((struct ip_gnode *)*out)->a.p.dptr;
	return r;
}

IP_API CUresult CUDAAPI cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *d,
				       size_t n, CUgraphNodeParams *p)
{
	return cuGraphAddNode_v2(out, g, d, NULL, n, p);
}

/*
 * A conditional handle: a value the worker's driver chose, which kernels are given. It goes
 * into the graph's journal with that value, which a replay must get again.
 */
IP_API CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *out, CUgraph h,
						       CUcontext ctx, unsigned int dflt,
						       unsigned int flags)
{
	Rgpu__GraphCond m = RGPU__GRAPH_COND__INIT;
	Rgpu__ValueReply *rep = NULL;
	struct ip_graph *g;
	struct ip_ctx *c;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	g = graph_get(h);
	if (!out || !g || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
		return CUDA_ERROR_INVALID_VALUE;
	r = ctx_of(ctx, g->ctx, &c);
	if (r != CUDA_SUCCESS)
		return r;
	m.graph = g->o.id;
	m.ctx = c->o.id;
	m.default_value = dflt;
	m.flags = flags;
	r = ip_call(RGPU_MSG_GRAPH_COND, &m.base, NULL, 0, NULL, 0, &rgpu__value_reply__descriptor,
		    (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS)
		r = (CUresult)rep->result;
	if (r == CUDA_SUCCESS) {
		*out = (CUgraphConditionalHandle)rep->value;
		m.want = (uint64_t)rep->value;
		ip_statelog_edit(RGPU_MSG_GRAPH_COND, &m.base, NULL, 0);
	}
	if (rep)
		rgpu__value_reply__free_unpacked(rep, NULL);
	return r;
}

/* ---- parameters: queries -------------------------------------------------------------------- */

static CUresult node_of(CUgraphNode h, CUgraphNodeType type, struct ip_gnode **out)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	*out = gnode_get(h);
	if (!*out || (*out)->type != type)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(*out)->known) {
		pr_warn("the parameters of a node of a captured graph are not known to rgpu "
			"(node type %d)",
			(int)type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

/* cuGraph*NodeGetParams and the like: node h, of type t, gives its field */
#define NODE_GETTER(fn, t, ctype, field)                                                       \
	IP_API CUresult CUDAAPI fn(CUgraphNode h, ctype *out)                                  \
	{                                                                                      \
		struct ip_gnode *n;                                                            \
		CUresult r = node_of(h, t, &n);                                                \
		if (r == CUDA_SUCCESS && !out)                                                 \
			r = CUDA_ERROR_INVALID_VALUE;                                          \
		if (r == CUDA_SUCCESS)                                                         \
			*out = n->field;                                                       \
		return r;                                                                      \
	}

NODE_GETTER(cuGraphKernelNodeGetParams_v2, CU_GRAPH_NODE_TYPE_KERNEL, CUDA_KERNEL_NODE_PARAMS, k.p)
NODE_GETTER(cuGraphMemcpyNodeGetParams, CU_GRAPH_NODE_TYPE_MEMCPY, CUDA_MEMCPY3D, c.p)
NODE_GETTER(cuGraphMemsetNodeGetParams, CU_GRAPH_NODE_TYPE_MEMSET, CUDA_MEMSET_NODE_PARAMS, s)
NODE_GETTER(cuGraphHostNodeGetParams, CU_GRAPH_NODE_TYPE_HOST, CUDA_HOST_NODE_PARAMS, h)
NODE_GETTER(cuGraphEventRecordNodeGetEvent, CU_GRAPH_NODE_TYPE_EVENT_RECORD, CUevent, ev)
NODE_GETTER(cuGraphEventWaitNodeGetEvent, CU_GRAPH_NODE_TYPE_WAIT_EVENT, CUevent, ev)
NODE_GETTER(cuGraphMemAllocNodeGetParams, CU_GRAPH_NODE_TYPE_MEM_ALLOC, CUDA_MEM_ALLOC_NODE_PARAMS,
	    a.p)
NODE_GETTER(cuGraphMemFreeNodeGetParams, CU_GRAPH_NODE_TYPE_MEM_FREE, CUdeviceptr, freed)

IP_API CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS v2;
	CUresult r = cuGraphKernelNodeGetParams_v2(h, &v2);
	if (r == CUDA_SUCCESS && !p)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		p->func = v2.func ? v2.func : (CUfunction)v2.kern;
		p->gridDimX = v2.gridDimX;
		p->gridDimY = v2.gridDimY;
		p->gridDimZ = v2.gridDimZ;
		p->blockDimX = v2.blockDimX;
		p->blockDimY = v2.blockDimY;
		p->blockDimZ = v2.blockDimZ;
		p->sharedMemBytes = v2.sharedMemBytes;
		p->kernelParams = v2.kernelParams;
		p->extra = v2.extra;
	}
	return r;
}

IP_API CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph *out)
{
	struct ip_gnode *n;
	CUresult r = node_of(h, CU_GRAPH_NODE_TYPE_GRAPH, &n);
	if (r == CUDA_SUCCESS && !out)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && !n->ch.copy) {
		pr_warn("cuGraphChildGraphNodeGetGraph: the graph of a cloned child graph node is "
			"not known to rgpu");
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	if (r == CUDA_SUCCESS)
		*out = (CUgraph)n->ch.copy;
	return r;
}

IP_API CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *out)
{
	struct ip_gnode *n;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	n = gnode_get(h);
	if (!n || !out)
		return CUDA_ERROR_INVALID_VALUE;
	/* a node of a captured graph named by a capture's dependencies: its type is listed */
	if (!n->known && (r = graph_sync(n->g)) != CUDA_SUCCESS)
		return r;
	/* graph memory nodes are empty nodes on the worker, but what they were made as here */
	*out = n->type;
	return CUDA_SUCCESS;
}

/* ---- parameters: changes, in a graph or in an exec --------------------------------------- */

static struct ip_graph_exec *exec_get(CUgraphExec h)
{
	struct ip_graph_exec *e = ip_obj_get(h, ST_KIND_GRAPH_EXEC);

	if (e)
		ip_route_ctx(e->ctx);
	return e;
}

static void exec_hcopy_update(struct ip_graph_exec *e, const struct ip_gnode *n);

/*
 * New parameters for node n: in its graph (e NULL), or in executable graph e only. The node's
 * record here changes only for the graph; an exec keeps its own launch-time copies.
 */
static CUresult set_params(struct ip_graph_exec *e, CUgraphNode h, CUgraphNodeType type,
			   const void *params, CUcontext pctx)
{
	struct node_req q = {.op = e ? RGPU__GRAPH_NODE_OP__NODE_EXEC_SET
				     : RGPU__GRAPH_NODE_OP__NODE_SET,
			     .type = type,
			     .e = e};
	struct recorder frames = {0};
	struct ip_gnode *n, tmp;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	n = gnode_get(h);
	if (!n || n->type != type || !params)
		return CUDA_ERROR_INVALID_VALUE;
	q.g = e ? NULL : n->g;
	q.node = n->o.id;
	if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) {
		struct ip_event *ev = ip_obj_get(*(const CUevent *)params, ST_KIND_EVENT);
		if (!ev)
			return CUDA_ERROR_INVALID_HANDLE;
		q.event = ev->o.id;
		r = send_node(&q);
		if (r == CUDA_SUCCESS && !e)
			n->ev = *(const CUevent *)params;
		return r;
	}
	if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
		q.child = graph_get(*(const CUgraph *)params);
		if (e && !q.child)
			return CUDA_ERROR_INVALID_VALUE;
		if (!e) {
			ip_refused("cuGraphNodeSetParams of a child graph node in a graph",
				   "rgpu changes a child graph node's graph only in an executable "
				   "graph (CUDA_ERROR_NOT_SUPPORTED)");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		return send_node(&q);
	}
	/* describe into a copy; the node itself changes only once the worker took it */
	tmp = *n;
	tmp.known = 0;
	r = describe(&tmp, type, params, pctx, &frames);
	if (r != CUDA_SUCCESS)
		return r;
	tmp.known = 1;
	q.frames = &frames;
	r = send_node(&q);
	recorder_free(&frames);
	if (r == CUDA_SUCCESS && e) {
		if (type == CU_GRAPH_NODE_TYPE_MEMCPY)
			exec_hcopy_update(e, &tmp);
		params_free(&tmp);
	} else if (r == CUDA_SUCCESS) {
		params_free(n);
		*n = tmp;
	} else {
		params_free(&tmp);
	}
	return r;
}

IP_API CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode h,
						      const CUDA_KERNEL_NODE_PARAMS *p)
{
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_KERNEL, p, NULL);
}

IP_API CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode h,
						   const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS v2;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	kparams_from_v1(&v2, p);
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_KERNEL, &v2, NULL);
}

IP_API CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D *p)
{
	struct ip_gnode *n = gnode_get(h);
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_MEMCPY, p, n ? n->pctx : NULL);
}

IP_API CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p)
{
	struct ip_gnode *n = gnode_get(h);
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_MEMSET, p, n ? n->pctx : NULL);
}

IP_API CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode h, const CUDA_HOST_NODE_PARAMS *p)
{
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_HOST, p, NULL);
}

IP_API CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode h, CUevent e)
{
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, &e, NULL);
}

IP_API CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode h, CUevent e)
{
	return set_params(NULL, h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, &e, NULL);
}

IP_API CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode h,
							  const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_KERNEL, p, NULL) : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode h,
						       const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	CUDA_KERNEL_NODE_PARAMS v2;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	kparams_from_v1(&v2, p);
	return cuGraphExecKernelNodeSetParams_v2(e, h, &v2);
}

IP_API CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode h,
						       const CUDA_MEMCPY3D *p, CUcontext ctx)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_MEMCPY, p, ctx) : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode h,
						       const CUDA_MEMSET_NODE_PARAMS *p,
						       CUcontext ctx)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_MEMSET, p, ctx) : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode h,
						     const CUDA_HOST_NODE_PARAMS *p)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_HOST, p, NULL) : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode h,
							   CUgraph child)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_GRAPH, &child, NULL)
		 : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec e, CUgraphNode h,
							   CUevent ev)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_EVENT_RECORD, &ev, NULL)
		 : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec e, CUgraphNode h,
							 CUevent ev)
{
	struct ip_graph_exec *x = exec_get(e);
	return x ? set_params(x, h, CU_GRAPH_NODE_TYPE_WAIT_EVENT, &ev, NULL)
		 : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode h, CUgraphNodeParams *p)
{
	const void *params;
	CUcontext ctx;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	r = generic(p, &params, &ctx);
	return r == CUDA_SUCCESS ? set_params(NULL, h, p->type, params, ctx) : r;
}

IP_API CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode h,
						 CUgraphNodeParams *p)
{
	struct ip_graph_exec *x = exec_get(e);
	const void *params;
	CUcontext ctx;
	CUresult r;

	if (!p || !x)
		return CUDA_ERROR_INVALID_VALUE;
	r = generic(p, &params, &ctx);
	return r == CUDA_SUCCESS ? set_params(x, h, p->type, params, ctx) : r;
}

/* Under e->lock: did cuGraphNodeSetEnabled turn node id off in e? */
static int node_off(const struct ip_graph_exec *e, uint64_t id)
{
	for (size_t i = 0; i < e->ndisabled; i++)
		if (e->disabled[i] == id)
			return 1;
	return 0;
}

IP_API CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode h, unsigned int on)
{
	struct node_req q = {.op = RGPU__GRAPH_NODE_OP__NODE_EXEC_ENABLE, .enabled = on != 0};
	struct ip_graph_exec *x;
	struct ip_gnode *n;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	x = exec_get(e);
	n = gnode_get(h);
	if (!x || !n)
		return CUDA_ERROR_INVALID_VALUE;
	q.e = x;
	q.node = n->o.id;
	q.type = n->type;
	r = send_node(&q);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&x->lock);
	size_t i;
	for (i = 0; i < x->ndisabled && x->disabled[i] != n->o.id; i++)
		;
	if (on && i < x->ndisabled) {
		x->disabled[i] = x->disabled[--x->ndisabled];
	} else if (!on && i == x->ndisabled) {
		uint64_t *v = realloc(x->disabled, (x->ndisabled + 1) * sizeof(*v));
		if (v) {
			x->disabled = v;
			x->disabled[x->ndisabled++] = n->o.id;
		} else {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	pthread_mutex_unlock(&x->lock);
	return r;
}

IP_API CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec e, CUgraphNode h, unsigned int *on)
{
	struct ip_graph_exec *x;
	struct ip_gnode *n;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	x = exec_get(e);
	n = gnode_get(h);
	if (!x || !n || !on)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&x->lock);
	*on = !node_off(x, n->o.id);
	pthread_mutex_unlock(&x->lock);
	return CUDA_SUCCESS;
}

/* ---- topology -------------------------------------------------------------------------------- */

static CUresult topo_graph(CUgraph h, struct ip_graph **out)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	*out = graph_get(h);
	if (!*out)
		return CUDA_ERROR_INVALID_VALUE;
	return graph_sync(*out);
}

/* Up to *num of list's n entries into out (when out), and *num = n (the driver's convention). */
static void give(CUgraphNode *out, size_t *num, struct ip_gnode **list, size_t n)
{
	if (out)
		for (size_t i = 0; i < n && i < *num; i++)
			out[i] = (CUgraphNode)list[i];
	if (out && *num > n)
		for (size_t i = n; i < *num; i++)
			out[i] = NULL;
	*num = n;
}

IP_API CUresult CUDAAPI cuGraphGetNodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
	struct ip_graph *g;
	CUresult r;
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	r = topo_graph(h, &g);
	if (r == CUDA_SUCCESS)
		give(nodes, num, g->nodes, g->nnodes);
	return r;
}

IP_API CUresult CUDAAPI cuGraphGetRootNodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
	struct ip_gnode **roots;
	struct ip_graph *g;
	size_t n = 0;
	CUresult r;
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	r = topo_graph(h, &g);
	if (r != CUDA_SUCCESS)
		return r;
	roots = malloc((g->nnodes + 1) * sizeof(*roots));
	if (!roots)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < g->nnodes; i++)
		if (!g->nodes[i]->ndeps)
			roots[n++] = g->nodes[i];
	give(nodes, num, roots, n);
	free(roots);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph h, CUgraphNode *from, CUgraphNode *to,
					   CUgraphEdgeData *ed, size_t *num)
{
	struct ip_graph *g;
	size_t n = 0;
	CUresult r;
	if (!num || (!from != !to) || (ed && !from))
		return CUDA_ERROR_INVALID_VALUE;
	r = topo_graph(h, &g);
	if (r != CUDA_SUCCESS)
		return r;
	for (size_t i = 0; i < g->nnodes; i++)
		for (size_t d = 0; d < g->nodes[i]->ndeps; d++, n++)
			if (from && n < *num) {
				from[n] = (CUgraphNode)g->nodes[i]->deps[d];
				to[n] = (CUgraphNode)g->nodes[i];
				if (ed)
					memset(&ed[n], 0, sizeof(*ed));
			}
	for (size_t i = n; from && i < *num; i++) {
		from[i] = to[i] = NULL;
		if (ed)
			memset(&ed[i], 0, sizeof(*ed));
	}
	*num = n;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuGraphGetEdges(CUgraph h, CUgraphNode *from, CUgraphNode *to,
					size_t *num)
{
	return cuGraphGetEdges_v2(h, from, to, NULL, num);
}

static CUresult node_topo(CUgraphNode h, struct ip_gnode **out)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	*out = gnode_get(h);
	if (!*out)
		return CUDA_ERROR_INVALID_VALUE;
	return graph_sync((*out)->g);
}

IP_API CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode h, CUgraphNode *deps,
						      CUgraphEdgeData *ed, size_t *num)
{
	struct ip_gnode *n;
	CUresult r;
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	r = node_topo(h, &n);
	if (r != CUDA_SUCCESS)
		return r;
	for (size_t i = 0; ed && deps && i < *num; i++)
		memset(&ed[i], 0, sizeof(*ed));
	give(deps, num, n->deps, n->ndeps);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode *deps, size_t *num)
{
	return cuGraphNodeGetDependencies_v2(h, deps, NULL, num);
}

IP_API CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode h, CUgraphNode *out,
							CUgraphEdgeData *ed, size_t *num)
{
	struct ip_gnode *n, **v;
	size_t k = 0;
	CUresult r;
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	r = node_topo(h, &n);
	if (r != CUDA_SUCCESS)
		return r;
	v = malloc((n->g->nnodes + 1) * sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n->g->nnodes; i++)
		if (has_dep(n->g->nodes[i], n))
			v[k++] = n->g->nodes[i];
	for (size_t i = 0; ed && out && i < *num; i++)
		memset(&ed[i], 0, sizeof(*ed));
	give(out, num, v, k);
	free(v);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode h, CUgraphNode *out, size_t *num)
{
	return cuGraphNodeGetDependentNodes_v2(h, out, NULL, num);
}

static CUresult edges(CUgraph h, const CUgraphNode *from, const CUgraphNode *to,
		      const CUgraphEdgeData *ed, size_t n, int add)
{
	Rgpu__GraphEdit m = RGPU__GRAPH_EDIT__INIT;
	struct ip_gnode **a = NULL, **b = NULL;
	uint64_t *fa = NULL, *fb = NULL;
	struct ip_graph *g;
	CUresult r = topo_graph(h, &g);

	if (r != CUDA_SUCCESS)
		return r;
	if (n && (!from || !to))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; ed && i < n; i++)
		if (ed[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || ed[i].from_port ||
		    ed[i].to_port) {
			pr_warn("graph edges other than default ones are not supported");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	if (!n)
		return CUDA_SUCCESS;
	a = malloc(n * sizeof(*a));
	b = malloc(n * sizeof(*b));
	fa = malloc(n * sizeof(*fa));
	fb = malloc(n * sizeof(*fb));
	if (!a || !b || !fa || !fb)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
		a[i] = gnode_get(from[i]);
		b[i] = gnode_get(to[i]);
		if (!a[i] || !b[i] || a[i]->g != g || b[i]->g != g || a[i] == b[i] ||
		    has_dep(b[i], a[i]) != !add)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			fa[i] = a[i]->o.id, fb[i] = b[i]->o.id;
	}
	if (r == CUDA_SUCCESS) {
		m.graph = g->o.id;
		m.ctx = g->ctx->o.id;
		m.op = add ? RGPU__GRAPH_EDIT_OP__EDGES_ADD : RGPU__GRAPH_EDIT_OP__EDGES_REMOVE;
		m.from = fa;
		m.n_from = n;
		m.to = fb;
		m.n_to = n;
		r = ip_call_status(RGPU_MSG_GRAPH_EDIT, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	}
	if (r == CUDA_SUCCESS) {
		ip_statelog_edit(RGPU_MSG_GRAPH_EDIT, &m.base, NULL, 0);
		for (size_t i = 0; i < n; i++)
			if (add && add_dep(b[i], a[i]))
				r = CUDA_ERROR_OUT_OF_MEMORY;
			else if (!add)
				drop_dep(b[i], a[i]);
	}
	free(a);
	free(b);
	free(fa);
	free(fb);
	return r;
}

IP_API CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from,
						  const CUgraphNode *to, const CUgraphEdgeData *ed,
						  size_t n)
{
	return edges(g, from, to, ed, n, 1);
}

IP_API CUresult CUDAAPI cuGraphAddDependencies(CUgraph g, const CUgraphNode *from,
					       const CUgraphNode *to, size_t n)
{
	return edges(g, from, to, NULL, n, 1);
}

IP_API CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
						     const CUgraphNode *to,
						     const CUgraphEdgeData *ed, size_t n)
{
	return edges(g, from, to, ed, n, 0);
}

IP_API CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from,
						  const CUgraphNode *to, size_t n)
{
	return edges(g, from, to, NULL, n, 0);
}

IP_API CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode h)
{
	Rgpu__GraphEdit m = RGPU__GRAPH_EDIT__INIT;
	struct ip_gnode *n;
	CUresult r = node_topo(h, &n);

	if (r != CUDA_SUCCESS)
		return r;
	m.graph = n->g->o.id;
	m.ctx = n->g->ctx->o.id;
	m.op = RGPU__GRAPH_EDIT_OP__NODE_DESTROY;
	m.node = n->o.id;
	r = ip_call_status(RGPU_MSG_GRAPH_EDIT, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (r != CUDA_SUCCESS)
		return r;
	ip_statelog_edit(RGPU_MSG_GRAPH_EDIT, &m.base, NULL, 0);
	node_unlist(n);
	node_kill(n);
	return CUDA_SUCCESS;
}

/* ---- clones ---------------------------------------------------------------------------------- */

static CUresult params_copy(struct ip_gnode *to, const struct ip_gnode *from)
{
	to->type = from->type;
	to->pctx = from->pctx;
	to->known = from->known;
	if (!from->known)
		return CUDA_SUCCESS;
	switch (from->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		to->known = 0;
		if (kernel_copy(to, &from->k.p) != CUDA_SUCCESS)
			return CUDA_ERROR_OUT_OF_MEMORY;
		to->known = 1;
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		to->c = from->c;
		if (to->c.scratch)
			atomic_fetch_add(&to->c.scratch->refs, 1);
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEMSET: to->s = from->s; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_HOST: to->h = from->h; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT: to->ev = from->ev; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		to->a.p = from->a.p;
		to->a.owned = 0; /* the original's graph owns it */
		return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_MEM_FREE: to->freed = from->freed; return CUDA_SUCCESS;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		/* the clone's node has a copy of the graph on the worker, not here */
		to->ch.copy = NULL;
		to->ch.nhc = 0;
		to->ch.hc = from->ch.nhc ? malloc(from->ch.nhc * sizeof(*to->ch.hc)) : NULL;
		if (from->ch.nhc && !to->ch.hc) {
			to->known = 0;
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (size_t i = 0; i < from->ch.nhc; i++) {
			to->ch.hc[i] = from->ch.hc[i];
			atomic_fetch_add(&to->ch.hc[i].scratch->refs, 1);
		}
		to->ch.nhc = from->ch.nhc;
		return CUDA_SUCCESS;
	default:
		to->known = 0;
		return CUDA_SUCCESS;
	}
}

IP_API CUresult CUDAAPI cuGraphClone(CUgraph *out, CUgraph h)
{
	Rgpu__GraphClone m = RGPU__GRAPH_CLONE__INIT;
	Rgpu__GraphAt at = RGPU__GRAPH_AT__INIT;
	uint64_t *orig = NULL, *copy = NULL;
	struct ip_graph *g, *c;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = topo_graph(h, &g);
	if (r != CUDA_SUCCESS)
		return r;
	c = ip_obj_new(sizeof(*c), ST_KIND_GRAPH, g->ctx);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->ctx = g->ctx;
	orig = calloc(g->nnodes + 1, sizeof(*orig));
	copy = calloc(g->nnodes + 1, sizeof(*copy));
	if (!orig || !copy)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nnodes; i++) {
		struct ip_gnode *n = node_new(c, g->nodes[i]->type);
		if (!n || params_copy(n, g->nodes[i]) != CUDA_SUCCESS) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		n->orig = g->nodes[i];
		orig[i] = g->nodes[i]->o.id;
		copy[i] = n->o.id;
	}
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->nnodes; i++)
		for (size_t d = 0; d < g->nodes[i]->ndeps && r == CUDA_SUCCESS; d++) {
			size_t k = 0;
			while (g->nodes[k] != g->nodes[i]->deps[d])
				k++;
			if (add_dep(c->nodes[i], c->nodes[k]))
				r = CUDA_ERROR_OUT_OF_MEMORY;
		}
	if (r == CUDA_SUCCESS) {
		ip_statelog_graph_at(g->o.id, &at);
		m.graph = g->o.id;
		m.clone = c->o.id;
		m.ctx = g->ctx->o.id;
		m.orig = orig;
		m.n_orig = g->nnodes;
		m.copy = copy;
		m.n_copy = g->nnodes;
		m.src = &at;
		r = ip_call_status(RGPU_MSG_GRAPH_CLONE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	}
	free(orig);
	free(copy);
	if (r != CUDA_SUCCESS) {
		graph_free_nodes(c);
		ip_obj_unregister(&c->o);
		return r;
	}
	c->synced = 1;
	*out = (CUgraph)c;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode orig, CUgraph clone)
{
	struct ip_gnode *o;
	struct ip_graph *c;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	o = gnode_get(orig);
	c = graph_get(clone);
	if (!out || !o || !c)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i]->orig == o) {
			*out = (CUgraphNode)c->nodes[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- executable graphs ----------------------------------------------------------------------- */

static void hcopies_free(struct ip_hcopy *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		scratch_put(v[i].scratch);
	free(v);
}

/* What an exec made from g moves at each launch: the host sides of g's memcpy nodes. */
CUresult ip_exec_snapshot(struct ip_graph_exec *e, struct ip_graph *g)
{
	g->instantiated = 1;
	e->from = g;
	return host_sides(g, &e->hcopies, &e->nhcopies);
}

void ip_exec_forget(struct ip_graph_exec *e)
{
	pthread_mutex_lock(&e->lock);
	hcopies_free(e->hcopies, e->nhcopies);
	e->hcopies = NULL;
	e->nhcopies = 0;
	free(e->disabled);
	e->disabled = NULL;
	e->ndisabled = 0;
	pthread_mutex_unlock(&e->lock);
}

/* New parameters of memcpy node n in exec e: its launch-time move follows them. */
static void exec_hcopy_update(struct ip_graph_exec *e, const struct ip_gnode *n)
{
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nhcopies && e->hcopies[i].node != n->o.id; i++)
		;
	if (i < e->nhcopies) {
		scratch_put(e->hcopies[i].scratch);
		if (n->c.scratch) {
			hcopy_of(n, &e->hcopies[i]);
		} else {
			e->hcopies[i] = e->hcopies[--e->nhcopies];
		}
	} else if (n->c.scratch) {
		struct ip_hcopy *v = realloc(e->hcopies, (e->nhcopies + 1) * sizeof(*v));
		if (v) {
			e->hcopies = v;
			hcopy_of(n, &e->hcopies[e->nhcopies++]);
		} else {
			pr_warn("out of memory: a memcpy node's host side will not move");
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/*
 * Around a launch of exec e on stream s: before (after = 0) its host sides move to the device,
 * after (after = 1) the device's bytes to them, in the launch's stream order.
 */
CUresult ip_exec_hcopies(struct ip_graph_exec *e, CUstream s, int ptds, int after)
{
	struct ip_stream *so;
	struct ip_ctx *c;
	CUresult r = CUDA_SUCCESS;

	if (!e->nhcopies)
		return CUDA_SUCCESS;
	r = ip_stream_get(s, ptds, &c, &so);
	if (r == CUDA_SUCCESS && ip_capture_of(so)) {
		pr_warn("launching a graph with host memcpy nodes into a stream capture is not "
			"supported");
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; r == CUDA_SUCCESS && i < e->nhcopies; i++)
		if (!node_off(e, e->hcopies[i].node) && e->hcopies[i].to_device == !after)
			r = ptds ? cuMemcpy3DAsync_v2_ptsz(&e->hcopies[i].xfer, s)
				 : cuMemcpy3DAsync_v2(&e->hcopies[i].xfer, s);
	pthread_mutex_unlock(&e->lock);
	return r;
}

static CUresult exec_update(CUgraphExec he, CUgraph hg, CUgraphExecUpdateResultInfo *info)
{
	Rgpu__GraphExecUpdate m = RGPU__GRAPH_EXEC_UPDATE__INIT;
	Rgpu__GraphExecUpdateReply *rep = NULL;
	Rgpu__GraphAt at = RGPU__GRAPH_AT__INIT;
	struct ip_graph_exec *e;
	struct ip_graph *g;
	CUresult r = topo_graph(hg, &g);

	if (r != CUDA_SUCCESS)
		return r;
	e = exec_get(he);
	if (!e || !info)
		return CUDA_ERROR_INVALID_VALUE;
	memset(info, 0, sizeof(*info));
	ip_statelog_graph_at(g->o.id, &at);
	m.exec = e->o.id;
	m.graph = g->o.id;
	m.ctx = e->ctx->o.id;
	m.src = &at;
	r = ip_call(RGPU_MSG_GRAPH_EXEC_UPDATE, &m.base, NULL, 0, NULL, 0,
		    &rgpu__graph_exec_update_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS) {
		r = (CUresult)rep->result;
		info->result = (CUgraphExecUpdateResult)rep->update_result;
		info->errorNode =
		    rep->error_node ? (CUgraphNode)node_by_id(g, rep->error_node) : NULL;
		info->errorFromNode = rep->error_from_node && e->from && ip_obj_get(e->from, ST_KIND_GRAPH)
					      ? (CUgraphNode)node_by_id(e->from, rep->error_from_node)
					      : NULL;
	}
	if (r == CUDA_SUCCESS) {
		ip_statelog_edit(RGPU_MSG_GRAPH_EXEC_UPDATE, &m.base, NULL, 0);
		/* the exec's host sides are now g's */
		struct ip_hcopy *old = e->hcopies;
		size_t nold = e->nhcopies;
		struct ip_hcopy *now = NULL;
		size_t nnow = 0;
		if (host_sides(g, &now, &nnow) != CUDA_SUCCESS)
			pr_warn("out of memory: an updated exec's host memcpy sides will not move");
		pthread_mutex_lock(&e->lock);
		e->hcopies = now;
		e->nhcopies = nnow;
		pthread_mutex_unlock(&e->lock);
		hcopies_free(old, nold);
	}
	if (rep)
		rgpu__graph_exec_update_reply__free_unpacked(rep, NULL);
	return r;
}

IP_API CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g,
					     CUgraphExecUpdateResultInfo *info)
{
	return exec_update(e, g, info);
}

IP_API CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err_node,
					  CUgraphExecUpdateResult *result)
{
	CUgraphExecUpdateResultInfo info = {0};
	CUresult r;

	if (!err_node || !result)
		return CUDA_ERROR_INVALID_VALUE;
	r = exec_update(e, g, &info);
	*err_node = info.errorNode;
	*result = info.result;
	return r;
}

/* ---- the dot file ----------------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph h, const char *path, unsigned int flags)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	Rgpu__GraphDotReply *rep = NULL;
	struct ip_graph *g;
	CUresult r = ip_check_init();
	FILE *fp;

	if (r != CUDA_SUCCESS)
		return r;
	g = graph_get(h);
	if (!g || !path)
		return CUDA_ERROR_INVALID_VALUE;
	m.graph = g->o.id;
	m.ctx = g->ctx->o.id;
	m.flags = flags;
	r = ip_call(RGPU_MSG_GRAPH_DOT, &m.base, NULL, 0, NULL, 0, &rgpu__graph_dot_reply__descriptor,
		    (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS)
		r = (CUresult)rep->result;
	if (r == CUDA_SUCCESS) {
		/* written here: the path is this machine's */
		fp = fopen(path, "wb");
		if (!fp || fwrite(rep->text.data, 1, rep->text.len, fp) != rep->text.len)
			r = CUDA_ERROR_OPERATING_SYSTEM;
		if (fp && fclose(fp) != 0)
			r = CUDA_ERROR_OPERATING_SYSTEM;
	}
	if (rep)
		rgpu__graph_dot_reply__free_unpacked(rep, NULL);
	return r;
}

/* cuStreamBeginCaptureToGraph's graph and the ids of its nodes deps (*ids: malloc'd). */
CUresult ip_graph_into(CUgraph h, const CUgraphNode *deps, const CUgraphEdgeData *ed, size_t n,
		       struct ip_graph **out, uint64_t **ids)
{
	struct ip_gnode **dv = NULL;
	struct ip_graph *g;
	CUresult r;

	*ids = NULL;
	g = graph_get(h);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; ed && i < n; i++)
		if (ed[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || ed[i].from_port ||
		    ed[i].to_port) {
			pr_warn("cuStreamBeginCaptureToGraph: edges other than default ones are not "
				"supported");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	r = deps_check(g, deps, n, &dv);
	if (r == CUDA_SUCCESS && n && !(*ids = malloc(n * sizeof(**ids))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		(*ids)[i] = dv[i]->o.id;
	free(dv);
	*out = g;
	return r;
}

/* ---- capture dependency lists ------------------------------------------------------------------ */

CUresult ip_capture_deps(struct ip_stream *s, struct ip_capture *cap, const CUgraphNode **deps,
			 size_t *ndeps)
{
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	Rgpu__CaptureInfoReply *rep = NULL;
	Rgpu__GraphBind b = RGPU__GRAPH_BIND__INIT;
	struct ip_graph *g = cap->graph;
	uint32_t *idx = NULL;
	uint64_t *ids = NULL;
	size_t nb = 0;
	CUresult r;

	m.stream = s->o.id;
	m.graph = g->o.id;
	m.ctx = s->ctx->o.id;
	r = ip_call(RGPU_MSG_CAPTURE_INFO, &m.base, NULL, 0, NULL, 0,
		    &rgpu__capture_info_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS)
		r = (CUresult)rep->result;
	if (r == CUDA_SUCCESS) {
		CUgraphNode *v = realloc(cap->deps, (rep->n_id + 1) * sizeof(*v));
		idx = calloc(rep->n_id + 1, sizeof(*idx));
		ids = calloc(rep->n_id + 1, sizeof(*ids));
		if (!v || !idx || !ids)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		if (v)
			cap->deps = v;
	}
	g->opaque = 1;
	g->capturing = cap;
	for (size_t i = 0; r == CUDA_SUCCESS && i < rep->n_id; i++) {
		struct ip_gnode *n = rep->id[i] ? node_by_id(g, rep->id[i]) : NULL;
		if (!n) {
			/* a captured node: its type and edges come with the next listing */
			n = node_new(g, CU_GRAPH_NODE_TYPE_EMPTY);
			if (!n) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			idx[nb] = (uint32_t)i;
			ids[nb++] = n->o.id;
			g->synced = 0;
		}
		cap->deps[i] = (CUgraphNode)n;
	}
	if (r == CUDA_SUCCESS && nb) {
		b.graph = g->o.id;
		b.ctx = s->ctx->o.id;
		b.index = idx;
		b.n_index = nb;
		b.id = ids;
		b.n_id = nb;
		b.capture = 1;
		b.stream = s->o.id;
		r = ip_post(RGPU_MSG_GRAPH_BIND, &b.base, NULL, 0);
		if (r == CUDA_SUCCESS)
			ip_statelog_edit(RGPU_MSG_GRAPH_BIND, &b.base, NULL, 0);
	}
	if (r == CUDA_SUCCESS) {
		cap->ndeps = rep->n_id;
		*deps = cap->ndeps ? cap->deps : NULL;
		*ndeps = cap->ndeps;
		/* a node named now gets its type and edges when a question needs them (node_topo) */
	}
	free(idx);
	free(ids);
	if (rep)
		rgpu__capture_info_reply__free_unpacked(rep, NULL);
	return r;
}

CUresult ip_capture_update_deps(struct ip_stream *s, struct ip_capture *cap,
				const CUgraphNode *deps, const CUgraphEdgeData *ed, size_t n,
				unsigned flags)
{
	Rgpu__CaptureDeps m = RGPU__CAPTURE_DEPS__INIT;
	uint64_t *ids = NULL;
	CUresult r = CUDA_SUCCESS;

	if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; ed && i < n; i++)
		if (ed[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || ed[i].from_port ||
		    ed[i].to_port) {
			pr_warn("capture dependencies with edge data are not supported");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	if (n && !(ids = malloc(n * sizeof(*ids))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
		struct ip_gnode *x = gnode_get(deps[i]);
		if (!x || x->g != cap->graph)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			ids[i] = x->o.id;
	}
	if (r == CUDA_SUCCESS) {
		m.stream = s->o.id;
		m.ctx = s->ctx->o.id;
		m.graph = cap->graph->o.id;
		m.nodes = ids;
		m.n_nodes = n;
		m.flags = flags;
		r = ip_call_status(RGPU_MSG_CAPTURE_DEPS, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	}
	if (r == CUDA_SUCCESS)
		ip_statelog_edit(RGPU_MSG_CAPTURE_DEPS, &m.base, NULL, 0);
	free(ids);
	return r;
}
