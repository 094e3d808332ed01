// zdtm pool: stream-ordered allocation from the default pool and from a created pool.
//
// State: the device's default pool (release threshold set to 48 MiB) and a pool made with
// cudaMemPoolCreate (device 0, pinned, no export handles, release threshold 16 MiB). On stream
// A, cudaMallocAsync of 1, 4097, 1 MiB + 5 and 3 MiB bytes and two more; on stream B,
// cudaMallocFromPoolAsync from the created pool of 100, 65536, 2 MiB and 5 MiB + 1 bytes and
// two more. Each is written by a kernel (zd_fill_bytes) and by an async host-to-device copy of
// seeded PRNG data over part of it; the two extra ones of each pool are freed with
// cudaFreeAsync; both streams are synchronised before READY.
//
// Checks after the signal: every byte of every live allocation; cudaDeviceGetDefaultMemPool
// and cudaDeviceGetMemPool return the same pool as before; the release thresholds read back;
// cudaPointerGetAttributes of each allocation (device memory, the same pointer). Then new
// allocations from both pools (cudaMallocAsync, cudaMallocFromPoolAsync) are computed by a
// kernel from the old ones, and half of the old ones are freed (cudaFreeAsync), the new ones
// taking their place; all read back again. With ZDTM_ROUNDS=N that is the next round's state.
#include "zdtm.h"

struct zalloc {
	const char *name;
	unsigned char *d;
	size_t size;
	unsigned char *want;
	bool from_created; // the created pool, stream B; else the default pool, stream A
};

enum { NLIVE = 8 };
static const size_t MiB = 1 << 20;
static cudaStream_t sa, sb;
static cudaMemPool_t created, def;
static const unsigned long long THR_DEFAULT = 48ull << 20, THR_CREATED = 16ull << 20;
static unsigned long long allocs, frees;

static unsigned char *pool_alloc(bool from_created, size_t size)
{
	unsigned char *d;

	if (from_created)
		ZK(cudaMallocFromPoolAsync((void **)&d, size, created, sb));
	else
		ZK(cudaMallocAsync((void **)&d, size, sa));
	allocs++;
	return d;
}

static void pool_free(unsigned char *d, bool from_created)
{
	ZK(cudaFreeAsync(d, from_created ? sb : sa));
	frees++;
}

// kernel fill of all of it, then an async host copy over [size/3, size/3 + size/2)
static void build(struct zalloc *a, const char *name, size_t size, bool from_created, unsigned seed,
		  struct zd_rng *rng)
{
	cudaStream_t s = from_created ? sb : sa;
	size_t off = size / 3, n = size / 2;

	a->name = name;
	a->size = size;
	a->from_created = from_created;
	a->d = pool_alloc(from_created, size);
	a->want = (unsigned char *)malloc(size);
	zd_fill_bytes<<<zd_blocks(size), 256, 0, s>>>(a->d, size, seed);
	ZK_LAUNCH();
	for (size_t i = 0; i < size; i++)
		a->want[i] = zd_byte(i, seed);
	if (n) {
		zd_rand_fill(rng, a->want + off, n);
		// pageable source: the copy is staged before cudaMemcpyAsync returns
		ZK(cudaMemcpyAsync(a->d + off, a->want + off, n, cudaMemcpyHostToDevice, s));
	}
}

static void verify(struct zalloc *live, int round, const char *when)
{
	char what[128];
	cudaMemPool_t p;
	unsigned long long thr = 0;

	ZK(cudaDeviceGetDefaultMemPool(&p, 0));
	zd_expect(p == def, "round %d %s: cudaDeviceGetDefaultMemPool %p, was %p", round + 1, when,
		  (void *)p, (void *)def);
	ZK(cudaDeviceGetMemPool(&p, 0));
	zd_expect(p == def, "round %d %s: cudaDeviceGetMemPool %p, was %p", round + 1, when,
		  (void *)p, (void *)def);
	ZK(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr));
	zd_expect(thr == THR_DEFAULT,
		  "round %d %s: default pool's release threshold %llu, set %llu", round + 1, when,
		  thr, THR_DEFAULT);
	ZK(cudaMemPoolGetAttribute(created, cudaMemPoolAttrReleaseThreshold, &thr));
	zd_expect(thr == THR_CREATED,
		  "round %d %s: created pool's release threshold %llu, set %llu", round + 1, when,
		  thr, THR_CREATED);
	for (int i = 0; i < NLIVE; i++) {
		struct zalloc *a = &live[i];
		cudaPointerAttributes pa;

		snprintf(what, sizeof(what), "round %d %s: %s (%zu bytes at %p, %s pool)",
			 round + 1, when, a->name, a->size, (void *)a->d,
			 a->from_created ? "created" : "default");
		zd_compare_dev(what, a->d, a->want, a->size, 1);
		ZK(cudaPointerGetAttributes(&pa, a->d));
		zd_expect(pa.type == cudaMemoryTypeDevice && pa.devicePointer == a->d,
			  "%s: cudaPointerGetAttributes type %d devicePointer %p", what,
			  (int)pa.type, pa.devicePointer);
	}
}

int main()
{
	struct zd_rng rng = {0x706f6f6c00000001ull};
	struct zalloc live[NLIVE], gone[4];
	cudaMemPoolProps props;

	zd_init("pool");
	ZK(cudaSetDevice(0));
	ZK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
	ZK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	ZK(cudaDeviceGetDefaultMemPool(&def, 0));
	unsigned long long thr = THR_DEFAULT;
	ZK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr));
	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	ZK(cudaMemPoolCreate(&created, &props));
	thr = THR_CREATED;
	ZK(cudaMemPoolSetAttribute(created, cudaMemPoolAttrReleaseThreshold, &thr));

	// interleaved: live ones and ones freed before READY, from both pools
	build(&live[0], "default 1", 1, false, 0x9001u, &rng);
	build(&gone[0], "default gone 777", 777, false, 0x9002u, &rng);
	build(&live[1], "default 4097", 4097, false, 0x9003u, &rng);
	build(&live[2], "default 1MiB+5", MiB + 5, false, 0x9004u, &rng);
	build(&gone[1], "default gone 2MiB", 2 * MiB, false, 0x9005u, &rng);
	build(&live[3], "default 3MiB", 3 * MiB, false, 0x9006u, &rng);
	build(&live[4], "created 100", 100, true, 0x9101u, &rng);
	build(&live[5], "created 65536", 65536, true, 0x9102u, &rng);
	build(&gone[2], "created gone 4MiB+1", 4 * MiB + 1, true, 0x9103u, &rng);
	build(&live[6], "created 2MiB", 2 * MiB, true, 0x9104u, &rng);
	build(&gone[3], "created gone 3", 3, true, 0x9105u, &rng);
	build(&live[7], "created 5MiB+1", 5 * MiB + 1, true, 0x9106u, &rng);
	for (int i = 0; i < 4; i++) {
		pool_free(gone[i].d, gone[i].from_created);
		free(gone[i].want);
	}
	ZK(cudaStreamSynchronize(sa));
	ZK(cudaStreamSynchronize(sb));
	verify(live, -1, "before READY");
	zd_round_end(-1);

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		verify(live, round, "after the signal");
		zd_round_end(round);

		// new allocations from both pools, computed from the old ones; every other old one
		// freed and replaced, the rest rewritten in place
		for (int i = 0; i < NLIVE; i++) {
			struct zalloc *a = &live[i];
			cudaStream_t s = a->from_created ? sb : sa;
			unsigned seed = 0x9900u + (unsigned)(round * NLIVE + i);
			unsigned char *want = (unsigned char *)malloc(a->size);
			unsigned char *nd = pool_alloc(a->from_created, a->size);

			zd_mix_bytes<<<zd_blocks(a->size), 256, 0, s>>>(nd, a->d, a->size, seed);
			ZK_LAUNCH();
			for (size_t j = 0; j < a->size; j++)
				want[j] = zd_mix_byte(a->want[j], j, seed);
			if ((i + round) % 2 == 0) {
				pool_free(a->d, a->from_created);
				a->d = nd;
				free(a->want);
				a->want = want;
			} else {
				// back into the old one, then the new one goes
				zd_mix_bytes<<<zd_blocks(a->size), 256, 0, s>>>(a->d, nd, a->size,
										seed + 1);
				ZK_LAUNCH();
				for (size_t j = 0; j < a->size; j++)
					a->want[j] = zd_mix_byte(want[j], j, seed + 1);
				pool_free(nd, a->from_created);
				free(want);
			}
		}
		ZK(cudaStreamSynchronize(sa));
		ZK(cudaStreamSynchronize(sb));
		verify(live, round, "after use");
		zd_round_end(round);
	}

	unsigned long long live_bytes = 0;
	for (int i = 0; i < NLIVE; i++) {
		live_bytes += live[i].size;
		pool_free(live[i].d, live[i].from_created);
		free(live[i].want);
	}
	ZK(cudaStreamSynchronize(sa));
	ZK(cudaStreamSynchronize(sb));
	ZK(cudaMemPoolDestroy(created));
	char summary[128];
	snprintf(summary, sizeof(summary), "pools=2 live=%d live_bytes=%llu allocs=%llu frees=%llu",
		 NLIVE, live_bytes, allocs, frees);
	return zd_ok(summary);
}
