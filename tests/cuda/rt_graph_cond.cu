// Conditional graph nodes through the runtime API: handles made by
// cudaGraphConditionalHandleCreate, conditional nodes added by cudaGraphAddNode
// (cudaGraphNodeTypeConditional), their bodies filled node by node or by capture
// (cudaStreamBeginCaptureToGraph), the values set by kernels with cudaGraphSetConditional.
// Four graphs: a WHILE loop counting down, an IF with an ELSE body, a SWITCH of three bodies
// chosen by a value a kernel computes, and an IF whose body holds a WHILE loop of its own.
// Each executable is launched more than once with other inputs, and every value a launch leaves
// is compared with the host's own computation. The programming guide leaves undefined the value
// a handle without cudaGraphCondAssignDefault has when a launch starts, so every handle here
// either has that flag or is set by a kernel before its node. One line per check, the same
// natively and through rgpu (no addresses, handles or times); the kernels' C twins are in
// tests/simgpu/kernels.c (cg_pick and cg_countdown share the twins of kernels.cu's cond_pick
// and cond_countdown). Checked natively on an H200 (driver 580).
#include <vector>

#include "rt_check.h"

#if CUDART_VERSION < 12080
#error "rt_graph_cond.cu needs CUDA 12.8 or later (IF with ELSE, SWITCH)"
#endif
// cudaGraphAddNode gained edge data in CUDA 13.0 (12.3 to 12.9 call that one _v2)
#if CUDART_VERSION >= 13000
#define GC_ADD_NODE(n, g, d, nd, p) cudaGraphAddNode(n, g, d, nullptr, nd, p)
#else
#define GC_ADD_NODE(n, g, d, nd, p) cudaGraphAddNode(n, g, d, nd, p)
#endif

// x[i] = x[i] * mul + add over the first n elements: the order of two of them shows
__global__ void cg_affine(unsigned *x, unsigned mul, unsigned add, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * mul + add;
}

// the value x[0] % mod: whether an IF runs its body, which body of a SWITCH runs
__global__ void cg_pick(const unsigned *x, unsigned mod, cudaGraphConditionalHandle h)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		cudaGraphSetConditional(h, x[0] % mod);
}

// One turn of a WHILE loop counting down: c[0] goes down by one, c[1] keeps a trace of the
// values it took, and the loop goes on while c[0] is not zero.
__global__ void cg_countdown(unsigned *c, cudaGraphConditionalHandle h)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		c[0] -= 1;
		c[1] = c[1] * 3 + c[0];
		cudaGraphSetConditional(h, c[0] != 0);
	}
}

static const int N = 4096, THREADS = 256;
static const size_t BYTES = N * sizeof(unsigned);

static unsigned pat(unsigned i, unsigned seed)
{
	unsigned x = (i + 1) * 0x9E3779B1u ^ seed * 0x85EBCA6Bu;
	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	return x ^ (x >> 12);
}

// The host's side of a device array of N words: what it should hold, and a check against it.
struct words {
	unsigned *d;
	std::vector<unsigned> want;

	explicit words(unsigned seed) : want(N)
	{
		for (int i = 0; i < N; i++)
			want[i] = pat(i, seed);
		CK(cudaMalloc(&d, BYTES));
		CK(cudaMemcpy(d, want.data(), BYTES, cudaMemcpyHostToDevice));
	}
	~words()
	{
		cudaFree(d);
	}
	words(const words &) = delete;
	words &operator=(const words &) = delete;

	void affine(unsigned mul, unsigned add)
	{
		for (unsigned &w : want)
			w = w * mul + add;
	}
	void check(const char *what)
	{
		std::vector<unsigned> got(N);
		CK(cudaMemcpy(got.data(), d, BYTES, cudaMemcpyDeviceToHost));
		if (rt_expect_u32(what, got.data(), want.data(), N))
			printf("%s: ok %d words\n", what, N);
		else
			printf("%s: FAILED\n", what);
	}
};

// A few device words the host sets and reads back whole (counters, selectors).
struct cells {
	unsigned *d;
	size_t n;

	explicit cells(size_t count) : n(count)
	{
		CK(cudaMalloc(&d, n * sizeof(unsigned)));
		CK(cudaMemset(d, 0, n * sizeof(unsigned)));
	}
	~cells()
	{
		cudaFree(d);
	}
	cells(const cells &) = delete;
	cells &operator=(const cells &) = delete;

	void set(std::vector<unsigned> v)
	{
		CK(cudaMemcpy(d, v.data(), n * 4, cudaMemcpyHostToDevice));
	}
	void check(const char *what, std::vector<unsigned> want)
	{
		std::vector<unsigned> got(n);
		CK(cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost));
		if (rt_expect_u32(what, got.data(), want.data(), n))
			printf("%s: ok\n", what);
		else
			printf("%s: FAILED\n", what);
	}
};

static void check(bool ok, const char *line, const char *why)
{
	if (ok) {
		printf("%s: ok\n", line);
	} else {
		printf("%s: FAILED\n", line);
		rt_fail("%s: %s", line, why);
	}
}

// cg_affine(x, mul, add, N) after deps, over N threads; the arguments are copied by the call.
static cudaGraphNode_t add_affine(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				  unsigned *x, unsigned mul, unsigned add)
{
	int n = N;
	void *args[] = {&x, &mul, &add, &n};
	cudaKernelNodeParams p = {};
	cudaGraphNode_t node;

	p.func = (void *)cg_affine;
	p.gridDim = dim3(N / THREADS);
	p.blockDim = dim3(THREADS);
	p.kernelParams = args;
	CK(cudaGraphAddKernelNode(&node, g, deps, ndeps, &p));
	return node;
}

// A one-thread kernel node of func with args after deps.
static cudaGraphNode_t add_one(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps, void *func,
			       void **args)
{
	cudaKernelNodeParams p = {};
	cudaGraphNode_t node;

	p.func = func;
	p.gridDim = dim3(1);
	p.blockDim = dim3(1);
	p.kernelParams = args;
	CK(cudaGraphAddKernelNode(&node, g, deps, ndeps, &p));
	return node;
}

static cudaGraphNode_t add_pick(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				const unsigned *x, unsigned mod, cudaGraphConditionalHandle h)
{
	void *args[] = {&x, &mod, &h};
	return add_one(g, deps, ndeps, (void *)cg_pick, args);
}

static cudaGraphNode_t add_countdown(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				     unsigned *c, cudaGraphConditionalHandle h)
{
	void *args[] = {&c, &h};
	return add_one(g, deps, ndeps, (void *)cg_countdown, args);
}

// A conditional node of h after deps; its size bodies, made by the call, go to bodies.
static cudaGraphNode_t add_cond(cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps,
				cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type,
				unsigned size, cudaGraph_t *bodies)
{
	cudaGraphNodeParams p = {};
	cudaGraphNode_t node;

	p.type = cudaGraphNodeTypeConditional;
	p.conditional.handle = h;
	p.conditional.type = type;
	p.conditional.size = size;
	CK(GC_ADD_NODE(&node, g, deps, ndeps, &p));
	for (unsigned i = 0; i < size; i++)
		bodies[i] = p.conditional.phGraph_out[i];
	return node;
}

static size_t node_count(cudaGraph_t g)
{
	size_t n = 0;
	CK(cudaGraphGetNodes(g, nullptr, &n));
	return n;
}

static void launch(cudaGraphExec_t x, cudaStream_t s)
{
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
}

// The host's countdown from c[0]: the trace cg_countdown leaves in c[1], c[0] ending at 0.
static unsigned countdown_trace(unsigned from, unsigned trace)
{
	while (from) {
		from--;
		trace = trace * 3 + from;
	}
	return trace;
}

// WHILE: a loop whose body scales the data and counts down, run 5 times then 3 times.
static void section_while(cudaStream_t s)
{
	words data(11);
	cells ctr(2);
	cudaGraph_t g, body;
	cudaGraphConditionalHandle h;
	cudaGraphNode_t loop;
	cudaGraphExec_t x;
	char line[96];

	CK(cudaGraphCreate(&g, 0));
	// 1 at each launch: the body runs once before it decides
	CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
	loop = add_cond(g, nullptr, 0, h, cudaGraphCondTypeWhile, 1, &body);
	cudaGraphNode_t a = add_affine(body, nullptr, 0, data.d, 3, 1);
	add_countdown(body, &a, 1, ctr.d, h);
	add_affine(g, &loop, 1, data.d, 5, 2);

	cudaGraphNodeType type;
	CK(cudaGraphNodeGetType(loop, &type));
	check(type == cudaGraphNodeTypeConditional, "while: node type", "not conditional");
	check(node_count(g) == 2 && node_count(body) == 2, "while: 2 nodes, 2 in the body",
	      "node counts differ");
	CK(cudaGraphInstantiate(&x, g, 0));

	unsigned trace = 0;
	const unsigned turns[] = {5, 3};
	for (int l = 0; l < 2; l++) {
		ctr.set({turns[l], trace});
		launch(x, s);
		for (unsigned t = 0; t < turns[l]; t++)
			data.affine(3, 1);
		data.affine(5, 2);
		trace = countdown_trace(turns[l], trace);
		snprintf(line, sizeof(line), "while: launch %d, %u turns: counter and trace", l + 1,
			 turns[l]);
		ctr.check(line, {0, trace});
		snprintf(line, sizeof(line), "while: launch %d: data", l + 1);
		data.check(line);
	}
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
}

// IF with an ELSE: a kernel picks the body from the parity of a word the host sets.
static void section_if_else(cudaStream_t s)
{
	words data(22);
	cells sel(1);
	cudaGraph_t g, body[2];
	cudaGraphConditionalHandle h;
	cudaGraphExec_t x;
	char line[96];

	CK(cudaGraphCreate(&g, 0));
	CK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
	cudaGraphNode_t pick = add_pick(g, nullptr, 0, sel.d, 2, h);
	cudaGraphNode_t cond = add_cond(g, &pick, 1, h, cudaGraphCondTypeIf, 2, body);
	add_affine(body[0], nullptr, 0, data.d, 5, 7);
	cudaGraphNode_t e = add_affine(body[1], nullptr, 0, data.d, 9, 2);
	add_affine(body[1], &e, 1, data.d, 1, 11);
	add_affine(g, &cond, 1, data.d, 7, 1000);
	check(node_count(body[0]) == 1 && node_count(body[1]) == 2,
	      "if/else: 1 node in the IF body, 2 in the ELSE body", "node counts differ");
	CK(cudaGraphInstantiate(&x, g, 0));

	const unsigned pick_with[] = {7, 4, 9};
	for (int l = 0; l < 3; l++) {
		sel.set({pick_with[l]});
		launch(x, s);
		if (pick_with[l] % 2) {
			data.affine(5, 7);
		} else {
			data.affine(9, 2);
			data.affine(1, 11);
		}
		data.affine(7, 1000);
		snprintf(line, sizeof(line), "if/else: launch %d (%s): data", l + 1,
			 pick_with[l] % 2 ? "if" : "else");
		data.check(line);
	}
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
}

// SWITCH of 3 bodies, the value a kernel's (x % 4, so 3 runs none); body 2 filled by capture.
static void section_switch(cudaStream_t s)
{
	words data(33);
	cells sel(1);
	cudaGraph_t g, body[3], captured;
	cudaGraphConditionalHandle h;
	cudaGraphExec_t x;
	char line[96];
	const unsigned mul[] = {3, 5, 7}, add[] = {100, 200, 300};

	CK(cudaGraphCreate(&g, 0));
	CK(cudaGraphConditionalHandleCreate(&h, g, 0, cudaGraphCondAssignDefault));
	cudaGraphNode_t pick = add_pick(g, nullptr, 0, sel.d, 4, h);
	add_cond(g, &pick, 1, h, cudaGraphCondTypeSwitch, 3, body);
	add_affine(body[0], nullptr, 0, data.d, mul[0], add[0]);
	add_affine(body[1], nullptr, 0, data.d, mul[1], add[1]);
	CK(cudaStreamBeginCaptureToGraph(s, body[2], nullptr, nullptr, 0,
					 cudaStreamCaptureModeThreadLocal));
	cg_affine<<<N / THREADS, THREADS, 0, s>>>(data.d, mul[2], add[2], N);
	CK_LAUNCH();
	CK(cudaStreamEndCapture(s, &captured));
	check(captured == body[2] && node_count(body[2]) == 1,
	      "switch: capture into body 2 gives body 2 one node", "not the body");
	CK(cudaGraphInstantiate(&x, g, 0));

	const unsigned pick_with[] = {6, 5, 3, 8}; // bodies 2, 1, none, 0
	for (int l = 0; l < 4; l++) {
		unsigned b = pick_with[l] % 4;
		sel.set({pick_with[l]});
		launch(x, s);
		if (b < 3)
			data.affine(mul[b], add[b]);
		if (b < 3)
			snprintf(line, sizeof(line), "switch: launch %d (body %u): data", l + 1, b);
		else
			snprintf(line, sizeof(line), "switch: launch %d (value %u, no body): data",
				 l + 1, b);
		data.check(line);
	}
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
}

// An IF whose body scales the data, runs a WHILE loop of its own handle (made on the body),
// and scales again; after the IF, one more step. Taken at launch 1 (4 turns), skipped at
// launch 2 (its counter stays at 2).
static void section_nested(cudaStream_t s)
{
	words data(44);
	cells sel(1), ctr(2);
	cudaGraph_t g, outer, inner;
	cudaGraphConditionalHandle ho, hi;
	cudaGraphExec_t x;
	char line[96];

	CK(cudaGraphCreate(&g, 0));
	CK(cudaGraphConditionalHandleCreate(&ho, g, 0, cudaGraphCondAssignDefault));
	cudaGraphNode_t pick = add_pick(g, nullptr, 0, sel.d, 2, ho);
	cudaGraphNode_t cond = add_cond(g, &pick, 1, ho, cudaGraphCondTypeIf, 1, &outer);
	add_affine(g, &cond, 1, data.d, 13, 17);
	CK(cudaGraphConditionalHandleCreate(&hi, outer, 1, cudaGraphCondAssignDefault));
	cudaGraphNode_t a = add_affine(outer, nullptr, 0, data.d, 3, 5);
	cudaGraphNode_t loop = add_cond(outer, &a, 1, hi, cudaGraphCondTypeWhile, 1, &inner);
	add_affine(outer, &loop, 1, data.d, 7, 1);
	cudaGraphNode_t b = add_affine(inner, nullptr, 0, data.d, 11, 4);
	add_countdown(inner, &b, 1, ctr.d, hi);
	check(node_count(g) == 3 && node_count(outer) == 3 && node_count(inner) == 2,
	      "nested: 3 nodes, 3 in the IF body, 2 in the WHILE body", "node counts differ");
	CK(cudaGraphInstantiate(&x, g, 0));

	const unsigned pick_with[] = {1, 2}, turns[] = {4, 2};
	unsigned trace = 0;
	for (int l = 0; l < 2; l++) {
		bool taken = pick_with[l] % 2;
		unsigned left = turns[l];
		sel.set({pick_with[l]});
		ctr.set({left, trace});
		launch(x, s);
		if (taken) {
			data.affine(3, 5);
			for (unsigned t = 0; t < left; t++)
				data.affine(11, 4);
			data.affine(7, 1);
			trace = countdown_trace(left, trace);
			left = 0;
		}
		data.affine(13, 17);
		snprintf(line, sizeof(line), "nested: launch %d (%s): counter and trace", l + 1,
			 taken ? "taken" : "skipped");
		ctr.check(line, {left, trace});
		snprintf(line, sizeof(line), "nested: launch %d: data", l + 1);
		data.check(line);
	}
	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
}

int main()
{
	cudaStream_t s;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	section_while(s);
	section_if_else(s);
	section_switch(s);
	section_nested(s);
	CK(cudaStreamDestroy(s));
	return rt_done("rt_graph_cond", "conditional graph nodes");
}
