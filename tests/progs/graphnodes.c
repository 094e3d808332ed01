/*
 * CUDA graphs built node by node through the driver API: kernel nodes with kernelParams and
 * with `extra`, memcpy nodes (CUDA_MEMCPY3D) host-to-device from pinned and pageable memory,
 * device-to-host into both, and a pitched 2D device-to-device copy at offsets; pitched memset
 * nodes of 1, 2 and 4-byte elements; a host node; a child graph (cuGraphChildGraphNodeGetGraph);
 * empty, event record and event wait nodes. Then the queries (nodes, roots, edges,
 * dependencies, types, parameters), changes to an executable graph (kernel, memset and memcpy
 * parameters, cuGraphNodeSetEnabled, cuGraphExecUpdate), clones, edges added and removed, a
 * node destroyed, and cuStreamBeginCaptureToGraph appending captured work to a graph built by
 * hand. Every launch's results are compared with the host's computation, every handle a query
 * returns with the one the add call returned. The output is the same natively and through rgpu
 * (tests/gpu/run.sh compares it line by line); error codes are printed by number.
 */
#include "common.h"

#define N 4096
#define BYTES (N * sizeof(unsigned))
#define MAXN 32

static CUcontext ctx;
static CUfunction f_fill, f_affine, f_spin;
static CUstream s;

/* ---- small helpers ------------------------------------------------------------------------ */

static unsigned fill_value(unsigned long long i, unsigned seed)
{
	return seed ^ (unsigned)(i * 2654435761u);
}

static void same_words(const char *what, const unsigned *got, const unsigned *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		EXPECT(got[i] == want[i], "%s: word %zu is %#x, want %#x", what, i, got[i],
		       want[i]);
	printf("%s: ok %zu words\n", what, n);
}

static void same_bytes(const char *what, const unsigned char *got, const unsigned char *want,
		       size_t n)
{
	for (size_t i = 0; i < n; i++)
		EXPECT(got[i] == want[i], "%s: byte %zu is %#x, want %#x", what, i, got[i],
		       want[i]);
	printf("%s: ok %zu bytes\n", what, n);
}

static CUgraphNodeType type_of(CUgraphNode x)
{
	CUgraphNodeType t;
	CHECK(cuGraphNodeGetType(x, &t));
	return t;
}

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

/* The types of a list of nodes, space-separated, into buf. */
static const char *types_of(const CUgraphNode *v, size_t n, char *buf, size_t size)
{
	buf[0] = 0;
	for (size_t i = 0; i < n; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? " " : "",
			 type_name(type_of(v[i])));
	return buf;
}

static size_t nodes_of(CUgraph g, CUgraphNode *v)
{
	size_t n = 0;
	CHECK(cuGraphGetNodes(g, NULL, &n));
	EXPECT(n <= MAXN, "%zu nodes", n);
	if (n)
		CHECK(cuGraphGetNodes(g, v, &n));
	return n;
}

static size_t roots_of(CUgraph g, CUgraphNode *v)
{
	size_t n = 0;
	CHECK(cuGraphGetRootNodes(g, NULL, &n));
	EXPECT(n <= MAXN, "%zu roots", n);
	if (n)
		CHECK(cuGraphGetRootNodes(g, v, &n));
	return n;
}

static size_t edges_of(CUgraph g, CUgraphNode *from, CUgraphNode *to)
{
	size_t n = 0;
	CHECK(cuGraphGetEdges(g, NULL, NULL, NULL, &n));
	EXPECT(n <= MAXN, "%zu edges", n);
	if (n && from)
		CHECK(cuGraphGetEdges(g, from, to, NULL, &n));
	return n;
}

static size_t deps_of(CUgraphNode x, CUgraphNode *v)
{
	size_t n = 0;
	CHECK(cuGraphNodeGetDependencies(x, NULL, NULL, &n));
	EXPECT(n <= MAXN, "%zu dependencies", n);
	if (n)
		CHECK(cuGraphNodeGetDependencies(x, v, NULL, &n));
	return n;
}

static size_t dependents_of(CUgraphNode x, CUgraphNode *v)
{
	size_t n = 0;
	CHECK(cuGraphNodeGetDependentNodes(x, NULL, NULL, &n));
	EXPECT(n <= MAXN, "%zu dependent nodes", n);
	if (n)
		CHECK(cuGraphNodeGetDependentNodes(x, v, NULL, &n));
	return n;
}

/* The position of x in known[0..n), or -1. */
static int index_of(CUgraphNode x, const CUgraphNode *known, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (known[i] == x)
			return (int)i;
	return -1;
}

/* got[0..n) must be exactly want[0..n), in that order. */
static void same_handles(const char *what, const CUgraphNode *got, size_t ngot,
			 const CUgraphNode *want, size_t nwant)
{
	EXPECT(ngot == nwant, "%s: %zu nodes, want %zu", what, ngot, nwant);
	for (size_t i = 0; i < ngot; i++)
		EXPECT(got[i] == want[i], "%s: node %zu is not the add call's node %zu", what, i,
		       i);
	printf("%s: %zu, the add calls' handles in creation order\n", what, ngot);
}

/* got[0..n) must be want[0..n) in any order (the driver lists roots in an order of its own). */
static void same_members(const char *what, const CUgraphNode *got, size_t ngot,
			 const CUgraphNode *want, size_t nwant)
{
	EXPECT(ngot == nwant, "%s: %zu nodes, want %zu", what, ngot, nwant);
	for (size_t i = 0; i < ngot; i++)
		EXPECT(index_of(got[i], want, nwant) >= 0, "%s: node %zu is not expected", what,
		       i);
	for (size_t i = 0; i < nwant; i++)
		EXPECT(index_of(want[i], got, ngot) >= 0, "%s: node %zu is missing", what, i);
	printf("%s: %zu, the nodes expected\n", what, ngot);
}

/* got[0..n) must be the nodes known[want[0]], known[want[1]], ... in any order. */
static void same_set(const char *what, const CUgraphNode *got, size_t ngot,
		     const CUgraphNode *known, size_t nknown, const int *want, size_t nwant)
{
	unsigned long long seen = 0, wanted = 0;

	EXPECT(ngot == nwant, "%s: %zu nodes, want %zu", what, ngot, nwant);
	for (size_t i = 0; i < nwant; i++)
		wanted |= 1ull << want[i];
	for (size_t i = 0; i < ngot; i++) {
		int k = index_of(got[i], known, nknown);
		EXPECT(k >= 0, "%s: node %zu is no node added", what, i);
		seen |= 1ull << k;
	}
	EXPECT(seen == wanted, "%s: not the expected nodes", what);
	printf("%s: %zu\n", what, ngot);
}

/* A kernel node's parameters over N threads (16 blocks of 256). */
static CUDA_KERNEL_NODE_PARAMS kparams(CUfunction f, void **args, void **extra)
{
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	p.func = f;
	p.gridDimX = N / 256;
	p.gridDimY = p.gridDimZ = 1;
	p.blockDimX = 256;
	p.blockDimY = p.blockDimZ = 1;
	p.kernelParams = args;
	p.extra = extra;
	return p;
}

/* affine_u32(x, mul, add, n) as kernelParams: the values live in the struct */
struct affine {
	CUdeviceptr x;
	unsigned mul, add;
	unsigned long long n;
	void *args[4];
};

static CUDA_KERNEL_NODE_PARAMS affine_params(struct affine *a, CUdeviceptr x, unsigned mul,
					     unsigned add)
{
	a->x = x;
	a->mul = mul;
	a->add = add;
	a->n = N;
	a->args[0] = &a->x;
	a->args[1] = &a->mul;
	a->args[2] = &a->add;
	a->args[3] = &a->n;
	return kparams(f_affine, a->args, NULL);
}

/* affine_u32 through `extra`: the argument buffer laid out as the kernel's parameters */
struct affine_buf {
	CUdeviceptr x;	      /* offset 0 */
	unsigned mul, add;    /* 8, 12 */
	unsigned long long n; /* 16 */
};
struct affine_extra {
	struct affine_buf buf;
	size_t size;
	void *extra[5];
};

static CUDA_KERNEL_NODE_PARAMS affine_extra_params(struct affine_extra *a, CUdeviceptr x,
						   unsigned mul, unsigned add)
{
	a->buf.x = x;
	a->buf.mul = mul;
	a->buf.add = add;
	a->buf.n = N;
	a->size = sizeof(a->buf);
	a->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
	a->extra[1] = &a->buf;
	a->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
	a->extra[3] = &a->size;
	a->extra[4] = CU_LAUNCH_PARAM_END;
	return kparams(f_affine, NULL, a->extra);
}

static CUDA_KERNEL_NODE_PARAMS fill_params(CUdeviceptr *x, unsigned *seed, unsigned long long *n,
					   void **args)
{
	args[0] = x;
	args[1] = seed;
	args[2] = n;
	return kparams(f_fill, args, NULL);
}

/* A linear copy of `bytes` between host and device memory (either way) or device and device. */
static CUDA_MEMCPY3D linear_copy(CUmemorytype dt, void *dh, CUdeviceptr dd, CUmemorytype st,
				 const void *sh, CUdeviceptr sd, size_t bytes)
{
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = st;
	c.srcHost = sh;
	c.srcDevice = sd;
	c.dstMemoryType = dt;
	c.dstHost = dh;
	c.dstDevice = dd;
	c.WidthInBytes = bytes;
	c.Height = 1;
	c.Depth = 1;
	return c;
}

static CUDA_MEMSET_NODE_PARAMS memset_params(CUdeviceptr dst, size_t pitch, unsigned value,
					     unsigned elem, size_t width, size_t height)
{
	CUDA_MEMSET_NODE_PARAMS m;
	memset(&m, 0, sizeof(m));
	m.dst = dst;
	m.pitch = pitch;
	m.value = value;
	m.elementSize = elem;
	m.width = width;
	m.height = height;
	return m;
}

/* A call that must fail: its code printed by number, the native run's line being the reference
 * the rgpu run must reproduce (the documentation names no exact code for these). */
static void expect_failure(const char *what, CUresult got)
{
	printf("%s: error %d\n", what, (int)got);
	EXPECT(got != CUDA_SUCCESS, "%s succeeded", what);
}

/* ---- host functions ------------------------------------------------------------------------ */

static int ticks;

static void CUDA_CB tick(void *arg)
{
	++*(int *)arg;
}

static char order_log[64];
static int order_n;

static void CUDA_CB log_push(void *arg)
{
	if (order_n < (int)sizeof(order_log) - 1)
		order_log[order_n++] = *(const char *)arg;
}

/* ---- 1: one graph of every basic kind of node ------------------------------------------------ */

/* The three pitched memsets: element size, value, width in elements; 5 rows from byte 8 of
 * a 6-row allocation filled with 0xCD first */
#define MS_ROWS 6
#define MS_SET_ROWS 5
#define MS_OFF 8
static const struct {
	unsigned elem, value;
	size_t width;
} ms_def[3] = {{1, 0xA7, 301}, {2, 0xBEEF, 150}, {4, 0x12345678, 75}};

/* The 2D device-to-device copy: a box of 200 bytes x 4 rows from (16, 1) of S to (40, 2) of Q,
 * both 512 bytes wide and 8 rows high; Q filled with 0x11 first */
#define CP_W 512
#define CP_ROWS 8
#define CP_BOX_W 200
#define CP_BOX_H 4

struct big {
	CUgraph g, child;
	CUdeviceptr da, db, dc, ms[3], src2d, dst2d;
	size_t ms_pitch[3], src_pitch, dst_pitch;
	unsigned *in_pin, *in_alt, *in_page, *out_pin, *out_page, *out_c;
	unsigned char *img_src;
	/* in creation order */
	CUgraphNode hd_pin, hd_page, k_params, k_extra, dh_pin, dh_page, host, set[3], copy2d,
	    childnode, dh_child, join;
	CUgraphNode order[16];
	size_t norder;
};

/* what one launch computes from the current inputs and parameters */
struct big_expect {
	const unsigned *in_pin;
	unsigned k1_mul, k2_mul, k2_on, ms_value[3], child_mul;
};

static void big_build(struct big *b)
{
	CUDA_MEMCPY3D c;
	CUDA_MEMSET_NODE_PARAMS m;
	CUDA_KERNEL_NODE_PARAMS kp;
	struct affine a1;
	struct affine_extra a2;

	CHECK(cuMemAlloc(&b->da, BYTES));
	CHECK(cuMemAlloc(&b->db, BYTES));
	CHECK(cuMemAlloc(&b->dc, BYTES));
	for (int i = 0; i < 3; i++)
		CHECK(cuMemAllocPitch(&b->ms[i], &b->ms_pitch[i], 1024, MS_ROWS, 4));
	CHECK(cuMemAllocPitch(&b->src2d, &b->src_pitch, CP_W, CP_ROWS, 4));
	CHECK(cuMemAllocPitch(&b->dst2d, &b->dst_pitch, CP_W, CP_ROWS, 4));
	CHECK(cuMemAllocHost((void **)&b->in_pin, BYTES));
	CHECK(cuMemAllocHost((void **)&b->in_alt, BYTES));
	CHECK(cuMemAllocHost((void **)&b->out_pin, BYTES));
	CHECK(cuMemAllocHost((void **)&b->out_c, BYTES));
	b->in_page = malloc(BYTES);
	b->out_page = malloc(BYTES);
	b->img_src = malloc(b->src_pitch * CP_ROWS);
	EXPECT(b->in_page && b->out_page && b->img_src, "out of memory");

	CHECK(cuGraphCreate(&b->g, 0));
	/* the inputs: pinned and pageable host memory to the device */
	c = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, b->da, CU_MEMORYTYPE_HOST, b->in_pin, 0, BYTES);
	CHECK(cuGraphAddMemcpyNode(&b->hd_pin, b->g, NULL, 0, &c, ctx));
	c = linear_copy(CU_MEMORYTYPE_DEVICE, NULL, b->db, CU_MEMORYTYPE_HOST, b->in_page, 0,
			BYTES);
	CHECK(cuGraphAddMemcpyNode(&b->hd_page, b->g, NULL, 0, &c, ctx));
	/* a = a * 3 + 1 (kernelParams), b = b * 5 + 2 (extra) */
	kp = affine_params(&a1, b->da, 3, 1);
	CHECK(cuGraphAddKernelNode(&b->k_params, b->g, &b->hd_pin, 1, &kp));
	kp = affine_extra_params(&a2, b->db, 5, 2);
	CHECK(cuGraphAddKernelNode(&b->k_extra, b->g, &b->hd_page, 1, &kp));
	/* the results back, into pinned and pageable memory */
	c = linear_copy(CU_MEMORYTYPE_HOST, b->out_pin, 0, CU_MEMORYTYPE_DEVICE, NULL, b->da,
			BYTES);
	CHECK(cuGraphAddMemcpyNode(&b->dh_pin, b->g, &b->k_params, 1, &c, ctx));
	c = linear_copy(CU_MEMORYTYPE_HOST, b->out_page, 0, CU_MEMORYTYPE_DEVICE, NULL, b->db,
			BYTES);
	CHECK(cuGraphAddMemcpyNode(&b->dh_page, b->g, &b->k_extra, 1, &c, ctx));
	/* a host node after both kernels (it reads nothing the copies write) */
	CUgraphNode ks[2] = {b->k_params, b->k_extra};
	CUDA_HOST_NODE_PARAMS hp = {tick, &ticks};
	CHECK(cuGraphAddHostNode(&b->host, b->g, ks, 2, &hp));
	/* pitched memsets of 1, 2 and 4-byte elements (roots) */
	for (int i = 0; i < 3; i++) {
		m = memset_params(b->ms[i] + MS_OFF, b->ms_pitch[i], ms_def[i].value,
				  ms_def[i].elem, ms_def[i].width, MS_SET_ROWS);
		CHECK(cuGraphAddMemsetNode(&b->set[i], b->g, NULL, 0, &m, ctx));
	}
	/* a pitched 2D device-to-device copy at offsets (a root) */
	memset(&c, 0, sizeof(c));
	c.srcXInBytes = 16;
	c.srcY = 1;
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = b->src2d;
	c.srcPitch = b->src_pitch;
	c.dstXInBytes = 40;
	c.dstY = 2;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = b->dst2d;
	c.dstPitch = b->dst_pitch;
	c.WidthInBytes = CP_BOX_W;
	c.Height = CP_BOX_H;
	c.Depth = 1;
	CHECK(cuGraphAddMemcpyNode(&b->copy2d, b->g, NULL, 0, &c, ctx));
	/* a child graph: fill c, memset 100 words of it, c = c * 9 + 2; its result to pinned memory
	 */
	CUgraphNode cf, cm, ck;
	CUdeviceptr fx = b->dc;
	unsigned seed = 0xC0FFEEu;
	unsigned long long n = N;
	void *fargs[3];
	CHECK(cuGraphCreate(&b->child, 0));
	kp = fill_params(&fx, &seed, &n, fargs);
	CHECK(cuGraphAddKernelNode(&cf, b->child, NULL, 0, &kp));
	m = memset_params(b->dc + 64 * 4, 0, 7, 4, 100, 1);
	CHECK(cuGraphAddMemsetNode(&cm, b->child, &cf, 1, &m, ctx));
	kp = affine_params(&a1, b->dc, 9, 2);
	CHECK(cuGraphAddKernelNode(&ck, b->child, &cm, 1, &kp));
	CHECK(cuGraphAddChildGraphNode(&b->childnode, b->g, NULL, 0, b->child));
	c = linear_copy(CU_MEMORYTYPE_HOST, b->out_c, 0, CU_MEMORYTYPE_DEVICE, NULL, b->dc, BYTES);
	CHECK(cuGraphAddMemcpyNode(&b->dh_child, b->g, &b->childnode, 1, &c, ctx));
	/* everything joins in an empty node */
	CUgraphNode ends[4] = {b->dh_pin, b->dh_page, b->host, b->dh_child};
	CHECK(cuGraphAddEmptyNode(&b->join, b->g, ends, 4));

	CUgraphNode order[] = {b->hd_pin,  b->hd_page,	 b->k_params, b->k_extra, b->dh_pin,
			       b->dh_page, b->host,	 b->set[0],   b->set[1],  b->set[2],
			       b->copy2d,  b->childnode, b->dh_child, b->join};
	b->norder = sizeof(order) / sizeof(order[0]);
	memcpy(b->order, order, sizeof(order));
}

static void big_queries(struct big *b)
{
	CUgraphNode v[MAXN], w[MAXN];
	size_t n;
	char buf[256];

	n = nodes_of(b->g, v);
	same_handles("cuGraphGetNodes", v, n, b->order, b->norder);
	printf("node types: %s\n", types_of(v, n, buf, sizeof(buf)));
	EXPECT(strcmp(buf, "memcpy memcpy kernel kernel memcpy memcpy host memset memset memset "
			   "memcpy graph memcpy empty") == 0,
	       "node types %s", buf);
	CUgraphNode roots[] = {b->hd_pin, b->hd_page, b->set[0],   b->set[1],
			       b->set[2], b->copy2d,  b->childnode};
	n = roots_of(b->g, v);
	same_members("cuGraphGetRootNodes", v, n, roots, 7);

	/* the edges as (from, to) creation indices, as a set */
	static const int want_edges[][2] = {{0, 2},   {1, 3},  {2, 4},	{3, 5},	 {2, 6},  {3, 6},
					    {11, 12}, {4, 13}, {5, 13}, {6, 13}, {12, 13}};
	size_t ne = edges_of(b->g, v, w), nwant = sizeof(want_edges) / sizeof(want_edges[0]);
	EXPECT(ne == nwant, "%zu edges, want %zu", ne, nwant);
	for (size_t i = 0; i < nwant; i++) {
		int found = 0;
		for (size_t j = 0; j < ne; j++)
			found += index_of(v[j], b->order, b->norder) == want_edges[i][0] &&
				 index_of(w[j], b->order, b->norder) == want_edges[i][1];
		EXPECT(found == 1, "edge %d -> %d found %d times", want_edges[i][0],
		       want_edges[i][1], found);
	}
	printf("cuGraphGetEdges: %zu\n", ne);

	static const int host_deps[] = {2, 3}, join_deps[] = {4, 5, 6, 12}, k1_next[] = {4, 6};
	n = deps_of(b->host, v);
	same_set("dependencies of the host node", v, n, b->order, b->norder, host_deps, 2);
	n = deps_of(b->join, v);
	same_set("dependencies of the join", v, n, b->order, b->norder, join_deps, 4);
	n = deps_of(b->copy2d, v);
	same_set("dependencies of a root", v, n, b->order, b->norder, NULL, 0);
	n = dependents_of(b->k_params, v);
	same_set("dependent nodes of the kernelParams kernel", v, n, b->order, b->norder, k1_next,
		 2);
	n = dependents_of(b->join, v);
	same_set("dependent nodes of the join", v, n, b->order, b->norder, NULL, 0);

	/* kernel node parameters as added: kernelParams values, and the extra node's function */
	CUDA_KERNEL_NODE_PARAMS kp;
	CHECK(cuGraphKernelNodeGetParams(b->k_params, &kp));
	EXPECT(kp.func == f_affine && kp.gridDimX == N / 256 && kp.gridDimY == 1 &&
		   kp.gridDimZ == 1 && kp.blockDimX == 256 && kp.blockDimY == 1 &&
		   kp.blockDimZ == 1 && kp.sharedMemBytes == 0 && kp.kernelParams,
	       "kernel node parameters differ");
	EXPECT(*(CUdeviceptr *)kp.kernelParams[0] == b->da &&
		   *(unsigned *)kp.kernelParams[1] == 3 && *(unsigned *)kp.kernelParams[2] == 1 &&
		   *(unsigned long long *)kp.kernelParams[3] == N,
	       "kernel node arguments differ");
	printf("cuGraphKernelNodeGetParams: func, dims and 4 arguments as added\n");
	CHECK(cuGraphKernelNodeGetParams(b->k_extra, &kp));
	EXPECT(kp.func == f_affine && kp.gridDimX == N / 256 && kp.blockDimX == 256,
	       "the extra kernel node's parameters differ");
	printf("cuGraphKernelNodeGetParams of the extra node: func and dims as added\n");

	CUDA_MEMSET_NODE_PARAMS m;
	CHECK(cuGraphMemsetNodeGetParams(b->set[1], &m));
	EXPECT(m.dst == b->ms[1] + MS_OFF && m.pitch == b->ms_pitch[1] && m.value == 0xBEEF &&
		   m.elementSize == 2 && m.width == 150 && m.height == MS_SET_ROWS,
	       "memset node parameters differ");
	printf("cuGraphMemsetNodeGetParams: as added\n");
	CUDA_MEMCPY3D c;
	CHECK(cuGraphMemcpyNodeGetParams(b->copy2d, &c));
	/* the addresses the box starts at, however the offsets are split from the pointers */
	EXPECT(c.srcDevice + c.srcY * c.srcPitch + c.srcXInBytes == b->src2d + b->src_pitch + 16 &&
		   c.srcPitch == b->src_pitch &&
		   c.dstDevice + c.dstY * c.dstPitch + c.dstXInBytes ==
		       b->dst2d + 2 * b->dst_pitch + 40 &&
		   c.dstPitch == b->dst_pitch && c.WidthInBytes == CP_BOX_W &&
		   c.Height == CP_BOX_H && c.Depth == 1,
	       "memcpy node parameters differ");
	printf("cuGraphMemcpyNodeGetParams of the 2D copy: as added\n");
	CUDA_HOST_NODE_PARAMS hp;
	CHECK(cuGraphHostNodeGetParams(b->host, &hp));
	EXPECT(hp.fn == tick && hp.userData == &ticks, "host node parameters differ");
	printf("cuGraphHostNodeGetParams: as added\n");

	/* the child node holds its own copy of the child graph: fill -> memset -> kernel (found by
	 * its edges, whatever order the copy lists its nodes in) */
	CUgraph emb;
	CUgraphNode chain[3];
	CHECK(cuGraphChildGraphNodeGetGraph(b->childnode, &emb));
	EXPECT(emb != b->child, "the child node holds the child graph itself");
	n = roots_of(emb, v);
	EXPECT(n == 1, "the embedded graph has %zu roots", n);
	chain[0] = v[0];
	for (int i = 1; i < 3; i++) {
		n = dependents_of(chain[i - 1], v);
		EXPECT(n == 1, "embedded node %d has %zu dependent nodes", i - 1, n);
		chain[i] = v[0];
	}
	EXPECT(dependents_of(chain[2], v) == 0 && nodes_of(emb, v) == 3,
	       "the embedded graph has more nodes");
	printf("cuGraphChildGraphNodeGetGraph: a copy, %s\n", types_of(chain, 3, buf, sizeof(buf)));
	EXPECT(strcmp(buf, "kernel memset kernel") == 0, "not the child's nodes");
	/* a change to the embedded graph's last kernel (c * 10 + 2) shows in the parent's launch */
	struct affine a;
	kp = affine_params(&a, b->dc, 10, 2);
	CHECK(cuGraphKernelNodeSetParams(chain[2], &kp));
	/* while the child graph itself keeps its kernel's * 9 */
	n = nodes_of(b->child, w);
	CHECK(cuGraphKernelNodeGetParams(w[2], &kp));
	EXPECT(n == 3 && *(unsigned *)kp.kernelParams[1] == 9, "the child graph changed too");
	printf("the embedded graph's kernel changed, the child graph's kept\n");
}

/* New inputs for one launch; outputs and the memset and copy targets reset. */
static void big_inputs(struct big *b, unsigned seed)
{
	for (unsigned i = 0; i < N; i++) {
		b->in_pin[i] = pattern32(i, seed);
		b->in_alt[i] = pattern32(i, seed + 1);
		b->in_page[i] = pattern32(i, seed + 2);
		b->out_pin[i] = b->out_page[i] = b->out_c[i] = 0xEEEEEEEEu;
	}
	for (int i = 0; i < 3; i++)
		CHECK(cuMemsetD8(b->ms[i], 0xCD, b->ms_pitch[i] * MS_ROWS));
	for (size_t i = 0; i < b->src_pitch * CP_ROWS; i++)
		b->img_src[i] = (unsigned char)(pattern32((unsigned)i, seed + 3) >> 24);
	CHECK(cuMemcpyHtoD(b->src2d, b->img_src, b->src_pitch * CP_ROWS));
	CHECK(cuMemsetD8(b->dst2d, 0x11, b->dst_pitch * CP_ROWS));
	CHECK(cuCtxSynchronize());
}

static void big_launch(struct big *b, CUgraphExec exec, const char *name,
		       const struct big_expect *e)
{
	static unsigned want[N];
	unsigned char *img;
	char what[160];
	int before = ticks;

	CHECK(cuGraphLaunch(exec, s));
	CHECK(cuStreamSynchronize(s));
	for (unsigned i = 0; i < N; i++)
		want[i] = e->in_pin[i] * e->k1_mul + 1u;
	snprintf(what, sizeof(what), "%s: kernelParams kernel, pinned in and out", name);
	same_words(what, b->out_pin, want, N);
	for (unsigned i = 0; i < N; i++)
		want[i] = e->k2_on ? b->in_page[i] * e->k2_mul + 2u : b->in_page[i];
	snprintf(what, sizeof(what), "%s: extra kernel, pageable in and out", name);
	same_words(what, b->out_page, want, N);
	for (unsigned i = 0; i < N; i++) {
		unsigned v = i >= 64 && i < 164 ? 7u : fill_value(i, 0xC0FFEEu);
		want[i] = v * e->child_mul + 2u;
	}
	snprintf(what, sizeof(what), "%s: the child graph", name);
	same_words(what, b->out_c, want, N);
	snprintf(what, sizeof(what), "%s: the host node ran once", name);
	EXPECT(ticks == before + 1, "%s: %d times", what, ticks - before);
	printf("%s: ok\n", what);

	/* every byte of the three pitched memset targets */
	for (int k = 0; k < 3; k++) {
		size_t pitch = b->ms_pitch[k], size = pitch * MS_ROWS;
		unsigned char *exp = malloc(size);
		img = malloc(size);
		EXPECT(img && exp, "out of memory");
		memset(exp, 0xCD, size);
		for (size_t y = 0; y < MS_SET_ROWS; y++)
			for (size_t x = 0; x < ms_def[k].width; x++)
				for (unsigned j = 0; j < ms_def[k].elem; j++)
					exp[y * pitch + MS_OFF + x * ms_def[k].elem + j] =
					    (unsigned char)(e->ms_value[k] >> (8 * j));
		CHECK(cuMemcpyDtoH(img, b->ms[k], size));
		snprintf(what, sizeof(what), "%s: pitched memset of %u-byte elements", name,
			 ms_def[k].elem);
		same_bytes(what, img, exp, size);
		free(img);
		free(exp);
	}
	/* every byte of the 2D copy's target */
	size_t size = b->dst_pitch * CP_ROWS;
	unsigned char *exp = malloc(size);
	img = malloc(size);
	EXPECT(img && exp, "out of memory");
	memset(exp, 0x11, size);
	for (size_t y = 0; y < CP_BOX_H; y++)
		memcpy(exp + (2 + y) * b->dst_pitch + 40, b->img_src + (1 + y) * b->src_pitch + 16,
		       CP_BOX_W);
	CHECK(cuMemcpyDtoH(img, b->dst2d, size));
	snprintf(what, sizeof(what), "%s: pitched 2D device-to-device copy", name);
	same_bytes(what, img, exp, size);
	free(img);
	free(exp);
}

static void section_big(void)
{
	struct big b;
	struct big_expect e = {0};
	CUgraphExec exec;
	CUgraphExecUpdateResultInfo info;
	CUDA_KERNEL_NODE_PARAMS kp;
	struct affine a;
	CUresult r;

	memset(&b, 0, sizeof(b));
	big_build(&b);
	big_queries(&b);
	CHECK(cuGraphInstantiate(&exec, b.g, 0));

	/* launches 1 and 2: new host inputs each time */
	e = (struct big_expect){b.in_pin, 3, 5, 1, {0xA7, 0xBEEF, 0x12345678}, 10};
	big_inputs(&b, 100);
	big_launch(&b, exec, "launch 1", &e);
	big_inputs(&b, 200);
	big_launch(&b, exec, "launch 2 (new inputs)", &e);

	/* launch 3: the executable graph's kernel, memset and memcpy parameters changed */
	kp = affine_params(&a, b.da, 6, 1);
	CHECK(cuGraphExecKernelNodeSetParams(exec, b.k_params, &kp));
	CUDA_MEMSET_NODE_PARAMS m =
	    memset_params(b.ms[1] + MS_OFF, b.ms_pitch[1], 0x4242, 2, 150, MS_SET_ROWS);
	CHECK(cuGraphExecMemsetNodeSetParams(exec, b.set[1], &m, ctx));
	CUDA_MEMCPY3D c =
	    linear_copy(CU_MEMORYTYPE_DEVICE, NULL, b.da, CU_MEMORYTYPE_HOST, b.in_alt, 0, BYTES);
	CHECK(cuGraphExecMemcpyNodeSetParams(exec, b.hd_pin, &c, ctx));
	big_inputs(&b, 300);
	e.in_pin = b.in_alt;
	e.k1_mul = 6;
	e.ms_value[1] = 0x4242;
	big_launch(&b, exec, "launch 3 (exec kernel, memset and memcpy params set)", &e);
	CHECK(cuGraphKernelNodeGetParams(b.k_params, &kp));
	EXPECT(*(unsigned *)kp.kernelParams[1] == 3, "the exec's change reached the graph");
	printf("the graph's own kernel node still multiplies by 3\n");

	/* launch 4: the extra kernel disabled; launch 5: enabled again */
	unsigned on = 7;
	CHECK(cuGraphNodeSetEnabled(exec, b.k_extra, 0));
	CHECK(cuGraphNodeGetEnabled(exec, b.k_extra, &on));
	printf("cuGraphNodeGetEnabled after disabling: %u\n", on);
	EXPECT(on == 0, "still enabled");
	big_inputs(&b, 400);
	e.k2_on = 0;
	big_launch(&b, exec, "launch 4 (extra kernel disabled)", &e);
	CHECK(cuGraphNodeSetEnabled(exec, b.k_extra, 1));
	CHECK(cuGraphNodeGetEnabled(exec, b.k_extra, &on));
	printf("cuGraphNodeGetEnabled after enabling: %u\n", on);
	EXPECT(on == 1, "still disabled");
	big_inputs(&b, 500);
	e.k2_on = 1;
	big_launch(&b, exec, "launch 5 (enabled again)", &e);

	/* launch 6: a kernel argument changed in the graph, then cuGraphExecUpdate: the executable
	 * graph takes all the graph's parameters again (memset 0xBEEF, the pinned input) */
	kp = affine_params(&a, b.da, 7, 1);
	CHECK(cuGraphKernelNodeSetParams(b.k_params, &kp));
	memset(&info, 0x55, sizeof(info));
	r = cuGraphExecUpdate(exec, b.g, &info);
	printf("cuGraphExecUpdate, a kernel argument changed: error %d result %d\n", (int)r,
	       (int)info.result);
	EXPECT(r == CUDA_SUCCESS && info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update failed");
	big_inputs(&b, 600);
	e.in_pin = b.in_pin;
	e.k1_mul = 7;
	e.ms_value[1] = 0xBEEF;
	big_launch(&b, exec, "launch 6 (after cuGraphExecUpdate)", &e);

	/* another topology is refused and the executable graph is left as it was */
	CUgraph other;
	CUgraphNode extra;
	CHECK(cuGraphClone(&other, b.g));
	CHECK(cuGraphAddEmptyNode(&extra, other, NULL, 0));
	memset(&info, 0x55, sizeof(info));
	r = cuGraphExecUpdate(exec, other, &info);
	printf("cuGraphExecUpdate, a node added: error %d result %d\n", (int)r, (int)info.result);
	EXPECT(r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE &&
		   info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED,
	       "not refused as a topology change");
	big_inputs(&b, 700);
	big_launch(&b, exec, "launch 7 (after the refused update)", &e);

	/* the clone: as many nodes, each original's counterpart a different one of them and of its
	 * type; a change to the clone shows in the clone's launch only */
	CUgraph clone;
	CUgraphNode v[MAXN], x, found[MAXN];
	CHECK(cuGraphClone(&clone, b.g));
	size_t n = nodes_of(clone, v);
	EXPECT(n == b.norder, "the clone has %zu nodes", n);
	for (size_t i = 0; i < n; i++) {
		CHECK(cuGraphNodeFindInClone(&x, b.order[i], clone));
		EXPECT(index_of(x, v, n) >= 0 && index_of(x, found, i) < 0 &&
			   type_of(x) == type_of(b.order[i]),
		       "clone node %zu", i);
		found[i] = x;
	}
	printf("cuGraphClone: %zu nodes, cuGraphNodeFindInClone finds each\n", n);
	CHECK(cuGraphNodeFindInClone(&x, b.k_params, clone));
	kp = affine_params(&a, b.da, 11, 1);
	CHECK(cuGraphKernelNodeSetParams(x, &kp));
	CUgraphExec cexec;
	CHECK(cuGraphInstantiate(&cexec, clone, 0));
	big_inputs(&b, 800);
	e.k1_mul = 11;
	big_launch(&b, cexec, "the clone's launch (its kernel node changed)", &e);
	big_inputs(&b, 900);
	e.k1_mul = 7;
	big_launch(&b, exec, "launch 8 (the original, unchanged by the clone)", &e);
	expect_failure("cuGraphNodeFindInClone of a node the original does not have",
		       cuGraphNodeFindInClone(&x, extra, clone));

	CHECK(cuGraphExecDestroy(cexec));
	CHECK(cuGraphDestroy(clone));
	CHECK(cuGraphDestroy(other));
	CHECK(cuGraphExecDestroy(exec));
	CHECK(cuGraphDestroy(b.g));
	CHECK(cuGraphDestroy(b.child));
	CUdeviceptr dev[] = {b.da, b.db, b.dc, b.ms[0], b.ms[1], b.ms[2], b.src2d, b.dst2d};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		CHECK(cuMemFree(dev[i]));
	void *pinned[] = {b.in_pin, b.in_alt, b.out_pin, b.out_c};
	for (size_t i = 0; i < 4; i++)
		CHECK(cuMemFreeHost(pinned[i]));
	free(b.in_page);
	free(b.out_page);
	free(b.img_src);
}

/* ---- 2: event record and wait nodes -------------------------------------------------------- */

static void section_events(void)
{
	CUdeviceptr dp, dq, dr;
	CUstream producer, consumer;
	CUevent ev_in, ev_out, got;
	CUgraph g;
	CUgraphNode wait, copy, rec;
	CUgraphExec exec;
	static unsigned hq[N], hr[N], wq[N], wr[N];
	struct affine a;

	CHECK(cuMemAlloc(&dp, BYTES));
	CHECK(cuMemAlloc(&dq, BYTES));
	CHECK(cuMemAlloc(&dr, BYTES));
	CHECK(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
	CHECK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev_in, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&ev_out, CU_EVENT_DISABLE_TIMING));

	/* wait for ev_in -> copy p to q -> record ev_out */
	CHECK(cuGraphCreate(&g, 0));
	CHECK(cuGraphAddEventWaitNode(&wait, g, NULL, 0, ev_in));
	CUDA_MEMCPY3D c =
	    linear_copy(CU_MEMORYTYPE_DEVICE, NULL, dq, CU_MEMORYTYPE_DEVICE, NULL, dp, BYTES);
	CHECK(cuGraphAddMemcpyNode(&copy, g, &wait, 1, &c, ctx));
	CHECK(cuGraphAddEventRecordNode(&rec, g, &copy, 1, ev_out));
	CHECK(cuGraphEventWaitNodeGetEvent(wait, &got));
	EXPECT(got == ev_in, "the wait node's event");
	CHECK(cuGraphEventRecordNodeGetEvent(rec, &got));
	EXPECT(got == ev_out, "the record node's event");
	printf("cuGraphEventWaitNodeGetEvent, cuGraphEventRecordNodeGetEvent: the events added\n");
	CHECK(cuGraphInstantiate(&exec, g, 0));

	for (int launch = 1; launch <= 2; launch++) {
		unsigned seed = 0x51u * (unsigned)launch;
		unsigned long long ns = 20000000ull, n = N;
		void *sargs[] = {&ns}, *fargs[] = {&dp, &seed, &n};

		CHECK(cuMemsetD32(dp, 0, N));
		CHECK(cuMemsetD32(dq, 0, N));
		CHECK(cuMemsetD32(dr, 0, N));
		CHECK(cuCtxSynchronize());
		/* the producer writes p only after 20 ms; the graph waits for it, the consumer
		 * for the graph */
		CHECK(cuLaunchKernel(f_spin, 1, 1, 1, 1, 1, 1, 0, producer, sargs, NULL));
		CHECK(cuLaunchKernel(f_fill, N / 256, 1, 1, 256, 1, 1, 0, producer, fargs, NULL));
		CHECK(cuEventRecord(ev_in, producer));
		CHECK(cuGraphLaunch(exec, s));
		CHECK(cuStreamWaitEvent(consumer, ev_out, 0));
		CHECK(cuMemcpyDtoDAsync(dr, dq, BYTES, consumer));
		CUDA_KERNEL_NODE_PARAMS kp = affine_params(&a, dr, 5, 2);
		CHECK(cuLaunchKernel(f_affine, kp.gridDimX, 1, 1, kp.blockDimX, 1, 1, 0, consumer,
				     kp.kernelParams, NULL));
		CHECK(cuMemcpyDtoHAsync(hr, dr, BYTES, consumer));
		CHECK(cuStreamSynchronize(consumer));
		CHECK(cuEventSynchronize(ev_out));
		CHECK(cuMemcpyDtoHAsync(hq, dq, BYTES, consumer));
		CHECK(cuStreamSynchronize(consumer));
		for (unsigned i = 0; i < N; i++) {
			wq[i] = fill_value(i, seed);
			wr[i] = wq[i] * 5u + 2u;
		}
		char what[128];
		snprintf(what, sizeof(what),
			 "event nodes, launch %d: the graph's copy waited for the producer",
			 launch);
		same_words(what, hq, wq, N);
		snprintf(what, sizeof(what),
			 "event nodes, launch %d: a stream waiting on the recorded event saw it",
			 launch);
		same_words(what, hr, wr, N);
		CHECK(cuCtxSynchronize());
	}
	CHECK(cuGraphExecDestroy(exec));
	CHECK(cuGraphDestroy(g));
	CHECK(cuEventDestroy(ev_in));
	CHECK(cuEventDestroy(ev_out));
	CHECK(cuStreamDestroy(producer));
	CHECK(cuStreamDestroy(consumer));
	CHECK(cuMemFree(dp));
	CHECK(cuMemFree(dq));
	CHECK(cuMemFree(dr));
}

/* ---- 3: edges added and removed, a node destroyed ------------------------------------------- */

/* Instantiate g, launch it over a patterned x, and compare with the steps (mul, add) in order. */
static void chain_launch(CUgraph g, CUdeviceptr x, const char *what, const unsigned (*steps)[2],
			 int nsteps)
{
	static unsigned in[N], got[N], want[N];
	CUgraphExec exec;

	for (unsigned i = 0; i < N; i++)
		in[i] = want[i] = pattern32(i, 0xC4A1u);
	for (int k = 0; k < nsteps; k++)
		for (unsigned i = 0; i < N; i++)
			want[i] = want[i] * steps[k][0] + steps[k][1];
	CHECK(cuMemcpyHtoD(x, in, BYTES));
	CHECK(cuGraphInstantiate(&exec, g, 0));
	CHECK(cuGraphLaunch(exec, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemcpyDtoH(got, x, BYTES));
	same_words(what, got, want, N);
	CHECK(cuGraphExecDestroy(exec));
}

static void section_edges(void)
{
	CUdeviceptr x;
	CUgraph g;
	CUgraphNode k[3], v[MAXN];
	struct affine a;
	static const unsigned ab[][2] = {{3, 1}, {5, 2}, {7, 3}};
	size_t n;

	CHECK(cuMemAlloc(&x, BYTES));
	CHECK(cuGraphCreate(&g, 0));
	/* three in-place steps with no edges: ordered only by the edges added next */
	for (int i = 0; i < 3; i++) {
		CUDA_KERNEL_NODE_PARAMS kp = affine_params(&a, x, ab[i][0], ab[i][1]);
		CHECK(cuGraphAddKernelNode(&k[i], g, NULL, 0, &kp));
	}
	printf("three unconnected kernel nodes: %zu roots, %zu edges\n", roots_of(g, v),
	       edges_of(g, NULL, NULL));

	CUgraphNode f1[2] = {k[0], k[1]}, t1[2] = {k[1], k[2]};
	CHECK(cuGraphAddDependencies(g, f1, t1, NULL, 2));
	n = roots_of(g, v);
	same_handles("cuGraphAddDependencies k1->k2->k3, roots", v, n, k, 1);
	static const int k3_deps[] = {1};
	n = deps_of(k[2], v);
	same_set("dependencies of k3", v, n, k, 3, k3_deps, 1);
	const unsigned fwd[][2] = {{3, 1}, {5, 2}, {7, 3}};
	chain_launch(g, x, "chain k1 k2 k3", fwd, 3);

	CHECK(cuGraphRemoveDependencies(g, f1, t1, NULL, 2));
	printf("cuGraphRemoveDependencies of both edges: %zu edges\n", edges_of(g, NULL, NULL));
	CUgraphNode f2[2] = {k[2], k[1]}, t2[2] = {k[1], k[0]};
	CHECK(cuGraphAddDependencies(g, f2, t2, NULL, 2));
	n = roots_of(g, v);
	same_handles("reversed chain k3->k2->k1, roots", v, n, &k[2], 1);
	const unsigned back[][2] = {{7, 3}, {5, 2}, {3, 1}};
	chain_launch(g, x, "chain k3 k2 k1", back, 3);
	expect_failure("cuGraphRemoveDependencies of an edge that is not there",
		       cuGraphRemoveDependencies(g, &k[0], &k[2], NULL, 1));

	CHECK(cuGraphDestroyNode(k[1]));
	n = nodes_of(g, v);
	printf("cuGraphDestroyNode of the middle node: %zu nodes, %zu edges\n", n,
	       edges_of(g, NULL, NULL));
	CUgraphNode left[2] = {k[0], k[2]};
	same_handles("nodes left", v, n, left, 2);
	CHECK(cuGraphAddDependencies(g, &k[2], &k[0], NULL, 1));
	const unsigned two[][2] = {{7, 3}, {3, 1}};
	chain_launch(g, x, "chain k3 k1", two, 2);

	CHECK(cuGraphDestroy(g));
	CHECK(cuMemFree(x));
}

/* ---- 4: captured work appended to a graph built by hand ------------------------------------- */

static void launch_affine(CUdeviceptr x, unsigned mul, unsigned add)
{
	struct affine a;
	CUDA_KERNEL_NODE_PARAMS kp = affine_params(&a, x, mul, add);
	CHECK(cuLaunchKernel(f_affine, kp.gridDimX, 1, 1, kp.blockDimX, 1, 1, 0, s, kp.kernelParams,
			     NULL));
}

static void section_capture_to_graph(void)
{
	CUdeviceptr x;
	CUgraph g, got;
	CUgraphNode fill, v[MAXN], w[MAXN];
	CUgraphExec exec;
	CUstreamCaptureStatus st;
	static char a_mark = 'A', b_mark = 'B';
	static unsigned hx[N], want[N];
	unsigned seed = 0xFACE;
	unsigned long long n = N;
	void *fargs[3];
	size_t k;

	CHECK(cuMemAlloc(&x, BYTES));
	CHECK(cuGraphCreate(&g, 0));
	CUDA_KERNEL_NODE_PARAMS kp = fill_params(&x, &seed, &n, fargs);
	CHECK(cuGraphAddKernelNode(&fill, g, NULL, 0, &kp));

	/* first capture: after the fill node, x * 3 + 1, host function A, x * 5 + 2 */
	CHECK(cuStreamBeginCaptureToGraph(s, g, &fill, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
	launch_affine(x, 3, 1);
	CHECK(cuLaunchHostFunc(s, log_push, &a_mark));
	CUgraph cg = NULL;
	const CUgraphNode *deps = NULL;
	size_t nd = 0;
	CHECK(cuStreamGetCaptureInfo(s, &st, NULL, &cg, &deps, NULL, &nd));
	EXPECT(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && cg == g && nd == 1 &&
		   type_of(deps[0]) == CU_GRAPH_NODE_TYPE_HOST,
	       "capture info: status %d, %zu dependencies", (int)st, nd);
	printf("cuStreamGetCaptureInfo: capturing into the graph given, after the host node\n");
	launch_affine(x, 5, 2);
	CHECK(cuStreamEndCapture(s, &got));
	EXPECT(got == g, "cuStreamEndCapture returned another graph");
	k = nodes_of(g, v);
	printf("cuStreamBeginCaptureToGraph: %zu nodes, %zu edges\n", k, edges_of(g, NULL, NULL));
	EXPECT(k == 4 && edges_of(g, NULL, NULL) == 3, "want 4 nodes and 3 edges");
	/* the chain from the fill node: kernel, host, kernel */
	CUgraphNode at = fill, last = NULL;
	char buf[128] = "";
	for (int i = 0; i < 3; i++) {
		k = dependents_of(at, w);
		EXPECT(k == 1, "node %d of the chain has %zu dependent nodes", i, k);
		at = last = w[0];
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? " " : "",
			 type_name(type_of(at)));
	}
	printf("after the fill node: %s\n", buf);
	EXPECT(strcmp(buf, "kernel host kernel") == 0, "not the captured work");

	/* second capture into the same graph, after the last captured node: host B, x * 7 + 3 */
	CHECK(cuStreamBeginCaptureToGraph(s, g, &last, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CHECK(cuLaunchHostFunc(s, log_push, &b_mark));
	launch_affine(x, 7, 3);
	CHECK(cuStreamEndCapture(s, &got));
	EXPECT(got == g, "cuStreamEndCapture returned another graph");
	k = nodes_of(g, v);
	printf("a second capture into the graph: %zu nodes, %zu edges\n", k,
	       edges_of(g, NULL, NULL));
	EXPECT(k == 6 && edges_of(g, NULL, NULL) == 5, "want 6 nodes and 5 edges");
	k = roots_of(g, v);
	same_handles("roots", v, k, &fill, 1);

	CHECK(cuGraphInstantiate(&exec, g, 0));
	order_n = 0;
	for (int launch = 1; launch <= 2; launch++) {
		CHECK(cuMemsetD32(x, 0, N));
		CHECK(cuCtxSynchronize());
		CHECK(cuGraphLaunch(exec, s));
		CHECK(cuStreamSynchronize(s));
		CHECK(cuMemcpyDtoH(hx, x, BYTES));
		for (unsigned i = 0; i < N; i++)
			want[i] = ((fill_value(i, seed) * 3u + 1u) * 5u + 2u) * 7u + 3u;
		char what[96];
		snprintf(what, sizeof(what),
			 "captured into the graph, launch %d: fill *3+1 *5+2 *7+3", launch);
		same_words(what, hx, want, N);
	}
	order_log[order_n] = 0;
	printf("host functions, in the order they ran: %s\n", order_log);
	EXPECT(strcmp(order_log, "ABAB") == 0, "want ABAB");

	CHECK(cuGraphExecDestroy(exec));
	CHECK(cuGraphDestroy(g));
	CHECK(cuMemFree(x));
}

int main(void)
{
	CUmodule mod = setup(&ctx);

	CHECK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
	CHECK(cuModuleGetFunction(&f_affine, mod, "affine_u32"));
	CHECK(cuModuleGetFunction(&f_spin, mod, "spin_ns"));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	section_big();
	section_events();
	section_edges();
	section_capture_to_graph();

	CHECK(cuStreamDestroy(s));
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(0));
	printf("graphnodes: OK\n");
	return 0;
}
