/*
 * Per-tenant accounting across the worker processes of one server: the device memory and the
 * sessions each tenant holds, checked against its limits (rgpud.conf, config.c).
 *
 * Every worker is a process of its own, so the numbers live in one table of shared memory
 * (MAP_SHARED | MAP_ANONYMOUS) that the supervisor maps before it forks any worker. The
 * supervisor gives each admitted worker a slot of the table at fork and takes it back when it
 * reaps the worker, whatever way the worker ended: the slot holds that worker's device bytes
 * and whether it counts as a session, so a worker killed by a signal gives back what it held
 * the moment it is reaped, with no help from itself. A tenant's use is the sum over the slots
 * that name it; there is no separate total that a dying worker could leave wrong.
 *
 * A worker names its tenant after authentication (srv_acct_join), by an index into an
 * append-only table of tenant names. Joining and charging device memory take one lock, a
 * robust process-shared mutex (a worker that dies holding it leaves it usable), so two
 * sessions of one tenant cannot both take the last bytes of its quota; giving bytes back is a
 * plain atomic subtraction, and the supervisor never takes the lock.
 *
 * It must never let a tenant's sessions together hold more than its quota, and never block the
 * supervisor.
 */
#define LOG_PREFIX "quota: "
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rgpu/auth.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

#define ACCT_MAGIC 0x54434752u /* "RGCT" */
#define ACCT_VERSION 1u

struct acct_slot {
	atomic_int tenant;              /* index in names + 1; 0: free, or not yet authenticated */
	atomic_int session;             /* it counts as one of its tenant's sessions */
	atomic_uint_fast64_t dev_bytes; /* device memory it holds */
};

struct srv_acct {
	uint32_t magic, version;
	pthread_mutex_t lock;           /* robust, process-shared: joins and charges */
	atomic_int ntenants;            /* names[0, ntenants) are written and never change */
	int nslots;
	atomic_int hiwater;             /* slots[hiwater, nslots) were never given to a worker */
	char names[SRV_ACCT_TENANTS][RGPU_TENANT_MAX + 1];
	struct acct_slot slots[];
};

static struct srv_acct *acct;  /* the server's table: mapped by the supervisor, inherited */
static size_t acct_len;
static int self = -1;          /* this worker's slot; -1: none (the supervisor, a replay) */
static unsigned char *taken;   /* the supervisor's: which slots belong to a live worker */

int srv_acct_create(int nslots)
{
	pthread_mutexattr_t ma;
	size_t len;
	void *p;

	if (nslots <= 0)
		return RGPU_EINVAL;
	len = sizeof(struct srv_acct) + (size_t)nslots * sizeof(struct acct_slot);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		pr_err("cannot map the tenant accounting table (%zu bytes): %s", len,
		       strerror(errno));
		return RGPU_ESYS;
	}
	taken = calloc((size_t)nslots, 1);
	if (!taken) {
		munmap(p, len);
		return RGPU_ENOMEM;
	}
	acct = p; /* zero-filled: every slot free, no tenant */
	acct_len = len;
	acct->magic = ACCT_MAGIC;
	acct->version = ACCT_VERSION;
	acct->nslots = nslots;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&acct->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	return 0;
}

void srv_acct_destroy(void)
{
	if (!acct)
		return;
	munmap(acct, acct_len);
	acct = NULL;
	free(taken);
	taken = NULL;
	self = -1;
}

int srv_acct_slot_take(void)
{
	if (!acct)
		return -1;
	/* the lowest free slot: sums stop at the highest ever taken (hiwater) */
	for (int i = 0; i < acct->nslots; i++)
		if (!taken[i]) {
			taken[i] = 1;
			if (i >= atomic_load(&acct->hiwater))
				atomic_store(&acct->hiwater, i + 1);
			return i;
		}
	return -1;
}

void srv_acct_slot_release(int slot)
{
	struct acct_slot *s;

	if (!acct || slot < 0 || slot >= acct->nslots)
		return;
	s = &acct->slots[slot];
	/* the bytes first: a reader that still sees the tenant sees nothing held */
	atomic_store(&s->dev_bytes, 0);
	atomic_store(&s->session, 0);
	atomic_store(&s->tenant, 0);
	taken[slot] = 0;
}

void srv_acct_become(int slot)
{
	self = acct && slot >= 0 && slot < acct->nslots ? slot : -1;
}

static void lock(void)
{
	/* a worker that died holding the lock left no half-done state behind: see the callers */
	if (pthread_mutex_lock(&acct->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&acct->lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&acct->lock);
}

/* The index of tenant's name, added when new; -1 when the table of names is full. Locked. */
static int tenant_index(const char *tenant)
{
	int n = atomic_load(&acct->ntenants);

	for (int i = 0; i < n; i++)
		if (!strcmp(acct->names[i], tenant))
			return i;
	if (n == SRV_ACCT_TENANTS)
		return -1;
	/* the name is whole before the count says it exists */
	snprintf(acct->names[n], sizeof(acct->names[n]), "%s", tenant);
	atomic_store(&acct->ntenants, n + 1);
	return n;
}

/* What the slots of tenant index t hold together. */
static void sum(int t, uint64_t *bytes, unsigned *sessions)
{
	int n = atomic_load(&acct->hiwater);

	*bytes = 0;
	*sessions = 0;
	for (int i = 0; i < n; i++) {
		struct acct_slot *s = &acct->slots[i];
		if (atomic_load(&s->tenant) != t + 1)
			continue;
		*bytes += atomic_load(&s->dev_bytes);
		*sessions += atomic_load(&s->session) != 0;
	}
}

int srv_acct_join(const char *tenant, uint64_t max_sessions, unsigned *sessions)
{
	uint64_t bytes;
	int t, ret = 0;

	*sessions = 0;
	if (!acct || self < 0)
		return RGPU_ENOSPC;
	lock();
	t = tenant_index(tenant);
	if (t < 0) {
		ret = RGPU_ENOSPC;
		goto out;
	}
	atomic_store(&acct->slots[self].tenant, t + 1);
	sum(t, &bytes, sessions);
	if (max_sessions != SRV_UNLIMITED && *sessions >= max_sessions) {
		ret = RGPU_EBUSY;
		goto out;
	}
	atomic_store(&acct->slots[self].session, 1);
	(*sessions)++;
out:
	unlock();
	return ret;
}

void srv_acct_leave(void)
{
	if (!acct || self < 0)
		return;
	atomic_store(&acct->slots[self].dev_bytes, 0);
	atomic_store(&acct->slots[self].session, 0);
}

int srv_acct_charge(uint64_t bytes, uint64_t limit, uint64_t *used)
{
	struct acct_slot *s;
	unsigned n;
	int t, ret = 0;

	*used = 0;
	if (!acct || self < 0)
		return 0; /* not a job of a server (a replay): nothing to count against */
	s = &acct->slots[self];
	lock();
	t = atomic_load(&s->tenant) - 1;
	if (t >= 0)
		sum(t, used, &n);
	if (limit != SRV_UNLIMITED && (*used > limit || bytes > limit - *used))
		ret = RGPU_ENOSPC;
	else
		atomic_fetch_add(&s->dev_bytes, bytes);
	unlock();
	return ret;
}

void srv_acct_uncharge(uint64_t bytes)
{
	if (!acct || self < 0)
		return;
	atomic_fetch_sub(&acct->slots[self].dev_bytes, bytes);
}

int srv_acct_usage(const char *tenant, uint64_t *bytes, unsigned *sessions)
{
	int n;

	*bytes = 0;
	*sessions = 0;
	if (!acct)
		return RGPU_ENOTFOUND;
	n = atomic_load(&acct->ntenants);
	for (int i = 0; i < n; i++)
		if (!strcmp(acct->names[i], tenant)) {
			sum(i, bytes, sessions);
			return 0;
		}
	return RGPU_ENOTFOUND;
}

/* ---- the worker's side ------------------------------------------------------------------ */

const char *srv_tenant_label(const char *tenant)
{
	static char buf[RGPU_TENANT_MAX + 16];
	if (!*tenant)
		return "the anonymous tenant";
	snprintf(buf, sizeof(buf), "tenant '%s'", tenant);
	return buf;
}

CUresult srv_mem_charge(struct srv_worker *w, int device, uint64_t bytes)
{
	uint64_t used;

	if (srv_acct_charge(bytes, w->limits.memory, &used)) {
		pr_warn_once("job %s of %s: over the device memory quota of %llu bytes (rgpud.conf, "
			     "memory): its sessions hold %llu, %llu more asked; answered "
			     "CUDA_ERROR_OUT_OF_MEMORY",
			     w->job_hex, srv_tenant_label(w->tenant), (unsigned long long)w->limits.memory,
			     (unsigned long long)used, (unsigned long long)bytes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	atomic_fetch_add(&w->dev_bytes, bytes);
	if (device >= 0 && device < 16)
		atomic_fetch_add(&w->dev_bytes_by[device], bytes);
	return CUDA_SUCCESS;
}

void srv_mem_uncharge(struct srv_worker *w, int device, uint64_t bytes)
{
	srv_acct_uncharge(bytes);
	atomic_fetch_sub(&w->dev_bytes, bytes);
	if (device >= 0 && device < 16)
		atomic_fetch_sub(&w->dev_bytes_by[device], bytes);
}
