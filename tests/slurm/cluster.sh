# Sourced by the Slurm tests (issue 15): a private one-node Slurm cluster on this machine, all of
# it under one directory, that needs no systemd, no cgroups and no system Slurm or munge, and
# clashes with none that runs (its own munge socket and key, its own free ports, its own
# plugstack). Root only: munged, slurmctld and slurmd run as root, and so do the jobs.
#   slurm_start DIR [OPTIONS]      create DIR's munge key, slurm.conf, state and spool, start
#                                  munged, slurmctld and slurmd; return once sinfo shows the node
#                                  idle (slurm_fail, with the logs, if it does not within
#                                  $SLURM_START_TIMEOUT s, default 30, or if anything fails).
#                                  Exports SLURM_CONF; sets SLURM_DIR, SLURM_NODE, SLURM_CTLD_PORT
#                                  and SLURM_SLURMD_PORT. DIR's parents must be searchable by all
#                                  (munged's rule for its socket: chmod 0755 a mktemp -d above it).
#                                  SLURM_HOST names the node instead of hostname -s. Options:
#       --licenses SPEC            Licenses=SPEC (e.g. demo:1)
#       --include FILE             Include FILE (as the last line: it may set Licenses= itself)
#       --job-submit-lua FILE      JobSubmitPlugins=lua with FILE copied to DIR/job_submit.lua
#                                  (the plugin reads job_submit.lua beside slurm.conf)
#       --plugstack FILE           PlugStackConfig=FILE (default: an empty one of our own, so
#                                  that /etc/slurm/plugstack.conf's plugins are never loaded)
#       --min-job-age S            MinJobAge=S (default 30; finished jobs stay in jobcomp)
#       --cpus N                   CPUs=N instead of the machine's (SlurmdParameters=
#                                  config_overrides): N single-core jobs at once on any machine
#       --conf LINE                one more line of slurm.conf (repeatable)
#   slurm_stop                     cancel every job, stop slurmd, slurmctld and munged, kill any
#                                  slurmstepd of this cluster (and its job's processes) left;
#                                  safe to call at any point, twice, or after a failed start
#   slurm_sbatch [SBATCH_ARGS...]  sbatch --parsable with the output in DIR/jobs/JOBID.out and
#                                  DIR/jobs as the job's directory; prints the job id
#   slurm_job_output JOBID         the path of the job's standard output (StdOut, or where
#                                  slurm_sbatch puts it)
#   slurm_job_state JOBID          its JobState (PENDING, RUNNING, COMPLETED, FAILED, ...), also
#                                  once slurmctld has forgotten it (from DIR/jobcomp.txt); UNKNOWN
#                                  for a job it never had
#   slurm_job_field JOBID FIELD    one field of `scontrol show job` (Reason, ExitCode, Licenses, ...;
#                                  a value with blanks is cut at the first);
#                                  once forgotten, of its line in DIR/jobcomp.txt (fewer fields)
#   slurm_wait_job JOBID STATE TIMEOUT_S
#                                  wait until the job is in STATE (a list such as
#                                  "COMPLETED|FAILED" is allowed); slurm_fail if a final state other
#                                  than STATE comes, or after TIMEOUT_S seconds
#   slurm_reconfigure              scontrol reconfigure, then wait until slurmctld has read the
#                                  configuration again and the node is back
#   slurm_lic NAME FIELD           a license's Total, Used, Free or Reserved (scontrol show lic)
#   slurm_logs                     print the daemons' logs (the last 60 lines of each)
#   slurm_fail MSG                 print FAIL: MSG, stop the cluster, print the logs, exit 1
# The functions use the names slurm_* and _slurm_* only, and the variables SLURM_*,
# _slurm_*; a test script that sources this file should call slurm_stop from its EXIT trap.

SLURM_START_TIMEOUT=${SLURM_START_TIMEOUT:-30}

slurm_logs() {
	[ -n "${SLURM_DIR:-}" ] || return 0
	for _slurm_f in munged.log munged.out slurmctld.log slurmctld.out slurmd.log slurmd.out; do
		[ -s "$SLURM_DIR/log/$_slurm_f" ] || continue
		echo "--- $_slurm_f (last 60 lines)"
		tail -n 60 "$SLURM_DIR/log/$_slurm_f"
	done
}

slurm_fail() {
	echo "FAIL: $*"
	# stopped first: nothing left running if printing the logs is cut short (a closed pipe)
	slurm_stop
	slurm_logs
	exit 1
}

# two free TCP ports on the loopback and on every address (the kernel's choice; the small race
# with another program taking one before slurmctld binds it shows as a failed start)
_slurm_free_ports() {
	python3 -c '
import socket
ss = []
for _ in range(2):
    s = socket.socket()
    s.bind(("", 0))
    ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))'
}

_slurm_pid_alive() {
	_slurm_p=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$_slurm_p" ] && kill -0 "$_slurm_p" 2>/dev/null
}

slurm_start() {
	[ "$(id -u)" -eq 0 ] || slurm_fail "slurm_start: must run as root"
	mkdir -p "$1" || slurm_fail "slurm_start: cannot make $1"
	SLURM_DIR=$(cd "$1" && pwd)
	shift
	_slurm_lic=""
	_slurm_inc=""
	_slurm_lua=""
	_slurm_plugstack=""
	_slurm_age=30
	_slurm_cpus=""
	_slurm_extra=""
	while [ $# -gt 0 ]; do
		case $1 in
		--licenses) _slurm_lic=$2 ;;
		--include) _slurm_inc=$2 ;;
		--job-submit-lua) _slurm_lua=$2 ;;
		--plugstack) _slurm_plugstack=$2 ;;
		--min-job-age) _slurm_age=$2 ;;
		--cpus) _slurm_cpus=$2 ;;
		--conf) _slurm_extra="$_slurm_extra$2
" ;;
		*) slurm_fail "slurm_start: unknown option $1" ;;
		esac
		shift 2
	done
	_slurm_d=$SLURM_DIR
	# munged refuses a socket in a directory that not all can search, or below one (mktemp -d
	# makes a directory 0700)
	chmod 0755 "$_slurm_d" || slurm_fail "slurm_start: cannot chmod $_slurm_d"
	_slurm_up=$(dirname "$_slurm_d")
	while [ "$_slurm_up" != / ]; do
		# (the last digit's parity: the others' x bit)
		[ "$(($(stat -c %a "$_slurm_up") % 2))" -eq 1 ] ||
			slurm_fail "slurm_start: $_slurm_up is not searchable by all, as munged requires of the directories above its socket (chmod a+x it)"
		_slurm_up=$(dirname "$_slurm_up")
	done
	mkdir -p "$_slurm_d/munge" "$_slurm_d/log" "$_slurm_d/run" "$_slurm_d/state" \
		"$_slurm_d/spool" "$_slurm_d/jobs" || slurm_fail "slurm_start: cannot make $_slurm_d's directories"
	chmod 0755 "$_slurm_d/munge" "$_slurm_d/run" "$_slurm_d/log"
	chmod 0700 "$_slurm_d/state" "$_slurm_d/spool"
	# the jobs' directory and output: jobs of any user
	chmod 1777 "$_slurm_d/jobs"

	# munge: its own key, socket, pid, log and seed; munged runs as root here (no --force needed)
	mungekey --create --bits=1024 --keyfile="$_slurm_d/munge/munge.key" >/dev/null 2>&1 ||
		dd if=/dev/urandom of="$_slurm_d/munge/munge.key" bs=128 count=1 2>/dev/null
	chmod 0400 "$_slurm_d/munge/munge.key"
	munged --foreground --socket="$_slurm_d/munge/munge.socket" --key-file="$_slurm_d/munge/munge.key" \
		--pid-file="$_slurm_d/run/munged.pid" --log-file="$_slurm_d/log/munged.log" \
		--seed-file="$_slurm_d/munge/munged.seed" >"$_slurm_d/log/munged.out" 2>&1 &
	echo $! >"$_slurm_d/run/munged.bg"
	_slurm_i=0
	while [ ! -S "$_slurm_d/munge/munge.socket" ]; do
		_slurm_pid_alive "$_slurm_d/run/munged.bg" || slurm_fail "munged did not start"
		[ $_slurm_i -ge 100 ] && slurm_fail "munged made no socket within 5 s"
		sleep 0.05
		_slurm_i=$((_slurm_i + 1))
	done

	# the node as this machine is: its name must resolve to this host for slurmctld to accept
	# being SlurmctldHost and for slurmd to find its NodeName
	SLURM_NODE=${SLURM_HOST:-$(hostname -s)}
	if [ -z "$SLURM_NODE" ] || ! getent hosts "$SLURM_NODE" >/dev/null 2>&1; then
		SLURM_NODE=localhost
	fi
	# CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory
	_slurm_hw=$(slurmd -C | sed -n 's/^NodeName=[^ ]* //p')
	if [ -n "$_slurm_cpus" ]; then
		# more (or fewer) CPUs than the machine has: slurmd believes the configuration
		_slurm_hw="CPUs=$_slurm_cpus $(echo "$_slurm_hw" | tr ' ' '\n' | grep '^RealMemory=')"
		_slurm_extra="${_slurm_extra}SlurmdParameters=config_overrides
"
	fi
	[ -n "$_slurm_hw" ] || slurm_fail "slurmd -C printed no node line: $(slurmd -C 2>&1)"
	# shellcheck disable=SC2046 # two words
	set -- $(_slurm_free_ports)
	SLURM_CTLD_PORT=$1
	SLURM_SLURMD_PORT=$2
	[ -n "$_slurm_plugstack" ] || { _slurm_plugstack=$_slurm_d/plugstack.conf; : >"$_slurm_plugstack"; }
	if [ -n "$_slurm_lua" ]; then
		cp "$_slurm_lua" "$_slurm_d/job_submit.lua" || slurm_fail "no $_slurm_lua"
	fi
	: >"$_slurm_d/jobcomp.txt"
	{
		echo "# a private one-node cluster (tests/slurm/cluster.sh)"
		echo "ClusterName=rgputest"
		echo "SlurmctldHost=$SLURM_NODE"
		echo "SlurmctldPort=$SLURM_CTLD_PORT"
		echo "SlurmdPort=$SLURM_SLURMD_PORT"
		echo "SlurmUser=root"
		echo "SlurmdUser=root"
		echo "AuthType=auth/munge"
		echo "AuthInfo=socket=$_slurm_d/munge/munge.socket"
		echo "CredType=cred/munge"
		echo "StateSaveLocation=$_slurm_d/state"
		echo "SlurmdSpoolDir=$_slurm_d/spool/%n"
		echo "SlurmctldPidFile=$_slurm_d/run/slurmctld.pid"
		echo "SlurmdPidFile=$_slurm_d/run/slurmd.pid"
		echo "SlurmctldLogFile=$_slurm_d/log/slurmctld.log"
		echo "SlurmdLogFile=$_slurm_d/log/slurmd.log"
		echo "SlurmctldDebug=info"
		echo "SlurmdDebug=info"
		echo "PlugStackConfig=$_slurm_plugstack"
		echo "ProctrackType=proctrack/linuxproc"
		echo "TaskPlugin=task/none"
		echo "JobAcctGatherType=jobacct_gather/none"
		echo "AccountingStorageType=accounting_storage/none"
		# finished jobs, for slurm_job_state once slurmctld has forgotten them (MinJobAge)
		echo "JobCompType=jobcomp/filetxt"
		echo "JobCompLoc=$_slurm_d/jobcomp.txt"
		echo "MpiDefault=none"
		echo "SwitchType=switch/none"
		echo "ReturnToService=2"
		echo "SelectType=select/cons_tres"
		echo "SelectTypeParameters=CR_Core"
		# the main scheduler every second (and when a job ends or is submitted), backfill too
		echo "SchedulerType=sched/backfill"
		echo "SchedulerParameters=sched_interval=1,bf_interval=1"
		echo "MinJobAge=$_slurm_age"
		echo "KillWait=2"
		echo "InactiveLimit=0"
		echo "SlurmdTimeout=60"
		echo "SlurmctldTimeout=60"
		[ -n "$_slurm_lic" ] && echo "Licenses=$_slurm_lic"
		[ -n "$_slurm_lua" ] && echo "JobSubmitPlugins=lua"
		if [ "$SLURM_NODE" = localhost ]; then
			echo "NodeName=localhost NodeAddr=127.0.0.1 $_slurm_hw State=UNKNOWN"
		else
			echo "NodeName=$SLURM_NODE $_slurm_hw State=UNKNOWN"
		fi
		echo "PartitionName=main Nodes=$SLURM_NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
		printf '%s' "$_slurm_extra"
		[ -n "$_slurm_inc" ] && echo "Include $_slurm_inc"
	} >"$_slurm_d/slurm.conf"
	SLURM_CONF=$_slurm_d/slurm.conf
	export SLURM_CONF

	# in the foreground (-D), as our children: no pid-file races, and a crash is seen
	slurmctld -D -f "$SLURM_CONF" >"$_slurm_d/log/slurmctld.out" 2>&1 &
	echo $! >"$_slurm_d/run/slurmctld.bg"
	slurmd -D -f "$SLURM_CONF" -N "$SLURM_NODE" >"$_slurm_d/log/slurmd.out" 2>&1 &
	echo $! >"$_slurm_d/run/slurmd.bg"
	_slurm_wait_idle "$SLURM_START_TIMEOUT" ||
		slurm_fail "the node did not come up idle: $_slurm_why (sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1))"
}

# wait until both daemons live and sinfo shows the node idle
_slurm_wait_idle() {
	_slurm_i=0
	while :; do
		_slurm_pid_alive "$SLURM_DIR/run/slurmctld.bg" || { _slurm_why="slurmctld ended"; return 1; }
		_slurm_pid_alive "$SLURM_DIR/run/slurmd.bg" || { _slurm_why="slurmd ended"; return 1; }
		[ "$(sinfo -h -n "$SLURM_NODE" -o %T 2>/dev/null)" = idle ] && return 0
		[ $_slurm_i -ge $(($1 * 10)) ] && { _slurm_why="not within $1 s"; return 1; }
		sleep 0.1
		_slurm_i=$((_slurm_i + 1))
	done
}

# stop the process whose pid is in FILE: TERM, up to 10 s, then KILL
_slurm_kill_wait() {
	_slurm_p=$(cat "$1" 2>/dev/null) || return 0
	rm -f "$1"
	[ -n "$_slurm_p" ] || return 0
	kill "$_slurm_p" 2>/dev/null || return 0
	_slurm_i=0
	while kill -0 "$_slurm_p" 2>/dev/null && [ $_slurm_i -lt 100 ]; do
		sleep 0.1
		_slurm_i=$((_slurm_i + 1))
	done
	kill -KILL "$_slurm_p" 2>/dev/null
	wait "$_slurm_p" 2>/dev/null
	return 0
}

# the pids of this cluster's slurmstepd processes (they carry our SLURM_CONF, from slurmd's
# environment) and of every process below them
_slurm_stepd_pids() {
	for _slurm_p in $(pgrep -x slurmstepd 2>/dev/null); do
		tr '\0' '\n' 2>/dev/null <"/proc/$_slurm_p/environ" |
			grep -qxF "SLURM_CONF=$SLURM_DIR/slurm.conf" && _slurm_tree "$_slurm_p"
	done
}
_slurm_tree() {
	echo "$1"
	for _slurm_c in $(pgrep -P "$1" 2>/dev/null); do _slurm_tree "$_slurm_c"; done
}

slurm_stop() {
	[ -n "${SLURM_DIR:-}" ] || return 0
	if _slurm_pid_alive "$SLURM_DIR/run/slurmctld.bg"; then
		scancel --quiet --user=root 2>/dev/null
		# the jobs' steps end (KillWait=2) before slurmd goes
		_slurm_i=0
		while [ -n "$(_slurm_stepd_pids)" ] && [ $_slurm_i -lt 50 ]; do
			sleep 0.1
			_slurm_i=$((_slurm_i + 1))
		done
	fi
	_slurm_kill_wait "$SLURM_DIR/run/slurmd.bg"
	_slurm_kill_wait "$SLURM_DIR/run/slurmctld.bg"
	_slurm_left=$(_slurm_stepd_pids)
	# shellcheck disable=SC2086 # a list of pids
	[ -n "$_slurm_left" ] && kill -KILL $_slurm_left 2>/dev/null
	_slurm_kill_wait "$SLURM_DIR/run/munged.bg"
	return 0
}

slurm_sbatch() {
	sbatch --parsable --chdir="$SLURM_DIR/jobs" --output="$SLURM_DIR/jobs/%j.out" "$@"
}

slurm_job_field() {
	_slurm_v=$(scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1)
	if [ -z "$_slurm_v" ] && ! scontrol -o show job "$1" >/dev/null 2>&1; then
		# purged after MinJobAge: its completion record (jobcomp/filetxt: JobState, StartTime,
		# EndTime, ExitCode, NodeList, WorkDir, ...), the last one if it was requeued
		_slurm_v=$(grep "^JobId=$1 " "$SLURM_DIR/jobcomp.txt" 2>/dev/null | tail -n 1 |
			tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1)
	fi
	echo "$_slurm_v"
}

slurm_job_output() {
	_slurm_o=$(slurm_job_field "$1" StdOut)
	[ -n "$_slurm_o" ] || _slurm_o=$SLURM_DIR/jobs/$1.out
	echo "$_slurm_o"
}

slurm_job_state() {
	_slurm_s=$(slurm_job_field "$1" JobState)
	echo "${_slurm_s:-UNKNOWN}"
}

slurm_wait_job() {
	_slurm_i=0
	while :; do
		_slurm_s=$(slurm_job_state "$1")
		# shellcheck disable=SC2254 # STATE may be a pattern list
		eval "case \$_slurm_s in $2) return 0 ;; esac"
		case $_slurm_s in
		COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
			slurm_fail "job $1 ended $_slurm_s, not $2: $(scontrol -o show job "$1" 2>&1)"
			;;
		esac
		[ $_slurm_i -ge $(($3 * 10)) ] &&
			slurm_fail "job $1 not $2 within $3 s (it is $_slurm_s): $(scontrol -o show job "$1" 2>&1)"
		sleep 0.1
		_slurm_i=$((_slurm_i + 1))
	done
}

slurm_reconfigure() {
	# slurmctld logs this line once it has read slurm.conf (and its Include) again, before it
	# answers; counted, so that an earlier reconfiguration's line does not count
	_slurm_n=$(grep -c '_slurm_rpc_reconfigure_controller: completed' "$SLURM_DIR/log/slurmctld.log")
	scontrol reconfigure || slurm_fail "scontrol reconfigure failed"
	_slurm_i=0
	while [ "$(grep -c '_slurm_rpc_reconfigure_controller: completed' "$SLURM_DIR/log/slurmctld.log")" -le "$_slurm_n" ]; do
		[ $_slurm_i -ge 100 ] && slurm_fail "slurmctld logged no completed reconfiguration within 10 s"
		sleep 0.1
		_slurm_i=$((_slurm_i + 1))
	done
	_slurm_wait_idle_or_busy 30 || slurm_fail "the node is not up 30 s after the reconfiguration (sinfo: $(sinfo -h -N -o '%N %T %E' 2>&1))"
}

_slurm_wait_idle_or_busy() {
	_slurm_i=0
	while :; do
		case $(sinfo -h -n "$SLURM_NODE" -o %T 2>/dev/null) in
		idle | mixed | allocated) return 0 ;;
		esac
		[ $_slurm_i -ge $(($1 * 10)) ] && return 1
		sleep 0.1
		_slurm_i=$((_slurm_i + 1))
	done
}

slurm_lic() {
	scontrol -o show lic "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
