/*
 * A checkpoint's metadata (rgpu/ckpt.h, proto/checkpoint.proto): decoding it with every check
 * a reader of the store owes the bytes, summing it up for listings, and verifying every chunk
 * of a checkpoint. The metadata comes from a store that may be damaged or from another server,
 * so nothing in it is used before it is checked here: a blob is a run of the manifest's chunk
 * list of exactly the length its size needs.
 */
#define LOG_PREFIX "ckpt: "
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.pb-c.h"
#include "checkpoint.pb-c.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/pbdecode.h"
#include "rgpu/store.h"
#include "rgpu/util.h"

static const char *blob_kind_name(unsigned k)
{
	switch (k) {
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE: return "device memory";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_GLOBAL: return "a module global";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG: return "the state log";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_JOURNALS: return "the capture journals";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_HOSTAREA: return "the host area";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_KEPT: return "the frames kept for the client";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE: return "a module image";
	case RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY: return "a CUDA array";
	}
	return NULL;
}

int rgpu_ckpt_is_live(const Rgpu__CkptMeta *m)
{
	return m->live_round || m->device_hashes.len;
}

int rgpu_ckpt_meta_decode(const void *buf, size_t len, size_t n, Rgpu__CkptMeta **out,
			  char *why, size_t whylen)
{
	Rgpu__CkptMeta *m = RGPU_PB_UNPACK(rgpu__ckpt_meta, len, buf);

	*out = NULL;
	if (!m) {
		snprintf(why, whylen, "its metadata does not decode");
		return RGPU_ECORRUPT;
	}
	if (m->format != RGPU_CKPT_FORMAT) {
		snprintf(why, whylen, "a checkpoint of format %u; this rgpu reads format %u",
			 m->format, RGPU_CKPT_FORMAT);
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		return RGPU_EVERSION;
	}
	if (m->job_id.len != 16) {
		snprintf(why, whylen, "its metadata names no job");
		goto bad;
	}
	/* a client has at most 16 devices, numbered 0..15: the job's are some of them */
	if (m->device_base >= 16 || m->n_device_cc > 16 - m->device_base) {
		snprintf(why, whylen, "its %zu devices are numbered from %u, past a client's 16",
			 m->n_device_cc, m->device_base);
		goto bad;
	}
	if (m->device_hashes.len % RGPU_HASH_LEN) {
		snprintf(why, whylen, "its device chunk hashes are %zu bytes, not a whole number",
			 m->device_hashes.len);
		goto bad;
	}
	for (size_t i = 0; i < m->n_blobs; i++) {
		const Rgpu__CkptBlob *b = m->blobs[i];
		if (!blob_kind_name(b->kind)) {
			snprintf(why, whylen, "blob %zu is of unknown kind %d", i, (int)b->kind);
			goto bad;
		}
		/* a live round's device blobs index device_hashes; every other blob the list */
		size_t of = b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE && rgpu_ckpt_is_live(m)
				    ? m->device_hashes.len / RGPU_HASH_LEN
				    : n;
		if (b->count != rgpu_ckpt_nchunks(b->size) || b->first > of ||
		    b->count > of - b->first) {
			snprintf(why, whylen,
				 "blob %zu (%s, %llu bytes) names chunks %llu+%llu of a list of %zu",
				 i, blob_kind_name(b->kind), (unsigned long long)b->size,
				 (unsigned long long)b->first, (unsigned long long)b->count, of);
			goto bad;
		}
		if (b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE &&
		    (b->addr % RGPU_CHUNK_MAX || b->size % RGPU_CHUNK_MAX || b->size == 0 ||
		     b->addr < m->window_base || b->addr - m->window_base > m->window_size ||
		     b->size > m->window_size - (b->addr - m->window_base) || b->device >= 16)) {
			snprintf(why, whylen,
				 "blob %zu: device memory [%#llx, +%llu) outside its window or not "
				 "in 2 MiB units",
				 i, (unsigned long long)b->addr, (unsigned long long)b->size);
			goto bad;
		}
		if (b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY && !b->id) {
			snprintf(why, whylen,
				 "blob %zu: a CUDA array's contents without its record", i);
			goto bad;
		}
		if (b->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE && b->hash.len != RGPU_HASH_LEN) {
			snprintf(why, whylen, "blob %zu: a module image without its hash", i);
			goto bad;
		}
	}
	*out = m;
	return 0;
bad:
	rgpu__ckpt_meta__free_unpacked(m, NULL);
	return RGPU_ECORRUPT;
}

void rgpu_ckpt_info(const Rgpu__CkptMeta *m, uint64_t id, size_t nchunks, Rgpu__CkptInfo *info)
{
	info->id = id;
	info->job_id = m->job_id;
	info->tenant = m->tenant;
	info->client_host = m->client_host;
	info->client_program = m->client_program;
	info->created_unix_ms = m->created_unix_ms;
	info->device_bytes = m->device_bytes;
	info->array_bytes = m->array_bytes;
	info->chunks = nchunks;
	info->new_chunks = m->new_chunks;
	info->new_bytes = m->new_bytes;
	info->stored_bytes = m->stored_bytes;
	info->pause_ns = m->pause_ns;
	info->duration_ns = m->duration_ns;
	info->snapshot = m->snapshot;
	info->records = m->records;
	info->server_host = m->server_host;
}

int rgpu_ckpt_load(struct rgpu_store *s, uint64_t id, Rgpu__CkptMeta **meta, uint8_t **hashes,
		   size_t *n, char *why, size_t whylen)
{
	void *mb = NULL;
	size_t ml = 0;
	char w[300];
	int ret;

	*meta = NULL;
	*hashes = NULL;
	ret = rgpu_store_manifest(s, id, &mb, &ml, hashes, n);
	if (ret == RGPU_ENOTFOUND) {
		snprintf(why, whylen, "no checkpoint %llu in this server's store",
			 (unsigned long long)id);
		return ret;
	}
	if (ret == RGPU_ECORRUPT) {
		snprintf(why, whylen,
			 "checkpoint %llu: its manifest is damaged (its header, counts, lengths "
			 "or digest do not match its bytes)",
			 (unsigned long long)id);
		return ret;
	}
	if (ret) {
		snprintf(why, whylen, "checkpoint %llu: %s", (unsigned long long)id,
			 rgpu_strerror(ret));
		return ret;
	}
	ret = rgpu_ckpt_meta_decode(mb, ml, *n, meta, w, sizeof(w));
	free(mb);
	if (ret) {
		snprintf(why, whylen, "checkpoint %llu: %s", (unsigned long long)id, w);
		free(*hashes);
		*hashes = NULL;
	}
	return ret;
}

/* ---- verify ----------------------------------------------------------------------------------- */

struct verify {
	struct rgpu_store *s;
	const Rgpu__CkptMeta *m;
	const uint8_t *hashes;
	size_t n;
	atomic_size_t next;
	atomic_size_t done;
	atomic_uint_fast64_t bytes;
	atomic_int failed;
	size_t bad;          /* the first chunk that failed (under lock) */
	int bad_code;
	const char *bad_why;
	pthread_mutex_t lock;
};

static void verify_fail(struct verify *v, size_t i, int code, const char *why)
{
	pthread_mutex_lock(&v->lock);
	if (!atomic_load(&v->failed) || i < v->bad) {
		v->bad = i;
		v->bad_code = code;
		v->bad_why = why;
	}
	atomic_store(&v->failed, 1);
	pthread_mutex_unlock(&v->lock);
}

static void verify_thread(void *arg, unsigned tid)
{
	struct verify *v = arg;
	struct rgpu_store_reader *r = NULL;
	uint8_t *buf = malloc(RGPU_CHUNK_MAX);
	size_t i;

	(void)tid;
	if (!buf || rgpu_store_reader_begin(v->s, &r)) {
		verify_fail(v, 0, RGPU_ENOMEM, "out of memory");
		free(buf);
		return;
	}
	while (!atomic_load(&v->failed) && (i = atomic_fetch_add(&v->next, 1)) < v->n) {
		const void *val;
		size_t vlen, len = 0;
		const char *why = NULL;
		int ret = rgpu_store_reader_get(r, v->hashes + i * RGPU_HASH_LEN, &val, &vlen);
		if (ret == RGPU_ENOTFOUND) {
			verify_fail(v, i, ret, "it is not in the store");
			break;
		}
		if (ret) {
			verify_fail(v, i, ret, "it cannot be read");
			break;
		}
		if (rgpu_chunk_value_check(val, vlen, v->hashes + i * RGPU_HASH_LEN, buf, &len,
					   &why)) {
			verify_fail(v, i, RGPU_ECORRUPT, why);
			break;
		}
		atomic_fetch_add(&v->bytes, len);
		atomic_fetch_add(&v->done, 1);
	}
	rgpu_store_reader_end(r);
	free(buf);
}

const char *rgpu_ckpt_blob_of(const Rgpu__CkptMeta *m, size_t i, char *out, size_t len)
{
	for (size_t b = 0; b < m->n_blobs; b++) {
		const Rgpu__CkptBlob *bl = m->blobs[b];
		if (bl->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE && rgpu_ckpt_is_live(m))
			continue; /* not in the list */
		if (i >= bl->first && i - bl->first < bl->count) {
			if (bl->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE)
				snprintf(out, len, "device memory at %#llx",
					 (unsigned long long)(bl->addr +
							      (i - bl->first) * RGPU_CHUNK_MAX));
			else if (bl->kind == RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY)
				snprintf(out, len, "the CUDA array of record %llu",
					 (unsigned long long)bl->id);
			else
				snprintf(out, len, "%s", blob_kind_name(bl->kind));
			return out;
		}
	}
	snprintf(out, len, "no blob");
	return out;
}

/* What the caller hears while the chunks are read */
struct verify_tick {
	struct verify *v;
	void (*progress)(uint64_t done, uint64_t total, void *arg);
	void *parg;
};

static void verify_tick(void *p)
{
	struct verify_tick *t = p;
	t->progress(atomic_load(&t->v->done), t->v->n, t->parg);
}

int rgpu_ckpt_verify(struct rgpu_store *s, uint64_t id, unsigned nthreads,
		     void (*progress)(uint64_t done, uint64_t total, void *arg), void *parg,
		     uint64_t *chunks, uint64_t *bytes, char *why, size_t whylen)
{
	Rgpu__CkptMeta *m = NULL;
	uint8_t *hashes = NULL;
	size_t n = 0;
	struct verify v = {0};
	int ret = rgpu_ckpt_load(s, id, &m, &hashes, &n, why, whylen);

	if (ret)
		return ret;
	v.s = s;
	v.m = m;
	v.hashes = hashes;
	v.n = n;
	pthread_mutex_init(&v.lock, NULL);
	/* the calling thread reports progress; the others read */
	if (nthreads < 1)
		nthreads = 1;
	if (progress) {
		struct verify_tick t = {&v, progress, parg};
		rgpu_parallel_watch(nthreads, verify_thread, &v, verify_tick, &t, 200);
	} else {
		rgpu_parallel(nthreads, verify_thread, &v);
	}
	if (atomic_load(&v.failed)) {
		char where[96], hex[13];
		snprintf(why, whylen, "checkpoint %llu: chunk %zu of %zu (%s..., %s): %s",
			 (unsigned long long)id, v.bad, n,
			 rgpu_hex(hashes + v.bad * RGPU_HASH_LEN, 6, hex),
			 rgpu_ckpt_blob_of(m, v.bad, where, sizeof(where)), v.bad_why);
		/* a chunk missing from the store is a damaged checkpoint too */
		ret = v.bad_code == RGPU_ENOMEM ? RGPU_ENOMEM : RGPU_ECORRUPT;
	}
	if (chunks)
		*chunks = atomic_load(&v.done);
	if (bytes)
		*bytes = atomic_load(&v.bytes);
	pthread_mutex_destroy(&v.lock);
	rgpu__ckpt_meta__free_unpacked(m, NULL);
	free(hashes);
	return ret;
}
