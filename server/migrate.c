/* migrate.c — applies numbered SQL files under an advisory lock and records them. */
#define _POSIX_C_SOURCE 200809L

#include "migrate.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LD_MIGRATION_MAX_FILES 4096
#define LD_MIGRATION_MAX_BYTES (16u << 20) /* one migration file */
#define LD_MIGRATION_NAME_MAX 255

typedef struct migration {
    int version;
    char file[LD_MIGRATION_NAME_MAX + 1];
} migration;

static void seterr(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void seterr(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;

    if (!err || cap == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* 1 for NNNN_name.sql with name in [A-Za-z0-9._-]+, setting *version. */
static int parse_name(const char *name, int *version)
{
    size_t i, len = strlen(name);

    if (len < 4 + 1 + 1 + 4 || len > LD_MIGRATION_NAME_MAX || !ends_with(name, ".sql"))
        return 0;
    for (i = 0; i < 4; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    if (name[4] != '_')
        return 0;
    for (i = 5; i < len - 4; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    *version = (name[0] - '0') * 1000 + (name[1] - '0') * 100 + (name[2] - '0') * 10 + (name[3] - '0');
    return *version >= 1;
}

static int cmp_migration(const void *a, const void *b)
{
    const migration *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* Lists and sorts the migration files of `dir` into *out (caller frees). */
static ld_status list_dir(const char *dir, migration **out, size_t *n, char *err, size_t cap)
{
    DIR *d = NULL;
    struct dirent *e;
    migration *list = NULL;
    size_t count = 0, alloc = 0, i;
    ld_status rc = LD_ERR_INVALID;

    *out = NULL;
    *n = 0;
    d = opendir(dir);
    if (!d) {
        seterr(err, cap, "cannot read migrations directory %s: %s", dir, strerror(errno));
        goto out;
    }
    while ((e = readdir(d)) != NULL) {
        int version;

        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".sql"))
            continue;
        if (!parse_name(e->d_name, &version)) {
            seterr(err, cap, "%s/%s: migration files are named NNNN_name.sql (NNNN >= 0001)",
                   dir, e->d_name);
            goto out;
        }
        if (count == LD_MIGRATION_MAX_FILES) {
            seterr(err, cap, "%s: more than %d migration files", dir, LD_MIGRATION_MAX_FILES);
            goto out;
        }
        if (count == alloc) {
            size_t na = alloc ? alloc * 2 : 16;
            migration *nl = realloc(list, na * sizeof *nl);
            if (!nl) {
                seterr(err, cap, "out of memory");
                rc = LD_ERR_NOMEM;
                goto out;
            }
            list = nl;
            alloc = na;
        }
        list[count].version = version;
        memcpy(list[count].file, e->d_name, strlen(e->d_name) + 1);
        count++;
    }
    if (count == 0) {
        /* A wrong LEAKD_MIGRATIONS_DIR (a packaging or path mistake): "up to date at version 0"
         * on a fresh database, or "upgrade leakd" on a migrated one, said the wrong thing. */
        seterr(err, cap, "no migration files (NNNN_name.sql) in %s: is LEAKD_MIGRATIONS_DIR right?", dir);
        goto out;
    }
    qsort(list, count, sizeof *list, cmp_migration);
    for (i = 1; i < count; i++) {
        if (list[i].version == list[i - 1].version) {
            seterr(err, cap, "%s: %s and %s have the same version", dir, list[i - 1].file, list[i].file);
            goto out;
        }
    }
    *out = list;
    *n = count;
    list = NULL;
    rc = LD_OK;
out:
    free(list);
    if (d)
        closedir(d);
    return rc;
}

ld_status ld_migrations_latest(const char *dir, int *version, char *err, size_t cap)
{
    migration *list = NULL;
    size_t n = 0;
    ld_status rc;

    if (!dir || !version) {
        seterr(err, cap, "ld_migrations_latest: bad arguments");
        return LD_ERR_INTERNAL;
    }
    rc = list_dir(dir, &list, &n, err, cap);
    if (rc == LD_OK)
        *version = n ? list[n - 1].version : 0;
    free(list);
    return rc;
}

/* Reads a whole file into a NUL-terminated buffer (caller frees). */
static ld_status read_file(const char *path, char **out, char *err, size_t cap)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0, alloc = 0, got;
    ld_status rc = LD_ERR_INVALID;

    *out = NULL;
    f = fopen(path, "rb");
    if (!f) {
        seterr(err, cap, "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    for (;;) {
        if (alloc - len < 4096 + 1) {
            size_t na = alloc ? alloc * 2 : 65536;
            char *nb;
            if (na > LD_MIGRATION_MAX_BYTES + 1)
                na = LD_MIGRATION_MAX_BYTES + 1;
            if (na <= alloc) {
                seterr(err, cap, "%s: larger than %u bytes", path, LD_MIGRATION_MAX_BYTES);
                goto out;
            }
            nb = realloc(buf, na);
            if (!nb) {
                seterr(err, cap, "out of memory");
                rc = LD_ERR_NOMEM;
                goto out;
            }
            buf = nb;
            alloc = na;
        }
        got = fread(buf + len, 1, alloc - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        seterr(err, cap, "cannot read %s", path);
        goto out;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        seterr(err, cap, "%s: contains a NUL byte", path);
        goto out;
    }
    *out = buf;
    buf = NULL;
    rc = LD_OK;
out:
    free(buf);
    if (f)
        fclose(f);
    return rc;
}

/* The recorded versions, ascending (caller frees). */
static ld_status applied_versions(ld_db *db, int **out, size_t *n, char *err, size_t cap)
{
    PGresult *res = NULL;
    ld_status rc;
    int *v = NULL;
    size_t i, rows;

    *out = NULL;
    *n = 0;
    rc = ld_db_exec(db, &res, "SELECT version FROM schema_migrations ORDER BY version", 0, NULL);
    if (rc != LD_OK) {
        seterr(err, cap, "reading schema_migrations: %s", ld_db_error(db));
        goto out;
    }
    rows = (size_t)PQntuples(res);
    v = malloc((rows ? rows : 1) * sizeof *v);
    if (!v) {
        seterr(err, cap, "out of memory");
        rc = LD_ERR_NOMEM;
        goto out;
    }
    for (i = 0; i < rows; i++)
        v[i] = atoi(PQgetvalue(res, (int)i, 0));
    *out = v;
    *n = rows;
    v = NULL;
out:
    free(v);
    PQclear(res);
    return rc;
}

static int has_version(const int *v, size_t n, int version)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (v[i] == version)
            return 1;
    return 0;
}

/* Applies one file and records it, in one transaction. */
static ld_status apply_one(ld_db *db, const char *dir, const migration *m, char *err, size_t cap)
{
    char path[4096];
    char vbuf[16];
    const char *params[2];
    char *sql = NULL;
    ld_status rc;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, m->file) >= sizeof path) {
        seterr(err, cap, "%s: path too long", dir);
        return LD_ERR_INVALID;
    }
    rc = read_file(path, &sql, err, cap);
    if (rc != LD_OK)
        goto out;
    rc = ld_db_begin(db);
    if (rc != LD_OK) {
        seterr(err, cap, "%s: BEGIN: %s", m->file, ld_db_error(db));
        goto out;
    }
    rc = ld_db_exec_script(db, sql);
    if (rc != LD_OK) {
        seterr(err, cap, "%s: %s", m->file, ld_db_error(db));
        goto rollback;
    }
    snprintf(vbuf, sizeof vbuf, "%d", m->version);
    params[0] = vbuf;
    params[1] = m->file;
    rc = ld_db_exec(db, NULL, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2, params);
    if (rc != LD_OK) {
        seterr(err, cap, "%s: recording it: %s", m->file, ld_db_error(db));
        goto rollback;
    }
    rc = ld_db_commit(db);
    if (rc != LD_OK) {
        seterr(err, cap, "%s: COMMIT: %s", m->file, ld_db_error(db));
        goto rollback;
    }
    goto out;
rollback:
    ld_db_rollback(db);
out:
    free(sql);
    return rc;
}

ld_status ld_migrate(ld_db *db, const char *dir, int *applied, int *version, char *err, size_t cap)
{
    migration *files = NULL;
    size_t n_files = 0, n_done = 0, i;
    int *done = NULL, locked = 0, count = 0, current = 0, latest;
    char key[32];
    const char *params[1] = {key};
    ld_status rc;

    if (applied)
        *applied = 0;
    if (version)
        *version = 0;
    seterr(err, cap, "%s", "");
    if (!db || !dir) {
        seterr(err, cap, "ld_migrate: bad arguments");
        return LD_ERR_INTERNAL;
    }
    rc = list_dir(dir, &files, &n_files, err, cap);
    if (rc != LD_OK)
        goto out;
    latest = n_files ? files[n_files - 1].version : 0;

    snprintf(key, sizeof key, "%lld", (long long)LD_MIGRATE_LOCK_KEY);
    rc = ld_db_exec(db, NULL, "SELECT pg_advisory_lock($1::bigint)", 1, params);
    if (rc != LD_OK) {
        seterr(err, cap, "taking the migration lock: %s", ld_db_error(db));
        goto out;
    }
    locked = 1;
    rc = ld_db_exec(db, NULL,
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version int PRIMARY KEY,"
                    " name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())",
                    0, NULL);
    if (rc != LD_OK) {
        seterr(err, cap, "creating schema_migrations: %s", ld_db_error(db));
        goto out;
    }
    rc = applied_versions(db, &done, &n_done, err, cap);
    if (rc != LD_OK)
        goto out;
    current = n_done ? done[n_done - 1] : 0;
    if (current > latest) {
        seterr(err, cap,
               "the database is at schema version %d, newer than this leakd's migrations "
               "(highest %d in %s): it was migrated by a newer leakd; upgrade leakd",
               current, latest, dir);
        rc = LD_ERR_SCHEMA;
        goto out;
    }
    for (i = 0; i < n_files; i++) {
        if (has_version(done, n_done, files[i].version))
            continue;
        rc = apply_one(db, dir, &files[i], err, cap);
        if (rc != LD_OK)
            goto out;
        count++;
        if (files[i].version > current)
            current = files[i].version;
    }
    rc = LD_OK;
out:
    if (locked) {
        /* A broken connection released the lock already; nothing to report then. */
        if (ld_db_exec(db, NULL, "SELECT pg_advisory_unlock($1::bigint)", 1, params) != LD_OK && rc == LD_OK) {
            seterr(err, cap, "releasing the migration lock: %s", ld_db_error(db));
            rc = LD_ERR_UNAVAILABLE;
        }
    }
    if (applied)
        *applied = count;
    if (version)
        *version = current;
    free(done);
    free(files);
    return rc;
}

ld_status ld_schema_check(ld_db *db, int expected_version, char *err, size_t cap)
{
    PGresult *res = NULL;
    ld_status rc;
    int current;

    seterr(err, cap, "%s", "");
    if (!db) {
        seterr(err, cap, "ld_schema_check: bad arguments");
        return LD_ERR_INTERNAL;
    }
    rc = ld_db_exec(db, &res, "SELECT to_regclass('schema_migrations') IS NOT NULL", 0, NULL);
    if (rc != LD_OK) {
        seterr(err, cap, "reading the schema version: %s", ld_db_error(db));
        goto out;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        seterr(err, cap, "the database is not migrated (no schema_migrations table): run `leakd migrate`");
        rc = LD_ERR_SCHEMA;
        goto out;
    }
    PQclear(res);
    res = NULL;
    rc = ld_db_exec(db, &res, "SELECT coalesce(max(version), 0) FROM schema_migrations", 0, NULL);
    if (rc != LD_OK) {
        seterr(err, cap, "reading the schema version: %s", ld_db_error(db));
        goto out;
    }
    current = atoi(PQgetvalue(res, 0, 0));
    if (current < expected_version) {
        seterr(err, cap, "the database is at schema version %d, this leakd needs %d: run `leakd migrate`",
               current, expected_version);
        rc = LD_ERR_SCHEMA;
    } else if (current > expected_version) {
        seterr(err, cap,
               "the database is at schema version %d, newer than this leakd (%d): "
               "it was migrated by a newer leakd; upgrade leakd", current, expected_version);
        rc = LD_ERR_SCHEMA;
    }
out:
    PQclear(res);
    return rc;
}
