// zdtm graph: a captured CUDA graph and its executable graph.
//
// State: four device buffers (input, scratch, accumulator, output: 100003 words each, filled
// with hash patterns) and a pinned host buffer of seeded PRNG data. A non-blocking stream is
// captured (cudaStreamBeginCapture/EndCapture, global mode) into a graph of six nodes in a
// chain: a memset of the scratch buffer, a host-to-device copy of the pinned buffer into the
// input, three dependent kernels (scratch from input; a step of scratch; the accumulator from
// scratch) and a device-to-device copy of the accumulator into the output. It is instantiated
// and launched once, and every buffer checked, before READY. Graph and executable graph are
// both kept. The pinned buffer never changes: rgpu replays a captured host-to-device copy with
// the bytes of capture time, the driver with the bytes of launch time (docs/user-guide.md).
//
// Checks after the signal: the four buffers still hold their pre-READY contents; the graph
// still has six nodes. Then the output is reset (cudaMemset) and input and scratch scrambled,
// the SAME cudaGraphExec_t is launched again and every buffer checked (the accumulator grows
// with every launch, so a launch lost or run twice shows); it is launched once more on a
// stream created after the signal; the old cudaGraph_t is instantiated again and launched;
// a kernel reads the output into a new allocation. With ZDTM_ROUNDS=N, each round starts from
// the accumulator the last one left.
#include "zdtm.h"

enum { N = 100003, NODES = 6 };
static const size_t BYTES = N * sizeof(unsigned);
static const unsigned STEP_K = 0x6a09e667u, MEMSET_BYTE = 0x5a;

static unsigned *d_in, *d_tmp, *d_acc, *d_out, *h_src;
static unsigned *w_in, *w_tmp, *w_acc, *w_out;
static unsigned long long graph_launches;

// the graph's effect, on the host's expected buffers
static void graph_host(void)
{
	memcpy(w_in, h_src, BYTES);
	for (unsigned i = 0; i < N; i++) {
		unsigned t = MEMSET_BYTE * 0x01010101u;
		t = zd_combine_word(t, w_in[i]);
		t = zd_step_word(t, i, STEP_K);
		w_tmp[i] = t;
		w_acc[i] = zd_combine_word(w_acc[i], t);
	}
	memcpy(w_out, w_acc, BYTES);
}

static void launch(cudaGraphExec_t exec, cudaStream_t s)
{
	ZK(cudaGraphLaunch(exec, s));
	ZK(cudaStreamSynchronize(s));
	graph_host();
	graph_launches++;
}

static void fill(unsigned *d, unsigned *want, unsigned seed)
{
	zd_fill_u32<<<zd_blocks(N), 256>>>(d, N, seed);
	ZK_LAUNCH();
	for (unsigned i = 0; i < N; i++)
		want[i] = zd_hash(i, seed);
}

static void check_buffers(int round, const char *when)
{
	const struct {
		const char *name;
		unsigned *d, *w;
	} b[] = {{"input", d_in, w_in},
		 {"scratch", d_tmp, w_tmp},
		 {"accumulator", d_acc, w_acc},
		 {"output", d_out, w_out}};
	char what[128];

	for (unsigned i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		snprintf(what, sizeof(what), "round %d %s: %s buffer", round + 1, when, b[i].name);
		zd_compare_dev(what, b[i].d, b[i].w, BYTES, 4);
	}
}

static void check_nodes(cudaGraph_t g, int round, const char *when)
{
	size_t n = 0;

	ZK(cudaGraphGetNodes(g, nullptr, &n));
	zd_expect(n == NODES, "round %d %s: the graph has %zu nodes, expected %d", round + 1, when,
		  n, NODES);
}

int main()
{
	struct zd_rng rng = {0x6772617068000001ull};
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	unsigned *d_new, *w_new;

	zd_init("graph");
	ZK(cudaSetDevice(0));
	ZK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ZK(cudaMalloc(&d_in, BYTES));
	ZK(cudaMalloc(&d_tmp, BYTES));
	ZK(cudaMalloc(&d_acc, BYTES));
	ZK(cudaMalloc(&d_out, BYTES));
	ZK(cudaMalloc(&d_new, BYTES));
	ZK(cudaMallocHost(&h_src, BYTES));
	w_in = (unsigned *)malloc(BYTES);
	w_tmp = (unsigned *)malloc(BYTES);
	w_acc = (unsigned *)malloc(BYTES);
	w_out = (unsigned *)malloc(BYTES);
	w_new = (unsigned *)malloc(BYTES);
	zd_rand_fill(&rng, h_src, BYTES);
	fill(d_in, w_in, 0x61000001u);
	fill(d_tmp, w_tmp, 0x61000002u);
	fill(d_acc, w_acc, 0x61000003u);
	fill(d_out, w_out, 0x61000004u);
	ZK(cudaDeviceSynchronize());

	ZK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	ZK(cudaMemsetAsync(d_tmp, MEMSET_BYTE, BYTES, s));
	ZK(cudaMemcpyAsync(d_in, h_src, BYTES, cudaMemcpyHostToDevice, s));
	zd_combine_u32<<<zd_blocks(N), 256, 0, s>>>(d_tmp, d_tmp, d_in, N);
	ZK_LAUNCH();
	zd_step_u32<<<zd_blocks(N), 256, 0, s>>>(d_tmp, N, STEP_K);
	ZK_LAUNCH();
	zd_combine_u32<<<zd_blocks(N), 256, 0, s>>>(d_acc, d_acc, d_tmp, N);
	ZK_LAUNCH();
	ZK(cudaMemcpyAsync(d_out, d_acc, BYTES, cudaMemcpyDeviceToDevice, s));
	ZK(cudaStreamEndCapture(s, &graph));
	check_nodes(graph, -1, "after the capture");
	ZK(cudaStreamSynchronize(s));
	check_buffers(-1, "after the capture (nothing ran)");
	ZK(cudaGraphInstantiate(&exec, graph, 0));
	launch(exec, s);
	check_buffers(-1, "after the first launch");
	zd_round_end(-1);

	for (int round = 0; round < zd_rounds; round++) {
		zd_ready_wait();
		check_buffers(round, "after the signal");
		check_nodes(graph, round, "after the signal");
		zd_round_end(round);

		// a fresh input state: output zeroed, input and scratch scrambled; the graph must
		// rewrite them all
		ZK(cudaMemset(d_out, 0, BYTES));
		fill(d_in, w_in, 0x62000000u + (unsigned)round);
		fill(d_tmp, w_tmp, 0x63000000u + (unsigned)round);
		ZK(cudaDeviceSynchronize());
		launch(exec, s);
		check_buffers(round, "after relaunching the old executable graph");

		// the old executable graph on a new stream
		cudaStream_t s2;
		ZK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
		launch(exec, s2);
		ZK(cudaStreamDestroy(s2));
		check_buffers(round, "after a launch on a new stream");

		// the old graph instantiated again
		cudaGraphExec_t exec2;
		ZK(cudaGraphInstantiate(&exec2, graph, 0));
		launch(exec2, s);
		ZK(cudaGraphExecDestroy(exec2));
		check_buffers(round, "after a launch of the graph instantiated again");

		// a kernel reads the output and the input into another allocation
		ZK(cudaMemsetAsync(d_new, 0x77, BYTES,
				   s)); // on s: s does not wait for the NULL stream
		zd_combine_u32<<<zd_blocks(N), 256, 0, s>>>(d_new, d_out, d_in, N);
		ZK_LAUNCH();
		for (unsigned i = 0; i < N; i++)
			w_new[i] = zd_combine_word(w_out[i], w_in[i]);
		ZK(cudaStreamSynchronize(s));
		char what[96];
		snprintf(what, sizeof(what), "round %d: a kernel's result from the graph's output",
			 round + 1);
		zd_compare_dev(what, d_new, w_new, BYTES, 4);
		zd_round_end(round);
	}

	ZK(cudaGraphExecDestroy(exec));
	ZK(cudaGraphDestroy(graph));
	ZK(cudaStreamDestroy(s));
	ZK(cudaFree(d_in));
	ZK(cudaFree(d_tmp));
	ZK(cudaFree(d_acc));
	ZK(cudaFree(d_out));
	ZK(cudaFree(d_new));
	ZK(cudaFreeHost(h_src));
	free(w_in);
	free(w_tmp);
	free(w_acc);
	free(w_out);
	free(w_new);
	char summary[96];
	snprintf(summary, sizeof(summary), "nodes=%d graph_launches=%llu", NODES, graph_launches);
	return zd_ok(summary);
}
