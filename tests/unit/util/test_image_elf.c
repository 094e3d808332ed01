/*
 * util/image.c on 64-bit ELF images made here byte by byte: the server's check
 * (rgpu_image_check) and the client's extent (rgpu_image_locate) of images at any address.
 * Images arrive in frame payloads and application buffers, so an ELF may start at an odd
 * address: this test is built with -fsanitize=alignment (and no recovery), so a header read
 * through a misaligned pointer ends it.
 */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "rgpu/image.h"

/*
 * An ELF of 1024 bytes: one program header (at 64: bytes 0x100..0x180), two section headers
 * at 0x200 (the null one and a PROGBITS section, 0x180..0x1c0), a NOBITS section claiming
 * 2^40 bytes at 0x3c0, and data to the end.
 */
#define ELF_LEN 1024

static void make_elf(uint8_t *p)
{
	Elf64_Ehdr eh = {0};
	Elf64_Phdr ph = {0};
	Elf64_Shdr sh[3] = {{0}};

	memset(p, 0x5a, ELF_LEN);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_CUDA;
	eh.e_ehsize = sizeof(eh);
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shoff = 0x200;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 3;
	ph.p_type = PT_LOAD;
	ph.p_offset = 0x100;
	ph.p_filesz = 0x80;
	sh[1].sh_type = SHT_PROGBITS;
	sh[1].sh_offset = 0x180;
	sh[1].sh_size = 0x40;
	sh[2].sh_type = SHT_NOBITS;
	sh[2].sh_offset = 0x3c0;
	sh[2].sh_size = 1ull << 40;
	memcpy(p, &eh, sizeof(eh));
	memcpy(p + eh.e_phoff, &ph, sizeof(ph));
	memcpy(p + eh.e_shoff, sh, sizeof(sh));
	/* data up to ELF_LEN: the last PROGBITS byte is the image's last byte */
	sh[1].sh_offset = 0x2c0;
	sh[1].sh_size = ELF_LEN - 0x2c0;
	memcpy(p + eh.e_shoff + sizeof(Elf64_Shdr), &sh[1], sizeof(sh[1]));
}

/* The checker and the locator on an ELF at every misalignment of an 8-byte boundary. */
static void test_misaligned(void **state)
{
	uint8_t *buf = malloc(ELF_LEN + 16);

	(void)state;
	assert_non_null(buf);
	for (size_t off = 0; off < 8; off++) {
		uint8_t *p = buf + off;
		struct rgpu_image im;

		make_elf(p);
		assert_int_equal(rgpu_image_check(p, ELF_LEN), 0);
		assert_int_equal(rgpu_image_check(p, ELF_LEN - 1), RGPU_ECORRUPT);
		assert_int_equal(rgpu_image_locate(p, &im), 0);
		assert_int_equal(im.kind, RGPU_IMAGE_ELF);
		assert_ptr_equal(im.data, p);
		assert_int_equal(im.size, ELF_LEN);
	}
	free(buf);
}

/* Write the header, program header i or section header i of the ELF at p. */
static void put_ehdr(uint8_t *p, const Elf64_Ehdr *eh)
{
	memcpy(p, eh, sizeof(*eh));
}

static Elf64_Ehdr get_ehdr(const uint8_t *p)
{
	Elf64_Ehdr eh;
	memcpy(&eh, p, sizeof(eh));
	return eh;
}

/* rgpu_image_locate's size of the ELF at p, or its error as a negative number. */
static long long located(const uint8_t *p)
{
	struct rgpu_image im;
	int ret = rgpu_image_locate(p, &im);
	return ret ? ret : (long long)im.size;
}

/*
 * The extent the client ships: a table whose count is 0 is not there, wherever its offset
 * points; an end past 2^64 is refused before any entry is read.
 */
static void test_extent(void **state)
{
	uint8_t *p = malloc(ELF_LEN);
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	(void)state;
	assert_non_null(p);
	make_elf(p);
	assert_int_equal(located(p), ELF_LEN);

	/* no sections, and an e_shoff of 2^48: the segment's end, 0x180, is the extent */
	eh = get_ehdr(p);
	eh.e_shnum = 0;
	eh.e_shoff = 1ull << 48;
	put_ehdr(p, &eh);
	assert_int_equal(located(p), 0x180);
	assert_int_equal(rgpu_image_check(p, 0x180), 0);
	assert_int_equal(rgpu_image_check(p, 0x17f), RGPU_ECORRUPT);

	/* no program headers, an e_phoff past the end: the section table's end, 0x2c0 */
	make_elf(p);
	eh = get_ehdr(p);
	eh.e_phnum = 0;
	eh.e_phoff = 0xdeadbeef00000000ull;
	((Elf64_Shdr *)(p + 0x200))[1].sh_size = 0x10; /* data 0x2c0..0x2d0 */
	put_ehdr(p, &eh);
	assert_int_equal(located(p), 0x2d0);
	assert_int_equal(rgpu_image_check(p, 0x2d0), 0);

	/* neither table: the header alone */
	eh.e_shnum = 0;
	eh.e_shoff = ~0ull;
	put_ehdr(p, &eh);
	assert_int_equal(located(p), sizeof(Elf64_Ehdr));

	/* a program header table whose end wraps around 2^64: refused, nothing read there */
	make_elf(p);
	eh = get_ehdr(p);
	eh.e_phoff = ~0ull - 63;
	eh.e_phnum = 2;
	put_ehdr(p, &eh);
	assert_int_equal(located(p), RGPU_EINVAL);

	/* a segment whose end wraps to 16 */
	make_elf(p);
	memcpy(&ph, p + 64, sizeof(ph));
	ph.p_offset = ~0ull - 15;
	ph.p_filesz = 32;
	memcpy(p + 64, &ph, sizeof(ph));
	assert_int_equal(located(p), RGPU_EINVAL);
	assert_int_equal(rgpu_image_check(p, ELF_LEN), RGPU_ECORRUPT);

	/* a section whose end wraps */
	make_elf(p);
	((Elf64_Shdr *)(p + 0x200))[1].sh_offset = 1ull << 63;
	((Elf64_Shdr *)(p + 0x200))[1].sh_size = 1ull << 63;
	assert_int_equal(located(p), RGPU_EINVAL);

	/* program headers smaller than Elf64_Phdr */
	make_elf(p);
	eh = get_ehdr(p);
	eh.e_phentsize = sizeof(Elf64_Phdr) - 1;
	put_ehdr(p, &eh);
	assert_int_equal(located(p), RGPU_EINVAL);
	assert_int_equal(rgpu_image_check(p, ELF_LEN), RGPU_ECORRUPT);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_misaligned),
	    cmocka_unit_test(test_extent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
