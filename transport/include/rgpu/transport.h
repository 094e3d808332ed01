/*
 * Transports move frames between a client and a server. They share one small interface so
 * TCP, a shared-memory ring and RDMA verbs are interchangeable; TCP and shared memory are built.
 */
#ifndef RGPU_TRANSPORT_H
#define RGPU_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rgpu/frame.h"

struct rgpu_conn;


/*
 * A connection, opaque to everyone but its transport (transport/conn_priv.h): callers move
 * frames through these functions and never touch a socket, so a shared-memory ring or RDMA
 * verbs can stand behind the same calls. One reader and one (serialized) sender at a time.
 */
const char *rgpu_conn_peer(const struct rgpu_conn *c);     /* "host:port" for logs */
/* name the peer in logs as peer (a connection relayed by another process: the far end's) */
void rgpu_conn_set_peer(struct rgpu_conn *c, const char *peer);
int rgpu_conn_errno(const struct rgpu_conn *c);            /* cause kept beside RGPU_EIO */
/* poll this long for more bytes before sleeping in a receive (0: never) */
void rgpu_conn_set_spin(struct rgpu_conn *c, uint32_t ns);
/*
 * What the layer above knows of when bytes are due: while a hint is held (a count: each caller
 * waiting for a reply, the worker's executor while it runs frames), the peer will answer or
 * send its next frame soon, so a reader waiting for bytes keeps spinning, up to hold_ns from
 * when the hold began, rather than sleeping and paying the scheduler's wake-up (5-10 us on
 * each side of a call that outlasts the spin, such as a 4 MiB copy). After the last release it
 * spins the connection's spin_ns more. The owner zeroes it and sets hold_ns
 * (rgpu_sync_spin_ns()); it must outlive the connections it is given to.
 */
struct rgpu_spin_hint {
	_Atomic int held;
	_Atomic uint64_t since_ns;    /* when held last went from 0 to 1 */
	_Atomic uint64_t released_ns; /* when it last went back to 0 */
	uint64_t hold_ns;
};
void rgpu_spin_hold(struct rgpu_spin_hint *h);
void rgpu_spin_release(struct rgpu_spin_hint *h);
void rgpu_conn_set_spin_hint(struct rgpu_conn *c, struct rgpu_spin_hint *h);
/*
 * rgpu_conn_poll_as_link() - how a job's link is polled, on either side: 30 us after its last
 * bytes (rgpu_spin_budget_ns), and while h is held, up to rgpu_sync_spin_ns (set in h here)
 */
void rgpu_conn_poll_as_link(struct rgpu_conn *c, struct rgpu_spin_hint *h);
/* wake c's reader if it sleeps waiting for bytes, so that it spins for a held hint (shared
 * memory; a no-op on sockets, whose reader wakes when the bytes come) */
void rgpu_conn_kick(struct rgpu_conn *c);
/*
 * rgpu_conn_release_fd() - hand the connection's socket to someone else (another process,
 * through SCM_RIGHTS): returns the descriptor and frees c without closing it. Refused with
 * RGPU_EBUSY when bytes were read ahead of the last frame, RGPU_EUNSUPPORTED for transports
 * without a descriptor, under TLS and on shared memory; c is untouched then.
 */
int rgpu_conn_release_fd(struct rgpu_conn *c);

/* rgpu_conn_sendv() - every byte of iov[0..n) (n <= RGPU_CONN_MAX_IOV) or an error */
#define RGPU_CONN_MAX_IOV 128
int rgpu_conn_sendv(struct rgpu_conn *c, const struct iovec *iov, int n);
/*
 * rgpu_conn_recv() - exactly len bytes, waiting as long as it takes (up to the connection's
 * deadline, if one is set: RGPU_ETIMEDOUT): 0, RGPU_ECLOSED (EOF before the first byte),
 * RGPU_ETRUNC (EOF after some of them: a truncated message), RGPU_EIO.
 */
int rgpu_conn_recv(struct rgpu_conn *c, void *buf, size_t len);
/*
 * rgpu_conn_recv_payload() - the same for the payload of the frame rgpu_frame_recv() just
 * returned: it must arrive by that frame's deadline (RGPU_EDEADLINE otherwise).
 */
int rgpu_conn_recv_payload(struct rgpu_conn *c, void *buf, size_t len);
/*
 * rgpu_conn_set_frame_timeout() - every frame received on c must arrive whole, payload
 * included, within ms of its first byte (ms <= 0: RGPU_FRAME_TIMEOUT_MS, the default).
 */
void rgpu_conn_set_frame_timeout(struct rgpu_conn *c, int ms);
/*
 * rgpu_conn_set_send_timeout() - a send on c (TCP or TLS, not its lanes) that moves no byte for
 * ms fails with RGPU_ETIMEDOUT (errno ETIMEDOUT): a peer that stops reading. The connection is
 * then cut (shut down both ways: part of a frame may have gone) and every later send fails
 * the same at once. 0 (the default): sends wait as long as TCP's do.
 */
void rgpu_conn_set_send_timeout(struct rgpu_conn *c, int ms);
/*
 * rgpu_conn_set_deadline() - no receive on c waits past deadline (rgpu_now_ns() time; 0
 * removes it): a whole handshake must arrive by then, however its bytes are spread. A wait cut
 * short is RGPU_ETIMEDOUT before a frame began, RGPU_EDEADLINE inside one.
 */
void rgpu_conn_set_deadline(struct rgpu_conn *c, uint64_t deadline);

/*
 * rgpu_conn_set_msgs() - the protocol this connection speaks: rgpu_frame_recv() checks every
 * header against msgs. A new connection has none and refuses every frame (RGPU_EUNKNOWNTYPE).
 */
void rgpu_conn_set_msgs(struct rgpu_conn *c, const struct rgpu_msg_table *msgs);

/* where rgpud listens, and where clients look, unless told otherwise: loopback only */
#define RGPU_DEFAULT_SERVER "127.0.0.1:7070"
/* where rgpud answers the admin protocol (rgpuctl), and where rgpuctl looks */
#define RGPU_DEFAULT_ADMIN "127.0.0.1:7071"

#define RGPU_FRAME_TIMEOUT_MS 30000  /* default: a frame must be whole 30 s after its first byte */
/*
 * rgpu_conn_hung_up() - has the peer closed or reset the connection? It may still hold bytes
 * not read yet: for a receiver that stopped reading (backpressure) and must not wait for ever
 * on a peer that is gone. Never blocks.
 */
int rgpu_conn_hung_up(struct rgpu_conn *c);
/* stop both directions, waking any blocked reader or writer; c stays allocated */
void rgpu_conn_shutdown(struct rgpu_conn *c);
void rgpu_conn_close(struct rgpu_conn *c);   /* NULL is fine */
/*
 * rgpu_conn_abandon() - free c and close its descriptor without a word to the peer: after a
 * fork, the process that goes on with the connection is the other one (a TLS close_notify from
 * this one would end it). NULL is fine.
 */
void rgpu_conn_abandon(struct rgpu_conn *c);

/*
 * rgpu_frame_send() - send one frame: header, body, then payload straight from the caller's
 * memory. Not thread-safe on its own: callers that share a conn serialize sends.
 */
int rgpu_frame_send(struct rgpu_conn *c, uint16_t type, uint32_t flags, uint64_t seq,
		    uint64_t session, const ProtobufCMessage *body, const void *payload,
		    uint64_t payload_len);
/* rgpu_frame_send_hdr() - the same from a header (see rgpu_frame_pack_hdr) */
int rgpu_frame_send_hdr(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
			const ProtobufCMessage *body, const void *payload);

/*
 * rgpu_frame_recv() - receive a header and check it for `receiver` against the connection's
 * message table (rgpu_conn_set_msgs), then the body into a malloc'd buffer (*body, NULL when
 * empty). The payload is left on the connection for the caller to read where it belongs (with
 * rgpu_conn_recv_payload, or rgpu_conn_discard).
 * Waits indefinitely for a frame to begin; once it has, the whole frame, payload included,
 * must arrive within the frame timeout (rgpu_conn_set_frame_timeout) of its first byte,
 * however the peer spreads its bytes: a peer that closes inside it makes it RGPU_ETRUNC
 * (truncated), one too slow RGPU_EDEADLINE. Returns 0, RGPU_ECLOSED (clean end between frames)
 * or another RGPU_E* code; on RGPU_EVERSION and check failures *h is filled for the error
 * report.
 */
int rgpu_frame_recv(struct rgpu_conn *c, enum rgpu_peer receiver, struct rgpu_frame_hdr *h,
		    uint8_t **body);
/*
 * rgpu_frame_recv_within() - the same, but the frame must also begin within timeout_ms
 * (RGPU_ETIMEDOUT otherwise): for handshakes, where a silent peer must not hold a process.
 */
int rgpu_frame_recv_within(struct rgpu_conn *c, enum rgpu_peer receiver,
			   struct rgpu_frame_hdr *h, uint8_t **body, int timeout_ms);

/* rgpu_conn_discard() - read and drop len bytes of the current frame's payload, by its deadline. */
int rgpu_conn_discard(struct rgpu_conn *c, uint64_t len);

/* TCP (TCP_NODELAY). host may be a name or address; port 0 for listen picks a free port. */
int rgpu_tcp_listen(const char *host, int port, int *lfd, int *bound_port);
int rgpu_tcp_accept(int lfd, struct rgpu_conn **out);
int rgpu_tcp_connect(const char *host, int port, int timeout_ms, struct rgpu_conn **out);
/* rgpu_tcp_wrap() - a conn over an already connected socket fd (takes ownership). */
struct rgpu_conn *rgpu_tcp_wrap(int fd);

/*
 * TLS 1.3 (tls.c, OpenSSL): a property of a connection, not a transport of its own. Connect or
 * accept over TCP as always, then shake hands on the conn; from then on rgpu_conn_* and the
 * frame functions seal and open every byte, and one reader and one sender may still use the
 * connection at once. OpenSSL is first touched by rgpu_tls_*_new().
 */
struct rgpu_tls;   /* a TLS configuration (an SSL_CTX): a server's or a client's */
#define RGPU_TLS_BINDING_LEN 32
/*
 * rgpu_tls_server_new() - a server's configuration: the certificate chain (PEM, the server's
 * own first) and its private key (PEM). Returns 0, or RGPU_ETLS / RGPU_ENOMEM with why filled.
 */
int rgpu_tls_server_new(const char *cert, const char *key, struct rgpu_tls **out, char *why,
			size_t whylen);
/*
 * rgpu_tls_client_new() - a client's configuration: the server's certificate must chain to a CA
 * in the PEM file ca (NULL or "": the system's CAs). Returns 0, or RGPU_ETLS with why filled.
 */
int rgpu_tls_client_new(const char *ca, struct rgpu_tls **out, char *why, size_t whylen);
void rgpu_tls_free(struct rgpu_tls *t);   /* NULL is fine */
/*
 * rgpu_tls_accept() / rgpu_tls_connect() - the TLS handshake on a fresh TCP connection, by the
 * connection's deadline (rgpu_conn_set_deadline; none: as long as it takes). The client checks
 * that the server's certificate names `name` (a DNS name or an address; NULL: no name check).
 * Returns 0, RGPU_ETLS (not TLS, an untrusted certificate, a TLS error), RGPU_ECLOSED (the peer
 * closed during the handshake: a broken link, or a server with TLS off), RGPU_ETIMEDOUT, or
 * RGPU_EPROTO (bytes already read: TLS must come first), with why filled. On failure c is
 * still a plain connection, for the caller to close.
 */
int rgpu_tls_accept(struct rgpu_conn *c, struct rgpu_tls *t, char *why, size_t whylen);
int rgpu_tls_connect(struct rgpu_conn *c, struct rgpu_tls *t, const char *name, char *why,
		     size_t whylen);
/*
 * rgpu_conn_starts_tls() - peek, by the connection's deadline, at the peer's first byte: 1 when
 * it begins a TLS handshake, 0 when it does not (an rgpu frame, say), or RGPU_ETIMEDOUT,
 * RGPU_ECLOSED, RGPU_EIO. Nothing is consumed.
 */
int rgpu_conn_starts_tls(struct rgpu_conn *c);
int rgpu_conn_is_tls(const struct rgpu_conn *c);
/*
 * rgpu_conn_tls_binding() - RGPU_TLS_BINDING_LEN bytes both ends of this TLS connection, and
 * nobody else, compute (the RFC 8446 exporter, label "EXPORTER-rgpu-auth-v1"): mixed into the
 * authentication MACs so that a MAC made on one connection is worthless on another. Returns 0,
 * RGPU_EUNSUPPORTED (no TLS) or RGPU_ETLS.
 */
int rgpu_conn_tls_binding(struct rgpu_conn *c, uint8_t *out);
/*
 * rgpu_connect() - a client's connection: TCP to host:port within timeout_ms, then, with tls,
 * the TLS handshake within as long again, checking that the certificate names `name` (NULL:
 * host). Returns 0 with *out set, or RGPU_ECONNECT, RGPU_ETIMEDOUT, RGPU_ETLS... with why
 * filled with a sentence naming host:port.
 */
int rgpu_connect(const char *host, int port, int timeout_ms, struct rgpu_tls *tls,
		 const char *name, struct rgpu_conn **out, char *why, size_t whylen);

/*
 * Shared memory (shm.c): a client and a server on one host. The link is a Unix-domain stream
 * socket first (rgpu_unix_connect; the server accepts on its listening socket as for TCP),
 * speaks the handshake there, and is then upgraded by rgpu_shm_offer (client) and
 * rgpu_shm_accept (server), after which frames go through rings in a memfd both map and the
 * socket only tells each end when the other is gone.
 */
int rgpu_unix_listen(const char *path, int *lfd);
int rgpu_unix_connect(const char *path, int timeout_ms, struct rgpu_conn **out);
int rgpu_conn_is_unix(const struct rgpu_conn *c);
int rgpu_conn_is_shm(const struct rgpu_conn *c);

/* payloads this short always travel in the ring; longer ones may go by reference */
#define RGPU_SHM_BYREF_MIN (64u << 10)

/*
 * The client's pinned-memory arena: a memfd the interposer maps (base, size) and carves
 * pinned allocations from. find() says whether [p, p + len) lies in one allocation and which
 * (its offset and length in the arena): such payloads go by reference, and the server reads
 * them where they are.
 */
struct rgpu_shm_arena {
	int fd;                 /* -1: none */
	void *base;
	uint64_t size;
	void *ctx;
	int (*find)(void *ctx, const void *p, uint64_t len, uint64_t *reg_off, uint64_t *reg_len);
};

struct rgpu_shm_opts {
	uint64_t ring_size;     /* each direction's ring: a power of two, 64 KiB .. 64 MiB */
	uint64_t slot_size;     /* the slots' and staging buffers' size (RGPU_COPY_CHUNK) */
	uint32_t nslots;        /* the client's slots for large payloads from other memory */
	uint32_t nstage;        /* the server's staging buffers in the shared memory */
	struct rgpu_shm_arena arena;
};

/*
 * rgpu_shm_offer() - the client's side of the upgrade, right after the server's HelloReply
 * accepted it: make and send the shared memory, wait for the answer. Returns 0 (c now speaks
 * shared memory), or an error with why filled (c is unchanged; the caller closes it).
 */
int rgpu_shm_offer(struct rgpu_conn *c, const struct rgpu_shm_opts *opt, int timeout_ms,
		   char *why, size_t whylen);

/* What the server got: the areas its driver should register, and the arena. */
struct rgpu_shm_accepted {
	void *link_map, *arena_map;    /* references: rgpu_shm_map_put() when done with them */
	uint8_t *stage;                /* nstage staging buffers of slot_size */
	uint32_t nstage;
	uint8_t *slots;                /* the client's slots: slots_size bytes */
	uint64_t slots_size, slot_size;
	void *arena;                   /* NULL: none */
	uint64_t arena_size, arena_dev, arena_ino;
};
/*
 * rgpu_shm_accept() - the server's side, right after sending a HelloReply that accepts the
 * upgrade: take the client's offer within timeout_ms, check it, map it, answer. Returns 0
 * (c now speaks shared memory; *acc filled), or an error with why filled (the caller closes c).
 */
int rgpu_shm_accept(struct rgpu_conn *c, int timeout_ms, struct rgpu_shm_accepted *acc,
		    char *why, size_t whylen);
void rgpu_shm_map_put(void *map);

/*
 * A payload received by reference, used where it lies: p, len. Release it when done (a slot
 * then goes back to the client); it stays mapped until then, whatever happens to the link.
 */
struct rgpu_payload {
	void *p;
	uint64_t len;
	int in_arena;                  /* in the client's arena at arena_at, in the allocation */
	uint64_t arena_at, arena_off, arena_len; /* [arena_off, +arena_len) */
	int slot;                      /* 1 + the slot's number, 0: none */
	void *map;
};
/*
 * rgpu_conn_take_payload() - the payload of frame h (just received) where it lies. Returns 0,
 * RGPU_EUNSUPPORTED (not sent by reference: read it with rgpu_conn_recv_payload), or an
 * error (RGPU_EPROTO: a reference outside its area).
 */
int rgpu_conn_take_payload(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
			   struct rgpu_payload *out);
void rgpu_payload_release(struct rgpu_payload *p);
/* the bytes of the payload as they are on the stream (a reference, for shm.c) */
int rgpu_conn_recv_payload_raw(struct rgpu_conn *c, void *buf, size_t len);

/*
 * Lanes (lanes.c): extra TCP connections of one link that carry its large payloads (at least
 * RGPU_LANE_MIN bytes) in stripes, all at once. rgpu_lanes_attach() - socket fd (connected,
 * past its own handshake) becomes lane `index` (1..RGPU_MAX_LANES-1) of c: from now on c can
 * receive striped payloads. rgpu_lanes_ready() - the peer has all of c's lanes: c may send
 * striped payloads. rgpu_lanes_count() - lanes attached (1..n all there). Not for TLS or
 * shared-memory links. Returns 0, RGPU_EINVAL, RGPU_EEXIST (that lane is there), RGPU_ESYS.
 */
#define RGPU_MAX_LANES 16
#define RGPU_LANE_MIN (1u << 20)
int rgpu_lanes_attach(struct rgpu_conn *c, int index, int fd);
void rgpu_lanes_ready(struct rgpu_conn *c);
int rgpu_lanes_count(const struct rgpu_conn *c);
/*
 * rgpu_lanes_stats() - where a link's striped payloads spent their time, sending (rx 0) or
 * receiving (rx 1), summed over them since the lanes were attached (zeros without lanes): for
 * benchmarks (tests/bench/lanes_bench.c). Read it while that side is idle.
 */
struct rgpu_lanes_stats {
	uint64_t frames, bytes;  /* striped payloads, their bytes */
	uint64_t busy_ns;        /* from posting the stripes to the end of the last one */
	uint64_t spread_ns;      /* from the first stripe's end to the last's: the slowest's lead */
	uint64_t wake_ns;        /* from the last stripe's end to the caller's return */
	uint64_t gap_ns;         /* from a payload's return to the next one's posting */
};
void rgpu_lanes_stats(const struct rgpu_conn *c, int rx, struct rgpu_lanes_stats *out);
/* rgpu_lanes_stats_say() - "busy B, slowest lead S, wake W, between G us" per payload, into out */
void rgpu_lanes_stats_say(const struct rgpu_lanes_stats *st, char *out, size_t cap);

/*
 * rgpu_conn_relay() - copy bytes both ways between c and the socket fd until either side ends
 * or fails, then shut both down: for a connection whose session lives in another process and
 * whose TLS state cannot travel with its descriptor. Bytes c read ahead go to fd first. Returns
 * 0 when a side ended cleanly, or the first error.
 */
int rgpu_conn_relay(struct rgpu_conn *c, int fd);

#endif
