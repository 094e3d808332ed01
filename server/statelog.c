/*
 * The job's state log on the worker's side (design.md §6): as the executor runs each frame,
 * the message table's effect column and the shared builders (rgpu/record.h) say which records
 * it made, changed or removed, and this file applies them to w->log. A removal takes the
 * object's dependents with it, newest first (a context's streams, events, modules and their
 * functions), and releases each one's driver object on the way: the log is what a destroy
 * cascades through. Also here: the capture journals that rebuild captured graphs, the digest
 * check against the client's log (RGPU_VERIFY_LOG), and the dump for the replay tests
 * (RGPU_STATE_DUMP=DIR).
 *
 * Executor thread only. This file never sends anything itself.
 */
#define LOG_PREFIX "statelog: "
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/record.h"
#include "rgpu/util.h"
#include "rgpu_record.h"
#include "srv.h"

int srv_log_init(struct srv_worker *w)
{
	w->on_reply = srv_log_record;
	w->journals.keep = 1;
	return st_log_new(&w->log);
}

void srv_log_fini(struct srv_worker *w)
{
	st_log_free(w->log);
	w->log = NULL;
	rgpu_journals_free(&w->journals);
	if (w->graph_fini)
		w->graph_fini(w);
}

/* The removal hook: every record a destroy takes releases what stands behind it. */
static void removed(const struct st_rec *rec, void *arg)
{
	struct srv_worker *w = arg;
	struct srv_obj *o;

	switch (rec->kind) {
	case ST_KIND_VMM_MAP:
		srv_async_error(w, srv_unmap_range(w, rec->vmm.addr, rec->vmm.size), "unmap");
		break;
	default:
		/* a graph's journal stays: its instantiated graphs outlive it */
		o = srv_obj_find(w, rec->id, (int)rec->kind);
		if (o)
			srv_obj_release(w, o);
		break;
	}
}

static void journal_step(struct srv_worker *w, const struct srv_frame *f,
			 const ProtobufCMessage *req, struct rgpu_rec_ops *ops)
{
	if (w->journal_off)
		return;
	if (rgpu_journals_step(&w->journals, f->hdr.type, req, f->body,
			       f->hdr.body_len, f->payload, f->hdr.payload_len, ops))
		pr_warn("out of memory: a capture journal misses %s seq %llu",
			rgpu_msg_name(f->hdr.type), (unsigned long long)f->hdr.seq);
}

/*
 * A conditional handle's making goes into its graph's journal with the value the driver gave
 * (GraphCond.want), which a replay must get again; the client journals the same bytes.
 */
static void cond_step(struct srv_worker *w, const struct srv_frame *f, Rgpu__GraphCond *req,
		      const Rgpu__ValueReply *rep)
{
	struct rgpu_rec_ops ops = {0};
	size_t blen;
	uint8_t *body;

	req->want = (uint64_t)rep->value;
	blen = protobuf_c_message_get_packed_size(&req->base);
	body = malloc(blen ? blen : 1);
	if (!body || (protobuf_c_message_pack(&req->base, body),
		      rgpu_journals_step(&w->journals, f->hdr.type, &req->base, body, blen, NULL, 0,
					 &ops)))
		pr_warn("out of memory: a graph journal misses %s seq %llu",
			rgpu_msg_name(f->hdr.type), (unsigned long long)f->hdr.seq);
	free(body);
}

/*
 * An object the log does not hold (its record was refused, and that was logged) is still
 * released when the client destroys it: the log's removal cannot do it.
 */
static void release_unrecorded(struct srv_worker *w, struct rgpu_rec_ops *ops)
{
	for (int i = 0; i < ops->n; i++) {
		struct st_rec *r = &ops->v[i].rec;
		if (ops->v[i].op != RGPU_REC_REMOVE || st_find(w->log, r->id))
			continue;
		if (r->kind == ST_KIND_VMM_MAP) {
			srv_async_error(w, srv_unmap_range(w, r->vmm.addr, r->vmm.size), "unmap");
		} else {
			struct srv_obj *o = srv_obj_find(w, r->id, (int)r->kind);
			if (o)
				removed(&(struct st_rec){.kind = r->kind, .id = r->id}, w);
		}
	}
}

void srv_log_record(struct srv_worker *w, const struct srv_frame *f, const ProtobufCMessage *rep)
{
	const struct rgpu_msg_info *mi = rgpu_msg_info(f->hdr.type);
	struct rgpu_rec_hooks hooks = {removed, w};
	struct rgpu_rec_ops ops = {0};
	ProtobufCMessage *req;
	int ret, failed = 0;
	char what[256];

	if (!mi || !w->log || w->journal_off)
		return; /* (a replay's scratch graph: never in the log) */
	if (mi->effect != RGPU_EFFECT_CREATE && mi->effect != RGPU_EFFECT_DESTROY &&
	    mi->effect != RGPU_EFFECT_ATTR) {
		/* what changes a graph node by node goes into its journal once it succeeded */
		if (rgpu_journal_edits(f->hdr.type)) {
			if (w->exec_result == CUDA_SUCCESS &&
			    (req = rgpu_pb_unpack(mi->body, f->hdr.body_len, f->body)) != NULL) {
				if (f->hdr.type == RGPU_MSG_GRAPH_COND && rep)
					cond_step(w, f, (Rgpu__GraphCond *)req,
						  (const Rgpu__ValueReply *)rep);
				else
					journal_step(w, f, req, &ops);
				protobuf_c_message_free_unpacked(req, NULL);
			}
		} else if (w->journals.capturing && mi->effect == RGPU_EFFECT_NONE) {
			journal_step(w, f, NULL, &ops);
		}
		return;
	}
	/* fire-and-forget work that failed made nothing; a call's builder reads its reply */
	if (!rep && w->exec_result != CUDA_SUCCESS)
		return;
	req = rgpu_pb_unpack(mi->body, f->hdr.body_len, f->body);
	if (!req)
		return; /* the handler already ended the job over it */
	ret = rgpu_record_build(f->hdr.type, req, rep, &ops);
	if (ret == 0) {
		journal_step(w, f, req, &ops);
		release_unrecorded(w, &ops);
		ret = rgpu_rec_apply(w->log, &ops, &hooks, &failed);
	}
	if (ret) {
		st_rec_describe(failed < ops.n ? &ops.v[failed].rec : NULL, what, sizeof(what));
		pr_warn("%s seq %llu: the state log refused %s: %s", mi->name,
			(unsigned long long)f->hdr.seq, what, rgpu_strerror(ret));
	}
	protobuf_c_message_free_unpacked(req, NULL);
}

/* ---- verification and dumps ------------------------------------------------------------- */

/* Write len bytes to path through a temporary file and a rename: a reader sees all or none. */
static int write_file(const char *path, const void *a, size_t alen, struct rgpu_journal *js)
{
	char tmp[4200];
	FILE *fp;
	int ok;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fp = fopen(tmp, "wb");
	if (!fp)
		return -1;
	ok = fwrite(a, 1, alen, fp) == alen;
	/* a journals file: per kept capture journal, graph id and length (8 + 8 bytes, LE) */
	for (struct rgpu_journal *j = js; ok && j; j = j->next) {
		uint64_t hdr[2] = {j->stream, j->len};
		if (j->alias)
			continue; /* made again by the frame that made it */
		ok = fwrite(hdr, sizeof(hdr), 1, fp) == 1 && fwrite(j->buf, 1, j->len, fp) == j->len;
	}
	if (fclose(fp) != 0 || !ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Written through a temporary file and a rename, so a reader sees a whole log or the last one. */
void srv_log_dump(struct srv_worker *w)
{
	static const char *dir;
	static int checked;
	char path[4096];
	uint8_t *buf = NULL;
	size_t len = 0;

	if (!checked) {
		dir = getenv("RGPU_STATE_DUMP");
		checked = 1;
	}
	if (!dir || !*dir || st_count(w->log) <= w->dump_max || st_serialize(w->log, &buf, &len))
		return;
	/*
	 * A job whose client numbers its devices from a base, or chose some: the log names them
	 * by the client's numbers, and a replay needs the base and count to make sense of them.
	 * Before the log, like the journals, so a reader that finds the log finds this too.
	 */
	int ok = 1;
	if (w->dev_base || w->ndev_want) {
		char line[64];
		int n = snprintf(line, sizeof(line), SRV_DUMP_DEVICES_MAGIC " base=%d count=%d\n",
				 w->dev_base, w->ndev);
		snprintf(path, sizeof(path), "%s/%s.devices", dir, w->job_hex);
		ok = write_file(path, line, (size_t)n, NULL) == 0;
	}
	snprintf(path, sizeof(path), "%s/%s.journals", dir, w->job_hex);
	if (ok && write_file(path, "", 0, w->journals.kept) == 0) {
		snprintf(path, sizeof(path), "%s/%s.stlog", dir, w->job_hex);
		if (write_file(path, buf, len, NULL) == 0)
			w->dump_max = st_count(w->log);
	}
	if (w->dump_max != st_count(w->log))
		pr_warn("cannot write the state log to %s: %s", path, strerror(errno));
	free(buf);
}

int srv_log_verify(struct srv_worker *w, const struct srv_frame *f, uint8_t **serialized,
		   size_t *len)
{
	uint8_t mine[ST_DIGEST_LEN];
	char a[20], b[20];

	*serialized = NULL;
	*len = 0;
	if (!w->log)
		return 1;
	if (f->hdr.payload_len != ST_DIGEST_LEN || !f->payload)
		return 1;
	/*
	 * Fire-and-forget work failed since the last reply: the client recorded what it sent,
	 * this log only what was made. The error goes out with this reply (the client stops
	 * comparing then); a difference now would hide it.
	 */
	if (w->async_err != CUDA_SUCCESS)
		return 1;
	st_digest(w->log, mine);
	if (memcmp(mine, f->payload, ST_DIGEST_LEN) == 0) {
		w->verified++;
		return 1;
	}
	w->mismatches++;
	pr_err("job %s: state log differs from the client's at %s seq %llu: %zu records here, "
	       "digest %s..., the client's %s...",
	       w->job_hex, rgpu_msg_name(f->hdr.type), (unsigned long long)f->hdr.seq,
	       st_count(w->log), rgpu_hex(mine, 6, a), rgpu_hex(f->payload, 6, b));
	if (st_serialize(w->log, serialized, len)) {
		*serialized = NULL;
		*len = 0;
	}
	return 0;
}

const struct rgpu_journal *srv_log_journal(struct srv_worker *w, uint64_t graph)
{
	return rgpu_journals_kept(&w->journals, graph);
}
