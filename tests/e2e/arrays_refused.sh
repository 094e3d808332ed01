#!/bin/sh
# A job that holds a CUDA array cannot be checkpointed or migrated yet (an array's contents live
# outside the window, where a checkpoint does not look): arrays_refused.sh BUILD
#
# tests/progs/hold holds device memory, an array and a texture object on server A. A checkpoint,
# a cold migration and a live migration to B are each refused with the reason, nothing is left
# on B, and the job runs on on A: the program then checks every byte it held, array included.
# Then its dumped state log (RGPU_STATE_DUMP) replays on a fresh worker, and fails, naming both
# values, when that worker's driver gives its texture object another value (SIMGPU_TEXOBJ_SKEW):
# what a restore or a migration of such a job would meet (design.md §3).
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

mkdir -p "$tmp/dump"
srv_start A RGPU_STATE_DUMP="$tmp/dump"
srv_start B
A=$(srv_admin A)
B=$(srv_admin B)

"$ctl" run --server "127.0.0.1:$(srv_port A)" -- "$build/tests/progs/hold" 4 "$tmp/ready" array \
	>"$tmp/hold.out" 2>&1 &
holder=$!
i=0
while [ ! -e "$tmp/ready" ] && [ $i -lt 600 ]; do
	kill -0 $holder 2>/dev/null || fail "hold ended early: $(cat "$tmp/hold.out")"
	sleep 0.05
	i=$((i + 1))
done
[ -e "$tmp/ready" ] || fail "hold never got ready: $(cat "$tmp/hold.out")"
job=$(job_of A)
[ -n "$job" ] || fail "no job on A"

for what in checkpoint cold live; do
	case $what in
	checkpoint) "$ctl" checkpoint "$job" --server "$A" >"$tmp/$what.out" 2>&1 ;;
	cold) "$ctl" migrate "$job" --server "$A" --to "$B" --cold >"$tmp/$what.out" 2>&1 ;;
	live) "$ctl" migrate "$job" --server "$A" --to "$B" >"$tmp/$what.out" 2>&1 ;;
	esac
	[ $? -ne 0 ] || fail "$what of a job with a CUDA array succeeded: $(cat "$tmp/$what.out")"
	grep -q "CUDA arrays" "$tmp/$what.out" || fail "$what refused without the reason: $(cat "$tmp/$what.out")"
	[ "$(job_of A)" = "$job" ] || fail "the job is not on A after the refused $what"
	[ "$(job_of B)" = "" ] || fail "a job was left on B after the refused $what"
	echo "ok: $what refused: $(tail -n 1 "$tmp/$what.out")"
done

rm -f "$tmp/ready"
wait $holder || fail "hold failed after the refusals: $(cat "$tmp/hold.out")"
grep -q "the array held and verified" "$tmp/hold.out" || fail "hold: $(cat "$tmp/hold.out")"
echo "ok: the job ran on and verified its memory and array"

f=$(ls "$tmp"/dump/*.stlog 2>/dev/null | head -n 1)
[ -n "$f" ] || fail "no state log dumped"
# use_tls=0: LeakSanitizer's tracer and rgpud --replay (with_server.sh says why)
lsan=${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0:print_suppressions=0
out=$(LSAN_OPTIONS=$lsan "$build/bin/rgpud" --replay "$f" ${driver:+--driver "$driver"} --state-dir "$tmp/A/data" 2>&1) ||
	fail "the replay failed: $out"
echo "ok: replayed: $out"
if [ "${RGPU_E2E_DRIVER:-}" = system ]; then
	# only simgpu can be made to give another value (SIMGPU_TEXOBJ_SKEW); the H200's driver
	# gave the same value in a fresh process (above)
	echo "arrays_refused: all checks passed (the other-value replay needs simgpu: not run)"
	exit 0
fi
out=$(LSAN_OPTIONS=$lsan SIMGPU_TEXOBJ_SKEW=7 "$build/bin/rgpud" --replay "$f" ${driver:+--driver "$driver"} \
	--state-dir "$tmp/A/data" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a replay whose texture object got another value: exit $rc, want 1: $out"
echo "$out" | grep -q "cannot be placed" || fail "the replay failed without the reason: $out"
echo "ok: a texture object given another value fails the replay: $(echo "$out" | tail -n 1 | cut -c1-160)"
echo "arrays_refused: all checks passed"
