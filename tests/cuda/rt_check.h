// Checks shared by the runtime-API test programs: CK() ends the program on any CUDA error,
// naming the call; rt_expect_*() compare arrays element by element and report the first few
// differences. A program that finds a difference prints it and exits 1 at its end.
#ifndef RT_CHECK_H
#define RT_CHECK_H

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,    \
				cudaGetErrorName(e_), cudaGetErrorString(e_));                     \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

// Launch errors show at cudaGetLastError(); errors of the kernel itself at the next sync.
#define CK_LAUNCH() CK(cudaGetLastError())

static int rt_failures;

// rt_fail() - record one failed check and say what differed.
static inline void rt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void rt_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	rt_failures++;
}

// rt_expect_u32() etc. - compare n elements; report up to 5 differences and their count.
#define RT_EXPECT_ARRAY(fn, T, fmt)                                                                \
	static inline bool fn(const char *what, const T *got, const T *want, size_t n)             \
	{                                                                                          \
		size_t bad = 0;                                                                    \
		for (size_t i = 0; i < n; i++) {                                                   \
			if (memcmp(&got[i], &want[i], sizeof(T)) == 0)                             \
				continue;                                                          \
			if (++bad <= 5)                                                            \
				rt_fail("%s[%zu] = " fmt ", want " fmt, what, i, got[i], want[i]); \
		}                                                                                  \
		if (bad > 5)                                                                       \
			rt_fail("%s: %zu of %zu elements differ", what, bad, n);                   \
		return bad == 0;                                                                   \
	}
RT_EXPECT_ARRAY(rt_expect_u8, unsigned char, "0x%02x")
RT_EXPECT_ARRAY(rt_expect_u32, unsigned, "0x%08x")
RT_EXPECT_ARRAY(rt_expect_i32, int, "%d")
RT_EXPECT_ARRAY(rt_expect_u64, unsigned long long, "0x%016llx")
RT_EXPECT_ARRAY(rt_expect_f32, float, "%.9g")
RT_EXPECT_ARRAY(rt_expect_f64, double, "%.17g")

// rt_done() - the summary line and the exit status: 0 only when every check passed.
static inline int rt_done(const char *prog, const char *summary)
{
	if (rt_failures) {
		printf("%s: FAILED (%d check(s))\n", prog, rt_failures);
		return 1;
	}
	printf("%s: %s OK\n", prog, summary);
	return 0;
}

#endif
