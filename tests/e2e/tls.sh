#!/bin/sh
# TLS end to end (docs/operator-guide.md, "TLS"):
#   - rgpud refuses to start beyond loopback without TLS (unless --insecure), and on
#     inconsistent or unusable TLS options, each with a clear error;
#   - a TLS client meeting a plaintext rgpud fails at once, with one line on each side;
#   - then, against rgpud --tls-cert --keys --admin-key (with_tls.sh, with_keys.sh,
#     with_server.sh, tls_cases.sh): vecadd through TLS; a wrong CA, a wrong name and a
#     plaintext client refused at once; a wrong key refused under TLS; rgpuctl status over TLS;
#   - a program whose connection is cut 4 times under TLS and keys: each resume goes through the
#     worker that took it, which relays (its TLS state cannot move to the job's worker).
#   tls.sh BUILD_DIR
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rgpud=$build/bin/rgpud
vecadd=$build/tests/progs/vecadd
keys=$tmp/keys
mkdir -m 700 "$keys"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$keys/alice.key"
chmod 600 "$keys/alice.key"

# ---- start-up refusals ---------------------------------------------------------------------
refuse() { # what, want (grep pattern), rgpud options...
	what=$1 want=$2
	shift 2
	"$rgpud" --admin none "$@" >"$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "$what: rgpud exited $rc, want 2: $(cat "$tmp/out")"
	grep -q -e "$want" "$tmp/out" || fail "$what: no clear error: $(cat "$tmp/out")"
	echo "ok: $what: $(grep -v " info: " "$tmp/out")"
}
refuse "0.0.0.0 with keys but no TLS" \
	"refusing to serve the client port on 0.0.0.0 in the clear.*--tls-cert FILE --tls-key FILE.*--insecure" \
	--listen 0.0.0.0:0 --keys "$keys"
refuse "--tls without a certificate" "--tls needs a certificate" --tls
refuse "--tls-cert without --tls-key" "--tls-cert and --tls-key go together" \
	--tls-cert /nonexistent.pem
refuse "--no-tls with a certificate" "--no-tls contradicts" --no-tls --tls-cert a --tls-key b
printf 'not a certificate\n' >"$tmp/bad.pem"
refuse "an unreadable certificate" "TLS: cannot use the certificate $tmp/bad.pem" \
	--tls-cert "$tmp/bad.pem" --tls-key "$tmp/bad.pem"

# ---- a TLS client and a plaintext server ---------------------------------------------------
"$rgpud" --listen 127.0.0.1:0 --admin none --port-file "$tmp/p1" --state-dir "$tmp/state" \
	--driver "$build/lib/simgpu/libcuda.so.1" >"$tmp/srv1" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/p1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
t0=$(date +%s%N)
RGPU_TLS=1 "$build/bin/rgpuctl" run --server "127.0.0.1:$(cat "$tmp/p1")" -- "$vecadd" \
	>"$tmp/out" 2>&1
rc=$?
t1=$(date +%s%N)
sleep 0.2
kill $pid; wait $pid 2>/dev/null
[ $rc -eq 1 ] || fail "a TLS client against a plaintext server: exit $rc: $(cat "$tmp/out")"
grep -q "no TLS with the GPU server.*the server has TLS off (start it with rgpud --tls-cert FILE" \
	"$tmp/out" || fail "the TLS client does not say why: $(cat "$tmp/out")"
[ "$(grep -c " rgpu\[[0-9]*\] " "$tmp/out")" -eq 1 ] || fail "not one line: $(cat "$tmp/out")"
grep -q "starts TLS, but this server has TLS off" "$tmp/srv1" ||
	fail "the plaintext server does not say why: $(cat "$tmp/srv1")"
ms=$(((t1 - t0) / 1000000))
[ $ms -lt 3000 ] || fail "a TLS client against a plaintext server took $ms ms"
echo "ok: a TLS client against a plaintext server fails in $ms ms: $(grep " rgpu\[" "$tmp/out")"

# ---- sessions: TLS, keys and the operator key together --------------------------------------
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/admin.key"
chmod 600 "$tmp/admin.key"
SIMGPU_LOG=1 "$here/with_tls.sh" "--admin-key $tmp/admin.key" "$here/with_keys.sh" "" \
	"$here/with_server.sh" "$build" "$here/tls_cases.sh" "$build" "$tmp/admin.key" ||
	fail "the TLS session cases"

# ---- resumes under TLS (and keys): relayed by the worker that took them ----------------------
RGPU_CUT_MAX_RUNS=30 "$here/with_tls.sh" "--resume-grace 5 --max-sessions 0" \
	"$here/with_keys.sh" "" "$here/with_cuts.sh" "$build" 4 "$vecadd" >"$tmp/cuts" 2>&1 ||
	fail "vecadd cut under TLS: $(cat "$tmp/cuts")"
grep "^cuts=" "$tmp/cuts"
echo "ok: vecadd cut 4 times under TLS and keys, every run passed"
echo "PASS"
