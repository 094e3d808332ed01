#!/bin/sh
# The session cases of quota.sh, run under with_server.sh against rgpud --keys KEYS with its
# rgpud.conf (alice: memory 64M, sessions 3; bob: sessions 1; carol: idle_timeout 2; dave:
# module_cache 0; [defaults] memory 256M).
#   quota_cases.sh BUILD_DIR KEYS
set -u
build=$1 keys=$2
ctl=$build/bin/rgpuctl
log=$RGPU_E2E_LOGFILE
quota=$build/tests/progs/quota
vecadd=$build/tests/progs/vecadd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- rgpud log"; tail -n 30 "$log"; exit 1; }
as() { t=$1; shift; "$ctl" run --key "$keys/$t.key" -- "$@"; }
# jobs the supervisor still tracks (a worker leaves the table when it is reaped, after its
# slot of the accounting table was given back)
njobs() {
	"$ctl" jobs --server "$RGPU_E2E_ADMIN" --json |
		python3 -c 'import json, sys; print(len(json.load(sys.stdin)["jobs"]))'
}
no_jobs() {
	i=0
	while [ "$(njobs)" != 0 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ "$(njobs)" = 0 ] || fail "jobs still running: $("$ctl" jobs --server "$RGPU_E2E_ADMIN")"
}
wait_file() {
	i=0
	while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	[ -e "$1" ] || fail "$1 did not appear"
}
# the log's lines from line $1 on
since() { tail -n +"$(($1 + 1))" "$log"; }
mark() { wc -l <"$log"; }

# [server] from the file, overridden by the command line
grep -q "resume grace 1 s, at most 12 sessions" "$log" ||
	fail "the file's resume-grace 1 and the command line's --max-sessions 12 are not in force: $(grep "resume grace" "$log")"
echo "ok: rgpud.conf's [server] resume-grace = 1 applies, the command line's --max-sessions 12 wins over its 16"

# ---- device memory quota ------------------------------------------------------------------
m=$(mark)
as alice "$quota" a:48 o:32 f a:32 >"$tmp/out" 2>&1 || fail "alice a:48 o:32 f a:32: $(cat "$tmp/out")"
grep -q "cuMemAlloc 32 MiB: CUDA_ERROR_OUT_OF_MEMORY" "$tmp/out" || fail "$(cat "$tmp/out")"
no_jobs
[ "$(since "$m" | grep -c "over the device memory quota")" -eq 1 ] ||
	fail "want one warning: $(since "$m" | grep quota)"
since "$m" | grep -q "of tenant 'alice': over the device memory quota of 67108864 bytes (rgpud.conf, memory): its sessions hold 50331648, 33554432 more asked; answered CUDA_ERROR_OUT_OF_MEMORY" ||
	fail "the warning: $(since "$m" | grep quota)"
echo "ok: alice (memory 64M): 48 MiB granted, 32 more CUDA_ERROR_OUT_OF_MEMORY, granted after a free"

as alice "$quota" v:48 V:32 f v:32 >"$tmp/out" 2>&1 || fail "alice VMM: $(cat "$tmp/out")"
grep -q "cuMemCreate 32 MiB: CUDA_ERROR_OUT_OF_MEMORY" "$tmp/out" || fail "$(cat "$tmp/out")"
echo "ok: the same through cuMemCreate (the VMM API)"

# shellcheck disable=SC2086 # the launcher is a command and its words (or nothing)
as alice ${RGPU_APP_LAUNCHER_CMD:-} "$build/tests/cuda/rt_quota_static" >"$tmp/out" 2>&1 ||
	fail "rt_quota_static: $(cat "$tmp/out")"
grep -q "32 MiB over the quota: cudaErrorMemoryAllocation (2)" "$tmp/out" || fail "$(cat "$tmp/out")"
echo "ok: cudaMalloc through static cudart: $(head -1 "$tmp/out")"

# the [defaults] quota for a tenant without its own: 256M
as dave "$quota" a:240 o:32 a:16 >"$tmp/out" 2>&1 || fail "dave a:240 o:32 a:16: $(cat "$tmp/out")"
echo "ok: dave ([defaults] memory 256M): 240 MiB granted, 32 more refused, 16 granted"

# two sessions of one tenant share its quota; bytes come back when a session ends
no_jobs
as alice "$quota" a:48 w:"$tmp/ready" >"$tmp/hold" 2>&1 &
holder=$!
wait_file "$tmp/ready"
as alice "$quota" o:32 a:14 >"$tmp/out" 2>&1 ||
	fail "a second session of alice while the first holds 48 MiB: $(cat "$tmp/out")"
# another tenant is not affected
as bob "$quota" a:64 >"$tmp/out2" 2>&1 || fail "bob while alice holds hers: $(cat "$tmp/out2")"
rm -f "$tmp/ready"
wait $holder || fail "alice's holder: $(cat "$tmp/hold")"
no_jobs
as alice "$quota" a:64 >"$tmp/out" 2>&1 || fail "alice's whole quota after both ended: $(cat "$tmp/out")"
echo "ok: alice's sessions share 64M (48 + 14 granted, 48 + 32 refused); all 64 once they ended"

# a worker killed by a signal gives its tenant's bytes back when the supervisor reaps it
as alice "$quota" a:48 w:"$tmp/ready" >"$tmp/hold" 2>&1 &
holder=$!
wait_file "$tmp/ready"
sleep 0.7 # workers report every 0.5 s
wpid=$("$ctl" jobs --server "$RGPU_E2E_ADMIN" --json |
	python3 -c 'import json, sys; print([j["worker_pid"] for j in json.load(sys.stdin)["jobs"] if j["tenant"] == "alice"][0])')
kill -9 "$wpid" || fail "no worker $wpid"
i=0
while ! grep -q "worker $wpid killed by signal 9" "$log" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
grep -q "worker $wpid killed by signal 9" "$log" || fail "worker $wpid was not reaped"
no_jobs
as alice "$quota" a:64 >"$tmp/out" 2>&1 || fail "alice after her worker was killed: $(cat "$tmp/out")"
rm -f "$tmp/ready"
wait $holder && fail "the killed worker's client succeeded: $(cat "$tmp/hold")"
echo "ok: a killed worker's 48 MiB are alice's again once it is reaped"

# ---- sessions per tenant ---------------------------------------------------------------------
as bob "$quota" a:2 w:"$tmp/ready" >"$tmp/hold" 2>&1 &
holder=$!
wait_file "$tmp/ready"
m=$(mark)
as bob "$quota" a:2 >"$tmp/out" 2>&1 && fail "a second session of bob (sessions 1) ran"
grep -q "cuInit(0) = 46 (CUDA_ERROR_DEVICE_UNAVAILABLE)" "$tmp/out" || fail "$(cat "$tmp/out")"
grep -q "cannot serve: tenant 'bob' has its limit of 1 sessions on this GPU server (rgpud.conf, sessions); try again later" \
	"$tmp/out" || fail "the client is not told why: $(cat "$tmp/out")"
sleep 0.3
since "$m" | grep -q "refused: tenant 'bob' has its limit of 1 sessions" ||
	fail "the refusal is not in the log: $(since "$m")"
as alice "$quota" a:2 >"$tmp/out" 2>&1 || fail "alice while bob is at his limit: $(cat "$tmp/out")"
rm -f "$tmp/ready"
wait $holder || fail "bob's holder: $(cat "$tmp/hold")"
no_jobs
as bob "$quota" a:2 >"$tmp/out" 2>&1 || fail "bob once his session ended: $(cat "$tmp/out")"
echo "ok: bob (sessions 1): a second session refused with CUDA_ERROR_DEVICE_UNAVAILABLE, and why"

# ---- idle timeout per tenant ---------------------------------------------------------------
t0=$(date +%s)
as carol "$quota" a:2 f y s:4 x >"$tmp/out" 2>&1 || fail "carol idle: $(cat "$tmp/out")"
t1=$(date +%s)
grep -q "the server ended the session: idle for 2 s (no frame, nothing running; the tenant's idle_timeout in rgpud.conf)" \
	"$tmp/out" || fail "carol is not told why: $(cat "$tmp/out")"
[ $((t1 - t0)) -le 7 ] || fail "carol's idle run took $((t1 - t0)) s"
as alice "$quota" a:2 s:3 f >"$tmp/out" 2>&1 || fail "alice (no idle timeout) idle 3 s: $(cat "$tmp/out")"
echo "ok: carol (idle_timeout 2) is ended after 2 s idle; alice (the server's: none) is not"

# ---- module cache scoped per tenant --------------------------------------------------------
run_vecadd() {
	m=$(mark)
	as "$1" "$vecadd" >"$tmp/out" 2>&1 || fail "vecadd as $1: $(cat "$tmp/out")"
	no_jobs
	got="$(since "$m" | grep -c "bytes received and cached") $(since "$m" | grep -c "bytes from the cache") $(since "$m" | grep -c "bytes received (not cached)")"
	[ "$got" = "$2" ] || fail "vecadd as $1: received+cached, from the cache, received uncached: $got, want $2"
}
run_vecadd alice "1 0 0"
run_vecadd bob "1 0 0"   # cached for alice: bob must ship it all the same
run_vecadd alice "0 1 0"
run_vecadd bob "0 1 0"
m=$(mark)
run_vecadd dave "0 0 1"  # module_cache 0
since "$m" | grep -q "not caching a [0-9]*-byte image for tenant 'dave': more than its module_cache of 0 bytes" ||
	fail "no warning for dave's image: $(since "$m")"
run_vecadd dave "0 0 1"
echo "ok: the module cache answers a hash only to a tenant that shipped the image itself"
echo "ok: all quota cases"
