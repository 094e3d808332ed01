/*
 * util's checked range arithmetic (rgpu_range_end, rgpu_range_in): the ends of tables and of
 * pitched ranges that peers and files name, which must never wrap around 2^64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "rgpu/util.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_range_end),
	    cmocka_unit_test(test_range_in),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
