/*
 * Contexts: how they come and go (created contexts and the devices' primary contexts), and
 * what is asked of one context (flags, limits, cache configuration, synchronize). A context
 * exists on the server only while it is active (created, or a primary context with retains);
 * creating it there is fire-and-forget. A primary context's handle exists from cuInit on, so
 * CUDART_INTERFACE[2] can hand it out before any retain. Which context is current, and the
 * questions every area asks about that, are ctxcur.c's.
 *
 * Teardown (cuCtxDestroy, cuDevicePrimaryCtxReset, the last cuDevicePrimaryCtxRelease) runs
 * the runtime's context-local-storage destructors first (they call back into the driver), then
 * forgets every object of the context and frees its memory, then tells the server. It names
 * each area's teardown in that order, so this file stands above every area, and no area may
 * call into it.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"

static atomic_ullong next_uid;

#define REQUIRE_INIT()                                                                         \
	do {                                                                                   \
		CUresult r_ = ip_check_init();                                                 \
		if (r_ != CUDA_SUCCESS)                                                        \
			return r_;                                                             \
	} while (0)

static struct ip_ctx *ctx_get(CUcontext h)
{
	return ip_obj_get(h, ST_KIND_CONTEXT);
}

/* Create the context on the server (fire-and-forget: the id is ours). */
static CUresult ctx_activate(struct ip_ctx *c)
{
	Rgpu__CtxCreate m = RGPU__CTX_CREATE__INIT;
	CUresult fault = atomic_load(&ip.dev[c->device].faulted);

	/*
	 * After a sticky fault the driver gives this process no context on that device again,
	 * reset or not (measured on the H100: every call after cudaDeviceReset returns
	 * cudaErrorDevicesUnavailable; tests/cuda/rt_sticky.cu)
	 */
	if (fault != CUDA_SUCCESS) {
		pr_warn_once("refused: a context on device %d, which had a sticky fault (error %d): "
			     "the driver gives none to this process again",
			     c->device, (int)fault);
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	}
	m.ctx = c->o.id;
	m.device = c->device;
	m.flags = c->flags;
	m.primary = c->primary;
	c->uid = atomic_fetch_add(&next_uid, 1) + 1;
	c->active = 1;
	int prev = ip_pin_dev(c->device);
	CUresult r = ip_post(RGPU_MSG_CTX_CREATE, &m.base, NULL, 0);
	ip_pin_server(prev);
	return r;
}

static CUresult ctx_teardown_on(struct ip_ctx *c);

/* everything the teardown sends goes to the context's server */
static CUresult ctx_teardown(struct ip_ctx *c)
{
	int prev = ip_pin_dev(c->device);
	CUresult r = ctx_teardown_on(c);

	ip_pin_server(prev);
	return r;
}

static CUresult ctx_teardown_on(struct ip_ctx *c)
{
	Rgpu__CtxRef m = RGPU__CTX_REF__INIT;

	/*
	 * Natively a destroy waits for the context's work and flushes its device printf buffer
	 * before it returns; the destroy itself is fire-and-forget here, so synchronise first:
	 * the output reaches the program's stdout before cudaDeviceReset or cuCtxDestroy returns
	 * (server/stdio.c). Its error goes with the context, as natively.
	 */
	if (ip.server_caps & RGPU_CAP_OUTPUT) {
		m.ctx = c->o.id;
		(void)ip_call_status(RGPU_MSG_CTX_SYNC, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	}
	/*
	 * The context goes, sticky fault or not: its frees must reach the worker (the device
	 * stays refused to this process: ip.dev[].faulted)
	 */
	atomic_store(&c->sticky, CUDA_SUCCESS);
	ip_cls_teardown((CUcontext)c);
	ip_stream_ctx_teardown(c);
	ip_array_ctx_teardown(c);
	ip_module_ctx_teardown(c);
	ip_mem_ctx_teardown(c);
	c->active = 0;
	ip_async_forget(); /* the context's errors go with it */
	m.ctx = c->o.id;
	return ip_post(RGPU_MSG_CTX_DESTROY, &m.base, NULL, 0);
}

/* ---- created contexts -------------------------------------------------------------------- */

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	struct ip_ctx *c;
	CUresult r;

	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (ip_ctx_stack_full("cuCtxCreate"))
		return CUDA_ERROR_OUT_OF_MEMORY;
	c = ip_obj_new(sizeof(*c), ST_KIND_CONTEXT, NULL);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->device = dev;
	c->flags = flags;
	c->refcount = 1;
	r = ctx_activate(c);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(c);
		return r;
	}
	ip_ctx_push(c); /* room was checked above */
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
				       unsigned int flags, CUdevice dev)
{
	if (params && (params->numExecAffinityParams || params->cigParams)) {
		ip_refused("cuCtxCreate_v4 with execution affinity or CIG parameters",
			   "the server's contexts are plain ones");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

IP_API CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
				       unsigned int flags, CUdevice dev)
{
	if (params && n > 0) {
		ip_refused("cuCtxCreate_v3 with execution affinity parameters",
			   "the server's contexts are plain ones");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

IP_API CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

IP_API CUresult CUDAAPI cuCtxDestroy_v2(CUcontext h)
{
	struct ip_ctx *c;
	CUresult r;
	REQUIRE_INIT();
	if (!(c = ctx_get(h)) || c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = ctx_teardown(c);
	ip_obj_unregister(&c->o);
	/* drop it from this thread's stack; other threads get INVALID_CONTEXT from now on */
	ip_ctx_unstack(c);
	/* the object is not freed: a stale handle must stay a recognisably dead address */
	return r;
}

/* ---- primary contexts -------------------------------------------------------------------- */

/*
 * A primary context's teardown runs outside ip.lock (it waits for the server, and the runtime's
 * destructors it calls may call back in): another thread's retain, release or reset waits for
 * it to end, else a retain would activate the context the teardown is about to destroy. The
 * tearing thread itself goes on (a destructor that retains). With ip.lock held.
 */
static pthread_cond_t teardown_done = PTHREAD_COND_INITIALIZER;

static void await_teardown_locked(struct ip_ctx *c)
{
	while (c->tearing && !pthread_equal(c->tearing_by, pthread_self()))
		pthread_cond_wait(&teardown_done, &ip.lock);
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct ip_ctx *c;
	CUresult r = CUDA_SUCCESS;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	c = ip.dev[dev].primary;
	pthread_mutex_lock(&ip.lock);
	await_teardown_locked(c);
	if (c->refcount++ == 0)
		r = ctx_activate(c);
	if (r != CUDA_SUCCESS)
		c->refcount--;
	pthread_mutex_unlock(&ip.lock);
	if (r == CUDA_SUCCESS)
		*pctx = (CUcontext)c;
	return r;
}

static CUresult primary_release(CUdevice dev, int reset)
{
	struct ip_ctx *c;
	CUresult r = CUDA_SUCCESS;
	int teardown;

	REQUIRE_INIT();
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	c = ip.dev[dev].primary;
	pthread_mutex_lock(&ip.lock);
	await_teardown_locked(c);
	if (!reset && c->refcount == 0) {
		pthread_mutex_unlock(&ip.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	teardown = c->active && !c->tearing && (reset || c->refcount == 1);
	c->refcount = reset ? 0 : c->refcount - 1;
	if (teardown) {
		c->tearing = 1;
		c->tearing_by = pthread_self();
	}
	pthread_mutex_unlock(&ip.lock);
	if (teardown) {
		r = ctx_teardown(c);
		pthread_mutex_lock(&ip.lock);
		c->tearing = 0;
		pthread_cond_broadcast(&teardown_done);
		pthread_mutex_unlock(&ip.lock);
	}
	return r;
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return primary_release(dev, 0);
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return primary_release(dev, 1);
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = ip.dev[dev].primary->flags;
	*active = ip.dev[dev].primary->active;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	REQUIRE_INIT();
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags & ~(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_MAP_HOST |
		      CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
		return CUDA_ERROR_INVALID_VALUE;
	ip.dev[dev].primary->flags = flags;
	return CUDA_SUCCESS;
}

/* ---- peer access ------------------------------------------------------------------------- */

/*
 * No device reaches another's memory by load and store here: devices of two servers never can,
 * and between a server's own devices it is not forwarded. cuDeviceCanAccessPeer says 0, so
 * enabling it fails as the driver fails for devices without peer access; copies between
 * devices work all the same (cuMemcpyPeer, unified copies).
 */
IP_API CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
	struct ip_ctx *c, *p;
	CUresult r = ip_ctx_require(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!(p = ctx_get(peer)) || !p->active)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->device == c->device)
		return CUDA_ERROR_INVALID_DEVICE;
	pr_warn_once("refused: peer access from device %d to device %d (%s): rgpu gives no device "
		     "load/store access to another's memory; copies between them work",
		     c->device, p->device,
		     ip_dev_server(c->device) != ip_dev_server(p->device) ? "on another server"
									  : "not forwarded");
	return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

IP_API CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!ctx_get(peer))
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

/* ---- queries ----------------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev)
{
	struct ip_ctx *c;
	CUresult r;
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	*dev = c->device;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *dev, CUcontext h)
{
	struct ip_ctx *c;
	if (!h)
		return cuCtxGetDevice(dev);
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (!(c = ctx_get(h)))
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = c->device;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	struct ip_ctx *c;
	CUresult r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r == CUDA_SUCCESS)
		*flags = c->flags;
	return r;
}

IP_API CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r == CUDA_SUCCESS)
		c->flags = flags;
	return r;
}

IP_API CUresult CUDAAPI cuCtxGetId(CUcontext h, unsigned long long *id)
{
	struct ip_ctx *c;
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	c = h ? ctx_get(h) : ip_ctx_cur();
	if (!c || !c->active)
		return CUDA_ERROR_INVALID_CONTEXT;
	*id = c->uid;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxGetApiVersion(CUcontext h, unsigned int *version)
{
	struct ip_ctx *c;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	c = h ? ctx_get(h) : ip_ctx_cur();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*version = 3020;
	return CUDA_SUCCESS;
}

CUresult ip_ctx_sync(struct ip_ctx *c)
{
	Rgpu__CtxRef m = RGPU__CTX_REF__INIT;
	uint64_t epoch = ip_ctx_work_epoch();
	CUresult r;
	m.ctx = c->o.id;
	int prev = ip_pin_dev(c->device);
	if (!ip_call_idle(c->o.id, &r))
		r = ip_call_status(RGPU_MSG_CTX_SYNC, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	ip_pin_server(prev);
	if (r == CUDA_SUCCESS) {
		ip_pool_synced(c, 0); /* every stream is idle: stream-ordered frees are real now */
		/* and managed memory holds its final bytes, unless work runs on other servers */
		if (!ip_multi_server())
			ip_ctx_work_synced(epoch);
	}
	return r;
}

/* refused while a stream of the context is capturing, in every mode (graph.c) */
static CUresult app_ctx_sync(struct ip_ctx *c, const char *call)
{
	CUresult r = ip_capture_guard_ctx(c, call);
	return r == CUDA_SUCCESS ? ip_ctx_sync(c) : r;
}

IP_API CUresult CUDAAPI cuCtxSynchronize(void)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	return r == CUDA_SUCCESS ? app_ctx_sync(c, "cuCtxSynchronize") : r;
}

IP_API CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext h)
{
	struct ip_ctx *c;
	if (!h)
		return cuCtxSynchronize();
	REQUIRE_INIT();
	if (!(c = ctx_get(h)) || !c->active)
		return CUDA_ERROR_INVALID_CONTEXT;
	return app_ctx_sync(c, "cuCtxSynchronize_v2");
}

/* what the current context's driver answers: a configuration, or the priority range */
static CUresult config_get(int kind, int *value, int *greatest)
{
	Rgpu__CtxConfig m = RGPU__CTX_CONFIG__INIT;
	Rgpu__CtxConfigReply *rep = NULL;
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	m.ctx = c->o.id;
	m.kind = (Rgpu__ConfigKind)kind;
	r = ip_call_status(RGPU_MSG_CTX_GET_CONFIG, &m.base, NULL, 0, NULL, 0,
			   &rgpu__ctx_config_reply__descriptor, (ProtobufCMessage **)&rep);
	if (rep) {
		if (r == CUDA_SUCCESS) {
			*value = rep->value;
			if (greatest)
				*greatest = rep->greatest;
		}
		rgpu__ctx_config_reply__free_unpacked(rep, NULL);
	}
	return r;
}

IP_API CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *config)
{
	int v = 0;
	CUresult r;
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	r = config_get(RGPU__CONFIG_KIND__CONFIG_CACHE, &v, NULL);
	if (r == CUDA_SUCCESS)
		*config = (CUfunc_cache)v;
	return r;
}

IP_API CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	return r == CUDA_SUCCESS ? ip_config_set(c, 0, RGPU__CONFIG_KIND__CONFIG_CACHE, (int)config)
				 : r;
}

IP_API CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *config)
{
	int v = 0;
	CUresult r;
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	r = config_get(RGPU__CONFIG_KIND__CONFIG_SHARED_MEM, &v, NULL);
	if (r == CUDA_SUCCESS)
		*config = (CUsharedconfig)v;
	return r;
}

IP_API CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	return r == CUDA_SUCCESS
		   ? ip_config_set(c, 0, RGPU__CONFIG_KIND__CONFIG_SHARED_MEM, (int)config)
		   : r;
}

/* The server's driver answers once per context (the range may differ between GPUs). */
IP_API CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!c->prio_known) {
		int l = 0, g = 0;
		r = config_get(RGPU__CONFIG_KIND__CONFIG_PRIORITY_RANGE, &l, &g);
		if (r != CUDA_SUCCESS)
			return r;
		c->prio_least = l;
		c->prio_greatest = g;
		c->prio_known = 1;
	}
	if (least)
		*least = c->prio_least;
	if (greatest)
		*greatest = c->prio_greatest;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxGetLimit(size_t *value, CUlimit limit)
{
	Rgpu__CtxLimit m = RGPU__CTX_LIMIT__INIT;
	Rgpu__ValueReply *rep = NULL;
	struct ip_ctx *c;
	CUresult r;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	m.ctx = c->o.id;
	m.limit = (int32_t)limit;
	r = ip_call_status(RGPU_MSG_CTX_GET_LIMIT, &m.base, NULL, 0, NULL, 0,
			   &rgpu__value_reply__descriptor, (ProtobufCMessage **)&rep);
	if (rep) {
		if (r == CUDA_SUCCESS)
			*value = (size_t)rep->value;
		rgpu__value_reply__free_unpacked(rep, NULL);
	}
	return r;
}

IP_API CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
	Rgpu__CtxLimit m = RGPU__CTX_LIMIT__INIT;
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	m.ctx = c->o.id;
	m.limit = (int32_t)limit;
	m.value = value;
	/* synchronous: an impossible limit must fail here, as the driver's does */
	return ip_call_status(RGPU_MSG_CTX_SET_LIMIT, &m.base, NULL, 0, NULL, 0, NULL, NULL);
}

/* ---- for the export tables (ip_dark.h) ------------------------------------------------------- */

CUresult ip_ctx_tpc_map(unsigned char **vgpc, unsigned char **mtpc)
{
	Rgpu__TpcMapReply *rep;
	unsigned char *a, *b;
	CUresult r;

	if (!ip.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!vgpc || !mtpc)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_query(RGPU_MSG_TPC_MAP, &rgpu__tpc_map_reply__descriptor,
			 (ProtobufCMessage **)&rep);
	if (r != CUDA_SUCCESS)
		return r;
	a = malloc(rep->vgpc.len + 1);
	b = malloc(rep->mtpc.len + 1);
	if (a && b) {
		memcpy(a, rep->vgpc.data, rep->vgpc.len);
		memcpy(b, rep->mtpc.data, rep->mtpc.len);
		*vgpc = a;
		*mtpc = b;
	} else {
		free(a);
		free(b);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	rgpu__tpc_map_reply__free_unpacked(rep, NULL);
	return r;
}
