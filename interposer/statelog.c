/*
 * The session's state log on the client's side (design.md §6). Every frame is recorded as it
 * is given its sequence number (ip_link_enqueue, under S.q_lock), from the message table's
 * effect column and the builders shared with the worker (rgpu/record.h), so the log is in
 * exactly the order the worker executes. A call's records are provisional until its reply
 * settles them. Capture journals are hashed here as their frames are sent.
 *
 * RGPU_VERIFY_LOG=1: every synchronising request (effect=sync) and the goodbye carry this
 * log's digest; the worker compares it with its own and, when they differ, refuses the request
 * and sends its log, and this file names the first record that differs. A digest is not sent
 * while a call that makes records is in flight on another thread (its records are not settled)
 * nor after an asynchronous error (a fire-and-forget creation may have failed on the worker,
 * and nothing says which).
 *
 * Callers hold S.q_lock for every function here but ip_statelog_init and ip_statelog_mismatch.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "rgpu/util.h"
#include "rgpu_record.h"
#include "session_state.h"

void ip_statelog_init(void)
{
	const char *v = getenv("RGPU_VERIFY_LOG");

	S.verify = v && *v && strcmp(v, "0") != 0;
	S.journals.keep = 0;
	if (st_log_new(&S.log)) {
		pr_warn("out of memory for the state log: nothing is recorded");
		S.log = NULL;
	}
}

/* The same steps as the worker's (rgpu_journals_step), over the frames as they are sent. */
static void journal_step(uint16_t type, const ProtobufCMessage *req, const uint8_t *body,
			 size_t blen, const void *payload, uint64_t plen, struct rgpu_rec_ops *ops)
{
	if (rgpu_journals_step(&S.journals, type, req, body, blen, payload, plen, ops))
		pr_warn("out of memory: a capture journal misses a %s", rgpu_msg_name(type));
}

static void refused(const char *what, const struct rgpu_rec_ops *ops, int i, int ret)
{
	char d[256];
	st_rec_describe(i < ops->n ? &ops->v[i].rec : NULL, d, sizeof(d));
	pr_warn("%s: the state log refused %s: %s", what, d, rgpu_strerror(ret));
}

void ip_statelog_sent(uint16_t type, const ProtobufCMessage *req, const uint8_t *body, size_t blen,
		 const void *payload, uint64_t plen, struct waiter *w)
{
	const struct rgpu_msg_info *mi = rgpu_msg_info(type);
	struct rgpu_rec_ops ops;
	int ret, failed = 0;

	if (!S.log || !mi)
		return;
	if (mi->effect == RGPU_EFFECT_NONE) {
		/* a graph's changes are stepped once they succeeded (ip_statelog_edit) */
		if (S.journals.capturing && !rgpu_journal_edits(type)) {
			ops.n = 0;
			journal_step(type, req, body, blen, payload, plen, &ops);
		}
		return;
	}
	if (mi->effect == RGPU_EFFECT_SYNC || !req)
		return;
	if (rgpu_record_build(type, req, NULL, &ops))
		return;
	journal_step(type, req, body, blen, payload, plen, &ops);
	ret = rgpu_rec_apply(S.log, &ops, NULL, &failed);
	if (ret)
		refused(mi->name, &ops, failed, ret);
	if (w && ops.n) {
		/* a call: what it made is settled by its reply */
		w->rec_sent = malloc(sizeof(ops));
		if (w->rec_sent) {
			memcpy(w->rec_sent, &ops, sizeof(ops));
			S.log_pending++;
		}
	}
}

void ip_statelog_edit(uint16_t type, const ProtobufCMessage *req, const void *payload,
		      uint64_t plen)
{
	struct rgpu_rec_ops ops = {0};
	size_t blen = protobuf_c_message_get_packed_size(req);
	uint8_t *body = malloc(blen ? blen : 1);

	if (!body) {
		pr_warn("out of memory: a graph journal misses a %s", rgpu_msg_name(type));
		return;
	}
	protobuf_c_message_pack(req, body);
	pthread_mutex_lock(&S.q_lock);
	if (S.log)
		journal_step(type, req, body, blen, payload, plen, &ops);
	pthread_mutex_unlock(&S.q_lock);
	free(body);
}

void ip_statelog_graph_at(uint64_t graph, Rgpu__GraphAt *at)
{
	const struct rgpu_journal *j;
	const struct st_rec *r;

	pthread_mutex_lock(&S.q_lock);
	j = rgpu_journals_kept(&S.journals, graph);
	r = S.log ? st_find(S.log, graph) : NULL;
	at->graph = graph;
	at->len = j ? j->total : 0;
	if (r && r->kind == ST_KIND_GRAPH) {
		at->stream = r->graph.stream;
		at->mode = (uint32_t)r->graph.mode;
		at->caplen = r->f[3];
	}
	pthread_mutex_unlock(&S.q_lock);
}

void ip_statelog_settle(uint16_t type, const ProtobufCMessage *req, const ProtobufCMessage *rep,
		   struct waiter *w)
{
	struct rgpu_rec_ops final;
	int ret;

	if (!w->rec_sent)
		return;
	if (rep && rgpu_record_build(type, req, rep, &final) == 0) {
		ret = rgpu_rec_settle(S.log, w->rec_sent, &final);
		if (ret)
			refused(rgpu_msg_name(type), &final, 0, ret);
	} else {
		/* no reply: the session is dead; nothing will be compared again */
		S.log_diverged = 1;
	}
	free(w->rec_sent);
	w->rec_sent = NULL;
	S.log_pending--;
}

int ip_statelog_digest(uint16_t type, uint8_t out[ST_DIGEST_LEN])
{
	const struct rgpu_msg_info *mi = rgpu_msg_info(type);

	if (!S.verify || !S.log || S.log_diverged || S.log_pending)
		return 0;
	if (type != RGPU_MSG_GOODBYE && (!mi || mi->effect != RGPU_EFFECT_SYNC))
		return 0;
	st_digest(S.log, out);
	S.log_checked++;
	return 1;
}

int ip_statelog_wants_digest(uint16_t type)
{
	const struct rgpu_msg_info *mi = rgpu_msg_info(type);
	return S.verify && (type == RGPU_MSG_GOODBYE || (mi && mi->effect == RGPU_EFFECT_SYNC));
}

void ip_statelog_async_error(void)
{
	if (S.verify && !S.log_diverged)
		pr_info("an asynchronous error: the state log is no longer compared with the "
			"server's");
	S.log_diverged = 1;
}

void ip_statelog_mismatch(uint16_t type, const ProtobufCBinaryData *server_log)
{
	struct st_log *theirs = NULL;
	const struct st_rec *a = NULL, *b = NULL;
	char da[256], db[256];
	size_t at = 0;
	int ret;

	pthread_mutex_lock(&S.q_lock);
	ret = st_deserialize(server_log->data, server_log->len, &theirs, NULL);
	if (ret) {
		pr_err("%s: the server's state log differs from this one's and cannot be read: %s",
		       rgpu_msg_name(type), rgpu_strerror(ret));
	} else if (st_compare(S.log, theirs, &at, &a, &b) == 1) {
		st_rec_describe(a, da, sizeof(da));
		st_rec_describe(b, db, sizeof(db));
		pr_err("%s: the state log differs from the server's at record %zu (of %zu here, %zu "
		       "there): here %s; there %s",
		       rgpu_msg_name(type), at, st_count(S.log), st_count(theirs), da, db);
	} else {
		pr_err("%s: the state log differed from the server's when the request was sent "
		       "(it agrees now: another thread changed it since)",
		       rgpu_msg_name(type));
	}
	st_log_free(theirs);
	S.log_diverged = 1; /* reported once; the session goes on unverified */
	pthread_mutex_unlock(&S.q_lock);
}
