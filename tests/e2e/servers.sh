# Sourced by the checkpoint and migration tests: start and stop private rgpud servers on free
# loopback ports, each with its own data directory (module cache and checkpoint store), on
# simgpu unless RGPU_E2E_DRIVER names another driver ("system": the real one).
#   srv_start NAME [ENV=VALUE...] [-- RGPUD_OPTIONS...]  start server NAME under $tmp/NAME
#   srv_port NAME / srv_admin NAME                       its client port / admin HOST:PORT
#   srv_stop NAME [SIGNAL]                               stop it (and its workers)
#   zdtm_start NAME PROG ROUNDS                          run tests/zdtm PROG through rgpu on
#                                                        server NAME; sets zpid and zout
#   zdtm_wait_ready N                                    wait for the program's Nth READY
#   zdtm_go                                              send it SIGUSR1
#   zdtm_finish ROUNDS                                   wait for its exit: OK with ROUNDS
#   stalled_target NAME TARGET MODE WANT                 a zdtm_fill job on server NAME moved
#                                                        (MODE --cold or live) to TARGET (admin
#                                                        HOST:PORT), which stops reading mid-push:
#                                                        the migration must fail within 20 s
#                                                        saying WANT, and the job run on
#   fail MSG                                             say why, with each server's last log
#                                                        lines, and exit 1
#   json FILE EXPR                                       a Python expression over FILE's JSON (j)
# The caller sets build and tmp; on exit the servers are stopped, the program killed, tmp and
# SRV_RM (more paths) removed (SRV_KEEP=1: tmp kept and named, for its logs). RGPU_APP_LAUNCHER prefixes programs (the sanitizer build's ASan
# runtime).
srv_cleanup() {
	for s in A B C D E F; do srv_stop $s; done
	[ -n "${zpid:-}" ] && kill -KILL "$zpid" 2>/dev/null
	if [ "${SRV_KEEP:-0}" = 1 ]; then
		echo "kept: $tmp"
		return
	fi
	# shellcheck disable=SC2086 # a list of paths
	rm -rf "$tmp" ${SRV_RM:-}
}
trap srv_cleanup EXIT
trap 'exit 143' INT TERM
fail() {
	echo "FAIL${run:+ (run $run)}: $*"
	for s in A B C D E F; do
		[ -e "$tmp/$s/log" ] || continue
		echo "--- rgpud $s log"
		tail -n 30 "$tmp/$s/log"
		# a sanitizer's report starts long before the log's end: its head names the fault
		grep -q -e 'ERROR: [A-Za-z]*Sanitizer' -e 'runtime error:' "$tmp/$s/log" && {
			echo "--- rgpud $s: the first sanitizer report"
			grep -m1 -A40 -e 'ERROR: [A-Za-z]*Sanitizer' -e 'runtime error:' "$tmp/$s/log"
		}
	done
	exit 1
}
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
driver=${RGPU_E2E_DRIVER:-$build/lib/simgpu/libcuda.so.1}
[ "$driver" = system ] && driver=""
ctl=$build/bin/rgpuctl

srv_start() {
	name=$1
	shift
	dir=$tmp/$name
	mkdir -p "$dir"
	rm -f "$dir/port" "$dir/aport"
	envs=""
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		envs="$envs $1"
		shift
	done
	[ "${1:-}" = "--" ] && shift
	# shellcheck disable=SC2086 # envs and the options are lists
	env $envs "$build/bin/rgpud" --listen 127.0.0.1:0 --port-file "$dir/port" \
		--admin 127.0.0.1:0 --admin-port-file "$dir/aport" ${driver:+--driver "$driver"} \
		--data "$dir/data" --log-level info "$@" 2>>"$dir/log" &
	echo $! >"$dir/pid"
	i=0
	while { [ ! -s "$dir/port" ] || [ ! -s "$dir/aport" ]; } && [ $i -lt 200 ]; do
		kill -0 "$(cat "$dir/pid")" 2>/dev/null || fail "rgpud $name did not start: $(cat "$dir/log")"
		sleep 0.05
		i=$((i + 1))
	done
}
srv_port() { cat "$tmp/$1/port"; }
srv_admin() { echo "127.0.0.1:$(cat "$tmp/$1/aport")"; }
srv_stop() {
	pid=$(cat "$tmp/$1/pid" 2>/dev/null) || return 0
	if [ "${2:-TERM}" = KILL ]; then
		# the supervisor and every worker, at once: as a machine losing power would
		pkill -KILL -P "$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
	else
		kill "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	rm -f "$tmp/$1/pid"
}

zdtm_start() {
	zout=$tmp/$2.$$.out
	: >"$zout"
	# shellcheck disable=SC2086 # the launcher is a command prefix
	ZDTM_ROUNDS=$3 RGPU_LOG=info "$ctl" run --server "127.0.0.1:$(srv_port "$1")" -- \
		${RGPU_APP_LAUNCHER:-} "$build/tests/zdtm/$2" >"$zout" 2>"$zout.err" &
	zpid=$!
}
zdtm_wait_ready() {
	i=0
	# (a file the program has not opened yet counts 0 READY lines, not an error that ends the wait)
	while n=$(grep -c '^READY$' "$zout" 2>/dev/null); [ "${n:-0}" -lt "$1" ]; do
		kill -0 "$zpid" 2>/dev/null || fail "the program ended before READY $1: $(cat "$zout" "$zout.err")"
		[ $i -ge 1200 ] && fail "no READY $1 within 60 s"
		sleep 0.05
		i=$((i + 1))
	done
}
zdtm_go() { kill -USR1 "$zpid"; }
zdtm_finish() {
	wait "$zpid"
	rc=$?
	[ $rc -eq 0 ] || fail "the program failed ($rc): $(cat "$zout" "$zout.err")"
	grep -q "^zdtm .*: OK rounds=$1 " "$zout" || fail "no OK after $1 rounds: $(cat "$zout")"
}
# the job of the only client of server NAME
job_of() {
	"$ctl" jobs --server "$(srv_admin "$1")" --json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"]; print(j[0]["job"] if j else "")'
}
stalled_target() {
	st_src=$1 st_to=$2 st_mode=$3 st_want=$4
	zdtm_start "$st_src" zdtm_fill 1 # 64 MiB that do not compress: more than the sockets hold
	zdtm_wait_ready 1
	st_job=$(job_of "$st_src")
	st_t0=$(date +%s)
	# shellcheck disable=SC2046 # a live migration has no option of its own
	"$ctl" migrate "$st_job" --server "$(srv_admin "$st_src")" --to "$st_to" \
		$([ "$st_mode" = live ] || echo "$st_mode") >"$tmp/m.out" 2>&1
	st_rc=$?
	st_t=$(($(date +%s) - st_t0))
	[ $st_rc -eq 1 ] || fail "$st_mode migration to a stalled target: exit $st_rc, want 1: $(cat "$tmp/m.out")"
	[ $st_t -le 20 ] || fail "$st_mode migration to a stalled target took $st_t s (the target stalls for 120 s)"
	grep -q "$st_want" "$tmp/m.out" || fail "$st_mode migration to a stalled target, not '$st_want': $(cat "$tmp/m.out")"
	[ "$(job_of "$st_src")" = "$st_job" ] || fail "$st_mode, stalled target: the job is gone from $st_src"
	zdtm_go
	zdtm_finish 1
	echo "ok: $st_mode, a stalled target: the migration failed after $st_t s ($(tail -c 140 "$tmp/m.out" | tr -d '\n')), the job ran on"
}
