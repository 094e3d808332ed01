/*
 * The module image cache (server/modcache.c) in a temporary state directory: its byte bound,
 * least-recently-used eviction (a load from the cache counts as a use), an image larger than
 * the bound, a smaller bound when the cache is opened again, and a cache of the version-1
 * layout (images in LMDB's unnamed database), whose images are dropped; images scoped per
 * tenant, a tenant's module_cache bound, and images that no tenant owns. Byte counts are
 * exact.
 */
#include <lmdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "srv.h"

struct img {
	uint8_t *data;
	size_t len;
	uint8_t hash[RGPU_HASH_LEN];
};

/* len bytes of a pattern seeded by `seed`, and their hash */
static struct img make(size_t len, unsigned seed)
{
	struct img im = {malloc(len), len, {0}};
	assert_non_null(im.data);
	for (size_t i = 0; i < len; i++)
		im.data[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	rgpu_sha256(im.data, len, im.hash);
	return im;
}

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/rgpu-modcache-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static void expect_usage(struct srv_modcache *mc, uint64_t bytes, uint64_t images)
{
	uint64_t b = 0, n = 0;
	assert_int_equal(srv_modcache_usage(mc, &b, &n), 0);
	assert_int_equal(b, bytes);
	assert_int_equal(n, images);
}

/* in the cache, byte for byte */
static void expect_cached(struct srv_modcache *mc, const struct img *im)
{
	void *data = NULL;
	size_t len = 0;
	assert_int_equal(srv_modcache_get(mc, "", im->hash, &data, &len), 0);
	assert_int_equal(len, im->len);
	assert_memory_equal(data, im->data, len);
	free(data);
}

static void expect_absent(struct srv_modcache *mc, const struct img *im)
{
	void *data = NULL;
	size_t len = 0;
	assert_int_equal(srv_modcache_get(mc, "", im->hash, &data, &len), RGPU_ENOTFOUND);
}

static void test_lru(void **state)
{
	struct img a = make(1000, 1), b = make(1000, 2), c = make(1000, 3), d = make(1000, 4),
		   e = make(1500, 5), big = make(3001, 6);
	struct srv_modcache *mc;

	(void)state;
	assert_int_equal(srv_modcache_open(dir, 3000, &mc), 0);
	expect_usage(mc, 0, 0);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, b.hash, b.data, b.len), 0);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, c.hash, c.data, c.len), 0);
	expect_usage(mc, 3000, 3);

	/* a was loaded since: b is the least recently used, and goes for d */
	expect_cached(mc, &a);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, d.hash, d.data, d.len), 0);
	expect_usage(mc, 3000, 3);
	expect_absent(mc, &b);
	/* order now, oldest first: c, d, a (each get above counts as a use) */
	expect_cached(mc, &c);
	expect_cached(mc, &d);
	expect_cached(mc, &a);

	/* 1500 more bytes: c (1000) is not enough room, d goes too; a stays */
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, e.hash, e.data, e.len), 0);
	expect_usage(mc, 2500, 2);
	expect_absent(mc, &c);
	expect_absent(mc, &d);
	expect_cached(mc, &a);
	expect_cached(mc, &e);

	/* larger than the whole bound: refused, nothing evicted */
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, big.hash, big.data, big.len), RGPU_ETOOBIG);
	expect_usage(mc, 2500, 2);

	/* a put of what is cached only makes it the most recently used: a, then e */
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	expect_usage(mc, 2500, 2);
	srv_modcache_close(mc);

	/* opened again with a smaller bound: the least recently used (e) goes at once */
	assert_int_equal(srv_modcache_open(dir, 1200, &mc), 0);
	expect_usage(mc, 1000, 1);
	expect_absent(mc, &e);
	expect_cached(mc, &a);
	srv_modcache_close(mc);

	free(a.data), free(b.data), free(c.data), free(d.data), free(e.data), free(big.data);
}

/* A cache written by the version-1 layout: its images are dropped, the cache works. */
static void test_version1(void **state)
{
	struct img a = make(700, 7);
	struct srv_modcache *mc;
	char path[128];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = {RGPU_HASH_LEN, a.hash}, v = {a.len, a.data};

	(void)state;
	snprintf(path, sizeof(path), "%s/modules", dir);
	assert_int_equal(mkdir(path, 0750), 0);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_open(env, path, 0, 0640), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);

	assert_int_equal(srv_modcache_open(dir, 1 << 20, &mc), 0);
	expect_usage(mc, 0, 0);
	expect_absent(mc, &a);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	expect_usage(mc, 700, 1);
	expect_cached(mc, &a);
	srv_modcache_close(mc);
	free(a.data);
}

static void expect_get(struct srv_modcache *mc, const char *tenant, const struct img *im,
		       int want)
{
	void *data = NULL;
	size_t len = 0;
	assert_int_equal(srv_modcache_get(mc, tenant, im->hash, &data, &len), want);
	if (want == 0) {
		assert_int_equal(len, im->len);
		assert_memory_equal(data, im->data, len);
	}
	free(data);
}

static void expect_owned(struct srv_modcache *mc, const char *tenant, uint64_t bytes,
			 uint64_t images)
{
	uint64_t b = 1, n = 1;
	assert_int_equal(srv_modcache_tenant_usage(mc, tenant, &b, &n), 0);
	assert_int_equal(b, bytes);
	assert_int_equal(n, images);
}

/*
 * Per tenant: an image is found by hash only by a tenant that put it itself (another
 * tenant's is RGPU_ENOTFOUND, as if not cached), stored once however many own it; the
 * operator (NULL) finds any. module_cache bounds what a tenant owns: its least recently used
 * image stops being its own, and leaves the cache once nobody owns it.
 */
static void test_tenants(void **state)
{
	struct img a = make(1000, 11), b = make(1000, 12), c = make(1000, 13), d = make(1000, 14);
	struct srv_modcache *mc;

	(void)state;
	assert_int_equal(srv_modcache_open(dir, 1 << 20, &mc), 0);
	assert_int_equal(srv_modcache_put(mc, "alice", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	expect_get(mc, "alice", &a, 0);
	expect_get(mc, "bob", &a, RGPU_ENOTFOUND);
	expect_get(mc, "", &a, RGPU_ENOTFOUND);
	expect_get(mc, NULL, &a, 0);
	/* bob ships it too: stored once, both own it */
	assert_int_equal(srv_modcache_put(mc, "bob", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	expect_get(mc, "bob", &a, 0);
	expect_usage(mc, 1000, 1);
	expect_owned(mc, "alice", 1000, 1);
	expect_owned(mc, "bob", 1000, 1);
	expect_owned(mc, "carol", 0, 0);

	/* bob may own 2000 bytes: his third image takes the place of his least recently used */
	assert_int_equal(srv_modcache_put(mc, "bob", 2000, b.hash, b.data, b.len), 0);
	expect_get(mc, "bob", &a, 0); /* a is now more recent than b */
	assert_int_equal(srv_modcache_put(mc, "bob", 2000, c.hash, c.data, c.len), 0);
	expect_owned(mc, "bob", 2000, 2);
	expect_get(mc, "bob", &b, RGPU_ENOTFOUND);
	expect_get(mc, NULL, &b, RGPU_ENOTFOUND); /* nobody owned b any more: gone */
	expect_usage(mc, 2000, 2);
	/* again: now a is his oldest; it stays in the cache, alice still owns it */
	assert_int_equal(srv_modcache_put(mc, "bob", 2000, d.hash, d.data, d.len), 0);
	expect_owned(mc, "bob", 2000, 2);
	expect_get(mc, "bob", &a, RGPU_ENOTFOUND);
	expect_get(mc, "alice", &a, 0);
	expect_usage(mc, 3000, 3);

	/* a tenant that may own nothing: refused, nothing stored or evicted */
	assert_int_equal(srv_modcache_put(mc, "dave", 0, b.hash, b.data, b.len), RGPU_ETOOBIG);
	expect_usage(mc, 3000, 3);
	expect_owned(mc, "dave", 0, 0);
	srv_modcache_close(mc);

	/* the global bound evicts the least recently used image (c: a was used since) */
	assert_int_equal(srv_modcache_open(dir, 2000, &mc), 0);
	expect_usage(mc, 2000, 2);
	expect_get(mc, NULL, &c, RGPU_ENOTFOUND);
	expect_owned(mc, "bob", 1000, 1);
	expect_owned(mc, "alice", 1000, 1);
	expect_get(mc, "bob", &d, 0);
	/* ... from every owner: a, now the oldest, goes from alice's images too */
	srv_modcache_close(mc);
	assert_int_equal(srv_modcache_open(dir, 1000, &mc), 0);
	expect_get(mc, "alice", &a, RGPU_ENOTFOUND);
	expect_owned(mc, "alice", 0, 0);
	expect_owned(mc, "bob", 1000, 1);
	srv_modcache_close(mc);
	free(a.data), free(b.data), free(c.data), free(d.data);
}

/* A cache of the layout before owners (images, uses, lru only): its images are dropped. */
static void test_unowned(void **state)
{
	struct img a = make(600, 21);
	struct srv_modcache *mc;
	char path[128];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi holders;
	MDB_val k = {RGPU_HASH_LEN, a.hash};

	(void)state;
	/* made by the cache, then its owner records taken away */
	assert_int_equal(srv_modcache_open(dir, 1 << 20, &mc), 0);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	srv_modcache_close(mc);
	snprintf(path, sizeof(path), "%s/modules", dir);
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 5);
	assert_int_equal(mdb_env_open(env, path, 0, 0640), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "holders", MDB_DUPSORT, &holders), 0);
	assert_int_equal(mdb_del(txn, holders, &k, NULL), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);

	assert_int_equal(srv_modcache_open(dir, 1 << 20, &mc), 0);
	expect_usage(mc, 0, 0);
	expect_get(mc, NULL, &a, RGPU_ENOTFOUND);
	srv_modcache_close(mc);
	free(a.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lru, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_version1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tenants, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unowned, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
