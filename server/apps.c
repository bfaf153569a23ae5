/* apps.c — creating, finding and listing apps. */
#include "apps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ld_app_slug_valid(const char *slug)
{
    size_t i;

    if (!slug || !((slug[0] >= 'a' && slug[0] <= 'z') || (slug[0] >= '0' && slug[0] <= '9')))
        return 0;
    for (i = 1; slug[i]; i++) {
        char c = slug[i];
        if (i >= LD_SLUG_MAX)
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

ld_status ld_app_create(ld_db *db, const char *slug, int64_t *id)
{
    PGresult *res = NULL;
    const char *params[1] = {slug};
    ld_status rc;

    if (!db)
        return LD_ERR_INTERNAL;
    if (!ld_app_slug_valid(slug))
        return ld_db_fail(db, LD_ERR_INVALID,
                          "invalid app name \"%.80s\": use 1-64 characters a-z 0-9 . _ -, "
                          "starting with a letter or digit", slug ? slug : "");
    rc = ld_db_exec(db, &res, "INSERT INTO apps (slug) VALUES ($1) RETURNING id", 1, params);
    if (rc == LD_ERR_CONFLICT)
        rc = ld_db_fail(db, LD_ERR_CONFLICT, "app \"%s\" already exists", slug);
    if (rc != LD_OK)
        goto out;
    if (id)
        *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
out:
    PQclear(res);
    return rc;
}

ld_status ld_app_id(ld_db *db, const char *slug, int64_t *id)
{
    PGresult *res = NULL;
    const char *params[1] = {slug};
    ld_status rc;

    if (!db || !id)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_app_id: bad arguments") : LD_ERR_INTERNAL;
    if (!ld_app_slug_valid(slug))
        return ld_db_fail(db, LD_ERR_NOT_FOUND, "no app \"%.80s\"", slug ? slug : "");
    rc = ld_db_exec(db, &res, "SELECT id FROM apps WHERE slug = $1", 1, params);
    if (rc != LD_OK)
        goto out;
    if (PQntuples(res) != 1) {
        rc = ld_db_fail(db, LD_ERR_NOT_FOUND, "no app \"%s\"", slug);
        goto out;
    }
    *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
out:
    PQclear(res);
    return rc;
}

ld_status ld_app_list(ld_db *db, ld_app_row **rows, size_t *n)
{
    PGresult *res = NULL;
    ld_app_row *list = NULL;
    size_t count, i;
    ld_status rc;

    if (!db || !rows || !n)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_app_list: bad arguments") : LD_ERR_INTERNAL;
    *rows = NULL;
    *n = 0;
    rc = ld_db_exec(db, &res,
                    "SELECT a.id, a.slug,"
                    " to_char(a.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
                    " count(k.id) FILTER (WHERE k.kind = 'ingest'),"
                    " count(k.id) FILTER (WHERE k.kind = 'read'),"
                    " count(k.id) FILTER (WHERE k.kind = 'admin')"
                    " FROM apps a LEFT JOIN api_keys k ON k.app_id = a.id AND k.revoked_at IS NULL"
                    " GROUP BY a.id ORDER BY a.slug",
                    0, NULL);
    if (rc != LD_OK)
        goto out;
    count = (size_t)PQntuples(res);
    if (count == 0)
        goto out;
    list = calloc(count, sizeof *list);
    if (!list) {
        rc = ld_db_fail(db, LD_ERR_NOMEM, "out of memory listing %zu apps", count);
        goto out;
    }
    for (i = 0; i < count; i++) {
        int r = (int)i;
        list[i].id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
        snprintf(list[i].slug, sizeof list[i].slug, "%s", PQgetvalue(res, r, 1));
        snprintf(list[i].created_at, sizeof list[i].created_at, "%s", PQgetvalue(res, r, 2));
        list[i].ingest_keys = strtoll(PQgetvalue(res, r, 3), NULL, 10);
        list[i].read_keys = strtoll(PQgetvalue(res, r, 4), NULL, 10);
        list[i].admin_keys = strtoll(PQgetvalue(res, r, 5), NULL, 10);
    }
    *rows = list;
    *n = count;
    list = NULL;
out:
    free(list);
    PQclear(res);
    return rc;
}
