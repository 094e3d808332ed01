#!/bin/sh
# Checkpoints, cold migration and restore of the zdtm state programs (testing.md tier 3) between
# two rgpud servers, A and B, on simgpu (issue 9):   migrate.sh BUILD [PROGRAM...]
#
# Each program (all of tests/zdtm by default) runs through rgpu on A for four rounds. At its
# first READY the job is checkpointed on A and runs on; at the second it is migrated to B, at
# the third back to A, at the fourth checkpointed again (the store must not grow by what did not
# change). After every round the program checks every byte and handle it made, then goes on
# using them; it must end with its OK line. Then: every checkpoint listed verifies; a
# checkpoint is restored on B after its program ended (the job waits there for a client that
# will not come, and is freed); a restore of a running job's checkpoint is refused; and a
# migration that fails at each step leaves the job running on A (the program still passes)
# with no job left on the target; a job whose module images its server does not cache moves.
set -u
build=$(realpath "$1") # absolute: one server starts from another directory
shift
progs=${*:-"memory globals streams events pool graph graphnodes mixed managed arrays"}
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

srv_start A -- --resume-grace 30
# B's driver places module globals elsewhere than A's (as GPUs do: the worker translates)
srv_start B SIMGPU_GLOBALS_SKEW=65536 -- --resume-grace 30
A=$(srv_admin A)
B=$(srv_admin B)

for p in $progs; do
	zdtm_start A "zdtm_$p" 4
	zdtm_wait_ready 1
	job=$(job_of A)
	[ -n "$job" ] || fail "$p: no job on A"
	# 1: a checkpoint; the job runs on on A
	"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c1.json" || fail "$p: checkpoint: $(cat "$tmp/c1.json")"
	[ "$(json "$tmp/c1.json" 'j["chunks"] > 0 and j["pause_ns"] > 0 and j["id"] > 0')" = True ] ||
		fail "$p: checkpoint reply $(cat "$tmp/c1.json")"
	id1=$(json "$tmp/c1.json" 'j["id"]')
	zdtm_go
	# 2: to B
	zdtm_wait_ready 2
	"$ctl" migrate "$job" --server "$A" --to "$B" --cold --json >"$tmp/m1.json" ||
		fail "$p: migrate to B: $(cat "$tmp/m1.json")"
	[ "$(job_of A)" = "" ] || fail "$p: the job still runs on A after its migration"
	[ "$(job_of B)" = "$job" ] || fail "$p: the job is not on B after its migration"
	# a client that resumes the job on A (its link broke during the move) is sent on to B
	RGPU_E2E_PORT=$(srv_port A) "$build/tests/e2e/resume" moved "$job" "127.0.0.1:$(srv_port B)" \
		>"$tmp/moved.out" 2>&1 || fail "$p: resume on A after the move: $(cat "$tmp/moved.out")"
	# B placed the job's module globals elsewhere: every address in them is translated
	if [ "$p" = globals ] && ! grep -q "is now at 0x.*: translated" "$tmp/B/log"; then
		fail "$p: no module global of the job moved on B (SIMGPU_GLOBALS_SKEW)"
	fi
	zdtm_go
	# 3: back to A (only what changed travels: A's store has the rest)
	zdtm_wait_ready 3
	"$ctl" migrate "${job%????????????????}" --server "$B" --to "$A" --cold --json >"$tmp/m2.json" ||
		fail "$p: migrate back to A: $(cat "$tmp/m2.json")"
	[ "$(json "$tmp/m2.json" 'j["job"]')" = "$job" ] || fail "$p: another job came back"
	zdtm_go
	# 4: a checkpoint again
	zdtm_wait_ready 4
	"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c2.json" || fail "$p: second checkpoint"
	zdtm_go
	zdtm_finish 4
	echo "ok: $p: checkpoint, A -> B -> A, checkpoint; $(tail -n 1 "$zout")"
	echo "    $(json "$tmp/m1.json" '"A->B: %d chunks sent, held %.1f ms" % (j["chunks_sent"], j["pause_ns"]/1e6)');" \
		"$(json "$tmp/m2.json" '"B->A: %d chunks sent, held %.1f ms" % (j["chunks_sent"], j["pause_ns"]/1e6)')"
done

# every checkpoint on A verifies; one that is not there is named
"$ctl" checkpoints --server "$A" --json >"$tmp/list.json" || fail "checkpoints"
ids=$(json "$tmp/list.json" '" ".join(str(c["id"]) for c in j["checkpoints"])')
[ -n "$ids" ] || fail "no checkpoint listed on A"
for id in $ids; do
	"$ctl" checkpoint verify "$id" --server "$A" >"$tmp/v.out" 2>&1 || fail "verify $id: $(cat "$tmp/v.out")"
done
echo "ok: $(echo "$ids" | wc -w) checkpoints on A verified"
"$ctl" checkpoint verify 999999 --server "$A" >/dev/null 2>&1
[ $? -eq 4 ] || fail "verify of a checkpoint that does not exist: want exit 4"

# a restore of the first checkpoint on B, its program long gone: the job waits there
"$ctl" restore "$id1" --server "$A" --to "$B" --json >"$tmp/r.json" || fail "restore: $(cat "$tmp/r.json")"
rjob=$(json "$tmp/r.json" 'j["job"]')
"$ctl" jobs --server "$B" --json >"$tmp/jobs.json"
[ "$(json "$tmp/jobs.json" '[x["state"] for x in j["jobs"] if x["job"] == "'"$rjob"'"]')" = "['disconnected']" ] ||
	fail "the restored job is not waiting on B: $(cat "$tmp/jobs.json")"
echo "ok: checkpoint $id1 restored on B as job $rjob, waiting for its client"

# refusals: a running job's checkpoint is not restored (it would run twice)
zdtm_start A zdtm_mixed 2
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c.json" || fail "checkpoint of mixed"
id=$(json "$tmp/c.json" 'j["id"]')
"$ctl" restore "$id" --server "$A" --to "$B" >"$tmp/r.out" 2>&1
[ $? -eq 1 ] && grep -q "is running on this server" "$tmp/r.out" || fail "restore of a running job: $(cat "$tmp/r.out")"
echo "ok: the checkpoint of a running job is not restored elsewhere"

# a migration that fails at any step leaves the job running on A, and nothing on the target
"$ctl" migrate "$job" --server "$A" --to 127.0.0.1:1 --cold >"$tmp/m.out" 2>&1
[ $? -eq 1 ] || fail "migration to nowhere: $(cat "$tmp/m.out")"
for fault in restore_replay restore_fill restore_crash; do
	srv_start C RGPU_FAULT=$fault
	"$ctl" migrate "$job" --server "$A" --to "$(srv_admin C)" --cold >"$tmp/m.out" 2>&1
	rc=$?
	# a chunk that reaches the target's GPU damaged is a damaged checkpoint: exit status 5
	want=1
	[ $fault = restore_fill ] && want=5
	[ $rc -eq $want ] || fail "migration with $fault: exit $rc, want $want: $(cat "$tmp/m.out")"
	grep -q "the job runs on there" "$tmp/m.out" || fail "$fault: $(cat "$tmp/m.out")"
	[ "$(job_of A)" = "$job" ] || fail "$fault: the job is gone from A"
	sleep 0.6
	[ "$(job_of C)" = "" ] || fail "$fault: a job stayed on the target"
	srv_stop C
	rm -rf "$tmp/C"
	echo "ok: a migration failing at $fault: the job runs on on A ($(tail -c 120 "$tmp/m.out" | tr -d '\n'))"
done
zdtm_go
zdtm_wait_ready 2
zdtm_go
zdtm_finish 2
echo "ok: the program finished after every failed migration"
# the source side: a push cut midway, a commit that fails
for fault in push_send ckpt_commit ckpt_barrier; do
	srv_stop A
	srv_start A RGPU_FAULT=$fault -- --resume-grace 30
	A=$(srv_admin A)
	zdtm_start A zdtm_memory 1
	zdtm_wait_ready 1
	job=$(job_of A)
	"$ctl" migrate "$job" --server "$A" --to "$B" --cold >"$tmp/m.out" 2>&1
	[ $? -eq 1 ] || fail "migration with $fault: $(cat "$tmp/m.out")"
	[ "$(job_of A)" = "$job" ] || fail "$fault: the job is gone from A"
	zdtm_go
	zdtm_finish 1
	echo "ok: a migration failing at $fault on the source: the job ran on"
done
# a target that stops reading mid-push (for 120 s): the source's send fails after its
# --frame-timeout (2 s here), the migration with it, and the job runs on on A
srv_stop A
srv_start A -- --resume-grace 30 --frame-timeout 2
A=$(srv_admin A)
srv_start C RGPU_FAULT=push_stall
stalled_target A "$(srv_admin C)" --cold "timed out"
# the same target, live: the rounds' pushes meet the answer deadline
stalled_target A "$(srv_admin C)" live "no answer in time"
srv_stop C KILL
rm -rf "$tmp/C"
# a target that takes every byte, then says nothing for 120 s (RGPU_FAULT=push_mute): a cold
# migration too fails once the target is silent for --frame-timeout (it used to wait 10 minutes)
srv_start C RGPU_FAULT=push_mute
stalled_target A "$(srv_admin C)" --cold "no answer in time"
# and a restore to it (rgpud's supervisor pushes there as a migration does)
zdtm_start A zdtm_memory 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c.json" || fail "checkpoint for the mute restore"
zdtm_go
zdtm_finish 1
t0=$(date +%s)
"$ctl" restore "$(json "$tmp/c.json" 'j["id"]')" --server "$A" --to "$(srv_admin C)" \
	>"$tmp/r.out" 2>&1
rc=$?
t=$(($(date +%s) - t0))
[ $rc -eq 1 ] && [ $t -le 20 ] && grep -q "no answer in time" "$tmp/r.out" ||
	fail "restore to a mute target: exit $rc after $t s: $(cat "$tmp/r.out")"
echo "ok: a restore to a target mute after the last byte failed after $t s"
srv_stop C KILL
rm -rf "$tmp/C"
# a target silent 4 s after the last byte (RGPU_FAULT=push_pause), then going on: the source
# gave up at 2 s and runs the job on, so the target must not serve it as well
srv_start C RGPU_FAULT=push_pause
stalled_target A "$(srv_admin C)" --cold "no answer in time"
i=0
until grep -q "left before the answer" "$tmp/C/log"; do
	i=$((i + 1))
	[ $i -le 300 ] || fail "a target the source gave up on: no 'left before the answer' in its log"
	sleep 0.1
done
# (its worker ends: the supervisor forgets the job once it has reaped it)
i=0
while [ -n "$(job_of C)" ]; do
	i=$((i + 1))
	[ $i -le 50 ] || fail "a target the source gave up on serves the job too"
	sleep 0.1
done
echo "ok: a target silent past the source's deadline did not serve the job the source runs on"
srv_stop C KILL
rm -rf "$tmp/C"
# a target busy longer than that without an answer (5 s rebuilding the job: a long JIT, say;
# and cold, 5 s more in the fill's hash check), which says it works: the migration goes through
srv_start D RGPU_FAULT=restore_slow,verify_slow
zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" migrate "$job" --server "$A" --to "$(srv_admin D)" >"$tmp/m.out" 2>&1 ||
	fail "live migration to a slow target (heartbeats): $(cat "$tmp/m.out")"
[ "$(job_of D)" = "$job" ] || fail "slow target: the job is not on D"
zdtm_go
zdtm_finish 1
echo "ok: live, a target silent 5 s but beating: moved ($(tail -c 140 "$tmp/m.out" | tr -d '\n'))"
# cold alike: the target beats through the whole restore, not only while it stores (before, it
# was silent after the fill, and a cold migration waited 10 minutes for any target)
zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" migrate "$job" --server "$A" --to "$(srv_admin D)" --cold >"$tmp/m.out" 2>&1 ||
	fail "cold migration to a slow target (heartbeats): $(cat "$tmp/m.out")"
# (the live case's job may not have left D yet: any of its jobs)
"$ctl" jobs --server "$(srv_admin D)" --json | grep -q "\"$job\"" ||
	fail "slow target, cold: the job is not on D"
zdtm_go
zdtm_finish 1
srv_stop D
rm -rf "$tmp/D"
echo "ok: cold, a target silent 5 s but beating: moved ($(tail -c 140 "$tmp/m.out" | tr -d '\n'))"
# a target whose gc holds its store 5 s (the one every rgpud starts with, on a large store:
# RGPU_FAULT=gc_slow) says it waits: the live migration goes through
zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
mkdir -p "$tmp/D/data/store" # a store there already: rgpud collects it as it starts
srv_start D RGPU_FAULT=gc_slow
"$ctl" migrate "$job" --server "$A" --to "$(srv_admin D)" >"$tmp/m.out" 2>&1 ||
	fail "live migration to a target whose gc holds its store: $(cat "$tmp/m.out")"
[ "$(job_of D)" = "$job" ] || fail "target in gc: the job is not on D"
grep -q "fault site gc_slow fired" "$tmp/D/log" || fail "target in gc: no gc held D's store"
took=$(grep -o '[0-9.]* s in all' "$tmp/m.out" | cut -d' ' -f1)
awk -v t="${took:-0}" 'BEGIN { exit !(t >= 3) }' ||
	fail "target in gc: moved in ${took:-?} s, not held up by the gc: $(cat "$tmp/m.out")"
zdtm_go
zdtm_finish 1
srv_stop D
rm -rf "$tmp/D"
echo "ok: live, a target whose gc held its store 5 s: moved ($(tail -c 140 "$tmp/m.out" | tr -d '\n'))"
# a job whose module images the module cache does not hold (--module-cache-bytes 0): its
# worker kept them, so it is checkpointed and moved all the same
srv_stop A
srv_start A -- --resume-grace 30 --module-cache-bytes 0
A=$(srv_admin A)
zdtm_start A zdtm_globals 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" migrate "$job" --server "$A" --to "$B" --cold >"$tmp/m.out" 2>&1 ||
	fail "migration of a job whose images are not cached: $(cat "$tmp/m.out")"
"$ctl" jobs --server "$B" --json >"$tmp/jobs.json"
[ "$(json "$tmp/jobs.json" '"'"$job"'" in [x["job"] for x in j["jobs"]]')" = True ] ||
	fail "the job whose images are not cached is not on B: $(cat "$tmp/jobs.json")"
zdtm_go
zdtm_finish 1
echo "ok: a job whose module images are not in the module cache moved to B"
# a client that reached A by its Unix-domain socket (RGPU_SERVER=unix:PATH: shared memory) goes
# on at B's TCP address when its job moves there
zout=$tmp/unix.$$.out
: >"$zout"
# shellcheck disable=SC2086 # the launcher is a command prefix
ZDTM_ROUNDS=1 RGPU_LOG=info RGPU_SERVER="unix:$tmp/A/data/rgpud-$(srv_port A).sock" \
	LD_LIBRARY_PATH="$build/lib/interposer${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/zdtm_memory" >"$zout" 2>"$zout.err" &
zpid=$!
zdtm_wait_ready 1
grep -q "moved to shared memory" "$tmp/A/log" || fail "the unix:PATH client is not on shared memory"
job=$(job_of A)
"$ctl" migrate "$job" --server "$A" --to "$B" --cold >"$tmp/m.out" 2>&1 ||
	fail "migration of the unix:PATH client's job: $(cat "$tmp/m.out")"
zdtm_go
zdtm_finish 1
echo "ok: a client on A's socket (unix:PATH) followed its job to B"
# a relative data folder (--data DIR, no --socket): the socket is made in it
(cd "$tmp" && srv_start C -- --data relC)
sock=$tmp/relC/rgpud-$(srv_port C).sock
grep -q "local clients on $sock " "$tmp/C/log" && [ -S "$sock" ] ||
	fail "rgpud --data relC: no socket $sock: $(grep 'local clients' "$tmp/C/log")"
srv_stop C
echo "ok: rgpud with a relative data folder listens on $sock"
echo "migrate: all passed"
