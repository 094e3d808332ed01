/*
 * Reservations (admin RESERVE, proto/admin.proto): memory of a GPU of this server set aside by
 * name for a batch job whose programs will run there (rgpuctl slurm place). The supervisor
 * alone keeps them, in
 * memory and in DATA/reservations (one "NAME GPU BYTES CREATED_MS" line each, rewritten whole
 * through a temporary file and rename, so a crash leaves the old list or the new one).
 */
#define LOG_PREFIX "reserve: "
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.pb-c.h"
#include "rgpu/err.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

static struct srv_resv resv[SRV_MAX_RESV];
static size_t nresv;

static void resv_path(const char *dir, char *out, size_t len)
{
	snprintf(out, len, "%s/reservations", dir);
}

void srv_resv_load(const char *state_dir)
{
	char path[4200], line[256];
	FILE *f;
	int ln = 0;

	nresv = 0;
	if (!state_dir)
		return;
	resv_path(state_dir, path, sizeof(path));
	f = fopen(path, "re");
	if (!f) {
		if (errno != ENOENT)
			pr_warn("cannot read %s: %s; no reservation kept", path, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		struct srv_resv r = {0};
		ln++;
		if (sscanf(line, "%63s %" SCNu32 " %" SCNu64 " %" SCNu64, r.name, &r.gpu, &r.bytes,
			   &r.created_ms) != 4 ||
		    !rgpu_label_valid(r.name) || nresv == SRV_MAX_RESV) {
			pr_warn("%s:%d: not a reservation, left out", path, ln);
			continue;
		}
		resv[nresv++] = r;
	}
	fclose(f);
	for (size_t i = 0; i < nresv; i++)
		pr_info("GPU %u is reserved for %s (kept from before the restart)", resv[i].gpu,
			resv[i].name);
}

static int resv_save(const char *state_dir, char *why, size_t len)
{
	char path[4200], tmp[4300];
	FILE *f;
	int ok;

	if (!state_dir)
		return 0;
	resv_path(state_dir, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "we");
	if (!f)
		goto fail;
	for (size_t i = 0; i < nresv; i++)
		fprintf(f, "%s %u %" PRIu64 " %" PRIu64 "\n", resv[i].name, resv[i].gpu,
			resv[i].bytes, resv[i].created_ms);
	ok = !ferror(f) && !fflush(f) && !fsync(fileno(f));
	if (fclose(f) || !ok || rename(tmp, path))
		goto fail;
	return 0;
fail:
	snprintf(why, len, "cannot write %s: %s", path, strerror(errno));
	unlink(tmp);
	return RGPU_ESYS;
}

int srv_resv_apply(const char *state_dir, const char *name, uint32_t gpu, uint64_t bytes,
		   int release, unsigned ngpus, int drained, char *why, size_t len)
{
	size_t i, at = nresv;
	struct srv_resv old[SRV_MAX_RESV];
	size_t nold = nresv;
	int ret;

	if (!rgpu_label_valid(name)) {
		snprintf(why, len, "a reservation's name is 1 to %d of A-Z a-z 0-9 . _ : -",
			 RGPU_LABEL_MAX);
		return RGPU_EINVAL;
	}
	for (i = 0; i < nresv; i++)
		if (!strcmp(resv[i].name, name) && (release || resv[i].gpu == gpu))
			break;
	memcpy(old, resv, sizeof(old));
	if (release) {
		if (i == nresv) {
			snprintf(why, len, "no reservation %s here", name);
			return RGPU_ENOTFOUND;
		}
		/* a name may hold several GPUs: release ends every one */
		size_t k = 0;
		for (i = 0; i < nresv; i++)
			if (strcmp(resv[i].name, name))
				resv[k++] = resv[i];
		nresv = k;
	} else {
		if (gpu >= ngpus) {
			snprintf(why, len, "no GPU %u here (%u GPU(s))", gpu, ngpus);
			return RGPU_EINVAL;
		}
		if (i < nresv) {
			at = i; /* the same name on the same GPU: its size changes */
		} else if (drained) {
			snprintf(why, len, "the server is drained: it takes no new reservation");
			return RGPU_EBUSY;
		} else if (nresv == SRV_MAX_RESV) {
			snprintf(why, len, "this server keeps at most %d reservations", SRV_MAX_RESV);
			return RGPU_ENOSPC;
		} else {
			at = nresv++;
			snprintf(resv[at].name, sizeof(resv[at].name), "%s", name);
			resv[at].gpu = gpu;
			resv[at].created_ms = rgpu_wall_ms();
		}
		resv[at].bytes = bytes;
	}
	ret = resv_save(state_dir, why, len);
	if (ret) {
		/* not kept on disk: not made either, so a restart cannot disagree */
		memcpy(resv, old, sizeof(old));
		nresv = nold;
		return ret;
	}
	if (release)
		pr_info("reservation %s ended", name);
	else
		pr_info("GPU %u reserved for %s (%" PRIu64 " MiB asked)", gpu, name, bytes >> 20);
	return 0;
}

size_t srv_resv_view(Rgpu__Reservation *v, Rgpu__Reservation **vp, size_t max)
{
	size_t n = nresv < max ? nresv : max;

	for (size_t i = 0; i < n; i++) {
		rgpu__reservation__init(&v[i]);
		v[i].name = resv[i].name;
		v[i].gpu = resv[i].gpu;
		v[i].bytes = resv[i].bytes;
		v[i].created_unix_ms = resv[i].created_ms;
		vp[i] = &v[i];
	}
	return n;
}

uint64_t srv_resv_unmapped(unsigned gpu, uint64_t (*mapped)(const char *label, unsigned gpu))
{
	uint64_t sum = 0;

	for (size_t i = 0; i < nresv; i++)
		if (resv[i].gpu == gpu) {
			uint64_t m = mapped(resv[i].name, gpu);
			if (resv[i].bytes > m)
				sum += resv[i].bytes - m;
		}
	return sum;
}
