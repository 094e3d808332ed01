/*
 * The module image cache (server/modcache.c), tables of a store (migrate/store.c) in a
 * temporary directory: its byte bound, least-recently-used eviction (a load from the cache
 * counts as a use), an image larger than the bound, a smaller bound when the cache is opened
 * again; images scoped per tenant, a tenant's module_cache bound, and images that no tenant
 * owns; the cache beside checkpoints in the one environment (gc leaves images alone, the map
 * grows for a large image). Byte counts are exact.
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
#include "rgpu/store.h"
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
static struct rgpu_store *store;

/* the cache, in the store at dir (opened with it) */
static struct srv_modcache *open_cache(uint64_t max_bytes)
{
	struct srv_modcache *mc = NULL;
	assert_int_equal(rgpu_store_open(dir, &store), 0);
	assert_int_equal(srv_modcache_open(store, max_bytes, &mc), 0);
	return mc;
}

static void close_cache(struct srv_modcache *mc)
{
	srv_modcache_close(mc);
	rgpu_store_close(store);
	store = NULL;
}

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
	mc = open_cache(3000);
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
	close_cache(mc);

	/* opened again with a smaller bound: the least recently used (e) goes at once */
	mc = open_cache(1200);
	expect_usage(mc, 1000, 1);
	expect_absent(mc, &e);
	expect_cached(mc, &a);
	close_cache(mc);

	free(a.data), free(b.data), free(c.data), free(d.data), free(e.data), free(big.data);
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
	mc = open_cache(1 << 20);
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
	close_cache(mc);

	/* the global bound evicts the least recently used image (c: a was used since) */
	mc = open_cache(2000);
	expect_usage(mc, 2000, 2);
	expect_get(mc, NULL, &c, RGPU_ENOTFOUND);
	expect_owned(mc, "bob", 1000, 1);
	expect_owned(mc, "alice", 1000, 1);
	expect_get(mc, "bob", &d, 0);
	/* ... from every owner: a, now the oldest, goes from alice's images too */
	close_cache(mc);
	mc = open_cache(1000);
	expect_get(mc, "alice", &a, RGPU_ENOTFOUND);
	expect_owned(mc, "alice", 0, 0);
	expect_owned(mc, "bob", 1000, 1);
	close_cache(mc);
	free(a.data), free(b.data), free(c.data), free(d.data);
}

static int del_holder(MDB_txn *txn, void *arg)
{
	MDB_dbi holders;
	MDB_val k = {RGPU_HASH_LEN, arg};
	int rc = mdb_dbi_open(txn, "holders", MDB_DUPSORT, &holders);
	return rc ? rc : mdb_del(txn, holders, &k, NULL);
}

/* An image whose owner records are lost: dropped when the cache opens. */
static void test_unowned(void **state)
{
	struct img a = make(600, 21);
	struct srv_modcache *mc;

	(void)state;
	mc = open_cache(1 << 20);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	assert_int_equal(rgpu_store_write(store, "test", del_holder, a.hash, 0, 1), 0);
	close_cache(mc);

	mc = open_cache(1 << 20);
	expect_usage(mc, 0, 0);
	expect_get(mc, NULL, &a, RGPU_ENOTFOUND);
	close_cache(mc);
	free(a.data);
}

/*
 * One environment: a checkpoint and the cache side by side. gc keeps the checkpoint's chunk;
 * once the checkpoint is removed it collects the chunk and leaves the images; an image
 * larger than the first map grows it (RGPU_STORE_MAP_BYTES: a 1 MiB first map).
 */
static void test_with_checkpoints(void **state)
{
	struct img a = make(3000, 31), big = make(3 << 20, 32);
	uint8_t *chunk = malloc(RGPU_CHUNK_MAX), hash[RGPU_HASH_LEN];
	struct rgpu_store_stats st;
	struct srv_modcache *mc;
	struct rgpu_ckpt *c;
	uint64_t id = 0, freed = 0;

	(void)state;
	assert_non_null(chunk);
	setenv("RGPU_STORE_MAP_BYTES", "1048576", 1);
	mc = open_cache(8 << 20);
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, a.hash, a.data, a.len), 0);
	/* a checkpoint of one 4096-byte chunk, and a chunk no checkpoint names (a crash's) */
	for (size_t i = 0; i < 4096; i++)
		chunk[i] = (uint8_t)(i * 13 + 5);
	rgpu_chunk_hash(chunk, 4096, hash);
	assert_int_equal(rgpu_ckpt_begin(store, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, hash, chunk, 4096), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "m", 1, &id), 0);
	assert_int_equal(rgpu_store_gc(store, &freed), 0);
	assert_int_equal(freed, 0);
	assert_int_equal(rgpu_store_chunk_has(store, hash), 1);
	expect_get(mc, "", &a, 0);
	assert_int_equal(rgpu_store_remove(store, id), 0);
	assert_int_equal(rgpu_store_gc(store, &freed), 0);
	assert_int_equal(freed, 1);
	expect_get(mc, "", &a, 0);
	expect_usage(mc, 3000, 1);

	/* 3 MiB into a 1 MiB map: grown, and kept */
	assert_int_equal(srv_modcache_put(mc, "", SRV_UNLIMITED, big.hash, big.data, big.len), 0);
	assert_int_equal(rgpu_store_stats(store, &st), 0);
	assert_true(st.map_size >= (4u << 20));
	close_cache(mc);
	unsetenv("RGPU_STORE_MAP_BYTES");
	mc = open_cache(8 << 20);
	expect_get(mc, "", &big, 0);
	expect_get(mc, "", &a, 0);
	expect_usage(mc, 3000 + (3 << 20), 2);
	close_cache(mc);
	free(a.data), free(big.data), free(chunk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lru, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tenants, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unowned, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_with_checkpoints, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
