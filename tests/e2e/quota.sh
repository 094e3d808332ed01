#!/bin/sh
# Per-tenant limits end to end (docs/operator-guide.md, "The configuration file"):
#   - rgpud refuses a configuration file with a bad value, naming FILE:LINE, and an option of
#     [server] that its own parser refuses, naming where it was set; an explicit --config that
#     does not exist is an error;
#   - then, against rgpud --keys --config (run through with_server.sh, quota_cases.sh): memory
#     quotas answered with CUDA_ERROR_OUT_OF_MEMORY (driver API, VMM, cudart), shared by a
#     tenant's sessions and given back by a killed worker; a tenant's session limit; a tenant's
#     idle timeout; module cache hits only for images the tenant shipped itself.
#   quota.sh BUILD_DIR
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rgpud=$build/bin/rgpud

# ---- start-up refusals ---------------------------------------------------------------------
printf '[server]\nmax-sessions = 4\n\n[tenant alice]\nmemory = 64Q\n' >"$tmp/bad.conf"
"$rgpud" --config "$tmp/bad.conf" --listen 127.0.0.1:0 --admin none >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a bad memory value: rgpud exited $rc, want 2: $(cat "$tmp/out")"
[ "$(cat "$tmp/out")" = "rgpud: $tmp/bad.conf:5: [tenant alice] memory: '64Q' is not a size (bytes, or a number with K, M, G or T; or unlimited)" ] ||
	fail "a bad memory value: $(cat "$tmp/out")"
echo "ok: $(cat "$tmp/out")"

printf '# a comment\n[server]\nmax-sessions = lots\n' >"$tmp/bad2.conf"
"$rgpud" --config "$tmp/bad2.conf" --listen 127.0.0.1:0 --admin none >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a bad [server] value: rgpud exited $rc, want 2: $(cat "$tmp/out")"
printf 'rgpud: --max-sessions wants 0..100000 sessions (0: no limit)\nrgpud: (that option is set in %s:3)\n' \
	"$tmp/bad2.conf" >"$tmp/want"
cmp -s "$tmp/out" "$tmp/want" || fail "a bad [server] value: $(cat "$tmp/out")"
echo "ok: $(tr '\n' ' ' <"$tmp/out")"

"$rgpud" --config "$tmp/none.conf" --listen 127.0.0.1:0 --admin none >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "a missing --config: rgpud exited $rc, want 2"
[ "$(cat "$tmp/out")" = "rgpud: $tmp/none.conf: No such file or directory" ] ||
	fail "a missing --config: $(cat "$tmp/out")"
echo "ok: $(cat "$tmp/out")"

# the shipped example parses, with every limit and tenant section in it uncommented (--help:
# the file is read first, then nothing is started)
sed -e 's/^; \(\[tenant\)/\1/' -e '/^\[server\]/,/^\[defaults\]/!s/^; \([a-z_]* = \)/\1/' \
	"$here/../../docs/rgpud.conf.example" >"$tmp/example.conf"
[ "$(grep -c "^[a-z_]* = \|^\[tenant" "$tmp/example.conf")" -eq 13 ] ||
	fail "the example's keys were not uncommented: $(cat "$tmp/example.conf")"
"$rgpud" --config "$tmp/example.conf" --help >/dev/null 2>"$tmp/out" ||
	fail "docs/rgpud.conf.example does not parse: $(cat "$tmp/out")"
echo "ok: docs/rgpud.conf.example parses"

# ---- sessions ------------------------------------------------------------------------------
keys=$tmp/keys
mkdir -p "$keys"
chmod 700 "$keys"
for t in alice bob carol dave; do
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$keys/$t.key"
	chmod 600 "$keys/$t.key"
done
cat >"$tmp/rgpud.conf" <<CONF
; tests/e2e/quota.sh: the command line's --max-sessions 12 wins over the file's 16
[server]
max-sessions = 16
resume-grace = 1

[defaults]
memory = 256M

[tenant alice]
memory = 64M
sessions = 3

[tenant bob]
sessions = 1

[tenant carol]
idle_timeout = 2

[tenant dave]
module_cache = 0
CONF
RGPUD_ARGS="--keys $keys --config $tmp/rgpud.conf --max-sessions 12" \
	"$here/with_server.sh" "$build" "$here/quota_cases.sh" "$build" "$keys"
