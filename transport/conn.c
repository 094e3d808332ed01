/* Frame-level send and receive over any transport. */
#include <stdlib.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/transport.h"

int rgpu_frame_send(struct rgpu_conn *c, uint16_t type, uint32_t flags, uint64_t seq,
		    uint64_t session, const ProtobufCMessage *body, const void *payload,
		    uint64_t payload_len)
{
	uint8_t stackbuf[1024];
	size_t need = rgpu_frame_size(body);
	uint8_t *buf = need <= sizeof(stackbuf) ? stackbuf : malloc(need);
	struct iovec iov[2];
	int n = 1, ret;

	if (!buf)
		return RGPU_ENOMEM;
	iov[0].iov_base = buf;
	iov[0].iov_len = rgpu_frame_pack(buf, type, flags, seq, session, body, payload_len);
	if (payload_len) {
		iov[1].iov_base = (void *)payload;
		iov[1].iov_len = payload_len;
		n = 2;
	}
	ret = rgpu_conn_sendv(c, iov, n);
	if (buf != stackbuf)
		free(buf);
	return ret;
}

int rgpu_frame_recv(struct rgpu_conn *c, enum rgpu_peer receiver, struct rgpu_frame_hdr *h,
		    uint8_t **body)
{
	uint8_t raw[RGPU_FRAME_HDR_LEN];
	int ret;

	*body = NULL;
	ret = rgpu_conn_recv(c, raw, sizeof(raw));
	if (ret)
		return ret;
	ret = rgpu_frame_hdr_decode(raw, h);
	if (ret)
		return ret;
	ret = rgpu_frame_check(h, receiver);
	if (ret)
		return ret;
	if (h->body_len) {
		*body = malloc(h->body_len);
		if (!*body)
			return RGPU_ENOMEM;
		ret = rgpu_conn_recv(c, *body, h->body_len);
		if (ret) {
			free(*body);
			*body = NULL;
			return ret;
		}
	}
	return 0;
}

int rgpu_conn_discard(struct rgpu_conn *c, uint64_t len)
{
	char buf[16384];
	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		int ret = rgpu_conn_recv(c, buf, n);
		if (ret)
			return ret;
		len -= n;
	}
	return 0;
}
