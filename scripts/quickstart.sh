#!/bin/sh
# The newcomer's command: install what rgpu needs, build it, start a private rgpud on a free
# loopback port and run two test programs through it. Safe to run again: dependencies are
# installed only when missing, the build is incremental, and each run uses a fresh temporary
# folder for the server's state, removed on exit.
#
# The server uses this machine's GPU when `nvidia-smi -L` succeeds, and otherwise the
# simulated device (tests/simgpu, build/lib/simgpu/libcuda.so.1). It says which.
# Programs run: build/tests/progs/vecadd (driver API) and, when it was built,
# build/tests/cuda/rt_basic_static (nvcc, static cudart); then a job checkpointed and moved,
# live while it runs, to a second rgpud (rgpuctl checkpoint, rgpuctl migrate). Exit status 0
# only if all passed.
set -eu
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}

echo "== installing dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "== building into $B (scripts/build.sh)"
scripts/build.sh

tmp=$(mktemp -d)
srv=""
srv2=""
cleanup() {
	for p in $srv $srv2; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the server ----------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$tmp/gpus" 2>&1; then
	mode=gpu
	echo "== device: the real GPU(s) of this machine:"
	sed 's/^/     /' "$tmp/gpus"
	set --
else
	mode=sim
	echo "== device: SIMULATED (no GPU found: nvidia-smi -L failed or is missing)."
	echo "   rgpud loads $B/lib/simgpu/libcuda.so.1, a host-memory stand-in for the driver."
	set -- --driver "$B/lib/simgpu/libcuda.so.1"
	# simgpu names, in the server log, any kernel it has no C implementation for
	SIMGPU_LOG=1
	export SIMGPU_LOG
fi

"$B/bin/rgpud" --listen 127.0.0.1:0 --port-file "$tmp/port" --data "$tmp/state" \
	--admin 127.0.0.1:0 --admin-port-file "$tmp/admin-port" --resume-grace 10 \
	--log-level info "$@" 2>"$tmp/rgpud.log" &
srv=$!
i=0
while [ ! -s "$tmp/port" ] || [ ! -s "$tmp/admin-port" ]; do
	if ! kill -0 "$srv" 2>/dev/null || [ $i -ge 200 ]; then
		echo "quickstart: FAILED - rgpud did not start. Its log:"
		cat "$tmp/rgpud.log"
		exit 1
	fi
	sleep 0.05
	i=$((i + 1))
done
server=127.0.0.1:$(cat "$tmp/port")
admin=127.0.0.1:$(cat "$tmp/admin-port")
echo "== rgpud (pid $srv) listens on $server (admin protocol on $admin); state in $tmp/state"

# ---- the programs --------------------------------------------------------------------------
passed=""
failed=""
skipped=""

# run NAME PATH: through rgpuctl run, output shown indented
run() {
	name=$1
	prog=$2
	echo "== $name: $B/bin/rgpuctl run --server $server -- $prog"
	logged=$(wc -l <"$tmp/rgpud.log")
	rc=0
	timeout 300 "$B/bin/rgpuctl" run --server "$server" -- "$prog" >"$tmp/out" 2>&1 || rc=$?
	sed 's/^/     /' "$tmp/out"
	if [ $rc -eq 0 ]; then
		# a program on rgpud's own host moves its link to shared memory by itself
		if tail -n +"$((logged + 1))" "$tmp/rgpud.log" | grep -q "moved to shared memory"; then
			echo "   $name: passed (over shared memory: rgpud is on this host)"
		else
			echo "   $name: passed (over TCP)"
		fi
		passed="$passed $name"
	elif [ "$mode" = sim ] &&
		tail -n +"$((logged + 1))" "$tmp/rgpud.log" | grep -q "simgpu: no C implementation registered for kernel"; then
		# simgpu runs a kernel only through a C twin in tests/simgpu/kernels.c
		echo "   $name: cannot run on the simulated device: simgpu has no C implementation of"
		echo "   its kernels (tests/simgpu/kernels.c). Not counted as a failure; it needs a GPU."
		tail -n +"$((logged + 1))" "$tmp/rgpud.log" | grep "simgpu: no C implementation" |
			sort -u | sed 's/^/     rgpud log: /'
		skipped="$skipped $name"
	else
		echo "   $name: FAILED (exit status $rc)"
		failed="$failed $name"
	fi
}

run vecadd "$B/tests/progs/vecadd"
if [ -x "$B/tests/cuda/rt_basic_static" ]; then
	run rt_basic_static "$B/tests/cuda/rt_basic_static"
else
	echo "== rt_basic_static: not built (no nvcc?), skipped"
	skipped="$skipped rt_basic_static"
fi

# ---- a job outlives its connection: vecadd while a proxy cuts the link 5 times ------------
echo "== vecadd through a proxy that cuts its connection 5 times (the job resumes each time)"
"$B/tests/e2e/cutproxy" --target "$server" --port-file "$tmp/cut-port" --cuts 5 --max-bytes 4M \
	--spread log --stats "$tmp/cut-stats" --log-level warn 2>"$tmp/cutproxy.log" &
cut=$!
i=0
while [ ! -s "$tmp/cut-port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
rc=0
# (RGPU_TRANSPORT=tcp: the proxy cuts TCP; on this host the link would move to shared memory)
RGPU_TRANSPORT=tcp RGPU_LOG=info timeout 300 "$B/bin/rgpuctl" run --server 127.0.0.1:"$(cat "$tmp/cut-port")" -- \
	"$B/tests/progs/vecadd" >"$tmp/out" 2>&1 || rc=$?
kill "$cut" 2>/dev/null || true
wait "$cut" 2>/dev/null || true
grep -v " info: " "$tmp/out" | sed 's/^/     /'
grep "resumed on" "$tmp/out" | sed 's/.*rgpu: /     /'
if [ $rc -eq 0 ] && grep -q "elements OK" "$tmp/out"; then
	echo "   resume: passed ($(cat "$tmp/cut-stats"))"
	passed="$passed resume"
else
	echo "   resume: FAILED (exit status $rc)"
	failed="$failed resume"
fi

# ---- what the operator sees: rgpuctl status and jobs while a job holds 64 MiB ------------
"$B/bin/rgpuctl" run --server "$server" -- "$B/tests/progs/hold" 64 "$tmp/ready" >"$tmp/hold" 2>&1 &
holder=$!
i=0
while [ ! -e "$tmp/ready" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.6
echo "== $B/bin/rgpuctl status --server $admin"
"$B/bin/rgpuctl" status --server "$admin" | sed 's/^/     /'
echo "== $B/bin/rgpuctl jobs --server $admin"
"$B/bin/rgpuctl" jobs --server "$admin" | sed 's/^/     /'
rm -f "$tmp/ready"
if wait "$holder" && "$B/bin/rgpuctl" jobs --server "$admin" --json | grep -q '"jobs"'; then
	passed="$passed rgpuctl"
else
	echo "   rgpuctl: FAILED: $(cat "$tmp/hold")"
	failed="$failed rgpuctl"
fi

# ---- a checkpoint, then the running job moved to a second server --------------------------
# tests/zdtm/zdtm_mixed builds patterned memory, a module global, streams, events and a graph,
# prints READY and waits for SIGUSR1, then checks every byte and handle; three rounds.
if [ -x "$B/tests/zdtm/zdtm_mixed" ]; then
	"$B/bin/rgpud" --listen 127.0.0.1:0 --port-file "$tmp/port2" --data "$tmp/state2" \
		--admin 127.0.0.1:0 --admin-port-file "$tmp/admin-port2" --resume-grace 10 \
		--log-level info "$@" 2>"$tmp/rgpud2.log" &
	srv2=$!
	i=0
	while { [ ! -s "$tmp/port2" ] || [ ! -s "$tmp/admin-port2" ]; } && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	admin2=127.0.0.1:$(cat "$tmp/admin-port2")
	echo "== a second rgpud (pid $srv2) on 127.0.0.1:$(cat "$tmp/port2") (admin $admin2)"
	ZDTM_ROUNDS=3 RGPU_LOG=info "$B/bin/rgpuctl" run --server "$server" -- \
		"$B/tests/zdtm/zdtm_mixed" >"$tmp/z.out" 2>"$tmp/z.err" &
	zpid=$!
	ready() {
		i=0
		# (a file the program has not opened yet counts 0 READY lines)
		while n=$(grep -c '^READY$' "$tmp/z.out" 2>/dev/null); [ "${n:-0}" -lt "$1" ] &&
			[ $i -lt 1200 ] && kill -0 "$zpid" 2>/dev/null; do
			sleep 0.05
			i=$((i + 1))
		done
	}
	ready 1
	# zdtm_mixed's job (vecadd's may still wait out its grace period there)
	job=$("$B/bin/rgpuctl" jobs --server "$admin" --json | python3 -c '
import json, sys
print(next((j["job"] for j in json.load(sys.stdin)["jobs"] if j["program"].endswith("/zdtm_mixed")), ""))') || job=""
	echo "== $B/bin/rgpuctl checkpoint $job --server $admin"
	"$B/bin/rgpuctl" checkpoint "$job" --server "$admin" 2>&1 | sed 's/^/     /'
	kill -USR1 "$zpid" 2>/dev/null
	ready 2
	echo "== $B/bin/rgpuctl migrate $job --server $admin --to $admin2   (live: pre-copy rounds, then a short hold)"
	"$B/bin/rgpuctl" migrate "$job" --server "$admin" --to "$admin2" 2>&1 | sed 's/^/     /'
	echo "== $B/bin/rgpuctl jobs --server $admin --server $admin2"
	"$B/bin/rgpuctl" jobs --server "$admin" --server "$admin2" | sed 's/^/     /'
	kill -USR1 "$zpid" 2>/dev/null
	ready 3
	echo "== $B/bin/rgpuctl checkpoints --server $admin --server $admin2"
	"$B/bin/rgpuctl" checkpoints --server "$admin" --server "$admin2" | sed 's/^/     /'
	kill -USR1 "$zpid" 2>/dev/null
	rc=0
	wait "$zpid" || rc=$?
	grep "moved from\|resumed on" "$tmp/z.err" | sed 's/.*rgpu: /     client: /'
	sed 's/^/     /' "$tmp/z.out" | grep -v READY
	# passed: the program's checks, with its job checkpointed and moved (its client followed)
	if [ $rc -eq 0 ] && [ -n "$job" ] && grep -q "OK rounds=3" "$tmp/z.out" &&
		grep -q "job $job: moved from" "$tmp/z.err"; then
		echo "   checkpoint and live migration: passed (every byte and handle checked after each)"
		passed="$passed migrate"
	else
		echo "   checkpoint and migration: FAILED (exit status $rc): $(tail -n 3 "$tmp/z.err")"
		failed="$failed migrate"
	fi
else
	echo "== checkpoint and migration: tests/zdtm not built (no nvcc?), skipped"
	skipped="$skipped migrate"
fi

if ! kill -0 "$srv" 2>/dev/null; then
	echo "   rgpud died during the run"
	failed="$failed rgpud"
fi
if [ -n "$failed" ]; then
	echo "== rgpud log (last 30 lines)"
	tail -n 30 "$tmp/rgpud.log" | sed 's/^/     /'
fi

# ---- verdict -------------------------------------------------------------------------------
[ "$mode" = gpu ] && where="the GPU" || where="the simulated device"
verdict="passed:${passed:- none}; failed:${failed:- none}; skipped:${skipped:- none}"
if [ -n "$failed" ] || [ -z "$passed" ]; then
	echo "quickstart: FAILED on $where ($verdict)"
	exit 1
fi
echo "quickstart: OK on $where ($verdict)"
