/*
 * rgpu_parallel(): a parallel loop for the checkpoint pipeline's encoders and readers. Each
 * call starts its threads and joins them; the work is shared through the caller's own atomic
 * counter, so a thread the system refuses costs speed, not work. A pool kept alive between
 * calls would save about 50 µs per call, nothing next to a checkpoint.
 */
#include <pthread.h>
#include <stdlib.h>
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
