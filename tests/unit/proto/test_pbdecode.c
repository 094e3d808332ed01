/*
 * The guard in front of protobuf-c (proto/pbdecode.c): the exact encodings on which
 * protobuf-c 1.4.1 has undefined behaviour are refused before it sees them, at the top level
 * and inside a nested message, and the encodings next to them still decode to exact values.
 *
 * Built with RGPU_SANITIZE=undefined and RGPU_PROTOBUF_C_SOURCE (protobuf-c compiled with the
 * sanitizers) and the guard removed, test_shift_ub aborts in protobuf-c (GCC and clang), and so
 * does test_empty_packed_ub under clang (GCC does not check NULL + 0): docs/upstream-protobuf-c.md
 * has the reports. With Debian's uninstrumented library nothing inside it is checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"

#define UNPACK(fn, bytes) RGPU_PB_UNPACK(fn, sizeof(bytes), bytes)
#define CHECK(fn, bytes) rgpu_pb_check(&fn##__descriptor, bytes, sizeof(bytes))

/*
 * A 5-byte field key whose last byte is 0x7f: protobuf-c's parse_tag_and_wiretype computes
 * 0x7f << 25 in int. With 0x0f, the largest field number protobuf allows (2^29 - 1): kept as an
 * unknown field. With 0x10 (2^29): refused, though protobuf-c would take it without harm.
 */
static void test_shift_ub(void **state)
{
	static const uint8_t ub[] = {0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00};
	static const uint8_t ub_cont[] = {0xf8, 0xff, 0xff, 0xff, 0xc0, 0x00}; /* no end in 5 */
	static const uint8_t max[] = {0xf8, 0xff, 0xff, 0xff, 0x0f, 0x2a};
	static const uint8_t over[] = {0xf8, 0xff, 0xff, 0xff, 0x10, 0x2a};
	Rgpu__Occupancy *m;

	(void)state;
	assert_int_equal(CHECK(rgpu__occupancy, ub), RGPU_EPROTO);
	assert_null(UNPACK(rgpu__occupancy, ub));
	assert_int_equal(CHECK(rgpu__occupancy, ub_cont), RGPU_EPROTO);
	assert_null(UNPACK(rgpu__occupancy, ub_cont));
	assert_int_equal(CHECK(rgpu__occupancy, over), RGPU_EPROTO);

	m = UNPACK(rgpu__occupancy, max);
	assert_non_null(m);
	assert_int_equal(m->base.n_unknown_fields, 1);
	assert_int_equal(m->base.unknown_fields[0].tag, (1u << 29) - 1);
	assert_int_equal(m->base.unknown_fields[0].wire_type, PROTOBUF_C_WIRE_TYPE_VARINT);
	assert_int_equal(m->base.unknown_fields[0].len, 1);
	assert_int_equal(m->base.unknown_fields[0].data[0], 0x2a);
	rgpu__occupancy__free_unpacked(m, NULL);
}

/*
 * Occupancy.block_size (field 4, repeated uint32) as a packed field of length 0, with no
 * element before it: protobuf-c's parse_packed_repeated_member computes NULL + 0. Inside a
 * nested message (ModuleLoadReply.functions[0].param_offset) the same. Two packed elements
 * decode to exactly those.
 */
static void test_empty_packed_ub(void **state)
{
	static const uint8_t ub[] = {0x22, 0x00};
	static const uint8_t ub_nested[] = {0x22, 0x02, 0x12, 0x00};
	static const uint8_t two[] = {0x22, 0x03, 0x05, 0x86, 0x01};
	static const uint8_t nested[] = {0x22, 0x04, 0x12, 0x02, 0x08, 0x10};
	Rgpu__ModuleLoadReply *r;
	Rgpu__Occupancy *m;

	(void)state;
	assert_int_equal(CHECK(rgpu__occupancy, ub), RGPU_EPROTO);
	assert_null(UNPACK(rgpu__occupancy, ub));
	assert_int_equal(CHECK(rgpu__module_load_reply, ub_nested), RGPU_EPROTO);
	assert_null(UNPACK(rgpu__module_load_reply, ub_nested));

	m = UNPACK(rgpu__occupancy, two);
	assert_non_null(m);
	assert_int_equal(m->n_block_size, 2);
	assert_int_equal(m->block_size[0], 5);
	assert_int_equal(m->block_size[1], 134);
	rgpu__occupancy__free_unpacked(m, NULL);

	r = UNPACK(rgpu__module_load_reply, nested);
	assert_non_null(r);
	assert_int_equal(r->n_functions, 1);
	assert_int_equal(r->functions[0]->n_param_offset, 2);
	assert_int_equal(r->functions[0]->param_offset[0], 8);
	assert_int_equal(r->functions[0]->param_offset[1], 16);
	rgpu__module_load_reply__free_unpacked(r, NULL);
}

/* What the walk refuses on its own: truncations, a varint over 10 bytes, groups, field 0. */
static void test_walk_refuses(void **state)
{
	static const uint8_t trunc_len[] = {0x22, 0x03, 0x05};
	static const uint8_t trunc_fixed[] = {0x09, 1, 2, 3, 4, 5, 6, 7}; /* field 1, 64-bit */
	static const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
					      0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	static const uint8_t group[] = {0x0b, 0x0c};
	static const uint8_t field0[] = {0x00, 0x01};
	static const uint8_t fixed[] = {0x09, 1, 2, 3, 4, 5, 6, 7, 8}; /* unknown, 64-bit: kept */

	(void)state;
	assert_int_equal(CHECK(rgpu__occupancy, trunc_len), RGPU_EPROTO);
	assert_int_equal(CHECK(rgpu__occupancy, trunc_fixed), RGPU_EPROTO);
	assert_int_equal(CHECK(rgpu__occupancy, long_varint), RGPU_EPROTO);
	assert_int_equal(CHECK(rgpu__occupancy, group), RGPU_EPROTO);
	assert_int_equal(CHECK(rgpu__occupancy, field0), RGPU_EPROTO);
	assert_int_equal(CHECK(rgpu__func_info, fixed), 0);
	assert_int_equal(rgpu_pb_check(&rgpu__occupancy__descriptor, NULL, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shift_ub),
	    cmocka_unit_test(test_empty_packed_ub),
	    cmocka_unit_test(test_walk_refuses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
