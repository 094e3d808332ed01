// zdtm mixed: a bit of every kind of state at once, changed between rounds (ZDTM_ROUNDS).
//
// State: a __device__ array (g_mix, 1024 words); two streams (non-blocking at the greatest
// priority, blocking at the least); cudaMalloc buffers of 1 MiB + 7 bytes and 256 Ki words;
// a stream-ordered allocation from the default pool; a default event and a DisableTiming one;
// a graph captured on the second stream (a step of the word buffer, a kernel folding it into
// an accumulator, a device-to-device copy) and its executable graph. At READY, work is still
// queued on the first stream (a 150 ms spin, then a step of the pool allocation) behind which
// the default event is recorded.
//
// Checks after the signal, every round: the default event synchronises and then queries
// cudaSuccess; the streams' flags and priorities; every byte of every buffer, of the pool
// allocation and of g_mix (cudaMemcpyFromSymbol); its symbol address is unchanged; the
// DisableTiming event still refuses cudaEventElapsedTime. Then the state changes in a way
// each part of it shows: the graph is launched (the accumulator grows), a kernel folds the
// word buffer into g_mix, the byte buffer is mixed in place, the pool allocation is replaced by
// a new one computed from it, the events are recorded again, and new work is queued on the
// first stream before the next READY. Everything is verified again after those changes.
#include "zdtm.h"

enum { NG = 1024, NW = 256 * 1024, NPOOL = 200000 }; // NPOOL <= NW: combined with the words
static const size_t NBYTES = (1 << 20) + 7;

__device__ unsigned g_mix[NG];

// g_mix[i] = g_mix[i] * 3 + (src[i % n] ^ k), for i < 1024
__global__ void mixed_fold(const unsigned *src, unsigned long long n, unsigned k)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < NG;
	     i += gridDim.x * blockDim.x)
		g_mix[i] = g_mix[i] * 3u + (src[i % n] ^ k);
}

static cudaStream_t s1, s2;
static int least, greatest;
static unsigned char *d_bytes, *w_bytes;
static unsigned *d_words, *w_words, *d_acc, *w_acc, *d_copy, *d_pool, *w_pool;
static unsigned w_g[NG];
static void *g_addr;
static cudaEvent_t e_done, e_notime;
static cudaGraphExec_t exec;
static unsigned long long launches;
static const unsigned GRAPH_K = 0xbb67ae85u;

static void host_step(unsigned *w, unsigned long long n, unsigned k)
{
	for (unsigned long long i = 0; i < n; i++)
		w[i] = zd_step_word(w[i], i, k);
}

// work queued at READY: a spin on s1, a step of the pool allocation, the default event
static void queue_pending(unsigned k)
{
	zd_spin<<<1, 32, 0, s1>>>(150ull * 1000000);
	ZK_LAUNCH();
	zd_step_u32<<<zd_blocks(NPOOL), 256, 0, s1>>>(d_pool, NPOOL, k);
	ZK_LAUNCH();
	host_step(w_pool, NPOOL, k);
	ZK(cudaEventRecord(e_done, s1));
	launches += 2;
}

static void graph_host(void)
{
	host_step(w_words, NW, GRAPH_K);
	for (unsigned i = 0; i < NW; i++)
		w_acc[i] = zd_combine_word(w_acc[i], w_words[i]);
}

static void verify(int round, const char *when)
{
	char what[128];
	unsigned flags;
	int prio;
	float ms;
	void *addr;
	static unsigned got_g[NG];

	ZK(cudaEventSynchronize(e_done));
	zd_expect_err(cudaEventQuery(e_done), cudaSuccess);
	ZK(cudaStreamSynchronize(s1));
	ZK(cudaStreamSynchronize(s2));
	ZK(cudaStreamGetFlags(s1, &flags));
	ZK(cudaStreamGetPriority(s1, &prio));
	zd_expect(flags == cudaStreamNonBlocking && prio == greatest,
		  "round %d %s: stream 1 flags %u priority %d, expected %u %d", round + 1, when,
		  flags, prio, (unsigned)cudaStreamNonBlocking, greatest);
	ZK(cudaStreamGetFlags(s2, &flags));
	ZK(cudaStreamGetPriority(s2, &prio));
	zd_expect(flags == cudaStreamDefault && prio == least,
		  "round %d %s: stream 2 flags %u priority %d, expected %u %d", round + 1, when,
		  flags, prio, (unsigned)cudaStreamDefault, least);
	zd_expect_err(cudaEventElapsedTime(&ms, e_done, e_notime), cudaErrorInvalidResourceHandle);

	snprintf(what, sizeof(what), "round %d %s: byte buffer", round + 1, when);
	zd_compare_dev(what, d_bytes, w_bytes, NBYTES, 1);
	snprintf(what, sizeof(what), "round %d %s: word buffer", round + 1, when);
	zd_compare_dev(what, d_words, w_words, NW * 4, 4);
	snprintf(what, sizeof(what), "round %d %s: graph accumulator", round + 1, when);
	zd_compare_dev(what, d_acc, w_acc, NW * 4, 4);
	snprintf(what, sizeof(what), "round %d %s: graph output copy", round + 1, when);
	zd_compare_dev(what, d_copy, w_acc, NW * 4, 4);
	snprintf(what, sizeof(what), "round %d %s: pool allocation", round + 1, when);
	zd_compare_dev(what, d_pool, w_pool, NPOOL * 4, 4);
	ZK(cudaMemcpyFromSymbol(got_g, g_mix, sizeof(got_g)));
	snprintf(what, sizeof(what), "round %d %s: g_mix", round + 1, when);
	zd_compare(what, got_g, w_g, sizeof(w_g), 4);
	ZK(cudaGetSymbolAddress(&addr, g_mix));
	zd_expect(addr == g_addr, "round %d %s: cudaGetSymbolAddress(g_mix) %p, was %p", round + 1,
		  when, addr, g_addr);
}

// the changes between rounds; each touches a different part of the state
static void mutate(int round)
{
	unsigned r = (unsigned)round;

	// the old executable graph (accumulator grows)
	ZK(cudaGraphLaunch(exec, s2));
	graph_host();
	// s1 waits for the graph (an event recorded on s2), then folds the words into g_mix
	ZK(cudaEventRecord(e_notime, s2));
	ZK(cudaStreamWaitEvent(s1, e_notime, 0));
	mixed_fold<<<2, 256, 0, s1>>>(d_words, NW, 0xf00du + r);
	ZK_LAUNCH();
	for (unsigned i = 0; i < NG; i++)
		w_g[i] = w_g[i] * 3u + (w_words[i % NW] ^ (0xf00du + r));
	// the byte buffer in place, on s2
	zd_mix_bytes<<<zd_blocks(NBYTES), 256, 0, s2>>>(d_bytes, d_bytes, NBYTES, 0x3300u + r);
	ZK_LAUNCH();
	for (size_t i = 0; i < NBYTES; i++)
		w_bytes[i] = zd_mix_byte(w_bytes[i], i, 0x3300u + r);
	// the pool allocation replaced by one computed from it, on s1
	unsigned *nd;
	ZK(cudaMallocAsync((void **)&nd, NPOOL * 4, s1));
	zd_combine_u32<<<zd_blocks(NPOOL), 256, 0, s1>>>(nd, d_pool, d_words, NPOOL);
	ZK_LAUNCH();
	for (unsigned i = 0; i < NPOOL; i++)
		w_pool[i] = zd_combine_word(w_pool[i], w_words[i]);
	ZK(cudaFreeAsync(d_pool, s1));
	d_pool = nd;
	launches += 3;
}

int main()
{
	struct zd_rng rng = {0x6d69786564000001ull};
	cudaGraph_t graph;

	zd_init("mixed");
	ZK(cudaSetDevice(0));
	ZK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
	ZK(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, greatest));
	ZK(cudaStreamCreateWithPriority(&s2, cudaStreamDefault, least));
	ZK(cudaEventCreate(&e_done));
	ZK(cudaEventCreateWithFlags(&e_notime, cudaEventDisableTiming));

	ZK(cudaMalloc(&d_bytes, NBYTES));
	ZK(cudaMalloc(&d_words, NW * 4));
	ZK(cudaMalloc(&d_acc, NW * 4));
	ZK(cudaMalloc(&d_copy, NW * 4));
	w_bytes = (unsigned char *)malloc(NBYTES);
	w_words = (unsigned *)malloc(NW * 4);
	w_acc = (unsigned *)malloc(NW * 4);
	w_pool = (unsigned *)malloc(NPOOL * 4);
	zd_rand_fill(&rng, w_bytes, NBYTES);
	ZK(cudaMemcpy(d_bytes, w_bytes, NBYTES, cudaMemcpyHostToDevice));
	zd_fill_u32<<<zd_blocks(NW), 256>>>(d_words, NW, 0x77000001u);
	ZK_LAUNCH();
	for (unsigned i = 0; i < NW; i++)
		w_words[i] = zd_hash(i, 0x77000001u);
	zd_rand_fill(&rng, w_acc, NW * 4);
	ZK(cudaMemcpy(d_acc, w_acc, NW * 4, cudaMemcpyHostToDevice));
	zd_rand_fill(&rng, w_g, sizeof(w_g));
	ZK(cudaMemcpyToSymbol(g_mix, w_g, sizeof(w_g)));
	ZK(cudaGetSymbolAddress(&g_addr, g_mix));
	ZK(cudaDeviceSynchronize());

	ZK(cudaMallocAsync((void **)&d_pool, NPOOL * 4, s1));
	zd_fill_u32<<<zd_blocks(NPOOL), 256, 0, s1>>>(d_pool, NPOOL, 0x77000002u);
	ZK_LAUNCH();
	for (unsigned i = 0; i < NPOOL; i++)
		w_pool[i] = zd_hash(i, 0x77000002u);

	// the graph, captured on s2 and launched once
	ZK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
	zd_step_u32<<<zd_blocks(NW), 256, 0, s2>>>(d_words, NW, GRAPH_K);
	ZK_LAUNCH();
	zd_combine_u32<<<zd_blocks(NW), 256, 0, s2>>>(d_acc, d_acc, d_words, NW);
	ZK_LAUNCH();
	ZK(cudaMemcpyAsync(d_copy, d_acc, NW * 4, cudaMemcpyDeviceToDevice, s2));
	ZK(cudaStreamEndCapture(s2, &graph));
	ZK(cudaGraphInstantiate(&exec, graph, 0));
	ZK(cudaGraphDestroy(graph)); // as PyTorch does: the executable graph outlives it
	ZK(cudaGraphLaunch(exec, s2));
	graph_host();
	ZK(cudaEventRecord(e_notime, s2));
	ZK(cudaStreamSynchronize(s2));
	queue_pending(0x5050u); // READY with this still running

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		verify(round, "after the signal");
		zd_round_end(round);
		mutate(round);
		if (round + 1 < zd_rounds) {
			queue_pending(0x6060u + (unsigned)round);
			verify(round, "after use");
			// verify() synchronised: queue again, so the next READY finds work queued
			queue_pending(0x7070u + (unsigned)round);
		} else {
			ZK(cudaEventRecord(e_done, s1));
			verify(round, "after use");
		}
		zd_round_end(round);
	}

	ZK(cudaFreeAsync(d_pool, s1));
	ZK(cudaStreamSynchronize(s1));
	ZK(cudaGraphExecDestroy(exec));
	ZK(cudaEventDestroy(e_done));
	ZK(cudaEventDestroy(e_notime));
	ZK(cudaStreamDestroy(s1));
	ZK(cudaStreamDestroy(s2));
	ZK(cudaFree(d_bytes));
	ZK(cudaFree(d_words));
	ZK(cudaFree(d_acc));
	ZK(cudaFree(d_copy));
	char summary[96];
	snprintf(summary, sizeof(summary), "launches=%llu g_mix[0]=0x%08x", launches, w_g[0]);
	return zd_ok(summary);
}
