/*
 * store_bench: the checkpoint store's own sequential bandwidth, to compare checkpoint and restore
 * throughput with (tests/bench/ckpt_bench.sh):   store_bench DIR MIB
 * Writes MIB of incompressible 2 MiB chunks (stored raw, as random device memory is) into a
 * fresh store in DIR through the same calls a checkpoint makes (rgpu_ckpt_put, then the commit
 * that makes them durable), then reads them back through the reader a restore uses, copying each
 * value out. Keys are counters, not hashes: hashing is the GPU's part, not the store's. Prints
 * "store write GB/s" and "store read GB/s" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rgpu/hash.h"
#include "rgpu/log.h"
#include "rgpu/store.h"
#include "rgpu/util.h"

int main(int argc, char **argv)
{
	struct rgpu_store *s;
	struct rgpu_ckpt *c;
	struct rgpu_chunk_enc *e;
	struct rgpu_store_reader *r;
	uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024, n = mib / 2, id;
	uint8_t *data = malloc(RGPU_CHUNK_MAX), *val = malloc(RGPU_CHUNK_VALUE_MAX), *out;
	uint8_t *keys = calloc(n ? n : 1, RGPU_HASH_LEN);
	uint64_t x = 0x9e3779b97f4a7c15ull, t0, t1;
	size_t vlen;

	if (getenv("RGPU_STORE_DEBUG"))
		rgpu_log_set_level(RGPU_LOG_DEBUG);
	if (argc < 3 || !data || !val || !keys || !n) {
		fprintf(stderr, "usage: store_bench DIR MIB\n");
		return 2;
	}
	for (size_t i = 0; i < RGPU_CHUNK_MAX; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		data[i] = (uint8_t)x;
	}
	if (rgpu_store_open(argv[1], &s) || rgpu_chunk_enc_new(&e) ||
	    rgpu_chunk_encode(e, data, RGPU_CHUNK_MAX, val, &vlen)) {
		fprintf(stderr, "store_bench: cannot open the store in %s\n", argv[1]);
		return 1;
	}
	for (uint64_t i = 0; i < n; i++)
		wr_le64(keys + i * RGPU_HASH_LEN, i + 1);
	t0 = rgpu_now_ns();
	if (rgpu_ckpt_begin(s, &c) || rgpu_ckpt_set_list(c, keys, n))
		return 1;
	for (uint64_t i = 0; i < n; i++)
		if (rgpu_ckpt_put(c, keys + i * RGPU_HASH_LEN, val, vlen))
			return 1;
	if (rgpu_ckpt_commit(c, "bench", 5, &id))
		return 1;
	t1 = rgpu_now_ns();
	printf("store write %.2f GB/s (%llu MiB raw chunks, committed to disk)\n",
	       (double)n * RGPU_CHUNK_MAX / (double)(t1 - t0), (unsigned long long)mib);
	out = malloc(RGPU_CHUNK_MAX);
	t0 = rgpu_now_ns();
	if (!out || rgpu_store_reader_begin(s, &r))
		return 1;
	for (uint64_t i = 0; i < n; i++) {
		const void *v;
		size_t len;
		if (rgpu_store_reader_get(r, keys + i * RGPU_HASH_LEN, &v, &len))
			return 1;
		memcpy(out, (const uint8_t *)v + RGPU_CHUNK_HDR, len - RGPU_CHUNK_HDR);
	}
	rgpu_store_reader_end(r);
	t1 = rgpu_now_ns();
	printf("store read %.2f GB/s (%llu MiB)\n", (double)n * RGPU_CHUNK_MAX / (double)(t1 - t0),
	       (unsigned long long)mib);
	rgpu_store_close(s);
	return 0;
}
