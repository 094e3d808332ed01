#!/bin/bash
# Profile one rgpud worker while a program runs through it (perf record on the worker's
# process, perf report flat by symbol): where the worker's time goes on the GPU host.
#   perf_worker.sh BUILD OUTDIR TRANSPORT PROGRAM [ARGS...]
set -u
B=$1 OUT=$2 T=$3
shift 3
command -v perf >/dev/null || { echo "perf_worker: no perf on this host"; exit 0; }
mkdir -p "$OUT"
"$B/bin/rgpud" --listen 127.0.0.1:0 --port-file "$OUT/perf.port" --state-dir "$OUT/perf-state" \
	--log-level warn 2>"$OUT/perf.rgpud.log" &
srv=$!
for _ in $(seq 100); do [ -s "$OUT/perf.port" ] && break; sleep 0.1; done
RGPU_TRANSPORT=$T "$B/bin/rgpuctl" run --server "127.0.0.1:$(cat "$OUT/perf.port")" -- "$@" \
	>"$OUT/perf.prog.txt" 2>&1 &
prog=$!
w=""
for _ in $(seq 100); do w=$(pgrep -P $srv | head -1); [ -n "$w" ] && break; sleep 0.05; done
sleep 1.5
[ -n "$w" ] && perf record -F 4999 -g -p "$w,$prog" -o "$OUT/perf.data" -- sleep 3 >/dev/null 2>&1
wait $prog
kill $srv 2>/dev/null; wait $srv 2>/dev/null
perf report -i "$OUT/perf.data" --no-children --sort pid,sym -g none 2>/dev/null | grep -v '^#' |
	grep -v '^$' | head -70
cat "$OUT/perf.prog.txt"
