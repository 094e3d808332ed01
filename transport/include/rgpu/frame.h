/*
 * Frames: the unit of the rgpu protocol on every transport.
 *
 *   offset size field
 *        0    4 magic        0x55504752 ("RGPU" in memory order)
 *        4    2 version      RGPU_PROTO_VERSION
 *        6    2 type         the protocol's message type (proto/messages.tbl: enum rgpu_msg)
 *        8    4 flags        RGPU_FRAME_REPLY, ...
 *       12    4 body_len     protobuf-c body bytes that follow the header
 *       16    8 payload_len  raw bytes that follow the body
 *       24    8 seq          sender's sequence number: +1 for every frame of a job in each
 *                            direction, across reconnects (0: an unsequenced ACK frame)
 *       32    8 session      session id given in the handshake (0 before it)
 *       40    8 ack          the highest peer seq the sender has processed (a worker: executed;
 *                            a client: received); lets the peer drop frames it kept for resending
 *       48    8 ref          a reply or pushed data: the seq of the request it answers; else 0
 *
 * All fields little-endian. Every length is checked against its limit (per message type)
 * before anything is allocated; see rgpu_frame_check().
 *
 * The transport knows no protocol of its own: the types, their directions and limits come in
 * a struct rgpu_msg_table that proto/gen_msgs.py generates from a protocol's table file
 * (rgpu_job_msgs, from proto/messages.tbl, for the client<->worker protocol).
 */
#ifndef RGPU_FRAME_H
#define RGPU_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define RGPU_FRAME_MAGIC 0x55504752u
#define RGPU_PROTO_VERSION 2
#define RGPU_FRAME_HDR_LEN 56

#define RGPU_FRAME_REPLY 0x1u /* this frame answers request `seq` */
/*
 * shared-memory links only (transport/shm.c): the payload_len bytes lie in memory both ends
 * map, and the stream carries a reference to them instead; set and read by the transport
 */
#define RGPU_FRAME_BYREF 0x2u
/* TCP links with lanes only (transport/lanes.c): the payload is striped over the link's lanes */
#define RGPU_FRAME_LANES 0x4u
#define RGPU_FRAME_FLAGS_KNOWN (RGPU_FRAME_REPLY | RGPU_FRAME_BYREF | RGPU_FRAME_LANES)

#define RGPU_MAX_BODY (16u << 20)          /* protobuf body */
#define RGPU_MAX_CHUNK (16ull << 20)       /* payload of one copy chunk */
#define RGPU_MAX_IMAGE (1ull << 30)        /* payload of a module image */
#define RGPU_MAX_PARAMS (1ull << 20)       /* packed kernel parameters or `extra` buffer */
#define RGPU_MAX_DIGEST 32ull              /* a state-log digest (RGPU_VERIFY_LOG) */
#define RGPU_MAX_OUTPUT (64ull << 10)      /* one MSG_OUTPUT: device printf or assert bytes */
#define RGPU_COPY_CHUNK (4ull << 20)       /* chunk size senders use for bulk copies */
#define RGPU_MAX_HOST_WRITE (64ull << 10)  /* MSG_HOST_WRITE/UPDATE: one region at most */
#define RGPU_MAX_REPLY_DATA (64ull << 10) /* a synchronous device-to-host copy's bytes in its
					      reply (capability SHM) */
#define RGPU_MAX_MANIFEST (256ull << 20)   /* a checkpoint's chunk list (8M chunks: 16 TiB) */

/* Who receives a frame: used to refuse frames that only the other side may send. */
enum rgpu_peer {
	RGPU_PEER_SERVER = 1,
	RGPU_PEER_CLIENT = 2,
};

struct rgpu_frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t body_len;
	uint64_t payload_len;
	uint64_t seq;
	uint64_t session;
	uint64_t ack;
	uint64_t ref;
};

void rgpu_frame_hdr_encode(const struct rgpu_frame_hdr *h, uint8_t out[RGPU_FRAME_HDR_LEN]);

/*
 * rgpu_frame_hdr_decode() - parse a raw header.
 * Returns 0, RGPU_EMAGIC (not an rgpu frame) or RGPU_EVERSION (other protocol version; *h is
 * still filled so the caller can name the version it saw).
 */
int rgpu_frame_hdr_decode(const uint8_t in[RGPU_FRAME_HDR_LEN], struct rgpu_frame_hdr *h);

/* Who may send a message type as a request (a reply always goes back to the client). */
enum rgpu_msg_dir {
	RGPU_DIR_TO_SERVER = 1, /* client -> server requests (and the server's replies to them) */
	RGPU_DIR_TO_CLIENT = 2, /* pushed by the server */
	RGPU_DIR_BOTH = 3,
};

/* The receiver's rules for one message type. */
struct rgpu_msg_rule {
	const char *name;           /* "MSG_LAUNCH"; NULL: no type has this number */
	uint8_t dir;                /* enum rgpu_msg_dir */
	uint8_t empty;              /* the body must be empty (else a request to the server must
				       not be) */
	uint64_t max_payload;       /* request payload limit */
	uint64_t max_reply_payload; /* reply payload limit */
};

/* One protocol's message types: rules[type] for type < n (generated, never written by hand). */
struct rgpu_msg_table {
	const struct rgpu_msg_rule *rules;
	unsigned n;
};

/*
 * rgpu_frame_check() - may `receiver` accept this frame under the protocol `msgs`? Checks the
 * type is known and sent in this direction, the flags, and every length against the type's
 * limits.
 * Returns 0, RGPU_EUNKNOWNTYPE (also for every type when msgs is NULL), RGPU_EPROTO (wrong
 * direction, flags, or an empty body where one is required) or RGPU_ETOOBIG.
 */
int rgpu_frame_check(const struct rgpu_frame_hdr *h, enum rgpu_peer receiver,
		     const struct rgpu_msg_table *msgs);

/*
 * rgpu_msg_table_name() - the type's name in msgs for logs ("MSG_LAUNCH"), or "MSG_?" (unknown
 * type, or msgs NULL). The generated rgpu_msg_name(type) asks the client<->worker table.
 */
const char *rgpu_msg_table_name(const struct rgpu_msg_table *msgs, unsigned type);

/*
 * rgpu_frame_pack() - encode header and body into buf (at least rgpu_frame_size(body) bytes).
 * body may be NULL for an empty body. The payload, payload_len bytes, is the caller's to send
 * right after. Returns the bytes written.
 */
size_t rgpu_frame_size(const ProtobufCMessage *body);
size_t rgpu_frame_pack(uint8_t *buf, uint16_t type, uint32_t flags, uint64_t seq,
		       uint64_t session, const ProtobufCMessage *body, uint64_t payload_len);
/*
 * rgpu_frame_pack_hdr() - the same from a header: type, flags, seq, session, ack, ref and
 * payload_len are taken from h (magic, version and body_len are filled in).
 */
size_t rgpu_frame_pack_hdr(uint8_t *buf, const struct rgpu_frame_hdr *h,
			   const ProtobufCMessage *body);

#endif
