/*
 * Unit tests of the state-log recorder (proto/record.c, the generated rgpu_record_build and
 * rgpu/record.h; testing.md, tier 1): the exact records every create, destroy and attr message
 * of messages.tbl makes from a patterned request (and reply), the refusal of bodies of the
 * wrong type, rgpu_rec_apply's cascades and graph hashes, rgpu_rec_settle's handling of a
 * call's provisional records, the capture journals' byte layout and digest, and the digest
 * agreement of two logs built from the same messages.
 *
 * Expected values are written out here (ids, keys, field values, journal bytes), never
 * computed with the macros or functions under test. Every request field that a builder reads
 * is distinct and non-zero, so a field lost, swapped or sign-mangled shows up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/record.h"
#include "rgpu/statetrack.h"
#include "rgpu_msgs.h"
#include "rgpu_record.h"

/* ---- the session's ids and values, shared by every test ---------------------------------- */

#define CTX 0x21ull
#define MOD 0x31ull
#define FUNC 0x41ull
#define KERNEL 0x42ull
#define KFUNC 0x43ull
#define GLOBAL 0x51ull
#define STREAM 0x61ull
#define EVENT 0x71ull
#define GRAPH_CAP 0x81ull  /* captured */
#define GRAPH_MADE 0x82ull /* cuGraphCreate */
#define EXEC 0x91ull
#define EXEC2 0x92ull

#define MAP_ADDR 0x7f0000200000ull
#define MAP_SIZE 0x200000ull
#define ALLOC_ADDR 0x7f0000201000ull
#define ALLOC_SIZE 0x3000ull
#define GLOBAL_ADDR 0x7f00a0001000ull
#define GLOBAL_SIZE 0x400ull

#define PHYS 0xa1ull		   /* the application's physical memory (cuMemCreate) */
#define APP_ADDR 0x7f0000800000ull /* the application's mapping of it */
#define APP_SIZE 0x400000ull
#define APP_OFFSET 0x200000ull

/* Ids and keys written out (record.h: RGPU_REC_VMM_ID, RGPU_ATTR_KEY, RGPU_REC_ATTR_ID). */
#define APP_VMM_ID 0x40007f0000800000ull /* 1 << 62 | APP_ADDR */
#define VMM_ID 0x40007f0000200000ull	 /* 1 << 62 | MAP_ADDR */
#define LIMIT_KEY 0x200000005ull	 /* space 2 (limit), device 0, limit 5 */
#define LIMIT_ID 0x8000000000086005ull	 /* 1 << 63 | CTX << 14 | 2 << 12 | 5 */
#define FATTR_KEY 0x100010008ull	 /* space 1 (func), device 1, attribute 8 */
#define FATTR_ID 0x8000000000105108ull	 /* 1 << 63 | FUNC << 14 | 1 << 12 | 1 << 8 | 8 */
#define CAPTURE_KEY 0x300000000ull	 /* space 3 (capture) */
#define CAPTURE_ID 0x8000000000187000ull /* 1 << 63 | STREAM << 14 | 3 << 12 */

static const uint8_t mod_hash[ST_HASH_LEN] = {
    0x3f, 0xa1, 0xc2, 0xd4, 0xe5, 0xf6, 0x07, 0x18, 0x29, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e, 0x8f, 0x90,
    0x01, 0x12, 0x23, 0x34, 0x45, 0x56, 0x67, 0x78, 0x89, 0x9a, 0xab, 0xbc, 0xcd, 0xde, 0xef, 0xf0,
};
/* stands for a capture journal's digest, filled in by the side as record.h says */
static const uint8_t journal_hash[ST_HASH_LEN] = {
    0xc0, 0xff, 0xee, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
    0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
};
static const uint8_t zero_hash[ST_HASH_LEN];

/* ---- the requests ------------------------------------------------------------------------ */

static Rgpu__CtxCreate q_ctx_create(void)
{
	Rgpu__CtxCreate r = RGPU__CTX_CREATE__INIT;
	r.ctx = CTX;
	r.device = 3;
	r.flags = 0x5;
	r.primary = 1;
	return r;
}

static Rgpu__CtxRef q_ctx_ref(void)
{
	Rgpu__CtxRef r = RGPU__CTX_REF__INIT;
	r.ctx = CTX;
	return r;
}

static Rgpu__CtxLimit q_ctx_limit(uint64_t value)
{
	Rgpu__CtxLimit r = RGPU__CTX_LIMIT__INIT;
	r.ctx = CTX;
	r.limit = 5;
	r.value = value;
	return r;
}

static Rgpu__MemAlloc q_mem_alloc(int map)
{
	Rgpu__MemAlloc r = RGPU__MEM_ALLOC__INIT;
	r.addr = ALLOC_ADDR;
	r.size = ALLOC_SIZE;
	if (map) {
		r.map_addr = MAP_ADDR;
		r.map_size = MAP_SIZE;
	}
	r.device = 2;
	return r;
}

static Rgpu__MemFree q_mem_free(int unmap)
{
	Rgpu__MemFree r = RGPU__MEM_FREE__INIT;
	r.addr = ALLOC_ADDR;
	if (unmap) {
		r.unmap_addr = MAP_ADDR;
		r.unmap_size = MAP_SIZE;
	}
	return r;
}

static Rgpu__ModuleLoad q_module_load(void)
{
	Rgpu__ModuleLoad r = RGPU__MODULE_LOAD__INIT;
	r.module = MOD;
	r.hash.len = ST_HASH_LEN;
	r.hash.data = (uint8_t *)mod_hash;
	r.image_size = 0x2a40;
	r.library = 1;
	r.ctx = CTX;
	return r;
}

static Rgpu__ObjRef q_obj_ref(void)
{
	Rgpu__ObjRef r = RGPU__OBJ_REF__INIT;
	r.id = MOD;
	r.ctx = CTX;
	return r;
}

static Rgpu__FuncGet q_func_get(uint64_t func, uint64_t parent, uint32_t kind, char *name)
{
	Rgpu__FuncGet r = RGPU__FUNC_GET__INIT;
	r.func = func;
	r.parent = parent;
	r.name = name;
	r.kind = kind;
	r.ctx = CTX;
	return r;
}

static Rgpu__GlobalGet q_global_get(void)
{
	Rgpu__GlobalGet r = RGPU__GLOBAL_GET__INIT;
	r.module = MOD;
	r.name = (char *)"d_table";
	r.ctx = CTX;
	r.global = GLOBAL;
	return r;
}

static Rgpu__FuncAttr q_func_attr(int64_t value)
{
	Rgpu__FuncAttr r = RGPU__FUNC_ATTR__INIT;
	r.func = FUNC;
	r.attrib = 8; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
	r.value = value;
	r.device = 1;
	r.ctx = CTX;
	return r;
}

static Rgpu__StreamCreate q_stream_create(void)
{
	Rgpu__StreamCreate r = RGPU__STREAM_CREATE__INIT;
	r.stream = STREAM;
	r.ctx = CTX;
	r.flags = 0x1;
	r.priority = -2;
	return r;
}

static Rgpu__StreamOp q_stream_op(void)
{
	Rgpu__StreamOp r = RGPU__STREAM_OP__INIT;
	r.stream = STREAM;
	r.ctx = CTX;
	return r;
}

static Rgpu__EventCreate q_event_create(uint64_t event)
{
	Rgpu__EventCreate r = RGPU__EVENT_CREATE__INIT;
	r.event = event;
	r.ctx = CTX;
	r.flags = 0x2;
	return r;
}

static Rgpu__EventOp q_event_op(uint64_t event)
{
	Rgpu__EventOp r = RGPU__EVENT_OP__INIT;
	r.event = event;
	r.stream = STREAM;
	r.ctx = CTX;
	return r;
}

static Rgpu__CaptureOp q_capture(uint64_t graph)
{
	Rgpu__CaptureOp r = RGPU__CAPTURE_OP__INIT;
	r.stream = STREAM;
	r.ctx = CTX;
	r.mode = 1; /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */
	r.graph = graph;
	return r;
}

static Rgpu__GraphOp q_graph(uint64_t graph, uint64_t exec, uint64_t flags)
{
	Rgpu__GraphOp r = RGPU__GRAPH_OP__INIT;
	r.graph = graph;
	r.exec = exec;
	r.stream = STREAM;
	r.ctx = CTX;
	r.flags = flags;
	return r;
}

static Rgpu__VmmCreate q_vmm_create(void)
{
	Rgpu__VmmCreate r = RGPU__VMM_CREATE__INIT;
	r.handle = PHYS;
	r.size = 0x600000;
	r.device = 3;
	return r;
}

static Rgpu__VmmRelease q_vmm_release(void)
{
	Rgpu__VmmRelease r = RGPU__VMM_RELEASE__INIT;
	r.handle = PHYS;
	return r;
}

static Rgpu__VmmMap q_vmm_map(void)
{
	Rgpu__VmmMap r = RGPU__VMM_MAP__INIT;
	r.addr = APP_ADDR;
	r.size = APP_SIZE;
	r.offset = APP_OFFSET;
	r.handle = PHYS;
	r.device = 3;
	return r;
}

static Rgpu__VmmUnmap q_vmm_unmap(uint64_t release)
{
	Rgpu__VmmUnmap r = RGPU__VMM_UNMAP__INIT;
	r.addr = APP_ADDR;
	r.size = APP_SIZE;
	r.release = release;
	return r;
}

static Rgpu__VmmAccess q_vmm_access(uint32_t access)
{
	Rgpu__VmmAccess r = RGPU__VMM_ACCESS__INIT;
	r.addr = APP_ADDR;
	r.size = APP_SIZE;
	r.handle = PHYS;
	r.offset = APP_OFFSET;
	r.device = 3;
	r.access = access;
	r.devices = 0x9; /* devices 0 and 3 */
	return r;
}

static Rgpu__Status r_status(int32_t result)
{
	Rgpu__Status r = RGPU__STATUS__INIT;
	r.result = result;
	return r;
}

static Rgpu__ModuleLoadReply r_module(int32_t result, int need_image)
{
	Rgpu__ModuleLoadReply r = RGPU__MODULE_LOAD_REPLY__INIT;
	r.result = result;
	r.need_image = need_image;
	return r;
}

static Rgpu__GlobalReply r_global(int32_t result)
{
	Rgpu__GlobalReply r = RGPU__GLOBAL_REPLY__INIT;
	r.result = result;
	if (!result) {
		r.addr = GLOBAL_ADDR;
		r.size = GLOBAL_SIZE;
	}
	return r;
}

/* ---- checking ---------------------------------------------------------------------------- */

#define EQ(line, a, b)                                                                             \
	_assert_int_equal(cast_to_largest_integral_type(a), cast_to_largest_integral_type(b),      \
			  __FILE__, line)
#define F(...) ((const uint64_t[ST_NFIELDS]){__VA_ARGS__})
#define NOF F(0)

/*
 * rgpu_record_build() into ops, which is first filled with garbage: every field of an op
 * must come from the builder. Returns the builder's result.
 */
static int build(unsigned type, const void *req, const void *rep, struct rgpu_rec_ops *ops)
{
	memset(ops, 0xa5, sizeof(*ops));
	return rgpu_record_build(type, (const ProtobufCMessage *)req, (const ProtobufCMessage *)rep,
				 ops);
}

/* ops->v[i] is exactly this: op, kind, id, parent, ctx, f[], name, hash and journal. */
static void expect_op(int line, const struct rgpu_rec_ops *ops, int i, int op, uint32_t kind,
		      uint64_t id, uint64_t parent, uint64_t ctx, const uint64_t f[ST_NFIELDS],
		      const char *name, const uint8_t *hash, int journal)
{
	const struct st_rec *r;

	_assert_true(i < ops->n, "operation index < ops->n", __FILE__, line);
	r = &ops->v[i].rec;
	EQ(line, ops->v[i].op, op);
	EQ(line, r->kind, kind);
	EQ(line, r->id, id);
	EQ(line, r->parent, parent);
	EQ(line, r->ctx, ctx);
	for (int k = 0; k < ST_NFIELDS; k++)
		EQ(line, r->f[k], f[k]);
	if (name) {
		_assert_true(r->name != NULL, "rec.name != NULL", __FILE__, line);
		_assert_string_equal(r->name, name, __FILE__, line);
	} else {
		_assert_true(r->name == NULL, "rec.name == NULL", __FILE__, line);
	}
	EQ(line, r->has_hash, hash != NULL);
	_assert_memory_equal(r->hash, hash ? hash : zero_hash, ST_HASH_LEN, __FILE__, line);
	EQ(line, ops->v[i].journal, journal);
}
#define EXPECT(ops, i, op, kind, id, parent, ctx, f, name, hash, journal)                          \
	expect_op(__LINE__, ops, i, op, kind, id, parent, ctx, f, name, hash, journal)

/* The same check on a record the log holds. */
static void expect_rec(int line, const struct st_rec *r, uint32_t kind, uint64_t id,
		       uint64_t parent, uint64_t ctx, const uint64_t f[ST_NFIELDS],
		       const char *name, const uint8_t *hash)
{
	_assert_true(r != NULL, "record is live", __FILE__, line);
	EQ(line, r->kind, kind);
	EQ(line, r->id, id);
	EQ(line, r->parent, parent);
	EQ(line, r->ctx, ctx);
	for (int k = 0; k < ST_NFIELDS; k++)
		EQ(line, r->f[k], f[k]);
	if (name)
		_assert_string_equal(r->name ? r->name : "(null)", name, __FILE__, line);
	else
		_assert_true(r->name == NULL, "rec.name == NULL", __FILE__, line);
	EQ(line, r->has_hash, hash != NULL);
	_assert_memory_equal(r->hash, hash ? hash : zero_hash, ST_HASH_LEN, __FILE__, line);
}
#define EXPECT_REC(r, kind, id, parent, ctx, f, name, hash)                                        \
	expect_rec(__LINE__, r, kind, id, parent, ctx, f, name, hash)

/* Build and apply one message as the worker does (reply known); returns ops.n. */
static int apply_msg(struct st_log *log, unsigned type, const void *req, const void *rep)
{
	struct rgpu_rec_ops ops;

	assert_int_equal(build(type, req, rep, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, NULL), 0);
	return ops.n;
}

struct order {
	int n;
	uint64_t id[16];
};

static int collect(const struct st_rec *rec, void *arg)
{
	struct order *o = arg;

	if (o->n < 16)
		o->id[o->n] = rec->id;
	o->n++;
	return 0;
}

/* The log's ids in creation order are exactly these. */
static void expect_order(int line, struct st_log *log, int n, const uint64_t *ids)
{
	struct order o = {0};

	EQ(line, st_foreach(log, collect, &o), 0);
	EQ(line, o.n, n);
	EQ(line, st_count(log), n);
	for (int i = 0; i < n && i < 16; i++)
		EQ(line, o.id[i], ids[i]);
}
#define EXPECT_ORDER(log, n, ...) expect_order(__LINE__, log, n, (const uint64_t[]){__VA_ARGS__})

static struct st_log *new_log(void)
{
	struct st_log *log = NULL;

	assert_int_equal(st_log_new(&log), 0);
	assert_non_null(log);
	return log;
}

/* ---- 1. every recording message's exact records ------------------------------------------ */

static void case_ctx_create(void)
{
	Rgpu__CtxCreate q = q_ctx_create();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_CTX_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_CONTEXT, CTX, 0, 0, F(3, 0x5, 1), NULL, NULL, 0);

	/* a device number is sign-extended, as the record's u64 field */
	q.device = -1;
	q.primary = 0;
	assert_int_equal(build(RGPU_MSG_CTX_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_CONTEXT, CTX, 0, 0, F(0xffffffffffffffffull, 0x5, 0),
	       NULL, NULL, 0);
}

static void case_ctx_destroy(void)
{
	Rgpu__CtxRef q = q_ctx_ref();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_CTX_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_CONTEXT, CTX, 0, 0, NOF, NULL, NULL, 0);
}

static void case_ctx_set_limit(void)
{
	Rgpu__CtxLimit q = q_ctx_limit(0x10000);
	Rgpu__Status ok = r_status(0), bad = r_status(1); /* CUDA_ERROR_INVALID_VALUE */
	struct rgpu_rec_ops ops;

	/* provisional (rep NULL) and with a successful reply: the same SET */
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, LIMIT_ID, CTX, 0, F(LIMIT_KEY, 0x10000), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, LIMIT_ID, CTX, 0, F(LIMIT_KEY, 0x10000), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

/* a stream attribute: its value's 32 bytes in f[1..4]; the NULL stream's on the context */
static void case_stream_set_attr(void)
{
	Rgpu__StreamAttr q = RGPU__STREAM_ATTR__INIT;
	Rgpu__Status ok = r_status(0), bad = r_status(1);
	uint8_t v[32] = {0};
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_STREAM, 0, 1);
	struct rgpu_rec_ops ops;

	v[0] = 0x10;   /* base_ptr 0x7f0000000010 */
	v[5] = 0x7f;
	v[8] = 0x40;   /* num_bytes 0x40 */
	v[16] = 0x01;  /* hitRatio's bits, then hitProp */
	v[24] = 0x02;  /* missProp */
	q.stream = 0x31;
	q.ctx = CTX;
	q.attr = 1;
	q.value.data = v;
	q.value.len = sizeof(v);
	assert_int_equal(build(RGPU_MSG_STREAM_SET_ATTR, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(0x31, key), 0x31, 0,
	       F(key, 0x7f0000000010ull, 0x40, 1, 2), NULL, NULL, 0);
	q.stream = 0;
	assert_int_equal(build(RGPU_MSG_STREAM_SET_ATTR, &q, NULL, &ops), 0);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(CTX, key), CTX, 0,
	       F(key, 0x7f0000000010ull, 0x40, 1, 2), NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_STREAM_SET_ATTR, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

/* a cache configuration: the context's, or with func the function's */
static void case_ctx_set_config(void)
{
	Rgpu__CtxConfig q = RGPU__CTX_CONFIG__INIT;
	Rgpu__Status ok = r_status(0);
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_CONFIG, 0, RGPU__CONFIG_KIND__CONFIG_CACHE);
	struct rgpu_rec_ops ops;

	q.ctx = CTX;
	q.kind = RGPU__CONFIG_KIND__CONFIG_CACHE;
	q.value = 2;
	assert_int_equal(build(RGPU_MSG_CTX_SET_CONFIG, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(CTX, key), CTX, 0, F(key, 2),
	       NULL, NULL, 0);
	q.func = 0x41;
	assert_int_equal(build(RGPU_MSG_CTX_SET_CONFIG, &q, &ok, &ops), 0);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(0x41, key), 0x41, 0, F(key, 2),
	       NULL, NULL, 0);
}

static void case_mem_alloc(void)
{
	Rgpu__MemAlloc q = q_mem_alloc(1);
	Rgpu__Status ok = r_status(0), bad = r_status(2); /* CUDA_ERROR_OUT_OF_MEMORY */
	struct rgpu_rec_ops ops;

	/* a call that maps: the mapping first, then the allocation inside it */
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_VMM_MAP, VMM_ID, 0, 0, F(MAP_ADDR, MAP_SIZE, 2), NULL,
	       NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_ADD, ST_KIND_ALLOC, ALLOC_ADDR, 0, 0,
	       F(ALLOC_ADDR, ALLOC_SIZE, 2, 0), NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_VMM_MAP, VMM_ID, 0, 0, F(MAP_ADDR, MAP_SIZE, 2), NULL,
	       NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_ADD, ST_KIND_ALLOC, ALLOC_ADDR, 0, 0,
	       F(ALLOC_ADDR, ALLOC_SIZE, 2, 0), NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);

	/* fire-and-forget inside an existing mapping: the allocation only */
	q = q_mem_alloc(0);
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_ALLOC, ALLOC_ADDR, 0, 0,
	       F(ALLOC_ADDR, ALLOC_SIZE, 2, 0), NULL, NULL, 0);
}

static void case_mem_free(void)
{
	Rgpu__MemFree q = q_mem_free(1);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_MEM_FREE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ALLOC, ALLOC_ADDR, 0, 0, NOF, NULL, NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_REMOVE, ST_KIND_VMM_MAP, VMM_ID, 0, 0, F(MAP_ADDR, MAP_SIZE), NULL,
	       NULL, 0);

	q = q_mem_free(0);
	assert_int_equal(build(RGPU_MSG_MEM_FREE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ALLOC, ALLOC_ADDR, 0, 0, NOF, NULL, NULL, 0);
}

static void case_module_load(void)
{
	Rgpu__ModuleLoad q = q_module_load();
	Rgpu__ModuleLoadReply ok = r_module(0, 0), need = r_module(0, 1);
	Rgpu__ModuleLoadReply bad = r_module(218, 0); /* CUDA_ERROR_INVALID_PTX */
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_MODULE, MOD, 0, CTX, F(0x2a40, 1), NULL, mod_hash, 0);
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_MODULE, MOD, 0, CTX, F(0x2a40, 1), NULL, mod_hash, 0);
	/* the server does not know the image yet: nothing was loaded */
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &q, &need, &ops), 0);
	assert_int_equal(ops.n, 0);
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);

	/* a module (library 0) */
	q.library = 0;
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_MODULE, MOD, 0, CTX, F(0x2a40, 0), NULL, mod_hash, 0);
}

static void case_module_unload(void)
{
	Rgpu__ObjRef q = q_obj_ref();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_MODULE_UNLOAD, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_MODULE, MOD, 0, 0, NOF, NULL, NULL, 0);
}

static void case_func_get(void)
{
	Rgpu__FuncGet q = q_func_get(FUNC, MOD, RGPU__FUNC_KIND__FUNC_MODULE, (char *)"vecAdd_f32");
	struct rgpu_rec_ops ops;

	/* f[0] = the FuncKind (statetrack.h leaves it unused; both sides fill it alike) */
	assert_int_equal(build(RGPU_MSG_FUNC_GET, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_FUNCTION, FUNC, MOD, CTX, NOF, "vecAdd_f32", NULL, 0);

	q = q_func_get(KERNEL, MOD, RGPU__FUNC_KIND__FUNC_LIBRARY_KERNEL, (char *)"_Z6reducePfi");
	assert_int_equal(build(RGPU_MSG_FUNC_GET, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_KERNEL, KERNEL, MOD, CTX, F(1), "_Z6reducePfi", NULL,
	       0);

	q = q_func_get(KFUNC, KERNEL, RGPU__FUNC_KIND__FUNC_KERNEL_FUNCTION,
		       (char *)"_Z6reducePfi");
	assert_int_equal(build(RGPU_MSG_FUNC_GET, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_FUNCTION, KFUNC, KERNEL, CTX, F(2), "_Z6reducePfi",
	       NULL, 0);
}

static void case_global_get(void)
{
	Rgpu__GlobalGet q = q_global_get();
	Rgpu__GlobalReply ok = r_global(0), bad = r_global(500); /* CUDA_ERROR_NOT_FOUND */
	struct rgpu_rec_ops ops;

	/* sent: the address is not known yet */
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GLOBAL, GLOBAL, MOD, CTX, NOF, "d_table", NULL, 0);
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GLOBAL, GLOBAL, MOD, CTX, F(GLOBAL_ADDR, GLOBAL_SIZE),
	       "d_table", NULL, 0);
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);

	/* a lookup that names no record (global 0) makes none */
	q.global = 0;
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_func_set_attr(void)
{
	Rgpu__FuncAttr q = q_func_attr(0x18000);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_FUNC_SET_ATTR, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, FATTR_ID, FUNC, 0, F(FATTR_KEY, 0x18000), NULL,
	       NULL, 0);

	/* a negative value is kept as its two's complement; device 0 is another key and id */
	q = q_func_attr(-3);
	q.device = 0;
	assert_int_equal(build(RGPU_MSG_FUNC_SET_ATTR, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_ATTR, 0x8000000000105008ull, FUNC, 0,
	       F(0x100000008ull, 0xfffffffffffffffdull), NULL, NULL, 0);
}

static void case_stream_create(void)
{
	Rgpu__StreamCreate q = q_stream_create();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_STREAM_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_STREAM, STREAM, 0, CTX, F(0x1, 0xfffffffffffffffeull),
	       NULL, NULL, 0);
	assert_int_equal(ops.v[0].rec.stream.priority, -2);
}

static void case_stream_destroy(void)
{
	Rgpu__StreamOp q = q_stream_op();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_STREAM_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_STREAM, STREAM, 0, 0, NOF, NULL, NULL, 0);
}

static void case_event_create(void)
{
	Rgpu__EventCreate q = q_event_create(EVENT);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_EVENT_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_EVENT, EVENT, 0, CTX, F(0x2), NULL, NULL, 0);
}

static void case_event_destroy(void)
{
	Rgpu__EventOp q = q_event_op(EVENT);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_EVENT_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_EVENT, EVENT, 0, 0, NOF, NULL, NULL, 0);
}

static void case_capture_begin(void)
{
	Rgpu__CaptureOp q = q_capture(0);
	Rgpu__Status ok = r_status(0),
		     bad = r_status(900); /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_ATTR, CAPTURE_ID, STREAM, 0, F(CAPTURE_KEY, 1), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_ATTR, CAPTURE_ID, STREAM, 0, F(CAPTURE_KEY, 1), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_capture_end(void)
{
	Rgpu__CaptureOp q = q_capture(GRAPH_CAP);
	Rgpu__Status ok = r_status(0),
		     bad = r_status(901); /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
	struct rgpu_rec_ops ops;

	/* the capture attribute goes, the graph comes, hashed from its journal */
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ATTR, CAPTURE_ID, 0, 0, NOF, NULL, NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_ADD, ST_KIND_GRAPH, GRAPH_CAP, 0, CTX, F(0, STREAM, 1), NULL, NULL,
	       1);
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ATTR, CAPTURE_ID, 0, 0, NOF, NULL, NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_ADD, ST_KIND_GRAPH, GRAPH_CAP, 0, CTX, F(0, STREAM, 1), NULL, NULL,
	       1);
	/* a failed capture is over too: the removal stays, no graph */
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ATTR, CAPTURE_ID, 0, 0, NOF, NULL, NULL, 0);
	q.graph = 0;
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ATTR, CAPTURE_ID, 0, 0, NOF, NULL, NULL, 0);
}

static void case_graph_create(void)
{
	Rgpu__GraphOp q = q_graph(GRAPH_MADE, 0, 0x4);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_GRAPH_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GRAPH, GRAPH_MADE, 0, CTX, F(0x4), NULL, NULL, 0);
}

static void case_graph_instantiate(void)
{
	Rgpu__GraphOp q = q_graph(GRAPH_CAP, EXEC, 0x1);    /* ..._AUTO_FREE_ON_LAUNCH */
	Rgpu__Status ok = r_status(0), bad = r_status(910); /* CUDA_ERROR_..._NOT_PERMITTED */
	struct rgpu_rec_ops ops;

	/* parent 0 (it outlives its graph); f[1] names the graph whose hash it takes */
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GRAPH_EXEC, EXEC, 0, CTX, F(0x1, GRAPH_CAP), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GRAPH_EXEC, EXEC, 0, CTX, F(0x1, GRAPH_CAP), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_graph_exec_destroy(void)
{
	Rgpu__GraphOp q = q_graph(GRAPH_CAP, EXEC, 0x1);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_GRAPH_EXEC_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_GRAPH_EXEC, EXEC, 0, 0, NOF, NULL, NULL, 0);
}

static void case_graph_destroy(void)
{
	Rgpu__GraphOp q = q_graph(GRAPH_MADE, EXEC, 0x1);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_GRAPH_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_GRAPH, GRAPH_MADE, 0, 0, NOF, NULL, NULL, 0);
}

static void case_graph_clone(void)
{
	uint64_t orig[2] = {0x11, 0x12}, copy[2] = {0x21, 0x22};
	Rgpu__GraphClone q = RGPU__GRAPH_CLONE__INIT;
	Rgpu__Status ok = r_status(0), bad = r_status(1);
	struct rgpu_rec_ops ops;

	q.graph = GRAPH_CAP;
	q.clone = GRAPH_MADE;
	q.ctx = CTX;
	q.orig = orig;
	q.n_orig = 2;
	q.copy = copy;
	q.n_copy = 2;
	/* f[4]: the graph cloned (its journal's hash and length: the journals' step) */
	assert_int_equal(build(RGPU_MSG_GRAPH_CLONE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_GRAPH, GRAPH_MADE, 0, CTX, F(0, 0, 0, 0, GRAPH_CAP),
	       NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_GRAPH_CLONE, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	assert_int_equal(build(RGPU_MSG_GRAPH_CLONE, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_vmm_create(void)
{
	Rgpu__VmmCreate q = q_vmm_create();
	Rgpu__Status ok = r_status(0), bad = r_status(2); /* CUDA_ERROR_OUT_OF_MEMORY */
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_VMM_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_PHYSMEM, PHYS, 0, 0, F(0x600000, 3), NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_VMM_CREATE, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_PHYSMEM, PHYS, 0, 0, F(0x600000, 3), NULL, NULL, 0);
	assert_int_equal(build(RGPU_MSG_VMM_CREATE, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_vmm_release(void)
{
	Rgpu__VmmRelease q = q_vmm_release();
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_VMM_RELEASE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_PHYSMEM, PHYS, 0, 0, NOF, NULL, NULL, 0);
}

static void case_vmm_map(void)
{
	Rgpu__VmmMap q = q_vmm_map();
	struct rgpu_rec_ops ops;

	/* parent: the physical memory; no access yet */
	assert_int_equal(build(RGPU_MSG_VMM_MAP, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_VMM_MAP, APP_VMM_ID, PHYS, 0,
	       F(APP_ADDR, APP_SIZE, 3, APP_OFFSET, 0), NULL, NULL, 0);
}

static void case_vmm_unmap(void)
{
	Rgpu__VmmUnmap q = q_vmm_unmap(0);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_VMM_UNMAP, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_VMM_MAP, APP_VMM_ID, 0, 0, F(APP_ADDR, APP_SIZE),
	       NULL, NULL, 0);
	/* the last mapping of released memory: the memory goes after it */
	q = q_vmm_unmap(PHYS);
	assert_int_equal(build(RGPU_MSG_VMM_UNMAP, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 2);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_VMM_MAP, APP_VMM_ID, 0, 0, F(APP_ADDR, APP_SIZE),
	       NULL, NULL, 0);
	EXPECT(&ops, 1, RGPU_REC_REMOVE, ST_KIND_PHYSMEM, PHYS, 0, 0, NOF, NULL, NULL, 0);
}

static void case_vmm_access(void)
{
	Rgpu__VmmAccess q = q_vmm_access(0xc3); /* device 0 read-write, device 3 read-write */
	struct rgpu_rec_ops ops;

	/* the whole mapping record again, with the access after the call */
	assert_int_equal(build(RGPU_MSG_VMM_ACCESS, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_SET, ST_KIND_VMM_MAP, APP_VMM_ID, PHYS, 0,
	       F(APP_ADDR, APP_SIZE, 3, APP_OFFSET, 0xc3), NULL, NULL, 0);
}

/* ---- arrays, texture and surface objects ---- */

static Rgpu__ArrayCreate q_array(uint64_t id, uint64_t mipmap, uint32_t level, uint32_t levels)
{
	Rgpu__ArrayCreate q = RGPU__ARRAY_CREATE__INIT;
	q.array = id;
	q.ctx = 0x11;
	q.width = 64;
	q.height = 32;
	q.depth = 6;
	q.format = 0x20;
	q.channels = 4;
	q.flags = 0x1;
	q.mipmap = mipmap;
	q.level = level;
	q.levels = levels;
	return q;
}

static void case_array_create(void)
{
	Rgpu__ArrayCreate q = q_array(0x40, 0, 0, 0), lv = q_array(0x42, 0x41, 2, 0);
	Rgpu__Status ok = r_status(0), bad = r_status(1);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_ARRAY_CREATE, &q, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_ARRAY, 0x40, 0, 0x11,
	       F(64, 32, 6, 0x20 | 4ull << 32, 0x1, 0), NULL, NULL, 0);
	/* a level: its mipmapped array is its parent; the descriptor is the driver's */
	assert_int_equal(build(RGPU_MSG_ARRAY_CREATE, &lv, NULL, &ops), 0);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_ARRAY, 0x42, 0x41, 0x11, F(0, 0, 0, 0, 0, 2), NULL,
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_ARRAY_CREATE, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_mipmap_create(void)
{
	Rgpu__ArrayCreate q = q_array(0x41, 0, 0, 5);
	struct rgpu_rec_ops ops;

	assert_int_equal(build(RGPU_MSG_MIPMAP_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_MIPMAP, 0x41, 0, 0x11,
	       F(64, 32, 6, 0x20 | 4ull << 32, 0x1, 5), NULL, NULL, 0);
}

static void case_array_destroy(void)
{
	Rgpu__ObjRef q = RGPU__OBJ_REF__INIT;
	struct rgpu_rec_ops ops;

	q.id = 0x40;
	q.ctx = 0x11;
	assert_int_equal(build(RGPU_MSG_ARRAY_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_ARRAY, 0x40, 0, 0, NOF, NULL, NULL, 0);
}

static void case_mipmap_destroy(void)
{
	Rgpu__ObjRef q = RGPU__OBJ_REF__INIT;
	struct rgpu_rec_ops ops;

	q.id = 0x41;
	assert_int_equal(build(RGPU_MSG_MIPMAP_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_MIPMAP, 0x41, 0, 0, NOF, NULL, NULL, 0);
}

static void case_texobj_create(void)
{
	Rgpu__TexCreate q = RGPU__TEX_CREATE__INIT;
	Rgpu__ValueReply ok = RGPU__VALUE_REPLY__INIT, bad = RGPU__VALUE_REPLY__INIT;
	struct rgpu_rec_ops ops;

	q.obj = 0x50;
	q.ctx = 0x11;
	q.surface = 1;
	q.resource = 0x40;
	q.has_view = 1;
	q.desc = "0a0b";
	ok.value = 0x1234;
	bad.result = 1;
	/* sent: the value is not known yet; the reply brings it */
	assert_int_equal(build(RGPU_MSG_TEXOBJ_CREATE, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_TEXOBJ, 0x50, 0, 0x11, F(0, 1, 1, 0x40), "0a0b",
	       NULL, 0);
	assert_int_equal(build(RGPU_MSG_TEXOBJ_CREATE, &q, &ok, &ops), 0);
	EXPECT(&ops, 0, RGPU_REC_ADD, ST_KIND_TEXOBJ, 0x50, 0, 0x11, F(0x1234, 1, 1, 0x40),
	       "0a0b", NULL, 0);
	assert_int_equal(build(RGPU_MSG_TEXOBJ_CREATE, &q, &bad, &ops), 0);
	assert_int_equal(ops.n, 0);
}

static void case_texobj_destroy(void)
{
	Rgpu__ObjRef q = RGPU__OBJ_REF__INIT;
	struct rgpu_rec_ops ops;

	q.id = 0x50;
	assert_int_equal(build(RGPU_MSG_TEXOBJ_DESTROY, &q, NULL, &ops), 0);
	assert_int_equal(ops.n, 1);
	EXPECT(&ops, 0, RGPU_REC_REMOVE, ST_KIND_TEXOBJ, 0x50, 0, 0, NOF, NULL, NULL, 0);
}

/* Every message whose effect is create, destroy or attr, with the effect and kind it has. */
static struct rec_case {
	unsigned type;
	uint8_t effect, kind;
	void (*run)(void);
	int seen;
} cases[] = {
    {RGPU_MSG_CTX_CREATE, RGPU_EFFECT_CREATE, ST_KIND_CONTEXT, case_ctx_create, 0},
    {RGPU_MSG_CTX_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_CONTEXT, case_ctx_destroy, 0},
    {RGPU_MSG_CTX_SET_LIMIT, RGPU_EFFECT_ATTR, ST_KIND_CONTEXT, case_ctx_set_limit, 0},
    {RGPU_MSG_STREAM_SET_ATTR, RGPU_EFFECT_ATTR, ST_KIND_STREAM, case_stream_set_attr, 0},
    {RGPU_MSG_CTX_SET_CONFIG, RGPU_EFFECT_ATTR, ST_KIND_CONTEXT, case_ctx_set_config, 0},
    {RGPU_MSG_MEM_ALLOC, RGPU_EFFECT_CREATE, ST_KIND_ALLOC, case_mem_alloc, 0},
    {RGPU_MSG_MEM_FREE, RGPU_EFFECT_DESTROY, ST_KIND_ALLOC, case_mem_free, 0},
    {RGPU_MSG_MODULE_LOAD, RGPU_EFFECT_CREATE, ST_KIND_MODULE, case_module_load, 0},
    {RGPU_MSG_MODULE_UNLOAD, RGPU_EFFECT_DESTROY, ST_KIND_MODULE, case_module_unload, 0},
    {RGPU_MSG_FUNC_GET, RGPU_EFFECT_CREATE, ST_KIND_FUNCTION, case_func_get, 0},
    {RGPU_MSG_GLOBAL_GET, RGPU_EFFECT_CREATE, ST_KIND_GLOBAL, case_global_get, 0},
    {RGPU_MSG_FUNC_SET_ATTR, RGPU_EFFECT_ATTR, ST_KIND_FUNCTION, case_func_set_attr, 0},
    {RGPU_MSG_STREAM_CREATE, RGPU_EFFECT_CREATE, ST_KIND_STREAM, case_stream_create, 0},
    {RGPU_MSG_STREAM_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_STREAM, case_stream_destroy, 0},
    {RGPU_MSG_EVENT_CREATE, RGPU_EFFECT_CREATE, ST_KIND_EVENT, case_event_create, 0},
    {RGPU_MSG_EVENT_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_EVENT, case_event_destroy, 0},
    {RGPU_MSG_CAPTURE_BEGIN, RGPU_EFFECT_ATTR, ST_KIND_STREAM, case_capture_begin, 0},
    {RGPU_MSG_CAPTURE_END, RGPU_EFFECT_CREATE, ST_KIND_GRAPH, case_capture_end, 0},
    {RGPU_MSG_GRAPH_CREATE, RGPU_EFFECT_CREATE, ST_KIND_GRAPH, case_graph_create, 0},
    {RGPU_MSG_GRAPH_INSTANTIATE, RGPU_EFFECT_CREATE, ST_KIND_GRAPH_EXEC, case_graph_instantiate, 0},
    {RGPU_MSG_GRAPH_EXEC_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_GRAPH_EXEC, case_graph_exec_destroy,
     0},
    {RGPU_MSG_GRAPH_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_GRAPH, case_graph_destroy, 0},
    {RGPU_MSG_GRAPH_CLONE, RGPU_EFFECT_CREATE, ST_KIND_GRAPH, case_graph_clone, 0},
    {RGPU_MSG_VMM_CREATE, RGPU_EFFECT_CREATE, ST_KIND_PHYSMEM, case_vmm_create, 0},
    {RGPU_MSG_VMM_RELEASE, RGPU_EFFECT_DESTROY, ST_KIND_PHYSMEM, case_vmm_release, 0},
    {RGPU_MSG_VMM_MAP, RGPU_EFFECT_CREATE, ST_KIND_VMM_MAP, case_vmm_map, 0},
    {RGPU_MSG_VMM_UNMAP, RGPU_EFFECT_DESTROY, ST_KIND_VMM_MAP, case_vmm_unmap, 0},
    {RGPU_MSG_VMM_ACCESS, RGPU_EFFECT_ATTR, ST_KIND_VMM_MAP, case_vmm_access, 0},
    {RGPU_MSG_ARRAY_CREATE, RGPU_EFFECT_CREATE, ST_KIND_ARRAY, case_array_create, 0},
    {RGPU_MSG_MIPMAP_CREATE, RGPU_EFFECT_CREATE, ST_KIND_MIPMAP, case_mipmap_create, 0},
    {RGPU_MSG_ARRAY_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_ARRAY, case_array_destroy, 0},
    {RGPU_MSG_MIPMAP_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_MIPMAP, case_mipmap_destroy, 0},
    {RGPU_MSG_TEXOBJ_CREATE, RGPU_EFFECT_CREATE, ST_KIND_TEXOBJ, case_texobj_create, 0},
    {RGPU_MSG_TEXOBJ_DESTROY, RGPU_EFFECT_DESTROY, ST_KIND_TEXOBJ, case_texobj_destroy, 0},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int records(const struct rgpu_msg_info *mi)
{
	return mi->effect == RGPU_EFFECT_CREATE || mi->effect == RGPU_EFFECT_DESTROY ||
	       mi->effect == RGPU_EFFECT_ATTR;
}

static void test_every_recording_message(void **state)
{
	unsigned covered = 0;

	(void)state;
	for (size_t i = 0; i < NCASES; i++)
		cases[i].seen = 0;
	for (unsigned t = 1; t <= 65535; t++) {
		const struct rgpu_msg_info *mi = rgpu_msg_info(t);
		struct rec_case *c = NULL;

		if (!mi || !records(mi))
			continue;
		assert_int_equal(mi->type, t);
		for (size_t i = 0; i < NCASES; i++)
			if (cases[i].type == t)
				c = &cases[i];
		if (!c)
			fail_msg("%s (%u) has effect %u on kind %u but no case in test_record.c: "
				 "add one",
				 mi->name, t, mi->effect, mi->kind);
		assert_int_equal(mi->effect, c->effect);
		assert_int_equal(mi->kind, c->kind);
		c->run();
		c->seen++;
		covered++;
	}
	/* and no case names a type that no longer records */
	for (size_t i = 0; i < NCASES; i++)
		assert_int_equal(cases[i].seen, 1);
	assert_int_equal(covered, 34);
}

/* ---- 2. bodies of the wrong type; messages that record nothing ---------------------------- */

static void test_wrong_body_and_no_effect(void **state)
{
	Rgpu__Occupancy alien = RGPU__OCCUPANCY__INIT;
	Rgpu__OccupancyReply alien_rep = RGPU__OCCUPANCY_REPLY__INIT;
	struct rgpu_rec_ops ops;
	unsigned recording = 0, silent = 0;

	(void)state;
	for (unsigned t = 1; t <= 65535; t++) {
		const struct rgpu_msg_info *mi = rgpu_msg_info(t);
		ProtobufCMessage *req = NULL, *rep = NULL;

		if (!mi)
			continue;
		if (mi->body) {
			req = malloc(mi->body->sizeof_message);
			assert_non_null(req);
			protobuf_c_message_init(mi->body, req);
		}
		if (mi->reply) {
			rep = malloc(mi->reply->sizeof_message);
			assert_non_null(rep);
			protobuf_c_message_init(mi->reply, rep);
		}
		if (records(mi)) {
			assert_non_null(req);
			assert_ptr_not_equal(mi->body, &rgpu__occupancy__descriptor);
			assert_ptr_not_equal(mi->reply, &rgpu__occupancy_reply__descriptor);
			/* another message's body, or none: refused, nothing listed */
			assert_int_equal(build(t, &alien, NULL, &ops), RGPU_EINVAL);
			assert_int_equal(ops.n, 0);
			assert_int_equal(build(t, NULL, NULL, &ops), RGPU_EINVAL);
			assert_int_equal(ops.n, 0);
			if (mi->reply) {
				/* the right request with another message's reply */
				assert_int_equal(build(t, req, &alien_rep, &ops), RGPU_EINVAL);
				assert_int_equal(ops.n, 0);
				/* the reply's own type is taken */
				assert_int_equal(build(t, req, rep, &ops), 0);
			}
			/* the request's own type is taken */
			assert_int_equal(build(t, req, NULL, &ops), 0);
			recording++;
		} else {
			/* effect none or sync: nothing, whatever the body */
			assert_int_equal(build(t, req, rep, &ops), 0);
			assert_int_equal(ops.n, 0);
			assert_int_equal(build(t, &alien, NULL, &ops), 0);
			assert_int_equal(ops.n, 0);
			silent++;
		}
		free(req);
		free(rep);
	}
	assert_int_equal(recording, 34);
	/* the table has 29 such rows today; a few may come or go without this test knowing */
	assert_true(silent >= 25);

	/* by name: a launch, a synchronisation, a null call */
	{
		Rgpu__Launch l = RGPU__LAUNCH__INIT;
		Rgpu__StreamOp s = q_stream_op();
		Rgpu__Status st = r_status(0);
		Rgpu__CtxRef c = q_ctx_ref();
		Rgpu__ValueReply v = RGPU__VALUE_REPLY__INIT;
		Rgpu__CtxLimit lim = q_ctx_limit(7);

		l.func = FUNC;
		l.stream = STREAM;
		assert_int_equal(build(RGPU_MSG_LAUNCH, &l, NULL, &ops), 0);
		assert_int_equal(ops.n, 0);
		assert_int_equal(build(RGPU_MSG_STREAM_SYNC, &s, &st, &ops), 0);
		assert_int_equal(ops.n, 0);
		assert_int_equal(build(RGPU_MSG_PING, NULL, &st, &ops), 0);
		assert_int_equal(ops.n, 0);
		/* CTX_GET_LIMIT shares CTX_SET_LIMIT's body and records nothing */
		assert_int_equal(build(RGPU_MSG_CTX_GET_LIMIT, &lim, &v, &ops), 0);
		assert_int_equal(ops.n, 0);
		/* CTX_DESTROY with CTX_CREATE's body, CTX_SET_LIMIT with a ValueReply */
		assert_int_equal(build(RGPU_MSG_CTX_DESTROY, &lim, NULL, &ops), RGPU_EINVAL);
		assert_int_equal(ops.n, 0);
		assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &lim, &v, &ops), RGPU_EINVAL);
		assert_int_equal(ops.n, 0);
		assert_int_equal(build(RGPU_MSG_CTX_CREATE, &c, NULL, &ops), RGPU_EINVAL);
		assert_int_equal(ops.n, 0);
		/* an unknown type records nothing */
		assert_int_equal(build(65535, &c, NULL, &ops), 0);
		assert_int_equal(ops.n, 0);
	}
}

/* ---- 3. applying: cascades, hashes, failures ---------------------------------------------- */

struct removals {
	struct st_log *log;
	int n;
	uint64_t id[16];
	uint32_t kind[16];
	int live[16]; /* the record was still in the log when the hook saw it */
};

static void on_removed(const struct st_rec *rec, void *arg)
{
	struct removals *r = arg;

	if (r->n < 16) {
		r->id[r->n] = rec->id;
		r->kind[r->n] = rec->kind;
		r->live[r->n] = st_find(r->log, rec->id) == rec;
	}
	r->n++;
}

static void test_apply_ctx_destroy_cascade(void **state)
{
	struct st_log *log = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__ModuleLoad ml = q_module_load();
	Rgpu__ModuleLoadReply mok = r_module(0, 0);
	Rgpu__FuncGet fg =
	    q_func_get(FUNC, MOD, RGPU__FUNC_KIND__FUNC_MODULE, (char *)"vecAdd_f32");
	Rgpu__StreamCreate sc = q_stream_create();
	Rgpu__FuncAttr fa = q_func_attr(0x18000);
	Rgpu__CtxRef cd = q_ctx_ref();
	struct removals seen = {.log = log};
	struct rgpu_rec_hooks hooks = {on_removed, &seen};
	struct rgpu_rec_ops ops;
	int failed = -1;

	(void)state;
	assert_int_equal(apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_MODULE_LOAD, &ml, &mok), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_FUNC_GET, &fg, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_STREAM_CREATE, &sc, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_FUNC_SET_ATTR, &fa, NULL), 1);
	EXPECT_ORDER(log, 5, CTX, MOD, FUNC, STREAM, FATTR_ID);
	EXPECT_REC(st_find(log, CTX), ST_KIND_CONTEXT, CTX, 0, 0, F(3, 0x5, 1), NULL, NULL);
	EXPECT_REC(st_find(log, MOD), ST_KIND_MODULE, MOD, 0, CTX, F(0x2a40, 1), NULL, mod_hash);
	EXPECT_REC(st_find(log, FUNC), ST_KIND_FUNCTION, FUNC, MOD, CTX, NOF, "vecAdd_f32", NULL);
	EXPECT_REC(st_find(log, STREAM), ST_KIND_STREAM, STREAM, 0, CTX,
		   F(0x1, 0xfffffffffffffffeull), NULL, NULL);
	EXPECT_REC(st_find(log, FATTR_ID), ST_KIND_ATTR, FATTR_ID, FUNC, 0, F(FATTR_KEY, 0x18000),
		   NULL, NULL);

	/* setting the attribute again updates it in place */
	fa = q_func_attr(0x20000);
	assert_int_equal(apply_msg(log, RGPU_MSG_FUNC_SET_ATTR, &fa, NULL), 1);
	EXPECT_ORDER(log, 5, CTX, MOD, FUNC, STREAM, FATTR_ID);
	EXPECT_REC(st_find(log, FATTR_ID), ST_KIND_ATTR, FATTR_ID, FUNC, 0, F(FATTR_KEY, 0x20000),
		   NULL, NULL);

	/* destroying the context: dependents first, newest first, the context last */
	assert_int_equal(build(RGPU_MSG_CTX_DESTROY, &cd, NULL, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, &hooks, &failed), 0);
	assert_int_equal(failed, -1);
	assert_int_equal(seen.n, 5);
	assert_int_equal(seen.id[0], FATTR_ID);
	assert_int_equal(seen.kind[0], ST_KIND_ATTR);
	assert_int_equal(seen.id[1], STREAM);
	assert_int_equal(seen.kind[1], ST_KIND_STREAM);
	assert_int_equal(seen.id[2], FUNC);
	assert_int_equal(seen.kind[2], ST_KIND_FUNCTION);
	assert_int_equal(seen.id[3], MOD);
	assert_int_equal(seen.kind[3], ST_KIND_MODULE);
	assert_int_equal(seen.id[4], CTX);
	assert_int_equal(seen.kind[4], ST_KIND_CONTEXT);
	for (int i = 0; i < 5; i++)
		assert_int_equal(seen.live[i], 1);
	assert_int_equal(st_count(log), 0);
	for (uint64_t id = CTX; id <= FUNC; id += 0x10)
		assert_null(st_find(log, id));
	assert_null(st_find(log, FATTR_ID));

	/* again: nothing to remove, the hook is not called */
	seen.n = 0;
	assert_int_equal(rgpu_rec_apply(log, &ops, &hooks, &failed), RGPU_ENOTFOUND);
	assert_int_equal(failed, 0);
	assert_int_equal(seen.n, 0);
	st_log_free(log);
}

/*
 * The application's virtual memory in a log: physical memory, a mapping of it whose access is
 * set (in place), then the last unmap of released memory, which takes the mapping first.
 */
static void test_apply_vmm(void **state)
{
	struct st_log *log = new_log();
	Rgpu__VmmCreate vc = q_vmm_create();
	Rgpu__VmmMap vm = q_vmm_map();
	Rgpu__VmmAccess va = q_vmm_access(0x3);
	Rgpu__VmmUnmap vu = q_vmm_unmap(PHYS);
	Rgpu__VmmRelease vr = q_vmm_release();
	Rgpu__Status ok = r_status(0);
	struct removals seen = {.log = log};
	struct rgpu_rec_hooks hooks = {on_removed, &seen};
	struct rgpu_rec_ops ops;

	(void)state;
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_CREATE, &vc, &ok), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_MAP, &vm, NULL), 1);
	EXPECT_ORDER(log, 2, PHYS, APP_VMM_ID);
	EXPECT_REC(st_find(log, APP_VMM_ID), ST_KIND_VMM_MAP, APP_VMM_ID, PHYS, 0,
		   F(APP_ADDR, APP_SIZE, 3, APP_OFFSET, 0), NULL, NULL);
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_ACCESS, &va, NULL), 1);
	va = q_vmm_access(0xc3);
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_ACCESS, &va, NULL), 1);
	EXPECT_ORDER(log, 2, PHYS, APP_VMM_ID);
	EXPECT_REC(st_find(log, APP_VMM_ID), ST_KIND_VMM_MAP, APP_VMM_ID, PHYS, 0,
		   F(APP_ADDR, APP_SIZE, 3, APP_OFFSET, 0xc3), NULL, NULL);

	/* access for a mapping of other memory than its own is refused: parent is fixed */
	va.handle = PHYS + 1;
	assert_int_equal(build(RGPU_MSG_VMM_ACCESS, &va, NULL, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, NULL), RGPU_EINVAL);

	assert_int_equal(build(RGPU_MSG_VMM_UNMAP, &vu, NULL, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, &hooks, NULL), 0);
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.id[0], APP_VMM_ID);
	assert_int_equal(seen.kind[0], ST_KIND_VMM_MAP);
	assert_int_equal(seen.id[1], PHYS);
	assert_int_equal(seen.kind[1], ST_KIND_PHYSMEM);
	assert_int_equal(st_count(log), 0);

	/* memory released while mapped, unmapped without release: the release removes both */
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_CREATE, &vc, &ok), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_VMM_MAP, &vm, NULL), 1);
	seen.n = 0;
	assert_int_equal(build(RGPU_MSG_VMM_RELEASE, &vr, NULL, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, &hooks, NULL), 0);
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.id[0], APP_VMM_ID);
	assert_int_equal(seen.id[1], PHYS);
	assert_int_equal(st_count(log), 0);
	st_log_free(log);
}

static void test_apply_graph_exec_hash(void **state)
{
	struct st_log *log = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__StreamCreate sc = q_stream_create();
	Rgpu__CaptureOp cb = q_capture(0), ce = q_capture(GRAPH_CAP);
	Rgpu__GraphOp gi = q_graph(GRAPH_CAP, EXEC, 0x1), gc = q_graph(GRAPH_MADE, 0, 0x4);
	Rgpu__GraphOp gi2 = q_graph(GRAPH_MADE, EXEC2, 0x1), gd = q_graph(GRAPH_CAP, 0, 0);
	Rgpu__Status ok = r_status(0);
	struct rgpu_rec_ops ops;

	(void)state;
	apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL);
	apply_msg(log, RGPU_MSG_STREAM_CREATE, &sc, NULL);
	assert_int_equal(apply_msg(log, RGPU_MSG_CAPTURE_BEGIN, &cb, &ok), 1);
	EXPECT_REC(st_find(log, CAPTURE_ID), ST_KIND_ATTR, CAPTURE_ID, STREAM, 0, F(CAPTURE_KEY, 1),
		   NULL, NULL);

	/* the end of the capture: the side puts the journal's digest into the graph */
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, &ok, &ops), 0);
	assert_int_equal(ops.n, 2);
	assert_int_equal(ops.v[1].journal, 1);
	memcpy(ops.v[1].rec.hash, journal_hash, ST_HASH_LEN);
	ops.v[1].rec.has_hash = true;
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, NULL), 0);
	assert_null(st_find(log, CAPTURE_ID));
	EXPECT_REC(st_find(log, GRAPH_CAP), ST_KIND_GRAPH, GRAPH_CAP, 0, CTX, F(0, STREAM, 1), NULL,
		   journal_hash);

	/*
	 * instantiated: the exec takes its graph's capture (stream, mode, capture length) from
	 * the log; its hash and journal length come from the journals' step (test_journals_step)
	 */
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &gi, &ok, &ops), 0);
	assert_int_equal(ops.n, 1);
	assert_false(ops.v[0].rec.has_hash);
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, NULL), 0);
	assert_false(ops.v[0].rec.has_hash);
	EXPECT_REC(st_find(log, EXEC), ST_KIND_GRAPH_EXEC, EXEC, 0, CTX,
		   F(0x1, GRAPH_CAP, STREAM, 1), NULL, NULL);

	/* a graph made by cuGraphCreate has no journal: its exec has no hash */
	assert_int_equal(apply_msg(log, RGPU_MSG_GRAPH_CREATE, &gc, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_GRAPH_INSTANTIATE, &gi2, &ok), 1);
	EXPECT_REC(st_find(log, EXEC2), ST_KIND_GRAPH_EXEC, EXEC2, 0, CTX, F(0x1, GRAPH_MADE), NULL,
		   NULL);

	/* the exec outlives its graph */
	assert_int_equal(apply_msg(log, RGPU_MSG_GRAPH_DESTROY, &gd, NULL), 1);
	assert_null(st_find(log, GRAPH_CAP));
	EXPECT_REC(st_find(log, EXEC), ST_KIND_GRAPH_EXEC, EXEC, 0, CTX,
		   F(0x1, GRAPH_CAP, STREAM, 1), NULL, NULL);
	EXPECT_ORDER(log, 5, CTX, STREAM, EXEC, GRAPH_MADE, EXEC2);
	st_log_free(log);
}

static void test_apply_failure_index(void **state)
{
	struct st_log *log = new_log();
	Rgpu__MemAlloc ma = q_mem_alloc(0);
	Rgpu__MemFree mf = q_mem_free(1);
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__StreamCreate sc = q_stream_create();
	struct rgpu_rec_ops ops;
	int failed = -1;

	(void)state;
	/* the allocation is live, its mapping is not: both removals are tried, the second fails */
	apply_msg(log, RGPU_MSG_MEM_ALLOC, &ma, NULL);
	EXPECT_ORDER(log, 1, ALLOC_ADDR);
	assert_int_equal(build(RGPU_MSG_MEM_FREE, &mf, NULL, &ops), 0);
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, &failed), RGPU_ENOTFOUND);
	assert_int_equal(failed, 1);
	assert_int_equal(st_count(log), 0);

	/* neither is live: both fail, the first failure is the one named */
	failed = -1;
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, &failed), RGPU_ENOTFOUND);
	assert_int_equal(failed, 0);

	/* an add of a live id */
	apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL);
	assert_int_equal(build(RGPU_MSG_CTX_CREATE, &cc, NULL, &ops), 0);
	failed = -1;
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, &failed), RGPU_EEXIST);
	assert_int_equal(failed, 0);

	/* a stream in a context that is not live */
	sc.ctx = 0x29;
	assert_int_equal(build(RGPU_MSG_STREAM_CREATE, &sc, NULL, &ops), 0);
	failed = -1;
	assert_int_equal(rgpu_rec_apply(log, &ops, NULL, &failed), RGPU_ENOTFOUND);
	assert_int_equal(failed, 0);
	EXPECT_ORDER(log, 1, CTX);
	st_log_free(log);
}

/* ---- 4. settling a call's provisional records --------------------------------------------- */

static void test_settle_failed_reply(void **state)
{
	struct st_log *log = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__MemAlloc ma = q_mem_alloc(1);
	Rgpu__StreamCreate sc = q_stream_create();
	Rgpu__CaptureOp cb = q_capture(0), ce = q_capture(GRAPH_CAP);
	Rgpu__Status ok = r_status(0), oom = r_status(2), inval = r_status(901);
	struct rgpu_rec_ops sent, final;

	(void)state;
	apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL);

	/* a mapping allocation, sent; another thread's stream is recorded before its reply */
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &ma, NULL, &sent), 0);
	assert_int_equal(sent.n, 2);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	apply_msg(log, RGPU_MSG_STREAM_CREATE, &sc, NULL);
	EXPECT_ORDER(log, 4, CTX, VMM_ID, ALLOC_ADDR, STREAM);

	/* out of memory: neither the mapping nor the allocation exists */
	assert_int_equal(build(RGPU_MSG_MEM_ALLOC, &ma, &oom, &final), 0);
	assert_int_equal(final.n, 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 2, CTX, STREAM);
	assert_null(st_find(log, VMM_ID));
	assert_null(st_find(log, ALLOC_ADDR));

	/* a capture that fails at its end: the graph goes, the capture stays over */
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, &ok, &final), 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 3, CTX, STREAM, CAPTURE_ID);
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	EXPECT_ORDER(log, 3, CTX, STREAM, GRAPH_CAP);
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, &inval, &final), 0);
	assert_int_equal(final.n, 1);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 2, CTX, STREAM);

	/* a failed capture begin: its attribute goes */
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	EXPECT_ORDER(log, 3, CTX, STREAM, CAPTURE_ID);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, &inval, &final), 0);
	assert_int_equal(final.n, 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 2, CTX, STREAM);
	st_log_free(log);
}

/* A failed cuCtxSetLimit: a new limit's record goes, an earlier value comes back. */
static void test_settle_failed_set(void **state)
{
	struct st_log *log = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__CtxLimit first = q_ctx_limit(0x10000), second = q_ctx_limit(0x20000);
	Rgpu__Status ok = r_status(0), bad = r_status(1);
	struct rgpu_rec_ops sent, final;

	(void)state;
	apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL);
	/* never set before, and the set fails: no attribute record */
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &first, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	assert_int_equal(sent.v[0].existed, 0);
	EXPECT_ORDER(log, 2, CTX, LIMIT_ID);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &first, &bad, &final), 0);
	assert_int_equal(final.n, 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 1, CTX);
	/* set to 0x10000, then a failed set to 0x20000: the record keeps 0x10000 */
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &first, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &first, &ok, &final), 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &second, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	assert_int_equal(sent.v[0].existed, 1);
	assert_int_equal(st_find(log, LIMIT_ID)->f[1], 0x20000);
	assert_int_equal(build(RGPU_MSG_CTX_SET_LIMIT, &second, &bad, &final), 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 2, CTX, LIMIT_ID);
	EXPECT_REC(st_find(log, LIMIT_ID), ST_KIND_ATTR, LIMIT_ID, CTX, 0, F(LIMIT_KEY, 0x10000),
		   NULL, NULL);
	st_log_free(log);
}

static void test_settle_module_need_image(void **state)
{
	struct st_log *log = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__ModuleLoad ml = q_module_load();
	Rgpu__ModuleLoadReply need = r_module(0, 1), ok = r_module(0, 0);
	struct rgpu_rec_ops sent, final;

	(void)state;
	apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL);
	/* by hash first: the server asks for the image, nothing was loaded */
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &ml, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	EXPECT_ORDER(log, 2, CTX, MOD);
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &ml, &need, &final), 0);
	assert_int_equal(final.n, 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 1, CTX);
	/* then with the image: loaded */
	ml.has_image = 1;
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &ml, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(log, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_MODULE_LOAD, &ml, &ok, &final), 0);
	assert_int_equal(rgpu_rec_settle(log, &sent, &final), 0);
	EXPECT_ORDER(log, 2, CTX, MOD);
	EXPECT_REC(st_find(log, MOD), ST_KIND_MODULE, MOD, 0, CTX, F(0x2a40, 1), NULL, mod_hash);
	st_log_free(log);
}

static void test_settle_global_get(void **state)
{
	struct st_log *client = new_log(), *server = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__ModuleLoad ml = q_module_load();
	Rgpu__ModuleLoadReply mok = r_module(0, 0);
	Rgpu__GlobalGet gg = q_global_get();
	Rgpu__GlobalReply gok = r_global(0);
	Rgpu__StreamCreate sc = q_stream_create();
	struct rgpu_rec_ops sent, final;
	uint8_t dc[ST_DIGEST_LEN], ds[ST_DIGEST_LEN];
	const struct st_rec *ra = NULL, *rb = NULL;
	size_t at = 99;

	(void)state;
	/* the client: the global is recorded when sent, a stream comes before the reply */
	apply_msg(client, RGPU_MSG_CTX_CREATE, &cc, NULL);
	apply_msg(client, RGPU_MSG_MODULE_LOAD, &ml, NULL);
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &gg, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(client, &sent, NULL, NULL), 0);
	apply_msg(client, RGPU_MSG_STREAM_CREATE, &sc, NULL);
	EXPECT_REC(st_find(client, GLOBAL), ST_KIND_GLOBAL, GLOBAL, MOD, CTX, NOF, "d_table", NULL);

	/* the worker records once, with the reply, in the same order */
	apply_msg(server, RGPU_MSG_CTX_CREATE, &cc, NULL);
	apply_msg(server, RGPU_MSG_MODULE_LOAD, &ml, &mok);
	apply_msg(server, RGPU_MSG_GLOBAL_GET, &gg, &gok);
	apply_msg(server, RGPU_MSG_STREAM_CREATE, &sc, NULL);

	/* unsettled, they part at the global (index 2) */
	assert_int_equal(st_compare(client, server, &at, &ra, &rb), 1);
	assert_int_equal(at, 2);
	assert_non_null(ra);
	assert_non_null(rb);
	assert_int_equal(ra->id, GLOBAL);
	assert_int_equal(rb->id, GLOBAL);
	assert_int_equal(ra->global.addr, 0);
	assert_int_equal(rb->global.addr, GLOBAL_ADDR);

	/* settled: the reply's address and size, in its first place */
	assert_int_equal(build(RGPU_MSG_GLOBAL_GET, &gg, &gok, &final), 0);
	assert_int_equal(rgpu_rec_settle(client, &sent, &final), 0);
	EXPECT_REC(st_find(client, GLOBAL), ST_KIND_GLOBAL, GLOBAL, MOD, CTX,
		   F(GLOBAL_ADDR, GLOBAL_SIZE), "d_table", NULL);
	EXPECT_ORDER(client, 4, CTX, MOD, GLOBAL, STREAM);
	at = 99;
	assert_int_equal(st_compare(client, server, &at, &ra, &rb), 0);
	assert_int_equal(at, 4);
	assert_null(ra);
	assert_null(rb);
	st_digest(client, dc);
	st_digest(server, ds);
	assert_memory_equal(dc, ds, ST_DIGEST_LEN);
	st_log_free(client);
	st_log_free(server);
}

static void test_settle_keeps_journal_hash(void **state)
{
	struct st_log *client = new_log(), *server = new_log();
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__StreamCreate sc = q_stream_create();
	Rgpu__CaptureOp cb = q_capture(0), ce = q_capture(GRAPH_CAP);
	Rgpu__GraphOp gi = q_graph(GRAPH_CAP, EXEC, 0x1);
	Rgpu__Status ok = r_status(0);
	struct rgpu_rec_ops sent, final, ops;
	uint8_t dc[ST_DIGEST_LEN], ds[ST_DIGEST_LEN];

	(void)state;
	apply_msg(client, RGPU_MSG_CTX_CREATE, &cc, NULL);
	apply_msg(client, RGPU_MSG_STREAM_CREATE, &sc, NULL);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, NULL, &sent), 0);
	assert_int_equal(rgpu_rec_apply(client, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_CAPTURE_BEGIN, &cb, &ok, &final), 0);
	assert_int_equal(rgpu_rec_settle(client, &sent, &final), 0);

	/* the client hashes the journal when the end is sent; the reply carries no hash */
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, NULL, &sent), 0);
	memcpy(sent.v[1].rec.hash, journal_hash, ST_HASH_LEN);
	sent.v[1].rec.has_hash = true;
	assert_int_equal(rgpu_rec_apply(client, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, &ok, &final), 0);
	assert_false(final.v[1].rec.has_hash);
	assert_int_equal(rgpu_rec_settle(client, &sent, &final), 0);
	EXPECT_REC(st_find(client, GRAPH_CAP), ST_KIND_GRAPH, GRAPH_CAP, 0, CTX, F(0, STREAM, 1),
		   NULL, journal_hash);

	/* the exec took its journal's hash and length when sent; settling keeps them */
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &gi, NULL, &sent), 0);
	memcpy(sent.v[0].rec.hash, journal_hash, ST_HASH_LEN);
	sent.v[0].rec.has_hash = true;
	sent.v[0].rec.f[4] = 0x1234;
	assert_int_equal(rgpu_rec_apply(client, &sent, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &gi, &ok, &final), 0);
	assert_int_equal(rgpu_rec_settle(client, &sent, &final), 0);
	EXPECT_REC(st_find(client, EXEC), ST_KIND_GRAPH_EXEC, EXEC, 0, CTX,
		   F(0x1, GRAPH_CAP, STREAM, 1, 0x1234), NULL, journal_hash);

	/* the worker, recording once with its own journal digest, agrees */
	apply_msg(server, RGPU_MSG_CTX_CREATE, &cc, NULL);
	apply_msg(server, RGPU_MSG_STREAM_CREATE, &sc, NULL);
	apply_msg(server, RGPU_MSG_CAPTURE_BEGIN, &cb, &ok);
	assert_int_equal(build(RGPU_MSG_CAPTURE_END, &ce, &ok, &ops), 0);
	memcpy(ops.v[1].rec.hash, journal_hash, ST_HASH_LEN);
	ops.v[1].rec.has_hash = true;
	assert_int_equal(rgpu_rec_apply(server, &ops, NULL, NULL), 0);
	assert_int_equal(build(RGPU_MSG_GRAPH_INSTANTIATE, &gi, &ok, &ops), 0);
	memcpy(ops.v[0].rec.hash, journal_hash, ST_HASH_LEN);
	ops.v[0].rec.has_hash = true;
	ops.v[0].rec.f[4] = 0x1234;
	assert_int_equal(rgpu_rec_apply(server, &ops, NULL, NULL), 0);
	EXPECT_ORDER(client, 4, CTX, STREAM, GRAPH_CAP, EXEC);
	assert_int_equal(st_compare(client, server, NULL, NULL, NULL), 0);
	st_digest(client, dc);
	st_digest(server, ds);
	assert_memory_equal(dc, ds, ST_DIGEST_LEN);
	st_log_free(client);
	st_log_free(server);
}

/* ---- 5. capture journals ------------------------------------------------------------------ */

static void test_journal_wants(void **state)
{
	(void)state;
	assert_true(rgpu_journal_wants(RGPU_MSG_LAUNCH));
	assert_true(rgpu_journal_wants(RGPU_MSG_MEMCPY_HTOD));
	assert_true(rgpu_journal_wants(RGPU_MSG_MEMCPY_DTOD));
	assert_true(rgpu_journal_wants(RGPU_MSG_MEMSET));
	assert_true(rgpu_journal_wants(RGPU_MSG_HOST_FUNC));
	assert_true(rgpu_journal_wants(RGPU_MSG_EVENT_RECORD));
	assert_true(rgpu_journal_wants(RGPU_MSG_STREAM_WAIT_EVENT));

	assert_false(rgpu_journal_wants(RGPU_MSG_CALLBACK_DONE));
	assert_false(rgpu_journal_wants(RGPU_MSG_STREAM_SYNC));
	assert_false(rgpu_journal_wants(RGPU_MSG_MEM_ALLOC));
	assert_false(rgpu_journal_wants(RGPU_MSG_MEMCPY_DTOH));
	assert_false(rgpu_journal_wants(RGPU_MSG_CAPTURE_BEGIN));
	assert_false(rgpu_journal_wants(RGPU_MSG_CAPTURE_END));
	assert_false(rgpu_journal_wants(RGPU_MSG_STREAM_CREATE));
	assert_false(rgpu_journal_wants(RGPU_MSG_ACK));
	assert_false(rgpu_journal_wants(RGPU_MSG_DATA));
	assert_false(rgpu_journal_wants(RGPU_MSG_CALLBACK));
	assert_false(rgpu_journal_wants(0));
	assert_false(rgpu_journal_wants(65535));
}

static const uint8_t body1[5] = {0x09, 0x41, 0x00, 0x00, 0x00};
static const uint8_t payload1[12] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02,
				     0x03, 0x04, 0xa5, 0x5a, 0xc3, 0x3c};
static const uint8_t body2[7] = {0x09, 0x00, 0x10, 0x20, 0x00, 0x7f, 0x15};

/* record.h's layout of those two frames: type u16, body length u32, payload length u64 (LE) */
static const uint8_t two_frames[52] = {
    0x28, 0x00,								    /* MSG_LAUNCH (40) */
    0x05, 0x00, 0x00, 0x00,						    /* body: 5 bytes */
    0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,			    /* payload: 12 bytes */
    0x09, 0x41, 0x00, 0x00, 0x00,					    /* body1 */
    0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0xa5, 0x5a, 0xc3, 0x3c, /* payload1 */
    0x1a, 0x00,								    /* MSG_MEMSET (26) */
    0x07, 0x00, 0x00, 0x00,						    /* body: 7 bytes */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,			    /* no payload */
    0x09, 0x00, 0x10, 0x20, 0x00, 0x7f, 0x15,				    /* body2 */
};

/* SHA-256 of nothing */
static const uint8_t sha256_empty[32] = {
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
};

/* One frame as a journal holds it: its bytes, for the expected digests. */
static size_t frame_of(uint8_t *out, unsigned type, const ProtobufCMessage *m)
{
	size_t blen = protobuf_c_message_get_packed_size(m);
	out[0] = (uint8_t)type;
	out[1] = (uint8_t)(type >> 8);
	out[2] = (uint8_t)blen;
	out[3] = (uint8_t)(blen >> 8);
	memset(out + 4, 0, 10);
	protobuf_c_message_pack(m, out + 14);
	return 14 + blen;
}

static int step(struct rgpu_journals *js, unsigned type, const ProtobufCMessage *m,
		const void *rep, struct rgpu_rec_ops *ops)
{
	uint8_t body[256];
	size_t blen = protobuf_c_message_get_packed_size(m);

	assert_true(blen <= sizeof(body));
	protobuf_c_message_pack(m, body);
	ops->n = 0;
	assert_int_equal(rgpu_record_build(type, m, rep, ops), 0);
	return rgpu_journals_step(js, type, m, body, blen, NULL, 0, ops);
}

/*
 * A graph's journal across its life, on the worker (bytes kept) and the client (hashed only):
 * a capture, a node added after it, an instantiation (the exec takes the hash and length then),
 * an exec's own change, a child graph node's copy (an alias), a clone (its journal opens with
 * the frame that made it), and an exec's end.
 */
static void test_journals_step(void **state)
{
	Rgpu__CaptureOp cb = RGPU__CAPTURE_OP__INIT;
	Rgpu__GraphBind bind = RGPU__GRAPH_BIND__INIT;
	Rgpu__GraphNode add = RGPU__GRAPH_NODE__INIT, set = RGPU__GRAPH_NODE__INIT;
	Rgpu__GraphNode child = RGPU__GRAPH_NODE__INIT;
	Rgpu__GraphEdit edit = RGPU__GRAPH_EDIT__INIT;
	Rgpu__GraphClone clone = RGPU__GRAPH_CLONE__INIT;
	Rgpu__GraphOp gi = q_graph(GRAPH_CAP, EXEC, 0), gd = q_graph(0, EXEC, 0);
	Rgpu__Status ok = r_status(0);
	uint32_t idx[1] = {0};
	uint64_t id[1] = {0x301}, orig[1] = {0x301}, copy[1] = {0x401};
	uint8_t want[1024], d[32];
	size_t caplen, graphlen, n;
	struct rgpu_rec_ops ops;
	(void)state;

	for (int keep = 1; keep >= 0; keep--) {
		struct rgpu_journals js = {NULL, NULL, keep};
		struct rgpu_journal *j, *c;

		cb.stream = STREAM;
		cb.ctx = CTX;
		cb.mode = 1;
		cb.graph = GRAPH_CAP;
		assert_int_equal(step(&js, RGPU_MSG_CAPTURE_BEGIN, &cb.base, &ok, &ops), 0);
		assert_non_null(js.capturing);
		assert_int_equal(js.capturing->graph, GRAPH_CAP);
		/* work, then a node named by its position in the capture's dependencies */
		assert_int_equal(rgpu_journals_step(&js, RGPU_MSG_LAUNCH, NULL, body1, sizeof(body1),
						    payload1, sizeof(payload1), &ops),
				 0);
		memcpy(want, two_frames, 31);
		n = 31;
		bind.graph = GRAPH_CAP;
		bind.ctx = CTX;
		bind.index = idx;
		bind.n_index = 1;
		bind.id = id;
		bind.n_id = 1;
		bind.capture = 1;
		bind.stream = STREAM;
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_BIND, &bind.base, NULL, &ops), 0);
		n += frame_of(want + n, RGPU_MSG_GRAPH_BIND, &bind.base);
		caplen = n;
		assert_int_equal(step(&js, RGPU_MSG_CAPTURE_END, &cb.base, &ok, &ops), 0);
		assert_null(js.capturing);
		assert_int_equal(ops.v[1].journal, 1);
		assert_true(ops.v[1].rec.has_hash);
		assert_int_equal(ops.v[1].rec.f[3], caplen);
		rgpu_sha256(want, caplen, d);
		assert_memory_equal(ops.v[1].rec.hash, d, 32);
		j = rgpu_journals_kept(&js, GRAPH_CAP);
		assert_non_null(j);
		assert_int_equal(j->total, caplen);
		assert_int_equal(j->len, keep ? caplen : 0);
		if (keep)
			assert_memory_equal(j->buf, want, caplen);

		/* a node added after the capture goes on in the same journal */
		add.graph = GRAPH_CAP;
		add.node = 0x302;
		add.ctx = CTX;
		add.type = 0; /* kernel */
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_NODE, &add.base, NULL, &ops), 0);
		n += frame_of(want + n, RGPU_MSG_GRAPH_NODE, &add.base);
		graphlen = n;
		assert_int_equal(j->total, graphlen);

		/* the exec: the hash and length of the journal now */
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_INSTANTIATE, &gi.base, &ok, &ops), 0);
		assert_int_equal(ops.n, 1);
		assert_true(ops.v[0].rec.has_hash);
		assert_int_equal(ops.v[0].rec.f[4], graphlen);
		rgpu_sha256(want, graphlen, d);
		assert_memory_equal(ops.v[0].rec.hash, d, 32);

		/* an exec's change: a journal of its own, the graph's unchanged */
		set.graph = GRAPH_CAP;
		set.exec = EXEC;
		set.node = 0x302;
		set.op = RGPU__GRAPH_NODE_OP__NODE_EXEC_SET;
		set.ctx = CTX;
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_NODE, &set.base, NULL, &ops), 0);
		assert_int_equal(j->total, graphlen);
		c = rgpu_journals_kept(&js, EXEC);
		assert_non_null(c);
		assert_int_equal(c->total, frame_of(want + 512, RGPU_MSG_GRAPH_NODE, &set.base));

		/* a child graph node's copy: its changes go into the journal of the node's graph */
		child.graph = GRAPH_MADE;
		child.node = 0x303;
		child.type = 4; /* child graph */
		child.child = GRAPH_CAP;
		child.child_copy = 0x501;
		child.ctx = CTX;
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_NODE, &child.base, NULL, &ops), 0);
		c = rgpu_journals_kept(&js, GRAPH_MADE);
		assert_non_null(c);
		assert_ptr_equal(rgpu_journals_kept(&js, 0x501), c);
		n = c->total;
		edit.graph = 0x501;
		edit.ctx = CTX;
		edit.op = RGPU__GRAPH_EDIT_OP__NODE_DESTROY;
		edit.node = 0x301;
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_EDIT, &edit.base, NULL, &ops), 0);
		assert_int_equal(c->total, n + frame_of(want + 512, RGPU_MSG_GRAPH_EDIT, &edit.base));

		/* a clone: its record takes the source's hash and length, its journal its frame */
		clone.graph = GRAPH_CAP;
		clone.clone = 0x601;
		clone.ctx = CTX;
		clone.orig = orig;
		clone.n_orig = 1;
		clone.copy = copy;
		clone.n_copy = 1;
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_CLONE, &clone.base, &ok, &ops), 0);
		assert_int_equal(ops.n, 1);
		assert_int_equal(ops.v[0].rec.f[4], GRAPH_CAP);
		assert_int_equal(ops.v[0].rec.f[5], graphlen);
		rgpu_sha256(want, graphlen, d);
		assert_memory_equal(ops.v[0].rec.hash, d, 32);
		c = rgpu_journals_kept(&js, 0x601);
		assert_non_null(c);
		n = frame_of(want + 512, RGPU_MSG_GRAPH_CLONE, &clone.base);
		assert_int_equal(c->total, n);
		if (keep)
			assert_memory_equal(c->buf, want + 512, n);

		/* an exec's end: nothing is rebuilt from its changes any more */
		assert_int_equal(step(&js, RGPU_MSG_GRAPH_EXEC_DESTROY, &gd.base, NULL, &ops), 0);
		assert_null(rgpu_journals_kept(&js, EXEC));
		assert_non_null(rgpu_journals_kept(&js, GRAPH_CAP));
		rgpu_journals_free(&js);
		assert_null(js.kept);
	}
}

static void test_journal_bytes(void **state)
{
	struct rgpu_journal *kept = rgpu_journal_new(STREAM, 1);
	struct rgpu_journal *hashed = rgpu_journal_new(STREAM, 0);
	uint8_t want[32], first[32], d[32];

	(void)state;
	assert_non_null(kept);
	assert_non_null(hashed);
	assert_int_equal(kept->stream, STREAM);
	assert_int_equal(kept->keep, 1);
	assert_int_equal(hashed->keep, 0);
	assert_null(kept->next);

	/* nothing yet: the digest of no bytes */
	rgpu_journal_digest(kept, d);
	assert_memory_equal(d, sha256_empty, 32);
	assert_int_equal(kept->len, 0);

	assert_int_equal(rgpu_journal_add(kept, RGPU_MSG_LAUNCH, body1, sizeof(body1), payload1,
					  sizeof(payload1)),
			 0);
	assert_int_equal(rgpu_journal_add(hashed, RGPU_MSG_LAUNCH, body1, sizeof(body1), payload1,
					  sizeof(payload1)),
			 0);
	/* a digest is taken mid-way and the journal goes on */
	rgpu_sha256(two_frames, 31, first);
	rgpu_journal_digest(kept, d);
	assert_memory_equal(d, first, 32);
	rgpu_journal_digest(hashed, d);
	assert_memory_equal(d, first, 32);
	assert_int_equal(kept->len, 31);
	assert_memory_equal(kept->buf, two_frames, 31);

	assert_int_equal(rgpu_journal_add(kept, RGPU_MSG_MEMSET, body2, sizeof(body2), NULL, 0), 0);
	assert_int_equal(rgpu_journal_add(hashed, RGPU_MSG_MEMSET, body2, sizeof(body2), NULL, 0),
			 0);

	rgpu_sha256(two_frames, sizeof(two_frames), want);
	rgpu_journal_digest(kept, d);
	assert_memory_equal(d, want, 32);
	/* keep = 1: exactly those bytes */
	assert_int_equal(kept->len, sizeof(two_frames));
	assert_non_null(kept->buf);
	assert_memory_equal(kept->buf, two_frames, sizeof(two_frames));
	/* keep = 0: the same digest, no bytes */
	rgpu_journal_digest(hashed, d);
	assert_memory_equal(d, want, 32);
	assert_null(hashed->buf);
	assert_int_equal(hashed->len, 0);
	/* the digest does not end the journal: asking again gives the same */
	rgpu_journal_digest(hashed, d);
	assert_memory_equal(d, want, 32);

	rgpu_journal_free(kept);
	rgpu_journal_free(hashed);
	rgpu_journal_free(NULL);
}

/*
 * Three frames of 3017 bytes each: the kept buffer grows past 4096 and 8192 bytes. Then one
 * whose body is 0x10203 bytes long: every byte of the body length is written.
 */
#define BIG_BODY 0x10203
static void test_journal_grows(void **state)
{
	static const uint8_t hdr[14] = {0x17, 0x00,		/* MSG_MEMCPY_HTOD (23) */
					0x03, 0x00, 0x00, 0x00, /* body: 3 bytes */
					0xb8, 0x0b, 0x00, 0x00, /* payload: 3000 bytes */
					0x00, 0x00, 0x00, 0x00};
	static const uint8_t big_hdr[14] = {0x28, 0x00,		    /* MSG_LAUNCH (40) */
					    0x03, 0x02, 0x01, 0x00, /* body: 0x10203 bytes */
					    0x00, 0x00, 0x00, 0x00, /* no payload */
					    0x00, 0x00, 0x00, 0x00};
	struct rgpu_journal *j = rgpu_journal_new(STREAM, 1);
	uint8_t *want = malloc(3 * 3017 + 14 + BIG_BODY), *big = malloc(BIG_BODY);
	uint8_t payload[3000], body[3], d[32], w[32];
	size_t off = 0;

	(void)state;
	assert_non_null(j);
	assert_non_null(want);
	assert_non_null(big);
	for (int f = 0; f < 3; f++) {
		body[0] = 0x08;
		body[1] = (uint8_t)(0x40 + f);
		body[2] = 0x10;
		for (int i = 0; i < 3000; i++)
			payload[i] = (uint8_t)(i * 31 + f * 101 + 7);
		assert_int_equal(rgpu_journal_add(j, RGPU_MSG_MEMCPY_HTOD, body, sizeof(body),
						  payload, sizeof(payload)),
				 0);
		memcpy(want + off, hdr, sizeof(hdr));
		memcpy(want + off + 14, body, 3);
		memcpy(want + off + 17, payload, 3000);
		off += 3017;
	}
	assert_int_equal(off, 9051);
	assert_int_equal(j->len, 9051);
	assert_memory_equal(j->buf, want, 9051);
	rgpu_sha256(want, 9051, w);
	rgpu_journal_digest(j, d);
	assert_memory_equal(d, w, 32);

	for (int i = 0; i < BIG_BODY; i++)
		big[i] = (uint8_t)(i * 13 + (i >> 8) + 1);
	assert_int_equal(rgpu_journal_add(j, RGPU_MSG_LAUNCH, big, BIG_BODY, NULL, 0), 0);
	memcpy(want + off, big_hdr, sizeof(big_hdr));
	memcpy(want + off + 14, big, BIG_BODY);
	off += 14 + BIG_BODY;
	assert_int_equal(off, 75116);
	assert_int_equal(j->len, 75116);
	assert_memory_equal(j->buf, want, 75116);
	rgpu_sha256(want, 75116, w);
	rgpu_journal_digest(j, d);
	assert_memory_equal(d, w, 32);
	free(big);
	free(want);
	rgpu_journal_free(j);
}

/* ---- 6. digests of logs built from the same messages -------------------------------------- */

/*
 * A session as the worker records it: context, a mapped allocation, a module, a function, a
 * global (whose lookup fails when global_fails), a stream, an event, a function attribute and a
 * context limit. churn: an event created and destroyed in the middle, which leaves no trace.
 */
static void session(struct st_log *log, int global_fails, int churn)
{
	Rgpu__CtxCreate cc = q_ctx_create();
	Rgpu__MemAlloc ma = q_mem_alloc(1);
	Rgpu__ModuleLoad ml = q_module_load();
	Rgpu__FuncGet fg =
	    q_func_get(FUNC, MOD, RGPU__FUNC_KIND__FUNC_MODULE, (char *)"vecAdd_f32");
	Rgpu__GlobalGet gg = q_global_get();
	Rgpu__StreamCreate sc = q_stream_create();
	Rgpu__EventCreate ec = q_event_create(EVENT), ec2 = q_event_create(0x72);
	Rgpu__EventOp ed = q_event_op(0x72);
	Rgpu__FuncAttr fa = q_func_attr(0x18000);
	Rgpu__CtxLimit cl = q_ctx_limit(0x10000);
	Rgpu__Status ok = r_status(0);
	Rgpu__ModuleLoadReply mok = r_module(0, 0);
	Rgpu__GlobalReply gok = r_global(0), gbad = r_global(500);

	assert_int_equal(apply_msg(log, RGPU_MSG_CTX_CREATE, &cc, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_MEM_ALLOC, &ma, &ok), 2);
	assert_int_equal(apply_msg(log, RGPU_MSG_MODULE_LOAD, &ml, &mok), 1);
	if (churn) {
		assert_int_equal(apply_msg(log, RGPU_MSG_EVENT_CREATE, &ec2, NULL), 1);
		assert_int_equal(apply_msg(log, RGPU_MSG_EVENT_DESTROY, &ed, NULL), 1);
	}
	assert_int_equal(apply_msg(log, RGPU_MSG_FUNC_GET, &fg, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_GLOBAL_GET, &gg, global_fails ? &gbad : &gok),
			 global_fails ? 0 : 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_STREAM_CREATE, &sc, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_EVENT_CREATE, &ec, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_FUNC_SET_ATTR, &fa, NULL), 1);
	assert_int_equal(apply_msg(log, RGPU_MSG_CTX_SET_LIMIT, &cl, &ok), 1);
}

static void test_same_messages_same_digest(void **state)
{
	struct st_log *a = new_log(), *b = new_log(), *c = new_log(), *d = new_log();
	uint8_t da[ST_DIGEST_LEN], db[ST_DIGEST_LEN], dc[ST_DIGEST_LEN], dd[ST_DIGEST_LEN];
	const struct st_rec *ra = NULL, *rb = NULL;
	size_t at = 99;

	(void)state;
	session(a, 0, 0);
	session(b, 0, 0);
	session(c, 1, 0);
	session(d, 0, 1);
	EXPECT_ORDER(a, 10, CTX, VMM_ID, ALLOC_ADDR, MOD, FUNC, GLOBAL, STREAM, EVENT, FATTR_ID,
		     LIMIT_ID);
	EXPECT_REC(st_find(a, LIMIT_ID), ST_KIND_ATTR, LIMIT_ID, CTX, 0, F(LIMIT_KEY, 0x10000),
		   NULL, NULL);

	st_digest(a, da);
	st_digest(b, db);
	st_digest(c, dc);
	st_digest(d, dd);
	assert_memory_equal(da, db, ST_DIGEST_LEN);
	assert_int_equal(st_compare(a, b, &at, &ra, &rb), 0);
	assert_int_equal(at, 10);
	assert_null(ra);
	assert_null(rb);
	/* an event made and destroyed in between leaves no trace */
	assert_memory_equal(da, dd, ST_DIGEST_LEN);
	assert_int_equal(st_compare(a, d, NULL, NULL, NULL), 0);

	/* the global's lookup failed on one side: the logs part at its index, 5 */
	EXPECT_ORDER(c, 9, CTX, VMM_ID, ALLOC_ADDR, MOD, FUNC, STREAM, EVENT, FATTR_ID, LIMIT_ID);
	assert_memory_not_equal(da, dc, ST_DIGEST_LEN);
	at = 99;
	assert_int_equal(st_compare(a, c, &at, &ra, &rb), 1);
	assert_int_equal(at, 5);
	assert_non_null(ra);
	assert_non_null(rb);
	assert_int_equal(ra->id, GLOBAL);
	assert_int_equal(ra->kind, ST_KIND_GLOBAL);
	assert_int_equal(rb->id, STREAM);
	assert_int_equal(rb->kind, ST_KIND_STREAM);

	st_log_free(a);
	st_log_free(b);
	st_log_free(c);
	st_log_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_recording_message),
	    cmocka_unit_test(test_wrong_body_and_no_effect),
	    cmocka_unit_test(test_apply_ctx_destroy_cascade),
	    cmocka_unit_test(test_apply_vmm),
	    cmocka_unit_test(test_apply_graph_exec_hash),
	    cmocka_unit_test(test_apply_failure_index),
	    cmocka_unit_test(test_settle_failed_reply),
	    cmocka_unit_test(test_settle_failed_set),
	    cmocka_unit_test(test_settle_module_need_image),
	    cmocka_unit_test(test_settle_global_get),
	    cmocka_unit_test(test_settle_keeps_journal_hash),
	    cmocka_unit_test(test_journal_wants),
	    cmocka_unit_test(test_journal_bytes),
	    cmocka_unit_test(test_journals_step),
	    cmocka_unit_test(test_journal_grows),
	    cmocka_unit_test(test_same_messages_same_digest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
