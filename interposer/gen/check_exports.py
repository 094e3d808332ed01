#!/usr/bin/env python3
"""Check that a linked libcuda.so.1 exports exactly the symbols of exports.map.

A version script can only export what the objects define with default visibility: a
hand-written driver function compiled under -fvisibility=hidden without IP_EXPORT/IP_API
overrides the weak generated stub and then silently drops out of the export list (the runtime
finds it through cuGetProcAddress but dlsym does not). Run after linking (rgpu_check_exports()
in entries.cmake); exits 1 naming every missing or unexpected symbol.

Usage: check_exports.py --nm NM --map exports.map --lib libcuda.so.1
"""

import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--map", required=True)
    ap.add_argument("--lib", required=True)
    args = ap.parse_args()

    with open(args.map) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    m = re.search(r"global:(.*?)local:", text, re.S)
    if not m:
        sys.stderr.write("check_exports: no global: section in %s\n" % args.map)
        return 2
    want = set(s.strip() for s in m.group(1).split(";") if s.strip())

    res = subprocess.run([args.nm, "-D", "--defined-only", args.lib], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if res.returncode != 0:
        sys.stderr.write("check_exports: %s failed: %s\n" % (args.nm, res.stderr))
        return 2
    have = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "TtWwiDdBbRrVv":
            have.add(parts[2].split("@")[0])

    missing = sorted(want - have)
    extra = sorted(have - want)
    for s in missing:
        sys.stderr.write("check_exports: %s: %s is not exported (hidden definition? add "
                         "IP_EXPORT/IP_API)\n" % (args.lib, s))
    for s in extra:
        sys.stderr.write("check_exports: %s: %s is exported but not in %s\n"
                         % (args.lib, s, args.map))
    return 1 if missing or extra else 0


if __name__ == "__main__":
    sys.exit(main())
