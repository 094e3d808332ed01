#!/bin/sh
# The session cases of auth.sh, run under with_server.sh against rgpud --keys KEYS.
#   auth_cases.sh BUILD_DIR KEYS OTHER ADMIN_KEY   (OTHER holds a wrong alice.key and carol.key;
#   rgpud runs with --admin-key ADMIN_KEY)
set -u
build=$1 keys=$2 other=$3 admin_key=$4
ctl=$build/bin/rgpuctl
log=$RGPU_E2E_LOGFILE
vecadd=$build/tests/progs/vecadd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- rgpud log"; tail -n 30 "$log"; exit 1; }
loads() { grep -c "simgpu: .* device(s)" "$log"; }
# the workers write their lines just before they exit: give them a moment
settle() { sleep 0.3; }

# a refused client: exit 1 from vecadd's CHECK(cuInit) with CUDA_ERROR_NOT_PERMITTED, exactly
# one line from the interposer containing $2, the driver never loaded, the server's line $3
refused() {
	what=$1 client_says=$2 server_says=$3
	shift 3
	before=$(loads)
	refusals=$(grep -c "refused before loading the driver" "$log")
	"$@" >"$tmp/out" 2>&1
	rc=$?
	settle
	[ $rc -eq 1 ] || fail "$what: exit $rc, want 1: $(cat "$tmp/out")"
	grep -q "cuInit.* = 800 (CUDA_ERROR_NOT_PERMITTED)" "$tmp/out" ||
		fail "$what: cuInit did not return CUDA_ERROR_NOT_PERMITTED: $(cat "$tmp/out")"
	n=$(grep -c " rgpu\[[0-9]*\] " "$tmp/out")
	[ "$n" -eq 1 ] || fail "$what: $n interposer log lines, want 1: $(cat "$tmp/out")"
	grep -q "$client_says" "$tmp/out" || fail "$what: the client says: $(cat "$tmp/out")"
	[ "$(loads)" -eq "$before" ] || fail "$what: a worker loaded the driver"
	[ "$(grep -c "refused before loading the driver" "$log")" -eq $((refusals + 1)) ] ||
		fail "$what: no refusal in the server log"
	grep "refused before loading the driver" "$log" | tail -1 | grep -q "$server_says" ||
		fail "$what: the server's line: $(grep "refused before" "$log" | tail -1)"
	echo "ok: $what refused: $(grep " rgpu\[[0-9]*\] " "$tmp/out")"
}

[ "$(loads)" -ge 1 ] || fail "SIMGPU_LOG is not on (no probe line)"

# the right key: a real program runs (--key; the tenant from the file's name)
before=$(loads)
"$build/bin/rgpuctl" run --key "$keys/alice.key" -- "$vecadd" >"$tmp/out" 2>&1 ||
	fail "vecadd with alice's key: $(cat "$tmp/out")"
settle
[ "$(loads)" -eq $((before + 1)) ] || fail "the right key's worker did not load the driver once"
grep -q "tenant alice" "$log" || fail "the job's line does not name its tenant"
echo "ok: vecadd runs with alice's key: $(tail -1 "$tmp/out")"
# RGPU_KEY_FILE and RGPU_TENANT, a raw key in a file of another name
cp "$keys/bob.key" "$tmp/secret"
chmod 600 "$tmp/secret"
RGPU_KEY_FILE=$tmp/secret RGPU_TENANT=bob "$vecadd" >"$tmp/out" 2>&1 ||
	fail "vecadd with RGPU_KEY_FILE/RGPU_TENANT: $(cat "$tmp/out")"
echo "ok: vecadd runs with RGPU_KEY_FILE and RGPU_TENANT=bob"

refused "a wrong key" "refused this client: authentication failed for tenant 'alice'" \
	"tenant 'alice': wrong answer to the challenge" \
	env RGPU_KEY_FILE="$other/alice.key" "$vecadd"
refused "no key" "requires authentication" "no credentials" \
	env -u RGPU_KEY_FILE -u RGPU_TENANT "$vecadd"
refused "an unknown tenant" "authentication failed for tenant 'carol'" \
	"tenant 'carol': unknown tenant" \
	env RGPU_KEY_FILE="$other/carol.key" "$vecadd"

# the client refuses a key file others may read, before it connects
cp "$keys/alice.key" "$tmp/open.key"
chmod 644 "$tmp/open.key"
accepts=$(grep -c "supervisor: client " "$log")
RGPU_KEY_FILE=$tmp/open.key "$vecadd" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a world-readable client key: exit $rc"
grep -q "cuInit.* = 800 (CUDA_ERROR_NOT_PERMITTED)" "$tmp/out" || fail "$(cat "$tmp/out")"
grep -q "RGPU_KEY_FILE: key file .*open.key is accessible by group or others (mode 0644)" \
	"$tmp/out" || fail "the client does not say why: $(cat "$tmp/out")"
[ "$(grep -c "supervisor: client " "$log")" -eq "$accepts" ] ||
	fail "a client with an unusable key connected anyway"
echo "ok: the client refuses a key file others may read: $(grep " rgpu\[" "$tmp/out")"

# the raw cases: a replayed handshake, another tenant's resume token
before=$(loads)
"$build/tests/e2e/auth" replay "$keys" || fail "auth replay"
settle
# the genuine handshake loads the driver once; the two replays never do
[ "$(loads)" -eq $((before + 1)) ] || fail "replay: $(($(loads) - before)) driver loads, want 1"
[ "$(grep -c "wrong answer to the challenge (another key, or a replayed handshake)" "$log")" -ge 3 ] ||
	fail "the replays are not in the server log"
before=$(loads)
"$build/tests/e2e/auth" resume "$keys" || fail "auth resume"
settle
[ "$(loads)" -eq $((before + 1)) ] || fail "resume: $(($(loads) - before)) driver loads, want 1"
grep -q "refused a resume from .*tenant bob: it comes from another tenant than the job's" "$log" ||
	fail "bob's refused resume is not in the server log"
# the admin protocol: the operator key or nothing
"$ctl" status --server "$RGPU_E2E_ADMIN" >"$tmp/st" 2>&1
[ $? -eq 3 ] || fail "rgpuctl status without the operator key did not fail with 3"
grep -q "requires the operator key" "$tmp/st" || fail "status without a key says: $(cat "$tmp/st")"
"$ctl" status --server "$RGPU_E2E_ADMIN" --admin-key "$other/alice.key" >"$tmp/st" 2>&1
[ $? -eq 3 ] || fail "rgpuctl status with a wrong operator key did not fail with 3"
grep -q "authentication failed: not the operator key" "$tmp/st" ||
	fail "status with a wrong key says: $(cat "$tmp/st")"
grep -q "admin client .* refused: authentication failed: not the operator key" "$log" ||
	fail "the refused admin client is not in the log"
"$ctl" status --server "$RGPU_E2E_ADMIN" --admin-key "$admin_key" >"$tmp/st" 2>&1 ||
	fail "rgpuctl status with the operator key: $(cat "$tmp/st")"
grep -q "rgpu simgpu" "$tmp/st" || fail "status: $(cat "$tmp/st")"
echo "ok: rgpuctl status needs the operator key"
# a job names its tenant (RGPU_ADMIN_KEY_FILE, and --admin-key before the command)
"$ctl" run --key "$keys/bob.key" -- "$build/tests/progs/hold" 4 "$tmp/ready" >"$tmp/hold" 2>&1 &
holder=$!
i=0
while [ ! -e "$tmp/ready" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.7 # workers report every 0.5 s
RGPU_ADMIN_KEY_FILE=$admin_key "$ctl" jobs --server "$RGPU_E2E_ADMIN" --json >"$tmp/jobs.json" ||
	fail "jobs with RGPU_ADMIN_KEY_FILE: $(cat "$tmp/jobs.json")"
"$ctl" --admin-key "$admin_key" jobs --server "$RGPU_E2E_ADMIN" >"$tmp/jobs.txt" 2>&1 ||
	fail "rgpuctl --admin-key FILE jobs: $(cat "$tmp/jobs.txt")"
rm -f "$tmp/ready"
wait $holder || fail "hold: $(cat "$tmp/hold")"
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"]
assert len(j) == 1 and j[0]["tenant"] == "bob", j
' "$tmp/jobs.json" || fail "jobs does not name tenant bob: $(cat "$tmp/jobs.json")"
echo "ok: rgpuctl jobs names the tenant"
echo "ok: all authentication cases"
