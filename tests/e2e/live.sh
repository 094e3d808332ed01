#!/bin/sh
# Live (pre-copy) migration between rgpud servers on simgpu (issue 10):
#   live.sh BUILD [N] [MIB] [RATE]
# 1. Each zdtm state program waits at READY while it is migrated live A -> B, and after its
#    second round B -> A; it checks every byte and handle after each, and the job is on the
#    server it was moved to and nowhere else.
# 2. zdtm_fill busy (ZDTM_FILL_BUSY: it checks all of its MIB MiB, default 64, and rewrites a
#    tenth of it, over and over, at most RATE MiB/s (default 0: as fast as it goes), while it
#    is moved) is migrated A -> B -> A ... N times (default
#    50): every check it makes passes, every migration is live with at least one round and a
#    pause, and no job is left on the server it left.
# 3. A migration failing at each phase, on the target (fault sites: restore_replay while it
#    stages the job, live_stage_crash between two rounds, live_delta when it writes a round's
#    chunks, restore_crash at the switchover) and on the source (push_send: the connection cut
#    in the middle of a push; ckpt_barrier): the migration says so, the job runs on on the
#    source, nothing stays on the target, and the program passes. So does a migration to an
#    unreachable server.
# 4. A client redirected to an address it cannot reach fails its CUDA calls with one log line.
# 5. rgpuctl drain moves a job to the candidate that can take it, and the drained server takes
#    no new session (logged), across a restart, until rgpuctl undrain.
set -u
build=$1
n=${2:-50}
mib=${3:-64}
rate=${4:-0}
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

srv_start A -- --resume-grace 30
srv_start B SIMGPU_GLOBALS_SKEW=65536 -- --resume-grace 30
A=$(srv_admin A)
B=$(srv_admin B)

# live FROM TO: migrate the job on FROM live to TO, check the reply and where the job is
live() {
	"$ctl" migrate "$job" --server "$1" --to "$2" --json >"$tmp/m.json" ||
		fail "$p: live migration $1 -> $2: $(cat "$tmp/m.json")"
	[ "$(json "$tmp/m.json" 'j["kind"] == "live" and j["rounds"] >= 1 and j["pause_ns"] > 0')" = True ] ||
		fail "$p: reply $(cat "$tmp/m.json")"
	[ "$(job_of "$3")" = "$job" ] || fail "$p: the job is not on $3"
	[ "$(job_of "$4")" = "" ] || fail "$p: a job is left on $4"
}

# LIVE_ONLY_BUSY=1: part 2 alone (e2e.live_1g: the 1 GiB job); LIVE_PROGS: other programs for part 1
progs=${LIVE_PROGS:-"memory globals streams events pool graph graphnodes mixed managed arrays"}
[ "${LIVE_ONLY_BUSY:-0}" = 1 ] && progs=""
for p in $progs; do
	zdtm_start A "zdtm_$p" 3
	zdtm_wait_ready 1
	job=$(job_of A)
	live "$A" "$B" B A
	zdtm_go
	zdtm_wait_ready 2
	live "$B" "$A" A B
	zdtm_go
	zdtm_wait_ready 3
	zdtm_go
	zdtm_finish 3
	echo "ok: $p moved live A -> B -> A, every byte and handle checked ($(json "$tmp/m.json" 'j["rounds"]') round(s), paused $(json "$tmp/m.json" '"%.1f ms" % (j["pause_ns"] / 1e6)'))"
done

# a job that never stops writing and checking, moved back and forth
p=fill
ZDTM_FILL_MIB=$mib ZDTM_FILL_BUSY=$rate zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
pauses=""
for i in $(seq "$n"); do
	if [ $((i % 2)) = 1 ]; then live "$A" "$B" B A; else live "$B" "$A" A B; fi
	pauses="$pauses $(json "$tmp/m.json" 'j["pause_ns"] // 1000000')"
	kill -0 "$zpid" 2>/dev/null || fail "the busy program ended during migration $i: $(cat "$zout" "$zout.err")"
done
zdtm_go
zdtm_finish 1
steps=$(sed -n 's/.*busy_steps=\([0-9]*\).*/\1/p' "$zout")
# a live round's checkpoint holds no device memory: neither side keeps one after the move
for s in "$A" "$B"; do
	"$ctl" checkpoints --server "$s" --json >"$tmp/ck.json" || fail "checkpoints on $s"
	[ "$(json "$tmp/ck.json" 'len(j["checkpoints"])')" = 0 ] ||
		fail "a live migration left checkpoints on $s: $(cat "$tmp/ck.json")"
done
[ "${steps:-0}" -ge "$n" ] || fail "the busy program made only ${steps:-0} steps over $n migrations"
echo "ok: a busy $mib MiB job moved live $n times, $steps busy steps all checked; pauses (ms):$pauses"
[ "${LIVE_ONLY_BUSY:-0}" = 1 ] && { echo "live: all passed"; exit 0; }

# drain: A's job moves to the one candidate that can take it; A takes no new session until
# undrained, across a restart
p=drain
zdtm_start A zdtm_memory 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" drain "$A" --to "127.0.0.1:1,$B" --json >"$tmp/d.json" || fail "drain: $(cat "$tmp/d.json")"
[ "$(json "$tmp/d.json" 'len(j["moved"]) == 1 and j["moved"][0]["target"] == "'"$B"'" and not j["left"]')" = True ] ||
	fail "drain reply: $(cat "$tmp/d.json")"
[ "$(job_of B)" = "$job" ] || fail "drain: the job is not on B"
[ "$(job_of A)" = "" ] || fail "drain: a job is left on A"
zdtm_go
zdtm_finish 1
"$ctl" status --server "$A" --json >"$tmp/s.json"
grep -q '"drained": *true' "$tmp/s.json" || fail "status does not say A is drained: $(cat "$tmp/s.json")"
# shellcheck disable=SC2086 # the launcher is a command prefix
ZDTM_NO_WAIT=1 "$ctl" run --server "127.0.0.1:$(srv_port A)" -- ${RGPU_APP_LAUNCHER:-} \
	"$build/tests/zdtm/zdtm_memory" >"$tmp/r.out" 2>&1 &&
	fail "a new session on a drained server ran: $(cat "$tmp/r.out")"
grep -q "refused: the GPU server is drained" "$tmp/A/log" ||
	fail "the refusal of a new session on a drained server is not logged: $(tail -3 "$tmp/A/log")"
grep -q "cudaErrorDevicesUnavailable" "$tmp/r.out" ||
	fail "the program on a drained server did not see a busy GPU: $(tail -3 "$tmp/r.out")"
srv_stop A
srv_start A -- --resume-grace 30
A=$(srv_admin A)
"$ctl" status --server "$A" --json | grep -q '"drained": *true' || fail "A is not drained after its restart"
"$ctl" undrain "$A" >"$tmp/u.out" || fail "undrain: $(cat "$tmp/u.out")"
# shellcheck disable=SC2086 # the launcher is a command prefix
ZDTM_NO_WAIT=1 "$ctl" run --server "127.0.0.1:$(srv_port A)" -- ${RGPU_APP_LAUNCHER:-} \
	"$build/tests/zdtm/zdtm_memory" >"$tmp/r.out" 2>&1 ||
	fail "a session on an undrained server failed: $(cat "$tmp/r.out")"
echo "ok: drain moved the job to $B, refused a new session (across a restart) until undrain"

# a client that cannot reach the target (a wrong --client-address): a clear error, one log line,
# no hang (its resume gives up after RGPU_RESUME_TIMEOUT_S)
p=unreachable
RGPU_RESUME_TIMEOUT_S=3 zdtm_start A zdtm_memory 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" migrate "$job" --server "$A" --to "$B" --client-address 127.0.0.1:1 >"$tmp/m.out" 2>&1 ||
	fail "migration with an unreachable client address: $(cat "$tmp/m.out")"
zdtm_go
wait "$zpid" && fail "the program passed with its job out of reach"
[ "$(grep -c "could not resume job $job on 127.0.0.1:1 within 3 s" "$zout.err")" = 1 ] ||
	fail "no single clear line for the unreachable target: $(tail -5 "$zout.err")"
grep -q "cudaErrorDevicesUnavailable" "$zout" || fail "the program did not see the device unavailable: $(tail -3 "$zout")"
srv_stop B
srv_start B SIMGPU_GLOBALS_SKEW=65536 -- --resume-grace 30
B=$(srv_admin B)
echo "ok: a client sent to a target it cannot reach fails its calls with one clear log line, no hang"

# a job whose program ends while it is being moved: rgpuctl says so (exit 1, not "unreachable"),
# and neither server keeps anything (on simgpu, where hashing 512 MiB on the CPU makes the
# migration outlast the program's last check by seconds)
if [ "${RGPU_E2E_DRIVER:-}" != system ]; then
	p=ended
	ZDTM_FILL_MIB=512 zdtm_start A zdtm_fill 1
	zdtm_wait_ready 1
	job=$(job_of A)
	"$ctl" migrate "$job" --server "$A" --to "$B" >"$tmp/m.out" 2>&1 &
	mpid=$!
	sleep 0.3
	zdtm_go
	wait $mpid
	mrc=$? # (zdtm_finish sets rc)
	zdtm_finish 1
	[ $mrc -eq 1 ] && grep -q "ended during the migration" "$tmp/m.out" ||
		fail "a job that ended during its migration: exit $mrc: $(cat "$tmp/m.out")"
	sleep 0.6
	[ "$(job_of A)$(job_of B)" = "" ] || fail "a job stayed after its program ended mid-migration"
	echo "ok: a job whose program ended during its migration: $(cut -c1-60 "$tmp/m.out")... (exit 1)"
fi

# failures: the job runs on on the source, the target keeps nothing
p=memory
nowhere() {
	zdtm_start A zdtm_memory 1
	zdtm_wait_ready 1
	job=$(job_of A)
}
nowhere
"$ctl" migrate "$job" --server "$A" --to 127.0.0.1:1 >"$tmp/m.out" 2>&1
[ $? -eq 1 ] || fail "a live migration to nowhere: $(cat "$tmp/m.out")"
[ "$(job_of A)" = "$job" ] || fail "the job is gone from A after a migration to nowhere"
zdtm_go
zdtm_finish 1
echo "ok: a live migration to an unreachable server fails, the job runs on"
# after a failed migration: the job still on A, nothing on the target C (gone), the program passes
ran_on() {
	[ "$(job_of A)" = "$job" ] || fail "$fault: the job is gone from A"
	sleep 0.6
	[ "$(job_of C)" = "" ] || fail "$fault: a job stayed on the target"
	zdtm_go
	zdtm_finish 1
	srv_stop C
	rm -rf "$tmp/C"
}
for fault in restore_replay live_stage_crash live_delta restore_crash; do
	srv_start C RGPU_FAULT=$fault -- --resume-grace 30
	nowhere
	"$ctl" migrate "$job" --server "$A" --to "$(srv_admin C)" >"$tmp/m.out" 2>&1
	rc=$?
	want=1
	[ $fault = live_delta ] && want=5 # damaged bytes on the target's GPU
	[ $rc -eq $want ] || fail "live migration with $fault: exit $rc, want $want: $(cat "$tmp/m.out")"
	grep -q "the job runs on there" "$tmp/m.out" || fail "$fault: $(cat "$tmp/m.out")"
	ran_on
	echo "ok: a live migration failing at $fault on the target: the job ran on on A ($(tail -c 100 "$tmp/m.out" | tr -d '\n'))"
done
for fault in push_send ckpt_barrier; do
	srv_stop A
	srv_start A RGPU_FAULT=$fault -- --resume-grace 30
	A=$(srv_admin A)
	# a target with an empty store: the push has chunks to send
	srv_start C -- --resume-grace 30
	nowhere
	"$ctl" migrate "$job" --server "$A" --to "$(srv_admin C)" >"$tmp/m.out" 2>&1
	[ $? -eq 1 ] || fail "live migration with $fault: $(cat "$tmp/m.out")"
	ran_on
	echo "ok: a live migration failing at $fault on the source: the job ran on"
done
echo "live: all passed"
