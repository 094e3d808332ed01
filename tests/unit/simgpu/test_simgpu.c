/*
 * simgpu, the host-memory driver double, against the real nvcc-built kernels of
 * tests/progs/kernels.cu: image parsing (cubin, fatbin, Zstd fatbin, PTX, wrapper), exact
 * parameter layouts, kernel results, stream and event ordering, legacy NULL-stream
 * synchronisation, host functions, VMM at a fixed address, module globals, graphs.
 *
 * The expected parameter layouts are those of the sm_90 cubin's EIATTR_KPARAM_INFO records
 * (decoded from the raw .nv.info.<kernel> sections; they agree with EIATTR_CBANK_PARAM_SIZE:
 * vec_add 0x1c, mixed_params 0xfe8).
 */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cuda.h>

#include "rgpu/window.h"

#define CU(call) assert_int_equal((call), CUDA_SUCCESS)

static CUcontext g_ctx;
static CUmodule g_mod; /* kernels.cubin */
static void *g_images[4];
static const char *const g_paths[4] = {KERNELS_CUBIN, KERNELS_FATBIN, KERNELS_ZSTD_FATBIN,
				       KERNELS_PTX};

static size_t g_sizes[4];

static void *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf) {
		buf[n] = '\0'; /* PTX is text */
		*size = (size_t)n;
	}
	fclose(f);
	return buf;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static CUfunction func(const char *name)
{
	CUfunction f = NULL;

	CU(cuModuleGetFunction(&f, g_mod, name));
	return f;
}

static void launch1(CUfunction f, unsigned grid, unsigned block, CUstream s, void **args)
{
	CU(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL));
}

static void spin(CUstream s, unsigned long long ns)
{
	void *args[] = {&ns};

	launch1(func("spin_ns"), 1, 1, s, args);
}

static void fill(CUstream s, CUdeviceptr x, unsigned seed, unsigned long long n)
{
	void *args[] = {&x, &seed, &n};

	launch1(func("fill_u32"), 64, 256, s, args);
}

static unsigned fill_value(unsigned seed, unsigned long long i)
{
	return seed ^ (unsigned)(i * 2654435761u);
}

/* --- before cuInit -------------------------------------------------------------------- */

static void test_before_init(void **state)
{
	CUdeviceptr d;
	const char *s = NULL;
	int n, v = 0;

	(void)state;
	assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	assert_int_equal(cuMemAlloc(&d, 16), CUDA_ERROR_NOT_INITIALIZED);
	CU(cuDriverGetVersion(&v));
	assert_int_equal(v, 13000);
	CU(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s));
	assert_string_equal(s, "CUDA_ERROR_NOT_INITIALIZED");
	assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

/* --- devices, errors ------------------------------------------------------------------ */

static void test_device(void **state)
{
	static const struct {
		CUdevice_attribute a;
		int v;
	} want[] = {
	    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
	    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
	    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
	    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
	    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
	    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
	    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
	    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
	    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
	    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
	    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
	    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
	    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
	    {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
	    {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x1b},
	    {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
	};
	char name[64], bus[32];
	CUdevice dev, back;
	CUuuid u;
	size_t total;
	int n, v;

	(void)state;
	CU(cuDeviceGetCount(&n));
	assert_int_equal(n, 1);
	CU(cuDeviceGet(&dev, 0));
	assert_int_equal(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
	CU(cuDeviceGetName(name, sizeof(name), dev));
	assert_string_equal(name, "rgpu simgpu");
	CU(cuDeviceTotalMem(&total, dev));
	assert_int_equal(total, 16ull << 30);
	CU(cuDeviceGetUuid_v2(&u, dev));
	assert_memory_equal(u.bytes, "rgpu-simgpu", 11);
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
		CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
		if (r != CUDA_SUCCESS)
			fail_msg("attribute %d: %d", a, r);
	}
	assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev),
			 CUDA_ERROR_INVALID_VALUE);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CU(cuDeviceGetAttribute(&v, want[i].a, dev));
		assert_int_equal(v, want[i].v);
	}
	CU(cuDeviceGetPCIBusId(bus, sizeof(bus), dev));
	assert_string_equal(bus, "0000:1B:00.0");
	CU(cuDeviceGetByPCIBusId(&back, "0000:1b:00.0"));
	assert_int_equal(back, dev);
	CU(cuDeviceGetByPCIBusId(&back, "1b:00.0"));
	assert_int_equal(cuDeviceGetByPCIBusId(&back, "0000:1c:00.0"), CUDA_ERROR_INVALID_DEVICE);
	assert_int_equal(cuDeviceGetByPCIBusId(&back, "bogus"), CUDA_ERROR_INVALID_VALUE);
}

static void test_errors(void **state)
{
	const char *s;

	(void)state;
	CU(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	assert_string_equal(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
	CU(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, &s));
	assert_string_equal(s, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT");
	CU(cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
	assert_non_null(strstr(s, "not completed"));
	assert_int_equal(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
	assert_null(s);
}

/* --- images and parameter layouts ------------------------------------------------------ */

static const struct layout {
	const char *name;
	unsigned n;
	size_t off[7], size[7];
} layouts[] = {
    {"mixed_params", 7, {0, 2, 4, 52, 4052, 4056, 4064}, {1, 2, 48, 4000, 4, 8, 8}},
    {"table_sum", 1, {0}, {8}},
    {"add_counter", 1, {0}, {4}},
    {"spin_ns", 1, {0}, {8}},
    {"empty_kernel", 0, {0}, {0}},
    {"affine_u32", 4, {0, 8, 12, 16}, {8, 4, 4, 8}},
    {"fill_u32", 3, {0, 8, 16}, {8, 4, 8}},
    {"scale_add", 4, {0, 8, 12, 16}, {8, 4, 4, 4}},
    {"vec_add", 4, {0, 8, 16, 24}, {8, 8, 8, 4}},
    {"cond_set", 2, {0, 8}, {8, 4}},
    {"cond_pick", 3, {0, 8, 16}, {8, 4, 8}},
    {"cond_countdown", 2, {0, 8}, {8, 8}},
};
#define NKERNELS (sizeof(layouts) / sizeof(layouts[0]))

static void check_layout(CUfunction f, const struct layout *l)
{
	size_t off, size;

	for (unsigned i = 0; i < l->n; i++) {
		CU(cuFuncGetParamInfo(f, i, &off, &size));
		if (off != l->off[i] || size != l->size[i])
			fail_msg("%s param %u: %zu/%zu, want %zu/%zu", l->name, i, off, size,
				 l->off[i], l->size[i]);
	}
	/* the first index past the last parameter is refused, as by the real driver */
	assert_int_equal(cuFuncGetParamInfo(f, l->n, &off, &size), CUDA_ERROR_INVALID_VALUE);
}

static void check_module(CUmodule mod, bool cubin)
{
	CUfunction fs[NKERNELS];
	unsigned count;
	CUdeviceptr p;
	size_t bytes;
	int regs;

	CU(cuModuleGetFunctionCount(&count, mod));
	assert_int_equal(count, NKERNELS);
	CU(cuModuleEnumerateFunctions(fs, NKERNELS, mod));
	for (size_t i = 0; i < NKERNELS; i++) {
		const char *name;
		size_t k;
		CU(cuFuncGetName(&name, fs[i]));
		for (k = 0; k < NKERNELS && strcmp(layouts[k].name, name); k++)
			;
		if (k == NKERNELS)
			fail_msg("unexpected kernel %s", name);
		check_layout(fs[i], &layouts[k]);
		CUfunction again;
		CU(cuModuleGetFunction(&again, mod, name));
		assert_ptr_equal(again, fs[i]);
		CUmodule owner;
		CU(cuFuncGetModule(&owner, again));
		assert_ptr_equal(owner, mod);
	}
	CUfunction f;
	assert_int_equal(cuModuleGetFunction(&f, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	CU(cuModuleGetGlobal(&p, &bytes, mod, "g_counter"));
	assert_int_equal(bytes, 4);
	CU(cuModuleGetGlobal(&p, &bytes, mod, "g_table"));
	assert_int_equal(bytes, 1024);
	assert_int_equal(cuModuleGetGlobal(&p, &bytes, mod, "g_missing"), CUDA_ERROR_NOT_FOUND);
	CU(cuModuleGetFunction(&f, mod, "vec_add"));
	CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	if (cubin)
		assert_int_equal(regs, 12); /* EIATTR_REGCOUNT of vec_add in the sm_90 cubin */
	CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
	assert_int_equal(regs, 1024);
}

static void test_images(void **state)
{
	(void)state;
	for (int i = 0; i < 4; i++) {
		CUmodule mod;
		assert_non_null(g_images[i]);
		CU(cuModuleLoadData(&mod, g_images[i]));
		check_module(mod, i < 3);
		CU(cuModuleUnload(mod));
		assert_int_equal(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
	}
	CUmodule mod;
	assert_int_equal(cuModuleLoadData(&mod, "not an image"), CUDA_ERROR_INVALID_PTX);
	assert_int_equal(cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE);

	/* a container whose ELF entry claims LZ4 compression, then one with a bad entry size */
	const unsigned char *fb = g_images[1];
	uint64_t fat, flags;
	uint32_t bad = 0x7fffffff;
	memcpy(&fat, fb + 8, 8);
	unsigned char *copy = malloc(16 + fat);
	memcpy(copy, fb, 16 + fat);
	memcpy(&flags, copy + 16 + 40, 8);
	flags |= 0x2000;
	memcpy(copy + 16 + 40, &flags, 8);
	assert_int_equal(cuModuleLoadData(&mod, copy), CUDA_ERROR_NOT_SUPPORTED);
	memcpy(copy, fb, 16 + fat);
	memcpy(copy + 16 + 8, &bad, 4);
	assert_int_equal(cuModuleLoadData(&mod, copy), CUDA_ERROR_INVALID_IMAGE);
	free(copy);

	/* a cubin whose symbol names (.strtab, section 2) lie past the end of the image */
	uint64_t shoff;
	memcpy(&shoff, (const char *)g_images[0] + 0x28, 8);
	copy = malloc(g_sizes[0]);
	memcpy(copy, g_images[0], g_sizes[0]);
	memset(copy + shoff + 64 * 2 + 24, 0xff, 8); /* sh_offset */
	memset(copy + shoff + 64 * 2 + 32, 0, 8);    /* sh_size: the extent stays the file's */
	assert_int_equal(cuModuleLoadData(&mod, copy), CUDA_ERROR_INVALID_IMAGE);
	free(copy);

	/* JIT options that return values get empty answers */
	char log[16] = "junk";
	CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
	void *val[] = {log, (void *)(uintptr_t)sizeof(log)};
	CU(cuModuleLoadDataEx(&mod, g_images[0], 2, opt, val));
	assert_int_equal(log[0], '\0');
	assert_null(val[1]);
	CU(cuModuleUnload(mod));
	assert_int_equal(cuModuleLoadDataEx(&mod, g_images[0], 1, NULL, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	CUmoduleLoadingMode lm;
	CU(cuModuleGetLoadingMode(&lm));
	assert_int_equal(lm, CU_MODULE_LAZY_LOADING);
}

/*
 * PTX-only layouts where alignment matters: an explicit .align, a pointer whose .align is the
 * pointee's (not the parameter's), a half after a pointer; a .func and an .extern variable
 * that must not be taken for a kernel or a global.
 */
static void test_ptx_layout(void **state)
{
	static const char ptx[] =
	    ".version 9.0\n.target sm_90\n.address_size 64\n"
	    "// .entry commented_out(.param .u32 x)\n"
	    ".visible .global .align 8 .u64 gv[3];\n"
	    ".const .align 4 .f32 cv = 0f3FC00000;\n"
	    ".extern .global .align 4 .u32 ext;\n"
	    ".func (.param .b32 r) helper(.param .b64 .ptr .global p)\n{\n\tret;\n}\n"
	    ".visible .entry al(\n"
	    "\t.param .u8 al_0,\n"
	    "\t.param .u64 .ptr .global .align 1 al_1,\n"
	    "\t.param .align 8 .b8 al_2[12],\n"
	    "\t.param .u32 al_3,\n"
	    "\t.param .f16 al_4\n"
	    ")\n.maxntid 128, 1, 1\n{\n\t.reg .b32 %r<2>;\n\tret;\n}\n";
	static const struct layout want = {"al", 5, {0, 8, 16, 28, 32}, {1, 8, 12, 4, 2}};
	CUmodule mod;
	CUfunction f;
	CUdeviceptr p;
	size_t bytes;
	unsigned count;

	(void)state;
	CU(cuModuleLoadData(&mod, ptx));
	CU(cuModuleGetFunctionCount(&count, mod));
	assert_int_equal(count, 1);
	CU(cuModuleGetFunction(&f, mod, "al"));
	check_layout(f, &want);
	CU(cuModuleGetGlobal(&p, &bytes, mod, "gv"));
	assert_int_equal(bytes, 24);
	CU(cuModuleGetGlobal(&p, &bytes, mod, "cv"));
	assert_int_equal(bytes, 4);
	assert_int_equal(cuModuleGetGlobal(&p, &bytes, mod, "ext"), CUDA_ERROR_NOT_FOUND);
	CU(cuModuleUnload(mod));
}

/* What cudart hands cuLibraryLoadData: a __fatBinC_Wrapper_t around the container. */
static void test_library(void **state)
{
	struct {
		int magic, version;
		const void *data, *filename_or_fatbins;
	} wrapper = {0x466243B1, 1, g_images[1], NULL};
	CUlibrary lib;
	CUkernel k, ks[NKERNELS];
	CUfunction f;
	CUmodule mod;
	CUdeviceptr p;
	size_t off, size;
	unsigned count;
	const char *name;

	(void)state;
	CU(cuLibraryLoadData(&lib, &wrapper, NULL, NULL, 0, NULL, NULL, 0));
	CU(cuLibraryGetKernelCount(&count, lib));
	assert_int_equal(count, NKERNELS);
	CU(cuLibraryEnumerateKernels(ks, NKERNELS, lib));
	CU(cuLibraryGetKernel(&k, lib, "mixed_params"));
	CU(cuKernelGetName(&name, k));
	assert_string_equal(name, "mixed_params");
	CU(cuKernelGetParamInfo(k, 3, &off, &size));
	assert_int_equal(off, 52);
	assert_int_equal(size, 4000);
	assert_int_equal(cuKernelGetParamInfo(k, 7, &off, &size), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
	int v;
	CU(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
	assert_int_equal(v, 1024);
	CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10, k, 0));
	assert_int_equal(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 7),
			 CUDA_ERROR_INVALID_DEVICE);
	CU(cuLibraryGetModule(&mod, lib));
	check_module(mod, true);
	CU(cuModuleGetFunction(&f, mod, "mixed_params"));
	CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
	assert_int_equal(v, 64 << 10); /* the kernel's attribute is its functions' */
	assert_int_equal(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE); /* the library's */
	CU(cuLibraryGetGlobal(&p, &size, lib, "g_table"));
	assert_int_equal(size, 1024);

	/* a CUkernel cast to CUfunction launches like the function it stands for */
	CUdeviceptr x;
	unsigned host[64];
	unsigned seed = 77;
	unsigned long long n = 64;
	void *args[] = {&x, &seed, &n};
	CU(cuMemAlloc(&x, sizeof(host)));
	CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
	CU(cuKernelGetFunction(&f, k));
	CU(cuFuncGetModule(&mod, f));
	CU(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
	CU(cuMemcpyDtoH(host, x, sizeof(host)));
	for (unsigned i = 0; i < 64; i++)
		assert_int_equal(host[i], fill_value(77, i));
	CU(cuMemFree(x));
	CU(cuLibraryUnload(lib));
	assert_int_equal(cuLibraryGetKernelCount(&count, lib), CUDA_ERROR_INVALID_HANDLE);
}

/* --- kernels -------------------------------------------------------------------------- */

static void test_vec_add(void **state)
{
	enum { N = 1000 };
	float *a = malloc((N + 1) * sizeof(float)), *b = malloc(N * sizeof(float));
	float *c = malloc((N + 1) * sizeof(float));
	CUdeviceptr da, db, dc;
	int n = N;
	void *args[] = {&da, &db, &dc, &n};

	(void)state;
	for (int i = 0; i < N; i++) {
		a[i] = (float)i * 0.5f;
		b[i] = 1000.0f - (float)i * 2.0f;
	}
	CU(cuMemAlloc(&da, N * sizeof(float)));
	CU(cuMemAlloc(&db, N * sizeof(float)));
	CU(cuMemAlloc(&dc, (N + 1) * sizeof(float)));
	CU(cuMemcpyHtoD(da, a, N * sizeof(float)));
	CU(cuMemcpyHtoD(db, b, N * sizeof(float)));
	CU(cuMemsetD32(dc, 0xdeadbeef, N + 1)); /* the element past n must stay untouched */
	launch1(func("vec_add"), (N + 255) / 256, 256, NULL, args);
	CU(cuMemcpyDtoH(c, dc, (N + 1) * sizeof(float)));
	for (int i = 0; i < N; i++)
		if (c[i] != a[i] + b[i])
			fail_msg("c[%d] = %f, want %f", i, (double)c[i], (double)(a[i] + b[i]));
	uint32_t tail;
	memcpy(&tail, &c[N], 4);
	assert_int_equal(tail, 0xdeadbeef);
	CU(cuMemFree(da));
	CU(cuMemFree(db));
	CU(cuMemFree(dc));
	free(a);
	free(b);
	free(c);
}

static void test_mixed_params(void **state)
{
	struct p48 {
		int a[12];
	} m;
	struct p4000 {
		unsigned char b[4000];
	} *big = malloc(sizeof(*big));
	char c = -5;
	short sh = -1234;
	int i = 987654;
	double d = 3.14159;
	long long sm = 0, sb = 0;
	unsigned long long out[6];
	CUdeviceptr dout;
	void *args[] = {&c, &sh, &m, big, &i, &d, &dout};
	unsigned char *buf = calloc(1, 4072);
	size_t total = 4072;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &total,
			 CU_LAUNCH_PARAM_END};
	const struct layout *l = &layouts[0];
	CUfunction f = func("mixed_params");

	(void)state;
	for (int k = 0; k < 12; k++)
		sm += m.a[k] = k * 1000 - 5000;
	for (int k = 0; k < 4000; k++)
		sb += big->b[k] = (unsigned char)(k * 7 + 3);
	CU(cuMemAlloc(&dout, sizeof(out)));
	for (int pass = 0; pass < 2; pass++) {
		CU(cuMemsetD8(dout, 0xff, sizeof(out)));
		if (pass == 0) {
			launch1(f, 1, 32, NULL, args);
		} else {
			for (unsigned p = 0; p < l->n; p++)
				memcpy(buf + l->off[p], args[p], l->size[p]);
			CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
		}
		CU(cuMemcpyDtoH(out, dout, sizeof(out)));
		assert_int_equal((long long)out[0], -5);
		assert_int_equal((long long)out[1], -1234);
		assert_int_equal((long long)out[2], sm);
		assert_int_equal((long long)out[3], sb);
		assert_int_equal((long long)out[4], 987654);
		assert_int_equal((long long)out[5], 3141);
	}
	total = 4071; /* one byte short of the layout */
	assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra),
			 CUDA_ERROR_INVALID_VALUE);
	CU(cuMemFree(dout));
	free(buf);
	free(big);
}

static void test_launch_errors(void **state)
{
	static const char ptx[] = ".version 9.0\n.target sm_90\n.address_size 64\n"
				  ".visible .entry no_twin(.param .u32 p)\n{\n\tret;\n}\n";
	CUfunction f = func("vec_add"), nt;
	CUmodule mod;
	CUdeviceptr d;
	int n = 4, one = 1;
	void *args[] = {&d, &d, &d, &n};

	(void)state;
	CU(cuMemAlloc(&d, 64));
	assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 33, 1, 0, NULL, args, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLaunchKernel(f, 1, 65536, 1, 32, 1, 1, 0, NULL, args, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 64 << 10, NULL, args, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(
	    cuLaunchKernel((CUfunction)(uintptr_t)0x1234567, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
	    CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
			 CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(
	    cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)0x7777, args, NULL),
	    CUDA_ERROR_INVALID_HANDLE);
	/* dynamic shared memory above 48 KiB needs the opt-in attribute, up to 227 KiB */
	int v;
	CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
	assert_int_equal(v, 48 << 10);
	assert_int_equal(
	    cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 228 << 10),
	    CUDA_ERROR_INVALID_VALUE);
	CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 << 10));
	CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 100 << 10, NULL, args, NULL));
	assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 8),
			 CUDA_ERROR_INVALID_VALUE);
	CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 48 << 10));
	/* a kernel with no C twin cannot run here: NOT_SUPPORTED, nothing queued */
	CU(cuModuleLoadData(&mod, ptx));
	CU(cuModuleGetFunction(&nt, mod, "no_twin"));
	void *ntargs[] = {&one};
	assert_int_equal(cuLaunchKernel(nt, 1, 1, 1, 1, 1, 1, 0, NULL, ntargs, NULL),
			 CUDA_ERROR_NOT_SUPPORTED);
	CU(cuModuleUnload(mod));
	CU(cuCtxSynchronize());
	CU(cuMemFree(d));
}

/* --- streams and events ---------------------------------------------------------------- */

/*
 * A spin on stream A, then a fill; an event after it; stream B waits on the event and then
 * writes. B's write must land after A's fill, so the buffer ends up holding B's value.
 */
static void test_stream_order(void **state)
{
	enum { N = 4096 };
	CUstream a, b;
	CUevent start, done;
	CUdeviceptr x;
	unsigned *host = malloc(N * 4);
	float ms = 0;

	(void)state;
	CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
	CU(cuEventCreate(&done, CU_EVENT_DEFAULT));
	CU(cuMemAlloc(&x, N * 4));
	CU(cuEventRecord(start, a));
	spin(a, 200000000ull);
	fill(a, x, 1234, N);
	CU(cuEventRecord(done, a));
	assert_int_equal(cuEventQuery(done), CUDA_ERROR_NOT_READY);
	assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
	assert_int_equal(cuEventElapsedTime(&ms, start, done), CUDA_ERROR_NOT_READY);
	CU(cuStreamWaitEvent(b, done, 0));
	CU(cuMemsetD32Async(x, 0x5a5a5a5a, N, b));
	assert_int_equal(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
	CU(cuStreamSynchronize(b));
	CU(cuEventQuery(done));
	CU(cuStreamQuery(a));
	CU(cuMemcpyDtoH(host, x, N * 4));
	for (int i = 0; i < N; i++)
		if (host[i] != 0x5a5a5a5a)
			fail_msg("x[%d] = %#x: B ran before A", i, host[i]);
	CU(cuEventElapsedTime(&ms, start, done));
	assert_true(ms >= 195.0f && ms < 5000.0f);

	/* the other way round without the wait: B's write lands first, A's fill wins */
	spin(a, 100000000ull);
	fill(a, x, 99, N);
	CU(cuMemsetD32Async(x, 0x11111111, N, b));
	CU(cuStreamSynchronize(b));
	CU(cuStreamSynchronize(a));
	CU(cuMemcpyDtoH(host, x, N * 4));
	assert_int_equal(host[5], fill_value(99, 5));

	CU(cuEventDestroy(start));
	CU(cuEventDestroy(done));
	CU(cuStreamDestroy(a));
	CU(cuStreamDestroy(b));
	assert_int_equal(cuStreamQuery(a), CUDA_ERROR_INVALID_HANDLE);
	CU(cuMemFree(x));
	free(host);
}

static void test_events(void **state)
{
	CUevent never, notime, e;
	float ms;

	(void)state;
	CU(cuEventCreate(&never, CU_EVENT_DEFAULT));
	CU(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&e, CU_EVENT_BLOCKING_SYNC));
	CU(cuEventQuery(never)); /* never recorded: complete */
	CU(cuEventSynchronize(never));
	CU(cuEventRecord(e, NULL));
	CU(cuEventRecord(notime, NULL));
	CU(cuEventSynchronize(notime));
	assert_int_equal(cuEventElapsedTime(&ms, never, e), CUDA_ERROR_INVALID_HANDLE);
	assert_int_equal(cuEventElapsedTime(&ms, e, notime), CUDA_ERROR_INVALID_HANDLE);
	CU(cuEventElapsedTime_v2(&ms, e, e));
	assert_true(ms == 0.0f);
	assert_int_equal(cuEventCreate(&e, 0x100), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuEventQuery(NULL), CUDA_ERROR_INVALID_HANDLE);
	CU(cuEventDestroy(never));
	CU(cuEventDestroy(notime));
	CU(cuEventDestroy(e));
	assert_int_equal(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
}

struct hostfn_state {
	sem_t go;
	pthread_t thread;
	uint64_t ran_at;
};

static void blocking_hostfn(void *p)
{
	struct hostfn_state *h = p;

	h->thread = pthread_self();
	__atomic_store_n(&h->ran_at, now_ns(), __ATOMIC_RELEASE); /* the test polls it */
	sem_wait(&h->go);
}

/*
 * A host function runs after the work before it and holds back the work after it: while it
 * blocks, the stream is not done and the memset queued behind it has not happened.
 */
static void test_host_function(void **state)
{
	enum { N = 256 };
	struct hostfn_state h = {.thread = pthread_self()};
	CUstream s, probe;
	CUdeviceptr x;
	unsigned host[N];
	uint64_t t0 = now_ns();

	(void)state;
	sem_init(&h.go, 0, 0);
	CU(cuStreamCreate(&s, 0));
	CU(cuStreamCreate(&probe, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&x, sizeof(host)));
	CU(cuMemsetD32(x, 1, N));
	spin(s, 100000000ull);
	CU(cuLaunchHostFunc(s, blocking_hostfn, &h));
	CU(cuMemsetD32Async(x, 2, N, s));
	/* the host function has not let the memset through yet */
	while (!__atomic_load_n(&h.ran_at, __ATOMIC_ACQUIRE)) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	assert_true(h.ran_at - t0 >= 95000000ull); /* after the spin before it */
	assert_false(pthread_equal(h.thread, pthread_self()));
	assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	CU(cuMemcpyDtoHAsync(host, x, sizeof(host), probe));
	CU(cuStreamSynchronize(probe)); /* a non-blocking stream: not held back by s */
	assert_int_equal(host[0], 1);
	assert_int_equal(host[N - 1], 1);
	sem_post(&h.go);
	CU(cuStreamSynchronize(s));
	CU(cuMemcpyDtoH(host, x, sizeof(host)));
	assert_int_equal(host[0], 2);
	assert_int_equal(host[N - 1], 2);
	CU(cuStreamDestroy(s));
	CU(cuStreamDestroy(probe));
	CU(cuMemFree(x));
	sem_destroy(&h.go);
}

static int callback_calls;
static void CUDA_CB callback(CUstream s, CUresult status, void *ud)
{
	(void)s;
	(void)ud;
	if (status == CUDA_SUCCESS)
		callback_calls++;
}

/*
 * Legacy NULL-stream semantics: NULL-stream work waits for earlier work on blocking streams,
 * blocking-stream work waits for earlier NULL-stream work; non-blocking streams do neither.
 */
static void test_null_stream(void **state)
{
	enum { N = 1024 };
	CUstream blk, nb;
	CUdeviceptr x;
	unsigned host[N];

	(void)state;
	CU(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
	CU(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&x, sizeof(host)));

	/* blocking stream first, then the NULL stream: the NULL stream's memset lands last */
	spin(blk, 150000000ull);
	fill(blk, x, 5, N);
	CU(cuMemsetD32Async(x, 9, N, NULL));
	CU(cuStreamSynchronize(NULL));
	CU(cuMemcpyDtoH(host, x, sizeof(host)));
	assert_int_equal(host[0], 9);
	assert_int_equal(host[N - 1], 9);

	/* NULL stream first, then a blocking stream: the blocking stream's fill lands last */
	spin(CU_STREAM_LEGACY, 150000000ull);
	CU(cuMemsetD32Async(x, 3, N, CU_STREAM_LEGACY));
	fill(blk, x, 6, N);
	CU(cuStreamSynchronize(blk));
	CU(cuMemcpyDtoH(host, x, sizeof(host)));
	assert_int_equal(host[7], fill_value(6, 7));

	/* a non-blocking stream does not wait for the NULL stream */
	spin(NULL, 300000000ull);
	CU(cuMemsetD32Async(x, 4, N, nb));
	CU(cuStreamSynchronize(nb));
	assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
	CU(cuMemcpyDtoHAsync(host, x, sizeof(host), nb));
	CU(cuStreamSynchronize(nb));
	assert_int_equal(host[0], 4);
	callback_calls = 0;
	CU(cuStreamAddCallback(NULL, callback, NULL, 0));
	CU(cuCtxSynchronize());
	assert_int_equal(callback_calls, 1);
	assert_int_equal(cuStreamAddCallback(NULL, callback, NULL, 1), CUDA_ERROR_INVALID_VALUE);

	/* a synchronous copy is ordered after blocking-stream work too */
	spin(blk, 100000000ull);
	fill(blk, x, 8, N);
	CU(cuMemcpyDtoH(host, x, sizeof(host)));
	assert_int_equal(host[N - 1], fill_value(8, N - 1));

	CU(cuStreamDestroy(blk));
	CU(cuStreamDestroy(nb));
	CU(cuMemFree(x));
}

/* --- memory ---------------------------------------------------------------------------- */

/*
 * At the server's device window (window.h), free under ASan as in a plain build. TSan aborts on
 * any mapping outside its application ranges, which the window is not in; that build tests the
 * same thing in one of them.
 */
#if defined(__SANITIZE_THREAD__)
#define VMM_BASE 0x560000000000ull
#else
#define VMM_BASE RGPU_WINDOW_BASE
#endif

static void test_vmm(void **state)
{
	const CUdeviceptr base = VMM_BASE;
	const size_t two = 2u << 20;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
	CUmemAccessDesc acc = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
			       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CUmemGenericAllocationHandle h;
	CUdeviceptr va, other, dglobal;
	size_t gran, free0, free1, total, bytes;
	unsigned *buf = malloc(2 * two), *back = malloc(2 * two);

	(void)state;
	CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	assert_int_equal(gran, two);
	CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	assert_int_equal(gran, two);
	CU(cuMemAddressReserve(&va, 64u << 20, 0, base, 0));
	assert_int_equal(va, base); /* the hint is honoured exactly */
	CU(cuMemAddressReserve(&other, 64u << 20, 0, base, 0));
	assert_true(other != base); /* taken: another address, as the real driver */
	CU(cuMemAddressFree(other, 64u << 20));

	CU(cuMemGetInfo(&free0, &total));
	assert_int_equal(total, 16ull << 30);
	assert_int_equal(cuMemCreate(&h, two + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemCreate(&h, 2 * two, &prop, 0));
	CU(cuMemGetInfo(&free1, &total));
	assert_int_equal(free0 - free1, 2 * two);
	assert_int_equal(cuMemMap(base + 4096, 2 * two, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemMap(base + (62u << 20), 2 * two, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemMap(base, 2 * two, 0, h, 0));
	assert_int_equal(cuMemMap(base + two, two, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	/* mapped but no access yet */
	for (size_t i = 0; i < 2 * two / 4; i++)
		buf[i] = (unsigned)(i * 2654435761u) ^ 0xabcdu;
	assert_int_equal(cuMemcpyHtoD(base, buf, 64), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemSetAccess(base, 2 * two, &acc, 1));
	CU(cuMemcpyHtoD(base, buf, 2 * two));
	CU(cuMemcpyDtoH(back, base, 2 * two));
	assert_memory_equal(buf, back, 2 * two);
	/* a second mapping of the same memory sees the same bytes */
	CU(cuMemMap(base + (8u << 20), 2 * two, 0, h, 0));
	CU(cuMemSetAccess(base + (8u << 20), 2 * two, &acc, 1));
	memset(back, 0, 2 * two);
	CU(cuMemcpyDtoH(back, base + (8u << 20), 2 * two));
	assert_memory_equal(buf, back, 2 * two);
	CU(cuMemcpyDtoD(base + (8u << 20), base + 64, 64));
	CU(cuMemcpyDtoH(back, base, 64));
	assert_memory_equal(back, buf + 16, 64);
	CU(cuMemUnmap(base + (8u << 20), 2 * two));
	/* a part of it, from an offset: the second granule's bytes */
	CU(cuMemMap(base + (16u << 20), two, two, h, 0));
	CU(cuMemSetAccess(base + (16u << 20), two, &acc, 1));
	CU(cuMemcpyDtoH(back, base + (16u << 20), 64));
	assert_memory_equal(back, buf + two / 4, 64);
	assert_int_equal(cuMemMap(base + (24u << 20), two, 2 * two, h, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemMap(base + (24u << 20), two, 4096, h, 0), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemUnmap(base + (16u << 20), two));

	/* anything not wholly inside mapped, accessible memory is refused */
	assert_int_equal(cuMemcpyHtoD(base + 2 * two - 16, buf, 32), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemcpyDtoH(back, base + (20u << 20), 16), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemcpy(base + (20u << 20), base, 16), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemsetD8(base + 2 * two, 0, 1), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemcpyHtoDAsync(0x1000, buf, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	/* cuMemcpy with unified addressing: host on one side, device on the other */
	CU(cuMemcpy((CUdeviceptr)back, base + 128, 64));
	assert_memory_equal(back, buf + 32, 64);

	/* module globals live outside the VMM window */
	CU(cuModuleGetGlobal(&dglobal, &bytes, g_mod, "g_table"));
	assert_true(dglobal + bytes <= base || dglobal >= base + (64u << 20));

	assert_int_equal(cuMemUnmap(base, two), CUDA_ERROR_INVALID_VALUE); /* a sub-range */
	CU(cuMemUnmap(base, 2 * two));
	assert_int_equal(cuMemcpyDtoH(back, base, 16), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemRelease(h));
	CU(cuMemGetInfo(&free1, &total));
	assert_int_equal(free1, free0);
	assert_int_equal(cuMemAddressFree(base, 32u << 20), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemAddressFree(base, 64u << 20));
	free(buf);
	free(back);
}

static void test_memory(void **state)
{
	CUdeviceptr d, pbase;
	size_t psize, fr, total;
	void *pinned;
	unsigned short s16[33];
	unsigned char rows[4][16];
	unsigned host[8];

	(void)state;
	CU(cuMemAlloc(&d, 1000));
	CU(cuMemGetAddressRange(&pbase, &psize, d + 500));
	assert_int_equal(pbase, d);
	assert_int_equal(psize, 1000);
	assert_int_equal(cuMemGetAddressRange(&pbase, &psize, 0x10), CUDA_ERROR_NOT_FOUND);
	CU(cuMemsetD16(d, 0xbeef, 33));
	CU(cuMemcpyDtoH(s16, d, sizeof(s16)));
	assert_int_equal(s16[0], 0xbeef);
	assert_int_equal(s16[32], 0xbeef);
	assert_int_equal(cuMemsetD16(d + 1, 0, 2), CUDA_ERROR_INVALID_VALUE); /* misaligned */
	CU(cuMemsetD8(d, 0, 64));
	CU(cuMemsetD2D8(d, 16, 0x7e, 10, 4));
	CU(cuMemcpyDtoH(rows, d, sizeof(rows)));
	assert_int_equal(rows[3][9], 0x7e);
	assert_int_equal(rows[3][10], 0);
	assert_int_equal(rows[0][15], 0);
	assert_int_equal(cuMemsetD2D32(d, 16, 1, 8, 2),
			 CUDA_ERROR_INVALID_VALUE); /* pitch < width */
	assert_int_equal(cuMemsetD2D8(d + 990, 16, 0, 10, 2), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemFree(d));
	assert_int_equal(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuMemAlloc(&d, 17ull << 30), CUDA_ERROR_OUT_OF_MEMORY);
	CU(cuMemGetInfo(&fr, &total));
	assert_int_equal(fr, total);

	/* pinned memory is a device pointer too (unified addressing) */
	CU(cuMemAllocHost(&pinned, 4096));
	CU(cuMemAlloc(&d, 32));
	CU(cuMemsetD32(d, 0x42, 8));
	CU(cuMemcpyDtoDAsync((CUdeviceptr)pinned, d, 32, NULL));
	CU(cuCtxSynchronize());
	assert_int_equal(((unsigned *)pinned)[7], 0x42);
	CU(cuMemFreeHost(pinned));
	assert_int_equal(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE);
	CU(cuMemHostRegister(host, sizeof(host), 0));
	assert_int_equal(cuMemHostRegister(host, sizeof(host), 0),
			 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CU(cuMemcpyDtoHAsync(host, d, 32, NULL));
	CU(cuStreamSynchronize(NULL));
	assert_int_equal(host[0], 0x42);
	CU(cuMemHostUnregister(host));
	assert_int_equal(cuMemHostUnregister(host), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CU(cuMemFree(d));
}

static void test_globals(void **state)
{
	CUdeviceptr counter, table, out;
	size_t csize, tsize;
	float t[256], sum = 0.0f, got;
	int c = 0, v = 3;
	void *aargs[] = {&v}, *sargs[] = {&out};

	(void)state;
	CU(cuModuleGetGlobal(&counter, &csize, g_mod, "g_counter"));
	CU(cuModuleGetGlobal(&table, &tsize, g_mod, "g_table"));
	assert_int_equal(csize, 4);
	assert_int_equal(tsize, sizeof(t));
	for (int i = 0; i < 256; i++) {
		t[i] = (float)i * 0.25f + 0.1f;
		sum += t[i];
	}
	CU(cuMemcpyHtoD(table, t, sizeof(t)));
	CU(cuMemsetD32(counter, 0, 1));
	CU(cuMemAlloc(&out, sizeof(float)));
	CU(cuLaunchKernel(func("add_counter"), 2, 1, 1, 32, 1, 1, 0, NULL, aargs, NULL));
	CU(cuLaunchKernel(func("add_counter"), 1, 2, 1, 4, 2, 1, 0, NULL, aargs, NULL));
	launch1(func("table_sum"), 1, 1, NULL, sargs);
	CU(cuMemcpyDtoH(&c, counter, 4));
	assert_int_equal(c, 3 * 64 + 3 * 16);
	CU(cuMemcpyDtoH(&got, out, sizeof(got)));
	assert_true(got == sum);
	CU(cuMemFree(out));
}

/* --- graphs ---------------------------------------------------------------------------- */

static int graph_hostfn_calls;
static void count_hostfn(void *p)
{
	(void)p;
	graph_hostfn_calls++;
}

static void test_graph(void **state)
{
	enum { N = 512 };
	CUstream s;
	CUgraph g, g2;
	CUgraphExec x;
	CUstreamCaptureStatus st;
	cuuint64_t id = 0;
	const CUgraphNode *deps;
	size_t ndeps;
	CUdeviceptr d;
	float host[N], two = 2.0f, one = 1.0f;
	int n = N;
	void *args[] = {&d, &two, &one, &n};

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&d, sizeof(host)));
	for (int i = 0; i < N; i++)
		host[i] = (float)i;
	CU(cuMemcpyHtoD(d, host, sizeof(host)));
	graph_hostfn_calls = 0;

	assert_int_equal(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
			 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CU(cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	launch1(func("scale_add"), N / 256, 256, s, args);
	CU(cuLaunchHostFunc(s, count_hostfn, NULL));
	CU(cuStreamGetCaptureInfo(s, &st, &id, &g2, &deps, NULL, &ndeps));
	assert_true(id != 0);
	assert_int_equal(ndeps, 1);
	assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	assert_int_equal(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
			 CUDA_ERROR_ILLEGAL_STATE);
	CU(cuStreamEndCapture(s, &g));
	assert_ptr_equal(g, g2);
	CU(cuStreamIsCapturing(s, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	/* captured, not run */
	CU(cuStreamSynchronize(s));
	assert_int_equal(graph_hostfn_calls, 0);
	CU(cuMemcpyDtoH(host, d, sizeof(host)));
	assert_true(host[3] == 3.0f);

	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphDestroy(g)); /* the instance keeps its own copy */
	for (int k = 0; k < 3; k++)
		CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	assert_int_equal(graph_hostfn_calls, 3);
	CU(cuMemcpyDtoH(host, d, sizeof(host)));
	for (int i = 0; i < N; i++) {
		float want = (float)i;
		for (int k = 0; k < 3; k++)
			want = want * 2.0f + 1.0f;
		if (host[i] != want)
			fail_msg("x[%d] = %f, want %f", i, (double)host[i], (double)want);
	}
	CU(cuGraphExecDestroy(x));
	assert_int_equal(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphLaunch(x, s));
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuStreamDestroy(s));
	CU(cuMemFree(d));
}

/*
 * A fork and join across two streams inside one capture (events recorded during capture),
 * the legacy stream refused while a blocking stream captures, and a capture abandoned by
 * destroying its stream.
 */
static void test_graph_fork_join(void **state)
{
	enum { N = 256 };
	CUstream s1, s2, blk;
	CUevent fork, join;
	CUgraph g;
	CUgraphExec x;
	CUstreamCaptureStatus st;
	CUdeviceptr a, b;
	unsigned ha[N], hb[N];

	(void)state;
	CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
	CU(cuMemAlloc(&a, sizeof(ha)));
	CU(cuMemAlloc(&b, sizeof(hb)));
	CU(cuMemsetD32(a, 0, N));
	CU(cuMemsetD32(b, 0, N));

	CU(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
	spin(s1, 20000000ull);
	CU(cuEventRecord(fork, s1));
	CU(cuStreamWaitEvent(s2, fork, 0)); /* s2 joins the capture */
	CU(cuStreamIsCapturing(s2, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	fill(s2, b, 21, N);
	fill(s1, a, 11, N);
	CU(cuEventRecord(join, s2));
	CU(cuStreamWaitEvent(s1, join, 0));
	assert_int_equal(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
	CU(cuStreamEndCapture(s1, &g));
	CU(cuStreamIsCapturing(s2, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	CU(cuMemcpyDtoH(ha, a, sizeof(ha)));
	assert_int_equal(ha[1], 0); /* nothing ran while capturing */
	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphLaunch(x, s2));
	CU(cuStreamSynchronize(s2));
	CU(cuMemcpyDtoH(ha, a, sizeof(ha)));
	CU(cuMemcpyDtoH(hb, b, sizeof(hb)));
	assert_int_equal(ha[9], fill_value(11, 9));
	assert_int_equal(hb[9], fill_value(21, 9));
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));

	/* legacy-stream work would wait for the capturing blocking stream: refused */
	CU(cuStreamCreate(&blk, 0));
	CU(cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_GLOBAL));
	assert_int_equal(cuMemsetD32Async(a, 1, N, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	assert_int_equal(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CU(cuStreamGetCaptureInfo(blk, &st, NULL, &g, NULL, NULL, NULL));
	assert_int_equal(cuGraphDestroy(g), CUDA_ERROR_ILLEGAL_STATE);
	CU(cuStreamDestroy(blk)); /* abandons the capture */
	assert_int_equal(cuStreamEndCapture(blk, &g), CUDA_ERROR_INVALID_HANDLE);
	CU(cuMemsetD32Async(a, 1, N, NULL));
	CU(cuStreamSynchronize(NULL));

	CU(cuEventDestroy(fork));
	CU(cuEventDestroy(join));
	CU(cuStreamDestroy(s1));
	CU(cuStreamDestroy(s2));
	CU(cuMemFree(a));
	CU(cuMemFree(b));
}

/* --- contexts -------------------------------------------------------------------------- */

static void test_contexts(void **state)
{
	CUcontext prim, prim2, c2, cur;
	unsigned long long id1, id2;
	unsigned flags;
	int active;
	size_t v;
	CUdevice dev;

	(void)state;
	CU(cuDevicePrimaryCtxRetain(&prim, 0));
	CU(cuDevicePrimaryCtxRetain(&prim2, 0));
	assert_ptr_equal(prim, prim2);
	CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
	assert_int_equal(active, 1);
	CU(cuCtxPushCurrent(prim));
	CU(cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, prim);
	CU(cuCtxGetId(NULL, &id1));
	CU(cuCtxGetId(g_ctx, &id2));
	assert_true(id1 != id2);
	CU(cuCtxGetDevice(&dev));
	assert_int_equal(dev, 0);
	CU(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
	assert_int_equal(v, 1024);
	CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20));
	CU(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
	assert_int_equal(v, 64 << 20);
	CU(cuCtxPopCurrent(&cur));
	assert_ptr_equal(cur, prim);
	CU(cuDevicePrimaryCtxRelease(0));
	CU(cuDevicePrimaryCtxRelease(0));
	CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
	assert_int_equal(active, 0);
	assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);

	/* a reset frees what the primary context owns but keeps it retained */
	CUdeviceptr d;
	size_t fr0, fr1, total;
	CU(cuDevicePrimaryCtxRetain(&prim, 0));
	CU(cuCtxPushCurrent(prim));
	CU(cuMemGetInfo(&fr0, &total));
	CU(cuMemAlloc(&d, 64 << 20));
	CU(cuDevicePrimaryCtxReset(0));
	CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
	assert_int_equal(active, 1);
	CU(cuMemGetInfo(&fr1, &total));
	assert_int_equal(fr1, fr0);
	assert_int_equal(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
	CU(cuCtxPopCurrent(&cur));
	CU(cuDevicePrimaryCtxRelease(0));

	/* a destroyed context still current on this thread is reported as destroyed */
	CU(cuCtxCreate(&c2, NULL, 0, 0));
	CU(cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, c2);
	CU(cuCtxPushCurrent(c2));
	CU(cuCtxDestroy(c2)); /* pops one */
	assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
	assert_int_equal(cuCtxDestroy(c2), CUDA_ERROR_INVALID_CONTEXT);
	CU(cuCtxSetCurrent(g_ctx));
	CU(cuCtxGetCurrent(&cur));
	assert_ptr_equal(cur, g_ctx);
}

/* --- several threads at once ------------------------------------------------------------ */

static void *worker(void *arg)
{
	enum { N = 2048 };
	unsigned seed = (unsigned)(uintptr_t)arg, host[N];
	CUstream s;
	CUdeviceptr x;
	bool ok = true;

	if (cuCtxSetCurrent(g_ctx) || cuStreamCreate(&s, 0) || cuMemAlloc(&x, sizeof(host)))
		return (void *)0;
	for (int round = 0; round < 20 && ok; round++) {
		unsigned long long n = N;
		unsigned sd = seed + (unsigned)round;
		void *args[] = {&x, &sd, &n};
		ok = !cuLaunchKernel(func("fill_u32"), 8, 1, 1, 256, 1, 1, 0, s, args, NULL) &&
		     !cuMemcpyDtoHAsync(host, x, sizeof(host), s) && !cuStreamSynchronize(s);
		for (int i = 0; ok && i < N; i++)
			ok = host[i] == fill_value(sd, (unsigned long long)i);
	}
	ok = ok && !cuStreamDestroy(s) && !cuMemFree(x);
	return (void *)(uintptr_t)ok;
}

static void test_threads(void **state)
{
	pthread_t t[6];
	void *ok;

	(void)state;
	for (uintptr_t i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(i * 1000)), 0);
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], &ok);
		assert_true(ok == (void *)1);
	}
}

static int setup(void **state)
{
	(void)state;
	if (cuInit(0) || cuCtxCreate(&g_ctx, NULL, 0, 0))
		return -1;
	for (int i = 0; i < 4; i++)
		if (!(g_images[i] = slurp(g_paths[i], &g_sizes[i])))
			return -1;
	return cuModuleLoadData(&g_mod, g_images[0]) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	cuModuleUnload(g_mod);
	cuCtxDestroy(g_ctx);
	for (int i = 0; i < 4; i++)
		free(g_images[i]);
	return 0;
}

int main(void)
{
	const struct CMUnitTest before[] = {
	    cmocka_unit_test(test_before_init),
	};
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_images),
	    cmocka_unit_test(test_ptx_layout),
	    cmocka_unit_test(test_library),
	    cmocka_unit_test(test_vec_add),
	    cmocka_unit_test(test_mixed_params),
	    cmocka_unit_test(test_launch_errors),
	    cmocka_unit_test(test_stream_order),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_host_function),
	    cmocka_unit_test(test_null_stream),
	    cmocka_unit_test(test_vmm),
	    cmocka_unit_test(test_memory),
	    cmocka_unit_test(test_globals),
	    cmocka_unit_test(test_graph),
	    cmocka_unit_test(test_graph_fork_join),
	    cmocka_unit_test(test_contexts),
	    cmocka_unit_test(test_threads),
	};
	int failed = cmocka_run_group_tests_name("simgpu_before_init", before, NULL, NULL);

	return failed + cmocka_run_group_tests_name("simgpu", tests, setup, teardown);
}
