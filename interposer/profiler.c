/*
 * Profiler control (cudaProfiler.h): cuProfilerStart, cuProfilerStop and the deprecated
 * cuProfilerInitialize, behind cudaProfilerStart/Stop.
 *
 * No profiling tool runs in the client (there is no GPU here to profile), and the calls are
 * not forwarded: profiling the server's work is the server operator's business, and a start
 * or stop from one job must not reach a profiler attached to the worker. So start and stop do
 * what the driver does when no tool is attached: nothing, after the checks it documents
 * (initialised, a current context), and say once, at info, that profiling control is not
 * forwarded. This file owns that one flag; it never sends a request.
 */
#include <stdatomic.h>

#include <cudaProfiler.h>

#include "ip.h"
#include "rgpu/log.h"

static atomic_int told;

/* profiler_control() - what cuProfilerStart and cuProfilerStop both do. */
static CUresult profiler_control(const char *name)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!atomic_exchange_explicit(&told, 1, memory_order_relaxed))
		pr_info("%s: profiling control is not forwarded to the server; no profiler runs "
			"on the client (start and stop succeed and do nothing)",
			name);
	return CUDA_SUCCESS;
}

/*
 * cuProfilerStart() - enable profile collection for the current context: nothing to enable.
 * Returns CUDA_SUCCESS; CUDA_ERROR_NOT_INITIALIZED before cuInit, the session's error once it
 * is dead, CUDA_ERROR_INVALID_CONTEXT without a current context (as documented, and measured
 * on driver 580.159.04).
 */
IP_API CUresult CUDAAPI cuProfilerStart(void)
{
	return profiler_control("cuProfilerStart");
}

/* cuProfilerStop() - disable profile collection: as cuProfilerStart. */
IP_API CUresult CUDAAPI cuProfilerStop(void)
{
	return profiler_control("cuProfilerStop");
}

/*
 * cuProfilerInitialize() - deprecated: since CUDA 12.0 the driver always returns
 * CUDA_ERROR_NOT_SUPPORTED (cudaProfiler.h; measured on driver 580.159.04, with and without a
 * current context). So does this one, without the "unimplemented" line: it is the answer.
 */
IP_API CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile,
					     CUoutput_mode outputMode)
{
	(void)configFile;
	(void)outputFile;
	(void)outputMode;
	return CUDA_ERROR_NOT_SUPPORTED;
}
