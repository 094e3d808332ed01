#!/bin/bash
# Copies over TCP are cut at the worker's staging buffers' size (HelloReply.staging_size,
# 16 MiB; issue 14): bigcopy 64 over TCP makes its worker run 9 MSG_MEMCPY_HTOD frames (two
# 64 MiB copies in 16 MiB chunks and one small one), where 4 MiB chunks made 34. The worker's
# debug log names every frame it runs.   tcp_chunks.sh BUILD
set -u
build=$1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
RGPU_TRANSPORT=tcp RGPUD_ARGS="--log-level debug" RGPU_E2E_LOG=$log \
	"$(dirname "$0")/with_server.sh" "$build" "$build/tests/progs/bigcopy" 64 || exit 1
n=$(grep -c "MSG_MEMCPY_HTOD seq" "$log")
echo "tcp_chunks: $n host-to-device frames for bigcopy 64"
[ "$n" -le 12 ] || { echo "tcp_chunks: copies were not cut at 16 MiB"; exit 1; }
