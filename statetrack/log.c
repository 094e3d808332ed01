/*
 * The live-object table: records keyed by id, kept in creation order, pruned as objects die.
 * This file owns the table and its invariants (ids unique and non-zero, every parent and ctx a
 * live record created earlier, every record's dependents removed with it); stream.c,
 * digest.c and describe.c see it only through the public API and st_int.h. It never does I/O
 * and never interprets the kind-specific fields beyond the rules listed in statetrack.h.
 *
 * Layout: every record is a node on an intrusive doubly-linked list in creation order (replay
 * order; O(1) unlink) and on the chain of its bucket in a hash table keyed by id (O(1) average
 * add, find and remove). The table is a few dozen lines of chaining written here rather than a
 * library (uthash, GLib): this code is linked into the interposer, which is loaded into
 * arbitrary applications and should carry no dependency it does not need, and neither library
 * is among the project's packages. Each node also points at the nodes its parent and ctx name
 * and counts the live nodes that point at it, so that a removal knows in O(1) whether it has
 * dependents to take with it.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/statetrack.h"
#include "st_int.h"

#define MIN_BUCKETS 64u

struct st_node {
	struct st_node *prev, *next; /* creation order; the log's sentinel closes the ring */
	struct st_node *hnext;	     /* next node in the same bucket */
	struct st_node *parent_n;    /* the live node rec.parent names, or NULL */
	struct st_node *ctx_n;	     /* the live node rec.ctx names, or NULL */
	uint64_t ndeps;		     /* live nodes whose parent_n or ctx_n is this one */
	bool doomed;		     /* marked during a cascading removal */
	struct st_rec rec;	     /* rec.name: owned by the node, or NULL */
};

struct st_log {
	struct st_node head; /* sentinel: head.next is the oldest record, head.prev the newest */
	struct st_node **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
};

/* splitmix64's finalizer: ids are often sequential or aligned; spread them over the bits. */
static inline size_t bucket_of(const struct st_log *log, uint64_t id)
{
	id ^= id >> 30;
	id *= 0xbf58476d1ce4e5b9ull;
	id ^= id >> 27;
	id *= 0x94d049bb133111ebull;
	id ^= id >> 31;
	return (size_t)id & (log->nbuckets - 1);
}

static struct st_node *lookup(const struct st_log *log, uint64_t id)
{
	struct st_node *n;

	for (n = log->buckets[bucket_of(log, id)]; n; n = n->hnext)
		if (n->rec.id == id)
			return n;
	return NULL;
}

/*
 * Move every node to a table of nb buckets. A failed allocation keeps the old table: it is
 * still correct, only slower, so growing never makes st_add fail.
 */
static void rehash(struct st_log *log, size_t nb)
{
	struct st_node **old = log->buckets, *n, *next;
	size_t i, onb = log->nbuckets;

	log->buckets = calloc(nb, sizeof(*log->buckets));
	if (!log->buckets) {
		log->buckets = old;
		return;
	}
	log->nbuckets = nb;
	for (i = 0; i < onb; i++) {
		for (n = old[i]; n; n = next) {
			size_t b = bucket_of(log, n->rec.id);
			next = n->hnext;
			n->hnext = log->buckets[b];
			log->buckets[b] = n;
		}
	}
	free(old);
}

int st_log_new(struct st_log **out)
{
	struct st_log *log;

	if (!out)
		return RGPU_EINVAL;
	log = calloc(1, sizeof(*log));
	if (!log)
		return RGPU_ENOMEM;
	log->buckets = calloc(MIN_BUCKETS, sizeof(*log->buckets));
	if (!log->buckets) {
		free(log);
		return RGPU_ENOMEM;
	}
	log->nbuckets = MIN_BUCKETS;
	log->head.next = log->head.prev = &log->head;
	*out = log;
	return 0;
}

void st_log_free(struct st_log *log)
{
	struct st_node *n, *next;

	if (!log)
		return;
	for (n = log->head.next; n != &log->head; n = next) {
		next = n->next;
		free((char *)n->rec.name);
		free(n);
	}
	free(log->buckets);
	free(log);
}

static bool needs_name(uint32_t kind)
{
	return kind == ST_KIND_FUNCTION || kind == ST_KIND_KERNEL || kind == ST_KIND_GLOBAL;
}

static bool needs_parent(uint32_t kind)
{
	return needs_name(kind) || kind == ST_KIND_ATTR;
}

/* May a record of this kind have a parent of that kind? */
static bool parent_kind_ok(uint32_t kind, uint32_t parent_kind)
{
	switch (kind) {
	case ST_KIND_FUNCTION: /* cuKernelGetFunction: a library kernel's per-context function */
		return parent_kind == ST_KIND_MODULE || parent_kind == ST_KIND_KERNEL;
	case ST_KIND_KERNEL:
	case ST_KIND_GLOBAL:
		return parent_kind == ST_KIND_MODULE;
	case ST_KIND_VMM_MAP: /* an application's mapping: the physical memory it maps */
		return parent_kind == ST_KIND_PHYSMEM;
	case ST_KIND_ARRAY: /* a level of a mipmapped array */
		return parent_kind == ST_KIND_MIPMAP;
	default:
		return true;
	}
}

int st__check_rec(const struct st_rec *rec, size_t *name_len)
{
	size_t nl = 0;

	if (rec->kind > ST_KIND_MAX || rec->id == 0)
		return RGPU_EINVAL;
	if (rec->kind == ST_KIND_TOMBSTONE) {
		*name_len = 0;
		return 0;
	}
	if (rec->name) {
		nl = strnlen(rec->name, ST_NAME_MAX + 1);
		if (nl > ST_NAME_MAX)
			return RGPU_ETOOBIG;
	}
	if (needs_name(rec->kind) && nl == 0)
		return RGPU_EINVAL;
	if (needs_parent(rec->kind) && rec->parent == 0)
		return RGPU_EINVAL;
	if (rec->kind == ST_KIND_MODULE && !rec->has_hash)
		return RGPU_EINVAL;
	*name_len = nl;
	return 0;
}

/* The checks against the live table: parent and ctx exist and are of the right kind. */
static int check_refs(struct st_log *log, const struct st_rec *rec, struct st_node **pn,
		      struct st_node **cn)
{
	*pn = *cn = NULL;
	if (rec->parent) {
		*pn = lookup(log, rec->parent);
		if (!*pn)
			return RGPU_ENOTFOUND;
		if (!parent_kind_ok(rec->kind, (*pn)->rec.kind))
			return RGPU_EINVAL;
	}
	if (rec->ctx) {
		*cn = lookup(log, rec->ctx);
		if (!*cn)
			return RGPU_ENOTFOUND;
		if ((*cn)->rec.kind != ST_KIND_CONTEXT)
			return RGPU_EINVAL;
	}
	return 0;
}

static char *dup_name(const char *name, size_t nl)
{
	char *s = malloc(nl + 1);

	if (s) {
		memcpy(s, name, nl);
		s[nl] = '\0';
	}
	return s;
}

/* Copy what st_update may change; the hash is canonical (zero) when absent. */
static void copy_fields(struct st_rec *dst, const struct st_rec *src)
{
	memcpy(dst->f, src->f, sizeof(dst->f));
	dst->has_hash = src->has_hash;
	if (src->has_hash)
		memcpy(dst->hash, src->hash, ST_HASH_LEN);
	else
		memset(dst->hash, 0, ST_HASH_LEN);
}

int st_add(struct st_log *log, const struct st_rec *rec)
{
	struct st_node *n, *pn, *cn;
	size_t nl, b;
	int rc;

	if (!log || !rec || rec->kind == ST_KIND_TOMBSTONE)
		return RGPU_EINVAL;
	rc = st__check_rec(rec, &nl);
	if (rc)
		return rc;
	if (lookup(log, rec->id))
		return RGPU_EEXIST;
	rc = check_refs(log, rec, &pn, &cn);
	if (rc)
		return rc;

	n = calloc(1, sizeof(*n));
	if (!n)
		return RGPU_ENOMEM;
	n->rec.kind = rec->kind;
	n->rec.id = rec->id;
	n->rec.parent = rec->parent;
	n->rec.ctx = rec->ctx;
	copy_fields(&n->rec, rec);
	if (nl) {
		char *s = dup_name(rec->name, nl);
		if (!s) {
			free(n);
			return RGPU_ENOMEM;
		}
		n->rec.name = s;
	}

	n->parent_n = pn;
	n->ctx_n = cn;
	if (pn)
		pn->ndeps++;
	if (cn)
		cn->ndeps++;
	n->prev = log->head.prev;
	n->next = &log->head;
	log->head.prev->next = n;
	log->head.prev = n;
	b = bucket_of(log, n->rec.id);
	n->hnext = log->buckets[b];
	log->buckets[b] = n;
	log->count++;
	if (log->count > log->nbuckets)
		rehash(log, log->nbuckets * 2);
	return 0;
}

int st_update(struct st_log *log, const struct st_rec *rec)
{
	struct st_node *n;
	char *s = NULL;
	size_t nl;
	int rc;

	if (!log || !rec)
		return RGPU_EINVAL;
	n = lookup(log, rec->id);
	if (!n)
		return RGPU_ENOTFOUND;
	if (rec->kind != n->rec.kind || rec->parent != n->rec.parent || rec->ctx != n->rec.ctx)
		return RGPU_EINVAL;
	rc = st__check_rec(rec, &nl);
	if (rc)
		return rc;
	if (nl) {
		s = dup_name(rec->name, nl);
		if (!s)
			return RGPU_ENOMEM;
	}
	free((char *)n->rec.name);
	n->rec.name = s;
	copy_fields(&n->rec, rec);
	return 0;
}

/* Take one node off the list and its bucket and free it. Its dependents are already gone. */
static void unlink_free(struct st_log *log, struct st_node *n)
{
	struct st_node **pp = &log->buckets[bucket_of(log, n->rec.id)];

	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	if (n->parent_n)
		n->parent_n->ndeps--;
	if (n->ctx_n)
		n->ctx_n->ndeps--;
	free((char *)n->rec.name);
	free(n);
	log->count--;
}

int st_remove_each(struct st_log *log, uint64_t id, void (*fn)(const struct st_rec *rec, void *arg),
		   void *arg)
{
	struct st_node *n, *m, *prev;
	bool last;

	if (!log)
		return RGPU_EINVAL;
	n = lookup(log, id);
	if (!n)
		return RGPU_ENOTFOUND;

	if (n->ndeps) {
		/*
		 * Dependents are always created after what they name (st_add refuses a reference
		 * to anything not yet live), so one forward walk from n finds them all,
		 * transitively. Free newest first: a node's parent and ctx are then still there
		 * when its unlink decrements their ndeps (and fn sees the dependents before what
		 * they depend on, n last).
		 */
		n->doomed = true;
		for (m = n->next; m != &log->head; m = m->next)
			if ((m->parent_n && m->parent_n->doomed) || (m->ctx_n && m->ctx_n->doomed))
				m->doomed = true;
		for (m = log->head.prev, last = false; !last; m = prev) {
			prev = m->prev;
			last = m == n;
			if (!m->doomed)
				continue;
			if (fn)
				fn(&m->rec, arg);
			unlink_free(log, m);
		}
	} else {
		if (fn)
			fn(&n->rec, arg);
		unlink_free(log, n);
	}

	/*
	 * Shrink below 1/8 load, to 1/4 or more: the gap to the doubling point (load 1) keeps
	 * this amortised O(1). A cascade may have removed most of the table at once.
	 */
	if (log->nbuckets > MIN_BUCKETS && log->count < log->nbuckets / 8) {
		size_t nb = log->nbuckets;
		while (nb > MIN_BUCKETS && log->count < nb / 8)
			nb /= 2;
		rehash(log, nb);
	}
	return 0;
}

int st_remove(struct st_log *log, uint64_t id)
{
	return st_remove_each(log, id, NULL, NULL);
}

const struct st_rec *st_find(struct st_log *log, uint64_t id)
{
	struct st_node *n;

	if (!log || id == 0)
		return NULL;
	n = lookup(log, id);
	return n ? &n->rec : NULL;
}

size_t st_count(struct st_log *log)
{
	return log ? log->count : 0;
}

int st_foreach(struct st_log *log, int (*fn)(const struct st_rec *rec, void *arg), void *arg)
{
	struct st_node *n;
	int rc;

	if (!log || !fn)
		return RGPU_EINVAL;
	for (n = log->head.next; n != &log->head; n = n->next) {
		rc = fn(&n->rec, arg);
		if (rc)
			return rc;
	}
	return 0;
}

const struct st_rec *st__next(struct st_log *log, const struct st_rec *rec)
{
	const struct st_node *n;

	if (!rec)
		n = log->head.next;
	else
		n = ((const struct st_node *)((const char *)rec - offsetof(struct st_node, rec)))
			->next;
	return n == &log->head ? NULL : &n->rec;
}
