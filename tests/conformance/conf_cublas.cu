// cuBLAS through its shared object (-lcublas): SGEMM, DGEMM and HGEMM with transposes,
// alpha and beta; SGEMM batched (arrays of pointers) and DGEMM strided batched.
//
// The inputs are small multiples of a power of two, so every product and partial sum is exact
// in the type computed: the results equal the CPU's bit for bit whatever order or tensor-core
// path cuBLAS picks, and the result line's digests are those of exact values.
// simgpu has no twins of cuBLAS's kernels: skipped there (exit 77).
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include "conf.h"

#define PROG "cublas"

// column-major element (r, c) of op(X), X stored with leading dimension ld
template <typename T> static T at(const T *x, int ld, bool trans, int r, int c)
{
	return trans ? x[c + (size_t)r * ld] : x[r + (size_t)c * ld];
}

// C = alpha * op(A) op(B) + beta * C on the CPU, in double (exact for these inputs)
template <typename T>
static void ref_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const T *a, int lda,
		     const T *b, int ldb, double beta, T *c, int ldc)
{
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int p = 0; p < k; p++)
				s += (double)at(a, lda, ta, i, p) * (double)at(b, ldb, tb, p, j);
			c[i + (size_t)j * ldc] =
			    (T)(alpha * s + beta * (double)c[i + (size_t)j * ldc]);
		}
}

// a pattern of quarters in [-2, 2]: exact in half, float and double
static double pat(size_t i, unsigned salt)
{
	return (double)((int)((i * 2654435761u + salt) % 17u) - 8) * 0.25;
}

template <typename T> static std::vector<T> patterned(size_t n, unsigned salt)
{
	std::vector<T> v(n);
	for (size_t i = 0; i < n; i++)
		v[i] = (T)pat(i, salt);
	return v;
}

template <typename T> static T *to_device(const std::vector<T> &h)
{
	T *d;
	CK(cudaMalloc(&d, h.size() * sizeof(T)));
	CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
	return d;
}

template <typename T> static std::vector<T> from_device(const T *d, size_t n)
{
	std::vector<T> h(n);
	CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
	return h;
}

template <typename T>
static void expect_equal(const char *what, const std::vector<T> &got, const std::vector<T> &want)
{
	conf_expect_close(what, got.data(), want.data(), got.size(), 0.0, 0.0);
}

int main()
{
	conf_skip_on_simulated(PROG, "cuBLAS's kernels have no C twins");

	cublasHandle_t h;
	CK_LIB(cublasCreate(&h));
	int version = 0;
	CK_LIB(cublasGetVersion(h, &version));

	// SGEMM: C(67x45) = 1.5 * A^T (k x m stored) * B (k x n) - 0.5 * C
	const int m = 67, n = 45, k = 33;
	uint64_t digest[5];
	{
		std::vector<float> a = patterned<float>((size_t)k * m, 1),
				   b = patterned<float>((size_t)k * n, 2),
				   c = patterned<float>((size_t)m * n, 3), want = c;
		float alpha = 1.5f, beta = -0.5f;
		float *da = to_device(a), *db = to_device(b), *dc = to_device(c);
		CK_LIB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, da, k, db, k,
				   &beta, dc, m));
		ref_gemm(true, false, m, n, k, alpha, a.data(), k, b.data(), k, beta, want.data(),
			 m);
		std::vector<float> got = from_device(dc, c.size());
		expect_equal("sgemm", got, want);
		digest[0] = conf_fnv(got.data(), got.size() * sizeof(float));
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
	}
	// DGEMM: C(67x45) = -2 * A (m x k) * B^T (n x k stored) + 1 * C
	{
		std::vector<double> a = patterned<double>((size_t)m * k, 4),
				    b = patterned<double>((size_t)n * k, 5),
				    c = patterned<double>((size_t)m * n, 6), want = c;
		double alpha = -2.0, beta = 1.0;
		double *da = to_device(a), *db = to_device(b), *dc = to_device(c);
		CK_LIB(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da, m, db, n,
				   &beta, dc, m));
		ref_gemm(false, true, m, n, k, alpha, a.data(), m, b.data(), n, beta, want.data(),
			 m);
		std::vector<double> got = from_device(dc, c.size());
		expect_equal("dgemm", got, want);
		digest[1] = conf_fnv(got.data(), got.size() * sizeof(double));
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
	}
	// HGEMM: C(64x40) = A (64x32) * B (32x40), half in and out, half arithmetic: sums of
	// quarters below 2^9 stay exact
	{
		const int hm = 64, hn = 40, hk = 32;
		std::vector<float> af = patterned<float>((size_t)hm * hk, 7),
				   bf = patterned<float>((size_t)hk * hn, 8),
				   want((size_t)hm * hn, 0.0f);
		std::vector<__half> a(af.size()), b(bf.size()), c(want.size(), __float2half(0.0f));
		for (size_t i = 0; i < a.size(); i++)
			a[i] = __float2half(af[i]);
		for (size_t i = 0; i < b.size(); i++)
			b[i] = __float2half(bf[i]);
		__half alpha = __float2half(1.0f), beta = __float2half(0.0f);
		__half *da = to_device(a), *db = to_device(b), *dc = to_device(c);
		CK_LIB(cublasHgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, hm, hn, hk, &alpha, da, hm, db, hk,
				   &beta, dc, hm));
		ref_gemm(false, false, hm, hn, hk, 1.0, af.data(), hm, bf.data(), hk, 0.0,
			 want.data(), hm);
		std::vector<__half> got = from_device(dc, c.size());
		std::vector<float> gotf(got.size());
		for (size_t i = 0; i < got.size(); i++)
			gotf[i] = __half2float(got[i]);
		expect_equal("hgemm", gotf, want);
		digest[2] = conf_fnv(got.data(), got.size() * sizeof(__half));
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
	}
	// SGEMM batched: 5 independent 24x20x16 products through arrays of device pointers
	{
		const int bm = 24, bn = 20, bk = 16, batch = 5;
		std::vector<float> a = patterned<float>((size_t)bm * bk * batch, 9),
				   b = patterned<float>((size_t)bk * bn * batch, 10),
				   c = patterned<float>((size_t)bm * bn * batch, 11), want = c;
		float alpha = 0.75f, beta = 2.0f;
		float *da = to_device(a), *db = to_device(b), *dc = to_device(c);
		std::vector<const float *> pa(batch), pb(batch);
		std::vector<float *> pc(batch);
		for (int i = 0; i < batch; i++) {
			pa[i] = da + (size_t)i * bm * bk;
			pb[i] = db + (size_t)i * bk * bn;
			pc[i] = dc + (size_t)i * bm * bn;
			ref_gemm(false, false, bm, bn, bk, alpha, a.data() + (size_t)i * bm * bk,
				 bm, b.data() + (size_t)i * bk * bn, bk, beta,
				 want.data() + (size_t)i * bm * bn, bm);
		}
		const float **dpa = to_device(pa), **dpb = to_device(pb);
		float **dpc = to_device(pc);
		CK_LIB(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bn, bk, &alpha, dpa, bm,
					  dpb, bk, &beta, dpc, bm, batch));
		std::vector<float> got = from_device(dc, c.size());
		expect_equal("sgemm_batched", got, want);
		digest[3] = conf_fnv(got.data(), got.size() * sizeof(float));
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
		CK(cudaFree(dpa));
		CK(cudaFree(dpb));
		CK(cudaFree(dpc));
	}
	// DGEMM strided batched: 7 products of 18x22x12, A transposed, strides with padding
	{
		const int bm = 18, bn = 22, bk = 12, batch = 7;
		const long long sa = bk * bm + 5, sb = bk * bn + 3, sc = bm * bn + 7;
		std::vector<double> a = patterned<double>((size_t)sa * batch, 12),
				    b = patterned<double>((size_t)sb * batch, 13),
				    c = patterned<double>((size_t)sc * batch, 14), want = c;
		double alpha = 1.25, beta = -1.0;
		double *da = to_device(a), *db = to_device(b), *dc = to_device(c);
		CK_LIB(cublasDgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, bm, bn, bk, &alpha,
						 da, bk, sa, db, bk, sb, &beta, dc, bm, sc, batch));
		for (int i = 0; i < batch; i++)
			ref_gemm(true, false, bm, bn, bk, alpha, a.data() + i * sa, bk,
				 b.data() + i * sb, bk, beta, want.data() + i * sc, bm);
		std::vector<double> got = from_device(dc, c.size());
		expect_equal("dgemm_strided_batched", got, want);
		digest[4] = conf_fnv(got.data(), got.size() * sizeof(double));
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
	}
	CK_LIB(cublasDestroy(h));
	return conf_result(
	    PROG, "sgemm=%016llx dgemm=%016llx hgemm=%016llx sbatched=%016llx dstrided=%016llx",
	    (unsigned long long)digest[0], (unsigned long long)digest[1],
	    (unsigned long long)digest[2], (unsigned long long)digest[3],
	    (unsigned long long)digest[4]);
}
