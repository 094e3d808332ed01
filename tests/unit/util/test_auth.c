/*
 * util/auth.c: the handshake's MACs against fixed vectors (computed independently with
 * Python's hmac module over the layout rgpu/auth.h documents), what changes a MAC (role,
 * either nonce, tenant, version, key), the constant-time comparison, and key files: hex and
 * raw secrets, too short, group- or world-accessible, missing; tenant names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rgpu/auth.h"
#include "rgpu/err.h"

static void unhex(const char *s, uint8_t *out)
{
	for (size_t i = 0; s[2 * i]; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

static void fixture(struct rgpu_key *k, uint8_t *sn, uint8_t *cn)
{
	for (int i = 0; i < 32; i++) {
		k->secret[i] = (uint8_t)i;
		sn[i] = (uint8_t)(0x40 + i);
		cn[i] = (uint8_t)(0x80 + i);
	}
	k->len = 32;
}

static void test_vectors(void **state)
{
	struct rgpu_key k;
	uint8_t sn[32], cn[32], mac[32], want[32];

	(void)state;
	fixture(&k, sn, cn);
	assert_int_equal(rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, mac), 0);
	unhex("940976fa254a264c33692d5d3f83cae3c9e29e193ab2e50eae6b304a06c9de84", want);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(rgpu_auth_mac(&k, RGPU_AUTH_SERVER, 2, "alice", sn, cn, mac), 0);
	unhex("96f6082c89458d4e0405f5f4e34d70834f09c38720749b8ca42a22b901126921", want);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "", sn, cn, mac), 0);
	unhex("8efa9a396cbbf851990d53f2c73b78256ed1b06cb78c099e3e32068d17ddcd03", want);
	assert_memory_equal(mac, want, 32);
}

/*
 * Bound to a TLS connection: the exporter value is MACed after the tenant (vector from Python's
 * hmac over that layout); without one the MAC is rgpu_auth_mac()'s; another binding, another MAC.
 */
static void test_bound(void **state)
{
	struct rgpu_key k;
	uint8_t sn[32], cn[32], b[RGPU_AUTH_BINDING_LEN], mac[32], want[32], other[32];

	(void)state;
	fixture(&k, sn, cn);
	for (int i = 0; i < RGPU_AUTH_BINDING_LEN; i++)
		b[i] = (uint8_t)(0xc0 + i);
	assert_int_equal(rgpu_auth_mac_bound(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, b, mac), 0);
	unhex("46b8842e5a6217ea448274f265b912123e306eca42593a015205dadcea9c7946", want);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(rgpu_auth_mac_bound(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, NULL, mac), 0);
	unhex("940976fa254a264c33692d5d3f83cae3c9e29e193ab2e50eae6b304a06c9de84", want);
	assert_memory_equal(mac, want, 32);
	b[31] ^= 1;
	rgpu_auth_mac_bound(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, b, other);
	unhex("46b8842e5a6217ea448274f265b912123e306eca42593a015205dadcea9c7946", want);
	assert_false(rgpu_auth_mac_eq(other, want));
}

/* A key of another length (4 bytes, below the file minimum): HMAC pads it, as Python's does. */
static void test_short_key(void **state)
{
	struct rgpu_key k = {.len = 4};
	uint8_t sn[32] = {0}, cn[32] = {0}, mac[32], want[32];

	(void)state;
	memcpy(k.secret, "Jefe", 4);
	assert_int_equal(rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "t", sn, cn, mac), 0);
	unhex("7210e20306878b451eebd0d6fe6a3d338f3ca9f44abd26e4735547c933631e82", want);
	assert_memory_equal(mac, want, 32);
}

static void test_changes(void **state)
{
	struct rgpu_key k;
	uint8_t sn[32], cn[32], base[32], mac[32];

	(void)state;
	fixture(&k, sn, cn);
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, base);
	assert_true(rgpu_auth_mac_eq(base, base));
	/* a replay on a new connection meets another server nonce: another MAC */
	sn[31] ^= 1;
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	sn[31] ^= 1;
	cn[0] ^= 0x80;
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	cn[0] ^= 0x80;
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alicf", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 3, "alice", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	/* the server's proof is never the client's answer (no reflection) */
	rgpu_auth_mac(&k, RGPU_AUTH_SERVER, 2, "alice", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	k.secret[5] ^= 4;
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, mac);
	assert_false(rgpu_auth_mac_eq(base, mac));
	k.secret[5] ^= 4;
	rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, "alice", sn, cn, mac);
	assert_true(rgpu_auth_mac_eq(base, mac));
	/* a name longer than the limit is refused, not truncated */
	char longname[RGPU_TENANT_MAX + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(rgpu_auth_mac(&k, RGPU_AUTH_CLIENT, 2, longname, sn, cn, mac),
			 RGPU_EINVAL);
}

static char dir[] = "/tmp/rgpu_test_auth.XXXXXX";

static const char *write_file(const char *name, const void *data, size_t n, mode_t mode)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void test_key_files(void **state)
{
	struct rgpu_key k;
	char why[512];
	const char *hex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1F\n";
	uint8_t raw[40];

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* hex, upper or lower case, a trailing newline */
	assert_int_equal(
	    rgpu_key_load(write_file("a.key", hex, strlen(hex), 0600), &k, why, sizeof(why)), 0);
	assert_int_equal(k.len, 32);
	for (int i = 0; i < 32; i++)
		assert_int_equal(k.secret[i], i);
	/* hex split over lines (xxd -p without -c) */
	const char *split = "000102030405060708090a0b0c0d0e0f\n101112131415161718191a1b1c1d1e1f\n";
	assert_int_equal(
	    rgpu_key_load(write_file("s.key", split, strlen(split), 0400), &k, why, sizeof(why)),
	    0);
	assert_int_equal(k.len, 32);
	assert_int_equal(k.secret[31], 31);
	/* raw bytes: anything that is not hex */
	for (int i = 0; i < 40; i++)
		raw[i] = (uint8_t)(0xc0 + i);
	assert_int_equal(rgpu_key_load(write_file("r.key", raw, 40, 0600), &k, why, sizeof(why)),
			 0);
	assert_int_equal(k.len, 40);
	assert_memory_equal(k.secret, raw, 40);
	/* 31 bytes of hex: too short */
	assert_int_equal(
	    rgpu_key_load(write_file("short.key", hex, 62, 0600), &k, why, sizeof(why)),
	    RGPU_EAUTH);
	assert_non_null(strstr(why, "fewer than 32"));
	assert_int_equal(k.len, 0);
	/* readable by group, or by others: refused with the mode and the fix */
	assert_int_equal(
	    rgpu_key_load(write_file("g.key", hex, strlen(hex), 0640), &k, why, sizeof(why)),
	    RGPU_EAUTH);
	assert_non_null(strstr(why, "mode 0640"));
	assert_non_null(strstr(why, "chmod 600"));
	assert_int_equal(
	    rgpu_key_load(write_file("o.key", hex, strlen(hex), 0604), &k, why, sizeof(why)),
	    RGPU_EAUTH);
	assert_int_equal(rgpu_key_load("/nonexistent/x.key", &k, why, sizeof(why)), RGPU_ENOTFOUND);
	/* a directory is not a key */
	assert_int_equal(rgpu_key_load(dir, &k, why, sizeof(why)) != 0, 1);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_tenants(void **state)
{
	char t[80];

	(void)state;
	assert_true(rgpu_tenant_valid("alice"));
	assert_true(rgpu_tenant_valid("team-a.prod_2"));
	assert_false(rgpu_tenant_valid(""));
	assert_false(rgpu_tenant_valid(".hidden"));
	assert_false(rgpu_tenant_valid("../etc/passwd"));
	assert_false(rgpu_tenant_valid("a/b"));
	assert_false(rgpu_tenant_valid("a b"));
	assert_int_equal(rgpu_tenant_from_path("/home/a/alice.key", t, sizeof(t)), 0);
	assert_string_equal(t, "alice");
	assert_int_equal(rgpu_tenant_from_path("bob", t, sizeof(t)), 0);
	assert_string_equal(t, "bob");
	assert_int_equal(rgpu_tenant_from_path("/x/.key", t, sizeof(t)), RGPU_EINVAL);
	assert_int_equal(rgpu_tenant_from_path("/x/a b.key", t, sizeof(t)), RGPU_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors), cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_short_key),
	    cmocka_unit_test(test_changes), cmocka_unit_test(test_key_files),
	    cmocka_unit_test(test_tenants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
