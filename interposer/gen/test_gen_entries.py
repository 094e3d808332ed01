#!/usr/bin/env python3
"""Check that gen_entries.py refuses headers it cannot map, instead of passing them silently.

Copies cuda.h and cudaTypedefs.h into a scratch directory, applies one damaging edit at a time
and expects gen_entries.py to exit non-zero naming the problem; the unmodified copy must
succeed. Run by ctest (unit.gen_entries_refuses).

Usage: test_gen_entries.py --cc CC --include CUDA_INCLUDE_DIR
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (what, file, text appended or (old, new) replaced, word expected in the error)
CASES = [
    ("a version no symbol has", "cudaTypedefs.h",
     "\ntypedef CUresult (CUDAAPI *PFN_cuMemAlloc_v14000)(CUdeviceptr *dptr, int what);\n",
     "PFN_cuMemAlloc_v14000"),
    ("an API with no exported symbol at all", "cudaTypedefs.h",
     "\ntypedef CUresult (CUDAAPI *PFN_cuBrandNewThing_v13010)(int x);\n",
     "PFN_cuBrandNewThing_v13010"),
    ("a per-thread variant that is not exported", "cudaTypedefs.h",
     "\ntypedef CUresult (CUDAAPI *PFN_cuInit_v7000_ptsz)(unsigned int Flags);\n",
     "PFN_cuInit_v7000_ptsz"),
    ("a header #define the table disagrees with", "cuda.h",
     "\n#define cuMemHostAlloc cuMemHostAlloc_v2\n", "cuMemHostAlloc_v2"),
    ("a per-thread pairing the table lacks", "cuda.h",
     "\n#define cuInit __CUDA_API_PTSZ(cuInit)\n", "cuInit_ptsz"),
    ("a CUresult without its number", "cuda.h",
     ("CUDA_ERROR_INVALID_VALUE                  = 1,", "CUDA_ERROR_INVALID_VALUE,"),
     "CUresult"),
]


def run(cc, incdir, outdir):
    return subprocess.run([sys.executable, os.path.join(HERE, "gen_entries.py"), "--cc", cc,
                           "--include", incdir, "--outdir", outdir],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--include", required=True)
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        inc = os.path.join(tmp, "include")
        shutil.copytree(args.include, inc, symlinks=True,
                        ignore=shutil.ignore_patterns("*.hpp", "thrust", "cub", "cuda", "nv",
                                                      "crt", "cccl", "*.cuh"))
        res = run(args.cc, inc, os.path.join(tmp, "ok"))
        if res.returncode != 0:
            print("FAIL: unmodified headers rejected:\n" + res.stderr)
            return 1
        print("ok: unmodified headers accepted: " + res.stdout.strip().splitlines()[0])
        for what, fname, edit, word in CASES:
            path = os.path.join(inc, fname)
            with open(path) as f:
                orig = f.read()
            if isinstance(edit, tuple):
                if edit[0] not in orig:
                    print("FAIL: %s: pattern not in %s" % (what, fname))
                    failures += 1
                    continue
                text = orig.replace(edit[0], edit[1], 1)
            else:
                # Both headers end with their include guard's #endif: insert before it.
                cut = orig.rstrip().rfind("#endif")
                text = orig[:cut] + edit + orig[cut:]
            with open(path, "w") as f:
                f.write(text)
            res = run(args.cc, inc, os.path.join(tmp, "bad"))
            with open(path, "w") as f:
                f.write(orig)
            if res.returncode == 0:
                print("FAIL: %s: accepted" % what)
                failures += 1
            elif word not in res.stderr:
                print("FAIL: %s: rejected without naming %s: %s" % (what, word, res.stderr))
                failures += 1
            else:
                print("ok: %s: %s" % (what, res.stderr.strip()))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
