/*
 * Fuzzing the module image checks (util/image.c): rgpu_image_check, which rgpud's module load
 * runs on the image bytes a client sends before anything else sees them, and
 * rgpu_image_locate / rgpu_image_prelinked, which the interposer runs on the application's
 * pointer to find the bytes to send.
 *
 * Input: byte 0 picks the mode (modulo 4), the rest is the image.
 *   0, 1  the bytes as a client's image: rgpu_image_check; then, where it accepts them,
 *         rgpu_image_locate on the same bytes (the client's view of what it would ship).
 *   2     a version-1 (or, from byte 1, another version's) __fatBinC_Wrapper_t pointing to
 *         the bytes.
 *   3     a version-2 (-rdc) wrapper: the device-linked container from the bytes, then up to
 *         7 relocatable containers (byte 1 says how many) cut from what follows.
 * rgpu_image_locate trusts the application's pointers as the driver does: it is given only
 * memory that holds what its headers claim (an image rgpu_image_check accepted, or a wrapper
 * and containers of at least a container header each), and must then read nothing else.
 *
 * Checked beyond the sanitizers: the codes each function documents, and that client and
 * server agree on an image's size: a container or PTX text the server accepts is shipped
 * whole by the client (size == its length), an ELF no longer than it.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rgpu/err.h"
#include "rgpu/image.h"
#include "rgpu/util.h"

#define CONTAINER_HDR 16
#define OLD_FATBIN_MAGIC 0x1EE55A01u
#define MAX_PARTS 7

/* The client's view of bytes the server accepts. */
static void check_then_locate(const uint8_t *p, size_t len)
{
	struct rgpu_image img;
	int ret = rgpu_image_check(p, len);

	FUZZ_CHECK(ret == 0 || ret == RGPU_ECORRUPT || ret == RGPU_EUNSUPPORTED);
	if (ret)
		return;
	FUZZ_CHECK(len >= 4);
	if (rd_le32(p) == RGPU_IMAGE_BUNDLE_MAGIC) {
		/* a link bundle: the client makes one (never locates one); the server wraps it */
		void *w = NULL;
		FUZZ_CHECK(rgpu_image_bundle_wrap(p, len, &w) == 0);
		free(w);
		return;
	}
	ret = rgpu_image_locate(p, &img);
	if (rd_le32(p) == OLD_FATBIN_MAGIC) {
		/* text to the server (it ends in its only NUL), refused by the client */
		FUZZ_CHECK(ret == RGPU_EUNSUPPORTED);
		return;
	}
	FUZZ_CHECK(ret == 0);
	FUZZ_CHECK(img.data == p && !img.wrapper && !img.prelinked);
	if (img.kind == RGPU_IMAGE_ELF)
		FUZZ_CHECK(img.size <= len);
	else
		FUZZ_CHECK((img.kind == RGPU_IMAGE_FATBIN || img.kind == RGPU_IMAGE_PTX) &&
			   img.size == len);
}

/* A copy of n bytes of p in a buffer of at least a container header (zeros after). */
static uint8_t *container_copy(const uint8_t *p, size_t n)
{
	uint8_t *c = calloc(1, n < CONTAINER_HDR ? CONTAINER_HDR : n);

	FUZZ_CHECK(c);
	memcpy(c, p, n);
	return c;
}

static void wrapper(uint32_t version, const uint8_t *p, size_t len, unsigned nparts)
{
	uint8_t w[24];
	uint8_t *data, *part[MAX_PARTS];
	const void *list[MAX_PARTS + 1];
	struct rgpu_image img, got[MAX_PARTS];
	size_t cut = len, n = SIZE_MAX;
	int ret;

	/* the device-linked container first, then equal slices for the relocatable ones */
	if (version == RGPU_FATBIN_WRAPPER_LINKED && nparts)
		cut = len / (nparts + 1);
	data = container_copy(p, cut);
	for (unsigned i = 0; i < nparts; i++) {
		size_t from = cut + i * ((len - cut) / nparts);
		part[i] = container_copy(p + from, (len - cut) / nparts);
		list[i] = part[i];
	}
	list[nparts] = NULL;
	wr_le32(w, RGPU_FATBIN_WRAPPER_MAGIC);
	wr_le32(w + 4, version);
	memcpy(w + RGPU_FATBIN_WRAPPER_DATA_OFF, &data, sizeof(data));
	{
		const void *const *l = version == RGPU_FATBIN_WRAPPER_LINKED ? list : NULL;
		memcpy(w + RGPU_FATBIN_WRAPPER_FATBINS_OFF, &l, sizeof(l));
	}

	ret = rgpu_image_locate(w, &img);
	FUZZ_CHECK(ret == 0 || ret == RGPU_EINVAL || ret == RGPU_EUNSUPPORTED);
	if (version != RGPU_FATBIN_WRAPPER_PLAIN && version != RGPU_FATBIN_WRAPPER_LINKED)
		FUZZ_CHECK(ret == RGPU_EUNSUPPORTED);
	if (ret == 0) {
		FUZZ_CHECK(img.data == data && img.kind == RGPU_IMAGE_FATBIN);
		FUZZ_CHECK(img.wrapper == (int)version);
		FUZZ_CHECK(img.size == rd_le16(data + 6) + rd_le64(data + 8));
		FUZZ_CHECK(img.prelinked == (version == RGPU_FATBIN_WRAPPER_LINKED ? nparts : 0));
	}

	ret = rgpu_image_prelinked(w, got, nparts / 2, &n);
	FUZZ_CHECK(ret == 0 || ret == RGPU_EINVAL);
	if (ret == 0) {
		FUZZ_CHECK(version == RGPU_FATBIN_WRAPPER_LINKED && n == nparts);
		for (size_t i = 0; i < nparts / 2; i++)
			FUZZ_CHECK(got[i].data == part[i] && got[i].kind == RGPU_IMAGE_FATBIN);
	} else {
		FUZZ_CHECK(n == SIZE_MAX);
	}

	for (unsigned i = 0; i < nparts; i++)
		free(part[i]);
	free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] & 3) {
	case 0:
	case 1:
		check_then_locate(data + 1, size - 1);
		break;
	case 2:
		if (size >= 2)
			wrapper(data[1] < 0xf0 ? RGPU_FATBIN_WRAPPER_PLAIN : data[1] & 0xf,
				data + 2, size - 2, 0);
		break;
	case 3:
		if (size >= 2)
			wrapper(RGPU_FATBIN_WRAPPER_LINKED, data + 2, size - 2,
				data[1] % (MAX_PARTS + 1));
		break;
	}
	return 0;
}
