/*
 * Streams and events with real ordering.
 *
 * Each stream is a FIFO of operations run by its own thread. An operation may carry
 * dependencies, (stream, sequence number) pairs that must have completed before it runs;
 * they implement cuStreamWaitEvent and the legacy NULL stream's implicit synchronisation:
 * work on the NULL stream waits for all earlier work on the context's blocking streams, and
 * work on a blocking stream waits for earlier NULL-stream work. CU_STREAM_NON_BLOCKING
 * streams do neither. An event is the (stream, sequence number) of its last record, with a
 * CLOCK_MONOTONIC stamp taken when the stream reaches the record.
 *
 * All queues, counters and event records are under sim_sched, and every completion is
 * broadcast on sim_progress; a stream thread never holds sim_sched while it runs an
 * operation, so host functions may call back into the API. This file must never wait for a
 * stream while holding sim_lock.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

pthread_mutex_t sim_sched = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_progress = PTHREAD_COND_INITIALIZER;

static struct sim_link all_streams = {&all_streams, &all_streams}; /* under sim_sched */
static __thread bool on_stream;

#define PRIO_LEAST 0
#define PRIO_GREATEST (-5)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Under sim_sched: drop a reference; the last one frees the stream (its thread is gone). */
static void stream_put_locked(struct sim_stream *s)
{
	if (--s->refs)
		return;
	free(s->cap_deps.v);
	free(s->cap_edata);
	free(s);
}

/* sim_event_put_locked() - under sim_sched, drop a reference; the last one frees ev. */
void sim_event_put_locked(struct sim_event *ev)
{
	if (--ev->refs)
		return;
	if (ev->rec_stream)
		stream_put_locked(ev->rec_stream);
	free(ev->cap_nodes.v);
	free(ev);
}

/* --- operations --------------------------------------------------------------------------- */

/* sim_op_new() - a zeroed operation of the given enum sim_op_type, or NULL. */
struct sim_op *sim_op_new(int type)
{
	struct sim_op *op = calloc(1, sizeof(*op));

	if (op)
		op->type = type;
	return op;
}

static void op_free(struct sim_op *op, bool locked)
{
	if (!op)
		return;
	if (op->ndeps || op->type == SIM_OP_RECORD || op->type == SIM_OP_WAIT) {
		if (!locked)
			pthread_mutex_lock(&sim_sched);
		for (unsigned i = 0; i < op->ndeps; i++)
			stream_put_locked(op->deps[i].s);
		if (op->type == SIM_OP_RECORD || op->type == SIM_OP_WAIT)
			sim_event_put_locked(op->u.ev.ev);
		if (!locked)
			pthread_mutex_unlock(&sim_sched);
	}
	free(op->deps);
	if (op->type == SIM_OP_COPY)
		free(op->u.copy.owned);
	if (op->type == SIM_OP_KERNEL) {
		if (op->u.k.mod)
			sim_module_put(op->u.k.mod);
		free(op->u.k.blk);
		sim_condvals_put(op->u.k.vals);
	}
	if (op->type == SIM_OP_COND)
		sim_cond_free(op->u.cond.c, locked);
	free(op);
}

/* sim_op_free() - free op and drop what it references (streams, event, module). */
void sim_op_free(struct sim_op *op)
{
	op_free(op, false);
}

void sim_op_free_locked(struct sim_op *op)
{
	op_free(op, true);
}

/*
 * sim_op_clone() - a copy of op with its own buffers and references and no dependencies,
 * for graphs: captured work is cloned into the graph, and again at each launch. A conditional
 * node's operation is made for one launch and is never cloned (NULL).
 */
struct sim_op *sim_op_clone(const struct sim_op *op)
{
	struct sim_op *c = malloc(sizeof(*c));

	if (!c || op->type == SIM_OP_COND) {
		free(c);
		return NULL;
	}
	*c = *op;
	c->next = NULL;
	c->deps = NULL;
	c->ndeps = 0;
	c->seq = 0;
	switch (op->type) {
	case SIM_OP_COPY:
		if (op->u.copy.owned) {
			c->u.copy.owned = malloc(op->u.copy.n);
			if (!c->u.copy.owned)
				goto fail;
			memcpy(c->u.copy.owned, op->u.copy.owned, op->u.copy.n);
			c->u.copy.src = (uintptr_t)c->u.copy.owned;
		}
		break;
	case SIM_OP_KERNEL: {
		void **ptrs;
		c->u.k.blk = malloc(op->u.k.blk_size ? op->u.k.blk_size : 1);
		if (!c->u.k.blk)
			goto fail;
		memcpy(c->u.k.blk, op->u.k.blk, op->u.k.blk_size);
		ptrs = c->u.k.blk;
		for (unsigned i = 0; i < op->u.k.l.nparams; i++)
			ptrs[i] = (char *)c->u.k.blk +
				  ((char *)op->u.k.l.params[i] - (char *)op->u.k.blk);
		c->u.k.l.params = ptrs;
		__atomic_add_fetch(&op->u.k.mod->refs, 1, __ATOMIC_RELAXED);
		sim_condvals_get(op->u.k.vals);
		break;
	}
	case SIM_OP_RECORD:
	case SIM_OP_WAIT:
		pthread_mutex_lock(&sim_sched);
		op->u.ev.ev->refs++;
		pthread_mutex_unlock(&sim_sched);
		break;
	}
	return c;
fail:
	free(c);
	return NULL;
}

static bool deps_done(const struct sim_op *op)
{
	for (unsigned i = 0; i < op->ndeps; i++)
		if (op->deps[i].s->completed < op->deps[i].seq)
			return false;
	return true;
}

void sim_op_run(struct sim_stream *s, struct sim_op *op)
{
	CUresult r = CUDA_SUCCESS;

	switch (op->type) {
	case SIM_OP_COPY:
		r = sim_copy_run(op);
		break;
	case SIM_OP_SET:
		r = sim_set_run(op);
		break;
	case SIM_OP_KERNEL:
		sim_kernel_run(op, s->ctx);
		break;
	case SIM_OP_HOSTFN:
		op->u.host.fn(op->u.host.ud);
		break;
	case SIM_OP_CALLBACK:
		op->u.cb.fn(op->u.cb.h, s->ctx->sticky, op->u.cb.ud);
		break;
	case SIM_OP_RECORD:
		pthread_mutex_lock(&sim_sched);
		if (op->u.ev.ev->gen == op->u.ev.gen)
			op->u.ev.ev->stamp_ns = now_ns();
		pthread_mutex_unlock(&sim_sched);
		break;
	case SIM_OP_WAIT: /* its dependencies were the work */
		break;
	case SIM_OP_COND: /* runs the operations of a body here, on this thread */
		sim_cond_run(s, op->u.cond.c);
		break;
	}
	if (r != CUDA_SUCCESS) {
		sim_log("stream %p: operation failed at run time (%d)", (void *)s, r);
		pthread_mutex_lock(&sim_sched);
		if (s->ctx->sticky == CUDA_SUCCESS)
			s->ctx->sticky = r;
		pthread_mutex_unlock(&sim_sched);
	}
}

static void *stream_main(void *arg)
{
	struct sim_stream *s = arg;

	on_stream = true;
	pthread_mutex_lock(&sim_sched);
	for (;;) {
		struct sim_op *op = s->head;

		if (!op && s->stop)
			break;
		if (!op || !deps_done(op)) {
			pthread_cond_wait(&sim_progress, &sim_sched);
			continue;
		}
		pthread_mutex_unlock(&sim_sched);
		sim_op_run(s, op);
		pthread_mutex_lock(&sim_sched);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->completed = op->seq;
		pthread_cond_broadcast(&sim_progress);
		sim_op_free_locked(op);
	}
	sim_list_del(&s->node);
	sim_list_del(&s->all);
	pthread_cond_broadcast(&sim_progress);
	stream_put_locked(s);
	pthread_mutex_unlock(&sim_sched);
	return NULL;
}

/*
 * sim_stream_new() - a stream of ctx with its thread started; one reference is the caller's
 * (dropped by sim_stream_stop), one the thread's. Returns NULL when out of resources.
 */
struct sim_stream *sim_stream_new(struct sim_ctx *ctx, unsigned flags, int prio)
{
	struct sim_stream *s = calloc(1, sizeof(*s));
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (!s)
		return NULL;
	s->ctx = ctx;
	s->flags = flags;
	s->priority = prio;
	s->refs = 2;
	pthread_mutex_lock(&sim_sched);
	sim_list_add(&ctx->streams, &s->node);
	sim_list_add(&all_streams, &s->all);
	pthread_mutex_unlock(&sim_sched);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &attr, stream_main, s);
	pthread_attr_destroy(&attr);
	if (err) {
		pthread_mutex_lock(&sim_sched);
		sim_list_del(&s->node);
		sim_list_del(&s->all);
		pthread_mutex_unlock(&sim_sched);
		free(s);
		return NULL;
	}
	return s;
}

/* sim_stream_stop() - drop the creator's reference: the thread drains the queue and exits. */
void sim_stream_stop(struct sim_stream *s)
{
	pthread_mutex_lock(&sim_sched);
	sim_capture_abandon(s);
	if (!s->stop) {
		s->stop = true;
		stream_put_locked(s);
		pthread_cond_broadcast(&sim_progress);
	}
	pthread_mutex_unlock(&sim_sched);
}

/* Stops every stream of ctx and waits for their threads to finish their queues and exit. */
void sim_ctx_stop_streams(struct sim_ctx *ctx)
{
	pthread_mutex_lock(&sim_sched);
	for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct sim_stream *s = sim_entry(l, struct sim_stream, node);
		sim_capture_abandon(s);
		if (!s->stop) {
			sim_handle_del(s);
			s->stop = true;
			stream_put_locked(s); /* the thread still holds one */
		}
	}
	pthread_cond_broadcast(&sim_progress);
	while (!sim_list_empty(&ctx->streams))
		pthread_cond_wait(&sim_progress, &sim_sched);
	pthread_mutex_unlock(&sim_sched);
}

/* The calling thread's CU_STREAM_PER_THREAD stream in ctx, made on first use. */
static struct sim_stream *per_thread_stream(struct sim_ctx *ctx)
{
	pthread_t self = pthread_self();
	struct sim_stream *s = NULL;

	pthread_mutex_lock(&sim_sched);
	for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
		struct sim_stream *t = sim_entry(l, struct sim_stream, node);
		if (t->per_thread && !t->stop && pthread_equal(t->per_thread_owner, self)) {
			s = t;
			break;
		}
	}
	pthread_mutex_unlock(&sim_sched);
	if (s)
		return s;
	s = sim_stream_new(ctx, 0, 0);
	if (s) {
		/* only this thread looks for its per-thread stream: no one can race us here */
		pthread_mutex_lock(&sim_sched);
		s->per_thread = true;
		s->per_thread_owner = self;
		pthread_mutex_unlock(&sim_sched);
	}
	return s;
}

/*
 * sim_stream_get() - the stream a CUstream names: NULL and CU_STREAM_LEGACY are the current
 * context's NULL stream, CU_STREAM_PER_THREAD the calling thread's stream.
 * Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE, or a context error for the special handles.
 */
CUresult sim_stream_get(CUstream h, struct sim_stream **out)
{
	struct sim_ctx *ctx;
	CUresult r;

	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		if ((r = sim_ctx_current(&ctx)))
			return r;
		*out = h == CU_STREAM_PER_THREAD ? per_thread_stream(ctx) : ctx->null_stream;
		return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!sim_handle_is(h, SIM_STREAM))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct sim_stream *)h;
	return CUDA_SUCCESS;
}

static bool blocking(const struct sim_stream *s)
{
	return !(s->flags & CU_STREAM_NON_BLOCKING);
}

static int add_dep(struct sim_op *op, unsigned *cap, struct sim_stream *t, uint64_t seq)
{
	if (t->completed >= seq)
		return 0;
	if (op->ndeps == *cap) {
		unsigned n = *cap ? 2 * *cap : 4;
		struct sim_dep *d = realloc(op->deps, n * sizeof(*d));
		if (!d)
			return -1;
		op->deps = d;
		*cap = n;
	}
	t->refs++;
	op->deps[op->ndeps].s = t;
	op->deps[op->ndeps].seq = seq;
	op->ndeps++;
	return 0;
}

/* Queue op on s, under sim_sched. On success op belongs to the stream (or the capture). */
static CUresult enqueue_locked(struct sim_stream *s, struct sim_op *op, uint64_t *seq)
{
	struct sim_ctx *ctx = s->ctx;
	bool consumed;
	unsigned cap = 0;
	CUresult r;

	if ((r = sim_capture_op(s, op, &consumed)) || consumed) {
		if (seq)
			*seq = 0;
		return r;
	}
	if (s == ctx->null_stream) {
		if (sim_capture_blocks_legacy(ctx))
			return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		for (struct sim_link *l = ctx->streams.next; l != &ctx->streams; l = l->next) {
			struct sim_stream *t = sim_entry(l, struct sim_stream, node);
			if (t != s && blocking(t) && add_dep(op, &cap, t, t->submitted))
				return CUDA_ERROR_OUT_OF_MEMORY;
		}
	} else if (blocking(s) && ctx->null_stream) {
		if (add_dep(op, &cap, ctx->null_stream, ctx->null_stream->submitted))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (op->type == SIM_OP_WAIT) {
		struct sim_event *ev = op->u.ev.ev;
		/* an event recorded into a finished capture was never really recorded */
		if (ev->rec_stream && !ev->cap_id && ev->rec_stream != s &&
		    add_dep(op, &cap, ev->rec_stream, ev->rec_seq))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->seq = ++s->submitted;
	if (op->type == SIM_OP_RECORD) {
		struct sim_event *ev = op->u.ev.ev;
		s->refs++;
		if (ev->rec_stream)
			stream_put_locked(ev->rec_stream);
		ev->rec_stream = s;
		ev->rec_seq = op->seq;
		ev->cap_id = 0;
		ev->cap_nodes.n = 0;
		op->u.ev.gen = ++ev->gen;
	}
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	if (seq)
		*seq = op->seq;
	pthread_cond_broadcast(&sim_progress);
	return CUDA_SUCCESS;
}

/*
 * sim_enqueue() - queue op on s (or record it into s's capture). Takes op in every case.
 * *seq (optional) is the op's sequence number, 0 when it was captured.
 * Returns CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY or a capture error.
 */
CUresult sim_enqueue(struct sim_stream *s, struct sim_op *op, uint64_t *seq)
{
	CUresult r;

	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_sched);
	r = enqueue_locked(s, op, seq);
	if (r != CUDA_SUCCESS)
		sim_op_free_locked(op);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/* sim_enqueue_list() - queue n ops at once (a graph launch): no other work lands between. */
CUresult sim_enqueue_list(struct sim_stream *s, struct sim_op *const *ops, unsigned n)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_sched);
	for (unsigned i = 0; i < n; i++) {
		if (r == CUDA_SUCCESS && (r = enqueue_locked(s, ops[i], NULL)) == CUDA_SUCCESS)
			continue;
		sim_op_free_locked(ops[i]); /* the one that failed and all after it */
	}
	pthread_mutex_unlock(&sim_sched);
	return r;
}

/*
 * sim_wait_seq() - wait until s has completed op seq; returns the context's sticky error. A
 * synchronisation (a stream's, a blocking copy's): the device printf buffer is flushed.
 */
CUresult sim_wait_seq(struct sim_stream *s, uint64_t seq)
{
	struct sim_ctx *ctx = s->ctx;
	CUresult r;

	pthread_mutex_lock(&sim_sched);
	s->refs++;
	while (s->completed < seq)
		pthread_cond_wait(&sim_progress, &sim_sched);
	r = s->ctx->sticky;
	stream_put_locked(s);
	pthread_mutex_unlock(&sim_sched);
	sim_ctx_flush_output(ctx);
	return r;
}

/*
 * Wait for everything queued so far on a set of streams: those of ctx (all of them, or only
 * the NULL stream and the blocking ones when legacy_only), or every stream when ctx is NULL.
 * The targets are taken first so that work queued meanwhile is not waited for.
 */
static void wait_streams(struct sim_ctx *ctx, bool legacy_only)
{
	struct sim_dep *v = NULL;
	unsigned n = 0, cap = 0;

	pthread_mutex_lock(&sim_sched);
	for (struct sim_link *l = all_streams.next; l != &all_streams; l = l->next) {
		struct sim_stream *s = sim_entry(l, struct sim_stream, all);
		if ((ctx && s->ctx != ctx) || (legacy_only && !blocking(s)) ||
		    s->completed >= s->submitted)
			continue;
		if (n == cap) {
			unsigned c2 = cap ? 2 * cap : 16;
			struct sim_dep *v2 = realloc(v, c2 * sizeof(*v2));
			if (!v2)
				break; /* degrade to waiting for what we have */
			v = v2;
			cap = c2;
		}
		s->refs++;
		v[n].s = s;
		v[n++].seq = s->submitted;
	}
	for (unsigned i = 0; i < n; i++) {
		while (v[i].s->completed < v[i].seq)
			pthread_cond_wait(&sim_progress, &sim_sched);
		stream_put_locked(v[i].s);
	}
	pthread_mutex_unlock(&sim_sched);
	free(v);
}

/* sim_ctx_sync() - wait for all of ctx's work and flush its output; returns its sticky error. */
CUresult sim_ctx_sync(struct sim_ctx *ctx)
{
	CUresult r;

	wait_streams(ctx, false);
	pthread_mutex_lock(&sim_sched);
	r = ctx->sticky;
	pthread_mutex_unlock(&sim_sched);
	sim_ctx_flush_output(ctx);
	return r;
}

/* sim_device_sync() - wait for the work of every context (before memory is unmapped). */
void sim_device_sync(void)
{
	if (!on_stream) /* a host function waiting for its own stream would never return */
		wait_streams(NULL, false);
}

/* --- stream API --------------------------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
	struct sim_ctx *ctx;
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	prio = prio > PRIO_LEAST ? PRIO_LEAST : prio < PRIO_GREATEST ? PRIO_GREATEST : prio;
	s = sim_stream_new(ctx, flags, prio);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (sim_handle_add(s, SIM_STREAM)) {
		sim_stream_stop(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return stream_create(phStream, flags, priority);
}

/* Work still queued runs to completion; the stream goes away after it. */
CUresult CUDAAPI cuStreamDestroy_v2(CUstream h)
{
	SIM_ENTER();
	if (!sim_handle_is(h, SIM_STREAM))
		return CUDA_ERROR_INVALID_HANDLE;
	sim_handle_del(h);
	sim_stream_stop((struct sim_stream *)h);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream h)
{
	struct sim_stream *s;
	uint64_t target;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	if (s->capture) {
		pthread_mutex_unlock(&sim_sched);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	target = s->submitted;
	pthread_mutex_unlock(&sim_sched);
	/* the NULL stream is ordered after every blocking stream */
	if (s == s->ctx->null_stream)
		wait_streams(s->ctx, true);
	return sim_wait_seq(s, target);
}

CUresult CUDAAPI cuStreamQuery(CUstream h)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	if (s->capture) {
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else if (s->completed < s->submitted) {
		r = CUDA_ERROR_NOT_READY;
	} else if (s == s->ctx->null_stream) {
		for (struct sim_link *l = s->ctx->streams.next; l != &s->ctx->streams;
		     l = l->next) {
			struct sim_stream *t = sim_entry(l, struct sim_stream, node);
			if (blocking(t) && t->completed < t->submitted)
				r = CUDA_ERROR_NOT_READY;
		}
	}
	if (r == CUDA_SUCCESS)
		r = s->ctx->sticky;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

static CUresult event_check(CUevent h)
{
	return sim_handle_is(h, SIM_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static struct sim_op *event_op(int type, struct sim_event *ev, unsigned flags)
{
	struct sim_op *op = sim_op_new(type);

	if (!op)
		return NULL;
	pthread_mutex_lock(&sim_sched);
	ev->refs++;
	pthread_mutex_unlock(&sim_sched);
	op->u.ev.ev = ev;
	op->u.ev.flags = flags;
	return op;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent hEvent, unsigned int Flags)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)) || (r = event_check(hEvent)))
		return r;
	return sim_enqueue(s, event_op(SIM_OP_WAIT, (struct sim_event *)hEvent, Flags), NULL);
}

CUresult CUDAAPI cuStreamGetFlags(CUstream h, unsigned int *flags)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	*flags = s->flags;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *priority)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	*priority = s->priority;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCtx(CUstream h, CUcontext *pctx)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	*pctx = (CUcontext)s->ctx;
	return CUDA_SUCCESS;
}

/* The host function runs on the stream's thread; the stream waits until it returns. */
CUresult CUDAAPI cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData)
{
	struct sim_stream *s;
	struct sim_op *op;
	CUresult r;

	SIM_ENTER();
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	op = sim_op_new(SIM_OP_HOSTFN);
	if (op) {
		op->u.host.fn = fn;
		op->u.host.ud = userData;
	}
	return sim_enqueue(s, op, NULL);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream h, CUstreamCallback callback, void *userData,
				     unsigned int flags)
{
	struct sim_stream *s;
	struct sim_op *op;
	bool capturing;
	CUresult r;

	SIM_ENTER();
	if (!callback || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	pthread_mutex_lock(&sim_sched);
	capturing = s->capture != NULL;
	pthread_mutex_unlock(&sim_sched);
	if (capturing) /* callbacks cannot be captured; host functions can */
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	op = sim_op_new(SIM_OP_CALLBACK);
	if (op) {
		op->u.cb.fn = callback;
		op->u.cb.ud = userData;
		op->u.cb.h = h;
	}
	return sim_enqueue(s, op, NULL);
}

/* --- events ------------------------------------------------------------------------------- */

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	const unsigned known =
	    CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
	struct sim_ctx *ctx;
	struct sim_event *ev;
	CUresult r;

	SIM_ENTER();
	if (!phEvent || (Flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ev->ctx = ctx;
	ev->flags = Flags;
	ev->refs = 1;
	if (sim_handle_add(ev, SIM_EVENT)) {
		free(ev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&sim_lock);
	sim_list_add(&ctx->events, &ev->node);
	pthread_mutex_unlock(&sim_lock);
	*phEvent = (CUevent)ev;
	return CUDA_SUCCESS;
}

/* A record still queued completes normally; the event goes away after it. */
CUresult CUDAAPI cuEventDestroy_v2(CUevent h)
{
	struct sim_event *ev = (struct sim_event *)h;

	SIM_ENTER();
	if (event_check(h))
		return CUDA_ERROR_INVALID_HANDLE;
	sim_handle_del(ev);
	pthread_mutex_lock(&sim_lock);
	sim_list_del(&ev->node);
	pthread_mutex_unlock(&sim_lock);
	pthread_mutex_lock(&sim_sched);
	sim_event_put_locked(ev);
	pthread_mutex_unlock(&sim_sched);
	return CUDA_SUCCESS;
}

/* Called by context teardown: the context's events die with it. */
void sim_ctx_drop_events(struct sim_ctx *ctx)
{
	struct sim_link dead;

	sim_list_init(&dead);
	pthread_mutex_lock(&sim_lock);
	while (!sim_list_empty(&ctx->events)) {
		struct sim_link *l = ctx->events.next;
		sim_list_del(l);
		sim_list_add(&dead, l);
		sim_handle_del(sim_entry(l, struct sim_event, node));
	}
	pthread_mutex_unlock(&sim_lock);
	pthread_mutex_lock(&sim_sched);
	while (!sim_list_empty(&dead)) {
		struct sim_link *l = dead.next;
		sim_list_del(l);
		sim_event_put_locked(sim_entry(l, struct sim_event, node));
	}
	pthread_mutex_unlock(&sim_sched);
}

static CUresult event_record(CUevent h, CUstream hs, unsigned flags)
{
	struct sim_event *ev = (struct sim_event *)h;
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = event_check(h)) || (r = sim_stream_get(hs, &s)))
		return r;
	if (ev->ctx != s->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	return sim_enqueue(s, event_op(SIM_OP_RECORD, ev, flags), NULL);
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, 0);
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return event_record(hEvent, hStream, flags);
}

/* Under sim_sched: has the event's last record been reached (or was it never recorded)? */
static bool event_done(const struct sim_event *ev)
{
	return !ev->rec_stream || ev->cap_id || ev->rec_stream->completed >= ev->rec_seq;
}

CUresult CUDAAPI cuEventQuery(CUevent h)
{
	struct sim_event *ev = (struct sim_event *)h;
	CUresult r;

	SIM_ENTER();
	if ((r = event_check(h)))
		return r;
	pthread_mutex_lock(&sim_sched);
	/* after a sticky fault, as the driver answers (measured on the H100) */
	r = ev->ctx->sticky ? ev->ctx->sticky : event_done(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuEventSynchronize(CUevent h)
{
	struct sim_event *ev = (struct sim_event *)h;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if ((r = event_check(h)))
		return r;
	ctx = ev->ctx;
	pthread_mutex_lock(&sim_sched);
	ev->refs++;
	while (!event_done(ev))
		pthread_cond_wait(&sim_progress, &sim_sched);
	r = ev->ctx->sticky;
	sim_event_put_locked(ev);
	pthread_mutex_unlock(&sim_sched);
	sim_ctx_flush_output(ctx);
	return r;
}

static CUresult elapsed(float *ms, CUevent ha, CUevent hb)
{
	struct sim_event *a = (struct sim_event *)ha, *b = (struct sim_event *)hb;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (event_check(ha) || event_check(hb))
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_sched);
	if (!a->rec_stream || !b->rec_stream || a->cap_id || b->cap_id)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (!event_done(a) || !event_done(b))
		r = CUDA_ERROR_NOT_READY;
	else
		*ms = (float)((double)((int64_t)(b->stamp_ns - a->stamp_ns)) / 1e6);
	pthread_mutex_unlock(&sim_sched);
	return r;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}

/* sim_stream_capturing() - whether work queued on s now would be captured. */
bool sim_stream_capturing(struct sim_stream *s)
{
	bool c;

	pthread_mutex_lock(&sim_sched);
	c = s->capture != NULL;
	pthread_mutex_unlock(&sim_sched);
	return c;
}

/* ---- stream attributes ------------------------------------------------------------------ */

/* what a stream answers for an attribute never set (the driver's defaults) */
static void attr_default(const struct sim_stream *s, CUstreamAttrID a, CUstreamAttrValue *v)
{
	memset(v, 0, sizeof(*v));
	if (a == CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY)
		v->syncPolicy = CU_SYNC_POLICY_AUTO;
	else if (a == CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)
		v->memSyncDomainMap.remote = 1;
	else if (a == CU_STREAM_ATTRIBUTE_PRIORITY)
		v->priority = s->priority;
}

/* the attributes valid on streams, with the driver's range checks */
static CUresult attr_check(CUstreamAttrID a, const CUstreamAttrValue *v)
{
	const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
	switch ((int)a) {
	case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
		if (!(w->hitRatio >= 0.0f && w->hitRatio <= 1.0f) ||
		    w->hitProp > CU_ACCESS_PROPERTY_PERSISTING ||
		    w->missProp > CU_ACCESS_PROPERTY_STREAMING || w->num_bytes > (128u << 20))
			return CUDA_ERROR_INVALID_VALUE;
		return CUDA_SUCCESS;
	case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
		return v->syncPolicy >= CU_SYNC_POLICY_AUTO &&
				       v->syncPolicy <= CU_SYNC_POLICY_BLOCKING_SYNC
			   ? CUDA_SUCCESS
			   : CUDA_ERROR_INVALID_VALUE;
	case CU_STREAM_ATTRIBUTE_PRIORITY:
		return CUDA_SUCCESS; /* clamped into the range */
	case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
		return v->memSyncDomainMap.default_ <= 1 && v->memSyncDomainMap.remote <= 1
			   ? CUDA_SUCCESS
			   : CUDA_ERROR_INVALID_VALUE;
	case CU_STREAM_ATTRIBUTE_MEM_SYNC_DOMAIN:
		return v->memSyncDomain <= CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE ? CUDA_SUCCESS
									 : CUDA_ERROR_INVALID_VALUE;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult stream_attr(CUstream h, CUstreamAttrID a, CUstreamAttrValue *v, bool set)
{
	struct sim_stream *s;
	CUresult r;

	SIM_ENTER();
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(h, &s)))
		return r;
	if ((unsigned)a >= SIM_STREAM_ATTRS)
		return CUDA_ERROR_INVALID_VALUE;
	if (!set) {
		if (attr_check(a, &(CUstreamAttrValue){.syncPolicy = CU_SYNC_POLICY_AUTO}))
			return CUDA_ERROR_INVALID_VALUE; /* not a stream attribute */
		if (s->attr_set[a])
			*v = s->attr[a];
		else
			attr_default(s, a, v);
		if (a == CU_STREAM_ATTRIBUTE_PRIORITY)
			v->priority = s->priority;
		return CUDA_SUCCESS;
	}
	if ((r = attr_check(a, v)))
		return r;
	s->attr[a] = *v;
	s->attr_set[a] = true;
	if (a == CU_STREAM_ATTRIBUTE_PRIORITY)
		s->priority = v->priority > PRIO_LEAST	  ? PRIO_LEAST
			      : v->priority < PRIO_GREATEST ? PRIO_GREATEST
							    : v->priority;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSetAttribute(CUstream h, CUstreamAttrID a, const CUstreamAttrValue *v)
{
	return stream_attr(h, a, (CUstreamAttrValue *)v, true);
}

CUresult CUDAAPI cuStreamGetAttribute(CUstream h, CUstreamAttrID a, CUstreamAttrValue *v)
{
	return stream_attr(h, a, v, false);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if (least)
		*least = PRIO_LEAST;
	if (greatest)
		*greatest = PRIO_GREATEST;
	return CUDA_SUCCESS;
}
