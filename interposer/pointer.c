/*
 * Pointer attributes (cuPointerGetAttribute, cuPointerGetAttributes), answered on the client:
 * what memory.c knows of an address (a device allocation, a module global, pinned or
 * registered host memory) and, for a device block, the pool it came from (pool.c). It stands
 * above both, owns no state and never sends a request.
 */
#include "ip.h"

/*
 * One attribute into data. Every attribute exists for known memory only (the host pointer for
 * host memory only); otherwise the "none" value is written and CUDA_ERROR_INVALID_VALUE returned,
 * which cuPointerGetAttributes ignores for unknown pointers.
 */
static CUresult ptr_attr(const struct ip_ptrinfo *pi, CUpointer_attribute a, void *data,
			uint64_t p)
{
	int known = pi->kind != 0;

	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)pi->ctx; break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = pi->kind == 1 ? CU_MEMORYTYPE_DEVICE
				    : pi->kind == 2 ? CU_MEMORYTYPE_HOST : 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = known ? p : 0; break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		known = pi->kind == 2;
		*(void **)data = known ? (void *)(uintptr_t)p : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned *)data = 1; break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = pi->buffer_id; break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = known ? pi->device : -2; break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = pi->base; break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = pi->size; break;
	case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = known; break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned *)data = known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(unsigned *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = pi->kind == 1 ? ip_pool_of(pi->base) : NULL;
		break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return known ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
	struct ip_ptrinfo pi;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	ip_ptr_classify(p, &pi);
	return ptr_attr(&pi, a, data, p);
}

/*
 * Unlike cuPointerGetAttribute, an unknown pointer is not an error here: every attribute gets
 * its "none" value (cuda.h), which is how the runtime recognises unregistered host memory.
 */
IP_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs,
					       void **data, CUdeviceptr p)
{
	struct ip_ptrinfo pi;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	ip_ptr_classify(p, &pi);
	for (unsigned i = 0; i < n; i++) {
		if (!data[i])
			continue;
		if (attrs[i] < CU_POINTER_ATTRIBUTE_CONTEXT)
			return CUDA_ERROR_INVALID_VALUE;
		r = ptr_attr(&pi, attrs[i], data[i], p);
		if (r != CUDA_SUCCESS && pi.kind)
			return r;
	}
	return CUDA_SUCCESS;
}
