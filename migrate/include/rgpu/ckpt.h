/*
 * A checkpoint's layout beyond the store (docs/formats.md, "Checkpoints"): the metadata
 * (CkptMeta, proto/checkpoint.proto) of a manifest, whose blobs name runs of the manifest's
 * chunk list, and the push of a checkpoint from one server's store into another's (the admin
 * protocol's PUSH, CHUNK and PUSH_DONE), on which restores and migrations to another server
 * stand. Nothing here touches a GPU: the worker fills and reads device memory (server/ckpt.c,
 * server/restore.c).
 */
#ifndef RGPU_CKPT_H
#define RGPU_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "rgpu/hash.h"
#include "rgpu/adminclient.h"
#include "rgpu/frame.h"

#define RGPU_CKPT_FORMAT 1u

struct Rgpu__CkptMeta;
struct Rgpu__CkptInfo;
struct Rgpu__PushRequest;
struct Rgpu__PushReply;
struct rgpu_store;
struct rgpu_conn;

/* rgpu_ckpt_nchunks() - the chunks a blob of size bytes takes (the last one may be short) */
static inline uint64_t rgpu_ckpt_nchunks(uint64_t size)
{
	return (size + RGPU_CHUNK_MAX - 1) / RGPU_CHUNK_MAX;
}

/*
 * rgpu_ckpt_meta_decode() - unpack a manifest's metadata and check it against its list of n
 * chunks: the format, every blob a known kind with the chunk count its size needs, inside the
 * list; a device blob inside the window it names, 2 MiB aligned; the job's devices numbered
 * within a client's 16 (device_base). Returns 0 with *out set (free
 * it with rgpu__ckpt_meta__free_unpacked), RGPU_EVERSION (another format) or RGPU_ECORRUPT,
 * with why saying what is wrong.
 */
int rgpu_ckpt_meta_decode(const void *buf, size_t len, size_t n, struct Rgpu__CkptMeta **out,
			  char *why, size_t whylen);

/* rgpu_ckpt_blob_of() - what chunk i of the checkpoint holds, for messages ("device memory at
 * 0x...", "the state log"): into out, which it returns */
const char *rgpu_ckpt_blob_of(const struct Rgpu__CkptMeta *m, size_t i, char *out, size_t len);

/*
 * rgpu_ckpt_is_live() - whether m is a live migration round's (CkptMeta.live_round, or device
 * hashes in its metadata): its device memory went GPU to GPU and is not in any store.
 */
int rgpu_ckpt_is_live(const struct Rgpu__CkptMeta *m);

/* rgpu_ckpt_info() - what `rgpuctl checkpoints` shows of checkpoint id, from its metadata */
void rgpu_ckpt_info(const struct Rgpu__CkptMeta *m, uint64_t id, size_t nchunks,
		    struct Rgpu__CkptInfo *info);

/*
 * rgpu_ckpt_load() - checkpoint id of store s, checked: its metadata (decoded as above) and
 * its chunk list (malloc'd). Returns 0, RGPU_ENOTFOUND, RGPU_ECORRUPT or RGPU_EVERSION with
 * why filled ("checkpoint 7: ..."), or RGPU_ENOMEM.
 */
int rgpu_ckpt_load(struct rgpu_store *s, uint64_t id, struct Rgpu__CkptMeta **meta,
		   uint8_t **hashes, size_t *n, char *why, size_t whylen);

/*
 * rgpu_ckpt_verify() - read every chunk of checkpoint id and check that it decodes to bytes
 * with its hash, on nthreads threads; progress(done, total, arg) now and then. *chunks,
 * *bytes: what was checked. Returns 0, or RGPU_ECORRUPT / RGPU_ENOTFOUND with why naming the
 * first chunk that failed (its index, hash and blob), or another error.
 */
int rgpu_ckpt_verify(struct rgpu_store *s, uint64_t id, unsigned nthreads,
		     void (*progress)(uint64_t done, uint64_t total, void *arg), void *parg,
		     uint64_t *chunks, uint64_t *bytes, char *why, size_t whylen);

/* What a push carries besides the checkpoint. */
struct rgpu_push_opts {
	int restore;                 /* the target restores it once stored */
	int stage;                   /* live migration: restored but not served, more rounds come */
	const uint8_t *token;        /* the job's current resume token (32 bytes), or NULL */
	const uint8_t *token_prev;   /* and the one before, or NULL */
	const char *client_address;  /* where its client will find the target, or NULL */
	/*
	 * a live round's checkpoint (its device memory is not in the store): where the PUSH_DONE
	 * reply's bitmap of the device chunks the target wants goes (malloc'd). NULL: such a
	 * checkpoint is refused.
	 */
	void **want;
	uint64_t *want_len;
	/* the longest the target may stay silent (no reply, no progress) before the push fails
	 * with RGPU_ETIMEDOUT; 0: RGPU_ADMIN_LONG_TIMEOUT_MS. A target reports progress at least
	 * every RGPU_PUSH_HEARTBEAT_MS while it works on a push (its silent phases: the commit,
	 * rebuilding the job), so a limit above that tells a stall from work. */
	int silence_ms;
};
#define RGPU_PUSH_HEARTBEAT_MS 500

/*
 * rgpu_push_send() - push checkpoint id of store s to the server at the other end of a: the
 * manifest, then the chunks the target lacks, then the end, after which the target commits it
 * to its own store and (opts->restore) restores it. progress gets the target's and this
 * side's progress. *rep: the target's reply (free with rgpu__push_reply__free_unpacked). *sent,
 * *sent_bytes: chunks and stored bytes sent. Returns 0, or an RGPU_E* code with err filled.
 */
int rgpu_push_send(struct rgpu_admin *a, struct rgpu_store *s, uint64_t id,
		   const struct rgpu_push_opts *opts, rgpu_admin_progress_fn progress, void *parg,
		   struct Rgpu__PushReply **rep, uint64_t *sent, uint64_t *sent_bytes, char *err,
		   size_t errlen);

/*
 * rgpu_push_receive() - the target's side, after the PUSH request req (header h; its payload,
 * the chunk list, is still on c): answer which chunks are missing (server_proof in the reply
 * when the request was authenticated), take the CHUNK frames into store s, checking each one
 * decodes to its hash, and at PUSH_DONE commit the checkpoint: *id is its id here. The
 * PUSH_DONE's reply is the caller's (after its restore). Returns 0, or an RGPU_E* code with why
 * filled (the PushNeed or the connection already says so to the peer where it can).
 */
int rgpu_push_receive(struct rgpu_conn *c, const struct rgpu_frame_hdr *h,
		      const struct Rgpu__PushRequest *req, const uint8_t *proof,
		      struct rgpu_store *s, uint64_t *id, uint64_t *done_seq, char *why,
		      size_t whylen);

#endif
