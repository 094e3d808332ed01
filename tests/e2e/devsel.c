/*
 * A client that numbers a server's devices from a base and chooses some (issue 13: Hello.
 * device_base and Hello.devices, capability DEVICE_SELECT), speaking raw frames as the
 * interposer will; run by devsel.sh against rgpud on simgpu with 2 GPUs (SIMGPU_DEVICES=2).
 *
 *   devsel hello PORT   the server announces DEVICE_SELECT; a Hello that names GPU 1 as the
 *                       client's device 4 gets that GPU alone (its UUID) in HelloReply.devices;
 *                       a choice that repeats a GPU, names one the server lacks, or passes the
 *                       client's 16 devices is refused (CUDA_ERROR_INVALID_DEVICE, a sentence,
 *                       a line in the log: RGPU_E2E_LOGFILE)
 *   devsel job PORT N   a job on GPU 1 as the client's device 4: a context, memory mapped by
 *                       the allocator and by the application (cuMemCreate, cuMemMap,
 *                       cuMemSetAccess naming device 4), both written; devices 0 and 5 are
 *                       refused. It prints READY, then N times: waits for the job to be moved
 *                       (MSG_REDIRECT), resumes it where it went, checks every byte and that
 *                       device 4, and only it, is still the job's there, and prints MOVED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu_msgs.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

#define CUDA_ERROR_INVALID_DEVICE 101
#define BASE 4 /* the client's number for the server's GPU it uses */
#define GPU 1  /* that GPU */
#define MiB (1ull << 20)
#define CTX 1
#define PHYS 100 /* the client id of the application's physical memory */
#define NBYTES 4096

struct sess {
	struct rgpu_conn *c;
	uint64_t id, seq, rx; /* session, last seq sent, last sequenced frame received */
	uint64_t window;
	uint8_t job[16], token[32];
};

static struct rgpu_conn *dial(const char *host, int port)
{
	struct rgpu_conn *c;
	if (rgpu_tcp_connect(host, port, 5000, &c))
		FAIL("cannot connect to %s:%d", host, port);
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	return c;
}

/* One frame, the sequenced ones counted; a payload (MSG_DATA) read into *payload (malloc'd). */
static void recv_frame(struct sess *s, struct rgpu_frame_hdr *h, uint8_t **body, uint8_t **payload,
		       int timeout_ms)
{
	*body = NULL;
	if (payload)
		*payload = NULL;
	if (rgpu_frame_recv_within(s->c, RGPU_PEER_CLIENT, h, body, timeout_ms))
		FAIL("no frame from the server within %d ms", timeout_ms);
	if (h->payload_len) {
		uint8_t *p = malloc(h->payload_len);
		if (!p || rgpu_conn_recv_payload(s->c, p, h->payload_len))
			FAIL("a payload was cut short");
		if (payload)
			*payload = p;
		else
			free(p);
	}
	if (h->seq)
		s->rx = h->seq;
}

/* Send a hello; the reply (result not checked), or NULL after MSG_ERROR. */
static Rgpu__HelloReply *hello(struct sess *s, Rgpu__Hello *hm)
{
	struct rgpu_frame_hdr h;
	uint8_t *body;
	Rgpu__HelloReply *rep = NULL;

	hm->protocol_version = RGPU_PROTO_VERSION;
	hm->client_program = "devsel";
	hm->capabilities = RGPU_CAPS_CLIENT | RGPU_CAP_MIGRATE | RGPU_CAP_DEVICE_SELECT;
	if (rgpu_frame_send(s->c, RGPU_MSG_HELLO, 0, 0, 0, &hm->base, NULL, 0))
		FAIL("cannot send a hello");
	recv_frame(s, &h, &body, NULL, 20000);
	if (h.type == RGPU_MSG_HELLO)
		rep = rgpu__hello_reply__unpack(NULL, h.body_len, body);
	else if (h.type != RGPU_MSG_ERROR)
		FAIL("a hello answered by %s", rgpu_msg_name(h.type));
	free(body);
	return rep;
}

static Rgpu__HelloReply *new_session(struct sess *s, int port, uint32_t base, const int32_t *devs,
				     size_t n)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	Rgpu__HelloReply *rep;

	memset(s, 0, sizeof(*s));
	s->c = dial("127.0.0.1", port);
	hm.device_base = base;
	hm.devices = (int32_t *)devs;
	hm.n_devices = n;
	rep = hello(s, &hm);
	if (!rep)
		FAIL("a new session answered by MSG_ERROR");
	if (rep->result == 0) {
		if (rep->job_id.len != 16 || rep->resume_token.len != 32)
			FAIL("a hello reply without its job id and token");
		s->id = rep->session_id;
		s->window = rep->window_base;
		memcpy(s->job, rep->job_id.data, 16);
		memcpy(s->token, rep->resume_token.data, 32);
	}
	return rep;
}

static void post(struct sess *s, uint16_t type, const ProtobufCMessage *m, const void *payload,
		 uint64_t plen)
{
	if (rgpu_frame_send(s->c, type, 0, ++s->seq, s->id, m, payload, plen))
		FAIL("cannot send %s", rgpu_msg_name(type));
}

/*
 * A request and its reply (acknowledgements skipped): the reply's result and async_error (every
 * reply has them as fields 1 and 2: read as a Status). MSG_DATA that came for it, or the
 * reply's own payload (a small copy's bytes), lands in data.
 */
static int call(struct sess *s, uint16_t type, const ProtobufCMessage *m, const void *payload,
		uint64_t plen, int *async_err, uint8_t *data, size_t dlen)
{
	struct rgpu_frame_hdr h;
	uint8_t *body, *pl;
	Rgpu__Status *st;
	int r;

	post(s, type, m, payload, plen);
	for (;;) {
		recv_frame(s, &h, &body, &pl, 20000);
		if (h.type == RGPU_MSG_ERROR)
			FAIL("%s ended the session with a protocol error", rgpu_msg_name(type));
		if (h.type == RGPU_MSG_DATA && h.ref == s->seq && data) {
			Rgpu__DataChunk *dc = rgpu__data_chunk__unpack(NULL, h.body_len, body);
			if (!dc || dc->offset > dlen || h.payload_len > dlen - dc->offset)
				FAIL("MSG_DATA outside the copy");
			memcpy(data + dc->offset, pl, h.payload_len);
			rgpu__data_chunk__free_unpacked(dc, NULL);
		}
		/* a small synchronous copy's bytes may come in its reply (capability SHM) */
		if ((h.flags & RGPU_FRAME_REPLY) && h.ref == s->seq && h.payload_len && data) {
			if (h.payload_len > dlen)
				FAIL("a reply's bytes longer than the copy");
			memcpy(data, pl, h.payload_len);
		}
		free(pl);
		if ((h.flags & RGPU_FRAME_REPLY) && h.ref == s->seq)
			break;
		free(body);
	}
	st = rgpu__status__unpack(NULL, h.body_len, body);
	free(body);
	if (h.type != type || !st)
		FAIL("%s answered by an undecodable %s", rgpu_msg_name(type),
		     rgpu_msg_name(h.type));
	r = st->result;
	if (async_err)
		*async_err = st->async_error;
	rgpu__status__free_unpacked(st, NULL);
	return r;
}

/* The error of the fire-and-forget work sent since the last reply. */
static int ping_async(struct sess *s)
{
	int a = 0;
	if (call(s, RGPU_MSG_PING, NULL, NULL, 0, &a, NULL, 0))
		FAIL("a ping failed");
	return a;
}

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

/* ---- devsel hello ------------------------------------------------------------------------ */

static void refused(int port, uint32_t base, const int32_t *devs, size_t n, const char *why)
{
	struct sess s;
	Rgpu__HelloReply *rep = new_session(&s, port, base, devs, n);

	if (rep->result != CUDA_ERROR_INVALID_DEVICE || !rep->error || !strstr(rep->error, why))
		FAIL("base %u, %zu devices: result %d (%s), want %d with \"%s\"", base, n,
		     rep->result, rep->error ? rep->error : "", CUDA_ERROR_INVALID_DEVICE, why);
	if (rep->n_devices)
		FAIL("a refused hello lists %zu devices", rep->n_devices);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	rgpu_conn_close(s.c);
	if (log_count(why) < 1)
		FAIL("the refusal \"%s\" is not in the log", why);
	printf("ok: refused: %s\n", why);
}

static int hellos(int port)
{
	struct sess s;
	Rgpu__HelloReply *all, *one;
	const int32_t gpu1[] = {GPU}, twice[] = {1, 0, 1}, none[] = {2};

	/* no base, no choice: both GPUs, as for any client */
	all = new_session(&s, port, 0, NULL, 0);
	if (all->result != 0 || all->n_devices != 2)
		FAIL("a plain hello: result %d, %zu devices (want 2: SIMGPU_DEVICES=2)",
		     all->result, all->n_devices);
	if (!(all->capabilities & RGPU_CAP_DEVICE_SELECT))
		FAIL("the server does not announce DEVICE_SELECT (capabilities %#llx)",
		     (unsigned long long)all->capabilities);
	rgpu_frame_send(s.c, RGPU_MSG_GOODBYE, 0, ++s.seq, s.id, NULL, NULL, 0);
	rgpu_conn_close(s.c);
	/* GPU 1 as the client's device 4: that GPU alone */
	one = new_session(&s, port, BASE, gpu1, 1);
	if (one->result != 0 || one->n_devices != 1)
		FAIL("GPU 1 as device 4: result %d (%s), %zu devices", one->result,
		     one->error ? one->error : "", one->n_devices);
	if (one->devices[0]->uuid.len != 16 || all->devices[1]->uuid.len != 16 ||
	    memcmp(one->devices[0]->uuid.data, all->devices[1]->uuid.data, 16) ||
	    !memcmp(one->devices[0]->uuid.data, all->devices[0]->uuid.data, 16))
		FAIL("the device listed is not the server's GPU 1");
	rgpu_frame_send(s.c, RGPU_MSG_GOODBYE, 0, ++s.seq, s.id, NULL, NULL, 0);
	rgpu_conn_close(s.c);
	rgpu__hello_reply__free_unpacked(one, NULL);
	rgpu__hello_reply__free_unpacked(all, NULL);
	printf("ok: GPU 1 as device 4 is listed alone\n");

	refused(port, 0, twice, 3, "asked for GPU 1 of this server twice");
	refused(port, 0, none, 1, "asked for GPU 2 of this server, which has 2 GPUs");
	refused(port, 15, NULL, 0, "the client numbers this server's 2 GPUs from 15");
	refused(port, 15, twice, 2, "from 15 and asks for 2 of them");
	return 0;
}

/* ---- devsel job -------------------------------------------------------------------------- */

static uint8_t pattern[2][NBYTES];

/* Write NBYTES of pattern k at addr (a synchronous copy: its errors come with the next reply). */
static void write_at(struct sess *s, uint64_t addr, int k)
{
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	mc.dst = addr;
	mc.size = NBYTES;
	mc.ctx = CTX;
	post(s, RGPU_MSG_MEMCPY_HTOD, &mc.base, pattern[k], NBYTES);
	int a = ping_async(s);
	if (a)
		FAIL("writing at %#llx: %d", (unsigned long long)addr, a);
}

static void check_at(struct sess *s, uint64_t addr, int k, const char *where)
{
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	uint8_t got[NBYTES];
	int r;

	memset(got, 0, sizeof(got));
	mc.src = addr;
	mc.size = NBYTES;
	mc.ctx = CTX;
	r = call(s, RGPU_MSG_MEMCPY_DTOH, &mc.base, NULL, 0, NULL, got, sizeof(got));
	if (r || memcmp(got, pattern[k], NBYTES))
		FAIL("%s: the bytes at %#llx differ (result %d)", where, (unsigned long long)addr,
		     r);
}

/* A context on device dev (the client's number): the error its creation gets. */
static int ctx_on(struct sess *s, uint64_t id, int dev, int primary)
{
	Rgpu__CtxCreate cc = RGPU__CTX_CREATE__INIT;
	cc.ctx = id;
	cc.device = dev;
	cc.primary = primary;
	post(s, RGPU_MSG_CTX_CREATE, &cc.base, NULL, 0);
	return ping_async(s);
}

static int phys_on(struct sess *s, uint64_t handle, int dev)
{
	Rgpu__VmmCreate vc = RGPU__VMM_CREATE__INIT;
	vc.handle = handle;
	vc.size = 2 * MiB;
	vc.device = dev;
	return call(s, RGPU_MSG_VMM_CREATE, &vc.base, NULL, 0, NULL, NULL, 0);
}

static int access_for(struct sess *s, uint64_t addr, int dev)
{
	Rgpu__VmmAccess va = RGPU__VMM_ACCESS__INIT;
	va.addr = addr;
	va.size = 2 * MiB;
	va.handle = PHYS;
	va.device = BASE;
	va.access = 3u << (2 * dev); /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
	va.devices = 1u << dev;
	post(s, RGPU_MSG_VMM_ACCESS, &va.base, NULL, 0);
	return ping_async(s);
}

/* What must hold wherever the job is: its bytes, device 4 its own and 0 and 5 not. */
static void check_job(struct sess *s, uint64_t *next_id, const char *where)
{
	uint64_t app = s->window + 4 * MiB;
	int r;

	check_at(s, s->window, 0, where);
	check_at(s, app, 1, where);
	if ((r = ctx_on(s, (*next_id)++, BASE, 0)))
		FAIL("%s: a context on device 4: %d", where, r);
	if ((r = ctx_on(s, (*next_id)++, 0, 0)) != CUDA_ERROR_INVALID_DEVICE)
		FAIL("%s: a context on device 0 (another server's): %d, want %d", where, r,
		     CUDA_ERROR_INVALID_DEVICE);
	if ((r = ctx_on(s, (*next_id)++, BASE + 1, 1)) != CUDA_ERROR_INVALID_DEVICE)
		FAIL("%s: a context on device 5: %d, want %d", where, r, CUDA_ERROR_INVALID_DEVICE);
	if ((r = phys_on(s, (*next_id)++, BASE + 1)) != CUDA_ERROR_INVALID_DEVICE)
		FAIL("%s: physical memory on device 5: %d, want %d", where, r,
		     CUDA_ERROR_INVALID_DEVICE);
	if ((r = access_for(s, app, BASE + 1)) != CUDA_ERROR_INVALID_DEVICE)
		FAIL("%s: access for device 5: %d, want %d", where, r, CUDA_ERROR_INVALID_DEVICE);
	if ((r = access_for(s, app, BASE)))
		FAIL("%s: access for device 4: %d", where, r);
}

/* Wait for the job to be moved (MSG_REDIRECT), then resume it where it went. */
static void follow(struct sess *s)
{
	struct rgpu_frame_hdr h;
	uint8_t *body;
	char host[256];
	int port;

	for (;;) {
		recv_frame(s, &h, &body, NULL, 120000);
		if (h.type == RGPU_MSG_REDIRECT)
			break;
		if (h.type == RGPU_MSG_ERROR)
			FAIL("the job ended while waiting to be moved");
		free(body);
	}
	Rgpu__Redirect *rd = rgpu__redirect__unpack(NULL, h.body_len, body);
	free(body);
	if (!rd || !rd->server || sscanf(rd->server, "%255[^:]:%d", host, &port) != 2)
		FAIL("an undecodable MSG_REDIRECT");
	rgpu__redirect__free_unpacked(rd, NULL);
	rgpu_conn_close(s->c);
	s->c = dial(host, port);

	Rgpu__Hello hm = RGPU__HELLO__INIT;
	hm.job_id.data = s->job;
	hm.job_id.len = 16;
	hm.resume_token.data = s->token;
	hm.resume_token.len = 32;
	hm.received = s->rx;
	/* what a client with devices elsewhere sends again; a resume does not change them */
	hm.device_base = BASE;
	Rgpu__HelloReply *rep = hello(s, &hm);
	if (!rep || rep->result != 0 || !rep->resumed || rep->resume_token.len != 32)
		FAIL("the resume at %s:%d was refused", host, port);
	memcpy(s->token, rep->resume_token.data, 32);
	if (rep->received != s->seq)
		FAIL("the moved job's worker got %llu of the %llu frames sent",
		     (unsigned long long)rep->received, (unsigned long long)s->seq);
	rgpu__hello_reply__free_unpacked(rep, NULL);
}

static int job(int port, int moves)
{
	struct sess s;
	const int32_t gpu1[] = {GPU};
	Rgpu__HelloReply *rep = new_session(&s, port, BASE, gpu1, 1);
	uint64_t next_id = 10;
	char where[64];
	int r;

	if (rep->result != 0)
		FAIL("GPU 1 as device 4 refused: %d (%s)", rep->result, rep->error);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	for (int i = 0; i < NBYTES; i++) {
		pattern[0][i] = (uint8_t)(i * 7 + 1);
		pattern[1][i] = (uint8_t)(i * 13 + 5);
	}
	/* the context and the allocator's memory, on device 4 */
	if ((r = ctx_on(&s, CTX, BASE, 1)))
		FAIL("the primary context of device 4: %d", r);
	Rgpu__MemAlloc ma = RGPU__MEM_ALLOC__INIT;
	ma.map_addr = s.window;
	ma.map_size = 2 * MiB;
	ma.device = BASE;
	if ((r = call(&s, RGPU_MSG_MEM_ALLOC, &ma.base, NULL, 0, NULL, NULL, 0)))
		FAIL("mapping 2 MiB on device 4: %d", r);
	write_at(&s, s.window, 0);
	/* the application's own: physical memory of device 4, mapped, readable by device 4 */
	uint64_t app = s.window + 4 * MiB;
	if ((r = phys_on(&s, PHYS, BASE)))
		FAIL("physical memory on device 4: %d", r);
	Rgpu__VmmMap vm = RGPU__VMM_MAP__INIT;
	vm.addr = app;
	vm.size = 2 * MiB;
	vm.handle = PHYS;
	vm.device = BASE;
	post(&s, RGPU_MSG_VMM_MAP, &vm.base, NULL, 0);
	if ((r = ping_async(&s)))
		FAIL("mapping the physical memory of device 4: %d", r);
	if ((r = access_for(&s, app, BASE)))
		FAIL("access for device 4: %d", r);
	write_at(&s, app, 1);
	check_job(&s, &next_id, "before any move");
	/* said once a job (a client may repeat it at will): the first, device 0 */
	if (log_count("refused: device 0 is not one of the job's on this server (4..4)") < 1)
		FAIL("no refusal of device 0 in the log");
	printf("READY\n");
	fflush(stdout);
	for (int m = 1; m <= moves; m++) {
		follow(&s);
		snprintf(where, sizeof(where), "after move %d", m);
		check_job(&s, &next_id, where);
		printf("MOVED %d\n", m);
		fflush(stdout);
	}
	rgpu_frame_send(s.c, RGPU_MSG_GOODBYE, 0, ++s.seq, s.id, NULL, NULL, 0);
	rgpu_conn_close(s.c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "hello"))
		return hellos(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "job"))
		return job(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: devsel hello PORT | devsel job PORT MOVES\n");
	return 2;
}
