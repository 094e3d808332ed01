/*
 * Records in words, for logs and error messages: the name of each kind and of its fields
 * (st_kind_name, st_rec_describe). This file owns the one table that names them, which must
 * follow the kind table in statetrack.h. It only reads records: it never touches a log, never
 * allocates, and never writes past the buffer it is given.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rgpu/statetrack.h"
#include "rgpu/util.h"

#define NAME_SHOWN 64 /* characters of a name a description shows */
#define HASH_SHOWN 6  /* bytes of a hash a description shows (12 hex digits) */

enum fmt {
	F_NONE = 0, /* a slot the kind does not use: shown as f[i]=0x... when non-zero */
	F_DEC,	    /* unsigned decimal */
	F_DEC_SET,  /* unsigned decimal, only when non-zero */
	F_SDEC,	    /* signed decimal */
	F_HEX,	    /* 0x..., always */
	F_FLAGS,    /* 0x..., only when non-zero */
	F_ID,	    /* the id of another record: as id= is printed */
};

struct field {
	const char *name;
	enum fmt fmt;
};

struct kind_desc {
	const char *name;
	struct field f[ST_NFIELDS];
};

/* clang-format off */
static const struct kind_desc kinds[] = {
	[ST_KIND_TOMBSTONE] = {"tombstone", {{0}}},
	[ST_KIND_CONTEXT] = {"context", {{"device", F_DEC}, {"flags", F_FLAGS}, {"primary", F_DEC}}},
	[ST_KIND_ALLOC] = {"allocation", {{"addr", F_HEX}, {"size", F_DEC}, {"device", F_DEC},
					  {"flags", F_FLAGS}}},
	[ST_KIND_VMM_MAP] = {"VMM mapping", {{"addr", F_HEX}, {"size", F_DEC}, {"device", F_DEC},
					     {"offset", F_DEC_SET}, {"access", F_FLAGS}}},
	[ST_KIND_MODULE] = {"module", {{"size", F_DEC}, {"library", F_DEC}}},
	[ST_KIND_FUNCTION] = {"function", {{0}}},
	[ST_KIND_KERNEL] = {"kernel", {{0}}},
	[ST_KIND_GLOBAL] = {"global", {{"addr", F_HEX}, {"size", F_DEC}}},
	[ST_KIND_STREAM] = {"stream", {{"flags", F_FLAGS}, {"priority", F_SDEC}}},
	[ST_KIND_EVENT] = {"event", {{"flags", F_FLAGS}}},
	[ST_KIND_MEMPOOL] = {"memory pool", {{"device", F_DEC}}},
	[ST_KIND_GRAPH] = {"graph", {{"flags", F_FLAGS}, {"stream", F_ID}, {"mode", F_DEC}}},
	[ST_KIND_GRAPH_EXEC] = {"graph exec", {{"flags", F_FLAGS}}},
	[ST_KIND_HOST_CALLBACK] = {"host callback", {{"fn", F_HEX}, {"user", F_HEX}}},
	[ST_KIND_ATTR] = {"attribute", {{"key", F_DEC}, {"value", F_DEC}}},
	[ST_KIND_PHYSMEM] = {"physical memory", {{"size", F_DEC}, {"device", F_DEC}}},
	[ST_KIND_ARRAY] = {"array", {{"width", F_DEC}, {"height", F_DEC}, {"depth", F_DEC},
				     {"format", F_HEX}, {"flags", F_FLAGS}, {"level", F_DEC_SET}}},
	[ST_KIND_MIPMAP] = {"mipmapped array", {{"width", F_DEC}, {"height", F_DEC},
						{"depth", F_DEC}, {"format", F_HEX},
						{"flags", F_FLAGS}, {"levels", F_DEC}}},
	[ST_KIND_TEXOBJ] = {"texture object", {{"value", F_HEX}, {"surface", F_DEC}, {"view", F_DEC_SET},
						{"resource", F_ID}}},
};
/* clang-format on */
_Static_assert(ARRAY_SIZE(kinds) == ST_KIND_MAX + 1, "every kind has a row in kinds[]");

const char *st_kind_name(uint32_t kind)
{
	return kind <= ST_KIND_MAX ? kinds[kind].name : "?";
}

/* A line being written: snprintf's contract, spread over several calls. */
struct out {
	char *buf;
	size_t n;   /* bytes of buf, NUL included */
	size_t len; /* the line's length so far, also beyond n */
};

static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
	bool room = o->len < o->n;
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(room ? o->buf + o->len : NULL, room ? o->n - o->len : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->len += (size_t)k;
}

/* Ids are counters, except an allocation's, which is its address: hex reads better there. */
static void put_id(struct out *o, const char *key, uint64_t v)
{
	if (v < (1ull << 32))
		put(o, " %s=%" PRIu64, key, v);
	else
		put(o, " %s=0x%" PRIx64, key, v);
}

static void put_field(struct out *o, const struct field *fd, int i, uint64_t v)
{
	switch (fd->fmt) {
	case F_NONE:
		if (v)
			put(o, " f[%d]=0x%" PRIx64, i, v);
		break;
	case F_DEC_SET:
		if (!v)
			break;
		/* fall through */
	case F_DEC:
		put(o, " %s=%" PRIu64, fd->name, v);
		break;
	case F_SDEC:
		put(o, " %s=%" PRId64, fd->name, (int64_t)v);
		break;
	case F_FLAGS:
		if (!v)
			break;
		/* fall through */
	case F_HEX:
		put(o, " %s=0x%" PRIx64, fd->name, v);
		break;
	case F_ID:
		put_id(o, fd->name, v);
		break;
	}
}

/* The name's first NAME_SHOWN characters, quoted, with control characters as '?'. */
static void put_name(struct out *o, const char *name)
{
	char s[NAME_SHOWN + 1];
	size_t nl = strnlen(name, NAME_SHOWN + 1), i;

	for (i = 0; i < nl && i < NAME_SHOWN; i++) {
		unsigned char c = (unsigned char)name[i];
		s[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	s[i] = '\0';
	put(o, " name=\"%s\"%s", s, nl > NAME_SHOWN ? "..." : "");
}

int st_rec_describe(const struct st_rec *rec, char *buf, size_t n)
{
	struct out o = {.buf = buf, .n = buf ? n : 0, .len = 0};
	static const struct field unnamed = {NULL, F_NONE};
	const struct kind_desc *kd;
	int i;

	if (o.n)
		buf[0] = '\0';
	if (!rec) {
		put(&o, "nothing");
		return (int)o.len;
	}
	kd = rec->kind <= ST_KIND_MAX ? &kinds[rec->kind] : NULL;
	if (kd)
		put(&o, "%s", kd->name);
	else
		put(&o, "kind=%" PRIu32, rec->kind);
	put_id(&o, "id", rec->id);
	if (rec->parent)
		put_id(&o, "parent", rec->parent);
	if (rec->ctx)
		put_id(&o, "ctx", rec->ctx);
	for (i = 0; i < ST_NFIELDS; i++)
		put_field(&o, kd && kd->f[i].name ? &kd->f[i] : &unnamed, i, rec->f[i]);
	if (rec->name && rec->name[0])
		put_name(&o, rec->name);
	if (rec->has_hash) {
		put(&o, " hash=");
		for (i = 0; i < HASH_SHOWN; i++)
			put(&o, "%02x", rec->hash[i]);
		put(&o, "...");
	}
	return (int)o.len;
}
