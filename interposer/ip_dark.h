/*
 * The seam between the interposer's core and its emulation of the runtime's private export
 * tables (dark-api.md). The core implements the first group; dark.c, integrity.c and cls.c
 * implement the second. Unit tests of the dark part link a mock of the first group.
 */
#ifndef IP_DARK_H
#define IP_DARK_H

#include <stdint.h>

#include <cuda.h>

/* ---- provided by the core ---------------------------------------------------------------- */

/* ip_initialized() - non-zero once cuInit has succeeded. */
int ip_initialized(void);
/* ip_driver_version() - what cuDriverGetVersion reports (13000). Works before cuInit. */
int ip_driver_version(void);
/* ip_device_count() - devices of the session (0 before cuInit). */
int ip_device_count(void);
/* ip_device_uuid() - CUuuid bytes of device dev (as cuDeviceGetUuid_v2); NULL if no such. */
const CUuuid *ip_device_uuid(int dev);
/* ip_device_attr() - a cached attribute (as cuDeviceGetAttribute); 0 if unknown. */
int ip_device_attr(int dev, CUdevice_attribute attr);
/* ip_ctx_current() - the calling thread's current context, or NULL. */
CUcontext ip_ctx_current(void);
/* ip_ctx_uid() - the unique id cuCtxGetId reports for ctx; 0 for NULL or a dead handle. */
unsigned long long ip_ctx_uid(CUcontext ctx);
/* ip_ctx_alive() - ctx is a live context handle (a not-yet-retained primary counts). */
int ip_ctx_alive(CUcontext ctx);
/*
 * ip_primary_ctx_peek() - the primary context handle of dev without retaining it or making it
 * current (CUDART_INTERFACE[2]). CUDA_ERROR_INVALID_DEVICE for a bad ordinal;
 * CUDA_ERROR_NOT_INITIALIZED before cuInit.
 */
CUresult ip_primary_ctx_peek(CUdevice dev, CUcontext *out);
/*
 * ip_ctx_tpc_map() - the current context's device's TPC-to-vGPC and TPC-to-mTPC maps, one
 * byte per TPC, in two malloc'd arrays the caller frees (export table 1734dc26, slot 4), as
 * the worker's driver gives them. CUDA_ERROR_INVALID_CONTEXT without a current context.
 */
CUresult ip_ctx_tpc_map(unsigned char **vgpc, unsigned char **mtpc);

/* ---- provided by the dark part ------------------------------------------------------------ */

/*
 * ip_cls_teardown() - a context is being destroyed (cuCtxDestroy, cuDevicePrimaryCtxReset, or
 * the last cuDevicePrimaryCtxRelease): call each remaining context-local-storage destructor of
 * ctx, newest first, without holding any lock, then forget ctx's entries. Called by the core
 * before the teardown call returns.
 */
void ip_cls_teardown(CUcontext ctx);

#endif
