/*
 * Fuzzing the state-log reader (statetrack/stream.c st_deserialize), which reads the
 * snapshots and journals that rgpud --replay and a restore load from files: the stream
 * header, each frame (length, CRC-32, a protobuf StRecord) and each record's rules when it
 * is applied (statetrack/log.c).
 *
 * Input: byte 0 bit 0 set: the harness first writes the right CRC-32 into the header and
 * into every frame it can walk, so that the fuzzer reaches the records (a random CRC almost
 * never matches); bit 1 set: "all or nothing" (no st_load_result, as a restore asks); the
 * rest is the stream.
 *
 * Checked beyond the sanitizers: the codes st_deserialize documents, a torn result only when
 * one was asked for, and that a log it builds is one rgpu can write and read back: its
 * snapshot reads back to an equal log (st_compare, st_digest), writes again to the same bytes,
 * and every record has a description (st_rec_describe, also into a short buffer).
 */
#include <string.h>

#include <zlib.h>

#include "fuzz.h"
#include "rgpu/err.h"
#include "rgpu/statetrack.h"
#include "rgpu/util.h"

static uint32_t crc(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	uLong c = crc32_z(0, Z_NULL, 0);

	c = crc32_z(c, a, alen);
	return (uint32_t)crc32_z(c, b, blen);
}

/* The CRCs st_deserialize checks, made right wherever the layout can be followed. */
static void fix_crcs(uint8_t *p, size_t len)
{
	size_t off = ST_STREAM_HDR_LEN;

	if (len < ST_STREAM_HDR_LEN)
		return;
	wr_le32(p + 20, crc(p, 20, NULL, 0));
	while (len - off >= ST_FRAME_HDR_LEN) {
		uint32_t blen = rd_le32(p + off);
		if (blen > len - off - ST_FRAME_HDR_LEN)
			break;
		wr_le32(p + off + 4, crc(p + off, 4, p + off + ST_FRAME_HDR_LEN, blen));
		off += ST_FRAME_HDR_LEN + blen;
	}
}

static int describe(const struct st_rec *rec, void *arg)
{
	char line[512], tiny[8];
	int n = st_rec_describe(rec, line, sizeof(line));
	int m = st_rec_describe(rec, tiny, sizeof(tiny));

	(void)arg;
	FUZZ_CHECK(n > 0 && n == m);
	FUZZ_CHECK((size_t)n >= sizeof(line) || strlen(line) == (size_t)n);
	FUZZ_CHECK(strlen(tiny) == MIN((size_t)n, sizeof(tiny) - 1));
	return 0;
}

/* A log st_deserialize built: it writes out and reads back as itself. */
static void round_trip(struct st_log *log)
{
	struct st_log *back = NULL;
	uint8_t *s1 = NULL, *s2 = NULL, d1[ST_DIGEST_LEN], d2[ST_DIGEST_LEN];
	size_t n1 = 0, n2 = 0, index = SIZE_MAX;

	FUZZ_CHECK(st_foreach(log, describe, NULL) == 0);
	FUZZ_CHECK(st_serialize(log, &s1, &n1) == 0);
	FUZZ_CHECK(st_deserialize(s1, n1, &back, NULL) == 0);
	FUZZ_CHECK(st_compare(log, back, &index, NULL, NULL) == 0);
	FUZZ_CHECK(index == st_count(log) && st_count(back) == st_count(log));
	st_digest(log, d1);
	st_digest(back, d2);
	FUZZ_CHECK(memcmp(d1, d2, sizeof(d1)) == 0);
	FUZZ_CHECK(st_serialize(back, &s2, &n2) == 0);
	FUZZ_CHECK(n2 == n1 && memcmp(s1, s2, n1) == 0);
	free(s2);
	free(s1);
	st_log_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_load_result res = {0};
	struct st_log *log = NULL;
	int all_or_nothing, ret;
	uint8_t *buf;
	size_t len;

	if (size < 1)
		return 0;
	all_or_nothing = data[0] & 2;
	len = size - 1;
	buf = malloc(len ? len : 1);
	FUZZ_CHECK(buf);
	memcpy(buf, data + 1, len);
	if (data[0] & 1)
		fix_crcs(buf, len);

	ret = st_deserialize(buf, len, &log, all_or_nothing ? NULL : &res);
	switch (ret) {
	case 0:
		FUZZ_CHECK(log);
		if (all_or_nothing)
			FUZZ_CHECK(len >= ST_STREAM_HDR_LEN);
		else
			FUZZ_CHECK(res.valid_bytes <= len && (res.torn || res.valid_bytes == len));
		round_trip(log);
		st_log_free(log);
		break;
	case RGPU_EMAGIC:
	case RGPU_EVERSION:
	case RGPU_EUNSUPPORTED:
	case RGPU_ECORRUPT:
		FUZZ_CHECK(!log);
		break;
	default:
		fprintf(stderr, "unexpected refusal %d (%s)\n", ret, rgpu_strerror(ret));
		FUZZ_CHECK(0);
	}
	free(buf);
	return 0;
}
