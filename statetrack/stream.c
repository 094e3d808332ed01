/*
 * State-log streams: the byte layout of snapshots and journals (documented in statetrack.h),
 * their encoding and their replay. This file owns the stream header, the frame (length, CRC,
 * protobuf-c body) and the rules for telling a torn tail from corruption. It must never
 * allocate from a length it has not checked against both the bytes left and ST_BODY_MAX, and
 * must never hand back a log built from a stream whose magic or version is wrong.
 *
 * The CRC is zlib's CRC-32: every single-byte change (any burst up to 32 bits) is detected,
 * and zlib is on every host the interposer can be loaded on.
 */
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/statetrack.h"
#include "rgpu/util.h"
#include "st_int.h"
#include "statetrack.pb-c.h"

/* The C enum and the schema's enum are one list of numbers: keep them in step. */
#define SAME_KIND(c, p) _Static_assert((int)(c) == (int)RGPU__ST_KIND__##p, #c " != " #p)
SAME_KIND(ST_KIND_TOMBSTONE, ST_KIND_TOMBSTONE);
SAME_KIND(ST_KIND_CONTEXT, ST_KIND_CONTEXT);
SAME_KIND(ST_KIND_ALLOC, ST_KIND_ALLOC);
SAME_KIND(ST_KIND_VMM_MAP, ST_KIND_VMM_MAP);
SAME_KIND(ST_KIND_MODULE, ST_KIND_MODULE);
SAME_KIND(ST_KIND_FUNCTION, ST_KIND_FUNCTION);
SAME_KIND(ST_KIND_KERNEL, ST_KIND_KERNEL);
SAME_KIND(ST_KIND_GLOBAL, ST_KIND_GLOBAL);
SAME_KIND(ST_KIND_STREAM, ST_KIND_STREAM);
SAME_KIND(ST_KIND_EVENT, ST_KIND_EVENT);
SAME_KIND(ST_KIND_MEMPOOL, ST_KIND_MEMPOOL);
SAME_KIND(ST_KIND_GRAPH, ST_KIND_GRAPH);
SAME_KIND(ST_KIND_GRAPH_EXEC, ST_KIND_GRAPH_EXEC);
SAME_KIND(ST_KIND_HOST_CALLBACK, ST_KIND_HOST_CALLBACK);
SAME_KIND(ST_KIND_ATTR, ST_KIND_ATTR);
SAME_KIND(ST_KIND_PHYSMEM, ST_KIND_PHYSMEM);
SAME_KIND(ST_KIND_ARRAY, ST_KIND_ARRAY);
SAME_KIND(ST_KIND_MIPMAP, ST_KIND_MIPMAP);
SAME_KIND(ST_KIND_TEXOBJ, ST_KIND_TEXOBJ);

static uint32_t crc(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	uLong c = crc32_z(0, Z_NULL, 0);

	c = crc32_z(c, a, alen);
	if (blen)
		c = crc32_z(c, b, blen);
	return (uint32_t)c;
}

/* --- header ------------------------------------------------------------------------------- */

static void header_encode(uint8_t out[ST_STREAM_HDR_LEN], uint16_t flags, uint64_t count)
{
	wr_le32(out + 0, ST_STREAM_MAGIC);
	wr_le16(out + 4, ST_STREAM_VERSION);
	wr_le16(out + 6, flags);
	wr_le64(out + 8, count);
	wr_le32(out + 16, 0);
	wr_le32(out + 20, crc(out, 20, NULL, 0));
}

void st_journal_header(uint8_t out[ST_STREAM_HDR_LEN])
{
	header_encode(out, ST_STREAM_OPEN, 0);
}

/*
 * Check as much of the header as is there. Magic and version are compared byte by byte
 * against what they must be, so even a stream cut inside its header is refused when it is
 * not ours. Returns 0 (complete and valid), 1 (cut short but a valid prefix), or an error.
 */
static int header_decode(const uint8_t *buf, size_t len, uint16_t *flags, uint64_t *count)
{
	uint8_t want[6];
	size_t i;

	wr_le32(want, ST_STREAM_MAGIC);
	wr_le16(want + 4, ST_STREAM_VERSION);
	for (i = 0; i < len && i < sizeof(want); i++)
		if (buf[i] != want[i])
			return i < 4 ? RGPU_EMAGIC : RGPU_EVERSION;
	if (len < ST_STREAM_HDR_LEN)
		return 1;
	if (rd_le32(buf + 20) != crc(buf, 20, NULL, 0) || rd_le32(buf + 16) != 0)
		return RGPU_ECORRUPT;
	*flags = rd_le16(buf + 6);
	*count = rd_le64(buf + 8);
	if (*flags & ~ST_STREAM_OPEN)
		return RGPU_EUNSUPPORTED;
	return 0;
}

/* --- frames ------------------------------------------------------------------------------- */

/* A record as a message. The message points into rec and fields[]: both must outlive it. */
static void to_msg(const struct st_rec *rec, size_t name_len, Rgpu__StRecord *m,
		   uint64_t fields[ST_NFIELDS])
{
	size_t n = ST_NFIELDS;

	rgpu__st_record__init(m);
	m->kind = (Rgpu__StKind)rec->kind;
	m->id = rec->id;
	if (rec->kind == ST_KIND_TOMBSTONE)
		return;
	m->parent = rec->parent;
	m->ctx = rec->ctx;
	/* trailing zero fields are left out: the reader fills them in */
	while (n && rec->f[n - 1] == 0)
		n--;
	memcpy(fields, rec->f, n * sizeof(*fields));
	m->n_field = n;
	m->field = fields;
	if (name_len) {
		m->name.len = name_len;
		m->name.data = (uint8_t *)rec->name;
	}
	if (rec->has_hash) {
		m->hash.len = ST_HASH_LEN;
		m->hash.data = (uint8_t *)rec->hash;
	}
}

/* Pack one frame at buf, which has room for ST_FRAME_HDR_LEN + the message's packed size. */
static size_t frame_pack(const Rgpu__StRecord *m, uint8_t *buf)
{
	size_t blen = rgpu__st_record__pack(m, buf + ST_FRAME_HDR_LEN);

	wr_le32(buf, (uint32_t)blen);
	wr_le32(buf + 4, crc(buf, 4, buf + ST_FRAME_HDR_LEN, blen));
	return ST_FRAME_HDR_LEN + blen;
}

size_t st_frame_size(const struct st_rec *rec)
{
	uint64_t fields[ST_NFIELDS];
	Rgpu__StRecord m;
	size_t nl;

	if (!rec || st__check_rec(rec, &nl))
		return 0;
	to_msg(rec, nl, &m, fields);
	return ST_FRAME_HDR_LEN + rgpu__st_record__get_packed_size(&m);
}

int st_serialize_rec(const struct st_rec *rec, uint8_t *buf, size_t cap, size_t *len)
{
	uint64_t fields[ST_NFIELDS];
	Rgpu__StRecord m;
	size_t nl, need;
	int rc;

	if (!rec || !len)
		return RGPU_EINVAL;
	rc = st__check_rec(rec, &nl);
	if (rc)
		return rc;
	to_msg(rec, nl, &m, fields);
	need = ST_FRAME_HDR_LEN + rgpu__st_record__get_packed_size(&m);
	*len = need;
	if (!buf || cap < need)
		return RGPU_ENOSPC;
	frame_pack(&m, buf);
	return 0;
}

int st_serialize_tombstone(uint64_t id, uint8_t *buf, size_t cap, size_t *len)
{
	struct st_rec t = {.kind = ST_KIND_TOMBSTONE, .id = id};

	return st_serialize_rec(&t, buf, cap, len);
}

/* --- snapshots ---------------------------------------------------------------------------- */

struct ser {
	uint8_t *buf; /* NULL: only add up the size */
	size_t off;
};

static int ser_one(const struct st_rec *rec, void *arg)
{
	struct ser *s = arg;
	uint64_t fields[ST_NFIELDS];
	Rgpu__StRecord m;

	/* the log only holds records that passed st__check_rec: their name fits */
	to_msg(rec, rec->name ? strlen(rec->name) : 0, &m, fields);
	if (s->buf)
		s->off += frame_pack(&m, s->buf + s->off);
	else
		s->off += ST_FRAME_HDR_LEN + rgpu__st_record__get_packed_size(&m);
	return 0;
}

static int serialize(struct st_log *log, uint16_t flags, uint8_t **buf, size_t *len)
{
	struct ser s = {.buf = NULL, .off = ST_STREAM_HDR_LEN};
	size_t total;

	if (!log || !buf || !len)
		return RGPU_EINVAL;
	st_foreach(log, ser_one, &s);
	total = s.off;
	s.buf = malloc(total);
	if (!s.buf)
		return RGPU_ENOMEM;
	header_encode(s.buf, flags, st_count(log));
	s.off = ST_STREAM_HDR_LEN;
	st_foreach(log, ser_one, &s);
	*buf = s.buf;
	*len = s.off;
	return 0;
}

int st_serialize(struct st_log *log, uint8_t **buf, size_t *len)
{
	return serialize(log, 0, buf, len);
}

int st_serialize_journal(struct st_log *log, uint8_t **buf, size_t *len)
{
	return serialize(log, ST_STREAM_OPEN, buf, len);
}

/* --- replay ------------------------------------------------------------------------------- */

/*
 * Apply one decoded message to the log. Everything here passed its CRC, so a failure is
 * corruption (or a newer writer), never a torn write.
 */
static int apply(struct st_log *log, const Rgpu__StRecord *m, bool sealed)
{
	struct st_rec r = {0};
	char *name = NULL;
	int rc;

	if ((uint32_t)m->kind > ST_KIND_MAX || m->n_field > ST_NFIELDS)
		return RGPU_EUNSUPPORTED;
	if (m->id == 0 || (m->hash.len != 0 && m->hash.len != ST_HASH_LEN) ||
	    m->name.len > ST_NAME_MAX || (m->name.len && memchr(m->name.data, '\0', m->name.len)))
		return RGPU_ECORRUPT;

	if (m->kind == RGPU__ST_KIND__ST_KIND_TOMBSTONE) {
		if (m->parent || m->ctx || m->n_field || m->name.len || m->hash.len)
			return RGPU_ECORRUPT;
		return st_remove(log, m->id) ? RGPU_ECORRUPT : 0;
	}

	r.kind = (uint32_t)m->kind;
	r.id = m->id;
	r.parent = m->parent;
	r.ctx = m->ctx;
	if (m->n_field)
		memcpy(r.f, m->field, m->n_field * sizeof(*m->field));
	if (m->name.len) {
		name = malloc(m->name.len + 1);
		if (!name)
			return RGPU_ENOMEM;
		memcpy(name, m->name.data, m->name.len);
		name[m->name.len] = '\0';
		r.name = name;
	}
	if (m->hash.len) {
		r.has_hash = true;
		memcpy(r.hash, m->hash.data, ST_HASH_LEN);
	}

	/* a live id is an update in a journal, and never appears twice in a snapshot */
	if (st_find(log, r.id))
		rc = sealed ? RGPU_ECORRUPT : st_update(log, &r);
	else
		rc = st_add(log, &r);
	free(name);
	if (rc && rc != RGPU_ENOMEM)
		rc = RGPU_ECORRUPT;
	return rc;
}

int st_deserialize(const uint8_t *buf, size_t len, struct st_log **out, struct st_load_result *res)
{
	struct st_load_result r = {0};
	struct st_log *log;
	uint16_t flags = 0;
	uint64_t count = 0;
	size_t off;
	bool sealed;
	int rc, hdr;

	if (!out || (!buf && len))
		return RGPU_EINVAL;
	hdr = header_decode(buf, len, &flags, &count);
	if (hdr < 0)
		return hdr;
	rc = st_log_new(&log);
	if (rc)
		return rc;
	if (hdr == 1) {
		/* cut inside the header: nothing to keep */
		r.torn = true;
		goto out_done;
	}
	sealed = !(flags & ST_STREAM_OPEN);
	r.open = !sealed;
	off = ST_STREAM_HDR_LEN;
	r.valid_bytes = off;

	while (off < len && !(sealed && r.records == count)) {
		size_t left = len - off;
		Rgpu__StRecord *m;
		uint32_t blen;

		/* every way a write can be cut short or a frame damaged ends the stream here */
		if (left < ST_FRAME_HDR_LEN)
			break;
		blen = rd_le32(buf + off);
		if (blen == 0 || blen > ST_BODY_MAX || blen > left - ST_FRAME_HDR_LEN)
			break;
		if (rd_le32(buf + off + 4) != crc(buf + off, 4, buf + off + ST_FRAME_HDR_LEN, blen))
			break;

		m = RGPU_PB_UNPACK(rgpu__st_record, blen, buf + off + ST_FRAME_HDR_LEN);
		if (!m) {
			rc = RGPU_ECORRUPT;
			goto out_free;
		}
		rc = apply(log, m, sealed);
		rgpu__st_record__free_unpacked(m, NULL);
		if (rc)
			goto out_free;
		off += ST_FRAME_HDR_LEN + blen;
		r.records++;
		r.valid_bytes = off;
	}

	if (sealed && r.records == count && off < len) {
		rc = RGPU_ECORRUPT; /* bytes after a complete snapshot */
		goto out_free;
	}
	r.torn = off < len || r.records < count;

out_done:
	if (r.torn && !res) {
		rc = RGPU_ECORRUPT;
		goto out_free;
	}
	if (res)
		*res = r;
	*out = log;
	return 0;

out_free:
	st_log_free(log);
	return rc;
}
