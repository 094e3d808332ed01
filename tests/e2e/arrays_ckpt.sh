#!/bin/sh
# CUDA arrays through checkpoints, restores and migrations (docs/architecture.md, "Arrays,
# textures and surfaces"):   arrays_ckpt.sh BUILD
#
# tests/zdtm/zdtm_arrays holds a 1D, a 2D (with a surface and a texture object), a layered, a 3D
# and a cubemap array and a mipmapped array of 4 levels, elements of 1 to 16 bytes, every byte
# patterned; after each READY it checks every byte of every level, layer and face, reads two of
# them through their texture objects, then rewrites them all with new patterns. It talks to
# server A through a proxy (tests/e2e/cutproxy, no cuts), and:
#  1. is checkpointed at its first READY (rgpuctl says how many bytes are arrays'); A is killed,
#     started again, and the checkpoint restored on B; the proxy, started again on its port in
#     front of B, is where the client finds the job: it resumes there from the checkpoint;
#  2. is migrated cold B -> A, 3. live A -> B (its arrays cross at the switchover);
#  4. a cold migration to C, whose driver would give its texture object another value
#     (SIMGPU_TEXOBJ_SKEW), fails saying so and the job runs on on B;
# and must pass every check of its four rounds. Then a job whose checkpoints hold one byte too
# few of each array (RGPU_FAULT=ckpt_array_short) is migrated cold and live: both restores fail
# naming the array, nothing is left on the target, and the job runs on and passes.
set -u
# the proxy cuts TCP: a client on this host must not move its link to shared memory past it
export RGPU_TRANSPORT=tcp
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

proxy_pid=
proxy_start() { # TARGET_NAME [PORT]
	rm -f "$tmp/pport"
	"$build/tests/e2e/cutproxy" --listen "127.0.0.1:${2:-0}" --target "127.0.0.1:$(srv_port "$1")" \
		--cuts 0 --port-file "$tmp/pport" 2>>"$tmp/proxy.log" &
	proxy_pid=$!
	i=0
	while [ ! -s "$tmp/pport" ] && [ $i -lt 200 ]; do
		kill -0 $proxy_pid 2>/dev/null || fail "cutproxy did not start: $(cat "$tmp/proxy.log")"
		sleep 0.02
		i=$((i + 1))
	done
	pport=$(cat "$tmp/pport")
}
proxy_stop() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
	proxy_pid=
}
trap 'proxy_stop; srv_cleanup' EXIT

srv_start A -- --resume-grace 60
srv_start B SIMGPU_GLOBALS_SKEW=65536 -- --resume-grace 60
A=$(srv_admin A)
B=$(srv_admin B)
proxy_start A

p=arrays
zout=$tmp/zdtm_arrays.out
: >"$zout" # before the program: the waits below read it at once
ZDTM_ROUNDS=4 RGPU_LOG=info "$ctl" run --server "127.0.0.1:$pport" -- \
	${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/zdtm_arrays" >"$zout" 2>"$zout.err" &
zpid=$!

# 1: checkpoint, A gone, restore on B, the client resumes there from the checkpoint
zdtm_wait_ready 1
job=$(job_of A)
[ -n "$job" ] || fail "no job on A"
"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c.json" || fail "checkpoint: $(cat "$tmp/c.json")"
# the program's arrays: 66619 bytes of elements (zdtm_arrays' OK line says so too)
[ "$(json "$tmp/c.json" 'j["array_bytes"] == 66619 and j["device_bytes"] >= 66619')" = True ] ||
	fail "checkpoint reply: $(cat "$tmp/c.json")"
id=$(json "$tmp/c.json" 'j["id"]')
"$ctl" checkpoint "$job" --server "$A" >"$tmp/c.txt" 2>&1 || fail "second checkpoint: $(cat "$tmp/c.txt")"
grep -q "65.1 KiB of it in CUDA arrays" "$tmp/c.txt" || fail "checkpoint's line: $(cat "$tmp/c.txt")"
"$ctl" checkpoint verify "$id" --server "$A" >"$tmp/v.out" 2>&1 || fail "verify: $(cat "$tmp/v.out")"
proxy_stop
srv_stop A KILL
srv_start A -- --resume-grace 60
A=$(srv_admin A)
"$ctl" restore "$id" --server "$A" --to "$B" --json >"$tmp/r.json" || fail "restore: $(cat "$tmp/r.json")"
[ "$(json "$tmp/r.json" 'j["job"]')" = "$job" ] || fail "restored another job: $(cat "$tmp/r.json")"
grep -q "restored from checkpoint" "$tmp/B/log" || fail "no restore in B's log"
proxy_start B "$pport"
zdtm_go
zdtm_wait_ready 2
[ "$(job_of B)" = "$job" ] || fail "the job is not on B after its restore"
[ "$(job_of A)" = "" ] || fail "a job is on A after the restore on B"
echo "ok: checkpoint $id ($(json "$tmp/c.json" 'j["array_bytes"]') bytes of arrays) restored on B, the client resumed there and checked every byte"

# 2: cold B -> A
"$ctl" migrate "$job" --server "$B" --to "$A" --cold --json >"$tmp/m.json" ||
	fail "cold migration B -> A: $(cat "$tmp/m.json")"
[ "$(job_of A)" = "$job" ] && [ "$(job_of B)" = "" ] || fail "the job is not on A alone"
zdtm_go
zdtm_wait_ready 3
echo "ok: cold migration B -> A (held $(json "$tmp/m.json" '"%.1f ms" % (j["pause_ns"] / 1e6)'))"

# 3: live A -> B
"$ctl" migrate "$job" --server "$A" --to "$B" --json >"$tmp/m.json" ||
	fail "live migration A -> B: $(cat "$tmp/m.json")"
[ "$(json "$tmp/m.json" 'j["kind"] == "live" and j["rounds"] >= 1')" = True ] ||
	fail "live reply: $(cat "$tmp/m.json")"
[ "$(job_of B)" = "$job" ] && [ "$(job_of A)" = "" ] || fail "the job is not on B alone"
grep -q "checkpoint .*: .* 6 CUDA array(s)" "$tmp/A/log" || fail "no checkpoint of 6 arrays in A's log"
zdtm_go
zdtm_wait_ready 4
echo "ok: live migration A -> B ($(json "$tmp/m.json" 'j["rounds"]') round(s), held $(json "$tmp/m.json" '"%.1f ms" % (j["pause_ns"] / 1e6)'))"

# 4: a target whose driver gives the texture object another value: refused, the job runs on
if [ "${RGPU_E2E_DRIVER:-}" != system ]; then
	srv_start C SIMGPU_TEXOBJ_SKEW=7
	"$ctl" migrate "$job" --server "$B" --to "$(srv_admin C)" --cold >"$tmp/m.out" 2>&1 &&
		fail "a migration to a driver giving other texture values succeeded"
	grep -q "cannot be placed" "$tmp/m.out" || fail "refused without the reason: $(cat "$tmp/m.out")"
	[ "$(job_of B)" = "$job" ] || fail "the job is gone from B"
	sleep 0.6
	[ "$(job_of C)" = "" ] || fail "a job stayed on C"
	srv_stop C
	echo "ok: a target giving the texture object another value refuses the job: $(tail -n 1 "$tmp/m.out" | cut -c1-140)"
fi
zdtm_go
zdtm_finish 4
echo "ok: $(tail -n 1 "$zout")"
proxy_stop

# a checkpoint whose arrays do not match the job: the restore names the array, the job runs on
srv_stop A
srv_start A RGPU_FAULT=ckpt_array_short -- --resume-grace 60
A=$(srv_admin A)
zdtm_start A zdtm_arrays 1
zdtm_wait_ready 1
job=$(job_of A)
for how in --cold ""; do
	# shellcheck disable=SC2086 # how: an option or none
	"$ctl" migrate "$job" --server "$A" --to "$B" $how >"$tmp/m.out" 2>&1 &&
		fail "migration ${how:-live} of a job whose arrays are cut short succeeded"
	grep -q "for array [0-9]* (1D, 3001 x 1 x 1, 1-byte elements), which needs" "$tmp/m.out" ||
		fail "migration ${how:-live}: no array named: $(cat "$tmp/m.out")"
	grep -q "the job runs on there" "$tmp/m.out" || fail "migration ${how:-live}: $(cat "$tmp/m.out")"
	[ "$(job_of A)" = "$job" ] || fail "the job is gone from A"
	sleep 0.6
	[ "$(job_of B)" = "" ] || fail "a job stayed on B"
	echo "ok: migration ${how:-live} of a checkpoint with a short array fails: $(tail -n 1 "$tmp/m.out" | cut -c1-160)"
done
zdtm_go
zdtm_finish 1
echo "arrays_ckpt: all passed"
