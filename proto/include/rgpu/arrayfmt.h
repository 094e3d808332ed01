/*
 * CUDA array formats across the wire: the bytes of one channel of each format rgpu carries, the
 * one table the interposer (which refuses the others, saying so) and the worker (which checks a
 * client's descriptor before its driver sees it) use. 0: a format rgpu does not carry (planar,
 * block-compressed, packed).
 */
#ifndef RGPU_ARRAYFMT_H
#define RGPU_ARRAYFMT_H

#include <cuda.h>

/* rgpu_array_format_bytes() - the bytes of one channel of format f, or 0. */
static inline unsigned rgpu_array_format_bytes(unsigned f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 0;
	}
}

#endif
