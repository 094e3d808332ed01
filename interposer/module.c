/*
 * Modules and libraries, their functions, kernels and globals.
 *
 * An image is shipped by content: the load request carries its SHA-256 and the bytes follow
 * only when the server has never seen them. The reply lists every function with its parameter
 * layout, so looking up a function or kernel and launching it never wait for the server:
 * lookups answer NOT_FOUND locally, and the server learns the new id fire-and-forget.
 * Globals are the exception (their address is the driver's to choose): that lookup waits, and
 * the range it returns becomes device memory for pointer classification.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ip.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/hash.h"
#include "rgpu/image.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

static ip_managed_global_fn managed_global;

void ip_module_on_managed_global(ip_managed_global_fn fn)
{
	managed_global = fn;
}

static int fi_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ip_funcinfo *)a)->name, ((const struct ip_funcinfo *)b)->name);
}

static void module_free(struct ip_module *m)
{
	for (uint32_t i = 0; i < m->nfuncs; i++) {
		free(m->funcs[i].name);
		free(m->funcs[i].offset);
		free(m->funcs[i].size);
	}
	free(m->funcs);
	while (m->globals) {
		struct ip_global *g = m->globals->next;
		free(m->globals->name);
		free(m->globals);
		m->globals = g;
	}
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/*
 * The module (library = 0) or library (library = 1) behind handle h, or NULL with *r set to the
 * driver's answer: NOT_INITIALIZED and friends, or INVALID_HANDLE for anything else.
 */
static struct ip_module *module_of(const void *h, int library, CUresult *r)
{
	struct ip_module *m;
	*r = ip_check_init();
	if (*r != CUDA_SUCCESS)
		return NULL;
	m = ip_obj_get(h, ST_KIND_MODULE);
	if (!m || m->library != library) {
		*r = CUDA_ERROR_INVALID_HANDLE;
		return NULL;
	}
	return m;
}

static CUresult take_functions(struct ip_module *m, Rgpu__ModuleLoadReply *rep)
{
	m->funcs = calloc(rep->n_functions ? rep->n_functions : 1, sizeof(*m->funcs));
	if (!m->funcs)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < rep->n_functions; i++) {
		Rgpu__FuncInfo *fi = rep->functions[i];
		struct ip_funcinfo *f = &m->funcs[m->nfuncs];
		if (fi->n_param_offset != fi->n_param_size)
			return CUDA_ERROR_INVALID_IMAGE;
		f->name = strdup(fi->name);
		f->nparams = (uint32_t)fi->n_param_offset;
		f->offset = malloc(sizeof(uint32_t) * (f->nparams + 1));
		f->size = malloc(sizeof(uint32_t) * (f->nparams + 1));
		m->nfuncs++;
		if (!f->name || !f->offset || !f->size)
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (uint32_t p = 0; p < f->nparams; p++) {
			f->offset[p] = fi->param_offset[p];
			f->size[p] = fi->param_size[p];
			if ((uint64_t)f->offset[p] + f->size[p] > RGPU_MAX_PARAMS)
				return CUDA_ERROR_INVALID_IMAGE;
			f->argbytes = MAX(f->argbytes, f->offset[p] + f->size[p]);
		}
	}
	qsort(m->funcs, m->nfuncs, sizeof(*m->funcs), fi_cmp);
	return CUDA_SUCCESS;
}

/* Send a load: the hash first, the image only when the server's cache misses it. */
static CUresult send_load(Rgpu__ModuleLoad *req, const struct rgpu_image *img,
			  Rgpu__ModuleLoadReply **rep)
{
	CUresult r = ip_call_status(RGPU_MSG_MODULE_LOAD, &req->base, NULL, 0, NULL, 0,
				    &rgpu__module_load_reply__descriptor, (ProtobufCMessage **)rep);
	if (r == CUDA_SUCCESS && (*rep)->need_image) {
		rgpu__module_load_reply__free_unpacked(*rep, NULL);
		*rep = NULL;
		req->has_image = 1;
		pr_debug("shipping a %zu-byte image", img->size);
		r = ip_call_status(RGPU_MSG_MODULE_LOAD, &req->base, img->data, img->size, NULL, 0,
				   &rgpu__module_load_reply__descriptor, (ProtobufCMessage **)rep);
		req->has_image = 0;
	} else if (r == CUDA_SUCCESS) {
		pr_debug("image of %zu bytes found in the server's cache", img->size);
	}
	if (r == CUDA_SUCCESS && (*rep)->need_image)
		r = CUDA_ERROR_INVALID_IMAGE;
	return r;
}

/*
 * Where a module's messages go: its context's server. A library belongs to no context, so
 * every server holds it (with devices of several servers, its loads, kernels and unload go to
 * each): for_each_server() runs fn once per server for a library, once for a module.
 */
static CUresult for_each_server(const struct ip_module *m, CUresult (*fn)(void *), void *arg)
{
	CUresult r = CUDA_SUCCESS;
	int prev;

	if (!m->library || !ip_multi_server()) {
		prev = m->ctx ? ip_pin_dev(m->ctx->device) : ip_pin_server(-1);
		r = fn(arg);
		ip_pin_server(prev);
		return r;
	}
	prev = ip_pin_server(0);
	for (int k = 0; k < ip_nservers() && r == CUDA_SUCCESS; k++) {
		ip_pin_server(k);
		r = fn(arg);
	}
	ip_pin_server(prev);
	return r;
}

/* Load an image (module or library) for the current context. */
/* rgpu's own limit on a module image (the native driver has none): said once */
static void image_too_big(uint64_t size)
{
	pr_warn_once("refused: a module image of %llu bytes: rgpu ships images of at most %llu "
		     "(CUDA_ERROR_INVALID_IMAGE)",
		     (unsigned long long)size, (unsigned long long)RGPU_MAX_IMAGE);
}

static CUresult load(const void *image, int library, struct ip_module **out)
{
	Rgpu__ModuleLoad req = RGPU__MODULE_LOAD__INIT;
	Rgpu__ModuleLoadReply *rep = NULL;
	struct rgpu_image img;
	struct ip_module *m;
	struct ip_ctx *c;
	void *bundle = NULL;
	CUresult r;
	int ret;

	if (!image || !out)
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * A module belongs to the current context. A library belongs to none: the runtime loads
	 * its code with cuLibraryLoadData before it makes any context current when a program's
	 * first call is a launch, and its kernels outlive cudaDeviceReset. Only a library's
	 * per-context parts (a kernel's CUfunction, a global's address) name a context.
	 */
	c = NULL;
	r = library ? ip_check_init() : ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	ret = rgpu_image_locate(image, &img);
	if (ret)
		return ret == RGPU_EUNSUPPORTED ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_IMAGE;
	if (img.size > RGPU_MAX_IMAGE) {
		image_too_big(img.size);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	if (img.kind == RGPU_IMAGE_BUNDLE) {
		/* a PTX-only -rdc wrapper: its containers go as one bundle, linked by the server */
		bundle = malloc(img.size);
		if (!bundle)
			return CUDA_ERROR_OUT_OF_MEMORY;
		rgpu_image_bundle_write(&img, bundle);
		img.data = bundle;
		pr_debug("a PTX-only -rdc image: %zu relocatable containers in a %zu-byte bundle",
			 img.prelinked, img.size);
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		free(bundle);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_init(&m->lock, NULL);
	m->library = library;
	m->image_size = img.size;
	m->o.owner = c;
	rgpu_sha256(img.data, img.size, m->hash);
	if (ip_obj_register(&m->o, ST_KIND_MODULE)) {
		module_free(m);
		free(bundle);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->o.owner = c;
	m->ctx = c;
	req.module = m->o.id;
	req.hash.data = m->hash;
	req.hash.len = sizeof(m->hash);
	req.image_size = img.size;
	req.library = library;
	req.ctx = c ? c->o.id : 0;
	/* a library goes to every server; the first server's reply describes its functions */
	int prev = library ? ip_pin_server(0) : ip_pin_dev(c->device);
	r = send_load(&req, &img, &rep);
	ip_pin_server(prev);
	for (int k = 1; library && k < ip_nservers() && r == CUDA_SUCCESS; k++) {
		Rgpu__ModuleLoadReply *more = NULL;
		ip_pin_server(k);
		r = send_load(&req, &img, &more);
		ip_pin_server(prev);
		if (more)
			rgpu__module_load_reply__free_unpacked(more, NULL);
	}
	if (r == CUDA_SUCCESS)
		r = take_functions(m, rep);
	if (rep)
		rgpu__module_load_reply__free_unpacked(rep, NULL);
	free(bundle);
	if (r != CUDA_SUCCESS) {
		ip_obj_forget(&m->o);
		module_free(m);
		return r;
	}
	*out = m;
	return CUDA_SUCCESS;
}

static CUresult read_file(const char *path, void **data)
{
	struct stat st;
	int fd;
	ssize_t n;
	uint8_t *buf;

	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	if (fstat(fd, &st) || st.st_size <= 0 || (uint64_t)st.st_size > RGPU_MAX_IMAGE) {
		if (st.st_size > 0)
			image_too_big((uint64_t)st.st_size);
		close(fd);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return CUDA_ERROR_FILE_NOT_FOUND;
	}
	buf[st.st_size] = '\0'; /* PTX text needs its terminator */
	*data = buf;
	return CUDA_SUCCESS;
}

/* ---- modules ------------------------------------------------------------------------------ */

IP_API CUresult CUDAAPI cuModuleLoadData(CUmodule *mod, const void *image)
{
	return load(image, 0, (struct ip_module **)mod);
}

IP_API CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n,
					   CUjit_option *opts, void **vals)
{
	/* JIT options only steer PTX compilation, which the server's driver does as it sees fit;
	 * report empty logs where the caller asked for them */
	for (unsigned i = 0; opts && vals && i < n; i++)
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
		    opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			vals[i] = (void *)(uintptr_t)0;
	return load(image, 0, (struct ip_module **)mod);
}

IP_API CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *mod, const void *fatbin)
{
	return load(fatbin, 0, (struct ip_module **)mod);
}

IP_API CUresult CUDAAPI cuModuleLoad(CUmodule *mod, const char *fname)
{
	void *data;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	r = read_file(fname, &data);
	if (r != CUDA_SUCCESS)
		return r;
	r = load(data, 0, (struct ip_module **)mod);
	free(data);
	return r;
}

static CUresult post_unload(void *req)
{
	return ip_post(RGPU_MSG_MODULE_UNLOAD, req, NULL, 0);
}

static CUresult post_func_get(void *req)
{
	return ip_post(RGPU_MSG_FUNC_GET, req, NULL, 0);
}

/* Forget a module's client objects; `tell` also unloads it on the server. */
static CUresult unload(struct ip_module *m, int tell)
{
	Rgpu__ObjRef req = RGPU__OBJ_REF__INIT;
	CUresult r = CUDA_SUCCESS;

	for (uint32_t i = 0; i < m->nfuncs; i++) {
		struct ip_func *f = m->funcs[i].handle;
		while (f && f->kfuncs) {
			struct ip_func *kf = f->kfuncs;
			f->kfuncs = kf->next;
			ip_obj_unregister(&kf->o);
		}
		if (f)
			ip_obj_unregister(&f->o);
	}
	ip_obj_unregister(&m->o);
	/* its globals are no device memory any more: copies to them fail, as natively */
	pthread_mutex_lock(&m->lock);
	for (struct ip_global *g = m->globals; g; g = g->next) {
		ip_global_del(g->addr, g->size);
		if (g->managed && managed_global)
			managed_global(g->ctx, g->addr, g->size, 0);
	}
	pthread_mutex_unlock(&m->lock);
	if (tell) {
		req.id = m->o.id;
		req.ctx = m->ctx ? m->ctx->o.id : 0;
		r = for_each_server(m, post_unload, &req);
	}
	/* the function objects stay allocated: stale handles must remain recognisably dead */
	return r;
}

IP_API CUresult CUDAAPI cuModuleUnload(CUmodule h)
{
	CUresult r;
	struct ip_module *m = module_of(h, 0, &r);
	return m ? unload(m, 1) : r;
}

/* A library outlives a context: only what it made in c goes (the server drops those too). */
static void library_ctx_teardown(struct ip_module *m, struct ip_ctx *c)
{
	struct ip_global **gp;

	pthread_mutex_lock(&m->lock);
	for (uint32_t i = 0; i < m->nfuncs; i++) {
		struct ip_func *k = m->funcs[i].handle, **fp;
		for (fp = k ? &k->kfuncs : NULL; fp && *fp;) {
			struct ip_func *f = *fp;
			if (f->ctx == c) {
				*fp = f->next;
				ip_obj_unregister(&f->o); /* allocated still: a stale handle stays dead */
			} else {
				fp = &f->next;
			}
		}
	}
	for (gp = &m->globals; *gp;) {
		struct ip_global *g = *gp;
		if (g->ctx == c) {
			*gp = g->next;
			ip_global_del(g->addr, g->size); /* copies may no longer name it */
			if (g->managed && managed_global)
				managed_global(g->ctx, g->addr, g->size, 0);
			free(g->name);
			free(g);
		} else {
			gp = &g->next;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void ip_module_ctx_teardown(struct ip_ctx *c)
{
	struct ip_obj **v = NULL;
	size_t n = 0;
	ip_obj_collect(c, ST_KIND_MODULE, &v, &n);
	for (size_t i = 0; i < n; i++)
		unload((struct ip_module *)v[i], 0); /* the server drops them with the context */
	free(v);
	v = NULL;
	ip_obj_collect(NULL, ST_KIND_MODULE, &v, &n); /* the libraries: they belong to none */
	for (size_t i = 0; i < n; i++)
		library_ctx_teardown((struct ip_module *)v[i], c);
	free(v);
}

static struct ip_funcinfo *find_info(struct ip_module *m, const char *name)
{
	struct ip_funcinfo key = {.name = (char *)name};
	return bsearch(&key, m->funcs, m->nfuncs, sizeof(*m->funcs), fi_cmp);
}

/* The one handle for (module, name): created and announced on first use. */
static CUresult get_func(struct ip_module *m, struct ip_funcinfo *fi, int kind,
			 struct ip_func **out)
{
	Rgpu__FuncGet req = RGPU__FUNC_GET__INIT;
	struct ip_func *f;
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&m->lock);
	f = fi->handle;
	if (!f) {
		f = ip_obj_new(sizeof(*f), kind, m->ctx);
		if (!f) {
			pthread_mutex_unlock(&m->lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		f->mod = m;
		f->info = fi;
		req.func = f->o.id;
		req.parent = m->o.id;
		req.name = fi->name;
		req.kind = kind == ST_KIND_KERNEL ? RGPU__FUNC_KIND__FUNC_LIBRARY_KERNEL
					     : RGPU__FUNC_KIND__FUNC_MODULE;
		req.ctx = m->ctx ? m->ctx->o.id : 0;
		r = for_each_server(m, post_func_get, &req);
		if (r != CUDA_SUCCESS) {
			/* not announced (everywhere): no handle, a later call tries again */
			pthread_mutex_unlock(&m->lock);
			ip_obj_drop(f);
			return r;
		}
		fi->handle = f;
	}
	pthread_mutex_unlock(&m->lock);
	*out = f;
	return r;
}

/* cuModuleGetFunction / cuLibraryGetKernel: the one handle for (module, name). */
static CUresult lookup(void **out, const void *h, const char *name, int library)
{
	struct ip_funcinfo *fi;
	CUresult r;
	struct ip_module *m = module_of(h, library, &r);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_HANDLE)
		return r; /* not initialised, or the session is gone: before argument checks */
	if (!out || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m)
		return r;
	fi = find_info(m, name);
	if (!fi)
		return CUDA_ERROR_NOT_FOUND;
	return get_func(m, fi, library ? ST_KIND_KERNEL : ST_KIND_FUNCTION, (struct ip_func **)out);
}

static CUresult count_funcs(unsigned *count, const void *h, int library)
{
	CUresult r;
	struct ip_module *m = module_of(h, library, &r);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_HANDLE)
		return r; /* not initialised, or the session is gone: before argument checks */
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if (m)
		*count = m->nfuncs;
	return r;
}

static CUresult enumerate(void **out, unsigned n, const void *h, int library)
{
	CUresult r;
	struct ip_module *m = module_of(h, library, &r);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_HANDLE)
		return r; /* not initialised, or the session is gone: before argument checks */
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; m && i < n && i < m->nfuncs && r == CUDA_SUCCESS; i++)
		r = get_func(m, &m->funcs[i], library ? ST_KIND_KERNEL : ST_KIND_FUNCTION,
			     (struct ip_func **)&out[i]);
	return r;
}

IP_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule h, const char *name)
{
	return lookup((void **)f, h, name, 0);
}

IP_API CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule h)
{
	return count_funcs(count, h, 0);
}

IP_API CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule h)
{
	return enumerate((void **)fns, n, h, 0);
}

/* A global's address, asked of the server once per (module, name). */
static CUresult get_global(struct ip_module *m, const char *name, CUdeviceptr *dptr,
			   size_t *bytes)
{
	Rgpu__GlobalGet req = RGPU__GLOBAL_GET__INIT;
	Rgpu__GlobalReply *rep = NULL;
	struct ip_global *g;
	CUresult r;

	struct ip_ctx *c = m->ctx;

	/*
	 * A library's global lives in each context that uses it: the current one's. The runtime
	 * asks for its __managed__ variables (cuLibraryGetManaged) before any context exists:
	 * then none (ctx 0), which the worker reads as device 0's primary context, as managed
	 * memory belongs to no context.
	 */
	if (!c && (r = ip_ctx_require(&c)) != CUDA_SUCCESS) {
		if (!m->library)
			return r;
		c = NULL;
	}
	pthread_mutex_lock(&m->lock);
	for (g = m->globals; g && (g->ctx != c || strcmp(g->name, name)); g = g->next)
		;
	pthread_mutex_unlock(&m->lock);
	if (!g) {
		req.module = m->o.id;
		req.name = (char *)name;
		req.library = m->library;
		req.ctx = c ? c->o.id : 0;
		req.global = ip_new_id();
		int prev = c ? ip_pin_dev(c->device) : ip_pin_server(0);
		r = ip_call_status(RGPU_MSG_GLOBAL_GET, &req.base, NULL, 0, NULL, 0,
				   &rgpu__global_reply__descriptor, (ProtobufCMessage **)&rep);
		ip_pin_server(prev);
		if (r != CUDA_SUCCESS) {
			if (rep)
				rgpu__global_reply__free_unpacked(rep, NULL);
			return r;
		}
		g = calloc(1, sizeof(*g));
		if (!g || !(g->name = strdup(name))) {
			free(g);
			rgpu__global_reply__free_unpacked(rep, NULL);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		g->addr = rep->addr;
		g->size = rep->size;
		g->ctx = c;
		g->managed = rep->managed;
		rgpu__global_reply__free_unpacked(rep, NULL);
		/* a __managed__ variable: the host reaches it through its address from now on */
		if (g->managed && (!managed_global ||
				   (r = managed_global(c, g->addr, g->size, 1)) != CUDA_SUCCESS)) {
			free(g->name);
			free(g);
			return managed_global ? r : CUDA_ERROR_NOT_SUPPORTED;
		}
		/* recorded for verification after a move: the driver, not rgpu, placed it */
		ip_global_add(g->addr, g->size, g->managed);
		pthread_mutex_lock(&m->lock);
		g->next = m->globals;
		m->globals = g;
		pthread_mutex_unlock(&m->lock);
	}
	if (dptr)
		*dptr = g->addr;
	if (bytes)
		*bytes = g->size;
	return CUDA_SUCCESS;
}

static CUresult global_of(CUdeviceptr *dptr, size_t *bytes, const void *h, const char *name,
			  int library);

IP_API CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule h,
					     const char *name)
{
	return global_of(dptr, bytes, h, name, 0);
}

/* ---- libraries and kernels ---------------------------------------------------------------- */

IP_API CUresult CUDAAPI cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo,
					  void **jv, unsigned int njo, CUlibraryOption *lo,
					  void **lv, unsigned int nlo)
{
	/*
	 * The runtime passes BINARY_IS_PRESERVED; the image is shipped (or found by hash) right
	 * away, so neither it nor the JIT options change what happens here.
	 */
	(void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
	return load(code, 1, (struct ip_module **)lib);
}

IP_API CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *lib, const char *fname, CUjit_option *jo,
					      void **jv, unsigned int njo, CUlibraryOption *lo,
					      void **lv, unsigned int nlo)
{
	void *data;
	CUresult r = ip_check_init();
	(void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
	if (r != CUDA_SUCCESS)
		return r;
	r = read_file(fname, &data);
	if (r != CUDA_SUCCESS)
		return r;
	r = load(data, 1, (struct ip_module **)lib);
	free(data);
	return r;
}

IP_API CUresult CUDAAPI cuLibraryUnload(CUlibrary h)
{
	CUresult r;
	struct ip_module *m = module_of(h, 1, &r);
	return m ? unload(m, 1) : r;
}

IP_API CUresult CUDAAPI cuLibraryGetKernel(CUkernel *k, CUlibrary h, const char *name)
{
	return lookup((void **)k, h, name, 1);
}

IP_API CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary h)
{
	return count_funcs(count, h, 1);
}

IP_API CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *ks, unsigned int n, CUlibrary h)
{
	return enumerate((void **)ks, n, h, 1);
}

static CUresult global_of(CUdeviceptr *dptr, size_t *bytes, const void *h, const char *name,
			  int library)
{
	CUresult r;
	struct ip_module *m = module_of(h, library, &r);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_HANDLE)
		return r; /* not initialised, or the session is gone: before argument checks */
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	return m ? get_global(m, name, dptr, bytes) : r;
}

IP_API CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary h,
					   const char *name)
{
	return global_of(dptr, bytes, h, name, 1);
}

/* The runtime finds a __managed__ variable with it; the server says it is managed. */
IP_API CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary h,
					    const char *name)
{
	return global_of(dptr, bytes, h, name, 1);
}

/* The kernel's function in the current context: one handle per (kernel, context). */
IP_API CUresult CUDAAPI cuKernelGetFunction(CUfunction *pfunc, CUkernel k)
{
	Rgpu__FuncGet req = RGPU__FUNC_GET__INIT;
	struct ip_func *kern, *f;
	struct ip_ctx *c;
	CUresult r;

	if (!pfunc)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	kern = ip_obj_get(k, ST_KIND_KERNEL);
	if (!kern)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&kern->mod->lock);
	for (f = kern->kfuncs; f && f->ctx != c; f = f->next)
		;
	if (!f) {
		f = ip_obj_new(sizeof(*f), ST_KIND_FUNCTION, c);
		if (!f) {
			pthread_mutex_unlock(&kern->mod->lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		f->mod = kern->mod;
		f->info = kern->info;
		f->ctx = c;
		req.func = f->o.id;
		req.parent = kern->o.id;
		req.kind = RGPU__FUNC_KIND__FUNC_KERNEL_FUNCTION;
		req.name = kern->info->name;
		req.ctx = c->o.id;
		r = ip_post(RGPU_MSG_FUNC_GET, &req.base, NULL, 0);
		if (r != CUDA_SUCCESS) {
			/* not announced: no handle, a later call tries again */
			pthread_mutex_unlock(&kern->mod->lock);
			ip_obj_drop(f);
			return r;
		}
		f->next = kern->kfuncs;
		kern->kfuncs = f;
	}
	pthread_mutex_unlock(&kern->mod->lock);
	*pfunc = (CUfunction)f;
	return r;
}

/* ---- function and kernel queries ---------------------------------------------------------- */

/* A CUfunction argument may also be a CUkernel cast to CUfunction (dark-api.md §7). */
static struct ip_func *func_any(const void *h)
{
	struct ip_func *f = ip_obj_get(h, ST_KIND_FUNCTION);
	return f ? f : ip_obj_get(h, ST_KIND_KERNEL);
}

static CUresult param_info(const void *h, size_t index, size_t *off, size_t *size)
{
	struct ip_func *f = func_any(h);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (index >= f->info->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	if (off)
		*off = f->info->offset[index];
	if (size)
		*size = f->info->size[index];
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuFuncGetParamInfo(CUfunction h, size_t i, size_t *off, size_t *size)
{
	return param_info(h, i, off, size);
}

IP_API CUresult CUDAAPI cuKernelGetParamInfo(CUkernel h, size_t i, size_t *off, size_t *size)
{
	return param_info(h, i, off, size);
}

IP_API CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction h)
{
	struct ip_func *f = func_any(h);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->info->name;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel h)
{
	return cuFuncGetName(name, (CUfunction)h);
}

IP_API CUresult CUDAAPI cuFuncGetModule(CUmodule *mod, CUfunction h)
{
	struct ip_func *f = ip_obj_get(h, ST_KIND_FUNCTION);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f || f->mod->library)
		return CUDA_ERROR_INVALID_HANDLE;
	*mod = (CUmodule)f->mod;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction h)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	if (!func_any(h))
		return CUDA_ERROR_INVALID_HANDLE;
	*state = CU_FUNCTION_LOADING_STATE_LOADED;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuFuncLoad(CUfunction h)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	return func_any(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/*
 * Attributes: asked of the server once and cached; a set updates the cache and the server.
 * A kernel's attributes are per device, so kernels cache only for device 0.
 */
static CUresult attr_get(struct ip_func *f, CUfunction_attribute a, int dev, int *v)
{
	Rgpu__FuncAttr req = RGPU__FUNC_ATTR__INIT;
	Rgpu__ValueReply *rep = NULL;
	int cacheable = (int)a >= 0 && a < IP_FUNC_ATTR_CACHE && dev == 0;
	struct ip_ctx *c = ip_ctx_cur();
	CUresult r;

	if (cacheable && f->attr_valid[a]) {
		*v = f->attr_val[a];
		return CUDA_SUCCESS;
	}
	req.func = f->o.id;
	req.attrib = a;
	req.device = dev;
	struct ip_ctx *in = f->ctx ? f->ctx : c ? c : f->mod->ctx;
	req.ctx = in ? in->o.id : 0;
	ip_route_ctx(in);
	r = ip_call_status(RGPU_MSG_FUNC_GET_ATTR, &req.base, NULL, 0, NULL, 0,
			   &rgpu__value_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r == CUDA_SUCCESS) {
		*v = (int)rep->value;
		if (cacheable) {
			f->attr_val[a] = *v;
			f->attr_valid[a] = 1;
		}
	}
	if (rep)
		rgpu__value_reply__free_unpacked(rep, NULL);
	return r;
}

static CUresult attr_set(struct ip_func *f, CUfunction_attribute a, int dev, int v)
{
	Rgpu__FuncAttr req = RGPU__FUNC_ATTR__INIT;
	struct ip_ctx *c = ip_ctx_cur();
	req.func = f->o.id;
	req.attrib = a;
	req.value = v;
	req.device = dev;
	struct ip_ctx *in = f->ctx ? f->ctx : c ? c : f->mod->ctx;
	req.ctx = in ? in->o.id : 0;
	ip_route_ctx(in);
	if ((int)a >= 0 && a < IP_FUNC_ATTR_CACHE)
		f->attr_valid[a] = 0; /* the driver may round the value: ask again next time */
	/* shared memory and carve-out change what fits on an SM: occupancy answers are stale */
	atomic_fetch_add(&f->attr_gen, 1);
	return ip_post(RGPU_MSG_FUNC_SET_ATTR, &req.base, NULL, 0);
}

IP_API CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction h)
{
	struct ip_func *f = func_any(h);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!v || (int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	return attr_get(f, a, 0, v);
}

IP_API CUresult CUDAAPI cuFuncSetAttribute(CUfunction h, CUfunction_attribute a, int v)
{
	struct ip_func *f = func_any(h);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if ((int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	return attr_set(f, a, 0, v);
}

IP_API CUresult CUDAAPI cuKernelGetAttribute(int *v, CUfunction_attribute a, CUkernel h,
					     CUdevice dev)
{
	struct ip_func *f = ip_obj_get(h, ST_KIND_KERNEL);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!v || (int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return attr_get(f, a, dev, v);
}

IP_API CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel h,
					     CUdevice dev)
{
	struct ip_func *f = ip_obj_get(h, ST_KIND_KERNEL);
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if ((int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev < 0 || dev >= ip.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	return attr_set(f, a, dev, v);
}

/* Forwarded and recorded (a replay sets them again); the function's context does it. */
static CUresult func_config(CUfunction h, int kind, int value)
{
	struct ip_func *f = func_any(h);
	struct ip_ctx *c;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	c = f->ctx ? f->ctx : f->mod ? f->mod->ctx : NULL;
	if (!c && (r = ip_ctx_require(&c)) != CUDA_SUCCESS)
		return r;
	return ip_config_set(c, f->o.id, kind, value);
}

IP_API CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction h, CUfunc_cache config)
{
	return func_config(h, RGPU__CONFIG_KIND__CONFIG_CACHE, (int)config);
}

IP_API CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction h, CUsharedconfig config)
{
	return func_config(h, RGPU__CONFIG_KIND__CONFIG_SHARED_MEM, (int)config);
}
