/*
 * What the session's four files share, and nothing else includes: the one session of the
 * process (S, defined in link.c) and the functions one of them offers the others. They stand
 * in floors, each using only the ones below it:
 *
 *   session.c    opening, the handshake, resuming, the receiver thread, goodbye at exit
 *   calls.c      posts and calls, waiting for replies, asynchronous errors
 *   callbacks.c  host functions and the thread that runs them
 *   link.c       the kept frames, writing, acknowledgements, flow control, the session's death
 *
 * session.c's opening comment tells how they work together. The header belongs to all four,
 * not to session.c, which only stands on top of them: S itself is defined at the bottom.
 */
#ifndef SESSION_STATE_H
#define SESSION_STATE_H

#include "rgpu/auth.h"
#include <sys/types.h>

#include "ip.h"
#include "rgpu/record.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"

#define IP_INLINE_MAX (64u << 10)
#define IP_HELLO_TIMEOUT_MS 60000
#define IP_RESUME_HELLO_TIMEOUT_MS 10000
#define IP_GOODBYE_WAIT_MS 5000     /* at exit, for the worker to close (device output) */
#define IP_SPIN_NS 100000 /* a caller spins this long for its reply (loopback TCP: ~40 us) */
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

/* A request waiting for its reply (or, async, for its device-to-host data). */
struct waiter {
	uint64_t seq;
	void *dst;
	uint64_t dst_size, received;
	struct ip_rows rows;         /* width 0: dst is contiguous, else the rows MSG_DATA fills */
	int async;
	/*
	 * IP_W_PENDING until the reply (or the session's death) sets IP_W_DONE; IP_W_ASLEEP while
	 * the caller sleeps on it (a futex), so that whoever completes it wakes it. The receiver
	 * unlinks a waiter it completes (linked 0, under wait_lock), so the caller, spinning on
	 * state, finds everything written when it sees IP_W_DONE and has no lock to take.
	 */
	_Atomic uint32_t state;
	int linked; /* on S.waiters (wait_lock) */
	uint8_t *body;
	uint32_t body_len;
	uint16_t type;
	struct rgpu_rec_ops *rec_sent; /* the records the call made when sent (statelog.c) */
	struct waiter *next;
};
enum { IP_W_PENDING, IP_W_DONE, IP_W_ASLEEP };
/* ip_waiter_complete_locked() - w is done: wake its caller (wait_lock held) */
void ip_waiter_complete_locked(struct waiter *w, int unlink);

/* A registered host function or stream callback. */
struct cbreg {
	uint64_t id;
	int persistent;
	CUhostFn fn;
	CUstreamCallback cb;
	CUstream stream;
	void *user;
	struct cbreg *next;
};

#define IP_COPY_CACHE 8

struct ip_session {
	char server[300], host[256];
	int port;
	int index;                   /* in ip_sessions[] */
	int dev_base, ndev;          /* the client's numbers for its devices: dev_base.. */
	int sel[IP_MAX_DEVICES], nsel; /* RGPU_SERVERS' /dev,...: the server's devices (0: all) */
	char redirect_to[300];       /* where a redirect sent the job (receiver thread only) */
	int is_unix;                 /* server is "unix:PATH" (RGPU_SERVER): host holds the path */
	uint8_t link_id[16];         /* the TCP link's, which its lanes name (lane > 0 hellos) */
	int lane_hello;              /* exchange_hello: 0 a link's hello, k > 0 lane k's */
	uint32_t lanes_offered;      /* the last link hello's HelloReply.lanes */
	_Atomic uint64_t staging_size; /* HelloReply.staging_size: TCP copies are cut at it */
	char shm_socket[108];        /* the server's socket for this host's clients (its reply) */
	int same_host;               /* the server's reply named this kernel's boot id */
	struct ip_arena *arena;      /* pinned memory shared with the worker (shmarena.c) */
	int arena_failed;
	void *copy_cache[IP_COPY_CACHE]; /* link.c: chunk-sized payload copies, under q_lock */
	int copy_cached;
	struct rgpu_conn *conn;      /* changed by the receiver only, under send_lock */
	struct rgpu_spin_hint spin;  /* held while a caller waits for its reply (calls.c) */
	uint64_t session;
	uint8_t job_id[IP_JOB_ID_LEN], token[IP_TOKEN_LEN];
	pthread_mutex_t peer_lock;   /* peer_token: the receiver changes it at a resume */
	uint8_t peer_token[IP_TOKEN_LEN]; /* HelloReply.peer_token: another server's worker
				     presents it to send this job data (memory.c); all 0: none */
	char job_hex[2 * IP_JOB_ID_LEN + 1];
	int grace_s;
	pid_t pid;
	int closing;                 /* goodbye sent: a broken link is the end */
	struct rgpu_key key;         /* RGPU_KEY_FILE's secret; len 0: no authentication */
	char tenant[RGPU_TENANT_MAX + 1]; /* RGPU_TENANT, or the key file's name */
	struct rgpu_tls *tls;        /* RGPU_TLS / RGPU_TLS_CA: TLS to the server; NULL: none */
	char tls_name[256];          /* RGPU_TLS_NAME: the name its certificate must carry */

	pthread_mutex_t send_lock;   /* one writer on the link */
	pthread_mutex_t q_lock;      /* the kept list, seq, acked */
	pthread_cond_t q_cond;       /* the sender thread: something to write */
	pthread_cond_t ack_cond;     /* flow control: room below the bound */
	struct ofr *head, *tail, *unsent;
	uint64_t seq;                /* last seq assigned */
	uint64_t acked;              /* the worker executed through this seq */
	uint64_t busy_first;         /* 0, or the first frame a writer is sending: kept till done */
	uint64_t idle_seq, idle_ctx; /* the reply to call idle_seq said context idle_ctx had
				     nothing pending (calls.c): true while seq == idle_seq */
	uint64_t kept_bytes, kept_max;
	int link_up;
	atomic_int link_shm;         /* the link is shared memory (set with conn) */
	unsigned gen;                /* +1 at every break and every resume */
	uint64_t rx_seq;             /* last server seq received (receiver only) */
	uint64_t rx_unacked;         /* bytes received since the server last heard rx_seq */
	atomic_int ack_wanted;       /* a MSG_ACK the receiver left to send_lock's holder (link.c) */
	atomic_uint resumes;

	pthread_mutex_t wait_lock;
	struct waiter *waiters;
	/* held by the receiver while it writes a data chunk into a waiter it found; a caller
	 * that the session's death let go takes it once, so no chunk lands in a call returned */
	pthread_mutex_t deliver_lock;
	_Atomic(ip_enqueue_fn) before_enqueue; /* ip_link_on_enqueue */

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

	/* the state log (statelog.c), under q_lock: recorded in seq order */
	struct st_log *log;
	struct rgpu_journals journals; /* of captures in progress, graphs, execs: hashed only */
	int verify;                  /* RGPU_VERIFY_LOG */
	int log_pending;             /* calls whose records their reply has not settled */
	int log_diverged;            /* no longer compared (an asynchronous error, a mismatch) */
	unsigned log_checked;        /* digests sent */
};

/*
 * The sessions of this process: one per server of RGPU_SERVERS (RGPU_SERVER: one). S is the
 * session the calling thread works for (route.c): a session's own threads always their own,
 * an application thread the one its call was routed to. One letter: it is on nearly every
 * line of these files.
 */
#define IP_MAX_SESSIONS IP_MAX_DEVICES
extern struct ip_session ip_sessions[IP_MAX_SESSIONS];
extern int ip_nsessions;
struct ip_session *ip_sess_cur(void);
#define S (*ip_sess_cur())
/* ip_sess_bind() - the calling thread works for s for good (a session's own thread) */
void ip_sess_bind(struct ip_session *s);
/* ip_sess_enter() - route the calling thread to s until ip_sess_leave (s NULL: by context) */
void ip_sess_enter(struct ip_session *s);

/* ---- shmarena.c ------------------------------------------------------------------------- */

/* ip_arena_opts() - S's arena for a shared-memory offer (made now); fd -1 when there is none */
void ip_arena_opts(struct rgpu_shm_arena *out);

/* ---- link.c ------------------------------------------------------------------------------- */

/* ip_session_die() - end the session for good: log why once, wake every waiter and thread. */
void ip_session_die(CUresult err, const char *why);

/*
 * ip_link_enqueue() - append one frame to the kept list under the next seq. urgent: do not wait
 * for room below the bound. w, when given, is registered under the same seq before the frame
 * can be written. A payload over IP_INLINE_MAX stays the caller's until written or copied by
 * ip_link_keep_copy(). Returns 0 (*seq, when given, is the frame's seq), RGPU_ENOMEM or
 * RGPU_ECLOSED (the session is dead).
 */
int ip_link_enqueue(uint16_t type, const ProtobufCMessage *req, const void *payload,
		    uint64_t plen, int urgent, struct waiter *w, uint64_t *seq);
/* ip_link_enqueue's urgent: never wait for room; the caller writes the frame itself at once */
#define IP_ENQ_URGENT 1
#define IP_ENQ_SELF 2
/* ---- hostmirror.c ------------------------------------------------------------------------- */

/* ip_hm_push() - queue the host's writes to mirrored regions (ip_link_enqueue calls it first). */
void ip_hm_push(void);
/* ip_hm_on_update() - the receiver's MSG_HOST_UPDATE: the device's bytes at addr. Returns 0. */
int ip_hm_on_update(uint64_t addr, const uint8_t *bytes, uint64_t len);

/* ip_link_flush_locked() - write every unwritten frame; caller holds S.send_lock. */
void ip_link_flush_locked(void);
/* ip_link_flush() - ip_link_flush_locked under S.send_lock. */
void ip_link_flush(void);
/*
 * ip_link_spin() - how c's reader polls before it sleeps: 30 us after its last bytes, and while
 * a caller waits for its reply (S.spin, up to rgpu_sync_spin_ns)
 */
void ip_link_spin(struct rgpu_conn *c);
/* ip_link_flush, then wake the receiver if it sleeps, to spin for a reply that is due */
void ip_link_flush_kick(void);
/*
 * ip_link_keep_copy() - the caller is about to reuse a borrowed payload: copy it into frame
 * seq unless the worker executed it already. Caller holds S.send_lock. 0 or RGPU_ENOMEM.
 */
int ip_link_keep_copy(uint64_t seq, const void *payload, uint64_t plen);
/*
 * ip_link_release() - the caller is about to reuse the borrowed payloads of frames first..last:
 * wait (at most 10 ms) for the worker to execute them, then copy what it has not. 0 or
 * RGPU_ENOMEM.
 */
int ip_link_release(uint64_t first, uint64_t last);
/* ip_link_acked() - the worker executed through seq: drop the kept frames it covers. */
void ip_link_acked(uint64_t seq);
/* ip_link_broken() - the link broke: stop writing until a resumed link is installed. */
void ip_link_broken(void);
/*
 * ip_link_send_ack() - tell the worker how far this side received (S.rx_seq): the receiver,
 * without waiting for the link; when a writer holds it, that writer tells the worker when done.
 */
void ip_link_send_ack(void);
/* ip_link_send_unlock() - release send_lock, writing an acknowledgement left pending. */
void ip_link_send_unlock(void);
/* ip_link_executed() - the last seq the worker said it executed (what the kept list starts after) */
uint64_t ip_link_executed(void);
/*
 * ip_link_install() - write on connection c from now on: the worker received through
 * `received` (what follows is written again, by the sender thread: the receiver that calls
 * this goes back to reading) and executed through `ack`.
 */
void ip_link_install(struct rgpu_conn *c, uint64_t received, uint64_t ack);
/* ip_link_sender_main() - the sender thread: writes what is queued, in batches. */
void *ip_link_sender_main(void *arg);

/* ip_waiter_add() - register w (its seq set) for its reply. */
void ip_waiter_add(struct waiter *w);
/* ip_waiter_remove_locked(), ip_waiter_find_locked() - caller holds S.wait_lock. */
void ip_waiter_remove_locked(struct waiter *w);
struct waiter *ip_waiter_find_locked(uint64_t seq);

/* ---- calls.c ------------------------------------------------------------------------------ */

/*
 * ip_call_on_reply() - hand a reply to its waiter; takes *body when one was waiting. A reply's
 * payload (a small copy's bytes) lands in the waiter's destination first. Returns 0, or the
 * transport's error inside that payload.
 */
int ip_call_on_reply(const struct rgpu_frame_hdr *h, uint8_t **body);
/*
 * ip_call_on_data() - read a MSG_DATA payload into its request's destination. Returns 0, or the
 * transport error that broke the link in the middle of the payload.
 */
int ip_call_on_data(const struct rgpu_frame_hdr *h, const uint8_t *body);

/* ---- statelog.c (callers hold S.q_lock, but for ip_statelog_init and ip_statelog_mismatch) ----------- */

/* ip_statelog_init() - the empty log; reads RGPU_VERIFY_LOG. */
void ip_statelog_init(void);
/* ip_statelog_sent() - record a frame just given its seq; w: a call, whose records stay provisional */
void ip_statelog_sent(uint16_t type, const ProtobufCMessage *req, const uint8_t *body, size_t blen,
		 const void *payload, uint64_t plen, struct waiter *w);
/* ip_statelog_settle() - a call's reply (NULL: none will come) settles what it recorded */
void ip_statelog_settle(uint16_t type, const ProtobufCMessage *req, const ProtobufCMessage *rep,
		   struct waiter *w);
/* ip_statelog_wants_digest() - may a frame of this type carry a digest (RGPU_VERIFY_LOG)? */
int ip_statelog_wants_digest(uint16_t type);
/* ip_statelog_digest() - the digest a frame of this type carries now: 1, or 0 for none */
int ip_statelog_digest(uint16_t type, uint8_t out[ST_DIGEST_LEN]);
/* ip_statelog_async_error() - an asynchronous error came: stop comparing */
void ip_statelog_async_error(void);
/* ip_statelog_mismatch() - the worker refused a digest and sent its log: name the difference */
void ip_statelog_mismatch(uint16_t type, const ProtobufCBinaryData *server_log);

/* ---- callbacks.c -------------------------------------------------------------------------- */

/* ip_callback_push() - the server triggered host function id: queue it for the callback thread. */
void ip_callback_push(uint64_t id);
/* ip_callback_main() - the callback thread. */
void *ip_callback_main(void *arg);

#endif
