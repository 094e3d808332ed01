#!/bin/sh
# A client that numbers a server's GPUs from a base and chooses some (issue 13: Hello.
# device_base, Hello.devices) against rgpud on simgpu:   devsel.sh BUILD
# 1. Server A has 2 GPUs. The choice is honoured (GPU 1 alone, as the client's device 4) or
#    refused with a sentence and a log line (devsel hello).
# 2. A raw client's job on A's GPU 1 as its device 4 (devsel job): its memory counts on GPU 1
#    (rgpuctl status); devices 0 and 5 are refused. It is moved cold to B, which has 1 GPU, then
#    live back to A: each time the job comes back numbered from 4 on the target's first GPU,
#    every byte equal, device 4 its own and only it.
# 3. Its dumped state log (RGPU_STATE_DUMP) replays on a fresh worker with the numbering dumped
#    beside it (JOB.devices), and not without it.
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
devsel=$build/tests/e2e/devsel

mkdir -p "$tmp/dump"
srv_start A SIMGPU_DEVICES=2 RGPU_STATE_DUMP="$tmp/dump" -- --resume-grace 30
srv_start B SIMGPU_DEVICES=1 -- --resume-grace 30
A=$(srv_admin A)
B=$(srv_admin B)

# 1
RGPU_E2E_LOGFILE=$tmp/A/log "$devsel" hello "$(srv_port A)" || fail "devsel hello"

# 2
RGPU_E2E_LOGFILE=$tmp/A/log "$devsel" job "$(srv_port A)" 2 >"$tmp/job.out" 2>"$tmp/job.err" &
dpid=$!
wait_line() {
	i=0
	while ! grep -q "^$1\$" "$tmp/job.out" 2>/dev/null; do
		kill -0 "$dpid" 2>/dev/null || fail "devsel job ended before $1: $(cat "$tmp/job.out" "$tmp/job.err")"
		[ $i -ge 1200 ] && fail "no $1 from devsel job within 60 s"
		sleep 0.05
		i=$((i + 1))
	done
}
wait_line READY
grep -q "the client numbers this server's GPUs 1 as its devices 4..4" "$tmp/A/log" ||
	fail "A did not log the job's numbering"
# the worker tells the supervisor every 500 ms
i=0
while "$ctl" status --server "$A" --json >"$tmp/st.json" || fail "status of A"
	[ "$(json "$tmp/st.json" '[g["memory_used"] >= (4 << 20) for g in j["servers"][0]["gpus"]]')" != "[False, True]" ]; do
	[ $i -ge 100 ] && fail "the job's memory is not counted on A's GPU 1 alone: $(cat "$tmp/st.json")"
	sleep 0.05
	i=$((i + 1))
done
echo "ok: a job on A's GPU 1 as its device 4; its memory counted on GPU 1"
job=$(job_of A)
[ -n "$job" ] || fail "no job on A"
"$ctl" migrate "$job" --server "$A" --to "$B" --cold --json >"$tmp/m1.json" ||
	fail "cold migration to B: $(cat "$tmp/m1.json")"
wait_line "MOVED 1"
grep -q "numbers its devices from 4: its 1 here are this server's first" "$tmp/B/log" ||
	fail "B did not restore the job's numbering"
echo "ok: moved cold to B (1 GPU): still device 4, every byte equal"
"$ctl" migrate "$job" --server "$B" --to "$A" --json >"$tmp/m2.json" ||
	fail "live migration back to A: $(cat "$tmp/m2.json")"
[ "$(json "$tmp/m2.json" 'j["kind"]')" = live ] || fail "not a live migration: $(cat "$tmp/m2.json")"
wait_line "MOVED 2"
wait "$dpid" || fail "devsel job failed: $(cat "$tmp/job.out" "$tmp/job.err")"
echo "ok: moved live back to A (its first GPU this time): still device 4, every byte equal"

# 3
f=$tmp/dump/$job.stlog
[ -s "$f" ] && [ -s "$tmp/dump/$job.devices" ] || fail "no state log and numbering dumped for $job"
grep -qx "rgpu-devices 1 base=4 count=1" "$tmp/dump/$job.devices" ||
	fail "the dumped numbering: $(cat "$tmp/dump/$job.devices")"
# LeakSanitizer without TLS roots in the sanitizer build, as with_server.sh's replays (its
# tracer crashes on GCC 12's dynamic TLS otherwise; ignored by the other builds)
lsan=${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0:print_suppressions=0
out=$(LSAN_OPTIONS=$lsan SIMGPU_DEVICES=1 "$build/bin/rgpud" --replay "$f" ${driver:+--driver "$driver"} \
	--state-dir "$tmp/A/data" 2>&1) || fail "the replay of $job: $out"
echo "ok: replay with its numbering: $out"
mv "$tmp/dump/$job.devices" "$tmp/devices.away"
if out=$(LSAN_OPTIONS=$lsan SIMGPU_DEVICES=1 "$build/bin/rgpud" --replay "$f" ${driver:+--driver "$driver"} \
	--state-dir "$tmp/A/data" 2>&1); then
	fail "a replay without the numbering succeeded: $out"
fi
echo "ok: without it the replay fails: $(echo "$out" | tail -n 1)"
