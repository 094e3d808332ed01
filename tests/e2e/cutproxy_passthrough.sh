#!/bin/sh
# cutproxy with no cuts in front of rgpud: small calls, host callbacks and 256 MiB copies each
# way must pass through unchanged (with_cuts.sh with CUTS 0 makes one uncut run and checks it).
#   cutproxy_passthrough.sh BUILD_DIR
set -u
build=$1
cuts=$(dirname "$0")/with_cuts.sh
progs=$build/tests/progs
# no cut, so no resume: rgpud needs no grace period
export RGPUD_ARGS=
"$cuts" "$build" 0 "$progs/vecadd" || { echo "FAIL: vecadd through cutproxy"; exit 1; }
"$cuts" "$build" 0 "$progs/callbacks" || { echo "FAIL: callbacks through cutproxy"; exit 1; }
"$cuts" "$build" 0 "$progs/bigcopy" 256 || { echo "FAIL: bigcopy 256 through cutproxy"; exit 1; }
echo "cutproxy_passthrough: vecadd, callbacks and bigcopy 256 MiB passed through cutproxy"
