/*
 * Restoring a job (design.md §7, §8; docs/architecture.md, "Checkpoints"): a new worker process
 * takes a checkpoint pushed to this server (migrate/push.c) into its store and, if asked,
 * rebuilds the job: its state log replayed (replay.c) with the module images from the
 * checkpoint, every window mapping at its address filled from the store and hashed again on
 * the GPU against the manifest, module globals, CUDA arrays (ckpt_array.c) and the host area
 * written back, the link's counters and unacknowledged frames installed. The job then waits,
 * like one whose link broke, for its client to resume it here with its token (the source
 * redirected it).
 *
 * Nothing is trusted: the metadata was checked by rgpu_ckpt_meta_decode(), every chunk is
 * checked before its bytes reach the device (present, a sane header; then its hash, on the GPU
 * after the fill), and any failure ends this process before it ever serves the job: no job half
 * restored runs. The reply to PUSH_DONE says what happened.
 */
#define LOG_PREFIX "restore: "
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "checkpoint.pb-c.h"
#include "gpuhash.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/adminclient.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/image.h"
#include "rgpu/log.h"
#include "rgpu/pbdecode.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

#define CH RGPU_CHUNK_MAX

struct restore {
	struct srv_worker *w;
	struct rgpu_store *store;
	Rgpu__CkptMeta *m;
	uint8_t *hashes;
	size_t n;
	uint64_t id;
	char why[400];
	uint64_t t0, t_setup, t_replay, t_fill, t_verify; /* where a restore's time went */
	/* a staged job (live migration): the device chunks' hashes as written, in device order */
	uint8_t *dev_have;
	size_t ndev_have;
	uint64_t changed; /* device chunks the last fill wrote */
	/* a live round's chunks on their way from the socket to the GPU (made at the first) */
	void *ring[8];
	CUevent ring_ev[8];
	CUstream ring_s;
	CUdeviceptr gather; /* GATHER chunks: scattered written chunks copied together to hash */
	uint64_t t_round; /* when the last round's checkpoint was stored */
};

static struct restore *the_restore; /* the image lookup's (one restore per process) */

/*
 * The target's beat to the pusher, for the whole restore (one per process): every
 * RGPU_PUSH_HEARTBEAT_MS a progress report of the step it is in (beat_say), so that no long
 * step (the driver's start, a replay compiling PTX, the fill, the hash check, CUDA arrays) is
 * taken for a stall by the source, which gives up on a target silent for its --frame-timeout.
 * Off (beat_off) while this thread talks on the connection itself: a reply, a live round's
 * chunks, the next round's checkpoint (whose receiver beats on its own). The tick sends under
 * the lock, so once beat_off returns no report is on its way.
 */
static struct {
	pthread_mutex_t lock;
	struct rgpu_conn *c;
	struct rgpu_ticker *t;
	int on;
	const char *phase, *unit;
	uint64_t done, total;
} beat = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void beat_tick(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&beat.lock);
	if (beat.on)
		rgpu_admin_progress(beat.c, beat.phase, beat.done, beat.total, beat.unit);
	pthread_mutex_unlock(&beat.lock);
}

static void beat_say(const char *phase, uint64_t done, uint64_t total, const char *unit)
{
	pthread_mutex_lock(&beat.lock);
	beat.phase = phase;
	beat.done = done;
	beat.total = total;
	beat.unit = unit;
	beat.on = beat.c != NULL;
	pthread_mutex_unlock(&beat.lock);
}

static void beat_off(void)
{
	pthread_mutex_lock(&beat.lock);
	beat.on = 0;
	pthread_mutex_unlock(&beat.lock);
}

static void beat_start(struct rgpu_conn *c)
{
	beat.c = c;
	beat.t = rgpu_ticker_start(beat_tick, NULL, RGPU_PUSH_HEARTBEAT_MS);
}

static void beat_stop(void)
{
	beat_off();
	rgpu_ticker_stop(beat.t);
	beat.t = NULL;
	beat.c = NULL;
}
/* the request a done_seq answers: PUSH_DONE, or a live round's DEVICE_END */
static uint16_t done_type = RGPU_ADMIN_MSG_PUSH_DONE;

static int bit(const uint8_t *bm, size_t i)
{
	return bm[i / 8] >> (i % 8) & 1;
}

static int fail(struct restore *rs, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct restore *rs, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rs->why, sizeof(rs->why), fmt, ap);
	va_end(ap);
	return code;
}

/* A host-side blob's bytes, every chunk checked against its hash (malloc'd). */
static int read_blob(struct restore *rs, const Rgpu__CkptBlob *b, uint8_t **out)
{
	uint8_t *buf = malloc(b->size ? b->size : 1);
	char hex[13];

	if (!buf)
		return fail(rs, RGPU_ENOMEM, "out of memory for %llu bytes",
			    (unsigned long long)b->size);
	for (uint64_t i = 0; i < b->count; i++) {
		const uint8_t *h = rs->hashes + (b->first + i) * RGPU_HASH_LEN;
		size_t len = 0;
		int ret = rgpu_store_chunk_get(rs->store, h, buf + i * CH,
					       MIN((uint64_t)CH, b->size - i * CH), &len);
		if (ret || len != MIN((uint64_t)CH, b->size - i * CH)) {
			free(buf);
			return fail(rs, ret == RGPU_ENOMEM ? ret : RGPU_ECORRUPT,
				    "chunk %llu (%s...) %s",
				    (unsigned long long)(b->first + i), rgpu_hex(h, 6, hex),
				    ret == RGPU_ENOTFOUND ? "is not in the store"
				    : ret == RGPU_ECORRUPT ? "is damaged (said above)"
							    : "has the wrong length");
		}
	}
	*out = buf;
	return 0;
}

static const Rgpu__CkptBlob *find_blob(const Rgpu__CkptMeta *m, Rgpu__CkptBlobKind kind)
{
	for (size_t i = 0; i < m->n_blobs; i++)
		if (m->blobs[i]->kind == kind)
			return m->blobs[i];
	return NULL;
}

/* The replay's module loads: the image from the checkpoint, checked as a client's would be. */
static int image_lookup(struct srv_worker *w, const uint8_t hash[32], void **data, size_t *len)
{
	struct restore *rs = the_restore;
	uint8_t h[RGPU_HASH_LEN];

	(void)w;
	for (size_t i = 0; rs && i < rs->m->n_blobs; i++) {
		const Rgpu__CkptBlob *b = rs->m->blobs[i];
		uint8_t *buf;
		if (b->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE ||
		    memcmp(b->hash.data, hash, RGPU_HASH_LEN))
			continue;
		if (read_blob(rs, b, &buf))
			return RGPU_ECORRUPT;
		rgpu_sha256(buf, b->size, h);
		if (memcmp(h, hash, RGPU_HASH_LEN) || rgpu_image_check(buf, b->size)) {
			free(buf);
			return RGPU_ECORRUPT;
		}
		*data = buf;
		*len = b->size;
		return 0;
	}
	return RGPU_ENOTFOUND;
}

/* ---- device memory ------------------------------------------------------------------------- */

struct fill {
	struct restore *rs;
	const Rgpu__CkptBlob **dev;
	size_t ndev;
	size_t nchunks;
	atomic_size_t next;
	atomic_uint_fast64_t bytes;
	atomic_int failed;
	uint64_t total; /* bytes to fill, for the progress reports */
	char why[300];
	pthread_mutex_t lock;
};

static void fill_fail(struct fill *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fill_fail(struct fill *f, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&f->lock);
	if (!atomic_load(&f->failed)) {
		va_start(ap, fmt);
		vsnprintf(f->why, sizeof(f->why), fmt, ap);
		va_end(ap);
	}
	atomic_store(&f->failed, 1);
	pthread_mutex_unlock(&f->lock);
}

/* Device chunk k (over all device blobs, in order): its address and list index. */
static int dev_chunk(const struct fill *f, size_t k, uint64_t *addr, size_t *index)
{
	for (size_t b = 0; b < f->ndev; b++) {
		if (k < f->dev[b]->count) {
			*addr = f->dev[b]->addr + k * CH;
			*index = f->dev[b]->first + k;
			return 1;
		}
		k -= f->dev[b]->count;
	}
	return 0;
}

static void fill_thread(void *arg, unsigned tid)
{
	struct fill *f = arg;
	struct srv_worker *w = f->rs->w;
	struct rgpu_store_reader *r = NULL;
	void *pinned = NULL;
	CUstream s = NULL;
	size_t k;

	(void)tid;
	w->drv.cuCtxSetCurrent(w->base_ctx);
	if (rgpu_store_reader_begin(f->rs->store, &r) ||
	    w->drv.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS ||
	    w->drv.cuMemHostAlloc(&pinned, CH, 0) != CUDA_SUCCESS) {
		fill_fail(f, "out of memory for the fill");
		goto out;
	}
	while (!atomic_load(&f->failed) && (k = atomic_fetch_add(&f->next, 1)) < f->nchunks) {
		uint64_t addr = 0;
		size_t index = 0, len = 0, vlen;
		const void *val;
		const char *why = NULL;
		CUresult cr;
		char hex[13];

		dev_chunk(f, k, &addr, &index);
		const uint8_t *h = f->rs->hashes + index * RGPU_HASH_LEN;
		int ret = rgpu_store_reader_get(r, h, &val, &vlen);
		if (ret) {
			fill_fail(f, "chunk %zu (%s..., device memory at %#llx) %s", index,
				  rgpu_hex(h, 6, hex), (unsigned long long)addr,
				  ret == RGPU_ENOTFOUND ? "is not in the store" : "cannot be read");
			break;
		}
		if (rgpu_store_chunk_is_zero(val, vlen, &len)) {
			cr = len == CH ? w->drv.cuMemsetD8Async(addr, 0, CH, s)
				       : CUDA_ERROR_INVALID_VALUE;
		} else {
			ret = rgpu_store_chunk_decode(val, vlen, pinned, CH, &len, &why);
			if (ret || len != CH) {
				fill_fail(f, "chunk %zu (%s..., device memory at %#llx) is damaged: %s",
					  index, rgpu_hex(h, 6, hex), (unsigned long long)addr,
					  why ? why : "a length other than 2 MiB");
				break;
			}
			cr = w->drv.cuMemcpyHtoDAsync(addr, pinned, CH, s);
			if (cr == CUDA_SUCCESS) /* the buffer is reused for the next chunk */
				cr = w->drv.cuStreamSynchronize(s);
		}
		if (cr != CUDA_SUCCESS) {
			fill_fail(f, "writing device memory at %#llx: %s", (unsigned long long)addr,
				  srv_cu_name(&w->drv, cr));
			break;
		}
		atomic_fetch_add(&f->bytes, CH);
	}
	if (s)
		w->drv.cuStreamSynchronize(s);
out:
	if (pinned)
		w->drv.cuMemFreeHost(pinned);
	if (s)
		w->drv.cuStreamDestroy(s);
	rgpu_store_reader_end(r);
}

static void fill_tick(void *p)
{
	struct fill *f = p;
	beat_say("restore", atomic_load(&f->bytes), f->total, "bytes");
}

/* The chunk hashes of [addr, addr + size) on the GPU (by the CPU when the kernels are missing). */
static int hash_range(struct srv_worker *w, struct srv_gpuhash *gh, CUstream s, uint64_t addr,
		      uint64_t size, uint8_t *out)
{
	uint8_t *buf;
	CUresult cr;

	if (gh)
		return srv_gpuhash_run(&w->drv, gh, addr, size, CH, s, out);
	buf = malloc(CH);
	cr = buf ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (uint64_t off = 0; cr == CUDA_SUCCESS && off < size; off += CH) {
		cr = w->drv.cuMemcpyDtoHAsync(buf, addr + off, CH, s);
		if (cr == CUDA_SUCCESS)
			cr = w->drv.cuStreamSynchronize(s);
		if (cr == CUDA_SUCCESS)
			rgpu_chunk_hash(buf, CH, out + off / CH * RGPU_HASH_LEN);
	}
	free(buf);
	return cr == CUDA_SUCCESS ? 0 : RGPU_EIO;
}

/*
 * Every device chunk checked for presence and a sane header first (a truncated or missing
 * chunk stops the restore before any device memory is written), then written at its address,
 * then every mapping hashed on the GPU and compared with the manifest. (A live migration's
 * rounds bring their device memory on the connection instead: take_device.)
 */
static int fill_device(struct restore *rs)
{
	struct srv_worker *w = rs->w;
	struct fill f = {.rs = rs};
	struct rgpu_store_reader *r = NULL;
	struct srv_gpuhash *gh = NULL;
	CUstream s = NULL;
	uint8_t *got = NULL;
	uint64_t total = 0, hashed = 0;
	int ret = 0;

	if (rgpu_ckpt_is_live(rs->m))
		return fail(rs, RGPU_EUNSUPPORTED,
			    "checkpoint %llu is a live migration's round: its device memory is not "
			    "in the store",
			    (unsigned long long)rs->id);
	pthread_mutex_init(&f.lock, NULL);
	f.dev = calloc(rs->m->n_blobs + 1, sizeof(*f.dev));
	if (!f.dev)
		return fail(rs, RGPU_ENOMEM, "out of memory");
	for (size_t i = 0; i < rs->m->n_blobs; i++)
		if (rs->m->blobs[i]->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE) {
			const Rgpu__CkptBlob *b = rs->m->blobs[i];
			if (!srv_mapped(w, b->addr, b->size)) {
				ret = fail(rs, RGPU_ECORRUPT,
					   "device memory [%#llx, +%llu) is no mapping of the "
					   "rebuilt job",
					   (unsigned long long)b->addr, (unsigned long long)b->size);
				goto out;
			}
			f.dev[f.ndev++] = b;
			f.nchunks += b->count;
		}
	rs->changed = f.nchunks;
	total = (uint64_t)f.nchunks * CH;
	/* structure first: nothing is written while a chunk is missing or cut short */
	ret = rgpu_store_reader_begin(rs->store, &r);
	for (size_t t = 0; !ret && t < f.nchunks; t++) {
		uint64_t addr = 0;
		size_t index = 0, vlen, len;
		const void *val;
		const char *why;
		char hex[13];
		dev_chunk(&f, t, &addr, &index);
		const uint8_t *h = rs->hashes + index * RGPU_HASH_LEN;
		ret = rgpu_store_reader_get(r, h, &val, &vlen);
		if (ret)
			ret = fail(rs, RGPU_ECORRUPT, "chunk %zu (%s..., device memory at %#llx) %s", index,
				   rgpu_hex(h, 6, hex), (unsigned long long)addr,
				   ret == RGPU_ENOTFOUND ? "is not in the store" : "cannot be read");
		else if (rgpu_chunk_value_header(val, vlen, &len, &why) || len != CH)
			ret = fail(rs, RGPU_ECORRUPT,
				   "chunk %zu (%s..., device memory at %#llx) is damaged: %s", index,
				   rgpu_hex(h, 6, hex), (unsigned long long)addr,
				   why ? why : "a length other than 2 MiB");
	}
	rgpu_store_reader_end(r);
	if (ret)
		goto out;
	f.total = total;
	/* a job without device memory starts no threads (each would pin a buffer) */
	if (f.nchunks)
		rgpu_parallel_watch(MIN(rgpu_parallel_width(), (unsigned)MIN(f.nchunks, 32)),
				    fill_thread, &f, fill_tick, &f, 200);
	if (atomic_load(&f.failed)) {
		ret = fail(rs, RGPU_ECORRUPT, "%s", f.why);
		goto out;
	}
	if (rgpu_fault("restore_fill") && f.nchunks) {
		/* as if a chunk had reached the device damaged: the check below must find it */
		w->drv.cuMemsetD8Async(f.dev[0]->addr, 0x5a, 1, NULL);
		w->drv.cuCtxSynchronize();
	}
	rs->t_fill = rgpu_now_ns();
	/* every byte written hashes to its chunk's name: the GPU reads them back */
	beat_say("verify", 0, total, "bytes");
	if (rgpu_fault("verify_slow"))
		sleep(5); /* tests: a target long in its hash check, which says so */
	w->drv.cuCtxSetCurrent(w->base_ctx);
	if (w->drv.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
		ret = fail(rs, RGPU_ECUDA, "the driver cannot make a stream");
		goto out;
	}
	if (srv_gpuhash_open(&w->drv, &gh))
		gh = NULL;
	for (size_t b = 0; b < f.ndev && !ret; b++) {
		const Rgpu__CkptBlob *bl = f.dev[b];
		free(got);
		got = malloc(bl->count * RGPU_HASH_LEN);
		if (!got) {
			ret = fail(rs, RGPU_ENOMEM, "out of memory");
			break;
		}
		ret = hash_range(w, gh, s, bl->addr, bl->size, got);
		hashed += bl->size;
		beat_say("verify", hashed, total, "bytes");
		if (ret) {
			ret = fail(rs, ret, "hashing restored memory at %#llx failed",
				   (unsigned long long)bl->addr);
			break;
		}
		for (uint64_t c = 0; c < bl->count; c++)
			if (memcmp(got + c * RGPU_HASH_LEN,
				   rs->hashes + (bl->first + c) * RGPU_HASH_LEN, RGPU_HASH_LEN)) {
				char hex[13];
				ret = fail(rs, RGPU_ECORRUPT,
					   "chunk %llu (%s..., device memory at %#llx) does not hash "
					   "to its name once restored: the store holds damaged bytes",
					   (unsigned long long)(bl->first + c),
					   rgpu_hex(rs->hashes + (bl->first + c) * RGPU_HASH_LEN, 6, hex),
					   (unsigned long long)(bl->addr + c * CH));
				break;
			}
	}
	rs->t_verify = rgpu_now_ns();
out:
	if (gh)
		srv_gpuhash_close(&w->drv, gh);
	if (s)
		w->drv.cuStreamDestroy(s);
	free(got);
	free(f.dev);
	pthread_mutex_destroy(&f.lock);
	return ret;
}

/* ---- a live round's device memory, straight from the source's GPU -------------------------- */

#define RING 8 /* chunks between the socket and the GPU */
#define GATHER 128 /* scattered chunks hashed in one launch (256 MiB of device memory) */
#define RUN_IN_PLACE 16 /* a run of this many adjacent chunks is hashed where it is */

/* The answer to a live round's PUSH_DONE: the device chunks wanted, and their bitmap. */
static int send_want(struct rgpu_conn *c, uint64_t seq, uint64_t nwant, const uint8_t *want,
		     size_t bmlen)
{
	Rgpu__PushReply rep = RGPU__PUSH_REPLY__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_ADMIN_MSG_PUSH_DONE, .flags = RGPU_FRAME_REPLY,
				   .ref = seq, .payload_len = bmlen};

	rep.error = "";
	rep.client_address = "";
	rep.want = nwant;
	return rgpu_frame_send_hdr(c, &h, &rep.base, want);
}

static int ring_open(struct restore *rs)
{
	struct srv_worker *w = rs->w;

	if (rs->ring_s)
		return 0;
	w->drv.cuCtxSetCurrent(w->base_ctx);
	if (w->drv.cuStreamCreateWithPriority(&rs->ring_s, CU_STREAM_NON_BLOCKING, 0) !=
	    CUDA_SUCCESS) {
		rs->ring_s = NULL;
		return RGPU_ECUDA;
	}
	for (int i = 0; i < RING; i++)
		if (w->drv.cuMemHostAlloc(&rs->ring[i], CH, 0) != CUDA_SUCCESS ||
		    w->drv.cuEventCreate(&rs->ring_ev[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
			return RGPU_ENOMEM;
	return 0;
}

static void ring_close(struct restore *rs)
{
	struct srv_worker *w = rs->w;

	for (int i = 0; i < RING; i++) {
		if (rs->ring[i])
			w->drv.cuMemFreeHost(rs->ring[i]);
		if (rs->ring_ev[i])
			w->drv.cuEventDestroy(rs->ring_ev[i]);
		rs->ring[i] = NULL;
		rs->ring_ev[i] = NULL;
	}
	if (rs->ring_s)
		w->drv.cuStreamDestroy(rs->ring_s);
	rs->ring_s = NULL;
	if (rs->gather)
		w->drv.cuMemFree(rs->gather);
	rs->gather = 0;
}

/*
 * The hashes of the chunks a round wrote (bit k of wrote, at addr[k]) into now, on the GPU:
 * runs of RUN_IN_PLACE adjacent chunks or more where they are, the others copied together
 * into a gather buffer first, GATHER at a time. A hot set scattered over the job (every tenth
 * chunk, say) then costs a few launches, not one launch and one wait per chunk.
 */
static int hash_written(struct restore *rs, struct srv_gpuhash *gh, size_t n,
			const uint64_t *addr, const uint8_t *wrote, uint8_t *now)
{
	struct srv_worker *w = rs->w;
	uint8_t tmp[GATHER * RGPU_HASH_LEN];
	size_t idx[GATHER], ng = 0;
	int ret = 0;

	if (gh && !rs->gather &&
	    w->drv.cuMemAlloc(&rs->gather, (size_t)GATHER * CH) != CUDA_SUCCESS)
		rs->gather = 0; /* then every run is hashed where it is */
	for (size_t k = 0; k < n && !ret;) {
		size_t e = k;
		if (!bit(wrote, k)) {
			k++;
			continue;
		}
		while (e + 1 < n && bit(wrote, e + 1) && addr[e + 1] == addr[e] + CH)
			e++;
		if (!gh || !rs->gather || e - k + 1 >= RUN_IN_PLACE) {
			ret = hash_range(w, gh, rs->ring_s, addr[k], (e - k + 1) * CH,
					 now + k * RGPU_HASH_LEN);
			k = e + 1;
			continue;
		}
		for (; k <= e && !ret; k++) {
			if (w->drv.cuMemcpyDtoDAsync(rs->gather + (CUdeviceptr)ng * CH, addr[k], CH,
						     rs->ring_s) != CUDA_SUCCESS) {
				ret = RGPU_EIO;
				break;
			}
			idx[ng++] = k;
			if (ng == GATHER) {
				/* the stream orders the copies before the hash */
				ret = hash_range(w, gh, rs->ring_s, rs->gather, ng * CH, tmp);
				for (size_t j = 0; !ret && j < ng; j++)
					memcpy(now + idx[j] * RGPU_HASH_LEN, tmp + j * RGPU_HASH_LEN,
					       RGPU_HASH_LEN);
				ng = 0;
			}
		}
	}
	if (!ret && ng) {
		ret = hash_range(w, gh, rs->ring_s, rs->gather, ng * CH, tmp);
		for (size_t j = 0; !ret && j < ng; j++)
			memcpy(now + idx[j] * RGPU_HASH_LEN, tmp + j * RGPU_HASH_LEN, RGPU_HASH_LEN);
	}
	return ret;
}

/* Where each device chunk goes: the device blobs, mapped in the rebuilt job, cover it once. */
static int chunk_addrs(struct restore *rs, size_t n, uint64_t *addr)
{
	const Rgpu__CkptMeta *m = rs->m;

	for (size_t i = 0; i < m->n_blobs; i++) {
		const Rgpu__CkptBlob *b = m->blobs[i];
		if (b->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE)
			continue;
		if (!srv_mapped(rs->w, b->addr, b->size))
			return fail(rs, RGPU_ECORRUPT,
				    "device memory [%#llx, +%llu) is no mapping of the rebuilt job",
				    (unsigned long long)b->addr, (unsigned long long)b->size);
		for (uint64_t c = 0; c < b->count; c++) {
			if (addr[b->first + c])
				return fail(rs, RGPU_ECORRUPT, "device chunk %llu is named twice",
					    (unsigned long long)(b->first + c));
			addr[b->first + c] = b->addr + c * CH;
		}
	}
	for (size_t k = 0; k < n; k++)
		if (!addr[k])
			return fail(rs, RGPU_ECORRUPT, "device chunk %zu belongs to no mapping", k);
	return 0;
}

/*
 * A live round's device memory (rgpu_ckpt_is_live(); its hashes in device_hashes, none for a
 * job that maps no device memory): answer the PUSH_DONE at *done_seq with the chunks that differ
 * from what this GPU holds, write each DEVICE_CHUNK at its address as it arrives, then hash
 * what was written on the GPU. A chunk sent exact (the cut's bytes) must hash to its name; one
 * read from the running job is kept as it hashes, and asked for again next round. At the
 * switchover (final) every chunk must then be the source's. On return *done_seq is DEVICE_END's,
 * whose reply is the caller's (0 when the source was told by an ERROR frame).
 */
static int take_device(struct restore *rs, struct rgpu_conn *c, uint64_t *done_seq, int final)
{
	struct srv_worker *w = rs->w;
	const uint8_t *dh = rs->m->device_hashes.data;
	size_t n = rs->m->device_hashes.len / RGPU_HASH_LEN, nwant = 0, got = 0, first = SIZE_MAX;
	uint64_t *addr = calloc(n + 1, sizeof(*addr));
	uint8_t *want = calloc(1, n / 8 + 1), *wrote = calloc(1, n / 8 + 1);
	uint8_t *exact = calloc(1, n / 8 + 1), *now = malloc(n * RGPU_HASH_LEN + 1), *have = NULL;
	struct srv_gpuhash *gh = NULL;
	int ret = 0, streaming = 0;

	beat_off(); /* the chunks and their answers are on c */
	if (!addr || !want || !wrote || !exact || !now) {
		ret = fail(rs, RGPU_ENOMEM, "out of memory");
		goto out;
	}
	if ((ret = chunk_addrs(rs, n, addr)))
		goto out;
	if ((ret = ring_open(rs))) {
		ret = fail(rs, ret, "no pinned memory or stream for the device chunks");
		goto out;
	}
	/* what this GPU holds, as hashed when written; a first round holds nothing yet */
	have = rs->ndev_have == n ? rs->dev_have : NULL;
	for (size_t k = 0; k < n; k++)
		if (!have || memcmp(have + k * RGPU_HASH_LEN, dh + k * RGPU_HASH_LEN, RGPU_HASH_LEN)) {
			want[k / 8] |= (uint8_t)(1u << (k % 8));
			nwant++;
		}
	if ((ret = send_want(c, *done_seq, nwant, want, (n + 7) / 8))) {
		ret = fail(rs, ret, "the source left: %s", rgpu_strerror(ret));
		goto out;
	}
	*done_seq = 0;
	streaming = 1;
	for (;;) {
		struct rgpu_frame_hdr fh;
		uint8_t *body = NULL;
		CUresult cr;
		ret = rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &fh, &body,
					     RGPU_ADMIN_LONG_TIMEOUT_MS);
		if (ret) {
			ret = fail(rs, ret, "the device memory broke off after %zu of %zu chunks: %s",
				   got, nwant, rgpu_strerror(ret));
			goto out;
		}
		if (fh.type == RGPU_ADMIN_MSG_DEVICE_END) {
			free(body);
			rgpu_conn_discard(c, fh.payload_len);
			*done_seq = fh.seq;
			done_type = RGPU_ADMIN_MSG_DEVICE_END;
			streaming = 0;
			break;
		}
		Rgpu__DeviceChunk *dc = fh.type == RGPU_ADMIN_MSG_DEVICE_CHUNK
						? RGPU_PB_UNPACK(rgpu__device_chunk, fh.body_len, body)
						: NULL;
		free(body);
		size_t k = dc ? (size_t)dc->index : n;
		int zero = dc && dc->zero;
		if (!dc || k >= n || !bit(want, k) || bit(wrote, k) ||
		    fh.payload_len != (zero ? 0 : CH)) {
			ret = fail(rs, RGPU_EPROTO, "%s after %zu of the %zu chunks asked for",
				   !dc ? "another message" : "a device chunk not asked for", got,
				   nwant);
			if (dc)
				rgpu__device_chunk__free_unpacked(dc, NULL);
			goto out;
		}
		if (dc->exact)
			exact[k / 8] |= (uint8_t)(1u << (k % 8));
		rgpu__device_chunk__free_unpacked(dc, NULL);
		if (zero) {
			cr = w->drv.cuMemsetD8Async(addr[k], 0, CH, rs->ring_s);
		} else {
			/* a buffer is reused once the GPU has read what it held */
			unsigned slot = got % RING;
			cr = w->drv.cuEventSynchronize(rs->ring_ev[slot]);
			if (cr == CUDA_SUCCESS && (ret = rgpu_conn_recv_payload(c, rs->ring[slot], CH))) {
				ret = fail(rs, ret, "device chunk %zu broke off: %s", k,
					   rgpu_strerror(ret));
				goto out;
			}
			if (cr == CUDA_SUCCESS)
				cr = w->drv.cuMemcpyHtoDAsync(addr[k], rs->ring[slot], CH, rs->ring_s);
			if (cr == CUDA_SUCCESS)
				cr = w->drv.cuEventRecord(rs->ring_ev[slot], rs->ring_s);
		}
		if (cr != CUDA_SUCCESS) {
			ret = fail(rs, RGPU_ECUDA, "writing device memory at %#llx: %s",
				   (unsigned long long)addr[k], srv_cu_name(&w->drv, cr));
			goto out;
		}
		wrote[k / 8] |= (uint8_t)(1u << (k % 8));
		first = MIN(first, k);
		got++;
	}
	if (got != nwant) {
		ret = fail(rs, RGPU_EPROTO, "the round ended after %zu of the %zu chunks asked for",
			   got, nwant);
		goto out;
	}
	if (w->drv.cuStreamSynchronize(rs->ring_s) != CUDA_SUCCESS) {
		ret = fail(rs, RGPU_ECUDA, "writing the round's device memory failed");
		goto out;
	}
	rs->t_fill = rgpu_now_ns();
	/* every chunk is in (DEVICE_END): the source waits for the answer while they are hashed */
	beat_say("verify", 0, (uint64_t)got * CH, "bytes");
	if (got && rgpu_fault("live_delta")) {
		/* as if a chunk had reached the device damaged: the check below must find it */
		w->drv.cuMemsetD8Async(addr[first] + 7, 0x5a, 1, rs->ring_s);
		w->drv.cuStreamSynchronize(rs->ring_s);
	}
	/* what the GPU holds where it was written */
	if (got && srv_gpuhash_open(&w->drv, &gh))
		gh = NULL;
	if (got && (ret = hash_written(rs, gh, n, addr, wrote, now))) {
		ret = fail(rs, ret, "hashing the round's device memory failed");
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const uint8_t *h = bit(wrote, k) ? now + k * RGPU_HASH_LEN : have + k * RGPU_HASH_LEN;
		char hex[13];
		if ((final || bit(exact, k)) && memcmp(h, dh + k * RGPU_HASH_LEN, RGPU_HASH_LEN)) {
			ret = fail(rs, RGPU_ECORRUPT,
				   "device chunk %zu (%s..., memory at %#llx) %s", k,
				   rgpu_hex(dh + k * RGPU_HASH_LEN, 6, hex),
				   (unsigned long long)addr[k],
				   bit(wrote, k) ? "arrived damaged: it does not hash to its name"
						 : "was not sent at the switchover");
			goto out;
		}
		if (!bit(wrote, k))
			memcpy(now + k * RGPU_HASH_LEN, h, RGPU_HASH_LEN);
	}
	rs->t_verify = rgpu_now_ns();
	/* what this GPU holds now: the next round asks for what differs */
	free(rs->dev_have);
	rs->dev_have = now;
	rs->ndev_have = n;
	now = NULL;
	rs->changed = got;
out:
	if (ret && streaming) {
		/* the source is still sending chunks: tell it why this side stops */
		rgpu_admin_error(c, ret, rs->why);
	}
	if (gh)
		srv_gpuhash_close(&w->drv, gh);
	free(addr);
	free(want);
	free(wrote);
	free(exact);
	free(now);
	return ret;
}

/* Module globals: their bytes back where the driver put each one now. */
static int fill_globals(struct restore *rs)
{
	struct srv_worker *w = rs->w;

	for (size_t i = 0; i < rs->m->n_blobs; i++) {
		const Rgpu__CkptBlob *b = rs->m->blobs[i];
		const struct st_rec *g;
		uint8_t *buf;
		CUresult r;
		int ret;
		if (b->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_GLOBAL)
			continue;
		g = st_find(w->log, b->id);
		if (!g || g->kind != ST_KIND_GLOBAL || g->global.addr != b->addr ||
		    g->global.size != b->size)
			return fail(rs, RGPU_ECORRUPT,
				    "the module global of record %llu is not in the rebuilt job",
				    (unsigned long long)b->id);
		ret = read_blob(rs, b, &buf);
		if (ret)
			return ret;
		r = w->drv.cuMemcpyHtoDAsync(srv_dev_translate(w, b->addr), buf, b->size, NULL);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuCtxSynchronize();
		free(buf);
		if (r != CUDA_SUCCESS)
			return fail(rs, RGPU_ECUDA, "writing module global \"%s\": %s",
				    g->name ? g->name : "?", srv_cu_name(&w->drv, r));
	}
	return 0;
}

/* ---- CUDA arrays ----------------------------------------------------------------------------- */

/* The rebuilt job's arrays whose contents a checkpoint holds, in creation order. */
struct arrays {
	const struct st_rec **v;
	size_t n, cap;
};

static int collect_array(const struct st_rec *rec, void *arg)
{
	struct arrays *a = arg;

	if (!srv_array_saved(rec))
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		const struct st_rec **v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return 1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = rec;
	return 0;
}

/*
 * Each array of the rebuilt job matched with its blob (blob[i] for a->v[i]): exactly one each,
 * of the size its shape needs, and no blob for an array the job does not hold. Checked from the
 * metadata alone, before the store's bytes reach the device (fill_device, fill_arrays).
 */
static int match_arrays(struct restore *rs, struct arrays *a, const Rgpu__CkptBlob ***blob)
{
	const Rgpu__CkptMeta *m = rs->m;
	size_t nblobs = 0;
	char why[400];
	int ret;

	*blob = NULL;
	if (st_foreach(rs->w->log, collect_array, a))
		return fail(rs, RGPU_ENOMEM, "out of memory");
	*blob = calloc(a->n + 1, sizeof(**blob));
	if (!*blob)
		return fail(rs, RGPU_ENOMEM, "out of memory");
	for (size_t i = 0; i < m->n_blobs; i++) {
		const Rgpu__CkptBlob *b = m->blobs[i];
		size_t k;
		if (b->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY)
			continue;
		nblobs++;
		for (k = 0; k < a->n && a->v[k]->id != b->id; k++)
			;
		if (k == a->n)
			return fail(rs, RGPU_ECORRUPT,
				    "the checkpoint holds the contents of a CUDA array of record "
				    "%llu, which the rebuilt job does not hold",
				    (unsigned long long)b->id);
		if ((*blob)[k])
			return fail(rs, RGPU_ECORRUPT,
				    "the checkpoint holds the contents of the CUDA array of record "
				    "%llu twice",
				    (unsigned long long)b->id);
		if ((ret = srv_array_expect(rs->w, a->v[k], b->size, why, sizeof(why))))
			return fail(rs, ret, "%s", why);
		(*blob)[k] = b;
	}
	for (size_t k = 0; k < a->n; k++) {
		const char *what =
			a->v[k]->kind == ST_KIND_MIPMAP ? "mipmapped array" : "CUDA array";
		if (!(*blob)[k])
			return fail(rs, RGPU_ECORRUPT,
				    "the %s of record %llu has no contents in the checkpoint (the "
				    "job holds %zu arrays, the checkpoint the contents of %zu)",
				    what, (unsigned long long)a->v[k]->id, a->n, nblobs);
	}
	return 0;
}

/* Every CUDA array of the job written back from its blob, each checked first (ckpt_array.c). */
static int fill_arrays(struct restore *rs, const struct arrays *a, const Rgpu__CkptBlob **blob)
{
	char why[400];

	for (size_t k = 0; k < a->n; k++) {
		uint8_t *buf = NULL;
		int ret = read_blob(rs, blob[k], &buf);
		if (ret)
			return ret;
		ret = srv_array_load(rs->w, a->v[k], buf, blob[k]->size, why, sizeof(why));
		free(buf);
		if (ret)
			return fail(rs, ret, "%s", why);
	}
	return 0;
}

/*
 * The events the job had recorded, recorded again, oldest first, on their context's NULL stream:
 * a query or synchronize finds them complete, and the time between two of them (recorded here
 * back to back) is small and of the sign it had, not what it was.
 */
static int record_events(struct restore *rs)
{
	struct srv_worker *w = rs->w;

	for (size_t i = 0; i < rs->m->n_recorded_events; i++) {
		struct srv_obj *e = srv_obj_find(w, rs->m->recorded_events[i], ST_KIND_EVENT);
		CUresult r;
		if (!e)
			return fail(rs, RGPU_ECORRUPT, "recorded event %llu is not in the rebuilt job",
				    (unsigned long long)rs->m->recorded_events[i]);
		r = srv_use_ctx(w, e->ctx);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuEventRecord(e->h, NULL);
		if (r != CUDA_SUCCESS)
			return fail(rs, RGPU_ECUDA, "recording event %llu again: %s",
				    (unsigned long long)e->id, srv_cu_name(&w->drv, r));
		e->recorded = i + 1;
	}
	w->cur_ctx_id = 0;
	w->drv.cuCtxSetCurrent(w->base_ctx);
	return 0;
}

/* ---- the whole restore ---------------------------------------------------------------------- */

/* The job's objects: checks that it can run here, the worker set up, its state log replayed. */
static int rebuild(struct restore *rs)
{
	struct srv_worker *w = rs->w;
	const Rgpu__CkptMeta *m = rs->m;
	const Rgpu__CkptBlob *b;
	struct st_log *want = NULL;
	uint8_t *log = NULL, *journals = NULL;
	size_t jlen = 0;
	char why[512];
	CUresult r;
	int ret;

	if (m->window_base != w->cfg->window_base || m->window_size != w->cfg->window_size)
		return fail(rs, RGPU_EUNSUPPORTED,
			    "the job's device window is %#llx+%#llx, this server's %#llx+%#llx: "
			    "addresses must be the same on every server (rgpud --window)",
			    (unsigned long long)m->window_base, (unsigned long long)m->window_size,
			    (unsigned long long)w->cfg->window_base,
			    (unsigned long long)w->cfg->window_size);
	/*
	 * The client numbers the job's devices from device_base (its other servers' devices
	 * have the other numbers), and the state log names them so: the job gets the same base
	 * here, on this server's first n GPUs, n the job's (device_cc lists them; an older
	 * checkpoint lists all its server's, from base 0). The same ordinals as where it ran
	 * would be no better: the client never sees them, and a target need not have them.
	 * rgpu_ckpt_meta_decode() checked that the numbers fit the client's 16.
	 */
	srv_dev_want_first(w, m->device_base, m->n_device_cc);
	/* the driver's start and the job's contexts may take seconds */
	beat_say("setup", 0, 0, "");
	r = srv_worker_setup(w, why, sizeof(why));
	if (r == CUDA_ERROR_INVALID_DEVICE)
		return fail(rs, RGPU_EUNSUPPORTED, "the job used %zu GPUs: %s", m->n_device_cc,
			    why);
	if (r != CUDA_SUCCESS)
		return fail(rs, RGPU_ECUDA, "%s", why);
	if (m->device_base)
		pr_info("the job's client numbers its devices from %u: its %d here are this "
			"server's first",
			m->device_base, w->ndev);
	rs->t_setup = rgpu_now_ns();
	for (size_t d = 0; d < m->n_device_cc && d < (size_t)w->ndev; d++) {
		int maj = 0, min = 0;
		w->drv.cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					    w->dev[d]);
		w->drv.cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					    w->dev[d]);
		if ((uint32_t)(maj * 10 + min) != m->device_cc[d])
			return fail(rs, RGPU_EUNSUPPORTED,
				    "the job ran on a GPU of compute capability %u.%u (%s); GPU %d "
				    "here, its device %zu, is %d.%d: its code would not load",
				    m->device_cc[d] / 10, m->device_cc[d] % 10,
				    d < m->n_device_name ? m->device_name[d] : "?", w->dev_ord[d],
				    m->device_base + d, maj, min);
	}
	if ((size_t)w->ndev < m->n_device_cc)
		return fail(rs, RGPU_EUNSUPPORTED, "the job used %zu GPUs; this server has %d",
			    m->n_device_cc, w->ndev);
	if (srv_log_init(w))
		return fail(rs, RGPU_ENOMEM, "out of memory");
	srv_worker_modcache(w, "the job's images are not kept for its later loads");
	/* the state log and the capture journals, whole */
	if (!(b = find_blob(m, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG)))
		return fail(rs, RGPU_ECORRUPT, "the checkpoint has no state log");
	if ((ret = read_blob(rs, b, &log)))
		return ret;
	ret = st_deserialize(log, b->size, &want, NULL);
	free(log);
	if (ret)
		return fail(rs, RGPU_ECORRUPT, "its state log cannot be read: %s",
			    rgpu_strerror(ret));
	if ((b = find_blob(m, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_JOURNALS)) &&
	    (ret = read_blob(rs, b, &journals))) {
		st_log_free(want);
		return ret;
	}
	jlen = b ? b->size : 0;
	beat_say("replay", 0, st_count(want), "records");
	if (rgpu_fault("restore_replay")) {
		st_log_free(want);
		free(journals);
		return fail(rs, RGPU_EIO, "fault site restore_replay");
	}
	the_restore = rs;
	w->image_lookup = image_lookup;
	w->replaying = 1;
	if (rgpu_fault("restore_slow"))
		sleep(5); /* tests: a target busy and silent longer than the sender's deadline */
	ret = srv_replay_restore(w, want, journals, jlen, why, sizeof(why));
	w->replaying = 0;
	w->image_lookup = NULL;
	st_log_free(want);
	free(journals);
	if (ret)
		return fail(rs, ret, "rebuilding the job: %s", why);
	beat_say("replay", st_count(w->log), st_count(w->log), "records");
	rs->t_replay = rgpu_now_ns();
	return 0;
}

/*
 * The job's memory: device memory (what changed, on a staged job), globals, CUDA arrays, events,
 * host area. final: the job is to be served (a restore, a migration's switchover); a live
 * migration's earlier rounds carry no arrays (they cross at the switchover), so only then are
 * they matched and written.
 */
static int contents(struct restore *rs, int final)
{
	struct srv_worker *w = rs->w;
	const Rgpu__CkptMeta *m = rs->m;
	const Rgpu__CkptBlob *b, **ablob = NULL;
	struct arrays arrs = {0};
	uint8_t *buf = NULL;
	int ret = 0;

	beat_say("restore", 0, 0, "");
	/* a live round's device memory came on the connection (take_device) */
	if ((final && (ret = match_arrays(rs, &arrs, &ablob))) ||
	    (!rgpu_ckpt_is_live(rs->m) && (ret = fill_device(rs))) || (ret = fill_globals(rs)) ||
	    (final && (ret = fill_arrays(rs, &arrs, ablob))) || (ret = record_events(rs))) {
		free(arrs.v);
		free(ablob);
		return ret;
	}
	free(arrs.v);
	free(ablob);
	if ((b = find_blob(m, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_HOSTAREA))) {
		if ((ret = read_blob(rs, b, &buf)))
			return ret;
		ret = srv_hm_load(w, buf, b->size);
		free(buf);
		if (ret)
			return fail(rs, ret, "its host area cannot be put back: %s",
				    rgpu_strerror(ret));
	}
	memcpy(w->job_id, m->job_id.data, SRV_JOB_ID_LEN);
	w->session = m->session;
	rgpu_hex(w->job_id, SRV_JOB_ID_LEN, w->job_hex);
	return 0;
}

/* The job's link, once, when it is to be served: unacknowledged frames, tokens, counters. */
static int link_state(struct restore *rs, const Rgpu__PushRequest *req)
{
	struct srv_worker *w = rs->w;
	const Rgpu__CkptMeta *m = rs->m;
	const Rgpu__CkptBlob *b;
	uint8_t *buf = NULL;
	int ret;

	if ((b = find_blob(m, RGPU__CKPT_BLOB_KIND__CKPT_BLOB_KEPT))) {
		if ((ret = read_blob(rs, b, &buf)))
			return ret;
		ret = srv_link_kept_load(w, buf, b->size, m->sent);
		free(buf);
		if (ret)
			return fail(rs, ret, "its unacknowledged frames cannot be put back");
	} else {
		w->tx_seq = m->sent;
	}
	memcpy(w->token, req->token.len == SRV_TOKEN_LEN ? req->token.data : m->token.data,
	       SRV_TOKEN_LEN);
	if (req->token_prev.len == SRV_TOKEN_LEN) {
		memcpy(w->token_prev, req->token_prev.data, SRV_TOKEN_LEN);
		atomic_store(&w->token_prev_ok, 1);
	}
	/* the peer token is this server's: the client reads the new one in its resume's reply */
	if (srv_peer_token_new(w))
		return fail(rs, RGPU_ESYS, "no randomness for its peer token");
	atomic_store(&w->executed, m->executed);
	atomic_store(&w->rx_seq, m->executed);
	w->ack_told = m->executed;
	w->reader_skip_until = m->received;
	w->async_err = (CUresult)m->async_error;
	w->client_caps = m->client_caps;
	snprintf(w->client_host, sizeof(w->client_host), "%s", m->client_host);
	snprintf(w->client_program, sizeof(w->client_program), "%s", m->client_program);
	snprintf(w->label, sizeof(w->label), "%s", rgpu_label_valid(m->label) ? m->label : "");
	w->client_pid = m->client_pid;
	return 0;
}

/*
 * The job's module images into this server's module cache, for its later loads by hash, as if
 * its client had shipped them here. Once, after the rebuild: a live migration's rounds keep the
 * same images (same_job), so this stays out of the switchover's hold.
 */
static void keep_images(struct restore *rs)
{
	struct srv_worker *w = rs->w;
	const Rgpu__CkptMeta *m = rs->m;

	for (size_t i = 0; w->modcache && i < m->n_blobs; i++) {
		void *img;
		size_t len;
		beat_say("images", i, m->n_blobs, "blobs");
		if (m->blobs[i]->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE &&
		    image_lookup(w, m->blobs[i]->hash.data, &img, &len) == 0) {
			srv_modcache_put(w->modcache, w->tenant, w->limits.module_cache,
					 m->blobs[i]->hash.data, img, len);
			free(img);
		}
	}
}

/* Answer the source: 0, or why the answer could not be sent. */
static int reply(struct rgpu_conn *c, uint64_t seq, int result, const char *why, uint64_t id,
		 const struct srv_worker *w, const char *client_address, uint64_t restore_ns,
		 uint64_t changed)
{
	Rgpu__PushReply rep = RGPU__PUSH_REPLY__INIT;
	struct rgpu_frame_hdr h = {.type = done_type, .flags = RGPU_FRAME_REPLY, .ref = seq};

	beat_off();
	if (!seq) /* nothing to answer: the source was told otherwise */
		return 0;
	rep.result = result;
	rep.error = (char *)(why ? why : "");
	rep.id = id;
	if (w && !result) {
		rep.job_id.data = (uint8_t *)w->job_id;
		rep.job_id.len = SRV_JOB_ID_LEN;
	}
	rep.client_address = (char *)(client_address ? client_address : "");
	rep.restore_ns = restore_ns;
	rep.changed = changed;
	return rgpu_frame_send_hdr(c, &h, &rep.base, NULL);
}

/* The blobs that make a job's structure: a staged job takes a round only if they are equal. */
static int structural(const Rgpu__CkptBlob *b)
{
	return b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE ||
	       b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_GLOBAL ||
	       b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG ||
	       b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_JOURNALS ||
	       b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE;
}

/*
 * Is checkpoint (m, hashes) the staged job's, with only its contents changed: the same job, the
 * same state log and capture journals (byte for byte: their chunk hashes), module images,
 * globals and device mappings? why says the first difference.
 */
static int same_job(const struct restore *rs, const Rgpu__CkptMeta *m, const uint8_t *hashes,
		    char *why, size_t whylen)
{
	const Rgpu__CkptMeta *o = rs->m;
	size_t i = 0, j = 0;

	if (m->job_id.len != o->job_id.len || memcmp(m->job_id.data, o->job_id.data, o->job_id.len)) {
		snprintf(why, whylen, "a checkpoint of another job");
		return 0;
	}
	/* the staged worker's GPUs were chosen from the first round's (rebuild) */
	if (m->device_base != o->device_base || m->n_device_cc != o->n_device_cc) {
		snprintf(why, whylen, "its devices changed (%zu from %u, were %zu from %u)",
			 m->n_device_cc, m->device_base, o->n_device_cc, o->device_base);
		return 0;
	}
	for (;;) {
		while (i < o->n_blobs && !structural(o->blobs[i]))
			i++;
		while (j < m->n_blobs && !structural(m->blobs[j]))
			j++;
		if (i == o->n_blobs || j == m->n_blobs)
			break;
		const Rgpu__CkptBlob *a = o->blobs[i++], *b = m->blobs[j++];
		if (a->kind != b->kind || a->addr != b->addr || a->size != b->size ||
		    a->count != b->count || a->id != b->id ||
		    (a->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE &&
		     a->kind != RGPU__CKPT_BLOB_KIND__CKPT_BLOB_GLOBAL &&
		     memcmp(rs->hashes + a->first * RGPU_HASH_LEN, hashes + b->first * RGPU_HASH_LEN,
			    a->count * RGPU_HASH_LEN))) {
			snprintf(why, whylen, "its %s changed (blob %zu)",
				 a->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE ? "device mappings"
				 : a->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG ? "state log"
				 : a->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_JOURNALS
				     ? "capture journals"
				     : "modules",
				 j - 1);
			return 0;
		}
	}
	if (i != o->n_blobs || j != m->n_blobs) {
		snprintf(why, whylen, "its objects changed (another number of them)");
		return 0;
	}
	return 1;
}

/*
 * A staged job (live migration): say so to the source, then take its next round on c: the
 * checkpoint into the store, checked to be this job with only its contents changed, the chunks
 * that changed written. *reqp becomes the round's request. 0, or an error (rs->why; the source
 * has been answered where it can be, RGPU_ESTALE when the job's structure changed).
 */
static int next_round(struct restore *rs, struct rgpu_conn *c, Rgpu__PushRequest **reqp,
		      uint64_t *done_seq, unsigned round, uint64_t t0)
{
	struct srv_worker *w = rs->w;
	struct rgpu_frame_hdr fh;
	Rgpu__PushRequest *req = NULL;
	Rgpu__CkptMeta *m = NULL;
	uint8_t *body = NULL, *hashes = NULL;
	uint64_t old = rs->id;
	size_t n = 0;
	char why[400];
	int ret;

	reply(c, *done_seq, 0, NULL, rs->id, w, NULL, rgpu_now_ns() - t0, rs->changed);
	pr_info("job %s staged for a live migration, round %u: %llu chunks written in %.3f s",
		w->job_hex, round, (unsigned long long)rs->changed, (rgpu_now_ns() - t0) / 1e9);
	if (rgpu_fault("live_stage_crash")) /* the target dies between two rounds */
		_exit(1);
	ret = rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &fh, &body, RGPU_ADMIN_LONG_TIMEOUT_MS);
	if (ret)
		return fail(rs, ret, "the source left the live migration after round %u: %s", round,
			    rgpu_strerror(ret));
	if (fh.type == RGPU_ADMIN_MSG_PUSH)
		req = RGPU_PB_UNPACK(rgpu__push_request, fh.body_len, body);
	free(body);
	if (!req || !req->restore) {
		rgpu_conn_discard(c, fh.payload_len);
		if (req)
			rgpu__push_request__free_unpacked(req, NULL);
		return fail(rs, RGPU_EPROTO, "a staged job takes only the next round's PUSH");
	}
	rgpu__push_request__free_unpacked(*reqp, NULL);
	*reqp = req;
	*done_seq = 0;
	done_type = RGPU_ADMIN_MSG_PUSH_DONE;
	ret = rgpu_push_receive(c, &fh, req, NULL, rs->store, &rs->id, done_seq, why, sizeof(why));
	if (ret) {
		if (*done_seq)
			reply(c, *done_seq, ret, why, 0, NULL, NULL, 0, 0);
		return fail(rs, ret, "round %u: %s", round + 1, why);
	}
	/* the round is stored; the last one's removal may wait for the store (a gc there) */
	beat_say("store", 0, 0, "");
	/*
	 * The round before is done with whatever follows: only the last one stays a checkpoint
	 * here (and goes too when this process ends, restore_run's exit).
	 */
	if (old != rs->id)
		rgpu_store_remove(rs->store, old);
	ret = rgpu_ckpt_load(rs->store, rs->id, &m, &hashes, &n, why, sizeof(why));
	if (ret) {
		reply(c, *done_seq, ret, why, rs->id, NULL, NULL, 0, 0);
		return fail(rs, ret, "round %u: %s", round + 1, why);
	}
	rs->t_round = rgpu_now_ns();
	if (!same_job(rs, m, hashes, why, sizeof(why))) {
		ret = fail(rs, RGPU_ESTALE, "round %u: %s since it was staged", round + 1, why);
		reply(c, *done_seq, ret, rs->why, rs->id, NULL, NULL, 0, 0);
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		free(hashes);
		return ret;
	}
	rgpu__ckpt_meta__free_unpacked(rs->m, NULL);
	free(rs->hashes);
	rs->m = m;
	rs->hashes = hashes;
	rs->n = n;
	ret = rgpu_ckpt_is_live(rs->m) ? take_device(rs, c, done_seq, !req->stage) : 0;
	if (!ret)
		ret = contents(rs, !req->stage);
	if (ret)
		reply(c, *done_seq, ret, rs->why, rs->id, NULL, NULL, 0, 0);
	return ret;
}

void srv_restore_run(const struct srv_config *cfg, struct rgpu_conn *c,
		     const struct rgpu_frame_hdr *h, Rgpu__PushRequest *req, const uint8_t *proof,
		     int ctl_fd, const char *listen)
{
	static struct srv_worker wk;
	struct srv_worker *w = &wk;
	struct restore rs = {.w = w};
	struct timespec now;
	uint64_t done_seq = 0, t0;
	char why[400] = "";
	int ret;

	/* the supervisor's bound on one request is not this conversation's: each wait has its own */
	rgpu_conn_set_deadline(c, 0);
	srv_worker_init(w, cfg, ctl_fd, rgpu_conn_peer(c));
	snprintf(w->job_hex, sizeof(w->job_hex), "(restoring)");
	clock_gettime(CLOCK_REALTIME, &now);
	w->started_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	ret = srv_worker_store(w, why, sizeof(why));
	rs.store = w->store;
	if (ret) {
		pr_warn("a checkpoint pushed by %s refused: %s", rgpu_conn_peer(c), why);
		rgpu_conn_discard(c, h->payload_len);
		Rgpu__PushNeed pn = RGPU__PUSH_NEED__INIT;
		struct rgpu_frame_hdr rh = {.type = RGPU_ADMIN_MSG_PUSH, .flags = RGPU_FRAME_REPLY,
					    .ref = h->seq};
		pn.result = ret;
		pn.error = why;
		rgpu_frame_send_hdr(c, &rh, &pn.base, NULL);
		goto out;
	}
	ret = rgpu_push_receive(c, h, req, proof, rs.store, &rs.id, &done_seq, why, sizeof(why));
	if (ret) {
		pr_warn("a checkpoint pushed by %s failed: %s", rgpu_conn_peer(c), why);
		if (done_seq)
			reply(c, done_seq, ret, why, 0, NULL, NULL, 0, 0);
		goto out;
	}
	t0 = rgpu_now_ns();
	pr_info("checkpoint %llu pushed by %s stored", (unsigned long long)rs.id,
		rgpu_conn_peer(c));
	if (!req->restore) {
		reply(c, done_seq, 0, NULL, rs.id, NULL, NULL, 0, 0);
		goto out;
	}
	beat_start(c);
	beat_say("load", 0, 0, "");
	ret = rgpu_ckpt_load(rs.store, rs.id, &rs.m, &rs.hashes, &rs.n, rs.why, sizeof(rs.why));
	if (!ret) {
		/* the job's tenant: its limits and sessions, as for the job's first handshake */
		snprintf(w->tenant, sizeof(w->tenant), "%s", rs.m->tenant);
		srv_limits_for(cfg, w->tenant, &w->limits);
		unsigned sessions = 0;
		ret = srv_acct_join(w->tenant, w->limits.sessions, &sessions);
		if (ret)
			snprintf(rs.why, sizeof(rs.why), "%s has its limit of sessions here",
				 srv_tenant_label(w->tenant));
	}
	if (!ret)
		ret = rebuild(&rs);
	if (!ret)
		keep_images(&rs);
	if (!ret && rgpu_ckpt_is_live(rs.m))
		ret = take_device(&rs, c, &done_seq, !req->stage);
	if (!ret)
		ret = contents(&rs, !req->stage);
	/* a live migration's rounds: the job stays staged, unserved, until the switchover */
	for (unsigned round = 1; !ret && req->stage; round++) {
		ret = next_round(&rs, c, &req, &done_seq, round, t0);
		t0 = rs.t_round;
		if (ret) {
			pr_warn("job %s: the live migration to this server ends: %s", w->job_hex,
				rs.why);
			goto out; /* answered already where it could be */
		}
	}
	if (!ret)
		ret = link_state(&rs, req);
	if (ret) {
		pr_warn("restoring checkpoint %llu failed: %s", (unsigned long long)rs.id, rs.why);
		reply(c, done_seq, ret, rs.why, rs.id, NULL, NULL, 0, 0);
		goto out;
	}
	if (rgpu_fault("restore_crash")) /* the target dies before it answers */
		_exit(1);
	w->restored = 1;
	const char *addr = req->client_address && *req->client_address ? req->client_address
								       : listen;
	/*
	 * A source that gave up (the target silent past its --frame-timeout) runs the job on: it
	 * must not run here as well. It has closed its end, or the answer cannot go (below); one
	 * that closes just after the answer left is not seen here.
	 */
	if (rgpu_conn_hung_up(c))
		goto gone;
	/* the supervisor knows the job before its client can: the redirect follows the reply */
	atomic_store(&w->state, SRV_JOB_DISCONNECTED);
	srv_worker_report(w);
	if (rs.t_round) /* staged: the last round was the switchover */
		pr_info("job %s switched over from its live migration in %.3f s (%s; %llu device "
			"chunks written in %.3f s, hash check %.3f s); waiting %d s for its client at %s",
			w->job_hex, (rgpu_now_ns() - t0) / 1e9, rs.m->client_program,
			(unsigned long long)rs.changed, (rs.t_fill - t0) / 1e9,
			(rs.t_verify - rs.t_fill) / 1e9, cfg->resume_grace_s, addr);
	else
		pr_info("job %s restored from checkpoint %llu in %.3f s (%s; set-up %.3f s, replay "
			"%.3f s, fill %.3f s, hash check %.3f s); waiting %d s for its client at %s",
			w->job_hex, (unsigned long long)rs.id, (rgpu_now_ns() - t0) / 1e9,
			rs.m->client_program, (rs.t_setup - t0) / 1e9,
			(rs.t_replay - rs.t_setup) / 1e9, (rs.t_fill - rs.t_replay) / 1e9,
			(rs.t_verify - rs.t_fill) / 1e9, cfg->resume_grace_s, addr);
	if (reply(c, done_seq, 0, NULL, rs.id, w, addr, rgpu_now_ns() - t0, rs.changed))
		goto gone;
	beat_stop();
	rgpu_conn_close(c);
	ring_close(&rs);
	/* a live round's checkpoint holds no device memory: nothing to restore it from later */
	if (rgpu_ckpt_is_live(rs.m))
		rgpu_store_remove(rs.store, rs.id);
	rgpu__ckpt_meta__free_unpacked(rs.m, NULL);
	free(rs.hashes);
	free(rs.dev_have);
	rgpu__push_request__free_unpacked(req, NULL);
	/* a job like any other now, whose link is down: its client resumes it here */
	srv_worker_serve(w); /* (it does not return) */
gone:
	pr_warn("job %s: the source %s left before the answer (it runs the job on): not served here",
		w->job_hex, rgpu_conn_peer(c));
out:
	beat_stop();
	/* a failed live migration's round: nothing to restore it from either */
	if (rs.m && rgpu_ckpt_is_live(rs.m) && rs.id)
		rgpu_store_remove(rs.store, rs.id);
	if (rs.m)
		rgpu__ckpt_meta__free_unpacked(rs.m, NULL);
	free(rs.hashes);
	rgpu_conn_close(c);
	srv_acct_leave();
	_exit(0);
}
