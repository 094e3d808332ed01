/*
 * TLS at rgpud's two doors (the client port, in a worker after fork; the admin port, in the
 * supervisor under the admin request's deadline): before the first frame, the peer's first byte
 * says whether it starts TLS, so that a client and a server that disagree both learn it at once,
 * with one log line here and a sentence for the client, and neither waits on the other.
 */
#define LOG_PREFIX "tls: "
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "srv.h"

int srv_tls_start(const struct srv_config *cfg, struct rgpu_conn *c, const char *who,
		  uint16_t error_type)
{
	char why[600];
	int tls = rgpu_conn_starts_tls(c), ret;

	if (!cfg->tls) {
		if (tls != 1)
			return 0; /* plaintext as expected, or nothing: the frame code says */
		/*
		 * A TLS client cannot read a plaintext error; a TLS alert it can, and it tells a
		 * refusal from a cut link (which it would try again): protocol_version, an alert no
		 * TLS 1.3 rgpud ever sends to a TLS 1.3 client, so the client can name the cause.
		 */
		static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 70};
		struct iovec iov = {.iov_base = (void *)alert, .iov_len = sizeof(alert)};
		pr_warn("%s %s starts TLS, but this server has TLS off (rgpud --tls-cert FILE "
			"--tls-key FILE); refused",
			who, rgpu_conn_peer(c));
		rgpu_conn_sendv(c, &iov, 1);
		return RGPU_ETLS;
	}
	if (tls < 0) {
		pr_info("%s %s sent nothing before leaving or its deadline (%s)", who,
			rgpu_conn_peer(c), rgpu_strerror(tls));
		return tls;
	}
	if (tls == 0) {
		/* a plaintext client reads a plaintext error: it can say why */
		Rgpu__ProtocolError pe = RGPU__PROTOCOL_ERROR__INIT;
		struct rgpu_frame_hdr h = {.type = error_type};
		pe.code = RGPU_ETLS;
		pe.message = "this server requires TLS: give the client RGPU_TLS=1 and "
			     "RGPU_TLS_CA=FILE (rgpuctl: --tls-ca FILE)";
		pr_warn("%s %s refused: it did not start TLS, which this server requires", who,
			rgpu_conn_peer(c));
		rgpu_frame_send_hdr(c, &h, &pe.base, NULL);
		return RGPU_ETLS;
	}
	ret = rgpu_tls_accept(c, cfg->tls, why, sizeof(why));
	if (ret) {
		pr_warn("%s %s refused: %s", who, rgpu_conn_peer(c), why);
		return ret;
	}
	return 0;
}
