#!/usr/bin/env python3
"""Compare the real driver's cuGetProcAddress answers with rgpu's.

Inputs are two outputs of tests/gpu/procaddr_dump.c for the same procaddr_queries.txt: the
real driver's (procaddr_dump on the GPU host) and rgpu's (procaddr_selfdump, written by the
build to build/tests/procaddr_expected.txt). Each line is "QUERY -> ANSWER" with ANSWER one of
"sym[|alias...]", "NULL rc=R status=S" or "sym rc=R status=S".

A query agrees when both name a function and rgpu's symbol is among the real driver's names for
that address (the driver may export one function under several names), or when both return
NULL with the same rc and status. "error N" lines (cuGetErrorName/cuGetErrorString) must be
equal. Disagreements are listed by kind; the exit status is 0 when
all agree, 1 otherwise, 2 on unusable input.

Usage: procaddr_compare.py REAL.txt EXPECTED.txt [--max N]
"""

import argparse
import sys


def load(path):
    answers = {}
    order = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if " -> " not in line:
                sys.stderr.write("%s:%d: not a dump line: %s\n" % (path, n, line))
                sys.exit(2)
            query, answer = line.split(" -> ", 1)
            if query not in answers:
                order.append(query)
            answers[query] = answer
    return answers, order


def parse(answer):
    """-> (set of names or None, rc, status) with rc/status '0' when omitted."""
    parts = answer.split()
    head = parts[0]
    rest = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    names = None if head == "NULL" else set(head.split("|"))
    return names, rest.get("rc", "0"), rest.get("status", "0")


def kind(query, real, ours):
    if query.startswith("error "):
        if real.split(":", 1)[0] != ours.split(":", 1)[0]:
            return "different CUresult name"
        return None if real == ours else "different CUresult string"
    rn, rrc, rst = parse(real)
    on, orc, ost = parse(ours)
    if rn is not None and on is not None:
        if not (on & rn):
            return "different symbol"
        if (rrc, rst) != (orc, ost):
            return "same symbol, different rc/status"
        return None
    if rn is None and on is None:
        return None if (rrc, rst) == (orc, ost) else "both NULL, different rc/status"
    if rn is None:
        return "rgpu answers, driver returns NULL"
    return "driver answers, rgpu returns NULL"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("real")
    ap.add_argument("expected")
    ap.add_argument("--max", type=int, default=40, help="lines shown per kind (default 40)")
    args = ap.parse_args()

    real, _ = load(args.real)
    ours, order = load(args.expected)
    by_kind = {}
    for q in order:
        if q not in real:
            by_kind.setdefault("missing from the driver's dump", []).append((q, "", ours[q]))
            continue
        k = kind(q, real[q], ours[q])
        if k:
            by_kind.setdefault(k, []).append((q, real[q], ours[q]))
    extra = [q for q in real if q not in ours]
    for q in extra:
        by_kind.setdefault("only in the driver's dump", []).append((q, real[q], ""))

    total = len(order)
    bad = sum(len(v) for v in by_kind.values())
    for k in sorted(by_kind):
        rows = by_kind[k]
        print("== %s: %d" % (k, len(rows)))
        for q, r, o in rows[:args.max]:
            print("  %-50s driver: %-40s rgpu: %s" % (q, r, o))
        if len(rows) > args.max:
            print("  ... %d more" % (len(rows) - args.max))
    print("%d queries, %d agree, %d differ" % (total, total - bad + len(extra), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
