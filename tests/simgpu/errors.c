/*
 * cuGetErrorName and cuGetErrorString for every CUresult of cuda.h. The table is generated
 * from cuda.h by gen_errors.py at build time, so a new error code never goes unnamed. Both
 * calls work before cuInit, as the real driver's do.
 */
#include "sim.h"

static const struct {
	CUresult code;
	const char *name, *desc;
} errors[] = {
#include "errors_gen.h"
};

static int lookup(CUresult e)
{
	for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == e)
			return (int)i;
	return -1;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	int i;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	i = lookup(error);
	*pStr = i < 0 ? NULL : errors[i].name;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	int i;

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	i = lookup(error);
	*pStr = i < 0 ? NULL : errors[i].desc;
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
