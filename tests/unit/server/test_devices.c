/*
 * The job's devices (server/devices.c): a client using the GPUs of several servers numbers this
 * server's from Hello.device_base and may choose some of them (Hello.devices). A choice no
 * server could serve is refused from the Hello alone; one this server cannot is refused once
 * its GPUs are counted; the table then holds the chosen GPUs in the client's order, and every
 * client number outside base..base+n-1 is refused.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "srv.h"

static struct srv_worker wk;

static struct srv_worker *fresh(void)
{
	memset(&wk, 0, sizeof(wk));
	strcpy(wk.job_hex, "test");
	return &wk;
}

static void test_want(void **state)
{
	struct srv_worker *w = fresh();
	char why[300];
	(void)state;

	/* no base, no choice: today's client */
	assert_int_equal(srv_dev_want(w, 0, NULL, 0, why, sizeof(why)), 0);
	assert_int_equal(w->dev_base, 0);
	assert_int_equal(w->ndev_want, 0);
	/* GPUs 1 and 0 of this server are the client's 3 and 4 */
	int32_t two[] = {1, 0};
	assert_int_equal(srv_dev_want(w, 3, two, 2, why, sizeof(why)), 0);
	assert_int_equal(w->dev_base, 3);
	assert_int_equal(w->ndev_want, 2);
	assert_int_equal(w->dev_want[0], 1);
	assert_int_equal(w->dev_want[1], 0);
	/* the last of the client's 16 numbers, and one past it */
	assert_int_equal(srv_dev_want(w, 14, two, 2, why, sizeof(why)), 0);
	w = fresh();
	assert_int_equal(srv_dev_want(w, 15, two, 2, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why, "the client numbers this server's GPUs from 15 and asks for 2 of "
				 "them; a client has at most 16 devices in all, numbered 0..15 "
				 "(Hello.device_base, Hello.devices)");
	assert_int_equal(w->dev_base, 0); /* nothing kept */
	assert_int_equal(srv_dev_want(w, 16, NULL, 0, why, sizeof(why)), RGPU_EINVAL);
	assert_int_equal(srv_dev_want(w, UINT32_MAX, two, 2, why, sizeof(why)), RGPU_EINVAL);
	int32_t many[17] = {0};
	for (int i = 0; i < 17; i++)
		many[i] = i;
	assert_int_equal(srv_dev_want(w, 0, many, 17, why, sizeof(why)), RGPU_EINVAL);
	assert_int_equal(srv_dev_want(w, 0, many, 16, why, sizeof(why)), 0);
	/* an ordinal named twice, a negative one, one no server has */
	w = fresh();
	int32_t twice[] = {2, 0, 2};
	assert_int_equal(srv_dev_want(w, 0, twice, 3, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why, "the client asked for GPU 2 of this server twice (Hello.devices)");
	int32_t neg[] = {0, -1};
	assert_int_equal(srv_dev_want(w, 0, neg, 2, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why, "the client asked for GPU -1 of this server, which has no such "
				 "GPU (Hello.devices)");
	int32_t big[] = {16};
	assert_int_equal(srv_dev_want(w, 0, big, 1, why, sizeof(why)), RGPU_EINVAL);
	assert_int_equal(w->ndev_want, 0);
}

static void test_table(void **state)
{
	struct srv_worker *w = fresh();
	char why[300];
	int32_t two[] = {1, 0}, third[] = {2};
	(void)state;

	/* all of a server's GPUs, at most 16 */
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), 0);
	assert_int_equal(w->ndev, 2);
	assert_int_equal(w->dev_ord[0], 0);
	assert_int_equal(w->dev_ord[1], 1);
	w = fresh();
	assert_int_equal(srv_dev_table(w, 20, why, sizeof(why)), 0);
	assert_int_equal(w->ndev, 16);
	/* the chosen ones, in the client's order */
	w = fresh();
	assert_int_equal(srv_dev_want(w, 3, two, 2, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), 0);
	assert_int_equal(w->ndev, 2);
	assert_int_equal(w->dev_ord[0], 1);
	assert_int_equal(w->dev_ord[1], 0);
	/* a GPU this server does not have */
	w = fresh();
	assert_int_equal(srv_dev_want(w, 0, third, 1, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why,
			    "the client asked for GPU 2 of this server, which has 2 GPUs (0..1)");
	assert_int_equal(w->ndev, 0);
	/* all of them from a base: they must fit the client's 16 */
	w = fresh();
	assert_int_equal(srv_dev_want(w, 14, NULL, 0, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), 0);
	w = fresh();
	assert_int_equal(srv_dev_want(w, 15, NULL, 0, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why, "the client numbers this server's 2 GPUs from 15; a client has at "
				 "most 16 devices in all: it must choose some of them "
				 "(Hello.devices)");
}

/* a restore or a replay: the job's base, this server's first n GPUs */
static void test_first(void **state)
{
	struct srv_worker *w = fresh();
	char why[300];
	(void)state;

	srv_dev_want_first(w, 5, 3);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), RGPU_EINVAL);
	assert_string_equal(why,
			    "the client asked for GPU 2 of this server, which has 2 GPUs (0..1)");
	assert_int_equal(srv_dev_table(w, 4, why, sizeof(why)), 0);
	assert_int_equal(w->dev_base, 5);
	assert_int_equal(w->ndev, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(w->dev_ord[i], i);
	/* an old checkpoint's job: from 0, every GPU it listed */
	w = fresh();
	srv_dev_want_first(w, 0, 1);
	assert_int_equal(srv_dev_table(w, 8, why, sizeof(why)), 0);
	assert_int_equal(w->ndev, 1);
}

static void test_local(void **state)
{
	struct srv_worker *w = fresh();
	char why[300];
	int32_t two[] = {1, 0};
	(void)state;

	assert_int_equal(srv_dev_want(w, 3, two, 2, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_table(w, 2, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_local(w, 3, "test"), 0);
	assert_int_equal(srv_dev_local(w, 4, "test"), 1);
	/* the client's other servers' devices, and what is no device at all */
	assert_int_equal(srv_dev_local(w, 0, "test"), -1);
	assert_int_equal(srv_dev_local(w, 2, NULL), -1);
	assert_int_equal(srv_dev_local(w, 5, "test"), -1);
	assert_int_equal(srv_dev_local(w, -1, "test"), -1);
	assert_int_equal(srv_dev_local(w, INT_MIN, "test"), -1);
	assert_int_equal(srv_dev_local(w, INT_MAX, "test"), -1);
	/* today's client: its numbers are the server's */
	w = fresh();
	assert_int_equal(srv_dev_table(w, 1, why, sizeof(why)), 0);
	assert_int_equal(srv_dev_local(w, 0, "test"), 0);
	assert_int_equal(srv_dev_local(w, 1, "test"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_want),
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_first),
	    cmocka_unit_test(test_local),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
