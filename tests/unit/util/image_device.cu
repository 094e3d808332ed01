// Device half of image_kernels.cu (tests/unit/util/test_image.c): in the -rdc build it is its
// own translation unit, so the kernels' calls and variables resolve only at the device link.
__device__ unsigned img_scale = 3u;
__device__ unsigned long long img_total;
__constant__ unsigned short img_table[6] = {1, 2, 3, 65535, 5, 6};

__device__ unsigned img_weight(unsigned v)
{
	return v * img_scale + img_table[v % 6];
}
