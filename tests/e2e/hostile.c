/*
 * Hostile clients against a running rgpud (testing.md, reliability targets), run by
 * with_server.sh (which also checks rgpud is still alive; the port is $RGPU_E2E_PORT, the
 * server's log $RGPU_E2E_LOGFILE).
 *
 *   hostile            truncated frames, empty and oversized lengths, unknown types, a wrong
 *                      protocol version, a wrong session and an undecodable body: for each,
 *                      the worker must answer MSG_ERROR and close; afterwards the supervisor
 *                      must still serve a well-behaved client.
 *   hostile trickle N  a HELLO, then a frame after a valid one, sent a byte at a time over 2N
 *                      seconds or more: each connection must be closed N s (+ 1) after it
 *                      began (rgpud --hello-timeout N --frame-timeout N).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
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

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait up to 3 s for the server's log to contain what; exit 1 if it never does. */
static void expect_log(const char *what)
{
	const char *path = getenv("RGPU_E2E_LOGFILE");
	char line[1024];
	for (int i = 0; path && i < 60; i++) {
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, what)) {
				fclose(f);
				printf("  log: %s", line);
				return;
			}
		if (f)
			fclose(f);
		usleep(50000);
	}
	fprintf(stderr, "FAIL: the server's log (%s) never said \"%s\"\n", path ? path : "unset",
		what);
	exit(1);
}

/*
 * Send frame[0..len) a byte every gap_ms, stopping as soon as the server sends anything or
 * closes; exit 1 if it has done neither limit_s after the first byte. Returns the seconds from
 * the first byte to the server's move; *sent: the bytes sent.
 */
static double trickle_frame(int fd, const uint8_t *frame, size_t len, int gap_ms, double limit_s,
			    size_t *sent)
{
	double t0 = now_s();
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	for (*sent = 0;;) {
		if (*sent < len && send(fd, frame + *sent, 1, MSG_NOSIGNAL) == 1)
			(*sent)++;
		if (poll(&pf, 1, gap_ms) > 0)
			return now_s() - t0;
		if (now_s() - t0 > limit_s) {
			fprintf(stderr,
				"FAIL: still connected %.1f s after the first byte, %zu of %zu "
				"bytes sent a byte every %d ms (limit %.1f s)\n",
				now_s() - t0, *sent, len, gap_ms, limit_s);
			exit(1);
		}
	}
}

/* A trickled frame must have been cut between n - 0.1 and n + 1 s after its first byte. */
static void expect_cut_at(const char *what, double t, int n, size_t sent, size_t len)
{
	if (t < n - 0.1 || t > n + 1.0) {
		fprintf(stderr,
			"FAIL %s: the server moved %.2f s after the first byte, want %d to %d s\n",
			what, t, n, n + 1);
		exit(1);
	}
	printf("  %-34s -> closed after %.2f s (%zu of %zu bytes sent)\n", what, t, sent, len);
}

/*
 * Issue 8, item 3: the frame and hello limits were per recv(), so a HELLO trickled over 75 s
 * and a PING over 60 s were accepted. With --hello-timeout N --frame-timeout N, a HELLO must be
 * whole N s after connecting, any later frame N s after its first byte.
 */
static int trickle(int n)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	uint8_t buf[1024], body[4096];
	uint32_t flags, blen;
	size_t len, sent;
	double t;
	int fd, type, gap;

	/* a HELLO over 2n s or more: an error (or a reset) and a close after n s */
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "hostile";
	len = rgpu_frame_pack(buf, RGPU_MSG_HELLO, 0, 0, 0, &hm.base, 0);
	gap = (int)(2000 * n / (int)len) > 250 ? (int)(2000 * n / (int)len) : 250;
	fd = dial();
	t = trickle_frame(fd, buf, len, gap, n + 1.0, &sent);
	type = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
	if (type == RGPU_MSG_HELLO) {
		fprintf(stderr, "FAIL: a HELLO trickled over %.1f s was answered\n", t);
		return 1;
	}
	if (type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, blen, body);
		if (!pe || pe->code != RGPU_EDEADLINE) {
			fprintf(stderr,
				"FAIL: a trickled HELLO got error %d, want %d (RGPU_EDEADLINE)\n",
				pe ? pe->code : 0, RGPU_EDEADLINE);
			return 1;
		}
		printf("  trickled HELLO: MSG_ERROR %d: %s\n", pe->code, pe->message);
		rgpu__protocol_error__free_unpacked(pe, NULL);
		type = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
	}
	if (type != -1) {
		fprintf(stderr, "FAIL: frame type %d after a trickled HELLO, want a close\n", type);
		return 1;
	}
	close(fd);
	expect_cut_at("HELLO a byte at a time", t, n, sent, len);
	char what[128];
	snprintf(what, sizeof(what), "no whole MSG_HELLO within %d s of connecting", n);
	expect_log(what);

	/* after a valid hello, a PING (a bare header) the same way: the link is closed */
	fd = dial();
	uint64_t s = hello(fd);
	struct rgpu_frame_hdr h = {
	    RGPU_FRAME_MAGIC, RGPU_PROTO_VERSION, RGPU_MSG_PING, 0, 0, 0, 1, s, 0, 0};
	rgpu_frame_hdr_encode(&h, buf);
	len = RGPU_FRAME_HDR_LEN;
	gap = (int)(2000 * n / (int)len) > 250 ? (int)(2000 * n / (int)len) : 250;
	t = trickle_frame(fd, buf, len, gap, n + 1.0, &sent);
	type = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
	if (type != -1) {
		fprintf(stderr,
			"FAIL: frame type %d (flags %u) for a PING trickled over %.1f s, want "
			"a close\n",
			type, flags, t);
		return 1;
	}
	close(fd);
	expect_cut_at("PING a byte at a time", t, n, sent, len);
	snprintf(what, sizeof(what), "did not arrive whole within %d s of its first byte", n);
	expect_log(what);
	printf("hostile trickle: both closed %d s after they began\n", n);
	return 0;
}

static int bad_frames(void)
{
	uint8_t junk[64] = {0};
	uint64_t s;
	int fd;

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

int main(int argc, char **argv)
{
	const char *p = getenv("RGPU_E2E_PORT");

	if (!p) {
		fprintf(stderr, "hostile: run me under with_server.sh (no RGPU_E2E_PORT)\n");
		return 2;
	}
	port = atoi(p);
	if (argc == 1)
		return bad_frames();
	if (argc == 3 && !strcmp(argv[1], "trickle"))
		return trickle(atoi(argv[2]));
	fprintf(stderr, "usage: hostile [trickle SECONDS]\n");
	return 2;
}
