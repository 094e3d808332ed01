/*
 * The device address window (design.md §3): every device address an application sees lies in
 * [base, base + size), chosen by the client and identical on every server.
 */
#ifndef RGPU_WINDOW_H
#define RGPU_WINDOW_H

#include <stdint.h>

/*
 * The default base: 32 TiB, 1 TiB long. It must be free in every process that reserves it: a
 * client (mapped PROT_NONE before the application's own mappings grow), a worker (as the hint
 * of cuMemAddressReserve, which the GPU driver honours only where its own VA is free), and
 * both under AddressSanitizer, whose x86-64 layout is fixed: shadow up to 0x10007fff7fff, the
 * primary allocator at [0x600000000000, 0x640000000000). Executables (0x55..-0x56..) and the
 * kernel's mmap area (just under 0x7fffffffffff, growing down, its top randomized over 1 TiB)
 * are far from it. Measured free on the GPU host (gpu-host.md). This is the one place it is
 * written; servers announce it in the handshake and clients take it from there.
 */
#define RGPU_WINDOW_BASE 0x200000000000ull
#define RGPU_WINDOW_SIZE (1ull << 40)          /* default size: 1 TiB */
#define RGPU_GRANULE (2ull << 20)              /* mapping granularity: 2 MiB */
#define RGPU_SUBALLOC_ALIGN 256ull             /* alignment of sub-allocations */

#endif
