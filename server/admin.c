/*
 * Admin requests for one job, served by its worker (the supervisor hands them over with the
 * connection: CTL_ADMIN): CHECKPOINT, and MIGRATE (live: rounds of checkpoints pushed while the
 * job runs, the target keeping it staged; then, and alone when cold, a checkpoint that keeps the
 * job held, pushed to the target server and restored there, the client redirected and this
 * worker gone). Each runs on a thread of its own, one at a time per job, while the job's other
 * threads go on; the barrier (hold.c) is where the two meet.
 *
 * The failure rule of a migration (design.md §8): until the target has answered that it holds
 * the restored job, any failure releases the job here and it runs on; once it has, the client
 * is sent there and this worker ends. Never both running, never neither.
 */
#define LOG_PREFIX "worker: "
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/adminclient.h"
#include "rgpu/auth.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/pbdecode.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

struct admin_req {
	struct srv_worker *w;
	struct rgpu_conn *c;
	unsigned type;
	uint8_t *body;
	size_t len;
	uint8_t proof[RGPU_AUTH_MAC_LEN];
	int has_proof;
};

static void send_reply(struct admin_req *a, ProtobufCMessage *rep)
{
	struct rgpu_frame_hdr h = {.type = (uint16_t)a->type, .flags = RGPU_FRAME_REPLY, .ref = 1};
	rgpu_frame_send_hdr(a->c, &h, rep, NULL);
}

static void fill_info(const struct srv_ckpt_result *res, struct srv_worker *w,
		      Rgpu__CkptInfo *info, char *host)
{
	info->id = res->id;
	info->job_id.data = w->job_id;
	info->job_id.len = SRV_JOB_ID_LEN;
	info->tenant = w->tenant;
	info->client_host = w->client_host;
	info->client_program = w->client_program;
	info->created_unix_ms = rgpu_wall_ms();
	info->device_bytes = res->device_bytes;
	info->array_bytes = res->array_bytes;
	info->chunks = res->chunks;
	info->new_chunks = res->new_chunks;
	info->new_bytes = res->new_bytes;
	info->stored_bytes = res->stored_bytes;
	info->pause_ns = res->pause_ns;
	info->duration_ns = res->duration_ns;
	info->snapshot = res->snapshot;
	info->records = res->records;
	gethostname(host, 255);
	info->server_host = host;
}

static void do_checkpoint(struct admin_req *a)
{
	struct srv_worker *w = a->w;
	Rgpu__CheckpointReply rep = RGPU__CHECKPOINT_REPLY__INIT;
	Rgpu__CkptInfo info = RGPU__CKPT_INFO__INIT;
	struct srv_ckpt_result res;
	char why[400] = "", host[256] = "";
	int ret = srv_worker_store(w, why, sizeof(why));

	if (!ret)
		ret = srv_ckpt_take(w, w->store, 0, a->c, &res, NULL, why, sizeof(why));
	srv_ckpt_release(w);
	rep.result = ret;
	rep.error = why;
	if (!ret) {
		fill_info(&res, w, &info, host);
		rep.info = &info;
	}
	if (a->has_proof) {
		rep.server_proof.data = a->proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
	send_reply(a, &rep.base);
}

/* PROGRESS from the target, passed on to the operator */
static void forward_progress(const Rgpu__Progress *pr, void *arg)
{
	rgpu_admin_progress(arg, pr->phase, pr->done, pr->total, pr->unit);
}

/*
 * Where the client finds the target: what the operator said, else the target's own listen
 * address, with a wildcard host replaced by the host this server reached the target at.
 */
static void client_address(const char *asked, const char *told, const char *target, char *out,
			   size_t len)
{
	if (asked && *asked)
		snprintf(out, len, "%s", asked);
	else
		rgpu_reach_addr(told, target, out, len);
}

/*
 * A client connection to another server's admin address, as this server's operator. A target
 * that takes no byte of a send for --frame-timeout fails the send, and with it the migration
 * (the job runs on here), rather than holding the job for as long as the target stalls.
 */
int srv_peer_open(const struct srv_config *cfg, const char *target, struct rgpu_admin **a,
		  char *err, size_t errlen)
{
	static struct rgpu_tls *tls;
	struct rgpu_admin_peer peer = {.key = cfg->admin_key,
				       .send_timeout_ms = cfg->frame_timeout_s * 1000};

	if (cfg->tls) {
		char why[400];
		if (!tls && rgpu_tls_client_new(cfg->peer_tls_ca, &tls, why, sizeof(why))) {
			snprintf(err, errlen, "no TLS for servers: %s", why);
			return RGPU_ETLS;
		}
		peer.tls = tls;
	}
	return rgpu_admin_open(&peer, target, a, err, errlen);
}

/* Tell the client where its job went (MSG_REDIRECT, unsequenced), and take the link down. */
static void redirect_client(struct srv_worker *w, const char *addr, const char *reason)
{
	Rgpu__Redirect rd = RGPU__REDIRECT__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_REDIRECT, .session = w->session};

	rd.server = (char *)addr;
	rd.reason = (char *)reason;
	pthread_mutex_lock(&w->send_lock);
	if (w->conn)
		rgpu_frame_send_hdr(w->conn, &h, &rd.base, NULL);
	pthread_mutex_unlock(&w->send_lock);
	srv_link_down(w);
}

void srv_ctl_moved(struct srv_worker *w, const uint8_t *job_id, const char *addr)
{
	Rgpu__Ctl m = RGPU__CTL__INIT;

	if (w->ctl_fd < 0)
		return;
	m.kind = RGPU__CTL_KIND__CTL_MOVED;
	m.job_id.data = (uint8_t *)job_id;
	m.job_id.len = SRV_JOB_ID_LEN;
	m.error = (char *)addr;
	srv_ctl_send(w->ctl_fd, &m, -1);
}

#define LIVE_ROUNDS 8               /* pre-copy rounds at most, unless the operator says */
#define LIVE_SMALL (64ull << 20)    /* a round that rewrote no more than this: switch over */

/* A migration's state, between its rounds. */
struct mig {
	struct admin_req *a;
	const Rgpu__MigrateRequest *req;
	struct rgpu_admin *peer; /* the target; a staged job waits at its end (live) */
	struct rgpu_push_opts opts;
	Rgpu__PushReply *pr;     /* the last round's answer */
	uint64_t sent, sent_bytes, last_bytes;
	uint8_t *have;           /* live: the device hashes the target was sent last, or NULL */
	size_t nhave;
	char why[600];
};

/* DEVICE_CHUNK frames on the migration's connection, from the drain threads */
struct device_send {
	struct rgpu_admin *peer;
	pthread_mutex_t lock;
};

static int send_device_chunk(void *arg, uint64_t index, const void *bytes, size_t len,
			     int exact)
{
	struct device_send *ds = arg;
	Rgpu__DeviceChunk dc = RGPU__DEVICE_CHUNK__INIT;
	int ret;

	dc.index = index;
	dc.zero = !bytes;
	dc.exact = exact;
	pthread_mutex_lock(&ds->lock);
	ret = rgpu_admin_post(ds->peer, RGPU_ADMIN_MSG_DEVICE_CHUNK, &dc.base, bytes,
			      bytes ? len : 0);
	pthread_mutex_unlock(&ds->lock);
	return ret;
}

static size_t bits_set(const uint8_t *bm, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += bm[i / 8] >> (i % 8) & 1;
	return k;
}

/* how long a migration's target may stay silent: --frame-timeout */
static int silence_ms(const struct mig *m)
{
	return m->a->w->cfg->frame_timeout_s * 1000;
}

/*
 * A live round's device memory, after its push: the chunks the target asked for (its PUSH_DONE
 * reply: want, a bitmap), straight from the GPU, then DEVICE_END, whose reply is the round's.
 */
static int push_device(struct mig *m, struct srv_ckpt_direct *dx, const uint8_t *want,
		       uint64_t wlen)
{
	struct srv_worker *w = m->a->w;
	struct device_send ds = {.peer = m->peer, .lock = PTHREAD_MUTEX_INITIALIZER};
	Rgpu__DeviceEnd de = RGPU__DEVICE_END__INIT;
	uint64_t nwant = m->pr->want, bytes = 0;
	char err[500];
	int ret;

	if (wlen != (dx->n + 7) / 8 || bits_set(want, dx->n) != nwant) {
		snprintf(m->why, sizeof(m->why),
			 "the target asked for %llu device chunks by a bitmap of %llu bytes; the job "
			 "has %zu",
			 (unsigned long long)nwant, (unsigned long long)wlen, dx->n);
		return RGPU_EPROTO;
	}
	ret = srv_ckpt_direct_send(w, dx, want, send_device_chunk, &ds, m->a->c, &bytes, err,
				   sizeof(err));
	m->sent += nwant;
	m->sent_bytes += bytes;
	m->last_bytes += bytes;
	if (ret) {
		/* the target may have said why it stopped taking them */
		int code = rgpu_admin_take_error(m->peer, 2000, m->why, sizeof(m->why));
		if (!code)
			snprintf(m->why, sizeof(m->why), "%s: %s", rgpu_admin_server(m->peer), err);
		return code ? code : ret;
	}
	de.chunks = nwant;
	rgpu__push_reply__free_unpacked(m->pr, NULL);
	m->pr = NULL;
	ret = rgpu_admin_call(m->peer, RGPU_ADMIN_MSG_DEVICE_END, &de.base, NULL, 0,
			      &rgpu__push_reply__descriptor, (ProtobufCMessage **)&m->pr, NULL, NULL,
			      forward_progress, m->a->c, silence_ms(m), err, sizeof(err));
	if (ret) {
		snprintf(m->why, sizeof(m->why), "%s", err);
		return ret;
	}
	if (m->pr->result) {
		snprintf(m->why, sizeof(m->why), "%s: %s", rgpu_admin_server(m->peer),
			 m->pr->error && *m->pr->error ? m->pr->error
						       : rgpu_strerror(m->pr->result));
		return m->pr->result;
	}
	/* what the target holds now, as far as this side knows: the next round's base */
	free(m->have);
	m->have = malloc(dx->n * RGPU_HASH_LEN + 1);
	m->nhave = m->have ? dx->n : 0;
	if (m->have)
		memcpy(m->have, dx->hash, dx->n * RGPU_HASH_LEN);
	return 0;
}

/*
 * One push of checkpoint id to the target (a connection opened if there is none), staged
 * (live, before the switchover) or restored and served there. 0, or an error in m->why
 * (RGPU_ESTALE: the staged job's structure changed; the target has let it go).
 */
static int push(struct mig *m, uint64_t id, int stage, struct srv_ckpt_direct *dx)
{
	char err[500];
	uint64_t n = 0, bytes = 0, wlen = 0;
	void *want = NULL;
	int ret;

	if (m->pr)
		rgpu__push_reply__free_unpacked(m->pr, NULL);
	m->pr = NULL;
	if (!m->peer && (ret = srv_peer_open(m->a->w->cfg, m->req->target, &m->peer, err,
					     sizeof(err)))) {
		snprintf(m->why, sizeof(m->why), "the target: %s", err);
		return ret;
	}
	m->opts.restore = 1;
	m->opts.stage = stage;
	m->opts.want = dx ? &want : NULL;
	m->opts.want_len = dx ? &wlen : NULL;
	/*
	 * A target silent for --frame-timeout fails the push, and the migration, and the job
	 * runs on here (live, at the switchover it is held that long at most; cold, it waits that
	 * long). A working target reports progress at least every RGPU_PUSH_HEARTBEAT_MS, syncing
	 * a cold checkpoint to disk included, so only one that stopped trips it.
	 */
	m->opts.silence_ms = silence_ms(m);
	ret = rgpu_push_send(m->peer, m->a->w->store, id, &m->opts, forward_progress, m->a->c,
			     &m->pr, &n, &bytes, err, sizeof(err));
	m->sent += n;
	m->sent_bytes += bytes;
	m->last_bytes = bytes;
	if (ret)
		snprintf(m->why, sizeof(m->why), "%s", err);
	else if (dx)
		ret = push_device(m, dx, want, wlen);
	free(want);
	if (ret) {
		/* the target ends its side on any failure: a later push starts afresh */
		rgpu_admin_close(m->peer);
		m->peer = NULL;
		free(m->have);
		m->have = NULL;
		m->nhave = 0;
	}
	return ret;
}

/*
 * Live migration's pre-copy (design.md §8): rounds of a checkpoint taken while the job runs
 * (its pause is the checkpoint's: a barrier, a hash of device memory on the GPU, a snapshot)
 * pushed to the target, which keeps the job staged and writes only the chunks that changed,
 * until a round rewrites little or rewrites no less than the one before. A round whose job
 * changed structure (a new allocation, a module: RGPU_ESTALE) stages it afresh. *rounds: how
 * many ran. 0, or an error (m->why).
 */
static int precopy(struct mig *m, unsigned *rounds)
{
	struct srv_worker *w = m->a->w;
	unsigned max = m->req->max_rounds ? m->req->max_rounds : LIVE_ROUNDS;
	uint64_t prev = UINT64_MAX, prev_id = 0;
	struct srv_ckpt_result res;
	int ret = 0;

	for (unsigned round = 1; round <= max; round++) {
		struct srv_ckpt_direct dx = {.have = m->have, .nhave = m->nhave};
		rgpu_admin_progress(m->a->c, "round", round, max, "rounds");
		ret = srv_ckpt_take(w, w->store, 0, m->a->c, &res, &dx, m->why, sizeof(m->why));
		if (ret)
			break;
		ret = push(m, res.id, 1, &dx);
		srv_ckpt_direct_free(w, &dx);
		/* only the last checkpoint stays here; a round's is done with once pushed */
		if (prev_id)
			rgpu_store_remove(w->store, prev_id);
		prev_id = res.id;
		*rounds = round;
		if (ret == RGPU_ESTALE) {
			pr_info("job %s: live migration round %u: %s; staged afresh next round",
				w->job_hex, round, m->why);
			prev = UINT64_MAX;
			ret = 0;
			continue;
		}
		if (ret)
			break;
		uint64_t changed = m->pr->changed;
		pr_info("job %s: live migration round %u: paused %.3f ms, %llu chunks rewritten on "
			"the target, %.1f MiB sent",
			w->job_hex, round, res.pause_ns / 1e6, (unsigned long long)changed,
			m->last_bytes / 1048576.0);
		if (changed * RGPU_CHUNK_MAX <= LIVE_SMALL ||
		    (prev != UINT64_MAX && changed >= prev - prev / 10))
			break;
		prev = changed;
	}
	if (prev_id)
		rgpu_store_remove(w->store, prev_id);
	return ret;
}

static void do_migrate(struct admin_req *a)
{
	struct srv_worker *w = a->w;
	Rgpu__MigrateRequest *req = RGPU_PB_UNPACK(rgpu__migrate_request, a->len, a->body);
	Rgpu__MigrateReply rep = RGPU__MIGRATE_REPLY__INIT;
	struct mig m = {.a = a, .req = req};
	struct srv_ckpt_result res = {0};
	struct srv_ckpt_direct dx = {0};
	char *why = m.why, addr[300] = "";
	uint64_t t0 = rgpu_now_ns(), t_held = 0;
	unsigned rounds = 0;
	int ret = 0, held = 0, restaged = 0;

	if (!req || !req->target || !*req->target) {
		ret = RGPU_EINVAL;
		snprintf(why, sizeof(m.why), "a migration needs a target server");
	} else if (req->client_address && *req->client_address &&
		   !rgpu_addr_complete(req->client_address)) {
		/* checked before anything moves: the client could not follow a redirect there */
		ret = RGPU_EINVAL;
		snprintf(why, sizeof(m.why), "the client address '%s' is not HOST:PORT",
			 req->client_address);
	} else if (!(w->client_caps & RGPU_CAP_MIGRATE)) {
		ret = RGPU_EUNSUPPORTED;
		snprintf(why, sizeof(m.why),
			 "the job's client (%s, pid %d) cannot follow a migration: its interposer "
			 "is older than this server",
			 w->client_host, w->client_pid);
	}
	if (!ret)
		ret = srv_worker_store(w, why, sizeof(m.why));
	if (!ret) {
		m.opts.token = w->token;
		m.opts.token_prev = atomic_load(&w->token_prev_ok) ? w->token_prev : NULL;
		m.opts.client_address = req->client_address;
	}
	if (!ret && !req->cold)
		ret = precopy(&m, &rounds);
	/* the switchover: the job held from here until it is redirected or released */
	/* live: the device memory goes straight to the target's GPU, as in the rounds */
	struct srv_ckpt_direct *live = req && !req->cold ? &dx : NULL;
	dx.have = m.have;
	dx.nhave = m.nhave;
	if (!ret) {
		ret = srv_ckpt_take(w, w->store, 1, a->c, &res, live, why, sizeof(m.why));
		held = !ret;
		t_held = rgpu_now_ns();
	}
	if (!ret) {
		ret = push(&m, res.id, 0, live);
		if (ret == RGPU_ESTALE) {
			/* changed since it was staged: restored whole on the target, still held */
			pr_info("job %s: live migration switchover: %s; restoring it whole there",
				w->job_hex, why);
			restaged = 1;
			ret = push(&m, res.id, 0, live);
		}
	}
	srv_ckpt_direct_free(w, &dx);
	free(m.have);
	m.have = NULL;
	/* a live switchover's checkpoint holds no device memory here: nothing to keep */
	if (live && res.id)
		rgpu_store_remove(w->store, res.id);
	uint64_t final_bytes = m.last_bytes;
	rgpu_admin_close(m.peer);
	m.peer = NULL;
	if (ret) {
		/* the failure rule: the target holds nothing, the job runs on here */
		if (held)
			srv_hold_release(w);
		pr_warn("job %s: migration to %s failed, the job runs on here: %s", w->job_hex,
			req && req->target ? req->target : "?", why);
		goto reply;
	}
	/* the target holds the job: the client goes there, and this worker ends */
	client_address(req->client_address, m.pr->client_address, req->target, addr,
		       sizeof(addr));
	srv_ctl_moved(w, w->job_id, addr);
	redirect_client(w, addr, "migrated");
	rep.pause_ns = res.pause_ns + (rgpu_now_ns() - t_held);
	rep.rounds = rounds;
	rep.final_bytes = final_bytes;
	rep.restaged = restaged;
	pr_info("job %s migrated %s to %s (client address %s): %s%llu, %u round(s), "
		"%llu chunks sent (%.1f MiB; %.1f MiB while held), held %.3f s, %.3f s in all",
		w->job_hex, req->cold ? "cold" : "live", req->target, addr,
		live ? "device memory GPU to GPU, checkpoint removed " : "checkpoint ",
		(unsigned long long)res.id, rounds, (unsigned long long)m.sent,
		m.sent_bytes / 1048576.0, final_bytes / 1048576.0, rep.pause_ns / 1e9,
		(rgpu_now_ns() - t0) / 1e9);
reply:
	rep.result = ret;
	rep.error = why;
	rep.job_id.data = w->job_id;
	rep.job_id.len = SRV_JOB_ID_LEN;
	rep.client_address = addr;
	rep.checkpoint = live ? 0 : res.id; /* a live one's is gone */
	rep.chunks_sent = m.sent;
	rep.bytes_sent = m.sent_bytes;
	rep.duration_ns = rgpu_now_ns() - t0;
	if (a->has_proof) {
		rep.server_proof.data = a->proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
	send_reply(a, &rep.base);
	if (m.pr)
		rgpu__push_reply__free_unpacked(m.pr, NULL);
	if (req)
		rgpu__migrate_request__free_unpacked(req, NULL);
	srv_ckpt_release(w);
	/* the chunks only the rounds' checkpoints named */
	if ((rounds || live) && w->store)
		rgpu_store_gc(w->store, &(uint64_t){0});
	if (!ret) {
		/* the job lives on the target now: everything here goes with the process */
		rgpu_conn_close(a->c);
		srv_link_end(w);
		srv_acct_leave();
		_exit(0);
	}
}

static void *admin_main(void *arg)
{
	struct admin_req *a = arg;
	struct srv_worker *w = a->w;

	if (a->type == RGPU_ADMIN_MSG_CHECKPOINT)
		do_checkpoint(a);
	else if (a->type == RGPU_ADMIN_MSG_MIGRATE)
		do_migrate(a);
	rgpu_conn_close(a->c);
	free(a->body);
	free(a);
	atomic_store(&w->admin_busy, 0);
	return NULL;
}

static void refuse(struct rgpu_conn *c, int code, const char *msg)
{
	rgpu_admin_error(c, code, msg);
	rgpu_conn_close(c);
}

void srv_worker_admin(struct srv_worker *w, int fd, unsigned type, const uint8_t *body,
		      size_t len, const uint8_t *proof)
{
	struct rgpu_conn *c = rgpu_tcp_wrap(fd);
	struct admin_req *a;
	pthread_t t;

	if (!c) {
		close(fd);
		return;
	}
	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	if (type != RGPU_ADMIN_MSG_CHECKPOINT && type != RGPU_ADMIN_MSG_MIGRATE) {
		refuse(c, RGPU_EPROTO, "not a request for a job's worker");
		return;
	}
	if (atomic_exchange(&w->admin_busy, 1)) {
		refuse(c, RGPU_EBUSY,
		       "another checkpoint or migration of this job is in progress; try again when "
		       "it has ended");
		return;
	}
	a = calloc(1, sizeof(*a));
	if (a)
		a->body = malloc(len ? len : 1);
	if (!a || !a->body) {
		if (a)
			free(a);
		atomic_store(&w->admin_busy, 0);
		refuse(c, RGPU_ENOMEM, "the job's worker is out of memory");
		return;
	}
	a->w = w;
	a->c = c;
	a->type = type;
	memcpy(a->body, body, len);
	a->len = len;
	if (proof) {
		memcpy(a->proof, proof, RGPU_AUTH_MAC_LEN);
		a->has_proof = 1;
	}
	if (pthread_create(&t, NULL, admin_main, a) || pthread_detach(t)) {
		free(a->body);
		free(a);
		atomic_store(&w->admin_busy, 0);
		refuse(c, RGPU_ESYS, "the job's worker cannot start a thread");
	}
}
