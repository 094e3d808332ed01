/*
 * The device address window allocator (design.md §3). The client chooses every device address
 * inside [base, base+size). Allocations of up to IP_VAW_SMALL bytes are carved, 256-byte
 * aligned, out of 2 MiB slabs; larger ones get their own granule-aligned range. The allocator
 * says when a range must first be backed by device memory (a new slab or a large allocation)
 * and when a range is no longer used and may be released, so the server maps and unmaps in
 * whole granules. Not thread-safe: callers lock.
 */
#ifndef IP_VAWINDOW_H
#define IP_VAWINDOW_H

#include <stdint.h>

#define IP_VAW_SMALL (1ull << 20)
#define IP_VAW_UNIT 256ull

struct ip_vaw_slab;
struct ip_vaw_range;

struct ip_vaw_alloc {
	uint64_t addr, size;      /* what the application asked for */
	int device;
	void *owner;              /* the context it belongs to */
	struct ip_vaw_slab *slab; /* NULL: a large allocation with its own mapping */
	uint64_t map_size;        /* large: bytes mapped at addr */
};

struct ip_vaw {
	uint64_t base, size, granule;
	struct ip_vaw_range *free;  /* unused address ranges, sorted */
	struct ip_vaw_slab *slabs;
	void *allocs;               /* tsearch tree of struct ip_vaw_alloc by range */
	void *maps;                 /* tsearch tree of mapped ranges */
	uint64_t nallocs;
	uint64_t mapped_bytes;
};

/* The result of an allocation: the address, and the range to back first (size 0: none). */
struct ip_vaw_res {
	uint64_t addr;
	uint64_t map_addr, map_size;
};

/* ip_vaw_init() - an empty window. 0, or RGPU_EINVAL for unaligned arguments. */
int ip_vaw_init(struct ip_vaw *w, uint64_t base, uint64_t size, uint64_t granule);
void ip_vaw_fini(struct ip_vaw *w);

/*
 * ip_vaw_alloc() - choose an address for size bytes on device.
 * Returns 0 with *res filled, RGPU_EINVAL for size 0, RGPU_ENOSPC when the window has no room,
 * RGPU_ENOMEM when host memory runs out.
 */
int ip_vaw_alloc(struct ip_vaw *w, uint64_t size, int device, void *owner,
		 struct ip_vaw_res *res);

/*
 * ip_vaw_free() - free the allocation that starts at addr. When that leaves a mapped range
 * unused, it is returned in *unmap_addr / *unmap_size (else size 0).
 * Returns 0 or RGPU_ENOTFOUND (addr does not start an allocation).
 */
int ip_vaw_free(struct ip_vaw *w, uint64_t addr, uint64_t *unmap_addr, uint64_t *unmap_size);

/* ip_vaw_find() - the allocation containing p, or NULL. */
const struct ip_vaw_alloc *ip_vaw_find(struct ip_vaw *w, uint64_t p);

/* ip_vaw_mapped() - every byte of [p, p+n) lies in mapped memory. */
int ip_vaw_mapped(struct ip_vaw *w, uint64_t p, uint64_t n);

/* ip_vaw_in_window() - p lies inside the window (mapped or not). */
int ip_vaw_in_window(const struct ip_vaw *w, uint64_t p);

/* ip_vaw_collect() - addresses of the allocations owned by owner (malloc'd array). */
int ip_vaw_collect(struct ip_vaw *w, void *owner, uint64_t **addrs, size_t *n);

#endif
