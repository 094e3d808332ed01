#!/bin/bash
# Every refusal logs: refusals.c makes four calls rgpu refuses itself (not the driver), through a
# server whose device address window is 4 GiB; each must return the expected error and leave
# its line in the client's log.   refusals.sh BUILD
set -u
build=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RGPUD_ARGS="--window 0x200000000000:4G" "$(dirname "$0")/with_server.sh" "$build" \
	"$build/tests/e2e/refusals" >"$out" 2>&1 || { cat "$out"; exit 1; }
fail=0
# expect WHAT PATTERN: a line of the output matches PATTERN (grep -E)
expect() {
	if grep -Eq "$2" "$out"; then
		echo "ok: $1: $(grep -E "$2" "$out" | head -n 1)"
	else
		echo "FAIL: $1: no line matches: $2"
		fail=1
	fi
}
expect "host pool result" "^host pool: CUDA_ERROR_NOT_SUPPORTED$"
expect "host pool log" "rgpu\[[0-9]+\] warn: .*refused: cuMemPoolCreate of host memory: "
expect "stack result" "^push at depth 64: CUDA_ERROR_OUT_OF_MEMORY$"
expect "stack log" "refused: cuCtxPushCurrent: this thread's context stack already holds 64 contexts"
expect "attributes result" "^33 attributes: CUDA_ERROR_INVALID_VALUE$"
expect "attributes log" "refused: a launch with 33 attributes: rgpu carries at most 32"
expect "window result" "^5 GiB allocation: CUDA_ERROR_OUT_OF_MEMORY$"
expect "window log" "a device allocation of 5368709120 bytes: CUDA_ERROR_OUT_OF_MEMORY, the device address window \(4 GiB"
expect "end" "^refusals: done$"
[ $fail = 0 ] || { echo "--- output"; cat "$out"; }
exit $fail
