/*
 * JIT linking (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkDestroy).
 *
 * The link state is the client's: it keeps the program's options and a copy of every input.
 * Each cuLinkAddData sends the input to the worker for a check (MSG_LINK without `complete`:
 * the worker's driver adds it to a fresh link), so that a bad input fails here with the
 * driver's code and error log, as natively; cuLinkComplete sends them all and the worker links
 * them from start to end. The linked image stays owned by the state until cuLinkDestroy, and
 * the program loads it with cuModuleLoadData, which records it: no link state exists on the
 * server and nothing here is recorded. Program pointers never cross: the worker fills log
 * buffers of its own, and this file copies the logs, and the numbers the driver wrote into
 * option slots (sizes, wall time), back into the program's. Options that would carry host
 * pointers (symbol tables) are refused, saying so.
 *
 * After a cuLinkAddData the program's info log holds that input's messages (the driver's
 * accumulates them); after cuLinkComplete it holds the whole link's.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/jitopt.h"
#include "rgpu/util.h"

struct ip_link_input {
	int type;
	char *name;
	void *data;
	size_t size;
	unsigned nopt;
	Rgpu__LinkOption opt[RGPU_JIT_MAX_OPTIONS];
};

struct ip_link {
	struct ip_link *next; /* the live link states, under links_lock */
	struct ip_ctx *ctx;
	unsigned nopt;
	CUjit_option *popt; /* the program's arrays (cuLinkCreate: valid for the link's life) */
	void **pval;
	Rgpu__LinkOption opt[RGPU_JIT_MAX_OPTIONS]; /* as sent: the slots' first values */
	struct ip_link_input *in;
	size_t nin;
	void *image;
	size_t image_size;
	CUresult spoilt; /* an input the driver refused: every later input and the link fail so */
};

static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ip_link *links;

static struct ip_link *link_get(CUlinkState h)
{
	struct ip_link *l;
	pthread_mutex_lock(&links_lock);
	for (l = links; l && l != (struct ip_link *)h; l = l->next)
		;
	pthread_mutex_unlock(&links_lock);
	return l;
}

/* the options as they cross: numbers as given, log buffer pointers as 0 */
static CUresult take_options(unsigned n, const CUjit_option *opt, void *const *val,
			     Rgpu__LinkOption *out, int per_input)
{
	if (n && (!opt || !val))
		return CUDA_ERROR_INVALID_VALUE;
	if (n > RGPU_JIT_MAX_OPTIONS) {
		ip_refused(per_input ? "cuLinkAddData with more than 64 JIT options"
				     : "cuLinkCreate with more than 64 JIT options",
			   "rgpu forwards at most 64 (CUDA_ERROR_NOT_SUPPORTED)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	for (unsigned i = 0; i < n; i++) {
		int kind = rgpu_jit_opt_kind(opt[i]);
		if ((unsigned)opt[i] >= CU_JIT_NUM_OPTIONS)
			return CUDA_ERROR_INVALID_VALUE;
		if (kind == RGPU_JIT_REFUSED) {
			ip_refused(per_input ? "cuLinkAddData with a host-pointer JIT option"
					     : "cuLinkCreate with a host-pointer JIT option",
				   "a JIT option that carries host pointers (symbol names or "
				   "addresses) cannot reach a remote driver");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		if (per_input && (kind == RGPU_JIT_LOG || opt[i] == CU_JIT_WALL_TIME))
			return CUDA_ERROR_INVALID_VALUE; /* cuLinkAddData takes compiler options only */
		rgpu__link_option__init(&out[i]);
		out[i].option = (int32_t)opt[i];
		out[i].value = kind == RGPU_JIT_LOG ? 0 : (uint64_t)(uintptr_t)val[i];
	}
	return CUDA_SUCCESS;
}

/* copy a log into the program's buffer of that kind (as the driver does, NUL-terminated) */
static void put_log(struct ip_link *l, CUjit_option buf_opt, ProtobufCBinaryData text)
{
	CUjit_option size_opt = buf_opt == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
								 : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	char *buf = NULL;
	size_t cap = 0;

	for (unsigned i = 0; i < l->nopt; i++) {
		if (l->popt[i] == buf_opt)
			buf = l->pval[i];
		if (l->popt[i] == size_opt)
			cap = (unsigned)l->opt[i].value;
	}
	if (!buf || !cap)
		return;
	size_t n = MIN(text.len, cap - 1);
	if (n)
		memcpy(buf, text.data, n);
	buf[n] = 0;
}

/*
 * One MSG_LINK with the create options and inputs [first, first + count); writes back what the
 * driver wrote. Returns the call's result; *image (when given) receives the linked image.
 */
static CUresult link_call(struct ip_link *l, size_t first, size_t count, int complete)
{
	Rgpu__Link m = RGPU__LINK__INIT;
	Rgpu__LinkReply *rep = NULL;
	Rgpu__LinkOption *optp[RGPU_JIT_MAX_OPTIONS];
	Rgpu__LinkInput *inp = NULL, **inpp = NULL;
	uint8_t *payload = NULL;
	size_t plen = 0;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;

	for (size_t i = 0; i < count; i++)
		plen += l->in[first + i].size;
	if (count && (!(inp = calloc(count, sizeof(*inp))) || !(inpp = calloc(count, sizeof(*inpp))) ||
		      !(payload = malloc(plen))))
		goto out;
	plen = 0;
	for (size_t i = 0; i < count; i++) {
		struct ip_link_input *in = &l->in[first + i];
		rgpu__link_input__init(&inp[i]);
		inp[i].type = in->type;
		inp[i].name = in->name ? in->name : "";
		inp[i].size = in->size;
		inp[i].n_options = in->nopt;
		inp[i].options = calloc(in->nopt ? in->nopt : 1, sizeof(*inp[i].options));
		if (!inp[i].options)
			goto out;
		for (unsigned j = 0; j < in->nopt; j++)
			inp[i].options[j] = &in->opt[j];
		inpp[i] = &inp[i];
		memcpy(payload + plen, in->data, in->size);
		plen += in->size;
	}
	for (unsigned i = 0; i < l->nopt; i++)
		optp[i] = &l->opt[i];
	m.ctx = l->ctx->o.id;
	ip_route_ctx(l->ctx); /* the link's context's server (route.c) */
	m.n_options = l->nopt;
	m.options = optp;
	m.n_inputs = count;
	m.inputs = inpp;
	m.complete = complete;
	r = ip_call_status(RGPU_MSG_LINK, &m.base, payload, plen, NULL, 0,
			   &rgpu__link_reply__descriptor, (ProtobufCMessage **)&rep);
	if (!rep)
		goto out;
	for (unsigned i = 0; i < l->nopt && i < rep->n_values; i++)
		if (rgpu_jit_opt_kind(l->popt[i]) == RGPU_JIT_OUT && rep->values[i] != l->opt[i].value)
			l->pval[i] = (void *)(uintptr_t)rep->values[i];
	put_log(l, CU_JIT_INFO_LOG_BUFFER, rep->info_log);
	put_log(l, CU_JIT_ERROR_LOG_BUFFER, rep->error_log);
	if (r == CUDA_SUCCESS && complete) {
		free(l->image);
		l->image = malloc(rep->image.len ? rep->image.len : 1);
		if (!l->image)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		else if (rep->image.len)
			memcpy(l->image, rep->image.data, rep->image.len);
		l->image_size = rep->image.len;
	}
out:
	for (size_t i = 0; inp && i < count; i++)
		free(inp[i].options);
	free(inp);
	free(inpp);
	free(payload);
	if (rep)
		rgpu__link_reply__free_unpacked(rep, NULL);
	return r;
}

static void input_free(struct ip_link_input *in)
{
	free(in->name);
	free(in->data);
}

IP_API CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option *opt, void **val,
					CUlinkState *out)
{
	struct ip_link *l;
	struct ip_ctx *c;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!(l = calloc(1, sizeof(*l))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->ctx = c;
	l->nopt = n;
	l->popt = opt;
	l->pval = val;
	r = take_options(n, opt, val, l->opt, 0);
	if (r == CUDA_SUCCESS)
		r = link_call(l, 0, 0, 0); /* the driver's own checks of the options */
	if (r != CUDA_SUCCESS) {
		free(l);
		return r;
	}
	pthread_mutex_lock(&links_lock);
	l->next = links;
	links = l;
	pthread_mutex_unlock(&links_lock);
	*out = (CUlinkState)l;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuLinkAddData_v2(CUlinkState h, CUjitInputType type, void *data,
					 size_t size, const char *name, unsigned int n,
					 CUjit_option *opt, void **val)
{
	struct ip_link *l = link_get(h);
	struct ip_link_input *in, *more;
	CUresult r;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || !size || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES)
		return CUDA_ERROR_INVALID_VALUE;
	if (l->nin >= RGPU_JIT_MAX_INPUTS) {
		ip_refused("cuLinkAddData", "more than 1024 inputs in one link");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!(more = realloc(l->in, (l->nin + 1) * sizeof(*l->in))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->in = more;
	in = &l->in[l->nin];
	memset(in, 0, sizeof(*in));
	in->type = (int)type;
	in->size = size;
	in->nopt = n;
	r = take_options(n, opt, val, in->opt, 1);
	if (r != CUDA_SUCCESS)
		return r;
	if (!(in->data = malloc(size)) || (name && !(in->name = strdup(name)))) {
		input_free(in);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(in->data, data, size);
	/* the driver's link state keeps its first failure (measured on the H200) */
	r = l->spoilt ? l->spoilt : link_call(l, l->nin, 1, 0);
	if (r != CUDA_SUCCESS) {
		input_free(in);
		if (r != CUDA_ERROR_OUT_OF_MEMORY && r != CUDA_ERROR_DEVICE_UNAVAILABLE)
			l->spoilt = r;
		return r;
	}
	l->nin++;
	return CUDA_SUCCESS;
}

/* The file is read here, where the program's paths are. */
IP_API CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState h, CUjitInputType type, const char *path,
					 unsigned int n, CUjit_option *opt, void **val)
{
	FILE *f;
	long len;
	void *buf;
	CUresult r;

	if (!link_get(h))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(f = fopen(path, "rb")))
		return CUDA_ERROR_FILE_NOT_FOUND;
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return CUDA_ERROR_INVALID_VALUE;
	}
	buf = malloc((size_t)len);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(buf);
		return buf ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_OUT_OF_MEMORY;
	}
	fclose(f);
	r = cuLinkAddData_v2(h, type, buf, (size_t)len, path, n, opt, val);
	free(buf);
	return r;
}

IP_API CUresult CUDAAPI cuLinkComplete(CUlinkState h, void **cubin, size_t *size)
{
	struct ip_link *l = link_get(h);
	CUresult r;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubin)
		return CUDA_ERROR_INVALID_VALUE;
	if (l->spoilt)
		return l->spoilt;
	r = link_call(l, 0, l->nin, 1);
	if (r != CUDA_SUCCESS)
		return r;
	*cubin = l->image;
	if (size)
		*size = l->image_size;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuLinkDestroy(CUlinkState h)
{
	struct ip_link **pp, *l = NULL;

	pthread_mutex_lock(&links_lock);
	for (pp = &links; *pp; pp = &(*pp)->next)
		if (*pp == (struct ip_link *)h) {
			l = *pp;
			*pp = l->next;
			break;
		}
	pthread_mutex_unlock(&links_lock);
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	for (size_t i = 0; i < l->nin; i++)
		input_free(&l->in[i]);
	free(l->in);
	free(l->image);
	free(l);
	return CUDA_SUCCESS;
}

/* The first versions take the same arguments. */
IP_API CUresult CUDAAPI cuLinkCreate(unsigned int n, CUjit_option *opt, void **val,
				     CUlinkState *out)
{
	return cuLinkCreate_v2(n, opt, val, out);
}

IP_API CUresult CUDAAPI cuLinkAddData(CUlinkState h, CUjitInputType type, void *data, size_t size,
				      const char *name, unsigned int n, CUjit_option *opt,
				      void **val)
{
	return cuLinkAddData_v2(h, type, data, size, name, n, opt, val);
}

IP_API CUresult CUDAAPI cuLinkAddFile(CUlinkState h, CUjitInputType type, const char *path,
				      unsigned int n, CUjit_option *opt, void **val)
{
	return cuLinkAddFile_v2(h, type, path, n, opt, val);
}
