/*
 * Locating and checking module images (dark-api.md §6.2-6.5). The client side trusts the
 * application's pointer as the real driver does; the server side (rgpu_image_check) trusts
 * nothing and checks every offset against the bytes received.
 */
#include <elf.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/image.h"
#include "rgpu/util.h"

/* Extent of a 64-bit ELF: the furthest byte any header or non-NOBITS section reaches. */
static size_t elf_extent(const uint8_t *p)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
	size_t end = sizeof(*eh);

	end = MAX(end, (size_t)(eh->e_phoff + (uint64_t)eh->e_phnum * eh->e_phentsize));
	end = MAX(end, (size_t)(eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize));
	for (unsigned i = 0; i < eh->e_phnum && eh->e_phentsize >= sizeof(Elf64_Phdr); i++) {
		const Elf64_Phdr *ph =
			(const Elf64_Phdr *)(p + eh->e_phoff + (size_t)i * eh->e_phentsize);
		end = MAX(end, (size_t)(ph->p_offset + ph->p_filesz));
	}
	for (unsigned i = 0; i < eh->e_shnum && eh->e_shentsize >= sizeof(Elf64_Shdr); i++) {
		const Elf64_Shdr *sh =
			(const Elf64_Shdr *)(p + eh->e_shoff + (size_t)i * eh->e_shentsize);
		if (sh->sh_type != SHT_NOBITS)
			end = MAX(end, (size_t)(sh->sh_offset + sh->sh_size));
	}
	return end;
}

static int is_elf64(const uint8_t *p)
{
	return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == ELFCLASS64;
}

int rgpu_image_locate(const void *ptr, struct rgpu_image *out)
{
	const uint8_t *p = ptr;

	if (!p)
		return RGPU_EINVAL;
	if (rd_le32(p) == RGPU_FATBIN_WRAPPER_MAGIC) {
		int version = (int)rd_le32(p + 4);
		const void *data;
		if (version != 1)
			return RGPU_EUNSUPPORTED;
		memcpy(&data, p + 8, sizeof(data));
		if (!data || rd_le32(data) != RGPU_FATBIN_MAGIC)
			return RGPU_EINVAL;
		p = data;
	}
	if (rd_le32(p) == RGPU_FATBIN_MAGIC) {
		uint16_t hsize = rd_le16(p + 6);
		uint64_t fat = rd_le64(p + 8);
		if (hsize < 16 || fat > (1ull << 40))
			return RGPU_EINVAL;
		out->data = p;
		out->size = hsize + fat;
		out->kind = RGPU_IMAGE_FATBIN;
		return 0;
	}
	if (rd_le32(p) == 0x1EE55A01u)
		return RGPU_EUNSUPPORTED;
	if (is_elf64(p)) {
		out->data = p;
		out->size = elf_extent(p);
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
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
	if (len < sizeof(*eh))
		return RGPU_ECORRUPT;
	if (eh->e_phnum && (eh->e_phentsize < sizeof(Elf64_Phdr) || eh->e_phoff > len ||
			    (uint64_t)eh->e_phnum * eh->e_phentsize > len - eh->e_phoff))
		return RGPU_ECORRUPT;
	if (eh->e_shnum && (eh->e_shentsize < sizeof(Elf64_Shdr) || eh->e_shoff > len ||
			    (uint64_t)eh->e_shnum * eh->e_shentsize > len - eh->e_shoff))
		return RGPU_ECORRUPT;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph =
			(const Elf64_Phdr *)(p + eh->e_phoff + (size_t)i * eh->e_phentsize);
		if (ph->p_offset > len || ph->p_filesz > len - ph->p_offset)
			return RGPU_ECORRUPT;
	}
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh =
			(const Elf64_Shdr *)(p + eh->e_shoff + (size_t)i * eh->e_shentsize);
		if (sh->sh_type != SHT_NOBITS &&
		    (sh->sh_offset > len || sh->sh_size > len - sh->sh_offset))
			return RGPU_ECORRUPT;
	}
	return 0;
}

int rgpu_image_check(const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!p || len < 4)
		return RGPU_ECORRUPT;
	if (rd_le32(p) == RGPU_FATBIN_MAGIC) {
		uint16_t hsize;
		uint64_t fat, off;
		if (len < 16)
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
	if (rd_le32(p) == RGPU_FATBIN_WRAPPER_MAGIC)
		return RGPU_ECORRUPT; /* wrappers hold pointers: never valid on the wire */
	if (len >= 5 && is_elf64(p))
		return check_elf(p, len);
	if (memchr(p, '\0', len) != p + len - 1)
		return RGPU_ECORRUPT; /* PTX: exactly one terminating NUL */
	return 0;
}
