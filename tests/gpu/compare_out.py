#!/usr/bin/env python3
"""Compare a program's output natively and through rgpu (testing.md: outputs, not exit codes).

    compare_out.py NATIVE_LOG RGPU_LOG [--prefixes loss,value,result] [--rtol 1e-3]

Only lines starting with one of the prefixes are compared (all lines when none is given), in
order; numbers within --rtol relative of each other are equal (0: exact), other words must be
identical. Prints "same" or the first differences; exits 0 when same, 1 otherwise, 2 when the
native log has no line to compare (a comparison of nothing is not a pass).
"""
import argparse
import math
import sys


def lines(path, prefixes):
    with open(path, errors="replace") as f:
        out = [ln.rstrip("\n") for ln in f]
    if prefixes:
        out = [ln for ln in out if ln.split(" ", 1)[0] in prefixes]
    return out


def num(tok):
    try:
        return float(tok)
    except ValueError:
        return None


def same_line(a, b, rtol):
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        fx, fy = num(x), num(y)
        if fx is not None and fy is not None and rtol > 0:
            if math.isnan(fx) or math.isnan(fy):
                if not (math.isnan(fx) and math.isnan(fy)):
                    return False
            elif abs(fx - fy) > rtol * max(abs(fx), abs(fy), 1e-12):
                return False
        elif x != y:
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("native")
    ap.add_argument("rgpu")
    ap.add_argument("--prefixes", default="")
    ap.add_argument("--rtol", type=float, default=0.0)
    a = ap.parse_args()
    prefixes = set(p for p in a.prefixes.split(",") if p)
    n, r = lines(a.native, prefixes), lines(a.rgpu, prefixes)
    if not n:
        print("nothing to compare in the native output")
        return 2
    bad = [(i, x, y) for i, (x, y) in enumerate(zip(n, r)) if not same_line(x, y, a.rtol)]
    if len(n) != len(r):
        bad.append((min(len(n), len(r)), f"{len(n)} lines", f"{len(r)} lines"))
    if not bad:
        print(f"same ({len(n)} lines)")
        return 0
    for i, x, y in bad[:5]:
        print(f"line {i}: native '{x}' rgpu '{y}'")
    return 1


if __name__ == "__main__":
    sys.exit(main())
