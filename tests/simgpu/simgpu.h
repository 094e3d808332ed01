/*
 * simgpu kernel registry: the C twins of the test programs' device code.
 *
 * simgpu (tests/simgpu/, design.md §10) is a host-memory test double of libcuda.so.1. It runs
 * a kernel only if a C implementation is registered under the kernel's (mangled) name; the
 * implementation runs the whole grid on the launching stream's thread and must compute
 * exactly what the device code computes.
 *
 * The registrations live in tests/simgpu/kernels.c, inside the library itself: libcuda.so.1
 * exports only cu* symbols, so these two functions are for code built into simgpu.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stddef.h>

struct sim_launch {
	unsigned grid[3], block[3];
	unsigned shared_mem;
	void *const *params; /* params[i] points to parameter i's value, as kernelParams */
	unsigned nparams;
	void *module; /* opaque: pass to sim_global() */
};

typedef void (*sim_kernel_fn)(const struct sim_launch *l);

/*
 * sim_register_kernel() - run fn for every launch of a kernel called name.
 *
 * name is the symbol name in the image (mangled for C++ kernels); it is copied. A second
 * registration of the same name replaces the first.
 */
void sim_register_kernel(const char *name, sim_kernel_fn fn);

/*
 * sim_global() - address and size of a __device__ or __constant__ variable of the launching
 * module (l->module), or NULL if the module has none called name. size may be NULL.
 */
void *sim_global(void *module, const char *name, size_t *size);

/*
 * sim_device_ok() - whether [p, p+n) is device memory simgpu knows, accessible for writing if
 * write is set. A kernel twin checks its buffers with this before touching them; on failure
 * it calls sim_kernel_fault() and returns, as a real kernel would raise an illegal address.
 */
int sim_device_ok(const void *p, size_t n, int write);

/* sim_kernel_fault() - end the running kernel with CUDA_ERROR_ILLEGAL_ADDRESS (sticky). */
void sim_kernel_fault(void);

#endif
