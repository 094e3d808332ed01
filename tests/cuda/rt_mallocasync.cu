// Stream-ordered allocation: rounds of cudaMallocAsync of mixed sizes on one stream, each
// buffer filled by a kernel, copied into another buffer by a second kernel, read back and
// checked byte for byte, then half of them freed with cudaFreeAsync and allocated again with
// other sizes. Also the default pool: cudaDeviceGetDefaultMemPool, its release threshold
// (read, set, read back) and an allocation from it with cudaMallocFromPoolAsync.
#include <cstdint>

#include "rt_check.h"

__device__ __host__ inline unsigned char pattern(size_t i, unsigned seed)
{
	return (unsigned char)((i * 131u) ^ (i >> 9) ^ seed);
}

__global__ void pattern_fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = pattern(i, seed);
}

__global__ void xor_into(unsigned char *dst, const unsigned char *src, size_t n, unsigned char k)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] = src[i] ^ k;
}

enum { NBUF = 24, ROUNDS = 4 };

struct buf {
	unsigned char *src, *dst;
	size_t size;
	unsigned seed;
};

static size_t size_for(int round, int i)
{
	static const size_t sizes[] = {1,	   3,	    100,	   4096,	 4097,
				       65536 + 12, 1 << 20, (1 << 20) + 4, 3 << 20,	 257,
				       8 << 20,	   2 << 20, 12345,	   (2 << 20) - 1};
	const size_t ns = sizeof(sizes) / sizeof(sizes[0]);
	return sizes[(size_t)(i * 5 + round * 3) % ns];
}

static void fill_and_copy(cudaStream_t s, struct buf *b)
{
	pattern_fill<<<64, 256, 0, s>>>(b->src, b->size, b->seed);
	CK_LAUNCH();
	xor_into<<<32, 128, 0, s>>>(b->dst, b->src, b->size, (unsigned char)(b->seed >> 3));
	CK_LAUNCH();
}

static void verify(const char *what, cudaStream_t s, const struct buf *b, unsigned char *host,
		   unsigned char *want)
{
	char name[96];

	CK(cudaMemcpyAsync(host, b->dst, b->size, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	for (size_t i = 0; i < b->size; i++)
		want[i] = pattern(i, b->seed) ^ (unsigned char)(b->seed >> 3);
	snprintf(name, sizeof(name), "%s (%zu bytes, seed %u)", what, b->size, b->seed);
	rt_expect_u8(name, host, want, b->size);
}

int main()
{
	struct buf bufs[NBUF] = {};
	cudaStream_t s;
	unsigned char *host, *want;
	unsigned long long checked = 0;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMallocHost(&host, 12 << 20));
	want = new unsigned char[12 << 20];

	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < NBUF; i++) {
			struct buf *b = &bufs[i];
			if (b->src) // freed below in the previous round when null
				continue;
			b->size = size_for(round, i);
			b->seed = (unsigned)(round * 977 + i * 31 + 1);
			CK(cudaMallocAsync(&b->src, b->size, s));
			CK(cudaMallocAsync(&b->dst, b->size, s));
			fill_and_copy(s, b);
		}
		for (int i = 0; i < NBUF; i++) {
			verify("buffer", s, &bufs[i], host, want);
			checked += bufs[i].size;
		}
		// free every other buffer, the other half each round; they come back next round
		for (int i = round & 1; i < NBUF; i += 2) {
			CK(cudaFreeAsync(bufs[i].src, s));
			CK(cudaFreeAsync(bufs[i].dst, s));
			bufs[i].src = bufs[i].dst = nullptr;
		}
	}
	for (int i = 0; i < NBUF; i++) {
		if (bufs[i].src) {
			CK(cudaFreeAsync(bufs[i].src, s));
			CK(cudaFreeAsync(bufs[i].dst, s));
		}
	}
	CK(cudaStreamSynchronize(s));

	// the default pool
	cudaMemPool_t pool;
	uint64_t threshold = 1, want_threshold = 64ull << 20;
	CK(cudaDeviceGetDefaultMemPool(&pool, 0));
	CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &want_threshold));
	CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	if (threshold != want_threshold)
		rt_fail("release threshold read back = %llu, want %llu",
			(unsigned long long)threshold, (unsigned long long)want_threshold);
	struct buf pb = {nullptr, nullptr, (3 << 20) + 77, 4242};
	CK(cudaMallocFromPoolAsync(&pb.src, pb.size, pool, s));
	CK(cudaMallocFromPoolAsync(&pb.dst, pb.size, pool, s));
	fill_and_copy(s, &pb);
	verify("pool buffer", s, &pb, host, want);
	checked += pb.size;
	CK(cudaFreeAsync(pb.src, s));
	CK(cudaFreeAsync(pb.dst, s));
	CK(cudaStreamSynchronize(s));

	// the pool's accounting: nothing in use once every block was freed in stream order and the
	// stream synchronised (the driver updates it lazily after a plain cudaFree, so that case
	// is checked by use instead: memory freed that way is allocated again and works)
	uint64_t used = 1;
	CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
	if (used != 0)
		rt_fail("pool memory in use after every free: %llu bytes", (unsigned long long)used);
	struct buf qb = {nullptr, nullptr, 1 << 20, 99};
	CK(cudaMallocAsync(&qb.src, qb.size, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaFree(qb.src));
	CK(cudaMallocAsync(&qb.src, qb.size, s));
	CK(cudaMallocAsync(&qb.dst, qb.size, s));
	fill_and_copy(s, &qb);
	verify("after a cudaFree of pool memory", s, &qb, host, want);
	checked += qb.size;
	CK(cudaFreeAsync(qb.src, s));
	CK(cudaFreeAsync(qb.dst, s));
	CK(cudaStreamSynchronize(s));

	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(host));
	delete[] want;
	char summary[96];
	snprintf(summary, sizeof(summary), "%d rounds of %d buffers, %llu bytes checked", ROUNDS,
		 NBUF, checked);
	return rt_done("rt_mallocasync", summary);
}
