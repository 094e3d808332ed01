// cuBLAS SGEMM, 2048 x 2048 x 2048, checked element by element against a CPU reference
// computed in double precision (OpenMP). Runs unchanged natively and through rgpu.
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

int main()
{
	const int n = 2048;
	const size_t nn = (size_t)n * n;
	std::vector<float> a(nn), b(nn), c(nn, -1.0f);
	unsigned s = 12345;
	for (size_t i = 0; i < nn; i++) {
		s = s * 1664525u + 1013904223u;
		a[i] = (float)((s >> 9) % 2001) / 1000.0f - 1.0f;
		s = s * 1664525u + 1013904223u;
		b[i] = (float)((s >> 9) % 2001) / 1000.0f - 1.0f;
	}
	float *da, *db, *dc;
	CK(cudaMalloc(&da, nn * 4));
	CK(cudaMalloc(&db, nn * 4));
	CK(cudaMalloc(&dc, nn * 4));
	CK(cudaMemcpy(da, a.data(), nn * 4, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b.data(), nn * 4, cudaMemcpyHostToDevice));
	cublasHandle_t h;
	CB(cublasCreate(&h));
	CB(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH)); // plain FP32, no TF32
	const float alpha = 1.0f, beta = 0.0f;
	cudaEvent_t t0, t1;
	CK(cudaEventCreate(&t0));
	CK(cudaEventCreate(&t1));
	CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db, n, &beta, dc, n));
	CK(cudaEventRecord(t0));
	for (int r = 0; r < 10; r++)
		CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db, n, &beta, dc, n));
	CK(cudaEventRecord(t1));
	CK(cudaEventSynchronize(t1));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, t0, t1));
	CK(cudaMemcpy(c.data(), dc, nn * 4, cudaMemcpyDeviceToHost));
	// column-major: C[i + j*n] = sum_k A[i + k*n] * B[k + j*n]
	long bad = 0;
	double worst = 0;
#pragma omp parallel for reduction(+ : bad) reduction(max : worst)
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < n; i++) {
			double ref = 0, mag = 0;
			for (int k = 0; k < n; k++) {
				double p = (double)a[i + (size_t)k * n] * b[k + (size_t)j * n];
				ref += p;
				mag += fabs(p);
			}
			double err = fabs(c[i + (size_t)j * n] - ref) / (mag > 0 ? mag : 1);
			if (err > worst)
				worst = err;
			if (err > 1e-5)
				bad++;
		}
	}
	printf("cublas_sgemm: %dx%dx%d, %.1f TFLOP/s, worst relative error %.2e, %ld bad\n", n, n,
	       n, 10 * 2.0 * n * n * n / (ms / 1e3) / 1e12, worst, bad);
	cublasDestroy(h);
	return bad ? 1 : 0;
}
