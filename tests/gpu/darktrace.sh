#!/bin/sh
# Run a program natively under darktrace (tools/darktrace): every call into the driver's
# private export tables is logged with its caller, arguments and the memory they point at.
#   tests/gpu/darktrace.sh LOG CMD [ARGS...]
# Uses ./gpubundle/lib/darktrace or ./build/lib/darktrace. DARKTRACE_LIMIT: calls per slot.
set -u
log=$1
shift
cd "$(dirname "$0")/../.." || exit 2
dir=gpubundle/lib/darktrace
[ -d "$dir" ] || dir=build/lib/darktrace
dir=$(realpath "$dir")
cd - >/dev/null || exit 2
DARKTRACE_LOG=$log LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"
