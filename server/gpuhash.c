/*
 * Loading and running the embedded hash kernels (gpuhash.h). The leaves' digests (32 bytes a
 * 4 KiB leaf: 1/128 of the data) and the chunks' go to scratch device memory the context
 * allocates once and grows; only the chunks' digests are copied back.
 */
#define LOG_PREFIX "gpuhash: "
#include <stdlib.h>

#include "gpuhash.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

#ifdef RGPU_GPUHASH_FATBIN
extern const unsigned char rgpu_gpuhash_fatbin[];
#endif

struct srv_gpuhash {
	CUmodule mod;
	CUfunction leaves, roots;
	CUdeviceptr scratch;
	uint64_t scratch_len;
};

int srv_gpuhash_open(const struct srv_driver *d, struct srv_gpuhash **out)
{
#ifdef RGPU_GPUHASH_FATBIN
	struct srv_gpuhash *g = calloc(1, sizeof(*g));
	CUresult r;

	if (!g)
		return RGPU_ENOMEM;
	r = d->cuModuleLoadData(&g->mod, rgpu_gpuhash_fatbin);
	if (r == CUDA_SUCCESS)
		r = d->cuModuleGetFunction(&g->leaves, g->mod, "rgpu_hash_leaves");
	if (r == CUDA_SUCCESS)
		r = d->cuModuleGetFunction(&g->roots, g->mod, "rgpu_hash_roots");
	if (r != CUDA_SUCCESS) {
		pr_warn_once("the driver refuses the hash kernels (%s): chunks are hashed on the "
			     "CPU",
			     srv_cu_name(d, r));
		if (g->mod)
			d->cuModuleUnload(g->mod);
		free(g);
		return RGPU_EUNSUPPORTED;
	}
	*out = g;
	return 0;
#else
	(void)d, (void)out;
	pr_warn_once("rgpud was built without nvcc: chunks are hashed on the CPU");
	return RGPU_EUNSUPPORTED;
#endif
}

int srv_gpuhash_run(const struct srv_driver *d, struct srv_gpuhash *g, CUdeviceptr data,
		    uint64_t n, uint64_t chunk, CUstream s, uint8_t *out)
{
	uint64_t nleaves = (n + RGPU_CHUNK_LEAF - 1) / RGPU_CHUNK_LEAF;
	uint64_t nchunks = chunk ? (n + chunk - 1) / chunk : 0, need;
	CUdeviceptr leaves, digests;
	unsigned threads = 128;
	CUresult r;

	if (!g || !n || n % 4 || data % 4 || !chunk || chunk % RGPU_CHUNK_LEAF ||
	    chunk > RGPU_CHUNK_MAX)
		return RGPU_EINVAL; /* (a misaligned read would be a sticky fault) */
	need = (nleaves + nchunks) * RGPU_HASH_LEN;
	if (need > g->scratch_len) {
		if (g->scratch)
			d->cuMemFree(g->scratch);
		g->scratch = 0;
		g->scratch_len = 0;
		r = d->cuMemAlloc(&g->scratch, need);
		if (r != CUDA_SUCCESS) {
			pr_err("%llu bytes of scratch for the hash: %s", (unsigned long long)need,
			       srv_cu_name(d, r));
			return RGPU_EIO;
		}
		g->scratch_len = need;
	}
	leaves = g->scratch;
	digests = g->scratch + nleaves * RGPU_HASH_LEN;
	void *la[] = {&data, &n, &leaves};
	void *ra[] = {&leaves, &n, &chunk, &digests};
	r = d->cuLaunchKernel(g->leaves, (unsigned)((nleaves + threads - 1) / threads), 1, 1,
			      threads, 1, 1, 0, s, la, NULL);
	if (r == CUDA_SUCCESS)
		r = d->cuLaunchKernel(g->roots, (unsigned)((nchunks + 63) / 64), 1, 1, 64, 1, 1, 0,
				      s, ra, NULL);
	if (r == CUDA_SUCCESS)
		r = d->cuMemcpyDtoHAsync(out, digests, nchunks * RGPU_HASH_LEN, s);
	if (r == CUDA_SUCCESS)
		r = d->cuStreamSynchronize(s);
	if (r != CUDA_SUCCESS) {
		pr_err("hashing %llu bytes at 0x%llx: %s", (unsigned long long)n,
		       (unsigned long long)data, srv_cu_name(d, r));
		return RGPU_EIO;
	}
	return 0;
}

void srv_gpuhash_close(const struct srv_driver *d, struct srv_gpuhash *g)
{
	if (!g)
		return;
	if (g->scratch)
		d->cuMemFree(g->scratch);
	d->cuModuleUnload(g->mod);
	free(g);
}
