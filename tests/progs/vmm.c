/*
 * The application-visible virtual memory API through the driver (cuMemAddressReserve,
 * cuMemCreate, cuMemMap, cuMemSetAccess, ...), as JAX, PyTorch's expandable segments and NCCL
 * use it:
 *   1. two physical allocations mapped back to back in one reservation, access set over both
 *      at once, a kernel over the whole range, patterned data copied back and checked, pointer
 *      attributes, cuMemGetAddressRange, cuMemGetAccess, cuMemRetainAllocationHandle and the
 *      properties of a handle;
 *   2. every misuse the driver documents an error for that rgpu checks itself;
 *   3. one allocation unmapped and mapped again at another reserved address, with part of the
 *      other beside it (the same memory mapped twice), its data intact; one unmap over both;
 *   4. a handle released while mapped, which lives on until its last unmap;
 *   5. the pattern of PyTorch's expandable segments: one large reservation, pieces mapped into
 *      it one after another (some handles kept, some released at once), the kernel over the
 *      growing whole each time, then unmapped from the end.
 * Runs unchanged natively and through rgpu (tests/e2e/with_server.sh also compares the state
 * logs and replays the job's log on a fresh worker).
 */
#include "common.h"

#define MiB (1ull << 20)

static CUfunction fill;
static CUdevice dev;

/* The pattern fill_u32 writes (tests/progs/kernels.cu). */
static unsigned want_at(unsigned seed, unsigned long long i)
{
	return seed ^ (unsigned)(i * 2654435761u);
}

static void fill_range(CUdeviceptr p, size_t bytes, unsigned seed)
{
	unsigned long long n = bytes / 4;
	void *args[] = {&p, &seed, &n};

	CHECK(cuLaunchKernel(fill, 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

/* Every word of [p, p+bytes) is word first+i of the pattern of seed. */
static void check_range(CUdeviceptr p, size_t bytes, unsigned seed, unsigned long long first)
{
	unsigned *h = malloc(bytes);

	EXPECT(h != NULL, "out of memory");
	CHECK(cuMemcpyDtoH(h, p, bytes));
	for (size_t i = 0; i < bytes / 4; i++)
		EXPECT(h[i] == want_at(seed, first + i), "word %zu at 0x%llx = 0x%x, want 0x%x", i,
		       (unsigned long long)p, h[i], want_at(seed, first + i));
	free(h);
}

static CUmemAllocationProp device_prop(void)
{
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	return prop;
}

static void set_rw(CUdeviceptr p, size_t size)
{
	CUmemAccessDesc acc;

	memset(&acc, 0, sizeof(acc));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = dev;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK(cuMemSetAccess(p, size, &acc, 1));
}

/* PyTorch's expandable segments: a large reservation mapped piece by piece as it grows. */
static void expandable(size_t g)
{
	enum { PAGES = 8 };
	const size_t seg = 2 * g, reserve = 256 * g;
	CUmemAllocationProp prop = device_prop();
	CUmemGenericAllocationHandle kept[PAGES] = {0};
	CUdeviceptr base, rb;
	size_t rs;

	CHECK(cuMemAddressReserve(&base, reserve, 0, 0, 0));
	for (int n = 1; n <= PAGES; n++) {
		CUmemGenericAllocationHandle h;
		CUdeviceptr at = base + (n - 1) * seg;

		CHECK(cuMemCreate(&h, seg, &prop, 0));
		CHECK(cuMemMap(at, seg, 0, h, 0));
		set_rw(at, seg);
		if (n % 2)
			CHECK(cuMemRelease(h)); /* the mapping keeps it (cuda.core does this) */
		else
			kept[n - 1] = h; /* PyTorch keeps it until it unmaps */
		CHECK(cuCtxSynchronize());
		/* the whole segment so far, one kernel, one copy back */
		fill_range(base, n * seg, 100 + n);
		check_range(base, n * seg, 100 + n, 0);
		CHECK(cuMemGetAddressRange(&rb, &rs, at + 12345));
		EXPECT(rb == at && rs == seg, "range of page %d: 0x%llx + %zu", n - 1,
		       (unsigned long long)rb, rs);
	}
	/* shrink from the end: the data below stays */
	for (int n = PAGES; n >= 1; n--) {
		CUdeviceptr at = base + (n - 1) * seg;

		CHECK(cuMemUnmap(at, seg));
		if (kept[n - 1])
			CHECK(cuMemRelease(kept[n - 1]));
		if (n > 1)
			check_range(base + (n - 2) * seg, seg, 100 + PAGES, (n - 2) * seg / 4);
		CHECK(cuCtxSynchronize());
	}
	CHECK(cuMemAddressFree(base, reserve));
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUmemAllocationProp prop, got;
	CUmemGenericAllocationHandle h1, h2, hr, bad;
	CUmemAccessDesc acc;
	CUmemLocation loc;
	CUdeviceptr va, va2, other, base, dbuf, p;
	unsigned long long flags;
	size_t g, grec, size;
	unsigned seed = 0x5eed;

	CHECK(cuCtxGetDevice(&dev));
	CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
	prop = device_prop();
	CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	EXPECT(g == 2 * MiB && grec == 2 * MiB, "granularity %zu, recommended %zu", g, grec);

	/* ---- 1. two allocations back to back, one kernel over both ------------------------- */
	CHECK(cuMemAddressReserve(&va, 8 * g, g, 0, 0));
	EXPECT(va % g == 0, "reservation at 0x%llx", (unsigned long long)va);
	CHECK(cuMemCreate(&h1, 2 * g, &prop, 0));
	CHECK(cuMemCreate(&h2, 2 * g, &prop, 0));
	EXPECT(h1 != h2, "two handles alike");
	CHECK(cuMemMap(va, 2 * g, 0, h1, 0));
	CHECK(cuMemMap(va + 2 * g, 2 * g, 0, h2, 0));
	set_rw(va, 4 * g);	   /* one call over both mappings */
	CHECK(cuCtxSynchronize()); /* through rgpu: the state logs are compared here */
	memset(&loc, 0, sizeof(loc));
	loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
	loc.id = dev;
	CHECK(cuMemGetAccess(&flags, &loc, va + 3 * g + 8));
	EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access 0x%llx", flags);

	fill_range(va, 4 * g, seed);
	check_range(va, 4 * g, seed, 0);
	/* copies across the seam, to and from ordinary device memory */
	CHECK(cuMemAlloc(&dbuf, 64 * 1024));
	CHECK(cuMemcpyDtoD(dbuf, va + 2 * g - 32 * 1024, 64 * 1024));
	check_range(dbuf, 64 * 1024, seed, (2 * g - 32 * 1024) / 4);
	CHECK(cuMemsetD32(va + 2 * g - 8, 0xfeedf00d, 4));
	{
		unsigned w[4];
		CHECK(cuMemcpyDtoH(w, va + 2 * g - 8, sizeof(w)));
		for (int i = 0; i < 4; i++)
			EXPECT(w[i] == 0xfeedf00d, "word %d across the seam = 0x%x", i, w[i]);
	}
	fill_range(va, 4 * g, seed); /* the pattern back */

	/* what the pointer is: device memory of the device, its range the mapping */
	p = va + 2 * g + 4096;
	{
		unsigned type = 0, mapped = 0;
		int ordinal = -1;
		CUdeviceptr start = 0, dptr = 0;
		size_t rsize = 0;

		CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
		EXPECT(type == CU_MEMORYTYPE_DEVICE, "memory type %u", type);
		CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
		EXPECT(ordinal == dev, "device ordinal %d", ordinal);
		CHECK(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p));
		EXPECT(dptr == p, "device pointer 0x%llx", (unsigned long long)dptr);
		CHECK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p));
		EXPECT(mapped == 1, "mapped %u", mapped);
		CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
		CHECK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p));
		/* the whole reservation, as the H100's driver answers */
		EXPECT(start == va && rsize == 8 * g, "range 0x%llx + %zu", (unsigned long long)start,
		       rsize);
	}
	/* cuMemGetAddressRange names the mapping (both measured on the H100) */
	CHECK(cuMemGetAddressRange(&base, &size, p));
	EXPECT(base == va + 2 * g && size == 2 * g, "address range 0x%llx + %zu",
	       (unsigned long long)base, size);
	CHECK(cuMemGetAddressRange(&base, &size, va + 17));
	EXPECT(base == va && size == 2 * g, "address range 0x%llx + %zu", (unsigned long long)base,
	       size);
	/* the handle of the memory at an address: the one it was mapped with */
	CHECK(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + 3 * g)));
	EXPECT(hr == h2, "retained handle 0x%llx, mapped 0x%llx", (unsigned long long)hr,
	       (unsigned long long)h2);
	CHECK(cuMemRelease(hr));
	CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h1));
	EXPECT(got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
		   got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == dev,
	       "properties type %d location %d/%d", (int)got.type, (int)got.location.type,
	       got.location.id);

	/* ---- 2. misuse --------------------------------------------------------------------- */
	/*
	 * Unmapping reserved VA that holds no mapping is nothing to do: CUDA_SUCCESS, as the
	 * H100's driver answers. Part of a mapping is refused.
	 */
	EXPECT_RESULT(cuMemUnmap(va + 4 * g, g), CUDA_SUCCESS);
	EXPECT_RESULT(cuMemUnmap(va, g), CUDA_ERROR_INVALID_VALUE);
	/* freeing a reservation still mapped, or by another size */
	EXPECT_RESULT(cuMemAddressFree(va, 8 * g), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemAddressFree(va, 4 * g), CUDA_ERROR_INVALID_VALUE);
	/* mapping over a mapping, more than the memory (the H100: not supported), with flags,
	 * unaligned */
	EXPECT_RESULT(cuMemMap(va + g, 2 * g, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemMap(va + 4 * g, 4 * g, 0, h1, 0), CUDA_ERROR_NOT_SUPPORTED);
	EXPECT_RESULT(cuMemMap(va + 4 * g, g, 0, h1, 1), CUDA_ERROR_INVALID_VALUE);
	/* unaligned and part of the allocation: the H100 says not supported (extent first) */
	EXPECT_RESULT(cuMemMap(va + 4 * g + 4096, g, 0, h1, 0), CUDA_ERROR_NOT_SUPPORTED);
	EXPECT_RESULT(cuMemMap(va + 4 * g + 4096, 2 * g, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);
	/* physical memory of no granule multiple, with flags, of a device that does not exist */
	EXPECT_RESULT(cuMemCreate(&bad, g + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemCreate(&bad, g, &prop, 1), CUDA_ERROR_INVALID_VALUE);
	got = prop;
	got.location.id = 4096;
	EXPECT_RESULT(cuMemCreate(&bad, g, &got, 0), CUDA_ERROR_INVALID_DEVICE);
	/* access, and the handle, of what is not mapped */
	memset(&acc, 0, sizeof(acc));
	acc.location = loc;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	EXPECT_RESULT(cuMemSetAccess(va + 4 * g, g, &acc, 1), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemGetAccess(&flags, &loc, va + 4 * g), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + 4 * g)),
		      CUDA_ERROR_INVALID_VALUE);
	/* reservations of 0 bytes, with flags, with an alignment not a power of two */
	EXPECT_RESULT(cuMemAddressReserve(&other, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemAddressReserve(&other, g, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
	EXPECT_RESULT(cuMemAddressReserve(&other, g, 3 * g, 0, 0), CUDA_ERROR_INVALID_VALUE);
	/* a granularity that is neither minimum nor recommended */
	EXPECT_RESULT(
	    cuMemGetAllocationGranularity(&size, &prop, (CUmemAllocationGranularity_flags)7),
	    CUDA_ERROR_INVALID_VALUE);
	/* nothing above changed the memory */
	check_range(va, 4 * g, seed, 0);

	/* ---- 3. unmapped and mapped again elsewhere ---------------------------------------- */
	CHECK(cuMemAddressReserve(&va2, 6 * g, 0, va + 64 * g, 0)); /* a hint, maybe honoured */
	CHECK(cuMemUnmap(va + 2 * g, 2 * g));
	{
		unsigned w;
		EXPECT_RESULT(cuMemcpyDtoH(&w, va + 2 * g, 4), CUDA_ERROR_INVALID_VALUE);
	}
	CHECK(cuMemMap(va2 + g, 2 * g, 0, h2, 0));
	/* part of an allocation: the H100's driver refuses it with CUDA_ERROR_NOT_SUPPORTED */
	EXPECT_RESULT(cuMemMap(va2 + 3 * g, g, 0, h1, 0), CUDA_ERROR_NOT_SUPPORTED);
	CHECK(cuMemMap(va2 + 3 * g, 2 * g, 0, h1, 0)); /* the whole of h1, mapped twice now */
	set_rw(va2 + g, 4 * g);
	CHECK(cuCtxSynchronize());
	check_range(va2 + g, 2 * g, seed, 2 * g / 4); /* h2 kept its data */
	check_range(va2 + 3 * g, g, seed, 0);	      /* h1 seen through its second mapping */
	CHECK(cuMemsetD32(va2 + 3 * g, 0x12345678, 4));
	{
		unsigned w[4];
		CHECK(cuMemcpyDtoH(w, va, sizeof(w))); /* ...and written through it */
		for (int i = 0; i < 4; i++)
			EXPECT(w[i] == 0x12345678, "aliased word %d = 0x%x", i, w[i]);
	}
	CHECK(cuMemUnmap(va2 + g, 4 * g)); /* two mappings in one call */

	/* ---- 4. a handle released while mapped -------------------------------------------- */
	CHECK(cuMemRelease(h1));
	check_range(va + 4 * 4, 2 * g - 16, seed, 4); /* still mapped, still there */
	CHECK(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + g)));
	EXPECT(hr == h1, "retained 0x%llx after the release, mapped 0x%llx", (unsigned long long)hr,
	       (unsigned long long)h1);
	CHECK(cuMemRelease(hr));
	CHECK(cuMemUnmap(va, 2 * g)); /* its last mapping: the memory goes */
	CHECK(cuMemRelease(h2));
	CHECK(cuMemAddressFree(va2, 6 * g));
	CHECK(cuMemAddressFree(va, 8 * g));

	/* ---- 5. PyTorch's expandable segments ---------------------------------------------- */
	expandable(g);

	CHECK(cuMemFree(dbuf));
	CHECK(cuCtxSynchronize());
	CHECK(cuModuleUnload(mod));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("vmm: reservations, mappings, access, remapping and expandable segments OK\n");
	return 0;
}
