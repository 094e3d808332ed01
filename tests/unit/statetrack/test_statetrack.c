/*
 * Unit tests of the state log (testing.md, tier 1): record, prune, replay order, round trip,
 * digest sensitivity, torn tails, hostile headers and lengths, journals, attributes, function
 * parents, st_remove_each's order, st_compare, st_rec_describe, and 100k objects.
 * Every record is patterned (distinct non-zero values in every field) so that a field lost,
 * swapped or truncated anywhere shows up as a failed comparison.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "rgpu/err.h"
#include "rgpu/statetrack.h"
#include "rgpu/util.h"
#include "statetrack.pb-c.h"

/* --- fixtures ------------------------------------------------------------------------------ */

#define NKINDS 16 /* records in the all-kinds set */

static void fill_hash(uint8_t h[ST_HASH_LEN], uint8_t seed)
{
	for (int i = 0; i < ST_HASH_LEN; i++)
		h[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

/*
 * One record of every kind, each field patterned: two modules (a module and a library) and two
 * functions (one of the module, one of the library's kernel: cuKernelGetFunction).
 */
static void all_kinds(struct st_rec r[NKINDS], bool fill_spare)
{
	memset(r, 0, sizeof(struct st_rec) * NKINDS);
	r[0] = (struct st_rec){
	    .kind = ST_KIND_CONTEXT, .id = 0x100, .context = {.device = 1, .flags = 0x5}};
	r[1] = (struct st_rec){.kind = ST_KIND_ALLOC,
			       .id = 0x200,
			       .ctx = 0x100,
			       .alloc = {0x600000001000ull, 0x300000, 1, 0x2}};
	r[2] = (struct st_rec){.kind = ST_KIND_VMM_MAP,
			       .id = 0x300,
			       .ctx = 0x100,
			       .vmm = {0x600010000000ull, 0x200000, 1}};
	r[3] = (struct st_rec){.kind = ST_KIND_MODULE,
			       .id = 0x400,
			       .ctx = 0x100,
			       .module = {123456, 0},
			       .has_hash = true};
	fill_hash(r[3].hash, 3);
	r[4] = (struct st_rec){
	    .kind = ST_KIND_MODULE, .id = 0x401, .module = {98765432, 1}, .has_hash = true};
	fill_hash(r[4].hash, 4);
	r[5] = (struct st_rec){.kind = ST_KIND_FUNCTION,
			       .id = 0x500,
			       .parent = 0x400,
			       .ctx = 0x100,
			       .name = "_Z6kernelPfi"};
	r[6] = (struct st_rec){
	    .kind = ST_KIND_KERNEL, .id = 0x600, .parent = 0x401, .name = "_Z6vecAddPKfS0_Pfi"};
	r[7] = (struct st_rec){.kind = ST_KIND_GLOBAL,
			       .id = 0x700,
			       .parent = 0x400,
			       .ctx = 0x100,
			       .name = "devCounter",
			       .global = {0x7f0012340000ull, 4096}};
	r[8] = (struct st_rec){.kind = ST_KIND_STREAM,
			       .id = 0x800,
			       .ctx = 0x100,
			       .stream = {.flags = 1, .priority = -2}};
	r[9] = (struct st_rec){
	    .kind = ST_KIND_EVENT, .id = 0x900, .ctx = 0x100, .event = {.flags = 0x2}};
	r[10] = (struct st_rec){
	    .kind = ST_KIND_MEMPOOL, .id = 0xa00, .ctx = 0x100, .pool = {.device = 1}};
	r[11] = (struct st_rec){.kind = ST_KIND_GRAPH, .id = 0xb00, .graph = {.flags = 0x10}};
	r[12] =
	    (struct st_rec){.kind = ST_KIND_GRAPH_EXEC, .id = 0xc00, .graph_exec = {.flags = 0x3}};
	r[13] = (struct st_rec){.kind = ST_KIND_HOST_CALLBACK,
				.id = 0xd00,
				.parent = 0x800,
				.host_cb = {0x401000, 0x7ffd12345678ull}};
	r[14] = (struct st_rec){.kind = ST_KIND_ATTR, /* a context limit: the malloc heap */
				.id = 0xe00,
				.parent = 0x100,
				.attr = {.key = 2, .value = 64ull << 20}};
	r[15] = (struct st_rec){.kind = ST_KIND_FUNCTION,
				.id = 0x501,
				.parent = 0x600,
				.ctx = 0x100,
				.name = "_Z6vecAddPKfS0_Pfi"};
	if (fill_spare) /* every slot, the last one included, carries a value */
		for (int i = 0; i < NKINDS; i++)
			for (int j = 0; j < ST_NFIELDS; j++)
				if (!r[i].f[j])
					r[i].f[j] = 0xa5a5000000000000ull | (uint64_t)(i << 8 | j);
}

static struct st_log *log_of(const struct st_rec *r, int n)
{
	struct st_log *log;

	assert_int_equal(st_log_new(&log), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(st_add(log, &r[i]), 0);
	return log;
}

static void assert_rec_equal(const struct st_rec *a, const struct st_rec *b)
{
	assert_int_equal(a->kind, b->kind);
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->parent, b->parent);
	assert_int_equal(a->ctx, b->ctx);
	for (int j = 0; j < ST_NFIELDS; j++)
		assert_int_equal(a->f[j], b->f[j]);
	if (a->name && a->name[0]) {
		assert_non_null(b->name);
		assert_string_equal(a->name, b->name);
	} else {
		assert_null(b->name);
	}
	assert_int_equal(a->has_hash, b->has_hash);
	if (a->has_hash)
		assert_memory_equal(a->hash, b->hash, ST_HASH_LEN);
}

struct collect {
	const struct st_rec *recs[64];
	uint64_t ids[200000];
	size_t n;
};

static int collect_fn(const struct st_rec *rec, void *arg)
{
	struct collect *c = arg;

	if (c->n < 64)
		c->recs[c->n] = rec;
	c->ids[c->n++] = rec->id;
	return 0;
}

/* The log holds exactly want[0..n) in this order, field for field. */
static void assert_log_is(struct st_log *log, const struct st_rec *want, int n)
{
	static struct collect c;

	c.n = 0;
	assert_int_equal(st_foreach(log, collect_fn, &c), 0);
	assert_int_equal(c.n, n);
	assert_int_equal(st_count(log), n);
	for (int i = 0; i < n; i++) {
		assert_rec_equal(&want[i], c.recs[i]);
		assert_ptr_equal(st_find(log, want[i].id), c.recs[i]);
	}
}

static void assert_ids_are(struct st_log *log, const uint64_t *ids, size_t n)
{
	static struct collect c;

	c.n = 0;
	assert_int_equal(st_foreach(log, collect_fn, &c), 0);
	assert_int_equal(c.n, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(c.ids[i], ids[i]);
}

static void digest_of(struct st_log *log, uint8_t d[ST_DIGEST_LEN])
{
	st_digest(log, d);
}

/* Re-sign a stream header after a test edited it. */
static void resign_header(uint8_t *buf)
{
	wr_le32(buf + 20, (uint32_t)crc32(0, buf, 20));
}

/* --- record --------------------------------------------------------------------------------- */

static void test_record(void **state)
{
	struct st_rec r[NKINDS], bad;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);
	const struct st_rec *f;

	assert_log_is(log, r, NKINDS);
	/* the log keeps its own copies */
	f = st_find(log, 0x500);
	assert_ptr_not_equal(f->name, r[5].name);
	assert_int_equal(st_find(log, 0x800)->stream.priority, -2);
	assert_null(st_find(log, 0x502));
	assert_null(st_find(log, 0));

	assert_int_equal(st_add(log, &r[3]), RGPU_EEXIST);
	bad = (struct st_rec){.kind = ST_KIND_ALLOC, .id = 0x201, .ctx = 0x999};
	assert_int_equal(st_add(log, &bad), RGPU_ENOTFOUND);
	bad = (struct st_rec){.kind = ST_KIND_ALLOC, .id = 0x201, .ctx = 0x200};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL); /* ctx is not a context */
	bad = (struct st_rec){.kind = ST_KIND_ALLOC, .id = 0};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	bad = (struct st_rec){.kind = ST_KIND_TOMBSTONE, .id = 0x201};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	bad = (struct st_rec){.kind = ST_KIND_MAX + 1, .id = 0x201};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	bad = (struct st_rec){.kind = ST_KIND_FUNCTION, .id = 0x201, .parent = 0x400};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL); /* no name */
	bad = (struct st_rec){.kind = ST_KIND_FUNCTION, .id = 0x201, .parent = 0x800, .name = "f"};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL); /* parent is not a module */
	bad = (struct st_rec){.kind = ST_KIND_GLOBAL, .id = 0x201, .name = "g"};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL); /* no parent */
	bad = (struct st_rec){.kind = ST_KIND_MODULE, .id = 0x201};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL); /* no hash */

	char *longname = malloc(ST_NAME_MAX + 2);
	memset(longname, 'x', ST_NAME_MAX + 1);
	longname[ST_NAME_MAX + 1] = '\0';
	bad = (struct st_rec){
	    .kind = ST_KIND_FUNCTION, .id = 0x201, .parent = 0x400, .name = longname};
	assert_int_equal(st_add(log, &bad), RGPU_ETOOBIG);
	longname[ST_NAME_MAX] = '\0'; /* exactly the limit is fine */
	assert_int_equal(st_add(log, &bad), 0);
	assert_int_equal(strlen(st_find(log, 0x201)->name), ST_NAME_MAX);
	{ /* the longest name fits in a frame */
		uint8_t *buf;
		size_t len;
		struct st_log *back;
		assert_int_equal(st_serialize(log, &buf, &len), 0);
		assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
		assert_string_equal(st_find(back, 0x201)->name, st_find(log, 0x201)->name);
		free(buf);
		st_log_free(back);
	}
	free(longname);

	/* refused adds changed nothing */
	assert_int_equal(st_count(log), NKINDS + 1);
	assert_int_equal(st_remove(log, 0x201), 0);
	assert_log_is(log, r, NKINDS);

	/* an empty name is no name; a hash without has_hash is not kept */
	bad = (struct st_rec){.kind = ST_KIND_EVENT, .id = 0x901, .ctx = 0x100, .name = ""};
	bad.hash[0] = 0xff;
	assert_int_equal(st_add(log, &bad), 0);
	assert_null(st_find(log, 0x901)->name);
	assert_int_equal(st_find(log, 0x901)->hash[0], 0);

	assert_int_equal(st_add(NULL, &r[0]), RGPU_EINVAL);
	assert_int_equal(st_add(log, NULL), RGPU_EINVAL);
	assert_int_equal(st_log_new(NULL), RGPU_EINVAL);
	st_log_free(log);
	st_log_free(NULL);
}

static void test_update(void **state)
{
	struct st_rec r[NKINDS], u;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);
	uint8_t d0[ST_DIGEST_LEN], d1[ST_DIGEST_LEN];

	digest_of(log, d0);
	u = r[0];
	u.context.flags = 0x9;
	assert_int_equal(st_update(log, &u), 0);
	r[0] = u;
	assert_log_is(log, r, NKINDS); /* same place in creation order */
	digest_of(log, d1);
	assert_memory_not_equal(d0, d1, ST_DIGEST_LEN);

	u = r[7];
	u.name = "renamed";
	u.global.addr = 0x7f0012350000ull;
	assert_int_equal(st_update(log, &u), 0);
	r[7] = u;
	assert_log_is(log, r, NKINDS);

	u.parent = 0x401;
	assert_int_equal(st_update(log, &u), RGPU_EINVAL);
	u = r[7];
	u.kind = ST_KIND_FUNCTION;
	assert_int_equal(st_update(log, &u), RGPU_EINVAL);
	u = r[7];
	u.name = NULL;
	assert_int_equal(st_update(log, &u), RGPU_EINVAL);
	u.id = 0x777;
	assert_int_equal(st_update(log, &u), RGPU_ENOTFOUND);
	assert_log_is(log, r, NKINDS);
	st_log_free(log);
}

/* --- prune ---------------------------------------------------------------------------------- */

static void test_prune(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *a, *ab;
	uint8_t da[ST_DIGEST_LEN], dab[ST_DIGEST_LEN];

	all_kinds(r, true);
	/* A = every kind; B = one more allocation, created and freed */
	a = log_of(r, NKINDS);
	ab = log_of(r, NKINDS);
	struct st_rec b = {.kind = ST_KIND_ALLOC,
			   .id = 0x201,
			   .ctx = 0x100,
			   .alloc = {0x600000400000ull, 4096, 1, 0}};
	digest_of(a, da);
	assert_int_equal(st_add(ab, &b), 0);
	digest_of(ab, dab);
	assert_memory_not_equal(da, dab, ST_DIGEST_LEN);
	assert_int_equal(st_remove(ab, 0x201), 0);
	digest_of(ab, dab);
	assert_memory_equal(da, dab, ST_DIGEST_LEN);
	assert_log_is(ab, r, NKINDS);
	assert_null(st_find(ab, 0x201));
	assert_int_equal(st_remove(ab, 0x201), RGPU_ENOTFOUND);

	/* B freed from the middle: created before the others, freed after */
	st_log_free(ab);
	assert_int_equal(st_log_new(&ab), 0);
	assert_int_equal(st_add(ab, &r[0]), 0);
	assert_int_equal(st_add(ab, &b), 0);
	for (int i = 1; i < NKINDS; i++)
		assert_int_equal(st_add(ab, &r[i]), 0);
	assert_int_equal(st_remove(ab, 0x201), 0);
	digest_of(ab, dab);
	assert_memory_equal(da, dab, ST_DIGEST_LEN);

	/* an empty log after everything died is the empty log */
	struct st_log *e;
	uint8_t de[ST_DIGEST_LEN];
	assert_int_equal(st_log_new(&e), 0);
	digest_of(e, de);
	assert_int_equal(st_remove(ab, 0x100), 0); /* the context takes the rest with it... */
	assert_int_equal(st_count(ab), 4);	   /* ...but the library, kernel and graphs */
	assert_int_equal(st_remove(ab, 0x401), 0); /* the library takes its kernel */
	assert_int_equal(st_count(ab), 2);
	assert_int_equal(st_remove(ab, 0xb00), 0);
	assert_int_equal(st_remove(ab, 0xc00), 0);
	assert_int_equal(st_count(ab), 0);
	digest_of(ab, dab);
	assert_memory_equal(de, dab, ST_DIGEST_LEN);
	st_log_free(e);
	st_log_free(a);
	st_log_free(ab);
}

/* Removing a module takes its functions and globals; a context takes everything in it. */
static void test_cascade(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);

	assert_int_equal(st_remove(log, 0x400), 0);
	/* gone: module 0x400, function 0x500, global 0x700 */
	uint64_t after_mod[] = {0x100, 0x200, 0x300, 0x401, 0x600, 0x800, 0x900,
				0xa00, 0xb00, 0xc00, 0xd00, 0xe00, 0x501};
	assert_ids_are(log, after_mod, ARRAY_SIZE(after_mod));
	assert_null(st_find(log, 0x500));
	assert_null(st_find(log, 0x700));

	/* the stream's host callback goes with the stream */
	assert_int_equal(st_remove(log, 0x800), 0);
	uint64_t after_stream[] = {0x100, 0x200, 0x300, 0x401, 0x600, 0x900,
				   0xa00, 0xb00, 0xc00, 0xe00, 0x501};
	assert_ids_are(log, after_stream, ARRAY_SIZE(after_stream));

	/*
	 * context: allocation, mapping, event, pool, its limit and the kernel's function in it;
	 * not the context-free library and graphs
	 */
	assert_int_equal(st_remove(log, 0x100), 0);
	uint64_t after_ctx[] = {0x401, 0x600, 0xb00, 0xc00};
	assert_ids_are(log, after_ctx, ARRAY_SIZE(after_ctx));

	/* the ids are free again and the table still works */
	assert_int_equal(st_add(log, &r[0]), 0);
	assert_int_equal(st_add(log, &r[1]), 0);
	uint64_t again[] = {0x401, 0x600, 0xb00, 0xc00, 0x100, 0x200};
	assert_ids_are(log, again, ARRAY_SIZE(again));
	st_log_free(log);
}

/* --- replay order --------------------------------------------------------------------------- */

static void test_replay_order(void **state)
{
	struct st_log *log;
	uint64_t want[64];
	size_t n = 0;

	assert_int_equal(st_log_new(&log), 0);
	struct st_rec c = {.kind = ST_KIND_CONTEXT, .id = 1};
	assert_int_equal(st_add(log, &c), 0);
	want[n++] = 1;
	/* ids deliberately not in creation order */
	uint64_t ids[] = {90, 12, 55, 3, 77, 41, 8, 66, 23, 100};
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		struct st_rec a = {.kind = ST_KIND_ALLOC,
				   .id = ids[i],
				   .ctx = 1,
				   .alloc = {0x600000000000ull + ids[i] * 0x1000, 0x100, 0, 0}};
		assert_int_equal(st_add(log, &a), 0);
		if (i % 3 == 1) /* every third one dies at once, one frees an older one */
			assert_int_equal(st_remove(log, ids[i - 1]), 0);
	}
	/* removed: 90 (at i=1), 3 (i=4), 8 (i=7); then more, interleaved */
	assert_int_equal(st_remove(log, 100), 0);
	struct st_rec e = {.kind = ST_KIND_EVENT, .id = 90, .ctx = 1}; /* an id reused */
	assert_int_equal(st_add(log, &e), 0);
	assert_int_equal(st_remove(log, 12), 0);
	uint64_t expect[] = {1, 55, 77, 41, 66, 23, 90};
	for (size_t i = 1; i < ARRAY_SIZE(expect); i++)
		want[n++] = expect[i];
	assert_ids_are(log, want, n);
	assert_int_equal(st_find(log, 90)->kind, ST_KIND_EVENT);

	/* the same order survives a round trip */
	uint8_t *buf;
	size_t len;
	struct st_log *back;
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
	assert_ids_are(back, want, n);
	free(buf);
	st_log_free(back);
	st_log_free(log);
}

static int stop_at_third(const struct st_rec *rec, void *arg)
{
	int *calls = arg;
	return ++*calls == 3 ? 42 : 0;
}

static void test_foreach_stop(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);
	int calls = 0;

	assert_int_equal(st_foreach(log, stop_at_third, &calls), 42);
	assert_int_equal(calls, 3);
	assert_int_equal(st_foreach(log, NULL, NULL), RGPU_EINVAL);
	st_log_free(log);
}

/* --- round trip ----------------------------------------------------------------------------- */

static void round_trip(const struct st_rec *r, int n)
{
	struct st_log *log = log_of(r, n), *back = NULL;
	struct st_load_result res;
	uint8_t d0[ST_DIGEST_LEN], d1[ST_DIGEST_LEN], *buf;
	size_t len, sum = ST_STREAM_HDR_LEN;

	assert_int_equal(st_serialize(log, &buf, &len), 0);
	for (int i = 0; i < n; i++)
		sum += st_frame_size(&r[i]);
	assert_int_equal(len, sum);
	assert_int_equal(rd_le32(buf), ST_STREAM_MAGIC);
	assert_int_equal(rd_le16(buf + 4), ST_STREAM_VERSION);
	assert_int_equal(rd_le16(buf + 6), 0);
	assert_int_equal(rd_le64(buf + 8), n);

	assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
	assert_int_equal(res.records, n);
	assert_int_equal(res.valid_bytes, len);
	assert_false(res.torn);
	assert_false(res.open);
	assert_log_is(back, r, n);
	digest_of(log, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	free(buf);
	st_log_free(back);
	st_log_free(log);
}

static void test_round_trip(void **state)
{
	struct st_rec r[NKINDS];

	all_kinds(r, false); /* realistic: trailing slots zero */
	round_trip(r, NKINDS);
	all_kinds(r, true); /* every slot set, all-ones and top bits included */
	r[1].alloc.size = UINT64_MAX;
	r[1].id = UINT64_MAX;
	r[8].stream.priority = INT64_MIN;
	round_trip(r, NKINDS);
	round_trip(r, 0); /* the empty log */
}

/* --- digest sensitivity --------------------------------------------------------------------- */

static void assert_digest_differs(const struct st_rec *r, const uint8_t base[ST_DIGEST_LEN])
{
	struct st_log *log = log_of(r, NKINDS);
	uint8_t d[ST_DIGEST_LEN];

	digest_of(log, d);
	assert_memory_not_equal(base, d, ST_DIGEST_LEN);
	st_log_free(log);
}

static void test_digest_sensitivity(void **state)
{
	struct st_rec r[NKINDS], m[NKINDS];
	char names[NKINDS][64];
	uint8_t base[ST_DIGEST_LEN], again[ST_DIGEST_LEN];
	struct st_log *log;

	all_kinds(r, true);
	log = log_of(r, NKINDS);
	digest_of(log, base);
	st_log_free(log);
	/* deterministic: a second log with the same records agrees */
	log = log_of(r, NKINDS);
	digest_of(log, again);
	st_log_free(log);
	assert_memory_equal(base, again, ST_DIGEST_LEN);

	for (int i = 0; i < NKINDS; i++) {
		/* every byte of every kind-specific slot */
		for (int j = 0; j < ST_NFIELDS; j++) {
			for (int b = 0; b < 8; b++) {
				memcpy(m, r, sizeof(m));
				m[i].f[j] ^= 1ull << (8 * b);
				assert_digest_differs(m, base);
			}
		}
		/* every byte of the hash, and its presence */
		if (r[i].has_hash) {
			for (int b = 0; b < ST_HASH_LEN; b++) {
				memcpy(m, r, sizeof(m));
				m[i].hash[b] ^= 0x01;
				assert_digest_differs(m, base);
			}
		}
		/* every byte of the name, and its length */
		if (r[i].name) {
			size_t nl = strlen(r[i].name);
			for (size_t b = 0; b < nl; b++) {
				memcpy(m, r, sizeof(m));
				strcpy(names[i], r[i].name);
				names[i][b] ^= 0x01;
				m[i].name = names[i];
				assert_digest_differs(m, base);
			}
			memcpy(m, r, sizeof(m));
			strcpy(names[i], r[i].name);
			names[i][nl - 1] = '\0';
			m[i].name = names[i];
			assert_digest_differs(m, base);
		}
		/* the id of every record that nothing refers to */
		if (r[i].kind != ST_KIND_CONTEXT && r[i].kind != ST_KIND_MODULE &&
		    r[i].kind != ST_KIND_STREAM && r[i].kind != ST_KIND_KERNEL) {
			for (int b = 0; b < 8; b++) {
				memcpy(m, r, sizeof(m));
				m[i].id ^= 1ull << (8 * b + 7);
				assert_digest_differs(m, base);
			}
		}
	}
	/* ctx and parent: point the allocation at no context, the global at the library */
	memcpy(m, r, sizeof(m));
	m[1].ctx = 0;
	assert_digest_differs(m, base);
	memcpy(m, r, sizeof(m));
	m[7].parent = 0x401;
	assert_digest_differs(m, base);
	/* the kind: an event recorded as a stream */
	memcpy(m, r, sizeof(m));
	m[9].kind = ST_KIND_STREAM;
	assert_digest_differs(m, base);
	/* order: two independent records swapped */
	memcpy(m, r, sizeof(m));
	m[11] = r[12];
	m[12] = r[11];
	assert_digest_differs(m, base);
}

/* --- torn tail ------------------------------------------------------------------------------ */

/* Offsets at which each frame of the serialized r[0..n) ends. */
static void frame_ends(const struct st_rec *r, int n, size_t *ends)
{
	size_t off = ST_STREAM_HDR_LEN;

	for (int i = 0; i < n; i++) {
		off += st_frame_size(&r[i]);
		ends[i] = off;
	}
}

static void test_torn_tail_every_cut(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log, *back;
	struct st_load_result res;
	size_t len, ends[NKINDS];
	uint8_t *buf;

	all_kinds(r, true);
	log = log_of(r, NKINDS);
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	frame_ends(r, NKINDS, ends);
	assert_int_equal(ends[NKINDS - 1], len);

	for (size_t cut = 0; cut <= len; cut++) {
		/* a copy of exactly cut bytes, so ASan sees any read past the cut */
		uint8_t *part = malloc(cut ? cut : 1);
		int k = 0;

		memcpy(part, buf, cut);
		while (k < NKINDS && ends[k] <= cut)
			k++;
		back = NULL;
		assert_int_equal(st_deserialize(part, cut, &back, &res), 0);
		assert_int_equal(res.records, k);
		assert_int_equal(res.valid_bytes,
				 k ? ends[k - 1]
				   : (cut < ST_STREAM_HDR_LEN ? 0 : ST_STREAM_HDR_LEN));
		assert_int_equal(res.torn, cut < len);
		assert_log_is(back, r, k);
		st_log_free(back);

		/* without a result to report it in, a torn stream is refused whole */
		back = (struct st_log *)0x1;
		assert_int_equal(st_deserialize(part, cut, &back, NULL),
				 cut < len ? RGPU_ECORRUPT : 0);
		if (cut < len)
			assert_ptr_equal(back, (struct st_log *)0x1);
		else
			st_log_free(back);
		free(part);
	}
	free(buf);
	st_log_free(log);
}

static void test_torn_tail_flip(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log, *back;
	struct st_load_result res;
	size_t len, ends[NKINDS];
	uint8_t *buf;
	static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x10};

	all_kinds(r, true);
	log = log_of(r, NKINDS);
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	frame_ends(r, NKINDS, ends);

	/* every byte of the last frame, several bit patterns: that frame is dropped */
	for (size_t off = ends[NKINDS - 2]; off < len; off++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			buf[off] ^= flips[f];
			assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
			assert_int_equal(res.records, NKINDS - 1);
			assert_int_equal(res.valid_bytes, ends[NKINDS - 2]);
			assert_true(res.torn);
			assert_log_is(back, r, NKINDS - 1);
			st_log_free(back);
			buf[off] ^= flips[f];
		}
	}
	/* a flip in a middle frame keeps what came before it */
	buf[ends[4] + 9] ^= 0x20;
	assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
	assert_int_equal(res.records, 5);
	assert_int_equal(res.valid_bytes, ends[4]);
	assert_true(res.torn);
	assert_log_is(back, r, 5);
	st_log_free(back);
	free(buf);
	st_log_free(log);
}

/* --- hostile headers and lengths ------------------------------------------------------------ */

static void test_bad_magic_version(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS), *back;
	struct st_load_result res;
	uint8_t *buf;
	size_t len;

	assert_int_equal(st_serialize(log, &buf, &len), 0);

	for (int b = 0; b < 4; b++) {
		buf[b] ^= 0x40;
		back = (struct st_log *)0x1;
		assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_EMAGIC);
		assert_ptr_equal(back, (struct st_log *)0x1);
		/* even when the stream is cut inside its header */
		assert_int_equal(st_deserialize(buf, (size_t)b + 1, &back, &res), RGPU_EMAGIC);
		buf[b] ^= 0x40;
	}
	/* another version, correctly signed: refused before anything is read */
	wr_le16(buf + 4, ST_STREAM_VERSION + 1);
	resign_header(buf);
	back = (struct st_log *)0x1;
	assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_EVERSION);
	assert_int_equal(st_deserialize(buf, 5, &back, &res), RGPU_EVERSION);
	assert_ptr_equal(back, (struct st_log *)0x1);
	wr_le16(buf + 4, ST_STREAM_VERSION);
	resign_header(buf);

	/* a header whose CRC fails, an unknown flag, a non-zero reserved field */
	buf[9] ^= 0x01;
	assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_ECORRUPT);
	buf[9] ^= 0x01;
	wr_le16(buf + 6, 0x8000);
	resign_header(buf);
	assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_EUNSUPPORTED);
	wr_le16(buf + 6, 0);
	wr_le32(buf + 16, 1);
	resign_header(buf);
	assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_ECORRUPT);
	wr_le32(buf + 16, 0);
	resign_header(buf);
	assert_ptr_equal(back, (struct st_log *)0x1);

	/* restored: reads again */
	assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
	assert_int_equal(res.records, NKINDS);
	st_log_free(back);

	assert_int_equal(st_deserialize(NULL, 5, &back, &res), RGPU_EINVAL);
	assert_int_equal(st_deserialize(buf, len, NULL, &res), RGPU_EINVAL);
	free(buf);
	st_log_free(log);
}

static void test_length_beyond_buffer(void **state)
{
	struct st_rec r[NKINDS];
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS), *back;
	struct st_load_result res;
	size_t len, ends[NKINDS];
	uint8_t *buf;
	static const uint32_t bad_lens[] = {0, ST_BODY_MAX + 1, 0x7fffffffu, 0xffffffffu};

	assert_int_equal(st_serialize(log, &buf, &len), 0);
	frame_ends(r, NKINDS, ends);

	/* frame 6's length: past the end of the buffer by one byte, and far past it */
	uint32_t orig = rd_le32(buf + ends[5]);
	wr_le32(buf + ends[5], (uint32_t)(len - ends[5] - ST_FRAME_HDR_LEN + 1));
	assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
	assert_int_equal(res.records, 6);
	assert_int_equal(res.valid_bytes, ends[5]);
	assert_true(res.torn);
	assert_log_is(back, r, 6);
	st_log_free(back);
	for (size_t i = 0; i < ARRAY_SIZE(bad_lens); i++) {
		wr_le32(buf + ends[5], bad_lens[i]);
		assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
		assert_int_equal(res.records, 6);
		assert_true(res.torn);
		st_log_free(back);
	}
	wr_le32(buf + ends[5], orig);

	/* a header count beyond the frames there are: torn, all frames kept */
	wr_le64(buf + 8, 1ull << 62);
	resign_header(buf);
	assert_int_equal(st_deserialize(buf, len, &back, &res), 0);
	assert_int_equal(res.records, NKINDS);
	assert_true(res.torn);
	st_log_free(back);
	/* a count below them: bytes after a sealed snapshot are corruption */
	wr_le64(buf + 8, NKINDS - 1);
	resign_header(buf);
	assert_int_equal(st_deserialize(buf, len, &back, &res), RGPU_ECORRUPT);
	free(buf);
	st_log_free(log);
}

/* Frames that pass their CRC but cannot be applied: corruption, never a torn tail. */
static uint8_t *stream_of_frames(bool open, int nframes, const uint8_t *frames, size_t flen,
				 size_t *len)
{
	uint8_t *buf = malloc(ST_STREAM_HDR_LEN + flen);

	st_journal_header(buf);
	wr_le16(buf + 6, open ? ST_STREAM_OPEN : 0);
	wr_le64(buf + 8, open ? 0 : (uint64_t)nframes);
	resign_header(buf);
	memcpy(buf + ST_STREAM_HDR_LEN, frames, flen);
	*len = ST_STREAM_HDR_LEN + flen;
	return buf;
}

static size_t raw_frame(const Rgpu__StRecord *m, uint8_t *out)
{
	size_t blen = rgpu__st_record__pack(m, out + ST_FRAME_HDR_LEN);
	uLong c = crc32(0, out, 0);

	wr_le32(out, (uint32_t)blen);
	c = crc32(c, out, 4);
	c = crc32(c, out + ST_FRAME_HDR_LEN, (uInt)blen);
	wr_le32(out + 4, (uint32_t)c);
	return ST_FRAME_HDR_LEN + blen;
}

static void expect_load(bool open, int nframes, const uint8_t *frames, size_t flen, int rc)
{
	struct st_load_result res;
	struct st_log *back = (struct st_log *)0x1;
	size_t len;
	uint8_t *buf = stream_of_frames(open, nframes, frames, flen, &len);

	assert_int_equal(st_deserialize(buf, len, &back, &res), rc);
	if (rc)
		assert_ptr_equal(back, (struct st_log *)0x1);
	else
		st_log_free(back);
	free(buf);
}

static void test_bad_frames(void **state)
{
	struct st_rec r[NKINDS];
	uint8_t fr[4096];
	size_t n, off;
	Rgpu__StRecord m;

	all_kinds(r, false);
	/* a repeated id in a sealed snapshot */
	assert_int_equal(st_serialize_rec(&r[0], fr, sizeof(fr), &n), 0);
	off = n;
	assert_int_equal(st_serialize_rec(&r[0], fr + off, sizeof(fr) - off, &n), 0);
	off += n;
	expect_load(false, 2, fr, off, RGPU_ECORRUPT);
	/* ... is an update in a journal */
	expect_load(true, 0, fr, off, 0);

	/* a reference to a record that is not there */
	assert_int_equal(st_serialize_rec(&r[1], fr, sizeof(fr), &n), 0);
	expect_load(false, 1, fr, n, RGPU_ECORRUPT);
	/* a tombstone for an id that is not live */
	assert_int_equal(st_serialize_tombstone(0x100, fr, sizeof(fr), &n), 0);
	expect_load(true, 0, fr, n, RGPU_ECORRUPT);

	/* hand-made messages: unknown kind, too many fields, a short hash, id 0, NUL in name */
	uint64_t many[ST_NFIELDS + 1] = {1, 2, 3, 4, 5, 6, 7};
	rgpu__st_record__init(&m);
	m.kind = (Rgpu__StKind)(ST_KIND_MAX + 1);
	m.id = 5;
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, RGPU_EUNSUPPORTED);
	rgpu__st_record__init(&m);
	m.kind = RGPU__ST_KIND__ST_KIND_CONTEXT;
	m.id = 5;
	m.n_field = ST_NFIELDS + 1;
	m.field = many;
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, RGPU_EUNSUPPORTED);
	m.n_field = ST_NFIELDS;
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, 0); /* the same with ST_NFIELDS fields is fine */
	m.hash.len = 31;
	m.hash.data = (uint8_t *)"0123456789012345678901234567890";
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, RGPU_ECORRUPT);
	m.hash.len = 0;
	m.id = 0;
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, RGPU_ECORRUPT);
	m.id = 5;
	m.name.len = 3;
	m.name.data = (uint8_t *)"a\0b";
	n = raw_frame(&m, fr);
	expect_load(false, 1, fr, n, RGPU_ECORRUPT);
	/* a tombstone carrying fields */
	rgpu__st_record__init(&m);
	m.kind = RGPU__ST_KIND__ST_KIND_TOMBSTONE;
	m.id = 5;
	m.ctx = 1;
	n = raw_frame(&m, fr);
	expect_load(true, 0, fr, n, RGPU_ECORRUPT);
	/* a body that is not protobuf, correctly framed */
	memcpy(fr + ST_FRAME_HDR_LEN, "\xff\xff\xff\xff", 4);
	wr_le32(fr, 4);
	wr_le32(fr + 4, (uint32_t)crc32(crc32(0, fr, 4), fr + ST_FRAME_HDR_LEN, 4));
	expect_load(false, 1, fr, ST_FRAME_HDR_LEN + 4, RGPU_ECORRUPT);
}

/* --- journals --------------------------------------------------------------------------------- */

struct journal {
	uint8_t *buf;
	size_t len, cap;
};

static void j_put(struct journal *j, const struct st_rec *rec, uint64_t tomb)
{
	size_t need;
	int rc = rec ? st_serialize_rec(rec, NULL, 0, &need)
		     : st_serialize_tombstone(tomb, NULL, 0, &need);

	assert_int_equal(rc, RGPU_ENOSPC); /* asks for the size first */
	if (j->len + need > j->cap) {
		j->cap = (j->len + need) * 2;
		j->buf = realloc(j->buf, j->cap);
	}
	rc = rec ? st_serialize_rec(rec, j->buf + j->len, need, &need)
		 : st_serialize_tombstone(tomb, j->buf + j->len, need, &need);
	assert_int_equal(rc, 0);
	j->len += need;
}

static void test_journal(void **state)
{
	struct st_rec r[NKINDS], u;
	struct st_log *live, *back;
	struct st_load_result res;
	struct journal j = {0};
	uint8_t d0[ST_DIGEST_LEN], d1[ST_DIGEST_LEN];
	size_t ops_end[64];
	int nops = 0;

	all_kinds(r, true);
	j.cap = 64;
	j.buf = malloc(j.cap);
	st_journal_header(j.buf);
	j.len = ST_STREAM_HDR_LEN;

	/* a session: create everything, free some, update some, and a module unload */
	assert_int_equal(st_log_new(&live), 0);
	for (int i = 0; i < NKINDS; i++) {
		assert_int_equal(st_add(live, &r[i]), 0);
		j_put(&j, st_find(live, r[i].id), 0);
		ops_end[nops++] = j.len;
	}
	u = r[0];
	u.context.flags = 0x77;
	assert_int_equal(st_update(live, &u), 0);
	j_put(&j, st_find(live, u.id), 0);
	ops_end[nops++] = j.len;
	assert_int_equal(st_remove(live, 0x200), 0);
	j_put(&j, NULL, 0x200);
	ops_end[nops++] = j.len;
	assert_int_equal(st_remove(live, 0x400), 0); /* takes 0x500 and 0x700 */
	j_put(&j, NULL, 0x400);
	ops_end[nops++] = j.len;
	struct st_rec a = {.kind = ST_KIND_ALLOC,
			   .id = 0x200,
			   .ctx = 0x100,
			   .alloc = {0x600000800000ull, 64, 1, 0}};
	assert_int_equal(st_add(live, &a), 0);
	j_put(&j, st_find(live, a.id), 0);
	ops_end[nops++] = j.len;

	assert_int_equal(st_deserialize(j.buf, j.len, &back, &res), 0);
	assert_int_equal(res.records, nops);
	assert_int_equal(res.valid_bytes, j.len);
	assert_false(res.torn);
	assert_true(res.open);
	digest_of(live, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	assert_int_equal(st_find(back, 0x100)->context.flags, 0x77);
	uint64_t want[] = {0x100, 0x300, 0x401, 0x600, 0x800, 0x900, 0xa00,
			   0xb00, 0xc00, 0xd00, 0xe00, 0x501, 0x200};
	assert_ids_are(back, want, ARRAY_SIZE(want));
	st_log_free(back);

	/* cut anywhere: the ops whose frames are complete, replayed */
	for (size_t cut = ST_STREAM_HDR_LEN; cut <= j.len; cut++) {
		int k = 0;
		while (k < nops && ops_end[k] <= cut)
			k++;
		assert_int_equal(st_deserialize(j.buf, cut, &back, &res), 0);
		assert_int_equal(res.records, k);
		assert_int_equal(res.valid_bytes, k ? ops_end[k - 1] : ST_STREAM_HDR_LEN);
		assert_int_equal(res.torn, cut != res.valid_bytes);
		st_log_free(back);
	}

	/* a crash can leave zeros after the last frame (a file extended, not yet written) */
	j.buf = realloc(j.buf, j.len + 64);
	memset(j.buf + j.len, 0, 64);
	assert_int_equal(st_deserialize(j.buf, j.len + 64, &back, &res), 0);
	assert_int_equal(res.records, nops);
	assert_int_equal(res.valid_bytes, j.len);
	assert_true(res.torn);
	st_log_free(back);

	/* compaction: the live table under an open header, then appends carry on */
	uint8_t *cbuf;
	size_t clen;
	assert_int_equal(st_serialize_journal(live, &cbuf, &clen), 0);
	assert_int_equal(rd_le16(cbuf + 6), ST_STREAM_OPEN);
	free(j.buf);
	j.buf = cbuf;
	j.len = j.cap = clen;
	assert_int_equal(st_remove(live, 0x900), 0);
	j_put(&j, NULL, 0x900);
	assert_int_equal(st_deserialize(j.buf, j.len, &back, &res), 0);
	assert_false(res.torn);
	assert_int_equal(res.records, ARRAY_SIZE(want) + 1);
	digest_of(live, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	st_log_free(back);
	/* the base snapshot cut at a frame boundary is torn: fewer frames than its count */
	assert_int_equal(
	    st_deserialize(j.buf, clen - st_frame_size(st_find(live, 0x200)), &back, &res), 0);
	assert_true(res.torn);
	st_log_free(back);

	free(j.buf);
	st_log_free(live);
}

static void test_serialize_rec(void **state)
{
	struct st_rec r[NKINDS];
	uint8_t small[8], big[256];
	size_t n = 0;

	all_kinds(r, false);
	assert_int_equal(st_serialize_rec(&r[5], small, sizeof(small), &n), RGPU_ENOSPC);
	assert_int_equal(n, st_frame_size(&r[5]));
	assert_int_equal(st_serialize_rec(&r[5], big, n - 1, &n), RGPU_ENOSPC);
	assert_int_equal(st_serialize_rec(&r[5], big, n, &n), 0);
	assert_int_equal(rd_le32(big), n - ST_FRAME_HDR_LEN);
	assert_int_equal(st_serialize_tombstone(UINT64_MAX, big, sizeof(big), &n), 0);
	assert_true(n <= 20);
	assert_int_equal(st_serialize_tombstone(0, big, sizeof(big), &n), RGPU_EINVAL);
	struct st_rec mod = {.kind = ST_KIND_MODULE, .id = 3};
	assert_int_equal(st_serialize_rec(&mod, big, sizeof(big), &n), RGPU_EINVAL);
	assert_int_equal(st_frame_size(&mod), 0);
	assert_int_equal(st_serialize_rec(NULL, big, sizeof(big), &n), RGPU_EINVAL);
	assert_string_equal(st_kind_name(ST_KIND_VMM_MAP), "VMM mapping");
	assert_string_equal(st_kind_name(99), "?");
}

/* --- scale ---------------------------------------------------------------------------------- */

#define NBIG 100000

static void test_100k(void **state)
{
	struct st_log *log, *back;
	static uint64_t want[NBIG];
	uint8_t d0[ST_DIGEST_LEN], d1[ST_DIGEST_LEN], *buf;
	size_t len, n = 0;

	assert_int_equal(st_log_new(&log), 0);
	struct st_rec c = {.kind = ST_KIND_CONTEXT, .id = 1};
	assert_int_equal(st_add(log, &c), 0);
	for (uint64_t i = 0; i < NBIG; i++) {
		/* ids spread over the space, as client handles are */
		struct st_rec a = {.kind = ST_KIND_ALLOC,
				   .id = 0x1000 + i * 0x10000,
				   .ctx = 1,
				   .alloc = {0x600000000000ull + i * 256, 256, 0, i}};
		assert_int_equal(st_add(log, &a), 0);
	}
	assert_int_equal(st_count(log), NBIG + 1);
	assert_int_equal(st_add(log, &(struct st_rec){.kind = ST_KIND_ALLOC, .id = 0x1000}),
			 RGPU_EEXIST);

	/* free every odd one, in reverse */
	for (uint64_t i = NBIG; i-- > 0;)
		if (i & 1)
			assert_int_equal(st_remove(log, 0x1000 + i * 0x10000), 0);
	assert_int_equal(st_count(log), NBIG / 2 + 1);
	want[n++] = 1;
	for (uint64_t i = 0; i < NBIG; i += 2)
		want[n++] = 0x1000 + i * 0x10000;
	assert_ids_are(log, want, n);
	for (uint64_t i = 0; i < NBIG; i++) {
		const struct st_rec *f = st_find(log, 0x1000 + i * 0x10000);
		if (i & 1) {
			assert_null(f);
		} else {
			assert_non_null(f);
			assert_int_equal(f->alloc.flags, i);
		}
	}

	assert_int_equal(st_serialize(log, &buf, &len), 0);
	assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
	assert_int_equal(st_count(back), NBIG / 2 + 1);
	digest_of(log, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	free(buf);
	st_log_free(back);

	/* the context takes the remaining 50k allocations with it */
	assert_int_equal(st_remove(log, 1), 0);
	assert_int_equal(st_count(log), 0);
	assert_null(st_find(log, 0x1000));
	/* and the table shrank back without losing anything: refill and check */
	assert_int_equal(st_add(log, &c), 0);
	for (uint64_t i = 0; i < 1000; i++) {
		struct st_rec a = {.kind = ST_KIND_ALLOC, .id = 7 + i, .ctx = 1};
		assert_int_equal(st_add(log, &a), 0);
	}
	assert_int_equal(st_count(log), 1001);
	for (uint64_t i = 0; i < 1000; i++)
		assert_non_null(st_find(log, 7 + i));
	st_log_free(log);
}

/* --- attributes ------------------------------------------------------------------------------ */

static void test_attr(void **state)
{
	struct st_rec r[NKINDS], a, bad;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);
	uint8_t fr[256];
	size_t n;

	assert_int_equal(ST_KIND_ATTR, 14);
	assert_string_equal(st_kind_name(ST_KIND_ATTR), "attribute");
	assert_string_equal(st_kind_name(ST_KIND_MAX + 1), "?");

	/* a parent is required, must be live, and may be of any kind */
	bad = (struct st_rec){.kind = ST_KIND_ATTR, .id = 0xe01, .attr = {1, 2}};
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	assert_int_equal(st_serialize_rec(&bad, fr, sizeof(fr), &n), RGPU_EINVAL);
	assert_int_equal(st_frame_size(&bad), 0);
	bad.parent = 0x999;
	assert_int_equal(st_add(log, &bad), RGPU_ENOTFOUND);
	bad.parent = 0x500;
	bad.ctx = 0x200; /* ctx is not a context */
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	assert_int_equal(st_count(log), NKINDS);

	/* a function attribute, an allocation's, a stream's: one of each is fine */
	a = (struct st_rec){.kind = ST_KIND_ATTR,
			    .id = 0xe01,
			    .parent = 0x500,
			    .ctx = 0x100,
			    .attr = {.key = 8, .value = 98304}}; /* max dynamic shared memory */
	assert_int_equal(st_add(log, &a), 0);
	a = (struct st_rec){
	    .kind = ST_KIND_ATTR, .id = 0xe02, .parent = 0x200, .attr = {.key = 3, .value = 1}};
	assert_int_equal(st_add(log, &a), 0);
	a = (struct st_rec){
	    .kind = ST_KIND_ATTR, .id = 0xe03, .parent = 0x800, .attr = {.key = 1, .value = 7}};
	assert_int_equal(st_add(log, &a), 0);
	assert_int_equal(st_find(log, 0xe01)->attr.key, 8);
	assert_int_equal(st_find(log, 0xe01)->attr.value, 98304);
	assert_int_equal(st_find(log, 0xe01)->f[1], 98304);

	/* set again: an update in place; its parent stays required and unchanged */
	a = *st_find(log, 0xe01);
	a.attr.value = 49152;
	assert_int_equal(st_update(log, &a), 0);
	assert_int_equal(st_find(log, 0xe01)->attr.value, 49152);
	a.parent = 0;
	assert_int_equal(st_update(log, &a), RGPU_EINVAL);
	a.parent = 0x501;
	assert_int_equal(st_update(log, &a), RGPU_EINVAL);

	/* cascade: the attribute dies with the object it was set on, and only with it */
	assert_int_equal(st_remove(log, 0x200), 0); /* the allocation */
	assert_null(st_find(log, 0xe02));
	uint64_t after_alloc[] = {0x100, 0x300, 0x400, 0x401, 0x500, 0x600, 0x700, 0x800, 0x900,
				  0xa00, 0xb00, 0xc00, 0xd00, 0xe00, 0x501, 0xe01, 0xe03};
	assert_ids_are(log, after_alloc, ARRAY_SIZE(after_alloc));
	assert_int_equal(st_remove(log, 0x400), 0); /* the module: its function, its attribute */
	assert_null(st_find(log, 0xe01));
	uint64_t after_mod[] = {0x100, 0x300, 0x401, 0x600, 0x800, 0x900, 0xa00,
				0xb00, 0xc00, 0xd00, 0xe00, 0x501, 0xe03};
	assert_ids_are(log, after_mod, ARRAY_SIZE(after_mod));
	assert_int_equal(st_remove(log, 0x800), 0); /* the stream: its callback, its attribute */
	uint64_t after_stream[] = {0x100, 0x300, 0x401, 0x600, 0x900,
				   0xa00, 0xb00, 0xc00, 0xe00, 0x501};
	assert_ids_are(log, after_stream, ARRAY_SIZE(after_stream));
	assert_int_equal(st_remove(log, 0x100), 0); /* the context: its limit 0xe00 */
	uint64_t after_ctx[] = {0x401, 0x600, 0xb00, 0xc00};
	assert_ids_are(log, after_ctx, ARRAY_SIZE(after_ctx));
	st_log_free(log);
}

/* Kind 14 in streams and in the digest. */
static void test_attr_stream(void **state)
{
	struct st_rec r[NKINDS], a;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS), *back;
	uint8_t d0[ST_DIGEST_LEN], d1[ST_DIGEST_LEN], *buf, fr[256];
	size_t len, n;
	Rgpu__StRecord *m;

	/* a snapshot: the record comes back, with its kind, parent and fields */
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
	assert_int_equal(st_find(back, 0xe00)->kind, ST_KIND_ATTR);
	assert_int_equal(st_find(back, 0xe00)->parent, 0x100);
	assert_int_equal(st_find(back, 0xe00)->attr.key, 2);
	assert_int_equal(st_find(back, 0xe00)->attr.value, 64ull << 20);
	assert_log_is(back, r, NKINDS);
	digest_of(log, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	free(buf);
	st_log_free(back);

	/* on the wire it is kind 14 */
	assert_int_equal(st_serialize_rec(&r[14], fr, sizeof(fr), &n), 0);
	m = rgpu__st_record__unpack(NULL, n - ST_FRAME_HDR_LEN, fr + ST_FRAME_HDR_LEN);
	assert_non_null(m);
	assert_int_equal((int)m->kind, 14);
	assert_int_equal(m->id, 0xe00);
	assert_int_equal(m->parent, 0x100);
	assert_int_equal(m->n_field, 2);
	assert_int_equal(m->field[0], 2);
	assert_int_equal(m->field[1], 64ull << 20);
	rgpu__st_record__free_unpacked(m, NULL);

	/* the digest sees its value and its key */
	a = r[14];
	a.attr.value++;
	assert_int_equal(st_update(log, &a), 0);
	digest_of(log, d1);
	assert_memory_not_equal(d0, d1, ST_DIGEST_LEN);
	a.attr.value--;
	assert_int_equal(st_update(log, &a), 0);
	digest_of(log, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	a.attr.key = 1;
	assert_int_equal(st_update(log, &a), 0);
	digest_of(log, d1);
	assert_memory_not_equal(d0, d1, ST_DIGEST_LEN);

	/* a journal: an attribute set, set again, then its parent destroyed */
	struct journal j = {0};
	struct st_load_result res;
	struct st_rec fa = {.kind = ST_KIND_ATTR,
			    .id = 0xe01,
			    .parent = 0x500,
			    .ctx = 0x100,
			    .attr = {.key = 8, .value = 1024}};
	assert_int_equal(st_serialize_journal(log, &j.buf, &j.len), 0);
	j.cap = j.len;
	assert_int_equal(st_add(log, &fa), 0);
	j_put(&j, st_find(log, fa.id), 0);
	fa.attr.value = 2048;
	assert_int_equal(st_update(log, &fa), 0);
	j_put(&j, st_find(log, fa.id), 0);
	assert_int_equal(st_deserialize(j.buf, j.len, &back, &res), 0);
	assert_false(res.torn);
	assert_int_equal(st_find(back, 0xe01)->attr.value, 2048);
	assert_int_equal(st_compare(log, back, NULL, NULL, NULL), 0);
	st_log_free(back);
	assert_int_equal(st_remove(log, 0x500), 0);
	j_put(&j, NULL, 0x500);
	assert_int_equal(st_deserialize(j.buf, j.len, &back, &res), 0);
	assert_null(st_find(back, 0xe01));
	assert_null(st_find(back, 0x500));
	digest_of(log, d0);
	digest_of(back, d1);
	assert_memory_equal(d0, d1, ST_DIGEST_LEN);
	st_log_free(back);
	free(j.buf);
	st_log_free(log);
}

/* A function's parent: a module, or a kernel (cuKernelGetFunction); kernels need a module. */
/* --- the application's physical memory and its mappings ------------------------------------- */

/* Arrays, mipmapped arrays and their levels, texture objects (kinds 16-18). */
static void test_arrays(void **state)
{
	struct st_rec ctx = {.kind = ST_KIND_CONTEXT, .id = 1};
	struct st_rec mm = {.kind = ST_KIND_MIPMAP, .id = 2, .ctx = 1,
			    .array = {64, 32, 0, 0x20 | 4ull << 32, 0x2, 3}};
	struct st_rec lv = {.kind = ST_KIND_ARRAY, .id = 3, .parent = 2, .ctx = 1,
			    .array = {.level = 1}};
	struct st_rec arr = {.kind = ST_KIND_ARRAY, .id = 4, .ctx = 1,
			     .array = {100, 0, 4, 0x1 | 1ull << 32, 0x1}};
	struct st_rec tex = {.kind = ST_KIND_TEXOBJ, .id = 5, .ctx = 1,
			     .texobj = {.value = 7, .surface = 1, .resource = 4},
			     .name = "00ff"};
	struct st_rec bad = lv;
	struct st_log *log = NULL, *back = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	char line[256];

	(void)state;
	assert_int_equal(ST_KIND_ARRAY, 16);
	assert_int_equal(ST_KIND_MIPMAP, 17);
	assert_int_equal(ST_KIND_TEXOBJ, 18);
	assert_int_equal(ST_KIND_MAX, ST_KIND_TEXOBJ);
	assert_string_equal(st_kind_name(ST_KIND_ARRAY), "array");
	assert_string_equal(st_kind_name(ST_KIND_MIPMAP), "mipmapped array");
	assert_string_equal(st_kind_name(ST_KIND_TEXOBJ), "texture object");
	assert_int_equal(st_log_new(&log), 0);
	assert_int_equal(st_add(log, &ctx), 0);
	assert_int_equal(st_add(log, &mm), 0);
	assert_int_equal(st_add(log, &lv), 0);
	assert_int_equal(st_add(log, &arr), 0);
	assert_int_equal(st_add(log, &tex), 0);
	/* a level's parent is a mipmapped array, nothing else */
	bad.id = 9;
	bad.parent = 4;
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	st_rec_describe(&tex, line, sizeof(line));
	assert_string_equal(line, "texture object id=5 ctx=1 value=0x7 surface=1 resource=4 "
				  "name=\"00ff\"");
	st_rec_describe(&lv, line, sizeof(line));
	assert_string_equal(line, "array id=3 parent=2 ctx=1 width=0 height=0 depth=0 "
				  "format=0x0 level=1");
	/* round trip, then the mipmapped array goes with its level; the texture object stays */
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
	assert_int_equal(st_count(back), 5);
	assert_int_equal(st_find(back, 5)->texobj.value, 7);
	assert_string_equal(st_find(back, 5)->name, "00ff");
	assert_int_equal(st_remove(log, 2), 0);
	assert_null(st_find(log, 3));
	assert_non_null(st_find(log, 5));
	assert_int_equal(st_remove(log, 4), 0);
	assert_non_null(st_find(log, 5));
	free(buf);
	st_log_free(back);
	st_log_free(log);
}

static void test_physmem(void **state)
{
	struct st_rec r[NKINDS], pm, m1, m2, bad;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS), *back = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	char line[256];

	(void)state;
	assert_int_equal(ST_KIND_PHYSMEM, 15);
	assert_string_equal(st_kind_name(ST_KIND_PHYSMEM), "physical memory");
	pm = (struct st_rec){.kind = ST_KIND_PHYSMEM, .id = 0xf00, .physmem = {4 << 20, 1}};
	assert_int_equal(st_add(log, &pm), 0);
	/* two mappings of it, the second at an offset, with access for devices 0 and 1 */
	m1 = (struct st_rec){.kind = ST_KIND_VMM_MAP,
			     .id = 0x4000600000400000ull,
			     .parent = 0xf00,
			     .vmm = {0x600000400000ull, 2 << 20, 1, 0, 0x3}};
	m2 = m1;
	m2.id = 0x4000600000800000ull;
	m2.vmm.addr = 0x600000800000ull;
	m2.vmm.offset = 2 << 20;
	m2.vmm.access = 0xd; /* device 0 read-write, device 1 read */
	assert_int_equal(st_add(log, &m1), 0);
	assert_int_equal(st_add(log, &m2), 0);
	assert_int_equal(st_find(log, m2.id)->f[4], 0xd);
	/* a mapping's parent is physical memory or nothing: not a context, not an allocation */
	bad = m1;
	bad.id = 0x4000600000c00000ull;
	bad.parent = 0x100;
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	bad.parent = 0x200;
	assert_int_equal(st_add(log, &bad), RGPU_EINVAL);
	st_rec_describe(&m2, line, sizeof(line));
	assert_string_equal(line, "VMM mapping id=0x4000600000800000 parent=3840 "
				  "addr=0x600000800000 size=2097152 device=1 offset=2097152 "
				  "access=0xd");
	st_rec_describe(&pm, line, sizeof(line));
	assert_string_equal(line, "physical memory id=3840 size=4194304 device=1");

	/* through a stream and back, unchanged */
	assert_int_equal(st_serialize(log, &buf, &len), 0);
	assert_int_equal(st_deserialize(buf, len, &back, NULL), 0);
	assert_int_equal(st_compare(log, back, NULL, NULL, NULL), 0);
	free(buf);
	st_log_free(back);

	/* the physical memory's removal takes its mappings with it */
	assert_int_equal(st_remove(log, 0xf00), 0);
	assert_null(st_find(log, m1.id));
	assert_null(st_find(log, m2.id));
	assert_int_equal(st_count(log), NKINDS);
	st_log_free(log);
}

static void test_function_parent(void **state)
{
	struct st_rec r[NKINDS], f;
	struct st_log *log = log_of((all_kinds(r, false), r), NKINDS);

	/* r[15] is a function of the library's kernel 0x600; another, in no context */
	f = (struct st_rec){
	    .kind = ST_KIND_FUNCTION, .id = 0x502, .parent = 0x600, .name = "_Z6vecAddPKfS0_Pfi"};
	assert_int_equal(st_add(log, &f), 0);
	assert_int_equal(st_find(log, 0x502)->parent, 0x600);
	assert_int_equal(st_find(log, 0x501)->parent, 0x600);

	/* a stream, a global, a function, an allocation are not parents of a function */
	f.id = 0x503;
	f.parent = 0x800;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	f.parent = 0x700;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	f.parent = 0x500;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	f.parent = 0x200;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	/* a name and a parent are still required */
	f.parent = 0x600;
	f.name = NULL;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	f.name = "";
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	f.name = "k";
	f.parent = 0;
	assert_int_equal(st_add(log, &f), RGPU_EINVAL);
	/* kernels and globals still need a module */
	struct st_rec k = {.kind = ST_KIND_KERNEL, .id = 0x601, .parent = 0x600, .name = "k"};
	assert_int_equal(st_add(log, &k), RGPU_EINVAL);
	struct st_rec g = {.kind = ST_KIND_GLOBAL, .id = 0x701, .parent = 0x600, .name = "g"};
	assert_int_equal(st_add(log, &g), RGPU_EINVAL);
	assert_int_equal(st_count(log), NKINDS + 1);

	/* it survives a round trip, and unloading the library takes kernel and functions */
	round_trip(r, NKINDS);
	assert_int_equal(st_remove(log, 0x401), 0);
	uint64_t after_lib[] = {0x100, 0x200, 0x300, 0x400, 0x500, 0x700, 0x800,
				0x900, 0xa00, 0xb00, 0xc00, 0xd00, 0xe00};
	assert_ids_are(log, after_lib, ARRAY_SIZE(after_lib));
	st_log_free(log);
}

/* --- st_remove_each --------------------------------------------------------------------------- */

struct removed {
	struct st_log *log;
	uint64_t ids[16];
	uint32_t kinds[16];
	char names[16][16];
	size_t n;
};

static void on_removed(const struct st_rec *rec, void *arg)
{
	struct removed *rm = arg;

	assert_true(rm->n < 16);
	/* called before the record is freed: it is still in the log, name and all */
	assert_ptr_equal(st_find(rm->log, rec->id), rec);
	rm->ids[rm->n] = rec->id;
	rm->kinds[rm->n] = rec->kind;
	snprintf(rm->names[rm->n], sizeof(rm->names[0]), "%s", rec->name ? rec->name : "");
	rm->n++;
}

/* A context with a module, two functions, a stream and an attribute on the second function. */
static struct st_log *small_session(void)
{
	struct st_rec r[6] = {
	    {.kind = ST_KIND_CONTEXT, .id = 1, .context = {.device = 0, .primary = 1}},
	    {.kind = ST_KIND_MODULE, .id = 2, .ctx = 1, .module = {10240, 0}, .has_hash = true},
	    {.kind = ST_KIND_FUNCTION, .id = 3, .parent = 2, .ctx = 1, .name = "f3"},
	    {.kind = ST_KIND_FUNCTION, .id = 4, .parent = 2, .ctx = 1, .name = "f4"},
	    {.kind = ST_KIND_STREAM, .id = 5, .ctx = 1, .stream = {.flags = 1}},
	    {.kind = ST_KIND_ATTR, .id = 6, .parent = 4, .attr = {.key = 8, .value = 65536}},
	};

	fill_hash(r[1].hash, 1);
	return log_of(r, 6);
}

static void test_remove_each(void **state)
{
	struct removed rm = {0};

	/* the context: every dependent newest first, the context last */
	rm.log = small_session();
	assert_int_equal(st_remove_each(rm.log, 1, on_removed, &rm), 0);
	assert_int_equal(rm.n, 6);
	static const uint64_t all[] = {6, 5, 4, 3, 2, 1};
	static const uint32_t order_kinds[] = {ST_KIND_ATTR,	 ST_KIND_STREAM, ST_KIND_FUNCTION,
					       ST_KIND_FUNCTION, ST_KIND_MODULE, ST_KIND_CONTEXT};
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		assert_int_equal(rm.ids[i], all[i]);
		assert_int_equal(rm.kinds[i], order_kinds[i]);
	}
	assert_string_equal(rm.names[2], "f4");
	assert_string_equal(rm.names[3], "f3");
	assert_int_equal(st_count(rm.log), 0);
	st_log_free(rm.log);

	/* the module: its functions and the attribute, not the stream or the context */
	rm = (struct removed){.log = small_session()};
	assert_int_equal(st_remove_each(rm.log, 2, on_removed, &rm), 0);
	assert_int_equal(rm.n, 4);
	static const uint64_t mod[] = {6, 4, 3, 2};
	for (size_t i = 0; i < ARRAY_SIZE(mod); i++)
		assert_int_equal(rm.ids[i], mod[i]);
	uint64_t left[] = {1, 5};
	assert_ids_are(rm.log, left, ARRAY_SIZE(left));
	st_log_free(rm.log);

	/* the second function: its attribute, then itself */
	rm = (struct removed){.log = small_session()};
	assert_int_equal(st_remove_each(rm.log, 4, on_removed, &rm), 0);
	assert_int_equal(rm.n, 2);
	assert_int_equal(rm.ids[0], 6);
	assert_int_equal(rm.ids[1], 4);
	/* a record nothing refers to: itself only */
	rm.n = 0;
	assert_int_equal(st_remove_each(rm.log, 5, on_removed, &rm), 0);
	assert_int_equal(rm.n, 1);
	assert_int_equal(rm.ids[0], 5);
	/* no such record, no log: no call */
	rm.n = 0;
	assert_int_equal(st_remove_each(rm.log, 5, on_removed, &rm), RGPU_ENOTFOUND);
	assert_int_equal(st_remove_each(rm.log, 0, on_removed, &rm), RGPU_ENOTFOUND);
	assert_int_equal(st_remove_each(NULL, 1, on_removed, &rm), RGPU_EINVAL);
	assert_int_equal(rm.n, 0);
	/* fn NULL is st_remove */
	assert_int_equal(st_remove_each(rm.log, 1, NULL, NULL), 0);
	assert_int_equal(st_count(rm.log), 0);
	assert_int_equal(st_remove(NULL, 1), RGPU_EINVAL);
	st_log_free(rm.log);
}

/* --- st_compare ------------------------------------------------------------------------------- */

/* st_compare's answer, checked against the digests: equal iff the digests are. */
static int compare(struct st_log *a, struct st_log *b, size_t *index, const struct st_rec **ra,
		   const struct st_rec **rb)
{
	uint8_t da[ST_DIGEST_LEN], db[ST_DIGEST_LEN];
	int rc = st_compare(a, b, index, ra, rb);

	digest_of(a, da);
	digest_of(b, db);
	assert_int_equal(rc == 0, memcmp(da, db, ST_DIGEST_LEN) == 0);
	return rc;
}

static void test_compare(void **state)
{
	struct st_rec r[NKINDS], m[NKINDS], u;
	struct st_log *a, *b;
	const struct st_rec *ra, *rb;
	size_t index;

	all_kinds(r, true);
	a = log_of(r, NKINDS);
	b = log_of(r, NKINDS);

	/* equal logs */
	index = 99;
	ra = rb = r;
	assert_int_equal(compare(a, b, &index, &ra, &rb), 0);
	assert_int_equal(index, NKINDS);
	assert_null(ra);
	assert_null(rb);
	assert_int_equal(compare(a, a, NULL, NULL, NULL), 0);

	/* equal after a different history: an allocation made and freed in b */
	struct st_rec tmp = {.kind = ST_KIND_ALLOC, .id = 0x201, .ctx = 0x100};
	assert_int_equal(st_add(b, &tmp), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, NKINDS);
	assert_null(ra);
	assert_ptr_equal(rb, st_find(b, 0x201));
	assert_int_equal(st_remove(b, 0x201), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 0);

	/* a field: the stream's priority (position 8) */
	u = r[8];
	u.stream.priority = -5;
	assert_int_equal(st_update(b, &u), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 8);
	assert_ptr_equal(ra, st_find(a, 0x800));
	assert_ptr_equal(rb, st_find(b, 0x800));
	assert_int_equal(rb->stream.priority, -5);
	/* any out-pointer may be NULL */
	assert_int_equal(compare(a, b, NULL, NULL, NULL), 1);
	assert_int_equal(compare(a, b, &index, NULL, NULL), 1);
	assert_int_equal(index, 8);
	assert_int_equal(st_update(b, &r[8]), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 0);

	/* a spare slot, a name, a hash: the first difference is reported */
	u = r[13];
	u.f[ST_NFIELDS - 1] ^= 1;
	assert_int_equal(st_update(b, &u), 0);
	u = r[7];
	u.name = "devCounteR";
	assert_int_equal(st_update(b, &u), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 7);
	assert_string_equal(ra->name, "devCounter");
	assert_string_equal(rb->name, "devCounteR");
	assert_int_equal(st_update(b, &r[7]), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 13);
	assert_int_equal(st_update(b, &r[13]), 0);
	u = r[3];
	u.hash[31] ^= 0x80;
	assert_int_equal(st_update(b, &u), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 3);
	assert_int_equal(ra->id, 0x400);
	assert_int_equal(rb->id, 0x400);
	st_log_free(b);

	/* a missing record: b lacks a's last one, then the other way round */
	b = log_of(r, NKINDS - 1);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, NKINDS - 1);
	assert_ptr_equal(ra, st_find(a, r[NKINDS - 1].id));
	assert_null(rb);
	assert_int_equal(compare(b, a, &index, &ra, &rb), 1);
	assert_int_equal(index, NKINDS - 1);
	assert_null(ra);
	assert_ptr_equal(rb, st_find(a, r[NKINDS - 1].id));
	/* a missing record in the middle: the allocation (position 1) */
	st_log_free(b);
	b = log_of(r, NKINDS);
	assert_int_equal(st_remove(b, 0x200), 0);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 1);
	assert_int_equal(ra->id, 0x200);
	assert_int_equal(rb->id, 0x300);
	st_log_free(b);

	/* the same records in another order: the two graphs swapped */
	memcpy(m, r, sizeof(m));
	m[11] = r[12];
	m[12] = r[11];
	b = log_of(m, NKINDS);
	assert_int_equal(compare(a, b, &index, &ra, &rb), 1);
	assert_int_equal(index, 11);
	assert_int_equal(ra->id, 0xb00);
	assert_int_equal(rb->id, 0xc00);
	st_log_free(b);

	/* empty logs; a NULL log */
	struct st_log *e1, *e2;
	assert_int_equal(st_log_new(&e1), 0);
	assert_int_equal(st_log_new(&e2), 0);
	index = 99;
	assert_int_equal(compare(e1, e2, &index, &ra, &rb), 0);
	assert_int_equal(index, 0);
	assert_int_equal(compare(e1, a, &index, &ra, &rb), 1);
	assert_int_equal(index, 0);
	assert_null(ra);
	assert_ptr_equal(rb, st_find(a, 0x100));
	index = 99;
	assert_int_equal(st_compare(NULL, e2, &index, &ra, &rb), RGPU_EINVAL);
	assert_int_equal(st_compare(e1, NULL, &index, &ra, &rb), RGPU_EINVAL);
	assert_int_equal(index, 99);
	st_log_free(e1);
	st_log_free(e2);
	st_log_free(a);
}

/* --- st_rec_describe -------------------------------------------------------------------------- */

static void assert_describes(const struct st_rec *rec, const char *want)
{
	char buf[512];

	assert_int_equal(st_rec_describe(rec, buf, sizeof(buf)), strlen(want));
	assert_string_equal(buf, want);
}

static void test_describe(void **state)
{
	struct st_rec r;
	static const uint8_t h[ST_HASH_LEN] = {0x3f, 0xa1, 0xc2, 0xd4, 0xe5, 0xf6, 0x07, 0x18};

	r = (struct st_rec){
	    .kind = ST_KIND_STREAM, .id = 12, .ctx = 3, .stream = {.flags = 1, .priority = -1}};
	assert_describes(&r, "stream id=12 ctx=3 flags=0x1 priority=-1");
	r.stream.flags = 0; /* flags only when set */
	assert_describes(&r, "stream id=12 ctx=3 priority=-1");
	r = (struct st_rec){.kind = ST_KIND_ALLOC,
			    .id = 0x600000000000ull,
			    .alloc = {0x600000000000ull, 4096, 0, 0}};
	assert_describes(&r, "allocation id=0x600000000000 addr=0x600000000000 size=4096 device=0");
	r.ctx = 1;
	r.alloc.flags = 0x2;
	assert_describes(&r, "allocation id=0x600000000000 ctx=1 addr=0x600000000000 size=4096 "
			     "device=0 flags=0x2");
	r = (struct st_rec){.kind = ST_KIND_FUNCTION, .id = 7, .parent = 5, .name = "vecadd"};
	assert_describes(&r, "function id=7 parent=5 name=\"vecadd\"");
	r = (struct st_rec){
	    .kind = ST_KIND_MODULE, .id = 5, .module = {.size = 10240}, .has_hash = true};
	memcpy(r.hash, h, ST_HASH_LEN);
	assert_describes(&r, "module id=5 size=10240 library=0 hash=3fa1c2d4e5f6...");
	r = (struct st_rec){.kind = ST_KIND_CONTEXT, .id = 1, .context = {.primary = 1}};
	assert_describes(&r, "context id=1 device=0 primary=1");
	r = (struct st_rec){.kind = ST_KIND_CONTEXT, .id = 2, .context = {2, 0x4, 0}};
	assert_describes(&r, "context id=2 device=2 flags=0x4 primary=0");
	r = (struct st_rec){.kind = ST_KIND_VMM_MAP,
			    .id = 0x7f0000000000ull,
			    .ctx = 1,
			    .vmm = {0x7f0000000000ull, 2097152, 1}};
	assert_describes(&r, "VMM mapping id=0x7f0000000000 ctx=1 addr=0x7f0000000000 size=2097152 "
			     "device=1");
	r = (struct st_rec){.kind = ST_KIND_KERNEL, .id = 8, .parent = 6, .name = "k"};
	assert_describes(&r, "kernel id=8 parent=6 name=\"k\"");
	r = (struct st_rec){.kind = ST_KIND_GLOBAL,
			    .id = 9,
			    .parent = 5,
			    .ctx = 1,
			    .global = {0x7f0012340000ull, 4},
			    .name = "devCounter"};
	assert_describes(
	    &r, "global id=9 parent=5 ctx=1 addr=0x7f0012340000 size=4 name=\"devCounter\"");
	r = (struct st_rec){.kind = ST_KIND_EVENT, .id = 10, .ctx = 1, .event = {.flags = 0x2}};
	assert_describes(&r, "event id=10 ctx=1 flags=0x2");
	r.f[3] = 0xab; /* a slot the kind does not name */
	assert_describes(&r, "event id=10 ctx=1 flags=0x2 f[3]=0xab");
	r = (struct st_rec){.kind = ST_KIND_MEMPOOL, .id = 11, .pool = {.device = 3}};
	assert_describes(&r, "memory pool id=11 device=3");
	r = (struct st_rec){.kind = ST_KIND_GRAPH, .id = 13, .graph = {.flags = 0}};
	assert_describes(&r, "graph id=13 stream=0 mode=0");
	r = (struct st_rec){
	    .kind = ST_KIND_GRAPH, .id = 14, .graph = {.stream = 12, .mode = 1}, .has_hash = true};
	memcpy(r.hash, h, ST_HASH_LEN);
	assert_describes(&r, "graph id=14 stream=12 mode=1 hash=3fa1c2d4e5f6...");
	r = (struct st_rec){.kind = ST_KIND_GRAPH_EXEC, .id = 15, .graph_exec = {.flags = 0x3}};
	assert_describes(&r, "graph exec id=15 flags=0x3");
	r = (struct st_rec){.kind = ST_KIND_HOST_CALLBACK,
			    .id = 16,
			    .parent = 12,
			    .host_cb = {0x401000, 0x7ffd12345678ull}};
	assert_describes(&r, "host callback id=16 parent=12 fn=0x401000 user=0x7ffd12345678");
	r = (struct st_rec){
	    .kind = ST_KIND_ATTR, .id = 20, .parent = 7, .attr = {.key = 8, .value = 98304}};
	assert_describes(&r, "attribute id=20 parent=7 key=8 value=98304");
	r = (struct st_rec){.kind = ST_KIND_TOMBSTONE, .id = 5};
	assert_describes(&r, "tombstone id=5");
	r = (struct st_rec){.kind = 99, .id = 5, .parent = 0x100000000ull};
	assert_describes(&r, "kind=99 id=5 parent=0x100000000");
	r.id = 0xffffffffull; /* the last id printed in decimal */
	assert_describes(&r, "kind=99 id=4294967295 parent=0x100000000");
	assert_describes(NULL, "nothing");

	/* names: cut to 64 characters, control characters shown as '?' */
	char name[100], want[200];
	memset(name, 'a', sizeof(name));
	name[64] = '\0';
	r = (struct st_rec){.kind = ST_KIND_FUNCTION, .id = 7, .parent = 5, .name = name};
	snprintf(want, sizeof(want), "function id=7 parent=5 name=\"%s\"", name);
	assert_describes(&r, want); /* exactly 64: whole */
	name[64] = 'b';
	name[99] = '\0';
	name[63] = 'z';
	assert_describes(&r,
			 "function id=7 parent=5 name=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			 "aaaaaaaaaaaaaaaaaaaaaz\"...");
	r.name = "a\tb\nc\x7f";
	assert_describes(&r, "function id=7 parent=5 name=\"a?b?c?\"");
	r.name = ""; /* no name */
	assert_describes(&r, "function id=7 parent=5");

	/* never past n; returns the whole length as snprintf does */
	static const char line[] = "stream id=12 ctx=3 flags=0x1 priority=-1";
	char buf[64];
	r = (struct st_rec){
	    .kind = ST_KIND_STREAM, .id = 12, .ctx = 3, .stream = {.flags = 1, .priority = -1}};
	for (size_t n = 0; n <= sizeof(line) + 1; n++) {
		memset(buf, 0x55, sizeof(buf));
		assert_int_equal(st_rec_describe(&r, buf, n), strlen(line));
		for (size_t i = n; i < sizeof(buf); i++)
			assert_int_equal((uint8_t)buf[i], 0x55);
		if (n) {
			assert_int_equal(strlen(buf), n - 1 < strlen(line) ? n - 1 : strlen(line));
			assert_memory_equal(buf, line, strlen(buf));
		}
	}
	assert_int_equal(st_rec_describe(&r, NULL, 0), strlen(line));
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(st_rec_describe(NULL, buf, 4), 7);
	assert_string_equal(buf, "not");

	/* every kind of the all-kinds set, every slot filled: one line that names the kind */
	struct st_rec all[NKINDS];
	all_kinds(all, true);
	for (int i = 0; i < NKINDS; i++) {
		char line2[512];
		int len = st_rec_describe(&all[i], line2, sizeof(line2));
		assert_int_equal(len, strlen(line2));
		assert_true(len < (int)sizeof(line2));
		assert_null(strchr(line2, '\n'));
		assert_memory_equal(line2, st_kind_name(all[i].kind),
				    strlen(st_kind_name(all[i].kind)));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_record),
	    cmocka_unit_test(test_update),
	    cmocka_unit_test(test_prune),
	    cmocka_unit_test(test_cascade),
	    cmocka_unit_test(test_replay_order),
	    cmocka_unit_test(test_foreach_stop),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_digest_sensitivity),
	    cmocka_unit_test(test_torn_tail_every_cut),
	    cmocka_unit_test(test_torn_tail_flip),
	    cmocka_unit_test(test_bad_magic_version),
	    cmocka_unit_test(test_length_beyond_buffer),
	    cmocka_unit_test(test_bad_frames),
	    cmocka_unit_test(test_journal),
	    cmocka_unit_test(test_serialize_rec),
	    cmocka_unit_test(test_attr),
	    cmocka_unit_test(test_attr_stream),
	    cmocka_unit_test(test_function_parent),
	    cmocka_unit_test(test_physmem),
	    cmocka_unit_test(test_arrays),
	    cmocka_unit_test(test_remove_each),
	    cmocka_unit_test(test_compare),
	    cmocka_unit_test(test_describe),
	    cmocka_unit_test(test_100k),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
