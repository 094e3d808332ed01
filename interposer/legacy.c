/*
 * Older versions of entry points whose signature did not change. Runtimes still ask for some
 * by their first version (cudart 13.0 resolves cuDevicePrimaryCtxRelease at 7000), and the
 * driver answers with the unversioned symbol, so these behave exactly as the current ones.
 * Versions whose signatures used 32-bit sizes or pointers stay unimplemented: no device address
 * in rgpu's window fits in 32 bits.
 */
#include "ip.h"

IP_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
}

IP_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

IP_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	return cuCtxDestroy_v2(ctx);
}

IP_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
	return cuCtxPushCurrent_v2(ctx);
}

IP_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
	return cuCtxPopCurrent_v2(pctx);
}

IP_API CUresult CUDAAPI cuStreamDestroy(CUstream s)
{
	return cuStreamDestroy_v2(s);
}

IP_API CUresult CUDAAPI cuEventDestroy(CUevent e)
{
	return cuEventDestroy_v2(e);
}

IP_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t size, unsigned int flags)
{
	return cuMemHostRegister_v2(p, size, flags);
}
