/*
 * Unit tests of what gen_msgs.py generates from proto/messages.tbl (testing.md, tier 1): the
 * frame rules keep every limit the hand-kept table in transport/frame.c had, rgpu_msg_info()
 * agrees with the rules and with itself (a call has a reply, a post has none, an empty body
 * has no descriptor), the capability masks are the bits the handshake sends, and
 * the server's srv_handlers[] has a handler for every request it executes and none for the
 * rest.
 *
 * Expected values are written out here, never read from the table under test. test_frame.c
 * checks every rule of every type against the generated table as well; this file spells out
 * the cases that name the old limits, and the parts test_frame.c cannot see.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/frame.h"
#include "rgpu/statetrack.h"
#include "rgpu_msgs.h"
#include "srv_handlers.h"

#define MiB (1ull << 20)

static int chk(unsigned type, uint32_t flags, uint32_t body_len, uint64_t payload_len,
	       enum rgpu_peer receiver)
{
	struct rgpu_frame_hdr h = {
	    .magic = RGPU_FRAME_MAGIC,
	    .version = RGPU_PROTO_VERSION,
	    .type = (uint16_t)type,
	    .flags = flags,
	    .body_len = body_len,
	    .payload_len = payload_len,
	    .seq = 3,
	    .session = 7,
	};
	return rgpu_frame_check(&h, receiver, &rgpu_job_msgs);
}

/* The limits and rules of the old rules[] in transport/frame.c, by name. */
static void test_old_limits(void **state)
{
	(void)state;
	/* request payloads */
	assert_int_equal(chk(RGPU_MSG_MEMCPY_HTOD, 0, 16, 16 * MiB, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_MEMCPY_HTOD, 0, 16, 16 * MiB + 1, RGPU_PEER_SERVER),
			 RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_DATA, 0, 16, 16 * MiB, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk(RGPU_MSG_DATA, 0, 16, 16 * MiB + 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_MODULE_LOAD, 0, 16, 1024 * MiB, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_MODULE_LOAD, 0, 16, 1024 * MiB + 1, RGPU_PEER_SERVER),
			 RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_LAUNCH, 0, 16, 1 * MiB, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_LAUNCH, 0, 16, 1 * MiB + 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_MEMCPY_DTOH, 0, 16, 1, RGPU_PEER_SERVER), RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_CALLBACK, 0, 16, 1, RGPU_PEER_CLIENT), RGPU_ETOOBIG);

	/* empty bodies: required for GOODBYE and PING, refused for other requests */
	assert_int_equal(chk(RGPU_MSG_GOODBYE, 0, 0, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_GOODBYE, 0, 1, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_PING, 0, 0, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_PING, 0, 2, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_LAUNCH, 0, 0, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_DATA, 0, 0, 4096, RGPU_PEER_CLIENT), 0); /* offset 0 */

	/* direction */
	assert_int_equal(chk(RGPU_MSG_DATA, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_CALLBACK, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_CALLBACK_DONE, 0, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_LAUNCH, 0, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_ERROR, 0, 16, 0, RGPU_PEER_SERVER), 0);
	assert_int_equal(chk(RGPU_MSG_ERROR, 0, 16, 0, RGPU_PEER_CLIENT), 0);

	/* replies: only to the client, only to what it may ask, never with a payload */
	assert_int_equal(chk(RGPU_MSG_CALLBACK, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_CLIENT),
			 RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_DATA, RGPU_FRAME_REPLY, 16, 0, RGPU_PEER_CLIENT), RGPU_EPROTO);
	assert_int_equal(chk(RGPU_MSG_PING, RGPU_FRAME_REPLY, 4, 0, RGPU_PEER_CLIENT), 0);
	assert_int_equal(chk(RGPU_MSG_PING, RGPU_FRAME_REPLY, 4, 0, RGPU_PEER_SERVER), RGPU_EPROTO);
	/* except a small device-to-host copy's, whose bytes may come in its reply (SHM) */
	assert_int_equal(chk(RGPU_MSG_MEMCPY_DTOH, RGPU_FRAME_REPLY, 4, 65536, RGPU_PEER_CLIENT),
			 0);
	assert_int_equal(chk(RGPU_MSG_MEMCPY_DTOH, RGPU_FRAME_REPLY, 4, 65537, RGPU_PEER_CLIENT),
			 RGPU_ETOOBIG);
	assert_int_equal(chk(RGPU_MSG_MEM_INFO, RGPU_FRAME_REPLY, 4, 1, RGPU_PEER_CLIENT),
			 RGPU_ETOOBIG);

	/* unknown types */
	assert_int_equal(chk(999, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(0, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(66, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_int_equal(chk(0xffff, 0, 16, 0, RGPU_PEER_SERVER), RGPU_EUNKNOWNTYPE);
	assert_true(rgpu_job_msgs.n >= 81); /* at least one past MSG_OCCUPANCY */
}

static void test_numbers_and_names(void **state)
{
	(void)state;
	/* the numbers the wire has always used */
	assert_int_equal(RGPU_MSG_HELLO, 1);
	assert_int_equal(RGPU_MSG_ERROR, 2);
	assert_int_equal(RGPU_MSG_GOODBYE, 3);
	assert_int_equal(RGPU_MSG_PING, 4);
	assert_int_equal(RGPU_MSG_AUTH_CHALLENGE, 6);
	assert_int_equal(RGPU_MSG_AUTH, 7);
	assert_int_equal(RGPU_MSG_CTX_CREATE, 10);
	assert_int_equal(RGPU_MSG_MEM_ALLOC, 20);
	assert_int_equal(RGPU_MSG_DATA, 27);
	assert_int_equal(RGPU_MSG_MODULE_LOAD, 30);
	assert_int_equal(RGPU_MSG_LAUNCH, 40);
	assert_int_equal(RGPU_MSG_CALLBACK_DONE, 43);
	assert_int_equal(RGPU_MSG_STREAM_CREATE, 50);
	assert_int_equal(RGPU_MSG_EVENT_ELAPSED, 65);
	assert_int_equal(RGPU_MSG_GRAPH_NODE_COUNT, 78);
	assert_int_equal(RGPU_MSG_OCCUPANCY, 80);
	assert_int_equal(RGPU_MSG_VMM_CREATE, 90);
	assert_int_equal(RGPU_MSG_VMM_ACCESS, 94);
	assert_int_equal(RGPU_MSG_TPC_MAP, 100);
	assert_int_equal(RGPU_MSG_TENSOR_MAP, 101);
	assert_string_equal(rgpu_msg_name(RGPU_MSG_LAUNCH), "MSG_LAUNCH");
	assert_string_equal(rgpu_msg_name(RGPU_MSG_CALLBACK_DONE), "MSG_CALLBACK_DONE");
	assert_string_equal(rgpu_msg_name(999), "MSG_?");
	assert_null(rgpu_msg_info(0));
	assert_null(rgpu_msg_info(9));
	assert_int_equal(RGPU_MSG_REDIRECT, 8);
	assert_null(rgpu_msg_info(999));
	assert_null(rgpu_msg_info(0xffffffffu));
}

/*
 * The handshake's bits: the same five as before the table (31), the application's virtual
 * memory (64), the queries (128), the host area (256), pitched copies (2048), arrays (4096) and
 * graphs built node by node (8192) and copies between servers' workers (32768) for what the
 * client sends, and the server's besides MSG_OUTPUT (32) and MSG_REDIRECT (512), which only it
 * sends.
 */
static void test_capabilities(void **state)
{
	(void)state;
	assert_int_equal(RGPU_CAP_HOST_CALLBACKS, 1);
	assert_int_equal(RGPU_CAP_MODULE_BY_HASH, 2);
	assert_int_equal(RGPU_CAP_GRAPHS, 4);
	assert_int_equal(RGPU_CAP_OCCUPANCY, 8);
	assert_int_equal(RGPU_CAP_LAUNCH_ATTRS, 16);
	assert_int_equal(RGPU_CAP_OUTPUT, 32);
	assert_int_equal(RGPU_CAP_VMM, 64);
	assert_int_equal(RGPU_CAP_QUERIES, 128);
	assert_int_equal(RGPU_CAP_HOST_MIRROR, 256);
	assert_int_equal(RGPU_CAP_MIGRATE, 512);
	assert_int_equal(RGPU_CAP_ATTRS_LINK, 1024);
	assert_int_equal(RGPU_CAP_PITCHED, 2048);
	assert_int_equal(RGPU_CAP_ARRAYS, 4096);
	assert_int_equal(RGPU_CAP_GRAPH_NODES, 8192);
	assert_int_equal(RGPU_CAP_PEER_COPY, 32768);
	assert_int_equal(RGPU_CAP_SHM, 65536);
	assert_int_equal(RGPU_CAPS_CLIENT,
			 31 | 64 | 128 | 256 | 1024 | 2048 | 4096 | 8192 | 32768 | 65536);
	assert_int_equal(RGPU_CAPS_SERVER,
			 63 | 64 | 128 | 256 | 512 | 1024 | 2048 | 4096 | 8192 | 32768 | 65536);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_ARENA_RELEASE)->cap, RGPU_CAP_SHM);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_PEER_DATA)->cap, RGPU_CAP_PEER_COPY);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_GRAPH_NODE)->cap, RGPU_CAP_GRAPH_NODES);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CAPTURE_DEPS)->cap, RGPU_CAP_GRAPH_NODES);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_ARRAY_CREATE)->cap, RGPU_CAP_ARRAYS);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_TEXOBJ_CREATE)->cap, RGPU_CAP_ARRAYS);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_MEMCPY_HTOD)->cap, RGPU_CAP_PITCHED);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_MEMCPY_DTOH)->cap, RGPU_CAP_PITCHED);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_REDIRECT)->call_class, RGPU_CLASS_PUSH);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_REDIRECT)->cap, RGPU_CAP_MIGRATE);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_HOST_UPDATE)->call_class, RGPU_CLASS_PUSH);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_HOST_WRITE)->cap, RGPU_CAP_HOST_MIRROR);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_TENSOR_MAP)->cap, RGPU_CAP_QUERIES);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_TPC_MAP)->call_class, RGPU_CLASS_CALL);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_VMM_MAP)->cap, RGPU_CAP_VMM);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_VMM_CREATE)->call_class, RGPU_CLASS_CALL);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_OUTPUT)->cap, RGPU_CAP_OUTPUT);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_OUTPUT)->call_class, RGPU_CLASS_PUSH);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_GRAPH_LAUNCH)->cap, RGPU_CAP_GRAPHS);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CALLBACK)->cap, RGPU_CAP_HOST_CALLBACKS);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CTX_SYNC)->cap, 0);
}

/* Every type the frame table knows has an info that agrees with its rule and with itself. */
static void test_info_consistent(void **state)
{
	(void)state;
	unsigned known = 0;
	for (unsigned t = 0; t < 0x10000; t++) {
		const struct rgpu_msg_info *m = rgpu_msg_info(t);
		const struct rgpu_msg_rule *r = t < rgpu_job_msgs.n && rgpu_job_msgs.rules[t].name
							? &rgpu_job_msgs.rules[t]
							: NULL;
		if (!r) {
			if (m)
				fail_msg("type %u has an info but no frame rule", t);
			continue;
		}
		known++;
		if (!m)
			fail_msg("%s has no info", r->name);
		assert_int_equal(m->type, t);
		assert_ptr_equal(m->rule, r);
		assert_string_equal(m->name, r->name);
		assert_int_equal(r->empty, m->body == NULL);
		switch (m->call_class) {
		case RGPU_CLASS_CALL:
		case RGPU_CLASS_POST_OR_CALL:
			if (!m->reply)
				fail_msg("%s waits for a reply that has no type", m->name);
			break;
		case RGPU_CLASS_POST:
		case RGPU_CLASS_PUSH:
			if (m->reply)
				fail_msg("%s is never answered but has a reply type", m->name);
			break;
		case RGPU_CLASS_SESSION:
			break;
		default:
			fail_msg("%s has class %d", m->name, m->call_class);
		}
		if ((m->effect == RGPU_EFFECT_NONE || m->effect == RGPU_EFFECT_SYNC) != (m->kind == 0))
			fail_msg("%s: effect %d with kind %d", m->name, m->effect, m->kind);
		if (m->call_class == RGPU_CLASS_PUSH && r->dir != RGPU_DIR_TO_CLIENT)
			fail_msg("%s is pushed but not to the client", m->name);
	}
	assert_true(known >= 48); /* the protocol 1 types; new ones add rows, never remove */
}

/* A few rows spelled out: class, bodies and state-log effect. */
static void test_info_rows(void **state)
{
	(void)state;
	const struct rgpu_msg_info *m;

	m = rgpu_msg_info(RGPU_MSG_LAUNCH);
	assert_int_equal(m->call_class, RGPU_CLASS_POST);
	assert_ptr_equal(m->body, &rgpu__launch__descriptor);
	assert_null(m->reply);
	assert_int_equal(m->effect, RGPU_EFFECT_NONE);
	assert_int_equal(m->cap, RGPU_CAP_LAUNCH_ATTRS);

	m = rgpu_msg_info(RGPU_MSG_MEM_ALLOC);
	assert_int_equal(m->call_class, RGPU_CLASS_POST_OR_CALL);
	assert_ptr_equal(m->reply, &rgpu__status__descriptor);
	assert_int_equal(m->effect, RGPU_EFFECT_CREATE);
	assert_int_equal(m->kind, ST_KIND_ALLOC);

	m = rgpu_msg_info(RGPU_MSG_MEMCPY_DTOH);
	assert_int_equal(m->call_class, RGPU_CLASS_POST_OR_CALL);
	assert_ptr_equal(m->body, &rgpu__memcpy__descriptor);

	m = rgpu_msg_info(RGPU_MSG_MODULE_LOAD);
	assert_int_equal(m->call_class, RGPU_CLASS_CALL);
	assert_ptr_equal(m->reply, &rgpu__module_load_reply__descriptor);
	assert_int_equal(m->effect, RGPU_EFFECT_CREATE);
	assert_int_equal(m->kind, ST_KIND_MODULE);

	m = rgpu_msg_info(RGPU_MSG_PING);
	assert_int_equal(m->call_class, RGPU_CLASS_CALL);
	assert_null(m->body);
	assert_ptr_equal(m->reply, &rgpu__status__descriptor);

	m = rgpu_msg_info(RGPU_MSG_HELLO);
	assert_int_equal(m->call_class, RGPU_CLASS_SESSION);
	assert_ptr_equal(m->reply, &rgpu__hello_reply__descriptor);

	m = rgpu_msg_info(RGPU_MSG_DATA);
	assert_int_equal(m->call_class, RGPU_CLASS_PUSH);

	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_CREATE)->effect, RGPU_EFFECT_CREATE);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_CREATE)->kind, ST_KIND_STREAM);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_DESTROY)->effect, RGPU_EFFECT_DESTROY);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_DESTROY)->kind, ST_KIND_STREAM);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_FUNC_SET_ATTR)->effect, RGPU_EFFECT_ATTR);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_FUNC_SET_ATTR)->kind, ST_KIND_FUNCTION);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CTX_SET_LIMIT)->effect, RGPU_EFFECT_ATTR);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CTX_SET_LIMIT)->kind, ST_KIND_CONTEXT);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_MEM_FREE)->effect, RGPU_EFFECT_DESTROY);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_MEM_FREE)->kind, ST_KIND_ALLOC);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CAPTURE_END)->kind, ST_KIND_GRAPH);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_GRAPH_INSTANTIATE)->kind, ST_KIND_GRAPH_EXEC);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_SYNC)->effect, RGPU_EFFECT_SYNC);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_CTX_SYNC)->effect, RGPU_EFFECT_SYNC);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_EVENT_SYNC)->effect, RGPU_EFFECT_SYNC);
	assert_int_equal(rgpu_msg_info(RGPU_MSG_STREAM_QUERY)->effect, RGPU_EFFECT_NONE);
}

/*
 * The executor's dispatch: a handler for every request the client sends to the server, except
 * MSG_HELLO and MSG_AUTH (the handshake reads them), MSG_ERROR (ends the session),
 * MSG_CALLBACK_DONE, MSG_ACK, MSG_HOST_MIRROR and MSG_HOST_WRITE (the reader thread consumes
 * them); nothing for types the server only sends, or does not know.
 */
static void test_srv_handlers(void **state)
{
	(void)state;
	const size_t n = sizeof(srv_handlers) / sizeof(srv_handlers[0]);
	unsigned handled = 0;

	assert_int_equal(n, rgpu_job_msgs.n);
	for (unsigned t = 0; t < n; t++) {
		const struct rgpu_msg_info *m = rgpu_msg_info(t);
		int want = m && (m->rule->dir & RGPU_DIR_TO_SERVER) && t != RGPU_MSG_HELLO &&
			   t != RGPU_MSG_AUTH && t != RGPU_MSG_ERROR && t != RGPU_MSG_CALLBACK_DONE &&
			   t != RGPU_MSG_ACK && t != RGPU_MSG_HOST_MIRROR && t != RGPU_MSG_HOST_WRITE;
		if (want != (srv_handlers[t] != NULL))
			fail_msg("%s (%u): handler %s, want %s", m ? m->name : "unknown type", t,
				 srv_handlers[t] ? "set" : "NULL", want ? "one" : "none");
		handled += want;
	}
	assert_true(handled >= 43);
	/* types that share a handler */
	assert_ptr_equal(srv_handlers[RGPU_MSG_STREAM_SYNC], srv_handlers[RGPU_MSG_STREAM_DESTROY]);
	assert_ptr_equal(srv_handlers[RGPU_MSG_CTX_SET_LIMIT], srv_handlers[RGPU_MSG_CTX_GET_LIMIT]);
	assert_ptr_equal(srv_handlers[RGPU_MSG_LAUNCH], h_launch);
	assert_null(srv_handlers[RGPU_MSG_DATA]);
	assert_null(srv_handlers[RGPU_MSG_CALLBACK]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_old_limits),
	    cmocka_unit_test(test_numbers_and_names),
	    cmocka_unit_test(test_capabilities),
	    cmocka_unit_test(test_info_consistent),
	    cmocka_unit_test(test_info_rows),
	    cmocka_unit_test(test_srv_handlers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
