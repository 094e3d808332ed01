#!/bin/sh
# Runs the cluster energy simulator (tests/sim/cluster_sim.py) with --check: it fails if the
# rCUDA policy does not follow the rCUDA Slurm study's direction (less energy, no longer
# makespan than CUDA on every set; more saved on Set 1 than on Set 2).  Then checks the
# files it writes and prints the result table.  Python 3 standard library only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

python3 "$here/cluster_sim.py" --check --out "$tmp" >"$tmp/stdout" 2>"$tmp/stderr" || {
    cat "$tmp/stdout" "$tmp/stderr"
    echo "FAIL: cluster_sim.py --check" >&2
    exit 1
}
for f in results.md results.json energy.svg; do
    [ -s "$tmp/$f" ] || { echo "FAIL: $f not written" >&2; exit 1; }
done
rows=$(grep -c '^| Set ' "$tmp/results.md" || true)
[ "$rows" -eq 9 ] || { echo "FAIL: results.md has $rows rows, want 9 (3 sets x 3 policies)" >&2; exit 1; }
grep -q '</svg>' "$tmp/energy.svg" || { echo "FAIL: energy.svg is cut short" >&2; exit 1; }
cat "$tmp/results.md"
echo "PASS: cluster_sim ($rows rows)"
