/*
 * Checkpointing a job (design.md §7; docs/architecture.md, "Checkpoints"): the worker's side.
 *
 * The job is held at the barrier (hold.c) only for what must be consistent: every context
 * synchronised, the state log, capture journals, host area, kept frames and link counters
 * copied, module globals and CUDA arrays read back (ckpt_array.c; a live migration's arrays at
 * its switchover only), and every window mapping hashed on the GPU (gpuhash.c) in 2 MiB
 * chunks. The chunks the store lacks are then either copied device-to-device into a
 * snapshot allocation, when the GPU has room for them, and the job released at once, or copied
 * out while the job stays held. Everything else (copying the snapshot out, encoding chunks on a
 * pool of threads, hashing the host-side parts, the store's transactions) happens after the
 * job runs again. The manifest is committed last, in one transaction (migrate/store.c): a
 * checkpoint exists whole or not at all, and a failure at any step leaves the job running.
 *
 * This file must never leave the job held on an error, nor commit a checkpoint whose bytes it
 * has not all written or found in the store.
 */
#define LOG_PREFIX "ckpt: "
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "checkpoint.pb-c.h"
#include "gpuhash.h"
#include "rgpu/adminclient.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

#define CH RGPU_CHUNK_MAX
#define BATCH_CHUNKS 4                     /* device chunks one copy-out moves (8 MiB) */
#define SNAPSHOT_SPARE (512ull << 20)       /* device memory a snapshot leaves free */
#define PROGRESS_MS 200

/* What checkpoints of this job keep between them: module images' chunk hashes. */
struct img_hashes {
	uint8_t hash[RGPU_HASH_LEN];
	uint64_t size;
	uint8_t *chunks; /* rgpu_ckpt_nchunks(size) hashes */
};
/* A drain thread's tools: made at its first use, kept until srv_ckpt_release(). */
struct drain_res {
	uint8_t *val;               /* a chunk's stored value */
	struct rgpu_chunk_enc *enc;
	void *pinned;               /* BATCH_CHUNKS * CH of pinned memory (device items only) */
	CUstream s;
};

struct srv_ckpt_cache {
	struct img_hashes *v;
	size_t n, cap;
	uint8_t zero[RGPU_HASH_LEN]; /* the chunk hash of CH zero bytes */
	/*
	 * Pinned buffers cost the driver about 90 ms for 16 threads on an H200: paid once per
	 * operation (a migration's rounds and its switchover share them), not once per phase.
	 */
	struct drain_res res[32];
};

/*
 * The job's module images, each once, back to back in an unlinked file (O_TMPFILE in the data
 * directory, else a memfd): a checkpoint reads them here, not from the module cache, whose
 * bounds may have dropped them. Under lock: module loads (the executor) append while a
 * checkpoint that released the job reads.
 */
struct kept_image {
	uint8_t hash[RGPU_HASH_LEN];
	uint64_t off, len;
};
struct srv_kept_images {
	pthread_mutex_t lock;
	int fd;          /* -1: none could be had (logged) */
	uint64_t end;
	struct kept_image *v;
	size_t n, cap;
};

/* A window mapping to save, as its state-log record names it. */
struct dev_range {
	uint64_t id, addr, size;
	uint32_t device;
};

/* A part of the checkpoint kept in host memory (data NULL: a module image, read later). */
struct hblob {
	uint32_t kind; /* Rgpu__CkptBlobKind */
	uint64_t id, addr, size;
	uint8_t *data;
	uint8_t hash[RGPU_HASH_LEN]; /* an image's SHA-256 */
	uint8_t *chunks;             /* its chunk hashes (owned unless cached) */
	int cached;
};

struct take {
	struct srv_worker *w;
	struct rgpu_ckpt *ck;
	int keep_held;
	struct srv_ckpt_direct *dx; /* a live round: device memory goes to the target, not here */
	struct srv_gpuhash *gh;
	CUstream stream;
	struct rgpu_conn *progress;
	/* filled at the barrier */
	int err;
	char why[300];
	uint64_t t_req, t_park, t_release;
	struct dev_range *dev;
	size_t ndev, ndchunks;
	uint8_t *dhash;   /* the device chunks' hashes, in order */
	uint8_t *dirty;   /* bitmap: device chunks the store lacks (first of each hash) */
	uint8_t *zero;    /* bitmap: of those, all-zero chunks (no copy needed) */
	CUdeviceptr snap; /* the snapshot: the dirty non-zero chunks, in order */
	uint64_t snap_len;
	int snapshot, released;
	struct hblob *hb;
	size_t nhb, caphb;
	uint64_t executed, received, sent, client_caps, records, device_bytes;
	uint64_t array_bytes; /* of device_bytes: the elements of the arrays read back */
	size_t narrays;
	int32_t async_err;
	uint8_t token[32];
	uint64_t *events; /* recorded events, oldest record first */
	size_t nevents;
	/* where the pause went: at the barrier, after the sync, the host-side copies, the hash,
	 * the store's look-up, the snapshot */
	uint64_t t_sync, t_state, t_hash, t_lookup, t_snap;
};

static int bit(const uint8_t *bm, size_t i)
{
	return bm[i / 8] >> (i % 8) & 1;
}

static int fail(struct take *tk, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct take *tk, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tk->why, sizeof(tk->why), fmt, ap);
	va_end(ap);
	tk->err = code;
	return code;
}

static struct hblob *add_blob(struct take *tk, uint32_t kind, uint64_t id, uint64_t addr,
			      uint8_t *data, uint64_t size)
{
	if (tk->nhb == tk->caphb) {
		size_t cap = tk->caphb ? 2 * tk->caphb : 16;
		struct hblob *v = realloc(tk->hb, cap * sizeof(*v));
		if (!v) {
			free(data);
			return NULL;
		}
		tk->hb = v;
		tk->caphb = cap;
	}
	struct hblob *b = &tk->hb[tk->nhb++];
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	b->id = id;
	b->addr = addr;
	b->data = data;
	b->size = size;
	return b;
}

/* ---- at the barrier ------------------------------------------------------------------------- */

struct ids {
	struct take *tk;
	int failed;
};

static int collect_rec(const struct st_rec *rec, void *arg)
{
	struct take *tk = arg;
	struct srv_worker *w = tk->w;

	if (rec->kind == ST_KIND_VMM_MAP) {
		/* an application's mapping nobody may read yet holds nothing a program can see */
		if (rec->parent && !rec->vmm.access)
			return 0;
		/* the record names the client's number: the job's first GPU is its dev_base */
		if (rec->vmm.device > INT32_MAX ||
		    srv_dev_local(w, (int)rec->vmm.device, NULL) != 0)
			return fail(tk, RGPU_EUNSUPPORTED,
				    "the job has memory on its device %llu, not its first (%d): "
				    "checkpoints of jobs on more than one GPU are not built yet",
				    (unsigned long long)rec->vmm.device, w->dev_base);
		struct dev_range *d = realloc(tk->dev, (tk->ndev + 1) * sizeof(*d));
		if (!d)
			return fail(tk, RGPU_ENOMEM, "out of memory");
		tk->dev = d;
		d[tk->ndev++] = (struct dev_range){rec->id, rec->vmm.addr, rec->vmm.size,
						   (uint32_t)rec->vmm.device};
		tk->device_bytes += rec->vmm.size;
	} else if (rec->kind == ST_KIND_GLOBAL && rec->global.size) {
		/* read back now: the driver keeps it outside the window, out of the hash's reach */
		uint8_t *buf = malloc(rec->global.size);
		uint64_t real = srv_dev_translate(w, rec->global.addr);
		CUresult r;
		if (!buf)
			return fail(tk, RGPU_ENOMEM, "out of memory for a module global");
		r = w->drv.cuMemcpyDtoHAsync(buf, real, rec->global.size, tk->stream);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuStreamSynchronize(tk->stream);
		if (r != CUDA_SUCCESS) {
			free(buf);
			return fail(tk, RGPU_ECUDA, "reading module global \"%s\": %s",
				    rec->name ? rec->name : "?", srv_cu_name(&w->drv, r));
		}
		if (!add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_GLOBAL, rec->id, rec->global.addr,
			      buf, rec->global.size))
			return fail(tk, RGPU_ENOMEM, "out of memory");
		tk->device_bytes += rec->global.size;
	} else if (srv_array_saved(rec) && (!tk->dx || tk->keep_held)) {
		/*
		 * Outside the window, and written by kernels through surface objects: read whole
		 * now. A live round's job runs on and is not tracked for dirtiness here: its
		 * arrays cross once, at the switchover, with the job held (docs/architecture.md).
		 */
		uint8_t *buf = NULL;
		size_t len = 0;
		uint64_t elems = 0;
		char why[240];
		int ret = srv_array_save(w, rec, &buf, &len, &elems, why, sizeof(why));
		if (ret)
			return fail(tk, ret, "%s", why);
		if (!add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY, rec->id, 0, buf, len))
			return fail(tk, RGPU_ENOMEM, "out of memory");
		tk->device_bytes += elems;
		tk->array_bytes += elems;
		tk->narrays++;
	} else if (rec->kind == ST_KIND_MODULE && rec->has_hash) {
		for (size_t i = 0; i < tk->nhb; i++)
			if (tk->hb[i].kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE &&
			    !memcmp(tk->hb[i].hash, rec->hash, RGPU_HASH_LEN))
				return 0; /* the same image loaded twice: stored once */
		struct hblob *b = add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE, 0, 0, NULL,
					   rec->module.size);
		if (!b)
			return fail(tk, RGPU_ENOMEM, "out of memory");
		memcpy(b->hash, rec->hash, RGPU_HASH_LEN);
	}
	return 0;
}

/* The graph journals as RGPU_STATE_DUMP writes them: graph id, length (u64 LE), journal. */
static int journals_blob(struct take *tk)
{
	size_t n = 0, off = 0;
	uint8_t *b;

	for (struct rgpu_journal *j = tk->w->journals.kept; j; j = j->next)
		n += j->alias ? 0 : 16 + j->len;
	b = malloc(n ? n : 1);
	if (!b)
		return RGPU_ENOMEM;
	for (struct rgpu_journal *j = tk->w->journals.kept; j; j = j->next) {
		if (j->alias)
			continue; /* made again by the frame that made it */
		wr_le64(b + off, j->stream);
		wr_le64(b + off + 8, j->len);
		memcpy(b + off + 16, j->buf, j->len);
		off += 16 + j->len;
	}
	return add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_JOURNALS, 0, 0, b, n) ? 0 : RGPU_ENOMEM;
}

static int by_record(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The events recorded for real, oldest record first (a restore records them again). */
static int recorded_events(struct take *tk)
{
	struct srv_worker *w = tk->w;
	struct collect c = {.ctx = COLLECT_ALL};
	uint64_t *pairs;
	size_t n = 0;

	srv_collect_arg = &c;
	twalk(w->objs, srv_collect_walk);
	pairs = malloc((c.n + 1) * 2 * sizeof(*pairs));
	tk->events = malloc((c.n + 1) * sizeof(*tk->events));
	if (!pairs || !tk->events) {
		free(pairs);
		free(c.ids);
		return fail(tk, RGPU_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < c.n; i++) {
		struct srv_obj *o = srv_obj_find(w, c.ids[i], ST_KIND_EVENT);
		if (o && o->recorded) {
			pairs[2 * n] = o->id;
			pairs[2 * n + 1] = o->recorded;
			n++;
		}
	}
	qsort(pairs, n, 2 * sizeof(*pairs), by_record);
	for (size_t i = 0; i < n; i++)
		tk->events[i] = pairs[2 * i];
	tk->nevents = n;
	free(pairs);
	free(c.ids);
	return 0;
}

/* Every context's work done, or the first one that fails (a sticky error). */
static int sync_contexts(struct take *tk)
{
	struct srv_worker *w = tk->w;
	struct collect c = {.ctx = COLLECT_ALL};
	int ret = 0;

	srv_collect_arg = &c;
	twalk(w->objs, srv_collect_walk);
	for (size_t i = 0; i < c.n && !ret; i++) {
		struct srv_obj *o = srv_obj_find(w, c.ids[i], ST_KIND_CONTEXT);
		CUresult r;
		if (!o)
			continue;
		r = w->drv.cuCtxSetCurrent(o->h);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuCtxSynchronize();
		if (r != CUDA_SUCCESS)
			ret = fail(tk, RGPU_ECUDA,
				   "context %llu's work failed (%s): a job with an error pending cannot "
				   "be checkpointed",
				   (unsigned long long)o->id, srv_cu_name(&w->drv, r));
	}
	free(c.ids);
	w->drv.cuCtxSetCurrent(w->base_ctx);
	return ret;
}

/* The chunk hashes of every device range, on the GPU (CPU when the kernels are missing). */
static int hash_device(struct take *tk)
{
	struct srv_worker *w = tk->w;
	size_t k = 0;

	for (size_t i = 0; i < tk->ndev; i++)
		tk->ndchunks += tk->dev[i].size / CH;
	tk->dhash = malloc(tk->ndchunks ? tk->ndchunks * RGPU_HASH_LEN : 1);
	if (!tk->dhash)
		return fail(tk, RGPU_ENOMEM, "out of memory");
	for (size_t i = 0; i < tk->ndev; i++) {
		const struct dev_range *d = &tk->dev[i];
		int ret = tk->gh ? srv_gpuhash_run(&w->drv, tk->gh, d->addr, d->size, CH,
						   tk->stream, tk->dhash + k * RGPU_HASH_LEN)
				 : RGPU_EUNSUPPORTED;
		if (ret == RGPU_EUNSUPPORTED) {
			/* no kernels here: each chunk copied out and hashed by the CPU */
			uint8_t *buf = malloc(CH);
			CUresult r = buf ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
			for (uint64_t off = 0; r == CUDA_SUCCESS && off < d->size; off += CH) {
				r = w->drv.cuMemcpyDtoHAsync(buf, d->addr + off, CH, tk->stream);
				if (r == CUDA_SUCCESS)
					r = w->drv.cuStreamSynchronize(tk->stream);
				if (r == CUDA_SUCCESS)
					rgpu_chunk_hash(buf, CH,
							tk->dhash + (k + off / CH) * RGPU_HASH_LEN);
			}
			free(buf);
			ret = r == CUDA_SUCCESS ? 0 : RGPU_EIO;
		}
		if (ret)
			return fail(tk, ret, "hashing device memory at %#llx (+%llu bytes) failed",
				    (unsigned long long)d->addr, (unsigned long long)d->size);
		k += d->size / CH;
	}
	return 0;
}

/* The device address of device chunk i. */
static uint64_t chunk_addr(const struct take *tk, size_t i)
{
	for (size_t r = 0; r < tk->ndev; r++) {
		size_t n = tk->dev[r].size / CH;
		if (i < n)
			return tk->dev[r].addr + i * CH;
		i -= n;
	}
	return 0;
}

/*
 * The chunks to copy (the store lacks them, they are not zero) into a snapshot, when the GPU
 * has room for them and SNAPSHOT_SPARE besides: runs of chunks adjacent on the device are one
 * copy each.
 */
static void snapshot(struct take *tk, uint64_t dirty_bytes)
{
	struct srv_worker *w = tk->w;
	size_t free_b = 0, total = 0, run_from = 0, run_len = 0;
	uint64_t run_src = 0, soff = 0;
	CUresult r;

	if (!dirty_bytes || w->drv.cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS ||
	    free_b < dirty_bytes + SNAPSHOT_SPARE)
		return;
	if (w->drv.cuMemAlloc(&tk->snap, dirty_bytes) != CUDA_SUCCESS) {
		tk->snap = 0;
		return;
	}
	tk->snap_len = dirty_bytes;
	r = CUDA_SUCCESS;
	for (size_t i = 0; i <= tk->ndchunks && r == CUDA_SUCCESS; i++) {
		int take = i < tk->ndchunks && bit(tk->dirty, i) && !bit(tk->zero, i);
		uint64_t src = take ? chunk_addr(tk, i) : 0;
		if (take && run_len && src == run_src + run_len * CH) {
			run_len++;
			continue;
		}
		if (run_len) {
			r = w->drv.cuMemcpyDtoDAsync(tk->snap + run_from, run_src, run_len * CH,
						     tk->stream);
			soff = run_from + run_len * CH;
			run_len = 0;
		}
		if (take) {
			run_from = soff;
			run_src = src;
			run_len = 1;
		}
	}
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamSynchronize(tk->stream);
	if (r != CUDA_SUCCESS) {
		pr_warn("job %s: the snapshot copy failed (%s): copying out while the job waits",
			w->job_hex, srv_cu_name(&w->drv, r));
		w->drv.cuMemFree(tk->snap);
		tk->snap = 0;
		tk->snap_len = 0;
		return;
	}
	tk->snapshot = 1;
}

/* The work the executor runs at the barrier (srv_hold). */
static int at_barrier(struct srv_worker *w, void *arg)
{
	struct take *tk = arg;
	struct srv_ckpt_cache *cc = w->ckpt_cache;
	uint8_t *buf = NULL;
	size_t len = 0, nmissing = 0;
	uint64_t dirty_bytes = 0;

	tk->t_park = rgpu_now_ns();
	if (w->journals.capturing) {
		fail(tk, RGPU_EBUSY,
		     "a stream of the job is capturing a graph: try again once the capture ended");
		return SRV_HOLD_RELEASE;
	}
	if (sync_contexts(tk))
		return SRV_HOLD_RELEASE;
	tk->t_sync = rgpu_now_ns();
	if (rgpu_fault("ckpt_barrier")) {
		fail(tk, RGPU_EIO, "fault site ckpt_barrier");
		return SRV_HOLD_RELEASE;
	}
	tk->executed = atomic_load(&w->executed);
	tk->async_err = (int32_t)w->async_err;
	tk->client_caps = w->client_caps;
	memcpy(tk->token, w->token, sizeof(tk->token));
	tk->records = st_count(w->log);
	if (st_serialize(w->log, &buf, &len) ||
	    !add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG, 0, 0, buf, len) ||
	    journals_blob(tk)) {
		fail(tk, RGPU_ENOMEM, "out of memory copying the state log");
		return SRV_HOLD_RELEASE;
	}
	if (srv_hm_save(w, &buf, &len, &tk->received) ||
	    !add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_HOSTAREA, 0, 0, buf, len) ||
	    srv_link_kept_save(w, &buf, &len, &tk->sent) ||
	    !add_blob(tk, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_KEPT, 0, 0, buf, len)) {
		fail(tk, RGPU_ENOMEM, "out of memory copying the link's state");
		return SRV_HOLD_RELEASE;
	}
	if (recorded_events(tk) || st_foreach(w->log, collect_rec, tk))
		return SRV_HOLD_RELEASE;
	tk->t_state = rgpu_now_ns();
	if (hash_device(tk))
		return SRV_HOLD_RELEASE;
	tk->t_hash = rgpu_now_ns();
	/* which device chunks the store lacks, each hash once */
	tk->dirty = calloc(1, tk->ndchunks / 8 + 1);
	tk->zero = calloc(1, tk->ndchunks / 8 + 1);
	if (!tk->dirty || !tk->zero) {
		fail(tk, RGPU_ENOMEM, "out of memory");
		return SRV_HOLD_RELEASE;
	}
	if (tk->dx) {
		/* a live round: the chunks that differ from what the target was sent last */
		const struct srv_ckpt_direct *dx = tk->dx;
		for (size_t i = 0; i < tk->ndchunks; i++)
			if (!dx->have || i >= dx->nhave ||
			    memcmp(dx->have + i * RGPU_HASH_LEN, tk->dhash + i * RGPU_HASH_LEN,
				   RGPU_HASH_LEN))
				tk->dirty[i / 8] |= (uint8_t)(1u << (i % 8));
	} else if (rgpu_ckpt_set_list(tk->ck, tk->dhash, tk->ndchunks) ||
		   rgpu_ckpt_missing(tk->ck, tk->dirty, &nmissing)) {
		fail(tk, RGPU_EIO, "the checkpoint store cannot be read");
		return SRV_HOLD_RELEASE;
	}
	tk->t_lookup = rgpu_now_ns();
	for (size_t i = 0; i < tk->ndchunks; i++) {
		if (!bit(tk->dirty, i))
			continue;
		if (!memcmp(tk->dhash + i * RGPU_HASH_LEN, cc->zero, RGPU_HASH_LEN))
			tk->zero[i / 8] |= (uint8_t)(1u << (i % 8));
		else
			dirty_bytes += CH;
	}
	if (!tk->keep_held) /* a migration's job stays held: nothing to snapshot */
		snapshot(tk, dirty_bytes);
	tk->t_snap = rgpu_now_ns();
	/*
	 * A live round's job runs on even without a snapshot: what it rewrites while its bytes are
	 * read, the target finds in its own hashes and asks for again.
	 */
	if ((tk->snapshot || !dirty_bytes || tk->dx) && !tk->keep_held) {
		tk->t_release = rgpu_now_ns();
		tk->released = 1;
		return SRV_HOLD_RELEASE;
	}
	return SRV_HOLD_KEEP;
}

/* ---- after the barrier: the chunks out, into the store ------------------------------------- */

/* One unit of the copy-out: device chunks adjacent at their source, or one host chunk. */
struct item {
	size_t index;     /* its first chunk in the manifest's list */
	uint32_t n;       /* chunks (device: up to BATCH_CHUNKS) */
	int zero;         /* an all-zero device chunk: its value without a copy */
	uint64_t src;     /* device: where the bytes are now (the snapshot or the job's memory) */
	const uint8_t *host;
	uint64_t len;     /* bytes of the last chunk (host); device chunks are CH each */
	int exact;        /* a live round's: the bytes are the cut's (snapshot, zero, or held) */
};

struct drain {
	struct take *tk;
	srv_direct_send_fn send; /* a live round's sink: device chunks go there, not to the store */
	void *send_arg;
	const uint8_t *hashes;
	struct item *items;
	size_t nitems;
	atomic_size_t next;
	atomic_uint_fast64_t bytes;
	atomic_int failed;
	char why[200];
	pthread_mutex_t lock;
};

/*
 * Device chunk i, from src, as the next item: joined to the item before when the two are
 * adjacent in the list and at their source, alike, and it is not full (one copy moves both).
 */
static void add_device_item(struct drain *d, size_t i, uint64_t src, int exact)
{
	struct item *last = d->nitems ? &d->items[d->nitems - 1] : NULL;

	if (last && !last->zero && last->n < BATCH_CHUNKS && last->index + last->n == i &&
	    last->src + (uint64_t)last->n * CH == src && last->exact == exact)
		last->n++;
	else
		d->items[d->nitems++] = (struct item){.index = i, .n = 1, .src = src, .exact = exact};
}

static void drain_fail(struct drain *d, const char *why)
{
	pthread_mutex_lock(&d->lock);
	if (!atomic_load(&d->failed))
		snprintf(d->why, sizeof(d->why), "%s", why);
	atomic_store(&d->failed, 1);
	pthread_mutex_unlock(&d->lock);
}

#define STORE_FULL_WHY                                                                          \
	"the checkpoint store's disk has no room for it (the server's log says how much more it " \
	"needed)"

/* a chunk the store did not take: why, in the operator's words */
static void drain_store_fail(struct drain *d, int ret)
{
	drain_fail(d, ret == RGPU_ENOSPC ? STORE_FULL_WHY : "writing the checkpoint store failed");
}

static void drain_thread(void *arg, unsigned tid)
{
	struct drain *d = arg;
	struct srv_worker *w = d->tk->w;
	struct drain_res *r = &w->ckpt_cache->res[tid % 32];
	size_t i;

	w->drv.cuCtxSetCurrent(w->base_ctx);
	if ((!r->val && !(r->val = malloc(RGPU_CHUNK_VALUE_MAX))) ||
	    (!r->enc && rgpu_chunk_enc_new(&r->enc))) {
		drain_fail(d, "out of memory for the copy-out");
		return;
	}
	uint8_t *val = r->val;
	struct rgpu_chunk_enc *enc = r->enc;
	while (!atomic_load(&d->failed) && (i = atomic_fetch_add(&d->next, 1)) < d->nitems) {
		const struct item *it = &d->items[i];
		const uint8_t *src = it->host;
		size_t vlen;
		if (!src && !it->zero && !r->pinned &&
		    (w->drv.cuStreamCreateWithPriority(&r->s, CU_STREAM_NON_BLOCKING, 0) !=
			 CUDA_SUCCESS ||
		     w->drv.cuMemHostAlloc(&r->pinned, BATCH_CHUNKS * CH, 0) != CUDA_SUCCESS)) {
			r->pinned = NULL;
			drain_fail(d, "out of memory for the copy-out");
			break;
		}
		void *pinned = r->pinned;
		CUstream s = r->s;
		if (it->zero) {
			/* an all-zero chunk's value is its header: no bytes to read */
			rgpu_chunk_zero_value(CH, val, &vlen);
		} else if (!src) {
			CUresult cr = w->drv.cuMemcpyDtoHAsync(pinned, it->src, (uint64_t)it->n * CH, s);
			if (cr == CUDA_SUCCESS)
				cr = w->drv.cuStreamSynchronize(s);
			if (cr != CUDA_SUCCESS) {
				char why[160];
				snprintf(why, sizeof(why), "copying device memory out: %s",
					 srv_cu_name(&w->drv, cr));
				drain_fail(d, why);
				break;
			}
			src = pinned;
		}
		if (d->send) {
			for (uint32_t c = 0; c < it->n; c++) {
				int ret = d->send(d->send_arg, it->index + c,
						  it->zero ? NULL : src + (uint64_t)c * CH, CH,
						  it->exact);
				if (ret) {
					char why[160];
					snprintf(why, sizeof(why), "sending device memory: %s",
						 rgpu_strerror(ret));
					drain_fail(d, why);
					return;
				}
			}
			atomic_fetch_add(&d->bytes, (uint64_t)it->n * CH);
			continue;
		}
		for (uint32_t c = 0; c < it->n && !it->zero; c++) {
			uint64_t clen = it->host ? it->len : CH;
			int ret = rgpu_chunk_encode(enc, src + (uint64_t)c * CH, clen, val, &vlen);
			if (!ret)
				ret = rgpu_ckpt_put(d->tk->ck,
						    d->hashes + (it->index + c) * RGPU_HASH_LEN, val,
						    vlen);
			if (ret) {
				drain_store_fail(d, ret);
				break;
			}
			atomic_fetch_add(&d->bytes, clen);
		}
		if (it->zero) {
			int ret = rgpu_ckpt_put(d->tk->ck, d->hashes + it->index * RGPU_HASH_LEN, val,
						vlen);
			if (ret) {
				drain_store_fail(d, ret);
				break;
			}
			atomic_fetch_add(&d->bytes, CH);
		}
	}
}

void srv_ckpt_release(struct srv_worker *w)
{
	struct srv_ckpt_cache *cc = w->ckpt_cache;

	if (!cc)
		return;
	w->drv.cuCtxSetCurrent(w->base_ctx);
	for (size_t i = 0; i < 32; i++) {
		struct drain_res *r = &cc->res[i];
		if (r->pinned)
			w->drv.cuMemFreeHost(r->pinned);
		if (r->s)
			w->drv.cuStreamDestroy(r->s);
		rgpu_chunk_enc_free(r->enc);
		free(r->val);
		memset(r, 0, sizeof(*r));
	}
}

/* What the operator hears while the chunks drain */
struct drain_tick {
	struct drain *d;
	const char *phase;
	uint64_t total;
};

static void drain_tick(void *p)
{
	struct drain_tick *t = p;
	if (t->d->tk->progress)
		rgpu_admin_progress(t->d->tk->progress, t->phase, atomic_load(&t->d->bytes),
				    t->total, "bytes");
}

/* Run the items on the pool; this thread reports progress (phase, of total bytes). */
static int drain_items(struct drain *d, const char *phase, uint64_t total)
{
	struct drain_tick t = {d, phase, total};

	if (!d->nitems)
		return 0;
	rgpu_parallel_watch(rgpu_parallel_width(), drain_thread, d, drain_tick, &t,
			    PROGRESS_MS);
	return atomic_load(&d->failed) ? RGPU_EIO : 0;
}

/* A module image's bytes from the module cache, and its chunk hashes (cached per job). */
static int kept_fd(struct srv_worker *w)
{
	const char *dir = w->cfg ? w->cfg->state_dir : NULL;
	int fd = dir ? open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;

	if (fd < 0)
		fd = memfd_create("rgpu-images", MFD_CLOEXEC);
	if (fd < 0)
		pr_warn("no file to keep the job's module images in (%s): its checkpoints take "
			"them from the module cache, which may have evicted them",
			strerror(errno));
	return fd;
}

void srv_ckpt_keep_image(struct srv_worker *w, const uint8_t hash[RGPU_HASH_LEN],
			 const void *data, size_t len)
{
	struct srv_kept_images *k = w->kept_images;
	struct kept_image *v;
	size_t done = 0;

	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k)
			return;
		pthread_mutex_init(&k->lock, NULL);
		k->fd = kept_fd(w);
		w->kept_images = k;
	}
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < k->n; i++)
		if (!memcmp(k->v[i].hash, hash, RGPU_HASH_LEN))
			goto out;
	if (k->fd < 0)
		goto out;
	if (k->n == k->cap) {
		v = realloc(k->v, (k->cap ? 2 * k->cap : 16) * sizeof(*v));
		if (!v)
			goto out;
		k->v = v;
		k->cap = k->cap ? 2 * k->cap : 16;
	}
	while (done < len) {
		ssize_t n = pwrite(k->fd, (const uint8_t *)data + done, len - done,
				   (off_t)(k->end + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pr_warn("cannot keep a module image of %zu bytes for the job's checkpoints "
				"(%s): they take images from the module cache from now on",
				len, n < 0 ? strerror(errno) : "short write");
			close(k->fd);
			k->fd = -1;
			goto out;
		}
		done += (size_t)n;
	}
	memcpy(k->v[k->n].hash, hash, RGPU_HASH_LEN);
	k->v[k->n].off = k->end;
	k->v[k->n].len = len;
	k->n++;
	k->end += len;
out:
	pthread_mutex_unlock(&k->lock);
}

/* The kept bytes of an image (malloc'd), or RGPU_ENOTFOUND */
static int kept_image(struct srv_worker *w, const uint8_t *hash, void **data, size_t *len)
{
	struct srv_kept_images *k = w->kept_images;
	int ret = RGPU_ENOTFOUND;

	if (!k)
		return ret;
	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; k->fd >= 0 && i < k->n; i++) {
		uint8_t *p;
		size_t done = 0;
		if (memcmp(k->v[i].hash, hash, RGPU_HASH_LEN))
			continue;
		p = malloc(k->v[i].len ? k->v[i].len : 1);
		if (!p) {
			ret = RGPU_ENOMEM;
			break;
		}
		while (done < k->v[i].len) {
			ssize_t n = pread(k->fd, p + done, k->v[i].len - done,
					  (off_t)(k->v[i].off + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		if (done == k->v[i].len) {
			*data = p;
			*len = done;
			ret = 0;
		} else {
			free(p);
			ret = RGPU_EIO;
		}
		break;
	}
	pthread_mutex_unlock(&k->lock);
	return ret;
}

static int image_blob(struct take *tk, struct hblob *b)
{
	struct srv_worker *w = tk->w;
	struct srv_ckpt_cache *cc = w->ckpt_cache;
	void *data = NULL;
	size_t len = 0;
	char hex[2 * RGPU_HASH_LEN + 1];
	int ret = kept_image(w, b->hash, &data, &len);

	if (ret == RGPU_ENOMEM)
		return fail(tk, RGPU_ENOMEM, "out of memory");
	if (ret)
		ret = w->modcache ? srv_modcache_get(w->modcache, w->tenant, b->hash, &data, &len)
				  : RGPU_ENOTFOUND;
	if (ret || len != b->size) {
		free(data);
		return fail(tk, RGPU_ENOTFOUND,
			    "module image %s... (%llu bytes) was not kept by the job, and is no "
			    "longer in this server's module cache",
			    rgpu_hex(b->hash, 6, hex), (unsigned long long)b->size);
	}
	b->data = data;
	for (size_t i = 0; i < cc->n; i++)
		if (!memcmp(cc->v[i].hash, b->hash, RGPU_HASH_LEN) && cc->v[i].size == b->size) {
			b->chunks = cc->v[i].chunks;
			b->cached = 1;
			return 0;
		}
	return 0;
}

static int blob_hashes(struct take *tk, struct hblob *b)
{
	struct srv_ckpt_cache *cc = tk->w->ckpt_cache;
	uint64_t n = rgpu_ckpt_nchunks(b->size);

	if (b->chunks)
		return 0;
	b->chunks = malloc(n ? n * RGPU_HASH_LEN : 1);
	if (!b->chunks)
		return fail(tk, RGPU_ENOMEM, "out of memory");
	for (uint64_t i = 0; i < n; i++)
		rgpu_chunk_hash(b->data + i * CH, MIN(CH, b->size - i * CH),
				b->chunks + i * RGPU_HASH_LEN);
	if (b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE) {
		/* images never change: their hashes serve every later checkpoint of the job */
		struct img_hashes *v = cc->n == cc->cap
					       ? realloc(cc->v, (cc->cap = cc->cap ? 2 * cc->cap : 8) *
								    sizeof(*v))
					       : cc->v;
		if (v) {
			cc->v = v;
			memcpy(v[cc->n].hash, b->hash, RGPU_HASH_LEN);
			v[cc->n].size = b->size;
			v[cc->n].chunks = b->chunks;
			cc->n++;
			b->cached = 1;
		}
	}
	return 0;
}

static void take_free(struct take *tk)
{
	for (size_t i = 0; i < tk->nhb; i++) {
		free(tk->hb[i].data);
		if (!tk->hb[i].cached)
			free(tk->hb[i].chunks);
	}
	free(tk->hb);
	free(tk->dev);
	free(tk->dhash);
	free(tk->dirty);
	free(tk->zero);
	free(tk->events);
}

static void release_job(struct take *tk)
{
	if (tk->released)
		return;
	tk->t_release = rgpu_now_ns();
	tk->released = 1;
	srv_hold_release(tk->w);
}

/* Build the metadata (blobs in list order: device memory, then the host-side parts). */
static int pack_meta(struct take *tk, uint8_t **out, size_t *len, uint64_t nchunks,
		     uint64_t new_chunks, uint64_t new_bytes, uint64_t stored)
{
	struct srv_worker *w = tk->w;
	Rgpu__CkptMeta m = RGPU__CKPT_META__INIT;
	Rgpu__CkptBlob *blobs = calloc(tk->ndev + tk->nhb + 1, sizeof(*blobs));
	Rgpu__CkptBlob **bp = calloc(tk->ndev + tk->nhb + 1, sizeof(*bp));
	uint32_t cc[16];
	char *names[16];
	char names_buf[16][256];
	char host[256] = "";
	uint64_t first = 0, dfirst = 0;
	size_t nb = 0;

	if (!blobs || !bp) {
		free(blobs);
		free(bp);
		return RGPU_ENOMEM;
	}
	for (size_t i = 0; i < tk->ndev; i++, nb++) {
		rgpu__ckpt_blob__init(&blobs[nb]);
		blobs[nb].kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE;
		blobs[nb].id = tk->dev[i].id;
		blobs[nb].addr = tk->dev[i].addr;
		blobs[nb].size = tk->dev[i].size;
		blobs[nb].device = tk->dev[i].device;
		blobs[nb].count = tk->dev[i].size / CH;
		blobs[nb].first = tk->dx ? dfirst : first;
		*(tk->dx ? &dfirst : &first) += blobs[nb].count;
		bp[nb] = &blobs[nb];
	}
	for (size_t i = 0; i < tk->nhb; i++, nb++) {
		const struct hblob *b = &tk->hb[i];
		rgpu__ckpt_blob__init(&blobs[nb]);
		blobs[nb].kind = (Rgpu__CkptBlobKind)b->kind;
		blobs[nb].id = b->id;
		blobs[nb].addr = b->addr;
		blobs[nb].size = b->size;
		blobs[nb].first = first;
		blobs[nb].count = rgpu_ckpt_nchunks(b->size);
		if (b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE) {
			blobs[nb].hash.data = (uint8_t *)b->hash;
			blobs[nb].hash.len = RGPU_HASH_LEN;
		}
		first += blobs[nb].count;
		bp[nb] = &blobs[nb];
	}
	gethostname(host, sizeof(host) - 1);
	for (int d = 0; d < w->ndev && d < 16; d++) {
		int maj = 0, min = 0;
		w->drv.cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					    w->dev[d]);
		w->drv.cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					    w->dev[d]);
		cc[d] = (uint32_t)(maj * 10 + min);
		names_buf[d][0] = '\0';
		w->drv.cuDeviceGetName(names_buf[d], sizeof(names_buf[d]), w->dev[d]);
		names[d] = names_buf[d];
	}
	m.format = RGPU_CKPT_FORMAT;
	m.job_id.data = w->job_id;
	m.job_id.len = SRV_JOB_ID_LEN;
	m.session = w->session;
	m.tenant = w->tenant;
	m.client_host = w->client_host;
	m.client_pid = w->client_pid;
	m.client_program = w->client_program;
	m.label = w->label;
	m.created_unix_ms = rgpu_wall_ms();
	m.server_host = host;
	m.executed = tk->executed;
	m.received = tk->received;
	m.sent = tk->sent;
	m.client_caps = tk->client_caps;
	m.token.data = tk->token;
	m.token.len = sizeof(tk->token);
	m.async_error = tk->async_err;
	m.window_base = w->cfg->window_base;
	m.window_size = w->cfg->window_size;
	/* the job's own GPUs, in the client's order from device_base: what a restore needs */
	m.n_device_cc = m.n_device_name = (size_t)MIN(w->ndev, 16);
	m.device_base = (uint32_t)w->dev_base;
	m.device_cc = cc;
	m.device_name = names;
	m.n_blobs = nb;
	m.blobs = bp;
	m.pause_ns = (tk->released ? tk->t_release : rgpu_now_ns()) - tk->t_park;
	m.duration_ns = rgpu_now_ns() - tk->t_req;
	m.snapshot = tk->snapshot;
	m.device_bytes = tk->device_bytes;
	m.array_bytes = tk->array_bytes;
	m.new_chunks = new_chunks;
	m.new_bytes = new_bytes;
	m.stored_bytes = stored;
	m.records = tk->records;
	m.n_recorded_events = tk->nevents;
	m.recorded_events = tk->events;
	if (tk->dx) {
		m.live_round = 1;
		m.device_hashes.data = tk->dhash;
		m.device_hashes.len = tk->ndchunks * RGPU_HASH_LEN;
	}
	(void)nchunks;
	*len = rgpu__ckpt_meta__get_packed_size(&m);
	*out = malloc(*len ? *len : 1);
	if (*out)
		rgpu__ckpt_meta__pack(&m, *out);
	free(blobs);
	free(bp);
	return *out ? 0 : RGPU_ENOMEM;
}

static int cache_init(struct srv_worker *w)
{
	uint8_t *zero;

	if (w->ckpt_cache)
		return 0;
	w->ckpt_cache = calloc(1, sizeof(*w->ckpt_cache));
	zero = calloc(1, CH);
	if (!w->ckpt_cache || !zero) {
		free(zero);
		return RGPU_ENOMEM;
	}
	rgpu_chunk_hash(zero, CH, w->ckpt_cache->zero);
	free(zero);
	return 0;
}

int srv_store_open(const struct srv_config *cfg, struct rgpu_store **out, char *why,
		   size_t whylen)
{
	char dir[4200];
	int ret;

	if (!cfg->state_dir) {
		snprintf(why, whylen, "this server keeps no checkpoints: it was started without "
				      "rgpud --data DIR");
		return RGPU_EUNSUPPORTED;
	}
	/* the data directory itself may not exist yet: nothing was cached here so far */
	if (mkdir(cfg->state_dir, 0750) && errno != EEXIST) {
		snprintf(why, whylen, "cannot create the data directory %s: %s", cfg->state_dir,
			 strerror(errno));
		return RGPU_ESYS;
	}
	snprintf(dir, sizeof(dir), "%s/store", cfg->state_dir);
	ret = rgpu_store_open(dir, out);
	if (ret)
		snprintf(why, whylen, "the store %s cannot be opened: %s", dir,
			 rgpu_strerror(ret));
	return ret;
}

int srv_worker_store(struct srv_worker *w, char *why, size_t whylen)
{
	int ret = 0;

	pthread_mutex_lock(&w->store_lock);
	if (!w->store)
		ret = srv_store_open(w->cfg, &w->store, why, whylen);
	pthread_mutex_unlock(&w->store_lock);
	return ret;
}

void srv_worker_modcache(struct srv_worker *w, const char *without)
{
	char why[600];
	int ret;

	if (w->modcache || !w->cfg->state_dir || !w->cfg->module_cache_bytes)
		return;
	if ((ret = srv_worker_store(w, why, sizeof(why))))
		pr_warn("module cache unavailable: %s; %s", why, without);
	else if ((ret = srv_modcache_open(w->store, w->cfg->module_cache_bytes, &w->modcache)))
		pr_warn("module cache unavailable: %s; %s", rgpu_strerror(ret), without);
}

int srv_ckpt_take(struct srv_worker *w, struct rgpu_store *store, int keep_held,
		  struct rgpu_conn *progress, struct srv_ckpt_result *res,
		  struct srv_ckpt_direct *dx, char *why, size_t whylen)
{
	struct take tk = {.w = w, .keep_held = keep_held, .progress = progress, .dx = dx};
	struct drain d = {.tk = &tk};
	uint8_t *all = NULL, *missing = NULL, *meta = NULL;
	size_t nall = 0, nmissing = 0, mlen = 0, ndev_items = 0;
	uint64_t dev_total = 0, host_total = 0, added = 0, added_bytes = 0, stored = 0;
	int ret, work_ret = 0;

	tk.t_req = rgpu_now_ns();
	memset(res, 0, sizeof(*res));
	pthread_mutex_init(&d.lock, NULL);
	if (cache_init(w)) {
		snprintf(why, whylen, "out of memory");
		return RGPU_ENOMEM;
	}
	/* what the barrier uses, made before it: the store's lock against gc, the kernels */
	w->drv.cuCtxSetCurrent(w->base_ctx);
	CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
	w->drv.cuThreadExchangeStreamCaptureMode(&relaxed);
	ret = rgpu_ckpt_begin(store, &tk.ck);
	if (ret) {
		snprintf(why, whylen, "the checkpoint store cannot be written: %s",
			 rgpu_strerror(ret));
		return ret;
	}
	if (dx)
		rgpu_ckpt_transient(tk.ck);
	if (srv_gpuhash_open(&w->drv, &tk.gh))
		tk.gh = NULL; /* said once at warn; the CPU hashes */
	if (w->drv.cuStreamCreateWithPriority(&tk.stream, CU_STREAM_NON_BLOCKING, 0) !=
	    CUDA_SUCCESS) {
		snprintf(why, whylen, "the server's driver cannot make a stream");
		ret = RGPU_ECUDA;
		goto out;
	}
	if (progress)
		rgpu_admin_progress(progress, "barrier", 0, 0, "");
	ret = srv_hold(w, at_barrier, &tk, w->cfg->barrier_timeout_s * 1000, &work_ret);
	if (ret == RGPU_ETIMEDOUT) {
		snprintf(why, whylen,
			 "the job did not reach a barrier within %d s: it is inside a call that "
			 "takes longer (a synchronisation waiting for a long kernel?); try again "
			 "(rgpud --barrier-timeout)",
			 w->cfg->barrier_timeout_s);
		goto out;
	}
	if (ret) {
		snprintf(why, whylen, "the job ended during the checkpoint");
		goto out;
	}
	if (work_ret != SRV_HOLD_KEEP)
		tk.released = 1; /* the executor went on by itself */
	if (tk.err) {
		ret = tk.err;
		snprintf(why, whylen, "%s", tk.why);
		goto out;
	}
	/* the device chunks the store lacks, from the snapshot or (held) the job itself */
	d.items = calloc(tk.ndchunks + tk.nhb + 1, sizeof(*d.items));
	if (!d.items) {
		ret = RGPU_ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	d.hashes = tk.dhash;
	uint64_t soff = 0;
	if (dx && !(dx->addr = calloc(tk.ndchunks + 1, sizeof(*dx->addr)),
		    dx->src = calloc(tk.ndchunks + 1, sizeof(*dx->src)))) {
		ret = RGPU_ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (size_t i = 0, r = 0, off = 0; dx && i < tk.ndchunks; i++, off += CH) {
		while (off >= tk.dev[r].size) {
			r++;
			off = 0;
		}
		dx->addr[i] = tk.dev[r].addr + off;
	}
	for (size_t i = 0; i < tk.ndchunks; i++) {
		if (!bit(tk.dirty, i))
			continue;
		if (dx) {
			/* sent later, once the target said what it wants (a zero chunk as such) */
			if (!bit(tk.zero, i)) {
				dx->src[i] = tk.snapshot ? tk.snap + soff : 0;
				soff += CH;
			}
			continue;
		}
		dev_total += CH;
		if (bit(tk.zero, i)) {
			d.items[d.nitems++] = (struct item){.index = i, .n = 1, .zero = 1};
			continue;
		}
		add_device_item(&d, i, tk.snapshot ? tk.snap + soff : chunk_addr(&tk, i), 0);
		soff += CH;
	}
	ndev_items = d.nitems;
	uint64_t t_drain0 = rgpu_now_ns(), t_copied;
	ret = drain_items(&d, "copy", dev_total);
	t_copied = rgpu_now_ns();
	/* the job's own bytes are out: a job held for them runs on (a migration's stays) */
	if (!keep_held)
		release_job(&tk);
	if (ret) {
		snprintf(why, whylen, "%s", d.why);
		goto out;
	}
	/* the host-side parts: module images from the cache, then every blob's chunk hashes */
	for (size_t i = 0; i < tk.nhb && !ret; i++)
		if (tk.hb[i].kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE)
			ret = image_blob(&tk, &tk.hb[i]);
	for (size_t i = 0; i < tk.nhb && !ret; i++)
		ret = blob_hashes(&tk, &tk.hb[i]);
	if (ret) {
		snprintf(why, whylen, "%s", tk.why);
		goto out;
	}
	/* a live round's list is the host-side parts' alone */
	size_t ndlist = dx ? 0 : tk.ndchunks;
	nall = ndlist;
	for (size_t i = 0; i < tk.nhb; i++)
		nall += rgpu_ckpt_nchunks(tk.hb[i].size);
	all = malloc(nall ? nall * RGPU_HASH_LEN : 1);
	missing = calloc(1, nall / 8 + 1);
	if (!all || !missing) {
		ret = RGPU_ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	memcpy(all, tk.dhash, ndlist * RGPU_HASH_LEN);
	size_t k = ndlist;
	for (size_t i = 0; i < tk.nhb; i++) {
		uint64_t n = rgpu_ckpt_nchunks(tk.hb[i].size);
		memcpy(all + k * RGPU_HASH_LEN, tk.hb[i].chunks, n * RGPU_HASH_LEN);
		k += n;
	}
	/* the whole list now: what is still missing is host-side (the device part is written) */
	ret = rgpu_ckpt_set_list(tk.ck, all, nall);
	if (!ret)
		ret = rgpu_ckpt_missing(tk.ck, missing, &nmissing);
	if (ret) {
		snprintf(why, whylen, "the checkpoint store cannot be read: %s", rgpu_strerror(ret));
		goto out;
	}
	/*
	 * The host-side chunks go through the same items as the device ones: one each, as many as
	 * the list has beyond the device part (a module image or a CUDA array may take more chunks
	 * than the job has device chunks).
	 */
	if (nall - ndlist > tk.ndchunks + tk.nhb) {
		struct item *more = realloc(d.items, (nall - ndlist + 1) * sizeof(*d.items));
		if (!more) {
			ret = RGPU_ENOMEM;
			snprintf(why, whylen, "out of memory");
			goto out;
		}
		d.items = more;
	}
	d.nitems = 0;
	atomic_store(&d.next, 0);
	atomic_store(&d.bytes, 0);
	d.hashes = all;
	k = ndlist;
	for (size_t i = 0; i < tk.nhb; i++) {
		uint64_t n = rgpu_ckpt_nchunks(tk.hb[i].size);
		for (uint64_t c = 0; c < n; c++)
			if (bit(missing, k + c)) {
				uint64_t clen = MIN(CH, tk.hb[i].size - c * CH);
				d.items[d.nitems++] = (struct item){.index = k + c, .n = 1,
								    .host = tk.hb[i].data + c * CH,
								    .len = clen};
				host_total += clen;
			}
		k += n;
	}
	ret = drain_items(&d, "store", host_total);
	if (ret) {
		snprintf(why, whylen, "%s", d.why);
		goto out;
	}
	rgpu_ckpt_added(tk.ck, &added, &added_bytes, &stored);
	if (tk.snap && !dx) {
		w->drv.cuMemFree(tk.snap);
		tk.snap = 0;
	}
	ret = pack_meta(&tk, &meta, &mlen, nall, added, added_bytes, stored);
	if (ret) {
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	if (progress)
		rgpu_admin_progress(progress, "commit", 0, 0, "");
	if (rgpu_fault("ckpt_commit")) {
		ret = RGPU_EIO;
		snprintf(why, whylen, "fault site ckpt_commit");
		goto out;
	}
	uint64_t t_commit0 = rgpu_now_ns();
	ret = rgpu_ckpt_commit(tk.ck, meta, mlen, &res->id);
	tk.ck = NULL;
	if (ret) {
		if (ret == RGPU_ENOSPC)
			snprintf(why, whylen, "%s", STORE_FULL_WHY);
		else
			snprintf(why, whylen, "committing the checkpoint failed: %s",
				 rgpu_strerror(ret));
		goto out;
	}
	res->chunks = nall;
	res->new_chunks = added;
	res->new_bytes = added_bytes;
	res->stored_bytes = stored;
	res->device_bytes = tk.device_bytes;
	res->array_bytes = tk.array_bytes;
	res->records = tk.records;
	res->pause_ns = (tk.released ? tk.t_release : rgpu_now_ns()) - tk.t_park;
	uint64_t t_done = rgpu_now_ns();
	res->duration_ns = t_done - tk.t_req;
	res->snapshot = tk.snapshot;
	if (dx) {
		/* the send's: the hashes and the snapshot */
		dx->hash = tk.dhash;
		dx->n = tk.ndchunks;
		dx->snap = tk.snap;
		dx->held = keep_held;
		tk.dhash = NULL;
		tk.snap = 0;
	}
	pr_info("job %s: checkpoint %llu: %llu chunks (%llu new, %.1f MiB stored; %zu CUDA "
		"array(s), %.1f MiB), paused "
		"%.3f ms%s (to the barrier %.3f ms; sync %.3f, state %.3f, hash %.3f, look-up %.3f, "
		"snapshot %.3f; then copy %.3f, images and host parts %.3f, commit %.3f), %.3f s in "
		"all",
		w->job_hex, (unsigned long long)res->id, (unsigned long long)nall,
		(unsigned long long)added, (double)stored / 1048576.0, tk.narrays,
		(double)tk.array_bytes / 1048576.0, res->pause_ns / 1e6,
		tk.snapshot ? " (snapshot)" : "", (tk.t_park - tk.t_req) / 1e6,
		(tk.t_sync - tk.t_park) / 1e6, (tk.t_state - tk.t_sync) / 1e6,
		(tk.t_hash - tk.t_state) / 1e6, (tk.t_lookup - tk.t_hash) / 1e6,
		(tk.t_snap - tk.t_lookup) / 1e6, (t_copied - t_drain0) / 1e6,
		(t_commit0 - t_copied) / 1e6, (t_done - t_commit0) / 1e6, res->duration_ns / 1e9);
	(void)ndev_items;
out:
	/* a failure never leaves the job held, nor a migration's hold without a checkpoint */
	if (ret || !keep_held)
		release_job(&tk);
	if (tk.ck)
		rgpu_ckpt_abort(tk.ck);
	if (ret && dx)
		srv_ckpt_direct_free(w, dx);
	if (tk.snap)
		w->drv.cuMemFree(tk.snap);
	if (tk.stream)
		w->drv.cuStreamDestroy(tk.stream);
	if (tk.gh)
		srv_gpuhash_close(&w->drv, tk.gh);
	free(d.items);
	free(all);
	free(missing);
	free(meta);
	pthread_mutex_destroy(&d.lock);
	take_free(&tk);
	if (ret)
		pr_warn("job %s: checkpoint failed: %s", w->job_hex, why);
	return ret;
}

int srv_ckpt_direct_send(struct srv_worker *w, const struct srv_ckpt_direct *dx,
			 const uint8_t *want, srv_direct_send_fn send, void *arg,
			 struct rgpu_conn *progress, uint64_t *bytes, char *why, size_t whylen)
{
	struct take tk = {.w = w, .progress = progress};
	struct drain d = {.tk = &tk, .send = send, .send_arg = arg};
	uint64_t total = 0;
	int ret;

	*bytes = 0;
	if (cache_init(w)) {
		snprintf(why, whylen, "out of memory");
		return RGPU_ENOMEM;
	}
	d.items = calloc(dx->n + 1, sizeof(*d.items));
	if (!d.items) {
		snprintf(why, whylen, "out of memory");
		return RGPU_ENOMEM;
	}
	pthread_mutex_init(&d.lock, NULL);
	for (size_t i = 0; i < dx->n; i++) {
		if (!bit(want, i))
			continue;
		total += CH;
		if (!memcmp(dx->hash + i * RGPU_HASH_LEN, w->ckpt_cache->zero, RGPU_HASH_LEN)) {
			/* zeros on the target are the cut's bytes, whatever the job wrote since */
			d.items[d.nitems++] = (struct item){.index = i, .n = 1, .zero = 1, .exact = 1};
			continue;
		}
		add_device_item(&d, i, dx->src[i] ? dx->src[i] : dx->addr[i],
				dx->held || dx->src[i]);
	}
	ret = drain_items(&d, "send", total);
	*bytes = atomic_load(&d.bytes);
	if (ret)
		snprintf(why, whylen, "%s", d.why);
	free(d.items);
	pthread_mutex_destroy(&d.lock);
	return ret;
}

void srv_ckpt_direct_free(struct srv_worker *w, struct srv_ckpt_direct *dx)
{
	if (dx->snap)
		w->drv.cuMemFree(dx->snap);
	free(dx->hash);
	free(dx->addr);
	free(dx->src);
	dx->snap = 0;
	dx->hash = NULL;
	dx->addr = dx->src = NULL;
	dx->n = 0;
}
