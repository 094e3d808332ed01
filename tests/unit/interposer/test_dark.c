/*
 * Host-only tests of the dark-API emulation (docs/dark-api.md §9 "Host-only", items 1-4):
 * the integrity check against the vectors of §5.7, cuGetExportTable against the table of §3,
 * context-local storage against every row of §4.4, and the small slots of §4.1-§4.7.
 * dark.c, integrity.c and cls.c are compiled in directly, on top of mock_core.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <nettle/md2.h>

#include "rgpu/err.h"
#include "rgpu/log.h"

#include "dark_priv.h"
#include "ip_dark.h"

/* mock_core.c */
void mock_reset(void);
void mock_set_initialized(int on);
void mock_set_driver_version(int v);
void mock_set_device(int ord, const unsigned char uuid[16], int domain, int bus, int device,
		     CUcontext primary);
void mock_set_device_count(int n);
void mock_set_current(CUcontext ctx);
void mock_add_ctx(CUcontext ctx, unsigned long long uid, int alive);
void mock_set_load_rc(CUresult rc);
void mock_add_stream(CUstream s, unsigned long long id);
#define MOCK_STREAM ((CUstream)0x3000)
#define MOCK_NULL_STREAM_ID 0ULL
#define MOCK_PTDS_STREAM_ID 2ULL
#define MOCK_TPCS 66
#define MOCK_MODULE ((CUmodule)0x5000)
#define MOCK_FUNC0 ((void *)0x6001)
#define MOCK_FUNC1 ((void *)0x6002)
int mock_load_calls(void);
CUmodule *mock_load_out(void);
const void *mock_load_image(void);
int mock_peek_calls(void);

/* ---- helpers ------------------------------------------------------------------------------- */

static void unhex(const char *hex, uint8_t *out, size_t n)
{
	assert_int_equal(strlen(hex), 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static CUuuid uuid_of(const char *hex)
{
	CUuuid u;
	unhex(hex, (uint8_t *)u.bytes, 16);
	return u;
}

static const void *const *table_of(const char *hex)
{
	CUuuid u = uuid_of(hex);
	const void *t = NULL;
	assert_int_equal(cuGetExportTable(&t, &u), CUDA_SUCCESS);
	assert_non_null(t);
	return t;
}

static uint64_t slot_u64(const void *const *t, int i)
{
	return (uint64_t)(uintptr_t)t[i];
}

/* The digest's 16 bytes as the runtime sees them in memory: out[0], out[1] little-endian. */
static void assert_out_bytes(const unsigned long long out[2], const char *hex)
{
	uint8_t want[16], got[16];
	unhex(hex, want, 16);
	for (int i = 0; i < 8; i++) {
		got[i] = (uint8_t)(out[0] >> (8 * i));
		got[8 + i] = (uint8_t)(out[1] >> (8 * i));
	}
	assert_memory_equal(got, want, 16);
}

#define UUID_CUDART "6bd5fb6c5bf4e74a8987d93912fd9df9"
#define UUID_HOOKS "a094798c2e742e7493f20800200c0a66"
#define UUID_TLS "42d85a8123f6cb478298f6e78a3aecdc"
#define UUID_CLS "c693336e1121df11a8c368f355d89593"
#define UUID_CHECKS "263e88607cd2614392f6bbd5006dfa7e"
#define UUID_INTEGRITY "d4082055bde6704b8d34ba123c66e1f2"
#define UUID_21318C60 "21318c60971432488ca641ff7324c8f2"
#define UUID_1734DC26 "1734dc26800d47458726c0f1e7dd8bca"
#define UUID_6E163FBE "6e163fbeb958444d835ce182aff1991e"

static int setup_reset(void **state)
{
	(void)state;
	mock_reset();
	return 0;
}

static int setup_init(void **state)
{
	(void)state;
	mock_reset();
	mock_set_initialized(1);
	return 0;
}

/* ---- §5: integrity -------------------------------------------------------------------------- */

static void md2_hex(const char *msg, size_t len, char out[33])
{
	struct md2_ctx c;
	uint8_t d[MD2_DIGEST_SIZE];
	md2_init(&c);
	md2_update(&c, len, (const uint8_t *)msg);
	md2_digest(&c, sizeof(d), d);
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* V0: RFC 1319's test suite (the spec lists "" and "abc"; the rest come from the RFC). */
static void test_md2_v0(void **state)
{
	static const struct {
		const char *msg, *digest;
	} v[] = {
	    {"", "8350e5a3e24c153df2275c9f80692773"},
	    {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
	    {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
	    {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
	    {"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"},
	    {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	     "da33def2a42df13975352846c30338cd"},
	    {"1234567890123456789012345678901234567890"
	     "1234567890123456789012345678901234567890",
	     "d5976f79d83d3a0dc9806c3c66f3efd8"},
	};
	char got[33];
	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		md2_hex(v[i].msg, strlen(v[i].msg), got);
		assert_string_equal(got, v[i].digest);
	}
}

static const uint8_t spec_key[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
				     0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

/* §5.6: the key is what the runtime's derivation makes of its 64-byte table. */
static void test_integrity_key(void **state)
{
	uint8_t t[64], key[16] = {0};
	unsigned i = 13, tt = 0x8B, rounds = 0;
	(void)state;
	unhex("6BCF320FA449D3A833F8D08E124EA800EB942C8F3449DEF6BF299120C765F6BA"
	      "785C6627A7B27392DB221E20146F87FFA5C318016664A50E705152A7804BDFEF",
	      t, 64);
	do {
		uint8_t a = t[i + 16] ^ t[i + 32] ^ t[i + 48];
		uint8_t b = (uint8_t)(tt ^ t[i] ^ t[i + 16]);
		tt = (uint8_t) ~(a ^ tt);
		key[b >> 4] = a;
		i = b & 15;
		rounds++;
	} while (i != 13);
	assert_int_equal(rounds, 16);
	assert_memory_equal(key, spec_key, 16);
	assert_memory_equal(ip_integrity_key, spec_key, 16);
}

/* V8: the MD2 state after absorbing only key xor 0x36 (the first HMAC block). */
static void test_hmac_v8(void **state)
{
	struct md2_ctx c;
	uint8_t ipad[16], want[16];
	(void)state;
	for (int i = 0; i < 16; i++)
		ipad[i] = ip_integrity_key[i] ^ 0x36;
	md2_init(&c);
	md2_update(&c, sizeof(ipad), ipad);
	unhex("8b219a49e86d1aeef237f9b54a8c3c75", want, 16);
	assert_memory_equal(c.X, want, 16);
}

static const struct ip_integrity_dev v1_dev_template = {
    .pci_domain = 0, .pci_bus = 0, .pci_device = 6};
static struct ip_integrity_dev v1_dev;

static struct ip_integrity_in v1_in(void)
{
	v1_dev = v1_dev_template;
	unhex("98f5b96db5d39169dfcd9d28452e8680", v1_dev.uuid, 16);
	return (struct ip_integrity_in){
	    .driver_version = 13000,
	    .version = 13002,
	    .pid = 400,
	    .tid = (uint32_t)0x7fcdb7876740ULL,
	    .cudart_table = 0x7fcdb744c680ULL,
	    .integrity_table = 0x7fcdb744c660ULL,
	    .integrity_fn = 0x7fcdb1dab350ULL,
	    .unix_seconds = 0x68F1A2B3ULL,
	    .ndev = 1,
	    .dev = &v1_dev,
	};
}

/* V1's message byte for byte, and its inner digest. */
static void test_integrity_v1_message(void **state)
{
	struct ip_integrity_in in = v1_in();
	uint8_t msg[76], want[76], ipad[16], inner[16], want_inner[16];
	struct md2_ctx c;
	(void)state;
	ip_integrity_record(&in, msg);
	ip_integrity_dev_record(&v1_dev, msg + 48);
	unhex("c8320000ca32000090010000406787b7"
	      "80c644b7cd7f000060c644b7cd7f0000"
	      "50b3dab1cd7f0000b3a2f16800000000"
	      "98f5b96db5d39169dfcd9d28452e8680"
	      "000000000000000006000000",
	      want, 76);
	assert_memory_equal(msg, want, 76);

	for (int i = 0; i < 16; i++)
		ipad[i] = ip_integrity_key[i] ^ 0x36;
	md2_init(&c);
	md2_update(&c, 16, ipad);
	md2_update(&c, 76, msg);
	md2_digest(&c, 16, inner);
	unhex("e25e1fe27b48e3008d5e8d25a550a2f0", want_inner, 16);
	assert_memory_equal(inner, want_inner, 16);
}

static void test_integrity_v1_v4(void **state)
{
	struct ip_integrity_in in;
	unsigned long long out[2];
	(void)state;

	in = v1_in(); /* V1 */
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0x8283f50bdd829bf7ULL && out[1] == 0xb2169cd6a0adefabULL);
	assert_out_bytes(out, "f79b82dd0bf58382abefada0d69c16b2");

	in = v1_in(); /* V2 */
	in.version = 13003;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0xc30a3b1a7546c6f4ULL && out[1] == 0xf0316c06eda8f05dULL);

	in = v1_in(); /* V3 */
	in.unix_seconds = 0;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0xe10c1254827264c5ULL && out[1] == 0x0bcb219e687ed455ULL);

	in = v1_in(); /* V4 */
	in.tid = (uint32_t)0x7fcdb0d756c0ULL;
	in.unix_seconds = 0x690000AAULL;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0x56be269ebadd09d6ULL && out[1] == 0xdd508f7adfdb6773ULL);
}

static void test_integrity_v5(void **state)
{
	struct ip_integrity_in in;
	unsigned long long out[2];
	(void)state;

	in = v1_in();
	in.version = 13000;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0x3341181C03CB675CULL && out[1] == 0x8ED383AA1F4CD1E8ULL);
	assert_out_bytes(out, "5c67cb031c184133e8d14c1faa83d38e");

	in.version = 13001;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_true(out[0] == 0x1841181C03CB675CULL && out[1] == 0x8ED383AA1F4CD1E8ULL);
	assert_out_bytes(out, "5c67cb031c184118e8d14c1faa83d38e");

	in.version = 7;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_out_bytes(out, "e0f8cdf1677c90d4cae6cd1542bcc21d");
}

/* §5.2: residue 0 and 1 are constants whatever the other inputs; 2..9 are digests. */
static void test_integrity_constants(void **state)
{
	static const unsigned c0[] = {13000, 13010, 12080, 11060, 0};
	static const unsigned c1[] = {13001, 13011, 12081, 11061, 1};
	struct ip_integrity_in in = v1_in();
	unsigned long long out[2];
	(void)state;

	for (size_t i = 0; i < 5; i++) {
		in.version = c0[i];
		in.pid = 1000 + (uint32_t)i; /* must not matter */
		in.ndev = i & 1;
		assert_int_equal(ip_integrity_compute(&in, out), 0);
		assert_out_bytes(out, "5c67cb031c184133e8d14c1faa83d38e");
		in.version = c1[i];
		assert_int_equal(ip_integrity_compute(&in, out), 0);
		assert_out_bytes(out, "5c67cb031c184118e8d14c1faa83d38e");
	}
	in = v1_in();
	for (unsigned v = 13002; v <= 13009; v++) {
		in.version = v;
		assert_int_equal(ip_integrity_compute(&in, out), 0);
		assert_true(out[1] != IP_INTEGRITY_CONST_HI);
	}
}

static void test_integrity_v6_v7(void **state)
{
	struct ip_integrity_in in;
	struct ip_integrity_dev d7 = {.pci_domain = 0, .pci_bus = 2, .pci_device = 0};
	unsigned long long out[2];
	(void)state;

	in = v1_in(); /* V6 */
	in.ndev = 0;
	in.dev = NULL;
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_out_bytes(out, "cec5980da814f20b438d87823e0378fd");

	unhex("9afe2b8aac252d38ea37aec56d71325f", d7.uuid, 16); /* V7 */
	in = (struct ip_integrity_in){
	    .driver_version = 12080,
	    .version = 12082,
	    .pid = 0x002fa423,
	    .tid = 0xf79c1000,
	    .cudart_table = 0x7ffff6958240ULL,
	    .integrity_table = 0x7ffff6958220ULL,
	    .integrity_fn = 0x7ffff2aaf4a0ULL,
	    .unix_seconds = 0x682b9ceeULL,
	    .ndev = 1,
	    .dev = &d7,
	};
	assert_int_equal(ip_integrity_compute(&in, out), 0);
	assert_out_bytes(out, "4448a171b026cef76c8c3e39051b02dd");
}

static void test_integrity_bad_args(void **state)
{
	struct ip_integrity_in in = v1_in();
	unsigned long long out[2];
	(void)state;
	assert_int_equal(ip_integrity_compute(NULL, out), RGPU_EINVAL);
	assert_int_equal(ip_integrity_compute(&in, NULL), RGPU_EINVAL);
	in.dev = NULL;
	assert_int_equal(ip_integrity_compute(&in, out), RGPU_EINVAL);
}

typedef CUresult (*integrity_fn)(unsigned, unsigned long long, unsigned long long *);

static integrity_fn integrity_slot(void)
{
	return (integrity_fn)table_of(UUID_INTEGRITY)[1];
}

/* Before cuInit: 3, and out keeps every byte it had. */
static void test_integrity_not_initialized(void **state)
{
	unsigned long long out[2] = {0xAAAAAAAAAAAAAAAAULL, 0xAAAAAAAAAAAAAAAAULL};
	(void)state;
	assert_int_equal(integrity_slot()(13000, 0x68F1A2B3, out), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(integrity_slot()(13002, 0x68F1A2B3, out), CUDA_ERROR_NOT_INITIALIZED);
	assert_true(out[0] == 0xAAAAAAAAAAAAAAAAULL && out[1] == 0xAAAAAAAAAAAAAAAAULL);
}

/* What the live slot must hash: the very values the tests can observe through the API. */
static struct ip_integrity_in live_in(unsigned version, unsigned long long ts, unsigned ndev,
				      const struct ip_integrity_dev *dev)
{
	const void *const *cudart = table_of(UUID_CUDART);
	const void *const *integ = table_of(UUID_INTEGRITY);
	return (struct ip_integrity_in){
	    .driver_version = (uint32_t)ip_driver_version(),
	    .version = version,
	    .pid = (uint32_t)getpid(),
	    .tid = (uint32_t)(uintptr_t)pthread_self(),
	    .cudart_table = (uint64_t)(uintptr_t)cudart,
	    .integrity_table = (uint64_t)(uintptr_t)integ,
	    .integrity_fn = slot_u64(integ, 1),
	    .unix_seconds = ts,
	    .ndev = ndev,
	    .dev = dev,
	};
}

struct thread_answer {
	CUresult rc;
	unsigned long long got[2], want[2];
	int want_rc;
};

static void *integrity_thread(void *arg)
{
	struct thread_answer *a = arg;
	struct ip_integrity_in in = live_in(13002, 0x690000AA, 1, &v1_dev);
	a->rc = integrity_slot()(13002, 0x690000AA, a->got);
	a->want_rc = ip_integrity_compute(&in, a->want);
	return NULL;
}

static void test_integrity_live(void **state)
{
	struct ip_integrity_in in;
	unsigned long long got[2], want[2];
	struct thread_answer other;
	pthread_t th;
	(void)state;

	in = v1_in(); /* v1_dev now holds V1's device */
	mock_set_device(0, v1_dev.uuid, 0, 0, 6, NULL);

	/* The slot value that is hashed is the one in the table, i.e. this function. */
	assert_ptr_equal(table_of(UUID_INTEGRITY)[1], (const void *)ip_dark_integrity);
	assert_ptr_equal(table_of(UUID_INTEGRITY), ip_dark_integrity_table);
	assert_ptr_equal(table_of(UUID_CUDART), ip_dark_cudart_interface);

	/* The three calls of a 13.0 runtime, then those of a 13.1 runtime. */
	assert_int_equal(integrity_slot()(13000, 0x690000AA, got), CUDA_SUCCESS);
	assert_out_bytes(got, "5c67cb031c184133e8d14c1faa83d38e");
	assert_int_equal(integrity_slot()(13001, 0x690000AA, got), CUDA_SUCCESS);
	assert_out_bytes(got, "5c67cb031c184118e8d14c1faa83d38e");
	for (unsigned v = 13002; v <= 13012; v += 10) {
		in = live_in(v, 0x690000AA, 1, &v1_dev);
		assert_int_equal(ip_integrity_compute(&in, want), 0);
		assert_int_equal(integrity_slot()(v, 0x690000AA, got), CUDA_SUCCESS);
		assert_true(got[0] == want[0] && got[1] == want[1]);
	}

	/* From another thread: its own pthread_self is hashed, so the answer differs. */
	assert_int_equal(pthread_create(&th, NULL, integrity_thread, &other), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(other.rc, CUDA_SUCCESS);
	assert_int_equal(other.want_rc, 0);
	assert_true(other.got[0] == other.want[0] && other.got[1] == other.want[1]);
	assert_false(other.got[0] == got[0] && other.got[1] == got[1]);

	/* Computed per call: a changed fact (driver version) changes the next answer. */
	mock_set_driver_version(13010);
	in = live_in(13012, 0x690000AA, 1, &v1_dev);
	assert_int_equal(ip_integrity_compute(&in, want), 0);
	assert_int_equal(integrity_slot()(13012, 0x690000AA, got), CUDA_SUCCESS);
	assert_true(got[0] == want[0] && got[1] == want[1]);
	mock_set_driver_version(13000);

	/* No devices: no device record. */
	mock_set_device_count(0);
	in = live_in(13002, 0, 0, NULL);
	assert_int_equal(ip_integrity_compute(&in, want), 0);
	assert_int_equal(integrity_slot()(13002, 0, got), CUDA_SUCCESS);
	assert_true(got[0] == want[0] && got[1] == want[1]);
}

/* More devices than integrity.c keeps on its stack, in ordinal order. */
static void test_integrity_many_devices(void **state)
{
	struct ip_integrity_dev dev[20];
	struct ip_integrity_in in;
	unsigned long long got[2], want[2];
	(void)state;
	for (int i = 0; i < 20; i++) {
		for (int j = 0; j < 16; j++)
			dev[i].uuid[j] = (uint8_t)(i * 16 + j);
		dev[i].pci_domain = i / 8;
		dev[i].pci_bus = 0x10 + i;
		dev[i].pci_device = i & 3;
		mock_set_device(i, dev[i].uuid, dev[i].pci_domain, dev[i].pci_bus,
				dev[i].pci_device, NULL);
	}
	in = live_in(13005, 42, 20, dev);
	assert_int_equal(ip_integrity_compute(&in, want), 0);
	assert_int_equal(integrity_slot()(13005, 42, got), CUDA_SUCCESS);
	assert_true(got[0] == want[0] && got[1] == want[1]);
}

/* ---- §3: cuGetExportTable ----------------------------------------------------------------------
 */

static const struct {
	const char *uuid;
	int nslots;
	long long slot0;   /* -1: pointer list */
	int null_slots[2]; /* slots NULL in the real table; 0 ends */
} provided[] = {
    {UUID_CUDART, 13, 104, {10, 0}},   {UUID_HOOKS, 7, 56, {0}},    {UUID_TLS, 3, 24, {0}},
    {UUID_CLS, 4, -1, {3, 0}},	       {UUID_CHECKS, 15, 120, {0}}, {UUID_INTEGRITY, 3, 24, {0}},
    {UUID_21318C60, 93, 744, {91, 0}}, {UUID_1734DC26, 17, 136, {0}},
    {UUID_6E163FBE, 99, 792, {93, 0}},
};

static int is_null_slot(size_t p, int slot)
{
	for (int k = 0; k < 2 && provided[p].null_slots[k]; k++)
		if (provided[p].null_slots[k] == slot)
			return 1;
	return 0;
}

static void check_provided(void)
{
	for (size_t p = 0; p < sizeof(provided) / sizeof(provided[0]); p++) {
		CUuuid u = uuid_of(provided[p].uuid);
		const void *t1 = NULL, *t2 = NULL;
		const void *const *t;
		int first;

		assert_int_equal(cuGetExportTable(&t1, &u), CUDA_SUCCESS);
		assert_int_equal(cuGetExportTable(&t2, &u), CUDA_SUCCESS);
		assert_non_null(t1);
		assert_ptr_equal(t1, t2);
		t = t1;
		if (provided[p].slot0 >= 0) {
			assert_int_equal(slot_u64(t, 0), (uint64_t)provided[p].slot0);
			assert_int_equal(provided[p].slot0, 8 * provided[p].nslots);
			first = 1;
		} else {
			assert_true(slot_u64(t, 0) > 0x10000); /* tracers' pointer-list test */
			first = 0;
		}
		for (int s = first; s < provided[p].nslots; s++) {
			if (is_null_slot(p, s))
				assert_null(t[s]);
			else
				assert_non_null(t[s]);
		}
	}
}

static void test_export_before_init(void **state)
{
	(void)state;
	assert_int_equal(ip_initialized(), 0);
	check_provided();
}

static void test_export_after_init(void **state)
{
	(void)state;
	check_provided();
}

/* Every function slot of every table is its own function (stubs included). */
static void test_export_slots_distinct(void **state)
{
	const void *all[512];
	size_t n = 0;
	(void)state;
	for (size_t p = 0; p < sizeof(provided) / sizeof(provided[0]); p++) {
		const void *const *t = table_of(provided[p].uuid);
		for (int s = provided[p].slot0 >= 0 ? 1 : 0; s < provided[p].nslots; s++)
			if (t[s]) {
				assert_true(n < 512);
				all[n++] = t[s];
			}
	}
	assert_int_equal(n, 11 + 6 + 2 + 3 + 14 + 2 + 91 + 16 + 97);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			assert_ptr_not_equal(all[i], all[j]);
}

static void test_export_refused(void **state)
{
	static const char *const refused[] = {
	    "f8cff95121468b4eb9e2fb469e7c0dd9", /* asked before cuInit by every runtime */
	    "69a28e9f24498b47b030c5da330ea4e9", /* NVML's */
	    "b10541e1f7c7c74a9f64f223be99f1e2",
	    "da9151d33ae6cc41a5c04f26d533e328", /* NVRTC's; it compiles by itself when refused */
	    "00000000000000000000000000000000",
	    "195bcbf40000000000000000000000ff",
	    "0ca50b8c000000000000000000000000",
	    "6bd5fb6c5bf4e74a8987d93912fd9df8", /* CUDART_INTERFACE, last byte off */
	};
	(void)state;
	for (int pass = 0; pass < 2; pass++) { /* before and after cuInit */
		mock_set_initialized(pass);
		for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			CUuuid u = uuid_of(refused[i]);
			const void *t = (const void *)0x1;
			assert_int_equal(cuGetExportTable(&t, &u), CUDA_ERROR_INVALID_VALUE);
			assert_null(t);
		}
	}
}

static void test_export_null_args(void **state)
{
	CUuuid u = uuid_of(UUID_CUDART);
	const void *t = (const void *)0x1;
	(void)state;
	assert_int_equal(cuGetExportTable(NULL, &u), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetExportTable(&t, NULL), CUDA_ERROR_INVALID_VALUE);
	assert_null(t);
	assert_int_equal(cuGetExportTable(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* ---- default stubs and the log ------------------------------------------------------------- */

static char log_path[64];

static void log_to_file(void)
{
	snprintf(log_path, sizeof(log_path), "/tmp/test_dark.%d.log", (int)getpid());
	unlink(log_path);
	assert_int_equal(rgpu_log_open(log_path), 0);
}

static char *log_read(void)
{
	FILE *f = fopen(log_path, "r");
	char *buf;
	long n;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

typedef CUresult (*stub_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t);

/* The slots §4 specifies; every other non-NULL slot must be a default stub. */
static int specified(const char *uuid, int slot)
{
	if (!strcmp(uuid, UUID_CUDART))
		return slot == 1 || slot == 2 || slot == 6 || slot == 7 || slot == 8 || slot == 12;
	if (!strcmp(uuid, UUID_HOOKS))
		return slot == 2 || slot == 6;
	if (!strcmp(uuid, UUID_TLS))
		return slot == 2;
	if (!strcmp(uuid, UUID_CLS))
		return 1;
	if (!strcmp(uuid, UUID_CHECKS))
		return slot == 2 || slot == 3;
	if (!strcmp(uuid, UUID_INTEGRITY))
		return slot == 1;
	if (!strcmp(uuid, UUID_1734DC26))
		return slot == 4 || slot == 13;
	if (!strcmp(uuid, UUID_6E163FBE))
		return slot == 7;
	return slot == 4 || slot == 39 || slot == 51; /* 21318c60 */
}

/*
 * Each stub answers 801 every time, and logs its name, slot and arguments exactly once. The
 * log-once flags live for the whole process: this is the only test that calls the stubs.
 */
static void test_default_stubs(void **state)
{
	char *log;
	int nstubs = 0;
	(void)state;
	rgpu_log_set_level(RGPU_LOG_INFO);
	log_to_file();
	for (size_t p = 0; p < sizeof(provided) / sizeof(provided[0]); p++) {
		const void *const *t = table_of(provided[p].uuid);
		for (int s = 1; s < provided[p].nslots; s++) {
			if (!t[s] || specified(provided[p].uuid, s))
				continue;
			assert_int_equal(((stub_fn)t[s])(0x11, 0x22, 0x33, (uintptr_t)s),
					 CUDA_ERROR_NOT_SUPPORTED);
			assert_int_equal(((stub_fn)t[s])(1, 2, 3, 4), CUDA_ERROR_NOT_SUPPORTED);
			nstubs++;
		}
	}
	assert_int_equal(nstubs, 5 + 4 + 1 + 12 + 1 + 88 + 14 + 96);

	log = log_read();
	for (size_t p = 0; p < sizeof(provided) / sizeof(provided[0]); p++) {
		const void *const *t = table_of(provided[p].uuid);
		for (int s = 1; s < provided[p].nslots; s++) {
			char want[96];
			if (!t[s] || specified(provided[p].uuid, s))
				continue;
			snprintf(want, sizeof(want), "dark %.8s[%d](0x11, 0x22, 0x33, %#x)",
				 provided[p].uuid, s, s);
			assert_int_equal(count_of(log, want), 1);
			snprintf(want, sizeof(want), "dark %.8s[%d](", provided[p].uuid, s);
			assert_int_equal(count_of(log, want), 1); /* once, not twice */
		}
	}
	free(log);
	unlink(log_path);
	assert_int_equal(rgpu_log_open("/dev/null"), 0);
}

/* A refusal is logged with the short UUID. */
static void test_refusal_logged(void **state)
{
	CUuuid u1 = uuid_of("f8cff95121468b4eb9e2fb469e7c0dd9");
	CUuuid u2 = uuid_of("b10541e1f7c7c74a9f64f223be99f1e2");
	const void *t;
	char *log;
	(void)state;
	rgpu_log_set_level(RGPU_LOG_INFO);
	log_to_file();
	assert_int_equal(cuGetExportTable(&t, &u1), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetExportTable(&t, &u2), CUDA_ERROR_INVALID_VALUE);
	log = log_read();
	assert_int_equal(count_of(log, "dark f8cff951: export table refused"), 1);
	assert_int_equal(count_of(log, "dark b10541e1: export table refused"), 1);
	free(log);
	unlink(log_path);
	assert_int_equal(rgpu_log_open("/dev/null"), 0);
}

/* ---- §4.1 CUDART_INTERFACE ------------------------------------------------------------------ */

typedef CUresult (*load1_fn)(CUmodule *, const void *);
typedef CUresult (*load6_fn)(CUmodule *, const void *, void *, void *, unsigned);
typedef CUresult (*load8_fn)(const void *, CUmodule *, void *, void *, unsigned);
typedef CUresult (*primary_fn)(CUcontext *, CUdevice);

static void test_cudart_module_slots(void **state)
{
	const void *const *t = table_of(UUID_CUDART);
	const void *img = (const void *)0x1234, *cont = (const void *)0x5678;
	CUmodule mod = NULL;
	(void)state;

	assert_int_equal(((load1_fn)t[1])(&mod, img), CUDA_SUCCESS);
	assert_int_equal(mock_load_calls(), 1);
	assert_ptr_equal(mock_load_image(), img);
	assert_ptr_equal(mock_load_out(), &mod);
	assert_ptr_equal(mod, (CUmodule)0x5000);

	mock_set_load_rc(CUDA_ERROR_INVALID_IMAGE); /* the core's answer comes back as is */
	assert_int_equal(((load1_fn)t[1])(&mod, img), CUDA_ERROR_INVALID_IMAGE);
	mock_set_load_rc(CUDA_SUCCESS);

	mod = NULL;
	assert_int_equal(((load6_fn)t[6])(&mod, img, NULL, NULL, 0), CUDA_SUCCESS);
	assert_int_equal(mock_load_calls(), 3);
	assert_ptr_equal(mock_load_image(), img);
	assert_ptr_equal(mock_load_out(), &mod);
	assert_int_equal(((load6_fn)t[6])(&mod, img, (void *)1, NULL, 0), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(((load6_fn)t[6])(&mod, img, NULL, (void *)1, 0), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(((load6_fn)t[6])(&mod, img, NULL, NULL, 1), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(mock_load_calls(), 3);

	mod = NULL;
	assert_int_equal(((load8_fn)t[8])(cont, &mod, NULL, NULL, 0), CUDA_SUCCESS);
	assert_int_equal(mock_load_calls(), 4);
	assert_ptr_equal(mock_load_image(), cont);
	assert_ptr_equal(mock_load_out(), &mod);
	assert_int_equal(((load8_fn)t[8])(cont, &mod, (void *)1, NULL, 0),
			 CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(((load8_fn)t[8])(cont, &mod, NULL, NULL, 2), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(mock_load_calls(), 4);
}

static void test_cudart_primary_context(void **state)
{
	const void *const *t = table_of(UUID_CUDART);
	CUcontext prim = (CUcontext)0xC0DE0, out = (CUcontext)0x1;
	uint8_t uuid[16] = {1};
	(void)state;

	/* before cuInit: the core's 3, out untouched */
	assert_int_equal(((primary_fn)t[2])(&out, 0), CUDA_ERROR_NOT_INITIALIZED);
	assert_ptr_equal(out, (CUcontext)0x1);

	mock_set_initialized(1);
	mock_set_device(0, uuid, 0, 0, 6, prim);
	assert_int_equal(((primary_fn)t[2])(&out, 0), CUDA_SUCCESS);
	assert_ptr_equal(out, prim);
	out = NULL;
	assert_int_equal(((primary_fn)t[2])(&out, 0), CUDA_SUCCESS); /* same handle again */
	assert_ptr_equal(out, prim);
	assert_null(ip_ctx_current()); /* not made current */

	out = (CUcontext)0x1;
	assert_int_equal(((primary_fn)t[2])(&out, 5), CUDA_ERROR_INVALID_DEVICE);
	assert_ptr_equal(out, (CUcontext)0x1);
	assert_int_equal(((primary_fn)t[2])(NULL, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_cudart_small_slots(void **state)
{
	const void *const *t = table_of(UUID_CUDART);
	(void)state;
	((void (*)(size_t))t[7])(12345);
	assert_int_equal(((CUresult(*)(void))t[12])(), CUDA_SUCCESS);
	assert_null(t[10]);
}

/* ---- §4.2 HOOKS ---------------------------------------------------------------------------- */

typedef void (*hooks_fn)(void **, size_t *);

static void test_hooks_buffers(void **state)
{
	const void *const *t = table_of(UUID_HOOKS);
	void *b1 = NULL, *b2 = NULL, *again = NULL;
	size_t n1 = 0, n2 = 0, n = 0;
	static const uint8_t zero[8192];
	(void)state;

	((hooks_fn)t[2])(&b1, &n1);
	((hooks_fn)t[6])(&b2, &n2);
	assert_non_null(b1);
	assert_non_null(b2);
	assert_int_equal(n1, 1024);
	assert_int_equal(n2, 14);
	assert_memory_equal(b1, zero, 8192);
	assert_memory_equal(b2, zero, 112);
	/* two buffers, not overlapping */
	assert_true((uint8_t *)b1 + 8192 <= (uint8_t *)b2 || (uint8_t *)b2 + 112 <= (uint8_t *)b1);

	((hooks_fn)t[2])(&again, &n);
	assert_ptr_equal(again, b1);
	((hooks_fn)t[6])(&again, &n);
	assert_ptr_equal(again, b2);
}

/* ---- §4.3 TOOLS_TLS ------------------------------------------------------------------------ */

typedef CUresult (*fill_fn)(void *, unsigned);

static void test_tools_tls_fill(void **state)
{
	const void *const *t = table_of(UUID_TLS);
	uint8_t rec[40], want[40];
	CUcontext ctx = (CUcontext)0xABCDEF1234ULL, got;
	(void)state;

	memset(rec, 0xCD, sizeof(rec));
	memcpy(want, rec, sizeof(rec));
	assert_int_equal(((fill_fn)t[2])(rec, 0x37), CUDA_ERROR_NOT_INITIALIZED);
	assert_memory_equal(rec, want, sizeof(rec));

	mock_set_initialized(1);
	mock_set_current(ctx);
	for (unsigned id = 0; id < 0x40; id += 0x0b) {
		memset(rec, 0xCD, sizeof(rec));
		assert_int_equal(((fill_fn)t[2])(rec + 1, id), CUDA_SUCCESS); /* unaligned too */
		memcpy(&got, rec + 1, 8);
		assert_ptr_equal(got, ctx);
		assert_int_equal(rec[0], 0xCD);
		assert_memory_equal(rec + 9, want + 9, sizeof(rec) - 9);
	}

	mock_set_current(NULL); /* no current context: NULL is written */
	memset(rec, 0xCD, sizeof(rec));
	assert_int_equal(((fill_fn)t[2])(rec, 0), CUDA_SUCCESS);
	memcpy(&got, rec, 8);
	assert_null(got);
	assert_memory_equal(rec + 8, want + 8, sizeof(rec) - 8);
}

/* ---- §4.5 CONTEXT_CHECKS -------------------------------------------------------------------- */

typedef CUresult (*check_fn)(CUcontext, unsigned *, void **);

static void test_context_checks(void **state)
{
	const void *const *t = table_of(UUID_CHECKS);
	unsigned u[3] = {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF};
	void *p[3] = {(void *)0xdead, (void *)0xbeef, (void *)0xf00d};
	(void)state;

	assert_int_equal(((check_fn)t[2])((CUcontext)0x1000, &u[1], &p[1]), CUDA_SUCCESS);
	assert_int_equal(u[1], 0);
	assert_int_equal(u[0], 0xFFFFFFFF);
	assert_int_equal(u[2], 0xFFFFFFFF);
	assert_ptr_equal(p[0], (void *)0xdead);
	assert_ptr_equal(p[1], (void *)0xbeef); /* out2 is never written */
	assert_ptr_equal(p[2], (void *)0xf00d);

	u[1] = 7;
	assert_int_equal(((check_fn)t[2])(NULL, &u[1], &p[1]), CUDA_SUCCESS);
	assert_int_equal(u[1], 0);
	assert_ptr_equal(p[1], (void *)0xbeef);

	assert_int_equal(((unsigned (*)(void))t[3])(), 0);
}

/* ---- §4.7 21318c60 -------------------------------------------------------------------------- */

typedef CUresult (*ctxid_fn)(CUcontext, unsigned long long *);

static void test_context_id(void **state)
{
	const void *const *t = table_of(UUID_21318C60);
	CUcontext a = (CUcontext)0x1000, b = (CUcontext)0x2000;
	unsigned long long id = 77;
	(void)state;

	mock_add_ctx(a, 1, 1);
	mock_add_ctx(b, 2, 1);
	assert_int_equal(((ctxid_fn)t[4])(a, &id), CUDA_SUCCESS);
	assert_int_equal(id, 1);
	assert_int_equal(id, ip_ctx_uid(a));
	assert_int_equal(((ctxid_fn)t[4])(b, &id), CUDA_SUCCESS);
	assert_int_equal(id, 2);
	assert_int_equal(id, ip_ctx_uid(b));

	mock_set_current(a); /* NULL means 0, not "the current context" */
	id = 77;
	assert_int_equal(((ctxid_fn)t[4])(NULL, &id), CUDA_SUCCESS);
	assert_int_equal(id, 0);
	assert_int_equal(((ctxid_fn)t[4])(a, NULL), CUDA_ERROR_INVALID_VALUE);
	assert_null(t[91]);
}

/* Slots 51 and 39: a stream's tools handle, and the ID cuStreamGetId gives its stream. */
typedef CUresult (*stream_handle_fn)(CUcontext, CUstream, void **, unsigned);
typedef CUresult (*stream_id_fn)(CUcontext, void *, unsigned long long *);

static void test_stream_handles(void **state)
{
	const void *const *t = table_of(UUID_21318C60);
	stream_handle_fn handle = (stream_handle_fn)t[51];
	stream_id_fn sid = (stream_id_fn)t[39];
	CUcontext ctx = (CUcontext)0x1000;
	void *h = NULL, *h2 = NULL, *hp = NULL;
	unsigned long long id = 0;
	(void)state;

	mock_add_stream(MOCK_STREAM, 17);
	/* the NULL stream: one handle, the ID cuStreamGetId(NULL) gives */
	assert_int_equal(handle(ctx, NULL, &h, 0), CUDA_SUCCESS);
	assert_non_null(h);
	assert_int_equal(handle(ctx, CU_STREAM_LEGACY, &h2, 0), CUDA_SUCCESS);
	assert_ptr_equal(h, h2);
	assert_int_equal(sid(ctx, h, &id), CUDA_SUCCESS);
	assert_int_equal(id, MOCK_NULL_STREAM_ID);
	/* the per-thread one, by flag or by handle: another handle, its own ID */
	assert_int_equal(handle(ctx, NULL, &hp, 1), CUDA_SUCCESS);
	assert_ptr_not_equal(hp, h);
	assert_int_equal(handle(ctx, CU_STREAM_PER_THREAD, &h2, 0), CUDA_SUCCESS);
	assert_ptr_equal(hp, h2);
	assert_int_equal(sid(ctx, hp, &id), CUDA_SUCCESS);
	assert_int_equal(id, MOCK_PTDS_STREAM_ID);
	/* an ordinary stream is its own handle */
	assert_int_equal(handle(ctx, MOCK_STREAM, &h, 0), CUDA_SUCCESS);
	assert_ptr_equal(h, MOCK_STREAM);
	assert_int_equal(sid(ctx, h, &id), CUDA_SUCCESS);
	assert_int_equal(id, 17);
	/* bad arguments */
	h = (void *)0x77;
	assert_int_equal(handle(ctx, (CUstream)0xbad0, &h, 0), CUDA_ERROR_INVALID_HANDLE);
	assert_ptr_equal(h, (void *)0x77);
	assert_int_equal(handle(ctx, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(sid(ctx, NULL, &id), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(sid(ctx, MOCK_STREAM, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* 1734dc26 slots 4 and 13: the core's TPC maps handed out, then freed by the caller's slot. */
typedef CUresult (*tpc_map_fn)(unsigned char **, unsigned char **);

static void test_tpc_maps(void **state)
{
	const void *const *t = table_of(UUID_1734DC26);
	unsigned char *a = NULL, *b = NULL;
	(void)state;

	assert_int_equal(((tpc_map_fn)t[4])(&a, &b), CUDA_SUCCESS);
	assert_non_null(a);
	assert_non_null(b);
	for (int i = 0; i < MOCK_TPCS; i++) {
		assert_int_equal(a[i], i % 8);
		assert_int_equal(b[i], i / 8);
	}
	assert_int_equal(((CUresult(*)(unsigned char *, unsigned char *))t[13])(a, b), CUDA_SUCCESS);
	assert_int_equal(((tpc_map_fn)t[4])(NULL, &b), CUDA_ERROR_INVALID_VALUE);
}

/* 6e163fbe slot 7: each function of the module, to the callback, and their count returned. */
typedef uint64_t (*each_fn)(CUcontext, CUmodule, void (*)(void *, void *, uint64_t), void *);

static struct {
	void *opaque[8], *fn[8];
	uint64_t owner[8];
	int n;
} heard;

static void hear(void *opaque, void *fn, uint64_t owner)
{
	heard.opaque[heard.n] = opaque;
	heard.fn[heard.n] = fn;
	heard.owner[heard.n++] = owner;
}

static void test_module_functions(void **state)
{
	const void *const *t = table_of(UUID_6E163FBE);
	each_fn each = (each_fn)t[7];
	int cookie;
	(void)state;

	memset(&heard, 0, sizeof(heard));
	assert_int_equal(each(NULL, MOCK_MODULE, hear, &cookie), 2);
	assert_int_equal(heard.n, 2);
	assert_ptr_equal(heard.fn[0], MOCK_FUNC0);
	assert_ptr_equal(heard.fn[1], MOCK_FUNC1);
	assert_ptr_equal(heard.opaque[0], &cookie);
	assert_ptr_equal(heard.opaque[1], &cookie);
	assert_int_equal(heard.owner[0], 0);
	/* an unknown module: nothing heard, 0 */
	assert_int_equal(each(NULL, (CUmodule)0xbad0, hear, &cookie), 0);
	assert_int_equal(heard.n, 2);
	/* no callback: still the count */
	assert_int_equal(each(NULL, MOCK_MODULE, NULL, NULL), 2);
}

/* ---- §4.4 CONTEXT_LOCAL_STORAGE ------------------------------------------------------------- */

typedef void (*dtor_fn)(CUcontext, void *, void *);
typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, dtor_fn);
typedef CUresult (*cls_del_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

static cls_put_fn cls_put;
static cls_del_fn cls_del;
static cls_get_fn cls_get;

#define CTX_A ((CUcontext)0xA000)
#define CTX_B ((CUcontext)0xB000)
#define CTX_DEAD ((CUcontext)0xDEAD0)
#define KEY(n) ((void *)(uintptr_t)(0x100 + (n)))
#define VAL(n) ((void *)(uintptr_t)(0x900 + (n)))

static struct {
	CUcontext ctx;
	void *key, *value;
} dtor_calls[64];
static int ndtor;

static void dtor_record(CUcontext ctx, void *key, void *value)
{
	dtor_calls[ndtor].ctx = ctx;
	dtor_calls[ndtor].key = key;
	dtor_calls[ndtor].value = value;
	ndtor++;
}

static int setup_cls(void **state)
{
	const void *const *t;
	(void)state;
	mock_reset();
	mock_set_initialized(1);
	mock_add_ctx(CTX_A, 1, 1);
	mock_add_ctx(CTX_B, 2, 1);
	mock_add_ctx(CTX_DEAD, 3, 0);
	t = table_of(UUID_CLS);
	cls_put = (cls_put_fn)t[0];
	cls_del = (cls_del_fn)t[1];
	cls_get = (cls_get_fn)t[2];
	ndtor = 0;
	return 0;
}

static int teardown_cls(void **state)
{
	(void)state;
	ip_cls_teardown(CTX_A);
	ip_cls_teardown(CTX_B);
	ip_cls_teardown(CTX_DEAD);
	return 0;
}

static void test_cls_layout(void **state)
{
	const void *const *t = table_of(UUID_CLS);
	(void)state;
	assert_ptr_equal(t[0], (const void *)ip_cls_put);
	assert_ptr_equal(t[1], (const void *)ip_cls_del);
	assert_ptr_equal(t[2], (const void *)ip_cls_get);
	assert_null(t[3]);
}

static void test_cls_put_get(void **state)
{
	void *v = (void *)0x77;
	(void)state;
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(1));

	/* existing (ctx, key): 400, the old value stays */
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(2), dtor_record), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(1));

	/* the same key on another context is another entry */
	assert_int_equal(cls_put(CTX_B, KEY(1), VAL(3), NULL), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, CTX_B, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(3));
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(1));

	/* missing: 400, *value untouched */
	v = (void *)0x77;
	assert_int_equal(cls_get(&v, CTX_A, KEY(2)), CUDA_ERROR_INVALID_HANDLE);
	assert_ptr_equal(v, (void *)0x77);
	assert_int_equal(cls_get(NULL, CTX_A, KEY(1)), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(ndtor, 0);
}

static void test_cls_delete(void **state)
{
	void *v = (void *)0x77;
	(void)state;
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_del(CTX_A, KEY(1)), CUDA_SUCCESS);
	assert_int_equal(ndtor, 0); /* delete never runs the destructor */
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_ptr_equal(v, (void *)0x77);
	assert_int_equal(cls_del(CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_del(CTX_B, KEY(9)), CUDA_ERROR_INVALID_HANDLE);

	/* and the key can be put again */
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(4), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(4));
	ip_cls_teardown(CTX_A);
	assert_int_equal(ndtor, 1);
}

static void test_cls_null_ctx_current(void **state)
{
	void *v = NULL;
	(void)state;
	mock_set_current(CTX_A);
	assert_int_equal(cls_put(NULL, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_SUCCESS); /* stored under the current */
	assert_ptr_equal(v, VAL(1));
	v = NULL;
	assert_int_equal(cls_get(&v, NULL, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(1));
	assert_int_equal(cls_put(NULL, KEY(1), VAL(2), NULL), CUDA_ERROR_INVALID_HANDLE);

	mock_set_current(CTX_B); /* another current context sees other entries */
	assert_int_equal(cls_get(&v, NULL, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_del(NULL, KEY(1)), CUDA_ERROR_INVALID_HANDLE);

	mock_set_current(CTX_A);
	assert_int_equal(cls_del(NULL, KEY(1)), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
}

/* The runtime's first call of all: get(NULL) with no current context is 201. */
static void test_cls_no_current(void **state)
{
	void *v = (void *)0x77;
	(void)state;
	mock_set_current(NULL);
	assert_int_equal(cls_get(&v, NULL, KEY(1)), CUDA_ERROR_INVALID_CONTEXT);
	assert_ptr_equal(v, (void *)0x77);
	assert_int_equal(cls_put(NULL, KEY(1), VAL(1), dtor_record), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cls_del(NULL, KEY(1)), CUDA_ERROR_INVALID_CONTEXT);
	/* nothing was stored anywhere */
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);

	/* then the runtime's sequence: set up the context, get -> 400, put, get -> value */
	mock_set_current(CTX_A);
	assert_int_equal(cls_get(&v, NULL, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_put(NULL, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_get(&v, NULL, KEY(1)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(1));
}

/*
 * Teardown (the core calls it for cuCtxDestroy, cuDevicePrimaryCtxReset and the release that
 * reaches zero): destructors newest first, only for that context, NULL destructors skipped,
 * then the context's entries are gone.
 */
static void test_cls_teardown(void **state)
{
	void *v = (void *)0x77;
	(void)state;
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_B, KEY(1), VAL(11), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_A, KEY(2), VAL(2), NULL), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_A, KEY(3), VAL(3), dtor_record), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_A, KEY(4), VAL(4), dtor_record), CUDA_SUCCESS);

	ip_cls_teardown(CTX_A);
	assert_int_equal(ndtor, 3);
	assert_ptr_equal(dtor_calls[0].ctx, CTX_A);
	assert_ptr_equal(dtor_calls[0].key, KEY(4));
	assert_ptr_equal(dtor_calls[0].value, VAL(4));
	assert_ptr_equal(dtor_calls[1].key, KEY(3));
	assert_ptr_equal(dtor_calls[1].value, VAL(3));
	assert_ptr_equal(dtor_calls[2].key, KEY(1));
	assert_ptr_equal(dtor_calls[2].value, VAL(1));

	for (int k = 1; k <= 4; k++) {
		assert_int_equal(cls_get(&v, CTX_A, KEY(k)), CUDA_ERROR_INVALID_HANDLE);
		assert_ptr_equal(v, (void *)0x77);
	}
	assert_int_equal(cls_get(&v, CTX_B, KEY(1)), CUDA_SUCCESS); /* B untouched */
	assert_ptr_equal(v, VAL(11));

	ip_cls_teardown(CTX_A); /* nothing left: no destructor twice */
	ip_cls_teardown(NULL);
	assert_int_equal(ndtor, 3);

	/* a released primary context is put again later: a fresh, empty start */
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(5), dtor_record), CUDA_SUCCESS);
	ip_cls_teardown(CTX_B);
	assert_int_equal(ndtor, 4);
	assert_ptr_equal(dtor_calls[3].ctx, CTX_B);
	assert_ptr_equal(dtor_calls[3].value, VAL(11));
}

/* A destroyed handle: get 400 without a crash; put refused; delete 400. */
static void test_cls_destroyed_ctx(void **state)
{
	void *v = (void *)0x77;
	(void)state;
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(1), dtor_record), CUDA_SUCCESS);
	mock_add_ctx(CTX_A, 1, 0); /* the core destroys it ... */
	ip_cls_teardown(CTX_A);	   /* ... and tells CLS */
	assert_int_equal(ndtor, 1);
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_ptr_equal(v, (void *)0x77);
	assert_int_equal(cls_del(CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);

	assert_int_equal(cls_get(&v, CTX_DEAD, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_put(CTX_DEAD, KEY(1), VAL(1), dtor_record), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_put((CUcontext)0x12345, KEY(1), VAL(1), NULL),
			 CUDA_ERROR_INVALID_HANDLE); /* never a context at all */
	assert_int_equal(cls_get(&v, CTX_DEAD, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(ndtor, 1);
}

/*
 * The runtime's destructor calls back into the driver: here into CLS itself. No lock may be
 * held (a deadlock would hang the test), the entries are still visible while destructors run,
 * and an entry deleted by an earlier destructor loses its own destructor.
 */
static void dtor_reentrant(CUcontext ctx, void *key, void *value)
{
	void *v = NULL;
	dtor_record(ctx, key, value);
	if (key == KEY(3)) {
		assert_int_equal(cls_get(&v, ctx, KEY(3)), CUDA_SUCCESS);
		assert_ptr_equal(v, VAL(3));
		assert_int_equal(cls_get(&v, ctx, KEY(1)), CUDA_SUCCESS);
		assert_int_equal(cls_del(ctx, KEY(2)), CUDA_SUCCESS);
		assert_int_equal(cls_put(CTX_B, KEY(7), VAL(7), NULL), CUDA_SUCCESS);
	}
}

static void test_cls_teardown_reentrant(void **state)
{
	void *v;
	(void)state;
	assert_int_equal(cls_put(CTX_A, KEY(1), VAL(1), dtor_reentrant), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_A, KEY(2), VAL(2), dtor_reentrant), CUDA_SUCCESS);
	assert_int_equal(cls_put(CTX_A, KEY(3), VAL(3), dtor_reentrant), CUDA_SUCCESS);
	ip_cls_teardown(CTX_A);
	assert_int_equal(ndtor, 2);
	assert_ptr_equal(dtor_calls[0].key, KEY(3));
	assert_ptr_equal(dtor_calls[1].key, KEY(1));
	assert_int_equal(cls_get(&v, CTX_A, KEY(1)), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cls_get(&v, CTX_B, KEY(7)), CUDA_SUCCESS);
	assert_ptr_equal(v, VAL(7));
}

#define CLS_THREADS 8
#define CLS_ROUNDS 2000

static void *cls_worker(void *arg)
{
	uintptr_t id = (uintptr_t)arg, bad = 0;
	for (uintptr_t r = 0; r < CLS_ROUNDS; r++) {
		void *key = (void *)(0x100000 + id * 0x10000 + r), *v = NULL;
		CUcontext ctx = (r & 1) ? CTX_A : CTX_B;
		bad += cls_put(ctx, key, (void *)(r + 1), NULL) != CUDA_SUCCESS;
		bad += cls_get(&v, ctx, key) != CUDA_SUCCESS || v != (void *)(r + 1);
		if (r % 3)
			bad += cls_del(ctx, key) != CUDA_SUCCESS;
	}
	return (void *)bad;
}

static void test_cls_threads(void **state)
{
	pthread_t th[CLS_THREADS];
	void *v;
	(void)state;
	for (uintptr_t i = 0; i < CLS_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cls_worker, (void *)i), 0);
	for (int i = 0; i < CLS_THREADS; i++) {
		void *bad;
		assert_int_equal(pthread_join(th[i], &bad), 0);
		assert_ptr_equal(bad, NULL);
	}
	/* the entries not deleted are all there; teardown clears both contexts */
	for (uintptr_t i = 0; i < CLS_THREADS; i++)
		for (uintptr_t r = 0; r < CLS_ROUNDS; r += 3) {
			assert_int_equal(cls_get(&v, (r & 1) ? CTX_A : CTX_B,
						 (void *)(0x100000 + i * 0x10000 + r)),
					 CUDA_SUCCESS);
		}
	ip_cls_teardown(CTX_A);
	ip_cls_teardown(CTX_B);
	assert_int_equal(cls_get(&v, CTX_A, (void *)0x100000), CUDA_ERROR_INVALID_HANDLE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_md2_v0),
	    cmocka_unit_test(test_integrity_key),
	    cmocka_unit_test(test_hmac_v8),
	    cmocka_unit_test(test_integrity_v1_message),
	    cmocka_unit_test(test_integrity_v1_v4),
	    cmocka_unit_test(test_integrity_v5),
	    cmocka_unit_test(test_integrity_constants),
	    cmocka_unit_test(test_integrity_v6_v7),
	    cmocka_unit_test(test_integrity_bad_args),
	    cmocka_unit_test_setup(test_integrity_not_initialized, setup_reset),
	    cmocka_unit_test_setup(test_integrity_live, setup_init),
	    cmocka_unit_test_setup(test_integrity_many_devices, setup_init),

	    cmocka_unit_test_setup(test_export_before_init, setup_reset),
	    cmocka_unit_test_setup(test_export_after_init, setup_init),
	    cmocka_unit_test_setup(test_export_slots_distinct, setup_reset),
	    cmocka_unit_test_setup(test_export_refused, setup_reset),
	    cmocka_unit_test_setup(test_export_null_args, setup_reset),
	    cmocka_unit_test_setup(test_default_stubs, setup_init),
	    cmocka_unit_test_setup(test_refusal_logged, setup_reset),

	    cmocka_unit_test_setup(test_cudart_module_slots, setup_init),
	    cmocka_unit_test_setup(test_cudart_primary_context, setup_reset),
	    cmocka_unit_test_setup(test_cudart_small_slots, setup_reset),
	    cmocka_unit_test_setup(test_hooks_buffers, setup_reset),
	    cmocka_unit_test_setup(test_tools_tls_fill, setup_reset),
	    cmocka_unit_test_setup(test_context_checks, setup_reset),
	    cmocka_unit_test_setup(test_context_id, setup_init),
	    cmocka_unit_test_setup(test_stream_handles, setup_init),
	    cmocka_unit_test_setup(test_tpc_maps, setup_init),
	    cmocka_unit_test_setup(test_module_functions, setup_init),

	    cmocka_unit_test_setup_teardown(test_cls_layout, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_put_get, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_delete, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_null_ctx_current, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_no_current, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_teardown, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_destroyed_ctx, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_teardown_reentrant, setup_cls, teardown_cls),
	    cmocka_unit_test_setup_teardown(test_cls_threads, setup_cls, teardown_cls),
	};

	/* Only the log tests look at the log; keep everyone else's lines out of the output. */
	if (rgpu_log_open("/dev/null"))
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
