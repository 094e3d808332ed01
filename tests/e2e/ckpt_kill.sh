#!/bin/sh
# kill -9 of rgpud at random moments of a checkpoint (testing.md, reliability targets; issue 9):
#   ckpt_kill.sh BUILD [RUNS]     (RUNS: $CKPT_KILL_RUNS, else 100)
#
# Each run: a program holding 32 MiB of patterned device memory (a new seed each run, so every
# checkpoint writes new chunks) is checkpointed, and rgpud (the supervisor and every worker) is
# killed with SIGKILL after a random 0-1000 ms, mostly while the checkpoint is being written. On
# restart the store must list only whole checkpoints: every one listed verifies (every chunk
# there and equal to its hash), a checkpoint rgpuctl was told is committed is listed, and the
# newest one restores (its memory filled and hashed again on the device against the manifest)
# every time. At the end every checkpoint is removed and the store holds no chunk: what the
# killed checkpoints left behind was collected.
set -u
build=$1
runs=${2:-${CKPT_KILL_RUNS:-100}}
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

committed=0 killed_during=0 restored=0 verified=""
run=0
while [ $run -lt "$runs" ]; do
	run=$((run + 1))
	srv_start A -- --resume-grace 5
	ZDTM_FILL_MIB=32 ZDTM_FILL_SEED=$run zdtm_start A zdtm_fill 1
	zdtm_wait_ready 1
	job=$(job_of A)
	[ -n "$job" ] || fail "no job"
	"$ctl" checkpoint "$job" --server "$(srv_admin A)" --json >"$tmp/c.json" 2>"$tmp/c.err" &
	cpid=$!
	ms=$(($(od -An -N2 -tu2 /dev/urandom) % 1000))
	sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
	srv_stop A KILL
	wait $cpid
	crc=$?
	kill -KILL "$zpid" 2>/dev/null
	wait "$zpid" 2>/dev/null
	zpid=
	if [ $crc -eq 0 ]; then
		# rgpuctl heard the commit: that checkpoint must survive the kill
		want=$(json "$tmp/c.json" 'j["id"]')
		committed=$((committed + 1))
	else
		want=
		killed_during=$((killed_during + 1))
	fi
	srv_start A -- --resume-grace 5
	"$ctl" checkpoints --server "$(srv_admin A)" --json >"$tmp/l.json" || fail "checkpoints"
	ids=$(json "$tmp/l.json" '" ".join(str(c["id"]) for c in j["checkpoints"])')
	if [ -n "$want" ]; then
		echo " $ids " | grep -q " $want " || fail "committed checkpoint $want is not listed ($ids)"
	fi
	# every checkpoint listed is whole (each one verified once)
	for id in $ids; do
		case " $verified " in *" $id "*) continue ;; esac
		"$ctl" checkpoint verify "$id" --server "$(srv_admin A)" >"$tmp/v.out" 2>&1 ||
			fail "listed checkpoint $id does not verify: $(cat "$tmp/v.out")"
		verified="$verified $id"
	done
	# and the newest restores, its bytes checked against the manifest on the device
	last=${ids##* }
	if [ -n "$last" ]; then
		"$ctl" restore "$last" --server "$(srv_admin A)" --to "$(srv_admin A)" \
			>"$tmp/r.out" 2>&1 || fail "checkpoint $last does not restore: $(cat "$tmp/r.out")"
		restored=$((restored + 1))
	fi
	srv_stop A
done
echo "ok: $runs kills: $committed after the commit, $killed_during during the checkpoint;" \
	"$(echo "$verified" | wc -w) checkpoints listed and verified, the newest restored $restored times"

# the store empties: the chunks of the killed checkpoints are collected with the last rm
srv_start A
"$ctl" checkpoints --server "$(srv_admin A)" --json >"$tmp/l.json" || fail "checkpoints"
for id in $(json "$tmp/l.json" '" ".join(str(c["id"]) for c in j["checkpoints"])'); do
	"$ctl" checkpoint rm "$id" --server "$(srv_admin A)" >/dev/null || fail "rm $id"
done
"$ctl" checkpoints --server "$(srv_admin A)" --json >"$tmp/l.json" || fail "checkpoints"
[ "$(json "$tmp/l.json" 'j["stores"][0]["chunks"]')" = 0 ] ||
	fail "chunks left in the store after every checkpoint was removed: $(cat "$tmp/l.json")"
echo "ok: every checkpoint removed, no chunk left in the store"
