/*
 * Lanes: extra TCP connections of one link, which carry its large payloads in stripes. One TCP
 * connection moves what one core can push through the kernel (about 4.4 GB/s on the H200 host's
 * loopback); eight move 31 GB/s. So a payload of at least RGPU_LANE_MIN bytes, written as its own
 * iovec entry after its frame's header and body, is cut into 1 + n stripes: the first follows
 * the frame on the link's own socket, sent by the writing thread, and stripe k goes on lane k,
 * sent by that lane's sending thread, all at once; the frame's header carries RGPU_FRAME_LANES.
 * The receiver reads them the same way, each lane's receiving thread straight into its part of
 * the destination, the reader itself the first. A call returns once every stripe is through,
 * so a payload is never in use after the writer gave it back.
 *
 * Each stripe on a lane starts with 16 bytes: magic "RGLN", its length, the frame's seq. The
 * receiver checks them against the frame it read on the link: a lane out of step is a protocol
 * error. Stripes on each lane follow the frames' order, since one writer and one reader use a
 * link at a time. A lane that fails takes the whole link down (its shutdown): the link is
 * then lost and resumed like any other, and its lanes are made again.
 *
 * Lanes are attached to a connection when their sockets exist (rgpu_lanes_attach); a sender
 * uses them only once told the peer has them too (rgpu_lanes_ready), and a receiver refuses a
 * striped frame when it has no lanes.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_priv.h"
#include "rgpu/err.h"
#include "rgpu/util.h"

#define LANE_MAGIC 0x4e4c4752u /* "RGLN" in memory order */
/*
 * A writer or reader waiting for its lanes polls this long before sleeping (machines with at
 * least 4 CPUs; rgpu_spin_budget_ns). The lanes' own threads sleep between stripes: measured on
 * the H200 host, eight lanes whose threads polled too moved half as much (too many threads
 * polling for 16 CPUs).
 */
#define LANE_SPIN_NS 300000

struct lane_job {
	const uint8_t *src;     /* sending: the stripe */
	uint8_t *dst;           /* receiving: where it goes (NULL: dropped) */
	size_t len;
	uint64_t seq, deadline;
	uint64_t done_ns;       /* when the lane finished it (rgpu_lanes_stats) */
	int busy;
};

struct lane {
	int fd;
	pthread_t tx, rx;
	int threads;            /* both started */
	struct lane_job txj, rxj;
};

struct rgpu_lanes {
	pthread_mutex_t m;
	pthread_cond_t go, done;
	int n;                  /* lanes attached (1..n) */
	atomic_int ready;       /* the peer has them: payloads may be striped */
	int stop;
	int err[2];             /* the first failure of the payload being sent [0], received [1] */
	struct rgpu_lanes_stats st[2]; /* sending [0], receiving [1]: that side's thread only */
	uint64_t post_ns[2], end_ns[2]; /* the current payload's posting, the last one's end */
	struct rgpu_conn *c;
	struct lane l[RGPU_MAX_LANES];
};

/* exactly n bytes into p (NULL: dropped) by deadline (0: none) */
static int recv_all(int fd, uint8_t *p, size_t n, uint64_t deadline)
{
	uint8_t scratch[16384];
	while (n) {
		if (deadline) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			int ms = rgpu_ms_until(deadline);
			if (ms == 0)
				return RGPU_EDEADLINE;
			int r = poll(&pfd, 1, ms);
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				return RGPU_EDEADLINE;
		}
		size_t want = p ? n : MIN(n, sizeof(scratch));
		ssize_t r = recv(fd, p ? p : scratch, want, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return RGPU_ETRUNC;
		if (r < 0)
			return errno == ECONNRESET ? RGPU_ETRUNC : RGPU_EIO;
		if (p)
			p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int lane_send(struct lane *ln, const struct lane_job *j)
{
	uint8_t h[16];
	wr_le32(h, LANE_MAGIC);
	wr_le32(h + 4, (uint32_t)j->len);
	wr_le64(h + 8, j->seq);
	int ret = rgpu_send_all(ln->fd, h, sizeof(h));
	return ret ? ret : rgpu_send_all(ln->fd, j->src, j->len);
}

static int lane_recv(struct lane *ln, const struct lane_job *j)
{
	uint8_t h[16];
	int ret = recv_all(ln->fd, h, sizeof(h), j->deadline);
	if (ret)
		return ret;
	if (rd_le32(h) != LANE_MAGIC || rd_le32(h + 4) != j->len || rd_le64(h + 8) != j->seq)
		return RGPU_EPROTO; /* a lane out of step with its link */
	return recv_all(ln->fd, j->dst, j->len, j->deadline);
}

struct lane_arg {
	struct rgpu_lanes *ls;
	int i, rx;
};

/*
 * A payload's first failure, of any stripe, is its verdict, and takes the link down at once: the
 * link's socket and the other lanes stop waiting for stripes that will not come (else a lane out
 * of step would hold the reader until the frame's deadline, and be reported as that).
 */
static void fail(struct rgpu_lanes *ls, int rx, int ret)
{
	pthread_mutex_lock(&ls->m);
	if (!ls->err[rx])
		ls->err[rx] = ret;
	pthread_mutex_unlock(&ls->m);
	ls->c->ops->shutdown(ls->c);
}

static void *lane_main(void *p)
{
	struct lane_arg a = *(struct lane_arg *)p;
	struct rgpu_lanes *ls = a.ls;
	struct lane *ln = &ls->l[a.i];
	struct lane_job *j = a.rx ? &ln->rxj : &ln->txj;

	free(p);
	pthread_mutex_lock(&ls->m);
	for (;;) {
		while (!j->busy && !ls->stop)
			pthread_cond_wait(&ls->go, &ls->m);
		if (ls->stop)
			break;
		struct lane_job job = *j;
		pthread_mutex_unlock(&ls->m);
		int ret = a.rx ? lane_recv(ln, &job) : lane_send(ln, &job);
		if (ret)
			fail(ls, a.rx, ret);
		j->done_ns = rgpu_now_ns();
		pthread_mutex_lock(&ls->m);
		__atomic_store_n(&j->busy, 0, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&ls->done);
	}
	pthread_mutex_unlock(&ls->m);
	return NULL;
}

static struct rgpu_lanes *lanes_of(struct rgpu_conn *c)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&once);
	if (!c->lanes && (c->lanes = calloc(1, sizeof(*c->lanes)))) {
		pthread_mutex_init(&c->lanes->m, NULL);
		pthread_cond_init(&c->lanes->go, NULL);
		pthread_cond_init(&c->lanes->done, NULL);
		atomic_init(&c->lanes->ready, 0);
		c->lanes->c = c;
	}
	pthread_mutex_unlock(&once);
	return c->lanes;
}

int rgpu_lanes_attach(struct rgpu_conn *c, int index, int fd)
{
	struct rgpu_lanes *ls;
	struct lane *ln;
	int one = 1;

	if (c->ssl || c->shm || index < 1 || index >= RGPU_MAX_LANES || !(ls = lanes_of(c)))
		return RGPU_EINVAL;
	pthread_mutex_lock(&ls->m);
	/* lanes are numbered 1..n, attached in any order: n counts them once all are there */
	ln = &ls->l[index];
	if (ln->threads || ls->stop) {
		pthread_mutex_unlock(&ls->m);
		return RGPU_EEXIST;
	}
	ln->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int rx = 0; rx < 2; rx++) {
		struct lane_arg *a = malloc(sizeof(*a));
		if (a)
			*a = (struct lane_arg){ls, index, rx};
		if (!a || pthread_create(rx ? &ln->rx : &ln->tx, NULL, lane_main, a)) {
			free(a);
			if (rx) { /* the sending thread runs: stop it, and the lane is not attached */
				ls->stop = 1;
				pthread_cond_broadcast(&ls->go);
				pthread_mutex_unlock(&ls->m);
				pthread_join(ln->tx, NULL);
				return RGPU_ESYS;
			}
			pthread_mutex_unlock(&ls->m);
			return RGPU_ESYS;
		}
	}
	ln->threads = 1;
	int n = 0;
	while (n + 1 < RGPU_MAX_LANES && ls->l[n + 1].threads)
		n++;
	ls->n = n;
	/* striped frames can be read from now on, before this end may send any */
	if (n)
		atomic_fetch_or(&c->marks, RGPU_FRAME_LANES);
	pthread_mutex_unlock(&ls->m);
	return 0;
}

int rgpu_lanes_count(const struct rgpu_conn *c)
{
	return c->lanes ? c->lanes->n : 0;
}

void rgpu_lanes_ready(struct rgpu_conn *c)
{
	if (c->lanes && c->lanes->n)
		atomic_store(&c->lanes->ready, 1);
}

int rgpu_lanes_sending(const struct rgpu_conn *c)
{
	return c->lanes && atomic_load(&c->lanes->ready);
}

void rgpu_lanes_shutdown(struct rgpu_conn *c)
{
	struct rgpu_lanes *ls = c->lanes;
	if (!ls)
		return;
	for (int i = 1; i < RGPU_MAX_LANES; i++)
		if (ls->l[i].threads)
			shutdown(ls->l[i].fd, SHUT_RDWR);
}

void rgpu_lanes_free(struct rgpu_conn *c)
{
	struct rgpu_lanes *ls = c->lanes;
	if (!ls)
		return;
	rgpu_lanes_shutdown(c);
	pthread_mutex_lock(&ls->m);
	ls->stop = 1;
	pthread_cond_broadcast(&ls->go);
	pthread_mutex_unlock(&ls->m);
	for (int i = 1; i < RGPU_MAX_LANES; i++)
		if (ls->l[i].threads) {
			pthread_join(ls->l[i].tx, NULL);
			pthread_join(ls->l[i].rx, NULL);
			close(ls->l[i].fd);
		}
	free(ls);
	c->lanes = NULL;
}

/* Stripe k of len bytes over 1 + n: [*off, *off + *part) */
static void stripe(size_t len, int n, int k, size_t *off, size_t *part)
{
	size_t per = ((len + (size_t)n) / (size_t)(n + 1) + 4095) & ~(size_t)4095;
	*off = MIN(per * (size_t)k, len);
	*part = MIN(per, len - *off);
}

/* post stripes 1..n of a payload to the lanes (rx: receive into dst) */
static void post(struct rgpu_lanes *ls, int rx, const uint8_t *src, uint8_t *dst, size_t len,
		 uint64_t seq, uint64_t deadline)
{
	ls->post_ns[rx] = rgpu_now_ns();
	if (ls->end_ns[rx])
		ls->st[rx].gap_ns += ls->post_ns[rx] - ls->end_ns[rx];
	ls->st[rx].frames++;
	ls->st[rx].bytes += len;
	pthread_mutex_lock(&ls->m);
	ls->err[rx] = 0;
	for (int k = 1; k <= ls->n; k++) {
		size_t off, part;
		struct lane_job *j = rx ? &ls->l[k].rxj : &ls->l[k].txj;
		stripe(len, ls->n, k, &off, &part);
		*j = (struct lane_job){.src = src ? src + off : NULL, .dst = dst ? dst + off : NULL,
				       .len = part, .seq = seq, .deadline = deadline};
		__atomic_store_n(&j->busy, 1, __ATOMIC_RELEASE);
	}
	pthread_cond_broadcast(&ls->go);
	pthread_mutex_unlock(&ls->m);
}

/*
 * wait for the lanes' stripes; the first failure of any, the link's own stripe's included.
 * own_ns: when the link's own stripe was through.
 */
static int wait_all(struct rgpu_lanes *ls, int rx, uint64_t own_ns)
{
	uint64_t until = rgpu_now_ns() + rgpu_spin_budget_ns(LANE_SPIN_NS);
	uint64_t first = own_ns, last = own_ns;
	int ret;

	for (int k = 1; k <= ls->n; k++) {
		struct lane_job *j = rx ? &ls->l[k].rxj : &ls->l[k].txj;
		while (__atomic_load_n(&j->busy, __ATOMIC_ACQUIRE) && rgpu_now_ns() < until)
			__builtin_ia32_pause();
	}
	pthread_mutex_lock(&ls->m);
	for (int k = 1; k <= ls->n; k++) {
		struct lane_job *j = rx ? &ls->l[k].rxj : &ls->l[k].txj;
		while (j->busy)
			pthread_cond_wait(&ls->done, &ls->m);
	}
	ret = ls->err[rx];
	for (int k = 1; k <= ls->n; k++) {
		const struct lane_job *j = rx ? &ls->l[k].rxj : &ls->l[k].txj;
		first = MIN(first, j->done_ns);
		last = MAX(last, j->done_ns);
	}
	pthread_mutex_unlock(&ls->m);
	ls->end_ns[rx] = rgpu_now_ns();
	ls->st[rx].busy_ns += last - ls->post_ns[rx];
	ls->st[rx].spread_ns += last - first;
	ls->st[rx].wake_ns += ls->end_ns[rx] - last;
	return ret;
}

void rgpu_lanes_stats(const struct rgpu_conn *c, int rx, struct rgpu_lanes_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (c->lanes)
		*out = c->lanes->st[!!rx];
}

void rgpu_lanes_stats_say(const struct rgpu_lanes_stats *st, char *out, size_t cap)
{
	double n = st->frames ? (double)st->frames : 1;
	snprintf(out, cap, "busy %.0f, slowest lead %.0f, wake %.0f, between %.0f us",
		 st->busy_ns / n / 1e3, st->spread_ns / n / 1e3, st->wake_ns / n / 1e3,
		 st->gap_ns / n / 1e3);
}

int rgpu_lanes_send(struct rgpu_conn *c, const void *p, size_t len, uint64_t seq)
{
	struct rgpu_lanes *ls = c->lanes;
	size_t off, part;
	int ret;

	stripe(len, ls->n, 0, &off, &part);
	post(ls, 0, p, NULL, len, seq, 0);
	ret = rgpu_send_all(c->fd, p, part);
	if (ret)
		fail(ls, 0, ret);
	ret = wait_all(ls, 0, rgpu_now_ns());
	if (ret) {
		c->last_errno = errno;
		c->ops->shutdown(c); /* a lane lost is the link lost */
	}
	return ret;
}

/* The first stripe, on the link itself (buf NULL: dropped). */
static int first_stripe(struct rgpu_conn *c, void *buf, size_t len)
{
	char scratch[16384];
	while (!buf && len) {
		size_t n = MIN(len, sizeof(scratch));
		int ret = rgpu_conn_recv_payload_raw(c, scratch, n);
		if (ret)
			return ret == RGPU_ECLOSED ? RGPU_ETRUNC : ret;
		len -= n;
	}
	return buf ? rgpu_conn_recv_payload_raw(c, buf, len) : 0;
}

int rgpu_lanes_recv_marked(struct rgpu_conn *c, void *p, size_t len)
{
	struct rgpu_lanes *ls = c->lanes;
	size_t off, part;
	int ret;

	c->lanes_frame = 0;
	if (!ls)
		return RGPU_EPROTO;
	stripe(len, ls->n, 0, &off, &part);
	post(ls, 1, NULL, p, len, c->frame_seq, c->frame_deadline);
	ret = first_stripe(c, p, part);
	if (ret)
		fail(ls, 1, ret);
	ret = wait_all(ls, 1, rgpu_now_ns());
	if (ret)
		c->ops->shutdown(c);
	return ret == RGPU_ECLOSED ? RGPU_ETRUNC : ret;
}
