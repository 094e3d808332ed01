/*
 * The inside of a connection: only transports (tcp.c, shm.c, and later verbs) and the frame
 * code in conn.c see it; everyone else holds an opaque struct rgpu_conn.
 */
#ifndef RGPU_CONN_PRIV_H
#define RGPU_CONN_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "rgpu/transport.h"

struct ssl_st;
struct shm_link;
struct rgpu_lanes;

struct rgpu_transport_ops {
	const char *name;
	/* send every byte of iov[0..n) or fail: 0, RGPU_EIO, RGPU_ECLOSED */
	int (*sendv)(struct rgpu_conn *c, const struct iovec *iov, int n);
	/*
	 * receive between 1 and cap bytes: count, or RGPU_ECLOSED (EOF), RGPU_EIO, RGPU_ETIMEDOUT
	 * (nothing within timeout_ms; -1 waits for ever)
	 */
	long (*recv_some)(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms);
	/* has the peer closed or reset the connection (bytes may be left to read)? never blocks */
	int (*hung_up)(struct rgpu_conn *c);
	/* stop both directions, waking any blocked reader; the conn stays allocated */
	void (*shutdown)(struct rgpu_conn *c);
	void (*close)(struct rgpu_conn *c);
	/* free c and close its descriptor without a word to the peer (NULL: close does that) */
	void (*abandon)(struct rgpu_conn *c);
	/*
	 * the payload of the frame being received, which this transport marked (RGPU_FRAME_BYREF,
	 * RGPU_FRAME_LANES: c->marks says which it takes now), read whole into buf (NULL: dropped);
	 * 0 or an error. NULL for transports that mark nothing.
	 */
	int (*recv_marked)(struct rgpu_conn *c, void *buf, size_t len);
	/* wake this end's reader if it sleeps waiting for bytes (NULL: it cannot be woken) */
	void (*kick)(struct rgpu_conn *c);
};

#define RGPU_CONN_RBUF (64u << 10)

/*
 * For the transports that mark payloads (shm.c, lanes.c), which follow the frames through the
 * bytes they write (c->whdr, whave, wleft). rgpu_conn_marked_payload() - is iov[i] a frame's
 * header and body, whole, at a frame's start, whose payload is iov[i + 1] in full? Its length
 * (and *body), else 0. rgpu_conn_track_sent() - len more bytes of frames written from p: where
 * the writer now stands in them.
 */
uint64_t rgpu_conn_marked_payload(const struct rgpu_conn *c, const struct iovec *iov, int n, int i,
				  uint32_t *body);
void rgpu_conn_track_sent(struct rgpu_conn *c, const uint8_t *p, size_t len);
/* rgpu_send_all() - every byte to socket fd: 0, RGPU_ECLOSED, RGPU_EIO */
int rgpu_send_all(int fd, const void *p, size_t n);

/*
 * rgpu_conn_spin_more() - should a reader that began waiting at `start` still spin at `now`?
 * For spin_ns after start or the hint's last release, and while the hint is held (up to its
 * hold_ns); never when spin_ns is 0.
 */
int rgpu_conn_spin_more(const struct rgpu_conn *c, uint64_t start, uint64_t now);

/* lanes.c, for tcp.c (conn.c reaches them through the ops' recv_marked) */
int rgpu_lanes_sending(const struct rgpu_conn *c);
int rgpu_lanes_send(struct rgpu_conn *c, const void *p, size_t len, uint64_t seq);
int rgpu_lanes_recv_marked(struct rgpu_conn *c, void *buf, size_t len);
void rgpu_lanes_shutdown(struct rgpu_conn *c);
void rgpu_lanes_free(struct rgpu_conn *c);

/*
 * Reads go through a small buffer so that a small frame's header and body cost one system
 * call; large payloads bypass it and land directly where the caller wants them.
 */
struct rgpu_conn {
	const struct rgpu_transport_ops *ops;
	int fd;                /* -1 for transports without one */
	int last_errno;        /* cause kept beside RGPU_EIO */
	char peer[96];         /* "host:port" for logs */
	int frame_timeout_ms;  /* a frame must arrive whole within this of its first byte */
	int send_timeout_ms;   /* a send moving no byte this long fails (0: no limit) */
	int send_broken;       /* such a send failed: every later one fails the same (atomic) */
	uint64_t frame_deadline; /* when the frame being received must be whole, payload too */
	uint64_t deadline;       /* no receive waits past this (0: none): rgpu_conn_set_deadline */
	uint32_t spin_ns;      /* poll this long for more bytes before sleeping (0: never) */
	struct rgpu_spin_hint *hint; /* the layer above's word on when bytes are due (or NULL) */
	const struct rgpu_msg_table *msgs; /* the protocol frames are checked against */
	/*
	 * TLS (tls.c), once rgpu_tls_accept/_connect succeeded: the socket is then non-blocking
	 * and every call into ssl holds ssl_lock, since the reader and the sender use it at once
	 */
	struct ssl_st *ssl;
	pthread_mutex_t ssl_lock;
	struct shm_link *shm;  /* the shared-memory transport's state (shm.c) */
	_Atomic uint32_t marks; /* the header marks the connection takes now (shm.c, lanes.c) */
	int byref;             /* the frame being received sends its payload by reference */
	struct rgpu_lanes *lanes; /* TCP: the link's lanes (lanes.c), NULL: none */
	int lanes_frame;       /* the frame being received stripes its payload over the lanes */
	uint64_t frame_seq;    /* its seq, which each stripe repeats */
	uint8_t whdr[RGPU_FRAME_HDR_LEN]; /* the writer's place in its frames (shm.c, lanes.c) */
	size_t whave;
	uint64_t wleft;
	size_t rpos, rlen;
	uint8_t rbuf[RGPU_CONN_RBUF];
};

#endif
