/*
 * A stand-in for the interposer's core, for the unit tests of the dark-API part (dark.c,
 * integrity.c, cls.c): every "provided by the core" function of ip_dark.h, answering from
 * state the test sets through the mock_* functions, plus a cuModuleLoadData that records its
 * arguments. It must never grow logic of its own beyond what a test needs to observe.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ip_dark.h"

#define MOCK_MAX_DEV 24 /* more than integrity.c keeps on its stack */
#define MOCK_MAX_CTX 16

static struct {
	int initialized;
	int driver_version;
	int ndev;
	CUuuid uuid[MOCK_MAX_DEV];
	int pci[MOCK_MAX_DEV][3]; /* domain, bus, device */
	CUcontext primary[MOCK_MAX_DEV];
	CUcontext current;
	struct {
		CUcontext ctx;
		unsigned long long uid;
		int alive;
	} ctx[MOCK_MAX_CTX];
	int nctx;
	/* cuModuleLoadData observations */
	int load_calls;
	CUmodule *load_out;
	const void *load_image;
	CUresult load_rc;
	int peek_calls;
	struct {
		CUstream s;
		unsigned long long id;
	} streams[4];
	int nstreams;
} m;

/* mock_reset() - back to "nothing initialised, no devices, no contexts". */
void mock_reset(void)
{
	memset(&m, 0, sizeof(m));
	m.driver_version = 13000;
}

void mock_set_initialized(int on)
{
	m.initialized = on;
}

void mock_set_driver_version(int v)
{
	m.driver_version = v;
}

/* mock_set_device() - device ord (appended in order) with its UUID and PCI ids. */
void mock_set_device(int ord, const unsigned char uuid[16], int domain, int bus, int device,
		     CUcontext primary)
{
	memcpy(m.uuid[ord].bytes, uuid, 16);
	m.pci[ord][0] = domain;
	m.pci[ord][1] = bus;
	m.pci[ord][2] = device;
	m.primary[ord] = primary;
	if (m.ndev <= ord)
		m.ndev = ord + 1;
}

void mock_set_device_count(int n)
{
	m.ndev = n;
}

void mock_set_current(CUcontext ctx)
{
	m.current = ctx;
}

/* mock_add_ctx() - a known context handle with its cuCtxGetId value. */
void mock_add_ctx(CUcontext ctx, unsigned long long uid, int alive)
{
	for (int i = 0; i < m.nctx; i++) {
		if (m.ctx[i].ctx == ctx) {
			m.ctx[i].uid = uid;
			m.ctx[i].alive = alive;
			return;
		}
	}
	m.ctx[m.nctx].ctx = ctx;
	m.ctx[m.nctx].uid = uid;
	m.ctx[m.nctx].alive = alive;
	m.nctx++;
}

void mock_set_load_rc(CUresult rc)
{
	m.load_rc = rc;
}

int mock_load_calls(void)
{
	return m.load_calls;
}

CUmodule *mock_load_out(void)
{
	return m.load_out;
}

const void *mock_load_image(void)
{
	return m.load_image;
}

int mock_peek_calls(void)
{
	return m.peek_calls;
}

/* ---- ip_dark.h, core side ----------------------------------------------------------------- */

int ip_initialized(void)
{
	return m.initialized;
}

int ip_driver_version(void)
{
	return m.driver_version;
}

int ip_device_count(void)
{
	return m.initialized ? m.ndev : 0;
}

const CUuuid *ip_device_uuid(int dev)
{
	if (dev < 0 || dev >= m.ndev)
		return NULL;
	return &m.uuid[dev];
}

int ip_device_attr(int dev, CUdevice_attribute attr)
{
	if (dev < 0 || dev >= m.ndev)
		return 0;
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		return m.pci[dev][0];
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		return m.pci[dev][1];
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		return m.pci[dev][2];
	default:
		return 0;
	}
}

CUcontext ip_ctx_current(void)
{
	return m.current;
}

unsigned long long ip_ctx_uid(CUcontext ctx)
{
	for (int i = 0; i < m.nctx; i++)
		if (m.ctx[i].ctx == ctx && m.ctx[i].alive)
			return m.ctx[i].uid;
	return 0;
}

int ip_ctx_alive(CUcontext ctx)
{
	for (int i = 0; i < m.nctx; i++)
		if (m.ctx[i].ctx == ctx)
			return m.ctx[i].alive;
	return 0;
}

CUresult ip_primary_ctx_peek(CUdevice dev, CUcontext *out)
{
	m.peek_calls++;
	if (!m.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= m.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = m.primary[dev];
	return CUDA_SUCCESS;
}

/* ---- the core's module path ----------------------------------------------------------------- */

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	m.load_calls++;
	m.load_out = module;
	m.load_image = image;
	if (m.load_rc == CUDA_SUCCESS)
		*module = (CUmodule)(uintptr_t)0x5000;
	return m.load_rc;
}

/* ---- streams, TPC maps and module functions (21318c60, 1734dc26, 6e163fbe) ------------------ */

void mock_add_stream(CUstream s, unsigned long long id)
{
	m.streams[m.nstreams].s = s;
	m.streams[m.nstreams++].id = id;
}

/* NULL and CU_STREAM_LEGACY: 0; CU_STREAM_PER_THREAD: 2; an added stream: its id */
CUresult cuStreamGetId(CUstream s, unsigned long long *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
		*id = s == CU_STREAM_PER_THREAD ? 2 : 0;
		return CUDA_SUCCESS;
	}
	for (int i = 0; i < m.nstreams; i++)
		if (m.streams[i].s == s) {
			*id = m.streams[i].id;
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_HANDLE;
}

/* 66 TPCs: vGPC i % 8, mTPC i / 8 (simgpu's pattern) */
CUresult ip_ctx_tpc_map(unsigned char **vgpc, unsigned char **mtpc)
{
	unsigned char *a, *b;

	if (!m.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!vgpc || !mtpc)
		return CUDA_ERROR_INVALID_VALUE;
	a = malloc(66);
	b = malloc(66);
	if (!a || !b) {
		free(a);
		free(b);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < 66; i++) {
		a[i] = (unsigned char)(i % 8);
		b[i] = (unsigned char)(i / 8);
	}
	*vgpc = a;
	*mtpc = b;
	return CUDA_SUCCESS;
}

/* module 0x5000 holds functions 0x6001 and 0x6002 */
CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if (mod != (CUmodule)0x5000)
		return CUDA_ERROR_INVALID_HANDLE;
	*count = 2;
	return CUDA_SUCCESS;
}

CUresult cuModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule mod)
{
	if (!fns)
		return CUDA_ERROR_INVALID_VALUE;
	if (mod != (CUmodule)0x5000)
		return CUDA_ERROR_INVALID_HANDLE;
	for (unsigned i = 0; i < n && i < 2; i++)
		fns[i] = (CUfunction)(uintptr_t)(0x6001 + i);
	return CUDA_SUCCESS;
}
