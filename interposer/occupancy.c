/*
 * Occupancy queries, answered by the server's driver and cached per function: the answer
 * depends only on the function, the block size, the dynamic shared memory and the flags, as
 * long as the function's attributes stay as they were. Each answer keeps the attribute stamp
 * it was asked under (ip_func.attr_gen, which module.c bumps at every attribute set) and
 * counts only while the stamp matches, so module.c need not know this cache exists.
 * cuOccupancyMaxPotentialBlockSize takes a host callback for the shared memory of each block
 * size, so the client evaluates it for every candidate size and asks the server about all of
 * them in one request, then picks the best as the driver does: the largest block size among
 * those with the highest occupancy.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/util.h"

struct occ_entry {
	struct ip_func *f;
	unsigned gen;              /* f->attr_gen the answer was asked under */
	uint32_t kind, block, flags;
	uint64_t smem;
	int64_t value;
	struct occ_entry *next;
};

#define OCC_BUCKETS 256
static struct occ_entry *cache[OCC_BUCKETS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket(const struct ip_func *f, uint32_t block, uint64_t smem)
{
	uint64_t h = (uint64_t)(uintptr_t)f * 0x9E3779B97F4A7C15ull ^ block * 31u ^ smem;
	return (unsigned)(h >> 56) % OCC_BUCKETS;
}

/* The entry for this question about f, whatever its stamp, or NULL. Caller holds cache_lock. */
static struct occ_entry *cache_find(struct ip_func *f, uint32_t kind, uint32_t block,
				    uint64_t smem, uint32_t flags)
{
	struct occ_entry *e;
	for (e = cache[bucket(f, block, smem)]; e; e = e->next)
		if (e->f == f && e->kind == kind && e->block == block && e->smem == smem &&
		    e->flags == flags)
			return e;
	return NULL;
}

/* A cached answer counts only if f's attributes have not changed since it was asked (gen). */
static int cache_get(struct ip_func *f, unsigned gen, uint32_t kind, uint32_t block,
		     uint64_t smem, uint32_t flags, int64_t *v)
{
	struct occ_entry *e;
	int found = 0;
	pthread_mutex_lock(&cache_lock);
	e = cache_find(f, kind, block, smem, flags);
	if (e && e->gen == gen) {
		*v = e->value;
		found = 1;
	}
	pthread_mutex_unlock(&cache_lock);
	return found;
}

/* A stale answer to the same question is replaced, so the cache holds one per question. */
static void cache_put(struct ip_func *f, unsigned gen, uint32_t kind, uint32_t block,
		      uint64_t smem, uint32_t flags, int64_t v)
{
	struct occ_entry *e = malloc(sizeof(*e)), *old;
	unsigned b = bucket(f, block, smem);
	if (!e)
		return;
	*e = (struct occ_entry){f, gen, kind, block, flags, smem, v, NULL};
	pthread_mutex_lock(&cache_lock);
	old = cache_find(f, kind, block, smem, flags);
	if (old) {
		old->gen = gen;
		old->value = v;
	} else {
		e->next = cache[b];
		cache[b] = e;
		e = NULL;
	}
	pthread_mutex_unlock(&cache_lock);
	free(e);
}

/* Ask for n (block, smem) pairs at once; each answer lands in out[i] and the cache. */
static CUresult query(struct ip_func *f, uint32_t kind, const uint32_t *blocks,
		      const uint64_t *smem, size_t n, uint32_t flags, int64_t *out)
{
	Rgpu__Occupancy m = RGPU__OCCUPANCY__INIT;
	Rgpu__OccupancyReply *rep = NULL;
	uint32_t qb[64];
	uint64_t qs[64];
	size_t idx[64], nq = 0;
	struct ip_ctx *c = ip_ctx_cur();
	unsigned gen = atomic_load(&f->attr_gen);
	CUresult r;

	for (size_t i = 0; i < n; i++)
		if (!cache_get(f, gen, kind, blocks[i], smem[i], flags, &out[i]) && nq < 64) {
			qb[nq] = blocks[i];
			qs[nq] = smem[i];
			idx[nq++] = i;
		}
	if (!nq)
		return CUDA_SUCCESS;
	m.func = f->o.id;
	struct ip_ctx *in = f->ctx ? f->ctx : c ? c : f->mod->ctx;
	m.ctx = in ? in->o.id : 0;
	ip_route_ctx(in); /* the function's context's server (route.c) */
	m.kind = kind;
	m.flags = flags;
	m.n_block_size = nq;
	m.block_size = qb;
	m.n_dyn_smem = nq;
	m.dyn_smem = qs;
	r = ip_call_status(RGPU_MSG_OCCUPANCY, &m.base, NULL, 0, NULL, 0,
			   &rgpu__occupancy_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS && rep->n_value != nq)
		r = ip_reply_wrong("an occupancy query", "holds a different number of values");
	for (size_t k = 0; r == CUDA_SUCCESS && k < nq; k++) {
		out[idx[k]] = rep->value[k];
		cache_put(f, gen, kind, qb[k], qs[k], flags, rep->value[k]);
	}
	if (rep)
		rgpu__occupancy_reply__free_unpacked(rep, NULL);
	return r;
}

static struct ip_func *func_of(CUfunction h)
{
	struct ip_func *f = ip_obj_get(h, ST_KIND_FUNCTION);
	return f ? f : ip_obj_get(h, ST_KIND_KERNEL);
}

static CUresult active_blocks(int *n, CUfunction h, int block, size_t smem, unsigned flags)
{
	struct ip_func *f;
	uint32_t b = (uint32_t)block;
	uint64_t s = smem;
	int64_t v = 0;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!n || block <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = func_of(h)))
		return CUDA_ERROR_INVALID_HANDLE;
	r = query(f, RGPU__OCCUPANCY_KIND__OCC_ACTIVE_BLOCKS, &b, &s, 1, flags, &v);
	if (r == CUDA_SUCCESS)
		*n = (int)v;
	return r;
}

IP_API CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f,
								  int block, size_t smem)
{
	return active_blocks(n, f, block, smem, 0);
}

IP_API CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
	int *n, CUfunction f, int block, size_t smem, unsigned int flags)
{
	return active_blocks(n, f, block, smem, flags);
}

static CUresult potential(int *min_grid, int *block_out, CUfunction h,
			  CUoccupancyB2DSize b2smem, size_t smem, int limit, unsigned flags)
{
	uint32_t blocks[64];
	uint64_t smems[64];
	int64_t active[64];
	struct ip_func *f;
	int maxt = 0, warp, sms, n = 0, best = 0, best_block = 0;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!min_grid || !block_out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = func_of(h)))
		return CUDA_ERROR_INVALID_HANDLE;
	r = cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, h);
	if (r != CUDA_SUCCESS)
		return r;
	{
		struct ip_ctx *c = f->ctx ? f->ctx : f->mod->ctx ? f->mod->ctx : ip_ctx_cur();
		int dev = c ? c->device : 0; /* a library's kernel: the current device */
		warp = ip.dev[dev].attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
		sms = ip.dev[dev].attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
	}
	if (limit > 0 && limit < maxt)
		maxt = limit;
	if (warp <= 0)
		warp = 32;
	for (int b = maxt - maxt % warp; b > 0 && n < 64; b -= warp) {
		blocks[n] = (uint32_t)b;
		smems[n] = b2smem ? b2smem(b) : smem;
		n++;
	}
	if (n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	r = query(f, RGPU__OCCUPANCY_KIND__OCC_ACTIVE_BLOCKS, blocks, smems, (size_t)n, flags,
		  active);
	if (r != CUDA_SUCCESS)
		return r;
	/* from the largest block size down; a strictly better occupancy wins */
	for (int i = 0; i < n; i++) {
		int occ = (int)active[i] * (int)blocks[i];
		if (occ > best) {
			best = occ;
			best_block = (int)blocks[i];
			*min_grid = (int)active[i] * sms;
		}
	}
	if (!best_block) {
		*min_grid = 0;
		*block_out = 0;
		return CUDA_SUCCESS;
	}
	*block_out = best_block;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, CUfunction f,
							 CUoccupancyB2DSize b2smem, size_t smem,
							 int limit)
{
	return potential(min_grid, block, f, b2smem, smem, limit, 0);
}

IP_API CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block,
								  CUfunction f,
								  CUoccupancyB2DSize b2smem,
								  size_t smem, int limit,
								  unsigned int flags)
{
	return potential(min_grid, block, f, b2smem, smem, limit, flags);
}

IP_API CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t *size, CUfunction h,
								int blocks, int block)
{
	struct ip_func *f;
	uint32_t b = (uint32_t)block;
	uint64_t nb = (uint64_t)blocks;
	int64_t v = 0;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!size || blocks <= 0 || block <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = func_of(h)))
		return CUDA_ERROR_INVALID_HANDLE;
	r = query(f, RGPU__OCCUPANCY_KIND__OCC_AVAILABLE_SMEM, &b, &nb, 1, 0, &v);
	if (r == CUDA_SUCCESS)
		*size = (size_t)v;
	return r;
}

/* Cluster queries: the whole launch configuration goes to the server's driver. */
static CUresult cluster_query(int *out, CUfunction h, const CUlaunchConfig *cfg, uint32_t kind)
{
	Rgpu__Occupancy m = RGPU__OCCUPANCY__INIT;
	Rgpu__OccupancyReply *rep = NULL;
	CUlaunchAttribute wire[IP_MAX_LAUNCH_ATTRS];
	struct ip_func *f;
	struct ip_ctx *c = ip_ctx_cur();
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!out || !cfg || (cfg->numAttrs && !cfg->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = func_of(h)))
		return CUDA_ERROR_INVALID_HANDLE;
	r = ip_attrs_to_wire(cfg->attrs, cfg->numAttrs, wire);
	if (r != CUDA_SUCCESS)
		return r;
	m.func = f->o.id;
	struct ip_ctx *in = f->ctx ? f->ctx : c ? c : f->mod->ctx;
	m.ctx = in ? in->o.id : 0;
	ip_route_ctx(in); /* the function's context's server (route.c) */
	m.kind = kind;
	m.grid_x = cfg->gridDimX;
	m.grid_y = cfg->gridDimY;
	m.grid_z = cfg->gridDimZ;
	m.block_x = cfg->blockDimX;
	m.block_y = cfg->blockDimY;
	m.block_z = cfg->blockDimZ;
	m.shared_mem = cfg->sharedMemBytes;
	m.attrs.data = (uint8_t *)wire;
	m.attrs.len = cfg->numAttrs * sizeof(CUlaunchAttribute);
	r = ip_call_status(RGPU_MSG_OCCUPANCY, &m.base, NULL, 0, NULL, 0,
			   &rgpu__occupancy_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS && rep->n_value != 1)
		r = ip_reply_wrong("an occupancy query", "holds a different number of values");
	if (r == CUDA_SUCCESS)
		*out = (int)rep->value[0];
	if (rep)
		rgpu__occupancy_reply__free_unpacked(rep, NULL);
	return r;
}

IP_API CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction f,
						     const CUlaunchConfig *cfg)
{
	return cluster_query(n, f, cfg, RGPU__OCCUPANCY_KIND__OCC_MAX_ACTIVE_CLUSTERS);
}

IP_API CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int *size, CUfunction f,
							   const CUlaunchConfig *cfg)
{
	return cluster_query(size, f, cfg, RGPU__OCCUPANCY_KIND__OCC_MAX_CLUSTER_SIZE);
}
