#!/bin/sh
# The cost of TLS, from one run: the same benchmark (tests/bench/bench.c) through rgpu against
# two private rgpud on loopback, one plaintext and one with TLS 1.3, and the results side by
# side with their ratio. The certificate is a throw-away one (tests/e2e/with_tls.sh, which
# needs the openssl command).
#   tls_compare.sh BUILD_DIR [TESTS...]     TESTS: rtt launch bw (default: all three)
# RGPU_E2E_DRIVER: the driver the servers load (default simgpu; "system": the real one, on a
# GPU host). RGPU_BENCH_JSON=FILE also writes the table as JSON.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${RGPU_E2E_TLS_DIR:-}" ]; then
	[ $# -ge 1 ] || { echo "usage: tls_compare.sh BUILD_DIR [rtt|launch|bw]..." >&2; exit 2; }
	exec "$here/../e2e/with_tls.sh" "" "$0" "$@"
fi
build=$1
shift
[ $# -gt 0 ] || set -- rtt launch bw
tmp=$(mktemp -d)
driver=${RGPU_E2E_DRIVER:-$build/lib/simgpu/libcuda.so.1}
[ "$driver" = system ] && driver=""
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

start() { # name, extra rgpud options...
	name=$1
	shift
	"$build/bin/rgpud" --listen 127.0.0.1:0 --port-file "$tmp/$name.port" --admin none \
		${driver:+--driver "$driver"} --state-dir "$tmp/state-$name" "$@" \
		2>"$tmp/$name.log" &
	pids="$pids $!"
	i=0
	while [ ! -s "$tmp/$name.port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ -s "$tmp/$name.port" ] || { echo "rgpud ($name) did not start:"; cat "$tmp/$name.log"; exit 1; }
}
# shellcheck disable=SC2086 # RGPUD_ARGS (with_tls.sh) is a list of options
start tls $RGPUD_ARGS
start plain

# plaintext first, then TLS, each its own process (RGPU_TLS=0: the plain one ignores the CA)
RGPU_TLS=0 "$build/bin/rgpuctl" run --server "127.0.0.1:$(cat "$tmp/plain.port")" -- \
	"$build/tests/progs/bench" "$@" >"$tmp/plain.out" || { echo "bench (plain) failed"; exit 1; }
"$build/bin/rgpuctl" run --server "127.0.0.1:$(cat "$tmp/tls.port")" --tls-ca "$RGPU_TLS_CA" \
	-- "$build/tests/progs/bench" "$@" >"$tmp/tls.out" || { echo "bench (TLS) failed"; exit 1; }
grep -q "TLS 1.3 on the client" "$tmp/tls.log" || { echo "the TLS server has no TLS?"; exit 1; }

python3 - "$tmp/plain.out" "$tmp/tls.out" "${RGPU_BENCH_JSON:-}" <<'PY'
import json, sys
def load(p):
    d = {}
    for line in open(p):
        f = line.split()
        if len(f) == 3:
            d[f[0]] = (float(f[1]), f[2])
    return d
plain, tls = load(sys.argv[1]), load(sys.argv[2])
rows = []
print("%-22s %14s %14s %8s" % ("metric", "plaintext", "TLS 1.3", "TLS/plain"))
for k, (v, unit) in plain.items():
    if k not in tls:
        continue
    t = tls[k][0]
    r = t / v if v else float("nan")
    rows.append({"metric": k, "unit": unit, "plain": v, "tls": t, "ratio": r})
    print("%-22s %10.3f %-3s %10.3f %-3s %8.3f" % (k, v, unit[:3], t, unit[:3], r))
if sys.argv[3]:
    json.dump(rows, open(sys.argv[3], "w"), indent=1)
PY
