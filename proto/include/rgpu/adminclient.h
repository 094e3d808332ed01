/*
 * The client side of the admin protocol (proto/admin.tbl, docs/protocol.md): rgpuctl asking a
 * server, and a server asking another one (a checkpoint pushed to a migration's target). A
 * conversation is one connection: its first request carries the client's nonce when there is
 * an operator key, the server's challenge is answered, and the first reply must carry the
 * server's proof; later requests on the same connection are covered by that exchange. Replies
 * may be preceded by PROGRESS frames, handed to a callback.
 */
#ifndef RGPU_ADMINCLIENT_H
#define RGPU_ADMINCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct rgpu_key;
struct rgpu_tls;
struct Rgpu__Progress;

/* How to reach servers: the operator key (NULL or len 0: none) and TLS (NULL: plaintext). */
struct rgpu_admin_peer {
	const struct rgpu_key *key;
	struct rgpu_tls *tls;
	const char *tls_name; /* the name the certificate must carry; NULL: the host asked */
	int send_timeout_ms;  /* a send the server takes no byte of for this long fails (0: none) */
};

#define RGPU_ADMIN_TIMEOUT_MS 5000     /* a short request's reply */
#define RGPU_ADMIN_LONG_TIMEOUT_MS 600000 /* the longest silence in a long operation */

struct rgpu_admin;

/*
 * rgpu_admin_open() - connect to the admin address `server` (HOST:PORT). Returns 0, or an
 * RGPU_E* code with err filled for the operator.
 */
int rgpu_admin_open(const struct rgpu_admin_peer *p, const char *server, struct rgpu_admin **out,
		    char *err, size_t errlen);

typedef void (*rgpu_admin_progress_fn)(const struct Rgpu__Progress *pr, void *arg);

/*
 * rgpu_admin_call() - send request `type` (body req, whose first fields are AdminRequest's:
 * version and client_nonce are set here; a payload may follow) and wait for its reply, unpacked
 * with desc into *rep (free it with protobuf_c_message_free_unpacked). PROGRESS frames before it
 * go to progress (may be NULL). A reply payload, if any, is read into a malloc'd *payload of
 * *plen bytes (payload NULL: none is accepted). timeout_ms bounds each wait for a frame.
 * Returns 0, or an RGPU_E* code with err filled: RGPU_EAUTH (the server did not prove the
 * key, or refused ours), RGPU_ENOTFOUND, RGPU_EBUSY, RGPU_EUNSUPPORTED or RGPU_ECORRUPT (it
 * refused the request
 * for that reason), RGPU_EPROTO (it refused it otherwise: err holds its message), transport
 * errors.
 */
int rgpu_admin_call(struct rgpu_admin *a, uint16_t type, ProtobufCMessage *req,
		    const void *payload, uint64_t plen, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **rep, void **rpayload, uint64_t *rplen,
		    rgpu_admin_progress_fn progress, void *parg, int timeout_ms, char *err,
		    size_t errlen);

/* rgpu_admin_post() - a request without a reply (CHUNK) on an authenticated conversation */
int rgpu_admin_post(struct rgpu_admin *a, uint16_t type, const ProtobufCMessage *m,
		    const void *payload, uint64_t plen);

/*
 * rgpu_admin_take_error() - after a send failed: the ERROR frame the server sent before it
 * closed, if one comes within timeout_ms. Returns its code (err: its message), or 0.
 */
int rgpu_admin_take_error(struct rgpu_admin *a, int timeout_ms, char *err, size_t errlen);

/* rgpu_admin_server() - the address this conversation was opened to */
const char *rgpu_admin_server(const struct rgpu_admin *a);

void rgpu_admin_close(struct rgpu_admin *a);

/*
 * rgpu_admin_once() - open, call, close: a short request to one server (status, jobs).
 */
int rgpu_admin_once(const struct rgpu_admin_peer *p, const char *server, uint16_t type,
		    ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **rep, rgpu_admin_progress_fn progress, void *parg,
		    int timeout_ms, char *err, size_t errlen);

/*
 * Helpers for the servers' side of a long operation: send a PROGRESS frame (errors ignored: a
 * gone client is noticed at the reply), and an admin request's first fields.
 */
struct rgpu_conn;
/* rgpu_admin_error() - the server's side: refuse or end a request, MSG_ERROR {code, message} */
int rgpu_admin_error(struct rgpu_conn *c, int code, const char *message);
void rgpu_admin_progress(struct rgpu_conn *c, const char *phase, uint64_t done, uint64_t total,
			 const char *unit);

#endif
