/*
 * Stream and context attributes (issue 12, item 5): every stream attribute the issue lists set
 * and read back (access policy window, synchronisation policy, priority), on a stream and on
 * the NULL stream; context and function cache and shared-memory configuration; the stream
 * priority range; a kernel launched on a stream with an access policy window, its results
 * checked; the driver's codes for bad arguments. Every line it prints is deterministic, so the
 * native and rgpu runs print the same (tests/gpu/run.sh compares them).
 */
/* the shared-memory configuration calls are deprecated, and still part of the driver API */
#define CUDA_ENABLE_DEPRECATED 1
#include "common.h"

static void show(const char *what, CUresult r)
{
	printf("%s: %s\n", what, cu_name(r));
}

int main(void)
{
	const int n = 1 << 16;
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction add;
	CUstream s;
	CUstreamAttrValue v, got;
	CUdeviceptr a, b, c;
	CUfunc_cache cc;
	CUsharedconfig sc;
	int least = 1, greatest = 1, prio = 0, nn = n, maxwin = 0;
	float *ha = malloc(n * 4), *hb = malloc(n * 4), *hc = malloc(n * 4);
	CUdevice dev;

	CHECK(cuCtxGetDevice(&dev));
	CHECK(cuDeviceGetAttribute(&maxwin, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev));
	CHECK(cuModuleGetFunction(&add, mod, "vec_add"));
	CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
	printf("priority range: least %d greatest %d\n", least, greatest);
	CHECK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, least));

	/* defaults, as the driver reports them on a new stream */
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
	printf("default sync policy: %d\n", (int)got.syncPolicy);
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
	printf("default window: %llu bytes, hit ratio %.2f\n",
	       (unsigned long long)got.accessPolicyWindow.num_bytes,
	       got.accessPolicyWindow.hitRatio);

	/* synchronisation policy */
	memset(&v, 0, sizeof(v));
	v.syncPolicy = CU_SYNC_POLICY_BLOCKING_SYNC;
	CHECK(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
	printf("sync policy: %d\n", (int)got.syncPolicy);
	EXPECT(got.syncPolicy == CU_SYNC_POLICY_BLOCKING_SYNC, "sync policy %d", got.syncPolicy);

	/* priority: the attribute and cuStreamGetPriority agree */
	memset(&v, 0, sizeof(v));
	v.priority = greatest;
	CHECK(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &v));
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &got));
	CHECK(cuStreamGetPriority(s, &prio));
	printf("priority: attribute %d, cuStreamGetPriority %d\n", got.priority, prio);

	/* access policy window over the first input, then a launch on that stream */
	CHECK(cuMemAlloc(&a, n * 4));
	CHECK(cuMemAlloc(&b, n * 4));
	CHECK(cuMemAlloc(&c, n * 4));
	memset(&v, 0, sizeof(v));
	v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)a;
	v.accessPolicyWindow.num_bytes = (size_t)n * 4 < (size_t)maxwin ? (size_t)n * 4 : (size_t)maxwin;
	v.accessPolicyWindow.hitRatio = 0.5f;
	v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
	v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
	CHECK(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
	printf("window: base %s, %llu bytes, hit ratio %.2f, hit %d, miss %d\n",
	       got.accessPolicyWindow.base_ptr == (void *)(uintptr_t)a ? "ok" : "WRONG",
	       (unsigned long long)got.accessPolicyWindow.num_bytes,
	       got.accessPolicyWindow.hitRatio, (int)got.accessPolicyWindow.hitProp,
	       (int)got.accessPolicyWindow.missProp);
	EXPECT(got.accessPolicyWindow.base_ptr == (void *)(uintptr_t)a, "window base");
	for (int i = 0; i < n; i++) {
		ha[i] = (float)i;
		hb[i] = 2.0f * (float)i;
	}
	CHECK(cuMemcpyHtoD(a, ha, n * 4));
	CHECK(cuMemcpyHtoD(b, hb, n * 4));
	void *args[] = {&a, &b, &c, &nn};
	CHECK(cuLaunchKernel(add, n / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(hc, c, n * 4));
	for (int i = 0; i < n; i++)
		EXPECT(hc[i] == 3.0f * (float)i, "c[%d] = %f", i, hc[i]);
	printf("launch with window: %d results ok\n", n);

	/* the NULL stream takes attributes too */
	memset(&v, 0, sizeof(v));
	v.syncPolicy = CU_SYNC_POLICY_YIELD;
	show("NULL stream set sync policy", cuStreamSetAttribute(NULL, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
	memset(&got, 0, sizeof(got));
	show("NULL stream get sync policy",
	     cuStreamGetAttribute(NULL, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
	printf("NULL stream sync policy: %d\n", (int)got.syncPolicy);

	/* context and function configuration */
	CHECK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
	CHECK(cuCtxGetCacheConfig(&cc));
	printf("ctx cache config: %d\n", (int)cc);
	show("ctx set shared mem config", cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE));
	sc = (CUsharedconfig)-1;
	show("ctx get shared mem config", cuCtxGetSharedMemConfig(&sc));
	printf("ctx shared mem config: %d\n", (int)sc);
	CHECK(cuFuncSetCacheConfig(add, CU_FUNC_CACHE_PREFER_L1));
	show("func set shared mem config", cuFuncSetSharedMemConfig(add, CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE));
	CHECK(cuLaunchKernel(add, n / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	CHECK(cuStreamSynchronize(s));
	printf("launch after func config: ok\n");

	/* bad arguments: the driver's codes (a NULL value is not asked: the H200's driver crashes) */
	memset(&v, 0, sizeof(v));
	show("set attribute 2 (cooperative) on a stream",
	     cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
	show("get attribute 999", cuStreamGetAttribute(s, (CUstreamAttrID)999, &got));
	v.syncPolicy = (CUsynchronizationPolicy)77;
	show("set sync policy 77", cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
	memset(&v, 0, sizeof(v));
	v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)a;
	v.accessPolicyWindow.num_bytes = 4096;
	v.accessPolicyWindow.hitRatio = 2.0f;
	show("set window with hit ratio 2", cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
	show("ctx set cache config 9", cuCtxSetCacheConfig((CUfunc_cache)9));
	show("ctx get cache config NULL", cuCtxGetCacheConfig(NULL));
	show("func set cache config on NULL", cuFuncSetCacheConfig(NULL, CU_FUNC_CACHE_PREFER_L1));
	show("func set cache config 9", cuFuncSetCacheConfig(add, (CUfunc_cache)9));
	/* the earlier values survived the refused calls */
	memset(&got, 0, sizeof(got));
	CHECK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
	printf("sync policy after refusals: %d\n", (int)got.syncPolicy);
	CHECK(cuCtxGetCacheConfig(&cc));
	printf("ctx cache config after refusals: %d\n", (int)cc);

	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(a));
	CHECK(cuMemFree(b));
	CHECK(cuMemFree(c));
	CHECK(cuModuleUnload(mod));
	free(ha);
	free(hb);
	free(hc);
	printf("attrs: ok\n");
	return 0;
}
