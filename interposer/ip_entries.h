/*
 * The interposer's table of driver entry points and what is generated from cuda.h around it
 * (interposer/gen/gen_entries.py writes entries_gen.c, procaddr_gen.c and errors_gen.c).
 *
 * Every symbol cuda.h declares is exported: a hand-written strong definition where the
 * interposer implements it, otherwise a weak generated stub that logs the name once and returns
 * CUDA_ERROR_NOT_SUPPORTED. Strong definitions must sit in object files linked straight into
 * libcuda.so.1 (a weak definition does not make the linker pull a member out of a static
 * archive) and must carry IP_EXPORT, or the version script cannot export them.
 *
 * Define IP_ENTRIES_NO_CUDA_H before including to leave cuda.h out (the generated stubs and
 * tables cannot see its prototypes).
 */
#ifndef IP_ENTRIES_H
#define IP_ENTRIES_H

/* Mark a hand-written driver entry point: exported whatever -fvisibility says. */
#define IP_EXPORT __attribute__((visibility("default")))

/* One exported driver symbol. */
struct ip_entry {
	const char *name; /* exact symbol name, e.g. "cuMemAlloc_v2" */
	void *fn;	  /* the strong definition if there is one, else the stub */
};

/* All exported symbols, sorted by strcmp() of name; ip_entry_count of them. */
extern const struct ip_entry ip_entries[];
extern const unsigned ip_entry_count;

/*
 * ip_lookup_symbol() - the function exported under exactly this symbol name.
 * @exact_name: a symbol such as "cuMemAlloc_v2" or "cuStreamQuery_ptsz" (not an API name
 *	with a version: that is cuGetProcAddress's job).
 * Returns the function, or NULL if the interposer exports no such symbol (or exact_name is
 * NULL). Pure lookup: thread-safe, works before cuInit.
 */
void *ip_lookup_symbol(const char *exact_name);

/*
 * ip_unimplemented() - report that the application called a driver function the interposer
 * does not implement. Logs "unimplemented: NAME" at warn level the first time for each name,
 * then stays silent for it (names outside ip_entries[], such as dark-API slots, are
 * remembered up to a few hundred; past that they are logged every time). Thread-safe, never
 * fails, never allocates. Logs only at the level rgpu_log_level allows.
 */
void ip_unimplemented(const char *name);

/*
 * ip_refused() - report that an implemented function refuses what it was asked (a flag, a
 * parameter, a kind of memory rgpu cannot serve): logs "refused: WHAT: WHY" at warn level the
 * first time for each WHAT, as ip_unimplemented does for names. The caller then returns
 * CUDA_ERROR_NOT_SUPPORTED: no such refusal goes unsaid (issue 7, item 9).
 */
void ip_refused(const char *what, const char *why);

/*
 * The cuGetProcAddress version table (procaddr_gen.c), for procaddr.c and its tests.
 * ip_proc_apis[] is sorted by strcmp() of name; each API owns the slice
 * ip_proc_vers[first .. first + count), sorted by version, the plain symbol before the
 * per-thread one at equal versions.
 */
struct ip_proc_ver {
	int version;	      /* 1000 * major + 10 * minor at which this symbol took over */
	unsigned short entry; /* index into ip_entries[] */
	unsigned char ptds;   /* 1: the _ptsz/_ptds (per-thread default stream) variant */
};

struct ip_proc_api {
	const char *name; /* API (base) name, e.g. "cuMemAlloc" */
	unsigned short first;
	unsigned short count;
};

extern const struct ip_proc_ver ip_proc_vers[];
extern const unsigned ip_proc_ver_count;
extern const struct ip_proc_api ip_proc_apis[];
extern const unsigned ip_proc_api_count;
/* CUDA_VERSION of the cuda.h the tables were generated from: the newest version answered. */
extern const int ip_proc_header_version;

#ifndef IP_ENTRIES_NO_CUDA_H
#include <cuda.h>

/*
 * ip_error_name() - the CUresult enum identifier of err ("CUDA_ERROR_INVALID_VALUE"), as
 * cuGetErrorName reports it. Returns NULL for a value cuda.h does not define.
 */
const char *ip_error_name(CUresult err);

/*
 * ip_error_string() - a short description of err, as cuGetErrorString reports it ("invalid
 * argument"). Returns NULL for a value cuda.h does not define.
 */
const char *ip_error_string(CUresult err);
#endif

#endif
