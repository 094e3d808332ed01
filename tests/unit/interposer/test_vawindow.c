/*
 * Unit tests of the device address window allocator (testing.md, tier 1): slab packing and
 * alignment, large allocations and first fit, fragmentation and coalescing, what must be mapped
 * and unmapped, exhaustion, lookups, mapped-range queries, collection by owner, per-device slabs,
 * a seeded randomized stress checked against a model of the window kept by the test, and the
 * application's own reservations (hints, alignment) and mappings in them (tiling, access),
 * and the window cut into one slice per device (bounds, allocations and reservations kept in
 * the device's slice, a slice filling up alone, a seeded stress over four slices).
 *
 * Every expected address is written out from the rules (window base RGPU_WINDOW_BASE, 64 MiB,
 * 2 MiB granules, 256-byte units, small means <= 1 MiB, first fit), never asked of the
 * allocator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "rgpu/window.h"
#include "vawindow.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define BASE RGPU_WINDOW_BASE
#define GRAN (2 * MiB)
#define WSIZE (64 * MiB)
#define NGRAN (WSIZE / GRAN) /* 32 */
#define UNIT 256ull
#define UNITS_PER_SLAB (GRAN / UNIT) /* 8192 */

static int owner_a, owner_b, owner_c; /* owners are only compared by address */

static int setup(void **state)
{
	struct ip_vaw *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	if (ip_vaw_init(w, BASE, WSIZE, GRAN, 1) != 0) {
		free(w);
		return -1;
	}
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct ip_vaw *w = *state;
	ip_vaw_fini(w);
	free(w);
	return 0;
}

/* Allocate, expect success, and check the address and the range to map. */
static void alloc_ok(struct ip_vaw *w, uint64_t size, int dev, void *owner, uint64_t want_addr,
		     uint64_t want_map_addr, uint64_t want_map_size)
{
	struct ip_vaw_res r;
	memset(&r, 0x5a, sizeof(r));
	int ret = ip_vaw_alloc(w, size, dev, owner, &r);
	if (ret != 0)
		fail_msg("alloc(%llu) failed: %d", (unsigned long long)size, ret);
	if (r.addr != want_addr)
		fail_msg("alloc(%llu): addr 0x%llx, want 0x%llx", (unsigned long long)size,
			 (unsigned long long)r.addr, (unsigned long long)want_addr);
	assert_int_equal(r.map_size, want_map_size);
	if (want_map_size)
		assert_int_equal(r.map_addr, want_map_addr);
}

static void free_ok(struct ip_vaw *w, uint64_t addr, uint64_t want_unmap_addr,
		    uint64_t want_unmap_size)
{
	uint64_t ua = 0x5a5a, us = 0x5a5a;
	int ret = ip_vaw_free(w, addr, &ua, &us);
	if (ret != 0)
		fail_msg("free(0x%llx) failed: %d", (unsigned long long)addr, ret);
	assert_int_equal(us, want_unmap_size);
	if (want_unmap_size)
		assert_int_equal(ua, want_unmap_addr);
}

/* --- init and the window ---------------------------------------------------------------------- */

static void test_init_args(void **state)
{
	(void)state;
	struct ip_vaw w;

	assert_int_equal(ip_vaw_init(&w, BASE + 4096, WSIZE, GRAN, 1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE + 4096, GRAN, 1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, 0, GRAN, 1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, 0, 1), RGPU_EINVAL);
	/* a 4 MiB granule would need 16384 units per slab: more than a slab holds */
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, 4 * MiB, 1), RGPU_EINVAL);

	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, GRAN, 1), 0);
	assert_int_equal(w.mapped_bytes, 0);
	assert_int_equal(w.nallocs, 0);
	assert_true(ip_vaw_in_window(&w, BASE));
	assert_true(ip_vaw_in_window(&w, BASE + WSIZE - 1));
	assert_false(ip_vaw_in_window(&w, BASE + WSIZE));
	assert_false(ip_vaw_in_window(&w, BASE - 1));
	assert_false(ip_vaw_in_window(&w, 0));
	assert_false(ip_vaw_in_window(&w, UINT64_MAX));
	ip_vaw_fini(&w);
}

/*
 * A granule smaller than the largest small allocation (the window's granule comes from the
 * server's HelloReply): refusing it at init is a right answer; accepting it, every allocation
 * must still lie wholly in mapped memory and never overlap another.
 */
static void test_granule_below_small(void **state)
{
	(void)state;
	struct ip_vaw w;
	/* a slab must hold two of the largest small allocations: 2 MiB is the least granule */
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, 64 * KiB, 1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, 1 * MiB, 1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, WSIZE, 2 * MiB, 1), 0);
	ip_vaw_fini(&w);
}

/* --- small allocations ------------------------------------------------------------------------ */

static void test_small_packing(void **state)
{
	struct ip_vaw *w = *state;

	/* the first small allocation opens a slab: the first granule of the window */
	alloc_ok(w, 100, 0, &owner_a, BASE, BASE, GRAN);
	assert_int_equal(w->mapped_bytes, GRAN);
	/* the next ones pack into it, 256-byte units, and need no mapping */
	alloc_ok(w, 1, 0, &owner_a, BASE + 256, 0, 0);	  /* 1 byte: 1 unit */
	alloc_ok(w, 257, 0, &owner_a, BASE + 512, 0, 0);  /* 257 bytes: 2 units, 512..1023 */
	alloc_ok(w, 256, 0, &owner_a, BASE + 1024, 0, 0); /* exactly 1 unit */
	alloc_ok(w, 512, 0, &owner_a, BASE + 1280, 0, 0); /* exactly 2 units */
	alloc_ok(w, 255, 0, &owner_a, BASE + 1792, 0, 0);
	assert_int_equal(w->nallocs, 6);
	assert_int_equal(w->mapped_bytes, GRAN);

	/* every address recorded with its size as asked */
	const struct ip_vaw_alloc *a = ip_vaw_find(w, BASE + 512);
	assert_non_null(a);
	assert_int_equal(a->addr, BASE + 512);
	assert_int_equal(a->size, 257);
	assert_non_null(a->slab);
	assert_ptr_equal(a->owner, &owner_a);
	assert_int_equal(a->device, 0);
}

/* 1 MiB is still small; two fill a slab exactly; the next small one opens the next granule. */
static void test_small_fills_slab(void **state)
{
	struct ip_vaw *w = *state;

	alloc_ok(w, 1 * MiB, 0, NULL, BASE, BASE, GRAN);
	alloc_ok(w, 1 * MiB, 0, NULL, BASE + 1 * MiB, 0, 0);
	alloc_ok(w, 1, 0, NULL, BASE + GRAN, BASE + GRAN, GRAN);
	alloc_ok(w, 1, 0, NULL, BASE + GRAN + 256, 0, 0);
	assert_int_equal(w->mapped_bytes, 2 * GRAN);
	/* 1 MiB + 1 is large: its own granule-aligned range, the lowest free one */
	alloc_ok(w, 1 * MiB + 1, 0, NULL, BASE + 2 * GRAN, BASE + 2 * GRAN, GRAN);
	const struct ip_vaw_alloc *a = ip_vaw_find(w, BASE + 2 * GRAN);
	assert_non_null(a);
	assert_null(a->slab);
	assert_int_equal(a->map_size, GRAN);
	assert_int_equal(a->size, 1 * MiB + 1);
	assert_int_equal(w->mapped_bytes, 3 * GRAN);
}

/* A hole left in a slab is reused by an allocation that fits it (lowest fit in the slab). */
static void test_small_hole_reuse(void **state)
{
	struct ip_vaw *w = *state;

	alloc_ok(w, 256, 0, NULL, BASE, BASE, GRAN);
	alloc_ok(w, 257, 0, NULL, BASE + 256, 0, 0);  /* units 1-2 */
	alloc_ok(w, 256, 0, NULL, BASE + 768, 0, 0);  /* unit 3 */
	free_ok(w, BASE + 256, 0, 0);		      /* units 1-2 free again; slab still used */
	alloc_ok(w, 513, 0, NULL, BASE + 1024, 0, 0); /* 3 units: not in the 2-unit hole */
	alloc_ok(w, 300, 0, NULL, BASE + 256, 0, 0);  /* 2 units: the hole */
	alloc_ok(w, 1, 0, NULL, BASE + 1792, 0, 0);   /* after 1024 + 3 units */
}

/* --- large allocations, first fit, fragmentation, coalescing ---------------------------------- */

static void test_large_alignment(void **state)
{
	struct ip_vaw *w = *state;

	alloc_ok(w, 1 * MiB + 1, 0, NULL, BASE, BASE, 2 * MiB);
	alloc_ok(w, 3 * MiB, 0, NULL, BASE + 2 * MiB, BASE + 2 * MiB, 4 * MiB);
	alloc_ok(w, 4 * MiB, 0, NULL, BASE + 6 * MiB, BASE + 6 * MiB, 4 * MiB);
	alloc_ok(w, 5 * MiB + 7, 0, NULL, BASE + 10 * MiB, BASE + 10 * MiB, 6 * MiB);
	assert_int_equal(w->mapped_bytes, 16 * MiB);
	assert_int_equal(w->nallocs, 4);
	/* a slab takes the lowest free granule too */
	alloc_ok(w, 4 * KiB, 0, NULL, BASE + 16 * MiB, BASE + 16 * MiB, GRAN);
	/* freeing a large allocation returns exactly its mapping */
	free_ok(w, BASE + 2 * MiB, BASE + 2 * MiB, 4 * MiB);
	assert_int_equal(w->mapped_bytes, 14 * MiB);
	/* first fit: a 2 MiB allocation goes into the hole, not after the slab */
	alloc_ok(w, 2 * MiB, 0, NULL, BASE + 2 * MiB, BASE + 2 * MiB, 2 * MiB);
	/* and a new slab (other device) takes the rest of the hole */
	alloc_ok(w, 64, 1, NULL, BASE + 4 * MiB, BASE + 4 * MiB, GRAN);
	alloc_ok(w, 2 * MiB + 1, 0, NULL, BASE + 18 * MiB, BASE + 18 * MiB, 4 * MiB);
}

static void test_fragmentation(void **state)
{
	struct ip_vaw *w = *state;
	const uint64_t A = BASE, B = BASE + 4 * MiB, C = BASE + 8 * MiB;

	alloc_ok(w, 4 * MiB, 0, NULL, A, A, 4 * MiB);
	alloc_ok(w, 4 * MiB, 0, NULL, B, B, 4 * MiB);
	alloc_ok(w, 4 * MiB, 0, NULL, C, C, 4 * MiB);
	free_ok(w, B, B, 4 * MiB);
	assert_int_equal(w->mapped_bytes, 8 * MiB);
	/* 4 MiB fits B's hole exactly */
	alloc_ok(w, 4 * MiB, 0, NULL, B, B, 4 * MiB);
	free_ok(w, B, B, 4 * MiB);
	/* 6 MiB does not: it goes after C */
	alloc_ok(w, 6 * MiB, 0, NULL, BASE + 12 * MiB, BASE + 12 * MiB, 6 * MiB);
	/* freeing A joins B's hole (a hole after it): 8 MiB at the base */
	free_ok(w, A, A, 4 * MiB);
	alloc_ok(w, 8 * MiB, 0, NULL, BASE, BASE, 8 * MiB);
	assert_int_equal(w->mapped_bytes, 18 * MiB);
}

/* Coalescing with the hole before, the hole after, and both at once. */
static void test_coalesce(void **state)
{
	struct ip_vaw *w = *state;
	const uint64_t P = BASE, Q = BASE + 2 * MiB, R = BASE + 4 * MiB, S = BASE + 6 * MiB;

	alloc_ok(w, 2 * MiB, 0, NULL, P, P, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, Q, Q, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, R, R, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, S, S, 2 * MiB); /* keeps the holes apart from the tail */

	/* hole before: free P then Q -> [P, R) */
	free_ok(w, P, P, 2 * MiB);
	free_ok(w, Q, Q, 2 * MiB);
	alloc_ok(w, 4 * MiB, 0, NULL, P, P, 4 * MiB);
	free_ok(w, P, P, 4 * MiB);

	/* both: holes [P,Q) and [R,S) on either side of Q; freeing Q joins all three */
	alloc_ok(w, 2 * MiB, 0, NULL, P, P, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, Q, Q, 2 * MiB);
	free_ok(w, P, P, 2 * MiB);
	free_ok(w, R, R, 2 * MiB);
	free_ok(w, Q, Q, 2 * MiB); /* joins [P,Q) and [R,S) */
	alloc_ok(w, 6 * MiB, 0, NULL, P, P, 6 * MiB);
	free_ok(w, P, P, 6 * MiB);

	/* hole after only: P stays, R freed first, then Q joins R's hole */
	alloc_ok(w, 2 * MiB, 0, NULL, P, P, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, Q, Q, 2 * MiB);
	alloc_ok(w, 2 * MiB, 0, NULL, R, R, 2 * MiB);
	free_ok(w, R, R, 2 * MiB);
	free_ok(w, Q, Q, 2 * MiB); /* joins the hole [R,S) after it */
	alloc_ok(w, 4 * MiB, 0, NULL, Q, Q, 4 * MiB);

	/* freeing S joins the tail of the window: 64 - 6 = 58 MiB from S on */
	free_ok(w, S, S, 2 * MiB);
	alloc_ok(w, 58 * MiB, 0, NULL, S, S, 58 * MiB);
	assert_int_equal(w->mapped_bytes, WSIZE);
}

/* --- free ------------------------------------------------------------------------------------- */

static void test_free_slab(void **state)
{
	struct ip_vaw *w = *state;
	uint64_t ua, us;

	alloc_ok(w, 1000, 0, NULL, BASE, BASE, GRAN);  /* units 0-3 */
	alloc_ok(w, 2000, 0, NULL, BASE + 1024, 0, 0); /* units 4-11 */
	alloc_ok(w, 3 * MiB, 0, NULL, BASE + GRAN, BASE + GRAN, 4 * MiB);

	/* not the start of an allocation: inside one, in the slab's unused part, outside */
	ua = us = 0x77;
	assert_int_equal(ip_vaw_free(w, BASE + 256, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(us, 0);
	assert_int_equal(ip_vaw_free(w, BASE + 1, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, BASE + 1024 + 1999, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, BASE + 4096, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, BASE + GRAN + 1, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, BASE + GRAN + 3 * MiB, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, BASE - GRAN, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_free(w, 0, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(w->nallocs, 3);
	assert_int_equal(w->mapped_bytes, GRAN + 4 * MiB);

	/* the slab still holds one: nothing to unmap */
	free_ok(w, BASE, 0, 0);
	assert_int_equal(w->mapped_bytes, GRAN + 4 * MiB);
	/* double free */
	ua = us = 0x77;
	assert_int_equal(ip_vaw_free(w, BASE, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(us, 0);
	/* the last one empties it: the whole slab comes back */
	free_ok(w, BASE + 1024, BASE, GRAN);
	assert_int_equal(w->mapped_bytes, 4 * MiB);
	assert_int_equal(ip_vaw_free(w, BASE + 1024, &ua, &us), RGPU_ENOTFOUND);
	assert_null(ip_vaw_find(w, BASE + 1024));
	assert_false(ip_vaw_mapped(w, BASE, 1));

	/* large free and double free */
	free_ok(w, BASE + GRAN, BASE + GRAN, 4 * MiB);
	assert_int_equal(ip_vaw_free(w, BASE + GRAN, &ua, &us), RGPU_ENOTFOUND);
	assert_int_equal(w->mapped_bytes, 0);
	assert_int_equal(w->nallocs, 0);

	/* the emptied slab's granule is free again: a new small allocation maps it anew */
	alloc_ok(w, 10, 0, NULL, BASE, BASE, GRAN);
}

/* --- exhaustion ------------------------------------------------------------------------------- */

static void test_exhaustion(void **state)
{
	struct ip_vaw *w = *state;
	struct ip_vaw_res r;

	assert_int_equal(ip_vaw_alloc(w, 0, 0, NULL, &r), RGPU_EINVAL);
	assert_int_equal(ip_vaw_alloc(w, WSIZE + 1, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_alloc(w, UINT64_MAX, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_alloc(w, UINT64_MAX - GRAN + 2, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(w->nallocs, 0);
	assert_int_equal(w->mapped_bytes, 0);

	for (uint64_t i = 0; i < 16; i++)
		alloc_ok(w, 4 * MiB, 0, NULL, BASE + i * 4 * MiB, BASE + i * 4 * MiB, 4 * MiB);
	assert_int_equal(w->mapped_bytes, WSIZE);
	assert_int_equal(ip_vaw_alloc(w, 4 * MiB, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_alloc(w, 2 * MiB, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_alloc(w, 1, 0, NULL, &r), RGPU_ENOSPC); /* needs a new slab */
	assert_int_equal(ip_vaw_alloc(w, 0, 0, NULL, &r), RGPU_EINVAL);
	assert_int_equal(w->nallocs, 16);
	assert_int_equal(w->mapped_bytes, WSIZE);

	free_ok(w, BASE + 28 * MiB, BASE + 28 * MiB, 4 * MiB);
	assert_int_equal(ip_vaw_alloc(w, 6 * MiB, 0, NULL, &r), RGPU_ENOSPC);
	alloc_ok(w, 4 * MiB, 0, NULL, BASE + 28 * MiB, BASE + 28 * MiB, 4 * MiB);
	assert_int_equal(ip_vaw_alloc(w, 1, 0, NULL, &r), RGPU_ENOSPC);

	/* two frees side by side: a 6 MiB allocation fits again */
	free_ok(w, BASE + 28 * MiB, BASE + 28 * MiB, 4 * MiB);
	free_ok(w, BASE + 32 * MiB, BASE + 32 * MiB, 4 * MiB);
	alloc_ok(w, 6 * MiB, 0, NULL, BASE + 28 * MiB, BASE + 28 * MiB, 6 * MiB);
	alloc_ok(w, 1, 0, NULL, BASE + 34 * MiB, BASE + 34 * MiB, GRAN);
	assert_int_equal(ip_vaw_alloc(w, 2 * MiB, 0, NULL, &r), RGPU_ENOSPC);
}

/* The whole window in one allocation, and a full window whose slab still has room. */
static void test_exhaustion_whole_and_slab(void **state)
{
	struct ip_vaw *w = *state;
	struct ip_vaw_res r;

	alloc_ok(w, WSIZE, 0, NULL, BASE, BASE, WSIZE);
	assert_int_equal(ip_vaw_alloc(w, 1, 0, NULL, &r), RGPU_ENOSPC);
	free_ok(w, BASE, BASE, WSIZE);

	alloc_ok(w, 100, 0, NULL, BASE, BASE, GRAN);
	for (uint64_t i = 1; i < NGRAN; i++)
		alloc_ok(w, 2 * MiB, 0, NULL, BASE + i * GRAN, BASE + i * GRAN, GRAN);
	assert_int_equal(w->mapped_bytes, WSIZE);
	/* the slab still has room: small allocations go on without mapping */
	alloc_ok(w, 1000, 0, NULL, BASE + 256, 0, 0);
	alloc_ok(w, 1 * MiB, 0, NULL, BASE + 1280, 0, 0);
	/* left in the slab: 2 MiB - 1280 - 1 MiB < 1 MiB */
	assert_int_equal(ip_vaw_alloc(w, 1 * MiB, 0, NULL, &r), RGPU_ENOSPC);
	/* another device may not use this slab, and there is no granule for its own */
	assert_int_equal(ip_vaw_alloc(w, 1, 1, NULL, &r), RGPU_ENOSPC);
	/* what is left fits: 2097152 - 1280 - 1048576 = 1047296 bytes, 4091 units */
	alloc_ok(w, 1047296, 0, NULL, BASE + 1280 + 1 * MiB, 0, 0);
	assert_int_equal(ip_vaw_alloc(w, 1, 0, NULL, &r), RGPU_ENOSPC);
}

/* --- lookups ---------------------------------------------------------------------------------- */

static void test_find(void **state)
{
	struct ip_vaw *w = *state;
	const struct ip_vaw_alloc *a;
	const uint64_t S1 = BASE, S2 = BASE + 512, L = BASE + GRAN;

	alloc_ok(w, 300, 3, &owner_a, S1, S1, GRAN); /* units 0-1, bytes 0..299 */
	alloc_ok(w, 256, 3, &owner_b, S2, 0, 0);     /* unit 2 */
	alloc_ok(w, 3 * MiB + 5, 4, &owner_c, L, L, 4 * MiB);

	a = ip_vaw_find(w, S1);
	assert_non_null(a);
	assert_int_equal(a->addr, S1);
	assert_int_equal(a->size, 300);
	assert_int_equal(a->device, 3);
	assert_ptr_equal(a->owner, &owner_a);
	assert_non_null(a->slab);
	assert_ptr_equal(ip_vaw_find(w, S1 + 150), a);
	assert_ptr_equal(ip_vaw_find(w, S1 + 299), a); /* last byte */
	assert_null(ip_vaw_find(w, S1 + 300));	       /* one past: the unit's padding */
	assert_null(ip_vaw_find(w, S1 + 511));

	a = ip_vaw_find(w, S2);
	assert_non_null(a);
	assert_int_equal(a->addr, S2);
	assert_int_equal(a->size, 256);
	assert_ptr_equal(a->owner, &owner_b);
	assert_ptr_equal(ip_vaw_find(w, S2 + 255), a);
	assert_null(ip_vaw_find(w, S2 + 256));
	assert_null(ip_vaw_find(w, BASE + GRAN - 1)); /* mapped slab, no allocation */

	a = ip_vaw_find(w, L);
	assert_non_null(a);
	assert_int_equal(a->addr, L);
	assert_int_equal(a->size, 3 * MiB + 5);
	assert_int_equal(a->map_size, 4 * MiB);
	assert_int_equal(a->device, 4);
	assert_ptr_equal(a->owner, &owner_c);
	assert_null(a->slab);
	assert_ptr_equal(ip_vaw_find(w, L + 2 * MiB), a);
	assert_ptr_equal(ip_vaw_find(w, L + 3 * MiB + 4), a);
	assert_null(ip_vaw_find(w, L + 3 * MiB + 5));
	assert_null(ip_vaw_find(w, L + 4 * MiB - 1));
	assert_null(ip_vaw_find(w, L + 4 * MiB));
	assert_null(ip_vaw_find(w, BASE - 1));
	assert_null(ip_vaw_find(w, 0));
	assert_null(ip_vaw_find(w, UINT64_MAX));
}

/* ip_vaw_mapped: contiguous mappings (slab then large) count as one range; a gap does not. */
static void test_mapped(void **state)
{
	struct ip_vaw *w = *state;

	alloc_ok(w, 64, 0, NULL, BASE, BASE, GRAN);				    /* [0,2) */
	alloc_ok(w, 3 * MiB + 1, 0, NULL, BASE + 2 * MiB, BASE + 2 * MiB, 4 * MiB); /* [2,6) */
	alloc_ok(w, 2 * MiB, 0, NULL, BASE + 6 * MiB, BASE + 6 * MiB, 2 * MiB);	    /* [6,8) */
	alloc_ok(w, 2 * MiB, 0, NULL, BASE + 8 * MiB, BASE + 8 * MiB, 2 * MiB);	    /* [8,10) */
	free_ok(w, BASE + 6 * MiB, BASE + 6 * MiB, 2 * MiB);			    /* gap [6,8) */

	assert_true(ip_vaw_mapped(w, BASE, 1));
	assert_true(ip_vaw_mapped(w, BASE + 4096, 4096)); /* in the slab, no allocation there */
	assert_true(ip_vaw_mapped(w, BASE, 2 * MiB));
	assert_true(ip_vaw_mapped(w, BASE + 2 * MiB - 1, 2)); /* slab -> large */
	assert_true(ip_vaw_mapped(w, BASE, 6 * MiB));
	assert_true(ip_vaw_mapped(w, BASE + 1 * MiB, 5 * MiB));
	assert_true(ip_vaw_mapped(w, BASE + 6 * MiB - 1, 1));
	assert_false(ip_vaw_mapped(w, BASE + 1 * MiB, 5 * MiB + 1)); /* one byte into the gap */
	assert_false(ip_vaw_mapped(w, BASE + 6 * MiB, 1));
	assert_false(ip_vaw_mapped(w, BASE + 8 * MiB - 1, 1));
	assert_false(ip_vaw_mapped(w, BASE + 5 * MiB, 4 * MiB)); /* across the gap */
	assert_false(ip_vaw_mapped(w, BASE, 10 * MiB));
	assert_true(ip_vaw_mapped(w, BASE + 8 * MiB, 2 * MiB));
	assert_true(ip_vaw_mapped(w, BASE + 10 * MiB - 1, 1));
	assert_false(ip_vaw_mapped(w, BASE + 8 * MiB, 2 * MiB + 1));
	assert_false(ip_vaw_mapped(w, BASE + 10 * MiB, 1));
	assert_false(ip_vaw_mapped(w, BASE - 1, 2));
	assert_false(ip_vaw_mapped(w, BASE - 4096, 4096));
	assert_false(ip_vaw_mapped(w, BASE, UINT64_MAX)); /* wraps */
	assert_false(ip_vaw_mapped(w, BASE + WSIZE - 1, 1));

	/* filling the gap joins everything: [0, 10 MiB) */
	alloc_ok(w, 2 * MiB, 0, NULL, BASE + 6 * MiB, BASE + 6 * MiB, 2 * MiB);
	assert_true(ip_vaw_mapped(w, BASE, 10 * MiB));
	assert_false(ip_vaw_mapped(w, BASE, 10 * MiB + 1));
	assert_int_equal(w->mapped_bytes, 10 * MiB);
}

/* --- collect and devices ---------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void expect_collect(struct ip_vaw *w, void *owner, const uint64_t *want, size_t nwant)
{
	uint64_t *got = NULL;
	size_t n = 12345;
	assert_int_equal(ip_vaw_collect(w, owner, &got, &n), 0);
	assert_int_equal(n, nwant);
	if (n)
		qsort(got, n, sizeof(*got), cmp_u64);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(got[i], want[i]);
	free(got);
}

static void test_collect(void **state)
{
	struct ip_vaw *w = *state;

	alloc_ok(w, 10, 0, &owner_a, BASE, BASE, GRAN);
	alloc_ok(w, 10, 0, &owner_b, BASE + 256, 0, 0);
	alloc_ok(w, 5 * MiB, 0, &owner_a, BASE + GRAN, BASE + GRAN, 6 * MiB);
	alloc_ok(w, 700, 0, &owner_a, BASE + 512, 0, 0);
	alloc_ok(w, 2 * MiB, 0, &owner_b, BASE + 8 * MiB, BASE + 8 * MiB, 2 * MiB);
	alloc_ok(w, 10, 0, NULL, BASE + 1280, 0, 0);

	const uint64_t wa[] = {BASE, BASE + 512, BASE + GRAN};
	const uint64_t wb[] = {BASE + 256, BASE + 8 * MiB};
	const uint64_t wnull[] = {BASE + 1280};
	expect_collect(w, &owner_a, wa, 3);
	expect_collect(w, &owner_b, wb, 2);
	expect_collect(w, NULL, wnull, 1);
	expect_collect(w, &owner_c, NULL, 0);

	free_ok(w, BASE + 512, 0, 0);
	const uint64_t wa2[] = {BASE, BASE + GRAN};
	expect_collect(w, &owner_a, wa2, 2);
	expect_collect(w, &owner_b, wb, 2);
}

/* Allocations of different devices never share a slab. */
static void test_devices_separate_slabs(void **state)
{
	struct ip_vaw *w = *state;
	const uint64_t S0 = BASE, S1 = BASE + GRAN, S2 = BASE + 2 * GRAN;

	alloc_ok(w, 100, 0, NULL, S0, S0, GRAN);
	alloc_ok(w, 100, 1, NULL, S1, S1, GRAN); /* slab 0 has room, but is device 0's */
	alloc_ok(w, 100, 0, NULL, S0 + 256, 0, 0);
	alloc_ok(w, 100, 1, NULL, S1 + 256, 0, 0);
	alloc_ok(w, 100, 7, NULL, S2, S2, GRAN);
	alloc_ok(w, 100, 1, NULL, S1 + 512, 0, 0);
	assert_int_equal(ip_vaw_find(w, S0 + 256)->device, 0);
	assert_int_equal(ip_vaw_find(w, S1 + 512)->device, 1);
	assert_int_equal(ip_vaw_find(w, S2)->device, 7);
	assert_ptr_not_equal(ip_vaw_find(w, S0)->slab, ip_vaw_find(w, S1)->slab);
	assert_ptr_equal(ip_vaw_find(w, S1)->slab, ip_vaw_find(w, S1 + 512)->slab);
	assert_int_equal(w->mapped_bytes, 3 * GRAN);

	/* device 1's slab emptied: only its granule goes back */
	free_ok(w, S1, 0, 0);
	free_ok(w, S1 + 256, 0, 0);
	free_ok(w, S1 + 512, S1, GRAN);
	/* device 0 fills its own slab first, then takes the freed granule, not device 7's slab */
	alloc_ok(w, 1 * MiB, 0, NULL, S0 + 512, 0, 0);
	alloc_ok(w, 1 * MiB, 0, NULL, S1, S1, GRAN);
}

/* --- randomized stress against a model -------------------------------------------------------- */

struct live {
	uint64_t addr, size;
	int dev;
	void *owner;
};

/* What the test believes about each granule. */
struct gmodel {
	int kind; /* 0 free, 1 slab, 2 large */
	int dev;  /* slab's device */
	uint32_t used;
	uint8_t unit[UNITS_PER_SLAB];
};

static uint64_t rng_state;
static uint64_t rnd(void)
{
	/* xorshift64*: fixed seed, same sequence everywhere */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static long slab_first_fit(const struct gmodel *g, uint32_t n)
{
	uint32_t run = 0;
	for (uint32_t i = 0; i < UNITS_PER_SLAB; i++) {
		run = g->unit[i] ? 0 : run + 1;
		if (run == n)
			return (long)(i + 1 - n);
	}
	return -1;
}

static long lowest_free_run(const struct gmodel *g, uint64_t n)
{
	uint64_t run = 0;
	for (uint64_t i = 0; i < NGRAN; i++) {
		run = g[i].kind ? 0 : run + 1;
		if (run == n)
			return (long)(i + 1 - n);
	}
	return -1;
}

static void test_stress(void **state)
{
	struct ip_vaw *w = *state;
	static struct gmodel g[NGRAN];
	enum { MAXLIVE = 4096, OPS = 20000 };
	static struct live live[MAXLIVE];
	size_t nlive = 0;
	uint64_t model_mapped = 0;
	void *owners[3] = {&owner_a, &owner_b, &owner_c};
	unsigned nenospc = 0, nnewslab = 0, nlarge = 0, nslabfree = 0;

	memset(g, 0, sizeof(g));
	rng_state = 0x9e3779b97f4a7c15ull;

	for (int op = 0; op < OPS; op++) {
		/* alternate phases that grow and shrink the live set, so slabs fill and empty */
		unsigned free_pct = (op / 2000) % 2 ? 75 : 35;
		int do_free = nlive && (nlive == MAXLIVE || rnd() % 100 < free_pct);
		if (do_free) {
			size_t k = rnd() % nlive;
			struct live a = live[k];
			uint64_t ua, us;
			uint64_t gi = (a.addr - BASE) / GRAN;

			/* an address inside (never a start: starts are 256-byte aligned) */
			if (a.size > 1) {
				assert_int_equal(ip_vaw_free(w, a.addr + 1, &ua, &us),
						 RGPU_ENOTFOUND);
			}
			assert_int_equal(ip_vaw_free(w, a.addr, &ua, &us), 0);
			if (a.size > IP_VAW_SMALL) {
				uint64_t len = (a.size + GRAN - 1) / GRAN * GRAN;
				assert_int_equal(ua, a.addr);
				assert_int_equal(us, len);
				for (uint64_t j = gi; j < gi + len / GRAN; j++)
					g[j].kind = 0;
				model_mapped -= len;
			} else {
				uint32_t u = (uint32_t)((a.addr - BASE - gi * GRAN) / UNIT);
				uint32_t n = (uint32_t)((a.size + UNIT - 1) / UNIT);
				assert_int_equal(g[gi].kind, 1);
				for (uint32_t j = u; j < u + n; j++)
					g[gi].unit[j] = 0;
				g[gi].used -= n;
				if (g[gi].used == 0) {
					assert_int_equal(ua, BASE + gi * GRAN);
					assert_int_equal(us, GRAN);
					memset(&g[gi], 0, sizeof(g[gi]));
					model_mapped -= GRAN;
					nslabfree++;
				} else {
					assert_int_equal(us, 0);
				}
			}
			live[k] = live[--nlive];
		} else {
			struct live a;
			struct ip_vaw_res r;
			uint64_t pick = rnd() % 100;
			if (pick < 55)
				a.size = 1 + rnd() % 2048;
			else if (pick < 80)
				a.size = 1 + rnd() % (64 * KiB);
			else if (pick < 88)
				a.size = 1 + rnd() % IP_VAW_SMALL; /* up to 1 MiB, still small */
			else
				a.size = IP_VAW_SMALL + 1 + rnd() % (6 * MiB);
			a.dev = (int)(rnd() % 2);
			a.owner = owners[rnd() % 3];

			int ret = ip_vaw_alloc(w, a.size, a.dev, a.owner, &r);
			if (a.size > IP_VAW_SMALL) {
				uint64_t len = (a.size + GRAN - 1) / GRAN * GRAN;
				long at = lowest_free_run(g, len / GRAN);
				if (at < 0) {
					assert_int_equal(ret, RGPU_ENOSPC);
					nenospc++;
					goto check;
				}
				assert_int_equal(ret, 0);
				assert_int_equal(r.addr, BASE + (uint64_t)at * GRAN);
				assert_int_equal(r.map_addr, r.addr);
				assert_int_equal(r.map_size, len);
				for (uint64_t j = (uint64_t)at; j < (uint64_t)at + len / GRAN; j++)
					g[j].kind = 2;
				model_mapped += len;
				nlarge++;
			} else {
				uint32_t n = (uint32_t)((a.size + UNIT - 1) / UNIT);
				int room = 0;
				for (uint64_t j = 0; j < NGRAN; j++)
					if (g[j].kind == 1 && g[j].dev == a.dev &&
					    slab_first_fit(&g[j], n) >= 0)
						room = 1;
				long freeg = lowest_free_run(g, 1);
				if (!room && freeg < 0) {
					assert_int_equal(ret, RGPU_ENOSPC);
					nenospc++;
					goto check;
				}
				assert_int_equal(ret, 0);
				assert_int_equal(r.addr % UNIT, 0);
				assert_true(r.addr >= BASE && r.addr < BASE + WSIZE);
				uint64_t gi = (r.addr - BASE) / GRAN;
				uint32_t u = (uint32_t)((r.addr - BASE - gi * GRAN) / UNIT);
				if (r.map_size) {
					/* a new slab only when no slab of this device had room */
					assert_false(room);
					assert_int_equal(r.map_size, GRAN);
					assert_int_equal(r.map_addr, BASE + (uint64_t)freeg * GRAN);
					assert_int_equal(r.addr, r.map_addr);
					g[gi].kind = 1;
					g[gi].dev = a.dev;
					model_mapped += GRAN;
					nnewslab++;
				} else {
					/* into a slab of the same device, its lowest fitting run */
					assert_int_equal(g[gi].kind, 1);
					assert_int_equal(g[gi].dev, a.dev);
					assert_int_equal(u, slab_first_fit(&g[gi], n));
				}
				for (uint32_t j = u; j < u + n; j++) {
					assert_int_equal(g[gi].unit[j], 0); /* no overlap */
					g[gi].unit[j] = 1;
				}
				g[gi].used += n;
			}
			a.addr = r.addr;
			live[nlive++] = a;
		}
	check:
		assert_int_equal(w->mapped_bytes, model_mapped);
		assert_int_equal(w->nallocs, nlive);

		if (op % 97 == 0) {
			/* no two live allocations overlap: sort by address, compare neighbours */
			static struct live sorted[MAXLIVE];
			memcpy(sorted, live, nlive * sizeof(*live));
			qsort(sorted, nlive, sizeof(*sorted),
			      cmp_u64); /* addr is the first field */
			for (size_t i = 1; i < nlive; i++)
				assert_true(sorted[i - 1].addr + sorted[i - 1].size <=
					    sorted[i].addr);
			for (size_t i = 0; i < nlive; i++) {
				const struct ip_vaw_alloc *f = ip_vaw_find(w, live[i].addr);
				assert_non_null(f);
				assert_int_equal(f->addr, live[i].addr);
				assert_int_equal(f->size, live[i].size);
				assert_int_equal(f->device, live[i].dev);
				assert_ptr_equal(f->owner, live[i].owner);
				assert_ptr_equal(ip_vaw_find(w, live[i].addr + live[i].size - 1),
						 f);
				assert_true(ip_vaw_mapped(w, live[i].addr, live[i].size));
			}
		}
	}
	/* the run exercised every path */
	assert_true(nenospc > 0);
	assert_true(nnewslab > 10);
	assert_true(nslabfree > 10);
	assert_true(nlarge > 100);

	while (nlive) {
		size_t k = rnd() % nlive;
		uint64_t ua, us;
		assert_int_equal(ip_vaw_free(w, live[k].addr, &ua, &us), 0);
		live[k] = live[--nlive];
	}
	assert_int_equal(w->mapped_bytes, 0);
	assert_int_equal(w->nallocs, 0);
	/* every range came back and joined: the whole window in one piece, at the base */
	alloc_ok(w, WSIZE, 0, NULL, BASE, BASE, WSIZE);
}

/* --- the application's reservations and mappings ---------------------------------------------- */

static int phys_a, phys_b; /* physical memory objects: only compared by address */

static uint64_t reserve_ok(struct ip_vaw *w, uint64_t size, uint64_t align, uint64_t hint)
{
	uint64_t a = 0x5a5a;
	int ret = ip_vaw_reserve(w, size, align, hint, 0, &a);
	if (ret != 0)
		fail_msg("reserve(%llu) failed: %d", (unsigned long long)size, ret);
	return a;
}

/* Reservations are granule-aligned ranges of the window that nothing else is given. */
static void test_reserve(void **state)
{
	struct ip_vaw *w = *state;
	uint64_t a;

	/* first fit, rounded up to granules: 3 MiB takes two */
	assert_int_equal(reserve_ok(w, 3 * MiB, 0, 0), BASE);
	/* the next allocation starts after it */
	alloc_ok(w, 4 * MiB, 0, &owner_a, BASE + 4 * MiB, BASE + 4 * MiB, 4 * MiB);
	/* a free, aligned hint is taken as it is, even in the middle of a free range */
	assert_int_equal(reserve_ok(w, 2 * MiB, 0, BASE + 20 * MiB), BASE + 20 * MiB);
	/* a taken hint, an unaligned one, one outside the window: first fit instead */
	assert_int_equal(reserve_ok(w, 2 * MiB, 0, BASE + 20 * MiB), BASE + 8 * MiB);
	assert_int_equal(reserve_ok(w, 2 * MiB, 0, BASE + 30 * MiB + 4096), BASE + 10 * MiB);
	assert_int_equal(reserve_ok(w, 2 * MiB, 0, BASE - 32 * MiB), BASE + 12 * MiB);
	/* alignment: 8 MiB skips to BASE + 16 MiB; the hole before it stays free */
	assert_int_equal(reserve_ok(w, 2 * MiB, 8 * MiB, 0), BASE + 16 * MiB);
	alloc_ok(w, 2 * MiB, 0, &owner_a, BASE + 14 * MiB, BASE + 14 * MiB, 2 * MiB);
	/* an alignment that is not a power of two, a size of 0, more than the window */
	assert_int_equal(ip_vaw_reserve(w, 2 * MiB, 3 * MiB, 0, 0, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(w, 0, 0, 0, 0, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(w, WSIZE, 0, 0, 0, &a), RGPU_ENOSPC);

	assert_non_null(ip_vaw_resv_find(w, BASE + 3 * MiB + 17));
	assert_int_equal(ip_vaw_resv_find(w, BASE + 3 * MiB)->size, 3 * MiB);
	assert_null(ip_vaw_resv_find(w, BASE + 4 * MiB));
	/* a reservation is not device memory until mapped */
	assert_false(ip_vaw_mapped(w, BASE, 16));
	assert_null(ip_vaw_find(w, BASE));

	/* given back only whole, by its address and the size asked for */
	assert_int_equal(ip_vaw_unreserve(w, BASE, 4 * MiB), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_unreserve(w, BASE + 2 * MiB, 3 * MiB), RGPU_ENOTFOUND);
	assert_int_equal(ip_vaw_unreserve(w, BASE, 3 * MiB), 0);
	assert_null(ip_vaw_resv_find(w, BASE));
	assert_int_equal(ip_vaw_unreserve(w, BASE, 3 * MiB), RGPU_ENOTFOUND);
	/* its granules are free again */
	alloc_ok(w, 4 * MiB, 0, &owner_a, BASE, BASE, 4 * MiB);
}

/* Mappings inside reservations: tiling, access, lookups, and a reservation kept while mapped. */
static void test_app_maps(void **state)
{
	struct ip_vaw *w = *state;
	struct ip_vaw_map **maps = NULL;
	uint64_t r = reserve_ok(w, 16 * MiB, 0, 0);
	size_t n = 0;

	assert_int_equal(r, BASE);
	assert_int_equal(ip_vaw_map_app(w, r, 4 * MiB, &phys_a, 0, 1), 0);
	assert_int_equal(ip_vaw_map_app(w, r + 4 * MiB, 2 * MiB, &phys_b, 2 * MiB, 0), 0);
	/* over a mapping, across the reservation's end, outside any reservation */
	assert_int_equal(ip_vaw_map_app(w, r + 2 * MiB, 2 * MiB, &phys_b, 0, 0), RGPU_EEXIST);
	assert_int_equal(ip_vaw_map_app(w, r + 14 * MiB, 4 * MiB, &phys_b, 0, 0), RGPU_EINVAL);
	alloc_ok(w, 2 * MiB, 0, &owner_a, BASE + 16 * MiB, BASE + 16 * MiB, 2 * MiB);
	assert_int_equal(ip_vaw_map_app(w, BASE + 16 * MiB, 2 * MiB, &phys_b, 0, 0), RGPU_EINVAL);
	assert_int_equal(ip_vaw_map_app(w, r, 0, &phys_b, 0, 0), RGPU_EINVAL);
	assert_int_equal(w->mapped_bytes, 2 * MiB); /* the allocator's own mapping only */

	assert_ptr_equal(ip_vaw_map_find(w, r + 4 * MiB + 5)->handle, &phys_b);
	assert_int_equal(ip_vaw_map_find(w, r + 4 * MiB + 5)->offset, 2 * MiB);
	assert_int_equal(ip_vaw_map_find(w, r + 1)->device, 1);
	assert_null(ip_vaw_map_find(w, r + 6 * MiB));
	assert_null(ip_vaw_map_find(w, BASE + 16 * MiB)->handle); /* the allocator's */

	/* no access yet: not memory a copy may name */
	assert_false(ip_vaw_mapped(w, r, 16));
	ip_vaw_map_find(w, r)->access = 0x3;
	assert_true(ip_vaw_mapped(w, r, 4 * MiB));
	assert_false(ip_vaw_mapped(w, r, 4 * MiB + 1));
	ip_vaw_map_find(w, r + 4 * MiB)->access = 0x1;
	assert_true(ip_vaw_mapped(w, r + 4 * MiB - 8, 16));

	/* tiling: whole mappings, back to back, in order */
	assert_int_equal(ip_vaw_app_maps(w, r, 6 * MiB, &maps, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(maps[0]->addr, r);
	assert_int_equal(maps[1]->addr, r + 4 * MiB);
	free(maps);
	assert_int_equal(ip_vaw_app_maps(w, r + 4 * MiB, 2 * MiB, &maps, &n), 0);
	assert_int_equal(n, 1);
	free(maps);
	assert_int_equal(ip_vaw_app_maps(w, r, 2 * MiB, &maps, &n), RGPU_EINVAL); /* a part */
	assert_int_equal(ip_vaw_app_maps(w, r, 8 * MiB, &maps, &n), RGPU_EINVAL); /* a hole */
	assert_int_equal(ip_vaw_app_maps(w, r + 2 * MiB, 4 * MiB, &maps, &n), RGPU_EINVAL);
	assert_int_equal(ip_vaw_app_maps(w, r + 8 * MiB, 2 * MiB, &maps, &n), RGPU_EINVAL);
	assert_int_equal(ip_vaw_app_maps(w, BASE + 16 * MiB, 2 * MiB, &maps, &n), RGPU_EINVAL);
	assert_int_equal(ip_vaw_app_maps(w, r, 0, &maps, &n), RGPU_EINVAL);

	/* the reservation stays while anything is mapped in it */
	assert_int_equal(ip_vaw_unreserve(w, r, 16 * MiB), RGPU_EBUSY);
	ip_vaw_unmap_app(w, r);
	assert_int_equal(ip_vaw_unreserve(w, r, 16 * MiB), RGPU_EBUSY);
	ip_vaw_unmap_app(w, BASE + 16 * MiB); /* the allocator's: not the application's to drop */
	assert_true(ip_vaw_mapped(w, BASE + 16 * MiB, 2 * MiB));
	ip_vaw_unmap_app(w, r + 4 * MiB);
	assert_null(ip_vaw_map_find(w, r + 4 * MiB));
	/* mapped again elsewhere in it, then all gone */
	assert_int_equal(ip_vaw_map_app(w, r + 8 * MiB, 4 * MiB, &phys_a, 0, 1), 0);
	ip_vaw_unmap_app(w, r + 8 * MiB);
	assert_int_equal(ip_vaw_unreserve(w, r, 16 * MiB), 0);
	free_ok(w, BASE + 16 * MiB, BASE + 16 * MiB, 2 * MiB);
	/* every range came back and joined */
	alloc_ok(w, WSIZE, 0, NULL, BASE, BASE, WSIZE);
}

/* --- slices: one per device ------------------------------------------------------------------- */

/*
 * A window of 35 granules (70 MiB), a multiple of no slice count but 1, so rounding leaves a
 * top unused: nparts 2 gives 17 granules each (34 MiB) and 1 granule left; nparts 4 gives 8
 * granules each (16 MiB) and 3 left; nparts 16 gives 2 granules each (4 MiB) and 3 left.
 */
#define PSIZE (35 * GRAN)

static void parts_init(struct ip_vaw *w, int nparts)
{
	int ret = ip_vaw_init(w, BASE, PSIZE, GRAN, nparts);
	if (ret != 0)
		fail_msg("init with %d slices failed: %d", nparts, ret);
}

static void expect_part_range(const struct ip_vaw *w, int d, uint64_t want_lo, uint64_t want_len)
{
	uint64_t lo = 0x5a5a, len = 0x5a5a;
	assert_int_equal(ip_vaw_part_range(w, d, &lo, &len), 0);
	assert_int_equal(lo, want_lo);
	assert_int_equal(len, want_len);
}

static void test_parts_init_args(void **state)
{
	(void)state;
	struct ip_vaw w;
	uint64_t lo = 0x77, len = 0x77;

	assert_int_equal(ip_vaw_init(&w, BASE, PSIZE, GRAN, 0), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, PSIZE, GRAN, -1), RGPU_EINVAL);
	assert_int_equal(ip_vaw_init(&w, BASE, PSIZE, GRAN, 17), RGPU_EINVAL);
	/* 16 slices of 15 granules: 30 MiB / 16 = 1.875 MiB, less than a granule */
	assert_int_equal(ip_vaw_init(&w, BASE, 15 * GRAN, GRAN, 16), RGPU_EINVAL);
	/* 16 granules: one each, nothing left over */
	assert_int_equal(ip_vaw_init(&w, BASE, 16 * GRAN, GRAN, 16), 0);
	assert_int_equal(w.part, GRAN);
	assert_int_equal(w.nparts, 16);
	expect_part_range(&w, 15, BASE + 15 * GRAN, GRAN);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 16 * GRAN - 1), 15);
	ip_vaw_fini(&w);

	parts_init(&w, 16);
	assert_int_equal(w.part, 4 * MiB);
	/* a slice number outside 0..nparts-1: refused, nothing written */
	assert_int_equal(ip_vaw_part_range(&w, 16, &lo, &len), RGPU_EINVAL);
	assert_int_equal(ip_vaw_part_range(&w, -1, &lo, &len), RGPU_EINVAL);
	assert_int_equal(lo, 0x77);
	assert_int_equal(len, 0x77);
	ip_vaw_fini(&w);
}

/* Slice bounds and ip_vaw_part_of at the first and last byte of each slice and of the window. */
static void test_parts_bounds(void **state)
{
	(void)state;
	struct ip_vaw w;
	uint64_t lo, len;

	/* one slice: the whole window, every byte of it slice 0 */
	parts_init(&w, 1);
	assert_int_equal(w.part, PSIZE);
	expect_part_range(&w, 0, BASE, PSIZE);
	assert_int_equal(ip_vaw_part_range(&w, 1, &lo, &len), RGPU_EINVAL);
	assert_int_equal(ip_vaw_part_of(&w, BASE), 0);
	assert_int_equal(ip_vaw_part_of(&w, BASE + PSIZE - 1), 0);
	assert_int_equal(ip_vaw_part_of(&w, BASE + PSIZE), -1);
	assert_int_equal(ip_vaw_part_of(&w, BASE - 1), -1);
	assert_int_equal(ip_vaw_part_of(&w, 0), -1);
	assert_int_equal(ip_vaw_part_of(&w, UINT64_MAX), -1);
	ip_vaw_fini(&w);

	/* two: 34 MiB each, [68, 70) MiB unused */
	parts_init(&w, 2);
	assert_int_equal(w.part, 34 * MiB);
	expect_part_range(&w, 0, BASE, 34 * MiB);
	expect_part_range(&w, 1, BASE + 34 * MiB, 34 * MiB);
	assert_int_equal(ip_vaw_part_range(&w, 2, &lo, &len), RGPU_EINVAL);
	assert_int_equal(ip_vaw_part_of(&w, BASE), 0);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 34 * MiB - 1), 0);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 34 * MiB), 1);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 68 * MiB - 1), 1);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 68 * MiB), -1); /* the unused top */
	assert_int_equal(ip_vaw_part_of(&w, BASE + PSIZE - 1), -1);
	assert_true(ip_vaw_in_window(&w, BASE + PSIZE - 1)); /* still the window */
	assert_int_equal(ip_vaw_part_of(&w, BASE + PSIZE), -1);
	assert_int_equal(ip_vaw_part_of(&w, BASE - 1), -1);
	ip_vaw_fini(&w);

	/* four: 16 MiB each, [64, 70) MiB unused */
	parts_init(&w, 4);
	assert_int_equal(w.part, 16 * MiB);
	for (int d = 0; d < 4; d++) {
		uint64_t first = BASE + (uint64_t)d * 16 * MiB;
		expect_part_range(&w, d, first, 16 * MiB);
		assert_int_equal(ip_vaw_part_of(&w, first), d);
		assert_int_equal(ip_vaw_part_of(&w, first + 16 * MiB - 1), d);
	}
	assert_int_equal(ip_vaw_part_range(&w, 4, &lo, &len), RGPU_EINVAL);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 64 * MiB), -1);
	assert_int_equal(ip_vaw_part_of(&w, BASE + PSIZE), -1);
	ip_vaw_fini(&w);
}

/* Each device's allocations start at its own slice, whatever order the devices come in. */
static void test_parts_alloc(void **state)
{
	(void)state;
	struct ip_vaw w;
	struct ip_vaw_res r;
	const uint64_t P = 16 * MiB;

	parts_init(&w, 4);
	/* a small one opens a slab at the slice's first granule; a large one follows it */
	alloc_ok(&w, 100, 3, &owner_a, BASE + 3 * P, BASE + 3 * P, GRAN);
	alloc_ok(&w, 100, 0, &owner_a, BASE, BASE, GRAN);
	alloc_ok(&w, 3 * MiB, 2, &owner_b, BASE + 2 * P, BASE + 2 * P, 4 * MiB);
	alloc_ok(&w, 100, 2, &owner_b, BASE + 2 * P + 4 * MiB, BASE + 2 * P + 4 * MiB, GRAN);
	alloc_ok(&w, 3 * MiB, 1, &owner_c, BASE + P, BASE + P, 4 * MiB);
	alloc_ok(&w, 3 * MiB, 3, &owner_a, BASE + 3 * P + GRAN, BASE + 3 * P + GRAN, 4 * MiB);
	alloc_ok(&w, 100, 3, &owner_a, BASE + 3 * P + 256, 0, 0);
	assert_int_equal(ip_vaw_find(&w, BASE + 3 * P + 256)->device, 3);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 2 * P + 4 * MiB), 2);
	assert_int_equal(w.nallocs, 7);
	assert_int_equal(w.mapped_bytes, 3 * GRAN + 12 * MiB);

	/* devices with no slice; 0 bytes; more than a slice */
	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(ip_vaw_alloc(&w, 100, 4, NULL, &r), RGPU_EINVAL);
	assert_int_equal(r.map_size, 0);
	assert_int_equal(ip_vaw_alloc(&w, 100, -1, NULL, &r), RGPU_EINVAL);
	assert_int_equal(ip_vaw_alloc(&w, 4 * MiB, 16, NULL, &r), RGPU_EINVAL);
	assert_int_equal(ip_vaw_alloc(&w, 0, 1, NULL, &r), RGPU_EINVAL);
	assert_int_equal(ip_vaw_alloc(&w, P + 1, 1, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(w.nallocs, 7);
	ip_vaw_fini(&w);

	/* one slice is every device's: devices share the window and only slabs are per device */
	parts_init(&w, 1);
	alloc_ok(&w, 100, 9, NULL, BASE, BASE, GRAN);
	alloc_ok(&w, 100, 0, NULL, BASE + GRAN, BASE + GRAN, GRAN);
	alloc_ok(&w, 3 * MiB, 15, NULL, BASE + 2 * GRAN, BASE + 2 * GRAN, 4 * MiB);
	assert_int_equal(ip_vaw_alloc(&w, 100, -1, NULL, &r), RGPU_EINVAL);
	ip_vaw_fini(&w);
}

/* Small allocations of two devices never share a slab, nor a granule. */
static void test_parts_separate_slabs(void **state)
{
	(void)state;
	struct ip_vaw w;
	const uint64_t S0 = BASE, S1 = BASE + 34 * MiB;

	parts_init(&w, 2);
	alloc_ok(&w, 100, 0, NULL, S0, S0, GRAN);
	alloc_ok(&w, 100, 1, NULL, S1, S1, GRAN); /* slab 0 has room, but is device 0's */
	alloc_ok(&w, 100, 0, NULL, S0 + 256, 0, 0);
	alloc_ok(&w, 100, 1, NULL, S1 + 256, 0, 0);
	assert_ptr_not_equal(ip_vaw_find(&w, S0)->slab, ip_vaw_find(&w, S1)->slab);
	assert_ptr_equal(ip_vaw_find(&w, S1)->slab, ip_vaw_find(&w, S1 + 256)->slab);
	assert_int_not_equal((S0 + 256 - BASE) / GRAN, (S1 + 256 - BASE) / GRAN);
	assert_int_equal(ip_vaw_part_of(&w, S0 + 256), 0);
	assert_int_equal(ip_vaw_part_of(&w, S1 + 256), 1);

	/* device 1 fills its slab; its next slab comes from its own slice, not from device 0's */
	alloc_ok(&w, 1 * MiB, 1, NULL, S1 + 512, 0, 0);
	alloc_ok(&w, 1 * MiB, 1, NULL, S1 + GRAN, S1 + GRAN, GRAN);
	/* emptied, device 1's slab goes back, and device 0 never gets that granule */
	free_ok(&w, S1, 0, 0);
	free_ok(&w, S1 + 256, 0, 0);
	free_ok(&w, S1 + 512, S1, GRAN);
	alloc_ok(&w, 1 * MiB, 0, NULL, S0 + 512, 0, 0);
	alloc_ok(&w, 1 * MiB, 0, NULL, S0 + GRAN, S0 + GRAN, GRAN);
	alloc_ok(&w, 1, 1, NULL, S1 + GRAN + 1 * MiB, 0, 0);
	alloc_ok(&w, 1 * MiB, 1, NULL, S1, S1, GRAN);
	ip_vaw_fini(&w);
}

/* A slice fills up: that device gets RGPU_ENOSPC, the other still allocates. */
static void test_parts_full(void **state)
{
	(void)state;
	struct ip_vaw w;
	struct ip_vaw_res r;
	const uint64_t S1 = BASE + 34 * MiB;

	parts_init(&w, 2);
	alloc_ok(&w, 34 * MiB, 0, NULL, BASE, BASE, 34 * MiB); /* device 0's whole slice */
	assert_int_equal(ip_vaw_alloc(&w, 2 * MiB, 0, NULL, &r), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_alloc(&w, 1, 0, NULL, &r), RGPU_ENOSPC); /* a new slab */
	alloc_ok(&w, 1, 1, NULL, S1, S1, GRAN);
	alloc_ok(&w, 32 * MiB, 1, NULL, S1 + GRAN, S1 + GRAN, 32 * MiB);
	/* device 1 full too; the unused top [68, 70) MiB is free but no one's */
	assert_int_equal(ip_vaw_alloc(&w, 2 * MiB, 1, NULL, &r), RGPU_ENOSPC);
	alloc_ok(&w, 1 * MiB, 1, NULL, S1 + 256, 0, 0); /* its slab still has room */
	assert_int_equal(w.mapped_bytes, 68 * MiB);

	/* freed, device 0's slice is its own again; more than a slice never fits */
	free_ok(&w, BASE, BASE, 34 * MiB);
	assert_int_equal(ip_vaw_alloc(&w, 34 * MiB + 1, 0, NULL, &r), RGPU_ENOSPC);
	alloc_ok(&w, 6 * MiB, 0, NULL, BASE, BASE, 6 * MiB);
	free_ok(&w, BASE, BASE, 6 * MiB);

	/*
	 * All free again: one free range [0, 68) MiB crosses the slice boundary. Device 1 takes
	 * from its middle, at its own slice's start, and device 0 the whole of what is below.
	 */
	free_ok(&w, S1 + GRAN, S1 + GRAN, 32 * MiB);
	free_ok(&w, S1, 0, 0);
	free_ok(&w, S1 + 256, S1, GRAN);
	assert_int_equal(w.nallocs, 0);
	alloc_ok(&w, 100, 1, NULL, S1, S1, GRAN);
	alloc_ok(&w, 34 * MiB, 0, NULL, BASE, BASE, 34 * MiB);
	alloc_ok(&w, 32 * MiB, 1, NULL, S1 + GRAN, S1 + GRAN, 32 * MiB);
	assert_int_equal(ip_vaw_alloc(&w, 2 * MiB, 1, NULL, &r), RGPU_ENOSPC);
	ip_vaw_fini(&w);

	/* sixteen slices of 4 MiB: the last one, [60, 64) MiB, fills with a slab and 2 MiB */
	parts_init(&w, 16);
	alloc_ok(&w, 100, 15, NULL, BASE + 60 * MiB, BASE + 60 * MiB, GRAN);
	assert_int_equal(ip_vaw_alloc(&w, 4 * MiB, 15, NULL, &r), RGPU_ENOSPC);
	alloc_ok(&w, 2 * MiB, 15, NULL, BASE + 62 * MiB, BASE + 62 * MiB, 2 * MiB);
	assert_int_equal(ip_vaw_alloc(&w, 2 * MiB, 15, NULL, &r), RGPU_ENOSPC);
	alloc_ok(&w, 4 * MiB, 14, NULL, BASE + 56 * MiB, BASE + 56 * MiB, 4 * MiB);
	ip_vaw_fini(&w);
}

static uint64_t reserve_dev_ok(struct ip_vaw *w, uint64_t size, uint64_t align, uint64_t hint,
			       int device)
{
	uint64_t a = 0x5a5a;
	int ret = ip_vaw_reserve(w, size, align, hint, device, &a);
	if (ret != 0)
		fail_msg("reserve(%llu) on device %d failed: %d", (unsigned long long)size, device,
			 ret);
	return a;
}

/*
 * Reservations: first fit in the device's slice; a free hint is taken in any slice, but not
 * across a slice boundary, not in the unused top, not outside the window.
 */
static void test_parts_reserve(void **state)
{
	(void)state;
	struct ip_vaw w;
	const uint64_t P = 16 * MiB;
	uint64_t a = 0x77;

	parts_init(&w, 4);
	assert_int_equal(reserve_dev_ok(&w, 3 * MiB, 0, 0, 2), BASE + 2 * P);
	assert_int_equal(ip_vaw_resv_find(&w, BASE + 2 * P + 3 * MiB)->len, 4 * MiB);
	/* a free hint in another device's slice is the application's choice */
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, BASE + 4 * MiB, 2), BASE + 4 * MiB);
	/* across slices 0 and 1: first fit in device 0's slice instead */
	assert_int_equal(reserve_dev_ok(&w, 4 * MiB, 0, BASE + 14 * MiB, 0), BASE);
	/* in the unused top, outside the window, unaligned: first fit in the device's slice */
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, BASE + 64 * MiB, 3), BASE + 3 * P);
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, BASE + PSIZE, 3), BASE + 3 * P + GRAN);
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, BASE + 40 * MiB + 4096, 2),
			 BASE + 2 * P + 4 * MiB);
	/* a hint ending exactly at the slice's end is inside it */
	assert_int_equal(reserve_dev_ok(&w, 4 * MiB, 0, BASE + 28 * MiB, 0), BASE + 28 * MiB);
	assert_int_equal(ip_vaw_part_of(&w, BASE + 28 * MiB), 1);

	/* alignment, within the slice: slice 1 is [16, 32) MiB, [28, 32) taken by the hint */
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 8 * MiB, 0, 1), BASE + P);
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 8 * MiB, 0, 1), BASE + P + 8 * MiB);
	/* the next 8 MiB boundary is 32 MiB: device 2's, so none */
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 8 * MiB, 0, 1, &a), RGPU_ENOSPC);
	/* the rest of slice 1, [18, 24) and [26, 28) MiB, fills it */
	assert_int_equal(reserve_dev_ok(&w, 6 * MiB, 0, 0, 1), BASE + P + 2 * MiB);
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, 0, 1), BASE + P + 10 * MiB);
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 0, 0, 1, &a), RGPU_ENOSPC);
	struct ip_vaw_res r;
	assert_int_equal(ip_vaw_alloc(&w, 1, 1, NULL, &r), RGPU_ENOSPC);
	/* another device still reserves and allocates */
	assert_int_equal(reserve_dev_ok(&w, 2 * MiB, 0, 0, 0), BASE + 4 * MiB + GRAN);
	alloc_ok(&w, 100, 0, NULL, BASE + 8 * MiB, BASE + 8 * MiB, GRAN);

	/* bad arguments: a device with no slice, more than a slice, size 0, align not pow2 */
	a = 0x77;
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 0, 0, 4, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 0, 0, -1, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 0, BASE + 4 * MiB, 7, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(&w, P + 1, 0, 0, 0, &a), RGPU_ENOSPC);
	assert_int_equal(ip_vaw_reserve(&w, 0, 0, 0, 0, &a), RGPU_EINVAL);
	assert_int_equal(ip_vaw_reserve(&w, 2 * MiB, 3 * MiB, 0, 0, &a), RGPU_EINVAL);
	assert_int_equal(a, 0x77);

	/* given back, its granules are the slice's again */
	assert_int_equal(ip_vaw_unreserve(&w, BASE + P + 2 * MiB, 6 * MiB), 0);
	alloc_ok(&w, 6 * MiB, 1, NULL, BASE + P + 2 * MiB, BASE + P + 2 * MiB, 6 * MiB);
	ip_vaw_fini(&w);

	/* one slice: a hint anywhere in the window, any device */
	parts_init(&w, 1);
	assert_int_equal(reserve_dev_ok(&w, 4 * MiB, 0, BASE + 66 * MiB, 5), BASE + 66 * MiB);
	assert_int_equal(reserve_dev_ok(&w, 4 * MiB, 0, 0, 0), BASE);
	ip_vaw_fini(&w);
}

/*
 * Seeded random allocations and frees of four devices over four slices: every allocation lies
 * wholly in its device's slice, every slab granule is one device's, nothing overlaps, and once
 * all is freed each slice is whole again.
 */
static void test_parts_stress(void **state)
{
	(void)state;
	enum { PLIVE = 1024, POPS = 8000, NG = PSIZE / GRAN };
	static struct live live[PLIVE];
	static int gdev[NG]; /* granule's slab device + 1; 0: no slab seen there */
	struct ip_vaw w;
	size_t nlive = 0;
	unsigned nenospc = 0;

	parts_init(&w, 4);
	memset(gdev, 0, sizeof(gdev));
	rng_state = 0x2545f4914f6cdd1dull;
	for (int op = 0; op < POPS; op++) {
		int do_free =
		    nlive && (nlive == PLIVE || rnd() % 100 < ((op / 1000) % 2 ? 70 : 30));
		if (do_free) {
			size_t k = rnd() % nlive;
			uint64_t ua, us;
			assert_int_equal(ip_vaw_free(&w, live[k].addr, &ua, &us), 0);
			if (us && live[k].size <= IP_VAW_SMALL)
				gdev[(ua - BASE) / GRAN] = 0;
			live[k] = live[--nlive];
			continue;
		}
		struct live a;
		struct ip_vaw_res r;
		a.size = rnd() % 4 ? 1 + rnd() % (64 * KiB) : IP_VAW_SMALL + 1 + rnd() % (5 * MiB);
		a.dev = (int)(rnd() % 4);
		a.owner = NULL;
		int ret = ip_vaw_alloc(&w, a.size, a.dev, NULL, &r);
		if (ret == RGPU_ENOSPC) {
			nenospc++;
			continue;
		}
		assert_int_equal(ret, 0);
		a.addr = r.addr;
		assert_int_equal(ip_vaw_part_of(&w, a.addr), a.dev);
		assert_int_equal(ip_vaw_part_of(&w, a.addr + a.size - 1), a.dev);
		if (a.size <= IP_VAW_SMALL) {
			uint64_t gi = (a.addr - BASE) / GRAN;
			if (r.map_size) {
				assert_int_equal(gdev[gi], 0);
				gdev[gi] = a.dev + 1;
			}
			assert_int_equal(gdev[gi], a.dev + 1);
		}
		live[nlive++] = a;
		if (op % 61 == 0) {
			static struct live sorted[PLIVE];
			memcpy(sorted, live, nlive * sizeof(*live));
			qsort(sorted, nlive, sizeof(*sorted), cmp_u64);
			for (size_t i = 1; i < nlive; i++)
				assert_true(sorted[i - 1].addr + sorted[i - 1].size <=
					    sorted[i].addr);
		}
	}
	assert_true(nenospc > 0);
	while (nlive) {
		uint64_t ua, us;
		assert_int_equal(ip_vaw_free(&w, live[nlive - 1].addr, &ua, &us), 0);
		nlive--;
	}
	assert_int_equal(w.mapped_bytes, 0);
	for (int d = 0; d < 4; d++)
		alloc_ok(&w, 16 * MiB, d, NULL, BASE + (uint64_t)d * 16 * MiB,
			 BASE + (uint64_t)d * 16 * MiB, 16 * MiB);
	ip_vaw_fini(&w);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_args),
	    cmocka_unit_test(test_granule_below_small),
	    T(test_small_packing),
	    T(test_small_fills_slab),
	    T(test_small_hole_reuse),
	    T(test_large_alignment),
	    T(test_fragmentation),
	    T(test_coalesce),
	    T(test_free_slab),
	    T(test_exhaustion),
	    T(test_exhaustion_whole_and_slab),
	    T(test_find),
	    T(test_mapped),
	    T(test_collect),
	    T(test_devices_separate_slabs),
	    T(test_stress),
	    T(test_reserve),
	    T(test_app_maps),
	    cmocka_unit_test(test_parts_init_args),
	    cmocka_unit_test(test_parts_bounds),
	    cmocka_unit_test(test_parts_alloc),
	    cmocka_unit_test(test_parts_separate_slabs),
	    cmocka_unit_test(test_parts_full),
	    cmocka_unit_test(test_parts_reserve),
	    cmocka_unit_test(test_parts_stress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
