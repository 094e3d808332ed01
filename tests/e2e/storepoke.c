/*
 * storepoke: damage a checkpoint store behind rgpud's back, for the damage tests
 * (ckpt_damage.sh). Through LMDB itself, as a disk or an operator could:
 *   storepoke DIR list ID                  the checkpoint's chunks, one per line, in order: the
 *                                          hash and the kind of blob it belongs to (device,
 *                                          global, statelog, journals, hostarea, kept, image)
 *   storepoke DIR chunk HASH flip|cut|rm   flip a bit of the chunk's last byte, cut 5 bytes off
 *                                          its end, or delete it
 *   storepoke DIR manifest ID flip|cut     the same to a manifest
 *   storepoke DIR manifest ID seed         write a fuzz_store seed of its metadata to stdout:
 *                                          byte 2, the chunk count (2 bytes, little-endian),
 *                                          the metadata
 * Exit 0, or 1 with a message.
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.pb-c.h"
#include "rgpu/ckpt.h"
#include "rgpu/hash.h"
#include "rgpu/store.h"
#include "rgpu/util.h"

static int die(const char *msg, int rc)
{
	fprintf(stderr, "storepoke: %s%s%s\n", msg, rc ? ": " : "", rc ? mdb_strerror(rc) : "");
	return 1;
}

int main(int argc, char **argv)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_dbi dbi;
	uint8_t key[RGPU_HASH_LEN], *copy = NULL;
	MDB_val k, v;
	int rc;

	if (argc == 4 && !strcmp(argv[2], "list")) {
		static const char *const kinds[] = {"?", "device", "global", "statelog", "journals",
						    "hostarea", "kept", "image"};
		struct rgpu_store *s;
		Rgpu__CkptMeta *m;
		uint8_t *h;
		size_t n;
		char hex[2 * RGPU_HASH_LEN + 1], why[300];
		if (rgpu_store_open(argv[1], &s) ||
		    rgpu_ckpt_load(s, strtoull(argv[3], NULL, 10), &m, &h, &n, why, sizeof(why)))
			return die("no such checkpoint", 0);
		for (size_t i = 0; i < n; i++) {
			const char *kind = "?";
			for (size_t b = 0; b < m->n_blobs; b++)
				if (i >= m->blobs[b]->first && i - m->blobs[b]->first < m->blobs[b]->count)
					kind = m->blobs[b]->kind < 8 ? kinds[m->blobs[b]->kind] : "?";
			printf("%s %s\n", rgpu_hex(h + i * RGPU_HASH_LEN, RGPU_HASH_LEN, hex), kind);
		}
		rgpu__ckpt_meta__free_unpacked(m, NULL);
		free(h);
		rgpu_store_close(s);
		return 0;
	}
	if (argc != 5)
		return die("usage: storepoke DIR list ID | chunk HASH flip|cut|rm | manifest ID flip|cut|seed",
			   0);
	if (!strcmp(argv[2], "chunk")) {
		if (strlen(argv[3]) != 2 * RGPU_HASH_LEN)
			return die("a chunk hash is 64 hex digits", 0);
		for (int i = 0; i < RGPU_HASH_LEN; i++)
			sscanf(argv[3] + 2 * i, "%2hhx", &key[i]);
		k.mv_size = RGPU_HASH_LEN;
	} else {
		uint64_t id = strtoull(argv[3], NULL, 10);
		for (int i = 0; i < 8; i++)
			key[i] = (uint8_t)(id >> (56 - 8 * i));
		k.mv_size = 8;
	}
	k.mv_data = key;
	if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 4)) ||
	    (rc = mdb_env_set_mapsize(env, 1ull << 36)) ||
	    (rc = mdb_env_open(env, argv[1], MDB_NOTLS, 0640)))
		return die(argv[1], rc);
	if ((rc = mdb_txn_begin(env, NULL, 0, &t)) ||
	    (rc = mdb_dbi_open(t, !strcmp(argv[2], "chunk") ? "chunks" : "manifests", 0, &dbi)) ||
	    (rc = mdb_get(t, dbi, &k, &v)))
		return die("no such entry", rc);
	if (!strcmp(argv[4], "seed")) {
		const uint8_t *hashes, *meta;
		size_t n, ml;
		uint8_t hdr[3];
		if (rgpu_store_manifest_decode(v.mv_data, v.mv_size, &hashes, &n, &meta, &ml))
			return die("the manifest does not decode", 0);
		hdr[0] = 2;
		hdr[1] = (uint8_t)n;
		hdr[2] = (uint8_t)(n >> 8);
		fwrite(hdr, 1, 3, stdout);
		fwrite(meta, 1, ml, stdout);
		mdb_txn_abort(t);
		mdb_env_close(env);
		return 0;
	}
	if (!strcmp(argv[4], "rm")) {
		rc = mdb_del(t, dbi, &k, NULL);
	} else {
		copy = malloc(v.mv_size);
		memcpy(copy, v.mv_data, v.mv_size);
		if (!strcmp(argv[4], "flip"))
			copy[v.mv_size - 1] ^= 0x40;
		else if (v.mv_size > 5)
			v.mv_size -= 5;
		v.mv_data = copy;
		rc = mdb_put(t, dbi, &k, &v, 0);
	}
	if (rc || (rc = mdb_txn_commit(t))) {
		free(copy);
		return die("writing", rc);
	}
	free(copy);
	mdb_env_close(env);
	return 0;
}
