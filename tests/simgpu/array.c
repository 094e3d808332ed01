/*
 * CUDA arrays, mipmapped arrays, texture and surface objects, simulated.
 *
 * An array is a host-memory blob, row-major: element (x, y, z) of a width x height x depth
 * array of e-byte elements is at byte ((z * height) + y) * width * e + x * e. The blob is a
 * device range of its own (SIM_RANGE_ARRAY), so the copies of mem.c move its bytes as they move
 * device memory's; nothing outside simgpu knows its address. A mipmapped array is its levels,
 * each an array. Texture and surface objects are a value -> descriptor table; a new object
 * gets the lowest value free from 1 (a model: what NVIDIA's driver does is measured on the GPU;
 * SIMGPU_TEXOBJ_SKEW=N starts them N further, as another process's driver might), and
 * kernels' C twins read and write through them with sim_tex_fetch() and sim_surf_access().
 *
 * Point sampling only, in the descriptors' address modes (clamp, border; wrap and mirror are
 * treated as clamp), unnormalised or normalised coordinates: what the test programs use.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"
#include "simgpu.h"

struct sim_array {
	CUDA_ARRAY3D_DESCRIPTOR d;
	size_t elem;		/* bytes per element */
	size_t ext[3];		/* width in elements, height, depth (each at least 1) */
	uint8_t *data;
	size_t bytes;
	struct sim_mipmap *mm;	/* a level of this mipmapped array, or NULL */
};

struct sim_mipmap {
	CUDA_ARRAY3D_DESCRIPTOR d;
	unsigned levels;
	struct sim_array **lv;
};

static size_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 0;
	}
}

/* The driver's rules for a descriptor that simgpu can hold. */
static CUresult desc_ok(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
			 CUDA_ARRAY3D_TEXTURE_GATHER;

	if (!format_bytes(d->Format) || (d->NumChannels != 1 && d->NumChannels != 2 &&
					 d->NumChannels != 4))
		return CUDA_ERROR_INVALID_VALUE;
	if ((d->Flags & ~known) || !d->Width || d->Width > 65536 || d->Height > 65536 ||
	    d->Depth > 4096)
		return CUDA_ERROR_INVALID_VALUE;
	if (d->Depth && !d->Height && !(d->Flags & CUDA_ARRAY3D_LAYERED))
		return CUDA_ERROR_INVALID_VALUE; /* a 3D array needs a height */
	if ((d->Flags & CUDA_ARRAY3D_CUBEMAP) &&
	    (d->Width != d->Height ||
	     (d->Flags & CUDA_ARRAY3D_LAYERED ? d->Depth % 6 : d->Depth != 6)))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult array_new(const CUDA_ARRAY3D_DESCRIPTOR *d, struct sim_array **out)
{
	struct sim_array *a;
	void *p;

	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->d = *d;
	a->elem = format_bytes(d->Format) * d->NumChannels;
	a->ext[0] = d->Width;
	a->ext[1] = d->Height ? d->Height : 1;
	a->ext[2] = d->Depth ? d->Depth : 1;
	a->bytes = a->ext[0] * a->ext[1] * a->ext[2] * a->elem;
	p = mmap(NULL, a->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->data = p;
	if (sim_range_add((uintptr_t)p, a->bytes, SIM_RANGE_ARRAY, SIM_PROT_RW, a) ||
	    sim_handle_add(a, SIM_ARRAY)) {
		sim_range_del((uintptr_t)p);
		munmap(p, a->bytes);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = a;
	return CUDA_SUCCESS;
}

static void array_free(struct sim_array *a)
{
	sim_handle_del(a);
	sim_range_del((uintptr_t)a->data);
	munmap(a->data, a->bytes);
	free(a);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	struct sim_ctx *ctx;
	struct sim_array *a;
	CUresult r;

	SIM_ENTER();
	if (!ph || !d)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)) || (r = desc_ok(d)) || (r = array_new(d, &a)))
		return r;
	*ph = (CUarray)a;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayDestroy(CUarray h)
{
	struct sim_array *a = (struct sim_array *)h;

	SIM_ENTER();
	if (!sim_handle_is(a, SIM_ARRAY) || a->mm)
		return CUDA_ERROR_INVALID_HANDLE;
	sim_device_sync(); /* copies in flight may still touch it */
	array_free(a);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray h)
{
	struct sim_array *a = (struct sim_array *)h;

	SIM_ENTER();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_handle_is(a, SIM_ARRAY))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = a->d;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d,
					unsigned int levels)
{
	struct sim_mipmap *mm;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!ph || !d || !levels || levels > 16)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)) || (r = desc_ok(d)))
		return r;
	mm = calloc(1, sizeof(*mm));
	if (!mm || !(mm->lv = calloc(levels, sizeof(*mm->lv)))) {
		free(mm);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	mm->d = *d;
	mm->levels = levels;
	for (unsigned i = 0; i < levels && r == CUDA_SUCCESS; i++) {
		CUDA_ARRAY3D_DESCRIPTOR ld = *d;
		bool keep = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
		ld.Width = d->Width >> i ? d->Width >> i : 1;
		ld.Height = !d->Height ? 0 : d->Height >> i ? d->Height >> i : 1;
		ld.Depth = !d->Depth || keep ? d->Depth : d->Depth >> i ? d->Depth >> i : 1;
		r = array_new(&ld, &mm->lv[i]);
		if (r == CUDA_SUCCESS)
			mm->lv[i]->mm = mm;
	}
	if (r == CUDA_SUCCESS && sim_handle_add(mm, SIM_MIPMAP))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r != CUDA_SUCCESS) {
		for (unsigned i = 0; i < levels; i++)
			if (mm->lv[i])
				array_free(mm->lv[i]);
		free(mm->lv);
		free(mm);
		return r;
	}
	*ph = (CUmipmappedArray)mm;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *out, CUmipmappedArray h, unsigned int level)
{
	struct sim_mipmap *mm = (struct sim_mipmap *)h;

	SIM_ENTER();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_handle_is(mm, SIM_MIPMAP))
		return CUDA_ERROR_INVALID_HANDLE;
	if (level >= mm->levels)
		return CUDA_ERROR_INVALID_VALUE;
	*out = (CUarray)mm->lv[level];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray h)
{
	struct sim_mipmap *mm = (struct sim_mipmap *)h;

	SIM_ENTER();
	if (!sim_handle_is(mm, SIM_MIPMAP))
		return CUDA_ERROR_INVALID_HANDLE;
	sim_device_sync();
	sim_handle_del(mm);
	for (unsigned i = 0; i < mm->levels; i++)
		array_free(mm->lv[i]);
	free(mm->lv);
	free(mm);
	return CUDA_SUCCESS;
}

/*
 * sim_array_box() - where box (x bytes, y, z) + (w bytes, h rows, d slices) of array h lies in
 * its blob: its first byte, row pitch and slice pitch. CUDA_ERROR_INVALID_HANDLE for no array,
 * CUDA_ERROR_INVALID_VALUE for a box that does not fit.
 */
CUresult sim_array_box(CUarray h, size_t x, size_t y, size_t z, size_t w, size_t hgt, size_t d,
		       uintptr_t *at, size_t *pitch, size_t *slice)
{
	struct sim_array *a = (struct sim_array *)h;
	size_t row;

	if (!sim_handle_is(a, SIM_ARRAY))
		return CUDA_ERROR_INVALID_HANDLE;
	row = a->ext[0] * a->elem;
	if (x > row || w > row - x || y > a->ext[1] || hgt > a->ext[1] - y || z > a->ext[2] ||
	    d > a->ext[2] - z)
		return CUDA_ERROR_INVALID_VALUE;
	*pitch = row;
	*slice = row * a->ext[1];
	*at = (uintptr_t)a->data + z * *slice + y * row + x;
	return CUDA_SUCCESS;
}

/* --- texture and surface objects -------------------------------------------------------- */

struct sim_texobj {
	unsigned long long value;
	bool surface;
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC tex;
	CUDA_RESOURCE_VIEW_DESC view;
	bool has_view;
	struct sim_texobj *next;
};

static pthread_mutex_t tex_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_texobj *texobjs;
static unsigned long long first_value;

static bool value_used_locked(unsigned long long v)
{
	for (struct sim_texobj *t = texobjs; t; t = t->next)
		if (t->value == v)
			return true;
	return false;
}

static CUresult tex_new(const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
			const CUDA_RESOURCE_VIEW_DESC *view, bool surface, unsigned long long *out)
{
	struct sim_texobj *t;
	struct sim_ctx *ctx;
	CUresult r;

	SIM_ENTER();
	if (!out || !res || (!surface && !tex))
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_ctx_current(&ctx)))
		return r;
	switch (res->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		if (!sim_handle_is(res->res.array.hArray, SIM_ARRAY))
			return CUDA_ERROR_INVALID_HANDLE;
		/* a surface needs an array made for surface loads and stores */
		if (surface && !(((struct sim_array *)res->res.array.hArray)->d.Flags &
				 CUDA_ARRAY3D_SURFACE_LDST))
			return CUDA_ERROR_INVALID_VALUE;
		break;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		if (surface)
			return CUDA_ERROR_INVALID_VALUE;
		if (!sim_handle_is(res->res.mipmap.hMipmappedArray, SIM_MIPMAP))
			return CUDA_ERROR_INVALID_HANDLE;
		break;
	case CU_RESOURCE_TYPE_LINEAR:
		if (surface || !format_bytes(res->res.linear.format) ||
		    !sim_dev_ok(res->res.linear.devPtr, res->res.linear.sizeInBytes, SIM_PROT_READ))
			return CUDA_ERROR_INVALID_VALUE;
		break;
	case CU_RESOURCE_TYPE_PITCH2D:
		if (surface || !format_bytes(res->res.pitch2D.format) || !res->res.pitch2D.height ||
		    !sim_dev_ok(res->res.pitch2D.devPtr,
				res->res.pitch2D.pitchInBytes * (res->res.pitch2D.height - 1) +
				    res->res.pitch2D.width * format_bytes(res->res.pitch2D.format) *
					res->res.pitch2D.numChannels,
				SIM_PROT_READ))
			return CUDA_ERROR_INVALID_VALUE;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return CUDA_ERROR_OUT_OF_MEMORY;
	t->surface = surface;
	t->res = *res;
	if (tex)
		t->tex = *tex;
	if (view) {
		t->view = *view;
		t->has_view = true;
	}
	pthread_mutex_lock(&tex_lock);
	if (!first_value) {
		const char *s = getenv("SIMGPU_TEXOBJ_SKEW");
		first_value = 1 + (s ? strtoull(s, NULL, 0) : 0);
	}
	/* the lowest value free: a freed object's value is given again */
	for (t->value = first_value; value_used_locked(t->value); t->value++)
		;
	t->next = texobjs;
	texobjs = t;
	pthread_mutex_unlock(&tex_lock);
	*out = t->value;
	return CUDA_SUCCESS;
}

static struct sim_texobj *tex_find_locked(unsigned long long v, bool surface)
{
	for (struct sim_texobj *t = texobjs; t; t = t->next)
		if (t->value == v && t->surface == surface)
			return t;
	return NULL;
}

static CUresult tex_del(unsigned long long v, bool surface)
{
	struct sim_texobj **pp, *t = NULL;

	SIM_ENTER();
	pthread_mutex_lock(&tex_lock);
	for (pp = &texobjs; *pp; pp = &(*pp)->next)
		if ((*pp)->value == v && (*pp)->surface == surface) {
			t = *pp;
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&tex_lock);
	if (!t)
		return CUDA_ERROR_INVALID_VALUE;
	free(t);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
				   const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view)
{
	return tex_new(res, tex, view, false, out);
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject t)
{
	return tex_del(t, false);
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res)
{
	return tex_new(res, NULL, NULL, true, out);
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject s)
{
	return tex_del(s, true);
}

/* Element i of [0, n) after the address mode: clamped, or -1 for a border. */
static long long address(long long i, long long n, CUaddress_mode mode)
{
	if (i >= 0 && i < n)
		return i;
	if (mode == CU_TR_ADDRESS_MODE_BORDER)
		return -1;
	return i < 0 ? 0 : n - 1;
}

/* The element at integer coordinates of a resource: its bytes, or NULL (a border). */
static const uint8_t *texel(const struct sim_texobj *t, const long long c[3], size_t *esize)
{
	const CUDA_RESOURCE_DESC *r = &t->res;
	const struct sim_array *a = NULL;
	long long ext[3] = {1, 1, 1}, at[3];
	uintptr_t base = 0;
	size_t pitch = 0, slice = 0;

	switch (r->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		a = (const struct sim_array *)r->res.array.hArray;
		break;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		a = ((const struct sim_mipmap *)r->res.mipmap.hMipmappedArray)->lv[0];
		break;
	case CU_RESOURCE_TYPE_LINEAR:
		*esize = format_bytes(r->res.linear.format) * r->res.linear.numChannels;
		ext[0] = (long long)(r->res.linear.sizeInBytes / *esize);
		base = r->res.linear.devPtr;
		pitch = slice = 0;
		break;
	default: /* pitch 2D */
		*esize = format_bytes(r->res.pitch2D.format) * r->res.pitch2D.numChannels;
		ext[0] = (long long)r->res.pitch2D.width;
		ext[1] = (long long)r->res.pitch2D.height;
		base = r->res.pitch2D.devPtr;
		pitch = r->res.pitch2D.pitchInBytes;
		slice = 0;
		break;
	}
	if (a) {
		*esize = a->elem;
		for (int i = 0; i < 3; i++)
			ext[i] = (long long)a->ext[i];
		base = (uintptr_t)a->data;
		pitch = a->ext[0] * a->elem;
		slice = pitch * a->ext[1];
	}
	for (int i = 0; i < 3; i++) {
		/* a layer index is never wrapped or bordered: it is clamped */
		CUaddress_mode m = t->surface ? CU_TR_ADDRESS_MODE_BORDER : t->tex.addressMode[i];
		at[i] = address(c[i], ext[i], m);
		if (at[i] < 0)
			return NULL;
	}
	return (const uint8_t *)(base + (size_t)at[2] * slice + (size_t)at[1] * pitch +
				 (size_t)at[0] * *esize);
}

int sim_tex_fetch(unsigned long long tex, float x, float y, float z, void *out, size_t size)
{
	const struct sim_texobj *t;
	const uint8_t *p;
	long long c[3];
	float f[3] = {x, y, z};
	size_t esize = 0;

	pthread_mutex_lock(&tex_lock);
	t = tex_find_locked(tex, false);
	pthread_mutex_unlock(&tex_lock);
	if (!t)
		return -1;
	for (int i = 0; i < 3; i++) {
		float v = f[i];
		if (i < 2 && (t->tex.flags & CU_TRSF_NORMALIZED_COORDINATES)) {
			const struct sim_array *a =
			    t->res.resType == CU_RESOURCE_TYPE_ARRAY
				? (const struct sim_array *)t->res.res.array.hArray
				: NULL;
			if (a)
				v *= (float)a->ext[i];
		}
		/* point sampling: the element the coordinate falls in (layers: the nearest) */
		c[i] = (long long)floorf(v);
		if (t->res.resType == CU_RESOURCE_TYPE_LINEAR)
			c[i] = (long long)v; /* tex1Dfetch: an integer index */
	}
	p = texel(t, c, &esize);
	memset(out, 0, size);
	if (p)
		memcpy(out, p, size < esize ? size : esize);
	return 0;
}

int sim_surf_access(unsigned long long surf, long long xbytes, long long y, long long z, void *buf,
		    size_t size, int write)
{
	const struct sim_texobj *t;
	uint8_t *p;
	long long c[3];
	size_t esize = 0;

	pthread_mutex_lock(&tex_lock);
	t = tex_find_locked(surf, true);
	pthread_mutex_unlock(&tex_lock);
	if (!t)
		return -1;
	{
		const struct sim_array *a = (const struct sim_array *)t->res.res.array.hArray;
		if (xbytes % (long long)a->elem)
			return -1; /* misaligned: the device traps */
		c[0] = xbytes / (long long)a->elem;
	}
	c[1] = y;
	c[2] = z;
	p = (uint8_t *)texel(t, c, &esize);
	if (!p || size != esize)
		return -1; /* out of bounds (cudaBoundaryModeTrap) */
	if (write)
		memcpy(p, buf, size);
	else
		memcpy(buf, p, size);
	return 0;
}
