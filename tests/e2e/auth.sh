#!/bin/sh
# Authentication end to end (docs/operator-guide.md, "Authentication"):
#   - rgpud refuses to start on a non-loopback address without --keys (unless --insecure), and
#     on a key directory holding a group-readable key;
#   - a client with a key refuses a server that does not prove it holds it (mutual);
#   - a client that never answers the challenge is cut at --hello-timeout; a malformed answer
#     is a protocol error; neither loads the driver;
#   - then, against an rgpud with --keys (run through with_server.sh, auth_cases.sh): a right
#     key runs vecadd; a wrong key, no key and an unknown tenant are refused before any CUDA
#     call; a replayed handshake and another tenant's resume are refused (tests/e2e/auth.c);
#     rgpuctl status/jobs need the operator key (--admin-key), and jobs name their tenant.
#   auth.sh BUILD_DIR
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rgpud=$build/bin/rgpud

# ---- start-up refusals ---------------------------------------------------------------------
"$rgpud" --listen 0.0.0.0:0 --admin none >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "rgpud on 0.0.0.0 without --keys exited $rc, want 2: $(cat "$tmp/out")"
grep -q "refusing to serve the client port on 0.0.0.0 without authentication.*--insecure" \
	"$tmp/out" || fail "no clear refusal: $(cat "$tmp/out")"
echo "ok: rgpud refuses 0.0.0.0 without --keys: $(cat "$tmp/out")"

# --insecure: it serves (and warns)
"$rgpud" --listen 0.0.0.0:0 --admin none --insecure --port-file "$tmp/p1" >"$tmp/out" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/p1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill $pid; wait $pid 2>/dev/null
[ -s "$tmp/p1" ] || fail "rgpud --insecure did not listen: $(cat "$tmp/out")"
grep -q "without authentication (--insecure)" "$tmp/out" || fail "no warning: $(cat "$tmp/out")"
echo "ok: --insecure serves 0.0.0.0, with a warning"

keys=$tmp/keys
mkdir -p "$keys" "$tmp/other"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$keys/alice.key"   # hex
head -c 48 /dev/urandom >"$keys/bob.key"                                  # raw bytes
chmod 600 "$keys/alice.key" "$keys/bob.key"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/other/alice.key"  # a wrong key
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/other/carol.key"  # no such tenant
chmod 600 "$tmp/other/alice.key" "$tmp/other/carol.key"

# --keys: 0.0.0.0 is allowed as far as authentication goes (beyond loopback TLS is required
# too, or --insecure: tls.sh tests that)
"$rgpud" --listen 0.0.0.0:0 --admin none --keys "$keys" --insecure --port-file "$tmp/p2" \
	>"$tmp/out" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/p2" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill $pid; wait $pid 2>/dev/null
[ -s "$tmp/p2" ] || fail "rgpud --keys on 0.0.0.0 did not listen: $(cat "$tmp/out")"
grep -q "2 tenant key(s)" "$tmp/out" || fail "keys not counted: $(cat "$tmp/out")"
echo "ok: --keys serves 0.0.0.0"

# a group-readable key: refused at start, naming the file and the fix
cp "$keys/alice.key" "$tmp/other/dave.key"
chmod 640 "$tmp/other/dave.key"
"$rgpud" --listen 127.0.0.1:0 --admin none --keys "$tmp/other" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a group-readable key: rgpud exited $rc, want 2"
grep -q "dave.key is accessible by group or others (mode 0640).*chmod 600" "$tmp/out" ||
	fail "no clear error for a group-readable key: $(cat "$tmp/out")"
echo "ok: a group-readable key file is refused: $(cat "$tmp/out")"
rm -f "$tmp/other/dave.key"

# mutual: a client with a key refuses a server that does not prove it holds the key (here one
# without --keys, as an impostor would be), before its first CUDA call returns
"$rgpud" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --admin-port-file "$tmp/a3" \
	--port-file "$tmp/p3" --driver "$build/lib/simgpu/libcuda.so.1" \
	--state-dir "$tmp/state" >"$tmp/srv3" 2>&1 &
pid=$!
i=0
while { [ ! -s "$tmp/p3" ] || [ ! -s "$tmp/a3" ]; } && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
# ... and rgpuctl with an operator key refuses an admin server that proves nothing
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/admin.key"
chmod 600 "$tmp/admin.key"
"$build/bin/rgpuctl" status --server "127.0.0.1:$(cat "$tmp/a3")" --admin-key "$tmp/admin.key" \
	>"$tmp/st3" 2>&1
rc3=$?
"$build/bin/rgpuctl" run --server "127.0.0.1:$(cat "$tmp/p3")" --key "$keys/alice.key" -- \
	"$build/tests/progs/vecadd" >"$tmp/out" 2>&1
rc=$?
# the job the keyless server made for it is let go at once (a goodbye), not after its grace
i=0
while ! grep -q "job .* ends" "$tmp/srv3" && [ $i -lt 40 ]; do sleep 0.05; i=$((i + 1)); done
kill $pid; wait $pid 2>/dev/null
grep -q "job .* ends" "$tmp/srv3" || fail "the refused server's job did not end: $(cat "$tmp/srv3")"
[ $rc3 -eq 3 ] || fail "rgpuctl with an operator key against a server without: exit $rc3, want 3"
grep -q "did not prove that it holds the operator key (it asked for none" "$tmp/st3" ||
	fail "rgpuctl does not say why: $(cat "$tmp/st3")"
echo "ok: rgpuctl with an operator key refuses a server without one: $(cat "$tmp/st3")"
[ $rc -eq 1 ] || fail "a client with a key against a server without keys exited $rc"
grep -q "did not prove that it holds tenant alice's key (it asked for no authentication" \
	"$tmp/out" || fail "the client does not say why: $(cat "$tmp/out")"
grep -q "cuInit.* = 800 (CUDA_ERROR_NOT_PERMITTED)" "$tmp/out" || fail "$(cat "$tmp/out")"
echo "ok: a client with a key refuses a server that proves nothing: $(grep " rgpu\[" "$tmp/out")"

# a client that never answers the challenge holds its worker only until --hello-timeout; bad
# answers are protocol errors; none of them loads the driver
SIMGPU_LOG=1 "$rgpud" --listen 127.0.0.1:0 --admin none --port-file "$tmp/p4" --keys "$keys" \
	--hello-timeout 1 --driver "$build/lib/simgpu/libcuda.so.1" --state-dir "$tmp/state" \
	>"$tmp/srv4" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/p4" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
t0=$(date +%s)
RGPU_E2E_PORT=$(cat "$tmp/p4") "$build/tests/e2e/auth" hostile
rc=$?
t1=$(date +%s)
sleep 0.2
kill $pid; wait $pid 2>/dev/null
[ $rc -eq 0 ] || fail "auth hostile: $(cat "$tmp/srv4")"
[ $((t1 - t0)) -le 4 ] || fail "auth hostile took $((t1 - t0)) s with --hello-timeout 1"
grep -q "no answer to the authentication challenge within 1 s" "$tmp/srv4" ||
	fail "the silent client is not in the log: $(cat "$tmp/srv4")"
[ "$(grep -c "simgpu: .* device(s)" "$tmp/srv4")" -eq 1 ] ||
	fail "a hostile client's worker loaded the driver: $(cat "$tmp/srv4")"
echo "ok: a silent client is cut at --hello-timeout, bad answers are protocol errors"

# ---- sessions ------------------------------------------------------------------------------
# SIMGPU_LOG: each cuInit of the simulated driver logs "simgpu: N device(s)" to rgpud's log,
# which is how auth_cases.sh sees that a refused client's worker never loaded the driver.
# RGPU_VERIFY_LOG=0: auth.c's raw sessions make no synchronising call to compare logs at.
SIMGPU_LOG=1 RGPUD_ARGS="--keys $keys --admin-key $tmp/admin.key --resume-grace 5" \
	RGPU_VERIFY_LOG=0 "$here/with_server.sh" "$build" "$here/auth_cases.sh" "$build" "$keys" \
	"$tmp/other" "$tmp/admin.key"
