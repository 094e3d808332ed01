/*
 * Handlers for running code: kernel launches (the parameters as the client packed them, launch
 * attributes with the client's event ids replaced by the driver's events) and host functions. A
 * host function becomes a trigger on its stream: a driver thread sends MSG_CALLBACK and waits
 * until the reader reports the client's MSG_CALLBACK_DONE (srv_callback_done), so the stream
 * moves on only once the client's function has returned. The wait ends when the job does: a
 * trigger must never keep a dead job's driver thread waiting.
 */
#define LOG_PREFIX "exec: "
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- execution -------------------------------------------------------------------------- */

/*
 * A CUlaunchConfig from the client's dimensions and attributes (CUlaunchAttribute structs as
 * cuda.h lays them out); event ids inside attributes become our events. attrs must hold
 * MAX_LAUNCH_ATTRS entries.
 */
CUresult srv_build_config(struct srv_worker *w, const struct launch_dims *d,
			     const ProtobufCBinaryData *raw, CUstream s, CUlaunchConfig *cfg,
			     CUlaunchAttribute *attrs)
{
	size_t n = raw->len / sizeof(CUlaunchAttribute);

	if (raw->len % sizeof(CUlaunchAttribute) || n > MAX_LAUNCH_ATTRS)
		return CUDA_ERROR_INVALID_VALUE;
	if (raw->len)
		memcpy(attrs, raw->data, raw->len);
	for (size_t i = 0; i < n; i++) {
		if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
		    attrs[i].id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
			uint64_t id;
			struct srv_obj *e;
			memcpy(&id, &attrs[i].value, sizeof(id));
			e = srv_obj_find(w, id, ST_KIND_EVENT);
			if (!e)
				return CUDA_ERROR_INVALID_HANDLE;
			attrs[i].value.launchCompletionEvent.event = e->h;
		}
	}
	memset(cfg, 0, sizeof(*cfg));
	cfg->gridDimX = d->grid[0];
	cfg->gridDimY = d->grid[1];
	cfg->gridDimZ = d->grid[2];
	cfg->blockDimX = d->block[0];
	cfg->blockDimY = d->block[1];
	cfg->blockDimZ = d->block[2];
	cfg->sharedMemBytes = d->shared_mem;
	cfg->hStream = s;
	cfg->attrs = attrs;
	cfg->numAttrs = (unsigned)n;
	return CUDA_SUCCESS;
}

/* cuLaunchKernelEx with the client's attributes. */
static CUresult launch_with_attrs(struct srv_worker *w, void *fn, const Rgpu__Launch *m,
				  CUstream s, void **extra)
{
	CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
	CUlaunchConfig cfg;
	struct launch_dims d = {{m->grid_x, m->grid_y, m->grid_z},
				{m->block_x, m->block_y, m->block_z}, m->shared_mem};
	CUresult r = srv_build_config(w, &d, &m->attrs, s, &cfg, attrs);
	return r == CUDA_SUCCESS ? w->drv.cuLaunchKernelEx(&cfg, fn, NULL, extra) : r;
}

/*
 * The client packs the parameters at the offsets the module-load reply gave it, which is the
 * layout CU_LAUNCH_PARAM_BUFFER_POINTER expects; an application's own `extra` buffer arrives
 * as it was given. Either way the launch needs no per-parameter pointers here.
 */
int h_launch(struct srv_worker *w, struct srv_frame *f)
{
	/* the reader's, when it could: it stays in the frame, and the reader frees it with the
	 * frame (frame_retire), in the thread that allocated it */
	Rgpu__Launch *m = (Rgpu__Launch *)f->decoded;
	if (!m)
		m = UNPACK(Launch, launch, f);
	if (!m) {
		srv_protocol_error(w, RGPU_EPROTO, "undecodable %s", rgpu_msg_name(f->hdr.type));
		return RGPU_EPROTO;
	}
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	CUstream s = NULL;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	if (o && (o->kind == ST_KIND_FUNCTION || o->kind == ST_KIND_KERNEL) &&
	    f->hdr.payload_len < o->size) {
		/* the driver would read the parameters past the end of the payload */
		pr_warn_once("launch refused: %llu bytes of parameters for a function whose "
			     "parameters span %llu",
			     (unsigned long long)f->hdr.payload_len, (unsigned long long)o->size);
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (o && (o->kind == ST_KIND_FUNCTION || o->kind == ST_KIND_KERNEL)) {
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		void *params = f->payload, *moved = NULL;
		if (r == CUDA_SUCCESS && w->ngmoves && f->payload && f->hdr.payload_len) {
			/* pointers to module globals a restore placed elsewhere, in a copy: the
			 * frame itself is what a capture journal keeps */
			moved = malloc(f->hdr.payload_len);
			if (moved) {
				memcpy(moved, f->payload, f->hdr.payload_len);
				srv_translate_params(w, moved, f->hdr.payload_len);
				params = moved;
			}
		}
		if (r == CUDA_SUCCESS) {
			size_t size = f->hdr.payload_len;
			static char empty[8];
			void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
					 params ? params : empty,
					 CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
			if (m->attrs.len)
				r = launch_with_attrs(w, o->h, m, s, extra);
			else
				r = w->drv.cuLaunchKernel(o->h, m->grid_x, m->grid_y, m->grid_z,
							  m->block_x, m->block_y, m->block_z,
							  m->shared_mem, s, NULL, extra);
		}
		free(moved);
	}
	srv_async_error(w, r, "launch");
	if (!f->decoded)
		rgpu__launch__free_unpacked(m, NULL);
	return 0;
}

struct host_trigger {
	struct srv_worker *w;
	uint64_t id;
	int persistent;  /* captured into a graph: runs at every replay, never freed */
	struct host_trigger *next; /* persistent: on kept_triggers */
};

/*
 * The persistent triggers, kept for the worker's life: a graph (or a scratch graph's node that
 * lent its parameters) may call them at any launch, and a graph's end does not say so.
 */
static struct host_trigger *kept_triggers;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
/* the callbacks the client was asked to run and has not been waited for: what it may answer */
static void callbacks_called(struct srv_worker *w, int d)
{
	pthread_mutex_lock(&w->cb_lock);
	w->cb_called += (size_t)(ssize_t)d;
	pthread_mutex_unlock(&w->cb_lock);
}

static void CUDA_CB host_trigger_cb(void *arg)
{
	struct host_trigger *t = arg;
	Rgpu__Callback cb = RGPU__CALLBACK__INIT;
	cb.callback = t->id;
	/*
	 * The driver flushes its device printf buffer before a stream callback: that output
	 * reaches the program before its callback runs.
	 */
	srv_stdio_flush(t->w);
	srv_hm_sync(t->w); /* the device's writes to mirrored host memory, before the function */
	/* the stream waits here until the client's function has returned */
	if (!atomic_load(&t->w->dead)) {
		callbacks_called(t->w, 1); /* before the send: its answer may come at once */
		if (srv_send(t->w, RGPU_MSG_CALLBACK, 0, 0, &cb.base, NULL, 0) == 0)
			srv_wait_callback(t->w, t->id);
		callbacks_called(t->w, -1);
	}
	if (!t->persistent)
		free(t);
}

int h_host_func(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, HostFunc, host_func, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS) {
		struct host_trigger *t = malloc(sizeof(*t));
		if (!t) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			/* once launched, a one-shot trigger is the stream's: it may run and free t */
			int persistent = srv_capturing(w, s);
			t->w = w;
			t->id = m->callback;
			t->persistent = persistent;
			r = w->drv.cuLaunchHostFunc(s, host_trigger_cb, t);
			if (r != CUDA_SUCCESS) {
				free(t);
			} else if (persistent) {
				pthread_mutex_lock(&kept_lock);
				t->next = kept_triggers;
				kept_triggers = t;
				pthread_mutex_unlock(&kept_lock);
			}
		}
	}
	srv_async_error(w, r, "host function");
	rgpu__host_func__free_unpacked(m, NULL);
	return 0;
}

/* ---- host-function triggers ------------------------------------------------------------- */

int srv_callback_done(struct srv_worker *w, uint64_t id)
{
	pthread_mutex_lock(&w->cb_lock);
	if (w->cb_ndone >= w->cb_called) {
		/* more answers than calls: a client that makes them up would grow this for ever */
		pthread_mutex_unlock(&w->cb_lock);
		return RGPU_EPROTO;
	}
	if (w->cb_ndone == w->cb_cap) {
		size_t cap = w->cb_cap ? 2 * w->cb_cap : 16;
		uint64_t *n = realloc(w->cb_done, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&w->cb_lock);
			return RGPU_ENOMEM;
		}
		w->cb_done = n;
		w->cb_cap = cap;
	}
	w->cb_done[w->cb_ndone++] = id;
	pthread_cond_broadcast(&w->cb_cond);
	pthread_mutex_unlock(&w->cb_lock);
	return 0;
}

int srv_wait_callback(struct srv_worker *w, uint64_t id)
{
	int ret = RGPU_ECLOSED;
	atomic_fetch_add(&w->cb_waiting, 1); /* the session is not idle (--idle-timeout) */
	pthread_mutex_lock(&w->cb_lock);
	while (!atomic_load(&w->dead)) {
		size_t i;
		for (i = 0; i < w->cb_ndone && w->cb_done[i] != id; i++)
			;
		if (i < w->cb_ndone) {
			w->cb_done[i] = w->cb_done[--w->cb_ndone];
			ret = 0;
			break;
		}
		pthread_cond_wait(&w->cb_cond, &w->cb_lock);
	}
	pthread_mutex_unlock(&w->cb_lock);
	atomic_store(&w->active_ns, rgpu_now_ns());
	atomic_fetch_sub(&w->cb_waiting, 1);
	return ret;
}
