// Device properties as the runtime reports them, printed as one line
//   props NAME|MAJOR|MINOR|SMS|MIB|WARP|MAXTPB
// and, when RGPU_EXPECT_PROPS holds a line of the same form (without "props "), compared with
// it field by field. Also: at least one device, and a driver of CUDA 13.0 or newer.
#include "rt_check.h"

int main()
{
	int count = 0, driver = 0;
	cudaDeviceProp p;
	char line[512];
	const char *expect = getenv("RGPU_EXPECT_PROPS");

	CK(cudaGetDeviceCount(&count));
	if (count < 1)
		rt_fail("cudaGetDeviceCount = %d, want >= 1", count);
	CK(cudaDriverGetVersion(&driver));
	if (driver < 13000)
		rt_fail("cudaDriverGetVersion = %d, want >= 13000", driver);
	CK(cudaGetDeviceProperties(&p, 0));
	snprintf(line, sizeof(line), "%s|%d|%d|%d|%zu|%d|%d", p.name, p.major, p.minor,
		 p.multiProcessorCount, p.totalGlobalMem >> 20, p.warpSize, p.maxThreadsPerBlock);
	printf("props %s\n", line);

	if (expect) {
		static const char *const names[] = {"name",
						    "major",
						    "minor",
						    "multiProcessorCount",
						    "totalGlobalMem MiB",
						    "warpSize",
						    "maxThreadsPerBlock"};
		const char *g = line, *w = expect;
		for (int f = 0; f < 7; f++) {
			size_t gl = strcspn(g, "|"), wl = strcspn(w, "|");
			if (gl != wl || memcmp(g, w, gl))
				rt_fail("%s = %.*s, want %.*s", names[f], (int)gl, g, (int)wl, w);
			g += gl + (g[gl] == '|');
			w += wl + (w[wl] == '|');
		}
		if (*w)
			rt_fail("RGPU_EXPECT_PROPS has more than 7 fields: %s", expect);
	}
	char summary[64];
	snprintf(summary, sizeof(summary), "%d device(s), driver %d%s", count, driver,
		 expect ? ", as expected" : "");
	return rt_done("rt_props", summary);
}
