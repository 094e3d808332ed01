/*
 * The pinned-memory arena of a session whose link is shared memory (docs/architecture.md,
 * "Shared memory on one host"): pinned host allocations (cuMemHostAlloc, cuMemAllocHost) are
 * carved from one memfd that the worker maps too. A copy from such memory travels by
 * reference and the worker's driver copies it straight from the program's bytes, registered
 * once per allocation; a copy into it lands there (Memcpy.host_arena). Only a worker that maps
 * the arena uses it that way; to every other (the job moved to another host, another server's
 * session) it is plain host memory, whose bytes travel as any others.
 *
 * The memfd is sparse (RGPU_SHM_ARENA bytes, 64 GiB or the machine's memory, whichever is
 * less): pages exist once touched and go back at a free (a hole punched), after the worker has
 * let go of the allocation (MSG_ARENA_RELEASE). Allocations are 64 KiB aligned, 2 MiB from
 * 2 MiB up, first fit; the list is sorted by offset.
 */
#define LOG_PREFIX "rgpu: "
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "session_state.h"
#include "rgpu.pb-c.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct arena_piece {
	uint64_t off, len;
};

struct ip_arena {
	pthread_mutex_t lock;
	int fd;
	uint8_t *base;
	uint64_t size;
	struct arena_piece *v;   /* allocations, by offset */
	size_t n, cap;
};

static uint64_t arena_size(void)
{
	const char *e = getenv("RGPU_SHM_ARENA");
	uint64_t v = 64ull << 30, mem = (uint64_t)sysconf(_SC_PHYS_PAGES) * 4096ull;

	if (e && *e) {
		if (rgpu_parse_size(e, &v)) {
			pr_warn("RGPU_SHM_ARENA='%s' is not a size; using 64G", e);
			v = 64ull << 30;
		}
		return v & ~((2ull << 20) - 1);
	}
	return MIN(v, mem) & ~((2ull << 20) - 1);
}

/* The session's arena, made at its first use. NULL: none (RGPU_SHM_ARENA=0, or no memory). */
static struct ip_arena *arena_get(void)
{
	struct ip_arena *a = S.arena;
	uint64_t size;
	int fd;

	if (a || S.arena_failed)
		return a;
	size = arena_size();
	if (!size) {
		S.arena_failed = 1;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	fd = memfd_create("rgpu-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (!a || fd < 0 || ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto fail;
	a->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (a->base == MAP_FAILED)
		goto fail;
	a->fd = fd;
	a->size = size;
	pthread_mutex_init(&a->lock, NULL);
	S.arena = a;
	return a;
fail:
	pr_warn("no pinned-memory arena of %llu bytes (%s): pinned memory is copied like any "
		"other",
		(unsigned long long)size, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(a);
	S.arena_failed = 1;
	return NULL;
}

/* [p, p + len) lies in one allocation: its offset and length (transport/shm.c asks) */
static int arena_find(void *ctx, const void *p, uint64_t len, uint64_t *reg_off,
		      uint64_t *reg_len)
{
	struct ip_arena *a = ctx;
	const uint8_t *b = p;
	size_t lo = 0, hi;
	int found = 0;

	if (b < a->base || (uint64_t)(b - a->base) >= a->size)
		return 0;
	uint64_t off = (uint64_t)(b - a->base);
	pthread_mutex_lock(&a->lock);
	hi = a->n;
	while (lo < hi) { /* the last piece starting at or before off */
		size_t mid = (lo + hi) / 2;
		if (a->v[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && off - a->v[lo - 1].off < a->v[lo - 1].len &&
	    len <= a->v[lo - 1].len - (off - a->v[lo - 1].off)) {
		*reg_off = a->v[lo - 1].off;
		*reg_len = a->v[lo - 1].len;
		found = 1;
	}
	pthread_mutex_unlock(&a->lock);
	return found;
}

void ip_arena_opts(struct rgpu_shm_arena *out)
{
	struct ip_arena *a = arena_get();

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (!a)
		return;
	out->fd = a->fd;
	out->base = a->base;
	out->size = a->size;
	out->ctx = a;
	out->find = arena_find;
}

void *ip_arena_alloc(size_t size)
{
	struct ip_arena *a = S.arena;
	uint64_t align = size >= (2u << 20) ? 2u << 20 : 64u << 10, len, at = 0;
	size_t i;

	/* (larger than the arena never fits, and would wrap the rounding below to a few bytes) */
	if (!a || !size || size > a->size)
		return NULL;
	len = (size + (64u << 10) - 1) & ~((uint64_t)(64u << 10) - 1);
	pthread_mutex_lock(&a->lock);
	for (i = 0; i <= a->n; i++) {
		uint64_t end = i < a->n ? a->v[i].off : a->size;
		at = (at + align - 1) & ~(align - 1);
		if (at <= end && end - at >= len)
			break;
		if (i < a->n)
			at = a->v[i].off + a->v[i].len;
	}
	if (i <= a->n && a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct arena_piece *v = realloc(a->v, cap * sizeof(*v));
		if (v) {
			a->v = v;
			a->cap = cap;
		}
	}
	if (i > a->n || a->n == a->cap) { /* full, or no memory for the list */
		pthread_mutex_unlock(&a->lock);
		return NULL;
	}
	memmove(&a->v[i + 1], &a->v[i], (a->n - i) * sizeof(*a->v));
	a->v[i] = (struct arena_piece){at, len};
	a->n++;
	pthread_mutex_unlock(&a->lock);
	return a->base + at;
}

int ip_arena_free(void *p)
{
	for (int k = 0; k < ip_nsessions; k++) {
		struct ip_session *s = &ip_sessions[k];
		struct ip_arena *a = s->arena;
		uint64_t off, len;

		if (!a || (uint8_t *)p < a->base || (uint64_t)((uint8_t *)p - a->base) >= a->size)
			continue;
		if (!arena_find(a, p, 1, &off, &len) || a->base + off != p)
			return -1;
		/* the worker lets go of it first: nothing of its driver may still touch the pages */
		Rgpu__ArenaRelease m = RGPU__ARENA_RELEASE__INIT;
		m.off = off;
		m.len = len;
		int prev = ip_pin_server(k);
		(void)ip_call_status(RGPU_MSG_ARENA_RELEASE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
		ip_pin_server(prev);
		fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
		pthread_mutex_lock(&a->lock);
		for (size_t i = 0; i < a->n; i++)
			if (a->v[i].off == off) {
				memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof(*a->v));
				a->n--;
				break;
			}
		pthread_mutex_unlock(&a->lock);
		return 1;
	}
	return 0;
}

int ip_arena_dst(const void *p, uint64_t n, uint64_t *at, uint64_t *reg_off, uint64_t *reg_len)
{
	struct ip_arena *a = S.arena;

	if (!a || !arena_find(a, p, n, reg_off, reg_len))
		return 0;
	*at = (uint64_t)((const uint8_t *)p - a->base);
	return 1;
}

size_t ip_copy_chunk(int in_arena)
{
	uint64_t st = atomic_load(&S.staging_size);
	if (atomic_load(&S.link_shm))
		return in_arena ? RGPU_MAX_CHUNK : RGPU_COPY_CHUNK;
	return st >= RGPU_COPY_CHUNK && st <= RGPU_MAX_CHUNK ? st : RGPU_COPY_CHUNK;
}
