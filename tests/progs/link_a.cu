// JIT-link test, first translation unit (tests/progs/linkjit.c): a kernel that calls a device
// function defined in link_b.cu. Built with nvcc -rdc=true -ptx.
extern __device__ float link_scale(float x);

extern "C" __global__ void link_saxpy(float *y, const float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = link_scale(x[i]) + y[i];
}
