/*
 * rgpu_parallel(): a parallel loop for the checkpoint pipeline's encoders and readers. Each
 * call starts its threads and joins them; the work is shared through the caller's own atomic
 * counter, so a thread the system refuses costs speed, not work. A pool kept alive between
 * calls would save about 50 µs per call, nothing next to a checkpoint.
 *
 * rgpu_memcpy_wide(): a large memcpy split over a few threads kept for it: 8 on a machine of 16
 * CPUs or more (RGPU_COPY_THREADS sets it). A plain copy (a shared-memory link's device-to-host
 * data, out of a staging buffer into the program's memory) uses 4 of them, the non-temporal
 * one (into a slot the copy engine reads next) all: on the H200 host, 8 threads filling slots
 * moved pageable host-to-device copies of 1 MiB to 1 GiB 1.1-2x faster than 4, while 4 threads
 * copying out of staging gave 4 MiB device-to-host copies 1.05x native against 0.54x with 8.
 */
#include <pthread.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/util.h"

struct par {
	void (*fn)(void *arg, unsigned i);
	void *arg;
	unsigned i;
};

static void *par_main(void *p)
{
	struct par *a = p;
	a->fn(a->arg, a->i);
	return NULL;
}

unsigned rgpu_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned i), void *arg)
{
	pthread_t *t = nthreads > 1 ? calloc(nthreads, sizeof(*t)) : NULL;
	struct par *a = nthreads > 1 ? calloc(nthreads, sizeof(*a)) : NULL;
	unsigned started = 1;

	if (t && a) {
		for (unsigned i = 1; i < nthreads; i++) {
			a[started] = (struct par){fn, arg, started};
			if (pthread_create(&t[started], NULL, par_main, &a[started]) == 0)
				started++;
		}
	}
	fn(arg, 0);
	for (unsigned i = 1; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	free(a);
	return started;
}

struct watch {
	unsigned n, ran;
	void (*fn)(void *arg, unsigned i);
	void *arg;
	int over; /* under lock; done signalled when set */
	pthread_mutex_t lock;
	pthread_cond_t done;
};

static void *watch_main(void *p)
{
	struct watch *w = p;
	unsigned ran = rgpu_parallel(w->n, w->fn, w->arg);

	pthread_mutex_lock(&w->lock);
	w->ran = ran;
	w->over = 1;
	pthread_cond_signal(&w->done);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* ts (a CLOCK_MONOTONIC time for a timed wait) moved ms later */
static void ts_add_ms(struct timespec *ts, unsigned ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

unsigned rgpu_parallel_watch(unsigned nthreads, void (*fn)(void *arg, unsigned i), void *arg,
			     void (*tick)(void *targ), void *targ, unsigned period_ms)
{
	struct watch w = {.n = nthreads, .fn = fn, .arg = arg};
	pthread_condattr_t ca;
	pthread_t t;

	/* the work's end wakes this thread at once: a tick's period is not a floor on the time */
	pthread_mutex_init(&w.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.done, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t, NULL, watch_main, &w) == 0) {
		pthread_mutex_lock(&w.lock);
		while (!w.over) {
			struct timespec ts;
			pthread_mutex_unlock(&w.lock);
			tick(targ);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts_add_ms(&ts, period_ms);
			pthread_mutex_lock(&w.lock);
			while (!w.over &&
			       pthread_cond_timedwait(&w.done, &w.lock, &ts) == 0)
				;
		}
		pthread_mutex_unlock(&w.lock);
		pthread_join(t, NULL);
	} else {
		w.ran = rgpu_parallel(nthreads, fn, arg);
	}
	pthread_cond_destroy(&w.done);
	pthread_mutex_destroy(&w.lock);
	tick(targ);
	return w.ran;
}

unsigned rgpu_parallel_width(void)
{
	const char *e = getenv("RGPU_CKPT_THREADS");
	long n = e && *e ? atol(e) : rgpu_cpus();
	return (unsigned)(n < 1 ? 1 : n > 32 ? 32 : n);
}

/* ---- wide copies ---------------------------------------------------------------------------- */

#define WIDE_MAX 8
#define WIDE_MIN (1u << 20) /* below this one thread's memcpy is as fast */

static struct {
	pthread_mutex_t call;    /* one wide copy at a time */
	pthread_mutex_t m;
	pthread_cond_t go, done;
	unsigned gen, left, n;   /* n: threads, the caller included */
	unsigned use;            /* threads this copy uses (the first `use`), the caller included */
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
	int nt;                  /* non-temporal stores (rgpu_memcpy_wide_nt) */
	int state;               /* 0: not made, 1: ready, -1: none (one thread) */
} wide = {.call = PTHREAD_MUTEX_INITIALIZER, .m = PTHREAD_MUTEX_INITIALIZER,
	  .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

/*
 * memcpy with non-temporal stores: the bytes go to memory, not into this CPU's cache, so that a
 * device reading them next (a DMA from a shared-memory slot) finds no dirty line to snoop.
 * dst is aligned to 16 bytes first; the unaligned ends are plain stores.
 */
static void copy_nt(uint8_t *dst, const uint8_t *src, size_t n)
{
#if defined(__x86_64__)
	size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
	if (head > n)
		head = n;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	for (; n >= 64; n -= 64, dst += 64, src += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
	_mm_sfence();
#endif
	memcpy(dst, src, n);
}

static void copy_one(void *dst, const void *src, size_t n, int nt)
{
	if (nt)
		copy_nt(dst, src, n);
	else
		memcpy(dst, src, n);
}

/* thread i's part of the copy: 64-byte aligned pieces, the last takes the rest */
static void wide_part(unsigned i)
{
	size_t per = (wide.len / wide.use) & ~(size_t)63, off = per * i;
	size_t len = i + 1 == wide.use ? wide.len - off : per;
	copy_one(wide.dst + off, wide.src + off, len, wide.nt);
}

static void *wide_main(void *p)
{
	unsigned i = (unsigned)(uintptr_t)p, seen = 0;

	pthread_mutex_lock(&wide.m);
	for (;;) {
		while (wide.gen == seen)
			pthread_cond_wait(&wide.go, &wide.m);
		seen = wide.gen;
		if (i >= wide.use)
			continue; /* not needed for this copy */
		pthread_mutex_unlock(&wide.m);
		wide_part(i);
		pthread_mutex_lock(&wide.m);
		if (--wide.left == 0)
			pthread_cond_signal(&wide.done);
	}
	return NULL;
}

/* a child of fork() has none of the threads: it starts again */
static void wide_forked(void)
{
	pthread_mutex_init(&wide.call, NULL);
	pthread_mutex_init(&wide.m, NULL);
	pthread_cond_init(&wide.go, NULL);
	pthread_cond_init(&wide.done, NULL);
	wide.state = 0;
	wide.gen = 0;
}

static void wide_start(void)
{
	const char *e = getenv("RGPU_COPY_THREADS");
	long cpus = rgpu_cpus();
	unsigned n = e && *e ? (unsigned)atoi(e) : cpus >= 16 ? 8 : cpus >= 8 ? 4 : cpus >= 4 ? 2 : 1;
	pthread_attr_t at;

	wide.state = -1;
	pthread_atfork(NULL, NULL, wide_forked);
	if (n > WIDE_MAX)
		n = WIDE_MAX;
	wide.n = 1;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (unsigned i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &at, wide_main, (void *)(uintptr_t)i))
			break;
		wide.n++;
	}
	pthread_attr_destroy(&at);
	if (wide.n > 1)
		wide.state = 1;
}

static void wide_copy(void *dst, const void *src, size_t n, int nt, unsigned most)
{
	if (n < WIDE_MIN || wide.state < 0 || pthread_mutex_trylock(&wide.call)) {
		copy_one(dst, src, n, nt);
		return;
	}
	if (!wide.state)
		wide_start();
	if (wide.state < 0) {
		pthread_mutex_unlock(&wide.call);
		copy_one(dst, src, n, nt);
		return;
	}
	pthread_mutex_lock(&wide.m);
	wide.use = most && most < wide.n ? most : wide.n;
	wide.nt = nt;
	wide.dst = dst;
	wide.src = src;
	wide.len = n;
	wide.left = wide.use - 1;
	wide.gen++;
	pthread_cond_broadcast(&wide.go);
	pthread_mutex_unlock(&wide.m);
	wide_part(0);
	pthread_mutex_lock(&wide.m);
	while (wide.left)
		pthread_cond_wait(&wide.done, &wide.m);
	pthread_mutex_unlock(&wide.m);
	pthread_mutex_unlock(&wide.call);
}

void rgpu_memcpy_wide(void *dst, const void *src, size_t n)
{
	wide_copy(dst, src, n, 0, 4);
}

void rgpu_memcpy_wide_nt(void *dst, const void *src, size_t n)
{
	wide_copy(dst, src, n, 1, 0);
}

struct rgpu_ticker {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on CLOCK_MONOTONIC */
	int stop;
	void (*tick)(void *arg);
	void *arg;
	unsigned period_ms;
	pthread_t t;
};

static void *ticker_main(void *p)
{
	struct rgpu_ticker *t = p;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&t->lock);
	for (;;) {
		ts_add_ms(&ts, t->period_ms);
		while (!t->stop && pthread_cond_timedwait(&t->cond, &t->lock, &ts) == 0)
			;
		if (t->stop)
			break;
		/* under the lock: stop returns only once no tick runs */
		t->tick(t->arg);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

struct rgpu_ticker *rgpu_ticker_start(void (*tick)(void *arg), void *arg, unsigned period_ms)
{
	struct rgpu_ticker *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;

	if (!t)
		return NULL;
	t->tick = tick;
	t->arg = arg;
	t->period_ms = period_ms ? period_ms : 1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t->t, NULL, ticker_main, t)) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return NULL;
	}
	return t;
}

void rgpu_ticker_stop(struct rgpu_ticker *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = 1;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->t, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
