#!/bin/sh
# The test command: install dependencies, build, run every test (unit and end-to-end on the
# simulated GPU). Extra arguments go to ctest (e.g. -L unit, -R e2e.vecadd).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
