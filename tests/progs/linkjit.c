/*
 * JIT linking (issue 12, item 6): link_a.ptx (a kernel calling an extern device function) and
 * link_b.ptx (that function), both nvcc -rdc=true -ptx, linked with cuLinkCreate, cuLinkAddData
 * (link_a, read here) and cuLinkAddFile (link_b), with info and error log buffers, verbose
 * logging and the wall time; the linked image loaded twice and launched, results checked
 * against the CPU; an invalid input refused at cuLinkAddData with a non-empty error log. Every
 * line it prints is deterministic (tests/gpu/run.sh compares the native and rgpu runs).
 */
#include "common.h"

int main(void)
{
	const int n = 4096;
	char path_a[PATH_MAX], path_b[PATH_MAX], info[16384], err[16384];
	CUcontext ctx;
	CUdevice dev;
	CUlinkState st;
	CUmodule m1, m2;
	CUfunction f1, f2;
	CUdeviceptr x, y;
	size_t alen, size = 0;
	void *cubin = NULL;
	char *ptx_a;
	float *hx = malloc(n * 4), *hy = malloc(n * 4), *out = malloc(n * 4);
	int nn = n;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	ptx_a = read_file(next_to_exe("link_a.ptx", path_a, sizeof(path_a)), &alen);
	alen++; /* with its NUL, as PTX is given */
	next_to_exe("link_b.ptx", path_b, sizeof(path_b));

	CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
			      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
			      CU_JIT_LOG_VERBOSE, CU_JIT_WALL_TIME, CU_JIT_OPTIMIZATION_LEVEL};
	void *val[] = {info, (void *)(uintptr_t)sizeof(info), err, (void *)(uintptr_t)sizeof(err),
		       (void *)(uintptr_t)1, NULL, (void *)(uintptr_t)3};
	void *bad_val[7];
	CUlinkState bad;
	CUresult r;

	/*
	 * An invalid input fails at cuLinkAddData, with the driver's error log, and spoils the
	 * link state that took it: a valid input after it fails too (as the driver does).
	 */
	memcpy(bad_val, val, sizeof(val));
	CHECK(cuLinkCreate(7, opt, bad_val, &bad));
	const char junk[] = "this is neither PTX nor a cubin";
	err[0] = 0;
	r = cuLinkAddData(bad, CU_JIT_INPUT_PTX, (void *)junk, sizeof(junk), "junk.ptx", 0, NULL,
			  NULL);
	printf("junk input: %s, error log %s\n", cu_name(r), err[0] ? "non-empty" : "EMPTY");
	EXPECT(r != CUDA_SUCCESS && err[0], "junk input accepted (%s)", cu_name(r));
	r = cuLinkAddData(bad, CU_JIT_INPUT_CUBIN, (void *)junk, sizeof(junk), "junk.cubin", 0,
			  NULL, NULL);
	printf("junk cubin: %s\n", cu_name(r));
	EXPECT(r != CUDA_SUCCESS, "junk cubin accepted");
	r = cuLinkAddData(bad, CU_JIT_INPUT_PTX, ptx_a, alen, "link_a.ptx", 0, NULL, NULL);
	printf("a valid input after them: %s\n", cu_name(r));
	CHECK(cuLinkDestroy(bad));

	/* a file that is not there, in a link state of its own */
	memcpy(bad_val, val, sizeof(val));
	CHECK(cuLinkCreate(7, opt, bad_val, &bad));
	printf("missing file: %s\n",
	       cu_name(cuLinkAddFile(bad, CU_JIT_INPUT_PTX, "/nonexistent/x.ptx", 0, NULL, NULL)));
	CHECK(cuLinkDestroy(bad));

	info[0] = err[0] = 'X';
	CHECK(cuLinkCreate(7, opt, val, &st));
	CHECK(cuLinkAddData(st, CU_JIT_INPUT_PTX, ptx_a, alen, "link_a.ptx", 0, NULL, NULL));
	CHECK(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path_b, 0, NULL, NULL));
	CHECK(cuLinkComplete(st, &cubin, &size));
	float wall;
	memcpy(&wall, &val[5], sizeof(wall));
	printf("linked: image %s, info log %s, wall time %s\n", size > 0 && cubin ? "ok" : "EMPTY",
	       info[0] && info[0] != 'X' ? "non-empty" : "empty", wall >= 0.0f ? ">= 0" : "NEGATIVE");
	printf("info log size written: %s\n",
	       (uintptr_t)val[1] > 0 && (uintptr_t)val[1] <= sizeof(info) ? "in range" : "OUT OF RANGE");

	/* the image is the state's until cuLinkDestroy: load it twice */
	CHECK(cuModuleLoadData(&m1, cubin));
	CHECK(cuModuleLoadData(&m2, cubin));
	CHECK(cuLinkDestroy(st));
	CHECK(cuModuleGetFunction(&f1, m1, "link_saxpy"));
	CHECK(cuModuleGetFunction(&f2, m2, "link_saxpy"));
	for (int i = 0; i < n; i++) {
		hx[i] = (float)(i % 97);
		hy[i] = (float)(i % 13);
	}
	CHECK(cuMemAlloc(&x, n * 4));
	CHECK(cuMemAlloc(&y, n * 4));
	CHECK(cuMemcpyHtoD(x, hx, n * 4));
	CHECK(cuMemcpyHtoD(y, hy, n * 4));
	void *args[] = {&y, &x, &nn};
	CHECK(cuLaunchKernel(f1, n / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CHECK(cuLaunchKernel(f2, n / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(out, y, n * 4));
	for (int i = 0; i < n; i++) {
		float want = hy[i] + 2.0f * (3.0f * hx[i] + 1.0f);
		EXPECT(out[i] == want, "y[%d] = %f, want %f", i, out[i], want);
	}
	printf("two modules of one linked image: %d results ok\n", n);
	CHECK(cuModuleUnload(m1));
	CHECK(cuModuleUnload(m2));
	CHECK(cuMemFree(x));
	CHECK(cuMemFree(y));
	free(ptx_a);
	free(hx);
	free(hy);
	free(out);
	printf("linkjit: ok\n");
	return 0;
}
