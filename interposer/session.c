/*
 * The session: the interposer's one connection to rgpud, and the command stream over it
 * (design.md §4).
 *
 * Fire-and-forget requests are packed into an output buffer that a sender thread writes out
 * in batches (a burst of launches costs one system call, not one each); a synchronous request
 * flushes everything queued before it and waits for its reply. Payloads above IP_INLINE_MAX are
 * written straight from the caller's memory before the call returns. A receiver thread reads
 * replies, device-to-host data (written straight into the destination), host-function
 * triggers and protocol errors. Host functions run on a callback thread, never the receiver,
 * so a slow callback cannot stall data.
 *
 * When the connection fails the session is dead: every later call returns
 * CUDA_ERROR_DEVICE_UNAVAILABLE and every waiter is woken. Nothing here ever blocks forever on a
 * server that went away.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
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
#define IP_HELLO_TIMEOUT_S 60
#define IP_SPIN_NS 20000

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
	struct rgpu_conn *conn;
	uint64_t session;

	pthread_mutex_t send_lock;   /* socket writes */
	pthread_mutex_t buf_lock;    /* the output buffer */
	pthread_cond_t buf_cond;
	uint8_t *buf, *spare;
	size_t len, cap, spare_cap;

	atomic_uint_fast64_t seq;
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
	.buf_lock = PTHREAD_MUTEX_INITIALIZER,
	.buf_cond = PTHREAD_COND_INITIALIZER,
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
	pr_err("session with the GPU server lost: %s", why);
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
	pthread_mutex_lock(&S.buf_lock);
	pthread_cond_broadcast(&S.buf_cond);
	pthread_mutex_unlock(&S.buf_lock);
	pthread_mutex_lock(&S.cb_lock);
	pthread_cond_broadcast(&S.cb_cond);
	pthread_mutex_unlock(&S.cb_lock);
}

/* ---- sending ------------------------------------------------------------------------------ */

/* Write out everything queued. Caller holds send_lock. */
static int flush_locked(void)
{
	size_t n;
	uint8_t *t;
	size_t tc;
	int ret = 0;

	pthread_mutex_lock(&S.buf_lock);
	n = S.len;
	t = S.buf;
	tc = S.cap;
	S.buf = S.spare;
	S.cap = S.spare_cap;
	S.spare = t;
	S.spare_cap = tc;
	S.len = 0;
	pthread_mutex_unlock(&S.buf_lock);
	if (n) {
		struct iovec iov = {.iov_base = S.spare, .iov_len = n};
		ret = rgpu_conn_sendv(S.conn, &iov, 1);
		if (ret)
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, rgpu_strerror(ret));
	}
	return ret;
}

static int flush(void)
{
	int ret;
	pthread_mutex_lock(&S.send_lock);
	ret = flush_locked();
	pthread_mutex_unlock(&S.send_lock);
	return ret;
}

static void *sender_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.buf_lock);
	for (;;) {
		while (S.len == 0 && !atomic_load(&S.dead))
			pthread_cond_wait(&S.buf_cond, &S.buf_lock);
		if (atomic_load(&S.dead))
			break;
		pthread_mutex_unlock(&S.buf_lock);
		flush();
		pthread_mutex_lock(&S.buf_lock);
	}
	pthread_mutex_unlock(&S.buf_lock);
	return NULL;
}

/* Queue one frame (with a small payload copied in). */
static int enqueue(uint16_t type, uint32_t flags, uint64_t seq, const ProtobufCMessage *req,
		   const void *payload, uint64_t plen)
{
	size_t need = rgpu_frame_size(req) + plen;
	int wake;

	pthread_mutex_lock(&S.buf_lock);
	if (S.len + need > S.cap) {
		size_t cap = MAX(S.cap * 2, S.len + need + 65536);
		uint8_t *n = realloc(S.buf, cap);
		if (!n) {
			pthread_mutex_unlock(&S.buf_lock);
			return RGPU_ENOMEM;
		}
		S.buf = n;
		S.cap = cap;
	}
	size_t at = S.len;
	at += rgpu_frame_pack(S.buf + at, type, flags, seq, S.session, req, plen);
	if (plen)
		memcpy(S.buf + at, payload, plen);
	wake = S.len == 0;
	S.len = at + plen;
	if (wake)
		pthread_cond_signal(&S.buf_cond);
	pthread_mutex_unlock(&S.buf_lock);
	return 0;
}

/* Send one frame now, after everything queued before it, payload from the caller's memory. */
static int send_direct(uint16_t type, uint64_t seq, const ProtobufCMessage *req,
		       const void *payload, uint64_t plen)
{
	int ret;
	pthread_mutex_lock(&S.send_lock);
	ret = flush_locked();
	if (!ret) {
		ret = rgpu_frame_send(S.conn, type, 0, seq, S.session, req, payload, plen);
		if (ret)
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, rgpu_strerror(ret));
	}
	pthread_mutex_unlock(&S.send_lock);
	return ret;
}

static int submit(uint16_t type, uint64_t seq, const ProtobufCMessage *req, const void *payload,
		  uint64_t plen)
{
	if (plen > IP_INLINE_MAX)
		return send_direct(type, seq, req, payload, plen);
	return enqueue(type, 0, seq, req, payload, plen);
}

CUresult ip_post(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen)
{
	if (!ip_msg_class_ok(type, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	if (submit(type, atomic_fetch_add(&S.seq, 1) + 1, req, payload, plen))
		return ip_session_error() ? ip_session_error() : CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
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
	CUresult r = CUDA_SUCCESS;

	*reply = NULL;
	if (!ip_msg_class_ok(type, RGPU_CLASS_CALL))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	w.seq = atomic_fetch_add(&S.seq, 1) + 1;
	w.dst = dst;
	w.dst_size = dst_size;
	w.type = type;
	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.c, NULL);
	waiter_add(&w);
	if (submit(type, w.seq, req, payload, plen) || flush()) {
		pthread_mutex_lock(&S.wait_lock);
		waiter_remove_locked(&w);
		pthread_mutex_unlock(&S.wait_lock);
		r = ip_session_error() ? ip_session_error() : CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	waiter_wait(&w);
	pthread_mutex_lock(&S.wait_lock);
	waiter_remove_locked(&w);
	pthread_mutex_unlock(&S.wait_lock);
	if (!w.body && w.body_len == 0 && atomic_load(&S.dead)) {
		r = S.dead_err;
		goto out;
	}
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
	if (!ip_msg_class_ok(RGPU_MSG_MEMCPY_DTOH, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	w = calloc(1, sizeof(*w));
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->seq = atomic_fetch_add(&S.seq, 1) + 1;
	w->dst = dst;
	w->dst_size = size;
	w->async = 1;
	waiter_add(w);
	if (submit(RGPU_MSG_MEMCPY_DTOH, w->seq, req, NULL, 0)) {
		pthread_mutex_lock(&S.wait_lock);
		waiter_remove_locked(w);
		pthread_mutex_unlock(&S.wait_lock);
		free(w);
		return ip_session_error() ? ip_session_error() : CUDA_ERROR_OUT_OF_MEMORY;
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
		/* the server's stream waits for this acknowledgement */
		Rgpu__Callback done = RGPU__CALLBACK__INIT;
		done.callback = id;
		if (!submit(RGPU_MSG_CALLBACK_DONE, atomic_fetch_add(&S.seq, 1) + 1,
			    &done.base, NULL, 0))
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

static void on_data(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	Rgpu__DataChunk *dc = rgpu__data_chunk__unpack(NULL, h->body_len, body);
	struct waiter *w;
	int ret;

	if (!dc) {
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable data frame");
		return;
	}
	pthread_mutex_lock(&S.wait_lock);
	w = waiter_find_locked(h->seq);
	/* the waiter cannot go away while data for it is outstanding: it waits for the reply */
	pthread_mutex_unlock(&S.wait_lock);
	if (!w || dc->offset > w->dst_size || h->payload_len > w->dst_size - dc->offset) {
		pr_warn("unexpected data for request %llu", (unsigned long long)h->seq);
		ret = rgpu_conn_discard(S.conn, h->payload_len);
	} else {
		ret = rgpu_conn_recv(S.conn, (uint8_t *)w->dst + dc->offset, h->payload_len);
		w->received += h->payload_len;
		if (!ret && w->async && w->received == w->dst_size) {
			pthread_mutex_lock(&S.wait_lock);
			waiter_remove_locked(w);
			pthread_mutex_unlock(&S.wait_lock);
			free(w);
		}
	}
	rgpu__data_chunk__free_unpacked(dc, NULL);
	if (ret)
		session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, rgpu_strerror(ret));
}

static void *receiver_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&S.dead)) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		int ret = rgpu_frame_recv(S.conn, RGPU_PEER_CLIENT, &h, &body);

		if (ret) {
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
				    ret == RGPU_ECLOSED ? "the server closed the connection"
							: rgpu_strerror(ret));
			break;
		}
		if (h.flags & RGPU_FRAME_REPLY) {
			struct waiter *w;
			pthread_mutex_lock(&S.wait_lock);
			w = waiter_find_locked(h.seq);
			if (w && !w->async) {
				pthread_mutex_lock(&w->m);
				w->body = body;
				w->body_len = h.body_len;
				atomic_store(&w->done, 1);
				pthread_cond_signal(&w->c);
				pthread_mutex_unlock(&w->m);
				body = NULL;
			}
			pthread_mutex_unlock(&S.wait_lock);
			free(body);
			if (h.payload_len && rgpu_conn_discard(S.conn, h.payload_len))
				break;
			continue;
		}
		switch (h.type) {
		case RGPU_MSG_DATA:
			on_data(&h, body);
			break;
		case RGPU_MSG_CALLBACK: {
			Rgpu__Callback *cb = rgpu__callback__unpack(NULL, h.body_len, body);
			if (cb) {
				callback_push(cb->callback);
				rgpu__callback__free_unpacked(cb, NULL);
			} else {
				session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable callback");
			}
			break;
		}
		case RGPU_MSG_ERROR: {
			Rgpu__ProtocolError *pe =
				rgpu__protocol_error__unpack(NULL, h.body_len, body);
			char why[320];
			snprintf(why, sizeof(why), "the server reported a protocol error: %s",
				 pe && pe->message ? pe->message : "?");
			if (pe)
				rgpu__protocol_error__free_unpacked(pe, NULL);
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, why);
			break;
		}
		default:
			session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "unexpected frame from the server");
		}
		free(body);
	}
	return NULL;
}

/* ---- opening ------------------------------------------------------------------------------ */

static CUresult hello(const char *server)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	Rgpu__HelloReply *rep = NULL;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	char host[256] = "", prog[256] = "";
	struct timeval tv = {.tv_sec = IP_HELLO_TIMEOUT_S};
	int ret;
	CUresult r;
	ssize_t n;

	gethostname(host, sizeof(host) - 1);
	n = readlink("/proc/self/exe", prog, sizeof(prog) - 1);
	prog[n > 0 ? n : 0] = '\0';
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.capabilities = RGPU_CAPS_CLIENT;
	hm.client_pid = getpid();
	hm.client_host = host;
	hm.client_program = prog;

	setsockopt(S.conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = rgpu_frame_send(S.conn, RGPU_MSG_HELLO, 0, 1, 0, &hm.base, NULL, 0);
	if (!ret)
		ret = rgpu_frame_recv(S.conn, RGPU_PEER_CLIENT, &h, &body);
	if (ret) {
		pr_err("no answer from the GPU server %s: %s", server, rgpu_strerror(ret));
		return CUDA_ERROR_NO_DEVICE;
	}
	tv.tv_sec = 0;
	setsockopt(S.conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
		pr_err("the GPU server %s refused the session: %s", server,
		       pe && pe->message ? pe->message : "protocol error");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		free(body);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (h.type == RGPU_MSG_HELLO && (h.flags & RGPU_FRAME_REPLY))
		rep = rgpu__hello_reply__unpack(NULL, h.body_len, body);
	free(body);
	if (!rep) {
		pr_err("the GPU server %s sent an unexpected first reply", server);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (rep->result != CUDA_SUCCESS) {
		pr_err("the GPU server %s cannot serve: %s", server, rep->error);
		r = (CUresult)rep->result;
		goto out;
	}
	/* every message family this client may send must be one the server knows */
	const uint64_t need = RGPU_CAPS_CLIENT;
	if ((rep->capabilities & need) != need) {
		pr_err("the GPU server %s lacks capabilities this client needs (has %#llx, needs %#llx)",
		       server, (unsigned long long)rep->capabilities, (unsigned long long)need);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (rep->protocol_version != RGPU_PROTO_VERSION || rep->n_devices == 0 ||
	    rep->window_size == 0) {
		pr_err("the GPU server %s answered protocol %u with %zu devices", server,
		       rep->protocol_version, rep->n_devices);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	S.session = rep->session_id;
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
	pr_info("session %llu with %s: %d device(s), %s", (unsigned long long)S.session, server,
		ip.ndev, ip.dev[0].name);
	r = CUDA_SUCCESS;
out:
	rgpu__hello_reply__free_unpacked(rep, NULL);
	return r;
}

CUresult ip_session_open(void)
{
	const char *server = getenv("RGPU_SERVER");
	const char *tmo = getenv("RGPU_CONNECT_TIMEOUT_MS");
	char host[256];
	int port, ret;
	pthread_t t;
	CUresult r;

	if (!server || !*server)
		server = RGPU_DEFAULT_SERVER;
	if (rgpu_parse_hostport(server, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
		pr_err("RGPU_SERVER='%s' is not HOST:PORT", server);
		return CUDA_ERROR_NO_DEVICE;
	}
	ret = rgpu_tcp_connect(host, port, tmo ? atoi(tmo) : 5000, &S.conn);
	if (ret) {
		pr_err("cannot reach the GPU server %s: %s (set RGPU_SERVER=HOST:PORT)", server,
		       ret == RGPU_ETIMEDOUT ? "timed out" : strerror(errno));
		return CUDA_ERROR_NO_DEVICE;
	}
	rgpu_conn_set_msgs(S.conn, &rgpu_job_msgs);
	r = hello(server);
	if (r != CUDA_SUCCESS) {
		rgpu_conn_close(S.conn);
		S.conn = NULL;
		return r;
	}
	atomic_store(&S.seq, 1);
	S.conn->spin_ns = (uint32_t)rgpu_spin_budget_ns(30000);
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
