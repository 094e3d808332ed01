#!/usr/bin/env python3
"""rgpud --replay: what it refuses, and what it tells apart.

    replay_refuses.py BUILD_DIR

Refusals: what is not a whole state log gets exit status 1 and a message naming the file, never
a crash: a missing file, random bytes, a log cut at several points (in the header, after it,
between frames, inside a frame) and one with a flipped byte. The same log whole must replay (on
simgpu, status 0): the refusals are about the file, not about replaying at all.

Module globals (design.md §3): the driver places them, so a replay may find one elsewhere. A
real job's dump (tests/progs/globals, run through a private rgpud with RGPU_STATE_DUMP) is
replayed as it is, then with one global's address changed by hand: that is status 3, the global
named on its own line, and not a failure (status 1). With its size changed as well it is not the
same global placed elsewhere but a rebuild that differs: status 1.

The server uses simgpu unless RGPU_E2E_DRIVER names another driver ("system": the real one).
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

build = sys.argv[1]
driver = os.environ.get("RGPU_E2E_DRIVER", build + "/lib/simgpu/libcuda.so.1")
rgpud = build + "/bin/rgpud"
rgpuctl = build + "/bin/rgpuctl"
globals_prog = build + "/tests/progs/globals"

HDR_LEN = 24  # statetrack.h: ST_STREAM_HDR_LEN
FRAME_HDR_LEN = 8  # ST_FRAME_HDR_LEN
KIND_GLOBAL = 7


# ---- rgpu.StRecord (proto/statetrack.proto) and the stream layout (statetrack.h) -------------

def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def read_varint(buf, off):
    v = shift = 0
    while True:
        b = buf[off]
        off += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, off


def record(kind, rid, ctx=0, fields=()):
    # kind 1, id 2, ctx 4, packed field 5
    body = b"\x08" + varint(kind) + b"\x10" + varint(rid)
    if ctx:
        body += b"\x20" + varint(ctx)
    if fields:
        packed = b"".join(varint(f) for f in fields)
        body += b"\x2a" + varint(len(packed)) + packed
    return body


def decode(body):
    """A record as {kind, id, parent, ctx, fields, name, hash}: only the wire types it uses."""
    rec = {"kind": 0, "id": 0, "parent": 0, "ctx": 0, "fields": [], "name": b"", "hash": b""}
    off = 0
    while off < len(body):
        key, off = read_varint(body, off)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, off = read_varint(body, off)
            rec[{1: "kind", 2: "id", 3: "parent", 4: "ctx"}[num]] = v
        elif wt == 2:
            n, off = read_varint(body, off)
            data = body[off:off + n]
            off += n
            if num == 5:
                i = 0
                while i < len(data):
                    v, i = read_varint(data, i)
                    rec["fields"].append(v)
            else:
                rec[{6: "name", 7: "hash"}[num]] = data
        else:
            raise ValueError("wire type %d in a state log record" % wt)
    return rec


def encode(rec):
    body = b"\x08" + varint(rec["kind"]) + b"\x10" + varint(rec["id"])
    if rec["parent"]:
        body += b"\x18" + varint(rec["parent"])
    if rec["ctx"]:
        body += b"\x20" + varint(rec["ctx"])
    fields = list(rec["fields"])
    while fields and not fields[-1]:  # trailing zeros omitted, as the writer does
        fields.pop()
    if fields:
        packed = b"".join(varint(f) for f in fields)
        body += b"\x2a" + varint(len(packed)) + packed
    if rec["name"]:
        body += b"\x32" + varint(len(rec["name"])) + rec["name"]
    if rec["hash"]:
        body += b"\x3a" + varint(len(rec["hash"])) + rec["hash"]
    return body


def stream(bodies):
    # a sealed snapshot, header then frames
    hdr = (0x54534752).to_bytes(4, "little") + (1).to_bytes(2, "little") + b"\0\0"
    hdr += len(bodies).to_bytes(8, "little") + b"\0" * 4
    out = hdr + zlib.crc32(hdr).to_bytes(4, "little")
    for b in bodies:
        n = len(b).to_bytes(4, "little")
        out += n + zlib.crc32(n + b).to_bytes(4, "little") + b
    return out


def frames_of(data):
    """The record bodies of a sealed snapshot."""
    off, out = HDR_LEN, []
    while off < len(data):
        n = int.from_bytes(data[off:off + 4], "little")
        out.append(data[off + FRAME_HDR_LEN:off + FRAME_HDR_LEN + n])
        off += FRAME_HDR_LEN + n
    return out


# ---- running rgpud --replay ------------------------------------------------------------------

tmp = tempfile.mkdtemp()
state = tmp + "/state"
failed = 0


def replay(name, data, want_status, want_first=None, want_prefixes=()):
    """
    Replay data (None: no file) and check its exit status (one, or a tuple of those allowed).
    Status 1: a refusal, on stderr only, naming the file. Otherwise the last line starts with
    want_first and every want_prefixes starts a line before it; with status 3, the lines
    before the last name the globals placed elsewhere, as many as the last line counts.
    """
    global failed
    path = os.path.join(tmp, name + ".stlog")
    if data is not None:
        with open(path, "wb") as fp:
            fp.write(data)
    cmd = [rgpud, "--replay", path, "--state-dir", state]
    if driver != "system":
        cmd += ["--driver", driver]
    # use_tls=0: LeakSanitizer's tracer and rgpud --replay (tests/e2e/with_server.sh says why)
    lsan = os.environ.get("LSAN_OPTIONS", "")
    env = dict(os.environ, LSAN_OPTIONS=(lsan + ":" if lsan else "") + "use_tls=0:print_suppressions=0")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    out = (p.stdout + p.stderr).strip()
    lines = out.splitlines()
    allowed = want_status if isinstance(want_status, tuple) else (want_status,)
    why = []
    if p.returncode not in allowed:
        why.append("exit status %s" % " or ".join(str(s) for s in allowed))
    elif p.returncode == 1:
        if path not in p.stderr or p.stdout:
            why.append("a refusal on stderr that names the file, nothing on stdout")
    elif not lines:
        why.append("some output")
    else:
        if want_first and not lines[-1].startswith(want_first):
            why.append("a last line that starts: " + want_first)
        for w in want_prefixes:
            if not any(line.startswith(w) for line in lines[:-1]):
                why.append("a line that starts: " + w)
        if p.returncode == 3:
            n = sum(line.startswith('global "') for line in lines[:-1])
            end = (": ids and addresses equal; %d module global%s placed elsewhere by the "
                   "driver (a restore translates the addresses inside them)"
                   % (n, "" if n == 1 else "s"))
            if not n or not lines[-1].endswith(end):
                why.append("a line per global moved, and a last line that ends: " + end)
    print("%-26s status %d: %s" % (name, p.returncode, lines[0] if lines else "(nothing)"))
    for line in lines[1:]:
        print("%-26s   %s" % ("", line))
    for w in why:
        print("  FAILED: expected " + w)
    failed += bool(why)


# ---- a log built by hand: refusals -----------------------------------------------------------

base = 0x200000000000  # window.h: RGPU_WINDOW_BASE, rgpud's default window
frames = [
    record(1, 1, fields=(0, 0, 1)),                       # primary context of device 0
    record(3, (1 << 62) | base, fields=(base, 2 << 20)),  # a 2 MiB mapping
    record(2, base + 256, fields=(base + 256, 4096)),     # an allocation inside it
    record(8, 2, ctx=1),                                  # a stream
]
whole = stream(frames)
bounds = [HDR_LEN]
for f in frames:
    bounds.append(bounds[-1] + FRAME_HDR_LEN + len(f))

replay("whole", whole, 0, "replayed 4 records (1 contexts, 1 allocations, 1 mappings, 1 streams)"
       ": ids and addresses equal")
replay("missing", None, 1)
replay("empty", b"", 1)
replay("random", random.Random(1).randbytes(4096), 1)
replay("random_small", random.Random(2).randbytes(7), 1)
replay("cut_in_header", whole[:10], 1)
replay("cut_after_header", whole[:24], 1)
replay("cut_between_frames", whole[:bounds[2]], 1)
replay("cut_in_frame", whole[:bounds[3] - 5], 1)
replay("cut_last_byte", whole[:-1], 1)
flipped = bytearray(whole)
flipped[bounds[1] + 10] ^= 0x40
replay("flipped_byte", bytes(flipped), 1)


# ---- a real job's log: module globals --------------------------------------------------------

def dump_of_globals():
    """Run tests/progs/globals through a private rgpud that dumps its state log; the dump."""
    dump = tmp + "/dump"
    os.mkdir(dump)
    env = dict(os.environ, RGPU_STATE_DUMP=dump)
    # --log-level info: the job's end (an info line, " ends: ") is awaited in the log below
    cmd = [rgpud, "--listen", "127.0.0.1:0", "--port-file", tmp + "/port", "--admin", "none",
           "--state-dir", state, "--log-level", "info"]
    if driver != "system":
        cmd += ["--driver", driver]
    with open(tmp + "/rgpud.log", "wb") as log:
        srv = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    try:
        for _ in range(200):
            if os.path.exists(tmp + "/port") and os.path.getsize(tmp + "/port"):
                break
            if srv.poll() is not None:
                break
            time.sleep(0.05)
        with open(tmp + "/port") as fp:
            port = fp.read().strip()
        run = subprocess.run([rgpuctl, "run", "--", globals_prog], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, RGPU_SERVER="127.0.0.1:" + port))
        if run.returncode != 0:
            raise RuntimeError("globals failed through rgpu: " + (run.stdout + run.stderr).strip())
        # the worker writes the dump as its log grows; the job ends just after the goodbye
        for _ in range(100):
            with open(tmp + "/rgpud.log", errors="replace") as fp:
                if " ends: " in fp.read():
                    break
            time.sleep(0.05)
        logs = [f for f in os.listdir(dump) if f.endswith(".stlog")]
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    if len(logs) != 1:
        raise RuntimeError("expected one state log dumped, found %d" % len(logs))
    with open(os.path.join(dump, logs[0]), "rb") as fp:
        return fp.read()


def with_global_changed(data, name, addr_delta, size_delta=0):
    """The log with the global called name moved by addr_delta (and resized by size_delta)."""
    bodies, found = [], None
    for b in frames_of(data):
        rec = decode(b)
        if encode(rec) != b:  # the rewrite must change that field and nothing else
            raise RuntimeError("a record of the dump does not encode back to its bytes")
        if rec["kind"] == KIND_GLOBAL and rec["name"] == name:
            rec["fields"] += [0] * (2 - len(rec["fields"]))
            rec["fields"][0] += addr_delta
            rec["fields"][1] += size_delta
            found = rec
            b = encode(rec)
        bodies.append(b)
    if found is None:
        raise RuntimeError("no global %r in the dump" % name)
    return stream(bodies), found


try:
    real = dump_of_globals()
except Exception as e:  # noqa: BLE001 - any reason is a failure of this test, said once
    print("globals dump: FAILED: %s" % e)
    try:
        with open(tmp + "/rgpud.log") as fp:
            print(fp.read())
    except OSError:
        pass
    failed += 1
    real = None

if real is not None:
    head = "replayed %d records (" % len(frames_of(real))
    # as dumped: equal on simgpu, which places globals as a driver does for the same loads in a
    # fresh process; a real driver may place them elsewhere (3), which is not a failure either
    replay("globals_as_dumped", real, 0 if driver != "system" else (0, 3), head)
    moved, rec = with_global_changed(real, b"g_counter", 0x10000)
    was = 'global "g_counter" (id %d) was at 0x%x and is now at ' % (rec["id"], rec["fields"][0])
    replay("global_moved", moved, 3, head, want_prefixes=[was])
    # a global that comes back with another size is not the same global placed elsewhere
    resized, _ = with_global_changed(real, b"g_counter", 0x10000, 4)
    replay("global_moved_and_resized", resized, 1)

shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failed else 0)
