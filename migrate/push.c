/*
 * A checkpoint pushed from one server's store into another's (rgpu/ckpt.h; docs/protocol.md,
 * "Checkpoints"): the manifest first, then only the chunks the target lacks (content addressed:
 * a job moved back and forth sends what changed), each as it is stored, then PUSH_DONE. The
 * target checks every chunk decodes to the hash it is sent under before it stores it, and
 * commits the checkpoint to its store in one transaction: a push cut anywhere leaves the target
 * as it was but for chunks its gc collects.
 */
#define LOG_PREFIX "push: "
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "checkpoint.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/pbdecode.h"
#include "rgpu/store.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"

#define PROGRESS_EVERY_NS 200000000ull

static int bit(const uint8_t *bm, size_t i)
{
	return bm[i / 8] >> (i % 8) & 1;
}

int rgpu_push_send(struct rgpu_admin *a, struct rgpu_store *s, uint64_t id,
		   const struct rgpu_push_opts *opts, rgpu_admin_progress_fn progress, void *parg,
		   Rgpu__PushReply **rep, uint64_t *sent, uint64_t *sent_bytes, char *err,
		   size_t errlen)
{
	Rgpu__PushRequest req = RGPU__PUSH_REQUEST__INIT;
	Rgpu__PushNeed *need = NULL;
	Rgpu__PushDone done = RGPU__PUSH_DONE__INIT;
	Rgpu__CkptMeta *m = NULL;
	uint8_t *hashes = NULL, *bitmap = NULL, *val = NULL;
	void *meta = NULL;
	uint64_t bmlen = 0, nsent = 0, nbytes = 0, last = 0;
	size_t n = 0, ml = 0;
	char why[400];
	int silence = opts && opts->silence_ms > 0 ? opts->silence_ms : RGPU_ADMIN_LONG_TIMEOUT_MS;
	int ret;

	*rep = NULL;
	ret = rgpu_ckpt_load(s, id, &m, &hashes, &n, why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s", why);
		return ret;
	}
	if (rgpu_ckpt_is_live(m) && !(opts && opts->want)) {
		snprintf(err, errlen,
			 "checkpoint %llu is a live migration's round: its device memory went to "
			 "the target, it is not in this store",
			 (unsigned long long)id);
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		ret = RGPU_EUNSUPPORTED;
		goto out;
	}
	rgpu__ckpt_meta__free_unpacked(m, NULL);
	/* the metadata as stored, byte for byte: the target checks and keeps it */
	ret = rgpu_store_manifest(s, id, &meta, &ml, NULL, NULL);
	if (ret) {
		snprintf(err, errlen, "checkpoint %llu: %s", (unsigned long long)id,
			 rgpu_strerror(ret));
		goto out;
	}
	req.meta.data = meta;
	req.meta.len = ml;
	req.chunks = n;
	req.restore = opts && opts->restore;
	req.stage = opts && opts->stage;
	if (opts && opts->token) {
		req.token.data = (uint8_t *)opts->token;
		req.token.len = 32;
	}
	if (opts && opts->token_prev) {
		req.token_prev.data = (uint8_t *)opts->token_prev;
		req.token_prev.len = 32;
	}
	req.client_address = (char *)(opts && opts->client_address ? opts->client_address : "");
	ret = rgpu_admin_call(a, RGPU_ADMIN_MSG_PUSH, &req.base, hashes, n * RGPU_HASH_LEN,
			      &rgpu__push_need__descriptor, (ProtobufCMessage **)&need,
			      (void **)&bitmap, &bmlen, progress, parg, silence, err, errlen);
	if (ret)
		goto out;
	if (need->result) {
		snprintf(err, errlen, "%s refused the checkpoint: %s", rgpu_admin_server(a),
			 need->error && *need->error ? need->error : rgpu_strerror(need->result));
		ret = need->result;
		goto out;
	}
	if (bmlen != (n + 7) / 8) {
		snprintf(err, errlen, "%s: a bitmap of %llu bytes for %zu chunks",
			 rgpu_admin_server(a), (unsigned long long)bmlen, n);
		ret = RGPU_EPROTO;
		goto out;
	}
	val = malloc(RGPU_CHUNK_VALUE_MAX);
	if (!val) {
		ret = RGPU_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		Rgpu__ChunkPut cp = RGPU__CHUNK_PUT__INIT;
		size_t vlen = 0;
		if (!bit(bitmap, i))
			continue;
		ret = rgpu_store_chunk_value(s, hashes + i * RGPU_HASH_LEN, val, &vlen);
		if (ret) {
			char hex[13];
			snprintf(err, errlen, "checkpoint %llu: chunk %zu (%s...) %s",
				 (unsigned long long)id, i, rgpu_hex(hashes + i * RGPU_HASH_LEN, 6, hex),
				 ret == RGPU_ENOTFOUND ? "is not in the store: the checkpoint is damaged"
						       : rgpu_strerror(ret));
			/* a checkpoint missing a chunk is a damaged one */
			ret = ret == RGPU_ENOTFOUND || ret == RGPU_ETOOBIG ? RGPU_ECORRUPT : ret;
			goto out;
		}
		if (nsent && nsent == need->need / 2 && rgpu_fault("push_send")) {
			snprintf(err, errlen, "fault site push_send after %llu chunks",
				 (unsigned long long)nsent);
			ret = RGPU_EIO;
			goto out;
		}
		cp.hash.data = hashes + i * RGPU_HASH_LEN;
		cp.hash.len = RGPU_HASH_LEN;
		ret = rgpu_admin_post(a, RGPU_ADMIN_MSG_CHUNK, &cp.base, val, vlen);
		if (ret) {
			/* the target may have said why it stopped taking them */
			int code = rgpu_admin_take_error(a, 2000, err, errlen);
			if (code)
				ret = code;
			else
				snprintf(err, errlen, "sending to %s: %s", rgpu_admin_server(a),
					 rgpu_strerror(ret));
			goto out;
		}
		nsent++;
		nbytes += vlen;
		if (progress && rgpu_now_ns() - last > PROGRESS_EVERY_NS) {
			Rgpu__Progress pr = RGPU__PROGRESS__INIT;
			pr.phase = "send";
			pr.done = nsent;
			pr.total = need->need;
			pr.unit = "chunks";
			progress(&pr, parg);
			last = rgpu_now_ns();
		}
	}
	done.chunks = nsent;
	ret = rgpu_admin_call(a, RGPU_ADMIN_MSG_PUSH_DONE, &done.base, NULL, 0,
			      &rgpu__push_reply__descriptor, (ProtobufCMessage **)rep,
			      opts ? opts->want : NULL, opts ? opts->want_len : NULL, progress, parg,
			      silence, err, errlen);
	if (!ret && (*rep)->result) {
		snprintf(err, errlen, "%s: %s", rgpu_admin_server(a),
			 (*rep)->error && *(*rep)->error ? (*rep)->error
							 : rgpu_strerror((*rep)->result));
		ret = (*rep)->result;
	}
out:
	if (sent)
		*sent = nsent;
	if (sent_bytes)
		*sent_bytes = nbytes;
	if (need)
		rgpu__push_need__free_unpacked(need, NULL);
	free(bitmap);
	free(val);
	free(meta);
	free(hashes);
	return ret;
}

/*
 * The target's checkers: the connection is read on one thread, in order; each chunk's check
 * (decode, hash) and store happen on a pool, so a push is not bound by one core's hash rate.
 */
#define RX_SLOTS 64

struct rx_slot {
	uint8_t *val;
	size_t len;
	size_t index;
};

struct rx {
	pthread_mutex_t lock;
	pthread_cond_t more, room;
	struct rx_slot q[RX_SLOTS];    /* a ring of received chunks waiting for a checker */
	size_t head, n;                /* under lock */
	uint8_t *free_v[RX_SLOTS + 1]; /* value buffers not in use */
	size_t nfree;
	int done, failed, ret;         /* under lock */
	char why[300];
	struct rgpu_ckpt *ck;
	const uint8_t *hashes;
	const Rgpu__CkptMeta *m;
	size_t n_all;
};

static void rx_fail(struct rx *r, int ret, const char *why)
{
	pthread_mutex_lock(&r->lock);
	if (!r->failed) {
		r->failed = 1;
		r->ret = ret;
		snprintf(r->why, sizeof(r->why), "%s", why);
	}
	pthread_cond_broadcast(&r->room);
	pthread_cond_broadcast(&r->more);
	pthread_mutex_unlock(&r->lock);
}

static void *rx_main(void *arg)
{
	struct rx *r = arg;
	uint8_t *buf = malloc(RGPU_CHUNK_MAX);

	if (!buf) {
		rx_fail(r, RGPU_ENOMEM, "out of memory");
		return NULL;
	}
	for (;;) {
		struct rx_slot sl;
		pthread_mutex_lock(&r->lock);
		while (!r->n && !r->done && !r->failed)
			pthread_cond_wait(&r->more, &r->lock);
		if (!r->n || r->failed) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		sl = r->q[r->head];
		r->head = (r->head + 1) % RX_SLOTS;
		r->n--;
		pthread_mutex_unlock(&r->lock);

		const uint8_t *h = r->hashes + sl.index * RGPU_HASH_LEN;
		const char *bad = NULL;
		size_t len = 0;
		char why[300];
		int ret = rgpu_chunk_value_check(sl.val, sl.len, h, buf, &len, &bad);
		if (ret) {
			char hex[13], where[96];
			snprintf(why, sizeof(why), "chunk %zu of %zu (%s..., %s) arrived damaged: %s",
				 sl.index, r->n_all, rgpu_hex(h, 6, hex),
				 rgpu_ckpt_blob_of(r->m, sl.index, where, sizeof(where)), bad);
			rx_fail(r, RGPU_ECORRUPT, why);
		} else if ((ret = rgpu_ckpt_put(r->ck, h, sl.val, sl.len))) {
			snprintf(why, sizeof(why), "storing chunk %zu: %s", sl.index,
				 rgpu_strerror(ret));
			rx_fail(r, ret, why);
		}
		pthread_mutex_lock(&r->lock);
		r->free_v[r->nfree++] = sl.val;
		pthread_cond_signal(&r->room);
		pthread_mutex_unlock(&r->lock);
	}
	free(buf);
	return NULL;
}

/* A free value buffer (waiting for one while every one is queued), or NULL once failed. */
static uint8_t *rx_take(struct rx *r)
{
	uint8_t *v = NULL;

	pthread_mutex_lock(&r->lock);
	while (!r->nfree && !r->failed)
		pthread_cond_wait(&r->room, &r->lock);
	if (!r->failed)
		v = r->free_v[--r->nfree];
	pthread_mutex_unlock(&r->lock);
	return v;
}

static void rx_put(struct rx *r, uint8_t *v, size_t len, size_t index)
{
	pthread_mutex_lock(&r->lock);
	r->q[(r->head + r->n) % RX_SLOTS] = (struct rx_slot){v, len, index};
	r->n++;
	pthread_cond_signal(&r->more);
	pthread_mutex_unlock(&r->lock);
}

/* Answer the PUSH: a refusal (result, why) or the bitmap of chunks to send. */
static int send_need(struct rgpu_conn *c, const struct rgpu_frame_hdr *h, int result,
		     const char *why, uint64_t need, const uint8_t *bitmap, size_t bmlen,
		     const uint8_t *proof)
{
	Rgpu__PushNeed pn = RGPU__PUSH_NEED__INIT;
	struct rgpu_frame_hdr rh = {.type = RGPU_ADMIN_MSG_PUSH, .flags = RGPU_FRAME_REPLY,
				    .ref = h->seq};

	pn.result = result;
	pn.error = (char *)(why ? why : "");
	pn.need = need;
	if (proof) {
		pn.server_proof.data = (uint8_t *)proof;
		pn.server_proof.len = 32;
	}
	rh.payload_len = result ? 0 : bmlen;
	return rgpu_frame_send_hdr(c, &rh, &pn.base, result ? NULL : bitmap);
}

/* the receiver's heartbeat while it checks, stores and commits (rgpu_ticker) */
static void commit_tick(void *c)
{
	rgpu_admin_progress(c, "commit", 0, 0, "");
}

static void store_tick(void *c)
{
	rgpu_admin_progress(c, "store", 0, 0, "");
}

int rgpu_push_receive(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
		      const Rgpu__PushRequest *req, const uint8_t *proof, struct rgpu_store *s,
		      uint64_t *id, uint64_t *done_seq, char *why, size_t whylen)
{
	Rgpu__CkptMeta *m = NULL;
	struct rgpu_ckpt *ck = NULL;
	uint8_t *hashes = NULL, *bitmap = NULL;
	size_t n = req->chunks, nmissing = 0, next = 0, got = 0;
	struct rx rx = {.lock = PTHREAD_MUTEX_INITIALIZER,
			.more = PTHREAD_COND_INITIALIZER,
			.room = PTHREAD_COND_INITIALIZER};
	pthread_t tids[16];
	unsigned nthreads, nstarted = 0;
	char w[300];
	struct rgpu_ticker *hb = NULL;
	int ret, need_sent = 0, done_got = 0;

	if (h->payload_len != n * RGPU_HASH_LEN || n > RGPU_MAX_MANIFEST / RGPU_HASH_LEN) {
		snprintf(why, whylen, "a chunk list of %llu bytes for %zu chunks",
			 (unsigned long long)h->payload_len, n);
		rgpu_conn_discard(c, h->payload_len);
		send_need(c, h, RGPU_EPROTO, why, 0, NULL, 0, proof);
		return RGPU_EPROTO;
	}
	hashes = malloc(n ? n * RGPU_HASH_LEN : 1);
	bitmap = calloc(1, (n + 7) / 8 + 1);
	if (!hashes || !bitmap) {
		snprintf(why, whylen, "out of memory for a checkpoint of %zu chunks", n);
		rgpu_conn_discard(c, h->payload_len);
		send_need(c, h, RGPU_ENOMEM, why, 0, NULL, 0, proof);
		ret = RGPU_ENOMEM;
		goto out;
	}
	ret = rgpu_conn_recv_payload(c, hashes, h->payload_len);
	if (ret) {
		snprintf(why, whylen, "the chunk list broke off: %s", rgpu_strerror(ret));
		goto out;
	}
	/*
	 * A heartbeat until the answer (nothing else writes on c meanwhile): a gc running here
	 * holds the store's gc.lock, which rgpu_ckpt_begin waits for, minutes on a large store,
	 * and a live migration's sender takes silence for a stall
	 */
	struct rgpu_ticker *pre = rgpu_ticker_start(store_tick, c, RGPU_PUSH_HEARTBEAT_MS);
	/* the metadata must make sense for this list before anything is stored */
	ret = rgpu_ckpt_meta_decode(req->meta.data, req->meta.len, n, &m, w, sizeof(w));
	if (!ret)
		ret = rgpu_ckpt_begin(s, &ck);
	if (!ret && rgpu_ckpt_is_live(m))
		rgpu_ckpt_transient(ck); /* a live round's: gone once the job is served */
	if (!ret)
		ret = rgpu_ckpt_set_list(ck, hashes, n);
	if (!ret)
		ret = rgpu_ckpt_missing(ck, bitmap, &nmissing);
	rgpu_ticker_stop(pre);
	if (ret) {
		if (!m)
			snprintf(why, whylen, "the checkpoint's metadata: %s", w);
		else
			snprintf(why, whylen, "the store: %s", rgpu_strerror(ret));
		send_need(c, h, ret, why, 0, NULL, 0, proof);
		goto out;
	}
	ret = send_need(c, h, 0, NULL, nmissing, bitmap, (n + 7) / 8, proof);
	if (ret) {
		snprintf(why, whylen, "the sender left: %s", rgpu_strerror(ret));
		goto out;
	}
	need_sent = 1;
	if (rgpu_fault("push_stall")) /* a target that stops reading (tests: the sender's deadline) */
		sleep(120);
	/* the checkers: at most one per core, and no more than there are chunks to check */
	rx.ck = ck;
	rx.hashes = hashes;
	rx.m = m;
	rx.n_all = n;
	nthreads = MIN(rgpu_parallel_width(), (unsigned)MIN(nmissing, (size_t)16));
	for (size_t i = 0; i < RX_SLOTS && nthreads; i++) {
		if (!(rx.free_v[rx.nfree] = malloc(RGPU_CHUNK_VALUE_MAX)))
			break;
		rx.nfree++;
	}
	for (unsigned t = 0; t < nthreads && rx.nfree; t++)
		if (pthread_create(&tids[nstarted], NULL, rx_main, &rx) == 0)
			nstarted++;
	if (nmissing && !nstarted) {
		snprintf(why, whylen, "out of memory for the push's checkers");
		ret = RGPU_ENOMEM;
		goto out;
	}
	for (;;) {
		struct rgpu_frame_hdr fh;
		uint8_t *body = NULL, *v;
		ret = rgpu_frame_recv_within(c, RGPU_PEER_SERVER, &fh, &body,
					     RGPU_ADMIN_LONG_TIMEOUT_MS);
		if (ret) {
			snprintf(why, whylen, "the push broke off after %zu of %zu chunks: %s", got,
				 nmissing, rgpu_strerror(ret));
			goto out;
		}
		if (fh.type == RGPU_ADMIN_MSG_PUSH_DONE) {
			free(body);
			if (done_seq)
				*done_seq = fh.seq;
			done_got = 1; /* its reply says what follows */
			break;
		}
		Rgpu__ChunkPut *cp = fh.type == RGPU_ADMIN_MSG_CHUNK
					 ? RGPU_PB_UNPACK(rgpu__chunk_put, fh.body_len, body)
					 : NULL;
		free(body);
		/* the chunks come in the order of the list, each asked for once */
		while (next < n && !bit(bitmap, next))
			next++;
		if (!cp || next >= n || cp->hash.len != RGPU_HASH_LEN ||
		    memcmp(cp->hash.data, hashes + next * RGPU_HASH_LEN, RGPU_HASH_LEN) ||
		    fh.payload_len > RGPU_CHUNK_VALUE_MAX) {
			snprintf(why, whylen, "%s where chunk %zu was expected",
				 cp ? "another chunk" : "another message", next);
			if (cp)
				rgpu__chunk_put__free_unpacked(cp, NULL);
			ret = RGPU_EPROTO;
			goto out;
		}
		rgpu__chunk_put__free_unpacked(cp, NULL);
		if (!(v = rx_take(&rx))) {
			ret = rx.ret;
			snprintf(why, whylen, "%s", rx.why);
			goto out;
		}
		ret = rgpu_conn_recv_payload(c, v, fh.payload_len);
		if (ret) {
			pthread_mutex_lock(&rx.lock);
			rx.free_v[rx.nfree++] = v;
			pthread_mutex_unlock(&rx.lock);
			snprintf(why, whylen, "chunk %zu broke off: %s", next, rgpu_strerror(ret));
			goto out;
		}
		rx_put(&rx, v, fh.payload_len, next);
		next++;
		got++;
	}
	/*
	 * Every chunk checked and stored before the commit, which may sync a large checkpoint to
	 * disk: the sender hears a heartbeat meanwhile, so that it can tell this side's silence
	 * from a stall (a live migration's answer deadline). Nothing else writes on c until the
	 * reply, after this returns.
	 */
	/* every byte taken, then silence (tests: the answer deadline; a target that goes on after) */
	if (rgpu_fault("push_mute"))
		sleep(120);
	else if (rgpu_fault("push_pause"))
		sleep(4);
	hb = rgpu_ticker_start(commit_tick, c, RGPU_PUSH_HEARTBEAT_MS);
	pthread_mutex_lock(&rx.lock);
	rx.done = 1;
	pthread_cond_broadcast(&rx.more);
	pthread_mutex_unlock(&rx.lock);
	for (unsigned t = 0; t < nstarted; t++)
		pthread_join(tids[t], NULL);
	nstarted = 0;
	if (rx.failed) {
		ret = rx.ret;
		snprintf(why, whylen, "%s", rx.why);
		goto out;
	}
	if (got != nmissing) {
		snprintf(why, whylen, "the push ended after %zu of the %zu chunks asked for", got,
			 nmissing);
		ret = RGPU_EPROTO;
		goto out;
	}
	/* pushed back into a store that has it already (a restore where it was taken): that one */
	if (rgpu_store_find(s, hashes, n, req->meta.data, req->meta.len, id) == 1) {
		rgpu_ckpt_abort(ck);
		ck = NULL;
		ret = 0;
		goto out;
	}
	ret = rgpu_ckpt_commit(ck, req->meta.data, req->meta.len, id);
	ck = NULL;
	if (ret)
		snprintf(why, whylen, "committing the checkpoint: %s", rgpu_strerror(ret));
out:
	rgpu_ticker_stop(hb);
	if (ret && need_sent && !done_got) {
		/* the sender is still sending chunks: tell it why this side stops */
		rgpu_admin_error(c, ret, why);
	}
	if (nstarted) {
		/* the checkers stop at once: what they have not stored goes with the abort */
		pthread_mutex_lock(&rx.lock);
		rx.failed = 1;
		pthread_cond_broadcast(&rx.more);
		pthread_cond_broadcast(&rx.room);
		pthread_mutex_unlock(&rx.lock);
		for (unsigned t = 0; t < nstarted; t++)
			pthread_join(tids[t], NULL);
	}
	/* every buffer is back: in the free list, or in the queue the checkers left */
	for (size_t i = 0; i < rx.nfree; i++)
		free(rx.free_v[i]);
	for (size_t i = 0; i < rx.n; i++)
		free(rx.q[(rx.head + i) % RX_SLOTS].val);
	if (ck)
		rgpu_ckpt_abort(ck);
	if (m)
		rgpu__ckpt_meta__free_unpacked(m, NULL);
	free(hashes);
	free(bitmap);
	return ret;
}
