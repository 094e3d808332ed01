/*
 * Pinned staging buffers: the bounce buffers bulk copies go through, so that the network and
 * the copy engines overlap. A fixed pool per worker; takers block while all are in flight,
 * which is also the back-pressure that keeps a fast client from queueing unbounded memory.
 */
#define LOG_PREFIX "staging: "
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

struct srv_staging {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n, nfree;
	size_t size;
	void **all;
	void **free;
	uint8_t *adopted;        /* all[] are shared memory here (srv_staging_adopt), not ours */
	int closed;              /* the reader gets none (srv_staging_renew) */
};

static int in_pool(const struct srv_staging *s, const void *b)
{
	for (int i = 0; i < s->n; i++)
		if (s->all[i] == b)
			return 1;
	return 0;
}

/*
 * n pinned buffers of size, all free, into s in place of its arrays (which hold none of the
 * worker's own then: new, or renewed). 0, or RGPU_ENOMEM with s unchanged.
 */
static int fill(struct srv_worker *w, struct srv_staging *s, int n, size_t size)
{
	void **all = calloc((size_t)n, sizeof(void *)), **fr = calloc((size_t)n, sizeof(void *));
	int made = 0;

	for (; all && fr && made < n; made++) {
		CUresult r = w->drv.cuMemHostAlloc(&all[made], size, CU_MEMHOSTALLOC_PORTABLE);
		if (r != CUDA_SUCCESS) {
			pr_err("cuMemHostAlloc(%zu): %s", size, srv_cu_name(&w->drv, r));
			break;
		}
		fr[made] = all[made];
	}
	if (made < n) {
		for (int i = 0; i < made; i++)
			w->drv.cuMemFreeHost(all[i]);
		free(all);
		free(fr);
		return RGPU_ENOMEM;
	}
	pthread_mutex_lock(&s->lock);
	free(s->all);
	free(s->free);
	s->all = all;
	s->free = fr;
	s->n = s->nfree = n;
	s->size = size;
	s->closed = 0;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int srv_staging_new(struct srv_worker *w, int n, size_t size, struct srv_staging **out)
{
	struct srv_staging *s = calloc(1, sizeof(*s));
	if (!s)
		return RGPU_ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (fill(w, s, n, size)) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return RGPU_ENOMEM;
	}
	*out = s;
	return 0;
}

size_t srv_staging_size(const struct srv_staging *s)
{
	return s ? s->size : 0;
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

/*
 * The reader's buffers come back only once the executor has run their frames, and the executor
 * holds at most two at a time (a device-to-host copy's chunk in flight and the next one), which
 * it waits for: the reader leaves it those two, else a copy back queued ahead of the reader's
 * copies would wait for ever (tests/progs/copymix over TCP).
 */
#define EXECUTOR_RESERVE 2

void *srv_staging_tryget(struct srv_staging *s, size_t len)
{
	void *b = NULL;
	pthread_mutex_lock(&s->lock);
	/* the size changes when shared memory is adopted */
	if (!s->closed && s->nfree > EXECUTOR_RESERVE && len <= s->size)
		b = s->free[--s->nfree];
	pthread_mutex_unlock(&s->lock);
	return b;
}

void srv_staging_put(struct srv_staging *s, void *buf)
{
	pthread_mutex_lock(&s->lock);
	if (!in_pool(s, buf) || s->nfree >= s->n) {
		/*
		 * one the pool no longer has, replaced while in flight (shared memory adopted, or a
		 * context renewed): it stays allocated, unused
		 */
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->free[s->nfree++] = buf;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void srv_staging_free(struct srv_worker *w, struct srv_staging *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n && !s->adopted; i++)
		w->drv.cuMemFreeHost(s->all[i]);
	free(s->all);
	free(s->free);
	free(s);
}

CUresult srv_staging_adopt(struct srv_worker *w, uint8_t *base, int n, size_t size)
{
	struct srv_staging *s = w->staging;
	void **all, **fr;

	if (!s || n <= 0 || size < RGPU_COPY_CHUNK || size > RGPU_MAX_CHUNK)
		return CUDA_ERROR_INVALID_VALUE;
	all = calloc((size_t)n, sizeof(void *));
	fr = calloc((size_t)n, sizeof(void *));
	if (!all || !fr) {
		free(all);
		free(fr);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < n; i++)
		all[i] = fr[i] = base + (size_t)i * size;
	pthread_mutex_lock(&s->lock);
	/* the old buffers that are back go now; those in flight are dropped when they return */
	for (int i = 0; i < s->nfree && !s->adopted; i++)
		w->drv.cuMemFreeHost(s->free[i]);
	free(s->all);
	free(s->free);
	s->all = all;
	s->free = fr;
	s->n = s->nfree = n;
	s->size = size; /* the client's: copies are cut at it from now on */
	s->adopted = base;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return CUDA_SUCCESS;
}

/*
 * The payloads of frames queued for the executor that sit in staging buffers move to ordinary
 * memory, their buffers back to the pool.
 */
static void frames_unstage(struct srv_worker *w, struct srv_frame *f)
{
	for (; f; f = f->next) {
		void *p = f->payload_staged ? malloc(f->hdr.payload_len) : NULL;
		if (!p)
			continue; /* not staged, or no memory now: the next round tries again */
		memcpy(p, f->payload, f->hdr.payload_len);
		srv_staging_put(w->staging, f->payload);
		f->payload = p;
		f->payload_staged = 0;
	}
}

/* (on the executor's thread: it runs the frame that renews the pool, so x_head is its own) */
static void queue_unstage(struct srv_worker *w)
{
	frames_unstage(w, w->x_head);
	pthread_mutex_lock(&w->q_lock);
	frames_unstage(w, w->q_head);
	pthread_mutex_unlock(&w->q_lock);
}

void srv_staging_renew(struct srv_worker *w)
{
	struct srv_staging *s = w->staging;

	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	/*
	 * Every buffer back: chunks on their way to the client return theirs, and frames queued
	 * behind this one (the executor's) give theirs up, as does a frame the reader was reading
	 * into one when the pool closed, once it is queued.
	 */
	while (s->nfree < s->n) {
		pthread_mutex_unlock(&s->lock);
		queue_unstage(w);
		pthread_mutex_lock(&s->lock);
		if (s->nfree < s->n) {
			struct timespec ts;
			rgpu_deadline(&ts, 10000000ull);
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
		}
	}
	for (int i = 0; i < s->n && !s->adopted; i++)
		w->drv.cuMemFreeHost(s->all[i]);
	s->n = s->nfree = 0;
	s->adopted = NULL; /* shared memory's registration went with the context too */
	pthread_mutex_unlock(&s->lock);
}

int srv_staging_refill(struct srv_worker *w, int n, size_t size)
{
	return fill(w, w->staging, n, size);
}

/*
 * srv_base_ctx_renew() - the application's last reference on the primary context of the job's
 * first GPU (w->dev[0], the client's device w->dev_base) went
 * (cuDevicePrimaryCtxRelease to zero, cuDevicePrimaryCtxReset, cudaDeviceReset): let the
 * driver tear the context down, as it does natively, then take it back.
 *
 * The worker's own reference (its staging buffers live in that context) would otherwise keep
 * it alive: a library's __device__ data would keep its values and a sticky fault would stay.
 * Measured on the H100 (driver 580): when every reference goes, the context is destroyed
 * while the window's reservation, mappings and physical memory survive (they are not the
 * context's), so only the staging buffers are made again. Returns 0; when the context or the
 * buffers cannot be made again the worker logs it and ends (it could not serve the job).
 */
int srv_base_ctx_renew(struct srv_worker *w)
{
	struct srv_driver *d = &w->drv;
	CUresult r;
	/* the worker's own count and size, whatever a shared-memory client lent it */
	int n = w->cfg->staging_buffers;

	if (w->staging)
		srv_staging_renew(w);
	srv_hm_unregister(w);
	d->cuDevicePrimaryCtxRelease(w->dev[0]);
	r = d->cuDevicePrimaryCtxRetain(&w->base_ctx, w->dev[0]);
	if (r == CUDA_SUCCESS)
		r = d->cuCtxSetCurrent(w->base_ctx);
	w->cur_ctx_id = 0;
	/* without its context and buffers the worker cannot serve the job: end it, its client
	 * then finds the job gone (CUDA_ERROR_DEVICE_UNAVAILABLE) rather than a worker that crashes */
	if (r != CUDA_SUCCESS) {
		pr_err("the primary context of device %d (the job's first) could not be taken "
		       "again (%s): ending the job",
		       w->dev_base, srv_cu_name(d, r));
		_exit(1);
	}
	if (w->staging ? srv_staging_refill(w, n, RGPU_MAX_CHUNK)
		       : srv_staging_new(w, n, RGPU_MAX_CHUNK, &w->staging)) {
		pr_err("the staging buffers could not be made again: ending the job");
		_exit(1);
	}
	srv_hm_register(w); /* the area's registration went with the context */
	srv_shm_ctx_renewed(w);
	pr_info("the primary context of device %d (the job's first) was reset by the application: "
		"made again",
		w->dev_base);
	return 0;
}
