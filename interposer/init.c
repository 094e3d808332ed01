/*
 * Initialisation, versions and devices. Everything here is answered locally: device
 * properties are fetched once, in the handshake, and stay a stable client-side fact for the
 * life of the process (the runtime hashes some of them into its integrity check, and they must
 * not change even if the job later moves to another server).
 */
#define LOG_PREFIX "rgpu: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ip.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct ip_state ip = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.mem_lock = PTHREAD_MUTEX_INITIALIZER,
	.driver_version = CUDA_VERSION,
};

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_tried;

/* ---- logging: silent unless RGPU_LOG asks ------------------------------------------------- */

__attribute__((constructor)) void ip_log_init(void)
{
	const char *v = getenv("RGPU_LOG"), *file = getenv("RGPU_LOG_FILE");
	char tag[32];
	int lvl = RGPU_LOG_NONE;

	if (v && *v) {
		lvl = rgpu_log_parse_level(v);
		if (lvl < 0 || !strcmp(v, "1"))
			lvl = RGPU_LOG_INFO; /* any other non-empty value turns logging on */
	}
	rgpu_log_set_level(lvl);
	snprintf(tag, sizeof(tag), "rgpu[%d]", (int)getpid());
	rgpu_log_set_tag(tag);
	if (lvl && file && *file)
		rgpu_log_open(file);
}

CUresult ip_check_init(void)
{
	ip_route_clear();
	if (!ip.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	return ip_session_error();
}

static int bad_dev(CUdevice d)
{
	return d < 0 || d >= ip.ndev;
}

#define REQUIRE_INIT()                                                                         \
	do {                                                                                   \
		CUresult r_ = ip_check_init();                                                 \
		if (r_ != CUDA_SUCCESS)                                                        \
			return r_;                                                             \
	} while (0)

/* ---- init and versions ------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuInit(unsigned int flags)
{
	CUresult r;

	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&init_lock);
	if (!init_tried) {
		init_tried = 1;
		r = ip_session_open();
		if (r == CUDA_SUCCESS) {
			for (int i = 0; i < ip.ndev; i++) {
				struct ip_ctx *c = ip_obj_new(sizeof(*c), ST_KIND_CONTEXT, NULL);
				if (!c) {
					r = CUDA_ERROR_OUT_OF_MEMORY;
					break;
				}
				c->device = i;
				c->primary = 1;
				ip.dev[i].primary = c;
			}
		}
		ip.init_result = r;
		if (r == CUDA_SUCCESS)
			ip.initialized = 1;
	}
	r = ip.init_result;
	pthread_mutex_unlock(&init_lock);
	return r;
}

/* Answered before cuInit and without a server (the runtime asks first, dark-api.md §2). */
IP_API CUresult CUDAAPI cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = ip.driver_version;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	*mode = CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

/* ---- devices ------------------------------------------------------------------------------ */

IP_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	*count = ip.ndev;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "%s", ip.dev[dev].name);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*uuid = ip.dev[dev].uuid;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid_v2(uuid, dev);
}

IP_API CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = ip.dev[dev].total_mem;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if ((int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	/* managed memory without hardware coherence (managed.c): the non-concurrent model */
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
	case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
		*pi = 0;
		break;
	default:
		*pi = ip.dev[dev].attr[attrib];
	}
	return CUDA_SUCCESS;
}

static void pci_id(CUdevice dev, char *out, size_t len)
{
	const int *a = ip.dev[dev].attr;
	snprintf(out, len, "%04x:%02x:%02x.0", a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
		 a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID], a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
}

IP_API CUresult CUDAAPI cuDeviceGetPCIBusId(char *busid, int len, CUdevice dev)
{
	char buf[32];
	if (!busid || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pci_id(dev, buf, sizeof(buf));
	snprintf(busid, (size_t)len, "%s", buf);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *busid)
{
	unsigned dom = 0, bus = 0, d = 0;
	if (!dev || !busid)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (sscanf(busid, "%x:%x:%x", &dom, &bus, &d) != 3) {
		dom = 0;
		if (sscanf(busid, "%x:%x", &bus, &d) != 2)
			return CUDA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < ip.ndev; i++) {
		const int *a = ip.dev[i].attr;
		if ((unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] == dom &&
		    (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] == bus &&
		    (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] == d) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

IP_API CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*major = ip.dev[dev].attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
	*minor = ip.dev[dev].attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetProperties(CUdevprop *p, CUdevice dev)
{
	const int *a;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	a = ip.dev[dev].attr;
	memset(p, 0, sizeof(*p));
	p->maxThreadsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
	p->maxThreadsDim[0] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X];
	p->maxThreadsDim[1] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y];
	p->maxThreadsDim[2] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
	p->maxGridSize[0] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X];
	p->maxGridSize[1] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y];
	p->maxGridSize[2] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
	p->sharedMemPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
	p->totalConstantMemory = a[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY];
	p->SIMDWidth = a[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
	p->memPitch = a[CU_DEVICE_ATTRIBUTE_MAX_PITCH];
	p->regsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK];
	p->clockRate = a[CU_DEVICE_ATTRIBUTE_CLOCK_RATE];
	p->textureAlign = a[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT];
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
	if (!can)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev) || bad_dev(peer))
		return CUDA_ERROR_INVALID_DEVICE;
	/* never across servers; between one server's devices not forwarded (context.c) */
	*can = 0;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attr,
						  CUdevice src, CUdevice dst)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(src) || bad_dev(dst) || src == dst)
		return CUDA_ERROR_INVALID_DEVICE;
	(void)attr;
	*value = 0;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type,
							 CUdevice dev)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	REQUIRE_INIT();
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	(void)type;
	*pi = 0;
	return CUDA_SUCCESS;
}

/* ---- what the export tables need (ip_dark.h) ---------------------------------------------- */

int ip_initialized(void)
{
	return ip.initialized;
}

int ip_driver_version(void)
{
	return ip.driver_version;
}

int ip_device_count(void)
{
	return ip.initialized ? ip.ndev : 0;
}

const CUuuid *ip_device_uuid(int dev)
{
	return ip.initialized && !bad_dev(dev) ? &ip.dev[dev].uuid : NULL;
}

int ip_device_attr(int dev, CUdevice_attribute attr)
{
	if (!ip.initialized || bad_dev(dev) || (int)attr <= 0 || attr >= CU_DEVICE_ATTRIBUTE_MAX)
		return 0;
	return ip.dev[dev].attr[attr];
}

CUresult ip_primary_ctx_peek(CUdevice dev, CUcontext *out)
{
	if (!ip.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (bad_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*out = (CUcontext)ip.dev[dev].primary;
	return CUDA_SUCCESS;
}
