/*
 * Images produced by nvJitLink (issue 12, item 6): link_a.ptx (a kernel calling an extern device
 * function) and link_b.ptx (that function) linked in this process by libnvJitLink for the
 * device's architecture, the cubin loaded with cuModuleLoadData and launched, results checked
 * against the CPU. The link happens on the client; rgpu sees an ordinary cubin. Every line it
 * prints is deterministic (tests/gpu/run.sh compares the native and rgpu runs).
 */
#include <nvJitLink.h>

#include "common.h"

#define NVJ(call)                                                                              \
	do {                                                                                   \
		nvJitLinkResult r_ = (call);                                                   \
		EXPECT(r_ == NVJITLINK_SUCCESS, "%s: nvJitLink error %d", #call, (int)r_);     \
	} while (0)

int main(void)
{
	const int n = 4096;
	char path_a[PATH_MAX], path_b[PATH_MAX], arch[32];
	const char *opts[] = {arch, "-O3"};
	int major = 0, minor = 0, nn = n;
	float *hx = malloc(n * 4), *hy = malloc(n * 4), *out = malloc(n * 4);
	nvJitLinkHandle h;
	size_t alen, cubin_size = 0;
	CUcontext ctx;
	CUdevice dev;
	CUmodule m;
	CUfunction f;
	CUdeviceptr x, y;
	char *ptx_a, *cubin;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	snprintf(arch, sizeof(arch), "-arch=sm_%d%d", major, minor);
	ptx_a = read_file(next_to_exe("link_a.ptx", path_a, sizeof(path_a)), &alen);
	next_to_exe("link_b.ptx", path_b, sizeof(path_b));

	NVJ(nvJitLinkCreate(&h, 2, opts));
	NVJ(nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx_a, alen, "link_a.ptx"));
	NVJ(nvJitLinkAddFile(h, NVJITLINK_INPUT_PTX, path_b));
	NVJ(nvJitLinkComplete(h));
	NVJ(nvJitLinkGetLinkedCubinSize(h, &cubin_size));
	cubin = malloc(cubin_size);
	EXPECT(cubin != NULL, "out of memory");
	NVJ(nvJitLinkGetLinkedCubin(h, cubin));
	NVJ(nvJitLinkDestroy(&h));
	printf("nvJitLink: linked a cubin for the device's architecture: %s\n",
	       cubin_size > 0 && memcmp(cubin, "\177ELF", 4) == 0 ? "an ELF image" : "NOT ELF");

	CHECK(cuModuleLoadData(&m, cubin));
	CHECK(cuModuleGetFunction(&f, m, "link_saxpy"));
	for (int i = 0; i < n; i++) {
		hx[i] = (float)(i % 89);
		hy[i] = (float)(i % 7);
	}
	CHECK(cuMemAlloc(&x, n * 4));
	CHECK(cuMemAlloc(&y, n * 4));
	CHECK(cuMemcpyHtoD(x, hx, n * 4));
	CHECK(cuMemcpyHtoD(y, hy, n * 4));
	void *args[] = {&y, &x, &nn};
	CHECK(cuLaunchKernel(f, n / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(out, y, n * 4));
	for (int i = 0; i < n; i++) {
		float want = hy[i] + (3.0f * hx[i] + 1.0f);
		EXPECT(out[i] == want, "y[%d] = %f, want %f", i, out[i], want);
	}
	printf("the linked kernel: %d results ok\n", n);
	CHECK(cuModuleUnload(m));
	CHECK(cuMemFree(x));
	CHECK(cuMemFree(y));
	free(cubin);
	free(ptx_a);
	free(hx);
	free(hy);
	free(out);
	printf("nvjitlink: ok\n");
	return 0;
}
