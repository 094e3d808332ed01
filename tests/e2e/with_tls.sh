#!/bin/sh
# Run CMD (a with_server.sh, with_keys.sh or with_cuts.sh line) with TLS on: a throw-away test CA
# and a server certificate for 127.0.0.1 and localhost, made here with the openssl command (no
# key is kept in the tree), rgpud given --tls-cert/--tls-key (added to $RGPUD_ARGS, or to
# DEFAULT_ARGS when RGPUD_ARGS is unset) and the client RGPU_TLS_CA. A second CA that signed
# nothing is left for tests in $RGPU_E2E_TLS_DIR/other-ca.pem.
#   with_tls.sh DEFAULT_ARGS CMD [ARGS...]
set -u
defaults=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' INT TERM
chmod 700 "$dir"
mk() {
	# ca.pem/ca.key: the test CA; srv.pem/srv.key: its server certificate; other-ca.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=rgpu test CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" &&
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=rgpu other CA" -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem" &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
			-keyout "$dir/srv.key" -out "$dir/srv.csr" &&
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$dir/ext.cnf" &&
		openssl x509 -req -in "$dir/srv.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
			-CAcreateserial -days 2 -extfile "$dir/ext.cnf" -out "$dir/srv.pem"
}
mk >"$dir/openssl.log" 2>&1 || { echo "with_tls: openssl failed:"; cat "$dir/openssl.log"; exit 1; }
RGPUD_ARGS="${RGPUD_ARGS-$defaults} --tls-cert $dir/srv.pem --tls-key $dir/srv.key" \
	RGPU_TLS_CA=$dir/ca.pem RGPU_E2E_TLS_DIR=$dir "$@"
