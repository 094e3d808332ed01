/*
 * cuGetProcAddress_v2 and cuGetProcAddress: the door every CUDA runtime uses to find the
 * driver's functions (design.md §2, dark-api.md §2 rows 2-5), and ip_lookup_symbol() for the
 * rest of the interposer.
 *
 * This file owns the resolution of (API name, cudaVersion, flags) to one of the interposer's
 * exported functions. It is a pure lookup in the const tables that gen_entries.py generates
 * from cuda.h and cudaTypedefs.h, so it works before cuInit, from any thread, and never talks
 * to the server. It must never allocate, take a lock of its own, or fail in any way the
 * application could see other than through its return values; in particular the empty-name
 * probe every runtime sends first must get CUDA_SUCCESS (any error sends the runtime to
 * dlsym-ing every cu* name).
 *
 * Decisions where cuda.h leaves room (each is checked against the real driver by
 * tests/gpu/procaddr_dump.c):
 *  - Only API base names are answered, as cuda.h documents the symbol argument ("for the
 *    driver API cuMemAlloc_v2, symbol would be cuMemAlloc"). An exact symbol name such as
 *    "cuMemAlloc_v2" or "cuStreamQuery_ptsz" is not an API name and gets SYMBOL_NOT_FOUND;
 *    ip_lookup_symbol() is the exact-name lookup.
 *  - With CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the per-thread rows join the search
 *    ("including the per-thread versions"): the newest row at or below cudaVersion wins, the
 *    per-thread one at equal versions. A per-thread variant appears at the version its
 *    PFN_..._ptsz typedef names (7000 for most), so below that the legacy symbol is returned
 *    ("if a per-thread version is not found, the API will return the legacy version").
 *  - A cudaVersion above the newest version we know (CUDA_VERSION of our cuda.h, which is
 *    also the driver version we report) is CUDA_ERROR_INVALID_VALUE, as cuda.h documents.
 *  - Flags other than DEFAULT, LEGACY_STREAM and PER_THREAD_DEFAULT_STREAM, including both
 *    stream bits at once, are CUDA_ERROR_INVALID_VALUE. DEFAULT means legacy at this level:
 *    the per-thread default is applied by cuda.h's inline wrapper in the caller.
 *  - The 11.3-era 4-argument cuGetProcAddress answers the same table, but reports "nothing
 *    found" as CUDA_ERROR_NOT_FOUND with *pfn = NULL: it has no status argument, and that
 *    is our reading of how 11.x drivers answered the 11.x runtimes that call it (the "v1"
 *    queries of procaddr_queries.txt check it against the real driver).
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PREFIX "procaddr: "
#include "rgpu/log.h"

#include "ip_entries.h"

/* cuda.h maps the name to cuGetProcAddress_v2; the 4-argument symbol is defined below. */
#undef cuGetProcAddress

IP_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
					    cuuint64_t flags);
IP_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					       cuuint64_t flags,
					       CUdriverProcAddressQueryResult *symbolStatus);

static int cmp_entry(const void *key, const void *elem)
{
	return strcmp(key, ((const struct ip_entry *)elem)->name);
}

static int cmp_api(const void *key, const void *elem)
{
	return strcmp(key, ((const struct ip_proc_api *)elem)->name);
}

void *ip_lookup_symbol(const char *exact_name)
{
	const struct ip_entry *e;

	if (!exact_name)
		return NULL;
	e = bsearch(exact_name, ip_entries, ip_entry_count, sizeof(ip_entries[0]), cmp_entry);
	return e ? e->fn : NULL;
}

/*
 * resolve() - the table row answering (symbol, version, ptds).
 * Returns the query status; on CU_GET_PROC_ADDRESS_SUCCESS *out is the ip_entries[] row.
 */
static CUdriverProcAddressQueryResult resolve(const char *symbol, int version, int ptds,
					      const struct ip_entry **out)
{
	const struct ip_proc_api *api;
	const struct ip_proc_ver *best = NULL;
	int has_ptds = 0, ptds_found = 0;

	api = bsearch(symbol, ip_proc_apis, ip_proc_api_count, sizeof(ip_proc_apis[0]), cmp_api);
	if (!api)
		return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	/* Rows ascend by version, plain before per-thread at equal versions: the last
	 * eligible row is the answer. */
	for (unsigned i = api->first; i < (unsigned)api->first + api->count; i++) {
		const struct ip_proc_ver *v = &ip_proc_vers[i];

		has_ptds |= v->ptds;
		if (v->version > version)
			continue;
		if (!v->ptds || ptds)
			best = v;
		ptds_found |= v->ptds;
	}
	/*
	 * Asked for the per-thread form of an API that has one, below the version that
	 * introduced it: the driver answers "version not sufficient" rather than the plain
	 * symbol (measured on 580.159.04, e.g. cuMemcpyHtoDAsync at 3020 with flags 2).
	 */
	if (!best || (ptds && has_ptds && !ptds_found))
		return CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
	*out = &ip_entries[best->entry];
	return CU_GET_PROC_ADDRESS_SUCCESS;
}

/*
 * The driver's graphics interop (OpenGL, EGL, VDPAU) is left out on purpose (gen_entries.py's
 * NOT_DRIVER_HEADERS): it shares a display's buffers, which a remote GPU cannot. The runtime
 * may look such names up without calling them, so this is said once, at info level.
 */
static int graphics_interop(const char *s)
{
	static const char *const pre[] = {"cuGL", "cuGraphicsGL", "cuEGL", "cuGraphicsEGL",
					  "cuVDPAU", "cuGraphicsVDPAU"};
	for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
		if (!strncmp(s, pre[i], strlen(pre[i])))
			return 1;
	return 0;
}

static void interop_said(const char *symbol)
{
	static atomic_int said;
	if (!atomic_exchange(&said, 1))
		pr_info("graphics interop (OpenGL, EGL, VDPAU) is not served: %s and its kind are "
			"not found (a call through them fails)",
			symbol);
}

/*
 * lookup() - what both entry points share: argument checks and the search.
 * Returns CUDA_SUCCESS with *status set, or CUDA_ERROR_INVALID_VALUE. *pfn is always written
 * when pfn is not NULL.
 */
static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	const struct ip_entry *e = NULL;

	if (!pfn || !symbol) {
		pr_debug("%s v%d flags %llu: NULL argument", symbol ? symbol : "(null)",
			 cudaVersion, (unsigned long long)flags);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*pfn = NULL;
	/* both stream bits together mean per-thread, as the driver reads them */
	if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
		pr_debug("%s v%d: invalid flags %#llx", symbol, cudaVersion,
			 (unsigned long long)flags);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (cudaVersion > ip_proc_header_version) {
		pr_debug("%s v%d: newer than the driver (%d)", symbol, cudaVersion,
			 ip_proc_header_version);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*status = resolve(symbol, cudaVersion,
			  !!(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), &e);
	if (*status == CU_GET_PROC_ADDRESS_SUCCESS) {
		*pfn = e->fn;
		pr_debug("%s v%d flags %llu -> %s", symbol, cudaVersion, (unsigned long long)flags,
			 e->name);
	} else {
		pr_debug("%s v%d flags %llu -> %s", symbol, cudaVersion, (unsigned long long)flags,
			 *status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
			     ? "not found"
			     : "version not sufficient");
		if (*status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && graphics_interop(symbol))
			interop_said(symbol);
	}
	return CUDA_SUCCESS;
}

/*
 * NCCL moves data between GPUs with its own transports (peer memory through IPC handles,
 * shared host memory, its network plugins), which devices of several rgpu servers cannot give
 * it: left alone it would wait for ever for peers that never answer. With RGPU_SERVERS naming
 * more than one server, the CUDA runtime built into libnccl finds no driver function, so NCCL
 * fails at once with an error of its own, and this logs why. Returns 1 for such a caller.
 */
static int refused_caller(const void *ret_addr)
{
	static int said;
	const char *list = getenv("RGPU_SERVERS"), *c, *name;
	Dl_info di;

	if (!list || !(c = strchr(list, ',')) || !strchr(c, ':'))
		return 0; /* one server (a bare number after the comma is one more device) */
	if (!dladdr(ret_addr, &di) || !di.dli_fname)
		return 0;
	name = strrchr(di.dli_fname, '/');
	name = name ? name + 1 : di.dli_fname;
	if (strncmp(name, "libnccl", 7))
		return 0;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		pr_err("refused: NCCL (%s) with devices of several servers: NCCL's own transports "
		       "cannot reach GPUs of other rgpu servers, so it gets no CUDA driver and fails",
		       di.dli_fname);
	return 1;
}

/*
 * cuGetProcAddress_v2() - the driver function for (symbol, cudaVersion, flags).
 * @symbol:	 API base name ("cuMemAlloc"); "" and unknown names are not errors
 * @pfn:	 receives the function, or NULL
 * @cudaVersion: 1000 * major + 10 * minor the caller was built for
 * @flags:	 CU_GET_PROC_ADDRESS_DEFAULT, _LEGACY_STREAM or _PER_THREAD_DEFAULT_STREAM
 * @symbolStatus: optional; SUCCESS, SYMBOL_NOT_FOUND or VERSION_NOT_SUFFICIENT
 * Returns CUDA_SUCCESS (also when nothing was found: *pfn is then NULL and the status says
 * why), or CUDA_ERROR_INVALID_VALUE for a NULL symbol or pfn, bad flags, or a cudaVersion
 * newer than the driver.
 */
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	CUdriverProcAddressQueryResult status;
	CUresult rc;

	if (refused_caller(__builtin_return_address(0))) {
		if (pfn)
			*pfn = NULL;
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	rc = lookup(symbol, pfn, cudaVersion, flags, &status);
	if (rc == CUDA_SUCCESS && symbolStatus)
		*symbolStatus = status;
	return rc;
}

/*
 * cuGetProcAddress() - the CUDA 11.3 form, without a status argument (cuda.h declares it only
 * under __CUDA_API_VERSION_INTERNAL). Same search as cuGetProcAddress_v2; returns
 * CUDA_ERROR_NOT_FOUND with *pfn = NULL where _v2 would report a non-SUCCESS status.
 */
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	CUdriverProcAddressQueryResult status;
	CUresult rc;

	if (refused_caller(__builtin_return_address(0))) {
		if (pfn)
			*pfn = NULL;
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	rc = lookup(symbol, pfn, cudaVersion, flags, &status);
	if (rc == CUDA_SUCCESS && status != CU_GET_PROC_ADDRESS_SUCCESS)
		return CUDA_ERROR_NOT_FOUND;
	return rc;
}
