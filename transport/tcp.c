/*
 * The TCP transport: blocking sockets with TCP_NODELAY. Buffer sizes are left to the kernel's
 * autotuning, which grows them past what SO_SNDBUF/SO_RCVBUF may set without privileges.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rgpu/err.h"
#include "conn_priv.h"
#include "rgpu/util.h"

static int plain_sendv(struct rgpu_conn *c, const struct iovec *iov_in, int n);

/*
 * With lanes (lanes.c): follow the frames through the bytes, and stripe each payload of at
 * least RGPU_LANE_MIN bytes that comes as its own iovec entry right after its frame's header and
 * body; everything else goes on the link's socket as always.
 */
static int lanes_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	struct iovec out[RGPU_CONN_MAX_IOV + 2];
	uint8_t hdr[RGPU_FRAME_HDR_LEN];
	uint32_t body;
	int k = 0, ret;

	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		uint64_t plen = rgpu_conn_marked_payload(c, iov, n, i, &body);

		if (plen >= RGPU_LANE_MIN && !(rd_le32(p + 8) & RGPU_FRAME_BYREF)) {
			memcpy(hdr, p, sizeof(hdr));
			wr_le32(hdr + 8, rd_le32(hdr + 8) | RGPU_FRAME_LANES);
			out[k++] = (struct iovec){hdr, sizeof(hdr)};
			out[k++] = (struct iovec){(void *)(p + sizeof(hdr)), body};
			if ((ret = plain_sendv(c, out, k)))
				return ret;
			k = 0;
			ret = rgpu_lanes_send(c, iov[i + 1].iov_base, plen, rd_le64(p + 24));
			if (ret)
				return ret;
			i++;
			continue;
		}
		out[k++] = iov[i];
		rgpu_conn_track_sent(c, p, iov[i].iov_len);
		if (k == RGPU_CONN_MAX_IOV) {
			if ((ret = plain_sendv(c, out, k)))
				return ret;
			k = 0;
		}
	}
	return k ? plain_sendv(c, out, k) : 0;
}

static int tcp_sendv(struct rgpu_conn *c, const struct iovec *iov_in, int n)
{
	if (rgpu_lanes_sending(c))
		return lanes_sendv(c, iov_in, n);
	return plain_sendv(c, iov_in, n);
}

static int plain_sendv(struct rgpu_conn *c, const struct iovec *iov_in, int n)
{
	struct iovec iov[RGPU_CONN_MAX_IOV];
	struct msghdr msg = {0};
	int i = 0;

	if (n > (int)(sizeof(iov) / sizeof(iov[0])))
		return RGPU_EINVAL;
	memcpy(iov, iov_in, sizeof(*iov) * (size_t)n);
	while (i < n) {
		msg.msg_iov = iov + i;
		msg.msg_iovlen = (size_t)(n - i);
		ssize_t w = sendmsg(c->fd, &msg,
				    MSG_NOSIGNAL | (c->send_timeout_ms ? MSG_DONTWAIT : 0));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				/* only with a send timeout: wait that long for room */
				struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
				int k = poll(&pfd, 1, c->send_timeout_ms);
				if (k > 0 || (k < 0 && errno == EINTR))
					continue;
				c->last_errno = k == 0 ? ETIMEDOUT : errno;
				return k == 0 ? RGPU_ETIMEDOUT : RGPU_EIO;
			}
			c->last_errno = errno;
			return errno == EPIPE || errno == ECONNRESET ? RGPU_ECLOSED : RGPU_EIO;
		}
		size_t left = (size_t)w;
		while (i < n && left >= iov[i].iov_len) {
			left -= iov[i].iov_len;
			i++;
		}
		if (i < n) {
			iov[i].iov_base = (char *)iov[i].iov_base + left;
			iov[i].iov_len -= left;
		}
	}
	return 0;
}

static long tcp_recv_some(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms)
{
	/*
	 * A reply usually follows a request within microseconds; polling briefly saves the
	 * scheduler's wake-up, which costs more than that on each side of a round trip. Also
	 * under a timeout (a worker's reader waits for the next frame only until its session would
	 * be idle), which the spin overshoots by at most spin_ns.
	 *
	 * The spin watches the socket with poll, which reads its state without its lock, and
	 * calls recv only once bytes are there. A recv on an empty socket takes the socket's lock:
	 * spinning on it kept the lock held much of the time, and a sendmsg on the same socket from
	 * another thread (the caller writing its next request, the executor writing a reply) then
	 * slept until it was released.
	 */
	if (c->spin_ns && timeout_ms != 0) {
		uint64_t start = rgpu_now_ns();
		do {
			struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
			if (poll(&pfd, 1, 0) == 0) {
				__builtin_ia32_pause();
				continue;
			}
			ssize_t r = recv(c->fd, buf, cap, MSG_DONTWAIT);
			if (r > 0)
				return (long)r;
			if (r == 0)
				return RGPU_ECLOSED;
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				break;
		} while (rgpu_conn_spin_more(c, start, rgpu_now_ns()));
	}
	for (;;) {
		ssize_t r;
		if (timeout_ms >= 0) {
			struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
			int n = poll(&pfd, 1, timeout_ms);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0)
				return RGPU_ETIMEDOUT;
		}
		r = recv(c->fd, buf, cap, 0);
		if (r > 0)
			return (long)r;
		if (r == 0)
			return RGPU_ECLOSED;
		if (errno == EINTR)
			continue;
		c->last_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return RGPU_ETIMEDOUT;
		return errno == ECONNRESET ? RGPU_ECLOSED : RGPU_EIO;
	}
}

static int tcp_hung_up(struct rgpu_conn *c)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLRDHUP};
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void tcp_shutdown(struct rgpu_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	rgpu_lanes_shutdown(c);
}

static void tcp_close(struct rgpu_conn *c)
{
	rgpu_lanes_free(c);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static const struct rgpu_transport_ops tcp_ops = {
	.name = "tcp",
	.sendv = tcp_sendv,
	.recv_some = tcp_recv_some,
	.hung_up = tcp_hung_up,
	.shutdown = tcp_shutdown,
	.close = tcp_close,
	.recv_marked = rgpu_lanes_recv_marked,
};

/*
 * TCP_NODELAY: small requests must not wait for Nagle. Keepalive: a peer whose machine
 * vanished without closing the connection is noticed within about 25 s on both sides (an idle
 * session is normal; a dead one must not hold a GPU or a waiting application for ever).
 */
static void set_sockopts(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static void peer_name(int fd, char *out, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[64] = "?", serv[16] = "?";
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX) {
		/* this host's socket (shared memory), or a socket pair (a relay, a test) */
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) && cr.pid > 0)
			snprintf(out, len, "local pid %d", (int)cr.pid);
		else
			snprintf(out, len, "local");
		return;
	}
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), serv, sizeof(serv),
			    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(out, len, "%s:%s", host, serv);
}

struct rgpu_conn *rgpu_tcp_wrap(int fd)
{
	struct rgpu_conn *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	memset(c, 0, offsetof(struct rgpu_conn, rbuf));
	c->ops = &tcp_ops;
	c->fd = fd;
	c->frame_timeout_ms = RGPU_FRAME_TIMEOUT_MS;
	set_sockopts(fd);
	peer_name(fd, c->peer, sizeof(c->peer));
	return c;
}

int rgpu_tcp_listen(const char *host, int port, int *lfd, int *bound_port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char serv[16];
	int fd = -1, one = 1, err = RGPU_ESYS;

	snprintf(serv, sizeof(serv), "%d", port);
	if (getaddrinfo(host, serv, &hints, &res) != 0)
		return RGPU_EINVAL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;
	if (bound_port) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*bound_port = ntohs(ss.ss_family == AF_INET6
					    ? ((struct sockaddr_in6 *)&ss)->sin6_port
					    : ((struct sockaddr_in *)&ss)->sin_port);
	}
	*lfd = fd;
	return 0;
}

int rgpu_tcp_accept(int lfd, struct rgpu_conn **out)
{
	int fd;
	do {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return RGPU_ESYS;
	*out = rgpu_tcp_wrap(fd);
	if (!*out) {
		close(fd);
		return RGPU_ENOMEM;
	}
	return 0;
}

/* Connect with a deadline: a non-blocking connect, then poll for writability. */
static int connect_one(const struct addrinfo *ai, int timeout_ms, int *fd_out)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol);
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (fd < 0)
		return errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			int e = errno;
			close(fd);
			return e;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int r;
		do {
			r = poll(&pfd, 1, timeout_ms);
		} while (r < 0 && errno == EINTR);
		if (r == 0) {
			close(fd);
			return ETIMEDOUT;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			close(fd);
			return soerr;
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	*fd_out = fd;
	return 0;
}

int rgpu_tcp_connect(const char *host, int port, int timeout_ms, struct rgpu_conn **out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char serv[16];
	int fd = -1, e = ECONNREFUSED;

	snprintf(serv, sizeof(serv), "%d", port);
	if (getaddrinfo(host, serv, &hints, &res) != 0) {
		errno = EHOSTUNREACH;
		return RGPU_ECONNECT;
	}
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		e = connect_one(ai, timeout_ms, &fd);
	freeaddrinfo(res);
	if (fd < 0) {
		errno = e;
		return e == ETIMEDOUT ? RGPU_ETIMEDOUT : RGPU_ECONNECT;
	}
	*out = rgpu_tcp_wrap(fd);
	if (!*out) {
		close(fd);
		return RGPU_ENOMEM;
	}
	return 0;
}
