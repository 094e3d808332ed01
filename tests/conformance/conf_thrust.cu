// Thrust and CUB (header-only, shipped with the toolkit; their kernels are compiled into this
// program): sort, sort by key, scan, reduce and reduce by key through Thrust's algorithms, then
// radix sort of pairs, exclusive scan, reduction and reduce-by-key through CUB's device-wide
// primitives with their two-phase temporary storage. Integers only: every result is exact and
// checked against the C++ standard library on the CPU. One translation unit, so the build
// stays short. simgpu has no twins of Thrust's or CUB's kernels (template instances named by
// the library's internals): skipped there (exit 77).
#include <algorithm>
#include <numeric>
#include <vector>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>

#include "conf.h"

#define PROG "thrust_cub"

template <typename T>
static void expect(const char *what, const std::vector<T> &got, const std::vector<T> &want)
{
	if (got.size() != want.size()) {
		conf_fail("%s: %zu values, want %zu", what, got.size(), want.size());
		return;
	}
	conf_expect_close(what, got.data(), want.data(), got.size(), 0.0, 0.0);
}

template <typename T> static std::vector<T> host(const thrust::device_vector<T> &d)
{
	thrust::host_vector<T> h = d;
	return std::vector<T>(h.begin(), h.end());
}

template <typename T>
static uint64_t digest(const std::vector<T> &v, uint64_t h = 0xcbf29ce484222325ull)
{
	return conf_fnv(v.data(), v.size() * sizeof(T), h);
}

int main()
{
	conf_skip_on_simulated(PROG, "Thrust's and CUB's kernels have no C twins");

	const int n = 200003;
	std::vector<unsigned> keys(n);
	std::vector<int> vals(n), seg(n);
	for (int i = 0; i < n; i++) {
		keys[i] = (unsigned)i * 2654435761u ^ 0x9e3779b9u;
		vals[i] = (int)(keys[i] % 2001) - 1000;
		seg[i] = i / 37 + (i % 37 == 36); // runs of equal keys for reduce_by_key
	}
	uint64_t dg[2] = {0xcbf29ce484222325ull, 0xcbf29ce484222325ull};

	// ---- Thrust ----
	{
		thrust::device_vector<unsigned> dk(keys.begin(), keys.end());
		thrust::device_vector<int> dv(vals.begin(), vals.end());
		std::vector<unsigned> wk = keys;
		std::sort(wk.begin(), wk.end());
		thrust::device_vector<unsigned> sorted = dk;
		thrust::sort(sorted.begin(), sorted.end());
		expect("thrust::sort", host(sorted), wk);
		dg[0] = digest(host(sorted), dg[0]);

		// sort_by_key: keys are distinct, so the permutation is unique
		std::vector<std::pair<unsigned, int>> kv(n);
		for (int i = 0; i < n; i++)
			kv[i] = {keys[i], vals[i]};
		std::sort(kv.begin(), kv.end());
		std::vector<int> wv(n);
		for (int i = 0; i < n; i++)
			wv[i] = kv[i].second;
		thrust::sort_by_key(dk.begin(), dk.end(), dv.begin());
		expect("thrust::sort_by_key values", host(dv), wv);

		thrust::device_vector<int> dvals(vals.begin(), vals.end()), scan(n);
		thrust::inclusive_scan(dvals.begin(), dvals.end(), scan.begin());
		std::vector<int> ws(n);
		std::partial_sum(vals.begin(), vals.end(), ws.begin());
		expect("thrust::inclusive_scan", host(scan), ws);
		dg[0] = digest(host(scan), dg[0]);

		long long sum = thrust::reduce(dvals.begin(), dvals.end(), 0ll);
		long long wsum = std::accumulate(vals.begin(), vals.end(), 0ll);
		if (sum != wsum)
			conf_fail("thrust::reduce = %lld, want %lld", sum, wsum);
		dg[0] = conf_fnv(&sum, sizeof(sum), dg[0]);

		thrust::device_vector<int> dseg(seg.begin(), seg.end()), okeys(n), osums(n);
		auto end = thrust::reduce_by_key(dseg.begin(), dseg.end(), dvals.begin(),
						 okeys.begin(), osums.begin());
		size_t runs = end.first - okeys.begin();
		std::vector<int> wkeys, wsums;
		for (int i = 0; i < n; i++) {
			if (i == 0 || seg[i] != seg[i - 1]) {
				wkeys.push_back(seg[i]);
				wsums.push_back(0);
			}
			wsums.back() += vals[i];
		}
		std::vector<int> gk = host(okeys), gs = host(osums);
		gk.resize(runs);
		gs.resize(runs);
		expect("thrust::reduce_by_key keys", gk, wkeys);
		expect("thrust::reduce_by_key sums", gs, wsums);
		dg[0] = digest(gs, dg[0]);
	}

	// ---- CUB ----
	{
		unsigned *dk_in, *dk_out;
		int *dv_in, *dv_out, *dscan, *dsum, *dseg, *dukeys, *daggs, *druns;
		CK(cudaMalloc(&dk_in, n * sizeof(unsigned)));
		CK(cudaMalloc(&dk_out, n * sizeof(unsigned)));
		CK(cudaMalloc(&dv_in, n * sizeof(int)));
		CK(cudaMalloc(&dv_out, n * sizeof(int)));
		CK(cudaMalloc(&dscan, n * sizeof(int)));
		CK(cudaMalloc(&dsum, sizeof(int)));
		CK(cudaMalloc(&dseg, n * sizeof(int)));
		CK(cudaMalloc(&dukeys, n * sizeof(int)));
		CK(cudaMalloc(&daggs, n * sizeof(int)));
		CK(cudaMalloc(&druns, sizeof(int)));
		CK(cudaMemcpy(dk_in, keys.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
		CK(cudaMemcpy(dv_in, vals.data(), n * sizeof(int), cudaMemcpyHostToDevice));
		CK(cudaMemcpy(dseg, seg.data(), n * sizeof(int), cudaMemcpyHostToDevice));

		void *tmp = NULL;
		size_t tmp_size = 0, need;
		auto reserve = [&](size_t s) {
			if (s > tmp_size) {
				if (tmp)
					CK(cudaFree(tmp));
				CK(cudaMalloc(&tmp, s));
				tmp_size = s;
			}
		};

		need = 0;
		CK(cub::DeviceRadixSort::SortPairs(NULL, need, dk_in, dk_out, dv_in, dv_out, n));
		reserve(need);
		CK(cub::DeviceRadixSort::SortPairs(tmp, need, dk_in, dk_out, dv_in, dv_out, n));
		std::vector<unsigned> gk(n), wk = keys;
		std::vector<int> gv(n);
		CK(cudaMemcpy(gk.data(), dk_out, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(gv.data(), dv_out, n * sizeof(int), cudaMemcpyDeviceToHost));
		std::sort(wk.begin(), wk.end());
		expect("cub::DeviceRadixSort::SortPairs keys", gk, wk);
		std::vector<std::pair<unsigned, int>> kv(n);
		for (int i = 0; i < n; i++)
			kv[i] = {keys[i], vals[i]};
		std::sort(kv.begin(), kv.end());
		std::vector<int> wv(n);
		for (int i = 0; i < n; i++)
			wv[i] = kv[i].second;
		expect("cub::DeviceRadixSort::SortPairs values", gv, wv);
		dg[1] = digest(gk, digest(gv, dg[1]));

		need = 0;
		CK(cub::DeviceScan::ExclusiveSum(NULL, need, dv_in, dscan, n));
		reserve(need);
		CK(cub::DeviceScan::ExclusiveSum(tmp, need, dv_in, dscan, n));
		std::vector<int> gs(n), ws(n);
		CK(cudaMemcpy(gs.data(), dscan, n * sizeof(int), cudaMemcpyDeviceToHost));
		ws[0] = 0;
		for (int i = 1; i < n; i++)
			ws[i] = ws[i - 1] + vals[i - 1];
		expect("cub::DeviceScan::ExclusiveSum", gs, ws);
		dg[1] = digest(gs, dg[1]);

		need = 0;
		CK(cub::DeviceReduce::Sum(NULL, need, dv_in, dsum, n));
		reserve(need);
		CK(cub::DeviceReduce::Sum(tmp, need, dv_in, dsum, n));
		int sum = 0, wsum = std::accumulate(vals.begin(), vals.end(), 0);
		CK(cudaMemcpy(&sum, dsum, sizeof(int), cudaMemcpyDeviceToHost));
		if (sum != wsum)
			conf_fail("cub::DeviceReduce::Sum = %d, want %d", sum, wsum);
		dg[1] = conf_fnv(&sum, sizeof(sum), dg[1]);

		need = 0;
		CK(cub::DeviceReduce::ReduceByKey(NULL, need, dseg, dukeys, dv_in, daggs, druns,
						  cuda::std::plus<int>(), n));
		reserve(need);
		CK(cub::DeviceReduce::ReduceByKey(tmp, need, dseg, dukeys, dv_in, daggs, druns,
						  cuda::std::plus<int>(), n));
		int runs = 0;
		CK(cudaMemcpy(&runs, druns, sizeof(int), cudaMemcpyDeviceToHost));
		std::vector<int> wkeys, wsums;
		for (int i = 0; i < n; i++) {
			if (i == 0 || seg[i] != seg[i - 1]) {
				wkeys.push_back(seg[i]);
				wsums.push_back(0);
			}
			wsums.back() += vals[i];
		}
		if (runs != (int)wkeys.size()) {
			conf_fail("cub::DeviceReduce::ReduceByKey: %d runs, want %zu", runs,
				  wkeys.size());
		} else {
			std::vector<int> guk(runs), gagg(runs);
			CK(cudaMemcpy(guk.data(), dukeys, runs * sizeof(int),
				      cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(gagg.data(), daggs, runs * sizeof(int),
				      cudaMemcpyDeviceToHost));
			expect("cub::DeviceReduce::ReduceByKey keys", guk, wkeys);
			expect("cub::DeviceReduce::ReduceByKey sums", gagg, wsums);
			dg[1] = digest(gagg, dg[1]);
		}
		for (void *p : {(void *)dk_in, (void *)dk_out, (void *)dv_in, (void *)dv_out,
				(void *)dscan, (void *)dsum, (void *)dseg, (void *)dukeys,
				(void *)daggs, (void *)druns, tmp})
			CK(cudaFree(p));
	}
	return conf_result(PROG, "thrust=%016llx cub=%016llx", (unsigned long long)dg[0],
			   (unsigned long long)dg[1]);
}
