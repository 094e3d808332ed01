/*
 * JIT options across the wire (MSG_LINK): which CUjit_option values a remote link may carry,
 * the one list both the interposer (which refuses the others, saying so) and the worker (which
 * never hands a client's value to its driver unless this says it is a plain number) use.
 */
#ifndef RGPU_JITOPT_H
#define RGPU_JITOPT_H

#include <cuda.h>

enum rgpu_jit_opt {
	RGPU_JIT_REFUSED = 0, /* a host pointer or array: cannot work remotely */
	RGPU_JIT_VALUE = 1,   /* a number in the slot, read by the driver */
	RGPU_JIT_OUT = 2,     /* a number the driver writes back into the slot */
	RGPU_JIT_LOG = 3,     /* a log buffer's pointer: the worker uses a buffer of its own */
};

/* rgpu_jit_opt_kind() - how option o crosses (enum rgpu_jit_opt). */
static inline int rgpu_jit_opt_kind(int o)
{
	switch (o) {
	case CU_JIT_WALL_TIME:			/* out: a float in the slot */
	case CU_JIT_THREADS_PER_BLOCK:		/* in and out */
	case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: /* in and out */
	case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
		return RGPU_JIT_OUT;
	case CU_JIT_INFO_LOG_BUFFER:
	case CU_JIT_ERROR_LOG_BUFFER:
		return RGPU_JIT_LOG;
	case CU_JIT_MAX_REGISTERS:
	case CU_JIT_OPTIMIZATION_LEVEL:
	case CU_JIT_TARGET_FROM_CUCONTEXT:
	case CU_JIT_TARGET:
	case CU_JIT_FALLBACK_STRATEGY:
	case CU_JIT_GENERATE_DEBUG_INFO:
	case CU_JIT_LOG_VERBOSE:
	case CU_JIT_GENERATE_LINE_INFO:
	case CU_JIT_CACHE_MODE:
	case CU_JIT_FAST_COMPILE:
	case CU_JIT_LTO:
	case CU_JIT_FTZ:
	case CU_JIT_PREC_DIV:
	case CU_JIT_PREC_SQRT:
	case CU_JIT_FMA:
	case CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES:
	case CU_JIT_POSITION_INDEPENDENT_CODE:
	case CU_JIT_MIN_CTA_PER_SM:
	case CU_JIT_MAX_THREADS_PER_BLOCK:
	case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
	case CU_JIT_SPLIT_COMPILE:
		return RGPU_JIT_VALUE;
	default: /* symbol and name arrays, internal options, unknown ones */
		return RGPU_JIT_REFUSED;
	}
}

#define RGPU_JIT_MAX_OPTIONS 64	       /* per cuLinkCreate or per input */
#define RGPU_JIT_MAX_INPUTS 1024       /* per link */
#define RGPU_JIT_MAX_LOG (4u << 20)    /* bytes of each log the worker keeps */

#endif
