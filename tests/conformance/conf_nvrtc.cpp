// A kernel compiled at run time with NVRTC (libnvrtc.so, shared), with options, and run through
// the driver API, as JIT-compiling projects do (CuPy's RawKernel, Triton's launchers, ...):
//
// 1. compiled to PTX for compute_90 with -DCONF_MUL=3 and -lineinfo, loaded with
//    cuModuleLoadDataEx and JIT options (the driver on the server compiles it);
// 2. compiled to a cubin for sm_90 (nvrtcGetCUBIN), loaded with cuModuleLoadData.
//
// Each module's kernel scales a saxpy by CONF_MUL and counts its threads in a __device__
// variable read with cuModuleGetGlobal; results are checked bit for bit against the CPU.
// NVRTC itself runs here, on the client: it needs no GPU. simgpu runs the kernel through its
// C twin (tests/simgpu/kernels.c: conf_nvrtc_saxpy), so this program runs in CI too.
#include <cmath>
#include <vector>

#include <nvrtc.h>

#include "conf.h"

#define NVRTC(call)                                                                                \
	do {                                                                                       \
		nvrtcResult s_ = (call);                                                           \
		if (s_ != NVRTC_SUCCESS) {                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
				nvrtcGetErrorString(s_));                                          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static const char *const source = R"(
__device__ unsigned conf_nvrtc_count;

extern "C" __global__ void conf_nvrtc_saxpy(int n, float a, const float *x, float *y)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		y[i] = __fmaf_rn(a, x[i], y[i]) * CONF_MUL;
		atomicAdd(&conf_nvrtc_count, 1u);
	}
}
)";

// compile() - the program's PTX (cubin = false) or cubin; exits on a compile error, log shown.
static std::vector<char> compile(bool cubin)
{
	const char *opts_ptx[] = {"--gpu-architecture=compute_90", "-DCONF_MUL=3", "-lineinfo",
				  "--std=c++17"};
	const char *opts_cubin[] = {"--gpu-architecture=sm_90", "-DCONF_MUL=3", "--std=c++17",
				    "--use_fast_math"};
	nvrtcProgram prog;
	nvrtcResult r;
	size_t size = 0;

	NVRTC(nvrtcCreateProgram(&prog, source, "conf_nvrtc.cu", 0, NULL, NULL));
	r = cubin ? nvrtcCompileProgram(prog, 4, opts_cubin)
		  : nvrtcCompileProgram(prog, 4, opts_ptx);
	if (r != NVRTC_SUCCESS) {
		size_t n = 0;
		nvrtcGetProgramLogSize(prog, &n);
		std::vector<char> log(n + 1);
		nvrtcGetProgramLog(prog, log.data());
		fprintf(stderr, "FAIL: nvrtcCompileProgram: %s\n%s\n", nvrtcGetErrorString(r),
			log.data());
		exit(1);
	}
	if (cubin)
		NVRTC(nvrtcGetCUBINSize(prog, &size));
	else
		NVRTC(nvrtcGetPTXSize(prog, &size));
	std::vector<char> out(size);
	if (cubin)
		NVRTC(nvrtcGetCUBIN(prog, out.data()));
	else
		NVRTC(nvrtcGetPTX(prog, out.data()));
	NVRTC(nvrtcDestroyProgram(&prog));
	return out;
}

// run() - saxpy * CONF_MUL through mod's kernel; checks y and the thread count.
static uint64_t run(CUmodule mod, const char *what, int n)
{
	const float a = -0.6875f;
	std::vector<float> x(n), y(n), ref(n);
	CUfunction f;
	CUdeviceptr dx, dy, dcount;
	size_t count_size = 0;
	unsigned count = 12345;

	for (int i = 0; i < n; i++) {
		x[i] = (float)((i * 37) % 1024) * 0.0078125f;
		y[i] = (float)(i % 97) - 48.0f;
		ref[i] = fmaf(a, x[i], y[i]) * 3.0f;
	}
	CU(cuModuleGetFunction(&f, mod, "conf_nvrtc_saxpy"));
	CU(cuModuleGetGlobal(&dcount, &count_size, mod, "conf_nvrtc_count"));
	if (count_size != sizeof(unsigned))
		conf_fail("%s: conf_nvrtc_count is %zu bytes", what, count_size);
	CU(cuMemcpyHtoD(dcount, &count, sizeof(count))); // not zero: the kernel adds to it
	CU(cuMemAlloc(&dx, n * sizeof(float)));
	CU(cuMemAlloc(&dy, n * sizeof(float)));
	CU(cuMemcpyHtoD(dx, x.data(), n * sizeof(float)));
	CU(cuMemcpyHtoD(dy, y.data(), n * sizeof(float)));
	void *args[] = {&n, (void *)&a, &dx, &dy};
	CU(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CU(cuMemcpyDtoH(y.data(), dy, n * sizeof(float)));
	CU(cuMemcpyDtoH(&count, dcount, sizeof(count)));
	for (int i = 0, bad = 0; i < n && bad < 5; i++)
		if (memcmp(&y[i], &ref[i], sizeof(float)))
			conf_fail("%s: y[%d] = %.9g, want %.9g", what, i, y[i], ref[i]), bad++;
	if (count != 12345u + (unsigned)n)
		conf_fail("%s: conf_nvrtc_count = %u, want %u", what, count, 12345u + n);
	CU(cuMemFree(dx));
	CU(cuMemFree(dy));
	return conf_fnv(y.data(), n * sizeof(float));
}

int main()
{
	const int n = 20011;
	CUdevice dev;
	CUcontext ctx;
	CUmodule ptx_mod, cubin_mod;
	int major = 0, minor = 0;

	NVRTC(nvrtcVersion(&major, &minor));
	std::vector<char> ptx = compile(false), cubin = compile(true);
	if (ptx.empty() || !strstr(ptx.data(), ".entry conf_nvrtc_saxpy"))
		conf_fail("the PTX has no entry conf_nvrtc_saxpy");
	if (cubin.size() < 64 || memcmp(cubin.data(),
					"\x7f"
					"ELF",
					4))
		conf_fail("nvrtcGetCUBIN gave no ELF");

	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));

	// PTX with JIT options, as a JIT-compiling program passes them
	char info[4096] = "", error[4096] = "";
	CUjit_option opt[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_INFO_LOG_BUFFER,
			      CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
			      CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *val[] = {(void *)(uintptr_t)3, info, (void *)(uintptr_t)sizeof(info), error,
		       (void *)(uintptr_t)sizeof(error)};
	CUresult r = cuModuleLoadDataEx(&ptx_mod, ptx.data(), 5, opt, val);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "FAIL: cuModuleLoadDataEx(PTX): %d: %s\n", (int)r, error);
		return 1;
	}
	CU(cuModuleLoadData(&cubin_mod, cubin.data()));

	uint64_t h_ptx = run(ptx_mod, "PTX", n);
	uint64_t h_cubin = run(cubin_mod, "cubin", n);
	CU(cuModuleUnload(ptx_mod));
	CU(cuModuleUnload(cubin_mod));
	CU(cuDevicePrimaryCtxRelease(dev));
	return conf_result("nvrtc", "ptx=%016llx cubin=%016llx", (unsigned long long)h_ptx,
			   (unsigned long long)h_cubin);
}
