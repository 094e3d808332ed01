#!/bin/sh
# A job's report to the supervisor (worker.c send_info) is sized, then packed; the client's
# address in it changes when the link moves to shared memory, from another thread. With the
# packing made late (RGPU_FAULT=info_pack_slow: 0.3 s between), a job that moves its link must
# still be reported whole: rgpuctl jobs shows its shared-memory address, and (in the sanitizer
# build) rgpud's log holds no sanitizer report. Before the address was copied under a lock, the
# worker wrote past the message's buffer here (AddressSanitizer: heap-buffer-overflow, 3 of 3).
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

srv_start A RGPU_FAULT=info_pack_slow
for round in 1 2 3; do
	ZDTM_FILL_MIB=4 zdtm_start A zdtm_fill 1
	zdtm_wait_ready 1
	sleep 0.8 # a report packed after the move
	"$ctl" jobs --server "$(srv_admin A)" --json >"$tmp/jobs.json" || fail "jobs"
	peer=$(json "$tmp/jobs.json" 'j["jobs"][0]["peer"]')
	case "$peer" in
	"local pid "*" (shared memory)") ;;
	*) fail "round $round: the job's address is '$peer', not its shared-memory link's" ;;
	esac
	zdtm_go
	zdtm_finish 1
	! grep -q -e 'ERROR: [A-Za-z]*Sanitizer' -e 'runtime error:' "$tmp/A/log" ||
		fail "round $round: rgpud's log has a sanitizer report"
	echo "ok: round $round: reported as '$peer' with its report packed late"
done
srv_stop A
echo "info_pack: OK"
