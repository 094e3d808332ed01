/*
 * The consolidation planner (plan.h): which jobs to move so that the most servers hold none.
 * It owns the search only: an exhaustive one over the sets of servers to empty for small
 * instances (each set checked by a depth-first bin packing of its jobs into the spare capacity
 * of the servers that stay), a greedy one otherwise. It must never do I/O, keep state between
 * calls, or produce a plan that breaks one of plan.h's rules (capacity with headroom, drained
 * and off servers, jobs moving only off emptied servers, keep_on): the caller carries the plan
 * out as it is. Every choice is made on integers (bytes, millionths of utilisation) in a fixed
 * order, so the same input always gives the same plan.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "rgpu/err.h"

#define UTIL_ONE 1000000u	/* utilisation 1.0, in millionths */
#define EXACT_BUDGET (1L << 22) /* DFS nodes the exhaustive search may visit in all */

/* A job on a server that is on and not drained: the only jobs that may move. */
struct pjob {
	size_t srv, idx;    /* where it was: server index, index in its jobs[] */
	uint64_t mem, util; /* bytes, millionths */
	size_t at;	    /* where it is in the plan being built */
};

/* A server's capacity and what the plan being built puts on it. */
struct psrv {
	uint64_t cap_mem, cap_util; /* usable memory and utilisation (plan.h) */
	uint64_t mem, util;	    /* of the jobs on it now */
	size_t njobs;
	int up; /* on and not drained: may take jobs, may be emptied */
	int emptied;
	int tried; /* greedy: failed to empty since the last change */
};

struct planner {
	struct psrv *srv; /* n */
	size_t n;
	struct pjob *job; /* the jobs of up servers, in (server, index) order */
	size_t njob;
	size_t *up; /* indices of the up servers, ascending */
	size_t nup;
	size_t max_empty; /* nup - keep_on, or 0 */
};

/* Does a job of mem bytes and util millionths fit on t, within its usable amounts? */
static int fits(const struct psrv *t, uint64_t mem, uint64_t util)
{
	return t->mem <= t->cap_mem && mem <= t->cap_mem - t->mem && t->util <= t->cap_util &&
	       util <= t->cap_util - t->util;
}

/* What t still takes (0 when it is already over its usable amount). */
static uint64_t spare_mem(const struct psrv *t)
{
	return t->mem <= t->cap_mem ? t->cap_mem - t->mem : 0;
}

static uint64_t spare_util(const struct psrv *t)
{
	return t->util <= t->cap_util ? t->cap_util - t->util : 0;
}

static void place(struct planner *p, struct pjob *j, size_t to)
{
	struct psrv *f = &p->srv[j->at], *t = &p->srv[to];

	f->mem -= j->mem;
	f->util -= j->util;
	f->njobs--;
	t->mem += j->mem;
	t->util += j->util;
	t->njobs++;
	j->at = to;
}

/* Largest job first (memory, then utilisation), then the original order. */
static int cmp_job_desc(const struct pjob *a, const struct pjob *b)
{
	if (a->mem != b->mem)
		return a->mem > b->mem ? -1 : 1;
	if (a->util != b->util)
		return a->util > b->util ? -1 : 1;
	if (a->srv != b->srv)
		return a->srv < b->srv ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_jobp_desc(const void *a, const void *b)
{
	return cmp_job_desc(*(struct pjob *const *)a, *(struct pjob *const *)b);
}

/* ---- exhaustive search ---- */

struct dfs {
	struct planner *p;
	struct pjob **item; /* the jobs to place, largest first */
	size_t nitem;
	uint64_t *sfx_mem, *sfx_util; /* what item[i..] need, summed */
	size_t *bin;		      /* the servers that stay and may take jobs, fullest first */
	size_t nbin;
	long budget;
};

/*
 * Place item[i..] into the bins, given that the bins have rem_mem and rem_util left in all.
 * Returns 1 when placed (the jobs' at say where), 0 when they cannot be, -1 past the budget.
 */
static int dfs_place(struct dfs *d, size_t i, uint64_t rem_mem, uint64_t rem_util)
{
	struct pjob *j;
	size_t b, b2, from;
	int r;

	if (i == d->nitem)
		return 1;
	if (d->sfx_mem[i] > rem_mem || d->sfx_util[i] > rem_util)
		return 0;
	if (--d->budget < 0)
		return -1;
	j = d->item[i];
	from = j->at;
	for (b = 0; b < d->nbin; b++) {
		struct psrv *t = &d->p->srv[d->bin[b]];

		if (!fits(t, j->mem, j->util))
			continue;
		/* a bin with the same room left as one already tried leads to the same outcome */
		for (b2 = 0; b2 < b; b2++) {
			const struct psrv *t2 = &d->p->srv[d->bin[b2]];

			if (fits(t2, j->mem, j->util) && spare_mem(t2) == spare_mem(t) &&
			    spare_util(t2) == spare_util(t))
				break;
		}
		if (b2 < b)
			continue;
		place(d->p, j, d->bin[b]);
		r = dfs_place(d, i + 1, rem_mem - j->mem, rem_util - j->util);
		if (r == 1)
			return 1;
		place(d->p, j, from);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Fullest first: the least memory left, then the least utilisation left, then the index. */
static int cmp_bin(const struct psrv *srv, size_t a, size_t b)
{
	uint64_t ma = spare_mem(&srv[a]), mb = spare_mem(&srv[b]);

	if (ma != mb)
		return ma < mb ? -1 : 1;
	ma = spare_util(&srv[a]);
	mb = spare_util(&srv[b]);
	if (ma != mb)
		return ma < mb ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Insertion sort: the bins are few, and qsort would need the servers through a global. */
static void sort_bins(const struct psrv *srv, size_t *bin, size_t nbin)
{
	for (size_t i = 1; i < nbin; i++) {
		size_t v = bin[i], k = i;

		for (; k > 0 && cmp_bin(srv, bin[k - 1], v) > 0; k--)
			bin[k] = bin[k - 1];
		bin[k] = v;
	}
}

/*
 * Can the jobs of the up servers in mask (bit k: up[k]) all go onto the other up servers?
 * Returns 1 (the jobs' at hold the placement), 0 (they are back where they were), -1 (budget).
 */
static int try_mask(struct planner *p, struct dfs *d, uint32_t mask)
{
	uint64_t rem_mem = 0, rem_util = 0;
	size_t k, i;
	int r;

	d->nitem = 0;
	for (i = 0; i < p->njob; i++) {
		struct pjob *j = &p->job[i];

		for (k = 0; p->up[k] != j->srv; k++)
			;
		if (mask & (1u << k))
			d->item[d->nitem++] = j;
	}
	qsort(d->item, d->nitem, sizeof(*d->item), cmp_jobp_desc);
	d->sfx_mem[d->nitem] = d->sfx_util[d->nitem] = 0;
	for (i = d->nitem; i-- > 0;) {
		d->sfx_mem[i] = d->sfx_mem[i + 1] + d->item[i]->mem;
		d->sfx_util[i] = d->sfx_util[i + 1] + d->item[i]->util;
	}
	d->nbin = 0;
	for (k = 0; k < p->nup; k++) {
		const struct psrv *t = &p->srv[p->up[k]];

		if (mask & (1u << k) || t->mem > t->cap_mem || t->util > t->cap_util)
			continue;
		d->bin[d->nbin++] = p->up[k];
		rem_mem += spare_mem(t);
		rem_util += spare_util(t);
	}
	sort_bins(p->srv, d->bin, d->nbin);
	r = dfs_place(d, 0, rem_mem, rem_util);
	if (r != 1)
		for (i = 0; i < p->njob; i++)
			if (p->job[i].at != p->job[i].srv)
				place(p, &p->job[i], p->job[i].srv);
	return r;
}

/* A set of servers to empty, and what emptying it moves. */
struct cand {
	uint32_t mask;
	uint64_t bytes;
	size_t moves;
};

/* The fewest bytes, then the fewest jobs, then the lowest server indices. */
static int cmp_cand(const void *va, const void *vb)
{
	const struct cand *a = va, *b = vb;
	uint32_t diff;

	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	diff = a->mask ^ b->mask;
	if (!diff)
		return 0;
	return a->mask & (diff & -diff) ? -1 : 1;
}

/*
 * The exhaustive search: for k = max_empty down to 1, the sets of k servers by cost, the first
 * whose jobs fit elsewhere wins. Returns 0 (p->srv[].emptied and the jobs' at hold the plan),
 * 1 when it ran past its budget (nothing planned), or RGPU_ENOMEM.
 */
static int plan_exact(struct planner *p)
{
	struct dfs d = {.p = p, .budget = EXACT_BUDGET};
	struct cand *c;
	uint32_t mask, nmask = 1u << p->nup;
	size_t k, nc, i, s;
	int ret = RGPU_ENOMEM, r;

	c = calloc(nmask, sizeof(*c));
	d.item = calloc(p->njob + 1, sizeof(*d.item));
	d.sfx_mem = calloc(p->njob + 1, sizeof(*d.sfx_mem));
	d.sfx_util = calloc(p->njob + 1, sizeof(*d.sfx_util));
	d.bin = calloc(p->nup + 1, sizeof(*d.bin));
	if (!c || !d.item || !d.sfx_mem || !d.sfx_util || !d.bin)
		goto out_free;

	ret = 0;
	for (k = p->max_empty; k > 0; k--) {
		nc = 0;
		for (mask = 0; mask < nmask; mask++) {
			if ((size_t)__builtin_popcount(mask) != k)
				continue;
			c[nc] = (struct cand){.mask = mask};
			for (s = 0; s < p->nup; s++) {
				if (!(mask & (1u << s)))
					continue;
				c[nc].bytes += p->srv[p->up[s]].mem;
				c[nc].moves += p->srv[p->up[s]].njobs;
			}
			nc++;
		}
		qsort(c, nc, sizeof(*c), cmp_cand);
		for (i = 0; i < nc; i++) {
			r = try_mask(p, &d, c[i].mask);
			if (r < 0) {
				ret = 1;
				goto out_free;
			}
			if (r == 1) {
				for (s = 0; s < p->nup; s++)
					if (c[i].mask & (1u << s))
						p->srv[p->up[s]].emptied = 1;
				goto out_free;
			}
		}
	}
out_free:
	free(d.bin);
	free(d.sfx_util);
	free(d.sfx_mem);
	free(d.item);
	free(c);
	return ret;
}

/* ---- greedy ---- */

/*
 * Empty server s if every job on it now (its own and any moved onto it earlier) fits on an up
 * server that is not emptied: largest job first, onto the fullest server it fits.
 * Returns 1 when emptied, 0 when not (nothing changed).
 */
static int greedy_empty(struct planner *p, size_t s, struct pjob **tmp, size_t *was)
{
	size_t nt = 0, i, k, best;

	for (i = 0; i < p->njob; i++)
		if (p->job[i].at == s)
			tmp[nt++] = &p->job[i];
	qsort(tmp, nt, sizeof(*tmp), cmp_jobp_desc);
	for (i = 0; i < nt; i++) {
		best = p->n;
		for (k = 0; k < p->nup; k++) {
			size_t t = p->up[k];

			if (t == s || p->srv[t].emptied ||
			    !fits(&p->srv[t], tmp[i]->mem, tmp[i]->util))
				continue;
			if (best == p->n || cmp_bin(p->srv, t, best) < 0)
				best = t;
		}
		if (best == p->n) {
			while (i-- > 0)
				place(p, tmp[i], was[i]);
			return 0;
		}
		was[i] = tmp[i]->at;
		place(p, tmp[i], best);
	}
	return 1;
}

/* Least loaded first: job memory, then utilisation, then job count (idle servers first), index. */
static int less_loaded(const struct psrv *a, size_t ia, const struct psrv *b, size_t ib)
{
	if (a->mem != b->mem)
		return a->mem < b->mem;
	if (a->util != b->util)
		return a->util < b->util;
	if (a->njobs != b->njobs)
		return a->njobs < b->njobs;
	return ia < ib;
}

/*
 * The greedy search: try the least loaded server not yet tried, empty it when its jobs fit;
 * after each server emptied every other one may be tried again, so the plan ends only when no
 * server left on can be emptied. That is what makes planning again after it plan nothing.
 */
static int plan_greedy(struct planner *p)
{
	struct pjob **tmp = calloc(p->njob + 1, sizeof(*tmp));
	size_t *was = calloc(p->njob + 1, sizeof(*was));
	size_t nempty = 0, k, s;

	if (!tmp || !was) {
		free(was);
		free(tmp);
		return RGPU_ENOMEM;
	}
	while (nempty < p->max_empty) {
		s = p->n;
		for (k = 0; k < p->nup; k++) {
			size_t t = p->up[k];

			if (p->srv[t].emptied || p->srv[t].tried)
				continue;
			if (s == p->n || less_loaded(&p->srv[t], t, &p->srv[s], s))
				s = t;
		}
		if (s == p->n)
			break;
		if (!greedy_empty(p, s, tmp, was)) {
			p->srv[s].tried = 1;
			continue;
		}
		p->srv[s].emptied = 1;
		nempty++;
		for (k = 0; k < p->nup; k++)
			p->srv[p->up[k]].tried = 0;
	}
	free(was);
	free(tmp);
	return 0;
}

/* ---- setup and output ---- */

static int check_input(const struct ctl_plan_server *s, size_t n, double headroom)
{
	if (!s || n == 0 || !(headroom >= 0.0 && headroom < 1.0))
		return RGPU_EINVAL;
	for (size_t i = 0; i < n; i++) {
		uint64_t sum = 0;

		if (s[i].njobs && (!s[i].jobs || s[i].off))
			return RGPU_EINVAL;
		for (size_t j = 0; j < s[i].njobs; j++) {
			double u = s[i].jobs[j].util;

			if (!(u >= 0.0 && u <= 1.0) ||
			    __builtin_add_overflow(sum, s[i].jobs[j].mem, &sum))
				return RGPU_EINVAL;
		}
	}
	return 0;
}

/* A share in [0, 1] in millionths, rounded to the nearest. */
static uint64_t to_millionths(double share)
{
	return (uint64_t)(share * UTIL_ONE + 0.5);
}

static uint64_t usable_mem(const struct ctl_plan_server *s, double headroom)
{
	long double m = (1.0L - (long double)headroom) * (long double)s->mem_total + 0.5L;
	uint64_t total = m >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)m;

	return total > s->mem_other ? total - s->mem_other : 0;
}

static int build(struct planner *p, const struct ctl_plan_server *s, size_t n, double headroom,
		 size_t keep_on)
{
	uint64_t cap_util = to_millionths(1.0 - headroom), total = 0;
	size_t i, j, nj = 0;

	p->n = n;
	p->srv = calloc(n, sizeof(*p->srv));
	p->up = calloc(n, sizeof(*p->up));
	if (!p->srv || !p->up)
		return RGPU_ENOMEM;
	for (i = 0; i < n; i++) {
		struct psrv *v = &p->srv[i];

		v->up = !s[i].drained && !s[i].off;
		v->cap_mem = usable_mem(&s[i], headroom);
		v->cap_util = cap_util;
		if (!v->up)
			continue;
		p->up[p->nup++] = i;
		nj += s[i].njobs;
		/* all the jobs that may move, summed: no later sum of bytes can wrap */
		for (j = 0; j < s[i].njobs; j++)
			if (__builtin_add_overflow(total, s[i].jobs[j].mem, &total))
				return RGPU_EINVAL;
	}
	p->max_empty = p->nup > keep_on ? p->nup - keep_on : 0;
	p->job = calloc(nj + 1, sizeof(*p->job));
	if (!p->job)
		return RGPU_ENOMEM;
	for (i = 0; i < n; i++) {
		if (!p->srv[i].up)
			continue;
		for (j = 0; j < s[i].njobs; j++) {
			struct pjob *jb = &p->job[p->njob++];

			jb->srv = jb->at = i;
			jb->idx = j;
			jb->mem = s[i].jobs[j].mem;
			jb->util = to_millionths(s[i].jobs[j].util);
			p->srv[i].mem += jb->mem;
			p->srv[i].util += jb->util;
			p->srv[i].njobs++;
		}
	}
	return 0;
}

static int output(const struct planner *p, int exact, struct ctl_plan *out)
{
	size_t i, nm = 0;

	out->empty = calloc(p->n, sizeof(*out->empty));
	for (i = 0; i < p->njob; i++)
		nm += p->job[i].at != p->job[i].srv;
	out->moves = calloc(nm + 1, sizeof(*out->moves));
	if (!out->empty || !out->moves)
		return RGPU_ENOMEM;
	for (i = 0; i < p->njob; i++) {
		const struct pjob *j = &p->job[i];

		if (j->at == j->srv)
			continue;
		out->moves[out->nmoves++] = (struct ctl_plan_move){j->srv, j->idx, j->at};
		out->moved_bytes += j->mem;
	}
	for (i = 0; i < p->n; i++) {
		out->empty[i] = p->srv[i].emptied;
		out->nempty += (size_t)out->empty[i];
	}
	out->exact = exact;
	return 0;
}

int ctl_plan_make(const struct ctl_plan_server *s, size_t n, double headroom, size_t keep_on,
		  struct ctl_plan *out)
{
	struct planner p = {0};
	int ret, exact = 0;

	if (!out)
		return RGPU_EINVAL;
	memset(out, 0, sizeof(*out));
	ret = check_input(s, n, headroom);
	if (ret)
		return ret;
	ret = build(&p, s, n, headroom, keep_on);
	if (ret)
		goto out_free;

	if (p.nup <= CTL_PLAN_EXACT_SERVERS && p.njob <= CTL_PLAN_EXACT_JOBS) {
		ret = plan_exact(&p);
		if (ret < 0)
			goto out_free;
		exact = ret == 0;
	}
	if (!exact) {
		ret = plan_greedy(&p);
		if (ret)
			goto out_free;
	}
	ret = output(&p, exact, out);
	if (ret)
		ctl_plan_free(out);
out_free:
	free(p.job);
	free(p.up);
	free(p.srv);
	return ret;
}

void ctl_plan_free(struct ctl_plan *p)
{
	if (!p)
		return;
	free(p->moves);
	free(p->empty);
	memset(p, 0, sizeof(*p));
}
