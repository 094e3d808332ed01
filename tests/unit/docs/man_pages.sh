#!/bin/bash
# The man pages and shell completions (issue 15) against the programs they describe:
#  a) each page in docs/man renders with groff -man -ww and not one warning;
#  b) every long option of rgpud --help and of rgpud's option table (server/main.c) is an item
#     (.TP/.TQ tag) of rgpud.8, and every item option of rgpud.8 is one rgpud has; every
#     command and long option of rgpuctl --help and of its option tables (ctl/rgpuctl.c,
#     ctl/common.c) is an item of rgpuctl.1;
#  c) every key config.c takes in [defaults]/[tenant NAME] is an item of rgpud.conf.5, and
#     every option [server] takes is named in its [server] section;
#  d) the completions, sourced in plain bash, complete what the programs take.
# Usage: man_pages.sh SOURCE_DIR RGPUD RGPUCTL
set -u
src=${1:?usage: man_pages.sh SOURCE_DIR RGPUD RGPUCTL}
rgpud=${2:?} rgpuctl=${3:?}
man=$src/docs/man
failed=0
bad() {
	echo "man_pages: FAIL: $*" >&2
	failed=1
}
command -v groff >/dev/null || { echo "man_pages: groff is not installed (groff-base)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The text of every .TP/.TQ item's tag in page $1, fonts and escapes removed, a line each.
tags() {
	awk '/^\.(TP|TQ)/ { tag = 1; next } tag && !/^\.\\"/ { print; tag = 0 }' "$1" |
		sed -E 's/\\-/-/g; s/\\f[BIRP]//g; s/\\e/\\/g; s/^\.[A-Z]+ //; s/"//g'
}
# The long options named in the tags of page $1.
tag_opts() { tags "$1" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
# Long options in text on stdin (anything that looks like one).
opts_in() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
# The long option names of the struct option tables in C files $@.
opts_of_c() { grep -hoE '^[[:space:]]*\{"[a-z][a-z0-9-]*", (no|required)_argument' "$@" |
	sed -E 's/.*\{"([^"]*)".*/--\1/' | sort -u; }
# $1 (a list) minus $2 (a list), a word a line
minus() { comm -23 <(printf '%s\n' $1 | sort -u) <(printf '%s\n' $2 | sort -u); }

# ---- a) groff warnings ------------------------------------------------------------------------
for page in "$man"/rgpud.8 "$man"/rgpuctl.1 "$man"/rgpud.conf.5; do
	[ -f "$page" ] || { bad "$page is missing"; continue; }
	warn=$(groff -man -ww -z "$page" 2>&1)
	[ -z "$warn" ] || bad "groff warns about ${page##*/}: $warn"
done

# ---- b) rgpud.8 -------------------------------------------------------------------------------
help=$("$rgpud" --help) || bad "rgpud --help failed"
rgpud_opts=$( (printf '%s\n' "$help" | opts_in; opts_of_c "$src/server/main.c") | sort -u)
[ "$(printf '%s\n' "$rgpud_opts" | wc -l)" -ge 30 ] || bad "too few rgpud options found: $rgpud_opts"
documented=$(tag_opts "$man/rgpud.8")
for o in $(minus "$rgpud_opts" "$documented"); do
	bad "rgpud option $o is not an item of rgpud.8"
done
for o in $(minus "$documented" "$rgpud_opts"); do
	bad "rgpud.8 documents $o, which rgpud does not take"
done

# ---- b) rgpuctl.1 -----------------------------------------------------------------------------
help=$("$rgpuctl" --help) || bad "rgpuctl --help failed"
# its own options: not those of rgpud it mentions ("servers started with rgpud --tls-cert")
ctl_opts=$( (printf '%s\n' "$help" | sed -E 's/rgpud --[a-z-]+//g' | opts_in
	opts_of_c "$src/ctl/rgpuctl.c" "$src/ctl/common.c") | sort -u)
[ "$(printf '%s\n' "$ctl_opts" | wc -l)" -ge 20 ] || bad "too few rgpuctl options found: $ctl_opts"
for o in $(minus "$ctl_opts" "$(tag_opts "$man/rgpuctl.1")"); do
	bad "rgpuctl option $o is not an item of rgpuctl.1"
done
# commands: the help's list ("  checkpoint verify CKPT" -> "checkpoint verify"), and what main()
# dispatches on
help_cmds=$(printf '%s\n' "$help" | awk '/^Commands:/ { on = 1; next } on && /^$/ { on = 0 }
	on && /^  [a-z]/' | sed -E 's/^  ([a-z]+( [a-z]+)*).*/\1/' | sort -u)
code_cmds=$(grep -oE 'strcmp\(argv\[1\], "[a-z]+"\)' "$src/ctl/rgpuctl.c" | cut -d'"' -f2 | sort -u)
[ "$(printf '%s\n' "$code_cmds" | wc -l)" -ge 12 ] || bad "too few rgpuctl commands found: $code_cmds"
cmd_tags=$(sed -n '/^\.SH COMMANDS/,/^\.SH /p' "$man/rgpuctl.1" > "$tmp/commands.1" && tags "$tmp/commands.1")
while read -r c; do
	[ -n "$c" ] || continue
	printf '%s\n' "$cmd_tags" | grep -qE "^$c( |$)" || bad "rgpuctl command '$c' is not an item of rgpuctl.1's COMMANDS"
done < <(printf '%s\n%s\n' "$help_cmds" "$code_cmds" | sort -u)

# ---- c) rgpud.conf.5 --------------------------------------------------------------------------
keys=$(sed -n '/^static int limit_key/,/^}/p' "$src/server/config.c" |
	grep -oE 'strcmp\(name, "[a-z_]+"\)' | cut -d'"' -f2)
[ "$(printf '%s\n' "$keys" | wc -w)" -ge 5 ] || bad "too few limit keys found in config.c: $keys"
conf_tags=$(tags "$man/rgpud.conf.5")
for k in $keys; do
	printf '%s\n' "$conf_tags" | grep -qE "^$k( |=|$)" || bad "limit key '$k' is not an item of rgpud.conf.5"
done
not_here=$(grep -oE 'not_here\[\] = \{[^}]*\}' "$src/server/config.c" | grep -oE '"[a-z-]+"' | tr -d '"')
[ -n "$not_here" ] || bad "config.c's command-line-only options not found"
server_sec=$(sed -n '/^\.SH THE \[server\] SECTION/,/^\.SH /p' "$man/rgpud.conf.5" | sed 's/\\-/-/g')
for o in $rgpud_opts; do
	k=${o#--}
	printf '%s\n' $not_here | grep -qx "$k" && continue
	printf '%s\n' "$server_sec" | grep -qE "(^|[ ])$k( |$)" ||
		bad "[server] key '$k' is not named in rgpud.conf.5's [server] section"
done

# ---- d) completions ---------------------------------------------------------------------------
mkdir -p "$tmp/d" && : > "$tmp/d/lock.x" && : > "$tmp/d/cluster"
# comp FILE FUNCTION WORD...: COMPREPLY, sorted, for the last word being completed
comp() {
	local file=$1 fn=$2
	shift 2
	bash -c '. "$1" || exit 1; fn=$2; shift 2; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMPREPLY=(); "$fn"; printf "%s\n" "${COMPREPLY[@]}"' _ "$file" "$fn" "$@" | sort | xargs
}
expect() { # expect WANT GOT WHAT
	[ "$1" = "$2" ] || bad "completion of '$3': want '$1', got '$2'"
}
ctl=$src/ctl/completion/rgpuctl.bash
ud=$src/server/completion/rgpud.bash
expect "checkpoint checkpoints" "$(comp "$ctl" _rgpuctl rgpuctl ch)" "rgpuctl ch"
expect "--admin-key --client-address --cluster --cold --help --json --progress --rounds --server --tls --tls-ca --tls-name --to" \
	"$(comp "$ctl" _rgpuctl rgpuctl migrate --)" "rgpuctl migrate --"
expect "rm verify" "$(comp "$ctl" _rgpuctl rgpuctl checkpoint '')" "rgpuctl checkpoint "
expect "migrate" "$(comp "$ctl" _rgpuctl rgpuctl --admin-key k.key mig)" "rgpuctl --admin-key FILE mig"
expect "$tmp/d/lock.x" "$(comp "$ctl" _rgpuctl rgpuctl consolidate --lock "$tmp/d/l")" "consolidate --lock DIR/l"
expect "$tmp/d/cluster" "$(comp "$ctl" _rgpuctl rgpuctl status --cluster "$tmp/d/c")" "status --cluster DIR/c"
expect "$tmp/d/cluster" "$(comp "$ctl" _rgpuctl rgpuctl run --cluster = "$tmp/d/c")" "run --cluster=DIR/c"
expect "" "$(comp "$ctl" _rgpuctl rgpuctl migrate --to '')" "migrate --to "
got=$(comp "$ctl" _rgpuctl rgpuctl run --server h:7070 -- bas)
[[ " $got " == *" bash "* ]] || bad "completion of 'rgpuctl run ... -- bas': no bash in '$got'"
expect "$tmp/d/lock.x" "$(comp "$ctl" _rgpuctl rgpuctl run -- ls "$tmp/d/l")" "run -- ls DIR/l"
# every option rgpuctl takes is offered by some command, and none it does not take
offered=$({
	for c in $code_cmds; do comp "$ctl" _rgpuctl rgpuctl "$c" --; done
	for c in place where release licenses; do comp "$ctl" _rgpuctl rgpuctl slurm "$c" --; done
} | tr ' ' '\n' | grep -v '^--$' | sort -u)
expect "licenses place release where" "$(comp "$ctl" _rgpuctl rgpuctl slurm '')" "rgpuctl slurm "
for o in $(minus "$ctl_opts" "$offered"); do bad "rgpuctl.bash offers $o for no command"; done
for o in $(minus "$offered" "$ctl_opts"); do bad "rgpuctl.bash offers $o, which rgpuctl does not take"; done

expect "$(printf '%s\n' $rgpud_opts | sort | xargs)" "$(comp "$ud" _rgpud rgpud --)" "rgpud --"
expect "debug" "$(comp "$ud" _rgpud rgpud --log-level d)" "rgpud --log-level d"
expect "$tmp/d/cluster" "$(comp "$ud" _rgpud rgpud --config "$tmp/d/c")" "rgpud --config DIR/c"
expect "$tmp/d" "$(comp "$ud" _rgpud rgpud --keys "$tmp/")" "rgpud --keys TMP/"

if [ "$failed" -ne 0 ]; then
	echo "man_pages: the man pages or completions disagree with the programs (see above)" >&2
	exit 1
fi
echo "man_pages: 3 pages render without warnings; $(printf '%s\n' $rgpud_opts | wc -l) rgpud options, $(printf '%s\n' $ctl_opts | wc -l) rgpuctl options, $(printf '%s\n' $code_cmds | wc -l) commands and $(printf '%s\n' $keys | wc -l) limit keys documented; completions agree"
