#!/bin/sh
# Regenerate the fuzz seed corpora (tests/fuzz/corpus) from real traffic: a private rgpud on
# simgpu, driver-API and nvcc-built programs run through record_session.py (job port, with and
# without a tenant key), rgpuctl status and jobs through it (admin port), the state logs the
# workers dumped, and the module images of the build; make_corpus.py cuts them into seeds.
#   make_seeds.sh BUILD_DIR
# Run by hand when the protocol changes; the result is reviewed and committed like code.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
mkdir -p "$tmp/dump" "$tmp/sess" "$tmp/keys"
chmod 700 "$tmp/keys"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/keys/alice.key"
chmod 600 "$tmp/keys/alice.key"

wait_file() { i=0; while [ ! -s "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; }
server() { # server NAME [rgpud options...]: an rgpud, a recorder in front of each port
	name=$1
	shift
	RGPU_STATE_DUMP=$tmp/dump "$build/bin/rgpud" --listen 127.0.0.1:0 --port-file "$tmp/$name.port" \
		--admin 127.0.0.1:0 --admin-port-file "$tmp/$name.aport" \
		--driver "$build/lib/simgpu/libcuda.so.1" --state-dir "$tmp/state-$name" "$@" \
		2>>"$tmp/rgpud.log" &
	pids="$pids $!"
	wait_file "$tmp/$name.port"
	wait_file "$tmp/$name.aport"
	python3 "$src/tests/fuzz/record_session.py" --to "127.0.0.1:$(cat "$tmp/$name.port")" \
		--port-file "$tmp/$name.rport" --out "$tmp/sess" --prefix "job-$name" &
	pids="$pids $!"
	python3 "$src/tests/fuzz/record_session.py" --to "127.0.0.1:$(cat "$tmp/$name.aport")" \
		--port-file "$tmp/$name.raport" --out "$tmp/sess" --prefix "admin-$name" &
	pids="$pids $!"
	wait_file "$tmp/$name.rport"
	wait_file "$tmp/$name.raport"
}
server plain
server keys --keys "$tmp/keys"

run() { # run NAME PROGRAM [ARGS...]: a program through the recorder of server NAME
	name=$1
	shift
	RGPU_SERVER=127.0.0.1:$(cat "$tmp/$name.rport") RGPU_VERIFY_LOG=1 \
		"$build/bin/rgpuctl" run -- "$@" >/dev/null 2>&1 || echo "make_seeds: $* failed (kept)"
}
for p in vecadd streams callbacks globals params vmm; do
	run plain "$build/tests/progs/$p"
done
run plain "$build/tests/progs/queries" --simgpu
run plain "$build/tests/progs/errors" --rgpu # error replies and refusals
for p in rt_basic_static rt_graph_static rt_printf_shared rt_mallocasync_static rt_kernels_static; do
	[ -x "$build/tests/cuda/$p" ] && run plain "$build/tests/cuda/$p"
done
RGPU_KEY_FILE=$tmp/keys/alice.key run keys "$build/tests/progs/vecadd"
# the admin protocol while a job holds memory, so that the replies list one
RGPU_SERVER=127.0.0.1:$(cat "$tmp/plain.port") "$build/bin/rgpuctl" run -- \
	"$build/tests/progs/hold" 1 "$tmp/ready" >/dev/null 2>&1 &
holder=$!
wait_file "$tmp/ready"
admin=127.0.0.1:$(cat "$tmp/plain.raport")
"$build/bin/rgpuctl" status --server "$admin" >/dev/null 2>&1 || echo "make_seeds: status failed"
"$build/bin/rgpuctl" jobs --server "$admin" --json >/dev/null 2>&1 || echo "make_seeds: jobs failed"
rm -f "$tmp/ready"
wait "$holder" || echo "make_seeds: hold failed"
sleep 1

python3 "$src/tests/fuzz/make_corpus.py" --src "$src" --build "$build" \
	--out "$src/tests/fuzz/corpus" --sessions "$tmp/sess" --stlogs "$tmp/dump" \
	--images "$build/tests/progs/kernels.cubin" "$build/tests/progs/kernels.fatbin" \
	"$build/tests/progs/kernels_zstd.fatbin" "$build/tests/progs/kernels.ptx" \
	"$build/tests/unit/util/images/image_device.fatbin" \
	"$build/tests/unit/util/images/image_device.sm_90.cubin" \
	"$build/tests/unit/util/images/image_dlink.fatbin" \
	"$build/tests/unit/util/images/image_whole.ptx"
for d in "$src"/tests/fuzz/corpus/*/; do
	echo "make_seeds: $(ls "$d" | wc -l) seeds in $d"
done
