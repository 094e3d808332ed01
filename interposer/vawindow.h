/*
 * The device address window allocator (design.md §3). The client chooses every device address
 * inside [base, base+size). Allocations of up to IP_VAW_SMALL bytes are carved, 256-byte
 * aligned, out of 2 MiB slabs; larger ones get their own granule-aligned range. The allocator
 * says when a range must first be backed by device memory (a new slab or a large allocation)
 * and when a range is no longer used and may be released, so the server maps and unmaps in
 * whole granules. The application's own reservations (cuMemAddressReserve) are granule-aligned
 * ranges of the same window, and its mappings in them (cuMemMap) are kept beside the
 * allocator's, so that every device address, whoever placed it, is the same on every server.
 *
 * The window is cut into nparts equal slices, one per device of the client (devices of several
 * servers are numbered 0..nparts-1): slice d is [base + d*part, base + (d+1)*part), with part =
 * size / nparts rounded down to the granule. A device's allocations and slabs come only from its
 * own slice, so when that device's job moves to another server, every address it holds is
 * still free there and is recreated as it was. What rounding leaves at the top of the window
 * (less than nparts granules) is never handed out. nparts 1 leaves the window whole and shared
 * by every device, as one server's devices always shared it.
 * Not thread-safe: callers lock.
 */
#ifndef IP_VAWINDOW_H
#define IP_VAWINDOW_H

#include <stdint.h>

#define IP_VAW_SMALL (1ull << 20)
#define IP_VAW_UNIT 256ull
#define IP_VAW_MAX_PARTS 16 /* slices: as many as the client has devices (IP_MAX_DEVICES) */

struct ip_vaw_slab;
struct ip_vaw_range;

struct ip_vaw_alloc {
	uint64_t addr, size;      /* what the application asked for */
	int device;
	void *owner;              /* the context it belongs to */
	struct ip_vaw_slab *slab; /* NULL: a large allocation with its own mapping */
	uint64_t map_size;        /* large: bytes mapped at addr */
	int managed;              /* managed memory (managed.c): the client maps it too; 2: mapped
				     pinned host memory made the same way */
	unsigned host_flags;      /* ...2: its cuMemHostAlloc flags */
	uint64_t user_size;       /* ...the size asked for, when the range is larger (else 0) */
};

/*
 * A mapped range of the window: one the allocator backs for its own allocations (handle NULL),
 * or one the application mapped into a range it reserved (cuMemMap: handle is its physical
 * memory, which the allocator never looks into).
 */
struct ip_vaw_map {
	uint64_t addr, size;
	void *handle;             /* the application's physical memory; NULL: the allocator's */
	uint64_t offset;          /* the application's: where in that memory the mapping starts */
	int device;               /* the application's: where that memory lives */
	uint32_t access;          /* the application's: 2 bits per device (bits 2d..2d+1), the
				     CUmemAccess_flags it was given; 0 until cuMemSetAccess */
};

/* An address range the application reserved (cuMemAddressReserve). */
struct ip_vaw_resv {
	uint64_t addr, len;       /* what it takes of the window: granule-aligned (first: the
				     tree's key, as in every node here) */
	uint64_t size;            /* what the application asked for (cuMemAddressFree names it) */
};

struct ip_vaw {
	uint64_t base, size, granule;
	uint64_t part;              /* bytes in each slice: a multiple of the granule */
	int nparts;                 /* slices, 1..IP_VAW_MAX_PARTS */
	struct ip_vaw_range *free;  /* unused address ranges, sorted */
	struct ip_vaw_slab *slabs;
	void *allocs;               /* tsearch tree of struct ip_vaw_alloc by range */
	void *maps;                 /* tsearch tree of struct ip_vaw_map by range */
	void *resvs;                /* tsearch tree of struct ip_vaw_resv by range */
	uint64_t nallocs;
	uint64_t mapped_bytes;      /* the allocator's own mappings */
};

/* The result of an allocation: the address, and the range to back first (size 0: none). */
struct ip_vaw_res {
	uint64_t addr;
	uint64_t map_addr, map_size;
};

/*
 * ip_vaw_init() - an empty window of nparts slices.
 * @base, @size: the window, granule-aligned; @granule: the server's mapping granule (a slab).
 * @nparts: 1..IP_VAW_MAX_PARTS, the client's devices; 1 keeps the window unpartitioned.
 * part = floor(size / nparts / granule) * granule: each slice is a whole number of granules,
 * and the top size - nparts*part bytes (fewer than nparts granules) stay unused.
 * Returns 0, RGPU_EINVAL (unaligned arguments, nparts out of range, a slice smaller than one
 * granule) or RGPU_ENOMEM.
 */
int ip_vaw_init(struct ip_vaw *w, uint64_t base, uint64_t size, uint64_t granule, int nparts);
void ip_vaw_fini(struct ip_vaw *w);

/*
 * ip_vaw_alloc() - choose an address for size bytes on device, inside device's slice (a small
 * allocation in a slab of that device, a new slab taken from that slice).
 * @device: 0..nparts-1; with nparts 1, any device >= 0 (the one slice is shared).
 * Returns 0 with *res filled, RGPU_EINVAL for size 0 or a device with no slice, RGPU_ENOSPC
 * when the device's slice has no room, RGPU_ENOMEM when host memory runs out.
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

/*
 * ip_vaw_mapped() - every byte of [p, p+n) lies in mapped memory (an application's mapping
 * counts once some device has access to it).
 */
int ip_vaw_mapped(struct ip_vaw *w, uint64_t p, uint64_t n);

/* ip_vaw_in_window() - p lies inside the window (mapped or not). */
int ip_vaw_in_window(const struct ip_vaw *w, uint64_t p);

/*
 * ip_vaw_part_of() - the slice (the device) p lies in: (p - base) / part, by arithmetic alone.
 * Returns 0..nparts-1, or -1 when p is outside the window or in the unused top left by rounding.
 */
int ip_vaw_part_of(const struct ip_vaw *w, uint64_t p);

/*
 * ip_vaw_part_range() - slice d of the window: *lo = base + d*part, *len = part.
 * Returns 0, or RGPU_EINVAL for d outside 0..nparts-1 (nothing is written).
 */
int ip_vaw_part_range(const struct ip_vaw *w, int d, uint64_t *lo, uint64_t *len);

/* ip_vaw_collect() - addresses of the allocations owned by owner (malloc'd array). */
int ip_vaw_collect(struct ip_vaw *w, void *owner, uint64_t **addrs, size_t *n);

/* ---- the application's own reservations and mappings (cuMemAddressReserve, cuMemMap) ------- */

/*
 * ip_vaw_reserve() - reserve size bytes for the application: a granule-aligned range of the
 * window, aligned to align (a power of two; 0 or less than a granule: the granule), at hint
 * when hint is so aligned and [hint, hint+size) is free and inside one slice (any device's: a
 * hint is the application's choice), else first fit in device's slice (a hint is only a hint,
 * as the driver treats it). The range is taken from the window whole, rounded up to granules,
 * so no allocation or other reservation can share a granule with it, and never straddles two
 * slices.
 * @device: the current context's device, as for ip_vaw_alloc().
 * Returns 0 with *addr set, RGPU_EINVAL (size 0, align not a power of two, a device with no
 * slice), RGPU_ENOSPC (no room) or RGPU_ENOMEM.
 */
int ip_vaw_reserve(struct ip_vaw *w, uint64_t size, uint64_t align, uint64_t hint, int device,
		   uint64_t *addr);

/*
 * ip_vaw_unreserve() - give back the reservation that starts at addr and was size bytes.
 * Returns 0, RGPU_ENOTFOUND (no such reservation, or another size) or RGPU_EBUSY (something is
 * still mapped in it; nothing changes).
 */
int ip_vaw_unreserve(struct ip_vaw *w, uint64_t addr, uint64_t size);

/* ip_vaw_resv_find() - the application's reservation holding p, or NULL. */
const struct ip_vaw_resv *ip_vaw_resv_find(struct ip_vaw *w, uint64_t p);

/*
 * ip_vaw_map_app() - the application maps [addr, addr+size), inside one of its reservations
 * and overlapping no mapping, with no access yet.
 * Returns 0, RGPU_EINVAL (size 0, or not wholly inside one reservation), RGPU_EEXIST
 * (overlaps a mapping) or RGPU_ENOMEM.
 */
/* ip_vaw_resv_unmapped() - [addr, addr + size) lies in one reservation and no mapping overlaps it */
int ip_vaw_resv_unmapped(struct ip_vaw *w, uint64_t addr, uint64_t size);
int ip_vaw_map_app(struct ip_vaw *w, uint64_t addr, uint64_t size, void *handle, uint64_t offset,
		   int device);

/*
 * ip_vaw_app_maps() - the application's mappings that exactly tile [addr, addr+size), in
 * address order: none sticks out, no byte is unmapped.
 * @out: receives a malloc'd array (the caller frees it) of the mappings, valid until the window
 *       changes; @n: their number.
 * Returns 0, RGPU_EINVAL (not such a tiling, size 0) or RGPU_ENOMEM.
 */
int ip_vaw_app_maps(struct ip_vaw *w, uint64_t addr, uint64_t size, struct ip_vaw_map ***out,
		    size_t *n);

/* ip_vaw_unmap_app() - forget the application's mapping that starts at addr (if any). */
void ip_vaw_unmap_app(struct ip_vaw *w, uint64_t addr);

/* ip_vaw_map_find() - the mapping (the allocator's or the application's) holding p, or NULL. */
struct ip_vaw_map *ip_vaw_map_find(struct ip_vaw *w, uint64_t p);

#endif
