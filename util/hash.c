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
