/*
 * Locating and checking module images (dark-api.md §6.2-6.5). The client side trusts the
 * application's pointer as the real driver does; the server side (rgpu_image_check) trusts
 * nothing and checks every offset against the bytes received.
 *
 * A __fatBinC_Wrapper_t comes in two versions (CUDA's fatbinary_section.h). Version 1 is what
 * a whole-program nvcc build registers per translation unit: `data` is the TU's container.
 * Version 2 (FATBINC_LINK_VERSION) is what a program with relocatable device code registers,
 * once per device link (`nvcc -rdc=true` + `-dlink`, CMake's CUDA_SEPARABLE_COMPILATION):
 * crt/link.stub builds it as { magic, 2, the device-linked container, a NULL-terminated array
 * of the TUs' relocatable containers (section __nv_relfatbin) }, and the 13.0 runtime hands
 * that wrapper itself to cuLibraryLoadData. The device-linked container holds the linked
 * executable cubin of each real architecture named at link time: every kernel, every
 * __device__ / __constant__ variable and every parameter layout of the program, with all its
 * cross-TU calls resolved. That container is what rgpu ships for it. It is empty when no real
 * architecture was linked (a PTX-only `-rdc` build): the driver then JIT-links the relocatable
 * PTX of the other containers when the wrapper is loaded. No single container carries that, so
 * rgpu ships a *link bundle* (RGPU_IMAGE_BUNDLE, its own format below): the empty linked
 * container and every relocatable one, which the server turns back into a version-2 wrapper
 * for its driver to link. Every refused image kind, and every wrapper or container whose
 * headers cannot be true (RGPU_EINVAL), is said once at warn.
 *
 * A link bundle, all integers little-endian:
 *   u32 magic "RGLB", u32 version 1, u32 count n (2..65537), u32 zero,
 *   n u64 sizes, then the n containers, each at an offset that is a multiple of 16
 *   (zero padding); container 0 is the device-linked one, 1..n-1 the wrapper's list in order.
 * Its size is exactly what those fields add up to.
 */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PREFIX "image: "
#include "rgpu/err.h"
#include "rgpu/image.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

#define FATBIN_OLD_MAGIC 0x1EE55A01u /* containers of CUDA before 4.0 */
#define FATBIN_HEADER_MIN 16u
#define FATBIN_MAX_SIZE (1ull << 40)
#define PRELINKED_MAX 65536u /* far beyond any program's translation units */

/*
 * An image's headers are read by copying them out: an image may start at any address (a frame
 * payload, an application's buffer), and an ELF's header tables at any offset.
 */
static Elf64_Ehdr elf_hdr(const uint8_t *p)
{
	Elf64_Ehdr eh;

	memcpy(&eh, p, sizeof(eh));
	return eh;
}

/* Program header i of the ELF at p (whose table the caller has checked). */
static Elf64_Phdr elf_phdr(const uint8_t *p, const Elf64_Ehdr *eh, unsigned i)
{
	Elf64_Phdr ph;

	memcpy(&ph, p + eh->e_phoff + (size_t)i * eh->e_phentsize, sizeof(ph));
	return ph;
}

/* Section header i of the ELF at p (whose table the caller has checked). */
static Elf64_Shdr elf_shdr(const uint8_t *p, const Elf64_Ehdr *eh, unsigned i)
{
	Elf64_Shdr sh;

	memcpy(&sh, p + eh->e_shoff + (size_t)i * eh->e_shentsize, sizeof(sh));
	return sh;
}

/*
 * Extent of a 64-bit ELF: the furthest byte its header, its header tables and its segments and
 * non-NOBITS sections reach. A table with no entries is not there, wherever its offset points
 * (a cubin's unused e_phoff or e_shoff may hold anything; extended section numbering, for
 * 65280 sections or more, is no cubin's). RGPU_EINVAL when the headers cannot be true: a table
 * of entries smaller than their struct, or an end beyond 2^64 (before any entry is read).
 */
static int elf_extent(const uint8_t *p, size_t *size)
{
	const Elf64_Ehdr eh = elf_hdr(p);
	uint64_t end = sizeof(eh), e;

	if (eh.e_phnum) {
		if (eh.e_phentsize < sizeof(Elf64_Phdr) ||
		    rgpu_range_end(eh.e_phoff, eh.e_phnum, eh.e_phentsize, &e))
			return RGPU_EINVAL;
		end = MAX(end, e);
	}
	if (eh.e_shnum) {
		if (eh.e_shentsize < sizeof(Elf64_Shdr) ||
		    rgpu_range_end(eh.e_shoff, eh.e_shnum, eh.e_shentsize, &e))
			return RGPU_EINVAL;
		end = MAX(end, e);
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr ph = elf_phdr(p, &eh, i);
		if (rgpu_range_end(ph.p_offset, 1, ph.p_filesz, &e))
			return RGPU_EINVAL;
		end = MAX(end, e);
	}
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		const Elf64_Shdr sh = elf_shdr(p, &eh, i);
		if (sh.sh_type == SHT_NOBITS)
			continue;
		if (rgpu_range_end(sh.sh_offset, 1, sh.sh_size, &e))
			return RGPU_EINVAL;
		end = MAX(end, e);
	}
	*size = (size_t)end;
	return 0;
}

static int is_elf64(const uint8_t *p)
{
	return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == ELFCLASS64;
}

/* The container at p: its extent from its header (dark-api.md §6.3). */
static int container_at(const uint8_t *p, struct rgpu_image *out)
{
	uint16_t hsize;
	uint64_t fat;

	if (!p || rd_le32(p) != RGPU_FATBIN_MAGIC)
		return RGPU_EINVAL;
	hsize = rd_le16(p + 6);
	fat = rd_le64(p + 8);
	if (hsize < FATBIN_HEADER_MIN || fat > FATBIN_MAX_SIZE)
		return RGPU_EINVAL;
	out->data = p;
	out->size = hsize + fat;
	out->kind = RGPU_IMAGE_FATBIN;
	return 0;
}

static const void *wrapper_ptr(const uint8_t *w, size_t off)
{
	const void *v;

	memcpy(&v, w + off, sizeof(v));
	return v;
}

int rgpu_image_prelinked(const void *wrapper, struct rgpu_image *parts, size_t max, size_t *n)
{
	const uint8_t *w = wrapper;
	const void *const *list;
	size_t i;

	if (!w || !n || (max && !parts))
		return RGPU_EINVAL;
	if (rd_le32(w) != RGPU_FATBIN_WRAPPER_MAGIC || rd_le32(w + 4) != RGPU_FATBIN_WRAPPER_LINKED)
		return RGPU_EINVAL;
	list = wrapper_ptr(w, RGPU_FATBIN_WRAPPER_FATBINS_OFF);
	for (i = 0; list && list[i]; i++) {
		struct rgpu_image part = {0};
		if (i == PRELINKED_MAX || container_at(list[i], &part))
			return RGPU_EINVAL;
		if (i < max)
			parts[i] = part;
	}
	*n = i;
	return 0;
}

/* A wrapper's container, or RGPU_EINVAL, said once, when it points to something else. */
static int wrapper_container(const uint8_t *w, struct rgpu_image *out)
{
	const void *data = wrapper_ptr(w, RGPU_FATBIN_WRAPPER_DATA_OFF);
	int ret = container_at(data, out);

	if (ret)
		pr_warn_once("refused: a fatbin wrapper (version %u) whose container pointer %p is "
			     "NULL or not a container",
			     rd_le32(w + 4), data);
	return ret;
}

#define BUNDLE_ALIGN 16u
#define BUNDLE_HDR 16u
#define BUNDLE_MAX_PARTS (PRELINKED_MAX + 1u)

/* Where the bundle's parts start: after its header and sizes, rounded up. */
static uint64_t bundle_first(uint64_t nparts)
{
	return ALIGN_UP(BUNDLE_HDR + 8 * nparts, BUNDLE_ALIGN);
}

/*
 * out describes a version-2 wrapper w whose linked container is empty: make it a link
 * bundle of that container and the wrapper's relocatable ones (data stays the wrapper).
 */
static int bundle_size(const uint8_t *w, struct rgpu_image *out)
{
	struct rgpu_image part;
	const void *const *list = wrapper_ptr(w, RGPU_FATBIN_WRAPPER_FATBINS_OFF);
	uint64_t size = bundle_first(out->prelinked + 1) + ALIGN_UP(out->size, BUNDLE_ALIGN);

	for (size_t i = 0; i < out->prelinked; i++) {
		if (container_at(list[i], &part))
			return RGPU_EINVAL;
		size += ALIGN_UP(part.size, BUNDLE_ALIGN);
	}
	out->data = w;
	out->size = (size_t)size;
	out->kind = RGPU_IMAGE_BUNDLE;
	return 0;
}

void rgpu_image_bundle_write(const struct rgpu_image *img, void *buf)
{
	const uint8_t *w = img->data;
	const void *const *list = wrapper_ptr(w, RGPU_FATBIN_WRAPPER_FATBINS_OFF);
	uint64_t n = img->prelinked + 1, off = bundle_first(n);
	uint8_t *b = buf;

	memset(b, 0, off);
	wr_le32(b, RGPU_IMAGE_BUNDLE_MAGIC);
	wr_le32(b + 4, RGPU_IMAGE_BUNDLE_VERSION);
	wr_le32(b + 8, (uint32_t)n);
	for (uint64_t i = 0; i < n; i++) {
		struct rgpu_image part = {0};
		container_at(i ? list[i - 1] : wrapper_ptr(w, RGPU_FATBIN_WRAPPER_DATA_OFF), &part);
		wr_le64(b + BUNDLE_HDR + 8 * i, part.size);
		memcpy(b + off, part.data, part.size);
		memset(b + off + part.size, 0, ALIGN_UP(part.size, BUNDLE_ALIGN) - part.size);
		off += ALIGN_UP(part.size, BUNDLE_ALIGN);
	}
}

/* A version-2 wrapper: its device-linked container, or a link bundle when that holds no code. */
static int locate_linked(const uint8_t *w, struct rgpu_image *out)
{
	size_t nrel = 0;
	int ret;

	ret = wrapper_container(w, out);
	if (ret)
		return ret;
	ret = rgpu_image_prelinked(w, NULL, 0, &nrel);
	if (ret) {
		pr_warn_once("refused: a -rdc fatbin wrapper whose list of relocatable containers "
			     "holds something else");
		return ret;
	}
	out->wrapper = RGPU_FATBIN_WRAPPER_LINKED;
	out->prelinked = nrel;
	if (out->size > rd_le16((const uint8_t *)out->data + 6))
		return 0;
	if (!nrel) {
		pr_warn_once("refused: a -rdc (relocatable device code) wrapper whose device-linked "
			     "container is empty and which names no relocatable container");
		return RGPU_EINVAL;
	}
	/* a PTX-only -rdc build: the driver JIT-links the relocatable containers */
	return bundle_size(w, out);
}

int rgpu_image_locate(const void *ptr, struct rgpu_image *out)
{
	const uint8_t *p = ptr;

	if (!p || !out)
		return RGPU_EINVAL;
	out->wrapper = 0;
	out->prelinked = 0;
	if (rd_le32(p) == RGPU_FATBIN_WRAPPER_MAGIC) {
		uint32_t version = rd_le32(p + 4);
		int ret;
		if (version == RGPU_FATBIN_WRAPPER_LINKED)
			return locate_linked(p, out);
		if (version != RGPU_FATBIN_WRAPPER_PLAIN) {
			pr_warn_once("refused: a fatbin wrapper of version %u (known: 1, one "
				     "container; 2, -rdc device link)",
				     version);
			return RGPU_EUNSUPPORTED;
		}
		ret = wrapper_container(p, out);
		if (!ret)
			out->wrapper = RGPU_FATBIN_WRAPPER_PLAIN;
		return ret;
	}
	if (rd_le32(p) == RGPU_FATBIN_MAGIC) {
		int ret = container_at(p, out);
		if (ret)
			pr_warn_once("refused: a fatbin container with impossible headers (header "
				     "size %u, %llu bytes of entries)",
				     rd_le16(p + 6), (unsigned long long)rd_le64(p + 8));
		return ret;
	}
	if (rd_le32(p) == FATBIN_OLD_MAGIC) {
		pr_warn_once(
		    "refused: an old-style fatbin container (magic 0x1ee55a01, CUDA before "
		    "4.0)");
		return RGPU_EUNSUPPORTED;
	}
	if (is_elf64(p)) {
		if (elf_extent(p, &out->size)) {
			pr_warn_once("refused: a 64-bit ELF image whose header tables or sections "
				     "cannot be true (entries smaller than their struct, or an end "
				     "beyond 2^64)");
			return RGPU_EINVAL;
		}
		out->data = p;
		out->kind = RGPU_IMAGE_ELF;
		return 0;
	}
	out->data = p;
	out->size = strlen((const char *)p) + 1;
	out->kind = RGPU_IMAGE_PTX;
	return 0;
}

static int check_elf(const uint8_t *p, size_t len)
{
	Elf64_Ehdr eh;

	if (len < sizeof(eh))
		return RGPU_ECORRUPT;
	eh = elf_hdr(p);
	if (eh.e_phnum && (eh.e_phentsize < sizeof(Elf64_Phdr) || eh.e_phoff > len ||
			   (uint64_t)eh.e_phnum * eh.e_phentsize > len - eh.e_phoff))
		return RGPU_ECORRUPT;
	if (eh.e_shnum && (eh.e_shentsize < sizeof(Elf64_Shdr) || eh.e_shoff > len ||
			   (uint64_t)eh.e_shnum * eh.e_shentsize > len - eh.e_shoff))
		return RGPU_ECORRUPT;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr ph = elf_phdr(p, &eh, i);
		if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
			return RGPU_ECORRUPT;
	}
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		const Elf64_Shdr sh = elf_shdr(p, &eh, i);
		if (sh.sh_type != SHT_NOBITS &&
		    (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset))
			return RGPU_ECORRUPT;
	}
	return 0;
}

/* A fatbin container of exactly len bytes: its entries tile it. */
static int check_container(const uint8_t *p, size_t len)
{
	uint16_t hsize;
	uint64_t fat, off;

	if (len < 16 || rd_le32(p) != RGPU_FATBIN_MAGIC)
		return RGPU_ECORRUPT;
	hsize = rd_le16(p + 6);
	fat = rd_le64(p + 8);
	if (hsize < 16 || hsize > len || fat != len - hsize)
		return RGPU_ECORRUPT;
	/* the entries must tile the container exactly */
	for (off = hsize; off < len;) {
		uint32_t eh, payload;
		if (len - off < 16)
			return RGPU_ECORRUPT;
		eh = rd_le32(p + off + 4);
		payload = rd_le32(p + off + 8);
		if (eh < 16 || (uint64_t)eh + payload > len - off)
			return RGPU_ECORRUPT;
		off += (uint64_t)eh + payload;
	}
	return 0;
}

/* A link bundle of exactly len bytes (the format is at the top of this file). */
static int check_bundle(const uint8_t *p, size_t len)
{
	uint64_t n, off;

	if (len < BUNDLE_HDR || rd_le32(p + 4) != RGPU_IMAGE_BUNDLE_VERSION || rd_le32(p + 12))
		return RGPU_ECORRUPT;
	n = rd_le32(p + 8);
	if (n < 2 || n > BUNDLE_MAX_PARTS || bundle_first(n) > len)
		return RGPU_ECORRUPT;
	off = bundle_first(n);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t size = rd_le64(p + BUNDLE_HDR + 8 * i);
		if (size > len - off || ALIGN_UP(size, BUNDLE_ALIGN) > len - off ||
		    check_container(p + off, size))
			return RGPU_ECORRUPT;
		off += ALIGN_UP(size, BUNDLE_ALIGN);
	}
	return off == len ? 0 : RGPU_ECORRUPT;
}

int rgpu_image_bundle_wrap(const void *bundle, size_t len, void **wrapper)
{
	const uint8_t *p = bundle;
	uint64_t n, off, head;
	uint8_t *blk, *copy;
	const void **list;

	if (!p || !wrapper || len < 4 || rd_le32(p) != RGPU_IMAGE_BUNDLE_MAGIC ||
	    check_bundle(p, len))
		return RGPU_ECORRUPT;
	n = rd_le32(p + 8);
	/* one block: the wrapper, its NULL-terminated list, then the bundle, 16-byte aligned */
	head = ALIGN_UP(24 + 8 * n, BUNDLE_ALIGN);
	if (posix_memalign((void **)&blk, BUNDLE_ALIGN, head + len))
		return RGPU_ENOMEM;
	copy = memcpy(blk + head, p, len);
	list = (const void **)(blk + 24);
	off = bundle_first(n);
	for (uint64_t i = 0; i < n; i++) {
		const void *part = copy + off;
		if (i == 0)
			memcpy(blk + RGPU_FATBIN_WRAPPER_DATA_OFF, &part, sizeof(part));
		else
			list[i - 1] = part;
		off += ALIGN_UP(rd_le64(p + BUNDLE_HDR + 8 * i), BUNDLE_ALIGN);
	}
	list[n - 1] = NULL;
	wr_le32(blk, RGPU_FATBIN_WRAPPER_MAGIC);
	wr_le32(blk + 4, RGPU_FATBIN_WRAPPER_LINKED);
	memcpy(blk + RGPU_FATBIN_WRAPPER_FATBINS_OFF, &list, sizeof(list));
	*wrapper = blk;
	return 0;
}

int rgpu_image_check(const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!p || len < 4)
		return RGPU_ECORRUPT;
	if (rd_le32(p) == RGPU_FATBIN_MAGIC)
		return check_container(p, len);
	if (rd_le32(p) == RGPU_IMAGE_BUNDLE_MAGIC)
		return check_bundle(p, len);
	if (rd_le32(p) == RGPU_FATBIN_WRAPPER_MAGIC)
		return RGPU_ECORRUPT; /* wrappers hold pointers: never valid on the wire */
	if (len >= 5 && is_elf64(p))
		return check_elf(p, len);
	if (memchr(p, '\0', len) != p + len - 1)
		return RGPU_ECORRUPT; /* PTX: exactly one terminating NUL */
	return 0;
}
