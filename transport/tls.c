/*
 * TLS 1.3 over a TCP connection (OpenSSL 3): a property of struct rgpu_conn, so that every user
 * of a connection — the interposer's session, rgpuctl, rgpud's workers and admin address, and
 * later the server-to-server migration stream — gets it by one call after connect or accept,
 * and moves frames through the same rgpu_conn_* functions afterwards.
 *
 * A connection is read by one thread and written by another at once; an OpenSSL SSL object
 * must not be used by two threads at a time. So, once TLS is up, the socket is non-blocking,
 * every SSL call is made under the connection's ssl_lock and returns at once, and the waiting
 * (poll) is done outside it: a reader waiting for bytes never holds up a sender.
 *
 * It must never: touch OpenSSL before TLS is asked for (the interposer lives inside arbitrary
 * programs), print anything (errors come back as sentences in `why`), or accept anything but
 * TLS 1.3 with a verified certificate on the client side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rgpu/err.h"
#include "rgpu/util.h"
#include "conn_priv.h"

/* the first byte of a TLS handshake record (a ClientHello): content type 22 */
#define TLS_HANDSHAKE_RECORD 0x16
/* the RFC 5705 / RFC 8446 exporter label for the authentication MACs' channel binding */
static const char exporter_label[] = "EXPORTER-rgpu-auth-v1";

#define TLS_READ_BUFFER (256u << 10)

struct rgpu_tls {
	SSL_CTX *ctx;
	int server;
};

/* The newest OpenSSL error as a sentence (and the queue cleared). */
static void ssl_why(const char *what, char *why, size_t whylen)
{
	unsigned long e = ERR_get_error(), last = e;
	char buf[256];

	while (e) { /* the last one queued is the most specific */
		last = e;
		e = ERR_get_error();
	}
	if (last) {
		ERR_error_string_n(last, buf, sizeof(buf));
		snprintf(why, whylen, "%s: %s", what, buf);
	} else {
		snprintf(why, whylen, "%s", what);
	}
}

static int ssl_init(char *why, size_t whylen)
{
	/* no atexit handler: the interposer is nodelete and may outlive the program's own exit */
	if (!OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, NULL)) {
		ssl_why("cannot initialise OpenSSL", why, whylen);
		return RGPU_ETLS;
	}
	return 0;
}

static SSL_CTX *ctx_new(const SSL_METHOD *m, char *why, size_t whylen)
{
	SSL_CTX *ctx = SSL_CTX_new(m);
	if (!ctx) {
		ssl_why("cannot make a TLS context", why, whylen);
		return NULL;
	}
	/* TLS 1.3 and nothing else */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
		ssl_why("cannot restrict TLS to version 1.3", why, whylen);
		SSL_CTX_free(ctx);
		return NULL;
	}
	/*
	 * Partial writes: a non-blocking SSL_write returns after each record it could send, so
	 * the lock is never held across a full socket. A peer that vanishes without close_notify
	 * reads as a clean end: the frame layer tells a cut inside a frame (RGPU_ETRUNC) itself.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	/*
	 * Read ahead into a large buffer: one recv() takes in many 16 KiB records of a bulk
	 * payload, instead of two system calls (header, then body) for each.
	 */
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_BUFFER);
	return ctx;
}

int rgpu_tls_server_new(const char *cert, const char *key, struct rgpu_tls **out, char *why,
			size_t whylen)
{
	struct rgpu_tls *t;
	char what[600];
	int ret;

	*out = NULL;
	ret = ssl_init(why, whylen);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return RGPU_ENOMEM;
	t->server = 1;
	t->ctx = ctx_new(TLS_server_method(), why, whylen);
	if (!t->ctx)
		goto out_free;
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
		snprintf(what, sizeof(what), "cannot use the certificate %s", cert);
		ssl_why(what, why, whylen);
		goto out_ctx;
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
		snprintf(what, sizeof(what), "cannot use the private key %s", key);
		ssl_why(what, why, whylen);
		goto out_ctx;
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		snprintf(what, sizeof(what), "the key %s does not belong to the certificate %s", key,
			 cert);
		ssl_why(what, why, whylen);
		goto out_ctx;
	}
	/*
	 * No session tickets: every connection makes a full handshake (a resume of a job is a
	 * new connection, rare), and no message follows the handshake but application data.
	 */
	SSL_CTX_set_num_tickets(t->ctx, 0);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	*out = t;
	return 0;
out_ctx:
	SSL_CTX_free(t->ctx);
out_free:
	free(t);
	return RGPU_ETLS;
}

int rgpu_tls_client_new(const char *ca, struct rgpu_tls **out, char *why, size_t whylen)
{
	struct rgpu_tls *t;
	char what[600];
	int ret;

	*out = NULL;
	ret = ssl_init(why, whylen);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return RGPU_ENOMEM;
	t->ctx = ctx_new(TLS_client_method(), why, whylen);
	if (!t->ctx)
		goto out_free;
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (ca && *ca) {
		if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
			snprintf(what, sizeof(what), "cannot read the CA certificate(s) in %s", ca);
			ssl_why(what, why, whylen);
			goto out_ctx;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		ssl_why("cannot read the system's CA certificates", why, whylen);
		goto out_ctx;
	}
	*out = t;
	return 0;
out_ctx:
	SSL_CTX_free(t->ctx);
out_free:
	free(t);
	return RGPU_ETLS;
}

void rgpu_tls_free(struct rgpu_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* ---- the connection's operations once TLS is up ------------------------------------------ */

/* Wait for the socket as SSL asked (err: SSL_ERROR_WANT_READ/_WRITE), at most timeout_ms. */
static int wait_for(struct rgpu_conn *c, int err, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
	int n;
	do {
		n = poll(&pfd, 1, timeout_ms);
	} while (n < 0 && errno == EINTR);
	if (n == 0)
		return RGPU_ETIMEDOUT;
	if (n < 0) {
		c->last_errno = errno;
		return RGPU_EIO;
	}
	return 0;
}

/* What a failed SSL call means for the frame layer: the peer closed, or an error. */
static int ssl_fail(struct rgpu_conn *c, int err, int saved_errno)
{
	if (err == SSL_ERROR_ZERO_RETURN)
		return RGPU_ECLOSED;
	if (err == SSL_ERROR_SYSCALL) {
		c->last_errno = saved_errno;
		if (!saved_errno || saved_errno == EPIPE || saved_errno == ECONNRESET)
			return RGPU_ECLOSED;
		return RGPU_EIO;
	}
	c->last_errno = EPROTO;
	return RGPU_EIO;
}

/*
 * One non-blocking SSL_read or SSL_write under the lock: bytes moved (> 0), or the negative
 * SSL_ERROR_* code with *saved_errno set.
 */
static int ssl_io(struct rgpu_conn *c, int write, void *buf, size_t len, int *saved_errno)
{
	size_t done = 0;
	int ok, err = 0;

	pthread_mutex_lock(&c->ssl_lock);
	ERR_clear_error();
	errno = 0;
	if (write)
		ok = SSL_write_ex(c->ssl, buf, len, &done);
	else
		ok = SSL_read_ex(c->ssl, buf, len, &done);
	if (!ok) {
		err = SSL_get_error(c->ssl, 0);
		*saved_errno = errno;
		ERR_clear_error();
	}
	pthread_mutex_unlock(&c->ssl_lock);
	if (ok)
		return done > (size_t)INT32_MAX ? INT32_MAX : (int)done;
	return -err;
}

static int write_all(struct rgpu_conn *c, const uint8_t *p, size_t len)
{
	while (len) {
		int se = 0, r = ssl_io(c, 1, (void *)p, len > (1u << 30) ? (1u << 30) : len, &se);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (-r == SSL_ERROR_WANT_WRITE || -r == SSL_ERROR_WANT_READ) {
			/* sends wait as long as TCP's do, or the send timeout; shutdown() wakes them */
			int ret = wait_for(c, -r, c->send_timeout_ms ? c->send_timeout_ms : -1);
			if (ret == RGPU_ETIMEDOUT)
				c->last_errno = ETIMEDOUT;
			if (ret)
				return ret;
			continue;
		}
		return ssl_fail(c, -r, se);
	}
	return 0;
}

/*
 * Small pieces (a header and a body) are gathered into one record; large ones (a payload) go to
 * SSL_write straight from the caller's memory, which seals them in full-size records.
 */
#define TLS_GATHER (16u << 10)
static int tls_sendv(struct rgpu_conn *c, const struct iovec *iov, int n)
{
	uint8_t buf[TLS_GATHER];
	size_t have = 0;
	int ret;

	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		if (have + len <= sizeof(buf)) {
			memcpy(buf + have, p, len);
			have += len;
			continue;
		}
		if (len < sizeof(buf) / 2) {
			/* fill this record, the rest starts the next one */
			size_t k = sizeof(buf) - have;
			memcpy(buf + have, p, k);
			ret = write_all(c, buf, sizeof(buf));
			if (ret)
				return ret;
			memcpy(buf, p + k, len - k);
			have = len - k;
			continue;
		}
		if (have) {
			ret = write_all(c, buf, have);
			if (ret)
				return ret;
			have = 0;
		}
		ret = write_all(c, p, len);
		if (ret)
			return ret;
	}
	return have ? write_all(c, buf, have) : 0;
}

static long tls_recv_some(struct rgpu_conn *c, void *buf, size_t cap, int timeout_ms)
{
	uint64_t deadline = timeout_ms >= 0 ? rgpu_deadline_after(timeout_ms) : 0;
	int se = 0, r;

	if (cap > (1u << 30))
		cap = 1u << 30;
	/* as tcp.c: poll briefly for the reply that usually follows within microseconds */
	if (c->spin_ns && timeout_ms != 0) {
		uint64_t start = rgpu_now_ns();
		do {
			r = ssl_io(c, 0, buf, cap, &se);
			if (r > 0)
				return r;
			if (-r != SSL_ERROR_WANT_READ)
				break;
			__builtin_ia32_pause();
		} while (rgpu_conn_spin_more(c, start, rgpu_now_ns()));
	}
	for (;;) {
		r = ssl_io(c, 0, buf, cap, &se);
		if (r > 0)
			return r;
		if (-r == SSL_ERROR_WANT_READ || -r == SSL_ERROR_WANT_WRITE) {
			int ret = wait_for(c, -r, deadline ? rgpu_ms_until(deadline) : -1);
			if (ret)
				return ret;
			continue;
		}
		return ssl_fail(c, -r, se);
	}
}

static int tls_hung_up(struct rgpu_conn *c)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLRDHUP};
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void tls_shutdown(struct rgpu_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
}

static void tls_close(struct rgpu_conn *c)
{
	pthread_mutex_lock(&c->ssl_lock);
	ERR_clear_error();
	/* close_notify, if the socket takes it now; never waits for the peer's */
	SSL_shutdown(c->ssl);
	SSL_free(c->ssl);
	ERR_clear_error();
	pthread_mutex_unlock(&c->ssl_lock);
	pthread_mutex_destroy(&c->ssl_lock);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

/* SSL_free() alone writes nothing to the socket: the other process's session goes on */
static void tls_abandon(struct rgpu_conn *c)
{
	SSL_free(c->ssl);
	ERR_clear_error();
	pthread_mutex_destroy(&c->ssl_lock);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static const struct rgpu_transport_ops tls_ops = {
	.name = "tls",
	.sendv = tls_sendv,
	.recv_some = tls_recv_some,
	.hung_up = tls_hung_up,
	.shutdown = tls_shutdown,
	.close = tls_close,
	.abandon = tls_abandon,
};

/* ---- handshakes ---------------------------------------------------------------------------- */

int rgpu_conn_starts_tls(struct rgpu_conn *c)
{
	uint64_t deadline = c->deadline;
	uint8_t b;

	if (c->rpos != c->rlen)
		return c->rbuf[c->rpos] == TLS_HANDSHAKE_RECORD;
	if (c->fd < 0)
		return RGPU_EUNSUPPORTED;
	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int n = poll(&pfd, 1, deadline ? rgpu_ms_until(deadline) : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return RGPU_ETIMEDOUT;
		ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (r == 1)
			return b == TLS_HANDSHAKE_RECORD;
		if (r == 0)
			return RGPU_ECLOSED;
		if (errno == EAGAIN || errno == EINTR)
			continue;
		c->last_errno = errno;
		return errno == ECONNRESET ? RGPU_ECLOSED : RGPU_EIO;
	}
}

/*
 * Why the handshake failed, for a log line or the user: the peer's certificate and why it was
 * refused, the peer closing, or what OpenSSL says.
 */
static void handshake_why(SSL *ssl, int server, int err, int saved_errno, char *why,
			  size_t whylen)
{
	const char *peer = server ? "the client" : "the server";
	/* what a client most likely meets: a server with TLS off closes, an old one answers plain */
	const char *hint = server ? "" : " (is TLS on at the server? rgpud --tls-cert/--tls-key)";
	long v = server ? X509_V_OK : SSL_get_verify_result(ssl);

	if (v != X509_V_OK) {
		snprintf(why, whylen, "the server's certificate is not trusted: %s",
			 X509_verify_cert_error_string(v));
		ERR_clear_error();
		return;
	}
	if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && !ERR_peek_error())) {
		snprintf(why, whylen, "%s closed the connection during the TLS handshake%s%s%s", peer,
			 saved_errno ? ": " : "", saved_errno ? strerror(saved_errno) : "", hint);
		return;
	}
	char what[200];
	unsigned long e = ERR_peek_last_error();
	if (!server && ERR_GET_LIB(e) == ERR_LIB_SSL &&
	    ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION) {
		/* what rgpud with TLS off answers a ClientHello (server/tls.c) */
		snprintf(why, whylen, "the server has TLS off (start it with rgpud --tls-cert FILE "
				      "--tls-key FILE, or unset RGPU_TLS and RGPU_TLS_CA)");
		ERR_clear_error();
		return;
	}
	if (server)
		snprintf(what, sizeof(what), "TLS handshake failed");
	else
		snprintf(what, sizeof(what), "the server does not speak TLS 1.3 as expected%s", hint);
	ssl_why(what, why, whylen);
}

/*
 * OpenSSL's socket BIO writes with write(2): a peer that reset the connection would kill the
 * process with SIGPIPE, and the interposer cannot ignore that signal for the program it lives
 * in. So SSL writes through this BIO, which sends with MSG_NOSIGNAL as tcp.c does; it reads
 * through the ordinary socket BIO.
 */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
	int fd = (int)(intptr_t)BIO_get_data(b);
	ssize_t w;

	BIO_clear_retry_flags(b);
	do {
		w = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
	} while (w < 0 && errno == EINTR);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)w;
}

static long nosig_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b, (void)num, (void)ptr;
	return cmd == BIO_CTRL_FLUSH || cmd == BIO_CTRL_PUSH || cmd == BIO_CTRL_POP;
}

static void nosig_make(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rgpu send");
	if (m && (!BIO_meth_set_write(m, nosig_write) || !BIO_meth_set_ctrl(m, nosig_ctrl))) {
		BIO_meth_free(m);
		m = NULL;
	}
	nosig_method = m;
}

/* SSL on fd: reads through a socket BIO, writes through the MSG_NOSIGNAL one. */
static int attach_fd(SSL *ssl, int fd)
{
	BIO *r, *w;

	pthread_once(&nosig_once, nosig_make);
	if (!nosig_method)
		return 0;
	r = BIO_new_socket(fd, BIO_NOCLOSE);
	w = BIO_new(nosig_method);
	if (!r || !w) {
		BIO_free(r);
		BIO_free(w);
		return 0;
	}
	BIO_set_data(w, (void *)(intptr_t)fd);
	BIO_set_init(w, 1);
	SSL_set_bio(ssl, r, w);
	return 1;
}

static int handshake(struct rgpu_conn *c, struct rgpu_tls *t, const char *name, char *why,
		     size_t whylen)
{
	SSL *ssl;
	int flags, ret = RGPU_ETLS;

	if (c->fd < 0 || c->ssl)
		return RGPU_EUNSUPPORTED;
	if (c->rpos != c->rlen) {
		snprintf(why, whylen, "bytes from %s arrived before the TLS handshake", c->peer);
		return RGPU_EPROTO;
	}
	ERR_clear_error();
	ssl = SSL_new(t->ctx);
	if (!ssl) {
		ssl_why("cannot make a TLS connection", why, whylen);
		return RGPU_ETLS;
	}
	if (!attach_fd(ssl, c->fd)) {
		ssl_why("cannot attach TLS to the socket", why, whylen);
		goto out_free;
	}
	if (!t->server && name && *name) {
		unsigned char ip[16];
		int is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
		/* the certificate must name the server: its DNS name, or its address */
		if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
			  : (!SSL_set_tlsext_host_name(ssl, name) || !SSL_set1_host(ssl, name))) {
			ssl_why("cannot set the name the certificate must have", why, whylen);
			goto out_free;
		}
	}
	flags = fcntl(c->fd, F_GETFL);
	if (flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		c->last_errno = errno;
		snprintf(why, whylen, "cannot make the socket non-blocking: %s", strerror(errno));
		ret = RGPU_ESYS;
		goto out_free;
	}
	for (;;) {
		int ok, err, se;
		ERR_clear_error();
		errno = 0;
		ok = t->server ? SSL_accept(ssl) : SSL_connect(ssl);
		if (ok == 1)
			break;
		err = SSL_get_error(ssl, ok);
		se = errno;
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			struct pollfd pfd = {.fd = c->fd,
					     .events = err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
			int n = poll(&pfd, 1, c->deadline ? rgpu_ms_until(c->deadline) : -1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				snprintf(why, whylen, "no TLS handshake from the %s in time",
					 t->server ? "client" : "server");
				ret = RGPU_ETIMEDOUT;
				goto out_block;
			}
			continue;
		}
		handshake_why(ssl, t->server, err, se, why, whylen);
		/* a peer that closed may be a broken link (worth another try) or a plain server */
		if (err == SSL_ERROR_ZERO_RETURN ||
		    (err == SSL_ERROR_SYSCALL && (!se || se == ECONNRESET || se == EPIPE)))
			ret = RGPU_ECLOSED;
		goto out_block;
	}
	if (pthread_mutex_init(&c->ssl_lock, NULL)) {
		snprintf(why, whylen, "cannot make a lock");
		ret = RGPU_ESYS;
		goto out_block;
	}
	c->ssl = ssl;
	c->ops = &tls_ops;
	return 0;
out_block:
	fcntl(c->fd, F_SETFL, flags);
out_free:
	SSL_free(ssl);
	ERR_clear_error();
	return ret;
}

int rgpu_tls_accept(struct rgpu_conn *c, struct rgpu_tls *t, char *why, size_t whylen)
{
	if (!t->server)
		return RGPU_EINVAL;
	return handshake(c, t, NULL, why, whylen);
}

int rgpu_tls_connect(struct rgpu_conn *c, struct rgpu_tls *t, const char *name, char *why,
		     size_t whylen)
{
	if (t->server)
		return RGPU_EINVAL;
	return handshake(c, t, name, why, whylen);
}

int rgpu_conn_is_tls(const struct rgpu_conn *c)
{
	return c->ssl != NULL;
}

int rgpu_conn_tls_binding(struct rgpu_conn *c, uint8_t *out)
{
	int ok;
	if (!c->ssl)
		return RGPU_EUNSUPPORTED;
	pthread_mutex_lock(&c->ssl_lock);
	ok = SSL_export_keying_material(c->ssl, out, RGPU_TLS_BINDING_LEN, exporter_label,
					sizeof(exporter_label) - 1, NULL, 0, 0);
	ERR_clear_error();
	pthread_mutex_unlock(&c->ssl_lock);
	return ok == 1 ? 0 : RGPU_ETLS;
}

int rgpu_connect(const char *host, int port, int timeout_ms, struct rgpu_tls *tls,
		 const char *name, struct rgpu_conn **out, char *why, size_t whylen)
{
	struct rgpu_conn *c;
	char tw[400];
	int ret;

	*out = NULL;
	ret = rgpu_tcp_connect(host, port, timeout_ms, &c);
	if (ret) {
		snprintf(why, whylen, "%s:%d: %s", host, port,
			 ret == RGPU_ETIMEDOUT ? "timed out" : strerror(errno));
		return ret;
	}
	if (tls) {
		rgpu_conn_set_deadline(c, rgpu_deadline_after(timeout_ms));
		ret = rgpu_tls_connect(c, tls, name && *name ? name : host, tw, sizeof(tw));
		rgpu_conn_set_deadline(c, 0);
		if (ret) {
			snprintf(why, whylen, "TLS with %s:%d: %s", host, port, tw);
			rgpu_conn_close(c);
			return ret;
		}
	}
	*out = c;
	return 0;
}
