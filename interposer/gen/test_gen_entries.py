#!/usr/bin/env python3
"""Check that gen_entries.py reads every driver header it lists and refuses headers it cannot
map, instead of passing them silently.

Copies the CUDA headers into a scratch directory. The unmodified copy must succeed, and its
output must export and serve the profiler calls of cudaProfiler.h / cudaProfilerTypedefs.h
next to those of cuda.h / cudaTypedefs.h, and nothing of the graphics-interop headers the
generator leaves out (cudaGL.h, cudaVDPAU.h, cudaEGL.h). Then one edit at a time: a damaging
one must make gen_entries.py exit non-zero naming the problem (in either pair of headers); an
API added to the profiler headers must come out exported and served. Run by ctest
(unit.gen_entries_refuses).

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
    ("a profiler version no symbol has", "cudaProfilerTypedefs.h",
     "\ntypedef CUresult (CUDAAPI *PFN_cuProfilerStart_v14000)(int what);\n",
     "PFN_cuProfilerStart_v14000"),
    ("a profiler API with no exported symbol", "cudaProfilerTypedefs.h",
     "\ntypedef CUresult (CUDAAPI *PFN_cuProfilerPause_v13010)(void);\n",
     "PFN_cuProfilerPause_v13010"),
    ("a declaring header with no function left", "cudaProfiler.h",
     None, "cudaProfiler.h"),
    ("a typedefs header with no typedef left", "cudaProfilerTypedefs.h",
     None, "cudaProfilerTypedefs.h"),
]

# Edits that must be accepted: (what, [(file, text inserted)], [(output file, text it must
# hold)]).
ACCEPTED = [
    ("a new profiler API", [
        ("cudaProfiler.h", "\nCUresult CUDAAPI cuProfilerPause(unsigned int flags);\n"),
        ("cudaProfilerTypedefs.h",
         "\ntypedef CUresult (CUDAAPI *PFN_cuProfilerPause_v13010)(unsigned int flags);\n")],
     [("exports.map", "\t\tcuProfilerPause;\n"),
      ("procaddr_gen.c", "{13010, "),
      ("procaddr_gen.c", "/* cuProfilerPause -> cuProfilerPause */")]),
]

# What the unmodified headers must produce: (output file, text it must hold or, with a
# leading '!', must not).
WANT = [
    ("exports.map", "\t\tcuProfilerStart;\n"),
    ("exports.map", "\t\tcuProfilerStop;\n"),
    ("exports.map", "\t\tcuProfilerInitialize;\n"),
    ("exports.map", "\t\tcuMemAlloc_v2;\n"),
    ("procaddr_gen.c", "/* cuProfilerStart -> cuProfilerStart */"),
    ("procaddr_gen.c", "/* cuProfilerInitialize -> cuProfilerInitialize */"),
    ("entries_gen.c", "IP_STUB(cuProfilerStop)"),
    ("procaddr_queries.txt", "cuProfilerStop 4000 0\n"),
    ("exports.map", "!cuGLGetDevices"),
    ("exports.map", "!cuVDPAUGetDevice"),
    ("exports.map", "!cuEGLStreamConsumerConnect"),
]


def run(cc, incdir, outdir):
    return subprocess.run([sys.executable, os.path.join(HERE, "gen_entries.py"), "--cc", cc,
                           "--include", incdir, "--outdir", outdir],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def damage(orig, edit):
    """orig with edit applied: (old, new) replaced once; a text inserted before the header's
    closing #endif (its include guard); None: every function declaration / PFN typedef of the
    header turned into a comment."""
    if edit is None:
        lines = orig.split("\n")
        return "\n".join("// " + l if ("CUDAAPI" in l and "CUresult" in l) else l
                         for l in lines)
    if isinstance(edit, tuple):
        return orig.replace(edit[0], edit[1], 1)
    cut = orig.rstrip().rfind("#endif")
    return orig[:cut] + edit + orig[cut:]


def holds(outdir, name, text):
    with open(os.path.join(outdir, name)) as f:
        body = f.read()
    return (text[1:] not in body) if text.startswith("!") else (text in body)


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
        ok = os.path.join(tmp, "ok")
        res = run(args.cc, inc, ok)
        if res.returncode != 0:
            print("FAIL: unmodified headers rejected:\n" + res.stderr)
            return 1
        print("ok: unmodified headers accepted: " + " / ".join(res.stdout.strip().splitlines()[:2]))
        for name, text in WANT:
            if not holds(ok, name, text):
                print("FAIL: %s %s %r" % (name, "holds" if text.startswith("!") else "lacks",
                                          text.lstrip("!")))
                failures += 1
        for what, edits, want in ACCEPTED:
            origs = {}
            for fname, edit in edits:
                path = os.path.join(inc, fname)
                with open(path) as f:
                    origs[path] = f.read()
                with open(path, "w") as f:
                    f.write(damage(origs[path], edit))
            out = os.path.join(tmp, "accepted")
            res = run(args.cc, inc, out)
            for path, orig in origs.items():
                with open(path, "w") as f:
                    f.write(orig)
            if res.returncode != 0:
                print("FAIL: %s: rejected: %s" % (what, res.stderr))
                failures += 1
                continue
            missing = [t for n, t in want if not holds(out, n, t)]
            if missing:
                print("FAIL: %s: output lacks %r" % (what, missing))
                failures += 1
            else:
                print("ok: %s: accepted, exported and served" % what)
        for what, fname, edit, word in CASES:
            path = os.path.join(inc, fname)
            with open(path) as f:
                orig = f.read()
            if isinstance(edit, tuple) and edit[0] not in orig:
                print("FAIL: %s: pattern not in %s" % (what, fname))
                failures += 1
                continue
            text = damage(orig, edit)
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
