/*
 * Frame headers: encoding, decoding and the per-type limits every receiver enforces before it
 * allocates anything. This file owns the table of message types; proto/rgpu.proto owns their
 * numbers.
 */
#include <stdlib.h>
#include <string.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/util.h"

#define M(x) RGPU__MSG_TYPE__MSG_##x

enum {
	TO_SERVER = 1, /* client -> server requests (and the server's replies to them) */
	TO_CLIENT = 2, /* pushed by the server */
	BOTH = 3,
};

struct msg_rule {
	const char *name;
	uint8_t dir;          /* who may send it as a request */
	uint8_t empty;        /* the body must be empty (else it must not be) */
	uint64_t max_payload; /* request payload limit */
	uint64_t max_reply_payload;
};

static const struct msg_rule rules[] = {
	[M(HELLO)] = {"MSG_HELLO", TO_SERVER, 0, 0, 0},
	[M(ERROR)] = {"MSG_ERROR", BOTH, 0, 0, 0},
	[M(GOODBYE)] = {"MSG_GOODBYE", TO_SERVER, 1, 0, 0},
	[M(PING)] = {"MSG_PING", TO_SERVER, 1, 0, 0},
	[M(ACK)] = {"MSG_ACK", BOTH, 1, 0, 0},
	[M(CTX_CREATE)] = {"MSG_CTX_CREATE", TO_SERVER, 0, 0, 0},
	[M(CTX_DESTROY)] = {"MSG_CTX_DESTROY", TO_SERVER, 0, 0, 0},
	[M(CTX_SYNC)] = {"MSG_CTX_SYNC", TO_SERVER, 0, 0, 0},
	[M(CTX_SET_LIMIT)] = {"MSG_CTX_SET_LIMIT", TO_SERVER, 0, 0, 0},
	[M(CTX_GET_LIMIT)] = {"MSG_CTX_GET_LIMIT", TO_SERVER, 0, 0, 0},
	[M(MEM_ALLOC)] = {"MSG_MEM_ALLOC", TO_SERVER, 0, 0, 0},
	[M(MEM_FREE)] = {"MSG_MEM_FREE", TO_SERVER, 0, 0, 0},
	[M(MEM_INFO)] = {"MSG_MEM_INFO", TO_SERVER, 0, 0, 0},
	[M(MEMCPY_HTOD)] = {"MSG_MEMCPY_HTOD", TO_SERVER, 0, RGPU_MAX_CHUNK, 0},
	[M(MEMCPY_DTOH)] = {"MSG_MEMCPY_DTOH", TO_SERVER, 0, 0, 0},
	[M(MEMCPY_DTOD)] = {"MSG_MEMCPY_DTOD", TO_SERVER, 0, 0, 0},
	[M(MEMSET)] = {"MSG_MEMSET", TO_SERVER, 0, 0, 0},
	[M(DATA)] = {"MSG_DATA", TO_CLIENT, 0, RGPU_MAX_CHUNK, 0},
	[M(MODULE_LOAD)] = {"MSG_MODULE_LOAD", TO_SERVER, 0, RGPU_MAX_IMAGE, 0},
	[M(MODULE_UNLOAD)] = {"MSG_MODULE_UNLOAD", TO_SERVER, 0, 0, 0},
	[M(FUNC_GET)] = {"MSG_FUNC_GET", TO_SERVER, 0, 0, 0},
	[M(GLOBAL_GET)] = {"MSG_GLOBAL_GET", TO_SERVER, 0, 0, 0},
	[M(FUNC_GET_ATTR)] = {"MSG_FUNC_GET_ATTR", TO_SERVER, 0, 0, 0},
	[M(FUNC_SET_ATTR)] = {"MSG_FUNC_SET_ATTR", TO_SERVER, 0, 0, 0},
	[M(LAUNCH)] = {"MSG_LAUNCH", TO_SERVER, 0, RGPU_MAX_PARAMS, 0},
	[M(HOST_FUNC)] = {"MSG_HOST_FUNC", TO_SERVER, 0, 0, 0},
	[M(CALLBACK)] = {"MSG_CALLBACK", TO_CLIENT, 0, 0, 0},
	[M(CALLBACK_DONE)] = {"MSG_CALLBACK_DONE", TO_SERVER, 0, 0, 0},
	[M(STREAM_CREATE)] = {"MSG_STREAM_CREATE", TO_SERVER, 0, 0, 0},
	[M(STREAM_DESTROY)] = {"MSG_STREAM_DESTROY", TO_SERVER, 0, 0, 0},
	[M(STREAM_SYNC)] = {"MSG_STREAM_SYNC", TO_SERVER, 0, 0, 0},
	[M(STREAM_QUERY)] = {"MSG_STREAM_QUERY", TO_SERVER, 0, 0, 0},
	[M(STREAM_WAIT_EVENT)] = {"MSG_STREAM_WAIT_EVENT", TO_SERVER, 0, 0, 0},
	[M(EVENT_CREATE)] = {"MSG_EVENT_CREATE", TO_SERVER, 0, 0, 0},
	[M(EVENT_DESTROY)] = {"MSG_EVENT_DESTROY", TO_SERVER, 0, 0, 0},
	[M(EVENT_RECORD)] = {"MSG_EVENT_RECORD", TO_SERVER, 0, 0, 0},
	[M(EVENT_SYNC)] = {"MSG_EVENT_SYNC", TO_SERVER, 0, 0, 0},
	[M(EVENT_QUERY)] = {"MSG_EVENT_QUERY", TO_SERVER, 0, 0, 0},
	[M(EVENT_ELAPSED)] = {"MSG_EVENT_ELAPSED", TO_SERVER, 0, 0, 0},
	[M(CAPTURE_BEGIN)] = {"MSG_CAPTURE_BEGIN", TO_SERVER, 0, 0, 0},
	[M(CAPTURE_END)] = {"MSG_CAPTURE_END", TO_SERVER, 0, 0, 0},
	[M(GRAPH_CREATE)] = {"MSG_GRAPH_CREATE", TO_SERVER, 0, 0, 0},
	[M(GRAPH_INSTANTIATE)] = {"MSG_GRAPH_INSTANTIATE", TO_SERVER, 0, 0, 0},
	[M(GRAPH_LAUNCH)] = {"MSG_GRAPH_LAUNCH", TO_SERVER, 0, 0, 0},
	[M(GRAPH_UPLOAD)] = {"MSG_GRAPH_UPLOAD", TO_SERVER, 0, 0, 0},
	[M(GRAPH_EXEC_DESTROY)] = {"MSG_GRAPH_EXEC_DESTROY", TO_SERVER, 0, 0, 0},
	[M(GRAPH_DESTROY)] = {"MSG_GRAPH_DESTROY", TO_SERVER, 0, 0, 0},
	[M(GRAPH_NODE_COUNT)] = {"MSG_GRAPH_NODE_COUNT", TO_SERVER, 0, 0, 0},
	[M(OCCUPANCY)] = {"MSG_OCCUPANCY", TO_SERVER, 0, 0, 0},
	[M(ADMIN_STATUS)] = {"MSG_ADMIN_STATUS", TO_SERVER, 0, 0, 0},
	[M(ADMIN_JOBS)] = {"MSG_ADMIN_JOBS", TO_SERVER, 0, 0, 0},
};

const char *rgpu_msg_name(unsigned type)
{
	if (type < ARRAY_SIZE(rules) && rules[type].name)
		return rules[type].name;
	return "MSG_?";
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

int rgpu_frame_check(const struct rgpu_frame_hdr *h, enum rgpu_peer receiver)
{
	const struct msg_rule *r;
	int reply = !!(h->flags & RGPU_FRAME_REPLY);
	uint64_t max_payload;

	if (h->type >= ARRAY_SIZE(rules) || !rules[h->type].name)
		return RGPU_EUNKNOWNTYPE;
	r = &rules[h->type];
	if (h->flags & ~RGPU_FRAME_FLAGS_KNOWN)
		return RGPU_EPROTO;
	if (h->body_len > RGPU_MAX_BODY)
		return RGPU_ETOOBIG;
	if (reply) {
		/* replies go back to the side that may send the request */
		if (!(r->dir & TO_SERVER) || receiver != RGPU_PEER_CLIENT)
			return RGPU_EPROTO;
		max_payload = r->max_reply_payload;
	} else {
		int want = receiver == RGPU_PEER_SERVER ? TO_SERVER : TO_CLIENT;
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
