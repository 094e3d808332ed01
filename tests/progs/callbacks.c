/*
 * Host functions and stream callbacks run on the client, in stream order: after the work
 * before them, before the work after them, once each, with the stream and user data given.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

#define N (1 << 16)

static atomic_int order;
static int seen_fill, seen_cb;
static unsigned *host_copy;
static unsigned first_word;

static void CUDA_CB after_fill(void *user)
{
	/* the async copy before this function has landed in host memory */
	first_word = host_copy[0];
	seen_fill = atomic_fetch_add(&order, 1) + 1;
	*(int *)user += 1;
}

/* a host function slower than the client takes to post a large copy behind it */
static atomic_int slow_ran;
static void CUDA_CB slow_fn(void *user)
{
	(void)user;
	usleep(200000);
	atomic_store(&slow_ran, 1);
}

static CUstream cb_stream;
static CUresult cb_status = (CUresult)-1;
static void CUDA_CB stream_cb(CUstream s, CUresult status, void *user)
{
	cb_stream = s;
	cb_status = status;
	seen_cb = atomic_fetch_add(&order, 1) + 1;
	*(int *)user += 10;
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction fill, spin;
	CUstream s;
	CUdeviceptr x;
	unsigned seed = 77;
	unsigned long long n = N, ns = 100000000ull;
	int calls = 0;

	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&spin, mod, "spin_ns"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&x, N * 4));
	CHECK(cuMemAllocHost((void **)&host_copy, N * 4));
	memset(host_copy, 0, N * 4);
	void *fa[] = {&x, &seed, &n};
	void *sa[] = {&ns};
	CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, sa, NULL));
	CHECK(cuLaunchKernel(fill, 64, 1, 1, 256, 1, 1, 0, s, fa, NULL));
	CHECK(cuMemcpyDtoHAsync(host_copy, x, N * 4, s));
	CHECK(cuLaunchHostFunc(s, after_fill, &calls));
	CHECK(cuStreamAddCallback(s, stream_cb, &calls, 0));
	/* the device is still spinning, so neither can have run yet */
	EXPECT(atomic_load(&order) == 0, "a host function ran before the work ahead of it");
	CHECK(cuStreamSynchronize(s));
	EXPECT(seen_fill == 1 && seen_cb == 2, "order: host func %d, callback %d", seen_fill, seen_cb);
	EXPECT(calls == 11, "user data updated to %d, want 11 (each ran once)", calls);
	EXPECT(first_word == (seed ^ 0u), "host function saw %08x before the copy landed", first_word);
	EXPECT(cb_stream == s && cb_status == CUDA_SUCCESS, "callback got stream %p status %d",
	       (void *)cb_stream, (int)cb_status);
	EXPECT_RESULT(cuStreamAddCallback(s, stream_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);

	/*
	 * A copy from pageable memory queued behind a host function: the stream holds the copy's
	 * buffers until the function has run, and the function's end must still reach the server
	 * (over shared memory, 48 MiB is more than the client's slots hold)
	 */
	size_t big = 48u << 20;
	unsigned char *pg = malloc(big), *back = malloc(big);
	CUdeviceptr y;
	EXPECT(pg && back, "no host memory");
	for (size_t i = 0; i < big; i++)
		pg[i] = (unsigned char)(i * 7 + 3);
	CHECK(cuMemAlloc(&y, big));
	alarm(60); /* a deadlock fails here, not at the test's timeout */
	CHECK(cuLaunchHostFunc(s, slow_fn, NULL));
	CHECK(cuMemcpyHtoDAsync(y, pg, big, s));
	CHECK(cuStreamSynchronize(s));
	alarm(0);
	EXPECT(atomic_load(&slow_ran), "the host function did not run");
	CHECK(cuMemcpyDtoH(back, y, big));
	EXPECT(!memcmp(pg, back, big), "the copy behind the host function differs");
	CHECK(cuMemFree(y));
	free(pg);
	free(back);
	CHECK(cuMemFreeHost(host_copy));
	CHECK(cuMemFree(x));
	CHECK(cuStreamDestroy(s));
	printf("callbacks: ordered and run once OK\n");
	return 0;
}
