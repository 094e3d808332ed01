/*
 * The TCP transport's own bulk rate, without a GPU: a link over loopback with lanes (lanes.c),
 * one thread sending MSG_MEMCPY_HTOD frames of one chunk's size back to back, walking through a
 * source buffer as a large copy walks through a program's memory, and one thread receiving
 * them into staging buffers used in turn, as a worker's reader does. Set beside tcp_ceiling
 * (the same host's plain connections, with -m the same memory walk) it tells how much of the
 * gap between rgpu's TCP copies and the ceiling lies in the transport and how much elsewhere
 * (the copy engine, the executor, the client).
 *
 *   lanes_bench [-t SECONDS] [-n CONNS,...] [-c CHUNK_MiB,...] [-m SOURCE_MiB] [-b BUFFERS]
 *       defaults: -t 2 -n 1,8 -c 4,16 -m 1024 -b 4; CONNS counts the link's own connection
 *       (8: the link and 7 lanes, rgpu's default RGPU_TCP_LANES)
 *
 * Prints one line per pair, "lanes_<conns>_<chunk>M X GB/s": the payload bytes received over the
 * time they took. The payloads are checked: each frame's first and last 8 bytes carry its seq.
 * With lanes, a comment line follows (rgpu_lanes_stats), in us per payload for each side: busy
 * (posting its stripes to the end of the last), the slowest stripe's lead over the fastest,
 * the wake-up of the thread that waited for them, and the time between payloads.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "rgpu_msgs.h"

#define MiB (1ull << 20)
enum { MAX_LIST = 16 };

struct run {
	struct rgpu_conn *cli, *srv;
	uint8_t *src;
	size_t src_len, chunk;
	double secs;
	atomic_int stop;
	int err;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* one loopback TCP connection: *a the connecting end, *b the accepted one; -1 on failure */
static int sock_pair(int lfd, int port, int *a, int *b)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1;
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("lanes_bench: connect");
		return -1;
	}
	*b = accept(lfd, NULL, NULL);
	if (*b < 0) {
		perror("lanes_bench: accept");
		close(*a);
		return -1;
	}
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* the link: conns connections, the first the link's own, the others its lanes on both ends */
static int link_open(struct run *r, int conns)
{
	int lfd, port, a, b;
	if (rgpu_tcp_listen("127.0.0.1", 0, &lfd, &port)) {
		fprintf(stderr, "lanes_bench: cannot listen on 127.0.0.1\n");
		return -1;
	}
	if (sock_pair(lfd, port, &a, &b) < 0)
		goto fail;
	r->cli = rgpu_tcp_wrap(a);
	r->srv = rgpu_tcp_wrap(b);
	if (!r->cli || !r->srv)
		goto fail;
	rgpu_conn_set_msgs(r->cli, &rgpu_job_msgs);
	rgpu_conn_set_msgs(r->srv, &rgpu_job_msgs);
	for (int k = 1; k < conns; k++) {
		if (sock_pair(lfd, port, &a, &b) < 0)
			goto fail;
		if (rgpu_lanes_attach(r->cli, k, a) || rgpu_lanes_attach(r->srv, k, b)) {
			fprintf(stderr, "lanes_bench: cannot attach lane %d\n", k);
			goto fail;
		}
	}
	if (conns > 1) {
		rgpu_lanes_ready(r->cli);
		rgpu_lanes_ready(r->srv);
	}
	close(lfd);
	return 0;
fail:
	close(lfd);
	return -1;
}

static void stamp(uint8_t *p, size_t len, uint64_t seq)
{
	memcpy(p, &seq, 8);
	memcpy(p + len - 8, &seq, 8);
}

/* frames until told to stop, then a PING that ends the receiver's loop */
static void *sender(void *arg)
{
	struct run *r = arg;
	Rgpu__Memcpy mc = RGPU__MEMCPY__INIT;
	size_t off = 0;
	uint64_t seq = 1;
	int ret = 0;

	mc.size = r->chunk;
	mc.ctx = 1;
	while (!atomic_load(&r->stop)) {
		if (off + r->chunk > r->src_len)
			off = 0;
		uint8_t *p = r->src + off;
		stamp(p, r->chunk, seq);
		mc.dst = 0x7f0000000000ull + off;
		ret = rgpu_frame_send(r->cli, RGPU_MSG_MEMCPY_HTOD, 0, seq++, 1, &mc.base, p,
				      r->chunk);
		if (ret)
			break;
		off += r->chunk;
	}
	if (!ret)
		ret = rgpu_frame_send(r->cli, RGPU_MSG_PING, 0, seq, 1, NULL, NULL, 0);
	if (ret) {
		fprintf(stderr, "lanes_bench: send: %s\n", rgpu_strerror(ret));
		r->err = 1;
		rgpu_conn_shutdown(r->cli);
	}
	return NULL;
}

/* GB/s received by the time r->secs passed; negative on failure */
static double receive(struct run *r, int nbuf)
{
	uint8_t *buf[64];
	double t0 = now_s(), gbs = -1;
	unsigned long long bytes = 0;
	int i = 0, ret;

	for (int k = 0; k < nbuf; k++)
		if (!(buf[k] = malloc(r->chunk))) {
			fprintf(stderr, "lanes_bench: out of memory\n");
			exit(1);
		}
	for (;;) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		ret = rgpu_frame_recv(r->srv, RGPU_PEER_SERVER, &h, &body);
		free(body);
		if (ret)
			break;
		if (h.type == RGPU_MSG_PING)
			break;
		uint8_t *p = buf[i++ % nbuf];
		ret = rgpu_conn_recv_payload(r->srv, p, h.payload_len);
		if (ret)
			break;
		uint64_t a, b;
		memcpy(&a, p, 8);
		memcpy(&b, p + h.payload_len - 8, 8);
		if (h.payload_len != r->chunk || a != h.seq || b != h.seq) {
			fprintf(stderr, "lanes_bench: frame %llu: wrong payload\n",
				(unsigned long long)h.seq);
			ret = RGPU_EPROTO;
			break;
		}
		if (!atomic_load(&r->stop)) {
			bytes += h.payload_len;
			double dt = now_s() - t0;
			if (dt >= r->secs) {
				gbs = bytes / dt / 1e9;
				atomic_store(&r->stop, 1);
			}
		}
	}
	if (ret) {
		fprintf(stderr, "lanes_bench: receive: %s\n", rgpu_strerror(ret));
		gbs = -1;
	}
	for (int k = 0; k < nbuf; k++)
		free(buf[k]);
	return gbs;
}

/* appends " WHO: busy B, slowest lead S, wake W, between G us;" (per payload) to out */
static void say_stats(char *out, size_t cap, const struct rgpu_lanes_stats *st, const char *who)
{
	char said[160];
	size_t at = strlen(out);
	rgpu_lanes_stats_say(st, said, sizeof(said));
	snprintf(out + at, cap - at, " %s: %s;", who, said);
}

/* GB/s, negative on failure; *why: where the time went (empty without lanes) */
static double measure(int conns, size_t chunk, size_t src_len, uint8_t *src, double secs,
		      int nbuf, char *why, size_t cap)
{
	struct run r = {.src = src, .src_len = src_len, .chunk = chunk, .secs = secs};
	pthread_t t;
	double gbs = -1;

	atomic_init(&r.stop, 0);
	if (link_open(&r, conns) < 0)
		goto out;
	if (pthread_create(&t, NULL, sender, &r)) {
		fprintf(stderr, "lanes_bench: cannot start a thread\n");
		goto out;
	}
	gbs = receive(&r, nbuf);
	if (gbs < 0) {
		atomic_store(&r.stop, 1);
		rgpu_conn_shutdown(r.srv);
	}
	pthread_join(t, NULL);
	if (r.err)
		gbs = -1;
	if (gbs > 0 && conns > 1) {
		/* where each payload's time went, in us: a comment line beside the result */
		struct rgpu_lanes_stats tx, rx;
		rgpu_lanes_stats(r.cli, 0, &tx);
		rgpu_lanes_stats(r.srv, 1, &rx);
		snprintf(why, cap, "# lanes_%d_%zuM per payload:", conns, chunk >> 20);
		say_stats(why, cap, &tx, "sender");
		say_stats(why, cap, &rx, "receiver");
	}
out:
	rgpu_conn_close(r.cli);
	rgpu_conn_close(r.srv);
	return gbs;
}

static int parse_list(const char *s, long *out, long max)
{
	int n = 0;
	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > max || n == MAX_LIST || (*end && *end != ','))
			return -1;
		out[n++] = v;
		s = *end ? end + 1 : end;
	}
	return n ? n : -1;
}

static int usage(void)
{
	fprintf(stderr, "usage: lanes_bench [-t SECONDS] [-n CONNS,...] [-c CHUNK_MiB,...] "
			"[-m SOURCE_MiB] [-b BUFFERS]\n"
			"  (defaults -t 2 -n 1,8 -c 4,16 -m 1024 -b 4; CONNS 1 to %d, CHUNK_MiB 1 "
			"to %llu (one frame's payload), BUFFERS 1 to 64)\n",
		RGPU_MAX_LANES, (unsigned long long)(RGPU_MAX_CHUNK / MiB));
	return 2;
}

int main(int argc, char **argv)
{
	long conns[MAX_LIST] = {1, 8}, chunks[MAX_LIST] = {4, 16}, src_mib = 1024, nbuf = 4;
	int nconns = 2, nchunks = 2, opt, failed = 0;
	double secs = 2;
	char *end;

	while ((opt = getopt(argc, argv, "t:n:c:m:b:h")) != -1) {
		switch (opt) {
		case 't':
			secs = strtod(optarg, &end);
			if (end == optarg || *end || !(secs > 0 && secs <= 3600))
				return usage();
			break;
		case 'n':
			if ((nconns = parse_list(optarg, conns, RGPU_MAX_LANES)) < 0)
				return usage();
			break;
		case 'c':
			if ((nchunks = parse_list(optarg, chunks, (long)(RGPU_MAX_CHUNK / MiB))) < 0)
				return usage();
			break;
		case 'm':
			src_mib = strtol(optarg, &end, 10);
			if (end == optarg || *end || src_mib < 1 || src_mib > 65536)
				return usage();
			break;
		case 'b':
			nbuf = strtol(optarg, &end, 10);
			if (end == optarg || *end || nbuf < 1 || nbuf > 64)
				return usage();
			break;
		default:
			return usage();
		}
	}
	if (optind != argc)
		return usage();
	size_t src_len = (size_t)src_mib * MiB;
	for (int j = 0; j < nchunks; j++)
		if ((size_t)chunks[j] * MiB > src_len)
			src_len = (size_t)chunks[j] * MiB;
	uint8_t *src = malloc(src_len);
	if (!src) {
		fprintf(stderr, "lanes_bench: out of memory (%zu bytes)\n", src_len);
		return 1;
	}
	memset(src, 0x5a, src_len); /* touched: the walk reads memory, not the zero page */
	for (int i = 0; i < nconns; i++)
		for (int j = 0; j < nchunks; j++) {
			char why[512] = "";
			double g = measure((int)conns[i], (size_t)chunks[j] * MiB, src_len, src,
					   secs, (int)nbuf, why, sizeof(why));
			if (g < 0)
				failed = 1;
			else
				printf("lanes_%ld_%ldM %.2f GB/s\n%s%s", conns[i], chunks[j], g, why,
				       *why ? "\n" : "");
			fflush(stdout);
		}
	free(src);
	return failed;
}
