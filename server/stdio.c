/*
 * The program's output from the device: what the driver writes to this worker's stdout (a
 * kernel's printf lines) and stderr (a device assert's message) goes to the client, whose
 * interposer writes it to the program's own stdout and stderr (protocol.md, "Device output").
 *
 * When the job starts (after the handshake, which loads the driver) srv_stdio_init() points fd 1
 * and fd 2 at pipes; the worker's own log moves to a copy of the original fd 2 first, and the
 * original stdout is kept too. The driver writes its printf buffer through this process's stdio
 * when it flushes it: at a synchronisation, a blocking copy, a module load or unload, a
 * context's teardown, before a stream callback. The executor is then inside that driver call.
 * After every frame that can make the driver flush (srv_stdio_flush_point) it calls
 * srv_stdio_flush(), which empties the stdio buffers and both pipes and sends what they held as
 * MSG_OUTPUT, before the reply of that request: the client writes the lines before the call
 * returns there, as the driver does natively. Output the driver writes at other times (from its
 * own threads) goes out at the next flush.
 *
 * A drain thread reads the pipes whenever they hold something, so a driver that writes more
 * than a pipe holds never blocks inside the executor's call (nothing else would empty the
 * pipe); what it reads waits in memory, at most SRV_OUTPUT_KEPT bytes, until the next flush.
 * Beyond that the output is dropped, and the worker logs so once.
 *
 * It must never send MSG_OUTPUT to a client that did not announce RGPU_CAP_OUTPUT (that
 * output goes to the worker's original stdout and stderr, where it went before), never let the
 * worker's own log lines reach the program, and never block the executor on the pipes.
 */
#define LOG_PREFIX "worker: "
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

/* the sanitizers' runtime, when this is a sanitizer build (weak: NULL otherwise) */
void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

/* bytes of output kept between two flushes, both streams together */
#define SRV_OUTPUT_KEPT (16u << 20)

struct srv_stdio {
	int rd[2];		    /* read ends of the pipes behind fd 1 and fd 2 */
	int orig[2];		    /* the worker's original stdout and stderr */
	pthread_mutex_t lock;	    /* reading the pipes, and the kept bytes */
	pthread_mutex_t flush_lock; /* one flush at a time: output leaves in the order read */
	char *buf[2];
	size_t len[2], cap[2];
	uint64_t dropped;     /* since the last flush */
	int warned;	      /* the job has dropped output (logged once) */
	struct srv_worker *w; /* for the job's name in the log */
};

/* Make room for at least 4 KiB more in buf[i], up to the bound. 0, or -1: none. */
static int grow_locked(struct srv_stdio *io, int i)
{
	size_t cap = MAX(io->cap[i] * 2, (size_t)65536);
	char *n;

	if (io->cap[i] - io->len[i] >= 4096)
		return 0;
	cap = MIN(cap, (size_t)SRV_OUTPUT_KEPT);
	if (cap <= io->cap[i])
		return -1;
	n = realloc(io->buf[i], cap);
	if (!n)
		return -1;
	io->buf[i] = n;
	io->cap[i] = cap;
	return 0;
}

/* Read what pipe i holds now (it never blocks: the read ends are non-blocking). */
static void read_pipe_locked(struct srv_stdio *io, int i)
{
	static char discard[16384]; /* under io->lock */

	for (;;) {
		size_t kept = io->len[0] + io->len[1];
		char *dst = discard;
		size_t room = sizeof(discard);
		ssize_t n;

		if (kept < SRV_OUTPUT_KEPT && grow_locked(io, i) == 0) {
			dst = io->buf[i] + io->len[i];
			room = MIN(io->cap[i] - io->len[i], (size_t)SRV_OUTPUT_KEPT - kept);
		}
		n = read(io->rd[i], dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN: empty for now */
		if (dst != discard) {
			io->len[i] += (size_t)n;
			continue;
		}
		if (!io->warned)
			pr_warn("job %s: the program's device output passed %u MiB between two "
				"synchronisations; output beyond that is dropped (logged once)",
				io->w->job_hex, SRV_OUTPUT_KEPT >> 20);
		io->warned = 1;
		io->dropped += (uint64_t)n;
	}
}

/* The drain thread: keeps the pipes empty, so that no writer ever blocks on them. */
static void *drain_main(void *arg)
{
	struct srv_stdio *io = arg;
	struct pollfd p[2] = {{.fd = io->rd[0], .events = POLLIN},
			      {.fd = io->rd[1], .events = POLLIN}};

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_err("job %s: cannot wait for the device output: %s", io->w->job_hex,
			       strerror(errno));
			return NULL;
		}
		pthread_mutex_lock(&io->lock);
		for (int i = 0; i < 2; i++)
			if (p[i].revents & POLLIN)
				read_pipe_locked(io, i);
		pthread_mutex_unlock(&io->lock);
		/* no writer left (the redirection failed and was undone): nothing more will come */
		if ((p[0].revents | p[1].revents) & (POLLHUP | POLLERR | POLLNVAL))
			return NULL;
	}
}

int srv_stdio_init(struct srv_worker *w)
{
	static struct srv_stdio io = {.rd = {-1, -1}, .orig = {-1, -1}};
	int p[2][2] = {{-1, -1}, {-1, -1}};
	pthread_t t;

	io.w = w;
	io.orig[0] = fcntl(1, F_DUPFD_CLOEXEC, 3);
	io.orig[1] = fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (io.orig[0] < 0 || io.orig[1] < 0)
		goto out_close;
	if (pipe2(p[0], O_CLOEXEC) || pipe2(p[1], O_CLOEXEC))
		goto out_close;
	for (int i = 0; i < 2; i++)
		if (fcntl(p[i][0], F_SETFL, O_NONBLOCK))
			goto out_close;
	pthread_mutex_init(&io.lock, NULL);
	pthread_mutex_init(&io.flush_lock, NULL);
	io.rd[0] = p[0][0];
	io.rd[1] = p[1][0];
	if (pthread_create(&t, NULL, drain_main, &io))
		goto out_close;
	pthread_detach(t);
	/* the log first: from here on fd 2 is the program's stderr */
	if (rgpu_log_fd() == 2)
		rgpu_log_set_fd(io.orig[1]);
	/*
	 * a sanitizer build's reports too: written to the program's stderr they would be lost with
	 * the worker they end (the pipe is drained only at flush points)
	 */
	if (__sanitizer_set_report_fd)
		__sanitizer_set_report_fd((void *)(intptr_t)io.orig[1]);
	/* what was written before the job started stays the server's */
	fflush(stdout);
	if (dup2(p[0][1], 1) < 0 || dup2(p[1][1], 2) < 0) {
		/* not with valid descriptors; should it happen, put fd 1 and 2 back */
		pr_err("cannot redirect the driver's output: %s", strerror(errno));
		dup2(io.orig[0], 1);
		dup2(io.orig[1], 2);
		close(p[0][1]);
		close(p[1][1]);
		return RGPU_ESYS;
	}
	close(p[0][1]);
	close(p[1][1]);
	w->stdio = &io;
	return 0;

out_close:
	pr_warn("cannot capture the driver's output (%s): device printf stays on the server",
		strerror(errno));
	for (int i = 0; i < 2; i++) {
		if (io.orig[i] >= 0)
			close(io.orig[i]);
		io.orig[i] = -1;
		if (p[i][0] >= 0)
			close(p[i][0]);
		if (p[i][1] >= 0)
			close(p[i][1]);
		io.rd[i] = -1;
	}
	return RGPU_ESYS;
}

int srv_stdio_flush_point(unsigned type)
{
	const struct rgpu_msg_info *m = rgpu_msg_info(type);

	if (!m)
		return 0;
	return m->effect == RGPU_EFFECT_SYNC || type == RGPU_MSG_MEMCPY_DTOH ||
	       type == RGPU_MSG_MODULE_LOAD || type == RGPU_MSG_MODULE_UNLOAD ||
	       type == RGPU_MSG_CTX_DESTROY || type == RGPU_MSG_GOODBYE;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

/* Bytes of fd (1 or 2) to the client, in pieces of at most RGPU_MAX_OUTPUT. */
static void deliver(struct srv_worker *w, struct srv_stdio *io, int fd, const char *p, size_t n)
{
	Rgpu__Output m = RGPU__OUTPUT__INIT;

	if (!(w->client_caps & RGPU_CAP_OUTPUT) || w->replaying) {
		/* a client that cannot take it: where the driver's output went before */
		write_all(io->orig[fd - 1], p, n);
		return;
	}
	m.fd = (uint32_t)fd;
	while (n) {
		size_t k = MIN(n, (size_t)RGPU_MAX_OUTPUT);
		/* kept for a resume like any frame; fails only once the job has ended */
		if (srv_send(w, RGPU_MSG_OUTPUT, 0, 0, &m.base, p, k))
			return;
		p += k;
		n -= k;
	}
}

void srv_stdio_flush(struct srv_worker *w)
{
	struct srv_stdio *io = w->stdio;
	char *buf[2];
	size_t len[2];

	if (!io)
		return;
	pthread_mutex_lock(&io->flush_lock);
	/* the driver writes through stdio: what it left in the buffers goes into the pipes */
	fflush(stdout);
	fflush(stderr);
	/*
	 * Everything written so far is in a pipe or, taken by the drain thread, in buf[]. One
	 * poll rather than two reads: most flush points find nothing, and they are on the path of
	 * every synchronising call.
	 */
	struct pollfd p[2] = {{.fd = io->rd[0], .events = POLLIN},
			      {.fd = io->rd[1], .events = POLLIN}};
	if (poll(p, 2, 0) <= 0)
		p[0].revents = p[1].revents = 0;
	pthread_mutex_lock(&io->lock);
	for (int i = 0; i < 2; i++) {
		if (p[i].revents)
			read_pipe_locked(io, i);
		buf[i] = io->buf[i];
		len[i] = io->len[i];
		io->buf[i] = NULL;
		io->len[i] = io->cap[i] = 0;
	}
	if (io->dropped) {
		pr_debug("job %s: %llu bytes of the program's device output were dropped",
			 w->job_hex, (unsigned long long)io->dropped);
		io->dropped = 0;
	}
	pthread_mutex_unlock(&io->lock);
	for (int i = 0; i < 2; i++) {
		if (len[i])
			deliver(w, io, i + 1, buf[i], len[i]);
		free(buf[i]);
	}
	pthread_mutex_unlock(&io->flush_lock);
}
