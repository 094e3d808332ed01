/*
 * The state-log builders: for every message of proto/messages.tbl whose effect is create,
 * destroy or attr, the records it makes, changes or removes (rgpu/record.h says how they are
 * used). Each builder reads only its request and reply, so the client and the worker build the
 * same records from the same messages. Also the generic parts both sides share: applying a list
 * of operations, settling a call's provisional records, and capture journals.
 *
 * This file must never look at anything but its arguments: no session, no driver, no log
 * beyond the one it is handed.
 */
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/record.h"
#include "rgpu_msgs.h"
#include "rgpu_record.h"

static struct st_rec *op(struct rgpu_rec_ops *ops, int what, uint32_t kind, uint64_t id)
{
	struct st_rec *r = &ops->v[ops->n].rec;

	memset(&ops->v[ops->n], 0, sizeof(ops->v[ops->n]));
	ops->v[ops->n].op = what;
	r->kind = kind;
	r->id = id;
	ops->n++;
	return r;
}

static void set_hash(struct st_rec *r, ProtobufCBinaryData h)
{
	if (h.len == ST_HASH_LEN) {
		r->has_hash = true;
		memcpy(r->hash, h.data, ST_HASH_LEN);
	}
}

/* A call's reply: did it succeed? (rep NULL: not known yet, recorded as if it will.) */
#define OK(rep) (!(rep) || (rep)->result == 0)

/* ---- contexts ----------------------------------------------------------------------------- */

int rgpu_rec_ctx_create(const Rgpu__CtxCreate *req, struct rgpu_rec_ops *ops)
{
	struct st_rec *r = op(ops, RGPU_REC_ADD, ST_KIND_CONTEXT, req->ctx);
	r->context.device = (uint64_t)(int64_t)req->device;
	r->context.flags = req->flags;
	r->f[2] = req->primary;
	return 0;
}

int rgpu_rec_ctx_destroy(const Rgpu__CtxRef *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_CONTEXT, req->ctx);
	return 0;
}

int rgpu_rec_ctx_set_limit(const Rgpu__CtxLimit *req, const Rgpu__Status *rep,
			   struct rgpu_rec_ops *ops)
{
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_LIMIT, 0, (uint32_t)req->limit);
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(req->ctx, key));
	r->parent = req->ctx;
	r->f[0] = key;
	r->f[1] = req->value;
	return 0;
}

int rgpu_rec_ctx_set_config(const Rgpu__CtxConfig *req, const Rgpu__Status *rep,
			    struct rgpu_rec_ops *ops)
{
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_CONFIG, 0, (uint32_t)req->kind);
	uint64_t parent = req->func ? req->func : req->ctx;
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(parent, key));
	r->parent = parent;
	r->f[0] = key;
	r->f[1] = (uint64_t)(int64_t)req->value;
	return 0;
}

/* ---- memory ------------------------------------------------------------------------------- */

int rgpu_rec_mem_alloc(const Rgpu__MemAlloc *req, const Rgpu__Status *rep,
		       struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	if (req->map_size) {
		r = op(ops, RGPU_REC_ADD, ST_KIND_VMM_MAP, RGPU_REC_VMM_ID(req->map_addr));
		r->vmm.addr = req->map_addr;
		r->vmm.size = req->map_size;
		r->vmm.device = (uint64_t)(int64_t)req->device;
	}
	if (req->size) {
		r = op(ops, RGPU_REC_ADD, ST_KIND_ALLOC, req->addr);
		r->alloc.addr = req->addr;
		r->alloc.size = req->size;
		r->alloc.device = (uint64_t)(int64_t)req->device;
	}
	return 0;
}

int rgpu_rec_mem_free(const Rgpu__MemFree *req, struct rgpu_rec_ops *ops)
{
	if (req->addr)
		op(ops, RGPU_REC_REMOVE, ST_KIND_ALLOC, req->addr);
	if (req->unmap_size) {
		/* the range too, for a worker that must unmap a mapping its log does not hold */
		struct st_rec *r = op(ops, RGPU_REC_REMOVE, ST_KIND_VMM_MAP,
				      RGPU_REC_VMM_ID(req->unmap_addr));
		r->vmm.addr = req->unmap_addr;
		r->vmm.size = req->unmap_size;
	}
	return 0;
}

/* ---- the application's virtual memory ---------------------------------------------------- */

int rgpu_rec_vmm_create(const Rgpu__VmmCreate *req, const Rgpu__Status *rep,
			struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_ADD, ST_KIND_PHYSMEM, req->handle);
	r->physmem.size = req->size;
	r->physmem.device = (uint64_t)(int64_t)req->device;
	return 0;
}

int rgpu_rec_vmm_release(const Rgpu__VmmRelease *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_PHYSMEM, req->handle);
	return 0;
}

/* An application's mapping: parent the physical memory it maps (statetrack.h). */
static struct st_rec *app_map(struct rgpu_rec_ops *ops, int what, uint64_t addr, uint64_t size,
			      uint64_t handle, uint64_t offset, int32_t device)
{
	struct st_rec *r = op(ops, what, ST_KIND_VMM_MAP, RGPU_REC_VMM_ID(addr));

	r->parent = handle;
	r->vmm.addr = addr;
	r->vmm.size = size;
	r->vmm.device = (uint64_t)(int64_t)device;
	r->vmm.offset = offset;
	return r;
}

int rgpu_rec_vmm_map(const Rgpu__VmmMap *req, struct rgpu_rec_ops *ops)
{
	app_map(ops, RGPU_REC_ADD, req->addr, req->size, req->handle, req->offset, req->device);
	return 0;
}

int rgpu_rec_vmm_unmap(const Rgpu__VmmUnmap *req, struct rgpu_rec_ops *ops)
{
	/* the range too, for a worker that must unmap a mapping its log does not hold */
	struct st_rec *r = op(ops, RGPU_REC_REMOVE, ST_KIND_VMM_MAP, RGPU_REC_VMM_ID(req->addr));

	r->vmm.addr = req->addr;
	r->vmm.size = req->size;
	/* after the mapping: its physical memory, released while it was still mapped */
	if (req->release)
		op(ops, RGPU_REC_REMOVE, ST_KIND_PHYSMEM, req->release);
	return 0;
}

int rgpu_rec_vmm_access(const Rgpu__VmmAccess *req, struct rgpu_rec_ops *ops)
{
	struct st_rec *r = app_map(ops, RGPU_REC_SET, req->addr, req->size, req->handle,
				   req->offset, req->device);

	r->vmm.access = req->access;
	return 0;
}

/* ---- modules, functions, globals ---------------------------------------------------------- */

int rgpu_rec_module_load(const Rgpu__ModuleLoad *req, const Rgpu__ModuleLoadReply *rep,
			 struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep) || (rep && rep->need_image))
		return 0;
	r = op(ops, RGPU_REC_ADD, ST_KIND_MODULE, req->module);
	r->ctx = req->ctx;
	r->module.size = req->image_size;
	r->module.library = req->library;
	set_hash(r, req->hash);
	return 0;
}

int rgpu_rec_module_unload(const Rgpu__ObjRef *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_MODULE, req->id);
	return 0;
}

int rgpu_rec_func_get(const Rgpu__FuncGet *req, struct rgpu_rec_ops *ops)
{
	uint32_t kind = req->kind == RGPU__FUNC_KIND__FUNC_LIBRARY_KERNEL ? ST_KIND_KERNEL
									  : ST_KIND_FUNCTION;
	struct st_rec *r = op(ops, RGPU_REC_ADD, kind, req->func);

	r->parent = req->parent;
	r->ctx = req->ctx;
	r->f[0] = req->kind;
	r->name = req->name;
	return 0;
}

int rgpu_rec_global_get(const Rgpu__GlobalGet *req, const Rgpu__GlobalReply *rep,
			struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep) || !req->global)
		return 0;
	r = op(ops, RGPU_REC_ADD, ST_KIND_GLOBAL, req->global);
	r->parent = req->module;
	r->ctx = req->ctx;
	r->name = req->name;
	if (rep) {
		r->global.addr = rep->addr;
		r->global.size = rep->size;
	}
	return 0;
}

int rgpu_rec_func_set_attr(const Rgpu__FuncAttr *req, struct rgpu_rec_ops *ops)
{
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_FUNC, req->device, (uint32_t)req->attrib);
	struct st_rec *r = op(ops, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(req->func, key));

	r->parent = req->func;
	r->f[0] = key;
	r->f[1] = (uint64_t)req->value;
	return 0;
}

/* ---- streams and events ------------------------------------------------------------------- */

int rgpu_rec_stream_create(const Rgpu__StreamCreate *req, struct rgpu_rec_ops *ops)
{
	struct st_rec *r = op(ops, RGPU_REC_ADD, ST_KIND_STREAM, req->stream);

	r->ctx = req->ctx;
	r->stream.flags = req->flags;
	r->stream.priority = req->priority;
	return 0;
}

int rgpu_rec_stream_destroy(const Rgpu__StreamOp *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_STREAM, req->stream);
	return 0;
}

int rgpu_rec_stream_set_attr(const Rgpu__StreamAttr *req, const Rgpu__Status *rep,
			     struct rgpu_rec_ops *ops)
{
	uint64_t key = RGPU_ATTR_KEY(RGPU_ATTR_STREAM, 0, (uint32_t)req->attr);
	uint64_t parent = req->stream ? req->stream : req->ctx; /* the NULL stream: its context's */
	struct st_rec *r;

	if (!OK(rep) || !req->attr)
		return 0;
	r = op(ops, RGPU_REC_SET, ST_KIND_ATTR, RGPU_REC_ATTR_ID(parent, key));
	r->parent = parent;
	r->f[0] = key;
	for (size_t i = 0; i < req->value.len && i < RGPU_STREAM_ATTR_BYTES; i++)
		r->f[1 + i / 8] |= (uint64_t)req->value.data[i] << (8 * (i % 8));
	return 0;
}

int rgpu_rec_event_create(const Rgpu__EventCreate *req, struct rgpu_rec_ops *ops)
{
	struct st_rec *r = op(ops, RGPU_REC_ADD, ST_KIND_EVENT, req->event);

	r->ctx = req->ctx;
	r->event.flags = req->flags;
	return 0;
}

int rgpu_rec_event_destroy(const Rgpu__EventOp *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_EVENT, req->event);
	return 0;
}

/* ---- capture and graphs ------------------------------------------------------------------- */

static uint64_t capture_key(void)
{
	return RGPU_ATTR_KEY(RGPU_ATTR_CAPTURE, 0, 0);
}

int rgpu_rec_capture_begin(const Rgpu__CaptureOp *req, const Rgpu__Status *rep,
			   struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_ADD, ST_KIND_ATTR, RGPU_REC_ATTR_ID(req->stream, capture_key()));
	r->parent = req->stream;
	r->f[0] = capture_key();
	r->f[1] = req->mode;
	return 0;
}

int rgpu_rec_capture_end(const Rgpu__CaptureOp *req, const Rgpu__Status *rep,
			 struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	/* the capture ends whatever the result (a failed capture is over too) */
	op(ops, RGPU_REC_REMOVE, ST_KIND_ATTR, RGPU_REC_ATTR_ID(req->stream, capture_key()));
	if (!OK(rep) || !req->graph || req->to_graph)
		return 0; /* (captured into a graph that exists: that graph's journal has it) */
	r = op(ops, RGPU_REC_ADD, ST_KIND_GRAPH, req->graph);
	r->ctx = req->ctx;
	r->graph.flags = 0;
	r->f[1] = req->stream;
	r->f[2] = req->mode;
	ops->v[ops->n - 1].journal = 1;
	return 0;
}

int rgpu_rec_graph_create(const Rgpu__GraphOp *req, struct rgpu_rec_ops *ops)
{
	struct st_rec *r = op(ops, RGPU_REC_ADD, ST_KIND_GRAPH, req->graph);

	r->ctx = req->ctx;
	r->graph.flags = req->flags;
	return 0;
}

int rgpu_rec_graph_instantiate(const Rgpu__GraphOp *req, const Rgpu__Status *rep,
			       struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	/* parent 0: an instantiated graph outlives its graph (statetrack.h) */
	r = op(ops, RGPU_REC_ADD, ST_KIND_GRAPH_EXEC, req->exec);
	r->ctx = req->ctx;
	r->graph_exec.flags = req->flags;
	r->f[1] = req->graph;
	return 0;
}

int rgpu_rec_graph_exec_destroy(const Rgpu__GraphOp *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_GRAPH_EXEC, req->exec);
	return 0;
}

int rgpu_rec_graph_destroy(const Rgpu__GraphOp *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_GRAPH, req->graph);
	return 0;
}

int rgpu_rec_graph_clone(const Rgpu__GraphClone *req, const Rgpu__Status *rep,
			 struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep) || !req->clone)
		return 0;
	/* f[4]: the graph cloned; hash and f[5]: its journal then (the journals' step) */
	r = op(ops, RGPU_REC_ADD, ST_KIND_GRAPH, req->clone);
	r->ctx = req->ctx;
	r->f[4] = req->graph;
	return 0;
}

/* ---- arrays, texture and surface objects ------------------------------------------------- */

static int array_rec(const Rgpu__ArrayCreate *req, const Rgpu__Status *rep, uint32_t kind,
		     struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_ADD, kind, req->array);
	r->ctx = req->ctx;
	if (req->mipmap) {
		/* a level: its descriptor is the driver's, its mipmapped array says the rest */
		r->parent = req->mipmap;
		r->array.level = req->level;
		return 0;
	}
	r->array.width = req->width;
	r->array.height = req->height;
	r->array.depth = req->depth;
	r->array.format = req->format | (uint64_t)req->channels << 32;
	r->array.flags = req->flags;
	r->array.level = req->levels; /* a mipmapped array: how many */
	return 0;
}

int rgpu_rec_array_create(const Rgpu__ArrayCreate *req, const Rgpu__Status *rep,
			  struct rgpu_rec_ops *ops)
{
	return array_rec(req, rep, ST_KIND_ARRAY, ops);
}

int rgpu_rec_mipmap_create(const Rgpu__ArrayCreate *req, const Rgpu__Status *rep,
			   struct rgpu_rec_ops *ops)
{
	return array_rec(req, rep, ST_KIND_MIPMAP, ops);
}

int rgpu_rec_array_destroy(const Rgpu__ObjRef *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_ARRAY, req->id);
	return 0;
}

int rgpu_rec_mipmap_destroy(const Rgpu__ObjRef *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_MIPMAP, req->id);
	return 0;
}

/* The value is the driver's: known once the reply came (0 in the provisional record). */
int rgpu_rec_texobj_create(const Rgpu__TexCreate *req, const Rgpu__ValueReply *rep,
			   struct rgpu_rec_ops *ops)
{
	struct st_rec *r;

	if (!OK(rep))
		return 0;
	r = op(ops, RGPU_REC_ADD, ST_KIND_TEXOBJ, req->obj);
	r->ctx = req->ctx;
	r->texobj.resource = req->resource;
	r->texobj.value = rep ? (uint64_t)rep->value : 0;
	r->texobj.surface = req->surface;
	r->texobj.has_view = req->has_view;
	r->name = req->desc;
	return 0;
}

int rgpu_rec_texobj_destroy(const Rgpu__ObjRef *req, struct rgpu_rec_ops *ops)
{
	op(ops, RGPU_REC_REMOVE, ST_KIND_TEXOBJ, req->id);
	return 0;
}

/* ---- applying and settling ---------------------------------------------------------------- */

/*
 * What a record takes from the log rather than from its message. An instantiated graph
 * outlives its graph and is rebuilt from that graph's journal: it carries the journal's hash,
 * and the stream and mode it was captured with.
 */
static void derive(struct st_log *log, struct st_rec *rec)
{
	const struct st_rec *g;

	if (rec->kind != ST_KIND_GRAPH_EXEC || !rec->f[1])
		return;
	g = st_find(log, rec->f[1]);
	if (g && g->graph.stream) {
		rec->f[2] = g->graph.stream;
		rec->f[3] = g->graph.mode;
		rec->f[5] = g->f[3];
	}
}

/* The fields the journals' step filled when the request was sent (a reply cannot change them). */
static void journal_fields(struct st_rec *to, const struct st_rec *from)
{
	to->has_hash = true;
	memcpy(to->hash, from->hash, ST_HASH_LEN);
	if (to->kind == ST_KIND_GRAPH)
		to->f[3] = from->f[3], to->f[5] = from->f[5];
	else if (to->kind == ST_KIND_GRAPH_EXEC)
		to->f[4] = from->f[4];
}

static int apply_one(struct st_log *log, int what, struct st_rec *rec,
		     const struct rgpu_rec_hooks *hooks, int *existed, uint64_t *prev)
{
	const struct st_rec *old;

	if (what == RGPU_REC_REMOVE)
		return st_remove_each(log, rec->id, hooks ? hooks->removed : NULL,
				      hooks ? hooks->arg : NULL);
	derive(log, rec);
	if (what == RGPU_REC_SET && (old = st_find(log, rec->id)) != NULL) {
		*existed = 1;
		memcpy(prev, old->f, sizeof(old->f));
		return st_update(log, rec);
	}
	*existed = 0;
	return st_add(log, rec);
}

int rgpu_rec_apply(struct st_log *log, struct rgpu_rec_ops *ops, const struct rgpu_rec_hooks *hooks,
		   int *failed)
{
	int first = 0;

	for (int i = 0; i < ops->n; i++) {
		int ret = apply_one(log, ops->v[i].op, &ops->v[i].rec, hooks, &ops->v[i].existed,
				    ops->v[i].prev);
		if (ret && !first) {
			first = ret;
			if (failed)
				*failed = i;
		}
	}
	return first;
}

int rgpu_rec_settle(struct st_log *log, const struct rgpu_rec_ops *sent, struct rgpu_rec_ops *final)
{
	int first = 0;

	for (int i = 0; i < sent->n; i++) {
		const struct st_rec *s = &sent->v[i].rec;
		int j, ret = 0;

		if (sent->v[i].op == RGPU_REC_REMOVE)
			continue;
		for (j = 0; j < final->n; j++)
			if (final->v[j].op != RGPU_REC_REMOVE && final->v[j].rec.id == s->id)
				break;
		if (j == final->n) {
			/* the reply says it was not made (or not changed) */
			if (sent->v[i].op == RGPU_REC_SET && sent->v[i].existed) {
				struct st_rec back = *s;
				memcpy(back.f, sent->v[i].prev, sizeof(back.f));
				ret = st_find(log, s->id) ? st_update(log, &back) : 0;
			} else if (st_find(log, s->id)) {
				ret = st_remove(log, s->id);
			}
		} else if (st_find(log, s->id)) {
			/*
			 * A captured graph's journal was hashed when the end was sent, and a graph
			 * exec took its graph's hash then: the reply changes neither.
			 */
			derive(log, &final->v[j].rec);
			if (!final->v[j].rec.has_hash && s->has_hash)
				journal_fields(&final->v[j].rec, s);
			ret = st_update(log, &final->v[j].rec);
		}
		if (ret && !first)
			first = ret;
	}
	return first;
}

/* ---- capture journals --------------------------------------------------------------------- */

struct rgpu_journal *rgpu_journal_new(uint64_t stream, int keep)
{
	struct rgpu_journal *j = calloc(1, sizeof(*j));
	struct sha256_ctx *h = malloc(sizeof(*h));

	if (!j || !h) {
		free(j);
		free(h);
		return NULL;
	}
	sha256_init(h);
	j->stream = stream;
	j->keep = keep;
	j->hash_ctx = h;
	return j;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int rgpu_journal_add(struct rgpu_journal *j, uint16_t type, const void *body, size_t blen,
		     const void *payload, size_t plen)
{
	uint8_t hdr[14];
	size_t need = sizeof(hdr) + blen + plen;

	put_le(hdr, type, 2);
	put_le(hdr + 2, blen, 4);
	put_le(hdr + 6, plen, 8);
	if (j->keep) {
		if (j->len + need > j->cap) {
			size_t cap = j->cap ? j->cap : 4096;
			uint8_t *n;
			while (cap < j->len + need)
				cap *= 2;
			n = realloc(j->buf, cap);
			if (!n)
				return RGPU_ENOMEM;
			j->buf = n;
			j->cap = cap;
		}
		memcpy(j->buf + j->len, hdr, sizeof(hdr));
		if (blen)
			memcpy(j->buf + j->len + sizeof(hdr), body, blen);
		if (plen)
			memcpy(j->buf + j->len + sizeof(hdr) + blen, payload, plen);
		j->len += need;
	}
	j->total += need;
	sha256_update(j->hash_ctx, sizeof(hdr), hdr);
	if (blen)
		sha256_update(j->hash_ctx, blen, body);
	if (plen)
		sha256_update(j->hash_ctx, plen, payload);
	return 0;
}

void rgpu_journal_digest(struct rgpu_journal *j, uint8_t out[32])
{
	struct sha256_ctx copy = *(struct sha256_ctx *)j->hash_ctx;
	sha256_digest(&copy, SHA256_DIGEST_SIZE, out);
}

void rgpu_journal_free(struct rgpu_journal *j)
{
	if (!j)
		return;
	free(j->buf);
	free(j->hash_ctx);
	free(j);
}

static struct rgpu_journal *find_journal(struct rgpu_journal *l, uint64_t key)
{
	for (; l; l = l->next)
		if (l->stream == key)
			return l;
	return NULL;
}

static struct rgpu_journal *take_journal(struct rgpu_journal **list, uint64_t stream)
{
	for (struct rgpu_journal **pp = list; *pp; pp = &(*pp)->next)
		if ((*pp)->stream == stream) {
			struct rgpu_journal *j = *pp;
			*pp = j->next;
			j->next = NULL;
			return j;
		}
	return NULL;
}

void rgpu_journals_free(struct rgpu_journals *js)
{
	struct rgpu_journal *l[2] = {js->capturing, js->kept};

	for (int i = 0; i < 2; i++)
		while (l[i]) {
			struct rgpu_journal *next = l[i]->next;
			rgpu_journal_free(l[i]);
			l[i] = next;
		}
	js->capturing = js->kept = NULL;
}

#define ALIAS_HOPS 16 /* child graphs nest: a copy of a copy... */

struct rgpu_journal *rgpu_journals_kept(struct rgpu_journals *js, uint64_t id)
{
	struct rgpu_journal *j = find_journal(js->kept, id);

	for (int hops = 0; j && j->alias && hops < ALIAS_HOPS; hops++)
		j = find_journal(js->kept, j->alias);
	return j && !j->alias ? j : NULL;
}

static struct rgpu_journal *push_new(struct rgpu_journal **list, uint64_t key, int keep)
{
	struct rgpu_journal *j = rgpu_journal_new(key, keep);

	if (j) {
		j->next = *list;
		*list = j;
	}
	return j;
}

/* The journal that takes a change of graph id: the capture building it, else the kept one. */
static struct rgpu_journal *graph_journal(struct rgpu_journals *js, uint64_t id)
{
	struct rgpu_journal *j;

	for (int hops = 0; hops < ALIAS_HOPS; hops++) {
		for (j = js->capturing; j; j = j->next)
			if (j->graph == id && !j->alias)
				return j;
		j = find_journal(js->kept, id);
		if (!j)
			return push_new(&js->kept, id, js->keep);
		if (!j->alias)
			return j;
		id = j->alias;
	}
	return NULL;
}

static struct rgpu_journal *exec_journal(struct rgpu_journals *js, uint64_t exec)
{
	struct rgpu_journal *j = find_journal(js->kept, exec);
	return j ? j : push_new(&js->kept, exec, js->keep);
}

/* Where a frame that changes a graph or an exec goes. */
static struct rgpu_journal *edit_journal(struct rgpu_journals *js, unsigned type,
					 const ProtobufCMessage *req)
{
	switch (type) {
	case RGPU_MSG_GRAPH_NODE: {
		const Rgpu__GraphNode *m = (const Rgpu__GraphNode *)req;
		if (m->op == RGPU__GRAPH_NODE_OP__NODE_EXEC_SET ||
		    m->op == RGPU__GRAPH_NODE_OP__NODE_EXEC_ENABLE)
			return exec_journal(js, m->exec);
		return graph_journal(js, m->graph);
	}
	case RGPU_MSG_GRAPH_EDIT:
		return graph_journal(js, ((const Rgpu__GraphEdit *)req)->graph);
	case RGPU_MSG_GRAPH_BIND: {
		const Rgpu__GraphBind *m = (const Rgpu__GraphBind *)req;
		struct rgpu_journal *c = m->capture ? find_journal(js->capturing, m->stream) : NULL;
		if (c && c->alias)
			return rgpu_journals_kept(js, c->alias);
		return m->capture ? c : graph_journal(js, m->graph);
	}
	case RGPU_MSG_CAPTURE_DEPS: {
		struct rgpu_journal *c =
		    find_journal(js->capturing, ((const Rgpu__CaptureDeps *)req)->stream);
		return c && c->alias ? rgpu_journals_kept(js, c->alias) : c;
	}
	case RGPU_MSG_GRAPH_EXEC_UPDATE:
		return exec_journal(js, ((const Rgpu__GraphExecUpdate *)req)->exec);
	case RGPU_MSG_GRAPH_COND:
		return graph_journal(js, ((const Rgpu__GraphCond *)req)->graph);
	}
	return NULL;
}

/*
 * A child graph node's copy of its graph, a conditional node's bodies: their changes go where
 * the node's graph's go.
 */
static int alias_one(struct rgpu_journals *js, uint64_t id, uint64_t graph)
{
	struct rgpu_journal *a;

	rgpu_journal_free(take_journal(&js->kept, id));
	a = push_new(&js->kept, id, 0);
	if (!a)
		return RGPU_ENOMEM;
	a->alias = graph;
	return 0;
}

static int child_alias(struct rgpu_journals *js, unsigned type, const ProtobufCMessage *req)
{
	const Rgpu__GraphNode *m = (const Rgpu__GraphNode *)req;
	int ret = 0;

	if (type != RGPU_MSG_GRAPH_NODE || m->op != RGPU__GRAPH_NODE_OP__NODE_ADD)
		return 0;
	if (m->child_copy)
		ret = alias_one(js, m->child_copy, m->graph);
	for (size_t i = 0; ret == 0 && i < m->n_bodies; i++)
		ret = alias_one(js, m->bodies[i], m->graph);
	return ret;
}

static void journal_into(struct rgpu_journal *j, struct st_rec *rec, int len_field)
{
	rgpu_journal_digest(j, rec->hash);
	rec->has_hash = true;
	rec->f[len_field] = j->total;
}

int rgpu_journals_step(struct rgpu_journals *js, unsigned type, const ProtobufCMessage *req,
		       const void *body, size_t blen, const void *payload, size_t plen,
		       struct rgpu_rec_ops *ops)
{
	struct rgpu_journal *j;
	int ret = 0;

	switch (type) {
	case RGPU_MSG_CAPTURE_BEGIN: {
		const Rgpu__CaptureOp *c = (const Rgpu__CaptureOp *)req;
		struct rgpu_journal *g = NULL;
		if (!ops->n)
			return 0;
		/* captured into a graph that exists: the begin, the work and the end go into its
		 * journal, which the capture's entry names */
		if (c->to_graph && (!(g = graph_journal(js, c->graph)) ||
				    rgpu_journal_add(g, (uint16_t)type, body, blen, payload, plen)))
			return RGPU_ENOMEM;
		/* a capture begun again on the same stream starts a new journal */
		rgpu_journal_free(take_journal(&js->capturing, c->stream));
		j = push_new(&js->capturing, c->stream, g ? 0 : js->keep);
		if (!j)
			return RGPU_ENOMEM;
		j->graph = c->graph;
		j->alias = g ? c->graph : 0;
		return 0;
	}
	case RGPU_MSG_CAPTURE_END: {
		const Rgpu__CaptureOp *c = (const Rgpu__CaptureOp *)req;
		j = take_journal(&js->capturing, c->stream);
		if (j && j->alias) {
			struct rgpu_journal *g = rgpu_journals_kept(js, j->alias);
			rgpu_journal_free(j);
			return g && !rgpu_journal_add(g, (uint16_t)type, body, blen, payload, plen)
				   ? 0
				   : RGPU_ENOMEM;
		}
		for (int i = 0; j && i < ops->n; i++) {
			if (!ops->v[i].journal)
				continue;
			journal_into(j, &ops->v[i].rec, 3);
			rgpu_journal_free(take_journal(&js->kept, ops->v[i].rec.id));
			j->stream = ops->v[i].rec.id;
			j->graph = 0;
			j->next = js->kept;
			js->kept = j;
			j = NULL;
		}
		rgpu_journal_free(j);
		return 0;
	}
	case RGPU_MSG_GRAPH_INSTANTIATE:
	case RGPU_MSG_GRAPH_CLONE: {
		/* the exec, or the clone, is its graph as the graph's journal is now */
		uint64_t src = type == RGPU_MSG_GRAPH_CLONE ? ((const Rgpu__GraphClone *)req)->graph
							     : ((const Rgpu__GraphOp *)req)->graph;
		j = rgpu_journals_kept(js, src);
		for (int i = 0; j && i < ops->n; i++)
			if (ops->v[i].op == RGPU_REC_ADD)
				journal_into(j, &ops->v[i].rec, type == RGPU_MSG_GRAPH_CLONE ? 5 : 4);
		if (type == RGPU_MSG_GRAPH_CLONE && ops->n) {
			/* the clone's own journal opens with the frame that made it */
			uint64_t id = ((const Rgpu__GraphClone *)req)->clone;
			rgpu_journal_free(take_journal(&js->kept, id));
			j = push_new(&js->kept, id, js->keep);
			if (!j || rgpu_journal_add(j, (uint16_t)type, body, blen, payload, plen))
				return RGPU_ENOMEM;
		}
		return 0;
	}
	case RGPU_MSG_GRAPH_EXEC_DESTROY:
		/* nothing is rebuilt from an exec's changes once it is gone */
		rgpu_journal_free(take_journal(&js->kept, ((const Rgpu__GraphOp *)req)->exec));
		return 0;
	}
	if (rgpu_journal_edits(type)) {
		j = edit_journal(js, type, req);
		if (!j || rgpu_journal_add(j, (uint16_t)type, body, blen, payload, plen))
			ret = RGPU_ENOMEM;
		if (child_alias(js, type, req))
			ret = RGPU_ENOMEM;
		return ret;
	}
	if (js->capturing && rgpu_journal_wants(type)) {
		for (j = js->capturing; j; j = j->next) {
			struct rgpu_journal *t = j->alias ? rgpu_journals_kept(js, j->alias) : j;
			if (!t || rgpu_journal_add(t, (uint16_t)type, body, blen, payload, plen))
				ret = RGPU_ENOMEM;
		}
	}
	return ret;
}

int rgpu_journal_edits(unsigned type)
{
	return type == RGPU_MSG_GRAPH_NODE || type == RGPU_MSG_GRAPH_EDIT ||
	       type == RGPU_MSG_GRAPH_BIND || type == RGPU_MSG_CAPTURE_DEPS ||
	       type == RGPU_MSG_GRAPH_EXEC_UPDATE || type == RGPU_MSG_GRAPH_COND;
}

int rgpu_journal_wants(unsigned type)
{
	const struct rgpu_msg_info *mi = rgpu_msg_info(type);

	/*
	 * a host function's acknowledgement comes from the callback thread, in no stream; host
	 * memory writes are applied by the worker's reader at once, in no stream either
	 */
	if (type == RGPU_MSG_CALLBACK_DONE || type == RGPU_MSG_HOST_MIRROR ||
	    type == RGPU_MSG_HOST_WRITE || rgpu_journal_edits(type))
		return 0;
	return mi && mi->call_class == RGPU_CLASS_POST && mi->effect == RGPU_EFFECT_NONE &&
	       mi->rule->dir == RGPU_DIR_TO_SERVER;
}
