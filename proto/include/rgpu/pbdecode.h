/*
 * Decoding a protobuf message from bytes a peer sent: the one way rgpu calls
 * protobuf_c_message_unpack on them (pbdecode.c says why it needs a guard).
 */
#ifndef RGPU_PBDECODE_H
#define RGPU_PBDECODE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/*
 * rgpu_pb_check() - does data hold an encoding of a message of type desc that protobuf-c can
 * unpack without undefined behaviour?
 * Walks every field (and every nested message's fields) without decoding a value. Refuses a
 * field number above 2^29 - 1 (the protobuf limit; protobuf-c 1.4.1 computes larger ones with a
 * signed shift that overflows), a packed repeated field of length 0 (protobuf-c 1.4.1 adds 0 to
 * a NULL array), a key longer than 5 bytes or a varint longer than 10, group wire types, and
 * a length or fixed-size value past the end: the last three protobuf-c refuses as well.
 * Return: 0, or RGPU_EPROTO.
 */
int rgpu_pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len);

/*
 * rgpu_pb_unpack() - rgpu_pb_check() then protobuf_c_message_unpack(desc, NULL, len, data).
 * Return: the message (free with protobuf_c_message_free_unpacked), or NULL when either
 * refuses it.
 */
ProtobufCMessage *rgpu_pb_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
				 const uint8_t *data);

/* RGPU_PB_UNPACK(rgpu__hello, len, data): rgpu_pb_unpack() typed as rgpu__hello__unpack(). */
#define RGPU_PB_UNPACK(fn, len, data)                                                         \
	((__typeof__(fn##__unpack(NULL, 0, NULL)))rgpu_pb_unpack(&fn##__descriptor, (len), (data)))

#define RGPU_PB_MAX_FIELD ((1u << 29) - 1) /* the largest field number protobuf allows */

#endif
