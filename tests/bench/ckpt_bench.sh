#!/bin/sh
# The checkpoint benchmark (issue 9; testing.md, "Benchmarks"), all from one run:
#   ckpt_bench.sh BUILD [MIB...]      (default 1024 8192 16384 32768)
# For each size, a job holding that much device memory (tests/zdtm/zdtm_fill) of random data,
# and (but for 16384) of compressible data, is checkpointed (the full checkpoint: throughput,
# the pause the job saw, whether the GPU had room for a snapshot), then 10% of its chunks change
# and it is checkpointed again (the incremental one: its effective throughput over the whole
# job), then it ends and its first checkpoint is restored on the same server from the warm
# store (throughput of the rebuild: replay, fill, hash check). For comparison from the same
# run: the store's own sequential write and read bandwidth (store_bench) and the GPU's
# device-to-host bandwidth into pinned memory (d2h_bw). The store lives in $RGPU_BENCH_DATA
# (default /dev/shm/rgpu-ckpt-bench when /dev/shm exists: host memory, as the published numbers
# compared with are; else a temporary directory). Prints a table; RGPU_E2E_DRIVER=system for the
# real GPU.
set -u
build=$1
shift
sizes=${*:-"1024 8192 16384 32768"}
tmp=$(mktemp -d)
. "$(dirname "$0")/../e2e/servers.sh"
data=${RGPU_BENCH_DATA:-}
if [ -z "$data" ]; then
	# host memory when /dev/shm has room for the largest size, random (a container's may not)
	need=$(echo "$sizes" | awk '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print m * 1100 }')
	room=$(df -k --output=avail /dev/shm 2>/dev/null | tail -n 1)
	if [ -w /dev/shm ] && [ "${room:-0}" -gt "$need" ]; then
		data=/dev/shm/rgpu-ckpt-bench.$$
	else
		data=$tmp/data
	fi
fi
SRV_RM="$data"
gbs() { awk "BEGIN { printf \"%.2f\", $1 / $2 }"; }   # bytes, ns -> GB/s

printf '%-6s %-12s %10s %9s %5s %10s %8s %10s %10s\n' "GiB" "data" "full GB/s" "pause ms" \
	"snap" "10% GB/s" "10% new" "restore" "stored" >"$tmp/table"
for size in $sizes; do
	for kind in random compressible; do
		[ "$kind" = compressible ] && [ "$size" = 16384 ] && continue
		rm -rf "$data"
		srv_start A -- --data "$data" --resume-grace 2 --barrier-timeout 120
		ZDTM_FILL_MIB=$size ZDTM_FILL_KIND=$kind zdtm_start A zdtm_fill 2
		zdtm_wait_ready 1
		job=$(job_of A)
		"$ctl" checkpoint "$job" --server "$(srv_admin A)" --json >"$tmp/c1.json" ||
			fail "checkpoint of $size MiB $kind: $(cat "$tmp/c1.json")"
		zdtm_go
		zdtm_wait_ready 2
		"$ctl" checkpoint "$job" --server "$(srv_admin A)" --json >"$tmp/c2.json" ||
			fail "second checkpoint of $size MiB $kind"
		zdtm_go
		zdtm_finish 2
		i=0
		while [ -n "$(job_of A)" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
		"$ctl" restore "$(json "$tmp/c1.json" 'j["id"]')" --server "$(srv_admin A)" \
			--to "$(srv_admin A)" --json >"$tmp/r.json" || fail "restore of $size MiB $kind: $(cat "$tmp/r.json")"
		dev=$(json "$tmp/c1.json" 'j["device_bytes"]')
		printf '%-6s %-12s %10s %9.1f %5s %10s %7.1f%% %10s %10s\n' "$(awk "BEGIN { printf \"%.0f\", $size / 1024 }")" "$kind" \
			"$(gbs "$dev" "$(json "$tmp/c1.json" 'j["duration_ns"]')")" \
			"$(json "$tmp/c1.json" 'j["pause_ns"] / 1e6')" \
			"$(json "$tmp/c1.json" '"yes" if j["snapshot"] else "no"')" \
			"$(gbs "$dev" "$(json "$tmp/c2.json" 'j["duration_ns"]')")" \
			"$(json "$tmp/c2.json" '100.0 * j["new_bytes"] / j["device_bytes"]')" \
			"$(gbs "$dev" "$(json "$tmp/r.json" 'j["restore_ns"]')")" \
			"$(json "$tmp/c1.json" '"%.1f GiB" % (j["stored_bytes"] / 2**30)')" >>"$tmp/table"
		cp "$tmp/c1.json" "$tmp/c1.$size.$kind.json"
		srv_stop A
	done
done
# the references, measured now, on the same store directory and GPU
rm -rf "$data"
mkdir -p "$data"
ref_mib=$(echo "$sizes" | awk '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; print (m > 8192 ? 8192 : m) }')
"$build/bin/store_bench" "$data/sb" "$ref_mib" >"$tmp/ref" 2>&1 || echo "store_bench failed" >>"$tmp/ref"
rm -rf "$data/sb"
if [ "${RGPU_BENCH_NO_D2H:-0}" != 1 ] && [ -x "$build/bin/d2h_bw" ]; then
	"$build/bin/d2h_bw" 1024 >>"$tmp/ref" 2>&1 || echo "d2h_bw failed" >>"$tmp/ref"
fi
echo "checkpoint store in $data"
cat "$tmp/table" "$tmp/ref"
# the per-phase times of each checkpoint, from the server's log
grep -h "ckpt: .*checkpoint [0-9]*:" "$tmp"/A/log 2>/dev/null | sed 's/^.*ckpt: //' | tail -n 40
