/*
 * The client's side of a job's link (interposer/link.c), compiled on its own: every frame is
 * kept until the worker says it executed it, acknowledgements drop exactly what they cover
 * (late and repeated ones nothing), a resumed connection gets exactly the frames after the
 * worker's `received` with their original seqs and bytes, senders wait at the bound on kept
 * bytes (urgent ones never) and are released by an acknowledgement or the session's death, and
 * a borrowed payload is the caller's memory until ip_link_keep_copy() or ip_link_release()
 * copies it.
 *
 * The process-global session S (link.c) is reset around every test. The state log (statelog.c)
 * is stubbed out: it only counts what it is told. The worker is played by the far end of a
 * socketpair, drained by a thread into memory so that large writes never block; its frames are
 * decoded with rgpu_frame_hdr_decode and compared byte for byte with what was enqueued.
 *
 * Frame sizes are written out from the format (frame.h): a 56-byte header, then the body, then
 * the payload. The bodies are Memcpy messages {dst = 0x100, size = plen}: dst takes 3 bytes
 * (tag, two varint bytes), size takes 2 bytes below 128 and 4 bytes from 2^14 to 2^21, so a
 * frame's header and body are 61 bytes for plen 100 and 63 bytes for plen 65536 .. 200000.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/util.h"
#include "session_state.h"

#define SESSION_ID 0x5e55104e0000abcdull

/* ---- the state log, stubbed: link.c only tells it what it sent --------------------------- */

static unsigned statelog_sent;
static uint64_t statelog_last_seq_seen;

void ip_statelog_sent(uint16_t type, const ProtobufCMessage *req, const uint8_t *body, size_t blen,
		      const void *payload, uint64_t plen, struct waiter *w)
{
	(void)type, (void)req, (void)body, (void)blen, (void)payload, (void)plen, (void)w;
	statelog_sent++;
	statelog_last_seq_seen = S.seq; /* called under q_lock, after the seq was taken */
}

int ip_statelog_wants_digest(uint16_t type)
{
	(void)type;
	return 0;
}

int ip_statelog_digest(uint16_t type, uint8_t out[ST_DIGEST_LEN])
{
	(void)type, (void)out;
	return 0;
}

/* no mirrored host memory in these tests (hostmirror.c) */
/* one session: route.c's choice is always the first */
struct ip_session *ip_sess_cur(void)
{
	return &ip_sessions[0];
}

void ip_sess_bind(struct ip_session *s)
{
	(void)s;
}

void ip_hm_push(void)
{
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* byte i of pattern `salt`: never constant, different for every salt */
static uint8_t pat(uint64_t i, unsigned salt)
{
	return (uint8_t)(i * 7 + (i >> 8) * 13 + salt * 31 + 1);
}

static void fill(uint8_t *p, uint64_t n, unsigned salt)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = pat(i, salt);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The seqs of the kept list, head to tail; returns how many. */
static int kept_seqs(uint64_t *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&S.q_lock);
	for (struct ofr *f = S.head; f && n < max; f = f->next)
		out[n++] = f->seq;
	pthread_mutex_unlock(&S.q_lock);
	return n;
}

#define assert_kept(...)                                                                      \
	do {                                                                                   \
		const uint64_t want_[] = {__VA_ARGS__};                                        \
		uint64_t got_[64];                                                             \
		int n_ = kept_seqs(got_, 64);                                                  \
		assert_int_equal(n_, sizeof(want_) / sizeof(want_[0]));                        \
		for (int i_ = 0; i_ < n_; i_++)                                                \
			assert_int_equal(got_[i_], want_[i_]);                                 \
	} while (0)

static void assert_kept_none(void)
{
	uint64_t got[4];
	assert_int_equal(kept_seqs(got, 4), 0);
	assert_null(S.head);
	assert_null(S.tail);
	assert_null(S.unsent);
}

/* What one enqueued frame is, so the test can check it on the wire. */
struct spec {
	uint16_t type;
	int has_body;
	const uint8_t *payload; /* the caller's memory, as given to ip_link_enqueue */
	uint64_t plen;
	unsigned salt;          /* the pattern payload must carry when it is read back */
	uint64_t ack;           /* S.rx_seq when it was enqueued */
	uint64_t seq;
};

static Rgpu__Memcpy memcpy_body(uint64_t plen)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	m.dst = 0x100;
	m.size = plen;
	return m;
}

/* The kept frame of seq (the test's threads only enqueue: nothing frees it meanwhile). */
static struct ofr *frame(uint64_t seq)
{
	struct ofr *f;

	for (f = S.head; f && f->seq != seq; f = f->next)
		;
	assert_non_null(f);
	return f;
}

static struct ofr *enqueue(struct spec *sp, int urgent)
{
	Rgpu__Memcpy m = memcpy_body(sp->plen);

	sp->ack = S.rx_seq;
	assert_int_equal(ip_link_enqueue(sp->type, sp->has_body ? &m.base : NULL, sp->payload,
					 sp->plen, urgent, NULL, &sp->seq),
			 0);
	return frame(sp->seq);
}

/* The far end of a socketpair, read to EOF by a thread. */
struct peer {
	int fd;
	uint8_t *buf;
	size_t len, cap;
	pthread_t th;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	for (;;) {
		if (p->cap - p->len < 65536) {
			p->cap = p->cap ? 2 * p->cap : (1u << 20);
			p->buf = realloc(p->buf, p->cap);
			if (!p->buf)
				abort();
		}
		ssize_t n = read(p->fd, p->buf + p->len, p->cap - p->len);
		if (n <= 0)
			break;
		p->len += (size_t)n;
	}
	return NULL;
}

/* A connection for the link whose far end p reads until the link's side shuts down. */
static struct rgpu_conn *peer_open(struct peer *p)
{
	int sv[2];
	struct rgpu_conn *c;

	memset(p, 0, sizeof(*p));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	c = rgpu_tcp_wrap(sv[0]);
	assert_non_null(c);
	p->fd = sv[1];
	assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
	return c;
}

/* Wait for EOF (the caller shut the link's side down); the bytes stay in p->buf. */
static void peer_join(struct peer *p)
{
	assert_int_equal(pthread_join(p->th, NULL), 0);
	close(p->fd);
}

/* Check the next frame at *off in p is sp, byte for byte, and step past it. */
static void expect_frame(const struct peer *p, size_t *off, const struct spec *sp)
{
	struct rgpu_frame_hdr h;
	uint8_t body[64];
	size_t blen = 0;

	if (sp->has_body) {
		Rgpu__Memcpy m = memcpy_body(sp->plen);
		blen = protobuf_c_message_pack(&m.base, body);
	}
	assert_true(p->len - *off >= RGPU_FRAME_HDR_LEN);
	assert_int_equal(rgpu_frame_hdr_decode(p->buf + *off, &h), 0);
	assert_int_equal(h.magic, RGPU_FRAME_MAGIC);
	assert_int_equal(h.version, RGPU_PROTO_VERSION);
	assert_int_equal(h.type, sp->type);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.seq, sp->seq);
	assert_int_equal(h.session, SESSION_ID);
	assert_int_equal(h.ack, sp->ack);
	assert_int_equal(h.ref, 0);
	assert_int_equal(h.body_len, blen);
	assert_int_equal(h.payload_len, sp->plen);
	*off += RGPU_FRAME_HDR_LEN;
	assert_true(p->len - *off >= blen + sp->plen);
	if (blen)
		assert_memory_equal(p->buf + *off, body, blen);
	*off += blen;
	for (uint64_t i = 0; i < sp->plen; i++)
		if (p->buf[*off + i] != pat(i, sp->salt))
			fail_msg("frame %llu: payload byte %llu is %u, want %u (pattern %u)",
				 (unsigned long long)sp->seq, (unsigned long long)i,
				 p->buf[*off + i], pat(i, sp->salt), sp->salt);
	*off += sp->plen;
}

/* A sender in a thread of its own, for the flow control. */
struct sender {
	uint16_t type;
	uint64_t plen;
	int urgent;
	int ret;
	uint64_t seq;
	atomic_int done;
	pthread_t th;
};

static uint8_t send_src[4096];

static void *sender_main(void *arg)
{
	struct sender *t = arg;
	t->ret = ip_link_enqueue(t->type, NULL, send_src, t->plen, t->urgent, NULL, &t->seq);
	atomic_store(&t->done, 1);
	return NULL;
}

static void sender_start(struct sender *t, uint16_t type, uint64_t plen, int urgent)
{
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->plen = plen;
	t->urgent = urgent;
	t->ret = 1;
	assert_int_equal(pthread_create(&t->th, NULL, sender_main, t), 0);
}

/* Join t, failing (not hanging) when it is still blocked after 5 s. */
static void sender_join(struct sender *t)
{
	for (int i = 0; i < 5000 && !atomic_load(&t->done); i++)
		sleep_ms(1);
	if (!atomic_load(&t->done))
		fail_msg("a sender is still blocked after 5 s");
	assert_int_equal(pthread_join(t->th, NULL), 0);
}

/* ---- setup: a fresh session, no connection ----------------------------------------------- */

static void session_reset(void)
{
	ip_link_acked(UINT64_MAX); /* frees whatever a failed test left */
	if (S.conn)
		rgpu_conn_close(S.conn);
	S.conn = NULL;
	S.head = S.tail = S.unsent = NULL;
	S.seq = S.acked = 0;
	S.kept_bytes = 0;
	S.kept_max = IP_UNACKED_MAX;
	S.link_up = 0;
	S.gen = 0;
	S.rx_seq = 0;
	S.rx_unacked = 0;
	S.session = SESSION_ID;
	S.waiters = NULL;
	S.closing = 0;
	S.dead_err = CUDA_SUCCESS;
	atomic_store(&S.dead, 0);
	statelog_sent = 0;
	statelog_last_seq_seen = 0;
}

static int setup(void **state)
{
	(void)state;
	session_reset();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	session_reset();
	return 0;
}

/* ---- 1. kept until acknowledged ----------------------------------------------------------- */

static uint8_t big1[65537], big2[200000], at_max[IP_INLINE_MAX], small[100];

static void test_kept_until_acked(void **state)
{
	(void)state;
	struct spec sp[6] = {
		{.type = RGPU_MSG_PING},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = small, .plen = 100},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = big1, .plen = 65537},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = at_max, .plen = 65536},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = big2, .plen = 200000},
		{.type = RGPU_MSG_PING},
	};
	struct ofr *f;

	fill(small, sizeof(small), 2);
	fill(big1, sizeof(big1), 3);
	fill(at_max, sizeof(at_max), 4);
	fill(big2, sizeof(big2), 5);

	/* no payload: the header alone */
	f = enqueue(&sp[0], 0);
	assert_int_equal(f->seq, 1);
	assert_int_equal(f->len, 56);
	assert_null(f->ext);
	assert_int_equal(f->ext_len, 0);
	assert_int_equal(S.kept_bytes, 56);
	assert_ptr_equal(S.unsent, f); /* no link: everything stays unwritten */

	/* 100 bytes: copied in */
	f = enqueue(&sp[1], 0);
	assert_int_equal(f->seq, 2);
	assert_int_equal(f->len, 61 + 100);
	assert_null(f->ext);
	assert_memory_equal(f->data + 61, small, 100);
	assert_int_equal(S.kept_bytes, 56 + 161);

	/* one byte over IP_INLINE_MAX: borrowed, only header and body in data[] */
	f = enqueue(&sp[2], 0);
	assert_int_equal(f->seq, 3);
	assert_int_equal(f->len, 63);
	assert_ptr_equal(f->ext, big1);
	assert_int_equal(f->ext_len, 65537);
	assert_null(f->own);
	assert_int_equal(S.kept_bytes, 56 + 161 + 65600);

	/* exactly IP_INLINE_MAX: still copied in */
	f = enqueue(&sp[3], 0);
	assert_int_equal(f->seq, 4);
	assert_int_equal(f->len, 63 + 65536);
	assert_null(f->ext);
	assert_int_equal(f->ext_len, 0);
	assert_memory_equal(f->data + 63, at_max, 65536);
	assert_int_equal(S.kept_bytes, 56 + 161 + 65600 + 65599);

	f = enqueue(&sp[4], 0);
	assert_int_equal(f->seq, 5);
	assert_int_equal(f->len, 63);
	assert_ptr_equal(f->ext, big2);
	assert_int_equal(f->ext_len, 200000);
	assert_int_equal(S.kept_bytes, 331479); /* 56 + 161 + 65600 + 65599 + 200063 */
	assert_int_equal(S.seq, 5);
	assert_int_equal(statelog_sent, 5);
	assert_int_equal(statelog_last_seq_seen, 5);
	assert_kept(1, 2, 3, 4, 5);
	assert_int_equal(S.head->seq, 1);
	assert_int_equal(S.tail->seq, 5);

	/* the worker executed through 2 */
	ip_link_acked(2);
	assert_kept(3, 4, 5);
	assert_int_equal(S.acked, 2);
	assert_int_equal(S.kept_bytes, 331262);
	assert_int_equal(S.unsent->seq, 3); /* unsent moved off the dropped frames */

	/* older and repeated acknowledgements drop nothing */
	ip_link_acked(1);
	assert_kept(3, 4, 5);
	assert_int_equal(S.acked, 2);
	assert_int_equal(S.kept_bytes, 331262);
	ip_link_acked(2);
	assert_kept(3, 4, 5);
	assert_int_equal(S.kept_bytes, 331262);
	ip_link_acked(0);
	assert_kept(3, 4, 5);
	assert_int_equal(S.kept_bytes, 331262);

	/* through 4, then an older 3 arriving late */
	ip_link_acked(4);
	assert_kept(5);
	assert_int_equal(S.acked, 4);
	assert_int_equal(S.kept_bytes, 200063);
	assert_ptr_equal(S.head, S.tail);
	ip_link_acked(3);
	assert_kept(5);
	assert_int_equal(S.acked, 4);
	assert_int_equal(S.kept_bytes, 200063);

	/* an acknowledgement past what was sent counts only to the last seq sent ... */
	ip_link_acked(99);
	assert_kept_none();
	assert_int_equal(S.acked, 5);
	assert_int_equal(S.kept_bytes, 0);

	/* ... so the next frame (seq 6) is kept, not taken as already executed */
	f = enqueue(&sp[5], 0);
	assert_int_equal(f->seq, 6);
	assert_kept(6);
	assert_ptr_equal(S.head, f);
	assert_ptr_equal(S.tail, f);
	assert_ptr_equal(S.unsent, f);
	assert_int_equal(S.kept_bytes, 56);
	ip_link_acked(5);
	assert_kept(6);
	assert_int_equal(S.kept_bytes, 56);
	ip_link_acked(6);
	assert_kept_none();
	assert_int_equal(S.kept_bytes, 0);
	assert_int_equal(S.acked, 6);
}

/* A waiter is registered under its request's seq as the frame is kept. */
static void test_waiter_registered(void **state)
{
	(void)state;
	struct waiter w1, w2;
	uint64_t seq;

	memset(&w1, 0, sizeof(w1));
	memset(&w2, 0, sizeof(w2));
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, &w1, &seq), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, NULL, NULL), 0);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, &w2, &seq), 0);
	assert_int_equal(seq, 3);
	assert_int_equal(w1.seq, 1);
	assert_int_equal(w2.seq, 3);
	pthread_mutex_lock(&S.wait_lock);
	assert_ptr_equal(ip_waiter_find_locked(1), &w1);
	assert_null(ip_waiter_find_locked(2));
	assert_ptr_equal(ip_waiter_find_locked(3), &w2);
	ip_waiter_remove_locked(&w1);
	assert_null(ip_waiter_find_locked(1));
	assert_ptr_equal(ip_waiter_find_locked(3), &w2);
	ip_waiter_remove_locked(&w2);
	assert_null(S.waiters);
	pthread_mutex_unlock(&S.wait_lock);
}

/* a caller's wait as calls.c sleeps it: state PENDING -> ASLEEP, then the futex until DONE */
static void *sleep_on_waiter(void *arg)
{
	struct waiter *w = arg;
	uint32_t v = IP_W_PENDING;
	if (atomic_compare_exchange_strong(&w->state, &v, IP_W_ASLEEP))
		while (atomic_load(&w->state) != IP_W_DONE)
			syscall(SYS_futex, (uint32_t *)&w->state, FUTEX_WAIT_PRIVATE, IP_W_ASLEEP,
				NULL, NULL, 0);
	return NULL;
}

/* A completed waiter leaves the list (the receiver's unlink), and one that sleeps is woken. */
static void test_waiter_completed(void **state)
{
	(void)state;
	struct waiter w1, w2;
	pthread_t t;

	memset(&w1, 0, sizeof(w1));
	memset(&w2, 0, sizeof(w2));
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, &w1, NULL), 0);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, &w2, NULL), 0);
	assert_int_equal(w1.linked, 1);
	assert_int_equal(pthread_create(&t, NULL, sleep_on_waiter, &w1), 0);
	for (int i = 0; i < 2000 && atomic_load(&w1.state) != IP_W_ASLEEP; i++)
		sleep_ms(1);
	assert_int_equal(atomic_load(&w1.state), IP_W_ASLEEP);
	pthread_mutex_lock(&S.wait_lock);
	ip_waiter_complete_locked(&w1, 1);
	assert_int_equal(atomic_load(&w1.state), IP_W_DONE);
	assert_int_equal(w1.linked, 0);
	assert_null(ip_waiter_find_locked(w1.seq));
	assert_ptr_equal(ip_waiter_find_locked(w2.seq), &w2);
	pthread_mutex_unlock(&S.wait_lock);
	pthread_join(t, NULL); /* woken: the join returns */
	/* one done before its caller looked: no sleep at all */
	pthread_mutex_lock(&S.wait_lock);
	ip_waiter_complete_locked(&w2, 1);
	pthread_mutex_unlock(&S.wait_lock);
	assert_int_equal(pthread_create(&t, NULL, sleep_on_waiter, &w2), 0);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&w2.state), IP_W_DONE);
	assert_null(S.waiters);
}

/* ---- 2. written again after a break ------------------------------------------------------ */

static void test_resend_after_break(void **state)
{
	(void)state;
	struct spec sp[6] = {
		{.type = RGPU_MSG_PING, .salt = 0},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = small, .plen = 100, .salt = 12},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = big1, .plen = 65537, .salt = 13},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = at_max, .plen = 65536, .salt = 14},
		{.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = big2, .plen = 200000, .salt = 15},
		{.type = RGPU_MSG_CALLBACK_DONE, .has_body = 1, .plen = 100, .salt = 16},
	};
	static uint8_t small6[100];
	struct peer p1, p2, p3;
	struct rgpu_conn *c1, *c2, *c3;
	size_t off;

	sp[5].payload = small6;
	fill(small, sizeof(small), 12);
	fill(big1, sizeof(big1), 13);
	fill(at_max, sizeof(at_max), 14);
	fill(big2, sizeof(big2), 15);
	fill(small6, sizeof(small6), 16);

	/* the first link: nothing kept yet, nothing written */
	c1 = peer_open(&p1);
	ip_link_install(c1, 0, 0);
	assert_ptr_equal(S.conn, c1);
	assert_int_equal(S.link_up, 1);
	assert_int_equal(S.gen, 1);

	/* frames 1..5, each carrying what had arrived from the worker by then */
	for (int i = 0; i < 5; i++) {
		S.rx_seq = 100 + (uint64_t)i;
		enqueue(&sp[i], 0);
		assert_int_equal(sp[i].seq, (uint64_t)i + 1);
	}
	ip_link_flush();
	assert_null(S.unsent);
	assert_int_equal(S.kept_bytes, 331479);
	ip_link_acked(1);

	/* the link breaks: writing stops, the far end sees EOF after exactly frames 1..5 */
	ip_link_broken();
	assert_int_equal(S.link_up, 0);
	assert_int_equal(S.gen, 2);
	peer_join(&p1);
	assert_int_equal(p1.len, 331479);
	off = 0;
	for (int i = 0; i < 5; i++)
		expect_frame(&p1, &off, &sp[i]);
	assert_int_equal(off, p1.len);
	free(p1.buf);

	/* a frame enqueued while the link is down is kept and not written */
	S.rx_seq = 200;
	enqueue(&sp[5], 1);
	assert_int_equal(sp[5].seq, 6);
	ip_link_flush();
	assert_int_equal(S.unsent->seq, 6); /* 2..5 went out on the old link; 6 did not */
	assert_kept(2, 3, 4, 5, 6);
	assert_int_equal(S.kept_bytes, 331479 - 56 + 161);

	/* the worker received through 3 and executed through 2: exactly 4, 5, 6 again, as sent */
	S.rx_seq = 300;
	c2 = peer_open(&p2);
	ip_link_install(c2, 3, 2);
	assert_ptr_equal(S.conn, c2);
	assert_int_equal(S.link_up, 1);
	assert_int_equal(S.gen, 3);
	assert_int_equal(S.acked, 2);
	/* install (the receiver) leaves them to the sender thread, whose part this flush is */
	assert_int_equal(S.unsent->seq, 4);
	ip_link_flush();
	assert_null(S.unsent);
	assert_kept(3, 4, 5, 6); /* 3 was received, not executed: still kept */
	assert_int_equal(S.kept_bytes, 65600 + 65599 + 200063 + 161);
	rgpu_conn_shutdown(c2);
	peer_join(&p2);
	assert_int_equal(p2.len, 65599 + 200063 + 161);
	off = 0;
	expect_frame(&p2, &off, &sp[3]);
	expect_frame(&p2, &off, &sp[4]);
	expect_frame(&p2, &off, &sp[5]);
	assert_int_equal(off, p2.len);
	free(p2.buf);

	/* another break; this worker received everything: nothing is written again */
	ip_link_broken();
	c3 = peer_open(&p3);
	ip_link_install(c3, 6, 4);
	assert_null(S.unsent);
	assert_kept(5, 6);
	assert_int_equal(S.kept_bytes, 200063 + 161);
	rgpu_conn_shutdown(c3);
	peer_join(&p3);
	assert_int_equal(p3.len, 0);
	free(p3.buf);
	assert_int_equal(S.seq, 6);
	assert_int_equal(statelog_sent, 6);
}

/* ---- 3. the flow-control bound -------------------------------------------------------------- */

/* The link never looks inside a body: frames here have none, so a frame is 56 + plen bytes. */
static void test_bound_blocks_until_ack(void **state)
{
	(void)state;
	struct sender c, d, e;

	S.kept_max = 1000;
	assert_int_equal(ip_link_enqueue(RGPU_MSG_MEMCPY_HTOD, NULL, send_src, 344, 0, NULL, NULL), 0);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_MEMCPY_HTOD, NULL, send_src, 344, 0, NULL, NULL), 0);
	assert_int_equal(S.kept_bytes, 800);

	/* 800 + 400 > 1000: waits, with no seq taken */
	sender_start(&c, RGPU_MSG_MEMCPY_HTOD, 344, 0);
	sleep_ms(50);
	assert_int_equal(atomic_load(&c.done), 0);
	assert_int_equal(S.seq, 2);
	assert_int_equal(S.kept_bytes, 800);

	/* an urgent one does not wait, and goes past the bound */
	sender_start(&d, RGPU_MSG_CALLBACK_DONE, 344, 1);
	sender_join(&d);
	assert_int_equal(d.ret, 0);
	assert_int_equal(d.seq, 3);
	assert_int_equal(S.kept_bytes, 1200);
	assert_int_equal(atomic_load(&c.done), 0);

	/* room for 200 is not room for 400 */
	ip_link_acked(1);
	assert_int_equal(S.kept_bytes, 800);
	sleep_ms(50);
	assert_int_equal(atomic_load(&c.done), 0);
	assert_int_equal(S.seq, 3);

	/* now 400 + 400 <= 1000 */
	ip_link_acked(2);
	sender_join(&c);
	assert_int_equal(c.ret, 0);
	assert_int_equal(c.seq, 4);
	assert_int_equal(S.kept_bytes, 800);
	assert_kept(3, 4);

	/* exactly at the bound is within it: 800 + 200 = 1000 */
	sender_start(&e, RGPU_MSG_MEMCPY_HTOD, 144, 0);
	sender_join(&e);
	assert_int_equal(e.ret, 0);
	assert_int_equal(e.seq, 5);
	assert_int_equal(S.kept_bytes, 1000);

	/* a frame bigger than the bound on its own goes when nothing else is kept */
	ip_link_acked(5);
	assert_int_equal(S.kept_bytes, 0);
	sender_start(&e, RGPU_MSG_MEMCPY_HTOD, 2000, 0);
	sender_join(&e);
	assert_int_equal(e.ret, 0);
	assert_int_equal(e.seq, 6);
	assert_int_equal(S.kept_bytes, 2056);
}

static void test_death_releases_senders(void **state)
{
	(void)state;
	struct sender a, b;
	struct waiter w;

	memset(&w, 0, sizeof(w));
	S.kept_max = 1000;
	S.closing = 1; /* no log line from the test's death */
	assert_int_equal(ip_link_enqueue(RGPU_MSG_MEMCPY_HTOD, NULL, send_src, 844, 0, &w, NULL), 0);
	assert_int_equal(S.kept_bytes, 900);
	sender_start(&a, RGPU_MSG_MEMCPY_HTOD, 344, 0);
	sender_start(&b, RGPU_MSG_MEMCPY_HTOD, 45, 0); /* 900 + 101: one byte over */
	sleep_ms(50);
	assert_int_equal(atomic_load(&a.done), 0);
	assert_int_equal(atomic_load(&b.done), 0);

	ip_session_die(CUDA_ERROR_LAUNCH_TIMEOUT, "test");
	sender_join(&a);
	sender_join(&b);
	assert_int_equal(a.ret, RGPU_ECLOSED);
	assert_int_equal(b.ret, RGPU_ECLOSED);
	assert_int_equal(a.seq, 0);
	assert_int_equal(b.seq, 0);
	assert_int_equal(atomic_load(&w.state), IP_W_DONE);
	assert_int_equal(w.linked, 0); /* off the list: a late reply cannot find it */
	pthread_mutex_lock(&S.wait_lock);
	assert_null(ip_waiter_find_locked(1));
	pthread_mutex_unlock(&S.wait_lock);
	/* a waiter that comes after the death is done at once (nothing would complete it) */
	struct waiter late;
	memset(&late, 0, sizeof(late));
	ip_waiter_add(&late);
	assert_int_equal(atomic_load(&late.state), IP_W_DONE);
	assert_int_equal(late.linked, 0);
	assert_int_equal(ip_session_error(), CUDA_ERROR_LAUNCH_TIMEOUT);

	/* nothing was taken: no seq, no bytes; later frames, urgent too, are refused */
	assert_int_equal(S.seq, 1);
	assert_int_equal(S.kept_bytes, 900);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_CALLBACK_DONE, NULL, NULL, 0, 1, NULL, NULL),
			 RGPU_ECLOSED);
	assert_int_equal(S.seq, 1);
	assert_int_equal(statelog_sent, 1);
	/* a second death keeps the first error */
	ip_session_die(CUDA_ERROR_UNKNOWN, "again");
	assert_int_equal(ip_session_error(), CUDA_ERROR_LAUNCH_TIMEOUT);
	pthread_mutex_lock(&S.wait_lock);
	ip_waiter_remove_locked(&w);
	pthread_mutex_unlock(&S.wait_lock);
}

/* ---- 4. borrowed payloads ------------------------------------------------------------------ */

static void test_borrowed_then_copied(void **state)
{
	(void)state;
	static uint8_t buf[100000];
	struct spec sp = {.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = buf,
			  .plen = sizeof(buf)};
	struct spec sp2 = {.type = RGPU_MSG_MEMCPY_HTOD, .has_body = 1, .payload = small,
			   .plen = 100, .salt = 22};
	struct peer p1, p2;
	struct ofr *f, *f2;
	void *own;
	size_t off;

	fill(buf, sizeof(buf), 20);
	fill(small, sizeof(small), 22);
	f = enqueue(&sp, 0);
	assert_ptr_equal(f->ext, buf);
	assert_null(f->own);
	assert_int_equal(f->len, 63);
	assert_int_equal(S.kept_bytes, 100063);
	f2 = enqueue(&sp2, 0);

	/* referenced: what the caller changes before a copy is what goes out */
	fill(buf, sizeof(buf), 21);
	sp.salt = 21;
	ip_link_install(peer_open(&p1), 0, 0);
	ip_link_flush(); /* the sender thread's part */
	ip_link_broken();
	peer_join(&p1);
	assert_int_equal(p1.len, 100063 + 161);
	off = 0;
	expect_frame(&p1, &off, &sp);
	expect_frame(&p1, &off, &sp2);
	free(p1.buf);

	/* the caller is about to reuse buf: a copy is kept, the byte count does not change */
	pthread_mutex_lock(&S.send_lock);
	assert_int_equal(ip_link_keep_copy(1, buf, sizeof(buf)), 0);
	pthread_mutex_unlock(&S.send_lock);
	assert_non_null(f->own);
	assert_ptr_not_equal(f->own, buf);
	assert_ptr_equal(f->ext, buf);
	assert_memory_equal(f->own, buf, sizeof(buf));
	assert_int_equal(S.kept_bytes, 100063 + 161);
	own = f->own;

	/* a second copy of the same frame, or of an inline one, changes nothing */
	pthread_mutex_lock(&S.send_lock);
	assert_int_equal(ip_link_keep_copy(1, buf, sizeof(buf)), 0);
	assert_int_equal(ip_link_keep_copy(2, small, sizeof(small)), 0);
	pthread_mutex_unlock(&S.send_lock);
	assert_ptr_equal(f->own, own);
	assert_null(f2->own);
	assert_null(f2->ext);

	/* buf changes again: the resend carries the copy, pattern 21, not pattern 23 */
	fill(buf, sizeof(buf), 23);
	ip_link_install(peer_open(&p2), 0, 0);
	ip_link_flush(); /* the sender thread's part */
	rgpu_conn_shutdown(S.conn);
	peer_join(&p2);
	assert_int_equal(p2.len, 100063 + 161);
	off = 0;
	expect_frame(&p2, &off, &sp); /* sp.salt is still 21 */
	expect_frame(&p2, &off, &sp2);
	free(p2.buf);

	/* a frame the worker executed is not copied (it is gone) */
	ip_link_acked(2);
	assert_kept_none();
	pthread_mutex_lock(&S.send_lock);
	assert_int_equal(ip_link_keep_copy(1, buf, sizeof(buf)), 0);
	pthread_mutex_unlock(&S.send_lock);
	assert_int_equal(S.kept_bytes, 0);
}

/* Three borrowed frames and an inline one: enqueued, then released. */
static uint8_t rel[3][70000];

static struct ofr *enqueue_rel(int i)
{
	struct ofr *f;
	uint64_t seq;

	fill(rel[i], sizeof(rel[i]), 40 + (unsigned)i);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_MEMCPY_HTOD, NULL, rel[i], sizeof(rel[i]), 0,
					 NULL, &seq),
			 0);
	f = frame(seq);
	assert_ptr_equal(f->ext, rel[i]);
	return f;
}

static void test_release_copies_unexecuted(void **state)
{
	(void)state;
	struct ofr *f[4];
	uint64_t seq;

	for (int i = 0; i < 3; i++)
		f[i] = enqueue_rel(i);
	assert_int_equal(ip_link_enqueue(RGPU_MSG_PING, NULL, NULL, 0, 0, NULL, &seq), 0);
	f[3] = frame(seq);

	/* nothing to release */
	assert_int_equal(ip_link_release(0, 0), 0);
	assert_int_equal(ip_link_release(4, 4), 0); /* inline: copied when it was queued */
	for (int i = 0; i < 3; i++)
		assert_null(f[i]->own);

	/* the link is down: no acknowledgement can come, every borrowed frame is copied */
	assert_int_equal(ip_link_release(1, 4), 0);
	for (int i = 0; i < 3; i++) {
		assert_non_null(f[i]->own);
		assert_ptr_not_equal(f[i]->own, rel[i]);
		assert_memory_equal(f[i]->own, rel[i], sizeof(rel[i]));
	}
	assert_null(f[3]->own);
	assert_int_equal(S.kept_bytes, 3 * (56 + 70000) + 56);
}

/* With the link up and no acknowledgement, release waits its 10 ms, then copies. */
static void test_release_waits_then_copies(void **state)
{
	(void)state;
	struct peer p;
	struct ofr *f[2];
	uint64_t t0, dt;

	ip_link_install(peer_open(&p), 0, 0);
	f[0] = enqueue_rel(0);
	f[1] = enqueue_rel(1);
	t0 = rgpu_now_ns();
	assert_int_equal(ip_link_release(1, 2), 0);
	dt = rgpu_now_ns() - t0;
	assert_true(dt >= 10000000ull);
	assert_true(dt < 2000000000ull);
	assert_memory_equal(f[0]->own, rel[0], sizeof(rel[0]));
	assert_memory_equal(f[1]->own, rel[1], sizeof(rel[1]));
	rgpu_conn_shutdown(S.conn);
	peer_join(&p);
	assert_int_equal(p.len, 0); /* release never writes */
	free(p.buf);
}

/*
 * The worker executed the first of the frames but not the others: release must still copy the
 * others, since the caller reuses their memory as soon as it returns and a resend would carry
 * whatever is there then.
 */
static void test_release_after_partial_ack(void **state)
{
	(void)state;
	struct ofr *f[3];

	for (int i = 0; i < 3; i++)
		f[i] = enqueue_rel(i);
	ip_link_acked(1);
	assert_kept(2, 3);
	assert_int_equal(ip_link_release(1, 3), 0);
	assert_non_null(f[1]->own);
	assert_non_null(f[2]->own);
	assert_memory_equal(f[1]->own, rel[1], sizeof(rel[1]));
	assert_memory_equal(f[2]->own, rel[2], sizeof(rel[2]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kept_until_acked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiter_completed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiter_registered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resend_after_break, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound_blocks_until_ack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_death_releases_senders, setup, teardown),
		cmocka_unit_test_setup_teardown(test_borrowed_then_copied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_copies_unexecuted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_waits_then_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_after_partial_ack, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
