#!/bin/sh
# A well-behaved client never meets the worker's queue bound (issue 8, item 2). Run by
# with_server.sh with rgpud --max-queued 16M: the handshake tells the interposer the bound, it
# keeps no more than that unexecuted (RGPU_UNACKED_MAX lowered from 64M), so 64 MiB copies and
# host functions run through with every result checked, and the worker never stops reading.
set -u
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for prog in "bigcopy 64" callbacks; do
	# shellcheck disable=SC2086 # a program and its arguments
	RGPU_LOG=info RGPU_LOG_FILE=$tmp/client.log "$build"/tests/progs/$prog >"$tmp/out" 2>&1 ||
		fail "$prog: $(cat "$tmp/out")"
done
n=$(grep -c "RGPU_UNACKED_MAX lowered to 16777216 bytes, the GPU server's queue bound" \
	"$tmp/client.log")
[ "$n" = 2 ] || fail "the bound lowered in $n of 2 sessions: $(cat "$tmp/client.log")"
if grep "paused until it catches up" "$RGPU_E2E_LOGFILE"; then
	fail "the worker stopped reading from a well-behaved client"
fi
echo "queue_bound: 2 sessions within the server's 16 MiB bound, the worker never paused"
