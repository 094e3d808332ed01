/*
 * util/image.c (rgpu_image_locate, rgpu_image_prelinked) against real images: this program is
 * linked with two translation units compiled by `nvcc -rdc=true -c` and their `nvcc -dlink`
 * object (image_kernels.cu, image_device.cu), exactly as an -rdc program is. Their static
 * constructors register, as in any such program, a version-2 __fatBinC_Wrapper_t through
 * __cudaRegisterFatBinary, which this test defines itself (there is no CUDA runtime here) to
 * catch the pointer the runtime would hand to cuLibraryLoadData, and the kernel and variable
 * names the runtime would look up (__cudaRegisterFunction, __cudaRegisterVar).
 *
 * The expected bytes are the files nvcc kept while building those objects (-keep): the
 * device-linked container (image_dlink.fatbin) with its linked cubin (image_dlink.sm_90.cubin),
 * and the two relocatable containers (image_kernels.fatbin, image_device.fatbin). Then simgpu
 * (tests/simgpu/elf.c), given the wrapper as cuModuleLoadData is, must find the linked
 * kernels, their parameter layouts, static shared memory and the variables of both
 * translation units; and given the whole-program PTX (image_whole.ptx), the same layouts, the
 * shared memory of the body's .shared declarations and the __constant__ table's initialiser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>

#include "rgpu/err.h"
#include "rgpu/image.h"
#include "rgpu/util.h"
#include "rgpu/log.h"

#define CU(call) assert_int_equal((call), CUDA_SUCCESS)

#define K_SUM "_Z7img_sumPKji8img_pairs"
#define K_TOUCH "_Z9img_touchv"

/* ---- what the nvcc-generated constructors register (the CUDA runtime's private API) ---- */

static const void *g_wrapper; /* the fatbin wrapper __cudaRegisterFatBinary received */
static int g_registrations;   /* __cudaRegisterFatBinary calls */
static char g_funcs[4][64];   /* device names of registered kernels */
static int g_nfuncs;
static struct {
	char name[64];
	size_t size;
	int constant;
} g_vars[4];
static int g_nvars;
static void *g_handle[4];

void **__cudaRegisterFatBinary(void *fatCubin);
void **__cudaRegisterFatBinary(void *fatCubin)
{
	g_wrapper = fatCubin;
	g_registrations++;
	return g_handle;
}

void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle;
}

void __cudaUnregisterFatBinary(void **handle);
void __cudaUnregisterFatBinary(void **handle)
{
	(void)handle;
}

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
			    const char *deviceName, int thread_limit, void *tid, void *bid,
			    void *bDim, void *gDim, int *wSize);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
			    const char *deviceName, int thread_limit, void *tid, void *bid,
			    void *bDim, void *gDim, int *wSize)
{
	if (g_nfuncs < 4)
		snprintf(g_funcs[g_nfuncs++], sizeof(g_funcs[0]), "%s", deviceName);
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
		       int ext, size_t size, int constant, int global);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
		       int ext, size_t size, int constant, int global)
{
	if (g_nvars < 4) {
		snprintf(g_vars[g_nvars].name, sizeof(g_vars[0].name), "%s", deviceName);
		g_vars[g_nvars].size = size;
		g_vars[g_nvars++].constant = constant;
	}
}

/* referenced by the kernels' host stubs and never called here */
char __cudaInitModule(void **handle);
char __cudaInitModule(void **handle)
{
	return 0;
}
int __cudaLaunchKernel(void);
int __cudaLaunchKernel(void)
{
	abort();
}
int __cudaGetKernel(void);
int __cudaGetKernel(void)
{
	abort();
}
int __cudaPopCallConfiguration(void);
int __cudaPopCallConfiguration(void)
{
	abort();
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void *slurp(const char *name, size_t *size)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", IMAGE_DIR, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static const void *wrapper_data(const void *w)
{
	const void *p;
	memcpy(&p, (const char *)w + 8, sizeof(p));
	return p;
}

static uint32_t u32_at(const void *p, size_t off)
{
	uint32_t v;
	memcpy(&v, (const char *)p + off, 4);
	return v;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* The runtime registers one wrapper, of version 2, for the whole device link. */
static void test_registration(void **state)
{
	(void)state;
	assert_int_equal(g_registrations, 1);
	assert_non_null(g_wrapper);
	assert_int_equal(u32_at(g_wrapper, 0), RGPU_FATBIN_WRAPPER_MAGIC);
	assert_int_equal(u32_at(g_wrapper, 4), RGPU_FATBIN_WRAPPER_LINKED);
	/* both kernels come from image_kernels.cu, the variables from image_device.cu */
	assert_int_equal(g_nfuncs, 2);
	assert_true(!strcmp(g_funcs[0], K_SUM) || !strcmp(g_funcs[1], K_SUM));
	assert_true(!strcmp(g_funcs[0], K_TOUCH) || !strcmp(g_funcs[1], K_TOUCH));
	assert_int_equal(g_nvars, 3);
}

/* A version-2 wrapper locates to its device-linked container, byte for byte nvcc's. */
static void test_locate_linked(void **state)
{
	struct rgpu_image img;
	size_t fsize, csize;
	void *fatbin = slurp("image_dlink.fatbin", &fsize);
	void *cubin = slurp("image_dlink.sm_90.cubin", &csize);
	const unsigned char *c;

	(void)state;
	memset(&img, 0xa5, sizeof(img));
	assert_int_equal(rgpu_image_locate(g_wrapper, &img), 0);
	assert_int_equal(img.kind, RGPU_IMAGE_FATBIN);
	assert_int_equal(img.wrapper, RGPU_FATBIN_WRAPPER_LINKED);
	assert_int_equal(img.prelinked, 2);
	assert_ptr_equal(img.data, wrapper_data(g_wrapper));
	assert_int_equal(img.size, fsize);
	assert_memory_equal(img.data, fatbin, fsize);

	/* one entry: the linked sm_90 cubin, uncompressed, right after the two headers */
	c = img.data;
	assert_int_equal(u32_at(c, 0), RGPU_FATBIN_MAGIC);
	assert_int_equal(c[16] | c[17] << 8, 2);    /* kind: ELF */
	assert_int_equal(u32_at(c, 16 + 4), 64);    /* entry header size */
	assert_int_equal(u32_at(c, 16 + 8), csize); /* payload: the whole cubin */
	assert_int_equal(u32_at(c, 16 + 28), 90);   /* sm_90 */
	assert_int_equal(16 + 64 + csize, fsize);   /* nothing after it */
	assert_memory_equal(c + 16 + 64, cubin, csize);
	assert_int_equal(((const unsigned char *)cubin)[16], 2); /* ET_EXEC: linked */
	assert_int_equal(rgpu_image_check(img.data, img.size), 0);

	/* the container itself, and the cubin itself, locate to themselves */
	assert_int_equal(rgpu_image_locate(img.data, &img), 0);
	assert_int_equal(img.kind, RGPU_IMAGE_FATBIN);
	assert_int_equal(img.wrapper, 0);
	assert_int_equal(img.size, fsize);
	assert_int_equal(rgpu_image_locate(c + 16 + 64, &img), 0);
	assert_int_equal(img.kind, RGPU_IMAGE_ELF);
	assert_int_equal(img.size, csize);
	free(fatbin);
	free(cubin);
}

/* The relocatable containers the wrapper names are the translation units' own, in full. */
static void test_prelinked(void **state)
{
	struct rgpu_image parts[4];
	size_t n = 0, ksize, dsize;
	void *k = slurp("image_kernels.fatbin", &ksize);
	void *d = slurp("image_device.fatbin", &dsize);
	int seen_k = 0, seen_d = 0;

	(void)state;
	assert_int_equal(rgpu_image_prelinked(g_wrapper, parts, 4, &n), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(parts[i].kind, RGPU_IMAGE_FATBIN);
		if (parts[i].size == ksize && !memcmp(parts[i].data, k, ksize))
			seen_k++;
		else if (parts[i].size == dsize && !memcmp(parts[i].data, d, dsize))
			seen_d++;
	}
	assert_int_equal(seen_k, 1);
	assert_int_equal(seen_d, 1);
	/* fewer slots than parts: the count is still the full one */
	assert_int_equal(rgpu_image_prelinked(g_wrapper, parts, 1, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(rgpu_image_prelinked(g_wrapper, NULL, 0, &n), 0);
	assert_int_equal(n, 2);
	/* not a version-2 wrapper */
	assert_int_equal(rgpu_image_prelinked(wrapper_data(g_wrapper), NULL, 0, &n), RGPU_EINVAL);
	free(k);
	free(d);
}

static int count_lines(const char *path, const char *needle)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static void check_module(CUmodule mod);

/*
 * A version-2 wrapper whose device link produced no code (a PTX-only -rdc build) locates to a
 * link bundle of its empty container and its relocatable ones, byte for byte; the server's
 * check accepts exactly that, and the wrapper made of it loads (simgpu, as the driver, links
 * the relocatable containers) with every kernel and variable of the program.
 */
static void test_bundle(void **state)
{
	static const uint64_t empty[2] = {0x00100001ba55ed50ull, 0}; /* header, fatSize 0 */
	struct rgpu_image img, parts[2], wparts[2];
	unsigned char w[24], *b, *bad;
	const void *p = empty;
	void *wrap = NULL;
	uint64_t off, sz;
	size_t n;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;

	(void)state;
	memcpy(w, g_wrapper, sizeof(w));
	memcpy(w + 8, &p, sizeof(p));
	assert_int_equal(rgpu_image_prelinked(g_wrapper, parts, 2, &n), 0);
	assert_int_equal(rgpu_image_locate(w, &img), 0);
	assert_int_equal(img.kind, RGPU_IMAGE_BUNDLE);
	assert_int_equal(img.wrapper, RGPU_FATBIN_WRAPPER_LINKED);
	assert_int_equal(img.prelinked, 2);
	assert_ptr_equal(img.data, w);
	/* header 16 + 3 sizes = 40, rounded to 48; the 16-byte empty container; the two parts */
	assert_int_equal(img.size, 48 + 16 + ALIGN_UP(parts[0].size, 16) +
				       ALIGN_UP(parts[1].size, 16));
	b = malloc(img.size + 1);
	assert_non_null(b);
	rgpu_image_bundle_write(&img, b);
	assert_int_equal(u32_at(b, 0), RGPU_IMAGE_BUNDLE_MAGIC);
	assert_memory_equal(b, "RGLB", 4);
	assert_int_equal(u32_at(b, 4), 1);
	assert_int_equal(u32_at(b, 8), 3);
	assert_int_equal(u32_at(b, 12), 0);
	memcpy(&sz, b + 16, 8);
	assert_int_equal(sz, 16);
	assert_memory_equal(b + 48, empty, 16);
	off = 64;
	for (int i = 0; i < 2; i++) {
		memcpy(&sz, b + 24 + 8 * i, 8);
		assert_int_equal(sz, parts[i].size);
		assert_memory_equal(b + off, parts[i].data, parts[i].size);
		off += ALIGN_UP(sz, 16);
	}
	assert_int_equal(off, img.size);
	assert_int_equal(rgpu_image_check(b, img.size), 0);

	/* what the server refuses: a byte more or less, a size that lies, one part, version 2 */
	bad = malloc(img.size + 1);
	assert_non_null(bad);
	memcpy(bad, b, img.size);
	bad[img.size] = 0;
	assert_int_equal(rgpu_image_check(bad, img.size + 1), RGPU_ECORRUPT);
	assert_int_equal(rgpu_image_check(bad, img.size - 16), RGPU_ECORRUPT);
	assert_int_equal(rgpu_image_bundle_wrap(bad, img.size - 16, &wrap), RGPU_ECORRUPT);
	bad[24] ^= 0x10; /* the first relocatable container's size, 16 bytes off */
	assert_int_equal(rgpu_image_check(bad, img.size), RGPU_ECORRUPT);
	bad[24] ^= 0x10;
	bad[8] = 1;
	assert_int_equal(rgpu_image_check(bad, img.size), RGPU_ECORRUPT);
	bad[8] = 3;
	bad[4] = 2;
	assert_int_equal(rgpu_image_check(bad, img.size), RGPU_ECORRUPT);
	bad[4] = 1;
	assert_int_equal(rgpu_image_check(bad, img.size), 0);
	free(bad);

	/* the server's wrapper names copies of the same containers, and the driver loads it */
	assert_int_equal(rgpu_image_bundle_wrap(b, img.size, &wrap), 0);
	assert_int_equal(u32_at(wrap, 0), RGPU_FATBIN_WRAPPER_MAGIC);
	assert_int_equal(u32_at(wrap, 4), RGPU_FATBIN_WRAPPER_LINKED);
	assert_memory_equal(wrapper_data(wrap), empty, 16);
	assert_int_equal(rgpu_image_prelinked(wrap, wparts, 2, &n), 0);
	assert_int_equal(n, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(wparts[i].size, parts[i].size);
		assert_memory_equal(wparts[i].data, parts[i].data, parts[i].size);
	}
	/* the primary context: simgpu keeps a destroyed context's struct, which LeakSanitizer
	 * would report once a second created one replaced the first on the thread's stack */
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoadData(&mod, wrap));
	check_module(mod);
	CU(cuModuleUnload(mod));
	CU(cuCtxSetCurrent(NULL));
	CU(cuDevicePrimaryCtxRelease(dev));
	free(wrap);
	free(b);
}

/*
 * What is still refused, and said once each at warn: a version-2 wrapper with an empty
 * device-linked container and no relocatable ones, a wrapper of an unknown version, an
 * old-style container; and, as RGPU_EINVAL, a wrapper pointing to no container and a
 * container whose header cannot be true.
 */
static void test_refusals(void **state)
{
	static const uint64_t empty[2] = {0x00100001ba55ed50ull, 0}; /* header, fatSize 0 */
	static const void *const none_list[1] = {NULL};
	const void *const *none = none_list;
	unsigned char w[24];
	const void *p = empty;
	uint32_t v;
	struct rgpu_image img;
	char log[] = "/tmp/rgpu-test-image-XXXXXX";
	int fd = mkstemp(log);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rgpu_log_open(log), 0);
	rgpu_log_set_level(RGPU_LOG_WARN);

	memcpy(w, g_wrapper, sizeof(w));
	memcpy(w + 8, &p, sizeof(p));
	memcpy(w + 16, &none, sizeof(none));
	for (int i = 0; i < 3; i++)
		assert_int_equal(rgpu_image_locate(w, &img), RGPU_EINVAL);
	memcpy(w, g_wrapper, sizeof(w));
	memcpy(w + 8, &p, sizeof(p));
	v = 3;
	memcpy(w + 4, &v, 4);
	for (int i = 0; i < 2; i++)
		assert_int_equal(rgpu_image_locate(w, &img), RGPU_EUNSUPPORTED);
	v = 0x1EE55A01u;
	assert_int_equal(rgpu_image_locate(&v, &img), RGPU_EUNSUPPORTED);
	assert_int_equal(rgpu_image_locate(&v, &img), RGPU_EUNSUPPORTED);

	/* a version-2 wrapper whose container pointer is NULL or not a container */
	memcpy(w, g_wrapper, sizeof(w));
	p = NULL;
	memcpy(w + 8, &p, sizeof(p));
	assert_int_equal(rgpu_image_locate(w, &img), RGPU_EINVAL);
	p = "not a container";
	memcpy(w + 8, &p, sizeof(p));
	assert_int_equal(rgpu_image_locate(w, &img), RGPU_EINVAL);
	assert_int_equal(rgpu_image_locate(NULL, &img), RGPU_EINVAL);

	/* a container whose header cannot be true */
	static const uint64_t tiny[2] = {0x00080001ba55ed50ull, 0}; /* header size 8 */
	assert_int_equal(rgpu_image_locate(tiny, &img), RGPU_EINVAL);
	assert_int_equal(rgpu_image_locate(tiny, &img), RGPU_EINVAL);

	assert_int_equal(count_lines(log, "warn: image: refused"), 5);
	assert_int_equal(count_lines(log, "is NULL or not a container"), 1);
	assert_int_equal(count_lines(log, "impossible headers (header size 8"), 1);
	assert_int_equal(count_lines(log, "names no relocatable container"), 1);
	assert_int_equal(count_lines(log, "version 3"), 1);
	assert_int_equal(count_lines(log, "0x1ee55a01"), 1);
	unlink(log);
	/* a wrapper never travels: the server refuses one as corrupt */
	assert_int_equal(rgpu_image_check(g_wrapper, 24), RGPU_ECORRUPT);
}

static void expect_param(CUfunction f, size_t i, size_t off, size_t size)
{
	size_t o = 99, s = 99;
	CU(cuFuncGetParamInfo(f, i, &o, &s));
	assert_int_equal(o, off);
	assert_int_equal(s, size);
}

static void check_module(CUmodule mod)
{
	CUfunction sum, touch;
	CUdeviceptr dp;
	size_t size = 0, o, s;
	int shared = -1;
	unsigned short table[6];
	unsigned scale = 0;

	CU(cuModuleGetFunction(&sum, mod, K_SUM));
	CU(cuModuleGetFunction(&touch, mod, K_TOUCH));
	/* const unsigned *, int, struct img_pair {char; double}, short */
	expect_param(sum, 0, 0, 8);
	expect_param(sum, 1, 8, 4);
	expect_param(sum, 2, 16, 16);
	expect_param(sum, 3, 32, 2);
	assert_int_equal(cuFuncGetParamInfo(sum, 4, &o, &s), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuFuncGetParamInfo(touch, 0, &o, &s), CUDA_ERROR_INVALID_VALUE);
	CU(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, sum));
	assert_int_equal(shared, 128 * 8);
	CU(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, touch));
	assert_int_equal(shared, 0);
	/* every variable the runtime registered, at the size it registered */
	for (int i = 0; i < g_nvars; i++) {
		CU(cuModuleGetGlobal(&dp, &size, mod, g_vars[i].name));
		assert_int_equal(size, g_vars[i].size);
	}
	CU(cuModuleGetGlobal(&dp, &size, mod, "img_table"));
	assert_int_equal(size, sizeof(table));
	CU(cuMemcpyDtoH(table, dp, sizeof(table)));
	assert_int_equal(table[0], 1);
	assert_int_equal(table[3], 65535);
	assert_int_equal(table[5], 6);
	CU(cuModuleGetGlobal(&dp, &size, mod, "img_scale"));
	assert_int_equal(size, 4);
	CU(cuMemcpyDtoH(&scale, dp, sizeof(scale)));
	assert_int_equal(scale, 3);
}

/* simgpu reads the device-linked image the wrapper names, and the whole-program PTX. */
static void test_simgpu(void **state)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUlibrary lib;
	CUkernel k;
	size_t psize;
	char *ptx = slurp("image_whole.ptx", &psize);

	(void)state;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuCtxCreate(&ctx, NULL, 0, dev));
	CU(cuModuleLoadData(&mod, g_wrapper));
	check_module(mod);
	CU(cuModuleUnload(mod));
	CU(cuLibraryLoadData(&lib, g_wrapper, NULL, NULL, 0, NULL, NULL, 0));
	CU(cuLibraryGetKernel(&k, lib, K_SUM));
	CU(cuLibraryUnload(lib));
	CU(cuModuleLoadData(&mod, ptx));
	check_module(mod);
	CU(cuModuleUnload(mod));
	CU(cuCtxDestroy(ctx));
	free(ptx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_registration), cmocka_unit_test(test_locate_linked),
	    cmocka_unit_test(test_prelinked),	 cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_simgpu),	 cmocka_unit_test(test_bundle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
