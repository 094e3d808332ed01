/*
 * A job's shared memory with a client on this host (transport/shm.c moves the frames; the
 * protocol is docs/protocol.md, "Shared memory"). What the driver must know of it:
 *
 * - the link's staging buffers become the worker's staging pool (registered with the driver),
 *   so a device-to-host chunk lands where the client reads it and travels by reference;
 * - the client's slots (its bounce buffers for large pageable payloads) are registered too, so
 *   a host-to-device copy from one is a DMA from where the client wrote it;
 * - the client's pinned-memory arena: each allocation is registered the first time a copy
 *   names it, and let go when the client frees it (MSG_ARENA_RELEASE).
 *
 * The accepting thread (the handshake, or the reader at a resume) hands the accepted link over
 * with srv_shm_attach; the executor installs it before it runs the link's first frame
 * (srv_shm_point), since the driver's calls belong on its thread.
 */
#define LOG_PREFIX "worker: "
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv_handlers.h"
#include "exec.h"
#include "srv.h"

struct shm_reg {
	uint64_t off, len;
};

struct srv_shm {
	pthread_mutex_t lock;
	struct rgpu_shm_accepted pending; /* under lock */
	int has_pending;
	/* the executor's */
	void *arena_map;
	uint8_t *arena;
	uint64_t arena_size, arena_dev, arena_ino;
	struct shm_reg *regs;        /* arena allocations registered with the driver */
	size_t nregs, cap;
	uint64_t pinned;             /* their bytes: at most half the machine's memory (a client
					names any range it likes; beyond, copies are staged) */
	int warned;
};

static struct srv_shm *shm_of(struct srv_worker *w)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&once);
	if (!w->shm && (w->shm = calloc(1, sizeof(*w->shm))))
		pthread_mutex_init(&w->shm->lock, NULL);
	pthread_mutex_unlock(&once);
	return w->shm;
}

void srv_shm_attach(struct srv_worker *w, struct rgpu_shm_accepted *acc)
{
	struct srv_shm *m = shm_of(w);
	if (!m) {
		rgpu_shm_map_put(acc->link_map);
		rgpu_shm_map_put(acc->arena_map);
		return;
	}
	pthread_mutex_lock(&m->lock);
	if (m->has_pending) { /* never installed: the newer link wins */
		rgpu_shm_map_put(m->pending.link_map);
		rgpu_shm_map_put(m->pending.arena_map);
	}
	m->pending = *acc;
	m->has_pending = 1;
	atomic_store(&w->shm_pending, 1);
	pthread_mutex_unlock(&m->lock);
}

/* Register [p, p + len) with the driver; one already registered counts as done. */
static CUresult host_register(struct srv_worker *w, void *p, uint64_t len)
{
	CUresult r = w->drv.cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE);
	return r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? CUDA_SUCCESS : r;
}

/* the bytes registering [off, off + len) pins: whole pages (a client could pin a page a byte) */
static uint64_t pinned_span(uint64_t off, uint64_t len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	return (off + len + page - 1) / page * page - off / page * page;
}

/* registrations at most: the linear look-ups stay cheap (a client's pinned allocations) */
#define MAX_REGS 65536

static void regs_drop(struct srv_worker *w, struct srv_shm *m, uint64_t off, uint64_t len)
{
	size_t k = 0;
	for (size_t i = 0; i < m->nregs; i++) {
		struct shm_reg *g = &m->regs[i];
		if (g->off < off + len && off < g->off + g->len) {
			w->drv.cuMemHostUnregister(m->arena + g->off);
			m->pinned -= pinned_span(g->off, g->len);
		} else
			m->regs[k++] = *g;
	}
	m->nregs = k;
}

static void arena_take(struct srv_worker *w, struct srv_shm *m, struct rgpu_shm_accepted *a)
{
	if (!a->arena) {
		return;
	}
	if (m->arena && m->arena_dev == a->arena_dev && m->arena_ino == a->arena_ino &&
	    m->arena_size == a->arena_size) {
		rgpu_shm_map_put(a->arena_map); /* the same arena, mapped already */
		return;
	}
	if (m->arena) {
		/* another arena: nothing may still be copying from the old one */
		w->drv.cuCtxSynchronize();
		regs_drop(w, m, 0, m->arena_size);
		rgpu_shm_map_put(m->arena_map);
	}
	m->arena_map = a->arena_map;
	m->arena = a->arena;
	m->arena_size = a->arena_size;
	m->arena_dev = a->arena_dev;
	m->arena_ino = a->arena_ino;
}

void srv_shm_point(struct srv_worker *w)
{
	struct srv_shm *m = w->shm;
	struct rgpu_shm_accepted a;
	CUresult r;

	/* (a load first: this runs before every frame, and an exchange always writes) */
	if (!atomic_load_explicit(&w->shm_pending, memory_order_relaxed) ||
	    !atomic_exchange(&w->shm_pending, 0) || !m)
		return;
	pthread_mutex_lock(&m->lock);
	a = m->pending;
	m->has_pending = 0;
	pthread_mutex_unlock(&m->lock);
	/* the link's memory stays mapped for the job's life: the driver keeps it registered */
	/*
	 * the worker's copies assume buffers of at least RGPU_COPY_CHUNK (peer.c) and at most
	 * RGPU_MAX_CHUNK: other sizes, which only a client other than rgpu's offers, are not used
	 */
	if (a.nstage && (a.slot_size < RGPU_COPY_CHUNK || a.slot_size > RGPU_MAX_CHUNK)) {
		pr_warn("job %s: the client's staging buffers of %llu bytes are not %u to %u: the "
			"worker keeps its own",
			w->job_hex, (unsigned long long)a.slot_size, (unsigned)RGPU_COPY_CHUNK,
			(unsigned)RGPU_MAX_CHUNK);
		a.nstage = 0;
	}
	r = a.nstage ? host_register(w, a.stage, (uint64_t)a.nstage * a.slot_size) : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS && a.nstage)
		r = srv_staging_adopt(w, a.stage, (int)a.nstage, a.slot_size);
	if (r == CUDA_SUCCESS && a.slots_size)
		r = host_register(w, a.slots, a.slots_size);
	if (r != CUDA_SUCCESS)
		pr_warn("job %s: the shared memory's buffers could not be registered with the "
			"driver (%s): copies through them are slower",
			w->job_hex, srv_cu_name(&w->drv, r));
	arena_take(w, m, &a);
	pr_debug("job %s: shared memory installed (%u staging buffers, arena %llu bytes)",
		 w->job_hex, a.nstage, (unsigned long long)a.arena_size);
}

int srv_shm_arena_use(struct srv_worker *w, uint64_t off, uint64_t len)
{
	struct srv_shm *m = w->shm;
	CUresult r;

	if (!m || !m->arena || off > m->arena_size || len > m->arena_size - off || !len)
		return 0;
	for (size_t i = 0; i < m->nregs; i++)
		if (m->regs[i].off == off && m->regs[i].len == len)
			return 1;
	/* ranges it overlaps are the client's former allocations there: they are gone */
	regs_drop(w, m, off, len);
	if (m->nregs == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		struct shm_reg *n = realloc(m->regs, cap * sizeof(*n));
		if (!n)
			return 0;
		m->regs = n;
		m->cap = cap;
	}
	uint64_t most = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	r = m->pinned + pinned_span(off, len) > most || m->nregs >= MAX_REGS
		? CUDA_ERROR_OUT_OF_MEMORY
		: host_register(w, m->arena + off, len);
	if (r != CUDA_SUCCESS) {
		if (!m->warned++)
			pr_warn("job %s: the client's pinned memory [%llu, +%llu) could not be "
				"registered with the driver (%s): its copies are staged by the driver",
				w->job_hex, (unsigned long long)off, (unsigned long long)len,
				srv_cu_name(&w->drv, r));
		return 0;
	}
	m->regs[m->nregs++] = (struct shm_reg){off, len};
	m->pinned += pinned_span(off, len);
	return 1;
}

void *srv_shm_arena_at(struct srv_worker *w, uint64_t off, uint64_t len, uint64_t reg_off,
		       uint64_t reg_len)
{
	struct srv_shm *m = w->shm;
	if (!m || !m->arena || reg_off > m->arena_size || reg_len > m->arena_size - reg_off ||
	    off < reg_off || off - reg_off > reg_len || len > reg_len - (off - reg_off))
		return NULL;
	srv_shm_arena_use(w, reg_off, reg_len);
	return m->arena + off;
}

void srv_shm_ctx_renewed(struct srv_worker *w)
{
	/* the registrations went with the context: a copy registers its allocation again */
	if (w->shm) {
		w->shm->nregs = 0;
		w->shm->pinned = 0;
	}
}

int h_arena_release(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ArenaRelease, arena_release, w, f);
	struct srv_shm *s = w->shm;

	/* the copies from or into it are complete before the client reuses it (as cuMemFreeHost) */
	if (s && s->arena && m->off < s->arena_size && s->nregs) {
		w->drv.cuCtxSynchronize();
		regs_drop(w, s, m->off, MIN(m->len, s->arena_size - m->off));
	}
	rgpu__arena_release__free_unpacked(m, NULL);
	return srv_reply_status(w, f, CUDA_SUCCESS);
}
