/*
 * Shared by the driver-API test programs: call checking with the driver's error names, the
 * kernel image's location, and patterned data. The programs link against plain libcuda.so and
 * run unchanged natively and through rgpu.
 */
#ifndef PROGS_COMMON_H
#define PROGS_COMMON_H

#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

static inline const char *cu_name(CUresult r)
{
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "?";
	return s;
}

#define CHECK(call)                                                                            \
	do {                                                                                   \
		CUresult r_ = (call);                                                          \
		if (r_ != CUDA_SUCCESS) {                                                      \
			fprintf(stderr, "FAIL %s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #call, \
				(int)r_, cu_name(r_));                                         \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

#define EXPECT(cond, ...)                                                                      \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
			fprintf(stderr, __VA_ARGS__);                                          \
			fputc('\n', stderr);                                                   \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

#define EXPECT_RESULT(call, want)                                                              \
	do {                                                                                   \
		CUresult r_ = (call);                                                          \
		if (r_ != (want)) {                                                            \
			fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %d (%s)\n", __FILE__,     \
				__LINE__, #call, (int)r_, cu_name(r_), (int)(want),             \
				cu_name(want));                                                \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

/* path (len bytes) := file in the program's own folder; returns path. */
static inline char *next_to_exe(const char *file, char *path, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(path, len, "%s/%s", dirname(exe), file);
	return path;
}

/* The whole file, malloc'd, with a NUL after its *len bytes (PTX is given with it). */
static inline char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *buf;

	EXPECT(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	EXPECT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
	buf[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* The kernel image: $RGPU_TEST_IMAGE, else kernels.fatbin next to the program. */
static inline void *load_image(void)
{
	char path[PATH_MAX];
	const char *env = getenv("RGPU_TEST_IMAGE");

	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else
		next_to_exe("kernels.fatbin", path, sizeof(path));
	return read_file(path, NULL);
}

/* A context on device 0 and the test module loaded in it. */
static inline CUmodule setup(CUcontext *ctx)
{
	CUdevice dev;
	CUmodule mod;
	void *img = load_image();
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(ctx, dev));
	CHECK(cuCtxSetCurrent(*ctx));
	CHECK(cuModuleLoadData(&mod, img));
	free(img);
	return mod;
}

static inline uint32_t pattern32(uint64_t i, uint32_t seed)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint32_t)x;
}

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
