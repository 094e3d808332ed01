// cuBLASLt through its shared object (-lcublasLt): D = A * B + bias (CUBLASLT_EPILOGUE_BIAS),
// bf16 and fp16 inputs and outputs, fp32 compute, the algorithm chosen by
// cublasLtMatmulAlgoGetHeuristic with a workspace: the path transformer training and inference
// take for every linear layer (issue 7, item 4).
//
// Inputs are small integers and k is 32: every sum is an integer below 2^8, exact in fp32,
// bf16 and fp16, so the output equals the CPU's bit for bit.
// simgpu has no twins of cuBLASLt's kernels: skipped there (exit 77).
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "conf.h"

#define PROG "cublaslt"

static float to_f(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}
static float to_f(__half v)
{
	return __half2float(v);
}
static void from_f(float f, __nv_bfloat16 *v)
{
	*v = __float2bfloat16(f);
}
static void from_f(float f, __half *v)
{
	*v = __float2half(f);
}

// D(m x n) = A(m x k) * B(k x n) + bias(m), column-major, type T for A, B, D and bias.
template <typename T>
static uint64_t matmul(cublasLtHandle_t lt, cudaDataType_t type, const char *what)
{
	const int m = 64, n = 48, k = 32;
	std::vector<T> a((size_t)m * k), b((size_t)k * n), bias(m), d((size_t)m * n);
	std::vector<float> want((size_t)m * n), got((size_t)m * n);

	for (size_t i = 0; i < a.size(); i++)
		from_f((float)((int)((i * 7 + 3) % 5) - 2), &a[i]);
	for (size_t i = 0; i < b.size(); i++)
		from_f((float)((int)((i * 11 + 1) % 5) - 2), &b[i]);
	for (int i = 0; i < m; i++)
		from_f((float)(i % 7 - 3), &bias[i]);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float s = to_f(bias[i]);
			for (int p = 0; p < k; p++)
				s += to_f(a[i + (size_t)p * m]) * to_f(b[p + (size_t)j * k]);
			want[i + (size_t)j * m] = s;
		}

	T *da, *db, *dbias, *dd;
	void *work;
	const size_t work_size = 4 << 20;
	CK(cudaMalloc(&da, a.size() * sizeof(T)));
	CK(cudaMalloc(&db, b.size() * sizeof(T)));
	CK(cudaMalloc(&dbias, bias.size() * sizeof(T)));
	CK(cudaMalloc(&dd, d.size() * sizeof(T)));
	CK(cudaMalloc(&work, work_size));
	CK(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dbias, bias.data(), bias.size() * sizeof(T), cudaMemcpyHostToDevice));
	CK(cudaMemset(dd, 0xff, d.size() * sizeof(T))); // NaNs: every element must be written

	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, ld;
	cublasLtMatmulPreference_t pref;
	cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
	const void *bias_ptr = dbias;
	CK_LIB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	CK_LIB(
	    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
	CK_LIB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
					      sizeof(bias_ptr)));
	CK_LIB(cublasLtMatrixLayoutCreate(&la, type, m, k, m));
	CK_LIB(cublasLtMatrixLayoutCreate(&lb, type, k, n, k));
	CK_LIB(cublasLtMatrixLayoutCreate(&ld, type, m, n, m));
	CK_LIB(cublasLtMatmulPreferenceCreate(&pref));
	CK_LIB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
						    &work_size, sizeof(work_size)));
	cublasLtMatmulHeuristicResult_t heur[4];
	int found = 0;
	CK_LIB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 4, heur, &found));
	if (found < 1) {
		conf_fail("%s: no algorithm from cublasLtMatmulAlgoGetHeuristic", what);
		return 0;
	}
	const float alpha = 1.0f, beta = 0.0f;
	CK_LIB(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, &heur[0].algo,
			      work, work_size, 0));
	CK(cudaMemcpy(d.data(), dd, d.size() * sizeof(T), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < d.size(); i++)
		got[i] = to_f(d[i]);
	conf_expect_close(what, got.data(), want.data(), got.size(), 0.0, 0.0);

	CK_LIB(cublasLtMatmulPreferenceDestroy(pref));
	CK_LIB(cublasLtMatrixLayoutDestroy(la));
	CK_LIB(cublasLtMatrixLayoutDestroy(lb));
	CK_LIB(cublasLtMatrixLayoutDestroy(ld));
	CK_LIB(cublasLtMatmulDescDestroy(op));
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dbias));
	CK(cudaFree(dd));
	CK(cudaFree(work));
	return conf_fnv(d.data(), d.size() * sizeof(T));
}

int main()
{
	conf_skip_on_simulated(PROG, "cuBLASLt's kernels have no C twins");

	cublasLtHandle_t lt;
	CK_LIB(cublasLtCreate(&lt));
	uint64_t bf16 = matmul<__nv_bfloat16>(lt, CUDA_R_16BF, "bf16 matmul + bias");
	uint64_t fp16 = matmul<__half>(lt, CUDA_R_16F, "fp16 matmul + bias");
	CK_LIB(cublasLtDestroy(lt));
	return conf_result(PROG, "bf16_bias=%016llx fp16_bias=%016llx", (unsigned long long)bf16,
			   (unsigned long long)fp16);
}
