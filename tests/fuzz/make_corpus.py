#!/usr/bin/env python3
"""Cut seed corpora for the fuzz harnesses out of real traffic, state logs and images.

usage: make_corpus.py --src SRC --build BUILD --out CORPUS
           [--sessions DIR] [--stlogs DIR] [--images FILE...]

--sessions: what record_session.py wrote (job-N.c2s/.s2c from a job port, admin-N.* from an
  admin port); --stlogs: rgpud's RGPU_STATE_DUMP folder; --images: cubins, fatbins, PTX.
Writes CORPUS/{frame,msg,statelog,image}/NAME, each file prefixed with the selector byte its
harness reads first (tests/fuzz/fuzz_*.c say what it means). Files are named for what they
hold; an existing file of the same name is replaced. Keeps the corpora small: one frame and
one body per message type and direction, a few whole streams, the smallest state logs.
"""
import argparse
import glob
import os
import re
import struct

HDR = 56
MAX_FILE = 4 << 10  # frames and logs; images are kept whole


def table_rows(path):
    """{number: (NAME, body, reply)} of a message table (proto/*.tbl)."""
    rows = {}
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].split()
        if not line or line[0] == "capability":
            continue
        kv = dict(w.split("=", 1) for w in line[1:] if "=" in w)
        rows[int(kv["number"])] = (line[0], kv.get("body"), kv.get("reply"))
    return rows


def descriptor_index(build):
    """{message name ("ModuleLoad"): its index in fuzz_msg's table}."""
    cname = {}
    for f in glob.glob(os.path.join(build, "proto/gen/rgpu/proto/*.pb-c.c")):
        src = open(f, encoding="utf-8").read()
        for m in re.finditer(r'const ProtobufCMessageDescriptor (\w+) =\s*\{\s*'
                             r'PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,\s*"rgpu\.(\w+)"', src):
            cname[m.group(1)] = m.group(2)
    order = re.findall(r"&(\w+__descriptor),",
                       open(os.path.join(build, "tests/fuzz/fuzz_descriptors.c")).read())
    return {cname[c]: i for i, c in enumerate(order)}, len(order)


def frames(data):
    """(offset, type, flags, body_len, payload_len) of each whole header in a stream."""
    off = 0
    while len(data) - off >= HDR:
        typ, flags, blen, plen = struct.unpack_from("<HIIQ", data, off + 6)
        yield off, typ, flags, blen, plen
        off += HDR + blen + plen


def put(out, sub, name, data, cap=MAX_FILE):
    d = os.path.join(out, sub)
    os.makedirs(d, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data[:cap])


def from_sessions(a, rows, admin_rows, didx, ndesc):
    seen_frame, seen_msg, step = set(), set(), 0
    for path in sorted(glob.glob(os.path.join(a.sessions, "*.c2s")) +
                       glob.glob(os.path.join(a.sessions, "*.s2c"))):
        base = os.path.basename(path)
        admin = base.startswith("admin")
        to_client = path.endswith(".s2c")
        table = admin_rows if admin else rows
        data = open(path, "rb").read()
        if not data:
            continue
        proto = ("admin" if admin else "job") + ("-client" if to_client else "-server")
        # fuzz_frame: bit 0 the receiver, bit 1 the protocol, bits 2-4 the read size
        sel = (1 if to_client else 0) | (2 if admin else 0)
        fs = list(frames(data))
        if len(fs) > 1 and (proto, len(fs) > 8) not in seen_frame:
            seen_frame.add((proto, len(fs) > 8))
            end = fs[min(len(fs), 12) - 1]
            put(a.out, "frame", "%s-stream-%s" % (proto, base),
                bytes([sel | (step % 8) << 2]) + data[:end[0] + HDR + end[3] + end[4]])
            step += 1
        for off, typ, flags, blen, plen in fs:
            name, body, reply = table.get(typ, ("T%d" % typ, None, None))
            is_reply = flags & 1
            key = (proto, typ, is_reply)
            if key not in seen_frame:
                seen_frame.add(key)
                put(a.out, "frame", "%s-%s%s" % (proto, name, "-reply" if is_reply else ""),
                    bytes([sel | (step % 8) << 2]) + data[off:off + HDR + blen + plen])
                step += 1
            msg = reply if is_reply else body
            if msg in didx and blen and msg not in seen_msg:
                seen_msg.add(msg)
                # fuzz_msg: byte 0 is the index modulo the table's size
                put(a.out, "msg", msg, bytes([didx[msg] % ndesc]) +
                    data[off + HDR:off + HDR + blen])


def from_stlogs(a):
    logs = sorted(glob.glob(os.path.join(a.stlogs, "*.stlog")), key=os.path.getsize)
    sizes = set()
    kept = 0
    for path in logs:
        data = open(path, "rb").read()
        if len(data) > MAX_FILE or len(data) in sizes or kept == 24:
            continue
        sizes.add(len(data))
        # fuzz_statelog: bit 0 fix the CRCs first, bit 1 all or nothing
        sel = (1, 3, 0, 2)[kept % 4]
        put(a.out, "statelog", "stlog-%dB-sel%d" % (len(data), sel), bytes([sel]) + data)
        kept += 1


def from_images(a):
    for path in a.images:
        data = open(path, "rb").read()
        base = os.path.basename(path)
        # fuzz_image: mode 0 the server's check, 2 a version-1 wrapper, 3 a -rdc wrapper
        put(a.out, "image", base + "-check", b"\x00" + data, None)
        if data[:4] == b"\x50\xed\x55\xba":
            put(a.out, "image", base + "-wrapper", b"\x02\x00" + data, None)
            if len(data) <= 4096:
                put(a.out, "image", base + "-linked2", b"\x03\x02" + data * 3, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sessions")
    ap.add_argument("--stlogs")
    ap.add_argument("--images", nargs="*", default=[])
    a = ap.parse_args()
    rows = table_rows(os.path.join(a.src, "proto/messages.tbl"))
    admin_rows = table_rows(os.path.join(a.src, "proto/admin.tbl"))
    didx, ndesc = descriptor_index(a.build)
    if a.sessions:
        from_sessions(a, rows, admin_rows, didx, ndesc)
    if a.stlogs:
        from_stlogs(a)
    from_images(a)


if __name__ == "__main__":
    main()
