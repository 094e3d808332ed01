/*
 * Fuzzing the frame decoder: a byte stream received as rgpud's worker, the interposer,
 * rgpud's supervisor or rgpuctl receive it (transport/conn.c rgpu_frame_recv, frame.c
 * rgpu_frame_hdr_decode and rgpu_frame_check against the generated message tables), each
 * accepted frame's body decoded with its type's message (rgpu_pb_unpack) and its payload
 * read past with rgpu_conn_discard, until the stream refuses or ends.
 *
 * Input: byte 0 picks the receiver (bits 0-1: job server, job client, admin server, admin
 * client) and how many bytes the transport hands over per read (bits 2-4), so partial reads
 * at every boundary are covered; the rest is the stream. The transport is a memory one
 * defined here (transport/conn_priv.h's ops), so the harness runs without system calls.
 *
 * Checked beyond the sanitizers: a frame accepted is what its bytes say (the header encodes
 * back to the same 56 bytes, the body is the bytes that follow it), obeys its type's limits,
 * and a refusal is one of the codes rgpu_frame_recv documents: RGPU_ECLOSED exactly when the
 * stream ended between frames, RGPU_ETRUNC exactly when it ended inside one.
 */
#include <string.h>

#include "conn_priv.h"
#include "fuzz.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/msgdef.h"
#include "rgpu/pbdecode.h"
#include "rgpu/transport.h"
#include "rgpu_admin_msgs.h"
#include "rgpu_msgs.h"

struct mem_conn {
	struct rgpu_conn c; /* first: the ops get &c */
	const uint8_t *p;
	size_t n, pos, step;
};

static long mem_recv_some(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms)
{
	struct mem_conn *m = (struct mem_conn *)c;
	size_t k = m->n - m->pos;

	(void)timeout_ms;
	if (!k)
		return RGPU_ECLOSED;
	if (k > cap)
		k = cap;
	if (k > m->step)
		k = m->step;
	memcpy(buf, m->p + m->pos, k);
	m->pos += k;
	return (long)k;
}

static int mem_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	return RGPU_ECLOSED;
}

static int mem_hung_up(struct rgpu_conn *c)
{
	return 1;
}

static void mem_shutdown(struct rgpu_conn *c)
{
}

static void mem_close(struct rgpu_conn *c)
{
	/* the one connection is static: its 64 KiB read buffer is not allocated per run */
}

static const struct rgpu_transport_ops mem_ops = {
	.name = "fuzz",
	.sendv = mem_sendv,
	.recv_some = mem_recv_some,
	.hung_up = mem_hung_up,
	.shutdown = mem_shutdown,
	.close = mem_close,
};

static const size_t steps[8] = {SIZE_MAX, 1, 3, 55, 56, 57, 4096, 65536};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct rgpu_msg_table *msgs;
	const struct rgpu_msg_info *(*info_of)(unsigned);
	enum rgpu_peer receiver;
	static struct mem_conn conn;
	struct mem_conn *m = &conn;
	uint64_t off = 0;
	int ret;

	if (size < 1)
		return 0;
	msgs = data[0] & 2 ? &rgpu_admin_msgs : &rgpu_job_msgs;
	info_of = data[0] & 2 ? rgpu_admin_msg_info : rgpu_msg_info;
	receiver = data[0] & 1 ? RGPU_PEER_CLIENT : RGPU_PEER_SERVER;
	memset(m, 0, offsetof(struct rgpu_conn, rbuf));
	m->c.ops = &mem_ops;
	m->c.fd = -1;
	m->c.frame_timeout_ms = RGPU_FRAME_TIMEOUT_MS;
	m->p = data + 1;
	m->n = size - 1;
	m->pos = 0;
	m->step = steps[(data[0] >> 2) & 7];
	rgpu_conn_set_msgs(&m->c, msgs);

	for (;;) {
		const struct rgpu_msg_info *mi;
		const ProtobufCMessageDescriptor *desc;
		struct rgpu_frame_hdr h;
		uint8_t raw[RGPU_FRAME_HDR_LEN];
		uint8_t *body = NULL;

		ret = rgpu_frame_recv(&m->c, receiver, &h, &body);
		if (ret) {
			FUZZ_CHECK(!body);
			break;
		}
		/* a frame is exactly its bytes: header, then body_len bytes of body */
		FUZZ_CHECK(m->n - off >= RGPU_FRAME_HDR_LEN + (uint64_t)h.body_len);
		rgpu_frame_hdr_encode(&h, raw);
		FUZZ_CHECK(memcmp(raw, m->p + off, sizeof(raw)) == 0);
		FUZZ_CHECK(!h.body_len == !body);
		FUZZ_CHECK(!body || !memcmp(body, m->p + off + RGPU_FRAME_HDR_LEN, h.body_len));
		FUZZ_CHECK(rgpu_frame_check(&h, receiver, msgs) == 0);
		FUZZ_CHECK(h.body_len <= RGPU_MAX_BODY);

		/* the body as the receiver decodes it: the request's message or the reply's */
		mi = info_of(h.type);
		FUZZ_CHECK(mi && mi->type == h.type);
		desc = h.flags & RGPU_FRAME_REPLY ? mi->reply : mi->body;
		if (desc && body) {
			ProtobufCMessage *msg = rgpu_pb_unpack(desc, h.body_len, body);
			if (msg) {
				FUZZ_CHECK(msg->descriptor == desc);
				protobuf_c_message_free_unpacked(msg, NULL);
			}
		}
		free(body);
		off += RGPU_FRAME_HDR_LEN + (uint64_t)h.body_len;
		ret = rgpu_conn_discard(&m->c, h.payload_len);
		if (ret) {
			FUZZ_CHECK(ret == RGPU_ETRUNC || (ret == RGPU_ECLOSED && h.payload_len));
			FUZZ_CHECK(m->n - off < h.payload_len);
			ret = 0;
			goto out;
		}
		off += h.payload_len;
	}
	/* how a stream may be refused, and when it may end */
	switch (ret) {
	case RGPU_ECLOSED:
		FUZZ_CHECK(off == m->n);
		break;
	case RGPU_ETRUNC:
		FUZZ_CHECK(off < m->n);
		break;
	case RGPU_EMAGIC:
	case RGPU_EVERSION:
	case RGPU_EUNKNOWNTYPE:
	case RGPU_EPROTO:
	case RGPU_ETOOBIG:
		FUZZ_CHECK(m->n - off >= RGPU_FRAME_HDR_LEN);
		break;
	default:
		fprintf(stderr, "unexpected refusal %d (%s)\n", ret, rgpu_strerror(ret));
		FUZZ_CHECK(0);
	}
out:
	rgpu_conn_close(&m->c);
	return 0;
}
