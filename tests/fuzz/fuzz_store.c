/*
 * Fuzzing the checkpoint store's readers (migrate/store.c): the decoders of a chunk value and
 * of a manifest, which restore and verify run on what the store returns (a damaged or hostile
 * file must be refused, never read past).
 *
 * Input: byte 0 picks the reader (0 mod 4: chunk, odd: manifest, 2 mod 4: a checkpoint's
 * metadata, migrate/ckptmeta.c, which a peer server sends in a push), the rest is the value;
 * for the metadata, two bytes (little-endian) of chunk count come first.
 * Checked beyond the sanitizers: the codes each documents; a chunk accepted is at most 2 MiB
 * and, decoded twice, gives the same bytes; a manifest accepted describes exactly its length
 * (24 bytes of header and counts, 32 per hash, then the metadata) and its pointers lie inside;
 * metadata accepted has every blob inside the chunk list, and each chunk is named.
 */
#include <string.h>

#include "fuzz.h"
#include "checkpoint.pb-c.h"
#include "rgpu/ckpt.h"
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
	if ((data[0] & 3) == 2) {
		Rgpu__CkptMeta *m;
		char whym[300] = "", name[100];
		if (size < 3)
			return 0;
		n = data[1] | (size_t)data[2] << 8;
		ret = rgpu_ckpt_meta_decode(data + 3, size - 3, n, &m, whym, sizeof(whym));
		FUZZ_CHECK((ret == 0 && m) ||
			   ((ret == RGPU_ECORRUPT || ret == RGPU_EVERSION) && !m && whym[0]));
		if (ret)
			return 0;
		for (size_t i = 0; i < m->n_blobs; i++)
			FUZZ_CHECK(m->blobs[i]->first + m->blobs[i]->count <= n);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(rgpu_ckpt_blob_of(m, i, name, sizeof(name)) == name && name[0]);
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		return 0;
	}
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
