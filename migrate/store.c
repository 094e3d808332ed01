/*
 * The checkpoint store (rgpu/store.h; docs/formats.md, "The checkpoint store"). One LMDB
 * environment, three named databases:
 *   chunks     chunk hash (32 bytes) -> chunk value: a 16-byte header, then the payload
 *   manifests  checkpoint id (8 bytes big-endian, so LMDB's order is the ids') -> manifest
 *   meta       "format" -> "RGST" + version; "next_id" -> the next checkpoint id
 * New chunks are written in batches of their own transactions; a manifest in one transaction,
 * so a checkpoint exists whole or not at all. When the map is full the environment doubles it
 * and the transaction runs again.
 */
#define LOG_PREFIX "store: "
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#define MANIFEST_VERSION 1u
#define CHUNK_HDR 16u
#define MAP_INITIAL (1ull << 30)
#define BATCH_BYTES (64u << 20)
#define BATCH_MAX 512u
#define ZSTD_LEVEL 1

enum chunk_kind { KIND_RAW = 0, KIND_ZSTD = 1, KIND_ZERO = 2 };

struct rgpu_store {
	MDB_env *env;
	MDB_dbi chunks, manifests, meta;
	uint64_t map_size;
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
	struct pending batch[BATCH_MAX];
	size_t nbatch, batch_bytes;
	ZSTD_CCtx *zc;
	int failed; /* a write failed: only abort is left */
};

static int mdb_err(const char *what, int rc)
{
	pr_err("%s: %s", what, mdb_strerror(rc));
	return rc == ENOMEM ? RGPU_ENOMEM : rc == MDB_MAP_FULL ? RGPU_ENOSPC : RGPU_EIO;
}

/* Double the map: only while this process has no transaction open. */
static int grow(struct rgpu_store *s)
{
	int rc = mdb_env_set_mapsize(s->env, s->map_size * 2);

	if (rc)
		return mdb_err("growing the map", rc);
	s->map_size *= 2;
	pr_info("map size now %llu MiB", (unsigned long long)(s->map_size >> 20));
	return 0;
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
		if ((rc = mdb_env_set_mapsize(s->env, 0)))
			return rc;
		mdb_env_info(s->env, &info);
		s->map_size = info.me_mapsize;
		rc = mdb_txn_begin(s->env, NULL, flags, t);
	}
	return rc;
}

static int check_format(struct rgpu_store *s, MDB_txn *t)
{
	MDB_val k = {6, "format"}, v;
	uint8_t want[8];
	int rc;

	memcpy(want, STORE_MAGIC, 4);
	wr_le32(want + 4, STORE_VERSION);
	rc = mdb_get(t, s->meta, &k, &v);
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
	if (mkdir(dir, 0750) && errno != EEXIST) {
		pr_err("cannot create %s: %s", dir, strerror(errno));
		free(s);
		return RGPU_ESYS;
	}
	if (e && *e) /* tests: a small first map, to see it grow */
		initial = strtoull(e, NULL, 0);
	if ((rc = mdb_env_create(&s->env)) || (rc = mdb_env_set_maxdbs(s->env, 4)) ||
	    (rc = mdb_env_set_mapsize(s->env, initial)) ||
	    (rc = mdb_env_open(s->env, dir, MDB_NOTLS, 0640))) {
		ret = mdb_err(dir, rc);
		goto out_env;
	}
	/* a store made bigger by another process opens with its size */
	mdb_env_info(s->env, &info);
	s->map_size = MAX((uint64_t)info.me_mapsize, initial);
	if ((rc = txn_begin(s, 0, &t)) ||
	    (rc = mdb_dbi_open(t, "chunks", MDB_CREATE, &s->chunks)) ||
	    (rc = mdb_dbi_open(t, "manifests", MDB_CREATE, &s->manifests)) ||
	    (rc = mdb_dbi_open(t, "meta", MDB_CREATE, &s->meta))) {
		ret = mdb_err("opening the databases", rc);
		goto out_txn;
	}
	ret = check_format(s, t);
	if (ret)
		goto out_txn;
	rc = mdb_txn_commit(t);
	t = NULL;
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
	free(s);
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
	if (ulen > RGPU_CHUNK_MAX || clen != vlen - CHUNK_HDR)
		*why = "lengths that do not match its bytes (truncated?)";
	else if (ulen > cap)
		return RGPU_ETOOBIG;
	else if (p[6] == KIND_ZERO && clen == 0)
		memset(buf, 0, ulen);
	else if (p[6] == KIND_RAW && clen == ulen)
		memcpy(buf, p + CHUNK_HDR, ulen);
	else if (p[6] != KIND_ZSTD || ZSTD_decompress(buf, ulen, p + CHUNK_HDR, clen) != ulen)
		*why = "a payload that does not decompress to its length";
	if (*why)
		return RGPU_ECORRUPT;
	*len = ulen;
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

int rgpu_ckpt_begin(struct rgpu_store *s, struct rgpu_ckpt **out)
{
	struct rgpu_ckpt *c = calloc(1, sizeof(*c));

	if (!c || !(c->zc = ZSTD_createCCtx())) {
		free(c);
		return RGPU_ENOMEM;
	}
	c->s = s;
	*out = c;
	return 0;
}

static void batch_free(struct rgpu_ckpt *c)
{
	for (size_t i = 0; i < c->nbatch; i++)
		free(c->batch[i].val);
	c->nbatch = 0;
	c->batch_bytes = 0;
}

/* Write the pending chunks in one transaction (again, bigger, if the map is full). */
static int flush(struct rgpu_ckpt *c)
{
	struct rgpu_store *s = c->s;
	MDB_txn *t;
	int rc;

	while (c->nbatch) {
		if ((rc = txn_begin(s, 0, &t)))
			return mdb_err("write transaction", rc);
		for (size_t i = 0; i < c->nbatch && !rc; i++) {
			MDB_val k = {RGPU_HASH_LEN, c->batch[i].hash};
			MDB_val v = {c->batch[i].len, c->batch[i].val};
			rc = mdb_put(t, s->chunks, &k, &v, MDB_NOOVERWRITE);
			if (rc == MDB_KEYEXIST)
				rc = 0; /* another checkpoint stored it meanwhile */
		}
		if (!rc)
			rc = mdb_txn_commit(t);
		else
			mdb_txn_abort(t);
		if (rc == MDB_MAP_FULL) {
			int ret = grow(s);
			if (ret)
				return ret;
			continue;
		}
		if (rc)
			return mdb_err("writing chunks", rc);
		batch_free(c);
	}
	return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

static int pending_has(const struct rgpu_ckpt *c, const uint8_t *hash)
{
	for (size_t i = 0; i < c->nbatch; i++)
		if (!memcmp(c->batch[i].hash, hash, RGPU_HASH_LEN))
			return 1;
	return 0;
}

int rgpu_ckpt_chunk(struct rgpu_ckpt *c, const uint8_t hash[RGPU_HASH_LEN], const void *data,
		    size_t len)
{
	struct pending *pe;
	size_t bound;
	int has, ret;

	if (!c || c->failed || !hash || len > RGPU_CHUNK_MAX)
		return RGPU_EINVAL;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		uint8_t *h = realloc(c->hashes, cap * RGPU_HASH_LEN);
		if (!h)
			return RGPU_ENOMEM;
		c->hashes = h;
		c->cap = cap;
	}
	has = pending_has(c, hash) ? 1 : rgpu_store_chunk_has(c->s, hash);
	if (has < 0)
		return has;
	if (!has && !data)
		return RGPU_ENOTFOUND;
	if (has) {
		memcpy(c->hashes + c->n++ * RGPU_HASH_LEN, hash, RGPU_HASH_LEN);
		return 0;
	}
	pe = &c->batch[c->nbatch];
	bound = ZSTD_compressBound(len);
	pe->val = malloc(CHUNK_HDR + MAX(bound, len));
	if (!pe->val)
		return RGPU_ENOMEM; /* not named: the caller may try again or abort */
	memcpy(c->hashes + c->n++ * RGPU_HASH_LEN, hash, RGPU_HASH_LEN);
	memcpy(pe->hash, hash, RGPU_HASH_LEN);
	wr_le32(pe->val, CHUNK_MAGIC);
	wr_le32(pe->val + 4, CHUNK_VERSION); /* bytes 6 and 7: kind, zero */
	wr_le32(pe->val + 8, (uint32_t)len);
	if (all_zero(data, len)) {
		pe->val[6] = KIND_ZERO;
		pe->len = CHUNK_HDR;
	} else {
		size_t z = ZSTD_compressCCtx(c->zc, pe->val + CHUNK_HDR, bound, data, len,
					     ZSTD_LEVEL);
		if (ZSTD_isError(z) || z >= len) {
			pe->val[6] = KIND_RAW;
			memcpy(pe->val + CHUNK_HDR, data, len);
			pe->len = CHUNK_HDR + len;
		} else {
			pe->val[6] = KIND_ZSTD;
			pe->len = CHUNK_HDR + z;
		}
	}
	wr_le32(pe->val + 12, (uint32_t)(pe->len - CHUNK_HDR));
	c->nbatch++;
	c->batch_bytes += pe->len;
	if (c->nbatch == BATCH_MAX || c->batch_bytes >= BATCH_BYTES) {
		ret = flush(c);
		if (ret) {
			c->failed = 1;
			return ret;
		}
	}
	return 0;
}

static void ckpt_free(struct rgpu_ckpt *c)
{
	batch_free(c);
	ZSTD_freeCCtx(c->zc);
	free(c->hashes);
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

int rgpu_ckpt_commit(struct rgpu_ckpt *c, const void *meta, size_t meta_len, uint64_t *id)
{
	struct rgpu_store *s = c->s;
	size_t mlen = 16 + c->n * RGPU_HASH_LEN + 8 + meta_len;
	uint8_t *m = NULL, key[8];
	MDB_val nk = {7, "next_id"}, v;
	uint64_t next;
	MDB_txn *t;
	int rc, ret;

	if (c->failed) {
		ret = RGPU_EIO;
		goto out;
	}
	ret = flush(c);
	if (ret)
		goto out;
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
	for (;;) {
		if ((rc = txn_begin(s, 0, &t))) {
			ret = mdb_err("write transaction", rc);
			goto out;
		}
		rc = mdb_get(t, s->meta, &nk, &v);
		next = rc == 0 && v.mv_size == 8 ? rd_le64(v.mv_data) : 1;
		rc = rc == MDB_NOTFOUND ? 0 : rc;
		if (!rc) {
			MDB_val k = {8, key}, mv = {mlen, m};
			uint8_t nv[8];
			MDB_val nvv = {8, nv};
			id_key(next, key);
			wr_le64(nv, next + 1);
			rc = mdb_put(t, s->manifests, &k, &mv, MDB_NOOVERWRITE);
			if (!rc)
				rc = mdb_put(t, s->meta, &nk, &nvv, 0);
		}
		if (!rc)
			rc = mdb_txn_commit(t);
		else
			mdb_txn_abort(t);
		if (rc == MDB_MAP_FULL && (ret = grow(s)) == 0)
			continue;
		if (rc)
			ret = ret ? ret : mdb_err("committing the manifest", rc);
		break;
	}
	if (!ret)
		*id = next;
out:
	free(m);
	ckpt_free(c);
	return ret;
}

int rgpu_store_manifest_decode(const void *val, size_t vlen, const uint8_t **hashes, size_t *n,
			       const uint8_t **meta, size_t *meta_len)
{
	const uint8_t *p = val;
	uint64_t cnt, ml;

	if (vlen < 24 || rd_le32(p) != MANIFEST_MAGIC || rd_le32(p + 4) != MANIFEST_VERSION)
		return RGPU_ECORRUPT;
	cnt = rd_le64(p + 8);
	if (cnt > (vlen - 24) / RGPU_HASH_LEN)
		return RGPU_ECORRUPT;
	ml = rd_le64(p + 16 + cnt * RGPU_HASH_LEN);
	if (ml != vlen - 24 - cnt * RGPU_HASH_LEN)
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
		pr_warn("checkpoint %llu: its manifest is damaged (header, counts or lengths do "
			"not match its %zu bytes)",
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

int rgpu_store_remove(struct rgpu_store *s, uint64_t id)
{
	uint8_t key[8];
	MDB_val k = {8, key};
	MDB_txn *t;
	int rc;

	id_key(id, key);
	if ((rc = txn_begin(s, 0, &t)))
		return mdb_err("write transaction", rc);
	rc = mdb_del(t, s->manifests, &k, NULL);
	if (rc) {
		mdb_txn_abort(t);
		return rc == MDB_NOTFOUND ? RGPU_ENOTFOUND : mdb_err("removing a checkpoint", rc);
	}
	rc = mdb_txn_commit(t);
	return rc ? mdb_err("removing a checkpoint", rc) : 0;
}

static int hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, RGPU_HASH_LEN);
}

int rgpu_store_gc(struct rgpu_store *s, uint64_t *freed)
{
	uint8_t *live = NULL;
	size_t nlive = 0, cap = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *t;
	uint64_t del = 0;
	int rc, ret = 0;

	if ((rc = txn_begin(s, 0, &t)))
		return mdb_err("write transaction", rc);
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
	if (freed)
		*freed = del;
	free(live);
	return 0;
fail:
	ret = mdb_err("gc", rc);
out:
	mdb_txn_abort(t);
	free(live);
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
