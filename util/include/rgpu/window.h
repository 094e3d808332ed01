/*
 * The device address window (design.md §3): every device address an application sees lies in
 * [base, base + size), chosen by the client and identical on every server.
 */
#ifndef RGPU_WINDOW_H
#define RGPU_WINDOW_H

#include <stdint.h>
#include <string.h>

/*
 * The default base: 32 TiB, 16 TiB long. It must be free in every process that reserves it: a
 * client (mapped PROT_NONE before the application's own mappings grow), a worker (as the hint
 * of cuMemAddressReserve, which the GPU driver honours only where its own VA is free), and
 * both under AddressSanitizer, whose x86-64 layout is fixed: shadow up to 0x10007fff7fff, the
 * primary allocator at [0x600000000000, 0x640000000000). Executables (0x55..-0x56..) and the
 * kernel's mmap area (just under 0x7fffffffffff, growing down, its top randomized over 1 TiB)
 * are far from it. Measured free on the GPU host (gpu-host.md). This is the one place it is
 * written; servers announce it in the handshake and clients take it from there.
 */
#define RGPU_WINDOW_BASE 0x200000000000ull
/* 16 TiB: PyTorch's expandable segments reserve 1.125 times the GPU's memory each, one per
 * stream and pool (158 GiB on an H200: 1 TiB held six, and its training ran out of it) */
#define RGPU_WINDOW_SIZE (16ull << 40)         /* default size: 16 TiB */
#define RGPU_GRANULE (2ull << 20)              /* mapping granularity: 2 MiB */
#define RGPU_SUBALLOC_ALIGN 256ull             /* alignment of sub-allocations */

/*
 * The host area: small mapped pinned host allocations (cuMemHostAlloc), at the same address in
 * the client and in the worker, whose driver maps its copy for the GPU (unified addressing: a
 * kernel dereferences the host address). It lies RGPU_HOSTAREA_GAP below the window's base,
 * in the same free part of the address space; RGPU_HOSTAREA_PAGE is its allocation unit, and
 * one region holds at most RGPU_MAX_HOST_WRITE bytes (rgpu/frame.h).
 */
#define RGPU_HOSTAREA_GAP (1ull << 30)
#define RGPU_HOSTAREA_SIZE (1ull << 20)
#define RGPU_HOSTAREA_PAGE 4096ull

/*
 * rgpu_hostarea_span() - where a region's live bytes differ from its shadow: 0 when nowhere,
 * else 1 with [*lo, *hi) the span from the first to the last byte that differs.
 */
static inline int rgpu_hostarea_span(const uint8_t *live, const uint8_t *shadow, uint64_t n,
				     uint64_t *lo, uint64_t *hi)
{
	uint64_t l = 0, h = n;

	if (!memcmp(live, shadow, n))
		return 0;
	while (l < n && live[l] == shadow[l])
		l++;
	while (h > l && live[h - 1] == shadow[h - 1])
		h--;
	*lo = l;
	*hi = h;
	return 1;
}

/*
 * rgpu_hostarea_merge() - take the other side's span into a region: only the bytes it changed
 * (those that differ from the shadow both sides agreed on) replace this side's copy, so that
 * this side's own writes since then, elsewhere in the span, are kept (and sent later).
 */
static inline void rgpu_hostarea_merge(uint8_t *live, uint8_t *shadow, const uint8_t *in,
				       uint64_t len)
{
	for (uint64_t j = 0; j < len; j++)
		if (in[j] != shadow[j])
			live[j] = shadow[j] = in[j];
}

static inline uint64_t rgpu_hostarea_base(uint64_t window_base)
{
	return window_base > RGPU_HOSTAREA_GAP ? window_base - RGPU_HOSTAREA_GAP : 0;
}

#endif
