/*
 * Reservations as rgpuctl makes and moves them (admin RESERVE; docs/operator-guide.md,
 * "Slurm"): one request, and a reservation following its job's last program when the job is
 * migrated or drained off a server. Placement is ctl/slurm.c's; consolidate moves a reservation
 * with all its programs itself (ctl/consolidate.c).
 */
#include <stdio.h>
#include <string.h>

#include "admin.pb-c.h"
#include "ctl.h"
#include "rgpu_admin_msgs.h"
#include "rgpu/err.h"

int ctl_reserve(const char *admin, const char *name, unsigned gpu, uint64_t bytes,
		   int release, char *err, size_t len)
{
	Rgpu__ReserveRequest req = RGPU__RESERVE_REQUEST__INIT;
	Rgpu__ReserveReply *rep = NULL;
	int ret;

	req.name = (char *)name;
	req.gpu = gpu;
	req.bytes = bytes;
	req.release = release;
	ret = rgpu_admin_once(&ctl_peer, admin, RGPU_ADMIN_MSG_RESERVE, &req.base,
			      &rgpu__reserve_reply__descriptor, (ProtobufCMessage **)&rep, NULL, NULL,
			      RGPU_ADMIN_TIMEOUT_MS, err, len);
	if (!ret && rep->result) {
		ret = rep->result;
		snprintf(err, len, "%s: %s", admin,
			 rep->error && *rep->error ? rep->error : rgpu_strerror(ret));
	}
	if (rep)
		rgpu__reserve_reply__free_unpacked(rep, NULL);
	return ret;
}

/* The label of job `job` (its hex id) on server admin, in out ("" when none or not found). */
static void job_label(const char *admin, const char *job, char *out, size_t len)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	Rgpu__JobsReply *jr = NULL;
	char err[400];

	out[0] = '\0';
	if (rgpu_admin_once(&ctl_peer, admin, RGPU_ADMIN_MSG_JOBS, &req.base,
			    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)))
		return;
	for (size_t i = 0; i < jr->n_jobs; i++) {
		char id[40];
		ctl_hex(&jr->jobs[i]->job_id, id, sizeof(id));
		if (!strncmp(id, job, strlen(job)) && jr->jobs[i]->label)
			snprintf(out, len, "%s", jr->jobs[i]->label);
	}
	rgpu__jobs_reply__free_unpacked(jr, NULL);
}

int ctl_follow_reservation(const char *from, const char *to, const char *job, char *name,
			   size_t len)
{
	Rgpu__AdminRequest req = RGPU__ADMIN_REQUEST__INIT;
	Rgpu__StatusReply *st = NULL;
	Rgpu__JobsReply *jr = NULL;
	const Rgpu__Reservation *rv;
	char err[600];
	int left = 0, ret = 0;

	job_label(to, job, name, len);
	if (!*name)
		return 0;
	if (rgpu_admin_once(&ctl_peer, from, RGPU_ADMIN_MSG_STATUS, &req.base,
			    &rgpu__status_reply__descriptor, (ProtobufCMessage **)&st, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err)) ||
	    rgpu_admin_once(&ctl_peer, from, RGPU_ADMIN_MSG_JOBS, &req.base,
			    &rgpu__jobs_reply__descriptor, (ProtobufCMessage **)&jr, NULL, NULL,
			    RGPU_ADMIN_TIMEOUT_MS, err, sizeof(err))) {
		fprintf(stderr, "rgpuctl: the reservation %s stays: %s\n", name, err);
		ret = RGPU_ECONNECT;
		goto out;
	}
	rv = ctl_reservation(st, name);
	for (size_t i = 0; jr && i < jr->n_jobs; i++)
		left += jr->jobs[i]->label && !strcmp(jr->jobs[i]->label, name);
	if (!rv || left) {
		name[0] = '\0'; /* none here, or the job's other programs stay: it stays too */
		goto out;
	}
	/* on the target's first GPU, where the job's devices are numbered from (migrate.c) */
	ret = ctl_reserve(to, name, 0, rv->bytes, 0, err, sizeof(err));
	if (!ret && (ret = ctl_reserve(from, name, 0, 0, 1, err, sizeof(err)))) {
		char e2[600];
		/* kept on the source: not on both */
		if (ctl_reserve(to, name, 0, 0, 1, e2, sizeof(e2)))
			fprintf(stderr, "rgpuctl: the reservation %s is on both servers now: %s\n",
				name, e2);
	}
	if (ret)
		fprintf(stderr, "rgpuctl: the reservation %s did not follow its job: %s\n", name,
			err);
out:
	if (ret)
		name[0] = '\0'; /* said above: it did not move, and the caller must not say it did */
	if (st)
		rgpu__status_reply__free_unpacked(st, NULL);
	if (jr)
		rgpu__jobs_reply__free_unpacked(jr, NULL);
	return ret;
}
