/*
 * Where a synchronous call's time goes (RGPU_TRACE_FILE): both sides stamp a call's frame at
 * fixed points with the monotonic clock, which processes of one host share, and write the
 * stamps out at the end; tests/bench/sync_breakdown.py joins them by seq. Off (one branch per
 * point) unless RGPU_TRACE_FILE is set in the process's environment.
 *
 *   client: RGPU_TR_CALL      the call starts (before its frame is queued)
 *           RGPU_TR_WRITTEN   its frame was handed to the transport (by this thread or earlier)
 *   worker: RGPU_TR_READ      the reader has the whole frame
 *           RGPU_TR_DEQUEUED  the executor took it from the queue
 *           RGPU_TR_REPLY     the handler replies (the driver's work is done)
 *           RGPU_TR_SENT      the reply was handed to the transport
 *   client: RGPU_TR_RECEIVED  the receiver has the reply
 *           RGPU_TR_WOKEN     the calling thread runs again
 *
 * A fire-and-forget request (a launch) gets CALL and WRITTEN (when its poster returns), READ,
 * DEQUEUED and RGPU_TR_EXECUTED: sync_breakdown.py --posts says which side sets a burst's rate.
 */
#ifndef RGPU_TRACE_H
#define RGPU_TRACE_H

#include <stdint.h>

enum rgpu_trace_point {
	RGPU_TR_CALL = 0,
	RGPU_TR_WRITTEN = 1,
	RGPU_TR_READ = 2,
	RGPU_TR_DEQUEUED = 3,
	RGPU_TR_REPLY = 4,
	RGPU_TR_SENT = 5,
	RGPU_TR_RECEIVED = 6,
	RGPU_TR_WOKEN = 7,
	RGPU_TR_EXECUTED = 8, /* worker: the executor is done with the frame (any frame) */
};

extern int rgpu_trace_on; /* RGPU_TRACE_FILE is set (rgpu_trace_init) */
void rgpu_trace_init(void);
/* rgpu_trace_at() - stamp seq at point with t (rgpu_now_ns()); rgpu_trace() with now */
void rgpu_trace_at(uint64_t seq, int point, uint64_t t);
void rgpu_trace(uint64_t seq, int point);
/* rgpu_trace_dump() - write the stamps to RGPU_TRACE_FILE.PID ("point seq ns" lines) */
void rgpu_trace_dump(void);

#endif
