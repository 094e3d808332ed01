// cuFFT through its shared object (-lcufft): forward C2C and R2C transforms in 1D, 2D and 3D
// (plans made with cufftPlan1d/2d/3d, sizes that are not powers of two among them), then an
// inverse C2C that must give the input back times N. Checked against a DFT on the CPU in
// double, within 2e-5 of the largest output; the result line digests the raw outputs (cuFFT
// is deterministic for a plan on a given GPU).
// simgpu has no twins of cuFFT's kernels: skipped there (exit 77).
#include <cmath>
#include <complex>
#include <vector>

#include <cufft.h>

#include "conf.h"

#define PROG "cufft"

typedef std::complex<double> cd;

// In-place DFT along one axis of a row-major array of dims[0..nd), sign -1 forward.
static void dft_axis(std::vector<cd> &x, const std::vector<int> &dims, int axis, int sign)
{
	size_t inner = 1, outer = 1;
	int len = dims[axis];
	for (size_t i = axis + 1; i < dims.size(); i++)
		inner *= dims[i];
	for (int i = 0; i < axis; i++)
		outer *= dims[i];
	std::vector<cd> line(len), out(len);
	for (size_t o = 0; o < outer; o++)
		for (size_t in = 0; in < inner; in++) {
			size_t base = o * len * inner + in;
			for (int t = 0; t < len; t++)
				line[t] = x[base + t * inner];
			for (int f = 0; f < len; f++) {
				cd s = 0;
				for (int t = 0; t < len; t++) {
					double ang = sign * 2.0 * M_PI *
						     (double)((long long)f * t % len) / len;
					s += line[t] * cd(cos(ang), sin(ang));
				}
				out[f] = s;
			}
			for (int f = 0; f < len; f++)
				x[base + f * inner] = out[f];
		}
}

static std::vector<cd> dft(std::vector<cd> x, const std::vector<int> &dims, int sign)
{
	for (size_t a = 0; a < dims.size(); a++)
		dft_axis(x, dims, (int)a, sign);
	return x;
}

static double input(size_t i, unsigned salt)
{
	return sin(0.37 * (double)i + salt) + 0.25 * (double)((i * 7 + salt) % 5);
}

static size_t count(const std::vector<int> &dims)
{
	size_t n = 1;
	for (int d : dims)
		n *= d;
	return n;
}

static cufftHandle plan_for(const std::vector<int> &dims, cufftType type)
{
	cufftHandle p;
	if (dims.size() == 1)
		CK_LIB(cufftPlan1d(&p, dims[0], type, 1));
	else if (dims.size() == 2)
		CK_LIB(cufftPlan2d(&p, dims[0], dims[1], type));
	else
		CK_LIB(cufftPlan3d(&p, dims[0], dims[1], dims[2], type));
	return p;
}

static void compare(const char *what, const std::vector<cufftComplex> &got,
		    const std::vector<cd> &want)
{
	double peak = 0;
	size_t bad = 0;
	for (const cd &w : want)
		peak = fmax(peak, std::abs(w));
	for (size_t i = 0; i < want.size(); i++) {
		double d = std::abs(cd(got[i].x, got[i].y) - want[i]);
		if (!(d <= 2e-5 * peak) && ++bad <= 5)
			conf_fail("%s[%zu] = (%.7g, %.7g), want (%.7g, %.7g)", what, i, got[i].x,
				  got[i].y, want[i].real(), want[i].imag());
	}
	if (bad > 5)
		conf_fail("%s: %zu of %zu values differ", what, bad, want.size());
}

// forward C2C of dims, then the inverse, checked; returns a digest of the forward output
static uint64_t c2c(const std::vector<int> &dims, const char *what)
{
	size_t n = count(dims);
	std::vector<cufftComplex> h(n), out(n);
	std::vector<cd> x(n);
	for (size_t i = 0; i < n; i++) {
		x[i] = cd(input(i, 1), input(i, 2));
		h[i].x = (float)x[i].real();
		h[i].y = (float)x[i].imag();
		x[i] = cd(h[i].x, h[i].y); // the reference transforms exactly what the GPU gets
	}
	cufftComplex *d;
	CK(cudaMalloc(&d, n * sizeof(cufftComplex)));
	CK(cudaMemcpy(d, h.data(), n * sizeof(cufftComplex), cudaMemcpyHostToDevice));
	cufftHandle p = plan_for(dims, CUFFT_C2C);
	CK_LIB(cufftExecC2C(p, d, d, CUFFT_FORWARD));
	CK(cudaMemcpy(out.data(), d, n * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
	compare(what, out, dft(x, dims, -1));
	uint64_t digest = conf_fnv(out.data(), n * sizeof(cufftComplex));

	CK_LIB(cufftExecC2C(p, d, d, CUFFT_INVERSE));
	std::vector<cufftComplex> back(n);
	CK(cudaMemcpy(back.data(), d, n * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
	std::vector<cd> want(n);
	for (size_t i = 0; i < n; i++)
		want[i] = x[i] * (double)n;
	compare(what, back, want);
	CK_LIB(cufftDestroy(p));
	CK(cudaFree(d));
	return digest;
}

// forward R2C of dims: the last dimension's output holds dims.back()/2 + 1 values
static uint64_t r2c(const std::vector<int> &dims, const char *what)
{
	size_t n = count(dims), last = dims.back(), half = last / 2 + 1, nout = n / last * half;
	std::vector<float> h(n);
	std::vector<cd> x(n);
	std::vector<cufftComplex> out(nout);
	for (size_t i = 0; i < n; i++) {
		h[i] = (float)input(i, 3);
		x[i] = h[i];
	}
	float *din;
	cufftComplex *dout;
	CK(cudaMalloc(&din, n * sizeof(float)));
	CK(cudaMalloc(&dout, nout * sizeof(cufftComplex)));
	CK(cudaMemcpy(din, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
	cufftHandle p = plan_for(dims, CUFFT_R2C);
	CK_LIB(cufftExecR2C(p, din, dout));
	CK(cudaMemcpy(out.data(), dout, nout * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
	std::vector<cd> full = dft(x, dims, -1), want(nout);
	for (size_t r = 0; r < n / last; r++)
		for (size_t c = 0; c < half; c++)
			want[r * half + c] = full[r * last + c];
	compare(what, out, want);
	CK_LIB(cufftDestroy(p));
	CK(cudaFree(din));
	CK(cudaFree(dout));
	return conf_fnv(out.data(), nout * sizeof(cufftComplex));
}

int main()
{
	conf_skip_on_simulated(PROG, "cuFFT's kernels have no C twins");

	int version = 0;
	CK_LIB(cufftGetVersion(&version));
	uint64_t d[6];
	d[0] = c2c({1000}, "c2c 1d");
	d[1] = c2c({24, 36}, "c2c 2d");
	d[2] = c2c({10, 12, 16}, "c2c 3d");
	d[3] = r2c({300}, "r2c 1d");
	d[4] = r2c({20, 36}, "r2c 2d");
	d[5] = r2c({8, 12, 18}, "r2c 3d");
	return conf_result(
	    PROG, "c2c1=%016llx c2c2=%016llx c2c3=%016llx r2c1=%016llx r2c2=%016llx r2c3=%016llx",
	    (unsigned long long)d[0], (unsigned long long)d[1], (unsigned long long)d[2],
	    (unsigned long long)d[3], (unsigned long long)d[4], (unsigned long long)d[5]);
}
