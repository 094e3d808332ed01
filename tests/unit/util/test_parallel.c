/*
 * rgpu_parallel and rgpu_parallel_watch (util/parallel.c): every item done exactly once over
 * the threads, the ticks, and that the watcher returns as soon as the work is done, not at its
 * next tick (a 200 ms floor on every checkpoint's copy and every restore's fill, once); and
 * rgpu_memcpy_wide's bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/wait.h>
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
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

/* rgpu_memcpy_wide and _nt: every byte of odd sizes and offsets, many copies in a row, from several
 * threads at once (one wide copy at a time, the rest plain), and in a forked child (the threads
 * are not there: it starts again) */
#define WIDE_BUF ((size_t)9 << 20)
static uint8_t *wsrc, *wdst[4];

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31u + seed + (i >> 13));
}

static void wide_check(unsigned k, size_t off, size_t len)
{
	memset(wdst[k], 0xee, WIDE_BUF);
	/* the non-temporal copy on odd offsets (its unaligned head and tail), the plain on even */
	((off & 1) ? rgpu_memcpy_wide_nt : rgpu_memcpy_wide)(wdst[k] + off, wsrc + off, len);
	assert_memory_equal(wdst[k] + off, wsrc + off, len);
	for (size_t i = 0; i < off; i++)
		assert_int_equal(wdst[k][i], 0xee);
	for (size_t i = off + len; i < WIDE_BUF; i += 4093)
		assert_int_equal(wdst[k][i], 0xee);
}

static void *wide_thread(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	for (unsigned r = 0; r < 20; r++)
		wide_check(k, 1 + r * 7 + k, ((size_t)4 << 20) + 12345 * r + k);
	return NULL;
}

static atomic_int ticks, ticking; /* ticking: a tick is running */

static void count_tick(void *arg)
{
	atomic_store(&ticking, 1);
	usleep(2000); /* a tick that takes a while: stop must wait for it */
	atomic_fetch_add(&ticks, 1);
	atomic_store(&ticking, *(int *)arg);
}

/* A ticker ticks once a period, not before its first period, and none after its stop. */
static void test_ticker(void **state)
{
	(void)state;
	int after = 0;
	atomic_store(&ticks, 0);
	struct rgpu_ticker *t = rgpu_ticker_start(count_tick, &after, 20);
	assert_non_null(t);
	usleep(10000);
	assert_int_equal(atomic_load(&ticks), 0); /* the first comes one period in */
	usleep(200000);
	int n = atomic_load(&ticks);
	assert_true(n >= 5 && n <= 11); /* about 10 in 210 ms; a busy machine may lose some */
	rgpu_ticker_stop(t);
	n = atomic_load(&ticks);
	assert_int_equal(atomic_load(&ticking), 0); /* no tick half done */
	usleep(60000);
	assert_int_equal(atomic_load(&ticks), n);
	rgpu_ticker_stop(NULL);
}

static void test_memcpy_wide(void **state)
{
	static const size_t sizes[] = {1, 4095, (1u << 20) - 1, 1u << 20, (1u << 20) + 1,
				       ((size_t)4 << 20) + 3, ((size_t)8 << 20) + 77};
	pthread_t t[3];
	(void)state;
	wsrc = malloc(WIDE_BUF);
	for (unsigned k = 0; k < 4; k++)
		wdst[k] = malloc(WIDE_BUF);
	assert_non_null(wsrc);
	fill_pattern(wsrc, WIDE_BUF, 5);
	for (unsigned r = 0; r < 3; r++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
			wide_check(0, r * 3 + i, sizes[i]);
	for (unsigned r = 0; r < 200; r++) /* back to back: spinning threads, then sleeping ones */
		wide_check(0, r & 63, (size_t)2 << 20);
	for (unsigned k = 0; k < 3; k++)
		assert_int_equal(pthread_create(&t[k], NULL, wide_thread, (void *)(uintptr_t)(k + 1)), 0);
	wide_thread((void *)(uintptr_t)0);
	for (unsigned k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		memset(wdst[1], 0, WIDE_BUF);
		rgpu_memcpy_wide(wdst[1], wsrc, (size_t)6 << 20);
		_exit(memcmp(wdst[1], wsrc, (size_t)6 << 20) ? 1 : 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(wsrc);
	for (unsigned k = 0; k < 4; k++)
		free(wdst[k]);
}

int main(void)
{
	/* the wide copy's 8 threads on any machine (with 2 CPUs it would have none) */
	setenv("RGPU_COPY_THREADS", "8", 1);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parallel),
	    cmocka_unit_test(test_watch_returns_at_once),
	    cmocka_unit_test(test_ticker),
	    cmocka_unit_test(test_memcpy_wide),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
