#!/usr/bin/env python3
"""report.py on made-up numbers: the best of several rounds is taken, each of issue 14's targets
says ok or MISS on the side of its bound where it should, and the old two-side table still works.
"""
import os
import subprocess
import sys
import tempfile

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.py")


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def rows(out):
    return {line.split()[0]: line for line in out.splitlines() if line.strip()}


def expect(cond, what, out):
    if not cond:
        print(f"FAIL: {what}\n{out}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        native = write(d, "native.txt", "rtt_median 0.36 us\nd2h4_median 2.00 us\n"
                       "launch_rate 240000 launches/s\nh2d_4K 5.0 GB/s\nh2d_4M 50.0 GB/s\n"
                       "h2d_64M 50.0 GB/s\nph2d_1M 20.0 GB/s\nd2h_4streams 50.0 GB/s\n"
                       "FAIL something\n")
        tcp1 = write(d, "tcp1.txt", "rtt_median 19.0 us\nd2h4_median 12.5 us\n"
                     "h2d_64M 3.0 GB/s\nd2h_4streams 3.1 GB/s\n")
        tcp2 = write(d, "tcp2.txt", "rtt_median 18.0 us\nd2h4_median 11.9 us\n"
                     "h2d_64M 3.3 GB/s\nd2h_4streams 2.0 GB/s\n")
        shm = write(d, "shm.txt", "d2h4_median 5.01 us\nlaunch_rate 220000 launches/s\n"
                    "h2d_4M 45.5 GB/s\nh2d_64M 44.9 GB/s\n")
        ceil = write(d, "ceil.txt", "tcp_ceiling_1 3.5 GB/s\ntcp_ceiling_best 4.0 GB/s\n"
                     "tcp_rtt_split_median 9.0 us\n")
        out = subprocess.run([sys.executable, REPORT, "--transports", native, f"{tcp1},{tcp2}",
                              shm, ceil], capture_output=True, text=True, check=True).stdout
        r = rows(out)
        expect("18.000" in r["rtt_median"], "best tcp time is the lowest", out)
        expect("tcp<=+10us ok" in r["d2h4_median"], "11.9 <= 2 + 10", out)
        expect("shm<=+3us MISS" in r["d2h4_median"], "5.01 > 2 + 3", out)
        expect("shm>=0.95x MISS" in r["launch_rate"], "220000 < 0.95 * 240000", out)
        expect("shm>=0.9x ok" in r["h2d_4M"], "45.5 >= 0.9 * 50", out)
        expect("shm>=0.9x MISS" in r["h2d_64M"], "44.9 < 0.9 * 50", out)
        expect("tcp>=0.8ceil ok" in r["h2d_64M"], "best 3.3 >= 0.8 * 4", out)
        expect("tcp>=0.8ceil MISS" in r["d2h_4streams"], "3.1 < 0.8 * 4", out)
        expect("shm>=0.9x -" in r["ph2d_1M"], "no shm number: '-'", out)
        expect("target" not in r["h2d_4K"] and r["h2d_4K"].split()[-1] == "-",
               "no target below 4 MiB", out)
        expect("4.000" in r["tcp_ceiling_best"], "the ceiling is a row", out)
        expect("issue 14 targets: 3 ok, 4 MISS, 1 without a number" in out, "summary", out)
        expect("native 2.00 + the split round trip 9.00 = 11.00 us at least; rgpu 11.90 (+0.90"
               in out, "the TCP floor: best tcp 11.9 - 2 - 9", out)

        out = subprocess.run([sys.executable, REPORT, native, tcp1, tcp2], capture_output=True,
                             text=True, check=True).stdout
        r = rows(out)
        expect(r["rtt_median"].split()[1:6] == ["0.360", "19.000", "us", "52.778", "18.000"],
               "native, rgpu, unit, ratio, before", out)
        expect(r["h2d_4M"].split()[2] == "-", "a metric one side lacks", out)
    print("ok")


if __name__ == "__main__":
    main()
