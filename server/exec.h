/*
 * The executor's private header, shared only by the handler files (exec*.c) and window.c:
 * the device window's checks and mappings that the handlers of several areas use.
 */
#ifndef SRV_EXEC_H
#define SRV_EXEC_H

#include <stdint.h>

#include <cuda.h>

#include "srv.h"

/* ---- the device window and its mappings (window.c) ------------------------------------- */

/* in_window() - does [addr, addr+size) lie in the window (and size > 0)? */
int in_window(struct srv_worker *w, uint64_t addr, uint64_t size);
/*
 * dev_range_ok() - may the client name [addr, addr+size) as device memory: the window, or a
 * module global it has looked up?
 */
int dev_range_ok(struct srv_worker *w, uint64_t addr, uint64_t size);
/* remember_global() - the client has looked up the global [addr, addr+size): it may name it */
void remember_global(struct srv_worker *w, uint64_t addr, uint64_t size);
/*
 * map_range() - back [addr, addr+size) of the window with memory of device; both granule
 * aligned, not overlapping a live mapping. CUDA_ERROR_INVALID_VALUE for a bad range, else the
 * driver's error.
 */
CUresult map_range(struct srv_worker *w, uint64_t addr, uint64_t size, int device);
/*
 * unmap_range() - release the mapping that is exactly [addr, addr+size), after the current
 * context's pending work; CUDA_ERROR_INVALID_VALUE when there is no such mapping.
 */
CUresult unmap_range(struct srv_worker *w, uint64_t addr, uint64_t size);

#endif
