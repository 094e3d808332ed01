// CUDA graphs built node by node through the runtime API, as opposed to captured (rt_graph.cu):
// every kind of node a program adds by hand (kernel, memcpy in each direction from pinned and
// pageable memory, 1D memcpy, memset, host, child graph, empty, event record and wait), the
// queries that give the graph back (nodes, roots, edges, dependencies, types, parameters),
// changing a graph and an executable graph (node parameters, enabled state, cudaGraphExecUpdate),
// clones, adding and removing edges and nodes, the DOT dump, and nodes added by hand to a graph
// being captured (cudaStreamGetCaptureInfo, cudaStreamUpdateCaptureDependencies). Every value a
// launch computes is compared with the host's own computation; the handles the queries return
// must be exactly the ones the add calls returned. One line per check, the same natively and
// through rgpu (no addresses, handles or times); the kernels' C twins are in
// tests/simgpu/kernels.c. Not used here: conditional nodes, memory alloc/free nodes, and a host
// node reading bytes that a device-to-host node of the same graph copied (rgpu does not
// support that).
#include <algorithm>
#include <string>
#include <unistd.h>
#include <vector>

#include "rt_check.h"

// The calls whose signature gained edge data in CUDA 12.3 (the _v2 / _v3 names) and lost the
// old one in 13.0.
#if CUDART_VERSION >= 13000
#define GN_GET_EDGES(g, f, t, n) cudaGraphGetEdges(g, f, t, nullptr, n)
#define GN_GET_DEPS(x, d, n) cudaGraphNodeGetDependencies(x, d, nullptr, n)
#define GN_GET_DEPENDENTS(x, d, n) cudaGraphNodeGetDependentNodes(x, d, nullptr, n)
#define GN_ADD_DEPS(g, f, t, n) cudaGraphAddDependencies(g, f, t, nullptr, n)
#define GN_REMOVE_DEPS(g, f, t, n) cudaGraphRemoveDependencies(g, f, t, nullptr, n)
#define GN_CAPTURE_INFO(s, st, id, g, d, n) cudaStreamGetCaptureInfo(s, st, id, g, d, nullptr, n)
#define GN_UPDATE_CAPTURE_DEPS(s, d, n, fl)                                                        \
	cudaStreamUpdateCaptureDependencies(s, d, nullptr, n, fl)
#elif CUDART_VERSION >= 12030
#define GN_GET_EDGES(g, f, t, n) cudaGraphGetEdges(g, f, t, n)
#define GN_GET_DEPS(x, d, n) cudaGraphNodeGetDependencies(x, d, n)
#define GN_GET_DEPENDENTS(x, d, n) cudaGraphNodeGetDependentNodes(x, d, n)
#define GN_ADD_DEPS(g, f, t, n) cudaGraphAddDependencies(g, f, t, n)
#define GN_REMOVE_DEPS(g, f, t, n) cudaGraphRemoveDependencies(g, f, t, n)
#define GN_CAPTURE_INFO(s, st, id, g, d, n) cudaStreamGetCaptureInfo_v3(s, st, id, g, d, nullptr, n)
#define GN_UPDATE_CAPTURE_DEPS(s, d, n, fl) cudaStreamUpdateCaptureDependencies(s, d, n, fl)
#else
#error "rt_graph_nodes.cu needs CUDA 12.3 or later"
#endif

__global__ void gn_affine(unsigned *dst, const unsigned *src, unsigned mul, unsigned add, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = src[i] * mul + add;
}

__global__ void gn_combine(unsigned *dst, const unsigned *a, const unsigned *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = a[i] ^ ((b[i] << 7) | (b[i] >> 25));
}

__global__ void gn_mix(unsigned *dst, const unsigned *src, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = dst[i] * 31u + src[i];
}

// Waits ns nanoseconds (on %globaltimer), then writes its pattern: a reader that does not wait
// for it finds the old contents.
__global__ void gn_spin_fill(unsigned *dst, unsigned seed, int n, unsigned long long ns)
{
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	} while (now - start < ns);
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = seed ^ ((unsigned)i * 2654435761u);
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

static unsigned rotl7(unsigned b)
{
	return (b << 7) | (b >> 25);
}

static unsigned spin_fill_value(unsigned i, unsigned seed)
{
	return seed ^ (i * 2654435761u);
}

// Compare n words with the host's expectation and say so in one line.
static void check_words(const char *what, const unsigned *got, const unsigned *want, size_t n)
{
	if (rt_expect_u32(what, got, want, n))
		printf("%s: ok %zu words\n", what, n);
	else
		printf("%s: FAILED\n", what);
}

static void check(bool ok, const char *line, const char *why)
{
	if (ok) {
		printf("%s: ok\n", line);
	} else {
		printf("%s: FAILED\n", line);
		rt_fail("%s: %s", line, why);
	}
}

// A call that must fail: its code is printed by number, so that the native run's line is the
// reference the rgpu run must reproduce (the documentation names no exact code for these).
static void expect_failure(const char *what, cudaError_t got)
{
	printf("%s: error %d\n", what, (int)got);
	if (got == cudaSuccess)
		rt_fail("%s: succeeded", what);
	(void)cudaGetLastError(); // the runtime keeps the last error; the next CK must not see it
}

// The kernel node parameters of gn_affine(dst, src, mul, add, N) over N threads.
struct affine_node {
	unsigned *dst;
	const unsigned *src;
	unsigned mul, add;
	int n;
	void *args[5];
	cudaKernelNodeParams p;

	affine_node(unsigned *d, const unsigned *s, unsigned m, unsigned a)
	    : dst(d), src(s), mul(m), add(a), n(N)
	{
		args[0] = &dst;
		args[1] = &src;
		args[2] = &mul;
		args[3] = &add;
		args[4] = &n;
		p = {};
		p.func = (void *)gn_affine;
		p.gridDim = dim3(N / THREADS);
		p.blockDim = dim3(THREADS);
		p.kernelParams = args;
	}
	affine_node(const affine_node &) = delete;
	affine_node &operator=(const affine_node &) = delete;
};

static cudaKernelNodeParams kernel_params(void *func, void **args)
{
	cudaKernelNodeParams p = {};
	p.func = func;
	p.gridDim = dim3(N / THREADS);
	p.blockDim = dim3(THREADS);
	p.kernelParams = args;
	return p;
}

// A linear copy of `bytes` as cudaMemcpy3DParms, at byte offsets into both sides.
static cudaMemcpy3DParms linear_copy(void *dst, size_t dst_size, size_t dst_off, const void *src,
				     size_t src_size, size_t bytes, cudaMemcpyKind kind)
{
	cudaMemcpy3DParms p = {};
	p.srcPtr = make_cudaPitchedPtr(const_cast<void *>(src), src_size, src_size, 1);
	p.dstPtr = make_cudaPitchedPtr(dst, dst_size, dst_size, 1);
	p.dstPos = make_cudaPos(dst_off, 0, 0);
	p.extent = make_cudaExtent(bytes, 1, 1);
	p.kind = kind;
	return p;
}

static cudaMemsetParams memset_params(void *dst, unsigned value, size_t words)
{
	cudaMemsetParams p = {};
	p.dst = dst;
	p.value = value;
	p.elementSize = 4;
	p.width = words;
	p.height = 1;
	return p;
}

// The nodes of a graph, in the order the graph lists them.
static std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g)
{
	size_t n = 0;
	CK(cudaGraphGetNodes(g, nullptr, &n));
	std::vector<cudaGraphNode_t> v(n);
	if (n)
		CK(cudaGraphGetNodes(g, v.data(), &n));
	v.resize(n);
	return v;
}

static std::vector<cudaGraphNode_t> root_nodes(cudaGraph_t g)
{
	size_t n = 0;
	CK(cudaGraphGetRootNodes(g, nullptr, &n));
	std::vector<cudaGraphNode_t> v(n);
	if (n)
		CK(cudaGraphGetRootNodes(g, v.data(), &n));
	v.resize(n);
	return v;
}

static std::vector<cudaGraphNode_t> deps_of(cudaGraphNode_t x)
{
	size_t n = 0;
	CK(GN_GET_DEPS(x, nullptr, &n));
	std::vector<cudaGraphNode_t> v(n);
	if (n)
		CK(GN_GET_DEPS(x, v.data(), &n));
	v.resize(n);
	return v;
}

static std::vector<cudaGraphNode_t> dependents_of(cudaGraphNode_t x)
{
	size_t n = 0;
	CK(GN_GET_DEPENDENTS(x, nullptr, &n));
	std::vector<cudaGraphNode_t> v(n);
	if (n)
		CK(GN_GET_DEPENDENTS(x, v.data(), &n));
	v.resize(n);
	return v;
}

// Handles as indices into `known` (the add calls' handles, in creation order); -1: unknown.
static std::vector<int> indices(const std::vector<cudaGraphNode_t> &v,
				const std::vector<cudaGraphNode_t> &known)
{
	std::vector<int> out;
	for (cudaGraphNode_t x : v) {
		auto it = std::find(known.begin(), known.end(), x);
		out.push_back(it == known.end() ? -1 : (int)(it - known.begin()));
	}
	return out;
}

static std::vector<int> sorted(std::vector<int> v)
{
	std::sort(v.begin(), v.end());
	return v;
}

static void check_handles(const char *what, const std::vector<cudaGraphNode_t> &got,
			  const std::vector<cudaGraphNode_t> &want)
{
	char line[160];
	snprintf(line, sizeof(line), "%s: %zu, the add calls' handles in creation order", what,
		 got.size());
	check(got == want, line, "the handles or their order differ");
}

/* the same handles in any order (the driver lists roots in an order of its own) */
static void check_members(const char *what, std::vector<cudaGraphNode_t> got,
			  std::vector<cudaGraphNode_t> want)
{
	char line[160];
	snprintf(line, sizeof(line), "%s: %zu, the nodes expected", what, got.size());
	std::sort(got.begin(), got.end());
	std::sort(want.begin(), want.end());
	check(got == want, line, "not the expected nodes");
}

static void check_index_set(const char *what, const std::vector<cudaGraphNode_t> &got,
			    const std::vector<cudaGraphNode_t> &known, std::vector<int> want)
{
	char line[160];
	snprintf(line, sizeof(line), "%s: %zu", what, got.size());
	check(sorted(indices(got, known)) == sorted(want), line, "not the expected nodes");
}

static const char *type_name(cudaGraphNodeType t)
{
	switch (t) {
	case cudaGraphNodeTypeKernel:
		return "kernel";
	case cudaGraphNodeTypeMemcpy:
		return "memcpy";
	case cudaGraphNodeTypeMemset:
		return "memset";
	case cudaGraphNodeTypeHost:
		return "host";
	case cudaGraphNodeTypeGraph:
		return "graph";
	case cudaGraphNodeTypeEmpty:
		return "empty";
	case cudaGraphNodeTypeWaitEvent:
		return "wait_event";
	case cudaGraphNodeTypeEventRecord:
		return "event_record";
	default:
		return "other";
	}
}

static cudaGraphNodeType type_of(cudaGraphNode_t x)
{
	cudaGraphNodeType t;
	CK(cudaGraphNodeGetType(x, &t));
	return t;
}

// ---- host functions: a counter, and a log of which function ran in which order ------------

static int host_ticks;

static void CUDART_CB tick(void *arg)
{
	++*(int *)arg;
}

struct order_log {
	char ev[64];
	int n;
};
struct log_entry {
	order_log *log;
	char c;
};

static void CUDART_CB log_push(void *arg)
{
	log_entry *e = (log_entry *)arg;
	if (e->log->n < (int)sizeof(e->log->ev) - 1)
		e->log->ev[e->log->n++] = e->c;
}

// ---- 1: a graph of every basic kind of node ------------------------------------------------

// What one launch of the big graph computes, from the inputs and the nodes' current parameters.
struct big_expect {
	const unsigned *in_pin, *in_page; // the host inputs the two HtoD nodes read
	unsigned left_mul, left_add, right_mul, right_add;
	unsigned pad;	    // dv's words outside the copied middle (the memset's value)
	unsigned child_set; // the child graph's memset value
	std::vector<unsigned> w, v, c;

	void compute()
	{
		w.assign(N, 0);
		v.assign(2 * N, pad);
		c.assign(N, 0);
		for (unsigned i = 0; i < (unsigned)N; i++) {
			unsigned y = in_pin[i] * left_mul + left_add;
			unsigned z = in_page[i] * right_mul + right_add;
			w[i] = y ^ rotl7(z);
			v[N / 2 + i] = w[i];
			c[i] = child_set * 31u + in_pin[i];
		}
	}
};

struct big_graph {
	// device buffers
	unsigned *dx, *dx2, *dy, *dz, *dw, *dv, *dc;
	// host buffers: inputs (pinned, pinned alternative, pageable) and outputs
	unsigned *in_pin, *in_alt, *out_pin, *out_child;
	std::vector<unsigned> in_page, out_page;
	cudaGraph_t g, child;
	cudaGraphNode_t hd_pin, hd_page, join, left, right, bottom, dh_pin, set, dd, dh_page, host,
	    childnode, dh_child;
	std::vector<cudaGraphNode_t> order; // every node, in creation order
};

static void big_build(big_graph &b)
{
	CK(cudaMalloc(&b.dx, BYTES));
	CK(cudaMalloc(&b.dx2, BYTES));
	CK(cudaMalloc(&b.dy, BYTES));
	CK(cudaMalloc(&b.dz, BYTES));
	CK(cudaMalloc(&b.dw, BYTES));
	CK(cudaMalloc(&b.dv, 2 * BYTES));
	CK(cudaMalloc(&b.dc, BYTES));
	CK(cudaMallocHost(&b.in_pin, BYTES));
	CK(cudaMallocHost(&b.in_alt, BYTES));
	CK(cudaMallocHost(&b.out_pin, BYTES));
	CK(cudaMallocHost(&b.out_child, BYTES));
	b.in_page.assign(N, 0);
	b.out_page.assign(2 * N, 0);

	CK(cudaGraphCreate(&b.g, 0));
	// roots: the inputs, from pinned memory (cudaMemcpy3DParms) and from pageable memory (1D)
	cudaMemcpy3DParms hp =
	    linear_copy(b.dx, BYTES, 0, b.in_pin, BYTES, BYTES, cudaMemcpyHostToDevice);
	CK(cudaGraphAddMemcpyNode(&b.hd_pin, b.g, nullptr, 0, &hp));
	CK(cudaGraphAddMemcpyNode1D(&b.hd_page, b.g, nullptr, 0, b.dx2, b.in_page.data(), BYTES,
				    cudaMemcpyHostToDevice));
	// the diamond: join -> left, right -> bottom
	cudaGraphNode_t ins[2] = {b.hd_pin, b.hd_page};
	CK(cudaGraphAddEmptyNode(&b.join, b.g, ins, 2));
	affine_node l(b.dy, b.dx, 3, 7), r(b.dz, b.dx2, 5, 1);
	CK(cudaGraphAddKernelNode(&b.left, b.g, &b.join, 1, &l.p));
	CK(cudaGraphAddKernelNode(&b.right, b.g, &b.join, 1, &r.p));
	unsigned *cw = b.dw;
	const unsigned *ca = b.dy, *cb = b.dz;
	int n = N;
	void *cargs[4] = {&cw, &ca, &cb, &n};
	cudaKernelNodeParams cp = kernel_params((void *)gn_combine, cargs);
	cudaGraphNode_t lr[2] = {b.left, b.right};
	CK(cudaGraphAddKernelNode(&b.bottom, b.g, lr, 2, &cp));
	// the result to pinned memory (cudaMemcpy3DParms)
	cudaMemcpy3DParms dp =
	    linear_copy(b.out_pin, BYTES, 0, b.dw, BYTES, BYTES, cudaMemcpyDeviceToHost);
	CK(cudaGraphAddMemcpyNode(&b.dh_pin, b.g, &b.bottom, 1, &dp));
	// a memset of dv (a root), the result copied into dv's middle, all of dv to pageable memory
	cudaMemsetParams mp = memset_params(b.dv, 0xA5A5A5A5u, 2 * N);
	CK(cudaGraphAddMemsetNode(&b.set, b.g, nullptr, 0, &mp));
	cudaMemcpy3DParms ddp =
	    linear_copy(b.dv, 2 * BYTES, BYTES / 2, b.dw, BYTES, BYTES, cudaMemcpyDeviceToDevice);
	cudaGraphNode_t bs[2] = {b.bottom, b.set};
	CK(cudaGraphAddMemcpyNode(&b.dd, b.g, bs, 2, &ddp));
	CK(cudaGraphAddMemcpyNode1D(&b.dh_page, b.g, &b.dd, 1, b.out_page.data(), b.dv, 2 * BYTES,
				    cudaMemcpyDeviceToHost));
	// a host node after the join (it reads nothing a copy of this graph writes)
	cudaHostNodeParams hn = {tick, &host_ticks};
	CK(cudaGraphAddHostNode(&b.host, b.g, &b.join, 1, &hn));
	// a child graph (memset, then gn_mix over the pinned input) and its result to pinned memory
	CK(cudaGraphCreate(&b.child, 0));
	cudaGraphNode_t cset, cmix;
	cudaMemsetParams cm = memset_params(b.dc, 0x01010101u, N);
	CK(cudaGraphAddMemsetNode(&cset, b.child, nullptr, 0, &cm));
	unsigned *md = b.dc;
	const unsigned *ms = b.dx;
	void *margs[3] = {&md, &ms, &n};
	cudaKernelNodeParams mk = kernel_params((void *)gn_mix, margs);
	CK(cudaGraphAddKernelNode(&cmix, b.child, &cset, 1, &mk));
	CK(cudaGraphAddChildGraphNode(&b.childnode, b.g, &b.hd_pin, 1, b.child));
	CK(cudaGraphAddMemcpyNode1D(&b.dh_child, b.g, &b.childnode, 1, b.out_child, b.dc, BYTES,
				    cudaMemcpyDeviceToHost));
	b.order = {b.hd_pin, b.hd_page, b.join,	   b.left, b.right,	b.bottom,  b.dh_pin,
		   b.set,    b.dd,	b.dh_page, b.host, b.childnode, b.dh_child};
}

static void big_queries(big_graph &b)
{
	std::vector<cudaGraphNode_t> nodes = graph_nodes(b.g);
	check_handles("cudaGraphGetNodes", nodes, b.order);
	check_members("cudaGraphGetRootNodes", root_nodes(b.g), {b.hd_pin, b.hd_page, b.set});

	// the edges, as (from, to) pairs of creation indices
	size_t ne = 0;
	CK(GN_GET_EDGES(b.g, nullptr, nullptr, &ne));
	std::vector<cudaGraphNode_t> from(ne), to(ne);
	if (ne)
		CK(GN_GET_EDGES(b.g, from.data(), to.data(), &ne));
	std::vector<int> fi = indices(from, b.order), ti = indices(to, b.order);
	std::vector<std::pair<int, int>> edges,
	    want = {{0, 2}, {1, 2}, {2, 3}, {2, 4},  {3, 5},  {4, 5},  {5, 6},
		    {5, 8}, {7, 8}, {8, 9}, {2, 10}, {0, 11}, {11, 12}};
	for (size_t i = 0; i < ne; i++)
		edges.push_back({fi[i], ti[i]});
	std::sort(edges.begin(), edges.end());
	std::sort(want.begin(), want.end());
	char line[96];
	snprintf(line, sizeof(line), "cudaGraphGetEdges: %zu", ne);
	check(edges == want, line, "not the edges added");

	check_index_set("dependencies of the diamond's bottom", deps_of(b.bottom), b.order, {3, 4});
	check_index_set("dependencies of the device-to-device copy", deps_of(b.dd), b.order,
			{5, 7});
	check_index_set("dependencies of a root", deps_of(b.set), b.order, {});
	check_index_set("dependent nodes of the join", dependents_of(b.join), b.order, {3, 4, 10});
	check_index_set("dependent nodes of the pinned input copy", dependents_of(b.hd_pin),
			b.order, {2, 11});
	check_index_set("dependent nodes of a leaf", dependents_of(b.dh_page), b.order, {});

	std::string types;
	for (cudaGraphNode_t x : nodes) {
		types += types.empty() ? "" : " ";
		types += type_name(type_of(x));
	}
	printf("node types: %s\n", types.c_str());
	if (types != "memcpy memcpy empty kernel kernel kernel memcpy memset memcpy memcpy host "
		     "graph memcpy")
		rt_fail("node types: %s", types.c_str());

	// the kernel node's parameters come back as they were given
	cudaKernelNodeParams kp;
	CK(cudaGraphKernelNodeGetParams(b.left, &kp));
	bool same = kp.func == (void *)gn_affine && kp.gridDim.x == N / THREADS &&
		    kp.gridDim.y == 1 && kp.gridDim.z == 1 && kp.blockDim.x == THREADS &&
		    kp.blockDim.y == 1 && kp.blockDim.z == 1 && kp.sharedMemBytes == 0 &&
		    kp.kernelParams && !kp.extra;
	same = same && *(unsigned **)kp.kernelParams[0] == b.dy &&
	       *(const unsigned **)kp.kernelParams[1] == b.dx &&
	       *(unsigned *)kp.kernelParams[2] == 3 && *(unsigned *)kp.kernelParams[3] == 7 &&
	       *(int *)kp.kernelParams[4] == N;
	check(same, "cudaGraphKernelNodeGetParams: func, dims and 5 arguments as added",
	      "the parameters differ");
	// ... and a change before instantiation is seen by the next get (left: * 4 + 7 from now)
	affine_node l2(b.dy, b.dx, 4, 7);
	CK(cudaGraphKernelNodeSetParams(b.left, &l2.p));
	CK(cudaGraphKernelNodeGetParams(b.left, &kp));
	check(kp.func == (void *)gn_affine && *(unsigned *)kp.kernelParams[2] == 4 &&
		  *(unsigned *)kp.kernelParams[3] == 7,
	      "cudaGraphKernelNodeSetParams: the multiplier now 4", "the get returned the old one");

	cudaMemsetParams mp;
	CK(cudaGraphMemsetNodeGetParams(b.set, &mp));
	check(mp.dst == b.dv && mp.value == 0xA5A5A5A5u && mp.elementSize == 4 &&
		  mp.width == 2 * (size_t)N && mp.height == 1,
	      "cudaGraphMemsetNodeGetParams: as added", "the parameters differ");
	cudaMemcpy3DParms cp;
	CK(cudaGraphMemcpyNodeGetParams(b.dd, &cp));
	// (the addresses the copy starts at, however the offset is split between pointer and pos)
	check((char *)cp.srcPtr.ptr + cp.srcPos.x == (char *)b.dw &&
		  (char *)cp.dstPtr.ptr + cp.dstPos.x == (char *)b.dv + BYTES / 2 &&
		  cp.extent.width == BYTES && cp.extent.height == 1 && cp.extent.depth == 1,
	      "cudaGraphMemcpyNodeGetParams: as added", "the parameters differ");
	cudaHostNodeParams hp;
	CK(cudaGraphHostNodeGetParams(b.host, &hp));
	check(hp.fn == tick && hp.userData == &host_ticks, "cudaGraphHostNodeGetParams: as added",
	      "the parameters differ");

	// the child node holds a copy of the child graph: its own two nodes, memset then kernel
	// (found by the edge between them, whatever order the copy lists them in)
	cudaGraph_t emb;
	CK(cudaGraphChildGraphNodeGetGraph(b.childnode, &emb));
	std::vector<cudaGraphNode_t> er = root_nodes(emb);
	bool child_ok = emb != b.child && graph_nodes(emb).size() == 2 && er.size() == 1;
	if (child_ok) {
		std::vector<cudaGraphNode_t> d = dependents_of(er[0]);
		child_ok = type_of(er[0]) == cudaGraphNodeTypeMemset && d.size() == 1 &&
			   type_of(d[0]) == cudaGraphNodeTypeKernel;
	}
	check(child_ok, "cudaGraphChildGraphNodeGetGraph: a copy, memset then kernel",
	      "not the child's nodes");
}

// Inputs for one launch: the three host buffers the HtoD nodes may read, new contents each time.
static void big_inputs(big_graph &b, unsigned seed)
{
	for (unsigned i = 0; i < (unsigned)N; i++) {
		b.in_pin[i] = pat(i, seed);
		b.in_page[i] = pat(i, seed + 1);
		b.in_alt[i] = pat(i, seed + 2);
	}
	for (int i = 0; i < N; i++)
		b.out_pin[i] = b.out_child[i] = 0xEEEEEEEEu;
	std::fill(b.out_page.begin(), b.out_page.end(), 0xEEEEEEEEu);
}

static void big_launch(big_graph &b, cudaGraphExec_t exec, cudaStream_t s, const char *name,
		       big_expect &e, int ticks_before)
{
	char what[128];

	CK(cudaGraphLaunch(exec, s));
	CK(cudaStreamSynchronize(s));
	e.compute();
	snprintf(what, sizeof(what), "%s: the diamond's result in pinned memory", name);
	check_words(what, b.out_pin, e.w.data(), N);
	snprintf(what, sizeof(what), "%s: memset and device-to-device copy in pageable memory",
		 name);
	check_words(what, b.out_page.data(), e.v.data(), 2 * N);
	snprintf(what, sizeof(what), "%s: the child graph's result", name);
	check_words(what, b.out_child, e.c.data(), N);
	snprintf(what, sizeof(what), "%s: the host node ran once", name);
	check(host_ticks == ticks_before + 1, what, "it did not run exactly once");
}

static void section_big(cudaStream_t s)
{
	big_graph b;
	cudaGraphExec_t exec;
	big_expect e;
	cudaGraphExecUpdateResultInfo info;

	big_build(b);
	big_queries(b);
	CK(cudaGraphInstantiate(&exec, b.g, 0));

	// launches 1 and 2: new host inputs each time; the HtoD nodes read them at the launch,
	// the DtoH nodes write the outputs at the launch
	e = {b.in_pin, b.in_page.data(), 4, 7, 5, 1, 0xA5A5A5A5u, 0x01010101u, {}, {}, {}};
	big_inputs(b, 100);
	big_launch(b, exec, s, "launch 1", e, 0);
	big_inputs(b, 200);
	big_launch(b, exec, s, "launch 2 (new inputs)", e, 1);

	// launch 3: the executable graph's own parameters changed, not the graph's
	affine_node r3(b.dz, b.dx2, 5, 2);
	CK(cudaGraphExecKernelNodeSetParams(exec, b.right, &r3.p));
	cudaMemsetParams m3 = memset_params(b.dv, 0x5A5A5A5Au, 2 * N);
	CK(cudaGraphExecMemsetNodeSetParams(exec, b.set, &m3));
	cudaMemcpy3DParms c3 =
	    linear_copy(b.dx, BYTES, 0, b.in_alt, BYTES, BYTES, cudaMemcpyHostToDevice);
	CK(cudaGraphExecMemcpyNodeSetParams(exec, b.hd_pin, &c3));
	big_inputs(b, 300);
	e.in_pin = b.in_alt;
	e.right_add = 2;
	e.pad = 0x5A5A5A5Au;
	big_launch(b, exec, s, "launch 3 (exec kernel, memset and memcpy params set)", e, 2);
	cudaKernelNodeParams kp;
	CK(cudaGraphKernelNodeGetParams(b.right, &kp));
	check(*(unsigned *)kp.kernelParams[3] == 1,
	      "the graph's own kernel node still adds 1 after cudaGraphExecKernelNodeSetParams",
	      "the exec's change reached the graph");

	// launch 4: the memset node disabled; dv's pads keep what a plain cudaMemset wrote
	unsigned enabled = 7;
	CK(cudaGraphNodeSetEnabled(exec, b.set, 0));
	CK(cudaGraphNodeGetEnabled(exec, b.set, &enabled));
	check(enabled == 0, "cudaGraphNodeGetEnabled after disabling: 0", "still enabled");
	CK(cudaMemset(b.dv, 0x3C, 2 * BYTES));
	CK(cudaDeviceSynchronize());
	big_inputs(b, 400);
	e.pad = 0x3C3C3C3Cu;
	big_launch(b, exec, s, "launch 4 (memset node disabled)", e, 3);
	CK(cudaGraphNodeSetEnabled(exec, b.set, 1));
	CK(cudaGraphNodeGetEnabled(exec, b.set, &enabled));
	check(enabled == 1, "cudaGraphNodeGetEnabled after enabling: 1", "still disabled");
	big_inputs(b, 500);
	e.pad = 0x5A5A5A5Au;
	big_launch(b, exec, s, "launch 5 (memset node enabled again)", e, 4);

	// launch 6: a kernel argument changed in the graph, then cudaGraphExecUpdate; the whole
	// executable graph takes the graph's parameters again (right adds 1, memset A5, pinned
	// input)
	affine_node l6(b.dy, b.dx, 4, 8);
	CK(cudaGraphKernelNodeSetParams(b.left, &l6.p));
	memset(&info, 0x55, sizeof(info));
	cudaError_t err = cudaGraphExecUpdate(exec, b.g, &info);
	printf("cudaGraphExecUpdate, a kernel argument changed: error %d result %d\n", (int)err,
	       (int)info.result);
	if (err != cudaSuccess || info.result != cudaGraphExecUpdateSuccess)
		rt_fail("cudaGraphExecUpdate: %s, result %d", cudaGetErrorName(err),
			(int)info.result);
	big_inputs(b, 600);
	e = {b.in_pin, b.in_page.data(), 4, 8, 5, 1, 0xA5A5A5A5u, 0x01010101u, {}, {}, {}};
	big_launch(b, exec, s, "launch 6 (after cudaGraphExecUpdate)", e, 5);

	// a graph of another shape is refused, and the executable graph is left as it was
	cudaGraph_t other;
	cudaGraphNode_t extra;
	CK(cudaGraphClone(&other, b.g));
	CK(cudaGraphAddEmptyNode(&extra, other, nullptr, 0));
	memset(&info, 0x55, sizeof(info));
	err = cudaGraphExecUpdate(exec, other, &info);
	printf("cudaGraphExecUpdate, a node added: error %d result %d\n", (int)err,
	       (int)info.result);
	if (err != cudaErrorGraphExecUpdateFailure ||
	    info.result != cudaGraphExecUpdateErrorTopologyChanged)
		rt_fail("cudaGraphExecUpdate of another topology: %s, result %d",
			cudaGetErrorName(err), (int)info.result);
	(void)cudaGetLastError();
	big_inputs(b, 700);
	big_launch(b, exec, s, "launch 7 (after the refused update)", e, 6);

	// the clone: as many nodes, each original's counterpart one of them (each a different one)
	// and of its type; a change to the clone's kernel node shows in the clone's launch only
	cudaGraph_t clone;
	CK(cudaGraphClone(&clone, b.g));
	std::vector<cudaGraphNode_t> cn = graph_nodes(clone), seen;
	bool found = cn.size() == b.order.size();
	for (size_t i = 0; found && i < b.order.size(); i++) {
		cudaGraphNode_t x = nullptr;
		CK(cudaGraphNodeFindInClone(&x, b.order[i], clone));
		found = std::find(cn.begin(), cn.end(), x) != cn.end() &&
			std::find(seen.begin(), seen.end(), x) == seen.end() &&
			type_of(x) == type_of(b.order[i]);
		seen.push_back(x);
	}
	char line[96];
	snprintf(line, sizeof(line),
		 "cudaGraphClone: %zu nodes, cudaGraphNodeFindInClone finds each", cn.size());
	check(found, line, "the clone's nodes differ");
	cudaGraphNode_t cleft;
	CK(cudaGraphNodeFindInClone(&cleft, b.left, clone));
	affine_node lc(b.dy, b.dx, 11, 8);
	CK(cudaGraphKernelNodeSetParams(cleft, &lc.p));
	cudaGraphExec_t cexec;
	CK(cudaGraphInstantiate(&cexec, clone, 0));
	big_inputs(b, 800);
	e.left_mul = 11;
	big_launch(b, cexec, s, "the clone's launch (its kernel node changed)", e, 7);
	big_inputs(b, 900);
	e.left_mul = 4;
	big_launch(b, exec, s, "launch 8 (the original, unchanged by the clone)", e, 8);
	cudaGraphNode_t none = nullptr;
	expect_failure("cudaGraphNodeFindInClone of a node the original does not have",
		       cudaGraphNodeFindInClone(&none, extra, clone));
	CK(cudaGraphDestroy(other));

	CK(cudaGraphExecDestroy(cexec));
	CK(cudaGraphDestroy(clone));
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(b.g));
	CK(cudaGraphDestroy(b.child));
	for (unsigned *p : {b.dx, b.dx2, b.dy, b.dz, b.dw, b.dv, b.dc})
		CK(cudaFree(p));
	for (unsigned *p : {b.in_pin, b.in_alt, b.out_pin, b.out_child})
		CK(cudaFreeHost(p));
}

// ---- 2: edges added and removed, a node destroyed -------------------------------------------

static void chain_launch(cudaGraph_t g, cudaStream_t s, unsigned *dx, const char *what,
			 std::vector<std::pair<unsigned, unsigned>> steps)
{
	std::vector<unsigned> in(N), got(N), want(N);
	cudaGraphExec_t exec;

	for (unsigned i = 0; i < (unsigned)N; i++)
		in[i] = want[i] = pat(i, 0xC4A1u);
	for (auto st : steps)
		for (int i = 0; i < N; i++)
			want[i] = want[i] * st.first + st.second;
	CK(cudaMemcpy(dx, in.data(), BYTES, cudaMemcpyHostToDevice));
	CK(cudaGraphInstantiate(&exec, g, 0));
	CK(cudaGraphLaunch(exec, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(got.data(), dx, BYTES, cudaMemcpyDeviceToHost));
	check_words(what, got.data(), want.data(), N);
	CK(cudaGraphExecDestroy(exec));
}

static size_t edge_count(cudaGraph_t g)
{
	size_t n = 0;
	CK(GN_GET_EDGES(g, nullptr, nullptr, &n));
	return n;
}

static void section_edges(cudaStream_t s)
{
	unsigned *dx;
	cudaGraph_t g;
	cudaGraphNode_t k1, k2, k3;

	CK(cudaMalloc(&dx, BYTES));
	CK(cudaGraphCreate(&g, 0));
	// three in-place steps on one buffer, added with no edges: they are ordered only by the
	// edges added afterwards
	affine_node a1(dx, dx, 3, 1), a2(dx, dx, 5, 2), a3(dx, dx, 7, 3);
	CK(cudaGraphAddKernelNode(&k1, g, nullptr, 0, &a1.p));
	CK(cudaGraphAddKernelNode(&k2, g, nullptr, 0, &a2.p));
	CK(cudaGraphAddKernelNode(&k3, g, nullptr, 0, &a3.p));
	std::vector<cudaGraphNode_t> known = {k1, k2, k3};
	printf("three unconnected kernel nodes: %zu roots, %zu edges\n", root_nodes(g).size(),
	       edge_count(g));

	cudaGraphNode_t f1[2] = {k1, k2}, t1[2] = {k2, k3};
	CK(GN_ADD_DEPS(g, f1, t1, 2));
	check_handles("cudaGraphAddDependencies k1->k2->k3, roots", root_nodes(g), {k1});
	check_index_set("dependencies of k3", deps_of(k3), known, {1});
	chain_launch(g, s, dx, "chain k1 k2 k3", {{3, 1}, {5, 2}, {7, 3}});

	// the chain reversed
	CK(GN_REMOVE_DEPS(g, f1, t1, 2));
	printf("cudaGraphRemoveDependencies of both edges: %zu edges\n", edge_count(g));
	cudaGraphNode_t f2[2] = {k3, k2}, t2[2] = {k2, k1};
	CK(GN_ADD_DEPS(g, f2, t2, 2));
	check_handles("reversed chain k3->k2->k1, roots", root_nodes(g), {k3});
	chain_launch(g, s, dx, "chain k3 k2 k1", {{7, 3}, {5, 2}, {3, 1}});
	expect_failure("cudaGraphRemoveDependencies of an edge that is not there",
		       GN_REMOVE_DEPS(g, &k1, &k3, 1));

	// k2 destroyed with its edges; then k3 -> k1
	CK(cudaGraphDestroyNode(k2));
	printf("cudaGraphDestroyNode of the middle node: %zu nodes, %zu edges\n",
	       graph_nodes(g).size(), edge_count(g));
	check_handles("nodes left", graph_nodes(g), {k1, k3});
	CK(GN_ADD_DEPS(g, &k3, &k1, 1));
	chain_launch(g, s, dx, "chain k3 k1", {{7, 3}, {3, 1}});

	CK(cudaGraphDestroy(g));
	CK(cudaFree(dx));
}

// ---- 3: the DOT dump ------------------------------------------------------------------------

static void section_dot()
{
	unsigned *dx;
	cudaGraph_t g;
	cudaGraphNode_t k, m;
	char path[64];

	CK(cudaMalloc(&dx, BYTES));
	CK(cudaGraphCreate(&g, 0));
	cudaMemsetParams mp = memset_params(dx, 1, N);
	CK(cudaGraphAddMemsetNode(&m, g, nullptr, 0, &mp));
	affine_node a(dx, dx, 3, 1);
	CK(cudaGraphAddKernelNode(&k, g, &m, 1, &a.p));
	snprintf(path, sizeof(path), "/tmp/rt_graph_nodes_%d.dot", (int)getpid());
	unlink(path);
	CK(cudaGraphDebugDotPrint(g, path, cudaGraphDebugDotFlagsVerbose));
	char head[8] = {0};
	long size = -1;
	FILE *f = fopen(path, "r");
	if (f) {
		size_t got = fread(head, 1, 7, f);
		head[got] = 0;
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fclose(f);
	}
	check(f && size > 0 && strcmp(head, "digraph") == 0,
	      "cudaGraphDebugDotPrint: a non-empty file that starts with \"digraph\"",
	      "no such file, or not a DOT graph");
	unlink(path);
	CK(cudaGraphDestroy(g));
	CK(cudaFree(dx));
}

// ---- 4: nodes added by hand to a graph being captured ---------------------------------------

static void section_capture(cudaStream_t s)
{
	unsigned *cx, *cy, *cz;
	order_log log = {};
	log_entry la = {&log, 'A'}, lb = {&log, 'B'}, lc = {&log, 'C'};
	cudaStreamCaptureStatus st;
	unsigned long long id1 = 0, id2 = 0;
	cudaGraph_t cg = nullptr, cg2 = nullptr, graph;
	const cudaGraphNode_t *deps = nullptr;
	size_t nd = 0;
	const unsigned seed_x = 0x1234567u, seed_y = 0x0BADF00Du;
	const int grid = N / THREADS;

	CK(cudaMalloc(&cx, BYTES));
	CK(cudaMalloc(&cy, BYTES));
	CK(cudaMalloc(&cz, BYTES));
	CK(GN_CAPTURE_INFO(s, &st, nullptr, nullptr, nullptr, nullptr));
	printf("cudaStreamGetCaptureInfo outside a capture: status %d\n", (int)st);

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	gn_spin_fill<<<grid, THREADS, 0, s>>>(cx, seed_x, N, 0);
	CK_LAUNCH();
	// the capture's dependencies: the fill kernel's node alone
	CK(GN_CAPTURE_INFO(s, &st, &id1, &cg, &deps, &nd));
	check(st == cudaStreamCaptureStatusActive && nd == 1 &&
		  type_of(deps[0]) == cudaGraphNodeTypeKernel,
	      "capture info after one launch: active, one kernel node", "not so");
	cudaGraphNode_t fill = nd == 1 ? deps[0] : nullptr;
	CK(cudaLaunchHostFunc(s, log_push, &la));
	gn_affine<<<grid, THREADS, 0, s>>>(cx, cx, 3, 1, N);
	CK_LAUNCH();
	CK(GN_CAPTURE_INFO(s, &st, &id2, &cg2, &deps, &nd));
	check(st == cudaStreamCaptureStatusActive && id2 == id1 && cg2 == cg && nd == 1 &&
		  type_of(deps[0]) == cudaGraphNodeTypeKernel && graph_nodes(cg).size() == 3,
	      "capture info after three operations: the same capture, three nodes, one dependency",
	      "not so");
	cudaGraphNode_t k1 = nd == 1 ? deps[0] : nullptr;

	// a kernel node and a host node added to the capture's graph by hand, after what was
	// captured; the capture then goes on from the host node
	cudaGraphNode_t ka, hb;
	affine_node a(cx, cx, 5, 2);
	CK(cudaGraphAddKernelNode(&ka, cg, deps, nd, &a.p));
	cudaHostNodeParams hp = {log_push, &lb};
	CK(cudaGraphAddHostNode(&hb, cg, &ka, 1, &hp));
	CK(GN_UPDATE_CAPTURE_DEPS(s, &hb, 1, cudaStreamSetCaptureDependencies));
	CK(GN_CAPTURE_INFO(s, &st, nullptr, nullptr, &deps, &nd));
	check(nd == 1 && deps[0] == hb,
	      "cudaStreamUpdateCaptureDependencies (set): the host node is the dependency",
	      "not so");
	gn_affine<<<grid, THREADS, 0, s>>>(cx, cx, 7, 3, N);
	CK_LAUNCH();
	CK(cudaLaunchHostFunc(s, log_push, &lc));
	// a root kernel node added, and added to the dependencies: the next launch waits for both
	cudaGraphNode_t ky;
	unsigned *yd = cy;
	unsigned ys = seed_y;
	int n = N;
	unsigned long long ns = 0;
	void *yargs[4] = {&yd, &ys, &n, &ns};
	cudaKernelNodeParams yp = kernel_params((void *)gn_spin_fill, yargs);
	CK(cudaGraphAddKernelNode(&ky, cg, nullptr, 0, &yp));
	CK(GN_UPDATE_CAPTURE_DEPS(s, &ky, 1, cudaStreamAddCaptureDependencies));
	CK(GN_CAPTURE_INFO(s, &st, nullptr, nullptr, &deps, &nd));
	check(nd == 2 && (deps[0] == ky || deps[1] == ky),
	      "cudaStreamUpdateCaptureDependencies (add): two dependencies, one the added node",
	      "not so");
	gn_combine<<<grid, THREADS, 0, s>>>(cz, cx, cy, N);
	CK_LAUNCH();
	CK(cudaStreamEndCapture(s, &graph));
	check(graph == cg, "cudaStreamEndCapture: the graph the capture info named", "another");

	// fill, A, *3+1, the added kernel, B, *7+3, C, the added root, combine; eight edges
	char line[64];
	size_t nodes = graph_nodes(graph).size(), edges = edge_count(graph);
	snprintf(line, sizeof(line), "captured graph: %zu nodes, %zu edges", nodes, edges);
	check(nodes == 9 && edges == 8, line, "want 9 nodes and 8 edges");
	std::vector<cudaGraphNode_t> d = deps_of(ka);
	check(d.size() == 1 && d[0] == k1, "the added kernel node depends on the captured kernel",
	      "not so");
	d = dependents_of(hb);
	cudaGraphNode_t k2 = d.size() == 1 ? d[0] : nullptr;
	check(k2 && type_of(k2) == cudaGraphNodeTypeKernel,
	      "the added host node is followed by the next captured kernel", "not so");
	d = dependents_of(ky);
	cudaGraphNode_t kz = d.size() == 1 ? d[0] : nullptr;
	std::vector<cudaGraphNode_t> zd = kz ? deps_of(kz) : std::vector<cudaGraphNode_t>();
	check(kz && type_of(kz) == cudaGraphNodeTypeKernel && zd.size() == 2 &&
		  (zd[0] == ky || zd[1] == ky) &&
		  type_of(zd[0] == ky ? zd[1] : zd[0]) == cudaGraphNodeTypeHost,
	      "the last captured kernel waits for the added root and the last host function",
	      "not so");

	// two launches; the second with the fill node's seed changed in the executable graph
	cudaGraphExec_t exec;
	std::vector<unsigned> gx(N), gz(N), wx(N), wz(N);
	CK(cudaGraphInstantiate(&exec, graph, 0));
	for (int launch = 1; launch <= 2; launch++) {
		unsigned sx = launch == 1 ? seed_x : seed_x + 99u;
		if (launch == 2) {
			unsigned *xd = cx;
			unsigned long long zero = 0;
			void *fargs[4] = {&xd, &sx, &n, &zero};
			cudaKernelNodeParams fp = kernel_params((void *)gn_spin_fill, fargs);
			CK(cudaGraphExecKernelNodeSetParams(exec, fill, &fp));
		}
		CK(cudaMemset(cz, 0, BYTES));
		CK(cudaDeviceSynchronize());
		CK(cudaGraphLaunch(exec, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaMemcpy(gx.data(), cx, BYTES, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(gz.data(), cz, BYTES, cudaMemcpyDeviceToHost));
		for (unsigned i = 0; i < (unsigned)N; i++) {
			wx[i] = ((spin_fill_value(i, sx) * 3u + 1u) * 5u + 2u) * 7u + 3u;
			wz[i] = wx[i] ^ rotl7(spin_fill_value(i, seed_y));
		}
		char what[96];
		snprintf(what, sizeof(what), "capture launch %d: x after fill, *3+1, *5+2, *7+3",
			 launch);
		check_words(what, gx.data(), wx.data(), N);
		snprintf(what, sizeof(what), "capture launch %d: the combined result", launch);
		check_words(what, gz.data(), wz.data(), N);
	}
	log.ev[log.n] = 0;
	printf("host functions and host node, in the order they ran: %s\n", log.ev);
	if (strcmp(log.ev, "ABCABC") != 0)
		rt_fail("the order was %s, want ABCABC", log.ev);

	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaFree(cx));
	CK(cudaFree(cy));
	CK(cudaFree(cz));
}

// ---- 5: event record and wait nodes ---------------------------------------------------------

static void section_events(cudaStream_t s)
{
	unsigned *dp, *dq, *dr;
	cudaStream_t producer, consumer;
	cudaEvent_t ev_in, ev_out, got_ev;
	cudaGraph_t g;
	cudaGraphNode_t wait, copy, rec;
	cudaGraphExec_t exec;
	std::vector<unsigned> gq(N), gr(N), wq(N), wr(N);
	const int grid = N / THREADS;

	CK(cudaMalloc(&dp, BYTES));
	CK(cudaMalloc(&dq, BYTES));
	CK(cudaMalloc(&dr, BYTES));
	CK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev_in, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&ev_out, cudaEventDisableTiming));

	// wait for ev_in -> dq = dp * 3 + 1 -> record ev_out
	CK(cudaGraphCreate(&g, 0));
	CK(cudaGraphAddEventWaitNode(&wait, g, nullptr, 0, ev_in));
	affine_node a(dq, dp, 3, 1);
	CK(cudaGraphAddKernelNode(&copy, g, &wait, 1, &a.p));
	CK(cudaGraphAddEventRecordNode(&rec, g, &copy, 1, ev_out));
	CK(cudaGraphEventWaitNodeGetEvent(wait, &got_ev));
	check(got_ev == ev_in, "cudaGraphEventWaitNodeGetEvent: the event added", "another");
	CK(cudaGraphEventRecordNodeGetEvent(rec, &got_ev));
	check(got_ev == ev_out, "cudaGraphEventRecordNodeGetEvent: the event added", "another");
	CK(cudaGraphInstantiate(&exec, g, 0));

	for (int launch = 1; launch <= 2; launch++) {
		unsigned seed = 0x51u * (unsigned)launch;
		CK(cudaMemset(dp, 0, BYTES));
		CK(cudaMemset(dq, 0, BYTES));
		CK(cudaMemset(dr, 0, BYTES));
		CK(cudaDeviceSynchronize());
		// the producer writes dp only after 20 ms; the graph must wait for it, and the
		// consumer for the graph
		gn_spin_fill<<<grid, THREADS, 0, producer>>>(dp, seed, N, 20000000ull);
		CK_LAUNCH();
		CK(cudaEventRecord(ev_in, producer));
		CK(cudaGraphLaunch(exec, s));
		CK(cudaStreamWaitEvent(consumer, ev_out, 0));
		gn_affine<<<grid, THREADS, 0, consumer>>>(dr, dq, 5, 2, N);
		CK_LAUNCH();
		CK(cudaStreamSynchronize(consumer));
		CK(cudaMemcpyAsync(gr.data(), dr, BYTES, cudaMemcpyDeviceToHost, consumer));
		CK(cudaStreamSynchronize(consumer));
		CK(cudaEventSynchronize(ev_out));
		CK(cudaMemcpyAsync(gq.data(), dq, BYTES, cudaMemcpyDeviceToHost, consumer));
		CK(cudaStreamSynchronize(consumer));
		for (unsigned i = 0; i < (unsigned)N; i++) {
			wq[i] = spin_fill_value(i, seed) * 3u + 1u;
			wr[i] = wq[i] * 5u + 2u;
		}
		char what[112];
		snprintf(what, sizeof(what),
			 "event nodes, launch %d: the graph's kernel waited for the producer",
			 launch);
		check_words(what, gq.data(), wq.data(), N);
		snprintf(what, sizeof(what),
			 "event nodes, launch %d: a stream waiting on the recorded event saw it",
			 launch);
		check_words(what, gr.data(), wr.data(), N);
		CK(cudaDeviceSynchronize());
	}

	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(ev_in));
	CK(cudaEventDestroy(ev_out));
	CK(cudaStreamDestroy(producer));
	CK(cudaStreamDestroy(consumer));
	CK(cudaFree(dp));
	CK(cudaFree(dq));
	CK(cudaFree(dr));
}

int main()
{
	cudaStream_t s;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	section_big(s);
	section_edges(s);
	section_dot();
	section_capture(s);
	section_events(s);
	CK(cudaStreamDestroy(s));
	return rt_done("rt_graph_nodes", "graphs built node by node");
}
