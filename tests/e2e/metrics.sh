#!/bin/sh
# GPU telemetry in rgpuctl status and rgpud --metrics (issue 11):
#   metrics.sh BUILD
# On simgpu (modelled values; RGPU_E2E_DRIVER=system: NVML's): status --json names the source
# and a power figure; GET /metrics is scraped and parsed as Prometheus's text format (every
# sample's family declared with HELP and TYPE, values numbers, names in base units); an idle
# server's GPU draws less than one with a busy job (modelled: the job's activity), the job
# appears with its device memory, and rgpu_jobs counts it; anything but GET /metrics is 404.
# With RGPU_E2E_DRIVER=system, OUT_JSON=FILE keeps the status --json of both moments.
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"
srv_start A -- --metrics 127.0.0.1:0 --metrics-port-file "$tmp/mport"
A=$(srv_admin A)
i=0
until [ -s "$tmp/mport" ]; do
	[ $i -ge 100 ] && fail "no metrics port"
	sleep 0.05
	i=$((i + 1))
done
url="http://127.0.0.1:$(cat "$tmp/mport")/metrics"
scrape() {
	python3 - "$url" "$1" <<'PY' || fail "the /metrics page: $(cat "$2" 2>/dev/null)"
import json, re, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
body = urllib.request.urlopen(url, timeout=5).read().decode()
open(out + ".txt", "w").write(body)
declared, samples = {}, {}
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
for line in body.splitlines():
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        parts = line.split(" ", 3)
        declared.setdefault(parts[2], {})[parts[1]] = parts[3]
        continue
    m = line_re.match(line)
    assert m, "not a sample: %r" % line
    name, labels, value = m.group(1), m.group(3) or "", float(m.group(4))
    fam = name
    assert fam in declared and "HELP" in declared[fam] and "TYPE" in declared[fam], fam
    if declared[fam]["TYPE"] == "counter":
        assert name.endswith("_total"), name
    lab = dict(kv.split("=", 1) for kv in re.findall(r'\w+="[^"]*"', labels))
    samples.setdefault(name, []).append(({k: v.strip('"') for k, v in lab.items()}, value))
units = ("_watts", "_bytes", "_hertz", "_ratio", "_celsius", "_seconds", "_total",
         "_bytes_per_second")
for n in samples:
    assert re.match(r'^rgpu_[a-z_]+$', n), n
    assert n.endswith(units) or n in ("rgpu_up", "rgpu_jobs", "rgpu_server_drained"), \
        "no unit in the name: " + n
json.dump({k: v for k, v in samples.items()}, open(out, "w"))
PY
}
scrape "$tmp/idle.json"
idle_w=$(json "$tmp/idle.json" 'j["rgpu_gpu_power_watts"][0][1]')
src=$(json "$tmp/idle.json" 'j["rgpu_gpu_power_watts"][0][0]["source"]')
[ "$(json "$tmp/idle.json" 'j["rgpu_jobs"][0][1]')" = 0.0 ] || fail "rgpu_jobs on an idle server"
"$ctl" status --server "$A" --json >"$tmp/st_idle.json" || fail "status"
[ "$(json "$tmp/st_idle.json" 'j["servers"][0]["gpus"][0]["telemetry"]')" = "$src" ] ||
	fail "status and /metrics disagree on the telemetry's source: $(cat "$tmp/st_idle.json")"

# a busy job: it checks and rewrites its memory and sends calls all the time
ZDTM_FILL_MIB=32 ZDTM_FILL_BUSY=0 zdtm_start A zdtm_fill 1
zdtm_wait_ready 1
sleep 1.5
scrape "$tmp/busy.json"
"$ctl" status --server "$A" --json >"$tmp/st_busy.json" || fail "status"
busy_w=$(json "$tmp/busy.json" 'j["rgpu_gpu_power_watts"][0][1]')
[ "$(json "$tmp/busy.json" 'j["rgpu_jobs"][0][1]')" = 1.0 ] || fail "rgpu_jobs with one job"
[ "$(json "$tmp/busy.json" 'j["rgpu_job_device_memory_bytes"][0][1] == 34 * 2**20')" = True ] ||
	fail "the job's device memory: $(cat "$tmp/busy.json.txt")"
[ "$(json "$tmp/busy.json" 'j["rgpu_job_receive_bytes_per_second"][0][1] > 0')" = True ] ||
	fail "the busy job shows no activity: $(cat "$tmp/busy.json.txt")"
if [ "$src" = model ]; then
	[ "$(python3 -c "print($busy_w > $idle_w)")" = True ] ||
		fail "modelled power: idle $idle_w W, busy $busy_w W"
fi
code=$(python3 -c "
import urllib.request, urllib.error
try: urllib.request.urlopen('${url%/metrics}/other', timeout=5); print(200)
except urllib.error.HTTPError as e: print(e.code)")
[ "$code" = 404 ] || fail "GET /other answered $code"
zdtm_go
zdtm_finish 1
[ -n "${OUT_JSON:-}" ] && cat "$tmp/st_idle.json" "$tmp/st_busy.json" >"$OUT_JSON"
echo "ok: /metrics parsed ($(grep -c '^rgpu_' "$tmp/busy.json.txt") samples, source $src): power idle $idle_w W, busy $busy_w W; status --json agrees; /other is 404"
echo "metrics: all passed"
