/*
 * The device address window (design.md §3): every device address an application sees lies in
 * [base, base + size), chosen by the client and identical on every server.
 */
#ifndef RGPU_WINDOW_H
#define RGPU_WINDOW_H

#include <stdint.h>

#define RGPU_WINDOW_BASE 0x600000000000ull    /* default base */
#define RGPU_WINDOW_SIZE (1ull << 40)          /* default size: 1 TiB */
#define RGPU_GRANULE (2ull << 20)              /* mapping granularity: 2 MiB */
#define RGPU_SUBALLOC_ALIGN 256ull             /* alignment of sub-allocations */

#endif
