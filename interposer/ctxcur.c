/*
 * The current context: each thread's context stack, the entry points that move it
 * (cuCtxGetCurrent, cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent), and what any part of
 * the interposer may ask about a context without knowing how contexts come and go: which one
 * is current, whether a handle is alive, its unique id. It owns only the per-thread stacks and
 * calls into no area (memory, modules, streams, pools, context-local storage), so every area
 * may use it; context.c, which creates and tears contexts down by calling into the areas,
 * stands above them all.
 */
#include <stdio.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"

static __thread struct ip_ctx *tls_stack[IP_CTX_STACK];
static __thread int tls_depth;

#define REQUIRE_INIT()                                                                         \
	do {                                                                                   \
		CUresult r_ = ip_check_init();                                                 \
		if (r_ != CUDA_SUCCESS)                                                        \
			return r_;                                                             \
	} while (0)

struct ip_ctx *ip_ctx_cur(void)
{
	return tls_depth ? tls_stack[tls_depth - 1] : NULL;
}

CUresult ip_ctx_require(struct ip_ctx **out)
{
	struct ip_ctx *c = ip_ctx_cur();
	CUresult r = ip_check_init();
	if (r != CUDA_SUCCESS)
		return r;
	if (!c || c->o.dead || !c->active)
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = c;
	return CUDA_SUCCESS;
}

/*
 * The errors after which the driver refuses all further work in the context (CUDA's
 * "sticky" errors: the process must end or reset the device). Measured on the H100 after an
 * illegal address (tests/cuda/rt_sticky.cu): every call that does work in the context
 * returns it, allocations the client answers itself included; queries of the device, of a
 * pointer's attributes and of the current device still succeed.
 */
static int is_sticky(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
		return 1;
	default:
		return 0;
	}
}

void ip_ctx_note_error(CUresult r)
{
	struct ip_ctx *c = ip_ctx_cur();
	CUresult none = CUDA_SUCCESS;

	if (!c || !is_sticky(r))
		return;
	atomic_compare_exchange_strong(&c->sticky, &none, r);
	none = CUDA_SUCCESS;
	if (c->device >= 0 && c->device < ip.ndev)
		atomic_compare_exchange_strong(&ip.dev[c->device].faulted, &none, r);
}

CUresult ip_ctx_sticky(void)
{
	struct ip_ctx *c = ip_ctx_cur();

	return c ? atomic_load(&c->sticky) : CUDA_SUCCESS;
}

CUresult ip_ctx_require_live(struct ip_ctx **out)
{
	CUresult r = ip_ctx_require(out);

	return r != CUDA_SUCCESS ? r : atomic_load(&(*out)->sticky);
}

int ip_ctx_stack_full(const char *what)
{
	char why[96];
	if (tls_depth < IP_CTX_STACK)
		return 0;
	snprintf(why, sizeof(why),
		 "this thread's context stack already holds %d contexts, rgpu's limit "
		 "(CUDA_ERROR_OUT_OF_MEMORY)",
		 IP_CTX_STACK);
	ip_refused(what, why);
	return 1;
}

void ip_ctx_push(struct ip_ctx *c)
{
	tls_stack[tls_depth++] = c;
}

void ip_ctx_pop(void)
{
	if (tls_depth)
		tls_depth--;
}

void ip_ctx_unstack(struct ip_ctx *c)
{
	int j = 0;
	for (int i = 0; i < tls_depth; i++)
		if (tls_stack[i] != c)
			tls_stack[j++] = tls_stack[i];
	tls_depth = j;
}

/* ---- the current-context stack ----------------------------------------------------------- */

IP_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ip.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	*pctx = (CUcontext)ip_ctx_cur();
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext h)
{
	struct ip_ctx *c = NULL;
	REQUIRE_INIT();
	if (h && !(c = ip_obj_get(h, ST_KIND_CONTEXT)))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!c) {
		if (tls_depth)
			tls_depth--;
		return CUDA_SUCCESS;
	}
	if (tls_depth)
		tls_stack[tls_depth - 1] = c;
	else
		tls_stack[tls_depth++] = c;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext h)
{
	struct ip_ctx *c;
	REQUIRE_INIT();
	if (!(c = ip_obj_get(h, ST_KIND_CONTEXT)))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ip_ctx_stack_full("cuCtxPushCurrent"))
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls_stack[tls_depth++] = c;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!tls_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	tls_depth--;
	if (pctx)
		*pctx = (CUcontext)tls_stack[tls_depth];
	return CUDA_SUCCESS;
}

/* ---- what the export tables need (ip_dark.h) ---------------------------------------------- */

CUcontext ip_ctx_current(void)
{
	return (CUcontext)ip_ctx_cur();
}

unsigned long long ip_ctx_uid(CUcontext h)
{
	struct ip_ctx *c = h ? ip_obj_get(h, ST_KIND_CONTEXT) : NULL;
	return c && c->active ? c->uid : 0;
}

int ip_ctx_alive(CUcontext h)
{
	return ip_obj_get(h, ST_KIND_CONTEXT) != NULL;
}

CUresult ip_ctx_query(uint16_t type, const ProtobufCMessageDescriptor *desc,
		      ProtobufCMessage **reply)
{
	Rgpu__DeviceRef m = RGPU__DEVICE_REF__INIT;
	struct ip_ctx *c;
	CUresult r = ip_ctx_require(&c);

	*reply = NULL;
	if (r != CUDA_SUCCESS)
		return r;
	m.device = c->device;
	m.ctx = c->o.id;
	r = ip_call_status(type, &m.base, NULL, 0, NULL, 0, desc, reply);
	if (r != CUDA_SUCCESS && *reply) {
		protobuf_c_message_free_unpacked(*reply, NULL);
		*reply = NULL;
	}
	return r;
}

/*
 * Work that may write device memory, counted as it is issued (managed.c counts it), and the
 * latest count a context synchronisation covered (context.c says): managed memory's CPU copy
 * may be fetched without waiting once the second has caught up with the first.
 */
static atomic_uint_fast64_t work_issued, work_synced;

uint64_t ip_ctx_work_issued(void)
{
	return atomic_fetch_add(&work_issued, 1) + 1;
}

uint64_t ip_ctx_work_epoch(void)
{
	return atomic_load(&work_issued);
}

void ip_ctx_work_synced(uint64_t epoch)
{
	uint64_t s = atomic_load(&work_synced);

	while (s < epoch && !atomic_compare_exchange_weak(&work_synced, &s, epoch))
		;
}

int ip_ctx_work_pending(void)
{
	return atomic_load(&work_issued) > atomic_load(&work_synced);
}

/*
 * Cache and shared-memory configuration (of the context, or with func of a function): set on
 * the server's driver and recorded, so that a replay sets it again.
 */
CUresult ip_config_set(struct ip_ctx *c, uint64_t func, int kind, int value)
{
	Rgpu__CtxConfig m = RGPU__CTX_CONFIG__INIT;
	m.ctx = c->o.id;
	m.func = func;
	m.kind = (Rgpu__ConfigKind)kind;
	m.value = value;
	ip_route_ctx(c);
	return ip_call_status(RGPU_MSG_CTX_SET_CONFIG, &m.base, NULL, 0, NULL, 0, NULL, NULL);
}
