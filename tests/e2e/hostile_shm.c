/*
 * Hostile clients of the shared-memory transport (issue 14) against a running rgpud on
 * simgpu, run by with_server.sh (the port is $RGPU_E2E_PORT, the server's log
 * $RGPU_E2E_LOGFILE, rgpud's pid $RGPU_E2E_PID).
 *
 *   hostile_shm PROGRAM   every case below; after each, PROGRAM (tests/progs/vecadd) must run
 *                         through the same server with RGPU_TRANSPORT=shm (so over shared
 *                         memory) and exit 0.
 *
 * A client speaks raw frames, and its shared memory is made here by hand: the memfd, the offer
 * and the reference are written out from transport/shm.c's comments (as the unit tests of
 * tests/unit/transport/test_shm.c do), never taken from the code under test, so that this
 * client can write into the rings and the shared indices what no real client would. Each
 * session first makes a PING round trip through the rings (the control: the hand-made layout
 * is right and the link works), then does its one hostile thing.
 *
 * Each hostile session runs in a process of its own (the server names a client on its socket
 * by its pid); the process tells this one its worker's pid right before the hostile write.
 * Then: the worker's log has the expected line, the worker process is gone within 1 s of the
 * write (or of the client's SIGKILL), and the server serves PROGRAM.
 *
 *   links not upgraded   want_shm on TCP, or on the socket without capability SHM, or no
 *                        want_shm on the socket: HelloReply.shm false, and the session works
 *                        on its stream (a PING)
 *   garbage in the ring  a frame with a bad magic (MSG_ERROR RGPU_EMAGIC), a well-formed
 *                        header of an unknown type (RGPU_EUNKNOWNTYPE), on a new session on the
 *                        socket and on a TCP job moved to the socket (a resume)
 *   impossible indices   the client-to-server ring's head far past tail + ring size, or behind
 *                        the server's tail (RGPU_EPROTO); the server-to-client ring's tail
 *                        ahead of anything written (the server cannot write: the job ends)
 *   references outside   MSG_MEMCPY_HTOD by reference to a slot past the last, a slot of
 *                        0xffffffff, longer than a slot, of another length than the header's,
 *                        to an arena the link lacks, to a server staging buffer, of kind 0; a
 *                        MSG_MODULE_LOAD image, and a resent copy (a duplicate the worker
 *                        drops), by reference past the last slot: RGPU_EPROTO. The same
 *                        session first copies 100000 patterned bytes to the device by
 *                        reference from slot 0 and back (through the staging buffers in the
 *                        link), every byte checked, and the server must have freed slot 0.
 *   refused offers       a memfd without F_SEAL_SHRINK, one shorter than the offer says, one
 *                        sealed against writing (the server cannot map it), no descriptor, an
 *                        arena without F_SEAL_SHRINK: the worker answers non-zero, logs why
 *                        and closes; and a client that leaves instead of offering
 *   killed clients       SIGKILL while a thread floods the ring with PINGs whose replies are
 *                        never read (both rings full: the worker's executor waits for room to
 *                        reply, its reader for the executor), and while a frame is half
 *                        written (the worker's reader waits inside the frame). The raw-level
 *                        twins of e2e.kill_client_ring, whose client reads every reply.
 *
 * At the end no process but this one may still map or hold a memfd this client made.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu_msgs.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

/* --- the link's memory, by hand (transport/shm.c) --------------------------------------------- */

/*
 * struct shm_ctl: magic "RGPUSHM1" (8), version (4), pad (4), then two struct shm_ring_ctl of
 * 256 bytes at 64 (head at +0, tail at +64, data futex at +128, room futex at +192), then the
 * slot futex at 576, slot_waits at 580 and slot_busy[64] at 584. Ring 0 (client to server) and
 * ring 1 (server to client) start at the next page, then the client's slots, then the server's
 * staging buffers.
 */
#define CTL_RING(r) (64u + 256u * (r))
#define CTL_HEAD(r) (CTL_RING(r) + 0u)
#define CTL_TAIL(r) (CTL_RING(r) + 64u)
#define CTL_DATA_FTX(r) (CTL_RING(r) + 128u)
#define CTL_ROOM_FTX(r) (CTL_RING(r) + 192u)
#define CTL_SLOT_BUSY(i) (584u + 4u * (i))
#define C2S 0
#define S2C 1
#define RING (64u << 10)
#define SLOT (4u << 20) /* RGPU_COPY_CHUNK: the server adopts staging buffers of its own size */
#define NSLOTS 2u
#define NSTAGE 2u
#define DATA_OFF 4096u
#define SLOTS_OFF (DATA_OFF + 2u * RING)
#define STAGE_OFF (SLOTS_OFF + NSLOTS * SLOT)
#define TOTAL (STAGE_OFF + NSTAGE * SLOT)
#define MEMFD_NAME "hostile-shm"

/* struct shm_offer: 56 bytes; struct shm_ref: 40 bytes, kinds 1 arena, 2 slot, 3 stage */
#define OFFER_LEN 56
#define REF_LEN 40
#define REF_ARENA 1
#define REF_SLOT 2
#define REF_STAGE 3

#define CTX 1	    /* the client id of a session's context */
#define COPY 100000 /* the control's copy: over 64 KiB, under a slot */

static int port, rgpud_pid;
static const char *logpath;
static char sock_path[108]; /* from HelloReply.shm_socket */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put_le(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(i * 131u + (i >> 9) + 7u);
}

/* --- the server's log ------------------------------------------------------------------------- */

/* Lines of the log holding a, b and c (NULL: any); the last one copied to line. */
static int log_find(const char *a, const char *b, const char *c, char *line, size_t cap)
{
	FILE *f = fopen(logpath, "r");
	char l[2048];
	int n = 0;
	while (f && fgets(l, sizeof(l), f))
		if (strstr(l, a) && (!b || strstr(l, b)) && (!c || strstr(l, c))) {
			n++;
			snprintf(line, cap, "%s", l);
		}
	if (f)
		fclose(f);
	return n;
}

static int supervisor_lines(const char *who, char *want, size_t cap)
{
	char line[2048];
	snprintf(want, cap, "supervisor: client %s: worker ", who);
	return log_find(want, NULL, NULL, line, sizeof(line));
}

/*
 * The worker the supervisor started for client `who` ("local pid N" or "127.0.0.1:PORT") after
 * `before` others for the same client (supervisor_lines before connecting).
 */
static int worker_of(const char *who, int before)
{
	char want[128], line[2048];
	for (int i = 0; i < 100; i++) {
		if (supervisor_lines(who, want, sizeof(want)) > before) {
			log_find(want, NULL, NULL, line, sizeof(line));
			return atoi(strstr(line, want) + strlen(want));
		}
		usleep(20000);
	}
	FAIL("no worker for client %s in the server's log", who);
}

/* Worker wpid logged a line holding what and also (not NULL) also; else exit 1. */
static void expect_worker_log(int wpid, const char *what, const char *also)
{
	char tag[32], line[2048];
	snprintf(tag, sizeof(tag), "rgpud[%d]", wpid);
	for (int i = 0; i < 60; i++) {
		if (log_find(tag, what, also, line, sizeof(line))) {
			printf("    log: %s", strstr(line, tag));
			return;
		}
		usleep(50000);
	}
	FAIL("worker %d never logged \"%s\"%s%s", wpid, what, also ? " with " : "",
	     also ? also : "");
}

static void expect_no_worker_log(int wpid, const char *what)
{
	char tag[32], line[2048];
	snprintf(tag, sizeof(tag), "rgpud[%d]", wpid);
	if (log_find(tag, what, NULL, line, sizeof(line)))
		FAIL("worker %d logged: %s", wpid, line);
}

/* --- the socket: the handshake, and a session that stays on it -------------------------------- */

static void put(int fd, const void *p, size_t n)
{
	if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
		FAIL("write: %s", strerror(errno));
}

static int get(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (uint8_t *)p + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void timeouts(int fd)
{
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int dial_tcp(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		FAIL("connect to port %d: %s", port, strerror(errno));
	timeouts(fd);
	return fd;
}

static int dial_unix(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		FAIL("connect to %s: %s", sock_path, strerror(errno));
	timeouts(fd);
	return fd;
}

static int local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	return ntohs(a.sin_port);
}

/* One frame from the socket, checked as a client checks; its type, or -1 at EOF. */
static int sock_frame(int fd, struct rgpu_frame_hdr *h, uint8_t *body, size_t cap)
{
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	if (get(fd, raw, sizeof(raw)))
		return -1;
	if (rgpu_frame_hdr_decode(raw, h) ||
	    rgpu_frame_check(h, RGPU_PEER_CLIENT, &rgpu_job_msgs) || h->body_len > cap ||
	    h->payload_len)
		FAIL("the server sent a malformed frame on the socket");
	if (get(fd, body, h->body_len))
		return -1;
	return h->type;
}

/*
 * A hello on fd: a new session, or (resume not NULL) that job's link moving here. Returns the
 * HelloReply, which must accept it (the caller frees it).
 */
static Rgpu__HelloReply *hello(int fd, int want_shm, uint64_t caps, const Rgpu__HelloReply *resume)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr h;
	uint8_t buf[4096];
	static uint8_t body[1 << 20];
	size_t n;

	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "hostile_shm";
	hm.client_pid = getpid();
	hm.capabilities = caps;
	hm.want_shm = want_shm;
	if (resume) {
		hm.job_id = resume->job_id;
		hm.resume_token = resume->resume_token;
	}
	n = rgpu_frame_pack(buf, RGPU_MSG_HELLO, 0, 0, resume ? resume->session_id : 0, &hm.base,
			    0);
	put(fd, buf, n);
	int t = sock_frame(fd, &h, body, sizeof(body));
	Rgpu__HelloReply *rep =
	    t == RGPU_MSG_HELLO ? rgpu__hello_reply__unpack(NULL, h.body_len, body) : NULL;
	if (!rep || !(h.flags & RGPU_FRAME_REPLY))
		FAIL("a hello was not answered (frame type %d)", t);
	if (rep->result != 0)
		FAIL("a hello was refused: %d (%s)", rep->result, rep->error);
	return rep;
}

/* A PING on a session that stays on its socket: its reply must come (MSG_ACK skipped). */
static void sock_ping(int fd, uint64_t seq, uint64_t session)
{
	struct rgpu_frame_hdr h;
	uint8_t buf[4096];
	int t;

	put(fd, buf, rgpu_frame_pack(buf, RGPU_MSG_PING, 0, seq, session, NULL, 0));
	while ((t = sock_frame(fd, &h, buf, sizeof(buf))) == RGPU_MSG_ACK)
		;
	if (t != RGPU_MSG_PING || !(h.flags & RGPU_FRAME_REPLY) || h.ref != seq)
		FAIL("PING %llu answered by frame type %d", (unsigned long long)seq, t);
}

/*
 * A link that must not move to shared memory: the reply says shm false (and names the socket
 * and this host), and the session works on its stream.
 */
static void not_upgraded(const char *what, int tcp, int want_shm, uint64_t caps)
{
	char who[64], want[128];
	int before = 0, fd, wpid;

	/* (a TCP port is new; this process connects to the socket several times) */
	snprintf(who, sizeof(who), "local pid %d", (int)getpid());
	if (!tcp)
		before = supervisor_lines(who, want, sizeof(want));
	fd = tcp ? dial_tcp() : dial_unix();
	if (tcp)
		snprintf(who, sizeof(who), "127.0.0.1:%d", local_port(fd));
	Rgpu__HelloReply *rep = hello(fd, want_shm, caps, NULL);
	wpid = worker_of(who, before);
	if (rep->shm)
		FAIL("%s: HelloReply.shm is true", what);
	if (!rep->shm_socket || strcmp(rep->shm_socket, sock_path) || !rep->host_id ||
	    !*rep->host_id)
		FAIL("%s: the reply names socket \"%s\" and host \"%s\", want \"%s\" and one", what,
		     rep->shm_socket ? rep->shm_socket : "", rep->host_id ? rep->host_id : "",
		     sock_path);
	for (uint64_t seq = 1; seq <= 3; seq++)
		sock_ping(fd, seq, rep->session_id);
	expect_no_worker_log(wpid, "moved to shared memory");
	close(fd);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	printf("  %-52s -> shm false, 3 PINGs on the stream\n", what);
}

/* --- the hand-made link ----------------------------------------------------------------------- */

struct link {
	int fd;		       /* the Unix-domain socket */
	uint8_t *m;	       /* the link memfd, TOTAL bytes */
	uint64_t session, seq; /* the session, the last seq sent */
	uint64_t rx;	       /* the last sequenced frame received (acknowledged in `ack`) */
	uint64_t wpos, rpos;   /* ring 0's head written, ring 1's tail read (private) */
	uint64_t window;       /* the job's device window */
	Rgpu__HelloReply *rep;
	int wpid; /* the worker serving it */
};

static uint64_t ld64(const struct link *l, unsigned off)
{
	return __atomic_load_n((const uint64_t *)(l->m + off), __ATOMIC_ACQUIRE);
}

static void st64(struct link *l, unsigned off, uint64_t v)
{
	__atomic_store_n((uint64_t *)(l->m + off), v, __ATOMIC_RELEASE);
}

static uint32_t ld32(const struct link *l, unsigned off)
{
	return __atomic_load_n((const uint32_t *)(l->m + off), __ATOMIC_ACQUIRE);
}

static void st32(struct link *l, unsigned off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(l->m + off), v, __ATOMIC_RELEASE);
}

/* Bump a futex word and wake its sleeper (always: a spurious wake costs the peer nothing). */
static void wake(struct link *l, unsigned off)
{
	__atomic_fetch_add((uint32_t *)(l->m + off), 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, (uint32_t *)(l->m + off), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/*
 * The offer's 56 bytes (transport/shm.c's struct shm_offer), with nfd descriptors: the link's
 * memfd, then the arena's when arena_size is not 0.
 */
static void send_offer(int fd, uint64_t total, uint64_t arena_size, const int *fds, int nfd)
{
	uint8_t b[OFFER_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {b, sizeof(b)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	memcpy(b, "RGPUSHM1", 8);
	put_le(b + 8, 1, 4);		       /* version */
	put_le(b + 12, arena_size ? 2 : 1, 4); /* descriptors: the link's, the arena's */
	put_le(b + 16, RING, 8);
	put_le(b + 24, SLOT, 8);
	put_le(b + 32, NSLOTS, 4);
	put_le(b + 36, NSTAGE, 4);
	put_le(b + 40, total, 8);
	put_le(b + 48, arena_size, 8);
	if (nfd) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
	}
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) != OFFER_LEN)
		FAIL("sending the offer: %s", strerror(errno));
}

/* The server's one-byte answer to an offer (0: accepted), or -1 if it closed without one. */
static int offer_answer(int fd)
{
	uint8_t a;
	return get(fd, &a, 1) ? -1 : a;
}

/* A memfd of size bytes with these seals (0: none). */
static int make_memfd(uint64_t size, int seals)
{
	int fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) || (seals && fcntl(fd, F_ADD_SEALS, seals)))
		FAIL("memfd: %s", strerror(errno));
	return fd;
}

/*
 * A new session on the socket asking for shared memory: the reply must say it moves. Or (tcp
 * set) a new session over TCP whose link then moves to the socket, as the interposer does
 * (a hello naming the job, on the socket). Leaves l ready for an offer; l->wpid is its worker.
 */
static void link_hello(struct link *l, int tcp)
{
	char who[64];

	memset(l, 0, sizeof(*l));
	if (tcp) {
		int t = dial_tcp();
		Rgpu__HelloReply *first = hello(t, 1, RGPU_CAPS_CLIENT, NULL);
		if (first->shm)
			FAIL("a TCP link was told to move to shared memory");
		snprintf(who, sizeof(who), "127.0.0.1:%d", local_port(t));
		l->fd = dial_unix();
		l->rep = hello(l->fd, 1, RGPU_CAPS_CLIENT, first);
		if (!l->rep->resumed)
			FAIL("the move of a TCP job to the socket was not taken as a resume");
		l->window = first->window_base;
		rgpu__hello_reply__free_unpacked(first, NULL);
		close(t);
	} else {
		l->fd = dial_unix();
		l->rep = hello(l->fd, 1, RGPU_CAPS_CLIENT, NULL);
		l->window = l->rep->window_base;
		snprintf(who, sizeof(who), "local pid %d", (int)getpid());
	}
	if (!l->rep->shm)
		FAIL("a client on the socket asking for shared memory was refused it");
	l->session = l->rep->session_id;
	l->wpid = worker_of(who, 0); /* this process's only connection to the socket */
}

/* The offer of a good link (sealed against shrinking and growing), accepted. */
static void link_up(struct link *l, int tcp)
{
	link_hello(l, tcp);
	int mfd = make_memfd(TOTAL, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	l->m = mmap(NULL, TOTAL, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (l->m == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memcpy(l->m, "RGPUSHM1", 8);
	put_le(l->m + 8, 1, 4);
	send_offer(l->fd, TOTAL, 0, &mfd, 1);
	close(mfd);
	int a = offer_answer(l->fd);
	if (a != 0)
		FAIL("a good offer was answered %d", a);
	expect_worker_log(l->wpid, "moved to shared memory", NULL);
}

/* Write n bytes into ring 0, waiting (5 s at most) for room; publish the head, wake. */
static void ring_put(struct link *l, const void *src, size_t n)
{
	const uint8_t *p = src;
	double t0 = now_s();
	while (n) {
		uint64_t used = l->wpos - ld64(l, CTL_TAIL(C2S));
		if (used >= RING) {
			if (now_s() - t0 > 5)
				FAIL("ring 0 full for 5 s");
			usleep(100);
			continue;
		}
		size_t k = n < RING - used ? n : RING - used;
		uint64_t at = l->wpos & (RING - 1);
		size_t first = k < RING - at ? k : RING - at;
		memcpy(l->m + DATA_OFF + at, p, first);
		memcpy(l->m + DATA_OFF, p + first, k - first);
		l->wpos += k;
		st64(l, CTL_HEAD(C2S), l->wpos);
		wake(l, CTL_DATA_FTX(C2S));
		p += k;
		n -= k;
	}
}

/* Read n bytes from ring 1 within 5 s: 0, or -1 when the server hung up with them not there. */
static int ring_get(struct link *l, void *dst, size_t n)
{
	uint8_t *p = dst;
	double t0 = now_s();
	while (n) {
		uint64_t avail = ld64(l, CTL_HEAD(S2C)) - l->rpos;
		if (avail > RING)
			FAIL("the server's ring index is impossible (%llu bytes ahead)",
			     (unsigned long long)avail);
		if (!avail) {
			if (hung_up(l->fd) && ld64(l, CTL_HEAD(S2C)) == l->rpos)
				return -1;
			if (now_s() - t0 > 5)
				FAIL("nothing from the server for 5 s");
			usleep(100);
			continue;
		}
		size_t k = n < avail ? n : (size_t)avail;
		uint64_t at = l->rpos & (RING - 1);
		size_t first = k < RING - at ? k : RING - at;
		memcpy(p, l->m + DATA_OFF + RING + at, first);
		memcpy(p + first, l->m + DATA_OFF + RING, k - first);
		l->rpos += k;
		st64(l, CTL_TAIL(S2C), l->rpos);
		wake(l, CTL_ROOM_FTX(S2C));
		p += k;
		n -= k;
	}
	return 0;
}

/* A frame's header and body into ring 0; its payload is the caller's to write after. */
static void link_send(struct link *l, uint16_t type, uint32_t flags, const ProtobufCMessage *m,
		      uint64_t plen)
{
	struct rgpu_frame_hdr h = {.type = type, .flags = flags, .payload_len = plen};
	uint8_t buf[4096];
	h.seq = ++l->seq;
	h.session = l->session;
	h.ack = l->rx;
	ring_put(l, buf, rgpu_frame_pack_hdr(buf, &h, m));
}

/*
 * One frame from ring 1, checked as a client checks: its type, or -1 when the server hung up
 * before one began. The body (malloc'd) in *body; a payload, sent in the ring or by reference
 * to a staging buffer, in *payload (malloc'd), both NULL if not wanted.
 */
static int link_recv(struct link *l, struct rgpu_frame_hdr *h, uint8_t **body, uint8_t **payload)
{
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	uint8_t *b, *pl;

	if (ring_get(l, raw, sizeof(raw)))
		return -1;
	if (rgpu_frame_hdr_decode(raw, h) || rgpu_frame_check(h, RGPU_PEER_CLIENT, &rgpu_job_msgs))
		FAIL("the server wrote a malformed frame into the ring");
	b = malloc(h->body_len + 1);
	pl = malloc(h->payload_len + 1);
	if (!b || !pl || ring_get(l, b, h->body_len))
		FAIL("a frame from the server cut short");
	if (h->flags & RGPU_FRAME_BYREF) {
		uint8_t r[REF_LEN];
		if (ring_get(l, r, sizeof(r)))
			FAIL("a reference from the server cut short");
		uint32_t kind, index;
		uint64_t off, len;
		memcpy(&kind, r, 4);
		memcpy(&index, r + 4, 4);
		memcpy(&off, r + 8, 8);
		memcpy(&len, r + 16, 8);
		if (kind != REF_STAGE || index >= NSTAGE || off > SLOT || len > SLOT - off ||
		    len != h->payload_len)
			FAIL("the server sent a reference outside its staging buffers");
		memcpy(pl, l->m + STAGE_OFF + (uint64_t)index * SLOT + off, len);
	} else if (ring_get(l, pl, h->payload_len)) {
		FAIL("a payload from the server cut short");
	}
	if (h->seq > l->rx)
		l->rx = h->seq;
	if (body)
		*body = b;
	else
		free(b);
	if (payload)
		*payload = pl;
	else
		free(pl);
	return h->type;
}

/*
 * Send a request and wait for its reply (MSG_ACK and other frames skipped; MSG_DATA for it
 * gathered into data, which must hold the copy). Returns the reply's body (malloc'd).
 */
static uint8_t *link_call(struct link *l, uint16_t type, const ProtobufCMessage *m, uint32_t *blen,
			  uint8_t *data, uint64_t cap)
{
	struct rgpu_frame_hdr h;
	uint8_t *body, *pl;
	uint64_t seq;

	link_send(l, type, 0, m, 0);
	seq = l->seq;
	for (;;) {
		int t = link_recv(l, &h, &body, &pl);
		if (t < 0)
			FAIL("no reply to %s: the worker hung up", rgpu_msg_name(type));
		if (t == RGPU_MSG_ERROR)
			FAIL("%s ended the session with a protocol error", rgpu_msg_name(type));
		if (t == RGPU_MSG_DATA && h.ref == seq && data) {
			Rgpu__DataChunk *dc = rgpu__data_chunk__unpack(NULL, h.body_len, body);
			if (!dc || dc->offset > cap || h.payload_len > cap - dc->offset)
				FAIL("MSG_DATA outside the copy");
			memcpy(data + dc->offset, pl, h.payload_len);
			rgpu__data_chunk__free_unpacked(dc, NULL);
		}
		free(pl);
		if ((h.flags & RGPU_FRAME_REPLY) && h.ref == seq) {
			if (t != type)
				FAIL("%s answered by %s", rgpu_msg_name(type), rgpu_msg_name(t));
			*blen = h.body_len;
			return body;
		}
		free(body);
	}
}

/* A call whose reply is a Status: its result. */
static int32_t call_status(struct link *l, uint16_t type, const ProtobufCMessage *m, uint8_t *data,
			   uint64_t cap)
{
	uint32_t blen;
	uint8_t *body = link_call(l, type, m, &blen, data, cap);
	Rgpu__Status *st = rgpu__status__unpack(NULL, blen, body);
	if (!st)
		FAIL("%s answered by an undecodable Status", rgpu_msg_name(type));
	int32_t r = st->result;
	rgpu__status__free_unpacked(st, NULL);
	free(body);
	return r;
}

/* The control: a PING through both rings. */
static void link_ping(struct link *l)
{
	if (call_status(l, RGPU_MSG_PING, NULL, NULL, 0) != 0)
		FAIL("a PING through the rings failed");
}

/*
 * After the hostile write: the worker must write MSG_ERROR with code `code` into ring 1 (what
 * came before it skipped), then hang up with nothing after it.
 */
static void expect_error_and_hangup(struct link *l, int32_t code)
{
	struct rgpu_frame_hdr h;
	uint8_t *body;
	int t;

	while ((t = link_recv(l, &h, &body, NULL)) >= 0 && t != RGPU_MSG_ERROR)
		free(body);
	if (t < 0)
		FAIL("the worker hung up without MSG_ERROR");
	Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
	free(body);
	if (!pe || pe->code != code || !pe->message || !*pe->message)
		FAIL("MSG_ERROR with code %d, want %d (%s), and a message", pe ? pe->code : 0, code,
		     rgpu_strerror(code));
	printf("    MSG_ERROR %d: %s\n", pe->code, pe->message);
	rgpu__protocol_error__free_unpacked(pe, NULL);
	if (link_recv(l, &h, NULL, NULL) != -1)
		FAIL("a frame after MSG_ERROR");
}

/* The client process tells the parent its worker, right before the hostile write. */
static int tell_fd = -1;

static void tell(int wpid)
{
	if (write(tell_fd, &wpid, sizeof(wpid)) != sizeof(wpid))
		FAIL("cannot tell the parent");
}

/* --- the cases (each in a client process of its own) ----------------------------------------- */

enum garbage { BAD_MAGIC, UNKNOWN_TYPE };

static void garbage(int how, int tcp)
{
	struct link l;
	link_up(&l, tcp);
	link_ping(&l);
	tell(l.wpid);
	if (how == BAD_MAGIC) {
		char junk[RGPU_FRAME_HDR_LEN] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
		ring_put(&l, junk, sizeof(junk));
		expect_error_and_hangup(&l, RGPU_EMAGIC);
	} else {
		struct rgpu_frame_hdr h = {.magic = RGPU_FRAME_MAGIC,
					   .version = RGPU_PROTO_VERSION,
					   .type = 999,
					   .body_len = 4,
					   .seq = l.seq + 1,
					   .session = l.session};
		uint8_t raw[RGPU_FRAME_HDR_LEN + 4] = {0};
		rgpu_frame_hdr_encode(&h, raw);
		ring_put(&l, raw, sizeof(raw));
		expect_error_and_hangup(&l, RGPU_EUNKNOWNTYPE);
	}
}

static void garbage_magic(void)
{
	garbage(BAD_MAGIC, 0);
}

static void garbage_type(void)
{
	garbage(UNKNOWN_TYPE, 0);
}

static void garbage_moved(void)
{
	garbage(BAD_MAGIC, 1);
}

static void head_beyond(void)
{
	struct link l;
	link_up(&l, 0);
	link_ping(&l);
	tell(l.wpid);
	/* the server read up to wpos: a head 5 rings on claims bytes the ring cannot hold */
	st64(&l, CTL_HEAD(C2S), l.wpos + 5ull * RING);
	wake(&l, CTL_DATA_FTX(C2S));
	expect_error_and_hangup(&l, RGPU_EPROTO);
}

static void head_behind(void)
{
	struct link l;
	link_up(&l, 0);
	link_ping(&l);
	tell(l.wpid);
	st64(&l, CTL_HEAD(C2S), l.wpos - 1);
	wake(&l, CTL_DATA_FTX(C2S));
	expect_error_and_hangup(&l, RGPU_EPROTO);
}

static void tail_ahead(void)
{
	struct link l;
	link_up(&l, 0);
	link_ping(&l);
	tell(l.wpid);
	/* read past anything the server wrote: its next write (the PING's reply) has no place */
	st64(&l, CTL_TAIL(S2C), l.rpos + 3ull * RING);
	link_send(&l, RGPU_MSG_PING, 0, NULL, 0);
	/* nothing more can come through ring 1 (its indices are what this client made them) */
	double t0 = now_s();
	while (!hung_up(l.fd)) {
		if (now_s() - t0 > 5)
			FAIL("the worker kept the link 5 s after its ring's tail went wrong");
		usleep(1000);
	}
}

/* a reference written as the client would, of the given fields */
struct ref {
	const char *what;
	uint16_t type; /* MSG_MEMCPY_HTOD or MSG_MODULE_LOAD */
	uint32_t kind, index;
	uint64_t off, len;
	uint64_t payload_len;
	int resent;	  /* under the seq of the frame before: a duplicate, dropped unread */
	const char *want; /* the worker's log */
};

#define OUTSIDE_COPY ": a copy's payload outside the shared memory, or a lane out of step (protocol error:"
#define OUTSIDE(type) ": " type " with a payload that does not match its frame (outside the shared memory, or a lane out of step) (protocol error:"

static const struct ref refs[] = {
    {"slot == nslots", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, NSLOTS, 0, COPY, COPY, 0, OUTSIDE_COPY},
    {"slot 0xffffffff", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, 0xffffffffu, 0, COPY, COPY, 0,
     OUTSIDE_COPY},
    {"longer than a slot", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, 0, 0, SLOT + 1, SLOT + 1, 0,
     OUTSIDE_COPY},
    {"length unlike the header's", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, 0, 0, COPY - 1, COPY, 0,
     OUTSIDE_COPY},
    {"the arena of a link without one", RGPU_MSG_MEMCPY_HTOD, REF_ARENA, 0, 0, COPY, COPY, 0,
     OUTSIDE_COPY},
    {"a server staging buffer", RGPU_MSG_MEMCPY_HTOD, REF_STAGE, 0, 0, COPY, COPY, 0, OUTSIDE_COPY},
    {"kind 0", RGPU_MSG_MEMCPY_HTOD, 0, 0, 0, COPY, COPY, 0, OUTSIDE_COPY},
    /* the reader reads these payloads itself (not where they lie) */
    {"a module image, slot == nslots", RGPU_MSG_MODULE_LOAD, REF_SLOT, NSLOTS, 0, COPY, COPY, 0,
     OUTSIDE("MSG_MODULE_LOAD")},
    {"a resent copy, slot == nslots", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, NSLOTS, 0, COPY, COPY, 1,
     OUTSIDE("MSG_MEMCPY_HTOD")},
};

/* A frame of type r->type whose payload is r's reference; a copy goes to the window's off. */
static void htod_byref(struct link *l, const struct ref *r, uint64_t off)
{
	uint8_t ref[REF_LEN];
	put_le(ref + 0, r->kind, 4);
	put_le(ref + 4, r->index, 4);
	put_le(ref + 8, r->off, 8);
	put_le(ref + 16, r->len, 8);
	put_le(ref + 24, 0, 8);
	put_le(ref + 32, 0, 8);
	if (r->resent)
		l->seq--;
	if (r->type == RGPU_MSG_MEMCPY_HTOD) {
		Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
		mc.dst = l->window + off;
		mc.size = r->payload_len;
		mc.ctx = CTX;
		link_send(l, RGPU_MSG_MEMCPY_HTOD, RGPU_FRAME_BYREF, &mc.base, r->payload_len);
	} else {
		Rgpu__ModuleLoad ml = RGPU__MODULE_LOAD__INIT;
		uint8_t hash[32] = {1};
		ml.module = 2;
		ml.hash.data = hash;
		ml.hash.len = sizeof(hash);
		ml.image_size = r->payload_len;
		ml.ctx = CTX;
		ml.has_image = 1;
		link_send(l, RGPU_MSG_MODULE_LOAD, RGPU_FRAME_BYREF, &ml.base, r->payload_len);
	}
	ring_put(l, ref, sizeof(ref));
}

static const struct ref *bad_ref;

static void ref_outside(void)
{
	Rgpu__CtxCreate cc = RGPU__CTX_CREATE__INIT;
	Rgpu__MemAlloc ma = RGPU__MEM_ALLOC__INIT;
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	const struct ref good = {"slot 0", RGPU_MSG_MEMCPY_HTOD, REF_SLOT, 0, 0, COPY, COPY, 0, ""};
	static uint8_t back[COPY];
	struct link l;

	link_up(&l, 0);
	link_ping(&l);
	/* the control: COPY patterned bytes to the device from slot 0, and back */
	cc.ctx = CTX;
	cc.primary = 1;
	link_send(&l, RGPU_MSG_CTX_CREATE, 0, &cc.base, 0);
	ma.map_addr = l.window;
	ma.map_size = 2u << 20;
	if (call_status(&l, RGPU_MSG_MEM_ALLOC, &ma.base, NULL, 0))
		FAIL("mapping 2 MiB at the window's base");
	for (uint64_t i = 0; i < COPY; i++)
		l.m[SLOTS_OFF + i] = pat(i);
	st32(&l, CTL_SLOT_BUSY(0), 1);
	htod_byref(&l, &good, 4096);
	mc.src = l.window + 4096;
	mc.size = COPY;
	mc.ctx = CTX;
	memset(back, 0, sizeof(back));
	if (call_status(&l, RGPU_MSG_MEMCPY_DTOH, &mc.base, back, COPY))
		FAIL("the copy back from the device failed");
	for (uint64_t i = 0; i < COPY; i++)
		if (back[i] != pat(i))
			FAIL("byte %llu of a copy by reference from slot 0 came back %#x, want %#x",
			     (unsigned long long)i, back[i], pat(i));
	if (ld32(&l, CTL_SLOT_BUSY(0)) != 0)
		FAIL("the server did not give slot 0 back after the copy");
	tell(l.wpid);
	htod_byref(&l, bad_ref, 8192);
	expect_error_and_hangup(&l, RGPU_EPROTO);
}

/* offers the worker must refuse */
enum offer_bad { NO_SEAL, SHORT, WRITE_SEALED, NO_FD, ARENA_NO_SEAL, NO_OFFER };
static int offer_bad;

static void refused_offer(void)
{
	struct link l;
	int fds[2] = {-1, -1}, nfd = 1;
	uint64_t arena = 0;

	link_hello(&l, 0);
	switch (offer_bad) {
	case NO_SEAL:
		fds[0] = make_memfd(TOTAL, 0);
		break;
	case SHORT:
		fds[0] = make_memfd(TOTAL - 4096, F_SEAL_SHRINK | F_SEAL_GROW);
		break;
	case WRITE_SEALED:
		fds[0] = make_memfd(TOTAL, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
		break;
	case NO_FD:
		nfd = 0;
		break;
	case ARENA_NO_SEAL:
		/* a good link, and a pinned-memory arena the client could shrink */
		arena = 1u << 20;
		fds[0] = make_memfd(TOTAL, F_SEAL_SHRINK | F_SEAL_GROW);
		fds[1] = make_memfd(arena, 0);
		nfd = 2;
		break;
	case NO_OFFER:
		/* the client leaves instead of offering */
		tell(l.wpid);
		close(l.fd);
		return;
	}
	tell(l.wpid);
	send_offer(l.fd, TOTAL, arena, fds, nfd);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	int a = offer_answer(l.fd);
	if (a <= 0)
		FAIL("a bad offer was answered %d, want a refusal (non-zero)", a);
	uint8_t more;
	if (read(l.fd, &more, 1) != 0)
		FAIL("the worker kept the socket open after refusing the offer");
}

/* killed while a thread floods ring 0 with PINGs, their replies never read */
static void *flood_main(void *arg)
{
	struct link *l = arg;
	for (;;)
		link_send(l, RGPU_MSG_PING, 0, NULL, 0);
	return NULL;
}

static void killed_flooding(void)
{
	struct link l;
	pthread_t t;

	link_up(&l, 0);
	link_ping(&l);
	uint64_t from = l.wpos;
	if (pthread_create(&t, NULL, flood_main, &l))
		FAIL("no thread");
	/*
	 * Until both rings are full: the worker's executor waits for room in ring 1 (holding the
	 * link's send lock), so its reader, which takes that lock for every frame's `ack`, stops
	 * reading ring 0 too. The worker is blocked both ways when the client dies.
	 */
	double t0 = now_s();
	for (;;) {
		uint64_t read = ld64(&l, CTL_TAIL(C2S)) - from;
		uint64_t held0 = ld64(&l, CTL_HEAD(C2S)) - ld64(&l, CTL_TAIL(C2S));
		uint64_t held1 = ld64(&l, CTL_HEAD(S2C)) - l.rpos;
		if (read >= RING && held0 == RING && held1 == RING)
			break;
		if (now_s() - t0 > 3)
			FAIL("the flood did not fill the rings in 3 s (%llu bytes read; the rings "
			     "hold %llu and %llu)",
			     (unsigned long long)read, (unsigned long long)held0,
			     (unsigned long long)held1);
		usleep(1000);
	}
	tell(l.wpid);
	for (;;)
		pause();
}

/* killed with half a frame in ring 0 */
static void killed_mid_frame(void)
{
	struct link l;
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	struct rgpu_frame_hdr h = {
	    .magic = RGPU_FRAME_MAGIC, .version = RGPU_PROTO_VERSION, .type = RGPU_MSG_PING};

	link_up(&l, 0);
	link_ping(&l);
	h.seq = l.seq + 1;
	h.session = l.session;
	rgpu_frame_hdr_encode(&h, raw);
	ring_put(&l, raw, 20);
	/* the server has taken those 20 bytes: it waits inside the frame */
	double t0 = now_s();
	while (ld64(&l, CTL_TAIL(C2S)) != l.wpos) {
		if (now_s() - t0 > 5)
			FAIL("the server did not read the frame's first bytes");
		usleep(1000);
	}
	tell(l.wpid);
	for (;;)
		pause();
}

/* --- the parent ------------------------------------------------------------------------------- */

/* PROGRAM through the server over shared memory: it must exit 0. */
static void serves(const char *prog)
{
	pid_t p = fork();
	int st;
	if (p == 0) {
		setenv("RGPU_TRANSPORT", "shm", 1);
		int dn = open("/dev/null", O_WRONLY);
		dup2(dn, 1);
		execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		FAIL("%s did not run over shared memory after the case (status %#x)", prog, st);
}

/* worker wpid gone (reaped by rgpud) by t0 + 1 s; its time in ms */
static int expect_gone(int wpid, double t0)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", wpid);
	while (access(path, F_OK) == 0) {
		if (now_s() - t0 > 1.0)
			FAIL("worker %d still there 1 s after the hostile write", wpid);
		usleep(5000);
	}
	return (int)((now_s() - t0) * 1000);
}

/*
 * Run client() in a process of its own. kill_ms < 0: it must exit 0 once it has seen what it
 * expects; else it is killed (SIGKILL) kill_ms after it told its worker. Then the worker's log
 * must hold `want` (on the line that names the client, "local pid N:", if peer is set), the
 * worker must be gone within 1 s of the write or the kill, and PROGRAM must be served.
 */
static void run_case(const char *what, void (*client)(void), int kill_ms, const char *want,
		     int peer, const char *prog)
{
	int p[2], wpid = 0, st;
	pid_t c;
	double t0;
	char who[64];

	if (pipe(p))
		FAIL("pipe");
	fflush(stdout);
	c = fork();
	if (c == 0) {
		close(p[0]);
		tell_fd = p[1];
		client();
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &wpid, sizeof(wpid)) != sizeof(wpid)) {
		waitpid(c, &st, 0);
		FAIL("%s: the client failed before its hostile write (status %#x)", what, st);
	}
	t0 = now_s();
	close(p[0]);
	if (kill_ms >= 0) {
		usleep((useconds_t)kill_ms * 1000);
		kill(c, SIGKILL);
		t0 = now_s();
	}
	if (waitpid(c, &st, 0) != c ||
	    (kill_ms < 0 ? !WIFEXITED(st) || WEXITSTATUS(st) : !WIFSIGNALED(st)))
		FAIL("%s: the client failed (status %#x)", what, st);
	int ms = expect_gone(wpid, t0);
	snprintf(who, sizeof(who), "local pid %d:", (int)c);
	expect_worker_log(wpid, want, peer ? who : NULL);
	serves(prog);
	printf("  %-52s -> worker %d gone after %d ms; %s served\n", what, wpid, ms,
	       strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog);
}

/* No process but this one may map or hold a memfd of ours (the workers are gone). */
static void expect_memfds_gone(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[300], line[512];

	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/maps", pid);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "/memfd:" MEMFD_NAME))
				FAIL("process %d still maps a link: %s", pid, line);
		if (f)
			fclose(f);
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		DIR *fd = opendir(path);
		struct dirent *fe;
		while (fd && (fe = readdir(fd))) {
			char l[600], target[300];
			snprintf(l, sizeof(l), "%s/%s", path, fe->d_name);
			ssize_t n = readlink(l, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				if (strstr(target, "memfd:" MEMFD_NAME))
					FAIL("process %d still holds a link's memfd", pid);
			}
		}
		if (fd)
			closedir(fd);
	}
	if (d)
		closedir(d);
}

int main(int argc, char **argv)
{
	const char *p = getenv("RGPU_E2E_PORT");
	const char *prog = argc == 2 ? argv[1] : NULL;
	double t0 = now_s();

	logpath = getenv("RGPU_E2E_LOGFILE");
	if (!p || !logpath || !getenv("RGPU_E2E_PID") || !prog) {
		fprintf(stderr, "usage: hostile_shm PROGRAM, under with_server.sh\n");
		return 2;
	}
	port = atoi(p);
	rgpud_pid = atoi(getenv("RGPU_E2E_PID"));
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* where this host's clients connect: from a HelloReply, as a client learns it */
	{
		int fd = dial_tcp();
		Rgpu__HelloReply *rep = hello(fd, 0, RGPU_CAPS_CLIENT, NULL);
		if (!rep->shm_socket || !*rep->shm_socket ||
		    strlen(rep->shm_socket) >= sizeof(sock_path))
			FAIL("the server names no socket for local clients");
		snprintf(sock_path, sizeof(sock_path), "%s", rep->shm_socket);
		rgpu__hello_reply__free_unpacked(rep, NULL);
		close(fd);
	}
	printf("links not moved to shared memory:\n");
	not_upgraded("want_shm over TCP", 1, 1, RGPU_CAPS_CLIENT);
	not_upgraded("want_shm on the socket without capability SHM", 0, 1,
		     RGPU_CAPS_CLIENT & ~(uint64_t)RGPU_CAP_SHM);
	not_upgraded("no want_shm on the socket", 0, 0, RGPU_CAPS_CLIENT);

	printf("garbage in the client-to-server ring:\n");
	run_case("a bad magic", garbage_magic, -1, ": bad frame header (bad magic)", 1, prog);
	run_case("a well-formed header of type 999", garbage_type, -1,
		 ": bad frame header (unknown message type)", 1, prog);
	run_case("a bad magic, on a TCP job moved to the socket", garbage_moved, -1,
		 ": bad frame header (bad magic)", 0, prog);

	printf("impossible ring indices:\n");
	run_case("ring 0's head 5 rings past the tail", head_beyond, -1,
		 ": bad frame header (protocol error:", 1, prog);
	run_case("ring 0's head behind the tail", head_behind, -1,
		 ": bad frame header (protocol error:", 1, prog);
	run_case("ring 1's tail past the head", tail_ahead, -1,
		 ": the ring to the client has an impossible index; closing the link", 1, prog);

	printf("payloads by reference outside the shared memory:\n");
	for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		bad_ref = &refs[i];
		run_case(refs[i].what, ref_outside, -1, refs[i].want, 1, prog);
	}

	printf("offers the server refuses:\n");
	offer_bad = NO_SEAL;
	run_case("a memfd without F_SEAL_SHRINK", refused_offer, -1,
		 "the link memory could shrink (no F_SEAL_SHRINK)", 1, prog);
	offer_bad = SHORT;
	run_case("a memfd shorter than the offer says", refused_offer, -1,
		 "the link memory is not a file of", 1, prog);
	offer_bad = WRITE_SEALED;
	run_case("a memfd sealed against writing", refused_offer, -1,
		 "cannot map the shared memory", 1, prog);
	offer_bad = NO_FD;
	run_case("no descriptor", refused_offer, -1, "a shared-memory offer out of bounds", 1,
		 prog);
	offer_bad = ARENA_NO_SEAL;
	run_case("an arena without F_SEAL_SHRINK", refused_offer, -1,
		 "the pinned-memory arena could shrink (no F_SEAL_SHRINK)", 1, prog);
	offer_bad = NO_OFFER;
	run_case("the client leaves instead of offering", refused_offer, -1,
		 "no shared-memory offer (connection closed", 1, prog);

	printf("clients killed:\n");
	run_case("SIGKILL while a thread floods the ring with PINGs", killed_flooding, 100,
		 "the client on this host is gone", 0, prog);
	run_case("SIGKILL with half a frame in the ring", killed_mid_frame, 100,
		 "the client on this host is gone", 0, prog);

	expect_memfds_gone();
	if (kill(rgpud_pid, 0))
		FAIL("rgpud is gone");
	printf("hostile_shm: every case refused or freed within 1 s, the server still serving "
	       "(%.1f s)\n",
	       now_s() - t0);
	return 0;
}
