/*
 * Hostile input against a running rgpud (testing.md, reliability targets): truncated frames,
 * empty and oversized lengths, unknown types, a wrong protocol version, a wrong session and an
 * undecodable body. For each, the worker must answer MSG_ERROR and close; afterwards the
 * supervisor must still serve a well-behaved client.
 *
 * Usage: hostile PORT   (run by with_server.sh, which also checks rgpud is still alive)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/frame.h"
#include "rgpu_msgs.h"

static int port;

static int dial(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct timeval tv = {.tv_sec = 20};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void put(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n) {
		perror("write");
		exit(1);
	}
}

static void put_hdr(int fd, uint16_t version, uint16_t type, uint32_t flags, uint32_t body,
		    uint64_t payload, uint64_t seq, uint64_t session)
{
	struct rgpu_frame_hdr h = {RGPU_FRAME_MAGIC, version, type, flags, body, payload, seq,
				   session, 0, 0};
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	rgpu_frame_hdr_encode(&h, raw);
	put(fd, raw, sizeof(raw));
}

/*
 * Read one frame, checked as the interposer checks what the server sends (the client<->worker
 * message table); returns its type (reply bit in *flags), or -1 at EOF.
 */
static int get_frame(int fd, uint32_t *flags, uint8_t *body, size_t cap, uint32_t *blen,
		     uint64_t *session)
{
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	struct rgpu_frame_hdr h;
	size_t got = 0;
	while (got < sizeof(raw)) {
		ssize_t r = read(fd, raw + got, sizeof(raw) - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	if (rgpu_frame_hdr_decode(raw, &h) ||
	    rgpu_frame_check(&h, RGPU_PEER_CLIENT, &rgpu_job_msgs) || h.body_len > cap ||
	    h.payload_len) {
		fprintf(stderr, "FAIL: the server sent a malformed frame\n");
		exit(1);
	}
	for (got = 0; got < h.body_len;) {
		ssize_t r = read(fd, body + got, h.body_len - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	*flags = h.flags;
	*blen = h.body_len;
	if (session)
		*session = h.session;
	return h.type;
}

/* A valid handshake; returns the session id. */
static uint64_t hello(int fd)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	uint8_t buf[1 << 16], body[1 << 20];
	uint32_t flags, blen;
	uint64_t session;
	size_t n;
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "hostile";
	n = rgpu_frame_pack(buf, RGPU_MSG_HELLO, 0, 1, 0, &hm.base, 0);
	put(fd, buf, n);
	int t = get_frame(fd, &flags, body, sizeof(body), &blen, &session);
	Rgpu__HelloReply *rep = t == RGPU_MSG_HELLO ? rgpu__hello_reply__unpack(NULL, blen, body) : NULL;
	if (!rep || rep->result != 0 || !(flags & RGPU_FRAME_REPLY)) {
		fprintf(stderr, "FAIL: a valid hello was not answered (type %d)\n", t);
		exit(1);
	}
	session = rep->session_id;
	rgpu__hello_reply__free_unpacked(rep, NULL);
	return session;
}

/* The server must answer MSG_ERROR with a non-zero code, then close. */
static void expect_error_and_close(int fd, const char *what)
{
	uint8_t body[4096];
	uint32_t flags, blen;
	int t = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
	Rgpu__ProtocolError *pe;
	if (t != RGPU_MSG_ERROR) {
		fprintf(stderr, "FAIL %s: got frame type %d, want MSG_ERROR\n", what, t);
		exit(1);
	}
	pe = rgpu__protocol_error__unpack(NULL, blen, body);
	if (!pe || pe->code >= 0 || !pe->message || !*pe->message) {
		fprintf(stderr, "FAIL %s: MSG_ERROR without a code and message\n", what);
		exit(1);
	}
	printf("  %-34s -> protocol error %d: %s\n", what, pe->code, pe->message);
	rgpu__protocol_error__free_unpacked(pe, NULL);
	if (get_frame(fd, &flags, body, sizeof(body), &blen, NULL) != -1) {
		fprintf(stderr, "FAIL %s: connection not closed after the error\n", what);
		exit(1);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	const char *p = argc > 1 ? argv[1] : getenv("RGPU_E2E_PORT");
	uint8_t junk[64] = {0};
	uint64_t s;
	int fd;

	if (!p) {
		fprintf(stderr, "usage: hostile PORT\n");
		return 2;
	}
	port = atoi(p);

	/* before the handshake */
	fd = dial();
	put_hdr(fd, RGPU_PROTO_VERSION + 1, RGPU_MSG_HELLO, 0, 2, 0, 1, 0);
	put(fd, junk, 2);
	expect_error_and_close(fd, "wrong protocol version");

	fd = dial();
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_HELLO, 0, 0, 0, 1, 0);
	expect_error_and_close(fd, "hello with length 0");

	fd = dial();
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_HELLO, 0, RGPU_MAX_BODY + 1, 0, 1, 0);
	expect_error_and_close(fd, "body length beyond the limit");

	fd = dial();
	put_hdr(fd, RGPU_PROTO_VERSION, 999, 0, 4, 0, 1, 0);
	expect_error_and_close(fd, "unknown type");

	fd = dial();
	{
		uint8_t raw[RGPU_FRAME_HDR_LEN];
		struct rgpu_frame_hdr h = {RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION,
					   RGPU_MSG_HELLO, 0, 8, 0, 1, 0, 0, 0};
		rgpu_frame_hdr_encode(&h, raw);
		put(fd, raw, 20);
		shutdown(fd, SHUT_WR);
	}
	expect_error_and_close(fd, "truncated frame");

	fd = dial();
	{
		char http[RGPU_FRAME_HDR_LEN] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
		put(fd, http, sizeof(http));
	}
	expect_error_and_close(fd, "not an rgpu frame (bad magic)");

	/* after a valid handshake */
	fd = dial();
	s = hello(fd);
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_LAUNCH, 0, 0, 0, 1, s);
	expect_error_and_close(fd, "launch with length 0");

	fd = dial();
	s = hello(fd);
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_MEMCPY_HTOD, 0, 4, 1ull << 40, 1, s);
	expect_error_and_close(fd, "payload length beyond the limit");

	fd = dial();
	s = hello(fd);
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_STREAM_SYNC, 0, 4, 0, 1, s + 1);
	put(fd, junk, 4);
	expect_error_and_close(fd, "wrong session id");

	fd = dial();
	s = hello(fd);
	{
		/* field 1 (module), then field 2 (hash) claiming 2^31 bytes: undecodable */
		uint8_t body[] = {0x08, 0x01, 0x12, 0xff, 0xff, 0xff, 0xff, 0x07};
		put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_MODULE_LOAD, 0, sizeof(body), 0, 1, s);
		put(fd, body, sizeof(body));
	}
	expect_error_and_close(fd, "undecodable body (huge count)");

	fd = dial();
	s = hello(fd);
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_DATA, 0, 2, 0, 1, s);
	put(fd, junk, 2);
	expect_error_and_close(fd, "server-only type from a client");

	fd = dial();
	s = hello(fd);
	put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_HELLO, 0, 2, 0, 1, s);
	put(fd, "\x08\x01", 2);
	expect_error_and_close(fd, "second hello");

	/* the supervisor still serves others */
	fd = dial();
	hello(fd);
	close(fd);
	printf("hostile: every bad frame refused, server still serving\n");
	return 0;
}
