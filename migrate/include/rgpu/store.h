/*
 * The checkpoint store (design.md §6, issue 9): one LMDB environment per server holding device
 * memory as chunks named by their chunk hash (rgpu/hash.h), each stored once, and checkpoints
 * as manifests. A checkpoint is written chunk by chunk (chunks already in the store cost
 * nothing) and exists only once its manifest is committed, in one write transaction; a crash
 * before that leaves chunks no manifest names, which rgpu_store_gc() removes.
 *
 * Lifecycle: rgpu_store_open / _close; rgpu_ckpt_begin, rgpu_ckpt_chunk..., then
 * rgpu_ckpt_commit or rgpu_ckpt_abort (both free the checkpoint object). Not thread-safe per
 * object; one environment may be open in several processes (LMDB's locking).
 */
#ifndef RGPU_STORE_H
#define RGPU_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu/hash.h"

struct rgpu_store;
struct rgpu_ckpt;

struct rgpu_store_stats {
	uint64_t chunks;       /* distinct chunks stored */
	uint64_t zero_chunks;  /* of which all-zero (stored as a flag) */
	uint64_t raw_chunks;   /* of which stored uncompressed (zstd did not shrink them) */
	uint64_t data_bytes;   /* their bytes before compression */
	uint64_t stored_bytes; /* their bytes in the store, headers included */
	uint64_t manifests;
	uint64_t map_size;     /* the environment's current map size */
};

/* rgpu_store_open() - open or create the store in directory dir. 0, RGPU_ESYS, RGPU_ECORRUPT
 * (a store of another format), RGPU_ENOMEM. */
int rgpu_store_open(const char *dir, struct rgpu_store **out);
void rgpu_store_close(struct rgpu_store *s);

/* rgpu_store_chunk_has() - 1 if the chunk is stored, 0 if not, or a negative RGPU_E*. */
int rgpu_store_chunk_has(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN]);

/*
 * rgpu_store_chunk_get() - the chunk's bytes into buf (cap bytes), *len set, after checking
 * its header and that its bytes hash to its name. 0, RGPU_ENOTFOUND, RGPU_ECORRUPT (said at
 * warn, naming the chunk and what is wrong), RGPU_ETOOBIG (cap too small).
 */
int rgpu_store_chunk_get(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN], void *buf,
			 size_t cap, size_t *len);

/* rgpu_ckpt_begin() - start a checkpoint. 0 or RGPU_ENOMEM. */
int rgpu_ckpt_begin(struct rgpu_store *s, struct rgpu_ckpt **out);

/*
 * rgpu_ckpt_chunk() - the checkpoint names chunk `hash` (the chunk hash of [data, data+len),
 * len at most RGPU_CHUNK_MAX). data may be NULL when the caller knows the store has it
 * (rgpu_store_chunk_has). A new chunk is compressed with zstd (kept raw when that does not
 * shrink it; an all-zero chunk is a flag) and written; writes are batched into few
 * transactions. 0, RGPU_EINVAL, RGPU_ENOTFOUND (data NULL and the chunk not stored), RGPU_EIO.
 */
int rgpu_ckpt_chunk(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *data,
		    size_t len);

/*
 * rgpu_ckpt_commit() - write the chunks still pending and, in one transaction, the manifest:
 * the list of every chunk named (in order) and the caller's metadata bytes (the job, its
 * state log, its allocations: opaque here). *id is the new checkpoint's id (increasing).
 * Frees c. 0, or an error with nothing committed.
 */
int rgpu_ckpt_commit(struct rgpu_ckpt *c, const void *meta, size_t meta_len, uint64_t *id);
void rgpu_ckpt_abort(struct rgpu_ckpt *c);

/*
 * rgpu_store_manifest() - checkpoint id's metadata (malloc'd, *meta_len bytes) and chunk list
 * (malloc'd, *n hashes of RGPU_HASH_LEN bytes); either out pointer may be NULL. 0,
 * RGPU_ENOTFOUND, RGPU_ECORRUPT.
 */
int rgpu_store_manifest(struct rgpu_store *s, uint64_t id, void **meta, size_t *meta_len,
			uint8_t **hashes, size_t *n);

/* rgpu_store_list() - the ids of every checkpoint, ascending (malloc'd). 0 or an error. */
int rgpu_store_list(struct rgpu_store *s, uint64_t **ids, size_t *n);

/* rgpu_store_remove() - delete checkpoint id's manifest (its chunks go at the next gc). */
int rgpu_store_remove(struct rgpu_store *s, uint64_t id);

/* rgpu_store_gc() - delete every chunk no manifest names; *freed chunks deleted. Run it with
 * no checkpoint being written. 0 or an error. */
int rgpu_store_gc(struct rgpu_store *s, uint64_t *freed);

int rgpu_store_stats(struct rgpu_store *s, struct rgpu_store_stats *st);

/*
 * The readers of stored values, on bytes as they come out of the environment (and the fuzz
 * harness tests/fuzz/fuzz_store.c): a chunk value's bytes into buf (cap bytes; *len set),
 * without the hash check; a manifest's chunk list and metadata, pointing into val. Each
 * returns 0, RGPU_ECORRUPT with *why saying what is wrong, or RGPU_ETOOBIG (cap too small).
 */
int rgpu_store_chunk_decode(const void *val, size_t vlen, void *buf, size_t cap, size_t *len,
			    const char **why);
int rgpu_store_manifest_decode(const void *val, size_t vlen, const uint8_t **hashes, size_t *n,
			       const uint8_t **meta, size_t *meta_len);

#endif
