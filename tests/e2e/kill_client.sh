#!/bin/sh
# A client killed in the middle of its work (by default a 1 GiB copy): its worker must be gone
# within a second, and the server must serve the next client. Run by with_server.sh
# (RGPU_E2E_PID is rgpud).
#   kill_client.sh PROGS_DIR [PROGRAM ARGS...]
# Over TCP (RGPU_TRANSPORT=tcp) rgpud runs with --resume-grace 1 (tests/e2e/CMakeLists.txt): a
# killed client looks like a cut link, so its job is kept for the grace period, then freed
# within 1 s. Over shared memory the link ends only with the client's process: the job is
# freed within 1 s of the kill, with no grace period.
set -u
progs=$1
shift
[ $# -gt 0 ] || set -- "$progs/bigcopy" 1024
if [ "${RGPU_TRANSPORT:-auto}" = tcp ]; then grace_ms=${RGPU_GRACE_MS:-1000}; else grace_ms=0; fi
# the victim's own worker(s): rgpud's children that were not there before it started (on a
# shared rgpud, other jobs' workers come and go on their own)
before=$(pgrep -P "$RGPU_E2E_PID")
is_new() { for b in $before; do [ "$b" = "$1" ] && return 1; done; return 0; }
new_workers() { for p in $(pgrep -P "$RGPU_E2E_PID"); do is_new "$p" && echo "$p"; done; }
alive() { for p in $mine; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

"$@" >/dev/null 2>&1 &
victim=$!
# wait until its worker exists and data is flowing, then kill it mid-copy
i=0
while [ -z "$(new_workers)" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -n "$(new_workers)" ] || { echo "FAIL: no worker appeared for the client"; exit 1; }
sleep 0.3
mine=$(new_workers)
kill -9 $victim
wait $victim 2>/dev/null
killed_at=$(date +%s%N)
while alive; do
	now=$(date +%s%N)
	if [ $(( (now - killed_at) / 1000000 )) -gt $((grace_ms + 1000)) ]; then
		echo "FAIL: the killed client's worker still runs 1 s after its grace period"
		exit 1
	fi
	sleep 0.02
done
gone_ms=$(( ($(date +%s%N) - killed_at) / 1000000 ))
echo "kill_client: $1's worker gone ${gone_ms} ms after the client was killed (grace ${grace_ms} ms, ${RGPU_TRANSPORT:-auto})"
[ "$gone_ms" -ge "$grace_ms" ] || { echo "FAIL: the job was freed before its grace period ended"; exit 1; }
"$progs/vecadd" || { echo "FAIL: the next client was not served"; exit 1; }
