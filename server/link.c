/*
 * A job's link to its client (design.md §5): what the worker sends, kept until the client has
 * it.
 *
 * Every frame the worker sends gets the next sequence number and stays in the resend list
 * until the client acknowledges receiving it (the `ack` of any frame the client sends, or a
 * MSG_ACK). When the link breaks, senders keep appending (the job runs on until it needs the
 * client) and nothing is written; when the client resumes it says what it received last, and
 * the rest is written again in order. Small payloads are copied into the list; large ones in
 * a staging buffer keep that buffer until acknowledged (the client acknowledges every MiB
 * received at once, so a buffer comes back about one round trip after its data arrived).
 *
 * In the other direction the worker tells the client how far the executor has run (`ack` on
 * every frame, and MSG_ACK when it goes idle), so the client can drop what it kept.
 */
#define LOG_PREFIX "worker: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

/* copied bytes kept for resending before senders wait for acknowledgements */
#define SRV_OUT_MAX (64ull << 20)
/* payloads at least this large keep their staging buffer rather than being copied */
#define SRV_STAGED_MIN (1ull << 20)

struct srv_out {
	struct srv_out *next;
	uint64_t seq;
	size_t len;        /* header, body and any copied payload in data[] */
	void *staged;      /* payload in a staging buffer (NULL: none, or copied) */
	uint64_t staged_len;
	uint8_t data[];
};

/*
 * A send on the link failed: take the link down (the reader notices the shut-down connection
 * and waits for a resume). An impossible index in shared memory is the client's doing, said as
 * the protocol error it is; quiet: a broken link is left for the reader to tell.
 */
static void send_failed(struct srv_worker *w, int ret, int quiet)
{
	if (ret == RGPU_EPROTO)
		pr_warn("protocol error from %s: the ring to the client has an impossible index; "
			"closing the link",
			w->peer);
	else if (!quiet)
		pr_info("job %s: link to %s broken while sending (%s)", w->job_hex, w->peer,
			rgpu_strerror(ret));
	rgpu_conn_shutdown(w->conn);
	w->conn = NULL;
}

/* Write one kept frame on the link, if there is one; a failure takes the link down. */
static void out_write_locked(struct srv_worker *w, const struct srv_out *o)
{
	struct iovec iov[2] = {{.iov_base = (void *)o->data, .iov_len = o->len}};
	int n = 1, ret;

	if (!w->conn)
		return;
	if (o->staged) {
		iov[1].iov_base = o->staged;
		iov[1].iov_len = o->staged_len;
		n = 2;
	}
	ret = rgpu_conn_sendv(w->conn, iov, n);
	if (ret)
		send_failed(w, ret, 0);
}

static void out_free(struct srv_worker *w, struct srv_out *o)
{
	if (o->staged)
		srv_staging_put(w->staging, o->staged);
	free(o);
}

static int send_kept(struct srv_worker *w, uint16_t type, uint32_t flags, uint64_t ref,
		     const ProtobufCMessage *body, const void *payload, uint64_t plen,
		     void *staged)
{
	struct rgpu_frame_hdr h = {.type = type, .flags = flags, .ref = ref};
	size_t keep = rgpu_frame_size(body) + (staged ? 0 : plen);
	struct srv_out *o;

	pthread_mutex_lock(&w->send_lock);
	while (w->out_bytes > SRV_OUT_MAX && !atomic_load(&w->dead))
		pthread_cond_wait(&w->out_cond, &w->send_lock);
	o = atomic_load(&w->dead) ? NULL : malloc(sizeof(*o) + keep);
	if (!o) {
		pthread_mutex_unlock(&w->send_lock);
		if (staged)
			srv_staging_put(w->staging, staged);
		return atomic_load(&w->dead) ? RGPU_ECLOSED : RGPU_ENOMEM;
	}
	h.seq = ++w->tx_seq;
	h.session = w->session;
	h.ack = atomic_load(&w->executed);
	h.payload_len = plen;
	w->ack_told = h.ack;
	o->next = NULL;
	o->seq = h.seq;
	o->len = rgpu_frame_pack_hdr(o->data, &h, body);
	o->staged = staged;
	o->staged_len = staged ? plen : 0;
	if (!staged && plen) {
		memcpy(o->data + o->len, payload, plen);
		o->len += plen;
	}
	if (w->out_tail)
		w->out_tail->next = o;
	else
		w->out_head = o;
	w->out_tail = o;
	w->out_bytes += o->len;
	w->bytes_out += o->len + o->staged_len;
	out_write_locked(w, o);
	pthread_mutex_unlock(&w->send_lock);
	return 0;
}

int srv_send(struct srv_worker *w, uint16_t type, uint32_t flags, uint64_t ref,
	     const ProtobufCMessage *body, const void *payload, uint64_t plen)
{
	return send_kept(w, type, flags, ref, body, payload, plen, NULL);
}

int srv_send_staged(struct srv_worker *w, uint16_t type, uint64_t ref,
		    const ProtobufCMessage *body, void *buf, uint64_t plen)
{
	if (plen >= SRV_STAGED_MIN)
		return send_kept(w, type, 0, ref, body, buf, plen, buf);
	int ret = send_kept(w, type, 0, ref, body, buf, plen, NULL);
	srv_staging_put(w->staging, buf);
	return ret;
}

void srv_link_acked(struct srv_worker *w, uint64_t seq)
{
	struct srv_out *o;
	int freed = 0;

	pthread_mutex_lock(&w->send_lock);
	while ((o = w->out_head) && o->seq <= seq) {
		w->out_head = o->next;
		if (!w->out_head)
			w->out_tail = NULL;
		w->out_bytes -= o->len;
		out_free(w, o);
		freed = 1;
	}
	if (freed)
		pthread_cond_broadcast(&w->out_cond);
	pthread_mutex_unlock(&w->send_lock);
}

void srv_link_ack(struct srv_worker *w)
{
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_ACK};

	pthread_mutex_lock(&w->send_lock);
	h.ack = atomic_load(&w->executed);
	h.session = w->session;
	if (w->conn && h.ack != w->ack_told) {
		/* unsequenced and not kept: a lost one is superseded by the next frame */
		int ret = rgpu_frame_send_hdr(w->conn, &h, NULL, NULL);
		if (ret)
			send_failed(w, ret, 1);
		else
			w->ack_told = h.ack;
	}
	pthread_mutex_unlock(&w->send_lock);
}

void srv_link_down(struct srv_worker *w)
{
	pthread_mutex_lock(&w->send_lock);
	if (w->conn)
		rgpu_conn_shutdown(w->conn);
	w->conn = NULL;
	pthread_mutex_unlock(&w->send_lock);
}

void srv_link_lanes_said(struct srv_worker *w)
{
	struct rgpu_lanes_stats st[2] = {{0}};
	char said[2][160];

	pthread_mutex_lock(&w->send_lock);
	if (w->conn) {
		rgpu_lanes_stats(w->conn, 1, &st[0]);
		rgpu_lanes_stats(w->conn, 0, &st[1]);
	}
	pthread_mutex_unlock(&w->send_lock);
	if (!st[0].frames && !st[1].frames)
		return;
	for (int i = 0; i < 2; i++)
		rgpu_lanes_stats_say(&st[i], said[i], sizeof(said[i]));
	pr_info("job %s: striped payloads, each: %llu received (%s), %llu sent (%s)", w->job_hex,
		(unsigned long long)st[0].frames, said[0], (unsigned long long)st[1].frames,
		said[1]);
}

int srv_link_up(struct srv_worker *w, struct rgpu_conn *c, uint64_t client_received)
{
	struct srv_out *o;
	uint64_t n = 0;

	/* what the client already has is acknowledged by saying so */
	srv_link_acked(w, client_received);
	pthread_mutex_lock(&w->send_lock);
	w->conn = c;
	pthread_mutex_lock(&w->peer_lock);
	snprintf(w->peer, sizeof(w->peer), "%s%s", rgpu_conn_peer(c),
		 rgpu_conn_is_shm(c) ? " (shared memory)" : "");
	pthread_mutex_unlock(&w->peer_lock);
	for (o = w->out_head; o && w->conn; o = o->next) {
		out_write_locked(w, o);
		n++;
	}
	pthread_mutex_unlock(&w->send_lock);
	pr_debug("job %s: %llu kept frame(s) written again", w->job_hex, (unsigned long long)n);
	return w->conn ? 0 : RGPU_EIO;
}

void srv_link_end(struct srv_worker *w)
{
	pthread_mutex_lock(&w->send_lock);
	atomic_store(&w->state, SRV_JOB_ENDING);
	atomic_store(&w->dead, 1);
	pthread_cond_broadcast(&w->out_cond);
	pthread_mutex_unlock(&w->send_lock);
}

int srv_link_kept_save(struct srv_worker *w, uint8_t **buf, size_t *len, uint64_t *sent)
{
	size_t n = 0, off = 0;
	uint8_t *b;

	pthread_mutex_lock(&w->send_lock);
	for (struct srv_out *o = w->out_head; o; o = o->next)
		n += 16 + o->len + o->staged_len;
	b = malloc(n ? n : 1);
	if (!b) {
		pthread_mutex_unlock(&w->send_lock);
		return RGPU_ENOMEM;
	}
	for (struct srv_out *o = w->out_head; o; o = o->next) {
		wr_le64(b + off, o->seq);
		wr_le64(b + off + 8, o->len + o->staged_len);
		memcpy(b + off + 16, o->data, o->len);
		if (o->staged)
			memcpy(b + off + 16 + o->len, o->staged, o->staged_len);
		off += 16 + o->len + o->staged_len;
	}
	*sent = w->tx_seq;
	pthread_mutex_unlock(&w->send_lock);
	*buf = b;
	*len = n;
	return 0;
}

/*
 * A restored job's link: the frames the checkpointed worker had sent and the client had not
 * acknowledged, to be written again when the client resumes, and the seq to go on from. Each
 * must be one whole frame of this job with its seq, in order, none after `sent`.
 */
int srv_link_kept_load(struct srv_worker *w, const uint8_t *buf, size_t len, uint64_t sent)
{
	size_t off = 0;
	uint64_t prev = 0;
	int ret = 0;

	pthread_mutex_lock(&w->send_lock);
	while (off < len) {
		struct rgpu_frame_hdr h;
		uint64_t seq, flen;
		struct srv_out *o;
		if (len - off < 16) {
			ret = RGPU_ECORRUPT;
			break;
		}
		seq = rd_le64(buf + off);
		flen = rd_le64(buf + off + 8);
		off += 16;
		if (flen > len - off || flen < RGPU_FRAME_HDR_LEN ||
		    rgpu_frame_hdr_decode(buf + off, &h) || h.seq != seq || seq <= prev ||
		    seq > sent || h.session != w->session ||
		    RGPU_FRAME_HDR_LEN + (uint64_t)h.body_len + h.payload_len != flen) {
			ret = RGPU_ECORRUPT;
			break;
		}
		o = malloc(sizeof(*o) + flen);
		if (!o) {
			ret = RGPU_ENOMEM;
			break;
		}
		o->next = NULL;
		o->seq = seq;
		o->len = flen;
		o->staged = NULL;
		o->staged_len = 0;
		memcpy(o->data, buf + off, flen);
		if (w->out_tail)
			w->out_tail->next = o;
		else
			w->out_head = o;
		w->out_tail = o;
		w->out_bytes += flen;
		prev = seq;
		off += flen;
	}
	if (!ret)
		w->tx_seq = sent;
	pthread_mutex_unlock(&w->send_lock);
	return ret;
}
