/*
 * Authentication of sessions (docs/protocol.md, "Authentication"): tenant keys, their files,
 * and the HMAC-SHA256 challenge-response both ends compute. The key never crosses the wire;
 * each side proves it holds it by a MAC over two fresh nonces, one chosen by each side.
 */
#ifndef RGPU_AUTH_H
#define RGPU_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define RGPU_AUTH_NONCE_LEN 32 /* each side's nonce, from getrandom */
#define RGPU_AUTH_MAC_LEN 32   /* HMAC-SHA256 */
#define RGPU_AUTH_KEY_MIN 32   /* bytes of secret a key file must hold, at least */
#define RGPU_AUTH_KEY_MAX 1024 /* and at most */
#define RGPU_TENANT_MAX 64     /* characters of a tenant name */
/* the "tenant" in the admin protocol's MACs: no tenant can have this name */
#define RGPU_AUTH_ADMIN "(admin)"

/* Who computes the MAC: the client's answer and the server's proof never equal each other. */
enum rgpu_auth_role {
	RGPU_AUTH_CLIENT = 'C',
	RGPU_AUTH_SERVER = 'S',
};

struct rgpu_key {
	uint8_t secret[RGPU_AUTH_KEY_MAX];
	size_t len;
};

/*
 * rgpu_auth_mac() - the MAC one side sends:
 *   HMAC-SHA256(key, server_nonce || client_nonce || "rgpu-auth-v1" || role (1 byte)
 *                    || protocol version (4 bytes, little-endian)
 *                    || tenant length (1 byte) || tenant)
 * @key: the tenant's key.
 * @role: RGPU_AUTH_CLIENT for the client's answer, RGPU_AUTH_SERVER for the server's proof.
 * @version: the protocol version both sides speak (RGPU_PROTO_VERSION).
 * @tenant: the tenant name the client claimed (at most RGPU_TENANT_MAX characters).
 * @snonce, @cnonce: the server's and the client's nonces, RGPU_AUTH_NONCE_LEN bytes each.
 * @out: receives RGPU_AUTH_MAC_LEN bytes.
 * Returns 0, or RGPU_EINVAL for a tenant name too long.
 */
int rgpu_auth_mac(const struct rgpu_key *key, enum rgpu_auth_role role, uint32_t version,
		  const char *tenant, const uint8_t *snonce, const uint8_t *cnonce, uint8_t *out);

#define RGPU_AUTH_BINDING_LEN 32 /* a TLS connection's exporter value (RGPU_TLS_BINDING_LEN) */
/*
 * rgpu_auth_mac_bound() - the same MAC bound to the connection it travels on: with binding
 * (RGPU_AUTH_BINDING_LEN bytes, the TLS exporter value both ends of one TLS connection compute)
 * those bytes are MACed after the tenant, so a man in the middle who relays the exchange between
 * two TLS connections of his own cannot make either side accept it. binding NULL: exactly
 * rgpu_auth_mac() (a connection without TLS).
 */
int rgpu_auth_mac_bound(const struct rgpu_key *key, enum rgpu_auth_role role, uint32_t version,
			const char *tenant, const uint8_t *snonce, const uint8_t *cnonce,
			const uint8_t *binding, uint8_t *out);

/* rgpu_auth_mac_eq() - 1 when two MACs are equal, compared in constant time; else 0. */
int rgpu_auth_mac_eq(const uint8_t *a, const uint8_t *b);

/*
 * rgpu_key_load() - read a key file: the secret as hexadecimal digits (the whole file, white
 * space ignored, an even number of digits) or, if the file is anything else, its raw bytes.
 * Either way at least RGPU_AUTH_KEY_MIN and at most RGPU_AUTH_KEY_MAX bytes of secret.
 * The file must be a regular file that neither group nor others may read or write (as ssh asks
 * of a private key).
 * @why, @whylen: on failure, a sentence naming the file and what is wrong.
 * Returns 0, RGPU_ENOTFOUND (no such file), RGPU_EAUTH (bad permissions or contents) or
 * RGPU_ESYS (cannot read it).
 */
int rgpu_key_load(const char *path, struct rgpu_key *key, char *why, size_t whylen);

/* rgpu_key_wipe() - overwrite a key's secret (explicit_bzero). */
void rgpu_key_wipe(struct rgpu_key *key);

/*
 * rgpu_tenant_valid() - 1 when name is a tenant name: 1 to RGPU_TENANT_MAX characters of
 * [A-Za-z0-9._-], not starting with '.' (so DIR/NAME.key never leaves DIR); else 0.
 */
int rgpu_tenant_valid(const char *name);

/*
 * rgpu_tenant_from_path() - the tenant a key file names: its base name without ".key"
 * (/home/a/alice.key -> alice). Returns 0, or RGPU_EINVAL when that is no tenant name.
 */
int rgpu_tenant_from_path(const char *path, char *out, size_t outlen);

#endif
