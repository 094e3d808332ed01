/*
 * Calls: how the driver functions reach the worker. ip_post queues a fire-and-forget request
 * (a large payload is written before it returns, and copied only if a resend may still need
 * it); ip_call writes everything queued before its request and waits for the reply, spinning
 * briefly before it sleeps; ip_call_status adds the asynchronous error a reply may carry;
 * ip_post_dtoh lets a device-to-host copy land in stream order without a wait. The receiver
 * hands replies and device-to-host data over here. No call waits for ever on a server that
 * went away: the session's death (link.c) wakes every waiter.
 */
#define LOG_PREFIX "rgpu: "
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "session_state.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/trace.h"
#include "rgpu/util.h"

static CUresult send_error(int ret)
{
	if (ip_session_error())
		return ip_session_error();
	return ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/*
 * After a sticky fault the driver does no more work in the context: a post, which has no reply
 * to carry the error, fails here with it (ctxcur.c), except what creates or tears down a
 * context (a device reset is how a program ends such a context).
 */
static CUresult post_sticky(uint16_t type)
{
	if (type == RGPU_MSG_CTX_CREATE || type == RGPU_MSG_CTX_DESTROY)
		return CUDA_SUCCESS;
	return ip_ctx_sticky();
}

static ip_post_taker post_taker;

void ip_calls_on_post(ip_post_taker fn)
{
	post_taker = fn;
}

CUresult ip_post_borrowed(uint16_t type, const ProtobufCMessage *req, const void *payload,
			  uint64_t plen, uint64_t *seq)
{
	CUresult r;
	int ret;

	/* a graph node's work travels inside MSG_GRAPH_NODE (gnode.c takes it) */
	if (post_taker && post_taker(type, req, payload, plen, &r)) {
		if (seq)
			*seq = 0;
		return r;
	}
	if (!ip_msg_class_ok(type, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	if ((r = post_sticky(type)) != CUDA_SUCCESS)
		return r;
	uint64_t t0 = rgpu_trace_on ? rgpu_now_ns() : 0, s = 0;
	ret = ip_link_enqueue(type, req, payload, plen, plen > IP_INLINE_MAX ? IP_ENQ_SELF : 0, NULL,
			      &s);
	if (seq)
		*seq = s;
	if (ret)
		return send_error(ret);
	if (plen > IP_INLINE_MAX)
		ip_link_flush();
	if (rgpu_trace_on) {
		rgpu_trace_at(s, RGPU_TR_CALL, t0);
		rgpu_trace(s, RGPU_TR_WRITTEN);
	}
	return ip_session_error();
}

CUresult ip_post(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen)
{
	uint64_t seq = 0;
	CUresult r = ip_post_borrowed(type, req, payload, plen, &seq);

	if (r == CUDA_SUCCESS && plen > IP_INLINE_MAX && seq) {
		/* the caller may reuse its memory when this returns: keep a copy unless it ran */
		pthread_mutex_lock(&S.send_lock);
		int ret = ip_link_keep_copy(seq, payload, plen);
		ip_link_send_unlock();
		if (ret)
			ip_session_die(CUDA_ERROR_OUT_OF_MEMORY, "out of memory keeping a payload");
	}
	return r == CUDA_SUCCESS ? ip_session_error() : r;
}

CUresult ip_reply_wrong(const char *call, const char *what)
{
	pr_err("%s: the GPU server's reply %s: CUDA_ERROR_UNKNOWN", call, what);
	return CUDA_ERROR_UNKNOWN;
}

CUresult ip_release_borrowed(uint64_t first, uint64_t last)
{
	if (ip_link_release(first, last))
		ip_session_die(CUDA_ERROR_OUT_OF_MEMORY, "out of memory keeping a payload");
	return ip_session_error();
}

/* ---- waiting for replies ------------------------------------------------------------------ */

static __thread int tls_block; /* > 0: this thread's waits block (ip_wait_block) */

void ip_wait_block(int on)
{
	tls_block += on ? 1 : -1;
}

/*
 * How a caller waits for its reply: as the driver waits for the GPU in the thread's current
 * context (its CU_CTX_SCHED_* flag, cuCtxCreate or cuDevicePrimaryCtxSetFlags, the runtime's
 * cudaSetDeviceFlags), since a synchronous call is such a wait.
 *   BLOCK  CU_CTX_SCHED_BLOCKING_SYNC, or an event made with CU_EVENT_BLOCKING_SYNC: sleep at
 *          once, and let the receiver sleep after its own short spin, so a program that asked
 *          for blocking waits keeps its CPUs free
 *   SPIN   CU_CTX_SCHED_SPIN: poll until the reply comes, however long
 *   YIELD  CU_CTX_SCHED_YIELD: the same, giving the CPU up between polls
 *   AUTO   no flag: poll up to rgpu_sync_spin_ns (1 ms; none with fewer than 4 CPUs), then
 *          sleep: a 4 MiB copy outlasts a short spin, and the wake-up then added ~5 us
 */
enum wait_kind { WAIT_AUTO, WAIT_SPIN, WAIT_YIELD, WAIT_BLOCK };

static enum wait_kind wait_kind(void)
{
	struct ip_ctx *c = ip_ctx_cur();
	if (tls_block > 0)
		return WAIT_BLOCK;
	switch (c ? c->flags & CU_CTX_SCHED_MASK : 0) {
	case CU_CTX_SCHED_SPIN:
		return WAIT_SPIN;
	case CU_CTX_SCHED_YIELD:
		return WAIT_YIELD;
	case CU_CTX_SCHED_BLOCKING_SYNC:
		return WAIT_BLOCK;
	default:
		return WAIT_AUTO;
	}
}

static void waiter_wait(struct waiter *w, enum wait_kind k)
{
	uint64_t until = k == WAIT_BLOCK  ? 0
			 : k != WAIT_AUTO ? UINT64_MAX
					  : rgpu_now_ns() + MAX(rgpu_sync_spin_ns(),
								rgpu_spin_budget_ns(IP_SPIN_NS));
	while (atomic_load_explicit(&w->state, memory_order_acquire) != IP_W_DONE &&
	       rgpu_now_ns() < until) {
		if (k == WAIT_YIELD)
			sched_yield();
		else
			__builtin_ia32_pause();
	}
	uint32_t v = IP_W_PENDING;
	if (!atomic_compare_exchange_strong(&w->state, &v, IP_W_ASLEEP))
		return; /* done meanwhile */
	while (atomic_load(&w->state) != IP_W_DONE)
		syscall(SYS_futex, (uint32_t *)&w->state, FUTEX_WAIT_PRIVATE, IP_W_ASLEEP, NULL,
			NULL, 0);
}

static CUresult call_rows(uint16_t type, const ProtobufCMessage *req, const void *payload,
			  uint64_t plen, void *dst, uint64_t dst_size, const struct ip_rows *rows,
			  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply)
{
	struct waiter w = {0};
	CUresult r = CUDA_SUCCESS;
	enum wait_kind kind = wait_kind();
	int ret;

	*reply = NULL;
	if (!ip_msg_class_ok(type, RGPU_CLASS_CALL))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	w.dst = dst;
	w.dst_size = dst_size;
	if (rows)
		w.rows = *rows;
	w.type = type;
	uint64_t t0 = rgpu_trace_on ? rgpu_now_ns() : 0;
	ret = ip_link_enqueue(type, req, payload, plen, IP_ENQ_SELF, &w, NULL);
	if (ret) {
		r = send_error(ret);
		goto out;
	}
	/*
	 * the receiver spins for the reply while it is due (and is woken to, if it slept), unless
	 * this wait blocks
	 */
	if (kind != WAIT_BLOCK)
		rgpu_spin_hold(&S.spin);
	ip_link_flush_kick();
	if (rgpu_trace_on) {
		rgpu_trace_at(w.seq, RGPU_TR_CALL, t0);
		rgpu_trace(w.seq, RGPU_TR_WRITTEN);
	}
	waiter_wait(&w, kind);
	if (kind != WAIT_BLOCK)
		rgpu_spin_release(&S.spin);
	rgpu_trace(w.seq, RGPU_TR_WOKEN);
	if (!w.body && w.body_len == 0 && atomic_load(&S.dead)) {
		/* let go by the session's death: a data chunk the receiver was writing into this
		 * call's memory lands before it returns */
		pthread_mutex_lock(&S.deliver_lock);
		pthread_mutex_unlock(&S.deliver_lock);
		r = S.dead_err;
		goto out;
	}
	/* the reply says the worker executed the request, so a borrowed payload is no longer kept */
	*reply = rgpu_pb_unpack(desc, w.body_len, w.body);
	if (!*reply) {
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable reply from the server");
		r = S.dead_err;
	} else if (desc == &rgpu__status__descriptor && ((Rgpu__Status *)*reply)->idle_ctx) {
		pthread_mutex_lock(&S.q_lock);
		S.idle_seq = w.seq;
		S.idle_ctx = ((Rgpu__Status *)*reply)->idle_ctx;
		pthread_mutex_unlock(&S.q_lock);
	}
out:
	if (w.rec_sent) {
		pthread_mutex_lock(&S.q_lock);
		ip_statelog_settle(type, req, *reply, &w);
		pthread_mutex_unlock(&S.q_lock);
	}
	free(w.body);
	return r;
}

CUresult ip_call(uint16_t type, const ProtobufCMessage *req, const void *payload, uint64_t plen,
		 void *dst, uint64_t dst_size, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **reply)
{
	return call_rows(type, req, payload, plen, dst, dst_size, NULL, desc, reply);
}

static int32_t field_i32(const ProtobufCMessage *m, unsigned tag)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(m->descriptor, tag);
	if (!f || f->type != PROTOBUF_C_TYPE_INT32)
		return 0;
	return *(const int32_t *)((const char *)m + f->offset);
}

void ip_async_forget(void)
{
	pthread_mutex_lock(&S.async_lock);
	S.pending_async = CUDA_SUCCESS;
	pthread_mutex_unlock(&S.async_lock);
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

static CUresult call_status_rows(uint16_t type, const ProtobufCMessage *req, const void *payload,
				 uint64_t plen, void *dst, uint64_t dst_size,
				 const struct ip_rows *rows, const ProtobufCMessageDescriptor *desc,
				 ProtobufCMessage **reply)
{
	ProtobufCMessage *rep = NULL;
	CUresult r, own, async;

	if (!desc)
		desc = &rgpu__status__descriptor;
	r = call_rows(type, req, payload, plen, dst, dst_size, rows, desc, &rep);
	if (r != CUDA_SUCCESS)
		return r;
	own = (CUresult)field_i32(rep, 1);
	async = (CUresult)field_i32(rep, 2);
	if (async != CUDA_SUCCESS) {
		pthread_mutex_lock(&S.q_lock);
		ip_statelog_async_error();
		pthread_mutex_unlock(&S.q_lock);
	}
	if (own == CUDA_ERROR_ILLEGAL_STATE && rep->descriptor == &rgpu__status__descriptor &&
	    ((Rgpu__Status *)rep)->server_log.len)
		ip_statelog_mismatch(type, &((Rgpu__Status *)rep)->server_log);
	ip_ctx_note_error(own);
	ip_ctx_note_error(async);
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

int ip_call_idle(uint64_t ctx, CUresult *r)
{
	static int off = -1; /* RGPU_IDLE_SYNC=0: every synchronization goes to the worker */
	int idle;
	if (off < 0) {
		const char *e = getenv("RGPU_IDLE_SYNC");
		off = e && !strcmp(e, "0");
	}
	if (off)
		return 0;
	pthread_mutex_lock(&S.q_lock);
	idle = S.idle_seq && S.idle_seq == S.seq && S.idle_ctx == ctx && !atomic_load(&S.dead);
	pthread_mutex_unlock(&S.q_lock);
	if (idle)
		*r = take_async(CUDA_SUCCESS);
	return idle;
}

CUresult ip_call_barrier(void)
{
	ProtobufCMessage *rep = NULL;
	CUresult r, async;

	r = call_rows(RGPU_MSG_PING, NULL, NULL, 0, NULL, 0, NULL, &rgpu__status__descriptor, &rep);
	if (r != CUDA_SUCCESS)
		return r;
	/* not this call's to report: the next one that reports errors does (as without it) */
	async = (CUresult)field_i32(rep, 2);
	if (async != CUDA_SUCCESS) {
		pthread_mutex_lock(&S.q_lock);
		ip_statelog_async_error();
		pthread_mutex_unlock(&S.q_lock);
	}
	ip_ctx_note_error(async);
	keep_async(async);
	protobuf_c_message_free_unpacked(rep, NULL);
	return CUDA_SUCCESS;
}

CUresult ip_call_status(uint16_t type, const ProtobufCMessage *req, const void *payload,
			uint64_t plen, void *dst, uint64_t dst_size,
			const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply)
{
	return call_status_rows(type, req, payload, plen, dst, dst_size, NULL, desc, reply);
}

CUresult ip_dtoh_rows(const ProtobufCMessage *req, void *dst, uint64_t size,
		      const struct ip_rows *rows)
{
	return call_status_rows(RGPU_MSG_MEMCPY_DTOH, req, NULL, 0, dst, size, rows, NULL, NULL);
}

CUresult ip_post_dtoh(const ProtobufCMessage *req, void *dst, uint64_t size,
		      const struct ip_rows *rows)
{
	struct waiter *w;
	int ret;

	if (!ip_msg_class_ok(RGPU_MSG_MEMCPY_DTOH, RGPU_CLASS_POST))
		return CUDA_ERROR_UNKNOWN;
	if (atomic_load(&S.dead))
		return S.dead_err;
	if (ip_ctx_sticky() != CUDA_SUCCESS)
		return ip_ctx_sticky();
	w = calloc(1, sizeof(*w));
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->dst = dst;
	w->dst_size = size;
	if (rows)
		w->rows = *rows;
	w->async = 1;
	ret = ip_link_enqueue(RGPU_MSG_MEMCPY_DTOH, req, NULL, 0, 0, w, NULL);
	if (ret) {
		free(w);
		return send_error(ret);
	}
	return CUDA_SUCCESS;
}

/* ---- what the receiver hands over --------------------------------------------------------- */

/*
 * A pitched copy's packed bytes [off, off + len) into the rows of w->dst (struct ip_rows): read
 * whole, then placed row piece by row piece. 0, or the transport's error.
 */
static int recv_rows(const struct waiter *w, uint64_t off, uint64_t len)
{
	const struct ip_rows *r = &w->rows;
	uint8_t *buf = malloc(len ? len : 1), *p = buf;
	int ret;

	if (!buf) {
		/* the caller ends the session, once it holds no lock (wait_lock: the death's) */
		ret = rgpu_conn_discard(S.conn, len);
		return ret ? ret : RGPU_ENOMEM;
	}
	ret = rgpu_conn_recv(S.conn, buf, len);
	while (!ret && len) {
		uint64_t row = off / r->width, col = off % r->width, n = MIN(r->width - col, len);
		memcpy((uint8_t *)w->dst + row / r->height * r->slice + row % r->height * r->pitch +
			       col,
		       p, n);
		p += n;
		off += n;
		len -= n;
	}
	free(buf);
	return ret;
}

/* A copy's bytes could not be placed: the session ends (no lock held). 0. */
static int rows_oom(void)
{
	ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "out of memory receiving a copy");
	return 0;
}

/* Returns 0, or the transport error that broke the link in the middle of the payload. */
int ip_call_on_data(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	Rgpu__DataChunk *dc = RGPU_PB_UNPACK(rgpu__data_chunk, h->body_len, body);
	struct waiter *w;
	int ret;

	if (!dc) {
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable data frame");
		return 0;
	}
	pthread_mutex_lock(&S.deliver_lock);
	pthread_mutex_lock(&S.wait_lock);
	w = ip_waiter_find_locked(h->ref);
	/* the waiter cannot go away while data for it is outstanding: it waits for the reply */
	pthread_mutex_unlock(&S.wait_lock);
	if (!w || dc->offset > w->dst_size || h->payload_len > w->dst_size - dc->offset) {
		pr_warn("unexpected data for request %llu", (unsigned long long)h->ref);
		ret = rgpu_conn_discard(S.conn, h->payload_len);
	} else {
		ret = w->rows.width ? recv_rows(w, dc->offset, h->payload_len)
				    : rgpu_conn_recv(S.conn, (uint8_t *)w->dst + dc->offset, h->payload_len);
		if (!ret)
			w->received += h->payload_len;
		/* bytes the worker put straight into this process's memory (shared memory) */
		if (!ret && !h->payload_len && dc->landed <= w->dst_size - w->received)
			w->received += dc->landed;
		if (!ret && w->async && w->received == w->dst_size) {
			pthread_mutex_lock(&S.wait_lock);
			ip_waiter_remove_locked(w);
			pthread_mutex_unlock(&S.wait_lock);
			free(w);
		}
	}
	pthread_mutex_unlock(&S.deliver_lock);
	rgpu__data_chunk__free_unpacked(dc, NULL);
	return ret == RGPU_ENOMEM ? rows_oom() : ret;
}

int ip_call_on_reply(const struct rgpu_frame_hdr *h, uint8_t **body)
{
	struct waiter *w;
	int ret = 0;
	pthread_mutex_lock(&S.wait_lock);
	w = ip_waiter_find_locked(h->ref);
	if (h->payload_len) {
		/* a small device-to-host copy's bytes, in its reply, before the caller wakes */
		if (w && !w->async && w->dst && h->payload_len <= w->dst_size) {
			ret = w->rows.width ? recv_rows(w, 0, h->payload_len)
					    : rgpu_conn_recv(S.conn, w->dst, h->payload_len);
			if (!ret)
				w->received += h->payload_len;
		} else {
			ret = rgpu_conn_discard(S.conn, h->payload_len);
		}
		if (ret) {
			pthread_mutex_unlock(&S.wait_lock);
			return ret == RGPU_ENOMEM ? rows_oom() : ret;
		}
	}
	if (w && !w->async) {
		w->body = *body;
		w->body_len = h->body_len;
		*body = NULL;
		ip_waiter_complete_locked(w, 1);
	}
	pthread_mutex_unlock(&S.wait_lock);
	return 0;
}
