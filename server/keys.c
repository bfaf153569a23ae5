/* keys.c — creating, revoking, listing, parsing and loading API keys. */
#define _DEFAULT_SOURCE

#include "keys.h"
#include "sha256.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char BASE62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

int ld_key_kind_valid(const char *kind)
{
    return kind && (strcmp(kind, "ingest") == 0 || strcmp(kind, "read") == 0 ||
                    strcmp(kind, "admin") == 0);
}

static int is_base62(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* LD_KEY_SECRET_LEN uniform base62 characters from getrandom (rejection sampling). */
static ld_status random_secret(ld_db *db, char out[LD_KEY_SECRET_LEN + 1])
{
    unsigned char buf[64];
    size_t have = 0, used = 0, pos = 0;

    while (have < LD_KEY_SECRET_LEN) {
        if (used == pos) {
            ssize_t got = getrandom(buf, sizeof buf, 0);
            if (got < 0) {
                if (errno == EINTR)
                    continue;
                return ld_db_fail(db, LD_ERR_INTERNAL, "getrandom: %s", strerror(errno));
            }
            pos = (size_t)got;
            used = 0;
            continue;
        }
        if (buf[used] < 248) /* 248 = 4 * 62: keeps the distribution uniform */
            out[have++] = BASE62[buf[used] % 62];
        used++;
    }
    out[have] = '\0';
    return LD_OK;
}

void ld_key_hash(const char *key, uint8_t out[32])
{
    ld_sha256(key, strlen(key), out);
}

int ld_key_parse(const char *key, char *kind_out, int64_t *id_out)
{
    static const char *const kinds[] = {"ingest", "read", "admin"};
    const char *p;
    size_t i, klen = 0;
    int64_t id = 0;
    int digits = 0;

    if (!key || strncmp(key, "lw_", 3) != 0 || strlen(key) > LD_KEY_MAX)
        return -1;
    p = key + 3;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        klen = strlen(kinds[i]);
        if (strncmp(p, kinds[i], klen) == 0 && p[klen] == '_')
            break;
    }
    if (i == sizeof kinds / sizeof kinds[0])
        return -1;
    p += klen + 1;
    if (*p == '0') /* ids start at 1 and have no leading zeros */
        return -1;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (id > (INT64_MAX - (*p - '0')) / 10)
            return -1;
        id = id * 10 + (*p - '0');
    }
    if (digits == 0 || *p != '_')
        return -1;
    p++;
    for (i = 0; i < LD_KEY_SECRET_LEN; i++)
        if (!is_base62(p[i]))
            return -1;
    if (p[LD_KEY_SECRET_LEN] != '\0')
        return -1;
    if (kind_out)
        snprintf(kind_out, LD_KEY_KIND_MAX, "%.*s", (int)klen, key + 3);
    if (id_out)
        *id_out = id;
    return 0;
}

ld_status ld_key_create(ld_db *db, const char *app_slug, const char *kind, char *key_out,
                        size_t cap, int64_t *id_out)
{
    PGresult *res = NULL;
    char secret[LD_KEY_SECRET_LEN + 1];
    char idbuf[24];
    char hashhex[2 + 64 + 1] = "\\x";
    char key[LD_KEY_MAX + 1];
    uint8_t hash[32];
    int64_t id;
    int every_app;
    ld_status rc;

    if (!db)
        return LD_ERR_INTERNAL;
    if (!key_out || cap < LD_KEY_MAX)
        return ld_db_fail(db, LD_ERR_INVALID, "key buffer must hold %d bytes", LD_KEY_MAX);
    key_out[0] = '\0';
    if (!ld_key_kind_valid(kind))
        return ld_db_fail(db, LD_ERR_INVALID, "invalid key kind \"%.20s\": use ingest, read or admin",
                          kind ? kind : "");
    /* An admin key without an app covers every app. */
    every_app = strcmp(kind, "admin") == 0 && !app_slug;
    if (!every_app && !app_slug)
        return ld_db_fail(db, LD_ERR_INVALID, "%s keys need an app", kind);
    if (!every_app && !ld_app_slug_valid(app_slug))
        return ld_db_fail(db, LD_ERR_INVALID, "invalid app name \"%.80s\"", app_slug);

    rc = random_secret(db, secret);
    if (rc != LD_OK)
        goto out;
    /* The id is part of the key, and the key's hash is what we insert: take the id first. */
    rc = ld_db_exec(db, &res, "SELECT nextval(pg_get_serial_sequence('api_keys', 'id'))", 0, NULL);
    if (rc != LD_OK)
        goto out;
    id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    res = NULL;
    snprintf(idbuf, sizeof idbuf, "%" PRId64, id);
    snprintf(key, sizeof key, "lw_%s_%s_%s", kind, idbuf, secret);
    ld_key_hash(key, hash);
    ld_hex_encode(hash, sizeof hash, hashhex + 2);

    if (every_app) {
        const char *params[2] = {idbuf, hashhex};
        rc = ld_db_exec(db, &res,
                        "INSERT INTO api_keys (id, app_id, kind, key_hash) VALUES ($1, NULL, 'admin', $2)",
                        2, params);
    } else {
        const char *params[4] = {idbuf, kind, hashhex, app_slug};
        rc = ld_db_exec(db, &res,
                        "INSERT INTO api_keys (id, app_id, kind, key_hash)"
                        " SELECT $1, id, $2, $3 FROM apps WHERE slug = $4",
                        4, params);
    }
    if (rc != LD_OK)
        goto out;
    if (strcmp(PQcmdTuples(res), "1") != 0) {
        rc = ld_db_fail(db, LD_ERR_NOT_FOUND, "no app \"%s\"", app_slug);
        goto out;
    }
    memcpy(key_out, key, strlen(key) + 1);
    if (id_out)
        *id_out = id;
out:
    PQclear(res);
    memset(secret, 0, sizeof secret);
    memset(key, 0, sizeof key);
    return rc;
}

/* to_char format of the times the key commands print. */
#define UTC_TIME(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

ld_status ld_key_revoke(ld_db *db, int64_t id, char *earlier, size_t cap)
{
    PGresult *res = NULL;
    char idbuf[24];
    const char *params[1] = {idbuf};
    ld_status rc;

    if (!db)
        return LD_ERR_INTERNAL;
    if (earlier && cap < LD_TIME_MAX)
        return ld_db_fail(db, LD_ERR_INTERNAL, "ld_key_revoke: the time buffer must hold %d bytes", LD_TIME_MAX);
    if (earlier)
        earlier[0] = '\0';
    if (id <= 0)
        return ld_db_fail(db, LD_ERR_NOT_FOUND, "no key %" PRId64, id);
    snprintf(idbuf, sizeof idbuf, "%" PRId64, id);
    /* now() is when this statement's transaction began: a revocation time other than it was
     * set before, by an earlier revoke (or a concurrent one this update waited for). */
    rc = ld_db_exec(db, &res,
                    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1"
                    " RETURNING CASE WHEN revoked_at <> now() THEN " UTC_TIME("revoked_at") " ELSE '' END",
                    1, params);
    if (rc != LD_OK)
        goto out;
    if (PQntuples(res) != 1) {
        rc = ld_db_fail(db, LD_ERR_NOT_FOUND, "no key %" PRId64, id);
        goto out;
    }
    if (earlier)
        snprintf(earlier, cap, "%s", PQgetvalue(res, 0, 0));
out:
    PQclear(res);
    return rc;
}

ld_status ld_key_list(ld_db *db, const char *app_slug, int with_revoked, ld_key_info **rows, size_t *n)
{
    PGresult *res = NULL;
    ld_key_info *list = NULL;
    char appbuf[24] = "0";
    const char *params[2] = {appbuf, with_revoked ? "t" : "f"};
    int64_t app_id = 0;
    size_t count, i;
    ld_status rc;

    if (!db || !rows || !n)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_key_list: bad arguments") : LD_ERR_INTERNAL;
    *rows = NULL;
    *n = 0;
    if (app_slug) {
        rc = ld_app_id(db, app_slug, &app_id);
        if (rc != LD_OK)
            return rc;
        snprintf(appbuf, sizeof appbuf, "%" PRId64, app_id);
    }
    rc = ld_db_exec(db, &res,
                    "SELECT k.id, k.kind, coalesce(a.slug, ''), " UTC_TIME("k.created_at") ","
                    " coalesce(" UTC_TIME("k.revoked_at") ", '')"
                    " FROM api_keys k LEFT JOIN apps a ON a.id = k.app_id"
                    " WHERE ($1::bigint = 0 OR k.app_id = $1::bigint) AND ($2::boolean OR k.revoked_at IS NULL)"
                    " ORDER BY k.id",
                    2, params);
    if (rc != LD_OK)
        goto out;
    count = (size_t)PQntuples(res);
    if (count == 0)
        goto out;
    list = calloc(count, sizeof *list);
    if (!list) {
        rc = ld_db_fail(db, LD_ERR_NOMEM, "out of memory listing %zu keys", count);
        goto out;
    }
    for (i = 0; i < count; i++) {
        int r = (int)i;
        list[i].id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
        snprintf(list[i].kind, sizeof list[i].kind, "%s", PQgetvalue(res, r, 1));
        snprintf(list[i].app_slug, sizeof list[i].app_slug, "%s", PQgetvalue(res, r, 2));
        snprintf(list[i].created_at, sizeof list[i].created_at, "%s", PQgetvalue(res, r, 3));
        snprintf(list[i].revoked_at, sizeof list[i].revoked_at, "%s", PQgetvalue(res, r, 4));
    }
    *rows = list;
    *n = count;
    list = NULL;
out:
    free(list);
    PQclear(res);
    return rc;
}

ld_status ld_keys_load(ld_db *db, ld_key_row **rows, size_t *n)
{
    PGresult *res = NULL;
    ld_key_row *list = NULL;
    size_t count, i;
    ld_status rc;

    if (!db || !rows || !n)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_keys_load: bad arguments") : LD_ERR_INTERNAL;
    *rows = NULL;
    *n = 0;
    rc = ld_db_exec(db, &res,
                    "SELECT encode(k.key_hash, 'hex'), k.id, k.kind, coalesce(k.app_id, 0),"
                    " coalesce(a.slug, '')"
                    " FROM api_keys k LEFT JOIN apps a ON a.id = k.app_id"
                    " WHERE k.revoked_at IS NULL ORDER BY k.id",
                    0, NULL);
    if (rc != LD_OK)
        goto out;
    count = (size_t)PQntuples(res);
    if (count == 0)
        goto out;
    list = calloc(count, sizeof *list);
    if (!list) {
        rc = ld_db_fail(db, LD_ERR_NOMEM, "out of memory loading %zu keys", count);
        goto out;
    }
    for (i = 0; i < count; i++) {
        int r = (int)i;
        if (ld_hex_decode(PQgetvalue(res, r, 0), list[i].hash, sizeof list[i].hash) != 0) {
            rc = ld_db_fail(db, LD_ERR_INTERNAL, "api_keys row %s: bad key_hash", PQgetvalue(res, r, 1));
            goto out;
        }
        list[i].id = strtoll(PQgetvalue(res, r, 1), NULL, 10);
        snprintf(list[i].kind, sizeof list[i].kind, "%s", PQgetvalue(res, r, 2));
        list[i].app_id = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        snprintf(list[i].app_slug, sizeof list[i].app_slug, "%s", PQgetvalue(res, r, 4));
    }
    *rows = list;
    *n = count;
    list = NULL;
out:
    free(list);
    PQclear(res);
    return rc;
}

void ld_keys_free(ld_key_row *rows)
{
    free(rows);
}
