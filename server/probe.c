/*
 * The GPU probe: a short-lived child the supervisor forks at start-up to learn the server's
 * GPUs and driver version (for `rgpuctl status`), so the supervisor itself never loads the
 * driver. It creates no context, reports one CTL_GPUS message and exits.
 */
#define LOG_PREFIX "probe: "
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu/log.h"
#include "srv.h"

void srv_probe_run(const struct srv_config *cfg, int fd)
{
	static struct srv_driver drv;
	static char names[16][256];
	static uint8_t uuids[16][16];
	Rgpu__GpuInfo gi[16], *gip[16];
	Rgpu__Ctl m = RGPU__CTL__INIT;
	char why[256] = "";
	int n = 0, v = 0;
	CUresult r;

	m.kind = RGPU__CTL_KIND__CTL_GPUS;
	if (srv_driver_load(&drv, cfg->driver)) {
		snprintf(why, sizeof(why), "cannot load the CUDA driver %s",
			 cfg->driver ? cfg->driver : "libcuda.so.1");
	} else if ((r = drv.cuInit(0)) != CUDA_SUCCESS || drv.cuDeviceGetCount(&n) != CUDA_SUCCESS) {
		snprintf(why, sizeof(why), "cuInit: %s", srv_cu_name(&drv, r));
		n = 0;
	}
	if (n > 16)
		n = 16;
	if (!why[0])
		drv.cuDriverGetVersion(&v);
	for (int i = 0; i < n; i++) {
		CUdevice d = 0;
		CUuuid u;
		size_t total = 0;
		rgpu__gpu_info__init(&gi[i]);
		drv.cuDeviceGet(&d, i);
		drv.cuDeviceGetName(names[i], sizeof(names[i]), d);
		if (drv.cuDeviceGetUuid(&u, d) == CUDA_SUCCESS)
			memcpy(uuids[i], u.bytes, 16);
		drv.cuDeviceTotalMem(&total, d);
		gi[i].index = (uint32_t)i;
		gi[i].name = names[i];
		gi[i].uuid.data = uuids[i];
		gi[i].uuid.len = 16;
		gi[i].memory_total = total;
		gip[i] = &gi[i];
	}
	m.n_gpus = (size_t)n;
	m.gpus = gip;
	m.driver_version = v;
	m.error = why;
	if (why[0])
		pr_warn("%s", why);
	srv_ctl_send(fd, &m, -1);
	_exit(0);
}
