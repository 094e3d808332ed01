// A kernel taking a 4000-byte struct by value and scalars of four sizes after it (4024 bytes
// of parameters in all, near the classic 4 KiB limit). Each of 256 threads writes a
// position-weighted checksum of the words w with w % 256 == thread, and thread 0 also the
// scalars, so a shifted, truncated or misaligned parameter buffer shows.
#include "rt_check.h"

struct Big {
	unsigned w[1000];
}; // 4000 bytes

enum { THREADS = 256, NOUT = THREADS + 4 };

__global__ void big_checksum(Big b, int s1, long long s2, float s3, unsigned long long *out)
{
	unsigned t = threadIdx.x;
	unsigned long long sum = 0;

	for (unsigned j = t; j < 1000; j += blockDim.x)
		sum += (unsigned long long)b.w[j] * (j + 1);
	out[t] = sum;
	if (t == 0) {
		out[THREADS] = (unsigned long long)(long long)s1;
		out[THREADS + 1] = (unsigned long long)s2;
		out[THREADS + 2] = __float_as_uint(s3);
		out[THREADS + 3] = sizeof(Big);
	}
}

int main()
{
	Big b;
	const int s1 = -123456789;
	const long long s2 = 0x7edcba9876543210ll;
	const float s3 = -3.14159274f;
	unsigned long long want[NOUT] = {}, got[NOUT], *out;
	unsigned s3_bits;

	for (unsigned j = 0; j < 1000; j++)
		b.w[j] = j * 0x01000193u ^ 0xa5a5a5a5u;
	for (unsigned j = 0; j < 1000; j++)
		want[j % THREADS] += (unsigned long long)b.w[j] * (j + 1);
	memcpy(&s3_bits, &s3, sizeof(s3_bits));
	want[THREADS] = (unsigned long long)(long long)s1;
	want[THREADS + 1] = (unsigned long long)s2;
	want[THREADS + 2] = s3_bits;
	want[THREADS + 3] = sizeof(Big);

	CK(cudaMalloc(&out, sizeof(got)));
	CK(cudaMemset(out, 0xcc, sizeof(got)));
	big_checksum<<<1, THREADS>>>(b, s1, s2, s3, out);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
	rt_expect_u64("big_checksum out", got, want, NOUT);
	CK(cudaFree(out));
	return rt_done("rt_bigparam", "4000-byte struct and 4 scalars");
}
