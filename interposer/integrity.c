/*
 * The runtime's integrity check, INTEGRITY_CHECK slot 1 (dark-api.md §5). Every CUDA runtime
 * copy calls it three times while initialising and dies with SIGSEGV unless the answers match
 * what it recomputes from facts the driver API gave it: the driver version, the process and
 * thread, the table addresses and the device identities. This file owns the message layout,
 * the HMAC-MD2 over it and the two constants; it reads its inputs from the core's caches.
 *
 * It must never cache a digest (each runtime copy calls it on its own thread, and the thread
 * is hashed), never ask the server for anything (the inputs are client-side facts fixed at
 * cuInit), and never hash a value other than the one rgpu's own API reports for it (§5.8).
 *
 * MD2 and HMAC come from GNU Nettle. Nettle's generic HMAC pads the key to the hash's
 * block_size, which for nettle_md2 is 16 (MD2_BLOCK_SIZE), and a 16-byte key is used as is:
 * that is exactly RFC 2104 with block size 16 as §5.5 requires, so nothing is hand-written.
 * The unit test checks it against the RFC 1319 vectors, the inner state V8 and V1-V7.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/hmac.h>
#include <nettle/md2.h>

#define LOG_PREFIX "dark: "
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

#include "dark_priv.h"
#include "ip_dark.h"

_Static_assert(MD2_BLOCK_SIZE == IP_INTEGRITY_KEY_LEN, "HMAC-MD2 key must be one MD2 block");
_Static_assert(MD2_DIGEST_SIZE == IP_INTEGRITY_DIGEST_LEN, "MD2 digest is 16 bytes");
_Static_assert(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID == 50 && CU_DEVICE_ATTRIBUTE_PCI_BUS_ID == 33 &&
		   CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID == 34,
	       "device record attributes of dark-api.md §5.3");

/*
 * §5.5. Derived by the runtime from a 64-byte table in its .rodata (§5.6); embedded here as
 * the result, the derivation lives in the unit test as documentation of where it comes from.
 */
const uint8_t ip_integrity_key[IP_INTEGRITY_KEY_LEN] = {
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52, 0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
};

/* Devices whose records fit on the stack; more fall back to the heap. */
#define INTEGRITY_STACK_DEVS 16

void ip_integrity_record(const struct ip_integrity_in *in, uint8_t rec[IP_INTEGRITY_RECORD_LEN])
{
	/* Order per §5.3: CUDART_INTERFACE before INTEGRITY, timestamp last. */
	wr_le32(rec + 0, in->driver_version);
	wr_le32(rec + 4, in->version);
	wr_le32(rec + 8, in->pid);
	wr_le32(rec + 12, in->tid);
	wr_le64(rec + 16, in->cudart_table);
	wr_le64(rec + 24, in->integrity_table);
	wr_le64(rec + 32, in->integrity_fn);
	wr_le64(rec + 40, in->unix_seconds);
}

void ip_integrity_dev_record(const struct ip_integrity_dev *d,
			     uint8_t rec[IP_INTEGRITY_DEV_RECORD_LEN])
{
	memcpy(rec, d->uuid, 16);
	wr_le32(rec + 16, (uint32_t)d->pci_domain);
	wr_le32(rec + 20, (uint32_t)d->pci_bus);
	wr_le32(rec + 24, (uint32_t)d->pci_device);
}

int ip_integrity_compute(const struct ip_integrity_in *in, unsigned long long out[2])
{
	struct HMAC_CTX(struct md2_ctx) h; /* Nettle has no named hmac_md2_ctx */
	uint8_t rec[IP_INTEGRITY_RECORD_LEN];
	uint8_t drec[IP_INTEGRITY_DEV_RECORD_LEN];
	uint8_t digest[IP_INTEGRITY_DIGEST_LEN];

	if (!in || !out || (in->ndev && !in->dev))
		return RGPU_EINVAL;

	/* §5.2: the real driver answers these two residues with fixed values, not a digest. */
	switch (in->version % 10) {
	case 0:
		out[0] = IP_INTEGRITY_CONST0_LO;
		out[1] = IP_INTEGRITY_CONST_HI;
		return 0;
	case 1:
		out[0] = IP_INTEGRITY_CONST1_LO;
		out[1] = IP_INTEGRITY_CONST_HI;
		return 0;
	}

	HMAC_SET_KEY(&h, &nettle_md2, sizeof(ip_integrity_key), ip_integrity_key);
	ip_integrity_record(in, rec);
	hmac_update(&h.state, &nettle_md2, sizeof(rec), rec);
	for (unsigned i = 0; i < in->ndev; i++) {
		ip_integrity_dev_record(&in->dev[i], drec);
		hmac_update(&h.state, &nettle_md2, sizeof(drec), drec);
	}
	HMAC_DIGEST(&h, &nettle_md2, sizeof(digest), digest);

	out[0] = rd_le64(digest);
	out[1] = rd_le64(digest + 8);
	return 0;
}

/* Fill one device record from the core's cache, the same values cuDeviceGet* report. */
static void gather_dev(int ord, struct ip_integrity_dev *d)
{
	const CUuuid *u = ip_device_uuid(ord);

	if (u) {
		memcpy(d->uuid, u->bytes, sizeof(d->uuid));
	} else {
		/* Cannot happen for an ordinal below ip_device_count(); the hash will not match. */
		pr_warn("integrity: no UUID for device %d", ord);
		memset(d->uuid, 0, sizeof(d->uuid));
	}
	d->pci_domain = ip_device_attr(ord, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
	d->pci_bus = ip_device_attr(ord, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
	d->pci_device = ip_device_attr(ord, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
}

CUresult ip_dark_integrity(unsigned version, unsigned long long unix_seconds,
			   unsigned long long *out)
{
	struct ip_integrity_dev stack_dev[INTEGRITY_STACK_DEVS];
	struct ip_integrity_dev *dev = stack_dev;
	struct ip_integrity_in in;
	unsigned long long res[2];
	int n, rc;

	if (!ip_initialized())
		return CUDA_ERROR_NOT_INITIALIZED; /* §5.1: out untouched */
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;

	n = ip_device_count();
	if (n < 0)
		n = 0;
	if (n > INTEGRITY_STACK_DEVS) {
		dev = calloc((size_t)n, sizeof(*dev));
		if (!dev)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < n; i++)
		gather_dev(i, &dev[i]);

	in = (struct ip_integrity_in){
	    .driver_version = (uint32_t)ip_driver_version(),
	    .version = version,
	    .pid = (uint32_t)getpid(),
	    /* The TCB address, not the kernel TID (§5.3); truncation is the point. */
	    .tid = (uint32_t)(uintptr_t)pthread_self(),
	    .cudart_table = (uint64_t)(uintptr_t)ip_dark_cudart_interface,
	    .integrity_table = (uint64_t)(uintptr_t)ip_dark_integrity_table,
	    /* Read back from the table, as the runtime does, not taken as &ip_dark_integrity. */
	    .integrity_fn = (uint64_t)(uintptr_t)ip_dark_integrity_table[1],
	    .unix_seconds = unix_seconds,
	    .ndev = (unsigned)n,
	    .dev = dev,
	};
	rc = ip_integrity_compute(&in, res);
	if (dev != stack_dev)
		free(dev);
	if (rc)
		return CUDA_ERROR_INVALID_VALUE;

	/* §8: the first of the three calls names the runtime copy that is initialising. */
	if (version % 10 == 0)
		pr_info("CUDA runtime %u.%u initialising (integrity version %u, %d device(s))",
			version / 1000, (version % 1000) / 10, version, n);

	out[0] = res[0];
	out[1] = res[1];
	return CUDA_SUCCESS;
}
