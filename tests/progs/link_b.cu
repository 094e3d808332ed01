// JIT-link test, second translation unit: the device function link_a.cu calls.
__device__ float link_scale(float x)
{
	return 3.0f * x + 1.0f;
}
