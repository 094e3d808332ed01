/*
 * CUDA arrays, mipmapped arrays, texture and surface objects (docs/architecture.md, "Arrays,
 * textures and surfaces").
 *
 * A CUarray and a CUmipmappedArray are client objects (invariant 1), made on the worker under
 * their id by a call (MSG_ARRAY_CREATE, MSG_MIPMAP_CREATE: the driver's answer to a descriptor,
 * out of memory included, must be exact). Each keeps its descriptor, so descriptor queries are
 * answered here, and copies naming an array are checked here against its extent (pitched.c
 * asks ip_array_box()). A level of a mipmapped array is an array object too, made on the worker
 * the first time the program asks for it, and the same handle every time after.
 *
 * A texture or surface object is not a handle but a value the driver chooses: the program may
 * keep it anywhere, device memory included, so it cannot be a client address and cannot be
 * translated. The worker makes the object (MSG_TEXOBJ_CREATE, a call) and the value comes back
 * as the driver gave it; the state log records it with its descriptors, and a replay must get
 * the same value again or fail (design.md §3). The descriptors are kept here for the queries.
 *
 * Refused with a log line (ip_refused): formats other than the 8-, 16- and 32-bit integer,
 * half and float ones, and array flags beyond layered, surface, cubemap and texture gather
 * (sparse, deferred mapping, depth textures, colour attachments, video); planes, memory
 * requirements and sparse properties, which only those would make sensible.
 */
#define LOG_PREFIX "rgpu: "
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip.h"
#include "ip_entries.h"
#include "rgpu.pb-c.h"
#include "rgpu/arrayfmt.h"
#include "rgpu/log.h"
#include "rgpu/util.h"

struct ip_mipmap;

struct ip_array {
	struct ip_obj o;
	struct ip_ctx *ctx;
	CUDA_ARRAY3D_DESCRIPTOR d;
	unsigned elem;		/* bytes per element */
	struct ip_mipmap *mm;	/* a level of this mipmapped array, or NULL */
};

struct ip_mipmap {
	struct ip_obj o;
	struct ip_ctx *ctx;
	CUDA_ARRAY3D_DESCRIPTOR d;
	unsigned levels;
	struct ip_array **lv;	/* levels asked for so far (NULL: not yet) */
};

/* A texture or surface object: a value, not a handle (a list, under tex_lock). */
struct ip_texobj {
	uint64_t id;
	unsigned long long value;
	int surface;
	struct ip_ctx *ctx;
	CUDA_RESOURCE_DESC res; /* as the program gave it, its handles included */
	CUDA_TEXTURE_DESC tex;
	CUDA_RESOURCE_VIEW_DESC view;
	int has_view;
	struct ip_texobj *next;
};

static pthread_mutex_t arr_lock = PTHREAD_MUTEX_INITIALIZER; /* levels, and tex objects */
static struct ip_texobj *texobjs;

#define KNOWN_FLAGS                                                                                \
	(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |                 \
	 CUDA_ARRAY3D_TEXTURE_GATHER)


/* What rgpu carries; the driver on the worker judges the rest of the descriptor. */
static CUresult desc_ok(const char *fn, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	char what[96];
	if (!rgpu_array_format_bytes(d->Format)) {
		snprintf(what, sizeof(what), "%s with format %#x", fn, (unsigned)d->Format);
		ip_refused(what, "array formats other than 8-, 16- and 32-bit integers, half and "
				 "float are not supported");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (d->Flags & ~(unsigned)KNOWN_FLAGS) {
		snprintf(what, sizeof(what), "%s with flags %#x", fn, d->Flags);
		ip_refused(what, "array flags other than layered, surface load/store, cubemap and "
				 "texture gather are not supported");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static void fill_create(Rgpu__ArrayCreate *m, uint64_t id, struct ip_ctx *c,
			const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	m->array = id;
	m->ctx = c->o.id;
	m->width = d->Width;
	m->height = d->Height;
	m->depth = d->Depth;
	m->format = (uint32_t)d->Format;
	m->channels = d->NumChannels;
	m->flags = d->Flags;
}

static CUresult array_create(const char *fn, CUarray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	Rgpu__ArrayCreate m = RGPU__ARRAY_CREATE__INIT;
	struct ip_array *a;
	struct ip_ctx *c;
	CUresult r;

	if (!ph || !d)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r == CUDA_SUCCESS)
		r = desc_ok(fn, d);
	if (r != CUDA_SUCCESS)
		return r;
	a = ip_obj_new(sizeof(*a), ST_KIND_ARRAY, c);
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->ctx = c;
	a->d = *d;
	a->elem = rgpu_array_format_bytes(d->Format) * d->NumChannels;
	fill_create(&m, a->o.id, c, d);
	r = ip_call_status(RGPU_MSG_ARRAY_CREATE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (r != CUDA_SUCCESS) {
		ip_obj_drop(a);
		return r;
	}
	*ph = (CUarray)a;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuArray3DCreate_v2(CUarray *ph, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	return array_create("cuArray3DCreate", ph, d);
}

IP_API CUresult CUDAAPI cuArrayCreate_v2(CUarray *ph, const CUDA_ARRAY_DESCRIPTOR *d)
{
	CUDA_ARRAY3D_DESCRIPTOR d3 = {0};

	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	d3.Width = d->Width;
	d3.Height = d->Height;
	d3.Format = d->Format;
	d3.NumChannels = d->NumChannels;
	return array_create("cuArrayCreate", ph, &d3);
}

IP_API CUresult CUDAAPI cuArrayDestroy(CUarray h)
{
	Rgpu__ObjRef m = RGPU__OBJ_REF__INIT;
	struct ip_array *a;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	a = ip_obj_get(h, ST_KIND_ARRAY);
	if (!a || a->mm) /* a level goes with its mipmapped array */
		return CUDA_ERROR_INVALID_HANDLE;
	m.id = a->o.id;
	m.ctx = a->ctx->o.id;
	ip_route_ctx(a->ctx);
	ip_obj_unregister(&a->o);
	return ip_post(RGPU_MSG_ARRAY_DESTROY, &m.base, NULL, 0);
}

IP_API CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray h)
{
	struct ip_array *a;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	a = ip_obj_get(h, ST_KIND_ARRAY);
	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = a->d;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *out, CUarray h)
{
	CUDA_ARRAY3D_DESCRIPTOR d;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = cuArray3DGetDescriptor_v2(&d, h);
	if (r != CUDA_SUCCESS)
		return r;
	out->Width = d.Width;
	out->Height = d.Height;
	out->Format = d.Format;
	out->NumChannels = d.NumChannels;
	return CUDA_SUCCESS;
}

CUresult ip_array_box(CUarray h, uint64_t *id, uint64_t ext[3])
{
	struct ip_array *a = ip_obj_get(h, ST_KIND_ARRAY);

	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	*id = a->o.id;
	ext[0] = (uint64_t)a->d.Width * a->elem;
	ext[1] = a->d.Height ? a->d.Height : 1;
	ext[2] = a->d.Depth ? a->d.Depth : 1;
	return CUDA_SUCCESS;
}

IP_API CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *ph,
					       const CUDA_ARRAY3D_DESCRIPTOR *d,
					       unsigned int levels)
{
	Rgpu__ArrayCreate m = RGPU__ARRAY_CREATE__INIT;
	struct ip_mipmap *mm;
	struct ip_ctx *c;
	CUresult r;

	if (!ph || !d || !levels)
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r == CUDA_SUCCESS)
		r = desc_ok("cuMipmappedArrayCreate", d);
	if (r != CUDA_SUCCESS)
		return r;
	mm = ip_obj_new(sizeof(*mm), ST_KIND_MIPMAP, c);
	if (!mm || !(mm->lv = calloc(levels, sizeof(*mm->lv)))) {
		ip_obj_drop(mm);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	mm->ctx = c;
	mm->d = *d;
	mm->levels = levels;
	fill_create(&m, mm->o.id, c, d);
	m.levels = levels;
	r = ip_call_status(RGPU_MSG_MIPMAP_CREATE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
	if (r != CUDA_SUCCESS) {
		free(mm->lv);
		ip_obj_drop(mm);
		return r;
	}
	*ph = (CUmipmappedArray)mm;
	return CUDA_SUCCESS;
}

/* Level l of a mipmapped array's descriptor: each dimension halved l times, down to 1. */
static CUDA_ARRAY3D_DESCRIPTOR level_desc(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned l)
{
	CUDA_ARRAY3D_DESCRIPTOR o = *d;
	int keep = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);

	o.Width = d->Width >> l ? d->Width >> l : 1;
	o.Height = !d->Height ? 0 : d->Height >> l ? d->Height >> l : 1;
	o.Depth = !d->Depth || keep ? d->Depth : d->Depth >> l ? d->Depth >> l : 1;
	return o;
}

IP_API CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *out, CUmipmappedArray h,
						 unsigned int level)
{
	Rgpu__ArrayCreate m = RGPU__ARRAY_CREATE__INIT;
	struct ip_mipmap *mm;
	struct ip_array *a;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	mm = ip_obj_get(h, ST_KIND_MIPMAP);
	if (!mm)
		return CUDA_ERROR_INVALID_HANDLE;
	if (level >= mm->levels)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&arr_lock);
	a = mm->lv[level];
	if (!a) {
		a = ip_obj_new(sizeof(*a), ST_KIND_ARRAY, mm->ctx);
		if (!a) {
			pthread_mutex_unlock(&arr_lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		a->ctx = mm->ctx;
		a->d = level_desc(&mm->d, level);
		a->elem = rgpu_array_format_bytes(a->d.Format) * a->d.NumChannels;
		a->mm = mm;
		m.array = a->o.id;
		m.ctx = mm->ctx->o.id;
		m.mipmap = mm->o.id;
		m.level = level;
		r = ip_call_status(RGPU_MSG_ARRAY_CREATE, &m.base, NULL, 0, NULL, 0, NULL, NULL);
		if (r != CUDA_SUCCESS)
			ip_obj_drop(a);
		else
			mm->lv[level] = a;
	}
	pthread_mutex_unlock(&arr_lock);
	if (r == CUDA_SUCCESS)
		*out = (CUarray)a;
	return r;
}

IP_API CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray h)
{
	Rgpu__ObjRef m = RGPU__OBJ_REF__INIT;
	struct ip_mipmap *mm;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	mm = ip_obj_get(h, ST_KIND_MIPMAP);
	if (!mm)
		return CUDA_ERROR_INVALID_HANDLE;
	m.id = mm->o.id;
	m.ctx = mm->ctx->o.id;
	ip_route_ctx(mm->ctx);
	/* its levels die with it, here as on the worker (their records' parent) */
	for (unsigned i = 0; i < mm->levels; i++)
		if (mm->lv[i])
			ip_obj_unregister(&mm->lv[i]->o);
	ip_obj_unregister(&mm->o);
	return ip_post(RGPU_MSG_MIPMAP_DESTROY, &m.base, NULL, 0);
}

#define REFUSE(decl, why)                                                                      \
	IP_API CUresult CUDAAPI decl                                                           \
	{                                                                                      \
		ip_refused(__func__, why);                                                     \
		return CUDA_ERROR_NOT_SUPPORTED;                                               \
	}

REFUSE(cuArrayGetPlane(CUarray *p, CUarray h, unsigned int plane),
       "planar (multi-planar format) arrays are not supported")
REFUSE(cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *m, CUarray a, CUdevice d),
       "memory requirements are for deferred-mapping arrays, which are not supported")
REFUSE(cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *m,
					     CUmipmappedArray a, CUdevice d),
       "memory requirements are for deferred-mapping arrays, which are not supported")
REFUSE(cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *p, CUarray a),
       "sparse arrays are not supported")
REFUSE(cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *p, CUmipmappedArray a),
       "sparse arrays are not supported")

/* ---- texture and surface objects --------------------------------------------------------- */

static CUresult texobj_create(const char *fn, unsigned long long *out, const CUDA_RESOURCE_DESC *res,
			      const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view,
			      int surface)
{
	Rgpu__TexCreate m = RGPU__TEX_CREATE__INIT;
	Rgpu__ValueReply *rep = NULL;
	CUDA_RESOURCE_DESC wire;
	uint8_t raw[sizeof(CUDA_RESOURCE_DESC) + sizeof(CUDA_TEXTURE_DESC) +
		    sizeof(CUDA_RESOURCE_VIEW_DESC)] = {0};
	char hex[2 * sizeof(raw) + 1];
	struct ip_texobj *t;
	struct ip_ctx *c;
	CUresult r;

	if (!out || !res || (!surface && !tex))
		return CUDA_ERROR_INVALID_VALUE;
	r = ip_ctx_require_live(&c);
	if (r != CUDA_SUCCESS)
		return r;
	/* the resource's handle crosses as its id; the rest of the descriptors as cuda.h lays
	 * them out (they hold no other handle) */
	wire = *res;
	switch (res->resType) {
	case CU_RESOURCE_TYPE_ARRAY: {
		struct ip_array *a = ip_obj_get(res->res.array.hArray, ST_KIND_ARRAY);
		if (!a)
			return CUDA_ERROR_INVALID_HANDLE;
		m.resource = a->o.id;
		wire.res.array.hArray = NULL;
		break;
	}
	case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
		struct ip_mipmap *mm = ip_obj_get(res->res.mipmap.hMipmappedArray, ST_KIND_MIPMAP);
		if (!mm)
			return CUDA_ERROR_INVALID_HANDLE;
		m.resource = mm->o.id;
		wire.res.mipmap.hMipmappedArray = NULL;
		break;
	}
	case CU_RESOURCE_TYPE_LINEAR:
	case CU_RESOURCE_TYPE_PITCH2D:
		break; /* device addresses are the same on every server */
	default:
		ip_refused(fn, "unknown resource type");
		return CUDA_ERROR_INVALID_VALUE;
	}
	memcpy(raw, &wire, sizeof(wire));
	if (tex)
		memcpy(raw + sizeof(wire), tex, sizeof(*tex));
	if (view)
		memcpy(raw + sizeof(wire) + sizeof(*tex), view, sizeof(*view));
	t = calloc(1, sizeof(*t));
	if (!t)
		return CUDA_ERROR_OUT_OF_MEMORY;
	t->id = ip_new_id();
	m.obj = t->id;
	m.ctx = c->o.id;
	m.surface = surface;
	m.has_view = view != NULL;
	m.desc = rgpu_hex(raw, sizeof(raw), hex);
	r = ip_call_status(RGPU_MSG_TEXOBJ_CREATE, &m.base, NULL, 0, NULL, 0,
			   &rgpu__value_reply__descriptor, (ProtobufCMessage **)&rep);
	if (r != CUDA_SUCCESS) {
		if (rep)
			protobuf_c_message_free_unpacked(&rep->base, NULL);
		free(t);
		return r;
	}
	t->value = (unsigned long long)rep->value;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	t->surface = surface;
	t->ctx = c;
	t->res = *res;
	if (tex)
		t->tex = *tex;
	if (view) {
		t->view = *view;
		t->has_view = 1;
	}
	pthread_mutex_lock(&arr_lock);
	t->next = texobjs;
	texobjs = t;
	pthread_mutex_unlock(&arr_lock);
	*out = t->value;
	return CUDA_SUCCESS;
}

/*
 * The live object with this value, or NULL. Under arr_lock. The value is the server driver's,
 * so two servers' drivers may give the same one (RGPU_SERVERS): then the current context's
 * server's object is the one meant.
 */
static struct ip_texobj **tex_slot(unsigned long long v, int surface)
{
	struct ip_ctx *c = ip_ctx_cur();
	struct ip_texobj **pp, **any = NULL;

	for (pp = &texobjs; *pp; pp = &(*pp)->next) {
		struct ip_texobj *t = *pp;
		if (t->value != v || t->surface != surface)
			continue;
		if (!c || ip_dev_server(t->ctx->device) == ip_dev_server(c->device))
			return pp;
		if (!any)
			any = pp;
	}
	return any;
}

static struct ip_texobj *tex_find(unsigned long long v, int surface)
{
	struct ip_texobj **pp = tex_slot(v, surface);

	return pp ? *pp : NULL;
}

static CUresult texobj_destroy(unsigned long long v, int surface)
{
	Rgpu__ObjRef m = RGPU__OBJ_REF__INIT;
	struct ip_texobj **pp, *t = NULL;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&arr_lock);
	pp = tex_slot(v, surface);
	if (pp) {
		t = *pp;
		*pp = t->next;
	}
	pthread_mutex_unlock(&arr_lock);
	if (!t)
		return CUDA_ERROR_INVALID_VALUE;
	m.id = t->id;
	m.ctx = t->ctx->o.id;
	ip_route_ctx(t->ctx);
	free(t);
	return ip_post(RGPU_MSG_TEXOBJ_DESTROY, &m.base, NULL, 0);
}

/* Copy a descriptor of a live object out (which: 0 resource, 1 texture, 2 view). */
static CUresult texobj_get(unsigned long long v, int surface, int which, void *out)
{
	struct ip_texobj *t;
	CUresult r = ip_check_init();

	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&arr_lock);
	t = tex_find(v, surface);
	if (t && which == 0)
		memcpy(out, &t->res, sizeof(t->res));
	else if (t && which == 1)
		memcpy(out, &t->tex, sizeof(t->tex));
	else if (t && which == 2)
		memcpy(out, &t->view, sizeof(t->view));
	pthread_mutex_unlock(&arr_lock);
	return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

IP_API CUresult CUDAAPI cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
					  const CUDA_TEXTURE_DESC *tex,
					  const CUDA_RESOURCE_VIEW_DESC *view)
{
	return texobj_create("cuTexObjectCreate", out, res, tex, view, 0);
}

IP_API CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res)
{
	return texobj_create("cuSurfObjectCreate", out, res, NULL, NULL, 1);
}

IP_API CUresult CUDAAPI cuTexObjectDestroy(CUtexObject v)
{
	return texobj_destroy(v, 0);
}

IP_API CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject v)
{
	return texobj_destroy(v, 1);
}

IP_API CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUtexObject v)
{
	return texobj_get(v, 0, 0, out);
}

IP_API CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *out, CUtexObject v)
{
	return texobj_get(v, 0, 1, out);
}

IP_API CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *out,
						       CUtexObject v)
{
	return texobj_get(v, 0, 2, out);
}

IP_API CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUsurfObject v)
{
	return texobj_get(v, 1, 0, out);
}

void ip_array_ctx_teardown(struct ip_ctx *c)
{
	struct ip_obj **v = NULL;
	struct ip_texobj **pp;
	size_t n = 0;

	/* the worker destroys them with the context: only the handles and values die here */
	ip_obj_collect(c, ST_KIND_ARRAY, &v, &n);
	for (size_t i = 0; i < n; i++)
		ip_obj_unregister(v[i]);
	free(v);
	ip_obj_collect(c, ST_KIND_MIPMAP, &v, &n);
	for (size_t i = 0; i < n; i++)
		ip_obj_unregister(v[i]);
	free(v);
	pthread_mutex_lock(&arr_lock);
	for (pp = &texobjs; *pp;) {
		struct ip_texobj *t = *pp;
		if (t->ctx == c) {
			*pp = t->next;
			free(t);
		} else {
			pp = &t->next;
		}
	}
	pthread_mutex_unlock(&arr_lock);
}
