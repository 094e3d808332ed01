// zdtm memory: device allocations of awkward sizes, with holes.
//
// State: cudaMalloc allocations of 1, 255, 4096, 1 MiB + 3, 3 MiB and 64 MiB bytes and one
// cudaMallocPitch allocation (1000 x 77 bytes), each written by more than one path: host data
// from a seeded PRNG copied in (cudaMemcpy, at unaligned offsets too), a kernel's hash of
// index and seed, cudaMemset of a sub-range, cudaMemcpy2D into the pitched rows and a 2D
// kernel into others. Four more allocations, also written, are freed before READY so that
// the job's address space has holes a restore must not fill or shift.
//
// Checks after the signal: every byte of every live allocation, read back (the pitched one
// whole, padding included, and again row by row with cudaMemcpy2D, or a cudaMemcpy a row
// where rgpu refuses cudaMemcpy2D: see copy_2d()); cudaPointerGetAttributes of each (device
// memory of device 0, the same pointer). Then it uses the old state: half of
// the allocations are replaced by new ones computed by a kernel from the old bytes (the old
// ones freed), the other half rewritten in place by a kernel, a device-to-device copy into a
// new allocation, and all of it read back again. With ZDTM_ROUNDS=N those changes are the
// state the next round verifies.
#include "zdtm.h"

// 2D: the first `width` bytes of rows [y0, y0 + rows) of a pitched allocation, element
// (x, y) = zd_byte(y * width + x, seed). Grid-stride in x and y.
__global__ void zd_fill_pitch(unsigned char *p, unsigned long long pitch, unsigned width,
			      unsigned y0, unsigned rows, unsigned seed)
{
	for (unsigned y = blockIdx.y * blockDim.y + threadIdx.y; y < rows;
	     y += gridDim.y * blockDim.y)
		for (unsigned x = blockIdx.x * blockDim.x + threadIdx.x; x < width;
		     x += gridDim.x * blockDim.x)
			p[(y0 + y) * pitch + x] =
			    zd_byte((unsigned long long)(y0 + y) * width + x, seed);
}

struct zbuf {
	const char *name;
	unsigned char *d;
	size_t size; // bytes: pitch * height for the pitched one
	unsigned char *want;
	bool pitched;
};

enum { PITCH_W = 1000, PITCH_H = 77, NBUF = 7 };
static size_t g_pitch;

static const size_t MiB = 1 << 20;

// cudaMemcpy2D's answer when it refused: rgpu does not implement cuMemcpy2DUnaligned_v2 yet
// (cudaErrorNotSupported). Then the rows are copied one cudaMemcpy each, and the OK line says
// so (memcpy2d=...), so the gap shows in every passing run instead of hiding.
static cudaError_t g_memcpy2d = cudaSuccess;

static void copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
		    size_t height, cudaMemcpyKind kind)
{
	if (g_memcpy2d == cudaSuccess) {
		cudaError_t e = cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
		if (e != cudaErrorNotSupported) {
			ZK(e);
			return;
		}
		g_memcpy2d = e;
		(void)cudaGetLastError(); // not sticky: clear it for the next ZK_LAUNCH()
	}
	for (size_t y = 0; y < height; y++)
		ZK(cudaMemcpy((char *)dst + y * dpitch, (const char *)src + y * spitch, width,
			      kind));
}

static void host_put(struct zbuf *b, size_t off, size_t n, struct zd_rng *r)
{
	zd_rand_fill(r, b->want + off, n);
	ZK(cudaMemcpy(b->d + off, b->want + off, n, cudaMemcpyHostToDevice));
}

static void kernel_fill(struct zbuf *b, size_t off, size_t n, unsigned seed)
{
	zd_fill_bytes<<<zd_blocks(n), 256>>>(b->d + off, n, seed);
	ZK_LAUNCH();
	for (size_t i = 0; i < n; i++)
		b->want[off + i] = zd_byte(i, seed);
}

static void kernel_mix(unsigned char *dst, struct zbuf *src, size_t off, size_t n, unsigned seed,
		       unsigned char *want)
{
	zd_mix_bytes<<<zd_blocks(n), 256>>>(dst + off, src->d + off, n, seed);
	ZK_LAUNCH();
	for (size_t i = 0; i < n; i++)
		want[off + i] = zd_mix_byte(src->want[off + i], i, seed);
}

static void alloc_buf(struct zbuf *b, const char *name, size_t size)
{
	b->name = name;
	b->size = size;
	b->pitched = false;
	ZK(cudaMalloc(&b->d, size));
	b->want = (unsigned char *)malloc(size);
	if (!b->want) {
		printf("zdtm memory: FAIL no host memory\n");
		exit(1);
	}
}

static void alloc_pitched(struct zbuf *b, unsigned char **d)
{
	size_t pitch;

	ZK(cudaMallocPitch((void **)d, &pitch, PITCH_W, PITCH_H));
	if (g_pitch == 0)
		g_pitch = pitch;
	// the same width must get the same pitch, before and after a restore
	zd_expect(pitch == g_pitch && pitch >= PITCH_W,
		  "cudaMallocPitch(%d x %d): pitch %zu, expected %zu", PITCH_W, PITCH_H, pitch,
		  g_pitch);
}

// The pitched allocation: all of it (padding too) by the 1D kernel, rows 0-38 (width bytes)
// from the host with cudaMemcpy2D, rows 39-76 by the 2D kernel.
static void build_pitched(struct zbuf *b, struct zd_rng *r)
{
	const unsigned half = PITCH_H / 2, seed = 0x2d2d0077u;
	unsigned char *rows = (unsigned char *)malloc((size_t)PITCH_W * half);

	b->name = "pitch2d";
	b->pitched = true;
	alloc_pitched(b, &b->d);
	b->size = g_pitch * PITCH_H;
	b->want = (unsigned char *)malloc(b->size);
	kernel_fill(b, 0, b->size, 0x9a9a0001u);
	zd_rand_fill(r, rows, (size_t)PITCH_W * half);
	copy_2d(b->d, g_pitch, rows, PITCH_W, PITCH_W, half, cudaMemcpyHostToDevice);
	for (unsigned y = 0; y < half; y++)
		memcpy(b->want + y * g_pitch, rows + (size_t)y * PITCH_W, PITCH_W);
	zd_fill_pitch<<<dim3(4, 8), dim3(64, 4)>>>(b->d, g_pitch, PITCH_W, half, PITCH_H - half,
						   seed);
	ZK_LAUNCH();
	for (unsigned y = half; y < PITCH_H; y++)
		for (unsigned x = 0; x < PITCH_W; x++)
			b->want[y * g_pitch + x] =
			    zd_byte((unsigned long long)y * PITCH_W + x, seed);
	free(rows);
}

static void verify_buf(const struct zbuf *b, int round, const char *when)
{
	char what[128];
	cudaPointerAttributes a;

	snprintf(what, sizeof(what), "round %d %s: %s (%zu bytes at %p)", round + 1, when, b->name,
		 b->size, (void *)b->d);
	zd_compare_dev(what, b->d, b->want, b->size, 1);
	ZK(cudaPointerGetAttributes(&a, b->d));
	zd_expect(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == b->d,
		  "%s: cudaPointerGetAttributes type %d device %d devicePointer %p", what,
		  (int)a.type, a.device, a.devicePointer);
	if (b->pitched) {
		// row by row through cudaMemcpy2D: the padding left out
		unsigned char *got = (unsigned char *)malloc((size_t)PITCH_W * PITCH_H);
		unsigned char *want = (unsigned char *)malloc((size_t)PITCH_W * PITCH_H);
		copy_2d(got, PITCH_W, b->d, g_pitch, PITCH_W, PITCH_H, cudaMemcpyDeviceToHost);
		for (unsigned y = 0; y < PITCH_H; y++)
			memcpy(want + (size_t)y * PITCH_W, b->want + y * g_pitch, PITCH_W);
		snprintf(what, sizeof(what), "round %d %s: %s rows via cudaMemcpy2D", round + 1,
			 when, b->name);
		zd_compare(what, got, want, (size_t)PITCH_W * PITCH_H, 1);
		free(got);
		free(want);
	}
}

int main()
{
	struct zbuf bufs[NBUF], holes[4];
	struct zd_rng rng = {0x6d656d6f72790001ull};
	unsigned long long replaced = 0, in_place = 0, extra = 0;

	zd_init("memory");
	ZK(cudaSetDevice(0));

	// Allocation order interleaves the holes with the buffers that stay.
	alloc_buf(&bufs[0], "a1", 1);
	host_put(&bufs[0], 0, 1, &rng);
	alloc_buf(&holes[0], "hole 2MiB+1", 2 * MiB + 1);
	kernel_fill(&holes[0], 0, holes[0].size, 0x40000001u);
	alloc_buf(&bufs[1], "a255", 255);
	kernel_fill(&bufs[1], 0, 255, 0x255u);
	alloc_buf(&holes[1], "hole 17", 17);
	host_put(&holes[1], 0, 17, &rng);
	alloc_buf(&bufs[2], "a4096", 4096);
	host_put(&bufs[2], 0, 4096, &rng);
	ZK(cudaMemset(bufs[2].d + 100, 0xc3, 200));
	memset(bufs[2].want + 100, 0xc3, 200);
	alloc_buf(&bufs[3], "a1MiB+3", MiB + 3);
	kernel_fill(&bufs[3], 0, MiB + 3, 0x100003u);
	host_put(&bufs[3], 1000, 70001, &rng); // unaligned start and length
	alloc_buf(&holes[2], "hole 8MiB", 8 * MiB);
	kernel_fill(&holes[2], 0, 8 * MiB, 0x40000003u);
	alloc_buf(&bufs[4], "a3MiB", 3 * MiB);
	host_put(&bufs[4], 0, 3 * MiB, &rng);
	kernel_mix(bufs[4].d, &bufs[4], 4097, MiB, 0x3003u, bufs[4].want); // in place
	build_pitched(&bufs[5], &rng);
	alloc_buf(&holes[3], "hole 1MiB", MiB);
	host_put(&holes[3], 0, MiB, &rng);
	alloc_buf(&bufs[6], "a64MiB", 64 * MiB);
	kernel_fill(&bufs[6], 0, 64 * MiB, 0x64646464u);
	host_put(&bufs[6], 7 * MiB + 13, 5 * MiB + 1, &rng);
	ZK(cudaMemset(bufs[6].d + 40 * MiB + 1, 0x5a, 3 * MiB + 5));
	memset(bufs[6].want + 40 * MiB + 1, 0x5a, 3 * MiB + 5);

	// the holes held data too: check it once, then free them
	for (int i = 0; i < 4; i++) {
		verify_buf(&holes[i], -1, "before READY");
		ZK(cudaFree(holes[i].d));
		free(holes[i].want);
	}
	for (int i = 0; i < NBUF; i++)
		verify_buf(&bufs[i], -1, "before READY");
	zd_round_end(-1);
	ZK(cudaDeviceSynchronize());

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		for (int i = 0; i < NBUF; i++)
			verify_buf(&bufs[i], round, "after the signal");
		zd_round_end(round);

		// Use the old state: half the buffers replaced by a kernel's function of them (new
		// allocations, the old freed), the others rewritten in place.
		for (int i = 0; i < NBUF; i++) {
			struct zbuf *b = &bufs[i];
			unsigned seed = 0x11110000u + (unsigned)(round * NBUF + i);
			unsigned char *want = (unsigned char *)malloc(b->size);
			if ((i + round) % 2 == 0) {
				unsigned char *nd;
				if (b->pitched)
					alloc_pitched(b, &nd);
				else
					ZK(cudaMalloc(&nd, b->size));
				kernel_mix(nd, b, 0, b->size, seed, want);
				ZK(cudaFree(b->d));
				b->d = nd;
				replaced++;
			} else {
				kernel_mix(b->d, b, 0, b->size, seed, want);
				in_place++;
			}
			free(b->want);
			b->want = want;
		}
		// a device-to-device copy of an old buffer into a new one
		struct zbuf cp;
		alloc_buf(&cp, "d2d copy of a1MiB+3", bufs[3].size);
		ZK(cudaMemcpy(cp.d, bufs[3].d, cp.size, cudaMemcpyDeviceToDevice));
		memcpy(cp.want, bufs[3].want, cp.size);
		verify_buf(&cp, round, "new");
		ZK(cudaFree(cp.d));
		free(cp.want);
		extra++;
		for (int i = 0; i < NBUF; i++)
			verify_buf(&bufs[i], round, "after use");
		ZK(cudaDeviceSynchronize());
		zd_round_end(round);
	}

	unsigned long long live = 0;
	for (int i = 0; i < NBUF; i++) {
		live += bufs[i].size;
		ZK(cudaFree(bufs[i].d));
		free(bufs[i].want);
	}
	char summary[256];
	snprintf(summary, sizeof(summary),
		 "allocations=%d live_bytes=%llu pitch=%zu holes=4 replaced=%llu in_place=%llu "
		 "copies=%llu memcpy2d=%s",
		 NBUF, live, g_pitch, replaced, in_place, extra,
		 g_memcpy2d == cudaSuccess ? "yes" : "rows(cudaMemcpy2D:cudaErrorNotSupported)");
	return zd_ok(summary);
}
