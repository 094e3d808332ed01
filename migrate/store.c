/*
 * The checkpoint store (rgpu/store.h; docs/formats.md, "The store"). One LMDB environment per
 * server; the store's own three named databases (the module cache adds its five through
 * rgpu_store_table/_write, server/modcache.c):
 *   chunks     chunk hash (32 bytes) -> chunk value: a 16-byte header, then the payload
 *   manifests  checkpoint id (8 bytes big-endian, so LMDB's order is the ids') -> manifest
 *   meta       "format" -> "RGST" + version; "next_id" -> the next checkpoint id; "gc_freed" ->
 *              the chunks the last gc deleted
 * New chunks are written in batches of their own transactions, each waiting for its data pages
 * but not its meta page (MDB_NOMETASYNC);
 * a manifest is written in one transaction after the chunks it names are on disk, and is on
 * disk itself before rgpu_ckpt_commit() returns: a checkpoint exists whole or not at all, even
 * across a crash of the machine. When the map is full the environment doubles it and the
 * transaction runs again. Beside the environment, the file "gc.lock": every checkpoint being
 * written holds it shared, and gc takes it exclusive, so gc never deletes a chunk that a
 * checkpoint found in the store and named without writing it again.
 *
 * This file never trusts a stored byte: every value is checked (header, lengths, the hash of
 * what it decodes to) where it is read, and a damaged one is named in the error.
 */
#define LOG_PREFIX "store: "
#include <errno.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/store.h"
#include "rgpu/util.h"

#define STORE_MAGIC "RGST"
#define STORE_VERSION 1u
#define CHUNK_MAGIC 0x4b434752u    /* "RGCK" */
#define MANIFEST_MAGIC 0x464d4752u /* "RGMF" */
#define CHUNK_VERSION 1u
#define MANIFEST_VERSION 2u /* 2: a SHA-256 of the rest at its end */
#define MANIFEST_TAIL RGPU_HASH_LEN
#define CHUNK_HDR RGPU_CHUNK_HDR
#define MAP_INITIAL (4ull << 30) /* a sparse file: only what is written takes room */
#define BATCH_BYTES (64u << 20)
#define BATCH_BUF (BATCH_BYTES + RGPU_CHUNK_VALUE_MAX)
#define ZSTD_LEVEL 1

enum chunk_kind { KIND_RAW = 0, KIND_ZSTD = 1, KIND_ZERO = 2 };

struct rgpu_store {
	MDB_env *env;
	MDB_dbi chunks, manifests, meta;
	uint64_t map_size;
	pthread_mutex_t grow_lock; /* the map is grown by one thread, with no transaction open */
	char lock_path[4200];      /* gc.lock */
	size_t psize;              /* LMDB's page size */
	int prefault;              /* populate the pages a batch will take first, in parallel */
	pthread_rwlock_t map_lock; /* populating (read) vs LMDB moving its map (write) */
};

struct pending {
	uint8_t hash[RGPU_HASH_LEN];
	uint8_t *val;
	size_t len;
};

struct rgpu_ckpt {
	struct rgpu_store *s;
	uint8_t *hashes; /* every chunk named, in order */
	size_t n, cap;
	/*
	 * The pending batch, which puts from several threads fill under lock; a full one is
	 * taken out and written under flush_lock, so the others fill the next one meanwhile.
	 */
	pthread_mutex_t lock;
	pthread_mutex_t flush_lock;
	struct batch {
		struct pending *v;
		size_t n, cap, bytes;
		uint8_t *buf; /* the values, one after another (BATCH_BUF bytes) */
	} batch;
	uint8_t *spare;   /* a batch buffer written out, for the next batch: no new pages */
	uint64_t ns_prefault, ns_txn, ns_sync; /* where the writing went (logged at debug) */
	/* the pages of the next batch are populated while the encoders fill it */
	pthread_t ahead;
	pthread_mutex_t ahead_lock;
	pthread_cond_t ahead_cond;
	size_t ahead_want; /* bytes to populate past the last page (0: nothing to do) */
	int ahead_run, ahead_quit;
	struct rgpu_chunk_enc *enc; /* rgpu_ckpt_chunk's */
	uint8_t *val;               /* its value buffer */
	uint64_t added, added_bytes, added_stored;
	int lock_fd; /* gc.lock, held shared */
	int failed;  /* a write failed (its RGPU_E* code): only abort is left */
	int transient; /* rgpu_ckpt_transient(): committed without the final sync */
};

struct rgpu_chunk_enc {
	ZSTD_CCtx *zc;
};

static int mdb_err(const char *what, int rc)
{
	pr_err("%s: %s", what, mdb_strerror(rc));
	return rc == ENOMEM ? RGPU_ENOMEM : rc == MDB_MAP_FULL ? RGPU_ENOSPC : RGPU_EIO;
}

/* Double the map from `seen` (the size the failed transaction ran under). */
static int grow(struct rgpu_store *s, uint64_t seen)
{
	int rc = 0;

	pthread_mutex_lock(&s->grow_lock);
	if (s->map_size == seen) { /* not grown by another thread meanwhile */
		pthread_rwlock_wrlock(&s->map_lock);
		rc = mdb_env_set_mapsize(s->env, s->map_size * 2);
		pthread_rwlock_unlock(&s->map_lock);
		if (!rc) {
			s->map_size *= 2;
			pr_info("map size now %llu MiB", (unsigned long long)(s->map_size >> 20));
		}
	}
	pthread_mutex_unlock(&s->grow_lock);
	return rc ? mdb_err("growing the map", rc) : 0;
}

/*
 * Begin a transaction; when another process grew the map meanwhile (MDB_MAP_RESIZED), take
 * its size and begin again.
 */
static int txn_begin(struct rgpu_store *s, unsigned flags, MDB_txn **t)
{
	int rc = mdb_txn_begin(s->env, NULL, flags, t);

	if (rc == MDB_MAP_RESIZED) {
		MDB_envinfo info;
		pthread_mutex_lock(&s->grow_lock);
		pthread_rwlock_wrlock(&s->map_lock);
		rc = mdb_env_set_mapsize(s->env, 0);
		pthread_rwlock_unlock(&s->map_lock);
		mdb_env_info(s->env, &info);
		s->map_size = info.me_mapsize;
		pthread_mutex_unlock(&s->grow_lock);
		if (!rc)
			rc = mdb_txn_begin(s->env, NULL, flags, t);
	}
	return rc;
}

/* RGPU_E* codes are small negative numbers; LMDB's own (MDB_*) are below -30000 */
static int is_rgpu_err(int r)
{
	return r < 0 && r > -1000;
}

/*
 * The room one value of len bytes takes in LMDB: whole overflow pages past half a page, else
 * its share of leaf pages, which random keys leave about half full.
 */
static size_t value_room(size_t len, size_t psize)
{
	if (len + 64 > psize / 2)
		return (len + 64 + psize - 1) / psize * psize;
	return 2 * (len + 64);
}

/* mdb_reader_list's lines ("pid thread txnid", "-" for none): the oldest snapshot read */
static int reader_line(const char *msg, void *ctx)
{
	uint64_t *oldest = ctx;
	unsigned long long tid, txnid;
	int pid;

	if (sscanf(msg, "%d %llx %llu", &pid, &tid, &txnid) == 3 && txnid < *oldest)
		*oldest = txnid;
	return 0;
}

/*
 * The pages on LMDB's free list that the next write transaction may take again: those freed
 * by a transaction older than every snapshot still read, and than the last commit (whose freed
 * pages the other meta page still names). Readers of processes that are gone are cleared
 * first (mdb_reader_check): a helper that died reading would hold them all back. LMDB opens no
 * cursor on the free list in a write transaction: a read-only one of this thread's (MDB_NOTLS
 * allows it beside the write transaction) sees the same last commit.
 *
 * A value of several pages takes them in one run (LMDB's overflow pages), so with run pages
 * per value only whole multiples of run in each run of adjacent free pages count: a fragmented
 * free list would otherwise be counted as room the values cannot use, and written past the
 * reservation (a SIGBUS on a full disk). Runs are looked for within each transaction's list
 * (what one gc or removal freed together), not across them: an underestimate.
 */
static uint64_t free_pages(struct rgpu_store *s, uint64_t run)
{
	MDB_envinfo info;
	MDB_txn *r;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t n = 0, oldest;
	int dead;

	mdb_reader_check(s->env, &dead);
	if (mdb_env_info(s->env, &info))
		return 0;
	oldest = info.me_last_txnid;
	mdb_reader_list(s->env, reader_line, &oldest);
	if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &r))
		return 0;
	if (!mdb_cursor_open(r, 0 /* FREE_DBI */, &cur)) {
		for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
			if (k.mv_size != sizeof(size_t) || *(const size_t *)k.mv_data >= oldest ||
			    v.mv_size < sizeof(size_t))
				continue;
			/* an ID list: its count, then the page numbers in order */
			const size_t *id = v.mv_data;
			size_t cnt = MIN(id[0], v.mv_size / sizeof(size_t) - 1);
			/* len: the pages of the run that ends at id[i] so far */
			for (size_t i = 1, len = 1; i <= cnt; i++, len++)
				if (i == cnt || (id[i + 1] != id[i] + 1 && id[i + 1] + 1 != id[i])) {
					n += len / run * run;
					len = 0;
				}
		}
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(r);
	return n;
}

/*
 * Take the disk blocks a write transaction will fill before it writes them: room for `need`
 * bytes (value_room() of what it writes), an eighth more and RESERVE_MIN for the tree's own
 * pages. LMDB's file is sparse and written through its map (MDB_WRITEMAP), where a full disk is
 * not an error but a SIGBUS, which would end the job's worker in the middle of a checkpoint.
 * With the blocks allocated (fallocate, past the data's end) the transaction cannot run out of
 * room; when the disk has too few, the pages on LMDB's free list (blocks it has already, which it
 * reuses first) count too, in runs a value of unit bytes fits (free_pages()), and only the rest
 * must be new; without enough the transaction fails here, whole. Called first in a write
 * transaction: its writer lock keeps other processes from moving the end of the data
 * meanwhile. A file system without fallocate: the transaction
 * runs as it would have anyway. Returns 0 or RGPU_ENOSPC.
 */
#define RESERVE_MIN (1u << 20)
static int reserve(struct rgpu_store *s, const char *what, size_t need, size_t unit)
{
	MDB_envinfo info;
	mdb_filehandle_t fd;
	uint64_t start, len = need + need / 8 + RESERVE_MIN, reuse;
	int e;

	if (mdb_env_info(s->env, &info) || mdb_env_get_fd(s->env, &fd))
		return 0;
	start = (info.me_last_pgno + 1) * s->psize;
	if (start >= info.me_mapsize)
		return 0; /* the map is full: the transaction fails so, and the map grows */
	len = MIN(len, info.me_mapsize - start);
	if (fallocate(fd, 0, (off_t)start, (off_t)len) == 0)
		return 0;
	e = errno;
	if (e == ENOSPC || e == EFBIG || e == EDQUOT) {
		/*
		 * unit: the room of the largest value, whose pages must be one run. Less one run:
		 * a page the tree takes first may split one that was counted.
		 */
		uint64_t run = MAX((unit + s->psize - 1) / s->psize, 1), pages = free_pages(s, run);
		reuse = (run > 1 ? pages - MIN(pages, run) : pages) * s->psize;
		if (reuse >= len || (reuse && fallocate(fd, 0, (off_t)start, (off_t)(len - reuse)) == 0))
			return 0;
		/*
		 * A failed fallocate may keep the blocks it took, or not count them free again at
		 * once (tmpfs): past the data's end nothing uses them. They go back to the disk,
		 * then the smaller try once more, and back again when it fails: the disk is left
		 * with the room it had.
		 */
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start, (off_t)len);
		if (reuse && fallocate(fd, 0, (off_t)start, (off_t)(len - reuse)) == 0)
			return 0;
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start, (off_t)len);
		struct statvfs sv;
		uint64_t avail = fstatvfs(fd, &sv) ? 0 : (uint64_t)sv.f_bavail * sv.f_frsize;
		pr_err("%s: the checkpoint store's disk has no room for %llu more bytes (%.*s; "
		       "%llu bytes free inside it, %llu on the disk): %s",
		       what, (unsigned long long)len,
		       (int)(strlen(s->lock_path) - strlen("/gc.lock")), s->lock_path,
		       (unsigned long long)reuse, (unsigned long long)avail, strerror(e));
		return RGPU_ENOSPC;
	}
	if (e != EOPNOTSUPP && e != ENOSYS)
		pr_warn_once("cannot reserve room in the store's file (%s): a full disk may end "
			     "the process that writes it",
			     strerror(e));
	return 0;
}

/*
 * Run fn in a write transaction and commit it; when the map is full, grow it and run fn again
 * in a new transaction (fn must therefore only write, and be repeatable). need: about how many
 * bytes fn writes, unit: the room of the largest value among them (reserve()). what names the
 * work in errors. Returns 0, fn's error, or the commit's.
 */
static int write_txn(struct rgpu_store *s, const char *what, int (*fn)(MDB_txn *t, void *arg),
		     void *arg, size_t need, size_t unit)
{
	for (;;) {
		uint64_t seen = s->map_size;
		MDB_txn *t;
		int rc = txn_begin(s, 0, &t), ret;

		if (rc)
			return mdb_err(what, rc);
		ret = reserve(s, what, need, unit);
		ret = ret ? ret : fn(t, arg);
		if (!is_rgpu_err(ret)) { /* 0, or an LMDB code (errno values and MDB_* codes) */
			rc = ret;
			ret = 0;
		}
		if (ret) {
			mdb_txn_abort(t);
			return ret;
		}
		if (!rc)
			rc = mdb_txn_commit(t);
		else
			mdb_txn_abort(t);
		if (rc == MDB_MAP_FULL) {
			if ((ret = grow(s, seen)))
				return ret;
			continue;
		}
		return rc ? mdb_err(what, rc) : 0;
	}
}

/* In a read-only transaction, a missing record is MDB_NOTFOUND: the store needs writing. */
static int check_format(struct rgpu_store *s, MDB_txn *t, int rdonly)
{
	MDB_val k = {6, "format"}, v;
	uint8_t want[8];
	int rc;

	memcpy(want, STORE_MAGIC, 4);
	wr_le32(want + 4, STORE_VERSION);
	rc = mdb_get(t, s->meta, &k, &v);
	if (rc == MDB_NOTFOUND && rdonly)
		return rc;
	if (rc == MDB_NOTFOUND) {
		v.mv_size = sizeof(want);
		v.mv_data = want;
		rc = mdb_put(t, s->meta, &k, &v, 0);
		return rc ? mdb_err("writing the format", rc) : 0;
	}
	if (rc)
		return mdb_err("reading the format", rc);
	if (v.mv_size != sizeof(want) || memcmp(v.mv_data, want, 4)) {
		pr_err("not a checkpoint store (no RGST format record)");
		return RGPU_ECORRUPT;
	}
	if (rd_le32((const uint8_t *)v.mv_data + 4) != STORE_VERSION) {
		pr_err("a checkpoint store of format %u, this rgpu reads %u",
		       rd_le32((const uint8_t *)v.mv_data + 4), STORE_VERSION);
		return RGPU_EVERSION;
	}
	return 0;
}

/* The store's three databases, with flags (MDB_CREATE: made where missing). */
static int open_dbs(struct rgpu_store *s, MDB_txn *t, unsigned flags)
{
	int rc;

	if ((rc = mdb_dbi_open(t, "chunks", flags, &s->chunks)) ||
	    (rc = mdb_dbi_open(t, "manifests", flags, &s->manifests)))
		return rc;
	return mdb_dbi_open(t, "meta", flags, &s->meta);
}

int rgpu_store_open(const char *dir, struct rgpu_store **out)
{
	struct rgpu_store *s = calloc(1, sizeof(*s));
	const char *e = getenv("RGPU_STORE_MAP_BYTES");
	uint64_t initial = MAP_INITIAL;
	MDB_envinfo info;
	MDB_txn *t = NULL;
	int rc, ret;

	if (!s)
		return RGPU_ENOMEM;
	pthread_mutex_init(&s->grow_lock, NULL);
	pthread_rwlock_init(&s->map_lock, NULL);
	snprintf(s->lock_path, sizeof(s->lock_path), "%s/gc.lock", dir);
	if (mkdir(dir, 0750) && errno != EEXIST) {
		pr_err("cannot create %s: %s", dir, strerror(errno));
		free(s);
		return RGPU_ESYS;
	}
	if (e && *e) /* tests: a small first map, to see it grow */
		initial = strtoull(e, NULL, 0);
	/*
	 * MDB_NOMETASYNC: every commit waits for its data pages, then writes its meta page without
	 * waiting, so a crash may undo the last transaction but never leaves a meta page naming
	 * pages that did not reach the disk. MDB_NOSYNC with MDB_WRITEMAP would leave the order to
	 * the kernel's writeback: a crash could then corrupt the whole store (lmdb.h).
	 */
	if ((rc = mdb_env_create(&s->env)) || (rc = mdb_env_set_maxdbs(s->env, 16)) ||
	    (rc = mdb_env_set_mapsize(s->env, initial)) ||
	    (rc = mdb_env_open(s->env, dir, MDB_NOTLS | MDB_NOMETASYNC | MDB_WRITEMAP, 0640))) {
		ret = mdb_err(dir, rc);
		goto out_env;
	}
	/* a store made bigger by another process opens with its size */
	mdb_env_info(s->env, &info);
	s->map_size = MAX((uint64_t)info.me_mapsize, initial);
	{
		MDB_stat ms;
		const char *pf = getenv("RGPU_STORE_PREFAULT");
		s->psize = mdb_env_stat(s->env, &ms) == 0 ? ms.ms_psize : 4096;
		s->prefault = !(pf && !strcmp(pf, "0"));
	}
	/*
	 * A store made already opens in a read-only transaction (committed, which keeps the
	 * handles): no wait for the writer lock, which another process's checkpoint holds across
	 * each batch and its sync. A new store is made in a write transaction.
	 */
	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		goto made;
	if (!(rc = open_dbs(s, t, 0)) && (rc = check_format(s, t, 1)) != MDB_NOTFOUND) {
		if ((ret = rc))
			goto out_txn;
		if ((rc = mdb_txn_commit(t))) {
			ret = mdb_err("opening the databases", rc);
			goto out_env;
		}
		*out = s;
		return 0;
	}
	mdb_txn_abort(t);
	t = NULL;
made:
	if ((rc = txn_begin(s, 0, &t)) || (rc = open_dbs(s, t, MDB_CREATE))) {
		ret = mdb_err("opening the databases", rc);
		goto out_txn;
	}
	ret = check_format(s, t, 0);
	if (ret)
		goto out_txn;
	rc = mdb_txn_commit(t);
	t = NULL;
	if (!rc)
		rc = mdb_env_sync(s->env, 1);
	if (rc) {
		ret = mdb_err("creating the store", rc);
		goto out_env;
	}
	*out = s;
	return 0;
out_txn:
	mdb_txn_abort(t);
out_env:
	mdb_env_close(s->env);
	free(s);
	return ret;
}

void rgpu_store_close(struct rgpu_store *s)
{
	if (!s)
		return;
	mdb_env_close(s->env);
	pthread_mutex_destroy(&s->grow_lock);
	pthread_rwlock_destroy(&s->map_lock);
	free(s);
}

int rgpu_store_table(struct rgpu_store *s, const char *name, unsigned flags, MDB_dbi *dbi)
{
	MDB_txn *t;
	/* one that exists opens without the writer lock (rgpu_store_open) */
	int rc = txn_begin(s, MDB_RDONLY, &t);

	if (!rc) {
		if (!(rc = mdb_dbi_open(t, name, flags & ~(unsigned)MDB_CREATE, dbi)))
			return (rc = mdb_txn_commit(t)) ? mdb_err(name, rc) : 0;
		mdb_txn_abort(t);
		if (rc != MDB_NOTFOUND || !(flags & MDB_CREATE))
			return mdb_err(name, rc);
	}
	rc = txn_begin(s, 0, &t);

	if (!rc && (rc = mdb_dbi_open(t, name, flags, dbi)))
		mdb_txn_abort(t);
	else if (!rc)
		rc = mdb_txn_commit(t);
	return rc ? mdb_err(name, rc) : 0;
}

int rgpu_store_read(struct rgpu_store *s, MDB_txn **t)
{
	int rc = txn_begin(s, MDB_RDONLY, t);
	return rc ? mdb_err("read transaction", rc) : 0;
}

int rgpu_store_write(struct rgpu_store *s, const char *what, int (*fn)(MDB_txn *t, void *arg),
		     void *arg, size_t need, int durable)
{
	size_t room = need ? value_room(need, s->psize) : 0;
	int ret = write_txn(s, what, fn, arg, room, room), rc;

	if (!ret && durable && (rc = mdb_env_sync(s->env, 1)))
		ret = mdb_err(what, rc);
	return ret;
}

int rgpu_store_chunk_has(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN])
{
	MDB_val k = {RGPU_HASH_LEN, (void *)hash}, v;
	MDB_txn *t;
	int rc;

	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	rc = mdb_get(t, s->chunks, &k, &v);
	mdb_txn_abort(t);
	if (rc && rc != MDB_NOTFOUND)
		return mdb_err("looking a chunk up", rc);
	return rc == 0;
}

static void hex6(const uint8_t *h, char *out)
{
	for (int i = 0; i < 6; i++)
		sprintf(out + 2 * i, "%02x", h[i]);
}

int rgpu_store_chunk_decode(const void *val, size_t vlen, void *buf, size_t cap, size_t *len,
			    const char **why)
{
	const uint8_t *p = val;
	size_t ulen;
	int ret = rgpu_chunk_value_header(val, vlen, &ulen, why);

	if (ret)
		return ret;
	if (ulen > cap)
		return RGPU_ETOOBIG;
	if (p[6] == KIND_ZERO) {
		memset(buf, 0, ulen);
	} else if (p[6] == KIND_RAW) {
		memcpy(buf, p + CHUNK_HDR, ulen);
	} else if (ZSTD_decompress(buf, ulen, p + CHUNK_HDR, vlen - CHUNK_HDR) != ulen) {
		*why = "a payload that does not decompress to its length";
		return RGPU_ECORRUPT;
	}
	*len = ulen;
	return 0;
}

int rgpu_store_chunk_is_zero(const void *val, size_t vlen, size_t *len)
{
	const uint8_t *p = val;

	if (vlen != CHUNK_HDR || rd_le32(p) != CHUNK_MAGIC || p[6] != KIND_ZERO ||
	    rd_le32(p + 12) != 0 || rd_le32(p + 8) > RGPU_CHUNK_MAX)
		return 0;
	*len = rd_le32(p + 8);
	return 1;
}

int rgpu_chunk_value_check(const void *val, size_t vlen, const uint8_t hash[RGPU_HASH_LEN],
			   void *buf, size_t *len, const char **why)
{
	uint8_t got[RGPU_HASH_LEN];
	size_t n = 0;
	int ret = rgpu_store_chunk_decode(val, vlen, buf, RGPU_CHUNK_MAX, &n, why);

	if (ret == RGPU_ETOOBIG) {
		*why = "a length beyond a chunk's";
		return RGPU_ECORRUPT;
	}
	if (ret)
		return ret;
	rgpu_chunk_hash(buf, n, got);
	if (memcmp(got, hash, RGPU_HASH_LEN)) {
		*why = "bytes whose hash is not its name";
		return RGPU_ECORRUPT;
	}
	*len = n;
	return 0;
}

int rgpu_store_chunk_get(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN], void *buf,
			 size_t cap, size_t *len)
{
	MDB_val k = {RGPU_HASH_LEN, (void *)hash}, v;
	uint8_t got[RGPU_HASH_LEN];
	const char *why = NULL;
	size_t ulen = 0;
	char name[16];
	MDB_txn *t;
	int rc, ret;

	hex6(hash, name);
	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	rc = mdb_get(t, s->chunks, &k, &v);
	if (rc) {
		mdb_txn_abort(t);
		return rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : mdb_err("reading a chunk", rc);
	}
	ret = rgpu_store_chunk_decode(v.mv_data, v.mv_size, buf, cap, &ulen, &why);
	mdb_txn_abort(t);
	if (!ret) {
		rgpu_chunk_hash(buf, ulen, got);
		if (memcmp(got, hash, RGPU_HASH_LEN)) {
			why = "bytes whose hash is not its name";
			ret = RGPU_ECORRUPT;
		}
	}
	if (why) {
		pr_warn("chunk %s... is damaged: %s", name, why);
		return RGPU_ECORRUPT;
	}
	if (!ret)
		*len = ulen;
	return ret;
}

int rgpu_store_chunk_value(struct rgpu_store *s, const uint8_t hash[RGPU_HASH_LEN], void *buf,
			   size_t *vlen)
{
	MDB_val k = {RGPU_HASH_LEN, (void *)hash}, v;
	MDB_txn *t;
	int rc, ret = 0;

	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	rc = mdb_get(t, s->chunks, &k, &v);
	if (rc)
		ret = rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : mdb_err("reading a chunk", rc);
	else if (v.mv_size > RGPU_CHUNK_VALUE_MAX)
		ret = RGPU_ETOOBIG;
	else
		memcpy(buf, v.mv_data, *vlen = v.mv_size);
	mdb_txn_abort(t);
	return ret;
}

struct rgpu_store_reader {
	struct rgpu_store *s;
	MDB_txn *t;
};

int rgpu_store_reader_begin(struct rgpu_store *s, struct rgpu_store_reader **out)
{
	struct rgpu_store_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return RGPU_ENOMEM;
	r->s = s;
	if ((rc = txn_begin(s, MDB_RDONLY, &r->t))) {
		free(r);
		return mdb_err("read transaction", rc);
	}
	*out = r;
	return 0;
}

int rgpu_store_reader_get(struct rgpu_store_reader *r, const uint8_t hash[RGPU_HASH_LEN],
			  const void **val, size_t *vlen)
{
	MDB_val k = {RGPU_HASH_LEN, (void *)hash}, v;
	int rc = mdb_get(r->t, r->s->chunks, &k, &v);

	if (rc)
		return rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : mdb_err("reading a chunk", rc);
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

void rgpu_store_reader_end(struct rgpu_store_reader *r)
{
	if (!r)
		return;
	mdb_txn_abort(r->t);
	free(r);
}

/* ---- encoding ------------------------------------------------------------------------------ */

int rgpu_chunk_enc_new(struct rgpu_chunk_enc **out)
{
	struct rgpu_chunk_enc *e = calloc(1, sizeof(*e));

	if (!e || !(e->zc = ZSTD_createCCtx())) {
		free(e);
		return RGPU_ENOMEM;
	}
	*out = e;
	return 0;
}

void rgpu_chunk_enc_free(struct rgpu_chunk_enc *e)
{
	if (!e)
		return;
	ZSTD_freeCCtx(e->zc);
	free(e);
}

static int all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

int rgpu_chunk_encode(struct rgpu_chunk_enc *e, const void *data, size_t len, uint8_t *val,
		      size_t *vlen)
{
	size_t n;

	if (!e || !val || len > RGPU_CHUNK_MAX || (len && !data))
		return RGPU_EINVAL;
	wr_le32(val, CHUNK_MAGIC);
	wr_le32(val + 4, CHUNK_VERSION); /* bytes 6 and 7: kind, zero */
	wr_le32(val + 8, (uint32_t)len);
	if (all_zero(data, len)) {
		val[6] = KIND_ZERO;
		n = 0;
	} else {
		/* at most len bytes of output: one that does not shrink is stored raw */
		n = ZSTD_compressCCtx(e->zc, val + CHUNK_HDR, len, data, len, ZSTD_LEVEL);
		if (ZSTD_isError(n) || n >= len) {
			val[6] = KIND_RAW;
			memcpy(val + CHUNK_HDR, data, len);
			n = len;
		} else {
			val[6] = KIND_ZSTD;
		}
	}
	wr_le32(val + 12, (uint32_t)n);
	*vlen = CHUNK_HDR + n;
	return 0;
}

int rgpu_chunk_value_header(const void *val, size_t vlen, size_t *len, const char **why)
{
	const uint8_t *p = val;
	uint32_t ulen, clen;

	*why = NULL;
	if (vlen < CHUNK_HDR || rd_le32(p) != CHUNK_MAGIC)
		*why = "no chunk header";
	else if ((rd_le32(p + 4) & 0xffff) != CHUNK_VERSION)
		*why = "a chunk format this rgpu does not read";
	if (*why)
		return RGPU_ECORRUPT;
	ulen = rd_le32(p + 8);
	clen = rd_le32(p + 12);
	if (ulen > RGPU_CHUNK_MAX || clen != vlen - CHUNK_HDR ||
	    (p[6] == KIND_ZERO && clen != 0) || (p[6] == KIND_RAW && clen != ulen) ||
	    (p[6] == KIND_ZSTD && (clen == 0 || clen >= ulen)) || p[6] > KIND_ZERO)
		*why = "lengths that do not match its bytes (truncated?)";
	if (*why)
		return RGPU_ECORRUPT;
	*len = ulen;
	return 0;
}

void rgpu_chunk_zero_value(size_t len, uint8_t *val, size_t *vlen)
{
	wr_le32(val, CHUNK_MAGIC);
	wr_le32(val + 4, CHUNK_VERSION);
	val[6] = KIND_ZERO;
	wr_le32(val + 8, (uint32_t)len);
	wr_le32(val + 12, 0);
	*vlen = CHUNK_HDR;
}

/* ---- writing a checkpoint ------------------------------------------------------------------ */

int rgpu_ckpt_begin(struct rgpu_store *s, struct rgpu_ckpt **out)
{
	struct rgpu_ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return RGPU_ENOMEM;
	c->s = s;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->flush_lock, NULL);
	pthread_mutex_init(&c->ahead_lock, NULL);
	pthread_cond_init(&c->ahead_cond, NULL);
	c->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (c->lock_fd < 0 || flock(c->lock_fd, LOCK_SH)) {
		pr_err("cannot lock %s: %s", s->lock_path, strerror(errno));
		if (c->lock_fd >= 0)
			close(c->lock_fd);
		free(c);
		return RGPU_ESYS;
	}
	*out = c;
	return 0;
}

static void batch_free(struct batch *b)
{
	free(b->v);
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

struct put {
	struct rgpu_store *s;
	struct batch *b;
};

static int put_batch(MDB_txn *t, void *arg)
{
	struct put *p = arg;

	for (size_t i = 0; i < p->b->n; i++) {
		MDB_val k = {RGPU_HASH_LEN, p->b->v[i].hash};
		MDB_val v = {p->b->v[i].len, p->b->v[i].val};
		int rc = mdb_put(t, p->s->chunks, &k, &v, MDB_NOOVERWRITE);
		if (rc == MDB_KEYEXIST)
			rc = 0; /* another checkpoint stored it meanwhile */
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * New pages of the store's file cost the kernel an allocation and a clearing each, about
 * 1 GB/s on one thread: more than copying the data. The transaction that writes a batch takes
 * its pages past the database's last page (mostly: LMDB reuses freed ones first), so those are
 * populated beforehand on several threads at once (MADV_POPULATE_WRITE: contents untouched, so
 * another process's transaction writing there meanwhile loses nothing). It must be LMDB's own
 * mapping, or every page still costs a fault there (2 s per 8 GiB measured on the H200 host):
 * LMDB does not give its map's address, so it is found in /proc/self/maps, by the data file's
 * inode. Best effort: an older kernel refuses it, and the transaction faults its pages in.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_SLICE (8u << 20)

struct prefault {
	uint8_t *base;
	size_t len;
	atomic_size_t next;
};

static void prefault_thread(void *arg, unsigned i)
{
	struct prefault *p = arg;
	size_t off;

	(void)i;
	while ((off = atomic_fetch_add(&p->next, PREFAULT_SLICE)) < p->len)
		if (madvise(p->base + off, MIN((size_t)PREFAULT_SLICE, p->len - off),
			    MADV_POPULATE_WRITE))
			break;
}

/* Where this process maps the whole file fd from its start, or NULL. */
static uint8_t *map_of(int fd, size_t size)
{
	struct stat st;
	char line[512];
	uint8_t *base = NULL;
	FILE *f;

	if (fstat(fd, &st) || !(f = fopen("/proc/self/maps", "re")))
		return NULL;
	while (!base && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off, ino;
		char perms[8];
		if (sscanf(line, "%llx-%llx %7s %llx %*s %llu", &lo, &hi, perms, &off, &ino) == 5 &&
		    ino == (unsigned long long)st.st_ino && off == 0 && perms[1] == 'w' &&
		    hi - lo >= size)
			base = (uint8_t *)(uintptr_t)lo;
	}
	fclose(f);
	return base;
}

static void prefault(struct rgpu_store *s, size_t bytes)
{
	struct prefault p = {0};
	MDB_envinfo info;
	size_t start, len, page = (size_t)sysconf(_SC_PAGESIZE);
	long ncpu = rgpu_cpus();
	mdb_filehandle_t fd;
	unsigned n;

	if (!s->prefault)
		return;
	/* the map stays where it is meanwhile: a growth waits (grow()) */
	pthread_rwlock_rdlock(&s->map_lock);
	if (mdb_env_info(s->env, &info) || mdb_env_get_fd(s->env, &fd))
		goto out;
	start = (info.me_last_pgno + 1) * s->psize;
	start -= start % page;
	len = bytes + bytes / 8 + (1u << 20);
	if (start >= info.me_mapsize)
		goto out;
	len = MIN(len, info.me_mapsize - start);
	p.base = map_of(fd, info.me_mapsize);
	if (!p.base)
		goto out;
	p.base += start;
	p.len = len;
	n = (unsigned)MIN((size_t)(ncpu > 1 ? ncpu : 1), len / PREFAULT_SLICE + 1);
	rgpu_parallel(MIN(n, 16u), prefault_thread, &p);
out:
	pthread_rwlock_unlock(&s->map_lock);
}

/* The helper that populates the next batch's pages while it is being filled. */
static void *ahead_main(void *arg)
{
	struct rgpu_ckpt *c = arg;

	pthread_mutex_lock(&c->ahead_lock);
	for (;;) {
		while (!c->ahead_want && !c->ahead_quit)
			pthread_cond_wait(&c->ahead_cond, &c->ahead_lock);
		if (c->ahead_quit)
			break;
		size_t want = c->ahead_want;
		c->ahead_want = 0;
		pthread_mutex_unlock(&c->ahead_lock);
		prefault(c->s, want);
		pthread_mutex_lock(&c->ahead_lock);
	}
	pthread_mutex_unlock(&c->ahead_lock);
	return NULL;
}

static void ahead_kick(struct rgpu_ckpt *c)
{
	if (!c->s->prefault)
		return;
	pthread_mutex_lock(&c->ahead_lock);
	if (!c->ahead_run && !pthread_create(&c->ahead, NULL, ahead_main, c))
		c->ahead_run = 1;
	c->ahead_want = BATCH_BUF;
	pthread_cond_signal(&c->ahead_cond);
	pthread_mutex_unlock(&c->ahead_lock);
}

/*
 * Write the pending batch in one transaction. Called with c->lock held, which it gives up while
 * it writes (the batch is taken out first), so that puts go on filling the next one; returns
 * with it held again.
 */
static int flush_locked(struct rgpu_ckpt *c)
{
	struct batch b = c->batch;
	struct put p = {c->s, &b};
	int ret;

	if (!b.n)
		return 0;
	memset(&c->batch, 0, sizeof(c->batch));
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&c->flush_lock);
	uint64_t t0 = rgpu_now_ns();
	prefault(c->s, b.bytes);
	uint64_t t1 = rgpu_now_ns();
	size_t room = 0, unit = 0;
	for (size_t i = 0; i < b.n; i++) {
		size_t r = value_room(b.v[i].len, c->s->psize);
		room += r;
		unit = MAX(unit, r);
	}
	ret = write_txn(c->s, "writing chunks", put_batch, &p, room, unit);
	c->ns_prefault += t1 - t0;
	c->ns_txn += rgpu_now_ns() - t1;
	if (!ret)
		ahead_kick(c); /* the next batch's pages, while it fills */
	pthread_mutex_unlock(&c->flush_lock);
	pthread_mutex_lock(&c->lock);
	/* its buffer serves again (its pages are there already) */
	if (!c->spare) {
		c->spare = b.buf;
		b.buf = NULL;
	}
	batch_free(&b);
	if (ret)
		c->failed = ret;
	return ret;
}

static int pending_has(const struct rgpu_ckpt *c, const uint8_t *hash)
{
	for (size_t i = 0; i < c->batch.n; i++)
		if (!memcmp(c->batch.v[i].hash, hash, RGPU_HASH_LEN))
			return 1;
	return 0;
}

/* Queue a value (copied) for the next batch, c->lock held. */
static int queue_locked(struct rgpu_ckpt *c, const uint8_t *hash, const void *val, size_t vlen)
{
	struct pending *pe;
	const uint8_t *v = val;

	if (c->batch.n == c->batch.cap) {
		size_t cap = c->batch.cap ? 2 * c->batch.cap : 64;
		struct pending *b = realloc(c->batch.v, cap * sizeof(*b));
		if (!b)
			return RGPU_ENOMEM;
		c->batch.v = b;
		c->batch.cap = cap;
	}
	if (!c->batch.buf) {
		c->batch.buf = c->spare ? c->spare : malloc(BATCH_BUF);
		c->spare = NULL;
		if (!c->batch.buf)
			return RGPU_ENOMEM;
	}
	pe = &c->batch.v[c->batch.n];
	pe->val = c->batch.buf + c->batch.bytes; /* below BATCH_BYTES, so a value fits */
	memcpy(pe->val, val, vlen);
	memcpy(pe->hash, hash, RGPU_HASH_LEN);
	pe->len = vlen;
	c->batch.n++;
	c->batch.bytes += vlen;
	c->added++;
	c->added_bytes += vlen >= CHUNK_HDR ? rd_le32(v + 8) : 0;
	c->added_stored += vlen;
	if (c->batch.bytes >= BATCH_BYTES)
		return flush_locked(c);
	return 0;
}

static int name_chunk(struct rgpu_ckpt *c, const uint8_t *hash)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		uint8_t *h = realloc(c->hashes, cap * RGPU_HASH_LEN);
		if (!h)
			return RGPU_ENOMEM;
		c->hashes = h;
		c->cap = cap;
	}
	memcpy(c->hashes + c->n++ * RGPU_HASH_LEN, hash, RGPU_HASH_LEN);
	return 0;
}

int rgpu_ckpt_chunk(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *data,
		    size_t len)
{
	size_t vlen;
	int has, ret;

	if (!c || !hash || len > RGPU_CHUNK_MAX)
		return RGPU_EINVAL;
	if (c->failed)
		return c->failed;
	has = pending_has(c, hash) ? 1 : rgpu_store_chunk_has(c->s, hash);
	if (has < 0)
		return has;
	if (!has && !data)
		return RGPU_ENOTFOUND;
	if (has)
		return name_chunk(c, hash);
	if ((!c->enc && rgpu_chunk_enc_new(&c->enc)) ||
	    (!c->val && !(c->val = malloc(RGPU_CHUNK_VALUE_MAX))))
		return RGPU_ENOMEM;
	ret = rgpu_chunk_encode(c->enc, data, len, c->val, &vlen);
	if (ret)
		return ret;
	/* named only once queued: the caller may try again or abort */
	pthread_mutex_lock(&c->lock);
	ret = queue_locked(c, hash, c->val, vlen);
	pthread_mutex_unlock(&c->lock);
	if (ret == RGPU_ENOMEM && !c->failed)
		return ret;
	return ret ? ret : name_chunk(c, hash);
}

void rgpu_ckpt_transient(struct rgpu_ckpt *c)
{
	c->transient = 1;
}

int rgpu_ckpt_set_list(struct rgpu_ckpt *c, const uint8_t *hashes, size_t n)
{
	uint8_t *h = malloc(n ? n * RGPU_HASH_LEN : 1);

	if (!h)
		return RGPU_ENOMEM;
	memcpy(h, hashes, n * RGPU_HASH_LEN);
	free(c->hashes);
	c->hashes = h;
	c->n = c->cap = n;
	return 0;
}

static int hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, RGPU_HASH_LEN);
}

/* A chunk the store lacks, by its place in the list: sorted by hash, then place. */
struct absent {
	const uint8_t *hash;
	size_t index;
};

static int absent_cmp(const void *a, const void *b)
{
	const struct absent *x = a, *y = b;
	int d = memcmp(x->hash, y->hash, RGPU_HASH_LEN);
	return d ? d : x->index < y->index ? -1 : x->index > y->index;
}

int rgpu_ckpt_missing(struct rgpu_ckpt *c, uint8_t *bitmap, size_t *nmissing)
{
	struct absent *v = malloc((c->n ? c->n : 1) * sizeof(*v));
	size_t nv = 0, missing = 0;
	MDB_txn *t;
	int rc;

	if (!v)
		return RGPU_ENOMEM;
	memset(bitmap, 0, (c->n + 7) / 8);
	if ((rc = txn_begin(c->s, MDB_RDONLY, &t))) {
		free(v);
		return mdb_err("read transaction", rc);
	}
	for (size_t i = 0; i < c->n; i++) {
		MDB_val k = {RGPU_HASH_LEN, c->hashes + i * RGPU_HASH_LEN}, val;
		rc = mdb_get(t, c->s->chunks, &k, &val);
		if (rc == 0)
			continue;
		if (rc != MDB_NOTFOUND) {
			mdb_txn_abort(t);
			free(v);
			return mdb_err("looking chunks up", rc);
		}
		v[nv].hash = c->hashes + i * RGPU_HASH_LEN;
		v[nv].index = i;
		nv++;
	}
	mdb_txn_abort(t);
	/* a hash the list names more than once is asked for once, at its first place */
	qsort(v, nv, sizeof(*v), absent_cmp);
	for (size_t i = 0; i < nv; i++) {
		if (i && !memcmp(v[i].hash, v[i - 1].hash, RGPU_HASH_LEN))
			continue;
		bitmap[v[i].index / 8] |= (uint8_t)(1u << (v[i].index % 8));
		missing++;
	}
	free(v);
	*nmissing = missing;
	return 0;
}

int rgpu_ckpt_put(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *val,
		  size_t vlen)
{
	int ret;

	if (!c || !hash || !val || vlen < CHUNK_HDR || vlen > RGPU_CHUNK_VALUE_MAX)
		return RGPU_EINVAL;
	pthread_mutex_lock(&c->lock);
	ret = c->failed ? c->failed : queue_locked(c, hash, val, vlen);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void rgpu_ckpt_added(struct rgpu_ckpt *c, uint64_t *chunks, uint64_t *bytes, uint64_t *stored)
{
	pthread_mutex_lock(&c->lock);
	if (chunks)
		*chunks = c->added;
	if (bytes)
		*bytes = c->added_bytes;
	if (stored)
		*stored = c->added_stored;
	pthread_mutex_unlock(&c->lock);
}

static void ckpt_free(struct rgpu_ckpt *c)
{
	if (c->ahead_run) {
		pthread_mutex_lock(&c->ahead_lock);
		c->ahead_quit = 1;
		pthread_cond_signal(&c->ahead_cond);
		pthread_mutex_unlock(&c->ahead_lock);
		pthread_join(c->ahead, NULL);
	}
	pthread_mutex_destroy(&c->ahead_lock);
	pthread_cond_destroy(&c->ahead_cond);
	batch_free(&c->batch);
	free(c->spare);
	rgpu_chunk_enc_free(c->enc);
	free(c->val);
	free(c->hashes);
	if (c->lock_fd >= 0)
		close(c->lock_fd); /* the shared lock goes with it */
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->flush_lock);
	free(c);
}

void rgpu_ckpt_abort(struct rgpu_ckpt *c)
{
	if (c)
		ckpt_free(c); /* chunks already written wait for the next gc */
}

static void id_key(uint64_t id, uint8_t k[8])
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
}

struct commit {
	struct rgpu_ckpt *c;
	const uint8_t *m;
	size_t mlen;
	uint64_t id;
	size_t absent; /* index of a chunk the store lacks, or SIZE_MAX */
};

static int put_manifest(MDB_txn *t, void *arg)
{
	struct commit *cm = arg;
	struct rgpu_store *s = cm->c->s;
	MDB_val nk = {7, "next_id"}, v;
	uint8_t key[8], nv[8];
	int rc;

	/* every chunk it names is here, in this transaction's view (gc cannot run meanwhile) */
	for (size_t i = 0; i < cm->c->n; i++) {
		MDB_val k = {RGPU_HASH_LEN, cm->c->hashes + i * RGPU_HASH_LEN};
		rc = mdb_get(t, s->chunks, &k, &v);
		if (rc == MDB_NOTFOUND) {
			cm->absent = i;
			return RGPU_ENOTFOUND;
		}
		if (rc)
			return rc;
	}
	rc = mdb_get(t, s->meta, &nk, &v);
	cm->id = rc == 0 && v.mv_size == 8 ? rd_le64(v.mv_data) : 1;
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	MDB_val k = {8, key}, mv = {cm->mlen, (void *)cm->m}, nvv = {8, nv};
	id_key(cm->id, key);
	wr_le64(nv, cm->id + 1);
	rc = mdb_put(t, s->manifests, &k, &mv, MDB_NOOVERWRITE);
	if (!rc)
		rc = mdb_put(t, s->meta, &nk, &nvv, 0);
	return rc;
}

int rgpu_ckpt_commit(struct rgpu_ckpt *c, const void *meta, size_t meta_len, uint64_t *id)
{
	struct rgpu_store *s = c->s;
	struct commit cm = {.c = c, .absent = SIZE_MAX};
	size_t mlen = 16 + c->n * RGPU_HASH_LEN + 8 + meta_len + MANIFEST_TAIL;
	uint8_t *m = NULL;
	int rc, ret;

	pthread_mutex_lock(&c->lock);
	ret = c->failed ? c->failed : flush_locked(c);
	pthread_mutex_unlock(&c->lock);
	/* and any batch another thread is still writing */
	pthread_mutex_lock(&c->flush_lock);
	pthread_mutex_unlock(&c->flush_lock);
	if (!ret && c->failed)
		ret = c->failed;
	if (ret)
		goto out;
	/* the chunks on disk before the manifest that names them */
	uint64_t ts = rgpu_now_ns();
	if (!c->transient && (rc = mdb_env_sync(s->env, 1))) {
		ret = mdb_err("writing chunks to disk", rc);
		goto out;
	}
	c->ns_sync = rgpu_now_ns() - ts;
	pr_debug("checkpoint written: %llu chunks added (%.1f MiB); pages populated %.3f s, "
		 "transactions %.3f s, to disk %.3f s",
		 (unsigned long long)c->added, c->added_stored / 1048576.0, c->ns_prefault / 1e9,
		 c->ns_txn / 1e9, c->ns_sync / 1e9);
	m = malloc(mlen);
	if (!m) {
		ret = RGPU_ENOMEM;
		goto out;
	}
	wr_le32(m, MANIFEST_MAGIC);
	wr_le32(m + 4, MANIFEST_VERSION);
	wr_le64(m + 8, c->n);
	memcpy(m + 16, c->hashes, c->n * RGPU_HASH_LEN);
	wr_le64(m + 16 + c->n * RGPU_HASH_LEN, meta_len);
	if (meta_len)
		memcpy(m + 24 + c->n * RGPU_HASH_LEN, meta, meta_len);
	/* a flipped bit anywhere in it is found: a manifest names what a restore trusts */
	rgpu_sha256(m, mlen - MANIFEST_TAIL, m + mlen - MANIFEST_TAIL);
	cm.m = m;
	cm.mlen = mlen;
	size_t room = value_room(mlen, s->psize);
	ret = write_txn(s, "committing the manifest", put_manifest, &cm, room, room);
	if (ret == RGPU_ENOTFOUND) {
		char name[16];
		hex6(c->hashes + cm.absent * RGPU_HASH_LEN, name);
		pr_err("refusing to commit a checkpoint naming chunk %zu (%s...), which is not in "
		       "the store",
		       cm.absent, name);
	}
	if (!ret && !c->transient && (rc = mdb_env_sync(s->env, 1)))
		ret = mdb_err("writing the manifest to disk", rc);
	if (!ret)
		*id = cm.id;
out:
	free(m);
	ckpt_free(c);
	return ret;
}

/* ---- reading manifests ---------------------------------------------------------------------- */

int rgpu_store_manifest_decode(const void *val, size_t vlen, const uint8_t **hashes, size_t *n,
			       const uint8_t **meta, size_t *meta_len)
{
	const uint8_t *p = val;
	uint64_t cnt, ml;

	uint8_t digest[RGPU_HASH_LEN];

	if (vlen < 24 + MANIFEST_TAIL || rd_le32(p) != MANIFEST_MAGIC ||
	    rd_le32(p + 4) != MANIFEST_VERSION)
		return RGPU_ECORRUPT;
	cnt = rd_le64(p + 8);
	if (cnt > (vlen - 24 - MANIFEST_TAIL) / RGPU_HASH_LEN)
		return RGPU_ECORRUPT;
	ml = rd_le64(p + 16 + cnt * RGPU_HASH_LEN);
	if (ml != vlen - 24 - MANIFEST_TAIL - cnt * RGPU_HASH_LEN)
		return RGPU_ECORRUPT;
	rgpu_sha256(p, vlen - MANIFEST_TAIL, digest);
	if (memcmp(digest, p + vlen - MANIFEST_TAIL, RGPU_HASH_LEN))
		return RGPU_ECORRUPT;
	*hashes = p + 16;
	*n = cnt;
	*meta = p + 24 + cnt * RGPU_HASH_LEN;
	*meta_len = ml;
	return 0;
}

/* A manifest value's chunk list and metadata, pointing into v. */
static int manifest_parse(const MDB_val *v, const uint8_t **hashes, size_t *n, const uint8_t **meta,
			  size_t *meta_len)
{
	return rgpu_store_manifest_decode(v->mv_data, v->mv_size, hashes, n, meta, meta_len);
}

int rgpu_store_manifest(struct rgpu_store *s, uint64_t id, void **meta, size_t *meta_len,
			uint8_t **hashes, size_t *n)
{
	uint8_t key[8];
	MDB_val k = {8, key}, v;
	const uint8_t *hp, *mp;
	size_t hn, ml;
	MDB_txn *t;
	int rc, ret;

	id_key(id, key);
	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	rc = mdb_get(t, s->manifests, &k, &v);
	if (rc) {
		mdb_txn_abort(t);
		return rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : mdb_err("reading a manifest", rc);
	}
	ret = manifest_parse(&v, &hp, &hn, &mp, &ml);
	if (ret) {
		pr_warn("checkpoint %llu: its manifest is damaged (header, counts, lengths or "
			"digest do not match its %zu bytes)",
			(unsigned long long)id, v.mv_size);
	} else {
		void *mc = meta ? malloc(ml ? ml : 1) : NULL;
		uint8_t *hc = hashes ? malloc(hn ? hn * RGPU_HASH_LEN : 1) : NULL;
		if ((meta && !mc) || (hashes && !hc)) {
			free(mc);
			free(hc);
			ret = RGPU_ENOMEM;
		} else {
			if (mc) {
				memcpy(mc, mp, ml);
				*meta = mc;
				*meta_len = ml;
			}
			if (hc) {
				memcpy(hc, hp, hn * RGPU_HASH_LEN);
				*hashes = hc;
				*n = hn;
			}
		}
	}
	mdb_txn_abort(t);
	return ret;
}

int rgpu_store_find(struct rgpu_store *s, const uint8_t *hashes, size_t n, const void *meta,
		    size_t meta_len, uint64_t *id)
{
	MDB_txn *t;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, found = 0;

	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	if ((rc = mdb_cursor_open(t, s->manifests, &cur))) {
		mdb_txn_abort(t);
		return mdb_err("reading manifests", rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && !found;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const uint8_t *hp, *mp;
		size_t hn, ml;
		if (k.mv_size != 8 || manifest_parse(&v, &hp, &hn, &mp, &ml) || hn != n ||
		    ml != meta_len || memcmp(hp, hashes, n * RGPU_HASH_LEN) ||
		    memcmp(mp, meta, meta_len))
			continue;
		*id = 0;
		for (int i = 0; i < 8; i++)
			*id = *id << 8 | ((const uint8_t *)k.mv_data)[i];
		found = 1;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(t);
	return found;
}

int rgpu_store_list(struct rgpu_store *s, uint64_t **ids, size_t *n)
{
	MDB_txn *t;
	MDB_cursor *cur;
	MDB_val k, v;
	size_t cnt = 0, cap = 0;
	uint64_t *out = NULL;
	int rc;

	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	if ((rc = mdb_cursor_open(t, s->manifests, &cur))) {
		mdb_txn_abort(t);
		return mdb_err("listing checkpoints", rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint64_t id = 0;
		if (k.mv_size != 8)
			continue;
		for (int i = 0; i < 8; i++)
			id = id << 8 | ((const uint8_t *)k.mv_data)[i];
		if (cnt == cap) {
			uint64_t *o = realloc(out, (cap = cap ? 2 * cap : 64) * sizeof(*o));
			if (!o) {
				free(out);
				mdb_cursor_close(cur);
				mdb_txn_abort(t);
				return RGPU_ENOMEM;
			}
			out = o;
		}
		out[cnt++] = id;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(t);
	*ids = out;
	*n = cnt;
	return 0;
}

static int del_manifest(MDB_txn *t, void *arg)
{
	const uint8_t *key = ((const uint8_t **)arg)[0];
	struct rgpu_store *s = ((struct rgpu_store **)arg)[1];
	MDB_val k = {8, (void *)key};
	int rc = mdb_del(t, s->manifests, &k, NULL);

	return rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : rc;
}

int rgpu_store_remove(struct rgpu_store *s, uint64_t id)
{
	uint8_t key[8];
	void *arg[2] = {key, s};
	int ret, rc;

	id_key(id, key);
	ret = write_txn(s, "removing a checkpoint", del_manifest, arg, 0, 0);
	if (!ret && (rc = mdb_env_sync(s->env, 1)))
		ret = mdb_err("removing a checkpoint", rc);
	return ret;
}

int rgpu_store_gc(struct rgpu_store *s, uint64_t *freed)
{
	return rgpu_store_gc_bytes(s, freed, NULL);
}

struct gc_note {
	struct rgpu_store *s;
	uint64_t freed;
};

/* meta "gc_freed": how many chunks the last gc deleted (a commit of its own: rgpu_store_gc_bytes) */
static int note_gc(MDB_txn *t, void *arg)
{
	const struct gc_note *g = arg;
	MDB_val k = {8, "gc_freed"}, v;
	uint8_t b[8];

	wr_le64(b, g->freed);
	v.mv_size = sizeof(b);
	v.mv_data = b;
	return mdb_put(t, g->s->meta, &k, &v, 0);
}

int rgpu_store_gc_bytes(struct rgpu_store *s, uint64_t *freed, uint64_t *bytes)
{
	uint8_t *live = NULL;
	size_t nlive = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *t = NULL;
	uint64_t del = 0, delbytes = 0;
	int rc, ret = 0, fd;

	/* no checkpoint is being written anywhere: none can count on a chunk found unnamed */
	fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		pr_err("cannot lock %s: %s", s->lock_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return RGPU_ESYS;
	}
	if (rgpu_fault("gc_slow")) /* tests: a gc of a large store, holding the lock */
		sleep(5);
	if ((rc = txn_begin(s, 0, &t))) {
		close(fd);
		return mdb_err("write transaction", rc);
	}
	/* deleting takes new pages too (copies of the ones it changes) */
	if ((ret = reserve(s, "collecting chunks", 0, 0)))
		goto out;
	/* every chunk a manifest names */
	if ((rc = mdb_cursor_open(t, s->manifests, &cur)))
		goto fail;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const uint8_t *hp, *mp;
		size_t hn, ml;
		if (manifest_parse(&v, &hp, &hn, &mp, &ml)) {
			/* a damaged manifest might name any chunk: delete nothing */
			pr_warn("gc: a damaged manifest: no chunk is deleted");
			mdb_cursor_close(cur);
			ret = RGPU_ECORRUPT;
			goto out;
		}
		if (nlive + hn > cap) {
			size_t nc = MAX(2 * cap, nlive + hn);
			uint8_t *l = realloc(live, nc * RGPU_HASH_LEN);
			if (!l) {
				mdb_cursor_close(cur);
				ret = RGPU_ENOMEM;
				goto out;
			}
			live = l;
			cap = nc;
		}
		memcpy(live + nlive * RGPU_HASH_LEN, hp, hn * RGPU_HASH_LEN);
		nlive += hn;
	}
	mdb_cursor_close(cur);
	if (nlive)
		qsort(live, nlive, RGPU_HASH_LEN, hash_cmp);
	/* then every chunk none names */
	if ((rc = mdb_cursor_open(t, s->chunks, &cur)))
		goto fail;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size == RGPU_HASH_LEN && nlive &&
		    bsearch(k.mv_data, live, nlive, RGPU_HASH_LEN, hash_cmp))
			continue;
		delbytes += v.mv_size;
		if ((rc = mdb_cursor_del(cur, 0))) {
			mdb_cursor_close(cur);
			goto fail;
		}
		del++;
	}
	mdb_cursor_close(cur);
	rc = mdb_txn_commit(t);
	t = NULL;
	if (rc)
		goto fail;
	/*
	 * LMDB takes pages freed by the last commit again only after one more (the other meta
	 * page still names them): that one, so that the next checkpoint may use the room freed
	 * here (the file never shrinks; reserve() counts it)
	 */
	struct gc_note g = {s, del};
	if (del && (ret = write_txn(s, "collecting chunks", note_gc, &g, 0, 0)))
		goto out;
	if ((rc = mdb_env_sync(s->env, 1)))
		goto fail;
	if (freed)
		*freed = del;
	if (bytes)
		*bytes = delbytes;
	free(live);
	close(fd);
	return 0;
fail:
	ret = mdb_err("gc", rc);
out:
	mdb_txn_abort(t);
	free(live);
	close(fd);
	return ret;
}

int rgpu_store_stats(struct rgpu_store *s, struct rgpu_store_stats *st)
{
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *t;
	MDB_stat ms;
	int rc;

	memset(st, 0, sizeof(*st));
	if ((rc = txn_begin(s, MDB_RDONLY, &t)))
		return mdb_err("read transaction", rc);
	if ((rc = mdb_cursor_open(t, s->chunks, &cur))) {
		mdb_txn_abort(t);
		return mdb_err("stats", rc);
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const uint8_t *p = v.mv_data;
		st->chunks++;
		st->stored_bytes += v.mv_size;
		if (v.mv_size >= CHUNK_HDR) {
			st->data_bytes += rd_le32(p + 8);
			st->zero_chunks += p[6] == KIND_ZERO;
			st->raw_chunks += p[6] == KIND_RAW;
		}
	}
	mdb_cursor_close(cur);
	if (!mdb_stat(t, s->manifests, &ms))
		st->manifests = ms.ms_entries;
	mdb_txn_abort(t);
	st->map_size = s->map_size;
	return 0;
}
