/*
 * cutproxy: a TCP proxy that cuts the connections it forwards at random points, for the
 * connection-cut tests (testing.md, reliability targets: "the connection cut at random points,
 * 20 times per program"). It stands between an rgpu client and rgpud and forwards bytes both
 * ways until a connection reaches its cut point; then it closes both sides abruptly, as a
 * broken network or a crashed middlebox would.
 *
 * Each forwarded connection draws a cut point uniformly in [1, --max-bytes], counted over both
 * directions; the read that reaches it is trimmed so that the connection ends at exactly that
 * byte, in whichever direction crosses it. Bulk copies make up nearly all the bytes of a run,
 * so uniform points almost never fall in a handshake or between a small request and its
 * reply: --spread log draws them log-uniformly instead, as often below 1 KiB as in each
 * higher power of 2^10. Optionally (--max-ms) a connection is also cut at a
 * random time, which catches a connection that sits idle while the server works. After
 * --cuts cuts in all it forwards without cutting. The bytes before the cut point are delivered
 * first (for at most FLUSH_MS, so a peer that does not read cannot stall the cut), then each
 * side is closed either with a reset (SO_LINGER 0) or with a FIN: the four combinations rotate
 * from cut to cut, starting at a point the seed picks, so that both ends see both kinds.
 *
 * It is one thread around poll(): no socket is ever waited on alone, so one stalled peer never
 * holds up another connection. It must never change, reorder or drop a forwarded byte before a
 * cut: the programs behind it check every byte they move.
 */
#define LOG_PREFIX ""
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/log.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"

#define BUF_SIZE (256u << 10) /* per direction and connection */
#define FLUSH_MS 200	      /* how long a cut waits for the bytes before it to drain */

enum { CLIENT = 0, SERVER = 1 };

/* How a cut closes each side; the modes rotate from cut to cut. */
static const struct {
	int client_rst, server_rst;
} cut_modes[] = {{1, 1}, {0, 0}, {1, 0}, {0, 1}};

struct side {
	int fd;
	uint8_t *buf; /* bytes read from this side, not yet written to the other */
	size_t off, len;
	int eof;     /* this side has sent its FIN */
	int wr_shut; /* we have sent our FIN to this side */
};

struct link {
	unsigned id;
	struct side s[2];
	int connecting;	   /* the connect to the target is in progress */
	uint64_t moved;	   /* bytes read from both sides */
	uint64_t in[2];	   /* bytes read from each side */
	uint64_t cut_at;   /* the cut point in moved, 0: none */
	uint64_t cut_time; /* ns deadline of a time-based cut, 0: none */
	int cutting;	   /* the cut is decided; draining what came before it */
	int cut_dir;	   /* the side whose bytes crossed the cut point, -1: by time */
	unsigned cut_no;   /* which cut this is, from 1 */
	uint64_t flush_until;
	int done;
};

static struct {
	const char *stats_path;
	struct sockaddr_storage target;
	socklen_t target_len;
	unsigned cuts_max, cuts_done, mode_base;
	uint64_t max_bytes, max_ms, min_delay_ms;
	int log_spread; /* byte cut points log-uniform instead of uniform */
	uint64_t last_cut_ns;
	unsigned short rng[3];

	struct link **links;
	int nlinks, cap_links;
	unsigned conns;
	uint64_t bytes_up, bytes_down, max_conn_bytes;
} P;

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t stop_requested, stats_requested;

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;
	if (sig == SIGUSR1)
		stats_requested = 1;
	else
		stop_requested = 1;
	if (write(sig_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

/* A number uniformly in [1, max]. */
static uint64_t uniform(uint64_t max)
{
	uint64_t v = 1 + (uint64_t)(erand48(P.rng) * (double)max);
	return v > max ? max : v;
}

/* A cut point in [1, max]: uniform, or with --spread log log-uniform. */
static uint64_t cut_point(uint64_t max)
{
	uint64_t v;
	if (!P.log_spread)
		return uniform(max);
	v = (uint64_t)exp(erand48(P.rng) * log((double)max + 1));
	return v < 1 ? 1 : v > max ? max : v;
}

static int cuts_left(void)
{
	return P.cuts_done < P.cuts_max;
}

/* The stats file is replaced whole (write, then rename), so a reader never sees half of it. */
static void write_stats(void)
{
	char tmp[4096];
	uint64_t max_conn = P.max_conn_bytes;
	FILE *f;

	for (int i = 0; i < P.nlinks; i++)
		max_conn = MAX(max_conn, P.links[i]->moved);
	pr_info("cuts=%u conns=%u bytes_up=%llu bytes_down=%llu max_conn_bytes=%llu", P.cuts_done,
		P.conns, (unsigned long long)P.bytes_up, (unsigned long long)P.bytes_down,
		(unsigned long long)max_conn);
	if (!P.stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", P.stats_path);
	f = fopen(tmp, "w");
	if (!f) {
		pr_err("cannot write %s: %s", tmp, strerror(errno));
		return;
	}
	fprintf(f, "cuts=%u conns=%u bytes_up=%llu bytes_down=%llu max_conn_bytes=%llu\n",
		P.cuts_done, P.conns, (unsigned long long)P.bytes_up,
		(unsigned long long)P.bytes_down, (unsigned long long)max_conn);
	if (fclose(f) || rename(tmp, P.stats_path))
		pr_err("cannot write %s: %s", P.stats_path, strerror(errno));
}

/* ---- connections ------------------------------------------------------------------------ */

static void set_nodelay(int fd)
{
	int one = 1;
	/* the protocol is latency-bound: the proxy must not add Nagle's delays */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void close_rst(int fd)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void close_fin(int fd)
{
	char sink[4096];
	shutdown(fd, SHUT_WR);
	/*
	 * Unread bytes would turn close() into a reset: drop what has arrived. Whatever the peer
	 * sends after this is answered with a reset by the kernel, as a vanished host's would be.
	 */
	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
	close(fd);
}

static void link_free(struct link *l)
{
	for (int i = 0; i < 2; i++)
		free(l->s[i].buf);
	P.max_conn_bytes = MAX(P.max_conn_bytes, l->moved);
	free(l);
}

/* Both sides closed with a reset: a peer reset its side, or the target is unreachable. */
static void link_abort(struct link *l, const char *why)
{
	pr_info("conn %u: %s after %llu bytes; resetting both sides", l->id, why,
		(unsigned long long)l->moved);
	for (int i = 0; i < 2; i++)
		if (l->s[i].fd >= 0)
			close_rst(l->s[i].fd);
	l->s[0].fd = l->s[1].fd = -1;
	l->done = 1;
}

static void link_cut(struct link *l)
{
	int m = (int)((P.mode_base + l->cut_no - 1) % ARRAY_SIZE(cut_modes));
	size_t undelivered = l->s[CLIENT].len + l->s[SERVER].len;
	static const char *const dir[] = {"in client->server", "in server->client"};
	char note[96] = "";

	if (undelivered)
		snprintf(note, sizeof(note),
			 "; %zu bytes before it undelivered (a peer did not read)", undelivered);
	pr_info("cut %u/%u: conn %u at byte %llu (%s; %llu up, %llu down), client %s, server %s%s",
		l->cut_no, P.cuts_max, l->id, (unsigned long long)l->moved,
		l->cut_dir < 0 ? "by the timer" : dir[l->cut_dir],
		(unsigned long long)l->in[CLIENT], (unsigned long long)l->in[SERVER],
		cut_modes[m].client_rst ? "RST" : "FIN", cut_modes[m].server_rst ? "RST" : "FIN",
		note);
	/*
	 * A reset discards what the kernel has not sent yet. On loopback everything written has
	 * already reached the peer; over a real network some bytes before the cut may be lost,
	 * as they would be in a real reset.
	 */
	if (cut_modes[m].client_rst)
		close_rst(l->s[CLIENT].fd);
	else
		close_fin(l->s[CLIENT].fd);
	if (cut_modes[m].server_rst)
		close_rst(l->s[SERVER].fd);
	else
		close_fin(l->s[SERVER].fd);
	l->s[0].fd = l->s[1].fd = -1;
	l->done = 1;
}

/*
 * Decide a cut: count it now, so that concurrent connections never make more than --cuts, and
 * let the bytes before it drain. Within --min-delay-ms of the previous cut the connection gets
 * a fresh cut point instead.
 */
static void link_decide_cut(struct link *l, int dir)
{
	uint64_t now = rgpu_now_ns();

	if (!cuts_left()) {
		l->cut_at = l->cut_time = 0;
		return;
	}
	if (P.last_cut_ns && now < P.last_cut_ns + P.min_delay_ms * 1000000ull) {
		if (dir >= 0)
			l->cut_at = l->moved + cut_point(P.max_bytes);
		else
			l->cut_time = P.last_cut_ns + P.min_delay_ms * 1000000ull;
		return;
	}
	l->cut_no = ++P.cuts_done;
	P.last_cut_ns = now;
	l->cutting = 1;
	l->cut_dir = dir;
	l->flush_until = now + FLUSH_MS * 1000000ull;
}

static void link_arm(struct link *l)
{
	if (!cuts_left())
		return;
	if (P.max_bytes)
		l->cut_at = cut_point(P.max_bytes);
	if (P.max_ms)
		l->cut_time = rgpu_now_ns() + uniform(P.max_ms) * 1000000ull;
}

static void link_new(int cfd)
{
	struct link *l = calloc(1, sizeof(*l));
	int sfd;

	if (!l || !(l->s[0].buf = malloc(BUF_SIZE)) || !(l->s[1].buf = malloc(BUF_SIZE))) {
		pr_err("out of memory; refusing a connection");
		if (l) {
			free(l->s[0].buf);
			free(l);
		}
		close_rst(cfd);
		return;
	}
	l->id = ++P.conns;
	l->s[CLIENT].fd = cfd;
	l->cut_dir = -1;
	set_nodelay(cfd);
	sfd = socket(P.target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	l->s[SERVER].fd = sfd;
	if (sfd < 0) {
		pr_err("conn %u: socket: %s", l->id, strerror(errno));
		link_abort(l, "no socket for the target");
	} else if (connect(sfd, (struct sockaddr *)&P.target, P.target_len) == 0) {
		set_nodelay(sfd);
		link_arm(l);
	} else if (errno == EINPROGRESS) {
		l->connecting = 1;
	} else {
		pr_warn("conn %u: cannot reach the target: %s", l->id, strerror(errno));
		link_abort(l, "target unreachable");
	}
	if (P.nlinks == P.cap_links) {
		int cap = P.cap_links ? 2 * P.cap_links : 16;
		struct link **n = realloc(P.links, (size_t)cap * sizeof(*n));
		if (!n) {
			pr_err("out of memory; refusing a connection");
			link_abort(l, "out of memory");
			link_free(l);
			return;
		}
		P.links = n;
		P.cap_links = cap;
	}
	P.links[P.nlinks++] = l;
	pr_debug("conn %u: opened", l->id);
}

/* Read from side i into its buffer; returns -1 when the side failed. */
static int side_read(struct link *l, int i)
{
	struct side *s = &l->s[i];
	size_t room;
	ssize_t r;

	if (s->off && s->off + s->len > BUF_SIZE / 2) {
		memmove(s->buf, s->buf + s->off, s->len);
		s->off = 0;
	}
	room = BUF_SIZE - s->off - s->len;
	if (l->cut_at && cuts_left())
		room = MIN(room, l->cut_at - l->moved);
	if (room == 0)
		return 0;
	r = recv(s->fd, s->buf + s->off + s->len, room, MSG_DONTWAIT);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	if (r == 0) {
		s->eof = 1;
		return 0;
	}
	s->len += (size_t)r;
	l->moved += (uint64_t)r;
	l->in[i] += (uint64_t)r;
	if (i == CLIENT)
		P.bytes_up += (uint64_t)r;
	else
		P.bytes_down += (uint64_t)r;
	if (l->cut_at && l->moved >= l->cut_at)
		link_decide_cut(l, i);
	return 0;
}

/* Write what side i sent to the other side; returns -1 when the other side failed. */
static int side_write(struct link *l, int i)
{
	struct side *s = &l->s[i], *o = &l->s[1 - i];
	ssize_t w;

	if (!s->len || o->fd < 0)
		return 0;
	w = send(o->fd, s->buf + s->off, s->len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	s->off += (size_t)w;
	s->len -= (size_t)w;
	if (!s->len)
		s->off = 0;
	return 0;
}

static short side_events(const struct link *l, int i)
{
	const struct side *s = &l->s[i];
	short ev = 0;
	if (l->connecting)
		return i == SERVER ? POLLOUT : 0;
	if (!l->cutting && !s->eof && s->off + s->len < BUF_SIZE)
		ev |= POLLIN;
	if (l->s[1 - i].len)
		ev |= POLLOUT;
	return ev;
}

static void link_step(struct link *l, short rev_client, short rev_server)
{
	short rev[2] = {rev_client, rev_server};
	static const char *const who[] = {"client", "server"};

	if (l->connecting) {
		int err = 0;
		socklen_t sl = sizeof(err);
		if (!rev[SERVER])
			return;
		getsockopt(l->s[SERVER].fd, SOL_SOCKET, SO_ERROR, &err, &sl);
		if (err) {
			pr_warn("conn %u: cannot reach the target: %s", l->id, strerror(err));
			link_abort(l, "target unreachable");
			return;
		}
		l->connecting = 0;
		set_nodelay(l->s[SERVER].fd);
		link_arm(l);
		return;
	}
	for (int i = 0; i < 2; i++) {
		if (!l->cutting && (rev[i] & (POLLIN | POLLHUP | POLLERR)) && side_read(l, i)) {
			link_abort(l, i == CLIENT ? "the client reset the connection"
						  : "the server reset the connection");
			return;
		}
	}
	for (int i = 0; i < 2; i++) {
		if (side_write(l, i)) {
			if (l->cutting) { /* the peer went away during the flush: drop the rest */
				l->s[i].len = 0;
				continue;
			}
			link_abort(l, i == CLIENT ? "the server reset the connection"
						  : "the client reset the connection");
			return;
		}
	}
	if (l->cutting) {
		if ((!l->s[0].len && !l->s[1].len) || rgpu_now_ns() >= l->flush_until)
			link_cut(l);
		return;
	}
	/* a FIN is passed on once everything before it has been */
	for (int i = 0; i < 2; i++) {
		struct side *o = &l->s[1 - i];
		if (l->s[i].eof && !l->s[i].len && !o->wr_shut) {
			pr_debug("conn %u: %s finished sending", l->id, who[i]);
			shutdown(o->fd, SHUT_WR);
			o->wr_shut = 1;
		}
	}
	if (l->s[0].wr_shut && l->s[1].wr_shut) {
		pr_debug("conn %u: closed after %llu bytes", l->id, (unsigned long long)l->moved);
		close(l->s[0].fd);
		close(l->s[1].fd);
		l->s[0].fd = l->s[1].fd = -1;
		l->done = 1;
	}
}

/* ---- the loop --------------------------------------------------------------------------- */

static void accept_all(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				pr_warn("accept: %s", strerror(errno));
			return;
		}
		link_new(fd);
	}
}

/* Time-based cuts that are due; returns the poll timeout until the next deadline. */
static int check_timers(void)
{
	uint64_t now = rgpu_now_ns(), next = UINT64_MAX;

	for (int i = 0; i < P.nlinks; i++) {
		struct link *l = P.links[i];
		if (l->done || l->connecting)
			continue;
		if (l->cutting) {
			if (now >= l->flush_until)
				link_step(l, 0, 0);
			else
				next = MIN(next, l->flush_until);
			continue;
		}
		if (l->cut_time && cuts_left()) {
			if (now >= l->cut_time) {
				link_decide_cut(l, -1);
				link_step(l, 0, 0);
			}
			if (!l->done)
				next = MIN(next, l->cutting ? l->flush_until : l->cut_time);
		}
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)MIN((next - now + 999999) / 1000000, 60000);
}

static void sweep(void)
{
	for (int i = 0; i < P.nlinks;) {
		if (P.links[i]->done) {
			link_free(P.links[i]);
			P.links[i] = P.links[--P.nlinks];
		} else {
			i++;
		}
	}
}

static int serve(int lfd)
{
	struct pollfd *pfd = NULL;
	int cap = 0;

	while (!stop_requested) {
		int n, timeout = check_timers();
		sweep();
		n = 2 + 2 * P.nlinks;
		if (n > cap) {
			struct pollfd *np = realloc(pfd, (size_t)n * 2 * sizeof(*np));
			if (!np) {
				pr_err("out of memory");
				free(pfd);
				return 1;
			}
			pfd = np;
			cap = n * 2;
		}
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
		for (int i = 0; i < P.nlinks; i++) {
			for (int j = 0; j < 2; j++) {
				struct pollfd *p = &pfd[2 + 2 * i + j];
				p->events = side_events(P.links[i], j);
				/* no interest: ignore the fd, or its hang-up wakes us in a loop */
				p->fd = p->events ? P.links[i]->s[j].fd : -1;
				p->revents = 0;
			}
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("poll: %s", strerror(errno));
			free(pfd);
			return 1;
		}
		if (pfd[1].revents) {
			char buf[64];
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
			if (stats_requested) {
				stats_requested = 0;
				write_stats();
			}
		}
		/* links accepted below are not in pfd yet: step only the ones polled */
		int polled = P.nlinks;
		for (int i = 0; i < polled; i++) {
			short rc = pfd[2 + 2 * i].revents, rs = pfd[2 + 2 * i + 1].revents;
			if (rc || rs)
				link_step(P.links[i], rc, rs);
		}
		if (pfd[0].revents & POLLIN)
			accept_all(lfd);
	}
	free(pfd);
	return 0;
}

/* ---- setup ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cutproxy --target HOST:PORT [OPTIONS]\n"
	    "Forward TCP connections to HOST:PORT and cut them at random points.\n"
	    "\n"
	    "  --listen HOST:PORT   address to listen on (default 127.0.0.1:0, a free port)\n"
	    "  --port-file FILE     write the port listened on to FILE\n"
	    "  --target HOST:PORT   where to forward to\n"
	    "  --cuts N             cuts to make in all, then forward without cutting (default 0)\n"
	    "  --seed S             random seed (default: from the clock; logged)\n"
	    "  --max-bytes B        cut each connection after a number of bytes uniformly in\n"
	    "                       [1, B], counted over both directions (K, M, G suffixes)\n"
	    "  --spread log         draw those numbers log-uniformly: small offsets (handshakes,\n"
	    "                       short calls) as likely as large ones (default: uniform)\n"
	    "  --max-ms MS          also cut each connection at a random time in [1, MS] ms\n"
	    "  --min-delay-ms MS    no cut within MS ms of the previous one: a connection whose\n"
	    "                       cut point comes sooner draws a new one (default 0)\n"
	    "  --stats FILE         write 'cuts=N conns=M bytes_up=.. bytes_down=..\n"
	    "                       max_conn_bytes=..' to FILE on SIGUSR1 and at exit\n"
	    "  --log-level LEVEL    error, warn, info (default: every cut) or debug\n"
	    "  -h, --help           this text\n"
	    "SIGTERM or SIGINT: write the stats and exit.\n");
}

static int resolve(const char *s, struct sockaddr_storage *out, socklen_t *len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;
	char host[256], serv[16];
	int port;

	if (rgpu_parse_hostport(s, "127.0.0.1", host, sizeof(host), &port) || port <= 0)
		return -1;
	snprintf(serv, sizeof(serv), "%d", port);
	if (getaddrinfo(host, serv, &hints, &res))
		return -1;
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end ? -1 : 0;
}

static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	FILE *f;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) || rename(tmp, path))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"port-file", required_argument, NULL, 'P'},
	    {"target", required_argument, NULL, 't'},
	    {"cuts", required_argument, NULL, 'c'},
	    {"seed", required_argument, NULL, 's'},
	    {"max-bytes", required_argument, NULL, 'b'},
	    {"max-ms", required_argument, NULL, 'm'},
	    {"spread", required_argument, NULL, 'D'},
	    {"min-delay-ms", required_argument, NULL, 'd'},
	    {"stats", required_argument, NULL, 'S'},
	    {"log-level", required_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *listen_at = "127.0.0.1:0", *target = NULL, *port_file = NULL;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16), mixed, v;
	struct sigaction sa = {0};
	char host[256];
	int c, lvl, port, bound = 0, lfd, ret;

	rgpu_log_set_tag("cutproxy");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen_at = optarg;
			break;
		case 'P':
			port_file = optarg;
			break;
		case 't':
			target = optarg;
			break;
		case 'c':
			if (parse_u64(optarg, &v) || v > 1000000) {
				fprintf(stderr, "cutproxy: bad --cuts '%s'\n", optarg);
				return 2;
			}
			P.cuts_max = (unsigned)v;
			break;
		case 's':
			if (parse_u64(optarg, &seed)) {
				fprintf(stderr, "cutproxy: bad --seed '%s'\n", optarg);
				return 2;
			}
			break;
		case 'b':
			if (rgpu_parse_size(optarg, &P.max_bytes) || !P.max_bytes) {
				fprintf(stderr, "cutproxy: bad --max-bytes '%s'\n", optarg);
				return 2;
			}
			break;
		case 'D':
			if (strcmp(optarg, "uniform") && strcmp(optarg, "log")) {
				fprintf(stderr, "cutproxy: bad --spread '%s' (uniform or log)\n",
					optarg);
				return 2;
			}
			P.log_spread = !strcmp(optarg, "log");
			break;
		case 'm':
			if (parse_u64(optarg, &P.max_ms) || !P.max_ms) {
				fprintf(stderr, "cutproxy: bad --max-ms '%s'\n", optarg);
				return 2;
			}
			break;
		case 'd':
			if (parse_u64(optarg, &P.min_delay_ms)) {
				fprintf(stderr, "cutproxy: bad --min-delay-ms '%s'\n", optarg);
				return 2;
			}
			break;
		case 'S':
			P.stats_path = optarg;
			break;
		case 'v':
			lvl = rgpu_log_parse_level(optarg);
			if (lvl < 0) {
				fprintf(stderr, "cutproxy: bad --log-level '%s'\n", optarg);
				return 2;
			}
			rgpu_log_set_level(lvl);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cutproxy: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!target) {
		fprintf(stderr, "cutproxy: --target is required\n");
		usage(stderr);
		return 2;
	}
	if (P.cuts_max && !P.max_bytes && !P.max_ms) {
		fprintf(stderr, "cutproxy: --cuts needs --max-bytes or --max-ms\n");
		return 2;
	}
	if (resolve(target, &P.target, &P.target_len)) {
		fprintf(stderr, "cutproxy: bad --target '%s' (want HOST:PORT)\n", target);
		return 2;
	}
	if (rgpu_parse_hostport(listen_at, "127.0.0.1", host, sizeof(host), &port)) {
		fprintf(stderr, "cutproxy: bad --listen '%s' (want HOST:PORT)\n", listen_at);
		return 2;
	}
	/* spread the seed over erand48's state: a small seed would make its first draws tiny */
	mixed = seed * 0x9E3779B97F4A7C15ull;
	mixed ^= mixed >> 29;
	P.rng[0] = (unsigned short)mixed;
	P.rng[1] = (unsigned short)(mixed >> 16);
	P.rng[2] = (unsigned short)(mixed >> 32);
	P.mode_base = (unsigned)(seed % ARRAY_SIZE(cut_modes));

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
		pr_err("pipe: %s", strerror(errno));
		return 1;
	}
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = rgpu_tcp_listen(host, port, &lfd, &bound);
	if (ret) {
		pr_err("cannot listen on %s:%d: %s", host, port, strerror(errno));
		return 1;
	}
	fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
	if (port_file && write_port_file(port_file, bound)) {
		pr_err("cannot write %s: %s", port_file, strerror(errno));
		return 1;
	}
	pr_info("listening on %s:%d, forwarding to %s; %u cut(s), max %llu bytes (%s), max %llu "
		"ms, seed %llu",
		host, bound, target, P.cuts_max, (unsigned long long)P.max_bytes,
		P.log_spread ? "log" : "uniform", (unsigned long long)P.max_ms,
		(unsigned long long)seed);

	ret = serve(lfd);
	write_stats();
	for (int i = 0; i < P.nlinks; i++) {
		for (int j = 0; j < 2; j++)
			if (P.links[i]->s[j].fd >= 0)
				close(P.links[i]->s[j].fd);
		link_free(P.links[i]);
	}
	free(P.links);
	close(lfd);
	return ret;
}
