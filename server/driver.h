/*
 * The CUDA driver as the worker sees it: a table of function pointers resolved with dlsym from
 * libcuda.so.1 (or the file given with --driver, e.g. the simgpu test double). The worker never
 * links against a driver, so one rgpud binary serves real GPUs and simgpu alike.
 *
 * cuda.h's macros map each name to its current versioned symbol (cuMemAlloc -> cuMemAlloc_v2),
 * so the field names, the types and the dlsym names all follow the header.
 */
#ifndef SRV_DRIVER_H
#define SRV_DRIVER_H

#include <cuda.h>

#define DRV_FUNCS(X)                                                                           \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)  \
	X(cuDeviceGetUuid) X(cuDeviceTotalMem) X(cuDeviceGetAttribute)                         \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                               \
	X(cuDevicePrimaryCtxSetFlags) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent)        \
	X(cuCtxSynchronize) X(cuCtxSetLimit) X(cuCtxGetLimit)                                  \
	X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap)  \
	X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity) X(cuMemGetInfo)       \
	X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister) X(cuMemHostUnregister)         \
	X(cuMemHostGetDevicePointer) X(cuMemAlloc) X(cuMemFree) X(cuPointerGetAttribute)      \
	X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpy2DAsync)        \
	X(cuMemsetD8Async)                                                                     \
	X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async) X(cuMemsetD2D16Async)     \
	X(cuMemsetD2D32Async)                                                                  \
	X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal)      \
	X(cuModuleGetFunctionCount) X(cuModuleEnumerateFunctions) X(cuFuncGetName)             \
	X(cuFuncGetParamInfo) X(cuFuncGetAttribute) X(cuFuncSetAttribute)                      \
	X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuLibraryGetManaged)   \
	X(cuLibraryGetKernelCount) X(cuLibraryEnumerateKernels) X(cuKernelGetName)             \
	X(cuKernelGetParamInfo) X(cuKernelGetFunction) X(cuLibraryGetGlobal)                   \
	X(cuKernelGetAttribute) X(cuKernelSetAttribute)                                        \
	X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLaunchHostFunc) X(cuStreamCreateWithPriority) X(cuStreamDestroy) \
	X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent)                           \
	X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventRecordWithFlags)          \
	X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime)                            \
	X(cuGetErrorName) X(cuGetErrorString)                                                  \
	X(cuThreadExchangeStreamCaptureMode) X(cuStreamBeginCapture) X(cuStreamEndCapture)     \
	X(cuStreamIsCapturing) X(cuGraphCreate) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) \
	X(cuGraphUpload) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphGetNodes)                               \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)                                \
	X(cuOccupancyAvailableDynamicSMemPerBlock) X(cuOccupancyMaxActiveClusters)            \
	X(cuOccupancyMaxPotentialClusterSize) X(cuGetExportTable) X(cuTensorMapEncodeTiled)         \
	X(cuTensorMapEncodeIm2col) X(cuTensorMapEncodeIm2colWide) X(cuTensorMapReplaceAddress)    \
	X(cuStreamSetAttribute) X(cuStreamGetAttribute) X(cuCtxSetCacheConfig)                 \
	X(cuCtxGetCacheConfig) X(cuCtxSetSharedMemConfig) X(cuCtxGetSharedMemConfig)           \
	X(cuFuncSetCacheConfig) X(cuFuncSetSharedMemConfig) X(cuCtxGetStreamPriorityRange)     \
	X(cuLinkCreate) X(cuLinkAddData) X(cuLinkComplete) X(cuLinkDestroy)                   \
	X(cuArray3DCreate) X(cuArrayDestroy) X(cuMipmappedArrayCreate)                         \
	X(cuMipmappedArrayGetLevel) X(cuMipmappedArrayDestroy) X(cuMemcpy3DAsync)              \
	X(cuTexObjectCreate) X(cuTexObjectDestroy) X(cuSurfObjectCreate) X(cuSurfObjectDestroy) \
	X(cuStreamCreate) X(cuStreamGetCaptureInfo)                                            \
	X(cuStreamUpdateCaptureDependencies) X(cuGraphGetEdges) X(cuGraphNodeGetType)          \
	X(cuGraphAddEmptyNode) X(cuGraphAddChildGraphNode) X(cuGraphChildGraphNodeGetGraph)    \
	X(cuGraphAddEventRecordNode) X(cuGraphAddEventWaitNode) X(cuGraphAddDependencies)      \
	X(cuGraphRemoveDependencies) X(cuGraphDestroyNode) X(cuGraphClone)                     \
	X(cuGraphNodeFindInClone) X(cuGraphKernelNodeGetParams) X(cuGraphKernelNodeSetParams)  \
	X(cuGraphMemcpyNodeGetParams) X(cuGraphMemcpyNodeSetParams)                            \
	X(cuGraphMemsetNodeGetParams) X(cuGraphMemsetNodeSetParams) X(cuGraphHostNodeGetParams) \
	X(cuGraphHostNodeSetParams) X(cuGraphExecKernelNodeSetParams)                          \
	X(cuGraphExecMemcpyNodeSetParams) X(cuGraphExecMemsetNodeSetParams)                    \
	X(cuGraphExecHostNodeSetParams) X(cuGraphExecChildGraphNodeSetParams)                  \
	X(cuGraphExecEventRecordNodeSetEvent) X(cuGraphExecEventWaitNodeSetEvent)              \
	X(cuGraphEventRecordNodeSetEvent) X(cuGraphEventWaitNodeSetEvent)                      \
	X(cuGraphNodeSetEnabled) X(cuGraphExecUpdate) X(cuGraphDebugDotPrint)                  \
	X(cuGraphAddKernelNode) X(cuGraphAddMemcpyNode) X(cuGraphAddMemsetNode)                \
	X(cuGraphAddHostNode)

/*
 * Functions of newer drivers (CUDA 12.3 and later): NULL when the driver lacks them, and what
 * needs them is refused and logged (exec_gnode.c) rather than the worker refusing to start.
 */
#define DRV_OPT_FUNCS(X)                                                                       \
	X(cuStreamBeginCaptureToGraph) X(cuGraphConditionalHandleCreate) X(cuGraphAddNode)

struct srv_driver {
	void *dl;
	char path[256];
#define DRV_FIELD(fn) __typeof__(fn) *fn;
	DRV_FUNCS(DRV_FIELD)
	DRV_OPT_FUNCS(DRV_FIELD)
#undef DRV_FIELD
};

/*
 * srv_driver_load() - dlopen path (NULL: "libcuda.so.1") and resolve every function.
 * Returns 0, RGPU_ENOTFOUND (library missing) or RGPU_EUNSUPPORTED (a symbol missing; the
 * name is logged).
 */
int srv_driver_load(struct srv_driver *d, const char *path);

/* srv_cu_name() - "CUDA_ERROR_INVALID_VALUE" for logs, via the loaded driver when possible */
const char *srv_cu_name(const struct srv_driver *d, CUresult r);

#endif
