/*
 * host_dma: how fast the copy engine moves bytes between the GPU and host memory of each kind
 * rgpu's shared-memory transport uses, natively, with no rgpu in the way (issue 14): memory from
 * cuMemAllocHost (what a program's pinned copies use natively), a memfd mapped MAP_SHARED and
 * registered with cuMemHostRegister (the client's pinned arena as the worker sees it), the same
 * with MADV_HUGEPAGE asked for, and anonymous memory registered. Each is copied whole and in
 * 4 MiB and 16 MiB asynchronous chunks on one stream, both ways; medians of several runs.
 *
 *   host_dma [MiB ...]     (default 4 16 64 1024)
 *
 * Prints "host_dma <kind> <h2d|d2h> <size> <whole|c4|c16> <GB/s>" lines, and the host's
 * transparent huge page settings first.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ul << 20)
#define CHECK(x)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (x);                                                                 \
		if (r_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, "%s:%d: %s: error %d\n", __FILE__, __LINE__, #x, (int)r_); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void show_file(const char *path)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	printf("# %s: %s\n", path, f ? buf : "(unreadable)");
}

enum kind { K_ALLOCHOST, K_MEMFD, K_MEMFD_HUGE, K_ANON, K_ANON_HUGE, K_N };
static const char *const kind_name[K_N] = {"allochost", "memfd", "memfd_huge", "anon",
					   "anon_huge"};

static void *host_get(enum kind k, size_t n)
{
	void *p = NULL;
	if (k == K_ALLOCHOST) {
		CHECK(cuMemAllocHost(&p, n));
		return p;
	}
	if (k == K_MEMFD || k == K_MEMFD_HUGE) {
		int fd = memfd_create("host_dma", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)n)) {
			perror("memfd");
			exit(1);
		}
		p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	} else {
		p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	if (k == K_MEMFD_HUGE || k == K_ANON_HUGE)
		(void)madvise(p, n, MADV_HUGEPAGE);
	memset(p, 1, n);
	CHECK(cuMemHostRegister(p, n, 0));
	return p;
}

static void host_put(enum kind k, void *p, size_t n)
{
	if (k == K_ALLOCHOST) {
		CHECK(cuMemFreeHost(p));
		return;
	}
	CHECK(cuMemHostUnregister(p));
	munmap(p, n);
}

/* one timed copy of n bytes, in chunks of `chunk` (0: whole), synchronous at the end */
static double copy_once(CUdeviceptr d, char *h, size_t n, size_t chunk, int h2d, CUstream s)
{
	double t0 = now_s();
	if (!chunk) {
		if (h2d)
			CHECK(cuMemcpyHtoD(d, h, n));
		else
			CHECK(cuMemcpyDtoH(h, d, n));
	} else {
		for (size_t off = 0; off < n; off += chunk) {
			size_t len = n - off < chunk ? n - off : chunk;
			if (h2d)
				CHECK(cuMemcpyHtoDAsync(d + off, h + off, len, s));
			else
				CHECK(cuMemcpyDtoHAsync(h + off, d + off, len, s));
		}
		CHECK(cuStreamSynchronize(s));
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	size_t sizes[16] = {4 * MIB, 16 * MIB, 64 * MIB, 1024 * MIB}, nsizes = 4, max = 0;
	static const size_t chunks[] = {0, 4 * MIB, 16 * MIB};
	static const char *const chunk_name[] = {"whole", "c4", "c16"};
	CUdevice dev;
	CUcontext ctx;
	CUstream s;
	CUdeviceptr d;

	if (argc > 1) {
		nsizes = 0;
		for (int i = 1; i < argc && nsizes < 16; i++)
			sizes[nsizes++] = strtoul(argv[i], NULL, 10) * MIB;
	}
	for (size_t i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	show_file("/sys/kernel/mm/transparent_hugepage/enabled");
	show_file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuMemAlloc(&d, max));
	for (int k = 0; k < K_N; k++) {
		char *h = host_get((enum kind)k, max);
		for (size_t i = 0; i < nsizes; i++) {
			size_t n = sizes[i];
			int reps = n <= 16 * MIB ? 30 : n <= 64 * MIB ? 10 : 5;
			for (int dir = 1; dir >= 0; dir--)
				for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
					double t[30];
					if (chunks[c] && chunks[c] >= n)
						continue;
					copy_once(d, h, n, chunks[c], dir, s);
					for (int r = 0; r < reps; r++)
						t[r] = copy_once(d, h, n, chunks[c], dir, s);
					qsort(t, (size_t)reps, sizeof(t[0]), cmp_d);
					printf("host_dma %s %s %zuM %s %.2f\n", kind_name[k],
					       dir ? "h2d" : "d2h", n / MIB, chunk_name[c],
					       (double)n / t[reps / 2] / 1e9);
					fflush(stdout);
				}
		}
		host_put((enum kind)k, h, max);
	}
	CHECK(cuMemFree(d));
	CHECK(cuStreamDestroy(s));
	CHECK(cuDevicePrimaryCtxRelease(dev));
	return 0;
}
