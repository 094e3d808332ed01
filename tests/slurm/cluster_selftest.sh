#!/bin/sh
# The Slurm harness (cluster.sh) checked on its own, with the route issue 15's licenses take: a
# SPANK plugin's sbatch option puts DEMO_WANT=N into the job's control environment, and a
# job_submit.lua turns it into N "demo" licenses (demo_spank.c, demo_job_submit.lua).
#   1. a cluster with Licenses=demo:1 from an included file: Total=1 Used=0 Free=1
#   2. A (--demo=1, 8 s) runs; B (--demo=1) waits with Reason=Licenses while C (no licenses)
#      runs beside A; B starts once A has ended; the outputs are exactly A-done, B-done, C-done
#   3. the included file says demo:2, reconfigure: Total=2, and D and E (--demo=1 each) run at once
#   4. stopped: no munged, slurmctld, slurmd or slurmstepd of this cluster left
# Root only. SLURM_KEEP=1 keeps the directory (logs, slurm.conf) and names it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cluster.sh"
tmp=$(mktemp -d /tmp/rgpu-slurm.XXXXXX)
chmod 0755 "$tmp"   # munged's rule for the directories above its socket
cleanup() {
	slurm_stop
	if [ "${SLURM_KEEP:-0}" = 1 ]; then
		echo "kept: $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 143' INT TERM HUP
fail() { slurm_fail "$@"; }
t0=$(date +%s)
step() { echo "selftest: $(($(date +%s) - t0)) s: $*"; }
# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || fail "$1: '$2', expected '$3'"; }

[ "$(id -u)" -eq 0 ] || { echo "FAIL: the Slurm tests run as root (slurmd starts jobs as their users)"; exit 1; }
for c in munged mungekey slurmctld slurmd sbatch scontrol sinfo gcc; do
	command -v $c >/dev/null || { echo "FAIL: no $c (scripts/install-deps.sh installs it)"; exit 1; }
done

# the plugin, built here against Slurm's spank.h (libslurm-dev)
gcc -shared -fPIC -Wall -Wextra -Werror -o "$tmp/demo_spank.so" "$here/demo_spank.c" ||
	fail "demo_spank.c does not build"
echo "required $tmp/demo_spank.so" >"$tmp/plugstack.conf"
echo "Licenses=demo:1" >"$tmp/licenses.conf"

# 1
# two single-core jobs at once (C beside A, D beside E): on a one-CPU machine the node says 2
cpus=""
[ "$(nproc)" -ge 2 ] || { cpus="--cpus 2"; echo "selftest: one CPU here: the node is given 2"; }
# shellcheck disable=SC2086 # an option and its value, or nothing
slurm_start "$tmp/cluster" $cpus --include "$tmp/licenses.conf" --plugstack "$tmp/plugstack.conf" \
	--job-submit-lua "$here/demo_job_submit.lua"
step "cluster up (node $SLURM_NODE, ports $SLURM_CTLD_PORT and $SLURM_SLURMD_PORT)"
expect "demo Total" "$(slurm_lic demo Total)" 1
expect "demo Used" "$(slurm_lic demo Used)" 0
expect "demo Free" "$(slurm_lic demo Free)" 1
sbatch --help 2>&1 | grep -q -- '--demo=N' || fail "sbatch does not offer the plugin's --demo: $(sbatch --help 2>&1 | tail -n 5)"

# 2
a=$(slurm_sbatch --demo=1 --wrap 'sleep 8; echo A-done') || fail "sbatch A: $a"
slurm_wait_job "$a" RUNNING 15
expect "A's licenses" "$(slurm_job_field "$a" Licenses)" demo:1
expect "demo Used with A running" "$(slurm_lic demo Used)" 1
b=$(slurm_sbatch --demo=1 --wrap 'echo B-done') || fail "sbatch B: $b"
expect "B's licenses" "$(slurm_job_field "$b" Licenses)" demo:1
c=$(slurm_sbatch --wrap 'echo C-done') || fail "sbatch C: $c"
expect "C's licenses" "$(slurm_job_field "$c" Licenses)" "(null)"
# C (a free core, no licenses) runs and ends while A runs and B waits for A's license
slurm_wait_job "$c" COMPLETED 10
expect "A's state when C ended" "$(slurm_job_state "$a")" RUNNING
expect "B's state when C ended" "$(slurm_job_state "$b")" PENDING
# the reason comes when the scheduler has looked at B (C may have been started by the backfill
# pass before that: B's reason is None until then)
i=0
until [ "$(slurm_job_field "$b" Reason)" = Licenses ]; do
	[ $i -ge 100 ] && fail "B's reason: '$(slurm_job_field "$b" Reason)', expected 'Licenses'"
	expect "B's state while it waits" "$(slurm_job_state "$b")" PENDING
	sleep 0.1
	i=$((i + 1))
done
step "A runs, B waits for the license, C ran beside A"
slurm_wait_job "$a" COMPLETED 15
slurm_wait_job "$b" COMPLETED 15
a_end=$(slurm_job_field "$a" EndTime)
b_start=$(slurm_job_field "$b" StartTime)
# (ISO times: in order as strings)
[ "$a_end" = "$b_start" ] || [ "$(printf '%s\n%s\n' "$a_end" "$b_start" | sort | head -n 1)" = "$a_end" ] ||
	fail "B started at $b_start, before A ended at $a_end"
expect "A's output" "$(cat "$(slurm_job_output "$a")")" A-done
expect "B's output" "$(cat "$(slurm_job_output "$b")")" B-done
expect "C's output" "$(cat "$(slurm_job_output "$c")")" C-done
expect "demo Used after A and B" "$(slurm_lic demo Used)" 0
step "B ran after A ended (A ended $a_end, B started $b_start)"

# 3
echo "Licenses=demo:2" >"$tmp/licenses.conf"
slurm_reconfigure
expect "demo Total after reconfigure" "$(slurm_lic demo Total)" 2
expect "demo Free after reconfigure" "$(slurm_lic demo Free)" 2
step "reconfigured to demo:2"
d=$(slurm_sbatch --demo=1 --wrap 'sleep 6; echo D-done') || fail "sbatch D: $d"
e=$(slurm_sbatch --demo=1 --wrap 'sleep 6; echo E-done') || fail "sbatch E: $e"
slurm_wait_job "$d" RUNNING 10
slurm_wait_job "$e" RUNNING 10
expect "D's state with E running" "$(slurm_job_state "$d")" RUNNING
expect "demo Used with D and E running" "$(slurm_lic demo Used)" 2
expect "demo Free with D and E running" "$(slurm_lic demo Free)" 0
step "D and E run at once"
slurm_wait_job "$d" COMPLETED 15
slurm_wait_job "$e" COMPLETED 15
expect "D's output" "$(cat "$(slurm_job_output "$d")")" D-done
expect "E's output" "$(cat "$(slurm_job_output "$e")")" E-done

# 4
slurm_stop
left=$(pgrep -a -f "$tmp/cluster" 2>/dev/null)
[ -z "$left" ] || fail "left running after slurm_stop: $left"
left=$(_slurm_stepd_pids)
[ -z "$left" ] || fail "slurmstepd left after slurm_stop: $left"
step "stopped, nothing left"
echo "PASS"
