#!/bin/sh
# Migrations between two rgpud servers that speak TLS to their clients, their operators and
# each other (--tls-cert/--tls-key, --peer-tls-ca), on simgpu:   migrate_tls.sh BUILD
# Run under with_tls.sh, which makes the test CA and the servers' certificate
# ($RGPU_E2E_TLS_DIR) and points clients and rgpuctl at the CA (RGPU_TLS_CA).
#
# A zdtm program moves live A -> B and cold B -> A, checking every byte and handle after each
# move; then a target that stops reading mid-push (RGPU_FAULT=push_stall, 120 s) fails a cold
# and a live migration within 20 s at --frame-timeout 2, over TLS as over TCP (the send
# deadline and the live push's answer deadline), and the job runs on.
set -u
build=$(realpath "$1")
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
d=${RGPU_E2E_TLS_DIR:?run under with_tls.sh}
tls="--tls-cert $d/srv.pem --tls-key $d/srv.key --peer-tls-ca $d/ca.pem"

# shellcheck disable=SC2086 # tls is a list of options
srv_start A -- --resume-grace 30 --frame-timeout 2 $tls
# shellcheck disable=SC2086
srv_start B -- --resume-grace 30 $tls
A=$(srv_admin A)
B=$(srv_admin B)

zdtm_start A zdtm_mixed 3
zdtm_wait_ready 1
job=$(job_of A)
[ -n "$job" ] || fail "no job on A"
"$ctl" migrate "$job" --server "$A" --to "$B" --json >"$tmp/m1.json" ||
	fail "live migration A -> B over TLS: $(cat "$tmp/m1.json")"
[ "$(job_of B)" = "$job" ] || fail "the job is not on B after its live migration"
[ "$(job_of A)" = "" ] || fail "the job still runs on A after its live migration"
zdtm_go
zdtm_wait_ready 2
"$ctl" migrate "$job" --server "$B" --to "$A" --cold --json >"$tmp/m2.json" ||
	fail "cold migration B -> A over TLS: $(cat "$tmp/m2.json")"
[ "$(job_of A)" = "$job" ] || fail "the job is not back on A"
zdtm_go
zdtm_wait_ready 3
zdtm_go
zdtm_finish 3
echo "ok: zdtm_mixed moved live A -> B and cold B -> A over TLS, every check passing"

# a target that stops reading, over TLS
# shellcheck disable=SC2086
srv_start C RGPU_FAULT=push_stall -- $tls
C=$(srv_admin C)
stalled_target A "$C" --cold "timed out"
stalled_target A "$C" live "no answer in time"
