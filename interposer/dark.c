/*
 * cuGetExportTable and the private tables behind it (dark-api.md §3, §4): the contract
 * between the CUDA runtime and libcuda that cuda.h does not show. Every runtime copy in the
 * process (static cudart, libcudart.so.13, the copies inside cuDNN, cuBLAS, cuBLASLt) fetches
 * these tables while initialising and crashes if one it needs is missing. This file owns the
 * nine tables rgpu provides, their layout (the 580 driver's slot counts and slot-0 sizes),
 * the default stubs, and the refusal of every other table. The integrity check lives in
 * integrity.c and context-local storage in cls.c; the tables here point at them.
 *
 * It must never need cuInit or the server to answer cuGetExportTable (the runtime asks before
 * cuInit), never hand out a different address for the same table (the addresses are hashed by
 * the integrity check and cached by every runtime copy), and never leave NULL in a slot where
 * the real table has a function: an unknown slot gets a stub that logs and answers 801.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* No LOG_PREFIX: every line here starts "dark <short-uuid>", the form §3 asks for. */
#include "rgpu/log.h"
#include "rgpu/util.h"

#include "dark_priv.h"
#include "ip_dark.h"

/* Slot 0 of a sized table: its own size in bytes, slot 0 included (§1). */
#define DARK_SIZE(nslots) ((const void *)(uintptr_t)(8 * (nslots)))

/* ---- default stubs ------------------------------------------------------------------------- */

/*
 * A slot whose purpose is unknown answers 801 and says so once, with its first four integer
 * arguments (§3). The real signatures are unknown; on x86-64 the first four integer or pointer
 * arguments arrive in the same registers whatever the prototype, so reading four is harmless
 * even if the caller passed fewer.
 */
static void dark_stub_note(int *once, const char *table, int slot, uintptr_t a0, uintptr_t a1,
			   uintptr_t a2, uintptr_t a3)
{
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	pr_warn("dark %s[%d](%#lx, %#lx, %#lx, %#lx) is not implemented: returning 801", table,
		slot, (unsigned long)a0, (unsigned long)a1, (unsigned long)a2, (unsigned long)a3);
}

/*
 * DARK_STUB_DEF(t, n) defines the stub of slot n of table t (t = the short UUID, which is a
 * valid preprocessing token whether it starts with a digit or not); DARK_STUB_SLOT(t, n) is
 * its designated initializer; DARK_STUB_COUNT(t, n) counts it. Each table lists its stub
 * slots once, as a macro taking one of the three, so definitions and slots cannot drift.
 * Every stub is a separate function with its own "once" flag and its own slot number, so the
 * log names the slot that was called and no linker can fold two stubs into one.
 */
#define DARK_STUB_DEF(t, n)                                                                        \
	static CUresult dark_stub_##t##_##n(uintptr_t a0, uintptr_t a1, uintptr_t a2,              \
					    uintptr_t a3)                                          \
	{                                                                                          \
		static int once;                                                                   \
		dark_stub_note(&once, #t, n, a0, a1, a2, a3);                                      \
		return CUDA_ERROR_NOT_SUPPORTED;                                                   \
	}
#define DARK_STUB_SLOT(t, n) [n] = (const void *)dark_stub_##t##_##n,
#define DARK_STUB_COUNT(t, n) +1

/* The slot lists below read as tables, one row per table: keep clang-format out of them. */
/* clang-format off */
/* Ten consecutive slots d0..d9 (d = 1..9). */
#define DARK_DECADE(M, t, d)                                                                       \
	M(t, d##0) M(t, d##1) M(t, d##2) M(t, d##3) M(t, d##4)                                     \
	M(t, d##5) M(t, d##6) M(t, d##7) M(t, d##8) M(t, d##9)

/* The stub slots of each table: every function slot that §4 does not specify. */
#define CUDART_STUBS(M) M(6bd5fb6c, 3) M(6bd5fb6c, 4) M(6bd5fb6c, 5) M(6bd5fb6c, 9) M(6bd5fb6c, 11)
#define HOOKS_STUBS(M) M(a094798c, 1) M(a094798c, 3) M(a094798c, 4) M(a094798c, 5)
#define TLS_STUBS(M) M(42d85a81, 1)
#define CHECKS_STUBS(M)                                                                            \
	M(263e8860, 1) M(263e8860, 4) M(263e8860, 5) M(263e8860, 6) M(263e8860, 7)                 \
	M(263e8860, 8) M(263e8860, 9) M(263e8860, 10) M(263e8860, 11) M(263e8860, 12)              \
	M(263e8860, 13) M(263e8860, 14)
#define INTEGRITY_STUBS(M) M(d4082055, 2)
#define T21318C60_STUBS(M)                                                                         \
	M(21318c60, 1) M(21318c60, 2) M(21318c60, 3) M(21318c60, 5) M(21318c60, 6)                 \
	M(21318c60, 7) M(21318c60, 8) M(21318c60, 9)                                               \
	DARK_DECADE(M, 21318c60, 1) DARK_DECADE(M, 21318c60, 2)                                    \
	M(21318c60, 30) M(21318c60, 31) M(21318c60, 32) M(21318c60, 33) M(21318c60, 34)            \
	M(21318c60, 35) M(21318c60, 36) M(21318c60, 37) M(21318c60, 38)                            \
	M(21318c60, 40) M(21318c60, 41) M(21318c60, 42) M(21318c60, 43) M(21318c60, 44)            \
	M(21318c60, 45) M(21318c60, 46) M(21318c60, 47) M(21318c60, 48) M(21318c60, 49)            \
	M(21318c60, 50) M(21318c60, 52) M(21318c60, 53) M(21318c60, 54) M(21318c60, 55)            \
	M(21318c60, 56) M(21318c60, 57) M(21318c60, 58) M(21318c60, 59)                            \
	DARK_DECADE(M, 21318c60, 6) DARK_DECADE(M, 21318c60, 7) DARK_DECADE(M, 21318c60, 8)        \
	M(21318c60, 90) M(21318c60, 92)
#define T1734DC26_STUBS(M)                                                                         \
	M(1734dc26, 1) M(1734dc26, 2) M(1734dc26, 3) M(1734dc26, 5) M(1734dc26, 6)                 \
	M(1734dc26, 7) M(1734dc26, 8) M(1734dc26, 9) M(1734dc26, 10) M(1734dc26, 11)               \
	M(1734dc26, 12) M(1734dc26, 14) M(1734dc26, 15) M(1734dc26, 16)
#define T6E163FBE_STUBS(M)                                                                         \
	M(6e163fbe, 1) M(6e163fbe, 2) M(6e163fbe, 3) M(6e163fbe, 4) M(6e163fbe, 5)                 \
	M(6e163fbe, 6) M(6e163fbe, 8) M(6e163fbe, 9)                                               \
	DARK_DECADE(M, 6e163fbe, 1) DARK_DECADE(M, 6e163fbe, 2) DARK_DECADE(M, 6e163fbe, 3)        \
	DARK_DECADE(M, 6e163fbe, 4) DARK_DECADE(M, 6e163fbe, 5) DARK_DECADE(M, 6e163fbe, 6)        \
	DARK_DECADE(M, 6e163fbe, 7) DARK_DECADE(M, 6e163fbe, 8)                                    \
	M(6e163fbe, 90) M(6e163fbe, 91) M(6e163fbe, 92) M(6e163fbe, 94) M(6e163fbe, 95)            \
	M(6e163fbe, 96) M(6e163fbe, 97) M(6e163fbe, 98)
/* clang-format on */

CUDART_STUBS(DARK_STUB_DEF)
HOOKS_STUBS(DARK_STUB_DEF)
TLS_STUBS(DARK_STUB_DEF)
CHECKS_STUBS(DARK_STUB_DEF)
INTEGRITY_STUBS(DARK_STUB_DEF)
T21318C60_STUBS(DARK_STUB_DEF)
T1734DC26_STUBS(DARK_STUB_DEF)
T6E163FBE_STUBS(DARK_STUB_DEF)

/*
 * Every slot is accounted for: slot 0 + stubs + specified functions + real NULLs. A slot
 * forgotten in both lists would silently be NULL, which crashes a caller instead of logging.
 */
#define DARK_CHECK_SLOTS(name, nslots, stubs, nspecified, nnull)                                   \
	_Static_assert(1 + (0 stubs(DARK_STUB_COUNT)) + (nspecified) + (nnull) == (nslots),        \
		       name " slots do not add up")

/* ---- CUDART_INTERFACE 6bd5fb6c (§4.1) ------------------------------------------------------ */

/* Slot 1: an older runtime's way of loading a registered fatbinary wrapper. */
static CUresult cudart_module_from_cubin(CUmodule *out, const void *wrapper)
{
	if (!out || !wrapper)
		return CUDA_ERROR_INVALID_VALUE;
	return cuModuleLoadData(out, wrapper);
}

/* Slot 2: the primary context handle, not retained, not made current; no server work. */
static CUresult cudart_primary_context(CUcontext *out, CUdevice dev)
{
	CUcontext ctx = NULL;
	CUresult rc;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	rc = ip_primary_ctx_peek(dev, &ctx);
	if (rc == CUDA_SUCCESS)
		*out = ctx;
	return rc;
}

/* The extra arguments of slots 6 and 8 have no known meaning: only all-zero is understood. */
static int cudart_extras_unknown(int slot, const void *a3, const void *a4, unsigned a5)
{
	static int once[2];

	if (!a3 && !a4 && !a5)
		return 0;
	if (!__atomic_exchange_n(&once[slot == 8], 1, __ATOMIC_RELAXED))
		pr_warn(
		    "dark 6bd5fb6c[%d] with unknown extra arguments (%p, %p, %u): returning 801",
		    slot, a3, a4, a5);
	return 1;
}

/* Slot 6: slot 1 with three extra arguments (ZLUDA, LUPINE: refuse when any is non-zero). */
static CUresult cudart_module_from_cubin_ext1(CUmodule *out, const void *wrapper, void *a3,
					      void *a4, unsigned a5)
{
	if (cudart_extras_unknown(6, a3, a4, a5))
		return CUDA_ERROR_NOT_SUPPORTED;
	return cudart_module_from_cubin(out, wrapper);
}

/* Slot 7: takes one size and has no visible effect on the real driver. */
static void cudart_fn7(size_t arg)
{
	(void)arg;
}

/* Slot 8: slot 6 given the fatbinary container itself, the module out in the 2nd argument. */
static CUresult cudart_module_from_cubin_ext2(const void *container, CUmodule *out, void *a3,
					      void *a4, unsigned a5)
{
	if (cudart_extras_unknown(8, a3, a4, a5))
		return CUDA_ERROR_NOT_SUPPORTED;
	/* cuModuleLoadData recognises a bare container by its magic (§6.5). */
	return cudart_module_from_cubin(out, container);
}

/* Slot 12: the real one loads the PTX compiler, NVVM and TileIR; rgpu's server has them. */
static CUresult cudart_load_compilers(void)
{
	return CUDA_SUCCESS;
}

const void *const ip_dark_cudart_interface[IP_DARK_CUDART_SLOTS] = {
    [0] = DARK_SIZE(IP_DARK_CUDART_SLOTS),
    [1] = (const void *)cudart_module_from_cubin,
    [2] = (const void *)cudart_primary_context,
    [6] = (const void *)cudart_module_from_cubin_ext1,
    [7] = (const void *)cudart_fn7,
    [8] = (const void *)cudart_module_from_cubin_ext2,
    [10] = NULL, /* NULL in the real table too */
    [12] = (const void *)cudart_load_compilers,
    CUDART_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("CUDART_INTERFACE", IP_DARK_CUDART_SLOTS, CUDART_STUBS, 6, 1);

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS a094798c (§4.2) ------------------------------------------ */

/*
 * The real buffers are zero, i.e. no tools callback subscribed. The unit of n is unknown, so
 * each reserves 8 bytes per element. Nobody here ever writes them.
 */
#define HOOKS_N1 1024
#define HOOKS_N2 14
static uint64_t hooks_buf1[HOOKS_N1] __attribute__((aligned(64)));
static uint64_t hooks_buf2[HOOKS_N2] __attribute__((aligned(64)));

static void hooks_get_buffer1(void **buf, size_t *n)
{
	if (buf)
		*buf = hooks_buf1;
	if (n)
		*n = HOOKS_N1;
}

static void hooks_get_buffer2(void **buf, size_t *n)
{
	if (buf)
		*buf = hooks_buf2;
	if (n)
		*n = HOOKS_N2;
}

#define HOOKS_SLOTS 7
static const void *const dark_hooks[HOOKS_SLOTS] = {[0] = DARK_SIZE(HOOKS_SLOTS),
						    [2] = (const void *)hooks_get_buffer1,
						    [6] = (const void *)hooks_get_buffer2,
						    HOOKS_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("TOOLS_RUNTIME_CALLBACK_HOOKS", HOOKS_SLOTS, HOOKS_STUBS, 2, 0);

/* ---- TOOLS_TLS 42d85a81 (§4.3) ------------------------------------------------------------- */

/*
 * Slot 2: cuBLASLt fills the context field of a tools-callback record; 21318c60[4] then fills
 * the context-ID field at record + 8, so only the first 8 bytes are ours.
 */
static CUresult tls_fill_context(void *record, unsigned id)
{
	CUcontext ctx;

	(void)id;
	if (!ip_initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!record)
		return CUDA_ERROR_INVALID_VALUE;
	ctx = ip_ctx_current();
	memcpy(record, &ctx, sizeof(ctx)); /* the record need not be aligned */
	return CUDA_SUCCESS;
}

#define TLS_SLOTS 3
static const void *const dark_tools_tls[TLS_SLOTS] = {
    [0] = DARK_SIZE(TLS_SLOTS), [2] = (const void *)tls_fill_context, TLS_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("TOOLS_TLS", TLS_SLOTS, TLS_STUBS, 1, 0);

/* ---- CONTEXT_LOCAL_STORAGE c693336e (§4.4): a pointer list, no size slot -------------------- */

static const void *const dark_cls[4] = {
    (const void *)ip_cls_put, (const void *)ip_cls_del, (const void *)ip_cls_get,
    NULL, /* the terminator of a pointer list */
};

/* ---- CONTEXT_CHECKS 263e8860 (§4.5) -------------------------------------------------------- */

/* Slot 2: the real driver writes 0 to out1, never touches out2, and succeeds for any ctx. */
static CUresult checks_check(CUcontext ctx, unsigned *out1, void **out2)
{
	(void)ctx;
	(void)out2;
	if (out1)
		*out1 = 0;
	return CUDA_SUCCESS;
}

/* Slot 3: returns a plain unsigned 0, not a CUresult. */
static unsigned checks_check3(void)
{
	return 0;
}

#define CHECKS_SLOTS 15
static const void *const dark_context_checks[CHECKS_SLOTS] = {[0] = DARK_SIZE(CHECKS_SLOTS),
							      [2] = (const void *)checks_check,
							      [3] = (const void *)checks_check3,
							      CHECKS_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("CONTEXT_CHECKS", CHECKS_SLOTS, CHECKS_STUBS, 2, 0);

/* ---- INTEGRITY_CHECK d4082055 (§4.6, §5) --------------------------------------------------- */

const void *const ip_dark_integrity_table[IP_DARK_INTEGRITY_SLOTS] = {
    [0] = DARK_SIZE(IP_DARK_INTEGRITY_SLOTS),
    [1] = (const void *)ip_dark_integrity,
    INTEGRITY_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("INTEGRITY_CHECK", IP_DARK_INTEGRITY_SLOTS, INTEGRITY_STUBS, 1, 0);

/* ---- 21318c60 (§4.7) ----------------------------------------------------------------------- */

/* Slot 4: the ID cuCtxGetId reports; cuBLASLt refuses to pick a matmul algorithm without it. */
static CUresult t21318c60_context_id(CUcontext ctx, unsigned long long *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*out = ctx ? ip_ctx_uid(ctx) : 0; /* NULL is 0 on the real driver, not "current" */
	return CUDA_SUCCESS;
}

/*
 * Slot 51: a stream's "tools handle" (ctx, stream, &handle, per-thread flag); slot 39: the
 * stream ID behind such a handle. Measured on driver 580 (tests/gpu/darktrace.sh): cuBLAS calls
 * 51 on the NULL stream, then 39 on what it got, once per handle, and keys its per-stream
 * state by the ID. rgpu's handle of an ordinary stream is the stream itself; the NULL stream
 * has one token for the legacy and one for the per-thread kind. The ID is what cuStreamGetId
 * answers for the same stream, so both paths name a stream alike.
 */
static const char t21318c60_null_streams[2]; /* [0] legacy NULL stream, [1] per-thread */

static CUresult t21318c60_stream_handle(CUcontext ctx, CUstream s, void **out, unsigned per_thread)
{
	unsigned long long id;
	CUresult r;

	(void)ctx;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
		int ptds = s == CU_STREAM_PER_THREAD || (!s && (per_thread & 0xff));
		*out = (void *)&t21318c60_null_streams[ptds];
		return CUDA_SUCCESS;
	}
	r = cuStreamGetId(s, &id); /* a handle check */
	if (r != CUDA_SUCCESS)
		return r;
	*out = s;
	return CUDA_SUCCESS;
}

static CUresult t21318c60_stream_id(CUcontext ctx, void *handle, unsigned long long *id)
{
	(void)ctx;
	if (!handle || !id)
		return CUDA_ERROR_INVALID_VALUE;
	if (handle == &t21318c60_null_streams[0])
		return cuStreamGetId(NULL, id);
	if (handle == &t21318c60_null_streams[1])
		return cuStreamGetId(CU_STREAM_PER_THREAD, id);
	return cuStreamGetId((CUstream)handle, id);
}

#define T21318C60_SLOTS 93
static const void *const dark_21318c60[T21318C60_SLOTS] = {
    [0] = DARK_SIZE(T21318C60_SLOTS),
    [4] = (const void *)t21318c60_context_id,
    [39] = (const void *)t21318c60_stream_id,
    [51] = (const void *)t21318c60_stream_handle,
    [91] = NULL, /* NULL in the real table too */
    T21318C60_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("21318c60", T21318C60_SLOTS, T21318C60_STUBS, 3, 1);

/* ---- 1734dc26: 17 slots, slot 0 = 136 ------------------------------------------------------- */

/*
 * Slot 4 hands out two arrays the driver allocates (the current device's TPC-to-vGPC and
 * TPC-to-mTPC maps, one byte per TPC), slot 13 frees them; cuBLASLt calls the pair around its
 * first cluster kernels (measured: without the table it crashes). The bytes come from the
 * worker's driver (MSG_TPC_MAP); the copies here are the caller's to free through slot 13.
 */
static CUresult t1734dc26_tpc_map(unsigned char **vgpc, unsigned char **mtpc)
{
	return ip_ctx_tpc_map(vgpc, mtpc);
}

static CUresult t1734dc26_tpc_map_free(unsigned char *vgpc, unsigned char *mtpc)
{
	free(vgpc);
	free(mtpc);
	return CUDA_SUCCESS;
}

#define T1734DC26_SLOTS 17
static const void *const dark_1734dc26[T1734DC26_SLOTS] = {
    [0] = DARK_SIZE(T1734DC26_SLOTS),
    [4] = (const void *)t1734dc26_tpc_map,
    [13] = (const void *)t1734dc26_tpc_map_free,
    T1734DC26_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("1734dc26", T1734DC26_SLOTS, T1734DC26_STUBS, 2, 0);

/* ---- 6e163fbe: 99 slots, slot 0 = 792 (slot 93 NULL) ----------------------------------------- */

/*
 * Slot 7: (ctx, module, callback, opaque) calls callback(opaque, function, owner) for each
 * function of the module and returns how many it called back for (not a CUresult). Measured:
 * cuFFT calls it on each module it loads, with a callback that keeps the function it hears of
 * (one per module), and then uses that as a CUfunction; the real driver answered 1. Here the
 * functions are the module's own CUfunction handles, so every later use of one is an ordinary
 * rgpu call. What the real driver passes as `owner` is not known: 0 here (cuFFT ignores it).
 */
typedef void (*t6e163fbe_cb)(void *opaque, void *function, uint64_t owner);

static uint64_t t6e163fbe_each_function(CUcontext ctx, CUmodule mod, t6e163fbe_cb cb, void *opaque)
{
	CUfunction *fs;
	unsigned n = 0;

	(void)ctx;
	if (cuModuleGetFunctionCount(&n, mod) != CUDA_SUCCESS || n == 0)
		return 0;
	fs = calloc(n, sizeof(*fs));
	if (!fs)
		return 0;
	if (cuModuleEnumerateFunctions(fs, n, mod) != CUDA_SUCCESS)
		n = 0;
	for (unsigned i = 0; cb && i < n; i++)
		cb(opaque, fs[i], 0);
	free(fs);
	return n;
}

#define T6E163FBE_SLOTS 99
static const void *const dark_6e163fbe[T6E163FBE_SLOTS] = {
    [0] = DARK_SIZE(T6E163FBE_SLOTS),
    [7] = (const void *)t6e163fbe_each_function,
    [93] = NULL, /* NULL in the real table too */
    T6E163FBE_STUBS(DARK_STUB_SLOT)};
DARK_CHECK_SLOTS("6e163fbe", T6E163FBE_SLOTS, T6E163FBE_STUBS, 1, 1);

/* ---- cuGetExportTable ---------------------------------------------------------------------- */

struct dark_export {
	uint8_t uuid[16];
	const void *const *table;
	const char *name;
};

static const struct dark_export dark_exports[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     ip_dark_cudart_interface,
     "CUDART_INTERFACE"},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     dark_hooks,
     "TOOLS_RUNTIME_CALLBACK_HOOKS"},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     dark_tools_tls,
     "TOOLS_TLS"},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     dark_cls,
     "CONTEXT_LOCAL_STORAGE"},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     dark_context_checks,
     "CONTEXT_CHECKS"},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2},
     ip_dark_integrity_table,
     "INTEGRITY_CHECK"},
    {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2},
     dark_21318c60,
     "21318c60"},
    {{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b,
      0xca},
     dark_1734dc26,
     "1734dc26"},
    {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99,
      0x1e},
     dark_6e163fbe,
     "6e163fbe"},
};

/*
 * Tables the real driver has and rgpu refuses (§4.8), by their first four bytes: only the log
 * line depends on this list, the answer is 1 for every UUID not in dark_exports. "expected"
 * marks the two that are asked in normal runs and whose refusal is known to be harmless.
 */
static const struct dark_refused {
	uint8_t prefix[4];
	int expected;
	const char *what;
} dark_refused[] = {
    {{0xf8, 0xcf, 0xf9, 0x51}, 1, "unnamed, asked by every runtime, never called"},
    {{0x69, 0xa2, 0x8e, 0x9f}, 1, "NVML's"},
    {{0xb1, 0x05, 0x41, 0xe1}, 0, "DEVICE_EXTENDED_RT (CUPTI)"},
    {{0x0c, 0xa5, 0x0b, 0x8c}, 0, "CTX_CREATE_BYPASS"},
    {{0x9a, 0xf0, 0x70, 0x7b}, 0, "optical flow"},
    {{0xdd, 0x9e, 0x98, 0xa4}, 0, "HYBRID_CUDART"},
    /* NVRTC asks it to compile with the driver's NVVM, and compiles itself when refused
       (measured: CuPy's RawKernel gives the same result) */
    {{0xda, 0x91, 0x51, 0xd3}, 1, "NVRTC's compiler in the driver; NVRTC falls back"},
};

static void dark_log_refusal(const CUuuid *id)
{
	const struct dark_refused *r = NULL;
	char hex[33];

	if (rgpu_log_level < RGPU_LOG_WARN) /* skip the formatting when nothing is printed */
		return;
	for (size_t i = 0; i < ARRAY_SIZE(dark_refused); i++)
		if (!memcmp(id->bytes, dark_refused[i].prefix, 4))
			r = &dark_refused[i];
	rgpu_hex(id->bytes, 16, hex);
	if (r && r->expected)
		pr_info("dark %.8s: export table refused (%s, %s): 1", hex, hex, r->what);
	else
		pr_warn("dark %.8s: export table refused (%s, %s): 1; if a library fails next, "
			"this is a suspect",
			hex, hex, r ? r->what : "unknown");
}

/*
 * cuGetExportTable() - the runtime's door to the private tables (dark-api.md §3).
 *
 * Needs neither cuInit nor the server, and keeps no state: every answer is a table in static
 * storage, so the same UUID gives the same address for the life of the process, from any
 * thread.
 *
 * @ppExportTable:   receives the table, or NULL on failure
 * @pExportTableId:  the table's UUID, 16 raw bytes
 *
 * Returns CUDA_SUCCESS for the nine provided tables, CUDA_ERROR_INVALID_VALUE for a NULL
 * argument and for every other UUID (logged with its short UUID).
 */
__attribute__((visibility("default"))) CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	if (!ppExportTable)
		return CUDA_ERROR_INVALID_VALUE;
	*ppExportTable = NULL;
	if (!pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;

	for (size_t i = 0; i < ARRAY_SIZE(dark_exports); i++) {
		if (!memcmp(pExportTableId->bytes, dark_exports[i].uuid, 16)) {
			*ppExportTable = dark_exports[i].table;
			return CUDA_SUCCESS;
		}
	}
	dark_log_refusal(pExportTableId);
	return CUDA_ERROR_INVALID_VALUE;
}
