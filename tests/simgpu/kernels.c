/*
 * C twins of the kernels in tests/progs/kernels.cu, tests/cuda/rt_*.cu, tests/conformance/ and
 * tests/zdtm/ (the programs whose kernels are their own, not a library's), registered when
 * libcuda.so.1 (simgpu) is loaded; the runtime-API programs' kernels are C++, registered under
 * their mangled names (`nm` on `nvcc -cubin` output lists them). Each computes bit for bit what
 * the device code computes (scale_add uses fmaf because nvcc contracts x*s+t into one fused
 * multiply-add), over the whole grid, and checks every buffer it touches with sim_device_ok()
 * first: a bad pointer ends the kernel with CUDA_ERROR_ILLEGAL_ADDRESS, as on a GPU, instead of
 * crashing the process. Keep the files in step: a kernel added there needs its twin here.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rgpu/hash.h"
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

/* tests/progs/link_a.cu's link_saxpy with link_b.cu's link_scale (3x + 1) linked in */
static void link_saxpy(const struct sim_launch *l)
{
	float *y = P(l, 0, float *);
	const float *x = P(l, 1, const float *);
	int n = P(l, 2, int);
	unsigned long long count = n > 0 ? (unsigned long long)n : 0;

	if (count > threads_x(l))
		count = threads_x(l);
	if (!sim_device_ok(x, count * 4, 0) || !sim_device_ok(y, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		y[i] = 3.0f * x[i] + 1.0f + y[i];
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

/* A grid-stride loop too: x[i] = x[i] * mul + add for every i < n, wrapping. */
static void affine_u32(const struct sim_launch *l)
{
	unsigned *x = P(l, 0, unsigned *), mul = P(l, 1, unsigned), add = P(l, 2, unsigned);
	unsigned long long n = P(l, 3, unsigned long long);

	if (n > SIZE_MAX / 4 || !sim_device_ok(x, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		x[i] = x[i] * mul + add;
}

static void empty_kernel(const struct sim_launch *l)
{
	(void)l;
}

static void sleep_ns(unsigned long long ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts))
		;
}

/* The device busy-waits on %globaltimer; the twin sleeps, which is what makes work visible. */
static void spin_ns(const struct sim_launch *l)
{
	sleep_ns(P(l, 0, unsigned long long));
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

/*
 * Conditional graph nodes: kernels.cu's cond_set, cond_pick and cond_countdown, and
 * rt_graph_cond.cu's cg_pick and cg_countdown (the same code under C++ names). One thread of
 * the device code does the work; the handle is set through sim_graph_set_conditional(), the
 * twin of the device's cudaGraphSetConditional.
 */
static void cond_set(const struct sim_launch *l)
{
	sim_graph_set_conditional(P(l, 0, unsigned long long), P(l, 1, unsigned));
}

/* the value x[0] % mod (a mod of 0, which the device leaves undefined, faults here) */
static void cond_pick(const struct sim_launch *l)
{
	const unsigned *x = P(l, 0, const unsigned *);
	unsigned mod = P(l, 1, unsigned);

	if (!mod || !sim_device_ok(x, 4, 0)) {
		sim_kernel_fault();
		return;
	}
	sim_graph_set_conditional(P(l, 2, unsigned long long), x[0] % mod);
}

static void cond_countdown(const struct sim_launch *l)
{
	unsigned *c = P(l, 0, unsigned *);

	if (!sim_device_ok(c, 8, 1)) {
		sim_kernel_fault();
		return;
	}
	c[0] -= 1;
	c[1] = c[1] * 3 + c[0];
	sim_graph_set_conditional(P(l, 1, unsigned long long), c[0] != 0);
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

/* --- tests/cuda/: the runtime-API programs ------------------------------------------------ */

/* Threads along x that pass an `if (i < n)` test: min(n, gridDim.x * blockDim.x). */
static unsigned long long upto_n(const struct sim_launch *l, long long n)
{
	unsigned long long count = n > 0 ? (unsigned long long)n : 0;

	return count < threads_x(l) ? count : threads_x(l);
}

static long long min_ll(long long a, long long b)
{
	return a < b ? a : b;
}

/* float -> int as cvt.rzi.s32 does it: toward zero, saturating, NaN -> 0. */
static int f2i_rz(float f)
{
	if (isnan(f))
		return 0;
	if (f >= 2147483648.0f)
		return INT_MAX;
	if (f <= -2147483648.0f)
		return INT_MIN;
	return (int)f;
}

/* rt_basic.cu: square(float *x, int n); its add() is vec_add's twin. */
static void rt_square(const struct sim_launch *l)
{
	float *x = P(l, 0, float *);
	unsigned long long count = upto_n(l, P(l, 1, int));

	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = x[i] * x[i];
}

/* rt_kernels.cu: isaxpy(int n, unsigned a, const unsigned *x, unsigned *y) */
static void rt_isaxpy(const struct sim_launch *l)
{
	unsigned a = P(l, 1, unsigned);
	const unsigned *x = P(l, 2, const unsigned *);
	unsigned *y = P(l, 3, unsigned *);
	unsigned long long count = upto_n(l, P(l, 0, int));

	if (!sim_device_ok(x, count * 4, 0) || !sim_device_ok(y, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		y[i] = a * x[i] + y[i];
}

/* rt_kernels.cu: grid2d(unsigned *out, int width, int height), a 3D grid of 2D blocks */
static void rt_grid2d(const struct sim_launch *l)
{
	unsigned *out = P(l, 0, unsigned *);
	long long w = P(l, 1, int), h = P(l, 2, int);
	long long xs = min_ll(w, (long long)l->grid[0] * l->block[0]);
	long long ys = min_ll(h, (long long)l->grid[1] * l->block[1]);

	if (xs <= 0 || ys <= 0)
		return;
	/* the first and the last element written, and all between */
	if (!sim_device_ok(out, (size_t)(((l->grid[2] - 1) * h + ys - 1) * w + xs) * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned bz = 0; bz < l->grid[2]; bz++)
		for (unsigned by = 0; by < l->grid[1]; by++)
			for (unsigned bx = 0; bx < l->grid[0]; bx++)
				for (unsigned ty = 0; ty < l->block[1]; ty++)
					for (unsigned tx = 0; tx < l->block[0]; tx++) {
						long long x = (long long)bx * l->block[0] + tx;
						long long y = (long long)by * l->block[1] + ty;
						if (x >= w || y >= h)
							continue;
						out[((long long)bz * h + y) * w + x] =
						    ((unsigned)y << 16) ^ (unsigned)x ^
						    ((bx + 31u * by) << 8) ^ (ty << 4) ^ (bz << 28);
					}
}

/* rt_kernels.cu: block_sum(const unsigned *in, unsigned long long *out, int n); the same tree */
static void rt_block_sum(const struct sim_launch *l)
{
	const unsigned *in = P(l, 0, const unsigned *);
	unsigned long long *out = P(l, 1, unsigned long long *), *part;
	long long n = P(l, 2, int);
	unsigned bd = l->block[0];

	if ((unsigned long long)l->shared_mem < bd * 8ull ||
	    !sim_device_ok(in, upto_n(l, n) * 4, 0) || !sim_device_ok(out, l->grid[0] * 8ull, 1) ||
	    !(part = malloc(bd * 8ull))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned b = 0; b < l->grid[0]; b++) {
		for (unsigned t = 0; t < bd; t++) {
			long long i = (long long)b * bd + t;
			part[t] = i < n ? in[i] : 0;
		}
		for (unsigned s = bd / 2; s > 0; s >>= 1)
			for (unsigned t = 0; t < s; t++)
				part[t] += part[t + s];
		out[b] = part[0];
	}
	free(part);
}

/* rt_kernels.cu: scale_by<int>(int *x, int k, int n), wrapping as the device does */
static void rt_scale_by_int(const struct sim_launch *l)
{
	int *x = P(l, 0, int *);
	unsigned k = (unsigned)P(l, 1, int);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = (int)((unsigned)x[i] * k);
}

/* rt_kernels.cu: scale_by<double>(double *x, double k, int n) */
static void rt_scale_by_double(const struct sim_launch *l)
{
	double *x = P(l, 0, double *), k = P(l, 1, double);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(x, count * 8, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = x[i] * k;
}

/* rt_kernels.cu: rtk::mix(unsigned *x, int n) */
static void rt_mix(const struct sim_launch *l)
{
	unsigned *x = P(l, 0, unsigned *);
	unsigned long long count = upto_n(l, P(l, 1, int));

	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = (x[i] * 2654435761u) ^ (unsigned)i;
}

/* rt_kernels.cu: rtk::mix(unsigned *x, unsigned salt, int n) */
static void rt_mix_salt(const struct sim_launch *l)
{
	unsigned *x = P(l, 0, unsigned *), salt = P(l, 1, unsigned);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] ^= salt + (unsigned)i;
}

/* rt_symbols.cu's struct Cfg */
struct rt_cfg {
	int a;
	float b;
	unsigned long long c;
	short d[4];
};

/* rt_first_launch.cu: first_fill(unsigned k) over 64 threads of one block, on g_out and g_seed */
static void rt_first_fill(const struct sim_launch *l)
{
	unsigned k = P(l, 0, unsigned);
	unsigned *out = sim_global(l->module, "g_out", NULL);
	unsigned *seed = sim_global(l->module, "g_seed", NULL);

	if (!out || !seed) {
		sim_kernel_fault();
		return;
	}
	for (unsigned t = 0; t < 64 && t < threads_all(l); t++)
		out[t] = *seed * 2654435761u + k * 40503u + t;
	*seed += 1;
}

/* rt_reset.cu: reset_fill(unsigned k), as first_fill above */
static void rt_reset_fill(const struct sim_launch *l)
{
	rt_first_fill(l);
}

/*
 * rgpud's own kernels (server/gpuhash.cu): the chunk hash, leaves then roots, computed with
 * the C definition (util/hash.c) so that the worker's GPU path runs on simgpu too.
 */
static void rgpu_hash_leaves(const struct sim_launch *l)
{
	const uint8_t *data = P(l, 0, const uint8_t *);
	uint64_t n = P(l, 1, uint64_t), nleaves = (n + RGPU_CHUNK_LEAF - 1) / RGPU_CHUNK_LEAF;
	uint8_t *leaves = P(l, 2, uint8_t *);

	if (!sim_device_ok(data, n, 0) || !sim_device_ok(leaves, nleaves * RGPU_HASH_LEN, 1)) {
		sim_kernel_fault();
		return;
	}
	for (uint64_t i = 0; i < nleaves && i < threads_all(l); i++) {
		uint64_t off = i * RGPU_CHUNK_LEAF;
		rgpu_sha256(data + off, n - off < RGPU_CHUNK_LEAF ? n - off : RGPU_CHUNK_LEAF,
			    leaves + i * RGPU_HASH_LEN);
	}
}

static void rgpu_hash_roots(const struct sim_launch *l)
{
	const uint8_t *leaves = P(l, 0, const uint8_t *);
	uint64_t n = P(l, 1, uint64_t), chunk = P(l, 2, uint64_t);
	uint8_t *out = P(l, 3, uint8_t *);
	uint64_t nchunks = chunk ? (n + chunk - 1) / chunk : 0;
	uint64_t nleaves = (n + RGPU_CHUNK_LEAF - 1) / RGPU_CHUNK_LEAF;
	uint8_t *msg = malloc(16 + RGPU_HASH_LEN * (RGPU_CHUNK_MAX / RGPU_CHUNK_LEAF));

	if (!msg || !chunk || chunk % RGPU_CHUNK_LEAF || chunk > RGPU_CHUNK_MAX ||
	    !sim_device_ok(leaves, nleaves * RGPU_HASH_LEN, 0) ||
	    !sim_device_ok(out, nchunks * RGPU_HASH_LEN, 1)) {
		free(msg);
		sim_kernel_fault();
		return;
	}
	for (uint64_t c = 0; c < nchunks && c < threads_all(l); c++) {
		uint64_t len = n - c * chunk < chunk ? n - c * chunk : chunk;
		uint64_t k = (len + RGPU_CHUNK_LEAF - 1) / RGPU_CHUNK_LEAF;
		memcpy(msg, RGPU_CHUNK_TAG, 8);
		for (int b = 0; b < 8; b++)
			msg[8 + b] = (uint8_t)(len >> (8 * b));
		memcpy(msg + 16, leaves + c * (chunk / RGPU_CHUNK_LEAF) * RGPU_HASH_LEN,
		       k * RGPU_HASH_LEN);
		rgpu_sha256(msg, 16 + k * RGPU_HASH_LEN, out + c * RGPU_HASH_LEN);
	}
	free(msg);
}

/* rt_sticky.cu: sticky_poke(unsigned *p, unsigned v), one thread */
static void rt_sticky_poke(const struct sim_launch *l)
{
	unsigned *p = P(l, 0, unsigned *);

	if (!sim_device_ok(p, 4, 1)) {
		sim_kernel_fault();
		return;
	}
	*p = P(l, 1, unsigned);
}

/* rt_zerocopy.cu: zc_fill(unsigned *out, unsigned n, unsigned salt), a grid-stride loop */
static void rt_zc_fill(const struct sim_launch *l)
{
	unsigned *out = P(l, 0, unsigned *), n = P(l, 1, unsigned), salt = P(l, 2, unsigned);

	if (!sim_device_ok(out, (size_t)n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < n; i++)
		out[i] = i * 2654435761u ^ salt;
}

/* rt_zerocopy.cu: zc_sum(const unsigned *in, unsigned n, unsigned long long *sum) */
static void rt_zc_sum(const struct sim_launch *l)
{
	const unsigned *in = P(l, 0, const unsigned *);
	unsigned n = P(l, 1, unsigned);
	unsigned long long *sum = P(l, 2, unsigned long long *), s = 0;

	if (!sim_device_ok(in, (size_t)n * 4, 0) || !sim_device_ok(sum, 8, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < n; i++)
		s += in[i];
	*sum = s;
}

/*
 * rt_zerocopy.cu: zc_wait(volatile unsigned *flag, unsigned release, unsigned *state, long long
 * timeout_cycles): spin until another thread stores release, or 20 s (the device's timeout
 * is in clock cycles; this one in time).
 */
static void rt_zc_wait(const struct sim_launch *l)
{
	volatile unsigned *flag = P(l, 0, volatile unsigned *);
	unsigned release = P(l, 1, unsigned), *state = P(l, 2, unsigned *);
	struct timespec t0, t;

	if (!sim_device_ok((const void *)flag, 4, 0) || !sim_device_ok(state, 4, 1)) {
		sim_kernel_fault();
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != release) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20) {
			*state = 2;
			return;
		}
		sleep_ns(1000);
	}
	*state = 1;
}

/* rt_symbols.cu: use_symbols(int k), reading the __constant__ and writing the __device__ globals */
static void rt_use_symbols(const struct sim_launch *l)
{
	int k = P(l, 0, int);
	size_t sz[7];
	const int *c_int = sim_global(l->module, "c_int", &sz[0]);
	const float *c_table = sim_global(l->module, "c_table", &sz[1]);
	const struct rt_cfg *c_cfg = sim_global(l->module, "c_cfg", &sz[2]);
	int *d_int = sim_global(l->module, "d_int", &sz[3]);
	float *d_farr = sim_global(l->module, "d_farr", &sz[4]);
	struct rt_cfg *d_cfg = sim_global(l->module, "d_cfg", &sz[5]);
	unsigned *d_out = sim_global(l->module, "d_out", &sz[6]);
	unsigned long long count = upto_n(l, 32);

	if (!c_int || !c_table || !c_cfg || !d_int || !d_farr || !d_cfg || !d_out || sz[0] != 4 ||
	    sz[1] != 128 || sz[2] != sizeof(struct rt_cfg) || sz[3] != 4 || sz[4] != 256 ||
	    sz[5] != sizeof(struct rt_cfg) || sz[6] != 128) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < count; i++) {
		d_out[i] = (unsigned)*c_int * (i + 1) + (unsigned)f2i_rz(c_table[i]) +
			   (unsigned)c_cfg->d[i % 4];
		d_farr[i] = d_farr[i] + c_table[i];
		d_farr[i + 32] = c_table[i] * c_cfg->b;
	}
	*d_int = (int)((unsigned)*d_int + (unsigned)*c_int + (unsigned)k);
	d_cfg->a = (int)((unsigned)c_cfg->a * 3u);
	d_cfg->b = c_cfg->b + 1.0f;
	d_cfg->c = c_cfg->c ^ 0xffff0000ffff0000ull;
	for (int j = 0; j < 4; j++)
		d_cfg->d[j] = (short)(c_cfg->d[j] - j);
}

/*
 * rt_streams.cu: slow_fill(unsigned *a, int n, long long spin_cycles). The device spins on
 * clock64 (1.98 GHz on an H200) before a grid-stride loop; the twin sleeps as long.
 */
static void rt_slow_fill(const struct sim_launch *l)
{
	unsigned *a = P(l, 0, unsigned *);
	int n = P(l, 1, int);
	long long cycles = P(l, 2, long long);

	if (n > 0 && !sim_device_ok(a, (size_t)n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	if (cycles > 0)
		sleep_ns((unsigned long long)cycles * 1000 / 1980);
	for (int i = 0; i < n; i++)
		a[i] = a[i] * 3u + 1u;
}

/* rt_streams.cu: transform(const unsigned *a, unsigned *b, int n) */
static void rt_transform(const struct sim_launch *l)
{
	const unsigned *a = P(l, 0, const unsigned *);
	unsigned *b = P(l, 1, unsigned *);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(a, count * 4, 0) || !sim_device_ok(b, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		b[i] = (a[i] ^ ((unsigned)i * 2654435761u)) + 7u;
}

/* rt_mallocasync.cu: pattern_fill(unsigned char *p, size_t n, unsigned seed), grid-stride */
static void rt_pattern_fill(const struct sim_launch *l)
{
	unsigned char *p = P(l, 0, unsigned char *);
	size_t n = P(l, 1, size_t);
	unsigned seed = P(l, 2, unsigned);

	if (n && !sim_device_ok(p, n, 1)) {
		sim_kernel_fault();
		return;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i * 131u) ^ (i >> 9) ^ seed);
}

/* rt_mallocasync.cu: xor_into(unsigned char *dst, const unsigned char *src, size_t n, uchar k) */
static void rt_xor_into(const struct sim_launch *l)
{
	unsigned char *dst = P(l, 0, unsigned char *);
	const unsigned char *src = P(l, 1, const unsigned char *);
	size_t n = P(l, 2, size_t);
	unsigned char k = P(l, 3, unsigned char);

	if (n && (!sim_device_ok(src, n, 0) || !sim_device_ok(dst, n, 1))) {
		sim_kernel_fault();
		return;
	}
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] ^ k;
}

/* rt_graph.cu: add_index(unsigned *t, int n) */
static void rt_add_index(const struct sim_launch *l)
{
	unsigned *t = P(l, 0, unsigned *);
	unsigned long long count = upto_n(l, P(l, 1, int));

	if (!sim_device_ok(t, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		t[i] += (unsigned)i;
}

/* rt_graph.cu: accumulate(unsigned *acc, const unsigned *t, int n) */
static void rt_accumulate(const struct sim_launch *l)
{
	unsigned *acc = P(l, 0, unsigned *);
	const unsigned *t = P(l, 1, const unsigned *);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(t, count * 4, 0) || !sim_device_ok(acc, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		acc[i] += t[i] * 3u;
}

/* rt_graph_nodes.cu: gn_affine(unsigned *dst, const unsigned *src, unsigned mul, unsigned add,
 * int n); dst may be src */
static void rt_gn_affine(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	const unsigned *src = P(l, 1, const unsigned *);
	unsigned mul = P(l, 2, unsigned), add = P(l, 3, unsigned);
	unsigned long long count = upto_n(l, P(l, 4, int));

	if (!sim_device_ok(src, count * 4, 0) || !sim_device_ok(dst, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		dst[i] = src[i] * mul + add;
}

/* rt_graph_cond.cu: cg_affine(unsigned *x, unsigned mul, unsigned add, int n), in place */
static void rt_cg_affine(const struct sim_launch *l)
{
	unsigned *x = P(l, 0, unsigned *);
	unsigned mul = P(l, 1, unsigned), add = P(l, 2, unsigned);
	unsigned long long count = upto_n(l, P(l, 3, int));

	if (!sim_device_ok(x, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		x[i] = x[i] * mul + add;
}

/* rt_graph_nodes.cu: gn_combine(unsigned *dst, const unsigned *a, const unsigned *b, int n) */
static void rt_gn_combine(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	const unsigned *a = P(l, 1, const unsigned *), *b = P(l, 2, const unsigned *);
	unsigned long long count = upto_n(l, P(l, 3, int));

	if (!sim_device_ok(a, count * 4, 0) || !sim_device_ok(b, count * 4, 0) ||
	    !sim_device_ok(dst, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		dst[i] = a[i] ^ ((b[i] << 7) | (b[i] >> 25));
}

/* rt_graph_nodes.cu: gn_mix(unsigned *dst, const unsigned *src, int n) */
static void rt_gn_mix(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	const unsigned *src = P(l, 1, const unsigned *);
	unsigned long long count = upto_n(l, P(l, 2, int));

	if (!sim_device_ok(src, count * 4, 0) || !sim_device_ok(dst, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < count; i++)
		dst[i] = dst[i] * 31u + src[i];
}

/* rt_graph_nodes.cu: gn_spin_fill(unsigned *dst, unsigned seed, int n, ull ns); the device
 * spins on %globaltimer, the twin sleeps as long */
static void rt_gn_spin_fill(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	unsigned seed = P(l, 1, unsigned);
	unsigned long long count = upto_n(l, P(l, 2, int));
	unsigned long long ns = P(l, 3, unsigned long long);

	if (!sim_device_ok(dst, count * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	if (ns)
		sleep_ns(ns);
	for (unsigned long long i = 0; i < count; i++)
		dst[i] = seed ^ ((unsigned)i * 2654435761u);
}

/*
 * rt_bigparam.cu: big_checksum(Big b, int s1, long long s2, float s3, unsigned long long *out)
 * with struct Big { unsigned w[1000]; }. Thread t sums the words t, t + blockDim.x, ...;
 * thread 0 also writes out[256..259] (256 is the program's THREADS).
 */
static void rt_big_checksum(const struct sim_launch *l)
{
	const unsigned *w = &P(l, 0, unsigned);
	int s1 = P(l, 1, int);
	long long s2 = P(l, 2, long long);
	float s3 = P(l, 3, float);
	unsigned long long *out = P(l, 4, unsigned long long *);
	unsigned bd = l->block[0], s3_bits;

	if (!sim_device_ok(out, (bd > 260 ? bd : 260) * 8ull, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned t = 0; t < bd; t++) {
		unsigned long long sum = 0;
		for (unsigned j = t; j < 1000; j += bd)
			sum += (unsigned long long)w[j] * (j + 1);
		out[t] = sum;
	}
	memcpy(&s3_bits, &s3, sizeof(s3_bits));
	out[256] = (unsigned long long)(long long)s1;
	out[257] = (unsigned long long)s2;
	out[258] = s3_bits;
	out[259] = 4000;
}

/* --- tests/conformance/ ------------------------------------------------------------------ */

/*
 * conf_kernels.cu: conf_saxpy(int n, float a, const float *x, float *y), a grid-stride loop
 * of y[i] = __fmaf_rn(a, x[i], y[i]) (conf_axpy in conf_device.cu): every i < n whatever the
 * grid. The same kernel in every build of the program (plain, -rdc, -G, PTX only, ...).
 */
static void conf_saxpy(const struct sim_launch *l)
{
	int n = P(l, 0, int);
	float a = P(l, 1, float);
	const float *x = P(l, 2, const float *);
	float *y = P(l, 3, float *);
	size_t count = n > 0 && threads_all(l) ? (size_t)n : 0;

	if (count && (!sim_device_ok(x, count * 4, 0) || !sim_device_ok(y, count * 4, 1))) {
		sim_kernel_fault();
		return;
	}
	for (size_t i = 0; i < count; i++)
		y[i] = fmaf(a, x[i], y[i]);
}

/*
 * conf_kernels.cu: conf_reduce(const unsigned *v, int n) adds v[i] * conf_scale over every
 * i < n (grid-stride) into the __device__ conf_total, modulo 2^64 as the device does. The
 * device's shared-memory tree is written for 256 threads per block: another block size would
 * read outside its tree on a GPU, and faults here.
 */
static void conf_reduce(const struct sim_launch *l)
{
	const unsigned *v = P(l, 0, const unsigned *);
	int n = P(l, 1, int);
	size_t ssz = 0, tsz = 0, count = n > 0 && threads_all(l) ? (size_t)n : 0;
	const unsigned *scale = sim_global(l->module, "conf_scale", &ssz);
	unsigned long long *total = sim_global(l->module, "conf_total", &tsz), sum = 0;

	if (!scale || !total || ssz != 4 || tsz != 8 || l->block[0] != 256 || l->block[1] != 1 ||
	    l->block[2] != 1 || (count && !sim_device_ok(v, count * 4, 0))) {
		sim_kernel_fault();
		return;
	}
	for (size_t i = 0; i < count; i++)
		sum += (unsigned long long)v[i] * *scale;
	*total += sum;
}

/*
 * conf_nvrtc.cpp: conf_nvrtc_saxpy(int n, float a, const float *x, float *y), compiled at run
 * time with -DCONF_MUL=3: y[i] = __fmaf_rn(a, x[i], y[i]) * 3.0f for i < n, one thread per
 * element, and each such thread adds 1 to the __device__ conf_nvrtc_count.
 */
static void conf_nvrtc_saxpy(const struct sim_launch *l)
{
	int n = P(l, 0, int);
	float a = P(l, 1, float);
	const float *x = P(l, 2, const float *);
	float *y = P(l, 3, float *);
	size_t csz = 0, count = (size_t)upto_n(l, n);
	unsigned *calls = sim_global(l->module, "conf_nvrtc_count", &csz);

	if (!calls || csz != 4 ||
	    (count && (!sim_device_ok(x, count * 4, 0) || !sim_device_ok(y, count * 4, 1)))) {
		sim_kernel_fault();
		return;
	}
	for (size_t i = 0; i < count; i++)
		y[i] = fmaf(a, x[i], y[i]) * 3.0f;
	*calls += (unsigned)count;
}

/*
 * rt_printf.cu: hello(int launch). Block launch % gridDim.x prints, its threads one after the
 * other (the device code orders them with __syncthreads).
 */
static void rt_hello(const struct sim_launch *l)
{
	int launch = P(l, 0, int);
	unsigned b = (unsigned)launch % l->grid[0];

	for (unsigned t = 0; t < l->block[0]; t++)
		sim_printf(l, "launch %d: block %u of %u, thread %u of %u\n", launch, b, l->grid[0],
			   t, l->block[0]);
}

/* rt_printf.cu: formats(int i, unsigned u, long long ll, float f, double d, char c) */
static void rt_formats(const struct sim_launch *l)
{
	int i = P(l, 0, int);
	unsigned u = P(l, 1, unsigned);
	long long ll = P(l, 2, long long);
	float f = P(l, 3, float);
	double d = P(l, 4, double);
	char c = P(l, 5, char);

	if (l->grid[0] > 1 && l->block[0] > 5)
		sim_printf(l,
			   "formats (block %u, thread %u): %d %u %lld %x %o %.3f %e %g %c %s "
			   "|%6d|%-6d|%07.2f|%+d| 100%%\n",
			   1u, 5u, i, u, ll, u, u, f, d, d, c, "a device string", i, i, f, -i);
}

/* rt_printf.cu: many_lines(int n), one thread */
static void rt_many_lines(const struct sim_launch *l)
{
	int n = P(l, 0, int);

	for (int k = 0; k < n; k++)
		sim_printf(l, "line %04d of %d: the quick brown fox jumps over the lazy dog\n", k,
			   n);
}

/* rt_assert.cu: say(int v), one thread */
static void rt_say(const struct sim_launch *l)
{
	sim_printf(l, "say: %d\n", P(l, 0, int));
}

/* rt_assert.cu: fail_once(int v): assert(v != 7) in thread 2 of block 1, at line 22 */
static void rt_fail_once(const struct sim_launch *l)
{
	static const unsigned block[3] = {1, 0, 0}, thread[3] = {2, 0, 0};

	if (l->grid[0] > 1 && l->block[0] > 2 && P(l, 0, int) == 7)
		sim_assert_fail(l, "v != 7", "rt_assert.cu", 22, "void fail_once(int)", block,
				thread);
}

/* --- tests/zdtm/: the checkpoint/restore state programs ---------------------------------- */

/* zdtm.h: zd_hash(i, seed), the index hash every zdtm pattern is made of */
static unsigned zd_hash(unsigned long long i, unsigned seed)
{
	unsigned x = (unsigned)i ^ ((unsigned)(i >> 32) * 0x9e3779b9u) ^ (seed * 0x85ebca6bu);

	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

/* zdtm.h: zd_fill_bytes(unsigned char *p, unsigned long long n, unsigned seed), grid-stride */
static void zd_fill_bytes(const struct sim_launch *l)
{
	unsigned char *p = P(l, 0, unsigned char *);
	unsigned long long n = P(l, 1, unsigned long long);
	unsigned seed = P(l, 2, unsigned);

	if (n && (n > SIZE_MAX || !sim_device_ok(p, n, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		p[i] = (unsigned char)(zd_hash(i, seed) >> 24);
}

/* zdtm.h: zd_mix_bytes(unsigned char *dst, const unsigned char *src, ull n, unsigned seed) */
static void zd_mix_bytes(const struct sim_launch *l)
{
	unsigned char *dst = P(l, 0, unsigned char *);
	const unsigned char *src = P(l, 1, const unsigned char *);
	unsigned long long n = P(l, 2, unsigned long long);
	unsigned seed = P(l, 3, unsigned);

	if (n && (n > SIZE_MAX || !sim_device_ok(src, n, 0) || !sim_device_ok(dst, n, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		dst[i] = (unsigned char)(src[i] * 7u + zd_hash(i, seed));
}

/* zdtm.h: zd_fill_u32(unsigned *p, unsigned long long n, unsigned seed) */
static void zd_fill_u32(const struct sim_launch *l)
{
	unsigned *p = P(l, 0, unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);
	unsigned seed = P(l, 2, unsigned);

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(p, n * 4, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		p[i] = zd_hash(i, seed);
}

/* zdtm.h: zd_step_u32(unsigned *p, unsigned long long n, unsigned k) */
static void zd_step_u32(const struct sim_launch *l)
{
	unsigned *p = P(l, 0, unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);
	unsigned k = P(l, 2, unsigned);

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(p, n * 4, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		p[i] = ((p[i] ^ k) * 1664525u) + 1013904223u + (unsigned)i;
}

/* zdtm.h: zd_combine_u32(unsigned *dst, const unsigned *a, const unsigned *b, ull n) */
static void zd_combine_u32(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	const unsigned *a = P(l, 1, const unsigned *), *b = P(l, 2, const unsigned *);
	unsigned long long n = P(l, 3, unsigned long long);

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(a, n * 4, 0) || !sim_device_ok(b, n * 4, 0) ||
		  !sim_device_ok(dst, n * 4, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		dst[i] = a[i] * 3u + (b[i] ^ 0x5bd1e995u);
}

/* zdtm_graphnodes.cu: zn_affine(unsigned *dst, const unsigned *src, ull n, unsigned mul,
 * unsigned add); dst may be src */
static void zn_affine(const struct sim_launch *l)
{
	unsigned *dst = P(l, 0, unsigned *);
	const unsigned *src = P(l, 1, const unsigned *);
	unsigned long long n = P(l, 2, unsigned long long);
	unsigned mul = P(l, 3, unsigned), add = P(l, 4, unsigned);

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(src, n * 4, 0) ||
		  !sim_device_ok(dst, n * 4, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		dst[i] = src[i] * mul + add;
}

/* zdtm_memory.cu: zd_fill_pitch(uchar *p, ull pitch, unsigned width, y0, rows, seed) */
static void zd_fill_pitch(const struct sim_launch *l)
{
	unsigned char *p = P(l, 0, unsigned char *);
	unsigned long long pitch = P(l, 1, unsigned long long);
	unsigned width = P(l, 2, unsigned), y0 = P(l, 3, unsigned), rows = P(l, 4, unsigned);
	unsigned seed = P(l, 5, unsigned);

	if (!width || !rows)
		return;
	if (!sim_device_ok(p + y0 * pitch, (rows - 1) * pitch + width, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long y = y0; y < (unsigned long long)y0 + rows; y++)
		for (unsigned x = 0; x < width; x++)
			p[y * pitch + x] = (unsigned char)(zd_hash(y * width + x, seed) >> 24);
}

/* rt_pitched.cu: out[y] = the sum of row y's w bytes, rows pitch apart */
static void pitch_row_sums(const struct sim_launch *l)
{
	const unsigned char *p = P(l, 0, const unsigned char *);
	unsigned long long pitch = P(l, 1, unsigned long long);
	unsigned w = P(l, 2, unsigned), h = P(l, 3, unsigned);
	unsigned *out = P(l, 4, unsigned *);

	if (!h)
		return;
	if ((w && !sim_device_ok(p, (h - 1) * pitch + w, 0)) ||
	    !sim_device_ok(out, h * sizeof(unsigned), 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long y = 0; y < h; y++) {
		unsigned sum = 0;
		for (unsigned x = 0; x < w; x++)
			sum += p[y * pitch + x];
		out[y] = sum;
	}
}

/* rt_managed.cu: a[i] = a[i] * s + t (fmaf, as nvcc contracts it) */
static void mm_scale(const struct sim_launch *l)
{
	float *a = P(l, 0, float *), s = P(l, 2, float), t = P(l, 3, float);
	unsigned n = P(l, 1, unsigned);

	if (n && !sim_device_ok(a, (size_t)n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < n; i++)
		a[i] = fmaf(a[i], s, t);
}

/* rt_managed.cu: a[i] += 1 */
static void mm_inc(const struct sim_launch *l)
{
	unsigned *a = P(l, 0, unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);

	if (n && !sim_device_ok(a, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		a[i] += 1;
}

/* rt_managed.cu: the sum of a list's values and its length */
struct mm_node {
	struct mm_node *next;
	unsigned long long value;
};
static void mm_walk(const struct sim_launch *l)
{
	const struct mm_node *p = P(l, 0, const struct mm_node *);
	unsigned long long *out = P(l, 1, unsigned long long *), sum = 0, len = 0;

	if (!sim_device_ok(out, 16, 1)) {
		sim_kernel_fault();
		return;
	}
	for (; p; p = p->next) {
		if (!sim_device_ok(p, sizeof(*p), 0)) {
			sim_kernel_fault();
			return;
		}
		sum += p->value;
		len++;
	}
	out[0] = sum;
	out[1] = len;
}

/* zdtm_managed.cu: zm_var_step(unsigned k) on its __managed__ zm_var[8192] */
static void zm_var_step(const struct sim_launch *l)
{
	unsigned k = P(l, 0, unsigned);
	size_t sz = 0;
	unsigned *v = sim_global(l->module, "zm_var", &sz);

	if (!v || sz != 8192 * 4) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < 8192; i++)
		v[i] = v[i] * 3u + k;
}

/* rt_managed_var.cu: mv_step(int k) on its __managed__ variables */
static void mv_step(const struct sim_launch *l)
{
	int k = P(l, 0, int);
	size_t sc = 0, ss = 0, sb = 0;
	int *counter = sim_global(l->module, "mv_counter", &sc);
	float *small = sim_global(l->module, "mv_small", &ss);
	unsigned long long *big = sim_global(l->module, "mv_big", &sb);

	if (!counter || !small || !big || sc != 4 || ss != 4000 || sb != 300000 * 8) {
		sim_kernel_fault();
		return;
	}
	*counter += k;
	for (unsigned i = 0; i < 1000; i++)
		small[i] += (float)k;
	for (unsigned long long j = 0; j < 300000; j++)
		big[j] += (unsigned long long)k * j;
}

/* zdtm_globals.cu: its globals g_arr (4096 x u32), c_tab (__constant__, 256 x u32), g_count */
struct zd_globals {
	unsigned *arr;
	const unsigned *tab;
	unsigned long long *count;
};

static int zd_globals_get(const struct sim_launch *l, struct zd_globals *g)
{
	size_t sa = 0, st = 0, sc = 0;

	g->arr = sim_global(l->module, "g_arr", &sa);
	g->tab = sim_global(l->module, "c_tab", &st);
	g->count = sim_global(l->module, "g_count", &sc);
	return g->arr && g->tab && g->count && sa == 4096 * 4 && st == 256 * 4 && sc == 8;
}

/* zdtm_globals.cu: glob_step(unsigned salt) over the 4096 words of g_arr; the sum in g_count
 * is the same whatever order the device's atomicAdds take */
static void zd_glob_step(const struct sim_launch *l)
{
	unsigned salt = P(l, 0, unsigned);
	struct zd_globals g;

	if (!zd_globals_get(l, &g)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < 4096; i++) {
		unsigned v = (g.arr[i] * 2654435761u) ^ (g.tab[i % 256] + salt);
		g.arr[i] = v;
		*g.count += v & 0xffffu;
	}
}

/* zdtm_globals.cu: glob_copy(unsigned *out): g_arr, c_tab, then g_count as two words */
static void zd_glob_copy(const struct sim_launch *l)
{
	unsigned *out = P(l, 0, unsigned *);
	struct zd_globals g;

	if (!zd_globals_get(l, &g) || !sim_device_ok(out, (4096 + 256 + 2) * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	memcpy(out, g.arr, 4096 * 4);
	memcpy(out + 4096, g.tab, 256 * 4);
	out[4096 + 256] = (unsigned)*g.count;
	out[4096 + 256 + 1] = (unsigned)(*g.count >> 32);
}

/* zdtm_mixed.cu: mixed_fold(const unsigned *src, ull n, unsigned k) into g_mix (1024 words) */
static void zd_mixed_fold(const struct sim_launch *l)
{
	const unsigned *src = P(l, 0, const unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);
	unsigned k = P(l, 2, unsigned);
	size_t sz = 0;
	unsigned *g = sim_global(l->module, "g_mix", &sz);

	if (!g || sz != 1024 * 4 || !n || !sim_device_ok(src, (n < 1024 ? n : 1024) * 4, 0)) {
		sim_kernel_fault(); /* n == 0: the device's i % n traps too */
		return;
	}
	for (unsigned i = 0; i < 1024; i++)
		g[i] = g[i] * 3u + (src[i % n] ^ k);
}

/* zdtm_fill.cu: one 32-bit word of chunk pattern `seed` (kind 1: a word per 4 KiB block) */
static unsigned zfill_word(unsigned long long i, unsigned seed, int kind)
{
	return kind ? zd_hash(i >> 10, seed) : zd_hash(i, seed);
}

#define ZFILL_CHUNK_WORDS ((2ull << 20) / 4)

/* zdtm_fill.cu: fill_chunks(unsigned *p, ull nwords, const unsigned *seeds, int kind, ull first,
 * ull step): the words of every step-th chunk from first take their chunk's pattern */
static void zfill_chunks(const struct sim_launch *l)
{
	unsigned *p = P(l, 0, unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);
	const unsigned *seeds = P(l, 2, const unsigned *);
	int kind = P(l, 3, int);
	unsigned long long first = P(l, 4, unsigned long long), step = P(l, 5, unsigned long long);
	unsigned long long nchunks = (n + ZFILL_CHUNK_WORDS - 1) / ZFILL_CHUNK_WORDS;

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(p, n * 4, 1) ||
		  !sim_device_ok(seeds, nchunks * 4, 0) || !step)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long c = first; c < nchunks; c += step)
		for (unsigned long long i = c * ZFILL_CHUNK_WORDS;
		     i < n && i < (c + 1) * ZFILL_CHUNK_WORDS; i++)
			p[i] = zfill_word(i, seeds[c], kind);
}

/* zdtm_fill.cu: fill_chunk_at(unsigned *p, ull c, const unsigned *seeds, int kind): chunk c alone */
static void zfill_chunk_at(const struct sim_launch *l)
{
	unsigned *p = P(l, 0, unsigned *);
	unsigned long long c = P(l, 1, unsigned long long);
	const unsigned *seeds = P(l, 2, const unsigned *);
	int kind = P(l, 3, int);
	unsigned long long first = c * ZFILL_CHUNK_WORDS;

	if (c > SIZE_MAX / 4 / ZFILL_CHUNK_WORDS - 1 ||
	    !sim_device_ok(p + first, ZFILL_CHUNK_WORDS * 4, 1) ||
	    !sim_device_ok(seeds + c, 4, 0)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = first; i < first + ZFILL_CHUNK_WORDS; i++)
		p[i] = zfill_word(i, seeds[c], kind);
}

/* zdtm_fill.cu: check_chunks(const unsigned *p, ull nwords, const unsigned *seeds, int kind,
 * ull *bad): *bad += the words that differ from their chunk's pattern */
static void zcheck_chunks(const struct sim_launch *l)
{
	const unsigned *p = P(l, 0, const unsigned *);
	unsigned long long n = P(l, 1, unsigned long long);
	const unsigned *seeds = P(l, 2, const unsigned *);
	int kind = P(l, 3, int);
	unsigned long long *bad = P(l, 4, unsigned long long *);
	unsigned long long nchunks = (n + ZFILL_CHUNK_WORDS - 1) / ZFILL_CHUNK_WORDS, k = 0;

	if (n && (n > SIZE_MAX / 4 || !sim_device_ok(p, n * 4, 0) ||
		  !sim_device_ok(seeds, nchunks * 4, 0) || !sim_device_ok(bad, 8, 1))) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		k += p[i] != zfill_word(i, seeds[i / ZFILL_CHUNK_WORDS], kind);
	*bad += k;
}

/* ---- tests/cuda/rt_arrays.cu: texture and surface objects ---------------------------------- */

/* tex_read2d(tex, w, h, out): the (w+4) x (h+4) texels from (-2, -2), at their centres */
static void rt_tex_read2d(const struct sim_launch *l)
{
	unsigned long long t = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned);
	float *out = P(l, 3, float *);
	unsigned long long n = (unsigned long long)(w + 4) * (h + 4);

	if (!sim_device_ok(out, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++) {
		int x = (int)(i % (w + 4)) - 2, y = (int)(i / (w + 4)) - 2;
		if (sim_tex_fetch(t, (float)x + 0.5f, (float)y + 0.5f, 0, &out[i], 4)) {
			sim_kernel_fault();
			return;
		}
	}
}

/* tex_fetch1d(tex, n, out): out[i] = tex1Dfetch<float>(tex, i) */
static void rt_tex_fetch1d(const struct sim_launch *l)
{
	unsigned long long t = P(l, 0, unsigned long long);
	unsigned n = P(l, 1, unsigned);
	float *out = P(l, 2, float *);

	if (!sim_device_ok(out, (size_t)n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned i = 0; i < n; i++)
		if (sim_tex_fetch(t, (float)i, 0, 0, &out[i], 4)) {
			sim_kernel_fault();
			return;
		}
}

/* tex_layered(tex, w, h, layers, out): every texel of every layer, at its centre */
static void rt_tex_layered(const struct sim_launch *l)
{
	unsigned long long t = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned), layers = P(l, 3, unsigned);
	float *out = P(l, 4, float *);
	unsigned long long n = (unsigned long long)w * h * layers;

	if (!sim_device_ok(out, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++) {
		unsigned x = (unsigned)(i % w), y = (unsigned)(i / w % h),
			 z = (unsigned)(i / ((unsigned long long)w * h));
		if (sim_tex_fetch(t, (float)x + 0.5f, (float)y + 0.5f, (float)z, &out[i], 4)) {
			sim_kernel_fault();
			return;
		}
	}
}

/* surf_write2d(surf, w, h): element (x, y) = (y * 1000 + x) * 0.5f */
static void rt_surf_write2d(const struct sim_launch *l)
{
	unsigned long long s = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned);

	for (unsigned y = 0; y < h; y++)
		for (unsigned x = 0; x < w; x++) {
			float v = (float)(y * 1000 + x) * 0.5f;
			if (sim_surf_access(s, (long long)x * 4, y, 0, &v, 4, 1)) {
				sim_kernel_fault();
				return;
			}
		}
}

/* ---- tests/zdtm/zdtm_arrays.cu: arrays read through texture objects, written through a surface */

/* zd_tex_read2d(tex, w, h, out): out[i] = the 32-bit texel (i % w, i / w), at its centre */
static void zd_tex_read2d(const struct sim_launch *l)
{
	unsigned long long t = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned);
	unsigned *out = P(l, 3, unsigned *);
	unsigned long long n = (unsigned long long)w * h;

	if (!sim_device_ok(out, n * 4, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++)
		if (sim_tex_fetch(t, (float)(i % w) + 0.5f, (float)(i / w) + 0.5f, 0, &out[i], 4)) {
			sim_kernel_fault();
			return;
		}
}

/* zd_tex_layered16(tex, w, h, layers, out): out[(l*h + y)*w + x] = the 16-bit texel (x, y) of l */
static void zd_tex_layered16(const struct sim_launch *l)
{
	unsigned long long t = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned), layers = P(l, 3, unsigned);
	unsigned short *out = P(l, 4, unsigned short *);
	unsigned long long n = (unsigned long long)w * h * layers;

	if (!sim_device_ok(out, n * 2, 1)) {
		sim_kernel_fault();
		return;
	}
	for (unsigned long long i = 0; i < n; i++) {
		unsigned x = (unsigned)(i % w), y = (unsigned)(i / w % h),
			 z = (unsigned)(i / ((unsigned long long)w * h));
		if (sim_tex_fetch(t, (float)x + 0.5f, (float)y + 0.5f, (float)z, &out[i], 2)) {
			sim_kernel_fault();
			return;
		}
	}
}

/* zd_surf_fill(surf, w, h, seed): element (x, y) = zd_hash(y * w + x, seed), 32 bits */
static void zd_surf_fill(const struct sim_launch *l)
{
	unsigned long long s = P(l, 0, unsigned long long);
	unsigned w = P(l, 1, unsigned), h = P(l, 2, unsigned), seed = P(l, 3, unsigned);

	for (unsigned long long i = 0; i < (unsigned long long)w * h; i++) {
		unsigned v = zd_hash(i, seed);
		if (sim_surf_access(s, (long long)(i % w) * 4, (long long)(i / w), 0, &v, 4, 1)) {
			sim_kernel_fault();
			return;
		}
	}
}

__attribute__((constructor)) static void register_kernels(void)
{
	sim_register_kernel("vec_add", vec_add);
	sim_register_kernel("link_saxpy", link_saxpy);
	sim_register_kernel("scale_add", scale_add);
	sim_register_kernel("fill_u32", fill_u32);
	sim_register_kernel("affine_u32", affine_u32);
	sim_register_kernel("empty_kernel", empty_kernel);
	sim_register_kernel("spin_ns", spin_ns);
	sim_register_kernel("add_counter", add_counter);
	sim_register_kernel("cond_set", cond_set);
	sim_register_kernel("cond_pick", cond_pick);
	sim_register_kernel("cond_countdown", cond_countdown);
	sim_register_kernel("table_sum", table_sum);
	sim_register_kernel("mixed_params", mixed_params);

	/* tests/cuda/ */
	sim_register_kernel("_Z3addPKfS0_Pfi", vec_add); /* add(): the same computation */
	sim_register_kernel("_Z6squarePfi", rt_square);
	sim_register_kernel("_Z6isaxpyijPKjPj", rt_isaxpy);
	sim_register_kernel("_Z6grid2dPjii", rt_grid2d);
	sim_register_kernel("_Z9block_sumPKjPyi", rt_block_sum);
	sim_register_kernel("_Z8scale_byIiEvPT_S0_i", rt_scale_by_int);
	sim_register_kernel("_Z8scale_byIdEvPT_S0_i", rt_scale_by_double);
	sim_register_kernel("_ZN3rtk3mixEPji", rt_mix);
	sim_register_kernel("_ZN3rtk3mixEPjji", rt_mix_salt);
	sim_register_kernel("_Z11use_symbolsi", rt_use_symbols);
	sim_register_kernel("_Z10first_fillj", rt_first_fill);
	sim_register_kernel("_Z10reset_fillj", rt_reset_fill);
	sim_register_kernel("_Z7zc_fillPjjj", rt_zc_fill);
	sim_register_kernel("_Z11sticky_pokePjj", rt_sticky_poke);
	sim_register_kernel("rgpu_hash_leaves", rgpu_hash_leaves);
	sim_register_kernel("rgpu_hash_roots", rgpu_hash_roots);
	sim_register_kernel("_Z6zc_sumPKjjPy", rt_zc_sum);
	sim_register_kernel("_Z7zc_waitPVjjPjx", rt_zc_wait);
	sim_register_kernel("_Z9slow_fillPjix", rt_slow_fill);
	sim_register_kernel("_Z9transformPKjPji", rt_transform);
	sim_register_kernel("_Z12pattern_fillPhmj", rt_pattern_fill);
	sim_register_kernel("_Z8xor_intoPhPKhmh", rt_xor_into);
	sim_register_kernel("_Z9add_indexPji", rt_add_index);
	sim_register_kernel("_Z10accumulatePjPKji", rt_accumulate);
	sim_register_kernel("_Z9gn_affinePjPKjjji", rt_gn_affine);
	sim_register_kernel("_Z10gn_combinePjPKjS1_i", rt_gn_combine);
	sim_register_kernel("_Z6gn_mixPjPKji", rt_gn_mix);
	sim_register_kernel("_Z12gn_spin_fillPjjiy", rt_gn_spin_fill);
	sim_register_kernel("_Z9cg_affinePjjji", rt_cg_affine);
	sim_register_kernel("_Z7cg_pickPKjjy", cond_pick);
	sim_register_kernel("_Z12cg_countdownPjy", cond_countdown);
	sim_register_kernel("_Z12big_checksum3BigixfPy", rt_big_checksum);
	sim_register_kernel("_Z5helloi", rt_hello);
	sim_register_kernel("_Z7formatsijxfdc", rt_formats);
	sim_register_kernel("_Z10many_linesi", rt_many_lines);
	sim_register_kernel("_Z3sayi", rt_say);
	sim_register_kernel("_Z9fail_oncei", rt_fail_once);

	/* tests/conformance/ */
	sim_register_kernel("_Z10conf_saxpyifPKfPf", conf_saxpy);
	sim_register_kernel("_Z11conf_reducePKji", conf_reduce);
	sim_register_kernel("conf_nvrtc_saxpy", conf_nvrtc_saxpy); /* extern "C" */

	/* tests/zdtm/ */
	sim_register_kernel("_Z13zd_fill_bytesPhyj", zd_fill_bytes);
	sim_register_kernel("_Z12zd_mix_bytesPhPKhyj", zd_mix_bytes);
	sim_register_kernel("_Z11zd_fill_u32Pjyj", zd_fill_u32);
	sim_register_kernel("_Z11fill_chunksPjyPKjiyy", zfill_chunks);
	sim_register_kernel("_Z12check_chunksPKjyS0_iPy", zcheck_chunks);
	sim_register_kernel("_Z13fill_chunk_atPjyPKji", zfill_chunk_at);
	sim_register_kernel("_Z11zd_step_u32Pjyj", zd_step_u32);
	sim_register_kernel("_Z14zd_combine_u32PjPKjS1_y", zd_combine_u32);
	sim_register_kernel("_Z7zd_spiny", spin_ns); /* the same computation: sleep ns */
	sim_register_kernel("_Z13zd_fill_pitchPhyjjjj", zd_fill_pitch);
	sim_register_kernel("_Z9zn_affinePjPKjyjj", zn_affine);
	sim_register_kernel("_Z14pitch_row_sumsPKhmjjPj", pitch_row_sums);
	sim_register_kernel("_Z8mm_scalePfjff", mm_scale);
	sim_register_kernel("_Z7mv_stepi", mv_step);
	sim_register_kernel("_Z11zm_var_stepj", zm_var_step);
	sim_register_kernel("_Z6mm_incPjy", mm_inc);
	sim_register_kernel("_Z7mm_walkPK7mm_nodePy", mm_walk);
	sim_register_kernel("_Z9glob_stepj", zd_glob_step);
	sim_register_kernel("_Z9glob_copyPj", zd_glob_copy);
	sim_register_kernel("_Z10mixed_foldPKjyj", zd_mixed_fold);
	sim_register_kernel("_Z10tex_read2dyjjPf", rt_tex_read2d);
	sim_register_kernel("_Z11tex_fetch1dyjPf", rt_tex_fetch1d);
	sim_register_kernel("_Z11tex_layeredyjjjPf", rt_tex_layered);
	sim_register_kernel("_Z12surf_write2dyjj", rt_surf_write2d);
	sim_register_kernel("_Z13zd_tex_read2dyjjPj", zd_tex_read2d);
	sim_register_kernel("_Z16zd_tex_layered16yjjjPt", zd_tex_layered16);
	sim_register_kernel("_Z12zd_surf_fillyjjj", zd_surf_fill);
}
