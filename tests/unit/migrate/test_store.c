/*
 * The checkpoint store (migrate/store.c) in a temporary directory: chunks stored once and
 * read back byte for byte (compressible, incompressible, all-zero, short), a checkpoint that
 * names a chunk already stored costs nothing, ids increase, an aborted checkpoint leaves no
 * manifest and its chunks go at gc while the committed ones' stay, a damaged chunk or manifest
 * is refused naming what is wrong, the map grows past its first size, and a reopened store
 * keeps everything.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/store.h"

#define CH RGPU_CHUNK_MAX

static char g_dir[64];

static uint8_t pat(uint64_t i, unsigned salt)
{
	return (uint8_t)(i * 7 + (i >> 8) * 13 + salt * 31 + 1);
}

/* kind 0: compressible pattern; 1: pseudo-random (incompressible); 2: zeros */
static uint8_t *make(size_t n, int kind, unsigned salt, uint8_t hash[RGPU_HASH_LEN])
{
	uint8_t *b = malloc(n ? n : 1);
	uint64_t x = 0x9e3779b97f4a7c15ull * (salt + 1);

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b[i] = kind == 0 ? pat(i, salt) : kind == 1 ? (uint8_t)x : 0;
	}
	rgpu_chunk_hash(b, n, hash);
	return b;
}

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "/tmp/rgpu-store-XXXXXX");
	return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd);
}

static void expect_chunk(struct rgpu_store *s, const uint8_t *h, const uint8_t *want, size_t n)
{
	uint8_t *buf = malloc(CH);
	size_t len = 0;

	assert_int_equal(rgpu_store_chunk_get(s, h, buf, CH, &len), 0);
	assert_int_equal(len, n);
	assert_memory_equal(buf, want, n);
	free(buf);
}

static void test_roundtrip(void **state)
{
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	struct rgpu_store_stats st;
	uint8_t h[4][RGPU_HASH_LEN], *d[4], *hl;
	size_t sizes[4] = {CH, CH, CH, 12345 * 4}, n, ml;
	uint64_t id1, id2, *ids;
	void *meta;

	(void)state;
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	for (int i = 0; i < 4; i++)
		d[i] = make(sizes[i], i == 3 ? 0 : i, (unsigned)i, h[i]);
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rgpu_ckpt_chunk(c, h[i], d[i], sizes[i]), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[0], d[0], sizes[0]), 0); /* named twice */
	assert_int_equal(rgpu_ckpt_commit(c, "job one", 7, &id1), 0);
	assert_int_equal(id1, 1);
	for (int i = 0; i < 4; i++)
		expect_chunk(s, h[i], d[i], sizes[i]);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	assert_int_equal(st.chunks, 4);
	assert_int_equal(st.zero_chunks, 1);
	assert_int_equal(st.raw_chunks, 1); /* the random one */
	assert_int_equal(st.data_bytes, 3 * CH + 12345 * 4);
	assert_true(st.stored_bytes < CH + 2 * 65536); /* random raw, the rest small */
	assert_int_equal(st.manifests, 1);

	/* a second checkpoint naming stored chunks by hash alone: nothing new is written */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[1], NULL, CH), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[2], NULL, CH), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "", 0, &id2), 0);
	assert_int_equal(id2, 2);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	assert_int_equal(st.chunks, 4);

	/* the manifests, as written */
	assert_int_equal(rgpu_store_manifest(s, id1, &meta, &ml, &hl, &n), 0);
	assert_int_equal(ml, 7);
	assert_memory_equal(meta, "job one", 7);
	assert_int_equal(n, 5);
	for (int i = 0; i < 4; i++)
		assert_memory_equal(hl + i * RGPU_HASH_LEN, h[i], RGPU_HASH_LEN);
	assert_memory_equal(hl + 4 * RGPU_HASH_LEN, h[0], RGPU_HASH_LEN);
	free(meta);
	free(hl);
	assert_int_equal(rgpu_store_list(s, &ids, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 2);
	free(ids);
	assert_int_equal(rgpu_store_manifest(s, 3, NULL, NULL, NULL, NULL), RGPU_ENOTFOUND);
	rgpu_store_close(s);

	/* reopened: everything is still there */
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	for (int i = 0; i < 4; i++)
		expect_chunk(s, h[i], d[i], sizes[i]);
	rgpu_store_close(s);
	for (int i = 0; i < 4; i++)
		free(d[i]);
}

static void test_abort_and_gc(void **state)
{
	enum { N = 33 }; /* 32 incompressible chunks fill one 64 MiB batch, which is written */
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	struct rgpu_store_stats st;
	uint8_t h[N][RGPU_HASH_LEN], *d = NULL, *buf = malloc(CH), h0[RGPU_HASH_LEN];
	uint64_t freed = 99, *ids, before, id;
	size_t n, len, listed;

	(void)state;
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	before = st.chunks;
	assert_int_equal(rgpu_store_list(s, &ids, &listed), 0);
	free(ids);
	/* chunks written, the manifest never committed: what a crash would leave */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	for (int i = 0; i < N; i++) {
		free(d);
		d = make(CH, 1, 100u + (unsigned)i, h[i]);
		if (i == 0)
			memcpy(h0, h[0], RGPU_HASH_LEN);
		assert_int_equal(rgpu_ckpt_chunk(c, h[i], d, CH), 0);
	}
	rgpu_ckpt_abort(c);
	assert_int_equal(rgpu_store_list(s, &ids, &n), 0);
	assert_int_equal(n, listed); /* no checkpoint appeared */
	free(ids);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	assert_int_equal(st.chunks, before + 32);
	assert_int_equal(rgpu_store_chunk_has(s, h[N - 1]), 0); /* its batch was dropped */
	/* a committed checkpoint names chunk 0 only (stored: by hash alone) */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h0, NULL, CH), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "x", 1, &id), 0);
	/* gc takes the 31 that no manifest names, and keeps chunk 0 and the earlier ones */
	assert_int_equal(rgpu_store_gc(s, &freed), 0);
	assert_int_equal(freed, 31);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	assert_int_equal(st.chunks, before + 1);
	assert_int_equal(rgpu_store_chunk_get(s, h[1], buf, CH, &len), RGPU_ENOTFOUND);
	assert_int_equal(rgpu_store_chunk_has(s, h0), 1);
	/* removing the checkpoint frees its chunk at the next gc */
	assert_int_equal(rgpu_store_remove(s, id), 0);
	assert_int_equal(rgpu_store_remove(s, id), RGPU_ENOTFOUND);
	assert_int_equal(rgpu_store_gc(s, &freed), 0);
	assert_int_equal(freed, 1);
	assert_int_equal(rgpu_store_chunk_has(s, h0), 0);
	/* naming a chunk by hash alone that is not stored is refused */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[2], NULL, CH), RGPU_ENOTFOUND);
	rgpu_ckpt_abort(c);
	rgpu_store_close(s);
	free(d);
	free(buf);
}

/* Damage a stored chunk and a manifest behind the store's back, through LMDB itself. */
static void poke(const char *db, const void *key, size_t klen, size_t cut, int flip)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	MDB_val k = {klen, (void *)key}, v;
	uint8_t *copy;

	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 4);
	mdb_env_set_mapsize(env, 1ull << 34);
	assert_int_equal(mdb_env_open(env, g_dir, 0, 0640), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &t), 0);
	assert_int_equal(mdb_dbi_open(t, db, 0, &dbi), 0);
	assert_int_equal(mdb_get(t, dbi, &k, &v), 0);
	copy = malloc(v.mv_size);
	memcpy(copy, v.mv_data, v.mv_size);
	if (flip)
		copy[v.mv_size - 1] ^= 0x40;
	v.mv_data = copy;
	v.mv_size -= cut;
	assert_int_equal(mdb_put(t, dbi, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(t), 0);
	mdb_env_close(env);
	free(copy);
}

static void test_damage(void **state)
{
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	uint8_t h[2][RGPU_HASH_LEN], *d[2], *buf = malloc(CH), key[8] = {0};
	uint64_t id;
	size_t len;

	(void)state;
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	d[0] = make(CH, 1, 200, h[0]); /* stored raw: a flipped byte stays a valid length */
	d[1] = make(CH, 0, 201, h[1]); /* stored compressed */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[0], d[0], CH), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[1], d[1], CH), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "meta", 4, &id), 0);
	rgpu_store_close(s);

	poke("chunks", h[0], RGPU_HASH_LEN, 0, 1); /* a bit flipped in the data */
	poke("chunks", h[1], RGPU_HASH_LEN, 5, 0); /* truncated */
	for (int i = 0; i < 8; i++)
		key[i] = (uint8_t)(id >> (56 - 8 * i));
	poke("manifests", key, 8, 0, 1); /* a bit flipped: its digest says so */
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	assert_int_equal(rgpu_store_manifest(s, id, NULL, NULL, NULL, NULL), RGPU_ECORRUPT);
	rgpu_store_close(s);
	poke("manifests", key, 8, 2, 0); /* truncated */

	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	assert_int_equal(rgpu_store_chunk_get(s, h[0], buf, CH, &len), RGPU_ECORRUPT);
	assert_int_equal(rgpu_store_chunk_get(s, h[1], buf, CH, &len), RGPU_ECORRUPT);
	assert_int_equal(rgpu_store_manifest(s, id, NULL, NULL, NULL, NULL), RGPU_ECORRUPT);
	/* gc deletes nothing while a manifest cannot be read */
	assert_int_equal(rgpu_store_gc(s, NULL), RGPU_ECORRUPT);
	assert_int_equal(rgpu_store_chunk_has(s, h[0]), 1);
	rgpu_store_close(s);
	free(d[0]);
	free(d[1]);
	free(buf);
}

/* More than the first map size (64 MiB here: RGPU_STORE_MAP_BYTES) of incompressible chunks:
 * the map doubles, twice. */
static void test_growth(void **state)
{
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	struct rgpu_store_stats st;
	uint8_t h[RGPU_HASH_LEN], *d;
	uint64_t id;

	(void)state;
	setenv("RGPU_STORE_MAP_BYTES", "67108864", 1);
	snprintf(g_dir + strlen(g_dir), sizeof(g_dir) - strlen(g_dir), "/grow");
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	unsetenv("RGPU_STORE_MAP_BYTES");
	d = make(CH, 1, 300, h);
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	for (unsigned i = 0; i < 80; i++) { /* 160 MiB */
		d[0] = (uint8_t)i;
		d[1] = (uint8_t)(i >> 8);
		rgpu_chunk_hash(d, CH, h);
		assert_int_equal(rgpu_ckpt_chunk(c, h, d, CH), 0);
	}
	assert_int_equal(rgpu_ckpt_commit(c, NULL, 0, &id), 0);
	assert_int_equal(rgpu_store_stats(s, &st), 0);
	assert_int_equal(st.map_size, 256ull << 20);
	assert_int_equal(st.raw_chunks, 80);
	expect_chunk(s, h, d, CH);
	rgpu_store_close(s);
	*strrchr(g_dir, '/') = '\0';
	free(d);
}

/*
 * A checkpoint whose list is known first (how a checkpoint of device memory is written): the
 * chunks the store lacks, each hash once; values encoded apart and put from several threads;
 * a commit that would name a chunk neither stored nor put is refused whole; a checkpoint pushed
 * back is found; the encoders' values read back.
 */
struct putter {
	struct rgpu_ckpt *c;
	uint8_t (*h)[RGPU_HASH_LEN];
	uint8_t **d;
	int first, n;
};

static void *put_some(void *arg)
{
	struct putter *p = arg;
	struct rgpu_chunk_enc *e;
	uint8_t *val = malloc(RGPU_CHUNK_VALUE_MAX);
	size_t vlen;

	if (!val || rgpu_chunk_enc_new(&e))
		return (void *)1;
	for (int i = p->first; i < p->first + p->n; i++)
		if (rgpu_chunk_encode(e, p->d[i], CH, val, &vlen) ||
		    rgpu_ckpt_put(p->c, p->h[i], val, vlen))
			return (void *)1;
	rgpu_chunk_enc_free(e);
	free(val);
	return NULL;
}

static void test_list_first(void **state)
{
	enum { N = 8 };
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	uint8_t h[N][RGPU_HASH_LEN], *d[N], list[N + 2][RGPU_HASH_LEN], bm[2], absent[RGPU_HASH_LEN];
	uint64_t id, found, added, bytes, stored;
	size_t nmissing;
	pthread_t t[2];
	struct putter p[2];
	void *r;

	(void)state;
	snprintf(g_dir + strlen(g_dir), sizeof(g_dir) - strlen(g_dir), "/list");
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	for (int i = 0; i < N; i++)
		d[i] = make(CH, i % 2, 400 + (unsigned)i, h[i]);
	/* chunks 0 and 1 are stored already */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[0], d[0], CH), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h[1], d[1], CH), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "a", 1, &id), 0);
	/* the list: all eight, then chunk 5 and chunk 0 again */
	for (int i = 0; i < N; i++)
		memcpy(list[i], h[i], RGPU_HASH_LEN);
	memcpy(list[N], h[5], RGPU_HASH_LEN);
	memcpy(list[N + 1], h[0], RGPU_HASH_LEN);
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_set_list(c, &list[0][0], N + 2), 0);
	assert_int_equal(rgpu_ckpt_missing(c, bm, &nmissing), 0);
	assert_int_equal(nmissing, N - 2);
	assert_int_equal(bm[0], 0xfc); /* 2..7; the repeated 5 at index 8 is not asked again */
	assert_int_equal(bm[1], 0x00);
	/* put from two threads at once */
	for (int k = 0; k < 2; k++) {
		p[k] = (struct putter){c, h, d, 2 + 3 * k, 3};
		assert_int_equal(pthread_create(&t[k], NULL, put_some, &p[k]), 0);
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(pthread_join(t[k], &r), 0);
		assert_null(r);
	}
	rgpu_ckpt_added(c, &added, &bytes, &stored);
	assert_int_equal(added, N - 2);
	assert_int_equal(bytes, (uint64_t)(N - 2) * CH);
	assert_int_equal(rgpu_ckpt_commit(c, "b", 1, &id), 0);
	for (int i = 0; i < N; i++)
		expect_chunk(s, h[i], d[i], CH);
	/* the same manifest pushed back is found; another is not */
	assert_int_equal(rgpu_store_find(s, &list[0][0], N + 2, "b", 1, &found), 1);
	assert_int_equal(found, id);
	assert_int_equal(rgpu_store_find(s, &list[0][0], N + 2, "c", 1, &found), 0);
	/* a list naming a chunk nobody put: the commit is refused, nothing listed */
	memset(absent, 0x77, sizeof(absent));
	memcpy(list[3], absent, RGPU_HASH_LEN);
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_set_list(c, &list[0][0], N + 2), 0);
	assert_int_equal(rgpu_ckpt_commit(c, "x", 1, &found), RGPU_ENOTFOUND);
	{
		uint64_t *ids;
		size_t n;
		assert_int_equal(rgpu_store_list(s, &ids, &n), 0);
		assert_int_equal(n, 2);
		free(ids);
	}
	rgpu_store_close(s);
	*strrchr(g_dir, '/') = '\0';
	for (int i = 0; i < N; i++)
		free(d[i]);
}

/* Encoded values: zero, raw and zstd, their headers, and the check against a hash. */
static void test_values(void **state)
{
	struct rgpu_chunk_enc *e;
	uint8_t *val = malloc(RGPU_CHUNK_VALUE_MAX), *buf = malloc(CH), h[RGPU_HASH_LEN], *d;
	size_t vlen, len;
	const char *why;

	(void)state;
	assert_int_equal(rgpu_chunk_enc_new(&e), 0);
	for (int kind = 0; kind < 3; kind++) {
		d = make(CH, kind, 500, h);
		assert_int_equal(rgpu_chunk_encode(e, d, CH, val, &vlen), 0);
		assert_int_equal(rgpu_chunk_value_header(val, vlen, &len, &why), 0);
		assert_int_equal(len, CH);
		assert_int_equal(rgpu_chunk_value_check(val, vlen, h, buf, &len, &why), 0);
		assert_memory_equal(buf, d, CH);
		assert_int_equal(rgpu_store_chunk_is_zero(val, vlen, &len), kind == 2);
		if (kind == 1)
			assert_int_equal(vlen, RGPU_CHUNK_HDR + CH); /* random: raw */
		/* a flipped byte: the hash (raw) or the decoder (zstd) finds it */
		val[vlen - 1] ^= 0x10;
		if (kind != 2)
			assert_int_equal(rgpu_chunk_value_check(val, vlen, h, buf, &len, &why),
					 RGPU_ECORRUPT);
		/* cut short: the header says so first */
		assert_int_equal(rgpu_chunk_value_header(val, vlen - 1, &len, &why), RGPU_ECORRUPT);
		assert_string_equal(why, vlen - 1 < RGPU_CHUNK_HDR
						 ? "no chunk header"
						 : "lengths that do not match its bytes (truncated?)");
		free(d);
	}
	rgpu_chunk_zero_value(CH, val, &vlen);
	assert_int_equal(vlen, RGPU_CHUNK_HDR);
	assert_int_equal(rgpu_store_chunk_is_zero(val, vlen, &len), 1);
	assert_int_equal(len, CH);
	rgpu_chunk_enc_free(e);
	free(val);
	free(buf);
}

/* gc waits for the checkpoints being written (gc.lock): it cannot delete a chunk one counts on. */
struct gcrun {
	struct rgpu_store *s;
	atomic_int done;
	uint64_t freed;
};

static void *run_gc(void *arg)
{
	struct gcrun *g = arg;
	rgpu_store_gc(g->s, &g->freed);
	atomic_store(&g->done, 1);
	return NULL;
}

static void test_gc_waits(void **state)
{
	struct rgpu_store *s;
	struct rgpu_ckpt *c, *w;
	struct gcrun g = {0};
	uint8_t h[RGPU_HASH_LEN], *d;
	pthread_t t;
	uint64_t id;

	(void)state;
	snprintf(g_dir + strlen(g_dir), sizeof(g_dir) - strlen(g_dir), "/gcw");
	assert_int_equal(rgpu_store_open(g_dir, &s), 0);
	d = make(CH, 1, 600, h);
	/* an orphan chunk: written, never committed */
	assert_int_equal(rgpu_ckpt_begin(s, &c), 0);
	assert_int_equal(rgpu_ckpt_chunk(c, h, d, CH), 0);
	assert_int_equal(rgpu_ckpt_commit(c, NULL, 0, &id), 0);
	assert_int_equal(rgpu_store_remove(s, id), 0);
	/* a checkpoint in progress finds it stored and names it without writing it */
	assert_int_equal(rgpu_ckpt_begin(s, &w), 0);
	assert_int_equal(rgpu_ckpt_chunk(w, h, NULL, CH), 0);
	g.s = s;
	assert_int_equal(pthread_create(&t, NULL, run_gc, &g), 0);
	usleep(200000);
	assert_int_equal(atomic_load(&g.done), 0); /* gc waits for the writer */
	assert_int_equal(rgpu_ckpt_commit(w, "w", 1, &id), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&g.done), 1);
	assert_int_equal(g.freed, 0); /* the chunk is named again */
	expect_chunk(s, h, d, CH);
	rgpu_store_close(s);
	*strrchr(g_dir, '/') = '\0';
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_abort_and_gc),
	    cmocka_unit_test(test_damage),
	    cmocka_unit_test(test_growth),
	    cmocka_unit_test(test_list_first),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_gc_waits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
