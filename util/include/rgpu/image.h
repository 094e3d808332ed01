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

/*
 * __fatBinC_Wrapper_t (fatbinary_section.h), 24 bytes: u32 magic, u32 version, a pointer to a
 * container (`data`), a pointer (`filename_or_fatbins`). Version 1: one container; version 2
 * (FATBINC_LINK_VERSION, relocatable device code): `data` is the device-linked container and
 * `filename_or_fatbins` a NULL-terminated array of the relocatable containers it was linked
 * from, one per translation unit.
 */
#define RGPU_FATBIN_WRAPPER_PLAIN 1u
#define RGPU_FATBIN_WRAPPER_LINKED 2u
#define RGPU_FATBIN_WRAPPER_DATA_OFF 8
#define RGPU_FATBIN_WRAPPER_FATBINS_OFF 16

enum rgpu_image_kind {
	RGPU_IMAGE_FATBIN = 1, /* fatbin container (also what a wrapper points to) */
	RGPU_IMAGE_ELF = 2,    /* cubin */
	RGPU_IMAGE_PTX = 3,    /* NUL-terminated text */
	RGPU_IMAGE_BUNDLE = 4, /* rgpu's link bundle: a PTX-only -rdc wrapper's containers */
};

/* A link bundle (util/image.c gives its layout): "RGLB", format version 1. */
#define RGPU_IMAGE_BUNDLE_MAGIC 0x424C4752u
#define RGPU_IMAGE_BUNDLE_VERSION 1u

struct rgpu_image {
	const void *data; /* first byte to ship; for a bundle, the wrapper it is made from */
	size_t size;      /* bytes to ship (a bundle's, once written) */
	int kind;         /* enum rgpu_image_kind */
	int wrapper;      /* the wrapper's version (RGPU_FATBIN_WRAPPER_*), 0 for none */
	size_t prelinked; /* version 2: how many relocatable containers it names */
};

/*
 * rgpu_image_locate() - find the shippable bytes of the image at p.
 *
 * A version-1 wrapper resolves to its container; a version-2 (-rdc) wrapper to its
 * device-linked container, the one image that holds every kernel and variable of the link.
 * A version-2 wrapper whose device-linked container is empty (a PTX-only -rdc build, which
 * the driver JIT-links) resolves to RGPU_IMAGE_BUNDLE: data is the wrapper, size the bytes
 * rgpu_image_bundle_write() makes of it. Reads only inside the image's own headers. Returns 0,
 * RGPU_EINVAL for a NULL pointer or an image with impossible headers, or RGPU_EUNSUPPORTED for
 * a wrapper of another version or an old-style container (magic 0x1EE55A01). Each refused
 * kind is logged once per process at warn, with the reason.
 */
int rgpu_image_locate(const void *p, struct rgpu_image *out);

/* rgpu_image_bundle_write() - write the bundle img (located as RGPU_IMAGE_BUNDLE) to buf,
 * which holds img->size bytes. */
void rgpu_image_bundle_write(const struct rgpu_image *img, void *buf);

/*
 * rgpu_image_bundle_wrap() - a version-2 wrapper made of the untrusted link bundle [bundle,
 * bundle+len), for a driver to JIT-link: one allocation holding the wrapper, its list and a
 * copy of the bundle, which the caller frees with free() once the driver has loaded it.
 * Returns 0, RGPU_ECORRUPT (not a bundle, or headers that do not describe the bytes) or
 * RGPU_ENOMEM.
 */
int rgpu_image_bundle_wrap(const void *bundle, size_t len, void **wrapper);

/*
 * rgpu_image_prelinked() - the relocatable containers a version-2 wrapper names, in the order
 * of its array (the order in which the translation units' constructors registered them).
 *
 * Stores up to max of them in parts (parts may be NULL when max is 0) and their count in *n.
 * Returns 0, or RGPU_EINVAL if wrapper is not a version-2 wrapper or an entry of its array is
 * not a container.
 */
int rgpu_image_prelinked(const void *wrapper, struct rgpu_image *parts, size_t max, size_t *n);

/*
 * rgpu_image_check() - validate untrusted image bytes [data, data+len) before they reach a
 * driver: the headers must describe exactly the bytes given (container extent, ELF tables).
 * Returns 0 or RGPU_ECORRUPT / RGPU_EUNSUPPORTED.
 */
int rgpu_image_check(const void *data, size_t len);

#endif
