#!/bin/sh
# rgpuctl status / jobs against a live rgpud (run by with_server.sh): while a client holds
# 64 MiB of device memory, both commands must show it — the table and the JSON, with exact
# values where they are known — and once the client is gone, no job and no memory.
set -u
build=$1
ctl="$build/bin/rgpuctl"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ctl" run -- "$build/tests/progs/hold" 64 "$tmp/ready" >"$tmp/hold.out" 2>&1 &
holder=$!
i=0
while [ ! -e "$tmp/ready" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "$tmp/ready" ] || fail "the holding client never got ready: $(cat "$tmp/hold.out")"
sleep 0.7 # workers report every 0.5 s

"$ctl" status --server "$RGPU_E2E_ADMIN" >"$tmp/status.txt" || fail "status exited $?"
"$ctl" status --server "$RGPU_E2E_ADMIN" --json >"$tmp/status.json" || fail "status --json"
"$ctl" jobs --server "$RGPU_E2E_ADMIN" >"$tmp/jobs.txt" || fail "jobs exited $?"
"$ctl" jobs --server "$RGPU_E2E_ADMIN" --json >"$tmp/jobs.json" || fail "jobs --json"
cat "$tmp/status.txt" "$tmp/jobs.txt"

python3 - "$tmp" "$holder" "$RGPU_E2E_ADMIN" <<'PY' || fail "JSON checks"
import json, sys
tmp, holder, admin = sys.argv[1], int(sys.argv[2]), sys.argv[3]
st = json.load(open(tmp + "/status.json"))["servers"]
jb = json.load(open(tmp + "/jobs.json"))
assert len(st) == 1 and st[0]["server"] == admin, st
s = st[0]
assert s["jobs"] == 1, s
assert s["resume_grace_s"] == 60, s
assert len(s["gpus"]) == 1 and s["gpus"][0]["name"] == "rgpu simgpu", s["gpus"]
assert s["gpus"][0]["memory_total"] == 16 << 30, s["gpus"]
assert jb["errors"] == [] and len(jb["jobs"]) == 1, jb
j = jb["jobs"][0]
assert len(j["job"]) == 32 and int(j["job"], 16) != 0, j
assert j["client_pid"] != 0 and j["program"].endswith("/hold"), j
assert j["state"] == "running", j
# 64 MiB in 2 MiB granules: exactly 64 MiB mapped
assert j["device_memory"] == 64 << 20, j
assert s["gpus"][0]["memory_used"] == j["device_memory"], (s, j)
assert j["objects"] >= 2, j           # a context and a module at least
assert j["bytes_in"] > 64 << 20, j    # the 64 MiB went in
assert j["resumes"] == 0, j
print("admin: status and jobs JSON OK (job %s, %d bytes of device memory)" % (j["job"][:12], j["device_memory"]))
PY
grep -q "rgpu simgpu" "$tmp/status.txt" || fail "status table lacks the GPU"
grep -q "64.0 MiB" "$tmp/jobs.txt" || fail "jobs table lacks the 64 MiB"
grep -q " running" "$tmp/jobs.txt" || fail "jobs table lacks the state"

rm -f "$tmp/ready"
wait $holder || fail "the holding client failed: $(cat "$tmp/hold.out")"
sleep 0.3
"$ctl" jobs --server "$RGPU_E2E_ADMIN" --json >"$tmp/jobs2.json" || fail "jobs after"
"$ctl" status --server "$RGPU_E2E_ADMIN" --json >"$tmp/status2.json" || fail "status after"
python3 - "$tmp" <<'PY' || fail "after the client left"
import json, sys
tmp = sys.argv[1]
assert json.load(open(tmp + "/jobs2.json"))["jobs"] == []
s = json.load(open(tmp + "/status2.json"))["servers"][0]
assert s["jobs"] == 0 and s["gpus"][0]["memory_used"] == 0, s
PY

# admin connections that send nothing, or half a header, hold only themselves: each is read by
# a process of its own, so the server answers rgpuctl and serves a client meanwhile (it used to
# spend up to 5 s on each such connection before anything else, one at a time)
python3 - "$RGPU_E2E_ADMIN" "$ctl" "$build/tests/progs/vecadd" <<'PY' || fail "stalled admin connections"
import socket, subprocess, sys, time
admin, ctl, vecadd = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = admin.rsplit(":", 1)
stalled = []
for i in range(3):
    s = socket.create_connection((host, int(port)))
    if i == 1:
        s.sendall(b"\x52\x47")  # two bytes of a header, then nothing
    stalled.append(s)
time.sleep(0.2)
t0 = time.monotonic()
st = subprocess.run([ctl, "status", "--server", admin], capture_output=True, text=True, timeout=30)
t_status = time.monotonic() - t0
assert st.returncode == 0 and "rgpu simgpu" in st.stdout, st
t0 = time.monotonic()
run = subprocess.run([ctl, "run", "--", vecadd], capture_output=True, text=True, timeout=60)
t_run = time.monotonic() - t0
assert run.returncode == 0, run
for s in stalled:
    s.close()
print("admin: with 3 stalled admin connections, status answered in %.2f s, vecadd ran in %.2f s" % (t_status, t_run))
assert t_status < 2.0, "status waited %.2f s behind stalled admin connections" % t_status
assert t_run < 4.0, "a client waited %.2f s behind stalled admin connections" % t_run
PY

# a server that cannot be reached: exit status 3, the error in the JSON
"$ctl" status --server 127.0.0.1:1 --json >"$tmp/bad.json"
rc=$?
[ $rc -eq 3 ] || fail "unreachable server: exit $rc, want 3"
grep -q '"error"' "$tmp/bad.json" || fail "unreachable server: no error entry"
"$ctl" status --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad option: want exit status 2"
echo "admin: rgpuctl status/jobs OK"
