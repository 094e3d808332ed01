/*
 * The capture-mode switch, graph upload and occupancy queries. Occupancy follows a simple
 * model of an sm_90 multiprocessor (2048 threads, 32 blocks, 228 KiB of shared memory, 1 KiB
 * reserved per block); it is plausible, not the real driver's calculator, and tests compare
 * rgpu with simgpu, never simgpu with a GPU.
 */
#include "sim.h"

#define SM_THREADS 2048
#define SM_BLOCKS 32
#define SM_SMEM (228 * 1024)
#define BLOCK_RESERVED_SMEM 1024
#define MAX_BLOCK_SMEM (227 * 1024)

static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUstreamCaptureMode old;
	if (!mode || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	old = capture_mode;
	capture_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec exec, CUstream stream)
{
	struct sim_stream *s;
	CUresult r;
	SIM_ENTER();
	if (!sim_handle_is(exec, SIM_GRAPHEXEC))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_stream_get(stream, &s)))
		return r;
	return CUDA_SUCCESS; /* nothing to upload: the graph lives in host memory */
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction func,
								       int block, size_t smem,
								       unsigned int flags)
{
	struct sim_func *f;
	CUresult r;
	int blocks;
	SIM_ENTER();
	if (!n || block <= 0 || block > 1024 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_func_get(func, &f)))
		return r;
	if (smem > MAX_BLOCK_SMEM) {
		*n = 0;
		return CUDA_SUCCESS;
	}
	blocks = SM_THREADS / block;
	if (blocks > SM_BLOCKS)
		blocks = SM_BLOCKS;
	if ((int)(SM_SMEM / (smem + BLOCK_RESERVED_SMEM)) < blocks)
		blocks = (int)(SM_SMEM / (smem + BLOCK_RESERVED_SMEM));
	*n = blocks;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction func, int block,
							     size_t smem)
{
	return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block, smem, 0);
}

CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t *size, CUfunction func,
							 int blocks, int block)
{
	struct sim_func *f;
	CUresult r;
	size_t per;
	SIM_ENTER();
	if (!size || blocks <= 0 || block <= 0 || block > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_func_get(func, &f)))
		return r;
	if (blocks * block > SM_THREADS || blocks > SM_BLOCKS) {
		*size = 0;
		return CUDA_SUCCESS;
	}
	per = SM_SMEM / (size_t)blocks;
	per = per > BLOCK_RESERVED_SMEM ? per - BLOCK_RESERVED_SMEM : 0;
	*size = per > MAX_BLOCK_SMEM ? MAX_BLOCK_SMEM : per;
	return CUDA_SUCCESS;
}

/* Clusters on the model above: 132 multiprocessors, up to 8 blocks a cluster (16 if asked). */
static unsigned cluster_size(const CUlaunchConfig *cfg)
{
	for (unsigned i = 0; i < cfg->numAttrs; i++)
		if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			return cfg->attrs[i].value.clusterDim.x * cfg->attrs[i].value.clusterDim.y *
			       cfg->attrs[i].value.clusterDim.z;
	return 1;
}

CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction func, const CUlaunchConfig *cfg)
{
	int per_sm;
	unsigned cs;
	CUresult r;
	if (!n || !cfg || (cfg->numAttrs && !cfg->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	r = cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
		&per_sm, func, (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ),
		cfg->sharedMemBytes, 0);
	if (r)
		return r;
	cs = cluster_size(cfg);
	if (cs == 0 || cs > 16)
		return CUDA_ERROR_INVALID_CLUSTER_SIZE;
	*n = (int)(132u * (unsigned)per_sm / cs);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int *size, CUfunction func,
						    const CUlaunchConfig *cfg)
{
	struct sim_func *f;
	CUresult r;
	SIM_ENTER();
	if (!size || !cfg)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_func_get(func, &f)))
		return r;
	*size = 8;
	return CUDA_SUCCESS;
}
