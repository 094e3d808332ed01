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

now() { date +%s.%N; }
secs() { echo "$(now) - $1" | bc; }
newjob() {
	t=$(now)
	"$ctl" run --server "127.0.0.1:$(srv_port A)" -- "$build/tests/progs/vecadd" >/dev/null 2>&1 ||
		fail "vecadd failed"
	secs "$t"
}
listing() {
	t=$(now)
	"$ctl" checkpoints --server "$(srv_admin A)" >/dev/null || fail "checkpoints failed"
	secs "$t"
}
summary() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {
	printf "%6d  median %.3f  max %.3f\n", NR, v[int((NR + 1) / 2)], v[NR] }'; }

srv_start A
newjob >/dev/null # the module cache holds vecadd's image from here on
idle_job="" idle_list=""
for _ in 1 2 3 4 5 6 7 8; do
	idle_job="$idle_job $(newjob)"
	idle_list="$idle_list $(listing)"
done
ZDTM_FILL_MIB=$mib ZDTM_FILL_SEED=3 zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
job=$(job_of A)
"$ctl" checkpoint "$job" --server "$(srv_admin A)" >"$tmp/c.out" 2>&1 &
cpid=$!
busy_job="" busy_list=""
while kill -0 "$cpid" 2>/dev/null; do
	busy_job="$busy_job $(newjob)"
	busy_list="$busy_list $(listing)"
done
wait "$cpid" || fail "the checkpoint failed: $(cat "$tmp/c.out")"
zdtm_go
zdtm_finish 1
echo "store_contention: a $mib MiB checkpoint into $tmp: $(tail -n 1 "$tmp/c.out")"
echo "  new job, idle:              $(echo "$idle_job" | summary)"
echo "  new job, during it:         $(echo "$busy_job" | summary)"
echo "  rgpuctl checkpoints, idle:  $(echo "$idle_list" | summary)"
echo "  rgpuctl checkpoints, during:$(echo "$busy_list" | summary)"
