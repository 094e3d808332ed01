/*
 * The module image cache: images named by their SHA-256, kept in one LMDB environment per
 * server (<state-dir>/modules) and shared by all its workers, so a client sends an image's
 * bytes only the first time any session of this server needs it. Each worker opens the
 * environment after fork (LMDB environments must not cross fork). Entries are immutable: a
 * hash names exactly one content, so concurrent puts of the same key are harmless.
 *
 * Value layout: magic "RGMI" (u32 0x494d4752), format version (u32, 1), then the image. A value
 * that fails its magic, version or hash is deleted, so the next load ships the image again and
 * repairs the cache.
 */
#define LOG_PREFIX "modcache: "
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rgpu/err.h"
#include "rgpu/hash.h"
#include "rgpu/log.h"
#include "rgpu/util.h"
#include "srv.h"

#define MODCACHE_MAP_SIZE (64ull << 30)  /* address space only; the file grows as used */
#define MODCACHE_MAGIC 0x494d4752u         /* "RGMI" */
#define MODCACHE_VERSION 1u
#define MODCACHE_HDR 8

struct srv_modcache {
	MDB_env *env;
	MDB_dbi dbi;
};

int srv_modcache_open(const char *dir, struct srv_modcache **out)
{
	char path[4096];
	struct srv_modcache *mc = calloc(1, sizeof(*mc));
	MDB_txn *txn;
	int rc;

	if (!mc)
		return RGPU_ENOMEM;
	snprintf(path, sizeof(path), "%s/modules", dir);
	/* mkdir -p */
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0750) && errno != EEXIST) {
			pr_warn("cannot create %s: %s", path, strerror(errno));
			goto out_free;
		}
		*p = '/';
	}
	if (mkdir(path, 0750) && errno != EEXIST) {
		pr_warn("cannot create %s: %s", path, strerror(errno));
		goto out_free;
	}
	rc = mdb_env_create(&mc->env);
	if (rc)
		goto out_free;
	mdb_env_set_mapsize(mc->env, MODCACHE_MAP_SIZE);
	rc = mdb_env_open(mc->env, path, MDB_NOTLS, 0640);
	if (rc) {
		pr_warn("mdb_env_open %s: %s", path, mdb_strerror(rc));
		goto out_env;
	}
	rc = mdb_txn_begin(mc->env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &mc->dbi);
	if (!rc)
		rc = mdb_txn_commit(txn);
	if (rc)
		goto out_env;
	*out = mc;
	return 0;
out_env:
	mdb_env_close(mc->env);
out_free:
	free(mc);
	return RGPU_ESYS;
}

static void drop(struct srv_modcache *mc, const uint8_t hash[32])
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash};
	if (mdb_txn_begin(mc->env, NULL, 0, &txn))
		return;
	mdb_del(txn, mc->dbi, &k, NULL);
	mdb_txn_commit(txn);
}

int srv_modcache_get(struct srv_modcache *mc, const uint8_t hash[32], void **data, size_t *len)
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash}, v;
	uint8_t check[RGPU_HASH_LEN];
	const uint8_t *p;
	int rc = mdb_txn_begin(mc->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return RGPU_ESYS;
	rc = mdb_get(txn, mc->dbi, &k, &v);
	if (rc) {
		mdb_txn_abort(txn);
		return RGPU_ENOTFOUND;
	}
	p = v.mv_data;
	if (v.mv_size < MODCACHE_HDR || rd_le32(p) != MODCACHE_MAGIC ||
	    rd_le32(p + 4) != MODCACHE_VERSION) {
		mdb_txn_abort(txn);
		pr_warn("cached image has no valid header; dropping it");
		drop(mc, hash);
		return RGPU_ECORRUPT;
	}
	*len = v.mv_size - MODCACHE_HDR;
	*data = malloc(*len ? *len : 1);
	if (!*data) {
		mdb_txn_abort(txn);
		return RGPU_ENOMEM;
	}
	memcpy(*data, p + MODCACHE_HDR, *len);
	mdb_txn_abort(txn);
	/* a damaged entry is a miss, never a wrong module */
	rgpu_sha256(*data, *len, check);
	if (memcmp(check, hash, RGPU_HASH_LEN)) {
		pr_warn("cached image fails its hash; dropping it");
		free(*data);
		drop(mc, hash);
		return RGPU_ECORRUPT;
	}
	return 0;
}

int srv_modcache_put(struct srv_modcache *mc, const uint8_t hash[32], const void *data,
		     size_t len)
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash};
	MDB_val v = {.mv_size = len + MODCACHE_HDR};
	int rc = mdb_txn_begin(mc->env, NULL, 0, &txn);

	if (rc)
		return RGPU_ESYS;
	/* reserve, then write in place: a large image is not copied twice */
	rc = mdb_put(txn, mc->dbi, &k, &v, MDB_NOOVERWRITE | MDB_RESERVE);
	if (!rc) {
		wr_le32(v.mv_data, MODCACHE_MAGIC);
		wr_le32((uint8_t *)v.mv_data + 4, MODCACHE_VERSION);
		memcpy((uint8_t *)v.mv_data + MODCACHE_HDR, data, len);
	}
	if (rc && rc != MDB_KEYEXIST) {
		pr_warn("cannot cache a %zu-byte image: %s", len, mdb_strerror(rc));
		mdb_txn_abort(txn);
		return RGPU_ENOSPC;
	}
	rc = mdb_txn_commit(txn);
	return rc ? RGPU_ESYS : 0;
}

void srv_modcache_close(struct srv_modcache *mc)
{
	if (!mc)
		return;
	mdb_env_close(mc->env);
	free(mc);
}
