/*
 * The loopback TCP ceiling of this host, iperf-style, for the benchmark table of
 * tests/gpu/run.sh: what rgpu over TCP could reach at best on the same host in the same run.
 * For each count k of parallel connections over 127.0.0.1, k sender threads write 4 MiB
 * buffers and k receiver threads read into 4 MiB buffers for the given time (default socket
 * options plus TCP_NODELAY, as rgpu's transport sets); the bytes received in that time give
 *
 *   tcp_ceiling_<k> X GB/s        one line per k
 *   tcp_ceiling_best X GB/s       the highest of them
 *   tcp_rtt_median X us           a 4-byte request answered by a 4-byte reply over one
 *                                 connection, both ends polling (as rgpu's threads do): the
 *                                 least two transfers cost on this host's loopback
 *   tcp_rtt_split_median X us     the same with 96 bytes each way and, at each end, one thread
 *                                 that writes and another that polls the socket and reads, as
 *                                 rgpu's client (caller, receiver) and worker (reader,
 *                                 executor) have: what a synchronous call over TCP costs at
 *                                 least, its handler aside (4 CPUs or more in the process's
 *                                 affinity mask, at most about 3 s; a comment line says when it
 *                                 was not measured)
 *
 *   tcp_ceiling [-t SECONDS] [-s STREAMS,...] [-m MiB]     defaults: -t 2 -s 1,2,4,8
 *
 * With -m each of k senders walks through its own MiB / k bytes, 4 MiB at a time, and each
 * receiver likewise (lines tcp_ceiling_walk_<k>, and no _best): a large copy reads and writes
 * memory that is not in the caches, where the default 4 MiB buffers, written again and again,
 * mostly are.
 *
 * It needs no GPU and no CUDA. It never checks the bytes: it measures the kernel's loopback,
 * not a protocol.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/util.h"

#define BUF_BYTES ((size_t)4 << 20)
#define MIN_SZ(a, b) ((a) < (b) ? (a) : (b))
#define MAX_SZ(a, b) ((a) > (b) ? (a) : (b))
enum { MAX_STREAMS = 64, MAX_COUNTS = 16 };

struct conn {
	int send_fd, recv_fd;
	size_t span;            /* bytes each end walks through, 4 MiB at a time */
	char *sbuf, *rbuf;      /* the sender's and the receiver's, touched before the clock starts */
	pthread_t sender, receiver;
	atomic_ullong received;
};

static atomic_int stop;
static atomic_int failed; /* a thread met an error (and said which) */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Writes whole buffers until told to stop, then closes its side (the receiver sees EOF). */
static void *sender(void *arg)
{
	struct conn *c = arg;
	char *buf = c->sbuf;
	size_t at = 0;
	{
		while (!atomic_load(&stop)) {
			size_t off = 0;
			char *b = buf + at;
			at = (at + BUF_BYTES) % c->span;
			while (off < BUF_BYTES) {
				ssize_t n =
				    send(c->send_fd, b + off, BUF_BYTES - off, MSG_NOSIGNAL);
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0) {
					perror("tcp_ceiling: send");
					atomic_store(&failed, 1);
					goto out;
				}
				off += (size_t)n;
			}
		}
	}
out:
	shutdown(c->send_fd, SHUT_WR);
	return NULL;
}

/* Reads until EOF, counting the bytes. */
static void *receiver(void *arg)
{
	struct conn *c = arg;
	char *buf = c->rbuf;
	size_t at = 0;
	for (;;) {
		ssize_t n = recv(c->recv_fd, buf + at, MIN_SZ(BUF_BYTES, c->span - at), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("tcp_ceiling: recv");
			atomic_store(&failed, 1);
		}
		if (n <= 0)
			break;
		atomic_fetch_add(&c->received, (unsigned long long)n);
		at = (at + (size_t)n) % c->span;
	}
	return NULL;
}

/* A listening socket on 127.0.0.1 at a port the kernel picks; -1 after printing why. */
static int listen_loopback(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		perror("tcp_ceiling: socket");
		return -1;
	}
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)addr, sizeof(*addr)) < 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &len) < 0 || listen(fd, MAX_STREAMS) < 0) {
		perror("tcp_ceiling: listen on 127.0.0.1");
		close(fd);
		return -1;
	}
	return fd;
}

/* c->send_fd and c->recv_fd: the two ends of one new connection, TCP_NODELAY on both. */
static int connect_pair(int lfd, const struct sockaddr_in *addr, struct conn *c)
{
	int one = 1;
	c->send_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->send_fd < 0) {
		perror("tcp_ceiling: socket");
		return -1;
	}
	if (connect(c->send_fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		perror("tcp_ceiling: connect to 127.0.0.1");
		goto out_close;
	}
	c->recv_fd = accept(lfd, NULL, NULL);
	if (c->recv_fd < 0) {
		perror("tcp_ceiling: accept");
		goto out_close;
	}
	setsockopt(c->send_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->recv_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
out_close:
	close(c->send_fd);
	return -1;
}

/*
 * k connections for secs seconds; returns GB/s received over all of them, or a negative value
 * after printing why.
 */
static double measure(int lfd, const struct sockaddr_in *addr, int k, double secs, size_t walk)
{
	struct conn conns[MAX_STREAMS];
	int made = 0, started = 0;
	double gbs = -1, t0;
	unsigned long long total = 0;

	memset(conns, 0, sizeof(conns));
	atomic_store(&stop, 0);
	for (; made < k; made++)
	{
		if (connect_pair(lfd, addr, &conns[made]) < 0)
			goto out_close;
		/* each end's share of the walk, whole 4 MiB writes (at least one) */
		conns[made].span = walk ? MAX_SZ(walk / (size_t)k / BUF_BYTES, 1) * BUF_BYTES
					: BUF_BYTES;
		conns[made].sbuf = malloc(conns[made].span);
		conns[made].rbuf = malloc(conns[made].span);
		if (!conns[made].sbuf || !conns[made].rbuf) {
			fprintf(stderr, "tcp_ceiling: out of memory\n");
			made++;
			goto out_close;
		}
		memset(conns[made].sbuf, 0x5a, conns[made].span);
		memset(conns[made].rbuf, 0, conns[made].span);
	}
	t0 = now_s();
	for (; started < k; started++) {
		struct conn *c = &conns[started];
		if (pthread_create(&c->receiver, NULL, receiver, c)) {
			fprintf(stderr, "tcp_ceiling: cannot start a thread\n");
			goto out_stop;
		}
		if (pthread_create(&c->sender, NULL, sender, c)) {
			fprintf(stderr, "tcp_ceiling: cannot start a thread\n");
			shutdown(c->recv_fd, SHUT_RDWR); /* its receiver sees EOF */
			pthread_join(c->receiver, NULL);
			goto out_stop;
		}
	}
	{
		struct timespec ts = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	/* the bytes in by now, over the time they took: what is still in flight is not counted */
	for (int i = 0; i < k; i++)
		total += atomic_load(&conns[i].received);
	gbs = total / (now_s() - t0) / 1e9;
out_stop:
	atomic_store(&stop, 1);
	for (int i = 0; i < started; i++) {
		pthread_join(conns[i].sender, NULL);
		pthread_join(conns[i].receiver, NULL);
	}
out_close:
	for (int i = 0; i < made; i++) {
		close(conns[i].send_fd);
		close(conns[i].recv_fd);
		free(conns[i].sbuf);
		free(conns[i].rbuf);
	}
	return started == k && !atomic_load(&failed) ? gbs : -1;
}

/* The echo end of the round trips: polls for 4 bytes, sends them back. */
static void *echo_main(void *arg)
{
	int fd = *(int *)arg;
	char b[4];
	for (;;) {
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (n > 0 && send(fd, b, (size_t)n, MSG_NOSIGNAL) != n)
			break;
	}
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median round trip of 4 bytes over one loopback connection, in us; negative on failure. */
static double rtt(int lfd, const struct sockaddr_in *addr)
{
	enum { N = 20000, WARM = 2000 };
	static double t[N];
	struct conn c;
	pthread_t echo;
	char b[4] = {1, 2, 3, 4};
	double med = -1;

	if (connect_pair(lfd, addr, &c) < 0)
		return -1;
	if (pthread_create(&echo, NULL, echo_main, &c.recv_fd)) {
		close(c.send_fd);
		close(c.recv_fd);
		return -1;
	}
	for (int i = 0; i < WARM + N; i++) {
		double t0 = now_s();
		ssize_t got = 0;
		if (send(c.send_fd, b, sizeof(b), MSG_NOSIGNAL) != (ssize_t)sizeof(b))
			goto out;
		while (got < (ssize_t)sizeof(b)) {
			ssize_t n = recv(c.send_fd, b + got, sizeof(b) - (size_t)got, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				goto out;
			if (n > 0)
				got += n;
		}
		if (i >= WARM)
			t[i - WARM] = (now_s() - t0) * 1e6;
	}
	qsort(t, N, sizeof(t[0]), cmp_d);
	med = t[N / 2];
out:
	shutdown(c.send_fd, SHUT_RDWR);
	pthread_join(echo, NULL);
	close(c.send_fd);
	close(c.recv_fd);
	return med;
}

/*
 * One end of the split round trips: a thread that polls the socket (poll with a zero timeout,
 * then recv once bytes are there, as rgpu's transport does) and counts the messages in.
 */
enum { SPLIT_LEN = 96 };

struct split_end {
	int fd;
	atomic_uint got;        /* messages read whole */
};

static void *split_reader(void *arg)
{
	struct split_end *e = arg;
	char b[SPLIT_LEN];
	size_t have = 0;
	while (!atomic_load(&stop)) {
		struct pollfd pfd = {.fd = e->fd, .events = POLLIN};
		if (poll(&pfd, 1, 0) == 0)
			continue;
		ssize_t n = recv(e->fd, b + have, sizeof(b) - have, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
		if (n > 0 && (have += (size_t)n) == sizeof(b)) {
			have = 0;
			atomic_fetch_add(&e->got, 1);
		}
	}
	return NULL;
}

/* The far end's writer: answers each message its reader counted. */
static void *split_answerer(void *arg)
{
	struct split_end *e = arg;
	char b[SPLIT_LEN] = {0};
	unsigned done = 0;
	while (!atomic_load(&stop)) {
		if (atomic_load(&e->got) == done)
			continue;
		done++;
		if (send(e->fd, b, sizeof(b), MSG_NOSIGNAL) != (ssize_t)sizeof(b))
			break;
	}
	return NULL;
}

/*
 * Median split round trip (see the opening comment), in us, timed over at most 2 s after 2000
 * untimed ones; 0 when fewer than 1000 were timed in that time or an answer came a second late
 * (the CPUs were busy: four threads poll at once, the caller among them), negative when the
 * connection failed.
 */
static double rtt_split(int lfd, const struct sockaddr_in *addr)
{
	enum { N = 20000, WARM = 2000, ENOUGH = 1000 };
	static double t[N];
	struct conn c;
	struct split_end near, far;
	pthread_t th[3];
	int started = 0;
	char b[SPLIT_LEN] = {0};
	double med = -1;

	if (connect_pair(lfd, addr, &c) < 0)
		return -1;
	near.fd = c.send_fd;
	far.fd = c.recv_fd;
	atomic_init(&near.got, 0);
	atomic_init(&far.got, 0);
	atomic_store(&stop, 0);
	if (pthread_create(&th[started], NULL, split_reader, &far) == 0)
		started++;
	if (started == 1 && pthread_create(&th[started], NULL, split_answerer, &far) == 0)
		started++;
	if (started == 2 && pthread_create(&th[started], NULL, split_reader, &near) == 0)
		started++;
	if (started < 3)
		goto out;
	unsigned m = 0;
	double end = now_s() + 2;
	for (unsigned i = 0; i < WARM + N && now_s() < end; i++) {
		double t0 = now_s();
		if (send(c.send_fd, b, sizeof(b), MSG_NOSIGNAL) != (ssize_t)sizeof(b))
			goto out;
		while (atomic_load(&near.got) == i && now_s() < end + 1)
			;
		if (atomic_load(&near.got) == i) { /* a second late: too busy to measure */
			m = 0;
			break;
		}
		if (i >= WARM)
			t[m++] = (now_s() - t0) * 1e6;
	}
	qsort(t, m, sizeof(t[0]), cmp_d);
	med = m >= ENOUGH ? t[m / 2] : 0;
out:
	atomic_store(&stop, 1);
	shutdown(c.send_fd, SHUT_RDWR);
	shutdown(c.recv_fd, SHUT_RDWR);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	close(c.send_fd);
	close(c.recv_fd);
	return med;
}

/* "1,2,4,8" into counts[]; the number of them, or -1. */
static int parse_counts(const char *s, int *counts)
{
	int n = 0;
	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > MAX_STREAMS || n == MAX_COUNTS ||
		    (*end && *end != ','))
			return -1;
		counts[n++] = (int)v;
		s = *end ? end + 1 : end;
	}
	return n ? n : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tcp_ceiling [-t SECONDS] [-s STREAMS,...] [-m MiB]   (default -t 2 -s "
		"1,2,4,8; 1 to %d streams each; -m: walk through MiB of memory in all)\n",
		MAX_STREAMS);
}

int main(int argc, char **argv)
{
	int counts[MAX_COUNTS] = {1, 2, 4, 8}, ncounts = 4, opt, lfd;
	double secs = 2, best = 0;
	struct sockaddr_in addr;
	char *end;
	size_t walk = 0;

	while ((opt = getopt(argc, argv, "t:s:m:h")) != -1) {
		switch (opt) {
		case 't':
			secs = strtod(optarg, &end);
			if (end == optarg || *end || !(secs > 0 && secs <= 3600)) {
				fprintf(stderr, "tcp_ceiling: -t %s: want seconds, more than 0\n",
					optarg);
				return 2;
			}
			break;
		case 's':
			ncounts = parse_counts(optarg, counts);
			if (ncounts < 0) {
				fprintf(stderr,
					"tcp_ceiling: -s %s: want a comma-separated list of stream "
					"counts, each 1 to %d (at most %d)\n",
					optarg, MAX_STREAMS, MAX_COUNTS);
				return 2;
			}
			break;
		case 'm': {
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 4 || v > 65536) {
				fprintf(stderr, "tcp_ceiling: -m %s: want MiB, 4 to 65536\n", optarg);
				return 2;
			}
			walk = (size_t)v << 20;
			break;
		}
		default:
			usage();
			return 2;
		}
	}
	if (optind != argc) {
		usage();
		return 2;
	}
	lfd = listen_loopback(&addr);
	if (lfd < 0)
		return 1;
	for (int i = 0; i < ncounts; i++) {
		double gbs = measure(lfd, &addr, counts[i], secs, walk);
		if (gbs < 0) {
			close(lfd);
			return 1;
		}
		printf("tcp_ceiling_%s%d %.3f GB/s\n", walk ? "walk_" : "", counts[i], gbs);
		fflush(stdout);
		if (gbs > best)
			best = gbs;
	}
	if (!walk)
		printf("tcp_ceiling_best %.3f GB/s\n", best);
	double us = rtt(lfd, &addr);
	if (us < 0) {
		fprintf(stderr, "tcp_ceiling: the round trips failed\n");
		close(lfd);
		return 1;
	}
	printf("tcp_rtt_median %.2f us\n", us);
	fflush(stdout);
	/* four threads poll at once: with fewer than 4 CPUs they would take turns, not poll */
	long cpus = rgpu_cpus();
	if (cpus < 4) {
		printf("# tcp_rtt_split_median not measured: %ld CPUs, it needs 4\n", cpus);
		close(lfd);
		return 0;
	}
	us = rtt_split(lfd, &addr);
	if (us < 0) {
		fprintf(stderr, "tcp_ceiling: the split round trips failed\n");
		close(lfd);
		return 1;
	}
	if (us == 0)
		printf("# tcp_rtt_split_median not measured: fewer than 1000 timed round trips in "
		       "2 s, or one a second late (the CPUs are busy)\n");
	else
		printf("tcp_rtt_split_median %.2f us\n", us);
	close(lfd);
	return 0;
}
