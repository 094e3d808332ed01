/*
 * util's CPU count (rgpu_cpus) and the spin rule built on it (rgpu_spin_budget_ns): the CPUs
 * counted are those of the process's affinity mask, as a Slurm job or a container pinned to a
 * few CPUs sees them, not the machine's. Each case runs in a child of its own, since both
 * functions read their answer once; the child sets its mask and environment first.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/util.h"

#define WANT 30000u

/* In a child: mask of the first n CPUs of the parent's (0: the parent's whole mask), spin
 * override env (NULL: none); exits 0 when rgpu_cpus() and rgpu_spin_budget_ns(WANT) are as
 * wanted, else 1 after saying what they were. */
static void child(int n, const char *env, long want_cpus, uint64_t want_budget)
{
	pid_t pid = fork();
	int st = -1;

	assert_true(pid >= 0);
	if (pid == 0) {
		cpu_set_t all, set;
		CPU_ZERO(&set);
		if (sched_getaffinity(0, sizeof(all), &all))
			_exit(2);
		for (int c = 0, k = 0; n && c < CPU_SETSIZE && k < n; c++)
			if (CPU_ISSET(c, &all)) {
				CPU_SET(c, &set);
				k++;
			}
		if (n && sched_setaffinity(0, sizeof(set), &set))
			_exit(3);
		if (env)
			setenv("RGPU_SPIN_NS", env, 1);
		else
			unsetenv("RGPU_SPIN_NS");
		long cpus = rgpu_cpus();
		uint64_t budget = rgpu_spin_budget_ns(WANT);
		if (cpus != want_cpus || budget != want_budget) {
			fprintf(stderr, "mask of %d, RGPU_SPIN_NS %s: %ld CPUs, budget %llu; want %ld, %llu\n",
				n, env ? env : "unset", cpus, (unsigned long long)budget, want_cpus,
				(unsigned long long)want_budget);
			_exit(1);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static long mask_count(void)
{
	cpu_set_t all;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	return CPU_COUNT(&all);
}

/* One CPU: no spinning, whatever the machine has. */
static void test_one_cpu(void **state)
{
	(void)state;
	child(1, NULL, 1, 0);
}

/* The whole mask: spinning from 4 CPUs on. */
static void test_whole_mask(void **state)
{
	(void)state;
	long n = mask_count();
	child(0, NULL, n, n >= 4 ? WANT : 0);
}

/* RGPU_SPIN_NS overrides the rule, even on one CPU; 0 turns spinning off on any. */
static void test_override(void **state)
{
	(void)state;
	child(1, "777", 1, 777);
	child(0, "0", mask_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_cpu),
	    cmocka_unit_test(test_whole_mask),
	    cmocka_unit_test(test_override),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
