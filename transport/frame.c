/*
 * Frame headers: encoding, decoding and the checks every receiver makes before it allocates
 * anything. The rules per message type are not kept here: each protocol brings its own table
 * (struct rgpu_msg_table, generated from a table file in proto/), so this file never names a
 * message.
 */
#include <stdlib.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/util.h"

static const struct rgpu_msg_rule *rule_of(const struct rgpu_msg_table *msgs, unsigned type)
{
	if (!msgs || type >= msgs->n || !msgs->rules[type].name)
		return NULL;
	return &msgs->rules[type];
}

const char *rgpu_msg_table_name(const struct rgpu_msg_table *msgs, unsigned type)
{
	const struct rgpu_msg_rule *r = rule_of(msgs, type);
	return r ? r->name : "MSG_?";
}

void rgpu_frame_hdr_encode(const struct rgpu_frame_hdr *h, uint8_t out[RGPU_FRAME_HDR_LEN])
{
	wr_le32(out + 0, h->magic);
	wr_le16(out + 4, h->version);
	wr_le16(out + 6, h->type);
	wr_le32(out + 8, h->flags);
	wr_le32(out + 12, h->body_len);
	wr_le64(out + 16, h->payload_len);
	wr_le64(out + 24, h->seq);
	wr_le64(out + 32, h->session);
	wr_le64(out + 40, h->ack);
	wr_le64(out + 48, h->ref);
}

int rgpu_frame_hdr_decode(const uint8_t in[RGPU_FRAME_HDR_LEN], struct rgpu_frame_hdr *h)
{
	h->magic = rd_le32(in + 0);
	h->version = rd_le16(in + 4);
	h->type = rd_le16(in + 6);
	h->flags = rd_le32(in + 8);
	h->body_len = rd_le32(in + 12);
	h->payload_len = rd_le64(in + 16);
	h->seq = rd_le64(in + 24);
	h->session = rd_le64(in + 32);
	h->ack = rd_le64(in + 40);
	h->ref = rd_le64(in + 48);
	if (h->magic != RGPU_FRAME_MAGIC)
		return RGPU_EMAGIC;
	if (h->version != RGPU_PROTO_VERSION)
		return RGPU_EVERSION;
	return 0;
}

int rgpu_frame_check(const struct rgpu_frame_hdr *h, enum rgpu_peer receiver,
		     const struct rgpu_msg_table *msgs)
{
	const struct rgpu_msg_rule *r = rule_of(msgs, h->type);
	int reply = !!(h->flags & RGPU_FRAME_REPLY);
	uint64_t max_payload;

	if (!r)
		return RGPU_EUNKNOWNTYPE;
	if (h->flags & ~RGPU_FRAME_FLAGS_KNOWN)
		return RGPU_EPROTO;
	if (h->body_len > RGPU_MAX_BODY)
		return RGPU_ETOOBIG;
	if (reply) {
		/* replies go back to the side that may send the request */
		if (!(r->dir & RGPU_DIR_TO_SERVER) || receiver != RGPU_PEER_CLIENT)
			return RGPU_EPROTO;
		max_payload = r->max_reply_payload;
	} else {
		int want = receiver == RGPU_PEER_SERVER ? RGPU_DIR_TO_SERVER : RGPU_DIR_TO_CLIENT;
		if (!(r->dir & want))
			return RGPU_EPROTO;
		/*
		 * Every client request names at least one object or address (ids start at 1), so an
		 * empty body is malformed; pushes from the server may legitimately be all zeros.
		 */
		if (r->empty ? h->body_len != 0
			     : h->body_len == 0 && receiver == RGPU_PEER_SERVER)
			return RGPU_EPROTO;
		max_payload = r->max_payload;
	}
	if (h->payload_len > max_payload)
		return RGPU_ETOOBIG;
	return 0;
}

size_t rgpu_frame_size(const ProtobufCMessage *body)
{
	return RGPU_FRAME_HDR_LEN + (body ? protobuf_c_message_get_packed_size(body) : 0);
}

size_t rgpu_frame_pack_hdr(uint8_t *buf, const struct rgpu_frame_hdr *hin,
			   const ProtobufCMessage *body)
{
	struct rgpu_frame_hdr h = *hin;
	size_t blen = body ? protobuf_c_message_pack(body, buf + RGPU_FRAME_HDR_LEN) : 0;

	h.magic = RGPU_FRAME_MAGIC;
	h.version = RGPU_PROTO_VERSION;
	h.body_len = (uint32_t)blen;
	rgpu_frame_hdr_encode(&h, buf);
	return RGPU_FRAME_HDR_LEN + blen;
}

size_t rgpu_frame_pack(uint8_t *buf, uint16_t type, uint32_t flags, uint64_t seq,
		       uint64_t session, const ProtobufCMessage *body, uint64_t payload_len)
{
	struct rgpu_frame_hdr h = {
		.type = type,
		.flags = flags,
		.payload_len = payload_len,
		.seq = seq,
		.session = session,
	};
	return rgpu_frame_pack_hdr(buf, &h, body);
}
