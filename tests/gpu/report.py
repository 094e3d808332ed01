#!/usr/bin/env python3
"""Join benchmark outputs ("metric value unit" lines) into one table.

Usage: report.py NATIVE.txt RGPU.txt[,RGPU2.txt...] [BEFORE.txt[,BEFORE2.txt...]]

Columns: native, rgpu (this build), rgpu/native; with BEFORE (the same benchmark through the
previous build's rgpud and interposer, from the same run), also before and rgpu/before. When a
side ran more than once, its best value per metric is shown (highest rate, lowest time), so
one noisy repetition does not decide. For rates (GB/s, launches/s) a ratio below 1.0 is
slower; for times (us) a ratio above 1.0 is slower: the last column says which way is better.
"""
import sys


def load_one(path, out):
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 3:
                    continue
                try:
                    v = float(parts[1])
                except ValueError:
                    continue
                name, unit = parts[0], parts[2]
                if name in out:
                    old = out[name][0]
                    v = min(v, old) if unit == "us" else max(v, old)
                out[name] = (v, unit)
    except OSError:
        pass


def load(paths):
    out = {}
    for p in paths.split(","):
        if p:
            load_one(p, out)
    return out


def fmt(v):
    return "-" if v is None else (f"{v:.0f}" if v >= 1000 else f"{v:.3f}")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    native, rgpu = load(sys.argv[1]), load(sys.argv[2])
    before = load(sys.argv[3]) if len(sys.argv) > 3 else None
    names = list(native) + [n for n in rgpu if n not in native]
    head = f"{'metric':<22} {'native':>12} {'rgpu':>12} {'unit':<12} {'rgpu/native':>11}"
    if before is not None:
        head += f" {'before':>12} {'rgpu/before':>11}"
    print(head)
    for n in names:
        nv, unit = native.get(n, (None, ""))
        rv, unit2 = rgpu.get(n, (None, unit))
        unit = unit or unit2
        ratio = f"{rv / nv:.3f}" if nv and rv is not None else "-"
        line = f"{n:<22} {fmt(nv):>12} {fmt(rv):>12} {unit:<12} {ratio:>11}"
        if before is not None:
            bv = before.get(n, (None, unit))[0]
            br = f"{rv / bv:.3f}" if bv and rv is not None else "-"
            line += f" {fmt(bv):>12} {br:>11}"
        if unit == "us":
            line += " (lower better)"
        print(line)
    if not native or not rgpu:
        print("(a side produced no numbers: see bench.*.err)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
