#!/bin/bash
# Everything rgpu checks on a real GPU, in one go (testing.md tier 4; gpu-host.md):
#   tests/gpu/run.sh [OUT_DIR]
# Starts rgpud on the real driver, runs every test program natively and through rgpu, the
# hostile-input and killed-client checks, the cuGetProcAddress cross-check against the real
# driver, and the benchmarks (rgpu and native side by side from this one run). Full logs go to
# OUT_DIR; a short table is printed last. Uses ./gpubundle (scripts/gpu-bundle.sh) or ./build.
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/rgpu-gpu}}
B=${RGPU_BUILD:-gpubundle}
[ -d "$B" ] || B=build
mkdir -p "$OUT"
TABLE="$OUT/table.txt"
: >"$TABLE"
row() { printf '%-22s %-8s %-8s %10s %10s %8s\n' "$@" >>"$TABLE"; }
secs() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }

# ---- the GPU ---------------------------------------------------------------------------
# RGPU_DRY_RUN=1: no GPU; simgpu plays the driver on both sides (to check this script only)
DRIVER_ARG=()
if [ "${RGPU_DRY_RUN:-0}" = 1 ]; then
	SIMGPU=$(realpath build/lib/simgpu)
	DRIVER_ARG=(--driver "$SIMGPU/libcuda.so.1")
	export LD_LIBRARY_PATH=$SIMGPU${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	echo "dry run: simgpu, not a GPU" >"$OUT/gpu.txt"
elif ! nvidia-smi -L >"$OUT/gpu.txt" 2>&1; then
	echo "run.sh: no GPU here (nvidia-smi failed)"; cat "$OUT/gpu.txt"; exit 1
fi
[ "${RGPU_DRY_RUN:-0}" = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >>"$OUT/gpu.txt" 2>&1
echo "== $(head -1 "$OUT/gpu.txt")"

# ---- the server ------------------------------------------------------------------------
"$B/bin/rgpud" --listen 127.0.0.1:0 --port-file "$OUT/port" --state-dir "$OUT/state" "${DRIVER_ARG[@]}" \
	--log-level info 2>"$OUT/rgpud.log" &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$OUT/port" ] && break; sleep 0.1; done
export RGPU_SERVER=127.0.0.1:$(cat "$OUT/port")
echo "== rgpud pid $SRV on $RGPU_SERVER"

# run NAME CMD...: natively, then through rgpu; one table row
run_pair() {
	local name=$1 t0 t1 t2 rn rr; shift
	t0=$(secs)
	timeout 300 "$@" >"$OUT/$name.native.log" 2>&1; rn=$?
	t1=$(secs)
	RGPU_LOG=warn RGPU_LOG_FILE="$OUT/$name.rgpu.ilog" \
		timeout 300 "$B/bin/rgpuctl" run -- "$@" >"$OUT/$name.rgpu.log" 2>&1; rr=$?
	t2=$(secs)
	row "$name" "$([ $rn = 0 ] && echo ok || echo FAIL:$rn)" "$([ $rr = 0 ] && echo ok || echo FAIL:$rr)" \
		"$(calc "$t1 - $t0")" "$(calc "$t2 - $t1")" "$(calc "($t2 - $t1) / ($t1 - $t0)")"
	echo "-- $name: native $rn, rgpu $rr"
}

row "test" "native" "rgpu" "native s" "rgpu s" "ratio"
P="$B/tests/progs"
for p in vecadd streams globals bigcopy callbacks params; do
	run_pair "$p" "$P/$p"
done
# errors: the native run's codes are the reference the rgpu run must reproduce
t0=$(secs)
timeout 300 "$P/errors" >"$OUT/errors.native.log" 2>"$OUT/errors.native.err"; rn=$?
t1=$(secs)
RGPU_LOG=warn RGPU_LOG_FILE="$OUT/errors.rgpu.ilog" timeout 300 "$B/bin/rgpuctl" run -- \
	"$P/errors" --rgpu "$OUT/errors.native.log" >"$OUT/errors.rgpu.log" 2>&1; rr=$?
t2=$(secs)
row errors "$([ $rn = 0 ] && echo ok || echo DIFF:$rn)" "$([ $rr = 0 ] && echo ok || echo FAIL:$rr)" \
	"$(calc "$t1 - $t0")" "$(calc "$t2 - $t1")" "$(calc "($t2 - $t1) / ($t1 - $t0)")"
[ -d "$B/tests/cuda" ] && for p in $(find "$B/tests/cuda" -maxdepth 1 -type f -perm -u+x -printf "%f\n" | sort); do
	run_pair "cuda_$p" "$B/tests/cuda/$p"
done

# ---- PyTorch: a small CNN, 50 steps, and a CUDA graph; loss must match native ----------
if python3 -c "import torch" 2>/dev/null && [ "${RGPU_DRY_RUN:-0}" != 1 ]; then
	run_pair torch_train python3 tests/gpu/torch_train.py
	# a second run through rgpu: every module image must now come from the server's cache
	mark=$(wc -l <"$OUT/rgpud.log")
	RGPU_LOG=warn RGPU_LOG_FILE="$OUT/torch_train2.rgpu.ilog" timeout 300 \
		"$B/bin/rgpuctl" run -- python3 tests/gpu/torch_train.py >"$OUT/torch_train2.rgpu.log" 2>&1
	tail -n +"$((mark + 1))" "$OUT/rgpud.log" >"$OUT/rgpud.second_torch.log"
	python3 - "$OUT" >>"$OUT/torch_compare.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
def last(p):
    try:
        return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e:
        return None
n, r = last(f"{out}/torch_train.native.log"), last(f"{out}/torch_train.rgpu.log")
if n and r:
    rel = abs(r["final_loss"] - n["final_loss"]) / abs(n["final_loss"])
    print(f"final loss native {n['final_loss']:.6f} rgpu {r['final_loss']:.6f} rel diff {rel:.2e} "
          f"({'ok' if rel <= 1e-3 else 'MISMATCH'}); step ms native {n['step_ms_median']:.3f} "
          f"rgpu {r['step_ms_median']:.3f} ratio {r['step_ms_median'] / n['step_ms_median']:.2f}; "
          f"graph ok native {n['graph_ok']} rgpu {r['graph_ok']}")
else:
    print("torch: a side produced no result")
PY
fi

# ---- rgpu only: hostile input, a client killed mid-copy ---------------------------------
"$B/tests/e2e/hostile" "$(cat "$OUT/port")" >"$OUT/hostile.log" 2>&1
row hostile "-" "$([ $? = 0 ] && echo ok || echo FAIL)" "" "" ""
RGPU_E2E_PID=$SRV "$B/bin/rgpuctl" run -- tests/e2e/kill_client.sh "$P" >"$OUT/kill_client.log" 2>&1
row kill_client "-" "$([ $? = 0 ] && echo ok || echo FAIL)" "" "" ""

# ---- cuGetProcAddress against the real driver -----------------------------------------
if [ -x "$B/bin/procaddr_dump" ] && [ -f "$B/tests/procaddr_queries.txt" ]; then
	"$B/bin/procaddr_dump" -o "$OUT/procaddr_real.txt" "$B/tests/procaddr_queries.txt" \
		>"$OUT/procaddr_dump.log" 2>&1
	python3 tests/gpu/procaddr_compare.py "$OUT/procaddr_real.txt" "$B/tests/procaddr_expected.txt" \
		>"$OUT/procaddr_compare.log" 2>&1
	row procaddr_vs_driver "-" "$([ $? = 0 ] && echo ok || echo DIFF)" "" "" ""
fi

# ---- benchmarks -------------------------------------------------------------------------
timeout 300 "$P/bench" rtt launch bw >"$OUT/bench.native.txt" 2>"$OUT/bench.native.err"
timeout 300 "$B/bin/rgpuctl" run -- "$P/bench" rtt launch bw >"$OUT/bench.rgpu.txt" 2>"$OUT/bench.rgpu.err"
python3 tests/gpu/report.py "$OUT/bench.native.txt" "$OUT/bench.rgpu.txt" >"$OUT/bench.table" 2>&1

# ---- what the interposer did not implement ----------------------------------------------
cat "$OUT"/*.rgpu.ilog 2>/dev/null | grep -o 'unimplemented: [A-Za-z0-9_]*' | sort | uniq -c \
	>"$OUT/unimplemented.txt"

kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; trap - EXIT
echo
echo "== logs in $OUT"
echo "== not implemented (calls that returned CUDA_ERROR_NOT_SUPPORTED):"
if [ -s "$OUT/unimplemented.txt" ]; then cat "$OUT/unimplemented.txt"; else echo "   none"; fi
echo "== benchmarks (rgpu over TCP loopback vs native, same run)"
cat "$OUT/bench.table"
[ -s "$OUT/torch_compare.txt" ] && { echo "== PyTorch"; cat "$OUT/torch_compare.txt"; }
[ -f "$OUT/torch_train.rgpu.log" ] && ! tail -1 "$OUT/torch_train.rgpu.log" | grep -q final_loss &&
	{ echo "   rgpu run ended with:"; tail -3 "$OUT/torch_train.rgpu.log" | sed 's/^/   /'; }
echo "== module images (rgpud.log)"
awk '/bytes received/ { for (i = 1; i < NF; i++) if ($(i+1) == "bytes") v = $i; n++; s += v; if (v > m) m = v }
     /bytes from the cache/ { h++ }
     END { printf "   shipped %d image(s), %d bytes in all, largest %d bytes; %d cache hit(s)\n", n, s, m, h }' "$OUT/rgpud.log"
[ -f "$OUT/rgpud.second_torch.log" ] && awk '/bytes received/ { n++ } /bytes from the cache/ { h++ }
     END { printf "   second PyTorch run: %d shipped, %d from the cache\n", n, h }' "$OUT/rgpud.second_torch.log"
echo "== errors: native codes vs the expectations in errors.c (rgpu is compared with native)"
grep -h "FAIL" "$OUT/errors.native.err" "$OUT/errors.rgpu.log" 2>/dev/null | head -5
echo "== tests"
cat "$TABLE"
