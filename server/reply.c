/*
 * Replies and errors towards the client. A synchronous request gets one reply, which also
 * carries the first error of fire-and-forget work kept since the previous reply (handlers report
 * such errors with srv_async_error, as CUDA reports asynchronous errors with a later call). A
 * protocol error goes out unsequenced and ends the job: nothing malformed is ever executed or
 * kept for a resume. The executor alone replies and keeps errors; the reader and the handshake
 * may also end the job with srv_protocol_error.
 */
#define LOG_PREFIX "worker: "
#include <stdarg.h>
#include <stdio.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/trace.h"
#include "srv.h"

CUresult srv_take_async_error(struct srv_worker *w)
{
	CUresult r = w->async_err;
	w->async_err = CUDA_SUCCESS;
	return r;
}

void srv_async_error(struct srv_worker *w, CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return;
	w->exec_result = r;
	pr_debug("async %s failed: %s", what, srv_cu_name(&w->drv, r));
	if (w->async_err == CUDA_SUCCESS)
		w->async_err = r;
}

static int reply_with(struct srv_worker *w, const struct srv_frame *f, ProtobufCMessage *rep,
		      const void *payload, uint64_t plen)
{
	int ret;

	rgpu_trace(f->hdr.seq, RGPU_TR_REPLY);
	/* every reply message has `result` as field 1 and `async_error` as field 2 */
	const ProtobufCFieldDescriptor *fd =
		protobuf_c_message_descriptor_get_field(rep->descriptor, 2);
	const ProtobufCFieldDescriptor *fr =
		protobuf_c_message_descriptor_get_field(rep->descriptor, 1);
	CUresult async = srv_take_async_error(w);
	CUresult own = CUDA_SUCCESS;

	if (fd && fd->type == PROTOBUF_C_TYPE_INT32)
		*(int32_t *)((char *)rep + fd->offset) = (int32_t)async;
	if (rep->descriptor == &rgpu__status__descriptor && async == CUDA_SUCCESS)
		((Rgpu__Status *)rep)->idle_ctx = srv_quiet_idle(w);
	if (fr && fr->type == PROTOBUF_C_TYPE_INT32)
		own = (CUresult)*(const int32_t *)((const char *)rep + fr->offset);
	if (own != CUDA_SUCCESS)
		w->exec_result = own;
	if (!w->exec_recorded && w->on_reply) {
		/* what a call made is recorded with its reply, before the client can see it */
		w->on_reply(w, f, rep);
		w->exec_recorded = 1;
	}
	if (w->replaying) {
		w->replay_result = own;
		return 0;
	}
	/*
	 * A call at which the driver flushes its device printf buffer (a synchronisation, a
	 * blocking copy, a module load): the output goes first, so the client writes it before
	 * the call returns, as the driver does natively.
	 */
	if (srv_stdio_flush_point(f->hdr.type))
		srv_stdio_flush(w);
	/* what the device wrote to mirrored host memory, before the call returns there */
	srv_hm_sync(w);
	ret = srv_send(w, f->hdr.type, RGPU_FRAME_REPLY, f->hdr.seq, rep, payload, plen);
	rgpu_trace(f->hdr.seq, RGPU_TR_SENT);
	return ret;
}

/* ---- what replies say of a context's streams (server/exec.c, "Whether a context is idle") -- */

void srv_quiet_off(struct srv_worker *w)
{
	w->quiet.valid = 0;
}

void srv_quiet_ctx_synced(struct srv_worker *w, uint64_t ctx, CUresult r)
{
	w->quiet = (struct srv_quiet){.valid = r == CUDA_SUCCESS && !w->replaying, .ctx = ctx};
}

void srv_quiet_copy(struct srv_worker *w, uint64_t ctx, CUstream s, int synced, CUresult r)
{
	struct srv_quiet *q = &w->quiet;
	if (!q->valid || r != CUDA_SUCCESS || ctx != q->ctx || (q->any && s != q->stream)) {
		q->valid = 0;
		return;
	}
	q->any = 1;
	q->stream = s;
	q->pending = !synced;
}

void srv_quiet_stream_synced(struct srv_worker *w, uint64_t ctx, CUstream s, CUresult r)
{
	struct srv_quiet *q = &w->quiet;
	if (r != CUDA_SUCCESS)
		q->valid = 0;
	else if (q->valid && ctx == q->ctx && (!q->any || s == q->stream))
		q->pending = 0;
}

uint64_t srv_quiet_idle(const struct srv_worker *w)
{
	return w->quiet.valid && !w->quiet.pending && !w->replaying ? w->quiet.ctx : 0;
}

int srv_reply(struct srv_worker *w, const struct srv_frame *f, ProtobufCMessage *rep)
{
	return reply_with(w, f, rep, NULL, 0);
}

int srv_reply_data(struct srv_worker *w, const struct srv_frame *f, CUresult r,
		   const void *data, uint64_t len)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	st.result = (int32_t)r;
	return reply_with(w, f, &st.base, r == CUDA_SUCCESS ? data : NULL,
			  r == CUDA_SUCCESS ? len : 0);
}

int srv_reply_status(struct srv_worker *w, const struct srv_frame *f, CUresult r)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	st.result = (int32_t)r;
	return srv_reply(w, f, &st.base);
}

int srv_reply_value(struct srv_worker *w, const struct srv_frame *f, CUresult r, int64_t v)
{
	Rgpu__ValueReply rep = RGPU__VALUE_REPLY__INIT;
	rep.result = (int32_t)r;
	rep.value = v;
	return srv_reply(w, f, &rep.base);
}

void srv_protocol_error(struct srv_worker *w, int code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a frame cut off is a broken link (a client gone mid-handshake), not a hostile one */
	if (code == RGPU_ETRUNC)
		pr_info("client %s: %s (%s); ending the job", w->peer, msg, rgpu_strerror(code));
	else
		pr_warn("protocol error from %s: %s (%s); ending the job", w->peer, msg,
			rgpu_strerror(code));
	srv_end_session(w, code, msg);
}

void srv_end_session(struct srv_worker *w, int code, const char *msg)
{
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_ERROR};

	pe.code = code;
	pe.message = (char *)msg;
	/* unsequenced and not kept: the job ends, there is nothing to resume */
	pthread_mutex_lock(&w->send_lock);
	h.session = w->session;
	if (w->conn) {
		rgpu_frame_send_hdr(w->conn, &h, &pe.base, NULL);
		rgpu_conn_shutdown(w->conn);
	}
	pthread_mutex_unlock(&w->send_lock);
	srv_link_end(w);
}
