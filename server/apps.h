/* apps.h — the apps table: an app is named by a slug [a-z0-9][a-z0-9._-]{0,63}. */
#ifndef LD_APPS_H
#define LD_APPS_H

#include "db.h"

#include <stdint.h>

#define LD_SLUG_MAX 64

/* 1 when `slug` matches [a-z0-9][a-z0-9._-]{0,63}, else 0 (NULL is 0). */
int ld_app_slug_valid(const char *slug);

/* Creates the app; *id (may be NULL) receives its id. LD_ERR_INVALID for a bad slug,
 * LD_ERR_CONFLICT when it exists. */
ld_status ld_app_create(ld_db *db, const char *slug, int64_t *id);

/* The id of the app `slug`: LD_ERR_NOT_FOUND when there is none (or the slug is malformed). */
ld_status ld_app_id(ld_db *db, const char *slug, int64_t *id);

typedef struct ld_app_row {
    int64_t id;
    char slug[LD_SLUG_MAX + 1];
    char created_at[32];   /* "YYYY-MM-DDTHH:MM:SSZ", UTC */
    int64_t ingest_keys;   /* keys not revoked, per kind */
    int64_t read_keys;
    int64_t admin_keys;    /* of this app only, not those of every app */
} ld_app_row;

/* Every app, by slug. On LD_OK *rows is malloc'ed (free() it; NULL when *n is 0). */
ld_status ld_app_list(ld_db *db, ld_app_row **rows, size_t *n);

#endif
