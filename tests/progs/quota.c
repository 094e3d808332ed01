/*
 * Device memory as a tenant's quota sees it, one step at a time (tests/e2e/quota.sh). Every
 * step says what it did; the program exits 1 at the first step whose result is not the one
 * asked for. Allocations are filled with a pattern and checked when freed, so memory that was
 * granted is real memory.
 *
 * Usage: quota STEP...
 *   a:MIB     cuMemAlloc MIB MiB: must succeed
 *   o:MIB     cuMemAlloc MIB MiB: must fail with exactly CUDA_ERROR_OUT_OF_MEMORY
 *   v:MIB     cuMemCreate MIB MiB of physical memory (the VMM API): must succeed
 *   V:MIB     cuMemCreate: must fail with exactly CUDA_ERROR_OUT_OF_MEMORY
 *   f         free the newest allocation (either kind), checking its pattern first
 *   w:FILE    create FILE, then wait until it is removed (at most 120 s)
 *   s:SEC     sleep SEC seconds, making no CUDA call
 *   y         cuCtxSynchronize must succeed
 *   x         cuCtxSynchronize must fail with CUDA_ERROR_DEVICE_UNAVAILABLE (the session ended)
 */
#include <unistd.h>

#include "common.h"

#define MiB (1ull << 20)

struct held {
	int vmm;
	CUdeviceptr d;
	CUmemGenericAllocationHandle h;
	size_t bytes;
	uint32_t seed;
};

static struct held held[64];
static int nheld;

static void fill(struct held *a)
{
	size_t n = a->bytes / 4;
	uint32_t *h = malloc(a->bytes);

	EXPECT(h != NULL, "no host memory");
	for (size_t i = 0; i < n; i++)
		h[i] = pattern32(i, a->seed);
	CHECK(cuMemcpyHtoD(a->d, h, a->bytes));
	free(h);
}

static void check(const struct held *a)
{
	size_t n = a->bytes / 4;
	uint32_t *h = calloc(n, 4);

	EXPECT(h != NULL, "no host memory");
	CHECK(cuMemcpyDtoH(h, a->d, a->bytes));
	for (size_t i = 0; i < n; i++)
		EXPECT(h[i] == pattern32(i, a->seed), "word %zu = %08x", i, h[i]);
	free(h);
}

static CUresult vmm_alloc(struct held *a, size_t bytes)
{
	CUmemAllocationProp prop = {0};
	CUmemAccessDesc acc = {0};
	CUresult r;

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	r = cuMemCreate(&a->h, bytes, &prop, 0);
	if (r != CUDA_SUCCESS)
		return r;
	CHECK(cuMemAddressReserve(&a->d, bytes, 0, 0, 0));
	CHECK(cuMemMap(a->d, bytes, 0, a->h, 0));
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK(cuMemSetAccess(a->d, bytes, &acc, 1));
	return CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUdevice dev;

	if (argc < 2) {
		fprintf(stderr, "usage: quota STEP... (see tests/progs/quota.c)\n");
		return 2;
	}
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		char kind = s[0];
		const char *arg = s[1] == ':' ? s + 2 : "";
		size_t mib = strtoull(arg, NULL, 10);

		switch (kind) {
		case 'a':
		case 'o':
		case 'v':
		case 'V': {
			struct held *a = &held[nheld];
			int vmm = kind == 'v' || kind == 'V', ok = kind == 'a' || kind == 'v';
			CUresult r;

			EXPECT(mib > 0 && nheld < 64, "bad step '%s'", s);
			memset(a, 0, sizeof(*a));
			r = vmm ? vmm_alloc(a, mib * MiB) : cuMemAlloc(&a->d, mib * MiB);
			if (ok) {
				EXPECT(r == CUDA_SUCCESS, "step %s: %d (%s), want CUDA_SUCCESS", s,
				       (int)r, cu_name(r));
				a->vmm = vmm;
				a->bytes = mib * MiB;
				a->seed = (uint32_t)(nheld * 7 + 3);
				fill(a);
				nheld++;
			} else {
				EXPECT(r == CUDA_ERROR_OUT_OF_MEMORY,
				       "step %s: %d (%s), want CUDA_ERROR_OUT_OF_MEMORY", s, (int)r,
				       cu_name(r));
			}
			printf("quota: %s %zu MiB: %s\n", vmm ? "cuMemCreate" : "cuMemAlloc", mib,
			       cu_name(r));
			break;
		}
		case 'f': {
			struct held *a;
			EXPECT(nheld > 0, "step f: nothing to free");
			a = &held[--nheld];
			check(a);
			if (a->vmm) {
				CHECK(cuMemUnmap(a->d, a->bytes));
				CHECK(cuMemAddressFree(a->d, a->bytes));
				CHECK(cuMemRelease(a->h));
			} else {
				CHECK(cuMemFree(a->d));
			}
			printf("quota: freed %zu MiB\n", a->bytes >> 20);
			break;
		}
		case 'w': {
			FILE *f = fopen(arg, "w");
			EXPECT(f != NULL, "cannot create %s", arg);
			fclose(f);
			for (int t = 0; t < 6000 && access(arg, F_OK) == 0; t++)
				usleep(20000);
			EXPECT(access(arg, F_OK) != 0, "%s was not removed within 120 s", arg);
			break;
		}
		case 's':
			sleep((unsigned)mib);
			break;
		case 'y':
			CHECK(cuCtxSynchronize());
			break;
		case 'x': {
			CUresult r = cuCtxSynchronize();
			EXPECT(r == CUDA_ERROR_DEVICE_UNAVAILABLE,
			       "step x: cuCtxSynchronize = %d (%s), want CUDA_ERROR_DEVICE_UNAVAILABLE",
			       (int)r, cu_name(r));
			printf("quota: the session is over: %s\n", cu_name(r));
			/* the context and its memory went with the session */
			return 0;
		}
		default:
			EXPECT(0, "unknown step '%s'", s);
		}
	}
	while (nheld > 0) {
		struct held *a = &held[--nheld];
		check(a);
		if (a->vmm) {
			CHECK(cuMemUnmap(a->d, a->bytes));
			CHECK(cuMemAddressFree(a->d, a->bytes));
			CHECK(cuMemRelease(a->h));
		} else {
			CHECK(cuMemFree(a->d));
		}
	}
	CHECK(cuDevicePrimaryCtxRelease(dev));
	printf("quota: all steps as expected\n");
	return 0;
}
