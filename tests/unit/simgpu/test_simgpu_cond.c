/*
 * simgpu's conditional graph nodes against the driver's semantics (tests/simgpu/cond.c): the
 * handles and their numbers, conditional nodes added with cuGraphAddNode and their bodies, the
 * rules the H200 keeps (no clone, no child graph, one executable, every handle used, only some
 * node types in a body), IF with an ELSE, a WHILE loop counting down, a SWITCH whose value a
 * kernel computes, a conditional node inside a body, CU_GRAPH_COND_ASSIGN_DEFAULT handles
 * against those that keep their value from launch to launch, cuGraphExecUpdate, and a kernel
 * that sets a handle outside any graph. The kernels are the nvcc-built ones of
 * tests/progs/kernels.cu (cond_set, cond_pick, cond_countdown, affine_u32), run by their twins;
 * every value a launch leaves is compared with the host's own computation.
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

enum { M = 64 }; /* words in a data buffer */

static CUcontext g_ctx;
static CUmodule g_mod;
static CUstream g_s;

static CUfunction func(const char *name)
{
	CUfunction f = NULL;

	CU(cuModuleGetFunction(&f, g_mod, name));
	return f;
}

/* --- data the host follows ----------------------------------------------------------------- */

struct words {
	CUdeviceptr d;
	unsigned want[M];
};

static void words_init(struct words *w, unsigned seed)
{
	for (unsigned i = 0; i < M; i++)
		w->want[i] = (i + 1) * 0x9E3779B1u ^ seed;
	CU(cuMemAlloc(&w->d, sizeof(w->want)));
	CU(cuMemcpyHtoD(w->d, w->want, sizeof(w->want)));
}

static void words_affine(struct words *w, unsigned mul, unsigned add)
{
	for (unsigned i = 0; i < M; i++)
		w->want[i] = w->want[i] * mul + add;
}

static void words_check(const struct words *w)
{
	unsigned got[M];

	CU(cuMemcpyDtoH(got, w->d, sizeof(got)));
	for (unsigned i = 0; i < M; i++)
		if (got[i] != w->want[i])
			fail_msg("word %u: 0x%08x, want 0x%08x", i, got[i], w->want[i]);
}

/* a few device words the host sets and reads back (selectors, counters) */
static CUdeviceptr cells_new(unsigned n)
{
	CUdeviceptr d;

	CU(cuMemAlloc(&d, n * 4));
	CU(cuMemsetD32(d, 0, n));
	return d;
}

static void cells_set(CUdeviceptr d, unsigned a, unsigned b)
{
	unsigned v[2] = {a, b};
	CU(cuMemcpyHtoD(d, v, sizeof(v)));
}

static void cells_expect(CUdeviceptr d, unsigned a, unsigned b)
{
	unsigned v[2];
	CU(cuMemcpyDtoH(v, d, sizeof(v)));
	assert_int_equal(v[0], a);
	assert_int_equal(v[1], b);
}

/* the trace cond_countdown leaves in c[1], counting c[0] down from `from` to 0 */
static unsigned countdown_trace(unsigned from, unsigned trace)
{
	while (from) {
		from--;
		trace = trace * 3 + from;
	}
	return trace;
}

/* --- nodes --------------------------------------------------------------------------------- */

static CUgraphNode knode(CUgraph g, const CUgraphNode *deps, size_t ndeps, const char *name,
			 void **args)
{
	CUDA_KERNEL_NODE_PARAMS p = {0};
	CUgraphNode n;

	p.func = func(name);
	p.gridDimX = p.gridDimY = p.gridDimZ = 1;
	p.blockDimX = 32;
	p.blockDimY = p.blockDimZ = 1;
	p.kernelParams = args;
	CU(cuGraphAddKernelNode(&n, g, deps, ndeps, &p));
	return n;
}

static CUgraphNode affine(CUgraph g, const CUgraphNode *deps, size_t ndeps, struct words *w,
			  unsigned mul, unsigned add)
{
	unsigned long long n = M;
	void *args[] = {&w->d, &mul, &add, &n};
	return knode(g, deps, ndeps, "affine_u32", args);
}

static CUgraphNode pick(CUgraph g, const CUgraphNode *deps, size_t ndeps, CUdeviceptr x,
			unsigned mod, CUgraphConditionalHandle h)
{
	void *args[] = {&x, &mod, &h};
	return knode(g, deps, ndeps, "cond_pick", args);
}

static CUgraphNode set(CUgraph g, const CUgraphNode *deps, size_t ndeps, CUgraphConditionalHandle h,
		       unsigned v)
{
	void *args[] = {&h, &v};
	return knode(g, deps, ndeps, "cond_set", args);
}

static CUgraphNode countdown(CUgraph g, const CUgraphNode *deps, size_t ndeps, CUdeviceptr c,
			     CUgraphConditionalHandle h)
{
	void *args[] = {&c, &h};
	return knode(g, deps, ndeps, "cond_countdown", args);
}

/* cuGraphAddNode of a conditional node; its bodies to bodies (NULL: not wanted) */
static CUresult add_cond(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t ndeps,
			 CUgraphConditionalHandle h, CUgraphConditionalNodeType type, unsigned size,
			 CUgraph *bodies)
{
	CUgraphNodeParams p;
	CUresult r;

	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	p.conditional.handle = h;
	p.conditional.type = type;
	p.conditional.size = size;
	p.conditional.ctx = g_ctx;
	r = cuGraphAddNode(n, g, deps, NULL, ndeps, &p);
	if (r == CUDA_SUCCESS && bodies)
		for (unsigned i = 0; i < size; i++)
			bodies[i] = p.conditional.phGraph_out[i];
	return r;
}

static CUgraphNode cond(CUgraph g, const CUgraphNode *deps, size_t ndeps,
			CUgraphConditionalHandle h, CUgraphConditionalNodeType type, unsigned size,
			CUgraph *bodies)
{
	CUgraphNode n;

	CU(add_cond(&n, g, deps, ndeps, h, type, size, bodies));
	return n;
}

static size_t node_count(CUgraph g)
{
	size_t n;

	CU(cuGraphGetNodes(g, NULL, &n));
	return n;
}

static void run(CUgraphExec x)
{
	CU(cuGraphLaunch(x, g_s));
	CU(cuStreamSynchronize(g_s));
}

/* --- tests --------------------------------------------------------------------------------- */

/* Handles are 1, 2, ... in each graph's tree, bodies included, as the driver numbers them. */
static void test_handles(void **state)
{
	CUgraph g, g2, body[2] = {0};
	CUgraphConditionalHandle h1, h2, h3, hb;
	CUgraphNode n;

	(void)state;
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphCreate(&g2, 0));
	CU(cuGraphConditionalHandleCreate(&h1, g, g_ctx, 5, 0));
	CU(cuGraphConditionalHandleCreate(&h2, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
	CU(cuGraphConditionalHandleCreate(&h3, g2, NULL, 0, 0)); /* the current context */
	assert_int_equal(h1, 1);
	assert_int_equal(h2, 2);
	assert_int_equal(h3, 1);
	n = cond(g, NULL, 0, h1, CU_GRAPH_COND_TYPE_IF, 2, body);
	CU(cuGraphConditionalHandleCreate(&hb, body[1], g_ctx, 0, 0));
	assert_int_equal(hb, 3);
	assert_int_equal(cuGraphConditionalHandleCreate(&hb, g, g_ctx, 0, 2),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphConditionalHandleCreate(NULL, g, g_ctx, 0, 0),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphConditionalHandleCreate(&hb, (CUgraph)&hb, g_ctx, 0, 0),
			 CUDA_ERROR_INVALID_VALUE);
	(void)n;
	CU(cuGraphDestroy(g));
	CU(cuGraphDestroy(g2));
}

/*
 * cuGraphAddNode: the bodies come back through phGraph_out, which then points at the node's
 * own array (the caller's is left alone, as on the H200); the checks of type, size and handle;
 * other node types through the same call; what cannot be done with such a graph.
 */
static void test_add_node(void **state)
{
	CUgraph g, other, ifb[2], swb[3], mine[2] = {NULL, NULL}, c;
	CUgraphConditionalHandle h, h2, h3, hx, hb;
	CUgraphNode n, k, *v;
	CUgraphNodeType t;
	CUgraphNodeParams p;
	CUgraphExec x, x2;
	struct words w;
	size_t count;

	(void)state;
	words_init(&w, 1);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphCreate(&other, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
	CU(cuGraphConditionalHandleCreate(&h2, g, g_ctx, 0, 0));
	CU(cuGraphConditionalHandleCreate(&hx, other, g_ctx, 0, 0));
	CU(cuGraphConditionalHandleCreate(&hx, other, g_ctx, 0, 0));
	CU(cuGraphConditionalHandleCreate(&hx, other, g_ctx, 0, 0)); /* 3: not a handle of g */

	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	p.conditional.handle = h;
	p.conditional.type = CU_GRAPH_COND_TYPE_IF;
	p.conditional.size = 2;
	p.conditional.ctx = g_ctx;
	p.conditional.phGraph_out = mine;
	CU(cuGraphAddNode(&n, g, NULL, NULL, 0, &p));
	assert_ptr_not_equal(p.conditional.phGraph_out, mine);
	assert_null(mine[0]);
	ifb[0] = p.conditional.phGraph_out[0];
	ifb[1] = p.conditional.phGraph_out[1];
	assert_non_null(ifb[0]);
	assert_non_null(ifb[1]);
	assert_ptr_not_equal(ifb[0], ifb[1]);
	CU(cuGraphNodeGetType(n, &t));
	assert_int_equal(t, CU_GRAPH_NODE_TYPE_CONDITIONAL);
	assert_int_equal(node_count(ifb[0]), 0);

	/* the checks, each answered CUDA_ERROR_INVALID_VALUE as on the H200 */
	assert_int_equal(add_cond(&k, g, NULL, 0, h2, CU_GRAPH_COND_TYPE_IF, 3, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(add_cond(&k, g, NULL, 0, h2, CU_GRAPH_COND_TYPE_WHILE, 2, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(add_cond(&k, g, NULL, 0, h2, CU_GRAPH_COND_TYPE_SWITCH, 0, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(add_cond(&k, g, NULL, 0, h2, (CUgraphConditionalNodeType)7, 1, NULL),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(add_cond(&k, g, NULL, 0, hx, CU_GRAPH_COND_TYPE_IF, 1, NULL),
			 CUDA_ERROR_INVALID_VALUE); /* no such handle in g */
	assert_int_equal(add_cond(&k, g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, NULL),
			 CUDA_ERROR_INVALID_VALUE); /* h serves n already */
	CU(cuGraphConditionalHandleCreate(&hb, ifb[0], g_ctx, 0, 0));
	assert_int_equal(add_cond(&k, g, NULL, 0, hb, CU_GRAPH_COND_TYPE_IF, 1, NULL),
			 CUDA_ERROR_INVALID_VALUE); /* made below g: not for g's nodes */
	assert_int_equal(node_count(g), 1);

	/* h2, made on g, serves a SWITCH in the IF body after a kernel added by cuGraphAddNode */
	memset(&p, 0, sizeof(p));
	p.type = CU_GRAPH_NODE_TYPE_KERNEL;
	unsigned mul = 3, add = 4;
	unsigned long long cnt = M;
	void *args[] = {&w.d, &mul, &add, &cnt};
	p.kernel.func = func("affine_u32");
	p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
	p.kernel.blockDimX = p.kernel.blockDimY = p.kernel.blockDimZ = 1;
	p.kernel.kernelParams = args;
	CU(cuGraphAddNode(&k, ifb[0], NULL, NULL, 0, &p));
	CU(cuGraphNodeGetType(k, &t));
	assert_int_equal(t, CU_GRAPH_NODE_TYPE_KERNEL);
	cond(ifb[0], &k, 1, h2, CU_GRAPH_COND_TYPE_SWITCH, 3, swb);
	assert_int_equal(node_count(ifb[0]), 2);
	/* hb, made on the IF body, serves a node in a body below it */
	cond(swb[2], NULL, 0, hb, CU_GRAPH_COND_TYPE_WHILE, 1, NULL);
	CU(cuGraphConditionalHandleCreate(&h3, g, g_ctx, 0, 0));

	/* the graph lists its own nodes only; a body is the node's */
	v = calloc(4, sizeof(*v));
	count = 4;
	CU(cuGraphGetNodes(g, v, &count));
	assert_int_equal(count, 1);
	assert_ptr_equal(v[0], n);
	free(v);
	assert_int_equal(cuGraphDestroy(ifb[1]), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphDestroy(swb[0]), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGraphClone(&c, g), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(cuGraphAddChildGraphNode(&k, other, NULL, 0, g), CUDA_ERROR_NOT_SUPPORTED);

	/* h3 serves no node: no instantiation (the H200: CUDA_ERROR_INVALID_VALUE) */
	assert_int_equal(cuGraphInstantiate(&x, g, 0), CUDA_ERROR_INVALID_VALUE);
	CUgraph b3[1] = {0};
	cond(g, &n, 1, h3, CU_GRAPH_COND_TYPE_WHILE, 1, b3);
	/* a body by itself is not a graph to instantiate */
	assert_int_equal(cuGraphInstantiate(&x, b3[0], 0), CUDA_ERROR_NOT_SUPPORTED);
	CU(cuGraphInstantiate(&x, g, 0));
	/* one executable at a time */
	assert_int_equal(cuGraphInstantiate(&x2, g, 0), CUDA_ERROR_NOT_SUPPORTED);
	CU(cuGraphExecDestroy(x));
	CU(cuGraphInstantiate(&x, g, 0));
	CU(cuGraphExecDestroy(x));

	/* a body holds no host node (the add passes, the instantiation does not) */
	CUDA_HOST_NODE_PARAMS hp = {.fn = (CUhostFn)free, .userData = NULL};
	CUgraphNode hn;
	CU(cuGraphAddHostNode(&hn, swb[1], NULL, 0, &hp));
	assert_int_equal(cuGraphInstantiate(&x, g, 0), CUDA_ERROR_INVALID_VALUE);
	CU(cuGraphDestroyNode(hn));
	CU(cuGraphInstantiate(&x, g, 0));
	/* nor can a graph with conditional nodes become a child graph in a capture */
	CUgraph cap;
	CU(cuStreamBeginCapture(g_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	assert_int_equal(cuGraphLaunch(x, g_s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	assert_int_equal(cuStreamEndCapture(g_s, &cap), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CU(cuGraphExecDestroy(x));

	/* the node goes with its bodies; the handle can serve another node then */
	CU(cuGraphDestroyNode(n));
	cond(g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, ifb);
	CU(cuGraphDestroy(g));
	CU(cuGraphDestroy(other));
	CU(cuMemFree(w.d));
}

/* IF with an ELSE: a kernel picks the body from a word's parity; a node after both. */
static void test_if_else(void **state)
{
	CUgraph g, body[2] = {0};
	CUgraphConditionalHandle h;
	CUgraphNode k, c, e;
	CUgraphExec x;
	CUdeviceptr sel = cells_new(2);
	struct words w;
	const unsigned with[] = {7, 4, 4, 1};

	(void)state;
	words_init(&w, 2);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
	k = pick(g, NULL, 0, sel, 2, h);
	c = cond(g, &k, 1, h, CU_GRAPH_COND_TYPE_IF, 2, body);
	affine(body[0], NULL, 0, &w, 5, 7);
	e = affine(body[1], NULL, 0, &w, 9, 2);
	affine(body[1], &e, 1, &w, 1, 11);
	affine(g, &c, 1, &w, 7, 1000);
	CU(cuGraphInstantiate(&x, g, 0));
	for (int l = 0; l < 4; l++) {
		cells_set(sel, with[l], 0);
		run(x);
		if (with[l] % 2) {
			words_affine(&w, 5, 7);
		} else {
			words_affine(&w, 9, 2);
			words_affine(&w, 1, 11);
		}
		words_affine(&w, 7, 1000);
		words_check(&w);
	}
	CU(cuGraphExecDestroy(x));

	/* without an ELSE, a zero runs nothing */
	CUgraph g1, b1[1] = {0};
	CU(cuGraphCreate(&g1, 0));
	CU(cuGraphConditionalHandleCreate(&h, g1, g_ctx, 0, 0));
	k = pick(g1, NULL, 0, sel, 2, h);
	cond(g1, &k, 1, h, CU_GRAPH_COND_TYPE_IF, 1, b1);
	affine(b1[0], NULL, 0, &w, 3, 3);
	CU(cuGraphInstantiate(&x, g1, 0));
	cells_set(sel, 2, 0);
	run(x);
	words_check(&w);
	cells_set(sel, 3, 0);
	run(x);
	words_affine(&w, 3, 3);
	words_check(&w);
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g1));
	CU(cuGraphDestroy(g));
	CU(cuMemFree(w.d));
	CU(cuMemFree(sel));
}

/*
 * WHILE: the body scales the data and counts down, the loop goes on while the count is not 0
 * (a handle of default 1, assigned at each launch: the body runs before it decides).
 */
static void test_while(void **state)
{
	CUgraph g, body = NULL;
	CUgraphConditionalHandle h;
	CUgraphNode loop, a;
	CUgraphExec x;
	CUdeviceptr ctr = cells_new(2);
	struct words w;
	unsigned trace = 0;
	const unsigned turns[] = {5, 1, 3};

	(void)state;
	words_init(&w, 3);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	loop = cond(g, NULL, 0, h, CU_GRAPH_COND_TYPE_WHILE, 1, &body);
	a = affine(body, NULL, 0, &w, 3, 1);
	countdown(body, &a, 1, ctr, h);
	affine(g, &loop, 1, &w, 5, 2);
	CU(cuGraphInstantiate(&x, g, 0));
	for (int l = 0; l < 3; l++) {
		cells_set(ctr, turns[l], trace);
		run(x);
		for (unsigned t = 0; t < turns[l]; t++)
			words_affine(&w, 3, 1);
		words_affine(&w, 5, 2);
		trace = countdown_trace(turns[l], trace);
		cells_expect(ctr, 0, trace);
		words_check(&w);
	}
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuMemFree(w.d));
	CU(cuMemFree(ctr));
}

/* SWITCH of 3 bodies on x % 4 (3: none); body 2 filled by capture into it. */
static void test_switch(void **state)
{
	CUgraph g, body[3] = {0}, got;
	CUgraphConditionalHandle h;
	CUgraphNode k;
	CUgraphExec x;
	CUdeviceptr sel = cells_new(2);
	struct words w;
	const unsigned mul[] = {3, 5, 7}, add[] = {100, 200, 300};
	const unsigned with[] = {6, 5, 3, 8, 2};

	(void)state;
	words_init(&w, 4);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
	k = pick(g, NULL, 0, sel, 4, h);
	cond(g, &k, 1, h, CU_GRAPH_COND_TYPE_SWITCH, 3, body);
	affine(body[0], NULL, 0, &w, mul[0], add[0]);
	affine(body[1], NULL, 0, &w, mul[1], add[1]);
	CU(cuStreamBeginCaptureToGraph(g_s, body[2], NULL, NULL, 0,
				       CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	{
		unsigned m = mul[2], a = add[2];
		unsigned long long n = M;
		void *args[] = {&w.d, &m, &a, &n};
		CU(cuLaunchKernel(func("affine_u32"), 1, 1, 1, 32, 1, 1, 0, g_s, args, NULL));
	}
	CU(cuStreamEndCapture(g_s, &got));
	assert_ptr_equal(got, body[2]);
	assert_int_equal(node_count(body[2]), 1);
	words_check(&w); /* captured, not run */
	CU(cuGraphInstantiate(&x, g, 0));
	for (int l = 0; l < 5; l++) {
		unsigned b = with[l] % 4;
		cells_set(sel, with[l], 0);
		run(x);
		if (b < 3)
			words_affine(&w, mul[b], add[b]);
		words_check(&w);
	}
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuMemFree(w.d));
	CU(cuMemFree(sel));
}

/*
 * An IF whose body scales, loops (a WHILE of a handle made on the body, counting down), and
 * scales again; taken, then skipped, then taken.
 */
static void test_nested(void **state)
{
	CUgraph g, outer = NULL, inner = NULL;
	CUgraphConditionalHandle ho, hi;
	CUgraphNode k, c, a, loop, b;
	CUgraphExec x;
	CUdeviceptr sel = cells_new(2), ctr = cells_new(2);
	struct words w;
	const unsigned with[] = {1, 2, 3}, turns[] = {4, 2, 3};
	unsigned trace = 0;

	(void)state;
	words_init(&w, 5);
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&ho, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
	k = pick(g, NULL, 0, sel, 2, ho);
	c = cond(g, &k, 1, ho, CU_GRAPH_COND_TYPE_IF, 1, &outer);
	affine(g, &c, 1, &w, 13, 17);
	CU(cuGraphConditionalHandleCreate(&hi, outer, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	a = affine(outer, NULL, 0, &w, 3, 5);
	loop = cond(outer, &a, 1, hi, CU_GRAPH_COND_TYPE_WHILE, 1, &inner);
	affine(outer, &loop, 1, &w, 7, 1);
	b = affine(inner, NULL, 0, &w, 11, 4);
	countdown(inner, &b, 1, ctr, hi);
	assert_int_equal(node_count(g), 3);
	assert_int_equal(node_count(outer), 3);
	assert_int_equal(node_count(inner), 2);
	CU(cuGraphInstantiate(&x, g, 0));
	for (int l = 0; l < 3; l++) {
		unsigned left = turns[l];
		cells_set(sel, with[l], 0);
		cells_set(ctr, left, trace);
		run(x);
		if (with[l] % 2) {
			words_affine(&w, 3, 5);
			for (unsigned t = 0; t < left; t++)
				words_affine(&w, 11, 4);
			words_affine(&w, 7, 1);
			trace = countdown_trace(left, trace);
			left = 0;
		}
		words_affine(&w, 13, 17);
		cells_expect(ctr, left, trace);
		words_check(&w);
	}
	CU(cuGraphExecDestroy(x));
	CU(cuGraphDestroy(g));
	CU(cuMemFree(w.d));
	CU(cuMemFree(sel));
	CU(cuMemFree(ctr));
}

/*
 * The graph IF(h) { x = 3x + 1 } -> cond_set(h, v) of a handle of default dflt and flags:
 * an executable of it, and the data it runs on.
 */
struct setter {
	CUgraph g;
	CUgraphExec x;
	struct words w;
};

static void setter_build(struct setter *s, unsigned dflt, unsigned flags, unsigned v)
{
	CUgraphConditionalHandle h;
	CUgraph body = NULL;
	CUgraphNode c;

	CU(cuGraphCreate(&s->g, 0));
	CU(cuGraphConditionalHandleCreate(&h, s->g, g_ctx, dflt, flags));
	c = cond(s->g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, &body);
	affine(body, NULL, 0, &s->w, 3, 1);
	set(s->g, &c, 1, h, v);
}

/*
 * CU_GRAPH_COND_ASSIGN_DEFAULT: the default at each launch, whatever the last launch set.
 * Without it the value starts at 0 whatever the default, and each launch sees what the last
 * one left (what the H200 does; the guide leaves it undefined).
 */
static void test_default_and_persistent(void **state)
{
	struct setter s;
	const int body_runs_assign[] = {1, 1, 1}, body_runs_kept[] = {0, 1, 1};

	(void)state;
	/* default 1, assigned at each launch, set to 0 after the IF: the body runs every time */
	words_init(&s.w, 6);
	setter_build(&s, 1, CU_GRAPH_COND_ASSIGN_DEFAULT, 0);
	CU(cuGraphInstantiate(&s.x, s.g, 0));
	for (int l = 0; l < 3; l++) {
		run(s.x);
		if (body_runs_assign[l])
			words_affine(&s.w, 3, 1);
		words_check(&s.w);
	}
	CU(cuGraphExecDestroy(s.x));
	CU(cuGraphDestroy(s.g));

	/* default 5, not assigned, set to 1 after the IF: skipped first (0), then kept (1) */
	setter_build(&s, 5, 0, 1);
	CU(cuGraphInstantiate(&s.x, s.g, 0));
	for (int l = 0; l < 3; l++) {
		run(s.x);
		if (body_runs_kept[l])
			words_affine(&s.w, 3, 1);
		words_check(&s.w);
	}
	CU(cuGraphExecDestroy(s.x));
	/* a new executable starts at 0 again */
	CU(cuGraphInstantiate(&s.x, s.g, 0));
	run(s.x);
	words_check(&s.w);
	run(s.x);
	words_affine(&s.w, 3, 1);
	words_check(&s.w);
	CU(cuGraphExecDestroy(s.x));
	CU(cuGraphDestroy(s.g));

	/* default 0, assigned, set to 1 after the IF: never runs */
	setter_build(&s, 0, CU_GRAPH_COND_ASSIGN_DEFAULT, 1);
	CU(cuGraphInstantiate(&s.x, s.g, 0));
	run(s.x);
	run(s.x);
	words_check(&s.w);
	CU(cuGraphExecDestroy(s.x));
	CU(cuGraphDestroy(s.g));
	CU(cuMemFree(s.w.d));
}

/*
 * cuGraphExecUpdate: a graph built again the same way (its handles have the same numbers)
 * updates the executable, the handles' defaults and flags with it; a conditional node of
 * another size cannot (NOT_SUPPORTED, as on the H200), nor a body of other nodes.
 */
static void test_update(void **state)
{
	struct setter a, b;
	CUgraphExecUpdateResultInfo info;
	CUgraphConditionalHandle h;
	CUgraph g, body[2] = {0};

	(void)state;
	words_init(&a.w, 7);
	b.w = a.w;
	setter_build(&a, 1, CU_GRAPH_COND_ASSIGN_DEFAULT, 0);
	CU(cuGraphInstantiate(&a.x, a.g, 0));
	run(a.x);
	words_affine(&a.w, 3, 1);
	words_check(&a.w);
	setter_build(&b, 0, CU_GRAPH_COND_ASSIGN_DEFAULT, 0); /* default 0 now */
	CU(cuGraphExecUpdate(a.x, b.g, &info));
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
	run(a.x);
	words_check(&a.w); /* 0 at the launch: skipped */

	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	CUgraphNode c = cond(g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 2, body);
	affine(body[0], NULL, 0, &a.w, 3, 1);
	set(g, &c, 1, h, 0);
	assert_int_equal(cuGraphExecUpdate(a.x, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
	CU(cuGraphDestroy(g));

	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
	c = cond(g, NULL, 0, h, CU_GRAPH_COND_TYPE_IF, 1, body);
	affine(body[0], NULL, 0, &a.w, 3, 1);
	affine(body[0], NULL, 0, &a.w, 3, 1);
	set(g, &c, 1, h, 0);
	assert_int_equal(cuGraphExecUpdate(a.x, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
	assert_null(info.errorNode); /* the bodies' node counts differ */
	CU(cuGraphDestroy(g));

	run(a.x); /* still the updated one */
	words_check(&a.w);
	CU(cuGraphExecDestroy(a.x));
	CU(cuGraphDestroy(a.g));
	CU(cuGraphDestroy(b.g));
	CU(cuMemFree(a.w.d));
}

/* the Graphviz dump names the node and draws its bodies */
static void test_dot(void **state)
{
	char path[] = "/tmp/simgpu_cond_XXXXXX", buf[8192];
	CUgraphConditionalHandle h;
	CUgraph g, body[3] = {0};
	size_t n;
	FILE *f;
	int fd;

	(void)state;
	CU(cuGraphCreate(&g, 0));
	CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, 0));
	cond(g, NULL, 0, h, CU_GRAPH_COND_TYPE_SWITCH, 3, body);
	CU(cuGraphAddEmptyNode(&(CUgraphNode){0}, body[1], NULL, 0));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	CU(cuGraphDebugDotPrint(g, path, 0));
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	unlink(path);
	assert_non_null(strstr(buf, "CONDITIONAL\\nSWITCH, handle 1, 3 bodies"));
	assert_non_null(strstr(buf, "body 2 of"));
	assert_non_null(strstr(buf, "EMPTY"));
	CU(cuGraphDestroy(g));
}

/* cudaGraphSetConditional outside a graph: an illegal address, as on the H200 (own context) */
static void test_set_outside(void **state)
{
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	CUgraphConditionalHandle h = 1;
	unsigned v = 1;
	void *args[] = {&h, &v};
	FILE *fp = fopen(KERNELS_CUBIN, "rb");
	static char image[1 << 20];
	size_t n;

	(void)state;
	assert_non_null(fp);
	n = fread(image, 1, sizeof(image), fp);
	fclose(fp);
	assert_true(n > 0 && n < sizeof(image));
	CU(cuCtxCreate(&ctx, NULL, 0, 0));
	CU(cuModuleLoadData(&mod, image));
	CU(cuModuleGetFunction(&f, mod, "cond_set"));
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
	assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU(cuCtxDestroy(ctx));
	CU(cuCtxSetCurrent(g_ctx));
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
	if (!r && (cuInit(0) || cuCtxCreate(&g_ctx, NULL, 0, 0) ||
		   cuModuleLoadData(&g_mod, image) || cuStreamCreate(&g_s, CU_STREAM_NON_BLOCKING)))
		r = -1;
	free(image);
	return r;
}

static int teardown(void **state)
{
	(void)state;
	cuStreamDestroy(g_s);
	cuModuleUnload(g_mod);
	cuCtxDestroy(g_ctx);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handles),
	    cmocka_unit_test(test_add_node),
	    cmocka_unit_test(test_if_else),
	    cmocka_unit_test(test_while),
	    cmocka_unit_test(test_switch),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_default_and_persistent),
	    cmocka_unit_test(test_update),
	    cmocka_unit_test(test_dot),
	    cmocka_unit_test(test_set_outside),
	};

	return cmocka_run_group_tests_name("simgpu_cond", tests, setup, teardown);
}
