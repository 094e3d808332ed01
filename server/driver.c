/*
 * Loading the CUDA driver into a worker. Only workers load it (after fork): the supervisor
 * never touches CUDA, so a driver fault cannot take down the listener.
 */
#define LOG_PREFIX "driver: "
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"
#include "rgpu/err.h"
#include "rgpu/log.h"

#define STR_(x) #x
#define XSTR(x) STR_(x)

int srv_driver_load(struct srv_driver *d, const char *path)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->path, sizeof(d->path), "%s", path ? path : "libcuda.so.1");
	d->dl = dlopen(d->path, RTLD_NOW | RTLD_LOCAL);
	if (!d->dl) {
		pr_err("cannot load the CUDA driver %s: %s", d->path, dlerror());
		return RGPU_ENOTFOUND;
	}
#define DRV_RESOLVE(fn)                                                                        \
	d->fn = (__typeof__(d->fn))dlsym(d->dl, XSTR(fn));                                     \
	if (!d->fn) {                                                                          \
		pr_err("the driver %s lacks %s", d->path, XSTR(fn));                           \
		return RGPU_EUNSUPPORTED;                                                      \
	}
	DRV_FUNCS(DRV_RESOLVE)
#undef DRV_RESOLVE
#define DRV_RESOLVE_OPT(fn) d->fn = (__typeof__(d->fn))dlsym(d->dl, XSTR(fn));
	DRV_OPT_FUNCS(DRV_RESOLVE_OPT)
#undef DRV_RESOLVE_OPT
	return 0;
}

const char *srv_cu_name(const struct srv_driver *d, CUresult r)
{
	const char *s = NULL;
	if (d && d->cuGetErrorName && d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "CUDA_ERROR_?";
}
