/*
 * The executor's private header, shared only by the handler files (exec*.c) and window.c:
 * decoding a request, the device window's checks and mappings, and the few helpers that the
 * handlers of more than one area use.
 *
 * Every handler decodes its message, maps client ids to driver handles, calls the driver and,
 * for a synchronous call, replies. Fire-and-forget calls never reply: their failures are kept
 * (srv_async_error) and reported with the next reply, as CUDA reports asynchronous errors. A
 * message that does not decode ends the session with a protocol error. Every address and size
 * from the client is checked before it reaches the driver where the driver itself would not
 * refuse it safely.
 */
#ifndef SRV_EXEC_H
#define SRV_EXEC_H

#include <stdint.h>

#include <cuda.h>

#include "srv.h"

#define UNPACK(type, fn, f) rgpu__##fn##__unpack(NULL, (f)->hdr.body_len, (f)->body)

/* Decode or end the session. */
#define DECODE(var, Type, fn, w, f)                                                            \
	Rgpu__##Type *var = UNPACK(Type, fn, f);                                               \
	if (!var) {                                                                            \
		srv_protocol_error(w, RGPU_EPROTO, "undecodable %s", rgpu_msg_name((f)->hdr.type)); \
		return RGPU_EPROTO;                                                            \
	}

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

/* ---- helpers of more than one area ---------------------------------------------------- */

/* capturing() - is s being captured into a graph? (exec_graph.c) */
int capturing(struct srv_worker *w, CUstream s);

#define MAX_LAUNCH_ATTRS 32

struct launch_dims {
	uint32_t grid[3], block[3], shared_mem;
};

/*
 * build_config() - a CUlaunchConfig from the client's dimensions and raw CUlaunchAttribute
 * structs (exec_launch.c); attrs must hold MAX_LAUNCH_ATTRS entries.
 * CUDA_ERROR_INVALID_VALUE for a malformed attribute list, CUDA_ERROR_INVALID_HANDLE for an
 * unknown event id.
 */
CUresult build_config(struct srv_worker *w, const struct launch_dims *d,
		      const ProtobufCBinaryData *raw, CUstream s, CUlaunchConfig *cfg,
		      CUlaunchAttribute *attrs);

#endif
