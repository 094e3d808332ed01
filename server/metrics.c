/*
 * rgpud --metrics HOST:PORT (issue 11; docs/operator-guide.md, "Telemetry"): a Prometheus
 * endpoint, GET /metrics in the text exposition format, served by libmicrohttpd inside the
 * supervisor's own poll loop (MHD's epoll descriptor is one more descriptor there; no thread),
 * so that the page is built from the supervisor's state without locks. Off by default. Answers
 * nothing but GET /metrics (404), reads no request body, and never blocks the loop: MHD's
 * sockets are non-blocking and each wake-up runs only what is ready.
 */
#define LOG_PREFIX "metrics: "
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rgpu/log.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "srv.h"

static struct MHD_Daemon *mhd;
static srv_metrics_fn page_fn;

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	struct MHD_Response *r;
	char *text = NULL;
	size_t len = 0;
	unsigned code = MHD_HTTP_OK;
	enum MHD_Result ret;

	(void)cls;
	(void)version;
	(void)upload;
	if (!*state) { /* the headers alone: the request is answered on the next call */
		*state = conn;
		return MHD_YES;
	}
	*upload_len = 0;
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		code = MHD_HTTP_NOT_FOUND;
	} else if (!(text = page_fn(&len))) {
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (code != MHD_HTTP_OK) {
		static const char *msg = "rgpud serves GET /metrics only\n";
		r = MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		text = NULL;
	}
	free(text);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

int srv_metrics_start(const struct srv_config *cfg, srv_metrics_fn fn, int *fd)
{
	char host[256];
	int port, lfd = -1, bound = 0;
	const union MHD_DaemonInfo *di;

	*fd = -1;
	if (!cfg->metrics)
		return 0;
	if (rgpu_parse_hostport(cfg->metrics, "127.0.0.1", host, sizeof(host), &port)) {
		pr_err("bad --metrics address '%s' (want HOST:PORT)", cfg->metrics);
		return 2;
	}
	if (rgpu_tcp_listen(host, port, &lfd, &bound)) {
		pr_err("cannot listen on %s for /metrics: %s", cfg->metrics, strerror(errno));
		return 2;
	}
	page_fn = fn;
	mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, NULL,
			       MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_CONNECTION_TIMEOUT,
			       (unsigned int)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
			       MHD_OPTION_END);
	if (!mhd || !(di = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD))) {
		pr_err("libmicrohttpd would not serve /metrics on %s", cfg->metrics);
		if (mhd)
			MHD_stop_daemon(mhd);
		mhd = NULL;
		close(lfd);
		return 2;
	}
	*fd = di->epoll_fd;
	if (cfg->metrics_port_file) {
		FILE *f = fopen(cfg->metrics_port_file, "w");
		if (f) {
			fprintf(f, "%d\n", bound);
			fclose(f);
		}
	}
	pr_info("Prometheus metrics on http://%s:%d/metrics", host, bound);
	return 0;
}

int srv_metrics_timeout_ms(void)
{
	MHD_UNSIGNED_LONG_LONG t;

	if (!mhd || MHD_get_timeout(mhd, &t) != MHD_YES)
		return -1;
	return t > 60000 ? 60000 : (int)t;
}

void srv_metrics_run(void)
{
	if (mhd)
		MHD_run(mhd);
}

void srv_metrics_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd);
	mhd = NULL;
}
