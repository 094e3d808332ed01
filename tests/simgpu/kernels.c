/*
 * C twins of the kernels in tests/progs/kernels.cu, registered when libcuda.so.1 (simgpu) is
 * loaded. Each computes bit for bit what the device code computes (scale_add uses fmaf
 * because nvcc contracts x*s+t into one fused multiply-add), over the whole grid, and checks
 * every buffer it touches with sim_device_ok() first: a bad pointer ends the kernel with
 * CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU, instead of crashing the process.
 * Keep the two files in step: a kernel added there needs its twin here.
 */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "simgpu.h"

#define P(l, i, T) (*(T *)(l)->params[i])

/* Threads along x: the only dimension these kernels index with. */
static unsigned long long threads_x(const struct sim_launch *l)
{
	return (unsigned long long)l->grid[0] * l->block[0];
}

static unsigned long long threads_all(const struct sim_launch *l)
{
	return (unsigned long long)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] *
	       l->block[1] * l->block[2];
}

static void vec_add(const struct sim_launch *l)
{
	const float *a = P(l, 0, const float *), *b = P(l, 1, const float *);
	float *c = P(l, 2, float *);
	int n = P(l, 3, int);
	unsigned long long count = n > 0 ? (unsigned long long)n : 0;

	if (count > threads_x(l))
		count = threads_x(l);
	if (!sim_device_ok(a, count * 4, 0) || !sim_device_ok(b, count * 4, 0) ||
	    !sim_device_ok(c, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		c[i] = a[i] + b[i];
}

static void scale_add(const struct sim_launch *l)
{
	float *x = P(l, 0, float *), s = P(l, 1, float), t = P(l, 2, float);
	int n = P(l, 3, int);
	unsigned long long count = n > 0 ? (unsigned long long)n : 0;

	if (count > threads_x(l))
		count = threads_x(l);
	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = fmaf(x[i], s, t);
}

/* A grid-stride loop on the device: every i < n is written whatever the grid. */
static void fill_u32(const struct sim_launch *l)
{
	unsigned *x = P(l, 0, unsigned *), seed = P(l, 1, unsigned);
	unsigned long long n = P(l, 2, unsigned long long);

	if (n > SIZE_MAX / 4 || !sim_device_ok(x, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		x[i] = seed ^ (unsigned)(i * 2654435761u);
}

static void empty_kernel(const struct sim_launch *l)
{
	(void)l;
}

/* The device busy-waits on %globaltimer; the twin sleeps, which is what makes work visible. */
static void spin_ns(const struct sim_launch *l)
{
	unsigned long long ns = P(l, 0, unsigned long long);
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts))
		;
}

/* Every thread of the grid adds v once (atomicAdd wraps like unsigned arithmetic). */
static void add_counter(const struct sim_launch *l)
{
	int v = P(l, 0, int);
	int *counter = sim_global(l->module, "g_counter", NULL);

	if (!counter) {
		sim_kernel_fault();
		return;
	}
	*counter = (int)((unsigned)*counter + (unsigned)v * (unsigned)threads_all(l));
}

static void table_sum(const struct sim_launch *l)
{
	float *out = P(l, 0, float *);
	const float *table = sim_global(l->module, "g_table", NULL);
	float s = 0.0f;

	if (!table || !sim_device_ok(out, sizeof(float), 1)) {
		sim_kernel_fault();
		return;
	}
	for (int i = 0; i < 256; i++) /* the device's order: float sums are not associative */
		s += table[i];
	out[0] = s;
}

struct p48 {
	int a[12];
};
struct p4000 {
	unsigned char b[4000];
};

static void mixed_params(const struct sim_launch *l)
{
	signed char c = P(l, 0, signed char); /* char is signed on the x86-64 device ABI */
	short s = P(l, 1, short);
	const struct p48 *m = &P(l, 2, struct p48);
	const struct p4000 *big = &P(l, 3, struct p4000);
	int i = P(l, 4, int);
	double d = P(l, 5, double);
	unsigned long long *out = P(l, 6, unsigned long long *);
	long long sm = 0, sb = 0;

	if (!sim_device_ok(out, 6 * sizeof(*out), 1)) {
		sim_kernel_fault();
		return;
	}
	for (int k = 0; k < 12; k++)
		sm += m->a[k];
	for (int k = 0; k < 4000; k++)
		sb += big->b[k];
	out[0] = (unsigned long long)(long long)c;
	out[1] = (unsigned long long)(long long)s;
	out[2] = (unsigned long long)sm;
	out[3] = (unsigned long long)sb;
	out[4] = (unsigned long long)(long long)i;
	out[5] = (unsigned long long)(long long)(d * 1000);
}

__attribute__((constructor)) static void register_kernels(void)
{
	sim_register_kernel("vec_add", vec_add);
	sim_register_kernel("scale_add", scale_add);
	sim_register_kernel("fill_u32", fill_u32);
	sim_register_kernel("empty_kernel", empty_kernel);
	sim_register_kernel("spin_ns", spin_ns);
	sim_register_kernel("add_counter", add_counter);
	sim_register_kernel("table_sum", table_sum);
	sim_register_kernel("mixed_params", mixed_params);
}
