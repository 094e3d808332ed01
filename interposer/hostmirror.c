/*
 * Mapped pinned host memory that kernels dereference (docs/architecture.md, "Mapped host
 * memory"). With unified addressing a pinned host buffer's device address is its host address,
 * and programs use that: zero-copy results, flags a kernel polls (XLA's GPU timer spins a
 * kernel on a host semaphore until the host releases it). A GPU on another machine cannot
 * reach this process's memory, so small cuMemHostAlloc allocations are placed in the host
 * area, a range at the same address in this process and in the worker, whose driver maps its
 * copy for the GPU. The two copies are kept equal at the points where CUDA lets either side
 * see the other's writes:
 *
 * - a host write reaches the worker before any later request: before each frame it queues,
 *   the interposer compares every region with its shadow (what both sides last agreed on) and
 *   sends the changed span as MSG_HOST_WRITE, which the worker's reader applies at once;
 * - a device write reaches this process before the reply of the call that waited for it, and
 *   before a host function: the worker sends MSG_HOST_UPDATE the same way (server/hostmirror.c).
 *
 * A host thread that busy-waits on a device write without calling CUDA does not see it (no
 * frame goes back and forth); neither side's write is seen while the other holds none. The
 * area is small (RGPU_HOSTAREA_SIZE), one region at most RGPU_MAX_HOST_WRITE bytes, and
 * mirrored bytes at most RGPU_HOST_MIRROR_BYTES (environment, default 256 KiB): every frame
 * costs a comparison of them. Larger pinned allocations stay plain client memory, as before.
 */
#define LOG_PREFIX "rgpu: "
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "session_state.h"

#define NPAGES (RGPU_HOSTAREA_SIZE / RGPU_HOSTAREA_PAGE)
#define MAX_REGIONS NPAGES
#define DEFAULT_BUDGET (256u << 10)

struct hm_region {
	uint64_t addr, size;
};

static struct {
	pthread_mutex_t lock; /* everything below; taken before S.q_lock, never after */
	int state;	      /* 0 not tried, 1 usable, -1 unavailable */
	uint8_t *base;	      /* the area in this process */
	uint8_t *shadow;      /* what both sides last agreed on, page for page */
	uint64_t budget, used;
	uint8_t page_used[NPAGES];
	struct hm_region reg[MAX_REGIONS];
	int nreg;
	_Atomic int active; /* nreg != 0: the frame path's fast test */
} H = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Reserve the area in this process once: 0, or -1 when it cannot be had (logged once). */
static int area_ready_locked(void)
{
	uint64_t base;
	void *p;
	const char *e, *why;

	if (H.state)
		return H.state > 0 ? 0 : -1;
	H.state = -1;
	if (!(ip.server_caps & RGPU_CAP_HOST_MIRROR)) {
		pr_info("the GPU server does not mirror host memory: kernels cannot dereference "
			"pinned host memory");
		return -1;
	}
	if (ip_multi_server()) {
		/* one host area, but one worker per server to mirror it in: not built yet */
		pr_info("devices of several servers: kernels cannot dereference pinned host memory");
		return -1;
	}
	e = getenv("RGPU_HOST_MIRROR_BYTES");
	H.budget = e && *e ? strtoull(e, NULL, 0) : DEFAULT_BUDGET;
	if (H.budget == 0)
		return -1;
	base = rgpu_hostarea_base(ip.vaw.base);
	p = rgpu_map_at(base, RGPU_HOSTAREA_SIZE, PROT_READ | PROT_WRITE, &why);
	if (!p) {
		pr_warn("cannot map the host area 0x%llx+0x%llx in this process (%s): kernels "
			"cannot dereference pinned host memory",
			(unsigned long long)base, (unsigned long long)RGPU_HOSTAREA_SIZE, why);
		return -1;
	}
	H.shadow = calloc(1, RGPU_HOSTAREA_SIZE);
	if (!H.shadow) {
		munmap(p, RGPU_HOSTAREA_SIZE);
		return -1;
	}
	H.base = p;
	H.state = 1;
	return 0;
}

static int region_find(uint64_t addr)
{
	for (int i = 0; i < H.nreg; i++)
		if (H.reg[i].addr == addr)
			return i;
	return -1;
}

static CUresult send_mirror(uint64_t addr, uint64_t size, int map)
{
	Rgpu__HostMirror m = RGPU__HOST_MIRROR__INIT;

	m.addr = addr;
	m.size = size;
	m.map = map;
	/* urgent: under H.lock, never wait for acknowledgements the receiver may be holding up */
	if (ip_link_enqueue(RGPU_MSG_HOST_MIRROR, &m.base, NULL, 0, 1, NULL, NULL))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

void *ip_hm_alloc(size_t size)
{
	uint64_t pages = (size + RGPU_HOSTAREA_PAGE - 1) / RGPU_HOSTAREA_PAGE, run = 0, first = 0;
	void *p = NULL;

	if (size == 0 || size > RGPU_MAX_HOST_WRITE)
		return NULL;
	pthread_mutex_lock(&H.lock);
	if (area_ready_locked() || H.used + pages * RGPU_HOSTAREA_PAGE > H.budget)
		goto out;
	for (uint64_t i = 0; i < NPAGES && run < pages; i++) {
		if (H.page_used[i]) {
			run = 0;
			continue;
		}
		if (!run++)
			first = i;
	}
	if (run < pages)
		goto out;
	p = H.base + first * RGPU_HOSTAREA_PAGE;
	if (send_mirror((uint64_t)(uintptr_t)p, pages * RGPU_HOSTAREA_PAGE, 1) != CUDA_SUCCESS) {
		p = NULL;
		goto out;
	}
	memset(H.page_used + first, 1, pages);
	H.reg[H.nreg].addr = (uint64_t)(uintptr_t)p;
	H.reg[H.nreg].size = pages * RGPU_HOSTAREA_PAGE;
	H.nreg++;
	atomic_store(&H.active, 1);
	H.used += pages * RGPU_HOSTAREA_PAGE;
out:
	pthread_mutex_unlock(&H.lock);
	return p;
}

int ip_hm_free(void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p, size, first;
	int i;

	pthread_mutex_lock(&H.lock);
	i = H.state > 0 ? region_find(a) : -1;
	if (i < 0) {
		pthread_mutex_unlock(&H.lock);
		return 0;
	}
	size = H.reg[i].size;
	first = (a - (uint64_t)(uintptr_t)H.base) / RGPU_HOSTAREA_PAGE;
	/* both sides zero it: the next region there starts as fresh memory does */
	send_mirror(a, size, 0);
	memset(p, 0, size);
	memset(H.shadow + (a - (uint64_t)(uintptr_t)H.base), 0, size);
	memset(H.page_used + first, 0, size / RGPU_HOSTAREA_PAGE);
	H.reg[i] = H.reg[--H.nreg];
	atomic_store(&H.active, H.nreg != 0);
	H.used -= size;
	pthread_mutex_unlock(&H.lock);
	return 1;
}

int ip_hm_contains(const void *p)
{
	const uint8_t *b = H.base; /* set once, before any region exists */

	return b && (const uint8_t *)p >= b && (const uint8_t *)p < b + RGPU_HOSTAREA_SIZE;
}

void ip_hm_push(void)
{
	if (!atomic_load_explicit(&H.active, memory_order_relaxed))
		return;
	pthread_mutex_lock(&H.lock);
	for (int i = 0; i < H.nreg; i++) {
		uint64_t off = H.reg[i].addr - (uint64_t)(uintptr_t)H.base, lo, hi;
		Rgpu__HostWrite m = RGPU__HOST_WRITE__INIT;
		if (!rgpu_hostarea_span(H.base + off, H.shadow + off, H.reg[i].size, &lo, &hi))
			continue;
		memcpy(H.shadow + off + lo, H.base + off + lo, hi - lo);
		m.addr = H.reg[i].addr + lo;
		/* the payload (at most 64 KiB, IP_INLINE_MAX) is copied into the frame */
		if (ip_link_enqueue(RGPU_MSG_HOST_WRITE, &m.base, H.shadow + off + lo, hi - lo, 1,
				    NULL, NULL))
			break; /* the session is dead or out of memory: the caller finds out */
	}
	pthread_mutex_unlock(&H.lock);
}

int ip_hm_on_update(uint64_t addr, const uint8_t *bytes, uint64_t len)
{
	int ok = 0;

	pthread_mutex_lock(&H.lock);
	for (int i = 0; i < H.nreg && H.state > 0; i++) {
		const struct hm_region *r = &H.reg[i];
		if (addr >= r->addr && len <= r->size && addr - r->addr <= r->size - len) {
			uint64_t off = addr - (uint64_t)(uintptr_t)H.base;
			rgpu_hostarea_merge(H.base + off, H.shadow + off, bytes, len);
			ok = 1;
			break;
		}
	}
	pthread_mutex_unlock(&H.lock);
	/* a region freed since the worker sent it: nothing to keep */
	if (!ok)
		pr_debug("device write to 0x%llx (%llu bytes) outside any mirrored region: dropped",
			 (unsigned long long)addr, (unsigned long long)len);
	return 0;
}
