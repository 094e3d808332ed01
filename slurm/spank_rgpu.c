/*
 * spank_rgpu: the Slurm plugin that gives jobs GPUs of rgpu's servers (docs/operator-guide.md,
 * "Slurm"). It adds --rgpu=N[:MEM] to sbatch, srun and salloc:
 *
 *   sbatch/salloc/srun (allocator, local)  the request goes into the job's control
 *                      environment (SPANK_RGPU=N:BYTES), where the site's job_submit.lua
 *                      (slurm/job_submit.lua) finds it and asks for N of the `rgpu` license:
 *                      a job that cannot have GPUs now waits in the queue, Reason=Licenses
 *   each job step (slurmstepd, as root)  on the job's first node `rgpuctl slurm place JOBID
 *                      --gpus N --mem BYTES` reserves the GPUs (or finds where they are, for
 *                      later steps), on its other nodes `rgpuctl slurm where JOBID` waits (60 s)
 *                      for the first node's placement; the
 *                      step's tasks get RGPU_SERVERS, RGPU_JOB_LABEL=slurm-JOBID and the
 *                      interposer first on LD_LIBRARY_PATH; a placement that fails fails each
 *                      task before it starts, with rgpuctl's words on its standard error (a
 *                      step whose plugin fails earlier leaves the user no word, and Slurm calls
 *                      such a batch job COMPLETED)
 *   the job's epilog (slurmd, as root)  `rgpuctl slurm release JOBID`
 *
 * Its arguments in plugstack.conf: cluster=FILE (the cluster file, default /etc/rgpu/cluster),
 * rgpuctl=PATH, interposer=DIR (where rgpu's libcuda.so.1 is), admin_key=FILE, state=FILE
 * (consolidate's state file). All the work is rgpuctl's: this file only carries the request.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(rgpu, 1);

#ifndef RGPU_RGPUCTL
#define RGPU_RGPUCTL "/usr/bin/rgpuctl"
#endif
#ifndef RGPU_INTERPOSER
#define RGPU_INTERPOSER "/usr/lib/x86_64-linux-gnu/rgpu"
#endif

static unsigned want_gpus;   /* --rgpu's N (0: not asked) */
static char place_err[1200]; /* why the step has no GPUs, said by each of its tasks */
static uint64_t want_bytes;  /* its MEM, in bytes (0: not said) */
static const char *cluster = "/etc/rgpu/cluster", *rgpuctl = RGPU_RGPUCTL,
		  *interposer = RGPU_INTERPOSER, *admin_key, *state;

/* "N" or "N:MEM", MEM in MiB or with a K/M/G/T suffix; 0 on success */
static int parse_request(const char *s, unsigned *gpus, uint64_t *bytes)
{
	char *end;
	unsigned long n;
	unsigned long long m = 0;

	if (!s)
		return -1;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (end == s || errno || n < 1 || n > 16)
		return -1;
	if (*end == ':') {
		const char *ms = end + 1;
		m = strtoull(ms, &end, 10);
		if (end == ms || errno)
			return -1;
		switch (*end) {
		case '\0': case 'M': case 'm': m <<= 20; break;
		case 'K': case 'k': m <<= 10; break;
		case 'G': case 'g': m <<= 30; break;
		case 'T': case 't': m <<= 40; break;
		default: return -1;
		}
		if (*end && end[1])
			return -1;
	} else if (*end) {
		return -1;
	}
	*gpus = (unsigned)n;
	*bytes = m;
	return 0;
}

static int opt_rgpu(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (parse_request(optarg, &want_gpus, &want_bytes)) {
		slurm_error("rgpu: --rgpu=%s: give N[:MEM], 1 to 16 GPUs, MEM in MiB or with "
			    "K/M/G/T (--rgpu=2:8G)",
			    optarg ? optarg : "");
		return -1;
	}
	return 0;
}

/* registered in slurm_spank_init: sbatch 22.05 does not offer an option of a static table */
static struct spank_option rgpu_option = {
	"rgpu", "N[:MEM]",
	"GPUs of rgpu's servers for the job: N of them, each with MEM free (MiB, or 8G)", 1, 0,
	opt_rgpu,
};

int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);
int slurm_spank_job_epilog(spank_t sp, int ac, char **av);
int slurm_spank_task_init(spank_t sp, int ac, char **av);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_option_register(sp, &rgpu_option) != ESPANK_SUCCESS) {
		slurm_error("rgpu: cannot register --rgpu");
		return -1;
	}
	return 0;
}

static void read_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "cluster=", 8))
			cluster = av[i] + 8;
		else if (!strncmp(av[i], "rgpuctl=", 8))
			rgpuctl = av[i] + 8;
		else if (!strncmp(av[i], "interposer=", 11))
			interposer = av[i] + 11;
		else if (!strncmp(av[i], "admin_key=", 10))
			admin_key = av[i] + 10;
		else if (!strncmp(av[i], "state=", 6))
			state = av[i] + 6;
		else
			slurm_error("rgpu: unknown plugstack.conf argument '%s' (cluster=, rgpuctl=, "
				    "interposer=, admin_key=, state=)",
				    av[i]);
	}
}

/*
 * Run rgpuctl with args (NULL-terminated, after the program's name); its first stdout line in
 * out, its stderr's end in err. Returns its exit status, or -1.
 */
static int run_rgpuctl(const char *const *args, char *out, size_t olen, char *err, size_t elen)
{
	const char *argv[24];
	int po[2], pe[2], st, n = 0;
	pid_t pid;

	argv[n++] = rgpuctl;
	for (; *args && n < 16; args++)
		argv[n++] = *args;
	argv[n++] = "--cluster";
	argv[n++] = cluster;
	if (admin_key) {
		argv[n++] = "--admin-key";
		argv[n++] = admin_key;
	}
	if (state) {
		argv[n++] = "--state";
		argv[n++] = state;
	}
	argv[n] = NULL;
	out[0] = err[0] = '\0';
	if (pipe(po))
		return -1;
	if (pipe(pe)) {
		close(po[0]);
		close(po[1]);
		return -1;
	}
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(po[1], STDOUT_FILENO);
		dup2(pe[1], STDERR_FILENO);
		close(po[0]);
		close(pe[0]);
		execv(rgpuctl, (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s", rgpuctl, strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/*
	 * Both pipes at once, each read to its end (a child blocked writing one while we wait on
	 * the other would hang the step): stdout's first bytes are kept, stderr's last.
	 */
	size_t o = 0, e = 0;
	struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	char tmp[512];
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int k = 0; k < 2; k++) {
			if (pf[k].fd < 0 || !pf[k].revents)
				continue;
			ssize_t r = read(pf[k].fd, tmp, sizeof(tmp));
			if (r <= 0) {
				pf[k].fd = -1; /* poll skips it now */
				continue;
			}
			size_t got = (size_t)r;
			if (k == 0) {
				if (got > olen - 1 - o)
					got = olen - 1 - o;
				memcpy(out + o, tmp, got);
				o += got;
			} else {
				/* keep the end: the last words say why */
				if (e + got >= elen)
					e = 0;
				if (got < elen) {
					memcpy(err + e, tmp, got);
					e += got;
				}
			}
		}
	}
	out[o] = '\0';
	err[e < elen ? e : elen - 1] = '\0';
	close(po[0]);
	close(pe[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	out[strcspn(out, "\n")] = '\0';
	for (size_t k = strlen(err); k && (err[k - 1] == '\n' || err[k - 1] == ' '); k--)
		err[k - 1] = '\0';
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char req[64], out[4096], err[1024], job[32], label[48], ldpath[8192], old[4096];
	uint32_t jobid = 0;
	int ret;

	read_args(ac, av);
	if (!want_gpus)
		return 0;
	snprintf(req, sizeof(req), "%u:%" PRIu64, want_gpus, want_bytes);
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		/* for job_submit.lua (the license) and the epilog */
		if (spank_job_control_setenv(sp, "RGPU", req, 1) != ESPANK_SUCCESS) {
			slurm_error("rgpu: cannot pass --rgpu to the job");
			return -1;
		}
		return 0;
	case S_CTX_REMOTE:
		break;
	default:
		return 0;
	}
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS) {
		slurm_error("rgpu: the job has no id here");
		return -1;
	}
	snprintf(job, sizeof(job), "%" PRIu32, jobid);
	char gpus[16], mem[32];
	snprintf(gpus, sizeof(gpus), "%u", want_gpus);
	snprintf(mem, sizeof(mem), "%" PRIu64 "K", want_bytes >> 10);
	const char *args[] = {"slurm", "place", job, "--gpus", gpus, "--mem", mem, NULL};
	const char *where[] = {"slurm", "where", job, NULL};
	uint32_t nodeid = 0;
	if (spank_get_item(sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS)
		nodeid = 0;
	if (nodeid == 0) {
		ret = run_rgpuctl(args, out, sizeof(out), err, sizeof(err));
	} else {
		/* one placement per job: the first node's; the others find it (exit 4: not yet) */
		for (int t = 0; (ret = run_rgpuctl(where, out, sizeof(out), err, sizeof(err))) == 4 &&
				t < 120;
		     t++)
			usleep(500000);
	}
	if (ret || !*out) {
		snprintf(place_err, sizeof(place_err),
			 "rgpu: no GPU for job %s (rgpuctl slurm %s exited %d): %s", job,
			 nodeid ? "where" : "place", ret, *err ? err : "no answer");
		slurm_error("%s", place_err);
		return 0; /* the tasks fail, saying why */
	}
	snprintf(label, sizeof(label), "slurm-%s", job);
	if (spank_getenv(sp, "LD_LIBRARY_PATH", old, sizeof(old)) != ESPANK_SUCCESS)
		old[0] = '\0';
	snprintf(ldpath, sizeof(ldpath), "%s%s%s", interposer, *old ? ":" : "", old);
	if (spank_setenv(sp, "RGPU_SERVERS", out, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "RGPU_JOB_LABEL", label, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "LD_LIBRARY_PATH", ldpath, 1) != ESPANK_SUCCESS) {
		slurm_error("rgpu: cannot set the job's environment");
		return -1;
	}
	slurm_verbose("rgpu: job %s: RGPU_SERVERS=%s", job, out);
	return 0;
}

/* in each task, as its user, before the program: a step without its GPUs does not start */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (!*place_err)
		return 0;
	dprintf(STDERR_FILENO, "%s\n", place_err);
	return -1;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	char out[512], err[1024];
	const char *job = getenv("SLURM_JOB_ID");
	char *optarg = NULL;
	int ret;

	read_args(ac, av);
	/* only a job that asked (its option, or its control environment) */
	if (spank_option_getopt(sp, &rgpu_option, &optarg) != ESPANK_SUCCESS &&
	    !getenv("SPANK_RGPU"))
		return 0;
	if (!job || !*job) {
		slurm_error("rgpu: the epilog has no SLURM_JOB_ID: reservations are left");
		return 0;
	}
	const char *args[] = {"slurm", "release", job, NULL};
	ret = run_rgpuctl(args, out, sizeof(out), err, sizeof(err));
	if (ret)
		slurm_error("rgpu: job %s's reservation may be left (rgpuctl slurm release exited "
			    "%d): %s",
			    job, ret, err);
	/* a failed release does not fail the epilog: the node would be drained for it */
	return 0;
}
