/*
 * A checkpoint's metadata (migrate/ckptmeta.c) is checked before anything uses it: its format,
 * every blob a known kind, with exactly the chunks its size needs, inside the manifest's list;
 * device memory in 2 MiB units inside its window; an image with its hash; a CUDA array's contents
 * with its record; the job's devices numbered within a client's 16. Each refusal says which blob
 * and why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint.pb-c.h"
#include "rgpu/ckpt.h"
#include "rgpu/err.h"

#define MiB (1ull << 20)

static uint8_t job[16] = {1, 2, 3};

/* A metadata with one device blob (4 MiB at the window's base) and a state log of 5 MiB. */
static Rgpu__CkptBlob dev, log_, *blobs[2];

static Rgpu__CkptMeta meta(void)
{
	Rgpu__CkptMeta m = RGPU__CKPT_META__INIT;
	rgpu__ckpt_blob__init(&dev);
	rgpu__ckpt_blob__init(&log_);
	dev.kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_DEVICE;
	dev.addr = 0x200000000000ull;
	dev.size = 4 * MiB;
	dev.first = 0;
	dev.count = 2;
	log_.kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_STATELOG;
	log_.size = 5 * MiB;
	log_.first = 2;
	log_.count = 3;
	blobs[0] = &dev;
	blobs[1] = &log_;
	m.format = RGPU_CKPT_FORMAT;
	m.job_id.data = job;
	m.job_id.len = 16;
	m.window_base = 0x200000000000ull;
	m.window_size = 1ull << 40;
	m.n_blobs = 2;
	m.blobs = blobs;
	return m;
}

/* Pack m and decode it against a list of n chunks: the code, and why into w. */
static int decode(const Rgpu__CkptMeta *m, size_t n, char *w, size_t wl)
{
	size_t len = rgpu__ckpt_meta__get_packed_size(m);
	uint8_t *buf = malloc(len + 1);
	Rgpu__CkptMeta *out = NULL;
	int ret;

	rgpu__ckpt_meta__pack(m, buf);
	w[0] = '\0';
	ret = rgpu_ckpt_meta_decode(buf, len, n, &out, w, wl);
	if (out)
		rgpu__ckpt_meta__free_unpacked(out, NULL);
	free(buf);
	return ret;
}

static void test_good(void **state)
{
	Rgpu__CkptMeta m = meta();
	char w[300];
	(void)state;
	assert_int_equal(decode(&m, 5, w, sizeof(w)), 0);
	assert_int_equal(rgpu_ckpt_nchunks(0), 0);
	assert_int_equal(rgpu_ckpt_nchunks(1), 1);
	assert_int_equal(rgpu_ckpt_nchunks(2 * MiB), 1);
	assert_int_equal(rgpu_ckpt_nchunks(2 * MiB + 1), 2);
}

static void test_refused(void **state)
{
	Rgpu__CkptMeta m;
	char w[300];
	(void)state;

	m = meta();
	m.format = 2;
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_EVERSION);
	assert_string_equal(w, "a checkpoint of format 2; this rgpu reads format 1");
	m = meta();
	m.job_id.len = 0;
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	assert_string_equal(w, "its metadata names no job");
	m = meta();
	assert_int_equal(decode(&m, 4, w, sizeof(w)), RGPU_ECORRUPT); /* the log runs past */
	assert_string_equal(w, "blob 1 (the state log, 5242880 bytes) names chunks 2+3 of a list of 4");
	m = meta();
	log_.count = 2; /* 5 MiB in 2 chunks */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	m = meta();
	log_.first = UINT64_MAX; /* no wrap-around: first + count overflows */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	m = meta();
	dev.addr += 4096; /* not in 2 MiB units */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	assert_string_equal(w, "blob 0: device memory [0x200000001000, +4194304) outside its window "
			       "or not in 2 MiB units");
	m = meta();
	dev.addr = 0x100000000000ull; /* below the window */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	m = meta();
	dev.addr = m.window_base + m.window_size - 2 * MiB; /* runs past its end */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	m = meta();
	log_.kind = 99;
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	assert_string_equal(w, "blob 1 is of unknown kind 99");
	m = meta();
	log_.kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_IMAGE; /* an image without its hash */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	assert_string_equal(w, "blob 1: a module image without its hash");
	m = meta();
	log_.kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY; /* an array's contents, no record */
	assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	assert_string_equal(w, "blob 1: a CUDA array's contents without its record");
	log_.id = 12;
	assert_int_equal(decode(&m, 5, w, sizeof(w)), 0);
	/* the job's devices, numbered by its client from device_base: within its 16 */
	{
		uint32_t cc[2] = {90, 90};
		m = meta();
		m.device_cc = cc;
		m.n_device_cc = 2;
		m.device_base = 14;
		assert_int_equal(decode(&m, 5, w, sizeof(w)), 0);
		m.device_base = 15;
		assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
		assert_string_equal(w, "its 2 devices are numbered from 15, past a client's 16");
		m.n_device_cc = 0;
		m.device_base = 16;
		assert_int_equal(decode(&m, 5, w, sizeof(w)), RGPU_ECORRUPT);
	}
	/* not protobuf at all */
	{
		Rgpu__CkptMeta *out = NULL;
		uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
		assert_int_equal(rgpu_ckpt_meta_decode(junk, sizeof(junk), 5, &out, w, sizeof(w)),
				 RGPU_ECORRUPT);
		assert_null(out);
	}
}

static void test_blob_of(void **state)
{
	Rgpu__CkptMeta m = meta();
	char w[96];
	(void)state;
	assert_string_equal(rgpu_ckpt_blob_of(&m, 1, w, sizeof(w)), "device memory at 0x200000200000");
	assert_string_equal(rgpu_ckpt_blob_of(&m, 3, w, sizeof(w)), "the state log");
	assert_string_equal(rgpu_ckpt_blob_of(&m, 7, w, sizeof(w)), "no blob");
	log_.kind = RGPU__CKPT_BLOB_KIND__CKPT_BLOB_ARRAY;
	log_.id = 12;
	assert_string_equal(rgpu_ckpt_blob_of(&m, 4, w, sizeof(w)), "the CUDA array of record 12");
	/* a live round's device blobs index device_hashes, not the list, even with none of them */
	m.live_round = 1;
	assert_string_equal(rgpu_ckpt_blob_of(&m, 1, w, sizeof(w)), "no blob");
	assert_int_equal(rgpu_ckpt_is_live(&m), 1);
	m = meta();
	assert_int_equal(rgpu_ckpt_is_live(&m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_blob_of),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
