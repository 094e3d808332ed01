/* Error names and strings, answered locally from the tables generated from cuda.h. */
#include "ip.h"
#include "ip_entries.h"

IP_API CUresult CUDAAPI cuGetErrorName(CUresult err, const char **s)
{
	const char *n = ip_error_name(err);
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	*s = n;
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuGetErrorString(CUresult err, const char **s)
{
	const char *n = ip_error_string(err);
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	*s = n;
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
