/*
 * Handlers for modules and libraries: loading an image (sent with the request, or found in the
 * module cache by its hash; checked before the driver sees it), unloading one with the functions
 * and kernels taken from it, looking up functions, kernels and globals, function attributes, and
 * occupancy queries. A global the client looks up becomes device memory it may name until its
 * module is unloaded (srv_remember_global, srv_forget_globals: window_map.c).
 */
#define LOG_PREFIX "exec: "
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/image.h"
#include "rgpu/jitopt.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- modules ---------------------------------------------------------------------------- */

/* Every function of a loaded module or library with its parameter layout. */
static CUresult list_functions(struct srv_worker *w, struct srv_obj *o,
			       Rgpu__ModuleLoadReply *rep)
{
	struct srv_driver *d = &w->drv;
	unsigned n = 0;
	void **hs;
	CUresult r;

	r = o->library ? d->cuLibraryGetKernelCount(&n, o->h)
				   : d->cuModuleGetFunctionCount(&n, o->h);
	if (r != CUDA_SUCCESS || n == 0)
		return r;
	hs = calloc(n, sizeof(*hs));
	rep->functions = calloc(n, sizeof(*rep->functions));
	if (!hs || !rep->functions) {
		free(hs);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = o->library ? d->cuLibraryEnumerateKernels((CUkernel *)hs, n, o->h)
				   : d->cuModuleEnumerateFunctions((CUfunction *)hs, n, o->h);
	for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++) {
		Rgpu__FuncInfo *fi = calloc(1, sizeof(*fi));
		const char *name = NULL;
		uint32_t offs[1024], sizes[1024];
		size_t np = 0;

		if (!fi) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		rgpu__func_info__init(fi);
		rep->functions[rep->n_functions++] = fi;
		r = o->library ? d->cuKernelGetName(&name, hs[i])
					   : d->cuFuncGetName(&name, hs[i]);
		if (r != CUDA_SUCCESS)
			break;
		fi->name = strdup(name);
		for (np = 0; np < ARRAY_SIZE(offs); np++) {
			size_t off = 0, sz = 0;
			CUresult pr = o->library
					      ? d->cuKernelGetParamInfo(hs[i], np, &off, &sz)
					      : d->cuFuncGetParamInfo(hs[i], np, &off, &sz);
			if (pr != CUDA_SUCCESS)
				break;
			offs[np] = (uint32_t)off;
			sizes[np] = (uint32_t)sz;
		}
		fi->n_param_offset = fi->n_param_size = np;
		fi->param_offset = malloc(np * sizeof(uint32_t) + 1);
		fi->param_size = malloc(np * sizeof(uint32_t) + 1);
		if (!fi->name || !fi->param_offset || !fi->param_size) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		memcpy(fi->param_offset, offs, np * sizeof(uint32_t));
		memcpy(fi->param_size, sizes, np * sizeof(uint32_t));
	}
	free(hs);
	return r;
}

static void free_functions(Rgpu__ModuleLoadReply *rep)
{
	for (size_t i = 0; i < rep->n_functions; i++) {
		free(rep->functions[i]->name);
		free(rep->functions[i]->param_offset);
		free(rep->functions[i]->param_size);
		free(rep->functions[i]);
	}
	free(rep->functions);
}

int h_module_load(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ModuleLoad, module_load, w, f);
	Rgpu__ModuleLoadReply rep = RGPU__MODULE_LOAD_REPLY__INIT;
	struct srv_obj o = {.id = m->module, .kind = ST_KIND_MODULE, .library = m->library,
			    .ctx = m->ctx};
	void *image = NULL, *wrap = NULL;
	const void *code;
	size_t len = 0;
	int owned = 0, ret;
	char hexbuf[16];
	/* a library belongs to no context (the client's module.c says why) */
	CUresult r = m->library && !m->ctx ? CUDA_SUCCESS : srv_use_ctx(w, m->ctx);

	if (r != CUDA_SUCCESS)
		goto reply;
	if (m->hash.len != RGPU_HASH_LEN || srv_obj_find(w, m->module, 0)) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto reply;
	}
	if (m->has_image) {
		uint8_t h[RGPU_HASH_LEN];
		image = f->payload;
		len = f->hdr.payload_len;
		rgpu_sha256(image, len, h);
		if (len != m->image_size || memcmp(h, m->hash.data, RGPU_HASH_LEN) ||
		    rgpu_image_check(image, len)) {
			pr_warn("module image refused: size, hash or headers do not match");
			r = CUDA_ERROR_INVALID_IMAGE;
			goto reply;
		}
	} else if (w->image_lookup && w->image_lookup(w, m->hash.data, &image, &len) == 0) {
		/* a restore: the image from the checkpoint, checked against its hash */
		owned = 1;
	} else if (!w->modcache ||
		   /* only an image its tenant shipped itself; a replay is the operator's: any */
		   srv_modcache_get(w->modcache, w->replaying ? NULL : w->tenant, m->hash.data,
				    &image, &len) != 0) {
		rep.need_image = 1;
		goto reply;
	} else {
		owned = 1;
		pr_info("module image %s: %zu bytes from the cache",
			rgpu_hex(m->hash.data, 6, hexbuf), len);
	}
	code = image;
	if (len >= 4 && rd_le32(image) == RGPU_IMAGE_BUNDLE_MAGIC) {
		/* a PTX-only -rdc program: the driver JIT-links the wrapper made of its bundle */
		ret = rgpu_image_bundle_wrap(image, len, &wrap);
		if (ret) {
			if (ret == RGPU_ENOMEM)
				pr_err("out of memory wrapping a %zu-byte link bundle", len);
			else
				pr_warn("module image refused: a link bundle whose headers do not "
					"describe it");
			r = ret == RGPU_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
			goto reply;
		}
		code = wrap;
	}
	if (m->library)
		r = w->drv.cuLibraryLoadData((CUlibrary *)&o.h, code, NULL, NULL, 0, NULL, NULL, 0);
	else
		r = w->drv.cuModuleLoadData((CUmodule *)&o.h, code);
	free(wrap);
	if (m->has_image) {
		const char *cached;
		/*
		 * Kept only once the driver has accepted it: an image it refuses would otherwise
		 * fill the cache, and be refused again at every load by its hash.
		 */
		if (r != CUDA_SUCCESS)
			cached = " (the driver refused it: not cached)";
		else if (!w->modcache ||
			 srv_modcache_put(w->modcache, w->tenant, w->limits.module_cache,
					  m->hash.data, image, len))
			cached = " (not cached)";
		else
			cached = " and cached";
		pr_info("module image %s: %zu bytes received%s", rgpu_hex(m->hash.data, 6, hexbuf),
			len, cached);
	}
	if (r != CUDA_SUCCESS)
		goto reply;
	srv_ckpt_keep_image(w, m->hash.data, image, len);
	r = list_functions(w, &o, &rep);
	if (r != CUDA_SUCCESS)
		srv_obj_release(w, &o);
	else
		r = srv_obj_create(w, &o);
reply:
	if (owned)
		free(image);
	rep.result = (int32_t)r;
	ret = srv_reply(w, f, &rep.base);
	free_functions(&rep);
	rgpu__module_load__free_unpacked(m, NULL);
	return ret;
}

/* Its functions, kernels and globals go with it: the state log's removal (statelog.c). */
int h_module_unload(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ObjRef, obj_ref, w, f);
	struct srv_obj *o = srv_obj_find(w, m->id, ST_KIND_MODULE);

	srv_async_error(w, o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE, "module unload");
	rgpu__obj_ref__free_unpacked(m, NULL);
	return 0;
}

/* The bytes a function's or kernel's parameters span: the end of the furthest one. */
static uint64_t param_bytes(struct srv_worker *w, const struct srv_obj *o)
{
	uint64_t end = 0;

	/* the driver answers an error past the last parameter; 32764 bytes hold no more */
	for (size_t i = 0; i < 32768; i++) {
		size_t off = 0, sz = 0;
		CUresult r = o->kind == ST_KIND_KERNEL
				 ? w->drv.cuKernelGetParamInfo(o->h, i, &off, &sz)
				 : w->drv.cuFuncGetParamInfo(o->h, i, &off, &sz);
		if (r != CUDA_SUCCESS)
			break;
		end = MAX(end, (uint64_t)off + sz);
	}
	return end;
}

int h_func_get(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, FuncGet, func_get, w, f);
	struct srv_obj *p = srv_obj_find(w, m->parent, 0);
	struct srv_obj o = {.id = m->func, .parent = m->parent, .ctx = p ? p->ctx : 0};
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	if (p && m->kind == RGPU__FUNC_KIND__FUNC_MODULE && p->kind == ST_KIND_MODULE &&
	    !p->library) {
		o.kind = ST_KIND_FUNCTION;
		r = w->drv.cuModuleGetFunction((CUfunction *)&o.h, p->h, m->name);
	} else if (p && m->kind == RGPU__FUNC_KIND__FUNC_LIBRARY_KERNEL &&
		   p->kind == ST_KIND_MODULE && p->library) {
		o.kind = ST_KIND_KERNEL;
		r = w->drv.cuLibraryGetKernel((CUkernel *)&o.h, p->h, m->name);
	} else if (p && m->kind == RGPU__FUNC_KIND__FUNC_KERNEL_FUNCTION &&
		   p->kind == ST_KIND_KERNEL) {
		o.kind = ST_KIND_FUNCTION;
		o.ctx = m->ctx;
		r = srv_use_ctx(w, m->ctx);
		if (r == CUDA_SUCCESS)
			r = w->drv.cuKernelGetFunction((CUfunction *)&o.h, p->h);
	}
	if (r == CUDA_SUCCESS) {
		o.size = param_bytes(w, &o);
		r = srv_obj_create(w, &o);
	}
	srv_async_error(w, r, "function lookup");
	rgpu__func_get__free_unpacked(m, NULL);
	return 0;
}

int h_global_get(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GlobalGet, global_get, w, f);
	Rgpu__GlobalReply rep = RGPU__GLOBAL_REPLY__INIT;
	struct srv_obj *o = srv_obj_find(w, m->module, ST_KIND_MODULE);
	CUdeviceptr p = 0;
	size_t sz = 0;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int ret;

	if (o && o->library == m->library) {
		r = srv_use_ctx_or_base(w, m->ctx ? m->ctx : o->ctx);
		if (r == CUDA_SUCCESS)
			r = m->library ? w->drv.cuLibraryGetGlobal(&p, &sz, o->h, m->name)
				       : w->drv.cuModuleGetGlobal(&p, &sz, o->h, m->name);
		/* a library's __managed__ variable comes from cuLibraryGetManaged (the runtime's) */
		if (r != CUDA_SUCCESS && m->library &&
		    w->drv.cuLibraryGetManaged(&p, &sz, o->h, m->name) == CUDA_SUCCESS)
			r = CUDA_SUCCESS;
	}
	if (r == CUDA_SUCCESS) {
		unsigned managed = 0;
		srv_remember_global(w, m->module, p, sz);
		/* a __managed__ variable: the client holds its CPU copy (interposer/managed.c) */
		if (w->drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) ==
		    CUDA_SUCCESS)
			rep.managed = managed != 0;
	}
	rep.result = (int32_t)r;
	rep.addr = p;
	rep.size = sz;
	ret = srv_reply(w, f, &rep.base);
	rgpu__global_get__free_unpacked(m, NULL);
	return ret;
}

int h_func_attr(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, FuncAttr, func_attr, w, f);
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	int set = f->hdr.type == RGPU_MSG_FUNC_SET_ATTR;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int v = 0, ret = 0;

	if (o && (o->kind == ST_KIND_FUNCTION || o->kind == ST_KIND_KERNEL)) {
		CUfunction_attribute a = (CUfunction_attribute)m->attrib;
		int dev;
		if (o->kind == ST_KIND_FUNCTION) {
			r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
			if (r == CUDA_SUCCESS)
				r = set ? w->drv.cuFuncSetAttribute(o->h, a, (int)m->value)
					: w->drv.cuFuncGetAttribute(&v, a, o->h);
		} else if ((dev = srv_dev_local(w, m->device, "kernel attribute")) < 0) {
			/* a kernel's attribute is per device: the client's number */
			r = CUDA_ERROR_INVALID_DEVICE;
		} else {
			r = set ? w->drv.cuKernelSetAttribute(a, (int)m->value, o->h, w->dev[dev])
				: w->drv.cuKernelGetAttribute(&v, a, o->h, w->dev[dev]);
		}
	}
	if (set) {
		srv_async_error(w, r, "function attribute");
	} else {
		ret = srv_reply_value(w, f, r, v);
	}
	rgpu__func_attr__free_unpacked(m, NULL);
	return ret;
}

/* ---- occupancy -------------------------------------------------------------------------- */

#define OCC_MAX_QUERIES 1024

int h_occupancy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Occupancy, occupancy, w, f);
	Rgpu__OccupancyReply rep = RGPU__OCCUPANCY_REPLY__INIT;
	struct srv_obj *o = srv_obj_find(w, m->func, 0);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	int64_t vals[OCC_MAX_QUERIES];
	size_t n = MIN(m->n_block_size, m->n_dyn_smem);
	int ret;

	if (n > OCC_MAX_QUERIES || m->n_block_size != m->n_dyn_smem) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (o && (o->kind == ST_KIND_FUNCTION || o->kind == ST_KIND_KERNEL) &&
		   (m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_ACTIVE_CLUSTERS ||
		    m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_CLUSTER_SIZE)) {
		CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
		CUlaunchConfig cfg;
		struct launch_dims d = {{m->grid_x, m->grid_y, m->grid_z},
					{m->block_x, m->block_y, m->block_z}, m->shared_mem};
		int v = 0;
		r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
		if (r == CUDA_SUCCESS)
			r = srv_build_config(w, &d, &m->attrs, NULL, &cfg, attrs);
		if (r == CUDA_SUCCESS)
			r = m->kind == RGPU__OCCUPANCY_KIND__OCC_MAX_ACTIVE_CLUSTERS
				    ? w->drv.cuOccupancyMaxActiveClusters(&v, o->h, &cfg)
				    : w->drv.cuOccupancyMaxPotentialClusterSize(&v, o->h, &cfg);
		vals[0] = v;
		n = 1;
	} else if (o && (o->kind == ST_KIND_FUNCTION || o->kind == ST_KIND_KERNEL)) {
		r = srv_use_ctx(w, o->ctx ? o->ctx : m->ctx);
		for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
			if (m->kind == RGPU__OCCUPANCY_KIND__OCC_ACTIVE_BLOCKS) {
				int blocks = 0;
				r = w->drv.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
					&blocks, o->h, (int)m->block_size[i], (size_t)m->dyn_smem[i],
					m->flags);
				vals[i] = blocks;
			} else {
				size_t smem = 0;
				r = w->drv.cuOccupancyAvailableDynamicSMemPerBlock(
					&smem, o->h, (int)m->dyn_smem[i], (int)m->block_size[i]);
				vals[i] = (int64_t)smem;
			}
		}
	}
	rep.result = (int32_t)r;
	if (r == CUDA_SUCCESS) {
		rep.n_value = n;
		rep.value = vals;
	}
	ret = srv_reply(w, f, &rep.base);
	rgpu__occupancy__free_unpacked(m, NULL);
	return ret;
}

/* ---- JIT linking ------------------------------------------------------------------------ */

/*
 * A client's options as the driver takes them: numbers in their slots, and for a log buffer
 * one of ours of the size the client asked (at most RGPU_JIT_MAX_LOG), never its pointer.
 * Returns CUDA_SUCCESS or CUDA_ERROR_INVALID_VALUE (too many, or one that may not cross).
 */
static CUresult link_options(Rgpu__LinkOption **in, size_t n, CUjit_option *opt, void **val,
			     char *logs[2], size_t log_size[2])
{
	if (n > RGPU_JIT_MAX_OPTIONS)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++) {
		int kind = rgpu_jit_opt_kind(in[i]->option);
		opt[i] = (CUjit_option)in[i]->option;
		val[i] = (void *)(uintptr_t)in[i]->value;
		if (kind == RGPU_JIT_REFUSED)
			return CUDA_ERROR_INVALID_VALUE;
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
		    opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
			int which = opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
			log_size[which] = MIN((size_t)(unsigned)in[i]->value, (size_t)RGPU_JIT_MAX_LOG);
			val[i] = (void *)(uintptr_t)log_size[which];
		}
	}
	for (size_t i = 0; i < n; i++) {
		/* a size given twice: every slot says the one the buffer is made with */
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
		    opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			val[i] = (void *)(uintptr_t)
			    log_size[opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
		if (rgpu_jit_opt_kind(opt[i]) != RGPU_JIT_LOG)
			continue;
		int which = opt[i] == CU_JIT_ERROR_LOG_BUFFER;
		if (!logs[which] && log_size[which])
			logs[which] = calloc(1, log_size[which]);
		if (log_size[which] && !logs[which])
			return CUDA_ERROR_OUT_OF_MEMORY;
		val[i] = logs[which];
	}
	return CUDA_SUCCESS;
}

/*
 * MSG_LINK: one whole link on this worker's driver, from cuLinkCreate to cuLinkDestroy. The
 * link state lives on the client (interposer/jitlink.c), so nothing here outlives the call and
 * nothing is recorded: the program loads the image it gets with cuModuleLoadData.
 */
int h_link(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, Link, link, w, f);
	Rgpu__LinkReply rep = RGPU__LINK_REPLY__INIT;
	CUjit_option opt[RGPU_JIT_MAX_OPTIONS], iopt[RGPU_JIT_MAX_OPTIONS];
	void *val[RGPU_JIT_MAX_OPTIONS] = {0}, *ival[RGPU_JIT_MAX_OPTIONS];
	void *passed[RGPU_JIT_MAX_OPTIONS];
	uint64_t after[RGPU_JIT_MAX_OPTIONS];
	char *logs[2] = {NULL, NULL};
	size_t log_size[2] = {0, 0}, off = 0;
	CUlinkState st = NULL;
	void *image = NULL;
	size_t image_size = 0;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret;

	rep.failed_input = -1;
	if (r == CUDA_SUCCESS)
		r = link_options(m->options, m->n_options, opt, val, logs, log_size);
	if (r == CUDA_SUCCESS && m->n_inputs > RGPU_JIT_MAX_INPUTS)
		r = CUDA_ERROR_INVALID_VALUE;
	memcpy(passed, val, sizeof(passed));
	if (r == CUDA_SUCCESS)
		r = w->drv.cuLinkCreate((unsigned)m->n_options, opt, val, &st);
	for (size_t i = 0; r == CUDA_SUCCESS && i < m->n_inputs; i++) {
		Rgpu__LinkInput *in = m->inputs[i];
		char *none[2] = {NULL, NULL};
		size_t nsize[2] = {0, 0};
		uint8_t *data = (uint8_t *)f->payload + off, *copy = NULL;

		if (in->size == 0 || in->size > f->hdr.payload_len - off) {
			r = CUDA_ERROR_INVALID_VALUE;
		} else {
			r = link_options(in->options, in->n_options, iopt, ival, none, nsize);
			/* per-input options take no log buffers (cuLinkAddData's documentation) */
			if (r == CUDA_SUCCESS && (none[0] || none[1]))
				r = CUDA_ERROR_INVALID_VALUE;
			free(none[0]);
			free(none[1]);
		}
		if (r == CUDA_SUCCESS && in->type == CU_JIT_INPUT_PTX && data[in->size - 1]) {
			/* the driver reads PTX up to its NUL: make sure it stops inside the input */
			if (!(copy = malloc(in->size + 1)))
				r = CUDA_ERROR_OUT_OF_MEMORY;
			else {
				memcpy(copy, data, in->size);
				copy[in->size] = 0;
			}
		}
		if (r == CUDA_SUCCESS &&
		    (in->type == CU_JIT_INPUT_CUBIN || in->type == CU_JIT_INPUT_FATBINARY) &&
		    rgpu_image_check(data, in->size)) {
			pr_warn("link input refused: its headers do not describe its %llu bytes",
				(unsigned long long)in->size);
			r = CUDA_ERROR_INVALID_IMAGE;
		}
		if (r == CUDA_SUCCESS)
			r = w->drv.cuLinkAddData(st, (CUjitInputType)in->type, copy ? copy : data,
						 in->size + (copy ? 1 : 0),
						 in->name && *in->name ? in->name : NULL,
						 (unsigned)in->n_options, iopt, ival);
		free(copy);
		if (r != CUDA_SUCCESS)
			rep.failed_input = (int32_t)i;
		off += in->size;
	}
	if (r == CUDA_SUCCESS && m->complete)
		r = w->drv.cuLinkComplete(st, &image, &image_size);
	if (r == CUDA_SUCCESS && image_size > RGPU_MAX_BODY / 2) {
		pr_warn("linked image of %zu bytes refused: the reply's body holds at most %u",
			image_size, RGPU_MAX_BODY / 2);
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	rep.result = (int32_t)r;
	if (r == CUDA_SUCCESS && m->complete) {
		rep.image.data = image;
		rep.image.len = image_size;
	}
	/* what the driver wrote into the slots; a slot it left alone goes back as the client
	 * sent it (ours may differ: a log size we bounded) */
	for (size_t i = 0; i < m->n_options && i < RGPU_JIT_MAX_OPTIONS; i++) {
		after[i] = m->options[i]->value;
		if (rgpu_jit_opt_kind(opt[i]) == RGPU_JIT_OUT && val[i] != passed[i])
			after[i] = (uint64_t)(uintptr_t)val[i];
	}
	rep.values = after;
	rep.n_values = MIN(m->n_options, (size_t)RGPU_JIT_MAX_OPTIONS);
	if (logs[0]) {
		rep.info_log.data = (uint8_t *)logs[0];
		rep.info_log.len = strnlen(logs[0], log_size[0]);
	}
	if (logs[1]) {
		rep.error_log.data = (uint8_t *)logs[1];
		rep.error_log.len = strnlen(logs[1], log_size[1]);
	}
	ret = srv_reply(w, f, &rep.base);
	if (st)
		w->drv.cuLinkDestroy(st); /* the image and the logs are sent: free them now */
	free(logs[0]);
	free(logs[1]);
	rgpu__link__free_unpacked(m, NULL);
	return ret;
}
