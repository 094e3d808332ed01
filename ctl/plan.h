/*
 * The consolidation planner behind `rgpuctl consolidate`: given the servers, what their GPUs
 * hold and which jobs run where, which jobs to live-migrate so that the most servers end up
 * holding no job and may be powered off. Pure computation: the caller gathers the facts (from
 * the servers' job lists) and carries the plan out (migrate, then power off).
 *
 * The rules every plan keeps:
 *  - A server's usable memory is round((1 - headroom) * mem_total) - mem_other (never below 0),
 *    its usable utilisation (1 - headroom). Utilisation is compared in millionths
 *    (round(util * 1e6)), so sums are exact and the plan does not depend on their order.
 *  - No target ends with more job memory or utilisation than its usable amounts (the jobs
 *    already there count). A server already over them takes no job. Jobs are never split.
 *  - Drained and off servers take no job; a drained server's jobs stay (draining is drain's
 *    business); an off server holds none.
 *  - Only jobs of servers the plan empties move: no job moves between servers that stay on (so
 *    the moves may be carried out in any order: a target's load only grows).
 *  - At least keep_on servers stay on (on and not drained, holding jobs or not).
 * Objective: the most servers emptied; among those, the fewest bytes moved, then the fewest
 * jobs moved, then the lowest server indices emptied: the exhaustive search finds it, the greedy
 * one comes near. Targets are tried fullest first (least usable memory left), lowest index
 * among equals.
 *
 * Planning again once a plan has been carried out plans nothing, with one exception: the
 * servers a plan empties are idle afterwards, so they may serve as targets in the next run,
 * which the rule above forbids within one plan; on a small instance the next run may then find
 * a plan that empties strictly more servers (29 of 200000 random instances of test_plan.c).
 * A re-run never moves jobs without emptying more servers, so repeated runs settle, never
 * shuffle jobs back and forth. The greedy path already goes on until nothing more can be
 * emptied, so after it a re-run plans nothing.
 */
#ifndef RGPU_CTL_PLAN_H
#define RGPU_CTL_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* Instances up to these sizes (on, not drained servers; jobs on them) are searched exhaustively. */
#define CTL_PLAN_EXACT_SERVERS 12
#define CTL_PLAN_EXACT_JOBS 24

struct ctl_plan_job {
	char id[40];  /* the job's id, for the caller; the planner does not read it */
	uint64_t mem; /* device bytes */
	double util;  /* GPU utilisation share 0..1 (0 when unknown) */
};

struct ctl_plan_server {
	const char *name;   /* for the caller; the planner does not read it */
	uint64_t mem_total; /* the GPU's memory */
	uint64_t mem_other; /* memory in use that is not a job's (the driver, other users) */
	int drained, off;   /* neither takes a job; a drained server's jobs are not moved by
			     * consolidate (drain's business); an off server has none */
	const struct ctl_plan_job *jobs;
	size_t njobs;
};

/* Indices: the server, the job within it (its jobs[] index), the target server. */
struct ctl_plan_move {
	size_t from, job, to;
};

struct ctl_plan {
	struct ctl_plan_move *moves; /* ordered by (from, job) */
	size_t nmoves;
	int *empty;    /* per server: 1 when it holds no job after the plan and may be powered
			* off (on, not drained) */
	size_t nempty; /* how many empty[] are 1 */
	uint64_t moved_bytes; /* the moved jobs' mem, summed */
	int exact;	      /* 1: found by exhaustive search (small instance), 0: greedy */
};

/*
 * ctl_plan_make() - plan a consolidation of n servers (see the rules above). Deterministic: the
 * same input gives the same plan. Small instances (at most CTL_PLAN_EXACT_SERVERS servers on and
 * not drained, CTL_PLAN_EXACT_JOBS jobs on them) are searched exhaustively for the optimum;
 * larger ones (or a search that runs past its step budget) are planned greedily: the least
 * loaded server first, emptied when all its jobs fit on servers that stay (largest job first,
 * onto the fullest server it fits), until no further server can be emptied.
 * @s, @n: the servers (n >= 1).
 * @headroom: the share of every GPU kept free, in [0, 1).
 * @keep_on: how many servers (on, not drained) stay on at least.
 * @out: receives the plan; free it with ctl_plan_free(). Zeroed on failure.
 * Returns 0, RGPU_EINVAL (s, out NULL or n 0; headroom outside [0, 1); a job's util outside
 * [0, 1]; jobs NULL while njobs is not 0; an off server with jobs; job memory summing past
 * 2^64) or RGPU_ENOMEM.
 */
int ctl_plan_make(const struct ctl_plan_server *s, size_t n, double headroom, size_t keep_on,
		  struct ctl_plan *out);

/* ctl_plan_free() - free what ctl_plan_make() allocated and zero the plan. NULL is allowed. */
void ctl_plan_free(struct ctl_plan *p);

#endif
