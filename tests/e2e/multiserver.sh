#!/bin/sh
# One program on the devices of several rgpud servers (issue 13), on simgpu:
#   multiserver.sh BUILD
#
# 1. tests/zdtm/zdtm_multidev on two servers (RGPU_SERVERS=A,B: its copies between the servers
#    worker to worker, then relayed by the client, RGPU_PEER_RELAY=1), then on four (A, B, C with two
#    devices of which it chooses the second, D): a vector add split over every device, peer
#    copies both ways round the ring with patterned data, cross-device event waits, copies and
#    sets that reach a device that is not current, every byte checked (its OK line names the
#    device count).
# 2. One device's job migrated while the others run: zdtm_multidev on A and B for three rounds;
#    at its first READY B's job moves to C (cold), at its second back to B live; A's job stays
#    where it was, and the program checks every byte on every device after each round.
#    A source that stops sending halfway through a copy (a fault site): the program ends with
#    the error, both servers name the copy and the bytes that came.
# 3. Refusals, each one clear line: a server list that does not parse, a device a server does
#    not have, servers whose device address windows differ.
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
prog=$build/tests/zdtm/zdtm_multidev

srv_start A -- --resume-grace 30
srv_start B -- --resume-grace 30
srv_start C SIMGPU_DEVICES=2 -- --resume-grace 30
srv_start D -- --resume-grace 30
pa=127.0.0.1:$(srv_port A)
pb=127.0.0.1:$(srv_port B)
pc=127.0.0.1:$(srv_port C)
pd=127.0.0.1:$(srv_port D)
# C's second device on simgpu; on a GPU host with one GPU, its only one
cdev=1
[ -z "$driver" ] && cdev=0

# run_multi NDEV SERVERS...: the program, once, through rgpuctl run --server for each
run_multi() {
	n=$1
	shift
	args=""
	for s in "$@"; do args="$args --server $s"; done
	# shellcheck disable=SC2086 # the server options and the launcher are lists
	RGPU_VERIFY_LOG=1 ZDTM_NO_WAIT=1 ZDTM_NDEV=$n RGPU_LOG=info "$ctl" run $args -- ${RGPU_APP_LAUNCHER:-} "$prog" \
		>"$tmp/run.out" 2>"$tmp/run.err" || fail "$n devices ($*): $(cat "$tmp/run.out" "$tmp/run.err")"
	grep -q "^zdtm multidev: OK rounds=1 .* devices=$n$" "$tmp/run.out" ||
		fail "$n devices: no OK line: $(cat "$tmp/run.out")"
	grep -q "$n devices from $# servers" "$tmp/run.err" ||
		fail "$n devices: the interposer did not say it used $# servers: $(cat "$tmp/run.err")"
	echo "ok: $n devices of $# servers: $(tail -n 1 "$tmp/run.out")"
}
run_multi 2 "$pa" "$pb"
# the copies between servers went worker to worker (PEER_COPY): each server took a peer link
for s in A B; do
	grep -q "peer link from" "$tmp/$s/log" || fail "no copy came to $s worker to worker: $(tail -n 5 "$tmp/$s/log")"
done
# and the relay through the client, which a server without PEER_COPY still gets, works too
RGPU_PEER_RELAY=1 run_multi 2 "$pa" "$pb"
run_multi 4 "$pa" "$pb" "$pc/$cdev" "$pd"
[ $cdev = 1 ] && run_multi 4 "$pc" "$pa" "$pd"

# 2: B's job moves while A's runs on
ZDTM_ROUNDS=3 ZDTM_NDEV=2 RGPU_LOG=info "$ctl" run --server "$pa" --server "$pb" -- \
	${RGPU_APP_LAUNCHER:-} "$prog" >"$tmp/z.out" 2>"$tmp/z.err" &
zpid=$!
zout=$tmp/z.out
zdtm_wait_ready 1
ja=$(job_of A)
jb=$(job_of B)
[ -n "$ja" ] && [ -n "$jb" ] || fail "no job on A ($ja) or on B ($jb)"
[ "$ja" != "$jb" ] || fail "one job id on both servers: $ja"
"$ctl" migrate "$jb" --server "$(srv_admin B)" --to "$(srv_admin C)" --cold --json >"$tmp/m1.json" ||
	fail "migrate B -> C: $(cat "$tmp/m1.json")"
[ "$(job_of B)" = "" ] || fail "the job still runs on B after its migration"
[ "$(job_of C)" = "$jb" ] || fail "B's job is not on C"
[ "$(job_of A)" = "$ja" ] || fail "A's job changed when B's moved"
zdtm_go
zdtm_wait_ready 2
"$ctl" migrate "$jb" --server "$(srv_admin C)" --to "$(srv_admin B)" --json >"$tmp/m2.json" ||
	fail "live migrate C -> B: $(cat "$tmp/m2.json")"
[ "$(job_of B)" = "$jb" ] || fail "the job is not back on B"
zdtm_go
zdtm_wait_ready 3
zdtm_go
zdtm_finish 3
grep -q "job $jb: moved from $pb to $pc" "$tmp/z.err" || fail "the client did not follow its job to C: $(cat "$tmp/z.err")"
echo "ok: device 1's job B -> C (cold) -> B (live) while device 0's stayed on A; $(tail -n 1 "$zout")"
echo "    $(json "$tmp/m1.json" '"B->C: held %.1f ms" % (j["pause_ns"]/1e6)');" \
	"$(json "$tmp/m2.json" '"C->B: held %.1f ms" % (j["pause_ns"]/1e6)')"

# a source that stops sending halfway through a copy (RGPU_FAULT=peer_send_cut): both jobs get
# the error, each server says which copy failed after how many bytes, the program ends with it
srv_start F RGPU_FAULT=peer_send_cut -- --resume-grace 30
t0=$(date +%s)
# shellcheck disable=SC2086 # the launcher is a command prefix
ZDTM_NO_WAIT=1 ZDTM_NDEV=2 RGPU_LOG=warn timeout 120 "$ctl" run --server "127.0.0.1:$(srv_port F)" \
	--server "$pb" -- ${RGPU_APP_LAUNCHER:-} "$prog" >"$tmp/cut.out" 2>&1 &&
	fail "a copy cut halfway went unnoticed: $(cat "$tmp/cut.out")"
[ $(($(date +%s) - t0)) -lt 60 ] || fail "the program took $(($(date +%s) - t0)) s to see the cut copy"
grep -q "zdtm multidev: FAIL .*cudaError" "$tmp/cut.out" || fail "no CUDA error for the cut copy: $(cat "$tmp/cut.out")"
grep -q "copy [0-9]* to job .* failed after 4194304 of 5246979 bytes: fault site peer_send_cut" "$tmp/F/log" ||
	fail "the source did not name the cut copy: $(tail -n 5 "$tmp/F/log")"
grep -q "copy [0-9]* from another server .* failed after 4194304 of 5246979 bytes" "$tmp/B/log" ||
	fail "the destination did not name the cut copy: $(grep copy "$tmp/B/log" | tail -n 3)"
echo "ok: a copy cut halfway by its source: the program fails with $(grep -o 'cudaError[A-Za-z]*' "$tmp/cut.out" | head -n 1), both servers name it"
srv_stop F

# 3: refusals
refused() { # WHAT PATTERN ENV...
	what=$1
	pat=$2
	shift 2
	# shellcheck disable=SC2086 # the launcher is a command prefix
	env "$@" RGPU_LOG=warn LD_LIBRARY_PATH="$build/lib/interposer" ZDTM_NO_WAIT=1 \
		${RGPU_APP_LAUNCHER:-} "$prog" >"$tmp/r.out" 2>&1 &&
		fail "$what: the program ran: $(cat "$tmp/r.out")"
	grep -q "$pat" "$tmp/r.out" || fail "$what: no line saying '$pat': $(cat "$tmp/r.out")"
	echo "ok: refused: $what: $(grep "$pat" "$tmp/r.out" | head -n 1)"
}
refused "a list that does not parse" "is not HOST:PORT\[/DEV" RGPU_SERVERS="$pa,,x:"
refused "a device the server does not have" "asked for GPU 5" RGPU_SERVERS="$pa,$pb/5"
srv_start E -- --window 0x300000000000:16T
refused "servers with different windows" "must share it" \
	RGPU_SERVERS="$pa,127.0.0.1:$(srv_port E)"
srv_stop E
echo "PASS multiserver"
