#!/usr/bin/env python3
"""Join two benchmark outputs ("metric value unit" lines) into one table: native, rgpu, ratio.

Usage: report.py NATIVE.txt RGPU.txt
For rates (GB/s, launches/s) the ratio is rgpu/native (1.0 = as fast as native, lower is
slower); for times (us) it is rgpu/native too (1.0 = as fast, higher is slower). The last
column says which way is better so the table reads on its own.
"""
import sys


def load(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3:
                    try:
                        out[parts[0]] = (float(parts[1]), parts[2])
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def main():
    native, rgpu = load(sys.argv[1]), load(sys.argv[2])
    names = list(native) + [n for n in rgpu if n not in native]
    print(f"{'metric':<22} {'native':>12} {'rgpu':>12} {'unit':<12} {'rgpu/native':>11}")
    for n in names:
        nv, unit = native.get(n, (None, ""))
        rv, unit2 = rgpu.get(n, (None, unit))
        unit = unit or unit2
        ratio = f"{rv / nv:.3f}" if nv and rv is not None else "-"
        fmt = lambda v: "-" if v is None else (f"{v:.0f}" if v >= 1000 else f"{v:.3f}")
        better = "(lower better)" if unit == "us" else ""
        print(f"{n:<22} {fmt(nv):>12} {fmt(rv):>12} {unit:<12} {ratio:>11} {better}")
    if not native or not rgpu:
        print("(a side produced no numbers: see bench.*.err)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
