/*
 * The module image cache: images named by their SHA-256, kept in tables of the server's store
 * (<data>/store, migrate/store.c: the one LMDB environment that also holds the checkpoints) and
 * shared by all its workers, so a client sends an image's bytes only the first time any
 * session of this server needs it. Each worker opens the store after fork (LMDB environments
 * must not cross fork). Entries are immutable: a hash names exactly one content, so concurrent
 * puts of the same key are harmless. A put is on disk when it returns; a use (the order) is
 * written without waiting for its meta page (a crash may undo the last).
 *
 * Only images the driver has loaded are stored (exec_module.c), and the images together stay
 * within a byte bound (rgpud --module-cache-bytes): a put first evicts the least recently used
 * images until the new one fits, and a load from the cache makes its image the most recently
 * used. The order lives in the environment, so all the workers of a server share one cache and
 * one bound; a put and its evictions are one write transaction. The bound counts image bytes;
 * LMDB's file is larger by its page overhead, and reuses the pages of evicted images.
 *
 * Scoped per tenant: a session may load an image by its hash alone only when its tenant has
 * shipped that image itself (an entry in owners); for any other tenant the image is a miss, the
 * client sends the bytes, and the tenant becomes an owner too (the bytes are stored once). So
 * a session cannot probe by hash what other tenants run. Each tenant may own at most its
 * module_cache bytes (rgpud.conf): past it, its least recently used images stop being its own,
 * and an image nobody owns any more leaves the cache. Without --keys all sessions are one
 * tenant, "". rgpud --replay, the operator's, reads any image.
 *
 * Layout (formats.md), five named databases of the store's environment:
 *   images  hash -> magic "RGMI" (u32 0x494d4752), format version (u32, 1), then the image
 *   uses    hash -> last use (u64 LE), image bytes (u64 LE)
 *   lru     last use (u64 big-endian: LMDB's key order is then the age order) -> hash
 *   owners  tenant, NUL, hash -> the tenant's last use (u64 LE), image bytes (u64 LE)
 *   holders hash -> tenant, NUL (sorted duplicates: every owner of the image)
 * A last use is a counter: the largest in lru, plus one. A value that fails its magic, version
 * or hash is deleted, so the next load ships the image again and repairs the cache. Images that
 * no tenant owns (an owners record lost) are dropped when the cache opens.
 */
#define LOG_PREFIX "modcache: "
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/log.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

#define MODCACHE_MAGIC 0x494d4752u         /* "RGMI" */
#define MODCACHE_VERSION 1u
#define MODCACHE_HDR 8
#define MODCACHE_USE_LEN 16                /* uses and owners: last use, bytes */
#define MODCACHE_OWNER_KEY (RGPU_TENANT_MAX + 1 + RGPU_HASH_LEN)

struct srv_modcache {
	struct rgpu_store *store; /* not the cache's: closed by whoever opened it */
	MDB_dbi images, uses, lru, owners, holders;
	uint64_t max_bytes;
};

/* owners' key: the tenant's name, NUL, the hash; its length */
static size_t owner_key(uint8_t *out, const char *tenant, const uint8_t *hash)
{
	size_t n = strlen(tenant) + 1;
	memcpy(out, tenant, n);
	memcpy(out + n, hash, RGPU_HASH_LEN);
	return n + RGPU_HASH_LEN;
}

static void be64(uint8_t out[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		out[i] = (uint8_t)v;
}

static uint64_t rd_be64(const uint8_t in[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | in[i];
	return v;
}

/* The image bytes cached and how many images. */
static int usage(struct srv_modcache *mc, MDB_txn *txn, uint64_t *bytes, uint64_t *images)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, mc->uses, &cur);

	*bytes = *images = 0;
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (v.mv_size == MODCACHE_USE_LEN)
			*bytes += rd_le64((const uint8_t *)v.mv_data + 8);
		(*images)++;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/*
 * Make the image named hash (len bytes) the most recently used, and tenant's most recently
 * used when it owns it (tenant NULL: nobody's).
 */
static int touch(struct srv_modcache *mc, MDB_txn *txn, const uint8_t *hash, uint64_t len,
		 const char *tenant)
{
	uint8_t ok[MODCACHE_OWNER_KEY];
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash}, v, sk, last;
	uint8_t use[MODCACHE_USE_LEN], stamp[8];
	uint64_t next = 1;
	MDB_cursor *cur;
	int rc;

	if (mdb_get(txn, mc->uses, &k, &v) == 0 && v.mv_size == MODCACHE_USE_LEN) {
		be64(stamp, rd_le64(v.mv_data));
		sk.mv_size = sizeof(stamp);
		sk.mv_data = stamp;
		mdb_del(txn, mc->lru, &sk, NULL);
	}
	rc = mdb_cursor_open(txn, mc->lru, &cur);
	if (rc)
		return rc;
	if (mdb_cursor_get(cur, &last, &v, MDB_LAST) == 0 && last.mv_size == 8)
		next = rd_be64(last.mv_data) + 1;
	mdb_cursor_close(cur);
	be64(stamp, next);
	sk.mv_size = sizeof(stamp);
	sk.mv_data = stamp;
	rc = mdb_put(txn, mc->lru, &sk, &k, 0);
	wr_le64(use, next);
	wr_le64(use + 8, len);
	v.mv_size = sizeof(use);
	v.mv_data = use;
	if (!rc)
		rc = mdb_put(txn, mc->uses, &k, &v, 0);
	if (!rc && tenant) {
		MDB_val o = {.mv_size = owner_key(ok, tenant, hash), .mv_data = ok}, ov;
		if (mdb_get(txn, mc->owners, &o, &ov) == 0)
			rc = mdb_put(txn, mc->owners, &o, &v, 0);
	}
	return rc;
}

/* Forget the image named hash: its bytes, its use, its place in the order, its owners. */
static void forget(struct srv_modcache *mc, MDB_txn *txn, const uint8_t *hash)
{
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash}, v, sk, hv;
	uint8_t stamp[8], ok[MODCACHE_OWNER_KEY];
	MDB_cursor *cur;

	if (mdb_cursor_open(txn, mc->holders, &cur) == 0) {
		for (int rc = mdb_cursor_get(cur, &k, &hv, MDB_SET_KEY); rc == 0;
		     rc = mdb_cursor_get(cur, &k, &hv, MDB_NEXT_DUP)) {
			MDB_val o = {.mv_data = ok};
			/* a holder is a tenant's name and its NUL */
			if (hv.mv_size < 1 || hv.mv_size > RGPU_TENANT_MAX + 1 ||
			    ((const char *)hv.mv_data)[hv.mv_size - 1])
				continue;
			o.mv_size = owner_key(ok, hv.mv_data, hash);
			mdb_del(txn, mc->owners, &o, NULL);
		}
		mdb_cursor_close(cur);
	}
	k.mv_size = RGPU_HASH_LEN;
	k.mv_data = (void *)hash;
	mdb_del(txn, mc->holders, &k, NULL);

	if (mdb_get(txn, mc->uses, &k, &v) == 0 && v.mv_size == MODCACHE_USE_LEN) {
		be64(stamp, rd_le64(v.mv_data));
		sk.mv_size = sizeof(stamp);
		sk.mv_data = stamp;
		mdb_del(txn, mc->lru, &sk, NULL);
	}
	mdb_del(txn, mc->uses, &k, NULL);
	mdb_del(txn, mc->images, &k, NULL);
}

/* Evict the least recently used images until `room` more bytes fit under the bound. */
static int evict(struct srv_modcache *mc, MDB_txn *txn, uint64_t room)
{
	uint64_t bytes, images, freed = 0;
	unsigned n = 0;
	MDB_cursor *cur;
	MDB_val sk, hk;
	int rc = usage(mc, txn, &bytes, &images);

	if (rc || bytes + room <= mc->max_bytes)
		return rc;
	rc = mdb_cursor_open(txn, mc->lru, &cur);
	if (rc)
		return rc;
	while (bytes + room > mc->max_bytes &&
	       (rc = mdb_cursor_get(cur, &sk, &hk, MDB_FIRST)) == 0) {
		uint8_t hash[RGPU_HASH_LEN];
		MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = hash}, v;
		uint64_t len = 0;

		if (hk.mv_size != RGPU_HASH_LEN) {
			rc = mdb_cursor_del(cur, 0); /* not a hash: no image behind it */
			if (rc)
				break;
			continue;
		}
		memcpy(hash, hk.mv_data, sizeof(hash));
		if (mdb_get(txn, mc->uses, &k, &v) == 0 && v.mv_size == MODCACHE_USE_LEN)
			len = rd_le64((const uint8_t *)v.mv_data + 8);
		forget(mc, txn, hash);
		bytes -= MIN(len, bytes);
		freed += len;
		n++;
	}
	mdb_cursor_close(cur);
	if (n)
		pr_info("evicted %u least recently used image(s), %llu bytes, to stay within %llu "
			"bytes",
			n, (unsigned long long)freed, (unsigned long long)mc->max_bytes);
	/* an order that ran out before the bytes did: uses without lru entries */
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/*
 * What tenant owns: its image bytes and how many; with oldest set, the hash of its least
 * recently used image (and *oldest_len its bytes).
 */
static int tenant_usage(struct srv_modcache *mc, MDB_txn *txn, const char *tenant,
			uint64_t *bytes, uint64_t *images, uint8_t *oldest, uint64_t *oldest_len)
{
	uint8_t prefix[RGPU_TENANT_MAX + 1];
	size_t plen = strlen(tenant) + 1;
	uint64_t best = UINT64_MAX;
	MDB_val k = {.mv_size = plen, .mv_data = prefix}, v;
	MDB_cursor *cur;
	int rc;

	*bytes = *images = 0;
	memcpy(prefix, tenant, plen);
	rc = mdb_cursor_open(txn, mc->owners, &cur);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != plen + RGPU_HASH_LEN || memcmp(k.mv_data, prefix, plen))
			break;
		if (v.mv_size != MODCACHE_USE_LEN)
			continue;
		uint64_t stamp = rd_le64(v.mv_data), len = rd_le64((const uint8_t *)v.mv_data + 8);
		*bytes += len;
		(*images)++;
		if (oldest && stamp < best) {
			best = stamp;
			memcpy(oldest, (const uint8_t *)k.mv_data + plen, RGPU_HASH_LEN);
			*oldest_len = len;
		}
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The image stops being tenant's; when nobody owns it any more, it leaves the cache. */
static int disown(struct srv_modcache *mc, MDB_txn *txn, const char *tenant, const uint8_t *hash)
{
	uint8_t ok[MODCACHE_OWNER_KEY];
	MDB_val o = {.mv_size = owner_key(ok, tenant, hash), .mv_data = ok};
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash};
	MDB_val hv = {.mv_size = strlen(tenant) + 1, .mv_data = (void *)tenant}, v;
	int rc = mdb_del(txn, mc->owners, &o, NULL);

	if (!rc || rc == MDB_NOTFOUND)
		rc = mdb_del(txn, mc->holders, &k, &hv);
	if (rc && rc != MDB_NOTFOUND)
		return rc;
	if (mdb_get(txn, mc->holders, &k, &v) == MDB_NOTFOUND)
		forget(mc, txn, hash);
	return 0;
}

/*
 * Make tenant an owner of the image named hash (len bytes, last used at the stamp in use),
 * first giving up its least recently used images until it owns at most tenant_max bytes.
 */
static int own(struct srv_modcache *mc, MDB_txn *txn, const char *tenant, uint64_t tenant_max,
	       const uint8_t *hash, uint64_t len)
{
	uint8_t ok[MODCACHE_OWNER_KEY], use[MODCACHE_USE_LEN], oldest[RGPU_HASH_LEN];
	MDB_val o = {.mv_size = owner_key(ok, tenant, hash), .mv_data = ok}, v;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash};
	MDB_val hv = {.mv_size = strlen(tenant) + 1, .mv_data = (void *)tenant};
	uint64_t bytes, images, oldest_len = 0, freed = 0;
	unsigned n = 0;
	int rc;

	if (mdb_get(txn, mc->owners, &o, &v) == 0)
		return 0; /* its own already: touch() made it its most recently used */
	rc = mdb_get(txn, mc->uses, &k, &v);
	if (rc || v.mv_size != MODCACHE_USE_LEN)
		return rc ? rc : MDB_CORRUPTED;
	memcpy(use, v.mv_data, sizeof(use));
	if (tenant_max != SRV_UNLIMITED) {
		rc = tenant_usage(mc, txn, tenant, &bytes, &images, oldest, &oldest_len);
		while (!rc && images && bytes + len > tenant_max) {
			rc = disown(mc, txn, tenant, oldest);
			bytes -= MIN(oldest_len, bytes);
			freed += oldest_len;
			n++;
			if (!rc)
				rc = tenant_usage(mc, txn, tenant, &bytes, &images, oldest,
						  &oldest_len);
		}
		if (rc)
			return rc;
		if (n)
			pr_info("%s gave up %u least recently used image(s), %llu bytes, to stay "
				"within its module_cache of %llu bytes",
				srv_tenant_label(tenant), n, (unsigned long long)freed,
				(unsigned long long)tenant_max);
	}
	v.mv_size = sizeof(use);
	v.mv_data = use;
	rc = mdb_put(txn, mc->owners, &o, &v, 0);
	return rc ? rc : mdb_put(txn, mc->holders, &k, &hv, MDB_NODUPDATA);
}

/* Whether the uses record keyed k is an image no tenant holds (drop_unowned's to drop). */
static int unowned(struct srv_modcache *mc, MDB_txn *txn, MDB_val *k)
{
	MDB_val hv;
	return k->mv_size == RGPU_HASH_LEN && mdb_get(txn, mc->holders, k, &hv) != 0;
}

/* Images no tenant owns (a cache written before owners existed): dropped when it opens. */
static int drop_unowned(struct srv_modcache *mc, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	uint8_t (*drop)[RGPU_HASH_LEN] = NULL;
	size_t n = 0, cap = 0;
	int rc = mdb_cursor_open(txn, mc->uses, &cur);

	if (rc)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (!unowned(mc, txn, &k))
			continue;
		if (n == cap) {
			void *p = realloc(drop, (cap = cap ? 2 * cap : 16) * sizeof(*drop));
			if (!p) {
				rc = ENOMEM;
				break;
			}
			drop = p;
		}
		memcpy(drop[n++], k.mv_data, RGPU_HASH_LEN);
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	for (size_t i = 0; !rc && i < n; i++)
		forget(mc, txn, drop[i]);
	if (!rc && n)
		pr_info("dropped %zu image(s) that no tenant owns (a cache from before per-tenant "
			"owners)",
			n);
	free(drop);
	return rc;
}

/*
 * Whether open_fn has work: an image no tenant owns, or more bytes than max_bytes. Read-only,
 * so that a worker's start does not wait for the writer lock (another job's checkpoint holds
 * it across each batch and its sync) when, as nearly always, there is nothing to do.
 */
static int untidy(struct srv_modcache *mc)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t bytes, images;
	int rc = rgpu_store_read(mc->store, &txn), found = 0;

	if (rc)
		return 1; /* the write says why */
	rc = usage(mc, txn, &bytes, &images);
	found = rc || bytes > mc->max_bytes;
	if (!found && !(rc = mdb_cursor_open(txn, mc->uses, &cur))) {
		for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && !found;
		     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
			found = unowned(mc, txn, &k);
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	return found || (rc && rc != MDB_NOTFOUND);
}

static int open_fn(MDB_txn *txn, void *arg)
{
	struct srv_modcache *mc = arg;
	int rc = drop_unowned(mc, txn);

	/* a server started with a smaller bound than the cache holds */
	return rc ? rc : evict(mc, txn, 0);
}

int srv_modcache_open(struct rgpu_store *store, uint64_t max_bytes, struct srv_modcache **out)
{
	struct srv_modcache *mc = calloc(1, sizeof(*mc));
	int ret;

	if (!mc)
		return RGPU_ENOMEM;
	mc->store = store;
	mc->max_bytes = max_bytes;
	if ((ret = rgpu_store_table(store, "images", MDB_CREATE, &mc->images)) ||
	    (ret = rgpu_store_table(store, "uses", MDB_CREATE, &mc->uses)) ||
	    (ret = rgpu_store_table(store, "lru", MDB_CREATE, &mc->lru)) ||
	    (ret = rgpu_store_table(store, "owners", MDB_CREATE, &mc->owners)) ||
	    (ret = rgpu_store_table(store, "holders", MDB_CREATE | MDB_DUPSORT, &mc->holders)) ||
	    (untidy(mc) &&
	     (ret = rgpu_store_write(store, "opening the module cache", open_fn, mc, 0, 1)))) {
		free(mc);
		return ret;
	}
	*out = mc;
	return 0;
}

struct drop_arg {
	struct srv_modcache *mc;
	const uint8_t *hash;
};

static int drop_fn(MDB_txn *txn, void *arg)
{
	struct drop_arg *d = arg;
	forget(d->mc, txn, d->hash);
	return 0;
}

static void drop(struct srv_modcache *mc, const uint8_t hash[32])
{
	struct drop_arg d = {mc, hash};
	rgpu_store_write(mc->store, "dropping a damaged image", drop_fn, &d, 0, 0);
}

struct touch_arg {
	struct srv_modcache *mc;
	const uint8_t *hash;
	uint64_t len;
	const char *tenant;
};

static int touch_fn(MDB_txn *txn, void *arg)
{
	struct touch_arg *t = arg;
	return touch(t->mc, txn, t->hash, t->len, t->tenant);
}

int srv_modcache_get(struct srv_modcache *mc, const char *tenant, const uint8_t hash[32],
		     void **data, size_t *len)
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash}, v;
	uint8_t check[RGPU_HASH_LEN], ok[MODCACHE_OWNER_KEY];
	const uint8_t *p;
	int rc = rgpu_store_read(mc->store, &txn);

	if (rc)
		return rc;
	if (tenant) {
		/* another tenant's image is a miss like any other: nothing tells them apart */
		MDB_val o = {.mv_size = owner_key(ok, tenant, hash), .mv_data = ok};
		if (mdb_get(txn, mc->owners, &o, &v)) {
			mdb_txn_abort(txn);
			return RGPU_ENOTFOUND;
		}
	}
	rc = mdb_get(txn, mc->images, &k, &v);
	if (rc) {
		mdb_txn_abort(txn);
		return RGPU_ENOTFOUND;
	}
	p = v.mv_data;
	if (v.mv_size < MODCACHE_HDR || rd_le32(p) != MODCACHE_MAGIC ||
	    rd_le32(p + 4) != MODCACHE_VERSION) {
		mdb_txn_abort(txn);
		pr_warn("cached image has no valid header; dropping it");
		drop(mc, hash);
		return RGPU_ECORRUPT;
	}
	*len = v.mv_size - MODCACHE_HDR;
	*data = malloc(*len ? *len : 1);
	if (!*data) {
		mdb_txn_abort(txn);
		return RGPU_ENOMEM;
	}
	memcpy(*data, p + MODCACHE_HDR, *len);
	mdb_txn_abort(txn);
	/* a damaged entry is a miss, never a wrong module */
	rgpu_sha256(*data, *len, check);
	if (memcmp(check, hash, RGPU_HASH_LEN)) {
		pr_warn("cached image fails its hash; dropping it");
		free(*data);
		drop(mc, hash);
		return RGPU_ECORRUPT;
	}
	/* the most recently used now; failing that, it only ages sooner */
	struct touch_arg t = {mc, hash, *len, tenant};
	rgpu_store_write(mc->store, "noting an image's use", touch_fn, &t, 0, 0);
	return 0;
}

struct put_arg {
	struct srv_modcache *mc;
	const char *tenant;
	uint64_t tenant_max;
	const uint8_t *hash;
	const void *data;
	size_t len;
};

static int put_fn(MDB_txn *txn, void *arg)
{
	struct put_arg *p = arg;
	struct srv_modcache *mc = p->mc;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)p->hash}, v;
	int rc;

	if (mdb_get(txn, mc->images, &k, &v) == 0) {
		/* cached already (perhaps for another tenant): just used, and this tenant's too */
		rc = touch(mc, txn, p->hash, p->len, p->tenant);
		return !rc && p->tenant ? own(mc, txn, p->tenant, p->tenant_max, p->hash, p->len)
					: rc;
	}
	rc = evict(mc, txn, p->len);
	/* reserve, then write in place: a large image is not copied twice */
	v.mv_size = p->len + MODCACHE_HDR;
	if (!rc)
		rc = mdb_put(txn, mc->images, &k, &v, MDB_NOOVERWRITE | MDB_RESERVE);
	if (!rc) {
		wr_le32(v.mv_data, MODCACHE_MAGIC);
		wr_le32((uint8_t *)v.mv_data + 4, MODCACHE_VERSION);
		memcpy((uint8_t *)v.mv_data + MODCACHE_HDR, p->data, p->len);
		rc = touch(mc, txn, p->hash, p->len, p->tenant);
	}
	if (!rc && p->tenant)
		rc = own(mc, txn, p->tenant, p->tenant_max, p->hash, p->len);
	return rc;
}

int srv_modcache_put(struct srv_modcache *mc, const char *tenant, uint64_t tenant_max,
		     const uint8_t hash[32], const void *data, size_t len)
{
	struct put_arg p = {mc, tenant, tenant_max, hash, data, len};
	int ret;

	if (len > mc->max_bytes) {
		pr_warn_once("not caching a %zu-byte image: more than the cache's %llu bytes "
			     "(rgpud --module-cache-bytes)",
			     len, (unsigned long long)mc->max_bytes);
		return RGPU_ETOOBIG;
	}
	if (tenant && tenant_max != SRV_UNLIMITED && len > tenant_max) {
		pr_warn_once("not caching a %zu-byte image for %s: more than its module_cache of "
			     "%llu bytes (rgpud.conf)",
			     len, srv_tenant_label(tenant), (unsigned long long)tenant_max);
		return RGPU_ETOOBIG;
	}
	ret = rgpu_store_write(mc->store, "caching an image", put_fn, &p, len, 1);
	if (ret)
		pr_warn("cannot cache a %zu-byte image: %s", len, rgpu_strerror(ret));
	return ret;
}

int srv_modcache_usage(struct srv_modcache *mc, uint64_t *bytes, uint64_t *images)
{
	MDB_txn *txn;
	int rc = rgpu_store_read(mc->store, &txn);

	if (rc)
		return rc;
	rc = usage(mc, txn, bytes, images);
	mdb_txn_abort(txn);
	return rc ? RGPU_ESYS : 0;
}

int srv_modcache_tenant_usage(struct srv_modcache *mc, const char *tenant, uint64_t *bytes,
			      uint64_t *images)
{
	MDB_txn *txn;
	int rc = rgpu_store_read(mc->store, &txn);

	if (rc)
		return rc;
	rc = tenant_usage(mc, txn, tenant, bytes, images, NULL, NULL);
	mdb_txn_abort(txn);
	return rc ? RGPU_ESYS : 0;
}

void srv_modcache_close(struct srv_modcache *mc)
{
	free(mc);
}
