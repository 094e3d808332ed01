#!/usr/bin/env python3
"""A TCP proxy that writes down what it forwards, for the fuzz seeds (make_corpus.py).

usage: record_session.py --to HOST:PORT --port-file FILE --out DIR [--prefix NAME]

Listens on a free loopback port (written to FILE), forwards every connection to HOST:PORT
unchanged and writes each direction's bytes to DIR/NAME-N.c2s (client to server) and
DIR/NAME-N.s2c. Runs until killed.
"""
import argparse
import os
import socket
import threading


def pump(src, dst, path):
    with open(path, "wb") as out:
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                break
            out.write(b)
            out.flush()
            try:
                dst.sendall(b)
            except OSError:
                break
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--to", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--prefix", default="conn")
    a = ap.parse_args()
    host, port = a.to.rsplit(":", 1)
    os.makedirs(a.out, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    n = 0
    while True:
        c, _ = ls.accept()
        s = socket.create_connection((host, int(port)))
        base = os.path.join(a.out, "%s-%d" % (a.prefix, n))
        n += 1
        threading.Thread(target=pump, args=(c, s, base + ".c2s"), daemon=True).start()
        threading.Thread(target=pump, args=(s, c, base + ".s2c"), daemon=True).start()


if __name__ == "__main__":
    main()
