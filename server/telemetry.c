/*
 * GPU telemetry for rgpuctl status and /metrics (issue 11; docs/operator-guide.md,
 * "Telemetry"): power, utilisation, memory, clocks and temperature of each GPU, read through
 * NVML when asked. libnvidia-ml.so.1 is loaded with dlopen at the first use, so that rgpud
 * needs no NVML to start, and only the few functions used here are looked up (their
 * prototypes are NVML's documented ABI, declared below: the toolkit's nvml.h is not on every
 * build machine). Without NVML and on the simulated GPU (simgpu) the values are modelled from
 * the jobs' activity, and say so ("model"): a GPU idles at MODEL_IDLE_W and draws up to
 * MODEL_MAX_W as its jobs keep it busy.
 *
 * Runs in the supervisor's thread only. Never blocks for long: an NVML call that fails leaves
 * that field 0.
 */
#define LOG_PREFIX "telemetry: "
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "admin.pb-c.h"
#include "rgpu/log.h"
#include "srv.h"

/* NVML's ABI, as its documentation gives it */
typedef int nvml_ret;      /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef void *nvml_device; /* nvmlDevice_t */
struct nvml_util {         /* nvmlUtilization_t */
	unsigned int gpu, memory;
};
struct nvml_memory { /* nvmlMemory_t (version 1) */
	unsigned long long total, free, used;
};
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

static struct {
	int tried, ok;
	nvml_ret (*init)(void);
	nvml_ret (*by_uuid)(const char *uuid, nvml_device *d);
	nvml_ret (*power)(nvml_device d, unsigned int *mw);
	nvml_ret (*limit)(nvml_device d, unsigned int *mw);
	nvml_ret (*util)(nvml_device d, struct nvml_util *u);
	nvml_ret (*memory)(nvml_device d, struct nvml_memory *m);
	nvml_ret (*clock)(nvml_device d, int type, unsigned int *mhz);
	nvml_ret (*temp)(nvml_device d, int sensor, unsigned int *c);
} nv;

#define MODEL_IDLE_W 60.0
#define MODEL_MAX_W 350.0
#define MODEL_BUSY_BPS (64u << 10) /* a job whose client sends this much a second keeps a GPU busy */

static int nvml_load(void)
{
	void *h;

	if (nv.tried)
		return nv.ok;
	nv.tried = 1;
	h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		pr_info("no NVML (libnvidia-ml.so.1: %s): GPU power and utilisation are modelled",
			dlerror());
		return 0;
	}
	*(void **)&nv.init = dlsym(h, "nvmlInit_v2");
	*(void **)&nv.by_uuid = dlsym(h, "nvmlDeviceGetHandleByUUID");
	*(void **)&nv.power = dlsym(h, "nvmlDeviceGetPowerUsage");
	*(void **)&nv.limit = dlsym(h, "nvmlDeviceGetEnforcedPowerLimit");
	*(void **)&nv.util = dlsym(h, "nvmlDeviceGetUtilizationRates");
	*(void **)&nv.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&nv.clock = dlsym(h, "nvmlDeviceGetClockInfo");
	*(void **)&nv.temp = dlsym(h, "nvmlDeviceGetTemperature");
	if (!nv.init || !nv.by_uuid || !nv.power || !nv.limit || !nv.util || !nv.memory ||
	    !nv.clock || !nv.temp) {
		pr_warn("libnvidia-ml.so.1 lacks a function rgpu reads: GPU telemetry is modelled");
		dlclose(h);
		return 0;
	}
	int r = nv.init();
	if (r) {
		pr_warn("nvmlInit_v2 failed (NVML error %d): GPU telemetry is modelled", r);
		dlclose(h);
		return 0;
	}
	nv.ok = 1;
	return 1;
}

/* NVML names a GPU by its UUID in the form nvidia-smi prints: GPU-xxxxxxxx-xxxx-... */
static void uuid_str(const ProtobufCBinaryData *u, char *out, size_t len)
{
	static const int dash[] = {4, 6, 8, 10};
	size_t o = (size_t)snprintf(out, len, "GPU-");

	for (size_t i = 0; i < u->len && o + 3 < len; i++) {
		for (size_t d = 0; d < 4; d++)
			if ((int)i == dash[d])
				out[o++] = '-';
		o += (size_t)snprintf(out + o, len - o, "%02x", u->data[i]);
	}
}

void srv_telemetry_fill(Rgpu__GpuInfo *g, double jobs_in_bps, int simulated)
{
	nvml_device d;
	char uuid[64];

	if (!simulated && nvml_load() && g->uuid.len == 16) {
		unsigned int v = 0;
		struct nvml_util u = {0};
		struct nvml_memory m = {0};
		uuid_str(&g->uuid, uuid, sizeof(uuid));
		if (nv.by_uuid(uuid, &d) == 0) {
			g->telemetry = "nvml";
			if (nv.power(d, &v) == 0)
				g->power_w = v / 1000.0;
			if (nv.limit(d, &v) == 0)
				g->power_limit_w = v / 1000.0;
			if (nv.util(d, &u) == 0) {
				g->utilization = u.gpu;
				g->memory_utilization = u.memory;
			}
			if (nv.memory(d, &m) == 0)
				g->device_memory_used = m.used;
			if (nv.clock(d, NVML_CLOCK_SM, &v) == 0)
				g->sm_clock_mhz = v;
			if (nv.clock(d, NVML_CLOCK_MEM, &v) == 0)
				g->memory_clock_mhz = v;
			if (nv.temp(d, NVML_TEMPERATURE_GPU, &v) == 0)
				g->temperature_c = v;
			return;
		}
	}
	/* modelled: busy in proportion to what its jobs send, up to fully busy */
	double busy = jobs_in_bps / MODEL_BUSY_BPS;
	if (busy > 1)
		busy = 1;
	g->telemetry = "model";
	g->utilization = (uint32_t)(busy * 100 + 0.5);
	g->memory_utilization = g->utilization / 2;
	g->power_w = MODEL_IDLE_W + (MODEL_MAX_W - MODEL_IDLE_W) * busy;
	g->power_limit_w = MODEL_MAX_W;
	g->device_memory_used = g->memory_used;
	g->sm_clock_mhz = busy > 0 ? 1980 : 345;
	g->memory_clock_mhz = 2619;
	g->temperature_c = (uint32_t)(30 + 40 * busy);
}
