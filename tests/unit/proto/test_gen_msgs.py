#!/usr/bin/env python3
"""Check that gen_msgs.py refuses bad message tables, naming the row, and accepts a good one.

Every *.tbl in this folder except good.tbl has one defect and a line
    # expect: ROW TEXT
The generator must exit non-zero, write nothing, and print FILE:LINE: ROW: ...TEXT..., where
LINE is the line of the row named ROW (its last definition, for a repeated name). good.tbl
must pass, with the prefix `t`, and its outputs must carry the table's numbers. Run by ctest
(unit.gen_msgs_refuses) with the real .proto and headers, as the build runs the generator.

Usage: test_gen_msgs.py --gen gen_msgs.py --proto rgpu.proto --enums HEADER...
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, table, prefix, outdir):
    return subprocess.run([sys.executable, args.gen, table, prefix, "--outdir", outdir,
                           "--proto", args.proto, "--enums"] + args.enums +
                          ["--handlers", "t_handlers", "--handler-args", "struct t_ctx *c"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def row_line(path, row):
    line = 0
    with open(path) as f:
        for n, text in enumerate(f, 1):
            fields = text.partition("#")[0].split()
            if fields and fields[0] == row:
                line = n
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--enums", nargs="+", required=True)
    args = ap.parse_args()
    failures = 0

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "good")
        res = run(args, os.path.join(HERE, "good.tbl"), "t", out)
        if res.returncode != 0:
            print("FAIL good.tbl refused:\n" + res.stderr)
            failures += 1
        else:
            with open(os.path.join(out, "t_msgs.h")) as f:
                hdr = f.read()
            with open(os.path.join(out, "t_handlers.c")) as f:
                handlers = f.read()
            for want in ("T_MSG_LAUNCH = 40,", "T_MSG_DATA = 27,", "T_CAP_GRAPHS = 4,",
                         "#define T_CAPS_CLIENT (T_CAP_GRAPHS)"):
                if want not in hdr:
                    print("FAIL good.tbl: t_msgs.h lacks %r" % want)
                    failures += 1
            if "[T_MSG_LAUNCH] = h_launch," not in handlers or "T_MSG_DATA" in handlers:
                print("FAIL good.tbl: t_handlers.c does not map exactly the handled types")
                failures += 1
            print("ok   good.tbl accepted")

        bad = sorted(p for p in glob.glob(os.path.join(HERE, "*.tbl"))
                     if os.path.basename(p) != "good.tbl")
        for path in bad:
            name = os.path.basename(path)
            with open(path) as f:
                m = re.search(r"^# expect: (\S+) (.+)$", f.read(), re.M)
            if not m:
                print("FAIL %s has no `# expect: ROW TEXT` line" % name)
                failures += 1
                continue
            row, text = m.group(1), m.group(2).strip()
            want = "%s:%d: %s: " % (path, row_line(path, row), row)
            out = os.path.join(tmp, name)
            res = run(args, path, "t", out)
            lines = [l for l in res.stderr.splitlines() if l.startswith("gen_msgs: " + want)]
            if res.returncode == 0:
                print("FAIL %s accepted (want a refusal of %s)" % (name, row))
                failures += 1
            elif not any(text in l for l in lines):
                print("FAIL %s: no message `%s...%s` in:\n%s" % (name, want, text, res.stderr))
                failures += 1
            elif os.path.exists(out):
                print("FAIL %s: refused, but wrote %s" % (name, os.listdir(out)))
                failures += 1
            else:
                print("ok   %s refused: %s" % (name, lines[0][len("gen_msgs: "):]))
    if failures:
        print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
