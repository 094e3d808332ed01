/*
 * util's checked range arithmetic (rgpu_range_end, rgpu_range_in): the ends of tables and of
 * pitched ranges that peers and files name, which must never wrap around 2^64. And the sizes
 * operators write (rgpu_parse_size).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "rgpu/util.h"
#include "rgpu/window.h"

static void test_range_end(void **state)
{
	uint64_t end = 7;

	(void)state;
	assert_int_equal(rgpu_range_end(64, 3, 56, &end), 0);
	assert_int_equal(end, 64 + 3 * 56);
	assert_int_equal(rgpu_range_end(100, 0, ~0ull, &end), 0); /* an empty table ends where it starts */
	assert_int_equal(end, 100);
	assert_int_equal(rgpu_range_end(~0ull - 16, 1, 16, &end), 0);
	assert_int_equal(end, ~0ull);
	/* one byte more than 2^64 - 1 */
	end = 7;
	assert_int_equal(rgpu_range_end(~0ull - 15, 1, 16, &end), RGPU_ETOOBIG);
	assert_int_equal(end, 7);
	/* the memset of issue 8: 2^40 * 2^24 is 2^64, which wraps to 0 */
	assert_int_equal(rgpu_range_end(16, 1ull << 24, 1ull << 40, &end), RGPU_ETOOBIG);
	assert_int_equal(rgpu_range_end(16, (1ull << 24) - 1, 1ull << 40, &end), 0);
	assert_int_equal(end, 0xffffff0000000010ull);
	assert_int_equal(rgpu_range_end(0, 1ull << 32, 1ull << 32, &end), RGPU_ETOOBIG);
	assert_int_equal(end, 0xffffff0000000010ull);
}

static void test_range_in(void **state)
{
	(void)state;
	assert_true(rgpu_range_in(0, 4, 16, 64));
	assert_false(rgpu_range_in(1, 4, 16, 64));
	assert_true(rgpu_range_in(64, 0, 16, 64));
	assert_false(rgpu_range_in(65, 0, 16, 64));
	/* wraps to 0x10, which a wrapping check would find inside the limit */
	assert_false(rgpu_range_in(0x20, 1, ~0ull - 0xf, 64));
	assert_false(rgpu_range_in(0, 1ull << 63, 2, ~0ull));
}

/*
 * The host area's merge (rgpu/window.h): of the other side's span only the bytes it changed
 * (different from the shared shadow) land; this side's own writes elsewhere in it stay.
 */
static void test_hostarea_merge(void **state)
{
	uint8_t shadow[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t live[8] = {1, 2, 30, 4, 5, 60, 7, 8};   /* this side wrote bytes 2 and 5 */
	const uint8_t in[8] = {1, 20, 3, 4, 50, 66, 7, 8}; /* the other wrote 1, 4 and 5 */
	const uint8_t want_live[8] = {1, 20, 30, 4, 50, 66, 7, 8};
	const uint8_t want_shadow[8] = {1, 20, 3, 4, 50, 66, 7, 8};

	uint64_t lo = 99, hi = 99;

	(void)state;
	assert_int_equal(rgpu_hostarea_span(live, shadow, 8, &lo, &hi), 1);
	assert_int_equal(lo, 2); /* bytes 2 to 5 differ at the ends of the span */
	assert_int_equal(hi, 6);
	assert_int_equal(rgpu_hostarea_span(shadow, shadow, 8, &lo, &hi), 0);
	rgpu_hostarea_merge(live, shadow, in, 8);
	assert_memory_equal(live, want_live, 8);     /* byte 5: both wrote, the arrival wins */
	assert_memory_equal(shadow, want_shadow, 8); /* byte 2 still differs: sent later */
	assert_int_equal(rgpu_hostarea_base(0x200000000000ull), 0x200000000000ull - (1ull << 30));
	assert_int_equal(rgpu_hostarea_base(1ull << 20), 0);
}

static void test_parse_size(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(rgpu_parse_size("64", &v), 0);
	assert_int_equal(v, 64);
	/* a leading 0 is decimal, as the man pages say, not octal */
	assert_int_equal(rgpu_parse_size("010M", &v), 0);
	assert_int_equal(v, 10ull << 20);
	assert_int_equal(rgpu_parse_size("08", &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(rgpu_parse_size("0x10K", &v), 0);
	assert_int_equal(v, 16ull << 10);
	assert_int_equal(rgpu_parse_size("0x200000000000", &v), 0);
	assert_int_equal(v, 0x200000000000ull);
	assert_int_equal(rgpu_parse_size("16T", &v), 0);
	assert_int_equal(v, 16ull << 40);
	assert_int_equal(rgpu_parse_size("2GiB", &v), 0);
	assert_int_equal(v, 2ull << 30);
	v = 99;
	assert_int_equal(rgpu_parse_size("1X", &v), RGPU_EINVAL);
	assert_int_equal(rgpu_parse_size("-1", &v), RGPU_EINVAL);
	assert_int_equal(rgpu_parse_size("", &v), RGPU_EINVAL);
	assert_int_equal(rgpu_parse_size("0x", &v), RGPU_EINVAL);
	assert_int_equal(rgpu_parse_size("99999999999T", &v), RGPU_ETOOBIG);
	assert_int_equal(v, 99); /* untouched on failure */
}

/* rgpu_addr_complete: what a redirected client can use, a host and a port 1..65535 */
static void test_addr_complete(void **state)
{
	(void)state;
	assert_true(rgpu_addr_complete("gpu2:7070"));
	assert_true(rgpu_addr_complete("10.0.0.5:1"));
	assert_true(rgpu_addr_complete("[fe80::1]:65535"));
	assert_false(rgpu_addr_complete("gpu2"));      /* no port */
	assert_false(rgpu_addr_complete("gpu2:0"));    /* a listener's "any port" */
	assert_false(rgpu_addr_complete("7070"));      /* a bare port: no host */
	assert_false(rgpu_addr_complete(":7070"));
	assert_false(rgpu_addr_complete("gpu2:65536"));
	assert_false(rgpu_addr_complete("gpu2:x"));
	assert_false(rgpu_addr_complete(""));
	assert_false(rgpu_addr_complete(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_range_end),
	    cmocka_unit_test(test_range_in),
	    cmocka_unit_test(test_hostarea_merge),
	    cmocka_unit_test(test_parse_size),
    cmocka_unit_test(test_addr_complete),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
