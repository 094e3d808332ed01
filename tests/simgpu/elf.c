/*
 * Reading module images for what a host-memory driver needs from them: kernel names, each
 * kernel's parameter layout and register count, and the __device__ / __constant__ variables
 * with their sizes and initial bytes. Accepts every image kind the driver API receives
 * (dark-api.md §6): a __fatBinC_Wrapper_t (version 1, or version 2 of an -rdc device link:
 * its device-linked container), a fatbin container (one ELF entry for sm_90, or
 * failing that a PTX entry, Zstd-decompressed when flagged), a 64-bit ELF cubin, or PTX text.
 *
 * From a cubin: kernels are STT_FUNC symbols whose section is ".text.<name>"; parameters
 * come from the EIATTR_KPARAM_INFO records of ".nv.info.<name>"; static shared memory is the
 * size of ".nv.shared.<name>" less the block's reserved part (ELF_RESERVED_SMEM); registers
 * and frame size from the REGCOUNT / FRAME_SIZE records of ".nv.info"; variables are
 * STT_OBJECT symbols in ".nv.global*" (zero-filled or initialised) and ".nv.constant<bank>"
 * sections.
 * From PTX: ".entry NAME(.param ...)" lists laid out with natural alignment (or .align), each
 * kernel's static shared memory from the ".shared" declarations of its body, and top-level
 * ".global" / ".const" declarations with their numeric initialisers (others zero-filled).
 *
 * The image is trusted as far as the real driver trusts it (its own headers give its
 * extent), but every offset read inside it is checked against that extent: a malformed image
 * is CUDA_ERROR_INVALID_IMAGE, never a read out of bounds. Never modifies the image.
 */
#include <ctype.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "rgpu/err.h"
#include "rgpu/image.h"
#include "rgpu/util.h"
#include "sim.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

/* .nv.info attribute records: {u8 format, u8 attribute, u16 value or size, [size bytes]} */
#define EIFMT_SVAL 0x04
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f

/* fatbin entry header (dark-api.md §6.4) */
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2
#define FATBIN_FLAG_LZ4 0x2000
#define FATBIN_FLAG_ZSTD 0x8000
#define FATBIN_ENTRY_MIN 64

#define MAX_ELF (1ull << 32) /* cuBLAS's largest cubins are a few MiB */

/*
 * Executable sm_90 cubins whose code uses the reserved shared memory (a symbol named
 * ".nv.reservedSmem.offset0": nvcc's plain, -G and device-linked output alike) start every
 * kernel's .nv.shared.<kernel> section with the 1 KiB the hardware reserves in each block
 * (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK): a 2048-byte __shared__ array makes a
 * 3072-byte section, a kernel with only dynamic shared memory a 1024-byte one. The driver's
 * static size leaves the reserved part out (2048 on an H100, driver 580; ptxas -v says the same).
 * sm_80 cubins and relocatable ones have no such symbol or no such padding.
 */
#define ELF_RESERVED_SMEM 1024u

/* sim_image_free() - drop a reference to img; the last one frees it. NULL is ignored. */
void sim_image_free(struct sim_image *img)
{
	if (!img || __atomic_sub_fetch(&img->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (unsigned i = 0; i < img->nkernels; i++) {
		free(img->kernels[i].name);
		free(img->kernels[i].params);
	}
	for (unsigned i = 0; i < img->nglobals; i++) {
		free(img->globals[i].name);
		free(img->globals[i].init);
	}
	free(img->kernels);
	free(img->globals);
	free(img);
}

static struct sim_kernel_info *add_kernel(struct sim_image *img, const char *name, size_t len)
{
	struct sim_kernel_info *v = realloc(img->kernels, (img->nkernels + 1) * sizeof(*v)), *k;

	if (!v)
		return NULL;
	img->kernels = v;
	k = &v[img->nkernels];
	memset(k, 0, sizeof(*k));
	k->name = strndup(name, len);
	if (!k->name)
		return NULL;
	img->nkernels++;
	return k;
}

static int add_param(struct sim_kernel_info *k, unsigned ordinal, uint32_t off, uint32_t size)
{
	if (ordinal >= k->nparams) {
		struct sim_param *v = realloc(k->params, (ordinal + 1) * sizeof(*v));
		if (!v)
			return -1;
		memset(&v[k->nparams], 0, (ordinal + 1 - k->nparams) * sizeof(*v));
		k->params = v;
		k->nparams = ordinal + 1;
	}
	k->params[ordinal].offset = off;
	k->params[ordinal].size = size;
	return 0;
}

static int add_global(struct sim_image *img, const char *name, size_t len, size_t size,
		      const void *init, int managed)
{
	struct sim_global_info *v = realloc(img->globals, (img->nglobals + 1) * sizeof(*v)), *g;

	if (!v)
		return -1;
	img->globals = v;
	g = &v[img->nglobals];
	memset(g, 0, sizeof(*g));
	g->name = strndup(name, len);
	g->size = size;
	g->managed = managed;
	if (!g->name)
		return -1;
	if (init && size) {
		g->init = malloc(size);
		if (!g->init) {
			free(g->name);
			return -1;
		}
		memcpy(g->init, init, size);
	}
	img->nglobals++;
	return 0;
}

/* --- ELF cubin ---------------------------------------------------------------------------- */

struct elf {
	const uint8_t *p;
	size_t n;
	const Elf64_Shdr *sh;
	unsigned shnum;
	const char *shstr;
	size_t shstr_n;
};

/* Bytes of section i, or NULL (NOBITS, or outside the image). */
static const uint8_t *sec_data(const struct elf *e, unsigned i, size_t *len)
{
	const Elf64_Shdr *s = &e->sh[i];

	if (s->sh_type == SHT_NOBITS || s->sh_offset > e->n || s->sh_size > e->n - s->sh_offset)
		return NULL;
	*len = s->sh_size;
	return e->p + s->sh_offset;
}

static const char *str_at(const char *tab, size_t n, uint64_t off)
{
	if (off >= n || !memchr(tab + off, '\0', n - off))
		return NULL;
	return tab + off;
}

static const char *sec_name(const struct elf *e, unsigned i)
{
	const char *s = str_at(e->shstr, e->shstr_n, e->sh[i].sh_name);

	return s ? s : "";
}

static int find_sec(const struct elf *e, const char *prefix, const char *name)
{
	size_t pl = strlen(prefix);

	for (unsigned i = 1; i < e->shnum; i++) {
		const char *s = sec_name(e, i);
		if (!strncmp(s, prefix, pl) && !strcmp(s + pl, name))
			return (int)i;
	}
	return -1;
}

/* Walks the attribute records of .nv.info.<kernel> for its parameter layout. */
static int parse_kinfo(struct sim_kernel_info *k, const uint8_t *d, size_t len)
{
	size_t off = 0;

	while (off + 4 <= len) {
		unsigned fmt = d[off], attr = d[off + 1];
		size_t size = fmt == EIFMT_SVAL ? rd_le16(d + off + 2) : 0;
		const uint8_t *v = d + off + 4;

		if (size > len - off - 4)
			return -1;
		if (fmt == EIFMT_SVAL && attr == EIATTR_KPARAM_INFO && size >= 12) {
			/* u32 index, u16 ordinal, u16 offset, u32 {flags:18, size:14} */
			if (add_param(k, rd_le16(v + 4), rd_le16(v + 6), rd_le32(v + 8) >> 18))
				return -1;
		}
		off += 4 + size;
	}
	return 0;
}

/* Walks .nv.info for per-function registers and frame sizes (keyed by symbol index). */
static void parse_info(struct sim_image *img, const unsigned *sym_of_kernel, const uint8_t *d,
		       size_t len)
{
	size_t off = 0;

	while (off + 4 <= len) {
		unsigned fmt = d[off], attr = d[off + 1];
		size_t size = fmt == EIFMT_SVAL ? rd_le16(d + off + 2) : 0;
		const uint8_t *v = d + off + 4;

		if (size > len - off - 4)
			return;
		if (fmt == EIFMT_SVAL && size >= 8 &&
		    (attr == EIATTR_REGCOUNT || attr == EIATTR_FRAME_SIZE)) {
			for (unsigned i = 0; i < img->nkernels; i++) {
				if (sym_of_kernel[i] != rd_le32(v))
					continue;
				if (attr == EIATTR_REGCOUNT)
					img->kernels[i].regs = (int)rd_le32(v + 4);
				else
					img->kernels[i].local_bytes = (int)rd_le32(v + 4);
			}
		}
		off += 4 + size;
	}
}

static bool is_var_section(const char *s)
{
	if (!strncmp(s, ".nv.global", 10))
		return true;
	/* .nv.constant0.* are parameter banks; other banks hold __constant__ variables */
	return !strncmp(s, ".nv.constant", 12) && strncmp(s, ".nv.constant0", 13);
}

static CUresult parse_elf(const uint8_t *p, size_t n, struct sim_image **out)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
	struct sim_image *img;
	struct elf e = {.p = p, .n = n};
	const Elf64_Sym *syms = NULL;
	const char *strtab = NULL;
	size_t nsyms = 0, strtab_n = 0, len;
	unsigned *kernel_sym = NULL;
	const uint8_t *d;
	int symsec = -1;
	uint64_t reserved_smem = 0;

	/* the extent comes from the headers: an absurd one means they are lying */
	if (n < sizeof(*eh) || n > MAX_ELF || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_CUDA || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > n ||
	    (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > n - eh->e_shoff ||
	    eh->e_shstrndx >= eh->e_shnum)
		return CUDA_ERROR_INVALID_IMAGE;
	e.sh = (const Elf64_Shdr *)(p + eh->e_shoff);
	e.shnum = eh->e_shnum;
	e.shstr = (const char *)sec_data(&e, eh->e_shstrndx, &e.shstr_n);
	if (!e.shstr)
		return CUDA_ERROR_INVALID_IMAGE;

	img = calloc(1, sizeof(*img));
	if (!img)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->refs = 1;
	/* e_flags: the SM in bits 8-15 (CUDA 12.8 and later), in bits 0-7 before */
	img->binary_version = (eh->e_flags >> 8) & 0xff ? (int)((eh->e_flags >> 8) & 0xff)
							: (int)(eh->e_flags & 0xff);

	for (unsigned i = 1; i < e.shnum; i++)
		if (e.sh[i].sh_type == SHT_SYMTAB)
			symsec = (int)i;
	if (symsec >= 0) {
		d = sec_data(&e, (unsigned)symsec, &len);
		if (d && e.sh[symsec].sh_link < e.shnum)
			strtab = (const char *)sec_data(&e, e.sh[symsec].sh_link, &strtab_n);
		if (!strtab) {
			sim_image_free(img);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		syms = (const Elf64_Sym *)d;
		nsyms = len / sizeof(Elf64_Sym);
	}
	for (size_t i = 0; i < nsyms && eh->e_type == ET_EXEC; i++) {
		const char *name = str_at(strtab, strtab_n, syms[i].st_name);
		if (name && !strcmp(name, ".nv.reservedSmem.offset0"))
			reserved_smem = ELF_RESERVED_SMEM;
	}
	kernel_sym = calloc(nsyms ? nsyms : 1, sizeof(*kernel_sym));
	if (!kernel_sym)
		goto oom;
	for (size_t i = 0; i < nsyms; i++) {
		const Elf64_Sym *s = &syms[i];
		const char *name = str_at(strtab, strtab_n, s->st_name), *sn;
		int type = ELF64_ST_TYPE(s->st_info);

		if (!name || !*name || s->st_shndx == SHN_UNDEF || s->st_shndx >= e.shnum)
			continue;
		sn = sec_name(&e, s->st_shndx);
		if (type == STT_FUNC && !strncmp(sn, ".text.", 6) && !strcmp(sn + 6, name)) {
			struct sim_kernel_info *k = add_kernel(img, name, strlen(name));
			int info, shared;
			if (!k)
				goto oom;
			kernel_sym[img->nkernels - 1] = (unsigned)i;
			info = find_sec(&e, ".nv.info.", name);
			if (info >= 0 && (d = sec_data(&e, (unsigned)info, &len)) &&
			    parse_kinfo(k, d, len)) {
				sim_image_free(img);
				free(kernel_sym);
				return CUDA_ERROR_INVALID_IMAGE;
			}
			shared = find_sec(&e, ".nv.shared.", name);
			if (shared >= 0)
				k->shared_bytes = (int)(e.sh[shared].sh_size -
							MIN(e.sh[shared].sh_size, reserved_smem));
		} else if ((type == STT_OBJECT || type == STT_LOPROC) && is_var_section(sn)) {
			/* (a relocatable cubin's variables have type 13, STT_LOPROC) */
			const void *init = NULL;
			if (e.sh[s->st_shndx].sh_type != SHT_NOBITS) {
				d = sec_data(&e, s->st_shndx, &len);
				if (!d || s->st_value > len || s->st_size > len - s->st_value) {
					sim_image_free(img);
					free(kernel_sym);
					return CUDA_ERROR_INVALID_IMAGE;
				}
				init = d + s->st_value;
			}
			/* nvcc marks a __managed__ variable's symbol with st_other bit 4 */
			if (add_global(img, name, strlen(name), s->st_size, init,
				       (s->st_other & 4) != 0))
				goto oom;
		}
	}
	for (unsigned i = 1; i < e.shnum; i++)
		if (!strcmp(sec_name(&e, i), ".nv.info") && (d = sec_data(&e, i, &len)))
			parse_info(img, kernel_sym, d, len);
	free(kernel_sym);
	*out = img;
	return CUDA_SUCCESS;
oom:
	free(kernel_sym);
	sim_image_free(img);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* --- PTX ----------------------------------------------------------------------------------- */

struct lexer {
	const char *p, *end;
	const char *tok;
	size_t len;
};

static bool is_tokch(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '$' || c == '%';
}

/* Next token: a word (directive, identifier, number) or one punctuation character. */
static bool next(struct lexer *lx)
{
	const char *p = lx->p;

	for (;;) {
		while (p < lx->end && isspace((unsigned char)*p))
			p++;
		if (p + 1 < lx->end && p[0] == '/' && p[1] == '/') {
			while (p < lx->end && *p != '\n')
				p++;
		} else if (p + 1 < lx->end && p[0] == '/' && p[1] == '*') {
			const char *q = p + 2;
			while (q + 1 < lx->end && !(q[0] == '*' && q[1] == '/'))
				q++;
			p = q + 2 <= lx->end ? q + 2 : lx->end;
		} else if (p < lx->end && *p == '"') { /* strings (file names): one token */
			const char *q = p + 1;
			while (q < lx->end && *q != '"')
				q++;
			lx->tok = p;
			lx->len = (size_t)(MIN(q + 1, lx->end) - p);
			lx->p = p + lx->len;
			return true;
		} else {
			break;
		}
	}
	if (p >= lx->end)
		return false;
	lx->tok = p;
	if (is_tokch(*p)) {
		while (p < lx->end && is_tokch(*p))
			p++;
	} else {
		p++;
	}
	lx->len = (size_t)(p - lx->tok);
	lx->p = p;
	return true;
}

static bool is(const struct lexer *lx, const char *s)
{
	return lx->len == strlen(s) && !memcmp(lx->tok, s, lx->len);
}

/* Bytes of a PTX fundamental type, 0 if the token is not one. */
static unsigned type_size(const struct lexer *lx)
{
	static const struct {
		const char *t;
		unsigned size;
	} types[] = {
	    {".b8", 1},	    {".u8", 1},		{".s8", 1},	 {".pred", 1},	{".b16", 2},
	    {".u16", 2},    {".s16", 2},	{".f16", 2},	 {".bf16", 2},	{".b32", 4},
	    {".u32", 4},    {".s32", 4},	{".f32", 4},	 {".f16x2", 4}, {".bf16x2", 4},
	    {".b64", 8},    {".u64", 8},	{".s64", 8},	 {".f64", 8},	{".b128", 16},
	    {".texref", 8}, {".samplerref", 8}, {".surfref", 8},
	};

	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (is(lx, types[i].t))
			return types[i].size;
	return 0;
}

/* Bits of one initialiser token: decimal, 0x hex, or a 0f / 0d float bit pattern. */
static bool init_value(const struct lexer *lx, bool neg, uint64_t *v)
{
	char buf[32], *end;
	const char *t = lx->tok;
	size_t n = lx->len;

	if (n >= sizeof(buf) || !isdigit((unsigned char)*t))
		return false;
	if (n > 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F' || t[1] == 'd' || t[1] == 'D')) {
		t += 2; /* the hexadecimal bits of an IEEE value */
		n -= 2;
		memcpy(buf, "0x", 2);
		memcpy(buf + 2, t, n);
		buf[n + 2] = '\0';
	} else {
		memcpy(buf, t, n);
		buf[n] = '\0';
	}
	if (strchr(buf, '.'))
		return false; /* a decimal float literal: left zero-filled */
	*v = strtoull(buf, &end, 0);
	if (*end == 'U' || *end == 'u')
		end++;
	if (*end)
		return false;
	if (neg)
		*v = -*v;
	return true;
}

/*
 * One declaration after .param/.global/.const/.shared:
 * [.align N] [.vN] TYPE name[N]... [= init];
 * stops at `stop` (',' or ')' for parameters, ';' for variables) at bracket depth 0, which it
 * consumes. Returns the size (0 if unknown) and the name. With init non-NULL, an initialiser of
 * numbers ("= 5", "= {1, 2, 3}", "= 0f3F800000") is returned there as the variable's bytes
 * (malloc'd, the size returned); one naming an address (generic(sym)) or a decimal float
 * leaves *init NULL, and the variable zero-filled.
 */
static size_t decl(struct lexer *lx, char stop, size_t *align, const char **name, size_t *nlen,
		   uint8_t **init)
{
	size_t esize = 0, count = 1, vec = 1, size, nvals = 0, cap = 0;
	bool in_init = false, ptr = false, init_ok = true, neg = false;
	uint64_t *vals = NULL;

	*align = 0;
	*name = NULL;
	*nlen = 0;
	if (init)
		*init = NULL;
	while (next(lx)) {
		if (lx->len == 1 && (*lx->tok == stop || (stop == ',' && *lx->tok == ')')))
			break;
		if (in_init) {
			uint64_t v;
			if (!init || !init_ok || (lx->len == 1 && strchr("{},", *lx->tok)))
				continue;
			if (lx->len == 1 && *lx->tok == '-') {
				neg = true;
				continue;
			}
			if (nvals == cap) {
				uint64_t *nv = realloc(vals, (cap ? cap * 2 : 16) * sizeof(*vals));
				if (!nv) {
					init_ok = false;
					continue;
				}
				vals = nv;
				cap = cap ? cap * 2 : 16;
			}
			if (init_value(lx, neg, &v))
				vals[nvals++] = v;
			else
				init_ok = false;
			neg = false;
			continue;
		}
		if (is(lx, ".ptr")) {
			ptr = true; /* a .align after it is the pointee's, not the parameter's */
		} else if (is(lx, ".align")) {
			if (next(lx) && !ptr)
				*align = strtoul(lx->tok, NULL, 0);
		} else if (is(lx, ".v2") || is(lx, ".v4") || is(lx, ".v8")) {
			vec = (size_t)(lx->tok[2] - '0');
		} else if (type_size(lx)) {
			esize = type_size(lx);
		} else if (*lx->tok == '[') {
			if (next(lx) && isdigit((unsigned char)*lx->tok)) {
				count *= strtoul(lx->tok, NULL, 0);
				next(lx); /* ] */
			} else {
				count = 0; /* [] : size from an initialiser, unknown here */
			}
		} else if (*lx->tok == '=') {
			in_init = true;
		} else if (*lx->tok != '.' && !*name &&
			   (isalpha((unsigned char)*lx->tok) || *lx->tok == '_' ||
			    *lx->tok == '$')) {
			*name = lx->tok;
			*nlen = lx->len;
		}
	}
	size = esize * vec * count;
	if (!*align)
		*align = esize ? esize : 1;
	if (init && init_ok && nvals && esize && nvals <= vec * count &&
	    (*init = calloc(1, size))) {
		for (size_t i = 0; i < nvals; i++) /* little-endian, as the device stores them */
			for (size_t b = 0; b < esize; b++)
				(*init)[i * esize + b] = (uint8_t)(vals[i] >> (8 * b));
	}
	free(vals);
	return size;
}

static CUresult parse_ptx(const char *text, size_t n, struct sim_image **out)
{
	struct lexer lx = {text, text + strnlen(text, n), NULL, 0};
	struct sim_image *img;
	int depth = 0, parens = 0, body = -1, pending = -1; /* the kernel whose body is open */
	bool seen_version = false, extern_decl = false;

	img = calloc(1, sizeof(*img));
	if (!img)
		return CUDA_ERROR_OUT_OF_MEMORY;
	img->refs = 1;
	while (next(&lx)) {
		if (*lx.tok == '{') {
			if (!depth++)
				body = pending;
			pending = -1;
		} else if (*lx.tok == '}') {
			if (!--depth)
				body = -1;
		} else if (*lx.tok == '(') {
			parens++;
		} else if (*lx.tok == ')') {
			parens--;
		} else if (depth == 1 && !parens && body >= 0 && is(&lx, ".shared")) {
			/* a kernel's static shared memory: its body's .shared declarations */
			const char *name;
			size_t align, nlen, size = decl(&lx, ';', &align, &name, &nlen, NULL);
			struct sim_kernel_info *k = &img->kernels[body];
			k->shared_bytes = (int)(ALIGN_UP((size_t)k->shared_bytes, align) + size);
		} else if (depth || parens) {
			continue;
		} else if (is(&lx, ".func")) {
			pending = -1;
		} else if (is(&lx, ".version")) {
			seen_version = true;
			if (next(&lx)) {
				unsigned maj = 0, min = 0;
				sscanf(lx.tok, "%u.%u", &maj, &min);
				img->ptx_version = (int)(maj * 10 + min);
			}
		} else if (is(&lx, ".extern")) {
			extern_decl = true;
			continue;
		} else if (is(&lx, ".entry")) {
			struct sim_kernel_info *k;
			uint32_t off = 0;
			if (!next(&lx) || !(k = add_kernel(img, lx.tok, lx.len)))
				goto bad;
			pending = (int)img->nkernels - 1;
			if (!next(&lx))
				goto bad;
			if (*lx.tok == '(') {
				/* the parameter list, up to the closing parenthesis */
				while (lx.p < lx.end) {
					const char *save = lx.p, *name;
					size_t align, nlen, size;
					if (!next(&lx))
						goto bad;
					if (*lx.tok == ')')
						break;
					if (!is(&lx, ".param")) {
						lx.p = save;
						goto bad;
					}
					size = decl(&lx, ',', &align, &name, &nlen, NULL);
					off = (uint32_t)ALIGN_UP(off, align);
					if (add_param(k, k->nparams, off, (uint32_t)size))
						goto oom;
					off += (uint32_t)size;
					if (lx.tok && *lx.tok == ')')
						break;
				}
			} else if (*lx.tok == '{') {
				depth++;
				body = pending;
				pending = -1;
			}
		} else if (is(&lx, ".global") || is(&lx, ".const")) {
			const char *name;
			uint8_t *init;
			size_t align, nlen, size = decl(&lx, ';', &align, &name, &nlen, &init);
			int bad_add =
			    name && !extern_decl && add_global(img, name, nlen, size, init, 0);
			free(init);
			if (bad_add)
				goto oom;
		}
		extern_decl = false;
	}
	if (!seen_version)
		goto bad;
	*out = img;
	return CUDA_SUCCESS;
bad:
	sim_image_free(img);
	return CUDA_ERROR_INVALID_PTX;
oom:
	sim_image_free(img);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* --- fatbin container ----------------------------------------------------------------------- */

static bool runs_here(uint32_t arch)
{
	return arch / 10 == SIM_SM / 10 && arch <= SIM_SM; /* SASS runs within its major only */
}

static CUresult parse_fatbin(const uint8_t *p, size_t n, struct sim_image **out)
{
	const uint8_t *elf = NULL, *ptx = NULL, *ent, *payload;
	uint32_t elf_arch = 0, ptx_arch = 0;
	uint64_t flags, usize;
	size_t off = rd_le16(p + 6), len;
	void *buf = NULL;
	CUresult r;

	while (off < n) {
		uint32_t hs, ps, arch;
		if (n - off < FATBIN_ENTRY_MIN)
			return CUDA_ERROR_INVALID_IMAGE;
		hs = rd_le32(p + off + 4);
		ps = rd_le32(p + off + 8);
		arch = rd_le32(p + off + 28);
		if (hs < FATBIN_ENTRY_MIN || hs > n - off || ps > n - off - hs)
			return CUDA_ERROR_INVALID_IMAGE;
		if (rd_le16(p + off) == FATBIN_KIND_ELF && runs_here(arch) && arch >= elf_arch) {
			elf = p + off;
			elf_arch = arch;
		} else if (rd_le16(p + off) == FATBIN_KIND_PTX && arch <= SIM_SM &&
			   arch >= ptx_arch) {
			ptx = p + off;
			ptx_arch = arch;
		}
		off += (size_t)hs + ps;
	}
	ent = elf ? elf : ptx;
	if (!ent)
		return CUDA_ERROR_NO_BINARY_FOR_GPU;
	payload = ent + rd_le32(ent + 4);
	len = rd_le32(ent + 8);
	flags = rd_le64(ent + 40);
	if (flags & FATBIN_FLAG_LZ4) {
		sim_log(
		    "module image refused: its sm_%u entry is LZ4-compressed (only Zstd is read)",
		    elf ? elf_arch : ptx_arch);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (flags & FATBIN_FLAG_ZSTD) {
		size_t csize = rd_le32(ent + 16), got;
		usize = rd_le64(ent + 56);
		if (csize > len || usize == 0 || usize > (1ull << 32))
			return CUDA_ERROR_INVALID_IMAGE;
		buf = malloc(usize + 1);
		if (!buf)
			return CUDA_ERROR_OUT_OF_MEMORY;
		got = ZSTD_decompress(buf, usize, payload, csize);
		if (ZSTD_isError(got) || got != usize) {
			free(buf);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		((char *)buf)[usize] = '\0';
		payload = buf;
		len = usize;
	}
	r = elf ? parse_elf(payload, len, out) : parse_ptx((const char *)payload, len, out);
	if (r == CUDA_SUCCESS && !elf)
		(*out)->binary_version = 0;
	free(buf);
	return r;
}

/* Move src's kernels and variables to the end of dst's; src is freed. */
static CUresult merge_image(struct sim_image *dst, struct sim_image *src)
{
	struct sim_kernel_info *k = NULL;
	struct sim_global_info *g = NULL;

	if (src->nkernels &&
	    !(k = realloc(dst->kernels, (dst->nkernels + src->nkernels) * sizeof(*k))))
		goto oom;
	if (k)
		dst->kernels = k;
	if (src->nglobals &&
	    !(g = realloc(dst->globals, (dst->nglobals + src->nglobals) * sizeof(*g))))
		goto oom;
	if (g)
		dst->globals = g;
	if (src->nkernels) /* (memcpy from or to NULL is undefined even for 0 bytes) */
		memcpy(dst->kernels + dst->nkernels, src->kernels, src->nkernels * sizeof(*k));
	if (src->nglobals)
		memcpy(dst->globals + dst->nglobals, src->globals, src->nglobals * sizeof(*g));
	dst->nkernels += src->nkernels;
	dst->nglobals += src->nglobals;
	dst->ptx_version = MAX(dst->ptx_version, src->ptx_version);
	src->nkernels = src->nglobals = 0;
	sim_image_free(src);
	return CUDA_SUCCESS;
oom:
	sim_image_free(src);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * A PTX-only -rdc wrapper, which the driver JIT-links: the kernels and variables of every
 * relocatable container it names, as one image. A container with no code for this GPU (the
 * device runtime's, when CDP is not used) adds nothing, as the linker then needs nothing from it.
 */
static CUresult link_prelinked(const void *wrapper, size_t n, struct sim_image **out)
{
	struct rgpu_image *parts = calloc(n, sizeof(*parts));
	struct sim_image *img = calloc(1, sizeof(*img)), *one;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	size_t got;

	if (!parts || !img)
		goto out;
	img->refs = 1;
	r = CUDA_ERROR_INVALID_IMAGE;
	if (rgpu_image_prelinked(wrapper, parts, n, &got) || got != n)
		goto out;
	for (size_t i = 0; i < n; i++) {
		r = parse_fatbin(parts[i].data, parts[i].size, &one);
		if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
			continue;
		if (r != CUDA_SUCCESS || (r = merge_image(img, one)) != CUDA_SUCCESS)
			goto out;
	}
	img->binary_version = 0;
	*out = img;
	img = NULL;
	r = CUDA_SUCCESS;
out:
	sim_image_free(img);
	free(parts);
	return r;
}

/*
 * sim_image_load() - read the kernels and variables of the image at p.
 * Returns CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE (NULL), CUDA_ERROR_INVALID_IMAGE,
 * CUDA_ERROR_INVALID_PTX, CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NOT_SUPPORTED (LZ4, and
 * what rgpu_image_locate refuses: an old-style container) or
 * CUDA_ERROR_OUT_OF_MEMORY. A version-2 (-rdc) wrapper is read through its device-linked
 * container, as the driver reads it, or when that is empty (PTX only) through the containers
 * it was linked from.
 */
CUresult sim_image_load(const void *p, struct sim_image **out)
{
	struct rgpu_image im;
	int e;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	e = rgpu_image_locate(p, &im);
	if (e)
		return e == RGPU_EUNSUPPORTED ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_IMAGE;
	switch (im.kind) {
	case RGPU_IMAGE_FATBIN:
		return parse_fatbin(im.data, im.size, out);
	case RGPU_IMAGE_ELF:
		return parse_elf(im.data, im.size, out);
	case RGPU_IMAGE_BUNDLE:
		return link_prelinked(p, im.prelinked, out);
	default:
		return parse_ptx(im.data, im.size, out);
	}
}
