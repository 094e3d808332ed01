#!/usr/bin/env python3
"""Where a synchronous call's time goes, from the stamps RGPU_TRACE_FILE makes both sides write.

Usage: sync_breakdown.py [--native-us US] [--label TEXT] [--posts] TRACE_PREFIX

Reads every TRACE_PREFIX.PID file (the client's and the worker's: one host, one monotonic
clock; the server's file has the READ..SENT points, the client's the others), joins the stamps
by seq, keeps the calls that have all eight, and prints the median of each segment in
microseconds, and of the whole call. With --native-us, the native time of the same call is
printed beside the driver's segment (the handler's time includes the driver's work).

With --posts: the fire-and-forget requests instead (a burst of launches): how often the
program posts one, how long the worker's executor takes per frame, and how long frames wait for
it in the worker's queue, so that the side that sets a burst's rate shows.

Segments (rgpu/trace.h):
  client: queue and write     CALL -> WRITTEN
  to the worker               WRITTEN -> READ      (the transport, the reader's wake-up)
  worker: reader to executor  READ -> DEQUEUED
  worker: handler and driver  DEQUEUED -> REPLY
  worker: reply written       REPLY -> SENT
  to the client               SENT -> RECEIVED     (the transport, the receiver's wake-up)
  client: receiver to caller  RECEIVED -> WOKEN
"""
import glob
import statistics
import sys

SEGMENTS = [
    ("client: queue and write", 0, 1),
    ("to the worker (transport, reader wakes)", 1, 2),
    ("worker: reader to executor", 2, 3),
    ("worker: handler and driver", 3, 4),
    ("worker: reply written", 4, 5),
    ("to the client (transport, receiver wakes)", 5, 6),
    ("client: receiver to caller", 6, 7),
]


def main():
    args = sys.argv[1:]
    native = None
    label = ""
    posts = False
    while args and args[0].startswith("--"):
        if args[0] == "--native-us" and len(args) > 1:
            native = float(args[1])
            args = args[2:]
        elif args[0] == "--posts":
            posts = True
            args = args[1:]
        elif args[0] == "--label" and len(args) > 1:
            label = args[1]
            args = args[2:]
        else:
            print(__doc__)
            return 2
    if len(args) != 1:
        print(__doc__)
        return 2
    files = glob.glob(args[0] + ".*")
    if not files:
        print("sync_breakdown: no files %s.*" % args[0])
        return 1
    # seq -> point -> ns; the client's seq numbers its requests, the worker stamps the same
    # seq (a reply carries its request's). One job per trace: several would mix seqs.
    calls = {}
    for path in files:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 3:
                    continue
                point, seq, ns = int(parts[0]), int(parts[1]), int(parts[2])
                calls.setdefault(seq, {})[point] = ns
    if posts:
        return report_posts(calls, label)
    full = [c for c in calls.values() if all(p in c for p in range(8))]
    if not full:
        print("sync_breakdown: no call with all eight stamps in %d file(s)" % len(files))
        return 1
    # the last half: the benchmark warms up first
    full = full[len(full) // 2:]
    total = statistics.median((c[7] - c[0]) / 1000 for c in full)
    print("== where a synchronous call's time goes%s: median of %d calls, us" %
          (" (" + label + ")" if label else "", len(full)))
    parts = 0.0
    for name, a, b in SEGMENTS:
        v = statistics.median((c[b] - c[a]) / 1000 for c in full)
        parts += v
        extra = ""
        if native is not None and a == 3:
            extra = "   (native call: %.2f)" % native
        print("   %-45s %8.2f%s" % (name, v, extra))
    print("   %-45s %8.2f   (sum of the medians %.2f)" % ("whole call", total, parts))
    if native is not None:
        print("   %-45s %8.2f" % ("native", native))
        print("   %-45s %8.2f" % ("rgpu adds", total - native))
    return 0


def diffs(values):
    values = sorted(values)
    return [(b - a) / 1000 for a, b in zip(values, values[1:])]


def report_posts(calls, label):
    """Posts: CALL, WRITTEN, READ, DEQUEUED, EXECUTED and no reply."""
    p = {seq: c for seq, c in calls.items()
         if all(k in c for k in (0, 1, 2, 3, 8)) and 4 not in c}
    if len(p) < 100:
        print("sync_breakdown: only %d posts with their five stamps" % len(p))
        return 1
    seqs = sorted(p)
    # the longest run of consecutive seqs: one burst (the launch loop), its last half
    best, start = (0, 0), 0
    for i in range(1, len(seqs) + 1):
        if i == len(seqs) or seqs[i] != seqs[i - 1] + 1:
            if i - start > best[1] - best[0]:
                best = (start, i)
            start = i
    run = [p[s] for s in seqs[best[0]:best[1]]]
    run = run[len(run) // 2:]
    med = statistics.median
    span = (run[-1][8] - run[0][0]) / 1000
    print("== a burst of posts%s: %d of them, us per post (medians)" %
          (" (" + label + ")" if label else "", len(run)))
    print("   %-45s %8.2f" % ("client: one post to the next", med(diffs(c[0] for c in run))))
    print("   %-45s %8.2f" % ("client: inside the post (queue, write)", med((c[1] - c[0]) / 1000 for c in run)))
    print("   %-45s %8.2f" % ("worker: one frame read to the next", med(diffs(c[2] for c in run))))
    print("   %-45s %8.2f" % ("worker: waiting in the queue", med((c[3] - c[2]) / 1000 for c in run)))
    print("   %-45s %8.2f" % ("worker: executor per frame", med((c[8] - c[3]) / 1000 for c in run)))
    print("   %-45s %8.2f" % ("worker: one frame executed to the next", med(diffs(c[8] for c in run))))
    print("   %-45s %8.0f /s" % ("rate over the burst", len(run) / span * 1e6 if span > 0 else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
