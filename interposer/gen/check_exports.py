#!/usr/bin/env python3
"""Check that a linked libcuda.so.1 exports exactly the symbols of exports.map, and that
exports.map lists exactly what NVIDIA's stub libcuda.so exports.

A version script can only export what the objects define with default visibility: a
hand-written driver function compiled under -fvisibility=hidden without IP_EXPORT/IP_API
overrides the weak generated stub and then silently drops out of the export list (the runtime
finds it through cuGetProcAddress but dlsym does not). The stub library of the toolkit
(lib64/stubs/libcuda.so) exports the driver's API as the toolkit defines it: a symbol it has
and the map lacks comes from a driver header gen_entries.py does not read (as the profiler
calls of cudaProfiler.h once did); one the map has and it lacks comes from a header that is
not the driver's. Run after linking (rgpu_check_exports() in entries.cmake); exits 1 naming
every missing or unexpected symbol.

Usage: check_exports.py --nm NM --map exports.map --lib libcuda.so.1 [--stub stubs/libcuda.so]
"""

import argparse
import re
import subprocess
import sys


def exports(nm, lib):
    """The names of the functions and data lib defines for the dynamic linker, or None."""
    res = subprocess.run([nm, "-D", "--defined-only", lib], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if res.returncode != 0:
        sys.stderr.write("check_exports: %s %s failed: %s\n" % (nm, lib, res.stderr))
        return None
    have = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "TtWwiDdBbRrVv":
            have.add(parts[2].split("@")[0])
    return have


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--map", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--stub", help="NVIDIA's stub libcuda.so, whose exports the map must equal")
    args = ap.parse_args()

    with open(args.map) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    m = re.search(r"global:(.*?)local:", text, re.S)
    if not m:
        sys.stderr.write("check_exports: no global: section in %s\n" % args.map)
        return 2
    want = set(s.strip() for s in m.group(1).split(";") if s.strip())

    have = exports(args.nm, args.lib)
    if have is None:
        return 2
    missing = sorted(want - have)
    extra = sorted(have - want)
    for s in missing:
        sys.stderr.write("check_exports: %s: %s is not exported (hidden definition? add "
                         "IP_EXPORT/IP_API)\n" % (args.lib, s))
    for s in extra:
        sys.stderr.write("check_exports: %s: %s is exported but not in %s\n"
                         % (args.lib, s, args.map))
    bad = bool(missing or extra)

    if args.stub:
        stub = exports(args.nm, args.stub)
        if stub is None:
            return 2
        for s in sorted(stub - want):
            sys.stderr.write("check_exports: %s exports %s, %s does not (a driver header "
                             "gen_entries.py does not read?)\n" % (args.stub, s, args.map))
        for s in sorted(want - stub):
            sys.stderr.write("check_exports: %s lists %s, %s does not export it\n"
                             % (args.map, s, args.stub))
        bad = bad or stub != want
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
