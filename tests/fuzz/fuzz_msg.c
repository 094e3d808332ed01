/*
 * Fuzzing the message decoder: rgpu_pb_unpack (proto/pbdecode.c), the one way rgpu decodes a
 * protobuf body a peer or a file gives it, over every message of rgpu.proto, admin.proto and
 * statetrack.proto: the job protocol's requests and replies (server and interposer), the
 * admin protocol's (supervisor and rgpuctl), the worker's control messages and state-log
 * records. The table comes from the generated headers (gen_descriptors.py), so a new message
 * is fuzzed from the build that adds it.
 *
 * Input: byte 0 picks the message (modulo the table's size); the rest is its body.
 *
 * Checked beyond the sanitizers: a message the guard lets through is one protobuf-c says is
 * complete (protobuf_c_message_check), and rgpu's own encoding of it is accepted again by the
 * guard and encodes to the same bytes: what a receiver accepts, it can send on.
 */
#include <string.h>

#include "fuzz.h"
#include "rgpu/pbdecode.h"

extern const ProtobufCMessageDescriptor *const fuzz_descriptors[];
extern const size_t fuzz_ndescriptors;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *m, *again;
	uint8_t *b1, *b2;
	size_t n1, n2;

	if (size < 1)
		return 0;
	desc = fuzz_descriptors[data[0] % fuzz_ndescriptors];
	m = rgpu_pb_unpack(desc, size - 1, data + 1);
	if (!m)
		return 0;
	FUZZ_CHECK(m->descriptor == desc);
	FUZZ_CHECK(protobuf_c_message_check(m));

	n1 = protobuf_c_message_get_packed_size(m);
	b1 = malloc(n1 ? n1 : 1);
	FUZZ_CHECK(b1);
	FUZZ_CHECK(protobuf_c_message_pack(m, b1) == n1);
	FUZZ_CHECK(rgpu_pb_check(desc, b1, n1) == 0);
	again = rgpu_pb_unpack(desc, n1, b1);
	FUZZ_CHECK(again);
	n2 = protobuf_c_message_get_packed_size(again);
	FUZZ_CHECK(n2 == n1);
	b2 = malloc(n2 ? n2 : 1);
	FUZZ_CHECK(b2);
	FUZZ_CHECK(protobuf_c_message_pack(again, b2) == n2);
	FUZZ_CHECK(memcmp(b1, b2, n1) == 0);

	free(b2);
	free(b1);
	protobuf_c_message_free_unpacked(again, NULL);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
