/*
 * Host-only tests of the generated entry-point table and of cuGetProcAddress (procaddr.c):
 * the runtime's start-up probes (dark-api.md §2 rows 2-5), version and per-thread selection,
 * argument errors, exact-name lookup, the once-per-name "unimplemented" log, and the CUresult
 * names and strings. procaddr.c, unimplemented.c and the generated sources are compiled in
 * directly; this file also defines a strong cuInit to prove a hand-written definition replaces
 * the weak stub in ip_entries[].
 *
 * The counts below are what gen_entries.py printed for the CUDA 13.0 headers; a new cuda.h
 * changes them on purpose, so that whoever updates the headers looks at what changed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/log.h"

#include "ip_entries.h"

#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				  cuuint64_t flags);

#define EXPECTED_SYMBOLS 637  /* functions cuda.h and cudaProfiler.h 13.0 declare with __CUDA_API_VERSION_INTERNAL */
#define EXPECTED_APIS 450     /* API names in cudaTypedefs.h and cudaProfilerTypedefs.h 13.0 */
#define EXPECTED_VERSIONS 637 /* (name, version) rows: 540 plain + 97 per-thread; no override */

#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
#define LEGACY CU_GET_PROC_ADDRESS_LEGACY_STREAM

/* A hand-written definition: must win over the generated weak stub. */
#define TEST_CUINIT_RC ((CUresult)4242)
CUresult CUDAAPI cuInit(unsigned int Flags)
{
	return Flags == 7 ? TEST_CUINIT_RC : CUDA_SUCCESS;
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* name_of() - the exported symbol name of fn (every ip_entries[] function is distinct). */
static const char *name_of(void *fn)
{
	if (!fn)
		return NULL;
	for (unsigned i = 0; i < ip_entry_count; i++)
		if (ip_entries[i].fn == fn)
			return ip_entries[i].name;
	return "(not in ip_entries)";
}

/* query() - cuGetProcAddress_v2 expecting CUDA_SUCCESS; the symbol name, or NULL. */
static const char *query(const char *sym, int ver, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	void *p = (void *)&query; /* must be overwritten */
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;

	assert_int_equal(cuGetProcAddress_v2(sym, &p, ver, flags, &st), CUDA_SUCCESS);
	assert_int_not_equal(st, 77);
	if (status)
		*status = st;
	if (st == CU_GET_PROC_ADDRESS_SUCCESS)
		assert_non_null(p);
	else
		assert_null(p);
	return name_of(p);
}

static void expect_symbol(const char *sym, int ver, cuuint64_t flags, const char *want)
{
	CUdriverProcAddressQueryResult st;
	const char *got = query(sym, ver, flags, &st);

	if (!got || strcmp(got, want)) {
		print_error("%s v%d flags %llu: got %s, want %s\n", sym, ver,
			    (unsigned long long)flags, got ? got : "NULL", want);
		fail();
	}
	assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
}

static void expect_status(const char *sym, int ver, cuuint64_t flags,
			  CUdriverProcAddressQueryResult want)
{
	CUdriverProcAddressQueryResult st;

	assert_null(query(sym, ver, flags, &st));
	assert_int_equal(st, want);
}

/* ---- start-up sequence (dark-api.md §2) ---------------------------------------------------- */

static void test_empty_name_probe(void **state)
{
	void *p = (void *)&p;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;

	/* Exactly the runtime's first call: no status pointer. */
	assert_int_equal(cuGetProcAddress_v2("", &p, 0, 0, NULL), CUDA_SUCCESS);
	assert_null(p);
	p = (void *)&p;
	assert_int_equal(cuGetProcAddress_v2("", &p, 0, 0, &st), CUDA_SUCCESS);
	assert_null(p);
	assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	assert_int_equal(st, 1);
}

static void test_unknown_name(void **state)
{
	expect_status("cuNoSuchFunction", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cuNoSuchFunction", 13000, PTDS, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cumemalloc", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cuMemAllo", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cuMemAllocX", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	/* Exact symbol names are not API names (procaddr.c says why). */
	expect_status("cuMemAlloc_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cuStreamQuery_ptsz", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	expect_status("cuGetProcAddress_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void test_start_up_lookups(void **state)
{
	void *p = NULL;

	/* Row 3: cuInit at 2000 is this file's strong definition. */
	assert_int_equal(cuGetProcAddress_v2("cuInit", &p, 2000, 0, NULL), CUDA_SUCCESS);
	assert_ptr_equal(p, (void *)cuInit);
	assert_int_equal(((CUresult(*)(unsigned))p)(7), TEST_CUINIT_RC);
	/* Row 4: the 4-argument form at 11030, then _v2 at 12000. */
	expect_symbol("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
	assert_int_equal(cuGetProcAddress_v2("cuGetProcAddress", &p, 11030, 0, NULL), CUDA_SUCCESS);
	assert_ptr_equal(p, (void *)cuGetProcAddress);
	expect_symbol("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	expect_symbol("cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
	assert_int_equal(cuGetProcAddress_v2("cuGetProcAddress", &p, 12000, 0, NULL), CUDA_SUCCESS);
	assert_ptr_equal(p, (void *)cuGetProcAddress_v2);
	expect_status("cuGetProcAddress", 11020, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	/* Row 5 includes cuGetExportTable at 3000. */
	expect_symbol("cuGetExportTable", 3000, 0, "cuGetExportTable");
}

/* ---- versions ------------------------------------------------------------------------------- */

static void test_versions(void **state)
{
	expect_symbol("cuMemAlloc", 2000, 0, "cuMemAlloc");
	expect_symbol("cuMemAlloc", 3010, 0, "cuMemAlloc");
	expect_symbol("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
	expect_symbol("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
	expect_status("cuMemAlloc", 1999, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

	expect_symbol("cuCtxGetDevice", 2000, 0, "cuCtxGetDevice");
	expect_symbol("cuCtxGetDevice", 12080, 0, "cuCtxGetDevice");
	expect_symbol("cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2");

	expect_symbol("cuCtxCreate", 2000, 0, "cuCtxCreate");
	expect_symbol("cuCtxCreate", 3020, 0, "cuCtxCreate_v2");
	expect_symbol("cuCtxCreate", 11040, 0, "cuCtxCreate_v3");
	expect_symbol("cuCtxCreate", 12040, 0, "cuCtxCreate_v3");
	expect_symbol("cuCtxCreate", 12050, 0, "cuCtxCreate_v4");

	/* Same parameters, new semantics: ties broken by the order of versions. */
	expect_symbol("cuDeviceGetUuid", 9020, 0, "cuDeviceGetUuid");
	expect_symbol("cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2");
	expect_symbol("cuTexRefSetAddress2D", 2020, 0, "cuTexRefSetAddress2D");
	expect_symbol("cuTexRefSetAddress2D", 3020, 0, "cuTexRefSetAddress2D_v2");
	expect_symbol("cuTexRefSetAddress2D", 4010, 0, "cuTexRefSetAddress2D_v3");

	/* The override: five-argument forms until 12.0, then the flags form. */
	expect_symbol("cuGraphInstantiate", 10000, 0, "cuGraphInstantiate");
	expect_symbol("cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2");
	expect_symbol("cuGraphInstantiate", 11080, 0, "cuGraphInstantiate_v2");
	/* the real 580 driver answers _v2 here, whatever cuda.h's #define says */
	expect_symbol("cuGraphInstantiate", 12000, 0, "cuGraphInstantiate_v2");
	expect_symbol("cuGraphInstantiate", 13000, 0, "cuGraphInstantiate_v2");
	expect_symbol("cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags");
}

static void test_version_not_sufficient(void **state)
{
	CUdriverProcAddressQueryResult st;
	void *p = (void *)&p;

	/* cuLibraryLoadData appeared in 12.0. */
	assert_int_equal(cuGetProcAddress_v2("cuLibraryLoadData", &p, 11000, 0, &st), CUDA_SUCCESS);
	assert_null(p);
	assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_symbol("cuLibraryLoadData", 12000, 0, "cuLibraryLoadData");
	expect_status("cuMemcpyBatchAsync", 12070, PTDS,
		      CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_symbol("cuMemcpyBatchAsync", 12080, PTDS, "cuMemcpyBatchAsync_ptsz");
	expect_symbol("cuMemcpyBatchAsync", 13000, PTDS, "cuMemcpyBatchAsync_v2_ptsz");
	expect_symbol("cuMemcpyBatchAsync", 13000, 0, "cuMemcpyBatchAsync_v2");
	expect_status("cuInit", 0, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_status("cuInit", -5, PTDS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

/* ---- per-thread default stream --------------------------------------------------------------- */

static void test_per_thread(void **state)
{
	expect_symbol("cuMemcpyHtoDAsync", 13000, 0, "cuMemcpyHtoDAsync_v2");
	expect_symbol("cuMemcpyHtoDAsync", 13000, LEGACY, "cuMemcpyHtoDAsync_v2");
	expect_symbol("cuMemcpyHtoDAsync", 13000, PTDS, "cuMemcpyHtoDAsync_v2_ptsz");
	expect_symbol("cuMemcpyHtoDAsync", 7000, PTDS, "cuMemcpyHtoDAsync_v2_ptsz");
	/* The per-thread variant appears at 7000: below that, the legacy symbol. */
	/* per-thread asked below the first per-thread version: not sufficient (driver 580) */
	expect_status("cuMemcpyHtoDAsync", 3020, PTDS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_status("cuMemcpyHtoDAsync", 2000, PTDS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	/* both stream bits: per-thread (driver 580) */
	expect_symbol("cuStreamQuery", 13000, 3, "cuStreamQuery_ptsz");

	expect_symbol("cuStreamQuery", 13000, PTDS, "cuStreamQuery_ptsz");
	expect_symbol("cuStreamQuery", 13000, 0, "cuStreamQuery");
	expect_symbol("cuStreamQuery", 13000, LEGACY, "cuStreamQuery");
	expect_symbol("cuMemcpyHtoD", 13000, PTDS, "cuMemcpyHtoD_v2_ptds");
	expect_status("cuMemcpy", 4000, PTDS, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	expect_symbol("cuMemcpy", 7000, PTDS, "cuMemcpy_ptds");

	/* Per-thread rows of several versions follow the plain ones. */
	expect_symbol("cuStreamGetCaptureInfo", 11030, PTDS, "cuStreamGetCaptureInfo_v2_ptsz");
	expect_symbol("cuStreamGetCaptureInfo", 12030, PTDS, "cuStreamGetCaptureInfo_v3_ptsz");
	expect_symbol("cuStreamGetCaptureInfo", 12030, 0, "cuStreamGetCaptureInfo_v3");
	expect_symbol("cuStreamBeginCapture", 10000, PTDS, "cuStreamBeginCapture_ptsz");
	expect_symbol("cuStreamBeginCapture", 10010, PTDS, "cuStreamBeginCapture_v2_ptsz");

	/* No per-thread variant: the flag changes nothing. */
	expect_symbol("cuMemAlloc", 13000, PTDS, "cuMemAlloc_v2");
	expect_symbol("cuInit", 13000, PTDS, "cuInit");
}

/* ---- argument errors ------------------------------------------------------------------------ */

static void test_invalid_arguments(void **state)
{
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
	void *p = (void *)&p;

	assert_int_equal(cuGetProcAddress_v2(NULL, &p, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st),
			 CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetProcAddress_v2("", NULL, 0, 0, NULL), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(st, 77); /* no status on errors */

	const cuuint64_t bad_flags[] = {4, 5, 8, 1ull << 32, ~0ull};
	for (size_t i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
		p = (void *)&p;
		assert_int_equal(cuGetProcAddress_v2("cuInit", &p, 13000, bad_flags[i], &st),
				 CUDA_ERROR_INVALID_VALUE);
		assert_null(p);
	}
	/* Newer than the driver we are. */
	p = (void *)&p;
	assert_int_equal(cuGetProcAddress_v2("cuInit", &p, 13010, 0, &st),
			 CUDA_ERROR_INVALID_VALUE);
	assert_null(p);
	assert_int_equal(cuGetProcAddress_v2("", &p, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(ip_proc_header_version, 13000);
}

static void test_v1_entry_point(void **state)
{
	void *p = (void *)&p;

	assert_int_equal(cuGetProcAddress("cuMemAlloc", &p, 11030, 0), CUDA_SUCCESS);
	assert_string_equal(name_of(p), "cuMemAlloc_v2");
	assert_int_equal(cuGetProcAddress("cuStreamQuery", &p, 11030, PTDS), CUDA_SUCCESS);
	assert_string_equal(name_of(p), "cuStreamQuery_ptsz");
	p = (void *)&p;
	assert_int_equal(cuGetProcAddress("cuNoSuchFunction", &p, 11030, 0), CUDA_ERROR_NOT_FOUND);
	assert_null(p);
	p = (void *)&p;
	assert_int_equal(cuGetProcAddress("", &p, 0, 0), CUDA_ERROR_NOT_FOUND);
	assert_null(p);
	p = (void *)&p;
	assert_int_equal(cuGetProcAddress("cuLibraryLoadData", &p, 11030, 0), CUDA_ERROR_NOT_FOUND);
	assert_null(p);
	assert_int_equal(cuGetProcAddress(NULL, &p, 11030, 0), CUDA_ERROR_INVALID_VALUE);
	assert_int_equal(cuGetProcAddress("cuInit", &p, 11030, 4), CUDA_ERROR_INVALID_VALUE);
}

/* ---- the tables ----------------------------------------------------------------------------- */

static void test_entry_table(void **state)
{
	static const char *const known[] = {
	    "cuInit",
	    "cuDriverGetVersion",
	    "cuGetExportTable",
	    "cuGetProcAddress",
	    "cuGetProcAddress_v2",
	    "cuMemAlloc",
	    "cuMemAlloc_v2",
	    "cuMemcpyHtoDAsync_v2_ptsz",
	    "cuMemcpyHtoD_v2_ptds",
	    "cuStreamQuery_ptsz",
	    "cuCtxCreate_v4",
	    "cuCtxGetDevice_v2",
	    "cuGraphInstantiateWithFlags",
	    "cuLibraryLoadData",
	    "cuLaunchKernel_ptsz",
	    "cuCheckpointProcessLock",
	};

	assert_int_equal(ip_entry_count, EXPECTED_SYMBOLS);
	for (unsigned i = 1; i < ip_entry_count; i++)
		assert_true(strcmp(ip_entries[i - 1].name, ip_entries[i].name) < 0);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		assert_non_null(ip_lookup_symbol(known[i]));
	/* Every symbol resolves by its exact name to its own function. */
	for (unsigned i = 0; i < ip_entry_count; i++) {
		assert_non_null(ip_entries[i].fn);
		assert_ptr_equal(ip_lookup_symbol(ip_entries[i].name), ip_entries[i].fn);
	}
	assert_null(ip_lookup_symbol(NULL));
	assert_null(ip_lookup_symbol(""));
	assert_null(ip_lookup_symbol("cuNoSuchFunction"));
	assert_null(ip_lookup_symbol("cuMemAlloc_v3"));
	/* Strong definitions replace the stubs. */
	assert_ptr_equal(ip_lookup_symbol("cuInit"), (void *)cuInit);
	assert_ptr_equal(ip_lookup_symbol("cuGetProcAddress"), (void *)cuGetProcAddress);
	assert_ptr_equal(ip_lookup_symbol("cuGetProcAddress_v2"), (void *)cuGetProcAddress_v2);
}

static void test_version_table(void **state)
{
	unsigned rows = 0;

	assert_int_equal(ip_proc_api_count, EXPECTED_APIS);
	assert_int_equal(ip_proc_ver_count, EXPECTED_VERSIONS);
	for (unsigned a = 0; a < ip_proc_api_count; a++) {
		const struct ip_proc_api *api = &ip_proc_apis[a];

		if (a)
			assert_true(strcmp(ip_proc_apis[a - 1].name, api->name) < 0);
		assert_int_equal(api->first, rows);
		assert_true(api->count > 0);
		rows += api->count;
		/* Each row is what its own version (and flag) resolves to. */
		for (unsigned i = api->first; i < (unsigned)api->first + api->count; i++) {
			const struct ip_proc_ver *v = &ip_proc_vers[i];
			const char *want = ip_entries[v->entry].name;

			assert_true(v->entry < ip_entry_count);
			expect_symbol(api->name, v->version, v->ptds ? PTDS : 0, want);
			if (i > api->first)
				assert_true(ip_proc_vers[i - 1].version <= v->version);
		}
		/* Below the first version: not sufficient, with either flag. */
		expect_status(api->name, ip_proc_vers[api->first].version - 10, 0,
			      CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
		expect_status(api->name, ip_proc_vers[api->first].version - 10, PTDS,
			      CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
		/* At the newest version every API answers. */
		assert_non_null(query(api->name, 13000, 0, NULL));
		assert_non_null(query(api->name, 13000, PTDS, NULL));
	}
	assert_int_equal(rows, ip_proc_ver_count);
}

/* Every exported symbol is reachable through some (name, version, flags). */
static void test_every_symbol_served(void **state)
{
	unsigned char *served = calloc(ip_entry_count, 1);

	assert_non_null(served);
	for (unsigned i = 0; i < ip_proc_ver_count; i++)
		served[ip_proc_vers[i].entry] = 1;
	for (unsigned i = 0; i < ip_entry_count; i++) {
		if (!served[i])
			print_error("not served by cuGetProcAddress: %s\n", ip_entries[i].name);
		assert_true(served[i]);
	}
	free(served);
}

/* ---- stubs and the unimplemented log -------------------------------------------------------- */

static char log_path[] = "/tmp/test_procaddr_log.XXXXXX";

static int count_in_log(const char *needle)
{
	char buf[1 << 16];
	FILE *f = fopen(log_path, "r");
	int n = 0;

	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f))
		if (strstr(buf, needle))
			n++;
	fclose(f);
	return n;
}

static void *call_stub_many(void *arg)
{
	CUresult (*fn)(CUstream) = (CUresult(*)(CUstream))arg;

	for (int i = 0; i < 1000; i++)
		if (fn(NULL) != CUDA_ERROR_NOT_SUPPORTED)
			return (void *)1;
	return NULL;
}

static void test_unimplemented_once(void **state)
{
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUdeviceptr d = 0;
	pthread_t th[8];
	void *p;

	int fd = mkstemp(log_path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rgpu_log_open(log_path), 0);
	rgpu_log_set_level(RGPU_LOG_WARN);

	/* A stub returns NOT_SUPPORTED and logs its name once. */
	alloc = (CUresult(*)(CUdeviceptr *, size_t))ip_lookup_symbol("cuMemAlloc_v2");
	assert_non_null(alloc);
	assert_int_equal(alloc(&d, 4096), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(alloc(&d, 4096), CUDA_ERROR_NOT_SUPPORTED);
	assert_int_equal(count_in_log("unimplemented: cuMemAlloc_v2\n"), 1);
	assert_int_equal(count_in_log("unimplemented: cuMemAlloc\n"), 0);

	/* Eight threads racing on one stub: still one line. */
	p = ip_lookup_symbol("cuStreamSynchronize_ptsz");
	assert_non_null(p);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, call_stub_many, p), 0);
	for (int i = 0; i < 8; i++) {
		void *ret;
		assert_int_equal(pthread_join(th[i], &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(count_in_log("unimplemented: cuStreamSynchronize_ptsz\n"), 1);

	/* Names outside the table (dark-API slots) are remembered too. */
	ip_unimplemented("dark:6bd5fb6c[9]");
	ip_unimplemented("dark:6bd5fb6c[9]");
	ip_unimplemented("dark:6bd5fb6c[11]");
	ip_unimplemented(NULL);
	assert_int_equal(count_in_log("unimplemented: dark:6bd5fb6c[9]\n"), 1);
	assert_int_equal(count_in_log("unimplemented: dark:6bd5fb6c[11]\n"), 1);
	assert_int_equal(count_in_log("unimplemented: (null)\n"), 1);

	rgpu_log_set_level(RGPU_LOG_INFO);
	unlink(log_path);
}

/* ---- CUresult names and strings -------------------------------------------------------------- */

static void test_error_names(void **state)
{
	assert_string_equal(ip_error_name(CUDA_SUCCESS), "CUDA_SUCCESS");
	assert_string_equal(ip_error_name(CUDA_ERROR_INVALID_VALUE), "CUDA_ERROR_INVALID_VALUE");
	assert_string_equal(ip_error_name(CUDA_ERROR_NOT_SUPPORTED), "CUDA_ERROR_NOT_SUPPORTED");
	assert_string_equal(ip_error_name((CUresult)201), "CUDA_ERROR_INVALID_CONTEXT");
	assert_string_equal(ip_error_name(CUDA_ERROR_UNKNOWN), "CUDA_ERROR_UNKNOWN");
	assert_null(ip_error_name((CUresult)12345));
	assert_null(ip_error_name((CUresult)-1));

	assert_string_equal(ip_error_string(CUDA_SUCCESS), "no error");
	assert_string_equal(ip_error_string(CUDA_ERROR_INVALID_VALUE), "invalid argument");
	assert_string_equal(ip_error_string(CUDA_ERROR_OUT_OF_MEMORY), "out of memory");
	assert_string_equal(ip_error_string(CUDA_ERROR_NOT_INITIALIZED), "initialization error");
	assert_string_equal(ip_error_string(CUDA_ERROR_INVALID_DEVICE), "invalid device ordinal");
	assert_string_equal(ip_error_string(CUDA_ERROR_INVALID_HANDLE), "invalid resource handle");
	assert_string_equal(ip_error_string(CUDA_ERROR_NOT_FOUND), "named symbol not found");
	assert_string_equal(ip_error_string(CUDA_ERROR_NOT_SUPPORTED), "operation not supported");
	assert_string_equal(ip_error_string(CUDA_ERROR_NOT_READY), "device not ready");
	/* A code without a known driver string: its doc comment's first sentence. */
	assert_string_equal(ip_error_string(CUDA_ERROR_KEY_ROTATION),
			    "an error happened during the key rotation sequence");
	assert_null(ip_error_string((CUresult)12345));

	/* Every named code has a non-empty string. */
	int named = 0;
	for (int v = 0; v < 1200; v++) {
		const char *n = ip_error_name((CUresult)v);
		if (!n)
			continue;
		named++;
		assert_non_null(ip_error_string((CUresult)v));
		assert_true(strlen(ip_error_string((CUresult)v)) > 0);
		assert_int_equal(strncmp(n, "CUDA_", 5), 0);
	}
	assert_int_equal(named, 101);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty_name_probe),
	    cmocka_unit_test(test_unknown_name),
	    cmocka_unit_test(test_start_up_lookups),
	    cmocka_unit_test(test_versions),
	    cmocka_unit_test(test_version_not_sufficient),
	    cmocka_unit_test(test_per_thread),
	    cmocka_unit_test(test_invalid_arguments),
	    cmocka_unit_test(test_v1_entry_point),
	    cmocka_unit_test(test_entry_table),
	    cmocka_unit_test(test_version_table),
	    cmocka_unit_test(test_every_symbol_served),
	    cmocka_unit_test(test_unimplemented_once),
	    cmocka_unit_test(test_error_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
