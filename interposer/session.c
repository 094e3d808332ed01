/*
 * The session: the interposer's job on rgpud, and the command stream to it (design.md §4).
 *
 * The session is not its connection. Every frame sent is kept until the worker says it has
 * executed past it (the `ack` of every frame it sends, and its MSG_ACK when it goes idle).
 * When the link breaks — a reset, a timeout, the peer vanishing — the receiver thread
 * reconnects with backoff, presents the job id and its resume token, and resends exactly the
 * frames the worker never received; the worker does the same with what it sent. Callers
 * notice a delay, nothing else. The kept bytes are bounded (RGPU_UNACKED_MAX, 64 MiB): past
 * it a sender waits for acknowledgements, which is the flow control.
 *
 * Fire-and-forget requests are queued and written in batches by a sender thread (a burst of
 * launches costs one system call, not one each); a synchronous request writes everything
 * queued before it and waits for its reply. Payloads above IP_INLINE_MAX are written straight
 * from the caller's memory, and copied before the call returns only if the worker has not yet
 * executed them (the caller may reuse its buffer, and a resend needs the bytes). A receiver
 * thread reads replies, device-to-host data (written straight into the destination),
 * host-function triggers, the program's device output (written to its stdout and stderr) and
 * acknowledgements. Host functions run on a callback thread, never the receiver, so a slow
 * callback cannot stall data.
 *
 * When the job cannot be resumed (its grace period passed, the server refused, or no server
 * answered in time) the session is dead: one log line says why, every later call returns
 * CUDA_ERROR_DEVICE_UNAVAILABLE and every waiter is woken. Nothing here ever blocks forever on
 * a server that went away.
 *
 * Four files share the work, each using only those below it (session_state.h holds what they
 * share): link.c keeps and writes the frames, takes acknowledgements, applies the flow control,
 * installs a resumed connection and holds the session's death; callbacks.c runs host
 * functions; calls.c posts requests, waits for replies and keeps asynchronous errors; this
 * file opens the session, shakes hands, runs the receiver thread and dispatches what it reads,
 * resumes a broken link, and says goodbye at exit.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "session_state.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/trace.h"
#include "rgpu/util.h"
#include "rgpu/window.h"

/* ---- receiving ---------------------------------------------------------------------------- */

static void on_error(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	Rgpu__ProtocolError *pe = RGPU_PB_UNPACK(rgpu__protocol_error, h->body_len, body);
	char why[320];
	snprintf(why, sizeof(why), "the server ended the session: %s",
		 pe && pe->message ? pe->message : "?");
	if (pe)
		rgpu__protocol_error__free_unpacked(pe, NULL);
	ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, why);
}

/* RGPU_TCP_LANES: TCP connections a link may use in all (its own and its lanes; 1: no lanes) */
static int tcp_lanes = 8;

/* RGPU_TRANSPORT: tcp (never shared memory), auto (when the server is on this host), shm (must) */
enum { IP_TCP = 0, IP_AUTO = 1, IP_SHM = 2 };
static int transport = IP_AUTO;

static int resume(const char *why);
static void open_lanes(struct rgpu_conn *c, uint32_t n);

/* A MSG_REDIRECT's server, kept for the resume; 0, or -1 when it is not HOST:PORT. */
static int take_redirect(const struct rgpu_frame_hdr *h, const uint8_t *body, char *reason,
			 size_t rlen)
{
	Rgpu__Redirect *rd = RGPU_PB_UNPACK(rgpu__redirect, h->body_len, body);
	char host[256];
	int port, ret = -1;

	if (rd && rd->server && !rgpu_parse_hostport(rd->server, "127.0.0.1", host, sizeof(host),
						       &port) && port) {
		snprintf(S.redirect_to, sizeof(S.redirect_to), "%s", rd->server);
		snprintf(reason, rlen, "%s", rd->reason && *rd->reason ? rd->reason : "moved");
		ret = 0;
	}
	if (rd)
		rgpu__redirect__free_unpacked(rd, NULL);
	return ret;
}

/* Follow a redirect: the job's server is now S.redirect_to (the receiver thread's own S.host). */
static void follow_redirect(void)
{
	char host[256];
	int port;

	if (!S.redirect_to[0] ||
	    rgpu_parse_hostport(S.redirect_to, "127.0.0.1", host, sizeof(host), &port))
		return;
	pr_info("job %s: moved from %s to %s", S.job_hex, S.server, S.redirect_to);
	pthread_mutex_lock(&S.peer_lock); /* ip_session_peer reads it from other threads */
	snprintf(S.server, sizeof(S.server), "%s", S.redirect_to);
	pthread_mutex_unlock(&S.peer_lock);
	snprintf(S.host, sizeof(S.host), "%s", host);
	S.port = port;
	/* a redirect names HOST:PORT: a job reached by a socket path (unix:PATH) goes on by TCP */
	S.is_unix = 0;
	S.redirect_to[0] = '\0';
}

/*
 * Write all of p to fd, as the program's own output: through EINTR and short writes, and
 * waiting while a non-blocking descriptor is full. Errors end it quietly: a closed stdout
 * loses the device's lines as it would the program's own.
 */
static void write_fully(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			poll(&pf, 1, 100);
			continue;
		}
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* Lock f for a flush, waiting at most 100 ms: a thread may hold it across a CUDA call. */
static int lock_stdio(FILE *f)
{
	for (int i = 0; i < 100; i++) {
		if (ftrylockfile(f) == 0)
			return 1;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

/*
 * MSG_OUTPUT: what the program's kernels printed (fd 1) or a device assert's message (fd 2),
 * which the server's driver flushed at a synchronisation (server/stdio.c). The interposer never
 * writes to the program's stdout on its own behalf; these bytes are the program's own output,
 * which NVIDIA's driver writes into this very process's stdout and stderr, so writing them
 * there is correct. What the program's stdio still buffers goes out first, under the stream's
 * lock, so the device's lines keep their place among the program's host output, as when the
 * driver writes them through the same stream. The frame arrives before the reply of the call
 * that flushed, so the lines are out before that call returns.
 */
static int on_output(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	static uint8_t buf[RGPU_MAX_OUTPUT]; /* receiver thread only; the frame check bounds it */
	Rgpu__Output *m = RGPU_PB_UNPACK(rgpu__output, h->body_len, body);
	int ret, fd;

	if (!m) {
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable device output");
		return 0;
	}
	fd = (int)m->fd;
	rgpu__output__free_unpacked(m, NULL);
	if (fd != 1 && fd != 2) {
		pr_warn("device output for descriptor %d: dropped", fd);
		return rgpu_conn_discard(S.conn, h->payload_len);
	}
	/* all of it first: a link that breaks inside brings the frame again, never half twice */
	ret = rgpu_conn_recv(S.conn, buf, h->payload_len);
	if (ret)
		return ret;
	FILE *f = fd == 1 ? stdout : stderr;
	int locked = lock_stdio(f);
	if (locked) {
		fflush_unlocked(f);
		/* where the stream writes now, should the program have reopened it */
		int sfd = fileno_unlocked(f);
		fd = sfd >= 0 ? sfd : fd;
	}
	write_fully(fd, buf, h->payload_len);
	if (locked)
		funlockfile(f);
	return 0;
}

/* MSG_HOST_UPDATE: what the device wrote to a mirrored host region (hostmirror.c). */
static int on_host_update(const struct rgpu_frame_hdr *h, const uint8_t *body)
{
	static uint8_t buf[RGPU_MAX_HOST_WRITE]; /* receiver thread only; the frame check bounds it */
	Rgpu__HostWrite *m = RGPU_PB_UNPACK(rgpu__host_write, h->body_len, body);
	uint64_t addr;
	int ret;

	if (!m) {
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "undecodable host memory update");
		return 0;
	}
	addr = m->addr;
	rgpu__host_write__free_unpacked(m, NULL);
	ret = rgpu_conn_recv(S.conn, buf, h->payload_len);
	if (ret)
		return ret;
	return ip_hm_on_update(addr, buf, h->payload_len);
}

static void *receiver_main(void *arg)
{
	ip_sess_bind(arg);
	while (!atomic_load(&S.dead)) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		int ret = rgpu_frame_recv(S.conn, RGPU_PEER_CLIENT, &h, &body);

		if (ret == RGPU_ECLOSED || ret == RGPU_EIO || ret == RGPU_ETRUNC ||
		    ret == RGPU_ETIMEDOUT || ret == RGPU_EDEADLINE) {
			if (!resume(ret == RGPU_ECLOSED ? "the server closed the connection"
							: rgpu_strerror(ret)))
				break;
			continue;
		}
		if (ret) {
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, rgpu_strerror(ret));
			break;
		}
		if (h.seq == 0) {
			/* unsequenced: an acknowledgement, a redirect, or an error that ends the job */
			char reason[64];
			if (h.type == RGPU_MSG_ACK) {
				ip_link_acked(h.ack);
			} else if (h.type == RGPU_MSG_REDIRECT) {
				int bad = take_redirect(&h, body, reason, sizeof(reason));
				free(body);
				if (bad) {
					ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
						       "a redirect to no server");
					break;
				}
				/* the job lives elsewhere now: resume it there */
				if (!resume(reason))
					break;
				continue;
			} else if (h.type == RGPU_MSG_ERROR)
				on_error(&h, body);
			else
				ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
					       "unexpected unsequenced frame from the server");
			free(body);
			continue;
		}
		ip_link_acked(h.ack);
		if (h.seq <= S.rx_seq) {
			/* sent again by a worker that did not know it had arrived */
			free(body);
			ret = rgpu_conn_discard(S.conn, h.payload_len);
			if (ret && !resume(rgpu_strerror(ret)))
				break;
			continue;
		}
		if (h.seq != S.rx_seq + 1) {
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "the server skipped frames");
			free(body);
			break;
		}
		ret = 0;
		if (h.flags & RGPU_FRAME_REPLY) {
			rgpu_trace(h.ref, RGPU_TR_RECEIVED);
			ret = ip_call_on_reply(&h, &body);
		} else if (h.type == RGPU_MSG_DATA) {
			ret = ip_call_on_data(&h, body);
		} else if (h.type == RGPU_MSG_OUTPUT) {
			ret = on_output(&h, body);
		} else if (h.type == RGPU_MSG_HOST_UPDATE) {
			ret = on_host_update(&h, body);
		} else if (h.type == RGPU_MSG_CALLBACK) {
			Rgpu__Callback *cb = RGPU_PB_UNPACK(rgpu__callback, h.body_len, body);
			if (cb) {
				ip_callback_push(cb->callback);
				rgpu__callback__free_unpacked(cb, NULL);
			} else {
				ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
					       "undecodable callback");
			}
		} else if (h.type == RGPU_MSG_ERROR) {
			on_error(&h, body);
		} else {
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE,
				       "unexpected frame from the server");
		}
		free(body);
		if (ret) {
			/* the payload broke off: the worker sends the whole frame again */
			if (!resume(rgpu_strerror(ret)))
				break;
			continue;
		}
		S.rx_seq = h.seq;
		S.rx_unacked += RGPU_FRAME_HDR_LEN + h.body_len + h.payload_len;
		if (S.rx_unacked >= IP_ACK_EVERY)
			ip_link_send_ack();
	}
	return NULL;
}

/* ---- the handshake ------------------------------------------------------------------------ */

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * The server's challenge (docs/protocol.md, "Authentication"): answer it with the MAC of this
 * client's key and keep the server's nonce, to check the proof its reply carries. Returns 0, or
 * RGPU_EPROTO with why filled, or the transport's error.
 */
static int answer_challenge(struct rgpu_conn *c, const struct rgpu_frame_hdr *hello_hdr,
			    const uint8_t *body, size_t blen, const uint8_t *cnonce,
			    const uint8_t *bind, uint8_t *snonce, char *why, size_t whylen)
{
	Rgpu__AuthChallenge *ch = RGPU_PB_UNPACK(rgpu__auth_challenge, blen, body);
	Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
	struct rgpu_frame_hdr ah = {.type = RGPU_MSG_AUTH, .session = hello_hdr->session};
	uint8_t mac[RGPU_AUTH_MAC_LEN];
	int ret;

	if (!ch || ch->server_nonce.len != RGPU_AUTH_NONCE_LEN) {
		if (ch)
			rgpu__auth_challenge__free_unpacked(ch, NULL);
		snprintf(why, whylen, "an undecodable authentication challenge");
		return RGPU_EPROTO;
	}
	memcpy(snonce, ch->server_nonce.data, RGPU_AUTH_NONCE_LEN);
	rgpu__auth_challenge__free_unpacked(ch, NULL);
	rgpu_auth_mac_bound(&S.key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, S.tenant, snonce, cnonce,
			    bind, mac);
	ar.mac.data = mac;
	ar.mac.len = sizeof(mac);
	ret = rgpu_frame_send_hdr(c, &ah, &ar.base, NULL);
	explicit_bzero(mac, sizeof(mac));
	return ret;
}

/*
 * Send a hello (a resume when the session has a job), answer the server's challenge when this
 * client has a key, and read the reply. Returns 0 with *out set, RGPU_EPROTO with why filled
 * when the server refused, RGPU_EAUTH with why filled when the server did not prove it holds
 * the key, or the transport's error.
 */
static int exchange_hello(struct rgpu_conn *c, int resuming, int timeout_ms,
			  Rgpu__HelloReply **out, char *why, size_t whylen)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr h, rh = {.type = RGPU_MSG_HELLO};
	uint8_t *body = NULL;
	uint8_t cnonce[RGPU_AUTH_NONCE_LEN], snonce[RGPU_AUTH_NONCE_LEN];
	uint8_t binding[RGPU_AUTH_BINDING_LEN];
	const uint8_t *bind = NULL;
	int challenged = 0;
	char host[256] = "", prog[256] = "";
	const char *label;
	ssize_t n;
	int ret;

	*out = NULL;
	gethostname(host, sizeof(host) - 1);
	n = readlink("/proc/self/exe", prog, sizeof(prog) - 1);
	prog[n > 0 ? n : 0] = '\0';
	hm.protocol_version = RGPU_PROTO_VERSION;
	/* and the pushes a client may decline: device output (an older client never gets it),
	 * and the redirect of a moved job (the server moves no job of an older client) */
	hm.capabilities = RGPU_CAPS_CLIENT | RGPU_CAP_OUTPUT | RGPU_CAP_MIGRATE | RGPU_CAP_LANES;
	hm.client_pid = getpid();
	hm.client_host = host;
	hm.client_program = prog;
	/* what the job belongs to (the Slurm plugin's "slurm-JOBID"): shown, and moved with it */
	label = getenv("RGPU_JOB_LABEL");
	if (label && *label && !rgpu_label_valid(label)) {
		static int said;
		if (!said++)
			pr_warn("RGPU_JOB_LABEL='%.80s' is not a label (1-%d of A-Z a-z 0-9 . _ : -): "
				"not sent",
				label, RGPU_LABEL_MAX);
		label = NULL;
	}
	hm.label = (char *)(label ? label : "");
	hm.want_shm = transport != IP_TCP && rgpu_conn_is_unix(c);
	/* lanes: a plain TCP link names itself (a new id); a lane names its link */
	hm.lane = (uint32_t)S.lane_hello;
	if (S.lane_hello ||
	    (tcp_lanes > 1 && !rgpu_conn_is_unix(c) && !rgpu_conn_is_tls(c) &&
	     getrandom(S.link_id, sizeof(S.link_id), 0) == (ssize_t)sizeof(S.link_id))) {
		hm.lanes = (uint32_t)tcp_lanes;
		hm.link_id.data = S.link_id;
		hm.link_id.len = sizeof(S.link_id);
	}
	hm.device_base = (uint32_t)S.dev_base;
	hm.devices = S.sel;
	hm.n_devices = (size_t)S.nsel;
	if (resuming) {
		hm.job_id.data = S.job_id;
		hm.job_id.len = IP_JOB_ID_LEN;
		hm.resume_token.data = S.token;
		hm.resume_token.len = IP_TOKEN_LEN;
		hm.received = S.rx_seq;
		rh.session = S.session;
	}
	if (S.key.len) {
		if (getrandom(cnonce, sizeof(cnonce), 0) != (ssize_t)sizeof(cnonce)) {
			snprintf(why, whylen, "no randomness for a nonce: %s", strerror(errno));
			return RGPU_EAUTH;
		}
		hm.tenant = S.tenant;
		hm.client_nonce.data = cnonce;
		hm.client_nonce.len = sizeof(cnonce);
		/* under TLS, both MACs are bound to this TLS connection (docs/protocol.md, "TLS") */
		if (rgpu_conn_is_tls(c)) {
			if (rgpu_conn_tls_binding(c, binding)) {
				snprintf(why, whylen, "no TLS exporter value to bind the key to");
				return RGPU_EAUTH;
			}
			bind = binding;
		}
	}
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	ret = rgpu_frame_send_hdr(c, &rh, &hm.base, NULL);
	if (!ret)
		ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, timeout_ms);
	if (ret)
		return ret;
	if (h.type == RGPU_MSG_AUTH_CHALLENGE && S.key.len) {
		ret = answer_challenge(c, &rh, body, h.body_len, cnonce, bind, snonce, why, whylen);
		free(body);
		body = NULL;
		if (ret)
			return ret;
		challenged = 1;
		ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, timeout_ms);
		if (ret)
			return ret;
	}
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = RGPU_PB_UNPACK(rgpu__protocol_error, h.body_len, body);
		snprintf(why, whylen, "%s", pe && pe->message ? pe->message : "protocol error");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		free(body);
		return RGPU_EPROTO;
	}
	if (h.type == RGPU_MSG_REDIRECT && resuming) {
		/* the job moved while the link was down: resume it where it went */
		int bad = take_redirect(&h, body, why, whylen);
		free(body);
		if (bad) {
			snprintf(why, whylen, "a redirect to no server");
			return RGPU_EPROTO;
		}
		return RGPU_EMOVED;
	}
	if (h.type == RGPU_MSG_HELLO && (h.flags & RGPU_FRAME_REPLY))
		*out = RGPU_PB_UNPACK(rgpu__hello_reply, h.body_len, body);
	free(body);
	if (!*out) {
		snprintf(why, whylen, "an unexpected first reply");
		return RGPU_EPROTO;
	}
	/*
	 * Mutual: a client with a key talks only to a server that proves it holds the same key
	 * (an impostor would simply not ask for one). A refusal carries no proof: its error says.
	 */
	if (S.key.len && (*out)->result == CUDA_SUCCESS) {
		uint8_t want[RGPU_AUTH_MAC_LEN];
		int ok = 0;
		if (challenged && (*out)->server_proof.len == RGPU_AUTH_MAC_LEN) {
			rgpu_auth_mac_bound(&S.key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION, S.tenant,
					    snonce, cnonce, bind, want);
			ok = rgpu_auth_mac_eq(want, (*out)->server_proof.data);
		}
		if (!ok) {
			snprintf(why, whylen,
				 "it did not prove that it holds tenant %s's key (%s): refusing it, "
				 "as RGPU_KEY_FILE is set",
				 S.tenant,
				 !challenged ? "it asked for no authentication: a server without "
					       "rgpud --keys, or not the server it claims to be"
					     : "a wrong proof: not the server it claims to be");
			/* a job made for nothing: let it go now rather than after its grace period */
			if (!resuming && (*out)->session_id)
				rgpu_frame_send(c, RGPU_MSG_GOODBYE, 0, 1, (*out)->session_id, NULL,
						NULL, 0);
			rgpu__hello_reply__free_unpacked(*out, NULL);
			*out = NULL;
			return RGPU_EAUTH;
		}
	}
	if ((*out)->resume_token.len == IP_TOKEN_LEN)
		memcpy(S.token, (*out)->resume_token.data, IP_TOKEN_LEN);
	/* a job moved to another server has a new peer token there */
	pthread_mutex_lock(&S.peer_lock);
	if ((*out)->peer_token.len == IP_TOKEN_LEN)
		memcpy(S.peer_token, (*out)->peer_token.data, IP_TOKEN_LEN);
	else
		memset(S.peer_token, 0, IP_TOKEN_LEN);
	pthread_mutex_unlock(&S.peer_lock);
	return 0;
}

/*
 * A connection to the server: its Unix-domain socket (RGPU_SERVER=unix:PATH), else TCP, then
 * TLS when configured (RGPU_TLS, RGPU_TLS_CA).
 */
static int ip_connect(int timeout_ms, struct rgpu_conn **c, char *why, size_t whylen)
{
	if (S.is_unix) {
		int ret = rgpu_unix_connect(S.host, timeout_ms, c);
		if (ret)
			snprintf(why, whylen, "cannot connect to %s: %s", S.server, strerror(errno));
		return ret;
	}
	return rgpu_connect(S.host, S.port, timeout_ms, S.tls, S.tls_name[0] ? S.tls_name : NULL,
			    c, why, whylen);
}

/* The link c, whose server's reply said so, moves to shared memory: 0, or an error with why. */
static int shm_offer(struct rgpu_conn *c, char *why, size_t whylen)
{
	struct rgpu_shm_opts o = {
		.ring_size = 2u << 20,
		.slot_size = RGPU_COPY_CHUNK,
		.nslots = 8,
		.nstage = 16,
	};
	ip_arena_opts(&o.arena);
	return rgpu_shm_offer(c, &o, IP_HELLO_TIMEOUT_MS, why, whylen);
}

static CUresult hello(int connect_ms)
{
	char cwhy[512];
	Rgpu__HelloReply *rep = NULL;
	char why[600] = "";
	uint64_t backoff_us = 2000, deadline = rgpu_now_ns() + 10000000000ull;
	int ret;
	CUresult r;

	/*
	 * A link that breaks during the handshake (before the session has a job to resume) is
	 * tried again from the start, for up to 10 s; a refusal is final. S.conn is NULL when the
	 * first TLS handshake broke (ip_session_open). A TLS refusal (RGPU_ETLS: an untrusted
	 * certificate, a server with TLS off) is final too.
	 */
	ret = RGPU_ECLOSED;
	for (;;) {
		if (S.conn) {
			ret = exchange_hello(S.conn, 0, IP_HELLO_TIMEOUT_MS, &rep, why, sizeof(why));
			if (ret != RGPU_ECLOSED && ret != RGPU_ETRUNC && ret != RGPU_EIO)
				break;
			rgpu_conn_close(S.conn);
			S.conn = NULL;
			pr_info("the handshake with %s broke (%s); trying again", S.server,
				rgpu_strerror(ret));
		}
		do {
			if (rgpu_now_ns() + backoff_us * 1000 > deadline)
				goto lost;
			struct timespec ts = {0, (long)backoff_us * 1000};
			nanosleep(&ts, NULL);
			backoff_us = MIN(backoff_us * 2, 500000ull);
			ret = ip_connect(connect_ms, &S.conn, cwhy, sizeof(cwhy));
			if (ret == RGPU_ETLS) {
				snprintf(why, sizeof(why), "%s", cwhy);
				goto lost;
			}
		} while (ret);
	}
lost:
	if (ret == RGPU_ETLS) {
		pr_err("no TLS with the GPU server %s: %s", S.server, why);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (ret == RGPU_EPROTO) {
		pr_err("the GPU server %s refused the session: %s", S.server, why);
		return CUDA_ERROR_NO_DEVICE;
	}
	if (ret == RGPU_EAUTH) {
		pr_err("the GPU server %s: %s", S.server, why);
		return CUDA_ERROR_NOT_PERMITTED;
	}
	if (ret) {
		pr_err("no answer from the GPU server %s: %s", S.server, rgpu_strerror(ret));
		return CUDA_ERROR_NO_DEVICE;
	}
	if (rep->result == CUDA_ERROR_NOT_PERMITTED) {
		pr_err("the GPU server %s refused this client: %s", S.server, rep->error);
		r = CUDA_ERROR_NOT_PERMITTED;
		goto out;
	}
	if (rep->result != CUDA_SUCCESS) {
		pr_err("the GPU server %s cannot serve: %s", S.server, rep->error);
		r = (CUresult)rep->result;
		goto out;
	}
	/* every message family this client may send must be one the server knows */
	const uint64_t need = RGPU_CAPS_CLIENT;
	if ((rep->capabilities & need) != need) {
		pr_err("the GPU server %s lacks capabilities this client needs (has %#llx, needs %#llx)",
		       S.server, (unsigned long long)rep->capabilities, (unsigned long long)need);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (rep->protocol_version != RGPU_PROTO_VERSION || rep->n_devices == 0 ||
	    rep->window_size == 0 || rep->job_id.len != IP_JOB_ID_LEN ||
	    rep->resume_token.len != IP_TOKEN_LEN) {
		pr_err("the GPU server %s answered protocol %u with %zu devices", S.server,
		       rep->protocol_version, rep->n_devices);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	/* the worker stops reading past its bound: keep no more than that waiting for it */
	if (rep->max_queued && S.kept_max > rep->max_queued) {
		pr_info("RGPU_UNACKED_MAX lowered to %llu bytes, the GPU server's queue bound",
			(unsigned long long)rep->max_queued);
		S.kept_max = rep->max_queued;
	}
	if ((S.dev_base || S.nsel) && !(rep->capabilities & RGPU_CAP_DEVICE_SELECT)) {
		pr_err("the GPU server %s cannot number its devices from %d or choose among them "
		       "(an rgpud older than RGPU_SERVERS)", S.server, S.dev_base);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if ((S.nsel && rep->n_devices != (size_t)S.nsel) ||
	    rep->n_devices > (size_t)(IP_MAX_DEVICES - S.dev_base)) {
		pr_err("the GPU server %s offers %zu device(s): %d asked for, room for %d more "
		       "(at most %d in all)", S.server, rep->n_devices, S.nsel,
		       IP_MAX_DEVICES - S.dev_base, IP_MAX_DEVICES);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	if (S.index && (rep->window_base != ip.vaw.base || rep->window_size != ip.vaw.size ||
			(rep->granularity ? rep->granularity : RGPU_GRANULE) != ip.vaw.granule)) {
		pr_err("the GPU server %s's device address window 0x%llx+0x%llx is not %s's "
		       "0x%llx+0x%llx: servers of one program must share it (rgpud --window)",
		       S.server, (unsigned long long)rep->window_base,
		       (unsigned long long)rep->window_size, ip_sessions[0].server,
		       (unsigned long long)ip.vaw.base, (unsigned long long)ip.vaw.size);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	S.session = rep->session_id;
	memcpy(S.job_id, rep->job_id.data, IP_JOB_ID_LEN);
	hex(S.job_id, IP_JOB_ID_LEN, S.job_hex);
	snprintf(S.shm_socket, sizeof(S.shm_socket), "%s", rep->shm_socket ? rep->shm_socket : "");
	S.lanes_offered = rep->lanes;
	atomic_store(&S.staging_size, rep->staging_size);
	S.same_host = rep->host_id && *rep->host_id && !strcmp(rep->host_id, rgpu_host_id());
	if (rep->shm && (ret = shm_offer(S.conn, why, sizeof(why)))) {
		pr_err("no shared memory with the GPU server %s: %s", S.server, why);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	S.grace_s = (int)rep->resume_grace_s;
	if (!S.index || rep->driver_version < ip.driver_version)
		ip.driver_version = rep->driver_version;
	/* what every server can do: a capability one lacks is one the program cannot count on */
	ip.server_caps = S.index ? ip.server_caps & rep->capabilities : rep->capabilities;
	S.ndev = (int)rep->n_devices;
	ip.ndev = S.dev_base + S.ndev;
	ip_route_devices(S.index, S.dev_base, S.ndev);
	for (int i = 0; i < S.ndev; i++) {
		Rgpu__DeviceInfo *d = rep->devices[i];
		struct ip_device *dv = &ip.dev[S.dev_base + i];
		snprintf(dv->name, sizeof(dv->name), "%s", d->name);
		if (d->uuid.len == 16)
			memcpy(dv->uuid.bytes, d->uuid.data, 16);
		dv->total_mem = d->total_mem;
		for (size_t a = 0; a < d->n_attributes && a < CU_DEVICE_ATTRIBUTE_MAX; a++)
			dv->attr[a] = d->attributes[a];
	}
	if (S.index) {
		pr_info("job %s on %s: device(s) %d..%d", S.job_hex, S.server, S.dev_base,
			ip.ndev - 1);
		r = CUDA_SUCCESS;
		goto out;
	}
	/*
	 * The same range, inaccessible, in this process: no host allocation can ever land on a
	 * device address, so any pointer is classified by a range check.
	 */
	const char *map_why;
	if (!rgpu_map_at(rep->window_base, rep->window_size, PROT_NONE, &map_why)) {
		pr_err("cannot reserve the device address window 0x%llx+0x%llx in this process: %s",
		       (unsigned long long)rep->window_base, (unsigned long long)rep->window_size,
		       map_why);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	/* one slice, shared by this server's devices; cut per device once all servers answered */
	if (ip_vaw_init(&ip.vaw, rep->window_base, rep->window_size,
			rep->granularity ? rep->granularity : RGPU_GRANULE, 1)) {
		pr_err("the GPU server %s offered a device address window 0x%llx+0x%llx with "
		       "granularity %llu that this client cannot use: CUDA_ERROR_NO_DEVICE",
		       S.server, (unsigned long long)rep->window_base,
		       (unsigned long long)rep->window_size,
		       (unsigned long long)rep->granularity);
		r = CUDA_ERROR_NO_DEVICE;
		goto out;
	}
	pr_info("job %s on %s: %d device(s), %s", S.job_hex, S.server, ip.ndev, ip.dev[0].name);
	r = CUDA_SUCCESS;
out:
	rgpu__hello_reply__free_unpacked(rep, NULL);
	return r;
}

/* ---- resuming ----------------------------------------------------------------------------- */

static int resume_timeout_s(void)
{
	const char *e = getenv("RGPU_RESUME_TIMEOUT_S");
	if (e && *e)
		return atoi(e);
	/* as long as the worker waits, and a little longer for a slow reconnect */
	return S.grace_s + 10;
}

/*
 * The link broke: reconnect with backoff and resume the job, in the receiver thread. Returns 1
 * when the link is up again, 0 when the session is over (it died, with one log line).
 */
static int resume(const char *why)
{
	uint64_t t0 = rgpu_now_ns(), deadline;
	uint64_t backoff_us = 1000;
	char msg[512];
	int tries = 0, hops = 0;

	if (atomic_load(&S.dead))
		return 0;
	ip_link_broken();
	if (S.closing) {
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, "closed");
		return 0;
	}
	if (S.grace_s <= 0) {
		snprintf(msg, sizeof(msg), "%s (the server keeps no job after a broken link)", why);
		ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
		return 0;
	}
	if (S.redirect_to[0]) {
		follow_redirect();
		pr_info("job %s: %s; resuming on %s", S.job_hex, why, S.server);
	} else {
		pr_info("job %s: link to %s lost (%s); resuming", S.job_hex, S.server, why);
	}
	deadline = t0 + (uint64_t)resume_timeout_s() * 1000000000ull;
	for (;;) {
		struct rgpu_conn *c = NULL;
		Rgpu__HelloReply *rep = NULL;
		char refused[320] = "";
		int ret;

		tries++;
		ret = ip_connect(2000, &c, msg, sizeof(msg));
		if (!ret)
			ret = exchange_hello(c, 1, IP_RESUME_HELLO_TIMEOUT_MS, &rep, refused,
					     sizeof(refused));
		if (ret == RGPU_EMOVED) {
			/* sent on by the server it asked (the job moved while the link was down) */
			rgpu_conn_close(c);
			if (++hops > 8) {
				snprintf(msg, sizeof(msg),
					 "job %s: sent from server to server more than 8 times, last "
					 "to %s",
					 S.job_hex, S.redirect_to);
				ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
				return 0;
			}
			follow_redirect();
			continue;
		}
		if (ret == RGPU_EPROTO || ret == RGPU_EAUTH) {
			rgpu_conn_close(c);
			snprintf(msg, sizeof(msg), "the GPU server %s refused to resume job %s: %s",
				 S.server, S.job_hex, refused);
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		if (!ret && (rep->result != CUDA_SUCCESS || !rep->resumed)) {
			snprintf(msg, sizeof(msg), "the GPU server %s did not resume job %s: %s",
				 S.server, S.job_hex, rep->error ? rep->error : "?");
			rgpu__hello_reply__free_unpacked(rep, NULL);
			rgpu_conn_close(c);
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		if (!ret && rep->received < ip_link_executed()) {
			/*
			 * A job rebuilt from a checkpoint older than what the worker had already run
			 * and this client had let go of: the calls between cannot be sent again.
			 */
			snprintf(msg, sizeof(msg),
				 "job %s on %s was restored from a checkpoint taken at call %llu, but "
				 "calls up to %llu had already run and cannot be sent again: the "
				 "program cannot go on",
				 S.job_hex, S.server, (unsigned long long)rep->received,
				 (unsigned long long)ip_link_executed());
			rgpu__hello_reply__free_unpacked(rep, NULL);
			rgpu_conn_close(c);
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		if (!ret && rep->shm && (ret = shm_offer(c, msg, sizeof(msg))))
			rgpu__hello_reply__free_unpacked(rep, NULL);
		if (!ret) {
			uint32_t lanes = rep->shm ? 0 : rep->lanes;
			atomic_store(&S.staging_size, rep->staging_size);
			ip_link_install(c, rep->received, 0);
			rgpu__hello_reply__free_unpacked(rep, NULL);
			open_lanes(c, lanes);
			atomic_fetch_add(&S.resumes, 1);
			pr_info("job %s: resumed on %s after %.3f s (%d attempt(s))", S.job_hex,
				S.server, (double)(rgpu_now_ns() - t0) / 1e9, tries);
			return 1;
		}
		rgpu_conn_close(c);
		if (atomic_load(&S.dead))
			return 0;
		if (rgpu_now_ns() + backoff_us * 1000 > deadline) {
			snprintf(msg, sizeof(msg), "could not resume job %s on %s within %d s (%s)",
				 S.job_hex, S.server, resume_timeout_s(), rgpu_strerror(ret));
			ip_session_die(CUDA_ERROR_DEVICE_UNAVAILABLE, msg);
			return 0;
		}
		struct timespec ts = {(time_t)(backoff_us / 1000000), (long)(backoff_us % 1000000) * 1000};
		nanosleep(&ts, NULL);
		backoff_us = MIN(backoff_us * 2, 500000ull);
	}
}

/* ---- opening and closing ------------------------------------------------------------------ */

/*
 * The client's credential: RGPU_KEY_FILE's key, for tenant RGPU_TENANT or the key file's name.
 * Returns 0 (with no key when RGPU_KEY_FILE is unset), or -1 with one log line.
 */
static int load_key(void)
{
	const char *file = getenv("RGPU_KEY_FILE"), *tenant = getenv("RGPU_TENANT");
	char why[600];

	if (!file || !*file) {
		if (tenant && *tenant) {
			pr_err("RGPU_TENANT=%s but no RGPU_KEY_FILE: no key to authenticate with",
			       tenant);
			return -1;
		}
		return 0;
	}
	if (tenant && *tenant) {
		if (!rgpu_tenant_valid(tenant)) {
			pr_err("RGPU_TENANT='%s' is not a tenant name (1 to %d of A-Z a-z 0-9 . _ -, "
			       "not starting with '.')",
			       tenant, RGPU_TENANT_MAX);
			return -1;
		}
		snprintf(S.tenant, sizeof(S.tenant), "%s", tenant);
	} else if (rgpu_tenant_from_path(file, S.tenant, sizeof(S.tenant))) {
		pr_err("the key file %s does not name a tenant (TENANT.key): set RGPU_TENANT", file);
		return -1;
	}
	if (rgpu_key_load(file, &S.key, why, sizeof(why))) {
		pr_err("RGPU_KEY_FILE: %s", why);
		return -1;
	}
	return 0;
}

/*
 * TLS to the server: RGPU_TLS=1, or RGPU_TLS_CA=FILE (the CA the server's certificate must chain
 * to; without it, the system's CAs), RGPU_TLS_NAME (the name the certificate must carry; by
 * default the host of RGPU_SERVER); RGPU_TLS=0 turns it off. OpenSSL is touched only here, and
 * only when TLS is asked for. Returns 0, or -1 with one log line.
 */
static int load_tls(void)
{
	const char *on = getenv("RGPU_TLS"), *ca = getenv("RGPU_TLS_CA");
	const char *name = getenv("RGPU_TLS_NAME");
	char why[800];

	if (on && *on && strcmp(on, "0") && strcmp(on, "1")) {
		pr_err("RGPU_TLS='%s': want 1 (TLS) or 0 (none)", on);
		return -1;
	}
	if (on && !strcmp(on, "0"))
		return 0;
	if (!(on && !strcmp(on, "1")) && !(ca && *ca))
		return 0;
	if (name && *name)
		snprintf(S.tls_name, sizeof(S.tls_name), "%s", name);
	if (rgpu_tls_client_new(ca, &S.tls, why, sizeof(why))) {
		pr_err("RGPU_TLS: %s", why);
		return -1;
	}
	return 0;
}

/*
 * RGPU_SERVERS=HOST:PORT[/DEV[,DEV...]][,HOST:PORT...]: the servers whose devices the program
 * sees, in order, each with the devices chosen (by the server's numbers; none: all). A bare
 * number continues the list of the server before it. Fills ip_sessions[].server and .sel.
 * Returns the number of servers, or -1 with one log line.
 */
static int parse_servers(const char *list)
{
	char buf[4096], *save = NULL, *tok;
	int n = 0;

	if (strlen(list) >= sizeof(buf)) {
		pr_err("RGPU_SERVERS is longer than %zu characters", sizeof(buf) - 1);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct ip_session *s = n ? &ip_sessions[n - 1] : NULL;
		char *end, *slash;
		long d;

		d = strtol(tok, &end, 10);
		if (*tok && !*end && s && s->nsel) { /* one more device of the server before */
			if (d < 0 || d > 255 || s->nsel == IP_MAX_DEVICES)
				goto bad;
			s->sel[s->nsel++] = (int)d;
			continue;
		}
		if (n == IP_MAX_SESSIONS) {
			pr_err("RGPU_SERVERS names more than %d servers", IP_MAX_SESSIONS);
			return -1;
		}
		s = &ip_sessions[n++];
		slash = strchr(tok, '/');
		if (slash) {
			*slash++ = '\0';
			d = strtol(slash, &end, 10);
			if (!*slash || *end || d < 0 || d > 255)
				goto bad;
			s->sel[s->nsel++] = (int)d;
		}
		snprintf(s->server, sizeof(s->server), "%s", tok);
		if (rgpu_parse_hostport(tok, "127.0.0.1", s->host, sizeof(s->host), &s->port) ||
		    s->port == 0)
			goto bad;
	}
	if (!n)
		goto bad;
	return n;
bad:
	pr_err("RGPU_SERVERS='%s' is not HOST:PORT[/DEV[,DEV...]][,HOST:PORT...]", list);
	return -1;
}

/*
 * The lanes of TCP link c, which the worker takes n of in all (HelloReply.lanes): n - 1 more
 * connections to the same server, each a lane's hello (the job's token, the link's id), each
 * attached to c once answered; when all are, large payloads are striped over them. Any that
 * fails leaves the link to carry everything alone, said in the log. Called before anything
 * reads c (the session's threads not started, or the receiver itself after a resume).
 */
static void open_lanes(struct rgpu_conn *c, uint32_t n)
{
	char why[512] = "";
	int k, ret = 0;

	if (n < 2 || !(ip.server_caps & RGPU_CAP_LANES) || S.is_unix || S.tls ||
	    rgpu_conn_is_shm(c))
		return;
	n = MIN(n, (uint32_t)tcp_lanes);
	for (k = 1; k < (int)n && !ret; k++) {
		struct rgpu_conn *lc = NULL;
		Rgpu__HelloReply *rep = NULL;
		ret = rgpu_connect(S.host, S.port, 2000, NULL, NULL, &lc, why, sizeof(why));
		if (!ret) {
			S.lane_hello = k;
			ret = exchange_hello(lc, 1, IP_RESUME_HELLO_TIMEOUT_MS, &rep, why, sizeof(why));
			S.lane_hello = 0;
		}
		if (!ret && rep->result != CUDA_SUCCESS) {
			snprintf(why, sizeof(why), "%s", rep->error ? rep->error : "refused");
			ret = RGPU_EPROTO;
		}
		if (rep)
			rgpu__hello_reply__free_unpacked(rep, NULL);
		int fd = ret ? -1 : rgpu_conn_release_fd(lc);
		if (fd >= 0) {
			lc = NULL;
			ret = rgpu_lanes_attach(c, k, fd);
			if (ret) {
				close(fd);
				snprintf(why, sizeof(why), "cannot attach it (%s)", rgpu_strerror(ret));
			}
		} else if (!ret) {
			ret = RGPU_EPROTO;
			snprintf(why, sizeof(why), "bytes after its answer");
		}
		rgpu_conn_close(lc);
	}
	if (ret) {
		pr_info("job %s: lane %d to %s: %s; large copies use the link alone", S.job_hex, k - 1,
			S.server, why[0] ? why : rgpu_strerror(ret));
		return;
	}
	rgpu_lanes_ready(c);
	pr_info("job %s: %u TCP connections to %s (large copies striped over them)", S.job_hex, n,
		S.server);
}

/*
 * A session just opened over TCP with a server on this host (its reply named this kernel and
 * a socket): move the job's link to shared memory, as a resume on that socket. Nothing has
 * run yet. Returns 0 when the link moved, or stayed on TCP as allowed (RGPU_TRANSPORT=auto),
 * -1 when RGPU_TRANSPORT=shm and it could not move (logged).
 */
static int upgrade(void)
{
	struct rgpu_conn *c = NULL;
	Rgpu__HelloReply *rep = NULL;
	char why[512] = "";
	int ret;

	if (transport == IP_TCP || rgpu_conn_is_shm(S.conn))
		return 0;
	if (!S.same_host || !S.shm_socket[0] || S.tls) {
		if (transport == IP_SHM)
			pr_err("RGPU_TRANSPORT=shm, but the GPU server %s %s", S.server,
			       S.tls ? "is reached by TLS"
			       : !S.same_host ? "is on another host"
					      : "has no socket for this host's clients (rgpud --socket)");
		return transport == IP_SHM ? -1 : 0;
	}
	ret = rgpu_unix_connect(S.shm_socket, 2000, &c);
	if (ret) {
		/* (a container without the socket mounted in, say): the TCP link is untouched */
		if (transport == IP_SHM) {
			pr_err("RGPU_TRANSPORT=shm, but %s cannot be reached: %s", S.shm_socket,
			       strerror(errno));
			return -1;
		}
		pr_info("job %s stays on TCP: %s cannot be reached (%s)", S.job_hex, S.shm_socket,
			strerror(errno));
		return 0;
	}
	ret = exchange_hello(c, 1, IP_RESUME_HELLO_TIMEOUT_MS, &rep, why, sizeof(why));
	if (!ret && (rep->result != CUDA_SUCCESS || !rep->resumed || !rep->shm)) {
		snprintf(why, sizeof(why), "the server did not move the link (%s)",
			 rep->error && *rep->error ? rep->error : "no shared memory offered");
		ret = RGPU_EPROTO;
	}
	if (!ret)
		ret = shm_offer(c, why, sizeof(why));
	if (rep)
		rgpu__hello_reply__free_unpacked(rep, NULL);
	if (!ret) {
		rgpu_conn_close(S.conn); /* the worker let it go when it took the resume */
		S.conn = c;
		pr_info("job %s: link to %s moved to shared memory (%s)", S.job_hex, S.server,
			S.shm_socket);
		return 0;
	}
	rgpu_conn_close(c);
	if (transport == IP_SHM) {
		pr_err("RGPU_TRANSPORT=shm, but the link to %s could not move: %s", S.server, why);
		return -1;
	}
	/* the worker may have taken the new link over: go back to TCP as after any break */
	pr_info("job %s stays on TCP: %s", S.job_hex, why);
	return resume("shared memory refused") ? 0 : -1;
}

/* Open session S (the calling thread is routed to it): connect, shake hands, start its threads. */
static CUresult open_one(const char *tmo, const char *max)
{
	pthread_t t;
	int ret;
	CUresult r;

	if (load_key())
		return CUDA_ERROR_NOT_PERMITTED;
	S.kept_max = IP_UNACKED_MAX;
	if (max && *max) {
		uint64_t v;
		if (rgpu_parse_size(max, &v) || v < (1u << 20))
			pr_warn("RGPU_UNACKED_MAX='%s' is not a size of at least 1M; using 64M", max);
		else
			S.kept_max = v;
	}
	if (load_tls())
		return CUDA_ERROR_NO_DEVICE;
	char why[512];
	ret = ip_connect(tmo ? atoi(tmo) : 5000, &S.conn, why, sizeof(why));
	/* a TLS handshake the link cut (not refused: that is RGPU_ETLS) is tried again by hello() */
	if (ret && !(ret == RGPU_ECLOSED && S.tls)) {
		if (S.tls && ret != RGPU_ECONNECT && ret != RGPU_ETIMEDOUT)
			pr_err("no TLS with the GPU server %s: %s", S.server, why);
		else
			pr_err("cannot reach the GPU server %s: %s (set RGPU_SERVER=HOST:PORT)",
			       S.server, why);
		return CUDA_ERROR_NO_DEVICE;
	}
	r = hello(tmo ? atoi(tmo) : 5000);
	if (r != CUDA_SUCCESS) {
		rgpu_conn_close(S.conn);
		S.conn = NULL;
		return r;
	}
	S.pid = getpid();
	S.link_up = 1;
	if (upgrade()) {
		rgpu_conn_close(S.conn);
		S.conn = NULL;
		return CUDA_ERROR_NO_DEVICE;
	}
	open_lanes(S.conn, S.lanes_offered);
	ip_statelog_init();
	atomic_store(&S.link_shm, rgpu_conn_is_shm(S.conn));
	ip_link_spin(S.conn);
	if (pthread_create(&t, NULL, receiver_main, &S) ||
	    pthread_detach(t) || pthread_create(&t, NULL, ip_link_sender_main, &S) ||
	    pthread_detach(t) || pthread_create(&t, NULL, ip_callback_main, &S) ||
	    pthread_detach(t)) {
		pr_err("cannot start the session threads");
		ip_session_die(CUDA_ERROR_OPERATING_SYSTEM, "no threads");
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	return CUDA_SUCCESS;
}

/*
 * With devices of several servers, the window cut into one slice per device (vawindow.c), the
 * same on every server, so that a device's addresses never meet another's and stay its own when
 * its server's job moves. One server keeps one slice for all its devices, as before. Returns 0,
 * or -1 with one log line.
 */
static int window_slices(int n)
{
	uint64_t base = ip.vaw.base, size = ip.vaw.size, granule = ip.vaw.granule;

	if (ip_nsessions <= 1 || n <= 1)
		return 0;
	ip_vaw_fini(&ip.vaw);
	if (ip_vaw_init(&ip.vaw, base, size, granule, n)) {
		pr_err("the device address window 0x%llx+0x%llx cannot be cut into %d slices",
		       (unsigned long long)base, (unsigned long long)size, n);
		return -1;
	}
	pr_info("device address window cut into %d slices of 0x%llx bytes", n,
		(unsigned long long)ip.vaw.part);
	return 0;
}

CUresult ip_session_open(void)
{
	const char *list = getenv("RGPU_SERVERS"), *server = getenv("RGPU_SERVER");
	const char *tmo = getenv("RGPU_CONNECT_TIMEOUT_MS");
	const char *max = getenv("RGPU_UNACKED_MAX");
	CUresult r = CUDA_SUCCESS;
	int n;

	const char *tr = getenv("RGPU_TRANSPORT"), *ln = getenv("RGPU_TCP_LANES");
	rgpu_trace_init();
	if (ln && *ln) {
		int v = atoi(ln);
		if (v < 1 || v > RGPU_MAX_LANES)
			pr_warn("RGPU_TCP_LANES='%s' is not 1..%d; using %d", ln, RGPU_MAX_LANES,
				tcp_lanes);
		else
			tcp_lanes = v;
	}
	if (tr && *tr) {
		if (!strcmp(tr, "tcp"))
			transport = IP_TCP;
		else if (!strcmp(tr, "shm"))
			transport = IP_SHM;
		else if (strcmp(tr, "auto"))
			pr_warn("RGPU_TRANSPORT='%s' is not tcp, shm or auto; using auto", tr);
	}
	if (list && *list) {
		n = parse_servers(list);
		if (n < 0)
			return CUDA_ERROR_NO_DEVICE;
	} else {
		struct ip_session *s = &ip_sessions[0];
		if (!server || !*server)
			server = RGPU_DEFAULT_SERVER;
		snprintf(s->server, sizeof(s->server), "%s", server);
		if (!strncmp(server, "unix:", 5)) {
			/* this host's rgpud by its socket: shared memory (a container, say) */
			s->is_unix = 1;
			snprintf(s->host, sizeof(s->host), "%s", server + 5);
			if (!server[5] || strlen(server + 5) >= sizeof(S.shm_socket)) {
				pr_err("RGPU_SERVER='%s' is not unix:PATH (at most %zu bytes)", server,
				       sizeof(S.shm_socket) - 1);
				return CUDA_ERROR_NO_DEVICE;
			}
		} else if (rgpu_parse_hostport(server, "127.0.0.1", s->host, sizeof(s->host),
					       &s->port) ||
			   s->port == 0) {
			pr_err("RGPU_SERVER='%s' is not HOST:PORT or unix:PATH", server);
			return CUDA_ERROR_NO_DEVICE;
		}
		n = 1;
	}
	ip_nsessions = n;
	for (int k = 0; k < n && r == CUDA_SUCCESS; k++) {
		struct ip_session *s = &ip_sessions[k];
		s->index = k;
		s->dev_base = k ? ip_sessions[k - 1].dev_base + ip_sessions[k - 1].ndev : 0;
		ip_sess_enter(s);
		r = open_one(tmo, max);
	}
	ip_sess_enter(NULL);
	/* every device its own slice of the window, at the same place on every server */
	if (r == CUDA_SUCCESS && window_slices(ip.ndev))
		r = CUDA_ERROR_NO_DEVICE;
	if (r == CUDA_SUCCESS && n > 1)
		pr_info("%d devices from %d servers", ip.ndev, n);
	return r;
}

int ip_session_peer(int k, char *to, size_t tolen, uint8_t job[16], uint8_t token[32])
{
	static const uint8_t none[IP_TOKEN_LEN];
	struct ip_session *s;
	int ret = -1;

	if (k < 0 || k >= ip_nsessions)
		return -1;
	s = &ip_sessions[k];
	/* the receiver thread owns server[] (a redirect changes it): read it under the lock too */
	pthread_mutex_lock(&s->peer_lock);
	/* peer links speak no TLS: a server this client reaches by TLS gets its copies relayed */
	if (!s->tls && memcmp(s->peer_token, none, IP_TOKEN_LEN)) {
		snprintf(to, tolen, "%s", s->server);
		memcpy(job, s->job_id, IP_JOB_ID_LEN);
		memcpy(token, s->peer_token, IP_TOKEN_LEN);
		ret = 0;
	}
	pthread_mutex_unlock(&s->peer_lock);
	return ret;
}

/*
 * At exit: say goodbye, so the worker frees the job at once instead of keeping it for a
 * resume. Only the process that opened the session may (a forked child shares the socket).
 */
static void close_one(void)
{
	if (!S.conn || atomic_load(&S.dead) || getpid() != S.pid)
		return;
	S.closing = 1;
	if (ip_link_enqueue(RGPU_MSG_GOODBYE, NULL, NULL, 0, 1, NULL, NULL))
		return;
	ip_link_flush();
	if (!(ip.server_caps & RGPU_CAP_OUTPUT))
		return;
	/*
	 * Device output the server's driver flushed while it ran the last requests (a module
	 * unloaded at exit, say) may still be on its way. The worker ends the job right after
	 * the goodbye and closes the link, which ends the session here: wait for that, at most
	 * IP_GOODBYE_WAIT_MS, so those lines reach the program's stdout before it exits.
	 */
	uint64_t until = rgpu_now_ns() + IP_GOODBYE_WAIT_MS * 1000000ull;
	pthread_mutex_lock(&S.q_lock);
	while (!atomic_load(&S.dead)) {
		struct timespec ts;
		uint64_t now = rgpu_now_ns();
		if (now >= until)
			break;
		rgpu_deadline(&ts, MIN(until - now, 10000000ull));
		pthread_cond_timedwait(&S.q_cond, &S.q_lock, &ts);
	}
	pthread_mutex_unlock(&S.q_lock);
}

__attribute__((destructor)) static void session_close(void)
{
	for (int k = 0; k < ip_nsessions; k++) {
		ip_sess_enter(&ip_sessions[k]);
		close_one();
	}
	ip_sess_enter(NULL);
	rgpu_trace_dump();
}
