// Kernels for the image-parsing tests (test_image.c). Built twice: as two -rdc translation
// units with a device link (image_device.cu apart: a version-2 wrapper, as nvcc -rdc=true and
// CMake's separable compilation make), and as one whole-program PTX file (IMAGE_WHOLE).
#ifdef IMAGE_WHOLE
#include "image_device.cu"
#else
extern __device__ unsigned img_scale;
extern __device__ unsigned long long img_total;
extern __constant__ unsigned short img_table[6];
extern __device__ unsigned img_weight(unsigned v);
#endif

struct img_pair {
	char c;
	double d;
};

// parameters: 8 @0, 4 @8, 16 @16 (a struct aligned to 8), 2 @32
__global__ void img_sum(const unsigned *v, int n, img_pair p, short tag)
{
	__shared__ unsigned long long part[128];
	unsigned long long s = 0;

	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += img_weight(v[i]) + (unsigned long long)p.d + p.c + tag;
	part[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int i = 1; i < 128; i++)
			s += part[i];
		atomicAdd(&img_total, s);
	}
}

// no parameters, no shared memory
__global__ void img_touch()
{
	img_scale += 1;
}
