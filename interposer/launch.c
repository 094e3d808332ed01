/*
 * Kernel launches and host functions. A launch never waits: the parameters are packed here at
 * the offsets the module-load reply gave (the layout the driver's `extra` buffer uses), the
 * configuration is checked against the device's limits so that an impossible launch fails at
 * once with the driver's code, and the request joins the command stream.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"

/* The `extra` array: a buffer pointer and its size, as cuda.h defines the pairs. */
static CUresult parse_extra(void **extra, void **buf, size_t *size)
{
	*buf = NULL;
	*size = 0;
	for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (i > 64)
			return CUDA_ERROR_INVALID_VALUE;
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			*buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
			*size = extra[i + 1] ? *(size_t *)extra[i + 1] : 0;
		else
			return CUDA_ERROR_INVALID_VALUE;
	}
	if ((*size && !*buf) || *size > RGPU_MAX_PARAMS)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* rgpu's own bound on a launch's attributes (the driver's is its enum's size): said once */
static int too_many_attrs(unsigned n)
{
	if (n <= IP_MAX_LAUNCH_ATTRS)
		return 0;
	pr_warn_once("refused: a launch with %u attributes: rgpu carries at most %d "
		     "(CUDA_ERROR_INVALID_VALUE)",
		     n, IP_MAX_LAUNCH_ATTRS);
	return 1;
}

CUresult ip_attrs_to_wire(const CUlaunchAttribute *in, unsigned n, CUlaunchAttribute *out)
{
	if (too_many_attrs(n))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(out, in, n * sizeof(*in));
	for (unsigned i = 0; i < n; i++) {
		if (out[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
		    out[i].id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) {
			/* both start with the event handle; it travels as the event's id */
			struct ip_event *e = ip_obj_get(out[i].value.launchCompletionEvent.event,
							ST_KIND_EVENT);
			uint64_t id;
			if (!e)
				return CUDA_ERROR_INVALID_HANDLE;
			id = e->o.id;
			memcpy(&out[i].value, &id, sizeof(id));
		}
	}
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction h, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
		       unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
		       void **extra, int ptds, const CUlaunchAttribute *attrs, unsigned nattrs)
{
	Rgpu__Launch m = RGPU__LAUNCH__INIT;
	struct ip_func *f;
	struct ip_ctx *c;
	struct ip_stream *so;
	uint64_t sid;
	const int *a;
	uint8_t stackbuf[4096], *buf = stackbuf;
	void *payload;
	size_t plen;
	CUresult r;

	r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	f = ip_obj_get(h, ST_KIND_FUNCTION);
	if (!f)
		f = ip_obj_get(h, ST_KIND_KERNEL);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	r = ip_stream_get(s, ptds, &c, &so);
	if (r != CUDA_SUCCESS)
		return r;
	sid = so ? so->o.id : 0;
	if (!sid && (r = ip_capture_guard_legacy(c, "cuLaunchKernel")) != CUDA_SUCCESS)
		return r;
	a = ip.dev[c->device].attr;
	if (!gx || !gy || !gz || !bx || !by || !bz)
		return CUDA_ERROR_INVALID_VALUE;
	if (gx > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] ||
	    gy > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] ||
	    gz > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] ||
	    bx > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] ||
	    by > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] ||
	    bz > (unsigned)a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] ||
	    (uint64_t)bx * by * bz > (uint64_t)a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK])
		return CUDA_ERROR_INVALID_VALUE;
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra) {
		r = parse_extra(extra, &payload, &plen);
		if (r != CUDA_SUCCESS)
			return r;
		m.extra = 1;
	} else {
		if (f->info->nparams && !params)
			return CUDA_ERROR_INVALID_VALUE;
		plen = f->info->argbytes;
		if (plen > sizeof(stackbuf) && !(buf = malloc(plen)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		if (f->info->nparams && ip_pack_params(f->info, params, buf)) {
			if (buf != stackbuf)
				free(buf);
			return CUDA_ERROR_INVALID_VALUE;
		}
		payload = buf;
	}
	m.func = f->o.id;
	m.grid_x = gx;
	m.grid_y = gy;
	m.grid_z = gz;
	m.block_x = bx;
	m.block_y = by;
	m.block_z = bz;
	m.shared_mem = shmem;
	m.stream = sid;
	m.ctx = c->o.id;
	m.nparams = f->info->nparams;
	CUlaunchAttribute wire[IP_MAX_LAUNCH_ATTRS];
	if (nattrs) {
		r = ip_attrs_to_wire(attrs, nattrs, wire);
		if (r != CUDA_SUCCESS)
			goto out;
		m.attrs.data = (uint8_t *)wire;
		m.attrs.len = nattrs * sizeof(*attrs);
	}
	ip_link_set_captured(ip_capture_of(so) != NULL);
	r = ip_post(RGPU_MSG_LAUNCH, &m.base, payload, plen);
	ip_link_set_captured(0);
out:
	if (buf != stackbuf)
		free(buf);
	return r;
}

IP_API CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
				       CUstream s, void **params, void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 0, NULL, 0);
}

IP_API CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
					    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
					    CUstream s, void **params, void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 1, NULL, 0);
}

/*
 * Launch attributes (clusters, cooperative grids, programmatic dependent launch, priorities)
 * travel with the launch; the server launches with cuLaunchKernelEx. Graph-only attributes
 * are refused.
 */
static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra,
			  int ptds)
{
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	if (too_many_attrs(cfg->numAttrs))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < cfg->numAttrs; i++)
		if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)
			return CUDA_ERROR_INVALID_VALUE; /* graphs only */
	return launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
		      cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream, params,
		      extra, ptds, cfg->attrs, cfg->numAttrs);
}

IP_API CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params,
					 void **extra)
{
	return launch_ex(cfg, f, params, extra, 0);
}

IP_API CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f,
					      void **params, void **extra)
{
	return launch_ex(cfg, f, params, extra, 1);
}

static CUresult cooperative(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			    unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
			    int ptds)
{
	CUlaunchAttribute a;
	memset(&a, 0, sizeof(a));
	a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	a.value.cooperative = 1;
	return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL, ptds, &a, 1);
}

IP_API CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy,
						  unsigned gz, unsigned bx, unsigned by,
						  unsigned bz, unsigned shmem, CUstream s,
						  void **params)
{
	return cooperative(f, gx, gy, gz, bx, by, bz, shmem, s, params, 0);
}

IP_API CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
						       unsigned gz, unsigned bx, unsigned by,
						       unsigned bz, unsigned shmem, CUstream s,
						       void **params)
{
	return cooperative(f, gx, gy, gz, bx, by, bz, shmem, s, params, 1);
}

/* ---- host functions ---------------------------------------------------------------------- */

static CUresult host_func(CUstream s, CUhostFn fn, CUstreamCallback cb, void *user, int ptds)
{
	Rgpu__HostFunc m = RGPU__HOST_FUNC__INIT;
	struct ip_ctx *c;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!fn && !cb)
		return CUDA_ERROR_INVALID_VALUE;
	struct ip_stream *so;
	r = ip_stream_get(s, ptds, &c, &so);
	if (r != CUDA_SUCCESS)
		return r;
	if (cb && ip_capture_of(so)) {
		ip_refused("cuStreamAddCallback on a capturing stream",
			   "callbacks cannot be captured, as natively "
			   "(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (!so && (r = ip_capture_guard_legacy(c, fn ? "cuLaunchHostFunc"
						       : "cuStreamAddCallback")) != CUDA_SUCCESS)
		return r;
	m.stream = so ? so->o.id : 0;
	m.ctx = c->o.id;
	m.callback = ip_callback_register(fn, cb, s, user, ip_capture_of(so) != NULL);
	if (!m.callback)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = ip_post(RGPU_MSG_HOST_FUNC, &m.base, NULL, 0);
	if (r != CUDA_SUCCESS)
		ip_callback_forget(m.callback); /* nothing will trigger it */
	return r;
}

IP_API CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user)
{
	return host_func(s, fn, NULL, user, 0);
}

IP_API CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user)
{
	return host_func(s, fn, NULL, user, 1);
}

IP_API CUresult CUDAAPI cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *user,
					    unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return host_func(s, NULL, cb, user, 0);
}

IP_API CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *user,
						 unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	return host_func(s, NULL, cb, user, 1);
}
