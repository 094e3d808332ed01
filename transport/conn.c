/* Frame-level send and receive over any transport, and the relay between two connections. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "rgpu/util.h"
#include "conn_priv.h"

/*
 * Read len bytes by deadline (0: none; the connection's own cap, rgpu_conn_set_deadline,
 * applies too): 0, RGPU_ETIMEDOUT, RGPU_ECLOSED or RGPU_EIO. Each wait is for what is left of
 * the deadline, so a peer that sends a byte at a time cannot stretch it. *got counts what
 * arrived, so a caller can tell EOF from truncation.
 */
static int recv_exact(struct rgpu_conn *c, void *buf, size_t len, uint64_t deadline, size_t *got)
{
	uint8_t *p = buf;
	size_t have = c->rlen - c->rpos;

	deadline = rgpu_deadline_min(deadline, c->deadline);
	*got = 0;
	if (have) {
		size_t n = have < len ? have : len;
		memcpy(p, c->rbuf + c->rpos, n);
		c->rpos += n;
		p += n;
		len -= n;
		*got += n;
	}
	while (len) {
		int timeout_ms = rgpu_ms_until(deadline);
		long r;
		if (len >= sizeof(c->rbuf)) {
			/* large: straight into the destination */
			r = c->ops->recv_some(c, p, len, timeout_ms);
			if (r < 0)
				return (int)r;
			p += r;
			len -= (size_t)r;
			*got += (size_t)r;
			continue;
		}
		r = c->ops->recv_some(c, c->rbuf, sizeof(c->rbuf), timeout_ms);
		if (r < 0)
			return (int)r;
		c->rpos = 0;
		c->rlen = (size_t)r;
		size_t n = (size_t)r < len ? (size_t)r : len;
		memcpy(p, c->rbuf, n);
		c->rpos = n;
		p += n;
		len -= n;
		*got += n;
	}
	return 0;
}

/*
 * More of the frame being received, by its deadline: a peer too slow for it is RGPU_EDEADLINE;
 * one that closes after part of what was asked for is RGPU_ETRUNC (before any of it, the caller
 * decides: RGPU_ECLOSED).
 */
static int recv_in_frame(struct rgpu_conn *c, void *buf, size_t len)
{
	size_t got;
	int ret = recv_exact(c, buf, len, c->frame_deadline, &got);
	if (ret == RGPU_ETIMEDOUT)
		return RGPU_EDEADLINE;
	if (ret == RGPU_ECLOSED && got)
		return RGPU_ETRUNC;
	return ret;
}

static int recv_marked(struct rgpu_conn *c, void *buf, size_t len);

int rgpu_conn_recv(struct rgpu_conn *c, void *buf, size_t len)
{
	size_t got;
	if (c->byref || c->lanes_frame)
		return recv_marked(c, buf, len);
	int ret = recv_exact(c, buf, len, 0, &got);
	if (ret == RGPU_ECLOSED && got)
		return RGPU_ETRUNC;
	return ret;
}

int rgpu_conn_recv_payload_raw(struct rgpu_conn *c, void *buf, size_t len)
{
	c->byref = 0;
	return recv_in_frame(c, buf, len);
}

/* A payload its transport marked (by reference, striped): the transport reads it. */
static int recv_marked(struct rgpu_conn *c, void *buf, size_t len)
{
	return c->ops->recv_marked ? c->ops->recv_marked(c, buf, len) : RGPU_EPROTO;
}

int rgpu_conn_recv_payload(struct rgpu_conn *c, void *buf, size_t len)
{
	if (c->byref || c->lanes_frame)
		return recv_marked(c, buf, len);
	return recv_in_frame(c, buf, len);
}

void rgpu_conn_set_frame_timeout(struct rgpu_conn *c, int ms)
{
	c->frame_timeout_ms = ms > 0 ? ms : RGPU_FRAME_TIMEOUT_MS;
}

void rgpu_conn_set_send_timeout(struct rgpu_conn *c, int ms)
{
	c->send_timeout_ms = ms > 0 ? ms : 0;
}

void rgpu_conn_set_deadline(struct rgpu_conn *c, uint64_t deadline)
{
	c->deadline = deadline;
}

const char *rgpu_conn_peer(const struct rgpu_conn *c)
{
	return c->peer;
}

void rgpu_conn_set_peer(struct rgpu_conn *c, const char *peer)
{
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
}

int rgpu_conn_errno(const struct rgpu_conn *c)
{
	return c->last_errno;
}

void rgpu_conn_set_msgs(struct rgpu_conn *c, const struct rgpu_msg_table *msgs)
{
	c->msgs = msgs;
}

void rgpu_conn_set_spin(struct rgpu_conn *c, uint32_t ns)
{
	c->spin_ns = ns;
}

void rgpu_conn_set_spin_hint(struct rgpu_conn *c, struct rgpu_spin_hint *h)
{
	c->hint = h;
}

void rgpu_conn_poll_as_link(struct rgpu_conn *c, struct rgpu_spin_hint *h)
{
	rgpu_conn_set_spin(c, (uint32_t)rgpu_spin_budget_ns(30000));
	h->hold_ns = rgpu_sync_spin_ns();
	rgpu_conn_set_spin_hint(c, h);
}

void rgpu_spin_hold(struct rgpu_spin_hint *h)
{
	if (atomic_fetch_add(&h->held, 1) == 0)
		atomic_store(&h->since_ns, rgpu_now_ns());
}

void rgpu_spin_release(struct rgpu_spin_hint *h)
{
	if (atomic_fetch_sub(&h->held, 1) == 1)
		atomic_store(&h->released_ns, rgpu_now_ns());
}

void rgpu_conn_kick(struct rgpu_conn *c)
{
	if (c && c->ops->kick)
		c->ops->kick(c);
}

int rgpu_conn_spin_more(const struct rgpu_conn *c, uint64_t start, uint64_t now)
{
	const struct rgpu_spin_hint *h = c->hint;

	if (!c->spin_ns)
		return 0;
	if (h) {
		uint64_t rel = atomic_load_explicit(&h->released_ns, memory_order_relaxed);
		if (atomic_load_explicit(&h->held, memory_order_relaxed) &&
		    now < atomic_load_explicit(&h->since_ns, memory_order_relaxed) + h->hold_ns)
			return 1;
		if (rel > start)
			start = rel;
	}
	return now < start + c->spin_ns;
}

int rgpu_conn_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	int ret;

	if (n > RGPU_CONN_MAX_IOV)
		return RGPU_EINVAL;
	/* a send that timed out may have sent part of a frame (or a TLS record): the stream is cut */
	if ((ret = __atomic_load_n(&c->send_broken, __ATOMIC_ACQUIRE)))
		return ret;
	ret = c->ops->sendv(c, iov, n);
	if (ret == RGPU_ETIMEDOUT) {
		__atomic_store_n(&c->send_broken, ret, __ATOMIC_RELEASE);
		shutdown(c->fd, SHUT_RDWR); /* and whoever waits to read from it stops */
	}
	return ret;
}

int rgpu_conn_hung_up(struct rgpu_conn *c)
{
	return c->ops->hung_up(c);
}

void rgpu_conn_shutdown(struct rgpu_conn *c)
{
	c->ops->shutdown(c);
}

void rgpu_conn_close(struct rgpu_conn *c)
{
	if (c)
		c->ops->close(c);
}

void rgpu_conn_abandon(struct rgpu_conn *c)
{
	if (!c)
		return;
	if (c->ops->abandon)
		c->ops->abandon(c);
	else
		c->ops->close(c); /* a plain socket's close says nothing the peer could mistake */
}

int rgpu_conn_release_fd(struct rgpu_conn *c)
{
	int fd = c->fd;
	/* a shared-memory link is its mappings too: its socket alone carries no frames */
	if (fd < 0 || c->ssl || c->shm || c->lanes)
		return RGPU_EUNSUPPORTED;
	if (c->rpos != c->rlen)
		return RGPU_EBUSY;
	free(c);
	return fd;
}

int rgpu_frame_send_hdr(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
			const ProtobufCMessage *body, const void *payload)
{
	uint8_t stackbuf[1024];
	size_t need = rgpu_frame_size(body);
	uint8_t *buf = need <= sizeof(stackbuf) ? stackbuf : malloc(need);
	struct iovec iov[2];
	int n = 1, ret;

	if (!buf)
		return RGPU_ENOMEM;
	iov[0].iov_base = buf;
	iov[0].iov_len = rgpu_frame_pack_hdr(buf, h, body);
	if (h->payload_len) {
		iov[1].iov_base = (void *)payload;
		iov[1].iov_len = h->payload_len;
		n = 2;
	}
	ret = rgpu_conn_sendv(c, iov, n);
	if (buf != stackbuf)
		free(buf);
	return ret;
}

int rgpu_frame_send(struct rgpu_conn *c, uint16_t type, uint32_t flags, uint64_t seq,
		    uint64_t session, const ProtobufCMessage *body, const void *payload,
		    uint64_t payload_len)
{
	struct rgpu_frame_hdr h = {
		.type = type,
		.flags = flags,
		.payload_len = payload_len,
		.seq = seq,
		.session = session,
	};
	return rgpu_frame_send_hdr(c, &h, body, payload);
}

int rgpu_frame_recv(struct rgpu_conn *c, enum rgpu_peer receiver, struct rgpu_frame_hdr *h,
		    uint8_t **body)
{
	return rgpu_frame_recv_within(c, receiver, h, body, -1);
}

int rgpu_frame_recv_within(struct rgpu_conn *c, enum rgpu_peer receiver,
			   struct rgpu_frame_hdr *h, uint8_t **body, int timeout_ms)
{
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	size_t got;
	int ret;

	*body = NULL;
	c->byref = 0;
	c->lanes_frame = 0;
	/* wait as told (-1: for ever) for a frame to begin; from its first byte, its deadline */
	ret = recv_exact(c, raw, 1, rgpu_deadline_after(timeout_ms), &got);
	if (ret)
		return ret;
	c->frame_deadline = rgpu_deadline_after(c->frame_timeout_ms);
	ret = recv_in_frame(c, raw + 1, sizeof(raw) - 1);
	if (ret)
		return ret == RGPU_ECLOSED ? RGPU_ETRUNC : ret;
	ret = rgpu_frame_hdr_decode(raw, h);
	if (ret)
		return ret;
	ret = rgpu_frame_check(h, receiver, c->msgs);
	if (ret)
		return ret;
	/*
	 * a mark only where the transport takes it now (by reference: both ends map the bytes;
	 * striped: this end's lanes are attached, which comes before the peer may stripe), one
	 * mark at most, and only with a payload
	 */
	uint32_t marks = h->flags & (RGPU_FRAME_BYREF | RGPU_FRAME_LANES);
	if (marks && ((marks & ~atomic_load(&c->marks)) || !h->payload_len ||
		      marks == (RGPU_FRAME_BYREF | RGPU_FRAME_LANES)))
		return RGPU_EPROTO;
	if (h->body_len) {
		*body = malloc(h->body_len);
		if (!*body)
			return RGPU_ENOMEM;
		ret = recv_in_frame(c, *body, h->body_len);
		if (ret == RGPU_ECLOSED)
			ret = RGPU_ETRUNC;
		if (ret) {
			free(*body);
			*body = NULL;
			return ret;
		}
	}
	c->byref = !!(h->flags & RGPU_FRAME_BYREF);
	c->lanes_frame = !!(h->flags & RGPU_FRAME_LANES);
	c->frame_seq = h->seq;
	return 0;
}

int rgpu_conn_discard(struct rgpu_conn *c, uint64_t len)
{
	char buf[16384];
	uint64_t done = 0;
	if ((c->byref || c->lanes_frame) && len)
		return recv_marked(c, NULL, (size_t)len);
	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		int ret = recv_in_frame(c, buf, n);
		if (ret)
			/* a cut after any discarded byte is a truncated payload, wherever it falls */
			return ret == RGPU_ECLOSED && done ? RGPU_ETRUNC : ret;
		len -= n;
		done += n;
	}
	return 0;
}

/* ---- following the frames a marking transport writes ------------------------------------- */

uint64_t rgpu_conn_marked_payload(const struct rgpu_conn *c, const struct iovec *iov, int n, int i,
				  uint32_t *body)
{
	const uint8_t *p = iov[i].iov_base;
	uint64_t plen;

	if (c->whave || c->wleft || iov[i].iov_len < RGPU_FRAME_HDR_LEN || i + 1 >= n)
		return 0;
	*body = rd_le32(p + 12);
	plen = rd_le64(p + 16);
	if (!plen || iov[i].iov_len != RGPU_FRAME_HDR_LEN + *body || iov[i + 1].iov_len != plen)
		return 0;
	return plen;
}

void rgpu_conn_track_sent(struct rgpu_conn *c, const uint8_t *p, size_t len)
{
	while (len) {
		if (c->wleft) { /* inside a frame's body or payload */
			size_t m = (size_t)MIN((uint64_t)len, c->wleft);
			c->wleft -= m;
			p += m;
			len -= m;
			continue;
		}
		/* a header, perhaps in pieces: learn the frame's length from it */
		size_t m = MIN(len, RGPU_FRAME_HDR_LEN - c->whave);
		memcpy(c->whdr + c->whave, p, m);
		c->whave += m;
		p += m;
		len -= m;
		if (c->whave == RGPU_FRAME_HDR_LEN) {
			c->whave = 0;
			c->wleft = rd_le32(c->whdr + 12) + rd_le64(c->whdr + 16);
		}
	}
}

/* ---- relaying ------------------------------------------------------------------------------ */

struct relay {
	struct rgpu_conn *c;
	int fd;
	int ret;  /* the fd-to-conn direction's end */
};

/* fd to c, in its own thread */
static void *relay_up(void *arg)
{
	struct relay *r = arg;
	uint8_t buf[16384];
	for (;;) {
		ssize_t n = read(r->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->ret = n == 0 || errno == ECONNRESET ? 0 : RGPU_EIO;
			break;
		}
		struct iovec iov = {.iov_base = buf, .iov_len = (size_t)n};
		r->ret = r->c->ops->sendv(r->c, &iov, 1);
		if (r->ret)
			break;
	}
	shutdown(r->fd, SHUT_RDWR);
	rgpu_conn_shutdown(r->c);
	return NULL;
}

int rgpu_send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return errno == EPIPE || errno == ECONNRESET ? RGPU_ECLOSED : RGPU_EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int rgpu_conn_relay(struct rgpu_conn *c, int fd)
{
	struct relay r = {.c = c, .fd = fd};
	pthread_t up;
	int ret = 0;

	if (c->rpos != c->rlen) {
		ret = rgpu_send_all(fd, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rpos = c->rlen = 0;
		if (ret)
			return ret;
	}
	if (pthread_create(&up, NULL, relay_up, &r))
		return RGPU_ESYS;
	/* c to fd, here */
	for (;;) {
		long n = c->ops->recv_some(c, c->rbuf, sizeof(c->rbuf), -1);
		if (n < 0) {
			ret = n == RGPU_ECLOSED ? 0 : (int)n;
			break;
		}
		ret = rgpu_send_all(fd, c->rbuf, (size_t)n);
		if (ret)
			break;
	}
	shutdown(fd, SHUT_RDWR);
	rgpu_conn_shutdown(c);
	pthread_join(up, NULL);
	return ret ? ret : r.ret;
}
