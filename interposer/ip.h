/*
 * The interposer's private header: what its parts (session, objects, contexts, memory, modules,
 * launches, streams) share. Compiled with __CUDA_API_VERSION_INTERNAL so cuda.h declares every
 * exported symbol under its own name; the code therefore spells out versioned names
 * (cuMemAlloc_v2) exactly as the library exports them.
 */
#ifndef IP_H
#define IP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda.h>
#include <protobuf-c/protobuf-c.h>

#include "ip_dark.h"
#include "rgpu/statetrack.h"
#include "rgpu_msgs.h"
#include "vawindow.h"

#define IP_API __attribute__((visibility("default")))

#define IP_MAX_DEVICES 16
#define IP_CTX_STACK 64

/* ---- objects: every handle an application sees is one of these ---------------------------- */

/*
 * An object's kind is its state-log kind (enum st_kind, rgpu/statetrack.h): one enum for the
 * interposer, the server and the log. A CUmodule and a CUlibrary are both ST_KIND_MODULE
 * (ip_module.library tells them apart); a CUmemoryPool is ST_KIND_MEMPOOL.
 */

struct ip_ctx;

struct ip_obj {
	uint32_t kind;
	uint32_t dead;
	uint64_t id;            /* the session-wide id the server knows it by */
	struct ip_ctx *owner;   /* the context it lives in (NULL for contexts) */
	struct ip_obj *dead_next; /* unregistered: the next in the list that keeps the dead */
};

struct ip_ctx {
	struct ip_obj o;
	int device;
	unsigned flags;
	int primary;
	int refcount;             /* primary: retains; others: 1 */
	int tearing;              /* primary: its teardown runs, on thread tearing_by (ip.lock) */
	pthread_t tearing_by;
	int active;               /* exists on the server */
	unsigned long long uid;   /* cuCtxGetId */
	int prio_known, prio_least, prio_greatest; /* cuCtxGetStreamPriorityRange, once asked */
	_Atomic CUresult sticky;  /* a sticky fault the server reported (ctxcur.c) */
	struct ip_stream *node_stream; /* what graph node work is recorded on (gnode.c) */
	struct ip_stream *io_stream;   /* the interposer's own non-blocking stream (stream.c) */
};

/*
 * A graph's nodes as the client knows them (gnode.c): every node it made, in creation order,
 * with its dependencies and the parameters it was given. A captured graph, or a child graph
 * node's copy of a graph, is `opaque` until the worker listed its nodes (their parameters then
 * stay unknown here); one being captured is asked again at every question.
 */
struct ip_gnode;
struct ip_graph {
	struct ip_obj o;
	struct ip_ctx *ctx;
	struct ip_gnode **nodes;
	size_t nnodes, capnodes;
	int opaque, synced;
	struct ip_capture *capturing; /* being captured (its nodes change behind the client) */
	struct ip_gnode *owner;   /* a child graph node's copy: that node */
	int instantiated;         /* an exec was made from it (its graph memory stays) */
};

/* Client-only object kinds (not in the state log): graph nodes. */
#define IP_KIND_GNODE 100

/* The scratch device buffer that stands in for a memcpy node's host side (gnode.c). */
struct ip_scratch {
	CUdeviceptr addr;
	_Atomic int refs; /* held by nodes of graphs and executable graphs, each under its own lock */
};

/* A memcpy node with a host side in an executable graph: moved at every launch (gnode.c). */
struct ip_hcopy {
	uint64_t node;            /* the node's id */
	int to_device;            /* host -> scratch before the launch, else scratch -> host after */
	CUDA_MEMCPY3D xfer;       /* between the host side and the scratch */
	struct ip_scratch *scratch;
};

struct ip_graph_exec {
	struct ip_obj o;
	struct ip_ctx *ctx;
	struct ip_graph *from;    /* the graph it was made from (may be dead since) */
	struct ip_hcopy *hcopies;
	size_t nhcopies;
	uint64_t *disabled;       /* ids of the nodes cuGraphNodeSetEnabled turned off */
	size_t ndisabled;
	pthread_mutex_t lock;
};

/*
 * A stream capture in progress. The stream that began it and every stream that joined it
 * (by waiting on an event recorded inside it) point here until the capture ends; it is freed
 * when the last of them lets go (ip_capture_set).
 *
 * Capture modes are enforced here, not by the worker (graph.c): a capture that a refused call
 * invalidated stays `active` (its streams are still capturing, as natively) with `invalidated`
 * set, and its end returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 */
struct ip_capture_thread;
struct ip_capture {
	unsigned long long id;     /* what cuStreamGetCaptureInfo reports */
	struct ip_graph *graph;    /* the graph being built */
	struct ip_stream *origin;
	struct ip_ctx *ctx;
	CUstreamCaptureMode mode;
	int active;
	atomic_int invalidated;
	atomic_int blocking;       /* its streams that synchronise with the legacy stream */
	struct ip_capture_thread *thread; /* not relaxed: the thread that began it */
	struct ip_capture *next;   /* in graph.c's list of active captures */
	atomic_int refs;           /* streams and events that point at it; freed at 0 */
	int to_graph;              /* cuStreamBeginCaptureToGraph: into a graph that exists */
	CUgraphNode *deps;         /* cuStreamGetCaptureInfo's last dependency list (gnode.c) */
	size_t ndeps;
};

struct ip_stream {
	struct ip_obj o;
	struct ip_ctx *ctx;
	unsigned flags;
	int priority;
	int per_thread;           /* a thread's per-thread default stream */
	struct ip_capture *capture;
};

struct ip_event {
	struct ip_obj o;
	struct ip_ctx *ctx;
	unsigned flags;
	struct ip_capture *capture; /* recorded inside this capture */
};

struct ip_funcinfo {
	char *name;
	uint32_t nparams;
	uint32_t *offset;
	uint32_t *size;
	uint32_t argbytes;         /* bytes of the packed parameter buffer */
	struct ip_func *handle;    /* the module function / library kernel, once asked for */
};

struct ip_global {
	char *name;
	uint64_t addr, size;
	int managed;        /* a __managed__ variable (the client keeps its CPU copy) */
	struct ip_ctx *ctx; /* where it lives (a library's global: one per context) */
	struct ip_global *next;
};

struct ip_module {
	struct ip_obj o;
	struct ip_ctx *ctx; /* NULL for a library: it belongs to no context */
	int library;
	uint8_t hash[32];
	uint64_t image_size;
	uint32_t nfuncs;
	struct ip_funcinfo *funcs; /* sorted by name */
	struct ip_global *globals;
	pthread_mutex_t lock;
};

#define IP_FUNC_ATTR_CACHE 16
struct ip_func {
	struct ip_obj o;
	struct ip_module *mod;
	const struct ip_funcinfo *info;
	struct ip_ctx *ctx;        /* ST_KIND_FUNCTION of a kernel: its context */
	struct ip_func *kfuncs;    /* ST_KIND_KERNEL: its per-context functions (linked by next) */
	struct ip_func *next;
	int attr_valid[IP_FUNC_ATTR_CACHE];
	int attr_val[IP_FUNC_ATTR_CACHE];
	atomic_uint attr_gen;      /* +1 at every attribute set: what was derived from the
				      attributes before (cached occupancy answers) is stale */
};

/* ip_obj_register() - give o a fresh id and make its address a valid handle. */
int ip_obj_register(struct ip_obj *o, int kind);
/*
 * ip_obj_new() - the one way an object is made: size zeroed bytes (a struct that starts with
 * its struct ip_obj), registered as kind (a fresh id; its address is a valid handle from now
 * on) and owned by owner (NULL for contexts). NULL when out of memory. What it does on the
 * server is recorded in the state log by the message that creates it (statelog.c).
 */
void *ip_obj_new(size_t size, int kind, struct ip_ctx *owner);
/* ip_obj_drop() - undo ip_obj_new() for an object the server never made: unregister, free. */
void ip_obj_drop(void *obj);
/*
 * ip_obj_unregister() - the handle is no longer valid. The object stays allocated for good, on
 * a list of the dead, so a stale handle stays a recognisably dead address and never a new one.
 */
void ip_obj_unregister(struct ip_obj *o);
/* ip_obj_forget() - unregister an object the caller frees now (the application never had it). */
void ip_obj_forget(struct ip_obj *o);
/* ip_obj_get() - the live object behind handle h of kind (0: any), or NULL. */
void *ip_obj_get(const void *h, int kind);
/* ip_obj_collect() - live objects of kind owned by ctx (malloc'd array, caller frees). */
int ip_obj_collect(struct ip_ctx *ctx, int kind, struct ip_obj ***out, size_t *n);
uint64_t ip_new_id(void);

/* ---- devices and initialisation ---------------------------------------------------------- */

struct ip_device {
	char name[256];
	CUuuid uuid;
	uint64_t total_mem;
	int attr[CU_DEVICE_ATTRIBUTE_MAX];
	struct ip_ctx *primary;
	_Atomic CUresult faulted; /* a context on it had a sticky fault (ctxcur.c) */
};

struct ip_state {
	int initialized;
	CUresult init_result;
	int ndev;
	struct ip_device dev[IP_MAX_DEVICES];
	int driver_version;
	uint64_t server_caps;      /* the capability bits of the server's HelloReply */
	struct ip_vaw vaw;
	pthread_mutex_t lock;      /* contexts and host registrations */
	pthread_mutex_t mem_lock;  /* the window allocator, held across a mapping's round trip */
	void *host_allocs;         /* pinned or registered host ranges (tsearch) */
};
extern struct ip_state ip;

/* ip_check_init() - CUDA_ERROR_NOT_INITIALIZED before cuInit, the session's error after
 * it died, else CUDA_SUCCESS. */
CUresult ip_check_init(void);

/* ---- the current context (ctxcur.c) -------------------------------------------------------- */

/*
 * ip_config_set() - set a cache (kind 1) or shared-memory (kind 2) configuration of context c,
 * or of the function with id func when it is not 0 (context.c).
 */
CUresult ip_config_set(struct ip_ctx *c, uint64_t func, int kind, int value);
/* ip_ctx_require() - the current context (*out), or CUDA_ERROR_INVALID_CONTEXT. */
CUresult ip_ctx_require(struct ip_ctx **out);
/*
 * ip_ctx_query() - a call about the current context's device (a DeviceRef request of type,
 * answered with a desc message in *reply, which the caller frees; NULL on failure).
 */
CUresult ip_ctx_query(uint16_t type, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage **reply);
/*
 * ip_ctx_require_live() - ip_ctx_require for calls that do work in the context: after a
 * sticky fault (a kernel's illegal address, assert, ...) they fail with it, as natively.
 */
CUresult ip_ctx_require_live(struct ip_ctx **out);
/* ip_ctx_note_error() - an error the server reported: a sticky one marks the current context. */
void ip_ctx_note_error(CUresult r);
/* ip_ctx_sticky() - the current context's sticky fault, or CUDA_SUCCESS. */
CUresult ip_ctx_sticky(void);
/*
 * Work that may write device memory (ctxcur.c): ip_ctx_work_issued() counts one more and
 * returns the count; ip_ctx_work_epoch() the count so far; ip_ctx_work_synced() says a context
 * synchronisation returned that covered the work up to epoch; ip_ctx_work_pending() whether
 * work since the last such synchronisation may still run.
 */
uint64_t ip_ctx_work_issued(void);
uint64_t ip_ctx_work_epoch(void);
void ip_ctx_work_synced(uint64_t epoch);
int ip_ctx_work_pending(void);
/*
 * ip_ctx_sync() - cuCtxSynchronize of c for the interposer's own use (no capture-mode checks):
 * waits for all of c's work on the server (context.c).
 */
CUresult ip_ctx_sync(struct ip_ctx *c);
/* ip_ctx_cur() - the calling thread's current context, or NULL. */
struct ip_ctx *ip_ctx_cur(void);
/*
 * ip_ctx_stack_full() - the calling thread's context stack has no room for one more (IP_CTX_STACK):
 * then 1, and `what` (the call refused) is logged the first time.
 */
int ip_ctx_stack_full(const char *what);
/* ip_ctx_push() - make c current on this thread (the caller checked ip_ctx_stack_full). */
void ip_ctx_push(struct ip_ctx *c);
/* ip_ctx_pop() - undo the calling thread's last ip_ctx_push */
void ip_ctx_pop(void);
/* ip_ctx_unstack() - c was destroyed: drop it from the calling thread's stack. */
void ip_ctx_unstack(struct ip_ctx *c);

/* ---- mapped host memory (hostmirror.c) ------------------------------------------------- */

/*
 * ip_hm_alloc() - a zeroed region of the host area, mirrored in the worker for kernels to
 * dereference, or NULL (too large, the area or the budget full, or no mirroring on this
 * server): the caller then allocates plain memory.
 */
void *ip_hm_alloc(size_t size);
/* ip_hm_free() - 1 if p was a region of the host area (now freed), 0 if not. */
int ip_hm_free(void *p);
/* ip_hm_contains() - p lies in this process's host area. */
int ip_hm_contains(const void *p);

/* ---- the session: one connection to rgpud ---------------------------------------------- */

/*
 * ip_statelog_edit() - a frame that changed a graph node by node succeeded (a call's reply, or a
 * post once sent): it goes into the graph's or the exec's journal, as on the worker.
 */
void ip_statelog_edit(uint16_t type, const ProtobufCMessage *req, const void *payload,
		      uint64_t plen);
/* ip_statelog_graph_at() - graph as its journal is now (Rgpu__GraphAt: rgpu.pb-c.h). */
struct Rgpu__GraphAt;
void ip_statelog_graph_at(uint64_t graph, struct Rgpu__GraphAt *at);

/* ---- routing: devices of several servers (route.c) ------------------------------------------ */

/* ip_route_devices() - devices dev_base..dev_base+ndev-1 belong to session `session` */
void ip_route_devices(int session, int dev_base, int ndev);
/* ip_route_clear() - a new call starts: route by the current context (ip_check_init calls it) */
void ip_route_clear(void);
/* ip_route_ctx(), ip_route_dev() - this call goes to the server of c / of device d */
void ip_route_ctx(const struct ip_ctx *c);
void ip_route_dev(int d);
/* ip_addr_device() - the device whose slice of the window p lies in, or -1 outside it */
int ip_addr_device(uint64_t p);
/* ip_dev_server() - the index of device d's server (0 with one server) */
int ip_dev_server(int d);
/* ip_dev_server_name() - device d's server, as RGPU_SERVERS named it */
const char *ip_dev_server_name(int d);
/*
 * ip_session_peer() - what another server's worker needs to send data to server k's job: the
 * server as this client reaches it (HOST:PORT), the job's id (16 bytes) and its peer token (32
 * bytes). 0, or -1 when that server gave no peer token (it cannot take such data) or is
 * reached by TLS (peer links speak none).
 */
int ip_session_peer(int k, char *to, size_t tolen, uint8_t job[16], uint8_t token[32]);
/* ip_multi_server() - the devices come from more than one server */
int ip_multi_server(void);
/* ip_nservers() - how many servers (sessions) */
int ip_nservers(void);
/*
 * ip_pin_server(), ip_pin_dev() - until unpinned, every call of this thread goes to server k /
 * device d's server, whatever it resolves (for a step made of several calls, such as a copy
 * between servers). Returns the previous pin, which ip_pin_server(prev) restores (-1: none).
 */
int ip_pin_server(int k);
/*
 * Pinned memory shared with a worker on this host (shmarena.c). ip_arena_alloc() - size bytes
 * of the calling thread's session's arena; NULL when it has none (not shared memory) or is
 * full. ip_arena_free() - 1: p was an arena allocation, let go; 0: not arena memory; -1: inside
 * one but not its start. ip_arena_dst() - [p, p + n) lies in an allocation of the session's
 * arena: where (*at) and which allocation; 0 when it does not.
 */
void *ip_arena_alloc(size_t size);
int ip_arena_free(void *p);
int ip_arena_dst(const void *p, uint64_t n, uint64_t *at, uint64_t *reg_off, uint64_t *reg_len);
/*
 * ip_copy_chunk() - the chunks a host-to-device copy is cut into, its source in the arena or
 * not (ip_arena_dst): over shared memory, RGPU_MAX_CHUNK from the arena (read in place: nothing
 * is copied on the way, and each chunk costs the copy engine a gap) and RGPU_COPY_CHUNK (a
 * slot) otherwise; over TCP, the worker's staging buffers' size (HelloReply.staging_size:
 * 16 MiB; RGPU_COPY_CHUNK from an older one)
 */
size_t ip_copy_chunk(int in_arena);
int ip_pin_dev(int d);

/* ip_session_open() - connect to RGPU_SERVERS (or RGPU_SERVER), shake hands, fill ip.dev. */
CUresult ip_session_open(void);
/* ip_session_error() - CUDA_SUCCESS while the session is usable, else the sticky error. */
CUresult ip_session_error(void);

/*
 * ip_link_on_enqueue() - fn is called with every request about to be queued (before its seq,
 * with no lock held): managed.c sends the CPU's changes ahead of work that may read them.
 */
typedef void (*ip_enqueue_fn)(uint16_t type, const ProtobufCMessage *req);
void ip_link_on_enqueue(ip_enqueue_fn fn);
/*
 * ip_calls_on_post() - fn sees every post first, and takes it (returns 1, its result in *r)
 * instead of queueing: gnode.c keeps a graph node's work frames that way.
 */
typedef int (*ip_post_taker)(uint16_t type, const ProtobufCMessage *req, const void *payload,
			     uint64_t plen, CUresult *r);
void ip_calls_on_post(ip_post_taker fn);

/*
 * ip_post() - a fire-and-forget request. Small requests are queued and sent in batches by the
 * sender thread; a payload larger than a few KiB is sent before ip_post returns, straight
 * from the caller's memory (host bytes are taken at call time). Returns the session's error
 * if it is dead, CUDA_ERROR_UNKNOWN (sending nothing) if the type is not a post
 * (ip_msg_class_ok).
 */
CUresult ip_post(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen);

/*
 * ip_post_borrowed() - ip_post for a payload the caller keeps unchanged until it calls
 * ip_release_borrowed() for the seqs returned: a large payload is written straight from the
 * caller's memory and not copied yet.
 */
CUresult ip_post_borrowed(uint16_t type, const ProtobufCMessage *req, const void *payload,
			  uint64_t plen, uint64_t *seq);
/*
 * ip_release_borrowed() - the caller is about to reuse the memory of the payloads it posted as
 * seqs first..last: wait (briefly) for the worker to execute them, and copy what it has not.
 */
CUresult ip_release_borrowed(uint64_t first, uint64_t last);
/*
 * ip_call_barrier() - wait until the worker has run every request sent before (a MSG_PING
 * round trip: the executor runs frames one at a time, so its reply comes after the handlers
 * of all of them have returned). An asynchronous error the reply brings stays pending for the
 * next call that reports one. Returns CUDA_SUCCESS or the session's error.
 */
CUresult ip_call_barrier(void);
/*
 * ip_call_idle() - the worker's last reply said context ctx (its id) had nothing pending on
 * any stream, and nothing was sent to it since: a synchronization of it would only return
 * (issue 14, server/exec.c "Whether a context is idle"). Then 1, with *r what that
 * synchronization would have returned (an asynchronous error still to report); else 0.
 */
int ip_call_idle(uint64_t ctx, CUresult *r);
/*
 * ip_reply_wrong() - a reply that said success but does not hold what it must (a server
 * that breaks the protocol): logs "call: the GPU server's reply what" and returns
 * CUDA_ERROR_UNKNOWN.
 */
CUresult ip_reply_wrong(const char *call, const char *what);
/*
 * ip_wait_block() - on: this thread's calls block while they wait for their replies, whatever
 * its context's scheduling flag (cuEventSynchronize of a CU_EVENT_BLOCKING_SYNC event); off:
 * undoes one on.
 */
void ip_wait_block(int on);
/*
 * ip_call() - a synchronous request: send it (with everything queued before it) and wait for
 * its reply, decoded with desc into *reply (free with protobuf_c_message_free_unpacked).
 * MSG_DATA frames for this request are written to dst (dst_size bytes at most) as they come.
 * Returns CUDA_SUCCESS with *reply set, or the session's error, or CUDA_ERROR_UNKNOWN (sending
 * nothing) if the type is not a call (ip_msg_class_ok).
 */
CUresult ip_call(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen,
		 void *dst, uint64_t dst_size, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **reply);

/*
 * ip_call_status() - ip_call for requests whose reply is a message with `result` (field 1)
 * and `async_error` (field 2): returns the call's own result, else a pending asynchronous
 * error. *reply is optional.
 */
CUresult ip_call_status(uint16_t type, const ProtobufCMessage *req, const void *payload,
			uint64_t plen, void *dst, uint64_t dst_size,
			const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply);
/*
 * ip_async_forget() - drop the asynchronous error not yet reported: a context's teardown,
 * whose errors go with it (a reset is how a program recovers from a sticky fault).
 */
void ip_async_forget(void);

/*
 * Where a pitched device-to-host copy's packed bytes go in the destination: rows of width
 * bytes, pitch apart, height rows a slice, slices slice bytes apart. width 0: contiguous.
 */
struct ip_rows {
	uint64_t width, height, pitch, slice;
};

/*
 * ip_post_dtoh() - a fire-and-forget device-to-host copy: the data lands in dst when the
 * server's stream reaches it, before any later reply that depends on that stream. rows: NULL,
 * or where each packed byte of size goes (struct ip_rows).
 */
CUresult ip_post_dtoh(const ProtobufCMessage *req, void *dst, uint64_t size,
		      const struct ip_rows *rows);
/* ip_dtoh_rows() - a synchronous MSG_MEMCPY_DTOH whose size packed bytes land in rows of dst */
CUresult ip_dtoh_rows(const ProtobufCMessage *req, void *dst, uint64_t size,
		      const struct ip_rows *rows);

/*
 * ip_msg_class_ok() - may a message of `type` be sent the way `want` (RGPU_CLASS_POST for
 * ip_post and ip_post_dtoh, RGPU_CLASS_CALL for ip_call) says? A post_or_call message may go
 * either way. Returns 1, or logs the mismatch (a bug in the interposer: a call posted would
 * lose its reply, a post called would wait for ever) and returns 0.
 */
int ip_msg_class_ok(uint16_t type, int want);

/* Host functions and stream callbacks run on the interposer's callback thread. */
/* persistent: captured into a graph, it runs at every replay and stays registered */
uint64_t ip_callback_register(CUhostFn fn, CUstreamCallback cb, CUstream stream, void *user,
			      int persistent);
/* ip_callback_forget() - drop registration id (its request was never sent) */
void ip_callback_forget(uint64_t id);
/*
 * ip_link_set_captured() - on: the request the calling thread is about to queue is recorded into
 * a stream capture, not run (the enqueue hooks see it: managed.c leaves managed memory as it is
 * for it); ip_link_captured() - what was set.
 */
void ip_link_set_captured(int on);
int ip_link_captured(void);
/* ip_in_callback() - the calling thread is running an application's host function or callback */
int ip_in_callback(void);
/*
 * ip_stream_io() - the id of context c's own non-blocking stream, made on first use: for the
 * interposer's copies that must not wait for the application's streams (a host function's
 * stream is stopped while it runs). 0 (the legacy stream) when it cannot be made.
 */
uint64_t ip_stream_io(struct ip_ctx *c);

/* ---- streams --------------------------------------------------------------------------------- */

/*
 * ip_stream_resolve() - the stream handle as the server knows it: *id (0 = the context's NULL
 * stream) and its context. ptds: the call was a per-thread-default-stream variant, so a NULL
 * handle means the calling thread's own stream.
 */
CUresult ip_stream_resolve(CUstream h, int ptds, struct ip_ctx **ctx, uint64_t *id);
/* ip_stream_get() - as ip_stream_resolve, also giving the stream object (NULL: legacy stream) */
CUresult ip_stream_get(CUstream h, int ptds, struct ip_ctx **ctx, struct ip_stream **s);
/*
 * ip_stream_sync() - cuStreamSynchronize for the interposer's own use: the same wait, without
 * the capture-mode checks an application's call gets (a synchronous copy waits this way).
 */
CUresult ip_stream_sync(CUstream h, int ptds);
/* ---- active captures and capture modes (capture.c) ------------------------------------ */

/* ip_capture_thread_ready() - the calling thread can begin a capture in mode (0: no memory) */
int ip_capture_thread_ready(CUstreamCaptureMode mode);
/* ip_capture_start(), ip_capture_stop() - cap counts against the capture modes, or no longer */
void ip_capture_start(struct ip_capture *cap);
void ip_capture_stop(struct ip_capture *cap);
/* ip_capture_wrong_thread() - cap is global or thread-local and was begun by another thread */
int ip_capture_wrong_thread(const struct ip_capture *cap);
const char *ip_capture_mode_name(CUstreamCaptureMode m);
/* ip_capture_of() - the active capture the stream takes part in, or NULL */
struct ip_capture *ip_capture_of(const struct ip_stream *s);
/*
 * ip_capture_set() - point *slot (a stream's or an event's capture) at cap, which may be NULL:
 * a reference to cap is taken and the one to the capture *slot held is dropped, freeing it
 * when it was the last.
 */
void ip_capture_set(struct ip_capture **slot, struct ip_capture *cap);
/* ip_capture_join() - stream s joins cap (it waited on an event recorded inside it) */
void ip_capture_join(struct ip_stream *s, struct ip_capture *cap);
/*
 * ip_capture_abandon() - stream s goes away (destroyed, or with its context): a capture it
 * began ends without a graph, and stops counting against capture modes.
 */
void ip_capture_abandon(struct ip_stream *s);

/*
 * Capture modes (graph.c), checked by the calls the driver refuses during a capture. Each
 * returns CUDA_SUCCESS, or the driver's error after invalidating the captures the driver would
 * invalidate and logging one warning naming `call` and the capture's mode.
 *
 * ip_capture_guard() - a potentially unsafe call (allocating or freeing device or pinned
 * memory, registering host memory, synchronising or querying a stream or an event). Refused
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) unless the calling thread is in relaxed mode, when
 * the thread began a capture that is not relaxed, or when it is in global mode and any thread
 * began a global-mode capture. Costs a thread-local and an atomic read when nothing is refused.
 */
CUresult ip_capture_guard(const char *call);
/*
 * ip_capture_guard_stream() - synchronising or querying stream s (NULL: the legacy stream):
 * refused in every mode when s is capturing, else as ip_capture_guard.
 */
CUresult ip_capture_guard_stream(struct ip_stream *s, const char *call);
/*
 * ip_capture_guard_ctx() - synchronising context c: refused in every mode, from every thread,
 * while a stream of c is capturing (all of c's captures are invalidated), else as
 * ip_capture_guard.
 */
CUresult ip_capture_guard_ctx(struct ip_ctx *c, const char *call);
/*
 * ip_capture_guard_legacy() - work on c's legacy NULL stream, which would wait for every
 * blocking stream: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream of c is
 * capturing (those captures are invalidated), in every mode.
 */
CUresult ip_capture_guard_legacy(struct ip_ctx *c, const char *call);
/* ip_capture_in_ctx() - whether a stream of c is capturing */
int ip_capture_in_ctx(struct ip_ctx *c);

/* The id a synchronization listener hears for a context's legacy NULL stream. */
#define IP_STREAM_LEGACY_ID ((uint64_t)-1)
/* A synchronization listener: everything queued on stream_id of ctx so far has finished
 * (IP_STREAM_LEGACY_ID: the context's NULL stream; 0: every stream of ctx). */
typedef void (*ip_synced_fn)(struct ip_ctx *ctx, uint64_t stream_id);
/*
 * ip_stream_on_synced() - fn hears of every stream synchronize or query that found the stream
 * idle. One listener (pool.c), set when the library is loaded: streams know nothing of what
 * waits for them.
 */
void ip_stream_on_synced(ip_synced_fn fn);

/* ---- memory --------------------------------------------------------------------------------- */

/* ip_mem_window_full() - log (the first 8 times) that the device address window has no room for
 * size bytes, which `call` then refuses with CUDA_ERROR_OUT_OF_MEMORY */
void ip_mem_window_full(const char *call, uint64_t size);
/* ip_mem_alloc() - an allocation of size bytes for context c (cuMemAlloc without the current
 * context) */
CUresult ip_mem_alloc(struct ip_ctx *c, uint64_t size, CUdeviceptr *out);
/* ip_mem_free() - cuMemFree for the interposer's own allocations (no capture-mode checks) */
CUresult ip_mem_free(CUdeviceptr dptr);
/* A free listener: the device allocation at addr was freed. */
typedef void (*ip_freed_fn)(uint64_t addr);
/*
 * ip_mem_on_free() - fn hears of every device allocation freed (cuMemFree, a context's
 * teardown, a pool's own frees), under the allocator's lock, before its range can be handed out
 * again. One listener (pool.c), set when the library is loaded: memory knows nothing of pools.
 */
void ip_mem_on_free(ip_freed_fn fn);
/* ip_devptr_ok() - [p, p+n) is device memory the application may name (window or global). */
int ip_devptr_ok(uint64_t p, uint64_t n);
/* ---- managed memory (managed.c) ---------------------------------------------------------- */


/*
 * ip_mem_alloc_managed() - ip_mem_alloc for managed memory: a range of the window of its own
 * (no other allocation shares its pages) of size bytes, marked managed, of which the program
 * asked for `asked`; with host_flags (cuMemHostAlloc's), marked mapped pinned host memory.
 */
CUresult ip_mem_alloc_managed(struct ip_ctx *c, uint64_t size, uint64_t asked,
			      unsigned host_flags, CUdeviceptr *out);
/*
 * ip_mem_on_mapped_alloc() - fn makes the mapped pinned host allocations too large for the
 * host area (managed.c sets it when the library is loaded).
 */
typedef CUresult (*ip_mapped_alloc_fn)(struct ip_ctx *c, uint64_t size, unsigned flags,
				       CUdeviceptr *out);
void ip_mem_on_mapped_alloc(ip_mapped_alloc_fn fn);
/*
 * ip_module_on_managed_global() - fn hears of each __managed__ variable a look-up finds (add 1;
 * its CPU copy must exist before the look-up returns) and of each one whose module goes (0).
 */
typedef CUresult (*ip_managed_global_fn)(struct ip_ctx *c, uint64_t addr, uint64_t size, int add);
void ip_module_on_managed_global(ip_managed_global_fn fn);
/* ip_mem_managed() - [p, p+n) starts or ends in a managed allocation */
int ip_mem_managed(uint64_t p, uint64_t n);

/* ip_host_range() - [p, p+n) lies in one pinned host allocation of this process. */
int ip_host_range(uint64_t p, uint64_t n);
/* ip_is_devptr() - p points into device memory (pointer classification for cuMemcpy). */
int ip_is_devptr(uint64_t p);
/*
 * ip_global_add() - the module global [addr, addr+size) is device memory from now on (managed:
 * a __managed__ variable);
 * ip_global_del() - no longer (its module is unloaded): copies to it fail, as natively.
 */
void ip_global_add(uint64_t addr, uint64_t size, int managed);
void ip_global_del(uint64_t addr, uint64_t size);

/* What memory.c knows of an address: the facts behind the pointer attributes (pointer.c). */
struct ip_ptrinfo {
	int kind;                 /* 0 unknown, 1 device, 2 host */
	uint64_t base, size;
	int device;
	struct ip_ctx *ctx;
	unsigned long long buffer_id;
	const void *physmem;      /* device memory the application mapped (cuMemMap): its physical
				     memory (vmm.c); base and size are then the mapping's */
	uint32_t access;          /* ...and the mapping's access, 2 bits per device */
	int managed;              /* a managed allocation (managed.c) */
};
/*
 * ip_ptr_classify() - what p points into: a device allocation, a module global, a mapping the
 * application made of its physical memory, pinned or registered host memory, or nothing known
 * (kind 0).
 */
void ip_ptr_classify(uint64_t p, struct ip_ptrinfo *pi);

/* ---- the application's virtual memory (vmm.c) ------------------------------------------------ */

/* ip_vmm_handle_types() - the export handle types physical memory was created with */
unsigned long long ip_vmm_handle_types(const void *physmem);

/* ---- stream-ordered allocation (pool.c) ----------------------------------------------------- */

/* ip_pool_synced() - an ip_synced_fn: the stream-ordered frees queued there are real now */
void ip_pool_synced(struct ip_ctx *ctx, uint64_t stream_id);
/* ip_pool_of() - the memory pool addr was allocated from, or NULL */
CUmemoryPool ip_pool_of(uint64_t addr);

/* ---- context teardown: what context.c calls, in its order ------------------------------------ */

/* ip_mem_ctx_teardown() - free every allocation of ctx */
void ip_mem_ctx_teardown(struct ip_ctx *ctx);
void ip_module_ctx_teardown(struct ip_ctx *ctx);
void ip_stream_ctx_teardown(struct ip_ctx *ctx);
/* ip_array_ctx_teardown() - forget ctx's arrays, mipmapped arrays, texture and surface objects */
void ip_array_ctx_teardown(struct ip_ctx *ctx);

/* ---- arrays (array.c) ------------------------------------------------------------------------ */

/*
 * ip_array_box() - the id of the live array h and its extent: width in bytes, height and depth
 * (or layers), each at least 1. Returns CUDA_SUCCESS or CUDA_ERROR_INVALID_HANDLE.
 */
CUresult ip_array_box(CUarray h, uint64_t *id, uint64_t ext[3]);

/* ---- graphs built node by node (gnode.c) ------------------------------------------------------ */

/* ip_graph_forget_nodes() - a graph dies: its nodes with it. */
void ip_graph_forget_nodes(struct ip_graph *g);
/* ip_exec_snapshot() - e was made from g: what it moves at each launch (and e->lock). */
CUresult ip_exec_snapshot(struct ip_graph_exec *e, struct ip_graph *g);
void ip_exec_forget(struct ip_graph_exec *e);
/* ip_exec_hcopies() - the host sides of e's memcpy nodes, before (after = 0) or after a launch */
CUresult ip_exec_hcopies(struct ip_graph_exec *e, CUstream s, int ptds, int after);
/* ip_capture_deps() - cuStreamGetCaptureInfo's dependency list of stream s's capture */
CUresult ip_capture_deps(struct ip_stream *s, struct ip_capture *cap, const CUgraphNode **deps,
			 size_t *ndeps);
/* ip_graph_into() - cuStreamBeginCaptureToGraph's graph, and its nodes' ids (malloc'd) */
CUresult ip_graph_into(CUgraph h, const CUgraphNode *deps, const CUgraphEdgeData *ed, size_t n,
		       struct ip_graph **out, uint64_t **ids);
/* ip_capture_update_deps() - cuStreamUpdateCaptureDependencies */
CUresult ip_capture_update_deps(struct ip_stream *s, struct ip_capture *cap,
				const CUgraphNode *deps, const CUgraphEdgeData *ed, size_t n,
				unsigned flags);

/* ---- launches ------------------------------------------------------------------------------- */

/*
 * ip_pack_params() - lay kernelParams out at the function's parameter offsets into buf
 * (info->argbytes bytes). Returns 0, or RGPU_EINVAL if a parameter pointer is NULL.
 */
int ip_pack_params(const struct ip_funcinfo *info, void **params, uint8_t *buf);

#define IP_MAX_LAUNCH_ATTRS 32
/* ip_attrs_to_wire() - launch attributes as they travel: event handles become event ids */
CUresult ip_attrs_to_wire(const CUlaunchAttribute *in, unsigned n, CUlaunchAttribute *out);

/* ---- logging -------------------------------------------------------------------------------- */

/* ip_log_init() - read RGPU_LOG / RGPU_LOG_FILE once; the interposer is silent otherwise. */
void ip_log_init(void);

#endif
