/*
 * Per-tenant accounting across processes (server/quota.c): workers are forked children that
 * join their tenant, charge device memory against its quota and exit without giving anything
 * back, as a killed worker would; the supervisor (this process) sees the sums and gets every
 * byte and session back when it releases a slot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/err.h"
#include "srv.h"

#define MiB (1ull << 20)

/* Run fn as a worker in slot; its exit status (0: every check in it held). */
static int worker(int slot, int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		srv_acct_become(slot);
		_exit(fn());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int first(void)
{
	unsigned n = 0;
	uint64_t used = 1;
	if (srv_acct_join("alice", 2, &n) || n != 1)
		return 1;
	if (srv_acct_charge(48 * MiB, 64 * MiB, &used) || used != 0)
		return 2;
	return 0; /* exits holding 48 MiB and its session */
}

static int second(void)
{
	unsigned n = 0;
	uint64_t used = 0;
	if (srv_acct_join("alice", 2, &n) || n != 2)
		return 1;
	if (srv_acct_charge(32 * MiB, 64 * MiB, &used) != RGPU_ENOSPC || used != 48 * MiB)
		return 2;
	if (srv_acct_charge(16 * MiB, 64 * MiB, &used) || used != 48 * MiB)
		return 3;
	return 0;
}

static int third(void)
{
	unsigned n = 0;
	return srv_acct_join("alice", 2, &n) == RGPU_EBUSY && n == 2 ? 0 : 1;
}

static int bob(void)
{
	unsigned n = 0;
	uint64_t used = 1;
	if (srv_acct_join("bob", SRV_UNLIMITED, &n) || n != 1)
		return 1;
	if (srv_acct_charge(100 * MiB, 64 * MiB, &used) != RGPU_ENOSPC || used != 0)
		return 2;
	if (srv_acct_charge(64 * MiB, 64 * MiB, &used) || used != 0)
		return 3;
	srv_acct_uncharge(64 * MiB);
	srv_acct_leave();
	return 0;
}

static void test_accounting(void **state)
{
	uint64_t bytes;
	unsigned sessions;
	int s0, s1, s2, s3;

	(void)state;
	assert_int_equal(srv_acct_create(4), 0);
	s0 = srv_acct_slot_take();
	s1 = srv_acct_slot_take();
	assert_int_equal(s0, 0);
	assert_int_equal(s1, 1);
	assert_int_equal(srv_acct_usage("alice", &bytes, &sessions), RGPU_ENOTFOUND);

	assert_int_equal(worker(s0, first), 0);
	assert_int_equal(srv_acct_usage("alice", &bytes, &sessions), 0);
	assert_int_equal(bytes, 48 * MiB);
	assert_int_equal(sessions, 1);

	assert_int_equal(worker(s1, second), 0);
	assert_int_equal(srv_acct_usage("alice", &bytes, &sessions), 0);
	assert_int_equal(bytes, 64 * MiB);
	assert_int_equal(sessions, 2);

	/* a third session of alice (sessions 2) is refused and counts nothing */
	s2 = srv_acct_slot_take();
	assert_int_equal(worker(s2, third), 0);
	assert_int_equal(srv_acct_usage("alice", &bytes, &sessions), 0);
	assert_int_equal(bytes, 64 * MiB);
	assert_int_equal(sessions, 2);
	srv_acct_slot_release(s2);

	/* bob gives back what he took (srv_acct_leave, a clean end) */
	s3 = srv_acct_slot_take();
	assert_int_equal(worker(s3, bob), 0);
	assert_int_equal(srv_acct_usage("bob", &bytes, &sessions), 0);
	assert_int_equal(bytes, 0);
	assert_int_equal(sessions, 0);
	srv_acct_slot_release(s3);

	/* the first worker "died" holding 48 MiB: reaping it gives them back */
	srv_acct_slot_release(s0);
	assert_int_equal(srv_acct_usage("alice", &bytes, &sessions), 0);
	assert_int_equal(bytes, 16 * MiB);
	assert_int_equal(sessions, 1);
	/* all four slots: the released ones are taken again, then none is left */
	assert_int_equal(srv_acct_slot_take(), 0);
	assert_int_equal(srv_acct_slot_take(), 2);
	assert_int_equal(srv_acct_slot_take(), 3);
	assert_int_equal(srv_acct_slot_take(), -1);

	/* a process with no slot (the supervisor, a replay) counts nothing and joins nothing */
	uint64_t used = 1;
	unsigned n;
	assert_int_equal(srv_acct_charge(1ull << 40, 0, &used), 0);
	assert_int_equal(used, 0);
	assert_int_equal(srv_acct_join("alice", SRV_UNLIMITED, &n), RGPU_ENOSPC);
	srv_acct_destroy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_accounting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
