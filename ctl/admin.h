/* rgpuctl's side of the admin protocol (proto/admin.proto). */
#ifndef CTL_ADMIN_H
#define CTL_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct rgpu_key;
/*
 * ctl_admin_call() - send request `type` to the rgpud admin address `server` and unpack the
 * reply with desc into *out. With key (len != 0), answer the server's challenge with the
 * operator key and accept the reply only with the server's proof. Returns 0, or an RGPU_E*
 * code with err filled for the operator (RGPU_EAUTH: the server did not prove the key).
 */
struct rgpu_tls;
/*
 * ctl_admin_set_tls() - speak TLS to every server asked from now on (NULL: plaintext), and
 * check that its certificate names `name` (NULL: the host of the address asked).
 */
void ctl_admin_set_tls(struct rgpu_tls *tls, const char *name);

int ctl_admin_call(const char *server, uint16_t type, const ProtobufCMessageDescriptor *desc,
		   const struct rgpu_key *key, ProtobufCMessage **out, char *err, size_t errlen);

#endif
