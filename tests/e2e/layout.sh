#!/bin/bash
# rgpud's mappings lie clear of its clients' (server/layout.c): the drivers' __managed__
# variables are mapped at the same address in the client. rgpud, its worker and rgpud started
# under an unlimited stack (the kernel's bottom-up layout, inside the address window) all map
# from under 0x6100_0000_0000 and above the window; the stack size limit and a worker's threads
# are as before; RGPUD_LAYOUT=keep leaves the layout alone, with a warning.   layout.sh BUILD
set -u
build=$1
tmp=$(mktemp -d)
. "$(dirname "$0")/servers.sh"

# the lowest start of a mapping of libc in process $1
libc_at() { awk '/libc[.-]/ { print $1; exit }' "/proc/$1/maps" | cut -d- -f1; }
# moved NAME PID: libc in [window end 0x3000_0000_0000, 0x6100_0000_0000)
moved() {
	local a
	a=$(libc_at "$2")
	[ -n "$a" ] || fail "$1: no libc mapping in /proc/$2/maps"
	python3 -c "import sys; a=int(sys.argv[1],16); sys.exit(0 if 0x300000000000 <= a < 0x610000000000 else 1)" "$a" ||
		fail "$1: libc at 0x$a, not in [0x300000000000, 0x610000000000)"
	echo "ok: $1: libc at 0x$a"
}
stack_limit() { awk '/^Max stack size/ { print $4 }' "/proc/$1/limits"; }
stack_hard() { awk '/^Max stack size/ { print $5 }' "/proc/$1/limits"; }

want=$(ulimit -s)
[ "$want" = unlimited ] || want=$((want * 1024))
hard=$(ulimit -Hs)
[ "$hard" = unlimited ] || hard=$((hard * 1024))
srv_start A
pa=$(cat "$tmp/A/pid")
moved rgpud "$pa"
[ "$(stack_limit "$pa")" = "$want" ] || fail "rgpud: stack size limit $(stack_limit "$pa"), want $want"
[ "$(stack_hard "$pa")" = "$hard" ] || fail "rgpud: hard stack size limit $(stack_hard "$pa"), want $hard"
echo "ok: rgpud: stack size limits $want and $hard, as it was started with"

# a worker (forked from rgpud) is placed as rgpud, and its threads run a program through
zdtm_start A zdtm_streams 1
zdtm_wait_ready 1
w=$(pgrep -P "$pa" | head -n 1)
[ -n "$w" ] || fail "no worker under rgpud $pa"
moved worker "$w"
zdtm_go
zdtm_finish 1
echo "ok: the worker ran zdtm_streams"

# the kernel's bottom-up layout (an unlimited stack) starts at a third of the address space,
# inside the window: rgpud moves it all the same and puts the limit back
(ulimit -s unlimited && srv_start B) || fail "rgpud B did not start"
pb=$(cat "$tmp/B/pid")
moved "rgpud started with an unlimited stack" "$pb"
[ "$(stack_limit "$pb")" = unlimited ] || fail "rgpud B: stack size limit $(stack_limit "$pb")"
echo "ok: rgpud started with an unlimited stack: limit unlimited again"

# a limit of 64 MiB, put back as it was
(ulimit -S -s 65536 && srv_start D) || fail "rgpud D did not start"
pd=$(cat "$tmp/D/pid")
moved "rgpud started with a 64 MiB stack" "$pd"
[ "$(stack_limit "$pd")" = 67108864 ] || fail "rgpud D: stack size limit $(stack_limit "$pd")"
echo "ok: rgpud started with a 64 MiB stack: limit 64 MiB again"

# (under the default limit: an unlimited one is the kernel's bottom-up layout, not the default)
(ulimit -S -s 8192 && srv_start C RGPUD_LAYOUT=keep) || fail "rgpud C did not start"
pc=$(cat "$tmp/C/pid")
a=$(libc_at "$pc")
python3 -c "import sys; sys.exit(0 if int(sys.argv[1],16) >= 0x700000000000 else 1)" "$a" ||
	fail "RGPUD_LAYOUT=keep: libc at 0x$a, not where the kernel puts it by default"
grep -q "warn: layout: this process maps at 0x[0-9a-f]*, RGPUD_LAYOUT=keep: a __managed__ variable" \
	"$tmp/C/log" || fail "RGPUD_LAYOUT=keep: no warning: $(cat "$tmp/C/log")"
echo "ok: RGPUD_LAYOUT=keep: libc at 0x$a, warned"
echo "layout: done"
