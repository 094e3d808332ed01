/*
 * Refusals of rgpu's own, each of which must say so in the client's log ("every refusal
 * logs"): refusals.sh runs this through rgpu and checks the lines. Each case prints the result
 * it got; the script checks those too. Not run natively: there these calls succeed.
 *   1. cuMemPoolCreate of a pool of host memory: CUDA_ERROR_NOT_SUPPORTED
 *   2. cuCtxPushCurrent past 64 contexts on one thread: CUDA_ERROR_OUT_OF_MEMORY at the 64th
 *   3. cuLaunchKernelEx with 33 launch attributes: CUDA_ERROR_INVALID_VALUE
 *   4. cuMemAlloc larger than the server's device address window (refusals.sh gives it a
 *      window of 4 GiB): CUDA_ERROR_OUT_OF_MEMORY
 */
#include "../progs/common.h"

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction empty;
	CUresult r;
	int depth;

	/* 1 */
	CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.location = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0}};
	CUmemoryPool pool;
	r = cuMemPoolCreate(&pool, &props);
	printf("host pool: %s\n", cu_name(r));

	/* 2: the current context is depth 1 */
	for (depth = 1; depth < 100; depth++)
		if ((r = cuCtxPushCurrent(ctx)) != CUDA_SUCCESS)
			break;
	printf("push at depth %d: %s\n", depth, cu_name(r));
	for (int i = 1; i < depth; i++)
		CHECK(cuCtxPopCurrent(NULL));

	/* 3 */
	CUlaunchAttribute attrs[33];
	memset(attrs, 0, sizeof(attrs));
	for (int i = 0; i < 33; i++)
		attrs[i].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
			      .blockDimY = 1, .blockDimZ = 1, .attrs = attrs, .numAttrs = 33};
	CHECK(cuModuleGetFunction(&empty, mod, "empty_kernel"));
	r = cuLaunchKernelEx(&cfg, empty, NULL, NULL);
	printf("33 attributes: %s\n", cu_name(r));

	/* 4 */
	CUdeviceptr d;
	r = cuMemAlloc(&d, 5ull << 30);
	printf("5 GiB allocation: %s\n", cu_name(r));
	CHECK(cuCtxSynchronize());
	printf("refusals: done\n");
	return 0;
}
