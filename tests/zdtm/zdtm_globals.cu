// zdtm globals: a module's __device__ and __constant__ variables.
//
// State: g_arr (__device__, 4096 x u32), c_tab (__constant__, 256 x u32) and g_count
// (__device__ unsigned long long), set with cudaMemcpyToSymbol from seeded PRNG data (g_arr
// also in a second, offset write) and then changed by a kernel, glob_step, that rewrites g_arr
// from itself and c_tab and adds to g_count; cudaGetSymbolAddress and cudaGetSymbolSize of each
// are recorded before READY.
//
// Checks after the signal: the symbol addresses and sizes are the same (both values printed if
// not); all three variables read back with cudaMemcpyFromSymbol, with a plain cudaMemcpy from
// the symbol's address, and through a kernel (glob_copy) that copies them into a cudaMalloc
// buffer, all equal to the expected values. Then it uses them: glob_step again, a new
// cudaMemcpyToSymbol of part of g_arr (at an offset) and all of c_tab, and reads everything
// back again; with ZDTM_ROUNDS=N that is the state the next round verifies.
#include "zdtm.h"

enum { NARR = 4096, NTAB = 256 };

__device__ unsigned g_arr[NARR];
__constant__ unsigned c_tab[NTAB];
__device__ unsigned long long g_count;

// g_arr[i] = g_arr[i] * 2654435761 ^ (c_tab[i % 256] + salt); g_count += the new g_arr[i] & 0xffff
__global__ void glob_step(unsigned salt)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < NARR;
	     i += gridDim.x * blockDim.x) {
		unsigned v = (g_arr[i] * 2654435761u) ^ (c_tab[i % NTAB] + salt);
		g_arr[i] = v;
		atomicAdd(&g_count, (unsigned long long)(v & 0xffffu));
	}
}

// out = g_arr (4096 words), then c_tab (256 words), then g_count (two words, little-endian)
__global__ void glob_copy(unsigned *out)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < NARR + NTAB + 2;
	     i += gridDim.x * blockDim.x) {
		if (i < NARR)
			out[i] = g_arr[i];
		else if (i < NARR + NTAB)
			out[i] = c_tab[i - NARR];
		else
			out[i] = (unsigned)(g_count >> (32 * (i - NARR - NTAB)));
	}
}

static unsigned want_arr[NARR], want_tab[NTAB];
static unsigned long long want_count;

static void step_host(unsigned salt)
{
	for (unsigned i = 0; i < NARR; i++) {
		want_arr[i] = (want_arr[i] * 2654435761u) ^ (want_tab[i % NTAB] + salt);
		want_count += want_arr[i] & 0xffffu;
	}
}

static void step(unsigned salt)
{
	glob_step<<<4, 256>>>(salt);
	ZK_LAUNCH();
	step_host(salt);
}

struct syms {
	void *arr, *tab, *count;
	size_t arr_size, tab_size, count_size;
};

static void get_syms(struct syms *s)
{
	ZK(cudaGetSymbolAddress(&s->arr, g_arr));
	ZK(cudaGetSymbolAddress(&s->tab, c_tab));
	ZK(cudaGetSymbolAddress(&s->count, g_count));
	ZK(cudaGetSymbolSize(&s->arr_size, g_arr));
	ZK(cudaGetSymbolSize(&s->tab_size, c_tab));
	ZK(cudaGetSymbolSize(&s->count_size, g_count));
}

static void check_sym(const char *name, const void *before, const void *now, size_t size_before,
		      size_t size_now, size_t size_want)
{
	zd_expect(before == now, "cudaGetSymbolAddress(%s): %p before READY, %p after", name,
		  before, now);
	zd_expect(size_before == size_want && size_now == size_want,
		  "cudaGetSymbolSize(%s): %zu before READY, %zu after, expected %zu", name,
		  size_before, size_now, size_want);
}

static void verify(int round, const char *when, const struct syms *before, unsigned *scratch)
{
	static unsigned got_arr[NARR], got_tab[NTAB], via_kernel[NARR + NTAB + 2];
	unsigned long long got_count;
	struct syms now;
	char what[128];

	get_syms(&now);
	check_sym("g_arr", before->arr, now.arr, before->arr_size, now.arr_size, sizeof(g_arr));
	check_sym("c_tab", before->tab, now.tab, before->tab_size, now.tab_size, sizeof(c_tab));
	check_sym("g_count", before->count, now.count, before->count_size, now.count_size,
		  sizeof(g_count));

	// 1. cudaMemcpyFromSymbol
	ZK(cudaMemcpyFromSymbol(got_arr, g_arr, sizeof(got_arr)));
	ZK(cudaMemcpyFromSymbol(got_tab, c_tab, sizeof(got_tab)));
	ZK(cudaMemcpyFromSymbol(&got_count, g_count, sizeof(got_count)));
	snprintf(what, sizeof(what), "round %d %s: g_arr by cudaMemcpyFromSymbol", round + 1, when);
	zd_compare(what, got_arr, want_arr, sizeof(want_arr), 4);
	snprintf(what, sizeof(what), "round %d %s: c_tab by cudaMemcpyFromSymbol", round + 1, when);
	zd_compare(what, got_tab, want_tab, sizeof(want_tab), 4);
	snprintf(what, sizeof(what), "round %d %s: g_count by cudaMemcpyFromSymbol", round + 1,
		 when);
	zd_compare(what, &got_count, &want_count, 8, 8);

	// 2. a plain copy from the address cudaGetSymbolAddress gave before READY
	snprintf(what, sizeof(what), "round %d %s: g_arr at its address", round + 1, when);
	zd_compare_dev(what, before->arr, want_arr, sizeof(want_arr), 4);
	snprintf(what, sizeof(what), "round %d %s: c_tab at its address", round + 1, when);
	zd_compare_dev(what, before->tab, want_tab, sizeof(want_tab), 4);
	snprintf(what, sizeof(what), "round %d %s: g_count at its address", round + 1, when);
	zd_compare_dev(what, before->count, &want_count, 8, 8);

	// 3. a kernel that reads them into a cudaMalloc buffer
	unsigned want_all[NARR + NTAB + 2];
	memcpy(want_all, want_arr, sizeof(want_arr));
	memcpy(want_all + NARR, want_tab, sizeof(want_tab));
	memcpy(want_all + NARR + NTAB, &want_count, 8);
	ZK(cudaMemset(scratch, 0xee, sizeof(via_kernel)));
	glob_copy<<<3, 512>>>(scratch);
	ZK_LAUNCH();
	ZK(cudaMemcpy(via_kernel, scratch, sizeof(via_kernel), cudaMemcpyDeviceToHost));
	snprintf(what, sizeof(what), "round %d %s: g_arr, c_tab, g_count read by a kernel",
		 round + 1, when);
	zd_compare(what, via_kernel, want_all, sizeof(want_all), 4);
}

int main()
{
	struct zd_rng rng = {0x676c6f62616c7301ull};
	struct syms before;
	unsigned part[1000], *scratch;
	unsigned long long steps = 0, symbol_writes = 0;

	zd_init("globals");
	ZK(cudaSetDevice(0));

	zd_rand_fill(&rng, want_arr, sizeof(want_arr));
	zd_rand_fill(&rng, want_tab, sizeof(want_tab));
	want_count = zd_next(&rng) >> 8;
	ZK(cudaMemcpyToSymbol(g_arr, want_arr, sizeof(want_arr)));
	ZK(cudaMemcpyToSymbol(c_tab, want_tab, sizeof(want_tab)));
	ZK(cudaMemcpyToSymbol(g_count, &want_count, sizeof(want_count)));
	// a second write at an offset, over part of g_arr
	zd_rand_fill(&rng, part, sizeof(part));
	ZK(cudaMemcpyToSymbol(g_arr, part, sizeof(part), 1234 * sizeof(unsigned)));
	memcpy(want_arr + 1234, part, sizeof(part));
	symbol_writes += 4;
	step(0x51u);
	step(0x52u);
	steps += 2;
	ZK(cudaMalloc(&scratch, (NARR + NTAB + 2) * sizeof(unsigned)));
	get_syms(&before);
	verify(-1, "before READY", &before, scratch);
	zd_round_end(-1);
	ZK(cudaDeviceSynchronize());

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		verify(round, "after the signal", &before, scratch);
		zd_round_end(round);

		// use them: a kernel, new symbol writes (part of g_arr at an offset, all of c_tab)
		step(0x1000u + (unsigned)round);
		steps++;
		zd_rand_fill(&rng, part, sizeof(part));
		unsigned off = 7 + (311 * (unsigned)round) % (NARR - 1000 - 7);
		ZK(cudaMemcpyToSymbol(g_arr, part, sizeof(part), off * sizeof(unsigned)));
		memcpy(want_arr + off, part, sizeof(part));
		zd_rand_fill(&rng, want_tab, sizeof(want_tab));
		ZK(cudaMemcpyToSymbol(c_tab, want_tab, sizeof(want_tab)));
		symbol_writes += 2;
		step(0x2000u + (unsigned)round);
		steps++;
		verify(round, "after use", &before, scratch);
		ZK(cudaDeviceSynchronize());
		zd_round_end(round);
	}
	ZK(cudaFree(scratch));

	char summary[160];
	snprintf(summary, sizeof(summary),
		 "symbols=3 symbol_bytes=%zu kernel_steps=%llu "
		 "symbol_writes=%llu g_count=%llu",
		 sizeof(g_arr) + sizeof(c_tab) + sizeof(g_count), steps, symbol_writes, want_count);
	return zd_ok(summary);
}
