// zdtm managed: managed memory in all three states a CPU copy can be in at READY.
//
// State: three cudaMallocManaged buffers of 1 MiB (u32 words), made by the CPU from seeded PRNG
// data and advised read-mostly (a):
//   a  stepped by chained kernels on a non-blocking stream, then read whole by the CPU: at
//      READY the CPU holds a copy equal to the device's
//   b  stepped by kernels and not read since: at READY the CPU's copy is stale (a fault must
//      fetch it, from whichever server holds the job then)
//   c  written by the CPU after the last kernel (every 97th word): at READY the device has
//      not seen those writes yet; the first kernel after the signal must
//   v  a __managed__ variable (8192 words) the CPU filled and a kernel stepped: its address is
//      the server's driver's, which another server's driver may place elsewhere (the worker
//      then translates it)
// Checks after the signal: the CPU reads a, b, c and v whole and compares them with the
// host's model; a kernel steps c and v and the CPU checks every word (the pre-READY writes
// included);
// cudaPointerGetAttributes still says managed and the advice reads back. With ZDTM_ROUNDS=N
// each round leaves the three states again before the next READY.
#include "zdtm.h"

enum { N = 1 << 18, STEPS = 8 };

static unsigned *a, *b, *c, *wa, *wb, *wc;
static cudaStream_t s;
static unsigned long long launches;
__managed__ unsigned zm_var[8192];
static unsigned wv[8192];

// v[i] = v[i] * 3 + k
__global__ void zm_var_step(unsigned k)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < 8192; i += gridDim.x * blockDim.x)
		zm_var[i] = zm_var[i] * 3u + k;
}

static void step_var(unsigned k)
{
	zm_var_step<<<8, 256, 0, s>>>(k);
	ZK_LAUNCH();
	launches++;
	for (unsigned i = 0; i < 8192; i++)
		wv[i] = wv[i] * 3u + k;
}
static void step(unsigned *d, unsigned *want, unsigned batch, int steps)
{
	for (int j = 0; j < steps; j++) {
		unsigned k = zd_hash((unsigned long long)batch << 32 | (unsigned)j, 0x3a9a0000u);
		zd_step_u32<<<zd_blocks(N), 256, 0, s>>>(d, N, k);
		ZK_LAUNCH();
		launches++;
		for (unsigned i = 0; i < N; i++)
			want[i] = zd_step_word(want[i], i, k);
	}
}

// leave a, b and c in their READY states (see the top)
static void prepare(unsigned batch)
{
	step(a, wa, batch, STEPS);
	step(b, wb, batch + 100, STEPS);
	step(c, wc, batch + 200, 2);
	step_var(batch + 7);
	ZK(cudaStreamSynchronize(s));
	zd_compare("a read by the CPU before READY", a, wa, N * 4, 4);
	for (unsigned i = 0; i < N; i += 97) {
		c[i] = zd_hash(i, batch);
		wc[i] = c[i];
	}
}

int main()
{
	struct zd_rng rng = {0x6d616e6167656401ull};
	int dev, v = -1;

	zd_init("managed");
	ZK(cudaSetDevice(0));
	ZK(cudaGetDevice(&dev));
	ZK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	unsigned **bufs[3] = {&a, &b, &c}, **wants[3] = {&wa, &wb, &wc};
	for (int k = 0; k < 3; k++) {
		ZK(cudaMallocManaged(bufs[k], N * 4));
		*wants[k] = (unsigned *)malloc(N * 4);
		zd_rand_fill(&rng, *wants[k], N * 4);
		memcpy(*bufs[k], *wants[k], N * 4); // the CPU makes the data
	}
	cudaMemLocation loc = {};
	loc.type = cudaMemLocationTypeDevice;
	loc.id = dev;
	ZK(cudaMemAdvise(a, N * 4, cudaMemAdviseSetReadMostly, loc));
	for (unsigned i = 0; i < 8192; i++)
		zm_var[i] = wv[i] = zd_hash(i, 0x76617221u);
	prepare(0);

	for (int round = 0; round < zd_rounds; round++) {
		char what[96];
		zd_ready_wait();
		snprintf(what, sizeof(what), "round %d: a (CPU copy valid at READY)", round + 1);
		zd_compare(what, a, wa, N * 4, 4);
		snprintf(what, sizeof(what), "round %d: b (CPU copy stale at READY)", round + 1);
		zd_compare(what, b, wb, N * 4, 4);
		snprintf(what, sizeof(what), "round %d: c (CPU writes not yet sent at READY)",
			 round + 1);
		zd_compare(what, c, wc, N * 4, 4);
		snprintf(what, sizeof(what), "round %d: the __managed__ variable", round + 1);
		zd_compare(what, zm_var, wv, sizeof(wv), 4);
		step(c, wc, 1000 + round, 3);
		step_var(2000 + round);
		ZK(cudaStreamSynchronize(s));
		snprintf(what, sizeof(what), "round %d: the __managed__ variable stepped", round + 1);
		zd_compare(what, zm_var, wv, sizeof(wv), 4);
		snprintf(what, sizeof(what), "round %d: c stepped after the signal", round + 1);
		zd_compare(what, c, wc, N * 4, 4);
		cudaPointerAttributes pa;
		ZK(cudaPointerGetAttributes(&pa, b));
		zd_expect(pa.type == cudaMemoryTypeManaged, "round %d: b's type %d, expected managed",
			  round + 1, (int)pa.type);
		ZK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, a, N * 4));
		zd_expect(v == 1, "round %d: a's read-mostly advice %d, expected 1", round + 1, v);
		zd_round_end(round);
		if (round + 1 < zd_rounds)
			prepare(10 * (round + 1));
	}
	for (int k = 0; k < 3; k++) {
		ZK(cudaFree(*bufs[k]));
		free(*wants[k]);
	}
	ZK(cudaStreamDestroy(s));
	char summary[96];
	snprintf(summary, sizeof(summary), "buffers=3 words=%d launches=%llu", N, launches);
	return zd_ok(summary);
}
