/* Stamps of synchronous calls for the breakdown of their time (rgpu/trace.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rgpu/trace.h"
#include "rgpu/util.h"

#define TRACE_MAX (4u << 20)

struct stamp {
	uint64_t seq, ns;
	uint32_t point;
};

int rgpu_trace_on;
static struct stamp *stamps;
static atomic_uint nstamps;

void rgpu_trace_init(void)
{
	const char *f = getenv("RGPU_TRACE_FILE");
	if (!f || !*f || stamps)
		return;
	stamps = calloc(TRACE_MAX, sizeof(*stamps));
	rgpu_trace_on = stamps != NULL;
}

void rgpu_trace_at(uint64_t seq, int point, uint64_t t)
{
	unsigned i;
	if (!rgpu_trace_on)
		return;
	i = atomic_fetch_add(&nstamps, 1);
	if (i < TRACE_MAX)
		stamps[i] = (struct stamp){seq, t, (uint32_t)point};
}

void rgpu_trace(uint64_t seq, int point)
{
	if (rgpu_trace_on)
		rgpu_trace_at(seq, point, rgpu_now_ns());
}

void rgpu_trace_dump(void)
{
	char path[4200];
	unsigned n = atomic_load(&nstamps);
	FILE *f;

	if (!rgpu_trace_on)
		return;
	snprintf(path, sizeof(path), "%s.%d", getenv("RGPU_TRACE_FILE"), (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return;
	for (unsigned i = 0; i < n && i < TRACE_MAX; i++)
		fprintf(f, "%u %llu %llu\n", stamps[i].point, (unsigned long long)stamps[i].seq,
			(unsigned long long)stamps[i].ns);
	fclose(f);
}
