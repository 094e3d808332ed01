/*
 * How a thread waits for the GPU: the context's scheduling flag (CU_CTX_SCHED_*, the runtime's
 * cudaSetDeviceFlags) and an event's CU_EVENT_BLOCKING_SYNC say whether a synchronization spins
 * on a CPU or sleeps, and rgpu's waits for the server's reply must do the same. Each case runs
 * a SPIN_MS kernel and synchronizes, timing the waiting thread's own CPU time against the time
 * it waited:
 *   1. the primary context made with CU_CTX_SCHED_BLOCKING_SYNC (cuDevicePrimaryCtxSetFlags
 *      before it is active): cuCtxSynchronize sleeps
 *   2. a context made with CU_CTX_SCHED_SPIN: cuStreamSynchronize spins
 *   3. the same context, an event made with CU_EVENT_BLOCKING_SYNC: cuEventSynchronize sleeps
 *   4. a context made with CU_CTX_SCHED_YIELD: the wait returns after the kernel (how much CPU
 *      a yielding poll takes depends on what else runs)
 * Every wait must last the kernel's time, and the kernel's words must be right after it.
 * Natively it passes the same way.
 */
#include "common.h"

#define SPIN_MS 300
#define N 4096u

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum how { CTX_SYNC, STREAM_SYNC, EVENT_SYNC };

/*
 * In the current context: a SPIN_MS kernel then a fill on a new stream, a wait as `how` says;
 * returns the waiting thread's CPU seconds over the seconds waited.
 */
static double wait_share(CUmodule mod, enum how how, unsigned evflags, unsigned seed)
{
	CUfunction spin, fill;
	CUstream s;
	CUevent ev;
	CUdeviceptr d;
	unsigned h[N];
	unsigned long long ns = SPIN_MS * 1000000ull, n = N;
	void *sargs[] = {&ns};
	void *fargs[] = {&d, &seed, &n};

	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, evflags));
	CHECK(cuMemAlloc(&d, N * 4));
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL));
	CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, s, fargs, NULL));
	CHECK(cuEventRecord(ev, s));
	double t0 = now_s(), c0 = thread_cpu_s();
	if (how == CTX_SYNC)
		CHECK(cuCtxSynchronize());
	else if (how == STREAM_SYNC)
		CHECK(cuStreamSynchronize(s));
	else
		CHECK(cuEventSynchronize(ev));
	double cpu = thread_cpu_s() - c0, el = now_s() - t0;
	EXPECT(el >= SPIN_MS * 0.8e-3, "the wait returned after %.3f s, the kernel takes %d ms", el,
	       SPIN_MS);
	EXPECT_RESULT(cuStreamQuery(s), CUDA_SUCCESS);
	CHECK(cuMemcpyDtoH(h, d, N * 4));
	for (unsigned i = 0; i < N; i++)
		EXPECT(h[i] == (seed ^ (unsigned)(i * 2654435761u)), "word %u is %#x", i, h[i]);
	CHECK(cuMemFree(d));
	CHECK(cuEventDestroy(ev));
	CHECK(cuStreamDestroy(s));
	return cpu / el;
}

static CUmodule load_module(void *img)
{
	CUmodule mod;
	CHECK(cuModuleLoadData(&mod, img));
	return mod;
}

int main(void)
{
	CUdevice dev;
	CUcontext prim, spin_ctx, yield_ctx;
	unsigned flags;
	int active;
	void *img = load_image();
	double share;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));

	/* 1. the primary context, blocking: the thread sleeps through the wait */
	CHECK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary flags %#x", flags);
	CHECK(cuDevicePrimaryCtxRetain(&prim, dev));
	CHECK(cuCtxSetCurrent(prim));
	CHECK(cuCtxGetFlags(&flags));
	EXPECT((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "context flags %#x", flags);
	share = wait_share(load_module(img), CTX_SYNC, 0, 0x11);
	printf("blocking context, cuCtxSynchronize: %.1f%% of the wait on a CPU\n", 100 * share);
	EXPECT(share < 0.1, "a blocking wait kept a CPU %.0f%% busy", 100 * share);

	/* 2. a spinning context: the thread polls through the wait */
	CHECK(cuCtxCreate(&spin_ctx, NULL, CU_CTX_SCHED_SPIN, dev));
	CUmodule mod = load_module(img);
	share = wait_share(mod, STREAM_SYNC, 0, 0x22);
	printf("spinning context, cuStreamSynchronize: %.1f%% of the wait on a CPU\n", 100 * share);
	/* a poll loses the CPU to whatever else runs on a small machine: a quarter at least */
	EXPECT(share > 0.25, "a spinning wait kept a CPU only %.0f%% busy", 100 * share);

	/* 3. there, an event made with CU_EVENT_BLOCKING_SYNC: its wait sleeps */
	share = wait_share(mod, EVENT_SYNC, CU_EVENT_BLOCKING_SYNC, 0x33);
	printf("spinning context, blocking event: %.1f%% of the wait on a CPU\n", 100 * share);
	EXPECT(share < 0.1, "a blocking event's wait kept a CPU %.0f%% busy", 100 * share);
	CHECK(cuCtxDestroy(spin_ctx));

	/* 4. a yielding context: the wait lasts the kernel and its result is right */
	CHECK(cuCtxCreate(&yield_ctx, NULL, CU_CTX_SCHED_YIELD, dev));
	wait_share(load_module(img), CTX_SYNC, 0, 0x44);
	CHECK(cuCtxDestroy(yield_ctx));

	CHECK(cuDevicePrimaryCtxRelease(dev));
	free(img);
	printf("blocksync: ok\n");
	return 0;
}
