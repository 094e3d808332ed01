// cuRAND through its shared object (-lcurand), both APIs:
//
// - host API: XORWOW and Philox4x32-10 generators on the device (curandGenerate, uniform,
//   normal), each compared with the same generator run on the CPU (curandCreateGeneratorHost,
//   same seed, offset and ordering), which cuRAND documents to give the same sequence;
// - device API: our kernel draws from curand_init(seed, subsequence = thread, 0) Philox
//   states with curand() and curand_uniform(), checked against Philox4x32-10 written out here
//   (curand_philox4x32_x.h: ten rounds, the Weyl key bumps, the counter per four outputs).
//
// Integers are compared exactly, floats within 1e-6 (normals 2e-5: the CPU's and the
// device's log and sincos differ in the last bits). simgpu has no twins of cuRAND's
// generators or of the device API kernel (its Philox rounds): skipped there (exit 77).
#include <cmath>
#include <vector>

#include <curand.h>
#include <curand_kernel.h>

#include "conf.h"

#define PROG "curand"

static const unsigned long long seed = 0x1234abcd5678ull;

// ---- host API ------------------------------------------------------------------------------

static uint64_t host_api(curandRngType_t type, const char *what)
{
	const size_t n = 40000; // a multiple of 4 and of 2 (Philox and the normals want that)
	curandGenerator_t gd, gh;
	unsigned *du;
	float *df;
	std::vector<unsigned> u(n), hu(n);
	std::vector<float> f(n), hf(n), g(n), hg(n);

	CK(cudaMalloc(&du, n * sizeof(unsigned)));
	CK(cudaMalloc(&df, n * sizeof(float)));
	CK_LIB(curandCreateGenerator(&gd, type));
	CK_LIB(curandCreateGeneratorHost(&gh, type));
	CK_LIB(curandSetPseudoRandomGeneratorSeed(gd, seed));
	CK_LIB(curandSetPseudoRandomGeneratorSeed(gh, seed));
	CK_LIB(curandSetGeneratorOffset(gd, 1000));
	CK_LIB(curandSetGeneratorOffset(gh, 1000));

	CK_LIB(curandGenerate(gd, du, n));
	CK_LIB(curandGenerate(gh, hu.data(), n));
	CK(cudaMemcpy(u.data(), du, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
	conf_expect_close(what, u.data(), hu.data(), n, 0.0, 0.0);

	CK_LIB(curandGenerateUniform(gd, df, n));
	CK_LIB(curandGenerateUniform(gh, hf.data(), n));
	CK(cudaMemcpy(f.data(), df, n * sizeof(float), cudaMemcpyDeviceToHost));
	conf_expect_close(what, f.data(), hf.data(), n, 1e-6, 1e-6);

	CK_LIB(curandGenerateNormal(gd, df, n, 1.5f, 2.0f));
	CK_LIB(curandGenerateNormal(gh, hg.data(), n, 1.5f, 2.0f));
	CK(cudaMemcpy(g.data(), df, n * sizeof(float), cudaMemcpyDeviceToHost));
	conf_expect_close(what, g.data(), hg.data(), n, 2e-5, 1.0);

	double mean = 0;
	for (float v : g)
		mean += v;
	mean /= n;
	if (fabs(mean - 1.5) > 0.05)
		conf_fail("%s: normal(1.5, 2) has mean %.4f", what, mean);
	CK_LIB(curandDestroyGenerator(gd));
	CK_LIB(curandDestroyGenerator(gh));
	CK(cudaFree(du));
	CK(cudaFree(df));
	uint64_t h = conf_fnv(u.data(), n * sizeof(unsigned));
	h = conf_fnv(f.data(), n * sizeof(float), h);
	return conf_fnv(g.data(), n * sizeof(float), h);
}

// ---- device API ------------------------------------------------------------------------------

#define DRAWS 10 // per thread: not a multiple of 4, so a counter step falls mid-draw

__global__ void conf_curand_draw(unsigned long long s, unsigned *out, float *uni, int threads)
{
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	curandStatePhilox4_32_10_t st;

	if (t >= threads)
		return;
	curand_init(s, t, 0, &st);
	for (int j = 0; j < DRAWS; j++)
		out[(size_t)t * DRAWS + j] = curand(&st);
	uni[t] = curand_uniform(&st);
}

struct u4 {
	unsigned x, y, z, w;
};

static u4 philox_round(u4 c, unsigned k0, unsigned k1)
{
	unsigned long long p0 = 0xD2511F53ull * c.x, p1 = 0xCD9E8D57ull * c.z;
	u4 r = {(unsigned)(p1 >> 32) ^ c.y ^ k0, (unsigned)p1, (unsigned)(p0 >> 32) ^ c.w ^ k1,
		(unsigned)p0};
	return r;
}

static u4 philox10(u4 c, unsigned k0, unsigned k1)
{
	for (int i = 0; i < 9; i++) {
		c = philox_round(c, k0, k1);
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	return philox_round(c, k0, k1);
}

// output j of the state curand_init(seed, t, 0) makes: counter (j / 4, 0, t, 0), word j % 4
static unsigned philox_draw(unsigned long long s, unsigned t, unsigned j)
{
	u4 c = {j / 4, 0, t, 0};
	u4 r = philox10(c, (unsigned)s, (unsigned)(s >> 32));
	const unsigned w[4] = {r.x, r.y, r.z, r.w};
	return w[j % 4];
}

static uint64_t device_api(void)
{
	const int threads = 3000;
	unsigned *dout;
	float *duni;
	std::vector<unsigned> out((size_t)threads * DRAWS), want(out.size());
	std::vector<float> uni(threads), wuni(threads);

	CK(cudaMalloc(&dout, out.size() * sizeof(unsigned)));
	CK(cudaMalloc(&duni, threads * sizeof(float)));
	conf_curand_draw<<<(threads + 127) / 128, 128>>>(seed, dout, duni, threads);
	CK_LAUNCH();
	CK(cudaMemcpy(out.data(), dout, out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(uni.data(), duni, threads * sizeof(float), cudaMemcpyDeviceToHost));
	for (int t = 0; t < threads; t++) {
		for (unsigned j = 0; j < DRAWS; j++)
			want[(size_t)t * DRAWS + j] = philox_draw(seed, (unsigned)t, j);
		// curand_uniform: x * 2^-32 + 2^-33, in (0, 1]
		wuni[t] =
		    (float)((double)philox_draw(seed, (unsigned)t, DRAWS) * 0x1p-32 + 0x1p-33);
	}
	conf_expect_close("device API curand()", out.data(), want.data(), out.size(), 0.0, 0.0);
	conf_expect_close("device API curand_uniform()", uni.data(), wuni.data(), threads, 1e-6,
			  1e-6);
	CK(cudaFree(dout));
	CK(cudaFree(duni));
	return conf_fnv(out.data(), out.size() * sizeof(unsigned),
			conf_fnv(uni.data(), threads * sizeof(float)));
}

int main()
{
	conf_skip_on_simulated(PROG,
			       "cuRAND's generators and the device-API kernel have no C twins");

	int version = 0;
	CK_LIB(curandGetVersion(&version));
	uint64_t xorwow = host_api(CURAND_RNG_PSEUDO_XORWOW, "host API XORWOW");
	uint64_t philox = host_api(CURAND_RNG_PSEUDO_PHILOX4_32_10, "host API Philox");
	uint64_t dev = device_api();
	return conf_result(PROG, "xorwow=%016llx philox=%016llx device=%016llx",
			   (unsigned long long)xorwow, (unsigned long long)philox,
			   (unsigned long long)dev);
}
