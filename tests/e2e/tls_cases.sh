#!/bin/sh
# The session cases of tls.sh, run under with_server.sh against rgpud --tls-cert --keys
# --admin-key (with_tls.sh and with_keys.sh set RGPU_TLS_CA, RGPU_E2E_TLS_DIR, RGPU_KEY_FILE).
#   tls_cases.sh BUILD_DIR ADMIN_KEY
set -u
build=$1 admin_key=$2
ctl=$build/bin/rgpuctl
log=$RGPU_E2E_LOGFILE
vecadd=$build/tests/progs/vecadd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- rgpud log"; tail -n 30 "$log"; exit 1; }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# through TLS, with the tenant key: vecadd checks every element of its result
"$vecadd" >"$tmp/out" 2>&1 || fail "vecadd over TLS: $(cat "$tmp/out")"
grep -q "vecadd: 1048576 elements OK" "$tmp/out" || fail "vecadd's result: $(cat "$tmp/out")"
echo "ok: vecadd over TLS with a tenant key: $(cat "$tmp/out")"

# a refused client: exit 1 from vecadd's CHECK(cuInit) with CUDA error $2, exactly one line
# from the interposer matching $3, the server's line $4, within 3 s
refused() {
	what=$1 cuda=$2 client_says=$3 server_says=$4
	shift 4
	t0=$(date +%s%N)
	env "$@" "$vecadd" >"$tmp/out" 2>&1
	rc=$?
	took=$(ms "$t0")
	sleep 0.3 # the worker writes its line just before it exits
	[ $rc -eq 1 ] || fail "$what: exit $rc, want 1: $(cat "$tmp/out")"
	grep -q "cuInit.* = $cuda" "$tmp/out" || fail "$what: cuInit: $(cat "$tmp/out")"
	[ "$(grep -c " rgpu\[[0-9]*\] " "$tmp/out")" -eq 1 ] ||
		fail "$what: not one line from the interposer: $(cat "$tmp/out")"
	grep -q "$client_says" "$tmp/out" || fail "$what: the client does not say why: $(cat "$tmp/out")"
	grep -q "$server_says" "$log" || fail "$what: no server line '$server_says'"
	[ "$took" -lt 3000 ] || fail "$what took $took ms"
	echo "ok: $what, in $took ms: $(grep " rgpu\[" "$tmp/out")"
}
refused "a server certificate from another CA" "100 (CUDA_ERROR_NO_DEVICE)" \
	"certificate is not trusted: unable to get local issuer certificate" \
	"TLS handshake failed.*unknown ca" RGPU_TLS_CA="$RGPU_E2E_TLS_DIR/other-ca.pem"
refused "a certificate for another name" "100 (CUDA_ERROR_NO_DEVICE)" \
	"certificate is not trusted: hostname mismatch" "TLS handshake failed.*bad certificate" \
	RGPU_TLS_NAME=gpu.example.org
refused "a plaintext client" "100 (CUDA_ERROR_NO_DEVICE)" \
	"refused the session: this server requires TLS: give the client RGPU_TLS=1" \
	"refused: it did not start TLS, which this server requires" RGPU_TLS=0
# authentication still decides under TLS (its MACs bound to the TLS connection)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/alice.key"
chmod 600 "$tmp/alice.key"
refused "a wrong tenant key under TLS" "800 (CUDA_ERROR_NOT_PERMITTED)" \
	"authentication failed for tenant 'alice'" \
	"tenant 'alice': wrong answer to the challenge (another key, a replayed handshake, or one relayed from another TLS connection)" \
	RGPU_KEY_FILE="$tmp/alice.key"

# the admin protocol over TLS, with the operator key
"$ctl" status --server "$RGPU_E2E_ADMIN" --tls-ca "$RGPU_TLS_CA" --admin-key "$admin_key" \
	--json >"$tmp/st.json" 2>"$tmp/st.err" || fail "rgpuctl status over TLS: $(cat "$tmp/st.err")"
python3 - "$tmp/st.json" "$RGPU_E2E_ADMIN" <<'PY' || fail "status JSON: $(cat "$tmp/st.json")"
import json, sys
s = json.load(open(sys.argv[1]))["servers"]
assert len(s) == 1 and s[0]["server"] == sys.argv[2], s
assert s[0]["gpus"][0]["name"] == "rgpu simgpu", s
assert s[0]["jobs"] == 0, s
PY
echo "ok: rgpuctl status over TLS with the operator key"
# ... and without TLS it is told why
RGPU_TLS_CA= "$ctl" status --server "$RGPU_E2E_ADMIN" --admin-key "$admin_key" \
	>"$tmp/st.out" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "rgpuctl status without TLS against a TLS server: exit $rc, want 3"
grep -q "refused: this server requires TLS" "$tmp/st.out" || fail "$(cat "$tmp/st.out")"
grep -q "admin client .* refused: it did not start TLS" "$log" || fail "no admin refusal line"
echo "ok: rgpuctl status without TLS: $(cat "$tmp/st.out")"
# ... RGPU_TLS=0 turns it off though RGPU_TLS_CA is set, as for the interposer
RGPU_TLS=0 "$ctl" status --server "$RGPU_E2E_ADMIN" --admin-key "$admin_key" >"$tmp/st.out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "refused: this server requires TLS" "$tmp/st.out" ||
	fail "rgpuctl status with RGPU_TLS=0 and RGPU_TLS_CA: exit $rc, $(cat "$tmp/st.out")"
RGPU_TLS=yes "$ctl" status --server "$RGPU_E2E_ADMIN" >"$tmp/st.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "RGPU_TLS='yes': want 1 (TLS) or 0 (none)" "$tmp/st.out" ||
	fail "rgpuctl status with RGPU_TLS=yes: exit $rc, $(cat "$tmp/st.out")"
echo "ok: RGPU_TLS=0 turns rgpuctl's TLS off; RGPU_TLS=yes is refused"
# ... and with the wrong CA
"$ctl" status --server "$RGPU_E2E_ADMIN" --tls-ca "$RGPU_E2E_TLS_DIR/other-ca.pem" \
	--admin-key "$admin_key" >"$tmp/st.out" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "rgpuctl status with another CA: exit $rc, want 3"
grep -q "certificate is not trusted: unable to get local issuer certificate" "$tmp/st.out" ||
	fail "$(cat "$tmp/st.out")"
echo "ok: rgpuctl status with another CA: $(cat "$tmp/st.out")"
