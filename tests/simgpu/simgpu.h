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

/*
 * sim_graph_set_conditional() - the device's cudaGraphSetConditional(handle, value): the value
 * of conditional handle `handle` in the launch of the executable graph the running kernel
 * belongs to. A kernel launched outside a graph, or naming a handle its graph does not have,
 * ends with CUDA_ERROR_ILLEGAL_ADDRESS (sticky), as on an H200.
 */
void sim_graph_set_conditional(unsigned long long handle, unsigned value);

/*
 * sim_printf() - the device printf of the running kernel l: formatted as the driver formats it
 * (on the host, with printf's rules), kept in the context's device printf buffer (at most its
 * CU_LIMIT_PRINTF_FIFO_SIZE bytes; the rest is dropped) and written to stdout where the driver
 * flushes that buffer: a synchronisation (context, stream, event, blocking copy), a module
 * unload, the context's teardown. A twin prints from its threads in the order the device
 * would, which for a real GPU is only fixed where the kernel orders them.
 */
void sim_printf(const struct sim_launch *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * sim_assert_fail() - a device assert(expr) failed in thread `thread` of block `block`, at
 * file:line in function func (as __PRETTY_FUNCTION__ names it): the driver's message
 * "FILE:LINE: FUNC: block: [x,y,z], thread: [x,y,z] Assertion `EXPR` failed." goes to stderr
 * at the next flush, and the kernel ends with CUDA_ERROR_ASSERT, sticky, which the next
 * synchronisation returns. The twin returns after calling it, as the device traps.
 */
void sim_assert_fail(const struct sim_launch *l, const char *expr, const char *file, unsigned line,
		     const char *func, const unsigned block[3], const unsigned thread[3]);

/*
 * sim_tex_fetch() - what tex1Dfetch / tex2D / tex3D / tex2DLayered read through texture object
 * tex at (x, y, z) (z: the layer of a layered array), with point sampling: the element the
 * coordinate falls in (normalised coordinates scaled by the array's extent first; a linear
 * resource takes x as an integer index), after the object's address modes (clamp; border
 * gives zeros). Its bytes, as stored, go to out (size bytes; zeros beyond the element).
 * Returns 0, or -1 when tex is not a live texture object.
 */
int sim_tex_fetch(unsigned long long tex, float x, float y, float z, void *out, size_t size);

/*
 * sim_surf_access() - surf{1,2,3}D{read,write} and surf2DLayered{read,write} through surface
 * object surf: the element at byte xbytes of row y of slice or layer z, size bytes, read into
 * buf or written from it. Returns 0, or -1 (not a surface object, a misaligned or
 * out-of-bounds access, a size that is not the element's): the twin then faults, as the
 * device traps (cudaBoundaryModeTrap).
 */
int sim_surf_access(unsigned long long surf, long long xbytes, long long y, long long z, void *buf,
		    size_t size, int write);

#endif
