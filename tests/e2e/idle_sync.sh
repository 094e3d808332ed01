#!/bin/bash
# Synchronizations answered by the client (issue 14, server/exec.c "Whether a context is
# idle"): tests/progs/idlesync over shared memory calls cuCtxSynchronize 64 times and
# cuStreamSynchronize 21 times, most of them right after a synchronous copy whose reply said
# the context was idle. It must pass (its syncs still wait for other streams), and the worker
# must have received only the synchronizations that could not be answered so: its debug log
# names every frame it runs. With RGPU_IDLE_SYNC=0 every one reaches the worker (so this test
# can fail).   idle_sync.sh BUILD
set -u
build=$1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# syncs [ENV=VALUE...]: runs idlesync; sets ctx and str, the synchronizations the worker ran
syncs() {
	: >"$log"
	env "$@" RGPU_TRANSPORT=shm RGPUD_ARGS="--log-level debug" RGPU_E2E_LOG=$log \
		"$(dirname "$0")/with_server.sh" "$build" "$build/tests/progs/idlesync" || exit 1
	ctx=$(grep -c "MSG_CTX_SYNC seq" "$log")
	str=$(grep -c "MSG_STREAM_SYNC seq" "$log")
}
syncs
echo "idle_sync: the worker ran $ctx of 64 cuCtxSynchronize and $str of 21 cuStreamSynchronize"
# each of the program's five phases needs at most one; a few more are the interposer's own
if [ "$ctx" -gt 8 ] || [ "$str" -gt 2 ]; then
	echo "idle_sync: synchronizations after an idle reply still went to the worker"
	exit 1
fi
if [ "$ctx" -lt 3 ]; then
	echo "idle_sync: fewer synchronizations than the phases that must wait reached the worker"
	exit 1
fi
syncs RGPU_IDLE_SYNC=0 >/dev/null
echo "idle_sync: with RGPU_IDLE_SYNC=0, $ctx and $str"
if [ "$ctx" -lt 64 ] || [ "$str" -lt 21 ]; then
	echo "idle_sync: RGPU_IDLE_SYNC=0 still left synchronizations out"
	exit 1
fi
