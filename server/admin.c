/* admin.c — the command-line side of `leakd migrate|app|key`. */
#include "admin.h"

#include "apps.h"
#include "db.h"
#include "keys.h"
#include "migrate.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Every form of every administrative command, once: `leakd --help` lists all their `help`
 * lines (ld_admin_commands), `leakd CMD --help` the forms of CMD with their synopses. */
static const struct admin_form {
    const char *command;  /* its first word */
    const char *synopsis; /* after "leakd " */
    const char *help;     /* lines of "  <form, 28 columns><what it does>" */
} forms[] = {
    {"migrate", "migrate",
     "  migrate                     apply pending database migrations (safe to run from several hosts)\n"},
    {"app", "app create NAME",
     "  app create NAME             create an app; prints its first ingest and read keys (NAME: 1-64\n"
     "                              of a-z 0-9 . _ -, starting with a letter or digit)\n"},
    {"app", "app list", "  app list                    list apps with their active key counts\n"},
    {"key", "key create APP ingest|read|admin",
     "  key create APP KIND         a new key: KIND is ingest, read or admin (APP is the app's name;\n"
     "                              an admin key uploads, reads and PATCHes that app)\n"},
    {"key", "key create --admin", "  key create --admin          a new admin key of every app\n"},
    {"key", "key list [APP] [--all]",
     "  key list [APP] [--all]      list the active keys (of APP; --all: revoked ones too) by id,\n"
     "                              kind and app (* for every app), never their secrets\n"},
    {"key", "key revoke KEY_ID",
     "  key revoke KEY_ID           revoke a key by its id (the number in lw_<kind>_<id>_..., or the\n"
     "                              ID of key list)\n"},
};

#define N_FORMS (sizeof forms / sizeof forms[0])

int ld_admin_is_command(const char *word)
{
    size_t i;

    for (i = 0; word && i < N_FORMS; i++)
        if (strcmp(word, forms[i].command) == 0)
            return 1;
    return 0;
}

void ld_admin_commands(FILE *out)
{
    size_t i;

    for (i = 0; i < N_FORMS; i++)
        fputs(forms[i].help, out);
}

void ld_admin_usage(FILE *out, const char *command)
{
    const char *prefix = "usage: ";
    size_t i;

    if (!ld_admin_is_command(command))
        command = NULL;
    for (i = 0; i < N_FORMS; i++)
        if (!command || strcmp(command, forms[i].command) == 0) {
            fprintf(out, "%sleakd %s\n", prefix, forms[i].synopsis);
            prefix = "       ";
        }
    fputc('\n', out);
    for (i = 0; i < N_FORMS; i++)
        if (!command || strcmp(command, forms[i].command) == 0)
            fputs(forms[i].help, out);
    fputs("\n"
          "Keys are printed once; only their SHA-256 is stored.\n"
          "The database is LEAKD_DATABASE_URL (postgresql://user@host:port/db or a libpq\n"
          "conninfo string); `leakd --help` lists every setting.\n"
          "Exit codes: 0 ok, 2 usage error, 3 refused (bad name, already exists, not found),\n"
          "4 database unreachable, schema mismatch or internal error.\n",
          out);
}

static int exit_code(ld_status st)
{
    switch (st) {
    case LD_OK: return LD_EXIT_OK;
    case LD_ERR_INVALID:
    case LD_ERR_NOT_FOUND:
    case LD_ERR_CONFLICT: return LD_EXIT_REFUSED;
    default: return LD_EXIT_DATABASE;
    }
}

/* "leakd: <what>" (a printf format), then the usage of `command` (NULL: of every command). */
__attribute__((format(printf, 3, 4))) static int usage_error(FILE *errout, const char *command,
                                                             const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    fputs("leakd: ", errout);
    vfprintf(errout, what, ap);
    fputc('\n', errout);
    va_end(ap);
    ld_admin_usage(errout, command);
    return LD_EXIT_USAGE;
}

/* Reports a failed call: "leakd: <what>: <detail>" and the exit code for `st`. */
static int fail(FILE *errout, ld_status st, const char *what, const char *detail)
{
    if (st == LD_ERR_UNAVAILABLE)
        fprintf(errout, "leakd: %s: the database is unavailable: %s\n", what, detail);
    else
        fprintf(errout, "leakd: %s: %s\n", what, detail);
    return exit_code(st);
}

/* Connects and, unless `migrations_dir` is NULL, refuses an unmigrated or newer database. */
static int open_db(const char *db_url, const char *migrations_dir, int check_schema,
                   ld_db **out_db, FILE *errout)
{
    char err[1024];
    int latest = 0;
    ld_status st;
    ld_db *db;

    *out_db = NULL;
    if (!db_url || !*db_url)
        return usage_error(errout, NULL, "no database: set LEAKD_DATABASE_URL");
    db = ld_db_connect(db_url, err, sizeof err);
    if (!db) {
        fprintf(errout, "leakd: cannot connect to PostgreSQL: %s\n", err);
        return LD_EXIT_DATABASE;
    }
    if (check_schema && migrations_dir) {
        st = ld_migrations_latest(migrations_dir, &latest, err, sizeof err);
        if (st == LD_OK)
            st = ld_schema_check(db, latest, err, sizeof err);
        if (st != LD_OK) {
            fprintf(errout, "leakd: %s\n", err);
            ld_db_close(db);
            return LD_EXIT_DATABASE;
        }
    }
    *out_db = db;
    return LD_EXIT_OK;
}

static int cmd_migrate(ld_db *db, const char *migrations_dir, FILE *out, FILE *errout)
{
    char err[1024];
    int applied = 0, version = 0;
    ld_status st;

    if (!migrations_dir)
        return usage_error(errout, "migrate", "no migrations directory");
    st = ld_migrate(db, migrations_dir, &applied, &version, err, sizeof err);
    if (st != LD_OK) {
        fprintf(errout, "leakd: migrate: %s\n", err);
        return LD_EXIT_DATABASE; /* a broken migration is never the operator's input */
    }
    if (applied == 0)
        fprintf(out, "The database is up to date (schema version %d).\n", version);
    else
        fprintf(out, "Applied %d migration%s; the schema is at version %d.\n", applied,
                applied == 1 ? "" : "s", version);
    return LD_EXIT_OK;
}

static int cmd_app_create(ld_db *db, const char *slug, FILE *out, FILE *errout)
{
    char ingest[LD_KEY_MAX + 1], readk[LD_KEY_MAX + 1];
    int64_t app_id = 0;
    ld_status st;
    int rc;

    st = ld_db_begin(db);
    if (st != LD_OK)
        return fail(errout, st, "app create", ld_db_error(db));
    st = ld_app_create(db, slug, &app_id);
    if (st == LD_OK)
        st = ld_key_create(db, slug, "ingest", ingest, sizeof ingest, NULL);
    if (st == LD_OK)
        st = ld_key_create(db, slug, "read", readk, sizeof readk, NULL);
    if (st == LD_OK)
        st = ld_db_commit(db);
    if (st != LD_OK) {
        rc = fail(errout, st, "app create", ld_db_error(db));
        ld_db_rollback(db);
        return rc;
    }
    fprintf(out,
            "Created app \"%s\" (id %" PRId64 ").\n"
            "  ingest key: %s\n"
            "  read key:   %s\n"
            "These keys will not be shown again: store them now.\n",
            slug, app_id, ingest, readk);
    memset(ingest, 0, sizeof ingest);
    memset(readk, 0, sizeof readk);
    return LD_EXIT_OK;
}

static int cmd_app_list(ld_db *db, FILE *out, FILE *errout)
{
    ld_app_row *rows = NULL;
    size_t n = 0, i;
    int slug_w = 4;
    ld_status st;

    st = ld_app_list(db, &rows, &n);
    if (st != LD_OK)
        return fail(errout, st, "app list", ld_db_error(db));
    if (n == 0) {
        fprintf(out, "No apps yet: create one with `leakd app create NAME`.\n");
        return LD_EXIT_OK;
    }
    for (i = 0; i < n; i++)
        if ((int)strlen(rows[i].slug) > slug_w)
            slug_w = (int)strlen(rows[i].slug);
    fprintf(out, "%6s  %-*s  %-20s  %6s  %4s  %5s\n", "ID", slug_w, "APP", "CREATED (UTC)", "INGEST", "READ",
            "ADMIN");
    for (i = 0; i < n; i++)
        fprintf(out, "%6" PRId64 "  %-*s  %-20s  %6" PRId64 "  %4" PRId64 "  %5" PRId64 "\n", rows[i].id, slug_w,
                rows[i].slug, rows[i].created_at, rows[i].ingest_keys, rows[i].read_keys, rows[i].admin_keys);
    free(rows);
    return LD_EXIT_OK;
}

static int cmd_key_create(ld_db *db, const char *app, const char *kind, FILE *out, FILE *errout)
{
    char key[LD_KEY_MAX + 1];
    int64_t id = 0;
    ld_status st;

    st = ld_key_create(db, app, kind, key, sizeof key, &id);
    if (st != LD_OK)
        return fail(errout, st, "key create", ld_db_error(db));
    if (app)
        fprintf(out, "Created %s key %" PRId64 " for app \"%s\":\n  %s\n", kind, id, app, key);
    else
        fprintf(out, "Created admin key %" PRId64 " for every app:\n  %s\n", id, key);
    fprintf(out, "This key will not be shown again: store it now.\n");
    memset(key, 0, sizeof key);
    return LD_EXIT_OK;
}

/* A key id: decimal digits only, 1..INT64_MAX. */
static int parse_id(const char *s, int64_t *id)
{
    int64_t v = 0;

    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - (*s - '0')) / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    if (v == 0)
        return -1;
    *id = v;
    return 0;
}

static int cmd_key_list(ld_db *db, const char *app, int all, FILE *out, FILE *errout)
{
    ld_key_info *rows = NULL;
    size_t n = 0, i;
    int app_w = 3;
    ld_status st;

    st = ld_key_list(db, app, all, &rows, &n);
    if (st != LD_OK)
        return fail(errout, st, "key list", ld_db_error(db));
    if (n == 0) {
        fprintf(out, "No %skeys%s%s%s.\n", all ? "" : "active ", app ? " of app \"" : "", app ? app : "",
                app ? "\"" : "");
        return LD_EXIT_OK;
    }
    for (i = 0; i < n; i++)
        if ((int)strlen(rows[i].app_slug) > app_w)
            app_w = (int)strlen(rows[i].app_slug);
    fprintf(out, "%6s  %-6s  %-*s  %-20s  %s\n", "ID", "KIND", app_w, "APP", "CREATED (UTC)", "REVOKED (UTC)");
    for (i = 0; i < n; i++)
        fprintf(out, "%6" PRId64 "  %-6s  %-*s  %-20s  %s\n", rows[i].id, rows[i].kind, app_w,
                rows[i].app_slug[0] ? rows[i].app_slug : "*", rows[i].created_at,
                rows[i].revoked_at[0] ? rows[i].revoked_at : "-");
    free(rows);
    return LD_EXIT_OK;
}

static int cmd_key_revoke(ld_db *db, int64_t id, FILE *out, FILE *errout)
{
    char earlier[LD_TIME_MAX];
    ld_status st = ld_key_revoke(db, id, earlier, sizeof earlier);

    if (st != LD_OK)
        return fail(errout, st, "key revoke", ld_db_error(db));
    if (earlier[0])
        fprintf(out, "Key %" PRId64 " was already revoked (at %s).\n", id, earlier);
    else
        fprintf(out, "Revoked key %" PRId64 ".\n", id);
    return LD_EXIT_OK;
}

/* `key list [APP] [--all]`, the options in any order. */
static int parse_key_list(int argc, char **argv, const char **app, int *all, FILE *errout)
{
    int i;

    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0 && !*all)
            *all = 1;
        else if (argv[i][0] == '-' || *app) /* no app name starts with '-' */
            return usage_error(errout, "key", "key list: unexpected argument \"%.80s\"", argv[i]);
        else
            *app = argv[i];
    }
    return LD_EXIT_OK;
}

int ld_admin_main(const char *db_url, const char *migrations_dir, int argc, char **argv,
                  FILE *out, FILE *errout)
{
    enum { MIGRATE, APP_CREATE, APP_LIST, KEY_CREATE, KEY_LIST, KEY_REVOKE } cmd;
    const char *app = NULL, *kind = NULL;
    int64_t key_id = 0;
    ld_db *db = NULL;
    int all = 0, i, rc;

    if (argc < 1 || !argv || !argv[0])
        return usage_error(errout, NULL, "missing command");
    if (strcmp(argv[0], "help") == 0) {
        ld_admin_usage(out, argc > 1 ? argv[1] : NULL);
        return LD_EXIT_OK;
    }
    /* Asking for help never runs the command: `app create --help` must not create "--help". */
    for (i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ld_admin_usage(out, argv[0]);
            return LD_EXIT_OK;
        }
    if (strcmp(argv[0], "migrate") == 0 && argc == 1) {
        cmd = MIGRATE;
    } else if (strcmp(argv[0], "app") == 0 && argc == 3 && strcmp(argv[1], "create") == 0) {
        cmd = APP_CREATE;
        app = argv[2];
        if (!ld_app_slug_valid(app)) {
            fprintf(errout, "leakd: app create: invalid app name \"%.80s\": use 1-64 characters "
                            "a-z 0-9 . _ -, starting with a letter or digit\n", app);
            return LD_EXIT_REFUSED;
        }
    } else if (strcmp(argv[0], "app") == 0 && argc == 2 && strcmp(argv[1], "list") == 0) {
        cmd = APP_LIST;
    } else if (strcmp(argv[0], "key") == 0 && argc == 3 && strcmp(argv[1], "create") == 0 &&
               strcmp(argv[2], "--admin") == 0) {
        cmd = KEY_CREATE;
        kind = "admin";
    } else if (strcmp(argv[0], "key") == 0 && argc == 4 && strcmp(argv[1], "create") == 0) {
        cmd = KEY_CREATE;
        app = argv[2];
        kind = argv[3];
        if (!ld_key_kind_valid(kind))
            return usage_error(errout, "key", "key create: the kind is ingest, read or admin");
    } else if (strcmp(argv[0], "key") == 0 && argc >= 2 && strcmp(argv[1], "list") == 0) {
        cmd = KEY_LIST;
        rc = parse_key_list(argc, argv, &app, &all, errout);
        if (rc != LD_EXIT_OK)
            return rc;
    } else if (strcmp(argv[0], "key") == 0 && argc == 3 && strcmp(argv[1], "revoke") == 0) {
        cmd = KEY_REVOKE;
        if (parse_id(argv[2], &key_id) != 0)
            return usage_error(errout, "key", "key revoke: KEY_ID is a positive number");
    } else if (strcmp(argv[0], "migrate") == 0) {
        return usage_error(errout, "migrate", "migrate takes no arguments");
    } else if (strcmp(argv[0], "app") == 0) {
        return usage_error(errout, "app", "app: use `app create NAME` or `app list`");
    } else if (strcmp(argv[0], "key") == 0) {
        return usage_error(errout, "key", "key: use `key create APP ingest|read|admin`, `key create --admin`, "
                                          "`key list [APP] [--all]` or `key revoke KEY_ID`");
    } else {
        return usage_error(errout, NULL, "unknown command \"%.80s\"", argv[0]);
    }

    rc = open_db(db_url, migrations_dir, cmd != MIGRATE, &db, errout);
    if (rc != LD_EXIT_OK)
        return rc;
    switch (cmd) {
    case MIGRATE: rc = cmd_migrate(db, migrations_dir, out, errout); break;
    case APP_CREATE: rc = cmd_app_create(db, app, out, errout); break;
    case APP_LIST: rc = cmd_app_list(db, out, errout); break;
    case KEY_CREATE: rc = cmd_key_create(db, app, kind, out, errout); break;
    case KEY_LIST: rc = cmd_key_list(db, app, all, out, errout); break;
    case KEY_REVOKE: rc = cmd_key_revoke(db, key_id, out, errout); break;
    }
    ld_db_close(db);
    return rc;
}
