/*
 * Where the kernel puts rgpud's mappings (and so its workers', which are forked from it).
 *
 * The server's driver places each __managed__ variable in the worker's mapping area, and the
 * client must map the variable at that same address in its own process (interposer/managed.c).
 * By default both processes' areas grow down from just under the stack (0x7f...), so the
 * address may already hold a library or a thread's stack in the client: the program then fails
 * at its first CUDA call (seen on the GPU host, about one program in fifty).
 *
 * exec places the area under the stack's size limit, so rgpud raises that limit to
 * SRV_LAYOUT_GAP, executes itself again, and puts the limit back, with the default thread
 * stack size that glibc derived from it. The area then starts near 0x5fff_0000_0000, clear of
 * the clients' areas above it and of the address window (default 0x2000_0000_0000 + 16 TiB)
 * below it. RGPUD_LAYOUT=keep leaves the layout alone (a debugger, valgrind).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rgpu/log.h"
#include "srv.h"

#define SRV_LAYOUT_GAP (32ull << 40)
#define SRV_LAYOUT_ENV "RGPUD_STACK_LIMIT" /* the limit to put back, set across the exec */
#define SRV_DEFAULT_THREAD_STACK (8ull << 20) /* glibc's when the limit is unlimited */

static char layout_note[160];

void srv_layout_reexec(char **argv)
{
	const char *back = getenv(SRV_LAYOUT_ENV), *mode = getenv("RGPUD_LAYOUT");
	struct rlimit rl;
	char val[32];

	if (getrlimit(RLIMIT_STACK, &rl))
		return;
	if (back) {
		/* the second start: put the limit and the threads' default stack size back */
		rlim_t soft = strcmp(back, "inf") ? strtoull(back, NULL, 10) : RLIM_INFINITY;
		pthread_attr_t a;
		size_t stack = soft == RLIM_INFINITY || soft > SRV_DEFAULT_THREAD_STACK
				       ? SRV_DEFAULT_THREAD_STACK
				       : (size_t)soft;

		unsetenv(SRV_LAYOUT_ENV);
		rl.rlim_cur = soft;
		if (setrlimit(RLIMIT_STACK, &rl))
			snprintf(layout_note, sizeof(layout_note),
				 "cannot put the stack size limit back (%s)", strerror(errno));
		if (!pthread_attr_init(&a)) {
			if (pthread_attr_setstacksize(&a, stack) || pthread_setattr_default_np(&a))
				snprintf(layout_note, sizeof(layout_note),
					 "cannot set the threads' default stack size");
			pthread_attr_destroy(&a);
		}
		return;
	}
	if (mode && !strcmp(mode, "keep")) {
		snprintf(layout_note, sizeof(layout_note), "RGPUD_LAYOUT=keep");
		return;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= SRV_LAYOUT_GAP)
		return; /* already placed so */
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(val, sizeof(val), "inf");
	else
		snprintf(val, sizeof(val), "%llu", (unsigned long long)rl.rlim_cur);
	struct rlimit big = {SRV_LAYOUT_GAP, rl.rlim_max};
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < SRV_LAYOUT_GAP)
		big.rlim_max = SRV_LAYOUT_GAP; /* root may raise it */
	if (setrlimit(RLIMIT_STACK, &big)) {
		snprintf(layout_note, sizeof(layout_note),
			 "cannot raise the stack size limit to move it (%s)", strerror(errno));
		return;
	}
	setenv(SRV_LAYOUT_ENV, val, 1);
	execv("/proc/self/exe", argv);
	snprintf(layout_note, sizeof(layout_note), "cannot execute itself again (%s)",
		 strerror(errno));
	unsetenv(SRV_LAYOUT_ENV);
	setrlimit(RLIMIT_STACK, &rl);
}

void srv_layout_say(uint64_t window_base, uint64_t window_size)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t at = p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;

	if (p != MAP_FAILED)
		munmap(p, 4096);
	if (at && at < (1ull << 47) - SRV_LAYOUT_GAP + (1ull << 40) &&
	    at > window_base + window_size) {
		pr_debug("layout: mappings from %#llx down (drivers' __managed__ variables there)",
			 (unsigned long long)at);
		return;
	}
	pr_warn("layout: this process maps at %#llx%s%s: a __managed__ variable's address may be "
		"taken in a client, whose program then fails at its first CUDA call",
		(unsigned long long)at, layout_note[0] ? ", " : "", layout_note);
}
