/*
 * JIT linking, as a CPU double can: cuLinkAddData checks each input (PTX must parse, a cubin
 * or fatbin must load, a library must be an ar archive) and refuses the rest with
 * CUDA_ERROR_INVALID_PTX or CUDA_ERROR_INVALID_IMAGE and a line in the error log; cuLinkComplete
 * makes one PTX text of the PTX inputs (so the linked image exposes every .entry they declare,
 * and cuModuleLoadData runs their C twins by name), or hands back a lone cubin or fatbin input.
 * Archives (libcudadevrt.a) are accepted and add nothing. Log buffers and the wall time are
 * written as the driver writes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define LINK_MAGIC 0x4c4e4b53u

struct sim_link_state {
	uint32_t magic;
	unsigned nopt;
	CUjit_option *opt; /* the program's arrays: they stay valid for the link's life */
	void **val;
	char *ptx;	/* the PTX inputs, one after another */
	size_t ptx_len;
	void *image;	/* a lone cubin or fatbin input */
	size_t image_len;
	char *out;	/* what cuLinkComplete gave */
	size_t cap[2];	/* the log buffers' sizes as given (the slots then say what was filled) */
	CUresult spoilt; /* the first refused input: later inputs and the link fail so, as the
			    H200's driver's link state does */
};

/* write text into the log of kind buf_opt (CU_JIT_INFO/ERROR_LOG_BUFFER) */
static void put_log(struct sim_link_state *l, CUjit_option buf_opt, const char *text)
{
	CUjit_option size_opt = buf_opt == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
								 : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	char *buf = NULL;
	int si = -1;

	for (unsigned i = 0; i < l->nopt; i++) {
		if (l->opt[i] == buf_opt)
			buf = l->val[i];
		if (l->opt[i] == size_opt)
			si = (int)i;
	}
	size_t cap = l->cap[buf_opt == CU_JIT_ERROR_LOG_BUFFER], n = strlen(text);
	if (!buf || si < 0 || !cap)
		return;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, text, n);
	buf[n] = 0;
	l->val[si] = (void *)(uintptr_t)(n + 1);
}

static bool verbose(const struct sim_link_state *l)
{
	for (unsigned i = 0; i < l->nopt; i++)
		if (l->opt[i] == CU_JIT_LOG_VERBOSE && l->val[i])
			return true;
	return false;
}

CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option *opt, void **val, CUlinkState *out)
{
	struct sim_link_state *l;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!out || (n && (!opt || !val)))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++)
		if ((unsigned)opt[i] >= CU_JIT_NUM_OPTIONS)
			return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if (!(l = calloc(1, sizeof(*l))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->magic = LINK_MAGIC;
	l->nopt = n;
	l->opt = opt;
	l->val = val;
	for (unsigned i = 0; i < n; i++)
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
		    opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			l->cap[opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES] = (unsigned)(uintptr_t)val[i];
	for (unsigned i = 0; i < n; i++)
		if (opt[i] == CU_JIT_INFO_LOG_BUFFER || opt[i] == CU_JIT_ERROR_LOG_BUFFER)
			put_log(l, opt[i], "");
	*out = (CUlinkState)l;
	return CUDA_SUCCESS;
}

static struct sim_link_state *link_get(CUlinkState h)
{
	struct sim_link_state *l = (struct sim_link_state *)h;
	return l && l->magic == LINK_MAGIC ? l : NULL;
}

static CUresult refuse(struct sim_link_state *l, CUresult r, const char *name, const char *why)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "error   : simgpu: input %s: %s\n", name ? name : "(unnamed)",
		 why);
	put_log(l, CU_JIT_ERROR_LOG_BUFFER, msg);
	if (!l->spoilt)
		l->spoilt = r;
	return r;
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState h, CUjitInputType type, void *data, size_t size,
				  const char *name, unsigned int n, CUjit_option *opt, void **val)
{
	struct sim_link_state *l = link_get(h);
	struct sim_image *img = NULL;
	char *copy;
	CUresult r;

	SIM_ENTER();
	(void)opt;
	(void)val;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || !size || (n && (!opt || !val)))
		return CUDA_ERROR_INVALID_VALUE;
	if (l->spoilt)
		return l->spoilt;
	switch (type) {
	case CU_JIT_INPUT_PTX:
		if (!(copy = malloc(size + 1)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(copy, data, size);
		copy[size] = 0;
		size = strlen(copy);
		if (sim_image_load(copy, &img) != CUDA_SUCCESS) {
			free(copy);
			return refuse(l, CUDA_ERROR_INVALID_IMAGE, name, "not PTX (no .version)");
		}
		sim_image_free(img);
		char *p = realloc(l->ptx, l->ptx_len + size + 2);
		if (!p) {
			free(copy);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		l->ptx = p;
		memcpy(p + l->ptx_len, copy, size);
		l->ptx_len += size;
		p[l->ptx_len++] = '\n';
		p[l->ptx_len] = 0;
		free(copy);
		break;
	case CU_JIT_INPUT_CUBIN:
	case CU_JIT_INPUT_FATBINARY:
	case CU_JIT_INPUT_OBJECT:
		if ((r = sim_image_load(data, &img)) != CUDA_SUCCESS)
			return refuse(l, CUDA_ERROR_INVALID_IMAGE, name, "not a cubin or fatbin");
		sim_image_free(img);
		if (l->image)
			return refuse(l, CUDA_ERROR_NOT_SUPPORTED, name,
				      "simgpu links at most one cubin or fatbin");
		if (!(l->image = malloc(size)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(l->image, data, size);
		l->image_len = size;
		break;
	case CU_JIT_INPUT_LIBRARY:
		if (size < 8 || memcmp(data, "!<arch>\n", 8))
			return refuse(l, CUDA_ERROR_INVALID_IMAGE, name, "not an archive");
		break; /* libcudadevrt.a: nothing a twin needs */
	default:
		return refuse(l, CUDA_ERROR_INVALID_IMAGE, name, "an input type simgpu cannot read");
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState h, CUjitInputType type, const char *path,
				  unsigned int n, CUjit_option *opt, void **val)
{
	FILE *f;
	long len;
	void *buf;
	CUresult r;

	SIM_ENTER();
	if (!link_get(h))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = fopen(path, "rb")))
		return CUDA_ERROR_FILE_NOT_FOUND;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = len > 0 ? malloc((size_t)len) : NULL;
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(buf);
		return len > 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
	}
	fclose(f);
	r = cuLinkAddData_v2(h, type, buf, (size_t)len, path, n, opt, val);
	free(buf);
	return r;
}

CUresult CUDAAPI cuLinkComplete(CUlinkState h, void **cubin, size_t *size)
{
	struct sim_link_state *l = link_get(h);
	char msg[128];

	SIM_ENTER();
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubin)
		return CUDA_ERROR_INVALID_VALUE;
	if (l->spoilt)
		return l->spoilt;
	if (l->ptx && l->image)
		return refuse(l, CUDA_ERROR_NOT_SUPPORTED, "(link)",
			      "simgpu cannot link PTX with a cubin");
	if (!l->ptx && !l->image)
		return refuse(l, CUDA_ERROR_INVALID_VALUE, "(link)", "nothing to link");
	free(l->out);
	l->out = l->ptx ? strdup(l->ptx) : malloc(l->image_len);
	if (!l->out)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!l->ptx)
		memcpy(l->out, l->image, l->image_len);
	*cubin = l->out;
	if (size)
		*size = l->ptx ? l->ptx_len + 1 : l->image_len;
	snprintf(msg, sizeof(msg), "info    : simgpu: linked %zu bytes\n",
		 l->ptx ? l->ptx_len + 1 : l->image_len);
	put_log(l, CU_JIT_INFO_LOG_BUFFER, verbose(l) ? msg : "");
	for (unsigned i = 0; i < l->nopt; i++)
		if (l->opt[i] == CU_JIT_WALL_TIME) {
			float ms = 0.001f;
			memcpy(&l->val[i], &ms, sizeof(ms)); /* a float in the slot */
		}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState h)
{
	struct sim_link_state *l = link_get(h);

	SIM_ENTER();
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	l->magic = 0;
	free(l->ptx);
	free(l->image);
	free(l->out);
	free(l);
	return CUDA_SUCCESS;
}
