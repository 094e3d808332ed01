/*
 * The session: the interposer's job on rgpud, and the command stream to it (design.md §4).
 *
 * The session is not its connection. Every frame sent is kept until the worker says it has
 * executed past it (the `ack` of every frame it sends, and its MSG_ACK when it goes idle).
 * When the link breaks — a reset, a timeout, the peer vanishing — the receiver thread
 * reconnects with backoff, presents the job id and its resume token, and resends exactly the
 * frames the worker never received; the worker does the same with what it sent. Callers
 * notice a delay, nothing else. The kept bytes are bounded (RGPU_UNACKED_MAX, 64 MiB): past
 * it a sender waits for acknowledgements, which is the flow control.
 *
 * Fire-and-forget requests are queued and written in batches by a sender thread (a burst of
 * launches costs one system call, not one each); a synchronous request writes everything
 * queued before it and waits for its reply. Payloads above IP_INLINE_MAX are written straight
 * from the caller's memory, and copied before the call returns only if the worker has not yet
 * executed them (the caller may reuse its buffer, and a resend needs the bytes). A receiver
 * thread reads replies, device-to-host data (written straight into the destination),
 * host-function triggers and acknowledgements. Host functions run on a callback thread, never
 * the receiver, so a slow callback cannot stall data.
 *
 * When the job cannot be resumed (its grace period passed, the server refused, or no server
 * answered in time) the session is dead: one log line says why, every later call returns
 * CUDA_ERROR_DEVICE_UNAVAILABLE and every waiter is woken. Nothing here ever blocks forever on
 * a server that went away.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "rgpu/window.h"

#define IP_INLINE_MAX (64u << 10)
#define IP_HELLO_TIMEOUT_MS 60000
#define IP_RESUME_HELLO_TIMEOUT_MS 10000
#define IP_SPIN_NS 20000
#define IP_UNACKED_MAX (64ull << 20)
#define IP_ACK_EVERY (1ull << 20)   /* tell the server every MiB received */
#define IP_JOB_ID_LEN 16
#define IP_TOKEN_LEN 32

/* A frame kept until the worker has executed it. */
struct ofr {
	struct ofr *next;
	uint64_t seq;
	size_t len;             /* header, body and any copied payload in data[] */
	const void *ext;        /* a payload not copied: the caller's memory... */
	void *own;              /* ...or, once the caller may reuse it, our copy */
	uint64_t ext_len;
	uint8_t data[];
};

struct waiter {
	uint64_t seq;
	void *dst;
	uint64_t dst_size, received;
	int async;
	atomic_int done;
	uint8_t *body;
	uint32_t body_len;
	uint16_t type;
	pthread_mutex_t m;
	pthread_cond_t c;
	struct waiter *next;
};

struct cbreg {
	uint64_t id;
	int persistent;
	CUhostFn fn;
	CUstreamCallback cb;
	CUstream stream;
	void *user;
	struct cbreg *next;
};

static struct {
	char server[300], host[256];
	int port;
	struct rgpu_conn *conn;      /* changed by the receiver only, under send_lock */
	uint64_t session;
	uint8_t job_id[IP_JOB_ID_LEN], token[IP_TOKEN_LEN];
	char job_hex[2 * IP_JOB_ID_LEN + 1];
	int grace_s;
	pid_t pid;
	int closing;                 /* goodbye sent: a broken link is the end */

	pthread_mutex_t send_lock;   /* one writer on the link */
	pthread_mutex_t q_lock;      /* the kept list, seq, acked */
	pthread_cond_t q_cond;       /* the sender thread: something to write */
	pthread_cond_t ack_cond;     /* flow control: room below the bound */
	struct ofr *head, *tail, *unsent;
	uint64_t seq;                /* last seq assigned */
	uint64_t acked;              /* the worker executed through this seq */
	uint64_t kept_bytes, kept_max;
	int link_up;
	unsigned gen;                /* +1 at every break and every resume */
	uint64_t rx_seq;             /* last server seq received (receiver only) */
	uint64_t rx_unacked;         /* bytes received since the server last heard rx_seq */
	atomic_uint resumes;

	pthread_mutex_t wait_lock;
	struct waiter *waiters;

	atomic_int dead;
	CUresult dead_err;
	pthread_mutex_t async_lock;
	CUresult pending_async;

	pthread_mutex_t cb_lock;
	pthread_cond_t cb_cond;
	struct cbreg *cbregs;
	uint64_t *cbq;
	size_t cbq_n, cbq_cap;
	atomic_uint_fast64_t cb_next;
} S = {
	.send_lock = PTHREAD_MUTEX_INITIALIZER,
	.q_lock = PTHREAD_MUTEX_INITIALIZER,
	.q_cond = PTHREAD_COND_INITIALIZER,
	.ack_cond = PTHREAD_COND_INITIALIZER,
	.wait_lock = PTHREAD_MUTEX_INITIALIZER,
	.async_lock = PTHREAD_MUTEX_INITIALIZER,
	.cb_lock = PTHREAD_MUTEX_INITIALIZER,
	.cb_cond = PTHREAD_COND_INITIALIZER,
};

CUresult ip_session_error(void)
{
	return atomic_load(&S.dead) ? S.dead_err : CUDA_SUCCESS;
}

/* ---- death ------------------------------------------------------------------------------ */

static void session_die(CUresult err, const char *why)
{
	struct waiter *w;

	if (atomic_exchange(&S.dead, 1))
		return;
	S.dead_err = err;
	if (!S.closing)
		pr_err("session with the GPU server lost: %s; CUDA calls now fail with "
		       "CUDA_ERROR_DEVICE_UNAVAILABLE", why);
	if (S.conn)
		rgpu_conn_shutdown(S.conn);
	pthread_mutex_lock(&S.wait_lock);
	for (w = S.waiters; w; w = w->next) {
		pthread_mutex_lock(&w->m);
		atomic_store(&w->done, 1);
		pthread_cond_signal(&w->c);
		pthread_mutex_unlock(&w->m);
	}
	pthread_mutex_unlock(&S.wait_lock);
	pthread_mutex_lock(&S.q_lock);
	pthread_cond_broadcast(&S.q_cond);
	pthread_cond_broadcast(&S.ack_cond);
	pthread_mutex_unlock(&S.q_lock);
	pthread_mutex_lock(&S.cb_lock);
	pthread_cond_broadcast(&S.cb_cond);
	pthread_mutex_unlock(&S.cb_lock);
}

/* ---- the kept frames ---------------------------------------------------------------------- */

static void waiter_add(struct waiter *w);

/*
 * Append one frame and give it the next seq. A payload up to IP_INLINE_MAX is copied in; a
 * larger one is referenced (borrow) and must be written, or copied with keep_copy(), before
 * the caller's memory may change. Waits for room below the bound unless urgent (callback
 * acknowledgements and goodbye must never wait behind work the server cannot finish without
 * them). w, when given, is registered under the same seq before anything can be written.
 */
static int enqueue(uint16_t type, const ProtobufCMessage *req, const void *payload,
		   uint64_t plen, int urgent, struct waiter *w, struct ofr **out)
{
	int borrow = plen > IP_INLINE_MAX;
	size_t hlen = rgpu_frame_size(req), keep = hlen + (borrow ? 0 : plen);
	struct rgpu_frame_hdr h = {.type = type, .payload_len = plen};
	struct ofr *f = malloc(sizeof(*f) + keep);

	if (!f)
		return RGPU_ENOMEM;
	pthread_mutex_lock(&S.q_lock);
	while (!urgent && S.kept_bytes && S.kept_bytes + hlen + plen > S.kept_max &&
	       !atomic_load(&S.dead))
		pthread_cond_wait(&S.ack_cond, &S.q_lock);
	if (atomic_load(&S.dead)) {
		pthread_mutex_unlock(&S.q_lock);
		free(f);
		return RGPU_ECLOSED;
	}
	h.seq = ++S.seq;
	h.session = S.session;
	h.ack = S.rx_seq;
	f->next = NULL;
	f->seq = h.seq;
	f->len = rgpu_frame_pack_hdr(f->data, &h, req);
	f->ext = NULL;
	f->own = NULL;
	f->ext_len = 0;
	if (borrow) {
		f->ext = payload;
		f->ext_len = plen;
	} else if (plen) {
		memcpy(f->data + f->len, payload, plen);
		f->len += plen;
	}
	if (w) {
		w->seq = h.seq;
		waiter_add(w);
	}
	if (S.tail)
		S.tail->next = f;
	else
		S.head = f;
	S.tail = f;
	if (!S.unsent) {
		S.unsent = f;
		pthread_cond_signal(&S.q_cond);
	}
	S.kept_bytes += hlen + plen;
	pthread_mutex_unlock(&S.q_lock);
	if (out)
		*out = f;
	return 0;
}

/*
 * Copies of large payloads are chunk-sized and short-lived: a few are kept for reuse, since a
 * fresh 4 MiB allocation faults in every page each time. Caller holds q_lock.
 */
#define IP_COPY_CACHE 8
static void *copy_cache[IP_COPY_CACHE];
static int copy_cached;

static void copy_put_locked(void *p, uint64_t len)
{
	if (p && len == RGPU_COPY_CHUNK && copy_cached < IP_COPY_CACHE)
		copy_cache[copy_cached++] = p;
	else
		free(p);
}

static void *copy_get(uint64_t len)
{
	void *p = NULL;
	if (len == RGPU_COPY_CHUNK) {
		pthread_mutex_lock(&S.q_lock);
		if (copy_cached)
			p = copy_cache[--copy_cached];
		pthread_mutex_unlock(&S.q_lock);
	}
	return p ? p : malloc(len);
}

/* The worker executed through seq: drop what it covers. Caller holds q_lock. */
static void acked_locked(uint64_t seq)
{
	struct ofr *f;
	int freed = 0;

	if (seq <= S.acked)
		return;
	if (seq > S.seq)
		seq = S.seq; /* never past what was sent */
	S.acked = seq;
	while ((f = S.head) && f->seq <= seq) {
		if (f == S.unsent)
			S.unsent = f->next;
		S.head = f->next;
		if (!S.head)
			S.tail = NULL;
		S.kept_bytes -= f->len + f->ext_len;
		copy_put_locked(f->own, f->ext_len);
		free(f);
		freed = 1;
	}
	if (freed)
		pthread_cond_broadcast(&S.ack_cond);
}

static void on_acked(uint64_t seq)
{
	if (seq <= S.acked) /* racy peek; rechecked under the lock */
		return;
	pthread_mutex_lock(&S.q_lock);
	acked_locked(seq);
	pthread_mutex_unlock(&S.q_lock);
}

/* The link broke under a writer or reader. Caller holds q_lock. */
static void link_broken_locked(void)
{
	if (S.link_up) {
		S.link_up = 0;
		S.gen++;
		if (S.conn)
			rgpu_conn_shutdown(S.conn); /* the receiver notices and resumes */
	}
}

/*
 * Write everything not yet written on this link, in order. Caller holds send_lock. A broken
 * link is not an error here: the frames stay kept and go out again after the resume.
 */
static void flush_locked(void)
{
	for (;;) {
		struct iovec iov[RGPU_CONN_MAX_IOV];
		struct ofr *f, *last = NULL;
		uint64_t last_seq;
		size_t bytes = 0;
		unsigned gen;
		int n = 0, ret;

		pthread_mutex_lock(&S.q_lock);
		if (!S.link_up || !S.unsent || atomic_load(&S.dead)) {
			pthread_mutex_unlock(&S.q_lock);
			return;
		}
		for (f = S.unsent; f && n + 2 <= RGPU_CONN_MAX_IOV && bytes < (8u << 20);
		     f = f->next) {
			iov[n].iov_base = f->data;
			iov[n++].iov_len = f->len;
			if (f->ext_len) {
				iov[n].iov_base = (void *)(f->own ? f->own : f->ext);
				iov[n++].iov_len = f->ext_len;
			}
			bytes += f->len + f->ext_len;
			last = f;
		}
		gen = S.gen;
		last_seq = last->seq;
		pthread_mutex_unlock(&S.q_lock);
		ret = rgpu_conn_sendv(S.conn, iov, n);
		pthread_mutex_lock(&S.q_lock);
		if (ret) {
			link_broken_locked();
		} else if (gen == S.gen) {
			/* acknowledgements may have freed what was written (and moved unsent) */
			while (S.unsent && S.unsent->seq <= last_seq)
				S.unsent = S.unsent->next;
		}
		pthread_mutex_unlock(&S.q_lock);
		if (ret)
			return;
	}
}

static void flush(void)
{
	pthread_mutex_lock(&S.send_lock);
	flush_locked();
	pthread_mutex_unlock(&S.send_lock);
}

/*
 * The caller is about to reuse the memory a borrowed payload points to: unless the worker has
 * executed frame seq already, keep a copy for a resend. Caller holds send_lock, so no writer
 * is reading the caller's memory meanwhile.
 */
static int keep_copy(uint64_t seq, const void *payload, uint64_t plen)
{
	struct ofr *f;
	void *copy;

	if (seq <= __atomic_load_n(&S.acked, __ATOMIC_ACQUIRE))
		return 0;
	copy = copy_get(plen);
	if (!copy)
		return RGPU_ENOMEM;
	memcpy(copy, payload, plen);
	pthread_mutex_lock(&S.q_lock);
	for (f = S.head; f && f->seq < seq; f = f->next)
		;
	if (f && f->seq == seq && f->ext && !f->own) {
		f->own = copy;
		copy = NULL;
	}
	if (copy)
		copy_put_locked(copy, plen);
	pthread_mutex_unlock(&S.q_lock);
	return 0;
}

static void *sender_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.q_lock);
	for (;;) {
		while ((!S.unsent || !S.link_up) && !atomic_load(&S.dead))
			pthread_cond_wait(&S.q_cond, &S.q_lock);
		if (atomic_load(&S.dead))
			break;
		pthread_mutex_unlock(&S.q_lock);
		flush();
		pthread_mutex_lock(&S.q_lock);
	}
	pthread_mutex_unlock(&S.q_lock);
	return NULL;
}

static CUresult send_error(int ret)
{
	if (ip_session_error())
		return ip_session_error();
	return ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

CUresult ip_post(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen)
{
	struct ofr *f;
	int ret;

	if (!ip_msg_class_ok(type, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	ret = enqueue(type, req, payload, plen, 0, NULL, &f);
	if (ret)
		return send_error(ret);
	if (plen > IP_INLINE_MAX) {
		uint64_t seq = f->seq;
		pthread_mutex_lock(&S.send_lock);
		flush_locked();
		ret = keep_copy(seq, payload, plen);
		pthread_mutex_unlock(&S.send_lock);
		if (ret)
			session_die(CUDA_ERROR_OUT_OF_MEMORY, "out of memory keeping a payload");
	}
	return ip_session_error();
}

CUresult ip_post_borrowed(uint16_t type, const ProtobufCMessage *req, const void *payload,
			  uint64_t plen, uint64_t *seq)
{
	struct ofr *f;
	int ret;

	if (!ip_msg_class_ok(type, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	ret = enqueue(type, req, payload, plen, 0, NULL, &f);
	if (ret)
		return send_error(ret);
	*seq = f->seq;
	if (plen > IP_INLINE_MAX)
		flush();
	return ip_session_error();
}

/* How long ip_release_borrowed() waits for the worker before it copies instead. */
#define IP_RELEASE_WAIT_NS 10000000ull

CUresult ip_release_borrowed(uint64_t first, uint64_t last)
{
	struct {
		uint64_t seq;
		const void *p;
		uint64_t len;
	} todo[64];
	uint64_t from = first;
	struct timespec ts;
	int ret = 0;

	if (!last || atomic_load(&S.dead))
		return ip_session_error();
	/* small payloads were copied when they were queued: nothing to wait for */
	pthread_mutex_lock(&S.q_lock);
	struct ofr *b;
	for (b = S.head; b && (b->seq < first || !b->ext || b->own); b = b->next)
		if (b->seq > last)
			break;
	int borrowed = b && b->seq >= first && b->seq <= last && b->ext && !b->own;
	pthread_mutex_unlock(&S.q_lock);
	if (!borrowed)
		return ip_session_error();
	/*
	 * The worker usually executes a copy chunk about a round trip after its last byte left:
	 * waiting for that costs less than copying megabytes, and it is what a pageable copy costs
	 * natively too.
	 */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)IP_RELEASE_WAIT_NS;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&S.q_lock);
	while (S.acked < last && S.link_up && !atomic_load(&S.dead))
		if (pthread_cond_timedwait(&S.ack_cond, &S.q_lock, &ts))
			break;
	pthread_mutex_unlock(&S.q_lock);
	/* what is still not executed is copied, with no writer reading the caller's memory */
	pthread_mutex_lock(&S.send_lock);
	while (!ret && from <= last && from > S.acked) {
		struct ofr *f;
		int n = 0;
		pthread_mutex_lock(&S.q_lock);
		for (f = S.head; f && f->seq < from; f = f->next)
			;
		for (; f && f->seq <= last && n < 64; f = f->next) {
			if (f->ext && !f->own) {
				todo[n].seq = f->seq;
				todo[n].p = f->ext;
				todo[n++].len = f->ext_len;
			}
			from = f->seq + 1;
		}
		if (!f || f->seq > last)
			from = last + 1;
		pthread_mutex_unlock(&S.q_lock);
		for (int i = 0; i < n && !ret; i++)
			ret = keep_copy(todo[i].seq, todo[i].p, todo[i].len);
	}
	pthread_mutex_unlock(&S.send_lock);
	if (ret)
		session_die(CUDA_ERROR_OUT_OF_MEMORY, "out of memory keeping a payload");
	return ip_session_error();
}

/* ---- waiting for replies ------------------------------------------------------------------ */

static void waiter_add(struct waiter *w)
{
	pthread_mutex_lock(&S.wait_lock);
	w->next = S.waiters;
	S.waiters = w;
	pthread_mutex_unlock(&S.wait_lock);
}

static void waiter_remove_locked(struct waiter *w)
{
	struct waiter **pp;
	for (pp = &S.waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			return;
		}
}

static struct waiter *waiter_find_locked(uint64_t seq)
{
	struct waiter *w;
	for (w = S.waiters; w; w = w->next)
		if (w->seq == seq)
			return w;
	return NULL;
}

static void waiter_wait(struct waiter *w)
{
	uint64_t until = rgpu_now_ns() + rgpu_spin_budget_ns(IP_SPIN_NS);
	while (!atomic_load(&w->done) && rgpu_now_ns() < until)
		__builtin_ia32_pause();
	pthread_mutex_lock(&w->m);
	while (!atomic_load(&w->done))
		pthread_cond_wait(&w->c, &w->m);
	pthread_mutex_unlock(&w->m);
}

CUresult ip_call(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen,
		 void *dst, uint64_t dst_size, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **reply)
{
	struct waiter w = {0};
	struct ofr *f;
	CUresult r = CUDA_SUCCESS;
	int ret;

	*reply = NULL;
	if (!ip_msg_class_ok(type, RGPU_CLASS_CALL))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	w.dst = dst;
	w.dst_size = dst_size;
	w.type = type;
	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.c, NULL);
	ret = enqueue(type, req, payload, plen, 0, &w, &f);
	if (ret) {
		r = send_error(ret);
		goto out;
	}
	flush();
	waiter_wait(&w);
	pthread_mutex_lock(&S.wait_lock);
	waiter_remove_locked(&w);
	pthread_mutex_unlock(&S.wait_lock);
	if (!w.body && w.body_len == 0 && atomic_load(&S.dead)) {
		r = S.dead_err;
		goto out;
	}
	/* the reply says the worker executed the request, so a borrowed payload is no longer kept */
	*reply = protobuf_c_message_unpack(desc, NULL, w.body_len, w.body);
	if (!*reply) {
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable reply from the server");
		r = S.dead_err;
	}
out:
	free(w.body);
	pthread_mutex_destroy(&w.m);
	pthread_cond_destroy(&w.c);
	return r;
}

static int32_t field_i32(const ProtobufCMessage *m, unsigned tag)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(m->descriptor, tag);
	if (!f || f->type != PROTOBUF_C_TYPE_INT32)
		return 0;
	return *(const int32_t *)((const char *)m + f->offset);
}

/* Remember an asynchronous error; hand back the oldest one not yet reported. */
static CUresult take_async(CUresult fresh)
{
	CUresult r;
	pthread_mutex_lock(&S.async_lock);
	if (S.pending_async == CUDA_SUCCESS)
		S.pending_async = fresh;
	r = S.pending_async;
	S.pending_async = CUDA_SUCCESS;
	pthread_mutex_unlock(&S.async_lock);
	return r;
}

static void keep_async(CUresult fresh)
{
	if (fresh == CUDA_SUCCESS)
		return;
	pthread_mutex_lock(&S.async_lock);
	if (S.pending_async == CUDA_SUCCESS)
		S.pending_async = fresh;
	pthread_mutex_unlock(&S.async_lock);
}

CUresult ip_call_status(uint16_t type, const ProtobufCMessage *req, const void *payload,
			uint64_t plen, void *dst, uint64_t dst_size,
			const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply)
{
	ProtobufCMessage *rep = NULL;
	CUresult r, own, async;

	if (!desc)
		desc = &rgpu__status__descriptor;
	r = ip_call(type, req, payload, plen, dst, dst_size, desc, &rep);
	if (r != CUDA_SUCCESS)
		return r;
	own = (CUresult)field_i32(rep, 1);
	async = (CUresult)field_i32(rep, 2);
	if (own != CUDA_SUCCESS) {
		keep_async(async);
		r = own;
	} else {
		r = take_async(async);
	}
	if (reply)
		*reply = rep;
	else
		protobuf_c_message_free_unpacked(rep, NULL);
	return r;
}

CUresult ip_post_dtoh(const ProtobufCMessage *req, void *dst, uint64_t size)
{
	struct waiter *w;
	int ret;

	if (!ip_msg_class_ok(RGPU_MSG_MEMCPY_DTOH, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	w = calloc(1, sizeof(*w));
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->dst = dst;
	w->dst_size = size;
	w->async = 1;
	ret = enqueue(RGPU_MSG_MEMCPY_DTOH, req, NULL, 0, 0, w, NULL);
	if (ret) {
		free(w);
		return send_error(ret);
	}
	return CUDA_SUCCESS;
}

/* ---- host callbacks ----------------------------------------------------------------------- */

uint64_t ip_callback_register(CUhostFn fn, CUstreamCallback cb, CUstream stream, void *user,
			      int persistent)
{
	struct cbreg *r = malloc(sizeof(*r));
	if (!r)
		return 0;
	r->id = atomic_fetch_add(&S.cb_next, 1) + 1;
	r->persistent = persistent;
	r->fn = fn;
	r->cb = cb;
	r->stream = stream;
	r->user = user;
	pthread_mutex_lock(&S.cb_lock);
	r->next = S.cbregs;
	S.cbregs = r;
	pthread_mutex_unlock(&S.cb_lock);
	return r->id;
}

static void *callback_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.cb_lock);
	for (;;) {
		struct cbreg **pp, *r = NULL;
		uint64_t id;

		while (S.cbq_n == 0 && !atomic_load(&S.dead))
			pthread_cond_wait(&S.cb_cond, &S.cb_lock);
		if (atomic_load(&S.dead))
			break;
		id = S.cbq[0];
		memmove(S.cbq, S.cbq + 1, --S.cbq_n * sizeof(*S.cbq));
		for (pp = &S.cbregs; *pp; pp = &(*pp)->next)
			if ((*pp)->id == id) {
				r = *pp;
				if (!r->persistent)
					*pp = r->next;
				break;
			}
		pthread_mutex_unlock(&S.cb_lock);
		if (r) {
			if (r->fn)
				r->fn(r->user);
			else
				r->cb(r->stream, CUDA_SUCCESS, r->user);
			if (!r->persistent)
				free(r);
		} else {
			pr_warn("trigger for unknown host function %llu", (unsigned long long)id);
		}
		/* the server's stream waits for this acknowledgement: urgent, never held back */
		Rgpu__Callback done = RGPU__CALLBACK__INIT;
		done.callback = id;
		if (!enqueue(RGPU_MSG_CALLBACK_DONE, &done.base, NULL, 0, 1, NULL, NULL))
			flush();
		pthread_mutex_lock(&S.cb_lock);
	}
	pthread_mutex_unlock(&S.cb_lock);
	return NULL;
}

static void callback_push(uint64_t id)
{
	pthread_mutex_lock(&S.cb_lock);
	if (S.cbq_n == S.cbq_cap) {
		size_t cap = S.cbq_cap ? 2 * S.cbq_cap : 16;
		uint64_t *n = realloc(S.cbq, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&S.cb_lock);
			session_die(CUDA_ERROR_OUT_OF_MEMORY, "out of memory queueing a callback");
			return;
		}
		S.cbq = n;
		S.cbq_cap = cap;
	}
	S.cbq[S.cbq_n++] = id;
	pthread_cond_signal(&S.cb_cond);
	pthread_mutex_unlock(&S.cb_lock);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* Tell the worker what arrived, so it can drop what it kept. */
static void send_ack(void)
{
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_ACK};

	pthread_mutex_lock(&S.send_lock);
	h.session = S.session;
	h.ack = S.rx_seq;
	if (S.link_up && rgpu_frame_send_hdr(S.conn, &h, NULL, NULL)) {
		pthread_mutex_lock(&S.q_lock);
		link_broken_locked();
		pthread_mutex_unlock(&S.q_lock);
	}
	S.rx_unacked = 0;
	pthread_mutex_unlock(&S.send_lock);
}

/* Returns 0, or the transport error that broke the link in the middle of the payload. */
static int on_data(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	Rgpu__DataChunk *dc = rgpu__data_chunk__unpack(NULL, h->body_len, body);
	struct waiter *w;
	int ret;

	if (!dc) {
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable data frame");
		return 0;
	}
	pthread_mutex_lock(&S.wait_lock);
	w = waiter_find_locked(h->ref);
	/* the waiter cannot go away while data for it is outstanding: it waits for the reply */
	pthread_mutex_unlock(&S.wait_lock);
	if (!w || dc->offset > w->dst_size || h->payload_len > w->dst_size - dc->offset) {
		pr_warn("unexpected data for request %llu", (unsigned long long)h->ref);
		ret = rgpu_conn_discard(S.conn, h->payload_len);
	} else {
		ret = rgpu_conn_recv(S.conn, (uint8_t *)w->dst + dc->offset, h->payload_len);
		if (!ret)
			w->received += h->payload_len;
		if (!ret && w->async && w->received == w->dst_size) {
			pthread_mutex_lock(&S.wait_lock);
			waiter_remove_locked(w);
			pthread_mutex_unlock(&S.wait_lock);
			free(w);
		}
	}
	rgpu__data_chunk__free_unpacked(dc, NULL);
	return ret;
}

static void on_reply(const struct rgpu_frame_hdr *h, uint8_t **body)
{
	struct waiter *w;
	pthread_mutex_lock(&S.wait_lock);
	w = waiter_find_locked(h->ref);
	if (w && !w->async) {
		pthread_mutex_lock(&w->m);
		w->body = *body;
		w->body_len = h->body_len;
		atomic_store(&w->done, 1);
		pthread_cond_signal(&w->c);
		pthread_mutex_unlock(&w->m);
		*body = NULL;
	}
	pthread_mutex_unlock(&S.wait_lock);
}

static void on_error(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h->body_len, body);
	char why[320];
	snprintf(why, sizeof(why), "the server reported a protocol error: %s",
		 pe && pe->message ? pe->message : "?");
	if (pe)
		rgpu__protocol_error__free_unpacked(pe, NULL);
	session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, why);
}

static int resume(const char *why);

static void *receiver_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&S.dead)) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		int ret = rgpu_frame_recv(S.conn, RGPU_PEER_CLIENT, &h, &body);

		if (ret == RGPU_ECLOSED || ret == RGPU_EIO || ret == RGPU_ETRUNC ||
		    ret == RGPU_ETIMEDOUT) {
			if (!resume(ret == RGPU_ECLOSED ? "the server closed the connection"
							: rgpu_strerror(ret)))
				break;
			continue;
		}
		if (ret) {
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, rgpu_strerror(ret));
			break;
		}
		if (h.seq == 0) {
			/* unsequenced: an acknowledgement, or an error that ends the job */
			if (h.type == RGPU_MSG_ACK)
				on_acked(h.ack);
			else if (h.type == RGPU_MSG_ERROR)
				on_error(&h, body);
			else
				session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
					    "unexpected unsequenced frame from the server");
			free(body);
			continue;
		}
		on_acked(h.ack);
		if (h.seq <= S.rx_seq) {
			/* sent again by a worker that did not know it had arrived */
			free(body);
			ret = rgpu_conn_discard(S.conn, h.payload_len);
			if (ret && !resume(rgpu_strerror(ret)))
				break;
			continue;
		}
		if (h.seq != S.rx_seq + 1) {
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "the server skipped frames");
			free(body);
			break;
		}
		ret = 0;
		if (h.flags & RGPU_FRAME_REPLY) {
			on_reply(&h, &body);
			if (h.payload_len)
				ret = rgpu_conn_discard(S.conn, h.payload_len);
		} else if (h.type == RGPU_MSG_DATA) {
			ret = on_data(&h, body);
		} else if (h.type == RGPU_MSG_CALLBACK) {
			Rgpu__Callback *cb = rgpu__callback__unpack(NULL, h.body_len, body);
			if (cb) {
				callback_push(cb->callback);
				rgpu__callback__free_unpacked(cb, NULL);
			} else {
				session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable callback");
			}
		} else if (h.type == RGPU_MSG_ERROR) {
			on_error(&h, body);
		} else {
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "unexpected frame from the server");
		}
		free(body);
		if (ret) {
			/* the payload broke off: the worker sends the whole frame again */
			if (!resume(rgpu_strerror(ret)))
				break;
			continue;
		}
		S.rx_seq = h.seq;
		S.rx_unacked += RGPU_FRAME_HDR_LEN + h.body_len + h.payload_len;
		if (S.rx_unacked >= IP_ACK_EVERY)
			send_ack();
	}
	return NULL;
}

/* ---- the handshake ------------------------------------------------------------------------ */

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * Send a hello (a resume when the session has a job) and read the reply. Returns 0 with *out
 * set, RGPU_EPROTO with why filled when the server refused, or the transport's error.
 */
static int exchange_hello(struct rgpu_conn *c, int resuming, int timeout_ms,
			  Rgpu__HelloReply **out, char *why, size_t whylen)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr h, rh = {.type = RGPU_MSG_HELLO};
	uint8_t *body = NULL;
	char host[256] = "", prog[256] = "";
	ssize_t n;
	int ret;

	*out = NULL;
	gethostname(host, sizeof(host) - 1);
	n = readlink("/proc/self/exe", prog, sizeof(prog) - 1);
	prog[n > 0 ? n : 0] = '\0';
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.capabilities = RGPU_CAPS_CLIENT;
	hm.client_pid = getpid();
	hm.client_host = host;
	hm.client_program = prog;
	if (resuming) {
		hm.job_id.data = S.job_id;
		hm.job_id.len = IP_JOB_ID_LEN;
		hm.resume_token.data = S.token;
		hm.resume_token.len = IP_TOKEN_LEN;
		hm.received = S.rx_seq;
		rh.session = S.session;
	}
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	ret = rgpu_frame_send_hdr(c, &rh, &hm.base, NULL);
	if (!ret)
		ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, timeout_ms);
	if (ret)
		return ret;
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
		snprintf(why, whylen, "%s", pe && pe->message ? pe->message : "protocol error");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		free(body);
		return RGPU_EPROTO;
	}
	if (h.type == RGPU_MSG_HELLO && (h.flags & RGPU_FRAME_REPLY))
		*out = rgpu__hello_reply__unpack(NULL, h.body_len, body);
	free(body);
	if (!*out) {
		snprintf(why, whylen, "an unexpected first reply");
		return RGPU_EPROTO;
	}
	if ((*out)->resume_token.len == IP_TOKEN_LEN)
		memcpy(S.token, (*out)->resume_token.data, IP_TOKEN_LEN);
	return 0;
}

static CUresult hello(int connect_ms)
{
	Rgpu__HelloReply *rep = NULL;
	char why[320] = "";
	uint64_t backoff_us = 2000, deadline = rgpu_now_ns() + 10000000000ull;
	int ret;
	CUresult r;

	/*
	 * A link that breaks during the handshake (before the session has a job to resume) is
	 * tried again from the start, for up to 10 s; a refusal is final.
	 */
	for (;;) {
		ret = exchange_hello(S.conn, 0, IP_HELLO_TIMEOUT_MS, &rep, why, sizeof(why));
		if (ret != RGPU_ECLOSED && ret != RGPU_ETRUNC && ret != RGPU_EIO)
			break;
		rgpu_conn_close(S.conn);
		S.conn = NULL;
		do {
			if (rgpu_now_ns() + backoff_us * 1000 > deadline)
				goto lost;
			struct timespec ts = {0, (long)backoff_us * 1000};
			nanosleep(&ts, NULL);
			backoff_us = MIN(backoff_us * 2, 500000ull);
		} while (rgpu_tcp_connect(S.host, S.port, connect_ms, &S.conn));
		pr_info("the handshake with %s broke (%s); trying again", S.server,
			rgpu_strerror(ret));
	}
lost:
	if (ret == RGPU_EPROTO) {
		pr_err("the GPU server %s refused the session: %s", S.server, why);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (ret) {
		pr_err("no answer from the GPU server %s: %s", S.server, rgpu_strerror(ret));
		return CUDA_ERROR_NO_DEVICE;
	}
	if (rep->result != CUDA_SUCCESS) {
		pr_err("the GPU server %s cannot serve: %s", S.server, rep->error);
		r = (CUresult)rep->result;
		goto out;
	}
	/* every message family this client may send must be one the server knows */
	const uint64_t need = RGPU_CAPS_CLIENT;
	if ((rep->capabilities & need) != need) {
		pr_err("the GPU server %s lacks capabilities this client needs (has %#llx, needs %#llx)",
		       S.server, (unsigned long long)rep->capabilities, (unsigned long long)need);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (rep->protocol_version != RGPU_PROTO_VERSION || rep->n_devices == 0 ||
	    rep->window_size == 0 || rep->job_id.len != IP_JOB_ID_LEN ||
	    rep->resume_token.len != IP_TOKEN_LEN) {
		pr_err("the GPU server %s answered protocol %u with %zu devices", S.server,
		       rep->protocol_version, rep->n_devices);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	S.session = rep->session_id;
	memcpy(S.job_id, rep->job_id.data, IP_JOB_ID_LEN);
	hex(S.job_id, IP_JOB_ID_LEN, S.job_hex);
	S.grace_s = (int)rep->resume_grace_s;
	ip.driver_version = rep->driver_version;
	ip.ndev = (int)MIN(rep->n_devices, (size_t)IP_MAX_DEVICES);
	for (int i = 0; i < ip.ndev; i++) {
		Rgpu__DeviceInfo *d = rep->devices[i];
		snprintf(ip.dev[i].name, sizeof(ip.dev[i].name), "%s", d->name);
		if (d->uuid.len == 16)
			memcpy(ip.dev[i].uuid.bytes, d->uuid.data, 16);
		ip.dev[i].total_mem = d->total_mem;
		for (size_t a = 0; a < d->n_attributes && a < CU_DEVICE_ATTRIBUTE_MAX; a++)
			ip.dev[i].attr[a] = d->attributes[a];
	}
	/*
	 * The same range, inaccessible, in this process: no host allocation can ever land on a
	 * device address, so any pointer is classified by a range check.
	 */
	void *p = mmap((void *)(uintptr_t)rep->window_base, rep->window_size, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != (void *)(uintptr_t)rep->window_base) {
		pr_err("cannot reserve the device address window 0x%llx+0x%llx in this process: %s",
		       (unsigned long long)rep->window_base, (unsigned long long)rep->window_size,
		       p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		if (p != MAP_FAILED)
			munmap(p, rep->window_size);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (ip_vaw_init(&ip.vaw, rep->window_base, rep->window_size,
			rep->granularity ? rep->granularity : RGPU_GRANULE)) {
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	pr_info("job %s on %s: %d device(s), %s", S.job_hex, S.server, ip.ndev, ip.dev[0].name);
	r = CUDA_SUCCESS;
out:
	rgpu__hello_reply__free_unpacked(rep, NULL);
	return r;
}

/* ---- resuming ----------------------------------------------------------------------------- */

static int resume_timeout_s(void)
{
	const char *e = getenv("RGPU_RESUME_TIMEOUT_S");
	if (e && *e)
		return atoi(e);
	/* as long as the worker waits, and a little longer for a slow reconnect */
	return S.grace_s + 10;
}

/* Install a resumed link: the worker received through `received` and executed through `ack`. */
static void install(struct rgpu_conn *c, uint64_t received, uint64_t ack)
{
	struct rgpu_conn *old;
	struct ofr *f;
	uint64_t n = 0;

	pthread_mutex_lock(&S.send_lock);
	pthread_mutex_lock(&S.q_lock);
	old = S.conn;
	S.conn = c;
	acked_locked(ack);
	for (f = S.head; f && f->seq <= received; f = f->next)
		;
	S.unsent = f;
	for (; f; f = f->next)
		n++;
	S.link_up = 1;
	S.gen++;
	pthread_cond_signal(&S.q_cond);
	pthread_mutex_unlock(&S.q_lock);
	rgpu_conn_close(old);
	rgpu_conn_set_spin(c, (uint32_t)rgpu_spin_budget_ns(30000));
	S.rx_unacked = 0;
	flush_locked();
	pthread_mutex_unlock(&S.send_lock);
	pr_debug("job %s: %llu frame(s) sent again", S.job_hex, (unsigned long long)n);
}

/*
 * The link broke: reconnect with backoff and resume the job, in the receiver thread. Returns 1
 * when the link is up again, 0 when the session is over (it died, with one log line).
 */
static int resume(const char *why)
{
	uint64_t t0 = rgpu_now_ns(), deadline;
	uint64_t backoff_us = 1000;
	char msg[512];
	int tries = 0;

	if (atomic_load(&S.dead))
		return 0;
	pthread_mutex_lock(&S.q_lock);
	link_broken_locked();
	pthread_mutex_unlock(&S.q_lock);
	if (S.closing) {
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "closed");
		return 0;
	}
	if (S.grace_s <= 0) {
		snprintf(msg, sizeof(msg), "%s (the server keeps no job after a broken link)", why);
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
		return 0;
	}
	pr_info("job %s: link to %s lost (%s); resuming", S.job_hex, S.server, why);
	deadline = t0 + (uint64_t)resume_timeout_s() * 1000000000ull;
	for (;;) {
		struct rgpu_conn *c = NULL;
		Rgpu__HelloReply *rep = NULL;
		char refused[320] = "";
		int ret;

		tries++;
		ret = rgpu_tcp_connect(S.host, S.port, 2000, &c);
		if (!ret)
			ret = exchange_hello(c, 1, IP_RESUME_HELLO_TIMEOUT_MS, &rep, refused,
					     sizeof(refused));
		if (ret == RGPU_EPROTO) {
			rgpu_conn_close(c);
			snprintf(msg, sizeof(msg), "the GPU server %s refused to resume job %s: %s",
				 S.server, S.job_hex, refused);
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		if (!ret && (rep->result != CUDA_SUCCESS || !rep->resumed)) {
			snprintf(msg, sizeof(msg), "the GPU server %s did not resume job %s: %s",
				 S.server, S.job_hex, rep->error ? rep->error : "?");
			rgpu__hello_reply__free_unpacked(rep, NULL);
			rgpu_conn_close(c);
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		if (!ret) {
			install(c, rep->received, 0);
			rgpu__hello_reply__free_unpacked(rep, NULL);
			atomic_fetch_add(&S.resumes, 1);
			pr_info("job %s: resumed on %s after %.3f s (%d attempt(s))", S.job_hex,
				S.server, (double)(rgpu_now_ns() - t0) / 1e9, tries);
			return 1;
		}
		rgpu_conn_close(c);
		if (atomic_load(&S.dead))
			return 0;
		if (rgpu_now_ns() + backoff_us * 1000 > deadline) {
			snprintf(msg, sizeof(msg), "could not resume job %s on %s within %d s (%s)",
				 S.job_hex, S.server, resume_timeout_s(), rgpu_strerror(ret));
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		struct timespec ts = {(time_t)(backoff_us / 1000000), (long)(backoff_us % 1000000) * 1000};
		nanosleep(&ts, NULL);
		backoff_us = MIN(backoff_us * 2, 500000ull);
	}
}

/* ---- opening and closing ------------------------------------------------------------------ */

CUresult ip_session_open(void)
{
	const char *server = getenv("RGPU_SERVER");
	const char *tmo = getenv("RGPU_CONNECT_TIMEOUT_MS");
	const char *max = getenv("RGPU_UNACKED_MAX");
	pthread_t t;
	int ret;
	CUresult r;

	if (!server || !*server)
		server = RGPU_DEFAULT_SERVER;
	snprintf(S.server, sizeof(S.server), "%s", server);
	if (rgpu_parse_hostport(server, "127.0.0.1", S.host, sizeof(S.host), &S.port) ||
	    S.port == 0) {
		pr_err("RGPU_SERVER='%s' is not HOST:PORT", server);
		return CUDA_ERROR_NO_DEVICE;
	}
	S.kept_max = IP_UNACKED_MAX;
	if (max && *max) {
		uint64_t v;
		if (rgpu_parse_size(max, &v) || v < (1u << 20))
			pr_warn("RGPU_UNACKED_MAX='%s' is not a size of at least 1M; using 64M", max);
		else
			S.kept_max = v;
	}
	ret = rgpu_tcp_connect(S.host, S.port, tmo ? atoi(tmo) : 5000, &S.conn);
	if (ret) {
		pr_err("cannot reach the GPU server %s: %s (set RGPU_SERVER=HOST:PORT)", server,
		       ret == RGPU_ETIMEDOUT ? "timed out" : strerror(errno));
		return CUDA_ERROR_NO_DEVICE;
	}
	r = hello(tmo ? atoi(tmo) : 5000);
	if (r != CUDA_SUCCESS) {
		rgpu_conn_close(S.conn);
		S.conn = NULL;
		return r;
	}
	S.pid = getpid();
	S.link_up = 1;
	rgpu_conn_set_spin(S.conn, (uint32_t)rgpu_spin_budget_ns(30000));
	if (pthread_create(&t, NULL, receiver_main, NULL) ||
	    pthread_detach(t) || pthread_create(&t, NULL, sender_main, NULL) ||
	    pthread_detach(t) || pthread_create(&t, NULL, callback_main, NULL) ||
	    pthread_detach(t)) {
		pr_err("cannot start the session threads");
		session_die(CUDA_ERROR_OPERATING_SYSTEM, "no threads");
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	return CUDA_SUCCESS;
}

/*
 * At exit: say goodbye, so the worker frees the job at once instead of keeping it for a
 * resume. Only the process that opened the session may (a forked child shares the socket).
 */
__attribute__((destructor)) static void session_close(void)
{
	if (!S.conn || atomic_load(&S.dead) || getpid() != S.pid)
		return;
	S.closing = 1;
	if (!enqueue(RGPU_MSG_GOODBYE, NULL, NULL, 0, 1, NULL, NULL))
		flush();
}
