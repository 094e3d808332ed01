// Peer-copy bandwidth between devices 0 and 1 (issue 13): cudaMemcpyPeer of 1 MiB to 1 GiB,
// both directions, each size timed over enough repetitions to last about 0.2 s, the bytes of
// the last copy checked against the pattern. One line per size and direction:
//   peer 0->1 SIZE_MIB GB/s
// Through rgpu the two devices may be two servers (RGPU_SERVERS), the copy relayed by the
// client. Exit 1 on a wrong byte or a CUDA error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
			       cudaGetErrorName(e_));                                              \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now(void)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
	    .count();
}

int main(int argc, char **argv)
{
	size_t max_mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
	int n = 0;
	unsigned char *buf[2], *host, *back;

	CK(cudaGetDeviceCount(&n));
	if (n < 2) {
		printf("FAIL %d device(s): two needed\n", n);
		return 1;
	}
	size_t max = max_mib << 20;
	host = (unsigned char *)malloc(max);
	back = (unsigned char *)malloc(max);
	for (size_t i = 0; i < max; i++)
		host[i] = (unsigned char)(i * 2654435761u >> 13);
	for (int d = 0; d < 2; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMalloc(&buf[d], max));
	}
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(buf[0], host, max, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(1));
	CK(cudaMemcpy(buf[1], host, max, cudaMemcpyHostToDevice));
	for (size_t mib = 1; mib <= max_mib; mib *= 4) {
		size_t size = mib << 20;
		for (int dir = 0; dir < 2; dir++) {
			int s = dir, t = 1 - dir, reps = 0;
			double t0, el;
			CK(cudaSetDevice(s));
			CK(cudaMemset(buf[t], 0, size)); // the check below sees only this size's copies
			CK(cudaDeviceSynchronize());
			t0 = now();
			do {
				CK(cudaMemcpyPeer(buf[t], t, buf[s], s, size));
				reps++;
				CK(cudaDeviceSynchronize());
				CK(cudaSetDevice(t));
				CK(cudaDeviceSynchronize());
				CK(cudaSetDevice(s));
				el = now() - t0;
			} while (el < 0.2 && reps < 1000);
			CK(cudaMemcpy(back, buf[t], size, cudaMemcpyDeviceToHost));
			if (memcmp(back, host, size)) {
				printf("FAIL peer %d->%d %zu MiB: wrong bytes\n", s, t, mib);
				return 1;
			}
			printf("peer %d->%d %6zu MiB %8.2f GB/s (%d copies)\n", s, t, mib,
			       (double)size * reps / el / 1e9, reps);
			fflush(stdout);
		}
	}
	return 0;
}
