#!/bin/sh
# Drive a zdtm program through its protocol by hand, as a checkpoint test would, minus the
# checkpoint:   signal.sh ROUNDS CMD [ARGS...]
# Runs CMD with ZDTM_ROUNDS=ROUNDS (ZDTM_NO_WAIT unset). At each READY it checks that the
# program is still waiting half a second later (alive, nothing more on stdout), then sends
# SIGUSR1.
# Passes when the program exits 0 with `zdtm NAME: OK rounds=ROUNDS ...` as its last line.
set -u
rounds=$1
shift
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
unset ZDTM_NO_WAIT
ZDTM_ROUNDS=$rounds "$@" >"$out" 2>"$err" &
pid=$!

fail() {
	echo "signal.sh: $*"
	echo "--- program stdout"
	cat "$out"
	echo "--- program stderr"
	cat "$err"
	kill -KILL "$pid" 2>/dev/null
	exit 1
}

readies() { grep -c '^READY$' "$out"; }

r=0
while [ $r -lt "$rounds" ]; do
	i=0
	while [ "$(readies)" -le $r ]; do
		kill -0 "$pid" 2>/dev/null || fail "the program ended before READY number $((r + 1))"
		[ $i -ge 1200 ] && fail "no READY number $((r + 1)) within 60 s"
		sleep 0.05
		i=$((i + 1))
	done
	lines=$(wc -l <"$out")
	sleep 0.5
	kill -0 "$pid" 2>/dev/null || fail "the program did not wait for SIGUSR1 after READY $((r + 1))"
	[ "$(wc -l <"$out")" -eq "$lines" ] ||
		fail "the program printed more after READY $((r + 1)) before SIGUSR1"
	kill -USR1 "$pid"
	r=$((r + 1))
done
wait "$pid"
rc=$?
cat "$out"
cat "$err" >&2
[ $rc -eq 0 ] || { echo "signal.sh: exit status $rc"; exit 1; }
[ "$(readies)" -eq "$rounds" ] || fail "$(readies) READY lines, expected $rounds"
tail -n 1 "$out" | grep -q "^zdtm [a-z]*: OK rounds=$rounds " || fail "no OK line last"
exit 0
