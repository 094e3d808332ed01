/*
 * Device memory, copies and sets, pinned host memory, and what an address is (device
 * allocation, module global, a mapping the application made of its own physical memory, pinned
 * or registered host memory) for the pointer attributes. The application's mappings are
 * vmm.c's; here they are only device memory like any other, found in the window allocator.
 *
 * Device addresses are chosen here, in the window (vawindow.c); the server only maps whole
 * granules when told to. An allocation that needs new backing waits for the server (an
 * out-of-memory answer must be exact: allocators retry on it); one carved from a mapped slab
 * is recorded fire-and-forget. Copies to the device take the host bytes at call time;
 * copies from the device either wait (synchronous forms) or land when the server's stream
 * reaches them (async forms). Every device range is checked against what is mapped before any
 * request leaves, so an out-of-range copy fails at once with the driver's code.
 *
 * Pinned host memory is client memory: it is allocated, registered and described here and
 * never costs a round trip.
 */
#define LOG_PREFIX "rgpu: "
#include <inttypes.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

/* ---- device pointers --------------------------------------------------------------------- */

struct range {
	uint64_t addr, size;
	unsigned flags;
	int pinned_by_us;         /* allocated here (cuMemAllocHost/cuMemHostAlloc) */
	struct ip_ctx *ctx;
	int refs;                 /* a global: the look-ups that named it (two servers' drivers
				     may place one module's global at the same address) */
};

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	if (x->addr + x->size <= y->addr)
		return -1;
	if (y->addr + y->size <= x->addr)
		return 1;
	return 0;
}

static void *globals; /* module globals seen, as struct range */
static pthread_mutex_t globals_lock = PTHREAD_MUTEX_INITIALIZER;

void ip_global_add(uint64_t addr, uint64_t size, int managed)
{
	struct range key = {.addr = addr, .size = size ? size : 1, .flags = managed != 0, .refs = 1},
		     **have, *g;
	pthread_mutex_lock(&globals_lock);
	have = tfind(&key, &globals, range_cmp);
	if (have && (*have)->addr == addr && (*have)->size == key.size) {
		(*have)->refs++;
	} else if (!have && (g = malloc(sizeof(*g)))) {
		*g = key;
		if (!tsearch(g, &globals, range_cmp))
			free(g);
	}
	pthread_mutex_unlock(&globals_lock);
}

void ip_global_del(uint64_t addr, uint64_t size)
{
	struct range key = {.addr = addr, .size = size ? size : 1}, **g, *r;
	pthread_mutex_lock(&globals_lock);
	g = tfind(&key, &globals, range_cmp);
	if (g && (*g)->addr == addr && --(*g)->refs <= 0) {
		r = *g;
		tdelete(r, &globals, range_cmp);
		free(r);
	}
	pthread_mutex_unlock(&globals_lock);
}

/* The global holding p, copied into *out (an unload may free it at once); 0 if none. */
static int global_find(uint64_t p, struct range *out)
{
	struct range key = {.addr = p, .size = 1}, **g;
	pthread_mutex_lock(&globals_lock);
	g = tfind(&key, &globals, range_cmp);
	if (g)
		*out = **g;
	pthread_mutex_unlock(&globals_lock);
	return g != NULL;
}

int ip_is_devptr(uint64_t p)
{
	struct range g;
	return ip_vaw_in_window(&ip.vaw, p) || global_find(p, &g);
}

/*
 * A range the application names as device memory and that is none: the call fails with
 * CUDA_ERROR_INVALID_VALUE, as natively, and the first few say so in the log (a program that
 * ignores the error prints wrong results; this line is where to start).
 */
static void devptr_refused(uint64_t p, uint64_t n)
{
	static int left = 8;

	if (__atomic_sub_fetch(&left, 1, __ATOMIC_RELAXED) >= 0)
		pr_warn("device range [%#" PRIx64 ", +%" PRIu64 ") is not memory this process "
			"allocated or mapped: CUDA_ERROR_INVALID_VALUE",
			p, n);
}

int ip_devptr_ok(uint64_t p, uint64_t n)
{
	struct range g;
	int ok;

	if (n == 0 || p + n < p)
		return 0;
	pthread_mutex_lock(&ip.mem_lock);
	ok = ip_vaw_mapped(&ip.vaw, p, n);
	pthread_mutex_unlock(&ip.mem_lock);
	if (ok)
		return 1;
	if (global_find(p, &g) && n <= g.addr + g.size - p)
		return 1;
	devptr_refused(p, n);
	return 0;
}

/* ---- allocation --------------------------------------------------------------------------- */

/* who hears of frees (pool.c) */
#define FREED_LISTENERS 4
static ip_freed_fn freed_listeners[FREED_LISTENERS];

void ip_mem_on_free(ip_freed_fn fn)
{
	for (int i = 0; i < FREED_LISTENERS; i++)
		if (!freed_listeners[i] || freed_listeners[i] == fn) {
			freed_listeners[i] = fn;
			return;
		}
}

void ip_mem_window_full(const char *call, uint64_t size)
{
	static int said; /* the first 8 times */
	if (__atomic_fetch_add(&said, 1, __ATOMIC_RELAXED) < 8)
		pr_warn("%s of %llu bytes: CUDA_ERROR_OUT_OF_MEMORY, the device address window "
			"(%llu GiB at %#llx, the server's --window) has no free range that large",
			call, (unsigned long long)size, (unsigned long long)(ip.vaw.size >> 30),
			(unsigned long long)ip.vaw.base);
}

CUresult ip_mem_alloc(struct ip_ctx *c, uint64_t size, CUdeviceptr *out)
{
	Rgpu__MemAlloc m = RGPU__MEM_ALLOC__INIT;
	struct ip_vaw_res res;
	CUresult r;
	int ret;

	pthread_mutex_lock(&ip.mem_lock);
	ret = ip_vaw_alloc(&ip.vaw, size, c->device, c, &res);
	if (ret) {
		pthread_mutex_unlock(&ip.mem_lock);
		if (ret == RGPU_ENOSPC)
			ip_mem_window_full("a device allocation", size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m.addr = res.addr;
	m.size = size;
	m.device = c->device;
	m.map_addr = res.map_addr;
	m.map_size = res.map_size;
	int prev = ip_pin_dev(c->device);
	if (res.map_size) {
		/*
		 * New backing: wait for the server, holding the allocator so no other thread
		 * hands out memory from a range that may yet fail to map.
		 */
		r = ip_call_status(RGPU_MSG_MEM_ALLOC, &m.base, NULL, 0, NULL, 0, NULL, NULL);
		if (r != CUDA_SUCCESS) {
			uint64_t ua, us;
			ip_vaw_free(&ip.vaw, res.addr, &ua, &us);
		}
	} else {
		r = ip_post(RGPU_MSG_MEM_ALLOC, &m.base, NULL, 0);
	}
	ip_pin_server(prev);
	pthread_mutex_unlock(&ip.mem_lock);
	if (r == CUDA_SUCCESS)
		*out = res.addr;
	return r;
}

/* managed allocations alive: copies ask ip_mem_managed() only while there are any */
static atomic_int nmanaged;

CUresult ip_mem_alloc_managed(struct ip_ctx *c, uint64_t size, uint64_t asked,
			      unsigned host_flags, CUdeviceptr *out)
{
	/* a size past the allocator's small ones: a range of its own, sharing no page */
	uint64_t take = size > IP_VAW_SMALL ? size : IP_VAW_SMALL + 1;
	CUresult r = ip_mem_alloc(c, take, out);
	struct ip_vaw_alloc *a;

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&ip.mem_lock);
	a = (struct ip_vaw_alloc *)ip_vaw_find(&ip.vaw, *out);
	if (a) {
		a->managed = host_flags ? 2 : 1;
		atomic_fetch_add(&nmanaged, 1);
		a->host_flags = host_flags;
		a->user_size = take != asked ? asked : 0;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return CUDA_SUCCESS;
}

/* Mapped pinned host memory made as a managed range: its record, if p lies in one. */
static int mapped_host(uint64_t p, uint64_t *base, unsigned *flags)
{
	const struct ip_vaw_alloc *a;
	int found;

	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	found = a && a->managed == 2 && p - a->addr < (a->user_size ? a->user_size : a->size);
	if (found) {
		*base = a->addr;
		*flags = a->host_flags;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return found;
}

static ip_mapped_alloc_fn mapped_alloc;

void ip_mem_on_mapped_alloc(ip_mapped_alloc_fn fn)
{
	mapped_alloc = fn;
}

int ip_mem_managed(uint64_t p, uint64_t n)
{
	const struct ip_vaw_alloc *a;
	int managed = 0;

	if (!atomic_load(&nmanaged))
		return 0;
	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a && a->managed)
		managed = 1;
	else if (n > 1 && p + n > p) {
		/* a range that starts before a managed allocation and runs into one */
		a = ip_vaw_find(&ip.vaw, p + n - 1);
		managed = a && a->managed;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	return managed;
}

static CUresult mem_free(uint64_t addr, struct ip_ctx *only)
{
	Rgpu__MemFree m = RGPU__MEM_FREE__INIT;
	const struct ip_vaw_alloc *a;
	uint64_t ua, us;

	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, addr);
	if (!a || a->addr != addr || (only && a->owner != only)) {
		pthread_mutex_unlock(&ip.mem_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a->managed)
		atomic_fetch_sub(&nmanaged, 1);
	int prev = ip_pin_dev(a->device);
	ip_vaw_free(&ip.vaw, addr, &ua, &us);
	for (int i = 0; i < FREED_LISTENERS && freed_listeners[i]; i++)
		freed_listeners[i](addr);
	m.addr = addr;
	m.unmap_addr = ua;
	m.unmap_size = us;
	/* posted under the lock: the server must unmap before it can see this range mapped again */
	CUresult r = ip_post(RGPU_MSG_MEM_FREE, &m.base, NULL, 0);
	ip_pin_server(prev);
	pthread_mutex_unlock(&ip.mem_lock);
	return r;
}

void ip_mem_ctx_teardown(struct ip_ctx *c)
{
	uint64_t *addrs = NULL;
	size_t n = 0;
	pthread_mutex_lock(&ip.mem_lock);
	ip_vaw_collect(&ip.vaw, c, &addrs, &n);
	pthread_mutex_unlock(&ip.mem_lock);
	for (size_t i = 0; i < n; i++)
		mem_free(addrs[i], c);
	free(addrs);
}

IP_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	struct ip_ctx *c;
	CUresult r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = ip_capture_guard("cuMemAlloc")) != CUDA_SUCCESS)
		return r;
	return ip_mem_alloc(c, size, dptr);
}

IP_API CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
					   size_t height, unsigned int elem)
{
	struct ip_ctx *c;
	CUresult r;
	size_t p;
	if (!dptr || !pitch)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!width || !height || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	/* rows aligned for coalesced access, as the driver aligns them (texture pitch) */
	p = ALIGN_UP(width, 512);
	if (p / 512 > (SIZE_MAX / 512) / height)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_mem_alloc(c, (uint64_t)p * height, dptr);
	if (r == CUDA_SUCCESS)
		*pitch = p;
	return r;
}

CUresult ip_mem_free(CUdeviceptr dptr)
{
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (dptr == 0)
		return CUDA_SUCCESS; /* as the driver answers (measured on 580.159.04) */
	if ((r = ip_ctx_sticky()) != CUDA_SUCCESS)
		return r;
	return mem_free(dptr, NULL);
}

IP_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	/* cuMemFree(0) frees nothing and is not refused: runtimes call it to make a context */
	CUresult r = dptr ? ip_capture_guard("cuMemFree") : CUDA_SUCCESS;
	return r == CUDA_SUCCESS ? ip_mem_free(dptr) : r;
}

/*
 * In memory the application mapped itself (cuMemMap), the range is the mapping's (measured on
 * the H100, where the pointer attributes RANGE_START_ADDR and RANGE_SIZE name the whole
 * reservation instead): NCCL frees with cuMemGetAddressRange, cuMemUnmap and cuMemAddressFree.
 */
IP_API CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	const struct ip_vaw_alloc *a;
	const struct ip_vaw_map *m;
	struct range g;
	int mapped = 0;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a) {
		if (base)
			*base = a->addr;
		if (size)
			*size = a->size;
	} else if ((m = ip_vaw_map_find(&ip.vaw, p)) && m->handle) {
		mapped = 1;
		if (base)
			*base = m->addr;
		if (size)
			*size = m->size;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	if (a || mapped)
		return CUDA_SUCCESS;
	if (global_find(p, &g)) {
		if (base)
			*base = g.addr;
		if (size)
			*size = g.size;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_NOT_FOUND;
}

IP_API CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	Rgpu__MemInfoReply *rep;
	CUresult r;

	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_query(RGPU_MSG_MEM_INFO, &rgpu__mem_info_reply__descriptor,
			 (ProtobufCMessage **)&rep);
	if (r != CUDA_SUCCESS)
		return r;
	*free_bytes = rep->free;
	*total = rep->total;
	rgpu__mem_info_reply__free_unpacked(rep, NULL);
	return CUDA_SUCCESS;
}

/* ---- copies and sets that name pinned host memory as device memory -------------------------- */

/*
 * With unified addressing an application may name pinned host memory where device memory is
 * expected: XLA sets and reads back a flag word it keeps there. That memory is the client's,
 * so the client does the work, in stream order: asynchronously as a host function on the
 * stream (it runs when the worker's stream reaches it, and the stream waits for it),
 * synchronously after waiting for the stream, as the driver documents for host memory. A
 * kernel still cannot touch client memory (see the user guide).
 */
struct host_job {
	uint8_t *dst;
	const uint8_t *src; /* a copy of n bytes; NULL: a set */
	size_t n;
	size_t pitch, width, height; /* a set: rows of width elements, pitch bytes apart */
	unsigned value, elem;
};

static void host_job_run(const struct host_job *h)
{
	if (h->src) {
		memmove(h->dst, h->src, h->n);
		return;
	}
	for (size_t y = 0; y < h->height; y++) {
		uint8_t *row = h->dst + y * h->pitch;
		for (size_t x = 0; x < h->width; x++) {
			if (h->elem == 1)
				row[x] = (uint8_t)h->value;
			else if (h->elem == 2)
				memcpy(row + 2 * x, &(uint16_t){(uint16_t)h->value}, 2);
			else
				memcpy(row + 4 * x, &(uint32_t){h->value}, 4);
		}
	}
}

static void CUDA_CB host_job_fn(void *arg)
{
	host_job_run(arg);
	free(arg);
}

/*
 * Captured into a graph, the job runs at every launch of it, as the driver's copy or set node
 * would: it is kept for the process's life (a graph's end does not say so), never freed.
 */
static void CUDA_CB host_job_kept_fn(void *arg)
{
	host_job_run(arg);
}

static CUresult host_job_submit(const struct host_job *h, CUstream s, int ptds, int async)
{
	struct host_job *job;
	struct ip_stream *so = NULL;
	struct ip_ctx *sc;
	CUresult r;

	if (!async) {
		r = ip_stream_sync(s, ptds);
		if (r == CUDA_SUCCESS)
			host_job_run(h);
		return r;
	}
	job = malloc(sizeof(*job));
	if (!job)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*job = *h;
	/* captured, invalidated or not (launch.c registers it as kept by the same test) */
	r = ip_stream_get(s, ptds, &sc, &so);
	CUhostFn fn = ip_capture_of(so) ? host_job_kept_fn : host_job_fn;
	if (r == CUDA_SUCCESS)
		r = ptds ? cuLaunchHostFunc_ptsz(s, fn, job) : cuLaunchHostFunc(s, fn, job);
	if (r != CUDA_SUCCESS)
		free(job);
	return r;
}

static const struct range *host_find(uint64_t p);

/* [p, p + n) lies in one pinned host allocation of this process */
static int host_range(uint64_t p, uint64_t n)
{
	const struct range *h = host_find(p);
	return h && n <= h->addr + h->size - p;
}

int ip_host_range(uint64_t p, uint64_t n)
{
	return host_range(p, n);
}

/* A copy whose device side is pinned host memory: both sides are the client's. */
static CUresult host_copy(void *dst, const void *src, size_t n, CUstream s, int ptds, int async)
{
	struct host_job h = {.dst = dst, .src = src, .n = n};
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	return host_job_submit(&h, s, ptds, async);
}

/* ---- copies ------------------------------------------------------------------------------- */


static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int ptds);
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int async, int ptds);
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int async, int ptds);
static CUresult memset_any(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
			   size_t width, size_t height, CUstream s, int ptds, int async);

/* ---- copies and sets that reach another server's device (RGPU_SERVERS) ---------------------- */

/* p is device memory of a device whose server is not c's */
static int elsewhere(const struct ip_ctx *c, uint64_t p)
{
	int d;

	if (!ip_multi_server())
		return 0;
	d = ip_addr_device(p);
	return d >= 0 && ip_dev_server(d) != ip_dev_server(c->device);
}

/* The context that owns the allocation holding p, or its device's primary context. */
static struct ip_ctx *owner_of(uint64_t p)
{
	const struct ip_vaw_alloc *a;
	struct ip_ctx *o = NULL;
	int d = ip_addr_device(p);

	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a && a->owner && !((struct ip_ctx *)a->owner)->o.dead)
		o = a->owner;
	pthread_mutex_unlock(&ip.mem_lock);
	if (!o && d >= 0 && ip.dev[d].primary->active)
		o = ip.dev[d].primary;
	return o;
}

/* What a copy or set does, to be done again on the other server. */
struct xop {
	int kind; /* 0 host to device, 1 device to host, 2 device to device, 3 set */
	CUdeviceptr dst, src;
	void *hdst;
	const void *hsrc;
	size_t n;
	size_t pitch, width, height;
	unsigned value, elem;
};

static CUresult xop_run(const struct xop *x)
{
	switch (x->kind) {
	case 0:
		return htod(x->dst, x->hsrc, x->n, NULL, 0, 0);
	case 1:
		return dtoh(x->hdst, x->src, x->n, NULL, 0, 0);
	case 2:
		return dtod(x->dst, x->src, x->n, NULL, 0);
	default:
		return memset_any(x->dst, x->pitch, x->value, x->elem, x->width, x->height, NULL, 0, 0);
	}
}

/*
 * A copy or set on stream s (of context c) whose device memory at `where` belongs to another
 * server's device. The stream's earlier work is waited for first, then the operation runs,
 * synchronously, in the context owning that memory on its server, where every later command
 * is ordered after it: the program sees it complete in stream order, at the price of the wait.
 */
static CUresult across(CUstream s, int ptds, uint64_t where, const struct xop *x)
{
	struct ip_ctx *o = owner_of(where);
	CUresult r;
	int prev;

	if (!o)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_stream_sync(s, ptds);
	if (r != CUDA_SUCCESS)
		return r;
	if (ip_ctx_stack_full("a copy or memset of another context's memory"))
		return CUDA_ERROR_OUT_OF_MEMORY;
	ip_ctx_push(o);
	prev = ip_pin_dev(o->device);
	r = xop_run(x);
	ip_pin_server(prev);
	ip_ctx_pop();
	return r;
}

#define IP_RELAY_CHUNK RGPU_COPY_CHUNK
#define IP_RELAY_BUFS 3

/*
 * Every pair of a direct copy's halves goes out in one order on both servers: two threads
 * crossing their pairs could leave a destination waiting for a copy queued behind another on
 * the same link, past the link's bound (docs/protocol.md, "Copies between two servers'
 * workers").
 */
static pthread_mutex_t peer_order = PTHREAD_MUTEX_INITIALIZER;

/*
 * A device-to-device copy between two servers, worker to worker (capability PEER_COPY): the
 * destination's worker is told to expect copy `id` (MSG_PEER_RECV), then the source's to send it
 * there (MSG_PEER_SEND, with the destination job's peer token). Each executes its part when its
 * NULL stream reaches it and holds its later commands until its part is done, so every later
 * command to either server is ordered after the copy; nothing waits here. Returns
 * CUDA_ERROR_NOT_SUPPORTED when it cannot go that way (then relay()).
 */
static CUresult peer_direct(CUdeviceptr dst, CUdeviceptr src, size_t n, struct ip_ctx *so,
			    struct ip_ctx *dn, CUstream s, int ptds)
{
	struct ip_ctx *sc;
	uint64_t sid;
	Rgpu__PeerRecv rv = RGPU__PEER_RECV__INIT;
	Rgpu__PeerSend sd = RGPU__PEER_SEND__INIT;
	uint8_t job[16], token[32];
	char to[300];
	static int relay_only = -1; /* RGPU_PEER_RELAY=1, read once */
	CUresult r;
	int prev;

	if (relay_only < 0) {
		const char *e = getenv("RGPU_PEER_RELAY");
		relay_only = e && !strcmp(e, "1");
	}
	if (!(ip.server_caps & RGPU_CAP_PEER_COPY) || relay_only ||
	    ip_session_peer(ip_dev_server(dn->device), to, sizeof(to), job, token))
		return CUDA_ERROR_NOT_SUPPORTED;
	/* the stream's side waits for the stream's earlier work, the other side for its NULL
	 * stream's; a stream of another context is waited for here */
	struct ip_stream *st;
	r = ip_stream_get(s, ptds, &sc, &st);
	if (r != CUDA_SUCCESS)
		return r;
	if (ip_capture_of(st)) {
		pr_warn_once("refused: a copy between two servers' devices inside a stream capture");
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	sid = st ? st->o.id : 0;
	if (sc == so)
		sd.stream = sid;
	else if (sc == dn)
		rv.stream = sid;
	else if ((r = ip_stream_sync(s, ptds)) != CUDA_SUCCESS)
		return r;
	rv.id = sd.id = ip_new_id();
	rv.dst = dst;
	rv.size = sd.size = n;
	rv.ctx = dn->o.id;
	sd.src = src;
	sd.ctx = so->o.id;
	sd.to = to;
	sd.job_id.data = job;
	sd.job_id.len = sizeof(job);
	sd.peer_token.data = token;
	sd.peer_token.len = sizeof(token);
	pthread_mutex_lock(&peer_order);
	prev = ip_pin_dev(dn->device);
	r = ip_post(RGPU_MSG_PEER_RECV, &rv.base, NULL, 0);
	ip_pin_dev(so->device);
	if (r == CUDA_SUCCESS)
		r = ip_post(RGPU_MSG_PEER_SEND, &sd.base, NULL, 0);
	ip_pin_server(prev);
	pthread_mutex_unlock(&peer_order);
	pr_debug("copy %llu: %zu bytes from device %d to device %d, worker to worker",
		 (unsigned long long)rv.id, n, so->device, dn->device);
	return r;
}

/*
 * A device-to-device copy from so's device to dn's, on two servers, relayed through this
 * process in chunks through three buffers: while chunk k is written to the destination's server, chunk k + 1 is on its
 * way from the source's, and the write of chunk k - 1 may still be executing there (a write
 * borrows its buffer, which is let go only before the buffer is filled again, so no chunk is
 * copied on the way). The stream s (of either side) is waited for first; the last chunk is
 * written as a synchronous copy, so the destination's server orders every later command after
 * it; the source's reads end before this returns.
 */
static CUresult relay(CUdeviceptr dst, CUdeviceptr src, size_t n, struct ip_ctx *so,
		      struct ip_ctx *dn, CUstream s, int ptds)
{
	Rgpu__Memcpy rd = RGPU__MEMCPY__INIT, wr = RGPU__MEMCPY__INIT;
	Rgpu__StreamOp sync = RGPU__STREAM_OP__INIT;
	uint8_t *buf[IP_RELAY_BUFS] = {NULL};
	uint64_t seq[IP_RELAY_BUFS] = {0}; /* the borrowed write of each buffer, or 0 */
	size_t chunk = MIN(n, IP_RELAY_CHUNK);
	size_t nchunks = (n + chunk - 1) / chunk, nbufs = MIN(nchunks, (size_t)IP_RELAY_BUFS);
	CUresult r, r2;
	int prev;

	r = ip_stream_sync(s, ptds);
	if (r != CUDA_SUCCESS)
		return r;
	for (size_t b = 0; b < nbufs; b++)
		if (!(buf[b] = malloc(chunk)))
			r = CUDA_ERROR_OUT_OF_MEMORY;
	rd.ctx = sync.ctx = so->o.id;
	rd.flags = RGPU__COPY_FLAG__COPY_ASYNC;
	wr.ctx = dn->o.id;
	prev = ip_pin_dev(so->device);
	/* the first chunk, then each next one on its way while the one before is written */
	rd.src = src;
	rd.size = chunk;
	if (r == CUDA_SUCCESS)
		r = ip_post_dtoh(&rd.base, buf[0], chunk, NULL);
	if (r == CUDA_SUCCESS)
		r = ip_call_status(RGPU_MSG_STREAM_SYNC, &sync.base, NULL, 0, NULL, 0, NULL, NULL);
	for (size_t k = 0; k < nchunks && r == CUDA_SUCCESS; k++) {
		size_t off = k * chunk, len = MIN(chunk, n - off), b = k % nbufs;
		size_t nb = (k + 1) % nbufs;
		if (k + 1 < nchunks) {
			if (seq[nb]) { /* the buffer's last write must be done with it */
				ip_pin_dev(dn->device);
				r = ip_release_borrowed(seq[nb], seq[nb]);
				seq[nb] = 0;
			}
			ip_pin_dev(so->device);
			rd.src = src + off + len;
			rd.size = MIN(chunk, n - off - len);
			if (r == CUDA_SUCCESS)
				r = ip_post_dtoh(&rd.base, buf[nb], rd.size, NULL);
		}
		ip_pin_dev(dn->device);
		wr.dst = dst + off;
		wr.size = len;
		wr.flags = k + 1 < nchunks ? RGPU__COPY_FLAG__COPY_ASYNC : 0;
		if (r == CUDA_SUCCESS)
			r = ip_post_borrowed(RGPU_MSG_MEMCPY_HTOD, &wr.base, buf[b], len, &seq[b]);
		if (r == CUDA_SUCCESS && k + 1 < nchunks) {
			ip_pin_dev(so->device);
			r = ip_call_status(RGPU_MSG_STREAM_SYNC, &sync.base, NULL, 0, NULL, 0, NULL,
					   NULL);
		}
	}
	/* a failure may leave a chunk on its way into a buffer: let it land before they go */
	if (r != CUDA_SUCCESS && nchunks > 1) {
		ip_pin_dev(so->device);
		(void)ip_call_status(RGPU_MSG_STREAM_SYNC, &sync.base, NULL, 0, NULL, 0, NULL, NULL);
	}
	/* the buffers go: what the destination has not executed yet is copied */
	ip_pin_dev(dn->device);
	for (size_t b = 0; b < nbufs; b++)
		if (seq[b] && (r2 = ip_release_borrowed(seq[b], seq[b])) != CUDA_SUCCESS &&
		    r == CUDA_SUCCESS)
			r = r2;
	ip_pin_server(prev);
	for (size_t b = 0; b < nbufs; b++)
		free(buf[b]);
	return r;
}

/* A device-to-device copy between two servers: worker to worker where it can, else relayed. */
static CUresult between(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int ptds)
{
	struct ip_ctx *so = owner_of(src), *dn = owner_of(dst);
	CUresult r;

	if (!so || !dn)
		return CUDA_ERROR_INVALID_VALUE;
	r = peer_direct(dst, src, n, so, dn, s, ptds);
	return r != CUDA_ERROR_NOT_SUPPORTED ? r : relay(dst, src, n, so, dn, s, ptds);
}

static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream s, int async, int ptds)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	uint64_t first = 0, last = 0;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(s, ptds, &c, &sid);

	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!sid && (r = ip_capture_guard_legacy(c, "cuMemcpyHtoD")) != CUDA_SUCCESS)
		return r;
	/* managed memory is device memory, whatever the call says (unified addressing) */
	if (ip_mem_managed((uint64_t)(uintptr_t)src, n))
		return dtod(dst, (CUdeviceptr)(uintptr_t)src, n, s, ptds);
	if (host_range(dst, n))
		return host_copy((void *)(uintptr_t)dst, src, n, s, ptds, async);
	if (!src || !ip_devptr_ok(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	if (elsewhere(c, dst))
		return across(s, ptds, dst, &(struct xop){.kind = 0, .dst = dst, .hsrc = src, .n = n});
	m.stream = sid;
	m.ctx = c->o.id;
	/* as large as the way there takes them (ip_copy_chunk) */
	uint64_t at, reg_off, reg_len;
	int in_arena = ip_arena_dst(src, n, &at, &reg_off, &reg_len);
	size_t chunk = ip_copy_chunk(in_arena);
	for (size_t off = 0; off < n && r == CUDA_SUCCESS; off += chunk) {
		size_t len = MIN(chunk, n - off);
		uint64_t seq = 0;
		/*
		 * A synchronous copy is complete when it returns, for work on every stream: the
		 * server holds all later commands until its last chunk has landed. The client need
		 * not wait for that: the command stream is ordered.
		 */
		m.flags = async || off + len < n ? RGPU__COPY_FLAG__COPY_ASYNC : 0;
		m.dst = dst + off;
		m.size = len;
		r = ip_post_borrowed(RGPU_MSG_MEMCPY_HTOD, &m.base, (const char *)src + off, len,
				     &seq);
		if (!first)
			first = seq;
		last = seq;
	}
	/*
	 * The chunks are kept for a resend until the worker has executed them. From pinned
	 * memory an async copy's source must stay unchanged until the copy is observed complete,
	 * and observing it means the worker has executed past it: nothing to do. Otherwise the
	 * caller may reuse its buffer as soon as this returns.
	 */
	/*
	 * From pinned memory a worker on this host maps (the arena), the chunks went by reference:
	 * the worker reads the caller's bytes only when it runs them, and a synchronous copy from
	 * pinned memory is complete when it returns. Its acknowledgement is not enough (the worker
	 * acknowledges a frame as it starts it), nor is a copy for a resend: wait for the worker
	 * to have run the last chunk, whose handler waits for the copy.
	 */
	if (last && r == CUDA_SUCCESS && !async && in_arena)
		r = ip_call_barrier();
	if (last && !(async && host_find((uint64_t)(uintptr_t)src))) {
		CUresult r2 = ip_release_borrowed(first, last);
		if (r == CUDA_SUCCESS)
			r = r2;
	}
	return r;
}


static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s, int async, int ptds)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	struct ip_stream *so;
	struct ip_ctx *c;
	CUresult r = ip_stream_get(s, ptds, &c, &so);

	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!so && (r = ip_capture_guard_legacy(c, "cuMemcpyDtoH")) != CUDA_SUCCESS)
		return r;
	if (ip_mem_managed((uint64_t)(uintptr_t)dst, n))
		return dtod((CUdeviceptr)(uintptr_t)dst, src, n, s, ptds);
	if (host_range(src, n))
		return host_copy(dst, (const void *)(uintptr_t)src, n, s, ptds, async);
	if (!dst || !ip_devptr_ok(src, n))
		return CUDA_ERROR_INVALID_VALUE;
	if (elsewhere(c, src))
		return across(s, ptds, src, &(struct xop){.kind = 1, .src = src, .hdst = dst, .n = n});
	m.src = src;
	m.size = n;
	m.stream = so ? so->o.id : 0;
	m.ctx = c->o.id;
	/* into pinned memory the worker maps too (shared memory): it lands there directly */
	if (ip_arena_dst(dst, n, &m.host_arena, &m.host_reg_off, &m.host_reg_len))
		m.host_arena++;
	/*
	 * Into pinned memory an async copy returns at once and lands in stream order; into
	 * pageable memory the driver returns only once the copy is complete, and programs rely
	 * on it, so rgpu waits there too.
	 */
	if (async && host_find((uint64_t)(uintptr_t)dst)) {
		if (ip_capture_of(so)) {
			/* would have to resend the data at every replay: not forwarded yet */
			pr_warn("a device-to-host copy inside a stream capture is not supported");
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
		m.flags = RGPU__COPY_FLAG__COPY_ASYNC;
		return ip_post_dtoh(&m.base, dst, n, NULL);
	}
	return ip_call_status(RGPU_MSG_MEMCPY_DTOH, &m.base, NULL, 0, dst, n, NULL, NULL);
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int ptds)
{
	Rgpu__Memcpy m = RGPU__MEMCPY__INIT;
	struct ip_ctx *c;
	uint64_t sid;
	CUresult r = ip_stream_resolve(s, ptds, &c, &sid);

	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!sid && (r = ip_capture_guard_legacy(c, "cuMemcpyDtoD")) != CUDA_SUCCESS)
		return r;
	if (host_range(src, n) || host_range(dst, n)) { /* a side in pinned host memory */
		if (host_range(src, n) && host_range(dst, n))
			return host_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, s,
					 ptds, 1);
		if (host_range(src, n))
			return htod(dst, (const void *)(uintptr_t)src, n, s, 1, ptds);
		return dtoh((void *)(uintptr_t)dst, src, n, s, 1, ptds);
	}
	if (!ip_devptr_ok(src, n) || !ip_devptr_ok(dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	if (ip_multi_server()) {
		int ds = ip_addr_device(src), dd = ip_addr_device(dst);
		if (ds >= 0 && dd >= 0 && ip_dev_server(ds) != ip_dev_server(dd))
			return between(dst, src, n, s, ptds);
		uint64_t where = elsewhere(c, dst) ? dst : elsewhere(c, src) ? src : 0;
		if (where)
			return across(s, ptds, where,
				      &(struct xop){.kind = 2, .dst = dst, .src = src, .n = n});
	}
	m.dst = dst;
	m.src = src;
	m.size = n;
	m.stream = sid;
	m.ctx = c->o.id;
	return ip_post(RGPU_MSG_MEMCPY_DTOD, &m.base, NULL, 0);
}

/* cuMemcpy with unified addressing: the window (and module globals) are the device. */
static CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async,
			int ptds)
{
	int dd = ip_is_devptr(dst), sd = ip_is_devptr(src);
	CUresult r;

	if (dd && sd)
		return dtod(dst, src, n, s, ptds);
	if (dd)
		return htod(dst, (const void *)(uintptr_t)src, n, s, async, ptds);
	if (sd)
		return dtoh((void *)(uintptr_t)dst, src, n, s, async, ptds);
	/* host to host: ordered after the stream's earlier work, like the driver's */
	if (!async) {
		r = ip_check_init();
		if (r != CUDA_SUCCESS)
			return r;
	}
	if (n && (!dst || !src))
		return CUDA_ERROR_INVALID_VALUE;
	if (n) {
		if (async) {
			r = ip_stream_sync(s, ptds);
			if (r != CUDA_SUCCESS)
				return r;
		}
		memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	}
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return htod(dst, src, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	return htod(dst, src, n, NULL, 0, 1);
}
IP_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return dtoh(dst, src, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return dtoh(dst, src, n, NULL, 0, 1);
}
IP_API CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return dtod(dst, src, n, NULL, 0);
}
IP_API CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return dtod(dst, src, n, NULL, 1);
}
IP_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n,
					     CUstream s)
{
	return htod(dst, src, n, s, 1, 0);
}
IP_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n,
						  CUstream s)
{
	return htod(dst, src, n, s, 1, 1);
}
IP_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return dtoh(dst, src, n, s, 1, 0);
}
IP_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n,
						  CUstream s)
{
	return dtoh(dst, src, n, s, 1, 1);
}
IP_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
					     CUstream s)
{
	return dtod(dst, src, n, s, 0);
}
IP_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
						  CUstream s)
{
	return dtod(dst, src, n, s, 1);
}
IP_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return unified(dst, src, n, NULL, 0, 0);
}
IP_API CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return unified(dst, src, n, NULL, 0, 1);
}
IP_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return unified(dst, src, n, s, 1, 0);
}
IP_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
					   CUstream s)
{
	return unified(dst, src, n, s, 1, 1);
}

/*
 * Copies between contexts (cuMemcpyPeer): with unified addressing the addresses say where each
 * side lives, so this is a device-to-device copy (between two servers: between()).
 */
static CUresult peer_copy(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
			  CUstream s, int ptds)
{
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!ip_obj_get(dc, ST_KIND_CONTEXT) || !ip_obj_get(sc, ST_KIND_CONTEXT))
		return CUDA_ERROR_INVALID_CONTEXT;
	return dtod(dst, src, n, s, ptds);
}

IP_API CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc,
				     size_t n)
{
	return peer_copy(dst, dc, src, sc, n, NULL, 0);
}
IP_API CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dc, CUdeviceptr src,
					  CUcontext sc, size_t n)
{
	return peer_copy(dst, dc, src, sc, n, NULL, 1);
}
IP_API CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src,
					  CUcontext sc, size_t n, CUstream s)
{
	return peer_copy(dst, dc, src, sc, n, s, 0);
}
IP_API CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dc, CUdeviceptr src,
					       CUcontext sc, size_t n, CUstream s)
{
	return peer_copy(dst, dc, src, sc, n, s, 1);
}

/* ---- sets --------------------------------------------------------------------------------- */

static CUresult memset_any(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
			   size_t width, size_t height, CUstream s, int ptds, int async)
{
	Rgpu__Memset m = RGPU__MEMSET__INIT;
	struct ip_ctx *c;
	uint64_t sid, span;
	CUresult r = ip_stream_resolve(s, ptds, &c, &sid);

	if (r != CUDA_SUCCESS)
		return r;
	if (width == 0 || height == 0)
		return CUDA_SUCCESS;
	if (!sid && (r = ip_capture_guard_legacy(c, "cuMemset")) != CUDA_SUCCESS)
		return r;
	if (dst % elem || (height > 1 && (pitch < width * elem || pitch % elem)))
		return CUDA_ERROR_INVALID_VALUE;
	if (width > SIZE_MAX / elem || (height > 1 && pitch > SIZE_MAX / height))
		return CUDA_ERROR_INVALID_VALUE;
	span = height > 1 ? pitch * (height - 1) + width * elem : width * elem;
	if (host_range(dst, span)) {
		struct host_job h = {.dst = (uint8_t *)(uintptr_t)dst, .pitch = height > 1 ? pitch : 0,
				     .width = width, .height = height, .value = value, .elem = elem};
		return host_job_submit(&h, s, ptds, async);
	}
	if (!ip_devptr_ok(dst, span))
		return CUDA_ERROR_INVALID_VALUE;
	if (elsewhere(c, dst))
		return across(s, ptds, dst,
			      &(struct xop){.kind = 3, .dst = dst, .pitch = pitch, .value = value,
					    .elem = elem, .width = width, .height = height});
	m.dst = dst;
	m.value = value;
	m.elem_size = elem;
	m.width = width;
	m.height = height;
	m.pitch = pitch;
	m.stream = sid;
	m.ctx = c->o.id;
	return ip_post(RGPU_MSG_MEMSET, &m.base, NULL, 0);
}

#define MEMSET_1D(name, T, elem, ptds, async, asyncarg, asyncval)                              \
	IP_API CUresult CUDAAPI name(CUdeviceptr dst, T v, size_t n asyncarg)                  \
	{                                                                                      \
		return memset_any(dst, 0, v, elem, n, 1, asyncval, ptds, async);               \
	}
#define MEMSET_2D(name, T, elem, ptds, async, asyncarg, asyncval)                              \
	IP_API CUresult CUDAAPI name(CUdeviceptr dst, size_t pitch, T v, size_t w,             \
				     size_t h asyncarg)                                        \
	{                                                                                      \
		return memset_any(dst, pitch, v, elem, w, h, asyncval, ptds, async);           \
	}
#define COMMA_STREAM , CUstream s

MEMSET_1D(cuMemsetD8_v2, unsigned char, 1, 0, 0, , NULL)
MEMSET_1D(cuMemsetD16_v2, unsigned short, 2, 0, 0, , NULL)
MEMSET_1D(cuMemsetD32_v2, unsigned int, 4, 0, 0, , NULL)
MEMSET_1D(cuMemsetD8_v2_ptds, unsigned char, 1, 1, 0, , NULL)
MEMSET_1D(cuMemsetD16_v2_ptds, unsigned short, 2, 1, 0, , NULL)
MEMSET_1D(cuMemsetD32_v2_ptds, unsigned int, 4, 1, 0, , NULL)
MEMSET_1D(cuMemsetD8Async, unsigned char, 1, 0, 1, COMMA_STREAM, s)
MEMSET_1D(cuMemsetD16Async, unsigned short, 2, 0, 1, COMMA_STREAM, s)
MEMSET_1D(cuMemsetD32Async, unsigned int, 4, 0, 1, COMMA_STREAM, s)
MEMSET_1D(cuMemsetD8Async_ptsz, unsigned char, 1, 1, 1, COMMA_STREAM, s)
MEMSET_1D(cuMemsetD16Async_ptsz, unsigned short, 2, 1, 1, COMMA_STREAM, s)
MEMSET_1D(cuMemsetD32Async_ptsz, unsigned int, 4, 1, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D8_v2, unsigned char, 1, 0, 0, , NULL)
MEMSET_2D(cuMemsetD2D16_v2, unsigned short, 2, 0, 0, , NULL)
MEMSET_2D(cuMemsetD2D32_v2, unsigned int, 4, 0, 0, , NULL)
MEMSET_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, 1, 0, , NULL)
MEMSET_2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, 1, 0, , NULL)
MEMSET_2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, 1, 0, , NULL)
MEMSET_2D(cuMemsetD2D8Async, unsigned char, 1, 0, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D16Async, unsigned short, 2, 0, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D32Async, unsigned int, 4, 0, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D8Async_ptsz, unsigned char, 1, 1, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D16Async_ptsz, unsigned short, 2, 1, 1, COMMA_STREAM, s)
MEMSET_2D(cuMemsetD2D32Async_ptsz, unsigned int, 4, 1, 1, COMMA_STREAM, s)

/* ---- pinned host memory ------------------------------------------------------------------- */

static const struct range *host_find(uint64_t p)
{
	struct range key = {.addr = p, .size = 1}, **h;
	const struct range *r;
	pthread_mutex_lock(&ip.lock);
	h = tfind(&key, &ip.host_allocs, range_cmp);
	r = h ? *h : NULL;
	pthread_mutex_unlock(&ip.lock);
	return r;
}

static CUresult host_add(void *p, size_t size, unsigned flags, int ours)
{
	struct range *h = malloc(sizeof(*h)), **e;
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->addr = (uint64_t)(uintptr_t)p;
	h->size = size;
	h->flags = flags;
	h->pinned_by_us = ours;
	h->ctx = ip_ctx_cur();
	pthread_mutex_lock(&ip.lock);
	e = tfind(h, &ip.host_allocs, range_cmp);
	if (!e)
		e = tsearch(h, &ip.host_allocs, range_cmp);
	else
		e = NULL;
	pthread_mutex_unlock(&ip.lock);
	if (!e) {
		free(h);
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	}
	return CUDA_SUCCESS;
}

static struct range *host_remove(void *p, int ours)
{
	struct range key = {.addr = (uint64_t)(uintptr_t)p, .size = 1}, **h, *r = NULL;
	pthread_mutex_lock(&ip.lock);
	h = tfind(&key, &ip.host_allocs, range_cmp);
	if (h && (*h)->addr == key.addr && (*h)->pinned_by_us == ours) {
		r = *h;
		tdelete(r, &ip.host_allocs, range_cmp);
	}
	pthread_mutex_unlock(&ip.lock);
	return r;
}

static CUresult host_alloc(void **pp, size_t size, unsigned flags, const char *call)
{
	struct ip_ctx *c;
	CUresult r;
	void *p;

	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (size == 0 || flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
				   CU_MEMHOSTALLOC_WRITECOMBINED))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = ip_capture_guard(call)) != CUDA_SUCCESS)
		return r;
	/* small ones in the host area, where kernels can dereference them (hostmirror.c) */
	p = ip_hm_alloc(size);
	if (!p && (flags & CU_MEMHOSTALLOC_DEVICEMAP) && mapped_alloc) {
		/* larger mapped ones as managed ranges, which kernels dereference too (managed.c) */
		CUdeviceptr d;
		r = mapped_alloc(c, size, flags, &d);
		if (r == CUDA_SUCCESS)
			*pp = (void *)(uintptr_t)d;
		return r;
	}
	/* shared with a worker on this host, which copies from and into it directly */
	if (!p)
		p = ip_arena_alloc(size);
	if (!p) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = host_add(p, size, flags, 1);
	if (r != CUDA_SUCCESS) {
		if (!ip_hm_free(p) && ip_arena_free(p) <= 0)
			munmap(p, size);
		return r;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t size)
{
	return host_alloc(pp, size, 0, "cuMemAllocHost");
}

IP_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	return host_alloc(pp, size, flags, "cuMemHostAlloc");
}

/*
 * Wait for the current context before pinned memory is freed, as cudaFreeHost does. Not while
 * a stream of it is capturing: the driver would refuse (and invalidate the capture), and a
 * relaxed-mode cudaFreeHost inside a capture succeeds natively.
 */
static void host_free_wait(void)
{
	struct ip_ctx *c = ip_ctx_cur();
	if (c && !ip_capture_in_ctx(c))
		(void)ip_ctx_sync(c);
}

IP_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
	struct range *h;
	uint64_t base;
	unsigned fl;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = ip_capture_guard("cuMemFreeHost")) != CUDA_SUCCESS)
		return r;
	if (mapped_host((uint64_t)(uintptr_t)p, &base, &fl)) {
		if (base != (uint64_t)(uintptr_t)p)
			return CUDA_ERROR_INVALID_VALUE;
		host_free_wait();
		return mem_free(base, NULL);
	}
	/*
	 * Memory the device may still be writing: wait for it first, as cudaFreeHost does, so
	 * that no late write lands in the next allocation made there. The host area's regions
	 * (the server zeroes them now), and any other pinned memory: an asynchronous copy's data
	 * comes later as MSG_DATA, or into the arena from the worker's copy engine, whose
	 * MSG_ARENA_RELEASE waits only where the worker maps the arena (not after the job moved to
	 * another host) and only for the worker's current context.
	 */
	if (ip_hm_contains(p) || host_find((uint64_t)(uintptr_t)p))
		host_free_wait();
	h = host_remove(p, 1);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ip_hm_free(p) && ip_arena_free(p) <= 0)
		munmap(p, h->size);
	free(h);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (!p || size == 0 ||
	    flags & ~(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
		      CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEMHOSTREGISTER_IOMEMORY) {
		ip_refused("cuMemHostRegister with CU_MEMHOSTREGISTER_IOMEMORY",
			   "I/O memory of this machine cannot be mapped for a remote GPU");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((r = ip_capture_guard("cuMemHostRegister")) != CUDA_SUCCESS)
		return r;
	return host_add(p, size, flags, 0);
}

IP_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct range *h;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	h = host_remove(p, 0);
	if (!h)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	free(h);
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMemHostGetFlags(unsigned int *flags, void *p)
{
	const struct range *h;
	uint64_t base;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (mapped_host((uint64_t)(uintptr_t)p, &base, flags))
		return CUDA_SUCCESS;
	h = host_find((uint64_t)(uintptr_t)p);
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = h->flags;
	return CUDA_SUCCESS;
}

/*
 * Unified addressing: a pinned host buffer's device address is its host address. A kernel can
 * dereference it on the server when it lies in the host area (hostmirror.c: small
 * cuMemHostAlloc allocations); other pinned memory stays this machine's, and a kernel that
 * dereferences it faults on the server. Copies to and from any of it work like host memory.
 */
IP_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned int flags)
{
	uint64_t base;
	unsigned fl;
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!dptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!host_find((uint64_t)(uintptr_t)p) && !mapped_host((uint64_t)(uintptr_t)p, &base, &fl))
		return CUDA_ERROR_INVALID_VALUE;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* ---- what an address is (pointer.c turns it into pointer attributes) ---------------------- */

void ip_ptr_classify(uint64_t p, struct ip_ptrinfo *pi)
{
	const struct ip_vaw_map *m;
	const struct ip_vaw_alloc *a;
	const struct range *r;
	struct range g;

	memset(pi, 0, sizeof(*pi));
	pthread_mutex_lock(&ip.mem_lock);
	a = ip_vaw_find(&ip.vaw, p);
	if (a) {
		pi->kind = 1;
		pi->base = a->addr;
		pi->size = a->size;
		pi->device = a->device;
		pi->ctx = a->owner;
		pi->buffer_id = a->addr;
		pi->managed = a->managed == 1;
		if (a->user_size)
			pi->size = a->user_size;
		if (a->managed == 2)
			pi->kind = 2; /* mapped pinned host memory: host memory to the program */
	} else if ((m = ip_vaw_map_find(&ip.vaw, p)) && m->handle) {
		/*
		 * The application's mapping: device memory of no context, whose range is the
		 * whole reservation it was mapped into (measured on the H100: RANGE_START_ADDR and
		 * RANGE_SIZE of a mapping name the cuMemAddressReserve range).
		 */
		const struct ip_vaw_resv *rv = ip_vaw_resv_find(&ip.vaw, p);
		pi->kind = 1;
		pi->base = rv ? rv->addr : m->addr;
		pi->size = rv ? rv->size : m->size;
		pi->device = m->device;
		pi->buffer_id = m->addr;
		pi->physmem = m->handle;
		pi->access = m->access;
	}
	pthread_mutex_unlock(&ip.mem_lock);
	if (pi->kind)
		return;
	if (global_find(p, &g)) {
		pi->kind = 1;
		pi->base = g.addr;
		pi->size = g.size;
		pi->ctx = ip_ctx_cur();
		pi->device = pi->ctx ? pi->ctx->device : 0;
		pi->managed = g.flags & 1;
		pi->buffer_id = g.addr;
		return;
	}
	if ((r = host_find(p))) {
		pi->kind = 2;
		pi->base = r->addr;
		pi->size = r->size;
		pi->ctx = r->ctx;
		pi->device = r->ctx ? r->ctx->device : 0;
		pi->buffer_id = r->addr;
	}
}
