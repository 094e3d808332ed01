// zdtm events: events of each kind of flags, recorded, pending and never recorded.
//
// State: two non-blocking streams A and B with a buffer each (seeded PRNG data, then kernels).
// Events: two with default flags (a timing pair around work on A), one cudaEventDisableTiming
// (on B), one cudaEventBlockingSync (on A), one BlockingSync|DisableTiming (on B); B waits on
// an event of A (cudaStreamWaitEvent) before a kernel that reads A's buffer. All of those are
// complete before READY. One more default event is recorded on B after a kernel that spins
// for 300 ms, and READY comes without waiting for it: it is pending at a checkpoint taken at
// once. One event is created and never recorded.
//
// Checks after the signal: cudaEventQuery is cudaSuccess at once for every completed event and
// for the never-recorded one (cudaEventSynchronize of that one too); cudaEventSynchronize of
// the pending one, then its query and B's buffer; cudaEventElapsedTime of the timing pair
// recorded before READY is >= 0, and of the DisableTiming events cudaErrorInvalidResourceHandle
// (their flags survived); a new stream waits (cudaStreamWaitEvent) on the old BlockingSync
// event and reads A's buffer; the old events are recorded again with a dependency between the
// streams (a spin on A, B waits, then reads A: right only if B waited), and two timing events
// around a kernel give an elapsed time >= 0. Every byte of both buffers is compared each time.
// With ZDTM_ROUNDS=N, the pending event is recorded again behind a spin before the next READY.
#include "zdtm.h"

enum { N = 1 << 16 };
static const size_t BYTES = N * sizeof(unsigned);

struct zev {
	const char *name;
	unsigned flags;
	cudaEvent_t e;
};

enum { E_T0, E_T1, E_NOTIME, E_BLOCK, E_BLOCK_NOTIME, E_PENDING, E_NEVER, NEV };
static struct zev ev[NEV] = {
    {"default t0", cudaEventDefault},
    {"default t1", cudaEventDefault},
    {"DisableTiming", cudaEventDisableTiming},
    {"BlockingSync", cudaEventBlockingSync},
    {"BlockingSync|DisableTiming", cudaEventBlockingSync | cudaEventDisableTiming},
    {"pending", cudaEventDefault},
    {"never recorded", cudaEventDefault},
};

static cudaStream_t sa, sb;
static unsigned *da, *db, *wa, *wb;
static unsigned long long records, waits;

static void step(cudaStream_t s, unsigned *d, unsigned *want, unsigned k)
{
	zd_step_u32<<<zd_blocks(N), 256, 0, s>>>(d, N, k);
	ZK_LAUNCH();
	for (unsigned i = 0; i < N; i++)
		want[i] = zd_step_word(want[i], i, k);
}

// dst = combine(dst, src), as zd_combine_u32 does it
static void combine(cudaStream_t s, unsigned *d, unsigned *want, const unsigned *src,
		    const unsigned *src_want)
{
	zd_combine_u32<<<zd_blocks(N), 256, 0, s>>>(d, d, src, N);
	ZK_LAUNCH();
	for (unsigned i = 0; i < N; i++)
		want[i] = zd_combine_word(want[i], src_want[i]);
}

static void record(int i, cudaStream_t s)
{
	ZK(cudaEventRecord(ev[i].e, s));
	records++;
}

// the pending event: B spins 300 ms, steps, then records it; nobody waits here
static void queue_pending(unsigned k)
{
	zd_spin<<<1, 32, 0, sb>>>(300ull * 1000000);
	ZK_LAUNCH();
	step(sb, db, wb, k);
	record(E_PENDING, sb);
}

static void check_buffers(int round, const char *when)
{
	char what[128];

	snprintf(what, sizeof(what), "round %d %s: stream A's buffer", round + 1, when);
	zd_compare_dev(what, da, wa, BYTES, 4);
	snprintf(what, sizeof(what), "round %d %s: stream B's buffer", round + 1, when);
	zd_compare_dev(what, db, wb, BYTES, 4);
}

static void check_elapsed(int round, const char *when)
{
	float ms = -1;

	ZK(cudaEventElapsedTime(&ms, ev[E_T0].e, ev[E_T1].e));
	zd_expect(ms >= 0, "round %d %s: cudaEventElapsedTime(t0, t1) = %f ms", round + 1, when,
		  (double)ms);
	// a DisableTiming event, either side, is refused: the flags are part of the state
	zd_expect_err(cudaEventElapsedTime(&ms, ev[E_T0].e, ev[E_NOTIME].e),
		      cudaErrorInvalidResourceHandle);
	zd_expect_err(cudaEventElapsedTime(&ms, ev[E_BLOCK_NOTIME].e, ev[E_T1].e),
		      cudaErrorInvalidResourceHandle);
}

int main()
{
	struct zd_rng rng = {0x6576656e74730001ull};
	unsigned *dc, *wc;

	zd_init("events");
	ZK(cudaSetDevice(0));
	ZK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
	ZK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	for (int i = 0; i < NEV; i++)
		ZK(cudaEventCreateWithFlags(&ev[i].e, ev[i].flags));
	ZK(cudaMalloc(&da, BYTES));
	ZK(cudaMalloc(&db, BYTES));
	ZK(cudaMalloc(&dc, BYTES));
	wa = (unsigned *)malloc(BYTES);
	wb = (unsigned *)malloc(BYTES);
	wc = (unsigned *)malloc(BYTES);
	zd_rand_fill(&rng, wa, BYTES);
	zd_rand_fill(&rng, wb, BYTES);
	ZK(cudaMemcpy(da, wa, BYTES, cudaMemcpyHostToDevice));
	ZK(cudaMemcpy(db, wb, BYTES, cudaMemcpyHostToDevice));
	ZK(cudaDeviceSynchronize()); // A and B are non-blocking: they do not wait for those copies

	// A: t0, work, t1, work, BlockingSync. B: work, DisableTiming, waits for A's t1, reads A's
	// buffer as it was at t1 (A's later work is on A's buffer too, so B must read a copy made
	// in order: B combines from dc, copied on A before t1), then BlockingSync|DisableTiming.
	record(E_T0, sa);
	step(sa, da, wa, 0xe0001u);
	ZK(cudaMemcpyAsync(dc, da, BYTES, cudaMemcpyDeviceToDevice, sa));
	memcpy(wc, wa, BYTES);
	record(E_T1, sa);
	step(sa, da, wa, 0xe0002u);
	record(E_BLOCK, sa);
	step(sb, db, wb, 0xe0003u);
	record(E_NOTIME, sb);
	ZK(cudaStreamWaitEvent(sb, ev[E_T1].e, 0));
	waits++;
	combine(sb, db, wb, dc, wc);
	record(E_BLOCK_NOTIME, sb);
	ZK(cudaEventSynchronize(ev[E_BLOCK].e));
	ZK(cudaEventSynchronize(ev[E_BLOCK_NOTIME].e));
	check_elapsed(-1, "before READY");
	zd_round_end(-1);
	queue_pending(0xe0004u); // READY with this one still running

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		// completed before READY: complete now, without waiting
		for (int i = 0; i < NEV; i++)
			if (i != E_PENDING)
				zd_expect(cudaEventQuery(ev[i].e) == cudaSuccess,
					  "round %d: cudaEventQuery(%s) is not cudaSuccess",
					  round + 1, ev[i].name);
		ZK(cudaEventSynchronize(ev[E_NEVER].e));
		ZK(cudaEventSynchronize(ev[E_PENDING].e));
		zd_expect_err(cudaEventQuery(ev[E_PENDING].e), cudaSuccess);
		check_elapsed(round, "after the signal");
		check_buffers(round, "after the signal");
		zd_round_end(round);

		// a new stream waits on an old event and reads the old buffer
		cudaStream_t sc;
		ZK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
		ZK(cudaStreamWaitEvent(sc, ev[E_BLOCK].e, 0));
		waits++;
		ZK(cudaMemsetAsync(dc, 0, BYTES, sc));
		zd_combine_u32<<<zd_blocks(N), 256, 0, sc>>>(dc, dc, da, N);
		ZK_LAUNCH();
		for (unsigned i = 0; i < N; i++)
			wc[i] = zd_combine_word(0, wa[i]);
		ZK(cudaStreamSynchronize(sc));
		ZK(cudaStreamDestroy(sc));
		char what[96];
		snprintf(what, sizeof(what), "round %d: a new stream's kernel after an old event",
			 round + 1);
		zd_compare_dev(what, dc, wc, BYTES, 4);

		// the old events again, ordering the streams: A spins, steps, records BlockingSync;
		// B waits on it, then reads A's buffer. Without the wait B reads A's old words.
		record(E_T0, sa);
		zd_spin<<<1, 32, 0, sa>>>(100ull * 1000000);
		ZK_LAUNCH();
		step(sa, da, wa, 0xe1000u + (unsigned)round);
		record(E_T1, sa);
		record(E_BLOCK, sa);
		ZK(cudaStreamWaitEvent(sb, ev[E_BLOCK].e, 0));
		waits++;
		combine(sb, db, wb, da, wa);
		record(E_NOTIME, sb);
		record(E_BLOCK_NOTIME, sb);
		ZK(cudaEventSynchronize(ev[E_BLOCK_NOTIME].e));
		zd_expect_err(cudaEventQuery(ev[E_NOTIME].e), cudaSuccess);
		ZK(cudaEventSynchronize(ev[E_T1].e));
		check_elapsed(round, "after use");
		check_buffers(round, "after use");
		zd_round_end(round);
		if (round + 1 < zd_rounds)
			queue_pending(0xe2000u + (unsigned)round);
	}

	for (int i = 0; i < NEV; i++)
		ZK(cudaEventDestroy(ev[i].e));
	ZK(cudaStreamDestroy(sa));
	ZK(cudaStreamDestroy(sb));
	ZK(cudaFree(da));
	ZK(cudaFree(db));
	ZK(cudaFree(dc));
	free(wa);
	free(wb);
	free(wc);
	char summary[96];
	snprintf(summary, sizeof(summary), "events=%d records=%llu waits=%llu", NEV, records,
		 waits);
	return zd_ok(summary);
}
