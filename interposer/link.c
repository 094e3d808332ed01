/*
 * The session's link: the ordered stream of frames to the worker, each kept until the worker
 * says it has executed past it (design.md §4). A request gets the next seq and joins the kept
 * list; the sender thread, or a caller that cannot wait for it, writes what is unwritten in
 * batches; acknowledgements drop what they cover, and past RGPU_UNACKED_MAX a new request waits
 * for them (flow control). A broken connection loses nothing: the frames stay kept, and the
 * resumed connection that session.c installs here gets exactly those the worker never
 * received. A reply's waiter is registered under its request's seq before the request can be
 * written. The session's death lives here too, as the one place that wakes every waiter and
 * thread. This file never reads from the connection and never shakes hands (session.c does).
 */
#define LOG_PREFIX "rgpu: "
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "session_state.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

/*
 * The locks a call's path takes from several threads at once are adaptive: each is held for a
 * few instructions, and sleeping on one would cost a call microseconds.
 */
struct ip_session ip_sessions[IP_MAX_SESSIONS] = {[0 ... IP_MAX_SESSIONS - 1] = {
	.send_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
	.q_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
	.q_cond = PTHREAD_COND_INITIALIZER,
	.ack_cond = PTHREAD_COND_INITIALIZER,
	.wait_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
	.deliver_lock = PTHREAD_MUTEX_INITIALIZER,
	.async_lock = PTHREAD_MUTEX_INITIALIZER,
	.cb_lock = PTHREAD_MUTEX_INITIALIZER,
	.cb_cond = PTHREAD_COND_INITIALIZER,
	.peer_lock = PTHREAD_MUTEX_INITIALIZER,
}};
int ip_nsessions = 1;

static __thread int enq_captured; /* ip_link_set_captured */

void ip_link_set_captured(int on)
{
	enq_captured = on;
}

int ip_link_captured(void)
{
	return enq_captured;
}

void ip_link_on_enqueue(ip_enqueue_fn fn)
{
	for (int i = 0; i < IP_MAX_SESSIONS; i++)
		atomic_store(&ip_sessions[i].before_enqueue, fn);
}

CUresult ip_session_error(void)
{
	return atomic_load(&S.dead) ? S.dead_err : CUDA_SUCCESS;
}

/* ---- death ------------------------------------------------------------------------------ */

void ip_session_die(CUresult err, const char *why)
{
	struct waiter *w, *next;

	if (atomic_exchange(&S.dead, 1))
		return;
	S.dead_err = err;
	if (!S.closing)
		pr_err("session with the GPU server lost: %s; CUDA calls now fail with "
		       "CUDA_ERROR_DEVICE_UNAVAILABLE", why);
	if (S.conn)
		rgpu_conn_shutdown(S.conn);
	pthread_mutex_lock(&S.wait_lock);
	for (w = S.waiters; w; w = next) {
		next = w->next; /* (a caller let go may return at once) */
		/* a synchronous call leaves the list, so no late reply finds it; an asynchronous
		 * copy's stays, its memory kept */
		ip_waiter_complete_locked(w, !w->async);
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

/* ---- who waits for which reply ----------------------------------------------------------- */

void ip_waiter_add(struct waiter *w)
{
	pthread_mutex_lock(&S.wait_lock);
	w->next = S.waiters;
	S.waiters = w;
	w->linked = 1;
	/* a death that walked the list before this waiter was on it set dead first */
	if (atomic_load(&S.dead) && !w->async)
		ip_waiter_complete_locked(w, 1);
	pthread_mutex_unlock(&S.wait_lock);
}

void ip_waiter_remove_locked(struct waiter *w)
{
	struct waiter **pp;
	if (!w->linked)
		return;
	for (pp = &S.waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->linked = 0;
}

void ip_waiter_complete_locked(struct waiter *w, int unlink)
{
	if (unlink)
		ip_waiter_remove_locked(w);
	/*
	 * After the exchange the caller may return and its waiter be gone: only the futex word's
	 * address is used after it, and a wake-up on memory reused meanwhile is a spurious one,
	 * which every futex wait allows.
	 */
	if (atomic_exchange(&w->state, IP_W_DONE) == IP_W_ASLEEP)
		syscall(SYS_futex, (uint32_t *)&w->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

struct waiter *ip_waiter_find_locked(uint64_t seq)
{
	struct waiter *w;
	for (w = S.waiters; w; w = w->next)
		if (w->seq == seq)
			return w;
	return NULL;
}

/* ---- the kept frames ---------------------------------------------------------------------- */

/*
 * Append one frame and give it the next seq. A payload up to IP_INLINE_MAX is copied in; a
 * larger one is referenced (borrow) and must be written, or copied with ip_link_keep_copy(),
 * before the caller's memory may change. Waits for room below the bound unless urgent (callback
 * acknowledgements and goodbye must never wait behind work the server cannot finish without
 * them). w, when given, is registered under the same seq before anything can be written.
 */
int ip_link_enqueue(uint16_t type, const ProtobufCMessage *req, const void *payload,
		    uint64_t plen, int urgent, struct waiter *w, uint64_t *seq)
{
	int borrow = plen > IP_INLINE_MAX;
	int digest = plen == 0 && ip_statelog_wants_digest(type);
	size_t hlen = rgpu_frame_size(req), keep = hlen + (borrow ? 0 : plen);
	struct rgpu_frame_hdr h = {.type = type, .payload_len = plen};
	struct ofr *f = malloc(sizeof(*f) + keep + (digest ? ST_DIGEST_LEN : 0));
	uint8_t dg[ST_DIGEST_LEN];

	if (!f)
		return RGPU_ENOMEM;
	/* host writes to mirrored host memory go first (hostmirror.c) */
	if (type != RGPU_MSG_HOST_WRITE && type != RGPU_MSG_HOST_MIRROR)
		ip_hm_push();
	/* and whatever a listener sends first (managed.c: the CPU's changes to managed memory) */
	ip_enqueue_fn before = atomic_load(&S.before_enqueue);
	if (before)
		before(type, req);
	pthread_mutex_lock(&S.q_lock);
	while (!(urgent & IP_ENQ_URGENT) && S.kept_bytes && S.kept_bytes + hlen + plen > S.kept_max &&
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
	/* RGPU_VERIFY_LOG: a synchronising request carries the log as of this seq */
	if (digest && ip_statelog_digest(type, dg)) {
		payload = dg;
		plen = h.payload_len = ST_DIGEST_LEN;
	}
	f->next = NULL;
	f->seq = h.seq;
	f->len = rgpu_frame_pack_hdr(f->data, &h, req);
	ip_statelog_sent(type, req, f->data + RGPU_FRAME_HDR_LEN, f->len - RGPU_FRAME_HDR_LEN, payload,
		    plen, w);
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
		ip_waiter_add(w);
	}
	if (S.tail)
		S.tail->next = f;
	else
		S.head = f;
	S.tail = f;
	if (!S.unsent) {
		S.unsent = f;
		/* (a caller that writes its frame itself right away does not wake the sender) */
		if (!(urgent & IP_ENQ_SELF))
			pthread_cond_signal(&S.q_cond);
	}
	S.kept_bytes += hlen + plen;
	pthread_mutex_unlock(&S.q_lock);
	/* not f->seq: once unlocked, the frame may be written, acknowledged and freed */
	if (seq)
		*seq = h.seq;
	return 0;
}

/*
 * Copies of large payloads are chunk-sized and short-lived: a few are kept for reuse, since a
 * fresh 4 MiB allocation faults in every page each time. Caller holds q_lock.
 */

static void copy_put_locked(void *p, uint64_t len)
{
	if (p && len == RGPU_COPY_CHUNK && S.copy_cached < IP_COPY_CACHE)
		S.copy_cache[S.copy_cached++] = p;
	else
		free(p);
}

static void *copy_get(uint64_t len)
{
	void *p = NULL;
	if (len == RGPU_COPY_CHUNK) {
		pthread_mutex_lock(&S.q_lock);
		if (S.copy_cached)
			p = S.copy_cache[--S.copy_cached];
		pthread_mutex_unlock(&S.q_lock);
	}
	return p ? p : malloc(len);
}

/*
 * Free the frames the worker executed, except those a writer is handing to sendmsg outside
 * q_lock (from busy_first on): the kernel has copied what was acknowledged, but the writer's
 * iovec still names it until the call returns. Caller holds q_lock.
 */
static void release_locked(void)
{
	struct ofr *f;
	int freed = 0;

	while ((f = S.head) && f->seq <= S.acked && (!S.busy_first || f->seq < S.busy_first)) {
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

/* The worker executed through seq: drop what it covers. Caller holds q_lock. */
static void acked_locked(uint64_t seq)
{
	if (seq <= S.acked)
		return;
	S.acked = seq > S.seq ? S.seq : seq; /* never past what was sent */
	release_locked();
	pthread_cond_broadcast(&S.ack_cond);
}

void ip_link_acked(uint64_t seq)
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

void ip_link_broken(void)
{
	pthread_mutex_lock(&S.q_lock);
	link_broken_locked();
	pthread_mutex_unlock(&S.q_lock);
	/*
	 * The job may be moving: its peer token is the old worker's until the resume's reply
	 * brings the new one, and copies from other servers are relayed till then (memory.c)
	 */
	pthread_mutex_lock(&S.peer_lock);
	memset(S.peer_token, 0, sizeof(S.peer_token));
	pthread_mutex_unlock(&S.peer_lock);
}

/*
 * Write everything not yet written on this link, in order. Caller holds send_lock. A broken
 * link is not an error here: the frames stay kept and go out again after the resume.
 */
void ip_link_flush_locked(void)
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
		S.busy_first = S.unsent->seq;
		pthread_mutex_unlock(&S.q_lock);
		ret = rgpu_conn_sendv(S.conn, iov, n);
		pthread_mutex_lock(&S.q_lock);
		S.busy_first = 0;
		release_locked();
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

void ip_link_flush(void)
{
	pthread_mutex_lock(&S.send_lock);
	ip_link_flush_locked();
	ip_link_send_unlock();
}

void ip_link_flush_kick(void)
{
	pthread_mutex_lock(&S.send_lock);
	ip_link_flush_locked();
	if (S.link_up)
		rgpu_conn_kick(S.conn);
	ip_link_send_unlock();
}

/*
 * The caller is about to reuse the memory a borrowed payload points to: unless the worker has
 * executed frame seq already, keep a copy for a resend. Caller holds send_lock, so no writer
 * is reading the caller's memory meanwhile.
 */
int ip_link_keep_copy(uint64_t seq, const void *payload, uint64_t plen)
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

/* How long ip_link_release() waits for the worker before it copies instead, and polls first. */
#define IP_RELEASE_WAIT_NS 10000000ull
#define IP_RELEASE_SPIN_NS 300000ull

int ip_link_release(uint64_t first, uint64_t last)
{
	struct {
		uint64_t seq;
		const void *p;
		uint64_t len;
	} todo[64];
	uint64_t from = first;
	struct ofr *b;
	struct timespec ts;
	int ret = 0, borrowed;

	if (!last || atomic_load(&S.dead))
		return 0;
	/* small payloads were copied when they were queued: nothing to wait for */
	pthread_mutex_lock(&S.q_lock);
	for (b = S.head; b && (b->seq < first || !b->ext || b->own); b = b->next)
		if (b->seq > last)
			break;
	borrowed = b && b->seq >= first && b->seq <= last && b->ext && !b->own;
	pthread_mutex_unlock(&S.q_lock);
	if (!borrowed)
		return 0;
	/*
	 * The worker usually executes a copy chunk about a round trip after its last byte left:
	 * waiting for that costs less than copying megabytes, and it is what a pageable copy costs
	 * natively too.
	 */
	/* the acknowledgement usually comes within a fraction of a millisecond: poll first */
	uint64_t until = rgpu_now_ns() + rgpu_spin_budget_ns(IP_RELEASE_SPIN_NS);
	while (__atomic_load_n(&S.acked, __ATOMIC_ACQUIRE) < last && rgpu_now_ns() < until &&
	       !atomic_load(&S.dead))
		__builtin_ia32_pause();
	rgpu_deadline(&ts, IP_RELEASE_WAIT_NS);
	pthread_mutex_lock(&S.q_lock);
	while (S.acked < last && S.link_up && !atomic_load(&S.dead))
		if (pthread_cond_timedwait(&S.ack_cond, &S.q_lock, &ts))
			break;
	pthread_mutex_unlock(&S.q_lock);
	/*
	 * What is still not executed is copied, with no writer reading the caller's memory: every
	 * frame of the range past the worker's acknowledgement, also when it executed the first
	 * ones (frames it executed are no longer in the list, and ip_link_keep_copy checks again).
	 */
	pthread_mutex_lock(&S.send_lock);
	while (!ret && from <= last && last > __atomic_load_n(&S.acked, __ATOMIC_ACQUIRE)) {
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
			ret = ip_link_keep_copy(todo[i].seq, todo[i].p, todo[i].len);
	}
	ip_link_send_unlock();
	return ret;
}

/*
 * While the program is still posting (a loop of launches), let a few more frames gather before
 * writing: over shared memory a write costs so little that the sender would otherwise take
 * the queue's lock for every frame, from under the posting thread. A frame posted alone waits
 * about a microsecond; a caller that waits for a reply writes its frames itself.
 */
#define IP_GATHER_FRAMES 64
#define IP_GATHER_NS 20000

static void gather(void)
{
	uint64_t start = rgpu_now_ns(), seen = __atomic_load_n(&S.seq, __ATOMIC_RELAXED);
	uint64_t first = seen;

	for (;;) {
		uint64_t t = rgpu_now_ns() + 1000, now;
		while ((now = rgpu_now_ns()) < t)
			__builtin_ia32_pause();
		uint64_t s2 = __atomic_load_n(&S.seq, __ATOMIC_RELAXED);
		if (s2 == seen || s2 - first >= IP_GATHER_FRAMES || now - start >= IP_GATHER_NS)
			return;
		seen = s2;
	}
}

void *ip_link_sender_main(void *arg)
{
	uint64_t spin = rgpu_spin_budget_ns(30000);

	ip_sess_bind(arg);
	pthread_mutex_lock(&S.q_lock);
	for (;;) {
		if (!S.unsent && spin) {
			/* a burst of posts (launches) usually goes on: look again before sleeping,
			 * which spares each post the wake-up of this thread */
			uint64_t until = rgpu_now_ns() + spin;
			pthread_mutex_unlock(&S.q_lock);
			while (!__atomic_load_n(&S.unsent, __ATOMIC_RELAXED) && rgpu_now_ns() < until &&
			       !atomic_load(&S.dead))
				__builtin_ia32_pause();
			pthread_mutex_lock(&S.q_lock);
		}
		while ((!S.unsent || !S.link_up) && !atomic_load(&S.dead))
			pthread_cond_wait(&S.q_cond, &S.q_lock);
		if (atomic_load(&S.dead))
			break;
		pthread_mutex_unlock(&S.q_lock);
		if (spin && atomic_load(&S.link_shm))
			gather();
		ip_link_flush();
		pthread_mutex_lock(&S.q_lock);
	}
	pthread_mutex_unlock(&S.q_lock);
	return NULL;
}

/*
 * Write the MSG_ACK the receiver asked for, when no one holds the link. Never waits for
 * send_lock: its holder may be a writer waiting for the worker to read, while the worker's
 * reader waits for the worker's own send lock (it takes every frame's ack under it), held by a
 * worker thread that waits for this side's receiver to read; the receiver must go on reading.
 * Whoever releases send_lock writes an acknowledgement left pending (ip_link_send_unlock).
 */
static void ack_pending(void)
{
	while (atomic_load(&S.ack_wanted) && !pthread_mutex_trylock(&S.send_lock)) {
		if (atomic_exchange(&S.ack_wanted, 0)) {
			struct rgpu_frame_hdr h = {.type = RGPU_MSG_ACK};
			h.session = S.session;
			h.ack = __atomic_load_n(&S.rx_seq, __ATOMIC_RELAXED);
			if (S.link_up && rgpu_frame_send_hdr(S.conn, &h, NULL, NULL)) {
				pthread_mutex_lock(&S.q_lock);
				link_broken_locked();
				pthread_mutex_unlock(&S.q_lock);
			}
		}
		pthread_mutex_unlock(&S.send_lock);
	}
}

/* Tell the worker what arrived, so it can drop what it kept (now, or after the writer). */
void ip_link_send_ack(void)
{
	S.rx_unacked = 0;
	atomic_store(&S.ack_wanted, 1);
	ack_pending();
}

void ip_link_send_unlock(void)
{
	pthread_mutex_unlock(&S.send_lock);
	if (atomic_load(&S.ack_wanted))
		ack_pending();
}

void ip_link_spin(struct rgpu_conn *c)
{
	rgpu_conn_poll_as_link(c, &S.spin);
}

/* Install a resumed link: the worker received through `received` and executed through `ack`. */
void ip_link_install(struct rgpu_conn *c, uint64_t received, uint64_t ack)
{
	struct rgpu_conn *old;
	struct ofr *f;
	uint64_t n = 0;

	pthread_mutex_lock(&S.send_lock);
	pthread_mutex_lock(&S.q_lock);
	old = S.conn;
	S.conn = c;
	atomic_store(&S.link_shm, rgpu_conn_is_shm(c));
	acked_locked(ack);
	for (f = S.head; f && f->seq <= received; f = f->next)
		;
	S.unsent = f;
	for (; f; f = f->next)
		n++;
	S.link_up = 1;
	S.gen++;
	/*
	 * The frames to send again are written by the sender thread, not here: this is the
	 * receiver, and the worker writes what it sends again from its reader at the same time.
	 * Had both sides' readers written more than the sockets hold, each would wait for the
	 * other to read (the resume deadlocked under cut.duplex).
	 */
	pthread_cond_broadcast(&S.q_cond);
	pthread_mutex_unlock(&S.q_lock);
	rgpu_conn_close(old);
	ip_link_spin(c);
	S.rx_unacked = 0;
	ip_link_send_unlock();
	pr_debug("job %s: %llu frame(s) sent again", S.job_hex, (unsigned long long)n);
}

uint64_t ip_link_executed(void)
{
	uint64_t v;

	pthread_mutex_lock(&S.q_lock);
	v = S.acked;
	pthread_mutex_unlock(&S.q_lock);
	return v;
}
