#!/bin/sh
# The fuzz harnesses (tests/fuzz; docs/testing.md, "Fuzzing"), built with clang, libFuzzer,
# AddressSanitizer and UBSan (any report aborts) in $FUZZ_BUILD_DIR (default build-fuzz).
#
#   scripts/fuzz.sh --replay             replay every checked-in corpus once (what CI runs)
#   scripts/fuzz.sh [FLAGS...] [NAME...]  fuzz each harness named (default: all) in turn;
#                                         FLAGS go to libFuzzer (default -runs=10000000)
#
# A long run starts from tests/fuzz/corpus/NAME and keeps what it finds new in
# $FUZZ_BUILD_DIR/fuzz-work/NAME (never in the checked-in corpus). A crash, a report or a failed
# check stops that harness and leaves the input in $FUZZ_BUILD_DIR/fuzz-artifacts/; the
# script goes on with the next harness, prints one line per harness (runs, executions per
# second, result) and exits 1 if any failed. Examples:
#   scripts/fuzz.sh -runs=1000000 frame msg
#   scripts/fuzz.sh -max_total_time=600 statelog
#   scripts/fuzz.sh -runs=10000000 -fork=2 image   (libFuzzer's own parallel mode)
set -eu
cd "$(dirname "$0")/.."
src=$(pwd)
dir=${FUZZ_BUILD_DIR:-build-fuzz}
all="frame msg image statelog store"

replay=0
flags=""
names=""
for a in "$@"; do
	case $a in
	--replay) replay=1 ;;
	-*) flags="$flags $a" ;;
	*) names="$names $a" ;;
	esac
done
names=${names:-$all}
case $flags in *-runs=* | *-max_total_time=*) ;; *) flags="$flags -runs=10000000" ;; esac
for n in $names; do
	case " $all " in *" $n "*) ;; *) echo "fuzz.sh: no harness '$n' (harnesses: $all)" >&2; exit 2 ;; esac
done

if ! command -v clang >/dev/null; then
	echo "fuzz.sh: clang is not installed (scripts/install-deps.sh installs it)" >&2
	exit 1
fi
# the harnesses only: the nvcc programs and the cut tests are not needed here
CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRGPU_FUZZ=ON \
	-DRGPU_SANITIZE=address,undefined -DRGPU_BUILD_CUDA_TESTS=OFF -DRGPU_CUT_TESTS=OFF \
	${CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" --target fuzzers -j"$(nproc)"

if [ $replay = 1 ]; then
	cd "$dir"
	exec ctest --output-on-failure -L fuzz
fi

mkdir -p "$dir/fuzz-artifacts"
failed=0
summary=""
for n in $names; do
	work=$dir/fuzz-work/$n
	log=$dir/fuzz-work/$n.log
	mkdir -p "$work"
	echo "fuzz.sh: $n:$flags (log: $log)"
	# shellcheck disable=SC2086 # flags is a list of libFuzzer flags
	if "$dir/tests/fuzz/fuzz_$n" $flags -print_final_stats=1 \
		-artifact_prefix="$src/$dir/fuzz-artifacts/$n-" "$work" "tests/fuzz/corpus/$n" \
		>"$log" 2>&1; then
		result="0 crashes, 0 reports"
	else
		result="FAILED: $(grep -m1 -E 'ERROR|runtime error|fuzz check failed|deadly signal' "$log" || tail -n 1 "$log")"
		failed=1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	line="$n: ${runs:-?} runs, ${rate:-?} exec/s, $result"
	echo "fuzz.sh: $line"
	summary="$summary$line
"
done
echo "fuzz.sh: summary (flags:$flags)"
printf '%s' "$summary"
exit $failed
