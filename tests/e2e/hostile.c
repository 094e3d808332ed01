/*
 * Hostile clients against a running rgpud (testing.md, reliability targets), run by
 * with_server.sh (which also checks rgpud is still alive; the port is $RGPU_E2E_PORT, the
 * server's log $RGPU_E2E_LOGFILE).
 *
 *   hostile            truncated frames, empty and oversized lengths, unknown types, a wrong
 *                      protocol version, a wrong session, an undecodable body and the two
 *                      encodings protobuf-c mishandles (pbdecode.c): for each,
 *                      the worker must answer MSG_ERROR and close; afterwards the supervisor
 *                      must still serve a well-behaved client.
 *   hostile trickle N  a HELLO, then a frame after a valid one, sent a byte at a time over 2N
 *                      seconds or more: each connection must be closed N s (+ 1) after it
 *                      began (rgpud --hello-timeout N --frame-timeout N).
 *   hostile flood MIB  block the worker's executor, then send 32 MiB frames (16 MiB body, 16
 *                      MiB payload) as fast as the server takes them: the worker must stop
 *                      reading, its RSS staying under MIB (rgpud --max-queued) + 64 MiB.
 *   hostile idle N     a session silent after its hello ends N s (+ 1) later, its worker
 *                      freed; one that pings, or whose executor is blocked, is kept (rgpud
 *                      --idle-timeout N).
 *   hostile sessions N PROGRAM  with rgpud --max-sessions N: session N + 1 is refused with
 *                      CUDA_ERROR_DEVICE_UNAVAILABLE, and so is PROGRAM's cuInit; a resume is
 *                      served; a session that ends frees its place.
 *
 *   The first form then sends well-formed requests whose values are hostile, each on a
 *   session of its own: ranges whose arithmetic wraps around 2^64 or that leave the window,
 *   a launch with fewer parameter bytes than its function takes, copies from a module's
 *   globals after it is unloaded. Each must get CUDA_ERROR_INVALID_VALUE, leave the session
 *   serving, and be refused by the worker's own checks before the driver sees it: the
 *   worker's log must say so (simgpu would refuse most of them too, and a real driver may
 *   not). And an image the driver refuses must not enter the module cache. It needs
 *   RGPU_TEST_IMAGE (tests/progs' kernels.fatbin).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/hash.h"
#include "rgpu/transport.h"
#include "rgpu_msgs.h"

#define FAIL(...)                                                                              \
	do {                                                                                   \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                         \
		fputc('\n', stderr);                                                           \
		exit(1);                                                                       \
	} while (0)

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

/*
 * Say hello (resuming `resume`'s job when it is not NULL) and return the server's HelloReply,
 * whatever its result (the caller frees it); exit 1 when there is none.
 */
static Rgpu__HelloReply *hello_reply(int fd, const Rgpu__HelloReply *resume)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	uint8_t buf[1 << 16], body[1 << 20];
	uint32_t flags, blen;
	uint64_t session;
	size_t n;
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "hostile";
	if (resume) {
		hm.job_id = resume->job_id;
		hm.resume_token = resume->resume_token;
	}
	n = rgpu_frame_pack(buf, RGPU_MSG_HELLO, 0, 1, resume ? resume->session_id : 0, &hm.base,
			    0);
	put(fd, buf, n);
	int t = get_frame(fd, &flags, body, sizeof(body), &blen, &session);
	Rgpu__HelloReply *rep =
	    t == RGPU_MSG_HELLO ? rgpu__hello_reply__unpack(NULL, blen, body) : NULL;
	if (!rep || !(flags & RGPU_FRAME_REPLY)) {
		fprintf(stderr, "FAIL: a valid hello was not answered (type %d)\n", t);
		exit(1);
	}
	return rep;
}

/* A valid handshake; returns the session id. */
static uint64_t hello(int fd)
{
	Rgpu__HelloReply *rep = hello_reply(fd, NULL);
	uint64_t session = rep->session_id;
	if (rep->result != 0) {
		fprintf(stderr, "FAIL: a valid hello was refused: %d (%s)\n", rep->result,
			rep->error);
		exit(1);
	}
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

/* ---- well-formed frames with hostile values ------------------------------------------- */

/* A session speaking the protocol properly (the job message table, sequence numbers). */
struct sess {
	struct rgpu_conn *c;
	uint64_t id, seq;
	uint64_t window, window_size; /* from the hello reply */
};

#define CTX 1 /* the client id of the session's context */

static void sess_open(struct sess *s)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	Rgpu__CtxCreate cc = RGPU__CTX_CREATE__INIT;
	Rgpu__HelloReply *rep = NULL;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	memset(s, 0, sizeof(*s));
	if (rgpu_tcp_connect("127.0.0.1", port, 5000, &s->c))
		FAIL("cannot connect to port %d", port);
	rgpu_conn_set_msgs(s->c, &rgpu_job_msgs);
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "hostile";
	if (rgpu_frame_send(s->c, RGPU_MSG_HELLO, 0, 0, 0, &hm.base, NULL, 0) ||
	    rgpu_frame_recv_within(s->c, RGPU_PEER_CLIENT, &h, &body, 20000))
		FAIL("no answer to a hello");
	if (h.type == RGPU_MSG_HELLO)
		rep = rgpu__hello_reply__unpack(NULL, h.body_len, body);
	free(body);
	if (!rep || rep->result != 0)
		FAIL("a valid hello was refused");
	s->id = rep->session_id;
	s->window = rep->window_base;
	s->window_size = rep->window_size;
	rgpu__hello_reply__free_unpacked(rep, NULL);
	cc.ctx = CTX;
	cc.primary = 1;
	if (rgpu_frame_send(s->c, RGPU_MSG_CTX_CREATE, 0, ++s->seq, s->id, &cc.base, NULL, 0))
		FAIL("cannot send a context create");
}

static void post(struct sess *s, uint16_t type, const ProtobufCMessage *m, const void *payload,
		 uint64_t plen)
{
	if (rgpu_frame_send(s->c, type, 0, ++s->seq, s->id, m, payload, plen))
		FAIL("cannot send %s", rgpu_msg_name(type));
}

/*
 * Send a request and wait for its reply (acknowledgements and pushed output are skipped);
 * returns the reply unpacked with rd. *data: bytes of MSG_DATA that came for it.
 */
static ProtobufCMessage *call(struct sess *s, uint16_t type, const ProtobufCMessage *m,
			      const void *payload, uint64_t plen,
			      const ProtobufCMessageDescriptor *rd, uint64_t *data)
{
	ProtobufCMessage *rep = NULL;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	post(s, type, m, payload, plen);
	if (data)
		*data = 0;
	for (;;) {
		if (rgpu_frame_recv_within(s->c, RGPU_PEER_CLIENT, &h, &body, 20000))
			FAIL("no reply to %s: the worker is gone", rgpu_msg_name(type));
		if (h.type == RGPU_MSG_ERROR)
			FAIL("%s ended the session with a protocol error", rgpu_msg_name(type));
		if (h.payload_len && rgpu_conn_discard(s->c, h.payload_len))
			FAIL("a payload was cut short");
		/* a small synchronous copy's bytes may come in its reply (capability SHM) */
		if ((h.type == RGPU_MSG_DATA || (h.flags & RGPU_FRAME_REPLY)) && h.ref == s->seq &&
		    data)
			*data += h.payload_len;
		if ((h.flags & RGPU_FRAME_REPLY) && h.ref == s->seq)
			break;
		free(body);
		body = NULL;
	}
	if (h.type != type || !(rep = protobuf_c_message_unpack(rd, NULL, h.body_len, body)))
		FAIL("%s answered by an undecodable %s", rgpu_msg_name(type),
		     rgpu_msg_name(h.type));
	free(body);
	return rep;
}

/* A PING: the error of the fire-and-forget work before it (its async_error). */
static int ping_async(struct sess *s)
{
	Rgpu__Status *st = (Rgpu__Status *)call(s, RGPU_MSG_PING, NULL, NULL, 0,
						&rgpu__status__descriptor, NULL);
	int r = st->async_error;

	if (st->result != 0)
		FAIL("a ping failed: %d", st->result);
	rgpu__status__free_unpacked(st, NULL);
	return r;
}

/* A synchronous device-to-host copy: its result; *got: the bytes that came back. */
static int dtoh(struct sess *s, uint64_t src, uint64_t size, uint64_t *got)
{
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	Rgpu__Status *st;
	int r;

	mc.src = src;
	mc.size = size;
	mc.ctx = CTX;
	st = (Rgpu__Status *)call(s, RGPU_MSG_MEMCPY_DTOH, &mc.base, NULL, 0,
				  &rgpu__status__descriptor, got);
	r = st->result;
	rgpu__status__free_unpacked(st, NULL);
	return r;
}

/* Map 2 MiB at the window's base (as cuMemAlloc's first backing does). */
static void map_window(struct sess *s)
{
	Rgpu__MemAlloc ma = RGPU__MEM_ALLOC__INIT;
	Rgpu__Status *st;

	ma.map_addr = s->window;
	ma.map_size = 2u << 20;
	st = (Rgpu__Status *)call(s, RGPU_MSG_MEM_ALLOC, &ma.base, NULL, 0,
				  &rgpu__status__descriptor, NULL);
	if (st->result != 0)
		FAIL("mapping 2 MiB at the window's base: %d", st->result);
	rgpu__status__free_unpacked(st, NULL);
}

/* Lines of the server log that hold `what`. */
static int log_count(const char *what)
{
	const char *path = getenv("RGPU_E2E_LOGFILE");
	char line[2048];
	int n = 0;
	FILE *f = path ? fopen(path, "r") : NULL;

	if (!f)
		FAIL("no rgpud log (RGPU_E2E_LOGFILE)");
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/* The worker refused it itself: exactly one warning holding `what` in its log. */
static void expect_refusal_logged(const char *what)
{
	int n = log_count(what);
	if (n != 1)
		FAIL("%d log lines hold \"%s\", want 1 (the worker's own refusal)", n, what);
}

static void sess_close(struct sess *s)
{
	rgpu_frame_send(s->c, RGPU_MSG_GOODBYE, 0, ++s->seq, s->id, NULL, NULL, 0);
	rgpu_conn_close(s->c);
}

#define CUDA_ERROR_INVALID_VALUE 1

/* One memset on a fresh session with 2 MiB mapped at the window's base: its error. */
static int memset_on(struct sess *s, uint64_t off, uint32_t esize, uint64_t width,
		     uint64_t height, uint64_t pitch)
{
	Rgpu__Memset ms = RGPU__MEMSET__INIT;

	ms.dst = s->window + off;
	ms.value = 0xa5;
	ms.elem_size = esize;
	ms.width = width;
	ms.height = height;
	ms.pitch = pitch;
	ms.ctx = CTX;
	post(s, RGPU_MSG_MEMSET, &ms.base, NULL, 0);
	return ping_async(s);
}

/* tests/progs' kernels image ($RGPU_TEST_IMAGE), or NULL when the build has none */
static uint8_t *kernels_image(size_t *len)
{
	const char *path = getenv("RGPU_TEST_IMAGE");
	FILE *f = path && *path ? fopen(path, "rb") : NULL;
	uint8_t *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		FAIL("cannot read %s", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Load an image as module id `module`, shipping its bytes (has_image) or not: the reply. */
static Rgpu__ModuleLoadReply *module_load(struct sess *s, uint64_t module, const uint8_t *img,
					  size_t len, int ship)
{
	Rgpu__ModuleLoad ml = RGPU__MODULE_LOAD__INIT;
	uint8_t h[RGPU_HASH_LEN];

	rgpu_sha256(img, len, h);
	ml.module = module;
	ml.hash.data = h;
	ml.hash.len = sizeof(h);
	ml.image_size = len;
	ml.ctx = CTX;
	ml.has_image = ship;
	return (Rgpu__ModuleLoadReply *)call(s, RGPU_MSG_MODULE_LOAD, &ml.base, ship ? img : NULL,
					     ship ? len : 0, &rgpu__module_load_reply__descriptor,
					     NULL);
}

/* A launch of add_counter(int) with plen bytes of parameters: its error. */
static int launch_add_counter(struct sess *s, uint64_t func, uint64_t plen)
{
	Rgpu__Launch l = RGPU__LAUNCH__INIT;
	int v = 3;

	l.func = func;
	l.grid_x = l.grid_y = l.grid_z = 1;
	l.block_x = l.block_y = l.block_z = 1;
	l.ctx = CTX;
	l.nparams = 1;
	post(s, RGPU_MSG_LAUNCH, &l.base, plen ? &v : NULL, plen);
	return ping_async(s);
}

static void hostile_launch(void)
{
	Rgpu__FuncGet fg = RGPU__FUNC_GET__INIT;
	Rgpu__ModuleLoadReply *ml;
	struct sess s;
	size_t len = 0;
	uint8_t *img = kernels_image(&len);
	int r;

	if (!img) {
		printf("  (no RGPU_TEST_IMAGE: the launch case is skipped)\n");
		return;
	}
	sess_open(&s);
	ml = module_load(&s, 2, img, len, 1);
	if (ml->result != 0)
		FAIL("loading the kernels: %d", ml->result);
	rgpu__module_load_reply__free_unpacked(ml, NULL);
	fg.func = 3;
	fg.parent = 2;
	fg.name = "add_counter";
	fg.kind = RGPU__FUNC_KIND__FUNC_MODULE;
	fg.ctx = CTX;
	post(&s, RGPU_MSG_FUNC_GET, &fg.base, NULL, 0);
	r = launch_add_counter(&s, 3, 4);
	if (r != 0)
		FAIL("a valid launch of add_counter: %d", r);
	/* no parameter bytes: the driver would read add_counter's int past the payload */
	r = launch_add_counter(&s, 3, 0);
	if (r != CUDA_ERROR_INVALID_VALUE)
		FAIL("launch without its parameters: %d, want CUDA_ERROR_INVALID_VALUE", r);
	expect_refusal_logged("launch refused: 0 bytes of parameters for a function whose "
			      "parameters span 4");
	sess_close(&s);
	free(img);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "launch short of its parameters");
}

/* Look up a module global (record id 0: a client that keeps no state log); its address. */
static uint64_t global_get(struct sess *s, uint64_t module, const char *name, uint64_t id,
			   uint64_t want_size)
{
	Rgpu__GlobalGet gg = RGPU__GLOBAL_GET__INIT;
	Rgpu__GlobalReply *rep;
	uint64_t addr;

	gg.module = module;
	gg.name = (char *)name;
	gg.ctx = CTX;
	gg.global = id;
	rep = (Rgpu__GlobalReply *)call(s, RGPU_MSG_GLOBAL_GET, &gg.base, NULL, 0,
					&rgpu__global_reply__descriptor, NULL);
	if (rep->result != 0 || rep->size != want_size)
		FAIL("global %s: result %d, %llu bytes", name, rep->result,
		     (unsigned long long)rep->size);
	addr = rep->addr;
	rgpu__global_reply__free_unpacked(rep, NULL);
	return addr;
}

/*
 * A module's globals are the job's memory only while it is loaded: after MSG_MODULE_UNLOAD,
 * copies from their addresses are refused by the worker, whether or not the lookup made a
 * state-log record (the interposer refuses them too; this client is not the interposer).
 */
static void unloaded_globals(void)
{
	Rgpu__ModuleLoadReply *ml;
	Rgpu__ObjRef un = RGPU__OBJ_REF__INIT;
	uint64_t table, counter, got;
	struct sess s;
	size_t len = 0;
	uint8_t *img = kernels_image(&len);
	char what[160];
	int r;

	if (!img) {
		printf("  (no RGPU_TEST_IMAGE: the unloaded-globals case is skipped)\n");
		return;
	}
	sess_open(&s);
	ml = module_load(&s, 2, img, len, 1);
	if (ml->result != 0)
		FAIL("loading the kernels: %d", ml->result);
	rgpu__module_load_reply__free_unpacked(ml, NULL);
	table = global_get(&s, 2, "g_table", 0, 1024);
	counter = global_get(&s, 2, "g_counter", 5, 4);
	r = dtoh(&s, table + 16, 16, &got);
	if (r != 0 || got != 16)
		FAIL("a copy from a loaded global: %d, %llu bytes", r, (unsigned long long)got);
	r = dtoh(&s, counter, 4, &got);
	if (r != 0 || got != 4)
		FAIL("a copy from a loaded global: %d, %llu bytes", r, (unsigned long long)got);
	un.id = 2;
	un.ctx = CTX;
	post(&s, RGPU_MSG_MODULE_UNLOAD, &un.base, NULL, 0);
	r = dtoh(&s, table + 16, 16, &got);
	if (r != CUDA_ERROR_INVALID_VALUE || got != 0)
		FAIL("a copy from an unloaded global: %d, %llu bytes back", r,
		     (unsigned long long)got);
	snprintf(what, sizeof(what), "device-to-host copy refused: [%#llx, +16 bytes)",
		 (unsigned long long)(table + 16));
	expect_refusal_logged(what);
	r = dtoh(&s, counter, 4, &got);
	if (r != CUDA_ERROR_INVALID_VALUE || got != 0)
		FAIL("a copy from an unloaded global: %d, %llu bytes back", r,
		     (unsigned long long)got);
	if (ping_async(&s) != 0)
		FAIL("the session does not serve after the refusals");
	sess_close(&s);
	free(img);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "copies from an unloaded module's globals");
}

/*
 * An image the driver refuses (an ELF header that rgpu_image_check accepts, for no CUDA
 * machine) must not be cached: loading it again by its hash alone must ask for its bytes.
 */
static void refused_image(void)
{
	Rgpu__ModuleLoadReply *ml;
	uint8_t elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	struct sess s;

	elf[16] = 2;  /* e_type ET_EXEC */
	elf[18] = 62; /* e_machine EM_X86_64, not EM_CUDA */
	elf[52] = 64; /* e_ehsize */
	sess_open(&s);
	ml = module_load(&s, 2, elf, sizeof(elf), 1);
	if (ml->result != 200 /* CUDA_ERROR_INVALID_IMAGE */ || ml->need_image)
		FAIL("an image for no GPU: result %d, need_image %d", ml->result, ml->need_image);
	rgpu__module_load_reply__free_unpacked(ml, NULL);
	ml = module_load(&s, 3, elf, sizeof(elf), 0);
	if (ml->result != 0 || !ml->need_image)
		FAIL("a refused image was cached: loading it by hash gave result %d, need_image %d",
		     ml->result, ml->need_image);
	rgpu__module_load_reply__free_unpacked(ml, NULL);
	sess_close(&s);
	printf("  %-40s -> CUDA_ERROR_INVALID_IMAGE, not cached\n", "an image the driver refuses");
}

static void hostile_ranges(void)
{
	struct sess s;
	char what[256];
	uint64_t got;
	uint8_t chunk[16] = {1, 2, 3};
	int r;

	/*
	 * A 2D memset of 2^24 + 1 rows, 2^40 bytes apart: pitch * (rows - 1) is 2^64, which
	 * wraps to 0, so a check that wraps sees 16 bytes while the driver would be asked to
	 * write rows up to 16 EiB past the window.
	 */
	sess_open(&s);
	map_window(&s);
	r = memset_on(&s, 0, 1, 16, 2, 4096);
	if (r != 0)
		FAIL("a valid 2D memset failed: %d", r);
	r = memset_on(&s, 0, 1, 16, (1ull << 24) + 1, 1ull << 40);
	if (r != CUDA_ERROR_INVALID_VALUE)
		FAIL("memset whose span wraps: %d, want CUDA_ERROR_INVALID_VALUE", r);
	expect_refusal_logged("memset refused: 16777217 rows of 16 1-byte elements, "
			      "1099511627776 bytes apart, span more than 2^64 bytes");
	if (ping_async(&s) != 0)
		FAIL("the session does not serve after a refused memset");
	sess_close(&s);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "memset whose span wraps 2^64");

	/* a memset whose last row ends one byte past the window */
	sess_open(&s);
	map_window(&s);
	r = memset_on(&s, s.window_size - 4096, 4, 2, 2, 4092);
	if (r != CUDA_ERROR_INVALID_VALUE)
		FAIL("memset past the window: %d, want CUDA_ERROR_INVALID_VALUE", r);
	snprintf(what, sizeof(what), "memset refused: [%#llx, +4100 bytes) is not device memory",
		 (unsigned long long)(s.window + s.window_size - 4096));
	expect_refusal_logged(what);
	sess_close(&s);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "memset past the window's end");

	/* a host-to-device copy whose end wraps around 2^64 */
	sess_open(&s);
	map_window(&s);
	{
		Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
		mc.dst = ~0ull - 7;
		mc.ctx = CTX;
		post(&s, RGPU_MSG_MEMCPY_HTOD, &mc.base, chunk, sizeof(chunk));
	}
	r = ping_async(&s);
	if (r != CUDA_ERROR_INVALID_VALUE)
		FAIL("copy to 2^64 - 8: %d, want CUDA_ERROR_INVALID_VALUE", r);
	expect_refusal_logged("host-to-device copy refused: [0xfffffffffffffff8, +16 bytes)");
	sess_close(&s);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "copy to the device that wraps 2^64");

	/* a device-to-host copy from the window's base for 2^64 - 2^20 bytes */
	sess_open(&s);
	map_window(&s);
	r = dtoh(&s, s.window, 16, &got);
	if (r != 0 || got != 16)
		FAIL("a valid copy from the device: %d, %llu bytes", r, (unsigned long long)got);
	r = dtoh(&s, s.window, ~0ull - (1ull << 20) + 1, &got);
	if (r != CUDA_ERROR_INVALID_VALUE || got != 0)
		FAIL("copy of 2^64 - 2^20 bytes: %d, %llu bytes back", r, (unsigned long long)got);
	snprintf(what, sizeof(what),
		 "device-to-host copy refused: [%#llx, +18446744073708503040 bytes)",
		 (unsigned long long)s.window);
	expect_refusal_logged(what);
	sess_close(&s);
	printf("  %-40s -> CUDA_ERROR_INVALID_VALUE, refused by the worker\n",
	       "copy from the device past the window");
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

/* This connection's local port, as the server's log names the client. */
static int local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	return ntohs(a.sin_port);
}

/* The worker serving connection fd, from the supervisor's line "client ADDR: worker PID". */
static int worker_pid(int fd)
{
	const char *path = getenv("RGPU_E2E_LOGFILE");
	char want[64], line[1024];
	snprintf(want, sizeof(want), "client 127.0.0.1:%d: worker ", local_port(fd));
	for (int i = 0; path && i < 60; i++) {
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, want);
			if (p) {
				fclose(f);
				return atoi(p + strlen(want));
			}
		}
		if (f)
			fclose(f);
		usleep(50000);
	}
	fprintf(stderr, "FAIL: no worker for port %d in the server's log\n", local_port(fd));
	exit(1);
}

/* VmRSS of process pid in KiB, or -1 once it is gone. */
static long rss_kib(int pid)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}

/* One request frame with a protobuf body and no payload. */
static void send_msg(int fd, uint16_t type, uint64_t seq, uint64_t session,
		     const ProtobufCMessage *m)
{
	uint8_t buf[4096];
	put(fd, buf, rgpu_frame_pack(buf, type, 0, seq, session, m, 0));
}

/*
 * Make the worker's executor wait for good: a host function on the NULL stream, whose
 * MSG_CALLBACK this client never answers, then a synchronize of that stream. Returns once the
 * callback has come (the stream is stuck; the synchronize after it is next). Uses seq 1-3.
 */
static void block_executor(int fd, uint64_t s)
{
	Rgpu__CtxCreate cc = RGPU__CTX_CREATE__INIT;
	Rgpu__HostFunc hf = RGPU__HOST_FUNC__INIT;
	Rgpu__StreamOp so = RGPU__STREAM_OP__INIT;
	uint8_t body[4096];
	uint32_t flags, blen;
	int t;

	cc.ctx = 1;
	cc.primary = 1;
	send_msg(fd, RGPU_MSG_CTX_CREATE, 1, s, &cc.base);
	hf.ctx = 1;
	hf.callback = 7;
	send_msg(fd, RGPU_MSG_HOST_FUNC, 2, s, &hf.base);
	so.ctx = 1;
	send_msg(fd, RGPU_MSG_STREAM_SYNC, 3, s, &so.base);
	while ((t = get_frame(fd, &flags, body, sizeof(body), &blen, NULL)) == RGPU_MSG_ACK)
		;
	if (t != RGPU_MSG_CALLBACK) {
		fprintf(stderr, "FAIL: frame type %d, want the host function's MSG_CALLBACK\n", t);
		exit(1);
	}
}

/* The worker process pid must be gone (reaped) within 1 s. */
static void expect_worker_gone(int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", pid);
	for (int i = 0; i < 20 && access(path, F_OK) == 0; i++)
		usleep(50000);
	if (access(path, F_OK) == 0) {
		fprintf(stderr, "FAIL: worker %d still there 1 s after its session ended\n", pid);
		exit(1);
	}
}

/* A PING and its reply (MSG_ACK frames before it skipped); exit 1 on anything else. */
static void ping(int fd, uint64_t seq, uint64_t s)
{
	uint8_t body[4096];
	uint32_t flags, blen;
	int t;
	send_msg(fd, RGPU_MSG_PING, seq, s, NULL);
	while ((t = get_frame(fd, &flags, body, sizeof(body), &blen, NULL)) == RGPU_MSG_ACK)
		;
	if (t != RGPU_MSG_PING || !(flags & RGPU_FRAME_REPLY)) {
		fprintf(stderr, "FAIL: PING %llu answered with frame type %d (flags %u)\n",
			(unsigned long long)seq, t, flags);
		exit(1);
	}
}

/*
 * Issue 8, item 8: with --idle-timeout N, a session that sends nothing and runs nothing is
 * ended N s (+ 1) after its last frame, with MSG_ERROR, and its worker freed; one that sends
 * frames, or whose executor is busy, is not.
 */
static int idle(int n)
{
	uint8_t body[4096];
	uint32_t flags, blen;
	double t0, t;
	int fd, pid, type;
	uint64_t s;

	/* silent after its hello */
	fd = dial();
	s = hello(fd);
	t0 = now_s();
	pid = worker_pid(fd);
	type = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
	t = now_s() - t0;
	Rgpu__ProtocolError *pe =
	    type == RGPU_MSG_ERROR ? rgpu__protocol_error__unpack(NULL, blen, body) : NULL;
	if (!pe || pe->code != RGPU_ETIMEDOUT) {
		fprintf(stderr,
			"FAIL: an idle session got frame type %d (error %d) after %.2f s, "
			"want MSG_ERROR %d (RGPU_ETIMEDOUT)\n",
			type, pe ? pe->code : 0, t, RGPU_ETIMEDOUT);
		return 1;
	}
	printf("  idle session: MSG_ERROR %d after %.2f s: %s\n", pe->code, t, pe->message);
	rgpu__protocol_error__free_unpacked(pe, NULL);
	if (t < n - 0.1 || t > n + 1.0) {
		fprintf(stderr, "FAIL: an idle session ended after %.2f s, want %d to %d s\n", t, n,
			n + 1);
		return 1;
	}
	if (get_frame(fd, &flags, body, sizeof(body), &blen, NULL) != -1) {
		fprintf(stderr, "FAIL: the idle session's connection stayed open\n");
		return 1;
	}
	close(fd);
	expect_worker_gone(pid);
	char what[128];
	snprintf(what, sizeof(what),
		 "idle for %d s (no frame, nothing running; rgpud --idle-timeout)", n);
	expect_log(what);

	/* a PING every n/4 s for 2n s: never idle */
	fd = dial();
	s = hello(fd);
	t0 = now_s();
	for (uint64_t seq = 1; now_s() - t0 < 2.0 * n; seq++) {
		ping(fd, seq, s);
		usleep((useconds_t)(n * 250000));
	}
	printf("  a PING every %.2f s: served for %.1f s\n", n / 4.0, now_s() - t0);
	close(fd);

	/* an executor blocked in a synchronize is busy: not idle, however long the client waits */
	fd = dial();
	s = hello(fd);
	block_executor(fd, s);
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	t0 = now_s();
	while (now_s() - t0 < 2.0 * n) {
		if (poll(&pf, 1, 100) <= 0)
			continue;
		type = get_frame(fd, &flags, body, sizeof(body), &blen, NULL);
		if (type != RGPU_MSG_ACK) {
			fprintf(stderr,
				"FAIL: a session blocked in a synchronize got frame type %d "
				"after %.2f s without a frame\n",
				type, now_s() - t0);
			return 1;
		}
	}
	printf("  blocked in a synchronize: kept for %.1f s without a frame\n", now_s() - t0);
	close(fd);
	printf("hostile idle: the idle session ended after %d s, the busy ones kept\n", n);
	return 0;
}

/*
 * Issue 8, item 8: with --max-sessions n, session n + 1 is refused in the handshake with
 * CUDA_ERROR_DEVICE_UNAVAILABLE and a reason, what a program's cuInit returns too (with one log
 * line); a resume of a running job is not a new session; a session that ends frees its place.
 */
static int sessions(int n, const char *prog)
{
	Rgpu__HelloReply *first = NULL, *rep;
	uint8_t body[4096];
	uint32_t flags, blen;
	char want[160], cmd[1024], line[1024];
	int fds[64], fd, t;
	uint64_t second = 0;

	if (n < 2 || n > 64)
		return 2;
	for (int i = 0; i < n; i++) {
		fds[i] = dial();
		rep = hello_reply(fds[i], NULL);
		if (rep->result != CUDA_SUCCESS) {
			fprintf(stderr, "FAIL: session %d of %d refused: %d (%s)\n", i + 1, n,
				rep->result, rep->error);
			return 1;
		}
		if (i == 0)
			first = rep;
		else if (i == 1)
			second = rep->session_id;
		if (i)
			rgpu__hello_reply__free_unpacked(rep, NULL);
	}

	/* one more: refused, with the reason, and closed */
	snprintf(want, sizeof(want),
		 "the GPU server serves its limit of %d sessions (rgpud --max-sessions); try again "
		 "later",
		 n);
	fd = dial();
	rep = hello_reply(fd, NULL);
	if (rep->result != CUDA_ERROR_DEVICE_UNAVAILABLE || strcmp(rep->error, want)) {
		fprintf(stderr,
			"FAIL: session %d of a --max-sessions %d server: %d (%s), want %d "
			"(%s)\n",
			n + 1, n, rep->result, rep->error, CUDA_ERROR_DEVICE_UNAVAILABLE, want);
		return 1;
	}
	printf("  session %d: refused with %d: %s\n", n + 1, rep->result, rep->error);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	if (get_frame(fd, &flags, body, sizeof(body), &blen, NULL) != -1) {
		fprintf(stderr, "FAIL: the refused session's connection stayed open\n");
		return 1;
	}
	close(fd);
	expect_log(want);

	/* a program's cuInit gets the same, and the interposer says why in one line */
	snprintf(cmd, sizeof(cmd), "RGPU_LOG=warn %s 2>&1; echo \"exit $?\"", prog);
	FILE *p = popen(cmd, "r");
	int saw_fail = 0, saw_exit = 0, rgpu_lines = 0, saw_reason = 0;
	while (p && fgets(line, sizeof(line), p)) {
		printf("  %s: %s", prog, line);
		saw_fail |= strstr(line, "cuInit(0) = 46 (CUDA_ERROR_DEVICE_UNAVAILABLE)") != NULL;
		saw_exit |= !strcmp(line, "exit 1\n");
		if (strstr(line, "rgpu[")) {
			rgpu_lines++;
			saw_reason |= strstr(line, want) != NULL;
		}
	}
	if (p)
		pclose(p);
	if (!saw_fail || !saw_exit || rgpu_lines != 1 || !saw_reason) {
		fprintf(stderr,
			"FAIL: %s over the limit: want cuInit = 46 "
			"(CUDA_ERROR_DEVICE_UNAVAILABLE), exit 1 and one rgpu log line with the "
			"reason; got %d, %d, %d lines, %d\n",
			prog, saw_fail, saw_exit, rgpu_lines, saw_reason);
		return 1;
	}

	/* resuming the first session's job is not a new session */
	fd = dial();
	rep = hello_reply(fd, first);
	if (rep->result != CUDA_SUCCESS || !rep->resumed) {
		fprintf(stderr, "FAIL: a resume at the limit: result %d resumed %d (%s)\n",
			rep->result, rep->resumed, rep->error);
		return 1;
	}
	printf("  the resume of session 1 at the limit: resumed\n");
	rgpu__hello_reply__free_unpacked(rep, NULL);
	rgpu__hello_reply__free_unpacked(first, NULL);

	/* session 2 says goodbye: its place is free for a new session */
	double t0 = now_s();
	send_msg(fds[1], RGPU_MSG_GOODBYE, 1, second, NULL);
	while ((t = get_frame(fds[1], &flags, body, sizeof(body), &blen, NULL)) == RGPU_MSG_ACK)
		;
	close(fds[1]);
	for (int i = 0;; i++) {
		fd = dial();
		rep = hello_reply(fd, NULL);
		if (rep->result == CUDA_SUCCESS)
			break;
		if (i == 30) {
			fprintf(stderr,
				"FAIL: 3 s after a goodbye, a new session is still refused: "
				"%d (%s)\n",
				rep->result, rep->error);
			return 1;
		}
		rgpu__hello_reply__free_unpacked(rep, NULL);
		close(fd);
		usleep(100000);
	}
	rgpu__hello_reply__free_unpacked(rep, NULL);
	printf("hostile sessions: session %d refused, a resume served, a freed place taken "
	       "(%.1f s after the goodbye)\n",
	       n + 1, now_s() - t0);
	return 0;
}

/*
 * Issue 8, item 2: the reader's bound counted payloads only, and a client that blocked its
 * executor and kept sending 16 MiB bodies grew a worker to 2.1 GB. Now the worker stops
 * reading past --max-queued: what it holds stays under the bound and one frame.
 */
static int flood(long limit_mib)
{
	const size_t body_len = RGPU_MAX_BODY, payload_len = RGPU_MAX_CHUNK;
	const int frames = 16, margin_mib = 64;
	uint8_t *junk = malloc(payload_len), hdr[RGPU_FRAME_HDR_LEN];
	const uint64_t total = frames * (RGPU_FRAME_HDR_LEN + body_len + payload_len);
	uint64_t sent = 0;
	int fd = dial(), pid, stalled = 0;
	uint64_t s = hello(fd);
	long base, rss;

	if (!junk)
		return 1;
	memset(junk, 0x5a, payload_len);
	pid = worker_pid(fd);
	block_executor(fd, s);
	base = rss_kib(pid);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < frames && !stalled; i++) {
		struct rgpu_frame_hdr h = {.magic = RGPU_FRAME_MAGIC,
					   .version = RGPU_PROTO_VERSION,
					   .type = RGPU_MSG_MEMCPY_HTOD,
					   .body_len = (uint32_t)body_len,
					   .payload_len = payload_len,
					   .seq = 4 + (uint64_t)i,
					   .session = s};
		/* the executor never gets to decode the body: it waits for the host function */
		struct iovec part[3] = {{hdr, sizeof(hdr)}, {junk, body_len}, {junk, payload_len}};
		rgpu_frame_hdr_encode(&h, hdr);
		for (int k = 0; k < 3 && !stalled; k++) {
			size_t off = 0;
			while (off < part[k].iov_len) {
				struct pollfd pf = {.fd = fd, .events = POLLOUT};
				ssize_t w = send(fd, (uint8_t *)part[k].iov_base + off,
						 part[k].iov_len - off, MSG_NOSIGNAL);
				if (w > 0) {
					off += (size_t)w;
					sent += (uint64_t)w;
				} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
					fprintf(stderr, "FAIL: send: %s\n", strerror(errno));
					return 1;
				} else if (poll(&pf, 1, 2000) == 0) {
					/* 2 s without room: the server stopped reading */
					stalled = 1;
					break;
				}
			}
		}
	}
	usleep(500000);
	rss = rss_kib(pid);
	printf("  worker %d: RSS %ld MiB before the flood, %ld MiB after %llu of %llu MiB sent\n",
	       pid, base >> 10, rss >> 10, (unsigned long long)(sent >> 20),
	       (unsigned long long)(total >> 20));
	if (rss < 0 || rss > (limit_mib + margin_mib) << 10) {
		fprintf(stderr,
			"FAIL: worker RSS %ld MiB (%ld KiB) after %llu MiB sent, over the "
			"--max-queued %ld MiB + %d MiB\n",
			rss >> 10, rss, (unsigned long long)(sent >> 20), limit_mib, margin_mib);
		return 1;
	}
	if (!stalled) {
		fprintf(stderr,
			"FAIL: the server took all %llu MiB from a client whose executor is "
			"blocked (--max-queued %ld MiB)\n",
			(unsigned long long)(total >> 20), limit_mib);
		return 1;
	}
	char what[128];
	snprintf(what, sizeof(what), "reading from 127.0.0.1:%d paused", local_port(fd));
	expect_log(what);
	/*
	 * The worker notices its client leave even while it does not read. A reset, as a plain
	 * close would leave the unsent bytes (and the end behind them) to the kernel to deliver.
	 */
	struct linger lg = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	snprintf(what, sizeof(what), "link to 127.0.0.1:%d lost", local_port(fd));
	close(fd);
	expect_log(what);
	printf("hostile flood: the worker stopped reading at %llu MiB sent; RSS %ld MiB <= %ld + "
	       "%d MiB\n",
	       (unsigned long long)(sent >> 20), rss >> 10, limit_mib, margin_mib);
	free(junk);
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

	/* the encodings protobuf-c 1.4.1 has undefined behaviour on (docs/upstream-protobuf-c.md):
	 * refused before it decodes them */
	fd = dial();
	s = hello(fd);
	{
		uint8_t body[] = {0x22, 0x00}; /* Occupancy.block_size packed, no elements */
		put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_OCCUPANCY, 0, sizeof(body), 0, 1, s);
		put(fd, body, sizeof(body));
	}
	expect_error_and_close(fd, "empty packed field");

	fd = dial();
	s = hello(fd);
	{
		uint8_t body[] = {0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00}; /* field number 2^32 - 1 */
		put_hdr(fd, RGPU_PROTO_VERSION, RGPU_MSG_OCCUPANCY, 0, sizeof(body), 0, 1, s);
		put(fd, body, sizeof(body));
	}
	expect_error_and_close(fd, "5-byte key over the field limit");

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

	hostile_ranges();
	hostile_launch();
	refused_image();
	unloaded_globals();

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
	if (argc == 3 && !strcmp(argv[1], "flood"))
		return flood(atol(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "idle"))
		return idle(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "sessions"))
		return sessions(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: hostile [trickle SECONDS | flood MIB | idle SECONDS | sessions N "
			"PROGRAM]\n");
	return 2;
}
