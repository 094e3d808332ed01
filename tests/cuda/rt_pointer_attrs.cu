// Pointer attributes of device memory (cudaMalloc), pinned host memory (cudaMallocHost),
// registered host memory (cudaHostRegister) and unknown host memory (malloc, NULL), asked three
// ways: cudaPointerGetAttributes, the driver's cuPointerGetAttribute for every
// CUpointer_attribute of cuda.h, and cuPointerGetAttributes for all of them at once (issue 7,
// item 8: cudaPointerGetAttributes on a cudaMalloc pointer failed through rgpu). Then the
// driver's errors: attributes cuda.h does not define, arguments it refuses, no current context.
//
// Every answer is printed, one line each, in a form that does not depend on where things were
// allocated (addresses relative to the pointer asked about, ids numbered in order of first
// sight, widths as the number of bytes the driver wrote), so that a native run and a run
// through rgpu can be compared line by line (tests/gpu/run.sh). A line that starts with '~'
// is one where rgpu answers differently from a local GPU on purpose (docs/user-guide.md, Known
// limitations): IPC, GPUDirect RDMA, P2P tokens and hardware decompression do not reach a
// remote GPU, and the mapping behind host memory is the range itself; compare the other lines.
//
// The program checks the answers the driver gives for these cases (measured with driver
// 580.159.04 on an H100): every line in want_lines() must appear exactly as written there.
#include <string>
#include <vector>

#include <cuda.h>

#include "rt_check.h"

typedef CUresult (*get_attr_fn)(void *data, CUpointer_attribute a, CUdeviceptr p);
typedef CUresult (*get_attrs_fn)(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p);
typedef CUresult (*ctx_get_fn)(CUcontext *ctx);
typedef CUresult (*ctx_push_fn)(CUcontext ctx);
typedef CUresult (*get_error_name_fn)(CUresult r, const char **name);

static get_attr_fn get_attr;
static get_attrs_fn get_attrs;
static ctx_get_fn ctx_get_current, ctx_pop;
static ctx_push_fn ctx_push;
static get_error_name_fn get_error_name;

// The attributes of cuda.h, CU_POINTER_ATTRIBUTE_CONTEXT .. the last, but P2P_TOKENS: asking
// for it sets SYNC_MEMOPS on the region, so it is asked last of all (p2p_pass()); and the
// plural call does not take it. remote: rgpu answers it differently on purpose ('~').
struct attr_desc {
	CUpointer_attribute a;
	const char *name;
	bool remote;
};
static const struct attr_desc attr_list[] = {
    {CU_POINTER_ATTRIBUTE_CONTEXT, "CONTEXT", false},
    {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "MEMORY_TYPE", false},
    {CU_POINTER_ATTRIBUTE_DEVICE_POINTER, "DEVICE_POINTER", false},
    {CU_POINTER_ATTRIBUTE_HOST_POINTER, "HOST_POINTER", false},
    {CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, "SYNC_MEMOPS", false},
    {CU_POINTER_ATTRIBUTE_BUFFER_ID, "BUFFER_ID", false},
    {CU_POINTER_ATTRIBUTE_IS_MANAGED, "IS_MANAGED", false},
    {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "DEVICE_ORDINAL", false},
    {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, "IS_LEGACY_CUDA_IPC_CAPABLE", true},
    {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, "RANGE_START_ADDR", false},
    {CU_POINTER_ATTRIBUTE_RANGE_SIZE, "RANGE_SIZE", false},
    {CU_POINTER_ATTRIBUTE_MAPPED, "MAPPED", false},
    {CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, "ALLOWED_HANDLE_TYPES", false},
    {CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, "IS_GPU_DIRECT_RDMA_CAPABLE", true},
    {CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, "ACCESS_FLAGS", false},
    {CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, "MEMPOOL_HANDLE", false},
    {CU_POINTER_ATTRIBUTE_MAPPING_SIZE, "MAPPING_SIZE", true},
    {CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, "MAPPING_BASE_ADDR", true},
    {CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, "MEMORY_BLOCK_ID", true},
    {CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE, "IS_HW_DECOMPRESS_CAPABLE", true},
};
enum { NATTRS = sizeof(attr_list) / sizeof(attr_list[0]) };
static_assert(CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE == 21,
	      "a new CUpointer_attribute: add it to attr_list and to the expectations");

static const char *attr_name(CUpointer_attribute a)
{
	for (int i = 0; i < NATTRS; i++)
		if (attr_list[i].a == a)
			return attr_list[i].name;
	return a == CU_POINTER_ATTRIBUTE_P2P_TOKENS ? "P2P_TOKENS" : "?";
}

// Every line printed, for the checks at the end.
static std::vector<std::string> printed;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("%s\n", line);
	printed.push_back(line);
}

static const char *err_name(CUresult r)
{
	const char *s = NULL;

	if (get_error_name(r, &s) != CUDA_SUCCESS || !s)
		return "(unknown CUresult)";
	return s;
}

// An address as seen from p: "null", "p", "p+N", "p-N".
static std::string rel(unsigned long long v, unsigned long long p)
{
	char b[64];

	if (!v)
		return "null";
	if (v == p)
		return "p";
	snprintf(b, sizeof(b), v > p ? "p+%llu" : "p-%llu", v > p ? v - p : p - v);
	return b;
}

// Ids are printed as "id1", "id2" ... in order of first sight, one numbering per attribute.
static std::string id_name(std::vector<unsigned long long> &seen, unsigned long long id)
{
	size_t i;

	if (!id)
		return "0";
	for (i = 0; i < seen.size() && seen[i] != id; i++)
		;
	if (i == seen.size())
		seen.push_back(id);
	return "id" + std::to_string(i + 1);
}
static std::vector<unsigned long long> buffer_ids, block_ids;

// One attribute as the driver wrote it into a buffer prefilled with a known pattern.
struct answer {
	CUresult r;
	unsigned char v[32];
	int width; // bytes written
};

// written() - how many leading bytes of x (filled with fx) and y (filled with fy), written
// by the same call twice, were written: a byte is written if it differs from its fill in x or y.
static int written(const unsigned char *x, int fx, const unsigned char *y, int fy)
{
	int w = 0;

	for (int i = 0; i < 32; i++)
		if (x[i] != fx || y[i] != fy)
			w = i + 1;
	return w;
}

// "w=N VALUE" for a successful answer, "w=N" for a refused one.
static std::string fmt_answer(CUpointer_attribute a, const struct answer *an, unsigned long long p)
{
	unsigned long long u = 0;
	std::string s = "w=" + std::to_string(an->width);

	if (an->r != CUDA_SUCCESS)
		return s;
	memcpy(&u, an->v, an->width >= 8 ? 8 : an->width);
	s += " ";
	switch (a) {
	case CU_POINTER_ATTRIBUTE_CONTEXT: {
		CUcontext cur = NULL;
		ctx_get_current(&cur);
		return s + (!u					      ? "null"
			    : u == (unsigned long long)(uintptr_t)cur ? "current"
								      : "other");
	}
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		return s + rel(u, p);
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		return s + id_name(buffer_ids, u);
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		return s + id_name(block_ids, u);
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		return s + (u ? "set" : "null");
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		return s + std::to_string((int)(unsigned)u);
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
		CUDA_POINTER_ATTRIBUTE_P2P_TOKENS t;
		memcpy(&t, an->v, sizeof(t));
		return s + "p2pToken=" + (t.p2pToken ? "set" : "0") +
		       " vaSpaceToken=" + (t.vaSpaceToken ? "set" : "0");
	}
	default:
		return s + std::to_string(u);
	}
}

// ask() - cuPointerGetAttribute(a, p) twice, into buffers filled with 0xab and 0xcd.
static void ask(CUpointer_attribute a, unsigned long long p, struct answer *an)
{
	unsigned char x[32], y[32];
	CUresult r2;

	memset(x, 0xab, sizeof(x));
	memset(y, 0xcd, sizeof(y));
	an->r = get_attr(x, a, (CUdeviceptr)p);
	r2 = get_attr(y, a, (CUdeviceptr)p);
	if (r2 != an->r)
		rt_fail("cuPointerGetAttribute(%d) answered %s, then %s", (int)a, err_name(an->r),
			err_name(r2));
	an->width = written(x, 0xab, y, 0xcd);
	memcpy(an->v, x, sizeof(an->v));
}

// ask_all() - cuPointerGetAttributes(n, as, p) twice; the answers, and its result.
static CUresult ask_all(unsigned n, CUpointer_attribute *as, unsigned long long p,
			struct answer *an)
{
	unsigned char x[NATTRS][32], y[NATTRS][32];
	void *dx[NATTRS], *dy[NATTRS];
	CUresult r, r2;

	for (unsigned i = 0; i < n; i++) {
		memset(x[i], 0xab, 32);
		memset(y[i], 0xcd, 32);
		dx[i] = x[i];
		dy[i] = y[i];
	}
	r = get_attrs(n, as, dx, (CUdeviceptr)p);
	r2 = get_attrs(n, as, dy, (CUdeviceptr)p);
	if (r2 != r)
		rt_fail("cuPointerGetAttributes answered %s, then %s", err_name(r), err_name(r2));
	for (unsigned i = 0; i < n; i++) {
		an[i].r = r;
		an[i].width = written(x[i], 0xab, y[i], 0xcd);
		memcpy(an[i].v, x[i], 32);
	}
	return r;
}

struct pointer_case {
	const char *name;
	const void *ptr;
};

static void one_case(const struct pointer_case *c)
{
	unsigned long long p = (unsigned long long)(uintptr_t)c->ptr;
	cudaPointerAttributes ra;
	CUpointer_attribute as[NATTRS];
	struct answer an[NATTRS];
	CUresult r;

	// 1. the runtime
	memset(&ra, 0x5a, sizeof(ra));
	cudaError_t e = cudaPointerGetAttributes(&ra, c->ptr);
	cudaGetLastError();
	out("%s rt: %s type=%d device=%d devicePointer=%s hostPointer=%s", c->name,
	    cudaGetErrorName(e), (int)ra.type, ra.device,
	    rel((unsigned long long)(uintptr_t)ra.devicePointer, p).c_str(),
	    rel((unsigned long long)(uintptr_t)ra.hostPointer, p).c_str());

	// 2. the driver, one attribute at a time
	for (int i = 0; i < NATTRS; i++) {
		ask(attr_list[i].a, p, &an[i]);
		out("%s%s drv %s: %s %s", attr_list[i].remote ? "~" : "", c->name,
		    attr_list[i].name, err_name(an[i].r),
		    fmt_answer(attr_list[i].a, &an[i], p).c_str());
	}

	// 3. the driver, every attribute at once (the runtime's way)
	for (int i = 0; i < NATTRS; i++)
		as[i] = attr_list[i].a;
	r = ask_all(NATTRS, as, p, an);
	out("%s drv all: %s", c->name, err_name(r));
	for (int i = 0; r == CUDA_SUCCESS && i < NATTRS; i++)
		out("%s%s drv all %s: %s", attr_list[i].remote ? "~" : "", c->name,
		    attr_list[i].name, fmt_answer(attr_list[i].a, &an[i], p).c_str());
}

// P2P_TOKENS of every case, after everything else (asking sets SYNC_MEMOPS).
static void p2p_pass(const struct pointer_case *cs, int n)
{
	for (int i = 0; i < n; i++) {
		unsigned long long p = (unsigned long long)(uintptr_t)cs[i].ptr;
		struct answer an;

		ask(CU_POINTER_ATTRIBUTE_P2P_TOKENS, p, &an);
		out("~%s drv P2P_TOKENS: %s %s", cs[i].name, err_name(an.r),
		    fmt_answer(CU_POINTER_ATTRIBUTE_P2P_TOKENS, &an, p).c_str());
	}
}

// The driver's errors: attributes cuda.h does not define, attributes the plural call does not
// take, a NULL data pointer or slot, no attribute at all; and what is asked first when a
// good attribute precedes a bad one.
static void error_pass(const struct pointer_case *c)
{
	unsigned long long p = (unsigned long long)(uintptr_t)c->ptr;
	const int bad[] = {0, 22, 1000, -1};
	CUpointer_attribute as[2];
	struct answer an[2];
	unsigned char b[32];
	void *slots[2];
	CUresult r;

	for (int a : bad) {
		ask((CUpointer_attribute)a, p, &an[0]);
		out("%s drv attribute %d: %s %s", c->name, a, err_name(an[0].r),
		    fmt_answer((CUpointer_attribute)a, &an[0], p).c_str());
		as[0] = (CUpointer_attribute)a;
		r = ask_all(1, as, p, an);
		out("%s drv all attribute %d: %s %s", c->name, a, err_name(r),
		    fmt_answer(as[0], &an[0], p).c_str());
	}
	as[0] = CU_POINTER_ATTRIBUTE_P2P_TOKENS;
	r = ask_all(1, as, p, an);
	out("%s drv all P2P_TOKENS: %s w=%d", c->name, err_name(r), an[0].width);
	as[0] = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
	as[1] = (CUpointer_attribute)1000;
	r = ask_all(2, as, p, an);
	out("%s drv all MEMORY_TYPE,1000: %s w=%d w=%d", c->name, err_name(r), an[0].width,
	    an[1].width);
	slots[0] = b;
	out("%s drv all none: %s", c->name, err_name(get_attrs(0, as, slots, (CUdeviceptr)p)));
	as[1] = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
	slots[0] = NULL;
	slots[1] = b;
	memset(b, 0xab, sizeof(b));
	r = get_attrs(2, as, slots, (CUdeviceptr)p);
	out("%s drv all NULL slot: %s w=%d", c->name, err_name(r), written(b, 0xab, b, 0xab));
	out("%s drv NULL data: %s", c->name,
	    err_name(get_attr(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p)));
}

// Without a current context: only DEVICE_POINTER needs one.
static void no_context_pass(const struct pointer_case *cs, int n)
{
	CUcontext ctx = NULL, cur = NULL;

	if (ctx_pop(&ctx) != CUDA_SUCCESS || !ctx) {
		fprintf(stderr, "FAIL: cuCtxPopCurrent\n");
		exit(1);
	}
	ctx_get_current(&cur);
	if (cur)
		rt_fail("a context is still current after cuCtxPopCurrent");
	for (int i = 0; i < n; i++) {
		unsigned long long p = (unsigned long long)(uintptr_t)cs[i].ptr;
		CUpointer_attribute as[4] = {
		    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
		    CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
		struct answer an[4];
		CUresult r;

		for (int k = 0; k < 4; k++) {
			ask(as[k], p, &an[k]);
			out("%s nocontext drv %s: %s %s", cs[i].name, attr_name(as[k]),
			    err_name(an[k].r), fmt_answer(as[k], &an[k], p).c_str());
		}
		r = ask_all(4, as, p, an);
		out("%s nocontext drv all: %s", cs[i].name, err_name(r));
		for (int k = 0; r == CUDA_SUCCESS && k < 4; k++)
			out("%s nocontext drv all %s: %s", cs[i].name, attr_name(as[k]),
			    fmt_answer(as[k], &an[k], p).c_str());
	}
	if (ctx_push(ctx) != CUDA_SUCCESS) {
		fprintf(stderr, "FAIL: cuCtxPushCurrent\n");
		exit(1);
	}
}

// The lines that must appear. kind: 'd' device memory, 'h' pinned or registered host memory,
// 'u' unknown; back: the pointer's offset into its allocation; size: the allocation's size.
static void want_case(std::vector<std::string> &w, const char *name, char kind,
		      unsigned long long back, unsigned long long size, bool is_null)
{
	std::string n = name, start = back ? "p-" + std::to_string(back) : "p";
	const char *self = is_null ? "null" : "p";

	if (kind == 'u') {
		w.push_back(
		    n + " rt: cudaSuccess type=0 device=-2 devicePointer=null hostPointer=" + self);
		for (int i = 0; i < NATTRS; i++)
			if (!attr_list[i].remote)
				w.push_back(n + " drv " + attr_list[i].name +
					    ": CUDA_ERROR_INVALID_VALUE w=0");
		w.push_back("~" + n + " drv P2P_TOKENS: CUDA_ERROR_INVALID_VALUE w=0");
		w.push_back(n + " drv all: CUDA_SUCCESS");
		// the range is left unwritten (driver 580.159.04)
		const char *none[][2] = {{"CONTEXT", "w=8 null"},
					 {"MEMORY_TYPE", "w=4 0"},
					 {"DEVICE_POINTER", "w=8 null"},
					 {"SYNC_MEMOPS", "w=4 0"},
					 {"BUFFER_ID", "w=8 0"},
					 {"IS_MANAGED", "w=4 0"},
					 {"DEVICE_ORDINAL", "w=4 -2"},
					 {"RANGE_START_ADDR", "w=0 null"},
					 {"RANGE_SIZE", "w=0 0"},
					 {"MAPPED", "w=4 0"},
					 {"ALLOWED_HANDLE_TYPES", "w=8 0"},
					 {"ACCESS_FLAGS", "w=4 0"},
					 {"MEMPOOL_HANDLE", "w=8 null"}};
		for (auto &v : none)
			w.push_back(n + " drv all " + v[0] + ": " + v[1]);
		w.push_back(n + " drv all HOST_POINTER: w=8 " + self);
		// no current context changes nothing for unknown memory
		w.push_back(n + " nocontext drv DEVICE_POINTER: CUDA_ERROR_INVALID_VALUE w=0");
		w.push_back(n + " nocontext drv all: CUDA_SUCCESS");
		w.push_back(n + " nocontext drv all DEVICE_POINTER: w=8 null");
		w.push_back(n + " nocontext drv all HOST_POINTER: w=8 " + self);
		w.push_back(n + " nocontext drv all DEVICE_ORDINAL: w=4 -2");
		return;
	}
	bool dev = kind == 'd';
	w.push_back(n + " rt: cudaSuccess type=" + (dev ? "2" : "1") +
		    " device=0 devicePointer=p hostPointer=" + (dev ? "null" : "p"));
	const char *same[][2] = {
	    {"CONTEXT", "w=8 current"},	 {"MEMORY_TYPE", dev ? "w=4 2" : "w=4 1"},
	    {"DEVICE_POINTER", "w=8 p"}, {"SYNC_MEMOPS", "w=4 0"},
	    {"IS_MANAGED", "w=4 0"},	 {"DEVICE_ORDINAL", "w=4 0"},
	    {"MAPPED", "w=4 1"},	 {"ALLOWED_HANDLE_TYPES", "w=8 0"},
	    {"ACCESS_FLAGS", "w=4 3"},	 {"MEMPOOL_HANDLE", "w=8 null"}};
	for (auto &v : same) {
		w.push_back(n + " drv " + v[0] + ": CUDA_SUCCESS " + v[1]);
		w.push_back(n + " drv all " + v[0] + ": " + v[1]);
	}
	w.push_back(n + " drv RANGE_START_ADDR: CUDA_SUCCESS w=8 " + start);
	w.push_back(n + " drv all RANGE_START_ADDR: w=8 " + start);
	w.push_back(n + " drv RANGE_SIZE: CUDA_SUCCESS w=8 " + std::to_string(size));
	w.push_back(n + " drv all RANGE_SIZE: w=8 " + std::to_string(size));
	w.push_back(n + " drv HOST_POINTER: " +
		    (dev ? "CUDA_ERROR_INVALID_VALUE w=8" : "CUDA_SUCCESS w=8 p"));
	w.push_back(n + " drv all HOST_POINTER: w=8 " + (dev ? "null" : "p"));
	w.push_back(n + " drv all: CUDA_SUCCESS");
	if (!dev)
		w.push_back("~" + n + " drv P2P_TOKENS: CUDA_ERROR_INVALID_VALUE w=12");
	w.push_back(n + " nocontext drv MEMORY_TYPE: CUDA_SUCCESS " + (dev ? "w=4 2" : "w=4 1"));
	w.push_back(n + " nocontext drv DEVICE_POINTER: CUDA_ERROR_INVALID_CONTEXT w=8");
	w.push_back(n + " nocontext drv HOST_POINTER: " +
		    (dev ? "CUDA_ERROR_INVALID_VALUE w=8" : "CUDA_SUCCESS w=8 p"));
	w.push_back(n + " nocontext drv all: CUDA_SUCCESS");
	w.push_back(n + " nocontext drv all DEVICE_POINTER: w=8 null");
	w.push_back(n + " nocontext drv all HOST_POINTER: w=8 " + (dev ? "null" : "p"));
	w.push_back(n + " nocontext drv all DEVICE_ORDINAL: w=4 0");
}

static void want_errors(std::vector<std::string> &w, const char *name)
{
	std::string n = name;

	for (int a : {0, 22, 1000, -1}) {
		w.push_back(n + " drv attribute " + std::to_string(a) +
			    ": CUDA_ERROR_INVALID_VALUE w=0");
		w.push_back(n + " drv all attribute " + std::to_string(a) +
			    ": CUDA_ERROR_INVALID_VALUE w=0");
	}
	w.push_back(n + " drv all P2P_TOKENS: CUDA_ERROR_INVALID_VALUE w=0");
	// the good attribute before the bad one is written
	w.push_back(n + " drv all MEMORY_TYPE,1000: CUDA_ERROR_INVALID_VALUE w=4 w=0");
	w.push_back(n + " drv all none: CUDA_ERROR_INVALID_VALUE");
	w.push_back(n + " drv all NULL slot: CUDA_ERROR_INVALID_VALUE w=0");
	w.push_back(n + " drv NULL data: CUDA_ERROR_INVALID_VALUE");
}

int main()
{
	const size_t big = 1 << 20, small = 1000, host = 8192;
	cudaDriverEntryPointQueryResult q;
	void *d_big, *d_small, *pinned, *reg, *heap;

	setvbuf(stdout, NULL, _IOLBF, 0); // keep FAIL lines (stderr) between whole lines
	CK(cudaFree(0));
	CK(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", (void **)&get_attr, 4000,
					    cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", (void **)&get_attrs, 7000,
					    cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&ctx_get_current, 4000,
					    cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuCtxPopCurrent", (void **)&ctx_pop, 4000,
					    cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuCtxPushCurrent", (void **)&ctx_push, 4000,
					    cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuGetErrorName", (void **)&get_error_name, 6000,
					    cudaEnableDefault, &q));
	CK(cudaMalloc(&d_big, big));
	CK(cudaMalloc(&d_small, small));
	CK(cudaMallocHost(&pinned, host));
	reg = aligned_alloc(4096, host);
	heap = malloc(host);
	if (!reg || !heap) {
		fprintf(stderr, "out of host memory\n");
		return 1;
	}
	CK(cudaHostRegister(reg, host, cudaHostRegisterDefault));

	const struct pointer_case cases[] = {
	    {"device", d_big},
	    {"device+256", (char *)d_big + 256},
	    {"device_small", d_small},
	    {"pinned", pinned},
	    {"pinned+64", (char *)pinned + 64},
	    {"registered", reg},
	    {"malloc", heap},
	    {"null", NULL},
	};
	const int ncases = sizeof(cases) / sizeof(cases[0]);
	for (int i = 0; i < ncases; i++)
		one_case(&cases[i]);
	error_pass(&cases[0]);
	error_pass(&cases[3]);
	error_pass(&cases[6]);
	no_context_pass(cases, ncases);
	p2p_pass(cases, ncases);

	std::vector<std::string> want;
	want_case(want, "device", 'd', 0, big, false);
	want_case(want, "device+256", 'd', 256, big, false);
	want_case(want, "device_small", 'd', 0, small, false);
	want_case(want, "pinned", 'h', 0, host, false);
	want_case(want, "pinned+64", 'h', 64, host, false);
	want_case(want, "registered", 'h', 0, host, false);
	want_case(want, "malloc", 'u', 0, 0, false);
	want_case(want, "null", 'u', 0, 0, true);
	want_errors(want, "device");
	want_errors(want, "pinned");
	want_errors(want, "malloc");
	for (auto &l : want) {
		bool found = false;
		for (auto &g : printed)
			found = found || g == l;
		if (!found)
			rt_fail("missing: %s", l.c_str());
	}

	CK(cudaHostUnregister(reg));
	CK(cudaFreeHost(pinned));
	CK(cudaFree(d_small));
	CK(cudaFree(d_big));
	free(reg);
	free(heap);
	char summary[64];
	snprintf(summary, sizeof(summary), "%d pointers, %zu answers checked", ncases, want.size());
	return rt_done("rt_pointer_attrs", summary);
}
