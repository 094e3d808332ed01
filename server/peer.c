/*
 * Copies between two servers' workers (capability PEER_COPY; docs/protocol.md, "Devices of
 * several servers"): a device-to-device copy whose sides are jobs of one client on two servers
 * goes from the source's worker straight to the destination's, not through the client.
 *
 * The destination's side: a *peer link* is a connection from another server's worker that
 * presented this job's id and peer token in its Hello (worker.c routes it here as a resume is
 * routed, and checks the token). Each link has a reader thread of its own that takes only
 * MSG_PEER_DATA frames and queues their payloads, per copy id and in arrival order, until the
 * executor's MSG_PEER_RECV writes them to the device. A link's reader stops reading while more
 * than SRV_PEER_MAX_QUEUED bytes wait on it, so a fast source waits in TCP and one link never
 * holds another. The source's side: MSG_PEER_SEND reads the device through pinned staging
 * buffers and writes MSG_PEER_DATA frames on a link it opens and keeps per (target, job).
 *
 * What this file must never do: trust an offset, a size or an id from a peer (a frame that does
 * not continue its copy exactly drops its link), let one link's queue grow without bound, or
 * block the executor without a timeout on a peer that went silent.
 */
#define LOG_PREFIX "peer: "
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

#define PEER_TIMEOUT_MS_DEFAULT 60000
#define PEER_MAX_LINKS 64 /* links into one job at once: one per source job, with room */

/* One MSG_PEER_DATA payload, waiting for the executor. */
struct peer_chunk {
	struct peer_chunk *next;
	uint64_t off;
	size_t len;
	void *data;
};

/* A copy whose bytes are arriving on a link. */
struct peer_copy {
	struct peer_copy *next;
	uint64_t id;
	uint64_t next_off; /* where the next frame must start */
	uint64_t size;	   /* its MSG_PEER_RECV's size; UINT64_MAX until that runs */
	struct peer_chunk *head, *tail;
};

/* A link into this job from another server's worker. */
struct srv_plink {
	struct srv_plink *next;
	struct srv_worker *w;
	struct rgpu_conn *c; /* freed only with the link, after its reader was joined */
	pthread_t reader;
	int starting; /* added, its reader not started yet: not to be reaped */
	int has_reader;
	char src[96];	  /* the source's address, for logs */
	uint64_t session; /* what its frames must carry */
	uint64_t queued;  /* payload bytes waiting for the executor */
	int paused;	  /* its reader waits for room (said once per pause at debug) */
	int ended;	  /* its reader is done: nothing more comes on it */
	int broke;	  /* ... for a reason other than the source closing it */
	char why[160];	  /* why it ended */
	struct peer_copy *copies;
};

/* A link this job opened to another server's job, to send it copies (executor only). */
struct peer_out {
	struct peer_out *next;
	char to[256];
	uint8_t job[SRV_JOB_ID_LEN];
	uint8_t token[SRV_TOKEN_LEN];
	struct rgpu_conn *c;
	uint64_t session, seq;
};

struct srv_peer {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast at every change: a chunk, room, a link's end */
	struct srv_plink *links;
	int nlinks;
	int closing;  /* the job ends: no new link, every wait returns */
	void *done;   /* ids of copies received whole (tsearch of uint64_t *) */
	void *failed; /* ids of copies whose MSG_PEER_RECV failed */
	uint64_t max_queued;
	int timeout_ms;
	struct peer_out *out; /* executor only */
};

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int id_in(void *const *tree, uint64_t id)
{
	return tfind(&id, tree, id_cmp) != NULL;
}

/* Remember id in tree; out of memory, it is forgotten (a late frame for it then starts a new
 * copy that nobody takes, freed at the job's end). */
static void id_add(void **tree, uint64_t id)
{
	uint64_t *k = malloc(sizeof(*k)), **got;

	if (!k)
		return;
	*k = id;
	got = tsearch(k, tree, id_cmp);
	if (!got || *got != k)
		free(k);
}

int srv_peer_token_new(struct srv_worker *w)
{
	return getrandom(w->peer_token, SRV_TOKEN_LEN, 0) == SRV_TOKEN_LEN ? 0 : RGPU_ESYS;
}

int srv_peer_init(struct srv_worker *w, uint64_t max_queued)
{
	struct srv_peer *p = calloc(1, sizeof(*p));
	const char *env = getenv("RGPU_PEER_TIMEOUT_MS");

	if (!p)
		return RGPU_ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->max_queued = max_queued ? max_queued : SRV_PEER_MAX_QUEUED;
	p->timeout_ms = PEER_TIMEOUT_MS_DEFAULT;
	if (env && *env) {
		char *end;
		long v = strtol(env, &end, 10);
		if (*end || v <= 0 || v > 24 * 3600 * 1000L)
			pr_warn("RGPU_PEER_TIMEOUT_MS=%s is not in 1..86400000 ms; using %d", env,
				PEER_TIMEOUT_MS_DEFAULT);
		else
			p->timeout_ms = (int)v;
	}
	w->peer_links = p;
	return 0;
}

static void copy_free(struct srv_plink *l, struct peer_copy *cp)
{
	while (cp->head) {
		struct peer_chunk *ch = cp->head;
		cp->head = ch->next;
		l->queued -= ch->len;
		free(ch->data);
		free(ch);
	}
	free(cp);
}

/* Unlink and free l's copy cp (lock held). */
static void copy_drop(struct srv_plink *l, struct peer_copy *cp)
{
	for (struct peer_copy **pp = &l->copies; *pp; pp = &(*pp)->next) {
		if (*pp == cp) {
			*pp = cp->next;
			break;
		}
	}
	copy_free(l, cp);
}

static void link_free(struct srv_plink *l)
{
	while (l->copies) {
		struct peer_copy *cp = l->copies;
		l->copies = cp->next;
		copy_free(l, cp);
	}
	rgpu_conn_close(l->c);
	free(l);
}

/*
 * Links whose reader ended and that hold no copy any more go: their reader joined, their
 * connection closed. Any thread but a reader's; takes the lock itself.
 */
static void reap(struct srv_peer *p)
{
	struct srv_plink *gone = NULL;

	pthread_mutex_lock(&p->lock);
	for (struct srv_plink **pp = &p->links; *pp;) {
		struct srv_plink *l = *pp;
		if (l->ended && !l->copies && !l->starting) {
			*pp = l->next;
			p->nlinks--;
			l->next = gone;
			gone = l;
		} else {
			pp = &l->next;
		}
	}
	pthread_mutex_unlock(&p->lock);
	while (gone) {
		struct srv_plink *l = gone;
		gone = l->next;
		if (l->has_reader)
			pthread_join(l->reader, NULL);
		link_free(l);
	}
}

/* The copy named id on any link (lock held); its link in *lp. */
static struct peer_copy *find_copy(struct srv_peer *p, uint64_t id, struct srv_plink **lp)
{
	for (struct srv_plink *l = p->links; l; l = l->next)
		for (struct peer_copy *cp = l->copies; cp; cp = cp->next)
			if (cp->id == id) {
				*lp = l;
				return cp;
			}
	return NULL;
}

int srv_plink_put(struct srv_worker *w, struct srv_plink *l, uint64_t id, uint64_t off, void *data,
		  size_t len, char *why, size_t whylen)
{
	struct srv_peer *p = w->peer_links;
	struct srv_plink *other = NULL;
	struct peer_copy *cp;
	struct peer_chunk *ch;
	uint64_t end;
	int ret = RGPU_EPROTO;

	pthread_mutex_lock(&p->lock);
	if (!len) {
		snprintf(why, whylen, "an empty MSG_PEER_DATA for copy %llu",
			 (unsigned long long)id);
		goto out;
	}
	if (id_in(&p->done, id)) {
		snprintf(why, whylen,
			 "MSG_PEER_DATA for copy %llu, which was received whole already",
			 (unsigned long long)id);
		goto out;
	}
	if (id_in(&p->failed, id)) {
		/* its MSG_PEER_RECV gave up (timed out, refused): the rest is dropped quietly */
		pr_debug("job %s: %zu bytes of failed copy %llu from %s dropped", w->job_hex, len,
			 (unsigned long long)id, l->src);
		free(data);
		ret = 0;
		goto out;
	}
	cp = find_copy(p, id, &other);
	if (cp && other != l) {
		snprintf(why, whylen,
			 "MSG_PEER_DATA for copy %llu, which comes on another link (%s)",
			 (unsigned long long)id, other->src);
		goto out;
	}
	if (!cp && off) {
		snprintf(why, whylen, "copy %llu starts at offset %llu, not 0",
			 (unsigned long long)id, (unsigned long long)off);
		goto out;
	}
	if (cp && off != cp->next_off) {
		snprintf(why, whylen, "copy %llu: offset %llu where %llu was next",
			 (unsigned long long)id, (unsigned long long)off,
			 (unsigned long long)cp->next_off);
		goto out;
	}
	if (rgpu_range_end(off, 1, len, &end) || (cp && end > cp->size)) {
		snprintf(why, whylen, "copy %llu: %zu bytes at offset %llu go past its %llu bytes",
			 (unsigned long long)id, len, (unsigned long long)off,
			 (unsigned long long)(cp ? cp->size : UINT64_MAX));
		goto out;
	}
	ch = calloc(1, sizeof(*ch));
	if (!cp && ch) {
		cp = calloc(1, sizeof(*cp));
		if (cp) {
			cp->id = id;
			cp->size = UINT64_MAX;
			cp->next = l->copies;
			l->copies = cp;
		}
	}
	if (!ch || !cp) {
		free(ch);
		snprintf(why, whylen, "out of memory for copy %llu", (unsigned long long)id);
		ret = RGPU_ENOMEM;
		goto out;
	}
	ch->off = off;
	ch->len = len;
	ch->data = data;
	if (cp->tail)
		cp->tail->next = ch;
	else
		cp->head = ch;
	cp->tail = ch;
	cp->next_off = end;
	l->queued += len;
	pthread_cond_broadcast(&p->cond);
	ret = 0;
out:
	pthread_mutex_unlock(&p->lock);
	return ret;
}

int srv_plink_wait_room(struct srv_worker *w, struct srv_plink *l)
{
	struct srv_peer *p = w->peer_links;
	int ret;

	pthread_mutex_lock(&p->lock);
	while (l->queued > p->max_queued && !p->closing) {
		if (!l->paused) {
			l->paused = 1;
			pr_debug("job %s: %llu bytes from %s wait for the executor; reading paused",
				 w->job_hex, (unsigned long long)l->queued, l->src);
		}
		pthread_cond_wait(&p->cond, &p->lock);
	}
	l->paused = 0;
	ret = p->closing ? RGPU_ECLOSED : 0;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

uint64_t srv_plink_queued(struct srv_worker *w, struct srv_plink *l)
{
	struct srv_peer *p = w->peer_links;
	uint64_t q;

	pthread_mutex_lock(&p->lock);
	q = l->queued;
	pthread_mutex_unlock(&p->lock);
	return q;
}

void srv_plink_end(struct srv_worker *w, struct srv_plink *l, int broke, const char *why)
{
	struct srv_peer *p = w->peer_links;

	pthread_mutex_lock(&p->lock);
	l->ended = 1;
	l->broke = broke;
	snprintf(l->why, sizeof(l->why), "%s", why);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

int srv_peer_take(struct srv_worker *w, uint64_t id, uint64_t size, uint64_t off, void **data,
		  size_t *len, char *src, size_t srclen, char *why, size_t whylen)
{
	struct srv_peer *p = w->peer_links;
	struct timespec ts;
	int ret;

	rgpu_deadline(&ts, (uint64_t)p->timeout_ms * 1000000ull);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct srv_plink *l = NULL;
		struct peer_copy *cp = find_copy(p, id, &l);

		if (p->closing) {
			snprintf(why, whylen, "the job ends");
			ret = RGPU_ECLOSED;
			break;
		}
		if (cp) {
			snprintf(src, srclen, "%s", l->src);
			cp->size = size;
		}
		if (cp && cp->head) {
			struct peer_chunk *ch = cp->head;
			uint64_t end;
			/* queued before the size was known: checked now */
			if (ch->off != off || rgpu_range_end(ch->off, 1, ch->len, &end) ||
			    end > size) {
				snprintf(why, whylen,
					 "%zu bytes at offset %llu go past its %llu bytes", ch->len,
					 (unsigned long long)ch->off, (unsigned long long)size);
				ret = RGPU_EPROTO;
				break;
			}
			cp->head = ch->next;
			if (!cp->head)
				cp->tail = NULL;
			l->queued -= ch->len;
			*data = ch->data;
			*len = ch->len;
			free(ch);
			pthread_cond_broadcast(&p->cond); /* room for its reader */
			ret = 0;
			break;
		}
		if (cp && l->ended) {
			snprintf(why, whylen, "its link %s (%s)",
				 l->broke ? "broke" : "was closed by the source", l->why);
			ret = RGPU_ECLOSED;
			break;
		}
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT) {
			snprintf(why, whylen, "nothing came for %d ms (RGPU_PEER_TIMEOUT_MS)",
				 p->timeout_ms);
			ret = RGPU_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

int srv_peer_seen(struct srv_worker *w, uint64_t id)
{
	struct srv_peer *p = w->peer_links;
	int seen;

	pthread_mutex_lock(&p->lock);
	seen = id_in(&p->done, id) || id_in(&p->failed, id);
	pthread_mutex_unlock(&p->lock);
	return seen;
}

void srv_peer_done(struct srv_worker *w, uint64_t id, int ok)
{
	struct srv_peer *p = w->peer_links;
	struct srv_plink *l = NULL;
	struct peer_copy *cp;

	pthread_mutex_lock(&p->lock);
	cp = find_copy(p, id, &l);
	if (cp)
		copy_drop(l, cp);
	id_add(ok ? &p->done : &p->failed, id);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	reap(p);
}

/* ---- links in ---------------------------------------------------------------------------- */

/*
 * A link's reader: MSG_PEER_DATA frames only, each payload queued under its copy. Anything else
 * closes this link (and only it): a source that breaks the rules loses its link, not the job.
 */
static void *plink_main(void *arg)
{
	struct srv_plink *l = arg;
	struct srv_worker *w = l->w;
	char why[200] = "";
	int broke = 1;

	for (;;) {
		struct rgpu_frame_hdr h;
		uint8_t *body = NULL;
		Rgpu__PeerData *pd;
		void *data;
		int ret;

		if (srv_plink_wait_room(w, l)) {
			snprintf(why, sizeof(why), "the job ends");
			broke = 0;
			break;
		}
		ret = rgpu_frame_recv(l->c, RGPU_PEER_SERVER, &h, &body);
		if (ret == RGPU_ECLOSED) {
			snprintf(why, sizeof(why), "closed");
			broke = 0;
			break;
		}
		if (ret) {
			snprintf(why, sizeof(why), "%s",
				 ret == RGPU_EIO ? strerror(rgpu_conn_errno(l->c))
						 : rgpu_strerror(ret));
			break;
		}
		if (h.type != RGPU_MSG_PEER_DATA || (h.flags & RGPU_FRAME_REPLY) ||
		    h.session != l->session) {
			snprintf(why, sizeof(why),
				 "%s%s for session %llu: a peer link carries only "
				 "MSG_PEER_DATA of this job",
				 rgpu_msg_name(h.type), h.flags & RGPU_FRAME_REPLY ? " reply" : "",
				 (unsigned long long)h.session);
			free(body);
			break;
		}
		pd = RGPU_PB_UNPACK(rgpu__peer_data, h.body_len, body);
		free(body);
		if (!pd) {
			snprintf(why, sizeof(why), "undecodable MSG_PEER_DATA");
			break;
		}
		data = malloc(h.payload_len ? h.payload_len : 1);
		if (!data) {
			rgpu__peer_data__free_unpacked(pd, NULL);
			snprintf(why, sizeof(why), "out of memory for %llu bytes",
				 (unsigned long long)h.payload_len);
			break;
		}
		ret = rgpu_conn_recv_payload(l->c, data, h.payload_len);
		if (ret) {
			free(data);
			rgpu__peer_data__free_unpacked(pd, NULL);
			snprintf(why, sizeof(why), "%s",
				 ret == RGPU_EIO ? strerror(rgpu_conn_errno(l->c))
						 : rgpu_strerror(ret));
			break;
		}
		ret =
		    srv_plink_put(w, l, pd->id, pd->offset, data, h.payload_len, why, sizeof(why));
		rgpu__peer_data__free_unpacked(pd, NULL);
		if (ret) {
			free(data);
			break;
		}
	}
	if (broke)
		pr_warn("job %s: peer link from %s closed: %s", w->job_hex, l->src, why);
	else
		pr_debug("job %s: peer link from %s ends (%s)", w->job_hex, l->src, why);
	/* the source learns at once; the connection itself goes with the link (reap) */
	rgpu_conn_shutdown(l->c);
	srv_plink_end(w, l, broke, why);
	return NULL;
}

struct srv_plink *srv_plink_add(struct srv_worker *w, struct rgpu_conn *c, const char *src,
				char *why, size_t whylen)
{
	struct srv_peer *p = w->peer_links;
	struct srv_plink *l;

	if (!p) {
		snprintf(why, whylen, "the job takes no peer links yet");
		return NULL;
	}
	reap(p);
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	l->w = w;
	l->c = c;
	l->session = w->session;
	l->starting = 1;
	snprintf(l->src, sizeof(l->src), "%s", src);
	pthread_mutex_lock(&p->lock);
	if (p->closing || p->nlinks >= PEER_MAX_LINKS) {
		snprintf(why, whylen,
			 p->closing ? "the job is ending"
				    : "the job has its limit of %d peer links",
			 PEER_MAX_LINKS);
		pthread_mutex_unlock(&p->lock);
		free(l);
		return NULL;
	}
	l->next = p->links;
	p->links = l;
	p->nlinks++;
	pthread_mutex_unlock(&p->lock);
	return l;
}

int srv_plink_start(struct srv_worker *w, struct srv_plink *l)
{
	struct srv_peer *p = w->peer_links;
	pthread_t t;
	/* l cannot be reaped (starting) until its thread is known, however soon the reader ends */
	int ret = pthread_create(&t, NULL, plink_main, l);

	if (ret) {
		pr_err("job %s: no reader thread for the peer link from %s: %s", w->job_hex, l->src,
		       strerror(ret));
		rgpu_conn_shutdown(l->c);
		srv_plink_end(w, l, 1, "no reader thread");
	}
	pthread_mutex_lock(&p->lock);
	if (!ret) {
		l->reader = t;
		l->has_reader = 1;
	}
	l->starting = 0;
	pthread_cond_broadcast(&p->cond); /* srv_peer_fini may wait for it */
	pthread_mutex_unlock(&p->lock);
	reap(p);
	return ret ? RGPU_ESYS : 0;
}

/* ---- links out (executor only) ------------------------------------------------------------- */

static void out_close(struct srv_peer *p, struct peer_out *o)
{
	for (struct peer_out **pp = &p->out; *pp; pp = &(*pp)->next) {
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	}
	rgpu_conn_close(o->c);
	free(o);
}

/*
 * Open a link to job `job` at `to` ("HOST:PORT"): the Hello {peer, job_id, peer_token}, then its
 * HelloReply. Plaintext only: a target that requires TLS answers with an error, said in why.
 */
static int out_open(struct srv_worker *w, const char *to, const uint8_t *job, const uint8_t *token,
		    struct peer_out **out, char *why, size_t whylen)
{
	struct srv_peer *p = w->peer_links;
	Rgpu__Hello hm = RGPU__HELLO__INIT;
	struct rgpu_frame_hdr rh = {.type = RGPU_MSG_HELLO}, h;
	struct rgpu_conn *c = NULL;
	struct peer_out *o;
	uint8_t *body = NULL;
	char host[256];
	int port = 0, ret;

	if (rgpu_parse_hostport(to, "127.0.0.1", host, sizeof(host), &port) || !port) {
		snprintf(why, whylen, "'%s' is not HOST:PORT", to);
		return RGPU_EINVAL;
	}
	ret = rgpu_connect(host, port, p->timeout_ms, NULL, NULL, &c, why, whylen);
	if (ret)
		return ret;
	rgpu_conn_set_msgs(c, &rgpu_job_msgs);
	rgpu_conn_set_frame_timeout(c, w->cfg->frame_timeout_s * 1000);
	rgpu_conn_set_deadline(c, rgpu_deadline_after(p->timeout_ms));
	hm.protocol_version = RGPU_PROTO_VERSION;
	hm.capabilities = w->caps;
	hm.peer = 1;
	hm.job_id.data = (uint8_t *)job;
	hm.job_id.len = SRV_JOB_ID_LEN;
	hm.peer_token.data = (uint8_t *)token;
	hm.peer_token.len = SRV_TOKEN_LEN;
	ret = rgpu_frame_send_hdr(c, &rh, &hm.base, NULL);
	if (!ret)
		ret = rgpu_frame_recv(c, RGPU_PEER_CLIENT, &h, &body);
	if (ret) {
		snprintf(why, whylen, "no answer to its hello: %s", rgpu_strerror(ret));
		goto out_close;
	}
	rgpu_conn_set_deadline(c, 0);
	ret = RGPU_EPROTO;
	if (h.type == RGPU_MSG_ERROR) {
		Rgpu__ProtocolError *pe = RGPU_PB_UNPACK(rgpu__protocol_error, h.body_len, body);
		if (pe && pe->code == RGPU_ETLS) {
			/* this version speaks plaintext to other servers only */
			snprintf(why, whylen,
				 "it requires TLS, and copies between servers do not "
				 "speak TLS yet");
			ret = RGPU_ETLS;
		} else {
			snprintf(why, whylen, "refused: %s",
				 pe && pe->message ? pe->message : "protocol error");
		}
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		goto out_close;
	}
	if (h.type != RGPU_MSG_HELLO || !(h.flags & RGPU_FRAME_REPLY)) {
		snprintf(why, whylen, "%s in answer to its hello", rgpu_msg_name(h.type));
		goto out_close;
	}
	Rgpu__HelloReply *rep = RGPU_PB_UNPACK(rgpu__hello_reply, h.body_len, body);
	if (!rep || rep->result != CUDA_SUCCESS || !rep->session_id) {
		snprintf(why, whylen, "%s",
			 !rep ? "an undecodable reply to its hello"
			      : "its reply to the hello refuses");
		if (rep)
			rgpu__hello_reply__free_unpacked(rep, NULL);
		goto out_close;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		rgpu__hello_reply__free_unpacked(rep, NULL);
		snprintf(why, whylen, "out of memory");
		ret = RGPU_ENOMEM;
		goto out_close;
	}
	snprintf(o->to, sizeof(o->to), "%s", to);
	memcpy(o->job, job, SRV_JOB_ID_LEN);
	memcpy(o->token, token, SRV_TOKEN_LEN);
	o->c = c;
	o->session = rep->session_id;
	rgpu__hello_reply__free_unpacked(rep, NULL);
	free(body);
	o->next = p->out;
	p->out = o;
	*out = o;
	return 0;
out_close:
	free(body);
	rgpu_conn_close(c);
	return ret;
}

/* The cached link to (to, job, token), or a new one; one the target closed is opened again. */
static int out_get(struct srv_worker *w, const char *to, const uint8_t *job, const uint8_t *token,
		   struct peer_out **out, char *why, size_t whylen)
{
	struct srv_peer *p = w->peer_links;

	for (struct peer_out *o = p->out; o; o = o->next) {
		if (strcmp(o->to, to) || memcmp(o->job, job, SRV_JOB_ID_LEN) ||
		    memcmp(o->token, token, SRV_TOKEN_LEN))
			continue;
		if (!rgpu_conn_hung_up(o->c)) {
			*out = o;
			return 0;
		}
		pr_debug("job %s: the peer link to %s was closed by its end; opening it again",
			 w->job_hex, to);
		out_close(p, o);
		break;
	}
	return out_open(w, to, job, token, out, why, whylen);
}

void srv_peer_fini(struct srv_worker *w)
{
	struct srv_peer *p = w->peer_links;
	struct srv_plink *links;

	if (!p)
		return;
	while (p->out)
		out_close(p, p->out);
	pthread_mutex_lock(&p->lock);
	p->closing = 1;
	/*
	 * A link being handed over (take_peer: srv_plink_start comes next) is still the control
	 * thread's. One without a connection is a unit test's, which starts none.
	 */
	for (int again = 1; again;) {
		again = 0;
		for (struct srv_plink *l = p->links; l; l = l->next)
			again |= l->starting && l->c;
		if (again)
			pthread_cond_wait(&p->cond, &p->lock);
	}
	for (struct srv_plink *l = p->links; l; l = l->next)
		if (l->c)
			rgpu_conn_shutdown(l->c);
	pthread_cond_broadcast(&p->cond);
	links = p->links;
	p->links = NULL;
	p->nlinks = 0;
	pthread_mutex_unlock(&p->lock);
	while (links) {
		struct srv_plink *l = links;
		links = l->next;
		if (l->has_reader)
			pthread_join(l->reader, NULL);
		link_free(l);
	}
	pthread_mutex_lock(&p->lock);
	tdestroy(p->done, free);
	tdestroy(p->failed, free);
	p->done = p->failed = NULL;
	pthread_mutex_unlock(&p->lock);
	/*
	 * p itself stays: the control thread may be about to hand over a link (srv_plink_add
	 * refuses it now, under p's lock), and the process exits next anyway.
	 */
}

/* ---- the handlers ------------------------------------------------------------------------ */

/* ctx, stream, range, no capture; then the stream synchronised (earlier work on it done). */
static CUresult peer_prepare(struct srv_worker *w, const char *what, uint64_t ctx, uint64_t stream,
			     uint64_t *addr, uint64_t size, CUstream *s)
{
	CUresult r = srv_use_ctx(w, ctx);

	if (r == CUDA_SUCCESS)
		r = srv_stream(w, stream, s);
	if (r == CUDA_SUCCESS && size && !srv_dev_range(w, what, addr, size))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS && srv_capturing(w, *s)) {
		/* a graph cannot hold a copy that another server's worker takes part in */
		pr_warn_once("%s refused: its stream is being captured", what);
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamSynchronize(*s);
	return r;
}

/*
 * MSG_PEER_RECV: copy id's bytes, as they come, to [dst, dst + size). Each chunk goes through
 * a pinned staging buffer with an asynchronous copy on the stream, so the device write of one
 * chunk overlaps the wait for the next; the stream is synchronised before the buffer is filled
 * again and once more at the end, so every later command (on any stream: the executor runs
 * them in order) comes after the last byte.
 */
int h_peer_recv(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, PeerRecv, peer_recv, w, f);
	char why[240] = "", src[96] = "no link";
	uint64_t off = 0, dst = m->dst;
	void *stage = NULL;
	CUstream s = NULL;
	CUresult r;
	int ret = 0;

	if (!w->peer_links) {
		pr_warn_once("copy %llu refused: this worker takes no peer links",
			     (unsigned long long)m->id);
		srv_async_error(w, CUDA_ERROR_NOT_SUPPORTED, "peer receive");
		goto out;
	}
	r = peer_prepare(w, "peer receive", m->ctx, m->stream, &dst, m->size, &s);
	if (r == CUDA_SUCCESS && srv_peer_seen(w, m->id)) {
		pr_warn(
		    "job %s: copy %llu from another server refused: its id was received already",
		    w->job_hex, (unsigned long long)m->id);
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r != CUDA_SUCCESS) {
		srv_peer_done(w, m->id, 0);
		srv_async_error(w, r, "peer receive");
		goto out;
	}
	while (r == CUDA_SUCCESS && off < m->size) {
		void *data = NULL;
		size_t len = 0;

		ret = srv_peer_take(w, m->id, m->size, off, &data, &len, src, sizeof(src), why,
				    sizeof(why));
		if (ret) {
			r = CUDA_ERROR_DEVICE_UNAVAILABLE;
			break;
		}
		/* the buffer's last copy must be done before it is filled again */
		if (stage)
			r = w->drv.cuStreamSynchronize(s);
		else if (!(stage = srv_staging_get(w->staging)))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t done = 0; r == CUDA_SUCCESS && done < len;) {
			size_t n = MIN(len - done, (size_t)RGPU_COPY_CHUNK);
			if (done)
				r = w->drv.cuStreamSynchronize(s);
			if (r != CUDA_SUCCESS)
				break;
			memcpy(stage, (uint8_t *)data + done, n);
			r = w->drv.cuMemcpyHtoDAsync(dst + off + done, stage, n, s);
			done += n;
		}
		free(data);
		if (r != CUDA_SUCCESS)
			snprintf(why, sizeof(why), "the device write failed: %s",
				 srv_cu_name(&w->drv, r));
		off += len;
	}
	if (stage) {
		CUresult r2 = w->drv.cuStreamSynchronize(s);
		if (r == CUDA_SUCCESS && r2 != CUDA_SUCCESS) {
			r = r2;
			snprintf(why, sizeof(why), "the device write failed: %s",
				 srv_cu_name(&w->drv, r));
		}
		srv_staging_put(w->staging, stage);
	}
	srv_peer_done(w, m->id, r == CUDA_SUCCESS);
	if (r != CUDA_SUCCESS) {
		pr_warn(
		    "job %s: copy %llu from another server (%s) failed after %llu of %llu bytes: "
		    "%s",
		    w->job_hex, (unsigned long long)m->id, src,
		    (unsigned long long)MIN(off, m->size), (unsigned long long)m->size, why);
		srv_async_error(w, r, "peer receive");
	}
	ret = 0;
out:
	rgpu__peer_recv__free_unpacked(m, NULL);
	return ret;
}

/*
 * MSG_PEER_SEND: [src, src + size) to copy id of job_id at `to`. Chunks of RGPU_COPY_CHUNK are
 * read into two pinned staging buffers in turn, the read of one overlapping the send of the
 * other; the stream is synchronised at the end, so later work on it comes after every read.
 */
int h_peer_send(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, PeerSend, peer_send, w, f);
	Rgpu__PeerData pd = RGPU__PEER_DATA__INIT;
	struct peer_out *o = NULL;
	void *buf[2] = {NULL, NULL};
	uint64_t off = 0, src = m->src, sent = 0;
	char why[300] = "", target[2 * SRV_JOB_ID_LEN + 1];
	CUstream s = NULL;
	CUresult r;

	if (!w->peer_links) {
		pr_warn_once("copy %llu refused: this worker opens no peer links",
			     (unsigned long long)m->id);
		srv_async_error(w, CUDA_ERROR_NOT_SUPPORTED, "peer send");
		goto out;
	}
	r = peer_prepare(w, "peer send", m->ctx, m->stream, &src, m->size, &s);
	if (r == CUDA_SUCCESS && (!m->to || !*m->to || m->job_id.len != SRV_JOB_ID_LEN ||
				  m->peer_token.len != SRV_TOKEN_LEN ||
				  !memcmp(m->job_id.data, w->job_id, SRV_JOB_ID_LEN))) {
		/* to itself, the executor would wait on its own queue */
		pr_warn_once(
		    "peer send refused: no target, a job id of %zu bytes or a token of %zu "
		    "bytes, or this very job",
		    m->job_id.len, m->peer_token.len);
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r != CUDA_SUCCESS) {
		srv_async_error(w, r, "peer send");
		goto out;
	}
	if (!m->size)
		goto out;
	if (out_get(w, m->to, m->job_id.data, m->peer_token.data, &o, why, sizeof(why))) {
		r = CUDA_ERROR_DEVICE_UNAVAILABLE;
		goto fail;
	}
	buf[0] = srv_staging_get(w->staging);
	r = w->drv.cuMemcpyDtoHAsync(buf[0], src, MIN(RGPU_COPY_CHUNK, m->size), s);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuStreamSynchronize(s);
	for (int k = 0; r == CUDA_SUCCESS && off < m->size; k ^= 1) {
		uint64_t len = MIN(RGPU_COPY_CHUNK, m->size - off), next = off + len;
		struct rgpu_frame_hdr h = {
		    .type = RGPU_MSG_PEER_DATA, .session = o->session, .payload_len = len};
		int ret;

		if (next < m->size) {
			if (!buf[k ^ 1])
				buf[k ^ 1] = srv_staging_get(w->staging);
			r = w->drv.cuMemcpyDtoHAsync(buf[k ^ 1], src + next,
						     MIN(RGPU_COPY_CHUNK, m->size - next), s);
		}
		pd.id = m->id;
		pd.offset = off;
		h.seq = ++o->seq;
		ret = rgpu_frame_send_hdr(o->c, &h, &pd.base, buf[k]);
		if (ret) {
			snprintf(why, sizeof(why), "sending to %s: %s", m->to,
				 ret == RGPU_EIO ? strerror(rgpu_conn_errno(o->c))
						 : rgpu_strerror(ret));
			r = CUDA_ERROR_DEVICE_UNAVAILABLE;
			break;
		}
		sent = next;
		/* a test's source that stops halfway: the destination must fail, not hang */
		if (next < m->size && rgpu_fault("peer_send_cut")) {
			snprintf(why, sizeof(why), "fault site peer_send_cut");
			r = CUDA_ERROR_DEVICE_UNAVAILABLE;
			break;
		}
		if (r == CUDA_SUCCESS && next < m->size)
			r = w->drv.cuStreamSynchronize(s);
		if (r != CUDA_SUCCESS)
			snprintf(why, sizeof(why), "reading the device: %s",
				 srv_cu_name(&w->drv, r));
		off = next;
	}
	/* a failed read may still be filling the other buffer */
	w->drv.cuStreamSynchronize(s);
	for (int k = 0; k < 2; k++)
		if (buf[k])
			srv_staging_put(w->staging, buf[k]);
	if (r == CUDA_SUCCESS)
		goto out;
fail:
	rgpu_hex(m->job_id.data, SRV_JOB_ID_LEN, target);
	pr_warn("job %s: copy %llu to job %s at %s failed after %llu of %llu bytes: %s", w->job_hex,
		(unsigned long long)m->id, target, m->to, (unsigned long long)sent,
		(unsigned long long)m->size, why);
	if (o)
		out_close(w->peer_links, o); /* the target may hold half a copy: never reuse it */
	srv_async_error(w, r, "peer send");
out:
	rgpu__peer_send__free_unpacked(m, NULL);
	return 0;
}

/* MSG_PEER_DATA on the client's link: only another server's worker sends it, on a peer link. */
int h_peer_data(struct srv_worker *w, struct srv_frame *f)
{
	(void)f;
	srv_protocol_error(w, RGPU_EPROTO,
			   "MSG_PEER_DATA from the client: only another server's worker sends it, "
			   "on a peer link");
	return RGPU_EPROTO;
}
