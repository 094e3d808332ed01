/*
 * CUDA arrays in checkpoints (docs/architecture.md, "Arrays, textures and surfaces"; the blob's
 * layout: docs/formats.md, "CUDA array blobs"). An array lives where the driver put it, outside
 * the window whose chunks a checkpoint hashes, in a layout the driver keeps to itself, and
 * kernels change it through surface objects: so at the barrier, with every context
 * synchronised, each array and mipmapped array the job holds is read whole, every level, layer,
 * face and slice, by cuMemcpy3D into host memory, and becomes one blob of the checkpoint, hashed,
 * compressed and committed with the others (ckpt.c). A restore, once the state log is replayed
 * (which made the arrays again, by id, empty), writes each one back (restore.c), after checking
 * that the blob describes exactly the array the rebuilt job holds.
 *
 * The extents are the worker's own (struct srv_obj, the levels' by srv_array_level_extent(), the
 * rule the copies' box checks use), never the blob's: a blob that disagrees is refused, naming
 * the array, before a byte of it reaches the device. A level of a mipmapped array is not saved on
 * its own: its mipmapped array's blob holds every level.
 */
#define LOG_PREFIX "ckpt: "
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

#define ARR_MAGIC 0x52414752u /* "RGAR" */
#define ARR_VERSION 1
#define ARR_HDR 32	  /* bytes before the level table */
#define ARR_LEVEL 24	  /* a level's entry: width, height, depth (u64 each) */
#define ARR_LEVELS_MAX 32 /* a 2^31-wide array has 32 levels */

/* An array's shape as the worker knows it: what its blob must describe. */
struct shape {
	const struct srv_obj *o;
	int mipmapped;
	uint32_t elem, levels, format, channels, flags;
	uint64_t ext[ARR_LEVELS_MAX][3]; /* per level: width in elements, height, depth (>= 1) */
	uint64_t bytes;			 /* of all levels' elements */
};

static int fail(char *why, size_t whylen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t whylen, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return code;
}

int srv_array_saved(const struct st_rec *rec)
{
	return (rec->kind == ST_KIND_ARRAY && !rec->parent) || rec->kind == ST_KIND_MIPMAP;
}

/* "mipmapped array 12 (2D, 64 x 32 x 1, 8-byte elements, 3 levels)", for messages */
static const char *describe(const struct shape *s, uint64_t id, char *out, size_t len)
{
	const uint64_t *e = s->ext[0];
	const char *dims = s->flags & CUDA_ARRAY3D_CUBEMAP   ? "cubemap"
			   : s->flags & CUDA_ARRAY3D_LAYERED ? "layered"
			   : e[2] > 1			     ? "3D"
			   : e[1] > 1			     ? "2D"
							     : "1D";
	char levels[32] = "";

	if (s->mipmapped)
		snprintf(levels, sizeof(levels), ", %u levels", s->levels);
	snprintf(out, len, "%s %llu (%s, %llu x %llu x %llu, %u-byte elements%s)",
		 s->mipmapped ? "mipmapped array" : "array", (unsigned long long)id, dims,
		 (unsigned long long)e[0], (unsigned long long)e[1], (unsigned long long)e[2],
		 s->elem, levels);
	return out;
}

/* The shape of the live array or mipmapped array of record rec. */
static int shape_of(struct srv_worker *w, const struct st_rec *rec, struct shape *s, char *why,
		    size_t whylen)
{
	memset(s, 0, sizeof(*s));
	s->mipmapped = rec->kind == ST_KIND_MIPMAP;
	s->o = srv_obj_find(w, rec->id, (int)rec->kind);
	if (!s->o || !s->o->elem)
		return fail(
		    why, whylen, RGPU_ECORRUPT, "%s %llu is recorded, but the worker holds none",
		    s->mipmapped ? "mipmapped array" : "array", (unsigned long long)rec->id);
	s->elem = s->o->elem;
	s->format = (uint32_t)rec->array.format;
	s->channels = (uint32_t)(rec->array.format >> 32);
	s->flags = (uint32_t)rec->array.flags;
	s->levels = s->mipmapped ? (uint32_t)rec->array.level : 1;
	if (!s->levels || s->levels > ARR_LEVELS_MAX)
		return fail(why, whylen, RGPU_EUNSUPPORTED,
			    "mipmapped array %llu has %u levels; a checkpoint holds 1 to %d",
			    (unsigned long long)rec->id, s->levels, ARR_LEVELS_MAX);
	for (uint32_t l = 0; l < s->levels; l++) {
		uint64_t e[3], n;
		if (s->mipmapped)
			srv_array_level_extent(s->o, l, e);
		else
			memcpy(e, s->o->extent, sizeof(e));
		s->ext[l][0] = e[0] / s->elem;
		s->ext[l][1] = e[1];
		s->ext[l][2] = e[2];
		if (__builtin_mul_overflow(e[0], e[1], &n) || __builtin_mul_overflow(n, e[2], &n) ||
		    __builtin_add_overflow(s->bytes, n, &s->bytes))
			return fail(why, whylen, RGPU_ETOOBIG, "array %llu is too large to hold",
				    (unsigned long long)rec->id);
	}
	return 0;
}

/* Level l's driver array: the array itself, or the mipmapped array's level. */
static CUresult level_array(struct srv_worker *w, const struct shape *s, uint32_t l, CUarray *out)
{
	if (!s->mipmapped) {
		*out = (CUarray)s->o->h;
		return CUDA_SUCCESS;
	}
	return w->drv.cuMipmappedArrayGetLevel(out, (CUmipmappedArray)s->o->h, l);
}

/*
 * One level between the array and packed host bytes (row after row, slice after slice): one
 * cuMemcpy3D per slice, layer or face, as the worker's own copies do (exec_memory.c).
 */
static CUresult copy_level(struct srv_worker *w, CUarray a, const uint64_t ext[3], uint32_t elem,
			   uint8_t *host, int to_array)
{
	uint64_t row = ext[0] * elem, slice = row * ext[1];
	CUresult r = CUDA_SUCCESS;

	for (uint64_t z = 0; r == CUDA_SUCCESS && z < ext[2]; z++) {
		CUDA_MEMCPY3D c = {.WidthInBytes = row, .Height = ext[1], .Depth = 1};
		if (to_array) {
			c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host + z * slice;
			c.srcPitch = row, c.srcHeight = ext[1];
			c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a, c.dstZ = z;
		} else {
			c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a, c.srcZ = z;
			c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host + z * slice;
			c.dstPitch = row, c.dstHeight = ext[1];
		}
		r = w->drv.cuMemcpy3DAsync(&c, NULL);
	}
	return r;
}

/* Every level between the array and host (the blob's elements), in the array's context. */
static CUresult copy_all(struct srv_worker *w, const struct shape *s, uint8_t *host, int to_array,
			 uint32_t *at)
{
	CUresult r = srv_use_ctx(w, s->o->ctx);

	for (*at = 0; r == CUDA_SUCCESS && *at < s->levels; (*at)++) {
		CUarray a = NULL;
		r = level_array(w, s, *at, &a);
		if (r == CUDA_SUCCESS)
			r = copy_level(w, a, s->ext[*at], s->elem, host, to_array);
		host += s->ext[*at][0] * s->ext[*at][1] * s->ext[*at][2] * s->elem;
	}
	if (r == CUDA_SUCCESS) {
		*at = 0;
		r = w->drv.cuCtxSynchronize();
	}
	srv_use_ctx_or_base(w, 0);
	return r;
}

int srv_array_save(struct srv_worker *w, const struct st_rec *rec, uint8_t **out, size_t *len,
		   uint64_t *elems, char *why, size_t whylen)
{
	struct shape s;
	uint8_t *b;
	uint64_t total;
	uint32_t at = 0;
	char what[160];
	CUresult r;
	int ret = shape_of(w, rec, &s, why, whylen);

	if (ret)
		return ret;
	total = ARR_HDR + (uint64_t)ARR_LEVEL * s.levels + s.bytes;
	if (total < s.bytes || total > SIZE_MAX)
		return fail(why, whylen, RGPU_ETOOBIG, "array %llu is too large to hold",
			    (unsigned long long)rec->id);
	b = malloc(total);
	if (!b)
		return fail(why, whylen, RGPU_ENOMEM, "out of memory for the %llu bytes of %s",
			    (unsigned long long)s.bytes, describe(&s, rec->id, what, sizeof(what)));
	wr_le32(b, ARR_MAGIC);
	wr_le32(b + 4, ARR_VERSION);
	wr_le32(b + 8, s.elem);
	wr_le32(b + 12, s.levels);
	wr_le32(b + 16, s.format);
	wr_le32(b + 20, s.channels);
	wr_le32(b + 24, s.flags);
	wr_le32(b + 28, 0);
	for (uint32_t l = 0; l < s.levels; l++)
		for (int i = 0; i < 3; i++)
			wr_le64(b + ARR_HDR + l * ARR_LEVEL + i * 8, s.ext[l][i]);
	r = copy_all(w, &s, b + ARR_HDR + (uint64_t)ARR_LEVEL * s.levels, 0, &at);
	if (r != CUDA_SUCCESS) {
		free(b);
		return fail(why, whylen, RGPU_ECUDA, "reading level %u of %s: %s", at,
			    describe(&s, rec->id, what, sizeof(what)), srv_cu_name(&w->drv, r));
	}
	/* a test's way to a checkpoint whose arrays do not match its job (e2e arrays_ckpt.sh) */
	if (rgpu_fault("ckpt_array_short") && s.bytes)
		total--;
	*out = b;
	*len = total;
	*elems = s.bytes;
	return 0;
}

/* The blob's header and level table against the shape the rebuilt job has: 0, or why not. */
static int check_blob(const struct shape *s, uint64_t id, const uint8_t *b, size_t len, char *why,
		      size_t whylen)
{
	char what[160];
	uint32_t levels;

	describe(s, id, what, sizeof(what));
	if (len < ARR_HDR || rd_le32(b) != ARR_MAGIC)
		return fail(why, whylen, RGPU_ECORRUPT,
			    "the checkpoint's contents of %s are not an array blob", what);
	if (rd_le32(b + 4) != ARR_VERSION)
		return fail(why, whylen, RGPU_EVERSION,
			    "the checkpoint's contents of %s are of version %u; this rgpu reads %u",
			    what, rd_le32(b + 4), ARR_VERSION);
	levels = rd_le32(b + 12);
	if (rd_le32(b + 8) != s->elem || levels != s->levels || rd_le32(b + 16) != s->format ||
	    rd_le32(b + 20) != s->channels || rd_le32(b + 24) != s->flags)
		return fail(why, whylen, RGPU_ECORRUPT,
			    "the checkpoint holds %u level(s) of %u-byte elements (format %#x, %u "
			    "channels, flags %#x) for %s",
			    levels, rd_le32(b + 8), rd_le32(b + 16), rd_le32(b + 20),
			    rd_le32(b + 24), what);
	if (len < ARR_HDR + (uint64_t)ARR_LEVEL * levels)
		return fail(why, whylen, RGPU_ECORRUPT,
			    "the checkpoint's contents of %s end inside their level table", what);
	for (uint32_t l = 0; l < levels; l++) {
		const uint8_t *e = b + ARR_HDR + l * ARR_LEVEL;
		if (rd_le64(e) != s->ext[l][0] || rd_le64(e + 8) != s->ext[l][1] ||
		    rd_le64(e + 16) != s->ext[l][2])
			return fail(
			    why, whylen, RGPU_ECORRUPT,
			    "the checkpoint holds level %u of %s as %llu x %llu x %llu "
			    "elements; the rebuilt job's is %llu x %llu x %llu",
			    l, what, (unsigned long long)rd_le64(e),
			    (unsigned long long)rd_le64(e + 8), (unsigned long long)rd_le64(e + 16),
			    (unsigned long long)s->ext[l][0], (unsigned long long)s->ext[l][1],
			    (unsigned long long)s->ext[l][2]);
	}
	if (len - ARR_HDR - (uint64_t)ARR_LEVEL * levels != s->bytes)
		return fail(why, whylen, RGPU_ECORRUPT,
			    "the checkpoint holds %llu bytes of elements for %s, which has %llu",
			    (unsigned long long)(len - ARR_HDR - (uint64_t)ARR_LEVEL * levels),
			    what, (unsigned long long)s->bytes);
	return 0;
}

int srv_array_expect(struct srv_worker *w, const struct st_rec *rec, uint64_t size, char *why,
		     size_t whylen)
{
	struct shape s;
	char what[160];
	int ret = shape_of(w, rec, &s, why, whylen);
	uint64_t want = ARR_HDR + (uint64_t)ARR_LEVEL * s.levels + s.bytes;

	if (!ret && size != want)
		ret = fail(why, whylen, RGPU_ECORRUPT,
			   "the checkpoint holds %llu bytes for %s, which needs %llu",
			   (unsigned long long)size, describe(&s, rec->id, what, sizeof(what)),
			   (unsigned long long)want);
	return ret;
}

int srv_array_load(struct srv_worker *w, const struct st_rec *rec, const uint8_t *b, size_t len,
		   char *why, size_t whylen)
{
	struct shape s;
	uint32_t at = 0;
	char what[160];
	CUresult r;
	int ret = shape_of(w, rec, &s, why, whylen);

	if (!ret)
		ret = check_blob(&s, rec->id, b, len, why, whylen);
	if (ret)
		return ret;
	r = copy_all(w, &s, (uint8_t *)b + ARR_HDR + (uint64_t)ARR_LEVEL * s.levels, 1, &at);
	if (r != CUDA_SUCCESS)
		return fail(why, whylen, RGPU_ECUDA, "writing level %u of %s: %s", at,
			    describe(&s, rec->id, what, sizeof(what)), srv_cu_name(&w->drv, r));
	return 0;
}
