#!/bin/sh
# The live migration benchmark (issue 10; testing.md, "Benchmarks"), from one run:
#   live_bench.sh BUILD [MIB...]      (default 1024 8192 16384)
# Two rgpud on this machine (on a GPU host: the same GPU; RGPU_E2E_DRIVER=system), A and B. For
# each size, a job holding that much device memory (tests/zdtm/zdtm_fill, random data) is
# migrated live A -> B while it sleeps (idle) and while it checks all of its memory and rewrites
# R MiB/s of its hottest tenth for each R of RGPU_LIVE_RATES (default 1024; busy@R:
# ZDTM_FILL_HOT, the same chunks each time), then the program checks every byte. Then, when
# PyTorch is there, a training run (tests/gpu/torch_train.py, 200 steps) is migrated in its
# middle, and its loss curve is compared with a run that was not. Prints one table: total time,
# pre-copy rounds, bytes sent (and while held), the pause the job saw. The stores live in
# RGPU_BENCH_DATA (default: under /dev/shm when it has room, else a temporary directory);
# every checkpoint is removed after each size.
set -u
build=$1
shift
sizes=${*:-"1024 8192 16384"}
rates=${RGPU_LIVE_RATES:-${RGPU_LIVE_RATE:-1024}}
tmp=$(mktemp -d)
. "$(dirname "$0")/../e2e/servers.sh"
data=${RGPU_BENCH_DATA:-}
if [ -z "$data" ]; then
	need=$(echo "$sizes" | awk '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print m * 3300 }')
	room=$(df -k --output=avail /dev/shm 2>/dev/null | tail -n 1)
	if [ -w /dev/shm ] && [ "${room:-0}" -gt "$need" ]; then data=/dev/shm/rgpu-live-bench.$$; else data=$tmp/data; fi
fi
SRV_RM="$data"
mkdir -p "$data"
srv_start A -- --resume-grace 60 --data "$data/A"
srv_start B -- --resume-grace 60 --data "$data/B"
A=$(srv_admin A)
B=$(srv_admin B)
echo "stores in $data"
printf '%-8s %-10s %9s %7s %11s %11s %10s\n' GiB job "total s" rounds "sent GiB" "held MiB" "pause ms" >"$tmp/table"
row() {
	printf '%-8s %-10s %9s %7s %11s %11s %10s\n' "$1" "$2" \
		"$(json "$tmp/m.json" '"%.2f" % (j["duration_ns"] / 1e9)')" "$(json "$tmp/m.json" 'j["rounds"]')" \
		"$(json "$tmp/m.json" '"%.2f" % (j["bytes_sent"] / 2**30)')" \
		"$(json "$tmp/m.json" '"%.1f" % (j["final_bytes"] / 2**20)')" \
		"$(json "$tmp/m.json" '"%.1f" % (j["pause_ns"] / 1e6)')$(json "$tmp/m.json" '" restaged" if j["restaged"] else ""')" >>"$tmp/table"
}
# every checkpoint on both servers removed (and their chunks collected)
empty() {
	for s in "$A" "$B"; do
		for id in $("$ctl" checkpoints --server "$s" --json |
			python3 -c 'import json,sys; print(" ".join(str(c["id"]) for c in json.load(sys.stdin)["checkpoints"]))'); do
			"$ctl" checkpoint rm "$id" --server "$s" >/dev/null || fail "rm $id on $s"
		done
	done
}
for mib in $sizes; do
	for kind in idle $(for r in $rates; do echo "busy@$r"; done); do
		p="fill $mib $kind"
		if [ $kind != idle ]; then
			ZDTM_FILL_MIB=$mib ZDTM_FILL_BUSY=${kind#busy@} ZDTM_FILL_HOT=1 zdtm_start A zdtm_fill 1
		else
			ZDTM_FILL_MIB=$mib zdtm_start A zdtm_fill 1
		fi
		zdtm_wait_ready 1
		job=$(job_of A)
		[ $kind != idle ] && sleep 2
		"$ctl" migrate "$job" --server "$A" --to "$B" --json >"$tmp/m.json" 2>"$tmp/m.err" ||
			fail "$p: $(cat "$tmp/m.json" "$tmp/m.err")"
		[ "$(job_of B)" = "$job" ] || fail "$p: not on B"
		zdtm_go
		zdtm_finish 1
		row "$(awk "BEGIN { printf \"%g\", $mib / 1024 }")" "$kind"
		echo "ok: $p: $(tail -n 1 "$zout")"
		empty
	done
done
# PyTorch, migrated in the middle of its training; its loss curve against a run not migrated
if python3 -c "import torch" 2>/dev/null; then
	root=$(cd "$(dirname "$0")/../.." && pwd)
	STEPS=200 TRAIN_PAUSE_MS=20 timeout 300 python3 "$root/tests/gpu/torch_train.py" >"$tmp/native.out" 2>&1 ||
		fail "torch native: $(tail -5 "$tmp/native.out")"
	: >"$tmp/rgpu.out"
	STEPS=200 TRAIN_PAUSE_MS=20 TRAIN_PROGRESS=1 RGPU_LOG=warn timeout 300 "$ctl" run --server "127.0.0.1:$(srv_port A)" -- \
		python3 "$root/tests/gpu/torch_train.py" >"$tmp/rgpu.out" 2>&1 &
	tpid=$!
	i=0
	until grep -q '^STEP 100$' "$tmp/rgpu.out"; do
		kill -0 $tpid 2>/dev/null || fail "torch through rgpu ended early: $(tail -5 "$tmp/rgpu.out")"
		[ $i -ge 3000 ] && fail "torch: no step 100 within 300 s"
		sleep 0.1
		i=$((i + 1))
	done
	job=$(job_of A)
	"$ctl" migrate "$job" --server "$A" --to "$B" --json >"$tmp/m.json" 2>"$tmp/m.err" ||
		fail "torch: migration: $(cat "$tmp/m.json" "$tmp/m.err")"
	wait $tpid || fail "torch through rgpu failed after its migration: $(tail -5 "$tmp/rgpu.out")"
	row torch train
	python3 - "$tmp/native.out" "$tmp/rgpu.out" <<'PY' || fail "torch: the loss curves differ"
import json, sys
n = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
r = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
same = n["losses"] == r["losses"]
print(f"ok: torch migrated live at step 100 of 200: loss curve {'equal' if same else 'DIFFERENT'} to the unmigrated run "
      f"({len(r['losses'])} steps, final {r['final_loss']:.6f} vs {n['final_loss']:.6f}); graph ok {r['graph_ok']}")
sys.exit(0 if same and r["graph_ok"] else 1)
PY
fi
cat "$tmp/table"
grep -h "live migration round\|migrated live" "$tmp"/A/log | sed 's/^.*worker: //' | tail -n 30
