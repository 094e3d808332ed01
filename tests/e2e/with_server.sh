#!/bin/sh
# Run a command through rgpu against a private rgpud on a free loopback port.
#   with_server.sh BUILD_DIR CMD [ARGS...]
# The server uses simgpu unless RGPU_E2E_DRIVER names another driver ("system": the real one).
# Fails if the server died during the run. Server log: $RGPU_E2E_LOG or a temporary file.
# Extra rgpud options: $RGPUD_ARGS, split on blanks (none by default).
set -u
build=$1
shift
tmp=$(mktemp -d)
driver=${RGPU_E2E_DRIVER:-$build/lib/simgpu/libcuda.so.1}
[ "$driver" = system ] && driver=""
log=${RGPU_E2E_LOG:-$tmp/rgpud.log}
# RGPUD_ARGS: extra options for this test's rgpud (e.g. --resume-grace 1)
rgpud_args=${RGPUD_ARGS:-}
# shellcheck disable=SC2086 # RGPUD_ARGS is a list of options
"$build/bin/rgpud" --listen 127.0.0.1:0 --port-file "$tmp/port" \
	--admin 127.0.0.1:0 --admin-port-file "$tmp/admin-port" \
	${driver:+--driver "$driver"} --state-dir "$tmp/state" --log-level info $rgpud_args \
	2>>"$log" &
pid=$!
cleanup() {
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' INT TERM   # a timeout or ^C still runs cleanup (EXIT) and stops rgpud
i=0
while { [ ! -s "$tmp/port" ] || [ ! -s "$tmp/admin-port" ]; } && [ $i -lt 200 ]; do
	kill -0 "$pid" 2>/dev/null || { echo "with_server: rgpud did not start:"; cat "$log"; exit 1; }
	sleep 0.05
	i=$((i + 1))
done
port=$(cat "$tmp/port")
admin=$(cat "$tmp/admin-port")
RGPU_SERVER=127.0.0.1:$port RGPU_E2E_PORT=$port RGPU_E2E_PID=$pid RGPU_E2E_ADMIN=127.0.0.1:$admin \
	RGPU_E2E_LOGFILE=$log "$build/bin/rgpuctl" run -- "$@"
rc=$?
if ! kill -0 "$pid" 2>/dev/null; then
	echo "with_server: rgpud died during the test"
	cat "$log"
	exit 1
fi
[ $rc -ne 0 ] && { echo "--- rgpud log"; tail -n 40 "$log"; }
exit $rc
