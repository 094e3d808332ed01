/*
 * Managed memory (cuMemAllocManaged, cudaMallocManaged): device memory in the window whose CPU
 * view this process holds at the same address, kept coherent by the protocol of mmproto.c.
 *
 * A managed range is ordinary device memory on the server (checkpointed and migrated like any
 * other, zeroed when made). Here, a memfd holds the CPU copy, mapped twice: at the range's
 * address in the window for the application, and elsewhere, always writable, for this file.
 * A block the application may not see yet is PROT_NONE there; its first touch raises SIGSEGV,
 * whose handler (installed with the first range, chaining to the one before it) fetches it.
 *
 * The requests that may read device memory (launches, graph launches, copies and sets) first
 * send the blocks the CPU changed (mm_before, which the link calls as it queues a request,
 * before the request gets its seq), ending with a synchronous copy so the worker holds everything after them
 * until the bytes have landed; those that may write it then make the blocks they may write
 * INVALID (a launch: every block). A fault while such work may still run (no context
 * synchronisation since) synchronises the range's context first, which is how a GPU without
 * concurrent managed access behaves for a program that does it right, and makes a program
 * that touches too early get the final bytes rather than a crash.
 *
 * The device reports concurrentManagedAccess = 0 and pageableMemoryAccess = 0, as GPUs without
 * hardware coherence do (init.c), so programs take their documented non-concurrent paths.
 * Memory advice is kept and read back (cuMemRangeGetAttribute) per allocation; a prefetch to
 * the CPU fetches the range at once, one to the device sends what the CPU changed.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ip.h"
#include "ip_entries.h"
#include "mmproto.h"
#include "rgpu.pb-c.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct mrange {
	uint64_t addr;
	struct ip_ctx *ctx;
	int fd;
	struct mm_range mm;
	/* advice (cuMemAdvise), for the whole allocation */
	int read_mostly;
	CUmemLocation preferred, last_prefetch;
	uint32_t accessed_by; /* a bit per device */
	/*
	 * __managed__ variables: the module's variables this range holds, the only bytes of it
	 * that are device memory (the range is their 64 KiB blocks, at the addresses the
	 * server's driver gave them, outside the window). nvars 0: the whole range (an allocation).
	 */
	struct mvar {
		uint64_t addr, size;
	} *vars;
	size_t nvars;
	int viewed; /* the application's view is mapped */
	struct mrange *next;
};

static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mrange *ranges;
static atomic_int nranges;
static uint8_t *scratch;           /* MM_BLOCK * MM_READAHEAD_MAX bytes, for mm_flush */
static __thread int mm_internal;   /* this thread is sending or fetching for the protocol */
static struct sigaction old_segv;
static int handler_installed;

/*
 * The last bytes a flush sent to each server: sent again synchronously, the flush's end for
 * that server's worker (with devices of several servers, each has its own).
 */
static struct {
	uint64_t addr, len;
	uint8_t bytes[8];
	struct ip_ctx *ctx;
} tails[IP_MAX_DEVICES];

/* ---- I/O for the protocol ------------------------------------------------------------------- */

/*
 * The stream the protocol's copies go on: the legacy stream (0), or, inside a host function,
 * the context's own non-blocking one. A host function runs while its stream waits for it, and
 * work on the legacy stream would wait for that stream in turn (a blocking one): the copies
 * must not. Called with mm_internal set (the stream may be made now).
 */
static uint64_t io_stream(struct ip_ctx *c)
{
	return c && ip_in_callback() ? ip_stream_io(c) : 0;
}

/* Device bytes [a, a + n) into dst. */
static int fetch_piece(const struct mrange *m, uint64_t a, uint64_t n, void *dst)
{
	Rgpu__Memcpy q = RGPU__MEMCPY__INIT;
	CUresult r;

	q.src = a;
	q.size = n;
	q.ctx = m->ctx ? m->ctx->o.id : 0; /* none: a library's variable (device 0's primary) */
	mm_internal = 1;
	q.stream = io_stream(m->ctx);
	int prev = ip_pin_dev(m->ctx ? m->ctx->device : 0);
	r = ip_call_status(RGPU_MSG_MEMCPY_DTOH, &q.base, NULL, 0, dst, n, NULL, NULL);
	ip_pin_server(prev);
	mm_internal = 0;
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

/* The bytes at src to the device at [a, a + n), in frames of RGPU_COPY_CHUNK. */
static int send_piece(const struct mrange *m, uint64_t a, uint64_t n, const uint8_t *src)
{
	Rgpu__Memcpy q = RGPU__MEMCPY__INIT;
	CUresult r = CUDA_SUCCESS;

	q.ctx = m->ctx ? m->ctx->o.id : 0;
	q.flags = RGPU__COPY_FLAG__COPY_ASYNC;
	mm_internal = 1;
	q.stream = io_stream(m->ctx);
	int prev = ip_pin_dev(m->ctx ? m->ctx->device : 0);
	for (uint64_t o = 0; o < n && r == CUDA_SUCCESS; o += RGPU_COPY_CHUNK) {
		q.dst = a + o;
		q.size = MIN(RGPU_COPY_CHUNK, n - o);
		r = ip_post(RGPU_MSG_MEMCPY_HTOD, &q.base, src + o, q.size);
	}
	ip_pin_server(prev);
	mm_internal = 0;
	int k = ip_dev_server(m->ctx ? m->ctx->device : 0);
	tails[k].len = MIN(sizeof(tails[k].bytes), n);
	tails[k].addr = a + n - tails[k].len;
	memcpy(tails[k].bytes, src + n - tails[k].len, tails[k].len);
	tails[k].ctx = m->ctx;
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

/*
 * Each piece of [off, off + len) of the range that is device memory: all of it, or for
 * __managed__ variables the parts inside them (the rest of their blocks stays zeros here).
 */
static int each_piece(struct mrange *m, uint64_t off, uint64_t len, uint8_t *buf, int to_dev)
{
	uint64_t a = m->addr + off;
	int ret = 0;

	if (!m->nvars)
		return to_dev ? send_piece(m, a, len, buf) : fetch_piece(m, a, len, buf);
	for (size_t i = 0; i < m->nvars && !ret; i++) {
		uint64_t lo = MAX(a, m->vars[i].addr), hi = MIN(a + len, m->vars[i].addr + m->vars[i].size);
		if (lo >= hi)
			continue;
		ret = to_dev ? send_piece(m, lo, hi - lo, buf + (lo - a))
			     : fetch_piece(m, lo, hi - lo, buf + (lo - a));
	}
	return ret;
}

static int io_fetch(void *arg, uint64_t off, uint64_t len, void *dst)
{
	return each_piece(arg, off, len, dst, 0);
}

static int io_send(void *arg, uint64_t off, uint64_t len, const void *src)
{
	return each_piece(arg, off, len, (uint8_t *)src, 1);
}

static int io_protect(void *arg, uint64_t off, uint64_t len, int accessible)
{
	struct mrange *m = arg;

	return mprotect((void *)(uintptr_t)(m->addr + off), len,
			accessible ? PROT_READ | PROT_WRITE : PROT_NONE) ? -errno : 0;
}

static int io_touched(void *arg, uint64_t off, uint64_t len)
{
	struct mrange *m = arg;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page;
	unsigned char vec[MM_BLOCK / 4096];

	if (n > sizeof(vec) || mincore(m->mm.copy + off, len, vec))
		return 1; /* cannot tell: hash it */
	for (size_t i = 0; i < n; i++)
		if (vec[i] & 1)
			return 1;
	return 0;
}

/* ---- ranges --------------------------------------------------------------------------------- */

static struct mrange *find_locked(uint64_t p)
{
	for (struct mrange *m = ranges; m; m = m->next)
		if (p >= m->addr && p - m->addr < m->mm.size)
			return m;
	return NULL;
}

/*
 * A copy of len bytes the device already holds (or is about to), sent synchronously: the
 * worker holds every later request until the copies and sets before it on the context's NULL
 * stream have run. ip_post's result.
 */
static CUresult post_sync_copy(const struct ip_ctx *c, uint64_t addr, const void *bytes,
			       uint64_t len)
{
	Rgpu__Memcpy q = RGPU__MEMCPY__INIT;
	CUresult r;

	q.dst = addr;
	q.size = len;
	q.ctx = c ? c->o.id : 0;
	mm_internal = 1;
	q.stream = io_stream((struct ip_ctx *)c);
	int prev = ip_pin_dev(c ? c->device : 0);
	r = ip_post(RGPU_MSG_MEMCPY_HTOD, &q.base, bytes, len);
	ip_pin_server(prev);
	mm_internal = 0;
	return r;
}

/*
 * Wait for the work that may still write device memory, when some may (ctx: the context to
 * synchronise; none: the calling thread's). CUDA_SUCCESS when none is left.
 */
static CUresult settle(struct ip_ctx *ctx)
{
	uint64_t e = ip_ctx_work_epoch();
	CUresult r;

	if (!ip_ctx_work_pending())
		return CUDA_SUCCESS;
	if (!ctx && !(ctx = ip_ctx_cur()))
		return CUDA_ERROR_INVALID_CONTEXT;
	r = ip_ctx_sync(ctx);
	/* one context's synchronisation says nothing of work on other servers */
	if (r == CUDA_SUCCESS && !ip_multi_server())
		ip_ctx_work_synced(e);
	return r;
}

/* Send what the CPU changed in every range, the last bytes again synchronously. */
static int flush_locked(void)
{
	uint64_t total = 0, n;
	int ret = 0;

	for (struct mrange *m = ranges; m && !ret; m = m->next) {
		ret = mm_flush(&m->mm, scratch, &n);
		total += n;
	}
	for (int k = 0; k < IP_MAX_DEVICES; k++) {
		if (total && !ret && tails[k].len)
			ret = post_sync_copy(tails[k].ctx, tails[k].addr, tails[k].bytes,
					     tails[k].len) == CUDA_SUCCESS ? 0 : -EIO;
		tails[k].len = 0;
	}
	return ret;
}

/* The span of device memory a copy or set request may write: [*dst, *dst + *len). */
static int written_span(uint16_t type, const ProtobufCMessage *req, uint64_t *dst, uint64_t *len)
{
	if (type == RGPU_MSG_MEMSET) {
		const Rgpu__Memset *s = (const Rgpu__Memset *)req;
		*dst = s->dst;
		*len = (s->height > 1 ? s->pitch * (s->height - 1) : 0) + s->width * s->elem_size;
		return 1;
	}
	if (type == RGPU_MSG_MEMCPY_HTOD || type == RGPU_MSG_MEMCPY_DTOD) {
		const Rgpu__Memcpy *c = (const Rgpu__Memcpy *)req;
		*dst = c->dst;
		*len = c->width ? (c->depth - 1) * c->dst_slice + (c->height - 1) * c->dst_pitch +
					  c->width
				: c->size;
		return 1;
	}
	return 0; /* a launch: anything */
}

static void mm_before(uint16_t type, const ProtobufCMessage *req)
{
	uint64_t dst = 0, len = 0;
	int span;

	/*
	 * captured work runs only when its graph is launched (MSG_GRAPH_LAUNCH comes here then):
	 * the CPU's copy stays valid until then, and nothing is pending
	 */
	if (!atomic_load(&nranges) || mm_internal || ip_link_captured())
		return;
	switch (type) {
	case RGPU_MSG_LAUNCH:
	case RGPU_MSG_GRAPH_LAUNCH:
	case RGPU_MSG_MEMCPY_HTOD:
	case RGPU_MSG_MEMCPY_DTOD:
	case RGPU_MSG_MEMSET:
	case RGPU_MSG_MEMCPY_DTOH:
		break;
	default:
		return;
	}
	pthread_mutex_lock(&mm_lock);
	if (flush_locked())
		pr_warn("managed memory: the CPU's changes could not all be sent");
	if (type != RGPU_MSG_MEMCPY_DTOH) {
		span = written_span(type, req, &dst, &len);
		for (struct mrange *m = ranges; m; m = m->next) {
			if (!span)
				mm_invalidate(&m->mm, 0, m->mm.size);
			else if (dst < m->addr + m->mm.size && dst + len > m->addr)
				mm_invalidate(&m->mm, dst > m->addr ? dst - m->addr : 0,
					      dst + len - MAX(dst, m->addr));
		}
		ip_ctx_work_issued();
	}
	pthread_mutex_unlock(&mm_lock);
}

/* ---- the fault handler ----------------------------------------------------------------------- */

/* 1: the fault was in a managed range, now fetched (the access is retried); 0: not ours. */
static int on_fault(uint64_t a)
{
	struct mrange *m;
	struct ip_ctx *ctx;
	int ret;

	if (!atomic_load(&nranges))
		return 0;
	pthread_mutex_lock(&mm_lock);
	m = find_locked(a);
	if (!m) {
		pthread_mutex_unlock(&mm_lock);
		return 0;
	}
	int in_callback = ip_in_callback();
	if (in_callback)
		pr_warn_once("a host function touched managed or large mapped memory (%#llx): rgpu "
			     "fetches it through the GPU server, whose executor waits for this very "
			     "function while another thread synchronizes its stream; the program "
			     "may hang there (user guide, \"Managed memory\")",
			     (unsigned long long)a);
	if (ip_ctx_work_pending() && !in_callback) {
		/*
		 * work that may write it may still run: wait for it, as the program should have. Not
		 * in a host function: its stream's work before it is done, and waiting for the rest
		 * would wait for the stream that waits for the function.
		 */
		ctx = m->ctx;
		pthread_mutex_unlock(&mm_lock);
		(void)settle(ctx); /* a failure shows in the fetch, or at the next call */
		pthread_mutex_lock(&mm_lock);
		m = find_locked(a);
		if (!m) {
			pthread_mutex_unlock(&mm_lock);
			return 0;
		}
	}
	ret = mm_fault(&m->mm, (uint32_t)((a - m->addr) / MM_BLOCK));
	pthread_mutex_unlock(&mm_lock);
	if (ret) {
		pr_err("managed memory at %#llx could not be fetched from the GPU server",
		       (unsigned long long)a);
		return 0;
	}
	return 1;
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	if (on_fault((uint64_t)(uintptr_t)si->si_addr)) {
		errno = saved;
		return;
	}
	errno = saved;
	if (old_segv.sa_flags & SA_SIGINFO) {
		old_segv.sa_sigaction(sig, si, uc);
	} else if (old_segv.sa_handler != SIG_IGN && old_segv.sa_handler != SIG_DFL) {
		old_segv.sa_handler(sig);
	} else {
		/* the default action: return, fault again, and die of it */
		signal(SIGSEGV, SIG_DFL);
	}
}

static int install_handler_locked(void)
{
	struct sigaction sa;

	if (handler_installed)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv))
		return -errno;
	handler_installed = 1;
	return 0;
}

/* ---- allocation ------------------------------------------------------------------------------- */

/* Zero [addr, addr + size) on the device, complete before any later request runs. */
static CUresult zero_device(struct ip_ctx *c, uint64_t addr, uint64_t size)
{
	Rgpu__Memset s = RGPU__MEMSET__INIT;
	static const uint8_t zeros[8];
	CUresult r;

	s.dst = addr;
	s.elem_size = 1;
	s.width = size;
	s.height = 1;
	s.ctx = c->o.id;
	mm_internal = 1;
	int prev = ip_pin_dev(c->device);
	r = ip_post(RGPU_MSG_MEMSET, &s.base, NULL, 0);
	ip_pin_server(prev);
	mm_internal = 0;
	/* a synchronous copy of the same zeros: the worker waits for the set there */
	if (r == CUDA_SUCCESS)
		r = post_sync_copy(c, addr, zeros, sizeof(zeros));
	return r;
}

static void unmap_range(struct mrange *m)
{
	if (m->viewed && m->nvars)
		munmap((void *)(uintptr_t)m->addr, m->mm.size); /* outside the window */
	else if (m->viewed) /* the window's reservation again where the range was */
		mmap((void *)(uintptr_t)m->addr, m->mm.size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	free(m->vars);
	if (m->mm.copy)
		munmap(m->mm.copy, m->mm.size);
	if (m->fd >= 0)
		close(m->fd);
	mm_range_fini(&m->mm);
	free(m);
}

static void mm_forget(uint64_t addr);

/*
 * A new range's CPU side at [addr, addr + size): with vars (taken), __managed__ variables the
 * driver placed there, whose bytes the CPU sees only once fetched; without, a new allocation
 * of the window, zero on both sides. Not yet in the list: the caller links it under mm_lock.
 */
static CUresult new_range(struct ip_ctx *c, uint64_t addr, uint64_t size, struct mvar *vars,
			  size_t nvars, struct mrange **out)
{
	struct mm_io io = {io_fetch, io_send, io_protect, io_touched, NULL};
	struct mrange *m = calloc(1, sizeof(*m));
	void *view;

	if (!m) {
		free(vars);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->addr = addr;
	m->ctx = c;
	m->vars = vars;
	m->nvars = nvars;
	m->preferred.type = CU_MEM_LOCATION_TYPE_INVALID;
	m->last_prefetch.type = CU_MEM_LOCATION_TYPE_INVALID;
	m->fd = memfd_create("rgpu-managed", MFD_CLOEXEC);
	if (m->fd < 0 || ftruncate(m->fd, (off_t)size))
		goto fail;
	m->mm.copy = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (m->mm.copy == MAP_FAILED) {
		m->mm.copy = NULL;
		goto fail;
	}
	io.arg = m;
	if (mm_range_init(&m->mm, size, m->mm.copy, &io))
		goto fail;
	/* variables: where the server's driver put them, which must be free in this process */
	view = mmap((void *)(uintptr_t)addr, size, nvars ? PROT_NONE : PROT_READ | PROT_WRITE,
		    MAP_SHARED | (nvars ? MAP_FIXED_NOREPLACE : MAP_FIXED), m->fd, 0);
	if (view != (void *)(uintptr_t)addr) {
		if (view != MAP_FAILED)
			munmap(view, size); /* a kernel that ignores MAP_FIXED_NOREPLACE */
		goto fail;
	}
	m->viewed = 1;
	if (nvars && mm_invalidate(&m->mm, 0, size))
		goto fail;
	if (nvars)
		pr_debug("managed memory: %zu __managed__ variable(s) mapped at %#llx+%llu, where "
			 "the server's driver placed them", nvars, (unsigned long long)addr,
			 (unsigned long long)size);
	*out = m;
	return CUDA_SUCCESS;
fail:
	pr_err("managed memory: cannot map %llu bytes at %#llx in this process: %s",
	       (unsigned long long)size, (unsigned long long)addr, strerror(errno));
	unmap_range(m);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Link a new range in; the first one installs the fault handler and the listeners. */
static CUresult link_range_locked(struct mrange *m)
{
	if (!scratch)
		scratch = malloc((size_t)MM_BLOCK * MM_READAHEAD_MAX);
	int ret = scratch ? install_handler_locked() : -ENOMEM;
	if (ret) {
		pr_err("managed memory: cannot install its fault handler (%s): "
		       "CUDA_ERROR_OUT_OF_MEMORY",
		       strerror(-ret));
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ip_link_on_enqueue(mm_before);
	ip_mem_on_free(mm_forget);
	m->next = ranges;
	ranges = m;
	atomic_fetch_add(&nranges, 1);
	return CUDA_SUCCESS;
}

/* The CPU side of a new managed allocation at addr (device memory already allocated there). */
static CUresult map_range(struct ip_ctx *c, uint64_t addr, uint64_t size)
{
	struct mrange *m;
	CUresult r = new_range(c, addr, size, NULL, 0, &m);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mm_lock);
	r = link_range_locked(m);
	pthread_mutex_unlock(&mm_lock);
	if (r != CUDA_SUCCESS)
		unmap_range(m);
	return r;
}

/* An ip_freed_fn: the allocation at addr was freed; drop its CPU side if it was managed. */
static void mm_forget(uint64_t addr)
{
	struct mrange **pp, *m = NULL;

	if (!atomic_load(&nranges))
		return;
	pthread_mutex_lock(&mm_lock);
	for (pp = &ranges; *pp; pp = &(*pp)->next)
		if ((*pp)->addr == addr) {
			m = *pp;
			*pp = m->next;
			atomic_fetch_sub(&nranges, 1);
			break;
		}
	pthread_mutex_unlock(&mm_lock);
	if (m)
		unmap_range(m);
}

/* A managed range of bytesize bytes; host_flags: mapped pinned host memory (cuMemHostAlloc) */
static CUresult mm_alloc(struct ip_ctx *c, uint64_t bytesize, unsigned host_flags,
			 CUdeviceptr *out)
{
	CUdeviceptr d;
	uint64_t size;
	CUresult r;

	if (bytesize > UINT64_MAX - MM_BLOCK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size = (bytesize + MM_BLOCK - 1) / MM_BLOCK * MM_BLOCK;
	r = ip_mem_alloc_managed(c, size, bytesize, host_flags, &d);
	if (r != CUDA_SUCCESS)
		return r;
	r = zero_device(c, d, size);
	if (r == CUDA_SUCCESS)
		r = map_range(c, d, size);
	if (r != CUDA_SUCCESS) {
		ip_mem_free(d);
		return r;
	}
	*out = d;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	struct ip_ctx *c;
	CUresult r;

	if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	return r == CUDA_SUCCESS ? mm_alloc(c, bytesize, 0, dptr) : r;
}

static CUresult mm_global(struct ip_ctx *c, uint64_t addr, uint64_t size, int add);

/*
 * Mapped pinned host memory too large for the host area is made by mm_alloc too (memory.c asks):
 * a managed range, which a kernel dereferences at its host address, kept coherent the same way.
 */
__attribute__((constructor)) static void mm_init(void)
{
	ip_mem_on_mapped_alloc(mm_alloc);
	ip_module_on_managed_global(mm_global);
}

/* ---- __managed__ variables --------------------------------------------------------------------- */

/*
 * A module's __managed__ variable at [addr, addr + size), where the server's driver put it
 * (module.c asks when cuModuleGetGlobal finds one, and again when its module goes): the CPU's
 * copy of its 64 KiB blocks, which the variables sharing a block share. A new variable whose
 * blocks meet a range's makes one range of both, with the CPU's changes sent first.
 */
static CUresult mm_global(struct ip_ctx *c, uint64_t addr, uint64_t size, int add)
{
	uint64_t lo = addr / MM_BLOCK * MM_BLOCK, hi;
	struct mrange **pp, *m, *old = NULL;
	struct mvar *vars;
	size_t nvars = 0;
	CUresult r;

	if (!size || addr + size < addr || addr + size > UINT64_MAX - MM_BLOCK)
		return CUDA_ERROR_INVALID_VALUE;
	hi = (addr + size + MM_BLOCK - 1) / MM_BLOCK * MM_BLOCK;
	pthread_mutex_lock(&mm_lock);
	if (!add) {
		for (pp = &ranges; (m = *pp); pp = &m->next) {
			for (size_t i = 0; i < m->nvars; i++)
				if (m->vars[i].addr == addr) {
					m->vars[i] = m->vars[--m->nvars];
					break;
				}
			if (m->vars && !m->nvars) { /* its last variable: the range goes */
				*pp = m->next;
				atomic_fetch_sub(&nranges, 1);
				pthread_mutex_unlock(&mm_lock);
				unmap_range(m);
				return CUDA_SUCCESS;
			}
		}
		pthread_mutex_unlock(&mm_lock);
		return CUDA_SUCCESS;
	}
	for (m = ranges; m; m = m->next)
		for (size_t i = 0; i < m->nvars; i++)
			if (m->vars[i].addr == addr) { /* asked again (another context's look-up) */
				pthread_mutex_unlock(&mm_lock);
				return CUDA_SUCCESS;
			}
	/* the variable ranges its blocks meet: taken apart, their changes sent first */
	flush_locked();
	vars = malloc(sizeof(*vars));
	for (pp = &ranges; vars && (m = *pp);) {
		if (!m->vars || m->addr >= hi || m->addr + m->mm.size <= lo) {
			pp = &m->next;
			continue;
		}
		struct mvar *more = realloc(vars, (nvars + m->nvars + 1) * sizeof(*vars));
		if (!more)
			break;
		vars = more;
		memcpy(vars + nvars, m->vars, m->nvars * sizeof(*vars));
		nvars += m->nvars;
		lo = MIN(lo, m->addr);
		hi = MAX(hi, m->addr + m->mm.size);
		*pp = m->next;
		atomic_fetch_sub(&nranges, 1);
		m->next = old;
		old = m;
	}
	while ((m = old)) {
		old = m->next;
		unmap_range(m);
	}
	if (!vars) {
		pthread_mutex_unlock(&mm_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	vars[nvars++] = (struct mvar){addr, size};
	r = new_range(c, lo, hi - lo, vars, nvars, &m);
	if (r == CUDA_SUCCESS && (r = link_range_locked(m)) != CUDA_SUCCESS)
		unmap_range(m);
	pthread_mutex_unlock(&mm_lock);
	if (r != CUDA_SUCCESS)
		ip_refused("a __managed__ variable",
			   "its address, which the GPU server's driver chose, cannot be mapped in "
			   "this process");
	return r;
}

/* ---- prefetch, advice, attachment --------------------------------------------------------------- */

/* The managed range that holds [p, p + n), or NULL (CUDA_ERROR_INVALID_VALUE for the caller). */
static struct mrange *range_of_locked(uint64_t p, uint64_t n)
{
	struct mrange *m = find_locked(p);

	return m && n <= m->mm.size - (p - m->addr) ? m : NULL;
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream s,
			 int ptsz)
{
	struct mrange *m;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(s, ptsz, &c, &sid);
	int ret = 0;

	if (r != CUDA_SUCCESS)
		return r;
	if (flags || !n)
		return CUDA_ERROR_INVALID_VALUE;
	if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE && loc.type != CU_MEM_LOCATION_TYPE_HOST &&
	    loc.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
	    loc.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
		return CUDA_ERROR_INVALID_VALUE;
	if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && (loc.id < 0 || loc.id >= ip.ndev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mm_lock);
	m = range_of_locked(p, n);
	if (!m) {
		pthread_mutex_unlock(&mm_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	m->last_prefetch = loc;
	if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		ret = flush_locked(); /* the device gets what the CPU changed */
	} else {
		/* to the CPU: after the stream's work (and any other that may write it), fetch */
		uint64_t first = (p - m->addr) / MM_BLOCK, last = (p + n - 1 - m->addr) / MM_BLOCK;
		pthread_mutex_unlock(&mm_lock);
		r = ip_stream_sync(s, ptsz);
		if (r == CUDA_SUCCESS)
			r = settle(c);
		if (r != CUDA_SUCCESS)
			return r;
		pthread_mutex_lock(&mm_lock);
		m = range_of_locked(p, n);
		for (uint64_t b = first; m && b <= last && !ret; b++)
			ret = mm_fault(&m->mm, (uint32_t)b);
	}
	pthread_mutex_unlock(&mm_lock);
	if (ret)
		pr_err("cuMemPrefetchAsync of %zu bytes at %#llx: the managed memory could not be "
		       "moved (%s): CUDA_ERROR_UNKNOWN",
		       n, (unsigned long long)p, ret < 0 ? strerror(-ret) : "a transfer failed");
	return ret ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

static CUmemLocation device_loc(CUdevice d)
{
	CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};

	if (d == CU_DEVICE_CPU)
		l = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
	return l;
}

IP_API CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc,
					      unsigned int flags, CUstream s)
{
	return prefetch(p, n, loc, flags, s, 0);
}
IP_API CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc,
						   unsigned int flags, CUstream s)
{
	return prefetch(p, n, loc, flags, s, 1);
}
IP_API CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
	return prefetch(p, n, device_loc(d), 0, s, 0);
}
IP_API CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
	return prefetch(p, n, device_loc(d), 0, s, 1);
}

IP_API CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise advice,
				       CUmemLocation loc)
{
	struct mrange *m;
	CUresult r = ip_check_init();
	int dev = loc.type == CU_MEM_LOCATION_TYPE_DEVICE;

	if (r != CUDA_SUCCESS)
		return r;
	if (!n || advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev && (loc.id < 0 || loc.id >= ip.ndev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mm_lock);
	m = range_of_locked(p, n);
	if (m) {
		switch (advice) {
		case CU_MEM_ADVISE_SET_READ_MOSTLY: m->read_mostly = 1; break;
		case CU_MEM_ADVISE_UNSET_READ_MOSTLY: m->read_mostly = 0; break;
		case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: m->preferred = loc; break;
		case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
			m->preferred.type = CU_MEM_LOCATION_TYPE_INVALID;
			break;
		case CU_MEM_ADVISE_SET_ACCESSED_BY:
			if (dev)
				m->accessed_by |= 1u << loc.id;
			break;
		default:
			if (dev)
				m->accessed_by &= ~(1u << loc.id);
		}
	}
	pthread_mutex_unlock(&mm_lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUdevice d)
{
	return cuMemAdvise_v2(p, n, advice, device_loc(d));
}

/* A location as the device-ordinal attributes give it: a device, CU_DEVICE_CPU, or -2 none. */
static int loc_ordinal(CUmemLocation l)
{
	if (l.type == CU_MEM_LOCATION_TYPE_DEVICE)
		return l.id;
	if (l.type == CU_MEM_LOCATION_TYPE_INVALID)
		return CU_DEVICE_INVALID;
	return CU_DEVICE_CPU;
}

static CUresult range_attr(const struct mrange *m, void *data, size_t size,
			   CUmem_range_attribute a)
{
	int v;

	switch (a) {
	case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
		v = m->read_mostly;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
		v = loc_ordinal(m->preferred);
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
		v = loc_ordinal(m->last_prefetch);
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
		v = m->preferred.type;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
		v = m->preferred.id;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
		v = m->last_prefetch.type;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
		v = m->last_prefetch.id;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
		/* the devices, then CU_DEVICE_INVALID in the rest of the array */
		int *out = data;
		size_t k = 0;
		if (!size || size % 4)
			return CUDA_ERROR_INVALID_VALUE;
		for (int d = 0; d < 32 && k < size / 4; d++)
			if (m->accessed_by & (1u << d))
				out[k++] = d;
		for (; k < size / 4; k++)
			out[k] = CU_DEVICE_INVALID;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (size != 4)
		return CUDA_ERROR_INVALID_VALUE;
	*(int *)data = v;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t size, CUmem_range_attribute a,
					       CUdeviceptr p, size_t n)
{
	struct mrange *m;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!data || !n)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mm_lock);
	m = range_of_locked(p, n);
	r = m ? range_attr(m, data, size, a) : CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&mm_lock);
	return r;
}

IP_API CUresult CUDAAPI cuMemRangeGetAttributes(void **data, size_t *sizes,
						CUmem_range_attribute *attrs, size_t nattrs,
						CUdeviceptr p, size_t n)
{
	CUresult r = CUDA_SUCCESS;

	if (!data || !sizes || !attrs || !nattrs)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < nattrs && r == CUDA_SUCCESS; i++)
		r = cuMemRangeGetAttribute(data[i], sizes[i], attrs[i], p, n);
	return r;
}

/*
 * Attaching managed memory to a stream narrows what a GPU without concurrent access makes the
 * CPU wait for. Here every fault after work waits for the whole context, which is never less
 * safe: the call is checked and kept as the driver would, and changes nothing.
 */
static CUresult attach(CUstream s, CUdeviceptr p, size_t n, unsigned flags, int ptsz)
{
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(s, ptsz, &c, &sid);

	if (r != CUDA_SUCCESS)
		return r;
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
	    flags != CU_MEM_ATTACH_SINGLE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ip_mem_managed(p, n ? n : 1))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuStreamAttachMemAsync(CUstream s, CUdeviceptr p, size_t n,
					       unsigned int flags)
{
	return attach(s, p, n, flags, 0);
}
IP_API CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream s, CUdeviceptr p, size_t n,
						    unsigned int flags)
{
	return attach(s, p, n, flags, 1);
}
