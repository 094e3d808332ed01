// cuBLAS batched GEMM: 64 independent 256 x 256 x 256 products, once strided and once through
// arrays of pointers (cublasSgemmBatched), each checked against a CPU reference in double.
#include <cmath>
#include <cstdio>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                  \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "FAIL %s: %s\n", #x, cudaGetErrorString(e_));            \
			return 1;                                                              \
		}                                                                              \
	} while (0)
#define CB(x)                                                                                  \
	do {                                                                                   \
		cublasStatus_t s_ = (x);                                                       \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
			fprintf(stderr, "FAIL %s: cublas status %d\n", #x, (int)s_);             \
			return 1;                                                              \
		}                                                                              \
	} while (0)

static long check(const std::vector<float> &a, const std::vector<float> &b,
		  const std::vector<float> &c, int n, int batch, double *worst)
{
	long bad = 0;
	size_t mat = (size_t)n * n;
	for (int q = 0; q < batch; q++)
		for (int j = 0; j < n; j++)
			for (int i = 0; i < n; i++) {
				double ref = 0, mag = 0;
				for (int k = 0; k < n; k++) {
					double p = (double)a[q * mat + i + (size_t)k * n] *
						   b[q * mat + k + (size_t)j * n];
					ref += p;
					mag += fabs(p);
				}
				double err = fabs(c[q * mat + i + (size_t)j * n] - ref) / (mag ? mag : 1);
				*worst = err > *worst ? err : *worst;
				bad += err > 1e-5;
			}
	return bad;
}

int main()
{
	const int n = 256, batch = 64;
	const size_t mat = (size_t)n * n, all = mat * batch;
	std::vector<float> a(all), b(all), c(all, -1.0f);
	unsigned s = 777;
	for (size_t i = 0; i < all; i++) {
		s = s * 1664525u + 1013904223u;
		a[i] = (float)((s >> 9) % 1001) / 500.0f - 1.0f;
		s = s * 1664525u + 1013904223u;
		b[i] = (float)((s >> 9) % 1001) / 500.0f - 1.0f;
	}
	float *da, *db, *dc;
	CK(cudaMalloc(&da, all * 4));
	CK(cudaMalloc(&db, all * 4));
	CK(cudaMalloc(&dc, all * 4));
	CK(cudaMemcpy(da, a.data(), all * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b.data(), all * 4, cudaMemcpyHostToDevice));
	cublasHandle_t h;
	CB(cublasCreate(&h));
	CB(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
	const float one = 1.0f, zero = 0.0f;
	CB(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, mat, db, n,
				     mat, &zero, dc, n, mat, batch));
	CK(cudaMemcpy(c.data(), dc, all * 4, cudaMemcpyDeviceToHost));
	double w1 = 0, w2 = 0;
	long bad1 = check(a, b, c, n, batch, &w1);

	std::vector<const float *> pa(batch), pb(batch);
	std::vector<float *> pc(batch);
	for (int q = 0; q < batch; q++) {
		pa[q] = da + q * mat;
		pb[q] = db + q * mat;
		pc[q] = dc + q * mat;
	}
	const float **dpa;
	const float **dpb;
	float **dpc;
	CK(cudaMalloc(&dpa, batch * sizeof(float *)));
	CK(cudaMalloc(&dpb, batch * sizeof(float *)));
	CK(cudaMalloc(&dpc, batch * sizeof(float *)));
	CK(cudaMemcpy(dpa, pa.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dpb, pb.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dpc, pc.data(), batch * sizeof(float *), cudaMemcpyHostToDevice));
	CK(cudaMemset(dc, 0xff, all * 4));
	CB(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dpa, n, dpb, n, &zero, dpc,
			      n, batch));
	CK(cudaMemcpy(c.data(), dc, all * 4, cudaMemcpyDeviceToHost));
	long bad2 = check(a, b, c, n, batch, &w2);
	printf("cublas_batched: %d x %dx%dx%d strided (worst %.2e, %ld bad) and pointer-array "
	       "(worst %.2e, %ld bad)\n", batch, n, n, n, w1, bad1, w2, bad2);
	cublasDestroy(h);
	return bad1 || bad2 ? 1 : 0;
}
