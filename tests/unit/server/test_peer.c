/*
 * The destination's side of a copy between two servers (server/peer.c): each peer link queues
 * its copies' bytes in arrival order until the executor takes them; a frame that does not go on
 * exactly where its copy is, or comes for a copy received whole already, is refused (the link
 * is dropped); the reader waits while its link holds more than the bound and goes on once the
 * executor takes; the executor's wait ends with the bytes, a link's end or the timeout. Then a
 * real reader thread over a socketpair, with a source that writes frames as a worker would.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu_msgs.h"
#include "srv.h"

static struct srv_worker *new_worker(uint64_t max_queued)
{
	/* (its hot fields sit on cache lines of their own: the struct is 64-byte aligned) */
	struct srv_worker *w = aligned_alloc(64, (sizeof(*w) + 63) & ~(size_t)63);
	assert_non_null(w);
	memset(w, 0, sizeof(*w));
	w->session = 0x77;
	snprintf(w->job_hex, sizeof(w->job_hex), "test");
	setenv("RGPU_PEER_TIMEOUT_MS", "200", 1);
	assert_int_equal(srv_peer_init(w, max_queued), 0);
	return w;
}

static void free_worker(struct srv_worker *w)
{
	srv_peer_fini(w);
	/* fini keeps the struct for a late hand-over in a worker; a test has none */
	free(w->peer_links);
	free(w);
}

static void *bytes(size_t n, int v)
{
	void *p = malloc(n);
	assert_non_null(p);
	memset(p, v, n);
	return p;
}

/* take the next chunk of copy id and check its length and first byte */
static void take(struct srv_worker *w, uint64_t id, uint64_t size, uint64_t off, size_t len, int v)
{
	char src[96], why[200];
	void *data = NULL;
	size_t got = 0;

	assert_int_equal(
	    srv_peer_take(w, id, size, off, &data, &got, src, sizeof(src), why, sizeof(why)), 0);
	assert_int_equal(got, len);
	assert_int_equal(((uint8_t *)data)[0], v);
	free(data);
}

static void test_order(void **state)
{
	struct srv_worker *w = new_worker(0);
	char why[200];
	(void)state;
	struct srv_plink *l = srv_plink_add(w, NULL, "a:1", why, sizeof(why));
	assert_non_null(l);

	/* two copies interleaved on one link, each in order */
	assert_int_equal(srv_plink_put(w, l, 5, 0, bytes(10, 1), 10, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_put(w, l, 6, 0, bytes(4, 7), 4, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_put(w, l, 5, 10, bytes(6, 2), 6, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_queued(w, l), 20);
	take(w, 5, 16, 0, 10, 1);
	take(w, 5, 16, 10, 6, 2);
	srv_peer_done(w, 5, 1);
	assert_int_equal(srv_plink_queued(w, l), 4);
	take(w, 6, 4, 0, 4, 7);
	srv_peer_done(w, 6, 1);
	assert_true(srv_peer_seen(w, 5));
	assert_false(srv_peer_seen(w, 7));
	free_worker(w);
}

static void test_refusals(void **state)
{
	struct srv_worker *w = new_worker(0);
	char why[200], src[96];
	void *data, *d;
	size_t len;
	(void)state;
	struct srv_plink *l = srv_plink_add(w, NULL, "a:1", why, sizeof(why));
	struct srv_plink *l2 = srv_plink_add(w, NULL, "b:2", why, sizeof(why));

	/* a copy must start at 0, go on where it is, and not be empty */
	d = bytes(8, 0);
	assert_int_equal(srv_plink_put(w, l, 1, 8, d, 8, why, sizeof(why)), RGPU_EPROTO);
	assert_string_equal(why, "copy 1 starts at offset 8, not 0");
	assert_int_equal(srv_plink_put(w, l, 1, 0, d, 0, why, sizeof(why)), RGPU_EPROTO);
	assert_int_equal(srv_plink_put(w, l, 1, 0, d, 8, why, sizeof(why)), 0);
	d = bytes(8, 0);
	assert_int_equal(srv_plink_put(w, l, 1, 4, d, 8, why, sizeof(why)), RGPU_EPROTO);
	assert_string_equal(why, "copy 1: offset 4 where 8 was next");
	/* its bytes come on one link */
	assert_int_equal(srv_plink_put(w, l2, 1, 8, d, 8, why, sizeof(why)), RGPU_EPROTO);
	assert_string_equal(why, "MSG_PEER_DATA for copy 1, which comes on another link (a:1)");
	/* once its receive knows the size, nothing past it */
	assert_int_equal(
	    srv_peer_take(w, 1, 12, 0, &data, &len, src, sizeof(src), why, sizeof(why)), 0);
	free(data);
	assert_string_equal(src, "a:1");
	assert_int_equal(srv_plink_put(w, l, 1, 8, d, 8, why, sizeof(why)), RGPU_EPROTO);
	assert_string_equal(why, "copy 1: 8 bytes at offset 8 go past its 12 bytes");
	assert_int_equal(srv_plink_put(w, l, 1, 8, d, 4, why, sizeof(why)), 0);
	take(w, 1, 12, 8, 4, 0);
	srv_peer_done(w, 1, 1);
	/* received whole: more of it drops the link */
	d = bytes(4, 0);
	assert_int_equal(srv_plink_put(w, l, 1, 0, d, 4, why, sizeof(why)), RGPU_EPROTO);
	assert_string_equal(why, "MSG_PEER_DATA for copy 1, which was received whole already");
	/* bytes queued before the size was known, past it: the receive fails */
	assert_int_equal(srv_plink_put(w, l2, 2, 0, d, 4, why, sizeof(why)), 0);
	assert_int_equal(srv_peer_take(w, 2, 3, 0, &data, &len, src, sizeof(src), why, sizeof(why)),
			 RGPU_EPROTO);
	srv_peer_done(w, 2, 0);
	/* a failed copy's late bytes are dropped quietly */
	assert_int_equal(srv_plink_put(w, l2, 2, 4, bytes(4, 0), 4, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_queued(w, l2), 0);
	free_worker(w);
}

static void test_timeout_and_end(void **state)
{
	struct srv_worker *w = new_worker(0);
	char why[200], src[96] = "";
	void *data;
	size_t len;
	(void)state;
	struct srv_plink *l = srv_plink_add(w, NULL, "a:1", why, sizeof(why));

	/* nothing comes: RGPU_PEER_TIMEOUT_MS (200 here) */
	assert_int_equal(srv_peer_take(w, 3, 8, 0, &data, &len, src, sizeof(src), why, sizeof(why)),
			 RGPU_ETIMEDOUT);
	assert_string_equal(why, "nothing came for 200 ms (RGPU_PEER_TIMEOUT_MS)");
	/* what came before the link ended is still taken; then its end is the failure */
	assert_int_equal(srv_plink_put(w, l, 4, 0, bytes(4, 9), 4, why, sizeof(why)), 0);
	srv_plink_end(w, l, 1, "Connection reset by peer");
	take(w, 4, 8, 0, 4, 9);
	assert_int_equal(srv_peer_take(w, 4, 8, 4, &data, &len, src, sizeof(src), why, sizeof(why)),
			 RGPU_ECLOSED);
	assert_string_equal(why, "its link broke (Connection reset by peer)");
	srv_peer_done(w, 4, 0);
	free_worker(w);
}

struct room_arg {
	struct srv_worker *w;
	struct srv_plink *l;
	int ret, done;
};

static void *room_main(void *arg)
{
	struct room_arg *a = arg;
	a->ret = srv_plink_wait_room(a->w, a->l);
	__atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_flow_control(void **state)
{
	struct srv_worker *w = new_worker(1000);
	struct room_arg a = {.w = w};
	char why[200];
	pthread_t t;
	(void)state;
	a.l = srv_plink_add(w, NULL, "a:1", why, sizeof(why));

	/* at the bound the reader may still read; past it, it waits for the executor */
	assert_int_equal(srv_plink_put(w, a.l, 1, 0, bytes(1000, 1), 1000, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_wait_room(w, a.l), 0);
	assert_int_equal(srv_plink_put(w, a.l, 1, 1000, bytes(500, 2), 500, why, sizeof(why)), 0);
	assert_int_equal(pthread_create(&t, NULL, room_main, &a), 0);
	usleep(50000);
	assert_false(__atomic_load_n(&a.done, __ATOMIC_SEQ_CST));
	take(w, 1, 1500, 0, 1000, 1);
	pthread_join(t, NULL);
	assert_int_equal(a.ret, 0);
	/* past the 1500 bytes its receive named */
	void *d = bytes(1000, 3);
	assert_int_equal(srv_plink_put(w, a.l, 1, 1500, d, 1000, why, sizeof(why)), RGPU_EPROTO);
	free(d);
	srv_peer_done(w, 1, 0);
	/* the other link is not held by this one's bound */
	struct srv_plink *l2 = srv_plink_add(w, NULL, "b:2", why, sizeof(why));
	assert_int_equal(srv_plink_put(w, l2, 2, 0, bytes(2000, 4), 2000, why, sizeof(why)), 0);
	assert_int_equal(srv_plink_wait_room(w, srv_plink_add(w, NULL, "c:3", why, sizeof(why))),
			 0);
	free_worker(w);
}

/* A source writing frames on a socketpair, a real reader on the other end. */
static void send_data(struct rgpu_conn *c, uint16_t type, uint64_t session, uint64_t id,
		      uint64_t off, const void *payload, uint64_t len)
{
	Rgpu__PeerData pd = RGPU__PEER_DATA__INIT;
	struct rgpu_frame_hdr h = {.type = type, .session = session, .payload_len = len, .seq = 1};
	pd.id = id;
	pd.offset = off;
	assert_int_equal(rgpu_frame_send_hdr(c, &h, &pd.base, payload), 0);
}

static void test_reader(void **state)
{
	/* a bound below one frame: the reader waits for the executor after each */
	struct srv_worker *w = new_worker(100);
	char why[200], src[96];
	uint8_t buf[3000];
	void *data;
	size_t len;
	int sp[2];
	(void)state;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	struct rgpu_conn *dst = rgpu_tcp_wrap(sp[0]), *srcc = rgpu_tcp_wrap(sp[1]);
	rgpu_conn_set_msgs(dst, &rgpu_job_msgs);
	struct srv_plink *l = srv_plink_add(w, dst, "peer:9", why, sizeof(why));
	assert_non_null(l);
	assert_int_equal(srv_plink_start(w, l), 0);
	memset(buf, 5, sizeof(buf));
	send_data(srcc, RGPU_MSG_PEER_DATA, w->session, 11, 0, buf, 3000);
	send_data(srcc, RGPU_MSG_PEER_DATA, w->session, 11, 3000, buf, 1000);
	take(w, 11, 4000, 0, 3000, 5);
	take(w, 11, 4000, 3000, 1000, 5);
	srv_peer_done(w, 11, 1);
	/* anything but MSG_PEER_DATA of this job ends the link; a copy waiting on it fails */
	send_data(srcc, RGPU_MSG_PEER_DATA, w->session, 12, 0, buf, 10);
	send_data(srcc, RGPU_MSG_PEER_DATA, w->session + 1, 12, 10, buf, 10);
	take(w, 12, 30, 0, 10, 5);
	assert_int_equal(
	    srv_peer_take(w, 12, 30, 10, &data, &len, src, sizeof(src), why, sizeof(why)),
	    RGPU_ECLOSED);
	assert_string_equal(why, "its link broke (MSG_PEER_DATA for session 120: a peer link "
				 "carries only MSG_PEER_DATA of this job)");
	srv_peer_done(w, 12, 0);
	/* a second link, whose reader waits for room when the job ends: it is released, joined */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	struct rgpu_conn *dst2 = rgpu_tcp_wrap(sp[0]), *src2 = rgpu_tcp_wrap(sp[1]);
	rgpu_conn_set_msgs(dst2, &rgpu_job_msgs);
	l = srv_plink_add(w, dst2, "peer:10", why, sizeof(why));
	assert_non_null(l);
	assert_int_equal(srv_plink_start(w, l), 0);
	send_data(src2, RGPU_MSG_PEER_DATA, w->session, 13, 0, buf, 500);
	send_data(src2, RGPU_MSG_PEER_DATA, w->session, 13, 500, buf, 500);
	for (int i = 0; i < 100 && srv_plink_queued(w, l) < 500; i++)
		usleep(10000);
	assert_int_equal(srv_plink_queued(w, l), 500); /* the second frame waits in the socket */
	rgpu_conn_close(srcc);
	free_worker(w);
	rgpu_conn_close(src2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order),	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_timeout_and_end), cmocka_unit_test(test_flow_control),
	    cmocka_unit_test(test_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
