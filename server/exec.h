/*
 * The executor's private header, shared only by the handler files (exec*.c): decoding a
 * request, and the few helpers that the handlers of more than one area use.
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

#include "rgpu/pbdecode.h"
#include "srv.h"

#define UNPACK(type, fn, f) RGPU_PB_UNPACK(rgpu__##fn, (f)->hdr.body_len, (f)->body)

/* Decode or end the session. */
#define DECODE(var, Type, fn, w, f)                                                            \
	Rgpu__##Type *var = UNPACK(Type, fn, f);                                               \
	if (!var) {                                                                            \
		srv_protocol_error(w, RGPU_EPROTO, "undecodable %s", rgpu_msg_name((f)->hdr.type)); \
		return RGPU_EPROTO;                                                            \
	}

/* ---- helpers of more than one area ------------------------------------------------------ */

/* srv_capturing() - is s being captured into a graph? (exec_graph.c) */
int srv_capturing(struct srv_worker *w, CUstream s);

#define MAX_LAUNCH_ATTRS 32

struct launch_dims {
	uint32_t grid[3], block[3], shared_mem;
};

/*
 * srv_build_config() - a CUlaunchConfig from the client's dimensions and raw CUlaunchAttribute
 * structs (exec_launch.c); attrs must hold MAX_LAUNCH_ATTRS entries.
 * CUDA_ERROR_INVALID_VALUE for a malformed attribute list, CUDA_ERROR_INVALID_HANDLE for an
 * unknown event id.
 */
CUresult srv_build_config(struct srv_worker *w, const struct launch_dims *d,
		      const ProtobufCBinaryData *raw, CUstream s, CUlaunchConfig *cfg,
		      CUlaunchAttribute *attrs);

#endif
