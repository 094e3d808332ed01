/*
 * simgpu's graphs against the driver API's semantics: graphs built node by node (topology in
 * creation order, edges, parameters read back exactly), executable graphs (a private copy,
 * launches in dependency order, per-exec parameters, disabled nodes, cuGraphExecUpdate), clones,
 * child graphs, capture into an existing graph, capture dependency sets and their updates (the
 * NCCL / PyTorch pattern), event record and wait nodes, and the Graphviz dump. The kernels are
 * the nvcc-built ones of tests/progs/kernels.cu, run by their C twins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>

#define CU(call) assert_int_equal((call), CUDA_SUCCESS)

enum {
	N = 256,	  /* floats in a row */
	ROW = N * 4,	  /* their bytes */
	PITCH = ROW + 64, /* the device rows' pitch: 64 bytes of padding a memset never touches */
	ONE = 0x3f800000, /* 1.0f */
	TWO = 0x40000000, /* 2.0f */
};

static CUcontext g_ctx;
static CUmodule g_mod;

static CUfunction func(const char *name)
{
	CUfunction f = NULL;

	CU(cuModuleGetFunction(&f, g_mod, name));
	return f;
}

static unsigned fill_value(unsigned seed, unsigned long long i)
{
	return seed ^ (unsigned)(i * 2654435761u);
}

/* the nodes of g, in the order cuGraphGetNodes gives them (freed by the caller) */
static CUgraphNode *nodes_of(CUgraph g, size_t *n)
{
	CUgraphNode *v;

	CU(cuGraphGetNodes(g, NULL, n));
	v = calloc(*n + 1, sizeof(*v));
	CU(cuGraphGetNodes(g, v, n));
	return v;
}

static void expect_list(const CUgraphNode *got, size_t ngot, const CUgraphNode *want, size_t n)
{
	assert_int_equal(ngot, n);
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("entry %zu: %p, want %p", i, (void *)got[i], (void *)want[i]);
}

static void expect_deps(CUgraphNode node, const CUgraphNode *want, size_t n)
{
	CUgraphNode got[8];
	size_t ngot = 8;

	CU(cuGraphNodeGetDependencies(node, got, NULL, &ngot));
	expect_list(got, ngot, want, n);
}

static void expect_type(CUgraphNode node, CUgraphNodeType want)
{
	CUgraphNodeType t;

	CU(cuGraphNodeGetType(node, &t));
	assert_int_equal(t, want);
}

/* A host node's callback: counts its calls and keeps what the memcpy node brought back. */
static int host_calls;
static unsigned char host_buf[2 * PITCH], host_seen[2 * PITCH];

static void host_snapshot(void *ud)
{
	assert_ptr_equal(ud, host_buf);
	memcpy(host_seen, host_buf, sizeof(host_seen));
	host_calls++;
}

static unsigned char pattern(unsigned seed, size_t i)
{
	return (unsigned char)(i * 7 + seed);
}

/*
 * What the diamond leaves in host_seen: row 0 holds x0 in every float, row 1 y0, and the
 * padding of each row the pattern the device buffer was given. Every byte is checked.
 */
static void check_rows(float x0, float y0, unsigned seed)
{
	for (size_t r = 0; r < 2; r++) {
		float want = r ? y0 : x0;
		for (size_t i = 0; i < N; i++) {
			float got;
			memcpy(&got, host_seen + r * PITCH + i * 4, 4);
			if (got != want)
				fail_msg("row %zu float %zu: %f, want %f", r, i, (double)got,
					 (double)want);
		}
		for (size_t i = ROW; i < PITCH; i++)
			if (host_seen[r * PITCH + i] != pattern(seed, r * PITCH + i))
				fail_msg("row %zu padding byte %zu: 0x%02x, want 0x%02x", r, i,
					 host_seen[r * PITCH + i], pattern(seed, r * PITCH + i));
	}
}

static void load_pattern(CUdeviceptr d, unsigned seed)
{
	unsigned char buf[2 * PITCH];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern(seed, i);
	CU(cuMemcpyHtoD(d, buf, sizeof(buf)));
}

struct diamond {
	CUgraph g;
	CUgraphNode host, set, k1, k2, cpy; /* in creation order */
	CUdeviceptr d;
	float s1, t1, s2, t2;
	int n;
	void *args1[4];
	unsigned char xbuf[20]; /* scale_add's parameters for k2, through `extra` */
	size_t xsize;
	void *extra[5];
	CUDA_MEMSET_NODE_PARAMS mp;
	CUDA_MEMCPY3D cp;
};

/*
 * memset (two pitched rows of 1.0f) -> k1 (row 0 = 2x + 3) and k2 (row 1 = 4x - 1, its
 * parameters through `extra`) -> memcpy (both rows with their padding, to host_buf) -> host
 * node. The host node is made first, with no dependencies, and joined last by
 * cuGraphAddDependencies: creation order is then not a topological order.
 */
static void build_diamond(struct diamond *dm)
{
	CUDA_HOST_NODE_PARAMS hp = {host_snapshot, host_buf};
	CUDA_KERNEL_NODE_PARAMS kp;
	CUgraphNode both[2];

	memset(dm, 0, sizeof(*dm));
	CU(cuMemAlloc(&dm->d, 2 * PITCH));
	dm->s1 = 2.0f, dm->t1 = 3.0f, dm->s2 = 4.0f, dm->t2 = -1.0f;
	dm->n = N;
	CU(cuGraphCreate(&dm->g, 0));
	CU(cuGraphAddHostNode(&dm->host, dm->g, NULL, 0, &hp));

	dm->mp = (CUDA_MEMSET_NODE_PARAMS){
	    .dst = dm->d, .pitch = PITCH, .value = ONE, .elementSize = 4, .width = N, .height = 2};
	CU(cuGraphAddMemsetNode(&dm->set, dm->g, NULL, 0, &dm->mp, g_ctx));

	CUdeviceptr x = dm->d, y = dm->d + PITCH;
	dm->args1[0] = &x, dm->args1[1] = &dm->s1, dm->args1[2] = &dm->t1, dm->args1[3] = &dm->n;
	memset(&kp, 0, sizeof(kp));
	kp.func = func("scale_add");
	kp.gridDimX = 1, kp.gridDimY = 1, kp.gridDimZ = 1;
	kp.blockDimX = N, kp.blockDimY = 1, kp.blockDimZ = 1;
	kp.kernelParams = dm->args1;
	CU(cuGraphAddKernelNode(&dm->k1, dm->g, &dm->set, 1, &kp));

	/* scale_add(float *x, float s, float t, int n): offsets 0, 8, 12, 16 */
	memcpy(dm->xbuf, &y, 8);
	memcpy(dm->xbuf + 8, &dm->s2, 4);
	memcpy(dm->xbuf + 12, &dm->t2, 4);
	memcpy(dm->xbuf + 16, &dm->n, 4);
	dm->xsize = sizeof(dm->xbuf);
	dm->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER, dm->extra[1] = dm->xbuf;
	dm->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE, dm->extra[3] = &dm->xsize;
	dm->extra[4] = CU_LAUNCH_PARAM_END;
	kp.kernelParams = NULL;
	kp.extra = dm->extra;
	CU(cuGraphAddKernelNode(&dm->k2, dm->g, &dm->set, 1, &kp));

	memset(&dm->cp, 0, sizeof(dm->cp));
	dm->cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	dm->cp.srcDevice = dm->d;
	dm->cp.srcPitch = PITCH;
	dm->cp.dstMemoryType = CU_MEMORYTYPE_HOST;
	dm->cp.dstHost = host_buf;
	dm->cp.dstPitch = PITCH;
	dm->cp.WidthInBytes = PITCH;
	dm->cp.Height = 2;
	dm->cp.Depth = 1;
	both[0] = dm->k1, both[1] = dm->k2;
	CU(cuGraphAddMemcpyNode(&dm->cpy, dm->g, both, 2, &dm->cp, g_ctx));
	CU(cuGraphAddDependencies(dm->g, &dm->cpy, &dm->host, NULL, 1));
}

static void free_diamond(struct diamond *dm)
{
	CU(cuGraphDestroy(dm->g));
	CU(cuMemFree(dm->d));
}

static void launch_and_check(CUgraphExec x, CUstream s, struct diamond *dm, float x0, float y0,
			     unsigned seed)
{
	int calls = host_calls;

	load_pattern(dm->d, seed);
	memset(host_buf, 0, sizeof(host_buf));
	memset(host_seen, 0, sizeof(host_seen));
	CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	assert_int_equal(host_calls, calls + 1);
	check_rows(x0, y0, seed);
}

/* --- topology and parameters ------------------------------------------------------------ */

static void test_topology(void **state)
{
	struct diamond dm;
	CUgraphNode *v, got[8], from[8], to[8], other;
	CUgraphEdgeData ed[8];
	CUgraph g2;
	size_t n;

	(void)state;
	build_diamond(&dm);

	/* creation order, whatever the edges */
	v = nodes_of(dm.g, &n);
	const CUgraphNode order[] = {dm.host, dm.set, dm.k1, dm.k2, dm.cpy};
	expect_list(v, n, order, 5);
	free(v);
	/* a longer array: NULLs past the end and the real count; a shorter one: the first ones */
	for (int i = 0; i < 8; i++)
		got[i] = (CUgraphNode)(uintptr_t)0x1;
	n = 8;
	CU(cuGraphGetNodes(dm.g, got, &n));
	assert_int_equal(n, 5);
	assert_null(got[5]);
	assert_null(got[7]);
	n = 2;
	got[2] = (CUgraphNode)(uintptr_t)0x1;
	CU(cuGraphGetNodes(dm.g, got, &n));
	assert_int_equal(n, 2);
	assert_ptr_equal(got[1], dm.set);
	assert_ptr_equal(got[2], (CUgraphNode)(uintptr_t)0x1);

	n = 8;
	CU(cuGraphGetRootNodes(dm.g, got, &n));
	expect_list(got, n, &dm.set, 1);

	expect_type(dm.host, CU_GRAPH_NODE_TYPE_HOST);
	expect_type(dm.set, CU_GRAPH_NODE_TYPE_MEMSET);
	expect_type(dm.k1, CU_GRAPH_NODE_TYPE_KERNEL);
	expect_type(dm.k2, CU_GRAPH_NODE_TYPE_KERNEL);
	expect_type(dm.cpy, CU_GRAPH_NODE_TYPE_MEMCPY);

	/* edges: every one once, edge data all default */
	const CUgraphNode ef[] = {dm.set, dm.set, dm.k1, dm.k2, dm.cpy};
	const CUgraphNode et[] = {dm.k1, dm.k2, dm.cpy, dm.cpy, dm.host};
	CU(cuGraphGetEdges(dm.g, NULL, NULL, NULL, &n));
	assert_int_equal(n, 5);
	n = 8;
	memset(ed, 0xff, sizeof(ed));
	CU(cuGraphGetEdges(dm.g, from, to, ed, &n));
	assert_int_equal(n, 5);
	assert_null(from[5]);
	assert_null(to[5]);
	for (size_t i = 0; i < 5; i++) {
		int seen = 0;
		for (size_t j = 0; j < 5; j++)
			seen += from[j] == ef[i] && to[j] == et[i];
		assert_int_equal(seen, 1);
		assert_int_equal(ed[i].type, 0);
		assert_int_equal(ed[i].from_port, 0);
		assert_int_equal(ed[i].to_port, 0);
	}
	assert_int_equal(cuGraphGetEdges(dm.g, from, NULL, NULL, &n), CUDA_ERROR_INVALID_VALUE);

	/* dependencies and dependents in the order the edges were made */
	const CUgraphNode kk[] = {dm.k1, dm.k2};
	expect_deps(dm.cpy, kk, 2);
	expect_deps(dm.k2, &dm.set, 1);
	expect_deps(dm.set, NULL, 0);
	expect_deps(dm.host, &dm.cpy, 1);
	n = 8;
	memset(ed, 0xff, sizeof(ed));
	CU(cuGraphNodeGetDependentNodes(dm.set, got, ed, &n));
	expect_list(got, n, kk, 2);
	assert_int_equal(ed[1].type, 0);
	n = 0;
	CU(cuGraphNodeGetDependentNodes(dm.cpy, NULL, NULL, &n));
	assert_int_equal(n, 1);

	/* the driver's errors */
	CUgraphNode dup[2] = {dm.set, dm.set};
	CUDA_HOST_NODE_PARAMS hp = {host_snapshot, host_buf}, nofn = {NULL, NULL};
	CU(cuGraphCreate(&g2, 0));
	CU(cuGraphAddEmptyNode(&other, g2, NULL, 0));
	assert_int_equal(cuGraphAddEmptyNode(&got[0], dm.g, &other, 1), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddEmptyNode(&got[0], dm.g, dup, 2), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddEmptyNode(&got[0], dm.g, NULL, 1), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddEmptyNode(NULL, dm.g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddHostNode(&got[0], dm.g, NULL, 0, &nofn),
			 CUDA_ERROR_INVALID_VALUE);
	CUDA_MEMSET_NODE_PARAMS bad = dm.mp;
	bad.elementSize = 3;
	assert_int_equal(cuGraphAddMemsetNode(&got[0], dm.g, NULL, 0, &bad, g_ctx),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddDependencies(dm.g, &dm.set, &dm.k1, NULL, 1),
			 CUDA_ERROR_INVALID_VALUE); /* exists */
	assert_int_equal(cuGraphAddDependencies(dm.g, &dm.k1, &dm.k1, NULL, 1),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddDependencies(dm.g, &dm.k1, &other, NULL, 1),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphRemoveDependencies(dm.g, &dm.k1, &dm.k2, NULL, 1),
			 CUDA_ERROR_INVALID_VALUE); /* does not exist */
	CUgraphEdgeData prog = {.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC};
	assert_int_equal(cuGraphAddDependencies(dm.g, &dm.k1, &dm.k2, &prog, 1),
			 CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(cuGraphGetNodes(dm.g, got, NULL), CUDA_ERROR_INVALID_VALUE);
	CUDA_MEMSET_NODE_PARAMS mp;
	assert_int_equal(cuGraphMemsetNodeGetParams(dm.k1, &mp), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphHostNodeSetParams(dm.set, &hp), CUDA_ERROR_INVALID_VALUE);

	/* add, see, remove an edge; a destroyed node takes its edges along */
	CU(cuGraphAddDependencies(dm.g, &dm.k1, &dm.k2, NULL, 1));
	const CUgraphNode sk[] = {dm.set, dm.k1};
	expect_deps(dm.k2, sk, 2);
	CU(cuGraphRemoveDependencies(dm.g, &dm.k1, &dm.k2, NULL, 1));
	expect_deps(dm.k2, &dm.set, 1);
	CU(cuGraphAddEmptyNode(&got[0], dm.g, &dm.cpy, 1));
	CU(cuGraphAddDependencies(dm.g, &got[0], &dm.host, NULL, 1));
	CU(cuGraphDestroyNode(got[0]));
	expect_deps(dm.host, &dm.cpy, 1);
	n = 0;
	CU(cuGraphNodeGetDependentNodes(dm.cpy, NULL, NULL, &n));
	assert_int_equal(n, 1);
	CU(cuGraphGetEdges(dm.g, NULL, NULL, NULL, &n));
	assert_int_equal(n, 5);
	assert_int_equal(cuGraphNodeGetType(got[0], &(CUgraphNodeType){0}),
			 CUDA_ERROR_INVALID_VALUE);
	v = nodes_of(dm.g, &n);
	expect_list(v, n, order, 5);
	free(v);

	CU(cuGraphDestroy(g2));
	free_diamond(&dm);
}

static void test_params(void **state)
{
	struct diamond dm;
	CUDA_KERNEL_NODE_PARAMS kp;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUDA_MEMCPY3D cp;
	CUDA_HOST_NODE_PARAMS hp;
	CUdeviceptr p;
	float f;
	int i;

	(void)state;
	build_diamond(&dm);

	/* kernelParams: the node's own copies of the values */
	CU(cuGraphKernelNodeGetParams(dm.k1, &kp));
	assert_ptr_equal(kp.func, func("scale_add"));
	assert_int_equal(kp.gridDimX, 1);
	assert_int_equal(kp.gridDimY, 1);
	assert_int_equal(kp.gridDimZ, 1);
	assert_int_equal(kp.blockDimX, N);
	assert_int_equal(kp.blockDimY, 1);
	assert_int_equal(kp.blockDimZ, 1);
	assert_int_equal(kp.sharedMemBytes, 0);
	assert_null(kp.extra);
	assert_non_null(kp.kernelParams);
	assert_ptr_not_equal(kp.kernelParams[1], &dm.s1);
	memcpy(&p, kp.kernelParams[0], 8);
	assert_int_equal(p, dm.d);
	memcpy(&f, kp.kernelParams[1], 4);
	assert_true(f == 2.0f);
	memcpy(&f, kp.kernelParams[2], 4);
	assert_true(f == 3.0f);
	memcpy(&i, kp.kernelParams[3], 4);
	assert_int_equal(i, N);
	dm.t1 = 99.0f; /* copied at creation: the caller's variables are free again */
	memcpy(&f, kp.kernelParams[2], 4);
	assert_true(f == 3.0f);

	/* set through `extra`: read back through an `extra` of the node's own */
	CU(cuGraphKernelNodeGetParams(dm.k2, &kp));
	assert_null(kp.kernelParams);
	assert_non_null(kp.extra);
	assert_ptr_not_equal(kp.extra, dm.extra);
	assert_ptr_equal(kp.extra[0], CU_LAUNCH_PARAM_BUFFER_POINTER);
	assert_ptr_equal(kp.extra[2], CU_LAUNCH_PARAM_BUFFER_SIZE);
	assert_ptr_equal(kp.extra[4], CU_LAUNCH_PARAM_END);
	assert_int_equal(*(size_t *)kp.extra[3], 20);
	assert_memory_equal(kp.extra[1], dm.xbuf, 20);

	/* a new t for k1 */
	CU(cuGraphKernelNodeGetParams(dm.k1, &kp));
	float t = 5.0f;
	void *args[4] = {kp.kernelParams[0], kp.kernelParams[1], &t, kp.kernelParams[3]};
	kp.kernelParams = args;
	CU(cuGraphKernelNodeSetParams(dm.k1, &kp));
	CU(cuGraphKernelNodeGetParams(dm.k1, &kp));
	memcpy(&f, kp.kernelParams[2], 4);
	assert_true(f == 5.0f);
	memcpy(&f, kp.kernelParams[1], 4);
	assert_true(f == 2.0f);
	kp.func = NULL;
	assert_int_equal(cuGraphKernelNodeSetParams(dm.k1, &kp), CUDA_ERROR_INVALID_VALUE);

	CU(cuGraphMemsetNodeGetParams(dm.set, &mp));
	assert_int_equal(mp.dst, dm.d);
	assert_int_equal(mp.pitch, PITCH);
	assert_int_equal(mp.value, ONE);
	assert_int_equal(mp.elementSize, 4);
	assert_int_equal(mp.width, N);
	assert_int_equal(mp.height, 2);
	mp.value = TWO;
	mp.elementSize = 2;
	mp.width = 2 * N;
	CU(cuGraphMemsetNodeSetParams(dm.set, &mp));
	memset(&mp, 0, sizeof(mp));
	CU(cuGraphMemsetNodeGetParams(dm.set, &mp));
	assert_int_equal(mp.value, TWO);
	assert_int_equal(mp.elementSize, 2);
	assert_int_equal(mp.width, 2 * N);
	mp.dst = dm.d + 1; /* misaligned for 2-byte elements */
	assert_int_equal(cuGraphMemsetNodeSetParams(dm.set, &mp), CUDA_ERROR_INVALID_VALUE);

	CU(cuGraphMemcpyNodeGetParams(dm.cpy, &cp));
	assert_memory_equal(&cp, &dm.cp, sizeof(cp));
	cp.Height = 1;
	CU(cuGraphMemcpyNodeSetParams(dm.cpy, &cp));
	CU(cuGraphMemcpyNodeGetParams(dm.cpy, &cp));
	assert_int_equal(cp.Height, 1);
	cp.srcDevice = 0x1000; /* not device memory */
	assert_int_equal(cuGraphMemcpyNodeSetParams(dm.cpy, &cp), CUDA_ERROR_INVALID_VALUE);

	CU(cuGraphHostNodeGetParams(dm.host, &hp));
	assert_ptr_equal(hp.fn, host_snapshot);
	assert_ptr_equal(hp.userData, host_buf);
	free_diamond(&dm);
}

/* --- executable graphs ------------------------------------------------------------------ */

static void test_exec(void **state)
{
	struct diamond dm;
	CUDA_KERNEL_NODE_PARAMS kp;
	CUDA_MEMSET_NODE_PARAMS mp;
	CUgraphExec x;
	CUstream s;
	unsigned en;

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	build_diamond(&dm);
	host_calls = 0;
	CU(cuGraphInstantiate(&x, dm.g, 0));

	/* the exec is a copy: a later change to the graph stays in the graph */
	CU(cuGraphMemsetNodeGetParams(dm.set, &mp));
	mp.value = TWO;
	CU(cuGraphMemsetNodeSetParams(dm.set, &mp));
	CU(cuGraphAddEmptyNode(&(CUgraphNode){0}, dm.g, &dm.host, 1));

	/* twice, with two patterns under the padding */
	launch_and_check(x, s, &dm, 5.0f, 3.0f, 1);
	launch_and_check(x, s, &dm, 5.0f, 3.0f, 2);
	assert_int_equal(host_calls, 2);

	/* per-exec parameters: k1's t and the memset's value, the graph's nodes untouched */
	CU(cuGraphKernelNodeGetParams(dm.k1, &kp));
	float t = 10.0f;
	void *args[4] = {kp.kernelParams[0], kp.kernelParams[1], &t, kp.kernelParams[3]};
	kp.kernelParams = args;
	CU(cuGraphExecKernelNodeSetParams(x, dm.k1, &kp));
	mp.value = TWO;
	CU(cuGraphExecMemsetNodeSetParams(x, dm.set, &mp, g_ctx));
	launch_and_check(x, s, &dm, 14.0f, 7.0f, 3);
	CU(cuGraphKernelNodeGetParams(dm.k1, &kp));
	float f;
	memcpy(&f, kp.kernelParams[2], 4);
	assert_true(f == 3.0f);
	assert_int_equal(cuGraphExecKernelNodeSetParams(x, dm.set, &kp), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphExecMemsetNodeSetParams(x, dm.k1, &mp, g_ctx),
			 CUDA_ERROR_INVALID_VALUE);

	/* a disabled kernel runs as an empty node: row 1 keeps the memset's 2.0f */
	CU(cuGraphNodeGetEnabled(x, dm.k2, &en));
	assert_int_equal(en, 1);
	CU(cuGraphNodeSetEnabled(x, dm.k2, 0));
	CU(cuGraphNodeGetEnabled(x, dm.k2, &en));
	assert_int_equal(en, 0);
	launch_and_check(x, s, &dm, 14.0f, 2.0f, 4);
	CU(cuGraphNodeSetEnabled(x, dm.k2, 1));
	launch_and_check(x, s, &dm, 14.0f, 7.0f, 5);
	assert_int_equal(cuGraphNodeSetEnabled(x, dm.host, 0), CUDA_ERROR_INVALID_VALUE);

	CU(cuGraphExecDestroy(x));
	assert_int_equal(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE);
	free_diamond(&dm);
	CU(cuStreamDestroy(s));
}

static void test_exec_update(void **state)
{
	struct diamond dm;
	CUDA_KERNEL_NODE_PARAMS kp;
	CUgraphExecUpdateResultInfo info;
	CUgraphNode c1, *v, e;
	CUgraph g2, g3, g4;
	CUgraphExec x;
	CUstream s;
	size_t n;

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	build_diamond(&dm);
	CU(cuGraphInstantiate(&x, dm.g, 0));

	/* a clone keeps creation order; FindInClone pairs the nodes */
	CU(cuGraphClone(&g2, dm.g));
	v = nodes_of(g2, &n);
	const CUgraphNode order[] = {dm.host, dm.set, dm.k1, dm.k2, dm.cpy};
	assert_int_equal(n, 5);
	for (size_t i = 0; i < 5; i++) {
		CUgraphNode found;
		CUgraphNodeType a, b;
		CU(cuGraphNodeFindInClone(&found, order[i], g2));
		assert_ptr_equal(found, v[i]);
		assert_ptr_not_equal(found, order[i]);
		CU(cuGraphNodeGetType(found, &a));
		CU(cuGraphNodeGetType(order[i], &b));
		assert_int_equal(a, b);
	}
	assert_int_equal(cuGraphNodeFindInClone(&c1, v[0], dm.g), CUDA_ERROR_INVALID_VALUE);
	const CUgraphNode kk[] = {v[2], v[3]};
	expect_deps(v[4], kk, 2);
	expect_deps(v[0], &v[4], 1);
	CU(cuGraphNodeFindInClone(&c1, dm.k1, g2));
	free(v);

	/* an update from the clone with k1's t = 20 */
	CU(cuGraphKernelNodeGetParams(c1, &kp));
	float t = 20.0f;
	void *args[4] = {kp.kernelParams[0], kp.kernelParams[1], &t, kp.kernelParams[3]};
	kp.kernelParams = args;
	CU(cuGraphKernelNodeSetParams(c1, &kp));
	memset(&info, 0xff, sizeof(info));
	CU(cuGraphExecUpdate(x, g2, &info));
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
	assert_null(info.errorNode);
	assert_null(info.errorFromNode);
	launch_and_check(x, s, &dm, 22.0f, 3.0f, 6);

	/* one node more */
	CU(cuGraphClone(&g3, dm.g));
	CU(cuGraphAddEmptyNode(&e, g3, NULL, 0));
	assert_int_equal(cuGraphExecUpdate(x, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
	assert_null(info.errorNode);
	CU(cuGraphDestroy(g3));

	/* as many nodes and edges, one edge moved: k2 after k1 instead of after the memset */
	CU(cuGraphClone(&g3, dm.g));
	CUgraphNode set3, k13, k23;
	CU(cuGraphNodeFindInClone(&set3, dm.set, g3));
	CU(cuGraphNodeFindInClone(&k13, dm.k1, g3));
	CU(cuGraphNodeFindInClone(&k23, dm.k2, g3));
	CU(cuGraphRemoveDependencies(g3, &set3, &k23, NULL, 1));
	CU(cuGraphAddDependencies(g3, &k13, &k23, NULL, 1));
	assert_int_equal(cuGraphExecUpdate(x, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
	assert_ptr_equal(info.errorNode, k23);
	assert_ptr_equal(info.errorFromNode, k13);
	CU(cuGraphDestroy(g3));

	/* the same topology with an empty node where k1 was */
	CUDA_HOST_NODE_PARAMS hp = {host_snapshot, host_buf};
	CUgraphNode h4, s4, k14, k24, c4, two[2];
	CU(cuGraphCreate(&g4, 0));
	CU(cuGraphAddHostNode(&h4, g4, NULL, 0, &hp));
	CU(cuGraphAddMemsetNode(&s4, g4, NULL, 0, &dm.mp, g_ctx));
	CU(cuGraphAddEmptyNode(&k14, g4, &s4, 1));
	CU(cuGraphKernelNodeGetParams(dm.k2, &kp));
	CU(cuGraphAddKernelNode(&k24, g4, &s4, 1, &kp));
	two[0] = k14, two[1] = k24;
	CU(cuGraphAddMemcpyNode(&c4, g4, two, 2, &dm.cp, g_ctx));
	CU(cuGraphAddDependencies(g4, &c4, &h4, NULL, 1));
	assert_int_equal(cuGraphExecUpdate(x, g4, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
	assert_ptr_equal(info.errorNode, k14);
	assert_null(info.errorFromNode);

	/* failed updates left the exec as the last good one made it */
	launch_and_check(x, s, &dm, 22.0f, 3.0f, 7);

	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g4));
	CU(cuGraphDestroy(g2));
	free_diamond(&dm);
	CU(cuStreamDestroy(s));
}

/* --- child graphs ----------------------------------------------------------------------- */

static void test_child_graph(void **state)
{
	enum { M = 64 };
	CUgraph child, parent, inner, other;
	CUgraphNode cset, cfill, root, cn, *v, *w;
	CUgraphExec x;
	CUdeviceptr c, d;
	CUstream s;
	unsigned char hc[M];
	unsigned hd[M], seed = 31;
	unsigned long long cnt = M;
	size_t n, m;

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&c, M));
	CU(cuMemAlloc(&d, M * 4));
	CU(cuGraphCreate(&child, 0));
	CUDA_MEMSET_NODE_PARAMS mp = {
	    .dst = c, .value = 0x5a, .elementSize = 1, .width = M, .height = 1};
	CU(cuGraphAddMemsetNode(&cset, child, NULL, 0, &mp, g_ctx));
	void *args[] = {&d, &seed, &cnt};
	CUDA_KERNEL_NODE_PARAMS kp = {.func = func("fill_u32"),
				      .gridDimX = 1,
				      .gridDimY = 1,
				      .gridDimZ = 1,
				      .blockDimX = 32,
				      .blockDimY = 1,
				      .blockDimZ = 1,
				      .kernelParams = args};
	CU(cuGraphAddKernelNode(&cfill, child, &cset, 1, &kp));

	CU(cuGraphCreate(&parent, 0));
	CU(cuGraphAddEmptyNode(&root, parent, NULL, 0));
	CU(cuGraphAddChildGraphNode(&cn, parent, &root, 1, child));
	expect_type(cn, CU_GRAPH_NODE_TYPE_GRAPH);
	CU(cuGraphChildGraphNodeGetGraph(cn, &inner));
	assert_ptr_not_equal(inner, child);
	v = nodes_of(child, &n);
	w = nodes_of(inner, &m);
	assert_int_equal(m, 2);
	for (size_t i = 0; i < n; i++) {
		CUgraphNodeType a, b;
		CU(cuGraphNodeGetType(v[i], &a));
		CU(cuGraphNodeGetType(w[i], &b));
		assert_int_equal(a, b);
		assert_ptr_not_equal(v[i], w[i]);
	}
	expect_deps(w[1], &w[0], 1);
	assert_int_equal(cuGraphDestroy(inner), CUDA_ERROR_INVALID_VALUE); /* the node's own */

	/* a change to the child graph after the node was made stays out of the node */
	mp.value = 0x33;
	CU(cuGraphMemsetNodeSetParams(cset, &mp));
	CU(cuGraphInstantiate(&x, parent, 0));
	CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	CU(cuMemcpyDtoH(hc, c, M));
	CU(cuMemcpyDtoH(hd, d, M * 4));
	for (int i = 0; i < M; i++) {
		assert_int_equal(hc[i], 0x5a);
		assert_int_equal(hd[i], fill_value(31, (unsigned)i));
	}

	/* the exec's child takes the parameters of a graph of the same topology */
	CU(cuGraphExecChildGraphNodeSetParams(x, cn, child));
	CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	CU(cuMemcpyDtoH(hc, c, M));
	for (int i = 0; i < M; i++)
		assert_int_equal(hc[i], 0x33);
	CU(cuGraphCreate(&other, 0));
	CU(cuGraphAddEmptyNode(&root, other, NULL, 0));
	assert_int_equal(cuGraphExecChildGraphNodeSetParams(x, cn, other),
			 CUDA_ERROR_INVALID_VALUE);

	/* and a child graph node of a graph that is cloned is cloned with it */
	CUgraph pc, pci;
	CUgraphNode cnc;
	CU(cuGraphClone(&pc, parent));
	CU(cuGraphNodeFindInClone(&cnc, cn, pc));
	CU(cuGraphChildGraphNodeGetGraph(cnc, &pci));
	assert_ptr_not_equal(pci, inner);
	CU(cuGraphGetNodes(pci, NULL, &m));
	assert_int_equal(m, 2);

	free(v);
	free(w);
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(pc));
	CU(cuGraphDestroy(other));
	CU(cuGraphDestroy(parent));
	CU(cuGraphDestroy(child));
	CU(cuMemFree(c));
	CU(cuMemFree(d));
	CU(cuStreamDestroy(s));
}

/* --- capture ---------------------------------------------------------------------------- */

static int capture_host_calls;
static void capture_host(void *ud)
{
	(void)ud;
	capture_host_calls++;
}

/* Work captured into an existing graph chains after the given dependencies. */
static void test_capture_to_graph(void **state)
{
	enum { M = 128 };
	CUgraph g, got;
	CUgraphNode set, *v;
	CUgraphExec x;
	CUstream s;
	CUdeviceptr a, b, c;
	CUstreamCaptureStatus st;
	const CUgraphNode *deps;
	size_t n;
	unsigned ha[M], hb[M], hc[M], seed = 77;
	unsigned long long cnt = M;

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuMemAlloc(&a, M * 4));
	CU(cuMemAlloc(&b, M * 4));
	CU(cuMemAlloc(&c, M * 4));
	CU(cuMemsetD32(b, 0, M));
	CU(cuMemsetD32(c, 0, M));
	CU(cuGraphCreate(&g, 0));
	CUDA_MEMSET_NODE_PARAMS mp = {
	    .dst = a, .value = 7, .elementSize = 4, .width = M, .height = 1};
	CU(cuGraphAddMemsetNode(&set, g, NULL, 0, &mp, g_ctx));

	CUgraphNode twice[2] = {set, set};
	assert_int_equal(
	    cuStreamBeginCaptureToGraph(s, g, twice, NULL, 2, CU_STREAM_CAPTURE_MODE_RELAXED),
	    CUDA_ERROR_INVALID_VALUE); /* a duplicate dependency */
	CU(cuStreamBeginCaptureToGraph(s, g, &set, NULL, 1, CU_STREAM_CAPTURE_MODE_RELAXED));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, &got, &deps, NULL, &n));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	assert_ptr_equal(got, g);
	expect_list(deps, n, &set, 1);
	void *args[] = {&b, &seed, &cnt};
	CU(cuLaunchKernel(func("fill_u32"), 1, 1, 1, 64, 1, 1, 0, s, args, NULL));
	/* a 2D copy is one memcpy node, not one a row */
	CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
			    .srcDevice = a,
			    .srcPitch = M * 2,
			    .dstMemoryType = CU_MEMORYTYPE_DEVICE,
			    .dstDevice = c,
			    .dstPitch = M * 2,
			    .WidthInBytes = M * 2,
			    .Height = 2};
	CU(cuMemcpy2DAsync(&c2, s));
	CU(cuLaunchHostFunc(s, capture_host, NULL));
	CU(cuStreamEndCapture(s, &got));
	assert_ptr_equal(got, g);

	v = nodes_of(g, &n);
	assert_int_equal(n, 4);
	assert_ptr_equal(v[0], set);
	expect_type(v[1], CU_GRAPH_NODE_TYPE_KERNEL);
	expect_type(v[2], CU_GRAPH_NODE_TYPE_MEMCPY);
	expect_type(v[3], CU_GRAPH_NODE_TYPE_HOST);
	expect_deps(v[1], &set, 1);
	expect_deps(v[2], &v[1], 1);
	expect_deps(v[3], &v[2], 1);
	CUDA_MEMCPY3D cp;
	CU(cuGraphMemcpyNodeGetParams(v[2], &cp));
	assert_int_equal(cp.Height, 2);
	assert_int_equal(cp.Depth, 1);
	assert_int_equal(cp.WidthInBytes, M * 2);
	assert_int_equal(cp.srcDevice, a);
	assert_int_equal(cp.dstDevice, c);
	CUDA_KERNEL_NODE_PARAMS kp;
	CU(cuGraphKernelNodeGetParams(v[1], &kp));
	assert_ptr_equal(kp.func, func("fill_u32"));
	assert_int_equal(kp.blockDimX, 64);
	unsigned got_seed;
	memcpy(&got_seed, kp.kernelParams[1], 4);
	assert_int_equal(got_seed, 77);

	/* nothing ran while capturing; the graph runs it all */
	CU(cuMemcpyDtoH(hb, b, sizeof(hb)));
	assert_int_equal(hb[5], 0);
	capture_host_calls = 0;
	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	CU(cuMemcpyDtoH(ha, a, sizeof(ha)));
	CU(cuMemcpyDtoH(hb, b, sizeof(hb)));
	CU(cuMemcpyDtoH(hc, c, sizeof(hc)));
	for (int i = 0; i < M; i++) {
		assert_int_equal(ha[i], 7);
		assert_int_equal(hb[i], fill_value(77, (unsigned)i));
		assert_int_equal(hc[i], 7);
	}
	assert_int_equal(capture_host_calls, 1);

	free(v);
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuMemFree(a));
	CU(cuMemFree(b));
	CU(cuMemFree(c));
	CU(cuStreamDestroy(s));
}

/*
 * The dependency set of a capturing stream: the node its last operation made; a node added to
 * the capture graph by hand after the set (cuStreamGetCaptureInfo), then made the set
 * (cuStreamUpdateCaptureDependencies, SET), as NCCL and PyTorch do; nodes added to the set
 * (ADD); a fork and join through events.
 */
static void test_capture_deps(void **state)
{
	enum { M = 64 };
	CUstream s, s2;
	CUevent fork, join;
	CUgraph g, other;
	CUgraphNode k0, manual, cpy, empty, last, ka, kb, kc, foreign;
	CUgraphExec x;
	CUstreamCaptureStatus st;
	const CUgraphNode *deps;
	const CUgraphEdgeData *ed;
	CUdeviceptr a, b, c;
	size_t n;
	unsigned hc[M], seed_a = 1, seed_b = 2;
	unsigned long long cnt = M;

	(void)state;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CU(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
	CU(cuMemAlloc(&a, M * 4));
	CU(cuMemAlloc(&b, M * 4));
	CU(cuMemAlloc(&c, M * 4));
	CU(cuMemsetD32(c, 0, M));
	assert_int_equal(cuStreamUpdateCaptureDependencies(s, NULL, NULL, 0, 0),
			 CUDA_ERROR_ILLEGAL_STATE);

	CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, NULL, &n));
	assert_int_equal(n, 0);
	void *fa[] = {&a, &seed_a, &cnt};
	CU(cuLaunchKernel(func("fill_u32"), 1, 1, 1, 32, 1, 1, 0, s, fa, NULL));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, &g, &deps, &ed, &n));
	assert_int_equal(n, 1);
	k0 = deps[0];
	expect_type(k0, CU_GRAPH_NODE_TYPE_KERNEL);
	assert_non_null(ed);
	assert_int_equal(ed[0].type, 0);

	/* by hand, after the driver's own array, then made the stream's set */
	void *fb[] = {&b, &seed_b, &cnt};
	CUDA_KERNEL_NODE_PARAMS kp = {.func = func("fill_u32"),
				      .gridDimX = 1,
				      .gridDimY = 1,
				      .gridDimZ = 1,
				      .blockDimX = 32,
				      .blockDimY = 1,
				      .blockDimZ = 1,
				      .kernelParams = fb};
	CU(cuGraphAddKernelNode(&manual, g, deps, n, &kp));
	CU(cuStreamUpdateCaptureDependencies(s, &manual, NULL, 1,
					     CU_STREAM_SET_CAPTURE_DEPENDENCIES));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	expect_list(deps, n, &manual, 1);
	CU(cuMemcpyDtoDAsync(c, b, M * 4, s));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	assert_int_equal(n, 1);
	cpy = deps[0];
	expect_deps(cpy, &manual, 1);
	expect_deps(manual, &k0, 1);

	/* ADD: the next node depends on both */
	CU(cuGraphAddEmptyNode(&empty, g, NULL, 0));
	CU(cuStreamUpdateCaptureDependencies(s, &empty, NULL, 1,
					     CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	const CUgraphNode ce[] = {cpy, empty};
	expect_list(deps, n, ce, 2);
	/* the set passed back to itself changes nothing */
	CU(cuStreamUpdateCaptureDependencies(s, (CUgraphNode *)deps, NULL, n,
					     CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	expect_list(deps, n, ce, 2);

	CU(cuGraphCreate(&other, 0));
	CU(cuGraphAddEmptyNode(&foreign, other, NULL, 0));
	assert_int_equal(cuStreamUpdateCaptureDependencies(s, &foreign, NULL, 1,
							   CU_STREAM_SET_CAPTURE_DEPENDENCIES),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuStreamUpdateCaptureDependencies(s, &empty, NULL, 1, 7),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphDestroyNode(empty), CUDA_ERROR_ILLEGAL_STATE);

	CU(cuLaunchHostFunc(s, capture_host, NULL));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	last = deps[0];
	expect_deps(last, ce, 2);

	/* fork onto s2 and join back: real edges */
	CU(cuEventRecord(fork, s));
	CU(cuStreamWaitEvent(s2, fork, 0));
	CU(cuStreamGetCaptureInfo(s2, &st, NULL, NULL, &deps, NULL, &n));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	expect_list(deps, n, &last, 1);
	CU(cuLaunchKernel(func("empty_kernel"), 1, 1, 1, 1, 1, 1, 0, s2, NULL, NULL));
	CU(cuStreamGetCaptureInfo(s2, &st, NULL, NULL, &deps, NULL, &n));
	ka = deps[0];
	CU(cuLaunchKernel(func("empty_kernel"), 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	kb = deps[0];
	CU(cuEventRecord(join, s2));
	CU(cuStreamWaitEvent(s, join, 0));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	const CUgraphNode ba[] = {kb, ka};
	expect_list(deps, n, ba, 2);
	CU(cuLaunchKernel(func("empty_kernel"), 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
	CU(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	kc = deps[0];
	expect_deps(ka, &last, 1);
	expect_deps(kb, &last, 1);
	expect_deps(kc, ba, 2);

	CU(cuStreamEndCapture(s, &g));
	CU(cuStreamIsCapturing(s2, &st));
	assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
	CU(cuGraphGetNodes(g, NULL, &n));
	assert_int_equal(n, 8);
	CU(cuGraphGetRootNodes(g, NULL, &n));
	assert_int_equal(n, 2); /* k0 and the empty node */

	capture_host_calls = 0;
	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphLaunch(x, s));
	CU(cuStreamSynchronize(s));
	CU(cuMemcpyDtoH(hc, c, sizeof(hc)));
	for (int i = 0; i < M; i++)
		assert_int_equal(hc[i], fill_value(2, (unsigned)i));
	assert_int_equal(capture_host_calls, 1);

	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuGraphDestroy(other));
	CU(cuEventDestroy(fork));
	CU(cuEventDestroy(join));
	CU(cuMemFree(a));
	CU(cuMemFree(b));
	CU(cuMemFree(c));
	CU(cuStreamDestroy(s));
	CU(cuStreamDestroy(s2));
}

/* --- event nodes ------------------------------------------------------------------------ */

/*
 * A record node marks the end of a slow graph for another stream, and a wait node holds a
 * graph back until another stream's slow work is done: each ordering is visible in the data
 * only if the node did its work.
 */
static void test_event_nodes(void **state)
{
	enum { M = 64 };
	CUstream s1, s2;
	CUevent ev, ev2, ev3;
	CUgraph g, gw;
	CUgraphNode spin, fill, rec, wait, fill2, sink;
	CUgraphExec x, xw;
	CUevent got;
	CUdeviceptr a, b;
	unsigned h[M], seed = 5, seed2 = 6;
	unsigned long long ns = 30000000ull, cnt = M;

	(void)state;
	CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&ev2, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&ev3, CU_EVENT_DISABLE_TIMING));
	CU(cuMemAlloc(&a, M * 4));
	CU(cuMemAlloc(&b, M * 4));

	/* spin -> fill a -> record ev */
	CU(cuGraphCreate(&g, 0));
	void *sa[] = {&ns};
	CUDA_KERNEL_NODE_PARAMS kp = {.func = func("spin_ns"),
				      .gridDimX = 1,
				      .gridDimY = 1,
				      .gridDimZ = 1,
				      .blockDimX = 1,
				      .blockDimY = 1,
				      .blockDimZ = 1,
				      .kernelParams = sa};
	CU(cuGraphAddKernelNode(&spin, g, NULL, 0, &kp));
	void *fa[] = {&a, &seed, &cnt};
	kp.func = func("fill_u32");
	kp.kernelParams = fa;
	CU(cuGraphAddKernelNode(&fill, g, &spin, 1, &kp));
	CU(cuGraphAddEventRecordNode(&rec, g, &fill, 1, ev));
	expect_type(rec, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
	CU(cuGraphEventRecordNodeGetEvent(rec, &got));
	assert_ptr_equal(got, ev);
	CU(cuGraphEventRecordNodeSetEvent(rec, ev3));
	CU(cuGraphEventRecordNodeGetEvent(rec, &got));
	assert_ptr_equal(got, ev3);
	CU(cuGraphEventRecordNodeSetEvent(rec, ev));
	assert_int_equal(cuGraphEventWaitNodeGetEvent(rec, &got), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphAddEventRecordNode(&sink, g, NULL, 0, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	CU(cuGraphInstantiate(&x, g, 0));

	CU(cuMemsetD32(a, 0, M));
	CU(cuGraphLaunch(x, s1));
	CU(cuStreamWaitEvent(s2, ev, 0));
	CU(cuMemcpyDtoHAsync(h, a, sizeof(h), s2));
	CU(cuStreamSynchronize(s2));
	for (int i = 0; i < M; i++)
		assert_int_equal(h[i], fill_value(5, (unsigned)i));
	CU(cuStreamSynchronize(s1));

	/* the exec's node records ev3 instead; the graph's still names ev */
	CU(cuGraphExecEventRecordNodeSetEvent(x, rec, ev3));
	CU(cuMemsetD32(a, 0, M));
	CU(cuGraphLaunch(x, s1));
	CU(cuStreamWaitEvent(s2, ev3, 0));
	CU(cuMemcpyDtoHAsync(h, a, sizeof(h), s2));
	CU(cuStreamSynchronize(s2));
	for (int i = 0; i < M; i++)
		assert_int_equal(h[i], fill_value(5, (unsigned)i));
	CU(cuStreamSynchronize(s1));
	CU(cuGraphEventRecordNodeGetEvent(rec, &got));
	assert_ptr_equal(got, ev);

	/* wait ev2 -> fill b; s1 spins then zeroes b, then records ev2 */
	CU(cuGraphCreate(&gw, 0));
	CU(cuGraphAddEventWaitNode(&wait, gw, NULL, 0, ev2));
	expect_type(wait, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
	CU(cuGraphEventWaitNodeGetEvent(wait, &got));
	assert_ptr_equal(got, ev2);
	void *fb[] = {&b, &seed2, &cnt};
	kp.kernelParams = fb;
	CU(cuGraphAddKernelNode(&fill2, gw, &wait, 1, &kp));
	CU(cuGraphInstantiate(&xw, gw, 0));
	for (int round = 0; round < 2; round++) {
		CUevent e = round ? ev3 : ev2;
		if (round) /* the exec waits for ev3 now */
			CU(cuGraphExecEventWaitNodeSetEvent(xw, wait, ev3));
		CU(cuLaunchKernel(func("spin_ns"), 1, 1, 1, 1, 1, 1, 0, s1, sa, NULL));
		CU(cuMemsetD32Async(b, 0, M, s1));
		CU(cuEventRecord(e, s1));
		CU(cuGraphLaunch(xw, s2));
		CU(cuStreamSynchronize(s2));
		CU(cuStreamSynchronize(s1));
		CU(cuMemcpyDtoH(h, b, sizeof(h)));
		for (int i = 0; i < M; i++)
			assert_int_equal(h[i], fill_value(6, (unsigned)i));
	}
	CU(cuGraphEventWaitNodeSetEvent(wait, ev));
	CU(cuGraphEventWaitNodeGetEvent(wait, &got));
	assert_ptr_equal(got, ev);

	CU(cuGraphExecDestroy(x));
	CU(cuGraphExecDestroy(xw));
	CU(cuGraphDestroy(g));
	CU(cuGraphDestroy(gw));
	CU(cuEventDestroy(ev));
	CU(cuEventDestroy(ev2));
	CU(cuEventDestroy(ev3));
	CU(cuMemFree(a));
	CU(cuMemFree(b));
	CU(cuStreamDestroy(s1));
	CU(cuStreamDestroy(s2));
}

/* --- Graphviz --------------------------------------------------------------------------- */

static size_t count(const char *hay, const char *needle)
{
	size_t k = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

static void test_dot_print(void **state)
{
	struct diamond dm;
	char path[] = "/tmp/simgpu_dotXXXXXX";
	char buf[8192];
	size_t n;
	FILE *f;
	int fd;

	(void)state;
	build_diamond(&dm);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	CU(cuGraphDebugDotPrint(dm.g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	assert_non_null(strstr(buf, "digraph"));
	assert_int_equal(count(buf, "[label="), 5);
	assert_int_equal(count(buf, "MEMSET"), 1);
	assert_int_equal(count(buf, "KERNEL"), 2);
	assert_int_equal(count(buf, "scale_add"), 2);
	assert_int_equal(count(buf, "MEMCPY"), 1);
	assert_int_equal(count(buf, "HOST"), 1);
	assert_int_equal(count(buf, " -> "), 5);
	assert_int_equal(cuGraphDebugDotPrint(dm.g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphDebugDotPrint(dm.g, "/nonexistent/dir/x.dot", 0),
			 CUDA_ERROR_OPERATING_SYSTEM);
	free_diamond(&dm);
}

static int setup(void **state)
{
	FILE *f = fopen(KERNELS_CUBIN, "rb");
	void *image;
	long n;
	int r;

	(void)state;
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	image = malloc((size_t)n);
	r = image && fread(image, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
	fclose(f);
	if (!r && (cuInit(0) || cuCtxCreate(&g_ctx, NULL, 0, 0) || cuModuleLoadData(&g_mod, image)))
		r = -1;
	free(image);
	return r;
}

static int teardown(void **state)
{
	(void)state;
	cuModuleUnload(g_mod);
	cuCtxDestroy(g_ctx);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_topology),	 cmocka_unit_test(test_params),
	    cmocka_unit_test(test_exec),	 cmocka_unit_test(test_exec_update),
	    cmocka_unit_test(test_child_graph),	 cmocka_unit_test(test_capture_to_graph),
	    cmocka_unit_test(test_capture_deps), cmocka_unit_test(test_event_nodes),
	    cmocka_unit_test(test_dot_print),
	};

	return cmocka_run_group_tests_name("simgpu_graph", tests, setup, teardown);
}
