/*
 * The job's device address window (design.md §3) and what is mapped in it. worker.c reserves
 * the window at start-up; here ranges of it are backed with device memory when the client asks
 * (cuMemCreate, cuMemMap, cuMemSetAccess) and released again, and the application's own
 * mappings of its physical memory (its cuMemMap) are made and undone, all tracked in one tree
 * of srv_map ranges so that an overlapping map or a partial unmap is refused. It also
 * remembers the module globals the client has looked up, the only device memory outside the
 * window a client may name, until their module is unloaded. A handler must pass every device
 * address it takes from the client through srv_dev_range_ok() (or map it here) before the driver
 * sees it.
 */
#define LOG_PREFIX "exec: "
#include <search.h>
#include <stdlib.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"

/*
 * Ranges are compared by their last bytes (every range in a tree, and every key, is at least one
 * byte long and ends at or below 2^64), so a key near the top of the address space never wraps.
 */
static int map_cmp(const void *a, const void *b)
{
	const struct srv_map *x = a, *y = b;
	if (x->addr + (x->size - 1) < y->addr)
		return -1;
	if (y->addr + (y->size - 1) < x->addr)
		return 1;
	return 0; /* overlapping ranges compare equal: lookups find the containing mapping */
}

int srv_in_window(struct srv_worker *w, uint64_t addr, uint64_t size)
{
	uint64_t base = w->cfg->window_base;
	return size && addr >= base && rgpu_range_in(addr - base, 1, size, w->cfg->window_size);
}

/*
 * May the client name [addr, addr+size) as device memory? Only the window and the module
 * globals it has looked up: anything else could be one of the worker's own pinned buffers,
 * which a unified address space would otherwise let a copy reach.
 */
int srv_dev_range_ok(struct srv_worker *w, uint64_t addr, uint64_t size)
{
	struct srv_map key = {.addr = addr, .size = 1}, **g;
	if (srv_in_window(w, addr, size))
		return 1;
	g = tfind(&key, &w->globals, map_cmp);
	if (g && rgpu_range_in(addr - (*g)->addr, 1, size, (*g)->size))
		return 1;
	/* a global the driver placed elsewhere in a restored job, by the client's address */
	for (size_t i = 0; i < w->ngmoves; i++)
		if (addr >= w->gmoves[i].addr &&
		    rgpu_range_in(addr - w->gmoves[i].addr, 1, size, w->gmoves[i].size))
			return 1;
	return 0;
}

uint64_t srv_dev_translate(struct srv_worker *w, uint64_t addr)
{
	for (size_t i = 0; i < w->ngmoves; i++)
		if (addr >= w->gmoves[i].addr && addr - w->gmoves[i].addr < w->gmoves[i].size)
			return w->gmoves[i].now + (addr - w->gmoves[i].addr);
	return addr;
}

/*
 * May the client name [*addr, *addr+size) as device memory in request `what`? The refusal is
 * said at warn (once per session: a client can repeat it at will). When it may, *addr becomes
 * the address the driver knows (another one only inside a module global a restore placed
 * elsewhere).
 */
int srv_dev_range(struct srv_worker *w, const char *what, uint64_t *addrp, uint64_t size)
{
	uint64_t addr = *addrp;

	if (srv_dev_range_ok(w, addr, size)) {
		*addrp = srv_dev_translate(w, addr);
		return 1;
	}
	pr_warn_once("%s refused: [%#llx, +%llu bytes) is not device memory of this job (the "
		     "window and the module globals it looked up)",
		     what, (unsigned long long)addr, (unsigned long long)size);
	return 0;
}

void srv_translate_params(struct srv_worker *w, void *params, uint64_t len)
{
	uint8_t *p = params;

	if (!w->ngmoves || !p)
		return;
	for (uint64_t off = 0; off + 8 <= len; off += 8) {
		uint64_t v = rd_le64(p + off), t = srv_dev_translate(w, v);
		if (t != v)
			wr_le64(p + off, t);
	}
}

/* twalk() passes no argument: the walk's state (executor thread only) */
static struct {
	struct srv_map *v;
	size_t n, cap;
	int failed;
} listing;

static void list_walk(const void *node, VISIT which, int depth)
{
	const struct srv_map *m = *(const struct srv_map *const *)node;

	(void)depth;
	if (which != postorder && which != leaf)
		return;
	if (listing.n == listing.cap) {
		size_t cap = listing.cap ? 2 * listing.cap : 64;
		struct srv_map *v = realloc(listing.v, cap * sizeof(*v));
		if (!v) {
			listing.failed = 1;
			return;
		}
		listing.v = v;
		listing.cap = cap;
	}
	listing.v[listing.n++] = *m;
}

int srv_maps_list(struct srv_worker *w, struct srv_map **out, size_t *n)
{
	listing.v = NULL;
	listing.n = listing.cap = 0;
	listing.failed = 0;
	twalk(w->maps, list_walk);
	if (listing.failed) {
		free(listing.v);
		return RGPU_ENOMEM;
	}
	/* an in-order walk: by address already */
	*out = listing.v;
	*n = listing.n;
	return 0;
}

void srv_remember_global(struct srv_worker *w, uint64_t module, uint64_t addr, uint64_t size)
{
	struct srv_map key = {.addr = addr, .size = size ? size : 1, .owner = module}, *g;
	if (tfind(&key, &w->globals, map_cmp))
		return;
	g = calloc(1, sizeof(*g));
	if (!g)
		return;
	*g = key;
	if (!tsearch(g, &w->globals, map_cmp))
		free(g);
}

/* twalk() passes no argument: the walk's state (executor thread only) */
static struct {
	uint64_t module;
	struct srv_map **v;
	size_t n, cap;
} forget;

static void forget_walk(const void *node, VISIT which, int depth)
{
	struct srv_map *g = *(struct srv_map *const *)node;

	(void)depth;
	if ((which != postorder && which != leaf) || g->owner != forget.module)
		return;
	if (forget.n == forget.cap) {
		size_t cap = forget.cap ? 2 * forget.cap : 16;
		struct srv_map **v = realloc(forget.v, cap * sizeof(*v));
		if (!v)
			return; /* stays nameable: out of memory, the driver's check is the last */
		forget.v = v;
		forget.cap = cap;
	}
	forget.v[forget.n++] = g;
}

void srv_forget_globals(struct srv_worker *w, uint64_t module)
{
	forget.module = module;
	forget.n = 0;
	twalk(w->globals, forget_walk);
	for (size_t i = 0; i < forget.n; i++) {
		tdelete(forget.v[i], &w->globals, map_cmp);
		free(forget.v[i]);
	}
	forget.n = 0;
	for (size_t i = 0; i < w->ngmoves;)
		if (w->gmoves[i].module == module)
			w->gmoves[i] = w->gmoves[--w->ngmoves];
		else
			i++;
}

CUresult srv_map_range(struct srv_worker *w, uint64_t addr, uint64_t size, int device)
{
	struct srv_driver *d = &w->drv;
	CUmemAllocationProp prop = {0};
	CUmemAccessDesc acc = {0};
	struct srv_map key = {.addr = addr, .size = size}, *m;
	CUresult r;

	if (!srv_in_window(w, addr, size) || addr % RGPU_GRANULE || size % RGPU_GRANULE ||
	    device < 0 || device >= w->ndev)
		return CUDA_ERROR_INVALID_VALUE;
	if (tfind(&key, &w->maps, map_cmp))
		return CUDA_ERROR_INVALID_VALUE; /* overlaps a live mapping */
	/* counted first: a tenant at its quota is answered as a full GPU, the driver never asked */
	r = srv_mem_charge(w, device, size);
	if (r != CUDA_SUCCESS)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_uncharge;
	}
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = w->dev[device];
	r = d->cuMemCreate(&m->h, size, &prop, 0);
	if (r != CUDA_SUCCESS)
		goto out_free;
	r = d->cuMemMap(addr, size, 0, m->h, 0);
	if (r != CUDA_SUCCESS)
		goto out_release;
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	r = d->cuMemSetAccess(addr, size, &acc, 1);
	if (r != CUDA_SUCCESS)
		goto out_unmap;
	m->addr = addr;
	m->size = size;
	m->device = device;
	if (!tsearch(m, &w->maps, map_cmp)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unmap;
	}
	return CUDA_SUCCESS;
out_unmap:
	d->cuMemUnmap(addr, size);
out_release:
	d->cuMemRelease(m->h);
out_free:
	free(m);
out_uncharge:
	srv_mem_uncharge(w, device, size);
	return r;
}

const struct srv_map *srv_map_find(struct srv_worker *w, uint64_t addr, uint64_t size)
{
	struct srv_map key = {.addr = addr, .size = 1}, **p;
	p = tfind(&key, &w->maps, map_cmp);
	return p && (*p)->addr == addr && (*p)->size == size ? *p : NULL;
}

int srv_mapped(struct srv_worker *w, uint64_t addr, uint64_t size)
{
	return srv_map_find(w, addr, size) != NULL;
}

/*
 * The application's own mapping: its physical memory is an object of its own (exec_memory.c
 * made it, the state log releases it), so this maps and unmaps only. Access is set apart, as the
 * application asks for it (cuMemSetAccess): a new mapping has none, as with the driver.
 */
CUresult srv_map_app(struct srv_worker *w, uint64_t addr, uint64_t size, uint64_t offset,
		     const struct srv_obj *pm)
{
	struct srv_map key = {.addr = addr, .size = size}, *m;
	CUmemGenericAllocationHandle h = (CUmemGenericAllocationHandle)(uintptr_t)pm->h;
	CUresult r;

	if (!srv_in_window(w, addr, size) || addr % RGPU_GRANULE || size % RGPU_GRANULE ||
	    offset % RGPU_GRANULE || offset > pm->size || size > pm->size - offset)
		return CUDA_ERROR_INVALID_VALUE;
	if (tfind(&key, &w->maps, map_cmp))
		return CUDA_ERROR_INVALID_VALUE; /* overlaps a live mapping */
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = w->drv.cuMemMap(addr, size, offset, h, 0);
	if (r != CUDA_SUCCESS)
		goto out_free;
	m->addr = addr;
	m->size = size;
	m->h = h;
	m->device = pm->device;
	m->owner = pm->id;
	m->offset = offset;
	if (!tsearch(m, &w->maps, map_cmp)) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out_unmap;
	}
	return CUDA_SUCCESS;
out_unmap:
	w->drv.cuMemUnmap(addr, size);
out_free:
	free(m);
	return r;
}

CUresult srv_unmap_range(struct srv_worker *w, uint64_t addr, uint64_t size)
{
	struct srv_map key = {.addr = addr, .size = 1}, **p, *m;
	p = tfind(&key, &w->maps, map_cmp);
	if (!p || (*p)->addr != addr || (*p)->size != size)
		return CUDA_ERROR_INVALID_VALUE;
	m = *p;
	/* like cudaFree: pending work that may touch the range finishes first */
	w->drv.cuCtxSynchronize();
	w->drv.cuMemUnmap(m->addr, m->size);
	if (!m->owner) {
		w->drv.cuMemRelease(m->h);
		srv_mem_uncharge(w, m->device, m->size);
	}
	tdelete(m, &w->maps, map_cmp);
	free(m);
	return CUDA_SUCCESS;
}
