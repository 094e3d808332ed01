/*
 * Parameter packing: a kernel taking a char, a short, a 48-byte struct, a 4000-byte struct, an
 * int, a double and a pointer, launched with kernelParams and again with an `extra` buffer
 * built from cuFuncGetParamInfo.
 */
#include "common.h"

struct p48 {
	int a[12];
};
struct p4000 {
	unsigned char b[4000];
};

static void check(const unsigned long long *o, const char *how, long long sm, long long sb)
{
	EXPECT((long long)o[0] == -7 && (long long)o[1] == -1234 && (long long)o[2] == sm &&
		       (long long)o[3] == sb && (long long)o[4] == 123456789 &&
		       (long long)o[5] == 3141,
	       "%s: got %lld %lld %lld %lld %lld %lld", how, (long long)o[0], (long long)o[1],
	       (long long)o[2], (long long)o[3], (long long)o[4], (long long)o[5]);
}

int main(void)
{
	CUcontext ctx;
	CUmodule mod = setup(&ctx);
	CUfunction f;
	CUdeviceptr out;
	char c = -7;
	short sh = -1234;
	struct p48 m;
	static struct p4000 big;
	int i = 123456789;
	double d = 3.1415926;
	unsigned long long host[6];
	long long sm = 0, sb = 0;
	size_t off[7], size[7], total = 0;

	for (int k = 0; k < 12; k++)
		sm += m.a[k] = k * 1000 - 5000;
	for (int k = 0; k < 4000; k++)
		sb += big.b[k] = (unsigned char)pattern32(k, 11);
	CHECK(cuModuleGetFunction(&f, mod, "mixed_params"));
	for (int p = 0; p < 7; p++) {
		CHECK(cuFuncGetParamInfo(f, p, &off[p], &size[p]));
		total = off[p] + size[p];
	}
	EXPECT(size[0] == 1 && size[1] == 2 && size[2] == 48 && size[3] == 4000 && size[4] == 4 &&
		       size[5] == 8 && size[6] == 8,
	       "sizes %zu %zu %zu %zu %zu %zu %zu", size[0], size[1], size[2], size[3], size[4],
	       size[5], size[6]);
	EXPECT(off[1] % 2 == 0 && off[2] % 4 == 0 && off[5] % 8 == 0 && off[6] % 8 == 0,
	       "misaligned offsets");
	CHECK(cuMemAlloc(&out, sizeof(host)));

	void *args[] = {&c, &sh, &m, &big, &i, &d, &out};
	CHECK(cuMemsetD8(out, 0xff, sizeof(host)));
	CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
	CHECK(cuMemcpyDtoH(host, out, sizeof(host)));
	check(host, "kernelParams", sm, sb);

	unsigned char *buf = calloc(1, total);
	for (int p = 0; p < 7; p++)
		memcpy(buf + off[p], args[p], size[p]);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &total,
			 CU_LAUNCH_PARAM_END};
	CHECK(cuMemsetD8(out, 0xff, sizeof(host)));
	CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
	CHECK(cuMemcpyDtoH(host, out, sizeof(host)));
	check(host, "extra", sm, sb);
	free(buf);
	CHECK(cuMemFree(out));
	printf("params: %zu bytes of parameters OK both ways\n", total);
	return 0;
}
