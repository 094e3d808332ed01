/*
 * rgpud's private header: the supervisor, the per-session worker and its parts.
 *
 * A worker owns one client session: a reader thread that takes frames off the connection, an
 * executor thread (the worker's main thread) that runs them in order against the driver, and
 * driver callback threads that push data and host-function triggers back to the client.
 */
#ifndef SRV_H
#define SRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda.h>
#include <protobuf-c/protobuf-c.h>

#include "driver.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu_msgs.h"

struct srv_config {
	const char *listen;     /* "HOST:PORT" */
	const char *driver;     /* path of libcuda.so.1 to load; NULL = the system's */
	const char *state_dir;  /* module cache (and later checkpoints) live here */
	uint64_t window_base;
	uint64_t window_size;
	int staging_buffers;    /* pinned chunks per worker */
	const char *port_file;  /* write the bound port here (tests listen on port 0) */
};

/* ---- supervisor ------------------------------------------------------------------------ */
int srv_supervise(const struct srv_config *cfg);

/* ---- worker ---------------------------------------------------------------------------- */

enum srv_obj_kind {
	SRV_CTX = 1,
	SRV_STREAM = 2,
	SRV_EVENT = 3,
	SRV_MODULE = 4,
	SRV_LIBRARY = 5,
	SRV_FUNC = 6,
	SRV_KERNEL = 7,
	SRV_GRAPH = 8,
	SRV_GRAPH_EXEC = 9,
};

/* A client id mapped to the real driver handle behind it. */
struct srv_obj {
	uint64_t id;
	int kind;
	void *h;            /* CUcontext, CUstream, CUevent, CUmodule, CUlibrary, CUfunction... */
	uint64_t ctx;       /* owning client context id (0 for contexts) */
	uint64_t parent;    /* module/library of a function or kernel */
	int device;
	int primary;        /* contexts: a retained primary context */
};

/* A range of the window backed by device memory. */
struct srv_map {
	uint64_t addr;
	uint64_t size;
	CUmemGenericAllocationHandle h;
	int device;
};

/* A frame taken off the connection, waiting for the executor. */
struct srv_frame {
	struct rgpu_frame_hdr hdr;
	uint8_t *body;
	void *payload;
	int payload_staged;   /* payload is a staging buffer (return it to the pool) */
	struct srv_frame *next;
};

struct srv_staging;

/*
 * Payload bytes the reader may queue ahead of the executor. The reader never waits for a
 * staging buffer (a host function may be holding the stream that frees them while its
 * acknowledgement sits behind this very data); it falls back to plain memory up to this bound.
 */
#define RGPU_QUEUE_BYTES (1ull << 30)

struct srv_worker {
	const struct srv_config *cfg;
	struct rgpu_conn *conn;
	uint64_t session;
	struct srv_driver drv;
	pthread_mutex_t send_lock;

	int ndev;
	CUdevice dev[16];
	CUcontext base_ctx;      /* device 0's primary context, retained for the worker's life */
	CUdeviceptr window;

	/* client ids -> driver objects; window mappings (tsearch trees) */
	void *objs;
	void *maps;
	void *globals;           /* module globals the client has looked up (srv_map ranges) */
	uint64_t cur_ctx_id;     /* context current on the executor thread */

	/* first error of fire-and-forget work, reported with the next reply */
	CUresult async_err;

	/* reader -> executor queue */
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct srv_frame *q_head, *q_tail;
	atomic_int q_len;
	uint64_t q_bytes;        /* payload bytes queued; the reader waits above RGPU_QUEUE_BYTES */
	int q_closed;            /* the reader is done (EOF or protocol error) */

	/* host-function triggers waiting for MSG_CALLBACK_DONE */
	pthread_mutex_t cb_lock;
	pthread_cond_t cb_cond;
	uint64_t *cb_done;       /* ids acknowledged and not yet consumed */
	size_t cb_ndone, cb_cap;
	atomic_int dead;         /* the client is gone: stop waiting for it */

	struct srv_staging *staging;
	struct srv_modcache *modcache;
};

/* srv_worker_run() - serve one client on conn until it leaves; never returns (exits). */
void srv_worker_run(const struct srv_config *cfg, struct rgpu_conn *conn)
	__attribute__((noreturn));

/* Sending (any thread). Replies carry the request's seq and the REPLY flag. */
int srv_send(struct srv_worker *w, uint16_t type, uint32_t flags, uint64_t seq,
	     const ProtobufCMessage *body, const void *payload, uint64_t plen);
/*
 * srv_reply() - send rep as the reply to f, with the pending asynchronous error put in its
 * field 2 (every reply message has `result` as field 1 and `async_error` as field 2).
 */
int srv_reply(struct srv_worker *w, const struct srv_frame *f, ProtobufCMessage *rep);
int srv_reply_status(struct srv_worker *w, const struct srv_frame *f, CUresult r);
int srv_reply_value(struct srv_worker *w, const struct srv_frame *f, CUresult r, int64_t v);
void srv_protocol_error(struct srv_worker *w, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* srv_async_error() - remember the first error of fire-and-forget work */
void srv_async_error(struct srv_worker *w, CUresult r, const char *what);
/* srv_take_async_error() - the remembered error, cleared */
CUresult srv_take_async_error(struct srv_worker *w);

/* Objects (executor thread only). */
struct srv_obj *srv_obj_find(struct srv_worker *w, uint64_t id, int kind);
int srv_obj_add(struct srv_worker *w, const struct srv_obj *o);
void srv_obj_del(struct srv_worker *w, uint64_t id);
/* srv_use_ctx() - make client context id current on the executor; CUDA error if unknown */
CUresult srv_use_ctx(struct srv_worker *w, uint64_t ctx);
/* srv_stream() - the driver stream for a client stream id (0: the NULL stream) */
CUresult srv_stream(struct srv_worker *w, uint64_t id, CUstream *out);

/* Host-function triggers. */
int srv_wait_callback(struct srv_worker *w, uint64_t id);
void srv_callback_done(struct srv_worker *w, uint64_t id);

/* Executing one frame: 0, or a negative RGPU_E* code that ends the session. */
int srv_exec(struct srv_worker *w, struct srv_frame *f);

/* ---- staging (pinned bounce buffers) --------------------------------------------------- */
int srv_staging_new(struct srv_worker *w, int n, size_t size, struct srv_staging **out);
void *srv_staging_get(struct srv_staging *s);   /* blocks until one is free */
void *srv_staging_tryget(struct srv_staging *s); /* NULL when all are in flight */
void srv_staging_put(struct srv_staging *s, void *buf);
void srv_staging_free(struct srv_worker *w, struct srv_staging *s);

/* ---- module image cache (LMDB, shared by the workers of one server) -------------------- */
struct srv_modcache;
int srv_modcache_open(const char *dir, struct srv_modcache **out);
/* srv_modcache_get() - a malloc'd copy of the image named by hash, or RGPU_ENOTFOUND */
int srv_modcache_get(struct srv_modcache *mc, const uint8_t hash[32], void **data,
		     size_t *len);
int srv_modcache_put(struct srv_modcache *mc, const uint8_t hash[32], const void *data,
		     size_t len);
void srv_modcache_close(struct srv_modcache *mc);

#endif
