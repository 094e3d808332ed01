/*
 * Pointer attributes (cuPointerGetAttribute, cuPointerGetAttributes), answered on the client:
 * what memory.c knows of an address (a device allocation, a module global, a mapping the
 * application made of its own physical memory, pinned or registered host memory), the window
 * mapping a device block lies in (vawindow.c), for a device block the pool it came from
 * (pool.c) and, for the application's mapping, its physical memory (vmm.c). It stands above
 * them, owns no state and never sends a request.
 *
 * Memory the application mapped itself (cuMemCreate, cuMemMap) belongs to no context (CONTEXT
 * is NULL); its range, mapping and memory block are the mapping's; its access flags are those
 * cuMemSetAccess gave the current context's device; its allowed handle types are those it was
 * created with. These follow the driver's documentation: they have not been compared with the
 * driver's own answers on a GPU yet.
 *
 * The answers are those of driver 580.159.04 on an H100 for cuMemAlloc, cuMemAllocHost and
 * cuMemHostRegister memory and for unknown host memory (tests/cuda/rt_pointer_attrs.cu prints
 * every one, natively and through rgpu), with these deliberate differences: the memory is
 * not IPC-capable, GPUDirect-RDMA-capable or usable for hardware decompression through rgpu
 * (0), P2P tokens do not exist for it (CUDA_ERROR_NOT_SUPPORTED), and a host range is its own
 * mapping. The two calls differ, as the driver's do, in what "no value" means: the single
 * call fails (CUDA_ERROR_INVALID_VALUE, nothing written, for an unknown pointer), the plural
 * one writes the "none" value and goes on, which is how the runtime tells device memory (no
 * host pointer) and unregistered host memory apart (cudaPointerGetAttributes).
 */
#include <string.h>

#include "ip.h"
#include "ip_entries.h"

/* Everything the attributes of one pointer are made from. */
struct ptr_view {
	struct ip_ptrinfo pi;
	uint64_t p;
	uint64_t map_base, map_size; /* the mapping p lies in (known pointers only) */
	int has_ctx;		     /* a live context is current on the calling thread */
	int cur_device;		     /* ...and its device (0 without one) */
};

/*
 * window_mapping() - the mapped range of the window that holds p: a small allocation's slab
 * (one granule, granule-aligned) or a large allocation's own mapping. 0 if p is not in a window
 * allocation (a module global, say).
 */
static int window_mapping(uint64_t p, uint64_t *base, uint64_t *size)
{
	const struct ip_vaw_alloc *a;
	int found = 0;

	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a && a->slab) {
		*base = p - (p - ip.vaw.base) % ip.vaw.granule;
		*size = ip.vaw.granule;
		found = 1;
	} else if (a) {
		*base = a->addr;
		*size = a->map_size;
		found = 1;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return found;
}

static void ptr_view(uint64_t p, struct ptr_view *v)
{
	struct ip_ctx *c;

	memset(v, 0, sizeof(*v));
	ip_ptr_classify(p, &v->pi);
	v->p = p;
	if (v->pi.kind && !(v->pi.kind == 1 && window_mapping(p, &v->map_base, &v->map_size))) {
		v->map_base = v->pi.base; /* host ranges and module globals: the range itself */
		v->map_size = v->pi.size;
	}
	v->has_ctx = ip_ctx_require(&c) == CUDA_SUCCESS;
	v->cur_device = v->has_ctx && c->device >= 0 && c->device < 16 ? c->device : 0;
}

/*
 * ptr_attr() - attribute a of v into data, as cuPointerGetAttributes (plural) or
 * cuPointerGetAttribute asks it. Returns CUDA_SUCCESS or the driver's error for it; an
 * attribute cuda.h does not define, and P2P_TOKENS in the plural, are CUDA_ERROR_INVALID_VALUE
 * with nothing written. Each value is written with the width the driver writes.
 */
static CUresult ptr_attr(const struct ptr_view *v, CUpointer_attribute a, void *data, int plural)
{
	const struct ip_ptrinfo *pi = &v->pi;
	int dev = pi->kind == 1, known = pi->kind != 0;
	int managed = dev && pi->managed; /* the CPU reaches it at the same address */

	if (!known && !plural)
		return CUDA_ERROR_INVALID_VALUE; /* the driver writes nothing then */
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = known ? (CUcontext)pi->ctx : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = dev ? CU_MEMORYTYPE_DEVICE : known ? CU_MEMORYTYPE_HOST : 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		/* host memory too: cuMemHostGetDevicePointer gives the host address itself */
		*(CUdeviceptr *)data = known && v->has_ctx ? v->p : 0;
		if (known && !v->has_ctx && !plural)
			return CUDA_ERROR_INVALID_CONTEXT;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		/* unknown memory is host memory the process can use as it is */
		*(void **)data = dev && !managed ? NULL : (void *)(uintptr_t)v->p;
		if (dev && !managed && !plural)
			return CUDA_ERROR_INVALID_VALUE;
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS *t = data;

		if (plural)
			return CUDA_ERROR_INVALID_VALUE; /* not one of the plural's attributes */
		if (dev) {
			/* tokens of the nv-p2p kernel interface: they exist on the server only */
			ip_unimplemented("cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_P2P_TOKENS)");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		t->p2pToken = 0; /* host memory: zeroed, then refused */
		t->vaSpaceToken = 0;
		return CUDA_ERROR_INVALID_VALUE;
	}
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		/* not settable through rgpu (cuPointerSetAttribute), and a synchronous copy to
		 * the device does not wait for the server (user-guide.md) */
		*(unsigned *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = pi->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned *)data = managed;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = known ? pi->device : -2;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
		*(unsigned *)data = 0;
		break;
	/* the range of unknown memory is left as it was (the plural call), as the driver does */
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		if (known)
			*(CUdeviceptr *)data = pi->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		if (known)
			*(size_t *)data = pi->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned *)data = known;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = pi->physmem ? ip_vmm_handle_types(pi->physmem) : 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		/* an application's mapping: what cuMemSetAccess gave the current device */
		if (pi->physmem)
			*(unsigned *)data = pi->access >> (2 * v->cur_device) & 3;
		else
			*(unsigned *)data = known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
						  : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = dev ? ip_pool_of(pi->base) : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = v->map_size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(CUdeviceptr *)data = v->map_base;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		/* one physical allocation per mapping, on the server */
		*(unsigned long long *)data = v->map_base;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
	struct ptr_view v;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	ptr_view(p, &v);
	return ptr_attr(&v, a, data, 0);
}

/*
 * Unlike cuPointerGetAttribute, an unknown pointer is not an error here: every attribute gets
 * its "none" value, and so do the attributes a known pointer has no value for. The attributes
 * are answered in order; the first one refused (an attribute this call does not take, a NULL
 * slot) ends the call with CUDA_ERROR_INVALID_VALUE, those before it written, as the driver
 * does. No attribute at all is CUDA_ERROR_INVALID_VALUE too.
 */
IP_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs,
					       void **data, CUdeviceptr p)
{
	struct ptr_view v;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!n || !attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	ptr_view(p, &v);
	for (unsigned i = 0; i < n; i++) {
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
		r = ptr_attr(&v, attrs[i], data[i], 1);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}
