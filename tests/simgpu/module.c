/*
 * Modules, functions, libraries and kernels: the objects made from a loaded image.
 *
 * A module belongs to one context: it has one function per kernel of the image and one
 * host allocation per __device__ / __constant__ variable (initialised from the image, and
 * registered as device memory so copies can reach it; its address lies outside any VMM
 * window, like a real driver's module globals). Globals are placed as a driver places them:
 * the same sequence of loads in a fresh process puts them at the same addresses (see
 * global_alloc), so that a job rebuilt from its state log finds them where they were, and a
 * test sees a global move only where a driver would move it.
 *
 * A library is context-independent: it holds the parsed image and one CUkernel per kernel, and
 * makes its module in a context the first time it is used there (cuLibraryGetModule,
 * cuKernelGetFunction, cuLibraryGetGlobal or a launch of a CUkernel), as lazy loading does.
 *
 * Queued kernels hold a reference on their module, so unloading never frees what a stream
 * is about to use. Module lists and library module lists are under sim_lock.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rgpu/util.h"
#include "sim.h"

struct sim_kern {
	struct sim_library *lib;
	unsigned idx;
	struct sim_fattr attr;
};

struct sim_library {
	struct sim_image *img;
	struct sim_kern *kerns;
	struct sim_link modules; /* one per context that used it, under sim_lock */
};

#define STATIC_SMEM_MAX (48 << 10)
#define OPTIN_SMEM_MAX (227 << 10)

static void attr_init(struct sim_fattr *a, const struct sim_kernel_info *ki)
{
	memset(a, 0, sizeof(*a));
	a->max_dyn_smem = STATIC_SMEM_MAX - MIN(ki->shared_bytes, STATIC_SMEM_MAX);
	a->carveout = -1;
}

/*
 * Where module globals go: one region at a fixed address, handed out by a bump allocator, as a
 * driver's module memory is for the same loads in a fresh process. Far from the device window
 * (RGPU_WINDOW_BASE, 1 TiB) and from ASan's allocator (0x600000000000, 4 TiB), and below where
 * the kernel puts ld.so, glibc and thread stacks (just under 0x800000000000, growing down).
 * Reserved PROT_NONE on first use and made writable as the allocator reaches it, so only what
 * globals use is committed. Addresses are never reused: unloading a module gives back the
 * memory of the pages its globals filled, not the addresses.
 * Under sim_lock (module_new runs under it); global_free needs none (globals_base is set once,
 * before any global it frees was handed out).
 */
#define GLOBALS_BASE 0x7d0000000000ull
#define GLOBALS_SIZE (1ull << 30)
#define GLOBALS_ALIGN 256

static uintptr_t globals_base;		/* 0 before first use; UINTPTR_MAX: could not be had */
static size_t globals_used, globals_rw; /* bytes handed out; bytes made writable */

/* Under sim_lock: the region, reserved at GLOBALS_BASE on first use. 0 when it cannot be. */
static uintptr_t globals_region(void)
{
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE;
	unsigned long long skew;
	const char *s;
	void *p;

	if (globals_base)
		return globals_base == UINTPTR_MAX ? 0 : globals_base;
	p = mmap((void *)(uintptr_t)GLOBALS_BASE, GLOBALS_SIZE, PROT_NONE, fl, -1, 0);
	if (p != MAP_FAILED && p != (void *)(uintptr_t)GLOBALS_BASE) {
		munmap(p, GLOBALS_SIZE); /* a kernel older than 4.17 took the flag as a hint */
		p = MAP_FAILED;
	}
	if (p == MAP_FAILED) {
		/* Something already lives there (or a sanitizer keeps the range): globals then go
		 * to the heap, where a fresh process may put them elsewhere, so a replayed job sees
		 * them move. Everything else works as before. */
		sim_log("module globals: %#llx is not free; placing them on the heap instead, "
			"where a fresh process may place them elsewhere",
			(unsigned long long)GLOBALS_BASE);
		__atomic_store_n(&globals_base, UINTPTR_MAX, __ATOMIC_RELEASE);
		return 0;
	}
	/* SIMGPU_GLOBALS_SKEW=BYTES: start the region that far in, as a real driver places the
	 * same globals elsewhere in another process (a restored job's globals then move) */
	if ((s = getenv("SIMGPU_GLOBALS_SKEW")) && *s) {
		skew = strtoull(s, NULL, 0);
		globals_used = ALIGN_UP(MIN(skew, (unsigned long long)GLOBALS_SIZE / 2), GLOBALS_ALIGN);
	}
	__atomic_store_n(&globals_base, (uintptr_t)p, __ATOMIC_RELEASE);
	return (uintptr_t)p;
}

/* Under sim_lock: memory for a global of size bytes (at least 1), 256-byte aligned. */
static void *global_alloc(size_t size)
{
	uintptr_t base = globals_region();
	size_t page = (size_t)sysconf(_SC_PAGESIZE), end;
	void *p;

	if (base && size <= GLOBALS_SIZE - globals_used) {
		end = ALIGN_UP(globals_used + size, GLOBALS_ALIGN);
		if (end > globals_rw) {
			size_t rw = MIN(ALIGN_UP(end, page), (size_t)GLOBALS_SIZE);
			if (mprotect((void *)(base + globals_rw), rw - globals_rw,
				     PROT_READ | PROT_WRITE))
				return NULL;
			globals_rw = rw;
		}
		p = (void *)(base + globals_used);
		globals_used = end; /* <= GLOBALS_SIZE, a multiple of GLOBALS_ALIGN */
		return p;
	}
	if (base) /* 1 GiB of globals loaded in this process: heap from now on */
		sim_log("module globals: the region at %#llx is full; placing them on the heap",
			(unsigned long long)GLOBALS_BASE);
	if (posix_memalign(&p, GLOBALS_ALIGN, size))
		return NULL;
	return p;
}

/* A global's memory goes: the heap's is freed; the region's pages it alone filled go back. */
static void global_free(void *p, size_t size)
{
	uintptr_t a = (uintptr_t)p, page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t base = __atomic_load_n(&globals_base, __ATOMIC_ACQUIRE); /* set once */

	if (!p)
		return;
	if (base == 0 || base == UINTPTR_MAX || a < base || a - base >= GLOBALS_SIZE) {
		free(p);
		return;
	}
	uintptr_t lo = ALIGN_UP(a, page), hi = (a + size) & ~(page - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* sim_module_put() - drop a reference; the last frees the globals and the image reference. */
void sim_module_put(struct sim_module *m)
{
	if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (unsigned i = 0; m->gmem && i < m->img->nglobals; i++)
		global_free(m->gmem[i], m->img->globals[i].size);
	free(m->gmem);
	free(m->funcs);
	sim_image_free(m->img);
	free(m);
}

/* Under sim_lock: the module stops being visible; queued work may still hold it. */
static void module_kill(struct sim_module *m)
{
	sim_handle_del(m);
	for (unsigned i = 0; i < m->img->nkernels; i++)
		sim_handle_del(&m->funcs[i]);
	for (unsigned i = 0; i < m->img->nglobals; i++)
		if (m->img->globals[i].size)
			sim_range_del((uintptr_t)m->gmem[i]);
	sim_list_del(&m->node);
	sim_list_del(&m->lib_node);
	sim_module_put(m);
}

/* Under sim_lock: a module of img (a reference is taken) in ctx. */
static CUresult module_new(struct sim_ctx *ctx, struct sim_image *img, struct sim_library *lib,
			   struct sim_module **out)
{
	struct sim_module *m = calloc(1, sizeof(*m));
	unsigned i;

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->ctx = ctx;
	m->img = img;
	m->lib = lib;
	m->refs = 1;
	__atomic_add_fetch(&img->refs, 1, __ATOMIC_RELAXED);
	sim_list_init(&m->node);
	sim_list_init(&m->lib_node);
	m->funcs = calloc(img->nkernels ? img->nkernels : 1, sizeof(*m->funcs));
	m->gmem = calloc(img->nglobals ? img->nglobals : 1, sizeof(*m->gmem));
	if (!m->funcs || !m->gmem)
		goto oom;
	for (i = 0; i < img->nglobals; i++) {
		const struct sim_global_info *g = &img->globals[i];
		m->gmem[i] = global_alloc(g->size ? g->size : 1);
		if (!m->gmem[i])
			goto oom;
		if (g->init)
			memcpy(m->gmem[i], g->init, g->size);
		else
			memset(m->gmem[i], 0, g->size);
	}
	for (i = 0; i < img->nglobals; i++) {
		if (img->globals[i].size &&
		    sim_range_add((uintptr_t)m->gmem[i], img->globals[i].size,
				  img->globals[i].managed ? SIM_RANGE_MANAGED : SIM_RANGE_GLOBAL,
				  SIM_PROT_RW, m))
			goto unregister;
	}
	for (unsigned k = 0; k < img->nkernels; k++) {
		struct sim_func *f = &m->funcs[k];
		f->mod = m;
		f->ki = &img->kernels[k];
		attr_init(&f->own, f->ki);
		f->attr = lib ? &lib->kerns[k].attr : &f->own;
		if (sim_handle_add(f, SIM_FUNC))
			goto unhandle;
	}
	if (sim_handle_add(m, SIM_MODULE))
		goto unhandle;
	sim_list_add(&ctx->modules, &m->node);
	if (lib)
		sim_list_add(&lib->modules, &m->lib_node);
	*out = m;
	return CUDA_SUCCESS;

unhandle:
	for (unsigned k = 0; k < img->nkernels; k++)
		sim_handle_del(&m->funcs[k]);
unregister:
	while (i--)
		if (img->globals[i].size)
			sim_range_del((uintptr_t)m->gmem[i]);
oom:
	sim_module_put(m);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Called by context teardown. */
void sim_ctx_unload_modules(struct sim_ctx *ctx)
{
	pthread_mutex_lock(&sim_lock);
	while (!sim_list_empty(&ctx->modules))
		module_kill(sim_entry(ctx->modules.next, struct sim_module, node));
	pthread_mutex_unlock(&sim_lock);
}

/* The module of lib in ctx, made on first use. */
static CUresult lib_module(struct sim_library *lib, struct sim_ctx *ctx, struct sim_module **out)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_lock);
	*out = NULL;
	for (struct sim_link *l = lib->modules.next; l != &lib->modules; l = l->next) {
		struct sim_module *m = sim_entry(l, struct sim_module, lib_node);
		if (m->ctx == ctx) {
			*out = m;
			break;
		}
	}
	if (!*out)
		r = module_new(ctx, lib->img, lib, out);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

static CUresult kern_get(CUkernel h, struct sim_kern **out)
{
	if (!sim_handle_is(h, SIM_KERNEL))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct sim_kern *)h;
	return CUDA_SUCCESS;
}

static CUresult kern_func(struct sim_kern *k, struct sim_func **out)
{
	struct sim_module *m;
	struct sim_ctx *ctx;
	CUresult r;

	if ((r = sim_ctx_current(&ctx)) || (r = lib_module(k->lib, ctx, &m)))
		return r;
	*out = &m->funcs[k->idx];
	return CUDA_SUCCESS;
}

/*
 * sim_func_get() - the function behind a CUfunction, or behind a CUkernel cast to one (the
 * kernel's function in the current context).
 */
CUresult sim_func_get(CUfunction f, struct sim_func **out)
{
	switch (sim_handle_kind(f)) {
	case SIM_FUNC:
		*out = (struct sim_func *)f;
		return CUDA_SUCCESS;
	case SIM_KERNEL:
		return kern_func((struct sim_kern *)f, out);
	default:
		return CUDA_ERROR_INVALID_HANDLE;
	}
}

/*
 * sim_func_get_in() - as sim_func_get(), with a CUkernel resolved in ctx (NULL: the current
 * context), as a graph kernel node's `kern` and `ctx` name one.
 */
CUresult sim_func_get_in(CUfunction f, struct sim_ctx *ctx, struct sim_func **out)
{
	struct sim_module *m;
	struct sim_kern *k;
	CUresult r;

	if (!ctx || sim_handle_kind(f) != SIM_KERNEL)
		return sim_func_get(f, out);
	if ((r = kern_get((CUkernel)f, &k)) || (r = lib_module(k->lib, ctx, &m)))
		return r;
	*out = &m->funcs[k->idx];
	return CUDA_SUCCESS;
}

void *sim_global(void *module, const char *name, size_t *size)
{
	struct sim_module *m = module;

	for (unsigned i = 0; m && name && i < m->img->nglobals; i++) {
		if (!strcmp(m->img->globals[i].name, name)) {
			if (size)
				*size = m->img->globals[i].size;
			return m->gmem[i];
		}
	}
	return NULL;
}

/* --- modules ------------------------------------------------------------------------------ */

static CUresult load(CUmodule *module, const void *image)
{
	struct sim_image *img;
	struct sim_module *m;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if ((r = sim_image_load(image, &img))) {
		sim_log("module load failed: %d", r);
		return r;
	}
	pthread_mutex_lock(&sim_lock);
	r = module_new(ctx, img, NULL, &m);
	pthread_mutex_unlock(&sim_lock);
	sim_image_free(img); /* the module holds its own reference */
	if (r == CUDA_SUCCESS)
		*module = (CUmodule)m;
	return r;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	return load(module, image);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return load(module, fatCubin);
}

/*
 * JIT options that return something get an empty answer, as from a JIT that had nothing to
 * say: log buffers are terminated at 0 and their sizes set to 0, the wall time to 0 ms.
 */
static CUresult jit_options(unsigned n, const CUjit_option *opt, void **val)
{
	if (n && (!opt || !val))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		CUjit_option size_opt =
		    opt[i] == CU_JIT_INFO_LOG_BUFFER	? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
		    : opt[i] == CU_JIT_ERROR_LOG_BUFFER ? CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
							: CU_JIT_NUM_OPTIONS;
		for (unsigned j = 0; size_opt != CU_JIT_NUM_OPTIONS && j < n; j++)
			if (opt[j] == size_opt && (uintptr_t)val[j] && val[i])
				*(char *)val[i] = '\0';
	}
	for (unsigned i = 0; i < n; i++) {
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
		    opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			val[i] = NULL;
		else if (opt[i] == CU_JIT_WALL_TIME)
			memset(&val[i], 0, sizeof(float)); /* a float stored in the slot */
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				    CUjit_option *options, void **optionValues)
{
	CUresult r;

	SIM_ENTER();
	if ((r = jit_options(numOptions, options, optionValues)))
		return r;
	return load(module, image);
}

static CUresult module_get(CUmodule h, struct sim_module **out)
{
	if (!sim_handle_is(h, SIM_MODULE))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct sim_module *)h;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	struct sim_module *m;
	CUresult r;

	SIM_ENTER();
	if ((r = module_get(hmod, &m)))
		return r;
	if (m->lib) /* a library's module goes with cuLibraryUnload */
		return CUDA_ERROR_INVALID_HANDLE;
	sim_device_sync();
	pthread_mutex_lock(&sim_lock);
	if (sim_handle_is(m, SIM_MODULE)) { /* not unloaded meanwhile */
		sim_ctx_flush_output(m->ctx); /* an unload flushes the device printf buffer */
		module_kill(m);
	}
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

static int kernel_index(const struct sim_image *img, const char *name)
{
	for (unsigned i = 0; i < img->nkernels; i++)
		if (!strcmp(img->kernels[i].name, name))
			return (int)i;
	return -1;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct sim_module *m;
	CUresult r;
	int i;

	SIM_ENTER();
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = module_get(hmod, &m)))
		return r;
	i = kernel_index(m->img, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	*hfunc = (CUfunction)&m->funcs[i];
	return CUDA_SUCCESS;
}

static CUresult get_global(struct sim_module *m, CUdeviceptr *dptr, size_t *bytes, const char *name)
{
	size_t size;
	void *p;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	p = sim_global(m, name, &size);
	if (!p)
		return CUDA_ERROR_NOT_FOUND;
	if (dptr)
		*dptr = (CUdeviceptr)p;
	if (bytes)
		*bytes = size;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
				      const char *name)
{
	struct sim_module *m;
	CUresult r;

	SIM_ENTER();
	if ((r = module_get(hmod, &m)))
		return r;
	return get_global(m, dptr, bytes, name);
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	struct sim_module *m;
	CUresult r;

	SIM_ENTER();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = module_get(mod, &m)))
		return r;
	*count = m->img->nkernels;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
					    CUmodule mod)
{
	struct sim_module *m;
	CUresult r;

	SIM_ENTER();
	if (!functions)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = module_get(mod, &m)))
		return r;
	for (unsigned i = 0; i < numFunctions && i < m->img->nkernels; i++)
		functions[i] = (CUfunction)&m->funcs[i];
	return CUDA_SUCCESS;
}

/* Lazy unless CUDA_MODULE_LOADING=EAGER, as the driver's own default since CUDA 12.2. */
CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	const char *s = getenv("CUDA_MODULE_LOADING");

	SIM_ENTER();
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = s && !strcmp(s, "EAGER") ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

/* --- functions ---------------------------------------------------------------------------- */

static CUresult param_info(const struct sim_kernel_info *ki, size_t i, size_t *off, size_t *size)
{
	if (!off || i >= ki->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*off = ki->params[i].offset;
	if (size)
		*size = ki->params[i].size;
	return CUDA_SUCCESS;
}

static CUresult attr_get(const struct sim_fattr *a, const struct sim_kernel_info *ki,
			 const struct sim_image *img, CUfunction_attribute attrib, int *pi)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*pi = 1024;
		break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
		*pi = ki->shared_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
		*pi = ki->const_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
		*pi = ki->local_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS:
		*pi = ki->regs ? ki->regs : 32; /* PTX: what a JIT would plausibly give */
		break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
		*pi = SIM_SM;
		break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
		*pi = img->binary_version ? img->binary_version : SIM_SM;
		break;
	case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
		*pi = a->cache_mode_ca;
		break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		*pi = a->max_dyn_smem;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		*pi = a->carveout;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
		*pi = a->cluster_must;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		*pi = a->cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
		break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		*pi = a->nonportable;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		*pi = a->sched_pref;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult attr_set(struct sim_fattr *a, const struct sim_kernel_info *ki,
			 CUfunction_attribute attrib, int v)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&sim_lock);
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		if (v < 0 || v > OPTIN_SMEM_MAX - ki->shared_bytes)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			a->max_dyn_smem = v;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		if (v < -1 || v > 100)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			a->carveout = v;
		break;
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
		if (v < 0 || v > 16)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			a->cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = v;
		break;
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
		if (v != 0 && v != 1)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			a->nonportable = v;
		break;
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		if (v < CU_CLUSTER_SCHEDULING_POLICY_DEFAULT ||
		    v > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
			r = CUDA_ERROR_INVALID_VALUE;
		else
			a->sched_pref = v;
		break;
	default: /* the others are read-only */
		r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	*name = f->ki->name;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
				    size_t *paramSize)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(func, &f)))
		return r;
	return param_info(f->ki, paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	return attr_get(f->attr, f->ki, f->mod->img, attrib, pi);
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	return attr_set(f->attr, f->ki, attrib, value);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if (!hmod)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	*hmod = (CUmodule)f->mod;
	return CUDA_SUCCESS;
}

/* --- libraries and kernels ---------------------------------------------------------------- */

static void lib_free(struct sim_library *lib)
{
	free(lib->kerns);
	sim_image_free(lib->img);
	free(lib);
}

/* The code may be any image kind, a __fatBinC_Wrapper_t included (what cudart passes). */
CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				   void **jitOptionsValues, unsigned int numJitOptions,
				   CUlibraryOption *libraryOptions, void **libraryOptionValues,
				   unsigned int numLibraryOptions)
{
	struct sim_library *lib;
	CUresult r;
	unsigned i;

	SIM_ENTER();
	if (!library || !code || (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < numLibraryOptions; i++)
		if (libraryOptions[i] != CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE &&
		    libraryOptions[i] != CU_LIBRARY_BINARY_IS_PRESERVED)
			return CUDA_ERROR_INVALID_VALUE;
	if ((r = jit_options(numJitOptions, jitOptions, jitOptionsValues)))
		return r;
	lib = calloc(1, sizeof(*lib));
	if (!lib)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_list_init(&lib->modules);
	if ((r = sim_image_load(code, &lib->img))) {
		free(lib);
		return r;
	}
	lib->kerns = calloc(lib->img->nkernels ? lib->img->nkernels : 1, sizeof(*lib->kerns));
	if (!lib->kerns)
		goto oom;
	for (i = 0; i < lib->img->nkernels; i++) {
		lib->kerns[i].lib = lib;
		lib->kerns[i].idx = i;
		attr_init(&lib->kerns[i].attr, &lib->img->kernels[i]);
		if (sim_handle_add(&lib->kerns[i], SIM_KERNEL))
			goto unhandle;
	}
	if (sim_handle_add(lib, SIM_LIBRARY))
		goto unhandle;
	*library = (CUlibrary)lib;
	return CUDA_SUCCESS;
unhandle:
	while (i--)
		sim_handle_del(&lib->kerns[i]);
oom:
	lib_free(lib);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult lib_get(CUlibrary h, struct sim_library **out)
{
	if (!sim_handle_is(h, SIM_LIBRARY))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct sim_library *)h;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	struct sim_library *lib;
	CUresult r;

	SIM_ENTER();
	if ((r = lib_get(library, &lib)))
		return r;
	sim_handle_del(lib);
	sim_device_sync();
	pthread_mutex_lock(&sim_lock);
	while (!sim_list_empty(&lib->modules)) {
		struct sim_module *m = sim_entry(lib->modules.next, struct sim_module, lib_node);
		sim_ctx_flush_output(m->ctx); /* an unload flushes the device printf buffer */
		module_kill(m);
	}
	pthread_mutex_unlock(&sim_lock);
	for (unsigned i = 0; i < lib->img->nkernels; i++)
		sim_handle_del(&lib->kerns[i]);
	/*
	 * Function handles of dead modules still point at lib->kerns[].attr; the handle table
	 * refuses them, and queued kernels do not read attributes, so the array may go.
	 */
	lib_free(lib);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	struct sim_library *lib;
	CUresult r;
	int i;

	SIM_ENTER();
	if (!pKernel || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = lib_get(library, &lib)))
		return r;
	i = kernel_index(lib->img, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	*pKernel = (CUkernel)&lib->kerns[i];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary library)
{
	struct sim_library *lib;
	CUresult r;

	SIM_ENTER();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = lib_get(library, &lib)))
		return r;
	*count = lib->img->nkernels;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels,
					   CUlibrary library)
{
	struct sim_library *lib;
	CUresult r;

	SIM_ENTER();
	if (!kernels)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = lib_get(library, &lib)))
		return r;
	for (unsigned i = 0; i < numKernels && i < lib->img->nkernels; i++)
		kernels[i] = (CUkernel)&lib->kerns[i];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	struct sim_library *lib;
	struct sim_module *m;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!pMod)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = lib_get(library, &lib)) || (r = sim_ctx_current(&ctx)) ||
	    (r = lib_module(lib, ctx, &m)))
		return r;
	*pMod = (CUmodule)m;
	return CUDA_SUCCESS;
}

/* A __managed__ variable of the library: a global like the others here (marked managed). */
CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				     const char *name)
{
	return cuLibraryGetGlobal(dptr, bytes, library, name);
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
				    const char *name)
{
	struct sim_library *lib;
	struct sim_module *m;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if ((r = lib_get(library, &lib)) || (r = sim_ctx_current(&ctx)) ||
	    (r = lib_module(lib, ctx, &m)))
		return r;
	return get_global(m, dptr, bytes, name);
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct sim_kern *k;
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = kern_get(kernel, &k)) || (r = kern_func(k, &f)))
		return r;
	*pFunc = (CUfunction)f;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	struct sim_kern *k;
	CUresult r;

	SIM_ENTER();
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = kern_get(hfunc, &k)))
		return r;
	*name = k->lib->img->kernels[k->idx].name;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
				      size_t *paramSize)
{
	struct sim_kern *k;
	CUresult r;

	SIM_ENTER();
	if ((r = kern_get(kernel, &k)))
		return r;
	return param_info(&k->lib->img->kernels[k->idx], paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
				      CUdevice dev)
{
	struct sim_kern *k;
	CUresult r;

	SIM_ENTER();
	if ((r = kern_get(kernel, &k)))
		return r;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	return attr_get(&k->attr, &k->lib->img->kernels[k->idx], k->lib->img, attrib, pi);
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
				      CUdevice dev)
{
	struct sim_kern *k;
	CUresult r;

	SIM_ENTER();
	if ((r = kern_get(kernel, &k)))
		return r;
	if (!sim_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	return attr_set(&k->attr, &k->lib->img->kernels[k->idx], attrib, val);
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	f->cache_config = (int)config;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
	struct sim_func *f;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(hfunc, &f)))
		return r;
	if ((unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
		return CUDA_ERROR_INVALID_VALUE;
	f->shared_config = (int)config;
	return CUDA_SUCCESS;
}
