/*
 * Stream-capture modes: which calls a capture in progress refuses, and what becomes of the
 * capture. The rows of tests/gpu/capture_probe.cu that rgpu enforces, through the driver API:
 * a capture begun on this thread in each mode, or a global-mode capture begun on another
 * thread while this thread is in each mode (cuThreadExchangeStreamCaptureMode); for each, one
 * call, then the capture's status (cuStreamIsCapturing) and cuStreamEndCapture's result. The
 * capturing stream is non-blocking, so that the legacy stream's implicit synchronisation stays
 * out of the way; a few rows with a blocking one check that rule on its own (work on the
 * legacy stream: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT in every mode). Every line is checked
 * against what the probe measured on an H200 (driver 580, CUDA 13.0: ret 0 left the capture
 * active and it ended well, 900 invalidated it and its end returned 901, and 906 likewise), so
 * the same lines come out natively and through rgpu (tests/gpu/run.sh compares them). Last, a
 * capture after all those refusals still makes a graph that runs.
 */
#include <pthread.h>

#include "common.h"

#define BUF (1u << 20)

enum { THIS_GLOBAL, THIS_LOCAL, THIS_RELAXED, OTHER_GLOBAL, OTHER_LOCAL, OTHER_RELAXED };

static CUcontext ctx;
static CUfunction f_empty, f_fill;
static CUmodule mod;

/* What the calls work on, made before each capture. */
struct env {
	CUstream cap, other;
	CUevent done;	   /* recorded and complete before the capture */
	CUdeviceptr dev;   /* 1 MiB of device memory */
	void *pinned;	   /* 1 MiB of pinned memory */
	void *pageable;	   /* 1 MiB, page aligned */
	CUdeviceptr dfree; /* made before the capture, for cuMemFree */
	void *hfree;	   /* made before the capture, for cuMemFreeHost */
	CUdeviceptr dmade; /* what cuMemAlloc made */
	void *hmade;	   /* what cuMemAllocHost made */
};

struct call {
	const char *name;
	int (*call)(struct env *e);
	/* the probe's ret for THIS_GLOBAL .. OTHER_RELAXED, nonblocking capture stream */
	int want[6];
};

static int c_alloc(struct env *e)
{
	return (int)cuMemAlloc(&e->dmade, BUF);
}
static int c_free(struct env *e)
{
	int r = (int)cuMemFree(e->dfree);
	if (r == 0)
		e->dfree = 0;
	return r;
}
static int c_alloc_host(struct env *e)
{
	return (int)cuMemAllocHost(&e->hmade, BUF);
}
static int c_free_host(struct env *e)
{
	int r = (int)cuMemFreeHost(e->hfree);
	if (r == 0)
		e->hfree = NULL;
	return r;
}
static int c_host_register(struct env *e)
{
	return (int)cuMemHostRegister(e->pageable, BUF, 0);
}
static int c_sync_other(struct env *e)
{
	return (int)cuStreamSynchronize(e->other);
}
static int c_query_other(struct env *e)
{
	return (int)cuStreamQuery(e->other);
}
static int c_event_sync(struct env *e)
{
	return (int)cuEventSynchronize(e->done);
}
static int c_event_query(struct env *e)
{
	return (int)cuEventQuery(e->done);
}
static int c_sync_capturing(struct env *e)
{
	return (int)cuStreamSynchronize(e->cap);
}
static int c_query_capturing(struct env *e)
{
	return (int)cuStreamQuery(e->cap);
}
static int c_ctx_sync(struct env *e)
{
	(void)e;
	return (int)cuCtxSynchronize();
}
static int c_mem_info(struct env *e)
{
	size_t f, t;
	(void)e;
	return (int)cuMemGetInfo(&f, &t);
}
static int c_copy_other(struct env *e)
{
	return (int)cuMemcpyHtoDAsync(e->dev, e->pinned, 4096, e->other);
}
static int c_func_attr(struct env *e)
{
	int v;
	(void)e;
	return (int)cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f_empty);
}
static int c_dev_attr(struct env *e)
{
	int v;
	(void)e;
	return (int)cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0);
}

#define UNSAFE                                                                                     \
	{                                                                                          \
		900, 900, 0, 900, 0, 0                                                             \
	}
#define ALWAYS                                                                                     \
	{                                                                                          \
		900, 900, 900, 900, 900, 900                                                       \
	}
#define SAFE                                                                                       \
	{                                                                                          \
		0, 0, 0, 0, 0, 0                                                                   \
	}

static const struct call calls[] = {
    {"cuMemAlloc", c_alloc, UNSAFE},
    {"cuMemFree", c_free, UNSAFE},
    {"cuMemAllocHost", c_alloc_host, UNSAFE},
    {"cuMemFreeHost", c_free_host, UNSAFE},
    {"cuMemHostRegister", c_host_register, UNSAFE},
    {"cuStreamSynchronize_other", c_sync_other, UNSAFE},
    {"cuStreamQuery_other", c_query_other, UNSAFE},
    {"cuEventSynchronize_outside", c_event_sync, UNSAFE},
    {"cuEventQuery_outside", c_event_query, UNSAFE},
    {"cuStreamSynchronize_capturing", c_sync_capturing, ALWAYS},
    {"cuStreamQuery_capturing", c_query_capturing, ALWAYS},
    {"cuCtxSynchronize", c_ctx_sync, ALWAYS},
    {"cuMemGetInfo", c_mem_info, SAFE},
    {"cuMemcpyHtoDAsync_other_stream", c_copy_other, SAFE},
    {"cuFuncGetAttribute", c_func_attr, SAFE},
    {"cuDeviceGetAttribute", c_dev_attr, SAFE},
};

/* Work on the legacy stream, with a blocking capturing stream: 906 in every mode. */
static int c_copy_sync(struct env *e)
{
	return (int)cuMemcpyHtoD(e->dev, e->pageable, 4096);
}
static int c_memset_sync(struct env *e)
{
	return (int)cuMemsetD32(e->dev, 0, 1024);
}
static int c_launch_legacy(struct env *e)
{
	(void)e;
	return (int)cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, NULL, NULL);
}

static const struct call legacy_calls[] = {
    {"cuMemcpyHtoD", c_copy_sync, {906, 906, 906, 906, 906, 906}},
    {"cuMemsetD32", c_memset_sync, {906, 906, 906, 906, 906, 906}},
    {"cuLaunchKernel_legacy_stream", c_launch_legacy, {906, 906, 906, 906, 906, 906}},
};

static const char *mode_name(CUstreamCaptureMode m)
{
	return m == CU_STREAM_CAPTURE_MODE_GLOBAL	  ? "global"
	       : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread_local"
							  : "relaxed";
}

/* A thread that begins a global-mode capture, waits, and ends it when told. */
struct capturer {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int step; /* 1: begun, 2: end it, 3: ended */
	struct env *e;
	CUresult end;
	CUgraph graph;
};

static void set_step(struct capturer *t, int v)
{
	pthread_mutex_lock(&t->mu);
	t->step = v;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void wait_step(struct capturer *t, int v)
{
	pthread_mutex_lock(&t->mu);
	while (t->step < v)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
}

static void *capturer_run(void *arg)
{
	struct capturer *t = arg;
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuStreamBeginCapture(t->e->cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, t->e->cap, NULL, NULL));
	set_step(t, 1);
	wait_step(t, 2);
	t->end = cuStreamEndCapture(t->e->cap, &t->graph);
	set_step(t, 3);
	return NULL;
}

static int failures;

static void probe_one(int blocking, CUstreamCaptureMode mode, int other, const struct call *c)
{
	struct env e;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult end;
	CUgraph graph = NULL;
	int ret, want, want_st, want_end;

	memset(&e, 0, sizeof(e));
	CHECK(cuStreamCreate(&e.cap, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&e.other, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&e.done, 0));
	CHECK(cuMemAlloc(&e.dev, BUF));
	CHECK(cuMemAllocHost(&e.pinned, BUF));
	e.pageable = aligned_alloc(4096, BUF);
	EXPECT(e.pageable != NULL, "out of memory");
	memset(e.pageable, 0, BUF);
	CHECK(cuMemAlloc(&e.dfree, BUF));
	CHECK(cuMemAllocHost(&e.hfree, BUF));
	CHECK(cuEventRecord(e.done, e.other));
	CHECK(cuCtxSynchronize());

	if (!other) {
		CHECK(cuStreamBeginCapture(e.cap, mode));
		CHECK(cuLaunchKernel(f_empty, 1, 1, 1, 32, 1, 1, 0, e.cap, NULL, NULL));
		ret = c->call(&e);
		CHECK(cuStreamIsCapturing(e.cap, &st));
		end = cuStreamEndCapture(e.cap, &graph);
	} else {
		struct capturer t = {
		    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .e = &e};
		CUstreamCaptureMode m = mode;
		pthread_t th;
		EXPECT(pthread_create(&th, NULL, capturer_run, &t) == 0, "pthread_create");
		wait_step(&t, 1);
		CHECK(cuThreadExchangeStreamCaptureMode(&m));
		ret = c->call(&e);
		CHECK(cuThreadExchangeStreamCaptureMode(&m));
		CHECK(cuStreamIsCapturing(e.cap, &st));
		set_step(&t, 2);
		wait_step(&t, 3);
		pthread_join(th, NULL);
		end = t.end;
		graph = t.graph;
	}
	if (graph)
		CHECK(cuGraphDestroy(graph));
	/* undo what the call made, or what it was refused to free */
	if (e.dmade)
		CHECK(cuMemFree(e.dmade));
	if (e.hmade)
		CHECK(cuMemFreeHost(e.hmade));
	if (e.dfree)
		CHECK(cuMemFree(e.dfree));
	if (e.hfree)
		CHECK(cuMemFreeHost(e.hfree));
	if (c->call == c_host_register && ret == 0)
		CHECK(cuMemHostUnregister(e.pageable));
	CHECK(cuCtxSynchronize());
	printf("stream=%s mode=%s thread=%s call=%s ret=%d status_after=%d capture_after=%d\n",
	       blocking ? "blocking" : "nonblocking", mode_name(mode), other ? "other" : "this",
	       c->name, ret, (int)st, (int)end);
	fflush(stdout);

	want = c->want[(other ? OTHER_GLOBAL : THIS_GLOBAL) + (int)mode];
	want_st = want ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	want_end = want ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
	if (ret != want || (int)st != want_st || (int)end != want_end) {
		fprintf(stderr, "MISMATCH %s %s %s %s: ret=%d status=%d end=%d, want %d %d %d\n",
			blocking ? "blocking" : "nonblocking", mode_name(mode),
			other ? "other" : "this", c->name, ret, (int)st, (int)end, want, want_st,
			want_end);
		failures++;
	}

	CHECK(cuMemFree(e.dev));
	CHECK(cuMemFreeHost(e.pinned));
	free(e.pageable);
	CHECK(cuEventDestroy(e.done));
	CHECK(cuStreamDestroy(e.cap));
	CHECK(cuStreamDestroy(e.other));
}

/* After every refusal, a capture still makes a graph that runs, and fills what it should. */
static void capture_still_works(void)
{
	const unsigned long long n = 4096;
	unsigned seed = 7, *host = malloc(n * sizeof(unsigned));
	CUdeviceptr d;
	CUstream s;
	CUgraph g;
	CUgraphExec x;
	void *args[] = {&d, &seed, (void *)&n};
	CUstreamCaptureStatus st;

	EXPECT(host != NULL, "out of memory");
	CHECK(cuMemAlloc(&d, n * sizeof(unsigned)));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuLaunchKernel(f_fill, (unsigned)(n / 256), 1, 1, 256, 1, 1, 0, s, args, NULL));
	CHECK(cuStreamIsCapturing(s, &st));
	CHECK(cuStreamEndCapture(s, &g));
	CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
	CHECK(cuGraphLaunch(x, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(host, d, n * sizeof(unsigned)));
	for (unsigned long long i = 0; i < n; i++)
		EXPECT(host[i] == (seed ^ (unsigned)(i * 2654435761u)), "word %llu is %#x", i,
		       host[i]);
	printf("capture after the refusals: status %d, graph ran, %llu words ok\n", (int)st, n);
	CHECK(cuGraphExecDestroy(x));
	CHECK(cuGraphDestroy(g));
	CHECK(cuStreamDestroy(s));
	CHECK(cuMemFree(d));
	free(host);
}

int main(void)
{
	static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
						    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
						    CU_STREAM_CAPTURE_MODE_RELAXED};

	mod = setup(&ctx);
	CHECK(cuModuleGetFunction(&f_empty, mod, "empty_kernel"));
	CHECK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
	for (int other = 0; other <= 1; other++)
		for (size_t m = 0; m < 3; m++)
			for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
				probe_one(0, modes[m], other, &calls[i]);
	for (size_t m = 0; m < 3; m += 2) /* global and relaxed */
		for (size_t i = 0; i < sizeof(legacy_calls) / sizeof(legacy_calls[0]); i++)
			probe_one(1, modes[m], 0, &legacy_calls[i]);
	capture_still_works();
	CHECK(cuModuleUnload(mod));
	if (failures) {
		fprintf(stderr, "capmodes: %d rows differ from the driver's\n", failures);
		return 1;
	}
	printf("capmodes: done\n");
	return 0;
}
