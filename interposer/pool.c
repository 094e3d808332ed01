/*
 * Stream-ordered allocation and memory pools, inside the address window.
 *
 * Allocations come from the window allocator like cuMemAlloc's. A stream-ordered free cannot
 * give memory back at once: work queued earlier on its stream may still use it. So a free
 * queues the block on its stream; the same stream may reuse it immediately (stream order makes
 * that safe), and it is really freed once the client knows the stream has passed that point
 * (a synchronize of the stream or of the context). Pools are client objects: their attributes
 * and usage counters live here; no request reaches the server except the allocations.
 *
 * This file stands above memory.c and stream.c and uses both; they call nothing here. What a
 * pool must hear from them (a block freed by cuMemFree or a context's end, a stream found
 * idle) comes through the listeners they offer, set once in pool_listen(). A context's
 * synchronize, in context.c above, calls ip_pool_synced itself.
 */
#define LOG_PREFIX "rgpu: "
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct ip_pool {
	struct ip_obj o;
	int device;
	uint64_t release_threshold;
	int reuse_follow, reuse_opportunistic, reuse_internal;
	uint64_t used, used_high, reserved, reserved_high;
};

/* An allocation made from a pool, by address. */
struct pool_alloc {
	uint64_t addr, size;
	struct ip_pool *pool;
	struct ip_ctx *ctx;
	uint64_t freed_on;   /* stream id of a pending free (LEGACY for the NULL stream) */
	int pending;
	struct pool_alloc *next_pending;
};

#define LEGACY IP_STREAM_LEGACY_ID

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *allocs;                    /* tsearch by addr */
static struct pool_alloc *pending;      /* frees waiting for their stream */
static struct ip_pool *default_pool[IP_MAX_DEVICES], *current_pool[IP_MAX_DEVICES];

static int addr_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct pool_alloc *)a)->addr, y = ((const struct pool_alloc *)b)->addr;
	return x < y ? -1 : x > y;
}

static struct ip_pool *pool_new(int device)
{
	struct ip_pool *p = ip_obj_new(sizeof(*p), ST_KIND_MEMPOOL, NULL);
	if (!p)
		return NULL;
	p->device = device;
	p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
	return p;
}

static struct ip_pool *default_of(int dev)
{
	pthread_mutex_lock(&pool_lock);
	if (!default_pool[dev])
		default_pool[dev] = pool_new(dev);
	if (!current_pool[dev])
		current_pool[dev] = default_pool[dev];
	pthread_mutex_unlock(&pool_lock);
	return current_pool[dev];
}

/* ---- allocation -------------------------------------------------------------------------- */

/* p NULL: the current pool of the stream's device (cuMemAllocAsync). */
static CUresult pool_alloc(CUdeviceptr *out, size_t size, struct ip_pool *p, CUstream h, int ptds)
{
	struct pool_alloc *a, **pp, *best = NULL, **bestpp = NULL;
	struct ip_ctx *c;
	uint64_t sid;
	CUdeviceptr d;
	CUresult r;

	if (p && (!out || size == 0))
		return CUDA_ERROR_INVALID_VALUE; /* a given pool: arguments before the stream */
	r = ip_stream_resolve(h, ptds, &c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	if (!out || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!p)
		p = default_of(c->device);
	if (!sid)
		sid = LEGACY;
	if (p->device != c->device)
		return CUDA_ERROR_INVALID_VALUE;
	/* a block freed on this very stream may be reused at once: the stream orders the two */
	pthread_mutex_lock(&pool_lock);
	for (pp = &pending; *pp; pp = &(*pp)->next_pending)
		if ((*pp)->pool == p && (*pp)->freed_on == sid && (*pp)->size >= size &&
		    (*pp)->size <= 2 * size && (!best || (*pp)->size < best->size)) {
			best = *pp;
			bestpp = pp;
		}
	if (best) {
		*bestpp = best->next_pending;
		best->pending = 0;
		best->freed_on = 0;
		p->used += best->size;
		p->used_high = MAX(p->used_high, p->used);
		*out = best->addr;
		pthread_mutex_unlock(&pool_lock);
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&pool_lock);

	r = ip_mem_alloc(c, size, &d); /* in the stream's context, whatever is current */
	if (r != CUDA_SUCCESS)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a) {
		ip_mem_free(d);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->addr = d;
	a->size = size;
	a->pool = p;
	a->ctx = c;
	pthread_mutex_lock(&pool_lock);
	if (!tsearch(a, &allocs, addr_cmp)) {
		pthread_mutex_unlock(&pool_lock);
		free(a);
		ip_mem_free(d);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	p->used += size;
	p->reserved += size;
	p->used_high = MAX(p->used_high, p->used);
	p->reserved_high = MAX(p->reserved_high, p->reserved);
	pthread_mutex_unlock(&pool_lock);
	*out = d;
	return CUDA_SUCCESS;
}

static CUresult pool_free(CUdeviceptr d, CUstream h, int ptds)
{
	struct pool_alloc key = {.addr = d}, **f;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(h, ptds, &c, &sid);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&pool_lock);
	f = tfind(&key, &allocs, addr_cmp);
	if (!f || (*f)->pending) {
		pthread_mutex_unlock(&pool_lock);
		/* memory from cuMemAlloc may be freed in stream order too: wait for the stream */
		if (!f) {
			r = ip_stream_sync(h, ptds);
			return r == CUDA_SUCCESS ? ip_mem_free(d) : r;
		}
		return CUDA_ERROR_INVALID_VALUE;
	}
	(*f)->pending = 1;
	(*f)->freed_on = sid ? sid : LEGACY;
	(*f)->pool->used -= (*f)->size;
	(*f)->next_pending = pending;
	pending = *f;
	pthread_mutex_unlock(&pool_lock);
	return CUDA_SUCCESS;
}

/*
 * Everything queued so far on stream stream_id (LEGACY: the context's NULL stream; 0: every
 * stream of the context) has finished: free the blocks whose frees were queued there.
 */
void ip_pool_synced(struct ip_ctx *c, uint64_t stream_id)
{
	struct pool_alloc **pp, *done = NULL;

	pthread_mutex_lock(&pool_lock);
	for (pp = &pending; *pp;) {
		struct pool_alloc *a = *pp;
		if (a->ctx == c && (stream_id == 0 || a->freed_on == stream_id)) {
			*pp = a->next_pending;
			tdelete(a, &allocs, addr_cmp);
			a->pool->reserved -= a->size;
			a->next_pending = done;
			done = a;
		} else {
			pp = &a->next_pending;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	while (done) {
		struct pool_alloc *n = done->next_pending;
		ip_mem_free(done->addr);
		free(done);
		done = n;
	}
}

IP_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *d, size_t size, CUstream s)
{
	return pool_alloc(d, size, NULL, s, 0);
}
IP_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t size, CUstream s)
{
	return pool_alloc(d, size, NULL, s, 1);
}
IP_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t size, CUmemoryPool h,
						CUstream s)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	return p ? pool_alloc(d, size, p, s, 0) : CUDA_ERROR_INVALID_VALUE;
}
IP_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t size,
						     CUmemoryPool h, CUstream s)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	return p ? pool_alloc(d, size, p, s, 1) : CUDA_ERROR_INVALID_VALUE;
}
IP_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
	return pool_free(d, s, 0);
}
IP_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s)
{
	return pool_free(d, s, 1);
}

/* ---- pools ------------------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *out, CUdevice dev)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	default_of(dev);
	*out = (CUmemoryPool)default_pool[dev];
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *out, CUdevice dev)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = (CUmemoryPool)default_of(dev);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool h)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!p || p->device != dev)
		return CUDA_ERROR_INVALID_VALUE;
	default_of(dev);
	current_pool[dev] = p;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
	struct ip_pool *p;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (props->location.type == CU_MEM_LOCATION_TYPE_HOST ||
	    props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
	    props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
		ip_refused("cuMemPoolCreate of host memory",
			   "the GPU server's host memory is not this process's memory "
			   "(CUDA_ERROR_NOT_SUPPORTED)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) {
		ip_refused("cuMemPoolCreate of an exportable pool",
			   "its shareable handles would belong to the server");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (props->location.id < 0 || props->location.id >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!(p = pool_new(props->location.id)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = (CUmemoryPool)p;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool h)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!p || p == default_pool[p->device])
		return CUDA_ERROR_INVALID_VALUE;
	if (current_pool[p->device] == p)
		current_pool[p->device] = default_pool[p->device];
	ip_obj_unregister(&p->o); /* its blocks stay valid until freed, as the driver's do */
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool h, CUmemPool_attribute a, void *v)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	if (!p || !v)
		return CUDA_ERROR_INVALID_VALUE;
	switch (a) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->reuse_follow = *(int *)v; break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->reuse_opportunistic = *(int *)v; break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse_internal = *(int *)v; break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = *(cuuint64_t *)v; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		if (*(cuuint64_t *)v)
			return CUDA_ERROR_INVALID_VALUE; /* only a reset to 0 is allowed */
		p->reserved_high = p->reserved;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (*(cuuint64_t *)v)
			return CUDA_ERROR_INVALID_VALUE;
		p->used_high = p->used;
		break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool h, CUmemPool_attribute a, void *v)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	if (!p || !v)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&pool_lock);
	switch (a) {
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)v = p->reuse_follow; break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)v = p->reuse_opportunistic; break;
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)v = p->reuse_internal; break;
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)v = p->release_threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)v = p->reserved; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)v = p->reserved_high; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)v = p->used; break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)v = p->used_high; break;
	default:
		pthread_mutex_unlock(&pool_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&pool_lock);
	return CUDA_SUCCESS;
}

/* Unused memory is already returned at synchronization points; nothing more to trim. */
IP_API CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool h, size_t keep)
{
	(void)keep;
	return ip_obj_get(h, ST_KIND_MEMPOOL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool h, const CUmemAccessDesc *map, size_t n)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	if (!p || (n && !map))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++)
		if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    map[i].location.id != p->device) {
			ip_refused("cuMemPoolSetAccess for another device or the host",
				   "peer access to a pool is not forwarded");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool h,
					   CUmemLocation *loc)
{
	struct ip_pool *p = ip_obj_get(h, ST_KIND_MEMPOOL);
	if (!p || !flags || !loc)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = loc->type == CU_MEM_LOCATION_TYPE_DEVICE && loc->id == p->device
			 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
			 : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	return CUDA_SUCCESS;
}

CUmemoryPool ip_pool_of(uint64_t addr)
{
	struct pool_alloc key = {.addr = addr}, **f;
	CUmemoryPool p = NULL;
	pthread_mutex_lock(&pool_lock);
	f = tfind(&key, &allocs, addr_cmp);
	if (f && !(*f)->pending)
		p = (CUmemoryPool)(*f)->pool;
	pthread_mutex_unlock(&pool_lock);
	return p;
}

/* ---- what pools hear from memory and streams ------------------------------------------------ */

/* An ip_freed_fn: addr was freed without its pool (cuMemFree, a context's end). */
static void pool_forget(uint64_t addr)
{
	struct pool_alloc key = {.addr = addr}, **f, *a, **pp;
	pthread_mutex_lock(&pool_lock);
	f = tfind(&key, &allocs, addr_cmp);
	if (f) {
		a = *f;
		tdelete(a, &allocs, addr_cmp);
		if (a->pending) {
			for (pp = &pending; *pp; pp = &(*pp)->next_pending)
				if (*pp == a) {
					*pp = a->next_pending;
					break;
				}
		} else {
			a->pool->used -= a->size;
		}
		a->pool->reserved -= a->size;
		free(a);
	}
	pthread_mutex_unlock(&pool_lock);
}

/* Set when the library is loaded, before any thread can allocate, free or synchronize. */
__attribute__((constructor)) static void pool_listen(void)
{
	ip_mem_on_free(pool_forget);
	ip_stream_on_synced(ip_pool_synced);
}
