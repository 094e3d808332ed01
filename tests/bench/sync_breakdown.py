#!/usr/bin/env python3
"""Where a synchronous call's time goes, from the stamps RGPU_TRACE_FILE makes both sides write.

Usage: sync_breakdown.py [--native-us US] [--label TEXT] TRACE_PREFIX

Reads every TRACE_PREFIX.PID file (the client's and the worker's: one host, one monotonic
clock; the server's file has the READ..SENT points, the client's the others), joins the stamps
by seq, keeps the calls that have all eight, and prints the median of each segment in
microseconds, and of the whole call. With --native-us, the native time of the same call is
printed beside the driver's segment (the handler's time includes the driver's work).

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
    while args and args[0].startswith("--"):
        if args[0] == "--native-us" and len(args) > 1:
            native = float(args[1])
            args = args[2:]
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
    full = [c for c in calls.values() if len(c) == 8]
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


if __name__ == "__main__":
    sys.exit(main())
