#!/bin/sh
# What another job's checkpoint costs the server's other clients (testing.md, "Benchmarks"):
#   store_contention.sh BUILD [MIB]      (default 2048)
# A job holding MIB of random device memory (tests/zdtm/zdtm_fill) is checkpointed into a store
# on disk ($RGPU_BENCH_DATA, default a directory under /var/tmp: the per-batch sync is the
# point). While it runs, a new short job (tests/progs/vecadd, its module from the cache) is
# started again and again and `rgpuctl checkpoints` asked, each timed; the same before, with
# the server idle. Prints each series' median and maximum in seconds.
set -u
build=$1
mib=${2:-2048}
tmp=$(mktemp -d -p "${RGPU_BENCH_DATA:-/var/tmp}")
. "$(dirname "$0")/../e2e/servers.sh"

# seconds since $1 (date +%s%N), with microseconds (a sample runs in a subshell: it returns 1
# rather than fail, which would only end that subshell)
now() { date +%s%N; }
since() { awk -v t0="$1" -v t1="$(now)" 'BEGIN { printf "%.6f\n", (t1 - t0) / 1e9 }'; }
newjob() {
	t=$(now)
	"$ctl" run --server "127.0.0.1:$(srv_port A)" -- "$build/tests/progs/vecadd" >/dev/null 2>&1 ||
		return 1
	since "$t"
}
listing() {
	t=$(now)
	"$ctl" checkpoints --server "$(srv_admin A)" >/dev/null || return 1
	since "$t"
}
summary() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {
	if (!NR) { print "     0  (none)"; exit }
	m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "%6d  median %.3f  max %.3f\n", NR, m, v[NR] }'; }

srv_start A
newjob >/dev/null # the module cache holds vecadd's image from here on
idle_job="" idle_list=""
for _ in 1 2 3 4 5 6 7 8; do
	v=$(newjob) || fail "vecadd failed"
	idle_job="$idle_job $v"
	v=$(listing) || fail "rgpuctl checkpoints failed"
	idle_list="$idle_list $v"
done
ZDTM_FILL_MIB=$mib ZDTM_FILL_SEED=3 zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$("$ctl" jobs --server "$(srv_admin A)" --json | python3 -c '
import json, sys
print(next(j["job"] for j in json.load(sys.stdin)["jobs"] if j["program"].endswith("/zdtm_fill")))') ||
	fail "no zdtm_fill job"
"$ctl" checkpoint "$job" --server "$(srv_admin A)" >"$tmp/c.out" 2>&1 &
cpid=$!
busy_job="" busy_list=""
while kill -0 "$cpid" 2>/dev/null; do
	v=$(newjob) || fail "vecadd failed during the checkpoint"
	busy_job="$busy_job $v"
	v=$(listing) || fail "rgpuctl checkpoints failed during the checkpoint"
	busy_list="$busy_list $v"
done
wait "$cpid" || fail "the checkpoint failed: $(cat "$tmp/c.out")"
zdtm_go
zdtm_finish 1
echo "store_contention: a $mib MiB checkpoint into $tmp: $(tail -n 1 "$tmp/c.out")"
echo "  new job, idle:              $(echo "$idle_job" | summary)"
echo "  new job, during it:         $(echo "$busy_job" | summary)"
echo "  rgpuctl checkpoints, idle:  $(echo "$idle_list" | summary)"
echo "  rgpuctl checkpoints, during:$(echo "$busy_list" | summary)"
