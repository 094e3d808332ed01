/*
 * Driver initialisation and the devices simgpu pretends to have: count, names, UUIDs, PCI
 * identity, total memory and every CUdevice_attribute, with H200-like values so that code
 * choosing launch shapes or checking capabilities behaves as it would on the real GPU.
 *
 * Owns the global configuration (SIMGPU_DEVICES, SIMGPU_MEM_BYTES, SIMGPU_LOG) and the memory
 * accounting per device. The memory is only a number: host memory backs whatever is created,
 * and allocations fail with CUDA_ERROR_OUT_OF_MEMORY once the accounted total is reached.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu/util.h"
#include "sim.h"

struct sim_state sim;
pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t mem_used[SIM_MAX_DEVICES];

#define DEFAULT_MEM (16ull << 30)
#define PCI_BUS_BASE 0x1b

static void init(void)
{
	const char *s = getenv("SIMGPU_DEVICES");
	uint64_t v;

	sim.ndev = 1;
	if (s && *s) {
		long n = strtol(s, NULL, 10);
		sim.ndev = n < 1 ? 1 : n > SIM_MAX_DEVICES ? SIM_MAX_DEVICES : (int)n;
	}
	sim.mem_total = DEFAULT_MEM;
	s = getenv("SIMGPU_MEM_BYTES");
	if (s && *s && rgpu_parse_size(s, &v) == 0 && v >= SIM_GRANULE)
		sim.mem_total = v;
	s = getenv("SIMGPU_LOG");
	sim.log = s && *s && *s != '0';
	/*
	 * simgpu's own diagnostics are not the program's output: they keep the stderr cuInit
	 * found, which rgpud's worker turns into the program's later (server/stdio.c).
	 */
	if (sim.log) {
		int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
		sim.logf = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (sim.logf)
			setvbuf(sim.logf, NULL, _IOLBF, 0);
		else
			sim.logf = stderr;
	}
	sim_ctx_init_primaries();
	sim_log("%d device(s), %llu bytes each", sim.ndev, (unsigned long long)sim.mem_total);
	__atomic_store_n(&sim.inited, 1, __ATOMIC_RELEASE);
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_once(&init_once, init);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

/* sim_dev_valid() - whether dev is the ordinal of a simulated device. */
bool sim_dev_valid(CUdevice dev)
{
	return dev >= 0 && dev < sim.ndev;
}

/*
 * sim_mem_charge() - account bytes of device memory on dev.
 * Returns CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY (nothing charged).
 */
CUresult sim_mem_charge(int dev, uint64_t bytes)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&acct_lock);
	if (bytes > sim.mem_total - mem_used[dev])
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else
		mem_used[dev] += bytes;
	pthread_mutex_unlock(&acct_lock);
	return r;
}

/* sim_mem_uncharge() - give back bytes accounted with sim_mem_charge(). */
void sim_mem_uncharge(int dev, uint64_t bytes)
{
	pthread_mutex_lock(&acct_lock);
	mem_used[dev] -= MIN(bytes, mem_used[dev]);
	pthread_mutex_unlock(&acct_lock);
}

/* sim_mem_used() - bytes of device memory accounted on dev. */
uint64_t sim_mem_used(int dev)
{
	uint64_t v;

	pthread_mutex_lock(&acct_lock);
	v = mem_used[dev];
	pthread_mutex_unlock(&acct_lock);
	return v;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	SIM_ENTER();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sim.ndev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	SIM_ENTER();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	SIM_ENTER();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "rgpu simgpu");
	return CUDA_SUCCESS;
}

/* "rgpu-simgpu" followed by the device ordinal: recognisable in any UUID dump. */
static CUresult uuid(CUuuid *u, CUdevice dev)
{
	static const char tag[] = "rgpu-simgpu\0\0\0\0";

	SIM_ENTER();
	if (!u)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(u->bytes, tag, 16);
	u->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *u, CUdevice dev)
{
	return uuid(u, dev);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *u, CUdevice dev)
{
	return uuid(u, dev);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	SIM_ENTER();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = sim.mem_total;
	return CUDA_SUCCESS;
}

/*
 * Attribute values of one H200 SXM as the 580 driver reports them, where simgpu can honour
 * them; features simgpu does not implement (multicast, fabric handles, host-located VMM) say 0.
 * The PCI bus and the multi-GPU group depend on the device and are filled in below.
 */
struct attr {
	bool set;
	int v;
};
#define A(name, val) [CU_DEVICE_ATTRIBUTE_##name] = {true, (val)}
static const struct attr attrs[CU_DEVICE_ATTRIBUTE_MAX] = {
    A(MAX_THREADS_PER_BLOCK, 1024),
    A(MAX_BLOCK_DIM_X, 1024),
    A(MAX_BLOCK_DIM_Y, 1024),
    A(MAX_BLOCK_DIM_Z, 64),
    A(MAX_GRID_DIM_X, INT_MAX),
    A(MAX_GRID_DIM_Y, 65535),
    A(MAX_GRID_DIM_Z, 65535),
    A(MAX_SHARED_MEMORY_PER_BLOCK, 48 << 10),
    A(TOTAL_CONSTANT_MEMORY, 64 << 10),
    A(WARP_SIZE, 32),
    A(MAX_PITCH, INT_MAX),
    A(MAX_REGISTERS_PER_BLOCK, 65536),
    A(CLOCK_RATE, 1980000),
    A(TEXTURE_ALIGNMENT, 512),
    A(GPU_OVERLAP, 1),
    A(MULTIPROCESSOR_COUNT, 132),
    A(KERNEL_EXEC_TIMEOUT, 0),
    A(INTEGRATED, 0),
    A(CAN_MAP_HOST_MEMORY, 1),
    A(COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT),
    A(MAXIMUM_TEXTURE1D_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_HEIGHT, 65536),
    A(MAXIMUM_TEXTURE3D_WIDTH, 16384),
    A(MAXIMUM_TEXTURE3D_HEIGHT, 16384),
    A(MAXIMUM_TEXTURE3D_DEPTH, 16384),
    A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048),
    A(SURFACE_ALIGNMENT, 512),
    A(CONCURRENT_KERNELS, 1),
    A(ECC_ENABLED, 1),
    A(PCI_BUS_ID, PCI_BUS_BASE),
    A(PCI_DEVICE_ID, 0),
    A(TCC_DRIVER, 0),
    A(MEMORY_CLOCK_RATE, 2619000),
    A(GLOBAL_MEMORY_BUS_WIDTH, 6144),
    A(L2_CACHE_SIZE, 50 << 20),
    A(MAX_THREADS_PER_MULTIPROCESSOR, 2048),
    A(ASYNC_ENGINE_COUNT, 5),
    A(UNIFIED_ADDRESSING, 1),
    A(MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048),
    A(CAN_TEX2D_GATHER, 1),
    A(MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768),
    A(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192),
    A(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192),
    A(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768),
    A(PCI_DOMAIN_ID, 0),
    A(TEXTURE_PITCH_ALIGNMENT, 32),
    A(MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768),
    A(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_SURFACE1D_WIDTH, 32768),
    A(MAXIMUM_SURFACE2D_WIDTH, 131072),
    A(MAXIMUM_SURFACE2D_HEIGHT, 65536),
    A(MAXIMUM_SURFACE3D_WIDTH, 16384),
    A(MAXIMUM_SURFACE3D_HEIGHT, 16384),
    A(MAXIMUM_SURFACE3D_DEPTH, 16384),
    A(MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768),
    A(MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048),
    A(MAXIMUM_SURFACECUBEMAP_WIDTH, 32768),
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768),
    A(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046),
    A(MAXIMUM_TEXTURE1D_LINEAR_WIDTH, 268435456),
    A(MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072),
    A(MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000),
    A(MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120),
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768),
    A(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768),
    A(COMPUTE_CAPABILITY_MAJOR, SIM_SM / 10),
    A(COMPUTE_CAPABILITY_MINOR, SIM_SM % 10),
    A(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768),
    A(STREAM_PRIORITIES_SUPPORTED, 1),
    A(GLOBAL_L1_CACHE_SUPPORTED, 1),
    A(LOCAL_L1_CACHE_SUPPORTED, 1),
    A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 << 10),
    A(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
    A(MANAGED_MEMORY, 1),
    A(MULTI_GPU_BOARD, 0),
    A(MULTI_GPU_BOARD_GROUP_ID, 0),
    A(HOST_NATIVE_ATOMIC_SUPPORTED, 0),
    A(SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2),
    A(PAGEABLE_MEMORY_ACCESS, 0),
    A(CONCURRENT_MANAGED_ACCESS, 1),
    A(COMPUTE_PREEMPTION_SUPPORTED, 1),
    A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1),
    A(CAN_USE_STREAM_MEM_OPS_V1, 0),
    A(CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 0),
    A(CAN_USE_STREAM_WAIT_VALUE_NOR_V1, 0),
    A(COOPERATIVE_LAUNCH, 1),
    A(COOPERATIVE_MULTI_DEVICE_LAUNCH, 0),
    A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 << 10),
    A(CAN_FLUSH_REMOTE_WRITES, 0),
    A(HOST_REGISTER_SUPPORTED, 1),
    A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0),
    A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0),
    A(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1),
    A(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1),
    A(HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, 0),
    A(HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0),
    A(MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
    A(GENERIC_COMPRESSION_SUPPORTED, 0),
    A(MAX_PERSISTING_L2_CACHE_SIZE, 32505856),
    A(MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632),
    A(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 1),
    A(RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
    A(SPARSE_CUDA_ARRAY_SUPPORTED, 1),
    A(READ_ONLY_HOST_REGISTER_SUPPORTED, 1),
    A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1),
    A(MEMORY_POOLS_SUPPORTED, 1),
    A(GPU_DIRECT_RDMA_SUPPORTED, 1),
    A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST),
    A(GPU_DIRECT_RDMA_WRITES_ORDERING, CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER),
    A(MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
    A(CLUSTER_LAUNCH, 1),
    A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1),
    A(CAN_USE_64_BIT_STREAM_MEM_OPS, 1),
    A(CAN_USE_STREAM_WAIT_VALUE_NOR, 1),
    A(DMA_BUF_SUPPORTED, 1),
    A(IPC_EVENT_SUPPORTED, 1),
    A(MEM_SYNC_DOMAIN_COUNT, 4),
    A(TENSOR_MAP_ACCESS_SUPPORTED, 1),
    A(HANDLE_TYPE_FABRIC_SUPPORTED, 0),
    A(UNIFIED_FUNCTION_POINTERS, 1),
    A(NUMA_CONFIG, CU_DEVICE_NUMA_CONFIG_NONE),
    A(NUMA_ID, -1),
    A(MULTICAST_SUPPORTED, 0),
    A(MPS_ENABLED, 0),
    A(HOST_NUMA_ID, 0),
    A(D3D12_CIG_SUPPORTED, 0),
    A(MEM_DECOMPRESS_ALGORITHM_MASK, 0),
    A(MEM_DECOMPRESS_MAXIMUM_LENGTH, 0),
    A(VULKAN_CIG_SUPPORTED, 0),
    A(GPU_PCI_DEVICE_ID, 0x233510de), /* H200 (0x2335), NVIDIA (0x10de) */
    A(GPU_PCI_SUBSYSTEM_ID, 0x18be10de),
    A(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
    A(HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0),
    A(HOST_NUMA_MULTINODE_IPC_SUPPORTED, 0),
    A(HOST_MEMORY_POOLS_SUPPORTED, 0),
    A(HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
    A(HOST_ALLOC_DMA_BUF_SUPPORTED, 1),
    A(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0),
};
#undef A

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	SIM_ENTER();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if ((unsigned)attrib >= CU_DEVICE_ATTRIBUTE_MAX || !attrs[attrib].set)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		*pi = PCI_BUS_BASE + dev;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
		*pi = dev;
		break;
	default:
		*pi = attrs[attrib].v;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	SIM_ENTER();
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0, PCI_BUS_BASE + dev, 0);
	return CUDA_SUCCESS;
}

/* Accepts domain:bus:device.function, domain:bus:device and bus:device.function (hex). */
CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	unsigned a, b, c, d;
	unsigned domain, bus, device;
	int n;

	SIM_ENTER();
	if (!dev || !pciBusId)
		return CUDA_ERROR_INVALID_VALUE;
	if (sscanf(pciBusId, "%x:%x:%x.%x%n", &a, &b, &c, &d, &n) == 4 && !pciBusId[n]) {
		domain = a, bus = b, device = c;
	} else if (sscanf(pciBusId, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && !pciBusId[n]) {
		domain = a, bus = b, device = c;
	} else if (sscanf(pciBusId, "%x:%x.%x%n", &a, &b, &c, &n) == 3 && !pciBusId[n]) {
		domain = 0, bus = a, device = b;
	} else {
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < sim.ndev; i++) {
		if (domain == 0 && bus == (unsigned)(PCI_BUS_BASE + i) && device == 0) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}
