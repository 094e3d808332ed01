#!/bin/sh
# rgpu in Slurm (issue 15), on simgpu: the plugin (spank_rgpu.so), job_submit.lua and rgpuctl slurm
# in a private one-node cluster (cluster.sh) with two rgpud servers A and B:
#   rgpu_slurm.sh BUILD
# 1. The cluster file names A alone: rgpuctl slurm licenses writes Licenses=rgpu:1.
# 2. Job 1 (sbatch --rgpu=1:64) takes rgpu:1, runs an nvcc program (rt_printf_static) through
#    rgpu on A: its output is exactly the expected file; its tasks see RGPU_SERVERS=A/0 and
#    RGPU_JOB_LABEL=slurm-ID; A holds the reservation slurm-ID while it runs.
# 3. Job 2 (--rgpu=1) waits with Reason=Licenses while job 1 holds the only GPU, then runs,
#    its output exact; job 1's epilog ended its reservation.
# 4. B joins the cluster file: licenses --write --reconfigure makes Total=2. Job 3 runs
#    zdtm_fill (checks its memory while it rewrites it); while Slurm runs it, rgpuctl migrate
#    moves its program live from A to B, the reservation with it; its checks pass, the job
#    COMPLETES, and no reservation is left.
#    consolidate then moves a job's reservation with its program onto the server of a plain rgpu
#    job (one server emptied), both programs' checks passing; srun --rgpu=1 outside a batch job
#    runs the nvcc program with the exact output.
# 5. A job asking more memory than any GPU has fails with the placement's words; --rgpu=x is
#    refused by sbatch.
# Root only. SRV_KEEP=1 keeps the directory.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/rgpu-slurm.XXXXXX)
chmod 0755 "$tmp" # munged's rule for the directories above its socket
. "$src/tests/e2e/servers.sh"
. "$src/tests/slurm/cluster.sh"
trap 'slurm_stop; srv_cleanup' EXIT
trap 'exit 143' INT TERM HUP
fail() {
	echo "FAIL: $*"
	for s in A B; do [ -e "$tmp/$s/log" ] && { echo "--- rgpud $s log"; tail -n 25 "$tmp/$s/log"; }; done
	for f in "$tmp"/slurm/jobs/*.out; do [ -e "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
	slurm_logs
	exit 1
}
t0=$(date +%s)
step() { echo "rgpu_slurm: $(($(date +%s) - t0)) s: $*"; }
[ "$(id -u)" -eq 0 ] || fail "the Slurm tests run as root (slurmd starts the jobs)"
plugin=$build/lib/slurm/spank_rgpu.so
[ -e "$plugin" ] || fail "no $plugin: the build had no slurm/spank.h (Debian: libslurm-dev)"
prog=$build/tests/cuda/rt_printf_static
[ -x "$prog" ] || fail "no $prog (RGPU_BUILD_CUDA_TESTS)"
launch=${RGPU_APP_LAUNCHER:-}
# no_reservations ADMIN WHAT: wait (10 s) until the server holds no reservation (the epilog's)
no_reservations() {
	i=0
	until [ "$("$ctl" status --server "$1" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["servers"][0]["reservations"]))')" = 0 ]; do
		[ $i -ge 100 ] && fail "$2 not ended: $("$ctl" status --server "$1")"
		sleep 0.1
		i=$((i + 1))
	done
}
# ready NAME...: wait (60 s) until each program's $tmp/NAME.txt says READY; else fail with what
# each wrote (NAME.txt, NAME.err)
ready() {
	i=0
	for n in "$@"; do
		until grep -q '^READY$' "$tmp/$n.txt" 2>/dev/null; do
			[ $i -ge 600 ] && fail "no READY from $* within 60 s: $(for m in "$@"; do cat "$tmp/$m.txt" "$tmp/$m.err"; done)"
			sleep 0.1
			i=$((i + 1))
		done
	done
}

export RGPU_RESUME_TIMEOUT_S=30
for s in A B; do srv_start $s -- --resume-grace 30; done
A=$(srv_admin A)
B=$(srv_admin B)
PA=127.0.0.1:$(srv_port A)
echo "$A" >"$tmp/cluster"
c="--cluster $tmp/cluster --state $tmp/state.json"

# 1. the license: one GPU
# shellcheck disable=SC2086
[ "$("$ctl" slurm licenses $c --write "$tmp/rgpu-licenses.conf")" = "rgpu:1 (written; was different)" ] ||
	fail "licenses for A alone"
echo "required $plugin cluster=$tmp/cluster rgpuctl=$ctl interposer=$build/lib/interposer state=$tmp/state.json" \
	>"$tmp/plugstack.conf"
slurm_start "$tmp/slurm" --include "$tmp/rgpu-licenses.conf" --job-submit-lua "$src/slurm/job_submit.lua" \
	--plugstack "$tmp/plugstack.conf" --cpus 4 --min-job-age 60
[ "$(slurm_lic rgpu Total)" = 1 ] || fail "Slurm's rgpu license: Total=$(slurm_lic rgpu Total), want 1"
step "cluster up, Licenses=rgpu:1"

# 2. job 1 holds the GPU until told; its program's output is exact
j1=$(slurm_sbatch --rgpu=1:64 --wrap "echo RGPU_SERVERS=\$RGPU_SERVERS RGPU_JOB_LABEL=\$RGPU_JOB_LABEL
$launch $prog >$tmp/j1.txt 2>$tmp/j1.err; echo prog=\$?
while [ ! -e $tmp/go1 ]; do sleep 0.1; done") || fail "sbatch job 1"
slurm_wait_job "$j1" RUNNING 30
[ "$(slurm_job_field "$j1" Licenses)" = rgpu:1 ] || fail "job 1's licenses: $(slurm_job_field "$j1" Licenses)"
i=0
until grep -q "^prog=" "$(slurm_job_output "$j1")"; do
	[ $i -ge 600 ] && fail "job 1's program did not end within 60 s"
	sleep 0.1
	i=$((i + 1))
done
out1=$(slurm_job_output "$j1")
[ "$(head -n 1 "$out1")" = "RGPU_SERVERS=$PA/0 RGPU_JOB_LABEL=slurm-$j1" ] || fail "job 1's environment: $(head -n 1 "$out1")"
grep -q "^prog=0$" "$out1" || fail "job 1's program failed: $(cat "$out1" "$tmp/j1.err")"
cmp -s "$src/tests/cuda/rt_printf.expected" "$tmp/j1.txt" ||
	fail "job 1's program printed otherwise: $(diff "$src/tests/cuda/rt_printf.expected" "$tmp/j1.txt" | head)"
grep -q "worker: job .*program .*rt_printf_static" "$tmp/A/log" || fail "the program did not run on A"
"$ctl" status --server "$A" --json >"$tmp/st.json"
[ "$(json "$tmp/st.json" '[(r["name"], r["bytes"]) for r in j["servers"][0]["reservations"]]')" = "[('slurm-$j1', 67108864)]" ] ||
	fail "A's reservations while job 1 runs: $(cat "$tmp/st.json")"
step "job $j1 took rgpu:1, its nvcc program ran on A with the expected output; A holds slurm-$j1 (64 MiB)"

# 3. job 2 waits for the license
j2=$(slurm_sbatch --rgpu=1 --wrap "$launch $prog >$tmp/j2.txt 2>$tmp/j2.err; echo prog=\$?") || fail "sbatch job 2"
i=0
until [ "$(slurm_job_field "$j2" Reason)" = Licenses ]; do
	[ $i -ge 100 ] && fail "job 2: $(slurm_job_state "$j2") Reason=$(slurm_job_field "$j2" Reason), want PENDING for Licenses"
	sleep 0.1
	i=$((i + 1))
done
[ "$(slurm_job_state "$j2")" = PENDING ] || fail "job 2 is $(slurm_job_state "$j2")"
step "job $j2 waits (Reason=Licenses) while job $j1 holds the only GPU"
touch "$tmp/go1"
slurm_wait_job "$j1" COMPLETED 30
slurm_wait_job "$j2" COMPLETED 60
grep -q "^prog=0$" "$(slurm_job_output "$j2")" || fail "job 2's program failed: $(cat "$tmp/j2.err")"
cmp -s "$src/tests/cuda/rt_printf.expected" "$tmp/j2.txt" || fail "job 2's program printed otherwise"
no_reservations "$A" "the jobs' reservations were"
step "job $j2 ran once job $j1 ended, output exact; both reservations ended by the epilog"

# 4. B joins; a job migrated while Slurm runs it
printf '%s\n%s\n' "$A" "$B" >"$tmp/cluster"
# shellcheck disable=SC2086
[ "$("$ctl" slurm licenses $c --write "$tmp/rgpu-licenses.conf" --reconfigure)" = "rgpu:2 (written; was different)" ] ||
	fail "licenses with B"
i=0
until [ "$(slurm_lic rgpu Total)" = 2 ]; do
	[ $i -ge 100 ] && fail "Slurm's rgpu license: Total=$(slurm_lic rgpu Total) after the reconfigure, want 2"
	sleep 0.1
	i=$((i + 1))
done
j3=$(slurm_sbatch --rgpu=1:16 --wrap "ZDTM_FILL_MIB=8 ZDTM_FILL_BUSY=4 ZDTM_ROUNDS=1 $launch $build/tests/zdtm/zdtm_fill >$tmp/j3.txt 2>$tmp/j3.err; echo prog=\$?") ||
	fail "sbatch job 3"
slurm_wait_job "$j3" RUNNING 30
ready j3
"$ctl" jobs --server "$A" --json >"$tmp/jobs.json"
rj=$(json "$tmp/jobs.json" '[x["job"] for x in j["jobs"] if x["label"] == "slurm-'"$j3"'"][0]') ||
	fail "job 3's program is not on A: $(cat "$tmp/jobs.json")"
cpid=$(json "$tmp/jobs.json" '[x["client_pid"] for x in j["jobs"] if x["label"] == "slurm-'"$j3"'"][0]')
"$ctl" migrate "$rj" --server "$A" --to "$B" --json >"$tmp/mig.json" || fail "migrate: $(cat "$tmp/mig.json")"
[ "$(json "$tmp/mig.json" 'j["reservation"]')" = "slurm-$j3" ] || fail "the reservation did not follow: $(cat "$tmp/mig.json")"
"$ctl" status --server "$B" --json >"$tmp/stb.json"
[ "$(json "$tmp/stb.json" '[r["name"] for r in j["servers"][0]["reservations"]]')" = "['slurm-$j3']" ] ||
	fail "B's reservations: $(cat "$tmp/stb.json")"
[ "$(slurm_job_state "$j3")" = RUNNING ] || fail "job 3 is $(slurm_job_state "$j3") after the migration"
kill -USR1 "$cpid"
slurm_wait_job "$j3" COMPLETED 60
grep -q "^prog=0$" "$(slurm_job_output "$j3")" || fail "job 3's program failed: $(cat "$tmp/j3.txt" "$tmp/j3.err")"
grep -q "^zdtm fill: OK rounds=1 " "$tmp/j3.txt" || fail "job 3's checks: $(cat "$tmp/j3.txt")"
no_reservations "$B" "job 3's reservation was"
step "job $j3's program moved live from A to B while Slurm ran it, its reservation along; its checks passed; released"

# consolidate from "cron" sees the Slurm job as one job: its reservation and program move together
B_PORT=127.0.0.1:$(srv_port B)
j5=$(slurm_sbatch --rgpu=1:16 --wrap "ZDTM_FILL_MIB=8 ZDTM_FILL_BUSY=4 ZDTM_ROUNDS=1 $launch $build/tests/zdtm/zdtm_fill >$tmp/j5.txt 2>$tmp/j5.err; echo prog=\$?") ||
	fail "sbatch job 5"
slurm_wait_job "$j5" RUNNING 30
ZDTM_FILL_MIB=32 ZDTM_FILL_BUSY=4 ZDTM_ROUNDS=1 "$ctl" run --server "$B_PORT" -- $launch "$build/tests/zdtm/zdtm_fill" \
	>"$tmp/plain.txt" 2>"$tmp/plain.err" &
plainpid=$!
ready j5 plain
"$ctl" jobs --server "$A" --json >"$tmp/jobs.json"
cpid=$(json "$tmp/jobs.json" '[x["client_pid"] for x in j["jobs"] if x["label"] == "slurm-'"$j5"'"][0]') ||
	fail "job 5's program is not on A: $(cat "$tmp/jobs.json")"
sleep 1 # the workers' reports
# shellcheck disable=SC2086
"$ctl" consolidate $c --lock "$tmp/lock" --json >"$tmp/cons.json" 2>&1 || fail "consolidate: $(cat "$tmp/cons.json")"
python3 - "$tmp/cons.json" "$A" "$B" "slurm-$j5" <<'PY' || fail "consolidate: $(cat "$tmp/cons.json")"
import json, sys
acts = [json.loads(l) for l in open(sys.argv[1])]
a, b, name = sys.argv[2:5]
mv = [(x.get("reservation"), x["from"], x["to"], x["result"], x.get("jobs_moved")) for x in acts if x["action"] == "move"]
assert mv == [(name, a, b, 0, 1)], mv
PY
"$ctl" status --server "$B" --json >"$tmp/stb.json"
[ "$(json "$tmp/stb.json" '[r["name"] for r in j["servers"][0]["reservations"]]')" = "['slurm-$j5']" ] ||
	fail "B's reservations after consolidate: $(cat "$tmp/stb.json")"
kill -USR1 "$cpid" "$plainpid"
slurm_wait_job "$j5" COMPLETED 60
wait "$plainpid" || fail "the plain program failed: $(cat "$tmp/plain.txt" "$tmp/plain.err")"
grep -q "^zdtm fill: OK rounds=1 " "$tmp/j5.txt" || fail "job 5's checks: $(cat "$tmp/j5.txt")"
no_reservations "$B" "job 5's reservation was"
step "consolidate moved job $j5 (its reservation and program) from A to B beside a plain job; both checks passed"

# srun --rgpu outside a batch job: the license and the placement from srun's own allocation
srun --rgpu=1 --chdir="$tmp" sh -c "echo RGPU_SERVERS=\$RGPU_SERVERS; $launch $prog" >"$tmp/srun.txt" 2>"$tmp/srun.err" ||
	fail "srun --rgpu=1: $(cat "$tmp/srun.txt" "$tmp/srun.err")"
head -n 1 "$tmp/srun.txt" | grep -q "^RGPU_SERVERS=127.0.0.1:[0-9]*/0$" || fail "srun's RGPU_SERVERS: $(head -n 1 "$tmp/srun.txt")"
tail -n +2 "$tmp/srun.txt" | cmp -s "$src/tests/cuda/rt_printf.expected" - || fail "srun's program printed otherwise: $(cat "$tmp/srun.txt")"
no_reservations "$A" "srun's reservation was"
no_reservations "$B" "srun's reservation was"
step "srun --rgpu=1 ran the nvcc program through rgpu, output exact; its reservation ended"

# 5. refusals
j4=$(slurm_sbatch --rgpu=1:100000000 --wrap "echo should-not-run") || fail "sbatch job 4"
slurm_wait_job "$j4" FAILED 30
grep -q "^rgpu: no GPU for job $j4 (rgpuctl slurm place exited 1): .*no room for 1 GPU(s)" "$(slurm_job_output "$j4")" ||
	fail "job 4 failed without the placement's words: $(cat "$(slurm_job_output "$j4")")"
grep -q should-not-run "$(slurm_job_output "$j4")" && fail "job 4's script ran without its GPU"
sbatch --rgpu=x --wrap true >"$tmp/bad.out" 2>&1 && fail "sbatch --rgpu=x was taken"
grep -q "give N\[:MEM\]" "$tmp/bad.out" || fail "sbatch --rgpu=x: $(cat "$tmp/bad.out")"
step "a job no GPU has room for fails with the placement's words; --rgpu=x is refused by sbatch"
echo "rgpu_slurm: all passed"
