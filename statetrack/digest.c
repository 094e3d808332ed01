/*
 * The state log's digest: what the interposer and the worker compare at a migration
 * switchover. This file owns the canonical encoding the digest is taken over; it must never
 * depend on the protobuf encoding (whose bytes a library upgrade may change) nor on anything
 * but the live records and their order.
 *
 * Canonical encoding, all integers little-endian, fixed width:
 *
 *   "rgpu.statetrack.digest.1" (24 bytes, no NUL)
 *   per record, in creation order:
 *     u32 kind | u64 id | u64 parent | u64 ctx | u64 f[ST_NFIELDS]
 *     u32 name_len | name bytes | u8 has_hash | hash (32 bytes, only when has_hash)
 *   u64 number of records
 *
 * Every record's encoding is self-delimiting, so no two different tables encode alike.
 *
 * st_compare() lives here, beside the encoding, because it must compare exactly the fields
 * the encoding covers (same_rec and digest_one change together): then it finds a difference
 * iff the digests differ, and says where.
 */
#include <string.h>

#include <nettle/sha2.h>

#include "rgpu/err.h"
#include "rgpu/statetrack.h"
#include "rgpu/util.h"
#include "st_int.h"

static const char domain[] = "rgpu.statetrack.digest.1";

static int digest_one(const struct st_rec *rec, void *arg)
{
	struct sha256_ctx *ctx = arg;
	uint8_t b[4 + 3 * 8 + ST_NFIELDS * 8 + 4], *p = b;
	uint32_t nl = rec->name ? (uint32_t)strlen(rec->name) : 0;
	uint8_t has_hash = rec->has_hash ? 1 : 0;
	int i;

	wr_le32(p, rec->kind);
	wr_le64(p + 4, rec->id);
	wr_le64(p + 12, rec->parent);
	wr_le64(p + 20, rec->ctx);
	p += 28;
	for (i = 0; i < ST_NFIELDS; i++, p += 8)
		wr_le64(p, rec->f[i]);
	wr_le32(p, nl);
	sha256_update(ctx, sizeof(b), b);
	if (nl)
		sha256_update(ctx, nl, (const uint8_t *)rec->name);
	sha256_update(ctx, 1, &has_hash);
	if (has_hash)
		sha256_update(ctx, ST_HASH_LEN, rec->hash);
	return 0;
}

void st_digest(struct st_log *log, uint8_t out[ST_DIGEST_LEN])
{
	struct sha256_ctx ctx;
	uint8_t n[8];

	sha256_init(&ctx);
	sha256_update(&ctx, sizeof(domain) - 1, (const uint8_t *)domain);
	if (log)
		st_foreach(log, digest_one, &ctx);
	wr_le64(n, st_count(log));
	sha256_update(&ctx, sizeof(n), n);
	sha256_digest(&ctx, ST_DIGEST_LEN, out);
}

/*
 * Equal under the digest: every field digest_one encodes. A name is never empty in the log
 * (st_add stores NULL) and the hash is all zero when absent, but compare as the encoding
 * does, so that the two cannot drift apart.
 */
static bool same_rec(const struct st_rec *a, const struct st_rec *b)
{
	if (a->kind != b->kind || a->id != b->id || a->parent != b->parent || a->ctx != b->ctx)
		return false;
	if (memcmp(a->f, b->f, sizeof(a->f)) != 0)
		return false;
	if (strcmp(a->name ? a->name : "", b->name ? b->name : "") != 0)
		return false;
	if (a->has_hash != b->has_hash)
		return false;
	return !a->has_hash || memcmp(a->hash, b->hash, ST_HASH_LEN) == 0;
}

int st_compare(struct st_log *a, struct st_log *b, size_t *index, const struct st_rec **ra,
	       const struct st_rec **rb)
{
	const struct st_rec *x, *y;
	size_t i = 0;

	if (!a || !b)
		return RGPU_EINVAL;
	x = st__next(a, NULL);
	y = st__next(b, NULL);
	while (x && y && same_rec(x, y)) {
		x = st__next(a, x);
		y = st__next(b, y);
		i++;
	}
	if (index)
		*index = i;
	if (ra)
		*ra = x;
	if (rb)
		*rb = y;
	return x || y ? 1 : 0;
}
