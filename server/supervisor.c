/*
 * The supervisor: listens, and forks one worker process per accepted connection. It never
 * loads the CUDA driver and never reads a client's frames, so nothing a client sends — and no
 * driver fault — can take it down. It reaps workers, and on SIGTERM or SIGINT stops listening,
 * asks its workers to finish, and exits.
 */
#define LOG_PREFIX "supervisor: "
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rgpu/err.h"
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

static pid_t *workers;
static int nworkers, cap_workers;

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int i = 0; i < nworkers; i++)
			if (workers[i] == pid) {
				workers[i] = workers[--nworkers];
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

int srv_supervise(const struct srv_config *cfg)
{
	struct sigaction sa = {0};
	char host[256];
	int port, lfd, bound = 0, ret;

	if (rgpu_parse_hostport(cfg->listen, "127.0.0.1", host, sizeof(host), &port)) {
		pr_err("bad --listen address '%s' (want HOST:PORT)", cfg->listen);
		return 2;
	}
	ret = rgpu_tcp_listen(host, port, &lfd, &bound);
	if (ret) {
		pr_err("cannot listen on %s:%d: %s", host, port, strerror(errno));
		return 1;
	}
	if (strcmp(host, "127.0.0.1") && strcmp(host, "::1") && strcmp(host, "localhost"))
		pr_warn("listening on %s without authentication: any host that reaches this port "
			"can use the GPU", host);
	pr_info("listening on %s:%d (driver %s)", host, bound,
		cfg->driver ? cfg->driver : "libcuda.so.1");
	if (cfg->port_file) {
		FILE *pf = fopen(cfg->port_file, "w");
		if (pf) {
			fprintf(pf, "%d\n", bound);
			fclose(pf);
		}
	}

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

	while (!stop_requested) {
		struct pollfd pfd[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sig_pipe[0], .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents) {
			char buf[64];
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
			reap();
		}
		if (stop_requested || !(pfd[0].revents & POLLIN))
			continue;

		struct rgpu_conn *conn;
		if (rgpu_tcp_accept(lfd, &conn))
			continue;
		pid_t pid = fork();
		if (pid < 0) {
			pr_err("fork: %s; refusing %s", strerror(errno), conn->peer);
			rgpu_conn_close(conn);
			continue;
		}
		if (pid == 0) {
			char tag[64];
			close(lfd);
			close(sig_pipe[0]);
			close(sig_pipe[1]);
			signal(SIGCHLD, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			snprintf(tag, sizeof(tag), "rgpud[%d]", (int)getpid());
			rgpu_log_set_tag(tag);
			srv_worker_run(cfg, conn);
		}
		if (nworkers == cap_workers) {
			int cap = cap_workers ? 2 * cap_workers : 16;
			pid_t *n = realloc(workers, (size_t)cap * sizeof(*n));
			if (n) {
				workers = n;
				cap_workers = cap;
			}
		}
		if (nworkers < cap_workers)
			workers[nworkers++] = pid;
		pr_info("client %s: worker %d (%d running)", conn->peer, (int)pid, nworkers);
		rgpu_conn_close(conn);
	}

	pr_info("stopping: %d worker(s) to finish", nworkers);
	close(lfd);
	if (nworkers > 0) {
		for (int i = 0; i < nworkers; i++)
			kill(workers[i], SIGTERM);
		for (int i = 0; i < 50 && nworkers > 0; i++) {
			struct timespec ts = {0, 100 * 1000 * 1000};
			reap();
			if (nworkers > 0)
				nanosleep(&ts, NULL);
		}
		if (nworkers > 0) {
			for (int i = 0; i < nworkers; i++)
				kill(workers[i], SIGKILL);
			reap();
		}
	}
	return 0;
}
