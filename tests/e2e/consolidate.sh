#!/bin/sh
# rgpuctl consolidate and wake (issue 11), on simgpu:
#   consolidate.sh BUILD
# Three servers A, B and C with five busy jobs (tests/zdtm/zdtm_fill: each checks all of its
# memory every 200 ms while it rewrites 16 MiB/s): 96 MiB on A (64 + 32), 80 MiB on B (64 + 16),
# 32 MiB on C.
# 1. --dry-run plans B's and C's three jobs onto A (the fewest bytes moved for the most servers
#    emptied) and moves nothing.
# 2. A run while another holds the lock does nothing and exits 6.
# 3. --power-off moves them live, runs the cluster file's power-off command for B and C (a test
#    command that records its calls), records them in the state file; every program's checks
#    pass after.
# 4. A second run plans nothing and asks neither B nor C; a new session (rgpuctl run --cluster)
#    that finds no room wakes B (the power-on command) and runs there; wake C; a bad cluster
#    setting is a usage error.
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
export RGPU_RESUME_TIMEOUT_S=30
for s in A B C; do srv_start $s -- --resume-grace 30; done
A=$(srv_admin A)
B=$(srv_admin B)
C=$(srv_admin C)
cat >"$tmp/cluster" <<EOF
# three servers
$A   # a comment after an address
$B
$C
power-off = echo "off \$RGPU_SERVER \$RGPU_HOST #1" >>$tmp/hooks.log
power-on = echo "on \$RGPU_SERVER" >>$tmp/hooks.log
EOF
opts="--cluster $tmp/cluster --lock $tmp/lock --state $tmp/state.json"

# five busy programs; pids and outputs in p1..p5, o1..o5
n=0
start() {
	n=$((n + 1))
	eval "o$n=\$tmp/job$n.out"
	eval "out=\$o$n"
	: >"$out"
	# shellcheck disable=SC2086 # the launcher is a command prefix
	ZDTM_FILL_MIB=$2 ZDTM_FILL_BUSY=16 ZDTM_ROUNDS=1 "$ctl" run --server "127.0.0.1:$(srv_port "$1")" -- \
		${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/zdtm_fill" >"$out" 2>"$out.err" &
	eval "p$n=$!"
	i=0
	until grep -q '^READY$' "$out"; do
		[ $i -ge 1200 ] && fail "job $n: no READY within 60 s: $(cat "$out" "$out.err")"
		sleep 0.05
		i=$((i + 1))
	done
}
start A 64
start A 32
start B 64
start B 16
start C 32
jobs_on() { "$ctl" jobs --server "$1" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))'; }
[ "$(jobs_on "$A")$(jobs_on "$B")$(jobs_on "$C")" = 221 ] || fail "the jobs did not start where asked"
# each worker reports its job's memory within half a second of a change: wait for all five
i=0
until [ "$("$ctl" jobs --cluster "$tmp/cluster" --json | python3 -c 'import json,sys; print(sum(1 for j in json.load(sys.stdin)["jobs"] if j["device_memory"] > 0))')" = 5 ]; do
	[ $i -ge 100 ] && fail "the jobs' memory was not reported"
	sleep 0.1
	i=$((i + 1))
done

# 1. the plan alone
# shellcheck disable=SC2086 # opts is a list
"$ctl" consolidate $opts --dry-run --json >"$tmp/plan.json" || fail "dry run: $(cat "$tmp/plan.json")"
python3 - "$tmp/plan.json" "$A" "$B" "$C" <<'PY' || fail "the plan: $(cat "$tmp/plan.json")"
import json, sys
acts = [json.loads(l) for l in open(sys.argv[1])]
a, b, c = sys.argv[2:5]
moves = sorted((x["from"], x["to"], x["bytes"]) for x in acts if x["action"] == "plan-move")
empty = sorted(x["server"] for x in acts if x["action"] == "plan-empty")
M = 1 << 20
# each job maps its fill and 2 MiB more (its seeds and counter: one 2 MiB granule)
want = sorted([(b, a, 66 * M), (b, a, 18 * M), (c, a, 34 * M)])
assert moves == want, (moves, want)
assert empty == sorted([b, c]), empty
PY
[ "$(jobs_on "$A")$(jobs_on "$B")$(jobs_on "$C")" = 221 ] || fail "a dry run moved jobs"
echo "ok: the dry run plans B's and C's 3 jobs (112 MiB) onto A, emptying B and C, and moves nothing"

# 2. the lock
(flock "$tmp/lock" sleep 3) &
lpid=$!
sleep 0.5
# shellcheck disable=SC2086
"$ctl" consolidate $opts --dry-run >"$tmp/locked.out" 2>&1
rc=$?
wait $lpid
[ $rc -eq 6 ] || fail "a run while another holds the lock: exit $rc, want 6: $(cat "$tmp/locked.out")"
grep -q "another run holds the lock" "$tmp/locked.out" || fail "no word on the lock: $(cat "$tmp/locked.out")"
echo "ok: a run while another holds the lock does nothing (exit 6)"
# ... and says so in JSON under --json (a cron line's log stays one JSON object a line)
(flock "$tmp/lock" sleep 3) &
lpid=$!
sleep 0.5
# shellcheck disable=SC2086
"$ctl" consolidate $opts --dry-run --json >"$tmp/locked.json" 2>&1
rc=$?
wait $lpid
[ $rc -eq 6 ] || fail "the same with --json: exit $rc, want 6: $(cat "$tmp/locked.json")"
python3 -c 'import json,sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert any(l.get("action") == "lock" and "another run holds the lock" in l.get("error", "") for l in lines), lines' \
	"$tmp/locked.json" || fail "not one JSON object a line naming the lock: $(cat "$tmp/locked.json")"
echo "ok: and under --json, a JSON line names the lock"

# 3. consolidate, powering the emptied servers off; every server's GPU telemetry before and after
power() {
	"$ctl" status --cluster "$tmp/cluster" --json >"$1" || fail "status: $(cat "$1")"
	json "$1" '", ".join("%s %.1f W %s%% (%s)" % (s["server"], s["gpus"][0].get("power_w", 0), s["gpus"][0].get("utilization", 0), s["gpus"][0].get("telemetry", "none")) for s in j["servers"] if "gpus" in s)'
}
before=$(power "$tmp/st_before.json")
# shellcheck disable=SC2086
"$ctl" consolidate $opts --power-off --json >"$tmp/run.json" 2>"$tmp/run.err" ||
	fail "consolidate: $(cat "$tmp/run.json" "$tmp/run.err")"
sleep 1.5 # a report from each worker since
after=$(power "$tmp/st_after.json")
echo "GPU telemetry before: $before"
echo "GPU telemetry after:  $after"
[ -n "${OUT_JSON:-}" ] && cat "$tmp/st_before.json" "$tmp/st_after.json" >"$OUT_JSON"
[ "$(jobs_on "$A")$(jobs_on "$B")$(jobs_on "$C")" = 500 ] || fail "not every job is on A: $(cat "$tmp/run.json")"
[ "$(grep -c '"action":"move".*"result":0' "$tmp/run.json")" = 3 ] || fail "not 3 moves: $(cat "$tmp/run.json")"
# (the command's '#' is its own: a command is taken whole)
[ "$(sort "$tmp/hooks.log")" = "$(printf 'off %s 127.0.0.1 #1\noff %s 127.0.0.1 #1\n' "$B" "$C" | sort)" ] ||
	fail "the power-off command ran otherwise: $(cat "$tmp/hooks.log")"
[ "$(json "$tmp/state.json" 'sorted(j["off"]) == sorted(["'"$B"'", "'"$C"'"])')" = True ] ||
	fail "the state file: $(cat "$tmp/state.json")"
for k in 1 2 3 4 5; do
	eval "pid=\$p$k out=\$o$k"
	kill -USR1 "$pid"
	wait "$pid" || fail "job $k failed after the consolidation: $(cat "$out" "$out.err")"
	grep -q "^zdtm fill: OK rounds=1 " "$out" || fail "job $k: $(cat "$out")"
done
echo "ok: consolidate moved 3 jobs live onto A, powered B and C off (the command ran, recorded); all 5 programs' checks passed"

# 4. again: nothing to do, the powered-off servers are not asked (B and C still run here: the
# test's power-off command only records its call)
# shellcheck disable=SC2086
"$ctl" consolidate $opts --json >"$tmp/again.json" 2>&1 || fail "second run: $(cat "$tmp/again.json")"
grep -q '"plan-move"\|"move"' "$tmp/again.json" && fail "the second run moved: $(cat "$tmp/again.json")"
grep -q '"skip"' "$tmp/again.json" && fail "the second run asked a powered-off server: $(cat "$tmp/again.json")"
# a new session that finds no room (it asks for more than A has): B, powered off first, is woken
# ZDTM_NO_WAIT: the program runs its rounds without waiting for a signal
ZDTM_NO_WAIT=1 "$ctl" run --cluster "$tmp/cluster" --state "$tmp/state.json" --need 100000000 -- \
	${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/zdtm_memory" >"$tmp/woken.out" 2>&1 ||
	fail "a session that woke a server: $(cat "$tmp/woken.out")"
grep -q "waking $B" "$tmp/woken.out" || fail "no server woken: $(cat "$tmp/woken.out")"
grep -q "^on $B\$" "$tmp/hooks.log" || fail "the power-on command did not run: $(cat "$tmp/hooks.log")"
grep -q "worker: job .*program .*zdtm_memory" "$tmp/B/log" || fail "the session did not land on B"
[ "$(json "$tmp/state.json" 'j["off"] == ["'"$C"'"]')" = True ] || fail "B still recorded off: $(cat "$tmp/state.json")"
# shellcheck disable=SC2086
"$ctl" wake "$C" $opts --json >"$tmp/wake.json" || fail "wake: $(cat "$tmp/wake.json")"
grep -q "^on $C\$" "$tmp/hooks.log" || fail "wake C did not run the power-on command: $(cat "$tmp/hooks.log")"
[ "$(json "$tmp/state.json" 'j["off"] == []')" = True ] || fail "C still recorded off: $(cat "$tmp/state.json")"
echo "bogus = 1" >>"$tmp/cluster"
# shellcheck disable=SC2086
"$ctl" consolidate $opts --dry-run >"$tmp/bad.out" 2>&1
[ $? -eq 2 ] || fail "a bad cluster setting: $(cat "$tmp/bad.out")"
echo "ok: a second run plans nothing and leaves the powered-off servers alone; a session with no room woke B and ran there; wake C"

# 5. a client away at the switchover (stopped): its job moves off C, but C stays on until the
# client has reached the job's new server (--settle 2 here), then goes off at the next run. A
# job on A keeps A on, so C's is the one to move. (The redirect is in the stopped client's
# socket already: this checks the wait, which a client cut off by the network needs.)
sed -i '$d' "$tmp/cluster" # the bogus line
: >"$tmp/hooks.log"
start A 32
start C 16
i=0
until "$ctl" jobs --cluster "$tmp/cluster" --json >"$tmp/cjobs.json" &&
	[ "$(json "$tmp/cjobs.json" 'sum(1 for x in j["jobs"] if x["device_memory"] > 0)')" = 2 ]; do
	[ $i -ge 100 ] && fail "the jobs on A and C: their memory was not reported"
	sleep 0.1
	i=$((i + 1))
done
cjob=$(json "$tmp/cjobs.json" '[x["job"] for x in j["jobs"] if x["server"] == "'"$C"'"][0]')
kill -STOP "$p7"
# shellcheck disable=SC2086
"$ctl" consolidate $opts --power-off --settle 2 --json >"$tmp/settle.json" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "consolidate with a stopped client: exit $rc, want 1: $(cat "$tmp/settle.json")"
grep -q '"action":"move","job":"'"$cjob"'".*"result":0' "$tmp/settle.json" ||
	fail "the stopped client's job did not move: $(cat "$tmp/settle.json")"
python3 -c 'import json,sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
late = [l for l in lines if l.get("action") == "power-off" and l.get("server") == sys.argv[2]]
assert late and late[0]["result"] == -1 and "has not reached" in late[0]["error"] and "within 2 s" in late[0]["error"], lines' \
	"$tmp/settle.json" "$C" || fail "C's power-off not refused for the late client: $(cat "$tmp/settle.json")"
grep -q "^off $C" "$tmp/hooks.log" && fail "C was powered off with a client still to redirect"
kill -CONT "$p7"
i=0
until [ "$("$ctl" jobs --cluster "$tmp/cluster" --json | python3 -c 'import json,sys
print(sum(1 for x in json.load(sys.stdin)["jobs"] if x["job"] == sys.argv[1] and x["state"] == "running"))' "$cjob")" = 1 ]; do
	[ $i -ge 200 ] && fail "the resumed client did not reach its job"
	sleep 0.1
	i=$((i + 1))
done
# shellcheck disable=SC2086
"$ctl" consolidate $opts --power-off --settle 20 --json >"$tmp/settle2.json" 2>&1 ||
	fail "consolidate once the client followed: $(cat "$tmp/settle2.json")"
grep -q "^off $C" "$tmp/hooks.log" || fail "C not powered off once its moved client followed: $(cat "$tmp/settle2.json")"
kill -USR1 "$p7"
wait "$p7" || fail "the stopped program failed after its job moved: $(cat "$o7" "$o7.err")"
grep -q "^zdtm fill: OK rounds=1 " "$o7" || fail "the stopped program: $(cat "$o7")"
kill -USR1 "$p6"
wait "$p6" || fail "the program on A failed: $(cat "$o6" "$o6.err")"
echo "ok: a stopped client's job moved off C; C stayed on (--settle 2: the client had not followed), went off once it had; the program's checks passed"
echo "consolidate: all passed"
