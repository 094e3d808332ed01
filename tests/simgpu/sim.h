/*
 * simgpu's private header: the objects behind the driver handles and the few functions the
 * areas (device, ctx, mem, stream, module, elf, launch, graph, capture, gexec) call in each
 * other; graph.h holds what only the last three share.
 *
 * Every handle the caller holds is a pointer to one of these structs, registered in a handle
 * table (obj.c) so that a stale or foreign handle is refused with an error, never dereferenced.
 *
 * Locks, always taken in this order, never held while waiting for a stream:
 *   sim_lock        the object world (contexts, modules, libraries, event and module lists)
 *   sim_sched       stream queues, sequence numbers, event records, captures, graphs
 *   the range lock  (mem.c) device memory known to simgpu
 *   out_lock        (launch.c) every context's device printf output; innermost, held briefly
 */
#ifndef SIMGPU_SIM_H
#define SIMGPU_SIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Everything cuda.h declares is the exported API; the rest of the library is hidden. */
#pragma GCC visibility push(default)
#include <cuda.h>
/*
 * Legacy entry points that cuda.h declares only for the driver's own build (or hides behind
 * a versioning macro); old binaries still bind to them by name.
 */
#undef cuEventElapsedTime
#undef cuDeviceGetUuid
#undef cuStreamBeginCapture
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream);
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream,
					   CUstreamCaptureStatus *captureStatus_out,
					   cuuint64_t *id_out, CUgraph *graph_out,
					   const CUgraphNode **dependencies_out,
					   size_t *numDependencies_out);
/* the graph entry points of before CUDA 12.3 (no edge data) and 12.0 (no kern, ctx) */
#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes
#undef cuGraphAddDependencies
#undef cuGraphRemoveDependencies
#undef cuStreamUpdateCaptureDependencies
#undef cuGraphExecUpdate
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphAddNode
CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
				 size_t *numEdges);
CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
					    size_t *numDependencies);
CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
					      size_t *numDependentNodes);
CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
					const CUgraphNode *to, size_t numDependencies);
CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from,
					   const CUgraphNode *to, size_t numDependencies);
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
						   size_t numDependencies, unsigned int flags);
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
				   CUgraphNode *hErrorNode_out,
				   CUgraphExecUpdateResult *updateResult_out);
CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				      const CUgraphNode *dependencies, size_t numDependencies,
				      const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
					    CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
					    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
						const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				const CUgraphNode *dependencies, size_t numDependencies,
				CUgraphNodeParams *nodeParams);
#pragma GCC visibility pop

#include "simgpu.h"

#define SIM_GRANULE (2ull << 20) /* VMM granularity, minimum and recommended */
#define SIM_MAX_DEVICES 16
#define SIM_DRIVER_VERSION 13000
#define SIM_SM 90

/* --- global state (device.c) ------------------------------------------------------------- */

struct sim_state {
	int inited; /* atomic: cuInit has succeeded */
	int ndev;
	uint64_t mem_total; /* per device, an accounting limit */
	int log;	    /* SIMGPU_LOG=1 */
	FILE *logf;	    /* where: the stderr of cuInit's time (device.c) */
};
extern struct sim_state sim;
extern pthread_mutex_t sim_lock;

#define SIM_ENTER()                                                                                \
	do {                                                                                       \
		if (!__atomic_load_n(&sim.inited, __ATOMIC_ACQUIRE))                               \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
	} while (0)

#define sim_log(fmt, ...)                                                                          \
	do {                                                                                       \
		if (sim.log)                                                                       \
			fprintf(sim.logf, "simgpu: " fmt "\n", ##__VA_ARGS__);                     \
	} while (0)

bool sim_dev_valid(CUdevice dev);
CUresult sim_mem_charge(int dev, uint64_t bytes);
void sim_mem_uncharge(int dev, uint64_t bytes);
uint64_t sim_mem_used(int dev);

/* --- handles (obj.c) ---------------------------------------------------------------------- */

enum sim_kind {
	SIM_CTX = 1,
	SIM_STREAM = 2,
	SIM_EVENT = 3,
	SIM_MODULE = 4,
	SIM_FUNC = 5,
	SIM_LIBRARY = 6,
	SIM_KERNEL = 7,
	SIM_MEMHANDLE = 8,
	SIM_GRAPH = 9,
	SIM_GRAPHEXEC = 10,
	SIM_ARRAY = 11,
	SIM_MIPMAP = 12,
	SIM_GNODE = 13,
};

int sim_handle_add(const void *h, int kind);
void sim_handle_del(const void *h);
int sim_handle_kind(const void *h); /* 0 when h is not a live handle */
static inline bool sim_handle_is(const void *h, int kind)
{
	return h && sim_handle_kind(h) == kind;
}

/* --- small intrusive list ----------------------------------------------------------------- */

struct sim_link {
	struct sim_link *prev, *next;
};
static inline void sim_list_init(struct sim_link *h)
{
	h->prev = h->next = h;
}
static inline void sim_list_add(struct sim_link *h, struct sim_link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}
static inline void sim_list_del(struct sim_link *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}
static inline bool sim_list_empty(const struct sim_link *h)
{
	return h->next == h;
}
#define sim_entry(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

/* --- contexts (ctx.c) --------------------------------------------------------------------- */

struct sim_stream;

struct sim_ctx {
	struct sim_ctx *dead_next; /* destroyed: the list of kept structs (ctx.c) */
	int dev;
	unsigned flags;
	bool primary;
	bool active;   /* primary: retained at least once since the last teardown */
	int prim_refs; /* primary: retain count */
	unsigned long long id;
	size_t limits[CU_LIMIT_MAX];
	int cache_config, shared_config; /* cuCtxSetCacheConfig, cuCtxSetSharedMemConfig */
	CUresult sticky; /* a kernel fault poisons the context, as on a GPU (sim_sched) */
	/* device printf (stdout) and assert messages (stderr) not yet flushed (launch.c) */
	char *out[2];
	size_t out_len[2];
	struct sim_stream *null_stream;
	struct sim_link streams; /* every stream with a live thread, under sim_sched */
	struct sim_link events;	 /* under sim_lock */
	struct sim_link modules; /* under sim_lock */
};

CUresult sim_ctx_current(struct sim_ctx **out);
CUresult sim_ctx_get(CUcontext c, struct sim_ctx **out); /* NULL means the current one */
CUresult sim_ctx_sync(struct sim_ctx *ctx);
void sim_device_sync(void); /* wait for all work of every context */
void sim_ctx_init_primaries(void);
void sim_ctx_stop_streams(struct sim_ctx *ctx); /* stream.c */

/* --- memory (mem.c) ----------------------------------------------------------------------- */

enum sim_range_kind {
	SIM_RANGE_ALLOC = 1,  /* cuMemAlloc */
	SIM_RANGE_VMM = 2,    /* cuMemMap into a reservation */
	SIM_RANGE_GLOBAL = 3, /* a module's __device__ variable */
	SIM_RANGE_HOST = 4,   /* pinned or registered host memory (a device pointer under UVA) */
	SIM_RANGE_ARRAY = 5,  /* a CUDA array's blob (array.c): reached only through its handle */
	SIM_RANGE_MANAGED = 6, /* a module's __managed__ variable */
};

enum { SIM_PROT_NONE = 0, SIM_PROT_READ = 1, SIM_PROT_RW = 3 };

int sim_range_add(uintptr_t base, size_t size, int kind, int prot, void *owner);
void sim_range_del(uintptr_t base);
bool sim_dev_ok(uintptr_t p, size_t n, int prot);
void sim_free_ctx_allocs(struct sim_ctx *ctx);

/* --- arrays (array.c) ----------------------------------------------------------------------- */

/*
 * sim_array_box() - where the box (x bytes, y, z) + (w bytes, h rows, d slices) of array a lies
 * in its blob (device memory to mem.c's copies): its first byte, row and slice pitch. Returns
 * CUDA_ERROR_INVALID_HANDLE (not an array) or CUDA_ERROR_INVALID_VALUE (the box does not fit).
 */
CUresult sim_array_box(CUarray a, size_t x, size_t y, size_t z, size_t w, size_t h, size_t d,
		       uintptr_t *at, size_t *pitch, size_t *slice);

/* --- streams, events and their operations (stream.c) -------------------------------------- */

enum sim_op_type {
	SIM_OP_COPY = 1,
	SIM_OP_SET = 2,
	SIM_OP_KERNEL = 3,
	SIM_OP_HOSTFN = 4,
	SIM_OP_CALLBACK = 5,
	SIM_OP_RECORD = 6,
	SIM_OP_WAIT = 7,
	SIM_OP_COND = 8, /* a graph launch's conditional node, or its handles' reset (cond.c) */
};

struct sim_dep {
	struct sim_stream *s;
	uint64_t seq;
};

struct sim_module;
struct sim_event;
struct sim_func;
struct sim_gnode;
struct sim_cond;
struct sim_condvals;

/* a set of graph nodes (graph.h): what the next node captured on a stream depends on */
struct sim_nodeset {
	struct sim_gnode **v;
	size_t n, cap;
};

struct sim_op {
	struct sim_op *next;
	int type;
	uint64_t seq;
	unsigned ndeps;
	struct sim_dep *deps;
	union {
		struct {
			uintptr_t dst, src;
			size_t n;
			bool dst_dev, src_dev; /* checked against the ranges when it runs */
			void *owned; /* snapshot of a pageable source, freed with the op */
		} copy;
		struct {
			uintptr_t dst;
			size_t pitch, width, height; /* width in elements, pitch in bytes */
			unsigned value, esize;
		} set;
		struct {
			sim_kernel_fn fn;
			struct sim_func *func;	/* what runs (its name, its parameter layout) */
			struct sim_module *mod; /* a reference */
			struct sim_launch l;
			/* one block: the nparams pointers of l.params, then the parameter bytes */
			void *blk;
			size_t blk_size;
			/* a graph launch's: the values of its conditional handles, a reference */
			struct sim_condvals *vals;
		} k;
		struct {
			CUhostFn fn;
			void *ud;
		} host;
		struct {
			CUstreamCallback fn;
			void *ud;
			CUstream h;
		} cb;
		struct {
			struct sim_event *ev; /* a reference */
			uint64_t gen;
			unsigned flags;
		} ev;
		struct {
			struct sim_cond *c; /* owned */
		} cond;
	} u;
};

struct sim_capture;

#define SIM_STREAM_ATTRS 17
struct sim_stream {
	struct sim_link node; /* in ctx->streams */
	struct sim_link all;  /* in the list of every stream */
	struct sim_ctx *ctx;
	unsigned flags;
	int priority;
	bool per_thread;
	pthread_t per_thread_owner;
	int refs;	    /* handle, thread, deps and event records; under sim_sched */
	bool stop;	    /* drain and exit */
	uint64_t submitted; /* seq of the last op queued */
	uint64_t completed; /* seq of the last op done */
	struct sim_op *head, *tail;
	struct sim_capture *capture;
	struct sim_nodeset cap_deps; /* capturing: what its next node depends on (capture.c) */
	CUgraphEdgeData *cap_edata;  /* default edge data for them (cuStreamGetCaptureInfo) */
	/* cuStreamSetAttribute's values by CUstreamAttrID, and which were set (stream.c) */
	CUstreamAttrValue attr[SIM_STREAM_ATTRS];
	bool attr_set[SIM_STREAM_ATTRS];
};

struct sim_event {
	struct sim_link node; /* in ctx->events */
	struct sim_ctx *ctx;
	unsigned flags;
	int refs; /* under sim_sched */
	/* the last record, under sim_sched */
	struct sim_stream *rec_stream;
	uint64_t rec_seq, gen;
	uint64_t stamp_ns;
	unsigned long long cap_id;    /* recorded into this capture rather than a stream */
	struct sim_nodeset cap_nodes; /* and there, the nodes it marks (capture.c) */
};

extern pthread_mutex_t sim_sched;
extern pthread_cond_t sim_progress;

CUresult sim_stream_get(CUstream h, struct sim_stream **out);
struct sim_stream *sim_stream_new(struct sim_ctx *ctx, unsigned flags, int prio);
void sim_stream_stop(struct sim_stream *s);
struct sim_op *sim_op_new(int type);
struct sim_op *sim_op_clone(const struct sim_op *op);
void sim_op_free(struct sim_op *op);
void sim_op_free_locked(struct sim_op *op); /* with sim_sched held */
/* sim_op_run() - on s's thread, without sim_sched: run op (a fault poisons s's context) */
void sim_op_run(struct sim_stream *s, struct sim_op *op);
CUresult sim_enqueue(struct sim_stream *s, struct sim_op *op, uint64_t *seq);
CUresult sim_enqueue_list(struct sim_stream *s, struct sim_op *const *ops, unsigned n);
CUresult sim_wait_seq(struct sim_stream *s, uint64_t seq);
bool sim_stream_capturing(struct sim_stream *s);
void sim_event_put_locked(struct sim_event *ev);
void sim_ctx_drop_events(struct sim_ctx *ctx);
CUresult sim_copy_run(const struct sim_op *op); /* mem.c */
CUresult sim_set_run(const struct sim_op *op);	/* mem.c */
/*
 * sim_copy3d_ops() - the row copies of a CUDA_MEMCPY3D, checked as cuMemcpy3DAsync checks
 * them, as a list linked by ->next (NULL: nothing to copy). sim_set_op() - a memset of
 * width elements of esize bytes on each of height rows pitch bytes apart, checked as the
 * cuMemsetD2D* functions check it (*out NULL: nothing to set). Both in mem.c.
 */
CUresult sim_copy3d_ops(const CUDA_MEMCPY3D *c, struct sim_op **out);
CUresult sim_set_op(CUdeviceptr dst, size_t pitch, unsigned value, unsigned esize, size_t width,
		    size_t height, struct sim_op **out);

/* --- conditional nodes as they run (cond.c) ------------------------------------------------ */

void sim_condvals_get(struct sim_condvals *vals); /* NULL: nothing */
void sim_condvals_put(struct sim_condvals *vals);
void sim_cond_run(struct sim_stream *s, struct sim_cond *c);
void sim_cond_free(struct sim_cond *c, bool locked);
void sim_cond_scope(struct sim_condvals *vals);

/* --- stream capture (capture.c), called under sim_sched ------------------------------------ */

CUresult sim_capture_op(struct sim_stream *s, struct sim_op *op, bool *consumed);
CUresult sim_capture_copy3d(struct sim_stream *s, const CUDA_MEMCPY3D *c, bool *captured);
bool sim_capture_blocks_legacy(struct sim_ctx *ctx);
void sim_capture_abandon(struct sim_stream *s);

/* --- images (elf.c) ----------------------------------------------------------------------- */

struct sim_param {
	uint32_t offset, size;
};

struct sim_kernel_info {
	char *name;
	unsigned nparams;
	struct sim_param *params;
	int regs, local_bytes, shared_bytes, const_bytes;
};

struct sim_global_info {
	char *name;
	size_t size;
	unsigned char *init; /* NULL: zero-filled */
	int managed;         /* a __managed__ variable (st_other bit 4 of its ELF symbol) */
};

struct sim_image {
	unsigned nkernels, nglobals;
	struct sim_kernel_info *kernels;
	struct sim_global_info *globals;
	int binary_version; /* SM of the ELF used, 0 for PTX */
	int ptx_version;
	int refs; /* atomic: a library and each module made from it */
};

CUresult sim_image_load(const void *p, struct sim_image **out);
void sim_image_free(struct sim_image *img); /* drops a reference */

/* --- modules, functions, libraries, kernels (module.c) ------------------------------------ */

struct sim_fattr {
	int max_dyn_smem, carveout, cache_mode_ca;
	int cluster_must, cluster[3], nonportable, sched_pref;
};

struct sim_func {
	struct sim_module *mod;
	const struct sim_kernel_info *ki;
	struct sim_fattr *attr; /* own, or the library kernel's */
	struct sim_fattr own;
	int cache_config, shared_config; /* cuFuncSetCacheConfig, cuFuncSetSharedMemConfig */
};

struct sim_library;

struct sim_module {
	struct sim_link node;	  /* in ctx->modules */
	struct sim_link lib_node; /* in lib->modules */
	struct sim_ctx *ctx;
	struct sim_image *img;
	struct sim_library *lib; /* NULL for cuModuleLoad* */
	struct sim_func *funcs;
	void **gmem; /* host memory of each global */
	int refs;    /* atomic: the handle plus each queued kernel */
};

CUresult sim_func_get(CUfunction f, struct sim_func **out); /* a CUfunction or a CUkernel */
CUresult sim_func_get_in(CUfunction f, struct sim_ctx *ctx, struct sim_func **out);
void sim_module_put(struct sim_module *m);
void sim_ctx_unload_modules(struct sim_ctx *ctx);

/* --- launch (launch.c) -------------------------------------------------------------------- */

sim_kernel_fn sim_kernel_lookup(const char *name);
CUresult sim_kernel_op(struct sim_func *f, const unsigned grid[3], const unsigned block[3],
		       unsigned smem, void **params, void **extra, struct sim_op **out);
void sim_kernel_run(struct sim_op *op, struct sim_ctx *ctx);
/* sim_ctx_flush_output() - write ctx's device printf and assert output, as the driver does */
void sim_ctx_flush_output(struct sim_ctx *ctx);

#endif
