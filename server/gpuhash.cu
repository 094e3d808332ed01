// The chunk hash on the GPU (rgpu/hash.h gives the definition; util/hash.c the same in C):
// one thread per 4 KiB leaf computes its SHA-256, then one thread per chunk the SHA-256 of the
// tag, the length and its leaves' digests. rgpud embeds this code (server/gpuhash.c loads it);
// digests are written as SHA-256 bytes, so the host compares them with rgpu_chunk_hash's.
// Lengths are multiples of 4 bytes (device memory is mapped in 2 MiB granules).
#include <stdint.h>

__constant__ uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static __device__ __forceinline__ uint32_t rotr(uint32_t x, int n)
{
	return __funnelshift_r(x, x, n);
}

static __device__ __forceinline__ uint32_t bswap(uint32_t x)
{
	return __byte_perm(x, 0, 0x0123);
}

static __device__ void compress(uint32_t st[8], uint32_t w[16])
{
	uint32_t a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6],
		 h = st[7];

#pragma unroll
	for (int t = 0; t < 64; t++) {
		uint32_t wt;
		if (t < 16) {
			wt = w[t];
		} else {
			uint32_t w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
			uint32_t s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >> 3);
			uint32_t s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >> 10);
			wt = w[t & 15] = w[t & 15] + s0 + w[(t - 7) & 15] + s1;
		}
		uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
			      K[t] + wt;
		uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	st[0] += a;
	st[1] += b;
	st[2] += c;
	st[3] += d;
	st[4] += e;
	st[5] += f;
	st[6] += g;
	st[7] += h;
}

// SHA-256 of a message of len bytes (a multiple of 4) whose big-endian word i is fetch(i);
// the digest's bytes go to out (4-byte aligned).
template <class F> static __device__ void sha256(F fetch, uint64_t len, uint32_t *out)
{
	uint32_t st[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	uint64_t nblocks = (len + 9 + 63) / 64, words = len / 4;

	for (uint64_t b = 0; b < nblocks; b++) {
		uint32_t w[16];
		if ((b + 1) * 16 <= words) {
#pragma unroll
			for (int t = 0; t < 16; t++)
				w[t] = fetch(b * 16 + t);
		} else {
			for (int t = 0; t < 16; t++) {
				uint64_t i = b * 16 + t;
				w[t] = i < words ? fetch(i) : i == words ? 0x80000000u : 0;
			}
			if (b == nblocks - 1) {
				w[14] = (uint32_t)((len * 8) >> 32);
				w[15] = (uint32_t)(len * 8);
			}
		}
		compress(st, w);
	}
#pragma unroll
	for (int j = 0; j < 8; j++)
		out[j] = bswap(st[j]);
}

// Leaf i of the n bytes at data: SHA-256 into leaves[i] (32 bytes each).
extern "C" __global__ void rgpu_hash_leaves(const uint32_t *data, uint64_t n, uint32_t *leaves)
{
	uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, off = i * 4096;

	if (off >= n)
		return;
	const uint32_t *p = data + off / 4;
	sha256([p](uint64_t w) { return bswap(__ldg(p + w)); }, min((uint64_t)4096, n - off),
	       leaves + i * 8);
}

// Chunk c of the n bytes (chunks of `chunk` bytes, a multiple of 4096): the chunk hash from
// its leaves' digests, into out[c] (32 bytes each).
extern "C" __global__ void rgpu_hash_roots(const uint32_t *leaves, uint64_t n, uint64_t chunk,
					   uint32_t *out)
{
	uint64_t c = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, off = c * chunk;

	if (off >= n)
		return;
	uint64_t len = min(chunk, n - off), k = (len + 4095) / 4096;
	const uint32_t *lw = leaves + (off / 4096) * 8;
	// "RGPUCHK1" then len as 8 little-endian bytes, then the leaves' digests
	sha256(
	    [lw, len](uint64_t w) -> uint32_t {
		    switch (w) {
		    case 0: return 0x52475055u;
		    case 1: return 0x43484b31u;
		    case 2: return bswap((uint32_t)len);
		    case 3: return bswap((uint32_t)(len >> 32));
		    default: return bswap(lw[w - 4]);
		    }
	    },
	    16 + 32 * k, out + c * 8);
}
