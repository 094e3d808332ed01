/* A SPANK plugin for the Slurm harness's self-test (cluster_selftest.sh), not part of rgpu:
 * sbatch --demo=N puts DEMO_WANT=N into the job's control environment (spank_job_env), which
 * demo_job_submit.lua turns into a request for N "demo" licenses. It stands in for the real
 * plugin of issue 15 to show that route works end to end in Slurm 22.05.
 *
 * The option is registered from slurm_spank_init with spank_option_register: sbatch 22.05.8 did
 * not offer an option given only in a static spank_options[] table ("unrecognized option"). */
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(demo, 1);

static char *want;

static int demo_opt(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || strspn(optarg, "0123456789") != strlen(optarg) || !*optarg)
		return -1;
	free(want);
	want = strdup(optarg);
	return want ? 0 : -1;
}

static struct spank_option demo_option = {
	"demo", "N", "ask for N demo licenses (DEMO_WANT=N in the job's control environment)", 1, 0,
	demo_opt,
};

int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	return spank_option_register(sp, &demo_option) == ESPANK_SUCCESS ? 0 : -1;
}

/* in sbatch and salloc (allocator) and srun (local): before the job is sent to slurmctld */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	spank_context_t c = spank_context();
	(void)ac;
	(void)av;
	if (!want || (c != S_CTX_ALLOCATOR && c != S_CTX_LOCAL))
		return 0;
	if (spank_job_control_setenv(sp, "DEMO_WANT", want, 1) != ESPANK_SUCCESS) {
		slurm_error("demo: spank_job_control_setenv(DEMO_WANT=%s) failed", want);
		return -1;
	}
	return 0;
}
