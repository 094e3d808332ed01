/*
 * The coherence protocol of managed memory: block states and what moves when (mmproto.h).
 * No I/O of its own: struct mm_io fetches, sends and protects.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* header-only: the interposer gains no library to load */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mmproto.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

uint64_t mm_hash(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

/* The hash of a block of zeros: what a FRESH block agrees on. */
static uint64_t zero_hash(void)
{
	static uint64_t h;
	static int done;

	if (!done) {
		void *z = calloc(1, MM_BLOCK);
		if (!z)
			return 0; /* no block hashes to 0 in practice: every touched FRESH block is sent */
		h = mm_hash(z, MM_BLOCK);
		free(z);
		done = 1;
	}
	return h;
}

int mm_range_init(struct mm_range *r, uint64_t size, uint8_t *copy, const struct mm_io *io)
{
	memset(r, 0, sizeof(*r));
	if (!size || size % MM_BLOCK || size / MM_BLOCK > UINT32_MAX)
		return -EINVAL;
	r->size = size;
	r->nblocks = (uint32_t)(size / MM_BLOCK);
	r->state = malloc(r->nblocks);
	r->hash = malloc(r->nblocks * sizeof(*r->hash));
	if (!r->state || !r->hash) {
		mm_range_fini(r);
		return -ENOMEM;
	}
	memset(r->state, MM_FRESH, r->nblocks);
	for (uint32_t b = 0; b < r->nblocks; b++)
		r->hash[b] = zero_hash();
	r->nvalid = r->nblocks;
	r->copy = copy;
	r->io = *io;
	r->readahead = 1;
	return 0;
}

void mm_range_fini(struct mm_range *r)
{
	free(r->state);
	free(r->hash);
	r->state = NULL;
	r->hash = NULL;
}

int mm_any_valid(const struct mm_range *r)
{
	return r->nvalid != 0;
}

int mm_fault(struct mm_range *r, uint32_t b)
{
	uint32_t n = 0, want;
	uint64_t off = (uint64_t)b * MM_BLOCK;
	int ret;

	if (b >= r->nblocks)
		return 0;
	if (r->state[b] != MM_INVALID) /* another thread fetched it, or protecting it failed */
		return r->io.protect(r->io.arg, off, MM_BLOCK, 1);
	r->faults++;
	/* read-ahead doubles while the faults walk forward block run by block run */
	r->readahead = b == r->next_fault ? MIN(r->readahead * 2, MM_READAHEAD_MAX) : 1;
	want = r->readahead;
	while (n < want && b + n < r->nblocks && r->state[b + n] == MM_INVALID)
		n++;
	ret = r->io.fetch(r->io.arg, off, (uint64_t)n * MM_BLOCK, r->copy + off);
	if (ret)
		return ret;
	for (uint32_t i = b; i < b + n; i++) {
		r->hash[i] = mm_hash(r->copy + (uint64_t)i * MM_BLOCK, MM_BLOCK);
		r->state[i] = MM_VALID;
	}
	r->nvalid += n;
	r->fetched += (uint64_t)n * MM_BLOCK;
	r->next_fault = b + n;
	return r->io.protect(r->io.arg, off, (uint64_t)n * MM_BLOCK, 1);
}

/* Send the run of blocks [first, first + n) held in scratch, then agree on their hashes. */
static int send_run(struct mm_range *r, uint32_t first, uint32_t n, const uint8_t *scratch,
		    const uint64_t *hashes, uint64_t *nsent)
{
	int ret;

	if (!n)
		return 0;
	ret = r->io.send(r->io.arg, (uint64_t)first * MM_BLOCK, (uint64_t)n * MM_BLOCK, scratch);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		r->hash[first + i] = hashes[i];
		if (r->state[first + i] == MM_FRESH)
			r->state[first + i] = MM_VALID;
	}
	r->sent += (uint64_t)n * MM_BLOCK;
	*nsent += (uint64_t)n * MM_BLOCK;
	return 0;
}

int mm_flush(struct mm_range *r, uint8_t *scratch, uint64_t *nsent)
{
	uint64_t hashes[MM_READAHEAD_MAX];
	uint32_t first = 0, n = 0;
	int ret;

	*nsent = 0;
	if (!r->nvalid)
		return 0;
	for (uint32_t b = 0; b < r->nblocks; b++) {
		uint64_t off = (uint64_t)b * MM_BLOCK, h;
		uint8_t *slot;
		int dirty = 0;

		if (r->state[b] == MM_FRESH && !r->io.touched(r->io.arg, off, MM_BLOCK)) {
			/* untouched: still zeros on both sides */
		} else if (r->state[b] != MM_INVALID) {
			/* copied first: what is hashed is exactly what is sent */
			slot = scratch + (uint64_t)n * MM_BLOCK;
			memcpy(slot, r->copy + off, MM_BLOCK);
			h = mm_hash(slot, MM_BLOCK);
			dirty = h != r->hash[b];
			if (dirty) {
				if (!n)
					first = b;
				hashes[n++] = h;
			}
		}
		/* a run ends at a clean block, at the scratch's end, and at the range's end */
		if ((!dirty || n == MM_READAHEAD_MAX || b + 1 == r->nblocks) && n) {
			ret = send_run(r, first, n, scratch, hashes, nsent);
			if (ret)
				return ret;
			n = 0;
		}
	}
	return 0;
}

int mm_invalidate(struct mm_range *r, uint64_t off, uint64_t len)
{
	uint32_t first, last, any = 0;

	if (!r->nvalid || off >= r->size || !len)
		return 0;
	len = MIN(len, r->size - off);
	first = (uint32_t)(off / MM_BLOCK);
	last = (uint32_t)((off + len - 1) / MM_BLOCK);
	for (uint32_t b = first; b <= last; b++) {
		if (r->state[b] != MM_INVALID) {
			r->state[b] = MM_INVALID;
			r->nvalid--;
			any = 1;
		}
	}
	r->next_fault = UINT32_MAX;
	if (!any)
		return 0;
	return r->io.protect(r->io.arg, (uint64_t)first * MM_BLOCK,
			     (uint64_t)(last - first + 1) * MM_BLOCK, 0);
}
