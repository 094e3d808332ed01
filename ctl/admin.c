/*
 * The client side of the admin protocol: one request to one rgpud's admin address, one reply.
 * With an operator key, the request carries a nonce, the server's challenge is answered and
 * the reply must carry the server's proof (docs/protocol.md, "Authentication").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "admin.h"

#define ADMIN_TIMEOUT_MS 5000

/* The reply's server_proof field (every admin reply has one), or NULL. */
static const ProtobufCBinaryData *reply_proof(const ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "server_proof");
	if (!f || f->type != PROTOBUF_C_TYPE_BYTES)
		return NULL;
	return (const ProtobufCBinaryData *)((const char *)m + f->offset);
}

/* Answer the server's challenge (h, body) with key's MAC; keeps the server's nonce in sn. */
static int answer(struct rgpu_conn *c, const struct rgpu_key *key, const uint8_t *body,
		  size_t blen, const uint8_t *cn, const uint8_t *bind, uint8_t *sn)
{
	Rgpu__AuthChallenge *ch = RGPU_PB_UNPACK(rgpu__auth_challenge, blen, body);
	Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
	uint8_t mac[RGPU_AUTH_MAC_LEN];
	int ret;

	if (!ch || ch->server_nonce.len != RGPU_AUTH_NONCE_LEN) {
		if (ch)
			rgpu__auth_challenge__free_unpacked(ch, NULL);
		return RGPU_EPROTO;
	}
	memcpy(sn, ch->server_nonce.data, RGPU_AUTH_NONCE_LEN);
	rgpu__auth_challenge__free_unpacked(ch, NULL);
	rgpu_auth_mac_bound(key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, RGPU_AUTH_ADMIN, sn, cn, bind,
			    mac);
	ar.mac.data = mac;
	ar.mac.len = sizeof(mac);
	ret = rgpu_frame_send(c, RGPU_ADMIN_MSG_AUTH, 0, 0, 0, &ar.base, NULL, 0);
	return ret;
}

static struct rgpu_tls *admin_tls;
static const char *admin_tls_name;

void ctl_admin_set_tls(struct rgpu_tls *tls, const char *name)
{
	admin_tls = tls;
	admin_tls_name = name;
}

int ctl_admin_call(const char *server, uint16_t type, const ProtobufCMessageDescriptor *desc,
		   const struct rgpu_key *key, ProtobufCMessage **out, char *err, size_t errlen)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	struct rgpu_frame_hdr h;
	struct rgpu_conn *c = NULL;
	uint8_t *body = NULL;
	uint8_t cn[RGPU_AUTH_NONCE_LEN], sn[RGPU_AUTH_NONCE_LEN];
	uint8_t binding[RGPU_AUTH_BINDING_LEN];
	const uint8_t *bind = NULL;
	int challenged = 0;
	char host[256], why[400];
	int port, ret;

	*out = NULL;
	if (rgpu_parse_hostport(server, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
		snprintf(err, errlen, "bad server address '%s' (want HOST:PORT)", server);
		return RGPU_EINVAL;
	}
	ret = rgpu_connect(host, port, ADMIN_TIMEOUT_MS, admin_tls, admin_tls_name, &c, why,
			   sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s%s", ret == RGPU_ETLS ? "" : "cannot reach ", why);
		return ret;
	}
	if (admin_tls && rgpu_conn_tls_binding(c, binding) == 0)
		bind = binding;
	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	req.version = RGPU_PROTO_VERSION;
	if (key && key->len) {
		if (getrandom(cn, sizeof(cn), 0) != (ssize_t)sizeof(cn)) {
			snprintf(err, errlen, "no randomness for a nonce: %s", strerror(errno));
			ret = RGPU_EAUTH;
			goto out;
		}
		req.client_nonce.data = cn;
		req.client_nonce.len = sizeof(cn);
	}
	ret = rgpu_frame_send(c, type, 0, 1, 0, &req.base, NULL, 0);
	if (!ret)
		ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, ADMIN_TIMEOUT_MS);
	if (!ret && h.type == RGPU_ADMIN_MSG_AUTH_CHALLENGE && key && key->len) {
		ret = answer(c, key, body, h.body_len, cn, bind, sn);
		free(body);
		body = NULL;
		challenged = 1;
		if (!ret)
			ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body,
						     ADMIN_TIMEOUT_MS);
	}
	if (!ret && h.payload_len)
		ret = RGPU_EPROTO;
	if (ret) {
		snprintf(err, errlen, "%s: %s", server,
			 ret == RGPU_EVERSION ? "speaks another protocol version" : rgpu_strerror(ret));
		goto out;
	}
	if (h.type == RGPU_ADMIN_MSG_ERROR) {
		Rgpu__ProtocolError *pe = RGPU_PB_UNPACK(rgpu__protocol_error, h.body_len, body);
		snprintf(err, errlen, "%s refused: %s", server,
			 pe && pe->message ? pe->message : "protocol error");
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		ret = RGPU_EPROTO;
		goto out;
	}
	if (h.type != type || !(h.flags & RGPU_FRAME_REPLY) ||
	    !(*out = rgpu_pb_unpack(desc, h.body_len, body))) {
		snprintf(err, errlen, "%s: unexpected reply", server);
		ret = RGPU_EPROTO;
		goto out;
	}
	if (key && key->len) {
		/* mutual: only a server holding the operator key can have made this proof */
		const ProtobufCBinaryData *p = reply_proof(*out);
		uint8_t want[RGPU_AUTH_MAC_LEN];
		int ok = 0;
		if (challenged && p && p->len == RGPU_AUTH_MAC_LEN) {
			rgpu_auth_mac_bound(key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION,
					    RGPU_AUTH_ADMIN, sn, cn, bind, want);
			ok = rgpu_auth_mac_eq(want, p->data);
		}
		if (!ok) {
			snprintf(err, errlen,
				 "%s did not prove that it holds the operator key (%s); its answer is "
				 "ignored",
				 server,
				 challenged ? "a wrong proof" : "it asked for none: no rgpud --admin-key");
			protobuf_c_message_free_unpacked(*out, NULL);
			*out = NULL;
			ret = RGPU_EAUTH;
		}
	}
out:
	free(body);
	rgpu_conn_close(c);
	return ret;
}
