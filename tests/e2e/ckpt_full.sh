#!/bin/sh
# A checkpoint that does not fit on the store's disk fails, saying so, and nothing else is lost
# (testing.md, reliability targets):   ckpt_full.sh BUILD
#
# rgpud's data folder is a 40 MiB tmpfs of the test's own (a private mount namespace, entered as
# an unprivileged user namespace; exit 77, skipped, where the kernel allows neither). A 16 MiB
# checkpoint of random data fits; a 24 MiB one does not: it must fail with a message about the
# disk's room, its job must run on, and the first checkpoint must still verify. Once the first
# is removed, the store's file keeps its pages (LMDB reuses them): the 24 MiB checkpoint must
# then fit, and verify. The store is written through a map, where a full disk used to be a
# SIGBUS that ended the job's worker mid-checkpoint.
set -u
if [ "${RGPU_CKPT_FULL_NS:-}" != 1 ]; then
	if ! unshare -r -m true 2>/dev/null; then
		echo "SKIP: no unprivileged user and mount namespaces here"
		exit 77
	fi
	RGPU_CKPT_FULL_NS=1 exec unshare -r -m sh "$0" "$@"
fi
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
mkdir -p "$tmp/A/data"
mount -t tmpfs -o size=40m tmpfs "$tmp/A/data" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
trap 'srv_stop A; umount "$tmp/A/data"; srv_cleanup' EXIT

srv_start A
A=$(srv_admin A)

ZDTM_FILL_MIB=16 ZDTM_FILL_SEED=1 zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
"$ctl" checkpoint "$(job_of A)" --server "$A" --json >"$tmp/first.json" ||
	fail "a 16 MiB checkpoint: $(cat "$tmp/first.json")"
zdtm_go
zdtm_finish 1
first=$(json "$tmp/first.json" 'j["id"]')
echo "ok: a 16 MiB checkpoint ($first) fits in 40 MiB"

ZDTM_FILL_MIB=24 ZDTM_FILL_SEED=2 zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" checkpoint "$job" --server "$A" >"$tmp/big.out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "a 24 MiB checkpoint fit beside the 16 MiB one in 40 MiB: $(cat "$tmp/big.out")"
grep -q "no room" "$tmp/big.out" || fail "the failure does not say the disk is full: $(cat "$tmp/big.out")"
echo "ok: a 24 MiB checkpoint failed (status $rc): $(tail -n 1 "$tmp/big.out")"
[ "$(job_of A)" = "$job" ] || fail "the job is gone after the failed checkpoint"
"$ctl" checkpoint verify "$first" --server "$A" >"$tmp/v.out" 2>&1 ||
	fail "the first checkpoint no longer verifies: $(cat "$tmp/v.out")"
echo "ok: checkpoint $first still verifies"
# the failed checkpoint gave the disk back what it took (a failed fallocate keeps its blocks)
free_k=$(df -k "$tmp/A/data" | awk 'NR == 2 { print $4 }')
[ "$free_k" -ge 8192 ] || fail "the failed checkpoint left $free_k KiB free on the store's disk: $(ls -ls "$tmp/A/data/store")"
echo "ok: the failed checkpoint left $free_k KiB free, as it found it"

"$ctl" checkpoint rm "$first" --server "$A" >"$tmp/rm.out" 2>&1 ||
	fail "removing the first checkpoint: $(cat "$tmp/rm.out")"
"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/second.json" ||
	fail "the 24 MiB checkpoint in the room the first left: $(cat "$tmp/second.json")"
second=$(json "$tmp/second.json" 'j["id"]')
"$ctl" checkpoint verify "$second" --server "$A" >"$tmp/v2.out" 2>&1 ||
	fail "the 24 MiB checkpoint does not verify: $(cat "$tmp/v2.out")"
echo "ok: with the first removed, the 24 MiB checkpoint ($second) fits in its room and verifies"
zdtm_go
zdtm_finish 1
echo "ok: the job ran on and its 24 MiB read back intact"
echo "ckpt_full: OK"
