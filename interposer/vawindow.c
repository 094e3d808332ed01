/*
 * The device address window allocator (see vawindow.h). Three structures:
 *  - the free list: unused granule-aligned address ranges, sorted, coalesced on release;
 *  - slabs: 2 MiB mapped ranges carved into 256-byte units with a bitmap;
 *  - trees (glibc tsearch, a red-black tree) of allocations and of mapped ranges, keyed by
 *    address range so a lookup of any address inside finds its owner.
 * It never talks to the server: it only says what must be mapped or may be unmapped. The
 * application's reservations are a fourth tree, cut from the same free list, and its mappings
 * share the tree of mapped ranges with the allocator's own.
 *
 * The slices are not separate structures: there is one free list for the whole window, and a
 * device's allocations take first fit from it clipped to that device's slice. Free ranges
 * coalesce across a slice boundary; clipping makes that harmless, and one list keeps a release
 * and the application's hints (which may fall in any slice) as simple as before.
 */
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/util.h"
#include "vawindow.h"

struct ip_vaw_range {
	uint64_t start, end;
	struct ip_vaw_range *next;
};

#define SLAB_BITS_MAX 8192  /* 2 MiB / 256 */

struct ip_vaw_slab {
	uint64_t base;
	int device;
	uint32_t units, used;
	uint64_t bits[SLAB_BITS_MAX / 64];
	struct ip_vaw_slab *next;
};

static int range_cmp(const void *a, const void *b)
{
	/* ip_vaw_alloc and ip_vaw_resv start with the same two fields */
	const struct ip_vaw_map *x = a, *y = b;
	if (x->addr + x->size <= y->addr)
		return -1;
	if (y->addr + y->size <= x->addr)
		return 1;
	return 0;
}

int ip_vaw_init(struct ip_vaw *w, uint64_t base, uint64_t size, uint64_t granule, int nparts)
{
	uint64_t part;

	memset(w, 0, sizeof(*w));
	/* a slab must hold at least two of the largest small allocations */
	if (!granule || base % granule || size % granule || !size ||
	    granule / IP_VAW_UNIT > SLAB_BITS_MAX || granule < 2 * IP_VAW_SMALL)
		return RGPU_EINVAL;
	if (nparts < 1 || nparts > IP_VAW_MAX_PARTS)
		return RGPU_EINVAL;
	/* rounded down, so that every slice starts on a granule and no two share one */
	part = size / (uint64_t)nparts / granule * granule;
	if (part < granule)
		return RGPU_EINVAL;
	w->base = base;
	w->size = size;
	w->granule = granule;
	w->part = part;
	w->nparts = nparts;
	w->free = malloc(sizeof(*w->free));
	if (!w->free)
		return RGPU_ENOMEM;
	/* the top that rounding left over is never free: nothing can be handed out there */
	w->free->start = base;
	w->free->end = base + (uint64_t)nparts * part;
	w->free->next = NULL;
	return 0;
}

int ip_vaw_part_of(const struct ip_vaw *w, uint64_t p)
{
	uint64_t d;

	if (!ip_vaw_in_window(w, p))
		return -1;
	d = (p - w->base) / w->part;
	return d < (uint64_t)w->nparts ? (int)d : -1;
}

int ip_vaw_part_range(const struct ip_vaw *w, int d, uint64_t *lo, uint64_t *len)
{
	if (d < 0 || d >= w->nparts)
		return RGPU_EINVAL;
	*lo = w->base + (uint64_t)d * w->part;
	*len = w->part;
	return 0;
}

/*
 * The slice device takes its addresses from, as [*lo, *hi). An unpartitioned window (nparts
 * 1) is every device's: the devices of one server shared it before there were slices.
 */
static int device_bounds(const struct ip_vaw *w, int device, uint64_t *lo, uint64_t *hi)
{
	if (device < 0 || (w->nparts > 1 && device >= w->nparts))
		return RGPU_EINVAL;
	if (w->nparts == 1)
		device = 0;
	*lo = w->base + (uint64_t)device * w->part;
	*hi = *lo + w->part;
	return 0;
}

static void free_node(void *p)
{
	free(p);
}

void ip_vaw_fini(struct ip_vaw *w)
{
	while (w->free) {
		struct ip_vaw_range *n = w->free->next;
		free(w->free);
		w->free = n;
	}
	while (w->slabs) {
		struct ip_vaw_slab *n = w->slabs->next;
		free(w->slabs);
		w->slabs = n;
	}
	tdestroy(w->allocs, free_node);
	tdestroy(w->maps, free_node);
	tdestroy(w->resvs, free_node);
	w->allocs = w->maps = w->resvs = NULL;
}

/* Take [start, start+len) out of the free range *pp, which holds it. */
static int carve(struct ip_vaw_range **pp, uint64_t start, uint64_t len)
{
	struct ip_vaw_range *r = *pp, *tail;

	if (start == r->start) {
		r->start += len;
		if (r->start == r->end) {
			*pp = r->next;
			free(r);
		}
		return 0;
	}
	if (start + len == r->end) {
		r->end = start;
		return 0;
	}
	tail = malloc(sizeof(*tail));
	if (!tail)
		return RGPU_ENOMEM;
	tail->start = start + len;
	tail->end = r->end;
	tail->next = r->next;
	r->end = start;
	r->next = tail;
	return 0;
}

/*
 * First fit from the free list, within [lo, hi) (a slice). A free range that crosses lo is
 * clipped to it, so the taken part may be its middle: carve() then needs a node.
 */
static int va_take(struct ip_vaw *w, uint64_t len, uint64_t lo, uint64_t hi, uint64_t *out)
{
	struct ip_vaw_range **pp;

	for (pp = &w->free; *pp; pp = &(*pp)->next) {
		struct ip_vaw_range *r = *pp;
		uint64_t start = MAX(r->start, lo), end = MIN(r->end, hi);

		if (r->end <= lo)
			continue;
		if (r->start >= hi)
			break; /* sorted: nothing further lies in the slice */
		if (end - start < len)
			continue;
		*out = start;
		return carve(pp, start, len);
	}
	return RGPU_ENOSPC;
}

static void va_give(struct ip_vaw *w, uint64_t start, uint64_t len)
{
	struct ip_vaw_range **pp = &w->free, *prev = NULL, *n;
	uint64_t end = start + len;

	while (*pp && (*pp)->start < start) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (prev && prev->end == start) {
		prev->end = end;
		if (*pp && (*pp)->start == end) {
			n = *pp;
			prev->end = n->end;
			prev->next = n->next;
			free(n);
		}
		return;
	}
	if (*pp && (*pp)->start == end) {
		(*pp)->start = start;
		return;
	}
	n = malloc(sizeof(*n));
	if (!n)
		return; /* the range is lost to the window, never handed out twice */
	n->start = start;
	n->end = end;
	n->next = *pp;
	*pp = n;
}

static int map_add(struct ip_vaw *w, uint64_t addr, uint64_t size)
{
	struct ip_vaw_map *m = calloc(1, sizeof(*m));
	if (!m)
		return RGPU_ENOMEM;
	m->addr = addr;
	m->size = size;
	if (!tsearch(m, &w->maps, range_cmp)) {
		free(m);
		return RGPU_ENOMEM;
	}
	w->mapped_bytes += size;
	return 0;
}

static void map_del(struct ip_vaw *w, uint64_t addr)
{
	struct ip_vaw_map key = {.addr = addr, .size = 1}, **p;
	p = tfind(&key, &w->maps, range_cmp);
	if (!p)
		return;
	struct ip_vaw_map *m = *p;
	w->mapped_bytes -= m->size;
	tdelete(m, &w->maps, range_cmp);
	free(m);
}

static int bit_get(const struct ip_vaw_slab *s, uint32_t i)
{
	return (s->bits[i / 64] >> (i % 64)) & 1;
}

static void bits_set(struct ip_vaw_slab *s, uint32_t first, uint32_t n, int v)
{
	for (uint32_t i = first; i < first + n; i++) {
		if (v)
			s->bits[i / 64] |= 1ull << (i % 64);
		else
			s->bits[i / 64] &= ~(1ull << (i % 64));
	}
}

/* First run of n free units in the slab, or -1. */
static long slab_find(const struct ip_vaw_slab *s, uint32_t n)
{
	uint32_t run = 0;
	if (s->units - s->used < n)
		return -1;
	for (uint32_t i = 0; i < s->units; i++) {
		if (!(i % 64) && s->bits[i / 64] == ~0ull) {
			run = 0;
			i += 63;
			continue;
		}
		run = bit_get(s, i) ? 0 : run + 1;
		if (run == n)
			return (long)(i + 1 - n);
	}
	return -1;
}

static int record_alloc(struct ip_vaw *w, const struct ip_vaw_alloc *a)
{
	struct ip_vaw_alloc *n = malloc(sizeof(*n));
	if (!n)
		return RGPU_ENOMEM;
	*n = *a;
	if (!tsearch(n, &w->allocs, range_cmp)) {
		free(n);
		return RGPU_ENOMEM;
	}
	w->nallocs++;
	return 0;
}

static int alloc_small(struct ip_vaw *w, uint64_t size, int device, uint64_t lo, uint64_t hi,
		       void *owner, struct ip_vaw_res *res)
{
	uint32_t n = (uint32_t)(ALIGN_UP(size, IP_VAW_UNIT) / IP_VAW_UNIT);
	struct ip_vaw_slab *s;
	struct ip_vaw_alloc a = {.size = size, .device = device, .owner = owner};
	long at = -1;
	int ret;

	/* a device's slabs all lie in its slice: they were taken from it */
	for (s = w->slabs; s; s = s->next)
		if (s->device == device && (at = slab_find(s, n)) >= 0)
			break;
	if (!s) {
		uint64_t base;
		s = calloc(1, sizeof(*s));
		if (!s)
			return RGPU_ENOMEM;
		ret = va_take(w, w->granule, lo, hi, &base);
		if (ret) {
			free(s);
			return ret;
		}
		ret = map_add(w, base, w->granule);
		if (ret) {
			va_give(w, base, w->granule);
			free(s);
			return ret;
		}
		s->base = base;
		s->device = device;
		s->units = (uint32_t)(w->granule / IP_VAW_UNIT);
		s->next = w->slabs;
		w->slabs = s;
		res->map_addr = base;
		res->map_size = w->granule;
		at = 0;
	}
	a.addr = s->base + (uint64_t)at * IP_VAW_UNIT;
	a.slab = s;
	ret = record_alloc(w, &a);
	if (ret) {
		if (res->map_size) { /* undo the new slab: the server never saw it */
			w->slabs = s->next;
			map_del(w, s->base);
			va_give(w, s->base, w->granule);
			free(s);
			res->map_addr = res->map_size = 0;
		}
		return ret;
	}
	bits_set(s, (uint32_t)at, n, 1);
	s->used += n;
	res->addr = a.addr;
	return 0;
}

static int alloc_large(struct ip_vaw *w, uint64_t size, int device, uint64_t lo, uint64_t hi,
		       void *owner, struct ip_vaw_res *res)
{
	uint64_t len = ALIGN_UP(size, w->granule), base;
	struct ip_vaw_alloc a = {.size = size, .device = device, .owner = owner};
	int ret;

	if (len < size)
		return RGPU_ENOSPC;
	ret = va_take(w, len, lo, hi, &base);
	if (ret)
		return ret;
	a.addr = base;
	a.map_size = len;
	ret = map_add(w, base, len);
	if (!ret) {
		ret = record_alloc(w, &a);
		if (ret)
			map_del(w, base);
	}
	if (ret) {
		va_give(w, base, len);
		return ret;
	}
	res->addr = base;
	res->map_addr = base;
	res->map_size = len;
	return 0;
}

int ip_vaw_alloc(struct ip_vaw *w, uint64_t size, int device, void *owner,
		 struct ip_vaw_res *res)
{
	uint64_t lo, hi;

	memset(res, 0, sizeof(*res));
	if (size == 0 || device_bounds(w, device, &lo, &hi))
		return RGPU_EINVAL;
	if (size > w->part)
		return RGPU_ENOSPC;
	if (size <= IP_VAW_SMALL)
		return alloc_small(w, size, device, lo, hi, owner, res);
	return alloc_large(w, size, device, lo, hi, owner, res);
}

int ip_vaw_free(struct ip_vaw *w, uint64_t addr, uint64_t *unmap_addr, uint64_t *unmap_size)
{
	struct ip_vaw_alloc key = {.addr = addr, .size = 1}, **p, *a;

	*unmap_addr = *unmap_size = 0;
	p = tfind(&key, &w->allocs, range_cmp);
	if (!p || (*p)->addr != addr)
		return RGPU_ENOTFOUND;
	a = *p;
	if (a->slab) {
		struct ip_vaw_slab *s = a->slab, **pp;
		uint32_t n = (uint32_t)(ALIGN_UP(a->size, IP_VAW_UNIT) / IP_VAW_UNIT);
		bits_set(s, (uint32_t)((a->addr - s->base) / IP_VAW_UNIT), n, 0);
		s->used -= n;
		if (s->used == 0) {
			for (pp = &w->slabs; *pp != s; pp = &(*pp)->next)
				;
			*pp = s->next;
			*unmap_addr = s->base;
			*unmap_size = w->granule;
			map_del(w, s->base);
			va_give(w, s->base, w->granule);
			free(s);
		}
	} else {
		*unmap_addr = a->addr;
		*unmap_size = a->map_size;
		map_del(w, a->addr);
		va_give(w, a->addr, a->map_size);
	}
	tdelete(a, &w->allocs, range_cmp);
	free(a);
	w->nallocs--;
	return 0;
}

const struct ip_vaw_alloc *ip_vaw_find(struct ip_vaw *w, uint64_t p)
{
	struct ip_vaw_alloc key = {.addr = p, .size = 1}, **r;
	r = tfind(&key, &w->allocs, range_cmp);
	return r ? *r : NULL;
}

int ip_vaw_mapped(struct ip_vaw *w, uint64_t p, uint64_t n)
{
	uint64_t end = p + n;
	if (n == 0 || end < p)
		return 0;
	while (p < end) {
		struct ip_vaw_map key = {.addr = p, .size = 1}, **m;
		m = tfind(&key, &w->maps, range_cmp);
		if (!m || ((*m)->handle && !(*m)->access))
			return 0;
		p = (*m)->addr + (*m)->size; /* contiguous mappings continue the range */
	}
	return 1;
}

int ip_vaw_in_window(const struct ip_vaw *w, uint64_t p)
{
	return p >= w->base && p - w->base < w->size;
}

static struct {
	void *owner;
	uint64_t *v;
	size_t n, cap;
	int err;
} collect;

static void collect_walk(const void *node, VISIT which, int depth)
{
	const struct ip_vaw_alloc *a = *(const struct ip_vaw_alloc *const *)node;
	(void)depth;
	if ((which != postorder && which != leaf) || a->owner != collect.owner)
		return;
	if (collect.n == collect.cap) {
		size_t cap = collect.cap ? 2 * collect.cap : 16;
		uint64_t *n = realloc(collect.v, cap * sizeof(*n));
		if (!n) {
			collect.err = RGPU_ENOMEM;
			return;
		}
		collect.v = n;
		collect.cap = cap;
	}
	collect.v[collect.n++] = a->addr;
}

int ip_vaw_collect(struct ip_vaw *w, void *owner, uint64_t **addrs, size_t *n)
{
	memset(&collect, 0, sizeof(collect));
	collect.owner = owner;
	twalk(w->allocs, collect_walk);
	*addrs = collect.v;
	*n = collect.n;
	return collect.err;
}

/* ---- the application's reservations and mappings ------------------------------------------ */

/*
 * [hint, hint+len) if it is free and inside one slice, else the first free range so aligned
 * within [lo, hi): RGPU_ENOSPC if none. The free list never holds the unused top, so a hint
 * there is never free.
 */
static int va_take_aligned(struct ip_vaw *w, uint64_t len, uint64_t align, uint64_t hint,
			   uint64_t lo, uint64_t hi, uint64_t *out)
{
	struct ip_vaw_range **pp;
	int d = ip_vaw_part_of(w, hint);

	/* the slice's end, not the window's: a reservation never straddles two devices */
	if (hint && hint % align == 0 && d >= 0 &&
	    len <= w->base + (uint64_t)(d + 1) * w->part - hint)
		for (pp = &w->free; *pp; pp = &(*pp)->next)
			if ((*pp)->start <= hint && hint + len <= (*pp)->end) {
				*out = hint;
				return carve(pp, hint, len);
			}
	for (pp = &w->free; *pp; pp = &(*pp)->next) {
		struct ip_vaw_range *r = *pp;
		uint64_t start = MAX(r->start, lo), end = MIN(r->end, hi), a;

		if (r->end <= lo)
			continue;
		if (r->start >= hi)
			break;
		a = ALIGN_UP(start, align);
		if (a >= start && a < end && len <= end - a) {
			*out = a;
			return carve(pp, a, len);
		}
	}
	return RGPU_ENOSPC;
}

int ip_vaw_reserve(struct ip_vaw *w, uint64_t size, uint64_t align, uint64_t hint, int device,
		   uint64_t *addr)
{
	struct ip_vaw_resv *r;
	uint64_t len = ALIGN_UP(size, w->granule), at, lo, hi;
	int ret;

	if (!size || (align & (align - 1)) || device_bounds(w, device, &lo, &hi))
		return RGPU_EINVAL;
	if (size > w->part || len < size)
		return RGPU_ENOSPC;
	if (align < w->granule)
		align = w->granule;
	r = malloc(sizeof(*r));
	if (!r)
		return RGPU_ENOMEM;
	ret = va_take_aligned(w, len, align, hint, lo, hi, &at);
	if (ret) {
		free(r);
		return ret;
	}
	r->addr = at;
	r->len = len;
	r->size = size;
	if (!tsearch(r, &w->resvs, range_cmp)) {
		va_give(w, at, len);
		free(r);
		return RGPU_ENOMEM;
	}
	*addr = at;
	return 0;
}

int ip_vaw_unreserve(struct ip_vaw *w, uint64_t addr, uint64_t size)
{
	struct ip_vaw_resv key = {.addr = addr, .len = 1}, **p, *r;
	struct ip_vaw_map mkey;

	p = tfind(&key, &w->resvs, range_cmp);
	if (!p || (*p)->addr != addr || (*p)->size != size)
		return RGPU_ENOTFOUND;
	r = *p;
	mkey = (struct ip_vaw_map){.addr = r->addr, .size = r->len};
	if (tfind(&mkey, &w->maps, range_cmp))
		return RGPU_EBUSY;
	tdelete(r, &w->resvs, range_cmp);
	va_give(w, r->addr, r->len);
	free(r);
	return 0;
}

const struct ip_vaw_resv *ip_vaw_resv_find(struct ip_vaw *w, uint64_t p)
{
	struct ip_vaw_resv key = {.addr = p, .len = 1}, **r;
	r = tfind(&key, &w->resvs, range_cmp);
	return r ? *r : NULL;
}

int ip_vaw_resv_unmapped(struct ip_vaw *w, uint64_t addr, uint64_t size)
{
	const struct ip_vaw_resv *r = ip_vaw_resv_find(w, addr);
	struct ip_vaw_map key = {.addr = addr, .size = size};

	return size && r && size <= r->addr + r->len - addr && !tfind(&key, &w->maps, range_cmp);
}

int ip_vaw_map_app(struct ip_vaw *w, uint64_t addr, uint64_t size, void *handle, uint64_t offset,
		   int device)
{
	const struct ip_vaw_resv *r = ip_vaw_resv_find(w, addr);
	struct ip_vaw_map key = {.addr = addr, .size = size}, *m;

	if (!size || !r || size > r->addr + r->len - addr)
		return RGPU_EINVAL;
	if (tfind(&key, &w->maps, range_cmp))
		return RGPU_EEXIST;
	m = calloc(1, sizeof(*m));
	if (!m)
		return RGPU_ENOMEM;
	*m = (struct ip_vaw_map){addr, size, handle, offset, device, 0};
	if (!tsearch(m, &w->maps, range_cmp)) {
		free(m);
		return RGPU_ENOMEM;
	}
	return 0;
}

int ip_vaw_app_maps(struct ip_vaw *w, uint64_t addr, uint64_t size, struct ip_vaw_map ***out,
		    size_t *n)
{
	struct ip_vaw_map **v = NULL, **m;
	size_t cnt = 0, cap = 0;
	uint64_t p = addr, end = addr + size;

	*out = NULL;
	*n = 0;
	if (!size || end < addr)
		return RGPU_EINVAL;
	while (p < end) {
		struct ip_vaw_map key = {.addr = p, .size = 1};
		m = tfind(&key, &w->maps, range_cmp);
		/* each mapping starts where the last ended, belongs to the application, fits */
		if (!m || (*m)->addr != p || !(*m)->handle || (*m)->size > end - p) {
			free(v);
			return RGPU_EINVAL;
		}
		if (cnt == cap) {
			struct ip_vaw_map **nv;
			cap = cap ? 2 * cap : 8;
			nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				return RGPU_ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = *m;
		p += (*m)->size;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void ip_vaw_unmap_app(struct ip_vaw *w, uint64_t addr)
{
	struct ip_vaw_map key = {.addr = addr, .size = 1}, **p, *m;

	p = tfind(&key, &w->maps, range_cmp);
	if (!p || (*p)->addr != addr || !(*p)->handle)
		return;
	m = *p;
	tdelete(m, &w->maps, range_cmp);
	free(m);
}

struct ip_vaw_map *ip_vaw_map_find(struct ip_vaw *w, uint64_t p)
{
	struct ip_vaw_map key = {.addr = p, .size = 1}, **m;
	m = tfind(&key, &w->maps, range_cmp);
	return m ? *m : NULL;
}
