/*
 * Authentication of a new connection, in its worker, before anything else is done for it: no
 * driver is loaded, no job is made and no resume is routed until the client has proved it holds
 * its tenant's key (docs/protocol.md, "Authentication"). Keys live in one file per tenant,
 * DIR/TENANT.key (rgpud --keys DIR), read when a client names the tenant, so tenants can be
 * added and removed without a restart. The MACs are rgpu_auth_mac() (util/auth.c, Nettle's
 * HMAC-SHA256). It must never send, log or keep a key, and must tell a client nothing that a
 * guess of a tenant name could learn from (an unknown tenant is refused like a wrong key).
 */
#define LOG_PREFIX "auth: "
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "rgpu.pb-c.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

int srv_keys_check(const char *dir)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int n = 0, bad = 0;

	if (stat(dir, &st)) {
		pr_err("--keys %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		pr_err("--keys %s: not a directory", dir);
		return -1;
	}
	d = opendir(dir);
	if (!d) {
		pr_err("--keys %s: %s", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char path[4096], tenant[RGPU_TENANT_MAX + 1], why[512];
		struct rgpu_key key;

		if (len <= 4 || strcmp(e->d_name + len - 4, ".key") || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (rgpu_tenant_from_path(path, tenant, sizeof(tenant))) {
			pr_err("--keys: %s: '%.*s' is not a tenant name (1 to %d of A-Z a-z 0-9 . "
			       "_ -, "
			       "not starting with '.')",
			       path, (int)(len - 4), e->d_name, RGPU_TENANT_MAX);
			bad++;
			continue;
		}
		if (rgpu_key_load(path, &key, why, sizeof(why))) {
			pr_err("--keys: %s", why);
			bad++;
			continue;
		}
		rgpu_key_wipe(&key);
		n++;
	}
	closedir(d);
	if (bad)
		return -1;
	if (n == 0)
		pr_warn("--keys %s holds no TENANT.key file: every session will be refused", dir);
	return n;
}

static int send_challenge(struct srv_worker *w, const uint8_t *snonce)
{
	Rgpu__AuthChallenge ch = RGPU__AUTH_CHALLENGE__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_MSG_AUTH_CHALLENGE};

	ch.server_nonce.data = (uint8_t *)snonce;
	ch.server_nonce.len = RGPU_AUTH_NONCE_LEN;
	return rgpu_frame_send_hdr(w->conn, &h, &ch.base, NULL);
}

/* The client's MSG_AUTH: 0 with its MAC in mac, or a protocol error (sent) or a transport error. */
static int recv_answer(struct srv_worker *w, uint8_t *mac)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	Rgpu__AuthResponse *ar;
	int ret = rgpu_frame_recv(w->conn, RGPU_PEER_SERVER, &h, &body);

	if (ret == RGPU_ETIMEDOUT || ret == RGPU_EDEADLINE) {
		srv_protocol_error(w, ret,
				   "no answer to the authentication challenge within %d s of "
				   "connecting",
				   w->cfg->hello_timeout_s);
		return ret;
	}
	if (ret == RGPU_ECLOSED || ret == RGPU_EIO || ret == RGPU_ETRUNC) {
		pr_info("client %s left during authentication", w->peer);
		return ret;
	}
	if (ret) {
		srv_protocol_error(w, ret, "bad frame during authentication");
		return ret;
	}
	if (h.type != RGPU_MSG_AUTH || h.payload_len) {
		free(body);
		srv_protocol_error(w, RGPU_EPROTO, "expected MSG_AUTH, got %s",
				   rgpu_msg_name(h.type));
		return RGPU_EPROTO;
	}
	ar = RGPU_PB_UNPACK(rgpu__auth_response, h.body_len, body);
	free(body);
	if (!ar || ar->mac.len != RGPU_AUTH_MAC_LEN) {
		if (ar)
			rgpu__auth_response__free_unpacked(ar, NULL);
		srv_protocol_error(w, RGPU_EPROTO, "undecodable MSG_AUTH");
		return RGPU_EPROTO;
	}
	memcpy(mac, ar->mac.data, RGPU_AUTH_MAC_LEN);
	rgpu__auth_response__free_unpacked(ar, NULL);
	return 0;
}

int srv_auth(struct srv_worker *w, const Rgpu__Hello *hello, uint8_t *proof, int *has_proof,
	     char *why, size_t whylen)
{
	uint8_t snonce[RGPU_AUTH_NONCE_LEN], mac[RGPU_AUTH_MAC_LEN], want[RGPU_AUTH_MAC_LEN];
	const char *tenant = hello->tenant ? hello->tenant : "";
	struct rgpu_key key = {.len = 0};
	char path[4096], reason[4200] = "";
	int known = 0, ret;

	uint8_t binding[RGPU_AUTH_BINDING_LEN];
	const uint8_t *bind = NULL;

	*has_proof = 0;
	w->tenant[0] = '\0';
	if (!w->cfg->keys_dir)
		return 0; /* loopback, or --insecure: anyone who reaches the port */
	/* under TLS the MACs are bound to this TLS connection (docs/protocol.md, "TLS") */
	if (rgpu_conn_is_tls(w->conn)) {
		if (rgpu_conn_tls_binding(w->conn, binding)) {
			snprintf(why, whylen, "the server cannot bind authentication to TLS");
			pr_err("client %s refused: no TLS exporter value", w->peer);
			return RGPU_EAUTH;
		}
		bind = binding;
	}
	if (!*tenant || hello->client_nonce.len != RGPU_AUTH_NONCE_LEN) {
		snprintf(why, whylen,
			 "this GPU server requires authentication: give the client its tenant key "
			 "(RGPU_KEY_FILE, or rgpuctl run --key FILE)");
		pr_warn("client %s pid %d program %s refused before loading the driver: no "
			"credentials (the hello names no tenant)",
			w->peer, hello->client_pid, hello->client_program);
		return RGPU_EAUTH;
	}
	if (!rgpu_tenant_valid(tenant)) {
		/* never echoed: it could hold anything, line breaks for the log included */
		snprintf(reason, sizeof(reason), "the hello's tenant is not a tenant name");
		tenant = "?";
	} else {
		snprintf(path, sizeof(path), "%s/%s.key", w->cfg->keys_dir, tenant);
		ret = rgpu_key_load(path, &key, reason, sizeof(reason));
		if (ret == RGPU_ENOTFOUND)
			snprintf(reason, sizeof(reason), "unknown tenant (no %s)", path);
		known = ret == 0;
	}
	/*
	 * An unknown tenant is challenged like a known one and refused only after its answer, with
	 * the client told the same as for a wrong key: tenant names cannot be probed.
	 */
	if (getrandom(snonce, sizeof(snonce), 0) != (ssize_t)sizeof(snonce)) {
		snprintf(why, whylen, "the server has no randomness for a challenge");
		pr_err("client %s refused: no randomness for a challenge", w->peer);
		rgpu_key_wipe(&key);
		return RGPU_EAUTH;
	}
	ret = send_challenge(w, snonce);
	if (!ret)
		ret = recv_answer(w, mac);
	if (ret) {
		rgpu_key_wipe(&key);
		return ret;
	}
	if (known) {
		rgpu_auth_mac_bound(&key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, tenant, snonce,
				    hello->client_nonce.data, bind, want);
		if (!rgpu_auth_mac_eq(mac, want)) {
			known = 0;
			snprintf(
			    reason, sizeof(reason),
			    "wrong answer to the challenge (%s)",
			    bind ? "another key, a replayed handshake, or one relayed from another "
				   "TLS connection"
				 : "another key, or a replayed handshake");
		}
	}
	if (!known) {
		rgpu_key_wipe(&key);
		snprintf(
		    why, whylen,
		    "authentication failed for tenant '%.64s': the server has no such tenant, or "
		    "the key differs",
		    tenant);
		pr_warn("client %s pid %d program %s refused before loading the driver: tenant "
			"'%.64s': %s",
			w->peer, hello->client_pid, hello->client_program, tenant, reason);
		return RGPU_EAUTH;
	}
	rgpu_auth_mac_bound(&key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION, tenant, snonce,
			    hello->client_nonce.data, bind, proof);
	rgpu_key_wipe(&key);
	*has_proof = 1;
	snprintf(w->tenant, sizeof(w->tenant), "%s", tenant);
	pr_debug("client %s authenticated as tenant %s", w->peer, tenant);
	return 0;
}
