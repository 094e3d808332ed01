/*
 * Pinned staging buffers: the bounce buffers bulk copies go through, so that the network and
 * the copy engines overlap. A fixed pool per worker; takers block while all are in flight,
 * which is also the back-pressure that keeps a fast client from queueing unbounded memory.
 */
#define LOG_PREFIX "staging: "
#include <pthread.h>
#include <stdlib.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "srv.h"

struct srv_staging {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n, nfree;
	size_t size;
	void **all;
	void **free;
};

int srv_staging_new(struct srv_worker *w, int n, size_t size, struct srv_staging **out)
{
	struct srv_staging *s = calloc(1, sizeof(*s));
	if (!s)
		return RGPU_ENOMEM;
	s->all = calloc((size_t)n, sizeof(void *));
	s->free = calloc((size_t)n, sizeof(void *));
	if (!s->all || !s->free)
		goto out_free;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->size = size;
	for (int i = 0; i < n; i++) {
		CUresult r = w->drv.cuMemHostAlloc(&s->all[i], size, CU_MEMHOSTALLOC_PORTABLE);
		if (r != CUDA_SUCCESS) {
			pr_err("cuMemHostAlloc(%zu): %s", size, srv_cu_name(&w->drv, r));
			goto out_release;
		}
		s->free[s->nfree++] = s->all[i];
		s->n++;
	}
	*out = s;
	return 0;
out_release:
	for (int i = 0; i < s->n; i++)
		w->drv.cuMemFreeHost(s->all[i]);
out_free:
	free(s->all);
	free(s->free);
	free(s);
	return RGPU_ENOMEM;
}

void *srv_staging_get(struct srv_staging *s)
{
	void *b;
	pthread_mutex_lock(&s->lock);
	while (s->nfree == 0)
		pthread_cond_wait(&s->cond, &s->lock);
	b = s->free[--s->nfree];
	pthread_mutex_unlock(&s->lock);
	return b;
}

void *srv_staging_tryget(struct srv_staging *s)
{
	void *b = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->nfree)
		b = s->free[--s->nfree];
	pthread_mutex_unlock(&s->lock);
	return b;
}

void srv_staging_put(struct srv_staging *s, void *buf)
{
	pthread_mutex_lock(&s->lock);
	s->free[s->nfree++] = buf;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void srv_staging_free(struct srv_worker *w, struct srv_staging *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		w->drv.cuMemFreeHost(s->all[i]);
	free(s->all);
	free(s->free);
	free(s);
}
