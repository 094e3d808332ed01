/*
 * Resuming a job by hand, as a client would after a broken link (run by with_server.sh with
 * --resume-grace 1):
 *   - a resume with a wrong token is refused with MSG_ERROR (and logged by the worker);
 *   - a resume with the right token succeeds, says how far the worker got, and hands out a new
 *     token; a frame sent before the break is not executed twice;
 *   - once the client has spoken on the new link, the old token is refused;
 *   - a resume of a job id that does not exist is refused;
 *   - with the client gone, the job's worker is gone within 1 s of the grace period's end.
 *
 * Usage: resume   (RGPU_E2E_PORT, RGPU_E2E_PID and RGPU_E2E_LOGFILE come from with_server.sh)
 *
 *        resume moved JOB ADDR   (migrate.sh: RGPU_E2E_PORT is the server job JOB, 32 hex
 *                                 digits, moved away from) a resume of JOB there is answered
 *                                 with MSG_REDIRECT naming ADDR, whatever the token
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu_msgs.h"

#define FAIL(...)                                                                              \
	do {                                                                                   \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                         \
		fputc('\n', stderr);                                                           \
		exit(1);                                                                       \
	} while (0)

static int port;
static uint8_t job[16], token[32];
static uint64_t session;

static struct rgpu_conn *dial(void)
{
	struct rgpu_conn *c;
	if (rgpu_tcp_connect("127.0.0.1", port, 5000, &c))
		FAIL("cannot connect to port %d", port);
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	return c;
}

/* Send a hello (a resume when job_id is given); returns the reply, or NULL after MSG_ERROR. */
static Rgpu__HelloReply *hello(struct rgpu_conn *c, const uint8_t *job_id, const uint8_t *tok,
			       uint64_t received, char *err, size_t errlen)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	Rgpu__HelloReply *rep = NULL;

	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "resume-test";
	if (job_id) {
		hm.job_id.data = (uint8_t *)job_id;
		hm.job_id.len = 16;
		hm.resume_token.data = (uint8_t *)tok;
		hm.resume_token.len = 32;
		hm.received = received;
	}
	if (rgpu_frame_send(c, RGPU_MSG_HELLO, 0, 0, 0, &hm.base, NULL, 0) ||
	    rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
		FAIL("no answer to a hello");
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
		snprintf(err, errlen, "%s", pe && pe->message ? pe->message : "?");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		free(body);
		return NULL;
	}
	if (h.type == RGPU_MSG_HELLO)
		rep = rgpu__hello_reply__unpack(NULL, h.body_len, body);
	free(body);
	if (!rep || rep->result != 0 || rep->job_id.len != 16 || rep->resume_token.len != 32)
		FAIL("bad hello reply");
	return rep;
}

/* A PING as request seq; returns the reply's header (ack = executed through). */
static struct rgpu_frame_hdr ping(struct rgpu_conn *c, uint64_t seq)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	if (rgpu_frame_send(c, RGPU_MSG_PING, 0, seq, session, NULL, NULL, 0))
		FAIL("cannot send a ping");
	do {
		free(body);
		body = NULL;
		if (rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
			FAIL("no reply to ping %llu", (unsigned long long)seq);
	} while (h.seq == 0); /* skip acknowledgements */
	free(body);
	if (h.type != RGPU_MSG_PING || !(h.flags & RGPU_FRAME_REPLY) || h.ref != seq)
		FAIL("ping %llu answered by type %u ref %llu", (unsigned long long)seq, h.type,
		     (unsigned long long)h.ref);
	return h;
}

static int log_has(const char *what)
{
	const char *path = getenv("RGPU_E2E_LOGFILE");
	char line[1024];
	int found = 0;
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		FAIL("no rgpud log (RGPU_E2E_LOGFILE)");
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	fclose(f);
	return found;
}

static int workers(void)
{
	char cmd[128];
	int n = -1;
	snprintf(cmd, sizeof(cmd), "pgrep -P %s | wc -l", getenv("RGPU_E2E_PID"));
	FILE *p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &n) != 1)
		n = -1;
	if (p)
		pclose(p);
	return n;
}

/* The first child of rgpud (the job's worker, once greeters are gone): its pid, or 0. */
static int worker_pid(void)
{
	char cmd[128];
	int pid = 0;
	snprintf(cmd, sizeof(cmd), "pgrep -P %s | head -1", getenv("RGPU_E2E_PID"));
	FILE *p = popen(cmd, "r");
	if (p && fscanf(p, "%d", &pid) != 1)
		pid = 0;
	if (p)
		pclose(p);
	return pid;
}

/* CPU time a process used so far, in clock ticks (utime + stime), or -1. */
static long cpu_ticks(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL; /* the command name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* resume moved JOB ADDR: the server sends a client of a job that moved away on to ADDR */
static int moved(const char *hex, const char *want)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	Rgpu__Redirect *rd;
	struct rgpu_frame_hdr h;
	struct rgpu_conn *c = dial();
	uint8_t *body = NULL;

	if (strlen(hex) != 32)
		FAIL("a job id is 32 hex digits: %s", hex);
	for (int i = 0; i < 16; i++)
		if (sscanf(hex + 2 * i, "%2hhx", &job[i]) != 1)
			FAIL("a job id is 32 hex digits: %s", hex);
	memset(token, 0x5a, sizeof(token));
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "resume-test";
	hm.job_id.data = job;
	hm.job_id.len = 16;
	hm.resume_token.data = token;
	hm.resume_token.len = 32;
	if (rgpu_frame_send(c, RGPU_MSG_HELLO, 0, 0, 0, &hm.base, NULL, 0) ||
	    rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
		FAIL("no answer to the resume of a moved job");
	if (h.type != RGPU_MSG_REDIRECT)
		FAIL("the resume of a moved job was answered by type %u, not MSG_REDIRECT", h.type);
	rd = rgpu__redirect__unpack(NULL, h.body_len, body);
	if (!rd || !rd->server || strcmp(rd->server, want))
		FAIL("redirected to %s, not %s", rd && rd->server ? rd->server : "nothing", want);
	printf("resume of moved job %s: redirected to %s (%s)\n", hex, rd->server,
	       rd->reason ? rd->reason : "");
	rgpu__redirect__free_unpacked(rd, NULL);
	free(body);
	rgpu_conn_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	const char *p = getenv("RGPU_E2E_PORT");
	struct rgpu_conn *c;
	Rgpu__HelloReply *rep;
	struct rgpu_frame_hdr h;
	uint8_t old_token[32], bad[32];
	char err[256];

	if (argc == 4 && !strcmp(argv[1], "moved") && p) {
		port = atoi(p);
		return moved(argv[2], argv[3]);
	}
	if (!p || !getenv("RGPU_E2E_PID"))
		FAIL("run me with with_server.sh");
	port = atoi(p);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * A resume at once after the hello reply, before the job has run anything: the worker
	 * must have told the supervisor of its job before the reply went out, or the resume finds
	 * "no job" (the sanitizer suite's cut.rt_symbols_static lost a job so). Its grace period
	 * ends it (a goodbye without a synchronising call fails with_server.sh's log check), and
	 * it is gone before the cases below count workers.
	 */
	c = dial();
	rep = hello(c, NULL, NULL, 0, err, sizeof(err));
	memcpy(job, rep->job_id.data, 16);
	memcpy(token, rep->resume_token.data, 32);
	session = rep->session_id;
	rgpu__hello_reply__free_unpacked(rep, NULL);
	rgpu_conn_close(c);
	c = dial();
	rep = hello(c, job, token, 0, err, sizeof(err));
	if (!rep)
		FAIL("a resume at once after the hello reply was refused: %s", err);
	if (!rep->resumed || rep->received != 0)
		FAIL("resumed %d received %llu, want 1 and 0", rep->resumed,
		     (unsigned long long)rep->received);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	ping(c, 1);
	rgpu_conn_close(c);
	for (int i = 0; i < 150 && workers() > 0; i++)
		usleep(20000);
	if (workers() != 0)
		FAIL("the first job's worker still runs 3 s after its link broke (grace 1 s)");
	printf("  resume right after hello   -> resumed, ping answered\n");

	/* a new job, two pings, then the link breaks */
	c = dial();
	rep = hello(c, NULL, NULL, 0, err, sizeof(err));
	memcpy(job, rep->job_id.data, 16);
	memcpy(token, rep->resume_token.data, 32);
	session = rep->session_id;
	if (rep->resume_grace_s != 1)
		FAIL("grace %u s, want 1 (run with --resume-grace 1)", rep->resume_grace_s);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	h = ping(c, 1);
	h = ping(c, 2);
	if (h.ack != 2 || h.seq != 2)
		FAIL("after two pings: ack %llu seq %llu, want 2 and 2", (unsigned long long)h.ack,
		     (unsigned long long)h.seq);
	rgpu_conn_close(c);

	/* a wrong token */
	memcpy(bad, token, 32);
	bad[31] ^= 1;
	c = dial();
	if (hello(c, job, bad, 2, err, sizeof(err)))
		FAIL("a resume with a wrong token was accepted");
	rgpu_conn_close(c);
	printf("  wrong token                -> refused: %s\n", err);

	/* an unknown job */
	c = dial();
	uint8_t nojob[16] = {1, 2, 3};
	if (hello(c, nojob, token, 0, err, sizeof(err)))
		FAIL("a resume of an unknown job was accepted");
	rgpu_conn_close(c);
	printf("  unknown job                -> refused: %s\n", err);

	/* the right token: the worker received through 2; a new token */
	c = dial();
	rep = hello(c, job, token, 2, err, sizeof(err));
	if (!rep)
		FAIL("the right token was refused: %s", err);
	if (!rep->resumed || rep->received != 2)
		FAIL("resumed %d received %llu, want 1 and 2", rep->resumed,
		     (unsigned long long)rep->received);
	if (memcmp(rep->resume_token.data, token, 32) == 0)
		FAIL("the token was not renewed");
	memcpy(old_token, token, 32);
	memcpy(token, rep->resume_token.data, 32);
	rgpu__hello_reply__free_unpacked(rep, NULL);
	/* a duplicate of ping 2 is dropped; ping 3 is executed and answered */
	if (rgpu_frame_send(c, RGPU_MSG_PING, 0, 2, session, NULL, NULL, 0))
		FAIL("cannot resend ping 2");
	h = ping(c, 3);
	if (h.ack != 3 || h.seq != 3)
		FAIL("after the resume: ack %llu seq %llu, want 3 and 3",
		     (unsigned long long)h.ack, (unsigned long long)h.seq);
	printf("  right token                -> resumed at seq 2, duplicate dropped, ping 3 answered\n");
	rgpu_conn_close(c);

	/* the old token, now that the client has spoken on the new link */
	c = dial();
	if (hello(c, job, old_token, 3, err, sizeof(err)))
		FAIL("an already-used token was accepted");
	rgpu_conn_close(c);
	printf("  already-used token         -> refused: %s\n", err);
	/* rgpud's log is written by other processes: give it up to 2 s under a loaded machine */
	for (int i = 0; i < 100 && !(log_has("refused a resume") &&
				     log_has("wrong or already-used resume token") &&
				     log_has("no job 01020300")); i++)
		usleep(20000);
	if (!log_has("refused a resume") || !log_has("wrong or already-used resume token") ||
	    !log_has("no job 01020300"))
		FAIL("the refusals are not in rgpud's log");

	/* the client is gone: the grace period (1 s) passes, then the worker must go */
	double t0 = now_s();
	/* while it waits, the worker sleeps: well under a tenth of the CPU */
	int pid = worker_pid();
	long c0 = pid ? cpu_ticks(pid) : -1;
	usleep(400000);
	long c1 = pid ? cpu_ticks(pid) : -1;
	long hz = sysconf(_SC_CLK_TCK);
	if (c0 >= 0 && c1 >= 0) {
		if ((c1 - c0) * 10 > hz * 4 / 10)
			FAIL("the waiting worker used %ld clock ticks in 0.4 s (%ld ticks is all of it; "
			     "a tenth is the limit)", c1 - c0, hz * 4 / 10);
		printf("  waiting for the client       -> worker used %ld clock tick(s) in 0.4 s\n",
		       c1 - c0);
	}
	while (workers() > 0) {
		if (now_s() - t0 > 1.0 + 1.0)
			FAIL("the job's worker still runs %.1f s after the link broke (grace 1 s)",
			     now_s() - t0);
		usleep(20000);
	}
	printf("  grace period over          -> worker gone %.2f s after the last link broke\n",
	       now_s() - t0);
	for (int i = 0; i < 100 && !log_has("did not come back within 1 s"); i++)
		usleep(20000);
	if (!log_has("did not come back within 1 s"))
		FAIL("the expiry is not in rgpud's log");
	printf("resume: OK\n");
	return 0;
}
