// Managed memory as programs use it: cudaMallocManaged buffers the CPU and the GPU take turns
// on (a ping-pong, synchronising between turns), fresh memory reading as zeros on both sides, a
// file read straight into managed memory, a linked list built by the CPU and walked by a
// kernel, copies and sets naming managed memory, prefetches and advice read back, pointer
// attributes, and a buffer the CPU alone uses. Every value is checked; the lines printed are
// the same natively and through rgpu. With "bench" as the argument it times the ping-pong
// instead (RGPU_MM_BENCH_MIB sizes). The kernels' C twins are in tests/simgpu/kernels.c.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <unistd.h>

#include "rt_check.h"

// a[i] = a[i] * s + t
__global__ void mm_scale(float *a, unsigned n, float s, float t)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		a[i] = a[i] * s + t;
}

// a[i] += 1
__global__ void mm_inc(unsigned *a, unsigned long long n)
{
	for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (unsigned long long)gridDim.x * blockDim.x)
		a[i] += 1;
}

struct mm_node {
	struct mm_node *next;
	unsigned long long value;
};

// one thread: the sum of the list's values, and its length
__global__ void mm_walk(const struct mm_node *head, unsigned long long *out)
{
	unsigned long long sum = 0, len = 0;
	for (const struct mm_node *p = head; p; p = p->next) {
		sum += p->value;
		len++;
	}
	out[0] = sum;
	out[1] = len;
}

static void ping_pong(void)
{
	const unsigned n = 100000;
	float *a;
	float *model = (float *)malloc(n * sizeof(float));
	CK(cudaMallocManaged(&a, n * sizeof(float)));
	for (unsigned i = 0; i < n; i++)
		a[i] = model[i] = (float)(i % 1000);
	for (int round = 0; round < 5; round++) {
		mm_scale<<<64, 256>>>(a, n, 2.0f, 1.0f);
		CK_LAUNCH();
		CK(cudaDeviceSynchronize());
		unsigned bad = 0;
		for (unsigned i = 0; i < n; i++) {
			model[i] = model[i] * 2.0f + 1.0f;
			if (a[i] != model[i] && bad++ < 3)
				rt_fail("ping-pong round %d: a[%u] = %g, want %g", round, i, a[i],
					model[i]);
		}
		// the CPU's turn
		for (unsigned i = 0; i < n; i++) {
			a[i] -= 3.0f;
			model[i] -= 3.0f;
		}
		printf("ping-pong round %d: %s\n", round, bad ? "FAIL" : "ok");
	}
	free(model);
	CK(cudaFree(a));
}

static void fresh_and_stream(void)
{
	const unsigned long long n = 3u << 20; // 12 MiB of u32: several read-ahead steps
	unsigned *u;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMallocManaged(&u, n * sizeof(unsigned)));
	unsigned long long nz = 0;
	for (unsigned long long i = 0; i < n; i++)
		nz += u[i] != 0;
	printf("fresh managed memory: %llu nonzero words of %llu\n", nz, n);
	mm_inc<<<128, 256, 0, s>>>(u, n);
	CK_LAUNCH();
	CK(cudaStreamSynchronize(s));
	unsigned long long ones = 0;
	for (unsigned long long i = 0; i < n; i++)
		ones += u[i] == 1;
	printf("after a kernel on a non-blocking stream: %llu words are 1\n", ones);
	if (ones != n)
		rt_fail("%llu of %llu words are 1", ones, n);
	// the CPU writes a few scattered words, the GPU adds one everywhere
	for (unsigned long long i = 0; i < n; i += 40000)
		u[i] = 100;
	mm_inc<<<128, 256, 0, s>>>(u, n);
	CK(cudaStreamSynchronize(s));
	unsigned long long sum = 0;
	for (unsigned long long i = 0; i < n; i++)
		sum += u[i];
	unsigned long long want = 2 * n + (n + 39999) / 40000 * 99;
	printf("scattered CPU writes then a kernel: sum %llu\n", sum);
	if (sum != want)
		rt_fail("sum %llu, want %llu", sum, want);
	CK(cudaFree(u));
	CK(cudaStreamDestroy(s));
}

static void file_and_list(void)
{
	// a file read straight into fresh managed memory (the kernel, not the CPU, writes it)
	char path[] = "/tmp/rt_managed_XXXXXX";
	int fd = mkstemp(path);
	const unsigned n = 50000;
	unsigned *buf = (unsigned *)malloc(n * 4), *m;
	for (unsigned i = 0; i < n; i++)
		buf[i] = i * 7u;
	if (fd < 0 || write(fd, buf, n * 4) != (ssize_t)(n * 4))
		rt_fail("cannot write %s", path);
	CK(cudaMallocManaged(&m, n * 4));
	ssize_t got = pread(fd, m, n * 4, 0);
	printf("pread into managed memory: %zd bytes\n", got);
	mm_inc<<<32, 256>>>(m, n);
	CK(cudaDeviceSynchronize());
	unsigned bad = 0;
	for (unsigned i = 0; i < n; i++)
		bad += m[i] != i * 7u + 1;
	printf("file data incremented by a kernel: %u wrong\n", bad);
	if (bad)
		rt_fail("%u words wrong after the file read", bad);
	close(fd);
	unlink(path);
	free(buf);
	CK(cudaFree(m));

	// a linked list the CPU builds in managed memory, walked by the GPU
	struct mm_node *nodes;
	unsigned long long *out;
	const unsigned len = 1000;
	CK(cudaMallocManaged(&nodes, len * sizeof(*nodes)));
	CK(cudaMallocManaged(&out, 2 * sizeof(*out)));
	unsigned long long want = 0;
	for (unsigned i = 0; i < len; i++) {
		unsigned j = (i * 389u) % len; // a permutation: the list jumps around
		unsigned k = ((i + 1) * 389u) % len;
		nodes[j].value = j * 3ull + 1;
		nodes[j].next = i + 1 < len ? &nodes[k] : NULL;
		want += j * 3ull + 1;
	}
	mm_walk<<<1, 1>>>(&nodes[0], out);
	CK(cudaDeviceSynchronize());
	printf("list walked by a kernel: sum %llu, length %llu\n", out[0], out[1]);
	if (out[0] != want || out[1] != len)
		rt_fail("list: sum %llu length %llu, want %llu %u", out[0], out[1], want, len);
	CK(cudaFree(nodes));
	CK(cudaFree(out));
}

static cudaMemLocation on_device(int dev)
{
	cudaMemLocation l = {};
	l.type = cudaMemLocationTypeDevice;
	l.id = dev;
	return l;
}

static cudaMemLocation on_host(void)
{
	cudaMemLocation l = {};
	l.type = cudaMemLocationTypeHost;
	return l;
}

static void copies_advice_attrs(void)
{
	const unsigned n = 4096;
	unsigned *m, *d, host[n];
	int dev;
	CK(cudaGetDevice(&dev));
	CK(cudaMallocManaged(&m, n * 4));
	CK(cudaMalloc(&d, n * 4));
	for (unsigned i = 0; i < n; i++)
		m[i] = i ^ 0x5555u;
	// managed as the source and the destination of copies of every kind
	CK(cudaMemcpy(d, m, n * 4, cudaMemcpyDefault));
	CK(cudaMemset(m, 0, n * 4));
	CK(cudaMemcpy(m, d, n * 4, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy(host, m, n * 4, cudaMemcpyDeviceToHost));
	unsigned bad = 0;
	for (unsigned i = 0; i < n; i++)
		bad += host[i] != (i ^ 0x5555u) || m[i] != (i ^ 0x5555u);
	printf("copies through managed memory: %u wrong\n", bad);
	if (bad)
		rt_fail("copies: %u wrong", bad);
	CK(cudaMemset(m + 100, 0xAB, 8));
	CK(cudaDeviceSynchronize());
	printf("after cudaMemset: m[100] = %#x, m[102] = %#x\n", m[100], m[102]);

	// advice and prefetches, read back
	int v = -7;
	CK(cudaMemAdvise(m, n * 4, cudaMemAdviseSetReadMostly, on_device(dev)));
	CK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, m, n * 4));
	printf("read mostly: %d\n", v);
	CK(cudaMemAdvise(m, n * 4, cudaMemAdviseSetPreferredLocation, on_device(dev)));
	CK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributePreferredLocation, m, n * 4));
	printf("preferred location: %d\n", v);
	CK(cudaMemAdvise(m, n * 4, cudaMemAdviseSetAccessedBy, on_device(dev)));
	int acc[2] = {-7, -7};
	CK(cudaMemRangeGetAttribute(acc, sizeof(acc), cudaMemRangeAttributeAccessedBy, m, n * 4));
	printf("accessed by: %d %d\n", acc[0], acc[1]);
	CK(cudaMemPrefetchAsync(m, n * 4, on_device(dev), 0, 0));
	CK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, m, n * 4));
	printf("last prefetch: %d\n", v);
	mm_inc<<<16, 256>>>(m, n);
	CK(cudaMemPrefetchAsync(m, n * 4, on_host(), 0, 0));
	CK(cudaStreamSynchronize(0));
	CK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeLastPrefetchLocation, m, n * 4));
	printf("last prefetch: %d, m[1] = %u\n", v, m[1]);
	CK(cudaMemAdvise(m, n * 4, cudaMemAdviseUnsetReadMostly, on_device(dev)));
	CK(cudaMemRangeGetAttribute(&v, 4, cudaMemRangeAttributeReadMostly, m, n * 4));
	printf("read mostly after unset: %d\n", v);

	// pointer attributes
	cudaPointerAttributes pa;
	CK(cudaPointerGetAttributes(&pa, m));
	printf("attributes: type %d (managed %d), device %d, device pointer %s, host pointer %s\n",
	       (int)pa.type, (int)cudaMemoryTypeManaged, pa.device,
	       pa.devicePointer == m ? "same" : "other", pa.hostPointer == m ? "same" : "other");
	printf("a prefetch of host memory: %s\n",
	       cudaGetErrorName(cudaMemPrefetchAsync(host, 64, on_device(dev), 0, 0)));
	cudaGetLastError();
	CK(cudaFree(m));
	CK(cudaFree(d));
}

// Mapped pinned host memory larger than rgpu's host area (cudaHostAlloc, cudaHostAllocMapped):
// a kernel reads the host's inputs and writes its results there (zero copy).
static void mapped_host(void)
{
	const unsigned n = 1u << 20; // 4 MiB of u32
	unsigned *h, *d = NULL, flags = 0;
	CK(cudaHostAlloc(&h, n * 4, cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&d, h, 0));
	CK(cudaHostGetFlags(&flags, h));
	printf("mapped host memory: device pointer %s, flags %#x\n", d == h ? "same" : "other", flags);
	for (unsigned i = 0; i < n; i++)
		h[i] = i * 5u;
	mm_inc<<<64, 256>>>(d, n);
	CK(cudaDeviceSynchronize());
	unsigned bad = 0;
	for (unsigned i = 0; i < n; i++)
		bad += h[i] != i * 5u + 1;
	printf("a kernel on mapped host memory: %u wrong\n", bad);
	if (bad)
		rt_fail("mapped host memory: %u wrong", bad);
	// as the source and the destination of copies
	unsigned *dev;
	CK(cudaMalloc(&dev, n * 4));
	CK(cudaMemcpy(dev, h, n * 4, cudaMemcpyHostToDevice));
	mm_inc<<<64, 256>>>(dev, n);
	CK(cudaMemcpy(h, dev, n * 4, cudaMemcpyDeviceToHost));
	bad = 0;
	for (unsigned i = 0; i < n; i++)
		bad += h[i] != i * 5u + 2;
	printf("copies through mapped host memory: %u wrong\n", bad);
	if (bad)
		rt_fail("mapped host copies: %u wrong", bad);
	cudaPointerAttributes pa;
	CK(cudaPointerGetAttributes(&pa, h + 7));
	printf("mapped host attributes: type %d (host %d), host pointer %s\n", (int)pa.type,
	       (int)cudaMemoryTypeHost, pa.hostPointer == h + 7 ? "same" : "other");
	CK(cudaFree(dev));
	CK(cudaFreeHost(h));
}

static void cpu_only(void)
{
	const unsigned n = 1u << 20;
	unsigned long long *p, sum = 0;
	CK(cudaMallocManaged(&p, n * 8, cudaMemAttachHost));
	for (unsigned i = 0; i < n; i++)
		p[i] = i;
	for (unsigned i = 0; i < n; i++)
		sum += p[i];
	printf("CPU only: sum %llu\n", sum);
	if (sum != (unsigned long long)n * (n - 1) / 2)
		rt_fail("CPU only: sum %llu", sum);
	CK(cudaFree(p));
}

// The ping-pong, timed: the CPU adds one to every word, then a kernel does, RGPU_MM_ROUNDS times.
static int bench(void)
{
	const char *env = getenv("RGPU_MM_BENCH_MIB");
	const char *renv = getenv("RGPU_MM_ROUNDS");
	int rounds = renv ? atoi(renv) : 20;
	char sizes[256];
	snprintf(sizes, sizeof(sizes), "%s", env ? env : "0.0625 1 16 64");
	for (char *tok = strtok(sizes, " "); tok; tok = strtok(NULL, " ")) {
		unsigned long long n = (unsigned long long)(atof(tok) * (1 << 20)) / 4;
		unsigned *u;
		CK(cudaMallocManaged(&u, n * 4));
		memset(u, 0, n * 4);
		auto t0 = std::chrono::steady_clock::now();
		for (int r = 0; r < rounds; r++) {
			for (unsigned long long i = 0; i < n; i++)
				u[i] += 1;
			mm_inc<<<256, 256>>>(u, n);
			CK(cudaDeviceSynchronize());
		}
		// the last round's CPU read is part of a round too
		unsigned long long bad = 0;
		for (unsigned long long i = 0; i < n; i++)
			bad += u[i] != 2u * rounds;
		auto t1 = std::chrono::steady_clock::now();
		double ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / rounds;
		printf("pingpong %s MiB: %.3f ms per round%s\n", tok, ms, bad ? " WRONG" : "");
		CK(cudaFree(u));
		if (bad)
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	CK(cudaSetDevice(0));
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return bench();
	ping_pong();
	fresh_and_stream();
	file_and_list();
	copies_advice_attrs();
	mapped_host();
	cpu_only();
	if (rt_failures) {
		printf("rt_managed: %d checks failed\n", rt_failures);
		return 1;
	}
	printf("rt_managed: all checks passed\n");
	return 0;
}
