/* Content hashes: SHA-256 (GNU Nettle). Module images and checkpoint chunks are named by it. */
#ifndef RGPU_HASH_H
#define RGPU_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RGPU_HASH_LEN 32

void rgpu_sha256(const void *data, size_t len, uint8_t out[RGPU_HASH_LEN]);

/*
 * The chunk hash (checkpoints, design.md §6): a two-level SHA-256 tree, so that a GPU computes
 * it with one thread per leaf (server/gpuhash.cu) and the CPU gets the same digest here.
 *   leaf i     = bytes [4096 i, min(4096 (i+1), n)) of the chunk, i < ceil(n / 4096)
 *   L_i        = SHA-256(leaf i)
 *   chunk hash = SHA-256("RGPUCHK1" || n as 8 bytes little-endian || L_0 || L_1 || ...)
 * A chunk is at most RGPU_CHUNK_MAX bytes; the GPU kernel takes lengths that are multiples of 4.
 */
#define RGPU_CHUNK_LEAF 4096u
#define RGPU_CHUNK_MAX (2u << 20)
#define RGPU_CHUNK_TAG "RGPUCHK1"

void rgpu_chunk_hash(const void *data, size_t n, uint8_t out[RGPU_HASH_LEN]);

#endif
