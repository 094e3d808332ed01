/*
 * The managed-memory coherence protocol (interposer/mmproto.c) against a simulated device: the
 * states a block goes through (fresh, valid, invalid, fetched), read-ahead, what a flush sends
 * (only changed blocks, in runs), a send failing in the middle of a flush, a write racing a
 * send, and a long random mix of CPU and GPU accesses checked against a coherent memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mmproto.h"

#define NB 40u /* blocks */
#define SIZE ((uint64_t)NB * MM_BLOCK)

struct sim {
	uint8_t *dev;        /* the device's bytes */
	uint8_t *cpu;        /* the CPU copy (both of its views) */
	int accessible[NB];  /* the application's view, per block */
	int touched[NB];
	int fetches, sends, protects;
	uint64_t fetched, sent;
	int fail_send_at;    /* the send that fails (1-based); 0: none */
	int write_during_send; /* the first send: the CPU writes its block meanwhile */
	struct mm_range *r;
};

static int s_fetch(void *arg, uint64_t off, uint64_t len, void *dst)
{
	struct sim *s = arg;
	s->fetches++;
	s->fetched += len;
	memcpy(dst, s->dev + off, len);
	return 0;
}

static int s_send(void *arg, uint64_t off, uint64_t len, const void *src)
{
	struct sim *s = arg;
	s->sends++;
	if (s->fail_send_at && s->sends == s->fail_send_at)
		return -5;
	if (s->write_during_send) {
		/* another thread writes while this run is on its way: not what is sent */
		s->write_during_send = 0;
		s->cpu[off] ^= 0xFF;
	}
	memcpy(s->dev + off, src, len);
	s->sent += len;
	return 0;
}

static int s_protect(void *arg, uint64_t off, uint64_t len, int accessible)
{
	struct sim *s = arg;
	s->protects++;
	assert_int_equal(off % MM_BLOCK, 0);
	assert_int_equal(len % MM_BLOCK, 0);
	for (uint64_t b = off / MM_BLOCK; b < (off + len) / MM_BLOCK; b++)
		s->accessible[b] = accessible;
	return 0;
}

static int s_touched(void *arg, uint64_t off, uint64_t len)
{
	struct sim *s = arg;
	(void)len;
	return s->touched[off / MM_BLOCK];
}

static void sim_init(struct sim *s, struct mm_range *r)
{
	struct mm_io io = {s_fetch, s_send, s_protect, s_touched, s};

	memset(s, 0, sizeof(*s));
	s->dev = calloc(1, SIZE);
	s->cpu = calloc(1, SIZE);
	assert_non_null(s->dev);
	assert_non_null(s->cpu);
	for (unsigned b = 0; b < NB; b++)
		s->accessible[b] = 1; /* a new range is mapped readable and writable */
	s->r = r;
	assert_int_equal(mm_range_init(r, SIZE, s->cpu, &io), 0);
}

static void sim_fini(struct sim *s)
{
	mm_range_fini(s->r);
	free(s->dev);
	free(s->cpu);
}

/* The application touches byte off: a fault first if its block is not accessible. */
static void cpu_touch(struct sim *s, uint64_t off)
{
	uint32_t b = (uint32_t)(off / MM_BLOCK);
	if (!s->accessible[b])
		assert_int_equal(mm_fault(s->r, b), 0);
	assert_true(s->accessible[b]);
	s->touched[b] = 1;
}

static uint8_t cpu_read(struct sim *s, uint64_t off)
{
	cpu_touch(s, off);
	return s->cpu[off];
}

static void cpu_write(struct sim *s, uint64_t off, uint8_t v)
{
	cpu_touch(s, off);
	s->cpu[off] = v;
}

/* GPU work that writes [off, off + len): the flush, the invalidation, then the device writes. */
static void gpu_write(struct sim *s, uint64_t off, uint64_t len, uint8_t v)
{
	uint8_t *scratch = malloc((size_t)MM_BLOCK * MM_READAHEAD_MAX);
	uint64_t n;

	assert_int_equal(mm_flush(s->r, scratch, &n), 0);
	assert_int_equal(mm_invalidate(s->r, off, len), 0);
	memset(s->dev + off, v, len);
	free(scratch);
}

static void test_states(void **state)
{
	struct mm_range r;
	struct sim s;
	uint8_t *scratch = malloc((size_t)MM_BLOCK * MM_READAHEAD_MAX);
	uint64_t n;

	(void)state;
	sim_init(&s, &r);
	/* fresh: zero, accessible, nothing fetched; an untouched fresh range sends nothing */
	for (unsigned b = 0; b < NB; b++)
		assert_int_equal(r.state[b], MM_FRESH);
	assert_int_equal(cpu_read(&s, 5), 0);
	assert_int_equal(s.fetches, 0);
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, 0); /* read, not changed: hashes equal */
	assert_int_equal(s.sends, 0);

	/* a changed fresh block goes, alone */
	cpu_write(&s, 3 * MM_BLOCK + 7, 0x42);
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, MM_BLOCK);
	assert_int_equal(s.dev[3 * MM_BLOCK + 7], 0x42);
	assert_int_equal(r.state[3], MM_VALID);
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, 0); /* agreed now */

	/* a kernel writes blocks 2-4: they become invalid and inaccessible, the rest stay */
	gpu_write(&s, 2 * MM_BLOCK + 100, 2 * MM_BLOCK, 0x77);
	assert_int_equal(r.state[1], MM_FRESH);
	for (unsigned b = 2; b <= 4; b++) {
		assert_int_equal(r.state[b], MM_INVALID);
		assert_false(s.accessible[b]);
	}
	assert_int_equal(r.nvalid, NB - 3);

	/* the first touch fetches: read-ahead over the invalid blocks after it */
	assert_int_equal(cpu_read(&s, 2 * MM_BLOCK + 100), 0x77);
	assert_int_equal(s.fetches, 1);
	assert_int_equal(r.state[2], MM_VALID);
	assert_int_equal(cpu_read(&s, 3 * MM_BLOCK + 7), 0x77);
	assert_int_equal(cpu_read(&s, 4 * MM_BLOCK + 99), 0x77);
	assert_int_equal(cpu_read(&s, 4 * MM_BLOCK + 100), 0);
	assert_int_equal(r.nvalid, NB);
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, 0); /* fetched and unchanged: nothing goes back */

	/* a fault on a block already valid (another thread's) only makes it accessible */
	s.accessible[9] = 0;
	assert_int_equal(mm_fault(&r, 9), 0);
	assert_true(s.accessible[9]);
	free(scratch);
	sim_fini(&s);
}

static void test_readahead_and_runs(void **state)
{
	struct mm_range r;
	struct sim s;
	uint8_t *scratch = malloc((size_t)MM_BLOCK * MM_READAHEAD_MAX);
	uint64_t n;

	(void)state;
	sim_init(&s, &r);
	gpu_write(&s, 0, SIZE, 0x11);
	/* a sequential read: each fault fetches twice as much as the last, 1 + 2 + 4 + ... */
	for (uint64_t off = 0; off < SIZE; off += 4096)
		assert_int_equal(cpu_read(&s, off), 0x11);
	assert_int_equal(s.fetched, SIZE);
	assert_int_equal(s.fetches, 6); /* 1+2+4+8+16 = 31 blocks, then the last 9 */

	/* blocks 5-7 and 20 change: two runs, 4 blocks */
	for (unsigned b = 5; b <= 7; b++)
		cpu_write(&s, (uint64_t)b * MM_BLOCK + 1, (uint8_t)b);
	cpu_write(&s, 20 * MM_BLOCK, 0xEE);
	s.sends = 0;
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, 4 * MM_BLOCK);
	assert_int_equal(s.sends, 2);
	assert_memory_equal(s.dev, s.cpu, SIZE);
	free(scratch);
	sim_fini(&s);
}

/* A send fails in the middle of a flush: what did not go stays changed and goes next time. */
static void test_send_fails(void **state)
{
	struct mm_range r;
	struct sim s;
	uint8_t *scratch = malloc((size_t)MM_BLOCK * MM_READAHEAD_MAX);
	uint64_t n;

	(void)state;
	sim_init(&s, &r);
	for (unsigned b = 0; b < NB; b += 2)
		cpu_write(&s, (uint64_t)b * MM_BLOCK + 9, (uint8_t)(b + 1));
	s.fail_send_at = 4; /* runs are single blocks here: the fourth fails */
	assert_int_equal(mm_flush(&r, scratch, &n), -5);
	assert_int_equal(n, 3 * MM_BLOCK);
	s.fail_send_at = 0;
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, (NB / 2 - 3) * MM_BLOCK);
	assert_memory_equal(s.dev, s.cpu, SIZE);

	/* a write racing a send is not lost: the next flush finds it */
	cpu_write(&s, 11 * MM_BLOCK, 0x5A);
	s.write_during_send = 1;
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_not_equal(s.dev[11 * MM_BLOCK], s.cpu[11 * MM_BLOCK]);
	assert_int_equal(mm_flush(&r, scratch, &n), 0);
	assert_int_equal(n, MM_BLOCK);
	assert_memory_equal(s.dev, s.cpu, SIZE);
	free(scratch);
	sim_fini(&s);
}

/* A random mix of accesses against one coherent memory: every read sees the latest write. */
static void test_random(void **state)
{
	struct mm_range r;
	struct sim s;
	uint8_t *truth = calloc(1, SIZE);
	uint64_t x = 88172645463325252ull;

	(void)state;
	sim_init(&s, &r);
	for (int i = 0; i < 5000; i++) {
		uint64_t off, len;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off = x % SIZE;
		switch ((x >> 40) % 8) {
		case 0: case 1: case 2:
			assert_int_equal(cpu_read(&s, off), truth[off]);
			break;
		case 3: case 4: case 5:
			cpu_write(&s, off, (uint8_t)(x >> 50));
			truth[off] = (uint8_t)(x >> 50);
			break;
		case 6:
			len = 1 + (x >> 20) % (3 * MM_BLOCK);
			len = len < SIZE - off ? len : SIZE - off;
			gpu_write(&s, off, len, (uint8_t)(x >> 30));
			memset(truth + off, (uint8_t)(x >> 30), len);
			break;
		default:
			/* a launch reads everything: the device must hold the truth */
			gpu_write(&s, 0, 0, 0);
			assert_memory_equal(s.dev, truth, SIZE);
		}
	}
	free(truth);
	sim_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_states),
	    cmocka_unit_test(test_readahead_and_runs),
	    cmocka_unit_test(test_send_fails),
	    cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
