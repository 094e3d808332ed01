/*
 * The coherence protocol of managed memory, on its own (managed.c does the I/O; the unit test
 * drives it with a simulated device). A managed range is device memory in the window; this
 * process holds a CPU copy of it at the same address, in blocks of MM_BLOCK bytes, each in one
 * of three states:
 *
 *   INVALID  the CPU copy may be stale: the block is not accessible (PROT_NONE), and the first
 *            touch faults; the fault fetches it (and the INVALID blocks after it, read-ahead)
 *   VALID    the CPU copy was equal to the device's when `hash` was taken; readable and
 *            writable with no fault, so writes are found by hashing again (a changed hash is a
 *            dirty block), never by a write fault: system calls can read and write it too
 *   FRESH    a new range: zero on both sides, and untouched while the kernel reports none of its
 *            pages resident, so a flush skips it without hashing; otherwise as VALID with the
 *            hash of zeros
 *
 * Before any work that may read device memory, every dirty block is sent (mm_flush); before any
 * work that may write it, the blocks it may write become INVALID (mm_invalidate). A block is
 * hashed and sent from a private copy, so a write racing the send is found by the next flush.
 * A send that fails leaves the blocks not yet sent dirty: the next flush sends them again.
 * Not thread-safe: managed.c holds its lock around every call.
 */
#ifndef IP_MMPROTO_H
#define IP_MMPROTO_H

#include <stddef.h>
#include <stdint.h>

#define MM_BLOCK (64u << 10)
#define MM_READAHEAD_MAX 128u /* blocks: 8 MiB */

enum mm_state { MM_INVALID, MM_VALID, MM_FRESH };

/* What the protocol asks of its surroundings. Each returns 0 or a negative error. */
struct mm_io {
	/* device bytes [off, off + len) of the range into dst (the CPU copy's writable view) */
	int (*fetch)(void *arg, uint64_t off, uint64_t len, void *dst);
	/* bytes at src to the device at [off, off + len); last: the flush's final send */
	int (*send)(void *arg, uint64_t off, uint64_t len, const void *src);
	/* the application's view of [off, off + len): writable (1) or not accessible (0) */
	int (*protect)(void *arg, uint64_t off, uint64_t len, int accessible);
	/* does any page of [off, off + len) hold memory (has it been touched)? */
	int (*touched)(void *arg, uint64_t off, uint64_t len);
	void *arg;
};

struct mm_range {
	uint64_t size;      /* bytes, a multiple of MM_BLOCK */
	uint32_t nblocks, nvalid; /* blocks, and those VALID or FRESH */
	uint8_t *state;     /* enum mm_state per block */
	uint64_t *hash;     /* per block: of the bytes both sides held at the last agreement */
	uint8_t *copy;      /* the CPU copy, always writable (a second view of the same pages) */
	uint32_t next_fault, readahead; /* read-ahead: grows while faults walk forward */
	uint64_t sent, fetched, faults; /* bytes and faults, for the statistics */
	struct mm_io io;
};

/* mm_range_init() - a fresh range of size bytes (a multiple of MM_BLOCK) over copy. 0 or -ENOMEM */
int mm_range_init(struct mm_range *r, uint64_t size, uint8_t *copy, const struct mm_io *io);
void mm_range_fini(struct mm_range *r);

/*
 * mm_fault() - the application touched block b. INVALID: fetch it and the INVALID blocks after
 * it (up to the read-ahead, which doubles while faults follow one another), make them VALID and
 * accessible. Otherwise nothing (another thread got there first). 0 or the fetch's error, the
 * blocks then left INVALID.
 */
int mm_fault(struct mm_range *r, uint32_t b);

/*
 * mm_flush() - send every dirty block (VALID or FRESH blocks whose bytes no longer hash as
 * agreed), runs of adjacent blocks together; scratch holds MM_BLOCK * MM_READAHEAD_MAX bytes.
 * *nsent: bytes sent. 0, or the first send's error (what was not sent stays dirty).
 */
int mm_flush(struct mm_range *r, uint8_t *scratch, uint64_t *nsent);

/* mm_invalidate() - the blocks overlapping [off, off + len) become INVALID and inaccessible. */
int mm_invalidate(struct mm_range *r, uint64_t off, uint64_t len);

/* mm_any_valid() - does any block hold a CPU copy (worth flushing or invalidating)? */
int mm_any_valid(const struct mm_range *r);

/* mm_hash() - the block hash (XXH3, 64 bits) */
uint64_t mm_hash(const void *p, size_t n);

#endif
