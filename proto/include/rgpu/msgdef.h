/*
 * What the project knows about each message type beyond the frame rules: its call class, its
 * effect on the state log, the capability bit it belongs to and its protobuf bodies.
 *
 * Nothing here is written by hand per message: every protocol declares its types once, in a
 * table under proto/ (messages.tbl for the client<->worker protocol), and proto/gen_msgs.py
 * generates the lookup (rgpu_msg_info() in rgpu_msgs.h) from it. The generator reads the enums
 * of this file to learn the words the table may use (`class=post_or_call` must name
 * RGPU_CLASS_POST_OR_CALL), so a word added here becomes usable there and nowhere else.
 */
#ifndef RGPU_MSGDEF_H
#define RGPU_MSGDEF_H

#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "rgpu/frame.h"

/* How a message is sent (design.md §4). The numbers are table vocabulary, not wire data. */
enum rgpu_msg_class {
	RGPU_CLASS_POST = 1,         /* fire-and-forget: no reply; a failure shows at the next call */
	RGPU_CLASS_CALL = 2,         /* synchronous: the sender waits for the reply */
	RGPU_CLASS_POST_OR_CALL = 3, /* either, chosen by the body (the table row says how) */
	RGPU_CLASS_PUSH = 4,         /* sent by the server unasked */
	RGPU_CLASS_SESSION = 5,      /* the link itself: handshake, goodbye, protocol errors */
};

/* What a message does to the session's state log (statetrack/include/rgpu/statetrack.h). */
enum rgpu_msg_effect {
	RGPU_EFFECT_NONE = 0,    /* no object is made, changed or removed */
	RGPU_EFFECT_CREATE = 1,  /* adds an object of `kind` */
	RGPU_EFFECT_DESTROY = 2, /* removes an object of `kind` (and what hangs off it) */
	RGPU_EFFECT_ATTR = 3,    /* changes an attribute of an object of `kind` */
	RGPU_EFFECT_SYNC = 4,    /* waits for earlier work: a point where asynchronous errors show */
};

struct rgpu_msg_info {
	const char *name;                         /* "MSG_LAUNCH" */
	uint16_t type;                            /* the frame type */
	uint8_t call_class;                       /* enum rgpu_msg_class */
	uint8_t effect;                           /* enum rgpu_msg_effect */
	uint8_t kind;                             /* enum st_kind; 0 for RGPU_EFFECT_NONE/SYNC */
	uint32_t cap;                             /* the capability bit it needs; 0: base protocol */
	const ProtobufCMessageDescriptor *body;   /* request body; NULL: the body is empty */
	const ProtobufCMessageDescriptor *reply;  /* reply body; NULL: never answered */
	const struct rgpu_msg_rule *rule;         /* direction and limits the receiver checks */
};

#endif
