/*
 * "unimplemented: NAME", once per name: the one-line diagnosis design.md §2 promises when an
 * application calls a driver function the interposer does not implement.
 *
 * This file owns the set of names already reported. Names of exported symbols are found in
 * ip_entries[] and remembered in one atomic flag each, so the common path takes no lock and
 * never allocates. Other names (dark-API slots, anything a caller invents) go to a small
 * mutex-protected table of hashes; past its capacity they are reported every time rather than
 * dropped. Called from generated stubs on application threads: it must never block for long,
 * fail, or print unless RGPU_LOG enabled logging.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rgpu/log.h"

#define IP_ENTRIES_NO_CUDA_H
#include "ip_entries.h"

/* One flag per ip_entries[] row. Sized generously so a new cuda.h never overflows it. */
#define IP_MAX_ENTRIES 4096
static atomic_uchar seen_entry[IP_MAX_ENTRIES];

#define IP_OTHER_SLOTS 256
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t other_seen[IP_OTHER_SLOTS]; /* open addressing; 0 = empty */

static int cmp_entry(const void *key, const void *elem)
{
	return strcmp(key, ((const struct ip_entry *)elem)->name);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* first_time_other() - non-zero the first time name (not in ip_entries[]) is seen. */
static int first_time_other(const char *name)
{
	uint64_t h = name_hash(name);
	int first = 1;

	pthread_mutex_lock(&other_lock);
	for (unsigned i = 0; i < IP_OTHER_SLOTS; i++) {
		uint64_t *slot = &other_seen[(h + i) % IP_OTHER_SLOTS];

		if (*slot == h) {
			first = 0;
			break;
		}
		if (*slot == 0) {
			*slot = h;
			break;
		}
	}
	pthread_mutex_unlock(&other_lock);
	return first;
}

void ip_refused(const char *what, const char *why)
{
	if (first_time_other(what))
		pr_warn("refused: %s: %s", what, why);
}

void ip_unimplemented(const char *name)
{
	const struct ip_entry *e;
	int first;

	if (!name)
		name = "(null)";
	e = bsearch(name, ip_entries, ip_entry_count, sizeof(ip_entries[0]), cmp_entry);
	if (e && (size_t)(e - ip_entries) < IP_MAX_ENTRIES)
		first =
		    !atomic_exchange_explicit(&seen_entry[e - ip_entries], 1, memory_order_relaxed);
	else
		first = first_time_other(name);
	if (first)
		pr_warn("unimplemented: %s", name);
}
