/*
 * The application's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess and the calls around them), served inside the window so that every address
 * the application maps is the same on every server (design.md §3, invariant 2).
 *
 * - A reservation is a range of the window, taken by the window allocator like a large
 *   allocation and never shared with one (vawindow.c). It costs no traffic: the worker has the
 *   whole window reserved already, so it only ever sees mappings.
 * - Physical memory (cuMemCreate) is a client object, its CUmemGenericAllocationHandle the
 *   object's address; the worker makes it under the object's id (MSG_VMM_CREATE, a call: an
 *   out-of-memory answer must be exact, allocators retry on it).
 * - A mapping (cuMemMap) and its access (cuMemSetAccess) are checked here against the
 *   reservations and mappings the window holds, then posted (MSG_VMM_MAP, MSG_VMM_ACCESS), one
 *   message per mapping; cuMemUnmap likewise (MSG_VMM_UNMAP).
 * - Physical memory lives while its handle has references (its creation and each
 *   cuMemRetainAllocationHandle, less each cuMemRelease) or a mapping uses it, as the driver
 *   keeps it. Only the end of both reaches the worker: a release when nothing maps it, or the
 *   last unmap of memory whose handle was released, which says so (VmmUnmap.release).
 * - Everything that only reads (granularity, access, properties, the handle of a mapped
 *   address) is answered here.
 *
 * Refused, once each at warn with the reason (ip_refused): memory located on the host, managed
 * memory, export handle types other than POSIX file descriptors (a descriptor type is accepted
 * because PyTorch and NCCL ask for it on every allocation; exporting itself stays unimplemented,
 * a descriptor of the GPU machine would mean nothing here) and allocations for sparse arrays or
 * decompression. cuMemMapArrayAsync is not implemented (its generated stub logs it).
 *
 * State: the physical memory objects, and through vawindow.c the reservations and mappings, all
 * under ip.mem_lock, which is also held while a message about them is posted, so that the worker
 * sees them in the order they happened here. This file calls into memory's floor only through
 * the window allocator; memory.c and pointer.c learn of mappings from the window, not from here.
 */
#define LOG_PREFIX "rgpu: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct ip_physmem {
	struct ip_obj o;
	CUmemAllocationProp prop; /* as cuMemGetAllocationPropertiesFromHandle reports it */
	uint64_t size;
	int refs;  /* handle references: creation and retains, less releases */
	int nmaps; /* the application's mappings of it */
};

static uint64_t granule(void)
{
	return ip.vaw.granule;
}

/* Physical memory the application may still name by its handle, or NULL. Under mem_lock. */
static struct ip_physmem *physmem_get(CUmemGenericAllocationHandle h)
{
	struct ip_physmem *pm = ip_obj_get((const void *)(uintptr_t)h, ST_KIND_PHYSMEM);

	return pm && pm->refs > 0 ? pm : NULL;
}

unsigned long long ip_vmm_handle_types(const void *physmem)
{
	return ((const struct ip_physmem *)physmem)->prop.requestedHandleTypes;
}

/*
 * The allocation properties rgpu serves: pinned memory of one of the server's devices. `what`
 * names the call for the refusal's log line. Returns CUDA_SUCCESS or the error to give.
 */
static CUresult check_prop(const CUmemAllocationProp *prop, const char *what)
{
	const unsigned handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	char msg[160];

	if (prop->type == CU_MEM_ALLOCATION_TYPE_MANAGED) {
		snprintf(msg, sizeof(msg), "%s of managed memory", what);
		ip_refused(msg, "managed memory is not forwarded to the GPU machine");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
	    prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
	    prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
		snprintf(msg, sizeof(msg), "%s of host memory (CUmemLocationType %d)", what,
			 (int)prop->location.type);
		ip_refused(msg, "host memory of the GPU machine is not this process's memory");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.id < 0 || prop->location.id >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	if (prop->requestedHandleTypes & ~handle_types) {
		snprintf(msg, sizeof(msg), "%s with export handle types 0x%x", what,
			 (unsigned)prop->requestedHandleTypes);
		ip_refused(msg, "memory of a remote GPU cannot be shared through the fabric or a "
				"Windows handle");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (prop->allocFlags.usage) {
		snprintf(msg, sizeof(msg), "%s with usage 0x%x", what,
			 (unsigned)prop->allocFlags.usage);
		ip_refused(msg, "tile pools of sparse arrays and decompression memory are not "
				"forwarded");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

/* ---- granularity and physical memory ------------------------------------------------------ */

/* 2 MiB, minimum and recommended alike, as the H100 answers (docs/gpu-host.md). */
IP_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
						      CUmemAllocationGranularity_flags option)
{
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!g || !prop ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	r = check_prop(prop, "cuMemGetAllocationGranularity");
	if (r != CUDA_SUCCESS)
		return r;
	*g = (size_t)granule();
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				    const CUmemAllocationProp *prop, unsigned long long flags)
{
	Rgpu__VmmCreate m = RGPU__VMM_CREATE__INIT;
	struct ip_physmem *pm;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!handle || !prop || flags || !size || size % granule())
		return CUDA_ERROR_INVALID_VALUE;
	r = check_prop(prop, "cuMemCreate");
	if (r != CUDA_SUCCESS)
		return r;
	pm = ip_obj_new(sizeof(*pm), ST_KIND_PHYSMEM, NULL);
	if (!pm)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pm->prop = *prop;
	/* what was made: plain memory (compression and RDMA are the driver's to grant) */
	pm->prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_NONE;
	pm->prop.allocFlags.gpuDirectRDMACapable = 0;
	pm->size = size;
	pm->refs = 1;
	m.handle = pm->o.id;
	m.size = size;
	m.device = prop->location.id;
	ip_route_dev(prop->location.id);
	r = ip_call_status(RGPU_MSG_VMM_CREATE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(pm);
		return r;
	}
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)pm;
	return CUDA_SUCCESS;
}

/* Memory whose handle references and mappings are all gone: the handle is dead. Under mem_lock. */
static void physmem_end(struct ip_physmem *pm)
{
	ip_obj_unregister(&pm->o); /* kept, not freed: a stale handle stays recognisably dead */
}

IP_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	Rgpu__VmmRelease m = RGPU__VMM_RELEASE__INIT;
	struct ip_physmem *pm;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&ip.mem_lock);
	pm = physmem_get(handle);
	if (!pm) {
		pthread_mutex_unlock(&ip.mem_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (--pm->refs == 0 && pm->nmaps == 0) {
		m.handle = pm->o.id;
		ip_route_dev(pm->prop.location.id);
		r = ip_post(RGPU_MSG_VMM_RELEASE, &m.base, NULL, 0);
		physmem_end(pm);
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return r;
}

IP_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							       CUmemGenericAllocationHandle handle)
{
	struct ip_physmem *pm;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&ip.mem_lock);
	pm = physmem_get(handle);
	if (pm)
		*prop = pm->prop;
	pthread_mutex_unlock(&ip.mem_lock);
	return pm ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The handle of the memory mapped at addr, one reference more (released by cuMemRelease). */
IP_API CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
						    void *addr)
{
	struct ip_vaw_map *m;
	struct ip_physmem *pm = NULL;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&ip.mem_lock);
	m = ip_vaw_map_find(&ip.vaw, (uint64_t)(uintptr_t)addr);
	if (m && m->handle) {
		pm = m->handle;
		pm->refs++;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)pm;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return pm ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- reservations ------------------------------------------------------------------------- */

static int pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

IP_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
					    CUdeviceptr addr, unsigned long long flags)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), at = 0;
	CUresult r = ip_check_init();
	struct ip_ctx *c = ip_ctx_cur();
	int ret;

	if (r != CUDA_SUCCESS)
		return r;
	if (!ptr || !size || flags || size % page || addr % page || (alignment && !pow2(alignment)))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&ip.mem_lock);
	/* first fit in the slice of the current context's device (none current: device 0's) */
	ret = ip_vaw_reserve(&ip.vaw, size, alignment, addr, c && !c->o.dead ? c->device : 0, &at);
	pthread_mutex_unlock(&ip.mem_lock);
	if (ret == RGPU_EINVAL)
		return CUDA_ERROR_INVALID_VALUE;
	if (ret) {
		ip_mem_window_full("cuMemAddressReserve", size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ptr = at;
	return CUDA_SUCCESS;
}

/* A reservation with mappings still in it is refused: unmap first. */
IP_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = ip_check_init();
	int ret;

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&ip.mem_lock);
	ret = ip_vaw_unreserve(&ip.vaw, ptr, size);
	pthread_mutex_unlock(&ip.mem_lock);
	return ret ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- mappings ----------------------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				 CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	Rgpu__VmmMap m = RGPU__VMM_MAP__INIT;
	struct ip_physmem *pm;
	CUresult r = ip_check_init();
	uint64_t g = granule();
	int ret;

	if (r != CUDA_SUCCESS)
		return r;
	/* the checks in the order the H100's driver makes them (measured: flags, then the
	 * allocation's extent, then the address's alignment) */
	if (flags || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&ip.mem_lock);
	pm = physmem_get(handle);
	if (!pm) {
		pthread_mutex_unlock(&ip.mem_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (offset || size != pm->size) {
		/* measured on the H100: a map of part of an allocation, or of more than it, is
		 * CUDA_ERROR_NOT_SUPPORTED */
		pthread_mutex_unlock(&ip.mem_lock);
		ip_refused("cuMemMap of part of an allocation",
			   "the driver maps whole allocations at offset 0 only");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (ptr % g) {
		pthread_mutex_unlock(&ip.mem_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* an address says its device's server (route.c): memory of another server's device
	 * cannot be mapped in that device's slice */
	if (ip_multi_server() && ip_addr_device(ptr) >= 0 &&
	    ip_dev_server(ip_addr_device(ptr)) != ip_dev_server(pm->prop.location.id)) {
		pthread_mutex_unlock(&ip.mem_lock);
		pr_warn_once("refused: cuMemMap of device %d's memory at 0x%llx, reserved for device "
			     "%d, on another server (reserve with device %d's context current)",
			     pm->prop.location.id, (unsigned long long)ptr, ip_addr_device(ptr),
			     pm->prop.location.id);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	ret = ip_vaw_map_app(&ip.vaw, ptr, size, pm, offset, pm->prop.location.id);
	if (ret) {
		pthread_mutex_unlock(&ip.mem_lock);
		/* outside a reservation or over a mapping: the driver maps only free reserved VA */
		return ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	}
	m.addr = ptr;
	m.size = size;
	m.offset = offset;
	m.handle = pm->o.id;
	m.device = pm->prop.location.id;
	ip_route_dev(pm->prop.location.id);
	r = ip_post(RGPU_MSG_VMM_MAP, &m.base, NULL, 0);
	if (r == CUDA_SUCCESS)
		pm->nmaps++;
	else
		ip_vaw_unmap_app(&ip.vaw, ptr);
	pthread_mutex_unlock(&ip.mem_lock);
	return r;
}

/*
 * The range must be whole mappings, back to back (a part of one is refused, as the driver
 * refuses it); each goes in its own message.
 */
IP_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct ip_vaw_map **maps = NULL;
	size_t n = 0;
	CUresult r = ip_check_init();
	int ret;

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&ip.mem_lock);
	ret = ip_vaw_app_maps(&ip.vaw, ptr, size, &maps, &n);
	if (ret) {
		/* reserved VA that holds no mapping: nothing to do, CUDA_SUCCESS (measured, H100) */
		int none = ret == RGPU_EINVAL && ip_vaw_resv_unmapped(&ip.vaw, ptr, size);
		pthread_mutex_unlock(&ip.mem_lock);
		if (none)
			return CUDA_SUCCESS;
		return ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < n; i++) {
		Rgpu__VmmUnmap m = RGPU__VMM_UNMAP__INIT;
		struct ip_physmem *pm = maps[i]->handle;
		CUresult r2;

		m.addr = maps[i]->addr;
		m.size = maps[i]->size;
		if (--pm->nmaps == 0 && pm->refs == 0)
			m.release = pm->o.id; /* its handle was released while it was mapped */
		ip_route_dev(maps[i]->device);
		r2 = ip_post(RGPU_MSG_VMM_UNMAP, &m.base, NULL, 0);
		if (r == CUDA_SUCCESS)
			r = r2;
		ip_vaw_unmap_app(&ip.vaw, m.addr);
		if (m.release)
			physmem_end(pm);
	}
	pthread_mutex_unlock(&ip.mem_lock);
	free(maps);
	return r;
}

/* A CUmemAccess_flags value the driver takes. */
static int access_ok(CUmemAccess_flags f)
{
	return f == CU_MEM_ACCESS_FLAGS_PROT_NONE || f == CU_MEM_ACCESS_FLAGS_PROT_READ ||
	       f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

/*
 * The range must be whole mappings, back to back. Each mapping keeps its access per device
 * (2 bits each, statetrack.h) and the message carries the result, so that the state log holds
 * what a replay must set again.
 */
IP_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				       size_t count)
{
	struct ip_vaw_map **maps = NULL;
	uint32_t devices = 0, clear = 0, set = 0;
	size_t n = 0;
	CUresult r = ip_check_init();
	int ret;

	if (r != CUDA_SUCCESS)
		return r;
	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		int d = desc[i].location.id;

		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    !access_ok(desc[i].flags))
			return CUDA_ERROR_INVALID_VALUE;
		if (d < 0 || d >= ip.ndev || d >= 16)
			return CUDA_ERROR_INVALID_DEVICE;
		devices |= 1u << d;
		clear |= 3u << (2 * d);
		set = (set & ~(3u << (2 * d))) | (uint32_t)desc[i].flags << (2 * d);
	}
	pthread_mutex_lock(&ip.mem_lock);
	ret = ip_vaw_app_maps(&ip.vaw, ptr, size, &maps, &n);
	if (ret) {
		pthread_mutex_unlock(&ip.mem_lock);
		return ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < n; i++) {
		Rgpu__VmmAccess m = RGPU__VMM_ACCESS__INIT;
		struct ip_physmem *pm = maps[i]->handle;
		CUresult r2;

		/* no device reaches memory on another server (route.c) */
		if (ip_multi_server())
			for (int d = 0; d < ip.ndev && d < 16; d++)
				if ((devices >> d & 1) &&
				    ip_dev_server(d) != ip_dev_server(maps[i]->device)) {
					pr_warn_once("cuMemSetAccess: device %d cannot reach memory of "
						     "device %d, on another server (%s)", d,
						     maps[i]->device,
						     ip_dev_server_name(maps[i]->device));
					r2 = CUDA_ERROR_INVALID_DEVICE;
					goto next;
				}
		maps[i]->access = (maps[i]->access & ~clear) | set;
		m.addr = maps[i]->addr;
		m.size = maps[i]->size;
		m.handle = pm->o.id;
		m.offset = maps[i]->offset;
		m.device = maps[i]->device;
		m.access = maps[i]->access;
		m.devices = devices;
		ip_route_dev(maps[i]->device);
		r2 = ip_post(RGPU_MSG_VMM_ACCESS, &m.base, NULL, 0);
next:
		if (r == CUDA_SUCCESS)
			r = r2;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	free(maps);
	return r;
}

/* What cuMemSetAccess gave location at ptr (a mapping the application made). */
IP_API CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
				       CUdeviceptr ptr)
{
	const struct ip_vaw_map *m;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (location->id < 0 || location->id >= ip.ndev || location->id >= 16)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&ip.mem_lock);
	m = ip_vaw_map_find(&ip.vaw, ptr);
	if (m && m->handle)
		*flags = m->access >> (2 * location->id) & 3;
	else
		r = CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&ip.mem_lock);
	return r;
}
