/*
 * Authentication by hand, with raw frames, against an rgpud started with --keys (run by
 * auth_cases.sh under with_server.sh). The key directory holds alice.key and bob.key.
 *
 *   auth replay KEYDIR   a handshake as tenant alice succeeds and the server's proof checks
 *                        (a MSG_AUTH after it is a protocol error);
 *                        the same Hello (same client nonce) and the recorded answer sent again
 *                        on a new connection meet another server nonce and are refused with
 *                        CUDA_ERROR_NOT_PERMITTED, whether the answer is sent after the
 *                        challenge or blindly, before it.
 *   auth resume KEYDIR   (--resume-grace of a few seconds) alice's job, its link broken: a
 *                        resume by bob, with bob's right key and alice's job id and token, is
 *                        refused ("another tenant"); one with no credentials is refused before
 *                        routing; then alice resumes with the same token, and gets the server's
 *                        proof.
 *
 *   auth hostile         (rgpud --keys --hello-timeout 1) a client that never answers the
 *                        challenge gets MSG_ERROR at the deadline; a 5-byte MAC, and a PING in
 *                        MSG_AUTH's place, are protocol errors.
 *
 * Exit 0 when every case behaved, 1 with a FAIL line otherwise. RGPU_E2E_PORT from with_server.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cuda.h>

#include "rgpu.pb-c.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/transport.h"
#include "rgpu_msgs.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

static int port;

static struct rgpu_conn *dial(void)
{
	struct rgpu_conn *c;
	if (rgpu_tcp_connect("127.0.0.1", port, 5000, &c))
		FAIL("cannot connect to port %d", port);
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	return c;
}

static void load(const char *dir, const char *tenant, struct rgpu_key *k)
{
	char path[512], why[600];
	snprintf(path, sizeof(path), "%s/%s.key", dir, tenant);
	if (rgpu_key_load(path, k, why, sizeof(why)))
		FAIL("%s", why);
}

/* What one handshake saw. */
struct hs {
	uint8_t cnonce[32], snonce[32], mac[32];
	int challenged;
	int result; /* HelloReply.result, or -1 for MSG_ERROR */
	char error[512];
	Rgpu__HelloReply *rep;
};

/*
 * A Hello as tenant (NULL: none) with cnonce; the challenge answered with key's MAC, or with
 * replay_mac when given; blind: the answer goes out before the challenge is read. A resume
 * when job is given.
 */
static void handshake(struct rgpu_conn *c, const char *tenant, const struct rgpu_key *key,
		      const uint8_t *cnonce, const uint8_t *replay_mac, int blind,
		      const uint8_t *job, const uint8_t *tok, uint64_t session, struct hs *out)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;

	memset(out, 0, sizeof(*out));
	memcpy(out->cnonce, cnonce, 32);
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.client_program = "auth-test";
	if (tenant) {
		hm.tenant = (char *)tenant;
		hm.client_nonce.data = out->cnonce;
		hm.client_nonce.len = 32;
	}
	if (job) {
		hm.job_id.data = (uint8_t *)job;
		hm.job_id.len = 16;
		hm.resume_token.data = (uint8_t *)tok;
		hm.resume_token.len = 32;
	}
	if (rgpu_frame_send(c, RGPU_MSG_HELLO, 0, 0, job ? session : 0, &hm.base, NULL, 0))
		FAIL("cannot send a hello");
	ar.mac.data = out->mac;
	ar.mac.len = 32;
	if (blind) {
		memcpy(out->mac, replay_mac, 32);
		if (rgpu_frame_send(c, RGPU_MSG_AUTH, 0, 0, 0, &ar.base, NULL, 0))
			FAIL("cannot send a blind answer");
	}
	for (;;) {
		free(body);
		body = NULL;
		if (rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
			FAIL("no answer in the handshake");
		if (h.type != RGPU_MSG_AUTH_CHALLENGE)
			break;
		Rgpu__AuthChallenge *ch = rgpu__auth_challenge__unpack(NULL, h.body_len, body);
		if (!ch || ch->server_nonce.len != 32)
			FAIL("a bad challenge");
		if (out->challenged)
			FAIL("two challenges");
		out->challenged = 1;
		memcpy(out->snonce, ch->server_nonce.data, 32);
		rgpu__auth_challenge__free_unpacked(ch, NULL);
		if (blind)
			continue;
		if (replay_mac)
			memcpy(out->mac, replay_mac, 32);
		else
			rgpu_auth_mac(key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, tenant,
				      out->snonce, out->cnonce, out->mac);
		if (rgpu_frame_send(c, RGPU_MSG_AUTH, 0, 0, 0, &ar.base, NULL, 0))
			FAIL("cannot send the answer");
	}
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
		out->result = -1;
		snprintf(out->error, sizeof(out->error), "%s",
			 pe && pe->message ? pe->message : "?");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
	} else if (h.type == RGPU_MSG_HELLO && (h.flags & RGPU_FRAME_REPLY)) {
		out->rep = rgpu__hello_reply__unpack(NULL, h.body_len, body);
		if (!out->rep)
			FAIL("an undecodable HelloReply");
		out->result = out->rep->result;
		snprintf(out->error, sizeof(out->error), "%s",
			 out->rep->error ? out->rep->error : "");
	} else {
		FAIL("the handshake answered with %s", rgpu_msg_name(h.type));
	}
	free(body);
}

/* The reply carries the server's proof for this handshake. */
static void check_proof(const struct hs *s, const struct rgpu_key *key, const char *tenant)
{
	uint8_t want[32];
	rgpu_auth_mac(key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION, tenant, s->snonce, s->cnonce,
		      want);
	if (!s->rep || s->rep->server_proof.len != 32 ||
	    memcmp(s->rep->server_proof.data, want, 32))
		FAIL("the server's proof is missing or wrong");
}

static void goodbye(struct rgpu_conn *c, uint64_t seq, uint64_t session)
{
	if (rgpu_frame_send(c, RGPU_MSG_GOODBYE, 0, seq, session, NULL, NULL, 0))
		FAIL("cannot say goodbye");
}

static int replay(const char *dir)
{
	struct rgpu_key alice;
	struct hs a, b, d;
	uint8_t cnonce[32];
	struct rgpu_conn *c;

	load(dir, "alice", &alice);
	if (getrandom(cnonce, 32, 0) != 32)
		FAIL("getrandom");
	/* the genuine handshake, recorded */
	c = dial();
	handshake(c, "alice", &alice, cnonce, NULL, 0, NULL, NULL, 0, &a);
	if (!a.challenged || a.result != CUDA_SUCCESS)
		FAIL("alice's own handshake: challenged %d, result %d (%s)", a.challenged, a.result,
		     a.error);
	check_proof(&a, &alice, "alice");
	/* MSG_AUTH belongs to the handshake only: afterwards it is a protocol error */
	{
		Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		ar.mac.data = a.mac;
		ar.mac.len = 32;
		if (rgpu_frame_send(c, RGPU_MSG_AUTH, 0, 1, a.rep->session_id, &ar.base, NULL, 0))
			FAIL("cannot send a late MSG_AUTH");
		do {
			free(body);
			body = NULL;
			if (rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
				FAIL("no MSG_ERROR for a MSG_AUTH after the handshake");
		} while (h.type == RGPU_MSG_ACK);
		free(body);
		if (h.type != RGPU_MSG_ERROR)
			FAIL("a MSG_AUTH after the handshake got %s", rgpu_msg_name(h.type));
	}
	rgpu_conn_close(c);
	/* the same Hello and the same answer on a new connection: another nonce, refused */
	c = dial();
	handshake(c, "alice", NULL, cnonce, a.mac, 0, NULL, NULL, 0, &b);
	rgpu_conn_close(c);
	if (!b.challenged)
		FAIL("the replay was not challenged");
	if (!memcmp(a.snonce, b.snonce, 32))
		FAIL("the server sent the same nonce twice");
	if (b.result != CUDA_ERROR_NOT_PERMITTED)
		FAIL("a replayed answer got result %d (%s), want %d", b.result, b.error,
		     CUDA_ERROR_NOT_PERMITTED);
	if (b.rep->server_proof.len || b.rep->n_devices)
		FAIL("a refusal carried a proof or devices");
	if (!strstr(b.error, "authentication failed for tenant 'alice'"))
		FAIL("the refusal says '%s'", b.error);
	/* sent blindly, before the challenge */
	c = dial();
	handshake(c, "alice", NULL, cnonce, a.mac, 1, NULL, NULL, 0, &d);
	rgpu_conn_close(c);
	if (d.result != CUDA_ERROR_NOT_PERMITTED || !memcmp(d.snonce, a.snonce, 32))
		FAIL("a blind replay got result %d (%s)", d.result, d.error);
	rgpu__hello_reply__free_unpacked(a.rep, NULL);
	rgpu__hello_reply__free_unpacked(b.rep, NULL);
	rgpu__hello_reply__free_unpacked(d.rep, NULL);
	printf("auth replay: the genuine handshake served with a right proof; its replay refused "
	       "(%d) twice, each time under a new server nonce\n",
	       CUDA_ERROR_NOT_PERMITTED);
	return 0;
}

static int resume(const char *dir)
{
	struct rgpu_key alice, bob;
	struct hs a, b, n, r;
	uint8_t cnonce[32], job[16], tok[32];
	uint64_t session;
	struct rgpu_conn *c;

	load(dir, "alice", &alice);
	load(dir, "bob", &bob);
	getrandom(cnonce, 32, 0);
	c = dial();
	handshake(c, "alice", &alice, cnonce, NULL, 0, NULL, NULL, 0, &a);
	if (a.result != CUDA_SUCCESS)
		FAIL("alice's session: %d (%s)", a.result, a.error);
	memcpy(job, a.rep->job_id.data, 16);
	memcpy(tok, a.rep->resume_token.data, 32);
	session = a.rep->session_id;
	rgpu__hello_reply__free_unpacked(a.rep, NULL);
	rgpu_conn_close(c); /* a broken link: the job waits for a resume */
	usleep(200 * 1000);

	/* bob, authenticated with his own right key, presents alice's job and token */
	getrandom(cnonce, 32, 0);
	c = dial();
	handshake(c, "bob", &bob, cnonce, NULL, 0, job, tok, session, &b);
	rgpu_conn_close(c);
	if (!b.challenged || b.result != -1 || !strstr(b.error, "another tenant"))
		FAIL("bob's resume of alice's job: result %d (%s)", b.result, b.error);
	/* no credentials at all: refused before the resume is routed */
	c = dial();
	handshake(c, NULL, NULL, cnonce, NULL, 0, job, tok, session, &n);
	rgpu_conn_close(c);
	if (n.challenged || n.result != -1 || !strstr(n.error, "requires authentication"))
		FAIL("a resume without credentials: result %d (%s)", n.result, n.error);
	/* alice herself, with the same token: resumed */
	getrandom(cnonce, 32, 0);
	c = dial();
	handshake(c, "alice", &alice, cnonce, NULL, 0, job, tok, session, &r);
	if (r.result != CUDA_SUCCESS || !r.rep->resumed)
		FAIL("alice's resume: result %d (%s)", r.result, r.error);
	check_proof(&r, &alice, "alice");
	rgpu__hello_reply__free_unpacked(r.rep, NULL);
	goodbye(c, 1, session);
	rgpu_conn_close(c);
	printf("auth resume: bob's resume of alice's job refused (%s); one without credentials "
	       "refused (%s); alice resumed it with the same token\n",
	       b.error, n.error);
	return 0;
}

/* A Hello as alice, then the challenge: returns the connection, the challenge read. */
static struct rgpu_conn *challenged(void)
{
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL, cn[32] = {1};
	struct rgpu_conn *c = dial();

	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.tenant = "alice";
	hm.client_nonce.data = cn;
	hm.client_nonce.len = 32;
	if (rgpu_frame_send(c, RGPU_MSG_HELLO, 0, 0, 0, &hm.base, NULL, 0) ||
	    rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000) ||
	    h.type != RGPU_MSG_AUTH_CHALLENGE)
		FAIL("no challenge");
	free(body);
	return c;
}

/* The next frame must be MSG_ERROR with code (0: any); returns after at most 10 s. */
static void expect_error(struct rgpu_conn *c, int code, const char *what)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	Rgpu__ProtocolError *pe;

	if (rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, 10000))
		FAIL("%s: no answer", what);
	if (h.type != RGPU_MSG_ERROR)
		FAIL("%s: answered by %s", what, rgpu_msg_name(h.type));
	pe = rgpu__protocol_error__unpack(NULL, h.body_len, body);
	if (!pe || (code && pe->code != code))
		FAIL("%s: code %d (%s), want %d", what, pe ? pe->code : 0,
		     pe && pe->message ? pe->message : "?", code);
	printf("auth hostile: %s: MSG_ERROR %d (%s)\n", what, pe->code, pe->message);
	rgpu__protocol_error__free_unpacked(pe, NULL);
	free(body);
}

/*
 * rgpud --keys with a short --hello-timeout: a client that never answers the challenge is cut
 * at the deadline; a short MAC and another frame in MSG_AUTH's place are protocol errors.
 */
static int hostile(void)
{
	Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
	uint8_t mac[5] = {0};
	struct rgpu_conn *c = challenged();

	expect_error(c, 0, "no answer to the challenge");
	rgpu_conn_close(c);
	c = challenged();
	ar.mac.data = mac;
	ar.mac.len = sizeof(mac);
	if (rgpu_frame_send(c, RGPU_MSG_AUTH, 0, 0, 0, &ar.base, NULL, 0))
		FAIL("send");
	expect_error(c, RGPU_EPROTO, "a 5-byte MAC");
	rgpu_conn_close(c);
	c = challenged();
	if (rgpu_frame_send(c, RGPU_MSG_PING, 0, 1, 0, NULL, NULL, 0))
		FAIL("send");
	expect_error(c, RGPU_EPROTO, "a PING in place of MSG_AUTH");
	rgpu_conn_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	const char *p = getenv("RGPU_E2E_PORT");
	if (!p || argc < 2) {
		fprintf(stderr, "usage: auth replay|resume KEYDIR | hostile (RGPU_E2E_PORT set)\n");
		return 2;
	}
	port = atoi(p);
	if (!strcmp(argv[1], "hostile"))
		return hostile();
	if (argc != 3)
		return 2;
	if (!strcmp(argv[1], "replay"))
		return replay(argv[2]);
	if (!strcmp(argv[1], "resume"))
		return resume(argv[2]);
	return 2;
}
