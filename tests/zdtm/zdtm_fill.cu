// zdtm_fill: one large allocation filled on the GPU, for the checkpoint tests that need bulk:
// the kill -9 test (a checkpoint being written when rgpud dies) and the checkpoint benchmark
// (tests/bench/ckpt_bench.sh: throughput for 1-32 GiB, a second checkpoint after 10% changed).
//
//   ZDTM_FILL_MIB   size in MiB (default 64), a multiple of 2
//   ZDTM_FILL_KIND  random (default: every 32-bit word a hash of its index) or compressible
//                   (4 KiB blocks of one repeated word: zstd takes them to almost nothing)
//   ZDTM_FILL_SEED  the first seed (default 1)
//   ZDTM_FILL_BUSY  MiB/s: instead of sleeping after READY, keep working until SIGUSR1: check
//                   every chunk, give chunks new seeds and fill them, this many MiB rewritten per
//                   second, evenly (every 10 ms, the next chunks of the tenth it rewrites; all of
//                   it checked every 200 ms). 0: as fast as it goes, a whole tenth each step and
//                   a check each step. Unset: sleep, as zdtm does.
//   ZDTM_FILL_HOT   with ZDTM_FILL_BUSY, =1: the busy steps rewrite always the same tenth (a hot
//                   set, as a training run rewrites its weights), not a different one each step
//   ZDTM_ROUNDS     rounds, as every zdtm program (README.md)
//
// Before each READY the memory holds a known state: each 2 MiB chunk the pattern of its own
// seed, kept in a small device array. After each SIGUSR1 a kernel counts the words that differ
// from it (every byte checked on the device, at HBM speed), then 10% of the chunks (every tenth,
// a different tenth each round) get a new seed and are filled again, so the next checkpoint
// finds exactly that 10% changed. The last line is zdtm's OK line, or FAIL with the count.
#include "zdtm.h"

#define CHUNK_WORDS ((2ull << 20) / 4) // 2 MiB chunks, as the checkpoint store cuts memory

__host__ __device__ static inline unsigned fill_word(unsigned long long i, unsigned seed, int kind)
{
	// compressible: one word per 4 KiB block, the same in the whole block
	return kind ? zd_hash(i >> 10, seed) : zd_hash(i, seed);
}

// Chunk c of p (its words) takes the pattern of seeds[c].
__global__ void fill_chunks(unsigned *p, unsigned long long nwords, const unsigned *seeds,
			    int kind, unsigned long long first, unsigned long long step)
{
	ZD_GRID_STRIDE(i, nwords)
	{
		unsigned long long c = i / CHUNK_WORDS;
		if (c >= first && (c - first) % step == 0)
			p[i] = fill_word(i, seeds[c], kind);
	}
}

// Chunk c of p alone takes the pattern of seeds[c] (a busy step's few chunks).
__global__ void fill_chunk_at(unsigned *p, unsigned long long c, const unsigned *seeds, int kind)
{
	ZD_GRID_STRIDE(j, CHUNK_WORDS)
	{
		unsigned long long i = c * CHUNK_WORDS + j;
		p[i] = fill_word(i, seeds[c], kind);
	}
}

// Count the words of p that differ from their chunk's pattern.
__global__ void check_chunks(const unsigned *p, unsigned long long nwords, const unsigned *seeds,
			     int kind, unsigned long long *bad)
{
	ZD_GRID_STRIDE(i, nwords)
	{
		if (p[i] != fill_word(i, seeds[i / CHUNK_WORDS], kind))
			atomicAdd(bad, 1ull);
	}
}

// While busy (ZDTM_FILL_BUSY): READY, then until SIGUSR1 check everything and rewrite a tenth
// (rate 0), or rewrite rate MiB/s evenly, a few chunks every 10 ms, and check everything every
// 200 ms. Every check counts; a difference fails the round.
static void busy_wait(unsigned *p, unsigned long long nwords, unsigned *seeds, unsigned *hseeds,
		      unsigned long long nchunks, int kind, unsigned long long *bad, double rate,
		      unsigned long long *iters)
{
	struct timespec t0, now;
	unsigned long long nbad = 0, k = 0;
	double rewritten = 0;
	const char *hot_s = getenv("ZDTM_FILL_HOT");
	int hot = hot_s && !strcmp(hot_s, "1");

	zd_signalled = 0;
	printf("READY\n");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	// evenly (rate > 0): the chunks to rewrite each 10 ms, taken in turn from the hot tenth
	// (chunks 0, 10, 20...) or from all chunks
	unsigned long long per = rate > 0 ? (unsigned long long)(rate * 0.01 / 2.0 + 0.5) : 0,
			   ncand = hot ? (nchunks + 9) / 10 : nchunks, pos = 0;
	double last_check = -1;
	if (rate > 0 && per < 1)
		per = 1;
	while (!zd_signalled) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double el = (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		if (rate <= 0 || el - last_check >= 0.2) {
			ZK(cudaMemset(bad, 0, sizeof(*bad)));
			check_chunks<<<zd_blocks(nwords), 256>>>(p, nwords, seeds, kind, bad);
			ZK_LAUNCH();
			ZK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
			zd_expect(nbad == 0,
				  "busy step %llu: %llu of %llu words differ from their chunk's pattern",
				  k, nbad, nwords);
			zd_bytes += nwords * 4;
			last_check = el;
		}
		if (rate <= 0) {
			unsigned long long first = hot ? 0 : k % 10, n = 0;
			for (unsigned long long c = first; c < nchunks; c += 10, n++)
				hseeds[c] += 7u;
			ZK(cudaMemcpy(seeds, hseeds, nchunks * sizeof(unsigned),
				      cudaMemcpyHostToDevice));
			fill_chunks<<<zd_blocks(nwords), 256>>>(p, nwords, seeds, kind, first, 10);
			ZK_LAUNCH();
			rewritten += n * 2.0;
		} else {
			for (unsigned long long j = 0; j < per; j++, pos = (pos + 1) % ncand) {
				unsigned long long c = hot ? pos * 10 : pos;
				hseeds[c] += 7u;
				ZK(cudaMemcpy(seeds + c, hseeds + c, sizeof(unsigned),
					      cudaMemcpyHostToDevice));
				fill_chunk_at<<<zd_blocks(CHUNK_WORDS), 256>>>(p, c, seeds, kind);
				ZK_LAUNCH();
			}
			rewritten += per * 2.0;
		}
		ZK(cudaDeviceSynchronize());
		k++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		el = (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		// busy through many migrations (e2e.live_1g: minutes on a loaded machine): the
		// test's own timeout bounds it, this only ends a forgotten one
		if (el > 6.0 * ZD_WAIT_SECONDS) {
			printf("FAIL timeout waiting for SIGUSR1 (busy)\n");
			fflush(stdout);
			exit(1);
		}
		if (rate > 0 && rewritten / rate > el) {
			double d = rewritten / rate - el;
			struct timespec st = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
			nanosleep(&st, NULL);
		}
	}
	*iters += k;
}

int main(void)
{
	const char *mib_s = getenv("ZDTM_FILL_MIB"), *kind_s = getenv("ZDTM_FILL_KIND"),
		   *seed_s = getenv("ZDTM_FILL_SEED"), *busy_s = getenv("ZDTM_FILL_BUSY");
	unsigned long long mib = mib_s && *mib_s ? strtoull(mib_s, NULL, 10) : 64;
	int kind = kind_s && !strcmp(kind_s, "compressible");
	unsigned seed = seed_s && *seed_s ? (unsigned)strtoul(seed_s, NULL, 10) : 1;
	unsigned long long nwords, nchunks, *bad, nbad = 0, iters = 0;
	unsigned *p, *seeds, *hseeds;
	char extra[160];

	zd_init("fill");
	if (mib < 2 || mib % 2) {
		printf("zdtm fill: FAIL ZDTM_FILL_MIB=%llu is not an even number of MiB\n", mib);
		return 1;
	}
	nwords = mib << 18;
	nchunks = mib / 2;
	hseeds = (unsigned *)malloc(nchunks * sizeof(unsigned));
	for (unsigned long long c = 0; c < nchunks; c++)
		hseeds[c] = seed + (unsigned)c * 7919u;
	ZK(cudaMalloc(&p, nwords * 4));
	ZK(cudaMalloc(&seeds, nchunks * sizeof(unsigned)));
	ZK(cudaMalloc(&bad, sizeof(*bad)));
	ZK(cudaMemcpy(seeds, hseeds, nchunks * sizeof(unsigned), cudaMemcpyHostToDevice));
	fill_chunks<<<zd_blocks(nwords), 256>>>(p, nwords, seeds, kind, 0, 1);
	ZK_LAUNCH();
	ZK(cudaDeviceSynchronize());
	for (int r = 0; r < zd_rounds; r++) {
		if (busy_s && *busy_s)
			busy_wait(p, nwords, seeds, hseeds, nchunks, kind, bad, atof(busy_s), &iters);
		else
			zd_ready_wait();
		ZK(cudaMemset(bad, 0, sizeof(*bad)));
		check_chunks<<<zd_blocks(nwords), 256>>>(p, nwords, seeds, kind, bad);
		ZK_LAUNCH();
		ZK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
		zd_expect(nbad == 0, "round %d: %llu of %llu words differ from their chunk's pattern",
			  r + 1, nbad, nwords);
		zd_bytes += nwords * 4;
		zd_round_end(r);
		// every tenth chunk, a different tenth each round, changes
		unsigned long long first = (unsigned long long)r % 10;
		for (unsigned long long c = first; c < nchunks; c += 10)
			hseeds[c] += 1000003u;
		ZK(cudaMemcpy(seeds, hseeds, nchunks * sizeof(unsigned), cudaMemcpyHostToDevice));
		fill_chunks<<<zd_blocks(nwords), 256>>>(p, nwords, seeds, kind, first, 10);
		ZK_LAUNCH();
		ZK(cudaDeviceSynchronize());
	}
	free(hseeds);
	snprintf(extra, sizeof(extra), "mib=%llu kind=%s chunks=%llu busy_steps=%llu", mib,
		 kind ? "compressible" : "random", nchunks, iters);
	return zd_ok(extra);
}
