#!/bin/sh
# What CUDA arrays cost a checkpoint and a live migration (docs/architecture.md, "Arrays,
# textures and surfaces"), from one run:   arrays_bench.sh BUILD [MIB...]   (default 0 64 256 1024)
# Two rgpud on this machine (on a GPU host: the same GPU; RGPU_E2E_DRIVER=system), A and B. For
# each size, tests/zdtm/zdtm_arrays with ZDTM_ARRAYS_MIB of random data more in a 2D array (its
# own arrays are 65 KiB) is checkpointed on A (the pause: the barrier reads the arrays to host
# memory), migrated live A -> B (arrays are not tracked between rounds: they all cross at the
# switchover, the job held) and cold B -> A, then checks every byte. Prints one table: the
# checkpoint's pause and duration, the live and the cold migration's pause and total time.
set -u
build=$1
shift
sizes=${*:-"0 64 256 1024"}
tmp=$(mktemp -d)
. "$(dirname "$0")/../e2e/servers.sh"
data=${RGPU_BENCH_DATA:-}
if [ -z "$data" ]; then
	need=$(echo "$sizes" | awk '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print m * 3300 + 100000 }')
	room=$(df -k --output=avail /dev/shm 2>/dev/null | tail -n 1)
	if [ -w /dev/shm ] && [ "${room:-0}" -gt "$need" ]; then data=/dev/shm/rgpu-arrays-bench.$$; else data=$tmp/data; fi
fi
SRV_RM="$data"
mkdir -p "$data"
srv_start A -- --resume-grace 60 --data "$data/A"
srv_start B -- --resume-grace 60 --data "$data/B"
A=$(srv_admin A)
B=$(srv_admin B)
echo "stores in $data"
ms() { json "$1" '"%.1f" % (j["pause_ns"] / 1e6)'; }
s() { json "$1" '"%.2f" % (j["duration_ns"] / 1e9)'; }
printf '%-9s %12s %12s %12s %12s %12s %12s\n' "MiB" "ckpt pause" "ckpt s" "live pause" "live s" \
	"cold pause" "cold s" >"$tmp/table"
for mib in $sizes; do
	ZDTM_ARRAYS_MIB=$mib zdtm_start A zdtm_arrays 3
	zdtm_wait_ready 1
	job=$(job_of A)
	"$ctl" checkpoint "$job" --server "$A" --json >"$tmp/c.json" || fail "checkpoint: $(cat "$tmp/c.json")"
	"$ctl" checkpoint rm "$(json "$tmp/c.json" 'j["id"]')" --server "$A" >/dev/null || fail "rm"
	zdtm_go
	zdtm_wait_ready 2
	"$ctl" migrate "$job" --server "$A" --to "$B" --json >"$tmp/l.json" || fail "live: $(cat "$tmp/l.json")"
	zdtm_go
	zdtm_wait_ready 3
	"$ctl" migrate "$job" --server "$B" --to "$A" --cold --json >"$tmp/m.json" || fail "cold: $(cat "$tmp/m.json")"
	"$ctl" checkpoint rm "$(json "$tmp/m.json" 'j["checkpoint"]')" --server "$B" >/dev/null || fail "rm"
	zdtm_go
	zdtm_finish 3
	printf '%-9s %12s %12s %12s %12s %12s %12s\n' "$mib" "$(ms "$tmp/c.json") ms" "$(s "$tmp/c.json")" \
		"$(ms "$tmp/l.json") ms" "$(s "$tmp/l.json")" "$(ms "$tmp/m.json") ms" "$(s "$tmp/m.json")" >>"$tmp/table"
	echo "ok: $mib MiB: $(tail -n 1 "$zout")"
done
cat "$tmp/table"
