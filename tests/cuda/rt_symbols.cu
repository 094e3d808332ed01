// __device__ and __constant__ variables through the runtime API: initial values from the
// image, cudaMemcpyToSymbol / cudaMemcpyFromSymbol whole and at an offset, a kernel that reads
// the constant bank and writes the device globals, and cudaGetSymbolAddress /
// cudaGetSymbolSize for one of them, used as an ordinary device pointer.
#include <cstddef>

#include "rt_check.h"

struct Cfg {
	int a;
	float b;
	unsigned long long c;
	short d[4];
}; // 24 bytes, the same layout on host and device

__device__ int d_int = 12345; // initialised in the image
__device__ float d_farr[64];
__device__ Cfg d_cfg;
__device__ unsigned d_out[32];
__constant__ int c_int;
__constant__ float c_table[32];
__constant__ Cfg c_cfg = {7, 0.5f, 0x0123456789abcdefull, {1, -2, 3, -4}};

// 32 threads; thread 0 also writes the scalars.
__global__ void use_symbols(int k)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < 32) {
		d_out[i] = (unsigned)c_int * (i + 1) + (unsigned)(int)c_table[i] +
			   (unsigned)c_cfg.d[i % 4];
		d_farr[i] = d_farr[i] + c_table[i];
		d_farr[i + 32] = c_table[i] * c_cfg.b;
	}
	if (i == 0) {
		d_int = d_int + c_int + k;
		d_cfg.a = c_cfg.a * 3;
		d_cfg.b = c_cfg.b + 1.0f;
		d_cfg.c = c_cfg.c ^ 0xffff0000ffff0000ull;
		for (int j = 0; j < 4; j++)
			d_cfg.d[j] = (short)(c_cfg.d[j] - j);
	}
}

static void expect_cfg(const char *what, const Cfg &got, const Cfg &want)
{
	if (got.a != want.a || memcmp(&got.b, &want.b, sizeof(float)) || got.c != want.c ||
	    memcmp(got.d, want.d, sizeof(got.d)))
		rt_fail("%s = {%d, %.9g, 0x%llx, {%d, %d, %d, %d}}, want {%d, %.9g, 0x%llx, "
			"{%d, %d, %d, %d}}",
			what, got.a, got.b, got.c, got.d[0], got.d[1], got.d[2], got.d[3], want.a,
			want.b, want.c, want.d[0], want.d[1], want.d[2], want.d[3]);
}

int main()
{
	const int k = 5, cint = 1000003;
	const unsigned long long newc = 0x5555aaaa12345678ull;
	float table[32], part[8], got_table[32], got_part[4];
	float farr[64], want_farr[64], got_farr[64], via_ptr[64];
	unsigned want_out[32], got_out[32];
	Cfg cfg, want_cfg, got_cfg;
	const Cfg init_cfg = {7, 0.5f, 0x0123456789abcdefull, {1, -2, 3, -4}};
	int v;

	// values from the image, before anything is written
	CK(cudaMemcpyFromSymbol(&v, d_int, sizeof(v)));
	if (v != 12345)
		rt_fail("d_int from the image = %d, want 12345", v);
	CK(cudaMemcpyFromSymbol(&cfg, c_cfg, sizeof(cfg)));
	expect_cfg("c_cfg from the image", cfg, init_cfg);

	// constants: whole, then a middle part of the table and one member of the struct
	for (int i = 0; i < 32; i++)
		table[i] = (float)i * 0.75f - 8.0f;
	for (int i = 0; i < 8; i++)
		part[i] = -100.25f - (float)i * 3.0f;
	CK(cudaMemcpyToSymbol(c_int, &cint, sizeof(cint)));
	CK(cudaMemcpyToSymbol(c_table, table, sizeof(table)));
	CK(cudaMemcpyToSymbol(c_table, part, sizeof(part), 16 * sizeof(float)));
	memcpy(&table[16], part, sizeof(part));
	CK(cudaMemcpyToSymbol(c_cfg, &newc, sizeof(newc), offsetof(Cfg, c)));
	cfg = init_cfg;
	cfg.c = newc;

	CK(cudaMemcpyFromSymbol(&v, c_int, sizeof(v)));
	if (v != cint)
		rt_fail("c_int = %d, want %d", v, cint);
	CK(cudaMemcpyFromSymbol(got_table, c_table, sizeof(got_table)));
	rt_expect_f32("c_table", got_table, table, 32);
	CK(cudaMemcpyFromSymbol(got_part, c_table, sizeof(got_part), 14 * sizeof(float)));
	rt_expect_f32("c_table[14..18)", got_part, &table[14], 4);
	CK(cudaMemcpyFromSymbol(&got_cfg, c_cfg, sizeof(got_cfg)));
	expect_cfg("c_cfg", got_cfg, cfg);

	// device globals, and d_farr through its address
	for (int i = 0; i < 64; i++)
		farr[i] = (float)(i * i) * 0.5f + 1.0f;
	v = 777;
	CK(cudaMemcpyToSymbol(d_int, &v, sizeof(v)));
	CK(cudaMemcpyToSymbol(d_farr, farr, sizeof(farr)));
	void *p = nullptr;
	size_t size = 0;
	CK(cudaGetSymbolAddress(&p, d_farr));
	CK(cudaGetSymbolSize(&size, d_farr));
	if (size != sizeof(farr))
		rt_fail("cudaGetSymbolSize(d_farr) = %zu, want %zu", size, sizeof(farr));
	CK(cudaMemcpy(via_ptr, p, sizeof(via_ptr), cudaMemcpyDeviceToHost));
	rt_expect_f32("d_farr through cudaGetSymbolAddress", via_ptr, farr, 64);
	farr[5] = 4242.5f; // a write through the pointer, which the kernel then reads
	CK(cudaMemcpy((float *)p + 5, &farr[5], sizeof(float), cudaMemcpyHostToDevice));

	use_symbols<<<2, 16>>>(k);
	CK_LAUNCH();
	CK(cudaDeviceSynchronize());

	for (int i = 0; i < 32; i++) {
		want_out[i] = (unsigned)cint * (unsigned)(i + 1) + (unsigned)(int)table[i] +
			      (unsigned)cfg.d[i % 4];
		want_farr[i] = farr[i] + table[i];
		want_farr[i + 32] = table[i] * cfg.b;
	}
	want_cfg.a = cfg.a * 3;
	want_cfg.b = cfg.b + 1.0f;
	want_cfg.c = cfg.c ^ 0xffff0000ffff0000ull;
	for (int j = 0; j < 4; j++)
		want_cfg.d[j] = (short)(cfg.d[j] - j);

	CK(cudaMemcpyFromSymbol(got_out, d_out, sizeof(got_out)));
	rt_expect_u32("d_out", got_out, want_out, 32);
	CK(cudaMemcpyFromSymbol(&v, d_int, sizeof(v)));
	if (v != 777 + cint + k)
		rt_fail("d_int = %d, want %d", v, 777 + cint + k);
	CK(cudaMemcpyFromSymbol(got_farr, d_farr, sizeof(got_farr)));
	rt_expect_f32("d_farr", got_farr, want_farr, 64);
	CK(cudaMemcpyFromSymbol(got_part, d_farr, sizeof(got_part), 30 * sizeof(float)));
	rt_expect_f32("d_farr[30..34)", got_part, &want_farr[30], 4);
	CK(cudaMemcpyFromSymbol(&got_cfg, d_cfg, sizeof(got_cfg)));
	expect_cfg("d_cfg", got_cfg, want_cfg);
	return rt_done("rt_symbols", "7 symbols");
}
