/* Content hashes: SHA-256 (GNU Nettle). Module images and checkpoint chunks are named by it. */
#ifndef RGPU_HASH_H
#define RGPU_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RGPU_HASH_LEN 32

void rgpu_sha256(const void *data, size_t len, uint8_t out[RGPU_HASH_LEN]);

#endif
