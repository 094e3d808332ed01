/*
 * Module images as the driver API receives them: a __fatBinC_Wrapper_t, a fatbin container, a
 * 64-bit ELF cubin or PTX text (dark-api.md §6). Given only a pointer, find the bytes to ship.
 */
#ifndef RGPU_IMAGE_H
#define RGPU_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define RGPU_FATBIN_WRAPPER_MAGIC 0x466243B1u
#define RGPU_FATBIN_MAGIC 0xBA55ED50u

enum rgpu_image_kind {
	RGPU_IMAGE_FATBIN = 1, /* fatbin container (also what a wrapper points to) */
	RGPU_IMAGE_ELF = 2,    /* cubin */
	RGPU_IMAGE_PTX = 3,    /* NUL-terminated text */
};

struct rgpu_image {
	const void *data; /* first byte to ship */
	size_t size;      /* bytes to ship */
	int kind;         /* enum rgpu_image_kind */
};

/*
 * rgpu_image_locate() - find the shippable bytes of the image at p.
 *
 * A wrapper (version 1) resolves to its container. Reads only inside the image's own headers.
 * Returns 0, RGPU_EINVAL for a NULL pointer or an image with impossible headers, or
 * RGPU_EUNSUPPORTED for a version-2 (-rdc) wrapper or an old-style container.
 */
int rgpu_image_locate(const void *p, struct rgpu_image *out);

/*
 * rgpu_image_check() - validate untrusted image bytes [data, data+len) before they reach a
 * driver: the headers must describe exactly the bytes given (container extent, ELF tables).
 * Returns 0 or RGPU_ECORRUPT / RGPU_EUNSUPPORTED.
 */
int rgpu_image_check(const void *data, size_t len);

#endif
