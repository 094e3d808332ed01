// What every conformance program shares (testing.md tier 5, "the world"):
//
// - CK() / CU() / CK_LIB() end the program on any error, naming the call and the error.
// - conf_fail() records one failed comparison with the CPU reference; conf_result() prints
//   the program's one result line and returns its exit status.
// - conf_skip_on_simulated() ends the program with status 77 (ctest's SKIP_RETURN_CODE) when the
//   device is simgpu, the host-memory driver double of the CI machines: it runs only kernels
//   with a C twin, and the math libraries' kernels have none. A skipped program never claims
//   to have passed.
//
// The result line, "conformance NAME: PASS key=value ...", is the output tests/conformance/
// compare.sh compares between a native run and a run through rgpu on the GPU. Its values are
// bit-exact digests of deterministic results (integer sums, FNV-1a of result bytes from
// kernels without float atomics), so two correct runs on the same GPU print the same line and
// a wrong one cannot. Diagnostics go to stderr.
#ifndef CONF_H
#define CONF_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda.h>
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

#define CK_LAUNCH() CK(cudaGetLastError())

#define CU(call)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                          \
			const char *n_ = "?";                                                      \
			cuGetErrorName(r_, &n_);                                                   \
			fprintf(stderr, "FAIL %s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,    \
				n_, (int)r_);                                                      \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

// A library status (cublasStatus_t, cufftResult, ...): 0 is success in every one of them.
#define CK_LIB(call)                                                                               \
	do {                                                                                       \
		long s_ = (long)(call);                                                            \
		if (s_ != 0) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: status %ld\n", __FILE__, __LINE__, #call, \
				s_);                                                               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define CONF_SKIP 77

static int conf_failures;

static inline void conf_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void conf_fail(const char *fmt, ...)
{
	va_list ap;

	if (++conf_failures > 20)
		return;
	va_start(ap, fmt);
	fputs("FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

// conf_close() - whether got is within rel (relative to max(|want|, floor)) of want.
static inline bool conf_close(double got, double want, double rel, double floor_)
{
	double scale = want < 0 ? -want : want;
	double d = got - want;

	if (scale < floor_)
		scale = floor_;
	if (d < 0)
		d = -d;
	return d <= rel * scale; // false for NaN
}

// conf_expect_close() - compare n values; report the first differences and count them all.
template <typename G, typename W>
static inline bool conf_expect_close(const char *what, const G *got, const W *want, size_t n,
				     double rel, double floor_)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (conf_close((double)got[i], (double)want[i], rel, floor_))
			continue;
		if (++bad <= 5)
			conf_fail("%s[%zu] = %.9g, want %.9g", what, i, (double)got[i],
				  (double)want[i]);
	}
	if (bad > 5)
		conf_fail("%s: %zu of %zu values differ", what, bad, n);
	return bad == 0;
}

// FNV-1a, 64 bits: a digest of result bytes for the result line.
static inline uint64_t conf_fnv(const void *data, size_t n, uint64_t h = 0xcbf29ce484222325ull)
{
	const unsigned char *p = (const unsigned char *)data;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

// conf_simulated() - whether device 0 is simgpu: its name is "rgpu simgpu"
// (tests/simgpu/device.c), which rgpu's interposer reports as the server's driver gave it. A
// real device never has that name; a program that cannot even ask fails here.
static inline bool conf_simulated(void)
{
	cudaDeviceProp p;

	CK(cudaGetDeviceProperties(&p, 0));
	return strstr(p.name, "simgpu") != NULL;
}

// conf_skip_on_simulated() - exit 77, saying why, when the device is simgpu.
static inline void conf_skip_on_simulated(const char *prog, const char *why)
{
	if (!conf_simulated())
		return;
	printf("conformance %s: SKIP on the simulated device (simgpu): %s\n", prog, why);
	fflush(stdout);
	exit(CONF_SKIP);
}

// conf_result() - print the result line; the exit status of the program.
static inline int conf_result(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int conf_result(const char *prog, const char *fmt, ...)
{
	va_list ap;

	if (conf_failures) {
		printf("conformance %s: FAIL (%d wrong)\n", prog, conf_failures);
		return 1;
	}
	printf("conformance %s: PASS ", prog);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return 0;
}

#endif
