// The device half of conf_kernels.cu: a __device__ function the kernels call and the
// __device__ variables they use. Builds with relocatable device code (CONF_SEPARATE: -rdc,
// CMake's CUDA_SEPARABLE_COMPILATION) compile it as its own translation unit, so the kernels'
// calls and the host's cudaMemcpyToSymbol reach across translation units and only the device
// link resolves them; every other build includes it into conf_kernels.cu.

// set by the host with cudaMemcpyToSymbol; read by conf_reduce through conf_weight()
__device__ unsigned conf_scale;
// accumulated by conf_reduce; zeroed with cudaMemcpyToSymbol, read with cudaMemcpyFromSymbol
__device__ unsigned long long conf_total;
// a table with an initialiser in the image: the host reads it back unchanged
__constant__ unsigned conf_table[4] = {0x9e3779b9u, 0x7f4a7c15u, 0xf39cc060u, 0x5ced1b2du};

// One saxpy element. __fmaf_rn, not a*x+y: every build (-G included) computes the same bits.
__device__ float conf_axpy(float a, float x, float y)
{
	return __fmaf_rn(a, x, y);
}

__device__ unsigned long long conf_weight(unsigned v)
{
	return (unsigned long long)v * conf_scale;
}
