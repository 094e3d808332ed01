/*
 * The chunk hash on the GPU against the C definition, and how fast it is, from one run:
 *   gpuhash_check [--driver LIBCUDA] [MiB ...]      (default 1024 8192)
 * For each size: fill device memory with pseudo-random bytes, hash it with rgpud's kernels
 * (server/gpuhash.c; the best of 3 runs), copy it to pinned host memory (the device-to-host
 * bandwidth, for comparison), hash the copy on the CPU (rgpu_chunk_hash) and compare every
 * chunk's digest (all of them up to 1 GiB, then the first 1 GiB). One line per size; exits 1
 * on any difference. tests/gpu/run.sh runs it on the GPU; ctest on simgpu with a small size.
 */
#define LOG_PREFIX "gpuhash_check: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "gpuhash.h"
#include "rgpu/hash.h"
#include "rgpu/util.h"

#define FILL (64ull << 20)
#define VERIFY_MAX (1ull << 30)

#define CK(call)                                                                               \
	do {                                                                                   \
		CUresult r_ = (call);                                                          \
		if (r_ != CUDA_SUCCESS) {                                                      \
			fprintf(stderr, "gpuhash_check: %s: %s\n", #call, srv_cu_name(&d, r_)); \
			exit(2);                                                               \
		}                                                                              \
	} while (0)

static double secs(void)
{
	return (double)rgpu_now_ns() / 1e9;
}

int main(int argc, char **argv)
{
	struct srv_driver d;
	const char *drv = NULL;
	uint64_t sizes[16];
	int nsizes = 0, bad_total = 0;
	CUdevice dev;
	CUcontext ctx;
	struct srv_gpuhash *g;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--driver") && i + 1 < argc)
			drv = argv[++i];
		else if (nsizes < 16)
			sizes[nsizes++] = strtoull(argv[i], NULL, 0) << 20;
	}
	if (!nsizes) {
		sizes[nsizes++] = 1ull << 30;
		sizes[nsizes++] = 8ull << 30;
	}
	if (srv_driver_load(&d, drv))
		return 2;
	CK(d.cuInit(0));
	CK(d.cuDeviceGet(&dev, 0));
	CK(d.cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(d.cuCtxSetCurrent(ctx));
	if (srv_gpuhash_open(&d, &g)) {
		fprintf(stderr, "gpuhash_check: no hash kernels\n");
		return 2;
	}
	for (int s = 0; s < nsizes; s++) {
		uint64_t n = sizes[s], nchunks = (n + RGPU_CHUNK_MAX - 1) / RGPU_CHUNK_MAX;
		uint64_t ver = MIN(n, VERIFY_MAX), vchunks = (ver + RGPU_CHUNK_MAX - 1) / RGPU_CHUNK_MAX;
		uint8_t *gd = malloc(nchunks * RGPU_HASH_LEN), *fill = malloc(MIN(n, FILL)), *host;
		uint64_t x = 0x9e3779b97f4a7c15ull ^ n;
		double best = 1e9, t0, d2h, cpu;
		CUdeviceptr p;
		int bad = 0;

		if (!gd || !fill)
			return 2;
		for (uint64_t i = 0; i < MIN(n, FILL); i += 8) { /* xorshift64 */
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(fill + i, &x, MIN(8, MIN(n, FILL) - i));
		}
		CK(d.cuMemAlloc(&p, n));
		for (uint64_t off = 0; off < n; off += FILL) {
			fill[0] = (uint8_t)(off / FILL); /* no two fills alike */
			CK(d.cuMemcpyHtoDAsync(p + off, fill, MIN(FILL, n - off), NULL));
			CK(d.cuStreamSynchronize(NULL));
		}
		for (int rep = 0; rep < 4; rep++) { /* the first one loads and warms up */
			t0 = secs();
			if (srv_gpuhash_run(&d, g, p, n, RGPU_CHUNK_MAX, NULL, gd))
				return 2;
			if (rep)
				best = MIN(best, secs() - t0);
		}
		CK(d.cuMemHostAlloc((void **)&host, ver, 0));
		t0 = secs();
		CK(d.cuMemcpyDtoHAsync(host, p, ver, NULL));
		CK(d.cuStreamSynchronize(NULL));
		d2h = secs() - t0;
		t0 = secs();
		for (uint64_t c = 0; c < vchunks; c++) {
			uint8_t want[RGPU_HASH_LEN];
			uint64_t off = c * RGPU_CHUNK_MAX;
			rgpu_chunk_hash(host + off, MIN(RGPU_CHUNK_MAX, ver - off), want);
			bad += memcmp(want, gd + c * RGPU_HASH_LEN, RGPU_HASH_LEN) != 0;
		}
		cpu = secs() - t0;
		printf("gpuhash %llu MiB: gpu %.1f GB/s (%.2f ms), device-to-host %.1f GB/s, cpu (one "
		       "thread) %.2f GB/s; digests equal %llu of %llu checked\n",
		       (unsigned long long)(n >> 20), n / best / 1e9, best * 1e3, ver / d2h / 1e9,
		       ver / cpu / 1e9, (unsigned long long)(vchunks - bad),
		       (unsigned long long)vchunks);
		bad_total += bad;
		d.cuMemFreeHost(host);
		d.cuMemFree(p);
		free(gd);
		free(fill);
	}
	srv_gpuhash_close(&d, g);
	return bad_total ? 1 : 0;
}
