#!/bin/sh
# No server: a program must fail fast with a clear message, not hang.
#   unreachable.sh BUILD_DIR
set -u
build=$1
start=$(date +%s)
out=$(RGPU_SERVER=127.0.0.1:1 timeout 20 "$build/bin/rgpuctl" run -- "$build/tests/progs/vecadd" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: exit status $rc"; exit 1; }
[ $elapsed -lt 10 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
echo "$out" | grep -q "cannot reach the GPU server 127.0.0.1:1" || { echo "FAIL: no clear message"; exit 1; }
echo "$out" | grep -q "CUDA_ERROR_NO_DEVICE" || { echo "FAIL: cuInit did not return CUDA_ERROR_NO_DEVICE"; exit 1; }
echo "unreachable: failed in ${elapsed}s with a clear message"
