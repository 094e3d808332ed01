/* rgpuctl's side of the admin protocol (proto/admin.proto). */
#ifndef CTL_ADMIN_H
#define CTL_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/*
 * ctl_admin_call() - send request `type` to the rgpud admin address `server` and unpack the
 * reply with desc into *out. Returns 0, or an RGPU_E* code with err filled for the operator.
 */
int ctl_admin_call(const char *server, uint16_t type, const ProtobufCMessageDescriptor *desc,
		   ProtobufCMessage **out, char *err, size_t errlen);

#endif
