#!/bin/sh
# The connection cut at random points (testing.md, reliability targets): run a program through
# cutproxy in front of a private rgpud, again and again, until the proxy has cut CUTS
# connections. Every run must exit 0 (the programs check their own results), and afterwards
# the server's workers must be back at their baseline within the resume grace period + 2 s.
#   with_cuts.sh BUILD_DIR CUTS CMD [ARGS...]
#
# The first run goes through the proxy uncut: it must pass too, and the bytes of its largest
# connection become the proxy's --max-bytes, so that cuts land inside a run at random points.
# A later run that ends without a cut lowers --max-bytes to its own largest connection (runs
# after the first load their module images from the server's cache: they move fewer bytes).
# Runs alternate between cut points drawn uniformly (they fall mostly inside bulk copies) and
# log-uniformly (as often in a handshake or a short call as in a copy): cutproxy --spread.
# With CUTS 0 only that uncut run is made: a check of the proxy's forwarding.
#
# Environment:
#   RGPUD_ARGS            extra rgpud options (default "--resume-grace 5 --max-sessions 0");
#                         with_server.sh passes them on, and the worker check waits the grace
#                         they name. No session limit: jobs whose client process ended without
#                         a goodbye (most of the errors program's) wait out their grace, and
#                         up to 75 did at once, over rgpud's default of 64
#   RGPU_CUT_SEED         seed of the first run (default: the clock); run i uses SEED + i
#   RGPU_CUT_MAX_RUNS     give up when CUTS cuts have not happened in this many runs after the
#                         uncut one (default 3 * CUTS + 5)
#   RGPU_CUT_RUN_TIMEOUT  seconds one run may take (default 120)
#   RGPU_CUT_SPREAD       uniform, log, or mixed (default: odd runs uniform, even runs log)
#   RGPU_CUT_PROXY_ARGS   extra cutproxy options, e.g. "--max-ms 500 --min-delay-ms 20"
#   RGPU_CUT_KEEP_GOING   1: after a failed run go on to CUTS cuts, then fail with a count
set -u
# the proxy cuts TCP: a client on this host must not move its link to shared memory past it
export RGPU_TRANSPORT=tcp

if [ -z "${RGPU_CUT_INNER:-}" ]; then
	# outside: start the private rgpud, and come back in as the command it serves
	[ $# -ge 3 ] || { echo "usage: with_cuts.sh BUILD_DIR CUTS CMD [ARGS...]" >&2; exit 2; }
	RGPUD_ARGS=${RGPUD_ARGS-"--resume-grace 5 --max-sessions 0"}
	RGPU_CUT_INNER=1
	export RGPUD_ARGS RGPU_CUT_INNER
	exec "$(dirname "$0")/with_server.sh" "$1" "$0" "$@"
fi

# inside, run by with_server.sh: RGPU_E2E_PORT is rgpud's port, RGPU_E2E_PID its supervisor
build=$1
want=$2
shift 2
seed=${RGPU_CUT_SEED:-$(date +%s)}
max_runs=${RGPU_CUT_MAX_RUNS:-$((3 * want + 5))}
run_timeout=${RGPU_CUT_RUN_TIMEOUT:-120}
keep_going=${RGPU_CUT_KEEP_GOING:-0}
spread_mode=${RGPU_CUT_SPREAD:-mixed}
case $spread_mode in
uniform | log | mixed) ;;
*) echo "with_cuts: RGPU_CUT_SPREAD wants uniform, log or mixed, not '$spread_mode'"; exit 2 ;;
esac
tmp=$(mktemp -d)
proxy_pid=
cleanup() {
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

workers() { pgrep -P "$RGPU_E2E_PID" | wc -l; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# the grace period rgpud was given, in seconds (0 when none)
grace_of() {
	g=0
	while [ $# -gt 0 ]; do
		case $1 in
		--resume-grace) g=${2:-0}; [ $# -gt 1 ] && shift ;;
		--resume-grace=*) g=${1#*=} ;;
		esac
		shift
	done
	echo "$g"
}
# shellcheck disable=SC2086 # RGPUD_ARGS is a list of options
grace=$(grace_of ${RGPUD_ARGS:-})

# proxy_stat NAME: a value from the proxy's stats line of the last run
proxy_stat() { tr ' ' '\n' <"$tmp/stats" | sed -n "s/^$1=//p"; }

# run_once SEED CUTS MAX_BYTES SPREAD CMD...: one run through a fresh proxy; sets run_rc
run_once() {
	r_seed=$1 r_cuts=$2 r_max=$3 r_spread=$4
	shift 4
	rm -f "$tmp/port" "$tmp/stats"
	# shellcheck disable=SC2086 # RGPU_CUT_PROXY_ARGS is a list of options
	"$build/tests/e2e/cutproxy" --target "127.0.0.1:$RGPU_E2E_PORT" --port-file "$tmp/port" \
		--stats "$tmp/stats" --seed "$r_seed" --cuts "$r_cuts" ${r_max:+--max-bytes "$r_max"} \
		--spread "$r_spread" ${RGPU_CUT_PROXY_ARGS:-} 2>"$tmp/proxy.log" &
	proxy_pid=$!
	i=0
	while [ ! -s "$tmp/port" ] && [ $i -lt 200 ]; do
		kill -0 "$proxy_pid" 2>/dev/null || break
		sleep 0.02
		i=$((i + 1))
	done
	if [ ! -s "$tmp/port" ]; then
		echo "with_cuts: cutproxy did not start:"
		cat "$tmp/proxy.log"
		exit 1
	fi
	timeout -k 5 "$run_timeout" "$build/bin/rgpuctl" run --server "127.0.0.1:$(cat "$tmp/port")" \
		-- "$@" >"$tmp/out" 2>&1
	run_rc=$?
	kill -TERM "$proxy_pid"
	wait "$proxy_pid"
	proxy_pid=
	[ -s "$tmp/stats" ] || { echo "with_cuts: cutproxy wrote no stats:"; cat "$tmp/proxy.log"; exit 1; }
}

# report_failure WHAT [DETAIL]: what a failed run did: its exit, the proxy's cuts, the
# program's last words
report_failure() {
	if [ "$run_rc" -eq 124 ] || [ "$run_rc" -eq 137 ]; then
		echo "with_cuts: FAIL: $1 hung: killed after ${run_timeout} s${2:+ ($2)}"
	else
		echo "with_cuts: FAIL: $1 exited with status $run_rc${2:+ ($2)}"
	fi
	echo "--- cutproxy (seed $run_seed)"
	grep -E "cut [0-9]+/|reset" "$tmp/proxy.log" | sed 's/^/  /'
	echo "--- program output (last 20 lines)"
	tail -n 20 "$tmp/out" | sed 's/^/  /'
}

echo "with_cuts: $want cut(s) of: $*"
echo "with_cuts: seeds from $seed (RGPU_CUT_SEED=$seed repeats the cut points); rgpud grace ${grace} s"
# this rgpud is our own (with_server.sh): no worker belongs to anyone else. (Counting them here
# would count the GPU probe, which may still be starting on a real GPU, and let a leftover
# worker pass for it at the end.)
baseline=0

# the uncut run: the proxy must forward correctly, and its size sets --max-bytes
run_seed=$seed
run_once "$seed" 0 "" uniform "$@"
if [ "$run_rc" -ne 0 ]; then
	report_failure "the uncut run through the proxy"
	exit 1
fi
max_bytes=$(proxy_stat max_conn_bytes)
conns=$(proxy_stat conns)
echo "with_cuts: uncut run: $(cat "$tmp/stats")"
[ "$max_bytes" -gt 0 ] || { echo "with_cuts: FAIL: the program made no connection through the proxy"; exit 1; }

cuts=0
runs=0
failed=0
while [ "$cuts" -lt "$want" ] && [ "$runs" -lt "$max_runs" ]; do
	runs=$((runs + 1))
	run_seed=$((seed + runs))
	spread=$spread_mode
	[ "$spread" = mixed ] && { [ $((runs % 2)) -eq 1 ] && spread=uniform || spread=log; }
	run_once "$run_seed" $((want - cuts)) "$max_bytes" "$spread" "$@"
	n=$(proxy_stat cuts)
	cuts=$((cuts + n))
	conns=$((conns + $(proxy_stat conns)))
	echo "with_cuts: run $runs (seed $run_seed, max-bytes $max_bytes $spread): exit $run_rc, $(cat "$tmp/stats")"
	if [ "$run_rc" -ne 0 ]; then
		failed=$((failed + 1))
		report_failure "run $runs" "$n cut(s) in it, $cuts of $want so far"
		[ "$keep_going" = 1 ] || exit 1
	elif [ "$n" -eq 0 ]; then
		max_bytes=$(proxy_stat max_conn_bytes)
	fi
done
runs=$((runs + 1)) # the uncut one

if [ "$failed" -gt 0 ]; then
	echo "with_cuts: FAIL: $failed of $runs runs failed (cuts=$cuts runs=$runs conns=$conns)"
	exit 1
fi
if [ "$cuts" -lt "$want" ]; then
	echo "with_cuts: FAIL: only $cuts of $want cuts happened in $runs runs (RGPU_CUT_MAX_RUNS=$max_runs)"
	exit 1
fi

# every worker gone (a cut session's within the grace period) once the last run is over
limit_ms=$(((grace + 2) * 1000))
start=$(now_ms)
while [ "$(workers)" -gt "$baseline" ]; do
	if [ $(($(now_ms) - start)) -gt "$limit_ms" ]; then
		echo "with_cuts: FAIL: $(($(workers) - baseline)) worker(s) above the baseline of $baseline still run $((grace + 2)) s after the last run"
		pgrep -a -P "$RGPU_E2E_PID" | sed 's/^/  /'
		exit 1
	fi
	sleep 0.05
done
# and the server agrees: no job, no device memory held for one
if [ -n "${RGPU_E2E_ADMIN:-}" ]; then
	sleep 0.6 # a worker's last report is at most 0.5 s old
	st=$("$build/bin/rgpuctl" status --server "$RGPU_E2E_ADMIN" --json) ||
		{ echo "with_cuts: FAIL: rgpuctl status: $st"; exit 1; }
	echo "$st" | python3 -c '
import json, sys
s = json.load(sys.stdin)["servers"][0]
used = sum(g["memory_used"] for g in s["gpus"])
if s["jobs"] != 0 or used != 0:
    sys.exit("with_cuts: FAIL: rgpud still reports %d job(s) and %d bytes of device memory" % (s["jobs"], used))
' || exit 1
fi
echo "cuts=$cuts runs=$runs conns=$conns (workers back to baseline in $(($(now_ms) - start)) ms; no job or device memory left)"
