/*
 * Transports move frames between a client and a server. They share one small interface so
 * TCP, a shared-memory ring and RDMA verbs are interchangeable; TCP is the one built today.
 */
#ifndef RGPU_TRANSPORT_H
#define RGPU_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rgpu/frame.h"

struct rgpu_conn;

struct rgpu_transport_ops {
	const char *name;
	/* send every byte of iov[0..n) or fail: 0, RGPU_EIO, RGPU_ECLOSED */
	int (*sendv)(struct rgpu_conn *c, const struct iovec *iov, int n);
	/*
	 * receive between 1 and cap bytes: count, or RGPU_ECLOSED (EOF), RGPU_EIO, RGPU_ETIMEDOUT
	 * (nothing within timeout_ms; -1 waits for ever)
	 */
	long (*recv_some)(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms);
	/* stop both directions, waking any blocked reader; the conn stays allocated */
	void (*shutdown)(struct rgpu_conn *c);
	void (*close)(struct rgpu_conn *c);
};

#define RGPU_CONN_RBUF (64u << 10)

/*
 * A connection. Reads go through a small buffer so that a small frame's header and body cost
 * one system call; large payloads bypass it and land directly where the caller wants them.
 * One reader and one (serialized) sender at a time.
 */
struct rgpu_conn {
	const struct rgpu_transport_ops *ops;
	int fd;
	int last_errno;   /* cause kept beside RGPU_EIO */
	char peer[96];    /* "host:port" for logs */
	int frame_timeout_ms;  /* once a frame has begun, the rest must come within this */
	uint32_t spin_ns;      /* poll this long for more bytes before sleeping (0: never) */
	const struct rgpu_msg_table *msgs; /* the protocol frames are checked against */
	size_t rpos, rlen;
	uint8_t rbuf[RGPU_CONN_RBUF];
};

static inline int rgpu_conn_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	return c->ops->sendv(c, iov, n);
}
/*
 * rgpu_conn_recv() - exactly len bytes, waiting as long as it takes: 0, RGPU_ECLOSED (EOF
 * before the first byte), RGPU_EPROTO (EOF after some of them: a truncated message), RGPU_EIO.
 */
int rgpu_conn_recv(struct rgpu_conn *c, void *buf, size_t len);
/* rgpu_conn_recv_within() - the same, but each wait for more bytes is bounded by timeout_ms */
int rgpu_conn_recv_within(struct rgpu_conn *c, void *buf, size_t len, int timeout_ms);

/*
 * rgpu_conn_set_msgs() - the protocol this connection speaks: rgpu_frame_recv() checks every
 * header against msgs. A new connection has none and refuses every frame (RGPU_EUNKNOWNTYPE).
 */
static inline void rgpu_conn_set_msgs(struct rgpu_conn *c, const struct rgpu_msg_table *msgs)
{
	c->msgs = msgs;
}

/* where rgpud listens, and where clients look, unless told otherwise: loopback only */
#define RGPU_DEFAULT_SERVER "127.0.0.1:7070"

#define RGPU_FRAME_TIMEOUT_MS 30000  /* default: a started frame must finish within 30 s */
static inline void rgpu_conn_shutdown(struct rgpu_conn *c)
{
	c->ops->shutdown(c);
}
static inline void rgpu_conn_close(struct rgpu_conn *c)
{
	if (c)
		c->ops->close(c);
}

/*
 * rgpu_frame_send() - send one frame: header, body, then payload straight from the caller's
 * memory. Not thread-safe on its own: callers that share a conn serialize sends.
 */
int rgpu_frame_send(struct rgpu_conn *c, uint16_t type, uint32_t flags, uint64_t seq,
		    uint64_t session, const ProtobufCMessage *body, const void *payload,
		    uint64_t payload_len);

/*
 * rgpu_frame_recv() - receive a header and check it for `receiver` against the connection's
 * message table (rgpu_conn_set_msgs), then the body into a malloc'd buffer (*body, NULL when
 * empty). The payload is left on the connection for the caller to read where it belongs (with
 * rgpu_conn_recv_within and c->frame_timeout_ms).
 * Waits indefinitely for a frame to begin; once it has, a peer that closes or stalls for
 * c->frame_timeout_ms makes it RGPU_EPROTO (truncated) or RGPU_ETIMEDOUT. Returns 0,
 * RGPU_ECLOSED (clean end between frames) or another RGPU_E* code; on RGPU_EVERSION and check
 * failures *h is filled for the error report.
 */
int rgpu_frame_recv(struct rgpu_conn *c, enum rgpu_peer receiver, struct rgpu_frame_hdr *h,
		    uint8_t **body);

/* rgpu_conn_discard() - read and drop len bytes. */
int rgpu_conn_discard(struct rgpu_conn *c, uint64_t len);

/* TCP (TCP_NODELAY). host may be a name or address; port 0 for listen picks a free port. */
int rgpu_tcp_listen(const char *host, int port, int *lfd, int *bound_port);
int rgpu_tcp_accept(int lfd, struct rgpu_conn **out);
int rgpu_tcp_connect(const char *host, int port, int timeout_ms, struct rgpu_conn **out);
/* rgpu_tcp_wrap() - a conn over an already connected socket fd (takes ownership). */
struct rgpu_conn *rgpu_tcp_wrap(int fd);

#endif
