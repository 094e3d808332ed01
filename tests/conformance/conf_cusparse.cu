// cuSPARSE through its shared object (-lcusparse), the generic API: SpMV (y = alpha*A*x +
// beta*y) and SpMM (C = alpha*A*B + beta*C, B and C dense column-major) with a CSR matrix of
// 300 x 200 with 0 to 12 entries a row (some rows empty), buffers sized by the library.
//
// Values are small multiples of 1/4, so every sum is exact in float: the results equal the
// CPU's bit for bit whatever order the library adds in.
// simgpu has no twins of cuSPARSE's kernels: skipped there (exit 77).
#include <vector>

#include <cusparse.h>

#include "conf.h"

#define PROG "cusparse"

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

static float quarter(unsigned i, unsigned salt)
{
	return (float)((int)((i * 2654435761u + salt) % 13u) - 6) * 0.25f;
}

int main()
{
	conf_skip_on_simulated(PROG, "cuSPARSE's kernels have no C twins");

	const int rows = 300, cols = 200, ncol_b = 8;
	std::vector<int> rowptr(rows + 1, 0), colind;
	std::vector<float> val;
	for (int r = 0; r < rows; r++) {
		int len = (r * 7) % 13; // 0..12
		for (int e = 0; e < len; e++) {
			colind.push_back((r * 37 + e * 17) % cols); // distinct: 17 and 200 coprime
			val.push_back(quarter((unsigned)colind.size(), 1));
		}
		rowptr[r + 1] = (int)colind.size();
	}
	const int nnz = (int)colind.size();
	// CSR wants sorted column indices within a row
	for (int r = 0; r < rows; r++)
		for (int i = rowptr[r]; i < rowptr[r + 1]; i++)
			for (int j = i + 1; j < rowptr[r + 1]; j++)
				if (colind[j] < colind[i]) {
					std::swap(colind[i], colind[j]);
					std::swap(val[i], val[j]);
				}
	std::vector<float> x(cols), y(rows), b((size_t)cols * ncol_b), c((size_t)rows * ncol_b);
	for (int i = 0; i < cols; i++)
		x[i] = quarter(i, 2);
	for (int i = 0; i < rows; i++)
		y[i] = quarter(i, 3);
	for (size_t i = 0; i < b.size(); i++)
		b[i] = quarter((unsigned)i, 4);
	for (size_t i = 0; i < c.size(); i++)
		c[i] = quarter((unsigned)i, 5);
	const float alpha = 2.0f, beta = -0.5f;

	// the CPU reference
	std::vector<float> wy = y, wc = c;
	for (int r = 0; r < rows; r++) {
		float s = 0;
		for (int i = rowptr[r]; i < rowptr[r + 1]; i++)
			s += val[i] * x[colind[i]];
		wy[r] = alpha * s + beta * y[r];
		for (int k = 0; k < ncol_b; k++) {
			float t = 0;
			for (int i = rowptr[r]; i < rowptr[r + 1]; i++)
				t += val[i] * b[colind[i] + (size_t)k * cols];
			wc[r + (size_t)k * rows] = alpha * t + beta * c[r + (size_t)k * rows];
		}
	}

	cusparseHandle_t h;
	CK_LIB(cusparseCreate(&h));
	int *drowptr = to_device(rowptr), *dcolind = to_device(colind);
	float *dval = to_device(val), *dx = to_device(x), *dy = to_device(y), *db = to_device(b),
	      *dc = to_device(c);
	cusparseSpMatDescr_t A;
	cusparseDnVecDescr_t X, Y;
	cusparseDnMatDescr_t B, C;
	CK_LIB(cusparseCreateCsr(&A, rows, cols, nnz, drowptr, dcolind, dval, CUSPARSE_INDEX_32I,
				 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
	CK_LIB(cusparseCreateDnVec(&X, cols, dx, CUDA_R_32F));
	CK_LIB(cusparseCreateDnVec(&Y, rows, dy, CUDA_R_32F));
	CK_LIB(cusparseCreateDnMat(&B, cols, ncol_b, cols, db, CUDA_R_32F, CUSPARSE_ORDER_COL));
	CK_LIB(cusparseCreateDnMat(&C, rows, ncol_b, rows, dc, CUDA_R_32F, CUSPARSE_ORDER_COL));

	size_t size_mv = 0, size_mm = 0;
	void *buf_mv, *buf_mm;
	CK_LIB(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, X, &beta, Y,
				       CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &size_mv));
	CK(cudaMalloc(&buf_mv, size_mv ? size_mv : 1));
	CK_LIB(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, X, &beta, Y, CUDA_R_32F,
			    CUSPARSE_SPMV_ALG_DEFAULT, buf_mv));
	CK_LIB(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
				       CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, B, &beta, C,
				       CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &size_mm));
	CK(cudaMalloc(&buf_mm, size_mm ? size_mm : 1));
	CK_LIB(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
			    &alpha, A, B, &beta, C, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, buf_mm));
	std::vector<float> gy = from_device(dy, y.size()), gc = from_device(dc, c.size());
	conf_expect_close("spmv", gy.data(), wy.data(), gy.size(), 0.0, 0.0);
	conf_expect_close("spmm", gc.data(), wc.data(), gc.size(), 0.0, 0.0);

	CK_LIB(cusparseDestroySpMat(A));
	CK_LIB(cusparseDestroyDnVec(X));
	CK_LIB(cusparseDestroyDnVec(Y));
	CK_LIB(cusparseDestroyDnMat(B));
	CK_LIB(cusparseDestroyDnMat(C));
	CK_LIB(cusparseDestroy(h));
	for (void *p : {(void *)drowptr, (void *)dcolind, (void *)dval, (void *)dx, (void *)dy,
			(void *)db, (void *)dc, buf_mv, buf_mm})
		CK(cudaFree(p));
	return conf_result(PROG, "nnz=%d spmv=%016llx spmm=%016llx", nnz,
			   (unsigned long long)conf_fnv(gy.data(), gy.size() * sizeof(float)),
			   (unsigned long long)conf_fnv(gc.data(), gc.size() * sizeof(float)));
}
