/*
 * Fuzzing the checkpoint store's readers (migrate/store.c): the decoders of a chunk value and
 * of a manifest, which restore and verify run on what the store returns (a damaged or hostile
 * file must be refused, never read past).
 *
 * Input: byte 0 picks the reader (even: chunk, odd: manifest), the rest is the value.
 * Checked beyond the sanitizers: the codes each documents; a chunk accepted is at most 2 MiB
 * and, decoded twice, gives the same bytes; a manifest accepted describes exactly its length
 * (24 bytes of header and counts, 32 per hash, then the metadata) and its pointers lie inside.
 */
#include <string.h>

#include "fuzz.h"
#include "rgpu/err.h"
#include "rgpu/store.h"

static uint8_t a[RGPU_CHUNK_MAX], b[RGPU_CHUNK_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *v = data + 1, *hashes, *meta;
	size_t vlen = size ? size - 1 : 0, la = 0, lb = 0, n, ml;
	const char *why;
	int ret;

	if (!size)
		return 0;
	if (!(data[0] & 1)) {
		ret = rgpu_store_chunk_decode(v, vlen, a, sizeof(a), &la, &why);
		FUZZ_CHECK(ret == 0 || (ret == RGPU_ECORRUPT && why));
		if (ret)
			return 0;
		FUZZ_CHECK(la <= RGPU_CHUNK_MAX);
		ret = rgpu_store_chunk_decode(v, vlen, b, sizeof(b), &lb, &why);
		FUZZ_CHECK(ret == 0 && lb == la && !memcmp(a, b, la));
		/* too small a buffer is said as such, never overrun */
		if (la)
			FUZZ_CHECK(rgpu_store_chunk_decode(v, vlen, b, la - 1, &lb, &why) ==
				   RGPU_ETOOBIG);
		return 0;
	}
	ret = rgpu_store_manifest_decode(v, vlen, &hashes, &n, &meta, &ml);
	FUZZ_CHECK(ret == 0 || ret == RGPU_ECORRUPT);
	if (ret)
		return 0;
	FUZZ_CHECK(24 + n * RGPU_HASH_LEN + ml + RGPU_HASH_LEN == vlen); /* and its SHA-256 */
	FUZZ_CHECK(hashes == v + 16 && meta == v + 24 + n * RGPU_HASH_LEN);
	return 0;
}
