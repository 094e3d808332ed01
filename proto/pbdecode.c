/*
 * The guard in front of protobuf-c's decoder. Every message body a peer sends reaches
 * protobuf_c_message_unpack, and protobuf-c 1.4.1 (Debian's; 1.5.2 too) has undefined behaviour
 * on two encodings any peer can send (docs/upstream-protobuf-c.md has the report):
 *   - a field key of 5 bytes whose last byte is 0x40 or more: parse_tag_and_wiretype shifts it
 *     left by 25 as an int, which overflows;
 *   - a packed repeated field of length 0 while no element of that field came before:
 *     parse_packed_repeated_member computes NULL + 0 as the start of its array.
 * rgpu_pb_check walks the wire format first, as protobuf-c will (nested messages through the
 * descriptors), and refuses both, with the few other things protobuf-c would refuse anyway. It
 * owns no memory and never decodes a value; it must never accept what it has not walked.
 */
#include "rgpu/pbdecode.h"

#include "rgpu/err.h"

/* The varint at p (at most 10 bytes, within n): its length, or 0. */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
{
	size_t i;

	*v = 0;
	for (i = 0; i < n && i < 10; i++) {
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

/* Scalars, which protobuf-c accepts packed in a length-delimited field when repeated. */
static int packable(ProtobufCType t)
{
	return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
	       t != PROTOBUF_C_TYPE_MESSAGE;
}

/* Recursion follows the schema's nesting, which is finite: no message type contains itself. */
static int check(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n)
{
	while (n) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, len;
		size_t k = varint(p, n, &key), h;
		int ret;

		if (!k || k > 5 || (key >> 3) == 0 || (key >> 3) > RGPU_PB_MAX_FIELD)
			return RGPU_EPROTO;
		p += k;
		n -= k;
		f = protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
		switch (key & 7) {
		case PROTOBUF_C_WIRE_TYPE_VARINT:
			k = varint(p, n, &len);
			if (!k)
				return RGPU_EPROTO;
			break;
		case PROTOBUF_C_WIRE_TYPE_64BIT:
		case PROTOBUF_C_WIRE_TYPE_32BIT:
			k = (key & 7) == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
			if (n < k)
				return RGPU_EPROTO;
			break;
		case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
			h = varint(p, n, &len);
			if (!h || len > n - h)
				return RGPU_EPROTO;
			if (f && f->label == PROTOBUF_C_LABEL_REPEATED && packable(f->type) && !len)
				return RGPU_EPROTO;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				ret = check(f->descriptor, p + h, len);
				if (ret)
					return ret;
			}
			k = h + len;
			break;
		default: /* groups (3, 4) and 6, 7: protobuf-c refuses them too */
			return RGPU_EPROTO;
		}
		p += k;
		n -= k;
	}
	return 0;
}

int rgpu_pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len)
{
	return check(desc, data, len);
}

ProtobufCMessage *rgpu_pb_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
				 const uint8_t *data)
{
	if (rgpu_pb_check(desc, data, len))
		return NULL;
	return protobuf_c_message_unpack(desc, NULL, len, data);
}
