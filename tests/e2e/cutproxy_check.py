#!/usr/bin/env python3
"""Checks of cutproxy itself, against a small echo server (no rgpu involved).

    cutproxy_check.py BUILD_DIR

- without cuts every byte comes back unchanged, over concurrent connections and through a
  half-close;
- with --cuts 1 --max-bytes 100 a connection that sends 1000 bytes is cut before the end, and
  the next connection is forwarded whole;
- each cut lands at the byte the proxy logs: the bytes that reached the server plus the bytes
  that came back make the logged offset;
- --spread log puts cut points at every scale;
- over several cuts both a reset and a FIN reach the client and the server;
- --max-ms cuts an idle connection; SIGUSR1 writes the stats.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BUILD = sys.argv[1]
PROXY = os.path.join(BUILD, "tests", "e2e", "cutproxy")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class EchoServer:
    """Echoes every connection; records per connection the bytes received and how it ended."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.ends = []  # (bytes received, "eof" | "reset")
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        got, how = 0, "eof"
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                got += len(d)
                c.sendall(d)
        except (ConnectionResetError, BrokenPipeError):
            how = "reset"
        with self.lock:
            self.ends.append((got, how))
        c.close()


class Proxy:
    def __init__(self, target_port, *args):
        self.dir = tempfile.mkdtemp()
        self.stats = os.path.join(self.dir, "stats")
        port_file = os.path.join(self.dir, "port")
        self.err = open(os.path.join(self.dir, "log"), "w+")
        self.p = subprocess.Popen([PROXY, "--target", "127.0.0.1:%d" % target_port,
                                   "--port-file", port_file, "--stats", self.stats] + list(args),
                                  stderr=self.err)
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.02)
        self.port = int(open(port_file).read())

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.port))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(10)
        self.err.seek(0)
        self.log = self.err.read()
        return dict(kv.split("=") for kv in open(self.stats).read().split())


def pattern(n, seed):
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


def exchange(s, data):
    """Send data, half-close, read until EOF or an error. Returns (bytes back, how it ended)."""
    back = bytearray()
    out = {"sent": 0}

    def writer():
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    t = threading.Thread(target=writer)
    t.start()
    how = "eof"
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            back += d
    except ConnectionResetError:
        how = "reset"
    t.join()
    s.close()
    return bytes(back), how


def lockstep(s, data, chunk=500):
    """Send data a chunk at a time, each after the last came back, so that a cut can land in
    either direction. Returns the bytes back."""
    back = bytearray()
    try:
        for off in range(0, len(data), chunk):
            s.sendall(data[off:off + chunk])
            while len(back) < min(off + chunk, len(data)):
                d = s.recv(65536)
                if not d:
                    raise ConnectionResetError
                back += d
    except (ConnectionResetError, BrokenPipeError):
        pass
    s.close()
    return bytes(back)


def wait_ends(srv, n):
    for _ in range(250):
        with srv.lock:
            if len(srv.ends) >= n:
                return list(srv.ends)
        time.sleep(0.02)
    with srv.lock:
        return list(srv.ends)


def test_passthrough():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "0")
    results = [None] * 8

    def one(i):
        data = pattern((1 << 20) + i * 4099, i)
        back, how = exchange(px.connect(), data)
        results[i] = back == data and how == "eof"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = px.stop()
    check(all(results), "no cuts: 8 concurrent connections of ~1 MiB echoed byte for byte")
    total = sum((1 << 20) + i * 4099 for i in range(8))
    check(st["cuts"] == "0" and st["conns"] == "8" and int(st["bytes_up"]) == total and
          int(st["bytes_down"]) == total, "no cuts: stats %s" % st)


def test_one_cut():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "1", "--max-bytes", "100", "--seed", "7")
    data = pattern(1000, 1)
    back, how = exchange(px.connect(), data)
    check(len(back) < 1000 and back == data[:len(back)],
          "--max-bytes 100: the connection is cut before the end (%d of 1000 bytes back, %s)"
          % (len(back), how))
    ends = wait_ends(srv, 1)
    check(len(ends) == 1 and ends[0][0] <= 100,
          "--max-bytes 100: the server got %s bytes before the cut" % ends[:1])
    back2, how2 = exchange(px.connect(), data)
    check(back2 == data and how2 == "eof", "after the last cut the next connection is whole")
    st = px.stop()
    check(st["cuts"] == "1" and st["conns"] == "2", "one cut: stats %s" % st)
    m = re.search(r"cut 1/1: conn 1 at byte (\d+)", px.log)
    check(m is not None, "the cut is logged with its connection and offset")
    if m and ends:
        check(int(m.group(1)) == ends[0][0] + len(back),
              "the cut lands at the logged byte: %s == %d to the server + %d back"
              % (m.group(1), ends[0][0], len(back)))


def test_offsets():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "6", "--max-bytes", "5000", "--seed", "3")
    got = []
    for i in range(6):
        back = lockstep(px.connect(), pattern(20000, i))
        ends = wait_ends(srv, i + 1)
        got.append((ends[i][0] if len(ends) > i else -1, len(back)))
    px.stop()
    logged = [int(n) for n in re.findall(r"cut \d+/6: conn \d+ at byte (\d+)", px.log)]
    sums = [a + b for a, b in got]
    check(logged == sums, "six cuts at the logged bytes: %s == to the server + back %s"
          % (logged, got))
    check(len(set(logged)) > 1, "the cut points differ (%s)" % logged)
    check("in client->server" in px.log and "in server->client" in px.log,
          "cuts land in both directions")


def test_log_spread():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "12", "--max-bytes", "1M", "--spread", "log", "--seed", "5")
    for i in range(12):
        exchange(px.connect(), pattern(1 << 20, i))
    px.stop()
    logged = [int(n) for n in re.findall(r"cut \d+/12: conn \d+ at byte (\d+)", px.log)]
    check(len(logged) == 12 and min(logged) < 1000 and max(logged) > 100000,
          "--spread log: cut points from under 1 KB to over 100 KB (%s)" % sorted(logged))


def test_rst_and_fin():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "4", "--max-bytes", "3000")
    client = set()
    for i in range(4):
        back, how = exchange(px.connect(), pattern(200000, i))
        client.add(how)
    st = px.stop()
    server = {how for _, how in wait_ends(srv, 4)}
    check(st["cuts"] == "4", "four connections, four cuts (%s)" % st)
    check(client == {"eof", "reset"}, "the client sees both a FIN and a reset (%s)" % client)
    check(server == {"eof", "reset"}, "the server sees both a FIN and a reset (%s)" % server)


def test_timer_and_usr1():
    srv = EchoServer()
    px = Proxy(srv.port, "--cuts", "1", "--max-ms", "300")
    s = px.connect()
    s.settimeout(5)
    t0 = time.time()
    try:
        d = s.recv(10)
    except (ConnectionResetError, socket.timeout) as e:
        d = e
    took = time.time() - t0
    check(d == b"" or isinstance(d, ConnectionResetError),
          "--max-ms 300: an idle connection is cut (%r after %.2f s)" % (d, took))
    check(took < 2, "--max-ms 300: within the time (%.2f s)" % took)
    os.remove(px.stats) if os.path.exists(px.stats) else None
    px.p.send_signal(signal.SIGUSR1)
    for _ in range(100):
        if os.path.exists(px.stats):
            break
        time.sleep(0.02)
    check(os.path.exists(px.stats) and "cuts=1" in open(px.stats).read(),
          "SIGUSR1 writes the stats while the proxy runs")
    check(px.p.poll() is None, "the proxy keeps running after SIGUSR1")
    px.stop()


test_passthrough()
test_one_cut()
test_offsets()
test_log_spread()
test_rst_and_fin()
test_timer_and_usr1()
if failures:
    print("cutproxy_check: %d check(s) failed" % len(failures))
    sys.exit(1)
print("cutproxy_check: all checks passed")
