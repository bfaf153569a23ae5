/* keys.h — API keys: lw_<kind>_<id>_<secret>, of which only the SHA-256 is stored. */
#ifndef LD_KEYS_H
#define LD_KEYS_H

#include "db.h"
#include "apps.h"

#include <stdint.h>

#define LD_KEY_SECRET_LEN 32
/* "lw_" + "ingest" + "_" + 19 digits + "_" + 32 = 62; room to spare. */
#define LD_KEY_MAX 80
#define LD_KEY_KIND_MAX 8 /* bytes for a kind including the NUL */

/* 1 for "ingest", "read" or "admin". */
int ld_key_kind_valid(const char *kind);

/* Creates a key of `kind` for the app `app_slug` (NULL for an admin key of every app) and writes the whole
 * key string into `key_out` (`cap` >= LD_KEY_MAX bytes); *id_out (may be NULL) receives its
 * api_keys id. The key is shown once: only its SHA-256 is stored. Errors: LD_ERR_INVALID for
 * a bad kind, an ingest/read key without an app, a malformed slug, or a small buffer; LD_ERR_NOT_FOUND when the app does not exist. */
ld_status ld_key_create(ld_db *db, const char *app_slug, const char *kind, char *key_out,
                        size_t cap, int64_t *id_out);

/* Bytes of a time as the key commands print it, "YYYY-MM-DDTHH:MM:SSZ" (UTC), with room. */
#define LD_TIME_MAX 32

/* Revokes key `id`. Idempotent: revoking a revoked key is LD_OK (its first revocation time
 * is kept). `earlier` (may be NULL; `cap` >= LD_TIME_MAX) receives "" when this call revoked
 * the key, or the time of its first revocation when it was revoked already. LD_ERR_NOT_FOUND
 * when no key has that id. */
ld_status ld_key_revoke(ld_db *db, int64_t id, char *earlier, size_t cap);

typedef struct ld_key_info {
    int64_t id;
    char kind[LD_KEY_KIND_MAX];
    char app_slug[LD_SLUG_MAX + 1]; /* "" for an admin key of every app */
    char created_at[LD_TIME_MAX];
    char revoked_at[LD_TIME_MAX];   /* "" while the key is active */
} ld_key_info;

/* The keys of the app `app_slug`, or of every app and the admin keys of every app when it is
 * NULL, by id; revoked keys only when `with_revoked`. Neither secrets nor hashes: operators
 * find a key by its id. On LD_OK *rows is malloc'ed (free() it; NULL when *n is 0).
 * LD_ERR_NOT_FOUND when the app does not exist. */
ld_status ld_key_list(ld_db *db, const char *app_slug, int with_revoked, ld_key_info **rows, size_t *n);

/* Format check only (no database): 0 when `key` looks like lw_<kind>_<id>_<32 base62>, with
 * the kind copied into `kind_out` (LD_KEY_KIND_MAX bytes; may be NULL) and the id into
 * *id_out (may be NULL); -1 when malformed. */
int ld_key_parse(const char *key, char *kind_out, int64_t *id_out);

/* SHA-256 of the whole key string: what api_keys.key_hash holds. */
void ld_key_hash(const char *key, uint8_t out[32]);

typedef struct ld_key_row {
    uint8_t hash[32];
    int64_t id;
    char kind[LD_KEY_KIND_MAX];
    int64_t app_id;                 /* 0 for admin keys */
    char app_slug[LD_SLUG_MAX + 1]; /* "" for admin keys */
} ld_key_row;

/* Every key not revoked, by id, for the in-memory auth cache. On LD_OK *rows is malloc'ed
 * (free() it or ld_keys_free; NULL when *n is 0). */
ld_status ld_keys_load(ld_db *db, ld_key_row **rows, size_t *n);
void ld_keys_free(ld_key_row *rows);

#endif
