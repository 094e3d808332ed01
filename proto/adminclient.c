/*
 * The client side of the admin protocol (rgpu/adminclient.h): rgpuctl's requests and a
 * server's requests to another server. With an operator key, the first request of a
 * connection carries a nonce, the server's challenge is answered and the first reply must
 * carry the server's proof (docs/protocol.md, "Authentication"); the connection is then
 * trusted for the rest of the conversation, as the server trusts it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/adminclient.h"
#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"

struct rgpu_admin {
	struct rgpu_conn *c;
	const struct rgpu_key *key;
	char server[300];
	uint8_t binding[RGPU_AUTH_BINDING_LEN];
	int bound;
	int authed; /* the first reply proved the server holds the key (or there is no key) */
	uint64_t seq;
};

/* A bytes field of m by name (server_proof, client_nonce), or NULL. */
static ProtobufCBinaryData *bytes_field(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
	if (!f || f->type != PROTOBUF_C_TYPE_BYTES || f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return (ProtobufCBinaryData *)((char *)m + f->offset);
}

static void set_version(ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "version");
	if (f && f->type == PROTOBUF_C_TYPE_UINT32 && f->label != PROTOBUF_C_LABEL_REPEATED)
		*(uint32_t *)((char *)m + f->offset) = RGPU_PROTO_VERSION;
}

/* Answer the server's challenge (body) with key's MAC; keeps the server's nonce in sn. */
static int answer(struct rgpu_admin *a, const uint8_t *body, size_t blen, const uint8_t *cn,
		  uint8_t *sn)
{
	Rgpu__AuthChallenge *ch = RGPU_PB_UNPACK(rgpu__auth_challenge, blen, body);
	Rgpu__AuthResponse ar = RGPU__AUTH_RESPONSE__INIT;
	uint8_t mac[RGPU_AUTH_MAC_LEN];

	if (!ch || ch->server_nonce.len != RGPU_AUTH_NONCE_LEN) {
		if (ch)
			rgpu__auth_challenge__free_unpacked(ch, NULL);
		return RGPU_EPROTO;
	}
	memcpy(sn, ch->server_nonce.data, RGPU_AUTH_NONCE_LEN);
	rgpu__auth_challenge__free_unpacked(ch, NULL);
	rgpu_auth_mac_bound(a->key, RGPU_AUTH_CLIENT, RGPU_PROTO_VERSION, RGPU_AUTH_ADMIN, sn, cn,
			    a->bound ? a->binding : NULL, mac);
	ar.mac.data = mac;
	ar.mac.len = sizeof(mac);
	return rgpu_frame_send(a->c, RGPU_ADMIN_MSG_AUTH, 0, 0, 0, &ar.base, NULL, 0);
}

int rgpu_admin_open(const struct rgpu_admin_peer *p, const char *server, struct rgpu_admin **out,
		    char *err, size_t errlen)
{
	struct rgpu_admin *a;
	char host[256], why[400];
	int port, ret;

	*out = NULL;
	if (rgpu_parse_hostport(server, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
		snprintf(err, errlen, "bad server address '%s' (want HOST:PORT)", server);
		return RGPU_EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return RGPU_ENOMEM;
	}
	snprintf(a->server, sizeof(a->server), "%s", server);
	a->key = p && p->key && p->key->len ? p->key : NULL;
	ret = rgpu_connect(host, port, RGPU_ADMIN_TIMEOUT_MS, p ? p->tls : NULL,
			   p ? p->tls_name : NULL, &a->c, why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "%s%s", ret == RGPU_ETLS ? "" : "cannot reach ", why);
		free(a);
		return ret;
	}
	if (p && p->tls && rgpu_conn_tls_binding(a->c, a->binding) == 0)
		a->bound = 1;
	rgpu_conn_set_msgs(a->c, &rgpu_admin_msgs);
	if (p)
		rgpu_conn_set_send_timeout(a->c, p->send_timeout_ms);
	*out = a;
	return 0;
}

const char *rgpu_admin_server(const struct rgpu_admin *a)
{
	return a->server;
}

void rgpu_admin_close(struct rgpu_admin *a)
{
	if (!a)
		return;
	rgpu_conn_close(a->c);
	free(a);
}

int rgpu_admin_take_error(struct rgpu_admin *a, int timeout_ms, char *err, size_t errlen)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	int code = 0;

	for (int i = 0; i < 64; i++) {
		if (rgpu_frame_recv_within(a->c, RGPU_PEER_CLIENT, &h, &body, timeout_ms))
			break;
		if (h.type == RGPU_ADMIN_MSG_ERROR) {
			Rgpu__ProtocolError *pe =
				RGPU_PB_UNPACK(rgpu__protocol_error, h.body_len, body);
			if (pe) {
				snprintf(err, errlen, "%s: %s", a->server,
					 pe->message ? pe->message : "refused");
				code = pe->code ? pe->code : RGPU_EPROTO;
				rgpu__protocol_error__free_unpacked(pe, NULL);
			}
			free(body);
			break;
		}
		free(body);
		body = NULL;
		if (h.payload_len && rgpu_conn_discard(a->c, h.payload_len))
			break;
	}
	return code;
}

int rgpu_admin_post(struct rgpu_admin *a, uint16_t type, const ProtobufCMessage *m,
		    const void *payload, uint64_t plen)
{
	return rgpu_frame_send(a->c, type, 0, ++a->seq, 0, m, payload, plen);
}

/* Read frames until one that is not PROGRESS. */
static int next_frame(struct rgpu_admin *a, struct rgpu_frame_hdr *h, uint8_t **body,
		      rgpu_admin_progress_fn progress, void *parg, int timeout_ms)
{
	for (;;) {
		int ret = rgpu_frame_recv_within(a->c, RGPU_PEER_CLIENT, h, body, timeout_ms);
		if (ret || h->type != RGPU_ADMIN_MSG_PROGRESS)
			return ret;
		if (h->payload_len && (ret = rgpu_conn_discard(a->c, h->payload_len))) {
			free(*body);
			*body = NULL;
			return ret;
		}
		if (progress) {
			Rgpu__Progress *pr = RGPU_PB_UNPACK(rgpu__progress, h->body_len, *body);
			if (pr) {
				progress(pr, parg);
				rgpu__progress__free_unpacked(pr, NULL);
			}
		}
		free(*body);
		*body = NULL;
	}
}

int rgpu_admin_call(struct rgpu_admin *a, uint16_t type, ProtobufCMessage *req,
		    const void *payload, uint64_t plen, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **rep, void **rpayload, uint64_t *rplen,
		    rgpu_admin_progress_fn progress, void *parg, int timeout_ms, char *err,
		    size_t errlen)
{
	struct rgpu_frame_hdr h;
	uint8_t *body = NULL;
	uint8_t cn[RGPU_AUTH_NONCE_LEN], sn[RGPU_AUTH_NONCE_LEN];
	ProtobufCBinaryData *nonce = bytes_field(req, "client_nonce");
	int challenged = 0, first = !a->authed, ret;

	*rep = NULL;
	if (rpayload)
		*rpayload = NULL;
	set_version(req);
	if (first && a->key) {
		if (!nonce || getrandom(cn, sizeof(cn), 0) != (ssize_t)sizeof(cn)) {
			snprintf(err, errlen, "no nonce for the operator key");
			return RGPU_EAUTH;
		}
		nonce->data = cn;
		nonce->len = sizeof(cn);
	}
	ret = rgpu_frame_send(a->c, type, 0, ++a->seq, 0, req, payload, plen);
	if (nonce) {
		nonce->data = NULL;
		nonce->len = 0;
	}
	if (!ret)
		ret = next_frame(a, &h, &body, progress, parg, timeout_ms);
	if (!ret && first && h.type == RGPU_ADMIN_MSG_AUTH_CHALLENGE && a->key) {
		ret = answer(a, body, h.body_len, cn, sn);
		free(body);
		body = NULL;
		challenged = 1;
		if (!ret)
			ret = next_frame(a, &h, &body, progress, parg, timeout_ms);
	}
	if (ret) {
		snprintf(err, errlen, "%s: %s", a->server,
			 ret == RGPU_EVERSION ? "speaks another protocol version"
			 : ret == RGPU_ETIMEDOUT ? "no answer in time"
						 : rgpu_strerror(ret));
		goto out;
	}
	if (h.type == RGPU_ADMIN_MSG_ERROR) {
		Rgpu__ProtocolError *pe = RGPU_PB_UNPACK(rgpu__protocol_error, h.body_len, body);
		snprintf(err, errlen, "%s refused: %s", a->server,
			 pe && pe->message ? pe->message : "protocol error");
		/* the refusals a caller may tell apart; anything else is the protocol's */
		ret = !pe ? RGPU_EPROTO
		      : pe->code == RGPU_EAUTH || pe->code == RGPU_ENOTFOUND ||
				pe->code == RGPU_EBUSY || pe->code == RGPU_EUNSUPPORTED ||
				pe->code == RGPU_ECORRUPT
			  ? pe->code
			  : RGPU_EPROTO;
		if (pe)
			rgpu__protocol_error__free_unpacked(pe, NULL);
		goto out;
	}
	if (h.type != type || !(h.flags & RGPU_FRAME_REPLY) ||
	    !(*rep = rgpu_pb_unpack(desc, h.body_len, body))) {
		snprintf(err, errlen, "%s: unexpected reply", a->server);
		ret = RGPU_EPROTO;
		goto out;
	}
	if (h.payload_len) {
		void *p = rpayload ? malloc(h.payload_len) : NULL;
		if (!p) {
			snprintf(err, errlen, "%s: an unexpected reply payload", a->server);
			ret = RGPU_EPROTO;
			goto out_rep;
		}
		ret = rgpu_conn_recv_payload(a->c, p, h.payload_len);
		if (ret) {
			free(p);
			snprintf(err, errlen, "%s: %s", a->server, rgpu_strerror(ret));
			goto out_rep;
		}
		*rpayload = p;
		*rplen = h.payload_len;
	} else if (rplen) {
		*rplen = 0;
	}
	if (first && a->key) {
		/* mutual: only a server holding the operator key can have made this proof */
		const ProtobufCBinaryData *p = bytes_field(*rep, "server_proof");
		uint8_t want[RGPU_AUTH_MAC_LEN];
		int ok = 0;
		if (challenged && p && p->len == RGPU_AUTH_MAC_LEN) {
			rgpu_auth_mac_bound(a->key, RGPU_AUTH_SERVER, RGPU_PROTO_VERSION,
					    RGPU_AUTH_ADMIN, sn, cn, a->bound ? a->binding : NULL,
					    want);
			ok = rgpu_auth_mac_eq(want, p->data);
		}
		if (!ok) {
			snprintf(err, errlen,
				 "%s did not prove that it holds the operator key (%s); its answer is "
				 "ignored",
				 a->server,
				 challenged ? "a wrong proof" : "it asked for none: no rgpud --admin-key");
			ret = RGPU_EAUTH;
			goto out_rep;
		}
	}
	a->authed = 1;
	goto out;
out_rep:
	if (rpayload && *rpayload) {
		free(*rpayload);
		*rpayload = NULL;
	}
	protobuf_c_message_free_unpacked(*rep, NULL);
	*rep = NULL;
out:
	free(body);
	return ret;
}

int rgpu_admin_once(const struct rgpu_admin_peer *p, const char *server, uint16_t type,
		    ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **rep, rgpu_admin_progress_fn progress, void *parg,
		    int timeout_ms, char *err, size_t errlen)
{
	struct rgpu_admin *a;
	int ret = rgpu_admin_open(p, server, &a, err, errlen);

	*rep = NULL;
	if (ret)
		return ret;
	ret = rgpu_admin_call(a, type, req, NULL, 0, desc, rep, NULL, NULL, progress, parg,
			      timeout_ms, err, errlen);
	rgpu_admin_close(a);
	return ret;
}

int rgpu_admin_error(struct rgpu_conn *c, int code, const char *message)
{
	Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
	struct rgpu_frame_hdr h = {.type = RGPU_ADMIN_MSG_ERROR};

	pe.code = code;
	pe.message = (char *)message;
	return rgpu_frame_send_hdr(c, &h, &pe.base, NULL);
}

void rgpu_admin_progress(struct rgpu_conn *c, const char *phase, uint64_t done, uint64_t total,
			 const char *unit)
{
	Rgpu__Progress pr = RGPU__PROGRESS__INIT;

	pr.phase = (char *)phase;
	pr.done = done;
	pr.total = total;
	pr.unit = (char *)unit;
	rgpu_frame_send(c, RGPU_ADMIN_MSG_PROGRESS, 0, 0, 0, &pr.base, NULL, 0);
}
