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
	/* taken in with its effect, as one step for a checkpoint (srv_hm_save) */
	atomic_fetch_add(&w->rx_seq, 1);
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

/*
 * A checkpoint's copy of the area: u32 LE count of regions, then per region its address and
 * size (u64 LE), then per region its bytes and its shadow's. A restored job's area takes it
 * as it is, so that both sides' differences from the shadow go on as before.
 */
int srv_hm_save(struct srv_worker *w, uint8_t **buf, size_t *len, uint64_t *received)
{
	struct srv_hm *h = w->hm;
	size_t n = 4, off;
	uint8_t *b;

	pthread_mutex_lock(&h->lock);
	*received = atomic_load(&w->rx_seq);
	for (int i = 0; h->base && i < h->nreg; i++)
		n += 16 + 2 * h->reg[i].size;
	b = malloc(n);
	if (!b) {
		pthread_mutex_unlock(&h->lock);
		return RGPU_ENOMEM;
	}
	wr_le32(b, h->base ? (uint32_t)h->nreg : 0);
	off = 4;
	for (int i = 0; h->base && i < h->nreg; i++) {
		wr_le64(b + off, h->reg[i].addr);
		wr_le64(b + off + 8, h->reg[i].size);
		off += 16;
	}
	for (int i = 0; h->base && i < h->nreg; i++) {
		uint64_t o = h->reg[i].addr - (uint64_t)(uintptr_t)h->base;
		memcpy(b + off, h->base + o, h->reg[i].size);
		memcpy(b + off + h->reg[i].size, h->shadow + o, h->reg[i].size);
		off += 2 * h->reg[i].size;
	}
	pthread_mutex_unlock(&h->lock);
	*buf = b;
	*len = n;
	return 0;
}

int srv_hm_load(struct srv_worker *w, const uint8_t *buf, size_t len)
{
	struct srv_hm *h = w->hm;
	uint64_t start, need = 4;
	uint32_t nreg;
	size_t off = 4;

	if (len < 4)
		return RGPU_ECORRUPT;
	nreg = rd_le32(buf);
	if (nreg > MAX_REGIONS || len < 4 + 16ull * nreg)
		return RGPU_ECORRUPT;
	if (nreg && (!h || !h->base))
		return RGPU_EUNSUPPORTED; /* this worker has no area (logged at its start) */
	start = h && h->base ? (uint64_t)(uintptr_t)h->base : 0;
	for (uint32_t i = 0; i < nreg; i++) {
		uint64_t a = rd_le64(buf + 4 + 16 * i), sz = rd_le64(buf + 12 + 16 * i);
		if (a < start || a - start >= RGPU_HOSTAREA_SIZE || sz == 0 ||
		    sz > RGPU_HOSTAREA_SIZE - (a - start) || (a - start) % RGPU_HOSTAREA_PAGE)
			return RGPU_ECORRUPT;
		need += 16 + 2 * sz;
	}
	if (need != len)
		return RGPU_ECORRUPT;
	if (!nreg)
		return 0;
	pthread_mutex_lock(&h->lock);
	off = 4 + 16 * (size_t)nreg;
	h->nreg = 0;
	for (uint32_t i = 0; i < nreg; i++) {
		uint64_t a = rd_le64(buf + 4 + 16 * i), sz = rd_le64(buf + 12 + 16 * i);
		h->reg[h->nreg].addr = a;
		h->reg[h->nreg].size = sz;
		h->nreg++;
		memcpy(h->base + (a - start), buf + off, sz);
		memcpy(h->shadow + (a - start), buf + off + sz, sz);
		off += 2 * sz;
	}
	pthread_mutex_unlock(&h->lock);
	return 0;
}
