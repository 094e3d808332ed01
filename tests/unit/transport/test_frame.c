/*
 * Unit tests of frames and the connection layer (testing.md, tier 1): the 56-byte header of
 * protocol version 2 (seq, session, ack, ref) byte for byte, decode errors, every limit and rule
 * of rgpu_frame_check() for every message type (and every unknown one), then real frames over a
 * socketpair through the TCP transport: a Launch with its payload, the wire bytes, a hundred frames
 * of mixed sizes through the 64 KiB read buffer, truncated and hostile streams, the bounded wait
 * for a frame to begin, discard, and rgpu_strerror().
 *
 * Expected bytes and verdicts are written out here from frame.h's table and rgpu.proto (the
 * type table below), never computed by the code under test. Payloads are patterned per frame
 * and per byte, so a byte lost, duplicated or taken from the wrong frame fails a comparison.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "conn_priv.h" /* white-box: frame_timeout_ms */
#include "rgpu_admin_msgs.h"
#include "rgpu_msgs.h"

/* --- the protocol's message types, from rgpu.proto -------------------------------------------- */

#define TO_SRV 1 /* a request the client sends to the server */
#define TO_CLI 2 /* pushed by the server to the client */
#define EITHER 3

#define MiB (1ull << 20)

struct tspec {
	unsigned type;
	const char *name;
	int dir;
	int empty;	      /* the request body must be empty (else it must not be) */
	uint64_t max_payload; /* of a request */
};

static const struct tspec types[] = {
    {1, "MSG_HELLO", TO_SRV, 0, 0},
    {2, "MSG_ERROR", EITHER, 0, 0},
    {3, "MSG_GOODBYE", TO_SRV, 1, RGPU_MAX_DIGEST},
    {4, "MSG_PING", TO_SRV, 1, 0},
    {5, "MSG_ACK", EITHER, 1, 0},
    {6, "MSG_AUTH_CHALLENGE", TO_CLI, 0, 0},
    {7, "MSG_AUTH", TO_SRV, 0, 0},
    {8, "MSG_REDIRECT", TO_CLI, 0, 0},
    {10, "MSG_CTX_CREATE", TO_SRV, 0, 0},
    {11, "MSG_CTX_DESTROY", TO_SRV, 0, 0},
    {12, "MSG_CTX_SYNC", TO_SRV, 0, RGPU_MAX_DIGEST},
    {13, "MSG_CTX_SET_LIMIT", TO_SRV, 0, 0},
    {14, "MSG_CTX_GET_LIMIT", TO_SRV, 0, 0},
    {20, "MSG_MEM_ALLOC", TO_SRV, 0, 0},
    {21, "MSG_MEM_FREE", TO_SRV, 0, 0},
    {22, "MSG_MEM_INFO", TO_SRV, 0, 0},
    {23, "MSG_MEMCPY_HTOD", TO_SRV, 0, 16 * MiB},
    {24, "MSG_MEMCPY_DTOH", TO_SRV, 0, 0},
    {25, "MSG_MEMCPY_DTOD", TO_SRV, 0, 0},
    {26, "MSG_MEMSET", TO_SRV, 0, 0},
    {27, "MSG_DATA", TO_CLI, 0, 16 * MiB},
    {30, "MSG_MODULE_LOAD", TO_SRV, 0, 1024 * MiB},
    {31, "MSG_MODULE_UNLOAD", TO_SRV, 0, 0},
    {32, "MSG_FUNC_GET", TO_SRV, 0, 0},
    {33, "MSG_GLOBAL_GET", TO_SRV, 0, 0},
    {34, "MSG_FUNC_GET_ATTR", TO_SRV, 0, 0},
    {35, "MSG_FUNC_SET_ATTR", TO_SRV, 0, 0},
    {40, "MSG_LAUNCH", TO_SRV, 0, 1 * MiB},
    {41, "MSG_HOST_FUNC", TO_SRV, 0, 0},
    {42, "MSG_CALLBACK", TO_CLI, 0, 0},
    {43, "MSG_CALLBACK_DONE", TO_SRV, 0, 0},
    {44, "MSG_OUTPUT", TO_CLI, 0, 64 * 1024},
    {50, "MSG_STREAM_CREATE", TO_SRV, 0, 0},
    {51, "MSG_STREAM_DESTROY", TO_SRV, 0, 0},
    {52, "MSG_STREAM_SYNC", TO_SRV, 0, RGPU_MAX_DIGEST},
    {53, "MSG_STREAM_QUERY", TO_SRV, 0, 0},
    {54, "MSG_STREAM_WAIT_EVENT", TO_SRV, 0, 0},
    {60, "MSG_EVENT_CREATE", TO_SRV, 0, 0},
    {61, "MSG_EVENT_DESTROY", TO_SRV, 0, 0},
    {62, "MSG_EVENT_RECORD", TO_SRV, 0, 0},
    {63, "MSG_EVENT_SYNC", TO_SRV, 0, RGPU_MAX_DIGEST},
    {64, "MSG_EVENT_QUERY", TO_SRV, 0, 0},
    {65, "MSG_EVENT_ELAPSED", TO_SRV, 0, 0},
    {70, "MSG_CAPTURE_BEGIN", TO_SRV, 0, 0},
    {71, "MSG_CAPTURE_END", TO_SRV, 0, 0},
    {72, "MSG_GRAPH_CREATE", TO_SRV, 0, 0},
    {73, "MSG_GRAPH_INSTANTIATE", TO_SRV, 0, 0},
    {74, "MSG_GRAPH_LAUNCH", TO_SRV, 0, 0},
    {75, "MSG_GRAPH_UPLOAD", TO_SRV, 0, 0},
    {76, "MSG_GRAPH_EXEC_DESTROY", TO_SRV, 0, 0},
    {77, "MSG_GRAPH_DESTROY", TO_SRV, 0, 0},
    {78, "MSG_GRAPH_NODE_COUNT", TO_SRV, 0, 0},
    {80, "MSG_OCCUPANCY", TO_SRV, 0, 0},
    {90, "MSG_VMM_CREATE", TO_SRV, 0, 0},
    {91, "MSG_VMM_RELEASE", TO_SRV, 0, 0},
    {92, "MSG_VMM_MAP", TO_SRV, 0, 0},
    {93, "MSG_VMM_UNMAP", TO_SRV, 0, 0},
    {94, "MSG_VMM_ACCESS", TO_SRV, 0, 0},
    {100, "MSG_TPC_MAP", TO_SRV, 0, 0},
    {101, "MSG_TENSOR_MAP", TO_SRV, 0, 0},
    {110, "MSG_HOST_MIRROR", TO_SRV, 0, 0},
    {111, "MSG_HOST_WRITE", TO_SRV, 0, 64 * 1024},
    {112, "MSG_HOST_UPDATE", TO_CLI, 0, 64 * 1024},
    {120, "MSG_STREAM_SET_ATTR", TO_SRV, 0, 0},
    {121, "MSG_STREAM_GET_ATTR", TO_SRV, 0, 0},
    {122, "MSG_CTX_SET_CONFIG", TO_SRV, 0, 0},
    {123, "MSG_CTX_GET_CONFIG", TO_SRV, 0, 0},
    {124, "MSG_LINK", TO_SRV, 0, RGPU_MAX_IMAGE},
    {130, "MSG_ARRAY_CREATE", TO_SRV, 0, 0},
    {131, "MSG_MIPMAP_CREATE", TO_SRV, 0, 0},
    {132, "MSG_ARRAY_DESTROY", TO_SRV, 0, 0},
    {133, "MSG_MIPMAP_DESTROY", TO_SRV, 0, 0},
    {134, "MSG_TEXOBJ_CREATE", TO_SRV, 0, 0},
    {135, "MSG_TEXOBJ_DESTROY", TO_SRV, 0, 0},
    {140, "MSG_GRAPH_NODE", TO_SRV, 0, RGPU_MAX_IMAGE},
    {141, "MSG_GRAPH_EDIT", TO_SRV, 0, 0},
    {142, "MSG_GRAPH_CLONE", TO_SRV, 0, 0},
    {143, "MSG_GRAPH_NODES", TO_SRV, 0, 0},
    {144, "MSG_GRAPH_BIND", TO_SRV, 0, 0},
    {145, "MSG_GRAPH_EXEC_UPDATE", TO_SRV, 0, 0},
    {146, "MSG_GRAPH_DOT", TO_SRV, 0, 0},
    {147, "MSG_CAPTURE_INFO", TO_SRV, 0, 0},
    {148, "MSG_CAPTURE_DEPS", TO_SRV, 0, 0},
    {149, "MSG_GRAPH_COND", TO_SRV, 0, 0},
    {150, "MSG_PEER_SEND", TO_SRV, 0, 0},
    {151, "MSG_PEER_RECV", TO_SRV, 0, 0},
    {152, "MSG_PEER_DATA", TO_SRV, 0, RGPU_MAX_CHUNK},
    {160, "MSG_ARENA_RELEASE", TO_SRV, 0, 0},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* The generated names carry the same numbers (they are never renumbered). */
_Static_assert(RGPU_MSG_LAUNCH == 40, "MSG_LAUNCH");
_Static_assert(RGPU_MSG_DATA == 27, "MSG_DATA");
_Static_assert(RGPU_MSG_PING == 4, "MSG_PING");
_Static_assert(RGPU_MSG_GOODBYE == 3, "MSG_GOODBYE");
_Static_assert(RGPU_MSG_MEMCPY_HTOD == 23, "MSG_MEMCPY_HTOD");
_Static_assert(RGPU_MSG_MODULE_LOAD == 30, "MSG_MODULE_LOAD");
_Static_assert(RGPU_MSG_CALLBACK == 42, "MSG_CALLBACK");
_Static_assert(RGPU_MSG_EVENT_ELAPSED == 65, "MSG_EVENT_ELAPSED");
_Static_assert(RGPU_MSG_CAPTURE_BEGIN == 70, "MSG_CAPTURE_BEGIN");
_Static_assert(RGPU_MSG_OCCUPANCY == 80, "MSG_OCCUPANCY");
_Static_assert(RGPU_MSG_ACK == 5, "MSG_ACK");
_Static_assert(RGPU_MSG_AUTH_CHALLENGE == 6, "MSG_AUTH_CHALLENGE");
_Static_assert(RGPU_MSG_AUTH == 7, "MSG_AUTH");
_Static_assert(RGPU_MSG_VMM_CREATE == 90, "MSG_VMM_CREATE");
_Static_assert(RGPU_MSG_ARRAY_CREATE == 130, "MSG_ARRAY_CREATE");
_Static_assert(RGPU_MSG_TEXOBJ_DESTROY == 135, "MSG_TEXOBJ_DESTROY");
_Static_assert(RGPU_MSG_GRAPH_NODE == 140, "MSG_GRAPH_NODE");
_Static_assert(RGPU_MSG_CAPTURE_DEPS == 148, "MSG_CAPTURE_DEPS");
_Static_assert(RGPU_MSG_OUTPUT == 44, "MSG_OUTPUT");
_Static_assert(RGPU_MSG_REDIRECT == 8, "MSG_REDIRECT");
_Static_assert(RGPU_MSG_PEER_DATA == 152, "MSG_PEER_DATA");
_Static_assert(RGPU_MSG_ARENA_RELEASE == 160, "MSG_ARENA_RELEASE");

static const struct tspec *spec_of(unsigned type)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].type == type)
			return &types[i];
	return NULL;
}

/* --- helpers ---------------------------------------------------------------------------------- */

/* Little-endian by hand, for expected bytes. */
static void put_le(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

/* The 56-byte header by hand, from frame.h's table. */
static void hand_hdr_ar(uint8_t out[RGPU_FRAME_HDR_LEN], uint32_t magic, uint16_t version,
			uint16_t type, uint32_t flags, uint32_t body_len, uint64_t payload_len,
			uint64_t seq, uint64_t session, uint64_t ack, uint64_t ref)
{
	put_le(out + 0, magic, 4);
	put_le(out + 4, version, 2);
	put_le(out + 6, type, 2);
	put_le(out + 8, flags, 4);
	put_le(out + 12, body_len, 4);
	put_le(out + 16, payload_len, 8);
	put_le(out + 24, seq, 8);
	put_le(out + 32, session, 8);
	put_le(out + 40, ack, 8);
	put_le(out + 48, ref, 8);
}

/* ... with ack and ref 0, as rgpu_frame_pack and rgpu_frame_send write them */
static void hand_hdr(uint8_t out[RGPU_FRAME_HDR_LEN], uint32_t magic, uint16_t version,
		     uint16_t type, uint32_t flags, uint32_t body_len, uint64_t payload_len,
		     uint64_t seq, uint64_t session)
{
	hand_hdr_ar(out, magic, version, type, flags, body_len, payload_len, seq, session, 0, 0);
}

static int chk(unsigned type, uint32_t flags, uint32_t body_len, uint64_t payload_len,
	       enum rgpu_peer receiver)
{
	struct rgpu_frame_hdr h = {
	    .magic = RGPU_FRAME_MAGIC,
	    .version = RGPU_PROTO_VERSION,
	    .type = (uint16_t)type,
	    .flags = flags,
	    .body_len = body_len,
	    .payload_len = payload_len,
	    .seq = 17,
	    .session = 99,
	    .ack = 0,
	    .ref = 0,
	};
	return rgpu_frame_check(&h, receiver, &rgpu_job_msgs);
}

static int chk_admin_payload(uint16_t type, uint64_t payload)
{
	struct rgpu_frame_hdr h = {.magic = RGPU_FRAME_MAGIC, .version = RGPU_PROTO_VERSION,
				   .type = type, .body_len = 2, .payload_len = payload};
	return rgpu_frame_check(&h, RGPU_PEER_SERVER, &rgpu_admin_msgs);
}

/* The same against the admin protocol's table. */
static int chk_admin(uint16_t type, uint32_t flags, uint32_t body, enum rgpu_peer receiver)
{
	struct rgpu_frame_hdr h = {.magic = RGPU_FRAME_MAGIC, .version = RGPU_PROTO_VERSION,
				   .type = type, .flags = flags, .body_len = body};
	return rgpu_frame_check(&h, receiver, &rgpu_admin_msgs);
}

/* A receiver that may get this type as a request. */
static enum rgpu_peer allowed_rx(const struct tspec *t)
{
	return (t->dir & TO_SRV) ? RGPU_PEER_SERVER : RGPU_PEER_CLIENT;
}

static uint8_t pat(uint32_t frame, uint64_t i)
{
	return (uint8_t)(i * 131u + frame * 29u + (i >> 9) + ((i >> 17) * 7u) + 1u);
}

static void set_rcvtimeo(int fd)
{
	/* a broken reader fails the test with RGPU_ETIMEDOUT instead of hanging it */
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* A connection over fd speaking the client<->worker protocol. */
static struct rgpu_conn *wrap(int fd)
{
	struct rgpu_conn *c = rgpu_tcp_wrap(fd);
	if (c)
		rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	return c;
}

static void conn_pair(struct rgpu_conn **a, struct rgpu_conn **b)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	set_rcvtimeo(sv[0]);
	set_rcvtimeo(sv[1]);
	*a = wrap(sv[0]);
	*b = wrap(sv[1]);
	assert_non_null(*a);
	assert_non_null(*b);
}

/* One raw socket (the test writes bytes by hand) and one connection reading them. */
static void raw_pair(int *raw, struct rgpu_conn **c)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	set_rcvtimeo(sv[1]);
	*raw = sv[0];
	*c = wrap(sv[1]);
	assert_non_null(*c);
}

static void write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		p += w;
		len -= (size_t)w;
	}
}

static void read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = recv(fd, p, len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		assert_true(r > 0);
		p += r;
		len -= (size_t)r;
	}
}

/* Writes bytes then closes the socket, from a thread (the socket buffer may not hold them). */
struct raw_writer {
	int fd;
	const uint8_t *buf;
	size_t len;
	pthread_t th;
};

static void *raw_writer_main(void *arg)
{
	struct raw_writer *rw = arg;
	size_t off = 0;
	while (off < rw->len) {
		ssize_t w = send(rw->fd, rw->buf + off, rw->len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(rw->fd);
	return NULL;
}

static void raw_writer_start(struct raw_writer *rw, int fd, const uint8_t *buf, size_t len)
{
	rw->fd = fd;
	rw->buf = buf;
	rw->len = len;
	assert_int_equal(pthread_create(&rw->th, NULL, raw_writer_main, rw), 0);
}

/* --- the header ------------------------------------------------------------------------------- */

static void test_hdr_layout(void **state)
{
	(void)state;
	const struct rgpu_frame_hdr h = {
	    .magic = RGPU_FRAME_MAGIC,
	    .version = RGPU_PROTO_VERSION,
	    .type = 0xa1b2,
	    .flags = 0xc3d4e5f6u,
	    .body_len = 0x0badcafeu,
	    .payload_len = 0x1122334455667788ull,
	    .seq = 0x99aabbccddeeff10ull,
	    .session = 0x2132435465768798ull,
	    .ack = 0x3a4b5c6d7e8f9012ull,
	    .ref = 0xf1e2d3c4b5a69788ull,
	};
	/* frame.h's table, little-endian, written out */
	const uint8_t want[56] = {
	    0x52, 0x47, 0x50, 0x55,			    /* magic "RGPU" */
	    0x02, 0x00,					    /* version 2 */
	    0xb2, 0xa1,					    /* type */
	    0xf6, 0xe5, 0xd4, 0xc3,			    /* flags */
	    0xfe, 0xca, 0xad, 0x0b,			    /* body_len */
	    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* payload_len */
	    0x10, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, /* seq */
	    0x98, 0x87, 0x76, 0x65, 0x54, 0x43, 0x32, 0x21, /* session */
	    0x12, 0x90, 0x8f, 0x7e, 0x6d, 0x5c, 0x4b, 0x3a, /* ack */
	    0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1, /* ref */
	};
	uint8_t out[64];
	assert_int_equal(RGPU_FRAME_HDR_LEN, 56);
	assert_int_equal(RGPU_PROTO_VERSION, 2);
	memset(out, 0xee, sizeof(out));
	rgpu_frame_hdr_encode(&h, out);
	assert_memory_equal(out, want, 56);
	for (int i = 56; i < 64; i++)
		assert_int_equal(out[i], 0xee); /* exactly 56 bytes written */
	assert_memory_equal(out, "RGPU", 4);
	/* ack and ref, by their offsets: 8 bytes each at 40 and 48, after session at 32 */
	const uint8_t ack_le[8] = {0x12, 0x90, 0x8f, 0x7e, 0x6d, 0x5c, 0x4b, 0x3a};
	const uint8_t ref_le[8] = {0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2, 0xf1};
	assert_memory_equal(out + 40, ack_le, 8);
	assert_memory_equal(out + 48, ref_le, 8);
	/* one field at a time: only its own 8 bytes change */
	for (int f = 0; f < 2; f++) {
		struct rgpu_frame_hdr z = h;
		uint8_t o2[56];
		z.ack = f == 0 ? 0 : h.ack;
		z.ref = f == 1 ? 0 : h.ref;
		rgpu_frame_hdr_encode(&z, o2);
		for (int i = 0; i < 56; i++) {
			int in_field = i >= 40 + 8 * f && i < 48 + 8 * f;
			assert_int_equal(o2[i], in_field ? 0 : want[i]);
		}
	}

	struct rgpu_frame_hdr d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(rgpu_frame_hdr_decode(want, &d), 0);
	assert_int_equal(d.magic, 0x55504752u);
	assert_int_equal(d.version, 2);
	assert_int_equal(d.type, 0xa1b2);
	assert_int_equal(d.flags, 0xc3d4e5f6u);
	assert_int_equal(d.body_len, 0x0badcafeu);
	assert_int_equal(d.payload_len, 0x1122334455667788ull);
	assert_int_equal(d.seq, 0x99aabbccddeeff10ull);
	assert_int_equal(d.session, 0x2132435465768798ull);
	assert_int_equal(d.ack, 0x3a4b5c6d7e8f9012ull);
	assert_int_equal(d.ref, 0xf1e2d3c4b5a69788ull);

	/* the same bytes written by hand */
	uint8_t hand[56];
	hand_hdr_ar(hand, 0x55504752u, 2, 0xa1b2, 0xc3d4e5f6u, 0x0badcafeu, 0x1122334455667788ull,
		    0x99aabbccddeeff10ull, 0x2132435465768798ull, 0x3a4b5c6d7e8f9012ull,
		    0xf1e2d3c4b5a69788ull);
	assert_memory_equal(hand, want, 56);
}

static void test_hdr_round_trip(void **state)
{
	(void)state;
	/* extreme values in every field */
	const struct rgpu_frame_hdr cases[] = {
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 0, 0, 0, 0, 0, 0, 0, 0},
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 0xffff, 0xffffffffu, 0xffffffffu, UINT64_MAX,
	     UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX},
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 40, 1, 123, 4000, 1ull << 63,
	     0x8000000000000001ull, 0, 0},
	    /* a reply that also acknowledges: ack and ref distinct from seq and each other */
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 40, RGPU_FRAME_REPLY, 16, 0, 0x1001, 7,
	     0x0123456789abcdefull, 0xfedcba9876543210ull},
	    /* an unsequenced ACK frame: seq 0, ack set, ref 0 */
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 5, 0, 0, 0, 0, 7, 0x8000000000000000ull, 0},
	    /* ack and ref at their extremes, one at a time */
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 27, 0, 0, 100, 3, 7, UINT64_MAX, 1},
	    {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, 27, 0, 0, 100, 3, 7, 1, UINT64_MAX},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t raw[RGPU_FRAME_HDR_LEN];
		struct rgpu_frame_hdr d;
		rgpu_frame_hdr_encode(&cases[i], raw);
		memset(&d, 0x5a, sizeof(d));
		assert_int_equal(rgpu_frame_hdr_decode(raw, &d), 0);
		assert_int_equal(d.magic, cases[i].magic);
		assert_int_equal(d.version, cases[i].version);
		assert_int_equal(d.type, cases[i].type);
		assert_int_equal(d.flags, cases[i].flags);
		assert_int_equal(d.body_len, cases[i].body_len);
		assert_int_equal(d.payload_len, cases[i].payload_len);
		assert_int_equal(d.seq, cases[i].seq);
		assert_int_equal(d.session, cases[i].session);
		assert_int_equal(d.ack, cases[i].ack);
		assert_int_equal(d.ref, cases[i].ref);
	}
}

static void test_hdr_bad_magic_version(void **state)
{
	(void)state;
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	struct rgpu_frame_hdr d;

	for (int byte = 0; byte < 4; byte++) {
		hand_hdr(raw, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 10, 0, 1, 2);
		raw[byte] ^= 0x20;
		assert_int_equal(rgpu_frame_hdr_decode(raw, &d), RGPU_EMAGIC);
	}
	hand_hdr(raw, 0x52475055u, RGPU_PROTO_VERSION, 40, 0, 10, 0, 1, 2); /* big-endian "RGPU" */
	assert_int_equal(rgpu_frame_hdr_decode(raw, &d), RGPU_EMAGIC);
	hand_hdr(raw, 0, RGPU_PROTO_VERSION, 40, 0, 10, 0, 1, 2);
	assert_int_equal(rgpu_frame_hdr_decode(raw, &d), RGPU_EMAGIC);
	/* a wrong magic is reported as such even when the version is wrong too */
	hand_hdr(raw, 0x55504753u, 7, 40, 0, 10, 0, 1, 2);
	assert_int_equal(rgpu_frame_hdr_decode(raw, &d), RGPU_EMAGIC);

	/* 1: the previous protocol (40-byte headers); 0x0200: 2 byte-swapped */
	const uint16_t bad_versions[] = {0, 1, 3, 0x0100, 0x0200, 0xffff};
	for (size_t i = 0; i < sizeof(bad_versions) / sizeof(bad_versions[0]); i++) {
		hand_hdr_ar(raw, 0x55504752u, bad_versions[i], 0x0028, 0x1, 0x30, 0x4000,
			    0x0102030405060708ull, 0x1112131415161718ull, 0x2122232425262728ull,
			    0x3132333435363738ull);
		memset(&d, 0, sizeof(d));
		assert_int_equal(rgpu_frame_hdr_decode(raw, &d), RGPU_EVERSION);
		/* still filled, so the caller can name what it saw */
		assert_int_equal(d.version, bad_versions[i]);
		assert_int_equal(d.type, 40);
		assert_int_equal(d.flags, 1);
		assert_int_equal(d.body_len, 0x30);
		assert_int_equal(d.payload_len, 0x4000);
		assert_int_equal(d.seq, 0x0102030405060708ull);
		assert_int_equal(d.session, 0x1112131415161718ull);
		assert_int_equal(d.ack, 0x2122232425262728ull);
		assert_int_equal(d.ref, 0x3132333435363738ull);
	}
}

/* --- rgpu_frame_check ------------------------------------------------------------------------- */

static void test_check_unknown_types(void **state)
{
	(void)state;
	for (unsigned t = 0; t <= 0xffff; t++) {
		if (spec_of(t))
			continue;
		if (chk(t, 0, 8, 0, RGPU_PEER_SERVER) != RGPU_EUNKNOWNTYPE ||
		    chk(t, 0, 8, 0, RGPU_PEER_CLIENT) != RGPU_EUNKNOWNTYPE ||
		    chk(t, RGPU_FRAME_REPLY, 8, 0, RGPU_PEER_CLIENT) != RGPU_EUNKNOWNTYPE ||
		    chk(t, 0, 0, 0, RGPU_PEER_SERVER) != RGPU_EUNKNOWNTYPE)
			fail_msg("type %u is not in rgpu.proto but was not refused as unknown", t);
		if (strcmp(rgpu_msg_name(t), "MSG_?") != 0)
			fail_msg("type %u named %s", t, rgpu_msg_name(t));
	}
	/* named ones, for the record */
	assert_int_equal(chk(0, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE); /* MSG_NONE */
	assert_int_equal(chk(9, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(999, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(0xffff, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(66, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	/* 8, MSG_REDIRECT, goes only to the client */
	assert_int_equal(chk(8, 0, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(199, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(202, 0, 8, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_string_equal(rgpu_msg_name(0x10000), "MSG_?");
	assert_string_equal(rgpu_msg_name(0xffffffffu), "MSG_?");
}

static void test_msg_names(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++)
		assert_string_equal(rgpu_msg_name(types[i].type), types[i].name);
}

/* Who may receive what: requests go one way, replies only to the client. */
static void test_check_direction(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		const struct tspec *t = &types[i];
		uint32_t body = t->empty ? 0 : 16;
		int srv = chk(t->type, 0, body, 0, RGPU_PEER_SERVER);
		int cli = chk(t->type, 0, body, 0, RGPU_PEER_CLIENT);
		int want_srv = (t->dir & TO_SRV) ? 0 : RGPU_EPROTO;
		int want_cli = (t->dir & TO_CLI) ? 0 : RGPU_EPROTO;
		if (srv != want_srv || cli != want_cli)
			fail_msg("%s request: server got %d (want %d), client got %d (want %d)",
				 t->name, srv, want_srv, cli, want_cli);

		/* replies: never to the server; to the client for what the client asks */
		assert_int_equal(chk(t->type, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_SERVER),
				 RGPU_EPROTO);
		assert_int_equal(chk(t->type, RGPU_FRAME_REPLY, 0, 0, RGPU_PEER_SERVER),
				 RGPU_EPROTO);
		int want_rep = (t->dir & TO_SRV) ? 0 : RGPU_EPROTO;
		int rep16 = chk(t->type, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_CLIENT);
		/* a reply body may be empty (a Status with every field 0 packs to 0 bytes) */
		int rep0 = chk(t->type, RGPU_FRAME_REPLY, 0, 0, RGPU_PEER_CLIENT);
		if (rep16 != want_rep || rep0 != want_rep)
			fail_msg("%s reply to client: %d / %d, want %d", t->name, rep16, rep0,
				 want_rep);
	}
	/* the cases named in the protocol, spelled out */
	assert_int_equal(chk(40, 0, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO); /* LAUNCH */
	assert_int_equal(chk(27, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EPROTO); /* DATA */
	assert_int_equal(chk(42, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EPROTO); /* CALLBACK */
	assert_int_equal(chk(43, 0, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO); /* CALLBACK_DONE */
	assert_int_equal(chk(27, 0, 16, 100, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk(42, 0, 16, 0, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk(2, 0, 16, 0, RGPU_PEER_CLIENT), 0); /* ERROR either way */
	assert_int_equal(chk(2, 0, 16, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(4, RGPU_FRAME_REPLY, 4, 0, RGPU_PEER_CLIENT), 0); /* PING -> Status */
	assert_int_equal(chk(1, RGPU_FRAME_REPLY, 300, 0, RGPU_PEER_CLIENT), 0); /* HelloReply */
	assert_int_equal(chk(27, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk(42, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk(5, 0, 0, 0, RGPU_PEER_SERVER), 0); /* ACK either way */
	assert_int_equal(chk(5, 0, 0, 0, RGPU_PEER_CLIENT), 0);
	/* the admin protocol is a table of its own: a job's types mean nothing on its link */
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_STATUS, 0, 2, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_STATUS, 0, 2, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_JOBS, 0, 2, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_JOBS, RGPU_FRAME_REPLY, 300, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_ERROR, 0, 30, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk_admin(RGPU_MSG_LAUNCH, 0, 16, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	/* its authentication: the challenge only to the client, the answer only to the server */
	assert_int_equal(RGPU_ADMIN_MSG_AUTH_CHALLENGE, 6);
	assert_int_equal(RGPU_ADMIN_MSG_AUTH, 7);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_AUTH_CHALLENGE, 0, 34, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_AUTH_CHALLENGE, 0, 34, RGPU_PEER_SERVER),
			 RGPU_EPROTO);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_AUTH, 0, 34, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_AUTH, 0, 34, RGPU_PEER_CLIENT), RGPU_EPROTO);
}

static void test_check_flags(void **state)
{
	(void)state;
	/*
	 * 0x2 (BYREF) and 0x4 (LANES) are known: the receive refuses them on any link but shared
	 * memory, and one without lanes (test_lanes.c)
	 */
	const uint32_t bad[] = {0x8, 0x100, 0x80000000u, 0xfffffff8u, 0xffffffffu, 0x9};
	for (size_t i = 0; i < NTYPES; i++) {
		const struct tspec *t = &types[i];
		uint32_t body = t->empty ? 0 : 16;
		assert_int_equal(chk(t->type, 0, body, 0, allowed_rx(t)), 0);
		assert_int_equal(chk(t->type, 0x4, body, 0, allowed_rx(t)), 0);
		for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			int r1 = chk(t->type, bad[k], body, 0, allowed_rx(t));
			int r2 = chk(t->type, bad[k], 16, 0, RGPU_PEER_CLIENT);
			if (r1 != RGPU_EPROTO || r2 != RGPU_EPROTO)
				fail_msg("%s flags 0x%x: %d / %d, want RGPU_EPROTO", t->name,
					 bad[k], r1, r2);
		}
	}
}

static void test_check_body(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		const struct tspec *t = &types[i];
		enum rgpu_peer rx = allowed_rx(t);
		if (t->empty) {
			/* PING, GOODBYE: an Empty body, so no bytes at all */
			assert_int_equal(chk(t->type, 0, 0, 0, rx), 0);
			assert_int_equal(chk(t->type, 0, 1, 0, rx), RGPU_EPROTO);
			assert_int_equal(chk(t->type, 0, 100, 0, rx), RGPU_EPROTO);
			assert_int_not_equal(chk(t->type, 0, RGPU_MAX_BODY + 1, 0, rx), 0);
		} else {
			/*
			 * A client request always names something, so an empty body is malformed;
			 * a push from the server (MSG_DATA at offset 0, ...) may pack to 0 bytes.
			 */
			int r0 = chk(t->type, 0, 0, 0, rx);
			int want0 = rx == RGPU_PEER_SERVER ? RGPU_EPROTO : 0;
			if (r0 != want0)
				fail_msg("%s with an empty body: %d, want %d", t->name, r0, want0);
			assert_int_equal(chk(t->type, 0, 1, 0, rx), 0);
			assert_int_equal(chk(t->type, 0, 16u << 20, 0, rx), 0); /* RGPU_MAX_BODY */
			assert_int_equal(chk(t->type, 0, (16u << 20) + 1, 0, rx), RGPU_ETOOBIG);
			assert_int_equal(chk(t->type, 0, 0xffffffffu, 0, rx), RGPU_ETOOBIG);
		}
		if (t->dir & TO_SRV) {
			assert_int_equal(
			    chk(t->type, RGPU_FRAME_REPLY, 16u << 20, 0, RGPU_PEER_CLIENT), 0);
			assert_int_equal(
			    chk(t->type, RGPU_FRAME_REPLY, (16u << 20) + 1, 0, RGPU_PEER_CLIENT),
			    RGPU_ETOOBIG);
		}
	}
	assert_int_equal(RGPU_MAX_BODY, 16u << 20);
	/* spelled out */
	assert_int_equal(chk(40, 0, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO); /* LAUNCH */
	assert_int_equal(chk(12, 0, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO); /* CTX_SYNC */
	assert_int_equal(chk(2, 0, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO);  /* ERROR from client */
	assert_int_equal(chk(2, 0, 0, 0, RGPU_PEER_CLIENT), 0);		   /* ERROR from server */
	assert_int_equal(chk(27, 0, 0, 4096, RGPU_PEER_CLIENT), 0);	   /* DATA, offset 0 */
	assert_int_equal(chk(42, 0, 0, 0, RGPU_PEER_CLIENT), 0);	   /* CALLBACK */
	assert_int_equal(chk(4, 0, 0, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(3, 0, 0, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(4, 0, 2, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(3, 0, 2, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(5, 0, 2, 0, RGPU_PEER_SERVER), RGPU_EPROTO); /* ACK: Empty */
	assert_int_equal(chk(5, 0, 2, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	/* admin requests carry an AdminRequest: not empty */
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_STATUS, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk_admin(RGPU_ADMIN_MSG_JOBS, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
}

static void test_check_payload(void **state)
{
	(void)state;
	for (size_t i = 0; i < NTYPES; i++) {
		const struct tspec *t = &types[i];
		enum rgpu_peer rx = allowed_rx(t);
		uint32_t body = t->empty ? 0 : 16;
		if (t->max_payload) {
			int at = chk(t->type, 0, body, t->max_payload, rx);
			int over = chk(t->type, 0, body, t->max_payload + 1, rx);
			if (at != 0 || over != RGPU_ETOOBIG)
				fail_msg("%s payload %llu: %d (want 0), +1: %d (want RGPU_ETOOBIG)",
					 t->name, (unsigned long long)t->max_payload, at, over);
			assert_int_equal(chk(t->type, 0, body, 1, rx), 0);
		} else {
			int one = chk(t->type, 0, body, 1, rx);
			if (one != RGPU_ETOOBIG)
				fail_msg("%s payload 1: %d, want RGPU_ETOOBIG", t->name, one);
		}
		assert_int_equal(chk(t->type, 0, body, UINT64_MAX, rx), RGPU_ETOOBIG);
		assert_int_equal(chk(t->type, 0, body, 1ull << 63, rx), RGPU_ETOOBIG);
		/*
		 * replies carry no payload (copies back come as MSG_DATA frames), but for a small
		 * synchronous device-to-host copy's bytes (24, up to 64 KiB: capability SHM)
		 */
		if (t->dir & TO_SRV) {
			uint64_t most = t->type == 24 ? 64 << 10 : 0;
			assert_int_equal(chk(t->type, RGPU_FRAME_REPLY, 16, most, RGPU_PEER_CLIENT),
					 0);
			assert_int_equal(chk(t->type, RGPU_FRAME_REPLY, 16, most + 1,
					     RGPU_PEER_CLIENT),
					 RGPU_ETOOBIG);
		}
	}
	/* the limits by name */
	assert_int_equal(chk(23, 0, 16, 16 * MiB, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(23, 0, 16, 16 * MiB + 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);
	assert_int_equal(chk(27, 0, 16, 16 * MiB, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk(27, 0, 16, 16 * MiB + 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);
	assert_int_equal(chk(30, 0, 16, 1ull << 30, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(30, 0, 16, (1ull << 30) + 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);
	assert_int_equal(chk(40, 0, 16, 1ull << 20, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(40, 0, 16, (1ull << 20) + 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);
	assert_int_equal(chk(24, 0, 16, 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);  /* DTOH */
	assert_int_equal(chk(4, 0, 0, 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);    /* PING */
	assert_int_equal(chk(42, 0, 16, 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);  /* CALLBACK */
	assert_int_equal(chk(44, 0, 2, 64 * 1024, RGPU_PEER_CLIENT), 0);      /* OUTPUT */
	assert_int_equal(chk(44, 0, 2, 64 * 1024 + 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);
	assert_int_equal(chk(44, 0, 2, 1, RGPU_PEER_SERVER), RGPU_EPROTO);  /* server-only */
	assert_int_equal(chk(5, 0, 0, 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);    /* ACK */
	assert_int_equal(chk_admin_payload(RGPU_ADMIN_MSG_STATUS, 1), RGPU_ETOOBIG);
	assert_int_equal(chk_admin_payload(RGPU_ADMIN_MSG_JOBS, 1), RGPU_ETOOBIG);
	assert_int_equal(RGPU_MAX_CHUNK, 16 * MiB);
	assert_int_equal(RGPU_MAX_IMAGE, 1ull << 30);
	assert_int_equal(RGPU_MAX_PARAMS, 1ull << 20);
}

/* --- packing ---------------------------------------------------------------------------------- */

static Rgpu__Launch test_launch(void)
{
	Rgpu__Launch m = RGPU__LAUNCH__INIT;
	m.func = 0x00007f0011223344ull;
	m.grid_x = 7;
	m.grid_y = 11;
	m.grid_z = 13;
	m.block_x = 32;
	m.block_y = 4;
	m.block_z = 2;
	m.shared_mem = 4096 + 17;
	m.stream = 0x5000000000000001ull;
	m.ctx = 0x42;
	m.nparams = 9;
	m.extra = 1;
	return m;
}

static void check_launch(const Rgpu__Launch *u)
{
	assert_non_null(u);
	assert_int_equal(u->func, 0x00007f0011223344ull);
	assert_int_equal(u->grid_x, 7);
	assert_int_equal(u->grid_y, 11);
	assert_int_equal(u->grid_z, 13);
	assert_int_equal(u->block_x, 32);
	assert_int_equal(u->block_y, 4);
	assert_int_equal(u->block_z, 2);
	assert_int_equal(u->shared_mem, 4113);
	assert_int_equal(u->stream, 0x5000000000000001ull);
	assert_int_equal(u->ctx, 0x42);
	assert_int_equal(u->nparams, 9);
	assert_true(u->extra);
}

static void test_frame_pack(void **state)
{
	(void)state;
	uint8_t buf[256];
	Rgpu__Launch m = test_launch();
	size_t blen = rgpu__launch__get_packed_size(&m);
	uint8_t body[128];
	uint8_t want[RGPU_FRAME_HDR_LEN];
	const size_t hl = RGPU_FRAME_HDR_LEN;

	assert_true(blen > 0 && blen < sizeof(body));
	assert_int_equal(rgpu__launch__pack(&m, body), blen);

	assert_int_equal(rgpu_frame_size(NULL), 56);
	assert_int_equal(rgpu_frame_size(&m.base), 56 + blen);

	/* rgpu_frame_pack: ack and ref 0 */
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(rgpu_frame_pack(buf, 4, 0, 5, 9, NULL, 0), hl);
	hand_hdr(want, 0x55504752u, RGPU_PROTO_VERSION, 4, 0, 0, 0, 5, 9);
	assert_memory_equal(buf, want, hl);
	assert_int_equal(buf[hl], 0xee);

	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(
	    rgpu_frame_pack(buf, 40, RGPU_FRAME_REPLY, 0xabcdef0123ull, 0x77, &m.base, 4000),
	    hl + blen);
	hand_hdr(want, 0x55504752u, RGPU_PROTO_VERSION, 40, 1, (uint32_t)blen, 4000,
		 0xabcdef0123ull, 0x77);
	assert_memory_equal(buf, want, hl);
	assert_memory_equal(buf + hl, body, blen);
	assert_int_equal(buf[hl + blen], 0xee);

	/*
	 * rgpu_frame_pack_hdr: type, flags, seq, session, ack, ref and payload_len from the
	 * header; magic, version and body_len filled in whatever the caller left there.
	 */
	struct rgpu_frame_hdr h = {
	    .magic = 0x12345678u,
	    .version = 77,
	    .type = 40,
	    .flags = RGPU_FRAME_REPLY,
	    .body_len = 0xdeadbeefu,
	    .payload_len = 4000,
	    .seq = 0xabcdef0123ull,
	    .session = 0x77,
	    .ack = 0x0a0b0c0d0e0f1011ull,
	    .ref = 0x2021222324252627ull,
	};
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(rgpu_frame_pack_hdr(buf, &h, &m.base), hl + blen);
	hand_hdr_ar(want, 0x55504752u, RGPU_PROTO_VERSION, 40, 1, (uint32_t)blen, 4000,
		    0xabcdef0123ull, 0x77, 0x0a0b0c0d0e0f1011ull, 0x2021222324252627ull);
	assert_memory_equal(buf, want, hl);
	assert_memory_equal(buf + hl, body, blen);
	assert_int_equal(buf[hl + blen], 0xee);
	assert_int_equal(h.magic, 0x12345678u); /* the caller's header is left alone */
	assert_int_equal(h.body_len, 0xdeadbeefu);

	/* an ACK frame: no body */
	struct rgpu_frame_hdr a = {
	    .magic = 0,
	    .version = 0,
	    .type = 5,
	    .flags = 0,
	    .body_len = 0,
	    .payload_len = 0,
	    .seq = 0,
	    .session = 3,
	    .ack = 41,
	    .ref = 0,
	};
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(rgpu_frame_pack_hdr(buf, &a, NULL), hl);
	hand_hdr_ar(want, 0x55504752u, RGPU_PROTO_VERSION, 5, 0, 0, 0, 0, 3, 41, 0);
	assert_memory_equal(buf, want, hl);
	assert_int_equal(buf[hl], 0xee);
}

/* --- over a socketpair ------------------------------------------------------------------------ */

static void test_launch_round_trip(void **state)
{
	(void)state;
	struct rgpu_conn *a, *b;
	Rgpu__Launch m = test_launch();
	uint8_t payload[4000], got[4000];
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1;

	conn_pair(&a, &b);
	for (int i = 0; i < 4000; i++)
		payload[i] = pat(40, (uint64_t)i);
	assert_int_equal(rgpu_frame_send(a, 40, 0, 0x1122334455667788ull, 0x0102030405060708ull,
					 &m.base, payload, 4000),
			 0);
	memset(&h, 0, sizeof(h));
	assert_int_equal(rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.magic, 0x55504752u);
	assert_int_equal(h.version, RGPU_PROTO_VERSION);
	assert_int_equal(h.type, 40);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.body_len, rgpu__launch__get_packed_size(&m));
	assert_int_equal(h.payload_len, 4000);
	assert_int_equal(h.seq, 0x1122334455667788ull);
	assert_int_equal(h.session, 0x0102030405060708ull);
	assert_int_equal(h.ack, 0);
	assert_int_equal(h.ref, 0);
	assert_non_null(body);
	Rgpu__Launch *u = rgpu__launch__unpack(NULL, h.body_len, body);
	check_launch(u);
	rgpu__launch__free_unpacked(u, NULL);
	free(body);

	memset(got, 0, sizeof(got));
	assert_int_equal(rgpu_conn_recv(b, got, 4000), 0);
	for (int i = 0; i < 4000; i++)
		if (got[i] != pat(40, (uint64_t)i))
			fail_msg("payload byte %d: 0x%02x, want 0x%02x", i, got[i],
				 pat(40, (uint64_t)i));

	/* the same through rgpu_frame_send_hdr, with ack and ref */
	struct rgpu_frame_hdr sh = {
	    .magic = 0,
	    .version = 0,
	    .type = 40,
	    .flags = 0,
	    .body_len = 0,
	    .payload_len = 4000,
	    .seq = 0x1122334455667789ull,
	    .session = 0x0102030405060708ull,
	    .ack = 0x5566778899aabbccull,
	    .ref = 0x0f0e0d0c0b0a0908ull,
	};
	assert_int_equal(rgpu_frame_send_hdr(a, &sh, &m.base, payload), 0);
	memset(&h, 0, sizeof(h));
	assert_int_equal(rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.version, RGPU_PROTO_VERSION);
	assert_int_equal(h.type, 40);
	assert_int_equal(h.body_len, rgpu__launch__get_packed_size(&m));
	assert_int_equal(h.payload_len, 4000);
	assert_int_equal(h.seq, 0x1122334455667789ull);
	assert_int_equal(h.session, 0x0102030405060708ull);
	assert_int_equal(h.ack, 0x5566778899aabbccull);
	assert_int_equal(h.ref, 0x0f0e0d0c0b0a0908ull);
	u = rgpu__launch__unpack(NULL, h.body_len, body);
	check_launch(u);
	rgpu__launch__free_unpacked(u, NULL);
	free(body);
	memset(got, 0, sizeof(got));
	assert_int_equal(rgpu_conn_recv(b, got, 4000), 0);
	assert_memory_equal(got, payload, 4000);

	/* nothing else was sent */
	rgpu_conn_close(a);
	assert_int_equal(rgpu_conn_recv(b, got, 1), RGPU_ECLOSED);
	rgpu_conn_close(b);
}

/* The bytes on the wire: header, protobuf body, payload, nothing else. */
static void test_wire_bytes(void **state)
{
	(void)state;
	int sv[2];
	struct rgpu_conn *a;
	const size_t hl = RGPU_FRAME_HDR_LEN;
	uint8_t want[RGPU_FRAME_HDR_LEN], got[RGPU_FRAME_HDR_LEN + 128 + 300];
	Rgpu__Launch m = test_launch();
	uint8_t body[128], payload[300];
	size_t blen = rgpu__launch__pack(&m, body);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	set_rcvtimeo(sv[1]);
	a = wrap(sv[0]);
	assert_non_null(a);

	assert_int_equal(rgpu_frame_send(a, 4, 0, 5, 9, NULL, NULL, 0), 0);
	read_all(sv[1], got, hl);
	hand_hdr(want, 0x55504752u, RGPU_PROTO_VERSION, 4, 0, 0, 0, 5, 9);
	assert_memory_equal(got, want, hl);

	for (int i = 0; i < 300; i++)
		payload[i] = pat(7, (uint64_t)i);
	assert_int_equal(rgpu_frame_send(a, 40, 0, 0xfedcba98ull, 0x3344, &m.base, payload, 300),
			 0);
	read_all(sv[1], got, hl + blen + 300);
	hand_hdr(want, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, (uint32_t)blen, 300, 0xfedcba98ull,
		 0x3344);
	assert_memory_equal(got, want, hl);
	assert_memory_equal(got + hl, body, blen);
	assert_memory_equal(got + hl + blen, payload, 300);

	/* a reply with an all-zero Status: an empty body */
	Rgpu__Status st = RGPU__STATUS__INIT;
	assert_int_equal(rgpu_frame_send(a, 12, RGPU_FRAME_REPLY, 77, 1, &st.base, NULL, 0), 0);
	read_all(sv[1], got, hl);
	hand_hdr(want, 0x55504752u, RGPU_PROTO_VERSION, 12, 1, 0, 0, 77, 1);
	assert_memory_equal(got, want, hl);

	/* rgpu_frame_send_hdr: ack at bytes 40..47, ref at 48..55 */
	struct rgpu_frame_hdr sh = {
	    .magic = 0,
	    .version = 0,
	    .type = 12,
	    .flags = RGPU_FRAME_REPLY,
	    .body_len = 0,
	    .payload_len = 0,
	    .seq = 78,
	    .session = 1,
	    .ack = 0x0000000100000002ull,
	    .ref = 77,
	};
	assert_int_equal(rgpu_frame_send_hdr(a, &sh, &st.base, NULL), 0);
	read_all(sv[1], got, hl);
	hand_hdr_ar(want, 0x55504752u, RGPU_PROTO_VERSION, 12, 1, 0, 0, 78, 1,
		    0x0000000100000002ull, 77);
	assert_memory_equal(got, want, hl);
	const uint8_t ack_le[8] = {0x02, 0, 0, 0, 0x01, 0, 0, 0};
	const uint8_t ref_le[8] = {77, 0, 0, 0, 0, 0, 0, 0};
	assert_memory_equal(got + 40, ack_le, 8);
	assert_memory_equal(got + 48, ref_le, 8);

	rgpu_conn_close(a);
	assert_int_equal(recv(sv[1], got, 1, 0), 0); /* EOF: no stray bytes */
	close(sv[1]);
}

/* ---- many frames through the read buffer ---- */

#define NFRAMES 120

static uint64_t frame_payload_len(uint32_t i)
{
	/* sizes chosen around the header, the 64 KiB buffer and 100 KB, then a fixed spread */
	enum { HL = RGPU_FRAME_HDR_LEN };
	static const uint64_t fixed[] = {1,	 2,	 HL - 1, HL,	    HL + 1,
					 1000,	 65535,	 65536,	 65537,	    65536 - HL,
					 131072, 102400, 3,	 65535 + HL};
	if (i % 7 == 6)
		return 0; /* a PING: header only */
	if (i < sizeof(fixed) / sizeof(fixed[0]))
		return fixed[i];
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return 1 + x % 102400; /* 1 .. 100 KiB */
}

struct sender {
	struct rgpu_conn *c;
	int ret;
	uint32_t failed_at;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	uint8_t *buf = malloc(131072);
	s->ret = buf ? 0 : RGPU_ENOMEM;
	for (uint32_t i = 0; i < NFRAMES && !s->ret; i++) {
		uint64_t len = frame_payload_len(i);
		if (i % 7 == 6) {
			s->ret = rgpu_frame_send(s->c, 4, 0, 1000 + i, 0xabc, NULL, NULL, 0);
		} else {
			Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
			mc.dst = 0x600000000000ull + (uint64_t)i * 0x1000;
			mc.src = i + 1;
			mc.size = len;
			mc.stream = 7;
			mc.ctx = 3;
			mc.flags = i % 3;
			for (uint64_t j = 0; j < len; j++)
				buf[j] = pat(i, j);
			s->ret = rgpu_frame_send(s->c, 23, 0, 1000 + i, 0xabc, &mc.base, buf, len);
		}
		s->failed_at = i;
	}
	free(buf);
	return NULL;
}

static void check_payload(struct rgpu_conn *c, uint32_t i, uint64_t len, uint8_t *buf)
{
	switch (i % 4) {
	case 0: /* in one read */
		assert_int_equal(rgpu_conn_recv(c, buf, len), 0);
		break;
	case 1: { /* 1 byte, half of the rest, the rest */
		uint64_t off = 0, step[3] = {1, (len - 1) / 2, len - 1 - (len - 1) / 2};
		for (int k = 0; k < 3; k++) {
			if (!step[k])
				continue;
			assert_int_equal(rgpu_conn_recv(c, buf + off, step[k]), 0);
			off += step[k];
		}
		assert_int_equal(off, len);
		break;
	}
	case 2: /* dropped */
		assert_int_equal(rgpu_conn_discard(c, len), 0);
		return;
	default: /* 1000-byte pieces */
		for (uint64_t off = 0; off < len; off += 1000) {
			uint64_t n = len - off < 1000 ? len - off : 1000;
			assert_int_equal(rgpu_conn_recv(c, buf + off, n), 0);
		}
		break;
	}
	for (uint64_t j = 0; j < len; j++)
		if (buf[j] != pat(i, j))
			fail_msg("frame %u payload byte %llu of %llu: 0x%02x, want 0x%02x", i,
				 (unsigned long long)j, (unsigned long long)len, buf[j], pat(i, j));
}

static void test_many_frames(void **state)
{
	(void)state;
	struct rgpu_conn *a, *b;
	struct sender s = {0};
	pthread_t th;
	uint8_t *buf = malloc(131072);

	assert_non_null(buf);
	conn_pair(&a, &b);
	s.c = a;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &s), 0);
	usleep(20000); /* let the sender run ahead, so frames queue up behind each other */

	for (uint32_t i = 0; i < NFRAMES; i++) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		uint64_t len = frame_payload_len(i);
		int ret = rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body);
		if (ret)
			fail_msg("frame %u: rgpu_frame_recv %d", i, ret);
		assert_int_equal(h.seq, 1000 + i);
		assert_int_equal(h.session, 0xabc);
		assert_int_equal(h.flags, 0);
		assert_int_equal(h.payload_len, len);
		if (i % 7 == 6) {
			assert_int_equal(h.type, 4);
			assert_int_equal(h.body_len, 0);
			assert_null(body);
			continue;
		}
		assert_int_equal(h.type, 23);
		assert_non_null(body);
		Rgpu__Memcpy *mc = rgpu__memcpy__unpack(NULL, h.body_len, body);
		assert_non_null(mc);
		assert_int_equal(mc->dst, 0x600000000000ull + (uint64_t)i * 0x1000);
		assert_int_equal(mc->src, i + 1);
		assert_int_equal(mc->size, len);
		assert_int_equal(mc->stream, 7);
		assert_int_equal(mc->ctx, 3);
		assert_int_equal(mc->flags, i % 3);
		rgpu__memcpy__free_unpacked(mc, NULL);
		free(body);
		check_payload(b, i, len, buf);
	}
	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	rgpu_conn_close(a);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	assert_int_equal(rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body), RGPU_ECLOSED);
	rgpu_conn_close(b);
	free(buf);
}

/* ---- a send cut into pieces by signals ----
 *
 * A signal that lands while sendmsg() blocks makes it return a short count; the transport must
 * go on from the exact byte where it stopped. The receiver reads slowly and keeps signalling
 * the sender, then checks all 4 MiB byte for byte.
 */

static volatile sig_atomic_t nsignals;
static void on_usr1(int sig)
{
	(void)sig;
	nsignals++;
}

struct big_sender {
	struct rgpu_conn *c;
	const uint8_t *payload;
	uint64_t len;
	int ret;
	volatile int done;
};

static void *big_sender_main(void *arg)
{
	struct big_sender *s = arg;
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	mc.dst = 0x600000200000ull;
	mc.size = s->len;
	s->ret = rgpu_frame_send(s->c, 23, 0, 555, 1, &mc.base, s->payload, s->len);
	s->done = 1;
	return NULL;
}

/* len bytes of frame seed's pattern (pat), malloc'd */
static uint8_t *patterned(uint64_t len, uint32_t seed)
{
	uint8_t *p = malloc(len);
	assert_non_null(p);
	for (uint64_t j = 0; j < len; j++)
		p[j] = pat(seed, j);
	return p;
}

static void test_send_interrupted(void **state)
{
	(void)state;
	struct rgpu_conn *a, *b;
	struct sigaction sa, old;
	struct big_sender s = {0};
	pthread_t th;
	const uint64_t len = 4 * MiB;
	uint8_t *payload = patterned(len, 99), *got = malloc(len);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	assert_non_null(got);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART: a blocked sendmsg returns early */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);

	conn_pair(&a, &b);
	s.c = a;
	s.payload = payload;
	s.len = len;
	nsignals = 0;
	assert_int_equal(pthread_create(&th, NULL, big_sender_main, &s), 0);
	assert_int_equal(rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.payload_len, len);
	free(body);
	for (uint64_t off = 0; off < len;) {
		uint64_t n = len - off < 8192 ? len - off : 8192;
		if (!s.done)
			pthread_kill(th, SIGUSR1);
		assert_int_equal(rgpu_conn_recv(b, got + off, n), 0);
		off += n;
		if ((off / 8192) % 16 == 0)
			usleep(200);
	}
	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	for (uint64_t j = 0; j < len; j++)
		if (got[j] != pat(99, j))
			fail_msg("byte %llu: 0x%02x, want 0x%02x (signals: %d)",
				 (unsigned long long)j, got[j], pat(99, j), (int)nsignals);
	assert_true(nsignals > 0);
	sigaction(SIGUSR1, &old, NULL);
	rgpu_conn_close(a);
	rgpu_conn_close(b);
	free(payload);
	free(got);
}

/*
 * rgpu_conn_set_send_timeout(): a peer that reads nothing fails the send with RGPU_ETIMEDOUT
 * (errno ETIMEDOUT) after about the timeout; one that reads slowly, each read within it, gets
 * every byte and the send succeeds.
 */
static void test_send_timeout(void **state)
{
	(void)state;
	struct rgpu_conn *a, *b;
	struct big_sender s = {0};
	pthread_t th;
	const uint64_t len = 16 * MiB;
	uint8_t *payload = patterned(len, 77), *got = malloc(len);
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	assert_non_null(got);

	/* nobody reads: the send fails once the socket is full and 200 ms pass */
	conn_pair(&a, &b);
	rgpu_conn_set_send_timeout(a, 200);
	s.c = a;
	s.payload = payload;
	s.len = len;
	uint64_t t0 = rgpu_now_ns();
	big_sender_main(&s);
	uint64_t took_ms = (rgpu_now_ns() - t0) / 1000000;
	assert_int_equal(s.ret, RGPU_ETIMEDOUT);
	assert_int_equal(rgpu_conn_errno(a), ETIMEDOUT);
	assert_true(took_ms >= 200 && took_ms < 5000);
	/* the stream is cut: the next send fails at once, and the peer reads an end */
	t0 = rgpu_now_ns();
	s.len = 64;
	big_sender_main(&s);
	assert_int_equal(s.ret, RGPU_ETIMEDOUT);
	assert_true(rgpu_now_ns() - t0 < 100000000ull);
	s.len = len;
	rgpu_conn_close(a);
	rgpu_conn_close(b);

	/* a slow reader, 20 ms between reads of 256 KiB: within the timeout, every byte comes */
	conn_pair(&a, &b);
	rgpu_conn_set_send_timeout(a, 1000);
	s.c = a;
	s.ret = -1;
	s.len = 4 * MiB;
	assert_int_equal(pthread_create(&th, NULL, big_sender_main, &s), 0);
	assert_int_equal(rgpu_frame_recv(b, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.payload_len, s.len);
	free(body);
	for (uint64_t off = 0; off < s.len; off += 256 << 10) {
		usleep(20000);
		assert_int_equal(rgpu_conn_recv(b, got + off, 256 << 10), 0);
	}
	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	assert_memory_equal(got, payload, s.len);
	rgpu_conn_close(a);
	rgpu_conn_close(b);
	free(payload);
	free(got);
}

/* ---- truncated streams ----
 *
 * transport.h: rgpu_frame_recv() returns RGPU_ECLOSED for a clean end between frames and
 * RGPU_ETRUNC once a frame has begun and the peer closes (truncated); rgpu_conn_recv() returns
 * RGPU_ECLOSED for EOF before the first of its bytes and RGPU_ETRUNC after some of them.
 */

static int recv_after_close(const uint8_t *bytes, size_t n, uint8_t **body)
{
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;

	raw_pair(&raw, &c);
	if (n)
		write_all(raw, bytes, n);
	close(raw);
	*body = (uint8_t *)0x1;
	int ret = rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, body);
	rgpu_conn_close(c);
	return ret;
}

static void test_truncated_header(void **state)
{
	(void)state;
	uint8_t hdr[RGPU_FRAME_HDR_LEN];
	uint8_t *body;

	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 10, 0, 1, 1);
	/* nothing at all: a clean end between frames */
	assert_int_equal(recv_after_close(hdr, 0, &body), RGPU_ECLOSED);
	assert_null(body);
	/* 20 bytes of the header, then close */
	assert_int_equal(recv_after_close(hdr, 20, &body), RGPU_ETRUNC);
	assert_null(body);
	assert_int_equal(recv_after_close(hdr, 1, &body), RGPU_ETRUNC);
	assert_int_equal(recv_after_close(hdr, 39, &body), RGPU_ETRUNC);
	assert_int_equal(recv_after_close(hdr, 40, &body), RGPU_ETRUNC); /* a version 1 header */
	assert_int_equal(recv_after_close(hdr, RGPU_FRAME_HDR_LEN - 1, &body), RGPU_ETRUNC);
	assert_null(body);
}

static void test_truncated_body(void **state)
{
	(void)state;
	const size_t hl = RGPU_FRAME_HDR_LEN;
	uint8_t buf[RGPU_FRAME_HDR_LEN + 50];
	uint8_t *body;

	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 50, 0, 1, 1);
	memset(buf + hl, 0x08, 50);
	assert_int_equal(recv_after_close(buf, hl + 10, &body), RGPU_ETRUNC);
	assert_null(body);
	assert_int_equal(recv_after_close(buf, hl + 49, &body), RGPU_ETRUNC);
	assert_null(body);
	/* the header whole, not one byte of the body */
	assert_int_equal(recv_after_close(buf, hl, &body), RGPU_ETRUNC);
	assert_null(body);
	/* all 50: the frame is whole (its payload is 0) */
	assert_int_equal(recv_after_close(buf, hl + 50, &body), 0);
	assert_non_null(body);
	assert_int_equal(body[49], 0x08);
	free(body);
}

/* Peer closes mid-payload: through the buffer (small) and straight to the caller (large). */
static void truncated_payload(uint64_t announced, uint64_t sent, int use_within)
{
	int raw;
	struct rgpu_conn *c;
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	struct raw_writer rw;

	mc.dst = 0x600000001000ull;
	mc.size = announced;
	size_t blen = rgpu__memcpy__get_packed_size(&mc);
	const size_t hl = RGPU_FRAME_HDR_LEN;
	uint8_t *wire = malloc(hl + blen + sent);
	uint8_t *got = malloc(announced);
	assert_non_null(wire);
	assert_non_null(got);
	hand_hdr(wire, 0x55504752u, RGPU_PROTO_VERSION, 23, 0, (uint32_t)blen, announced, 3, 4);
	rgpu__memcpy__pack(&mc, wire + hl);
	for (uint64_t j = 0; j < sent; j++)
		wire[hl + blen + j] = pat(23, j);

	raw_pair(&raw, &c);
	raw_writer_start(&rw, raw, wire, hl + blen + sent);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.payload_len, announced);
	assert_int_equal(h.body_len, blen);
	free(body);
	int ret = use_within ? rgpu_conn_recv_payload(c, got, announced)
			     : rgpu_conn_recv(c, got, announced);
	int want = sent ? RGPU_ETRUNC : RGPU_ECLOSED;
	if (ret != want)
		fail_msg("payload %llu, %llu sent then closed: %d, want %d",
			 (unsigned long long)announced, (unsigned long long)sent, ret, want);
	/* what did arrive arrived in order */
	for (uint64_t j = 0; j < sent; j++)
		if (got[j] != pat(23, j))
			fail_msg("byte %llu before the cut: 0x%02x", (unsigned long long)j, got[j]);
	pthread_join(rw.th, NULL);
	rgpu_conn_close(c);
	free(got);
	free(wire);
}

static void test_truncated_payload(void **state)
{
	(void)state;
	for (int within = 0; within < 2; within++) {
		truncated_payload(10000, 3000, within);
		truncated_payload(10000, 9999, within);
		truncated_payload(10000, 1, within);
		truncated_payload(10000, 0, within);	   /* EOF before the first payload byte */
		truncated_payload(200000, 150000, within); /* >= 64 KiB: read past the buffer */
		truncated_payload(200000, 199999, within);
		truncated_payload(200000, 0, within);
	}
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- stalls: once a frame has begun, all of it must come within frame_timeout_ms ---- */

static void test_stalled_frame(void **state)
{
	(void)state;
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body;
	const size_t hl = RGPU_FRAME_HDR_LEN;
	uint8_t buf[RGPU_FRAME_HDR_LEN + 50];
	struct timespec t0, t1;

	assert_int_equal(RGPU_FRAME_TIMEOUT_MS, 30000);

	/* half a header, the peer stays connected and silent */
	raw_pair(&raw, &c);
	assert_int_equal(c->frame_timeout_ms, 30000); /* the default, from rgpu_tcp_wrap */
	c->frame_timeout_ms = 150;
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 50, 0, 1, 1);
	write_all(raw, buf, 20);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), RGPU_EDEADLINE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 140);
	assert_true(ms < 5000);
	close(raw);
	rgpu_conn_close(c);

	/* the header whole, the body stalls */
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 150;
	memset(buf + hl, 0x08, 50);
	write_all(raw, buf, hl + 25);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), RGPU_EDEADLINE);
	assert_null(body);
	close(raw);
	rgpu_conn_close(c);

	/* the header whole, 10 of 100 payload bytes, then silence */
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 150;
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 23, 0, 2, 100, 1, 1);
	buf[hl] = 0x08;
	buf[hl + 1] = 0x01;
	write_all(raw, buf, hl + 2 + 10);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	free(body);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_conn_recv_payload(c, buf, 100), RGPU_EDEADLINE);
	ms = ms_since(&t0);
	if (ms < 100 || ms > 3000)
		fail_msg("stalled payload: RGPU_EDEADLINE after %ld ms, want about 150", ms);
	close(raw);
	rgpu_conn_close(c);
}

/*
 * A peer that sends one byte at a time, each well within the frame timeout, must still send
 * the whole frame within it: the limit is a deadline per frame, not per receive (issue 8,
 * item 3: a HELLO trickled over 75 s and a PING over 60 s were accepted).
 */
struct trickler {
	int fd;
	const uint8_t *buf;
	size_t len;
	unsigned gap_ms;
	pthread_t th;
};

static void *trickler_main(void *arg)
{
	struct trickler *t = arg;
	for (size_t i = 0; i < t->len; i++) {
		if (send(t->fd, t->buf + i, 1, MSG_NOSIGNAL) != 1)
			break; /* the reader gave up and closed */
		usleep(t->gap_ms * 1000);
	}
	return NULL;
}

static void test_trickled_frame(void **state)
{
	(void)state;
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body;
	const size_t hl = RGPU_FRAME_HDR_LEN;
	uint8_t buf[RGPU_FRAME_HDR_LEN + 50 + 100];
	struct trickler t;
	struct timespec t0;
	long ms;

	/* header and body a byte every 20 ms (2.1 s in all), a frame timeout of 300 ms */
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 50, 0, 1, 1);
	memset(buf + hl, 0x08, 50);
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 300;
	t = (struct trickler){raw, buf, hl + 50, 20, 0};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&t.th, NULL, trickler_main, &t), 0);
	body = (uint8_t *)0x1;
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), RGPU_EDEADLINE);
	ms = ms_since(&t0);
	if (ms < 290 || ms > 1500)
		fail_msg("trickled frame: RGPU_EDEADLINE after %ld ms, want about 300", ms);
	assert_null(body);
	rgpu_conn_close(c);
	close(raw);
	pthread_join(t.th, NULL);

	/* the header and body at once, then the payload a byte every 20 ms: the same deadline */
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 23, 0, 2, 100, 1, 1);
	buf[hl] = 0x08;
	buf[hl + 1] = 0x01;
	memset(buf + hl + 2, 0x5a, 100);
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 300;
	write_all(raw, buf, hl + 2);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	free(body);
	t = (struct trickler){raw, buf + hl + 2, 100, 20, 0};
	assert_int_equal(pthread_create(&t.th, NULL, trickler_main, &t), 0);
	assert_int_equal(rgpu_conn_recv_payload(c, buf, 100), RGPU_EDEADLINE);
	ms = ms_since(&t0);
	if (ms < 290 || ms > 1500)
		fail_msg("trickled payload: RGPU_EDEADLINE after %ld ms, want about 300", ms);
	rgpu_conn_close(c);
	close(raw);
	pthread_join(t.th, NULL);

	/*
	 * A connection deadline (a handshake's): the whole frame by then, whatever the frame
	 * timeout; and a peer silent until then is RGPU_ETIMEDOUT, nothing having begun.
	 */
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 50, 0, 1, 1);
	memset(buf + hl, 0x08, 50);
	raw_pair(&raw, &c);
	rgpu_conn_set_deadline(c, rgpu_deadline_after(300));
	t = (struct trickler){raw, buf, hl + 50, 20, 0};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&t.th, NULL, trickler_main, &t), 0);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), RGPU_EDEADLINE);
	ms = ms_since(&t0);
	if (ms < 290 || ms > 1500)
		fail_msg(
		    "trickled frame by a deadline: RGPU_EDEADLINE after %ld ms, want about 300",
		    ms);
	rgpu_conn_close(c);
	close(raw);
	pthread_join(t.th, NULL);

	raw_pair(&raw, &c);
	rgpu_conn_set_deadline(c, rgpu_deadline_after(200));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), RGPU_ETIMEDOUT);
	ms = ms_since(&t0);
	if (ms < 190 || ms > 1500)
		fail_msg("silent peer by a deadline: RGPU_ETIMEDOUT after %ld ms, want about 200",
			 ms);
	/* the deadline removed, a frame is received whole */
	rgpu_conn_set_deadline(c, 0);
	write_all(raw, buf, hl + 50);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.body_len, 50);
	assert_int_equal(body[49], 0x08);
	free(body);
	rgpu_conn_close(c);
	close(raw);
}

/* Between frames a receiver waits as long as it takes: an idle client is not an error. */
struct late_writer {
	int fd;
	const uint8_t *buf;
	size_t len;
	unsigned delay_ms;
};

static void *late_writer_main(void *arg)
{
	struct late_writer *lw = arg;
	usleep(lw->delay_ms * 1000);
	(void)!send(lw->fd, lw->buf, lw->len, MSG_NOSIGNAL);
	return NULL;
}

static void test_idle_between_frames(void **state)
{
	(void)state;
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body;
	uint8_t buf[RGPU_FRAME_HDR_LEN + 2];
	pthread_t th;

	raw_pair(&raw, &c);
	c->frame_timeout_ms = 100;
	hand_hdr(buf, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 2, 0, 0x42, 1);
	buf[RGPU_FRAME_HDR_LEN] = 0x08;
	buf[RGPU_FRAME_HDR_LEN + 1] = 0x07;
	struct late_writer lw = {raw, buf, sizeof(buf), 400}; /* 4x the frame timeout */
	assert_int_equal(pthread_create(&th, NULL, late_writer_main, &lw), 0);
	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 0x42);
	assert_non_null(body);
	assert_int_equal(body[1], 0x07);
	free(body);
	pthread_join(th, NULL);
	close(raw);
	rgpu_conn_close(c);
}

/* ---- rgpu_frame_recv_within: the wait for a frame to begin is bounded too ---- */

static void test_recv_within(void **state)
{
	(void)state;
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body;
	uint8_t buf[RGPU_FRAME_HDR_LEN + 2];
	struct timespec t0;
	pthread_t th;
	long ms;

	hand_hdr_ar(buf, 0x55504752u, RGPU_PROTO_VERSION, 1, 0, 2, 0, 0x43, 0, 0x11, 0);
	buf[RGPU_FRAME_HDR_LEN] = 0x08;
	buf[RGPU_FRAME_HDR_LEN + 1] = 0x07;

	/* a silent peer: RGPU_ETIMEDOUT after about the timeout, nothing allocated */
	raw_pair(&raw, &c);
	body = (uint8_t *)0x1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 200),
			 RGPU_ETIMEDOUT);
	ms = ms_since(&t0);
	if (ms < 190 || ms > 3000)
		fail_msg("silent peer: RGPU_ETIMEDOUT after %ld ms, want about 200", ms);
	assert_null(body);

	/* the connection is still usable: a frame that then arrives is received whole */
	write_all(raw, buf, sizeof(buf));
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 200), 0);
	assert_int_equal(h.type, 1);
	assert_int_equal(h.seq, 0x43);
	assert_int_equal(h.ack, 0x11);
	assert_non_null(body);
	assert_int_equal(body[0], 0x08);
	assert_int_equal(body[1], 0x07);
	free(body);
	close(raw);
	rgpu_conn_close(c);

	/* a frame that comes late but within the timeout */
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 100;
	struct late_writer lw = {raw, buf, sizeof(buf), 150};
	assert_int_equal(pthread_create(&th, NULL, late_writer_main, &lw), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 3000), 0);
	ms = ms_since(&t0);
	assert_true(ms >= 100); /* it did wait for the writer */
	assert_true(ms < 3000);
	assert_int_equal(h.seq, 0x43);
	assert_non_null(body);
	assert_int_equal(body[1], 0x07);
	free(body);
	pthread_join(th, NULL);

	/* a clean end between frames is still RGPU_ECLOSED, not a timeout */
	close(raw);
	body = (uint8_t *)0x1;
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 3000),
			 RGPU_ECLOSED);
	assert_null(body);
	rgpu_conn_close(c);

	/* begun in time, then stalled: bounded by frame_timeout_ms as in rgpu_frame_recv */
	raw_pair(&raw, &c);
	c->frame_timeout_ms = 150;
	write_all(raw, buf, 10);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 5000),
			 RGPU_EDEADLINE);
	ms = ms_since(&t0);
	assert_true(ms >= 140);
	assert_true(ms < 4000);
	close(raw);
	rgpu_conn_close(c);

	/* begun in time, then closed: truncated */
	raw_pair(&raw, &c);
	write_all(raw, buf, RGPU_FRAME_HDR_LEN + 1);
	close(raw);
	assert_int_equal(rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &h, &body, 1000), RGPU_ETRUNC);
	assert_null(body);
	rgpu_conn_close(c);
}

/* ---- discard ---- */

static void test_discard(void **state)
{
	(void)state;
	int raw;
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	struct raw_writer rw;
	static uint8_t wire[3 * RGPU_FRAME_HDR_LEN + 70000 + 100 + 5];
	uint8_t got[100];
	size_t off = 0;

	/* 1: LAUNCH, 2-byte body, 70000 payload; 2: PING; 3: LAUNCH, 2-byte body, 100 payload */
	hand_hdr(wire + off, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 2, 70000, 1, 9);
	off += RGPU_FRAME_HDR_LEN;
	wire[off++] = 0x08; /* field 1 (func), varint */
	wire[off++] = 0x05;
	for (uint64_t j = 0; j < 70000; j++)
		wire[off++] = pat(1, j);
	hand_hdr(wire + off, 0x55504752u, RGPU_PROTO_VERSION, 4, 0, 0, 0, 2, 9);
	off += RGPU_FRAME_HDR_LEN;
	hand_hdr(wire + off, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 2, 100, 3, 9);
	off += RGPU_FRAME_HDR_LEN;
	wire[off++] = 0x08;
	wire[off++] = 0x06;
	for (uint64_t j = 0; j < 100; j++)
		wire[off++] = pat(3, j);

	raw_pair(&raw, &c);
	raw_writer_start(&rw, raw, wire, off);

	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 1);
	assert_int_equal(h.payload_len, 70000);
	assert_int_equal(body[0], 0x08);
	assert_int_equal(body[1], 0x05);
	free(body);
	assert_int_equal(rgpu_conn_discard(c, 0), 0);
	assert_int_equal(rgpu_conn_discard(c, 70000), 0);

	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.type, 4);
	assert_int_equal(h.seq, 2);
	assert_null(body);

	assert_int_equal(rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body), 0);
	assert_int_equal(h.seq, 3);
	assert_int_equal(h.payload_len, 100);
	assert_int_equal(body[1], 0x06);
	free(body);
	/* part read, part dropped, then the rest read */
	assert_int_equal(rgpu_conn_recv(c, got, 30), 0);
	for (int j = 0; j < 30; j++)
		assert_int_equal(got[j], pat(3, (uint64_t)j));
	assert_int_equal(rgpu_conn_discard(c, 60), 0);
	assert_int_equal(rgpu_conn_recv(c, got, 10), 0);
	for (int j = 0; j < 10; j++)
		assert_int_equal(got[j], pat(3, (uint64_t)(90 + j)));

	/* past the end of the stream */
	pthread_join(rw.th, NULL);
	assert_int_equal(rgpu_conn_discard(c, 10), RGPU_ECLOSED);
	rgpu_conn_close(c);
}

/*
 * Discarding a payload the peer cuts short: "read and drop len bytes" fails like
 * rgpu_conn_recv of len bytes would, RGPU_ETRUNC once some of them came, wherever the cut is.
 */
static int discard_cut(uint64_t len, uint64_t sent)
{
	int raw;
	struct rgpu_conn *c;
	struct raw_writer rw;
	uint8_t *wire = calloc(1, sent + 1);
	assert_non_null(wire);
	raw_pair(&raw, &c);
	raw_writer_start(&rw, raw, wire, sent);
	int ret = rgpu_conn_discard(c, len);
	pthread_join(rw.th, NULL);
	rgpu_conn_close(c);
	free(wire);
	return ret;
}

static void test_discard_truncated(void **state)
{
	(void)state;
	assert_int_equal(discard_cut(100, 100), 0);
	assert_int_equal(discard_cut(100000, 100000), 0);
	assert_int_equal(discard_cut(100, 0), RGPU_ECLOSED);
	assert_int_equal(discard_cut(100, 50), RGPU_ETRUNC);
	assert_int_equal(discard_cut(100000, 10000), RGPU_ETRUNC);
	assert_int_equal(discard_cut(100000, 16385), RGPU_ETRUNC);
	/* cut exactly after 16 KiB and 32 KiB: still a truncated payload */
	int r16 = discard_cut(100000, 16384);
	int r32 = discard_cut(100000, 32768);
	if (r16 != RGPU_ETRUNC || r32 != RGPU_ETRUNC)
		fail_msg("discard(100000) cut after 16384 / 32768 bytes: %d / %d, want RGPU_ETRUNC "
			 "(%d) as for any other cut",
			 r16, r32, RGPU_ETRUNC);
}

/* ---- hostile frames through rgpu_frame_recv ---- */

static int recv_hostile(const uint8_t *hdr, enum rgpu_peer rx, struct rgpu_frame_hdr *h,
			uint8_t **body)
{
	int raw;
	struct rgpu_conn *c;
	raw_pair(&raw, &c);
	write_all(raw, hdr, RGPU_FRAME_HDR_LEN);
	*body = (uint8_t *)0x1;
	memset(h, 0, sizeof(*h));
	int ret = rgpu_frame_recv(c, rx, h, body);
	close(raw);
	rgpu_conn_close(c);
	return ret;
}

static void test_recv_hostile(void **state)
{
	(void)state;
	uint8_t hdr[RGPU_FRAME_HDR_LEN];
	struct rgpu_frame_hdr h;
	uint8_t *body;

	hand_hdr(hdr, 0x47505255u, RGPU_PROTO_VERSION, 40, 0, 10, 0, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EMAGIC);
	assert_null(body);

	/* other protocol versions: the previous one and the next */
	const uint16_t other[] = {1, 3};
	for (size_t i = 0; i < 2; i++) {
		hand_hdr_ar(hdr, 0x55504752u, other[i], 40, 0, 10, 0, 0x55, 1, 0x54, 0x53);
		assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EVERSION);
		assert_int_equal(h.version, other[i]);
		assert_int_equal(h.type, 40);
		assert_int_equal(h.seq, 0x55);
		assert_int_equal(h.ack, 0x54);
		assert_int_equal(h.ref, 0x53);
		assert_null(body);
	}

	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 999, 0, 10, 0, 0x56, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EUNKNOWNTYPE);
	assert_int_equal(h.type, 999);
	assert_int_equal(h.seq, 0x56);
	assert_null(body);

	/* huge lengths are refused before anything is allocated or read */
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 0xffffffffu, 0, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_ETOOBIG);
	assert_int_equal(h.body_len, 0xffffffffu);
	assert_null(body);
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 10, UINT64_MAX, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_ETOOBIG);
	assert_null(body);

	/* a payload by reference (shared memory only) on a socket: a protocol error */
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, RGPU_FRAME_BYREF, 10, 100, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EPROTO);
	assert_null(body);
	/* a payload striped over lanes on a link without them: a protocol error */
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, RGPU_FRAME_LANES, 10, 100, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EPROTO);
	assert_null(body);

	/* DATA to the server */
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 27, 0, 10, 100, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EPROTO);
	assert_int_equal(h.type, 27);
	assert_null(body);
	/* LAUNCH without a body */
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, 0, 0, 0, 1, 1);
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EPROTO);
	assert_null(body);
	hand_hdr(hdr, 0x55504752u, RGPU_PROTO_VERSION, 40, 0x10, 10, 0, 1, 1); /* unknown flag */
	assert_int_equal(recv_hostile(hdr, RGPU_PEER_SERVER, &h, &body), RGPU_EPROTO);
	assert_null(body);
}

/* The client side: MSG_DATA with its chunk, and a reply. */
static void test_client_receives(void **state)
{
	(void)state;
	struct rgpu_conn *srv, *cli;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	uint8_t payload[3000], got[3000];
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	Rgpu__Status st = RGPU__STATUS__INIT;

	conn_pair(&srv, &cli);
	dc.offset = 0x123456;
	for (int i = 0; i < 3000; i++)
		payload[i] = pat(27, (uint64_t)i);
	assert_int_equal(rgpu_frame_send(srv, 27, 0, 41, 8, &dc.base, payload, 3000), 0);
	st.result = 700;
	st.async_error = 719;
	assert_int_equal(rgpu_frame_send(srv, 24, RGPU_FRAME_REPLY, 41, 8, &st.base, NULL, 0), 0);

	assert_int_equal(rgpu_frame_recv(cli, RGPU_PEER_CLIENT, &h, &body), 0);
	assert_int_equal(h.type, 27);
	assert_int_equal(h.seq, 41);
	assert_int_equal(h.payload_len, 3000);
	Rgpu__DataChunk *u = rgpu__data_chunk__unpack(NULL, h.body_len, body);
	assert_non_null(u);
	assert_int_equal(u->offset, 0x123456);
	rgpu__data_chunk__free_unpacked(u, NULL);
	free(body);
	assert_int_equal(rgpu_conn_recv(cli, got, 3000), 0);
	assert_memory_equal(got, payload, 3000);

	assert_int_equal(rgpu_frame_recv(cli, RGPU_PEER_CLIENT, &h, &body), 0);
	assert_int_equal(h.type, 24);
	assert_int_equal(h.flags, RGPU_FRAME_REPLY);
	assert_int_equal(h.seq, 41);
	assert_int_equal(h.payload_len, 0);
	Rgpu__Status *su = rgpu__status__unpack(NULL, h.body_len, body);
	assert_non_null(su);
	assert_int_equal(su->result, 700);
	assert_int_equal(su->async_error, 719);
	rgpu__status__free_unpacked(su, NULL);
	free(body);

	/* the first chunk of a copy: DataChunk{offset = 0} packs to no bytes at all */
	dc.offset = 0;
	assert_int_equal(rgpu__data_chunk__get_packed_size(&dc), 0);
	assert_int_equal(rgpu_frame_send(srv, 27, 0, 42, 8, &dc.base, payload, 100), 0);
	assert_int_equal(rgpu_frame_recv(cli, RGPU_PEER_CLIENT, &h, &body), 0);
	assert_int_equal(h.type, 27);
	assert_int_equal(h.seq, 42);
	assert_int_equal(h.body_len, 0);
	assert_int_equal(h.payload_len, 100);
	assert_null(body);
	assert_int_equal(rgpu_conn_recv(cli, got, 100), 0);
	assert_memory_equal(got, payload, 100);

	rgpu_conn_close(srv);
	rgpu_conn_close(cli);
}

/* --- rgpu_strerror ---------------------------------------------------------------------------- */

static void test_strerror(void **state)
{
	(void)state;
	const int codes[] = {
	    RGPU_OK,	   RGPU_EINVAL,	   RGPU_ENOMEM,	   RGPU_EIO,	   RGPU_EPROTO,
	    RGPU_EVERSION, RGPU_ETOOBIG,   RGPU_ECLOSED,   RGPU_ETIMEDOUT, RGPU_ECONNECT,
	    RGPU_ECUDA,	   RGPU_ENOTFOUND, RGPU_EEXIST,	   RGPU_ENOSPC,	   RGPU_EUNSUPPORTED,
	    RGPU_EWINDOW,  RGPU_ECORRUPT,  RGPU_ESYS,	   RGPU_EBUSY,	   RGPU_EUNKNOWNTYPE,
	    RGPU_EMAGIC,   RGPU_ETRUNC,	   RGPU_EDEADLINE, RGPU_EAUTH,	   RGPU_ETLS,
	    RGPU_EMOVED,
	};
	const size_t n = sizeof(codes) / sizeof(codes[0]);

	assert_int_equal(n, 26);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(codes[i], -(int)i); /* err.h numbers, never renumbered */
	for (size_t i = 0; i < n; i++) {
		const char *s = rgpu_strerror(codes[i]);
		assert_non_null(s);
		assert_true(s[0] != '\0');
		if (strcmp(s, "unknown rgpu error") == 0)
			fail_msg("code %d has no name", codes[i]);
		for (size_t k = 0; k < i; k++)
			if (strcmp(s, rgpu_strerror(codes[k])) == 0)
				fail_msg("codes %d and %d share the name \"%s\"", codes[i],
					 codes[k], s);
	}
	assert_non_null(rgpu_strerror(-26));
	assert_non_null(rgpu_strerror(1));
	assert_non_null(rgpu_strerror(-1000000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hdr_layout),
	    cmocka_unit_test(test_hdr_round_trip),
	    cmocka_unit_test(test_hdr_bad_magic_version),
	    cmocka_unit_test(test_check_unknown_types),
	    cmocka_unit_test(test_msg_names),
	    cmocka_unit_test(test_check_direction),
	    cmocka_unit_test(test_check_flags),
	    cmocka_unit_test(test_check_body),
	    cmocka_unit_test(test_check_payload),
	    cmocka_unit_test(test_frame_pack),
	    cmocka_unit_test(test_launch_round_trip),
	    cmocka_unit_test(test_wire_bytes),
	    cmocka_unit_test(test_many_frames),
	    cmocka_unit_test(test_send_interrupted),
	    cmocka_unit_test(test_send_timeout),
	    cmocka_unit_test(test_truncated_header),
	    cmocka_unit_test(test_truncated_body),
	    cmocka_unit_test(test_truncated_payload),
	    cmocka_unit_test(test_stalled_frame),
	    cmocka_unit_test(test_trickled_frame),
	    cmocka_unit_test(test_idle_between_frames),
	    cmocka_unit_test(test_recv_within),
	    cmocka_unit_test(test_discard),
	    cmocka_unit_test(test_discard_truncated),
	    cmocka_unit_test(test_recv_hostile),
	    cmocka_unit_test(test_client_receives),
	    cmocka_unit_test(test_strerror),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
