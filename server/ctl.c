/*
 * The control channel between the supervisor and each of its workers: one protobuf message
 * (rgpu.Ctl, proto/admin.proto) per datagram on a SOCK_SEQPACKET socketpair, with a socket
 * descriptor attached when a client's link is handed from one process to another.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "srv.h"

#define CTL_MAX (64u << 10)

ssize_t srv_sendmsg_fd(int sock, struct iovec *iov, int n, int pass_fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
	ssize_t r;

	if (pass_fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	do
		r = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r;
}

int srv_ctl_send(int fd, const struct Rgpu__Ctl *m, int pass_fd)
{
	size_t len = rgpu__ctl__get_packed_size(m);
	struct iovec iov;
	uint8_t *buf;
	ssize_t n;

	if (len > CTL_MAX)
		return RGPU_ETOOBIG;
	buf = malloc(len ? len : 1);
	if (!buf)
		return RGPU_ENOMEM;
	/* tests: a job's report sized, then packed late (its strings must not change between) */
	if (m->kind == RGPU__CTL_KIND__CTL_INFO && rgpu_fault("info_pack_slow"))
		usleep(300000);
	rgpu__ctl__pack(m, buf);
	iov.iov_base = buf;
	iov.iov_len = len;
	n = srv_sendmsg_fd(fd, &iov, 1, pass_fd);
	free(buf);
	return n == (ssize_t)len ? 0 : RGPU_EIO;
}

ssize_t srv_recvmsg_fd(int sock, void *buf, size_t len, int flags, int *fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf)};
	ssize_t r;

	do
		r = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	for (struct cmsghdr *c = r >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int))) {
			int rfd;
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
			if (fd && *fd < 0)
				*fd = rfd;
			else
				close(rfd);
		}
	return r;
}

int srv_ctl_recv(int fd, struct Rgpu__Ctl **out, int *got_fd, int timeout_ms)
{
	uint8_t *buf;
	ssize_t n;

	*out = NULL;
	if (got_fd)
		*got_fd = -1;
	if (timeout_ms >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r == 0)
			return RGPU_ETIMEDOUT;
		if (r < 0)
			return errno == EINTR ? RGPU_ETIMEDOUT : RGPU_EIO;
	}
	buf = malloc(CTL_MAX);
	if (!buf)
		return RGPU_ENOMEM;
	n = srv_recvmsg_fd(fd, buf, CTL_MAX, 0, got_fd);
	if (n <= 0) {
		if (got_fd && *got_fd >= 0) {
			close(*got_fd);
			*got_fd = -1;
		}
		free(buf);
		return n == 0 ? RGPU_ECLOSED : RGPU_EIO;
	}
	*out = RGPU_PB_UNPACK(rgpu__ctl, (size_t)n, buf);
	free(buf);
	if (!*out) {
		if (got_fd && *got_fd >= 0) {
			close(*got_fd);
			*got_fd = -1;
		}
		return RGPU_EPROTO;
	}
	return 0;
}
