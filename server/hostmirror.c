/*
 * The worker's side of mapped host memory (interposer/hostmirror.c says what and why): the
 * host area at the same address as in the client, registered with the driver so that a kernel
 * dereferences the host address, and the regions the client made in it. The reader applies
 * the client's writes (MSG_HOST_WRITE) the moment they arrive, as host memory takes a write;
 * before the reply of every call and before every host function the worker sends back what
 * the device changed (MSG_HOST_UPDATE), the span that differs from the shadow both sides
 * agree on. Everything here is under one lock: the reader, the executor and the driver's
 * callback thread all come here.
 */
#define LOG_PREFIX "worker: "
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/log.h"
#include "rgpu/pbdecode.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"

#define MAX_REGIONS (RGPU_HOSTAREA_SIZE / RGPU_HOSTAREA_PAGE)

struct srv_hm {
	pthread_mutex_t lock;      /* the regions, the area's shadow */
	pthread_mutex_t sync_lock; /* one srv_hm_sync at a time (tmp; the order of updates) */
	uint8_t *base, *shadow;
	uint8_t *tmp; /* the span being sent, RGPU_MAX_HOST_WRITE bytes */
	int registered; /* the driver maps the area for the GPU at its own address */
	int nreg;
	struct {
		uint64_t addr, size;
	} reg[MAX_REGIONS];
};

int srv_hm_init(struct srv_worker *w)
{
	uint64_t base = rgpu_hostarea_base(w->cfg->window_base);
	struct srv_hm *h = calloc(1, sizeof(*h));
	const char *why;
	void *p;

	if (!h)
		return RGPU_ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->sync_lock, NULL);
	p = rgpu_map_at(base, RGPU_HOSTAREA_SIZE, PROT_READ | PROT_WRITE, &why);
	if (!p) {
		pr_warn("cannot map the host area 0x%llx+0x%llx (%s): kernels will not reach the "
			"client's mapped host memory",
			(unsigned long long)base, (unsigned long long)RGPU_HOSTAREA_SIZE, why);
	} else if (!(h->shadow = calloc(1, RGPU_HOSTAREA_SIZE)) ||
		   !(h->tmp = malloc(RGPU_MAX_HOST_WRITE))) {
		munmap(p, RGPU_HOSTAREA_SIZE);
	} else {
		h->base = p;
	}
	w->hm = h;
	return 0;
}

void srv_hm_register(struct srv_worker *w)
{
	struct srv_hm *h = w->hm;
	CUdeviceptr d = 0;
	CUresult r;

	if (!h || !h->base)
		return;
	h->registered = 0;
	r = w->drv.cuMemHostRegister(h->base, RGPU_HOSTAREA_SIZE,
				     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuMemHostGetDevicePointer(&d, h->base, 0);
	if (r != CUDA_SUCCESS || d != (CUdeviceptr)(uintptr_t)h->base) {
		pr_warn("the driver does not map the host area for the GPU at its own address (%s, "
			"device address 0x%llx): kernels will not reach the client's mapped host "
			"memory",
			srv_cu_name(&w->drv, r), (unsigned long long)d);
		return;
	}
	h->registered = 1;
}

void srv_hm_unregister(struct srv_worker *w)
{
	struct srv_hm *h = w->hm;

	if (h && h->registered)
		w->drv.cuMemHostUnregister(h->base);
	if (h)
		h->registered = 0;
}

/* The region holding [addr, addr+len), or -1. */
static int region_of(const struct srv_hm *h, uint64_t addr, uint64_t len)
{
	for (int i = 0; i < h->nreg; i++)
		if (addr >= h->reg[i].addr && len <= h->reg[i].size &&
		    addr - h->reg[i].addr <= h->reg[i].size - len)
			return i;
	return -1;
}

static int mirror(struct srv_hm *h, const Rgpu__HostMirror *m)
{
	uint64_t start = (uint64_t)(uintptr_t)h->base, off = m->addr - start;

	if (m->addr < start || off >= RGPU_HOSTAREA_SIZE || off % RGPU_HOSTAREA_PAGE ||
	    m->size == 0 || m->size % RGPU_HOSTAREA_PAGE || m->size > RGPU_MAX_HOST_WRITE ||
	    m->size > RGPU_HOSTAREA_SIZE - off)
		return RGPU_EINVAL;
	if (m->map) {
		for (int i = 0; i < h->nreg; i++)
			if (m->addr < h->reg[i].addr + h->reg[i].size &&
			    h->reg[i].addr < m->addr + m->size)
				return RGPU_EINVAL; /* overlaps a region */
		h->reg[h->nreg].addr = m->addr;
		h->reg[h->nreg].size = m->size;
		h->nreg++;
		return 0;
	}
	for (int i = 0; i < h->nreg; i++) {
		if (h->reg[i].addr != m->addr || h->reg[i].size != m->size)
			continue;
		memset(h->base + off, 0, m->size);
		memset(h->shadow + off, 0, m->size);
		h->reg[i] = h->reg[--h->nreg];
		return 0;
	}
	return RGPU_EINVAL;
}

int srv_hm_frame(struct srv_worker *w, const struct srv_frame *f)
{
	struct srv_hm *h = w->hm;
	int ret = RGPU_EINVAL;

	pthread_mutex_lock(&h->lock);
	if (!h->base) {
		ret = 0; /* no area here (logged at start): the client's kernels will fault */
	} else if (f->hdr.type == RGPU_MSG_HOST_MIRROR) {
		Rgpu__HostMirror *m = RGPU_PB_UNPACK(rgpu__host_mirror, f->hdr.body_len, f->body);
		if (m && !f->hdr.payload_len)
			ret = mirror(h, m);
		if (m)
			rgpu__host_mirror__free_unpacked(m, NULL);
	} else {
		Rgpu__HostWrite *m = RGPU_PB_UNPACK(rgpu__host_write, f->hdr.body_len, f->body);
		if (m && f->hdr.payload_len && region_of(h, m->addr, f->hdr.payload_len) >= 0) {
			uint64_t off = m->addr - (uint64_t)(uintptr_t)h->base;
			rgpu_hostarea_merge(h->base + off, h->shadow + off, f->payload,
					    f->hdr.payload_len);
			ret = 0;
		}
		if (m)
			rgpu__host_write__free_unpacked(m, NULL);
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

/*
 * Sending happens outside h->lock: a send may wait for the client's acknowledgements, which
 * the reader handles, and the reader takes h->lock for the client's writes. The shadow takes
 * the span when it is copied out, so a send that fails (the link is going) loses that update.
 */
void srv_hm_sync(struct srv_worker *w)
{
	struct srv_hm *h = w->hm;

	if (!h || !h->base || !(w->client_caps & RGPU_CAP_HOST_MIRROR))
		return;
	pthread_mutex_lock(&h->sync_lock);
	for (int i = 0;; i++) {
		Rgpu__HostWrite m = RGPU__HOST_WRITE__INIT;
		uint64_t off, lo, hi;
		const uint8_t *a;
		uint8_t *s;

		pthread_mutex_lock(&h->lock);
		if (i >= h->nreg) { /* a region that went meanwhile waits for the next sync */
			pthread_mutex_unlock(&h->lock);
			break;
		}
		off = h->reg[i].addr - (uint64_t)(uintptr_t)h->base;
		a = h->base + off;
		s = h->shadow + off;
		if (!rgpu_hostarea_span(a, s, h->reg[i].size, &lo, &hi)) {
			pthread_mutex_unlock(&h->lock);
			continue;
		}
		/* the device may go on writing: send one copy, and agree on what was sent */
		memcpy(h->tmp, a + lo, hi - lo);
		memcpy(s + lo, h->tmp, hi - lo);
		m.addr = h->reg[i].addr + lo;
		pthread_mutex_unlock(&h->lock);
		if (srv_send(w, RGPU_MSG_HOST_UPDATE, 0, 0, &m.base, h->tmp, hi - lo))
			break;
	}
	pthread_mutex_unlock(&h->sync_lock);
}
