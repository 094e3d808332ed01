/*
 * Unit tests of TCP lanes (transport/lanes.c, and their use in tcp.c and conn.c; testing.md,
 * tier 1), over real loopback TCP connections (127.0.0.1, a listening socket of the test's own):
 * frames both ways over links of 1, 3 and 7 lanes, the striped ones (1 MiB .. 16 MiB, odd sizes
 * too) among small ones, read whole, read as a payload and dropped; what goes on each socket,
 * byte for byte; receivers without their lanes; lanes out of step, cut, or silent; and the
 * attach errors and the lanes' threads.
 *
 * White-box (transport/conn_priv.h): the conn's lanes_frame. The wire format (the stripe header:
 * magic "RGLN", its length in 4 bytes, the frame's seq in 8, little-endian; a payload of len
 * bytes over 1 + n sockets in stripes of len / (n + 1) bytes rounded up to 4 KiB, the link's own
 * socket first, the last stripes shorter or empty) is written out here by hand from lanes.c's
 * opening comment and its stripe(), never taken from the code under test. Payloads are
 * patterned per frame and per byte (a byte moved by a multiple of 4 KiB changes too), so a
 * stripe lost, swapped or taken from another frame fails a comparison.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "conn_priv.h" /* white-box: lanes_frame */
#include "rgpu_msgs.h"

#define MiB (1ull << 20)
#define LANE_MIN ((uint64_t)RGPU_LANE_MIN)
#define HL RGPU_FRAME_HDR_LEN
#define STRIPE_HDR 16
#define ALL_LANES(n) ((1u << ((n) + 1)) - 2u) /* bits 1..n */

_Static_assert(RGPU_LANE_MIN == 1048576, "RGPU_LANE_MIN is 1 MiB");
_Static_assert(RGPU_FRAME_LANES == 0x4, "RGPU_FRAME_LANES");
_Static_assert(RGPU_MSG_MEMCPY_HTOD == 23, "MSG_MEMCPY_HTOD");
_Static_assert(RGPU_MSG_DATA == 27, "MSG_DATA");
_Static_assert(RGPU_MSG_PING == 4, "MSG_PING");

/* --- helpers ---------------------------------------------------------------------------------- */

static uint8_t pat(uint32_t frame, uint64_t i)
{
	return (uint8_t)(i * 131u + frame * 29u + (i >> 9) + ((i >> 17) * 7u) + 1u);
}

static void fill(uint8_t *p, uint64_t len, uint32_t frame)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = pat(frame, i);
}

/* p holds bytes [off, off + len) of frame's payload */
static void check_pat(const uint8_t *p, uint64_t off, uint64_t len, uint32_t frame)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != pat(frame, off + i))
			fail_msg("frame %u payload byte %llu: 0x%02x, want 0x%02x", frame,
				 (unsigned long long)(off + i), p[i], pat(frame, off + i));
}

static void put_le(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

/* The stripe header by hand: "RGLN", length (4 bytes), the frame's seq (8), little-endian. */
static void stripe_hdr(uint8_t out[STRIPE_HDR], uint32_t len, uint64_t seq)
{
	memcpy(out, "RGLN", 4);
	put_le(out + 4, len, 4);
	put_le(out + 8, seq, 8);
}

/* Stripe k (0: the link's own socket) of a len-byte payload over 1 + n sockets. */
static void stripe_of(uint64_t len, int n, int k, uint64_t *off, uint64_t *part)
{
	uint64_t per = (len + (uint64_t)n) / (uint64_t)(n + 1); /* len / (n + 1), rounded up */
	per = (per + 4095) / 4096 * 4096;
	*off = per * (uint64_t)k < len ? per * (uint64_t)k : len;
	*part = len - *off < per ? len - *off : per;
}

static void set_rcvtimeo(int fd, int sec)
{
	struct timeval tv = {.tv_sec = sec};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		p += w;
		len -= (size_t)w;
	}
}

static void read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = recv(fd, p, len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail_msg("read_all: %zd (%s) with %zu bytes to go", r, strerror(errno),
				 len);
		p += r;
		len -= (size_t)r;
	}
}

/* The peer closed its end (within the socket's receive timeout): EOF, no stray bytes. */
static void expect_eof(int fd)
{
	uint8_t b;
	ssize_t r;
	do
		r = recv(fd, &b, 1, 0);
	while (r < 0 && errno == EINTR);
	if (r != 0)
		fail_msg("want EOF on fd %d: %zd (%s)", fd, r, r < 0 ? strerror(errno) : "a byte");
}

static int nthreads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The task count back to want (an exited thread leaves /proc a moment after its join). */
static void expect_threads(int want)
{
	for (int i = 0; i < 200 && nthreads() != want; i++)
		usleep(5000);
	assert_int_equal(nthreads(), want);
}

static double ms_since(uint64_t t0)
{
	return (double)(rgpu_now_ns() - t0) / 1e6;
}

/* --- links over loopback TCP ------------------------------------------------------------------ */

static int lfd = -1;
static int lport;

/* A connected pair: *cli the connecting end, *srv the accepted one. */
static void sock_pair(int *cli, int *srv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)lport)};
	int fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	*srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*srv >= 0);
	*cli = fd;
}

/*
 * A link: the link's own socket pair ([0]) and n lanes ([1..n]). Each end is a conn (with the
 * lanes whose bits are set attached, and rgpu_lanes_ready when asked) or raw: the test reads
 * and writes that end's sockets by hand. The fds of attached lanes stay known (white-box: a
 * test cuts them); the conn owns them.
 */
struct link {
	struct rgpu_conn *cli, *srv; /* NULL: that end is raw */
	int n;
	int cfd[RGPU_MAX_LANES], sfd[RGPU_MAX_LANES];
	unsigned cown, sown; /* the fds its conn owns: bit 0 the link's socket, bit k lane k */
};

static struct rgpu_conn *end_up(int *fd, int n, unsigned lanes, int ready, unsigned *own)
{
	struct rgpu_conn *c = rgpu_tcp_wrap(fd[0]);
	assert_non_null(c);
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	*own = 1;
	for (int k = 1; k <= n; k++)
		if (lanes & (1u << k)) {
			assert_int_equal(rgpu_lanes_attach(c, k, fd[k]), 0);
			*own |= 1u << k;
		}
	if (ready)
		rgpu_lanes_ready(c);
	return c;
}

/* cli_lanes / srv_lanes: -1 raw end, else the bits of the lanes attached */
static void link_open(struct link *l, int n, int cli_lanes, int cli_ready, int srv_lanes,
		      int srv_ready)
{
	memset(l, 0, sizeof(*l));
	l->n = n;
	for (int k = 0; k <= n; k++) {
		sock_pair(&l->cfd[k], &l->sfd[k]);
		/*
		 * a reader that waits too long fails instead of hanging (the conns' sockets too,
		 * as in test_frame.c; where that could pass for the error a test wants, the test
		 * checks how long it took)
		 */
		set_rcvtimeo(l->cfd[k], 5);
		set_rcvtimeo(l->sfd[k], 5);
	}
	if (cli_lanes >= 0)
		l->cli = end_up(l->cfd, n, (unsigned)cli_lanes, cli_ready, &l->cown);
	if (srv_lanes >= 0)
		l->srv = end_up(l->sfd, n, (unsigned)srv_lanes, srv_ready, &l->sown);
}

/* Close one end (srv: the server's): its conn, or its raw sockets; the other end stays. */
static void end_close(struct link *l, int srv)
{
	struct rgpu_conn **c = srv ? &l->srv : &l->cli;
	int *fd = srv ? l->sfd : l->cfd;
	unsigned *own = srv ? &l->sown : &l->cown;

	rgpu_conn_close(*c);
	*c = NULL;
	for (int k = 0; k <= l->n; k++)
		if (!(*own & (1u << k)) && fd[k] >= 0)
			close(fd[k]);
	*own = ~0u; /* nothing left to close */
}

static void link_close(struct link *l)
{
	end_close(l, 0);
	end_close(l, 1);
	memset(l, 0, sizeof(*l));
}

/*
 * Close a lane's socket under its conn, as the kernel does when the process at that end dies:
 * wake whoever waits on it (shutdown), then let dup2 close the socket itself (a reset, with
 * bytes unread) and leave an unconnected socket at its number for the conn to close later.
 */
static void lane_kill(int fd)
{
	int spare = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(spare >= 0);
	shutdown(fd, SHUT_RDWR);
	assert_int_equal(dup2(spare, fd), fd);
	close(spare);
}

/* --- frames ----------------------------------------------------------------------------------- */

/*
 * Frame idx of a direction: client to server a MSG_MEMCPY_HTOD (a MSG_PING when len is 0),
 * server to client a MSG_DATA (the PING's reply when len is 0). Bodies and header fields carry
 * idx, so a frame out of place shows.
 */
struct frame {
	struct rgpu_frame_hdr h;
	Rgpu__Memcpy mc;
	Rgpu__DataChunk dc;
	const ProtobufCMessage *body;
};

static void make_frame(struct frame *f, int back, uint32_t idx, uint64_t len)
{
	memset(f, 0, sizeof(*f));
	f->h.seq = (back ? 5000u : 1000u) + idx;
	f->h.session = 0x5e55;
	f->h.ack = 300 + idx;
	f->h.payload_len = len;
	if (!back && !len) {
		f->h.type = RGPU_MSG_PING;
	} else if (!back) {
		rgpu__memcpy__init(&f->mc);
		f->h.type = RGPU_MSG_MEMCPY_HTOD;
		f->mc.dst = 0x7f0000000000ull + (uint64_t)idx * 0x100000;
		f->mc.size = len;
		f->mc.stream = idx + 1;
		f->mc.ctx = 3;
		f->body = &f->mc.base;
	} else if (!len) {
		f->h.type = RGPU_MSG_PING;
		f->h.flags = RGPU_FRAME_REPLY;
		f->h.ref = 1000 + idx;
	} else {
		rgpu__data_chunk__init(&f->dc);
		f->h.type = RGPU_MSG_DATA;
		f->dc.offset = 0x10000 + idx;
		f->body = &f->dc.base;
	}
}

enum { READ_PAYLOAD, READ_RECV, READ_DISCARD };

/*
 * Receive frame idx (len payload bytes, frame id fid) and check it; its payload read with
 * rgpu_conn_recv_payload, rgpu_conn_recv or dropped (mode). striped: the sender's lanes carry it.
 */
static void expect_frame(struct rgpu_conn *c, int back, uint32_t idx, uint64_t len, uint32_t fid,
			 int striped, int mode, uint8_t *buf)
{
	struct frame f;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	int ret;

	make_frame(&f, back, idx, len);
	memset(&h, 0, sizeof(h));
	ret = rgpu_frame_recv(c, back ? RGPU_PEER_CLIENT : RGPU_PEER_SERVER, &h, &body);
	if (ret)
		fail_msg("%s frame %u (%llu bytes): rgpu_frame_recv %d (%s)",
			 back ? "back" : "forth", idx, (unsigned long long)len, ret,
			 rgpu_strerror(ret));
	assert_int_equal(h.type, f.h.type);
	assert_int_equal(h.flags, f.h.flags | (striped ? RGPU_FRAME_LANES : 0));
	assert_int_equal(h.payload_len, len);
	assert_int_equal(h.seq, f.h.seq);
	assert_int_equal(h.session, 0x5e55);
	assert_int_equal(h.ack, 300 + idx);
	assert_int_equal(h.ref, f.h.ref);
	assert_int_equal(c->lanes_frame, striped);
	if (f.h.type == RGPU_MSG_MEMCPY_HTOD) {
		Rgpu__Memcpy *m = rgpu__memcpy__unpack(NULL, h.body_len, body);
		assert_non_null(m);
		assert_int_equal(m->dst, f.mc.dst);
		assert_int_equal(m->size, len);
		assert_int_equal(m->stream, idx + 1);
		assert_int_equal(m->ctx, 3);
		rgpu__memcpy__free_unpacked(m, NULL);
	} else if (f.h.type == RGPU_MSG_DATA) {
		Rgpu__DataChunk *d = rgpu__data_chunk__unpack(NULL, h.body_len, body);
		assert_non_null(d);
		assert_int_equal(d->offset, 0x10000 + idx);
		rgpu__data_chunk__free_unpacked(d, NULL);
	} else {
		assert_int_equal(h.body_len, 0);
		assert_null(body);
	}
	free(body);
	if (!len)
		return;
	if (mode == READ_DISCARD) {
		assert_int_equal(rgpu_conn_discard(c, len), 0);
		return;
	}
	memset(buf, 0xa5, len + 1);
	ret = mode == READ_RECV ? rgpu_conn_recv(c, buf, len) : rgpu_conn_recv_payload(c, buf, len);
	if (ret)
		fail_msg("frame %u: payload of %llu bytes (mode %d): %d (%s)", idx,
			 (unsigned long long)len, mode, ret, rgpu_strerror(ret));
	check_pat(buf, 0, len, fid);
	assert_int_equal(buf[len], 0xa5); /* not a byte more */
}

/* --- 1. frames both ways ---------------------------------------------------------------------- */

struct step {
	uint64_t len; /* 0: a PING (back: its reply) */
	int batch;    /* frames of one batch (not 0) go in one rgpu_conn_sendv */
};

static const struct step steps[] = {
    {0, 0},
    {LANE_MIN, 0},
    {100, 0},
    {4 * MiB, 0},
    {0, 0},
    {4 * MiB + 13, 0},
    {100, 0},
    {16 * MiB, 0},
    {LANE_MIN - 1, 0}, /* one byte short: the link alone */
    {4 * MiB, 0},      /* striped frames back to back */
    {4 * MiB + 13, 0},
    {LANE_MIN, 0},
    {0, 0},
    /* one sendv of several frames: tcp.c must find each frame's header in the entries */
    {0, 1},
    {LANE_MIN, 1},
    {100, 1},
    {2 * MiB + 4095, 1},
    {0, 1},
    {100, 0},
};
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

static uint32_t fid_of(int back, int nidx, uint32_t idx)
{
	return (uint32_t)back * 1000u + (uint32_t)nidx * 100u + idx;
}

struct writer {
	struct rgpu_conn *c;
	int back, nidx;
	int ret;
	uint32_t at;
	pthread_t th;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	for (uint32_t i = 0; i < NSTEPS && !w->ret;) {
		struct frame f[8];
		uint8_t hdr[8][256];
		uint8_t *pl[8] = {0};
		struct iovec iov[16];
		uint32_t j = i;
		int k = 0, m = 0;

		w->at = i;
		do {
			uint64_t len = steps[j].len;
			make_frame(&f[m], w->back, j, len);
			if (len) {
				pl[m] = malloc(len);
				if (!pl[m]) {
					w->ret = RGPU_ENOMEM;
					break;
				}
				fill(pl[m], len, fid_of(w->back, w->nidx, j));
			}
			iov[k].iov_base = hdr[m];
			iov[k++].iov_len = rgpu_frame_pack_hdr(hdr[m], &f[m].h, f[m].body);
			if (len) {
				iov[k].iov_base = pl[m];
				iov[k++].iov_len = len;
			}
			m++;
			j++;
		} while (j < NSTEPS && steps[i].batch && steps[j].batch == steps[i].batch);
		if (!w->ret)
			w->ret = m == 1 ? rgpu_frame_send_hdr(w->c, &f[0].h, f[0].body, pl[0])
					: rgpu_conn_sendv(w->c, iov, k);
		for (int q = 0; q < m; q++)
			free(pl[q]);
		i = j;
	}
	return NULL;
}

static void both_ways(int n, int nidx)
{
	struct link l;
	struct writer fw = {0}, bw = {0};
	uint8_t *buf = malloc(16 * MiB + 1);
	int big = 0;

	assert_non_null(buf);
	link_open(&l, n, (int)ALL_LANES(n), 1, (int)ALL_LANES(n), 1);
	assert_int_equal(rgpu_lanes_count(l.cli), n);
	assert_int_equal(rgpu_lanes_count(l.srv), n);
	fw = (struct writer){.c = l.cli, .back = 0, .nidx = nidx};
	bw = (struct writer){.c = l.srv, .back = 1, .nidx = nidx};
	assert_int_equal(pthread_create(&fw.th, NULL, writer_main, &fw), 0);
	assert_int_equal(pthread_create(&bw.th, NULL, writer_main, &bw), 0);
	for (uint32_t i = 0; i < NSTEPS; i++) {
		uint64_t len = steps[i].len;
		int striped = len >= LANE_MIN;
		/* each way of reading a striped payload meets every size over the three links */
		int mode = striped ? (big++ + nidx) % 3 : READ_PAYLOAD;
		expect_frame(l.srv, 0, i, len, fid_of(0, nidx, i), striped, mode, buf);
		expect_frame(l.cli, 1, i, len, fid_of(1, nidx, i), striped, (mode + 1) % 3, buf);
	}
	pthread_join(fw.th, NULL);
	pthread_join(bw.th, NULL);
	if (fw.ret || bw.ret)
		fail_msg("writers: forth %d at %u, back %d at %u", fw.ret, fw.at, bw.ret, bw.at);

	/* nothing else came, on the link or on its lanes */
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	end_close(&l, 0);
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), RGPU_ECLOSED);
	link_close(&l);
	free(buf);
}

static void test_both_ways_1(void **state)
{
	(void)state;
	both_ways(1, 0);
}

static void test_both_ways_3(void **state)
{
	(void)state;
	both_ways(3, 1);
}

static void test_both_ways_7(void **state)
{
	(void)state;
	both_ways(7, 2);
}

/* --- what goes on each socket ----------------------------------------------------------------- */

struct one_send {
	struct rgpu_conn *c;
	const struct iovec *iov;
	int n;
	int ret;
	pthread_t th;
};

static void *one_send_main(void *arg)
{
	struct one_send *s = arg;
	s->ret = rgpu_conn_sendv(s->c, s->iov, s->n);
	return NULL;
}

static void one_send_start(struct one_send *s, struct rgpu_conn *c, const struct iovec *iov, int n)
{
	*s = (struct one_send){.c = c, .iov = iov, .n = n};
	assert_int_equal(pthread_create(&s->th, NULL, one_send_main, s), 0);
}

static int one_send_join(struct one_send *s)
{
	pthread_join(s->th, NULL);
	return s->ret;
}

/* Read one frame's header and body off the raw link socket and check them. */
static void raw_expect_hdr(int fd, uint16_t type, uint32_t flags, uint32_t body_len,
			   uint64_t payload_len, uint64_t seq)
{
	uint8_t got[HL + 64];
	struct rgpu_frame_hdr h;
	assert_true(body_len <= 64);
	read_all(fd, got, HL + body_len);
	assert_int_equal(rgpu_frame_hdr_decode(got, &h), 0);
	assert_int_equal(h.type, type);
	assert_int_equal(h.flags, flags);
	assert_int_equal(h.body_len, body_len);
	assert_int_equal(h.payload_len, payload_len);
	assert_int_equal(h.seq, seq);
}

/* a payload's stripe k of a striped frame off its raw socket: header, then the bytes */
static void raw_expect_stripe(int fd, uint64_t len, int n, int k, uint64_t seq, uint32_t fid,
			      uint8_t *buf)
{
	uint64_t off, part;
	uint8_t want[STRIPE_HDR], got[STRIPE_HDR];
	stripe_of(len, n, k, &off, &part);
	if (k) {
		read_all(fd, got, STRIPE_HDR);
		stripe_hdr(want, (uint32_t)part, seq);
		assert_memory_equal(got, want, STRIPE_HDR);
	}
	read_all(fd, buf, part);
	check_pat(buf, off, part, fid);
}

/*
 * A sender with 3 lanes, its peer raw: a striped frame's header (with RGPU_FRAME_LANES) and body
 * then the first stripe on the link, stripe k on lane k behind its 16-byte header; the frames
 * that must not be striped (by reference; one byte short; the payload inside the header's
 * entry) whole on the link.
 */
static void test_wire(void **state)
{
	(void)state;
	struct link l;
	struct one_send s;
	const uint64_t len = 4 * MiB + 13, seq = 0x1122334455667788ull;
	uint8_t *p = malloc(len), *buf = malloc(len);
	uint8_t hdr[256];
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_MEMCPY_HTOD, .payload_len = len, .seq = seq};
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	struct iovec iov[2];

	assert_non_null(p);
	assert_non_null(buf);
	fill(p, len, 7);
	mc.dst = 0x1000;
	mc.size = len;
	link_open(&l, 3, (int)ALL_LANES(3), 1, -1, 0);

	/* striped: 1052672 bytes on the link and on lanes 1 and 2, 1036301 on lane 3 */
	iov[0] = (struct iovec){hdr, rgpu_frame_pack_hdr(hdr, &h, &mc.base)};
	iov[1] = (struct iovec){p, len};
	uint32_t blen = (uint32_t)(iov[0].iov_len - HL);
	one_send_start(&s, l.cli, iov, 2);
	raw_expect_hdr(l.sfd[0], RGPU_MSG_MEMCPY_HTOD, RGPU_FRAME_LANES, blen, len, seq);
	for (int k = 0; k <= 3; k++)
		raw_expect_stripe(l.sfd[k], len, 3, k, seq, 7, buf);
	assert_int_equal(one_send_join(&s), 0);
	uint64_t off, part;
	stripe_of(len, 3, 1, &off, &part);
	assert_int_equal(part, 1052672);
	stripe_of(len, 3, 3, &off, &part);
	assert_int_equal(part, 1036301);

	/* by reference (a shared-memory flag): never striped, the payload on the link */
	h.flags = RGPU_FRAME_BYREF;
	h.seq = seq + 1;
	iov[0].iov_len = rgpu_frame_pack_hdr(hdr, &h, &mc.base);
	one_send_start(&s, l.cli, iov, 2);
	raw_expect_hdr(l.sfd[0], RGPU_MSG_MEMCPY_HTOD, RGPU_FRAME_BYREF, blen, len, seq + 1);
	read_all(l.sfd[0], buf, len);
	check_pat(buf, 0, len, 7);
	assert_int_equal(one_send_join(&s), 0);

	/* one byte short of RGPU_LANE_MIN: on the link */
	h.flags = 0;
	h.seq = seq + 2;
	h.payload_len = LANE_MIN - 1;
	iov[0].iov_len = rgpu_frame_pack_hdr(hdr, &h, &mc.base);
	iov[1].iov_len = LANE_MIN - 1;
	one_send_start(&s, l.cli, iov, 2);
	raw_expect_hdr(l.sfd[0], RGPU_MSG_MEMCPY_HTOD, 0, blen, LANE_MIN - 1, seq + 2);
	read_all(l.sfd[0], buf, LANE_MIN - 1);
	check_pat(buf, 0, LANE_MIN - 1, 7);
	assert_int_equal(one_send_join(&s), 0);

	/* header, body and payload in one entry: on the link, and the next frame still striped */
	uint8_t *one = malloc(HL + 64 + 2 * MiB);
	assert_non_null(one);
	h.seq = seq + 3;
	h.payload_len = 2 * MiB;
	size_t hb = rgpu_frame_pack_hdr(one, &h, &mc.base);
	memcpy(one + hb, p, 2 * MiB);
	struct iovec iov3[3] = {{one, hb + 2 * MiB}, {hdr, 0}, {p, LANE_MIN}};
	h.seq = seq + 4;
	h.payload_len = LANE_MIN;
	iov3[1].iov_len = rgpu_frame_pack_hdr(hdr, &h, &mc.base);
	one_send_start(&s, l.cli, iov3, 3);
	raw_expect_hdr(l.sfd[0], RGPU_MSG_MEMCPY_HTOD, 0, blen, 2 * MiB, seq + 3);
	read_all(l.sfd[0], buf, 2 * MiB);
	check_pat(buf, 0, 2 * MiB, 7);
	raw_expect_hdr(l.sfd[0], RGPU_MSG_MEMCPY_HTOD, RGPU_FRAME_LANES, blen, LANE_MIN, seq + 4);
	for (int k = 0; k <= 3; k++)
		raw_expect_stripe(l.sfd[k], LANE_MIN, 3, k, seq + 4, 7, buf);
	assert_int_equal(one_send_join(&s), 0);
	free(one);

	/* nothing else on any socket */
	end_close(&l, 0);
	for (int k = 0; k <= 3; k++)
		expect_eof(l.sfd[k]);
	link_close(&l);
	free(p);
	free(buf);
}

/* --- 2. receivers without their lanes --------------------------------------------------------- */

/*
 * A sender with 3 lanes, ready, sends a striped frame to a receiver with the lanes srv_lanes
 * (bits), ready or not: rgpu_frame_recv's verdict (*fret) and the header it read; with keep, the
 * payload's too (returned; read whole and checked when it succeeds, and the link is left open).
 * Otherwise the receiver's end is closed before the sender is joined (its stripes may have
 * nowhere to go), and then the link.
 */
static int striped_to(int srv_lanes, int srv_ready, struct rgpu_frame_hdr *h, struct link *l,
		      int keep, int *fret)
{
	struct one_send s;
	uint8_t hdr[256], *body = NULL;
	uint8_t *p = malloc(LANE_MIN), *buf = malloc(LANE_MIN + 1);
	struct rgpu_frame_hdr sh = {
	    .type = RGPU_MSG_MEMCPY_HTOD, .payload_len = LANE_MIN, .seq = 77};
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	struct iovec iov[2];
	int ret;

	assert_non_null(p);
	assert_non_null(buf);
	fill(p, LANE_MIN, 77);
	mc.dst = 0x2000;
	mc.size = LANE_MIN;
	link_open(l, 3, (int)ALL_LANES(3), 1, srv_lanes, srv_ready);
	rgpu_conn_set_frame_timeout(l->srv, 5000); /* a wait for the deadline fails, not hangs */
	iov[0] = (struct iovec){hdr, rgpu_frame_pack_hdr(hdr, &sh, &mc.base)};
	iov[1] = (struct iovec){p, LANE_MIN};
	one_send_start(&s, l->cli, iov, 2);
	memset(h, 0, sizeof(*h));
	ret = *fret = rgpu_frame_recv(l->srv, RGPU_PEER_SERVER, h, &body);
	free(body);
	if (keep && !ret) {
		memset(buf, 0xa5, LANE_MIN + 1);
		ret = rgpu_conn_recv_payload(l->srv, buf, LANE_MIN);
	}
	if (keep && !ret) {
		check_pat(buf, 0, LANE_MIN, 77);
		assert_int_equal(buf[LANE_MIN], 0xa5);
		assert_int_equal(one_send_join(&s), 0);
	} else {
		if (keep) { /* a failed payload took the link down: its next frame is the end */
			struct rgpu_frame_hdr h2;
			assert_int_equal(
			    rgpu_frame_recv_within(l->srv, RGPU_PEER_SERVER, &h2, &body, 100),
			    RGPU_ECLOSED);
		}
		end_close(l, 1);
		one_send_join(&s);
		link_close(l);
	}
	free(p);
	free(buf);
	return ret;
}

static void test_receiver_without_lanes(void **state)
{
	(void)state;
	struct rgpu_frame_hdr h;
	struct link l;
	int fret;

	/* no lanes at all */
	assert_int_equal(striped_to(0, 0, &h, &l, 0, &fret), RGPU_EPROTO);
	assert_int_equal(h.type, RGPU_MSG_MEMCPY_HTOD);
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
	assert_int_equal(h.payload_len, LANE_MIN);
	assert_int_equal(h.seq, 77);
	/* ... and told (wrongly) that the peer has them: still none here */
	assert_int_equal(striped_to(0, 1, &h, &l, 0, &fret), RGPU_EPROTO);
	/* lanes 2 and 3 but not lane 1: none usable (lanes are 1..n) */
	assert_int_equal(striped_to(0xc, 0, &h, &l, 0, &fret), RGPU_EPROTO);
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
}

/*
 * transport.h: once rgpu_lanes_attach() made a socket lane k, "c can receive striped payloads";
 * rgpu_lanes_ready() only lets c send them. A receiver with all its lanes that has not said
 * ready yet (the worker between attaching a link's last lane, whose answer tells the client to
 * stripe, and readying the link) reads a striped frame whole.
 */
static void test_receiver_attached_not_ready(void **state)
{
	(void)state;
	struct rgpu_frame_hdr h;
	struct link l;
	int fret;

	if (striped_to((int)ALL_LANES(3), 0, &h, &l, 1, &fret))
		fail_msg("attached, not ready: rgpu_frame_recv %d (%s)", fret, rgpu_strerror(fret));
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
	/* and the link goes on: a small frame back */
	assert_int_equal(
	    rgpu_frame_send(l.srv, RGPU_MSG_PING, RGPU_FRAME_REPLY, 9, 1, NULL, NULL, 0), 0);
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv(l.cli, RGPU_PEER_CLIENT, &h, &body), 0);
	assert_int_equal(h.seq, 9);
	link_close(&l);
}

/*
 * Fewer lanes than the sender (lane 1 of its 3): the stripes' lengths disagree, which the
 * payload's receive finds at once (RGPU_EPROTO), not at the frame's deadline (30 s), and the
 * link is down.
 */
static void test_receiver_fewer_lanes(void **state)
{
	(void)state;
	struct rgpu_frame_hdr h;
	struct link l;
	int fret;
	uint64_t t0 = rgpu_now_ns();

	int ret = striped_to(0x2, 0, &h, &l, 1, &fret);
	double ms = ms_since(t0);
	if (fret || ret != RGPU_EPROTO || ms > 3000)
		fail_msg("lane 1 of 3: rgpu_frame_recv %d (%s), the payload %d (%s), after %.0f ms",
			 fret, rgpu_strerror(fret), ret, rgpu_strerror(ret), ms);
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
}

/* A striped frame that claims to come by reference too: refused. */
static void test_striped_byref(void **state)
{
	(void)state;
	struct link l;
	uint8_t hdr[HL];
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	link_open(&l, 3, -1, 0, (int)ALL_LANES(3), 1);
	h = (struct rgpu_frame_hdr){.magic = RGPU_FRAME_MAGIC,
				    .version = RGPU_PROTO_VERSION,
				    .type = RGPU_MSG_DATA,
				    .flags = RGPU_FRAME_LANES | RGPU_FRAME_BYREF,
				    .payload_len = LANE_MIN,
				    .seq = 5};
	rgpu_frame_hdr_encode(&h, hdr);
	write_all(l.cfd[0], hdr, HL);
	memset(&h, 0, sizeof(h));
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_CLIENT, &h, &body), RGPU_EPROTO);
	assert_null(body);
	assert_int_equal(h.flags, RGPU_FRAME_LANES | RGPU_FRAME_BYREF);
	/* a striped frame without a payload: refused too */
	h = (struct rgpu_frame_hdr){.magic = RGPU_FRAME_MAGIC,
				    .version = RGPU_PROTO_VERSION,
				    .type = RGPU_MSG_DATA,
				    .flags = RGPU_FRAME_LANES,
				    .seq = 6};
	rgpu_frame_hdr_encode(&h, hdr);
	write_all(l.cfd[0], hdr, HL);
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_CLIENT, &h, &body), RGPU_EPROTO);
	assert_int_equal(h.seq, 6);
	link_close(&l);
}

/* --- 3. lanes out of step --------------------------------------------------------------------- */

/* Writes bytes on a raw socket from a thread (the socket may not take them all at once). */
struct raw_writer {
	int fd;
	uint8_t *buf;
	size_t len;
	pthread_t th;
};

static void *raw_writer_main(void *arg)
{
	struct raw_writer *rw = arg;
	size_t off = 0;
	while (off < rw->len) {
		ssize_t w = send(rw->fd, rw->buf + off, rw->len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the receiver gave up on this socket */
		off += (size_t)w;
	}
	return NULL;
}

/*
 * A raw sender's striped frame (seq, len) over 3 lanes to a conn with all of them: the link
 * gets the header, body and (when on_link) the first stripe; lane k its stripe behind the header
 * hdr[k] (NULL: the right one), or only the first cut[k] bytes of it all when cut[k] != 0.
 */
struct raw_frame {
	struct raw_writer w[4];
	uint8_t *bytes[4];
};

static void raw_frame_start(struct raw_frame *rf, int *fd, uint64_t seq, uint64_t len, int on_link,
			    const uint8_t *const hdr[4], const size_t cut[4])
{
	uint8_t *p = malloc(len);
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_MEMCPY_HTOD,
				   .payload_len = len,
				   .seq = seq,
				   .flags = RGPU_FRAME_LANES};
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;

	assert_non_null(p);
	fill(p, len, 33);
	mc.dst = 0x3000;
	mc.size = len;
	memset(rf, 0, sizeof(*rf));
	for (int k = 0; k <= 3; k++) {
		uint64_t off, part;
		size_t n = 0;
		stripe_of(len, 3, k, &off, &part);
		rf->bytes[k] = malloc(HL + 64 + part);
		assert_non_null(rf->bytes[k]);
		if (k == 0) {
			n = rgpu_frame_pack_hdr(rf->bytes[k], &h, &mc.base);
		} else {
			if (hdr && hdr[k])
				memcpy(rf->bytes[k], hdr[k], STRIPE_HDR);
			else
				stripe_hdr(rf->bytes[k], (uint32_t)part, seq);
			n = STRIPE_HDR;
		}
		if (k || on_link) {
			memcpy(rf->bytes[k] + n, p + off, part);
			n += part;
		}
		if (cut && cut[k])
			n = cut[k];
		rf->w[k] = (struct raw_writer){.fd = fd[k], .buf = rf->bytes[k], .len = n};
		assert_int_equal(pthread_create(&rf->w[k].th, NULL, raw_writer_main, &rf->w[k]), 0);
	}
	free(p);
}

static void raw_frame_join(struct raw_frame *rf)
{
	for (int k = 0; k <= 3; k++) {
		pthread_join(rf->w[k].th, NULL);
		free(rf->bytes[k]);
	}
}

/*
 * A lane out of step, its stripe header wrong in one field (which) on lane k: the payload's
 * receive is RGPU_EPROTO, and the link is shut down: the raw sender sees the link's end, the
 * conn's next frame is refused. on_link: whether the first stripe comes on the link at all
 * (when it does not, the lane's error must still end the wait at once, not at the frame's
 * deadline).
 */
static void out_of_step(int which, int k, int on_link)
{
	struct link l;
	struct raw_frame rf;
	const uint64_t len = 4 * MiB, seq = 0x4242;
	uint64_t off, part;
	uint8_t bad[STRIPE_HDR];
	const uint8_t *hdrs[4] = {0};
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL, *buf = malloc(len);

	assert_non_null(buf);
	stripe_of(len, 3, k, &off, &part);
	switch (which) {
	case 0: /* another frame's stripe */
		stripe_hdr(bad, (uint32_t)part, seq + 1);
		break;
	case 1: /* another length */
		stripe_hdr(bad, (uint32_t)part + 1, seq);
		break;
	default: /* not a stripe header */
		stripe_hdr(bad, (uint32_t)part, seq);
		bad[3] = 'X';
		break;
	}
	hdrs[k] = bad;
	link_open(&l, 3, -1, 0, (int)ALL_LANES(3), 1);
	rgpu_conn_set_frame_timeout(l.srv, 5000); /* a wait for the deadline fails, not hangs */
	raw_frame_start(&rf, l.cfd, seq, len, on_link, hdrs, NULL);
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), 0);
	free(body);
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
	uint64_t t0 = rgpu_now_ns();
	int ret = rgpu_conn_recv_payload(l.srv, buf, len);
	if (ret != RGPU_EPROTO)
		fail_msg("lane %d, wrong %s: %d (%s), want RGPU_EPROTO", k,
			 which == 0   ? "seq"
			 : which == 1 ? "length"
				      : "magic",
			 ret, rgpu_strerror(ret));
	assert_true(ms_since(t0) < 3000);
	/* the link is down: its socket says so to the peer, and takes no more frames */
	expect_eof(l.cfd[0]);
	assert_int_equal(rgpu_frame_recv_within(l.srv, RGPU_PEER_SERVER, &h, &body, 100),
			 RGPU_ECLOSED);
	end_close(&l, 1);
	raw_frame_join(&rf);
	link_close(&l);
	free(buf);
}

static void test_out_of_step(void **state)
{
	(void)state;
	out_of_step(0, 3, 1); /* seq, the last lane */
	out_of_step(1, 2, 1); /* length */
	out_of_step(2, 1, 1); /* magic */
	out_of_step(0, 1, 0); /* nothing on the link after the header */
}

/* --- 4. lanes cut and silent ------------------------------------------------------------------ */

#define CUT_LEN (64 * MiB) /* 16 MiB stripes: more than the sockets hold unread */
static uint8_t *cut_p, *cut_buf;

/*
 * A striped 64 MiB frame (a MSG_MODULE_LOAD) between two conns with 3 lanes; once the sender
 * has filled the sockets (the receiver has read the header only), a lane's socket dies at one
 * end (cut_srv: the receiver's, else the sender's). Both the send and the receive fail, within
 * seconds.
 */
static void cut_lane(int cut_srv, int k)
{
	struct link l;
	struct one_send s;
	uint8_t hdr[256];
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_MODULE_LOAD, .payload_len = CUT_LEN, .seq = 9};
	Rgpu__ModuleLoad ml = RGPU__MODULE_LOAD__INIT;
	struct iovec iov[2];
	uint8_t *body = NULL;

	ml.module = 1;
	ml.image_size = CUT_LEN;
	ml.has_image = 1;
	link_open(&l, 3, (int)ALL_LANES(3), 1, (int)ALL_LANES(3), 1);
	iov[0] = (struct iovec){hdr, rgpu_frame_pack_hdr(hdr, &h, &ml.base)};
	iov[1] = (struct iovec){cut_p, CUT_LEN};
	one_send_start(&s, l.cli, iov, 2);
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), 0);
	free(body);
	assert_int_equal(h.flags, RGPU_FRAME_LANES);
	usleep(50000); /* the sender fills what the sockets hold, and waits in send() */
	uint64_t t0 = rgpu_now_ns();
	lane_kill(cut_srv ? l.sfd[k] : l.cfd[k]);
	int ret = rgpu_conn_recv_payload(l.srv, cut_buf, CUT_LEN);
	int sret = one_send_join(&s);
	double ms = ms_since(t0);
	if (!ret || !sret || ms > 3000)
		fail_msg("lane %d cut at the %s: receive %d (%s), send %d (%s), after %.0f ms", k,
			 cut_srv ? "receiver" : "sender", ret, rgpu_strerror(ret), sret,
			 rgpu_strerror(sret), ms);
	link_close(&l);
}

static void test_lane_cut(void **state)
{
	(void)state;
	cut_p = malloc(CUT_LEN);
	cut_buf = malloc(CUT_LEN);
	assert_non_null(cut_p);
	assert_non_null(cut_buf);
	fill(cut_p, CUT_LEN, 44);
	cut_lane(1, 2);
	cut_lane(0, 3);
	cut_lane(1, 1);
	cut_lane(0, 1);
	free(cut_p);
	free(cut_buf);
}

/*
 * A lane that never delivers its stripe (lane 3 sends its header and half its bytes, then
 * nothing, and stays open): the frame's deadline (500 ms from its first byte) ends the receive
 * with RGPU_EDEADLINE, and the link is down.
 */
static void test_lane_silent(void **state)
{
	(void)state;
	struct link l;
	struct raw_frame rf;
	const uint64_t len = 4 * MiB;
	uint64_t off, part;
	size_t cut[4] = {0};
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL, *buf = malloc(len);

	assert_non_null(buf);
	stripe_of(len, 3, 3, &off, &part);
	cut[3] = STRIPE_HDR + part / 2;
	link_open(&l, 3, -1, 0, (int)ALL_LANES(3), 1);
	rgpu_conn_set_frame_timeout(l.srv, 500);
	uint64_t t0 = rgpu_now_ns();
	raw_frame_start(&rf, l.cfd, 0x99, len, 1, NULL, cut);
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), 0);
	free(body);
	assert_int_equal(rgpu_conn_recv_payload(l.srv, buf, len), RGPU_EDEADLINE);
	double ms = ms_since(t0);
	if (ms < 450 || ms > 2500)
		fail_msg("the receive ended %.0f ms after the frame began, want about 500", ms);
	expect_eof(l.cfd[0]);
	end_close(&l, 1);
	raw_frame_join(&rf);
	link_close(&l);
	free(buf);
}

/* --- 5. attaching, and the lanes' threads ----------------------------------------------------- */

static void test_attach_errors(void **state)
{
	(void)state;
	int a, b, c2, d2, base = nthreads();
	struct link l;

	link_open(&l, 0, 0, 0, 0, 0);
	sock_pair(&a, &b);
	set_rcvtimeo(b, 5);
	assert_int_equal(rgpu_lanes_attach(l.cli, 0, a), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_attach(l.cli, -1, a), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_attach(l.cli, RGPU_MAX_LANES, a), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_count(l.cli), 0);
	/* not ready without lanes: a large payload goes on the link as it is */
	rgpu_lanes_ready(l.cli);
	assert_int_equal(nthreads(), base);
	{
		struct one_send s;
		uint8_t hdr[256], *p = malloc(LANE_MIN), *buf = malloc(LANE_MIN);
		struct rgpu_frame_hdr sh = {
		    .type = RGPU_MSG_MEMCPY_HTOD, .payload_len = LANE_MIN, .seq = 2};
		Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
		struct rgpu_frame_hdr rh;
		uint8_t *rbody = NULL;
		assert_non_null(p);
		assert_non_null(buf);
		fill(p, LANE_MIN, 2);
		mc.dst = 0x5000;
		struct iovec iov[2] = {{hdr, rgpu_frame_pack_hdr(hdr, &sh, &mc.base)},
				       {p, LANE_MIN}};
		one_send_start(&s, l.cli, iov, 2);
		assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &rh, &rbody), 0);
		free(rbody);
		assert_int_equal(rh.flags, 0);
		assert_int_equal(l.srv->lanes_frame, 0);
		assert_int_equal(rgpu_conn_recv_payload(l.srv, buf, LANE_MIN), 0);
		check_pat(buf, 0, LANE_MIN, 2);
		assert_int_equal(one_send_join(&s), 0);
		free(p);
		free(buf);
	}

	/* the last lane number, then the same one again */
	assert_int_equal(rgpu_lanes_attach(l.cli, RGPU_MAX_LANES - 1, a), 0);
	assert_int_equal(nthreads(), base + 2);	      /* a sending and a receiving thread */
	assert_int_equal(rgpu_lanes_count(l.cli), 0); /* lanes 1.. are not all there */
	sock_pair(&c2, &d2);
	set_rcvtimeo(d2, 5);
	assert_int_equal(rgpu_lanes_attach(l.cli, RGPU_MAX_LANES - 1, c2), RGPU_EEXIST);
	assert_int_equal(nthreads(), base + 2);
	/* lane 1 now: count 1, and lane 1 twice refused too */
	assert_int_equal(rgpu_lanes_attach(l.cli, 1, c2), 0);
	assert_int_equal(rgpu_lanes_count(l.cli), 1);
	int e, f;
	sock_pair(&e, &f);
	set_rcvtimeo(f, 5);
	assert_int_equal(rgpu_lanes_attach(l.cli, 1, e), RGPU_EEXIST);
	assert_int_equal(nthreads(), base + 4);
	/* a refused fd is still the caller's: it works */
	write_all(e, "x", 1);
	uint8_t ch = 0;
	read_all(f, &ch, 1);
	assert_int_equal(ch, 'x');
	close(e);
	close(f);

	/* the socket can't be handed on with lanes hanging off it; c is untouched */
	assert_int_equal(rgpu_conn_release_fd(l.cli), RGPU_EUNSUPPORTED);
	assert_int_equal(rgpu_frame_send(l.cli, RGPU_MSG_PING, 0, 3, 1, NULL, NULL, 0), 0);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 3);

	/* closing joins every lane thread and closes the lanes' sockets */
	end_close(&l, 0);
	expect_threads(base);
	expect_eof(b);
	expect_eof(d2);
	close(b);
	close(d2);
	link_close(&l);
}

/*
 * Conns whose lanes failed (a receive past its deadline, the link shut down) still close
 * cleanly: every lane thread of both ends gone.
 */
static void test_close_joins(void **state)
{
	(void)state;
	int base = nthreads();
	struct link l;
	struct rgpu_frame_hdr h = {.magic = RGPU_FRAME_MAGIC,
				   .version = RGPU_PROTO_VERSION,
				   .type = RGPU_MSG_DATA,
				   .flags = RGPU_FRAME_LANES,
				   .payload_len = 8 * MiB,
				   .seq = 1};
	uint8_t hdr[HL], *body = NULL, *buf = malloc(8 * MiB);

	assert_non_null(buf);
	link_open(&l, 7, (int)ALL_LANES(7), 1, (int)ALL_LANES(7), 1);
	assert_int_equal(nthreads(), base + 28); /* 7 lanes, 2 threads each, at both ends */
	/* a striped payload whose stripes never come, written under the server's conn */
	rgpu_frame_hdr_encode(&h, hdr);
	write_all(l.sfd[0], hdr, HL);
	rgpu_conn_set_frame_timeout(l.cli, 300);
	assert_int_equal(rgpu_frame_recv(l.cli, RGPU_PEER_CLIENT, &h, &body), 0);
	assert_int_equal(rgpu_conn_recv(l.cli, buf, 8 * MiB), RGPU_EDEADLINE);
	link_close(&l);
	expect_threads(base);
	free(buf);
}

static void *tls_accept_main(void *arg)
{
	void **a = arg;
	char why[256];
	intptr_t ret = rgpu_tls_accept(a[0], a[1], why, sizeof(why));
	return (void *)ret;
}

/* A self-signed P-256 certificate and its key, as PEM files in dir. */
static void make_cert(const char *cert, const char *key)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	FILE *f;

	assert_non_null(pk);
	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
				   -1, 0);
	X509_set_issuer_name(x, nm);
	assert_true(X509_sign(x, pk, EVP_sha256()) > 0);
	f = fopen(cert, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	f = fopen(key, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(pk);
}

/* Lanes are for plain TCP links: a TLS link refuses them (and keeps working). */
static void test_attach_tls(void **state)
{
	(void)state;
	char dir[] = "/tmp/rgpu-test-lanes-XXXXXX", cert[64], key[64], why[256];
	struct rgpu_tls *st = NULL, *ct = NULL;
	struct link l;
	pthread_t th;
	void *res;
	int a, b;

	assert_non_null(mkdtemp(dir));
	snprintf(cert, sizeof(cert), "%s/c.pem", dir);
	snprintf(key, sizeof(key), "%s/k.pem", dir);
	make_cert(cert, key);
	assert_int_equal(rgpu_tls_server_new(cert, key, &st, why, sizeof(why)), 0);
	assert_int_equal(rgpu_tls_client_new(cert, &ct, why, sizeof(why)), 0);
	link_open(&l, 0, 0, 0, 0, 0);
	void *arg[2] = {l.srv, st};
	assert_int_equal(pthread_create(&th, NULL, tls_accept_main, arg), 0);
	int ret = rgpu_tls_connect(l.cli, ct, NULL, why, sizeof(why));
	pthread_join(th, &res);
	if (ret || res)
		fail_msg("TLS: connect %d (%s), accept %d", ret, ret ? why : "-",
			 (int)(intptr_t)res);
	assert_true(rgpu_conn_is_tls(l.cli));

	sock_pair(&a, &b);
	assert_int_equal(rgpu_lanes_attach(l.cli, 1, a), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_attach(l.srv, 1, b), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_count(l.cli), 0);
	close(a);
	close(b);
	assert_int_equal(rgpu_frame_send(l.cli, RGPU_MSG_PING, 0, 4, 1, NULL, NULL, 0), 0);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv(l.srv, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 4);
	link_close(&l);
	rgpu_tls_free(st);
	rgpu_tls_free(ct);
	unlink(cert);
	unlink(key);
	rmdir(dir);
}

struct offer_arg {
	struct rgpu_conn *c;
	int ret;
};

static void *offer_main(void *arg)
{
	struct offer_arg *o = arg;
	struct rgpu_shm_opts opt = {.ring_size = 1 * MiB,
				    .slot_size = 256 << 10,
				    .nslots = 1,
				    .nstage = 2,
				    .arena = {.fd = -1}};
	char why[256];
	o->ret = rgpu_shm_offer(o->c, &opt, 3000, why, sizeof(why));
	return NULL;
}

/* ... and so does a shared-memory link (over its Unix socket, as shm.c wants). */
static void test_attach_shm(void **state)
{
	(void)state;
	int sv[2], a, b;
	char why[256];
	struct rgpu_shm_accepted acc;
	pthread_t th;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct rgpu_conn *cli = rgpu_tcp_wrap(sv[0]), *srv = rgpu_tcp_wrap(sv[1]);
	assert_non_null(cli);
	assert_non_null(srv);
	rgpu_conn_set_msgs(cli, &rgpu_job_msgs);
	rgpu_conn_set_msgs(srv, &rgpu_job_msgs);
	struct offer_arg oa = {.c = cli};
	assert_int_equal(pthread_create(&th, NULL, offer_main, &oa), 0);
	int ret = rgpu_shm_accept(srv, 3000, &acc, why, sizeof(why));
	pthread_join(th, NULL);
	if (ret || oa.ret)
		fail_msg("shm: accept %d (%s), offer %d", ret, ret ? why : "-", oa.ret);
	assert_true(rgpu_conn_is_shm(cli));

	sock_pair(&a, &b);
	assert_int_equal(rgpu_lanes_attach(cli, 1, a), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_attach(srv, 1, b), RGPU_EINVAL);
	assert_int_equal(rgpu_lanes_count(cli), 0);
	close(a);
	close(b);
	assert_int_equal(rgpu_frame_send(cli, RGPU_MSG_PING, 0, 5, 1, NULL, NULL, 0), 0);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv(srv, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 5);
	rgpu_conn_close(cli);
	rgpu_conn_close(srv);
	rgpu_shm_map_put(acc.link_map);
	rgpu_shm_map_put(acc.arena_map);
}

static int watchdog(void **state)
{
	(void)state;
	alarm(30); /* a test that hangs dies (SIGALRM) instead of holding ctest */
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	return rgpu_tcp_listen("127.0.0.1", 0, &lfd, &lport) ? -1 : 0;
}

static int group_teardown(void **state)
{
	(void)state;
	close(lfd);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_both_ways_1, watchdog),
	    cmocka_unit_test_setup(test_both_ways_3, watchdog),
	    cmocka_unit_test_setup(test_both_ways_7, watchdog),
	    cmocka_unit_test_setup(test_wire, watchdog),
	    cmocka_unit_test_setup(test_receiver_without_lanes, watchdog),
	    cmocka_unit_test_setup(test_receiver_attached_not_ready, watchdog),
	    cmocka_unit_test_setup(test_receiver_fewer_lanes, watchdog),
	    cmocka_unit_test_setup(test_striped_byref, watchdog),
	    cmocka_unit_test_setup(test_out_of_step, watchdog),
	    cmocka_unit_test_setup(test_lane_cut, watchdog),
	    cmocka_unit_test_setup(test_lane_silent, watchdog),
	    cmocka_unit_test_setup(test_attach_errors, watchdog),
	    cmocka_unit_test_setup(test_close_joins, watchdog),
	    cmocka_unit_test_setup(test_attach_tls, watchdog),
	    cmocka_unit_test_setup(test_attach_shm, watchdog),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
