/*
 * rgpu_parallel and rgpu_parallel_watch (util/parallel.c): every item done exactly once over
 * the threads, the ticks, and that the watcher returns as soon as the work is done, not at its
 * next tick (a 200 ms floor on every checkpoint's copy and every restore's fill, once).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rgpu/util.h"

#define ITEMS 1000

struct work {
	atomic_uint next;
	atomic_uint done[ITEMS];
	atomic_uint ticks;
};

static void take(void *arg, unsigned tid)
{
	struct work *w = arg;
	unsigned i;
	(void)tid;
	while ((i = atomic_fetch_add(&w->next, 1)) < ITEMS)
		atomic_fetch_add(&w->done[i], 1);
}

static void tick(void *arg)
{
	struct work *w = arg;
	atomic_fetch_add(&w->ticks, 1);
}

static void expect_once(struct work *w)
{
	for (unsigned i = 0; i < ITEMS; i++)
		assert_int_equal(atomic_load(&w->done[i]), 1);
}

static void test_parallel(void **state)
{
	static struct work w;
	(void)state;
	assert_int_equal(rgpu_parallel(4, take, &w), 4);
	expect_once(&w);
}

static void test_watch_returns_at_once(void **state)
{
	static struct work w;
	uint64_t t0 = rgpu_now_ns(), took;
	(void)state;
	/* a 10-second period: the work takes microseconds, the call must too (well under 1 s) */
	assert_int_equal(rgpu_parallel_watch(3, take, &w, tick, &w, 10000), 3);
	took = rgpu_now_ns() - t0;
	expect_once(&w);
	assert_true(took < 1000000000ull);
	/* one tick before the work (at most: it may end first) and one after */
	assert_in_range(atomic_load(&w.ticks), 1, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parallel),
	    cmocka_unit_test(test_watch_returns_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
