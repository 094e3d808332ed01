/*
 * The checkpoint store (design.md §7, issue 9): one LMDB environment per server holding device
 * memory as chunks named by their chunk hash (rgpu/hash.h), each stored once, and checkpoints
 * as manifests. A checkpoint is written chunk by chunk (chunks already in the store cost
 * nothing) and exists only once its manifest is committed, in one write transaction; a crash
 * before that leaves chunks no manifest names, which rgpu_store_gc() removes.
 *
 * Lifecycle: rgpu_store_open / _close; rgpu_ckpt_begin, then either rgpu_ckpt_chunk... (the
 * manifest's list grows chunk by chunk) or rgpu_ckpt_set_list + rgpu_ckpt_put... (the list is
 * known first: a checkpoint hashes device memory before it copies any), then rgpu_ckpt_commit
 * or rgpu_ckpt_abort (both free the checkpoint object). One environment may be open in several
 * processes (LMDB's locking); a checkpoint being written holds a shared lock that
 * rgpu_store_gc() waits for, so gc never deletes a chunk a checkpoint counts on.
 */
#ifndef RGPU_STORE_H
#define RGPU_STORE_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "rgpu/hash.h"

struct rgpu_store;
struct rgpu_ckpt;

/* a chunk's stored value: a 16-byte header, then at most RGPU_CHUNK_MAX bytes */
#define RGPU_CHUNK_HDR 16u
#define RGPU_CHUNK_VALUE_MAX (RGPU_CHUNK_HDR + RGPU_CHUNK_MAX)

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

/*
 * Other tables in the same environment (the server's module-image cache, server/modcache.c):
 * one LMDB environment per server holds everything, and may be open only once per process, so
 * the other tables go through the store's handle.
 *
 * rgpu_store_table() - open (creating) the named database; flags as mdb_dbi_open's. Before any
 *   other thread uses the store: an existing one opens in a read-only transaction, and
 *   mdb_dbi_open there updates the environment's handles without the writer lock.
 * rgpu_store_read() - a read-only transaction (mdb_txn_abort it when done).
 * rgpu_store_write() - run fn in a write transaction and commit it; when the map is full it is
 *   grown and fn runs again in a new transaction, so fn must only write and be repeatable. fn
 *   returns 0, an LMDB code, or a negative RGPU_E* (the transaction is then aborted and that
 *   code returned). need: about how many bytes fn writes, taken as one value (the disk room
 *   taken first: RGPU_ENOSPC when there is none, rather than a SIGBUS in LMDB's map). With
 *   durable, the environment is on disk when it returns (the store's writes do not wait for
 *   their meta page otherwise). what names the work in errors.
 * All three return 0 or a negative RGPU_E*, the LMDB error said at err.
 */
int rgpu_store_table(struct rgpu_store *s, const char *name, unsigned flags, MDB_dbi *dbi);
int rgpu_store_read(struct rgpu_store *s, MDB_txn **t);
int rgpu_store_write(struct rgpu_store *s, const char *what, int (*fn)(MDB_txn *t, void *arg),
		     void *arg, size_t need, int durable);

/* rgpu_store_chunk_has() - 1 if the chunk is stored, 0 if not, or a negative RGPU_E*. */
int rgpu_store_chunk_has(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN]);

/*
 * rgpu_store_chunk_get() - the chunk's bytes into buf (cap bytes), *len set, after checking
 * its header and that its bytes hash to its name. 0, RGPU_ENOTFOUND, RGPU_ECORRUPT (said at
 * warn, naming the chunk and what is wrong), RGPU_ETOOBIG (cap too small).
 */
int rgpu_store_chunk_get(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN], void *buf,
			 size_t cap, size_t *len);

/*
 * rgpu_store_chunk_value() - the chunk's stored value as it is (header and payload, for sending
 * to another store) into buf (RGPU_CHUNK_VALUE_MAX bytes), *vlen set. Nothing is checked.
 * 0, RGPU_ENOTFOUND, RGPU_ETOOBIG (a value longer than a chunk's can be: damaged).
 */
int rgpu_store_chunk_value(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN], void *buf,
			   size_t *vlen);

/*
 * Reading many chunks in place (a restore): one read transaction, values pointing into the
 * map until rgpu_store_reader_end(). One reader per thread. _get returns 0, RGPU_ENOTFOUND
 * or RGPU_EIO.
 */
struct rgpu_store_reader;
int rgpu_store_reader_begin(struct rgpu_store *s, struct rgpu_store_reader **out);
int rgpu_store_reader_get(struct rgpu_store_reader *r, const uint8_t hash[RGPU_HASH_LEN],
			  const void **val, size_t *vlen);
void rgpu_store_reader_end(struct rgpu_store_reader *r);

/*
 * Encoding a chunk as the store keeps it, on any thread with an encoder of its own: zstd (fast
 * level), raw when that does not shrink it, a flag when it is all zero. val must hold
 * RGPU_CHUNK_VALUE_MAX bytes; len is at most RGPU_CHUNK_MAX. Returns 0 or RGPU_EINVAL.
 */
struct rgpu_chunk_enc;
int rgpu_chunk_enc_new(struct rgpu_chunk_enc **out);
void rgpu_chunk_enc_free(struct rgpu_chunk_enc *e);
int rgpu_chunk_encode(struct rgpu_chunk_enc *e, const void *data, size_t len, uint8_t *val,
		      size_t *vlen);

/*
 * rgpu_chunk_value_header() - the header of a stored value describes exactly its bytes: its
 * decoded length into *len. 0, or RGPU_ECORRUPT with *why (a cheap check before the decoding
 * and hashing that find the rest).
 */
int rgpu_chunk_value_header(const void *val, size_t vlen, size_t *len, const char **why);

/* rgpu_chunk_zero_value() - the value of len zero bytes (its header alone) into val */
void rgpu_chunk_zero_value(size_t len, uint8_t *val, size_t *vlen);

/*
 * rgpu_chunk_value_check() - does the stored value decode to bytes whose chunk hash is hash?
 * buf receives them (RGPU_CHUNK_MAX bytes), *len their length. Returns 0, or RGPU_ECORRUPT with
 * *why saying what is wrong ("no chunk header", "bytes whose hash is not its name", ...).
 */
int rgpu_chunk_value_check(const void *val, size_t vlen, const uint8_t hash[RGPU_HASH_LEN],
			   void *buf, size_t *len, const char **why);

/* rgpu_ckpt_begin() - start a checkpoint (its shared lock against gc). 0, RGPU_ENOMEM, RGPU_ESYS. */
int rgpu_ckpt_begin(struct rgpu_store *s, struct rgpu_ckpt **out);

/*
 * rgpu_ckpt_chunk() - the checkpoint names chunk `hash` (the chunk hash of [data, data+len),
 * len at most RGPU_CHUNK_MAX) next in its list. data may be NULL when the caller knows the store
 * has it (rgpu_store_chunk_has). A new chunk is encoded (rgpu_chunk_encode) and written; writes
 * are batched into few transactions. 0, RGPU_EINVAL, RGPU_ENOTFOUND (data NULL and the chunk
 * not stored), RGPU_EIO.
 */
int rgpu_ckpt_chunk(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *data,
		    size_t len);

/*
 * rgpu_ckpt_set_list() - the manifest's whole chunk list (n hashes, copied), replacing what
 * rgpu_ckpt_chunk named. rgpu_ckpt_missing() then sets bit i of bitmap ((n + 7) / 8 bytes,
 * LSB first) for each chunk the store lacks, once per distinct hash (its first place in the
 * list), and *nmissing to their count: the chunks to rgpu_ckpt_put(). 0, RGPU_ENOMEM, RGPU_EIO.
 */
int rgpu_ckpt_set_list(struct rgpu_ckpt *c, const uint8_t *hashes, size_t n);
/*
 * rgpu_ckpt_transient() - commit c without its final sync to disk (a live migration's round,
 * removed once sent: a crash may lose it, and nothing needs it after one). Still whole or not at
 * all: LMDB's transaction is.
 */
void rgpu_ckpt_transient(struct rgpu_ckpt *c);
int rgpu_ckpt_missing(struct rgpu_ckpt *c, uint8_t *bitmap, size_t *nmissing);

/*
 * rgpu_ckpt_put() - write the encoded value (rgpu_chunk_encode's, or another store's) of chunk
 * hash; the value is copied. Thread-safe: several encoders may put at once. The caller vouches
 * that the value is hash's (a value from elsewhere: rgpu_chunk_value_check first). 0,
 * RGPU_EINVAL, RGPU_ENOMEM, RGPU_EIO, RGPU_ENOSPC.
 */
int rgpu_ckpt_put(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *val,
		  size_t vlen);

/* What this checkpoint added to the store: chunks, their bytes before and after encoding. */
void rgpu_ckpt_added(struct rgpu_ckpt *c, uint64_t *chunks, uint64_t *bytes, uint64_t *stored);

/*
 * rgpu_ckpt_commit() - write the chunks still pending, make them durable, and, in one
 * transaction, the manifest: the chunk list and the caller's metadata bytes. Refused with
 * RGPU_ENOTFOUND if a chunk the list names is in neither the store nor this checkpoint's
 * writes. *id is the new checkpoint's id (increasing). Frees c. 0, or an error with nothing
 * committed.
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

/*
 * rgpu_store_find() - the id of a checkpoint whose manifest holds exactly these chunks and
 * metadata (a checkpoint pushed back into the store it came from), in *id. 1 found, 0 not, or
 * a negative RGPU_E*.
 */
int rgpu_store_find(struct rgpu_store *s, const uint8_t *hashes, size_t n, const void *meta,
		    size_t meta_len, uint64_t *id);

/* rgpu_store_list() - the ids of every checkpoint, ascending (malloc'd). 0 or an error. */
int rgpu_store_list(struct rgpu_store *s, uint64_t **ids, size_t *n);

/* rgpu_store_remove() - delete checkpoint id's manifest (its chunks go at the next gc). */
int rgpu_store_remove(struct rgpu_store *s, uint64_t id);

/*
 * rgpu_store_gc() - delete every chunk no manifest names; *freed chunks deleted, *bytes their
 * stored bytes (either may be NULL). Waits for the checkpoints being written anywhere to end.
 * 0 or an error (RGPU_ECORRUPT: a damaged manifest, nothing deleted).
 */
int rgpu_store_gc(struct rgpu_store *s, uint64_t *freed);
int rgpu_store_gc_bytes(struct rgpu_store *s, uint64_t *freed, uint64_t *bytes);

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

/* rgpu_store_chunk_is_zero() - a stored value is the all-zero flag (its length in *len) */
int rgpu_store_chunk_is_zero(const void *val, size_t vlen, size_t *len);

#endif
