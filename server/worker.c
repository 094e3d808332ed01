/*
 * The worker: one process per client session (design.md §5).
 *
 * It owns the session's CUDA state: it loads the driver, reserves the device address window at
 * its fixed base (and refuses to serve if the driver places it elsewhere), answers the
 * handshake, then runs two threads: the reader takes frames off the connection and checks
 * them, the executor (this process's main thread) runs them in order. Host-function triggers
 * are acknowledged by the reader directly, so an executor blocked in a synchronize never
 * deadlocks against a client callback. When the client leaves or dies — or sends anything
 * malformed — the worker exits and the operating system and the driver reclaim everything.
 * It must never trust a length, an id or an address from the client.
 */
#define LOG_PREFIX "worker: "
#include <errno.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "rgpu/window.h"
#include "srv.h"

#define HELLO_TIMEOUT_S 30

/* ---- sending ---------------------------------------------------------------------------- */

int srv_send(struct srv_worker *w, uint16_t type, uint32_t flags, uint64_t seq,
	     const ProtobufCMessage *body, const void *payload, uint64_t plen)
{
	int ret;
	pthread_mutex_lock(&w->send_lock);
	ret = rgpu_frame_send(w->conn, type, flags, seq, w->session, body, payload, plen);
	pthread_mutex_unlock(&w->send_lock);
	if (ret)
		atomic_store(&w->dead, 1);
	return ret;
}

CUresult srv_take_async_error(struct srv_worker *w)
{
	CUresult r = w->async_err;
	w->async_err = CUDA_SUCCESS;
	return r;
}

void srv_async_error(struct srv_worker *w, CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return;
	pr_debug("async %s failed: %s", what, srv_cu_name(&w->drv, r));
	if (w->async_err == CUDA_SUCCESS)
		w->async_err = r;
}

int srv_reply(struct srv_worker *w, const struct srv_frame *f, ProtobufCMessage *rep)
{
	/* every reply message has `result` as field 1 and `async_error` as field 2 */
	const ProtobufCFieldDescriptor *fd =
		protobuf_c_message_descriptor_get_field(rep->descriptor, 2);
	CUresult async = srv_take_async_error(w);
	if (fd && fd->type == PROTOBUF_C_TYPE_INT32)
		*(int32_t *)((char *)rep + fd->offset) = (int32_t)async;
	return srv_send(w, f->hdr.type, RGPU_FRAME_REPLY, f->hdr.seq, rep, NULL, 0);
}

int srv_reply_status(struct srv_worker *w, const struct srv_frame *f, CUresult r)
{
	Rgpu__Status st = RGPU__STATUS__INIT;
	st.result = (int32_t)r;
	return srv_reply(w, f, &st.base);
}

int srv_reply_value(struct srv_worker *w, const struct srv_frame *f, CUresult r, int64_t v)
{
	Rgpu__ValueReply rep = RGPU__VALUE_REPLY__INIT;
	rep.result = (int32_t)r;
	rep.value = v;
	return srv_reply(w, f, &rep.base);
}

void srv_protocol_error(struct srv_worker *w, int code, const char *fmt, ...)
{
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pr_warn("protocol error from %s: %s (%s); closing the session", w->conn->peer, msg,
		rgpu_strerror(code));
	pe.code = code;
	pe.message = msg;
	srv_send(w, RGPU_MSG_ERROR, 0, 0, &pe.base, NULL, 0);
	atomic_store(&w->dead, 1);
	rgpu_conn_shutdown(w->conn);
}

/* ---- objects ---------------------------------------------------------------------------- */

static int obj_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct srv_obj *)a)->id, y = ((const struct srv_obj *)b)->id;
	return x < y ? -1 : x > y;
}

struct srv_obj *srv_obj_find(struct srv_worker *w, uint64_t id, int kind)
{
	struct srv_obj key = {.id = id};
	struct srv_obj **p = tfind(&key, &w->objs, obj_cmp);
	if (!p || (kind && (*p)->kind != kind))
		return NULL;
	return *p;
}

int srv_obj_add(struct srv_worker *w, const struct srv_obj *o)
{
	struct srv_obj *n, **p;
	if (o->id == 0 || srv_obj_find(w, o->id, 0))
		return RGPU_EEXIST;
	n = malloc(sizeof(*n));
	if (!n)
		return RGPU_ENOMEM;
	*n = *o;
	p = tsearch(n, &w->objs, obj_cmp);
	if (!p) {
		free(n);
		return RGPU_ENOMEM;
	}
	return 0;
}

void srv_obj_del(struct srv_worker *w, uint64_t id)
{
	struct srv_obj *o = srv_obj_find(w, id, 0);
	if (!o)
		return;
	tdelete(o, &w->objs, obj_cmp);
	free(o);
}

CUresult srv_use_ctx(struct srv_worker *w, uint64_t ctx)
{
	struct srv_obj *o;
	CUresult r;

	if (ctx == w->cur_ctx_id && ctx)
		return CUDA_SUCCESS;
	o = srv_obj_find(w, ctx, SRV_CTX);
	if (!o)
		return CUDA_ERROR_INVALID_CONTEXT;
	r = w->drv.cuCtxSetCurrent(o->h);
	if (r == CUDA_SUCCESS)
		w->cur_ctx_id = ctx;
	return r;
}

CUresult srv_stream(struct srv_worker *w, uint64_t id, CUstream *out)
{
	struct srv_obj *o;
	if (id == 0) {
		*out = NULL;
		return CUDA_SUCCESS;
	}
	o = srv_obj_find(w, id, SRV_STREAM);
	if (!o)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = o->h;
	return CUDA_SUCCESS;
}

/* ---- host-function triggers ------------------------------------------------------------- */

void srv_callback_done(struct srv_worker *w, uint64_t id)
{
	pthread_mutex_lock(&w->cb_lock);
	if (w->cb_ndone == w->cb_cap) {
		size_t cap = w->cb_cap ? 2 * w->cb_cap : 16;
		uint64_t *n = realloc(w->cb_done, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&w->cb_lock);
			return;
		}
		w->cb_done = n;
		w->cb_cap = cap;
	}
	w->cb_done[w->cb_ndone++] = id;
	pthread_cond_broadcast(&w->cb_cond);
	pthread_mutex_unlock(&w->cb_lock);
}

int srv_wait_callback(struct srv_worker *w, uint64_t id)
{
	int ret = RGPU_ECLOSED;
	pthread_mutex_lock(&w->cb_lock);
	while (!atomic_load(&w->dead)) {
		size_t i;
		for (i = 0; i < w->cb_ndone && w->cb_done[i] != id; i++)
			;
		if (i < w->cb_ndone) {
			w->cb_done[i] = w->cb_done[--w->cb_ndone];
			ret = 0;
			break;
		}
		pthread_cond_wait(&w->cb_cond, &w->cb_lock);
	}
	pthread_mutex_unlock(&w->cb_lock);
	return ret;
}

/* ---- the reader ------------------------------------------------------------------------- */

static void queue_push(struct srv_worker *w, struct srv_frame *f)
{
	pthread_mutex_lock(&w->q_lock);
	if (f) {
		while (w->q_bytes > RGPU_QUEUE_BYTES && !atomic_load(&w->dead))
			pthread_cond_wait(&w->q_cond, &w->q_lock);
		w->q_bytes += f->hdr.payload_len;
		f->next = NULL;
		if (w->q_tail)
			w->q_tail->next = f;
		else
			w->q_head = f;
		w->q_tail = f;
		atomic_fetch_add(&w->q_len, 1);
	} else {
		w->q_closed = 1;
	}
	pthread_cond_broadcast(&w->q_cond);
	pthread_mutex_unlock(&w->q_lock);
}

/*
 * The executor spins briefly before sleeping: a frame usually follows the previous one within
 * microseconds, and a futex wake-up would add more than that to every synchronous call.
 */
static struct srv_frame *queue_pop(struct srv_worker *w)
{
	struct srv_frame *f;
	uint64_t until = rgpu_now_ns() + rgpu_spin_budget_ns(50000);

	while (atomic_load(&w->q_len) == 0 && rgpu_now_ns() < until)
		__builtin_ia32_pause();
	pthread_mutex_lock(&w->q_lock);
	while (!w->q_head && !w->q_closed)
		pthread_cond_wait(&w->q_cond, &w->q_lock);
	f = w->q_head;
	if (f) {
		w->q_head = f->next;
		if (!w->q_head)
			w->q_tail = NULL;
		atomic_fetch_sub(&w->q_len, 1);
		w->q_bytes -= f->hdr.payload_len;
		pthread_cond_broadcast(&w->q_cond);
	}
	pthread_mutex_unlock(&w->q_lock);
	return f;
}

static void frame_free(struct srv_worker *w, struct srv_frame *f)
{
	free(f->body);
	if (f->payload_staged)
		srv_staging_put(w->staging, f->payload);
	else
		free(f->payload);
	free(f);
}

static void *reader_main(void *arg)
{
	struct srv_worker *w = arg;

	for (;;) {
		struct srv_frame *f = calloc(1, sizeof(*f));
		int ret;

		if (!f)
			break;
		ret = rgpu_frame_recv(w->conn, RGPU_PEER_SERVER, &f->hdr, &f->body);
		if (ret) {
			unsigned version = f->hdr.version;
			free(f);
			if (ret == RGPU_ECLOSED || atomic_load(&w->dead))
				pr_info("client %s left", w->conn->peer);
			else if (ret == RGPU_EIO)
				pr_info("client %s: connection lost (%s)", w->conn->peer,
					strerror(w->conn->last_errno));
			else if (ret == RGPU_EVERSION)
				srv_protocol_error(w, ret, "protocol version %u, this server speaks %u",
						   version, RGPU_PROTO_VERSION);
			else
				srv_protocol_error(w, ret, "bad frame header");
			break;
		}
		if (f->hdr.session != w->session) {
			srv_protocol_error(w, RGPU_EPROTO, "frame for session %llu on session %llu",
					   (unsigned long long)f->hdr.session,
					   (unsigned long long)w->session);
			free(f->body);
			free(f);
			break;
		}
		if (f->hdr.type == RGPU_MSG_CALLBACK_DONE) {
			Rgpu__Callback *cb =
				rgpu__callback__unpack(NULL, f->hdr.body_len, f->body);
			free(f->body);
			free(f);
			if (!cb) {
				srv_protocol_error(w, RGPU_EPROTO, "undecodable MSG_CALLBACK_DONE");
				break;
			}
			srv_callback_done(w, cb->callback);
			rgpu__callback__free_unpacked(cb, NULL);
			continue;
		}
		if (f->hdr.payload_len) {
			/* bulk copy chunks land in pinned memory; the rest in plain memory */
			if (f->hdr.type == RGPU_MSG_MEMCPY_HTOD &&
			    f->hdr.payload_len > 65536 && f->hdr.payload_len <= RGPU_COPY_CHUNK) {
				f->payload = srv_staging_tryget(w->staging);
				f->payload_staged = f->payload != NULL;
			}
			if (!f->payload) {
				f->payload = malloc(f->hdr.payload_len);
			}
			if (!f->payload) {
				pr_err("out of memory for a %llu-byte payload",
				       (unsigned long long)f->hdr.payload_len);
				frame_free(w, f);
				break;
			}
			ret = rgpu_conn_recv(w->conn, f->payload, f->hdr.payload_len);
			if (ret) {
				pr_info("client %s: connection lost in a payload", w->conn->peer);
				frame_free(w, f);
				break;
			}
		}
		queue_push(w, f);
	}
	/* wake everyone who waits for the client */
	atomic_store(&w->dead, 1);
	pthread_mutex_lock(&w->cb_lock);
	pthread_cond_broadcast(&w->cb_cond);
	pthread_mutex_unlock(&w->cb_lock);
	queue_push(w, NULL);
	return NULL;
}

/* ---- start-up --------------------------------------------------------------------------- */

static void fill_device(struct srv_worker *w, int i, Rgpu__DeviceInfo *di, int32_t *attrs,
			char *name)
{
	CUuuid uuid;
	size_t total = 0;

	w->drv.cuDeviceGetName(name, 256, w->dev[i]);
	w->drv.cuDeviceGetUuid(&uuid, w->dev[i]);
	w->drv.cuDeviceTotalMem(&total, w->dev[i]);
	di->name = name;
	di->uuid.data = malloc(16);
	if (di->uuid.data) {
		memcpy(di->uuid.data, uuid.bytes, 16);
		di->uuid.len = 16;
	}
	di->total_mem = total;
	attrs[0] = 0;
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
		int v = 0;
		if (w->drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)a, w->dev[i]) != CUDA_SUCCESS)
			v = 0;
		attrs[a] = v;
	}
	di->n_attributes = CU_DEVICE_ATTRIBUTE_MAX;
	di->attributes = attrs;
}

/* Initialise the driver and place the window. On failure *why says what for the client. */
static CUresult setup_cuda(struct srv_worker *w, char *why, size_t whylen)
{
	CUresult r;
	int n = 0;

	if (srv_driver_load(&w->drv, w->cfg->driver)) {
		snprintf(why, whylen, "the server cannot load its CUDA driver %s",
			 w->cfg->driver ? w->cfg->driver : "libcuda.so.1");
		return CUDA_ERROR_NO_DEVICE;
	}
	r = w->drv.cuInit(0);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS || n == 0) {
		snprintf(why, whylen, "the server's driver has no usable GPU (cuInit: %s)",
			 srv_cu_name(&w->drv, r));
		return r ? r : CUDA_ERROR_NO_DEVICE;
	}
	w->ndev = MIN(n, (int)ARRAY_SIZE(w->dev));
	for (int i = 0; i < w->ndev; i++)
		w->drv.cuDeviceGet(&w->dev[i], i);
	r = w->drv.cuDevicePrimaryCtxRetain(&w->base_ctx, w->dev[0]);
	if (r == CUDA_SUCCESS)
		r = w->drv.cuCtxSetCurrent(w->base_ctx);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen, "cannot create a context on the server's GPU: %s",
			 srv_cu_name(&w->drv, r));
		return r;
	}
	r = w->drv.cuMemAddressReserve(&w->window, w->cfg->window_size, 0,
				       (CUdeviceptr)w->cfg->window_base, 0);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen, "cannot reserve the device address window: %s",
			 srv_cu_name(&w->drv, r));
		return r;
	}
	if (w->window != w->cfg->window_base) {
		snprintf(why, whylen,
			 "the driver placed the device address window at 0x%llx, not at its fixed "
			 "base 0x%llx: refusing to serve (addresses must be the same on every server)",
			 (unsigned long long)w->window, (unsigned long long)w->cfg->window_base);
		w->drv.cuMemAddressFree(w->window, w->cfg->window_size);
		w->window = 0;
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	/*
	 * The executor serves every client thread, so its own calls (mapping memory, staging
	 * copies) must not count as the "potentially unsafe" calls a global-mode capture forbids.
	 */
	CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
	w->drv.cuThreadExchangeStreamCaptureMode(&relaxed);
	if (srv_staging_new(w, w->cfg->staging_buffers, RGPU_COPY_CHUNK, &w->staging)) {
		snprintf(why, whylen, "cannot allocate pinned staging memory");
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

static int handshake(struct srv_worker *w)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	Rgpu__Hello *hello;
	Rgpu__HelloReply rep = RGPU__HELLO_REPLY__INIT;
	struct timeval tv = {.tv_sec = HELLO_TIMEOUT_S};
	char why[512] = "";
	char host[256] = "";
	int ret;

	setsockopt(w->conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = rgpu_frame_recv(w->conn, RGPU_PEER_SERVER, &h, &body);
	if (ret == RGPU_EVERSION) {
		srv_protocol_error(w, ret, "protocol version %u, this server speaks %u",
				   (unsigned)h.version, RGPU_PROTO_VERSION);
		return ret;
	}
	if (ret == RGPU_ECLOSED || ret == RGPU_ETIMEDOUT || ret == RGPU_EIO) {
		pr_info("client %s left before the handshake", w->conn->peer);
		return ret;
	}
	if (ret) {
		srv_protocol_error(w, ret, "bad first frame");
		return ret;
	}
	if (h.type != RGPU_MSG_HELLO || h.payload_len) {
		free(body);
		srv_protocol_error(w, RGPU_EPROTO, "expected MSG_HELLO, got %s",
				   rgpu_msg_name(h.type));
		return RGPU_EPROTO;
	}
	hello = rgpu__hello__unpack(NULL, h.body_len, body);
	free(body);
	if (!hello) {
		srv_protocol_error(w, RGPU_EPROTO, "undecodable MSG_HELLO");
		return RGPU_EPROTO;
	}
	if (hello->protocol_version != RGPU_PROTO_VERSION) {
		srv_protocol_error(w, RGPU_EVERSION, "client speaks protocol %u, server %u",
				   hello->protocol_version, RGPU_PROTO_VERSION);
		rgpu__hello__free_unpacked(hello, NULL);
		return RGPU_EVERSION;
	}
	pr_info("session %llu: client %s pid %d program %s", (unsigned long long)w->session,
		w->conn->peer, hello->client_pid, hello->client_program);
	rgpu__hello__free_unpacked(hello, NULL);

	tv.tv_sec = 0;
	setsockopt(w->conn->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	CUresult r = setup_cuda(w, why, sizeof(why));
	gethostname(host, sizeof(host) - 1);
	rep.result = (int32_t)r;
	rep.protocol_version = RGPU_PROTO_VERSION;
	rep.capabilities = RGPU_CAPS_SERVER;
	rep.session_id = w->session;
	rep.server_host = host;
	rep.error = why;
	rep.window_base = w->cfg->window_base;
	rep.window_size = w->cfg->window_size;
	rep.granularity = RGPU_GRANULE;

	Rgpu__DeviceInfo di[16], *dip[16];
	static int32_t attrs[16][CU_DEVICE_ATTRIBUTE_MAX];
	static char names[16][256];
	if (r == CUDA_SUCCESS) {
		int v = 0;
		w->drv.cuDriverGetVersion(&v);
		rep.driver_version = v;
		for (int i = 0; i < w->ndev; i++) {
			rgpu__device_info__init(&di[i]);
			fill_device(w, i, &di[i], attrs[i], names[i]);
			dip[i] = &di[i];
		}
		rep.n_devices = (size_t)w->ndev;
		rep.devices = dip;
	} else {
		pr_err("session %llu refused: %s", (unsigned long long)w->session, why);
	}
	ret = srv_send(w, RGPU_MSG_HELLO, RGPU_FRAME_REPLY, h.seq, &rep.base, NULL, 0);
	for (size_t i = 0; i < rep.n_devices; i++)
		free(di[i].uuid.data);
	if (ret)
		return ret;
	return r == CUDA_SUCCESS ? 0 : RGPU_ECUDA;
}

void srv_worker_run(const struct srv_config *cfg, struct rgpu_conn *conn)
{
	static struct srv_worker wk;
	struct srv_worker *w = &wk;
	pthread_t reader;
	int ret;

	w->cfg = cfg;
	w->conn = conn;
	rgpu_conn_set_msgs(conn, &rgpu_job_msgs);
	w->session = ((uint64_t)getpid() << 20) ^ (rgpu_now_ns() & 0xfffff);
	if (w->session == 0)
		w->session = 1;
	pthread_mutex_init(&w->send_lock, NULL);
	pthread_mutex_init(&w->q_lock, NULL);
	pthread_cond_init(&w->q_cond, NULL);
	pthread_mutex_init(&w->cb_lock, NULL);
	pthread_cond_init(&w->cb_cond, NULL);

	if (handshake(w))
		goto out;
	if (cfg->state_dir && srv_modcache_open(cfg->state_dir, &w->modcache))
		pr_warn("module cache unavailable in %s: images are not kept", cfg->state_dir);
	w->conn->spin_ns = (uint32_t)rgpu_spin_budget_ns(30000);
	if (pthread_create(&reader, NULL, reader_main, w)) {
		pr_err("cannot start the reader thread");
		goto out;
	}
	for (;;) {
		struct srv_frame *f = queue_pop(w);
		if (!f)
			break;
		ret = srv_exec(w, f);
		frame_free(w, f);
		if (ret)
			break;
	}
	pr_info("session %llu ends", (unsigned long long)w->session);
out:
	/*
	 * _exit, not exit: a host function may still be blocked in a driver thread waiting for a
	 * client that is gone, and the driver's exit handlers would wait for it. Closing the
	 * process releases every context, mapping and pinned page at once.
	 */
	atomic_store(&w->dead, 1);
	rgpu_conn_shutdown(conn);
	_exit(0);
}
