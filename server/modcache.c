/*
 * The module image cache: images named by their SHA-256, kept in one LMDB environment per
 * server (<state-dir>/modules) and shared by all its workers, so a client sends an image's
 * bytes only the first time any session of this server needs it. Each worker opens the
 * environment after fork (LMDB environments must not cross fork). Entries are immutable: a
 * hash names exactly one content, so concurrent puts of the same key are harmless.
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
#include "srv.h"

#define MODCACHE_MAP_SIZE (64ull << 30)  /* address space only; the file grows as used */

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
	if (mkdir(dir, 0750) && errno != EEXIST)
		goto out_free;
	if (mkdir(path, 0750) && errno != EEXIST)
		goto out_free;
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

int srv_modcache_get(struct srv_modcache *mc, const uint8_t hash[32], void **data, size_t *len)
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash}, v;
	uint8_t check[RGPU_HASH_LEN];
	int rc = mdb_txn_begin(mc->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return RGPU_ESYS;
	rc = mdb_get(txn, mc->dbi, &k, &v);
	if (rc) {
		mdb_txn_abort(txn);
		return RGPU_ENOTFOUND;
	}
	*data = malloc(v.mv_size ? v.mv_size : 1);
	if (!*data) {
		mdb_txn_abort(txn);
		return RGPU_ENOMEM;
	}
	memcpy(*data, v.mv_data, v.mv_size);
	*len = v.mv_size;
	mdb_txn_abort(txn);
	/* a damaged entry is a miss, never a wrong module */
	rgpu_sha256(*data, *len, check);
	if (memcmp(check, hash, RGPU_HASH_LEN)) {
		pr_warn("cached image fails its hash; ignoring it");
		free(*data);
		return RGPU_ECORRUPT;
	}
	return 0;
}

int srv_modcache_put(struct srv_modcache *mc, const uint8_t hash[32], const void *data,
		     size_t len)
{
	MDB_txn *txn;
	MDB_val k = {.mv_size = RGPU_HASH_LEN, .mv_data = (void *)hash};
	MDB_val v = {.mv_size = len, .mv_data = (void *)data};
	int rc = mdb_txn_begin(mc->env, NULL, 0, &txn);

	if (rc)
		return RGPU_ESYS;
	rc = mdb_put(txn, mc->dbi, &k, &v, MDB_NOOVERWRITE);
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
