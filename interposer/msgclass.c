/*
 * The call-class check of the command stream: every request the interposer sends goes through
 * ip_post, ip_call or ip_post_dtoh, and each of those asks here whether the message's class
 * (proto/messages.tbl, design.md §4) allows being sent that way. It owns no state and never
 * sends anything; a refusal is a bug in the caller, reported once per call in the log.
 */
#define LOG_PREFIX "rgpu: "
#include "ip.h"
#include "rgpu/log.h"

static const char *class_name(int c)
{
	switch (c) {
	case RGPU_CLASS_POST: return "post (fire-and-forget)";
	case RGPU_CLASS_CALL: return "call (synchronous)";
	case RGPU_CLASS_POST_OR_CALL: return "post_or_call";
	case RGPU_CLASS_PUSH: return "push (server to client)";
	case RGPU_CLASS_SESSION: return "session";
	default: return "unknown";
	}
}

int ip_msg_class_ok(uint16_t type, int want)
{
	const struct rgpu_msg_info *m = rgpu_msg_info(type);

	if (!m) {
		pr_err("message type %u is not in the message table; not sent", type);
		return 0;
	}
	if (m->call_class == want || (m->call_class == RGPU_CLASS_POST_OR_CALL &&
				      (want == RGPU_CLASS_POST || want == RGPU_CLASS_CALL)))
		return 1;
	pr_err("%s is class %s and cannot be sent as %s; not sent", m->name,
	       class_name(m->call_class), class_name(want));
	return 0;
}
