/*
 * Tenant keys and the handshake's challenge-response MACs (rgpu/auth.h). The MAC and the
 * constant-time comparison are GNU Nettle's (hmac_sha256, memeql_sec): nothing here is
 * cryptography of its own, only the layout of what is MACed and the reading of key files.
 * It must never log or return a key's bytes, and wipes the buffers it read them into.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "rgpu/auth.h"
#include "rgpu/err.h"

static const char auth_label[] = "rgpu-auth-v1";

int rgpu_auth_mac(const struct rgpu_key *key, enum rgpu_auth_role role, uint32_t version,
		  const char *tenant, const uint8_t *snonce, const uint8_t *cnonce, uint8_t *out)
{
	return rgpu_auth_mac_bound(key, role, version, tenant, snonce, cnonce, NULL, out);
}

int rgpu_auth_mac_bound(const struct rgpu_key *key, enum rgpu_auth_role role, uint32_t version,
			const char *tenant, const uint8_t *snonce, const uint8_t *cnonce,
			const uint8_t *binding, uint8_t *out)
{
	struct hmac_sha256_ctx ctx;
	size_t tlen = tenant ? strlen(tenant) : 0;
	uint8_t r = (uint8_t)role, v[4], tl;

	if (tlen > RGPU_TENANT_MAX)
		return RGPU_EINVAL;
	tl = (uint8_t)tlen;
	v[0] = (uint8_t)version;
	v[1] = (uint8_t)(version >> 8);
	v[2] = (uint8_t)(version >> 16);
	v[3] = (uint8_t)(version >> 24);
	hmac_sha256_set_key(&ctx, key->len, key->secret);
	hmac_sha256_update(&ctx, RGPU_AUTH_NONCE_LEN, snonce);
	hmac_sha256_update(&ctx, RGPU_AUTH_NONCE_LEN, cnonce);
	hmac_sha256_update(&ctx, sizeof(auth_label) - 1, (const uint8_t *)auth_label);
	hmac_sha256_update(&ctx, 1, &r);
	hmac_sha256_update(&ctx, 4, v);
	hmac_sha256_update(&ctx, 1, &tl);
	hmac_sha256_update(&ctx, tlen, (const uint8_t *)tenant);
	if (binding)
		hmac_sha256_update(&ctx, RGPU_AUTH_BINDING_LEN, binding);
	hmac_sha256_digest(&ctx, RGPU_AUTH_MAC_LEN, out);
	explicit_bzero(&ctx, sizeof(ctx));
	return 0;
}

int rgpu_auth_mac_eq(const uint8_t *a, const uint8_t *b)
{
	return memeql_sec(a, b, RGPU_AUTH_MAC_LEN) ? 1 : 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int is_space(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The file as hex digits (white space ignored): 1 with key filled, 0 if it is not hex. */
static int parse_hex(const uint8_t *buf, size_t n, struct rgpu_key *key)
{
	size_t digits = 0, out = 0;
	int hi = -1;

	for (size_t i = 0; i < n; i++) {
		if (is_space(buf[i]))
			continue;
		if (hexval(buf[i]) < 0)
			return 0;
		digits++;
	}
	if (digits == 0 || digits % 2 || digits / 2 > RGPU_AUTH_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (is_space(buf[i]))
			continue;
		if (hi < 0) {
			hi = hexval(buf[i]);
		} else {
			key->secret[out++] = (uint8_t)(hi << 4 | hexval(buf[i]));
			hi = -1;
		}
	}
	key->len = out;
	return 1;
}

int rgpu_key_load(const char *path, struct rgpu_key *key, char *why, size_t whylen)
{
	uint8_t buf[2 * RGPU_AUTH_KEY_MAX + 512];
	struct stat st;
	size_t n = 0;
	int fd, ret = 0;

	key->len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open key file %s: %s", path, strerror(errno));
		return errno == ENOENT ? RGPU_ENOTFOUND : RGPU_ESYS;
	}
	if (fstat(fd, &st)) {
		snprintf(why, whylen, "cannot stat key file %s: %s", path, strerror(errno));
		ret = RGPU_ESYS;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "key file %s is not a regular file", path);
		ret = RGPU_EAUTH;
		goto out_close;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(why, whylen,
			 "key file %s is accessible by group or others (mode %04o): refusing it; "
			 "chmod 600 %s",
			 path, (unsigned)(st.st_mode & 07777), path);
		ret = RGPU_EAUTH;
		goto out_close;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, whylen, "cannot read key file %s: %s", path, strerror(errno));
			ret = RGPU_ESYS;
			goto out_wipe;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == sizeof(buf))
			break;
	}
	if (n == sizeof(buf)) {
		snprintf(why, whylen, "key file %s is too long (at most %d bytes of secret)", path,
			 RGPU_AUTH_KEY_MAX);
		ret = RGPU_EAUTH;
		goto out_wipe;
	}
	if (!parse_hex(buf, n, key)) {
		if (n > RGPU_AUTH_KEY_MAX) {
			snprintf(why, whylen,
				 "key file %s is not hexadecimal and longer than %d raw bytes",
				 path, RGPU_AUTH_KEY_MAX);
			ret = RGPU_EAUTH;
			goto out_wipe;
		}
		memcpy(key->secret, buf, n);
		key->len = n;
	}
	if (key->len < RGPU_AUTH_KEY_MIN) {
		snprintf(
		    why, whylen,
		    "key file %s holds %zu bytes of secret, fewer than %d (make one with: head -c "
		    "32 /dev/urandom | xxd -p -c 64 > FILE)",
		    path, key->len, RGPU_AUTH_KEY_MIN);
		rgpu_key_wipe(key);
		ret = RGPU_EAUTH;
	}
out_wipe:
	explicit_bzero(buf, sizeof(buf));
out_close:
	close(fd);
	return ret;
}

void rgpu_key_wipe(struct rgpu_key *key)
{
	explicit_bzero(key->secret, sizeof(key->secret));
	key->len = 0;
}

int rgpu_tenant_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > RGPU_TENANT_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int rgpu_tenant_from_path(const char *path, char *out, size_t outlen)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 4 && !strcmp(base + n - 4, ".key"))
		n -= 4;
	if (n == 0 || n >= outlen)
		return RGPU_EINVAL;
	memcpy(out, base, n);
	out[n] = '\0';
	return rgpu_tenant_valid(out) ? 0 : RGPU_EINVAL;
}
