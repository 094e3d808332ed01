// zdtm streams: streams of different flags and priorities, with work still queued at READY.
//
// State: four streams, from cudaDeviceGetStreamPriorityRange's range: non-blocking at the
// greatest priority, blocking (default flags) at the least, non-blocking at the middle one,
// and one from plain cudaStreamCreate. Each has its own 256 KiB buffer of seeded PRNG data,
// and gets a queue of work: a kernel that spins on the GPU for 100-250 ms, then 24 launches of
// zd_step_u32 (each link's result depends on the one before: a lost, repeated or reordered
// launch changes every word), a cudaMemsetAsync in the middle of the chain, and an async copy
// of the result into pinned host memory. READY is printed WITHOUT synchronising: a
// checkpoint taken at once finds the work queued or running.
//
// Checks after the signal: cudaStreamSynchronize of each, then cudaStreamQuery is
// cudaSuccess; each buffer, and its pinned host copy, equals the chain computed on the host;
// cudaStreamGetPriority and cudaStreamGetFlags return what was set, and the priority range is
// unchanged. Then each stream gets 20 more launches plus a kernel that combines two streams'
// buffers, synchronised and verified; with ZDTM_ROUNDS=N, another unsynchronised chain is
// queued before the next READY.
#include "zdtm.h"

enum { NSTREAM = 4, N = 65536, CHAIN = 24, MORE = 20 };

struct zstream {
	const char *name;
	cudaStream_t s;
	unsigned flags;	  // as created
	int prio;	  // as created
	unsigned *d;	  // device buffer, N words
	unsigned *pinned; // the chain's async D2H copy
	unsigned *want;
};

static struct zstream st[NSTREAM];
static int least, greatest;
static unsigned long long launches;

// queue_chain() - queue on stream z a spin of spin_ms, `links` chained steps (a memset of
// words [1000, 3000) after the first half when memset is set) and, if to_host, an async copy
// into z->pinned. The host follows in z->want.
static void queue_chain(struct zstream *z, int idx, unsigned batch, int links, unsigned spin_ms,
			bool memset_mid, bool to_host)
{
	if (spin_ms) {
		zd_spin<<<1, 32, 0, z->s>>>(spin_ms * 1000000ull);
		ZK_LAUNCH();
		launches++;
	}
	for (int j = 0; j < links; j++) {
		unsigned k = zd_hash((unsigned long long)batch << 32 | (unsigned)(idx * 1000 + j),
				     0x57ea0000u);
		zd_step_u32<<<zd_blocks(N), 256, 0, z->s>>>(z->d, N, k);
		ZK_LAUNCH();
		launches++;
		for (unsigned i = 0; i < N; i++)
			z->want[i] = zd_step_word(z->want[i], i, k);
		if (memset_mid && j == links / 2) {
			ZK(cudaMemsetAsync(z->d + 1000, 0x3c + idx, 2000 * sizeof(unsigned), z->s));
			memset(z->want + 1000, 0x3c + idx, 2000 * sizeof(unsigned));
		}
	}
	if (to_host)
		ZK(cudaMemcpyAsync(z->pinned, z->d, N * sizeof(unsigned), cudaMemcpyDeviceToHost,
				   z->s));
}

static void verify(int round, const char *when, bool pinned_too)
{
	char what[128];
	int l, g;

	ZK(cudaDeviceGetStreamPriorityRange(&l, &g));
	zd_expect(l == least && g == greatest,
		  "cudaDeviceGetStreamPriorityRange: [%d, %d], was [%d, %d] before READY", l, g,
		  least, greatest);
	for (int k = 0; k < NSTREAM; k++) {
		struct zstream *z = &st[k];
		unsigned flags = ~0u;
		int prio = 12345;

		ZK(cudaStreamSynchronize(z->s));
		zd_expect_err(cudaStreamQuery(z->s), cudaSuccess);
		ZK(cudaStreamGetFlags(z->s, &flags));
		ZK(cudaStreamGetPriority(z->s, &prio));
		zd_expect(flags == z->flags,
			  "round %d %s: stream %s: cudaStreamGetFlags %u, expected %u", round + 1,
			  when, z->name, flags, z->flags);
		zd_expect(prio == z->prio,
			  "round %d %s: stream %s: cudaStreamGetPriority %d, expected %d",
			  round + 1, when, z->name, prio, z->prio);
		snprintf(what, sizeof(what), "round %d %s: stream %s buffer", round + 1, when,
			 z->name);
		zd_compare_dev(what, z->d, z->want, N * sizeof(unsigned), 4);
		if (pinned_too) {
			snprintf(what, sizeof(what), "round %d %s: stream %s async copy to pinned",
				 round + 1, when, z->name);
			zd_compare(what, z->pinned, z->want, N * sizeof(unsigned), 4);
		}
	}
}

int main()
{
	struct zd_rng rng = {0x73747265616d7301ull};

	zd_init("streams");
	ZK(cudaSetDevice(0));
	ZK(cudaDeviceGetStreamPriorityRange(&least, &greatest));

	st[0] = {"nonblocking/greatest", 0, cudaStreamNonBlocking, greatest};
	st[1] = {"default/least", 0, cudaStreamDefault, least};
	st[2] = {"nonblocking/middle", 0, cudaStreamNonBlocking, (least + greatest) / 2};
	st[3] = {"cudaStreamCreate", 0, cudaStreamDefault, 0};
	for (int k = 0; k < NSTREAM; k++) {
		struct zstream *z = &st[k];
		if (k == 3)
			ZK(cudaStreamCreate(&z->s));
		else
			ZK(cudaStreamCreateWithPriority(&z->s, z->flags, z->prio));
		ZK(cudaMalloc(&z->d, N * sizeof(unsigned)));
		ZK(cudaMallocHost(&z->pinned, N * sizeof(unsigned)));
		z->want = (unsigned *)malloc(N * sizeof(unsigned));
		zd_rand_fill(&rng, z->want, N * sizeof(unsigned));
		memset(z->pinned, 0xa5, N * sizeof(unsigned));
		ZK(cudaMemcpy(z->d, z->want, N * sizeof(unsigned), cudaMemcpyHostToDevice));
	}
	ZK(cudaDeviceSynchronize()); // non-blocking streams do not wait for those copies
	// the chains, and READY while they run: no synchronisation
	for (int k = 0; k < NSTREAM; k++)
		queue_chain(&st[k], k, 0, CHAIN, 100 + 50 * k, true, true);

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		verify(round, "after the signal", true);
		zd_round_end(round);

		// more work on every stream, on the old buffers, and one kernel across two streams'
		for (int k = 0; k < NSTREAM; k++)
			queue_chain(&st[k], k, 1000 + round, MORE, 0, false, false);
		ZK(cudaStreamSynchronize(st[1].s));
		zd_combine_u32<<<zd_blocks(N), 256, 0, st[0].s>>>(st[0].d, st[0].d, st[1].d, N);
		ZK_LAUNCH();
		launches++;
		for (unsigned i = 0; i < N; i++)
			st[0].want[i] = zd_combine_word(st[0].want[i], st[1].want[i]);
		verify(round, "after use", false);
		zd_round_end(round);
		if (round + 1 < zd_rounds) // the next round's READY comes with work queued again
			for (int k = 0; k < NSTREAM; k++)
				queue_chain(&st[k], k, round + 1, CHAIN, 100 + 50 * k, true, true);
	}

	for (int k = 0; k < NSTREAM; k++) {
		ZK(cudaStreamDestroy(st[k].s));
		ZK(cudaFree(st[k].d));
		ZK(cudaFreeHost(st[k].pinned));
		free(st[k].want);
	}
	char summary[160];
	snprintf(summary, sizeof(summary), "streams=%d launches=%llu priorities=%d,%d,%d,%d",
		 NSTREAM, launches, st[0].prio, st[1].prio, st[2].prio, st[3].prio);
	return zd_ok(summary);
}
