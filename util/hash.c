/* SHA-256 through Nettle (which uses the CPU's SHA instructions where present). */
#include <nettle/sha2.h>

#include "rgpu/hash.h"

void rgpu_sha256(const void *data, size_t len, uint8_t out[RGPU_HASH_LEN])
{
	struct sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, len, data);
	sha256_digest(&ctx, RGPU_HASH_LEN, out);
}

void rgpu_chunk_hash(const void *data, size_t n, uint8_t out[RGPU_HASH_LEN])
{
	const uint8_t *p = data;
	struct sha256_ctx root;
	uint8_t len_le[8], leaf[RGPU_HASH_LEN];

	for (int i = 0; i < 8; i++)
		len_le[i] = (uint8_t)((uint64_t)n >> (8 * i));
	sha256_init(&root);
	sha256_update(&root, 8, (const uint8_t *)RGPU_CHUNK_TAG);
	sha256_update(&root, 8, len_le);
	for (size_t off = 0; off < n; off += RGPU_CHUNK_LEAF) {
		size_t m = n - off < RGPU_CHUNK_LEAF ? n - off : RGPU_CHUNK_LEAF;
		rgpu_sha256(p + off, m, leaf);
		sha256_update(&root, RGPU_HASH_LEN, leaf);
	}
	sha256_digest(&root, RGPU_HASH_LEN, out);
}
