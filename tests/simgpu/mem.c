/*
 * Device memory, as host memory: cuMemAlloc, the virtual memory management calls the server
 * uses to place allocations at fixed addresses, pinned and registered host memory, and the
 * copies and sets that touch all of them.
 *
 * Owns the range table, the only authority on which addresses are device memory: a copy,
 * a set or a kernel twin may touch an address only if the table covers its whole range with
 * the access it needs; anything else is CUDA_ERROR_INVALID_VALUE at the call (or
 * CUDA_ERROR_ILLEGAL_ADDRESS if the memory went away before the stream got there), never a
 * fault. VMM reservations are PROT_NONE anonymous mappings at the address asked for;
 * cuMemCreate makes a memfd, cuMemMap maps it (or a granule-aligned part of it, from an offset)
 * MAP_SHARED over the reservation, cuMemSetAccess
 * mprotects it, cuMemUnmap puts PROT_NONE memory back. Operations hold the table's read lock
 * while they touch memory, so an unmap never pulls pages from under a copy.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rgpu/util.h"
#include "sim.h"

struct range {
	uintptr_t base;
	size_t size;
	int kind, prot;
	void *owner; /* ALLOC: the context; VMM: the memhandle; HOST: HOST_ALLOCATED/REGISTERED */
};

struct resv {
	uintptr_t base;
	size_t size;
};

struct memhandle {
	int fd;
	size_t size;
	int dev;
	int refs; /* the handle and each mapping; under the write lock */
};

#define HOST_ALLOCATED ((void *)1)
#define HOST_REGISTERED ((void *)2)

static pthread_rwlock_t rlock = PTHREAD_RWLOCK_INITIALIZER;
static struct range *rv; /* sorted by base, never overlapping */
static size_t rn, rcap;
static struct resv *resv; /* sorted by base */
static size_t resn, rescap;

static size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

/* Index of the first range whose base is above p. */
static size_t upper(uintptr_t p)
{
	size_t lo = 0, hi = rn;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (rv[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct range *find(uintptr_t p)
{
	size_t i = upper(p);

	if (i == 0 || p - rv[i - 1].base >= rv[i - 1].size)
		return NULL;
	return &rv[i - 1];
}

static struct resv *find_resv(uintptr_t p)
{
	for (size_t i = 0; i < resn; i++)
		if (p - resv[i].base < resv[i].size)
			return &resv[i];
	return NULL;
}

/* Under the lock: does the table cover [p, p+n) with at least prot? */
static bool covered(uintptr_t p, size_t n, int prot)
{
	uintptr_t end;

	if (n == 0 || __builtin_add_overflow(p, n, &end))
		return false;
	while (p < end) {
		struct range *r = find(p);
		if (!r || (r->prot & prot) != prot)
			return false;
		p = r->base + r->size;
	}
	return true;
}

static int range_add_locked(uintptr_t base, size_t size, int kind, int prot, void *owner)
{
	size_t i = upper(base);

	if ((i > 0 && base - rv[i - 1].base < rv[i - 1].size) ||
	    (i < rn && rv[i].base - base < size))
		return -1; /* overlaps */
	if (rn == rcap) {
		size_t cap = rcap ? 2 * rcap : 64;
		struct range *v = realloc(rv, cap * sizeof(*v));
		if (!v)
			return -1;
		rv = v;
		rcap = cap;
	}
	memmove(&rv[i + 1], &rv[i], (rn - i) * sizeof(*rv));
	rv[i] = (struct range){base, size, kind, prot, owner};
	rn++;
	return 0;
}

static void range_del_locked(struct range *r)
{
	size_t i = (size_t)(r - rv);

	memmove(&rv[i], &rv[i + 1], (rn - i - 1) * sizeof(*rv));
	rn--;
}

/* sim_range_add() - [base, base+size) becomes device memory. Returns 0, or -1 on overlap. */
int sim_range_add(uintptr_t base, size_t size, int kind, int prot, void *owner)
{
	int r;

	pthread_rwlock_wrlock(&rlock);
	r = range_add_locked(base, size, kind, prot, owner);
	pthread_rwlock_unlock(&rlock);
	return r;
}

/* sim_range_del() - forget the range starting at base. */
void sim_range_del(uintptr_t base)
{
	struct range *r;

	pthread_rwlock_wrlock(&rlock);
	r = find(base);
	if (r && r->base == base)
		range_del_locked(r);
	pthread_rwlock_unlock(&rlock);
}

/* sim_dev_ok() - whether [p, p+n) is known device memory with at least prot access. */
bool sim_dev_ok(uintptr_t p, size_t n, int prot)
{
	bool ok;

	pthread_rwlock_rdlock(&rlock);
	ok = covered(p, n, prot);
	pthread_rwlock_unlock(&rlock);
	return ok;
}

int sim_device_ok(const void *p, size_t n, int write)
{
	if (n == 0)
		return 1;
	return sim_dev_ok((uintptr_t)p, n, write ? SIM_PROT_RW : SIM_PROT_READ);
}

/*
 * How cuMemcpy (unified addressing) sees [p, p+n): 1 device memory, 0 host memory (no part
 * of it known to simgpu), -1 neither (partly known, inside a reservation, or the NULL page).
 */
static int classify(uintptr_t p, size_t n, int prot)
{
	int c;

	if (p < 4096)
		return -1;
	pthread_rwlock_rdlock(&rlock);
	if (covered(p, n, prot)) {
		c = 1;
	} else {
		size_t i = upper(p + n - 1);
		bool touches = i > 0 && rv[i - 1].base + rv[i - 1].size > p;
		c = touches || find_resv(p) || find_resv(p + n - 1) ? -1 : 0;
	}
	pthread_rwlock_unlock(&rlock);
	return c;
}

/* --- cuMemAlloc ------------------------------------------------------------------------- */

static void *map_anon(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct sim_ctx *ctx;
	void *p;
	CUresult r;

	SIM_ENTER();
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if ((r = sim_mem_charge(ctx->dev, bytesize)))
		return r;
	p = map_anon(bytesize);
	if (!p || sim_range_add((uintptr_t)p, bytesize, SIM_RANGE_ALLOC, SIM_PROT_RW, ctx)) {
		if (p)
			munmap(p, bytesize);
		sim_mem_uncharge(ctx->dev, bytesize);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

/* Like the real driver, waits for the device before the memory goes. */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	struct range *rg;
	struct sim_ctx *ctx = NULL;
	size_t size = 0;

	SIM_ENTER();
	sim_device_sync();
	pthread_rwlock_wrlock(&rlock);
	rg = find(dptr);
	if (rg && rg->base == dptr && rg->kind == SIM_RANGE_ALLOC) {
		ctx = rg->owner;
		size = rg->size;
		range_del_locked(rg);
	}
	pthread_rwlock_unlock(&rlock);
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)dptr, size);
	sim_mem_uncharge(ctx->dev, size);
	return CUDA_SUCCESS;
}

/* Called by context teardown: frees ctx's cuMemAlloc allocations. */
void sim_free_ctx_allocs(struct sim_ctx *ctx)
{
	pthread_rwlock_wrlock(&rlock);
	for (size_t i = 0; i < rn;) {
		if (rv[i].kind == SIM_RANGE_ALLOC && rv[i].owner == ctx) {
			munmap((void *)rv[i].base, rv[i].size);
			sim_mem_uncharge(ctx->dev, rv[i].size);
			range_del_locked(&rv[i]);
		} else {
			i++;
		}
	}
	pthread_rwlock_unlock(&rlock);
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct sim_ctx *ctx;
	struct range *rg;
	CUresult r;

	SIM_ENTER();
	if ((r = sim_ctx_current(&ctx)))
		return r;
	pthread_rwlock_rdlock(&rlock);
	rg = find(dptr);
	if (rg) {
		if (pbase)
			*pbase = rg->base;
		if (psize)
			*psize = rg->size;
	}
	pthread_rwlock_unlock(&rlock);
	return rg ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if (ctx->sticky) /* as the driver answers after a sticky fault (measured on the H100) */
		return ctx->sticky;
	*total = sim.mem_total;
	*free = sim.mem_total - sim_mem_used(ctx->dev);
	return CUDA_SUCCESS;
}

/* --- virtual memory management ---------------------------------------------------------- */

static bool pow2(size_t v)
{
	return v && !(v & (v - 1));
}

/* A PROT_NONE reservation of size bytes aligned to align, anywhere. */
static void *reserve_any(size_t size, size_t align)
{
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	uintptr_t p, a;
	size_t total;

	if (__builtin_add_overflow(size, align, &total))
		return NULL;
	p = (uintptr_t)mmap(NULL, total, PROT_NONE, fl, -1, 0);
	if ((void *)p == MAP_FAILED)
		return NULL;
	a = ALIGN_UP(p, align);
	if (a > p)
		munmap((void *)p, a - p);
	if (p + total > a + size)
		munmap((void *)(a + size), p + total - (a + size));
	return (void *)a;
}

/*
 * The hint is honoured exactly when the range is free (MAP_FIXED_NOREPLACE): the server
 * relies on it to put device memory at the same addresses on every host. Otherwise, as the
 * real driver, simgpu picks another address; the caller checks.
 */
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				     CUdeviceptr addr, unsigned long long flags)
{
	const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE;
	size_t align = alignment ? alignment : SIM_GRANULE;
	void *p = NULL;

	SIM_ENTER();
	if (!ptr || !size || flags || size % page_size() || addr % page_size() ||
	    (alignment && !pow2(alignment)))
		return CUDA_ERROR_INVALID_VALUE;
	if (align < page_size())
		align = page_size();
	if (addr && addr % align == 0) {
		p = mmap((void *)addr, size, PROT_NONE, fl, -1, 0);
		if (p == MAP_FAILED) {
			p = NULL;
		} else if (p != (void *)addr) { /* a kernel that ignores NOREPLACE */
			munmap(p, size);
			p = NULL;
		}
		if (!p)
			sim_log("reserve: hint %#llx not free, choosing another address",
				(unsigned long long)addr);
	}
	if (!p)
		p = reserve_any(size, align);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_rwlock_wrlock(&rlock);
	if (resn == rescap) {
		size_t cap = rescap ? 2 * rescap : 8;
		struct resv *v = realloc(resv, cap * sizeof(*v));
		if (!v) {
			pthread_rwlock_unlock(&rlock);
			munmap(p, size);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		resv = v;
		rescap = cap;
	}
	resv[resn++] = (struct resv){(uintptr_t)p, size};
	pthread_rwlock_unlock(&rlock);
	*ptr = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

static void memhandle_put_locked(struct memhandle *mh)
{
	if (--mh->refs)
		return;
	close(mh->fd);
	sim_mem_uncharge(mh->dev, mh->size);
	free(mh);
}

/* Under the write lock: drop the VMM mapping r, leaving PROT_NONE reserved memory. */
static void unmap_locked(struct range *r)
{
	struct memhandle *mh = r->owner;

	mmap((void *)r->base, r->size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	range_del_locked(r);
	memhandle_put_locked(mh);
}

/* Mappings still inside the reservation are dropped with it. */
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	size_t i;

	SIM_ENTER();
	sim_device_sync();
	pthread_rwlock_wrlock(&rlock);
	for (i = 0; i < resn; i++)
		if (resv[i].base == ptr && resv[i].size == size)
			break;
	if (i == resn) {
		pthread_rwlock_unlock(&rlock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t j = 0; j < rn;) {
		if (rv[j].kind == SIM_RANGE_VMM && rv[j].base - ptr < size)
			unmap_locked(&rv[j]); /* the next range moves into slot j */
		else
			j++;
	}
	munmap((void *)ptr, size);
	resv[i] = resv[--resn];
	pthread_rwlock_unlock(&rlock);
	return CUDA_SUCCESS;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED; /* host-located VMM is reported unsupported */
	if (!sim_dev_valid(prop->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	CUresult r;

	SIM_ENTER();
	if (!granularity || !prop ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop)))
		return r;
	*granularity = SIM_GRANULE;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			     const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct memhandle *mh;
	CUresult r;

	SIM_ENTER();
	if (!handle || !prop || flags || !size || size % SIM_GRANULE)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_prop(prop)))
		return r;
	if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((r = sim_mem_charge(prop->location.id, size)))
		return r;
	mh = calloc(1, sizeof(*mh));
	if (!mh)
		goto out_uncharge;
	mh->fd = memfd_create("simgpu", MFD_CLOEXEC);
	if (mh->fd < 0)
		goto out_free;
	if (ftruncate(mh->fd, (off_t)size)) /* sparse: pages exist once touched */
		goto out_close;
	mh->size = size;
	mh->dev = prop->location.id;
	mh->refs = 1;
	if (sim_handle_add(mh, SIM_MEMHANDLE))
		goto out_close;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)mh;
	return CUDA_SUCCESS;

out_close:
	close(mh->fd);
out_free:
	free(mh);
out_uncharge:
	sim_mem_uncharge(prop->location.id, size);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The memory lives on while mappings of it remain. */
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct memhandle *mh = (struct memhandle *)(uintptr_t)handle;

	SIM_ENTER();
	if (!sim_handle_is(mh, SIM_MEMHANDLE))
		return CUDA_ERROR_INVALID_VALUE;
	sim_handle_del(mh);
	pthread_rwlock_wrlock(&rlock);
	memhandle_put_locked(mh);
	pthread_rwlock_unlock(&rlock);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct memhandle *mh = (struct memhandle *)(uintptr_t)handle;
	struct resv *rs;
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	void *p;

	SIM_ENTER();
	if (flags || !size || ptr % SIM_GRANULE || size % SIM_GRANULE || offset % SIM_GRANULE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_handle_is(mh, SIM_MEMHANDLE))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_rwlock_wrlock(&rlock);
	rs = find_resv(ptr);
	if (offset > mh->size || size > mh->size - offset || !rs || ptr + size < ptr ||
	    ptr + size > rs->base + rs->size)
		goto out;
	{
		size_t i = upper(ptr + size - 1);
		if (i > 0 && rv[i - 1].base + rv[i - 1].size > ptr)
			goto out; /* already mapped */
	}
	/* a part of the memory from offset on: the same pages as every other mapping of them */
	p = mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, mh->fd, (off_t)offset);
	if (p == MAP_FAILED) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	/* every mapping starts with no access, until cuMemSetAccess */
	if (range_add_locked(ptr, size, SIM_RANGE_VMM, SIM_PROT_NONE, mh)) {
		mmap((void *)ptr, size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	mh->refs++;
	r = CUDA_SUCCESS;
out:
	pthread_rwlock_unlock(&rlock);
	return r;
}

/*
 * Under the lock: the VMM mappings that exactly tile [ptr, ptr+size), as the index of the
 * first and their count; false if any byte is unmapped or a mapping sticks out.
 */
static bool exact_vmm(uintptr_t ptr, size_t size, size_t *first, size_t *count)
{
	uintptr_t end = ptr + size, p = ptr;
	size_t i;

	if (!size || end < ptr)
		return false;
	i = upper(ptr);
	if (i == 0 || rv[i - 1].base != ptr)
		return false;
	*first = i - 1;
	for (i = i - 1; p < end; i++) {
		if (i >= rn || rv[i].base != p || rv[i].kind != SIM_RANGE_VMM ||
		    rv[i].base + rv[i].size > end)
			return false;
		p += rv[i].size;
	}
	*count = i - *first;
	return true;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	size_t first, count;

	SIM_ENTER();
	sim_device_sync();
	pthread_rwlock_wrlock(&rlock);
	if (!exact_vmm(ptr, size, &first, &count)) {
		pthread_rwlock_unlock(&rlock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	while (count--)
		unmap_locked(&rv[first]);
	pthread_rwlock_unlock(&rlock);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
				size_t count)
{
	size_t first, n;
	int prot = SIM_PROT_NONE;

	SIM_ENTER();
	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		if (!sim_dev_valid(desc[i].location.id))
			return CUDA_ERROR_INVALID_DEVICE;
		switch (desc[i].flags) {
		case CU_MEM_ACCESS_FLAGS_PROT_NONE:
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READ:
			prot |= SIM_PROT_READ;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
			prot |= SIM_PROT_RW;
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	/* all simulated devices share one address space: the widest access wins */
	pthread_rwlock_wrlock(&rlock);
	if (!exact_vmm(ptr, size, &first, &n)) {
		pthread_rwlock_unlock(&rlock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (mprotect((void *)ptr, size,
		     prot == SIM_PROT_RW ? PROT_READ | PROT_WRITE
		     : prot		 ? PROT_READ
					 : PROT_NONE)) {
		pthread_rwlock_unlock(&rlock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = first; i < first + n; i++)
		rv[i].prot = prot;
	pthread_rwlock_unlock(&rlock);
	return CUDA_SUCCESS;
}

/* --- pinned and registered host memory --------------------------------------------------- */

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	struct sim_ctx *ctx;
	void *p;
	CUresult r;

	SIM_ENTER();
	if (!pp || !size ||
	    (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
				 CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	p = map_anon(size);
	if (!p || sim_range_add((uintptr_t)p, size, SIM_RANGE_HOST, SIM_PROT_RW, HOST_ALLOCATED)) {
		if (p)
			munmap(p, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return host_alloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return host_alloc(pp, bytesize, Flags);
}

/* Removes the HOST range at exactly p owned by owner; returns its size or 0. */
static size_t host_del(void *p, void *owner)
{
	struct range *rg;
	size_t size = 0;

	pthread_rwlock_wrlock(&rlock);
	rg = find((uintptr_t)p);
	if (rg && rg->base == (uintptr_t)p && rg->kind == SIM_RANGE_HOST && rg->owner == owner) {
		size = rg->size;
		range_del_locked(rg);
	}
	pthread_rwlock_unlock(&rlock);
	return size;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	size_t size;

	SIM_ENTER();
	sim_device_sync();
	size = host_del(p, HOST_ALLOCATED);
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	munmap(p, size);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
			       CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
	struct sim_ctx *ctx;
	int prot = Flags & CU_MEMHOSTREGISTER_READ_ONLY ? SIM_PROT_READ : SIM_PROT_RW;
	CUresult r;

	SIM_ENTER();
	if (!p || !bytesize || (Flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	if (sim_range_add((uintptr_t)p, bytesize, SIM_RANGE_HOST, prot, HOST_REGISTERED))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	SIM_ENTER();
	sim_device_sync();
	return host_del(p, HOST_REGISTERED) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* Unified addressing: pinned or registered host memory's device address is its host address. */
CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	struct range *rg;
	int host;

	SIM_ENTER();
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_rwlock_rdlock(&rlock);
	rg = find((uintptr_t)p);
	host = rg && rg->kind == SIM_RANGE_HOST;
	pthread_rwlock_unlock(&rlock);
	if (!host)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* --- copies and sets --------------------------------------------------------------------- */

/*
 * sim_copy_run() - run a copy on the stream thread. The memory is checked again under the
 * read lock: CUDA_ERROR_ILLEGAL_ADDRESS if it went away since the copy was queued.
 */
CUresult sim_copy_run(const struct sim_op *op)
{
	const typeof(op->u.copy) *c = &op->u.copy;
	CUresult r = CUDA_SUCCESS;

	pthread_rwlock_rdlock(&rlock);
	if ((c->dst_dev && !covered(c->dst, c->n, SIM_PROT_RW)) ||
	    (c->src_dev && !covered(c->src, c->n, SIM_PROT_READ)))
		r = CUDA_ERROR_ILLEGAL_ADDRESS;
	else
		memmove((void *)c->dst, (const void *)c->src, c->n);
	pthread_rwlock_unlock(&rlock);
	return r;
}

static size_t set_extent(size_t pitch, size_t width, size_t height, unsigned esize)
{
	return (height - 1) * pitch + width * esize;
}

/* sim_set_run() - run a memset on the stream thread, checked like sim_copy_run(). */
CUresult sim_set_run(const struct sim_op *op)
{
	const typeof(op->u.set) *s = &op->u.set;
	CUresult r = CUDA_SUCCESS;

	pthread_rwlock_rdlock(&rlock);
	if (!covered(s->dst, set_extent(s->pitch, s->width, s->height, s->esize), SIM_PROT_RW)) {
		r = CUDA_ERROR_ILLEGAL_ADDRESS;
	} else {
		for (size_t y = 0; y < s->height; y++) {
			unsigned char *row = (unsigned char *)(s->dst + y * s->pitch);
			switch (s->esize) {
			case 1:
				memset(row, (int)s->value, s->width);
				break;
			case 2:
				for (size_t x = 0; x < s->width; x++)
					((uint16_t *)row)[x] = (uint16_t)s->value;
				break;
			default:
				for (size_t x = 0; x < s->width; x++)
					((uint32_t *)row)[x] = s->value;
			}
		}
	}
	pthread_rwlock_unlock(&rlock);
	return r;
}

enum copy_mode {
	SYNC,  /* on the current context's NULL stream, waited for */
	ASYNC, /* on the given stream */
};

/*
 * A copy of n bytes as an operation, checked as every copy function checks it. dd/sd: the
 * destination/source is device memory (checked now, and again when it runs). *out is NULL
 * when there is nothing to copy.
 */
static CUresult copy_op(uintptr_t dst, bool dd, uintptr_t src, bool sd, size_t n,
			struct sim_op **out)
{
	struct sim_op *op;

	*out = NULL;
	if (n == 0)
		return CUDA_SUCCESS;
	if ((dd && !sim_dev_ok(dst, n, SIM_PROT_RW)) ||
	    (sd && !sim_dev_ok(src, n, SIM_PROT_READ)) || (!dd && !dst) || (!sd && !src))
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(SIM_OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.copy.dst = dst;
	op->u.copy.src = src;
	op->u.copy.n = n;
	op->u.copy.dst_dev = dd;
	op->u.copy.src_dev = sd;
	*out = op;
	return CUDA_SUCCESS;
}

/*
 * Queue a copy (copy_op()). A pageable host source of an asynchronous copy is copied at the call,
 * as the real driver stages it, so the caller may reuse its buffer at once. An asynchronous copy
 * into pageable memory is not waited for: the H200 driver returns before the stream gets
 * there too (tests/progs/streams.c relies on it); the bytes land when the stream runs it.
 */
static CUresult copy(uintptr_t dst, bool dd, uintptr_t src, bool sd, size_t n, CUstream hs,
		     enum copy_mode mode)
{
	struct sim_stream *s;
	struct sim_op *op;
	uint64_t seq;
	CUresult r;

	SIM_ENTER();
	if (mode == SYNC) {
		struct sim_ctx *ctx;
		if ((r = sim_ctx_current(&ctx)))
			return r;
		s = ctx->null_stream;
	} else if ((r = sim_stream_get(hs, &s))) {
		return r;
	}
	if ((r = copy_op(dst, dd, src, sd, n, &op)) || !op)
		return r;
	/* a captured copy reads its source when the graph runs, as a memcpy node does */
	if (mode == ASYNC && !sd && !sim_dev_ok(src, n, SIM_PROT_READ) &&
	    !sim_stream_capturing(s)) {
		op->u.copy.owned = malloc(n);
		if (!op->u.copy.owned) {
			sim_op_free(op);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(op->u.copy.owned, (const void *)src, n);
		op->u.copy.src = (uintptr_t)op->u.copy.owned;
	}
	if ((r = sim_enqueue(s, op, &seq)))
		return r;
	return mode == SYNC ? sim_wait_seq(s, seq) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return copy(dst, true, (uintptr_t)src, false, n, NULL, SYNC);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return copy((uintptr_t)dst, false, src, true, n, NULL, SYNC);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	return copy(dst, true, src, true, n, NULL, SYNC);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream hs)
{
	return copy(dst, true, (uintptr_t)src, false, n, hs, ASYNC);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream hs)
{
	return copy((uintptr_t)dst, false, src, true, n, hs, ASYNC);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs)
{
	return copy(dst, true, src, true, n, hs, ASYNC);
}

/* Unified addressing: each side is device memory if simgpu knows it, else host memory. */
static CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs,
			enum copy_mode mode)
{
	int dc, sc;

	SIM_ENTER();
	if (n == 0)
		return copy(dst, true, src, true, 0, hs, mode);
	dc = classify(dst, n, SIM_PROT_RW);
	sc = classify(src, n, SIM_PROT_READ);
	if (dc < 0 || sc < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return copy(dst, dc, src, sc, n, hs, mode);
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return unified(dst, src, ByteCount, NULL, SYNC);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hs)
{
	return unified(dst, src, ByteCount, hs, ASYNC);
}

/*
 * cuPointerGetAttribute, for what the worker asks: whether a module global is a __managed__
 * variable, and a pointer's memory type. Anything else is not simulated.
 */
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	const struct range *rg;
	int kind;

	SIM_ENTER();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_rwlock_rdlock(&rlock);
	rg = find(ptr);
	kind = rg ? rg->kind : 0;
	pthread_rwlock_unlock(&rlock);
	if (!kind)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attribute) {
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned *)data = kind == SIM_RANGE_MANAGED;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = kind == SIM_RANGE_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/*
 * One side of a 2D or 3D copy of w bytes x h rows x d slices at (x, y, z): its first byte, its
 * row and slice pitch, and whether it is device memory (-1: refused). An array's blob is device
 * memory (array.c).
 */
static int side_3d(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr, size_t x,
		   size_t y, size_t z, size_t pitch, size_t height, size_t w, size_t h, size_t d,
		   uintptr_t *at, size_t *rp, size_t *sp)
{
	size_t slice = pitch * height;
	size_t span = (d ? d - 1 : 0) * slice + (h ? h - 1 : 0) * pitch + w;

	*rp = pitch;
	*sp = slice;
	switch (t) {
	case CU_MEMORYTYPE_HOST:
		*at = (uintptr_t)host + z * slice + y * pitch + x;
		return 0;
	case CU_MEMORYTYPE_DEVICE:
		*at = dev + z * slice + y * pitch + x;
		return 1;
	case CU_MEMORYTYPE_UNIFIED:
		*at = dev + z * slice + y * pitch + x;
		return classify(*at, span, SIM_PROT_READ);
	case CU_MEMORYTYPE_ARRAY:
		return sim_array_box(arr, x, y, z, w, h, d, at, rp, sp) ? -1 : 1;
	default:
		return -1;
	}
}

/* Rows and slices one copy each, in stream order. */
static CUresult copy_box(uintptr_t dst, int dd, size_t dp, size_t ds, uintptr_t src, int sd,
			 size_t sp, size_t ss, size_t w, size_t h, size_t d, CUstream hs)
{
	CUresult r = CUDA_SUCCESS;

	for (size_t z = 0; r == CUDA_SUCCESS && z < d; z++)
		for (size_t y = 0; r == CUDA_SUCCESS && y < h; y++)
			r = copy(dst + z * ds + y * dp, dd, src + z * ss + y * sp, sd, w, hs, ASYNC);
	return r;
}

/* Where the two sides of a CUDA_MEMCPY3D lie (side_3d()), checked as cuMemcpy3D checks them. */
struct box {
	uintptr_t src, dst;
	size_t sp, dp, ss, ds;
	int sd, dd;
};

static CUresult box_3d(const CUDA_MEMCPY3D *c, struct box *b)
{
	if (!c || c->srcLOD || c->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	b->sd = side_3d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
			c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c->WidthInBytes, c->Height,
			c->Depth, &b->src, &b->sp, &b->ss);
	b->dd = side_3d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
			c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c->WidthInBytes, c->Height,
			c->Depth, &b->dst, &b->dp, &b->ds);
	if (b->sd < 0 || b->dd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((c->Height > 1 || c->Depth > 1) &&
	    ((c->srcMemoryType != CU_MEMORYTYPE_ARRAY &&
	      b->sp < c->WidthInBytes + c->srcXInBytes) ||
	     (c->dstMemoryType != CU_MEMORYTYPE_ARRAY && b->dp < c->WidthInBytes + c->dstXInBytes)))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult sim_copy3d_ops(const CUDA_MEMCPY3D *c, struct sim_op **out)
{
	struct sim_op *head = NULL, **tail = &head;
	struct box b;
	CUresult r;

	*out = NULL;
	if ((r = box_3d(c, &b)))
		return r;
	for (size_t z = 0; z < c->Depth; z++) {
		for (size_t y = 0; y < c->Height; y++) {
			r = copy_op(b.dst + z * b.ds + y * b.dp, b.dd, b.src + z * b.ss + y * b.sp,
				    b.sd, c->WidthInBytes, tail);
			if (r != CUDA_SUCCESS) {
				while (head) {
					struct sim_op *next = head->next;
					sim_op_free(head);
					head = next;
				}
				return r;
			}
			if (*tail)
				tail = &(*tail)->next;
		}
	}
	*out = head;
	return CUDA_SUCCESS;
}

/*
 * cuMemcpy3DAsync: a copy per row of every slice, in stream order; arrays on either side. A
 * capturing stream gets one memcpy node for the whole copy, as the driver makes.
 */
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream hs)
{
	struct sim_stream *s;
	bool captured;
	struct box b;
	CUresult r;

	SIM_ENTER();
	if ((r = box_3d(c, &b)) || (r = sim_stream_get(hs, &s)))
		return r;
	if ((r = sim_capture_copy3d(s, c, &captured)) || captured)
		return r;
	return copy_box(b.dst, b.dd, b.dp, b.ds, b.src, b.sd, b.sp, b.ss, c->WidthInBytes,
			c->Height, c->Depth, hs);
}

/* cuMemcpy2DAsync: the 3D copy of one slice. */
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream hs)
{
	CUDA_MEMCPY3D t;

	SIM_ENTER();
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	memset(&t, 0, sizeof(t));
	t.srcXInBytes = c->srcXInBytes;
	t.srcY = c->srcY;
	t.srcMemoryType = c->srcMemoryType;
	t.srcHost = c->srcHost;
	t.srcDevice = c->srcDevice;
	t.srcArray = c->srcArray;
	t.srcPitch = c->srcPitch;
	t.dstXInBytes = c->dstXInBytes;
	t.dstY = c->dstY;
	t.dstMemoryType = c->dstMemoryType;
	t.dstHost = c->dstHost;
	t.dstDevice = c->dstDevice;
	t.dstArray = c->dstArray;
	t.dstPitch = c->dstPitch;
	t.WidthInBytes = c->WidthInBytes;
	t.Height = c->Height;
	t.Depth = 1;
	return cuMemcpy3DAsync_v2(&t, hs);
}

CUresult sim_set_op(CUdeviceptr dst, size_t pitch, unsigned value, unsigned esize, size_t width,
		    size_t height, struct sim_op **out)
{
	struct sim_op *op;

	*out = NULL;
	if (dst % esize || (height > 1 && pitch % esize))
		return CUDA_ERROR_INVALID_VALUE;
	if (width == 0 || height == 0)
		return CUDA_SUCCESS;
	if (height > 1 && pitch < width * esize)
		return CUDA_ERROR_INVALID_VALUE;
	if (width > SIZE_MAX / esize ||
	    (height > 1 && pitch > (SIZE_MAX - width * esize) / (height - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_dev_ok(dst, set_extent(pitch, width, height, esize), SIM_PROT_RW))
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(SIM_OP_SET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.set.dst = dst;
	op->u.set.pitch = height > 1 ? pitch : width * esize;
	op->u.set.width = width;
	op->u.set.height = height;
	op->u.set.value = value;
	op->u.set.esize = esize;
	*out = op;
	return CUDA_SUCCESS;
}

static CUresult set(CUdeviceptr dst, size_t pitch, unsigned value, unsigned esize, size_t width,
		    size_t height, CUstream hs, enum copy_mode mode)
{
	struct sim_stream *s;
	struct sim_op *op;
	uint64_t seq;
	CUresult r;

	SIM_ENTER();
	if (mode == SYNC) {
		struct sim_ctx *ctx;
		if ((r = sim_ctx_current(&ctx)))
			return r;
		s = ctx->null_stream;
	} else if ((r = sim_stream_get(hs, &s))) {
		return r;
	}
	if (pitch % esize)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_set_op(dst, pitch, value, esize, width, height, &op)) || !op)
		return r;
	if ((r = sim_enqueue(s, op, &seq)))
		return r;
	return mode == SYNC ? sim_wait_seq(s, seq) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t N)
{
	return set(d, N, uc, 1, N, 1, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t N)
{
	return set(d, N * 2, us, 2, N, 1, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t N)
{
	return set(d, N * 4, ui, 4, N, 1, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t N, CUstream hs)
{
	return set(d, N, uc, 1, N, 1, hs, ASYNC);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t N, CUstream hs)
{
	return set(d, N * 2, us, 2, N, 1, hs, ASYNC);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t N, CUstream hs)
{
	return set(d, N * 4, ui, 4, N, 1, hs, ASYNC);
}

CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char uc, size_t w, size_t h)
{
	return set(d, pitch, uc, 1, w, h, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short us, size_t w,
				  size_t h)
{
	return set(d, pitch, us, 2, w, h, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int ui, size_t w, size_t h)
{
	return set(d, pitch, ui, 4, w, h, NULL, SYNC);
}

CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char uc, size_t w,
				   size_t h, CUstream hs)
{
	return set(d, pitch, uc, 1, w, h, hs, ASYNC);
}

CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short us, size_t w,
				    size_t h, CUstream hs)
{
	return set(d, pitch, us, 2, w, h, hs, ASYNC);
}

CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int ui, size_t w,
				    size_t h, CUstream hs)
{
	return set(d, pitch, ui, 4, w, h, hs, ASYNC);
}
