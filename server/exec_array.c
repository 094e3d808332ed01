/*
 * Handlers for CUDA arrays, mipmapped arrays, texture and surface objects (MSG_ARRAY_CREATE ..
 * MSG_TEXOBJ_DESTROY). Arrays live outside the device address window, so they are objects of
 * the job's object map, like streams, known by the client's id; each keeps its extent (width in
 * bytes, height, depth or layers) so that copies naming it are checked here before the driver
 * sees them (exec_memory.c). A texture or surface object's handle is a value the driver
 * chooses and the program keeps wherever it likes (kernel parameters, device memory): it goes
 * back to the client as it is, and a replay must get the same value again (TexCreate.want),
 * or the object is destroyed and the replay fails, naming both values (design.md §3).
 *
 * This file must never hand the driver a resource the job does not own: an array id is looked
 * up with its kind, and a linear resource's range is checked against the window.
 */
#define LOG_PREFIX "exec: "
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/arrayfmt.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"
#include "srv_handlers.h"


/* The extent of level `level` of mipmapped array mm (each dimension halves, down to 1). */
void srv_array_level_extent(const struct srv_obj *mm, unsigned level, uint64_t out[3])
{
	uint64_t wd = mm->extent[0] / mm->elem;

	wd = level < 64 ? wd >> level : 0;
	out[0] = (wd ? wd : 1) * mm->elem;
	for (int i = 1; i < 3; i++) {
		uint64_t v = level < 64 ? mm->extent[i] >> level : 0;
		/* layers and cube faces do not shrink; a dimension the array lacks stays 1 */
		int keep = i == 2 && (mm->aflags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP));
		out[i] = keep || mm->extent[i] == 1 ? mm->extent[i] : (v ? v : 1);
	}
}

int h_array_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ArrayCreate, array_create, w, f);
	int mipmapped = f->hdr.type == RGPU_MSG_MIPMAP_CREATE;
	struct srv_obj o = {.id = m->array, .kind = mipmapped ? ST_KIND_MIPMAP : ST_KIND_ARRAY,
			    .ctx = m->ctx};
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS && srv_obj_find(w, m->array, 0))
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r == CUDA_SUCCESS && m->mipmap && !mipmapped) {
		/* a level of a mipmapped array: the driver's array, under the client's id */
		struct srv_obj *mm = srv_obj_find(w, m->mipmap, ST_KIND_MIPMAP);
		if (!mm || mm->ctx != m->ctx)
			r = CUDA_ERROR_INVALID_HANDLE;
		else
			r = w->drv.cuMipmappedArrayGetLevel((CUarray *)&o.h, mm->h, m->level);
		if (r == CUDA_SUCCESS) {
			o.parent = m->mipmap;
			o.elem = mm->elem;
			o.aflags = mm->aflags;
			srv_array_level_extent(mm, m->level, o.extent);
		}
	} else if (r == CUDA_SUCCESS) {
		CUDA_ARRAY3D_DESCRIPTOR d = {.Width = m->width, .Height = m->height,
					     .Depth = m->depth, .Format = (CUarray_format)m->format,
					     .NumChannels = m->channels, .Flags = m->flags};
		unsigned fb = rgpu_array_format_bytes(m->format);
		if (!fb || !m->channels || m->channels > 4 || m->channels == 3 ||
		    m->width > UINT64_MAX / 16)
			r = CUDA_ERROR_INVALID_VALUE;
		else if (mipmapped)
			r = w->drv.cuMipmappedArrayCreate((CUmipmappedArray *)&o.h, &d, m->levels);
		else
			r = w->drv.cuArray3DCreate((CUarray *)&o.h, &d);
		if (r == CUDA_SUCCESS) {
			o.elem = fb * m->channels;
			o.extent[0] = m->width * o.elem;
			o.extent[1] = m->height ? m->height : 1;
			o.extent[2] = m->depth ? m->depth : 1;
			o.aflags = m->flags; /* for the levels' extents */
		}
	}
	if (r == CUDA_SUCCESS)
		r = srv_obj_create(w, &o);
	rgpu__array_create__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

/* The object goes with its record (statelog.c); this only checks that it was one. */
int h_array_destroy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ObjRef, obj_ref, w, f);
	int kind = f->hdr.type == RGPU_MSG_MIPMAP_DESTROY ? ST_KIND_MIPMAP : ST_KIND_ARRAY;

	if (!srv_obj_find(w, m->id, kind))
		srv_async_error(w, CUDA_ERROR_INVALID_HANDLE, "array destroy");
	rgpu__obj_ref__free_unpacked(m, NULL);
	return 0;
}

int h_texobj_destroy(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, ObjRef, obj_ref, w, f);
	if (!srv_obj_find(w, m->id, ST_KIND_TEXOBJ))
		srv_async_error(w, CUDA_ERROR_INVALID_VALUE, "texture object destroy");
	rgpu__obj_ref__free_unpacked(m, NULL);
	return 0;
}

static int unhex(const char *s, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int d = c >= '0' && c <= '9'   ? c - '0'
				: c >= 'a' && c <= 'f' ? c - 'a' + 10
						       : -1;
			if (d < 0)
				return -1;
			v = v << 4 | d;
		}
		out[i] = (uint8_t)v;
	}
	return 0;
}

/*
 * The resource of a texture or surface object, as the driver must see it: an array's handle
 * put in from its id, a linear or pitched range checked against the window (the driver would
 * read anywhere a descriptor points).
 */
static CUresult resource(struct srv_worker *w, const Rgpu__TexCreate *m, CUDA_RESOURCE_DESC *rd)
{
	const struct srv_obj *o;
	uint64_t span;

	switch (rd->resType) {
	case CU_RESOURCE_TYPE_ARRAY:
		o = srv_obj_find(w, m->resource, ST_KIND_ARRAY);
		if (!o || o->ctx != m->ctx)
			return CUDA_ERROR_INVALID_HANDLE;
		rd->res.array.hArray = o->h;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
		o = srv_obj_find(w, m->resource, ST_KIND_MIPMAP);
		if (!o || o->ctx != m->ctx)
			return CUDA_ERROR_INVALID_HANDLE;
		rd->res.mipmap.hMipmappedArray = o->h;
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_LINEAR:
		if (m->resource || !srv_dev_range_ok(w, rd->res.linear.devPtr,
						     rd->res.linear.sizeInBytes))
			return CUDA_ERROR_INVALID_VALUE;
		rd->res.linear.devPtr = srv_dev_translate(w, rd->res.linear.devPtr);
		return CUDA_SUCCESS;
	case CU_RESOURCE_TYPE_PITCH2D:
		if (m->resource || !rd->res.pitch2D.height ||
		    rgpu_range_end(rd->res.pitch2D.width, rd->res.pitch2D.height - 1,
				   rd->res.pitch2D.pitchInBytes, &span) ||
		    !srv_dev_range_ok(w, rd->res.pitch2D.devPtr, span))
			return CUDA_ERROR_INVALID_VALUE;
		rd->res.pitch2D.devPtr = srv_dev_translate(w, rd->res.pitch2D.devPtr);
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* A texture or surface object of these descriptors; its value in *value. */
static CUresult make_obj(struct srv_worker *w, int surface, CUDA_RESOURCE_DESC *rd,
			 CUDA_TEXTURE_DESC *td, CUDA_RESOURCE_VIEW_DESC *vd, uint64_t *value)
{
	CUresult r;

	if (surface) {
		CUsurfObject so = 0;
		r = w->drv.cuSurfObjectCreate(&so, rd);
		*value = so;
	} else {
		CUtexObject to = 0;
		r = w->drv.cuTexObjectCreate(&to, rd, td, vd);
		*value = to;
	}
	return r;
}

static void drop_obj(struct srv_worker *w, int surface, uint64_t value)
{
	if (surface)
		w->drv.cuSurfObjectDestroy((CUsurfObject)value);
	else
		w->drv.cuTexObjectDestroy((CUtexObject)value);
}

/* at most this many objects made and given back to reach a replayed object's value */
#define TEXOBJ_BURN_MAX 4096

/*
 * A replay wants the value the program holds. The driver hands values out from a count (on
 * the H200, a fresh process's first object is 0x1 whatever the program's was), so objects made
 * and kept until the count reaches the value place it, as a process id is placed by making
 * processes; they are given back once it is placed. A value below the count is lost.
 */
static CUresult place_obj(struct srv_worker *w, int surface, CUDA_RESOURCE_DESC *rd,
			  CUDA_TEXTURE_DESC *td, CUDA_RESOURCE_VIEW_DESC *vd, uint64_t want,
			  uint64_t *value)
{
	uint64_t *burnt = malloc(TEXOBJ_BURN_MAX * sizeof(*burnt));
	size_t n = 0;
	CUresult r = burnt ? make_obj(w, surface, rd, td, vd, value) : CUDA_ERROR_OUT_OF_MEMORY;

	while (r == CUDA_SUCCESS && *value < want && n < TEXOBJ_BURN_MAX) {
		burnt[n++] = *value;
		r = make_obj(w, surface, rd, td, vd, value);
	}
	for (size_t i = 0; i < n; i++)
		drop_obj(w, surface, burnt[i]);
	free(burnt);
	if (n)
		pr_info("%s object: %zu made and given back to reach the value %#llx (now %#llx)",
			surface ? "surface" : "texture", n, (unsigned long long)want,
			(unsigned long long)*value);
	return r;
}

int h_texobj_create(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, TexCreate, tex_create, w, f);
	struct srv_obj o = {.id = m->obj, .kind = ST_KIND_TEXOBJ, .ctx = m->ctx,
			    .elem = m->surface};
	CUDA_RESOURCE_DESC rd;
	CUDA_TEXTURE_DESC td;
	CUDA_RESOURCE_VIEW_DESC vd;
	uint8_t raw[sizeof(rd) + sizeof(td) + sizeof(vd)];
	uint64_t value = 0;
	CUresult r = srv_use_ctx(w, m->ctx);

	if (r == CUDA_SUCCESS && (srv_obj_find(w, m->obj, 0) || strlen(m->desc) != 2 * sizeof(raw) ||
				  unhex(m->desc, sizeof(raw), raw)))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		memcpy(&rd, raw, sizeof(rd));
		memcpy(&td, raw + sizeof(rd), sizeof(td));
		memcpy(&vd, raw + sizeof(rd) + sizeof(td), sizeof(vd));
		r = resource(w, m, &rd);
	}
	if (r == CUDA_SUCCESS)
		r = m->want ? place_obj(w, m->surface, &rd, &td, m->has_view ? &vd : NULL, m->want,
					&value)
			    : make_obj(w, m->surface, &rd, &td, m->has_view ? &vd : NULL, &value);
	if (r == CUDA_SUCCESS) {
		o.h = (void *)(uintptr_t)value;
		if (m->want && value != m->want) {
			/*
			 * A replay: the program holds the old value, maybe inside device memory,
			 * where nothing can translate it. The job cannot be rebuilt here.
			 */
			pr_warn("%s object %llu: the driver gave value %#llx, the program holds "
				"%#llx; it cannot be placed (design.md §3)",
				m->surface ? "surface" : "texture", (unsigned long long)m->obj,
				(unsigned long long)value, (unsigned long long)m->want);
			o.id = 0; /* srv_obj_create() releases it and refuses */
			srv_obj_create(w, &o);
			r = CUDA_ERROR_INVALID_HANDLE;
		} else {
			r = srv_obj_create(w, &o);
		}
	}
	rgpu__tex_create__free_unpacked(m, NULL);
	return srv_reply_value(w, f, r, r == CUDA_SUCCESS ? (int64_t)value : 0);
}
