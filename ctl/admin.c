/*
 * The client side of the admin protocol: one request to one rgpud's admin address, one reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.pb-c.h"
#include "rgpu.pb-c.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/err.h"
#include "rgpu/pbdecode.h"
#include "rgpu/transport.h"
#include "rgpu/util.h"
#include "admin.h"

#define ADMIN_TIMEOUT_MS 5000

int ctl_admin_call(const char *server, uint16_t type, const ProtobufCMessageDescriptor *desc,
		   ProtobufCMessage **out, char *err, size_t errlen)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	struct rgpu_frame_hdr h;
	struct rgpu_conn *c = NULL;
	uint8_t *body = NULL;
	char host[256];
	int port, ret;

	*out = NULL;
	if (rgpu_parse_hostport(server, "127.0.0.1", host, sizeof(host), &port) || port == 0) {
		snprintf(err, errlen, "bad server address '%s' (want HOST:PORT)", server);
		return RGPU_EINVAL;
	}
	ret = rgpu_tcp_connect(host, port, ADMIN_TIMEOUT_MS, &c);
	if (ret) {
		snprintf(err, errlen, "cannot reach %s: %s", server, rgpu_strerror(ret));
		return ret;
	}
	rgpu_conn_set_msgs(c, &rgpu_admin_msgs);
	req.version = RGPU_PROTO_VERSION;
	ret = rgpu_frame_send(c, type, 0, 1, 0, &req.base, NULL, 0);
	if (!ret)
		ret = rgpu_frame_recv_within(c, RGPU_PEER_CLIENT, &h, &body, ADMIN_TIMEOUT_MS);
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
	}
out:
	free(body);
	rgpu_conn_close(c);
	return ret;
}
