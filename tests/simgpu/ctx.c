/*
 * Contexts: the primary context of each device, contexts made with cuCtxCreate, the
 * per-thread stack of current contexts, limits and flags.
 *
 * A context owns its streams (one thread each, the legacy NULL stream included), its events,
 * its modules and its cuMemAlloc allocations; destroying it (or releasing a primary context
 * to zero, or resetting it) waits for its work, stops its streams and frees all of those.
 * VMM allocations belong to the device, as in the real driver, and survive.
 * The teardown never runs under sim_lock: it waits for streams whose host functions may call
 * back into the API.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* The current-context stack of this thread; freed when the thread exits. */
struct ctx_stack {
	struct sim_ctx **v;
	int n, cap;
};
static __thread struct ctx_stack tls;
static pthread_key_t stack_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static struct sim_ctx *primaries[SIM_MAX_DEVICES];
static pthread_mutex_t prim_mutex = PTHREAD_MUTEX_INITIALIZER; /* serialises retain/release */
static unsigned long long next_ctx_id = 1;

static void free_stack(void *p)
{
	(void)p;
	free(tls.v);
	tls.v = NULL;
	tls.n = tls.cap = 0;
}

static void make_key(void)
{
	pthread_key_create(&stack_key, free_stack);
}

static int push(struct sim_ctx *c)
{
	if (tls.n == tls.cap) {
		int cap = tls.cap ? 2 * tls.cap : 8;
		struct sim_ctx **v = realloc(tls.v, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		if (!tls.v) {
			pthread_once(&key_once, make_key);
			pthread_setspecific(stack_key, &tls); /* non-NULL so the destructor runs */
		}
		tls.v = v;
		tls.cap = cap;
	}
	tls.v[tls.n++] = c;
	return 0;
}

/* Default limits of an H200 context. */
static const size_t default_limits[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 128,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
    [CU_LIMIT_SHMEM_SIZE] = 227 << 10,
    [CU_LIMIT_CIG_ENABLED] = 0,
    [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 0,
};

static struct sim_ctx *dead_ctxs; /* destroyed contexts' structs, kept (cuCtxDestroy) */

static struct sim_ctx *ctx_alloc(int dev, unsigned flags, bool primary)
{
	struct sim_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->dev = dev;
	c->flags = flags;
	c->primary = primary;
	memcpy(c->limits, default_limits, sizeof(c->limits));
	sim_list_init(&c->streams);
	sim_list_init(&c->events);
	sim_list_init(&c->modules);
	return c;
}

/* Give c a fresh id, its legacy NULL stream and a live handle. */
static CUresult ctx_start(struct sim_ctx *c)
{
	pthread_mutex_lock(&sim_lock);
	c->id = next_ctx_id++;
	pthread_mutex_unlock(&sim_lock);
	c->sticky = CUDA_SUCCESS;
	c->null_stream = sim_stream_new(c, 0, 0);
	if (!c->null_stream)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (sim_handle_add(c, SIM_CTX)) {
		sim_stream_stop(c->null_stream);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

/* Wait for c's work, then free everything it owns. The struct itself stays. */
static void ctx_teardown(struct sim_ctx *c)
{
	sim_handle_del(c);
	sim_ctx_sync(c);
	sim_ctx_stop_streams(c);
	c->null_stream = NULL;
	sim_ctx_unload_modules(c);
	sim_ctx_drop_events(c);
	sim_free_ctx_allocs(c);
}

/* Called once by cuInit. */
void sim_ctx_init_primaries(void)
{
	for (int i = 0; i < sim.ndev; i++)
		primaries[i] = ctx_alloc(i, 0, true);
}

/*
 * sim_ctx_current() - the calling thread's current context.
 * Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_CONTEXT when there is none, or
 * CUDA_ERROR_CONTEXT_IS_DESTROYED when it has been destroyed since it was made current.
 */
CUresult sim_ctx_current(struct sim_ctx **out)
{
	struct sim_ctx *c = tls.n ? tls.v[tls.n - 1] : NULL;

	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!sim_handle_is(c, SIM_CTX))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = c;
	return CUDA_SUCCESS;
}

/* sim_ctx_get() - c itself if it is live, the current context if c is NULL. */
CUresult sim_ctx_get(CUcontext h, struct sim_ctx **out)
{
	if (!h)
		return sim_ctx_current(out);
	if (!sim_handle_is(h, SIM_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = (struct sim_ctx *)h;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = ctx_alloc(dev, flags, false);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = ctx_start(c);
	if (r != CUDA_SUCCESS) {
		free(c);
		return r;
	}
	if (push(c)) {
		ctx_teardown(c);
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
				CUdevice dev)
{
	if (params && (params->numExecAffinityParams || params->cigParams))
		return CUDA_ERROR_NOT_SUPPORTED; /* affinity and CIG mean nothing without a GPU */
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext h)
{
	struct sim_ctx *c = (struct sim_ctx *)h;

	SIM_ENTER();
	if (!h || !sim_handle_is(h, SIM_CTX) || c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	ctx_teardown(c);
	/* popped if current here; other threads find it destroyed */
	if (tls.n && tls.v[tls.n - 1] == c)
		tls.n--;
	/*
	 * The struct is kept: other threads' stacks and queued work may still hold the
	 * pointer, and the handle table (not the struct) says it is dead. A list holds it, so
	 * that it stays reachable (LeakSanitizer) once no stack names it.
	 */
	pthread_mutex_lock(&sim_lock);
	c->dead_next = dead_ctxs;
	dead_ctxs = c;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext h)
{
	SIM_ENTER();
	if (h && !sim_handle_is(h, SIM_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tls.n) {
		tls.v[tls.n - 1] = (struct sim_ctx *)h;
		return CUDA_SUCCESS;
	}
	if (!h)
		return CUDA_SUCCESS;
	return push((struct sim_ctx *)h) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	SIM_ENTER();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = tls.n ? (CUcontext)tls.v[tls.n - 1] : NULL;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext h)
{
	SIM_ENTER();
	if (!h || !sim_handle_is(h, SIM_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	return push((struct sim_ctx *)h) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	SIM_ENTER();
	if (!tls.n || !tls.v[tls.n - 1])
		return CUDA_ERROR_INVALID_CONTEXT;
	tls.n--;
	if (pctx)
		*pctx = (CUcontext)tls.v[tls.n];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&c)))
		return r;
	*device = c->dev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext h)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(h, &c)))
		return r;
	*device = c->dev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext h, unsigned long long *ctxId)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(h, &c)))
		return r;
	*ctxId = c->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&c)))
		return r;
	return sim_ctx_sync(c);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&c)))
		return r;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&c)))
		return r;
	if ((unsigned)limit >= CU_LIMIT_MAX)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	pthread_mutex_lock(&sim_lock);
	c->limits[limit] = value;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&c)))
		return r;
	if ((unsigned)limit >= CU_LIMIT_MAX)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	pthread_mutex_lock(&sim_lock);
	*pvalue = c->limits[limit];
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

/* Every context of a 3.2-or-later driver reports API version 3020. */
CUresult CUDAAPI cuCtxGetApiVersion(CUcontext h, unsigned int *version)
{
	struct sim_ctx *c;
	CUresult r;

	SIM_ENTER();
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_get(h, &c)))
		return r;
	*version = 3020;
	return CUDA_SUCCESS;
}

/* --- primary contexts --------------------------------------------------------------------- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct sim_ctx *c;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = primaries[dev];
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&prim_mutex);
	if (!c->active && (r = ctx_start(c)) == CUDA_SUCCESS)
		c->active = true;
	if (r == CUDA_SUCCESS) {
		c->prim_refs++;
		*pctx = (CUcontext)c;
	}
	pthread_mutex_unlock(&prim_mutex);
	return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	struct sim_ctx *c;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = primaries[dev];
	pthread_mutex_lock(&prim_mutex);
	if (!c || c->prim_refs == 0) {
		r = CUDA_ERROR_INVALID_CONTEXT;
	} else if (--c->prim_refs == 0 && c->active) {
		ctx_teardown(c);
		c->active = false;
	}
	pthread_mutex_unlock(&prim_mutex);
	return r;
}

/*
 * Destroys everything the primary context owns. A reset does not release it: a retained
 * context comes straight back (with a new id and fresh streams), an unretained one stays off.
 */
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	struct sim_ctx *c;
	CUresult r = CUDA_SUCCESS;

	SIM_ENTER();
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = primaries[dev];
	pthread_mutex_lock(&prim_mutex);
	if (c && c->active) {
		ctx_teardown(c);
		c->active = false;
		c->flags = 0;
		memcpy(c->limits, default_limits, sizeof(c->limits));
		if (c->prim_refs && (r = ctx_start(c)) == CUDA_SUCCESS)
			c->active = true;
	}
	pthread_mutex_unlock(&prim_mutex);
	return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	struct sim_ctx *c;

	SIM_ENTER();
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	c = primaries[dev];
	pthread_mutex_lock(&prim_mutex);
	*flags = c ? c->flags : 0;
	*active = c && c->active;
	pthread_mutex_unlock(&prim_mutex);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	SIM_ENTER();
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&prim_mutex);
	if (primaries[dev])
		primaries[dev]->flags = flags;
	pthread_mutex_unlock(&prim_mutex);
	return CUDA_SUCCESS;
}

/* ---- cache and shared-memory configuration: preferences, kept so that they read back ---- */

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	ctx->cache_config = (int)config;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *config)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	*config = (CUfunc_cache)ctx->cache_config;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if ((unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
		return CUDA_ERROR_INVALID_VALUE;
	ctx->shared_config = (int)config;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *config)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	*config = (CUsharedconfig)ctx->shared_config;
	return CUDA_SUCCESS;
}
