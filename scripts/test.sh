#!/bin/sh
# The test command: install dependencies, then run each part of the suite in turn:
#   plain     build in $BUILD_DIR (default build) and run every test (unit and end-to-end on
#             the simulated GPU)
#   fuzz      build the fuzz harnesses with clang, libFuzzer, ASan and UBSan ($FUZZ_BUILD_DIR,
#             default build-fuzz) and replay every checked-in corpus (scripts/fuzz.sh --replay)
#   sanitize  build everything with RGPU_SANITIZE=address,undefined in $SAN_BUILD_DIR (default
#             build-san) and run the whole suite again; any report aborts its test
# RGPU_TEST_PARTS picks the parts (default "plain fuzz sanitize"). Extra arguments go to ctest
# in the plain and sanitize parts (e.g. -L unit, -R e2e.vecadd). Each part's time is printed.
set -eu
cd "$(dirname "$0")/.."
parts=${RGPU_TEST_PARTS:-plain fuzz sanitize}
scripts/install-deps.sh
status=0
times=""
for part in $parts; do
	start=$(date +%s)
	case $part in
	plain)
		scripts/build.sh
		(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" "$@") || status=1
		;;
	fuzz)
		scripts/fuzz.sh --replay || status=1
		;;
	sanitize)
		BUILD_DIR=${SAN_BUILD_DIR:-build-san} \
			CMAKE_ARGS="${CMAKE_ARGS:-} -DRGPU_SANITIZE=address,undefined" scripts/build.sh
		(cd "${SAN_BUILD_DIR:-build-san}" && ctest --output-on-failure -j"$(nproc)" "$@") ||
			status=1
		;;
	*)
		echo "test.sh: unknown part '$part' (parts: plain fuzz sanitize)" >&2
		exit 2
		;;
	esac
	times="$times $part $(($(date +%s) - start))s"
	echo "test.sh: part $part done after $(($(date +%s) - start)) s (status so far: $status)"
done
echo "test.sh: times:$times; $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
