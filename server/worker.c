/*
 * The worker: one process per job (design.md §5).
 *
 * It owns the job's CUDA state: it loads the driver, reserves the device address window at its
 * fixed base (and refuses to serve if the driver places it elsewhere), answers the handshake,
 * then runs three threads: the reader takes frames off the client's link and checks them, the
 * executor (this process's main thread) runs them in order, and the control thread talks to
 * the supervisor. Host-function triggers are acknowledged by the reader directly, so an
 * executor blocked in a synchronize never deadlocks against a client callback.
 *
 * A job is not its connection. When the link breaks the job keeps all its state for the grace
 * period; a client that reconnects presents the job id and its resume token, the supervisor
 * hands the new connection to this worker, and both sides resend what the other has not
 * received (link.c). The job ends when the client says goodbye, when the grace period passes
 * without it, or on anything malformed; the worker then exits and the operating system and the
 * driver reclaim everything. It must never trust a length, an id or an address from the
 * client.
 */
#define LOG_PREFIX "worker: "
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/trace.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"

#define ROUTE_TIMEOUT_MS 5000
#define INFO_EVERY_MS 500
/* the executor tells the client how far it got at least this often while busy */
#define ACK_EVERY_FRAMES 256
#define ACK_EVERY_BYTES (1u << 20)
#define ACK_LARGE_PAYLOAD (64u << 10) /* the interposer copies payloads up to this when queued */
#define ACK_IDLE_NS 1000000ull

/* ---- the reader ------------------------------------------------------------------------- */

/* how the client's link c is polled: 30 us after its last bytes, and while the executor runs
 * frames (w->spin, up to rgpu_sync_spin_ns) */
static void link_spin(struct srv_worker *w, struct rgpu_conn *c)
{
	rgpu_conn_poll_as_link(c, &w->spin);
}

/*
 * What a queued frame holds, as the bound counts it (and the client counts what it keeps): of
 * this process's memory only, so a payload read in place in the client's shared memory is not
 * counted.
 */
static uint64_t frame_bytes(const struct srv_frame *f)
{
	return RGPU_FRAME_HDR_LEN + f->hdr.body_len + (f->pref.map ? 0 : f->hdr.payload_len);
}

static void frames_collect(struct srv_worker *w);

/* frames queued for the executor and not yet run (q_out first: it never passes q_in) */
static uint64_t srv_queued(struct srv_worker *w)
{
	uint64_t out = atomic_load(&w->q_out);
	return atomic_load(&w->q_in) - out;
}

static void queue_push(struct srv_worker *w, struct srv_frame *f)
{
	pthread_mutex_lock(&w->q_lock);
	if (f) {
		atomic_store_explicit(&w->q_in_bytes,
				      atomic_load_explicit(&w->q_in_bytes, memory_order_relaxed) +
					      frame_bytes(f),
				      memory_order_relaxed);
		f->next = NULL;
		if (w->q_tail)
			w->q_tail->next = f;
		else
			w->q_head = f;
		w->q_tail = f;
		atomic_fetch_add(&w->q_in, 1);
	} else {
		w->q_closed = 1;
	}
	/* an executor that spins sees q_in; only one asleep needs waking */
	if (w->q_sleeping || !f)
		pthread_cond_broadcast(&w->q_cond);
	pthread_mutex_unlock(&w->q_lock);
}

/*
 * The executor spins briefly before sleeping: a frame usually follows the previous one within
 * microseconds, and a futex wake-up would add more than that to every synchronous call. Before
 * it sleeps it tells the client how far it got (at most every ACK_IDLE_NS), so the client can
 * drop the frames it kept. It takes every frame queued at once and runs them from x_head.
 */
static struct srv_frame *queue_pop(struct srv_worker *w)
{
	struct srv_frame *f = w->x_head;
	uint64_t until;

	if (f)
		goto got;
	until = rgpu_now_ns() + rgpu_spin_budget_ns(50000);
	while (srv_queued(w) == 0 && rgpu_now_ns() < until && !srv_hold_wanted(w))
		__builtin_ia32_pause();
	pthread_mutex_lock(&w->q_lock);
	while (!w->q_head && !w->q_closed && !srv_hold_wanted(w)) {
		if (atomic_load(&w->executed) != w->ack_told) {
			uint64_t due = w->ack_ns + ACK_IDLE_NS, now = rgpu_now_ns();
			if (now >= due) {
				pthread_mutex_unlock(&w->q_lock);
				srv_link_ack(w);
				w->ack_ns = rgpu_now_ns();
				pthread_mutex_lock(&w->q_lock);
				continue;
			}
			struct timespec ts;
			rgpu_deadline(&ts, due - now);
			w->q_sleeping = 1;
			pthread_cond_timedwait(&w->q_cond, &w->q_lock, &ts);
			w->q_sleeping = 0;
			continue;
		}
		if (atomic_load(&w->retired)) {
			/* idle: the frames run last are freed here, not when the next one comes */
			pthread_mutex_unlock(&w->q_lock);
			frames_collect(w);
			pthread_mutex_lock(&w->q_lock);
			continue;
		}
		w->q_sleeping = 1;
		pthread_cond_wait(&w->q_cond, &w->q_lock);
		w->q_sleeping = 0;
	}
	f = w->q_head;
	w->q_head = w->q_tail = NULL;
	pthread_mutex_unlock(&w->q_lock);
	if (!f)
		return NULL;
got:
	w->x_head = f->next;
	/*
	 * The reader wrote the frames: their lines are in its cache. Fetch the next frame's
	 * header now, and what the one after this one points to, while this one runs.
	 */
	if (f->next) {
		struct srv_frame *n = f->next;
		__builtin_prefetch(n->next);
		__builtin_prefetch(n->decoded);
		__builtin_prefetch(n->payload);
		__builtin_prefetch(n->body);
	}
	/* (this thread alone writes both: no read-modify-write needed) */
	atomic_store_explicit(&w->q_out, atomic_load_explicit(&w->q_out, memory_order_relaxed) + 1,
			      memory_order_release);
	atomic_store(&w->q_out_bytes,
		     atomic_load_explicit(&w->q_out_bytes, memory_order_relaxed) + frame_bytes(f));
	if (atomic_load(&w->q_room_wait)) {
		pthread_mutex_lock(&w->q_lock);
		pthread_cond_broadcast(&w->q_cond);
		pthread_mutex_unlock(&w->q_lock);
	}
	return f;
}

/*
 * Backpressure: while more than --max-queued bytes wait for the executor, the reader reads
 * nothing, so a client that blocks its executor and keeps sending fills TCP, not this process
 * (at most the bound and one frame). A client within the bound it was told never waits here.
 * Returns 0 when there is room, or RGPU_ECLOSED when the client hung up meanwhile: the link is
 * lost, as if the reader had read the end.
 */
static int queue_wait_room(struct srv_worker *w, struct rgpu_conn *c)
{
	int ret = 0;

	uint64_t in = atomic_load_explicit(&w->q_in_bytes, memory_order_relaxed);

	/* the executor's count only grows: an old look at it is enough while under the bound */
	if (in - w->q_out_seen <= w->limits.queued)
		return 0;
	w->q_out_seen = atomic_load(&w->q_out_bytes);
	if (in - w->q_out_seen <= w->limits.queued)
		return 0;
	pthread_mutex_lock(&w->q_lock);
	atomic_store(&w->q_room_wait, 1); /* before the test: the executor's count then wakes */
	while (in - (w->q_out_seen = atomic_load(&w->q_out_bytes)) > w->limits.queued &&
	       !atomic_load(&w->dead)) {
		struct timespec ts;
		if (!w->q_warned) {
			w->q_warned = 1;
			pr_warn("job %s: %llu bytes queued ahead of the executor, over %s %llu: "
				"reading from %s paused until it catches up",
				w->job_hex, (unsigned long long)(in - w->q_out_seen),
				w->limits.set & SRV_LIM_QUEUED ? "the tenant's queued limit (rgpud.conf)"
							       : "rgpud --max-queued",
				(unsigned long long)w->limits.queued, w->peer);
		}
		if (rgpu_conn_hung_up(c)) {
			ret = RGPU_ECLOSED;
			break;
		}
		rgpu_deadline(&ts, 100000000ull);
		pthread_cond_timedwait(&w->q_cond, &w->q_lock, &ts);
	}
	atomic_store(&w->q_room_wait, 0);
	pthread_mutex_unlock(&w->q_lock);
	return ret;
}

static void frame_free(struct srv_worker *w, struct srv_frame *f)
{
	free(f->body);
	if (f->decoded)
		protobuf_c_message_free_unpacked(f->decoded, NULL);
	if (f->pref.map)
		rgpu_payload_release(&f->pref); /* where the client put it: not ours to free */
	else if (f->payload_staged)
		srv_staging_put(w->staging, f->payload);
	else
		free(f->payload);
	free(f);
}

/* what the executor hands back and counts at most before freeing it itself */
#define SRV_RETIRED_MAX (16ll << 20)

/* the memory a frame that ran still holds (its payload, if it was not lent) */
static uint64_t retired_size(const struct srv_frame *f)
{
	return f->hdr.body_len + (f->payload ? f->hdr.payload_len : 0);
}

/* The executor's frames run so far go to the reader (frames_collect). */
static void frames_hand_back(struct srv_worker *w)
{
	struct srv_frame *last = w->x_retired;

	if (!last)
		return;
	while (last->next)
		last = last->next;
	last->next = atomic_load(&w->retired);
	while (!atomic_compare_exchange_weak(&w->retired, &last->next, w->x_retired))
		;
	w->x_retired = NULL;
	w->x_nretired = 0;
	/* a reader blocked on the link frees nothing: past a bound, the executor does */
	if (atomic_fetch_add(&w->retired_bytes, (int64_t)w->x_retired_bytes) +
		    (int64_t)w->x_retired_bytes >
	    SRV_RETIRED_MAX)
		frames_collect(w);
	w->x_retired_bytes = 0;
}

/*
 * The executor is done with f: what the client's shared memory or the staging pool lends goes
 * back now (the client or the next copy may be waiting for it); the rest goes to the reader,
 * which frees it before it reads its next frame (frames_collect).
 */
static void frame_retire(struct srv_worker *w, struct srv_frame *f)
{
	if (f->pref.map) {
		rgpu_payload_release(&f->pref);
		memset(&f->pref, 0, sizeof(f->pref));
		f->payload = NULL;
	} else if (f->payload_staged) {
		srv_staging_put(w->staging, f->payload);
		f->payload_staged = 0;
		f->payload = NULL;
	}
	f->next = w->x_retired;
	w->x_retired = f;
	w->x_retired_bytes += retired_size(f);
	/* a batch at a time (the list's head is a line the reader reads at every frame), of at
	 * most 64 frames and 1 MiB of bodies and payloads, and whatever ran when the executor
	 * runs dry */
	if (++w->x_nretired >= 64 || w->x_retired_bytes >= (1u << 20) || !w->x_head)
		frames_hand_back(w);
}

/* Free the frames the executor ran (frame_retire): the reader, and the executor going idle. */
static void frames_collect(struct srv_worker *w)
{
	struct srv_frame *f = atomic_load_explicit(&w->retired, memory_order_relaxed)
				      ? atomic_exchange(&w->retired, NULL)
				      : NULL;
	int64_t freed = 0;
	while (f) {
		struct srv_frame *next = f->next;
		freed += (int64_t)retired_size(f);
		frame_free(w, f);
		f = next;
	}
	if (freed)
		atomic_fetch_sub(&w->retired_bytes, freed);
}

static void wake_all(struct srv_worker *w)
{
	pthread_mutex_lock(&w->cb_lock);
	pthread_cond_broadcast(&w->cb_cond);
	pthread_mutex_unlock(&w->cb_lock);
	pthread_mutex_lock(&w->link_lock);
	pthread_cond_broadcast(&w->link_cond);
	pthread_mutex_unlock(&w->link_lock);
}

static void send_info(struct srv_worker *w);

/* Constant time: a token must not leak byte by byte through timing. */
static int token_eq(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;
	for (int i = 0; i < SRV_TOKEN_LEN; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

static int new_token(struct srv_worker *w)
{
	memcpy(w->token_prev, w->token, SRV_TOKEN_LEN);
	return getrandom(w->token, SRV_TOKEN_LEN, 0) == SRV_TOKEN_LEN ? 0 : RGPU_ESYS;
}

/* A HelloReply accepting a link to this job: what a resume's and a peer link's share. */
static void reply_ok(struct srv_worker *w, Rgpu__HelloReply *rep)
{
	rep->result = CUDA_SUCCESS;
	rep->protocol_version = RGPU_PROTO_VERSION;
	rep->capabilities = w->caps;
	rep->session_id = w->session;
	rep->job_id.data = w->job_id;
	rep->job_id.len = SRV_JOB_ID_LEN;
}

/* May this link move to shared memory (the client asked, on this host's socket)? */
static int shm_wanted(struct rgpu_conn *c, uint64_t client_caps, int want)
{
	return want && (client_caps & RGPU_CAP_SHM) && srv_shm_socket[0] && rgpu_conn_is_unix(c);
}

/* A reply's shared-memory fields: where local clients connect, and whether this link moves. */
static void shm_reply(Rgpu__HelloReply *rep, int moves)
{
	rep->shm_socket = srv_shm_socket;
	rep->host_id = (char *)rgpu_host_id();
	rep->shm = moves;
}

/*
 * Lanes for the link c a client's hello opens (Hello.link_id, lanes): a plain TCP link of a
 * client with capability LANES. Sets w->link_id and w->lanes_want; returns what the reply says.
 */
static uint32_t lanes_for(struct srv_worker *w, struct rgpu_conn *c, const Rgpu__Hello *hello)
{
	int n = (int)MIN(hello->lanes, (uint32_t)RGPU_MAX_LANES);
	if (!(hello->capabilities & RGPU_CAP_LANES) || hello->link_id.len != sizeof(w->link_id) ||
	    n < 2 || rgpu_conn_is_tls(c) || rgpu_conn_is_unix(c))
		n = 0;
	pthread_mutex_lock(&w->lanes_lock);
	if (n)
		memcpy(w->link_id, hello->link_id.data, sizeof(w->link_id));
	else
		memset(w->link_id, 0, sizeof(w->link_id));
	w->lanes_want = n;
	w->lanes_conn = n ? c : NULL;
	pthread_mutex_unlock(&w->lanes_lock);
	return (uint32_t)n;
}

/* Close a link of the job's client: its lanes can no longer attach to it. */
static void link_close(struct srv_worker *w, struct rgpu_conn *c)
{
	pthread_mutex_lock(&w->lanes_lock);
	if (w->lanes_conn == c)
		w->lanes_conn = NULL;
	pthread_mutex_unlock(&w->lanes_lock);
	rgpu_conn_close(c);
}

/* After a reply that said the link moves: take the client's shared memory. 0 or an error. */
static int shm_accept(struct srv_worker *w, struct rgpu_conn *c)
{
	struct rgpu_shm_accepted acc;
	char why[256];
	int ret = rgpu_shm_accept(c, w->cfg->hello_timeout_s * 1000, &acc, why, sizeof(why));
	if (ret) {
		pr_warn("job %s: no shared memory with %s: %s", w->job_hex, rgpu_conn_peer(c), why);
		return ret;
	}
	srv_shm_attach(w, &acc);
	pr_info("job %s: the link to %s moved to shared memory", w->job_hex, rgpu_conn_peer(c));
	return 0;
}

/*
 * Answer a resume on c: the new token and how far this worker's reader got, so the client
 * resends exactly what never arrived; then everything the client has not received goes out
 * again. Returns 0 when the link is up again.
 */
static int resume_link(struct srv_worker *w, struct rgpu_conn *c, const Rgpu__Hello *hello,
		       uint8_t *proof)
{
	Rgpu__HelloReply rep = RGPU__HELLO_REPLY__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_HELLO, .flags = RGPU_FRAME_REPLY};
	int ret;

	reply_ok(w, &rep);
	rep.resume_token.data = w->token;
	rep.resume_token.len = SRV_TOKEN_LEN;
	rep.peer_token.data = w->peer_token;
	rep.peer_token.len = SRV_TOKEN_LEN;
	rep.received = atomic_load(&w->rx_seq);
	rep.resumed = 1;
	rep.resume_grace_s = (uint32_t)w->cfg->resume_grace_s;
	if (proof) {
		rep.server_proof.data = proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
	h.session = w->session;
	h.ack = atomic_load(&w->executed);
	shm_reply(&rep, shm_wanted(c, hello->capabilities, hello->want_shm));
	rep.lanes = rep.shm ? 0 : lanes_for(w, c, hello);
	rep.staging_size = srv_staging_size(w->staging);
	ret = rgpu_frame_send_hdr(c, &h, &rep.base, NULL);
	if (ret)
		return ret;
	if (rep.shm && (ret = shm_accept(w, c)))
		return ret;
	link_spin(w, c); /* before the link is published: the executor reads its polling too */
	return srv_link_up(w, c, hello->received);
}

/*
 * The link broke (or a resume took it over): keep the job for the grace period and wait for
 * the client. Returns the new connection, or NULL when the job must end.
 */
static struct rgpu_conn *await_resume(struct srv_worker *w, const char *why, unsigned *gen)
{
	uint64_t t0 = rgpu_now_ns(), deadline = t0 + (uint64_t)w->cfg->resume_grace_s * 1000000000ull;
	int announced = 0;

	srv_link_down(w);
	for (;;) {
		struct rgpu_conn *c;
		Rgpu__Hello *hello;

		pthread_mutex_lock(&w->link_lock);
		while (!w->pending && !atomic_load(&w->dead) && rgpu_now_ns() < deadline) {
			if (!announced) {
				announced = 1;
				atomic_store(&w->state, SRV_JOB_DISCONNECTED);
				pthread_mutex_unlock(&w->link_lock);
				if (w->cfg->resume_grace_s > 0)
					pr_info("job %s: link to %s lost (%s); keeping the job for %d s",
						w->job_hex, w->peer, why, w->cfg->resume_grace_s);
				send_info(w);
				pthread_mutex_lock(&w->link_lock);
				continue;
			}
			struct timespec ts;
			uint64_t left = deadline - rgpu_now_ns();
			if ((int64_t)left <= 0)
				break;
			rgpu_deadline(&ts, MIN(left, 100000000ull));
			pthread_cond_timedwait(&w->link_cond, &w->link_lock, &ts);
		}
		uint8_t proof[RGPU_AUTH_MAC_LEN];
		int has_proof = w->pending_has_proof;
		memcpy(proof, w->pending_proof, RGPU_AUTH_MAC_LEN);
		c = w->pending;
		hello = w->pending_hello;
		*gen = w->pending_gen;
		w->pending = NULL;
		w->pending_hello = NULL;
		pthread_mutex_unlock(&w->link_lock);
		if (!c) {
			if (!atomic_load(&w->dead) && w->cfg->resume_grace_s > 0)
				pr_warn("job %s: the client did not come back within %d s; freeing the "
					"job", w->job_hex, w->cfg->resume_grace_s);
			else if (!atomic_load(&w->dead))
				pr_info("job %s: link to %s lost (%s); no grace period: freeing the job",
					w->job_hex, w->peer, why);
			return NULL;
		}
		int ret = resume_link(w, c, hello, has_proof ? proof : NULL);
		rgpu__hello__free_unpacked(hello, NULL);
		if (ret == 0 && rgpu_conn_is_shm(c)) {
			/* not a resume: a client on this host moving its link (no job survives the
			 * loss of a shared-memory link, so none comes back on one) */
			atomic_store(&w->state, SRV_JOB_RUNNING);
			send_info(w);
			return c;
		}
		if (ret == 0) {
			atomic_fetch_add(&w->resumes, 1);
			atomic_store(&w->state, SRV_JOB_RUNNING);
			pr_info("job %s: resumed by %s after %.3f s", w->job_hex, w->peer,
				(double)(rgpu_now_ns() - t0) / 1e9);
			send_info(w);
			return c;
		}
		pr_info("job %s: a resume from %s broke at once (%s)", w->job_hex, rgpu_conn_peer(c),
			rgpu_strerror(ret));
		srv_link_down(w);
		link_close(w, c);
	}
}

/*
 * A frame that did not arrive whole within --frame-timeout of its first byte: a sender that
 * slow holds the worker for nothing (or the network stalled). Logged as the protocol error it
 * is; the link is closed and the job waits for a resume like after any break. Returns the
 * reason for the link's loss.
 */
static const char *slow_frame(struct srv_worker *w)
{
	pr_warn("protocol error from %s: a frame did not arrive whole within %d s of its first "
		"byte (rgpud --frame-timeout); closing the link",
		w->peer, w->cfg->frame_timeout_s);
	return "a frame too slow";
}

/* A connection of this job's client: the job protocol, the frame timeout. */
static void conn_init(struct srv_worker *w, struct rgpu_conn *c)
{
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	rgpu_conn_set_frame_timeout(c, w->cfg->frame_timeout_s * 1000);
}

/*
 * --idle-timeout (or its tenant's idle_timeout): a session is idle when no frame came from its
 * client and nothing ran for it for that long. Something runs while the executor runs a frame (a synchronize waiting for a
 * long kernel included), frames wait for it, or a host function waits for the client.
 */
static int busy(struct srv_worker *w)
{
	return atomic_load(&w->executing) || srv_queued(w) || atomic_load(&w->cb_waiting);
}

/* How long the reader may wait for a frame to begin: until the session would be idle. */
static int idle_wait_ms(struct srv_worker *w)
{
	if (w->limits.idle_timeout_s <= 0)
		return -1;
	if (busy(w))
		return w->limits.idle_timeout_s * 1000; /* look again then */
	return rgpu_ms_until(MAX(atomic_load(&w->active_ns), atomic_load(&w->ex_active_ns)) +
			     (uint64_t)w->limits.idle_timeout_s * 1000000000ull);
}

/*
 * A frame whose payload its transport could not give (a reference outside the shared memory,
 * an impossible index, a lane out of step): a protocol error that ends the job.
 */
static void payload_refused(struct srv_worker *w, unsigned type)
{
	srv_protocol_error(w, RGPU_EPROTO,
			   "%s with a payload that does not match its frame (outside the shared "
			   "memory, or a lane out of step)",
			   rgpu_msg_name(type));
}

/* Frames the reader consumes itself rather than queueing for the executor. */
static int reader_type(unsigned type)
{
	return type == RGPU_MSG_CALLBACK_DONE || type == RGPU_MSG_HOST_MIRROR ||
	       type == RGPU_MSG_HOST_WRITE;
}

static void *reader_main(void *arg)
{
	struct srv_worker *w = arg;
	struct rgpu_conn *c = w->conn;
	int spoke = 0; /* the client sent something on this link: its previous token is spent */
	unsigned link_gen = atomic_load(&w->token_gen); /* the token this link was opened under */

	for (;;) {
		struct srv_frame *f;
		const char *why = NULL;
		int ret;

		frames_collect(w);
		f = calloc(1, sizeof(*f));
		if (!f)
			break;
		if (!c) {
			/*
			 * A resume (the control thread) took the first link down before this
			 * thread looked at it, or the job was restored from a checkpoint and has
			 * no link yet: wait for the client's connection, as after any break.
			 */
			free(f);
			why = w->restored ? "restored: waiting for the client" : "taken over by a resume";
			goto lost;
		}
		ret = queue_wait_room(w, c);
		if (!ret)
			ret = rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &f->hdr, &f->body,
						     idle_wait_ms(w));
		if (ret == RGPU_ETIMEDOUT && w->limits.idle_timeout_s > 0) {
			/* no frame began within the idle timeout's wait (the only timeout here) */
			free(f);
			if (busy(w) || idle_wait_ms(w) > 0)
				continue;
			char msg[200];
			snprintf(msg, sizeof(msg), "idle for %d s (no frame, nothing running; %s)",
				 w->limits.idle_timeout_s,
				 w->limits.set & SRV_LIM_IDLE ? "the tenant's idle_timeout in rgpud.conf"
							      : "rgpud --idle-timeout");
			pr_warn("job %s of %s: %s: ending the session and freeing the job",
				w->job_hex, w->peer, msg);
			srv_end_session(w, RGPU_ETIMEDOUT, msg);
			break;
		}
		if (ret == 0) {
			atomic_store(&w->active_ns, rgpu_now_ns());
			rgpu_trace(f->hdr.seq, RGPU_TR_READ);
		}
		if (ret == RGPU_ECLOSED || ret == RGPU_EIO || ret == RGPU_ETRUNC ||
		    ret == RGPU_ETIMEDOUT) {
			why = ret == RGPU_EIO ? strerror(rgpu_conn_errno(c)) : rgpu_strerror(ret);
		} else if (ret == RGPU_EDEADLINE) {
			why = slow_frame(w);
		} else if (ret) {
			unsigned version = f->hdr.version;
			if (ret == RGPU_EVERSION)
				srv_protocol_error(w, ret, "protocol version %u, this server speaks %u",
						   version, RGPU_PROTO_VERSION);
			else
				srv_protocol_error(w, ret, "bad frame header");
			free(f);
			break;
		} else if (f->hdr.session != w->session) {
			srv_protocol_error(w, RGPU_EPROTO, "frame for session %llu on session %llu",
					   (unsigned long long)f->hdr.session,
					   (unsigned long long)w->session);
			free(f->body);
			free(f);
			break;
		} else if (f->hdr.seq == 0) {
			/* unsequenced: an acknowledgement, nothing to execute */
			if (f->hdr.type != RGPU_MSG_ACK) {
				srv_protocol_error(w, RGPU_EPROTO, "unsequenced %s",
						   rgpu_msg_name(f->hdr.type));
				free(f->body);
				free(f);
				break;
			}
			srv_link_acked(w, f->hdr.ack);
			free(f->body);
			free(f);
			continue;
		} else if (f->hdr.type == RGPU_MSG_ACK ||
			   f->hdr.seq > atomic_load(&w->rx_seq) + 1) {
			srv_protocol_error(w, RGPU_EPROTO, "%s with seq %llu after %llu",
					   rgpu_msg_name(f->hdr.type),
					   (unsigned long long)f->hdr.seq,
					   (unsigned long long)atomic_load(&w->rx_seq));
			free(f->body);
			free(f);
			break;
		}
		if (why) {
			free(f);
			goto lost;
		}
		/*
		 * Only a frame on the link that the newest token opened proves the client has that
		 * token; a frame still arriving on an older link must not spend the previous one.
		 */
		if (!spoke && link_gen == atomic_load(&w->token_gen)) {
			spoke = 1;
			atomic_store(&w->token_prev_ok, 0);
		}
		/*
		 * What the frame acknowledges is freed once it is handled: a frame for the
		 * executor is queued first, so that this runs beside it.
		 */
		uint64_t acked = f->hdr.ack;
		if (f->hdr.seq <= atomic_load(&w->rx_seq) ||
		    (f->hdr.seq <= w->reader_skip_until && reader_type(f->hdr.type))) {
			/*
			 * Resent by a client that did not know this arrived: drop it. In a restored
			 * job, also the frames this thread consumes itself that the checkpoint's
			 * reader had already applied (the client resends everything after the last
			 * frame executed).
			 */
			srv_link_acked(w, acked);
			if (f->hdr.seq > atomic_load(&w->rx_seq))
				atomic_fetch_add(&w->rx_seq, 1);
			ret = rgpu_conn_discard(c, f->hdr.payload_len);
			unsigned type = f->hdr.type;
			free(f->body);
			free(f);
			if (ret == 0)
				continue;
			if (ret == RGPU_EPROTO) {
				payload_refused(w, type);
				break;
			}
			why = ret == RGPU_EDEADLINE ? slow_frame(w) : rgpu_strerror(ret);
			goto lost;
		}
		if (f->hdr.type == RGPU_MSG_CALLBACK_DONE) {
			srv_link_acked(w, acked);
			Rgpu__Callback *cb =
				RGPU_PB_UNPACK(rgpu__callback, f->hdr.body_len, f->body);
			free(f->body);
			free(f);
			if (!cb) {
				srv_protocol_error(w, RGPU_EPROTO, "undecodable MSG_CALLBACK_DONE");
				break;
			}
			atomic_fetch_add(&w->rx_seq, 1);
			ret = srv_callback_done(w, cb->callback);
			rgpu__callback__free_unpacked(cb, NULL);
			if (ret) {
				srv_protocol_error(w, ret, "MSG_CALLBACK_DONE for a callback it was "
							   "not asked to run");
				break;
			}
			continue;
		}
		if (f->hdr.payload_len && f->hdr.type == RGPU_MSG_MEMCPY_HTOD &&
		    (ret = rgpu_conn_take_payload(c, &f->hdr, &f->pref)) != RGPU_EUNSUPPORTED) {
			/* shared memory: a copy's bytes are used where the client put them */
			if (ret) {
				frame_free(w, f);
				srv_protocol_error(w, ret, "a copy's payload outside the shared memory, or a lane out of step");
				break;
			}
			f->payload = f->pref.p;
		} else if (f->hdr.payload_len) {
			/* bulk copy chunks land in pinned memory; the rest in plain memory */
			if (f->hdr.type == RGPU_MSG_MEMCPY_HTOD &&
			    f->hdr.payload_len > 65536) {
				f->payload = srv_staging_tryget(w->staging, f->hdr.payload_len);
				f->payload_staged = f->payload != NULL;
			}
			if (!f->payload)
				f->payload = malloc(f->hdr.payload_len);
			if (!f->payload) {
				pr_err("out of memory for a %llu-byte payload",
				       (unsigned long long)f->hdr.payload_len);
				frame_free(w, f);
				break;
			}
			ret = rgpu_conn_recv_payload(c, f->payload, f->hdr.payload_len);
			if (ret == RGPU_EPROTO) {
				/* shared memory: a reference outside it, or an impossible index */
				unsigned type = f->hdr.type;
				frame_free(w, f);
				payload_refused(w, type);
				break;
			}
			if (ret) {
				frame_free(w, f);
				why = ret == RGPU_EIO	      ? strerror(rgpu_conn_errno(c))
				      : ret == RGPU_EDEADLINE ? slow_frame(w)
							      : rgpu_strerror(ret);
				goto lost;
			}
		}
		w->bytes_in += RGPU_FRAME_HDR_LEN + f->hdr.body_len + f->hdr.payload_len;
		if (f->hdr.type == RGPU_MSG_HOST_MIRROR || f->hdr.type == RGPU_MSG_HOST_WRITE) {
			/* host memory takes a write at once, whatever the streams are doing (its
			 * seq is counted with the write: srv_hm_frame) */
			srv_link_acked(w, acked);
			ret = srv_hm_frame(w, f);
			unsigned type = f->hdr.type;
			frame_free(w, f);
			if (ret) {
				srv_protocol_error(w, RGPU_EPROTO, "%s outside the host area's regions",
						   rgpu_msg_name(type));
				break;
			}
			continue;
		}
		atomic_fetch_add(&w->rx_seq, 1);
		/* a launch's body is decoded here, beside the executor's work: launches come in
		 * bursts and the executor's time per launch is the rate (NULL: it decodes, and
		 * refuses, as for any frame) */
		if (f->hdr.type == RGPU_MSG_LAUNCH) {
			Rgpu__Launch *lm = RGPU_PB_UNPACK(rgpu__launch, f->hdr.body_len, f->body);
			f->decoded = lm ? &lm->base : NULL;
		}
		queue_push(w, f);
		srv_link_acked(w, acked);
		continue;
lost:
		if (atomic_load(&w->dead))
			break;
		if (rgpu_conn_is_shm(c) && !atomic_load(&w->admin_busy)) {
			/*
			 * A shared-memory link ends only with its client's process (or its choice to
			 * leave): there is no network to come back from, so no grace period. (During
			 * a migration the client leaves for the target: the migration ends the job.)
			 */
			pr_info("job %s: the client on this host is gone (%s): freeing the job",
				w->job_hex, why);
			srv_link_down(w);
			rgpu_trace_dump();
			_exit(0);
		}
		srv_link_down(w);
		link_close(w, c);
		c = await_resume(w, why, &link_gen);
		if (!c) {
			if (!atomic_load(&w->dead))
				_exit(0); /* freed now, whatever the executor is waiting for */
			break;
		}
		atomic_store(&w->active_ns, rgpu_now_ns());
		spoke = 0;
	}
	/* the job ends: wake everyone who waits for the client */
	srv_link_end(w);
	wake_all(w);
	queue_push(w, NULL);
	return NULL;
}

/* ---- the control channel ---------------------------------------------------------------- */

/*
 * peer: room for w->peer, copied under peer_lock: the reader rewrites it when the link moves
 * (srv_link_up), and the message is sized and then packed from one string.
 */
static void fill_info(struct srv_worker *w, Rgpu__JobInfo *ji, uint64_t *gpu_mem, char *peer)
{
	ji->job_id.data = w->job_id;
	ji->job_id.len = SRV_JOB_ID_LEN;
	ji->worker_pid = getpid();
	ji->state = (char *)srv_job_state_name(atomic_load(&w->state));
	ji->client_host = w->client_host;
	ji->client_pid = w->client_pid;
	ji->client_program = w->client_program;
	ji->label = w->label;
	pthread_mutex_lock(&w->peer_lock);
	memcpy(peer, w->peer, sizeof(w->peer));
	pthread_mutex_unlock(&w->peer_lock);
	ji->peer = peer;
	ji->tenant = w->tenant;
	ji->device_memory = atomic_load(&w->dev_bytes);
	ji->objects = atomic_load(&w->nobjs);
	ji->bytes_in = w->bytes_in;
	ji->bytes_out = w->bytes_out;
	ji->started_unix_ms = w->started_ns / 1000000ull;
	ji->resumes = atomic_load(&w->resumes);
	/*
	 * By the server's GPU index, as the supervisor sums them per GPU: a job on some of them
	 * has 0 on the others below the last of its own.
	 */
	size_t n = 0;
	memset(gpu_mem, 0, 16 * sizeof(*gpu_mem));
	for (int i = 0; i < w->ndev && i < 16; i++) {
		if (w->dev_ord[i] < 0 || w->dev_ord[i] >= 16)
			continue;
		gpu_mem[w->dev_ord[i]] = atomic_load(&w->dev_bytes_by[i]);
		n = MAX(n, (size_t)w->dev_ord[i] + 1);
	}
	ji->n_gpu_memory = n;
	ji->gpu_memory = gpu_mem;
}

static void send_info(struct srv_worker *w)
{
	Rgpu__Ctl m = RGPU__CTL__INIT;
	Rgpu__JobInfo ji = RGPU__JOB_INFO__INIT;
	uint64_t gpu_mem[16];
	char peer[sizeof(w->peer)];
	if (w->ctl_fd < 0)
		return;
	fill_info(w, &ji, gpu_mem, peer);
	m.kind = RGPU__CTL_KIND__CTL_INFO;
	m.job_id = ji.job_id;
	m.info = &ji;
	srv_ctl_send(w->ctl_fd, &m, -1);
}

void srv_worker_report(struct srv_worker *w)
{
	send_info(w);
}

/*
 * A peer link handed over by the supervisor (a Hello with `peer`): check the job's peer token,
 * answer, and give the connection a reader of its own (peer.c). The token is the only
 * credential (no tenant proof: see handshake). c and hello are this function's.
 */
static void take_peer(struct srv_worker *w, struct rgpu_conn *c, Rgpu__Hello *hello)
{
	Rgpu__HelloReply rep = RGPU__HELLO_REPLY__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_ERROR};
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	struct srv_plink *l = NULL;
	char why[160] = "", src[96];
	int code = RGPU_EAUTH;

	snprintf(src, sizeof(src), "%s", rgpu_conn_peer(c));
	if (hello->peer_token.len != SRV_TOKEN_LEN ||
	    !token_eq(hello->peer_token.data, w->peer_token)) {
		snprintf(why, sizeof(why), "wrong peer token");
	} else if (atomic_load(&w->dead)) {
		snprintf(why, sizeof(why), "the job is ending");
		code = RGPU_ECLOSED;
	} else if (!(l = srv_plink_add(w, c, src, why, sizeof(why)))) {
		code = RGPU_EBUSY;
	}
	rgpu__hello__free_unpacked(hello, NULL);
	if (!l) {
		pr_warn("job %s: refused a peer link from %s: %s", w->job_hex, src, why);
		pe.code = code;
		pe.message = why;
		h.session = w->session;
		rgpu_frame_send_hdr(c, &h, &pe.base, NULL);
		rgpu_conn_close(c);
		return;
	}
	/* written before the reader starts: nothing else is ever written on this link */
	reply_ok(w, &rep);
	h.type = RGPU_MSG_HELLO;
	h.flags = RGPU_FRAME_REPLY;
	h.session = w->session;
	/* a source gone already: its reader reads the end at once, and the link goes */
	rgpu_frame_send_hdr(c, &h, &rep.base, NULL);
	pr_info("job %s: peer link from %s (copies from another server's worker)", w->job_hex, src);
	srv_plink_start(w, l);
}

/*
 * A lane of the client's link (Hello.lane; its token already checked): answer, then attach its
 * socket to the link whose hello named the same link_id; once all are there, the worker may
 * stripe payloads over them. A lane for a link that is gone is refused. c and hello are ours.
 */
static void take_lane(struct srv_worker *w, struct rgpu_conn *c, Rgpu__Hello *hello)
{
	Rgpu__HelloReply rep = RGPU__HELLO_REPLY__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_HELLO, .flags = RGPU_FRAME_REPLY};
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	const char *bad = NULL;
	int fd, ret, lane = (int)hello->lane;

	pthread_mutex_lock(&w->lanes_lock);
	if (!w->lanes_conn || !w->lanes_want || hello->link_id.len != sizeof(w->link_id) ||
	    memcmp(hello->link_id.data, w->link_id, sizeof(w->link_id)))
		bad = "no such link (it ended, or it takes no lanes)";
	else if (lane < 1 || lane >= w->lanes_want)
		bad = "a lane number outside the link's";
	/*
	 * attached before the reply goes: the client stripes only once every lane answered, and
	 * by then this side must read all of them
	 */
	fd = bad ? -1 : rgpu_conn_release_fd(c);
	if (!bad && fd < 0)
		bad = "bytes after the lane's hello";
	if (!bad) {
		c = NULL;
		ret = rgpu_lanes_attach(w->lanes_conn, lane, fd);
		if (ret) {
			c = rgpu_tcp_wrap(fd);
			bad = "the lane could not be attached";
		} else {
			uint8_t buf[256];
			reply_ok(w, &rep);
			rep.lanes = (uint32_t)w->lanes_want;
			h.session = w->session;
			size_t n = rgpu_frame_size(&rep.base) <= sizeof(buf)
					   ? rgpu_frame_pack_hdr(buf, &h, &rep.base)
					   : 0;
			/* a lane that takes no answer fails the link's next striped frame */
			if (n && send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
				pr_info("job %s: lane %d broke at once", w->job_hex, lane);
			if (rgpu_lanes_count(w->lanes_conn) == w->lanes_want - 1) {
				rgpu_lanes_ready(w->lanes_conn);
				pr_debug("job %s: %d lanes", w->job_hex, w->lanes_want);
			}
		}
	}
	pthread_mutex_unlock(&w->lanes_lock);
	rgpu__hello__free_unpacked(hello, NULL);
	if (bad) {
		pr_warn("job %s: refused lane %d: %s", w->job_hex, lane, bad);
		if (c) {
			pe.code = RGPU_EPROTO;
			pe.message = (char *)bad;
			h.type = RGPU_MSG_ERROR;
			h.flags = 0;
			rgpu_frame_send_hdr(c, &h, &pe.base, NULL);
		}
	}
	rgpu_conn_close(c);
}

/* A resume handed over by the supervisor: check the token, then give it to the reader. */
static void take_resume(struct srv_worker *w, const Rgpu__Ctl *m, int fd)
{
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_ERROR};
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	struct rgpu_conn *c = fd >= 0 ? rgpu_tcp_wrap(fd) : NULL;
	Rgpu__Hello *hello = NULL;
	const char *bad = NULL;

	if (!c) {
		if (fd >= 0)
			close(fd);
		return;
	}
	conn_init(w, c);
	hello = RGPU_PB_UNPACK(rgpu__hello, m->hello.len, m->hello.data);
	if (!hello || hello->job_id.len != SRV_JOB_ID_LEN ||
	    memcmp(hello->job_id.data, w->job_id, SRV_JOB_ID_LEN))
		bad = "it names another job";
	else if (hello->peer) {
		take_peer(w, c, hello);
		return;
	} else if (strcmp(m->tenant ? m->tenant : "", w->tenant))
		bad = "it comes from another tenant than the job's";
	else if (hello->resume_token.len != SRV_TOKEN_LEN)
		bad = "it has no resume token";
	else if (!token_eq(hello->resume_token.data, w->token) &&
		 !(atomic_load(&w->token_prev_ok) &&
		   token_eq(hello->resume_token.data, w->token_prev)))
		bad = "wrong or already-used resume token";
	else if (hello->lane) {
		take_lane(w, c, hello);
		return;
	}
	else if (hello->received > w->tx_seq)
		bad = "it claims frames this job never sent";
	else if (atomic_load(&w->dead))
		bad = "the job is ending";
	if (bad) {
		pr_warn("job %s%s%s: refused a resume from %s%s%s: %s", w->job_hex,
			w->tenant[0] ? " of tenant " : "", w->tenant, rgpu_conn_peer(c),
			m->tenant && m->tenant[0] ? ", tenant " : "", m->tenant ? m->tenant : "", bad);
		pe.code = RGPU_EPROTO;
		pe.message = (char *)bad;
		rgpu_frame_send_hdr(c, &h, &pe.base, NULL);
		rgpu_conn_close(c);
		if (hello)
			rgpu__hello__free_unpacked(hello, NULL);
		return;
	}
	/*
	 * A fresh token now, so this one cannot be replayed; the one just presented stays valid
	 * until the client speaks on the new link, in case it never saw the reply carrying the new
	 * one.
	 */
	if (token_eq(hello->resume_token.data, w->token)) {
		if (new_token(w)) {
			pr_err("job %s: no randomness for a new token; refusing the resume", w->job_hex);
			rgpu_conn_close(c);
			rgpu__hello__free_unpacked(hello, NULL);
			return;
		}
		atomic_store(&w->token_prev_ok, 1);
		atomic_fetch_add(&w->token_gen, 1);
	}
	/*
	 * The old link, if the worker still thinks it is up, is over: the reader moves on. This
	 * comes first: once the new connection is handed over the reader may install it at once,
	 * and taking the link down after that would cut the new one.
	 */
	srv_link_down(w);
	pthread_mutex_lock(&w->link_lock);
	if (w->pending) {
		/* an older resume never got installed: the newest connection wins */
		rgpu_conn_close(w->pending);
		rgpu__hello__free_unpacked(w->pending_hello, NULL);
	}
	w->pending = c;
	w->pending_hello = hello;
	w->pending_has_proof = m->server_proof.len == RGPU_AUTH_MAC_LEN;
	if (w->pending_has_proof)
		memcpy(w->pending_proof, m->server_proof.data, RGPU_AUTH_MAC_LEN);
	w->pending_gen = atomic_load(&w->token_gen);
	pthread_cond_broadcast(&w->link_cond);
	pthread_mutex_unlock(&w->link_lock);
}

static void *control_main(void *arg)
{
	struct srv_worker *w = arg;

	for (;;) {
		Rgpu__Ctl *m = NULL;
		int fd = -1;
		int ret = srv_ctl_recv(w->ctl_fd, &m, &fd, INFO_EVERY_MS);
		if (ret == RGPU_ETIMEDOUT) {
			send_info(w);
			continue;
		}
		if (ret == RGPU_EPROTO)
			continue;
		if (ret) {
			pr_info("job %s: the supervisor is gone; the job runs on", w->job_hex);
			return NULL;
		}
		if (m->kind == RGPU__CTL_KIND__CTL_RESUME) {
			take_resume(w, m, fd);
			fd = -1;
		} else if (m->kind == RGPU__CTL_KIND__CTL_ADMIN && fd >= 0) {
			/* a checkpoint or migration of this job (admin.c) */
			srv_worker_admin(w, fd, m->admin_type, m->hello.data, m->hello.len,
					 m->server_proof.len == RGPU_AUTH_MAC_LEN ? m->server_proof.data
										  : NULL);
			fd = -1;
		}
		if (fd >= 0)
			close(fd);
		rgpu__ctl__free_unpacked(m, NULL);
	}
}

/* ---- start-up --------------------------------------------------------------------------- */

static void fill_device(struct srv_worker *w, int i, Rgpu__DeviceInfo *di, int32_t *attrs,
			char *name)
{
	CUuuid uuid;
	size_t total = 0;

	w->drv.cuDeviceGetName(name, 256, w->dev[i]);
	w->drv.cuDeviceGetUuid(&uuid, w->dev[i]);
	w->drv.cuDeviceTotalMem(&total, w->dev[i]);
	di->name = name;
	di->uuid.data = malloc(16);
	if (di->uuid.data) {
		memcpy(di->uuid.data, uuid.bytes, 16);
		di->uuid.len = 16;
	}
	di->total_mem = total;
	attrs[0] = 0;
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
		int v = 0;
		if (w->drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)a, w->dev[i]) != CUDA_SUCCESS)
			v = 0;
		attrs[a] = v;
	}
	di->n_attributes = CU_DEVICE_ATTRIBUTE_MAX;
	di->attributes = attrs;
}

/*
 * srv_worker_setup() - load the driver (w->cfg->driver), initialise it, make the job's table of
 * GPUs (devices.c: those asked for, else all), retain the first one's primary context, reserve
 * the device address window at its fixed base and allocate the pinned
 * staging buffers: what every worker does before it serves a job, and what a replay
 * (replay.c) does before it rebuilds one.
 * @why, @whylen: on failure, receives what went wrong, for the client or the operator.
 * Returns CUDA_SUCCESS, or the CUDA error to report: CUDA_ERROR_NO_DEVICE (no driver or no
 * GPU), the driver's error, CUDA_ERROR_NOT_SUPPORTED (the window was placed elsewhere) or
 * CUDA_ERROR_OUT_OF_MEMORY (no pinned memory).
 */
CUresult srv_worker_setup(struct srv_worker *w, char *why, size_t whylen)
{
	CUresult r;
	int n = 0;

	if (srv_driver_load(&w->drv, w->cfg->driver)) {
		snprintf(why, whylen, "the server cannot load its CUDA driver %s",
			 w->cfg->driver ? w->cfg->driver : "libcuda.so.1");
		return CUDA_ERROR_NO_DEVICE;
	}
	r = w->drv.cuInit(0);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS || n == 0) {
		snprintf(why, whylen, "the server's driver has no usable GPU (cuInit: %s)",
			 srv_cu_name(&w->drv, r));
		return r ? r : CUDA_ERROR_NO_DEVICE;
	}
	/* the job's GPUs before anything uses the table: the base context is on the first */
	if (srv_dev_table(w, n, why, whylen))
		return CUDA_ERROR_INVALID_DEVICE;
	for (int i = 0; i < w->ndev; i++) {
		r = w->drv.cuDeviceGet(&w->dev[i], w->dev_ord[i]);
		if (r != CUDA_SUCCESS) {
			snprintf(why, whylen, "the server's driver refuses its GPU %d: %s",
				 w->dev_ord[i], srv_cu_name(&w->drv, r));
			return r;
		}
	}
	r = w->drv.cuDevicePrimaryCtxRetain(&w->base_ctx, w->dev[0]);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuCtxSetCurrent(w->base_ctx);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen, "cannot create a context on the server's GPU: %s",
			 srv_cu_name(&w->drv, r));
		return r;
	}
	/* the host area first, beside the window, before the driver can take its addresses */
	if (srv_hm_init(w)) {
		snprintf(why, whylen, "out of memory");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = w->drv.cuMemAddressReserve(&w->window, w->cfg->window_size, 0,
				       (CUdeviceptr)w->cfg->window_base, 0);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen, "cannot reserve the device address window: %s",
			 srv_cu_name(&w->drv, r));
		return r;
	}
	if (w->window != w->cfg->window_base) {
		snprintf(why, whylen,
			 "the driver placed the device address window at 0x%llx, not at its fixed "
			 "base 0x%llx: refusing to serve (addresses must be the same on every server)",
			 (unsigned long long)w->window, (unsigned long long)w->cfg->window_base);
		w->drv.cuMemAddressFree(w->window, w->cfg->window_size);
		w->window = 0;
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	/*
	 * The executor serves every client thread, so its own calls (mapping memory, staging
	 * copies) must not count as the "potentially unsafe" calls a global-mode capture forbids.
	 */
	CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
	w->drv.cuThreadExchangeStreamCaptureMode(&relaxed);
	/*
	 * 16 MiB buffers: over TCP with lanes, a payload is striped anew for each chunk, and
	 * 16 MiB chunks moved 1.4x the bytes of 4 MiB ones (H200 host, 8 lanes)
	 */
	if (srv_staging_new(w, w->cfg->staging_buffers, RGPU_MAX_CHUNK, &w->staging)) {
		snprintf(why, whylen, "cannot allocate pinned staging memory");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	srv_hm_register(w);
	return CUDA_SUCCESS;
}

/*
 * A client resumes a job that lives in another worker: hand its connection to that worker
 * through the supervisor, or refuse it when no such job exists. Never returns.
 */
/*
 * A resume the supervisor did not hand to a job: answer it with one frame of type on the
 * client's connection (c itself when relayed under TLS, else the released fd wrapped again),
 * then close it.
 */
static void answer_unrouted(struct rgpu_conn *c, int fd, int relay, unsigned type,
			    const ProtobufCMessage *body)
{
	struct rgpu_frame_hdr h = {.type = type};

	if (relay)
		close(fd);
	else
		c = rgpu_tcp_wrap(fd);
	if (!c)
		return;
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	rgpu_frame_send_hdr(c, &h, body, NULL);
	rgpu_conn_close(c);
}

static void route(struct srv_worker *w, struct rgpu_conn *c, const Rgpu__Hello *hello,
		  uint8_t *body, size_t blen, uint8_t *proof)
{
	Rgpu__Ctl m = RGPU__CTL__INIT, *r = NULL;
	char job[2 * SRV_JOB_ID_LEN + 1] = "?";
	char peer[96];
	int fd, ret, result = RGPU_EPROTO, relay = rgpu_conn_is_tls(c), sp[2] = {-1, -1};

	snprintf(peer, sizeof(peer), "%s", rgpu_conn_peer(c));
	if (hello->job_id.len == SRV_JOB_ID_LEN)
		rgpu_hex(hello->job_id.data, SRV_JOB_ID_LEN, job);
	m.kind = RGPU__CTL_KIND__CTL_ROUTE;
	m.job_id = hello->job_id;
	m.hello.data = body;
	m.hello.len = blen;
	/* the job's worker checks the tenant and sends the proof with its reply */
	m.tenant = w->tenant;
	if (proof) {
		m.server_proof.data = proof;
		m.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
	/*
	 * Under TLS the connection's state cannot go with its descriptor: the job's worker gets one
	 * end of a local socket pair, and this process stays, relaying between it and the client.
	 */
	if (relay) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp)) {
			srv_protocol_error(w, RGPU_ESYS, "no socket pair to relay a resume (%s)",
					   strerror(errno));
			_exit(0);
		}
		fd = sp[1];
	} else {
		fd = rgpu_conn_release_fd(c);
	}
	if (fd < 0) {
		srv_protocol_error(w, RGPU_EPROTO, "bytes after the resume hello");
		_exit(0);
	}
	ret = w->ctl_fd >= 0 ? srv_ctl_send(w->ctl_fd, &m, fd) : RGPU_EIO;
	while (ret == 0) {
		ret = srv_ctl_recv(w->ctl_fd, &r, NULL, ROUTE_TIMEOUT_MS);
		if (ret == 0 && r->kind == RGPU__CTL_KIND__CTL_ROUTE_RESULT) {
			result = r->result;
			break;
		}
		if (r)
			rgpu__ctl__free_unpacked(r, NULL);
		r = NULL;
	}
	if (!ret && result == RGPU_EMOVED && r && r->error && *r->error && hello->peer) {
		/* a peer cannot follow: the job has another peer token where it went */
		Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
		char msg[200];
		snprintf(msg, sizeof(msg), "job %s moved to %s", job, r->error);
		pr_warn("refused a peer link from %s: %s", peer, msg);
		pe.code = RGPU_EMOVED;
		pe.message = msg;
		answer_unrouted(c, fd, relay, RGPU_MSG_ERROR, &pe.base);
		rgpu__ctl__free_unpacked(r, NULL);
		_exit(0);
	}
	if (!ret && result == RGPU_EMOVED && r && r->error && *r->error) {
		/* the job moved away while its client's link was down: send the client on */
		Rgpu__Redirect rd = RGPU__REDIRECT__INIT;
		pr_info("resume of job %s from %s: the job moved to %s; redirected", job, peer,
			r->error);
		rd.server = r->error;
		rd.reason = "moved";
		answer_unrouted(c, fd, relay, RGPU_MSG_REDIRECT, &rd.base);
		rgpu__ctl__free_unpacked(r, NULL);
		_exit(0);
	}
	if (r)
		rgpu__ctl__free_unpacked(r, NULL);
	if (ret || result) {
		Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "no job %s on this server (it ended, or its grace period passed)", job);
		pr_warn("refused a %s from %s: %s", hello->peer ? "peer link" : "resume", peer, msg);
		pe.code = RGPU_ENOTFOUND;
		pe.message = msg;
		answer_unrouted(c, fd, relay, RGPU_MSG_ERROR, &pe.base);
	} else {
		pr_debug("%s of job %s from %s handed to its worker%s",
			 hello->peer ? "peer link" : "resume", job, peer,
			 relay ? " (relayed: TLS)" : "");
		close(fd);
		if (relay) {
			ret = rgpu_conn_relay(c, sp[0]);
			pr_debug("relay of job %s from %s ends (%s)", job, peer,
				 ret ? rgpu_strerror(ret) : "closed");
		}
	}
	_exit(0);
}

/*
 * A new session of an authenticated client: over --max-sessions already (refuse_new), or its
 * tenant's limits decide. Sets w->limits; on a refusal sets refuse_new and says why.
 */
static void tenant_admit(struct srv_worker *w, char *why, size_t whylen)
{
	unsigned n = 0;
	int ret;

	if (w->refuse_new && srv_server_drained) {
		snprintf(why, whylen,
			 "the GPU server is drained (rgpuctl drain): it takes no new sessions; use "
			 "another server");
		return;
	}
	if (w->refuse_new) {
		snprintf(why, whylen,
			 "the GPU server serves its limit of %d sessions (rgpud --max-sessions); "
			 "try again later",
			 w->cfg->max_sessions);
		return;
	}
	srv_limits_for(w->cfg, w->tenant, &w->limits);
	ret = srv_acct_join(w->tenant, w->limits.sessions, &n);
	if (ret == RGPU_EBUSY)
		snprintf(why, whylen,
			 "%s has its limit of %llu sessions on this GPU server (rgpud.conf, "
			 "sessions); try again later",
			 srv_tenant_label(w->tenant), (unsigned long long)w->limits.sessions);
	else if (ret)
		snprintf(why, whylen,
			 "the GPU server cannot count another session or tenant (its accounting "
			 "table is full); try again later");
	else
		pr_debug("%s: session %u of %s", w->peer, n, srv_tenant_label(w->tenant));
	w->refuse_new = ret != 0;
}

static int handshake(struct srv_worker *w)
{
	struct rgpu_frame_hdr h, rh = {.type = RGPU_MSG_HELLO, .flags = RGPU_FRAME_REPLY};
	uint8_t *body = NULL;
	Rgpu__Hello *hello;
	Rgpu__HelloReply rep = RGPU__HELLO_REPLY__INIT;
	char why[512] = "";
	char host[256] = "";
	int ret;

	/* the whole hello by its deadline (srv_worker_run), however its bytes are spread */
	ret = rgpu_frame_recv(w->conn, RGPU_PEER_SERVER, &h, &body);
	if (ret == RGPU_EVERSION) {
		srv_protocol_error(w, ret, "protocol version %u, this server speaks %u",
				   (unsigned)h.version, RGPU_PROTO_VERSION);
		return ret;
	}
	if (ret == RGPU_ETIMEDOUT || ret == RGPU_EDEADLINE) {
		srv_protocol_error(w, ret, "no whole MSG_HELLO within %d s of connecting",
				   w->cfg->hello_timeout_s);
		return ret;
	}
	if (ret == RGPU_ECLOSED || ret == RGPU_EIO) {
		pr_info("client %s left before the handshake", w->peer);
		return ret;
	}
	if (ret) {
		srv_protocol_error(w, ret, "bad first frame");
		return ret;
	}
	if (h.type != RGPU_MSG_HELLO || h.payload_len) {
		free(body);
		srv_protocol_error(w, RGPU_EPROTO, "expected MSG_HELLO, got %s",
				   rgpu_msg_name(h.type));
		return RGPU_EPROTO;
	}
	hello = RGPU_PB_UNPACK(rgpu__hello, h.body_len, body);
	if (!hello) {
		free(body);
		srv_protocol_error(w, RGPU_EPROTO, "undecodable MSG_HELLO");
		return RGPU_EPROTO;
	}
	if (hello->protocol_version != RGPU_PROTO_VERSION) {
		free(body);
		srv_protocol_error(w, RGPU_EVERSION, "client speaks protocol %u, server %u",
				   hello->protocol_version, RGPU_PROTO_VERSION);
		rgpu__hello__free_unpacked(hello, NULL);
		return RGPU_EVERSION;
	}
	if (hello->peer) {
		/*
		 * Another server's worker with data for one of this server's jobs (peer.c). It has
		 * no tenant key to prove anything with: the job's peer token, which only the job's
		 * client was given and which the job's worker checks (take_peer), is its credential,
		 * with or without --keys. Routed to the job as a resume is; never returns.
		 */
		if (hello->job_id.len != SRV_JOB_ID_LEN || hello->peer_token.len != SRV_TOKEN_LEN) {
			free(body);
			rgpu__hello__free_unpacked(hello, NULL);
			srv_protocol_error(w, RGPU_EPROTO, "a peer hello without a job id or token");
			return RGPU_EPROTO;
		}
		rgpu_conn_set_deadline(w->conn, 0);
		route(w, w->conn, hello, body, h.body_len, NULL);
	}
	/* who the client is, before anything is done for it (auth.c): within the hello deadline */
	uint8_t proof[RGPU_AUTH_MAC_LEN];
	int has_proof = 0;
	ret = srv_auth(w, hello, proof, &has_proof, why, sizeof(why));
	if (ret == RGPU_EAUTH) {
		free(body);
		if (hello->job_id.len) {
			/* a resume is refused like its other refusals: MSG_ERROR */
			Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
			struct rgpu_frame_hdr eh = {.type = RGPU_MSG_ERROR};
			pe.code = RGPU_EAUTH;
			pe.message = why;
			rgpu_frame_send_hdr(w->conn, &eh, &pe.base, NULL);
		} else {
			/* a new session gets the CUDA error its cuInit returns, and why */
			rep.result = CUDA_ERROR_NOT_PERMITTED;
			rep.protocol_version = RGPU_PROTO_VERSION;
			rep.error = why;
			rh.ref = h.seq;
			rgpu_frame_send_hdr(w->conn, &rh, &rep.base, NULL);
		}
		rgpu__hello__free_unpacked(hello, NULL);
		return RGPU_EAUTH;
	}
	if (ret) {
		free(body);
		rgpu__hello__free_unpacked(hello, NULL);
		return ret;
	}
	rgpu_conn_set_deadline(w->conn, 0);
	if (hello->job_id.len)
		route(w, w->conn, hello, body, h.body_len, has_proof ? proof : NULL);
	free(body);
	snprintf(w->client_host, sizeof(w->client_host), "%s", hello->client_host);
	snprintf(w->client_program, sizeof(w->client_program), "%s", hello->client_program);
	if (hello->label && *hello->label && !rgpu_label_valid(hello->label))
		pr_warn("the client's job label is not one (1-%d of A-Z a-z 0-9 . _ : -): left out",
			RGPU_LABEL_MAX);
	else if (hello->label)
		snprintf(w->label, sizeof(w->label), "%s", hello->label);
	w->client_pid = hello->client_pid;
	w->client_caps = hello->capabilities;

	CUresult r;
	int dev_refused = 0;
	tenant_admit(w, why, sizeof(why));
	if (w->refuse_new) {
		/* the server or the tenant is full: what a CUDA program sees of a GPU in use */
		pr_warn("client %s pid %d program %s refused: %s", w->peer, w->client_pid,
			w->client_program, why);
		r = CUDA_ERROR_DEVICE_UNAVAILABLE;
	} else if (srv_dev_want(w, hello->device_base, hello->devices, hello->n_devices, why,
				sizeof(why))) {
		/* checked before the driver is loaded: a choice no server could serve */
		dev_refused = 1;
		r = CUDA_ERROR_INVALID_DEVICE;
	} else {
		r = srv_worker_setup(w, why, sizeof(why));
		dev_refused = r == CUDA_ERROR_INVALID_DEVICE;
		if (r == CUDA_SUCCESS &&
		    (getrandom(w->job_id, SRV_JOB_ID_LEN, 0) != SRV_JOB_ID_LEN || new_token(w) ||
		     srv_peer_token_new(w))) {
			snprintf(why, sizeof(why), "the server has no randomness for a job id");
			r = CUDA_ERROR_OPERATING_SYSTEM;
		}
	}
	memcpy(&w->session, w->job_id, sizeof(w->session));
	if (w->session == 0)
		w->session = 1;
	int want_shm = hello->want_shm;
	uint32_t lanes = r == CUDA_SUCCESS ? lanes_for(w, w->conn, hello) : 0;
	rgpu__hello__free_unpacked(hello, NULL);
	rgpu_hex(w->job_id, SRV_JOB_ID_LEN, w->job_hex);
	if (!w->refuse_new && !dev_refused)
		pr_info("job %s: client %s pid %d program %s%s%s", w->job_hex, w->peer, w->client_pid,
			w->client_program, w->tenant[0] ? " tenant " : "", w->tenant);
	if (r == CUDA_SUCCESS && (w->dev_base || w->ndev_want)) {
		char ords[16 * 4] = "";
		for (int i = 0, o = 0; i < w->ndev && o < (int)sizeof(ords); i++)
			o += snprintf(ords + o, sizeof(ords) - o, "%s%d", i ? "," : "", w->dev_ord[i]);
		pr_info("job %s: the client numbers this server's GPUs %s as its devices %d..%d",
			w->job_hex, ords, w->dev_base, w->dev_base + w->ndev - 1);
	}
	gethostname(host, sizeof(host) - 1);
	rep.result = (int32_t)r;
	rep.protocol_version = RGPU_PROTO_VERSION;
	rep.capabilities = w->caps;
	rep.session_id = w->session;
	rep.server_host = host;
	rep.error = why;
	rep.window_base = w->cfg->window_base;
	rep.window_size = w->cfg->window_size;
	rep.granularity = RGPU_GRANULE;
	rep.job_id.data = w->job_id;
	rep.job_id.len = SRV_JOB_ID_LEN;
	rep.resume_token.data = w->token;
	rep.resume_token.len = SRV_TOKEN_LEN;
	if (r == CUDA_SUCCESS) {
		rep.peer_token.data = w->peer_token;
		rep.peer_token.len = SRV_TOKEN_LEN;
	}
	rep.resume_grace_s = (uint32_t)w->cfg->resume_grace_s;
	rep.max_queued = w->limits.queued;
	if (has_proof) {
		rep.server_proof.data = proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}

	Rgpu__DeviceInfo di[16], *dip[16];
	static int32_t attrs[16][CU_DEVICE_ATTRIBUTE_MAX];
	static char names[16][256];
	if (r == CUDA_SUCCESS) {
		int v = 0;
		w->drv.cuDriverGetVersion(&v);
		rep.driver_version = v;
		for (int i = 0; i < w->ndev; i++) {
			rgpu__device_info__init(&di[i]);
			fill_device(w, i, &di[i], attrs[i], names[i]);
			dip[i] = &di[i];
		}
		rep.n_devices = (size_t)w->ndev;
		rep.devices = dip;
	} else if (dev_refused) {
		/* the client's choice of devices, not the server, is wrong */
		pr_warn("client %s pid %d program %s refused: %s", w->peer, w->client_pid,
			w->client_program, why);
	} else if (!w->refuse_new) {
		pr_err("job %s refused: %s", w->job_hex, why);
	}
	/*
	 * The supervisor learns of the job before the client can know its id: a client whose
	 * link breaks right after this reply resumes through the supervisor, which would otherwise
	 * find no such job and refuse it.
	 */
	if (r == CUDA_SUCCESS)
		send_info(w);
	/* the handshake is not part of the job's stream: unsequenced, not kept */
	rh.session = w->session;
	rh.ref = h.seq;
	shm_reply(&rep, r == CUDA_SUCCESS && shm_wanted(w->conn, w->client_caps, want_shm));
	rep.lanes = rep.shm ? 0 : lanes;
	rep.staging_size = srv_staging_size(w->staging);
	ret = rgpu_frame_send_hdr(w->conn, &rh, &rep.base, NULL);
	for (size_t i = 0; i < rep.n_devices; i++)
		free(di[i].uuid.data);
	if (ret)
		return ret;
	if (rep.shm && (ret = shm_accept(w, w->conn)))
		return ret;
	return r == CUDA_SUCCESS ? 0 : RGPU_ECUDA;
}

const char *srv_job_state_name(int state)
{
	switch (state) {
	case SRV_JOB_STARTING: return "starting";
	case SRV_JOB_RUNNING: return "running";
	case SRV_JOB_DISCONNECTED: return "disconnected";
	case SRV_JOB_ENDING: return "ending";
	}
	return "?";
}

void srv_worker_init(struct srv_worker *w, const struct srv_config *cfg, int ctl_fd,
		     const char *peer)
{
	w->cfg = cfg;
	w->ctl_fd = ctl_fd;
	/*
	 * DEVICE_SELECT has no message of its own, so the generated mask lacks it: its fields
	 * (Hello.device_base, Hello.devices) are served by every worker (devices.c)
	 */
	w->caps = RGPU_CAPS_SERVER | RGPU_CAP_DEVICE_SELECT | RGPU_CAP_LANES;
	srv_limits_for(cfg, "", &w->limits); /* its tenant's once authenticated (handshake) */
	snprintf(w->peer, sizeof(w->peer), "%s", peer);
	snprintf(w->job_hex, sizeof(w->job_hex), "?");
	pthread_mutex_init(&w->send_lock, NULL);
	pthread_mutex_init(&w->peer_lock, NULL);
	pthread_mutex_init(&w->lanes_lock, NULL);
	pthread_mutex_init(&w->store_lock, NULL);
	pthread_cond_init(&w->out_cond, NULL);
	/*
	 * adaptive: the reader holds the queue's lock for a few instructions, and an executor
	 * that found a frame and then slept on the lock would lose microseconds on every call
	 */
	pthread_mutexattr_t qa;
	pthread_mutexattr_init(&qa);
	pthread_mutexattr_settype(&qa, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&w->q_lock, &qa);
	pthread_mutexattr_destroy(&qa);
	pthread_cond_init(&w->q_cond, NULL);
	pthread_mutex_init(&w->cb_lock, NULL);
	pthread_cond_init(&w->cb_cond, NULL);
	pthread_mutex_init(&w->link_lock, NULL);
	pthread_cond_init(&w->link_cond, NULL);
	pthread_mutex_init(&w->hold.lock, NULL);
	pthread_cond_init(&w->hold.cond, NULL);
}

void srv_worker_run(const struct srv_config *cfg, struct rgpu_conn *conn, int ctl_fd, int admit)
{
	static struct srv_worker wk;
	struct srv_worker *w = &wk;
	struct timespec now;

	srv_worker_init(w, cfg, ctl_fd, rgpu_conn_peer(conn));
	w->refuse_new = !admit;
	w->conn = conn;
	conn_init(w, conn);
	rgpu_conn_set_deadline(conn, rgpu_deadline_after(cfg->hello_timeout_s * 1000));
	clock_gettime(CLOCK_REALTIME, &now);
	w->started_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	/* TLS first (tls.c), within the same deadline as the hello */
	/* (not on this host's socket: nothing crosses a network there) */
	if ((!rgpu_conn_is_unix(conn) && srv_tls_start(cfg, conn, "client", RGPU_MSG_ERROR)) ||
	    handshake(w)) {
		srv_link_end(w);
		srv_link_down(w);
		srv_acct_leave();
		_exit(0);
	}
	srv_worker_serve(w);
}

void srv_worker_serve(struct srv_worker *w)
{
	pthread_t reader, control;
	uint64_t nframes = 0, nbytes = 0;
	int holding = 0; /* w->spin */
	int ret;

	/*
	 * The job starts: whatever the driver writes to stdout and stderr from now on is the
	 * program's (device printf, assert messages) and goes to the client (stdio.c).
	 */
	srv_stdio_init(w);
	rgpu_trace_init();
	if (!w->log && srv_log_init(w))
		pr_warn("job %s: out of memory for the state log: nothing is recorded", w->job_hex);
	srv_worker_modcache(w, "images are not kept");
	/* before the control thread can hand over a peer link */
	if (srv_peer_init(w, 0))
		pr_warn("job %s: out of memory for copies between servers: refused", w->job_hex);
	if (w->conn)
		link_spin(w, w->conn);
	atomic_store(&w->active_ns, rgpu_now_ns());
	atomic_store(&w->state, w->conn ? SRV_JOB_RUNNING : SRV_JOB_DISCONNECTED);
	if (pthread_create(&reader, NULL, reader_main, w)) {
		pr_err("cannot start the reader thread");
		goto out;
	}
	if (w->ctl_fd >= 0 && pthread_create(&control, NULL, control_main, w))
		pr_warn("cannot start the control thread: the supervisor will not see this job");
	send_info(w);
	for (;;) {
		struct srv_frame *f;
		/* a checkpoint's barrier: between two frames, nothing of the job running */
		srv_hold_point(w);
		/*
		 * While it runs frames (a synchronous copy, a kernel being waited for), the reader
		 * spins for the frame the client sends once it has the reply; from when the queue
		 * runs dry, only the connection's usual spin.
		 */
		if (holding && !w->x_head && srv_queued(w) == 0) {
			rgpu_spin_release(&w->spin);
			holding = 0;
		}
		f = queue_pop(w);
		if (f && !holding) {
			rgpu_spin_hold(&w->spin);
			holding = 1;
		}
		if (!f) {
			if (srv_hold_wanted(w) && !atomic_load(&w->dead))
				continue;
			break;
		}
		rgpu_trace(f->hdr.seq, RGPU_TR_DEQUEUED);
		srv_shm_point(w); /* a link that moved to shared memory, before its first frame */
		atomic_store(&w->executed, f->hdr.seq);
		uint64_t f_payload = f->hdr.payload_len;
		nframes++;
		nbytes += f_payload;
		atomic_store(&w->executing, 1);
		ret = srv_exec(w, f);
		rgpu_trace(f->hdr.seq, RGPU_TR_EXECUTED);
		atomic_store_explicit(&w->ex_active_ns, rgpu_now_ns(), memory_order_relaxed);
		atomic_store(&w->executing, 0);
		frame_retire(w, f);
		if (ret)
			break;
		/*
		 * A large payload is kept by reference on the client until this says it ran (the
		 * client may be waiting to reuse the buffer): tell it at once.
		 */
		if (nframes >= ACK_EVERY_FRAMES || nbytes >= ACK_EVERY_BYTES ||
		    f_payload > ACK_LARGE_PAYLOAD) {
			srv_link_ack(w);
			w->ack_ns = rgpu_now_ns();
			nframes = nbytes = 0;
		}
	}
	pr_info("job %s ends: state log of %zu records, equal to the client's at %u synchronising "
		"calls, different at %u",
		w->job_hex, w->log ? st_count(w->log) : 0, w->verified, w->mismatches);
out:
	rgpu_trace_dump();
	/*
	 * _exit, not exit: a host function may still be blocked in a driver thread waiting for a
	 * client that is gone, and the driver's exit handlers would wait for it. Closing the
	 * process releases every context, mapping and pinned page at once.
	 */
	srv_link_end(w);
	srv_link_down(w);
	srv_peer_fini(w);
	srv_acct_leave(); /* its tenant's again now; the supervisor's reap would be later */
	_exit(0);
}
