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
/* across the exec: the stack limit to put back (soft, hard) and glibc's default thread stack */
#define SRV_LAYOUT_ENV "RGPUD_STACK_LIMIT"

static char layout_note[160];

static void note(const char *what)
{
	snprintf(layout_note, sizeof(layout_note), "%s%s%s", what, errno ? ": " : "",
		 errno ? strerror(errno) : "");
}

static void put_lim(char *out, size_t len, rlim_t v)
{
	if (v == RLIM_INFINITY)
		snprintf(out, len, "inf");
	else
		snprintf(out, len, "%llu", (unsigned long long)v);
}

static int get_lim(const char *s, rlim_t *v)
{
	char *end;
	if (!strcmp(s, "inf")) {
		*v = RLIM_INFINITY;
		return 0;
	}
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	*v = (rlim_t)x;
	return *s && !*end && !errno ? 0 : -1;
}

/* The second start: the limit and the threads' default stack size as they were. */
static void put_back(const char *back, const struct rlimit *now)
{
	char soft[32], hard[32];
	unsigned long long stack;
	struct rlimit rl;
	pthread_attr_t a;

	unsetenv(SRV_LAYOUT_ENV);
	errno = 0;
	if (now->rlim_cur != SRV_LAYOUT_GAP || sscanf(back, "%31s %31s %llu", soft, hard, &stack) != 3 ||
	    get_lim(soft, &rl.rlim_cur) || get_lim(hard, &rl.rlim_max) || !stack) {
		note("ignored " SRV_LAYOUT_ENV ", which rgpud sets for itself");
		return;
	}
	if (setrlimit(RLIMIT_STACK, &rl)) {
		note("cannot put the stack size limit back");
		return;
	}
	if (pthread_attr_init(&a) || pthread_attr_setstacksize(&a, (size_t)stack) ||
	    pthread_setattr_default_np(&a))
		note("cannot put the threads' default stack size back");
	pthread_attr_destroy(&a);
}

void srv_layout_reexec(char **argv)
{
	const char *back = getenv(SRV_LAYOUT_ENV), *mode = getenv("RGPUD_LAYOUT");
	char soft[32], hard[32], val[96];
	size_t stack = 0;
	struct rlimit rl;
	pthread_attr_t a;

	errno = 0;
	if (getrlimit(RLIMIT_STACK, &rl)) {
		note("cannot read the stack size limit");
		return;
	}
	if (back) {
		put_back(back, &rl);
		return;
	}
	if (mode && !strcmp(mode, "keep")) {
		note("RGPUD_LAYOUT=keep");
		return;
	}
#if defined(__SANITIZE_THREAD__)
	note("ThreadSanitizer maps its own way");
	return;
#endif
	if (rl.rlim_cur == SRV_LAYOUT_GAP)
		return; /* started so: the area is where it should be */
	/* glibc's own default for threads, which it derived from the limit at start */
	if (pthread_getattr_default_np(&a) == 0) {
		pthread_attr_getstacksize(&a, &stack);
		pthread_attr_destroy(&a);
	}
	if (!stack) {
		note("cannot read the threads' default stack size");
		return;
	}
	put_lim(soft, sizeof(soft), rl.rlim_cur);
	put_lim(hard, sizeof(hard), rl.rlim_max);
	snprintf(val, sizeof(val), "%s %s %zu", soft, hard, stack);
	struct rlimit big = {SRV_LAYOUT_GAP, rl.rlim_max};
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < SRV_LAYOUT_GAP)
		big.rlim_max = SRV_LAYOUT_GAP; /* root may raise it; put back after */
	if (setrlimit(RLIMIT_STACK, &big)) {
		note("cannot raise the stack size limit to move it");
		return;
	}
	setenv(SRV_LAYOUT_ENV, val, 1);
	execv("/proc/self/exe", argv);
	note("cannot execute itself again");
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
		if (layout_note[0])
			pr_warn("layout: %s", layout_note);
		return;
	}
	pr_warn("layout: this process maps at %#llx%s%s: a __managed__ variable's address may be "
		"taken in a client, whose program then fails at its first CUDA call",
		(unsigned long long)at, layout_note[0] ? ", " : "", layout_note);
}
