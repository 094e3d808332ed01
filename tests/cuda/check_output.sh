#!/bin/sh
# Run a program and compare its whole stdout with a file, byte for byte, and look for a line
# in its stderr. tests/cuda/CMakeLists.txt runs this through rgpu (tests/e2e/with_server.sh):
#   check_output.sh EXPECTED_STDOUT STDERR_REGEX CMD [ARGS...]
# Fails when CMD fails, when its stdout differs from EXPECTED_STDOUT (the first differences are
# printed), or when no line of its stderr matches STDERR_REGEX (grep -E; `-`: not checked).
# CMD's stderr is passed on.
set -u
want=$1
pattern=$2
[ "$pattern" = - ] && pattern=
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$@" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err" >&2
if [ $rc -ne 0 ]; then
	echo "check_output: $1 exited with $rc; its stdout:"
	cat "$tmp/out"
	exit $rc
fi
if ! cmp -s "$want" "$tmp/out"; then
	echo "check_output: the stdout of $1 differs from $want (< expected, > got):"
	diff "$want" "$tmp/out" | head -40
	exit 1
fi
if [ -n "$pattern" ] && ! grep -Eq "$pattern" "$tmp/err"; then
	echo "check_output: no line of the stderr of $1 matches: $pattern"
	exit 1
fi
echo "check_output: $(wc -c <"$tmp/out") bytes of stdout as expected${pattern:+, and the stderr line}"
