/*
 * The worker's side of a job's link (server/link.c): frames kept until the client has them,
 * trimmed by acknowledgements, written again in order after a resume, senders held at the
 * bound on kept bytes, and released when the job ends. A socketpair stands in for the client.
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

static struct srv_worker *new_worker(void)
{
	/* (its hot fields sit on cache lines of their own: the struct is 64-byte aligned) */
	struct srv_worker *w = aligned_alloc(64, (sizeof(*w) + 63) & ~(size_t)63);
	assert_non_null(w);
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->send_lock, NULL);
	pthread_mutex_init(&w->peer_lock, NULL);
	pthread_cond_init(&w->out_cond, NULL);
	w->session = 0x77;
	snprintf(w->job_hex, sizeof(w->job_hex), "test");
	return w;
}

static void free_worker(struct srv_worker *w)
{
	srv_link_end(w);
	srv_link_acked(w, UINT64_MAX);
	free(w);
}

/* A connected pair: *srv for the worker, *cli for the test playing the client. */
static void pair(struct rgpu_conn **srv, struct rgpu_conn **cli)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	*srv = rgpu_tcp_wrap(sv[0]);
	*cli = rgpu_tcp_wrap(sv[1]);
	assert_non_null(*srv);
	assert_non_null(*cli);
	rgpu_conn_set_msgs(*srv, &rgpu_job_msgs);
	rgpu_conn_set_msgs(*cli, &rgpu_job_msgs);
}

/* Send a PING reply answering request ref; its Status carries result = ref. */
static int reply(struct srv_worker *w, uint64_t ref)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	st.result = (int32_t)ref;
	return srv_send(w, RGPU_MSG_PING, RGPU_FRAME_REPLY, ref, &st.base, NULL, 0);
}

/* Read one frame on the client side and check it is the reply to ref with seq `seq`. */
static void expect(struct rgpu_conn *cli, uint64_t seq, uint64_t ref, uint64_t ack)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv_within(cli, RGPU_PEER_CLIENT, &h, &body, 2000), 0);
	assert_int_equal(h.seq, seq);
	assert_int_equal(h.ref, ref);
	assert_int_equal(h.ack, ack);
	assert_int_equal(h.session, 0x77);
	Rgpu__Status *st = rgpu__status__unpack(NULL, h.body_len, body);
	assert_non_null(st);
	assert_int_equal(st->result, (int32_t)ref);
	rgpu__status__free_unpacked(st, NULL);
	free(body);
}

static size_t reply_size(uint64_t ref)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	st.result = (int32_t)ref;
	return rgpu_frame_size(&st.base);
}

static void test_keep_trim_resend(void **state)
{
	(void)state;
	struct srv_worker *w = new_worker();
	struct rgpu_conn *s1, *c1, *s2, *c2, *s3, *c3;

	pair(&s1, &c1);
	w->conn = s1;
	atomic_store(&w->executed, 5);
	for (uint64_t r = 1; r <= 3; r++)
		assert_int_equal(reply(w, r), 0);
	for (uint64_t r = 1; r <= 3; r++)
		expect(c1, r, r, 5);
	assert_int_equal(w->out_bytes, reply_size(1) + reply_size(2) + reply_size(3));

	/* the client has 1: it is dropped; 2 and 3 stay */
	srv_link_acked(w, 1);
	assert_int_equal(w->out_bytes, reply_size(2) + reply_size(3));
	srv_link_acked(w, 1); /* again: nothing changes */
	assert_int_equal(w->out_bytes, reply_size(2) + reply_size(3));

	/* the link breaks; a frame sent meanwhile is kept, not lost */
	srv_link_down(w);
	assert_null(w->conn);
	assert_int_equal(reply(w, 4), 0);
	assert_int_equal(w->tx_seq, 4);

	/* a resume from a client that received through 2: 3 and 4 again, in order */
	pair(&s2, &c2);
	assert_int_equal(srv_link_up(w, s2, 2), 0);
	expect(c2, 3, 3, 5);
	expect(c2, 4, 4, 5);
	assert_int_equal(w->out_bytes, reply_size(3) + reply_size(4));

	/* another break; this client received everything: nothing is written */
	srv_link_down(w);
	pair(&s3, &c3);
	assert_int_equal(srv_link_up(w, s3, 4), 0);
	assert_int_equal(w->out_bytes, 0);
	assert_int_equal(reply(w, 5), 0);
	expect(c3, 5, 5, 5);

	rgpu_conn_close(c1);
	rgpu_conn_close(s1);
	rgpu_conn_close(c2);
	rgpu_conn_close(s2);
	rgpu_conn_close(c3);
	w->conn = NULL;
	rgpu_conn_close(s3);
	free_worker(w);
}

static void test_ack_frame(void **state)
{
	(void)state;
	struct srv_worker *w = new_worker();
	struct rgpu_conn *s, *c;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	pair(&s, &c);
	w->conn = s;
	atomic_store(&w->executed, 9);
	srv_link_ack(w); /* unsequenced, says 9 */
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 2000), 0);
	assert_int_equal(h.type, RGPU_MSG_ACK);
	assert_int_equal(h.seq, 0);
	assert_int_equal(h.ack, 9);
	assert_int_equal(h.body_len, 0);
	assert_int_equal(w->tx_seq, 0); /* not a sequenced frame, not kept */
	assert_int_equal(w->out_bytes, 0);
	srv_link_ack(w); /* nothing new to say: nothing sent */
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 100),
			 RGPU_ETIMEDOUT);
	rgpu_conn_close(c);
	w->conn = NULL;
	rgpu_conn_close(s);
	free_worker(w);
}

struct sender {
	struct srv_worker *w;
	int ret;
	volatile int done;
};

static void *send_big(void *arg)
{
	struct sender *t = arg;
	static uint8_t mib[1 << 20];
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	t->ret = srv_send(t->w, RGPU_MSG_DATA, 0, 1, &dc.base, mib, sizeof(mib));
	t->done = 1;
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* With the link down, senders fill the list up to the bound (64 MiB), then wait. */
static void test_bound_and_end(void **state)
{
	(void)state;
	struct srv_worker *w = new_worker();
	struct sender t = {.w = w};
	pthread_t th;
	int n = 0;

	while (w->out_bytes <= (64u << 20)) {
		t.done = 0;
		send_big(&t);
		assert_int_equal(t.ret, 0);
		n++;
	}
	assert_int_equal(n, 64); /* each 1 MiB + header: the 64th passes the bound */
	t.done = 0;
	assert_int_equal(pthread_create(&th, NULL, send_big, &t), 0);
	sleep_ms(200);
	assert_false(t.done); /* held at the bound */
	srv_link_acked(w, 10); /* the client has 10 frames: room again */
	for (int i = 0; i < 100 && !t.done; i++)
		sleep_ms(10);
	assert_true(t.done);
	assert_int_equal(t.ret, 0);
	pthread_join(th, NULL);
	assert_int_equal(w->tx_seq, 65);

	/* held again, then the job ends: the sender is released with RGPU_ECLOSED */
	while (w->out_bytes <= (64u << 20)) {
		send_big(&t);
		assert_int_equal(t.ret, 0);
	}
	t.done = 0;
	assert_int_equal(pthread_create(&th, NULL, send_big, &t), 0);
	sleep_ms(100);
	assert_false(t.done);
	srv_link_end(w);
	pthread_join(th, NULL);
	assert_int_equal(t.ret, RGPU_ECLOSED);
	free_worker(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keep_trim_resend),
	    cmocka_unit_test(test_ack_frame),
	    cmocka_unit_test(test_bound_and_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
