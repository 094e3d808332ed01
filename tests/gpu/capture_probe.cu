// What the real driver does around stream capture, for rgpu's implementers: run natively on a
// GPU host only (tests/gpu/run.sh writes its output to capture_probe.txt; CI only builds it).
//
// For each way a capture can be in progress, and each call below, one line:
//   stream=blocking mode=global thread=this call=cudaMalloc ret=900 status_after=2
//   capture_after=901
// stream: the capturing stream's flags (blocking: synchronises with the legacy stream);
// mode/thread: thread=this is a capture begun on the calling thread in that mode; thread=other is
// a global-mode capture begun on another thread while the calling thread's own mode
// (cudaThreadExchangeStreamCaptureMode) is `mode`. ret: the call's cudaError_t (CUresult for
// driver calls); status_after: cudaStreamIsCapturing afterwards (0 none, 1 active,
// 2 invalidated); capture_after: what cudaStreamEndCapture returned.
// Then one line per fact about graphs: the order cuGraphGetNodes lists captured nodes in, in a
// second identical capture and in a clone; cuStreamBeginCaptureToGraph into a graph that another
// stream is capturing; the order of a child graph node's embedded graph.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
				cudaGetErrorName(e_));                                             \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define CU(call)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: %d\n", __FILE__, __LINE__, #call,         \
				(int)r_);                                                          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__global__ void probe_kernel(unsigned *x)
{
	x[threadIdx.x] += 1;
}

static const char probe_ptx[] = ".version 8.0\n"
				".target sm_90\n"
				".address_size 64\n"
				".visible .entry probe_ptx()\n"
				"{\n"
				"\tret;\n"
				"}\n";

static const size_t BUF = 1 << 20;

// What the calls work on, made before each capture.
struct env {
	cudaStream_t cap, other;
	cudaEvent_t done; // recorded and completed outside the capture
	unsigned *dev;	  // 1 MiB of device memory
	void *pinned;	  // 1 MiB of pinned memory
	void *pageable;	  // 1 MiB, page aligned
	void *to_free;	  // made before the capture for cudaFree / cudaFreeHost
	void *made;	  // what a call that allocates made
	CUmodule mod;
};

struct probe_call {
	const char *name;
	void (*before)(env &); // may be null
	int (*call)(env &);
	void (*after)(env &, int ret); // may be null: undoes what the call or `before` left
};

static void alloc_dev(env &e)
{
	CK(cudaMalloc(&e.to_free, BUF));
}
static void alloc_host(env &e)
{
	CK(cudaMallocHost(&e.to_free, BUF));
}

static const probe_call calls[] = {
    {"cudaMalloc", nullptr, [](env &e) { return (int)cudaMalloc(&e.made, BUF); },
     [](env &e, int r) {
	     if (r == 0)
		     CK(cudaFree(e.made));
     }},
    {"cudaFree", alloc_dev, [](env &e) { return (int)cudaFree(e.to_free); },
     [](env &e, int r) {
	     if (r != 0)
		     CK(cudaFree(e.to_free));
     }},
    {"cudaMallocHost", nullptr, [](env &e) { return (int)cudaMallocHost(&e.made, BUF); },
     [](env &e, int r) {
	     if (r == 0)
		     CK(cudaFreeHost(e.made));
     }},
    {"cudaFreeHost", alloc_host, [](env &e) { return (int)cudaFreeHost(e.to_free); },
     [](env &e, int r) {
	     if (r != 0)
		     CK(cudaFreeHost(e.to_free));
     }},
    {"cudaHostRegister", nullptr,
     [](env &e) { return (int)cudaHostRegister(e.pageable, BUF, cudaHostRegisterDefault); },
     [](env &e, int r) {
	     if (r == 0)
		     CK(cudaHostUnregister(e.pageable));
     }},
    {"cudaMemcpy_HtoD", nullptr,
     [](env &e) { return (int)cudaMemcpy(e.dev, e.pageable, 4096, cudaMemcpyHostToDevice); },
     nullptr},
    {"cudaMemcpy_DtoH", nullptr,
     [](env &e) { return (int)cudaMemcpy(e.pageable, e.dev, 4096, cudaMemcpyDeviceToHost); },
     nullptr},
    {"cudaMemset", nullptr, [](env &e) { return (int)cudaMemset(e.dev, 0, 4096); }, nullptr},
    {"cudaMemcpyAsync_other_stream", nullptr,
     [](env &e) {
	     return (int)cudaMemcpyAsync(e.dev, e.pinned, 4096, cudaMemcpyHostToDevice, e.other);
     },
     nullptr},
    {"cudaStreamSynchronize_capturing", nullptr,
     [](env &e) { return (int)cudaStreamSynchronize(e.cap); }, nullptr},
    {"cudaStreamQuery_capturing", nullptr, [](env &e) { return (int)cudaStreamQuery(e.cap); },
     nullptr},
    {"cudaStreamSynchronize_other", nullptr,
     [](env &e) { return (int)cudaStreamSynchronize(e.other); }, nullptr},
    {"cudaStreamQuery_other", nullptr, [](env &e) { return (int)cudaStreamQuery(e.other); },
     nullptr},
    {"cudaEventSynchronize_outside", nullptr,
     [](env &e) { return (int)cudaEventSynchronize(e.done); }, nullptr},
    {"cudaEventQuery_outside", nullptr, [](env &e) { return (int)cudaEventQuery(e.done); },
     nullptr},
    {"cudaDeviceSynchronize", nullptr, [](env &) { return (int)cudaDeviceSynchronize(); }, nullptr},
    {"cudaMallocAsync_capturing", nullptr,
     [](env &e) {
	     int r = (int)cudaMallocAsync(&e.made, BUF, e.cap);
	     if (r == 0) // freed inside the capture too: the graph owns nothing afterwards
		     (void)cudaFreeAsync(e.made, e.cap);
	     return r;
     },
     nullptr},
    {"cudaMemGetInfo", nullptr,
     [](env &) {
	     size_t f, t;
	     return (int)cudaMemGetInfo(&f, &t);
     },
     nullptr},
    {"cudaGetDeviceProperties", nullptr,
     [](env &) {
	     cudaDeviceProp p;
	     return (int)cudaGetDeviceProperties(&p, 0);
     },
     nullptr},
    {"cudaFuncGetAttributes", nullptr,
     [](env &) {
	     cudaFuncAttributes a;
	     return (int)cudaFuncGetAttributes(&a, probe_kernel);
     },
     nullptr},
    {"cudaLaunchKernel_legacy_stream", nullptr,
     [](env &e) {
	     void *args[] = {&e.dev};
	     return (int)cudaLaunchKernel((const void *)probe_kernel, dim3(1), dim3(32), args, 0,
					  cudaStreamLegacy);
     },
     nullptr},
    {"cuModuleLoadData", nullptr, [](env &e) { return (int)cuModuleLoadData(&e.mod, probe_ptx); },
     [](env &e, int r) {
	     if (r == 0)
		     CU(cuModuleUnload(e.mod));
     }},
};

static const char *mode_name(cudaStreamCaptureMode m)
{
	return m == cudaStreamCaptureModeGlobal	       ? "global"
	       : m == cudaStreamCaptureModeThreadLocal ? "thread_local"
						       : "relaxed";
}

// A thread that begins a global-mode capture on a stream, waits, and ends it when told.
struct capturer {
	std::mutex mu;
	std::condition_variable cv;
	int step = 0; // 1: begun, 2: end it, 3: ended
	cudaError_t end_ret = cudaSuccess;
	cudaGraph_t graph = nullptr;

	void run(env &e)
	{
		CK(cudaSetDevice(0));
		CK(cudaStreamBeginCapture(e.cap, cudaStreamCaptureModeGlobal));
		probe_kernel<<<1, 32, 0, e.cap>>>(e.dev);
		(void)cudaGetLastError();
		set(1);
		wait_for(2);
		end_ret = cudaStreamEndCapture(e.cap, &graph);
		(void)cudaGetLastError();
		set(3);
	}
	void set(int v)
	{
		std::lock_guard<std::mutex> l(mu);
		step = v;
		cv.notify_all();
	}
	void wait_for(int v)
	{
		std::unique_lock<std::mutex> l(mu);
		cv.wait(l, [&] { return step >= v; });
	}
};

static void probe_one(bool blocking, cudaStreamCaptureMode mode, bool other_thread,
		      const probe_call &c)
{
	env e = {};
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	cudaError_t end_ret;
	cudaGraph_t graph = nullptr;
	int ret;

	CK(cudaStreamCreateWithFlags(&e.cap, blocking ? cudaStreamDefault : cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&e.other, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e.done));
	CK(cudaMalloc(&e.dev, BUF));
	CK(cudaMallocHost(&e.pinned, BUF));
	e.pageable = aligned_alloc(4096, BUF);
	if (!e.pageable)
		exit(1);
	memset(e.pageable, 0, BUF);
	CK(cudaEventRecord(e.done, e.other));
	CK(cudaDeviceSynchronize());
	if (c.before)
		c.before(e);

	if (!other_thread) {
		CK(cudaStreamBeginCapture(e.cap, mode));
		probe_kernel<<<1, 32, 0, e.cap>>>(e.dev);
		CK(cudaGetLastError());
		ret = c.call(e);
		(void)cudaGetLastError();
		CK(cudaStreamIsCapturing(e.cap, &st));
		end_ret = cudaStreamEndCapture(e.cap, &graph);
		(void)cudaGetLastError();
	} else {
		capturer t;
		std::thread th([&] { t.run(e); });
		t.wait_for(1);
		cudaStreamCaptureMode m = mode;
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		ret = c.call(e);
		(void)cudaGetLastError();
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		CK(cudaStreamIsCapturing(e.cap, &st));
		t.set(2);
		t.wait_for(3);
		th.join();
		end_ret = t.end_ret;
		graph = t.graph;
	}
	if (graph)
		CK(cudaGraphDestroy(graph));
	if (c.after)
		c.after(e, ret);
	(void)cudaGetLastError();
	CK(cudaDeviceSynchronize());
	printf("stream=%s mode=%s thread=%s call=%s ret=%d status_after=%d capture_after=%d\n",
	       blocking ? "blocking" : "nonblocking", mode_name(mode),
	       other_thread ? "other" : "this", c.name, ret, (int)st, (int)end_ret);
	fflush(stdout);

	CK(cudaFree(e.dev));
	CK(cudaFreeHost(e.pinned));
	free(e.pageable);
	CK(cudaEventDestroy(e.done));
	CK(cudaStreamDestroy(e.cap));
	CK(cudaStreamDestroy(e.other));
}

// ---- facts about graphs ---------------------------------------------------------------------

static const char *type_name(CUgraphNodeType t)
{
	switch (t) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return "kernel";
	case CU_GRAPH_NODE_TYPE_MEMCPY:
		return "memcpy";
	case CU_GRAPH_NODE_TYPE_MEMSET:
		return "memset";
	case CU_GRAPH_NODE_TYPE_HOST:
		return "host";
	case CU_GRAPH_NODE_TYPE_GRAPH:
		return "graph";
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return "empty";
	case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
		return "wait_event";
	case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
		return "event_record";
	default:
		return "other";
	}
}

static std::vector<CUgraphNode> nodes_of(CUgraph g)
{
	size_t n = 0;
	CU(cuGraphGetNodes(g, nullptr, &n));
	std::vector<CUgraphNode> v(n);
	if (n)
		CU(cuGraphGetNodes(g, v.data(), &n));
	return v;
}

static std::string types_of(const std::vector<CUgraphNode> &v)
{
	std::string s;
	for (CUgraphNode x : v) {
		CUgraphNodeType t;
		CU(cuGraphNodeGetType(x, &t));
		s += s.empty() ? "" : ",";
		s += type_name(t);
	}
	return s.empty() ? "none" : s;
}

static void CUDART_CB nop_host(void *)
{
}

// Node by node: created memcpy (a -> b), empty, kernel (on b), memset (a); then the edges
// memset -> kernel, kernel -> memcpy, empty -> memcpy, so that no order but creation order
// matches the listing by chance.
static std::vector<CUgraphNode> build_mixed(CUgraph g, unsigned *a, unsigned *b)
{
	CUcontext ctx;
	CUgraphNode n[4];
	cudaFunction_t f;

	CU(cuCtxGetCurrent(&ctx));
	CK(cudaGetFuncBySymbol(&f, (const void *)probe_kernel));
	CUDA_MEMCPY3D c = {};
	c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = (CUdeviceptr)a;
	c.dstDevice = (CUdeviceptr)b;
	c.WidthInBytes = 4096;
	c.Height = c.Depth = 1;
	CU(cuGraphAddMemcpyNode(&n[0], g, nullptr, 0, &c, ctx));
	CU(cuGraphAddEmptyNode(&n[1], g, nullptr, 0));
	void *args[] = {&b};
	CUDA_KERNEL_NODE_PARAMS k = {};
	k.func = (CUfunction)f;
	k.gridDimX = k.gridDimY = k.gridDimZ = 1;
	k.blockDimX = 32;
	k.blockDimY = k.blockDimZ = 1;
	k.kernelParams = args;
	CU(cuGraphAddKernelNode(&n[2], g, nullptr, 0, &k));
	CUDA_MEMSET_NODE_PARAMS m = {};
	m.dst = (CUdeviceptr)a;
	m.value = 3;
	m.elementSize = 4;
	m.width = 1024;
	m.height = 1;
	CU(cuGraphAddMemsetNode(&n[3], g, nullptr, 0, &m, ctx));
	CUgraphNode from[] = {n[3], n[2], n[1]}, to[] = {n[2], n[0], n[0]};
	CU(cuGraphAddDependencies(g, from, to, nullptr, 3));
	return std::vector<CUgraphNode>(n, n + 4);
}

// memset, kernel, memcpy, host, memset, kernel, memcpy on one stream
static const char *const CAPTURED = "memset,kernel,memcpy,host,memset,kernel,memcpy";

static cudaGraph_t capture_chain(cudaStream_t s, unsigned *a, unsigned *b)
{
	cudaGraph_t g;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < 2; i++) {
		CK(cudaMemsetAsync(a, i, 4096, s));
		probe_kernel<<<1, 32, 0, s>>>(a);
		CK(cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, s));
		if (i == 0)
			CK(cudaLaunchHostFunc(s, nop_host, nullptr));
	}
	CK(cudaStreamEndCapture(s, &g));
	return g;
}

static void fact_capture_order(unsigned *a, unsigned *b)
{
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraph_t g1 = capture_chain(s, a, b), g2 = capture_chain(s, a, b), gc;
	std::vector<CUgraphNode> n1 = nodes_of(g1), n2 = nodes_of(g2);
	std::string t1 = types_of(n1), t2 = types_of(n2);
	printf("fact=capture_order captured=%s listed=%s same=%d\n", CAPTURED, t1.c_str(),
	       t1 == CAPTURED);
	printf("fact=capture_order_second listed=%s same_as_first=%d\n", t2.c_str(), t2 == t1);
	CU(cuGraphClone(&gc, g1));
	std::vector<CUgraphNode> nc = nodes_of(gc);
	std::string tc = types_of(nc);
	bool positions = nc.size() == n1.size();
	for (size_t i = 0; positions && i < n1.size(); i++) {
		CUgraphNode x;
		CU(cuGraphNodeFindInClone(&x, n1[i], gc));
		positions = x == nc[i];
	}
	printf("fact=clone_order listed=%s same_as_original=%d find_in_clone_same_positions=%d\n",
	       tc.c_str(), tc == t1, positions);

	// a fork: memset on s, kernel on a second stream after it, memcpy on s, joined
	cudaStream_t s2;
	cudaEvent_t fork, join;
	cudaGraph_t gf;
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaMemsetAsync(a, 1, 4096, s));
	CK(cudaEventRecord(fork, s));
	CK(cudaStreamWaitEvent(s2, fork, 0));
	probe_kernel<<<1, 32, 0, s2>>>(b);
	CK(cudaMemcpyAsync(b + 2048, a, 4096, cudaMemcpyDeviceToDevice, s));
	CK(cudaEventRecord(join, s2));
	CK(cudaStreamWaitEvent(s, join, 0));
	CK(cudaLaunchHostFunc(s, nop_host, nullptr));
	CK(cudaStreamEndCapture(s, &gf));
	printf("fact=capture_order_fork captured=memset,kernel(s2),memcpy,host listed=%s\n",
	       types_of(nodes_of(gf)).c_str());

	// built node by node: creation order memcpy, empty, kernel, memset, with edges that make
	// the topological order differ (memset -> kernel -> memcpy, empty a root)
	cudaGraph_t gb;
	CU(cuGraphCreate(&gb, 0));
	std::vector<CUgraphNode> made = build_mixed(gb, a, b);
	std::vector<CUgraphNode> listed = nodes_of(gb);
	printf("fact=add_order created=%s listed=%s same_handles=%d\n", types_of(made).c_str(),
	       types_of(listed).c_str(), listed == made);
	size_t ne = 0;
	CU(cuGraphGetEdges(gb, nullptr, nullptr, nullptr, &ne));
	std::vector<CUgraphNode> from(ne), to(ne);
	CU(cuGraphGetEdges(gb, from.data(), to.data(), nullptr, &ne));
	std::string edges;
	for (size_t i = 0; i < ne; i++) {
		char buf[32];
		int f = -1, t = -1;
		for (size_t k = 0; k < made.size(); k++) {
			f = made[k] == from[i] ? (int)k : f;
			t = made[k] == to[i] ? (int)k : t;
		}
		snprintf(buf, sizeof(buf), "%s%d->%d", i ? "," : "", f, t);
		edges += buf;
	}
	printf("fact=edge_order added=3->2,2->0,1->0 listed=%s\n", edges.c_str());
	size_t nd = 0;
	CU(cuGraphNodeGetDependencies(made[0], nullptr, nullptr, &nd));
	std::vector<CUgraphNode> deps(nd);
	CU(cuGraphNodeGetDependencies(made[0], deps.data(), nullptr, &nd));
	printf("fact=dependency_order added=2,1 listed=%s\n",
	       nd == 2 ? (deps[0] == made[2] ? "2,1" : "1,2") : "?");
	std::vector<CUgraphNode> roots(4);
	size_t nr = 4;
	CU(cuGraphGetRootNodes(gb, roots.data(), &nr));
	roots.resize(nr);
	printf("fact=root_order created=1,3 listed=%s\n",
	       nr == 2 ? (roots[0] == made[1] ? "1,3" : "3,1") : "?");

	CK(cudaGraphDestroy(g1));
	CK(cudaGraphDestroy(g2));
	CK(cudaGraphDestroy(gc));
	CK(cudaGraphDestroy(gf));
	CK(cudaGraphDestroy(gb));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaStreamDestroy(s2));
	CK(cudaStreamDestroy(s));
}

// (b) cuStreamBeginCaptureToGraph into the graph another stream is capturing into, with no
// dependencies or after that capture's last node
static void fact_capture_to_captured(unsigned *a, bool with_dep)
{
	cudaStream_t s1, s2;
	cudaStreamCaptureStatus st;
	cudaGraph_t g1 = nullptr, out1 = nullptr, out2 = nullptr;
	const cudaGraphNode_t *deps = nullptr;
	size_t nd = 0;

	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	probe_kernel<<<1, 32, 0, s1>>>(a);
	CK(cudaStreamGetCaptureInfo(s1, &st, nullptr, &g1, &deps, nullptr, &nd));
	CUgraphNode dep = nd ? (CUgraphNode)deps[0] : nullptr;
	CUresult r =
	    cuStreamBeginCaptureToGraph((CUstream)s2, (CUgraph)g1, with_dep ? &dep : nullptr,
					nullptr, with_dep ? 1 : 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
	int end2 = -1;
	if (r == CUDA_SUCCESS) {
		probe_kernel<<<1, 32, 0, s2>>>(a + 32);
		end2 = (int)cudaStreamEndCapture(s2, &out2);
	}
	(void)cudaGetLastError();
	probe_kernel<<<1, 32, 0, s1>>>(a + 64);
	cudaError_t end1 = cudaStreamEndCapture(s1, &out1);
	(void)cudaGetLastError();
	size_t nodes = 0;
	if (out1)
		CU(cuGraphGetNodes((CUgraph)out1, nullptr, &nodes));
	printf("fact=capture_to_graph_being_captured dependencies=%d ret=%d end_second=%d "
	       "second_graph_same=%d end_first=%d nodes=%zu\n",
	       with_dep ? 1 : 0, (int)r, end2, out2 ? out2 == g1 : -1, (int)end1, nodes);
	if (out1)
		CK(cudaGraphDestroy(out1));
	CK(cudaDeviceSynchronize());
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
}

// (c) the order of a child graph node's embedded graph, for a child built node by node and
// for a captured one
static void fact_child_order(unsigned *a, unsigned *b)
{
	cudaStream_t s;
	CUgraph child, parent, emb;
	CUgraphNode cn;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CU(cuGraphCreate(&child, 0));
	std::vector<CUgraphNode> made = build_mixed(child, a, b);
	CU(cuGraphCreate(&parent, 0));
	CU(cuGraphAddChildGraphNode(&cn, parent, nullptr, 0, child));
	CU(cuGraphChildGraphNodeGetGraph(cn, &emb));
	std::string tc = types_of(nodes_of(child)), te = types_of(nodes_of(emb));
	printf("fact=child_graph_order built child=%s embedded=%s same=%d\n", tc.c_str(),
	       te.c_str(), tc == te);

	cudaGraph_t cap = capture_chain(s, a, b);
	CUgraph parent2, emb2;
	CUgraphNode cn2;
	CU(cuGraphCreate(&parent2, 0));
	CU(cuGraphAddChildGraphNode(&cn2, parent2, nullptr, 0, (CUgraph)cap));
	CU(cuGraphChildGraphNodeGetGraph(cn2, &emb2));
	tc = types_of(nodes_of((CUgraph)cap));
	te = types_of(nodes_of(emb2));
	printf("fact=child_graph_order captured child=%s embedded=%s same=%d\n", tc.c_str(),
	       te.c_str(), tc == te);

	CU(cuGraphDestroy(parent));
	CU(cuGraphDestroy(parent2));
	CU(cuGraphDestroy(child));
	CK(cudaGraphDestroy(cap));
	CK(cudaStreamDestroy(s));
}

int main()
{
	static const cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal,
						      cudaStreamCaptureModeThreadLocal,
						      cudaStreamCaptureModeRelaxed};
	int drv = 0, rt = 0;

	/* a line at a time: what was found before a crash of the driver is kept */
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsigned *a, *b;

	CK(cudaSetDevice(0));
	CK(cudaFree(nullptr));
	CK(cudaDriverGetVersion(&drv));
	CK(cudaRuntimeGetVersion(&rt));
	printf("fact=versions driver=%d runtime=%d\n", drv, rt);
	for (bool blocking : {true, false})
		for (bool other : {false, true})
			for (cudaStreamCaptureMode m : modes)
				for (const probe_call &c : calls)
					probe_one(blocking, m, other, c);

	CK(cudaMalloc(&a, 1 << 16));
	CK(cudaMalloc(&b, 1 << 16));
	fact_capture_order(a, b);
	fact_capture_to_captured(a, false);
	/*
	 * With the first capture's last node as dependency, driver 580.159.04 (CUDA 13.0) crashes
	 * the process (SIGSEGV, seen on the H200 on 2026-11-27); without, it answers 401. Asked
	 * only with RGPU_PROBE_CRASH=1.
	 */
	if (getenv("RGPU_PROBE_CRASH"))
		fact_capture_to_captured(a, true);
	fact_child_order(a, b);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(a));
	CK(cudaFree(b));
	printf("capture_probe: done\n");
	return 0;
}
