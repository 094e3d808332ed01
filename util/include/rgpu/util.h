/* Small shared helpers: array size, alignment, little-endian access, checked ranges, time. */
#ifndef RGPU_UTIL_H
#define RGPU_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rgpu/err.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ALIGN_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline uint16_t rd_le16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}
static inline uint32_t rd_le32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static inline uint64_t rd_le64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
static inline void wr_le16(void *p, uint16_t v)
{
	memcpy(p, &v, 2);
}
static inline void wr_le32(void *p, uint32_t v)
{
	memcpy(p, &v, 4);
}
static inline void wr_le64(void *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/*
 * rgpu_range_end() - *end = off + count * size: where count entries of size bytes that start at
 * off end (an ELF table; the rows of a pitched range: the last row's bytes from off + the rows
 * before it at pitch). Every range a peer or a file names is computed here, so that no check
 * ever compares a value that wrapped around 2^64.
 * Returns 0, or RGPU_ETOOBIG (*end untouched) when the end does not fit in 64 bits.
 */
static inline int rgpu_range_end(uint64_t off, uint64_t count, uint64_t size, uint64_t *end)
{
	uint64_t n, e;

	if (__builtin_mul_overflow(count, size, &n) || __builtin_add_overflow(off, n, &e))
		return RGPU_ETOOBIG;
	*end = e;
	return 0;
}

/* rgpu_range_in() - do count entries of size bytes from off end at or before limit? */
static inline int rgpu_range_in(uint64_t off, uint64_t count, uint64_t size, uint64_t limit)
{
	uint64_t e;

	return rgpu_range_end(off, count, size, &e) == 0 && e <= limit;
}

/*
 * rgpu_cpus() - the CPUs this process may run on: its affinity mask (a Slurm job's or a
 * container's cpuset), not the machine's count; read once. At least 1.
 */
long rgpu_cpus(void);
/*
 * rgpu_spin_budget_ns() - how long a thread may busy-wait before sleeping: want_ns where the
 * process may run on at least 4 CPUs (rgpu_cpus), 0 below (spinning threads would take the CPUs
 * the threads they wait for need). RGPU_SPIN_NS overrides.
 */
uint64_t rgpu_spin_budget_ns(uint64_t want_ns);
/*
 * rgpu_sync_spin_ns() - how long a thread that waits for the answer to a synchronous call
 * (or the reader of a peer that is answering one) may busy-wait: 1 ms where
 * rgpu_spin_budget_ns() allows spinning, as the driver itself spins in a synchronous call by
 * default (CU_CTX_SCHED_AUTO with CPUs to spare). RGPU_SYNC_SPIN_NS overrides (0: off).
 */
uint64_t rgpu_sync_spin_ns(void);
/*
 * rgpu_host_id() - this kernel's boot id (/proc/sys/kernel/random/boot_id): processes that
 * see the same one share a kernel, so shared memory can pass between them. "" when unknown.
 */
const char *rgpu_host_id(void);

/*
 * rgpu_map_at() - anonymous private memory at exactly [base, base + size) (the device window,
 * the host area: addresses that must be the same in every process), with prot (PROT_NONE:
 * reserved without swap). Never replaces a mapping. Returns the mapping, or NULL with *why set
 * to what went wrong (errno's text, or "placed elsewhere" by a kernel that ignores the flag).
 */
void *rgpu_map_at(uint64_t base, uint64_t size, int prot, const char **why);

/* rgpu_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t rgpu_now_ns(void);
/*
 * rgpu_deadline() - the absolute time ns nanoseconds from now on CLOCK_REALTIME, the clock a
 * pthread_cond_timedwait() on a default condition variable measures against.
 */
struct timespec;
void rgpu_deadline(struct timespec *ts, uint64_t ns);
/*
 * Deadlines: a time on rgpu_now_ns()'s clock, 0 meaning none. Every bounded wait in rgpu
 * (a frame, a handshake, an idle session) is one of these, converted for poll() at each wait
 * by rgpu_ms_until(), so a peer that sends one byte at a time gains nothing.
 * rgpu_deadline_after() - the deadline ms milliseconds from now; 0 (none) when ms < 0.
 * rgpu_deadline_min() - the earlier of two deadlines, either of which may be none.
 * rgpu_ms_until() - what is left of deadline in milliseconds, rounded up, for poll(): -1 for
 * none, 0 once it has passed.
 */
uint64_t rgpu_deadline_after(int ms);
static inline uint64_t rgpu_deadline_min(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : MIN(a, b);
}
int rgpu_ms_until(uint64_t deadline);
/* rgpu_wall_ms() - CLOCK_REALTIME in milliseconds since the epoch. */
uint64_t rgpu_wall_ms(void);

/* rgpu_hex() - write 2*n hex digits and a NUL into out (size >= 2*n+1); returns out. */
char *rgpu_hex(const void *data, size_t n, char *out);

/*
 * rgpu_parse_hostport() - split "HOST:PORT" ("[v6]:PORT", or a bare "PORT"); host defaults to
 * def_host. Port 0 is accepted (a listener picks a free one).
 */
int rgpu_parse_hostport(const char *s, const char *def_host, char *host, size_t hostlen,
			int *port);
/*
 * rgpu_addr_complete() - s is "HOST:PORT" with both: a host and a port from 1 to 65535, what a
 * client told to go somewhere needs (a redirect). 1 or 0.
 */
int rgpu_addr_complete(const char *s);
/*
 * rgpu_reach_addr() - where another host reaches a server that listens on `listen`: listen
 * itself, or with a wildcard host (0.0.0.0, ::, none) the host of `via`, an address that
 * reached that server (its admin address, say). Written into out.
 */
void rgpu_reach_addr(const char *listen, const char *via, char *out, size_t len);

/*
 * rgpu_label_valid() - is s a job label or reservation name (proto/rgpu.proto, Hello.label):
 * 1 to RGPU_LABEL_MAX characters of [A-Za-z0-9._:-].
 */
#define RGPU_LABEL_MAX 63
int rgpu_label_valid(const char *s);

/* rgpu_parse_size() - "64", "4K", "2M", "1G", "1T" (powers of 1024), decimal or 0x-prefixed
 * hexadecimal, into *out. */
int rgpu_parse_size(const char *s, uint64_t *out);

/*
 * rgpu_fault() - a fault site the tests may fire: is `site` among the comma-separated names in
 * RGPU_FAULT? (Read once per process.) Each site is a place where a real failure can happen
 * (docs/operator-guide.md, "Testing failures on purpose"); firing it takes that failure's path. Logged at warn when it
 * fires.
 */
int rgpu_fault(const char *site);

/*
 * rgpu_parallel() - run fn(arg, i) on nthreads threads at once (i = 0 .. nthreads-1; i = 0 on
 * the calling thread) and return when all have. Threads that cannot be started run on the
 * callers that could: fn must take its work from a shared counter, not from i. Returns the
 * number of threads that ran (at least 1).
 */
unsigned rgpu_parallel(unsigned nthreads, void (*fn)(void *arg, unsigned i), void *arg);

/*
 * rgpu_parallel_watch() - rgpu_parallel() on threads of its own while the calling thread calls
 * tick(targ) every period_ms until they are done, and once more after (progress reports). When
 * no thread can be started, the loop runs on the caller, ticked only at the end. Returns what
 * rgpu_parallel() returns.
 */
unsigned rgpu_parallel_watch(unsigned nthreads, void (*fn)(void *arg, unsigned i), void *arg,
			     void (*tick)(void *targ), void *targ, unsigned period_ms);

/*
 * rgpu_ticker_start() - call tick(arg) every period_ms on a thread of its own, the first time
 * one period from now, until rgpu_ticker_stop(), which returns once no tick runs or will (a
 * heartbeat on a connection while the calling thread works and writes nothing there). NULL
 * when no thread could be started (no ticks then); stop takes NULL.
 */
struct rgpu_ticker;
struct rgpu_ticker *rgpu_ticker_start(void (*tick)(void *arg), void *arg, unsigned period_ms);
void rgpu_ticker_stop(struct rgpu_ticker *t);

/* rgpu_parallel_width() - threads for the checkpoint pipeline's loops: $RGPU_CKPT_THREADS,
 * else the CPUs online; 1 to 32 */
unsigned rgpu_parallel_width(void);

/*
 * rgpu_memcpy_wide() - memcpy of a large buffer on several threads at once: one thread cannot
 * move memory as fast as the copy engines (a shared-memory link's bulk copies). The threads
 * (RGPU_COPY_THREADS, by default 8 on machines with at least 16 CPUs, 4 from 8, 2 from 4, else
 * none) are made at the first call and kept; this copy uses at most 4 of them. Small copies, and
 * a call while another runs, use memcpy.
 */
void rgpu_memcpy_wide(void *dst, const void *src, size_t n);
/* rgpu_memcpy_wide_nt() - the same on every thread, with non-temporal stores (x86-64): for
 * bytes a device reads next, not this CPU */
void rgpu_memcpy_wide_nt(void *dst, const void *src, size_t n);

#endif
