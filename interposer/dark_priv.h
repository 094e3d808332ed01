/*
 * Private to the interposer's emulation of the runtime's export tables ("dark API",
 * docs/dark-api.md): what dark.c, integrity.c and cls.c share, and the pure integrity entry
 * point the unit tests drive with injected inputs. Nothing here is exported from libcuda.so.1.
 */
#ifndef IP_DARK_PRIV_H
#define IP_DARK_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* ---- the tables (dark.c) ------------------------------------------------------------------ */

/*
 * The two tables the integrity check hashes. They are the very objects cuGetExportTable hands
 * out for 6bd5fb6c and d4082055; integrity.c reads them here rather than calling the exported
 * cuGetExportTable so that a symbol interposed in front of ours cannot change what is hashed.
 */
#define IP_DARK_CUDART_SLOTS 13
#define IP_DARK_INTEGRITY_SLOTS 3
extern const void *const ip_dark_cudart_interface[IP_DARK_CUDART_SLOTS];
extern const void *const ip_dark_integrity_table[IP_DARK_INTEGRITY_SLOTS];

/* ---- context-local storage (cls.c), dark-api.md §4.4 ------------------------------------ */

typedef void (*ip_cls_dtor)(CUcontext ctx, void *key, void *value);

/*
 * ip_cls_put() - CLS slot 0: store value and destructor under (ctx, key).
 *
 * @ctx:    the context; NULL means the calling thread's current context
 * @key:    any pointer-sized value (runtimes use an address of their own)
 * @value:  returned by ip_cls_get()
 * @dtor:   called as dtor(ctx, key, value) when ctx is torn down; may be NULL
 *
 * Returns CUDA_SUCCESS; CUDA_ERROR_INVALID_CONTEXT when ctx is NULL and no context is current;
 * CUDA_ERROR_INVALID_HANDLE when (ctx, key) already exists (the old value stays) or ctx is not
 * a live context; CUDA_ERROR_OUT_OF_MEMORY.
 */
CUresult ip_cls_put(CUcontext ctx, void *key, void *value, ip_cls_dtor dtor);

/*
 * ip_cls_del() - CLS slot 1: forget (ctx, key) without calling its destructor.
 *
 * Returns CUDA_SUCCESS; CUDA_ERROR_INVALID_CONTEXT when ctx is NULL and no context is current;
 * CUDA_ERROR_INVALID_HANDLE when there is no such entry.
 */
CUresult ip_cls_del(CUcontext ctx, void *key);

/*
 * ip_cls_get() - CLS slot 2: the value stored under (ctx, key). Note the value comes first.
 *
 * @value:  receives the value; untouched on failure
 *
 * Returns CUDA_SUCCESS; CUDA_ERROR_INVALID_VALUE for a NULL value pointer;
 * CUDA_ERROR_INVALID_CONTEXT when ctx is NULL and no context is current;
 * CUDA_ERROR_INVALID_HANDLE when there is no such entry, also for a torn-down or destroyed ctx.
 */
CUresult ip_cls_get(void **value, CUcontext ctx, void *key);

/* ---- the integrity check (integrity.c), dark-api.md §5 ---------------------------------- */

#define IP_INTEGRITY_KEY_LEN 16
#define IP_INTEGRITY_RECORD_LEN 48     /* §5.3, first record */
#define IP_INTEGRITY_DEV_RECORD_LEN 28 /* §5.3, one per device */
#define IP_INTEGRITY_DIGEST_LEN 16

/* §5.2: the answers for version % 10 == 0 and == 1, as out[0], out[1]. */
#define IP_INTEGRITY_CONST0_LO 0x3341181C03CB675CULL
#define IP_INTEGRITY_CONST1_LO 0x1841181C03CB675CULL
#define IP_INTEGRITY_CONST_HI 0x8ED383AA1F4CD1E8ULL

/* The HMAC key of §5.5 (derived as in §5.6; the unit test re-derives it). */
extern const uint8_t ip_integrity_key[IP_INTEGRITY_KEY_LEN];

/* One device record: what cuDeviceGetUuid_v2 and cuDeviceGetAttribute 50/33/34 report. */
struct ip_integrity_dev {
	uint8_t uuid[16];
	int32_t pci_domain;
	int32_t pci_bus;
	int32_t pci_device;
};

/*
 * Everything the digest depends on. The slot function fills it from the live process; the
 * unit tests fill it from the vectors of §5.7.
 */
struct ip_integrity_in {
	uint32_t driver_version;  /* what cuDriverGetVersion reports */
	uint32_t version;	  /* the runtime's argument: its version + 0, 1 or 2 */
	uint32_t pid;		  /* getpid() */
	uint32_t tid;		  /* low 32 bits of pthread_self() of the calling thread */
	uint64_t cudart_table;	  /* address of the CUDART_INTERFACE table */
	uint64_t integrity_table; /* address of the INTEGRITY_CHECK table */
	uint64_t integrity_fn;	  /* INTEGRITY_CHECK slot 1, as stored in the table */
	uint64_t unix_seconds;	  /* the runtime's argument */
	unsigned ndev;
	const struct ip_integrity_dev *dev; /* ndev records, ordinal order */
};

/*
 * ip_integrity_record() - write the 48-byte first record of the message (§5.3).
 * ip_integrity_dev_record() - write one 28-byte device record.
 * Exposed so the tests can compare the message byte for byte with V1.
 */
void ip_integrity_record(const struct ip_integrity_in *in, uint8_t rec[IP_INTEGRITY_RECORD_LEN]);
void ip_integrity_dev_record(const struct ip_integrity_dev *d,
			     uint8_t rec[IP_INTEGRITY_DEV_RECORD_LEN]);

/*
 * ip_integrity_compute() - the answer of INTEGRITY_CHECK[1] for the given inputs: the
 * constant of §5.2 when in->version % 10 is 0 or 1, else HMAC-MD2 of the message (§5.5).
 * Pure: no global state, no caching.
 *
 * @in:   the inputs
 * @out:  receives the two 64-bit words the runtime expects
 *
 * Returns 0, or RGPU_EINVAL for a NULL argument or device records missing.
 */
int ip_integrity_compute(const struct ip_integrity_in *in, unsigned long long out[2]);

/*
 * ip_dark_integrity() - INTEGRITY_CHECK slot 1 (§4.6): gathers the live inputs (driver
 * version, getpid, the calling thread's pthread_self, the two table addresses, slot 1 as
 * stored, the core's device list) and answers through ip_integrity_compute(), per call.
 *
 * @version:       the runtime's version + 0, 1 or 2
 * @unix_seconds:  hashed as given
 * @out:           receives the two words
 *
 * Returns CUDA_SUCCESS; CUDA_ERROR_NOT_INITIALIZED before cuInit, out untouched;
 * CUDA_ERROR_INVALID_VALUE for a NULL out; CUDA_ERROR_OUT_OF_MEMORY with very many devices.
 */
CUresult ip_dark_integrity(unsigned version, unsigned long long unix_seconds,
			   unsigned long long *out);

#endif
