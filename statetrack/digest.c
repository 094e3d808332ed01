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
 */
#include <nettle/sha2.h>

#include "rgpu/statetrack.h"
#include "rgpu/util.h"

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
