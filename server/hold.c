/*
 * The job's barrier (design.md §7): another thread of the worker (a checkpoint, a migration)
 * asks the executor to stop between two frames and run a piece of work there, with nothing of
 * the job executing, then to carry on at once or to stay held until it is released. The
 * executor checks for a hold before it takes each frame, and the queue's wait wakes up for one
 * (worker.c); the frame it is executing when asked finishes first, so a hold may wait as long
 * as that frame does, and the requester bounds the wait.
 *
 * The work runs on the executor because it reads what only the executor touches (the object
 * map, the state log, the mappings). The reader thread goes on taking frames meanwhile; they
 * wait in the queue, and the client's flow control bounds them.
 */
#define LOG_PREFIX "worker: "
#include <errno.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

int srv_hold_wanted(struct srv_worker *w)
{
	return atomic_load(&w->hold.want);
}

/* Wake the executor wherever it waits for frames (worker.c's queue_pop). */
static void wake_executor(struct srv_worker *w)
{
	pthread_mutex_lock(&w->q_lock);
	pthread_cond_broadcast(&w->q_cond);
	pthread_mutex_unlock(&w->q_lock);
}

int srv_hold(struct srv_worker *w, int (*work)(struct srv_worker *w, void *arg), void *arg,
	     int timeout_ms, int *work_ret)
{
	struct srv_hold *h = &w->hold;
	uint64_t deadline = rgpu_deadline_after(timeout_ms);
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if (atomic_load(&h->want) || h->parked) {
		pthread_mutex_unlock(&h->lock);
		return RGPU_EBUSY;
	}
	h->work = work;
	h->arg = arg;
	h->done = 0;
	h->release = 0;
	atomic_store(&h->want, 1);
	pthread_mutex_unlock(&h->lock);
	wake_executor(w);

	pthread_mutex_lock(&h->lock);
	while (!h->done && !atomic_load(&w->dead)) {
		struct timespec ts;
		if (!h->parked && rgpu_now_ns() >= deadline) {
			/* the executor is inside a long call: give up before it starts the work */
			ret = RGPU_ETIMEDOUT;
			break;
		}
		rgpu_deadline(&ts, 10000000ull);
		pthread_cond_timedwait(&h->cond, &h->lock, &ts);
	}
	if (!ret && !h->done)
		ret = RGPU_ECLOSED; /* the job ended */
	if (ret) {
		atomic_store(&h->want, 0);
		h->work = NULL;
	} else if (work_ret) {
		*work_ret = h->work_ret;
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

void srv_hold_release(struct srv_worker *w)
{
	struct srv_hold *h = &w->hold;

	pthread_mutex_lock(&h->lock);
	h->release = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

int srv_hold_is_parked(struct srv_worker *w)
{
	struct srv_hold *h = &w->hold;
	int parked;

	pthread_mutex_lock(&h->lock);
	parked = h->parked;
	pthread_mutex_unlock(&h->lock);
	return parked;
}

void srv_hold_point(struct srv_worker *w)
{
	struct srv_hold *h = &w->hold;
	int keep;

	if (!atomic_load(&h->want))
		return;
	pthread_mutex_lock(&h->lock);
	if (!atomic_load(&h->want) || !h->work) {
		pthread_mutex_unlock(&h->lock);
		return;
	}
	h->parked = 1;
	pthread_mutex_unlock(&h->lock);

	h->work_ret = h->work(w, h->arg);
	keep = h->work_ret == SRV_HOLD_KEEP;
	/* the work may have made other contexts current: the next frame sets its own again */
	w->cur_ctx_id = 0;

	pthread_mutex_lock(&h->lock);
	h->done = 1;
	pthread_cond_broadcast(&h->cond);
	while (keep && !h->release && !atomic_load(&w->dead)) {
		struct timespec ts;
		rgpu_deadline(&ts, 100000000ull);
		pthread_cond_timedwait(&h->cond, &h->lock, &ts);
	}
	h->parked = 0;
	h->work = NULL;
	atomic_store(&h->want, 0);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}
