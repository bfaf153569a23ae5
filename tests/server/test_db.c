/* test_db.c — db.c, migrate.c, apps.c, keys.c, sha256.c and admin.c against a real
 * PostgreSQL. The database comes from LEAKD_TEST_DATABASE_URL (tests/server/with_pg.sh sets
 * it); without it the database tests are skipped. Every database test starts from an empty
 * public schema. */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"
#include "apps.h"
#include "db.h"
#include "keys.h"
#include "migrate.h"
#include "sha256.h"

#ifndef LD_TEST_MIGRATIONS_DIR
#define LD_TEST_MIGRATIONS_DIR "migrations"
#endif

static const char *db_url(void)
{
    const char *u = getenv("LEAKD_TEST_DATABASE_URL");
    return u && *u ? u : NULL;
}

static const char *migrations_dir(void)
{
    const char *d = getenv("LEAKD_TEST_MIGRATIONS_DIR");
    return d && *d ? d : LD_TEST_MIGRATIONS_DIR;
}

static ld_db *connect_or_die(void)
{
    char err[512];
    ld_db *db = ld_db_connect(db_url(), err, sizeof err);
    if (!db)
        fail_msg("connect: %s", err);
    return db;
}

/* Connects and empties the database. */
static int setup_db(void **state)
{
    ld_db *db;

    *state = NULL;
    if (!db_url())
        return 0;
    db = connect_or_die();
    if (ld_db_exec_script(db, "DROP SCHEMA public CASCADE; CREATE SCHEMA public;") != LD_OK) {
        fprintf(stderr, "resetting the schema: %s\n", ld_db_error(db));
        ld_db_close(db);
        return -1;
    }
    *state = db;
    return 0;
}

static int teardown_db(void **state)
{
    ld_db_close(*state);
    return 0;
}

#define REQUIRE_DB(state)          \
    do {                           \
        if (!(state))              \
            skip();                \
    } while (0)

static void migrate_ok(ld_db *db)
{
    char err[512];
    int applied = -1, version = -1;
    ld_status st = ld_migrate(db, migrations_dir(), &applied, &version, err, sizeof err);
    if (st != LD_OK)
        fail_msg("migrate: %s", err);
}

static char *query1(ld_db *db, const char *sql)
{
    PGresult *res = NULL;
    char *v;
    ld_status st = ld_db_exec(db, &res, sql, 0, NULL);
    if (st != LD_OK)
        fail_msg("%s: %s", sql, ld_db_error(db));
    assert_int_equal(PQntuples(res), 1);
    v = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

static void assert_query(ld_db *db, const char *sql, const char *expected)
{
    char *v = query1(db, sql);
    assert_string_equal(v, expected);
    free(v);
}

/* ---- sha256 ---- */

static void hex_of(const char *s, size_t len, char out[65])
{
    ld_sha256_hex(s, len, out);
}

static void test_sha256_vectors(void **state)
{
    char hex[65];
    char *million;
    uint8_t a[32], b[32];
    ld_sha256_ctx ctx;
    size_t i, split;
    (void)state;

    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    hex_of(million, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Streaming in pieces that straddle block and padding boundaries gives the same digest. */
    for (split = 0; split <= 130; split++) {
        ld_sha256(million, 130, a);
        ld_sha256_init(&ctx);
        ld_sha256_update(&ctx, million, split);
        for (i = split; i < 130; i += 7)
            ld_sha256_update(&ctx, million + i, i + 7 <= 130 ? 7 : 130 - i);
        ld_sha256_final(&ctx, b);
        assert_memory_equal(a, b, 32);
    }
    free(million);
    assert_int_equal(ld_hex_decode("00ff", a, 2), 0);
    assert_int_equal(a[1], 0xff);
    assert_int_equal(ld_hex_decode("00f", a, 2), -1);
    assert_int_equal(ld_hex_decode("00fg", a, 2), -1);
    assert_int_equal(ld_hex_decode("00ff0", a, 2), -1);
}

/* ---- key format ---- */

static void test_key_parse(void **state)
{
    char kind[LD_KEY_KIND_MAX];
    int64_t id = 0;
    (void)state;

    assert_int_equal(ld_key_parse("lw_ingest_12_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), 0);
    assert_string_equal(kind, "ingest");
    assert_int_equal(id, 12);
    assert_int_equal(ld_key_parse("lw_admin_9223372036854775807_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), 0);
    assert_string_equal(kind, "admin");
    assert_true(id == INT64_MAX);
    assert_int_equal(ld_key_parse("lw_read_1_abcdefghijABCDEFGHIJ0123456789xy", NULL, NULL), 0);

    assert_int_equal(ld_key_parse(NULL, kind, &id), -1);
    assert_int_equal(ld_key_parse("", kind, &id), -1);
    assert_int_equal(ld_key_parse("Bearer lw_read_1_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_write_1_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_0_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_01_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read__abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_-1_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_admin_9223372036854775808_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_1_abcdefghijABCDEFGHIJ0123456789x", kind, &id), -1);   /* 31 */
    assert_int_equal(ld_key_parse("lw_read_1_abcdefghijABCDEFGHIJ0123456789xya", kind, &id), -1); /* 33 */
    assert_int_equal(ld_key_parse("lw_read_1_abcdefghijABCDEFGHIJ0123456789x-", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_1_abcdefghijABCDEFGHIJ0123456789x\n", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_readx_1_abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
    assert_int_equal(ld_key_parse("lw_read_1abcdefghijABCDEFGHIJ0123456789xy", kind, &id), -1);
}

static void test_slug_valid(void **state)
{
    char long_slug[80];
    (void)state;

    assert_true(ld_app_slug_valid("a"));
    assert_true(ld_app_slug_valid("0app"));
    assert_true(ld_app_slug_valid("com.example_app-1"));
    memset(long_slug, 'a', 64);
    long_slug[64] = '\0';
    assert_true(ld_app_slug_valid(long_slug));
    long_slug[64] = 'a';
    long_slug[65] = '\0';
    assert_false(ld_app_slug_valid(long_slug));
    assert_false(ld_app_slug_valid(NULL));
    assert_false(ld_app_slug_valid(""));
    assert_false(ld_app_slug_valid("-app"));
    assert_false(ld_app_slug_valid(".app"));
    assert_false(ld_app_slug_valid("App"));
    assert_false(ld_app_slug_valid("my app"));
    assert_false(ld_app_slug_valid("app/x"));
    assert_false(ld_app_slug_valid("caf\xc3\xa9"));
}

/* ---- migrations ---- */

/* The number of migrations in the repository (they are numbered 1, 2, ... without gaps). */
static int latest_migration(void)
{
    char err[512];
    int latest = -1;
    assert_int_equal(ld_migrations_latest(migrations_dir(), &latest, err, sizeof err), LD_OK);
    assert_true(latest >= 1);
    return latest;
}

/* Columns of reports, occurrences and leak_group_devices, and of the expressions of their
 * indexes (ANALYZE samples those too), whose statistics target is over 10 or the default
 * (-1): none after migration 0011. */
#define SMALL_SAMPLE_SQL                                                                          \
    "SELECT count(*) FROM pg_attribute WHERE attrelid IN (SELECT unnest(ARRAY['reports'::regclass," \
    " 'occurrences'::regclass, 'leak_group_devices'::regclass]) UNION SELECT indexrelid FROM pg_index"   \
    " WHERE indexprs IS NOT NULL AND indrelid IN ('reports'::regclass, 'occurrences'::regclass,"         \
    " 'leak_group_devices'::regclass)) AND attnum > 0 AND NOT attisdropped"                              \
    " AND (attstattarget < 0 OR attstattarget > 10)"

static void test_migrate_once(void **state)
{
    ld_db *db = *state;
    char err[512], want[64];
    int applied = -1, version = -1;
    int latest;

    REQUIRE_DB(db);
    latest = latest_migration();
    assert_int_equal(ld_schema_check(db, latest, err, sizeof err), LD_ERR_SCHEMA);
    assert_non_null(strstr(err, "leakd migrate"));

    assert_int_equal(ld_migrate(db, migrations_dir(), &applied, &version, err, sizeof err), LD_OK);
    assert_int_equal(applied, latest);
    assert_int_equal(version, latest);
    assert_int_equal(ld_migrate(db, migrations_dir(), &applied, &version, err, sizeof err), LD_OK);
    assert_int_equal(applied, 0);
    assert_int_equal(version, latest);
    snprintf(want, sizeof want, "%d 0001_init.sql", latest);
    assert_query(db, "SELECT count(*) || ' ' || min(name) FROM schema_migrations", want);
    assert_query(db, "SELECT count(*) FROM apps", "0");
    /* 0011: every column of the tables that only grow keeps a small ANALYZE sample (a column
     * at the default target brings back a 30,000-row sample, and the snapshot that long) */
    assert_query(db, SMALL_SAMPLE_SQL, "0");
    assert_int_equal(ld_schema_check(db, latest, err, sizeof err), LD_OK);
    assert_int_equal(ld_schema_check(db, latest + 1, err, sizeof err), LD_ERR_SCHEMA);

    /* A newer leakd migrated this database: refuse, and tell serve too. */
    assert_int_equal(ld_db_exec(db, NULL, "INSERT INTO schema_migrations VALUES (9999, 'future.sql')", 0, NULL), LD_OK);
    assert_int_equal(ld_migrate(db, migrations_dir(), &applied, &version, err, sizeof err), LD_ERR_SCHEMA);
    assert_non_null(strstr(err, "newer"));
    assert_int_equal(applied, 0);
    assert_int_equal(ld_schema_check(db, latest, err, sizeof err), LD_ERR_SCHEMA);
    assert_non_null(strstr(err, "9999"));
    /* The lock was released: another session can take it at once. */
    assert_query(db, "SELECT pg_try_advisory_lock(7810756242618280295)", "t");
    assert_query(db, "SELECT pg_advisory_unlock(7810756242618280295)", "t");
}

static char *make_dir(void)
{
    char tmpl[] = "/tmp/ld-migrations.XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_migrate_files(void **state)
{
    ld_db *db = *state;
    char err[512];
    int applied = -1, version = -1;
    char *dir;

    REQUIRE_DB(db);
    dir = make_dir();
    write_file(dir, "README.md", "not a migration\n");
    /* no migration file at all: a wrong directory, said as such (it was "version 0") */
    assert_int_equal(ld_migrations_latest(dir, &version, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "no migration files (NNNN_name.sql) in "));
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "is LEAKD_MIGRATIONS_DIR right?"));
    assert_int_equal(applied, 0);
    write_file(dir, "0001_one.sql", "CREATE TABLE t1 (x int);\nINSERT INTO t1 VALUES (1);\n");
    write_file(dir, "0003_three.sql", "CREATE TABLE t3 (x int);\nSELEC oops;\n");
    write_file(dir, "0002_two.sql", "CREATE TABLE t2 (x int); CREATE TABLE t2b (y text);");
    assert_int_equal(ld_migrations_latest(dir, &version, err, sizeof err), LD_OK);
    assert_int_equal(version, 3);

    /* 0001 and 0002 apply in order; 0003 fails, is rolled back and names its file. */
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_ERR_INTERNAL);
    assert_non_null(strstr(err, "0003_three.sql"));
    assert_non_null(strstr(err, "syntax error"));
    assert_int_equal(applied, 2);
    assert_int_equal(version, 2);
    assert_query(db, "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations", "1,2");
    assert_query(db, "SELECT to_regclass('t3') IS NULL", "t");
    assert_query(db, "SELECT to_regclass('t2b') IS NOT NULL", "t");

    /* Fixed: only 0003 applies. */
    write_file(dir, "0003_three.sql", "CREATE TABLE t3 (x int);");
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_OK);
    assert_int_equal(applied, 1);
    assert_int_equal(version, 3);

    /* Misnamed and duplicate files are refused before touching the database. */
    write_file(dir, "4_four.sql", "SELECT 1;");
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "4_four.sql"));
    {
        char path[512];
        snprintf(path, sizeof path, "%s/4_four.sql", dir);
        unlink(path);
    }
    write_file(dir, "0003_again.sql", "SELECT 1;");
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "same version"));
    assert_int_equal(ld_migrate(db, "/nonexistent/ld-migrations", &applied, &version, err, sizeof err),
                     LD_ERR_INVALID);
    remove_dir(dir);
    free(dir);
}

/* Links the real migration `name` into `dir`. */
static void link_migration(const char *dir, const char *name)
{
    char from[1024], to[512];

    assert_non_null(realpath(migrations_dir(), from));
    snprintf(from + strlen(from), sizeof from - strlen(from), "/%s", name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    assert_int_equal(symlink(from, to), 0);
}

/* Each column of `where` (a pg_attribute condition) as "name type compression statistics". */
static void assert_columns(ld_db *db, const char *where, const char *expected)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || ' ' || attcompression::text || ' '"
             "  || attstattarget, ',' ORDER BY attname) FROM pg_attribute WHERE %s",
             where);
    assert_query(db, sql, expected);
}

/* Links migration `name` into dir and applies it alone: the schema is then at `version`. */
static void migrate_to(ld_db *db, const char *dir, const char *name, int version)
{
    char err[512];
    int applied = -1, got = -1;
    link_migration(dir, name);
    assert_int_equal(ld_migrate(db, dir, &applied, &got, err, sizeof err), LD_OK);
    assert_int_equal(applied, 1);
    assert_int_equal(got, version);
}

/* leak_groups takes 40 lower-case hex digits as a signature and nothing else (a group with
 * the signature of 40 'b' must exist). */
static void assert_signature_rule(ld_db *db)
{
    static const char *const bad[] = {"repeat('A', 40)", "repeat('a', 39)", "repeat('a', 41)", "repeat('g', 40)",
                                      "repeat('a', 39) || ' '", "repeat('a', 38) || 'é'"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE leak_groups SET signature = %s WHERE signature = repeat('b', 40)", bad[i]);
        assert_int_not_equal(ld_db_exec_script(db, sql), LD_OK);
    }
}

/* 0004 re-keys a group's devices by (app, signature): the devices a server counted before it
 * are still there after it, and still not new. 0005 stores the documents as json: the same
 * documents, still compressed with lz4 and without statistics; 0006 as text, and checks
 * signatures without a regex, to the same rule; 0007 keeps meta as json, with lz4 and no
 * statistics; 0008 keys each device by a hash of its signature and install_id, and keeps when
 * it was first seen; 0009 indexes the failed reports that keep a dump; 0010 paces autovacuum
 * of the insert-mostly tables (and the TOAST table of reports); 0011 gives their columns a
 * statistics target of 10 (0 for the documents, as before); 0012 keeps a compressed result in
 * its row; 0013 moves a group's representative out of its row. */
static void test_migrations_keep_data(void **state)
{
    ld_db *db = *state;
    char err[512];
    int applied = -1, version = -1;
    char *dir;

    REQUIRE_DB(db);
    dir = make_dir();
    link_migration(dir, "0001_init.sql");
    link_migration(dir, "0002_group_devices.sql");
    link_migration(dir, "0003_cheaper_writes.sql");
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_OK);
    assert_int_equal(version, 3);
    assert_int_equal(ld_db_exec_script(db,
                                       "INSERT INTO apps (slug) VALUES ('one');"
                                       "INSERT INTO leak_groups (app_id, signature, kind, short_description, leaking_class,"
                                       "  devices, first_seen, last_seen, first_version, last_version, first_build,"
                                       "  last_build, representative)"
                                       " SELECT 1, repeat(s, 40), 'application', 'd', 'C', 2, now(), now(), '1', '1', 1, 1,"
                                       "  '{}' FROM unnest(ARRAY['a', 'b']) AS s;"
                                       "INSERT INTO leak_group_devices (group_id, install_id, first_seen) VALUES"
                                       " (1, 'dev-1', '2026-01-02T00:00:00Z'), (1, 'dev-2', '2026-01-03T00:00:00Z'),"
                                       " (2, 'dev-1', '2026-01-04T00:00:00Z'), (2, 'dev-3', '2026-01-05T00:00:00Z');"),
                     LD_OK);
    link_migration(dir, "0004_devices_by_signature.sql");
    assert_int_equal(ld_migrate(db, dir, &applied, &version, err, sizeof err), LD_OK);
    assert_int_equal(applied, 1);
    assert_query(db,
                 "SELECT string_agg(app_id || ' ' || left(signature, 2) || ' ' || install_id || ' ' ||"
                 "  to_char(first_seen AT TIME ZONE 'UTC', 'MM-DD'), ',' ORDER BY signature, install_id)"
                 " FROM leak_group_devices",
                 "1 aa dev-1 01-02,1 aa dev-2 01-03,1 bb dev-1 01-04,1 bb dev-3 01-05");
    /* keyed as the grouping statement inserts: a device seen again is not new */
    assert_query(db,
                 "WITH d AS (INSERT INTO leak_group_devices (app_id, signature, install_id)"
                 "  VALUES (1, repeat('a', 40), 'dev-2'), (1, repeat('a', 40), 'dev-4')"
                 "  ON CONFLICT DO NOTHING RETURNING install_id) SELECT string_agg(install_id, ',') FROM d",
                 "dev-4");
    assert_query(db, "SELECT string_agg(devices::text, ',' ORDER BY id) FROM leak_groups", "2,2");

    assert_int_equal(ld_db_exec_script(db, "INSERT INTO reports (id, app_id, mode, status, meta, result) VALUES"
                                           " ('11111111-1111-1111-1111-111111111111', 1, 'traces', 'done', '{}',"
                                           "  '{\"leaks\": [{\"signature\": \"x\", \"count\": 2}]}')"),
                     LD_OK);
    migrate_to(db, dir, "0005_json_documents.sql", 5);
    assert_query(db, "SELECT pg_typeof(result)::text || ' ' || (result->'leaks'->0->>'count') FROM reports", "json 2");
    assert_query(db, "SELECT string_agg(representative::text, ',') FROM leak_groups", "{},{}");
    assert_columns(db,
                   "attrelid IN ('reports'::regclass, 'leak_groups'::regclass) AND attname IN ('result', 'representative')",
                   "representative json l 0,result json l 0");

    migrate_to(db, dir, "0006_result_text.sql", 6);
    assert_query(db, "SELECT pg_typeof(result)::text || ' ' || (result::json->'leaks'->0->>'count') FROM reports", "text 2");
    assert_columns(db, "attrelid = 'reports'::regclass AND attname = 'result'", "result text l 0");

    assert_int_equal(ld_db_exec_script(db, "UPDATE reports SET meta = '{\"device\": {\"install_id\": \"dev-1\"}}'"), LD_OK);
    migrate_to(db, dir, "0007_meta_json.sql", 7);
    assert_query(db, "SELECT pg_typeof(meta)::text || ' ' || (meta #>> '{device,install_id}') FROM reports", "json dev-1");
    assert_columns(db, "attrelid = 'reports'::regclass AND attname = 'meta'", "meta json l 0");
    /* the signature rule without the regex: 40 lower-case hex digits, nothing else */
    assert_int_equal(ld_db_exec_script(db, "UPDATE leak_groups SET signature = left(repeat('0123456789abcdef', 3), 40)"
                                           " WHERE signature = repeat('a', 40)"),
                     LD_OK);
    assert_signature_rule(db);

    migrate_to(db, dir, "0008_device_keys.sql", 8);
    assert_query(db,
                 "SELECT string_agg(column_name || ' ' || data_type, ',' ORDER BY ordinal_position)"
                 " FROM information_schema.columns WHERE table_name = 'leak_group_devices'",
                 "app_id bigint,device_key uuid,first_seen timestamp with time zone");
    /* each pair keeps its first_seen under its key, and is still not new */
    assert_query(db,
                 "SELECT string_agg(s || ' ' || i || ' ' || coalesce(to_char(d.first_seen AT TIME ZONE 'UTC', 'MM-DD'),"
                 "  'none'), ',' ORDER BY s, i)"
                 " FROM (VALUES ('a', 'dev-1'), ('a', 'dev-2'), ('b', 'dev-1'), ('b', 'dev-3'), ('b', 'dev-2')) AS p(s, i)"
                 " LEFT JOIN leak_group_devices d ON d.app_id = 1 AND d.device_key ="
                 "  encode(substring(sha256(convert_to(repeat(p.s, 40) || p.i, 'UTF8')) FOR 16), 'hex')::uuid",
                 "a dev-1 01-02,a dev-2 01-03,b dev-1 01-04,b dev-2 none,b dev-3 01-05");
    assert_query(db, "SELECT count(*) FROM leak_group_devices", "5");

    migrate_to(db, dir, "0009_failed_blobs_index.sql", 9);
    assert_query(db, "SELECT indexdef FROM pg_indexes WHERE indexname = 'reports_failed_blobs'",
                 "CREATE INDEX reports_failed_blobs ON public.reports USING btree (COALESCE(analyzed_at, received_at))"
                 " WHERE ((status = 'failed'::text) AND (blob_path IS NOT NULL))");

    migrate_to(db, dir, "0010_autovacuum_pace.sql", 10);
    assert_query(db,
                 "SELECT string_agg(l || ' ' || array_to_string(reloptions, ','), '; ' ORDER BY l) FROM ("
                 "  SELECT CASE WHEN c.relkind = 't' THEN 'reports toast' ELSE c.relname::text END AS l, c.reloptions"
                 "  FROM pg_class c WHERE c.relname IN ('reports', 'occurrences', 'leak_group_devices')"
                 "   OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE relname = 'reports')) x",
                 "leak_group_devices autovacuum_vacuum_cost_delay=10; occurrences autovacuum_vacuum_cost_delay=10;"
                 " reports autovacuum_vacuum_cost_delay=10; reports toast autovacuum_vacuum_cost_delay=10");

    migrate_to(db, dir, "0011_analyze_sample.sql", 11);
    assert_query(db, SMALL_SAMPLE_SQL, "0");
    assert_query(db,
                 "SELECT string_agg(attname || ' ' || attstattarget, ',' ORDER BY attname) FROM pg_attribute"
                 " WHERE attrelid = 'reports'::regclass AND attname IN ('id', 'received_at', 'status', 'result', 'meta')",
                 "id 10,meta 0,received_at 10,result 0,status 10");

    /* 0012: a result that lz4 compresses to ~3 KB stays in its row (a row still over 2 KB
     * after compression sent it to the TOAST table before): that table gets nothing. */
    migrate_to(db, dir, "0012_inline_results.sql", 12);
    assert_query(db, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'reports'",
                 "autovacuum_vacuum_cost_delay=10,toast_tuple_target=4096");
    assert_int_equal(ld_db_exec(db, NULL,
                                "INSERT INTO reports (id, app_id, mode, status, meta, result)"
                                " SELECT gen_random_uuid(), (SELECT min(id) FROM apps), 'traces', 'done', '{}',"
                                "  (SELECT string_agg('{\"class\":\"com.example.Activity' || i || '\",\"key\":\"'"
                                "    || left(md5(i::text), 4) || '\"}', ',') FROM generate_series(1, 300) i)",
                                0, NULL),
                     LD_OK);
    assert_query(db,
                 "SELECT (SELECT count(*) FROM pg_class t WHERE t.oid = c.reltoastrelid"
                 "   AND pg_relation_size(t.oid) = 0) || ' ' || (SELECT octet_length(result) > 9000 AND"
                 "   pg_column_size(result) BETWEEN 2048 AND 4096 FROM reports ORDER BY received_at DESC LIMIT 1)"
                 " FROM pg_class c WHERE c.relname = 'reports'",
                 "1 true");
    /* 0013: a new group's representative trace goes to the TOAST table (the groups before it
     * have tiny ones, inline: that table was empty) and reads back whole, while its signature
     * stays in the row; no index of leak_groups but the unique one leads with app_id (the
     * lookup of a group by app and signature must not find another); same signature rule. */
    migrate_to(db, dir, "0013_small_group_rows.sql", 13);
    assert_query(db, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'leak_groups'",
                 "fillfactor=70,toast_tuple_target=1024");
    assert_query(db,
                 "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                 " WHERE i.indrelid = 'leak_groups'::regclass AND i.indkey[0] = (SELECT attnum FROM pg_attribute"
                 "  WHERE attrelid = 'leak_groups'::regclass AND attname = 'app_id')",
                 "leak_groups_app_id_signature_key");
    assert_query(db, "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'leak_groups'", "0");
    assert_int_equal(ld_db_exec_script(db,
                                       "INSERT INTO leak_groups (app_id, signature, kind, short_description, leaking_class,"
                                       "  devices, first_seen, last_seen, first_version, last_version, first_build,"
                                       "  last_build, representative)"
                                       " SELECT (SELECT min(id) FROM apps), repeat('c', 40), 'application', 'd', 'C', 1,"
                                       "  now(), now(), '1', '1', 1, 1, (SELECT json_build_object('elements', json_agg("
                                       "   json_build_object('class', 'com.example.Activity' || i, 'key', left(md5(i::text), 4))))"
                                       "   FROM generate_series(1, 300) i);"
                                       "UPDATE leak_groups SET occurrences = occurrences + 1 WHERE signature = repeat('c', 40)"),
                     LD_OK);
    assert_query(db,
                 "SELECT (pg_relation_size(c.reltoastrelid) > 0) || ' ' || (SELECT occurrences || ' ' ||"
                 "  (representative->'elements'->299->>'class') || ' ' || pg_column_size(signature)"
                 "  FROM leak_groups WHERE signature = repeat('c', 40))"
                 " FROM pg_class c WHERE c.relname = 'leak_groups'",
                 "true 1 com.example.Activity300 41");
    assert_signature_rule(db);
    /* 0014: an admin key may have an app; an ingest or read key still must. */
    migrate_to(db, dir, "0014_app_admin_keys.sql", 14);
    assert_int_equal(ld_db_exec_script(db,
                                       "INSERT INTO api_keys (app_id, kind, key_hash)"
                                       " SELECT min(id), 'admin', sha256('a') FROM apps;"
                                       "INSERT INTO api_keys (app_id, kind, key_hash) VALUES (NULL, 'admin', sha256('b'))"),
                     LD_OK);
    assert_int_equal(ld_db_exec_script(db, "INSERT INTO api_keys (app_id, kind, key_hash) VALUES (NULL, 'read', sha256('c'))"),
                     LD_ERR_INVALID);
    assert_query(db, "SELECT count(*) FILTER (WHERE app_id IS NULL) || ' ' || count(*) FROM api_keys WHERE kind = 'admin'",
                 "1 2");
    assert_signature_rule(db);
    /* 0015: every change to api_keys notifies leakd_keys (leakd serve reloads its key cache). */
    migrate_to(db, dir, "0015_key_notify.sql", 15);
    assert_int_equal(ld_db_listen(db, "leakd_keys"), LD_OK);
    assert_int_equal(ld_db_wait(db, 0), 0);
    assert_int_equal(ld_db_exec_script(db, "UPDATE api_keys SET revoked_at = now() WHERE key_hash = sha256('b')"), LD_OK);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    assert_int_equal(ld_db_exec_script(db, "INSERT INTO api_keys (app_id, kind, key_hash) VALUES (NULL, 'admin', sha256('d'))"),
                     LD_OK);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    assert_int_equal(ld_db_exec_script(db, "DELETE FROM api_keys WHERE key_hash = sha256('d')"), LD_OK);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    assert_int_equal(ld_db_exec_script(db, "UPDATE apps SET slug = slug"), LD_OK); /* not a key */
    assert_int_equal(ld_db_wait(db, 200), 0);
    assert_signature_rule(db);
    /* 0016: the attempts a live worker gave back when it lost its lease; none for a report that
     * was there before. */
    migrate_to(db, dir, "0016_lost_leases.sql", 16);
    assert_query(db, "SELECT (count(*) > 0 AND bool_and(lost_leases = 0))::text FROM reports", "true");
    /* 0017: the blob store of a report's dump; none for those stored before, which any worker
     * may claim, as before. */
    migrate_to(db, dir, "0017_blob_store.sql", 17);
    assert_query(db, "SELECT (count(*) > 0 AND bool_and(blob_store IS NULL))::text FROM reports", "true");
    remove_dir(dir);
    free(dir);
}

typedef struct migrate_job {
    ld_status st;
    int applied;
    char err[512];
} migrate_job;

static void *migrate_thread(void *arg)
{
    migrate_job *job = arg;
    char err[512];
    int version = 0;
    ld_db *db = ld_db_connect(db_url(), err, sizeof err);

    if (!db) {
        job->st = LD_ERR_UNAVAILABLE;
        snprintf(job->err, sizeof job->err, "%s", err);
        return NULL;
    }
    job->st = ld_migrate(db, migrations_dir(), &job->applied, &version, job->err, sizeof job->err);
    ld_db_close(db);
    return NULL;
}

static void test_migrate_concurrent(void **state)
{
    ld_db *db = *state;
    migrate_job jobs[4];
    pthread_t threads[4];
    int i, total = 0;

    REQUIRE_DB(db);
    memset(jobs, 0, sizeof jobs);
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, migrate_thread, &jobs[i]), 0);
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    for (i = 0; i < 4; i++) {
        if (jobs[i].st != LD_OK)
            fail_msg("migrate thread %d: %s", i, jobs[i].err);
        total += jobs[i].applied;
    }
    char want[16];
    snprintf(want, sizeof want, "%d", latest_migration());
    assert_int_equal(total, latest_migration());
    assert_query(db, "SELECT count(*) FROM schema_migrations", want);
}

/* ---- apps and keys ---- */

static void test_apps(void **state)
{
    ld_db *db = *state;
    ld_app_row *rows = NULL;
    size_t n = 0;
    int64_t id = 0, id2 = 0, found = 0;
    char key[LD_KEY_MAX];

    REQUIRE_DB(db);
    migrate_ok(db);
    assert_int_equal(ld_app_list(db, &rows, &n), LD_OK);
    assert_int_equal(n, 0);
    assert_null(rows);

    assert_int_equal(ld_app_create(db, "demo", &id), LD_OK);
    assert_true(id > 0);
    assert_int_equal(ld_app_create(db, "demo", NULL), LD_ERR_CONFLICT);
    assert_non_null(strstr(ld_db_error(db), "already exists"));
    assert_int_equal(ld_app_create(db, "Demo", NULL), LD_ERR_INVALID);
    assert_int_equal(ld_app_create(db, "-demo", NULL), LD_ERR_INVALID);
    assert_int_equal(ld_app_create(db, "", NULL), LD_ERR_INVALID);
    assert_int_equal(ld_app_create(db, NULL, NULL), LD_ERR_INVALID);
    assert_int_equal(ld_app_create(db, "x y", NULL), LD_ERR_INVALID);
    assert_int_equal(ld_app_create(db, "com.example.app_2-b", &id2), LD_OK);

    assert_int_equal(ld_app_id(db, "demo", &found), LD_OK);
    assert_true(found == id);
    assert_int_equal(ld_app_id(db, "nope", &found), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_app_id(db, "NOPE", &found), LD_ERR_NOT_FOUND);

    assert_int_equal(ld_key_create(db, "demo", "ingest", key, sizeof key, NULL), LD_OK);
    assert_int_equal(ld_key_create(db, "demo", "ingest", key, sizeof key, NULL), LD_OK);
    assert_int_equal(ld_key_create(db, "demo", "read", key, sizeof key, NULL), LD_OK);
    assert_int_equal(ld_app_list(db, &rows, &n), LD_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].slug, "com.example.app_2-b");
    assert_true(rows[0].id == id2);
    assert_int_equal(rows[0].ingest_keys, 0);
    assert_string_equal(rows[1].slug, "demo");
    assert_int_equal(rows[1].ingest_keys, 2);
    assert_int_equal(rows[1].read_keys, 1);
    assert_int_equal(strlen(rows[1].created_at), 20);
    assert_int_equal(rows[1].created_at[19], 'Z');
    free(rows);
}

static void test_keys(void **state)
{
    ld_db *db = *state;
    char ingest[LD_KEY_MAX], readk[LD_KEY_MAX], admin[LD_KEY_MAX], kind[LD_KEY_KIND_MAX];
    char small[10];
    int64_t app_id = 0, ingest_id = 0, read_id = 0, admin_id = 0, parsed = 0;
    ld_key_row *rows = NULL;
    uint8_t hash[32];
    size_t n = 0;

    REQUIRE_DB(db);
    migrate_ok(db);
    assert_int_equal(ld_app_create(db, "demo", &app_id), LD_OK);

    assert_int_equal(ld_key_create(db, "demo", "ingest", ingest, sizeof ingest, &ingest_id), LD_OK);
    assert_int_equal(ld_key_create(db, "demo", "read", readk, sizeof readk, &read_id), LD_OK);
    assert_int_equal(ld_key_create(db, NULL, "admin", admin, sizeof admin, &admin_id), LD_OK);
    assert_int_equal(ld_key_parse(ingest, kind, &parsed), 0);
    assert_string_equal(kind, "ingest");
    assert_true(parsed == ingest_id);
    assert_int_equal(ld_key_parse(readk, kind, &parsed), 0);
    assert_string_equal(kind, "read");
    assert_true(parsed == read_id);
    assert_int_equal(ld_key_parse(admin, kind, &parsed), 0);
    assert_string_equal(kind, "admin");
    assert_true(parsed == admin_id);
    assert_string_not_equal(ingest + strlen(ingest) - 32, readk + strlen(readk) - 32);

    /* Refusals. */
    assert_int_equal(ld_key_create(db, "nope", "ingest", small, sizeof small, NULL), LD_ERR_INVALID); /* buffer */
    assert_int_equal(ld_key_create(db, "nope", "ingest", kind, 0, NULL), LD_ERR_INVALID);
    {
        char k2[LD_KEY_MAX];
        assert_int_equal(ld_key_create(db, "nope", "ingest", k2, sizeof k2, NULL), LD_ERR_NOT_FOUND);
        assert_int_equal(ld_key_create(db, "demo", "write", k2, sizeof k2, NULL), LD_ERR_INVALID);
        assert_int_equal(ld_key_create(db, "demo", NULL, k2, sizeof k2, NULL), LD_ERR_INVALID);
        assert_int_equal(ld_key_create(db, NULL, "ingest", k2, sizeof k2, NULL), LD_ERR_INVALID);
        assert_int_equal(ld_key_create(db, NULL, "read", k2, sizeof k2, NULL), LD_ERR_INVALID);
        assert_int_equal(ld_key_create(db, "Bad Slug", "read", k2, sizeof k2, NULL), LD_ERR_INVALID);
    }

    /* Only hashes are stored. */
    ld_key_hash(ingest, hash);
    {
        char sql[256], hex[65];
        ld_hex_encode(hash, 32, hex);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM api_keys WHERE key_hash = '\\x%s'::bytea", hex);
        assert_query(db, sql, "1");
    }

    /* An admin key of one app carries that app. */
    {
        char k2[LD_KEY_MAX];
        int64_t id2 = 0;
        assert_int_equal(ld_key_create(db, "demo", "admin", k2, sizeof k2, &id2), LD_OK);
        assert_int_equal(ld_key_revoke(db, id2, NULL, 0), LD_OK);
        assert_query(db, "SELECT a.slug FROM api_keys k JOIN apps a ON a.id = k.app_id WHERE k.kind = 'admin'", "demo");
    }

    assert_int_equal(ld_keys_load(db, &rows, &n), LD_OK);
    assert_int_equal(n, 3);
    assert_true(rows[0].id == ingest_id);
    assert_memory_equal(rows[0].hash, hash, 32);
    assert_string_equal(rows[0].kind, "ingest");
    assert_true(rows[0].app_id == app_id);
    assert_string_equal(rows[0].app_slug, "demo");
    assert_string_equal(rows[1].kind, "read");
    assert_string_equal(rows[2].kind, "admin");
    assert_true(rows[2].app_id == 0);
    assert_string_equal(rows[2].app_slug, "");
    ld_key_hash(admin, hash);
    assert_memory_equal(rows[2].hash, hash, 32);
    ld_keys_free(rows);

    /* Revoked keys leave the cache; revoking twice is fine, and says since when; unknown ids
     * are not. */
    {
        char earlier[LD_TIME_MAX], small_time[8];
        assert_int_equal(ld_key_revoke(db, read_id, earlier, sizeof earlier), LD_OK);
        assert_string_equal(earlier, "");
        assert_int_equal(ld_key_revoke(db, read_id, earlier, sizeof earlier), LD_OK);
        assert_int_equal(strlen(earlier), 20); /* YYYY-MM-DDTHH:MM:SSZ */
        assert_true(earlier[10] == 'T' && earlier[19] == 'Z');
        assert_int_equal(ld_key_revoke(db, read_id, NULL, 0), LD_OK);
        assert_int_equal(ld_key_revoke(db, read_id, small_time, sizeof small_time), LD_ERR_INTERNAL);
        assert_int_equal(ld_key_revoke(db, 999999, earlier, sizeof earlier), LD_ERR_NOT_FOUND);
        assert_int_equal(ld_key_revoke(db, 0, NULL, 0), LD_ERR_NOT_FOUND);
    }
    assert_int_equal(ld_keys_load(db, &rows, &n), LD_OK);
    assert_int_equal(n, 2);
    assert_true(rows[0].id == ingest_id);
    assert_true(rows[1].id == admin_id);
    ld_keys_free(rows);

    /* Listing: active keys by id unless revoked ones are asked for; an app's own keys only. */
    {
        ld_key_info *info = NULL;
        size_t ni = 0;
        assert_int_equal(ld_key_list(db, NULL, 0, &info, &ni), LD_OK);
        assert_int_equal(ni, 2);
        assert_true(info[0].id == ingest_id);
        assert_string_equal(info[0].kind, "ingest");
        assert_string_equal(info[0].app_slug, "demo");
        assert_int_equal(strlen(info[0].created_at), 20);
        assert_string_equal(info[0].revoked_at, "");
        assert_true(info[1].id == admin_id);
        assert_string_equal(info[1].kind, "admin");
        assert_string_equal(info[1].app_slug, ""); /* every app's */
        free(info);

        assert_int_equal(ld_key_list(db, NULL, 1, &info, &ni), LD_OK);
        assert_int_equal(ni, 4);
        assert_true(info[1].id == read_id);
        assert_int_equal(strlen(info[1].revoked_at), 20);
        assert_string_equal(info[3].kind, "admin");
        assert_string_equal(info[3].app_slug, "demo");
        assert_int_equal(strlen(info[3].revoked_at), 20);
        free(info);

        assert_int_equal(ld_key_list(db, "demo", 0, &info, &ni), LD_OK);
        assert_int_equal(ni, 1);
        assert_true(info[0].id == ingest_id);
        free(info);
        assert_int_equal(ld_key_list(db, "demo", 1, &info, &ni), LD_OK);
        assert_int_equal(ni, 3); /* not the admin key of every app */
        free(info);

        assert_int_equal(ld_app_create(db, "empty", NULL), LD_OK);
        assert_int_equal(ld_key_list(db, "empty", 1, &info, &ni), LD_OK);
        assert_int_equal(ni, 0);
        assert_null(info);
        assert_int_equal(ld_key_list(db, "nope", 0, &info, &ni), LD_ERR_NOT_FOUND);
        assert_non_null(strstr(ld_db_error(db), "no app \"nope\""));
        assert_int_equal(ld_key_list(db, "Bad Slug", 0, &info, &ni), LD_ERR_NOT_FOUND);
    }
}

/* ---- errors, reconnect, transactions ---- */

static void test_classify(void **state)
{
    ld_db *db = *state;
    const char *p[1];
    char *pid;
    char sql[128];
    ld_db *other;

    REQUIRE_DB(db);
    migrate_ok(db);
    assert_query(db, "SHOW TimeZone", "UTC");
    assert_query(db, "SELECT current_setting('application_name')", "leakd");

    p[0] = "demo";
    assert_int_equal(ld_db_exec(db, NULL, "INSERT INTO apps (slug) VALUES ($1)", 1, p), LD_OK);
    assert_int_equal(ld_db_exec(db, NULL, "INSERT INTO apps (slug) VALUES ($1)", 1, p), LD_ERR_CONFLICT);
    assert_string_equal(ld_db_sqlstate(db), "23505");
    p[0] = "Not A Slug";
    assert_int_equal(ld_db_exec(db, NULL, "INSERT INTO apps (slug) VALUES ($1)", 1, p), LD_ERR_INVALID);
    assert_string_equal(ld_db_sqlstate(db), "23514");
    p[0] = "twelve";
    assert_int_equal(ld_db_exec(db, NULL, "SELECT $1::int", 1, p), LD_ERR_INVALID);
    assert_string_equal(ld_db_sqlstate(db), "22P02");
    assert_int_equal(ld_db_exec(db, NULL, "SELEC 1", 0, NULL), LD_ERR_INTERNAL);
    assert_string_equal(ld_db_sqlstate(db), "42601");
    assert_non_null(strstr(ld_db_error(db), "syntax error"));
    assert_int_equal(ld_db_exec(db, NULL, "SELECT * FROM no_such_table", 0, NULL), LD_ERR_INTERNAL);

    /* A failed transaction: COMMIT reports it. */
    assert_int_equal(ld_db_begin(db), LD_OK);
    assert_int_equal(ld_db_exec(db, NULL, "SELECT 1/0", 0, NULL), LD_ERR_INVALID); /* 22012 */
    assert_int_not_equal(ld_db_commit(db), LD_OK);
    assert_int_equal(PQtransactionStatus(ld_db_conn(db)), PQTRANS_IDLE);
    /* ROLLBACK undoes. */
    assert_int_equal(ld_db_begin(db), LD_OK);
    assert_int_equal(ld_db_exec(db, NULL, "INSERT INTO apps (slug) VALUES ('rolled')", 0, NULL), LD_OK);
    ld_db_rollback(db);
    ld_db_rollback(db); /* no transaction: a no-op */
    assert_query(db, "SELECT count(*) FROM apps WHERE slug = 'rolled'", "0");

    /* The backend is killed: UNAVAILABLE; ld_db_check reconnects, in UTC again. */
    assert_int_equal(ld_db_exec(db, NULL, "SET TimeZone = 'Europe/Paris'", 0, NULL), LD_OK);
    other = connect_or_die();
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)", PQbackendPID(ld_db_conn(db)));
    assert_query(other, sql, "t");
    assert_int_equal(ld_db_exec(db, NULL, "SELECT 1", 0, NULL), LD_ERR_UNAVAILABLE);
    assert_int_equal(ld_db_check(db), LD_OK);
    assert_query(db, "SELECT 1", "1");
    assert_query(db, "SHOW TimeZone", "UTC");
    assert_int_equal(ld_db_check(db), LD_OK); /* a healthy connection stays */
    pid = query1(db, "SELECT pg_backend_pid()");
    assert_int_equal(atoi(pid), PQbackendPID(ld_db_conn(db)));
    free(pid);
    ld_db_close(other);
}

/* Runs a statement with a parameter six times (prepared at its first run); returns
 * "generic_plans,custom_plans" of its prepared statement on db's session. */
static char *plans_of_probe(ld_db *db)
{
    const char *p[1] = {"1"};

    for (int i = 0; i < 6; i++)
        assert_int_equal(ld_db_exec(db, NULL, "SELECT count(*) FROM apps WHERE id > $1::bigint /* plans probe */", 1, p),
                         LD_OK);
    return query1(db, "SELECT generic_plans || ',' || custom_plans FROM pg_prepared_statements"
                      " WHERE statement LIKE '%plans probe%'");
}

/* The report writer's sessions run generic plans only, a new session after a reconnect too;
 * other sessions keep PostgreSQL's default (a plan for the parameters for the first five). */
static void test_generic_plans(void **state)
{
    ld_db *db = *state;
    ld_db *other;
    char sql[128];
    char *v;

    REQUIRE_DB(db);
    migrate_ok(db);
    other = connect_or_die();
    v = plans_of_probe(other);
    assert_true(atoi(strchr(v, ',') + 1) >= 5); /* the sixth: generic or custom, as PostgreSQL judges */
    free(v);

    assert_int_equal(ld_db_use_generic_plans(db), LD_OK);
    assert_query(db, "SHOW plan_cache_mode", "force_generic_plan");
    v = plans_of_probe(db);
    assert_string_equal(v, "6,0");
    free(v);

    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)", PQbackendPID(ld_db_conn(db)));
    assert_query(other, sql, "t");
    assert_int_equal(ld_db_exec(db, NULL, "SELECT 1", 0, NULL), LD_ERR_UNAVAILABLE);
    assert_int_equal(ld_db_check(db), LD_OK);
    assert_query(db, "SHOW plan_cache_mode", "force_generic_plan");
    v = plans_of_probe(db);
    assert_string_equal(v, "6,0");
    free(v);
    assert_query(other, "SHOW plan_cache_mode", "auto");
    ld_db_close(other);
}

static void test_connect_fail(void **state)
{
    char err[512];
    ld_db *db;
    (void)state;

    db = ld_db_connect("postgresql://postgres@127.0.0.1:1/leakwatch", err, sizeof err);
    assert_null(db);
    assert_true(strlen(err) > 0);
    assert_null(ld_db_connect(NULL, err, sizeof err));
    assert_null(ld_db_connect("", err, sizeof err));
    ld_db_close(NULL);
    assert_string_equal(ld_strerror(LD_ERR_CONFLICT), "already exists");
}

static void test_listen(void **state)
{
    ld_db *db = *state;
    ld_db *other;
    char sql[128];

    REQUIRE_DB(db);
    other = connect_or_die();
    assert_int_equal(ld_db_listen(db, "ld_jobs"), LD_OK);
    assert_int_equal(ld_db_listen(db, "ld_jobs"), LD_OK); /* twice is fine */
    assert_int_equal(ld_db_listen(db, ""), LD_ERR_INVALID);
    assert_int_equal(ld_db_wait(db, 50), 0);
    assert_int_equal(ld_db_exec(other, NULL, "NOTIFY ld_jobs", 0, NULL), LD_OK);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    assert_int_equal(ld_db_wait(db, 50), 0);
    /* Several notifications wake once and are all drained. */
    assert_int_equal(ld_db_exec(other, NULL, "NOTIFY ld_jobs, 'a'", 0, NULL), LD_OK);
    assert_int_equal(ld_db_exec(other, NULL, "NOTIFY ld_jobs, 'b'", 0, NULL), LD_OK);
    assert_int_equal(ld_db_exec(other, NULL, "SELECT pg_notify('ld_jobs', 'c')", 0, NULL), LD_OK);
    usleep(100 * 1000);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    assert_int_equal(ld_db_wait(db, 50), 0);
    /* Other channels do not wake us. */
    assert_int_equal(ld_db_exec(other, NULL, "NOTIFY something_else", 0, NULL), LD_OK);
    assert_int_equal(ld_db_wait(db, 100), 0);

    /* A killed listener: -1, then ld_db_check reconnects and LISTENs again. */
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)", PQbackendPID(ld_db_conn(db)));
    assert_query(other, sql, "t");
    assert_int_equal(ld_db_wait(db, 5000), -1);
    assert_int_equal(ld_db_check(db), LD_OK);
    assert_int_equal(ld_db_exec(other, NULL, "NOTIFY ld_jobs", 0, NULL), LD_OK);
    assert_int_equal(ld_db_wait(db, 5000), 1);
    ld_db_close(other);
}

/* ---- leakd migrate / app / key ---- */

typedef struct run_out {
    int rc;
    char *out;
    char *err;
} run_out;

static run_out run_admin(const char *url, int argc, ...)
{
    char *argv[8];
    va_list ap;
    run_out r;
    size_t olen = 0, elen = 0;
    FILE *out, *err;
    int i;

    assert_true(argc < 8);
    va_start(ap, argc);
    for (i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    argv[argc] = NULL;
    out = open_memstream(&r.out, &olen);
    err = open_memstream(&r.err, &elen);
    assert_non_null(out);
    assert_non_null(err);
    r.rc = ld_admin_main(url, migrations_dir(), argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

static void run_free(run_out *r)
{
    free(r->out);
    free(r->err);
}

#define EXPECT(r, code, stream, needle)                                                        \
    do {                                                                                       \
        if ((r).rc != (code) || !strstr((r).stream, (needle)))                                 \
            fail_msg("exit %d (want %d)\nstdout: %s\nstderr: %s\n(wanted \"%s\" in " #stream ")", \
                     (r).rc, (code), (r).out, (r).err, (needle));                              \
        run_free(&(r));                                                                        \
    } while (0)

/* A statement whose answer did not come within the timeout: the connection is an outage
 * until reset (before, the next query failed to send on the still busy connection, and that
 * read as out of memory, for ever), and the abandoned statement stops once the reset closed
 * its socket (client_connection_check_interval), instead of running on with its locks. */
static void test_timeout_then_reset(void **state)
{
    ld_db *db = *state;
    ld_db *watch;
    int tries;

    REQUIRE_DB(db);
    watch = connect_or_die();
    assert_query(db, "SHOW client_connection_check_interval", "2s");
    ld_db_set_timeout(db, 300);
    assert_int_equal(ld_db_exec(db, NULL, "SELECT pg_sleep(30) /* abandoned */", 0, NULL), LD_ERR_UNAVAILABLE);
    assert_non_null(strstr(ld_db_error(db), "did not answer within 300 ms"));
    assert_int_equal(ld_db_exec(db, NULL, "SELECT 1", 0, NULL), LD_ERR_UNAVAILABLE);
    assert_non_null(strstr(ld_db_error(db), "must be reset"));
    assert_int_equal(ld_db_check(db), LD_OK);
    assert_query(db, "SELECT 41 + 1", "42");
    for (tries = 0; tries < 50; tries++) {
        char *n = query1(watch, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/* abandoned */'"
                                " AND state = 'active' AND pid <> pg_backend_pid()");
        int left = atoi(n);
        free(n);
        if (!left)
            break;
        usleep(100 * 1000);
    }
    if (tries == 50)
        fail_msg("the abandoned statement still runs 5 s after its connection was reset");
    ld_db_set_timeout(db, 0);
    ld_db_close(watch);
}

static void test_admin(void **state)
{
    ld_db *db = *state;
    const char *url = db_url();
    char ingest[LD_KEY_MAX], readk[LD_KEY_MAX], idbuf[24];
    int64_t read_id = 0;
    const char *p;
    run_out r;

    REQUIRE_DB(db);
    r = run_admin(url, 1, "help");
    EXPECT(r, 0, out, "leakd key create --admin");
    r = run_admin(url, 3, "app", "create", "--help"); /* help, not an app named --help */
    EXPECT(r, 0, out, "usage: leakd app create NAME");
    r = run_admin(url, 3, "key", "list", "-h");
    EXPECT(r, 0, out, "leakd key list [APP] [--all]");
    r = run_admin(url, 4, "key", "list", "demo", "extra");
    EXPECT(r, 2, err, "key list: unexpected argument \"extra\"");
    r = run_admin(url, 0);
    EXPECT(r, 2, err, "usage:");
    r = run_admin(url, 2, "frobnicate", "x");
    EXPECT(r, 2, err, "usage:");
    r = run_admin(NULL, 1, "migrate");
    EXPECT(r, 2, err, "LEAKD_DATABASE_URL");
    r = run_admin("postgresql://postgres@127.0.0.1:1/leakwatch", 1, "migrate");
    EXPECT(r, 4, err, "cannot connect");

    /* Not migrated: refused with the way out. */
    r = run_admin(url, 2, "app", "list");
    EXPECT(r, 4, err, "leakd migrate");

    char applied_msg[128], current_msg[64];
    int latest = latest_migration();
    snprintf(applied_msg, sizeof applied_msg, "Applied %d migration%s; the schema is at version %d.", latest,
             latest == 1 ? "" : "s", latest);
    snprintf(current_msg, sizeof current_msg, "up to date (schema version %d)", latest);
    r = run_admin(url, 1, "migrate");
    EXPECT(r, 0, out, applied_msg);
    r = run_admin(url, 1, "migrate");
    EXPECT(r, 0, out, current_msg);

    r = run_admin(url, 2, "app", "list");
    EXPECT(r, 0, out, "No apps yet");

    r = run_admin(url, 3, "app", "create", "demo");
    if (r.rc != 0)
        fail_msg("app create: %s", r.err);
    assert_non_null(strstr(r.out, "will not be shown again"));
    p = strstr(r.out, "ingest key: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "ingest key: %79s", ingest), 1);
    p = strstr(r.out, "read key:   ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "read key: %79s", readk), 1);
    assert_int_equal(ld_key_parse(ingest, NULL, NULL), 0);
    assert_int_equal(ld_key_parse(readk, NULL, &read_id), 0);
    run_free(&r);

    r = run_admin(url, 3, "app", "create", "demo");
    EXPECT(r, 3, err, "already exists");
    r = run_admin(url, 3, "app", "create", "Bad_Name");
    EXPECT(r, 3, err, "invalid app name");
    r = run_admin(url, 2, "app", "create");
    EXPECT(r, 2, err, "usage:");

    r = run_admin(url, 2, "app", "list");
    EXPECT(r, 0, out, "demo");
    r = run_admin(url, 2, "app", "list");
    EXPECT(r, 0, out, "INGEST");

    r = run_admin(url, 4, "key", "create", "demo", "ingest");
    EXPECT(r, 0, out, "lw_ingest_");
    r = run_admin(url, 4, "key", "create", "demo", "read");
    EXPECT(r, 0, out, "will not be shown again");
    r = run_admin(url, 3, "key", "create", "--admin");
    EXPECT(r, 0, out, "lw_admin_");
    r = run_admin(url, 4, "key", "create", "nope", "read");
    EXPECT(r, 3, err, "no app \"nope\"");
    r = run_admin(url, 4, "key", "create", "demo", "admin");
    EXPECT(r, 0, out, "for app \"demo\"");
    r = run_admin(url, 4, "key", "create", "demo", "write");
    EXPECT(r, 2, err, "ingest, read or admin");

    snprintf(idbuf, sizeof idbuf, "%lld", (long long)read_id);
    r = run_admin(url, 3, "key", "revoke", idbuf);
    EXPECT(r, 0, out, "Revoked key");
    r = run_admin(url, 3, "key", "revoke", idbuf);
    EXPECT(r, 0, out, "was already revoked (at ");
    r = run_admin(url, 3, "key", "revoke", "987654");
    EXPECT(r, 3, err, "no key 987654");
    r = run_admin(url, 3, "key", "revoke", "abc");
    EXPECT(r, 2, err, "positive number");
    r = run_admin(url, 3, "key", "revoke", "0");
    EXPECT(r, 2, err, "positive number");

    /* demo has 2 ingest keys, 1 read (one revoked) and 1 admin; 1 admin key of every app. */
    assert_query(db, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", "5");
    r = run_admin(url, 2, "app", "list");
    if (r.rc != 0)
        fail_msg("app list: %s", r.err);
    assert_non_null(strstr(r.out, "INGEST  READ  ADMIN\n"));
    assert_non_null(strstr(r.out, "Z       2     1      1\n"));
    run_free(&r);

    /* A newer database: everything but help refuses. */
    char newer[96];
    snprintf(newer, sizeof newer, "INSERT INTO schema_migrations VALUES (%d, 'x.sql')", latest + 1);
    assert_int_equal(ld_db_exec(db, NULL, newer, 0, NULL), LD_OK);
    r = run_admin(url, 2, "app", "list");
    EXPECT(r, 4, err, "newer");
    r = run_admin(url, 1, "migrate");
    EXPECT(r, 4, err, "newer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_key_parse),
        cmocka_unit_test(test_slug_valid),
        cmocka_unit_test(test_connect_fail),
        cmocka_unit_test_setup_teardown(test_migrate_once, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_migrate_files, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_migrations_keep_data, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_migrate_concurrent, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_apps, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_keys, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_classify, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_generic_plans, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_listen, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_timeout_then_reset, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_admin, setup_db, teardown_db),
    };

    if (!db_url())
        fprintf(stderr, "test_db: LEAKD_TEST_DATABASE_URL is not set: skipping the database tests "
                        "(run through tests/server/with_pg.sh)\n");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
