/*
 * The chunk hash on the GPU (rgpu/hash.h defines it; server/gpuhash.cu computes it): the
 * kernels rgpud embeds, loaded into the current context, run over device memory, the digests
 * copied back. Checkpoints hash every chunk this way so that only chunks whose digest is new
 * leave the device.
 */
#ifndef SRV_GPUHASH_H
#define SRV_GPUHASH_H

#include <stdint.h>

#include "driver.h"

struct srv_gpuhash;

/*
 * srv_gpuhash_open() - load the hash kernels into the current context. Returns 0,
 * RGPU_EUNSUPPORTED (rgpud was built without nvcc, or the driver refuses the code: said once
 * at warn) or RGPU_ENOMEM.
 */
int srv_gpuhash_open(const struct srv_driver *d, struct srv_gpuhash **out);

/*
 * srv_gpuhash_run() - the chunk hashes of [data, data + n) cut in chunks of `chunk` bytes (a
 * multiple of 4096, at most RGPU_CHUNK_MAX; n a multiple of 4), on stream s, waited for:
 * ceil(n / chunk) digests of RGPU_HASH_LEN bytes into out. Returns 0, RGPU_EINVAL or
 * RGPU_EIO (the driver's error logged).
 */
int srv_gpuhash_run(const struct srv_driver *d, struct srv_gpuhash *g, CUdeviceptr data,
		    uint64_t n, uint64_t chunk, CUstream s, uint8_t *out);

void srv_gpuhash_close(const struct srv_driver *d, struct srv_gpuhash *g);

#endif
