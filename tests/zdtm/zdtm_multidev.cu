// zdtm multidev: one program using every device it sees, through the CUDA runtime (issue 13:
// devices of several servers, RGPU_SERVERS).
//
// State, per device d of the n (at least 2): a slice of one vector, V_d = combine(A, B) over its
// share of the elements (unequal shares), computed on device d by one host thread per device;
// and two ring buffers, R_d (5 MiB + 4099 bytes: more than one relay chunk, an odd tail) that
// holds device (d + 1) % n's pattern and L_d that holds device (d - 1)'s, both moved by peer
// copies (one each way round the ring).
//
// Checks after each signal: every byte of every V_d, R_d and L_d. Then it exercises them: a
// kernel steps each V_d (a thread per device, at once); each device fills a source with a new
// seed, records an event, and the next device's stream waits for that event before a
// cudaMemcpyPeerAsync on it pulls the bytes (then the same the other way round, on the source's
// stream); a cudaMemcpy with cudaMemcpyDefault moves one device's bytes to another's while a
// third (or the first) is current; a host-to-device copy and a memset reach a device that is not
// current; a buffer of another device is freed. Under rgpu (RGPU_SERVERS set) also: no device
// can access another's memory (cudaDeviceCanAccessPeer 0, cudaDeviceEnablePeerAccess
// refused), two servers' events give no elapsed time, and every allocation of device d lies
// below every one of device d + 1 (each device has its own slice of the window).
// ZDTM_NDEV=N: the device count the program must see.
#include <pthread.h>
#include <stdint.h>

#include "zdtm.h"

enum { MAXDEV = 16 };
static const size_t RING = (5u << 20) + 4099;  // bytes
static const size_t NVEC = (3u << 20) + 17;    // u32 elements of the whole vector

static int ndev;
static bool under_rgpu;
static size_t share_off[MAXDEV + 1];           // V_d covers elements [share_off[d], share_off[d+1])
static unsigned *vec_d[MAXDEV], *vec_want;     // device slices; the whole expected vector
static unsigned char *ring_r[MAXDEV], *ring_l[MAXDEV];
static unsigned char *want_r[MAXDEV], *want_l[MAXDEV];
static cudaStream_t stream[MAXDEV];

static size_t share(int d)
{
	return share_off[d + 1] - share_off[d];
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = zd_byte(i, seed);
}

// Device d's vector slice: combine of two hashed inputs, or one more step (k) of it.
struct vec_job {
	int d;
	int k; // 0: compute from the inputs, else step with k
};

static void *vec_main(void *arg)
{
	struct vec_job *j = (struct vec_job *)arg;
	int d = j->d;
	size_t n = share(d), off = share_off[d];

	ZK(cudaSetDevice(d));
	if (j->k == 0) {
		unsigned *a, *b, *ha = (unsigned *)malloc(n * 4), *hb = (unsigned *)malloc(n * 4);
		for (size_t i = 0; i < n; i++) {
			ha[i] = zd_hash(off + i, 11);
			hb[i] = zd_hash(off + i, 12);
		}
		ZK(cudaMalloc(&a, n * 4));
		ZK(cudaMalloc(&b, n * 4));
		ZK(cudaMalloc(&vec_d[d], n * 4));
		ZK(cudaMemcpyAsync(a, ha, n * 4, cudaMemcpyHostToDevice, stream[d]));
		ZK(cudaMemcpyAsync(b, hb, n * 4, cudaMemcpyHostToDevice, stream[d]));
		zd_combine_u32<<<zd_blocks(n), 256, 0, stream[d]>>>(vec_d[d], a, b, n);
		ZK_LAUNCH();
		ZK(cudaStreamSynchronize(stream[d]));
		ZK(cudaFree(a));
		ZK(cudaFree(b));
		free(ha);
		free(hb);
	} else {
		zd_step_u32<<<zd_blocks(n), 256, 0, stream[d]>>>(vec_d[d], n, (unsigned)j->k);
		ZK_LAUNCH();
		ZK(cudaStreamSynchronize(stream[d]));
	}
	return NULL;
}

// Every device's slice at once, one host thread per device.
static void vec_all(int k)
{
	pthread_t t[MAXDEV];
	struct vec_job j[MAXDEV];

	for (int d = 0; d < ndev; d++) {
		j[d] = (struct vec_job){d, k};
		if (pthread_create(&t[d], NULL, vec_main, &j[d])) {
			zd_fail("pthread_create");
			return;
		}
	}
	for (int d = 0; d < ndev; d++)
		pthread_join(t[d], NULL);
	for (int d = 0; d < ndev; d++)
		for (size_t i = share_off[d]; i < share_off[d + 1]; i++)
			vec_want[i] = k == 0 ? zd_combine_word(zd_hash(i, 11), zd_hash(i, 12))
					     : zd_step_word(vec_want[i], i - share_off[d],
							    (unsigned)k);
}

// Device s fills a scratch buffer with seed, records an event on its stream; the copy into
// dst (device t's) runs on `on`'s stream (s or t) after that stream waited for the event.
static void ring_move(int s, int t, unsigned char *dst, unsigned char *want, unsigned seed,
		      int on)
{
	unsigned char *src;
	cudaEvent_t ev;

	ZK(cudaSetDevice(s));
	ZK(cudaMalloc(&src, RING));
	ZK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	zd_fill_bytes<<<zd_blocks(RING), 256, 0, stream[s]>>>(src, RING, seed);
	ZK_LAUNCH();
	ZK(cudaEventRecord(ev, stream[s]));
	ZK(cudaSetDevice(on));
	ZK(cudaStreamWaitEvent(stream[on], ev, 0));
	ZK(cudaMemcpyPeerAsync(dst, t, src, s, RING, stream[on]));
	ZK(cudaStreamSynchronize(stream[on]));
	pattern(want, RING, seed);
	ZK(cudaEventDestroy(ev));
	ZK(cudaFree(src)); // device s's, freed with `on` current
}

static void rings(unsigned round)
{
	for (int d = 0; d < ndev; d++) {
		int next = (d + 1) % ndev, prev = (d + ndev - 1) % ndev;
		// R_d from the next device, on the destination's stream; L_d from the one before,
		// on the source's
		ring_move(next, d, ring_r[d], want_r[d], 100 * round + 2 * d, d);
		ring_move(prev, d, ring_l[d], want_l[d], 100 * round + 2 * d + 1, prev);
	}
}

static void check_all(void)
{
	char what[64];
	unsigned *got = (unsigned *)malloc(NVEC * 4);

	for (int d = 0; d < ndev; d++) {
		ZK(cudaSetDevice(d));
		ZK(cudaMemcpy(got + share_off[d], vec_d[d], share(d) * 4, cudaMemcpyDeviceToHost));
	}
	zd_compare("vector", got, vec_want, NVEC * 4, 4);
	free(got);
	// read each device's rings with device 0 current: the copies reach the other servers
	ZK(cudaSetDevice(0));
	for (int d = 0; d < ndev; d++) {
		snprintf(what, sizeof(what), "ring R_%d (from device %d)", d, (d + 1) % ndev);
		zd_compare_dev(what, ring_r[d], want_r[d], RING, 1);
		snprintf(what, sizeof(what), "ring L_%d (from device %d)", d, (d + ndev - 1) % ndev);
		zd_compare_dev(what, ring_l[d], want_l[d], RING, 1);
	}
}

// Copies and sets that name another device's memory than the current one's.
static void cross_current(unsigned round)
{
	int cur = 0, a = 1, b = ndev > 2 ? 2 : 0; // a is never current, b is with two devices
	size_t n = (1u << 20) + 3;
	unsigned char *h = (unsigned char *)malloc(n), *want = (unsigned char *)malloc(n), *x, *y;

	// device-to-device between a and b with `cur` current, cudaMemcpyDefault
	ZK(cudaSetDevice(a));
	ZK(cudaMalloc(&x, n));
	ZK(cudaSetDevice(b));
	ZK(cudaMalloc(&y, n));
	pattern(want, n, 7000 + round);
	ZK(cudaSetDevice(cur));
	ZK(cudaMemcpy(x, want, n, cudaMemcpyHostToDevice)); // to a, not current
	ZK(cudaMemcpy(y, x, n, cudaMemcpyDefault));          // a to b
	ZK(cudaMemcpy(h, y, n, cudaMemcpyDeviceToHost));
	zd_compare("host -> device a -> device b, another device current", h, want, n, 1);
	ZK(cudaMemset(x + 5, 0xa5, 1000)); // a's memory, not current
	memset(want + 5, 0xa5, 1000);
	ZK(cudaMemcpy(h, x, n, cudaMemcpyDefault));
	zd_compare("memset of another device's memory", h, want, n, 1);
	ZK(cudaFree(x));
	ZK(cudaFree(y));
	free(h);
	free(want);
}

static void rgpu_facts(void)
{
	for (int d = 0; d < ndev; d++)
		for (int p = 0; p < ndev; p++) {
			int can = -1;
			if (p == d)
				continue;
			ZK(cudaDeviceCanAccessPeer(&can, d, p));
			if (zd_expect(can == 0, "cudaDeviceCanAccessPeer(%d, %d) = %d, want 0", d, p, can))
				zd_checks++;
		}
	// device 0 and the last one: on two servers in every setup the tests run
	int last = ndev - 1;
	ZK(cudaSetDevice(0));
	cudaError_t e = cudaDeviceEnablePeerAccess(last, 0);
	if (zd_expect(e == cudaErrorPeerAccessUnsupported,
		      "cudaDeviceEnablePeerAccess(%d) = %s, want cudaErrorPeerAccessUnsupported", last,
		      cudaGetErrorName(e)))
		zd_checks++;
	(void)cudaGetLastError();
	cudaEvent_t e0, e1;
	float ms = -1;
	ZK(cudaEventCreate(&e0));
	ZK(cudaEventRecord(e0, stream[0]));
	ZK(cudaSetDevice(last));
	ZK(cudaEventCreate(&e1));
	ZK(cudaEventRecord(e1, stream[last]));
	ZK(cudaEventSynchronize(e0)); // device 0's event, another device current
	ZK(cudaEventSynchronize(e1));
	e = cudaEventElapsedTime(&ms, e0, e1);
	if (zd_expect(e != cudaSuccess, "elapsed time between two servers' events: %g ms", ms))
		zd_checks++;
	(void)cudaGetLastError();
	ZK(cudaEventDestroy(e1));
	ZK(cudaSetDevice(0));
	ZK(cudaEventDestroy(e0));
	// each device's memory in its own slice, in device order
	for (int d = 0; d + 1 < ndev; d++) {
		uintptr_t hi = (uintptr_t)vec_d[d] > (uintptr_t)ring_r[d] ? (uintptr_t)vec_d[d]
									  : (uintptr_t)ring_r[d];
		hi = hi > (uintptr_t)ring_l[d] ? hi : (uintptr_t)ring_l[d];
		uintptr_t lo = (uintptr_t)vec_d[d + 1] < (uintptr_t)ring_r[d + 1]
				   ? (uintptr_t)vec_d[d + 1]
				   : (uintptr_t)ring_r[d + 1];
		lo = lo < (uintptr_t)ring_l[d + 1] ? lo : (uintptr_t)ring_l[d + 1];
		if (zd_expect(hi < lo, "device %d's memory (up to %#lx) is not below device %d's (from %#lx)",
			      d, (unsigned long)hi, d + 1, (unsigned long)lo))
			zd_checks++;
	}
}

int main(void)
{
	const char *want_n = getenv("ZDTM_NDEV");
	char extra[64];

	zd_init("multidev");
	under_rgpu = getenv("RGPU_SERVERS") != NULL;
	ZK(cudaGetDeviceCount(&ndev));
	if (want_n && atoi(want_n) != ndev) {
		zd_fail("%d devices, want %s", ndev, want_n);
		zd_round_end(0);
	}
	if (ndev < 2 || ndev > MAXDEV) {
		zd_fail("%d devices: this program needs 2 to %d", ndev, MAXDEV);
		zd_round_end(0);
	}
	for (int d = 0; d < ndev; d++) {
		cudaDeviceProp p;
		ZK(cudaGetDeviceProperties(&p, d));
		if (zd_expect(p.name[0] && p.totalGlobalMem > 0, "device %d: no name or memory", d))
			zd_checks++;
		// unequal shares: device d gets (d + 1) parts
		share_off[d + 1] = share_off[d] + NVEC * (d + 1) / ((size_t)ndev * (ndev + 1) / 2);
		ZK(cudaSetDevice(d));
		ZK(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking));
		ZK(cudaMalloc(&ring_r[d], RING));
		ZK(cudaMalloc(&ring_l[d], RING));
		want_r[d] = (unsigned char *)malloc(RING);
		want_l[d] = (unsigned char *)malloc(RING);
	}
	share_off[ndev] = NVEC;
	vec_want = (unsigned *)malloc(NVEC * 4);
	vec_all(0);
	rings(0);
	check_all();
	cross_current(0);
	if (under_rgpu)
		rgpu_facts();
	zd_round_end(0);
	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		check_all();
		vec_all(round + 1);
		rings(round + 1);
		cross_current(round + 1);
		check_all();
		zd_round_end(round);
	}
	snprintf(extra, sizeof(extra), "devices=%d", ndev);
	return zd_ok(extra);
}
