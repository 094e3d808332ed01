/*
 * The supervisor: listens, and forks one worker process per accepted connection. It never
 * loads the CUDA driver and never reads a client's frames, so nothing a client sends — and no
 * driver fault — can take it down.
 *
 * Each worker has a control channel to it (ctl.c): the worker reports its job (id, client,
 * memory, state) there, and a worker that was handed the resume of a job living elsewhere asks
 * the supervisor to route the connection to the job's worker. The supervisor answers the admin
 * protocol (rgpuctl status / jobs) from those reports, on its own address. It reaps workers,
 * and on SIGTERM or SIGINT stops listening, asks its workers to finish, and exits.
 */
#define LOG_PREFIX "supervisor: "
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "checkpoint.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "srv_admin_handlers.h"
#include "rgpu/adminclient.h"
#include "rgpu/auth.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/store.h"
#include "rgpu/util.h"
#include "srv.h"

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;
	if (sig == SIGTERM || sig == SIGINT)
		stop_requested = 1;
	if (write(sig_pipe[1], &c, 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

#define ADMIN_TIMEOUT_MS 5000

/*
 * Admin connections whose request a process of their own is reading (admin_preauth): our end
 * of the socket it hands the request over, and its pid. At most ADMIN_PENDING_MAX at once;
 * further connections wait in the listen queue.
 */
#define ADMIN_PENDING_MAX 64
static int admin_pending[ADMIN_PENDING_MAX];
static int nadmin_pending;

struct worker {
	pid_t pid;
	int ctl;               /* our end of its control channel; -1 once closed */
	int probe;             /* the GPU probe or an admin helper, not a job */
	int refusing;          /* over --max-sessions: refuses a new session, routes a resume */
	int slot;              /* its slot in the tenant accounting table (quota.c); -1: none */
	int moved;             /* its job moved to another server: it is ending, no job here */
	Rgpu__JobInfo *info;   /* its latest report (NULL before the first) */
	uint64_t info_ns;      /* when it came */
};

static struct worker *workers;
static int nworkers, cap_workers;
static Rgpu__Ctl *gpus;    /* the probe's report */
static uint64_t started_ns;
int srv_server_drained; /* DRAIN: no new sessions, no restored jobs (inherited by workers) */
static char listen_addr[300];

/*
 * Jobs that moved away (CTL_MOVED: a migration, a restore elsewhere): a client that comes back
 * here to resume one (its link was down when it was redirected) is sent on (MSG_REDIRECT),
 * for as long as it could be trying.
 */
struct moved {
	uint8_t job_id[16];
	char addr[300];
	uint64_t until;
};
static struct moved *moved;
static int nmoved;

static void moved_add(const ProtobufCBinaryData *id, const char *addr, int grace_s)
{
	uint64_t now = rgpu_now_ns();
	int k = -1;

	if (id->len != 16 || !addr)
		return;
	for (int i = 0; i < nmoved; i++)
		if (moved[i].until < now || !memcmp(moved[i].job_id, id->data, 16)) {
			k = i;
			break;
		}
	if (k < 0) {
		struct moved *m = realloc(moved, (size_t)(nmoved + 1) * sizeof(*m));
		if (!m)
			return;
		moved = m;
		k = nmoved++;
	}
	memcpy(moved[k].job_id, id->data, 16);
	snprintf(moved[k].addr, sizeof(moved[k].addr), "%s", addr);
	moved[k].until = now + ((uint64_t)grace_s + 60) * 1000000000ull;
}

static const char *moved_to(const ProtobufCBinaryData *id)
{
	uint64_t now = rgpu_now_ns();
	for (int i = 0; i < nmoved; i++)
		if (id->len == 16 && moved[i].until >= now && !memcmp(moved[i].job_id, id->data, 16))
			return moved[i].addr;
	return NULL;
}

static void worker_forget(int i)
{
	/* what it held is its tenant's again, however it ended */
	srv_acct_slot_release(workers[i].slot);
	if (workers[i].ctl >= 0)
		close(workers[i].ctl);
	if (workers[i].info)
		rgpu__job_info__free_unpacked(workers[i].info, NULL);
	workers[i] = workers[--nworkers];
}

static int worker_add(pid_t pid, int ctl, int probe, int refusing, int slot)
{
	if (nworkers == cap_workers) {
		int cap = cap_workers ? 2 * cap_workers : 16;
		struct worker *n = realloc(workers, (size_t)cap * sizeof(*n));
		if (!n)
			return RGPU_ENOMEM;
		workers = n;
		cap_workers = cap;
	}
	workers[nworkers++] =
		(struct worker){.pid = pid, .ctl = ctl, .probe = probe, .refusing = refusing,
				.slot = slot};
	return 0;
}

/* Jobs, and workers that may become one (in their handshake): what --max-sessions counts. */
static int njobs(void)
{
	int n = 0;
	for (int i = 0; i < nworkers; i++)
		n += !workers[i].probe && !workers[i].refusing;
	return n;
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int i = 0; i < nworkers; i++)
			if (workers[i].pid == pid) {
				worker_forget(i);
				break;
			}
		if (WIFSIGNALED(status))
			pr_warn("worker %d killed by signal %d", (int)pid, WTERMSIG(status));
		else if (WEXITSTATUS(status))
			pr_warn("worker %d exited with status %d", (int)pid, WEXITSTATUS(status));
		else
			pr_debug("worker %d finished", (int)pid);
	}
}

static int find_job(const ProtobufCBinaryData *id)
{
	for (int i = 0; i < nworkers; i++) {
		const Rgpu__JobInfo *ji = workers[i].info;
		if (ji && workers[i].ctl >= 0 && ji->job_id.len == id->len && id->len &&
		    memcmp(ji->job_id.data, id->data, id->len) == 0)
			return i;
	}
	return -1;
}

/* A message from worker i on its control channel. */
static void on_ctl(const struct srv_config *cfg, int i)
{
	Rgpu__Ctl *m = NULL;
	int fd = -1, ret = srv_ctl_recv(workers[i].ctl, &m, &fd, 0);

	if (ret == RGPU_ETIMEDOUT)
		return;
	if (ret) {
		if (ret != RGPU_EPROTO) {
			close(workers[i].ctl);
			workers[i].ctl = -1;
		}
		return;
	}
	switch (m->kind) {
	case RGPU__CTL_KIND__CTL_INFO:
		if (m->info && !workers[i].moved) {
			uint64_t now = rgpu_now_ns();
			/* its activity: what its client sent since the last report */
			if (workers[i].info && now > workers[i].info_ns &&
			    m->info->bytes_in >= workers[i].info->bytes_in)
				m->info->in_bytes_per_s =
				    (double)(m->info->bytes_in - workers[i].info->bytes_in) * 1e9 /
				    (double)(now - workers[i].info_ns);
			if (workers[i].info)
				rgpu__job_info__free_unpacked(workers[i].info, NULL);
			workers[i].info = m->info;
			workers[i].info_ns = now;
			m->info = NULL; /* kept */
		}
		break;
	case RGPU__CTL_KIND__CTL_GPUS:
		if (gpus)
			rgpu__ctl__free_unpacked(gpus, NULL);
		gpus = m;
		m = NULL;
		break;
	case RGPU__CTL_KIND__CTL_ROUTE: {
		Rgpu__Ctl res = RGPU__CTL__INIT, fwd = RGPU__CTL__INIT;
		int j = find_job(&m->job_id);
		res.kind = RGPU__CTL_KIND__CTL_ROUTE_RESULT;
		res.result = RGPU_ENOTFOUND;
		if (j < 0 && moved_to(&m->job_id)) {
			/* the job lives elsewhere now: the routing worker redirects its client */
			res.result = RGPU_EMOVED;
			res.error = (char *)moved_to(&m->job_id);
		} else if (j >= 0 && j != i && fd >= 0) {
			fwd.kind = RGPU__CTL_KIND__CTL_RESUME;
			fwd.job_id = m->job_id;
			fwd.hello = m->hello;
			fwd.tenant = m->tenant;
			fwd.server_proof = m->server_proof;
			res.result = srv_ctl_send(workers[j].ctl, &fwd, fd);
			if (res.result == 0) {
				pr_debug("resume routed to worker %d", (int)workers[j].pid);
				/* the router is no job (under TLS it stays, relaying: worker.c) */
				workers[i].refusing = 1;
			}
		}
		srv_ctl_send(workers[i].ctl, &res, -1);
		break;
	}
	case RGPU__CTL_KIND__CTL_MOVED:
		moved_add(&m->job_id, m->error, cfg->resume_grace_s);
		/* its worker is about to exit: the job is no longer this server's */
		if (workers[i].info && workers[i].info->job_id.len == m->job_id.len &&
		    !memcmp(workers[i].info->job_id.data, m->job_id.data, m->job_id.len)) {
			rgpu__job_info__free_unpacked(workers[i].info, NULL);
			workers[i].info = NULL;
			workers[i].refusing = 1; /* nor counted as one */
			workers[i].moved = 1;
		}
		break;
	default:
		break;
	}
	if (fd >= 0)
		close(fd);
	if (m)
		rgpu__ctl__free_unpacked(m, NULL);
}

/* ---- the admin protocol ------------------------------------------------------------------ */

/* the server's proof for the admin request being answered (on_admin), when it was authenticated */
static uint8_t admin_proof[RGPU_AUTH_MAC_LEN];
static int admin_has_proof;

/* a reply's server_proof: the request's, when it was authenticated */
static void set_proof(ProtobufCBinaryData *p)
{
	if (admin_has_proof) {
		p->data = admin_proof;
		p->len = RGPU_AUTH_MAC_LEN;
	}
}
/* the request's body, for the handlers that read more than its header */
static const uint8_t *admin_body;
static size_t admin_body_len;
/* a handler took the connection over (handed to a worker or a helper): not to be closed */
static int admin_conn_taken;
/* the listening sockets, which a helper forked for a request closes */
static int sup_lfd = -1, sup_afd = -1, sup_ufd = -1;
char srv_shm_socket[108];

static void admin_reply(struct rgpu_conn *c, const struct rgpu_frame_hdr *req,
			const ProtobufCMessage *rep)
{
	struct rgpu_frame_hdr h = {.type = req->type, .flags = RGPU_FRAME_REPLY, .ref = req->seq};
	rgpu_frame_send_hdr(c, &h, rep, NULL);
}

/* The probe's GPUs with what rgpu's jobs use of each, and their telemetry now. */
/* device memory the jobs labelled `label` map on GPU g (reservations' accounting) */
static uint64_t label_mapped(const char *label, unsigned g)
{
	uint64_t sum = 0;

	for (int i = 0; i < nworkers; i++) {
		const Rgpu__JobInfo *ji = workers[i].info;
		if (ji && ji->label && !strcmp(ji->label, label) && g < ji->n_gpu_memory)
			sum += ji->gpu_memory[g];
	}
	return sum;
}

static void gpu_view(Rgpu__GpuInfo *gi, Rgpu__GpuInfo **gip, size_t n)
{
	for (size_t g = 0; g < n; g++) {
		double in_bps = 0;
		gi[g] = *gpus->gpus[g];
		gi[g].memory_used = 0;
		for (int i = 0; i < nworkers; i++)
			if (workers[i].info && g < workers[i].info->n_gpu_memory) {
				gi[g].memory_used += workers[i].info->gpu_memory[g];
				if (workers[i].info->gpu_memory[g])
					in_bps += workers[i].info->in_bytes_per_s;
			}
		srv_telemetry_fill(&gi[g], in_bps, gi[g].name && strstr(gi[g].name, "simgpu"));
		gi[g].memory_reserved = srv_resv_unmapped((unsigned)g, label_mapped);
		gip[g] = &gi[g];
	}
}

/*
 * GET /metrics: this server, its GPUs and its jobs in Prometheus's text exposition format
 * (metric names in base units: bytes, watts, hertz, seconds; ratios 0-1).
 */
static char *metrics_page(size_t *len)
{
	Rgpu__GpuInfo gi[16], *gip[16];
	size_t n = gpus ? MIN(gpus->n_gpus, (size_t)16) : 0;
	char *buf = NULL, uuid[40];
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	gpu_view(gi, gip, n);
#define GAUGE(name, help) fprintf(f, "# HELP " name " " help "\n# TYPE " name " gauge\n")
	GAUGE("rgpu_up", "1: this rgpud answers");
	fprintf(f, "rgpu_up 1\n");
	GAUGE("rgpu_server_drained", "1: the server takes no new sessions (rgpuctl drain)");
	fprintf(f, "rgpu_server_drained %d\n", srv_server_drained);
	GAUGE("rgpu_jobs", "jobs this server serves");
	fprintf(f, "rgpu_jobs %d\n", njobs());
	GAUGE("rgpu_uptime_seconds", "seconds since rgpud started");
	fprintf(f, "rgpu_uptime_seconds %.3f\n", (rgpu_now_ns() - started_ns) / 1e9);
	static const struct {
		const char *name, *help;
	} gm[] = {
	    {"rgpu_gpu_power_watts", "the GPU board's power draw"},
	    {"rgpu_gpu_power_limit_watts", "its enforced power limit"},
	    {"rgpu_gpu_utilization_ratio", "share of the last sample period a kernel ran"},
	    {"rgpu_gpu_memory_utilization_ratio", "share of it device memory was read or written"},
	    {"rgpu_gpu_memory_total_bytes", "the GPU's memory"},
	    {"rgpu_gpu_memory_used_bytes", "its memory used by every process"},
	    {"rgpu_gpu_jobs_memory_bytes", "its memory mapped for rgpu's jobs"},
	    {"rgpu_gpu_sm_clock_hertz", "the SM clock"},
	    {"rgpu_gpu_memory_clock_hertz", "the memory clock"},
	    {"rgpu_gpu_temperature_celsius", "the GPU's temperature"},
	};
	for (size_t k = 0; k < sizeof(gm) / sizeof(gm[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", gm[k].name, gm[k].help, gm[k].name);
		for (size_t g = 0; g < n; g++) {
			const Rgpu__GpuInfo *x = &gi[g];
			double v[] = {x->power_w,
				      x->power_limit_w,
				      x->utilization / 100.0,
				      x->memory_utilization / 100.0,
				      (double)x->memory_total,
				      (double)x->device_memory_used,
				      (double)x->memory_used,
				      x->sm_clock_mhz * 1e6,
				      x->memory_clock_mhz * 1e6,
				      (double)x->temperature_c};
			rgpu_hex(x->uuid.data, MIN(x->uuid.len, (size_t)16), uuid);
			fprintf(f, "%s{gpu=\"%u\",uuid=\"%s\",source=\"%s\"} %.17g\n", gm[k].name,
				x->index, uuid, x->telemetry && *x->telemetry ? x->telemetry : "none",
				v[k]);
		}
	}
	/* per job: a family at a time (Prometheus wants a family's samples together) */
	static const struct {
		const char *name, *type, *help;
	} jm[] = {
	    {"rgpu_job_device_memory_bytes", "gauge", "device memory mapped for the job"},
	    {"rgpu_job_receive_bytes_per_second", "gauge",
	     "what the job's client sends (its activity)"},
	    {"rgpu_job_received_bytes_total", "counter",
	     "frame bytes received from the job's client"},
	};
	for (size_t k = 0; k < sizeof(jm) / sizeof(jm[0]); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", jm[k].name, jm[k].help, jm[k].name,
			jm[k].type);
		for (int i = 0; i < nworkers; i++) {
			const Rgpu__JobInfo *ji = workers[i].info;
			char job[33];
			if (!ji || ji->job_id.len != 16)
				continue;
			rgpu_hex(ji->job_id.data, 16, job);
			double v[] = {(double)ji->device_memory, ji->in_bytes_per_s,
				      (double)ji->bytes_in};
			fprintf(f, "%s{job=\"%s\",state=\"%s\"} %.17g\n", jm[k].name, job,
				ji->state, v[k]);
		}
	}
#undef GAUGE
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

int admin_status(const struct srv_config *cfg, struct rgpu_conn *c,
		 const struct rgpu_frame_hdr *req)
{
	Rgpu__StatusReply rep = RGPU__STATUS_REPLY__INIT;
	Rgpu__GpuInfo gi[16], *gip[16];
	char host[256] = "";
	size_t n = gpus ? MIN(gpus->n_gpus, (size_t)16) : 0;

	gethostname(host, sizeof(host) - 1);
	rep.server_host = host;
	rep.version = RGPU_VERSION;
	rep.listen = listen_addr;
	rep.driver = (char *)(cfg->driver ? cfg->driver : "libcuda.so.1");
	rep.driver_version = gpus ? gpus->driver_version : 0;
	rep.error = (char *)(gpus ? (gpus->error ? gpus->error : "")
				  : "the GPU probe has not reported yet");
	gpu_view(gi, gip, n);
	rep.n_gpus = n;
	rep.gpus = gip;
	rep.jobs = (uint32_t)njobs();
	rep.uptime_s = (rgpu_now_ns() - started_ns) / 1000000000ull;
	rep.resume_grace_s = (uint32_t)cfg->resume_grace_s;
	rep.drained = srv_server_drained;
	Rgpu__Reservation rv[SRV_MAX_RESV], *rvp[SRV_MAX_RESV];
	rep.n_reservations = srv_resv_view(rv, rvp, SRV_MAX_RESV);
	rep.reservations = rvp;
	set_proof(&rep.server_proof);
	admin_reply(c, req, &rep.base);
	return 0;
}

int admin_jobs(const struct srv_config *cfg, struct rgpu_conn *c,
	       const struct rgpu_frame_hdr *req)
{
	Rgpu__JobsReply rep = RGPU__JOBS_REPLY__INIT;
	Rgpu__JobInfo **jobs = calloc((size_t)nworkers + 1, sizeof(*jobs));
	size_t n = 0;

	if (!jobs) {
		rep.result = RGPU_ENOMEM;
		rep.error = "out of memory";
	} else {
		for (int i = 0; i < nworkers; i++)
			if (workers[i].info)
				jobs[n++] = workers[i].info;
	}
	rep.n_jobs = n;
	rep.jobs = jobs;
	set_proof(&rep.server_proof);
	(void)cfg;
	admin_reply(c, req, &rep.base);
	free(jobs);
	return 0;
}

/*
 * With --admin-key, the request's sender must prove it holds the operator key before it is
 * answered: the request carries its nonce, the server sends its own (AUTH_CHALLENGE), the
 * client answers (AUTH). Returns 0 with admin_proof set, or a refusal for msg (logged here).
 */
static int admin_auth(const struct srv_config *cfg, struct rgpu_conn *c,
		      const struct rgpu_frame_hdr *req, const uint8_t *body, char *msg, size_t len)
{
	Rgpu__AdminRequest *ar = RGPU_PB_UNPACK(rgpu__admin_request, req->body_len, body);
	Rgpu__AuthChallenge ch = RGPU__AUTH_CHALLENGE__INIT;
	Rgpu__AuthResponse *resp = NULL;
	struct rgpu_frame_hdr h = {.type = RGPU_ADMIN_MSG_AUTH_CHALLENGE};
	uint8_t sn[RGPU_AUTH_NONCE_LEN], cn[RGPU_AUTH_NONCE_LEN], want[RGPU_AUTH_MAC_LEN];
	uint8_t binding[RGPU_AUTH_BINDING_LEN];
	const uint8_t *bind = NULL;
	uint8_t *abody = NULL;
	int ret = RGPU_EAUTH;

	if (!ar || ar->client_nonce.len != RGPU_AUTH_NONCE_LEN) {
		snprintf(msg, len, "this server requires the operator key (rgpuctl --admin-key FILE, "
				   "or RGPU_ADMIN_KEY_FILE)");
		goto out;
	}
	memcpy(cn, ar->client_nonce.data, sizeof(cn));
	if (getrandom(sn, sizeof(sn), 0) != (ssize_t)sizeof(sn)) {
		snprintf(msg, len, "the server has no randomness for a challenge");
		goto out;
	}
	ch.server_nonce.data = sn;
	ch.server_nonce.len = sizeof(sn);
	ret = rgpu_frame_send_hdr(c, &h, &ch.base, NULL);
	if (!ret)
		ret = rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &abody);
	if (ret) {
		snprintf(msg, len, "no answer to the challenge (%s)", rgpu_strerror(ret));
		goto out;
	}
	ret = RGPU_EAUTH;
	if (h.type != RGPU_ADMIN_MSG_AUTH ||
	    !(resp = RGPU_PB_UNPACK(rgpu__auth_response, h.body_len, abody)) ||
	    resp->mac.len != RGPU_AUTH_MAC_LEN) {
		snprintf(msg, len, "expected an answer to the challenge, got %s",
			 rgpu_admin_msg_name(h.type));
		goto out;
	}
	if (rgpu_conn_is_tls(c)) {
		if (rgpu_conn_tls_binding(c, binding)) {
			snprintf(msg, len, "the server cannot bind authentication to TLS");
			goto out;
		}
		bind = binding;
	}
	rgpu_auth_mac_bound(cfg->admin_key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, RGPU_AUTH_ADMIN,
			    sn, cn, bind, want);
	if (!rgpu_auth_mac_eq(want, resp->mac.data)) {
		snprintf(msg, len, "authentication failed: not the operator key");
		goto out;
	}
	rgpu_auth_mac_bound(cfg->admin_key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION, RGPU_AUTH_ADMIN,
			    sn, cn, bind, admin_proof);
	admin_has_proof = 1;
	ret = 0;
out:
	if (ret)
		pr_warn("admin client %s refused: %s", rgpu_conn_peer(c), msg);
	if (resp)
		rgpu__auth_response__free_unpacked(resp, NULL);
	if (ar)
		rgpu__admin_request__free_unpacked(ar, NULL);
	free(abody);
	return ret;
}

/* what admin_preauth hands the supervisor before the request frame itself */
struct admin_handoff {
	uint32_t magic;
	int has_proof;
	int has_fd; /* the client's socket itself comes with it (SCM_RIGHTS): no relay */
	uint8_t proof[RGPU_AUTH_MAC_LEN];
	char peer[96];
};
#define ADMIN_HANDOFF_MAGIC 0x48414752u /* "RGAH" */

static void child_close(int lfd, int afd);

/* Answer an admin request with an error and log it (rgpu_admin_error() only answers). */
static void admin_error(struct rgpu_conn *c, int code, const char *msg);
/*
 * In a child of its own, forked at accept: everything before an admin request may be answered
 * (TLS, the request, with --admin-key the challenge and its answer), however slowly its client
 * sends, within ADMIN_TIMEOUT_MS of accept. A refusal is answered here. An accepted request goes
 * to the supervisor over fd (an admin_handoff, then the frame as it came). Over plain TCP the
 * client's socket goes with it and this process ends (a push's gigabytes then take no detour);
 * under TLS, whose state cannot travel, or when the client sent more behind its request, this
 * process relays between fd and the client until either ends. The supervisor's one thread thus never
 * waits for a client: it used to spend up to ADMIN_TIMEOUT_MS on each connection, during which
 * it accepted no client and answered no worker. Returns the exit status.
 */
static int admin_preauth(const struct srv_config *cfg, struct rgpu_conn *c, int fd)
{
	struct admin_handoff ho = {.magic = ADMIN_HANDOFF_MAGIC};
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL, hdr[RGPU_FRAME_HDR_LEN];
	char msg[160];
	int ret;

	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	rgpu_conn_set_deadline(c, rgpu_deadline_after(ADMIN_TIMEOUT_MS));
	if (srv_tls_start(cfg, c, "admin client", RGPU_ADMIN_MSG_ERROR)) {
		rgpu_conn_close(c);
		return 0;
	}
	ret = rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body);
	if (ret || h.type >= ARRAY_SIZE(srv_admin_handlers) || !srv_admin_handlers[h.type]) {
		snprintf(msg, sizeof(msg), "the admin address takes admin requests only (%s)",
			 ret ? rgpu_strerror(ret) : rgpu_admin_msg_name(h.type));
		admin_error(c, ret ? ret : RGPU_EPROTO, msg);
		goto out;
	}
	if (cfg->admin_key && admin_auth(cfg, c, &h, body, msg, sizeof(msg))) {
		rgpu_admin_error(c, RGPU_EAUTH, msg);
		goto out;
	}
	ho.has_proof = admin_has_proof;
	memcpy(ho.proof, admin_proof, sizeof(ho.proof));
	snprintf(ho.peer, sizeof(ho.peer), "%s", rgpu_conn_peer(c));
	rgpu_frame_hdr_encode(&h, hdr);
	struct iovec iov[3] = {{&ho, sizeof(ho)}, {hdr, sizeof(hdr)}, {body, h.body_len}};
	/* its socket, when it is plain TCP with no byte read past the request */
	int cfd = rgpu_conn_is_tls(c) ? -1 : rgpu_conn_release_fd(c);
	if (cfd >= 0) {
		c = NULL;
		ho.has_fd = 1;
	}
	/* a local socket's buffer takes the whole of it: requests are small (admin_msgs) */
	if (srv_sendmsg_fd(fd, iov, 3, cfd) != (ssize_t)(sizeof(ho) + sizeof(hdr) + h.body_len)) {
		pr_warn("admin client %s: cannot hand its request over: %s", ho.peer,
			strerror(errno));
		if (!c && !(c = rgpu_tcp_wrap(cfd)))
			close(cfd);
		if (c)
			rgpu_admin_error(c, RGPU_EIO, "the server could not take the request");
		goto out;
	}
	free(body);
	body = NULL;
	if (ho.has_fd) {
		close(cfd); /* the supervisor's now */
		return 0;
	}
	rgpu_conn_set_deadline(c, 0);
	rgpu_conn_relay(c, fd);
out:
	free(body);
	rgpu_conn_close(c);
	return 0;
}

/* A connection on the admin address: a child reads its request (admin_preauth). */
static void on_admin(const struct srv_config *cfg, int afd)
{
	struct rgpu_conn *c;
	int sp[2];
	pid_t pid;

	if (rgpu_tcp_accept(afd, &c))
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp)) {
		pr_warn("admin client %s dropped: no socket pair: %s", rgpu_conn_peer(c),
			strerror(errno));
		rgpu_conn_close(c);
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(sp[0]);
		child_close(sup_lfd, sup_afd);
		rgpu_log_set_tag("rgpud-admin");
		_exit(admin_preauth(cfg, c, sp[1]));
	}
	close(sp[1]);
	rgpu_conn_abandon(c); /* the child's now */
	if (pid < 0) {
		pr_warn("admin client dropped: cannot fork: %s", strerror(errno));
		close(sp[0]);
		return;
	}
	admin_pending[nadmin_pending++] = sp[0];
}

/*
 * The admin_handoff from a pre-authentication child, and the client's socket if it came with
 * it (*cfd, else -1). The child wrote all of it at once: this waits (at most ADMIN_TIMEOUT_MS)
 * only for a child that died mid-way. 0, or -1 (the child refused the client, or broke).
 */
static int recv_handoff(int fd, struct admin_handoff *ho, int *cfd)
{
	uint64_t deadline = rgpu_deadline_after(ADMIN_TIMEOUT_MS);
	size_t got = 0;

	*cfd = -1;
	while (got < sizeof(*ho)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, rgpu_ms_until(deadline)) <= 0)
			break;
		ssize_t r = srv_recvmsg_fd(fd, (char *)ho + got, sizeof(*ho) - got, MSG_DONTWAIT, cfd);
		if (r <= 0 && !(r < 0 && errno == EAGAIN))
			break;
		if (r > 0)
			got += (size_t)r;
	}
	if (got == sizeof(*ho) && ho->magic == ADMIN_HANDOFF_MAGIC && !ho->has_fd == (*cfd < 0))
		return 0;
	if (*cfd >= 0)
		close(*cfd);
	*cfd = -1;
	return -1;
}

/*
 * Pending admin connection i has news: its request (answered here, from the workers' latest
 * reports, at most INFO_EVERY_MS old, or handed to a worker or helper), or its end (the child
 * refused it, or the client went away).
 */
static void on_admin_ready(const struct srv_config *cfg, int i)
{
	struct admin_handoff ho;
	struct rgpu_frame_hdr h;
	struct rgpu_conn *c = NULL;
	uint8_t *body = NULL;
	int fd = admin_pending[i], cfd;

	admin_pending[i] = admin_pending[--nadmin_pending];
	if (recv_handoff(fd, &ho, &cfd) || !(c = rgpu_tcp_wrap(fd))) {
		close(fd);
		if (cfd >= 0)
			close(cfd);
		return;
	}
	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	rgpu_conn_set_deadline(c, rgpu_deadline_after(ADMIN_TIMEOUT_MS));
	if (rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body)) {
		rgpu_conn_close(c);
		if (cfd >= 0)
			close(cfd);
		return;
	}
	if (cfd >= 0) {
		/* the client's own socket from here on (what follows the request comes there) */
		rgpu_conn_close(c);
		c = rgpu_tcp_wrap(cfd);
		if (!c) {
			close(cfd);
			free(body);
			return;
		}
		rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
		rgpu_conn_set_deadline(c, rgpu_deadline_after(ADMIN_TIMEOUT_MS));
	} else {
		ho.peer[sizeof(ho.peer) - 1] = 0;
		rgpu_conn_set_peer(c, ho.peer);
	}
	admin_has_proof = ho.has_proof;
	memcpy(admin_proof, ho.proof, sizeof(admin_proof));
	admin_conn_taken = 0;
	admin_body = body;
	admin_body_len = h.body_len;
	if (h.type < ARRAY_SIZE(srv_admin_handlers) && srv_admin_handlers[h.type])
		srv_admin_handlers[h.type](cfg, c, &h);
	admin_has_proof = 0;
	free(body);
	admin_body = NULL;
	if (!admin_conn_taken)
		rgpu_conn_close(c);
}

static int listen_on(const struct srv_config *cfg, const char *what, const char *addr,
		     const char *port_file, int authed, int *lfd, int *bound)
{
	char host[256];
	int port, ret, loopback;

	if (rgpu_parse_hostport(addr, "127.0.0.1", host, sizeof(host), &port)) {
		pr_err("bad %s address '%s' (want HOST:PORT)", what, addr);
		return 2;
	}
	/*
	 * Beyond loopback only with authentication (the client port: --keys; the admin port:
	 * --admin-key), or when the operator says so (--insecure).
	 */
	loopback = !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "localhost");
	if (!loopback && !authed) {
		if (!cfg->insecure) {
			pr_err("refusing to serve the %s port on %s without authentication: any host "
			       "that reaches it could use it. %s, listen on loopback, or accept the "
			       "risk with --insecure",
			       strcmp(what, "listening") ? "admin" : "client", host,
			       strcmp(what, "listening") ? "Give --admin-key FILE (the operator's key)"
							 : "Give --keys DIR (tenant keys)");
			return 2;
		}
		pr_warn("%s on %s without authentication (--insecure): any host that reaches this "
			"port can use it", what, host);
	}
	/* and beyond loopback, encrypted (TLS) unless the operator says otherwise */
	if (!loopback && !cfg->tls) {
		if (!cfg->insecure) {
			pr_err("refusing to serve the %s port on %s in the clear: anyone on the path "
			       "could read and change its traffic. Give --tls-cert FILE --tls-key "
			       "FILE, listen on loopback, or accept the risk with --insecure",
			       strcmp(what, "listening") ? "admin" : "client", host);
			return 2;
		}
		pr_warn("%s on %s without TLS (--insecure): its traffic crosses the network in the "
			"clear", what, host);
	}
	ret = rgpu_tcp_listen(host, port, lfd, bound);
	if (ret) {
		pr_err("cannot listen on %s:%d: %s", host, port, strerror(errno));
		return 1;
	}
	if (port_file) {
		FILE *pf = fopen(port_file, "w");
		if (pf) {
			fprintf(pf, "%d\n", *bound);
			fclose(pf);
		}
	}
	if (!strcmp(what, "listening"))
		snprintf(listen_addr, sizeof(listen_addr), "%s:%d", host, *bound);
	pr_info("%s on %s:%d%s", what, host, *bound, cfg->tls ? " (TLS)" : "");
	return 0;
}

/*
 * The Unix-domain socket clients on this host reach the server by (rgpud --socket; by default
 * STATE_DIR/rgpud-PORT.sock): the same handshake as on the TCP port, then the link moves to
 * shared memory. Any problem costs only that: the server serves TCP alone, and says why.
 */
static void listen_unix(const struct srv_config *cfg, int port)
{
	char path[4200];
	int ret;

	if (cfg->socket && (!*cfg->socket || !strcmp(cfg->socket, "none")))
		return;
	if (cfg->socket)
		snprintf(path, sizeof(path), "%s", cfg->socket);
	else
		snprintf(path, sizeof(path), "%s/rgpud-%d.sock", cfg->state_dir, port);
	if (path[0] != '/') {
		/* (the relative path made above: --socket's, or the data folder's) */
		char cwd[2048], rel[sizeof(path)];
		snprintf(rel, sizeof(rel), "%s", path);
		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(path, sizeof(path), "%s/%s", cwd, rel) >= (int)sizeof(path))
			path[0] = 0;
	}
	if (strlen(path) >= sizeof(srv_shm_socket)) {
		pr_warn("no shared memory for local clients: the socket path %s is longer than %zu "
			"bytes (rgpud --socket PATH)",
			path, sizeof(srv_shm_socket) - 1);
		return;
	}
	if (!cfg->socket)
		mkdir(cfg->state_dir, 0700);
	ret = rgpu_unix_listen(path, &sup_ufd);
	if (ret) {
		pr_warn("no shared memory for local clients: cannot listen on %s: %s%s", path,
			strerror(errno),
			ret == RGPU_EEXIST ? " (another rgpud answers there; name another with "
					     "--socket PATH)"
					   : "");
		sup_ufd = -1;
		return;
	}
	snprintf(srv_shm_socket, sizeof(srv_shm_socket), "%s", path);
	pr_info("local clients on %s (shared memory)", path);
}

/* In a new child: drop every descriptor that belongs to the supervisor or other children. */
static void child_close(int lfd, int afd)
{
	close(lfd);
	if (afd >= 0)
		close(afd);
	if (sup_ufd >= 0)
		close(sup_ufd);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	for (int i = 0; i < nworkers; i++)
		if (workers[i].ctl >= 0)
			close(workers[i].ctl);
	for (int i = 0; i < nadmin_pending; i++)
		close(admin_pending[i]);
	nadmin_pending = 0;
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
}

static void drained_path(const struct srv_config *cfg, char *out, size_t len)
{
	snprintf(out, len, "%s/drained", cfg->state_dir ? cfg->state_dir : ".");
}

/*
 * Earlier layouts kept checkpoints in DATA/checkpoints and the module cache in an environment
 * of its own, DATA/modules: the checkpoints move to DATA/store, whose tables now hold the cache
 * too; the old cache is only named (it refills as jobs load their modules).
 */
static void store_layout(const struct srv_config *cfg)
{
	char old[4200], now[4200];
	struct stat st;

	if (!cfg->state_dir)
		return;
	snprintf(old, sizeof(old), "%s/checkpoints", cfg->state_dir);
	snprintf(now, sizeof(now), "%s/store", cfg->state_dir);
	if (!stat(old, &st) && stat(now, &st) && errno == ENOENT) {
		if (rename(old, now))
			pr_warn("cannot move the checkpoint store %s to %s: %s", old, now,
				strerror(errno));
		else
			pr_info("the checkpoint store %s is now %s", old, now);
	}
	snprintf(old, sizeof(old), "%s/modules", cfg->state_dir);
	if (!stat(old, &st))
		pr_info("%s is no longer read (the module cache is a table of %s now): it may be "
			"removed",
			old, now);
}

/*
 * At start, a helper collects the chunks no checkpoint names: what checkpoints left behind
 * when this server died while writing them (the store waits for writers: gc.lock).
 */
/*
 * A live migration's round checkpoints (their device memory went GPU to GPU, not into the
 * store) are removed by the migration that made them; one left by a server that died in the
 * middle can never be restored: removed here, and said.
 */
static void live_leftovers(struct rgpu_store *s)
{
	uint64_t *ids = NULL;
	size_t n = 0;

	if (rgpu_store_list(s, &ids, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		Rgpu__CkptMeta *m = NULL;
		uint8_t *hashes = NULL;
		size_t nh = 0;
		char why[300];
		if (rgpu_ckpt_load(s, ids[i], &m, &hashes, &nh, why, sizeof(why)))
			continue;
		if (rgpu_ckpt_is_live(m) && rgpu_store_remove(s, ids[i]) == 0)
			pr_info("removed checkpoint %llu, a live migration's round left behind (its "
				"device memory was never in this store)",
				(unsigned long long)ids[i]);
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		free(hashes);
	}
	free(ids);
}

static void start_gc(const struct srv_config *cfg, int lfd, int afd)
{
	char dir[4200];
	struct stat st;
	pid_t pid;

	if (!cfg->state_dir)
		return;
	snprintf(dir, sizeof(dir), "%s/store", cfg->state_dir);
	if (stat(dir, &st))
		return; /* no store yet */
	pid = fork();
	if (pid == 0) {
		struct rgpu_store *s = NULL;
		uint64_t freed = 0, bytes = 0;
		char why[600];
		child_close(lfd, afd);
		rgpu_log_set_tag("rgpud-gc");
		if (srv_store_open(cfg, &s, why, sizeof(why))) {
			pr_warn("%s", why);
		} else {
			live_leftovers(s);
			if (rgpu_store_gc_bytes(s, &freed, &bytes) == 0 && freed)
				pr_info("collected %llu chunks (%llu bytes) no checkpoint names",
					(unsigned long long)freed, (unsigned long long)bytes);
		}
		rgpu_store_close(s);
		_exit(0);
	}
}

static void start_probe(const struct srv_config *cfg, int lfd, int afd)
{
	int sp[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		pr_warn("socketpair: %s; rgpuctl status will show no GPUs", strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(sp[0]);
		child_close(lfd, afd);
		rgpu_log_set_tag("rgpud-probe");
		srv_probe_run(cfg, sp[1]);
	}
	close(sp[1]);
	if (pid < 0 || worker_add(pid, sp[0], 1, 0, -1)) {
		close(sp[0]);
		pr_warn("cannot start the GPU probe; rgpuctl status will show no GPUs");
	}
}

/* ---- checkpoints, restores, migrations (admin requests that outlast the request loop) ------- */

static void admin_error(struct rgpu_conn *c, int code, const char *msg)
{
	pr_warn("admin client %s: %s", rgpu_conn_peer(c), msg);
	rgpu_admin_error(c, code, msg);
}

/* The job whose id starts with the hex prefix (at least 4 digits), or -1 with why filled. */
static int find_job_prefix(const char *prefix, char *why, size_t len)
{
	size_t pl = prefix ? strlen(prefix) : 0;
	int found = -1, n = 0;

	if (pl < 4 || pl > 32 || strspn(prefix, "0123456789abcdefABCDEF") != pl) {
		snprintf(why, len, "'%s' is not a job id (4 to 32 hex digits of one: rgpuctl jobs)",
			 prefix ? prefix : "");
		return -1;
	}
	for (int i = 0; i < nworkers; i++) {
		const Rgpu__JobInfo *ji = workers[i].info;
		char hex[33];
		if (!ji || workers[i].ctl < 0 || ji->job_id.len != 16 || workers[i].probe)
			continue;
		rgpu_hex(ji->job_id.data, 16, hex);
		if (!strncasecmp(hex, prefix, pl)) {
			found = i;
			n++;
		}
	}
	if (n == 1)
		return found;
	snprintf(why, len, n ? "job id %s is ambiguous here: give more of it"
			     : "no job %s on this server (rgpuctl jobs lists them)",
		 prefix);
	return -1;
}

/*
 * CHECKPOINT, MIGRATE: the job's worker answers. It gets the connection's descriptor: the
 * client's socket, or under TLS (whose state cannot travel) the local socket its
 * pre-authentication child relays (admin_preauth).
 */
int admin_to_job(const struct srv_config *cfg, struct rgpu_conn *c,
		 const struct rgpu_frame_hdr *h)
{
	Rgpu__CheckpointRequest *req =
		RGPU_PB_UNPACK(rgpu__checkpoint_request, admin_body_len, admin_body);
	Rgpu__Ctl m = RGPU__CTL__INIT;
	char why[200];
	int j, fd = -1, ret;

	(void)cfg;
	/* a MigrateRequest's job is field 3 too */
	j = req ? find_job_prefix(req->job, why, sizeof(why)) : -1;
	if (req)
		rgpu__checkpoint_request__free_unpacked(req, NULL);
	else
		snprintf(why, sizeof(why), "an undecodable request");
	if (j < 0) {
		admin_error(c, RGPU_ENOTFOUND, why);
		return 0;
	}
	fd = rgpu_conn_release_fd(c);
	if (fd < 0) {
		admin_error(c, RGPU_EPROTO, "bytes after the request");
		return 0;
	}
	admin_conn_taken = 1;
	m.kind = RGPU__CTL_KIND__CTL_ADMIN;
	m.admin_type = h->type;
	m.hello.data = (uint8_t *)admin_body;
	m.hello.len = admin_body_len;
	set_proof(&m.server_proof);
	ret = srv_ctl_send(workers[j].ctl, &m, fd);
	if (ret) {
		struct rgpu_conn *back = rgpu_tcp_wrap(fd);
		fd = -1;
		if (back) {
			rgpu_conn_set_msgs(back, &rgpu_admin_msgs);
			admin_error(back, RGPU_EIO, "the job's worker cannot be reached");
			rgpu_conn_close(back);
		}
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/*
 * A process of its own for a request that takes long (reading a whole checkpoint, pushing one
 * to another server), with a control channel back here. Returns 0 in the child (*ctl: its end),
 * the child's pid in this process (the connection is then the child's), or -1 (answered).
 */
static pid_t fork_helper(struct rgpu_conn *c, const char *tag, int *ctl)
{
	int sp[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		admin_error(c, RGPU_ESYS, "no socket pair for a helper");
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		close(sp[0]);
		child_close(sup_lfd, sup_afd);
		rgpu_log_set_tag(tag);
		*ctl = sp[1];
		return 0;
	}
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		admin_error(c, RGPU_ESYS, "cannot fork a helper");
		return -1;
	}
	if (worker_add(pid, sp[0], 1, 0, -1))
		close(sp[0]);
	rgpu_conn_abandon(c);
	admin_conn_taken = 1;
	return pid;
}

static void op_progress(uint64_t done, uint64_t total, void *arg)
{
	rgpu_admin_progress(arg, "verify", done, total, "chunks");
}

/* CKPT_VERIFY, CKPT_RM: in a helper, which answers. */
int admin_ckpt_op(const struct srv_config *cfg, struct rgpu_conn *c,
		  const struct rgpu_frame_hdr *h)
{
	Rgpu__CkptRef *req = RGPU_PB_UNPACK(rgpu__ckpt_ref, admin_body_len, admin_body);
	Rgpu__CkptOpReply rep = RGPU__CKPT_OP_REPLY__INIT;
	struct rgpu_frame_hdr rh = {.type = h->type, .flags = RGPU_FRAME_REPLY, .ref = h->seq};
	struct rgpu_store *store = NULL;
	char why[600] = "";
	int ctl = -1, ret;

	if (!req) {
		admin_error(c, RGPU_EPROTO, "an undecodable request");
		return 0;
	}
	if (fork_helper(c, "rgpud-ckpt", &ctl) != 0) {
		rgpu__ckpt_ref__free_unpacked(req, NULL);
		return 0;
	}
	ret = srv_store_open(cfg, &store, why, sizeof(why));
	if (!ret && h->type == RGPU_ADMIN_MSG_CKPT_VERIFY) {
		ret = rgpu_ckpt_verify(store, req->id, rgpu_parallel_width(), op_progress, c,
				       &rep.chunks, &rep.bytes, why, sizeof(why));
		if (ret)
			pr_warn("verify: %s", why);
		else
			pr_info("checkpoint %llu verified: %llu chunks, %llu bytes",
				(unsigned long long)req->id, (unsigned long long)rep.chunks,
				(unsigned long long)rep.bytes);
	} else if (!ret) {
		ret = rgpu_store_remove(store, req->id);
		if (ret == RGPU_ENOTFOUND)
			snprintf(why, sizeof(why), "no checkpoint %llu in this server's store",
				 (unsigned long long)req->id);
		else if (ret)
			snprintf(why, sizeof(why), "removing checkpoint %llu: %s",
				 (unsigned long long)req->id, rgpu_strerror(ret));
		/* its chunks that no other checkpoint names go now (gc waits for writers) */
		if (!ret && rgpu_store_gc_bytes(store, &rep.chunks, &rep.bytes))
			pr_warn("removed checkpoint %llu; its chunks wait for the next gc",
				(unsigned long long)req->id);
		if (!ret)
			pr_info("checkpoint %llu removed: %llu chunks freed",
				(unsigned long long)req->id, (unsigned long long)rep.chunks);
	}
	rgpu_store_close(store);
	rep.result = ret;
	rep.error = why;
	set_proof(&rep.server_proof);
	rgpu_frame_send_hdr(c, &rh, &rep.base, NULL);
	rgpu_conn_close(c);
	_exit(0);
}

static void fwd_progress(const Rgpu__Progress *pr, void *arg)
{
	rgpu_admin_progress(arg, pr->phase, pr->done, pr->total, pr->unit);
}

/* RESTORE: in a helper, which pushes the checkpoint to the target and answers. */
int admin_restore(const struct srv_config *cfg, struct rgpu_conn *c,
		  const struct rgpu_frame_hdr *h)
{
	Rgpu__RestoreRequest *req = RGPU_PB_UNPACK(rgpu__restore_request, admin_body_len, admin_body);
	Rgpu__RestoreReply rep = RGPU__RESTORE_REPLY__INIT;
	struct rgpu_frame_hdr rh = {.type = h->type, .flags = RGPU_FRAME_REPLY, .ref = h->seq};
	struct rgpu_store *store = NULL;
	struct rgpu_admin *peer = NULL;
	struct rgpu_push_opts opts = {.restore = 1};
	Rgpu__PushReply *pr = NULL;
	Rgpu__CkptMeta *m = NULL;
	uint8_t *hashes = NULL;
	size_t n = 0;
	char why[600] = "", addr[300] = "", hex[33];
	uint64_t t0 = rgpu_now_ns();
	int ctl = -1, ret;

	if (!req || !req->target || !*req->target) {
		admin_error(c, RGPU_EINVAL, "a restore needs a target server");
		goto free_req;
	}
	if (req->client_address && *req->client_address && !rgpu_addr_complete(req->client_address)) {
		admin_error(c, RGPU_EINVAL, "the client address is not HOST:PORT");
		goto free_req;
	}
	if (fork_helper(c, "rgpud-restore", &ctl) != 0)
		goto free_req;
	ret = srv_store_open(cfg, &store, why, sizeof(why));
	if (!ret)
		ret = rgpu_ckpt_load(store, req->id, &m, &hashes, &n, why, sizeof(why));
	if (!ret) {
		char w2[200];
		rgpu_hex(m->job_id.data, 16, hex);
		/* the workers as they were at the fork: the job must not run here as well */
		if (find_job_prefix(hex, w2, sizeof(w2)) >= 0) {
			ret = RGPU_EBUSY;
			snprintf(why, sizeof(why),
				 "job %.12s is running on this server: a restore would run it twice "
				 "(to move it: rgpuctl migrate %.12s --to SERVER --cold)",
				 hex, hex);
		}
	}
	if (!ret) {
		char err[500];
		ret = srv_peer_open(cfg, req->target, &peer, err, sizeof(err));
		if (ret)
			snprintf(why, sizeof(why), "the target: %s", err);
	}
	if (!ret) {
		char err[500];
		opts.client_address = req->client_address;
		/* a target silent that long (no answer, no progress) has stopped: say so */
		opts.silence_ms = cfg->frame_timeout_s * 1000;
		ret = rgpu_push_send(peer, store, req->id, &opts, fwd_progress, c, &pr,
				     &rep.chunks_sent, &rep.bytes_sent, err, sizeof(err));
		if (ret)
			snprintf(why, sizeof(why), "%s", err);
	}
	rgpu_admin_close(peer);
	if (!ret) {
		char host[256], thost[256];
		int port, tport;
		snprintf(addr, sizeof(addr), "%s",
			 req->client_address && *req->client_address ? req->client_address
								     : pr->client_address);
		/* a target listening on every address is reached at its admin host */
		if (!(req->client_address && *req->client_address) &&
		    !rgpu_parse_hostport(addr, "0.0.0.0", host, sizeof(host), &port) &&
		    !rgpu_parse_hostport(req->target, "127.0.0.1", thost, sizeof(thost), &tport) &&
		    (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")))
			snprintf(addr, sizeof(addr), "%s:%d", thost, port);
		/* a client coming back here to resume the job is sent there */
		Rgpu__Ctl mv = RGPU__CTL__INIT;
		mv.kind = RGPU__CTL_KIND__CTL_MOVED;
		mv.job_id = m->job_id;
		mv.error = addr;
		srv_ctl_send(ctl, &mv, -1);
		rep.job_id = m->job_id;
		rep.restore_ns = pr->restore_ns;
		pr_info("checkpoint %llu restored on %s as job %.12s (client address %s)",
			(unsigned long long)req->id, req->target, hex, addr);
	} else {
		pr_warn("restore of checkpoint %llu on %s failed: %s", (unsigned long long)req->id,
			req->target, why);
	}
	rep.result = ret;
	rep.error = why;
	rep.client_address = addr;
	rep.duration_ns = rgpu_now_ns() - t0;
	set_proof(&rep.server_proof);
	rgpu_frame_send_hdr(c, &rh, &rep.base, NULL);
	rgpu_conn_close(c);
	_exit(0);
free_req:
	if (req)
		rgpu__restore_request__free_unpacked(req, NULL);
	return 0;
}

/* DRAIN: set or clear the mark (a file in the data directory, so that it outlives a restart). */
int admin_drain(const struct srv_config *cfg, struct rgpu_conn *c, const struct rgpu_frame_hdr *h)
{
	Rgpu__DrainRequest *req = RGPU_PB_UNPACK(rgpu__drain_request, admin_body_len, admin_body);
	Rgpu__DrainReply rep = RGPU__DRAIN_REPLY__INIT;
	char path[4200], why[4400] = "";
	int ret = 0;

	if (!req) {
		admin_error(c, RGPU_EPROTO, "an undecodable DRAIN");
		return 0;
	}
	drained_path(cfg, path, sizeof(path));
	if (req->drained && !srv_server_drained) {
		int fd = cfg->state_dir ? open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640) : -1;
		if (cfg->state_dir && fd < 0) {
			ret = RGPU_ESYS;
			snprintf(why, sizeof(why), "cannot mark the server drained: %s: %s", path,
				 strerror(errno));
		}
		if (fd >= 0)
			close(fd);
	} else if (!req->drained && srv_server_drained && cfg->state_dir && unlink(path) &&
		   errno != ENOENT) {
		ret = RGPU_ESYS;
		snprintf(why, sizeof(why), "cannot clear the drained mark %s: %s", path,
			 strerror(errno));
	}
	if (!ret && srv_server_drained != (int)req->drained) {
		srv_server_drained = req->drained;
		pr_info("%s by the operator: %s", req->drained ? "drained" : "undrained",
			req->drained ? "no new sessions or restored jobs land here"
				     : "new sessions are welcome again");
	}
	rep.result = ret;
	rep.error = why;
	rep.drained = srv_server_drained;
	rep.jobs = (uint32_t)njobs();
	set_proof(&rep.server_proof);
	admin_reply(c, h, &rep.base);
	rgpu__drain_request__free_unpacked(req, NULL);
	return 0;
}

/* RESERVE: make or end a reservation (resv.c); the reply lists them all after it. */
int admin_reserve(const struct srv_config *cfg, struct rgpu_conn *c, const struct rgpu_frame_hdr *h)
{
	Rgpu__ReserveRequest *req = RGPU_PB_UNPACK(rgpu__reserve_request, admin_body_len, admin_body);
	Rgpu__ReserveReply rep = RGPU__RESERVE_REPLY__INIT;
	Rgpu__Reservation rv[SRV_MAX_RESV], *rvp[SRV_MAX_RESV];
	char why[600] = "";

	if (!req) {
		admin_error(c, RGPU_EPROTO, "an undecodable RESERVE");
		return 0;
	}
	rep.result = srv_resv_apply(cfg->state_dir, req->name, req->gpu, req->bytes, req->release,
				    gpus ? (unsigned)gpus->n_gpus : 0, srv_server_drained, why,
				    sizeof(why));
	if (rep.result)
		pr_info("RESERVE %s%s refused: %s", req->release ? "release " : "", req->name, why);
	rep.error = why;
	rep.n_reservations = srv_resv_view(rv, rvp, SRV_MAX_RESV);
	rep.reservations = rvp;
	set_proof(&rep.server_proof);
	admin_reply(c, h, &rep.base);
	rgpu__reserve_request__free_unpacked(req, NULL);
	return 0;
}

/*
 * PUSH (from another server): a new worker process takes the checkpoint, restores it if asked,
 * and serves the job (restore.c). It counts as a job, with a slot for its tenant's accounting.
 * CHUNK and PUSH_DONE only follow a PUSH on its connection.
 */
int admin_push(const struct srv_config *cfg, struct rgpu_conn *c, const struct rgpu_frame_hdr *h)
{
	Rgpu__PushRequest *req;
	int sp[2], slot;
	pid_t pid;

	if (h->type != RGPU_ADMIN_MSG_PUSH) {
		admin_error(c, RGPU_EPROTO, "a checkpoint's chunks come only after its PUSH");
		return 0;
	}
	req = RGPU_PB_UNPACK(rgpu__push_request, admin_body_len, admin_body);
	if (!req) {
		admin_error(c, RGPU_EPROTO, "an undecodable PUSH");
		return 0;
	}
	if (req->restore && srv_server_drained) {
		admin_error(c, RGPU_EBUSY, "this server is drained (rgpuctl drain): no job lands "
					   "here until rgpuctl undrain");
		rgpu__push_request__free_unpacked(req, NULL);
		return 0;
	}
	if (req->restore && cfg->max_sessions && njobs() >= cfg->max_sessions) {
		admin_error(c, RGPU_EBUSY, "this server serves its limit of sessions "
					   "(rgpud --max-sessions)");
		rgpu__push_request__free_unpacked(req, NULL);
		return 0;
	}
	slot = srv_acct_slot_take();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		srv_acct_slot_release(slot);
		admin_error(c, RGPU_ESYS, "no socket pair for a worker");
		rgpu__push_request__free_unpacked(req, NULL);
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		char tag[64];
		uint8_t proof[RGPU_AUTH_MAC_LEN];
		int has = admin_has_proof;
		memcpy(proof, admin_proof, sizeof(proof));
		close(sp[0]);
		child_close(sup_lfd, sup_afd);
		snprintf(tag, sizeof(tag), "rgpud[%d]", (int)getpid());
		rgpu_log_set_tag(tag);
		srv_acct_become(slot);
		srv_restore_run(cfg, c, h, req, has ? proof : NULL, sp[1], listen_addr);
	}
	close(sp[1]);
	rgpu__push_request__free_unpacked(req, NULL);
	if (pid < 0) {
		close(sp[0]);
		srv_acct_slot_release(slot);
		admin_error(c, RGPU_ESYS, "cannot fork a worker");
		return 0;
	}
	if (worker_add(pid, sp[0], 0, 0, slot))
		close(sp[0]);
	rgpu_conn_abandon(c);
	admin_conn_taken = 1;
	pr_info("checkpoint pushed by %s: worker %d", "a server", (int)pid);
	return 0;
}

/* CHECKPOINTS: this server's store, read here (a few small reads per checkpoint). */
int admin_ckpt_list(const struct srv_config *cfg, struct rgpu_conn *c,
		    const struct rgpu_frame_hdr *h)
{
	Rgpu__CkptListRequest *req = RGPU_PB_UNPACK(rgpu__ckpt_list_request, admin_body_len, admin_body);
	Rgpu__CkptListReply rep = RGPU__CKPT_LIST_REPLY__INIT;
	struct rgpu_frame_hdr rh = {.type = h->type, .flags = RGPU_FRAME_REPLY, .ref = h->seq};
	struct rgpu_store *store = NULL;
	struct rgpu_store_stats st;
	Rgpu__CkptMeta **metas = NULL;
	Rgpu__CkptInfo *infos = NULL, **ip = NULL;
	uint64_t *ids = NULL;
	size_t nids = 0, k = 0;
	char why[600] = "";
	int ret = srv_store_open(cfg, &store, why, sizeof(why));

	if (!ret)
		ret = rgpu_store_list(store, &ids, &nids);
	if (!ret) {
		metas = calloc(nids + 1, sizeof(*metas));
		infos = calloc(nids + 1, sizeof(*infos));
		ip = calloc(nids + 1, sizeof(*ip));
		if (!metas || !infos || !ip)
			ret = RGPU_ENOMEM;
	}
	for (size_t i = 0; !ret && i < nids; i++) {
		uint8_t *hashes = NULL;
		size_t n = 0;
		char w[400], hex[33];
		if (rgpu_ckpt_load(store, ids[i], &metas[k], &hashes, &n, w, sizeof(w))) {
			pr_warn("checkpoints: %s", w); /* listed by verify and rm, not here */
			continue;
		}
		free(hashes);
		rgpu_hex(metas[k]->job_id.data, 16, hex);
		if (req && req->job && *req->job &&
		    strncasecmp(hex, req->job, strlen(req->job))) {
			rgpu__ckpt_meta__free_unpacked(metas[k], NULL);
			metas[k] = NULL;
			continue;
		}
		rgpu__ckpt_info__init(&infos[k]);
		rgpu_ckpt_info(metas[k], ids[i], n, &infos[k]);
		ip[k] = &infos[k];
		k++;
	}
	if (!ret && !rgpu_store_stats(store, &st)) {
		rep.store_chunks = st.chunks;
		rep.store_bytes = st.stored_bytes;
	}
	rep.result = ret;
	rep.error = ret && !*why ? (char *)rgpu_strerror(ret) : why;
	rep.n_checkpoints = k;
	rep.checkpoints = ip;
	set_proof(&rep.server_proof);
	rgpu_frame_send_hdr(c, &rh, &rep.base, NULL);
	for (size_t i = 0; metas && i < k; i++)
		rgpu__ckpt_meta__free_unpacked(metas[i], NULL);
	free(metas);
	free(infos);
	free(ip);
	free(ids);
	rgpu_store_close(store);
	if (req)
		rgpu__ckpt_list_request__free_unpacked(req, NULL);
	return 0;
}

/*
 * A worker for each connection, even over --max-sessions: only the worker reads the client's
 * hello, and a resume of a running job must still reach it. Over the limit the worker refuses
 * a new session in the handshake, and does not count as a job.
 */
static void start_worker(const struct srv_config *cfg, int from, int lfd, int afd)
{
	struct rgpu_conn *conn;
	int sp[2], admit, slot = -1;
	pid_t pid;

	if (rgpu_tcp_accept(from, &conn))
		return;
	admit = !srv_server_drained && (!cfg->max_sessions || njobs() < cfg->max_sessions);
	/* an admitted worker counts its tenant's memory and sessions in a slot (quota.c) */
	if (admit)
		slot = srv_acct_slot_take();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		pr_err("socketpair: %s; refusing %s", strerror(errno), rgpu_conn_peer(conn));
		rgpu_conn_close(conn);
		return;
	}
	pid = fork();
	if (pid < 0) {
		pr_err("fork: %s; refusing %s", strerror(errno), rgpu_conn_peer(conn));
		rgpu_conn_close(conn);
		close(sp[0]);
		close(sp[1]);
		srv_acct_slot_release(slot);
		return;
	}
	if (pid == 0) {
		char tag[64];
		close(sp[0]);
		child_close(lfd, afd);
		snprintf(tag, sizeof(tag), "rgpud[%d]", (int)getpid());
		rgpu_log_set_tag(tag);
		srv_acct_become(slot);
		srv_worker_run(cfg, conn, sp[1], admit);
	}
	close(sp[1]);
	if (worker_add(pid, sp[0], 0, !admit, slot)) {
		/* its slot stays taken: an unsupervised worker is never reaped by its entry */
		pr_err("out of memory tracking worker %d; it runs unsupervised", (int)pid);
		close(sp[0]);
	}
	if (admit)
		pr_info("client %s: worker %d (%d running)", rgpu_conn_peer(conn), (int)pid,
			njobs());
	else /* the worker logs the refusal, or routes a resume */
		pr_debug("client %s: worker %d, over --max-sessions %d", rgpu_conn_peer(conn),
			 (int)pid, cfg->max_sessions);
	rgpu_conn_close(conn);
}

int srv_supervise(const struct srv_config *cfg)
{
	struct sigaction sa = {0};
	int lfd, afd = -1, mfd = -1, bound = 0, abound = 0, ret;
	struct pollfd *pfd = NULL;
	int cap_pfd = 0;

	started_ns = rgpu_now_ns();
	ret = listen_on(cfg, "listening", cfg->listen, cfg->port_file, cfg->keys_dir != NULL, &lfd,
			&bound);
	if (ret)
		return ret;
	if (cfg->admin) {
		ret = listen_on(cfg, "admin protocol", cfg->admin, cfg->admin_port_file,
				cfg->admin_key != NULL, &afd, &abound);
		/* the default address may be taken by another rgpud on this host: serve anyway */
		if (ret && strcmp(cfg->admin, RGPU_DEFAULT_ADMIN))
			return ret;
		if (ret) {
			pr_warn("no admin protocol: %s is taken (name another with --admin)",
				cfg->admin);
			afd = -1;
		}
	}
	sup_lfd = lfd;
	sup_afd = afd;
	listen_unix(cfg, bound);
	if ((ret = srv_metrics_start(cfg, metrics_page, &mfd)))
		return ret;
	pr_info("driver %s, resume grace %d s, at most %d sessions (0: no limit), idle timeout "
		"%d s (0: none)",
		cfg->driver ? cfg->driver : "libcuda.so.1", cfg->resume_grace_s,
		cfg->max_sessions, cfg->idle_timeout_s);
	/* before any fork: every worker inherits the one table */
	ret = srv_acct_create(cfg->max_sessions ? cfg->max_sessions : SRV_ACCT_SLOTS);
	if (ret)
		return 1;

	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
		pr_err("pipe: %s", strerror(errno));
		return 1;
	}
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	start_probe(cfg, lfd, afd);
	store_layout(cfg);
	{
		char path[4200];
		struct stat st;
		drained_path(cfg, path, sizeof(path));
		srv_server_drained = cfg->state_dir && stat(path, &st) == 0;
		if (srv_server_drained)
			pr_warn("this server is drained (%s): no new sessions or restored jobs until "
				"rgpuctl undrain",
				path);
	}
	srv_resv_load(cfg->state_dir);
	start_gc(cfg, lfd, afd);

	while (!stop_requested) {
		int n = 5 + nworkers + nadmin_pending, k = 5, pend0 = 5 + nworkers;
		if (n > cap_pfd) {
			struct pollfd *np = realloc(pfd, (size_t)(n + 16) * sizeof(*np));
			if (!np) {
				pr_err("out of memory");
				break;
			}
			pfd = np;
			cap_pfd = n + 16;
		}
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
		/* a full admin_pending table leaves new admin connections in the listen queue */
		pfd[2] = (struct pollfd){.fd = nadmin_pending < ADMIN_PENDING_MAX ? afd : -1,
					 .events = POLLIN};
		pfd[3] = (struct pollfd){.fd = mfd, .events = POLLIN}; /* -1 (off): ignored */
		pfd[4] = (struct pollfd){.fd = sup_ufd, .events = POLLIN};
		for (int i = 0; i < nworkers; i++)
			pfd[k++] = (struct pollfd){.fd = workers[i].ctl, .events = POLLIN};
		for (int i = 0; i < nadmin_pending; i++)
			pfd[k++] = (struct pollfd){.fd = admin_pending[i], .events = POLLIN};
		if (poll(pfd, (nfds_t)n, mfd >= 0 ? srv_metrics_timeout_ms() : -1) < 0 &&
		    errno != EINTR)
			break;
		/* control messages first: a reap may reorder the table */
		for (int i = nworkers - 1; i >= 0; i--)
			if (5 + i < n && pfd[5 + i].fd == workers[i].ctl && workers[i].ctl >= 0 &&
			    pfd[5 + i].revents)
				on_ctl(cfg, i);
		/* admin requests read whole by their children (each entry found by its fd: the
		 * table is reordered as entries leave) */
		for (int j = n - 1; j >= pend0; j--)
			for (int i = 0; i < nadmin_pending; i++)
				if (pfd[j].revents && admin_pending[i] == pfd[j].fd) {
					on_admin_ready(cfg, i);
					break;
				}
		if (mfd >= 0)
			srv_metrics_run(); /* what is ready, and MHD's own timeouts */
		if (pfd[1].revents) {
			char buf[64];
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
			reap();
		}
		if (stop_requested)
			break;
		if (afd >= 0 && (pfd[2].revents & POLLIN))
			on_admin(cfg, afd);
		if (pfd[0].revents & POLLIN)
			start_worker(cfg, lfd, lfd, afd);
		if (sup_ufd >= 0 && (pfd[4].revents & POLLIN))
			start_worker(cfg, sup_ufd, lfd, afd);
	}
	free(pfd);

	srv_metrics_stop();
	pr_info("stopping: %d job(s) to finish", njobs());
	close(lfd);
	if (afd >= 0)
		close(afd);
	if (sup_ufd >= 0) {
		close(sup_ufd);
		unlink(srv_shm_socket);
	}
	if (nworkers > 0) {
		for (int i = 0; i < nworkers; i++)
			kill(workers[i].pid, SIGTERM);
		for (int i = 0; i < 50 && nworkers > 0; i++) {
			struct timespec ts = {0, 100 * 1000 * 1000};
			reap();
			if (nworkers > 0)
				nanosleep(&ts, NULL);
		}
		if (nworkers > 0) {
			for (int i = 0; i < nworkers; i++)
				kill(workers[i].pid, SIGKILL);
			reap();
		}
	}
	srv_acct_destroy();
	return 0;
}
