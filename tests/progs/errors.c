/*
 * Errors: rgpu must return the codes the real driver returns, case by case. Each case runs in
 * its own child process (forked before cuInit), so a case on which the real driver crashes is
 * recorded as a crash instead of ending the test.
 *
 *   errors [--rgpu] [REF]  run every case, print "case code NAME", and check each against the
 *                          expectations below, or against REF, a native run's output
 *
 * Natively a crash is the driver's behaviour and is reported, not failed. With --rgpu (the
 * program runs through rgpu) nothing may crash: where the driver crashes on a garbage handle,
 * rgpu returns CUDA_ERROR_INVALID_HANDLE instead.
 */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

#define CRASHED (-1)

/* ---- the cases: each returns the code of the call under test ---------------------------- */

static CUmodule mod;
static CUfunction vec_add;
static CUdeviceptr d;
static char host[4096];

static void base_setup(void)
{
	CUcontext ctx;
	mod = setup(&ctx);
	CHECK(cuModuleGetFunction(&vec_add, mod, "vec_add"));
	CHECK(cuMemAlloc(&d, 1 << 20));
}

static int n4 = 4;
static void *args[] = {&d, &d, &d, &n4};

static CUresult c_alloc_before_init(void)
{
	CUdeviceptr p;
	return cuMemAlloc(&p, 16);
}
static CUresult c_count_before_init(void)
{
	int n;
	return cuDeviceGetCount(&n);
}
static CUresult c_htod_far(void)
{
	base_setup();
	return cuMemcpyHtoD(d + (64ull << 30), host, sizeof(host));
}
static CUresult c_dtoh_far(void)
{
	base_setup();
	return cuMemcpyDtoH(host, d + (64ull << 30), sizeof(host));
}
static CUresult c_memset_far(void)
{
	base_setup();
	return cuMemsetD8(d + (64ull << 30), 0, 16);
}
static CUresult c_htod_freed(void)
{
	CUdeviceptr g;
	base_setup();
	CHECK(cuMemAlloc(&g, 64 << 20));
	CHECK(cuMemFree(g));
	return cuMemcpyHtoD(g, host, sizeof(host));
}
static CUresult c_free_twice(void)
{
	CUdeviceptr g;
	base_setup();
	CHECK(cuMemAlloc(&g, 64 << 20));
	CHECK(cuMemFree(g));
	return cuMemFree(g);
}
static CUresult c_htod_null(void)
{
	base_setup();
	return cuMemcpyHtoD(0, host, sizeof(host));
}
static CUresult c_alloc_zero(void)
{
	CUdeviceptr g;
	base_setup();
	return cuMemAlloc(&g, 0);
}
static CUresult c_alloc_host_huge(void)
{
	void *p;
	base_setup();
	return cuMemAllocHost(&p, (size_t)-4096);
}
static CUresult c_free_null(void)
{
	base_setup();
	return cuMemFree(0);
}
static CUresult c_launch_garbage_handle(void)
{
	base_setup();
	return cuLaunchKernel((CUfunction)(uintptr_t)0x1234567, 1, 1, 1, 1, 1, 1, 0, NULL, args,
			      NULL);
}
static CUresult c_launch_null_handle(void)
{
	base_setup();
	return cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
}
static CUresult c_launch_block_too_big(void)
{
	base_setup();
	return cuLaunchKernel(vec_add, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL);
}
static CUresult c_launch_grid_zero(void)
{
	base_setup();
	return cuLaunchKernel(vec_add, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
}
static CUresult c_launch_no_params(void)
{
	base_setup();
	return cuLaunchKernel(vec_add, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}
static CUresult c_event_query_null(void)
{
	base_setup();
	return cuEventQuery(NULL);
}
static CUresult c_get_function_null_module(void)
{
	CUfunction f;
	base_setup();
	return cuModuleGetFunction(&f, NULL, "vec_add");
}
static CUresult c_get_function_missing(void)
{
	CUfunction f;
	base_setup();
	return cuModuleGetFunction(&f, mod, "no_such_kernel");
}
static CUresult c_device_get_99(void)
{
	CUdevice dev;
	CHECK(cuInit(0));
	return cuDeviceGet(&dev, 99);
}
static CUresult c_alloc_without_context(void)
{
	CUdeviceptr g;
	CHECK(cuInit(0));
	return cuMemAlloc(&g, 16);
}
static CUresult c_stream_wait_null_event(void)
{
	base_setup();
	return cuStreamWaitEvent(NULL, NULL, 0);
}
static CUresult c_param_info_past_end(void)
{
	size_t off, size;
	base_setup();
	return cuFuncGetParamInfo(vec_add, 4, &off, &size);
}
static CUresult c_elapsed_no_timing(void)
{
	CUevent a, b;
	float ms;
	base_setup();
	CHECK(cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&b, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventRecord(a, NULL));
	CHECK(cuEventRecord(b, NULL));
	CHECK(cuEventSynchronize(b));
	return cuEventElapsedTime(&ms, a, b);
}
static CUresult c_memsetd32_misaligned(void)
{
	base_setup();
	return cuMemsetD32(d + 2, 0, 16);
}
static CUresult c_primary_release_unretained(void)
{
	CHECK(cuInit(0));
	return cuDevicePrimaryCtxRelease(0);
}

struct errcase {
	const char *name;
	CUresult (*fn)(void);
	int expect;        /* the real driver's answer (CRASHED: it crashes; rgpu: INVALID_HANDLE) */
};

/* Expected codes: the real driver 580.159.04's answers, measured with this program natively. */
static const struct errcase cases[] = {
	{"alloc_before_init", c_alloc_before_init, CUDA_ERROR_NOT_INITIALIZED},
	{"count_before_init", c_count_before_init, CUDA_ERROR_NOT_INITIALIZED},
	{"htod_far", c_htod_far, CUDA_ERROR_INVALID_VALUE},
	{"dtoh_far", c_dtoh_far, CUDA_ERROR_INVALID_VALUE},
	{"memset_far", c_memset_far, CUDA_ERROR_INVALID_VALUE},
	{"htod_freed", c_htod_freed, CUDA_ERROR_INVALID_VALUE},
	{"free_twice", c_free_twice, CUDA_ERROR_INVALID_VALUE},
	{"htod_null", c_htod_null, CUDA_ERROR_INVALID_VALUE},
	{"alloc_zero", c_alloc_zero, CUDA_ERROR_INVALID_VALUE},
	{"alloc_host_huge", c_alloc_host_huge, CUDA_ERROR_OUT_OF_MEMORY},
	{"free_null", c_free_null, CUDA_SUCCESS},
	{"launch_garbage_handle", c_launch_garbage_handle, CRASHED},
	{"launch_null_handle", c_launch_null_handle, CUDA_ERROR_INVALID_HANDLE},
	{"launch_block_too_big", c_launch_block_too_big, CUDA_ERROR_INVALID_VALUE},
	{"launch_grid_zero", c_launch_grid_zero, CUDA_ERROR_INVALID_VALUE},
	{"launch_no_params", c_launch_no_params, CUDA_ERROR_INVALID_VALUE},
	{"event_query_null", c_event_query_null, CUDA_ERROR_INVALID_HANDLE},
	{"get_function_null_module", c_get_function_null_module, CUDA_ERROR_INVALID_HANDLE},
	{"get_function_missing", c_get_function_missing, CUDA_ERROR_NOT_FOUND},
	{"device_get_99", c_device_get_99, CUDA_ERROR_INVALID_DEVICE},
	{"alloc_without_context", c_alloc_without_context, CUDA_ERROR_INVALID_CONTEXT},
	{"stream_wait_null_event", c_stream_wait_null_event, CUDA_ERROR_INVALID_HANDLE},
	{"param_info_past_end", c_param_info_past_end, CUDA_ERROR_INVALID_VALUE},
	{"elapsed_no_timing", c_elapsed_no_timing, CUDA_ERROR_INVALID_HANDLE},
	{"memsetd32_misaligned", c_memsetd32_misaligned, CUDA_ERROR_INVALID_VALUE},
	{"primary_release_unretained", c_primary_release_unretained, CUDA_ERROR_INVALID_CONTEXT},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Run one case in a child; its code comes back through a pipe. */
static int run_case(const struct errcase *c)
{
	int fds[2], status, code = CRASHED;
	pid_t pid;
	if (pipe(fds))
		exit(2);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		int r = (int)c->fn();
		if (write(fds[1], &r, sizeof(r)) != sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &code, sizeof(code)) != sizeof(code))
		code = CRASHED;
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		code = CRASHED;
	return code;
}

/* A reference from a native run: "case code" lines. */
static int ref_code(const char *path, const char *name, int *code)
{
	char line[256], n[128];
	int c;
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %d", n, &c) == 2 && !strcmp(n, name)) {
			*code = c;
			fclose(f);
			return 1;
		}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	int through_rgpu = 0, failures = 0;
	const char *ref = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rgpu"))
			through_rgpu = 1;
		else
			ref = argv[i];
	}

	for (size_t i = 0; i < NCASES; i++) {
		const struct errcase *c = &cases[i];
		int got = run_case(c), want = c->expect;
		const char *how = "expected";
		if (ref && ref_code(ref, c->name, &want))
			how = "native";
		int ok;
		if (through_rgpu)
			/* never a crash; where the driver crashes, a clean INVALID_HANDLE */
			ok = want == CRASHED ? got == CUDA_ERROR_INVALID_HANDLE : got == want;
		else
			ok = got == want;
		printf("%s %d %s\n", c->name, got,
		       got == CRASHED ? "(crashed)" : cu_name((CUresult)got));
		if (!ok) {
			fprintf(stderr, "FAIL %s: got %d, want %d (%s)\n", c->name, got, want, how);
			failures++;
		}
	}
	if (failures) {
		fprintf(stderr, "errors: %d of %zu cases differ\n", failures, NCASES);
		return 1;
	}
	fprintf(stderr, "errors: %zu cases as the driver answers them\n", NCASES);
	return 0;
}
