/*
 * The shared-memory transport: a client and a server on one host move frames through two rings
 * in a memfd both map, one per direction, instead of through the network stack.
 *
 * A link starts as a plain Unix-domain stream socket (rgpu_unix_connect / the server's
 * listening socket), speaks the handshake there like TCP, and is then upgraded: the client
 * sends one struct shm_offer with the memfd (and the client's pinned-memory arena, if it has
 * one) attached (SCM_RIGHTS), the server checks and maps them and answers one byte, and from
 * then on both ends read and write the rings. The socket stays open: its hang-up is how each
 * end learns that the other is gone, however it went.
 *
 * The link's memfd (offsets page-aligned):
 *
 *   struct shm_ctl                 indices, futex words, slot states
 *   ring 0 data   ring_size        client to server
 *   ring 1 data   ring_size        server to client
 *   slots         nslots x slot    the client's bounce buffers for large pageable payloads
 *   stage         nstage x slot    the server's staging buffers (registered by its driver)
 *
 * Each ring is a single-producer single-consumer byte stream. The producer owns `head` and the
 * consumer `tail`; each keeps its own index in private memory and only publishes it, so a
 * peer that scribbles on the shared copy can confuse nothing but its own view. A reader that
 * finds the ring empty spins for the connection's spin budget, then sleeps on a futex in
 * slices of SHM_SLICE_MS, looking at the socket between slices; a writer wakes it only when it
 * says it sleeps. A writer that finds the ring full does the same on the other futex.
 *
 * Large payloads do not go through the rings. A frame whose payload comes as its own iovec
 * entry after its header and body is sent "by reference" (RGPU_FRAME_BYREF) when the payload
 * lies in memory both ends map: the client's arena (pinned allocations), the server's staging
 * buffers, or, for any other client memory, one of the client's slots, copied there first.
 * The ring then carries a struct shm_ref in place of the bytes, and the receiver reads them
 * where they lie (rgpu_conn_take_payload) or copies them (rgpu_conn_recv_payload). A slot is
 * freed by the server once it is done with the bytes (rgpu_payload_release). When none comes free
 * within SHM_SLOT_WAIT_MS (the copies holding them wait behind other work), the bytes go in
 * the ring.
 *
 * Everything the server reads from shared memory is checked where it is used: an index past
 * the ring, a reference outside its area or of the wrong length is a protocol error. A memfd
 * the client could shrink under the server's feet is refused (it must carry F_SEAL_SHRINK).
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn_priv.h"
#include "rgpu/err.h"
#include "rgpu/util.h"

#define SHM_MAGIC 0x314d485355504752ull /* "RGPUSHM1" in memory order */
#define SHM_VERSION 1
#define SHM_SLICE_MS 50          /* a sleeper looks at the socket this often */
#define SHM_SLOT_WAIT_MS 100     /* a writer waits this long for a slot (slot_get) */
#define SHM_MAX_SLOTS 64
#define SHM_MAX_RING (64ull << 20)
#define SHM_MIN_RING (64ull << 10)
#define SHM_MAX_SLOT (16ull << 20)
#define SHM_PAGE 4096ull

enum { SHM_C2S = 0, SHM_S2C = 1 };
enum { SHM_REF_ARENA = 1, SHM_REF_SLOT = 2, SHM_REF_STAGE = 3 };

struct shm_ring_ctl {
	_Alignas(64) _Atomic uint64_t head;      /* bytes ever written (the producer's) */
	_Alignas(64) _Atomic uint64_t tail;      /* bytes ever read (the consumer's) */
	_Alignas(64) _Atomic uint32_t data_ftx;  /* bumped to wake a sleeping consumer */
	_Atomic uint32_t cons_sleeps;
	_Alignas(64) _Atomic uint32_t room_ftx;  /* bumped to wake a sleeping producer */
	_Atomic uint32_t prod_sleeps;
};

struct shm_ctl {
	uint64_t magic;
	uint32_t version, pad;
	struct shm_ring_ctl ring[2];
	_Alignas(64) _Atomic uint32_t slot_ftx;  /* bumped when the server frees a slot */
	_Atomic uint32_t slot_waits;             /* the client waits for a free slot */
	_Atomic uint32_t slot_busy[SHM_MAX_SLOTS]; /* 1: the client filled it, the server has not
						       released it */
};

/* What the client offers, on the socket with the memfd(s) attached. */
struct shm_offer {
	uint64_t magic;
	uint32_t version;
	uint32_t nfds;            /* 1, or 2 with an arena */
	uint64_t ring_size;
	uint64_t slot_size;
	uint32_t nslots, nstage;
	uint64_t total;           /* the link memfd's size */
	uint64_t arena_size;      /* 0: no arena */
};

/* What travels in a ring in place of a payload sent by reference. */
struct shm_ref {
	uint32_t kind;            /* SHM_REF_* */
	uint32_t index;           /* a slot's or a staging buffer's number */
	uint64_t off;             /* arena: where the bytes start */
	uint64_t len;             /* the payload's length (the frame's payload_len) */
	uint64_t reg_off, reg_len; /* arena: the allocation holding them */
};

/* A mapping that outlives its connection while payloads taken from it are in use. */
struct shm_map {
	atomic_int refs;
	void *base;
	size_t len;
};

struct shm_link {
	int side;                 /* SHM_C2S: the client (writes ring 0), SHM_S2C: the server */
	struct shm_map *map, *arena;
	struct shm_ctl *ctl;
	uint8_t *data[2];
	uint64_t ring_size;
	uint64_t wpos, rpos;      /* private: head of the ring written, tail of the ring read */
	uint8_t *slots, *stage;
	uint32_t nslots, nstage;
	uint64_t slot_size;
	uint32_t next_slot;
	struct rgpu_shm_arena carena; /* the client's arena (find() says which allocation) */
	atomic_int down;          /* shutdown: every wait ends */
};

static struct shm_link *L(struct rgpu_conn *c)
{
	return c->shm;
}

/* ---- futexes ------------------------------------------------------------------------------ */

static void ftx_wait(_Atomic uint32_t *w, uint32_t v, int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static void ftx_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* the other end hung up its socket (a dead process closes it too) */
static int sock_hung_up(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void map_put(struct shm_map *m)
{
	if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
		munmap(m->base, m->len);
		free(m);
	}
}

static struct shm_map *map_new(int fd, size_t len)
{
	struct shm_map *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m->base == MAP_FAILED) {
		free(m);
		return NULL;
	}
	m->len = len;
	atomic_init(&m->refs, 1);
	return m;
}

/* ---- the rings ---------------------------------------------------------------------------- */

/*
 * Wait until cond() holds for ring r, spinning first: 0, RGPU_ECLOSED (the peer hung up),
 * RGPU_ETIMEDOUT (timeout_ms passed; -1 waits for ever) or RGPU_EIO (shut down here).
 */
typedef int (*shm_cond)(struct shm_link *l, int r);

static int shm_wait(struct rgpu_conn *c, int r, shm_cond cond, _Atomic uint32_t *ftx,
		    _Atomic uint32_t *sleeps, int timeout_ms)
{
	struct shm_link *l = L(c);
	uint64_t start = rgpu_now_ns();
	uint64_t deadline = timeout_ms >= 0 ? start + (uint64_t)timeout_ms * 1000000ull : 0;

	for (;;) {
		/* spin while the hint says bytes are due, then sleep a slice; a wake spins again */
		for (uint64_t t = start; timeout_ms != 0 && rgpu_conn_spin_more(c, start, t);
		     t = rgpu_now_ns()) {
			for (int i = 0; i < 64; i++) {
				if (cond(l, r))
					return 0;
				__builtin_ia32_pause();
			}
		}
		uint32_t v = atomic_load(ftx);
		if (cond(l, r))
			return 0;
		if (atomic_load(&l->down))
			return RGPU_EIO;
		if (sock_hung_up(c->fd))
			return cond(l, r) ? 0 : RGPU_ECLOSED;
		int ms = SHM_SLICE_MS;
		if (deadline) {
			uint64_t now = rgpu_now_ns();
			if (now >= deadline)
				return RGPU_ETIMEDOUT;
			ms = (int)MIN((uint64_t)ms, (deadline - now + 999999) / 1000000);
		}
		atomic_store(sleeps, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (!cond(l, r))
			ftx_wait(ftx, v, ms);
		atomic_store(sleeps, 0);
		start = rgpu_now_ns();
	}
}

static int has_data(struct shm_link *l, int r)
{
	return atomic_load_explicit(&l->ctl->ring[r].head, memory_order_acquire) != l->rpos;
}

static int has_room(struct shm_link *l, int r)
{
	return l->wpos - atomic_load_explicit(&l->ctl->ring[r].tail, memory_order_acquire) <
	       l->ring_size;
}

/* Write n bytes into the ring this end writes, waiting for room as needed. */
static int ring_put(struct rgpu_conn *c, const void *src, size_t n)
{
	struct shm_link *l = L(c);
	int r = l->side;
	struct shm_ring_ctl *rc = &l->ctl->ring[r];
	const uint8_t *p = src;

	while (n) {
		uint64_t tail = atomic_load_explicit(&rc->tail, memory_order_acquire);
		uint64_t used = l->wpos - tail;
		if (used > l->ring_size) {
			c->last_errno = EPROTO;
			return RGPU_EPROTO; /* the reader's index is impossible */
		}
		if (used == l->ring_size) {
			int ret = shm_wait(c, r, has_room, &rc->room_ftx, &rc->prod_sleeps, -1);
			if (ret)
				return ret == RGPU_EIO ? RGPU_ECLOSED : ret;
			continue;
		}
		size_t k = MIN((uint64_t)n, l->ring_size - used);
		uint64_t at = l->wpos & (l->ring_size - 1);
		size_t first = MIN((uint64_t)k, l->ring_size - at);
		memcpy(l->data[r] + at, p, first);
		memcpy(l->data[r], p + first, k - first);
		l->wpos += k;
		atomic_store_explicit(&rc->head, l->wpos, memory_order_release);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load_explicit(&rc->cons_sleeps, memory_order_relaxed)) {
			atomic_fetch_add(&rc->data_ftx, 1);
			ftx_wake(&rc->data_ftx);
		}
		p += k;
		n -= k;
	}
	return 0;
}

static long shm_recv_some(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms)
{
	struct shm_link *l = L(c);
	int r = !l->side;
	struct shm_ring_ctl *rc = &l->ctl->ring[r];
	uint64_t head, avail;

	if (!has_data(l, r)) {
		int ret = shm_wait(c, r, has_data, &rc->data_ftx, &rc->cons_sleeps, timeout_ms);
		if (ret)
			return ret == RGPU_EIO ? RGPU_ECLOSED : ret;
	}
	head = atomic_load_explicit(&rc->head, memory_order_acquire);
	avail = head - l->rpos;
	if (avail > l->ring_size) {
		c->last_errno = EPROTO;
		return RGPU_EPROTO; /* the writer's index is impossible */
	}
	size_t k = MIN((uint64_t)cap, avail);
	uint64_t at = l->rpos & (l->ring_size - 1);
	size_t first = MIN((uint64_t)k, l->ring_size - at);
	memcpy(buf, l->data[r] + at, first);
	memcpy((uint8_t *)buf + first, l->data[r], k - first);
	l->rpos += k;
	atomic_store_explicit(&rc->tail, l->rpos, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&rc->prod_sleeps, memory_order_relaxed)) {
		atomic_fetch_add(&rc->room_ftx, 1);
		ftx_wake(&rc->room_ftx);
	}
	return (long)k;
}

/* ---- payloads by reference ---------------------------------------------------------------- */

static int slot_free(struct shm_link *l, int i)
{
	(void)i;
	for (uint32_t k = 0; k < l->nslots; k++)
		if (!atomic_load(&l->ctl->slot_busy[k]))
			return 1;
	return 0;
}

/*
 * The client: a free slot, waiting at most SHM_SLOT_WAIT_MS for one. Returns its number,
 * RGPU_ETIMEDOUT when none came free (the caller sends the bytes in the ring), or a negative
 * error. The wait is bounded because the writer holds the link meanwhile, and a slot comes back
 * only when the stream its copy is on gets there: that stream may be held by a host function
 * whose acknowledgement (MSG_CALLBACK_DONE) is a frame behind this one, which no one could
 * write while this one waits.
 */
static int slot_get(struct rgpu_conn *c)
{
	struct shm_link *l = L(c);
	uint64_t deadline = rgpu_now_ns() + SHM_SLOT_WAIT_MS * 1000000ull;
	for (;;) {
		for (uint32_t k = 0; k < l->nslots; k++) {
			uint32_t i = (l->next_slot + k) % l->nslots, zero = 0;
			if (atomic_compare_exchange_strong(&l->ctl->slot_busy[i], &zero, 1)) {
				l->next_slot = i + 1;
				return (int)i;
			}
		}
		uint64_t now = rgpu_now_ns();
		if (now >= deadline)
			return RGPU_ETIMEDOUT;
		int ret = shm_wait(c, 0, slot_free, &l->ctl->slot_ftx, &l->ctl->slot_waits,
				   (int)((deadline - now + 999999) / 1000000));
		if (ret && ret != RGPU_ETIMEDOUT)
			return ret == RGPU_EIO ? RGPU_ECLOSED : ret;
	}
}

/*
 * May this payload go by reference, and how: fills ref, copying the bytes into a slot when
 * they lie in no shared area. 0: by reference; 1: send the bytes; or an error.
 */
static int byref(struct rgpu_conn *c, const void *p, uint64_t len, struct shm_ref *ref)
{
	struct shm_link *l = L(c);
	const uint8_t *b = p;

	memset(ref, 0, sizeof(*ref));
	ref->len = len;
	if (len < RGPU_SHM_BYREF_MIN)
		return 1;
	if (l->side == SHM_S2C) {
		uint64_t span = (uint64_t)l->nstage * l->slot_size;
		if (l->stage && b >= l->stage && b - l->stage < (ptrdiff_t)span &&
		    len <= span - (uint64_t)(b - l->stage) &&
		    (uint64_t)(b - l->stage) % l->slot_size + len <= l->slot_size) {
			ref->kind = SHM_REF_STAGE;
			ref->index = (uint32_t)((uint64_t)(b - l->stage) / l->slot_size);
			ref->off = (uint64_t)(b - l->stage) % l->slot_size;
			return 0;
		}
		return 1;
	}
	if (l->carena.find && l->arena &&
	    l->carena.find(l->carena.ctx, p, len, &ref->reg_off, &ref->reg_len)) {
		ref->kind = SHM_REF_ARENA;
		ref->off = (uint64_t)(b - (const uint8_t *)l->arena->base);
		return 0;
	}
	if (!l->nslots || len > l->slot_size)
		return 1;
	int i = slot_get(c);
	if (i == RGPU_ETIMEDOUT)
		return 1; /* every slot is held by work still queued: the bytes go in the ring */
	if (i < 0)
		return i;
	/*
	 * Non-temporal stores: the worker's copy engine reads the slot next, and lines left dirty
	 * in this CPU's caches slowed that DMA 2-4x (H200 host: a 4 MiB copy from a slot took
	 * 150-435 us against 86 us from the arena); with them a pageable 4 MiB copy ran at 1.3x
	 * native where plain stores gave 0.8x.
	 */
	rgpu_memcpy_wide_nt(l->slots + (uint64_t)i * l->slot_size, p, len);
	ref->kind = SHM_REF_SLOT;
	ref->index = (uint32_t)i;
	return 0;
}

/*
 * sendv: whole frames, mostly. The writer follows the frames through the bytes it is given so
 * that it knows where each begins; a payload given as its own iovec entry, right after its
 * frame's header and body, may go by reference.
 */
static int shm_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	struct shm_link *l = L(c);
	uint32_t body;
	int ret;

	if (atomic_load(&l->down))
		return RGPU_ECLOSED;
	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		uint64_t plen = rgpu_conn_marked_payload(c, iov, n, i, &body);
		struct shm_ref ref;

		ret = plen ? byref(c, iov[i + 1].iov_base, plen, &ref) : 1;
		if (ret < 0)
			return ret;
		if (ret == 0) {
			uint8_t h[RGPU_FRAME_HDR_LEN];
			memcpy(h, p, sizeof(h));
			wr_le32(h + 8, rd_le32(h + 8) | RGPU_FRAME_BYREF);
			if ((ret = ring_put(c, h, sizeof(h))) ||
			    (ret = ring_put(c, p + sizeof(h), body)) ||
			    (ret = ring_put(c, &ref, sizeof(ref))))
				return ret;
			i++; /* the payload went by reference */
			continue;
		}
		if ((ret = ring_put(c, p, iov[i].iov_len)))
			return ret;
		rgpu_conn_track_sent(c, p, iov[i].iov_len);
	}
	return 0;
}

int rgpu_conn_take_payload(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
			   struct rgpu_payload *out)
{
	struct shm_link *l = c->shm;
	struct shm_ref ref;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!(h->flags & RGPU_FRAME_BYREF) || !l)
		return RGPU_EUNSUPPORTED;
	ret = rgpu_conn_recv_payload_raw(c, &ref, sizeof(ref));
	if (ret)
		return ret;
	if (ref.len != h->payload_len)
		return RGPU_EPROTO;
	out->len = ref.len;
	switch (ref.kind) {
	case SHM_REF_ARENA:
		/* only the server reads the client's arena */
		if (l->side != SHM_S2C || !l->arena || ref.off > l->arena->len ||
		    ref.len > l->arena->len - ref.off || ref.reg_off > l->arena->len ||
		    ref.reg_len > l->arena->len - ref.reg_off || ref.off < ref.reg_off ||
		    ref.off + ref.len > ref.reg_off + ref.reg_len)
			return RGPU_EPROTO;
		out->p = (uint8_t *)l->arena->base + ref.off;
		out->arena_at = ref.off;
		out->arena_off = ref.reg_off;
		out->arena_len = ref.reg_len;
		out->in_arena = 1;
		atomic_fetch_add(&l->arena->refs, 1);
		out->map = l->arena;
		return 0;
	case SHM_REF_SLOT:
		if (l->side != SHM_S2C || ref.index >= l->nslots || ref.len > l->slot_size)
			return RGPU_EPROTO;
		out->p = l->slots + (uint64_t)ref.index * l->slot_size;
		out->slot = (int)ref.index + 1;
		break;
	case SHM_REF_STAGE:
		if (l->side != SHM_C2S || ref.index >= l->nstage || ref.off > l->slot_size ||
		    ref.len > l->slot_size - ref.off)
			return RGPU_EPROTO;
		out->p = l->stage + (uint64_t)ref.index * l->slot_size + ref.off;
		break;
	default:
		return RGPU_EPROTO;
	}
	atomic_fetch_add(&l->map->refs, 1);
	out->map = l->map;
	return 0;
}

void rgpu_payload_release(struct rgpu_payload *p)
{
	struct shm_map *m = p->map;
	if (!m)
		return;
	if (p->slot) {
		struct shm_ctl *ctl = m->base;
		atomic_store(&ctl->slot_busy[p->slot - 1], 0);
		atomic_fetch_add(&ctl->slot_ftx, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load(&ctl->slot_waits))
			ftx_wake(&ctl->slot_ftx);
	}
	map_put(m);
	memset(p, 0, sizeof(*p));
}

void rgpu_shm_map_put(void *map)
{
	map_put(map);
}

/* ---- the rest of the operations ----------------------------------------------------------- */

static int shm_hung_up(struct rgpu_conn *c)
{
	return sock_hung_up(c->fd);
}

static void shm_shutdown(struct rgpu_conn *c)
{
	struct shm_link *l = L(c);
	atomic_store(&l->down, 1);
	for (int r = 0; r < 2; r++) {
		atomic_fetch_add(&l->ctl->ring[r].data_ftx, 1);
		ftx_wake(&l->ctl->ring[r].data_ftx);
		atomic_fetch_add(&l->ctl->ring[r].room_ftx, 1);
		ftx_wake(&l->ctl->ring[r].room_ftx);
	}
	atomic_fetch_add(&l->ctl->slot_ftx, 1);
	ftx_wake(&l->ctl->slot_ftx);
	shutdown(c->fd, SHUT_RDWR);
}

static void shm_close(struct rgpu_conn *c)
{
	struct shm_link *l = L(c);
	if (c->fd >= 0)
		close(c->fd);
	map_put(l->map);
	if (l->side == SHM_C2S)
		free(l->arena); /* the interposer's own mapping, described only: never unmapped */
	else
		map_put(l->arena);
	free(l);
	free(c);
}

/* A payload sent by reference, copied where the caller wants it (or dropped: buf NULL). */
static int shm_recv_marked(struct rgpu_conn *c, void *buf, size_t len)
{
	struct rgpu_frame_hdr h = {.flags = RGPU_FRAME_BYREF, .payload_len = len};
	struct rgpu_payload p;
	int ret = rgpu_conn_take_payload(c, &h, &p);
	if (ret)
		return ret == RGPU_EUNSUPPORTED ? RGPU_EPROTO : ret;
	if (buf)
		rgpu_memcpy_wide(buf, p.p, len);
	rgpu_payload_release(&p);
	return 0;
}

/* this end's reader, asleep waiting for the peer's bytes, is woken to spin (a held hint) */
static void shm_kick(struct rgpu_conn *c)
{
	struct shm_link *l = L(c);
	struct shm_ring_ctl *rc = &l->ctl->ring[!l->side];

	if (atomic_load_explicit(&rc->cons_sleeps, memory_order_relaxed)) {
		atomic_fetch_add(&rc->data_ftx, 1);
		ftx_wake(&rc->data_ftx);
	}
}

static const struct rgpu_transport_ops shm_ops = {
	.name = "shm",
	.sendv = shm_sendv,
	.recv_some = shm_recv_some,
	.hung_up = shm_hung_up,
	.shutdown = shm_shutdown,
	.close = shm_close,
	.recv_marked = shm_recv_marked,
	.kick = shm_kick,
};

int rgpu_conn_is_shm(const struct rgpu_conn *c)
{
	return c && c->ops == &shm_ops;
}

int rgpu_conn_is_unix(const struct rgpu_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	return c && c->fd >= 0 && !c->ssl &&
	       getsockname(c->fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX;
}

/* ---- setting a link up -------------------------------------------------------------------- */

static uint64_t page_up(uint64_t n)
{
	return (n + SHM_PAGE - 1) & ~(SHM_PAGE - 1);
}

static uint64_t layout(uint64_t ring, uint64_t slot, uint32_t nslots, uint32_t nstage,
		       uint64_t *data_off, uint64_t *slots_off, uint64_t *stage_off)
{
	*data_off = page_up(sizeof(struct shm_ctl));
	*slots_off = *data_off + 2 * ring;
	*stage_off = *slots_off + (uint64_t)nslots * slot;
	return *stage_off + (uint64_t)nstage * slot;
}

static struct shm_link *link_new(int side, struct shm_map *map, const struct shm_offer *o)
{
	struct shm_link *l = calloc(1, sizeof(*l));
	uint64_t data_off, slots_off, stage_off;

	if (!l)
		return NULL;
	layout(o->ring_size, o->slot_size, o->nslots, o->nstage, &data_off, &slots_off, &stage_off);
	l->side = side;
	l->map = map;
	l->ctl = map->base;
	l->ring_size = o->ring_size;
	l->data[0] = (uint8_t *)map->base + data_off;
	l->data[1] = l->data[0] + o->ring_size;
	l->slot_size = o->slot_size;
	l->nslots = o->nslots;
	l->nstage = o->nstage;
	l->slots = o->nslots ? (uint8_t *)map->base + slots_off : NULL;
	l->stage = o->nstage ? (uint8_t *)map->base + stage_off : NULL;
	atomic_init(&l->down, 0);
	return l;
}

/* one read of exactly n bytes from a blocking socket by a deadline, descriptors taken */
static int sock_recv_fds(int fd, void *buf, size_t n, int *fds, int maxfds, int *nfds,
			 uint64_t deadline)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = n};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	size_t got = 0;

	*nfds = 0;
	while (got < n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int ms = deadline ? rgpu_ms_until(deadline) : -1;
		if (deadline && ms == 0)
			return RGPU_ETIMEDOUT;
		int pr = poll(&pfd, 1, ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			return RGPU_ETIMEDOUT;
		iov.iov_base = (uint8_t *)buf + got;
		iov.iov_len = n - got;
		msg.msg_control = cbuf.b;
		msg.msg_controllen = sizeof(cbuf.b);
		ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		/* a peer that closed with our bytes unread resets the socket: gone all the same */
		if (r <= 0)
			return r == 0 || errno == ECONNRESET ? RGPU_ECLOSED : RGPU_EIO;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int *in = (int *)CMSG_DATA(cm);
			for (int j = 0; j < k; j++) {
				if (*nfds < maxfds)
					fds[(*nfds)++] = in[j];
				else
					close(in[j]);
			}
		}
		got += (size_t)r;
	}
	return 0;
}

/* a memfd the peer cannot shrink, at least len bytes long */
static int fd_ok(int fd, uint64_t len, char *why, size_t whylen, const char *what)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < len) {
		snprintf(why, whylen, "the %s is not a file of %llu bytes", what,
			 (unsigned long long)len);
		return 0;
	}
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(why, whylen, "the %s could shrink (no F_SEAL_SHRINK)", what);
		return 0;
	}
	return 1;
}

int rgpu_shm_accept(struct rgpu_conn *c, int timeout_ms, struct rgpu_shm_accepted *acc,
		    char *why, size_t whylen)
{
	struct shm_offer o;
	int fds[2] = {-1, -1}, nfds = 0, ret;
	uint64_t data_off, slots_off, stage_off;
	struct shm_map *map = NULL, *arena = NULL;
	struct shm_link *l = NULL;
	uint8_t answer = 1;

	memset(acc, 0, sizeof(*acc));
	snprintf(why, whylen, "?");
	if (c->ssl || c->rpos != c->rlen || c->shm) {
		snprintf(why, whylen, "bytes before the shared-memory offer");
		return RGPU_EPROTO;
	}
	ret = sock_recv_fds(c->fd, &o, sizeof(o), fds, 2, &nfds,
			    rgpu_deadline_after(timeout_ms));
	if (ret) {
		snprintf(why, whylen, "no shared-memory offer (%s)", rgpu_strerror(ret));
		goto fail;
	}
	ret = RGPU_EPROTO;
	if (o.magic != SHM_MAGIC || o.version != SHM_VERSION) {
		snprintf(why, whylen, "not a shared-memory offer of version %d", SHM_VERSION);
		goto fail;
	}
	if (o.ring_size < SHM_MIN_RING || o.ring_size > SHM_MAX_RING ||
	    (o.ring_size & (o.ring_size - 1)) || o.nslots > SHM_MAX_SLOTS ||
	    o.nstage > SHM_MAX_SLOTS || o.nstage == 1 || o.slot_size < RGPU_SHM_BYREF_MIN ||
	    o.slot_size > SHM_MAX_SLOT || o.slot_size % SHM_PAGE ||
	    o.total != layout(o.ring_size, o.slot_size, o.nslots, o.nstage, &data_off, &slots_off,
			      &stage_off) ||
	    o.nfds != (o.arena_size ? 2u : 1u) || (uint32_t)nfds != o.nfds ||
	    o.arena_size > (1ull << 46) || o.arena_size % SHM_PAGE) {
		snprintf(why, whylen, "a shared-memory offer out of bounds (ring %llu, %u+%u slots "
				      "of %llu, %d descriptor(s))",
			 (unsigned long long)o.ring_size, o.nslots, o.nstage,
			 (unsigned long long)o.slot_size, nfds);
		goto fail;
	}
	if (!fd_ok(fds[0], o.total, why, whylen, "link memory") ||
	    (o.arena_size && !fd_ok(fds[1], o.arena_size, why, whylen, "pinned-memory arena")))
		goto fail;
	ret = RGPU_ESYS;
	if (!(map = map_new(fds[0], o.total)) ||
	    (o.arena_size && !(arena = map_new(fds[1], o.arena_size)))) {
		snprintf(why, whylen, "cannot map the shared memory: %s", strerror(errno));
		goto fail;
	}
	if (!(l = link_new(SHM_S2C, map, &o))) {
		ret = RGPU_ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	l->arena = arena;
	/* where the client's indices stand now (0 for a new link); checked at every use */
	l->rpos = atomic_load(&l->ctl->ring[SHM_C2S].tail);
	l->wpos = atomic_load(&l->ctl->ring[SHM_S2C].head);
	if (l->rpos || l->wpos) {
		snprintf(why, whylen, "a shared-memory link that is not new");
		ret = RGPU_EPROTO;
		goto fail;
	}
	/* answered before *acc takes references: a failure from here on must leave it empty */
	answer = 0;
	/* MSG_NOSIGNAL: a client gone by now must not take the server with it (SIGPIPE) */
	if (send(c->fd, &answer, 1, MSG_NOSIGNAL) != 1) {
		ret = RGPU_ECLOSED;
		snprintf(why, whylen, "the client went during the shared-memory handshake");
		goto fail;
	}
	if (arena) {
		struct stat st;
		fstat(fds[1], &st);
		acc->arena = arena->base;
		acc->arena_size = o.arena_size;
		acc->arena_dev = (uint64_t)st.st_dev;
		acc->arena_ino = (uint64_t)st.st_ino;
	}
	atomic_fetch_add(&map->refs, 1);
	acc->link_map = map;
	if (arena) {
		atomic_fetch_add(&arena->refs, 1);
		acc->arena_map = arena;
	}
	acc->stage = l->stage;
	acc->nstage = l->nstage;
	acc->slots = l->slots;
	acc->slots_size = (uint64_t)l->nslots * l->slot_size;
	acc->slot_size = l->slot_size;
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	c->shm = l;
	c->ops = &shm_ops;
	atomic_store(&c->marks, RGPU_FRAME_BYREF);
	return 0;
fail:
	if (answer && c->fd >= 0)
		(void)!send(c->fd, &answer, 1, MSG_NOSIGNAL);
	free(l);
	map_put(map);
	map_put(arena);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return ret;
}

int rgpu_shm_offer(struct rgpu_conn *c, const struct rgpu_shm_opts *opt, int timeout_ms,
		   char *why, size_t whylen)
{
	struct shm_offer o = {.magic = SHM_MAGIC, .version = SHM_VERSION};
	uint64_t data_off, slots_off, stage_off;
	union {
		char b[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = &o, .iov_len = sizeof(o)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b};
	struct shm_map *map = NULL;
	struct shm_link *l = NULL;
	int fd = -1, ret = RGPU_ESYS, fds[2];
	uint8_t answer;
	size_t nfd;

	if (c->ssl || c->rpos != c->rlen || c->shm) {
		snprintf(why, whylen, "bytes before the shared-memory offer");
		return RGPU_EPROTO;
	}
	o.ring_size = opt->ring_size;
	o.slot_size = opt->slot_size;
	o.nslots = opt->nslots;
	o.nstage = opt->nstage;
	o.total = layout(o.ring_size, o.slot_size, o.nslots, o.nstage, &data_off, &slots_off,
			 &stage_off);
	o.arena_size = opt->arena.fd >= 0 ? opt->arena.size : 0;
	o.nfds = o.arena_size ? 2 : 1;
	fd = memfd_create("rgpu-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)o.total) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		snprintf(why, whylen, "cannot make the link's shared memory: %s", strerror(errno));
		goto fail;
	}
	if (!(map = map_new(fd, o.total)) || !(l = link_new(SHM_C2S, map, &o))) {
		snprintf(why, whylen, "cannot map the link's shared memory: %s", strerror(errno));
		goto fail;
	}
	l->ctl->magic = SHM_MAGIC;
	l->ctl->version = SHM_VERSION;
	if (o.arena_size) {
		l->carena = opt->arena;
		if (!(l->arena = calloc(1, sizeof(*l->arena))))
			goto fail;
		/* the interposer's own mapping: never unmapped here */
		l->arena->base = opt->arena.base;
		l->arena->len = o.arena_size;
		atomic_init(&l->arena->refs, 1 << 30);
	}
	fds[0] = fd;
	fds[1] = opt->arena.fd;
	nfd = o.nfds;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfd);
	if (sendmsg(c->fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(o)) {
		ret = RGPU_ECLOSED;
		snprintf(why, whylen, "the server went during the shared-memory handshake");
		goto fail;
	}
	int nin = 0, in[1];
	ret = sock_recv_fds(c->fd, &answer, 1, in, 0, &nin, rgpu_deadline_after(timeout_ms));
	if (ret || answer) {
		if (!ret)
			ret = RGPU_EPROTO;
		snprintf(why, whylen, "the server %s the shared-memory link%s",
			 ret == RGPU_EPROTO ? "refused" : "did not answer about",
			 ret == RGPU_EPROTO ? " (its log says why)" : "");
		goto fail;
	}
	close(fd);
	c->shm = l;
	c->ops = &shm_ops;
	atomic_store(&c->marks, RGPU_FRAME_BYREF);
	return 0;
fail:
	if (l && l->arena)
		free(l->arena);
	free(l);
	map_put(map);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- Unix-domain sockets ------------------------------------------------------------------ */

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return RGPU_EINVAL;
	memcpy(sa->sun_path, path, strlen(path));
	return 0;
}

int rgpu_unix_listen(const char *path, int *lfd)
{
	struct sockaddr_un sa;
	int fd;

	if (unix_addr(path, &sa))
		return RGPU_EINVAL;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return RGPU_ESYS;
	/* a socket file left by an rgpud that is gone; one that answers is another's: refuse */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		errno = EADDRINUSE;
		return RGPU_EEXIST;
	}
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 128)) {
		int e = errno;
		close(fd);
		errno = e;
		return RGPU_ESYS;
	}
	*lfd = fd;
	return 0;
}

int rgpu_unix_connect(const char *path, int timeout_ms, struct rgpu_conn **out)
{
	struct sockaddr_un sa;
	int fd;

	(void)timeout_ms; /* a local connect does not wait for a network */
	if (unix_addr(path, &sa)) {
		errno = ENAMETOOLONG;
		return RGPU_ECONNECT;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return RGPU_ECONNECT;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;
		close(fd);
		errno = e;
		return RGPU_ECONNECT;
	}
	*out = rgpu_tcp_wrap(fd);
	if (!*out) {
		close(fd);
		return RGPU_ENOMEM;
	}
	snprintf((*out)->peer, sizeof((*out)->peer), "unix:%s", path);
	return 0;
}
