/*
 * Replaying a state log (design.md §6, §7): rebuilding a job on a fresh worker from the log of
 * its live objects, with the same ids and the same device addresses. Each record is turned back
 * into the request message it was recorded from (the inverse of proto/record.c's builders) and
 * run through the executor exactly as a client's frame would be (srv_exec, with w->replaying
 * set so that nothing is sent), so the handlers that serve a job are the ones that rebuild it
 * and the worker records its own log as it goes. A captured graph is rebuilt by capturing its
 * capture journal again. At the end the rebuilt log must equal the one replayed, record for
 * record, and the worker must really hold every object and mapping it names.
 *
 * Module globals are the exception (design.md §3): the driver places them, so a fresh process
 * may put one elsewhere. A global rebuilt with the same id, parent, name and size at another
 * address is not a failed rebuild but an outcome of its own, reported global by global: the
 * rest of the log must still be equal exactly (the rebuilt log, with those addresses put back,
 * must compare equal). A restore (srv_replay_restore) keeps the client's address for such a
 * global and translates it; rgpud --replay reports it with its own exit status.
 *
 * Also here: rgpud --replay FILE (srv_replay_file), which does this on a worker set up as for a
 * job, for the replay tests (RGPU_STATE_DUMP) and for an operator checking a dump.
 *
 * This file must never guess: a record it does not know how to rebuild, a module image the
 * server does not have, a journal that does not hash to its graph's hash, or a handler that
 * fails ends the replay with a message naming the record. It trusts nothing in the files it
 * reads beyond what st_deserialize() checked: every length in a journals file is checked before
 * it is used.
 */
#define LOG_PREFIX "replay: "
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

#define JOURNAL_ENTRY_HDR 16 /* graph id u64 LE, length u64 LE */
#define JOURNAL_FRAME_HDR 14 /* type u16 LE, body length u32 LE, payload length u64 LE */

/* A module global the driver placed elsewhere: its record in the log replayed, and where now. */
struct moved {
	const struct st_rec *want;
	uint64_t now;
};

struct replay {
	struct srv_worker *w;
	struct st_log *want;
	const uint8_t *journals;
	size_t jlen;
	uint64_t seq;
	char *why;
	size_t whylen;
	struct moved *moved; /* after verify(): the globals placed elsewhere, in log order */
	size_t nmoved, capmoved;
	/*
	 * What changed graphs and execs after they were made, run once every record is: those
	 * frames may name objects made after the graph (a function looked up, an event).
	 */
	struct later {
		const struct st_rec *rec;
		const uint8_t *j;
		size_t from, to;
	} *later;
	size_t nlater, caplater;
};

/* Fill rp->why with "RECORD: what went wrong" and return code. */
static int fail(struct replay *rp, const struct st_rec *rec, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct replay *rp, const struct st_rec *rec, int code, const char *fmt, ...)
{
	char what[256], msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (rec) {
		st_rec_describe(rec, what, sizeof(what));
		snprintf(rp->why, rp->whylen, "%s: %s", what, msg);
	} else {
		snprintf(rp->why, rp->whylen, "%s", msg);
	}
	return code;
}

/*
 * Run one frame through the executor. body and payload are malloc'd and taken over. Fails
 * when the executor refuses the frame or the handler's result (its reply, or the error it kept
 * for the next reply) is not CUDA_SUCCESS.
 */
static int run_frame(struct replay *rp, const struct st_rec *rec, unsigned type, uint8_t *body,
		     size_t blen, void *payload, uint64_t plen)
{
	struct srv_worker *w = rp->w;
	struct srv_frame f = {0};
	CUresult r;
	int ret;

	f.hdr.type = (uint16_t)type;
	f.hdr.body_len = (uint32_t)blen;
	f.hdr.payload_len = plen;
	f.hdr.seq = ++rp->seq;
	f.body = body;
	f.payload = payload;
	w->replay_result = CUDA_SUCCESS;
	ret = srv_exec(w, &f);
	free(f.body);
	free(f.payload);
	if (ret)
		return fail(rp, rec, ret < 0 ? ret : RGPU_EPROTO, "%s was refused: %s",
			    rgpu_msg_name(type), rgpu_strerror(ret < 0 ? ret : RGPU_EPROTO));
	r = w->replay_result != CUDA_SUCCESS ? w->replay_result : w->exec_result;
	if (r != CUDA_SUCCESS)
		return fail(rp, rec, RGPU_ECUDA, "%s failed: %s", rgpu_msg_name(type),
			    srv_cu_name(&w->drv, r));
	return 0;
}

/* Pack m and run it as a frame of this type. */
static int run_msg(struct replay *rp, const struct st_rec *rec, unsigned type,
		   const ProtobufCMessage *m)
{
	size_t blen = protobuf_c_message_get_packed_size(m);
	uint8_t *body = malloc(blen ? blen : 1);

	if (!body)
		return fail(rp, rec, RGPU_ENOMEM, "out of memory for %s", rgpu_msg_name(type));
	protobuf_c_message_pack(m, body);
	return run_frame(rp, rec, type, body, blen, NULL, 0);
}

/* ---- captured graphs ---------------------------------------------------------------------- */

/* Check the layout of a journals file: entries that end exactly at its end. */
static int check_journals(struct replay *rp)
{
	size_t off = 0;

	while (off < rp->jlen) {
		uint64_t len;
		if (rp->jlen - off < JOURNAL_ENTRY_HDR)
			return fail(rp, NULL, RGPU_ECORRUPT,
				    "the capture journals are cut in an entry header at byte %zu",
				    off);
		len = rd_le64(rp->journals + off + 8);
		if (len > rp->jlen - off - JOURNAL_ENTRY_HDR)
			return fail(
			    rp, NULL, RGPU_ECORRUPT,
			    "a capture journal at byte %zu claims %llu bytes, beyond the end "
			    "of the journals",
			    off, (unsigned long long)len);
		off += JOURNAL_ENTRY_HDR + (size_t)len;
	}
	return 0;
}

/* The journal of graph id (the first one kept: the worker puts the newest first), or NULL. */
static const uint8_t *find_journal(struct replay *rp, uint64_t id, size_t *len)
{
	size_t off = 0;

	while (off < rp->jlen) {
		uint64_t gid = rd_le64(rp->journals + off), n = rd_le64(rp->journals + off + 8);
		if (gid == id) {
			*len = (size_t)n;
			return rp->journals + off + JOURNAL_ENTRY_HDR;
		}
		off += JOURNAL_ENTRY_HDR + (size_t)n;
	}
	return NULL;
}

/*
 * A capture into the graph in its journal (cuStreamBeginCaptureToGraph): 0 when the frame is
 * one. Its stream, when it has died since, is stood in for by a stream of the same id, made at
 * the begin and destroyed after the end (never in the log).
 */
static uint64_t stand_in_stream;

static int capture_to_graph(struct replay *rp, const struct st_rec *rec, const uint8_t *body,
			    size_t blen, int begin)
{
	struct srv_worker *w = rp->w;
	Rgpu__CaptureOp *m = RGPU_PB_UNPACK(rgpu__capture_op, blen, body);
	int ret = 0;

	if (!m)
		return -1;
	if (!m->to_graph) {
		rgpu__capture_op__free_unpacked(m, NULL);
		return -1;
	}
	if (begin && !srv_obj_find(w, m->stream, ST_KIND_STREAM)) {
		Rgpu__StreamCreate sc = RGPU__STREAM_CREATE__INIT;
		sc.stream = m->stream;
		sc.ctx = m->ctx;
		w->journal_off++;
		ret = run_msg(rp, rec, RGPU_MSG_STREAM_CREATE, &sc.base);
		w->journal_off--;
		stand_in_stream = ret ? 0 : m->stream;
	}
	rgpu__capture_op__free_unpacked(m, NULL);
	return ret ? -1 : 0;
}

static int stand_in_done(struct replay *rp, const struct st_rec *rec)
{
	Rgpu__StreamOp so = RGPU__STREAM_OP__INIT;
	int ret;

	if (!stand_in_stream)
		return 0;
	so.stream = stand_in_stream;
	so.ctx = rp->w->cur_ctx_id;
	stand_in_stream = 0;
	rp->w->journal_off++;
	ret = run_msg(rp, rec, RGPU_MSG_STREAM_DESTROY, &so.base);
	rp->w->journal_off--;
	return ret;
}

/*
 * Frames [from, to) of a graph's journal through the executor, in order: the work a capture
 * recorded, and what changed the graph node by node (one clone's first frame may be its making).
 */
static int run_journal(struct replay *rp, const struct st_rec *rec, const uint8_t *j,
		       size_t from, size_t to)
{
	size_t off = from;

	while (off < to) {
		unsigned type;
		uint64_t blen, plen;
		uint8_t *body;
		void *payload = NULL;

		if (to - off < JOURNAL_FRAME_HDR)
			return fail(rp, rec, RGPU_ECORRUPT,
				    "its graph journal is cut in a frame header at byte %zu", off);
		type = rd_le16(j + off);
		blen = rd_le32(j + off + 2);
		plen = rd_le64(j + off + 6);
		off += JOURNAL_FRAME_HDR;
		if (blen > to - off || plen > to - off - blen)
			return fail(rp, rec, RGPU_ECORRUPT,
				    "its graph journal is cut in a %s frame at byte %zu",
				    rgpu_msg_name(type), off - JOURNAL_FRAME_HDR);
		/*
		 * only what a journal records: work, changes, a clone's making, and captures into
		 * the graph (cuStreamBeginCaptureToGraph), whose records come and go with them
		 */
		if (!rgpu_journal_wants(type) && !rgpu_journal_edits(type) &&
		    !(type == RGPU_MSG_GRAPH_CLONE && off == JOURNAL_FRAME_HDR) &&
		    !((type == RGPU_MSG_CAPTURE_BEGIN || type == RGPU_MSG_CAPTURE_END) &&
		      capture_to_graph(rp, rec, j + off, blen, type == RGPU_MSG_CAPTURE_BEGIN) == 0))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "its graph journal holds a %s frame, which no journal records",
				    rgpu_msg_name(type));
		body = malloc(blen ? blen : 1);
		if (plen)
			payload = malloc(plen);
		if (!body || (plen && !payload)) {
			free(body);
			free(payload);
			return fail(rp, rec, RGPU_ENOMEM, "out of memory for its graph journal");
		}
		memcpy(body, j + off, blen);
		if (plen)
			memcpy(payload, j + off + blen, plen);
		off += blen + plen;
		int ret = run_frame(rp, rec, type, body, blen, payload, plen);
		if (ret == 0 && type == RGPU_MSG_CAPTURE_END)
			ret = stand_in_done(rp, rec);
		if (ret)
			return ret;
	}
	return 0;
}

/* Frames [from, to) of journal j, to be run once every record is (struct replay, `later`). */
static int run_later(struct replay *rp, const struct st_rec *rec, const uint8_t *j, size_t from,
		     size_t to)
{
	if (rp->nlater == rp->caplater) {
		size_t cap = rp->caplater ? 2 * rp->caplater : 16;
		struct later *v = realloc(rp->later, cap * sizeof(*v));
		if (!v)
			return fail(rp, rec, RGPU_ENOMEM, "out of memory");
		rp->later = v;
		rp->caplater = cap;
	}
	rp->later[rp->nlater++] = (struct later){rec, j, from, to};
	return 0;
}

/* What a graph is built from: its journal's first `len` bytes, and how it began. */
struct gsrc {
	uint64_t key;           /* the graph's id in the log and in the journal's frames */
	uint64_t len;           /* bytes of its journal that make it (0: none) */
	uint64_t stream, mode;  /* captured: on this stream, in this mode ... */
	uint64_t caplen;        /* ... the journal's first caplen bytes being the capture's */
	const uint8_t *hash;    /* when known: the SHA-256 of the first hlen bytes */
	uint64_t hlen;
};

/*
 * Build a graph under id as from its journal. A captured graph is captured again on the stream
 * it was captured on (a stream that has died since is stood in for by a stream of the same id,
 * made for the capture and destroyed after it: the journal's frames name that id; its flags do
 * not reach the graph); a clone begins with the frame that made it; any other graph is made
 * empty. What changed it node by node follows. Under another id than its own (a scratch graph:
 * a graph as it was when an exec, a clone or an update used it), the frames' id is redirected
 * there and nothing is recorded.
 */
static int build_graph(struct replay *rp, const struct st_rec *rec, const struct gsrc *g,
		       uint64_t as)
{
	struct srv_worker *w = rp->w;
	const uint8_t *j = NULL;
	uint8_t h[RGPU_HASH_LEN];
	size_t jlen = 0, pos = 0;
	int stand_in = 0, ret = 0, scratch = as != g->key;

	if (g->len) {
		j = find_journal(rp, g->key, &jlen);
		if (!j)
			return fail(rp, rec, RGPU_ENOTFOUND, "the journal of graph %llu is not %s",
				    (unsigned long long)g->key,
				    rp->jlen ? "among the graph journals beside the log"
					     : "here: there are no graph journals beside the log");
		if (g->len > jlen || g->caplen > g->len)
			return fail(rp, rec, RGPU_ECORRUPT,
				    "graph %llu is built from %llu bytes of its journal (%llu of "
				    "them captured), which holds %zu",
				    (unsigned long long)g->key, (unsigned long long)g->len,
				    (unsigned long long)g->caplen, jlen);
	}
	if (g->hash) {
		if (g->hlen > jlen)
			return fail(rp, rec, RGPU_ECORRUPT, "its graph journal is shorter (%zu "
				    "bytes) than what its hash covers (%llu)",
				    jlen, (unsigned long long)g->hlen);
		rgpu_sha256(j ? j : (const uint8_t *)"", (size_t)g->hlen, h);
		if (memcmp(h, g->hash, RGPU_HASH_LEN))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "its graph journal (%llu bytes) does not hash to the hash it "
				    "was recorded with",
				    (unsigned long long)g->hlen);
	}
	if (w->ngredir == (int)ARRAY_SIZE(w->gredir))
		return fail(rp, rec, RGPU_EUNSUPPORTED,
			    "graphs built from graphs nest deeper than %zu", ARRAY_SIZE(w->gredir));
	w->gredir[w->ngredir].from = g->key;
	w->gredir[w->ngredir++].to = as;
	w->journal_off += scratch;
	if (g->stream) {
		Rgpu__CaptureOp cap = RGPU__CAPTURE_OP__INIT;
		if (!srv_obj_find(w, g->stream, ST_KIND_STREAM)) {
			Rgpu__StreamCreate sc = RGPU__STREAM_CREATE__INIT;
			if (st_find(rp->want, g->stream) || srv_obj_find(w, g->stream, 0)) {
				ret = fail(rp, rec, RGPU_ECORRUPT,
					   "its capture stream %llu is another kind of object now",
					   (unsigned long long)g->stream);
				goto out;
			}
			sc.stream = g->stream;
			sc.ctx = rec->ctx;
			w->journal_off++; /* a stand-in: never in the log */
			ret = run_msg(rp, rec, RGPU_MSG_STREAM_CREATE, &sc.base);
			w->journal_off--;
			if (ret)
				goto out;
			stand_in = 1;
		}
		cap.stream = g->stream;
		cap.ctx = rec->ctx;
		cap.mode = (uint32_t)g->mode;
		cap.graph = as;
		ret = run_msg(rp, rec, RGPU_MSG_CAPTURE_BEGIN, &cap.base);
		if (ret == 0)
			ret = run_journal(rp, rec, j, 0, (size_t)g->caplen);
		if (ret == 0)
			ret = run_msg(rp, rec, RGPU_MSG_CAPTURE_END, &cap.base);
		pos = (size_t)g->caplen;
		if (stand_in) {
			Rgpu__StreamOp so = RGPU__STREAM_OP__INIT;
			so.stream = g->stream;
			so.ctx = rec->ctx;
			w->journal_off++;
			int r2 = run_msg(rp, rec, RGPU_MSG_STREAM_DESTROY, &so.base);
			w->journal_off--;
			if (ret == 0)
				ret = r2;
		}
	} else if (g->len >= JOURNAL_FRAME_HDR && rd_le16(j) == RGPU_MSG_GRAPH_CLONE) {
		/* a clone: the frame that made it, now */
		size_t first = JOURNAL_FRAME_HDR + rd_le32(j + 2) + (size_t)rd_le64(j + 6);
		if (first > g->len) {
			ret = fail(rp, rec, RGPU_ECORRUPT,
				   "its graph journal is cut in the frame that made it");
			goto out;
		}
		ret = run_journal(rp, rec, j, 0, first);
		pos = first;
	} else {
		Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
		m.graph = as;
		m.ctx = rec->ctx;
		ret = run_msg(rp, rec, RGPU_MSG_GRAPH_CREATE, &m.base);
	}
	if (ret == 0 && scratch) {
		ret = run_journal(rp, rec, j, pos, (size_t)g->len);
	} else if (ret == 0 && pos < g->len) {
		ret = run_later(rp, rec, j, pos, (size_t)g->len);
	}
out:
	w->journal_off -= scratch;
	w->ngredir--;
	return ret;
}

/* The journal fields of a rebuilt record are the log's: the frames were checked against them. */
static int keep_journal_fields(struct replay *rp, const struct st_rec *rec)
{
	const struct st_rec *now = st_find(rp->w->log, rec->id);
	struct st_rec r;
	int ret;

	if (!now)
		return 0; /* the record's making failed: reported there */
	r = *now;
	r.has_hash = rec->has_hash;
	memcpy(r.hash, rec->hash, ST_HASH_LEN);
	memcpy(r.f, rec->f, sizeof(r.f));
	ret = st_update(rp->w->log, &r);
	return ret ? fail(rp, rec, ret, "cannot record it again: %s", rgpu_strerror(ret)) : 0;
}

static struct replay *current; /* the replay graph_at() serves (the executor's thread only) */
static uint64_t next_scratch;

/* w->graph_at: a graph as a message used it, built under a scratch id. */
static CUresult graph_at(struct srv_worker *w, const struct Rgpu__GraphAt *at, uint64_t as)
{
	struct gsrc g = {at->graph, at->len, at->stream, at->mode, at->caplen, NULL, 0};
	struct st_rec rec = {.kind = ST_KIND_GRAPH, .id = at->graph, .ctx = w->cur_ctx_id};
	uint64_t ctx = w->cur_ctx_id;
	/* the frames run inside the handler of the frame that asked: its state comes back */
	int recorded = w->exec_recorded;
	CUresult result = w->exec_result, replayed = w->replay_result;
	int ret;

	if (!current)
		return CUDA_ERROR_INVALID_VALUE;
	ret = build_graph(current, &rec, &g, as);
	srv_use_ctx(w, ctx);
	w->exec_recorded = recorded;
	w->exec_result = result;
	w->replay_result = replayed;
	if (ret)
		pr_warn("%s", current->why);
	return ret ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static int replay_graph(struct replay *rp, const struct st_rec *rec)
{
	struct gsrc g = {rec->id, 0, rec->graph.stream, rec->graph.mode, rec->f[3], NULL, 0};
	size_t jlen = 0;
	int ret;

	if (find_journal(rp, rec->id, &jlen))
		g.len = jlen;
	if (g.stream && !rec->has_hash)
		return fail(rp, rec, RGPU_EUNSUPPORTED,
			    "a captured graph without a journal hash cannot be rebuilt");
	if (g.stream && !g.len)
		return fail(rp, rec, RGPU_ENOTFOUND, "its capture journal is not %s",
			    rp->jlen ? "among the graph journals beside the log"
				     : "here: there are no graph journals beside the log");
	if (g.stream) {
		g.hash = rec->hash;
		g.hlen = rec->f[3];
	}
	if (rec->f[4] && !g.len)
		return fail(rp, rec, RGPU_ENOTFOUND,
			    "it is a clone of graph %llu, and its journal, which makes it, is "
			    "missing",
			    (unsigned long long)rec->f[4]);
	ret = build_graph(rp, rec, &g, rec->id);
	if (ret == 0 && rec->f[4])
		ret = keep_journal_fields(rp, rec);
	return ret;
}

/*
 * An executable graph: instantiated from its graph as it was then (the log keeps the length
 * and hash of the graph's journal at that time), built under a scratch id that goes with the
 * exec, whether the graph lives on (changed since or not) or is gone (PyTorch destroys a
 * captured graph once instantiated); then what changed the exec itself, from its own journal.
 */
static int replay_exec(struct replay *rp, const struct st_rec *rec)
{
	struct srv_worker *w = rp->w;
	struct gsrc g = {rec->f[1], rec->f[4], rec->f[2], rec->f[3], rec->f[5], NULL, 0};
	Rgpu__GraphOp m = RGPU__GRAPH_OP__INIT;
	uint64_t scratch = (1ull << 60) | ++next_scratch;
	const uint8_t *j;
	size_t jlen = 0;
	int ret;

	if (rec->has_hash) {
		g.hash = rec->hash;
		g.hlen = rec->f[4];
	}
	if (g.stream && !g.len)
		return fail(rp, rec, RGPU_EUNSUPPORTED,
			    "it was instantiated from captured graph %llu, whose journal it does "
			    "not name: it cannot be rebuilt",
			    (unsigned long long)g.key);
	ret = build_graph(rp, rec, &g, scratch);
	if (ret)
		return ret;
	m.exec = rec->id;
	m.graph = rec->f[1];
	m.ctx = rec->ctx;
	m.flags = rec->graph_exec.flags;
	w->gredir[w->ngredir].from = rec->f[1];
	w->gredir[w->ngredir++].to = scratch;
	ret = run_msg(rp, rec, RGPU_MSG_GRAPH_INSTANTIATE, &m.base);
	w->ngredir--;
	if (ret == 0) {
		srv_gexec_own(w, rec->id, scratch);
		ret = keep_journal_fields(rp, rec);
	} else {
		struct srv_obj *o = srv_obj_find(w, scratch, ST_KIND_GRAPH);
		if (o)
			srv_obj_release(w, o);
		srv_gnodes_forget(w, scratch);
	}
	j = ret == 0 ? find_journal(rp, rec->id, &jlen) : NULL;
	if (j)
		ret = run_later(rp, rec, j, 0, jlen);
	return ret;
}

/* ---- one record --------------------------------------------------------------------------- */

static int replay_attr(struct replay *rp, const struct st_rec *rec)
{
	const struct st_rec *p = st_find(rp->want, rec->parent);
	uint64_t key = rec->attr.key;

	switch (key >> 32) {
	case RGPU_ATTR_FUNC: {
		Rgpu__FuncAttr m = RGPU__FUNC_ATTR__INIT;
		m.func = rec->parent;
		m.attrib = (int32_t)(key & 0xffff);
		m.device = (int16_t)(uint16_t)(key >> 16 & 0xffff);
		m.value = (int64_t)rec->attr.value;
		m.ctx = p ? p->ctx : 0;
		return run_msg(rp, rec, RGPU_MSG_FUNC_SET_ATTR, &m.base);
	}
	case RGPU_ATTR_CONFIG: {
		/* cache or shared-memory configuration of a context or a function */
		Rgpu__CtxConfig m = RGPU__CTX_CONFIG__INIT;
		int fn = p && p->kind != ST_KIND_CONTEXT;
		m.ctx = fn ? p->ctx : rec->parent;
		m.func = fn ? rec->parent : 0;
		m.kind = (Rgpu__ConfigKind)(key & 0xff);
		m.value = (int32_t)rec->attr.value;
		return run_msg(rp, rec, RGPU_MSG_CTX_SET_CONFIG, &m.base);
	}
	case RGPU_ATTR_LIMIT: {
		Rgpu__CtxLimit m = RGPU__CTX_LIMIT__INIT;
		m.ctx = rec->parent;
		m.limit = (int32_t)(key & 0xffff);
		m.value = rec->attr.value;
		return run_msg(rp, rec, RGPU_MSG_CTX_SET_LIMIT, &m.base);
	}
	case RGPU_ATTR_STREAM: {
		Rgpu__CaptureOp m = RGPU__CAPTURE_OP__INIT;
		if (key & 0xff) {
			/* cuStreamSetAttribute: on the stream, or on its context's NULL stream */
			Rgpu__StreamAttr a = RGPU__STREAM_ATTR__INIT;
			uint8_t v[RGPU_STREAM_ATTR_BYTES];
			for (size_t i = 0; i < sizeof(v); i++)
				v[i] = (uint8_t)(rec->f[1 + i / 8] >> (8 * (i % 8)));
			a.attr = (int32_t)(key & 0xff);
			a.stream = p && p->kind == ST_KIND_STREAM ? rec->parent : 0;
			a.ctx = p && p->kind == ST_KIND_STREAM ? p->ctx : rec->parent;
			a.value.data = v;
			a.value.len = sizeof(v);
			return run_msg(rp, rec, RGPU_MSG_STREAM_SET_ATTR, &a.base);
		}
		/* a capture in progress: its stream enters capture mode again (without the work
		 * captured so far, which only a finished capture's journal keeps) */
		m.stream = rec->parent;
		m.ctx = p ? p->ctx : 0;
		m.mode = (uint32_t)rec->attr.value;
		return run_msg(rp, rec, RGPU_MSG_CAPTURE_BEGIN, &m.base);
	}
	}
	return fail(rp, rec, RGPU_EUNSUPPORTED, "an attribute of key space %llu cannot be replayed",
		    (unsigned long long)(key >> 32));
}

/*
 * An application's mapping: map its physical memory again (the record before it in creation
 * order), then give each device the access the record keeps, in one call.
 */
static int replay_app_map(struct replay *rp, const struct st_rec *rec)
{
	Rgpu__VmmMap m = RGPU__VMM_MAP__INIT;
	Rgpu__VmmAccess a = RGPU__VMM_ACCESS__INIT;
	int ret;

	m.addr = a.addr = rec->vmm.addr;
	m.size = a.size = rec->vmm.size;
	m.offset = a.offset = rec->vmm.offset;
	m.handle = a.handle = rec->parent;
	m.device = a.device = (int32_t)rec->vmm.device;
	ret = run_msg(rp, rec, RGPU_MSG_VMM_MAP, &m.base);
	if (ret || !rec->vmm.access)
		return ret;
	if (rec->vmm.access >> 32)
		return fail(rp, rec, RGPU_ECORRUPT, "its access names a device beyond 15");
	a.access = (uint32_t)rec->vmm.access;
	for (int d = 0; d < 16; d++)
		if (a.access >> (2 * d) & 3)
			a.devices |= 1u << d;
	return run_msg(rp, rec, RGPU_MSG_VMM_ACCESS, &a.base);
}

static int replay_rec(const struct st_rec *rec, void *arg)
{
	struct replay *rp = arg;
	int ret;

	switch (rec->kind) {
	case ST_KIND_CONTEXT: {
		Rgpu__CtxCreate m = RGPU__CTX_CREATE__INIT;
		m.ctx = rec->id;
		m.device = (int32_t)rec->context.device;
		m.flags = (uint32_t)rec->context.flags;
		m.primary = rec->context.primary != 0;
		ret = run_msg(rp, rec, RGPU_MSG_CTX_CREATE, &m.base);
		break;
	}
	case ST_KIND_VMM_MAP: {
		Rgpu__MemAlloc m = RGPU__MEM_ALLOC__INIT;
		if (rec->parent) {
			ret = replay_app_map(rp, rec);
			break;
		}
		m.map_addr = rec->vmm.addr;
		m.map_size = rec->vmm.size;
		m.device = (int32_t)rec->vmm.device;
		ret = run_msg(rp, rec, RGPU_MSG_MEM_ALLOC, &m.base);
		break;
	}
	case ST_KIND_PHYSMEM: {
		Rgpu__VmmCreate m = RGPU__VMM_CREATE__INIT;
		m.handle = rec->id;
		m.size = rec->physmem.size;
		m.device = (int32_t)rec->physmem.device;
		ret = run_msg(rp, rec, RGPU_MSG_VMM_CREATE, &m.base);
		break;
	}
	case ST_KIND_ALLOC: {
		Rgpu__MemAlloc m = RGPU__MEM_ALLOC__INIT;
		m.addr = rec->alloc.addr;
		m.size = rec->alloc.size;
		m.device = (int32_t)rec->alloc.device;
		ret = run_msg(rp, rec, RGPU_MSG_MEM_ALLOC, &m.base);
		break;
	}
	case ST_KIND_MODULE: {
		Rgpu__ModuleLoad m = RGPU__MODULE_LOAD__INIT;
		uint8_t hash[ST_HASH_LEN];
		char hex[2 * ST_HASH_LEN + 1];
		memcpy(hash, rec->hash, sizeof(hash));
		m.module = rec->id;
		m.hash.data = hash;
		m.hash.len = rec->has_hash ? sizeof(hash) : 0;
		m.image_size = rec->module.size;
		m.library = rec->module.library != 0;
		m.ctx = rec->ctx;
		ret = run_msg(rp, rec, RGPU_MSG_MODULE_LOAD, &m.base);
		/* the handler answered need_image: the image is not in the module cache */
		if (ret == 0 && !srv_obj_find(rp->w, rec->id, ST_KIND_MODULE))
			ret = fail(rp, rec, RGPU_ENOTFOUND,
				   "module image %s is not in this server's cache",
				   rgpu_hex(rec->hash, ST_HASH_LEN, hex));
		break;
	}
	case ST_KIND_FUNCTION:
	case ST_KIND_KERNEL: {
		Rgpu__FuncGet m = RGPU__FUNC_GET__INIT;
		m.func = rec->id;
		m.parent = rec->parent;
		m.name = (char *)(rec->name ? rec->name : "");
		m.kind = (uint32_t)rec->f[0];
		m.ctx = rec->ctx;
		ret = run_msg(rp, rec, RGPU_MSG_FUNC_GET, &m.base);
		break;
	}
	case ST_KIND_GLOBAL: {
		Rgpu__GlobalGet m = RGPU__GLOBAL_GET__INIT;
		const struct st_rec *mod = st_find(rp->want, rec->parent);
		m.global = rec->id;
		m.module = rec->parent;
		m.name = (char *)(rec->name ? rec->name : "");
		m.library = mod && mod->module.library;
		m.ctx = rec->ctx;
		ret = run_msg(rp, rec, RGPU_MSG_GLOBAL_GET, &m.base);
		break;
	}
	case ST_KIND_STREAM: {
		Rgpu__StreamCreate m = RGPU__STREAM_CREATE__INIT;
		m.stream = rec->id;
		m.ctx = rec->ctx;
		m.flags = (uint32_t)rec->stream.flags;
		m.priority = (int32_t)rec->stream.priority;
		ret = run_msg(rp, rec, RGPU_MSG_STREAM_CREATE, &m.base);
		break;
	}
	case ST_KIND_EVENT: {
		Rgpu__EventCreate m = RGPU__EVENT_CREATE__INIT;
		m.event = rec->id;
		m.ctx = rec->ctx;
		m.flags = (uint32_t)rec->event.flags;
		ret = run_msg(rp, rec, RGPU_MSG_EVENT_CREATE, &m.base);
		break;
	}
	case ST_KIND_ATTR:
		ret = replay_attr(rp, rec);
		break;
	case ST_KIND_ARRAY:
	case ST_KIND_MIPMAP: {
		Rgpu__ArrayCreate m = RGPU__ARRAY_CREATE__INIT;
		m.array = rec->id;
		m.ctx = rec->ctx;
		m.width = rec->array.width;
		m.height = rec->array.height;
		m.depth = rec->array.depth;
		m.format = (uint32_t)rec->array.format;
		m.channels = (uint32_t)(rec->array.format >> 32);
		m.flags = (uint32_t)rec->array.flags;
		m.mipmap = rec->kind == ST_KIND_ARRAY ? rec->parent : 0;
		m.level = rec->parent ? (uint32_t)rec->array.level : 0;
		m.levels = rec->kind == ST_KIND_MIPMAP ? (uint32_t)rec->array.level : 0;
		ret = run_msg(rp, rec,
			      rec->kind == ST_KIND_MIPMAP ? RGPU_MSG_MIPMAP_CREATE
							  : RGPU_MSG_ARRAY_CREATE,
			      &m.base);
		break;
	}
	case ST_KIND_TEXOBJ: {
		/* the handler refuses a value other than the recorded one, and says both */
		Rgpu__TexCreate m = RGPU__TEX_CREATE__INIT;
		m.obj = rec->id;
		m.ctx = rec->ctx;
		m.surface = rec->texobj.surface != 0;
		m.has_view = rec->texobj.has_view != 0;
		m.resource = rec->texobj.resource;
		m.desc = (char *)(rec->name ? rec->name : "");
		m.want = rec->texobj.value;
		ret = run_msg(rp, rec, RGPU_MSG_TEXOBJ_CREATE, &m.base);
		if (ret)
			ret = fail(rp, rec, ret,
				   "the %s object could not be made again with value %#llx, which "
				   "the program holds (a texture or surface object cannot be placed)",
				   m.surface ? "surface" : "texture",
				   (unsigned long long)rec->texobj.value);
		break;
	}
	case ST_KIND_GRAPH:
		ret = replay_graph(rp, rec);
		break;
	case ST_KIND_GRAPH_EXEC:
		ret = replay_exec(rp, rec);
		break;
	default:
		ret = fail(rp, rec, RGPU_EUNSUPPORTED, "a %s record cannot be replayed yet",
			   st_kind_name(rec->kind));
		break;
	}
	if (ret == 0 && !st_find(rp->w->log, rec->id))
		ret = fail(rp, rec, RGPU_ECORRUPT,
			   "the request that makes it succeeded but recorded nothing");
	return ret;
}

/* ---- after the replay: does the worker hold what the log says? ---------------------------- */

struct maps {
	const struct st_rec **v;
	size_t n, cap;
};

static int collect_map(const struct st_rec *rec, void *arg)
{
	struct maps *m = arg;

	if (rec->kind != ST_KIND_VMM_MAP)
		return 0;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		const struct st_rec **v = realloc(m->v, cap * sizeof(*v));
		if (!v)
			return RGPU_ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = rec;
	return 0;
}

static int map_order(const void *a, const void *b)
{
	const struct st_rec *x = *(const struct st_rec *const *)a;
	const struct st_rec *y = *(const struct st_rec *const *)b;
	return x->vmm.addr < y->vmm.addr ? -1 : x->vmm.addr > y->vmm.addr;
}

/* The mapping record of the log that holds [addr, addr+size), or NULL. */
static const struct st_rec *containing_map(const struct maps *m, uint64_t addr, uint64_t size)
{
	size_t lo = 0, hi = m->n;

	/* the last mapping that starts at or below addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid]->vmm.addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct st_rec *r = m->v[lo - 1];
	if (addr - r->vmm.addr >= r->vmm.size || size > r->vmm.size - (addr - r->vmm.addr))
		return NULL;
	return r;
}

struct check {
	struct replay *rp;
	struct maps maps;
};

static int check_rec(const struct st_rec *rec, void *arg)
{
	struct check *c = arg;
	struct replay *rp = c->rp;
	struct srv_worker *w = rp->w;
	const struct st_rec *map;

	switch (rec->kind) {
	case ST_KIND_CONTEXT:
	case ST_KIND_STREAM:
	case ST_KIND_EVENT:
	case ST_KIND_MODULE:
	case ST_KIND_FUNCTION:
	case ST_KIND_KERNEL:
	case ST_KIND_GRAPH:
	case ST_KIND_GRAPH_EXEC:
	case ST_KIND_PHYSMEM:
	case ST_KIND_ARRAY:
	case ST_KIND_MIPMAP:
	case ST_KIND_TEXOBJ:
		if (!srv_obj_find(w, rec->id, (int)rec->kind))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "recorded, but the worker holds no %s with this id",
				    st_kind_name(rec->kind));
		break;
	case ST_KIND_VMM_MAP:
		if (!srv_mapped(w, rec->vmm.addr, rec->vmm.size))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "recorded, but the worker has no such live mapping");
		break;
	case ST_KIND_ALLOC:
		map = containing_map(&c->maps, rec->alloc.addr, rec->alloc.size);
		if (!map)
			return fail(rp, rec, RGPU_ECORRUPT, "it lies in no mapping of the log");
		if (!srv_mapped(w, map->vmm.addr, map->vmm.size))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "its mapping at 0x%llx is not live on the worker",
				    (unsigned long long)map->vmm.addr);
		break;
	case ST_KIND_GLOBAL: {
		/* where the driver put it this time: verify() compared everything else */
		const struct st_rec *now = st_find(w->log, rec->id);
		uint64_t addr = now ? now->global.addr : rec->global.addr;
		if (!srv_dev_range_ok(w, addr, rec->global.size ? rec->global.size : 1))
			return fail(rp, rec, RGPU_ECORRUPT,
				    "recorded, but the worker does not know its range");
		break;
	}
	default:
		break;
	}
	return 0;
}

/*
 * A global of the rebuilt log that is the recorded one placed elsewhere by the driver: same
 * kind, id, parent, name and size, another address. Everything else about it (its ctx, its
 * place in creation order, the other fields) is left to the exact comparison after.
 */
static int collect_moved(const struct st_rec *rec, void *arg)
{
	struct replay *rp = arg;
	const struct st_rec *was;

	if (rec->kind != ST_KIND_GLOBAL)
		return 0;
	was = st_find(rp->want, rec->id);
	if (!was || was->kind != ST_KIND_GLOBAL || was->parent != rec->parent ||
	    was->global.size != rec->global.size || was->global.addr == rec->global.addr ||
	    !was->name || !rec->name || strcmp(was->name, rec->name))
		return 0;
	if (rp->nmoved == rp->capmoved) {
		size_t cap = rp->capmoved ? 2 * rp->capmoved : 8;
		struct moved *v = realloc(rp->moved, cap * sizeof(*v));
		if (!v)
			return RGPU_ENOMEM;
		rp->moved = v;
		rp->capmoved = cap;
	}
	rp->moved[rp->nmoved].want = was;
	rp->moved[rp->nmoved].now = rec->global.addr;
	rp->nmoved++;
	return 0;
}

/*
 * The rebuilt log differs from the one replayed. Equal but for globals the driver placed
 * elsewhere? A copy of the rebuilt log with their recorded addresses put back must compare
 * equal, exactly. Returns 0 (then rp->moved lists them; none when the logs differ otherwise)
 * or an RGPU_E* code; *differs receives st_compare()'s answer for the copy, and *index, *ra
 * and *rb where it parts, as st_compare() gives them (*ra is in *copy, which the caller frees
 * after use).
 * With no global placed elsewhere there is no copy: *differs is 1 and *index, *ra and *rb are
 * left as the caller's st_compare() of the rebuilt log set them.
 */
static int compare_placed(struct replay *rp, struct st_log **copy, int *differs, size_t *index,
			  const struct st_rec **ra, const struct st_rec **rb)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret;

	*copy = NULL;
	ret = st_foreach(rp->w->log, collect_moved, rp);
	if (ret)
		return ret;
	if (!rp->nmoved) {
		*differs = 1; /* no global placed elsewhere: where st_compare() said */
		return 0;
	}
	ret = st_serialize(rp->w->log, &buf, &len);
	if (ret)
		return ret;
	ret = st_deserialize(buf, len, copy, NULL);
	free(buf);
	if (ret)
		return ret;
	for (size_t i = 0; i < rp->nmoved; i++) {
		struct st_rec r = *st_find(*copy, rp->moved[i].want->id);
		r.global.addr = rp->moved[i].want->global.addr;
		ret = st_update(*copy, &r);
		if (ret)
			return ret;
	}
	ret = st_compare(*copy, rp->want, index, ra, rb);
	if (ret < 0)
		return ret;
	*differs = ret;
	if (ret)
		rp->nmoved = 0; /* not a placement: the rebuild itself differs */
	return 0;
}

static int verify(struct replay *rp)
{
	struct check c = {.rp = rp};
	struct st_log *copy = NULL;
	const struct st_rec *ra = NULL, *rb = NULL;
	char a[256], b[256];
	size_t index = 0;
	int ret, differs = 0;

	ret = st_compare(rp->w->log, rp->want, &index, &ra, &rb);
	if (ret < 0)
		return fail(rp, NULL, ret, "cannot compare the logs: %s", rgpu_strerror(ret));
	if (ret) {
		ret = compare_placed(rp, &copy, &differs, &index, &ra, &rb);
		if (ret) {
			st_log_free(copy);
			return fail(rp, NULL, ret, "cannot compare the logs: %s",
				    rgpu_strerror(ret));
		}
	}
	if (differs) {
		/* the rebuilt record itself, not the copy's (a global put back at its address) */
		if (ra && copy)
			ra = st_find(rp->w->log, ra->id);
		st_rec_describe(ra, a, sizeof(a));
		st_rec_describe(rb, b, sizeof(b));
		st_log_free(copy);
		return fail(rp, NULL, RGPU_ECORRUPT,
			    "the rebuilt state differs from the log at record %zu: rebuilt %s, "
			    "recorded %s",
			    index, a, b);
	}
	st_log_free(copy);
	ret = st_foreach(rp->want, collect_map, &c.maps);
	if (ret) {
		free(c.maps.v);
		return fail(rp, NULL, ret, "out of memory checking the mappings");
	}
	if (c.maps.n)
		qsort(c.maps.v, c.maps.n, sizeof(*c.maps.v), map_order);
	ret = st_foreach(rp->want, check_rec, &c);
	free(c.maps.v);
	return ret;
}

/*
 * Replay and verify. Returns 0 when the rebuilt state is equal to want but for the globals in
 * rp->moved (none: equal), or an RGPU_E* code with rp->why filled.
 */
static int replay_job(struct replay *rp)
{
	int ret;

	if (!rp->w->replaying || !rp->w->log || st_count(rp->w->log))
		return fail(rp, NULL, RGPU_EINVAL,
			    "the worker is not ready to replay (replaying unset, or a log that is "
			    "missing or not empty)");
	ret = check_journals(rp);
	if (ret)
		return ret;
	current = rp;
	rp->w->graph_at = graph_at;
	ret = st_foreach(rp->want, replay_rec, rp);
	for (size_t i = 0; ret == 0 && i < rp->nlater; i++)
		ret = run_journal(rp, rp->later[i].rec, rp->later[i].j, rp->later[i].from,
				  rp->later[i].to);
	rp->w->graph_at = NULL;
	current = NULL;
	free(rp->later);
	rp->later = NULL;
	rp->nlater = rp->caplater = 0;
	if (ret)
		return ret;
	return verify(rp);
}

/*
 * The journals the replay did not make again: those of graphs that died before the checkpoint
 * (PyTorch destroys a captured graph once instantiated; a clone may outlive its source). An
 * exec or a clone made from one was rebuilt from it under a scratch id, which records nothing,
 * so the worker would hold no journal for that id, and its next checkpoint or migration could
 * not rebuild them. They are kept as they came, frame by frame (the hash is the one the records
 * name), after the journals the replay made.
 */
static int carry_journals(struct replay *rp)
{
	struct rgpu_journal **tail = &rp->w->journals.kept;
	size_t off = 0;

	while (*tail)
		tail = &(*tail)->next;
	while (off < rp->jlen) { /* the layout was checked by check_journals() */
		uint64_t id = rd_le64(rp->journals + off), n = rd_le64(rp->journals + off + 8);
		const uint8_t *j = rp->journals + off + JOURNAL_ENTRY_HDR;
		struct rgpu_journal *k, *nj;
		size_t p = 0;

		off += JOURNAL_ENTRY_HDR + (size_t)n;
		for (k = rp->w->journals.kept; k && k->stream != id; k = k->next)
			;
		if (k)
			continue; /* made again, or carried already (the first wins) */
		nj = rgpu_journal_new(id, 1);
		if (!nj)
			return fail(rp, NULL, RGPU_ENOMEM, "out of memory for the graph journals");
		while (p < n) {
			uint64_t blen, plen;
			if (n - p < JOURNAL_FRAME_HDR ||
			    (blen = rd_le32(j + p + 2)) > n - p - JOURNAL_FRAME_HDR ||
			    (plen = rd_le64(j + p + 6)) > n - p - JOURNAL_FRAME_HDR - blen) {
				rgpu_journal_free(nj);
				return fail(
				    rp, NULL, RGPU_ECORRUPT,
				    "the journal of graph %llu is cut in a frame at byte %zu",
				    (unsigned long long)id, p);
			}
			if (rgpu_journal_add(nj, rd_le16(j + p), j + p + JOURNAL_FRAME_HDR,
					     (size_t)blen, j + p + JOURNAL_FRAME_HDR + blen,
					     (size_t)plen)) {
				rgpu_journal_free(nj);
				return fail(rp, NULL, RGPU_ENOMEM,
					    "out of memory for the graph journals");
			}
			p += JOURNAL_FRAME_HDR + (size_t)blen + (size_t)plen;
		}
		*tail = nj;
		tail = &nj->next;
	}
	return 0;
}

int srv_replay_restore(struct srv_worker *w, struct st_log *want, const uint8_t *journals,
		       size_t jlen, char *why, size_t whylen)
{
	struct replay rp = {.w = w,
			    .want = want,
			    .journals = journals,
			    .jlen = journals ? jlen : 0,
			    .why = why,
			    .whylen = whylen};
	int ret;

	if (!w || !want || !why || !whylen)
		return RGPU_EINVAL;
	why[0] = '\0';
	ret = replay_job(&rp);
	if (ret == 0)
		ret = carry_journals(&rp);
	if (ret == 0 && rp.nmoved) {
		/*
		 * The job goes on with the addresses its client holds: the log says them again (it
		 * must equal the client's), and the worker translates them to where the driver put
		 * each global (window_map.c).
		 */
		w->gmoves = calloc(rp.nmoved, sizeof(*w->gmoves));
		if (!w->gmoves)
			ret = fail(&rp, NULL, RGPU_ENOMEM, "out of memory");
		for (size_t i = 0; !ret && i < rp.nmoved; i++) {
			const struct st_rec *g = rp.moved[i].want;
			struct st_rec r = *st_find(w->log, g->id);
			w->gmoves[i] = (struct srv_gmove){g->global.addr, rp.moved[i].now,
							  g->global.size ? g->global.size : 1,
							  g->parent};
			r.global.addr = g->global.addr;
			ret = st_update(w->log, &r);
			if (ret)
				ret = fail(&rp, g, ret, "cannot record its address again");
			pr_info("module global \"%s\" (id %llu) at %#llx is now at %#llx: translated",
				g->name ? g->name : "?", (unsigned long long)g->id,
				(unsigned long long)g->global.addr,
				(unsigned long long)rp.moved[i].now);
		}
		w->ngmoves = ret ? 0 : rp.nmoved;
	}
	free(rp.moved);
	return ret;
}

/* ---- rgpud --replay FILE ------------------------------------------------------------------ */

/* The whole file, malloc'd. Returns 0 or an errno value. */
static int read_all(const char *path, uint8_t **out, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	uint8_t *buf = NULL;
	int err = 0;

	*out = NULL;
	*len = 0;
	if (!fp)
		return errno;
	if (fstat(fileno(fp), &st)) {
		err = errno;
	} else if (!S_ISREG(st.st_mode)) {
		err = EINVAL;
	} else {
		buf = malloc(st.st_size ? (size_t)st.st_size : 1);
		if (!buf)
			err = ENOMEM;
		else if (fread(buf, 1, (size_t)st.st_size, fp) != (size_t)st.st_size)
			err = ferror(fp) ? EIO : ENODATA;
	}
	fclose(fp);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*len = (size_t)st.st_size;
	return 0;
}

/* A name from the file, as it is but for control characters (printed as '?'). */
static void print_name(const char *name)
{
	for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++)
		putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

static int count_kind(const struct st_rec *rec, void *arg)
{
	size_t *n = arg;
	if (rec->kind <= ST_KIND_MAX)
		n[rec->kind]++;
	return 0;
}

/* "C contexts, A allocations, M mappings, ..." for the kinds the log holds. */
static void summary(struct st_log *log, char *buf, size_t len)
{
	static const char *const plural[ST_KIND_MAX + 1] = {
	    [ST_KIND_CONTEXT] = "contexts",
	    [ST_KIND_ALLOC] = "allocations",
	    [ST_KIND_VMM_MAP] = "mappings",
	    [ST_KIND_MODULE] = "modules",
	    [ST_KIND_FUNCTION] = "functions",
	    [ST_KIND_KERNEL] = "kernels",
	    [ST_KIND_GLOBAL] = "globals",
	    [ST_KIND_STREAM] = "streams",
	    [ST_KIND_EVENT] = "events",
	    [ST_KIND_MEMPOOL] = "memory pools",
	    [ST_KIND_GRAPH] = "graphs",
	    [ST_KIND_GRAPH_EXEC] = "graph execs",
	    [ST_KIND_HOST_CALLBACK] = "host callbacks",
	    [ST_KIND_ATTR] = "attributes",
	    [ST_KIND_PHYSMEM] = "physical allocations",
	    [ST_KIND_ARRAY] = "arrays",
	    [ST_KIND_MIPMAP] = "mipmapped arrays",
	    [ST_KIND_TEXOBJ] = "texture and surface objects",
	};
	size_t n[ST_KIND_MAX + 1] = {0}, off = 0;

	st_foreach(log, count_kind, n);
	buf[0] = '\0';
	for (unsigned k = ST_KIND_CONTEXT; k <= ST_KIND_MAX && off < len; k++) {
		/* contexts, allocations and mappings always; the others where there are some */
		if (!n[k] && k > ST_KIND_VMM_MAP)
			continue;
		int w =
		    snprintf(buf + off, len - off, "%s%zu %s", off ? ", " : "", n[k], plural[k]);
		off += w > 0 ? (size_t)w : 0;
	}
}

/*
 * The job's device numbering beside the log (srv_log_dump), if there: the client's number for
 * its first device and how many it had; the replay takes this server's first that many, as a
 * restore does. No file: numbered from 0, all this server's GPUs. 0, or -1 (said on stderr).
 */
static int read_devices(struct srv_worker *w, const char *path)
{
	uint8_t *buf;
	size_t len;
	char line[64];
	int base = -1, count = -1, end = 0;
	int ret = read_all(path, &buf, &len);

	if (ret == ENOENT)
		return 0;
	if (ret) {
		fprintf(stderr, "rgpud: cannot read the job's devices %s: %s\n", path,
			strerror(ret));
		return -1;
	}
	snprintf(line, sizeof(line), "%.*s", (int)MIN(len, sizeof(line) - 1), (char *)buf);
	free(buf);
	if (sscanf(line, SRV_DUMP_DEVICES_MAGIC " base=%d count=%d\n%n", &base, &count, &end) != 2 ||
	    (size_t)end != len || base < 0 || count < 1 || base + count > 16) {
		fprintf(stderr,
			"rgpud: %s is not a job's devices (\"" SRV_DUMP_DEVICES_MAGIC
			" base=B count=N\", B + N at most 16)\n",
			path);
		return -1;
	}
	srv_dev_want_first(w, (uint32_t)base, (size_t)count);
	return 0;
}

/*
 * Exit statuses of rgpud --replay: equal; the rebuild failed or differs (or the file could not
 * be replayed at all); equal but for module globals the driver placed elsewhere.
 */
#define REPLAY_EQUAL 0
#define REPLAY_FAILED 1
#define REPLAY_GLOBALS_MOVED 3

int srv_replay_file(const struct srv_config *cfg, const char *path)
{
	static struct srv_worker wk;
	struct srv_worker *w = &wk;
	struct replay rp = {0};
	struct st_log *want = NULL;
	struct st_load_result res = {0};
	uint8_t *buf = NULL, *journals = NULL;
	size_t len = 0, jlen = 0, plen = strlen(path);
	char jpath[4096], why[1024] = "", kinds[512];
	CUresult r;
	int ret, status = REPLAY_FAILED;

	ret = read_all(path, &buf, &len);
	if (ret) {
		fprintf(stderr, "rgpud: cannot read the state log %s: %s\n", path, strerror(ret));
		return REPLAY_FAILED;
	}
	ret = st_deserialize(buf, len, &want, &res);
	free(buf);
	if (ret) {
		fprintf(stderr, "rgpud: %s cannot be read as a state log: %s\n", path,
			rgpu_strerror(ret));
		return REPLAY_FAILED;
	}
	if (res.torn) {
		/* a partial log would rebuild a partial job: all or nothing, as a restore */
		if (len == 0)
			fprintf(stderr, "rgpud: %s is empty: not a state log\n", path);
		else if (res.valid_bytes == len)
			fprintf(stderr,
				"rgpud: %s is cut short: it ends after %llu records, before all "
				"those its header counts; refusing a partial state log\n",
				path, (unsigned long long)res.records);
		else
			fprintf(stderr,
				"rgpud: %s is cut short or damaged at byte %zu of %zu (after %llu "
				"whole records); refusing a partial state log\n",
				path, res.valid_bytes, len, (unsigned long long)res.records);
		st_log_free(want);
		return REPLAY_FAILED;
	}
	/* the capture journals beside it, if any: NAME.journals for NAME.stlog */
	if (plen > 6 && strcmp(path + plen - 6, ".stlog") == 0 && plen - 6 + 10 < sizeof(jpath)) {
		snprintf(jpath, sizeof(jpath), "%.*s.journals", (int)(plen - 6), path);
		ret = read_all(jpath, &journals, &jlen);
		if (ret && ret != ENOENT) {
			fprintf(stderr, "rgpud: cannot read the capture journals %s: %s\n", jpath,
				strerror(ret));
			goto out_log;
		}
	}

	srv_worker_init(w, cfg, -1, path);
	snprintf(w->job_hex, sizeof(w->job_hex), "replay");
	if (plen > 6 && strcmp(path + plen - 6, ".stlog") == 0 && plen - 6 + 9 < sizeof(jpath)) {
		snprintf(jpath, sizeof(jpath), "%.*s.devices", (int)(plen - 6), path);
		if (read_devices(w, jpath))
			goto out_journals;
	}
	r = srv_worker_setup(w, why, sizeof(why));
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "rgpud: cannot replay %s: %s\n", path, why);
		goto out_journals;
	}
	srv_worker_modcache(w, "modules cannot be replayed");
	if (srv_log_init(w)) {
		fprintf(stderr, "rgpud: cannot replay %s: out of memory\n", path);
		goto out_cache;
	}
	w->replaying = 1;
	rp.w = w;
	rp.want = want;
	rp.journals = journals;
	rp.jlen = journals ? jlen : 0;
	rp.why = why;
	rp.whylen = sizeof(why);
	ret = replay_job(&rp);
	summary(want, kinds, sizeof(kinds));
	if (ret) {
		fprintf(stderr, "rgpud: replay of %s failed: %s\n", path, why);
	} else if (rp.nmoved) {
		for (size_t i = 0; i < rp.nmoved; i++) {
			const struct st_rec *g = rp.moved[i].want;
			printf("global \"");
			print_name(g->name);
			printf("\" (id %llu) was at 0x%llx and is now at 0x%llx: placed by the "
			       "driver\n",
			       (unsigned long long)g->id, (unsigned long long)g->global.addr,
			       (unsigned long long)rp.moved[i].now);
		}
		printf("replayed %zu records (%s): ids and addresses equal; %zu module global%s "
		       "placed elsewhere by the driver (a restore translates the addresses "
		       "inside them)\n",
		       st_count(want), kinds, rp.nmoved, rp.nmoved == 1 ? "" : "s");
		status = REPLAY_GLOBALS_MOVED;
	} else {
		printf("replayed %zu records (%s): ids and addresses equal\n", st_count(want),
		       kinds);
		status = REPLAY_EQUAL;
	}
	free(rp.moved);
	/* the worker's objects go with the process, as a worker's do */
	srv_log_fini(w);
out_cache:
	srv_modcache_close(w->modcache);
	w->modcache = NULL;
	rgpu_store_close(w->store);
	w->store = NULL;
out_journals:
	free(journals);
out_log:
	st_log_free(want);
	return status;
}
