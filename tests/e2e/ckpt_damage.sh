#!/bin/sh
# A damaged checkpoint is refused, naming what is wrong (testing.md, reliability targets;
# issue 9):   ckpt_damage.sh BUILD
#
# For each kind of damage a fresh checkpoint (8 MiB of random data, a new seed: its chunks are
# its own) is damaged in the store behind rgpud's back (tests/e2e/storepoke): a chunk of device
# memory with a bit flipped, cut short or deleted; a chunk of its state log flipped; its
# manifest flipped or cut. Then `rgpuctl checkpoint verify` and `rgpuctl restore` must both
# fail with exit status 5 and a message naming the chunk (its index and hash) or the manifest,
# and no job may appear on the target. The sanitizer suite runs the same (0 crashes under ASan).
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
poke=$build/tests/e2e/storepoke

srv_start A
srv_start B
A=$(srv_admin A)
B=$(srv_admin B)
store=$tmp/A/data/store
seed=100

# a new checkpoint of a finished program: its id in id (not in a subshell: the seed goes on)
new_ckpt() {
	seed=$((seed + 1))
	ZDTM_FILL_MIB=8 ZDTM_FILL_SEED=$seed zdtm_start A zdtm_fill 1
	zdtm_wait_ready 1
	"$ctl" checkpoint "$(job_of A)" --server "$A" --json >"$tmp/c.json" ||
		fail "checkpoint: $(cat "$tmp/c.json")"
	zdtm_go
	zdtm_finish 1
	id=$(json "$tmp/c.json" 'j["id"]')
}

# expect_refused ID WHAT PATTERN: verify and restore of checkpoint ID fail with status 5 and a
# message matching PATTERN; nothing runs on B
expect_refused() {
	"$ctl" checkpoint verify "$1" --server "$A" >"$tmp/v.out" 2>&1
	rc=$?
	[ $rc -eq 5 ] || fail "$2: verify exited $rc, want 5: $(cat "$tmp/v.out")"
	grep -q "$3" "$tmp/v.out" || fail "$2: verify does not say /$3/: $(cat "$tmp/v.out")"
	"$ctl" restore "$1" --server "$A" --to "$B" >"$tmp/r.out" 2>&1
	rc=$?
	[ $rc -eq 5 ] || fail "$2: restore exited $rc, want 5: $(cat "$tmp/r.out")"
	grep -q "$3" "$tmp/r.out" || fail "$2: restore does not say /$3/: $(cat "$tmp/r.out")"
	sleep 0.6
	[ "$(job_of B)" = "" ] || fail "$2: a job came of a damaged checkpoint"
	echo "ok: $2: refused by verify and restore: $(sed 's/^rgpuctl [a-z ]*: //' "$tmp/v.out" | head -c 200)"
}

# pick ID KIND: a chunk of checkpoint ID of that kind of blob that no other checkpoint names
# (chunks are shared by content: a slab of small allocations may be the same in all of them);
# sets idx (its place in the list) and h (its hash)
pick() {
	"$poke" "$store" list "$1" >"$tmp/mine" || fail "list $1"
	: >"$tmp/others"
	for o in $("$ctl" checkpoints --server "$A" --json | python3 -c \
		'import json,sys; print(" ".join(str(c["id"]) for c in json.load(sys.stdin)["checkpoints"]))'); do
		[ "$o" = "$1" ] || "$poke" "$store" list "$o" >>"$tmp/others" 2>/dev/null
	done
	idx=0
	while read -r line kind; do
		[ "$kind" = "$2" ] && ! grep -q "$line" "$tmp/others" && { h=$line; return; }
		idx=$((idx + 1))
	done <"$tmp/mine"
	fail "checkpoint $1 has no $2 chunk of its own: $(cat "$tmp/mine") others: $(sort -u "$tmp/others" | head -30)"
}

# the memory the programs share (the same slab of small allocations) is in one checkpoint first
new_ckpt

# device memory: the 8 MiB allocation is each checkpoint's own
new_ckpt
pick "$id" device
"$poke" "$store" chunk "$h" flip || fail "poke"
expect_refused "$id" "a bit flipped in a chunk of device memory" "chunk $idx .*$(echo "$h" | cut -c1-12).*hash"

new_ckpt
pick "$id" device
"$poke" "$store" chunk "$h" cut || fail "poke"
expect_refused "$id" "a chunk of device memory cut short" "chunk $idx .*lengths that do not match its bytes"

new_ckpt
pick "$id" device
"$poke" "$store" chunk "$h" rm || fail "poke"
expect_refused "$id" "a chunk of device memory gone" "chunk $idx .*not in the store"

# a host-side part: the frames kept for the client carry the job's own session
new_ckpt
pick "$id" kept
"$poke" "$store" chunk "$h" flip || fail "poke"
expect_refused "$id" "a bit flipped in the frames kept for the client" "chunk $idx of [0-9]* (.*the frames kept for the client)"

new_ckpt
"$poke" "$store" manifest "$id" flip || fail "poke"
expect_refused "$id" "a bit flipped in the manifest" "checkpoint $id: its manifest is damaged"

new_ckpt
"$poke" "$store" manifest "$id" cut || fail "poke"
expect_refused "$id" "the manifest cut short" "checkpoint $id: its manifest is damaged"

# the damaged ones are left out of the listing (said in the log), the others listed
"$ctl" checkpoints --server "$A" --json >"$tmp/l.json" || fail "checkpoints"
[ "$(json "$tmp/l.json" 'len(j["checkpoints"])')" -ge 4 ] || fail "listing: $(cat "$tmp/l.json")"
echo "ckpt_damage: all passed"
