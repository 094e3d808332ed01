#!/bin/bash
# Run every conformance program natively and through rgpu, and compare their result lines
# (testing.md tier 5: outputs are compared with the native run, not only exit codes).
#   tests/conformance/compare.sh [BUILD_DIR] [OUT_DIR]
# BUILD_DIR: a build folder or a GPU bundle (scripts/gpu-bundle.sh) holding bin/rgpud,
# bin/rgpuctl, lib/ and tests/conformance/bin/ (default: ./gpubundle, else ./build).
# Uses the server named by RGPU_SERVER, or starts its own rgpud on the real driver. With
# RGPU_DRY_RUN=1 simgpu plays the driver on both sides, to check this script without a GPU
# (the CUDA runtime cannot run on simgpu without rgpu, so the native column fails there).
# Prints one row per program:
#   program  native  rgpu  same
# where native and rgpu are PASS, SKIP or FAIL:<exit status>, and same says whether the two
# result lines ("conformance NAME: ...") are equal. Full outputs go to OUT_DIR (default
# /tmp/rgpu-conformance). Exits 1 if any program passes natively and not identically through
# rgpu, 0 otherwise.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${1:-gpubundle}
[ -d "$B" ] || B=build
OUT=${2:-/tmp/rgpu-conformance}
mkdir -p "$OUT"
BIN="$B/tests/conformance/bin"
[ -d "$BIN" ] || { echo "compare.sh: no $BIN"; exit 2; }

srv=""
if [ -z "${RGPU_SERVER:-}" ]; then
	driver=()
	[ "${RGPU_DRY_RUN:-0}" = 1 ] && driver=(--driver "$B/lib/simgpu/libcuda.so.1")
	rm -f "$OUT/port"
	"$B/bin/rgpud" --listen 127.0.0.1:0 --port-file "$OUT/port" --state-dir "$OUT/state" \
		"${driver[@]}" --log-level info 2>"$OUT/rgpud.log" &
	srv=$!
	trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
	for _ in $(seq 100); do [ -s "$OUT/port" ] && break; sleep 0.1; done
	[ -s "$OUT/port" ] || { echo "compare.sh: rgpud did not start"; cat "$OUT/rgpud.log"; exit 2; }
	RGPU_SERVER=127.0.0.1:$(cat "$OUT/port")
	export RGPU_SERVER
fi
if [ "${RGPU_DRY_RUN:-0}" = 1 ]; then
	LD_LIBRARY_PATH=$(realpath "$B/lib/simgpu")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export LD_LIBRARY_PATH
fi

status() { # exit status, output file -> PASS / SKIP / FAIL:n
	if [ "$1" = 0 ] && grep -q '^conformance .*: PASS' "$2"; then echo PASS
	elif [ "$1" = 77 ]; then echo SKIP
	else echo "FAIL:$1"; fi
}

bad=0
printf '%-26s %-8s %-8s %s\n' program native rgpu same
for p in $(find "$BIN" -maxdepth 1 -type f -perm -u+x -printf '%f\n' | sort); do
	timeout 300 "$BIN/$p" >"$OUT/$p.native.out" 2>"$OUT/$p.native.err"
	rn=$?
	RGPU_LOG=warn RGPU_LOG_FILE="$OUT/$p.rgpu.ilog" timeout 300 "$B/bin/rgpuctl" run -- "$BIN/$p" \
		>"$OUT/$p.rgpu.out" 2>"$OUT/$p.rgpu.err"
	rr=$?
	sn=$(status $rn "$OUT/$p.native.out")
	sr=$(status $rr "$OUT/$p.rgpu.out")
	ln=$(grep '^conformance ' "$OUT/$p.native.out")
	lr=$(grep '^conformance ' "$OUT/$p.rgpu.out")
	same=no
	[ -n "$ln" ] && [ "$ln" = "$lr" ] && same=yes
	printf '%-26s %-8s %-8s %s\n' "$p" "$sn" "$sr" "$same"
	if [ "$sn" = PASS ] && { [ "$sr" != PASS ] || [ $same != yes ]; }; then
		bad=1
	fi
done
exit $bad
