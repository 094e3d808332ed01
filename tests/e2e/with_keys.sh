#!/bin/sh
# Run CMD (a with_server.sh or with_cuts.sh line) with authentication on: a fresh tenant key
# alice.key in a private key directory, rgpud given --keys (added to $RGPUD_ARGS, or to
# DEFAULT_ARGS when RGPUD_ARGS is unset) and the client RGPU_KEY_FILE.
#   with_keys.sh DEFAULT_ARGS CMD [ARGS...]
set -u
defaults=$1
shift
keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
trap 'exit 143' INT TERM
chmod 700 "$keys"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$keys/alice.key"
chmod 600 "$keys/alice.key"
RGPUD_ARGS="${RGPUD_ARGS-$defaults} --keys $keys" RGPU_KEY_FILE=$keys/alice.key "$@"
