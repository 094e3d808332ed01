/*
 * The state-log recorder: how a message of the job protocol changes the session's state log
 * (statetrack/include/rgpu/statetrack.h). Both sides record from the same table and the same
 * builders, so their logs agree by construction wherever both executed the same messages; a
 * digest that differs is a lost, repeated or failed message, never a different reading.
 *
 * A message's builder (proto/record.c; the generated RECORDER_build, rgpu_record.h, picks it
 * from the table's effect column) is a pure function of the decoded request and, for a call,
 * the decoded reply. It lists up to RGPU_REC_MAX operations:
 *
 *   RGPU_REC_ADD     a new record (st_add)
 *   RGPU_REC_SET     a record that may exist: added, or updated in place (an attribute set
 *                    twice keeps its first place in creation order)
 *   RGPU_REC_REMOVE  a record dies, with everything that names it (st_remove_each)
 *
 * For a call the client records when it sends (the builder sees rep NULL and lists what would
 * exist if the call succeeds) and settles when the reply comes (rgpu_rec_settle: records that
 * the reply says were not made are removed, the others get the reply's fields). The server
 * records once, after executing, with the reply it sent. A builder's removals must not depend
 * on the reply, so that a provisional removal never has to be undone.
 *
 * Ids. Objects use the client's ids. An allocation's id is its address; a window mapping's is
 * RGPU_REC_VMM_ID(addr); an attribute's is RGPU_REC_ATTR_ID(parent, key): the three spaces do
 * not meet (object ids are counters far below 2^46, addresses are below 2^48).
 *
 * A captured graph's record carries the SHA-256 of its capture journal (struct rgpu_journal):
 * the fire-and-forget work messages sent between the capture's begin and end, which is what
 * rebuilds the graph on another worker. Each side hashes the frames it saw.
 */
#ifndef RGPU_RECORD_H
#define RGPU_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu/statetrack.h"

#define RGPU_REC_MAX 3

enum rgpu_rec_op {
	RGPU_REC_ADD = 1,
	RGPU_REC_SET = 2,
	RGPU_REC_REMOVE = 3,
};

struct rgpu_rec_ops {
	int n;
	struct {
		int op;		     /* enum rgpu_rec_op */
		struct st_rec rec;   /* REMOVE: only rec.id (and rec.kind) matter */
		int journal;	     /* a captured graph: rec.hash is the journal's, filled by the side */
		int existed;	     /* SET, once applied: the record was live before... */
		uint64_t prev[ST_NFIELDS]; /* ...with these fields (settling a failed call puts
					      them back) */
	} v[RGPU_REC_MAX];
};

/* Attribute keys: what was set (ST_KIND_ATTR f[0]). */
enum rgpu_attr_space {
	RGPU_ATTR_FUNC = 1,    /* cuFuncSetAttribute / cuKernelSetAttribute: number, device */
	RGPU_ATTR_LIMIT = 2,   /* cuCtxSetLimit: number */
	RGPU_ATTR_CAPTURE = 3, /* the stream is being captured: value = CUstreamCaptureMode */
	/*
	 * The same space: number 0 is the capture, any other a CUstreamAttrID set with
	 * cuStreamSetAttribute (parent = the stream, or the context for its NULL stream); f[1..4]
	 * hold the CUstreamAttrValue's first 32 bytes (an access policy window: base_ptr,
	 * num_bytes, then hitRatio and hitProp, then missProp, as cuda.h lays them out)
	 */
	RGPU_ATTR_STREAM = 3,
	/* cache or shared-memory configuration (parent = the context or the function): number
	 * = the protocol's ConfigKind (1 cache, 2 shared memory), value = CUfunc_cache or
	 * CUsharedconfig */
	RGPU_ATTR_CONFIG = 0,
};
#define RGPU_STREAM_ATTR_BYTES 32 /* what the log and the protocol keep of a CUstreamAttrValue */
#define RGPU_ATTR_KEY(space, device, number)                                                   \
	(((uint64_t)(space) << 32) | ((uint64_t)((device) & 0xffff) << 16) | ((number) & 0xffff))
/*
 * An attribute's id packs its object's id (below 2^49), the key's space (2 bits), device (4 bits:
 * devices 0..14, and 15 for "no device") and number (8 bits: every CUfunction_attribute and
 * CUlimit is below 256).
 */
#define RGPU_REC_VMM_ID(addr) ((1ull << 62) | (uint64_t)(addr))
#define RGPU_REC_ATTR_ID(parent, key)                                                          \
	((1ull << 63) | ((uint64_t)(parent) << 14) | (((key) >> 32 & 0x3) << 12) |              \
	 (((key) >> 16 & 0xf) << 8) | ((key) & 0xff))

struct rgpu_rec_hooks {
	/* called for every record a removal takes, dependents first, before it is dropped */
	void (*removed)(const struct st_rec *rec, void *arg);
	void *arg;
};

/*
 * rgpu_rec_apply() - apply ops to log, in order.
 * @hooks: may be NULL.
 * A graph exec's record takes its graph's hash (the graph it was instantiated from: f[1]).
 * Every operation is tried; returns 0, or the first st_* error (RGPU_EEXIST for an add of a
 * live id, RGPU_ENOTFOUND for a removal of an unknown one, RGPU_EINVAL for a record st_add
 * refuses), with *failed (when given) the index of the operation that failed.
 */
int rgpu_rec_apply(struct st_log *log, struct rgpu_rec_ops *ops, const struct rgpu_rec_hooks *hooks,
		   int *failed);

/*
 * rgpu_rec_settle() - a call's reply came: `sent` are the operations applied when it was sent
 * (rep NULL), `final` the builder's answer with the reply. Records added by `sent` and absent
 * from `final` are removed (a SET that updated a live record gets its previous fields back);
 * those in both take final's fields. Returns 0 or the first error.
 */
int rgpu_rec_settle(struct st_log *log, const struct rgpu_rec_ops *sent, struct rgpu_rec_ops *final);

/* ---- graph journals ----------------------------------------------------------------------- */

/*
 * What built a graph, frame by frame, in the order the frames were sent (client) or executed
 * (server): each one as type (2 bytes), body length (4), payload length (8), all little-endian,
 * then the body and the payload. The hash covers exactly those bytes; the bytes themselves are
 * kept only when `keep` (the server, which may have to rebuild the graph).
 *
 * A capture's journal opens at its begin (keyed by the stream) and holds the work captured; at
 * its end it is kept under the graph's id and the graph's record gets its hash and its length
 * (f[3]). Later changes to the graph made node by node (MSG_GRAPH_NODE, _EDIT, _BIND) go on in
 * the same journal, and a graph made by cuGraphCreate gets a journal at its first change. An
 * executable graph's record takes the hash and the length of its graph's journal when it was
 * instantiated (f[4]): the prefix that rebuilds it. Its own changes (parameters set in the exec,
 * cuGraphExecUpdate) go into a journal kept under the exec's id. A child graph node's copy of
 * its graph is an alias: what changes it goes into the journal of the graph holding the node.
 * Journals stay after their graph dies: instantiated graphs and clones outlive it.
 */
struct rgpu_journal {
	uint64_t stream;  /* the key: the capturing stream's id, then the graph's or exec's id */
	uint64_t graph;   /* a capture: the id of the graph it builds (0: unknown) */
	uint64_t alias;   /* an alias: the graph whose journal takes its frames (no bytes of its own) */
	uint64_t total;   /* bytes added, kept or not */
	int keep;
	uint8_t *buf;
	size_t len, cap;
	void *hash_ctx;   /* a running SHA-256 */
	struct rgpu_journal *next;
};

/* Both lists of one side: open captures, and journals kept by graph or exec id. */
struct rgpu_journals {
	struct rgpu_journal *capturing, *kept;
	int keep; /* keep the bytes (the worker) or only hash them (the client) */
};

/* rgpu_journal_new() - an empty journal for stream; NULL when out of memory. */
struct rgpu_journal *rgpu_journal_new(uint64_t stream, int keep);
/* rgpu_journal_add() - one frame. Returns 0 or RGPU_ENOMEM (the journal then stays as it was). */
int rgpu_journal_add(struct rgpu_journal *j, uint16_t type, const void *body, size_t blen,
		     const void *payload, size_t plen);
/* rgpu_journal_digest() - the SHA-256 of everything added so far (the journal goes on). */
void rgpu_journal_digest(struct rgpu_journal *j, uint8_t out[32]);
void rgpu_journal_free(struct rgpu_journal *j);
/* rgpu_journals_free() - both lists. */
void rgpu_journals_free(struct rgpu_journals *js);
/* rgpu_journals_kept() - the journal kept under id (an alias followed), or NULL. */
struct rgpu_journal *rgpu_journals_kept(struct rgpu_journals *js, uint64_t id);

/*
 * rgpu_journals_step() - keep the journals in step with one frame, the same way on both sides:
 * a capture's begin (when ops, its records, made one) opens a journal for its stream; its end
 * closes it, puts its hash and length in the captured graph's record (the op marked `journal`)
 * and keeps it under the graph's id; an instantiation gives the exec's record its graph's hash
 * and length; a clone's record gets its source's; a frame of work goes into every open capture
 * journal. The frames that change a graph node by node (rgpu_journal_edits()) are stepped by
 * their sender only once they succeeded: the worker after executing them, the client when the
 * reply came (a post: when sent).
 * @req: the decoded request (needed for every type but plain work); @body, @blen, @payload,
 * @plen: the frame as sent. Returns 0, or RGPU_ENOMEM when a journal could not be opened or
 * misses this frame (the caller logs it).
 */
int rgpu_journals_step(struct rgpu_journals *js, unsigned type, const ProtobufCMessage *req,
		       const void *body, size_t blen, const void *payload, size_t plen,
		       struct rgpu_rec_ops *ops);

/*
 * rgpu_journal_wants() - is a frame of this type part of a capture: fire-and-forget work that
 * changes no record (launches, copies, memsets, host functions, event records and waits).
 */
int rgpu_journal_wants(unsigned type);

/* rgpu_journal_edits() - is it a frame that changes a graph or an exec node by node. */
int rgpu_journal_edits(unsigned type);

/* The stream id that names, in the frames of a MSG_GRAPH_NODE, the stream they are captured on. */
#define RGPU_NODE_STREAM (~0ull - 1)

#endif
