#!/usr/bin/env python3
"""Join benchmark outputs ("metric value unit" lines) into one table.

Usage: report.py NATIVE.txt RGPU.txt[,RGPU2.txt...] [BEFORE.txt[,BEFORE2.txt...]]
       report.py --transports NATIVE.txt TCP.txt[,...] SHM.txt[,...] [CEILING.txt]

The first form: columns native, rgpu (this build), rgpu/native; with BEFORE (the same benchmark
through the previous build's rgpud and interposer, from the same run), also before and
rgpu/before.

The second (issue 14, "fast paths"): native, rgpu over TCP loopback, tcp/native, rgpu over
shared memory, shm/native, and a last column with issue 14's targets where one applies to the
row, each "ok" or "MISS" ("-": a number is missing). CEILING is tcp_ceiling's output (the
host's loopback TCP bandwidth, same run): its lines are rows of the table, their value in the
native column, and tcp_ceiling_best is what the TCP bulk target is measured against.

When a side ran more than once, its best value per metric is shown (highest rate, lowest time),
so one noisy repetition does not decide. For rates (GB/s, launches/s) a ratio below 1.0 is
slower; for times (us) a ratio above 1.0 is slower.
"""
import re
import sys

MIB = 1 << 20


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


def ratio(v, base):
    return f"{v / base:.3f}" if base and v is not None else "-"


def copy_size(name, prefix):
    """The bytes of a copy metric such as h2d_64M (prefix "") or ph2d_1G (prefix "p"), else None."""
    m = re.fullmatch(prefix + r"(?:h2d|d2h)_(\d+)([KMG])", name)
    if not m:
        return None
    return int(m.group(1)) << {"K": 10, "M": 20, "G": 30}[m.group(2)]


def targets(name, native, tcp, shm, ceiling):
    """Issue 14's targets for one row: a list of (label, value, bound, higher_is_better)."""
    checks = []
    scaled = lambda f: None if native is None else f * native
    plus = lambda us: None if native is None else native + us
    pinned, pageable = copy_size(name, ""), copy_size(name, "p")
    if pinned is not None and 4 * MIB <= pinned <= 1024 * MIB:
        checks.append(("shm>=0.9x", shm, scaled(0.9), True))
    if pageable is not None and pageable >= MIB:
        checks.append(("shm>=0.9x", shm, scaled(0.9), True))
    if name == "d2h4_median":
        checks.append(("shm<=+3us", shm, plus(3), False))
        checks.append(("tcp<=+10us", tcp, plus(10), False))
    if name == "launch_rate":
        checks.append(("shm>=0.95x", shm, scaled(0.95), True))
    if (pinned is not None and pinned >= 64 * MIB) or name.endswith("_4streams"):
        checks.append(("tcp>=0.8ceil", tcp, None if ceiling is None else 0.8 * ceiling, True))
    return checks


def verdict(value, bound, higher):
    if value is None or bound is None:
        return "-"
    return "ok" if (value >= bound if higher else value <= bound) else "MISS"


def transports(native, tcp, shm, ceiling):
    best = ceiling.get("tcp_ceiling_best", (None, ""))[0]
    names = list(native) + [n for n in list(tcp) + list(shm) if n not in native]
    names = list(dict.fromkeys(names))
    print(f"{'metric':<20} {'unit':<11} {'native':>10} {'rgpu tcp':>10} {'tcp/native':>10} "
          f"{'rgpu shm':>10} {'shm/native':>10}  issue 14 target")
    counts = {"ok": 0, "MISS": 0, "-": 0}
    for n in names:
        nv, unit = native.get(n, (None, ""))
        tv, unit_t = tcp.get(n, (None, ""))
        sv, unit_s = shm.get(n, (None, ""))
        unit = unit or unit_t or unit_s
        marks = []
        for label, value, bound, higher in targets(n, nv, tv, sv, best):
            v = verdict(value, bound, higher)
            counts[v] += 1
            marks.append(f"{label} {v}")
        print(f"{n:<20} {unit:<11} {fmt(nv):>10} {fmt(tv):>10} {ratio(tv, nv):>10} "
              f"{fmt(sv):>10} {ratio(sv, nv):>10}  {', '.join(marks)}".rstrip())
    for n, (v, unit) in ceiling.items():
        print(f"{n:<20} {unit:<11} {fmt(v):>10}")
    print(f"issue 14 targets: {counts['ok']} ok, {counts['MISS']} MISS, {counts['-']} without a number"
          " (times in us: lower is better; tcp_ceiling: loopback TCP on this host, no rgpu)")
    split = ceiling.get("tcp_rtt_split_median", (None, ""))[0]
    nd, td = native.get("d2h4_median", (None, ""))[0], tcp.get("d2h4_median", (None, ""))[0]
    if None not in (split, nd, td):
        print(f"tcp d2h4_median: native {nd:.2f} + the split round trip {split:.2f} = "
              f"{nd + split:.2f} us at least; rgpu {td:.2f} ({td - nd - split:+.2f}: rgpu's own work)")
    if not native or not tcp or not shm:
        print("(a side produced no numbers: see bench.*.err)")
    if best is None:
        print("(no tcp_ceiling_best: see bench.ceiling.txt)")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--transports":
        if len(sys.argv) not in (5, 6):
            print(__doc__)
            return 2
        ceiling = load(sys.argv[5]) if len(sys.argv) > 5 else {}
        transports(load(sys.argv[2]), load(sys.argv[3]), load(sys.argv[4]), ceiling)
        return 0
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
        line = f"{n:<22} {fmt(nv):>12} {fmt(rv):>12} {unit:<12} {ratio(rv, nv):>11}"
        if before is not None:
            bv = before.get(n, (None, unit))[0]
            line += f" {fmt(bv):>12} {ratio(rv, bv):>11}"
        if unit == "us":
            line += " (lower better)"
        print(line)
    if not native or not rgpu:
        print("(a side produced no numbers: see bench.*.err)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
