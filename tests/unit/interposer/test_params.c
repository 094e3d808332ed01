/*
 * Unit tests of kernel parameter packing (testing.md, tier 1): ip_pack_params() lays each
 * kernelParams[i] at the offset the CUDA ABI gives it, zeroes the padding between them, and
 * writes nothing past argbytes. Layouts are written out by hand (natural alignment) and every
 * expected byte is built by hand too, so a shifted offset, a wrong size, a byte-order slip or a
 * stale padding byte is a failed comparison. Output buffers start out full of 0xA5 so padding
 * the code forgets to clear shows up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ip.h"
#include "rgpu/err.h"

#define JUNK 0xA5 /* what the output buffer holds before packing */
#define GUARD 64  /* bytes after argbytes that must keep JUNK */

/* Little-endian bytes of v at out[0..n), written out by hand. */
static void put_le(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *junk_buf(size_t argbytes)
{
	uint8_t *b = malloc(argbytes + GUARD);
	assert_non_null(b);
	memset(b, JUNK, argbytes + GUARD);
	return b;
}

/* Every byte of got[0..argbytes) matches want; the guard after it is untouched. */
static void check_packed(const uint8_t *got, const uint8_t *want, size_t argbytes)
{
	for (size_t i = 0; i < argbytes; i++) {
		if (got[i] != want[i])
			fail_msg("byte %zu: got 0x%02x, want 0x%02x", i, got[i], want[i]);
	}
	for (size_t i = argbytes; i < argbytes + GUARD; i++) {
		if (got[i] != JUNK)
			fail_msg("byte %zu past argbytes %zu was written (0x%02x)", i, argbytes,
				 got[i]);
	}
}

/* --- the mixed kernel: (char, short, struct{int[12]}, struct{uchar[4000]}, int, double, ptr) */

struct m48 {
	int a[12];
};
struct big4000 {
	unsigned char b[4000];
};

static void test_mixed_layout(void **state)
{
	(void)state;
	/* offsets by natural alignment: c@0 (1), pad 1, s@2 (2), m48@4 (48, align 4),
	 * big@52 (4000, align 1), i@4052 (4), d@4056 (8, 4056 % 8 == 0), p@4064 (8) -> 4072 */
	uint32_t offset[7] = {0, 2, 4, 52, 4052, 4056, 4064};
	uint32_t size[7] = {1, 2, 48, 4000, 4, 8, 8};
	struct ip_funcinfo fi = {
	    .name = "mixed", .nparams = 7, .offset = offset, .size = size, .argbytes = 4072};

	char c = (char)0x7e;
	short s = (short)0x1234;
	struct m48 m;
	static struct big4000 big;
	int iv = (int)0x89abcdefu;
	double d = -2.75; /* IEEE 754: 0xC006000000000000 */
	void *p = (void *)(uintptr_t)0x00007f1234567890ull;
	for (int k = 0; k < 12; k++)
		m.a[k] = (int)(0x01020304u + 0x11111111u * (uint32_t)k);
	for (int k = 0; k < 4000; k++)
		big.b[k] = (unsigned char)(k * 7 + 13 + (k >> 8));
	void *params[7] = {&c, &s, &m, &big, &iv, &d, &p};

	/* the expected buffer, byte by byte */
	uint8_t want[4072];
	memset(want, 0, sizeof(want)); /* padding: bytes 1 only */
	want[0] = 0x7e;
	want[1] = 0x00;
	want[2] = 0x34;
	want[3] = 0x12;
	for (int k = 0; k < 12; k++)
		put_le(want + 4 + 4 * k, 0x01020304u + 0x11111111u * (uint32_t)k, 4);
	for (int k = 0; k < 4000; k++)
		want[52 + k] = (uint8_t)(k * 7 + 13 + (k >> 8));
	want[4052] = 0xef;
	want[4053] = 0xcd;
	want[4054] = 0xab;
	want[4055] = 0x89;
	put_le(want + 4056, 0xC006000000000000ull, 8);
	put_le(want + 4064, 0x00007f1234567890ull, 8);

	uint8_t *buf = junk_buf(4072);
	assert_int_equal(ip_pack_params(&fi, params, buf), 0);
	check_packed(buf, want, 4072);
	/* the one padding byte, named */
	assert_int_equal(buf[1], 0);
	free(buf);
}

/* Parameters given in an order other than their offsets land at their offsets all the same. */
static void test_offsets_not_in_order(void **state)
{
	(void)state;
	/* a (int@8), b (char@0), c (short@4): the layout of (char b, short c, int a) */
	uint32_t offset[3] = {8, 0, 4};
	uint32_t size[3] = {4, 1, 2};
	struct ip_funcinfo fi = {.nparams = 3, .offset = offset, .size = size, .argbytes = 12};
	uint32_t a = 0xdeadbeefu;
	uint8_t b = 0x5c;
	uint16_t cc = 0xa1b2;
	void *params[3] = {&a, &b, &cc};
	uint8_t want[12] = {0x5c, 0, 0, 0, 0xb2, 0xa1, 0, 0, 0xef, 0xbe, 0xad, 0xde};

	uint8_t *buf = junk_buf(12);
	assert_int_equal(ip_pack_params(&fi, params, buf), 0);
	check_packed(buf, want, 12);
	free(buf);
}

/* 100 ints: more parameters than any small fixed table (64+) would hold. */
static void test_hundred_ints(void **state)
{
	(void)state;
	enum { N = 100 };
	uint32_t offset[N], size[N];
	int32_t v[N];
	void *params[N];
	uint8_t want[4 * N];

	for (int k = 0; k < N; k++) {
		offset[k] = 4u * (uint32_t)k;
		size[k] = 4;
		v[k] = (int32_t)(0x5a000000u | ((uint32_t)k << 12) | (uint32_t)(k * 3 + 1));
		params[k] = &v[k];
		put_le(want + 4 * k, 0x5a000000u | ((uint32_t)k << 12) | (uint32_t)(k * 3 + 1), 4);
	}
	struct ip_funcinfo fi = {.nparams = N, .offset = offset, .size = size, .argbytes = 4 * N};

	uint8_t *buf = junk_buf(4 * N);
	assert_int_equal(ip_pack_params(&fi, params, buf), 0);
	check_packed(buf, want, 4 * N);
	/* spot checks, named: the first, the 65th and the last parameter */
	assert_int_equal(buf[0], 0x01);
	assert_int_equal(buf[3], 0x5a);
	/* 64: 0x5a000000 | 0x40000 | 193 = 0x5a0400c1; 99: 0x5a000000 | 0x63000 | 298 = 0x5a06312a
	 */
	assert_int_equal(buf[4 * 64 + 0], 0xc1);
	assert_int_equal(buf[4 * 64 + 1], 0x00);
	assert_int_equal(buf[4 * 64 + 2], 0x04);
	assert_int_equal(buf[4 * 64 + 3], 0x5a);
	assert_int_equal(buf[4 * 99 + 0], 0x2a);
	assert_int_equal(buf[4 * 99 + 1], 0x31);
	assert_int_equal(buf[4 * 99 + 2], 0x06);
	assert_int_equal(buf[4 * 99 + 3], 0x5a);
	free(buf);
}

/* > 4 KiB of parameters: (int n, struct{uchar b[8192]} blob, double x) -> 0, 4, 8200; 8208. */
struct blob8k {
	unsigned char b[8192];
};

static void test_over_4k(void **state)
{
	(void)state;
	uint32_t offset[3] = {0, 4, 8200}; /* 4 + 8192 = 8196, next multiple of 8 is 8200 */
	uint32_t size[3] = {4, 8192, 8};
	struct ip_funcinfo fi = {.nparams = 3, .offset = offset, .size = size, .argbytes = 8208};
	int32_t n = 8192;
	static struct blob8k blob;
	double x = 0.5; /* 0x3FE0000000000000 */
	void *params[3] = {&n, &blob, &x};
	static uint8_t want[8208];

	for (int k = 0; k < 8192; k++)
		blob.b[k] = (unsigned char)(255 - (k % 251));
	memset(want, 0, sizeof(want));
	put_le(want, 8192, 4);
	for (int k = 0; k < 8192; k++)
		want[4 + k] = (uint8_t)(255 - (k % 251));
	/* 8196..8199: padding, zero */
	put_le(want + 8200, 0x3FE0000000000000ull, 8);

	uint8_t *buf = junk_buf(8208);
	assert_int_equal(ip_pack_params(&fi, params, buf), 0);
	check_packed(buf, want, 8208);
	for (int k = 8196; k < 8200; k++)
		assert_int_equal(buf[k], 0);
	free(buf);
}

/* Trailing padding (the struct's size rounded up to its alignment) is zeroed too. */
static void test_trailing_padding(void **state)
{
	(void)state;
	/* (double d, char c): d@0, c@8, argbytes 16 (what cuFuncGetParamInfo reports) */
	uint32_t offset[2] = {0, 8};
	uint32_t size[2] = {8, 1};
	struct ip_funcinfo fi = {.nparams = 2, .offset = offset, .size = size, .argbytes = 16};
	double d = 1.0; /* 0x3FF0000000000000 */
	char c = 'Z';
	void *params[2] = {&d, &c};
	uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 'Z', 0, 0, 0, 0, 0, 0, 0};

	uint8_t *buf = junk_buf(16);
	assert_int_equal(ip_pack_params(&fi, params, buf), 0);
	check_packed(buf, want, 16);
	free(buf);
}

static void test_null_param(void **state)
{
	(void)state;
	uint32_t offset[4] = {0, 4, 8, 16};
	uint32_t size[4] = {4, 4, 8, 8};
	struct ip_funcinfo fi = {.nparams = 4, .offset = offset, .size = size, .argbytes = 24};
	int32_t a = 1, b = 2;
	double c = 3.0;
	void *p = &a;
	uint8_t *buf = junk_buf(24);

	void *last_null[4] = {&a, &b, &c, NULL};
	assert_int_equal(ip_pack_params(&fi, last_null, buf), RGPU_EINVAL);
	void *first_null[4] = {NULL, &b, &c, &p};
	assert_int_equal(ip_pack_params(&fi, first_null, buf), RGPU_EINVAL);
	void *mid_null[4] = {&a, &b, NULL, &p};
	assert_int_equal(ip_pack_params(&fi, mid_null, buf), RGPU_EINVAL);
	/* nothing past argbytes, even on the error path */
	for (int k = 24; k < 24 + GUARD; k++)
		assert_int_equal(buf[k], JUNK);
	free(buf);
}

static void test_zero_params(void **state)
{
	(void)state;
	struct ip_funcinfo fi = {.name = "empty", .nparams = 0, .argbytes = 0};
	uint8_t *buf = junk_buf(0);

	/* kernelParams may be NULL for a kernel without parameters */
	assert_int_equal(ip_pack_params(&fi, NULL, buf), 0);
	for (int k = 0; k < GUARD; k++)
		assert_int_equal(buf[k], JUNK);
	void *none[1] = {NULL}; /* never looked at: there are no parameters */
	assert_int_equal(ip_pack_params(&fi, none, buf), 0);
	for (int k = 0; k < GUARD; k++)
		assert_int_equal(buf[k], JUNK);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mixed_layout),     cmocka_unit_test(test_offsets_not_in_order),
	    cmocka_unit_test(test_hundred_ints),     cmocka_unit_test(test_over_4k),
	    cmocka_unit_test(test_trailing_padding), cmocka_unit_test(test_null_param),
	    cmocka_unit_test(test_zero_params),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
