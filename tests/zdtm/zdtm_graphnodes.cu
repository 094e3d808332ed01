// zdtm graphnodes: CUDA graphs built node by node, their executable graphs each changed in its
// own way, a captured graph with a node added by hand, and a capture into a hand-built graph:
// every way rgpu rebuilds a graph's state from its journal after a checkpoint or a migration.
//
// State (N = 40009 words a buffer, every input a seeded pattern):
// - G, made by cudaGraphCreate and built node by node, in creation order: (0) a host-to-device
//   copy from pinned memory into `in`; (1) an event wait node on ev_in (a producer stream
//   spins, fills `p`, records ev_in before each launch); (2) a memset of `m`; (3) an empty
//   node joining 0-2; (4) zn_affine x = in * mul + add (the argument changed later); (5)
//   zd_combine_u32 y = (p, m); (6) zd_combine_u32 z = (x, y), added without dependencies, its
//   edges 4->6 and 5->6 added with cudaGraphAddDependencies (with 2->4, removed again at
//   once); (7) zd_step_u32 of z; (8) a device-to-device copy of z into w (1D); (9) a
//   device-to-host copy of w into pinned memory (1D); (10) a host node counting its runs,
//   after 6; (11) a kernel that would overwrite the guard buffer, destroyed
//   (cudaGraphDestroyNode); (12) a child graph node after 0, its graph C built node by node
//   (memset c, zd_combine_u32 c = (c, in), zd_step_u32 c); (13) an event record node of ev_out
//   after 8, the edge 12->13 added with cudaGraphAddDependencies. A consumer stream waits for
//   ev_out and computes r = (w, c). 13 nodes, 14 edges, roots 0-2.
// - E1 = G instantiated. Launched once, then changed: cudaGraphExecKernelNodeSetParams of
//   node 4, cudaGraphExecMemsetNodeSetParams of node 2, node 7 disabled
//   (cudaGraphNodeSetEnabled).
// - E2 = G instantiated; K = cudaGraphClone(G), node 4 of K given another argument; E2 updated
//   from K (cudaGraphExecUpdate). K is kept.
// - After E1 and E2 were made, G itself changes: node 4's arguments
//   (cudaGraphKernelNodeSetParams), node 6's two inputs swapped, a node (14: zd_fill_u32 of q,
//   after 9) added. E3 = G instantiated then.
// - S: a stream capture (zd_fill_u32 of k, then a zn_affine of k added to the capture's graph
//   by hand after the dependencies cudaStreamGetCaptureInfo gave, made the capture's
//   dependency by cudaStreamUpdateCaptureDependencies, then zd_step_u32 of k and a
//   device-to-device copy of k into k2 captured after it); ES = S instantiated; S destroyed.
// - H: a memset node of h built by hand, then cudaStreamBeginCaptureToGraph(H) after it (a
//   fill of h2, zd_combine_u32 h = (h, h2), zd_step_u32 of h); EH = H instantiated.
// Each executable graph is launched, and every buffer checked, before READY.
//
// Checks after the signal: every buffer still holds what the last launches left; G's
// structure (13 + 1 nodes in creation order, by handle; the node types in order; its 15 edges
// by node; roots; dependencies; node 4's parameters are G's later ones), C's and the child
// node's copy (3 nodes, 2 edges), K (13 nodes, 14 edges, each of G's first 13 found by
// cudaGraphNodeFindInClone; its node 4's argument), H (4 nodes, 3 edges, types in order),
// node 7 disabled in E1 and enabled in E2. Then with every output buffer
// scrambled first, E1, E2, E3, a fresh instantiation of G (E4) and ES and EH are launched and
// every buffer compared with the host's computation: E1 with its own parameters (not G's, not
// K's) and node 7 still skipped, E2 with K's, E3 with G's as instantiated, E4 with G's now; the
// host node ran once a launch; the guard buffer is never written; q only by E3 and E4; the
// consumer saw what the record node ended. With ZDTM_ROUNDS=N, between rounds: E1's node 4
// and G's node 4 get another argument, K's too with E2 updated from it again, and EH's memset
// another value; the next round checks all of it.
#include <string>

#include "zdtm.h"

// The calls whose signature gained edge data in CUDA 12.3 and lost the old one in 13.0.
#if CUDART_VERSION >= 13000
#define ZG_GET_EDGES(g, f, t, n) cudaGraphGetEdges(g, f, t, nullptr, n)
#define ZG_GET_DEPS(x, d, n) cudaGraphNodeGetDependencies(x, d, nullptr, n)
#define ZG_ADD_DEPS(g, f, t, n) cudaGraphAddDependencies(g, f, t, nullptr, n)
#define ZG_REMOVE_DEPS(g, f, t, n) cudaGraphRemoveDependencies(g, f, t, nullptr, n)
#define ZG_CAPTURE_INFO(s, st, id, g, d, n) cudaStreamGetCaptureInfo(s, st, id, g, d, nullptr, n)
#define ZG_UPDATE_CAPTURE_DEPS(s, d, n, fl)                                                        \
	cudaStreamUpdateCaptureDependencies(s, d, nullptr, n, fl)
#elif CUDART_VERSION >= 12030
#define ZG_GET_EDGES(g, f, t, n) cudaGraphGetEdges(g, f, t, n)
#define ZG_GET_DEPS(x, d, n) cudaGraphNodeGetDependencies(x, d, n)
#define ZG_ADD_DEPS(g, f, t, n) cudaGraphAddDependencies(g, f, t, n)
#define ZG_REMOVE_DEPS(g, f, t, n) cudaGraphRemoveDependencies(g, f, t, n)
#define ZG_CAPTURE_INFO(s, st, id, g, d, n) cudaStreamGetCaptureInfo_v3(s, st, id, g, d, nullptr, n)
#define ZG_UPDATE_CAPTURE_DEPS(s, d, n, fl) cudaStreamUpdateCaptureDependencies(s, d, n, fl)
#else
#error "zdtm_graphnodes.cu needs CUDA 12.3 or later (cudaStreamBeginCaptureToGraph)"
#endif

// dst[i] = src[i] * mul + add (dst may be src). Twin: tests/simgpu/kernels.c.
__global__ void zn_affine(unsigned *dst, const unsigned *src, unsigned long long n, unsigned mul,
			  unsigned add)
{
	ZD_GRID_STRIDE(i, n)
	dst[i] = src[i] * mul + add;
}

enum { N = 40009, THREADS = 256 };
static const size_t BYTES = N * sizeof(unsigned);
static const unsigned long long SPIN_NS = 5ull * 1000 * 1000;

// G's parameters
static const unsigned MUL0 = 3, ADD0 = 0x1234567u;		// node 4 as added
static const unsigned MUL_E = 7, ADD_E = 0x7e1e7e1u;		// E1's own (+ round changes)
static const unsigned MUL_K = 11, ADD_K = 0xc10e0001u;		// the clone's (+ round changes)
static const unsigned MUL_G = 13, ADD_G = 0x9a9a0000u;		// G's later (+ round changes)
static const unsigned SET0 = 0x3c5a7e91u, SET_E = 0x0f1e2d3cu;	// node 2: G's, E1's
static const unsigned STEP_D = 0x510e527fu;			// node 7
static const unsigned CSET = 0x5be0cd19u, STEP_C = 0x1f83d9abu; // the child graph
static const unsigned SEED_DOOM = 0xdead0001u, SEED_Q = 0x71000001u;
// S's and H's
static const unsigned SEED_K = 0x6b000001u, MUL_S = 5, ADD_S = 0x5a5a0001u, STEP_S = 0x9b05688cu;
static const unsigned HSET0 = 0x48480001u, SEED_H2 = 0x68000002u, STEP_H = 0xa54ff53au;

// one device buffer and the host's copy of what it must hold
struct buf {
	const char *name;
	unsigned *d, *w;
};
enum { B_IN, B_M, B_P, B_X, B_Y, B_Z, B_W, B_C, B_R, B_Q, B_GUARD, B_K, B_K2, B_H, B_H2, NBUF };
static struct buf bufs[NBUF] = {{"in", 0, 0}, {"m", 0, 0}, {"p", 0, 0},	    {"x", 0, 0},
				{"y", 0, 0},  {"z", 0, 0}, {"w", 0, 0},	    {"c", 0, 0},
				{"r", 0, 0},  {"q", 0, 0}, {"guard", 0, 0}, {"k", 0, 0},
				{"k2", 0, 0}, {"h", 0, 0}, {"h2", 0, 0}};
#define D(b) (bufs[b].d)
#define W(b) (bufs[b].w)

static unsigned *h_in, *h_out, *w_out; // pinned input and output of nodes 0 and 9
static cudaStream_t s_main, s_prod, s_cons, s_cap;
static cudaEvent_t ev_in, ev_out;
static volatile int host_runs; // node 10
static int want_host_runs;
static unsigned long long launches, instantiations;

// What one launch of an executable graph made from G computes.
struct gcfg {
	unsigned mul, add, set;
	bool swapped; // node 6's inputs swapped (G after E1 and E2)
	bool step_on; // node 7 enabled
	bool extra;   // node 14 there
};

// ---- node parameters ----------------------------------------------------------------------

// A kernel node's parameters: the arguments live in the struct (copied by the add/set call).
struct knode {
	unsigned long long a[5];
	void *argv[5];
	cudaKernelNodeParams p;

	knode(void *func, int nargs)
	{
		for (int i = 0; i < nargs; i++)
			argv[i] = &a[i];
		p = {};
		p.func = func;
		p.gridDim = dim3(zd_blocks(N));
		p.blockDim = dim3(THREADS);
		p.kernelParams = argv;
	}
	knode(const knode &) = delete;
	knode &operator=(const knode &) = delete;
};
// Each argument is written at the start of its 8-byte slot (little-endian: a u32's value).
static void arg_ptr(knode &k, int i, const void *v)
{
	memcpy(&k.a[i], &v, sizeof(v));
}
static void arg_u64(knode &k, int i, unsigned long long v)
{
	k.a[i] = v;
}
static void arg_u32(knode &k, int i, unsigned v)
{
	k.a[i] = 0;
	memcpy(&k.a[i], &v, 4);
}

struct affine_k : knode {
	affine_k(unsigned *dst, const unsigned *src, unsigned mul, unsigned add)
	    : knode((void *)zn_affine, 5)
	{
		arg_ptr(*this, 0, dst);
		arg_ptr(*this, 1, src);
		arg_u64(*this, 2, N);
		arg_u32(*this, 3, mul);
		arg_u32(*this, 4, add);
	}
};
struct combine_k : knode {
	combine_k(unsigned *dst, const unsigned *a, const unsigned *b)
	    : knode((void *)zd_combine_u32, 4)
	{
		arg_ptr(*this, 0, dst);
		arg_ptr(*this, 1, a);
		arg_ptr(*this, 2, b);
		arg_u64(*this, 3, N);
	}
};
struct step_k : knode {
	step_k(unsigned *p, unsigned k) : knode((void *)zd_step_u32, 3)
	{
		arg_ptr(*this, 0, p);
		arg_u64(*this, 1, N);
		arg_u32(*this, 2, k);
	}
};
struct fill_k : knode {
	fill_k(unsigned *p, unsigned seed) : knode((void *)zd_fill_u32, 3)
	{
		arg_ptr(*this, 0, p);
		arg_u64(*this, 1, N);
		arg_u32(*this, 2, seed);
	}
};

static cudaMemsetParams memset_words(unsigned *dst, unsigned value)
{
	cudaMemsetParams p = {};
	p.dst = dst;
	p.value = value;
	p.elementSize = 4;
	p.width = N;
	p.height = 1;
	return p;
}

static void CUDART_CB count_run(void *arg)
{
	++*(volatile int *)arg;
}

// ---- the graphs ------------------------------------------------------------------------------

enum {
	G_H2D,
	G_WAIT,
	G_SET,
	G_JOIN,
	G_AFFINE,
	G_YB,
	G_Z,
	G_STEP,
	G_D2D,
	G_D2H,
	G_HOST,
	G_CHILD,
	G_REC,
	G_EXTRA,
	G_NODES
};
static const int G_NODES_FIRST = G_EXTRA; // before node 14 was added
static const char *const G_TYPES = "memcpy wait_event memset empty kernel kernel kernel kernel "
				   "memcpy memcpy host graph event_record kernel";
// (from, to) by the indices above; node 14's edge comes last
static const int G_EDGES[][2] = {
    {G_H2D, G_JOIN}, {G_WAIT, G_JOIN}, {G_SET, G_JOIN}, {G_JOIN, G_AFFINE}, {G_JOIN, G_YB},
    {G_AFFINE, G_Z}, {G_YB, G_Z},      {G_Z, G_STEP},	{G_STEP, G_D2D},    {G_D2D, G_D2H},
    {G_Z, G_HOST},   {G_H2D, G_CHILD}, {G_D2D, G_REC},	{G_CHILD, G_REC},   {G_D2H, G_EXTRA}};
static const int G_EDGES_FIRST = 14;

static cudaGraph_t g, child, clone_k, graph_h;
static cudaGraphNode_t gn[G_NODES], cn[3], hn_set;
static cudaGraphExec_t e1, e2, e3, es, eh;
static struct gcfg cfg_e1, cfg_e2, cfg_e3, cfg_g; // cfg_g: G now

static void build_child(void)
{
	ZK(cudaGraphCreate(&child, 0));
	cudaMemsetParams ms = memset_words(D(B_C), CSET);
	ZK(cudaGraphAddMemsetNode(&cn[0], child, nullptr, 0, &ms));
	combine_k comb(D(B_C), D(B_C), D(B_IN));
	ZK(cudaGraphAddKernelNode(&cn[1], child, &cn[0], 1, &comb.p));
	step_k st(D(B_C), STEP_C);
	ZK(cudaGraphAddKernelNode(&cn[2], child, &cn[1], 1, &st.p));
}

static void build_g(void)
{
	cudaMemcpy3DParms hp = {};
	hp.srcPtr = make_cudaPitchedPtr(h_in, BYTES, BYTES, 1);
	hp.dstPtr = make_cudaPitchedPtr(D(B_IN), BYTES, BYTES, 1);
	hp.extent = make_cudaExtent(BYTES, 1, 1);
	hp.kind = cudaMemcpyHostToDevice;

	ZK(cudaGraphCreate(&g, 0));
	ZK(cudaGraphAddMemcpyNode(&gn[G_H2D], g, nullptr, 0, &hp));
	ZK(cudaGraphAddEventWaitNode(&gn[G_WAIT], g, nullptr, 0, ev_in));
	cudaMemsetParams ms = memset_words(D(B_M), SET0);
	ZK(cudaGraphAddMemsetNode(&gn[G_SET], g, nullptr, 0, &ms));
	ZK(cudaGraphAddEmptyNode(&gn[G_JOIN], g, gn, 3));
	affine_k aff(D(B_X), D(B_IN), MUL0, ADD0);
	ZK(cudaGraphAddKernelNode(&gn[G_AFFINE], g, &gn[G_JOIN], 1, &aff.p));
	combine_k yb(D(B_Y), D(B_P), D(B_M));
	ZK(cudaGraphAddKernelNode(&gn[G_YB], g, &gn[G_JOIN], 1, &yb.p));
	combine_k z(D(B_Z), D(B_X), D(B_Y));
	ZK(cudaGraphAddKernelNode(&gn[G_Z], g, nullptr, 0, &z.p));
	step_k st(D(B_Z), STEP_D);
	ZK(cudaGraphAddKernelNode(&gn[G_STEP], g, &gn[G_Z], 1, &st.p));
	ZK(cudaGraphAddMemcpyNode1D(&gn[G_D2D], g, &gn[G_STEP], 1, D(B_W), D(B_Z), BYTES,
				    cudaMemcpyDeviceToDevice));
	ZK(cudaGraphAddMemcpyNode1D(&gn[G_D2H], g, &gn[G_D2D], 1, h_out, D(B_W), BYTES,
				    cudaMemcpyDeviceToHost));
	cudaHostNodeParams hnp = {count_run, (void *)&host_runs};
	ZK(cudaGraphAddHostNode(&gn[G_HOST], g, &gn[G_Z], 1, &hnp));
	cudaGraphNode_t doomed;
	fill_k df(D(B_GUARD), SEED_DOOM);
	ZK(cudaGraphAddKernelNode(&doomed, g, &gn[G_Z], 1, &df.p));
	ZK(cudaGraphAddChildGraphNode(&gn[G_CHILD], g, &gn[G_H2D], 1, child));
	ZK(cudaGraphAddEventRecordNode(&gn[G_REC], g, &gn[G_D2D], 1, ev_out));
	// edges added afterwards: 4->6, 5->6, 12->13, and 2->4 (removed again)
	cudaGraphNode_t from[4] = {gn[G_AFFINE], gn[G_YB], gn[G_CHILD], gn[G_SET]};
	cudaGraphNode_t to[4] = {gn[G_Z], gn[G_Z], gn[G_REC], gn[G_AFFINE]};
	ZK(ZG_ADD_DEPS(g, from, to, 4));
	ZK(ZG_REMOVE_DEPS(g, &from[3], &to[3], 1));
	ZK(cudaGraphDestroyNode(doomed));
	cfg_g = {MUL0, ADD0, SET0, false, true, false};
}

// after E1 and E2 were made: G's own later changes
static void change_g(void)
{
	affine_k aff(D(B_X), D(B_IN), MUL_G, ADD_G);
	ZK(cudaGraphKernelNodeSetParams(gn[G_AFFINE], &aff.p));
	combine_k z(D(B_Z), D(B_Y), D(B_X));
	ZK(cudaGraphKernelNodeSetParams(gn[G_Z], &z.p));
	fill_k q(D(B_Q), SEED_Q);
	ZK(cudaGraphAddKernelNode(&gn[G_EXTRA], g, &gn[G_D2H], 1, &q.p));
	cfg_g = {MUL_G, ADD_G, SET0, true, true, true};
}

// E1's own changes: node 4's arguments, node 2's value, node 7 disabled
static void change_e1(void)
{
	affine_k aff(D(B_X), D(B_IN), MUL_E, ADD_E);
	ZK(cudaGraphExecKernelNodeSetParams(e1, gn[G_AFFINE], &aff.p));
	cudaMemsetParams ms = memset_words(D(B_M), SET_E);
	ZK(cudaGraphExecMemsetNodeSetParams(e1, gn[G_SET], &ms));
	ZK(cudaGraphNodeSetEnabled(e1, gn[G_STEP], 0));
	cfg_e1 = {MUL_E, ADD_E, SET_E, false, false, false};
}

// K's node 4 given (MUL_K, add), E2 updated from K
static void update_e2(unsigned add, const char *when)
{
	cudaGraphNode_t k4;
	cudaGraphExecUpdateResultInfo info;

	ZK(cudaGraphNodeFindInClone(&k4, gn[G_AFFINE], clone_k));
	affine_k aff(D(B_X), D(B_IN), MUL_K, add);
	ZK(cudaGraphKernelNodeSetParams(k4, &aff.p));
	memset(&info, 0x55, sizeof(info));
	cudaError_t err = cudaGraphExecUpdate(e2, clone_k, &info);
	zd_expect(err == cudaSuccess && info.result == cudaGraphExecUpdateSuccess,
		  "%s: cudaGraphExecUpdate from the clone returned %s, result %d", when,
		  cudaGetErrorName(err), (int)info.result);
	if (err != cudaSuccess)
		(void)cudaGetLastError();
	cfg_e2 = {MUL_K, add, SET0, false, true, false};
}

// S: a capture with a node added by hand; ES; S destroyed
static void build_s(void)
{
	cudaStreamCaptureStatus st;
	cudaGraph_t cg = nullptr, s_graph;
	const cudaGraphNode_t *deps = nullptr;
	size_t nd = 0;
	unsigned long long id = 0;
	cudaGraphNode_t hand;

	ZK(cudaStreamBeginCapture(s_cap, cudaStreamCaptureModeGlobal));
	zd_fill_u32<<<zd_blocks(N), THREADS, 0, s_cap>>>(D(B_K), N, SEED_K);
	ZK_LAUNCH();
	ZK(ZG_CAPTURE_INFO(s_cap, &st, &id, &cg, &deps, &nd));
	zd_expect(st == cudaStreamCaptureStatusActive && cg && nd == 1,
		  "capture info after one launch: status %d, %zu dependencies, want active and 1",
		  (int)st, nd);
	affine_k aff(D(B_K), D(B_K), MUL_S, ADD_S);
	ZK(cudaGraphAddKernelNode(&hand, cg, deps, nd, &aff.p));
	ZK(ZG_UPDATE_CAPTURE_DEPS(s_cap, &hand, 1, cudaStreamSetCaptureDependencies));
	ZK(ZG_CAPTURE_INFO(s_cap, &st, nullptr, nullptr, &deps, &nd));
	zd_expect(nd == 1 && deps[0] == hand,
		  "cudaStreamUpdateCaptureDependencies: %zu dependencies, want the added node", nd);
	zd_step_u32<<<zd_blocks(N), THREADS, 0, s_cap>>>(D(B_K), N, STEP_S);
	ZK_LAUNCH();
	ZK(cudaMemcpyAsync(D(B_K2), D(B_K), BYTES, cudaMemcpyDeviceToDevice, s_cap));
	ZK(cudaStreamEndCapture(s_cap, &s_graph));
	zd_expect(s_graph == cg, "cudaStreamEndCapture: not the graph the capture info named");
	size_t n = 0, ne = 0;
	ZK(cudaGraphGetNodes(s_graph, nullptr, &n));
	ZK(ZG_GET_EDGES(s_graph, nullptr, nullptr, &ne));
	zd_expect(n == 4 && ne == 3, "captured graph: %zu nodes and %zu edges, want 4 and 3", n,
		  ne);
	ZK(cudaGraphInstantiate(&es, s_graph, 0));
	instantiations++;
	ZK(cudaGraphDestroy(s_graph)); // the executable graph outlives it
}

// H: a memset node by hand, then a capture into H after it; EH
static void build_h(void)
{
	cudaGraph_t got;

	ZK(cudaGraphCreate(&graph_h, 0));
	cudaMemsetParams ms = memset_words(D(B_H), HSET0);
	ZK(cudaGraphAddMemsetNode(&hn_set, graph_h, nullptr, 0, &ms));
	ZK(cudaStreamBeginCaptureToGraph(s_cap, graph_h, &hn_set, nullptr, 1,
					 cudaStreamCaptureModeGlobal));
	zd_fill_u32<<<zd_blocks(N), THREADS, 0, s_cap>>>(D(B_H2), N, SEED_H2);
	ZK_LAUNCH();
	zd_combine_u32<<<zd_blocks(N), THREADS, 0, s_cap>>>(D(B_H), D(B_H), D(B_H2), N);
	ZK_LAUNCH();
	zd_step_u32<<<zd_blocks(N), THREADS, 0, s_cap>>>(D(B_H), N, STEP_H);
	ZK_LAUNCH();
	ZK(cudaStreamEndCapture(s_cap, &got));
	zd_expect(got == graph_h, "cudaStreamEndCapture after cudaStreamBeginCaptureToGraph: "
				  "not the graph captured into");
	ZK(cudaGraphInstantiate(&eh, graph_h, 0));
	instantiations++;
}

// ---- launches and the host's computation ------------------------------------------------------

static void fill_host(unsigned *w, unsigned seed)
{
	for (unsigned i = 0; i < N; i++)
		w[i] = zd_hash(i, seed);
}

// Scramble a buffer (device and expectation) so that a launch that does not write it shows.
static void scramble(int b, unsigned seed)
{
	zd_fill_u32<<<zd_blocks(N), THREADS, 0, s_main>>>(D(b), N, seed);
	ZK_LAUNCH();
	fill_host(W(b), seed);
}

static void check_buffers(int round, const char *when)
{
	char what[160];

	for (int b = 0; b < NBUF; b++) {
		snprintf(what, sizeof(what), "round %d %s: buffer %s", round + 1, when,
			 bufs[b].name);
		zd_compare_dev(what, D(b), W(b), BYTES, 4);
	}
}

// One launch of an executable graph made from G, checked: new pinned input, the producer's
// delayed p, every output scrambled first, the consumer after ev_out.
static void launch_g(cudaGraphExec_t e, const struct gcfg &c, unsigned seed, int round,
		     const char *name)
{
	char what[160];

	for (int b = B_IN; b <= B_Q; b++)
		if (b != B_P) // p is the producer's
			scramble(b, seed + 0x100u * (unsigned)b);
	ZK(cudaStreamSynchronize(s_main));
	fill_host(h_in, seed ^ 0x494e0000u);
	for (unsigned i = 0; i < N; i++)
		h_out[i] = 0xeeeeeeeeu;
	int runs_before = host_runs;

	// p is written only after SPIN_NS: node 1 must wait for it
	zd_spin<<<1, 1, 0, s_prod>>>(SPIN_NS);
	ZK_LAUNCH();
	zd_fill_u32<<<zd_blocks(N), THREADS, 0, s_prod>>>(D(B_P), N, seed ^ 0x50000000u);
	ZK_LAUNCH();
	ZK(cudaEventRecord(ev_in, s_prod));
	ZK(cudaGraphLaunch(e, s_main));
	ZK(cudaStreamWaitEvent(s_cons, ev_out, 0));
	zd_combine_u32<<<zd_blocks(N), THREADS, 0, s_cons>>>(D(B_R), D(B_W), D(B_C), N);
	ZK_LAUNCH();
	ZK(cudaStreamSynchronize(s_cons));
	ZK(cudaStreamSynchronize(s_main));
	ZK(cudaStreamSynchronize(s_prod));
	launches++;
	want_host_runs++;

	memcpy(W(B_IN), h_in, BYTES);
	fill_host(W(B_P), seed ^ 0x50000000u);
	for (unsigned i = 0; i < N; i++) {
		unsigned in = W(B_IN)[i];
		W(B_M)[i] = c.set;
		W(B_X)[i] = in * c.mul + c.add;
		W(B_Y)[i] = zd_combine_word(W(B_P)[i], c.set);
		unsigned z = c.swapped ? zd_combine_word(W(B_Y)[i], W(B_X)[i])
				       : zd_combine_word(W(B_X)[i], W(B_Y)[i]);
		if (c.step_on)
			z = zd_step_word(z, i, STEP_D);
		W(B_Z)[i] = W(B_W)[i] = w_out[i] = z;
		W(B_C)[i] = zd_step_word(zd_combine_word(CSET, in), i, STEP_C);
		W(B_R)[i] = zd_combine_word(z, W(B_C)[i]);
		if (c.extra)
			W(B_Q)[i] = zd_hash(i, SEED_Q);
	}
	check_buffers(round, name);
	snprintf(what, sizeof(what), "round %d: %s: pinned output of the device-to-host node",
		 round + 1, name);
	zd_compare(what, h_out, w_out, BYTES, 4);
	zd_expect(host_runs == runs_before + 1, "round %d: %s: the host node ran %d times, want 1",
		  round + 1, name, host_runs - runs_before);
}

static void launch_s(int round)
{
	scramble(B_K, 0x6b100000u + (unsigned)round);
	scramble(B_K2, 0x6b200000u + (unsigned)round);
	ZK(cudaStreamSynchronize(s_main));
	ZK(cudaGraphLaunch(es, s_cap));
	ZK(cudaStreamSynchronize(s_cap));
	launches++;
	for (unsigned i = 0; i < N; i++) {
		unsigned k = zd_step_word(zd_hash(i, SEED_K) * MUL_S + ADD_S, i, STEP_S);
		W(B_K)[i] = k;
		W(B_K2)[i] = k;
	}
	check_buffers(round, "the captured graph's exec");
}

static unsigned hset = HSET0; // EH's memset value

static void launch_h(int round)
{
	scramble(B_H, 0x68100000u + (unsigned)round);
	scramble(B_H2, 0x68200000u + (unsigned)round);
	ZK(cudaStreamSynchronize(s_main));
	ZK(cudaGraphLaunch(eh, s_cap));
	ZK(cudaStreamSynchronize(s_cap));
	launches++;
	for (unsigned i = 0; i < N; i++) {
		W(B_H2)[i] = zd_hash(i, SEED_H2);
		W(B_H)[i] = zd_step_word(zd_combine_word(hset, W(B_H2)[i]), i, STEP_H);
	}
	check_buffers(round, "the exec of the graph captured into");
}

// ---- structure ---------------------------------------------------------------------------------

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

static int index_of(cudaGraphNode_t x, const cudaGraphNode_t *known, int n)
{
	for (int i = 0; i < n; i++)
		if (known[i] == x)
			return i;
	return -1;
}

static size_t node_count(cudaGraph_t h)
{
	size_t n = 0;
	ZK(cudaGraphGetNodes(h, nullptr, &n));
	return n;
}

static size_t edge_count(cudaGraph_t h)
{
	size_t n = 0;
	ZK(ZG_GET_EDGES(h, nullptr, nullptr, &n));
	return n;
}

// G: nodes by handle in creation order, types in order, edges by node, roots, dependencies,
// node 4's parameters, the child node's copy, E1's and E2's enabled state of node 7
static void check_g(int round, const char *when)
{
	cudaGraphNode_t nodes[G_NODES + 4], from[32], to[32];
	size_t n = G_NODES + 4, ne = 32;

	ZK(cudaGraphGetNodes(g, nodes, &n));
	bool same = n == G_NODES;
	for (size_t i = 0; same && i < n; i++)
		same = nodes[i] == gn[i];
	zd_expect(same,
		  "round %d %s: cudaGraphGetNodes of G: %zu nodes, want the %d added, in "
		  "creation order",
		  round + 1, when, n, (int)G_NODES);
	std::string types;
	for (size_t i = 0; i < n; i++) {
		cudaGraphNodeType t;
		ZK(cudaGraphNodeGetType(nodes[i], &t));
		types += i ? " " : "";
		types += type_name(t);
	}
	zd_expect(types == G_TYPES, "round %d %s: G's node types in order: %s, want %s", round + 1,
		  when, types.c_str(), G_TYPES);

	ZK(ZG_GET_EDGES(g, from, to, &ne));
	bool edges_ok = ne == G_EDGES_FIRST + 1;
	for (size_t i = 0; edges_ok && i < ne; i++) {
		int f = index_of(from[i], gn, G_NODES), t = index_of(to[i], gn, G_NODES);
		bool found = false;
		for (size_t k = 0; k < ne; k++)
			found = found || (G_EDGES[k][0] == f && G_EDGES[k][1] == t);
		edges_ok = found;
	}
	zd_expect(edges_ok,
		  "round %d %s: cudaGraphGetEdges of G: %zu edges, want the %d added "
		  "(2->4 removed, the destroyed node's gone)",
		  round + 1, when, ne, G_EDGES_FIRST + 1);

	size_t nr = 8;
	cudaGraphNode_t roots[8];
	ZK(cudaGraphGetRootNodes(g, roots, &nr));
	bool roots_ok = nr == 3;
	for (size_t i = 0; roots_ok && i < nr; i++) {
		int k = index_of(roots[i], gn, G_NODES);
		roots_ok = k == G_H2D || k == G_WAIT || k == G_SET;
	}
	zd_expect(roots_ok, "round %d %s: G has %zu roots, want nodes 0, 1 and 2", round + 1, when,
		  nr);
	cudaGraphNode_t deps[8];
	size_t nd = 8;
	ZK(ZG_GET_DEPS(gn[G_Z], deps, &nd));
	zd_expect(nd == 2 && ((deps[0] == gn[G_AFFINE] && deps[1] == gn[G_YB]) ||
			      (deps[0] == gn[G_YB] && deps[1] == gn[G_AFFINE])),
		  "round %d %s: node 6 has %zu dependencies, want nodes 4 and 5", round + 1, when,
		  nd);
	nd = 8;
	ZK(ZG_GET_DEPS(gn[G_AFFINE], deps, &nd));
	zd_expect(nd == 1 && deps[0] == gn[G_JOIN],
		  "round %d %s: node 4 has %zu dependencies, want node 3 alone", round + 1, when,
		  nd);

	cudaKernelNodeParams kp;
	ZK(cudaGraphKernelNodeGetParams(gn[G_AFFINE], &kp));
	zd_expect(kp.func == (void *)zn_affine && kp.kernelParams &&
		      *(unsigned **)kp.kernelParams[0] == D(B_X) &&
		      *(unsigned *)kp.kernelParams[3] == cfg_g.mul &&
		      *(unsigned *)kp.kernelParams[4] == cfg_g.add,
		  "round %d %s: node 4's parameters in G are not G's latest", round + 1, when);
	cudaMemsetParams mp;
	ZK(cudaGraphMemsetNodeGetParams(gn[G_SET], &mp));
	zd_expect(mp.dst == D(B_M) && mp.value == SET0 && mp.width == N && mp.elementSize == 4,
		  "round %d %s: node 2's memset parameters in G changed", round + 1, when);
	cudaEvent_t ev;
	ZK(cudaGraphEventWaitNodeGetEvent(gn[G_WAIT], &ev));
	zd_expect(ev == ev_in, "round %d %s: node 1 waits for another event", round + 1, when);
	ZK(cudaGraphEventRecordNodeGetEvent(gn[G_REC], &ev));
	zd_expect(ev == ev_out, "round %d %s: node 13 records another event", round + 1, when);

	cudaGraph_t copy;
	ZK(cudaGraphChildGraphNodeGetGraph(gn[G_CHILD], &copy));
	zd_expect(copy != child && node_count(copy) == 3 && edge_count(copy) == 2,
		  "round %d %s: the child node's graph: %zu nodes, %zu edges, want a copy with 3 "
		  "and 2",
		  round + 1, when, node_count(copy), edge_count(copy));
	size_t nc = 3;
	cudaGraphNode_t cnodes[3];
	ZK(cudaGraphGetNodes(child, cnodes, &nc));
	zd_expect(nc == 3 && cnodes[0] == cn[0] && cnodes[1] == cn[1] && cnodes[2] == cn[2],
		  "round %d %s: the child graph C has %zu nodes, want its 3 in order", round + 1,
		  when, nc);

	unsigned on1 = 7, on2 = 7;
	ZK(cudaGraphNodeGetEnabled(e1, gn[G_STEP], &on1));
	ZK(cudaGraphNodeGetEnabled(e2, gn[G_STEP], &on2));
	zd_expect(on1 == 0 && on2 == 1,
		  "round %d %s: node 7 enabled %u in E1 and %u in E2, want 0 and 1", round + 1,
		  when, on1, on2);
}

// K: as many nodes as G had, each of G's first 13 found in it by cudaGraphNodeFindInClone; H
static void check_clone_h(int round, const char *when)
{
	cudaGraphNode_t knodes[G_NODES_FIRST + 4];
	size_t n = G_NODES_FIRST + 4;
	ZK(cudaGraphGetNodes(clone_k, knodes, &n));
	bool found = n == G_NODES_FIRST;
	for (int i = 0; found && i < G_NODES_FIRST; i++) {
		cudaGraphNode_t x = nullptr;
		cudaGraphNodeType ta, tb;
		ZK(cudaGraphNodeFindInClone(&x, gn[i], clone_k));
		ZK(cudaGraphNodeGetType(x, &ta));
		ZK(cudaGraphNodeGetType(gn[i], &tb));
		found = index_of(x, knodes, (int)n) >= 0 && ta == tb;
	}
	zd_expect(found && edge_count(clone_k) == G_EDGES_FIRST,
		  "round %d %s: the clone has %zu nodes and %zu edges, want %d and %d, each of G's "
		  "nodes found in it",
		  round + 1, when, n, edge_count(clone_k), G_NODES_FIRST, G_EDGES_FIRST);
	cudaGraphNode_t k4;
	cudaKernelNodeParams kp;
	ZK(cudaGraphNodeFindInClone(&k4, gn[G_AFFINE], clone_k));
	ZK(cudaGraphKernelNodeGetParams(k4, &kp));
	zd_expect(*(unsigned *)kp.kernelParams[3] == cfg_e2.mul &&
		      *(unsigned *)kp.kernelParams[4] == cfg_e2.add,
		  "round %d %s: the clone's node 4 lost its arguments", round + 1, when);

	cudaGraphNode_t hnodes[8];
	size_t nh = 8;
	ZK(cudaGraphGetNodes(graph_h, hnodes, &nh));
	std::string types;
	for (size_t i = 0; i < nh; i++) {
		cudaGraphNodeType t;
		ZK(cudaGraphNodeGetType(hnodes[i], &t));
		types += i ? " " : "";
		types += type_name(t);
	}
	zd_expect(nh == 4 && hnodes[0] == hn_set && edge_count(graph_h) == 3 &&
		      types == "memset kernel kernel kernel",
		  "round %d %s: H has %zu nodes (%s) and %zu edges, want its memset node, then 3 "
		  "kernels, 3 edges",
		  round + 1, when, nh, types.c_str(), edge_count(graph_h));
}

// between rounds: E1's node 4, G's node 4, K's node 4 (E2 updated again), EH's memset
static void change_round(int round)
{
	unsigned d = (unsigned)round + 1;

	affine_k ae(D(B_X), D(B_IN), MUL_E, ADD_E + d);
	ZK(cudaGraphExecKernelNodeSetParams(e1, gn[G_AFFINE], &ae.p));
	cfg_e1.add = ADD_E + d;
	affine_k ag(D(B_X), D(B_IN), MUL_G, ADD_G + d);
	ZK(cudaGraphKernelNodeSetParams(gn[G_AFFINE], &ag.p));
	cfg_g.add = ADD_G + d;
	update_e2(ADD_K + d, "between rounds");
	hset = HSET0 + d;
	cudaMemsetParams ms = memset_words(D(B_H), hset);
	ZK(cudaGraphExecMemsetNodeSetParams(eh, hn_set, &ms));
}

int main()
{
	cudaGraphExec_t e4;

	zd_init("graphnodes");
	ZK(cudaSetDevice(0));
	ZK(cudaStreamCreateWithFlags(&s_main, cudaStreamNonBlocking));
	ZK(cudaStreamCreateWithFlags(&s_prod, cudaStreamNonBlocking));
	ZK(cudaStreamCreateWithFlags(&s_cons, cudaStreamNonBlocking));
	ZK(cudaStreamCreateWithFlags(&s_cap, cudaStreamNonBlocking));
	ZK(cudaEventCreateWithFlags(&ev_in, cudaEventDisableTiming));
	ZK(cudaEventCreateWithFlags(&ev_out, cudaEventDisableTiming));
	for (int b = 0; b < NBUF; b++) {
		ZK(cudaMalloc(&bufs[b].d, BYTES));
		bufs[b].w = (unsigned *)malloc(BYTES);
		if (!bufs[b].w) {
			printf("zdtm graphnodes: FAIL no host memory\n");
			return 1;
		}
		scramble(b, 0x60000000u + (unsigned)b);
	}
	ZK(cudaMallocHost(&h_in, BYTES));
	ZK(cudaMallocHost(&h_out, BYTES));
	w_out = (unsigned *)malloc(BYTES);
	ZK(cudaDeviceSynchronize());

	build_child();
	build_g();
	ZK(cudaGraphInstantiate(&e1, g, 0));
	instantiations++;
	launch_g(e1, cfg_g, 0x10000001u, -1, "E1 as instantiated");
	change_e1();
	ZK(cudaGraphInstantiate(&e2, g, 0));
	instantiations++;
	ZK(cudaGraphClone(&clone_k, g));
	update_e2(ADD_K, "before READY");
	change_g();
	ZK(cudaGraphInstantiate(&e3, g, 0));
	instantiations++;
	cfg_e3 = cfg_g;
	build_s();
	build_h();
	launch_g(e1, cfg_e1, 0x10000002u, -1, "E1 with its own parameters");
	launch_g(e2, cfg_e2, 0x10000003u, -1, "E2 updated from the clone");
	launch_g(e3, cfg_e3, 0x10000004u, -1, "E3 from G changed");
	launch_s(-1);
	launch_h(-1);
	check_g(-1, "before READY");
	check_clone_h(-1, "before READY");
	zd_round_end(-1);

	for (int round = 0; round < zd_rounds; round++) {
		unsigned seed = 0x20000000u + 0x10u * (unsigned)round;

		zd_ready_wait();
		check_buffers(round, "after the signal");
		{
			char what[160];
			snprintf(
			    what, sizeof(what),
			    "round %d after the signal: pinned output of the device-to-host node",
			    round + 1);
			zd_compare(what, h_out, w_out, BYTES, 4);
		}
		check_g(round, "after the signal");
		check_clone_h(round, "after the signal");
		zd_round_end(round);

		launch_g(e1, cfg_e1, seed + 1, round, "E1 (its own parameters, node 7 disabled)");
		launch_g(e2, cfg_e2, seed + 2, round, "E2 (the clone's parameters)");
		launch_g(e3, cfg_e3, seed + 3, round, "E3 (G as it was instantiated)");
		ZK(cudaGraphInstantiate(&e4, g, 0));
		instantiations++;
		launch_g(e4, cfg_g, seed + 4, round, "E4 (G instantiated again)");
		ZK(cudaGraphExecDestroy(e4));
		launch_s(round);
		launch_h(round);
		// E1 once more, after the others: nothing they did reached it
		launch_g(e1, cfg_e1, seed + 5, round, "E1 again");
		zd_expect(host_runs == want_host_runs,
			  "round %d: the host node ran %d times in all, "
			  "want %d",
			  round + 1, host_runs, want_host_runs);
		check_g(round, "after the launches");
		zd_round_end(round);
		if (round + 1 < zd_rounds) {
			change_round(round);
			check_g(round, "after the changes between rounds");
			check_clone_h(round, "after the changes between rounds");
			zd_round_end(round);
		}
	}

	// the counts for the OK line, asked of the graphs themselves
	cudaGraph_t copy;
	ZK(cudaGraphChildGraphNodeGetGraph(gn[G_CHILD], &copy));
	size_t nodes = node_count(g), edges = edge_count(g), knodes = node_count(clone_k),
	       cnodes = node_count(copy), hnodes = node_count(graph_h);
	ZK(cudaGraphExecDestroy(e1));
	ZK(cudaGraphExecDestroy(e2));
	ZK(cudaGraphExecDestroy(e3));
	ZK(cudaGraphExecDestroy(es));
	ZK(cudaGraphExecDestroy(eh));
	ZK(cudaGraphDestroy(clone_k));
	ZK(cudaGraphDestroy(graph_h));
	ZK(cudaGraphDestroy(g));
	ZK(cudaGraphDestroy(child));
	ZK(cudaEventDestroy(ev_in));
	ZK(cudaEventDestroy(ev_out));
	for (cudaStream_t s : {s_main, s_prod, s_cons, s_cap})
		ZK(cudaStreamDestroy(s));
	for (int b = 0; b < NBUF; b++) {
		ZK(cudaFree(bufs[b].d));
		free(bufs[b].w);
	}
	ZK(cudaFreeHost(h_in));
	ZK(cudaFreeHost(h_out));
	free(w_out);
	char summary[192];
	snprintf(summary, sizeof(summary),
		 "nodes=%zu edges=%zu clone_nodes=%zu child_nodes=%zu tograph_nodes=%zu "
		 "instantiations=%llu launches=%llu host_runs=%d",
		 nodes, edges, knodes, cnodes, hnodes, instantiations, launches, host_runs);
	return zd_ok(summary);
}
