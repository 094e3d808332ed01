// cuSOLVER through its shared object (-lcusolver): dense LU with partial pivoting
// (cusolverDnDgetrf, then cusolverDnDgetrs on two right-hand sides) and Cholesky
// (cusolverDnDpotrf, lower), with the workspace sizes the library asks for and its info
// output. Checked on the CPU: P*A = L*U and L*L^T = A within 1e-12 of the matrix's largest
// entry, the solves' residuals within 1e-10, the pivots a permutation.
// simgpu has no twins of cuSOLVER's kernels: skipped there (exit 77).
#include <cmath>
#include <vector>

#include <cusolverDn.h>

#include "conf.h"

#define PROG "cusolver"

static double entry(int i, int j, unsigned salt)
{
	return sin(0.7 * i + 1.3 * j + salt) + ((i * 31 + j * 17 + salt) % 11) * 0.1;
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

static double peak(const std::vector<double> &a)
{
	double p = 0;
	for (double v : a)
		p = fmax(p, fabs(v));
	return p;
}

static uint64_t lu(cusolverDnHandle_t h)
{
	const int n = 96, nrhs = 2;
	std::vector<double> a((size_t)n * n), b((size_t)n * nrhs);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < n; i++)
			a[i + (size_t)j * n] = entry(i, j, 1); // general: pivoting is needed
	for (size_t i = 0; i < b.size(); i++)
		b[i] = entry((int)i, 3, 2);
	double *da = to_device(a), *db = to_device(b), *work;
	int *dpiv, *dinfo, lwork = 0, info = -1;
	CK(cudaMalloc(&dpiv, n * sizeof(int)));
	CK(cudaMalloc(&dinfo, sizeof(int)));
	CK_LIB(cusolverDnDgetrf_bufferSize(h, n, n, da, n, &lwork));
	CK(cudaMalloc(&work, (size_t)lwork * sizeof(double)));
	CK_LIB(cusolverDnDgetrf(h, n, n, da, n, work, dpiv, dinfo));
	CK(cudaMemcpy(&info, dinfo, sizeof(int), cudaMemcpyDeviceToHost));
	if (info != 0)
		conf_fail("getrf: info %d", info);
	CK_LIB(cusolverDnDgetrs(h, CUBLAS_OP_N, n, nrhs, da, n, dpiv, db, n, dinfo));
	CK(cudaMemcpy(&info, dinfo, sizeof(int), cudaMemcpyDeviceToHost));
	if (info != 0)
		conf_fail("getrs: info %d", info);
	std::vector<double> f = from_device(da, a.size()), x = from_device(db, b.size());
	std::vector<int> piv = from_device(dpiv, n);

	// P*A: apply the row swaps in order (LAPACK ipiv, 1-based)
	std::vector<double> pa = a;
	std::vector<char> seen(n, 0);
	for (int i = 0; i < n; i++) {
		int p = piv[i] - 1;
		if (p < i || p >= n) {
			conf_fail("getrf: ipiv[%d] = %d", i, piv[i]);
			return 0;
		}
		for (int j = 0; j < n; j++)
			std::swap(pa[i + (size_t)j * n], pa[p + (size_t)j * n]);
	}
	double tol = 1e-12 * n * peak(a);
	int bad = 0;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < n; i++) {
			double s = 0;
			for (int k = 0; k <= std::min(i, j); k++)
				s += (k == i ? 1.0 : f[i + (size_t)k * n]) * f[k + (size_t)j * n];
			if (fabs(s - pa[i + (size_t)j * n]) > tol && bad++ < 5)
				conf_fail("getrf: (L*U)[%d][%d] = %.15g, (P*A) = %.15g", i, j, s,
					  pa[i + (size_t)j * n]);
		}
	for (int r = 0; r < nrhs; r++)
		for (int i = 0; i < n; i++) {
			double s = 0;
			for (int j = 0; j < n; j++)
				s += a[i + (size_t)j * n] * x[j + (size_t)r * n];
			if (fabs(s - b[i + (size_t)r * n]) > 1e-10 * n && bad++ < 5)
				conf_fail("getrs: residual %.3g in row %d of rhs %d",
					  s - b[i + (size_t)r * n], i, r);
		}
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(work));
	CK(cudaFree(dpiv));
	CK(cudaFree(dinfo));
	return conf_fnv(piv.data(), n * sizeof(int), conf_fnv(f.data(), f.size() * sizeof(double)));
}

static uint64_t cholesky(cusolverDnHandle_t h)
{
	const int n = 80;
	std::vector<double> m((size_t)n * n), a((size_t)n * n);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < n; i++)
			m[i + (size_t)j * n] = entry(i, j, 5);
	// A = M^T M + n I: symmetric positive definite
	for (int j = 0; j < n; j++)
		for (int i = 0; i < n; i++) {
			double s = i == j ? n : 0;
			for (int k = 0; k < n; k++)
				s += m[k + (size_t)i * n] * m[k + (size_t)j * n];
			a[i + (size_t)j * n] = s;
		}
	double *da = to_device(a), *work;
	int *dinfo, lwork = 0, info = -1;
	CK(cudaMalloc(&dinfo, sizeof(int)));
	CK_LIB(cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, da, n, &lwork));
	CK(cudaMalloc(&work, (size_t)lwork * sizeof(double)));
	CK_LIB(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, da, n, work, lwork, dinfo));
	CK(cudaMemcpy(&info, dinfo, sizeof(int), cudaMemcpyDeviceToHost));
	if (info != 0)
		conf_fail("potrf: info %d", info);
	std::vector<double> l = from_device(da, a.size());
	double tol = 1e-12 * n * peak(a);
	int bad = 0;
	for (int j = 0; j < n; j++)
		for (int i = j; i < n; i++) {
			double s = 0;
			for (int k = 0; k <= j; k++)
				s += l[i + (size_t)k * n] * l[j + (size_t)k * n];
			if (fabs(s - a[i + (size_t)j * n]) > tol && bad++ < 5)
				conf_fail("potrf: (L*L^T)[%d][%d] = %.15g, A = %.15g", i, j, s,
					  a[i + (size_t)j * n]);
		}
	// only the lower triangle is the factor; the upper keeps A's entries
	std::vector<double> lower;
	for (int j = 0; j < n; j++)
		for (int i = j; i < n; i++)
			lower.push_back(l[i + (size_t)j * n]);
	CK(cudaFree(da));
	CK(cudaFree(work));
	CK(cudaFree(dinfo));
	return conf_fnv(lower.data(), lower.size() * sizeof(double));
}

int main()
{
	conf_skip_on_simulated(PROG, "cuSOLVER's kernels have no C twins");

	cusolverDnHandle_t h;
	CK_LIB(cusolverDnCreate(&h));
	uint64_t d_lu = lu(h), d_chol = cholesky(h);
	CK_LIB(cusolverDnDestroy(h));
	return conf_result(PROG, "getrf=%016llx potrf=%016llx", (unsigned long long)d_lu,
			   (unsigned long long)d_chol);
}
