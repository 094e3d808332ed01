/*
 * rgpu_parallel(): a parallel loop for the checkpoint pipeline's encoders and readers. Each
 * call starts its threads and joins them; the work is shared through the caller's own atomic
 * counter, so a thread the system refuses costs speed, not work. A pool kept alive between
 * calls would save about 50 µs per call, nothing next to a checkpoint.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
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
			ts.tv_sec += period_ms / 1000;
			ts.tv_nsec += (long)(period_ms % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
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
	long n = e && *e ? atol(e) : sysconf(_SC_NPROCESSORS_ONLN);
	return (unsigned)(n < 1 ? 1 : n > 32 ? 32 : n);
}
