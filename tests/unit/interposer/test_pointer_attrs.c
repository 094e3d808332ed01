/*
 * Host-only tests of the interposer's pointer attributes (pointer.c) and profiler control
 * (profiler.c): every CUpointer_attribute of cuda.h for device memory of the window (a slab
 * allocation and a large one, and a mapping the application made of its own physical memory),
 * host memory and unknown memory, through cuPointerGetAttribute
 * and cuPointerGetAttributes, with the values, widths and errors driver 580.159.04 gives on an
 * H100 (tests/cuda/rt_pointer_attrs.cu measures them there and through rgpu), and
 * cuProfilerStart/Stop/Initialize, also found through cuGetProcAddress.
 *
 * pointer.c, profiler.c, procaddr.c, unimplemented.c, the generated tables and the window
 * allocator are compiled in; what they ask of the rest of the interposer (initialisation, the
 * current context, what memory.c knows of an address, pools) is answered by the mock_* state
 * below. The mock classifies an address as memory.c does: a window allocation is device
 * memory, a registered host range host memory, anything else unknown.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cudaProfiler.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu/log.h"
#include "rgpu/window.h"

/* ---- the rest of the interposer, mocked ---------------------------------------------------- */

struct ip_state ip = {.lock = PTHREAD_MUTEX_INITIALIZER, .mem_lock = PTHREAD_MUTEX_INITIALIZER};

static struct ip_ctx mock_ctx = {.device = 0, .active = 1};
static struct ip_ctx *mock_current;
static uint64_t mock_host_addr, mock_host_size;
static uint64_t mock_pool_addr;
static CUmemoryPool const mock_pool = (CUmemoryPool)0x7001;

CUresult ip_check_init(void)
{
	return ip.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult ip_ctx_require(struct ip_ctx **out)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!mock_current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = mock_current;
	return CUDA_SUCCESS;
}

struct ip_ctx *ip_ctx_cur(void)
{
	return mock_current;
}

void ip_ptr_classify(uint64_t p, struct ip_ptrinfo *pi)
{
	const struct ip_vaw_alloc *a;
	const struct ip_vaw_map *m;

	memset(pi, 0, sizeof(*pi));
	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a) {
		pi->kind = 1;
		pi->base = a->addr;
		pi->size = a->size;
		pi->device = a->device;
		pi->ctx = a->owner;
		pi->buffer_id = a->addr;
	} else if ((m = ip_vaw_map_find(&ip.vaw, p)) && m->handle) {
		pi->kind = 1;
		pi->base = m->addr;
		pi->size = m->size;
		pi->device = m->device;
		pi->buffer_id = m->addr;
		pi->physmem = m->handle;
		pi->access = m->access;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	if (!pi->kind && p >= mock_host_addr && p < mock_host_addr + mock_host_size) {
		pi->kind = 2;
		pi->base = mock_host_addr;
		pi->size = mock_host_size;
		pi->ctx = &mock_ctx;
		pi->buffer_id = mock_host_addr;
	}
}

/* the application's physical memory, as vmm.c keeps it: one, exportable as a descriptor */
static char mock_physmem;

unsigned long long ip_vmm_handle_types(const void *physmem)
{
	return physmem == &mock_physmem ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
}

CUmemoryPool ip_pool_of(uint64_t addr)
{
	return addr && addr == mock_pool_addr ? mock_pool : NULL;
}

#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *status);

/* ---- fixtures ------------------------------------------------------------------------------ */

#define GRANULE (2ull << 20)
#define WINDOW_BASE RGPU_WINDOW_BASE

static uint64_t small_addr, large_addr; /* 1000 and 5 MiB, device 0 */
static uint64_t vmm_resv, vmm_addr;	/* an application's reservation (8 MiB), and its mapping
					   of 4 MiB of mock_physmem 2 MiB into it, device 0 read */
static char host_buf[8192] __attribute__((aligned(4096)));
static char heap_buf[64];
static char log_path[] = "/tmp/test_pointer_attrs_log.XXXXXX";

static int setup(void **state)
{
	struct ip_vaw_res res;
	int fd;

	(void)state;
	assert_int_equal(ip_vaw_init(&ip.vaw, WINDOW_BASE, 64 * GRANULE, GRANULE, 1), 0);
	assert_int_equal(ip_vaw_alloc(&ip.vaw, 1000, 0, &mock_ctx, &res), 0);
	small_addr = res.addr;
	assert_int_equal(ip_vaw_alloc(&ip.vaw, 5ull << 20, 0, &mock_ctx, &res), 0);
	large_addr = res.addr;
	mock_pool_addr = large_addr;
	assert_int_equal(ip_vaw_reserve(&ip.vaw, 4 * GRANULE, 0, 0, 0, &vmm_resv), 0);
	vmm_addr = vmm_resv + GRANULE;
	assert_int_equal(ip_vaw_map_app(&ip.vaw, vmm_addr, 2 * GRANULE, &mock_physmem, 0, 0), 0);
	ip_vaw_map_find(&ip.vaw, vmm_addr)->access = CU_MEM_ACCESS_FLAGS_PROT_READ;
	mock_host_addr = (uint64_t)(uintptr_t)host_buf;
	mock_host_size = sizeof(host_buf);
	ip.initialized = 1;
	mock_current = &mock_ctx;

	fd = mkstemp(log_path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rgpu_log_open(log_path), 0);
	rgpu_log_set_level(RGPU_LOG_INFO);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ip_vaw_fini(&ip.vaw);
	unlink(log_path);
	return 0;
}

static int count_in_log(const char *needle)
{
	char buf[4096];
	FILE *f = fopen(log_path, "r");
	int n = 0;

	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f))
		if (strstr(buf, needle))
			n++;
	fclose(f);
	return n;
}

/* ---- helpers ------------------------------------------------------------------------------- */

#define FILL 0xab

/* One single-attribute answer: the result, the bytes written (from a FILL-filled buffer),
 * the value as an unsigned 64-bit number (the written bytes, little-endian). */
struct ans {
	CUresult r;
	int width;
	uint64_t v;
};

static int width_of(const unsigned char *b)
{
	int w = 0;

	for (int i = 0; i < 32; i++)
		if (b[i] != FILL)
			w = i + 1;
	return w;
}

static struct ans one(CUpointer_attribute a, uint64_t p)
{
	unsigned char b[32];
	struct ans x;

	memset(b, FILL, sizeof(b));
	x.r = cuPointerGetAttribute(b, a, p);
	x.width = width_of(b);
	x.v = 0;
	memcpy(&x.v, b, x.width > 8 ? 8 : x.width);
	return x;
}

static struct ans plural(CUpointer_attribute a, uint64_t p)
{
	unsigned char b[32];
	void *data = b;
	struct ans x;

	memset(b, FILL, sizeof(b));
	x.r = cuPointerGetAttributes(1, &a, &data, p);
	x.width = width_of(b);
	x.v = 0;
	memcpy(&x.v, b, x.width > 8 ? 8 : x.width);
	return x;
}

#define EXPECT(ans_, r_, width_, v_)                                                               \
	do {                                                                                       \
		struct ans a_ = (ans_);                                                            \
		assert_int_equal(a_.r, (r_));                                                      \
		assert_int_equal(a_.width, (width_));                                              \
		assert_int_equal(a_.v, (uint64_t)(v_));                                            \
	} while (0)

/* The answers one known pointer p gives to both calls alike (every attribute but the pointers,
 * the range, the mapping and P2P_TOKENS). */
static void expect_common(uint64_t p, unsigned mem_type, uint64_t pool)
{
	for (int pl = 0; pl < 2; pl++) {
		struct ans (*ask)(CUpointer_attribute, uint64_t) = pl ? plural : one;

		EXPECT(ask(CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS, 8, (uintptr_t)&mock_ctx);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS, 4, mem_type);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p), CUDA_SUCCESS, 8, p);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MAPPED, p), CUDA_SUCCESS, 4, 1);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p), CUDA_SUCCESS, 8, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p), CUDA_SUCCESS, 4,
		       CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE, p), CUDA_SUCCESS, 4, 0);
		if (pool)
			EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS, 8, pool);
		else
			EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS, 8, 0);
	}
}

/* ---- pointer attributes -------------------------------------------------------------------- */

/* Device memory: the host pointer is the one attribute without a value (issue 7 item 8: the
 * plural call failed on it, so cudaPointerGetAttributes did on every cudaMalloc pointer). */
static void test_device_memory(void **state)
{
	uint64_t p = small_addr + 256;

	(void)state;
	expect_common(small_addr, CU_MEMORYTYPE_DEVICE, 0);
	expect_common(p, CU_MEMORYTYPE_DEVICE, 0);
	expect_common(large_addr, CU_MEMORYTYPE_DEVICE, (uintptr_t)mock_pool);

	EXPECT(one(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_ERROR_INVALID_VALUE, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_SUCCESS, 8, 0);

	/* the range is the allocation, the mapping its slab (small) or its own (large) */
	EXPECT(one(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p), CUDA_SUCCESS, 8, small_addr);
	EXPECT(one(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS, 8, 1000);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS, 8, 1000);
	uint64_t slab = small_addr - (small_addr - WINDOW_BASE) % GRANULE;
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p), CUDA_SUCCESS, 8, slab);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p), CUDA_SUCCESS, 8, GRANULE);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p), CUDA_SUCCESS, 8, slab);
	EXPECT(one(CU_POINTER_ATTRIBUTE_RANGE_SIZE, large_addr + GRANULE), CUDA_SUCCESS, 8,
	       5ull << 20);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, large_addr + GRANULE), CUDA_SUCCESS, 8,
	       large_addr);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, large_addr + GRANULE), CUDA_SUCCESS, 8,
	       3 * GRANULE);
	EXPECT(one(CU_POINTER_ATTRIBUTE_BUFFER_ID, p), CUDA_SUCCESS, 8,
	       one(CU_POINTER_ATTRIBUTE_BUFFER_ID, small_addr).v);
	assert_int_not_equal(one(CU_POINTER_ATTRIBUTE_BUFFER_ID, small_addr).v,
			     one(CU_POINTER_ATTRIBUTE_BUFFER_ID, large_addr).v);

	/* P2P tokens exist on the server only: refused and logged once by name */
	EXPECT(one(CU_POINTER_ATTRIBUTE_P2P_TOKENS, p), CUDA_ERROR_NOT_SUPPORTED, 0, 0);
	EXPECT(one(CU_POINTER_ATTRIBUTE_P2P_TOKENS, p), CUDA_ERROR_NOT_SUPPORTED, 0, 0);
	assert_int_equal(
	    count_in_log("unimplemented: cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_P2P_TOKENS)"),
	    1);
}

/*
 * Memory the application mapped itself (cuMemCreate, cuMemMap): device memory of no context,
 * whose range, mapping and block are the mapping, with the access cuMemSetAccess gave the
 * current device and the export types it was made with.
 */
static void test_vmm_memory(void **state)
{
	uint64_t p = vmm_addr + GRANULE + 64;

	(void)state;
	for (int pl = 0; pl < 2; pl++) {
		struct ans (*ask)(CUpointer_attribute, uint64_t) = pl ? plural : one;

		EXPECT(ask(CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS, 8, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS, 4,
		       CU_MEMORYTYPE_DEVICE);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p), CUDA_SUCCESS, 8, p);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS, 4, 0);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p), CUDA_SUCCESS, 8, vmm_addr);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS, 8, 2 * GRANULE);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p), CUDA_SUCCESS, 8, vmm_addr);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p), CUDA_SUCCESS, 8, 2 * GRANULE);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p), CUDA_SUCCESS, 8, vmm_addr);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p), CUDA_SUCCESS, 8,
		       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p), CUDA_SUCCESS, 4,
		       CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MAPPED, p), CUDA_SUCCESS, 4, 1);
		EXPECT(ask(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS, 8, 0);
	}
	EXPECT(one(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_ERROR_INVALID_VALUE, 8, 0);
	/* reserved but not mapped: not device memory yet */
	EXPECT(one(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, vmm_resv + 64), CUDA_ERROR_INVALID_VALUE, 0,
	       0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, vmm_resv + 64), CUDA_SUCCESS, 4, 0);
}

/* The runtime's own question (cudaPointerGetAttributes asks these six at once). */
static void test_runtime_query(void **state)
{
	CUpointer_attribute as[6] = {
	    CU_POINTER_ATTRIBUTE_CONTEXT,	 CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	    CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
	    CU_POINTER_ATTRIBUTE_IS_MANAGED,	 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	CUcontext ctx;
	unsigned type, managed;
	CUdeviceptr dptr;
	void *hptr;
	int ord;
	void *data[6] = {&ctx, &type, &dptr, &hptr, &managed, &ord};
	uint64_t heap = (uint64_t)(uintptr_t)heap_buf, host = (uint64_t)(uintptr_t)host_buf + 64;

	(void)state;
	assert_int_equal(cuPointerGetAttributes(6, as, data, large_addr), CUDA_SUCCESS);
	assert_ptr_equal(ctx, (CUcontext)&mock_ctx);
	assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
	assert_int_equal(dptr, large_addr);
	assert_null(hptr);
	assert_int_equal(managed, 0);
	assert_int_equal(ord, 0);

	assert_int_equal(cuPointerGetAttributes(6, as, data, host), CUDA_SUCCESS);
	assert_int_equal(type, CU_MEMORYTYPE_HOST);
	assert_int_equal(dptr, host);
	assert_int_equal((uintptr_t)hptr, host);
	assert_int_equal(ord, 0);

	/* unknown memory: the "none" values, and the pointer itself as the host pointer */
	assert_int_equal(cuPointerGetAttributes(6, as, data, heap), CUDA_SUCCESS);
	assert_null(ctx);
	assert_int_equal(type, 0);
	assert_int_equal(dptr, 0);
	assert_int_equal((uintptr_t)hptr, heap);
	assert_int_equal(managed, 0);
	assert_int_equal(ord, -2);
}

static void test_host_memory(void **state)
{
	uint64_t p = (uint64_t)(uintptr_t)host_buf + 64;
	unsigned char b[32];

	(void)state;
	expect_common(p, CU_MEMORYTYPE_HOST, 0);
	EXPECT(one(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_SUCCESS, 8, p);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_SUCCESS, 8, p);
	EXPECT(one(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p), CUDA_SUCCESS, 8, p - 64);
	EXPECT(one(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS, 8, sizeof(host_buf));
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p), CUDA_SUCCESS, 8, p - 64);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p), CUDA_SUCCESS, 8, sizeof(host_buf));
	/* P2P tokens of host memory: both written as zero, then refused */
	memset(b, FILL, sizeof(b));
	assert_int_equal(cuPointerGetAttribute(b, CU_POINTER_ATTRIBUTE_P2P_TOKENS, p),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(width_of(b), 12);
	for (int i = 0; i < 12; i++)
		assert_int_equal(b[i], 0);
}

static void test_unknown_memory(void **state)
{
	uint64_t p = (uint64_t)(uintptr_t)heap_buf;

	(void)state;
	/* the single call refuses every attribute and writes nothing */
	for (int a = CU_POINTER_ATTRIBUTE_CONTEXT;
	     a <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE; a++) {
		EXPECT(one((CUpointer_attribute)a, p), CUDA_ERROR_INVALID_VALUE, 0, 0);
		EXPECT(one((CUpointer_attribute)a, 0), CUDA_ERROR_INVALID_VALUE, 0, 0);
	}
	/* the plural one writes the "none" values; the range it leaves as it was */
	EXPECT(plural(CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS, 4, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_SUCCESS, 8, p);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_HOST_POINTER, 0), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_SUCCESS, 4, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_BUFFER_ID, p), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_SUCCESS, 4, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS, 4, 0xfffffffe);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p), CUDA_SUCCESS, 0, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p), CUDA_SUCCESS, 0, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MAPPED, p), CUDA_SUCCESS, 4, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p), CUDA_SUCCESS, 4, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p), CUDA_SUCCESS, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p), CUDA_SUCCESS, 8, 0);
}

/* Without a current context only the device pointer is refused (the plural writes NULL). */
static void test_no_context(void **state)
{
	uint64_t host = (uint64_t)(uintptr_t)host_buf;

	(void)state;
	mock_current = NULL;
	EXPECT(one(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, small_addr), CUDA_ERROR_INVALID_CONTEXT, 8,
	       0);
	EXPECT(one(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, host), CUDA_ERROR_INVALID_CONTEXT, 8, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, small_addr), CUDA_SUCCESS, 8, 0);
	EXPECT(one(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, small_addr), CUDA_SUCCESS, 4,
	       CU_MEMORYTYPE_DEVICE);
	EXPECT(one(CU_POINTER_ATTRIBUTE_HOST_POINTER, host), CUDA_SUCCESS, 8, host);
	EXPECT(one(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (uint64_t)(uintptr_t)heap_buf),
	       CUDA_ERROR_INVALID_VALUE, 0, 0);
	mock_current = &mock_ctx;
}

static void test_errors(void **state)
{
	CUpointer_attribute as[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUpointer_attribute)1000};
	unsigned char b0[8], b1[8];
	void *data[2] = {b0, b1};
	const int bad[] = {0, 22, 1000, -1};

	(void)state;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT(one((CUpointer_attribute)bad[i], small_addr), CUDA_ERROR_INVALID_VALUE, 0,
		       0);
		EXPECT(plural((CUpointer_attribute)bad[i], small_addr), CUDA_ERROR_INVALID_VALUE, 0,
		       0);
		EXPECT(plural((CUpointer_attribute)bad[i], (uintptr_t)heap_buf),
		       CUDA_ERROR_INVALID_VALUE, 0, 0);
	}
	/* the plural call does not take P2P_TOKENS, whatever the memory */
	EXPECT(plural(CU_POINTER_ATTRIBUTE_P2P_TOKENS, small_addr), CUDA_ERROR_INVALID_VALUE, 0, 0);
	EXPECT(plural(CU_POINTER_ATTRIBUTE_P2P_TOKENS, (uintptr_t)host_buf),
	       CUDA_ERROR_INVALID_VALUE, 0, 0);
	/* in order: the good attribute before the bad one is written */
	memset(b0, FILL, sizeof(b0));
	memset(b1, FILL, sizeof(b1));
	assert_int_equal(cuPointerGetAttributes(2, as, data, small_addr), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(b0[0], CU_MEMORYTYPE_DEVICE);
	assert_int_equal(b1[0], FILL);
	/* no attribute, a NULL slot, NULL arrays, a NULL data pointer */
	assert_int_equal(cuPointerGetAttributes(0, as, data, small_addr), CUDA_ERROR_INVALID_VALUE);
	data[0] = NULL;
	assert_int_equal(cuPointerGetAttributes(2, as, data, small_addr), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttributes(1, NULL, data, small_addr),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttributes(1, as, NULL, small_addr), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, small_addr),
			 CUDA_ERROR_INVALID_VALUE);
	/* before cuInit */
	ip.initialized = 0;
	data[0] = b0;
	EXPECT(one(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, small_addr), CUDA_ERROR_NOT_INITIALIZED, 0, 0);
	assert_int_equal(cuPointerGetAttributes(1, as, data, small_addr),
			 CUDA_ERROR_NOT_INITIALIZED);
	ip.initialized = 1;
}

/* ---- profiler control ---------------------------------------------------------------------- */

static void test_profiler(void **state)
{
	CUdriverProcAddressQueryResult status;
	void *fn = NULL;

	(void)state;
	/* exported and served by cuGetProcAddress, as the strong definitions of profiler.c */
	assert_ptr_equal(ip_lookup_symbol("cuProfilerStart"), (void *)cuProfilerStart);
	assert_ptr_equal(ip_lookup_symbol("cuProfilerStop"), (void *)cuProfilerStop);
	assert_ptr_equal(ip_lookup_symbol("cuProfilerInitialize"), (void *)cuProfilerInitialize);
	assert_int_equal(cuGetProcAddress_v2("cuProfilerStart", &fn, 13000, 0, &status),
			 CUDA_SUCCESS);
	assert_int_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
	assert_ptr_equal(fn, (void *)cuProfilerStart);
	assert_int_equal(cuGetProcAddress_v2("cuProfilerStop", &fn, 4000, 0, &status),
			 CUDA_SUCCESS);
	assert_ptr_equal(fn, (void *)cuProfilerStop);
	assert_int_equal(cuGetProcAddress_v2("cuProfilerStop", &fn, 3990, 0, &status),
			 CUDA_SUCCESS);
	assert_int_equal(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

	/* start and stop succeed with a context, and say once that they are not forwarded */
	assert_int_equal(cuProfilerStart(), CUDA_SUCCESS);
	assert_int_equal(cuProfilerStart(), CUDA_SUCCESS);
	assert_int_equal(cuProfilerStop(), CUDA_SUCCESS);
	assert_int_equal(cuProfilerStop(), CUDA_SUCCESS);
	assert_int_equal(count_in_log("profiling control is not forwarded"), 1);
	assert_int_equal(count_in_log("unimplemented: cuProfiler"), 0);

	mock_current = NULL;
	assert_int_equal(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
	assert_int_equal(cuProfilerStop(), CUDA_ERROR_INVALID_CONTEXT);
	mock_current = &mock_ctx;
	ip.initialized = 0;
	assert_int_equal(cuProfilerStart(), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuProfilerStop(), CUDA_ERROR_NOT_INITIALIZED);
	ip.initialized = 1;

	/* deprecated: CUDA_ERROR_NOT_SUPPORTED always (cudaProfiler.h), without the warning */
	assert_int_equal(cuProfilerInitialize("cfg", "out", CU_OUT_CSV), CUDA_ERROR_NOT_SUPPORTED);
	mock_current = NULL;
	assert_int_equal(cuProfilerInitialize(NULL, NULL, CU_OUT_KEY_VALUE_PAIR),
			 CUDA_ERROR_NOT_SUPPORTED);
	mock_current = &mock_ctx;
	assert_int_equal(count_in_log("unimplemented: cuProfiler"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_memory),  cmocka_unit_test(test_vmm_memory),
	    cmocka_unit_test(test_runtime_query),  cmocka_unit_test(test_host_memory),
	    cmocka_unit_test(test_unknown_memory), cmocka_unit_test(test_no_context),
	    cmocka_unit_test(test_errors),	   cmocka_unit_test(test_profiler),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
