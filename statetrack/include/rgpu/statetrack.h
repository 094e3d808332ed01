/*
 * The state log: the replayable record of one session (design.md §6).
 *
 * A log is a table of the session's LIVE objects in creation order. Creating an object adds a
 * record; destroying it removes the record, so a freed allocation leaves no trace and the log
 * stays as small as the session's live state. Walking the table in creation order (st_foreach)
 * is replay order: a fresh worker that re-creates every record in that order rebuilds the
 * session with the same ids and the same device addresses. The interposer keeps one log per
 * session and the server's worker keeps another for the calls it executes; at a migration
 * switchover their digests (st_digest) must agree. Checkpoints store the serialized log.
 *
 * Records and references
 * ----------------------
 * Every record has a kind, an id (chosen by the client, unique among the session's live
 * objects, never 0), a parent id, a context id and kind-specific fields (below). `parent` and
 * `ctx` are 0 or the id of a live record created earlier; st_add refuses anything else, so
 * creation order always puts an object after everything it refers to. Removing a record
 * removes, with it, every live record that names it (directly or through others) as parent or
 * context, as CUDA does: unloading a module invalidates its functions and globals, destroying
 * a context destroys its streams, events and modules. Objects that outlive what
 * they were made from in CUDA (a graph exec outlives its graph) must be recorded with parent 0.
 *
 * Kind-specific fields (st_rec.f[], also reachable by name through the union below):
 *
 *   kind              parent          ctx   f[0]      f[1]       f[2]     f[3]   name hash
 *   1  context        -               -     device    flags      primary  -      -    -
 *   2  allocation     -               opt.  addr      size       device   flags  -    -
 *   3  VMM mapping    -, phys. mem.   opt.  addr      size       device   offset -      -
 *   4  module         -               opt.  size      library    -        -      -    yes
 *   5  function       module, kernel  opt.  how      -          -        -      yes  -
 *   6  kernel         library         opt.  how      -          -        -      yes  -
 *   7  global         module          opt.  addr      size       -        -      yes  -
 *   8  stream         -               ctx   flags     priority   -        -      -    -
 *   9  event          -               ctx   flags     -          -        -      -    -
 *   10 memory pool    -               opt.  device    -          -        -      -    -
 *   11 graph          -               opt.  flags     stream     mode     -      -    opt.
 *   12 graph exec     -               opt.  flags     graph      stream   mode   -    opt.
 *   13 host callback  any (stream)    opt.  fn        user       -        -      -    -
 *   14 attribute      any (required)  opt.  key       value      -        -      -    -
 *   15 physical mem.  -               opt.  size      device     -        -      -    -
 *   16 array          -, mipmap       ctx   width     height     depth    fmt    -    -
 *   17 mipmap array   -               ctx   width     height     depth    fmt    -    -
 *   18 tex/surf obj.  -               ctx   value     surface    has_view res.   yes  -
 *
 * A VMM mapping also has f[4], access (below); an array and a mipmapped array also have
 * f[4], flags, and f[5], level (array) or levels (mipmapped array).
 *
 * In the ctx column, "ctx" is the context the object was created in and "opt." means 0 where
 * CUDA ties the object to no context (libraries, graphs); the log enforces only that a non-zero
 * ctx names a live context. rgpu's allocations are ranges of the device address window, which
 * belong to the device rather than to a context: they are recorded with ctx 0. A function's or
 * kernel's "how" is the protocol's FuncKind (looked up in a module, a library's kernel, a
 * kernel's function in a context); a graph exec's "graph" is the graph it was instantiated
 * from (which it outlives: not its parent), whose hash, capture stream and mode it carries so
 * that it can be rebuilt after its graph is gone.
 *
 * "module" covers libraries too (library = 1; cuLibraryLoad*), since both are an image named
 * by its SHA-256. A module must carry its hash; a function, kernel or global must carry a name
 * and a parent: a module, or for a function also a kernel (cuKernelGetFunction gives the
 * per-context function of a library's kernel); an attribute must carry a parent, of any kind;
 * a VMM mapping's parent, if any, must be physical memory; a non-zero ctx must be a context. The log does not interpret the other fields: both sides
 * must simply fill them the same way for their digests to agree. Their meaning:
 *
 *   context      primary = 1 for a retained primary context (cuDevicePrimaryCtxRetain), 0 for
 *                one made by cuCtxCreate.
 *   VMM mapping  addr, size: the mapped range; device: where its physical memory lives. A
 *                mapping the window allocator made for its own allocations has parent 0 and
 *                owns its physical memory (offset and access 0: read-write for its device).
 *                One the application made (cuMemMap) has as parent the physical memory it
 *                maps (kind 15), offset: where in it the mapping starts, and access: what
 *                cuMemSetAccess granted, 2 bits per device (bits 2d..2d+1 for device d: 0 none,
 *                1 read, 3 read-write, the CUmemAccess_flags values), 0 until it is set.
 *   array        a CUDA array (cuArray3DCreate): its CUDA_ARRAY3D_DESCRIPTOR, with fmt the
 *                format in bits 0..31 and the number of channels in bits 32..63. A level of
 *                a mipmapped array (cuMipmappedArrayGetLevel) has that array as parent and
 *                level its number; it goes with its mipmapped array.
 *   mipmap array the descriptor of level 0 as for an array, and levels, its number of levels.
 *   tex/surf     a texture object (surface 0) or surface object (surface 1); value: the
 *   object       64-bit handle the driver returned, which the program may have stored
 *                anywhere, so it cannot be translated: a replay must get the same value
 *                again (design.md §3). res.: the id of the array or mipmapped array it reads,
 *                0 for linear memory; not its parent, since a program may free the array
 *                before the object. has_view: a resource view was given. name: its
 *                descriptors, as the protocol carries them
 *                (TexCreate.desc: hexadecimal text), which is what a replay sends again.
 *   physical     memory the application made with cuMemCreate: size bytes on device. Its
 *   memory       mappings name it as parent; it lives until its last handle reference is
 *                released and its last mapping is gone (the client says which message ends
 *                it: the release, or the last unmap).
 *   graph        flags: as given to cuGraphCreate (0 for a captured graph); stream: the id of
 *                the stream that was captured, 0 for a graph made by cuGraphCreate; mode: the
 *                capture mode (CUstreamCaptureMode); hash: for a captured graph, the SHA-256 of
 *                its capture journal (the calls recorded between begin and end of capture).
 *   attribute    an attribute or limit the application set on a live object: a function
 *                attribute (cuFuncSetAttribute, parent = the function), a context limit
 *                (cuCtxSetLimit, parent = the context), a stream attribute (cuStreamSetAttribute,
 *                parent = the stream, or the context for its NULL stream; f[1..4] hold the
 *                value's first 32 bytes), a cache or shared-memory configuration (parent = the
 *                context or the function). key: which one (rgpu/record.h packs it); value: what
 *                it was set to. Removing the object removes the attribute with it.
 *
 * A global's addr is the address the app was given (it cannot be placed; it is verified after
 * replay, design.md §3). Unused fields should be 0; they are stored and digested as given.
 * An empty name is no name (st_add stores NULL).
 *
 * Streams: one layout for snapshots and journals
 * ----------------------------------------------
 * A stream is a header and then frames, each frame one record (all integers little-endian):
 *
 *   header (ST_STREAM_HDR_LEN = 24 bytes)
 *     offset size field
 *          0    4 magic     ST_STREAM_MAGIC 0x54534752 ("RGST" in memory order)
 *          4    2 version   ST_STREAM_VERSION
 *          6    2 flags     ST_STREAM_OPEN: a journal, more frames may follow
 *          8    8 count     frames the writer put after the header (sealed snapshot), or the
 *                           frames of the journal's starting snapshot (open; 0 for a new one)
 *         16    4 reserved  0
 *         20    4 hdr_crc   CRC-32 (zlib) of bytes 0..19
 *
 *   frame (ST_FRAME_HDR_LEN = 8 bytes + body)
 *          0    4 len       body bytes, 1 .. ST_BODY_MAX
 *          4    4 crc       CRC-32 (zlib) of bytes 0..3 (the length) followed by the body
 *          8  len body      rgpu.StRecord (proto/statetrack.proto), protobuf-c
 *
 * Replaying a stream applies its frames in order to an empty log: a record whose id is not live
 * is created (st_add), a record whose id is live replaces that record's fields in place
 * (st_update: its place in creation order is kept), and a tombstone (kind 0, only the id set)
 * removes the record and its dependents (st_remove). A sealed snapshot (st_serialize) is the
 * live table with no tombstones and no repeated ids. A journal is appended to as the session
 * runs: write a header once (st_journal_header, or st_serialize_journal to start from the
 * current table, which is also how a journal is compacted), then after every successful
 * st_add or st_update append st_serialize_rec() of the record as stored, and after every
 * st_remove append st_serialize_tombstone() of the id. Replaying the file gives the live table.
 *
 * Torn tails. A frame whose length is 0, beyond ST_BODY_MAX or beyond the bytes left, or
 * whose CRC fails, ends the stream: everything before it is kept and st_load_result says how
 * many bytes were valid (an appender truncates the file there before writing again). A frame
 * that passes its CRC but cannot be applied (bad protobuf, a reference to a record that is not
 * live, a duplicate id in a sealed snapshot) is corruption, not a torn write: the whole load
 * fails. A bad magic or version fails before anything is built.
 *
 * Thread safety: none inside. A log is used by one thread at a time (callers lock); distinct
 * logs are independent. The stream functions that take no log are reentrant.
 */
#ifndef RGPU_STATETRACK_H
#define RGPU_STATETRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Record kinds: the numbers cross process and file boundaries. Never renumber or reuse. */
enum st_kind {
	ST_KIND_TOMBSTONE = 0, /* in streams only: "id died" */
	ST_KIND_CONTEXT = 1,
	ST_KIND_ALLOC = 2,
	ST_KIND_VMM_MAP = 3,
	ST_KIND_MODULE = 4,
	ST_KIND_FUNCTION = 5,
	ST_KIND_KERNEL = 6,
	ST_KIND_GLOBAL = 7,
	ST_KIND_STREAM = 8,
	ST_KIND_EVENT = 9,
	ST_KIND_MEMPOOL = 10,
	ST_KIND_GRAPH = 11,
	ST_KIND_GRAPH_EXEC = 12,
	ST_KIND_HOST_CALLBACK = 13,
	ST_KIND_ATTR = 14,
	ST_KIND_PHYSMEM = 15, /* physical memory made by the application (cuMemCreate) */
	ST_KIND_ARRAY = 16,   /* a CUDA array, or a level of a mipmapped array */
	ST_KIND_MIPMAP = 17,  /* a mipmapped array */
	ST_KIND_TEXOBJ = 18,  /* a texture or surface object */
};
#define ST_KIND_MAX ST_KIND_TEXOBJ

#define ST_NFIELDS 6	   /* kind-specific u64 slots; room for two more per kind */
#define ST_HASH_LEN 32	   /* SHA-256 */
#define ST_DIGEST_LEN 32   /* SHA-256 */
#define ST_NAME_MAX 65536u /* bytes of a name, without its NUL (long C++ template names) */

#define ST_STREAM_MAGIC 0x54534752u
#define ST_STREAM_VERSION 1
#define ST_STREAM_HDR_LEN 24
#define ST_STREAM_OPEN 0x1u
#define ST_FRAME_HDR_LEN 8
#define ST_BODY_MAX (ST_NAME_MAX + 1024u) /* a record's protobuf body, at most */

struct st_rec {
	uint32_t kind; /* enum st_kind */
	uint64_t id;
	uint64_t parent;
	uint64_t ctx;
	/* clang-format off */
	union {
		uint64_t f[ST_NFIELDS];
		struct { uint64_t device, flags, primary; } context;
		struct { uint64_t addr, size, device, flags; } alloc;
		struct { uint64_t addr, size, device, offset, access; } vmm;
		struct { uint64_t size, library; } module;
		struct { uint64_t addr, size; } global;
		struct { uint64_t flags; int64_t priority; } stream;
		struct { uint64_t flags; } event;
		struct { uint64_t device; } pool;
		struct { uint64_t flags, stream, mode; } graph;
		struct { uint64_t flags; } graph_exec;
		struct { uint64_t fn, user; } host_cb;
		struct { uint64_t key, value; } attr;
		struct { uint64_t size, device; } physmem;
		struct { uint64_t width, height, depth, format, flags, level; } array;
		struct { uint64_t value, surface, has_view, resource; } texobj;
	};
	/* clang-format on */
	const char *name; /* NUL-terminated, or NULL */
	bool has_hash;
	uint8_t hash[ST_HASH_LEN]; /* all zero when !has_hash, in records the log returns */
};

struct st_log;

/*
 * st_log_new() - an empty log.
 * @out: receives the log; free it with st_log_free().
 * Returns 0, RGPU_EINVAL (out is NULL) or RGPU_ENOMEM.
 */
int st_log_new(struct st_log **out);

/* st_log_free() - free the log and every record in it. NULL is allowed. */
void st_log_free(struct st_log *log);

/*
 * st_add() - record a newly created object at the end of creation order.
 * @rec: copied, name included; the caller keeps ownership of it.
 * Returns 0 or
 *   RGPU_EINVAL    a NULL argument, kind 0 or unknown, id 0, a function/kernel/global without
 *                  a name, a kernel/global whose parent is not a module, a function whose
 *                  parent is neither a module nor a kernel, a VMM mapping whose parent is
 *                  not physical memory, an attribute without a parent, a
 *                  module without a hash, or a ctx that is not a context;
 *   RGPU_ETOOBIG   a name longer than ST_NAME_MAX;
 *   RGPU_EEXIST    a live record has this id;
 *   RGPU_ENOTFOUND parent or ctx is not 0 and not a live record;
 *   RGPU_ENOMEM.
 * On error the log is unchanged.
 */
int st_add(struct st_log *log, const struct st_rec *rec);

/*
 * st_update() - change the fields of a live record that CUDA lets change (a context's flags,
 * a stream's priority, ...): f[], name and hash are replaced; its place in creation order is
 * kept. kind, parent and ctx must be the stored ones.
 * Returns 0, RGPU_ENOTFOUND (no live record with rec->id), RGPU_EINVAL (NULL argument, or kind,
 * parent or ctx differ, or the result breaks a rule of st_add), RGPU_ETOOBIG or RGPU_ENOMEM.
 * On error the record is unchanged.
 */
int st_update(struct st_log *log, const struct st_rec *rec);

/*
 * st_remove() - the object died: drop its record and, with it, every live record that names
 * it as parent or ctx, transitively. O(1) for a record nothing refers to (an allocation, an
 * event); a record with dependents costs a walk over the records created after it.
 * Returns 0, RGPU_EINVAL (log is NULL) or RGPU_ENOTFOUND (no live record with this id).
 * Same as st_remove_each(log, id, NULL, NULL).
 */
int st_remove(struct st_log *log, uint64_t id);

/*
 * st_remove_each() - st_remove(), telling the caller what went: for each record it removes,
 * fn is called once with that record, just before it is freed (so that a caller can release
 * what it keeps for the object, or journal it). The order is the order of freeing: the
 * dependents first, newest first (reverse creation order), and the record named by id last.
 * @fn: may be NULL (then this is st_remove). fn must not change the log; while it runs, the
 *      records freed before it are already gone from the log.
 * @arg: passed to fn.
 * Returns 0, RGPU_EINVAL (log is NULL) or RGPU_ENOTFOUND (no live record with this id; fn is
 * not called).
 */
int st_remove_each(struct st_log *log, uint64_t id, void (*fn)(const struct st_rec *rec, void *arg),
		   void *arg);

/*
 * st_find() - the live record with this id, or NULL. The pointer (and its name) stays valid
 * until that record is updated or removed, or the log is freed.
 */
const struct st_rec *st_find(struct st_log *log, uint64_t id);

/* st_count() - the number of live records. */
size_t st_count(struct st_log *log);

/*
 * st_foreach() - call fn on every live record in creation order (= replay order).
 * fn must not change the log. A non-zero return from fn stops the walk and is returned.
 * Returns 0 after a full walk, fn's non-zero value, or RGPU_EINVAL for a NULL log or fn.
 */
int st_foreach(struct st_log *log, int (*fn)(const struct st_rec *rec, void *arg), void *arg);

/*
 * st_digest() - SHA-256 over a canonical encoding of the live records in creation order
 * (fixed-width little-endian fields, independent of protobuf). Two logs agree iff they hold
 * the same records with the same field values created in the same relative order; how they
 * got there (objects created and freed in between) does not matter.
 */
void st_digest(struct st_log *log, uint8_t out[ST_DIGEST_LEN]);

/*
 * st_compare() - where two logs part: walk both in creation order and compare, record by
 * record, exactly what st_digest() covers (kind, id, parent, ctx, f[], name, hash), so that
 * st_compare() is 0 iff the digests are equal. Meant for the switchover, to say which record
 * differs when the digests do not agree.
 * @index: receives the position (0-based, creation order) of the first record that differs;
 *         st_count(a) when the logs are equal.
 * @ra, @rb: receive the records of a and b at that position, NULL where that log has no record
 *           there (it is shorter); both NULL when the logs are equal. They stay valid as
 *           st_find()'s do.
 * Any of index, ra, rb may be NULL.
 * Returns 0 (equal), 1 (they differ) or RGPU_EINVAL (a or b is NULL; nothing is written).
 */
int st_compare(struct st_log *a, struct st_log *b, size_t *index, const struct st_rec **ra,
	       const struct st_rec **rb);

/* st_kind_name() - "allocation", "module", ... for logs; "?" for an unknown kind. */
const char *st_kind_name(uint32_t kind);

/*
 * st_rec_describe() - one line (no newline) for logs, such as
 *     stream id=12 ctx=3 flags=0x1 priority=-1
 *     allocation id=0x600000000000 addr=0x600000000000 size=4096 device=0
 *     function id=7 parent=5 name="vecadd"
 *     module id=5 size=10240 library=0 hash=3fa1c2d4e5f6...
 * The kind's name, the id, parent and ctx (these two only when non-zero), the kind's fields
 * under their names in the table above, then name and hash where present. Ids print in
 * decimal below 2^32 and in hex from there (an allocation's id is its address); addresses,
 * flags, fn, user and a mapping's access in hex; flags, access and a mapping's offset only
 * when non-zero; other fields in decimal (priority signed). A slot the kind does not name prints as f[i]=0x... when non-zero. A name prints in
 * quotes, cut to its first 64 characters (then followed by ...), control characters as '?';
 * a hash as its first 12 hex digits and .... An unknown kind prints as kind=N; a NULL rec
 * as "nothing".
 * @buf, @n: where to write; at most n bytes, NUL included (as snprintf; buf may be NULL when
 *           n is 0).
 * Returns the length of the whole line, without its NUL, as snprintf does: the line was cut
 * when this is n or more.
 */
int st_rec_describe(const struct st_rec *rec, char *buf, size_t n);

/*
 * st_serialize() - a sealed snapshot of the live table: header (count = st_count) and one
 * frame per record in creation order.
 * @buf, @len: receive a malloc'd buffer (the caller frees it) and its length.
 * Returns 0, RGPU_EINVAL or RGPU_ENOMEM.
 */
int st_serialize(struct st_log *log, uint8_t **buf, size_t *len);

/*
 * st_serialize_journal() - the same frames under an open header (ST_STREAM_OPEN, count =
 * st_count): the start of a journal that holds the current table, to which st_serialize_rec
 * and st_serialize_tombstone frames are then appended. Writing it to a new file and renaming
 * that over the old journal compacts the journal.
 * Returns 0, RGPU_EINVAL or RGPU_ENOMEM.
 */
int st_serialize_journal(struct st_log *log, uint8_t **buf, size_t *len);

/* st_journal_header() - the header of a new, empty journal (open, count 0). */
void st_journal_header(uint8_t out[ST_STREAM_HDR_LEN]);

/*
 * st_frame_size() - bytes st_serialize_rec() writes for this record (header included), or 0
 * when the record cannot be encoded (see st_serialize_rec's RGPU_EINVAL and RGPU_ETOOBIG).
 */
size_t st_frame_size(const struct st_rec *rec);

/*
 * st_serialize_rec() - encode one record as one frame, for appending to a journal.
 * A tombstone (kind 0) is encoded with its id only.
 * @buf, @cap: where to write; @len: receives the frame's length (also when it does not fit).
 * Returns 0, RGPU_EINVAL (NULL rec or len, unknown kind, id 0, a hash-less module...: the
 * rules of st_add that need no log), RGPU_ETOOBIG (name beyond ST_NAME_MAX) or RGPU_ENOSPC
 * (cap is smaller than *len; nothing written).
 */
int st_serialize_rec(const struct st_rec *rec, uint8_t *buf, size_t cap, size_t *len);

/* st_serialize_tombstone() - st_serialize_rec() of a tombstone for id (at most 20 bytes). */
int st_serialize_tombstone(uint64_t id, uint8_t *buf, size_t cap, size_t *len);

struct st_load_result {
	uint64_t records;   /* frames applied (creations, updates and tombstones) */
	size_t valid_bytes; /* the stream up to the end of the last frame applied; 0 when the
			       header itself was cut (a journal must be started again) */
	bool torn;	    /* the stream ended early: a cut or failed frame at valid_bytes, or
			       fewer frames than the header's count */
	bool open;	    /* the header says ST_STREAM_OPEN (a journal) */
};

/*
 * st_deserialize() - replay a stream into a new log.
 * @buf, @len: the stream (buf may be NULL when len is 0).
 * @out: receives the log (also when torn, if res is given); free it with st_log_free().
 * @res: receives what was read. NULL means "all or nothing": a torn stream is then refused
 *       with RGPU_ECORRUPT, as a checkpoint restore wants.
 * Returns 0 or, with no log built:
 *   RGPU_EINVAL       NULL out, or NULL buf with len > 0;
 *   RGPU_EMAGIC       not a state-log stream;
 *   RGPU_EVERSION     another format version;
 *   RGPU_EUNSUPPORTED unknown header flags, record kind or more fields than ST_NFIELDS
 *                     (written by a newer rgpu);
 *   RGPU_ECORRUPT     a header CRC failure, a frame that passes its CRC but cannot be
 *                     decoded or applied, bytes after a sealed snapshot's last frame, or a
 *                     torn stream when res is NULL;
 *   RGPU_ENOMEM.
 */
int st_deserialize(const uint8_t *buf, size_t len, struct st_log **out, struct st_load_result *res);

#endif
