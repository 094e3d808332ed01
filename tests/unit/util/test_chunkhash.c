/*
 * The chunk hash (util/hash.c, rgpu_chunk_hash) against digests computed independently, with
 * Python's hashlib, from the definition in rgpu/hash.h: empty, shorter than a leaf, one leaf,
 * one leaf and 4 bytes, a whole 2 MiB chunk of a pattern, and 2 MiB of zeros. The GPU kernel
 * (server/gpuhash.cu) is checked against this function on the GPU (tests/gpu/run.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu/hash.h"

/* byte i of pattern `salt` (the vectors were made with the same formula) */
static uint8_t pat(uint64_t i, unsigned salt)
{
	return (uint8_t)(i * 7 + (i >> 8) * 13 + salt * 31 + 1);
}

static void hex(const uint8_t *d, char *out)
{
	for (int i = 0; i < RGPU_HASH_LEN; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void check(size_t n, unsigned salt, int zeros, const char *want)
{
	uint8_t *buf = malloc(n ? n : 1), d[RGPU_HASH_LEN];
	char got[2 * RGPU_HASH_LEN + 1];

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++)
		buf[i] = zeros ? 0 : pat(i, salt);
	rgpu_chunk_hash(buf, n, d);
	hex(d, got);
	assert_string_equal(got, want);
	free(buf);
}

static void test_vectors(void **state)
{
	(void)state;
	check(0, 0, 0, "d604516293af9a3847ec0cefa398f951f3325a5e190987677ea8dc49714c5257");
	check(5, 1, 0, "0cc7cbc82686a0709946925c62b893b3f6f1bb8e93e68521557565c856b50068");
	check(4096, 2, 0, "a1c838efc7538a0f1b120a3c56d10e4fc5155131ccafd129609d696984d74f06");
	check(4100, 3, 0, "a9cf77277fc0cb838e2beb40f0cdf4498a6282f4978c9abb684f9798e671be85");
	check(2u << 20, 4, 0, "e0a1e1136680b9d538fa0365dbcc2e61756a4fd8cf055af3d43c1f355672c91a");
	check(2u << 20, 0, 1, "76f463cf1d5f7623e8cd565820bb4c8c9619f1d3d22c76887224d7c76620f8f9");
}

/* One byte changed anywhere changes the digest; the length is part of it. */
static void test_sensitivity(void **state)
{
	enum { N = 3 * 4096 + 100 };
	static uint8_t buf[N];
	uint8_t a[RGPU_HASH_LEN], b[RGPU_HASH_LEN];

	(void)state;
	for (size_t i = 0; i < N; i++)
		buf[i] = pat(i, 9);
	rgpu_chunk_hash(buf, N, a);
	for (size_t at = 0; at < N; at += 1031) {
		buf[at] ^= 1;
		rgpu_chunk_hash(buf, N, b);
		assert_memory_not_equal(a, b, RGPU_HASH_LEN);
		buf[at] ^= 1;
	}
	rgpu_chunk_hash(buf, N - 1, b);
	assert_memory_not_equal(a, b, RGPU_HASH_LEN);
	rgpu_chunk_hash(buf, N, b);
	assert_memory_equal(a, b, RGPU_HASH_LEN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_sensitivity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
