/*
 * Kernel launches and the registry of C twins that stand in for device code.
 *
 * A launch is checked as the real driver checks it (handles, grid and block limits, dynamic
 * shared memory, parameters), then its parameter values are copied, laid out exactly as on
 * the device using the layout read from the image (so an `extra` buffer is split by the same
 * offsets), and the twin registered under the kernel's name is queued on the stream. A
 * kernel with no twin cannot run here: the launch returns CUDA_ERROR_NOT_SUPPORTED and prints
 * nothing (SIMGPU_LOG=1 says which). The twin runs the whole grid on the stream's thread.
 *
 * A twin's device printf and failed asserts collect in its context until the driver would
 * flush them (sim_ctx_flush_output, called by the synchronisations, module unloads and the
 * context's teardown), then go to stdout and stderr through stdio, as the driver's do.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct twin {
	char *name;
	sim_kernel_fn fn;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct twin *twins;
static size_t ntwins;
static __thread bool faulted;
static __thread bool asserted;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER; /* every context's out[] */

void sim_register_kernel(const char *name, sim_kernel_fn fn)
{
	char *copy;
	struct twin *v;

	if (!name || !fn)
		return;
	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < ntwins; i++) {
		if (!strcmp(twins[i].name, name)) {
			twins[i].fn = fn;
			pthread_mutex_unlock(&reg_lock);
			return;
		}
	}
	copy = strdup(name);
	v = realloc(twins, (ntwins + 1) * sizeof(*v));
	if (copy && v) {
		twins = v;
		twins[ntwins].name = copy;
		twins[ntwins++].fn = fn;
	} else {
		free(copy);
		if (v)
			twins = v;
	}
	pthread_mutex_unlock(&reg_lock);
}

/* sim_kernel_lookup() - the twin registered for a kernel name, or NULL. */
sim_kernel_fn sim_kernel_lookup(const char *name)
{
	sim_kernel_fn fn = NULL;

	pthread_mutex_lock(&reg_lock);
	for (size_t i = 0; i < ntwins && !fn; i++)
		if (!strcmp(twins[i].name, name))
			fn = twins[i].fn;
	pthread_mutex_unlock(&reg_lock);
	return fn;
}

void sim_kernel_fault(void)
{
	faulted = true;
}

/* Append to the context's stdout (0) or stderr (1) output; stdout is bounded by the FIFO. */
static void out_add(struct sim_ctx *ctx, int i, const char *p, size_t n)
{
	size_t room = SIZE_MAX;
	char *b;

	pthread_mutex_lock(&out_lock);
	if (i == 0) {
		size_t fifo = ctx->limits[CU_LIMIT_PRINTF_FIFO_SIZE];
		room = fifo > ctx->out_len[0] ? fifo - ctx->out_len[0] : 0;
	}
	n = n < room ? n : room;
	b = n ? realloc(ctx->out[i], ctx->out_len[i] + n) : NULL;
	if (b) {
		memcpy(b + ctx->out_len[i], p, n);
		ctx->out[i] = b;
		ctx->out_len[i] += n;
	}
	pthread_mutex_unlock(&out_lock);
}

void sim_printf(const struct sim_launch *l, const char *fmt, ...)
{
	struct sim_ctx *ctx = ((struct sim_module *)l->module)->ctx;
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n > 0)
		out_add(ctx, 0, s, (size_t)n);
	if (n >= 0)
		free(s);
}

void sim_assert_fail(const struct sim_launch *l, const char *expr, const char *file, unsigned line,
		     const char *func, const unsigned block[3], const unsigned thread[3])
{
	struct sim_ctx *ctx = ((struct sim_module *)l->module)->ctx;
	char *s = NULL;
	int n;

	/* the driver's format (CUDA C++ Programming Guide, "Assertion") */
	n = asprintf(
	    &s, "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n", file,
	    line, func, block[0], block[1], block[2], thread[0], thread[1], thread[2], expr);
	if (n > 0)
		out_add(ctx, 1, s, (size_t)n);
	if (n >= 0)
		free(s);
	asserted = true;
}

void sim_ctx_flush_output(struct sim_ctx *ctx)
{
	char *b[2];
	size_t n[2];

	pthread_mutex_lock(&out_lock);
	for (int i = 0; i < 2; i++) {
		b[i] = ctx->out[i];
		n[i] = ctx->out_len[i];
		ctx->out[i] = NULL;
		ctx->out_len[i] = 0;
	}
	pthread_mutex_unlock(&out_lock);
	if (n[0])
		fwrite(b[0], 1, n[0], stdout);
	if (n[1])
		fwrite(b[1], 1, n[1], stderr);
	free(b[0]);
	free(b[1]);
}

/*
 * Runs on the stream thread. A fault poisons the context, as an illegal address does; so does
 * a failed device assert.
 */
void sim_kernel_run(struct sim_op *op, struct sim_ctx *ctx)
{
	CUresult r = CUDA_SUCCESS;

	faulted = asserted = false;
	sim_cond_scope(op->u.k.vals);
	op->u.k.fn(&op->u.k.l);
	sim_cond_scope(NULL);
	if (asserted)
		r = CUDA_ERROR_ASSERT;
	else if (faulted)
		r = CUDA_ERROR_ILLEGAL_ADDRESS;
	if (r != CUDA_SUCCESS) {
		sim_log("kernel ended with %s",
			asserted ? "CUDA_ERROR_ASSERT" : "CUDA_ERROR_ILLEGAL_ADDRESS");
		pthread_mutex_lock(&sim_sched);
		if (ctx->sticky == CUDA_SUCCESS)
			ctx->sticky = r;
		pthread_mutex_unlock(&sim_sched);
	}
}

static CUresult check_shape(const unsigned g[3], const unsigned b[3])
{
	if (!g[0] || !g[1] || !g[2] || g[0] > INT_MAX || g[1] > 65535 || g[2] > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	if (!b[0] || !b[1] || !b[2] || b[0] > 1024 || b[1] > 1024 || b[2] > 64 ||
	    (unsigned long long)b[0] * b[1] * b[2] > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* The `extra` array: {BUFFER_POINTER, p, BUFFER_SIZE, &size, END}, in any order. */
static CUresult parse_extra(void **extra, const void **buf, size_t *size)
{
	const size_t *psize = NULL;

	*buf = NULL;
	for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			*buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
			psize = extra[i + 1];
		else
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (!*buf || !psize)
		return CUDA_ERROR_INVALID_VALUE;
	*size = *psize;
	return CUDA_SUCCESS;
}

/*
 * sim_kernel_op() - a launch of f as a queued operation: the shape, the dynamic shared memory
 * and the parameters checked as cuLaunchKernel checks them, and the parameter values (from
 * params, or from the buffer of an `extra` array) copied in the layout of the image.
 * Returns CUDA_SUCCESS (*out set), CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, or
 * CUDA_ERROR_NOT_SUPPORTED when no twin is registered for the kernel.
 */
CUresult sim_kernel_op(struct sim_func *f, const unsigned grid[3], const unsigned block[3],
		       unsigned smem, void **params, void **extra, struct sim_op **out)
{
	const struct sim_kernel_info *ki = f->ki;
	struct sim_op *op;
	sim_kernel_fn fn;
	size_t psize = 0, hdr;
	void **ptrs;
	CUresult r;

	if ((r = check_shape(grid, block)))
		return r;
	if ((int)smem > f->attr->max_dyn_smem || smem > INT_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < ki->nparams; i++)
		if (ki->params[i].offset + (size_t)ki->params[i].size > psize)
			psize = ki->params[i].offset + (size_t)ki->params[i].size;
	if (ki->nparams && !params && !extra)
		return CUDA_ERROR_INVALID_VALUE;

	hdr = ki->nparams * sizeof(void *);
	op = sim_op_new(SIM_OP_KERNEL);
	if (!op || !(op->u.k.blk = calloc(1, hdr + psize + 1))) {
		sim_op_free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->u.k.blk_size = hdr + psize;
	ptrs = op->u.k.blk;
	for (unsigned i = 0; i < ki->nparams; i++)
		ptrs[i] = (char *)op->u.k.blk + hdr + ki->params[i].offset;
	if (ki->nparams && params) {
		for (unsigned i = 0; i < ki->nparams; i++) {
			if (!params[i]) {
				sim_op_free(op);
				return CUDA_ERROR_INVALID_VALUE;
			}
			memcpy(ptrs[i], params[i], ki->params[i].size);
		}
	} else if (ki->nparams && extra) {
		const void *buf;
		size_t size;
		if ((r = parse_extra(extra, &buf, &size)) || size < psize) {
			sim_op_free(op);
			return r ? r : CUDA_ERROR_INVALID_VALUE;
		}
		memcpy((char *)op->u.k.blk + hdr, buf, psize);
	}

	fn = sim_kernel_lookup(ki->name);
	if (!fn) {
		sim_log("no C implementation registered for kernel %s", ki->name);
		sim_op_free(op);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	op->u.k.fn = fn;
	op->u.k.func = f;
	memcpy(op->u.k.l.grid, grid, sizeof(op->u.k.l.grid));
	memcpy(op->u.k.l.block, block, sizeof(op->u.k.l.block));
	op->u.k.l.shared_mem = smem;
	op->u.k.l.params = ptrs;
	op->u.k.l.nparams = ki->nparams;
	op->u.k.l.module = f->mod;
	op->u.k.mod = f->mod;
	__atomic_add_fetch(&f->mod->refs, 1, __ATOMIC_RELAXED);
	*out = op;
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction hf, const unsigned grid[3], const unsigned block[3],
		       unsigned smem, CUstream hs, void **params, void **extra)
{
	struct sim_stream *s;
	struct sim_func *f;
	struct sim_op *op;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_func_get(hf, &f)) || (r = sim_stream_get(hs, &s)))
		return r;
	if (f->mod->ctx != s->ctx)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((r = sim_kernel_op(f, grid, block, smem, params, extra, &op)))
		return r;
	return sim_enqueue(s, op, NULL);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				unsigned int gridDimZ, unsigned int blockDimX,
				unsigned int blockDimY, unsigned int blockDimZ,
				unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				void **extra)
{
	const unsigned g[3] = {gridDimX, gridDimY, gridDimZ};
	const unsigned b[3] = {blockDimX, blockDimY, blockDimZ};

	return launch(f, g, b, sharedMemBytes, hStream, kernelParams, extra);
}

/* Launch attributes (clusters, priorities, ...) change nothing on the host: ignored. */
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				  void **extra)
{
	SIM_ENTER();
	if (!config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	const unsigned g[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
	const unsigned b[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
	return launch(f, g, b, config->sharedMemBytes, config->hStream, kernelParams, extra);
}
