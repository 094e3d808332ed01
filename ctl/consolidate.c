/*
 * rgpuctl consolidate and wake (issue 11; docs/operator-guide.md, "Consolidation"): the cron
 * job that packs running jobs onto the fewest servers by live migration and powers the emptied
 * ones off, and the command that powers one back on.
 *
 * consolidate asks every server of the cluster for its GPU and jobs, plans with ctl/plan.c
 * (never onto a drained, unreachable or powered-off server; jobs move only off servers the plan
 * empties), prints the plan, and unless --dry-run migrates each job live. A server is powered
 * off (--power-off: the cluster file's power-off command) only once it serves no job, asked
 * again after the moves; it is then recorded in the state file, which the next run reads, so
 * that it is neither asked nor planned onto until rgpuctl wake. One run at a time: a lock file,
 * taken without waiting. A failed move leaves that job where it was (the migration's failure
 * rule) and its server on. --json prints one JSON object per action, a line each.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "plan.h"
#include "rgpu/adminclient.h"
#include "rgpu/err.h"
#include "rgpu/util.h"
#include "rgpu_admin_msgs.h"


/*
 * What one server said: its GPU and its jobs (NULL replies when unreachable or off), and what
 * the planner sees of them: each job alone, except a batch job's (its label names a
 * reservation here), which are one item with the reservation, moved together (resv[i]: the
 * reservation's name, NULL for a job alone).
 */
struct view {
	Rgpu__StatusReply *st;
	Rgpu__JobsReply *jr;
	struct ctl_plan_job *jobs;
	const char **resv;
	size_t njobs;
	const char *why; /* why it takes no part, or NULL */
};

static void view_free(struct view *v)
{
	if (v->st)
		rgpu__status_reply__free_unpacked(v->st, NULL);
	if (v->jr)
		rgpu__jobs_reply__free_unpacked(v->jr, NULL);
	free(v->jobs);
	free(v->resv);
	*v = (struct view){0};
}

static int labelled(const Rgpu__JobInfo *j, const char *name)
{
	return j->label && !strcmp(j->label, name);
}

static void ask(const char *server, struct view *v)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	char err[400];

	if (rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_STATUS, &req.base,
			    &rgpu__status_reply__descriptor, (ProtobufCMessage **)&v->st, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)) ||
	    rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_JOBS, &req.base,
			    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&v->jr, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err))) {
		v->why = "unreachable";
		return;
	}
	if (!v->st->n_gpus) {
		v->why = "no GPU";
		return;
	}
	size_t cap = v->jr->n_jobs + v->st->n_reservations + 1, n = 0;
	v->jobs = calloc(cap, sizeof(*v->jobs));
	v->resv = calloc(cap, sizeof(*v->resv));
	if (!v->jobs || !v->resv) {
		v->why = "out of memory";
		return;
	}
	for (size_t r = 0; r < v->st->n_reservations; r++) {
		const Rgpu__Reservation *rv = v->st->reservations[r];
		uint64_t mem = 0;
		if (rv->gpu != 0) {
			v->why = "a reservation of a GPU other than its first (consolidate plans "
				 "each server's first GPU)";
			return;
		}
		for (size_t i = 0; i < v->jr->n_jobs; i++)
			if (labelled(v->jr->jobs[i], rv->name))
				mem += v->jr->jobs[i]->device_memory;
		snprintf(v->jobs[n].id, sizeof(v->jobs[n].id), "%s", rv->name);
		v->jobs[n].mem = mem > rv->bytes ? mem : rv->bytes;
		v->resv[n++] = rv->name;
	}
	for (size_t i = 0; i < v->jr->n_jobs; i++) {
		const Rgpu__JobInfo *j = v->jr->jobs[i];
		/* a job whose client is away, or that ends, cannot follow a migration now */
		if (strcmp(j->state, "running"))
			v->why = "a job not running (its client away, or ending)";
		if (ctl_reservation(v->st, j->label))
			continue; /* its reservation's item counts it */
		ctl_hex(&j->job_id, v->jobs[n].id, sizeof(v->jobs[n].id));
		v->jobs[n++].mem = j->device_memory;
	}
	v->njobs = n;
}

/*
 * Move reservation name from one server to another with its jobs: reserved on the target
 * first, each job migrated live, then ended on the source. A job that fails stays where it
 * was; if none moved, the target's reservation is ended again. Returns 0 or the first error
 * (err says it).
 */
static int move_reservation(const struct ctl_opts *o, const struct view *v, const char *from,
			    const char *name, uint64_t bytes, const char *to, size_t *moved,
			    char *err, size_t len)
{
	int ret = ctl_reserve(to, name, 0, bytes, 0, err, len);

	*moved = 0;
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < v->jr->n_jobs; i++) {
		const Rgpu__JobInfo *j = v->jr->jobs[i];
		Rgpu__MigrateReply *rep = NULL;
		char id[40];
		if (!labelled(j, name))
			continue;
		ctl_hex(&j->job_id, id, sizeof(id));
		ret = ctl_migrate_call(o, from, id, to, &rep, err, len);
		if (!ret && rep->result) {
			ret = rep->result;
			snprintf(err, len, "job %.12s: %s", id,
				 rep->error && *rep->error ? rep->error : rgpu_strerror(ret));
		}
		if (!ret)
			(*moved)++;
		if (rep)
			rgpu__migrate_reply__free_unpacked(rep, NULL);
	}
	char e2[600];
	if (ret && !*moved && ctl_reserve(to, name, 0, 0, 1, e2, sizeof(e2)))
		fprintf(stderr, "rgpuctl consolidate: %s stays reserved on %s too: %s\n", name, to, e2);
	if (!ret && ctl_reserve(from, name, 0, 0, 1, err, len))
		ret = RGPU_EIO;
	return ret;
}

/* Job id's state on server ("running", "disconnected", "ending"), "" when it has no such job. */
static void job_state(const char *server, const char *id, char *out, size_t len)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	Rgpu__JobsReply *jr = NULL;
	char err[400];

	snprintf(out, len, "unreachable");
	if (rgpu_admin_once(&ctl_peer, server, RGPU_ADMIN_MSG_JOBS, &req.base,
			    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)))
		return;
	snprintf(out, len, "%s", "");
	for (size_t k = 0; k < jr->n_jobs; k++) {
		char hex[40];
		ctl_hex(&jr->jobs[k]->job_id, hex, sizeof(hex));
		if (!strcmp(hex, id))
			snprintf(out, len, "%s", jr->jobs[k]->state);
	}
	rgpu__jobs_reply__free_unpacked(jr, NULL);
}

/*
 * Whether the client of every job moved off server `from` (moved[m] set) has reached the job's
 * new server, waiting up to settle_s: a client away at the switchover (a stopped process, a
 * network blip) learns where its job went only from the server it left, so that server must
 * not go off before. A job gone from its new server has ended: nothing waits for it. On 0,
 * why says which job has not. Only this run's moves of single jobs: a reservation's jobs, and
 * jobs an earlier run moved, are not waited for.
 */
static int clients_followed(const struct ctl_plan *plan, const unsigned char *moved,
			    const struct ctl_plan_server *ps, int from, unsigned settle_s,
			    char *why, size_t len)
{
	uint64_t deadline = rgpu_now_ns() + (uint64_t)settle_s * 1000000000ull;

	for (;;) {
		size_t late = plan->nmoves;
		char state[32] = "";
		for (size_t m = 0; m < plan->nmoves && late == plan->nmoves; m++) {
			const struct ctl_plan_move *mv = &plan->moves[m];
			if (!moved[m] || mv->from != (size_t)from)
				continue;
			job_state(ps[mv->to].name, ps[from].jobs[mv->job].id, state, sizeof(state));
			if (*state && strcmp(state, "running"))
				late = m;
		}
		if (late == plan->nmoves)
			return 1;
		if (rgpu_now_ns() >= deadline) {
			const struct ctl_plan_move *mv = &plan->moves[late];
			if (!strcmp(state, "unreachable"))
				snprintf(why, len,
					 "%s, where job %.12s went, did not answer within %u s: this "
					 "server stays on to redirect its client (--settle)",
					 ps[mv->to].name, ps[from].jobs[mv->job].id, settle_s);
			else
				snprintf(why, len,
					 "the client of job %.12s has not reached %s within %u s (the "
					 "job is %s there): this server stays on to redirect it "
					 "(--settle)",
					 ps[from].jobs[mv->job].id, ps[mv->to].name, settle_s, state);
			return 0;
		}
		usleep(200000);
	}
}

int ctl_cmd_consolidate(int argc, char **argv)
{
	struct ctl_opts o;
	struct view *v = NULL;
	struct ctl_plan_server *ps = NULL;
	struct ctl_plan plan = {0};
	json_t *off = NULL;
	const char *lock, *state;
	unsigned char *moved = NULL; /* moved[m]: plan.moves[m] (a single job) moved */
	int ret = ctl_parse(argc, argv, "consolidate", "nPHKLSW", 0, &o), lockfd = -1, failed = 0;

	if (ret) {
		if (ret < 0)
			fprintf(stderr, "usage: rgpuctl consolidate [--cluster FILE | --server S...] "
					"[--dry-run] [--power-off [--settle SECONDS]] [--headroom PCT] [--keep N] "
					"[--lock FILE] [--state FILE] [--json]\n");
		ctl_opts_free(&o); /* what it read before the error */
		return ret < 0 ? CTL_OK : ret;
	}
	lock = o.lock_path ? o.lock_path : CTL_DEFAULT_LOCK;
	state = o.state_path ? o.state_path : CTL_DEFAULT_STATE;
	if (o.power_off && !o.power_off_cmd) {
		fprintf(stderr, "rgpuctl consolidate: --power-off needs a 'power-off = CMD' line in "
				"the cluster file\n");
		ret = CTL_USAGE;
		goto out;
	}
	lockfd = ctl_take_lock(lock, 0);
	if (lockfd < 0) {
		const char *why = lockfd == -EBUSY ? "this run does nothing" : strerror(-lockfd);
		ctl_action(&o,
		       json_pack("{s:s,s:s,s:s}", "action", "lock", "lock", lock, "error",
				 lockfd == -EBUSY ? "another run holds the lock" : why),
		       "%s %s: %s",
		       lockfd == -EBUSY ? "another run holds the lock" : "cannot take the lock",
		       lock, why);
		ret = lockfd == -EBUSY ? CTL_BUSY : CTL_FAILED;
		goto out;
	}
	off = ctl_state_load(state);
	v = calloc((size_t)o.nserver, sizeof(*v));
	ps = calloc((size_t)o.nserver, sizeof(*ps));
	if (!v || !ps) {
		ret = CTL_FAILED;
		goto out;
	}
	for (int i = 0; i < o.nserver; i++) {
		ps[i].name = o.server[i];
		if (ctl_state_has(off, o.server[i])) {
			ps[i].off = 1;
			continue;
		}
		ask(o.server[i], &v[i]);
		if (v[i].st && v[i].st->n_gpus) {
			const Rgpu__GpuInfo *g = v[i].st->gpus[0];
			uint64_t jobs_mem = 0;
			for (size_t k = 0; k < v[i].njobs; k++)
				jobs_mem += v[i].jobs[k].mem;
			ps[i].mem_total = g->memory_total;
			ps[i].mem_other = g->memory_used > jobs_mem ? g->memory_used - jobs_mem : 0;
			ps[i].drained = v[i].st->drained;
		}
		/* what cannot take part is left as it is: neither loses nor takes a job */
		if (v[i].why)
			ps[i].drained = 1;
		ps[i].jobs = v[i].jobs;
		ps[i].njobs = v[i].njobs;
		if (v[i].why)
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:s}", "action", "skip", "server", o.server[i],
					 "why", v[i].why),
			       "%s takes no part: %s", o.server[i], v[i].why);
	}
	ret = ctl_plan_make(ps, (size_t)o.nserver, o.headroom, o.keep, &plan);
	if (ret) {
		ctl_action(&o,
		       json_pack("{s:s,s:s}", "action", "plan", "error", rgpu_strerror(ret)),
		       "no plan: %s", rgpu_strerror(ret));
		ret = CTL_FAILED;
		goto out;
	}
	for (size_t m = 0; m < plan.nmoves; m++) {
		const struct ctl_plan_move *mv = &plan.moves[m];
		const struct ctl_plan_job *j = &ps[mv->from].jobs[mv->job];
		char sz[32];
		ctl_fmt_bytes(j->mem, sz, sizeof(sz));
		const char *rv = v[mv->from].resv[mv->job];
		json_t *pj = json_pack("{s:s,s:s,s:s,s:s,s:I}", "action", "plan-move", "job", j->id,
				       "from", ps[mv->from].name, "to", ps[mv->to].name, "bytes",
				       (json_int_t)j->mem);
		if (rv)
			json_object_set_new(pj, "reservation", json_string(rv));
		ctl_action(&o, pj, "plan: %s %.12s (%s) %s -> %s", rv ? "reservation" : "job", j->id, sz,
		       ps[mv->from].name, ps[mv->to].name);
	}
	double saved_w = 0;
	for (int i = 0; i < o.nserver; i++)
		if (plan.empty[i]) {
			/* what its GPU draws now (NVML, or modelled): what powering it off saves */
			double w = v[i].st && v[i].st->n_gpus ? v[i].st->gpus[0]->power_w : 0;
			saved_w += w;
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:I,s:f}", "action", "plan-empty", "server",
					 o.server[i], "jobs", (json_int_t)ps[i].njobs, "gpu_watts", w),
			       "plan: %s emptied (%zu job(s) move off; its GPU draws %.0f W now)",
			       o.server[i], ps[i].njobs, w);
		}
	if (plan.nempty)
		ctl_action(&o,
		       json_pack("{s:s,s:I,s:I,s:f}", "action", "plan-summary", "servers_emptied",
				 (json_int_t)plan.nempty, "bytes_moved", (json_int_t)plan.moved_bytes,
				 "gpu_watts_saved", saved_w),
		       "plan: %zu server(s) emptied, %.1f MiB moved; powered off, their GPUs' %.0f W "
		       "(the hosts' own draw is not known to rgpu)",
		       plan.nempty, plan.moved_bytes / 1048576.0, saved_w);
	if (!plan.nmoves && !plan.nempty)
		ctl_action(&o, json_pack("{s:s}", "action", "plan-nothing"),
		       "plan: nothing to do (every server that runs is needed)");
	if (o.dry_run)
		goto out;
	moved = calloc(plan.nmoves + 1, 1);
	if (!moved) {
		ret = CTL_FAILED;
		goto out;
	}
	for (size_t m = 0; m < plan.nmoves; m++) {
		const struct ctl_plan_move *mv = &plan.moves[m];
		const struct ctl_plan_job *j = &ps[mv->from].jobs[mv->job];
		Rgpu__MigrateReply *rep = NULL;
		char err[800] = "";
		const char *rv = v[mv->from].resv[mv->job];
		if (rv) {
			/* a batch job's reservation, with its programs' jobs */
			size_t nmoved;
			int r = move_reservation(&o, &v[mv->from], ps[mv->from].name, rv, j->mem,
						 ps[mv->to].name, &nmoved, err, sizeof(err));
			if (r) {
				failed = 1;
				plan.empty[mv->from] = 0;
			}
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:s}", "action", "move", "job",
					 rv, "reservation", rv, "from", ps[mv->from].name, "to",
					 ps[mv->to].name, "result", r, "jobs_moved", (int)nmoved,
					 "error", err),
			       "reservation %s %s %s -> %s: %zu job(s) moved%s%s", rv,
			       r ? "did not move" : "moved", ps[mv->from].name, ps[mv->to].name,
			       nmoved, r ? "; it stays: " : "", r ? err : "");
			continue;
		}
		int r = ctl_migrate_call(&o, ps[mv->from].name, j->id, ps[mv->to].name, &rep, err,
					 sizeof(err));
		if (!r && rep->result) {
			snprintf(err, sizeof(err), "%s",
				 rep->error && *rep->error ? rep->error : rgpu_strerror(rep->result));
			r = rep->result;
		}
		if (r) {
			/* the job runs on where it was: its server stays on */
			failed = 1;
			plan.empty[mv->from] = 0;
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:s,s:s,s:i,s:s}", "action", "move", "job", j->id,
					 "from", ps[mv->from].name, "to", ps[mv->to].name, "result",
					 r, "error", err),
			       "job %.12s stays on %s: %s", j->id, ps[mv->from].name, err);
		} else {
			moved[m] = 1;
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I}", "action", "move", "job",
					 j->id, "from", ps[mv->from].name, "to", ps[mv->to].name,
					 "result", 0, "pause_ns", (json_int_t)rep->pause_ns,
					 "duration_ns", (json_int_t)rep->duration_ns),
			       "job %.12s moved %s -> %s (held %.1f ms, %.2f s in all)", j->id,
			       ps[mv->from].name, ps[mv->to].name, rep->pause_ns / 1e6,
			       rep->duration_ns / 1e9);
		}
		if (rep)
			rgpu__migrate_reply__free_unpacked(rep, NULL);
	}
	for (int i = 0; o.power_off && i < o.nserver; i++) {
		struct view again = {0};
		char late[300];
		int r;
		if (!plan.empty[i])
			continue;
		if (!clients_followed(&plan, moved, ps, i, o.settle_s, late, sizeof(late))) {
			failed = 1;
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:i,s:s}", "action", "power-off", "server",
					 o.server[i], "result", -1, "error", late),
			       "%s stays on: %s", o.server[i], late);
			continue;
		}
		/* only a server that serves no job now: a job may have landed since the plan */
		ask(o.server[i], &again);
		/*
		 * from what it says itself, not from the plan's view of it (ask() stops early, with
		 * njobs 0, at a reservation on another GPU or one without a GPU)
		 */
		if (!again.st || !again.jr || again.jr->n_jobs || again.st->n_reservations) {
			const char *why = !again.st || !again.jr     ? "it did not answer"
					  : again.st->n_reservations ? "it holds a reservation"
								     : "it serves jobs again";
			failed = 1;
			ctl_action(&o,
			       json_pack("{s:s,s:s,s:i,s:s}", "action", "power-off", "server",
					 o.server[i], "result", -1, "error", why),
			       "%s stays on: %s", o.server[i], why);
		} else {
			/*
			 * recorded as off before the hook runs, so that a server the hook did power
			 * off is never left unrecorded (then nothing would wake it); taken back if
			 * the hook fails
			 */
			json_array_append_new(off, json_string(o.server[i]));
			if (ctl_state_save(state, off)) {
				int e = errno;
				json_array_remove(off, json_array_size(off) - 1);
				failed = 1;
				ctl_action(&o,
				       json_pack("{s:s,s:s,s:i,s:s}", "action", "power-off", "server",
						 o.server[i], "result", -1, "error",
						 "the state file cannot be written"),
				       "%s stays on: cannot write %s (%s), where it would be recorded "
				       "as off",
				       o.server[i], state, strerror(e));
			} else if ((r = ctl_run_hook(o.power_off_cmd, o.server[i])) != 0) {
				json_array_remove(off, json_array_size(off) - 1);
				failed = 1;
				if (ctl_state_save(state, off))
					fprintf(stderr, "rgpuctl consolidate: cannot write %s: %s\n",
						state, strerror(errno));
				ctl_action(&o,
				       json_pack("{s:s,s:s,s:i,s:s}", "action", "power-off", "server",
						 o.server[i], "result", r, "error",
						 "the power-off command failed"),
				       "%s: the power-off command failed (exit %d); it is not recorded "
				       "as off",
				       o.server[i], r);
			} else {
				ctl_action(&o,
				       json_pack("{s:s,s:s,s:i}", "action", "power-off", "server",
						 o.server[i], "result", 0),
				       "%s powered off (recorded in %s; rgpuctl wake %s brings it back)",
				       o.server[i], state, o.server[i]);
			}
		}
		view_free(&again);
	}
	ret = failed ? CTL_FAILED : CTL_OK;
out:
	free(moved);
	ctl_plan_free(&plan);
	for (int i = 0; v && i < o.nserver; i++)
		view_free(&v[i]);
	free(v);
	free(ps);
	json_decref(off);
	if (lockfd >= 0)
		close(lockfd);
	ctl_opts_free(&o);
	return ret;
}

int ctl_place(const char *cluster, const char *state_path, uint64_t need, char *out, size_t len)
{
	char *argv[] = {"run", "--cluster", (char *)cluster, NULL};
	struct ctl_opts o;
	const char *state = state_path ? state_path : CTL_DEFAULT_STATE;
	json_t *off = NULL;
	int ret = ctl_parse(3, argv, "run", "", 0, &o), found = 0;

	if (ret) {
		ctl_opts_free(&o);
		return ret < 0 ? CTL_USAGE : ret;
	}
	off = ctl_state_load(state);
	/* a server that runs, is not drained, and has the room: the one with the most */
	char *cands[CTL_MAX_SERVERS], why[2000];
	int ncand = 0;
	for (int i = 0; i < o.nserver; i++)
		if (!ctl_state_has(off, o.server[i]))
			cands[ncand++] = o.server[i];
	found = ctl_pick_target(cands, ncand, need, out, len, why, sizeof(why)) != NULL;
	/* no room anywhere: the first server consolidate powered off is woken, and waited for */
	if (!found) {
		char woke[300];
		json_t *st;
		found = !ctl_wake_one(&o, state, "rgpuctl run", woke, sizeof(woke), &st);
		if (found)
			rgpu_reach_addr(json_string_value(json_object_get(st, "listen")), woke, out,
					len);
		json_decref(st);
	}
	if (!found)
		fprintf(stderr, "rgpuctl run: no server of %s can take the job (%s)\n", cluster,
			*why ? why : "every one is powered off");
	json_decref(off);
	ctl_opts_free(&o);
	return found ? CTL_OK : CTL_UNREACHABLE;
}
