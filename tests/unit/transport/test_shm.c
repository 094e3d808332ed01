/*
 * Unit tests of the shared-memory transport (transport/shm.c; testing.md, tier 1). Every test
 * upgrades a Unix-domain socket pair, as the real code does (rgpu_tcp_wrap on both ends, the
 * client's rgpu_shm_offer in a thread while the server's rgpu_shm_accept answers it), then:
 * frames both ways through 64 KiB rings many times over (wraparound, spinning and the futex
 * sleep), payloads by reference from the client's slots (held, released, copied, discarded),
 * from its pinned-memory arena and from the server's staging buffers, a hostile client
 * (scribbled indices, garbage in the ring, references out of bounds, offers the server must
 * refuse), a peer that dies or shuts down while the other end sleeps, and payloads that outlive
 * their connection.
 *
 * White-box: the link memfd's layout (shm.c's struct shm_ctl and the areas after it), the offer
 * and the reference are written out here by hand from shm.c's comments, never taken from the
 * code under test; the upgrade checks them against the pointers rgpu_shm_accept hands out.
 * Payloads are patterned per frame and per byte, so a byte lost, duplicated, or taken from the
 * wrong frame or slot fails a comparison.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "rgpu_msgs.h"

/* --- the link's layout, by hand (shm.c) ------------------------------------------------------- */

/*
 * struct shm_ctl: magic "RGPUSHM1" (8), version (4), pad (4), then two struct shm_ring_ctl of
 * 256 bytes at 64 (head at +0, tail at +64, data futex at +128, room futex at +192), then the
 * slot futex at 576, slot_waits at 580 and slot_busy[64] (4 bytes each) at 584. The rings' data
 * start at the next page.
 */
#define CTL_RING(r) (64u + 256u * (r))
#define CTL_HEAD(r) (CTL_RING(r) + 0u)
#define CTL_TAIL(r) (CTL_RING(r) + 64u)
#define CTL_SLOT_BUSY(i) (584u + 4u * (i))
#define DATA_OFF 4096u
#define C2S 0
#define S2C 1

/* struct shm_offer: 56 bytes */
#define OFFER_LEN 56
#define SHM_MAGIC_BYTES "RGPUSHM1"
/* struct shm_ref: 40 bytes; kinds 1 arena, 2 slot, 3 stage */
#define REF_LEN 40
#define REF_ARENA 1
#define REF_SLOT 2
#define REF_STAGE 3

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define RING (64 * KiB)
#define SLOT (256 * KiB)
#define ARENA_SIZE (1 * MiB)
#define ALLOC_OFF (128 * KiB) /* the arena's one allocation */
#define ALLOC_LEN (256 * KiB)

#define MSG_HTOD 23 /* client -> server, body required, payload up to 16 MiB */
#define MSG_DATA 27 /* server -> client, payload up to 16 MiB */
_Static_assert(RGPU_MSG_MEMCPY_HTOD == MSG_HTOD, "MSG_MEMCPY_HTOD");
_Static_assert(RGPU_MSG_DATA == MSG_DATA, "MSG_DATA");

/* --- helpers ---------------------------------------------------------------------------------- */

static uint8_t pat(uint32_t frame, uint64_t i)
{
	return (uint8_t)(i * 131u + frame * 29u + (i >> 9) + ((i >> 17) * 7u) + 1u);
}

static void fill(uint8_t *p, uint64_t len, uint32_t frame)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = pat(frame, i);
}

/* the first byte of p that is not frame's pattern, or -1 */
static long mismatch(const uint8_t *p, uint64_t len, uint32_t frame)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != pat(frame, i))
			return (long)i;
	return -1;
}

#define assert_pattern(p, len, frame)                                                              \
	do {                                                                                       \
		long at_ = mismatch((const uint8_t *)(p), (len), (frame));                         \
		if (at_ >= 0)                                                                      \
			fail_msg("frame %u: byte %ld of %llu differs", (unsigned)(frame), at_,     \
				 (unsigned long long)(len));                                       \
	} while (0)

static void put_le(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *in, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | in[i];
	return v;
}

/* the 56-byte header by hand (frame.h's table), ack and ref 0 */
static void hand_hdr(uint8_t out[RGPU_FRAME_HDR_LEN], uint16_t type, uint32_t flags,
		     uint32_t body_len, uint64_t payload_len, uint64_t seq)
{
	memset(out, 0, RGPU_FRAME_HDR_LEN);
	put_le(out + 0, RGPU_FRAME_MAGIC, 4);
	put_le(out + 4, RGPU_PROTO_VERSION, 2);
	put_le(out + 6, type, 2);
	put_le(out + 8, flags, 4);
	put_le(out + 12, body_len, 4);
	put_le(out + 16, payload_len, 8);
	put_le(out + 24, seq, 8);
	put_le(out + 32, 9, 8); /* session */
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* lines of /proc/self/maps naming the memfd `name` */
static int count_maps(const char *name)
{
	char line[512], want[128];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	snprintf(want, sizeof(want), "/memfd:%s ", name);
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);
		if (l && line[l - 1] == '\n')
			line[l - 1] = ' ';
		if (strstr(line, want))
			n++;
	}
	fclose(f);
	return n;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static uint64_t ld64(const uint8_t *base, unsigned off)
{
	return __atomic_load_n((const uint64_t *)(base + off), __ATOMIC_ACQUIRE);
}

static void st64(uint8_t *base, unsigned off, uint64_t v)
{
	__atomic_store_n((uint64_t *)(base + off), v, __ATOMIC_RELEASE);
}

static uint32_t ld32(const uint8_t *base, unsigned off)
{
	return __atomic_load_n((const uint32_t *)(base + off), __ATOMIC_ACQUIRE);
}

/* --- a link ----------------------------------------------------------------------------------- */

static struct rgpu_conn *wrap(int fd)
{
	struct rgpu_conn *c = rgpu_tcp_wrap(fd);
	assert_non_null(c);
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	return c;
}

struct offer_arg {
	struct rgpu_conn *c;
	const struct rgpu_shm_opts *opt;
	int ret;
	char why[256];
};

static void *offer_main(void *arg)
{
	struct offer_arg *o = arg;
	o->ret = rgpu_shm_offer(o->c, o->opt, 3000, o->why, sizeof(o->why));
	return NULL;
}

struct link {
	struct rgpu_conn *cli, *srv;
	struct rgpu_shm_accepted acc;
	struct rgpu_shm_opts opt;
	uint8_t *base; /* the server's mapping of the link memfd */
	/* the client's arena, when it has one */
	int arena_fd;
	uint8_t *arena;
	atomic_int finds;
};

static struct rgpu_shm_opts small_opts(void)
{
	struct rgpu_shm_opts o = {
	    .ring_size = RING,
	    .slot_size = SLOT,
	    .nslots = 2,
	    .nstage = 2,
	    .arena = {.fd = -1},
	};
	return o;
}

/* the arena's find(): one allocation, [ALLOC_OFF, +ALLOC_LEN) */
static int arena_find(void *ctx, const void *p, uint64_t len, uint64_t *reg_off, uint64_t *reg_len)
{
	struct link *k = ctx;
	const uint8_t *b = p;
	atomic_fetch_add(&k->finds, 1);
	if (b < k->arena + ALLOC_OFF || b > k->arena + ALLOC_OFF + ALLOC_LEN ||
	    len > (uint64_t)(k->arena + ALLOC_OFF + ALLOC_LEN - b))
		return 0;
	*reg_off = ALLOC_OFF;
	*reg_len = ALLOC_LEN;
	return 1;
}

/* a memfd of size bytes, sealed against shrinking when seal is set */
static int make_memfd(const char *name, uint64_t size, int seal)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	if (seal)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

static void arena_make(struct link *k)
{
	k->arena_fd = make_memfd("test-arena", ARENA_SIZE, 1);
	k->arena = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, k->arena_fd, 0);
	assert_true(k->arena != MAP_FAILED);
	k->opt.arena.fd = k->arena_fd;
	k->opt.arena.base = k->arena;
	k->opt.arena.size = ARENA_SIZE;
	k->opt.arena.ctx = k;
	k->opt.arena.find = arena_find;
}

/* a socket pair upgraded to shared memory with opt (and an arena when with_arena) */
static void link_up_opts(struct link *k, const struct rgpu_shm_opts *opt, int with_arena)
{
	int sv[2];
	char why[256];
	pthread_t th;

	memset(k, 0, sizeof(*k));
	k->arena_fd = -1;
	k->opt = *opt;
	if (with_arena)
		arena_make(k);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	k->cli = wrap(sv[0]);
	k->srv = wrap(sv[1]);
	rgpu_conn_set_frame_timeout(k->cli, 3000);
	rgpu_conn_set_frame_timeout(k->srv, 3000);

	struct offer_arg oa = {.c = k->cli, .opt = &k->opt};
	assert_int_equal(pthread_create(&th, NULL, offer_main, &oa), 0);
	int ret = rgpu_shm_accept(k->srv, 3000, &k->acc, why, sizeof(why));
	pthread_join(th, NULL);
	if (ret || oa.ret)
		fail_msg("upgrade: accept %d (%s), offer %d (%s)", ret, ret ? why : "-", oa.ret,
			 oa.ret ? oa.why : "-");
	assert_true(rgpu_conn_is_shm(k->cli));
	assert_true(rgpu_conn_is_shm(k->srv));

	/* the areas the server was given lie where the hand-written layout says */
	uint64_t slots_off = DATA_OFF + 2 * opt->ring_size;
	uint64_t stage_off = slots_off + (uint64_t)opt->nslots * opt->slot_size;
	assert_true(opt->nstage > 0);
	k->base = k->acc.stage - stage_off;
	assert_memory_equal(k->base, SHM_MAGIC_BYTES, 8);
	assert_int_equal(k->acc.nstage, opt->nstage);
	assert_int_equal(k->acc.slot_size, opt->slot_size);
	assert_int_equal(k->acc.slots_size, (uint64_t)opt->nslots * opt->slot_size);
	if (opt->nslots)
		assert_ptr_equal(k->acc.slots, k->base + slots_off);
	else
		assert_null(k->acc.slots);
	assert_non_null(k->acc.link_map);
	if (with_arena) {
		struct stat st;
		assert_int_equal(fstat(k->arena_fd, &st), 0);
		assert_non_null(k->acc.arena);
		assert_non_null(k->acc.arena_map);
		assert_int_equal(k->acc.arena_size, ARENA_SIZE);
		assert_int_equal(k->acc.arena_dev, (uint64_t)st.st_dev);
		assert_int_equal(k->acc.arena_ino, (uint64_t)st.st_ino);
	} else {
		assert_null(k->acc.arena);
		assert_null(k->acc.arena_map);
	}
	assert_int_equal(ld64(k->base, CTL_HEAD(C2S)), 0);
	assert_int_equal(ld64(k->base, CTL_TAIL(C2S)), 0);
}

static void link_up(struct link *k)
{
	struct rgpu_shm_opts o = small_opts();
	link_up_opts(k, &o, 0);
}

static void link_down(struct link *k)
{
	rgpu_conn_close(k->cli);
	rgpu_conn_close(k->srv);
	rgpu_shm_map_put(k->acc.link_map);
	rgpu_shm_map_put(k->acc.arena_map);
	if (k->arena) {
		munmap(k->arena, ARENA_SIZE);
		close(k->arena_fd);
	}
	memset(k, 0, sizeof(*k));
}

/* one frame client -> server (MSG_HTOD) or server -> client (MSG_DATA), DataChunk{offset=seq} */
static int send_chunk(struct rgpu_conn *c, uint16_t type, uint64_t seq, const void *payload,
		      uint64_t len)
{
	Rgpu__DataChunk dc = RGPU__DATA_CHUNK__INIT;
	dc.offset = seq;
	return rgpu_frame_send(c, type, 0, seq, 9, &dc.base, payload, len);
}

/* a send_chunk in a thread: for frames larger than the ring, read meanwhile by the caller */
struct async_send {
	struct rgpu_conn *c;
	uint16_t type;
	uint64_t seq;
	const void *payload;
	uint64_t len;
	int ret;
	pthread_t th;
};

static void *async_send_main(void *arg)
{
	struct async_send *a = arg;
	a->ret = send_chunk(a->c, a->type, a->seq, a->payload, a->len);
	return NULL;
}

static void async_send_start(struct async_send *a)
{
	assert_int_equal(pthread_create(&a->th, NULL, async_send_main, a), 0);
}

static int async_send_end(struct async_send *a)
{
	pthread_join(a->th, NULL);
	return a->ret;
}

/* receive one frame and check it is DataChunk{offset=seq} of this type and payload length */
static void recv_chunk(struct rgpu_conn *c, enum rgpu_peer rx, uint16_t type, uint64_t seq,
		       uint64_t len, int byref, struct rgpu_frame_hdr *h)
{
	uint8_t *body = NULL;
	int ret = rgpu_frame_recv_within(c, rx, h, &body, 3000);
	if (ret)
		fail_msg("frame %llu: rgpu_frame_recv %d (%s)", (unsigned long long)seq, ret,
			 rgpu_strerror(ret));
	assert_int_equal(h->type, type);
	assert_int_equal(h->seq, seq);
	assert_int_equal(h->payload_len, len);
	if (!!(h->flags & RGPU_FRAME_BYREF) != byref)
		fail_msg("frame %llu (%llu bytes): flags 0x%x, want the payload %s",
			 (unsigned long long)seq, (unsigned long long)len, h->flags,
			 byref ? "by reference" : "in the ring");
	assert_non_null(body);
	Rgpu__DataChunk *u = rgpu__data_chunk__unpack(NULL, h->body_len, body);
	assert_non_null(u);
	assert_int_equal(u->offset, seq);
	rgpu__data_chunk__free_unpacked(u, NULL);
	free(body);
}

/* --- 1. frames both ways, many times round the rings ------------------------------------------ */

/* mixed sizes: in the ring (< 64 KiB or > a slot) and, from the client, through its slots */
static const uint64_t stream_sizes[] = {
    0,	   1,	  55,	  56,	  57,	  1000, 4095, 4096,  30000,  65535,
    65536, 70001, 262144, 262145, 300000, 12,	777,  40000, 131072, 65537,
};
#define NSIZES (sizeof(stream_sizes) / sizeof(stream_sizes[0]))
#define STREAM_FRAMES 60
#define STREAM_MAX 300000

struct stream {
	struct rgpu_conn *c;
	int dir; /* C2S: the client sends MSG_HTOD; S2C: the server sends MSG_DATA */
	int nslots;
	char err[256];
	int byref; /* frames that came by reference */
};

static uint32_t stream_id(int dir, int i)
{
	return (uint32_t)(dir * 1000 + i);
}

static int stream_byref(const struct stream *s, uint64_t len)
{
	return s->dir == C2S && s->nslots && len >= RGPU_SHM_BYREF_MIN && len <= SLOT;
}

static void *stream_send(void *arg)
{
	struct stream *s = arg;
	uint8_t *buf = malloc(STREAM_MAX);
	if (!buf) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return NULL;
	}
	for (int i = 0; i < STREAM_FRAMES; i++) {
		uint64_t len = stream_sizes[i % NSIZES];
		fill(buf, len, stream_id(s->dir, i));
		int ret = send_chunk(s->c, s->dir == C2S ? MSG_HTOD : MSG_DATA, (uint64_t)i + 1,
				     buf, len);
		if (ret) {
			snprintf(s->err, sizeof(s->err), "send frame %d: %d (%s)", i, ret,
				 rgpu_strerror(ret));
			break;
		}
	}
	free(buf);
	return NULL;
}

static void *stream_recv(void *arg)
{
	struct stream *s = arg;
	uint8_t *buf = malloc(STREAM_MAX);
	enum rgpu_peer rx = s->dir == C2S ? RGPU_PEER_SERVER : RGPU_PEER_CLIENT;
	uint16_t type = s->dir == C2S ? MSG_HTOD : MSG_DATA;

	if (!buf) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return NULL;
	}
	for (int i = 0; i < STREAM_FRAMES; i++) {
		uint64_t len = stream_sizes[i % NSIZES];
		uint32_t id = stream_id(s->dir, i);
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		int ret = rgpu_frame_recv_within(s->c, rx, &h, &body, 5000);
		if (ret) {
			snprintf(s->err, sizeof(s->err), "frame %d: rgpu_frame_recv %d (%s)", i,
				 ret, rgpu_strerror(ret));
			break;
		}
		Rgpu__DataChunk *u = body ? rgpu__data_chunk__unpack(NULL, h.body_len, body) : NULL;
		int body_ok = u && u->offset == (uint64_t)i + 1;
		if (u)
			rgpu__data_chunk__free_unpacked(u, NULL);
		free(body);
		if (h.type != type || h.seq != (uint64_t)i + 1 || h.payload_len != len ||
		    !body_ok) {
			snprintf(
			    s->err, sizeof(s->err),
			    "frame %d: type %u seq %llu payload %llu body %s, want type %u seq "
			    "%d payload %llu",
			    i, h.type, (unsigned long long)h.seq, (unsigned long long)h.payload_len,
			    body_ok ? "ok" : "wrong", type, i + 1, (unsigned long long)len);
			break;
		}
		int byref = !!(h.flags & RGPU_FRAME_BYREF);
		if (byref != stream_byref(s, len)) {
			snprintf(s->err, sizeof(s->err), "frame %d of %llu bytes: %s", i,
				 (unsigned long long)len,
				 byref ? "by reference, want in the ring"
				       : "in the ring, want by reference");
			break;
		}
		s->byref += byref;
		const uint8_t *got = buf;
		struct rgpu_payload p = {0};
		if (byref && i % 2) { /* where it lies */
			ret = rgpu_conn_take_payload(s->c, &h, &p);
			got = p.p;
			if (!ret &&
			    (p.len != len || p.slot < 1 || p.slot > s->nslots || p.in_arena))
				ret = RGPU_EPROTO;
		} else if (len) {
			ret = rgpu_conn_recv_payload(s->c, buf, len);
		}
		if (ret) {
			snprintf(s->err, sizeof(s->err), "frame %d: payload %d (%s)", i, ret,
				 rgpu_strerror(ret));
			break;
		}
		long at = mismatch(got, len, id);
		rgpu_payload_release(&p);
		if (at >= 0) {
			snprintf(s->err, sizeof(s->err), "frame %d: byte %ld of %llu differs", i,
				 at, (unsigned long long)len);
			break;
		}
	}
	free(buf);
	return NULL;
}

static void stream_both_ways(uint32_t spin_ns)
{
	struct link k;
	struct stream s[4];
	pthread_t th[4];
	uint64_t total = 0;

	link_up(&k);
	rgpu_conn_set_spin(k.cli, spin_ns);
	rgpu_conn_set_spin(k.srv, spin_ns);
	for (int i = 0; i < STREAM_FRAMES; i++)
		total += stream_sizes[i % NSIZES];
	assert_true(total > 40 * RING); /* round each ring at least 40 times */

	memset(s, 0, sizeof(s));
	s[0] = (struct stream){.c = k.cli, .dir = C2S, .nslots = 2};
	s[1] = (struct stream){.c = k.srv, .dir = C2S, .nslots = 2};
	s[2] = (struct stream){.c = k.srv, .dir = S2C, .nslots = 2};
	s[3] = (struct stream){.c = k.cli, .dir = S2C, .nslots = 2};
	assert_int_equal(pthread_create(&th[0], NULL, stream_send, &s[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, stream_recv, &s[1]), 0);
	assert_int_equal(pthread_create(&th[2], NULL, stream_send, &s[2]), 0);
	assert_int_equal(pthread_create(&th[3], NULL, stream_recv, &s[3]), 0);
	pthread_join(th[1], NULL);
	pthread_join(th[3], NULL);
	if (s[1].err[0] || s[3].err[0]) { /* a reader gave up: free a sender that waits */
		rgpu_conn_shutdown(k.cli);
		rgpu_conn_shutdown(k.srv);
	}
	pthread_join(th[0], NULL);
	pthread_join(th[2], NULL);
	static const int order[4] = {1, 3, 0, 2}; /* the receivers' verdicts first */
	for (int j = 0; j < 4; j++) {
		int i = order[j];
		if (s[i].err[0])
			fail_msg("spin %u, %s %s: %s", spin_ns, s[i].dir == C2S ? "c2s" : "s2c",
				 i % 3 == 0 ? "sender" : "receiver", s[i].err);
	}

	/* exactly the frames of 64 KiB .. one slot came by reference, and only from the client */
	int want = 0;
	for (int i = 0; i < STREAM_FRAMES; i++)
		want += stream_byref(&s[1], stream_sizes[i % NSIZES]);
	assert_true(want >= 12);
	assert_int_equal(s[1].byref, want);
	assert_int_equal(s[3].byref, 0);
	/* every byte of the ring went through, and every slot was given back */
	assert_int_equal(ld64(k.base, CTL_HEAD(C2S)), ld64(k.base, CTL_TAIL(C2S)));
	assert_int_equal(ld64(k.base, CTL_HEAD(S2C)), ld64(k.base, CTL_TAIL(S2C)));
	assert_true(ld64(k.base, CTL_HEAD(S2C)) > 40 * RING);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(0)), 0);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(1)), 0);
	link_down(&k);
}

static void test_stream_spin(void **state)
{
	(void)state;
	stream_both_ways(20000);
}

static void test_stream_sleep(void **state)
{
	(void)state;
	stream_both_ways(0);
}

/* --- 2. payloads by reference from the client's slots ----------------------------------------- */

struct sender {
	struct rgpu_conn *c;
	const uint64_t *sizes;
	int n;
	uint32_t id0;
	atomic_int sent;
	int ret;
};

/* every payload made first, then sent back to back: the sender meets a full set of slots */
static void *sender_main(void *arg)
{
	struct sender *s = arg;
	uint8_t **bufs = calloc((size_t)s->n, sizeof(*bufs));
	if (!bufs) {
		s->ret = RGPU_ENOMEM;
		return NULL;
	}
	for (int i = 0; i < s->n; i++) {
		if (!(bufs[i] = malloc(s->sizes[i] + 1))) {
			s->ret = RGPU_ENOMEM;
			goto out;
		}
		fill(bufs[i], s->sizes[i], s->id0 + (uint32_t)i);
	}
	for (int i = 0; i < s->n; i++) {
		s->ret = send_chunk(s->c, MSG_HTOD, (uint64_t)i + 1, bufs[i], s->sizes[i]);
		if (s->ret)
			break;
		/* the sender's buffer is its own again: scribble on it */
		memset(bufs[i], 0xa5, s->sizes[i]);
		atomic_fetch_add(&s->sent, 1);
	}
out:
	for (int i = 0; i < s->n; i++)
		free(bufs[i]);
	free(bufs);
	return NULL;
}

/* frame i (0-based) of a sender, taken where it lies: checks slot and bytes */
static void take_slot(struct link *k, int i, uint64_t len, uint32_t id, struct rgpu_payload *p)
{
	struct rgpu_frame_hdr h;
	recv_chunk(k->srv, RGPU_PEER_SERVER, MSG_HTOD, (uint64_t)i + 1, len, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k->srv, &h, p), 0);
	assert_int_equal(p->len, len);
	assert_int_equal(p->in_arena, 0);
	if (p->slot < 1 || p->slot > (int)k->opt.nslots)
		fail_msg("frame %d: slot %d, want 1..%u", i, p->slot, k->opt.nslots);
	assert_ptr_equal(p->p, k->acc.slots + (uint64_t)(p->slot - 1) * k->opt.slot_size);
	assert_int_equal(ld32(k->base, CTL_SLOT_BUSY(p->slot - 1)), 1);
	assert_pattern(p->p, len, id);
}

static void test_byref_slots(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1;
	struct rgpu_payload p[5];
	pthread_t th;
	static uint8_t got[SLOT];
	/* 0, 1, 3, 4 held in slots; 2 in the ring (no slot came free in time); 5 copied; 6 in
	 * the ring; 7 discarded; 8 in the ring; 9 exactly the smallest by reference, 10 one byte
	 * less */
	static const uint64_t sizes[] = {100000, 100001, 99999, SLOT,  65536, 70000,
					 3000,	 200000, 100,	65536, 65535};
	const int n = (int)(sizeof(sizes) / sizeof(sizes[0]));
	struct sender s = {.sizes = sizes, .n = n, .id0 = 200};

	link_up(&k);
	s.c = k.cli;
	atomic_init(&s.sent, 0);
	assert_int_equal(pthread_create(&th, NULL, sender_main, &s), 0);

	take_slot(&k, 0, sizes[0], 200, &p[0]);
	take_slot(&k, 1, sizes[1], 201, &p[1]);
	assert_int_not_equal(p[0].slot, p[1].slot);
	/*
	 * Both slots held: the third frame's sender waits a while for one, and since none comes
	 * free (the work holding them may wait for a frame behind this one: a host function's
	 * acknowledgement), sends the bytes in the ring
	 */
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 20),
			 RGPU_ETIMEDOUT);
	assert_null(body);
	assert_int_equal(atomic_load(&s.sent), 2);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 3, sizes[2], 0, &h);
	memset(got, 0, sizeof(got));
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, sizes[2]), 0);
	assert_pattern(got, sizes[2], 202);
	/* and the held payloads are untouched meanwhile */
	assert_pattern(p[0].p, sizes[0], 200);
	assert_pattern(p[1].p, sizes[1], 201);

	/* a release while the sender waits lets the next frame through, into the slot just freed */
	int freed = p[0].slot;
	rgpu_payload_release(&p[0]);
	assert_null(p[0].map);
	assert_int_equal(p[0].slot, 0);
	take_slot(&k, 3, sizes[3], 203, &p[2]);
	assert_int_equal(p[2].slot, freed);
	assert_pattern(p[1].p, sizes[1], 201);

	freed = p[1].slot;
	rgpu_payload_release(&p[1]);
	take_slot(&k, 4, sizes[4], 204, &p[3]);
	assert_int_equal(p[3].slot, freed);
	assert_pattern(p[2].p, sizes[3], 203);
	rgpu_payload_release(&p[2]);
	rgpu_payload_release(&p[3]);

	/* copied out: the slot goes back at once (frames 7 and 9 need one each) */
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 6, sizes[5], 1, &h);
	memset(got, 0, sizeof(got));
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, sizes[5]), 0);
	assert_pattern(got, sizes[5], 205);
	/* the next frame, in the ring, is intact */
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 7, sizes[6], 0, &h);
	assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &p[0]), RGPU_EUNSUPPORTED);
	assert_null(p[0].map);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, sizes[6]), 0);
	assert_pattern(got, sizes[6], 206);

	/* dropped, and the next one intact */
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 8, sizes[7], 1, &h);
	assert_int_equal(rgpu_conn_discard(k.srv, sizes[7]), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 9, sizes[8], 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, sizes[8]), 0);
	assert_pattern(got, sizes[8], 208);

	/* the threshold: 64 KiB by reference, one byte less in the ring */
	take_slot(&k, 9, sizes[9], 209, &p[0]);
	rgpu_payload_release(&p[0]);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 11, sizes[10], 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, sizes[10]), 0);
	assert_pattern(got, sizes[10], 210);

	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	assert_int_equal(atomic_load(&s.sent), n);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(0)), 0);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(1)), 0);
	link_down(&k);
}

/* --- 3. the client's arena -------------------------------------------------------------------- */

static void test_arena(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	struct rgpu_payload p;
	struct rgpu_shm_opts o = small_opts();
	uint64_t in_off = ALLOC_OFF + 4096 + 3, len = 100000;

	link_up_opts(&k, &o, 1);
	fill(k.arena, ARENA_SIZE, 300); /* everything, so a wrong offset reads wrong bytes */
	fill(k.arena + in_off, len, 301);

	/* inside the allocation: by reference into the arena, no slot */
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, k.arena + in_off, len), 0);
	assert_true(atomic_load(&k.finds) >= 1);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, len, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &p), 0);
	assert_int_equal(p.in_arena, 1);
	assert_int_equal(p.arena_off, ALLOC_OFF);
	assert_int_equal(p.arena_len, ALLOC_LEN);
	assert_int_equal(p.len, len);
	assert_int_equal(p.slot, 0);
	assert_ptr_equal(p.p, (uint8_t *)k.acc.arena + in_off);
	assert_ptr_not_equal(p.p, k.arena + in_off); /* the server's own mapping */
	assert_pattern(p.p, len, 301);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(0)), 0);
	assert_int_equal(ld32(k.base, CTL_SLOT_BUSY(1)), 0);
	/* one memfd, two mappings: what the client writes, the server reads */
	k.arena[in_off + 777] ^= 0xff;
	assert_int_equal(((uint8_t *)p.p)[777], (uint8_t)(pat(301, 777) ^ 0xff));
	k.arena[in_off + 777] ^= 0xff;
	rgpu_payload_release(&p);

	/* the whole allocation, to its last byte */
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 2, k.arena + ALLOC_OFF, ALLOC_LEN), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 2, ALLOC_LEN, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &p), 0);
	assert_int_equal(p.in_arena, 1);
	assert_ptr_equal(p.p, (uint8_t *)k.acc.arena + ALLOC_OFF);
	assert_memory_equal(p.p, k.arena + ALLOC_OFF, ALLOC_LEN);
	rgpu_payload_release(&p);

	/* outside the allocation, and across its end: through a slot */
	const uint64_t outside[] = {600 * KiB, ALLOC_OFF + ALLOC_LEN - 50000};
	for (int i = 0; i < 2; i++) {
		uint64_t seq = 3 + (uint64_t)i;
		fill(k.arena + outside[i], len, 310 + (uint32_t)i);
		assert_int_equal(send_chunk(k.cli, MSG_HTOD, seq, k.arena + outside[i], len), 0);
		recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, seq, len, 1, &h);
		assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &p), 0);
		assert_int_equal(p.in_arena, 0);
		assert_true(p.slot >= 1 && p.slot <= 2);
		assert_ptr_equal(p.p, k.acc.slots + (uint64_t)(p.slot - 1) * SLOT);
		assert_int_equal(p.len, len);
		assert_pattern(p.p, len, 310 + (uint32_t)i);
		rgpu_payload_release(&p);
	}
	/* copied out of the arena too */
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 5, k.arena + in_off, len), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 5, len, 1, &h);
	uint8_t *got = malloc(len);
	assert_non_null(got);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, got, len), 0);
	assert_pattern(got, len, 301);
	free(got);
	link_down(&k);
}

/* --- 4. server to client: its staging buffers ------------------------------------------------- */

static void test_stage_to_client(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	struct rgpu_payload p;
	uint64_t len = 100000;
	uint8_t *got = malloc(SLOT), *heap = malloc(len);

	assert_non_null(got);
	assert_non_null(heap);
	link_up(&k);
	uint8_t *stage = k.acc.stage;
	fill(stage, 2 * SLOT, 400);

	/* in staging buffer 1: by reference, copied out by the client */
	fill(stage + SLOT + 8, len, 401);
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 1, stage + SLOT + 8, len), 0);
	recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, 1, len, 1, &h);
	memset(got, 0, SLOT);
	assert_int_equal(rgpu_conn_recv_payload(k.cli, got, len), 0);
	assert_pattern(got, len, 401);
	/* the ring carried only the reference */
	assert_int_equal(ld64(k.base, CTL_HEAD(S2C)), RGPU_FRAME_HDR_LEN + 2 + REF_LEN);

	/* staging buffer 0, whole, taken where it lies */
	fill(stage, SLOT, 402);
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 2, stage, SLOT), 0);
	recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, 2, SLOT, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k.cli, &h, &p), 0);
	assert_int_equal(p.len, SLOT);
	assert_int_equal(p.slot, 0);
	assert_int_equal(p.in_arena, 0);
	assert_pattern(p.p, SLOT, 402);
	rgpu_payload_release(&p);

	/* outside the staging area, across two buffers, and too short: through the ring */
	fill(heap, len, 403);
	fill(stage + SLOT - 50000, len, 404);
	fill(stage + 16, 1000, 405);
	struct {
		const uint8_t *p;
		uint64_t len;
		uint32_t id;
	} ring[] = {{heap, len, 403}, {stage + SLOT - 50000, len, 404}, {stage + 16, 1000, 405}};
	for (int i = 0; i < 3; i++) {
		struct async_send a = {.c = k.srv,
				       .type = MSG_DATA,
				       .seq = 3 + (uint64_t)i,
				       .payload = ring[i].p,
				       .len = ring[i].len};
		async_send_start(&a); /* more than the ring holds */
		recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, a.seq, ring[i].len, 0, &h);
		assert_int_equal(rgpu_conn_take_payload(k.cli, &h, &p), RGPU_EUNSUPPORTED);
		memset(got, 0, SLOT);
		assert_int_equal(rgpu_conn_recv_payload(k.cli, got, ring[i].len), 0);
		assert_int_equal(async_send_end(&a), 0);
		assert_pattern(got, ring[i].len, ring[i].id);
	}
	/* and a staged one dropped, then one more intact */
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 6, stage + SLOT, len), 0);
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 7, heap, 5000), 0);
	recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, 6, len, 1, &h);
	assert_int_equal(rgpu_conn_discard(k.cli, len), 0);
	recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, 7, 5000, 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(k.cli, got, 5000), 0);
	assert_pattern(got, 5000, 403);
	free(got);
	free(heap);
	link_down(&k);
}

/* --- 5. a hostile client ---------------------------------------------------------------------- */

/* (a) impossible indices in the shared control block */
static void test_hostile_indices(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1, buf[100];

	fill(buf, sizeof(buf), 500);
	/* the client's head far past the server's tail */
	link_up(&k);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, buf, sizeof(buf)), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, sizeof(buf), 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, buf, sizeof(buf)), 0);
	uint64_t tail = ld64(k.base, CTL_TAIL(C2S));
	assert_int_equal(tail, RGPU_FRAME_HDR_LEN + 2 + sizeof(buf));
	st64(k.base, CTL_HEAD(C2S), tail + 10 * RING);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_EPROTO);
	assert_null(body);
	link_down(&k);

	/* ... and behind it */
	link_up(&k);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, buf, sizeof(buf)), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, sizeof(buf), 0, &h);
	assert_int_equal(rgpu_conn_discard(k.srv, sizeof(buf)), 0);
	st64(k.base, CTL_HEAD(C2S), ld64(k.base, CTL_TAIL(C2S)) - 1);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_EPROTO);
	link_down(&k);

	/* the client's tail of the ring it reads, ahead of what the server wrote */
	link_up(&k);
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 1, buf, sizeof(buf)), 0);
	st64(k.base, CTL_TAIL(S2C), ld64(k.base, CTL_HEAD(S2C)) + 5);
	assert_int_equal(send_chunk(k.srv, MSG_DATA, 2, buf, sizeof(buf)), RGPU_EPROTO);
	link_down(&k);
}

/* (b) garbage in the ring */
static void test_hostile_garbage(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1, junk[300];

	link_up(&k);
	fill(junk, sizeof(junk), 510);
	struct iovec iov = {junk, sizeof(junk)};
	assert_int_equal(rgpu_conn_sendv(k.cli, &iov, 1), 0);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_EMAGIC);
	assert_null(body);
	link_down(&k);

	/* written straight into the ring's memory across its end, the head moved by hand */
	link_up(&k);
	uint8_t *ring0 = k.base + DATA_OFF;
	uint8_t hdr[RGPU_FRAME_HDR_LEN];
	hand_hdr(hdr, MSG_HTOD, 0, 0xfffffff0u, 0, 1); /* a huge body */
	/* the server's tail is private: bring it to RING - 20 with a frame it reads */
	static uint8_t fillbuf[RING];
	uint64_t pl = RING - 20 - RGPU_FRAME_HDR_LEN - 2;
	fill(fillbuf, pl, 511);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, fillbuf, pl), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, pl, 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, fillbuf, pl), 0);
	assert_pattern(fillbuf, pl, 511);
	assert_int_equal(ld64(k.base, CTL_TAIL(C2S)), RING - 20);
	memcpy(ring0 + RING - 20, hdr, 20);
	memcpy(ring0, hdr + 20, RGPU_FRAME_HDR_LEN - 20);
	st64(k.base, CTL_HEAD(C2S), RING - 20 + RGPU_FRAME_HDR_LEN);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_ETOOBIG);
	assert_int_equal(h.body_len, 0xfffffff0u);
	assert_null(body);
	link_down(&k);
}

/* (c) references out of bounds */
struct bad_ref {
	const char *what;
	uint32_t kind, index;
	uint64_t off, len, reg_off, reg_len;
	uint64_t payload_len;
	int arena;  /* the link has an arena */
	int expect; /* 0: a good reference (the control), else the error */
};

static void send_ref(struct rgpu_conn *c, uint16_t type, const struct bad_ref *b)
{
	uint8_t wire[RGPU_FRAME_HDR_LEN + 2 + REF_LEN];
	hand_hdr(wire, type, RGPU_FRAME_BYREF, 2, b->payload_len, 1);
	wire[RGPU_FRAME_HDR_LEN] = 0x08; /* DataChunk{offset = 1} */
	wire[RGPU_FRAME_HDR_LEN + 1] = 0x01;
	uint8_t *r = wire + RGPU_FRAME_HDR_LEN + 2;
	put_le(r + 0, b->kind, 4);
	put_le(r + 4, b->index, 4);
	put_le(r + 8, b->off, 8);
	put_le(r + 16, b->len, 8);
	put_le(r + 24, b->reg_off, 8);
	put_le(r + 32, b->reg_len, 8);
	struct iovec iov = {wire, sizeof(wire)};
	assert_int_equal(rgpu_conn_sendv(c, &iov, 1), 0);
}

static void test_hostile_refs(void **state)
{
	(void)state;
	static const struct bad_ref to_server[] = {
	    {"slot 1 (the control)", REF_SLOT, 1, 0, 100000, 0, 0, 100000, 0, 0},
	    {"arena (the control)", REF_ARENA, 0, ALLOC_OFF + 10, 1000, ALLOC_OFF, ALLOC_LEN, 1000,
	     1, 0},
	    {"slot == nslots", REF_SLOT, 2, 0, 100000, 0, 0, 100000, 0, RGPU_EPROTO},
	    {"slot 0xffffffff", REF_SLOT, 0xffffffffu, 0, 100000, 0, 0, 100000, 0, RGPU_EPROTO},
	    {"slot, longer than a slot", REF_SLOT, 0, 0, SLOT + 1, 0, 0, SLOT + 1, 0, RGPU_EPROTO},
	    {"length unlike the header's", REF_SLOT, 0, 0, 100000, 0, 0, 100001, 0, RGPU_EPROTO},
	    {"kind 0", 0, 0, 0, 100000, 0, 0, 100000, 0, RGPU_EPROTO},
	    {"kind 7", 7, 0, 0, 100000, 0, 0, 100000, 0, RGPU_EPROTO},
	    {"a staging buffer, from the client", REF_STAGE, 0, 0, 100000, 0, 0, 100000, 0,
	     RGPU_EPROTO},
	    {"arena, no arena", REF_ARENA, 0, 0, 1000, 0, 4096, 1000, 0, RGPU_EPROTO},
	    {"arena, past its end", REF_ARENA, 0, ARENA_SIZE - 100, 1000, ARENA_SIZE - 4096, 4096,
	     1000, 1, RGPU_EPROTO},
	    {"arena, offset wraps", REF_ARENA, 0, UINT64_MAX - 10, 1000, 0, ARENA_SIZE, 1000, 1,
	     RGPU_EPROTO},
	    {"arena, before its allocation", REF_ARENA, 0, ALLOC_OFF - 10, 1000, ALLOC_OFF,
	     ALLOC_LEN, 1000, 1, RGPU_EPROTO},
	    {"arena, past its allocation", REF_ARENA, 0, ALLOC_OFF + ALLOC_LEN - 10, 1000,
	     ALLOC_OFF, ALLOC_LEN, 1000, 1, RGPU_EPROTO},
	    {"arena, allocation outside the arena", REF_ARENA, 0, ARENA_SIZE - 1000, 1000,
	     ARENA_SIZE - 1000, UINT64_MAX - 100, 1000, 1, RGPU_EPROTO},
	};
	static const struct bad_ref to_client[] = {
	    {"stage 1 (the control)", REF_STAGE, 1, 100, 100000, 0, 0, 100000, 0, 0},
	    {"stage == nstage", REF_STAGE, 2, 0, 100000, 0, 0, 100000, 0, RGPU_EPROTO},
	    {"stage, past the buffer's end", REF_STAGE, 0, SLOT - 1000, 1001, 0, 0, 1001, 0,
	     RGPU_EPROTO},
	    {"stage, offset wraps", REF_STAGE, 0, UINT64_MAX - 10, 100, 0, 0, 100, 0, RGPU_EPROTO},
	    {"a client slot, from the server", REF_SLOT, 0, 0, 100000, 0, 0, 100000, 0,
	     RGPU_EPROTO},
	    {"the client's arena, from the server", REF_ARENA, 0, ALLOC_OFF, 1000, ALLOC_OFF,
	     ALLOC_LEN, 1000, 1, RGPU_EPROTO},
	};
	struct rgpu_shm_opts o = small_opts();
	struct link k;
	struct rgpu_frame_hdr h;
	struct rgpu_payload p;
	uint8_t *body;
	uint8_t *got = malloc(SLOT + 1);

	assert_non_null(got);
	for (size_t i = 0; i < sizeof(to_server) / sizeof(to_server[0]); i++) {
		const struct bad_ref *b = &to_server[i];
		/* each read three ways: taken, copied, dropped */
		for (int how = 0; how < 3; how++) {
			link_up_opts(&k, &o, b->arena);
			send_ref(k.cli, MSG_HTOD, b);
			int ret = rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000);
			if (ret)
				fail_msg("%s: rgpu_frame_recv %d", b->what, ret);
			free(body);
			assert_true(h.flags & RGPU_FRAME_BYREF);
			memset(&p, 0x5a, sizeof(p));
			ret = how == 0	 ? rgpu_conn_take_payload(k.srv, &h, &p)
			      : how == 1 ? rgpu_conn_recv_payload(k.srv, got, h.payload_len)
					 : rgpu_conn_discard(k.srv, h.payload_len);
			if (ret != b->expect)
				fail_msg("%s (%s): %d (%s), want %d", b->what,
					 how == 0   ? "take"
					 : how == 1 ? "copy"
						    : "discard",
					 ret, rgpu_strerror(ret), b->expect);
			if (how == 0 && ret)
				assert_null(p.map);
			if (how == 0 && !ret) {
				assert_int_equal(p.len, b->len);
				if (b->kind == REF_SLOT) {
					assert_int_equal(p.slot, (int)b->index + 1);
					assert_ptr_equal(p.p, k.acc.slots + b->index * SLOT);
				} else {
					assert_int_equal(p.in_arena, 1);
					assert_ptr_equal(p.p, (uint8_t *)k.acc.arena + b->off);
				}
				rgpu_payload_release(&p);
			}
			link_down(&k);
		}
	}
	for (size_t i = 0; i < sizeof(to_client) / sizeof(to_client[0]); i++) {
		const struct bad_ref *b = &to_client[i];
		for (int how = 0; how < 2; how++) {
			link_up_opts(&k, &o, b->arena);
			fill(k.acc.stage, 2 * SLOT, 420);
			send_ref(k.srv, MSG_DATA, b);
			int ret = rgpu_frame_recv_within(k.cli, RGPU_PEER_CLIENT, &h, &body, 1000);
			if (ret)
				fail_msg("%s: rgpu_frame_recv %d", b->what, ret);
			free(body);
			memset(&p, 0x5a, sizeof(p));
			ret = how == 0 ? rgpu_conn_take_payload(k.cli, &h, &p)
				       : rgpu_conn_recv_payload(k.cli, got, h.payload_len);
			if (ret != b->expect)
				fail_msg("%s (%s): %d (%s), want %d", b->what,
					 how == 0 ? "take" : "copy", ret, rgpu_strerror(ret),
					 b->expect);
			if (how == 0 && !ret) {
				/* the client's own mapping of staging buffer 1, from offset 100 */
				assert_ptr_not_equal(p.p, k.acc.stage + SLOT + 100);
				assert_memory_equal(p.p, k.acc.stage + SLOT + 100, b->len);
				rgpu_payload_release(&p);
			}
			link_down(&k);
		}
	}

	/* by reference without a payload: refused with the header */
	link_up(&k);
	uint8_t hdr[RGPU_FRAME_HDR_LEN + 2];
	hand_hdr(hdr, MSG_HTOD, RGPU_FRAME_BYREF, 2, 0, 1);
	hdr[RGPU_FRAME_HDR_LEN] = 0x08;
	hdr[RGPU_FRAME_HDR_LEN + 1] = 0x01;
	struct iovec iov = {hdr, sizeof(hdr)};
	assert_int_equal(rgpu_conn_sendv(k.cli, &iov, 1), 0);
	body = (uint8_t *)0x1;
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_EPROTO);
	assert_null(body);
	link_down(&k);
	free(got);
}

/* (d) offers the server refuses */
struct offer {
	uint64_t magic;
	uint32_t version, nfds;
	uint64_t ring, slot;
	uint32_t nslots, nstage;
	uint64_t total, arena_size;
};

static uint64_t total_of(uint64_t ring, uint64_t slot, uint32_t nslots, uint32_t nstage)
{
	return DATA_OFF + 2 * ring + ((uint64_t)nslots + nstage) * slot;
}

static struct offer good_offer(void)
{
	struct offer o = {
	    .magic = get_le((const uint8_t *)SHM_MAGIC_BYTES, 8),
	    .version = 1,
	    .nfds = 1,
	    .ring = RING,
	    .slot = SLOT,
	    .nslots = 2,
	    .nstage = 2,
	    .total = total_of(RING, SLOT, 2, 2),
	};
	return o;
}

/* the offer's 56 bytes by hand (shm.c's struct shm_offer), with nfd descriptors attached */
static void send_offer(int sock, const struct offer *o, const int *fds, int nfd)
{
	uint8_t b[OFFER_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {b, sizeof(b)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	put_le(b + 0, o->magic, 8);
	put_le(b + 8, o->version, 4);
	put_le(b + 12, o->nfds, 4);
	put_le(b + 16, o->ring, 8);
	put_le(b + 24, o->slot, 8);
	put_le(b + 32, o->nslots, 4);
	put_le(b + 36, o->nstage, 4);
	put_le(b + 40, o->total, 8);
	put_le(b + 48, o->arena_size, 8);
	if (nfd) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfd);
	}
	assert_int_equal(sendmsg(sock, &msg, MSG_NOSIGNAL), OFFER_LEN);
}

/*
 * One offer from a hand-made client: the server's verdict, its why, and the answer byte it sent
 * (-1: none). The link memfd is made here (size, sealed as told); an arena when arena_size.
 */
struct verdict {
	int ret;
	char why[256];
	int answer;
};

enum { FD_OK, FD_UNSEALED, FD_SMALL, FD_PIPE, FD_NONE, FD_TWO };

static struct verdict try_offer(const struct offer *o, int fdkind, int arena_sealed, uint64_t tail0)
{
	struct verdict v = {.answer = -1};
	struct rgpu_shm_accepted acc;
	int sv[2], fds[2] = {-1, -1}, nfd = 1, pfd[2] = {-1, -1};

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct rgpu_conn *srv = wrap(sv[1]);
	switch (fdkind) {
	case FD_PIPE:
		assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
		fds[0] = pfd[0];
		break;
	case FD_NONE:
		nfd = 0;
		break;
	default:
		fds[0] = make_memfd("rgpu-offer", fdkind == FD_SMALL ? o->total - 4096 : o->total,
				    fdkind != FD_UNSEALED);
		if (tail0) {
			void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
			assert_true(m != MAP_FAILED);
			st64(m, CTL_TAIL(C2S), tail0);
			munmap(m, 4096);
		}
	}
	if (o->arena_size || fdkind == FD_TWO) {
		fds[1] = make_memfd("rgpu-offer-arena", o->arena_size ? o->arena_size : 4096,
				    arena_sealed);
		nfd = 2;
	}
	send_offer(sv[0], o, fds, nfd);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	memset(&acc, 0x5a, sizeof(acc));
	v.ret = rgpu_shm_accept(srv, 1000, &acc, v.why, sizeof(v.why));
	if (v.ret) {
		/* nothing handed out, and the connection is still a plain one */
		assert_null(acc.link_map);
		assert_null(acc.arena_map);
		assert_false(rgpu_conn_is_shm(srv));
	} else {
		assert_true(rgpu_conn_is_shm(srv));
		rgpu_shm_map_put(acc.link_map);
		rgpu_shm_map_put(acc.arena_map);
	}
	uint8_t a;
	if (recv(sv[0], &a, 1, MSG_DONTWAIT) == 1)
		v.answer = a;
	close(sv[0]);
	rgpu_conn_close(srv);
	return v;
}

#define assert_refused(v, ret_, words)                                                             \
	do {                                                                                       \
		struct verdict v_ = (v);                                                           \
		if (v_.ret != (ret_) || !strstr(v_.why, (words)) || v_.answer != 1)                \
			fail_msg("line %d: verdict %d, why \"%s\", answer %d; want %d, \"%s\", "   \
				 "answer 1",                                                       \
				 __LINE__, v_.ret, v_.why, v_.answer, (ret_), (words));            \
	} while (0)

static void test_offers_refused(void **state)
{
	(void)state;
	int fds0 = count_fds();
	struct offer o;

	/* the control: a good offer by hand is accepted (so the layout written here is right) */
	o = good_offer();
	struct verdict v = try_offer(&o, FD_OK, 0, 0);
	if (v.ret || v.answer != 0)
		fail_msg("a good offer: %d (%s), answer %d", v.ret, v.why, v.answer);
	o.arena_size = 64 * KiB;
	o.nfds = 2;
	v = try_offer(&o, FD_OK, 1, 0);
	if (v.ret || v.answer != 0)
		fail_msg("a good offer with an arena: %d (%s), answer %d", v.ret, v.why, v.answer);

	o = good_offer();
	o.magic ^= 1;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "not a shared-memory offer");
	o = good_offer();
	o.version = 2;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "not a shared-memory offer");

	o = good_offer();
	assert_refused(try_offer(&o, FD_UNSEALED, 0, 0), RGPU_EPROTO, "F_SEAL_SHRINK");
	assert_refused(try_offer(&o, FD_SMALL, 0, 0), RGPU_EPROTO, "not a file of");
	assert_refused(try_offer(&o, FD_PIPE, 0, 0), RGPU_EPROTO, "not a file of");
	assert_refused(try_offer(&o, FD_NONE, 0, 0), RGPU_EPROTO, "out of bounds");
	assert_refused(try_offer(&o, FD_TWO, 1, 0), RGPU_EPROTO, "out of bounds");
	assert_refused(try_offer(&o, FD_OK, 0, 8), RGPU_EPROTO, "not new");

	/* an arena that could shrink; one announced but not attached */
	o.arena_size = 64 * KiB;
	o.nfds = 2;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "arena could shrink");
	o.arena_size = 64 * KiB + 100;
	assert_refused(try_offer(&o, FD_OK, 1, 0), RGPU_EPROTO, "out of bounds");
	o = good_offer();
	o.nfds = 2;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "out of bounds");

	/* sizes out of bounds, each with a total that matches them */
	struct {
		uint64_t ring, slot;
		uint32_t nslots, nstage;
	} sz[] = {
	    {RING / 2, SLOT, 2, 2},	  /* ring below 64 KiB */
	    {RING + 4096, SLOT, 2, 2},	  /* not a power of two */
	    {128 * MiB, SLOT, 2, 2},	  /* above 64 MiB */
	    {RING, 32 * KiB, 2, 2},	  /* slots below the by-reference minimum */
	    {RING, SLOT + 100, 2, 2},	  /* not whole pages */
	    {RING, 32 * MiB, 1, 1},	  /* above 16 MiB */
	    {RING, SLOT, 65, 0},	  /* too many slots */
	    {RING, SLOT, 0, 65},	  /* too many staging buffers */
	    {RING, SLOT, 0xffffffffu, 2}, /* a count far past the limit */
	};
	for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		o = good_offer();
		o.ring = sz[i].ring;
		o.slot = sz[i].slot;
		o.nslots = sz[i].nslots;
		o.nstage = sz[i].nstage;
		o.total = total_of(o.ring, o.slot, o.nslots, o.nstage);
		/* the memfd only needs to be as long as the total says for the bounds to matter */
		if (o.total > 512 * MiB)
			o.total = 4096 * 2;
		assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "out of bounds");
	}
	o = good_offer();
	o.total += 4096;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "out of bounds");
	o.total -= 2 * 4096;
	assert_refused(try_offer(&o, FD_OK, 0, 0), RGPU_EPROTO, "out of bounds");

	/* every descriptor that came with an offer is closed again */
	assert_int_equal(count_fds(), fds0);
}

/* no offer at all, or a client that offers and goes before the answer */
static void test_offer_gone(void **state)
{
	(void)state;
	int fds0 = count_fds();
	int sv[2];
	char why[256];
	struct rgpu_shm_accepted acc;
	struct timespec t0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct rgpu_conn *srv = wrap(sv[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_shm_accept(srv, 150, &acc, why, sizeof(why)), RGPU_ETIMEDOUT);
	long ms = ms_since(&t0);
	assert_true(ms >= 140 && ms < 2000);
	if (!strstr(why, "no shared-memory offer"))
		fail_msg("why: %s", why);
	close(sv[0]);
	assert_int_equal(rgpu_shm_accept(srv, 1000, &acc, why, sizeof(why)), RGPU_ECLOSED);
	rgpu_conn_close(srv);

	/* a good offer, then the client is gone: the answer cannot be written */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	srv = wrap(sv[1]);
	struct offer o = good_offer();
	int fd = make_memfd("rgpu-offer", o.total, 1);
	send_offer(sv[0], &o, &fd, 1);
	close(fd);
	close(sv[0]);
	memset(&acc, 0x5a, sizeof(acc));
	int ret = rgpu_shm_accept(srv, 1000, &acc, why, sizeof(why));
	if (ret != RGPU_ECLOSED)
		fail_msg("offer then gone: %d (%s), want RGPU_ECLOSED", ret, why);
	assert_null(acc.link_map);
	assert_null(acc.arena_map);
	assert_false(rgpu_conn_is_shm(srv));
	rgpu_conn_close(srv);
	assert_int_equal(count_maps("rgpu-offer"), 0);
	assert_int_equal(count_fds(), fds0);
}

/* --- 6. the peer dies ------------------------------------------------------------------------- */

struct later {
	struct rgpu_conn *c;
	int ms;
	int how; /* 0: close, 1: shutdown */
	struct timespec at;
};

static void *later_main(void *arg)
{
	struct later *l = arg;
	sleep_ms(l->ms);
	clock_gettime(CLOCK_MONOTONIC, &l->at);
	if (l->how)
		rgpu_conn_shutdown(l->c);
	else
		rgpu_conn_close(l->c);
	return NULL;
}

static void test_peer_gone_reader(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1, buf[5000];
	pthread_t th;

	/* the client closes, or shuts its link down, while the server sleeps for a frame */
	for (int how = 0; how < 2; how++) {
		link_up(&k);
		struct later l = {.c = k.cli, .ms = 150, .how = how};
		assert_int_equal(pthread_create(&th, NULL, later_main, &l), 0);
		int ret = rgpu_frame_recv(k.srv, RGPU_PEER_SERVER, &h, &body);
		long ms = ms_since(&l.at);
		pthread_join(th, NULL);
		if (ret != RGPU_ECLOSED || ms > 1000)
			fail_msg("%s: %d after %ld ms, want RGPU_ECLOSED within 1 s",
				 how ? "shutdown" : "close", ret, ms);
		assert_null(body);
		if (how)
			rgpu_conn_close(k.cli);
		k.cli = NULL;
		link_down(&k);
	}

	/* a whole frame in the ring, then the close: the frame first, then the end */
	link_up(&k);
	fill(buf, sizeof(buf), 600);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, buf, sizeof(buf)), 0);
	rgpu_conn_close(k.cli);
	k.cli = NULL;
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, sizeof(buf), 0, &h);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(rgpu_conn_recv_payload(k.srv, buf, sizeof(buf)), 0);
	assert_pattern(buf, sizeof(buf), 600);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_ECLOSED);
	link_down(&k);

	/* ... and half a frame: truncated */
	link_up(&k);
	uint8_t hdr[RGPU_FRAME_HDR_LEN];
	hand_hdr(hdr, MSG_HTOD, 0, 2, 100, 1);
	struct iovec iov = {hdr, 30};
	assert_int_equal(rgpu_conn_sendv(k.cli, &iov, 1), 0);
	rgpu_conn_close(k.cli);
	k.cli = NULL;
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 1000),
			 RGPU_ETRUNC);
	link_down(&k);

	/* a payload by reference whose sender went: it still arrives whole */
	link_up(&k);
	uint8_t *big = malloc(100000);
	assert_non_null(big);
	fill(big, 100000, 601);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, big, 100000), 0);
	rgpu_conn_close(k.cli);
	k.cli = NULL;
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, 100000, 1, &h);
	memset(big, 0, 100000);
	assert_int_equal(rgpu_conn_recv_payload(k.srv, big, 100000), 0);
	assert_pattern(big, 100000, 601);
	free(big);
	link_down(&k);

	/* shut down here: the blocked reader wakes */
	link_up(&k);
	struct later l = {.c = k.srv, .ms = 150, .how = 1};
	assert_int_equal(pthread_create(&th, NULL, later_main, &l), 0);
	int ret = rgpu_frame_recv(k.srv, RGPU_PEER_SERVER, &h, &body);
	long ms = ms_since(&l.at);
	pthread_join(th, NULL);
	if (ret != RGPU_ECLOSED || ms > 1000)
		fail_msg("own shutdown: %d after %ld ms, want RGPU_ECLOSED within 1 s", ret, ms);
	link_down(&k);
}

struct flood {
	struct rgpu_conn *c;
	uint64_t len; /* each frame's payload */
	int ret;
	int sent;
	struct timespec end;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	uint8_t *buf = malloc(f->len);
	if (!buf) {
		f->ret = RGPU_ENOMEM;
		return NULL;
	}
	fill(buf, f->len, 700);
	for (int i = 0; i < 1000 && !f->ret; i++) {
		f->ret = send_chunk(f->c, MSG_HTOD, (uint64_t)i + 1, buf, f->len);
		if (!f->ret)
			f->sent++;
	}
	clock_gettime(CLOCK_MONOTONIC, &f->end);
	free(buf);
	return NULL;
}

/* the server goes while the client waits for room in the ring (after it waited for a slot) */
static void test_peer_gone_writer(void **state)
{
	(void)state;
	const uint64_t lens[] = {30000, 100000, 300000}; /* ring, slots, ring (> a slot) */
	for (int i = 0; i < 3; i++) {
		struct link k;
		pthread_t th;
		struct flood f = {.len = lens[i]};
		struct timespec t0;

		link_up(&k);
		f.c = k.cli;
		assert_int_equal(pthread_create(&th, NULL, flood_main, &f), 0);
		sleep_ms(150);
		/* blocked: no frame is read, so only what fits went */
		assert_int_equal(f.ret, 0);
		int sent = f.sent;
		if (i == 0) { /* two whole frames, and the ring full with part of the third */
			assert_int_equal(sent, 2);
			assert_int_equal(ld64(k.base, CTL_HEAD(C2S)), RING);
		} else if (i == 1) { /* two references, one per slot; the third waited for a
				      * slot, none came free, and its bytes filled the ring */
			assert_int_equal(sent, 2);
			assert_int_equal(ld64(k.base, CTL_HEAD(C2S)), RING);
		} else { /* the first frame does not fit */
			assert_int_equal(sent, 0);
			assert_int_equal(ld64(k.base, CTL_HEAD(C2S)), RING);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rgpu_conn_close(k.srv);
		k.srv = NULL;
		pthread_join(th, NULL);
		long ms =
		    (f.end.tv_sec - t0.tv_sec) * 1000 + (f.end.tv_nsec - t0.tv_nsec) / 1000000;
		if (f.ret != RGPU_ECLOSED || ms > 1000)
			fail_msg("%llu-byte frames: the sender got %d after %ld ms, want "
				 "RGPU_ECLOSED within 1 s",
				 (unsigned long long)lens[i], f.ret, ms);
		assert_int_equal(f.sent, sent);
		link_down(&k);
	}
}

/* --- the sleepers are woken, not left to their slices ----------------------------------------- */

/*
 * With no spinning every wait below sleeps on a futex; a wake that went missing would cost the
 * sleeper its whole slice (50 ms in shm.c) and these loops a few seconds each.
 */
struct echo {
	struct rgpu_conn *c;
	int n;
	int ret;
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	for (int i = 0; i < e->n; i++) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL, b[64];
		e->ret = rgpu_frame_recv_within(e->c, RGPU_PEER_SERVER, &h, &body, 3000);
		if (!e->ret && h.payload_len == sizeof(b))
			e->ret = rgpu_conn_recv_payload(e->c, b, sizeof(b));
		free(body);
		if (!e->ret)
			e->ret = send_chunk(e->c, MSG_DATA, h.seq, b, sizeof(b));
		if (e->ret)
			return NULL;
	}
	return NULL;
}

static void test_wakes(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	struct timespec t0;
	pthread_t th;
	uint8_t b[64];
	long ms;

	/* round trips: each end sleeps for the other's frame (the data futexes) */
	link_up(&k);
	struct echo e = {.c = k.srv, .n = 100};
	assert_int_equal(pthread_create(&th, NULL, echo_main, &e), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < e.n; i++) {
		fill(b, sizeof(b), 900 + (uint32_t)i);
		assert_int_equal(send_chunk(k.cli, MSG_HTOD, (uint64_t)i + 1, b, sizeof(b)), 0);
		recv_chunk(k.cli, RGPU_PEER_CLIENT, MSG_DATA, (uint64_t)i + 1, sizeof(b), 0, &h);
		memset(b, 0, sizeof(b));
		assert_int_equal(rgpu_conn_recv_payload(k.cli, b, sizeof(b)), 0);
		assert_pattern(b, sizeof(b), 900 + (uint32_t)i);
	}
	ms = ms_since(&t0);
	pthread_join(th, NULL);
	assert_int_equal(e.ret, 0);
	if (ms > 1500)
		fail_msg("100 round trips took %ld ms: sleepers wait out their slices", ms);
	link_down(&k);

	/*
	 * a writer on a full ring sleeps until the reader makes room (the room futex): frames
	 * larger than a slot go through the ring, nearly five ring-fulls each
	 */
	link_up(&k);
	const uint64_t len = 300000;
	uint8_t *big = malloc(len), *got = malloc(len);
	assert_non_null(big);
	assert_non_null(got);
	fill(big, len, 910);
	struct async_send a = {.c = k.cli, .type = MSG_HTOD, .payload = big, .len = len};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 20; i++) {
		a.seq = (uint64_t)i + 1;
		async_send_start(&a);
		recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, a.seq, len, 0, &h);
		memset(got, 0, len);
		assert_int_equal(rgpu_conn_recv_payload(k.srv, got, len), 0);
		assert_int_equal(async_send_end(&a), 0);
		assert_pattern(got, len, 910);
	}
	ms = ms_since(&t0);
	if (ms > 1500)
		fail_msg("20 frames of %llu bytes through a %llu-byte ring took %ld ms: a sleeper "
			 "waits out its slices",
			 (unsigned long long)len, (unsigned long long)RING, ms);
	link_down(&k);

	/* a client waiting for a slot sleeps until the server releases one (the slot futex) */
	link_up(&k);
	static const uint64_t sizes[60] = {[0 ... 59] = 100000};
	struct sender s = {.c = k.cli, .sizes = sizes, .n = 60, .id0 = 920};
	struct rgpu_payload held[2] = {{0}};
	atomic_init(&s.sent, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&th, NULL, sender_main, &s), 0);
	for (int i = 0; i < 60; i++) {
		/* both slots held: the next frame comes only once the older one is released */
		take_slot(&k, i, 100000, 920 + (uint32_t)i, &held[i % 2]);
		sleep_ms(1); /* long enough for the sender to be asleep, waiting for a slot */
		rgpu_payload_release(&held[(i + 1) % 2]);
	}
	rgpu_payload_release(&held[1]);
	ms = ms_since(&t0);
	pthread_join(th, NULL);
	assert_int_equal(s.ret, 0);
	if (ms > 1500)
		fail_msg("60 frames through two slots took %ld ms: a waiter waits out its slices",
			 ms);
	free(big);
	free(got);
	link_down(&k);
}

/* a frame begun and then stalled is bounded by the frame timeout, as on a socket */
static void test_stalled_frame(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	uint8_t *body = (uint8_t *)0x1, hdr[RGPU_FRAME_HDR_LEN];
	struct timespec t0;

	link_up(&k);
	rgpu_conn_set_frame_timeout(k.srv, 150);
	/* nothing at all: the wait for a frame to begin is bounded as asked */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv_within(k.srv, RGPU_PEER_SERVER, &h, &body, 200),
			 RGPU_ETIMEDOUT);
	long ms = ms_since(&t0);
	assert_true(ms >= 190 && ms < 2000);
	/* half a header, then nothing */
	hand_hdr(hdr, MSG_HTOD, 0, 2, 100, 1);
	struct iovec iov = {hdr, 30};
	assert_int_equal(rgpu_conn_sendv(k.cli, &iov, 1), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_frame_recv(k.srv, RGPU_PEER_SERVER, &h, &body), RGPU_EDEADLINE);
	ms = ms_since(&t0);
	if (ms < 140 || ms > 2000)
		fail_msg("a stalled frame: RGPU_EDEADLINE after %ld ms, want about 150", ms);
	assert_null(body);
	link_down(&k);
}

/* the client's side of a refusal, and of a server that never answers */
static void test_offer_refused_client(void **state)
{
	(void)state;
	int sv[2];
	char why[256], cwhy[256];
	struct rgpu_shm_accepted acc;
	pthread_t th;
	struct rgpu_shm_opts o = small_opts();
	int fds0 = count_fds();

	/* a ring that is not a power of two: the server refuses, both ends stay plain */
	o.ring_size = RING + 4096;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct rgpu_conn *cli = wrap(sv[0]), *srv = wrap(sv[1]);
	struct offer_arg oa = {.c = cli, .opt = &o};
	assert_int_equal(pthread_create(&th, NULL, offer_main, &oa), 0);
	assert_int_equal(rgpu_shm_accept(srv, 3000, &acc, why, sizeof(why)), RGPU_EPROTO);
	pthread_join(th, NULL);
	if (oa.ret != RGPU_EPROTO || !strstr(oa.why, "refused"))
		fail_msg("offer: %d (%s), want RGPU_EPROTO, refused", oa.ret, oa.why);
	if (!strstr(why, "out of bounds"))
		fail_msg("accept: %s", why);
	assert_false(rgpu_conn_is_shm(cli));
	assert_false(rgpu_conn_is_shm(srv));
	/* and the socket still carries frames, nothing of the handshake left on it */
	uint8_t b[3000];
	struct rgpu_frame_hdr h;
	fill(b, sizeof(b), 950);
	assert_int_equal(send_chunk(cli, MSG_HTOD, 1, b, sizeof(b)), 0);
	recv_chunk(srv, RGPU_PEER_SERVER, MSG_HTOD, 1, sizeof(b), 0, &h);
	memset(b, 0, sizeof(b));
	assert_int_equal(rgpu_conn_recv_payload(srv, b, sizeof(b)), 0);
	assert_pattern(b, sizeof(b), 950);
	assert_int_equal(send_chunk(srv, MSG_DATA, 2, b, 100), 0);
	recv_chunk(cli, RGPU_PEER_CLIENT, MSG_DATA, 2, 100, 0, &h);
	assert_int_equal(rgpu_conn_recv_payload(cli, b, 100), 0);
	assert_pattern(b, 100, 950);
	rgpu_conn_close(cli);
	rgpu_conn_close(srv);

	/* a server that never answers */
	o = small_opts();
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cli = wrap(sv[0]);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(rgpu_shm_offer(cli, &o, 150, cwhy, sizeof(cwhy)), RGPU_ETIMEDOUT);
	long ms = ms_since(&t0);
	assert_true(ms >= 140 && ms < 2000);
	if (!strstr(cwhy, "did not answer"))
		fail_msg("offer: %s", cwhy);
	assert_false(rgpu_conn_is_shm(cli));
	rgpu_conn_close(cli);
	close(sv[1]); /* with the offer and its descriptor unread */
	assert_int_equal(count_maps("rgpu-link"), 0);
	assert_int_equal(count_fds(), fds0);
}

/* --- 7. what a link is, and payloads that outlive it ------------------------------------------ */

static void test_kinds(void **state)
{
	(void)state;
	int sv[2], lfd, port;
	struct rgpu_conn *a, *b;

	/* a Unix-domain pair before the upgrade */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a = wrap(sv[0]);
	b = wrap(sv[1]);
	assert_int_equal(rgpu_conn_is_unix(a), 1);
	assert_int_equal(rgpu_conn_is_unix(b), 1);
	assert_int_equal(rgpu_conn_is_shm(a), 0);
	assert_int_equal(rgpu_conn_is_shm(b), 0);
	rgpu_conn_close(a);
	rgpu_conn_close(b);
	assert_int_equal(rgpu_conn_is_unix(NULL), 0);
	assert_int_equal(rgpu_conn_is_shm(NULL), 0);

	/* TCP: neither */
	assert_int_equal(rgpu_tcp_listen("127.0.0.1", 0, &lfd, &port), 0);
	assert_int_equal(rgpu_tcp_connect("127.0.0.1", port, 2000, &a), 0);
	assert_int_equal(rgpu_tcp_accept(lfd, &b), 0);
	assert_int_equal(rgpu_conn_is_unix(a), 0);
	assert_int_equal(rgpu_conn_is_unix(b), 0);
	assert_int_equal(rgpu_conn_is_shm(a), 0);
	assert_int_equal(rgpu_conn_is_shm(b), 0);
	rgpu_conn_close(a);
	rgpu_conn_close(b);
	close(lfd);

	/* after the upgrade: shared memory, still over its Unix-domain socket */
	struct link k;
	link_up(&k);
	assert_int_equal(rgpu_conn_is_shm(k.cli), 1);
	assert_int_equal(rgpu_conn_is_shm(k.srv), 1);
	assert_int_equal(rgpu_conn_is_unix(k.cli), 1);
	assert_int_equal(rgpu_conn_is_unix(k.srv), 1);
	assert_int_equal(rgpu_conn_hung_up(k.srv), 0);
	/* its socket alone is not the connection: it cannot be handed over */
	assert_int_equal(rgpu_conn_release_fd(k.srv), RGPU_EUNSUPPORTED);
	assert_int_equal(rgpu_conn_release_fd(k.cli), RGPU_EUNSUPPORTED);
	rgpu_conn_close(k.cli);
	k.cli = NULL;
	assert_int_equal(rgpu_conn_hung_up(k.srv), 1);
	link_down(&k);
	/* and a second upgrade of a link already upgraded is refused */
	link_up(&k);
	char why[256];
	struct rgpu_shm_accepted acc;
	struct rgpu_shm_opts o = small_opts();
	assert_int_equal(rgpu_shm_offer(k.cli, &o, 100, why, sizeof(why)), RGPU_EPROTO);
	assert_int_equal(rgpu_shm_accept(k.srv, 100, &acc, why, sizeof(why)), RGPU_EPROTO);
	link_down(&k);
}

static void test_payload_outlives_link(void **state)
{
	(void)state;
	struct link k;
	struct rgpu_frame_hdr h;
	struct rgpu_payload ps, pa;
	struct rgpu_shm_opts o = small_opts();
	uint8_t *buf = malloc(100000);

	assert_non_null(buf);
	assert_int_equal(count_maps("rgpu-link"), 0);
	link_up_opts(&k, &o, 1);
	assert_int_equal(count_maps("rgpu-link"), 2); /* the client's and the server's */
	assert_int_equal(count_maps("test-arena"), 2);
	rgpu_shm_map_put(k.acc.link_map);
	rgpu_shm_map_put(k.acc.arena_map);
	k.acc.link_map = k.acc.arena_map = NULL;

	/* one payload in a slot, one in the arena, both taken */
	fill(buf, 100000, 800);
	fill(k.arena + ALLOC_OFF, 115536, 801);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 1, buf, 100000), 0);
	assert_int_equal(send_chunk(k.cli, MSG_HTOD, 2, k.arena + ALLOC_OFF, 115536), 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 1, 100000, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &ps), 0);
	assert_int_not_equal(ps.slot, 0);
	recv_chunk(k.srv, RGPU_PEER_SERVER, MSG_HTOD, 2, 115536, 1, &h);
	assert_int_equal(rgpu_conn_take_payload(k.srv, &h, &pa), 0);
	assert_int_equal(pa.in_arena, 1);

	/* both ends closed, the client's arena unmapped: the payloads are still there */
	rgpu_conn_close(k.srv);
	rgpu_conn_close(k.cli);
	k.srv = k.cli = NULL;
	munmap(k.arena, ARENA_SIZE);
	close(k.arena_fd);
	k.arena = NULL;
	assert_int_equal(count_maps("rgpu-link"), 1);
	assert_int_equal(count_maps("test-arena"), 1);
	assert_pattern(ps.p, 100000, 800);
	assert_pattern(pa.p, 115536, 801);
	rgpu_payload_release(&ps);
	assert_int_equal(count_maps("rgpu-link"), 0);
	assert_int_equal(count_maps("test-arena"), 1);
	rgpu_payload_release(&pa);
	assert_int_equal(count_maps("test-arena"), 0);
	link_down(&k);
	free(buf);
}

static int watchdog(void **state)
{
	(void)state;
	alarm(30); /* a test that hangs dies (SIGALRM) instead of holding ctest */
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_stream_spin, watchdog),
	    cmocka_unit_test_setup(test_stream_sleep, watchdog),
	    cmocka_unit_test_setup(test_byref_slots, watchdog),
	    cmocka_unit_test_setup(test_arena, watchdog),
	    cmocka_unit_test_setup(test_stage_to_client, watchdog),
	    cmocka_unit_test_setup(test_hostile_indices, watchdog),
	    cmocka_unit_test_setup(test_hostile_garbage, watchdog),
	    cmocka_unit_test_setup(test_hostile_refs, watchdog),
	    cmocka_unit_test_setup(test_offers_refused, watchdog),
	    cmocka_unit_test_setup(test_offer_gone, watchdog),
	    cmocka_unit_test_setup(test_peer_gone_reader, watchdog),
	    cmocka_unit_test_setup(test_peer_gone_writer, watchdog),
	    cmocka_unit_test_setup(test_wakes, watchdog),
	    cmocka_unit_test_setup(test_stalled_frame, watchdog),
	    cmocka_unit_test_setup(test_offer_refused_client, watchdog),
	    cmocka_unit_test_setup(test_kinds, watchdog),
	    cmocka_unit_test_setup(test_payload_outlives_link, watchdog),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
