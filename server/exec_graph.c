/*
 * Handlers for stream capture and graphs: begin and end a capture, and create, instantiate,
 * launch, upload, count the nodes of and destroy graphs. srv_capturing() tells the other handlers
 * whether a stream is being captured: work captured into a graph runs at every replay, not now,
 * so what it reads must outlive the request (a copy's bytes, a host function's trigger).
 */
#include "exec.h"
#include "rgpu.pb-c.h"
#include "rgpu/err.h"
#include "srv.h"
#include "srv_handlers.h"

/* ---- stream capture and graphs ---------------------------------------------------------- */

/* Is s being captured into a graph? Work queued there runs at every replay, not now. */
int srv_capturing(struct srv_worker *w, CUstream s)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	return w->drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
	       st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int h_capture(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, CaptureOp, capture_op, w, f);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	if (r == CUDA_SUCCESS)
		r = srv_stream(w, m->stream, &s);
	if (r == CUDA_SUCCESS && f->hdr.type == RGPU_MSG_CAPTURE_BEGIN && m->to_graph) {
		r = srv_capture_to_graph(w, s, m->graph, m->deps, m->n_deps, m->mode);
	} else if (r == CUDA_SUCCESS && m->to_graph) {
		CUgraph g = NULL;
		r = w->drv.cuStreamEndCapture(s, &g); /* the graph that exists: nothing new */
	} else if (r == CUDA_SUCCESS && f->hdr.type == RGPU_MSG_CAPTURE_BEGIN) {
		r = w->drv.cuStreamBeginCapture(s, (CUstreamCaptureMode)m->mode);
		/* nodes of the graph being captured may be named before its end */
		if (r == CUDA_SUCCESS)
			srv_gnodes_capture(w, m->graph, s);
	} else if (r == CUDA_SUCCESS) {
		struct srv_obj g = {.id = m->graph, .kind = ST_KIND_GRAPH, .ctx = m->ctx};
		r = w->drv.cuStreamEndCapture(s, (CUgraph *)&g.h);
		if (r == CUDA_SUCCESS)
			r = srv_obj_create(w, &g);
		if (r == CUDA_SUCCESS)
			srv_gnodes_capture(w, m->graph, NULL);
		else
			srv_gnodes_forget(w, m->graph);
	}
	rgpu__capture_op__free_unpacked(m, NULL);
	return srv_reply_status(w, f, r);
}

int h_graph(struct srv_worker *w, struct srv_frame *f)
{
	DECODE(m, GraphOp, graph_op, w, f);
	struct srv_driver *d = &w->drv;
	struct srv_obj *g = srv_obj_find(w, srv_graph_redirect(w, m->graph), ST_KIND_GRAPH);
	struct srv_obj *e = srv_obj_find(w, m->exec, ST_KIND_GRAPH_EXEC);
	CUstream s = NULL;
	CUresult r = srv_use_ctx(w, m->ctx);
	int ret = 0;

	switch (f->hdr.type) {
	case RGPU_MSG_GRAPH_CREATE: {
		struct srv_obj n = {.id = m->graph, .kind = ST_KIND_GRAPH, .ctx = m->ctx};
		if (r == CUDA_SUCCESS)
			r = d->cuGraphCreate((CUgraph *)&n.h, (unsigned)m->flags);
		if (r == CUDA_SUCCESS)
			r = srv_obj_create(w, &n);
		srv_async_error(w, r, "graph create");
		break;
	}
	case RGPU_MSG_GRAPH_INSTANTIATE: {
		struct srv_obj n = {.id = m->exec, .kind = ST_KIND_GRAPH_EXEC, .ctx = m->ctx};
		if (r == CUDA_SUCCESS)
			r = g ? d->cuGraphInstantiateWithFlags((CUgraphExec *)&n.h, g->h, m->flags)
			      : CUDA_ERROR_INVALID_VALUE;
		if (r == CUDA_SUCCESS)
			r = srv_obj_create(w, &n);
		if (r == CUDA_SUCCESS && srv_gexec_note(w, m->exec, g->id, m->flags))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		ret = srv_reply_status(w, f, r);
		break;
	}
	case RGPU_MSG_GRAPH_LAUNCH:
	case RGPU_MSG_GRAPH_UPLOAD:
		if (r == CUDA_SUCCESS)
			r = srv_stream(w, m->stream, &s);
		if (r == CUDA_SUCCESS)
			r = !e ? CUDA_ERROR_INVALID_VALUE
			       : f->hdr.type == RGPU_MSG_GRAPH_LAUNCH ? d->cuGraphLaunch(e->h, s)
								      : d->cuGraphUpload(e->h, s);
		srv_async_error(w, r, "graph launch");
		break;
	case RGPU_MSG_GRAPH_EXEC_DESTROY:
		/* the state log's removal destroys it (statelog.c) */
		srv_async_error(w, e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, "graph exec destroy");
		break;
	case RGPU_MSG_GRAPH_NODE_COUNT: {
		size_t n = 0;
		if (r == CUDA_SUCCESS)
			r = g ? d->cuGraphGetNodes(g->h, NULL, &n) : CUDA_ERROR_INVALID_VALUE;
		ret = srv_reply_value(w, f, r, (int64_t)n);
		break;
	}
	case RGPU_MSG_GRAPH_DESTROY:
		srv_async_error(w, g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, "graph destroy");
		break;
	}
	rgpu__graph_op__free_unpacked(m, NULL);
	return ret;
}
