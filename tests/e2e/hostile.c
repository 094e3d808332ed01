/*
 * Hostile input against a running rgpud (testing.md, reliability targets): truncated frames,
 * empty and oversized lengths, unknown types, a wrong protocol version, a wrong session and an
 * undecodable body. For each, the worker must answer MSG_ERROR and close; afterwards the
 * supervisor must still serve a well-behaved client.
 *
 * Then well-formed requests whose values are hostile, each on a session of its own: ranges
 * whose arithmetic wraps around 2^64 or that leave the window, a launch with fewer parameter
 * bytes than its function takes. Each must get CUDA_ERROR_INVALID_VALUE, leave the session
 * serving, and be refused by the worker's own checks before the driver sees it: the worker's
 * log must say so (simgpu would refuse most of them too, and a real driver may not); copies
 * from a module's globals after it is unloaded included. And an image the driver refuses must
 * not enter the module cache.
 *
 * Usage: hostile [PORT]   (run by with_server.sh, which also checks rgpud is still alive; the
 * worker's log is RGPU_E2E_LOGFILE; RGPU_TEST_IMAGE names tests/progs' kernels.fatbin)
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
		if (h.type == RGPU_MSG_DATA && h.ref == s->seq && data)
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
