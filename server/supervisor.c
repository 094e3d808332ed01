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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "srv_admin_handlers.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
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

struct worker {
	pid_t pid;
	int ctl;               /* our end of its control channel; -1 once closed */
	int probe;             /* the GPU probe, not a job */
	int refusing;          /* over --max-sessions: refuses a new session, routes a resume */
	int slot;              /* its slot in the tenant accounting table (quota.c); -1: none */
	Rgpu__JobInfo *info;   /* its latest report (NULL before the first) */
};

static struct worker *workers;
static int nworkers, cap_workers;
static Rgpu__Ctl *gpus;    /* the probe's report */
static uint64_t started_ns;
static char listen_addr[300];

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
static void on_ctl(int i)
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
		if (m->info) {
			if (workers[i].info)
				rgpu__job_info__free_unpacked(workers[i].info, NULL);
			workers[i].info = m->info;
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
		if (j >= 0 && j != i && fd >= 0) {
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

static void admin_reply(struct rgpu_conn *c, const struct rgpu_frame_hdr *req,
			const ProtobufCMessage *rep)
{
	struct rgpu_frame_hdr h = {.type = req->type, .flags = RGPU_FRAME_REPLY, .ref = req->seq};
	rgpu_frame_send_hdr(c, &h, rep, NULL);
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
	for (size_t g = 0; g < n; g++) {
		gi[g] = *gpus->gpus[g];
		gi[g].memory_used = 0;
		for (int i = 0; i < nworkers; i++)
			if (workers[i].info && g < workers[i].info->n_gpu_memory)
				gi[g].memory_used += workers[i].info->gpu_memory[g];
		gip[g] = &gi[g];
	}
	rep.n_gpus = n;
	rep.gpus = gip;
	rep.jobs = (uint32_t)njobs();
	rep.uptime_s = (rgpu_now_ns() - started_ns) / 1000000000ull;
	rep.resume_grace_s = (uint32_t)cfg->resume_grace_s;
	if (admin_has_proof) {
		rep.server_proof.data = admin_proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
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
	if (admin_has_proof) {
		rep.server_proof.data = admin_proof;
		rep.server_proof.len = RGPU_AUTH_MAC_LEN;
	}
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

/*
 * One admin request per connection, answered at once from the workers' latest reports (at
 * most INFO_EVERY_MS old). The whole request (and, with --admin-key, the challenge's answer)
 * must arrive within ADMIN_TIMEOUT_MS of accept.
 */
static void on_admin(const struct srv_config *cfg, int afd)
{
	struct rgpu_conn *c;
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	int ret;

	if (rgpu_tcp_accept(afd, &c))
		return;
	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	/* the whole request, however its bytes are spread: this loop serves everyone */
	rgpu_conn_set_deadline(c, rgpu_deadline_after(ADMIN_TIMEOUT_MS));
	if (srv_tls_start(cfg, c, "admin client", RGPU_ADMIN_MSG_ERROR)) {
		rgpu_conn_close(c);
		return;
	}
	ret = rgpu_frame_recv(c, RGPU_PEER_SERVER, &h, &body);
	admin_has_proof = 0;
	if (ret == 0 && h.type < ARRAY_SIZE(srv_admin_handlers) && srv_admin_handlers[h.type]) {
		char msg[160];
		if (cfg->admin_key && admin_auth(cfg, c, &h, body, msg, sizeof(msg))) {
			Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
			struct rgpu_frame_hdr eh = {.type = RGPU_ADMIN_MSG_ERROR};
			pe.code = RGPU_EAUTH;
			pe.message = msg;
			rgpu_frame_send_hdr(c, &eh, &pe.base, NULL);
		} else {
			srv_admin_handlers[h.type](cfg, c, &h);
		}
		admin_has_proof = 0;
	} else {
		Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
		struct rgpu_frame_hdr eh = {.type = RGPU_ADMIN_MSG_ERROR};
		char msg[128];
		snprintf(msg, sizeof(msg), "the admin address takes admin requests only (%s)",
			 ret ? rgpu_strerror(ret) : rgpu_admin_msg_name(h.type));
		pr_warn("admin client %s: %s", rgpu_conn_peer(c), msg);
		pe.code = ret ? ret : RGPU_EPROTO;
		pe.message = msg;
		rgpu_frame_send_hdr(c, &eh, &pe.base, NULL);
	}
	free(body);
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

/* In a new child: drop every descriptor that belongs to the supervisor or other children. */
static void child_close(int lfd, int afd)
{
	close(lfd);
	if (afd >= 0)
		close(afd);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	for (int i = 0; i < nworkers; i++)
		if (workers[i].ctl >= 0)
			close(workers[i].ctl);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
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

/*
 * A worker for each connection, even over --max-sessions: only the worker reads the client's
 * hello, and a resume of a running job must still reach it. Over the limit the worker refuses
 * a new session in the handshake, and does not count as a job.
 */
static void start_worker(const struct srv_config *cfg, int lfd, int afd)
{
	struct rgpu_conn *conn;
	int sp[2], admit, slot = -1;
	pid_t pid;

	if (rgpu_tcp_accept(lfd, &conn))
		return;
	admit = !cfg->max_sessions || njobs() < cfg->max_sessions;
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
	int lfd, afd = -1, bound = 0, abound = 0, ret;
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

	while (!stop_requested) {
		int n = 3 + nworkers, k = 3;
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
		pfd[2] = (struct pollfd){.fd = afd, .events = POLLIN};
		for (int i = 0; i < nworkers; i++)
			pfd[k++] = (struct pollfd){.fd = workers[i].ctl, .events = POLLIN};
		if (poll(pfd, (nfds_t)n, -1) < 0 && errno != EINTR)
			break;
		/* control messages first: a reap may reorder the table */
		for (int i = nworkers - 1; i >= 0; i--)
			if (3 + i < n && pfd[3 + i].fd == workers[i].ctl && workers[i].ctl >= 0 &&
			    pfd[3 + i].revents)
				on_ctl(i);
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
			start_worker(cfg, lfd, afd);
	}
	free(pfd);

	pr_info("stopping: %d job(s) to finish", njobs());
	close(lfd);
	if (afd >= 0)
		close(afd);
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
