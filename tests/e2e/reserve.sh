#!/bin/sh
# Reservations and rgpuctl slurm (issue 15), on simgpu, without Slurm:
#   reserve.sh BUILD
# 1. slurm place reserves memory of the emptiest GPU as slurm-JOBID and prints the RGPU_SERVERS
#    that reaches it; asked again it prints the same; a request no GPU has room for fails
#    (exit 1) and leaves nothing reserved; a bad job id is a usage error; with no room on the
#    servers up, one consolidate powered off is woken and used.
# 2. status shows the reservation; the GPU's memory_reserved is what it asked, less what the
#    job's programs (RGPU_JOB_LABEL=slurm-JOBID, shown by jobs) map; a bad label is not sent.
# 3. consolidate moves the reservation with its program live to the other server (fewest bytes),
#    the program's checks pass; place then names the new server; the source is not powered off
#    while it holds a reservation.
# 4. a reservation outlives a restart of its server; release ends it; licenses counts the GPUs
#    of servers up and not drained, and of those powered off, and writes the file only on change.
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
export RGPU_RESUME_TIMEOUT_S=30
for s in A B; do srv_start $s -- --resume-grace 30; done
A=$(srv_admin A)
B=$(srv_admin B)
PA=127.0.0.1:$(srv_port A)
PB=127.0.0.1:$(srv_port B)
cat >"$tmp/cluster" <<EOF2
$A
$B
power-off = echo "off \$RGPU_SERVER" >>$tmp/hooks.log
power-on = echo "on \$RGPU_SERVER" >>$tmp/hooks.log
EOF2
opts="--cluster $tmp/cluster --state $tmp/state.json --lock $tmp/lock"
c="--cluster $tmp/cluster --state $tmp/state.json"
MiB=1048576
# fill NAME SERVER MIB [LABEL]: zdtm_fill through rgpu on SERVER (a client address), labelled;
# its pid in NAMEpid once it said READY (it then waits for SIGUSR1), its output in $tmp/NAME.out
fill() {
	RGPU_JOB_LABEL=${4:-} ZDTM_FILL_MIB=$3 ZDTM_FILL_BUSY=4 ZDTM_ROUNDS=1 "$ctl" run --server "$2" -- \
		${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/zdtm_fill" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	eval "$1pid=$!"
	i=0
	until grep -q '^READY$' "$tmp/$1.out"; do
		[ $i -ge 1200 ] && fail "$1: no READY within 60 s: $(cat "$tmp/$1.out" "$tmp/$1.err")"
		sleep 0.05
		i=$((i + 1))
	done
}

# 1. place
# shellcheck disable=SC2086
out=$("$ctl" slurm place 12 --gpus 1 --mem 16 $c 2>&1) || fail "place 12: $out"
[ "$out" = "$PA/0" ] || fail "place 12 printed '$out', want '$PA/0' (equal GPUs: the first server)"
# shellcheck disable=SC2086
"$ctl" slurm place 12 --gpus 1 --mem 16 $c --json >"$tmp/again.json" || fail "place 12 again"
[ "$(json "$tmp/again.json" '(j["servers"], j["existed"], j["reservation"])')" = "('$PA/0', True, 'slurm-12')" ] ||
	fail "place 12 again: $(cat "$tmp/again.json")"
# shellcheck disable=SC2086
"$ctl" slurm place 13 --gpus 1 --mem 100000000 $c >"$tmp/full.out" 2>&1
rc=$?
[ $rc = 1 ] || fail "a placement with no room: exit $rc: $(cat "$tmp/full.out")"
grep -q "no room for 1 GPU(s)" "$tmp/full.out" || fail "no word on the room: $(cat "$tmp/full.out")"
# shellcheck disable=SC2086
"$ctl" slurm place 14 --gpus 2 $c >"$tmp/two.out" 2>&1 || fail "two GPUs: $(cat "$tmp/two.out")"
[ "$(cat "$tmp/two.out")" = "$PB/0,$PA/0" ] || fail "two GPUs: $(cat "$tmp/two.out"), want $PB/0,$PA/0"
# shellcheck disable=SC2086
"$ctl" slurm release 14 $c >/dev/null || fail "release 14"
# shellcheck disable=SC2086
"$ctl" slurm place 12x --gpus 1 $c >/dev/null 2>&1
[ $? = 2 ] || fail "a bad job id is not a usage error"
# shellcheck disable=SC2086
"$ctl" slurm place 15 --gpus 17 $c >/dev/null 2>&1
[ $? = 2 ] || fail "--gpus 17 is not a usage error"
"$ctl" status --server "$A" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" '[(r["name"], r["gpu"], r["bytes"]) for r in j["servers"][0]["reservations"]]')" = "[('slurm-12', 0, $((16 * MiB)))]" ] ||
	fail "A's reservations: $(cat "$tmp/st.json")"
"$ctl" status --server "$B" --json >"$tmp/stb.json"
[ "$(json "$tmp/stb.json" 'j["servers"][0]["reservations"]')" = "[]" ] || fail "B kept a reservation: $(cat "$tmp/stb.json")"
grep -q "reserve: GPU 0 reserved for slurm-12 (16 MiB asked)" "$tmp/A/log" || fail "A did not log the reservation"
echo "ok: place reserves the emptiest GPU and prints $PA/0, again the same; no room is exit 1, nothing left; 2 GPUs span both servers"

# no room on the servers up: one consolidate powered off is woken (its power-on command) and used
echo "{\"off\": [\"$B\"]}" >"$tmp/state.json"
free=$(json "$tmp/st.json" '(lambda g: (g["memory_total"] - g["memory_used"] - g["memory_reserved"]) >> 20)(j["servers"][0]["gpus"][0])')
# shellcheck disable=SC2086
out=$("$ctl" slurm place 20 --gpus 1 --mem "$free" $c 2>&1) || fail "place 20 (all of A's $free MiB): $out"
[ "$out" = "$PA/0" ] || fail "place 20: '$out', want '$PA/0'"
# shellcheck disable=SC2086
"$ctl" slurm place 21 --gpus 1 --mem 16 $c >"$tmp/wake.out" 2>"$tmp/wake.err" || fail "place 21: $(cat "$tmp/wake.out" "$tmp/wake.err")"
[ "$(cat "$tmp/wake.out")" = "$PB/0" ] || fail "place 21: '$(cat "$tmp/wake.out")', want '$PB/0' (B woken)"
grep -q "no server has room; waking $B" "$tmp/wake.err" || fail "no word on the wake: $(cat "$tmp/wake.err")"
[ "$(cat "$tmp/hooks.log")" = "on $B" ] || fail "the power-on command: $(cat "$tmp/hooks.log")"
[ "$(json "$tmp/state.json" 'j["off"]')" = "[]" ] || fail "B still recorded off: $(cat "$tmp/state.json")"
for k in 20 21; do
	# shellcheck disable=SC2086
	"$ctl" slurm release $k $c >/dev/null || fail "release $k"
done
: >"$tmp/hooks.log"
echo "ok: with A full ($free MiB reserved) and B powered off, a placement woke B (its power-on command, out of the state file) and went there"

# 2. the job's program: labelled, its memory counted against the reservation
reserved() { "$ctl" status --server "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["servers"][0]["gpus"][0].get("memory_reserved", 0))'; }
fill p "$PA" 8 slurm-12
"$ctl" jobs --server "$A" --json >"$tmp/jobs.json"
[ "$(json "$tmp/jobs.json" '[x["label"] for x in j["jobs"]]')" = "['slurm-12']" ] || fail "the job's label: $(cat "$tmp/jobs.json")"
"$ctl" jobs --server "$A" | grep -q " running slurm-12\$" || fail "jobs' table has no label: $("$ctl" jobs --server "$A")"
# the fill maps 8 MiB and one 2 MiB granule: 6 MiB of the 16 stay reserved
i=0
until [ "$(reserved "$A")" = $((6 * MiB)) ]; do
	[ $i -ge 50 ] && fail "memory_reserved is $(reserved "$A"), want $((6 * MiB))"
	sleep 0.1
	i=$((i + 1))
done
RGPU_JOB_LABEL='not a label' ZDTM_NO_WAIT=1 "$ctl" run --server "$PB" -- ${RGPU_APP_LAUNCHER:-} \
	"$build/tests/zdtm/zdtm_memory" >"$tmp/bad.out" 2>&1 || fail "a bad label failed the program: $(cat "$tmp/bad.out")"
grep -q "RGPU_JOB_LABEL='not a label' is not a label" "$tmp/bad.out" || fail "no word on a bad label: $(cat "$tmp/bad.out")"
echo "ok: the program's job carries label slurm-12; the GPU keeps 6 MiB of the 16 reserved (10 mapped); a bad label is not sent, said"

# 3. consolidate: B's bigger program stays, A's reservation moves with its program to B
fill q "$PB" 32
sleep 1 # the workers' reports
# shellcheck disable=SC2086
"$ctl" consolidate $opts --power-off --json >"$tmp/cons.json" 2>"$tmp/cons.err" || fail "consolidate: $(cat "$tmp/cons.json" "$tmp/cons.err")"
python3 - "$tmp/cons.json" "$A" "$B" <<'PY' || fail "consolidate: $(cat "$tmp/cons.json")"
import json, sys
acts = [json.loads(l) for l in open(sys.argv[1])]
a, b = sys.argv[2:4]
pm = [x for x in acts if x["action"] == "plan-move"]
assert [(x["reservation"], x["from"], x["to"], x["bytes"]) for x in pm] == [("slurm-12", a, b, 16 << 20)], pm
mv = [x for x in acts if x["action"] == "move"]
assert [(x["reservation"], x["result"], x["jobs_moved"]) for x in mv] == [("slurm-12", 0, 1)], mv
po = [x for x in acts if x["action"] == "power-off"]
assert [(x["server"], x["result"]) for x in po] == [(a, 0)], po
PY
"$ctl" status --server "$B" --json >"$tmp/stb.json"
[ "$(json "$tmp/stb.json" '[r["name"] for r in j["servers"][0]["reservations"]]')" = "['slurm-12']" ] || fail "B's reservations: $(cat "$tmp/stb.json")"
"$ctl" status --server "$A" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" 'j["servers"][0]["reservations"]')" = "[]" ] || fail "A kept the reservation: $(cat "$tmp/st.json")"
"$ctl" jobs --server "$B" --json >"$tmp/jobs.json"
[ "$(json "$tmp/jobs.json" 'sorted(x["label"] for x in j["jobs"])')" = "['', 'slurm-12']" ] || fail "B's jobs: $(cat "$tmp/jobs.json")"
for p in p q; do
	eval "pid=\$${p}pid"
	kill -USR1 "$pid"
	wait "$pid" || fail "program $p failed after the consolidation: $(cat "$tmp/$p.out" "$tmp/$p.err")"
	grep -q "^zdtm fill: OK rounds=1 " "$tmp/$p.out" || fail "program $p: $(cat "$tmp/$p.out")"
done
# A is recorded off now: a later step of job 12 is placed where its reservation is
# shellcheck disable=SC2086
out=$("$ctl" slurm place 12 --gpus 1 --mem 16 $c 2>&1) || fail "place 12 after the move: $out"
[ "$out" = "$PB/0" ] || fail "place 12 after the move: '$out', want '$PB/0'"
echo "ok: consolidate moved reservation slurm-12 with its program from A to B (fewest bytes), powered A off; both programs' checks passed; place now says $PB/0"

# a later program of the job, migrated by hand: the reservation follows its last program
fill r "$PB" 4 slurm-12
"$ctl" jobs --server "$B" --json >"$tmp/jobs.json"
rjob=$(json "$tmp/jobs.json" '[x["job"] for x in j["jobs"] if x["label"] == "slurm-12"][0]')
"$ctl" migrate "$rjob" --server "$B" --to "$A" --json >"$tmp/mig.json" || fail "migrate: $(cat "$tmp/mig.json")"
[ "$(json "$tmp/mig.json" 'j["reservation"]')" = slurm-12 ] || fail "the reservation did not follow: $(cat "$tmp/mig.json")"
"$ctl" status --server "$A" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" '[(r["name"], r["bytes"]) for r in j["servers"][0]["reservations"]]')" = "[('slurm-12', $((16 * MiB)))]" ] ||
	fail "A's reservations after the migration: $(cat "$tmp/st.json")"
"$ctl" status --server "$B" --json >"$tmp/stb.json"
[ "$(json "$tmp/stb.json" 'j["servers"][0]["reservations"]')" = "[]" ] || fail "B kept it: $(cat "$tmp/stb.json")"
kill -USR1 "$rpid"
wait "$rpid" || fail "the migrated program failed: $(cat "$tmp/r.out" "$tmp/r.err")"
grep -q "^zdtm fill: OK rounds=1 " "$tmp/r.out" || fail "the migrated program: $(cat "$tmp/r.out")"
echo "ok: rgpuctl migrate of the job's program from B to A took its reservation along; its checks passed"

# 4. licenses, a restart, release
# shellcheck disable=SC2086
"$ctl" slurm licenses $c --write "$tmp/lic.conf" >"$tmp/lic.out" || fail "licenses: $(cat "$tmp/lic.out")"
[ "$(cat "$tmp/lic.out")" = "rgpu:2 (written; was different)" ] || fail "licenses: $(cat "$tmp/lic.out")"
[ "$(cat "$tmp/lic.conf")" = "Licenses=rgpu:2" ] || fail "the license file: $(cat "$tmp/lic.conf")"
# shellcheck disable=SC2086
[ "$("$ctl" slurm licenses $c --write "$tmp/lic.conf")" = "rgpu:2 (unchanged)" ] || fail "licenses rewrote an equal file"
"$ctl" drain "$B" --to "$A" >/dev/null 2>&1 # B's job moves nowhere (A is off): B is drained all the same
# shellcheck disable=SC2086
[ "$("$ctl" slurm licenses $c --write "$tmp/lic.conf")" = "rgpu:1 (written; was different)" ] || fail "licenses with B drained"
"$ctl" undrain "$B" >/dev/null || fail "undrain B"
srv_stop A
srv_start A -- --resume-grace 30
A2=$(srv_admin A)
"$ctl" status --server "$A2" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" '[r["name"] for r in j["servers"][0]["reservations"]]')" = "['slurm-12']" ] || fail "the reservation did not outlive a restart: $(cat "$tmp/st.json")"
printf '%s\n%s\n' "$A2" "$B" >"$tmp/cluster"
rm -f "$tmp/state.json"
# shellcheck disable=SC2086
[ "$("$ctl" slurm release 12 $c)" = "slurm-12: released on 1 server(s)" ] || fail "release 12"
# shellcheck disable=SC2086
[ "$("$ctl" slurm release 12 $c)" = "slurm-12: no reservation on 0 server(s)" ] || fail "release 12 again"
"$ctl" status --server "$A2" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" 'j["servers"][0]["reservations"]')" = "[]" ] || fail "release left: $(cat "$tmp/st.json")"
echo "ok: licenses rgpu:2 (one off, one up), unchanged is not rewritten, rgpu:1 with B drained; a reservation outlives a restart; release ends it, again is no error"
echo "reserve: all passed"
