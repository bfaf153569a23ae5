/* test_store.c — reports, grouping and the analysis queue against a real PostgreSQL.
 *
 * Needs LEAKD_TEST_DATABASE_URL (tests/server/with_pg.sh sets it); without it every test is
 * skipped (exit code 77). The suite creates its own database next to the given one, migrates
 * it (ld_migrate; LEAKD_TEST_MIGRATIONS_DIR overrides the built-in directory) and drops it at
 * the end; every test starts from empty tables. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "db.h"
#include "grouping.h"
#include "leakcore.h"
#include "migrate.h"
#include "queue.h"
#include "reports.h"

#ifndef LD_TEST_MIGRATIONS_DIR
#define LD_TEST_MIGRATIONS_DIR "migrations"
#endif

#define SIG_GCROOT "a49095c3373b957532aff14eb32987bb75ffe9d5" /* SHA-1("GcRootleak") */
#define LIB_PATTERN "instance field android.app.Activity$1#this$0"
/* This instance's blob store (blob_store.h); the reports the tests insert name none, or OTHER_STORE. */
#define STORE "0f0f0f0f-0000-4000-8000-000000000001"
#define OTHER_STORE "0f0f0f0f-0000-4000-8000-000000000002"

typedef struct {
    char admin_url[1024]; /* the database we were given */
    char dbname[64];      /* ours, created in it */
    char url[2048];       /* conninfo of ours */
    ld_db *db;
} ctx;

/* ---- helpers ---------------------------------------------------------------------------- */

static void uuid_n(char out[37], int n) { snprintf(out, 37, "00000000-0000-4000-8000-%012d", n); }

/* One application leak (GcRoot.leak -> Leaking), `count` objects, and optionally a library
 * leak. `suspect` is the flag the "device" sends on the static-field reference. */
static char *leak_json(int count, int with_library, int lib_count, const char *suspect) {
    char *s = malloc(4096);
    assert_non_null(s);
    int n = snprintf(s, 4096,
                     "{\"format\":1,\"analyzer\":{\"name\":\"leakwatch\",\"version\":\"0.1.0\"},\"leaks\":["
                     "{\"signature\":\"0000000000000000000000000000000000000000\",\"kind\":\"application\","
                     "\"short_description\":\"GcRoot.leak\",\"library_pattern\":null,\"count\":%d,"
                     "\"traces\":[{\"gc_root\":\"STICKY_CLASS\",\"elements\":["
                     "{\"class\":\"GcRoot\",\"object_kind\":\"class\",\"leaking\":\"NO\",\"reason\":\"a class is never leaking\","
                     "\"reference\":{\"kind\":\"static_field\",\"name\":\"leak\",\"suspect\":%s}},"
                     "{\"class\":\"com.example.Leaking\",\"object_kind\":\"instance\",\"leaking\":\"YES\",\"reason\":\"watched\","
                     "\"key\":\"11111111-1111-1111-1111-111111111111\"}]}]}",
                     count, suspect);
    if (with_library)
        n += snprintf(s + n, 4096 - (size_t)n,
                      ",{\"signature\":\"1111111111111111111111111111111111111111\",\"kind\":\"library\","
                      "\"short_description\":\"" LIB_PATTERN "\",\"library_pattern\":\"" LIB_PATTERN "\",\"count\":%d,"
                      "\"traces\":[{\"gc_root\":\"JNI_GLOBAL\",\"elements\":["
                      "{\"class\":\"android.app.Activity$1\",\"object_kind\":\"instance\",\"leaking\":\"UNKNOWN\",\"reason\":\"\","
                      "\"reference\":{\"kind\":\"instance_field\",\"name\":\"this$0\",\"suspect\":true}},"
                      "{\"class\":\"com.example.MainActivity\",\"object_kind\":\"instance\",\"leaking\":\"YES\",\"reason\":\"destroyed\"}]}]}",
                      lib_count);
    snprintf(s + n, 4096 - (size_t)n, "]}");
    return s;
}

static lw_leak_report *parse_report(const char *json) {
    lw_leak_report *rep = NULL;
    lw_error err;
    lw_status st = lw_leak_report_from_json(json, strlen(json), NULL, &rep, &err);
    if (st != LW_OK) fail_msg("trace JSON refused: %s", err.message);
    return rep;
}

static PGresult *q(ctx *c, const char *sql, int n, const char *const *params) {
    PGresult *res = NULL;
    ld_status st = ld_db_exec(c->db, &res, sql, n, params);
    if (st != LD_OK) fail_msg("SQL failed (%d): %s\n%s", st, ld_db_error(c->db), sql);
    return res;
}

static void exec1(ctx *c, const char *sql, const char *p1) {
    const char *p[] = {p1};
    PQclear(q(c, sql, p1 ? 1 : 0, p));
}

/* The first column of the first row of `sql`, as an integer (-1 for NULL). */
static long long scalar(ctx *c, const char *sql, const char *p1) {
    const char *p[] = {p1};
    PGresult *res = q(c, sql, p1 ? 1 : 0, p);
    assert_int_equal(PQntuples(res), 1);
    long long v = PQgetisnull(res, 0, 0) ? -1 : strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

static int64_t create_app(ctx *c, const char *slug) {
    const char *p[] = {slug};
    PGresult *res = q(c, "INSERT INTO apps (slug) VALUES ($1) RETURNING id", 1, p);
    int64_t id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return id;
}

static ld_report_in heap_in(int64_t app, const char *id, const char *blob) {
    ld_report_in in = {.report_id = id, .app_id = app, .mode = "heap", .app_version = "1.0", .build = 7,
                       .install_id = "device-a", .meta_json = "{\"report_id\":\"x\"}", .blob_path = blob,
                       .blob_bytes = 1234};
    return in;
}

/* Validates and inserts a traces report; returns `created`. */
static int send_traces(ld_db *db, int64_t app, int n, const char *version, int64_t build, const char *install,
                       const char *json) {
    char id[37];
    char err[256];
    uuid_n(id, n);
    lw_leak_report *rep = parse_report(json);
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_OK);
    ld_report_in in = {.report_id = id, .app_id = app, .mode = "traces", .app_version = version, .build = build,
                       .install_id = install, .meta_json = "{}", .blob_path = NULL, .blob_bytes = 0};
    int created = -1;
    ld_status st = ld_report_insert_traces(db, &in, rep, &created);
    if (st != LD_OK) fail_msg("ld_report_insert_traces: %d %s", st, ld_db_error(db));
    lw_leak_report_free(rep);
    return created;
}

typedef struct {
    long long occurrences, leaked_objects, devices, first_build, last_build;
    char status[16], first_version[32], last_version[32], kind[16];
    char shape[160]; /* short_description|leaking_class|representative's gc_root|its element count */
} group_row;

static int get_group(ctx *c, int64_t app, const char *sig, group_row *g) {
    char a[32];
    snprintf(a, sizeof a, "%lld", (long long)app);
    const char *p[] = {a, sig};
    PGresult *res = q(c,
                      "SELECT occurrences, leaked_objects, devices, first_build, last_build, status, first_version,"
                      " last_version, kind, short_description || '|' || leaking_class || '|' ||"
                      " (representative->>'gc_root') || '|' || json_array_length(representative->'elements')"
                      " FROM leak_groups WHERE app_id = $1 AND signature = $2",
                      2, p);
    int found = PQntuples(res) == 1;
    if (found) {
        g->occurrences = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        g->leaked_objects = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        g->devices = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
        g->first_build = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
        g->last_build = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
        snprintf(g->status, sizeof g->status, "%s", PQgetvalue(res, 0, 5));
        snprintf(g->first_version, sizeof g->first_version, "%s", PQgetvalue(res, 0, 6));
        snprintf(g->last_version, sizeof g->last_version, "%s", PQgetvalue(res, 0, 7));
        snprintf(g->kind, sizeof g->kind, "%s", PQgetvalue(res, 0, 8));
        snprintf(g->shape, sizeof g->shape, "%s", PQgetvalue(res, 0, 9));
    }
    PQclear(res);
    return found;
}

static void make_queued(ctx *c, int64_t app, int n, int age_seconds) {
    char id[37], blob[64], age[16];
    uuid_n(id, n);
    snprintf(blob, sizeof blob, "blobs/%d.hprof.zst", n);
    ld_report_in in = heap_in(app, id, blob);
    int created = 0;
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_OK);
    assert_int_equal(created, 1);
    snprintf(age, sizeof age, "%d", age_seconds);
    const char *p[] = {age, id};
    PQclear(q(c, "UPDATE reports SET received_at = now() - make_interval(secs => $1::int) WHERE id = $2::uuid", 2, p));
}

static void report_field(ctx *c, const char *id, const char *col, char *out, size_t cap) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM reports WHERE id = $1::uuid", col);
    const char *p[] = {id};
    PGresult *res = q(c, sql, 1, p);
    assert_int_equal(PQntuples(res), 1);
    snprintf(out, cap, "%s", PQgetisnull(res, 0, 0) ? "(null)" : PQgetvalue(res, 0, 0));
    PQclear(res);
}

/* ---- suite setup ------------------------------------------------------------------------ */

/* `url` with its dbname replaced by `dbname`, as a conninfo string. */
static int conninfo_with_db(const char *url, const char *dbname, char *out, size_t cap) {
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &errmsg);
    if (!opts) {
        PQfreemem(errmsg);
        return -1;
    }
    size_t n = 0;
    out[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        const char *v = strcmp(o->keyword, "dbname") == 0 ? dbname : o->val;
        if (!v) continue;
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s='", o->keyword);
        for (const char *s = v; *s; s++) {
            if (*s == '\'' || *s == '\\') n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "\\");
            n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%c", *s);
        }
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "' ");
    }
    PQconninfoFree(opts);
    return n < cap ? 0 : -1;
}

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static int admin_sql(const char *url, const char *sql) {
    PGconn *conn = PQconnectdb(url);
    int ok = PQstatus(conn) == CONNECTION_OK;
    if (ok) {
        PQsetNoticeProcessor(conn, quiet, NULL); /* "does not exist, skipping" */
        PGresult *res = PQexec(conn, sql);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        if (!ok) fprintf(stderr, "test_store: %s: %s", sql, PQerrorMessage(conn));
        PQclear(res);
    } else {
        fprintf(stderr, "test_store: cannot connect: %s", PQerrorMessage(conn));
    }
    PQfinish(conn);
    return ok ? 0 : -1;
}

static int apply_migrations(ld_db *db) {
    const char *dir = getenv("LEAKD_TEST_MIGRATIONS_DIR");
    char err[512];
    int applied = 0, version = 0;
    ld_status st = ld_migrate(db, dir && *dir ? dir : LD_TEST_MIGRATIONS_DIR, &applied, &version, err, sizeof err);
    if (st != LD_OK) fprintf(stderr, "test_store: migrate: %s\n", err);
    return st == LD_OK ? 0 : -1;
}

static int suite_setup(void **state) {
    ctx *c = calloc(1, sizeof *c);
    if (!c) return -1;
    snprintf(c->admin_url, sizeof c->admin_url, "%s", getenv("LEAKD_TEST_DATABASE_URL"));
    snprintf(c->dbname, sizeof c->dbname, "leakd_test_store_%ld", (long)getpid());
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", c->dbname);
    admin_sql(c->admin_url, sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", c->dbname);
    char err[256];
    if (admin_sql(c->admin_url, sql) != 0 || conninfo_with_db(c->admin_url, c->dbname, c->url, sizeof c->url) != 0 ||
        !(c->db = ld_db_connect(c->url, err, sizeof err)) || apply_migrations(c->db) != 0) {
        fprintf(stderr, "test_store: setup failed\n");
        free(c);
        return -1;
    }
    *state = c;
    return 0;
}

static int suite_teardown(void **state) {
    ctx *c = *state;
    char sql[256];
    ld_db_close(c->db);
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", c->dbname);
    admin_sql(c->admin_url, sql);
    free(c);
    return 0;
}

static int test_setup(void **state) {
    ctx *c = *state;
    PGresult *res = NULL;
    ld_status st = ld_db_exec(c->db, &res, "TRUNCATE apps, api_keys, reports, leak_groups, occurrences, leak_group_devices RESTART IDENTITY CASCADE",
                              0, NULL);
    PQclear(res);
    return st == LD_OK ? 0 : -1;
}

/* ---- reports ---------------------------------------------------------------------------- */

static void test_insert_queued_idempotent(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char id[37], err[256];
    uuid_n(id, 1);
    ld_db *listener = ld_db_connect(c->url, err, sizeof err);
    assert_non_null(listener);
    assert_int_equal(ld_db_listen(listener, "leakd_reports"), LD_OK);

    ld_report_in in = heap_in(app, id, "blobs/1.hprof.zst");
    int created = -1;
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_OK);
    assert_int_equal(created, 1);
    assert_int_equal(ld_db_wait(listener, 5000), 1); /* the workers were told */
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_OK);
    assert_int_equal(created, 0);
    assert_int_equal(ld_db_wait(listener, 200), 0); /* nothing new: no notification */
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 1);
    char v[64];
    report_field(c, id, "status", v, sizeof v);
    assert_string_equal(v, "queued");
    report_field(c, id, "blob_path", v, sizeof v);
    assert_string_equal(v, "blobs/1.hprof.zst");
    ld_db_close(listener);

    in.report_id = "NOT-A-UUID";
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_ERR_INVALID);
}

static void test_insert_conflict_other_app(void **state) {
    ctx *c = *state;
    int64_t a1 = create_app(c, "app-one"), a2 = create_app(c, "app-two");
    char id[37];
    uuid_n(id, 1);
    ld_report_in in = heap_in(a1, id, "blobs/1");
    int created = -1;
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_OK);
    in.app_id = a2;
    assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_ERR_CONFLICT);
    assert_int_equal(created, 0);

    char *json = leak_json(1, 0, 0, "true");
    lw_leak_report *rep = parse_report(json);
    ld_report_in tin = {.report_id = id, .app_id = a2, .mode = "traces", .app_version = "1", .build = 1,
                        .install_id = "d", .meta_json = "{}"};
    assert_int_equal(ld_report_insert_traces(c->db, &tin, rep, &created), LD_ERR_CONFLICT);
    assert_int_equal(created, 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 1);
    assert_int_equal(scalar(c, "SELECT count(*) FROM leak_groups", NULL), 0);
    lw_leak_report_free(rep);
    free(json);
}

/* ---- grouping --------------------------------------------------------------------------- */

static void test_traces_report_groups(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char *json = leak_json(2, 1, 3, "true");
    assert_int_equal(send_traces(c->db, app, 1, "1.0", 10, "device-a", json), 1);

    char lib_sig[41];
    lw_pattern_signature(LIB_PATTERN, lib_sig);
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g)); /* the sent signature 000... was not trusted */
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 2);
    assert_int_equal(g.devices, 1);
    assert_string_equal(g.kind, "application");
    assert_string_equal(g.status, "open");
    assert_string_equal(g.first_version, "1.0");
    assert_int_equal(g.last_build, 10);
    assert_true(get_group(c, app, lib_sig, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 3);
    assert_string_equal(g.kind, "library");
    assert_int_equal(scalar(c, "SELECT count(*) FROM leak_groups", NULL), 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences", NULL), 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM leak_groups WHERE signature = '1111111111111111111111111111111111111111'"
                               " OR signature = '0000000000000000000000000000000000000000'", NULL), 0);

    /* group fields */
    const char *p[] = {SIG_GCROOT};
    PGresult *res = q(c,
                      "SELECT leaking_class, short_description, library_pattern IS NULL, grouping_version,"
                      " representative->>'gc_root', json_array_length(representative->'elements'),"
                      " (representative->'elements'->0->'reference'->>'suspect'), representative->'elements'->1->>'key'"
                      " FROM leak_groups WHERE signature = $1",
                      1, p);
    assert_string_equal(PQgetvalue(res, 0, 0), "com.example.Leaking");
    assert_string_equal(PQgetvalue(res, 0, 1), "GcRoot.leak");
    assert_string_equal(PQgetvalue(res, 0, 2), "t");
    assert_string_equal(PQgetvalue(res, 0, 3), "1");
    assert_string_equal(PQgetvalue(res, 0, 4), "STICKY_CLASS");
    assert_string_equal(PQgetvalue(res, 0, 5), "2");
    assert_string_equal(PQgetvalue(res, 0, 6), "true");
    assert_string_equal(PQgetvalue(res, 0, 7), "11111111-1111-1111-1111-111111111111");
    PQclear(res);
    const char *p2[] = {lib_sig};
    /* the second leak of its report: its own trace is the representative */
    res = q(c,
            "SELECT leaking_class, library_pattern, representative->>'gc_root',"
            " representative->'elements'->0->>'class' FROM leak_groups WHERE signature = $1",
            1, p2);
    assert_string_equal(PQgetvalue(res, 0, 0), "com.example.MainActivity");
    assert_string_equal(PQgetvalue(res, 0, 1), LIB_PATTERN);
    assert_string_equal(PQgetvalue(res, 0, 2), "JNI_GLOBAL");
    assert_string_equal(PQgetvalue(res, 0, 3), "android.app.Activity$1");
    PQclear(res);

    /* the stored result carries the recomputed signatures */
    char id[37], v[64];
    uuid_n(id, 1);
    report_field(c, id, "result::json->'leaks'->0->>'signature'", v, sizeof v);
    assert_string_equal(v, SIG_GCROOT);
    report_field(c, id, "leaks_found", v, sizeof v);
    assert_string_equal(v, "2");
    report_field(c, id, "status", v, sizeof v);
    assert_string_equal(v, "done");
    report_field(c, id, "analyzed_at IS NOT NULL", v, sizeof v);
    assert_string_equal(v, "t");

    /* the same report again: nothing counted twice */
    assert_int_equal(send_traces(c->db, app, 1, "1.0", 10, "device-a", json), 0);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 2);
    assert_int_equal(g.devices, 1);
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences", NULL), 2);

    /* ld_group_reports again for the same report (a retried job): no double count either */
    const char *ids[] = {id};
    assert_int_equal(ld_db_begin(c->db), LD_OK);
    assert_int_equal(ld_group_reports(c->db, 1, &app, ids), LD_OK);
    assert_int_equal(ld_db_commit(c->db), LD_OK);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 2);
    assert_int_equal(g.devices, 1);
    free(json);
}

static void test_devices_and_objects(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char *j2 = leak_json(2, 0, 0, "true"), *j3 = leak_json(3, 0, 0, "true"), *j4 = leak_json(4, 0, 0, "true");
    assert_int_equal(send_traces(c->db, app, 1, "1.0", 1, "device-a", j2), 1);
    assert_int_equal(send_traces(c->db, app, 2, "1.0", 1, "device-b", j3), 1);
    assert_int_equal(send_traces(c->db, app, 3, "1.0", 1, "device-a", j4), 1);
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 3);
    assert_int_equal(g.devices, 2);
    assert_int_equal(g.leaked_objects, 9);
    /* an unknown device (empty install_id) is not counted as a device */
    assert_int_equal(send_traces(c->db, app, 4, "1.0", 1, "", j2), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 4);
    assert_int_equal(g.devices, 2);
    /* the same signature in another app is another group */
    int64_t other = create_app(c, "app-two");
    assert_int_equal(send_traces(c->db, other, 5, "1.0", 1, "device-a", j2), 1);
    assert_true(get_group(c, other, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.devices, 1);
    free(j2);
    free(j3);
    free(j4);
}

static void test_same_signature_twice_counts_once(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    /* two leaks whose traces recompute to the same signature */
    char *one = leak_json(2, 0, 0, "true");
    char *json = malloc(8192);
    assert_non_null(json);
    const char *leak = strstr(one, "{\"signature\"");
    size_t leak_len = strlen(leak) - 2; /* without the closing "]}" */
    snprintf(json, 8192, "{\"format\":1,\"leaks\":[%.*s,%.*s]}", (int)leak_len, leak, (int)leak_len, leak);
    assert_int_equal(send_traces(c->db, app, 1, "1.0", 1, "device-a", json), 1);
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 4); /* one occurrence of both leaks' objects */
    assert_int_equal(g.devices, 1);
    free(json);
    free(one);
}

/* One batch of the group commit: a report_id listed twice is stored and counted once (the
 * second listing answers as a retry), an id stored before changes nothing, and another app's
 * id is a conflict; the others are stored and grouped. */
static void test_batch_repeats_and_conflicts(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one"), other = create_app(c, "app-two");
    char *json = leak_json(1, 0, 0, "true");
    char err[256];
    lw_leak_report *rep = parse_report(json);
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_OK);
    char *result = lw_leak_report_to_json(rep, 0);
    assert_non_null(result);
    assert_int_equal(send_traces(c->db, app, 1, "1.0", 1, "d0", json), 1);  /* stored before */
    assert_int_equal(send_traces(c->db, other, 2, "1.0", 1, "d0", json), 1); /* another app's */
    char ids[5][37];
    int nums[5] = {3, 1, 3, 2, 4};
    ld_traces_item items[5];
    for (int i = 0; i < 5; i++) {
        uuid_n(ids[i], nums[i]);
        items[i] = (ld_traces_item){.in = {.report_id = ids[i], .app_id = app, .mode = "traces", .app_version = "1.0",
                                           .build = 2, .install_id = i == 2 ? "d2" : "d1", .meta_json = "{}"},
                                    .rep = rep, .result_json = result};
    }
    assert_int_equal(ld_reports_insert_traces(c->db, items, 5), LD_OK);
    const int created[5] = {1, 0, 0, 0, 1};
    const ld_status st[5] = {LD_OK, LD_OK, LD_OK, LD_ERR_CONFLICT, LD_OK};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(items[i].created, created[i]);
        assert_int_equal(items[i].st, st[i]);
        assert_int_equal(items[i].received_at[0] != '\0', created[i]);
    }
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 3); /* reports 1, 3 and 4 */
    assert_int_equal(g.devices, 2);     /* d0, d1: d2 came with the repeat of report 3 */
    assert_int_equal(g.last_build, 2);
    assert_true(get_group(c, other, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    free(result);
    lw_leak_report_free(rep);
    free(json);
}

/* Within one batch: a new group's first version is that of the earliest report with the lowest
 * build, its last that of the latest with the highest, its fields and representative trace
 * those of the batch's first report; a report of the batch that is not stored (its id is
 * another app's) counts for none of them. */
static void test_batch_versions_and_representative(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one"), other = create_app(c, "app-two");
    char *json = leak_json(1, 0, 0, "true");
    char err[256];
    lw_leak_report *first = parse_report(json), *later = parse_report(json);
    first->leaks[0].short_description = strdup("the first listing");
    later->leaks[0].short_description = strdup("a later one");
    first->leaks[0].traces[0].gc_root = strdup("JNI_GLOBAL"); /* not in the signature */
    assert_int_equal(ld_trace_validate(first, err, sizeof err), LD_OK);
    assert_int_equal(ld_trace_validate(later, err, sizeof err), LD_OK);
    assert_string_equal(first->leaks[0].signature, later->leaks[0].signature);
    char *rf = lw_leak_report_to_json(first, 0), *rl = lw_leak_report_to_json(later, 0);
    assert_non_null(rf);
    assert_non_null(rl);
    assert_int_equal(send_traces(c->db, other, 9, "other", 1, "d9", json), 1); /* id 9 is app-two's */
    const int nums[6] = {1, 9, 2, 3, 4, 5};
    const int64_t builds[6] = {5, 1, 3, 7, 7, 3};
    const char *versions[6] = {"b5", "b1-other", "b3-first", "b7-first", "b7-last", "b3-last"};
    char ids[6][37];
    ld_traces_item items[6];
    for (int i = 0; i < 6; i++) {
        uuid_n(ids[i], nums[i]);
        items[i] = (ld_traces_item){.in = {.report_id = ids[i], .app_id = app, .mode = "traces", .app_version = versions[i],
                                           .build = builds[i], .install_id = "d1", .meta_json = "{\"n\": 1}"},
                                    .rep = i ? later : first, .result_json = i ? rl : rf};
    }
    assert_int_equal(ld_reports_insert_traces(c->db, items, 6), LD_OK);
    assert_int_equal(items[1].st, LD_ERR_CONFLICT);
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 5);
    assert_string_equal(g.first_version, "b3-first");
    assert_int_equal(g.first_build, 3);
    assert_string_equal(g.last_version, "b7-last");
    assert_int_equal(g.last_build, 7);
    assert_string_equal(g.shape, "the first listing|com.example.Leaking|JNI_GLOBAL|2");
    free(rf);
    free(rl);
    lw_leak_report_free(first);
    lw_leak_report_free(later);
    free(json);
}

static void test_fixed_regressed_ignored(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char *json = leak_json(1, 0, 0, "true");
    group_row g;
    assert_int_equal(send_traces(c->db, app, 1, "1.10", 10, "d1", json), 1);
    exec1(c, "UPDATE leak_groups SET status = 'fixed', fixed_in_build = 10 WHERE signature = $1", SIG_GCROOT);
    assert_int_equal(send_traces(c->db, app, 2, "1.9", 9, "d2", json), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.status, "fixed");
    assert_int_equal(send_traces(c->db, app, 3, "1.10", 10, "d3", json), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.status, "fixed");
    assert_int_equal(g.occurrences, 3);
    assert_int_equal(send_traces(c->db, app, 4, "1.11", 11, "d4", json), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.status, "regressed");
    assert_int_equal(g.occurrences, 4);

    exec1(c, "UPDATE leak_groups SET status = 'ignored', fixed_in_build = NULL WHERE signature = $1", SIG_GCROOT);
    assert_int_equal(send_traces(c->db, app, 5, "2.0", 100, "d5", json), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.status, "ignored");
    assert_int_equal(g.occurrences, 5);
    free(json);
}

static void test_first_last_version(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char *json = leak_json(1, 0, 0, "true");
    group_row g;
    assert_int_equal(send_traces(c->db, app, 1, "1.5", 5, "d", json), 1);
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.first_version, "1.5");
    assert_string_equal(g.last_version, "1.5");
    assert_int_equal(send_traces(c->db, app, 2, "1.3", 3, "d", json), 1); /* lower build: new first */
    assert_int_equal(send_traces(c->db, app, 3, "1.7", 7, "d", json), 1); /* higher build: new last */
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.first_version, "1.3");
    assert_int_equal(g.first_build, 3);
    assert_string_equal(g.last_version, "1.7");
    assert_int_equal(g.last_build, 7);
    assert_int_equal(send_traces(c->db, app, 4, "1.7-hotfix", 7, "d", json), 1); /* equal: the newer is last */
    assert_int_equal(send_traces(c->db, app, 5, "1.3-beta", 3, "d", json), 1);   /* equal: the older stays first */
    assert_int_equal(send_traces(c->db, app, 6, "1.6", 6, "d", json), 1);        /* in between: nothing moves */
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_string_equal(g.first_version, "1.3");
    assert_int_equal(g.first_build, 3);
    assert_string_equal(g.last_version, "1.7-hotfix");
    assert_int_equal(g.last_build, 7);
    assert_int_equal(g.occurrences, 6);
    assert_int_equal(g.devices, 1);
    free(json);
}

static void test_trace_validate(void **state) {
    (void)state;
    char err[256];
    /* a flipped suspect flag is refused, naming the trace */
    char *bad = leak_json(1, 0, 0, "false");
    lw_leak_report *rep = parse_report(bad);
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "leaks[0].traces[0]"));
    assert_string_equal(rep->leaks[0].signature, "0000000000000000000000000000000000000000"); /* untouched */
    assert_int_equal(rep->leaks[0].traces[0].elements[0].suspect, 0);                        /* untouched */
    lw_leak_report_free(rep);
    free(bad);

    /* the library leak is second: its flipped flag is named leaks[1].traces[0] */
    char *good = leak_json(1, 1, 1, "true");
    rep = parse_report(good);
    rep->leaks[1].traces[0].elements[0].suspect = 0;
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "leaks[1].traces[0]"));
    lw_leak_report_free(rep);

    /* a tampered signature is replaced by the recomputed one */
    rep = parse_report(good);
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_OK);
    assert_string_equal(rep->leaks[0].signature, SIG_GCROOT);
    char lib_sig[41];
    lw_pattern_signature(LIB_PATTERN, lib_sig);
    assert_string_equal(rep->leaks[1].signature, lib_sig);
    lw_leak_report_free(rep);

    /* a library leak without its pattern, a leak without a trace, a trace without elements */
    rep = parse_report(good);
    rep->leaks[1].library_pattern = NULL;
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "leaks[1]"));
    lw_leak_report_free(rep);
    rep = parse_report(good);
    size_t saved = rep->leaks[0].trace_count;
    rep->leaks[0].trace_count = 0;
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_ERR_INVALID);
    rep->leaks[0].trace_count = saved;
    saved = rep->leaks[0].traces[0].element_count;
    rep->leaks[0].traces[0].element_count = 0;
    assert_int_equal(ld_trace_validate(rep, err, sizeof err), LD_ERR_INVALID);
    assert_non_null(strstr(err, "leaks[0].traces[0]"));
    rep->leaks[0].traces[0].element_count = saved;
    lw_leak_report_free(rep);
    free(good);
}

/* Two connections send reports of the same new device for the same group at the same time,
 * many rounds: every round must count exactly one device. */
typedef struct {
    const char *url;
    int64_t app;
    int n;
    char install[32];
    pthread_barrier_t *barrier;
    const char *json;
    int rc;
} sender;

static void *send_thread(void *arg) {
    sender *s = arg;
    char err[256], id[37];
    ld_db *db = ld_db_connect(s->url, err, sizeof err);
    s->rc = -1;
    if (!db) return NULL;
    lw_leak_report *rep = NULL;
    lw_error lerr;
    if (lw_leak_report_from_json(s->json, strlen(s->json), NULL, &rep, &lerr) == LW_OK &&
        ld_trace_validate(rep, err, sizeof err) == LD_OK) {
        uuid_n(id, s->n);
        ld_report_in in = {.report_id = id, .app_id = s->app, .mode = "traces", .app_version = "1", .build = 1,
                           .install_id = s->install, .meta_json = "{}"};
        int created = 0;
        pthread_barrier_wait(s->barrier);
        if (ld_report_insert_traces(db, &in, rep, &created) == LD_OK && created) s->rc = 0;
    } else {
        pthread_barrier_wait(s->barrier);
    }
    lw_leak_report_free(rep);
    ld_db_close(db);
    return NULL;
}

static void test_concurrent_devices(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    char *json = leak_json(1, 1, 1, "true");
    enum { ROUNDS = 8 };
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, 2);
        sender s[2];
        pthread_t th[2];
        for (int i = 0; i < 2; i++) {
            s[i] = (sender){.url = c->url, .app = app, .n = 100 + r * 2 + i, .barrier = &barrier, .json = json};
            snprintf(s[i].install, sizeof s[i].install, "device-%d", r);
            assert_int_equal(pthread_create(&th[i], NULL, send_thread, &s[i]), 0);
        }
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&barrier);
        assert_int_equal(s[0].rc, 0);
        assert_int_equal(s[1].rc, 0);
    }
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 2 * ROUNDS);
    assert_int_equal(g.devices, ROUNDS);
    char lib_sig[41];
    lw_pattern_signature(LIB_PATTERN, lib_sig);
    assert_true(get_group(c, app, lib_sig, &g));
    assert_int_equal(g.devices, ROUNDS);
    free(json);
}

/* ---- queue ------------------------------------------------------------------------------ */

static void test_claim_oldest(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    make_queued(c, app, 2, 30); /* the oldest */
    make_queued(c, app, 3, 20);
    ld_job job;
    char id[37], v[64];
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    uuid_n(id, 2);
    assert_string_equal(job.report_id, id);
    assert_int_equal(job.app_id, app);
    assert_string_equal(job.app_slug, "app-one");
    assert_string_equal(job.blob_path, "blobs/2.hprof.zst");
    assert_int_equal(job.blob_bytes, 1234);
    assert_int_equal(job.attempts, 1);
    assert_string_equal(job.app_version, "1.0");
    assert_int_equal(job.build, 7);
    assert_string_equal(job.install_id, "device-a");
    report_field(c, id, "status || ' ' || lease_owner || ' ' || (lease_until > now() + interval '50 s')", v, sizeof v);
    assert_string_equal(v, "analyzing host:1 true");
    ld_job_clear(&job);

    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    uuid_n(id, 3);
    assert_string_equal(job.report_id, id);
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    uuid_n(id, 1);
    assert_string_equal(job.report_id, id);
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_ERR_NOT_FOUND);
    ld_job_clear(&job);
}

typedef struct {
    const char *url;
    char owner[16];
    pthread_barrier_t *barrier;
    char report_id[37];
    int rc;
} claimer;

/* Claims inside an open transaction and holds the row lock until both threads claimed. */
static void *claim_thread(void *arg) {
    claimer *cl = arg;
    char err[256];
    cl->rc = -1;
    ld_db *db = ld_db_connect(cl->url, err, sizeof err);
    if (!db) {
        pthread_barrier_wait(cl->barrier);
        return NULL;
    }
    ld_job job;
    /* Without SKIP LOCKED the second claim would wait for the first's lock: fail, don't hang. */
    PGresult *res = NULL;
    ld_db_exec(db, &res, "SET statement_timeout = '5s'", 0, NULL);
    PQclear(res);
    int ok = ld_db_begin(db) == LD_OK && ld_job_claim(db, cl->owner, STORE, 60, &job) == LD_OK;
    pthread_barrier_wait(cl->barrier); /* both hold their locks here */
    if (ok) {
        snprintf(cl->report_id, sizeof cl->report_id, "%s", job.report_id);
        ld_job_clear(&job);
        if (ld_db_commit(db) == LD_OK) cl->rc = 0;
    } else {
        ld_db_rollback(db);
    }
    ld_db_close(db);
    return NULL;
}

static void test_skip_locked(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 20);
    make_queued(c, app, 2, 10);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    claimer cl[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        cl[i] = (claimer){.url = c->url, .barrier = &barrier};
        snprintf(cl[i].owner, sizeof cl[i].owner, "w:%d", i);
        assert_int_equal(pthread_create(&th[i], NULL, claim_thread, &cl[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    assert_int_equal(cl[0].rc, 0);
    assert_int_equal(cl[1].rc, 0);
    assert_string_not_equal(cl[0].report_id, cl[1].report_id);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE status = 'analyzing' AND attempts = 1", NULL), 2);
    assert_int_equal(scalar(c, "SELECT count(DISTINCT lease_owner) FROM reports", NULL), 2);
}

static void test_expired_lease(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job a, b;
    assert_int_equal(ld_job_claim(c->db, "host:a", STORE, 60, &a), LD_OK);
    assert_int_equal(ld_job_claim(c->db, "host:b", STORE, 60, &b), LD_ERR_NOT_FOUND); /* leased */
    assert_int_equal(ld_job_renew(c->db, &a, "host:a", 60), LD_OK);
    exec1(c, "UPDATE reports SET lease_until = now() - interval '1 second' WHERE id = $1::uuid", a.report_id);
    assert_int_equal(ld_job_claim(c->db, "host:b", STORE, 60, &b), LD_OK);
    assert_string_equal(b.report_id, a.report_id);
    assert_int_equal(b.attempts, 2);
    /* a lost its lease: it can neither renew, nor complete, nor fail, nor release */
    assert_int_equal(ld_job_renew(c->db, &a, "host:a", 60), LD_ERR_NOT_FOUND);
    char *json = leak_json(1, 0, 0, "true");
    lw_leak_report *rep = parse_report(json);
    assert_int_equal(ld_job_complete(c->db, &a, "host:a", rep), LD_ERR_NOT_FOUND);
    assert_int_equal(scalar(c, "SELECT count(*) FROM leak_groups", NULL), 0);
    assert_int_equal(ld_job_fail(c->db, &a, "host:a", "x", 1, 3, 0, NULL), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_job_release(c->db, &a, "host:a", 1), LD_ERR_NOT_FOUND);
    char v[64];
    report_field(c, a.report_id, "status || ' ' || lease_owner || ' ' || attempts", v, sizeof v);
    assert_string_equal(v, "analyzing host:b 2");
    /* the same owner re-claiming its expired job: the old claim (attempt 2) stays dead */
    assert_int_equal(ld_job_renew(c->db, &b, "host:b", 60), LD_OK);
    exec1(c, "UPDATE reports SET lease_until = now() - interval '1 second' WHERE id = $1::uuid", b.report_id);
    ld_job b2;
    assert_int_equal(ld_job_claim(c->db, "host:b", STORE, 60, &b2), LD_OK);
    assert_int_equal(b2.attempts, 3);
    assert_int_equal(ld_job_renew(c->db, &b, "host:b", 60), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_job_renew(c->db, &b2, "host:b", 60), LD_OK);
    ld_job_clear(&b2);
    ld_job_clear(&a);
    ld_job_clear(&b);
    lw_leak_report_free(rep);
    free(json);
}

static void expire_lease(ctx *c, const char *report_id) {
    exec1(c, "UPDATE reports SET lease_until = now() - interval '1 second' WHERE id = $1::uuid", report_id);
}

/* A live worker that lost its lease to another claim gives its attempt back: the report has
 * used one attempt for one analysis, not two, and fails only after LEAKD_MAX_ATTEMPTS attempts
 * that were its own. */
static void test_lost_lease_gives_its_attempt_back(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job a, b, d;
    char v[64];
    assert_int_equal(ld_job_claim(c->db, "host:a", STORE, 60, &a), LD_OK);
    /* nobody took it: nothing to give back, and the lease is still a's to renew */
    expire_lease(c, a.report_id);
    assert_int_equal(ld_job_lease_lost(c->db, &a), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_job_claim(c->db, "host:b", STORE, 60, &b), LD_OK);
    assert_int_equal(b.attempts, 2);
    assert_int_equal(ld_job_attempts_used(&b), 2); /* what b knew when it claimed */
    /* a learns it lost the lease: once, however often it says so */
    assert_int_equal(ld_job_renew(c->db, &a, "host:a", 60), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_job_lease_lost(c->db, &a), LD_OK);
    assert_int_equal(ld_job_lease_lost(c->db, &a), LD_ERR_NOT_FOUND);
    report_field(c, a.report_id, "attempts || ' ' || lost_leases", v, sizeof v);
    assert_string_equal(v, "2 1");
    json_t *obj = NULL;
    assert_int_equal(ld_report_get(c->db, app, a.report_id, &obj), LD_OK);
    assert_int_equal(json_integer_value(json_object_get(obj, "attempts")), 1);
    json_decref(obj);
    /* b's analysis crashes. With at most 2 attempts it was the report's last (2 claims) and
     * the report failed; it is its first, and the report is queued again. */
    int failed = -1;
    assert_int_equal(ld_job_fail(c->db, &b, "host:b", "crash 1", 0, 2, 0, &failed), LD_OK);
    assert_int_equal(failed, 0);
    report_field(c, a.report_id, "status || ' ' || attempts || ' ' || lost_leases", v, sizeof v);
    assert_string_equal(v, "queued 2 1");
    assert_int_equal(ld_job_claim(c->db, "host:b", STORE, 60, &d), LD_OK);
    assert_int_equal(d.attempts, 3);
    assert_int_equal(ld_job_attempts_used(&d), 2);
    assert_int_equal(ld_job_fail(c->db, &d, "host:b", "crash 2", 0, 2, 0, &failed), LD_OK);
    assert_int_equal(failed, 1);
    report_field(c, a.report_id, "status || ' ' || error", v, sizeof v);
    assert_string_equal(v, "failed crash 2");
    ld_job_clear(&a);
    ld_job_clear(&b);
    ld_job_clear(&d);

    /* Two lost leases in a row, told in either order: both given back, the latest claim not. */
    make_queued(c, app, 2, 10);
    ld_job x, y, z;
    assert_int_equal(ld_job_claim(c->db, "host:x", STORE, 60, &x), LD_OK);
    expire_lease(c, x.report_id);
    assert_int_equal(ld_job_claim(c->db, "host:y", STORE, 60, &y), LD_OK);
    expire_lease(c, y.report_id);
    assert_int_equal(ld_job_claim(c->db, "host:z", STORE, 60, &z), LD_OK);
    assert_int_equal(ld_job_lease_lost(c->db, &y), LD_OK);
    assert_int_equal(ld_job_lease_lost(c->db, &x), LD_OK);
    assert_int_equal(ld_job_lease_lost(c->db, &z), LD_ERR_NOT_FOUND); /* z holds it */
    report_field(c, z.report_id, "attempts || ' ' || lost_leases || ' ' || lease_owner", v, sizeof v);
    assert_string_equal(v, "3 2 host:z");
    assert_int_equal(ld_job_renew(c->db, &z, "host:z", 60), LD_OK);
    ld_job_clear(&x);
    ld_job_clear(&y);
    ld_job_clear(&z);
}

static void test_fail_and_retry(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job job;
    char v[128];
    for (int attempt = 1; attempt <= 3; attempt++) {
        assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
        assert_int_equal(job.attempts, attempt);
        char msg[32];
        snprintf(msg, sizeof msg, "crash %d", attempt);
        assert_int_equal(ld_job_fail(c->db, &job, "host:1", msg, 0, 3, 0, NULL), LD_OK);
        /* analyzed_at: when it failed, once it has (the failed dumps' days count from then) */
        report_field(c, job.report_id,
                     "status || ' ' || error || ' ' || (lease_owner IS NULL) || ' ' || "
                     "coalesce((analyzed_at > now() - interval '1 minute')::text, 'null')",
                     v, sizeof v);
        if (attempt < 3) {
            snprintf(msg, sizeof msg, "queued crash %d true null", attempt);
            assert_string_equal(v, msg);
        } else {
            assert_string_equal(v, "failed crash 3 true true");
        }
        ld_job_clear(&job);
    }
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_ERR_NOT_FOUND);

    /* a permanent failure (parse error) fails at the first attempt */
    make_queued(c, app, 2, 5);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_int_equal(ld_job_fail(c->db, &job, "host:1", "bad HPROF at offset 12", 1, 3, 60, NULL), LD_OK);
    report_field(c, job.report_id, "status || ' ' || attempts || ' ' || (analyzed_at IS NOT NULL)", v, sizeof v);
    assert_string_equal(v, "failed 1 true");
    json_t *obj = NULL;
    assert_int_equal(ld_report_get(c->db, app, job.report_id, &obj), LD_OK);
    assert_string_equal(json_string_value(json_object_get(obj, "status")), "failed");
    assert_string_equal(json_string_value(json_object_get(obj, "error")), "bad HPROF at offset 12");
    json_decref(obj);
    ld_job_clear(&job);
}

/* A failed attempt that will be tried again waits its delay (LEAKD_RETRY_DELAY): the report is
 * 'queued' but not claimable until then. The last attempt and a permanent failure wait for
 * nothing: they are 'failed' with no time set. */
static void test_failed_attempt_waits_its_delay(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job job;
    char v[128];
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_int_equal(ld_job_fail(c->db, &job, "host:1", "crash 1", 0, 2, 120, NULL), LD_OK);
    report_field(c, job.report_id,
                 "status || ' ' || attempts || ' ' || (lease_owner IS NULL) || ' ' || "
                 "(lease_until BETWEEN now() + interval '119 s' AND now() + interval '121 s')",
                 v, sizeof v);
    assert_string_equal(v, "queued 1 true true");
    ld_job other;
    assert_int_equal(ld_job_claim(c->db, "host:2", STORE, 60, &other), LD_ERR_NOT_FOUND);
    long due = 0; /* what an idle worker waits for */
    assert_int_equal(ld_job_next_due(c->db, &due), LD_OK);
    assert_true(due > 110000 && due <= 120000);
    /* its time has come */
    exec1(c, "UPDATE reports SET lease_until = now() - interval '1 s' WHERE id = $1::uuid", job.report_id);
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:2", STORE, 60, &job), LD_OK);
    assert_int_equal(job.attempts, 2);
    assert_int_equal(ld_job_fail(c->db, &job, "host:2", "crash 2", 0, 2, 240, NULL), LD_OK);
    report_field(c, job.report_id, "status || ' ' || attempts || ' ' || (lease_until IS NULL)", v, sizeof v);
    assert_string_equal(v, "failed 2 true");
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:2", STORE, 60, &job), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_job_next_due(c->db, &due), LD_OK);
    assert_int_equal(due, -1);
}

static void test_release_refund(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job job;
    char v[64];
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_int_equal(job.attempts, 1);
    assert_int_equal(ld_job_release(c->db, &job, "host:1", 1), LD_OK);
    report_field(c, job.report_id, "status || ' ' || attempts || ' ' || (lease_owner IS NULL AND lease_until IS NULL)", v,
                 sizeof v);
    assert_string_equal(v, "queued 0 true");
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_int_equal(job.attempts, 1);
    assert_int_equal(ld_job_release(c->db, &job, "host:1", 0), LD_OK);
    report_field(c, job.report_id, "status || ' ' || attempts", v, sizeof v);
    assert_string_equal(v, "queued 1");
    assert_int_equal(ld_job_release(c->db, &job, "host:1", 0), LD_ERR_NOT_FOUND); /* already released */
    ld_job_clear(&job);
}

static void test_complete_once(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    ld_job job;
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    char *json = leak_json(4, 1, 2, "true");
    lw_leak_report *rep = parse_report(json);
    assert_int_equal(ld_job_complete(c->db, &job, "host:1", rep), LD_OK);
    assert_int_equal(ld_job_complete(c->db, &job, "host:1", rep), LD_ERR_NOT_FOUND);
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g));
    assert_int_equal(g.occurrences, 1);
    assert_int_equal(g.leaked_objects, 4);
    assert_int_equal(g.devices, 1);
    assert_string_equal(g.first_version, "1.0");
    assert_int_equal(g.first_build, 7);
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences", NULL), 2);
    char v[128];
    report_field(c, job.report_id,
                 "status || ' ' || leaks_found || ' ' || (analyzed_at IS NOT NULL) || ' ' || (lease_owner IS NULL)"
                 " || ' ' || json_array_length(result::json->'leaks')",
                 v, sizeof v);
    assert_string_equal(v, "done 2 true true 2");
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_ERR_NOT_FOUND); /* done is not claimable */
    lw_leak_report_free(rep);
    free(json);
}

static void test_release_owner(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 30);
    make_queued(c, app, 2, 20);
    make_queued(c, app, 3, 10);
    ld_job j1, j2, j3;
    assert_int_equal(ld_job_claim(c->db, "dead:1", STORE, 60, &j1), LD_OK);
    assert_int_equal(ld_job_claim(c->db, "alive:2", STORE, 60, &j2), LD_OK);
    assert_int_equal(ld_job_claim(c->db, "dead:1", STORE, 60, &j3), LD_OK);
    int64_t n = -1;
    assert_int_equal(ld_jobs_release_owner(c->db, "dead:1", 0, &n), LD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE status = 'queued' AND attempts = 1"
                               " AND lease_owner IS NULL AND lease_until IS NULL", NULL), 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE status = 'analyzing' AND lease_owner = 'alive:2'", NULL),
                     1);
    assert_int_equal(ld_jobs_release_owner(c->db, "dead:1", 0, &n), LD_OK);
    assert_int_equal(n, 0);
    ld_job again;
    assert_int_equal(ld_job_claim(c->db, "alive:2", STORE, 60, &again), LD_OK); /* reclaimable at once */
    assert_string_equal(again.report_id, j1.report_id);
    assert_int_equal(again.attempts, 2);
    /* killed at the shutdown deadline: its attempt is given back */
    assert_int_equal(ld_jobs_release_owner(c->db, "alive:2", 1, &n), LD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE status = 'queued' AND lease_owner IS NULL", NULL), 3);
    assert_int_equal(scalar(c, "SELECT sum(attempts) FROM reports", NULL), 0 + 1 + 1);
    ld_job_clear(&again);
    ld_job_clear(&j1);
    ld_job_clear(&j2);
    ld_job_clear(&j3);
}

/* ---- retention and the report object --------------------------------------------------- */

/* One ld_retention_purge of reports over 90 days old: it deleted `want` and returned the one
 * dump `blob` to delete (NULL: none). */
static void purge_expect(ctx *c, const char *store, int64_t limit, int64_t want, const char *blob) {
    int64_t deleted = -1;
    char **paths = NULL;
    size_t nblobs = 99;
    assert_int_equal(ld_retention_purge(c->db, store, 90, limit, &deleted, &paths, &nblobs), LD_OK);
    assert_int_equal(deleted, want);
    assert_int_equal(nblobs, blob ? 1 : 0);
    if (blob) assert_string_equal(paths[0], blob);
    else assert_null(paths);
    ld_blob_paths_free(paths, nblobs);
}

static void test_retention(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    make_queued(c, app, 1, 10);
    make_queued(c, app, 2, 10);
    char *json = leak_json(2, 0, 0, "true");
    assert_int_equal(send_traces(c->db, app, 3, "1.0", 1, "device-a", json), 1);
    assert_int_equal(send_traces(c->db, app, 4, "1.0", 1, "device-b", json), 1);
    char id1[37], id2[37], id3[37];
    uuid_n(id1, 1);
    uuid_n(id2, 2);
    uuid_n(id3, 3);
    /* 1 is the oldest but still queued: it waits until it is analyzed or fails */
    exec1(c, "UPDATE reports SET received_at = now() - interval '120 days' WHERE id = $1::uuid", id1);
    exec1(c, "UPDATE reports SET received_at = now() - interval '110 days', status = 'failed' WHERE id = $1::uuid", id2);
    exec1(c, "UPDATE reports SET received_at = now() - interval '100 days' WHERE id = $1::uuid", id3);

    /* a batch at a time, the oldest first */
    purge_expect(c, STORE, 1, 1, "blobs/2.hprof.zst");
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 3);
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences", NULL), 2);
    purge_expect(c, STORE, 1, 1, NULL); /* the traces report had no blob */
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 2);
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences", NULL), 1); /* id3's went with it */
    group_row g;
    assert_true(get_group(c, app, SIG_GCROOT, &g)); /* the group keeps its counters */
    assert_int_equal(g.occurrences, 2);
    assert_int_equal(g.leaked_objects, 4);
    assert_int_equal(g.devices, 2);

    purge_expect(c, STORE, 1000, 0, NULL);

    /* 1 is completed by a worker while the purge runs: the purge passes over the row it has
     * locked, and deletes it, and the occurrences it added, once it is done. (One statement
     * deleted the row after the lock and missed those occurrences, which stayed for ever.) */
    char err[256];
    ld_db *worker = ld_db_connect(c->url, err, sizeof err);
    assert_non_null(worker);
    assert_int_equal(ld_db_begin(worker), LD_OK);
    const char *p1[] = {id1};
    PGresult *res = NULL;
    assert_int_equal(ld_db_exec(worker, &res, "UPDATE reports SET status = 'done' WHERE id = $1::uuid", 1, p1), LD_OK);
    PQclear(res);
    assert_int_equal(ld_db_exec(worker, &res,
                                "INSERT INTO occurrences (report_id, group_id, app_id, leaked_objects, app_version, build, install_id)"
                                " SELECT $1::uuid, id, app_id, 1, '1.0', 1, '' FROM leak_groups LIMIT 1",
                                1, p1),
                     LD_OK);
    PQclear(res);
    purge_expect(c, STORE, 1000, 0, NULL);
    assert_int_equal(ld_db_commit(worker), LD_OK);
    ld_db_close(worker);
    purge_expect(c, STORE, 1000, 1, "blobs/1.hprof.zst");
    assert_int_equal(scalar(c, "SELECT count(*) FROM occurrences o WHERE NOT EXISTS "
                               "(SELECT 1 FROM reports r WHERE r.id = o.report_id)", NULL), 0);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 1);
    int64_t deleted;
    char **paths;
    size_t nblobs;
    assert_int_equal(ld_retention_purge(c->db, STORE, 0, 1000, &deleted, &paths, &nblobs), LD_ERR_INVALID);
    assert_int_equal(ld_retention_purge(c->db, STORE, 90, 0, &deleted, &paths, &nblobs), LD_ERR_INVALID);
    free(json);
}

/* Failed reports' dumps: kept for `days`, and at most max_bytes of them, the newest first;
 * a dump of a report that did not fail is never one of them. */
static void test_failed_blobs_purge(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    /* 1-4 failed 1, 2, 3 and 10 days ago, with dumps of 100, 200, 300 and 400 bytes; 5 is
     * queued (10 days old) */
    for (int n = 1; n <= 5; n++) make_queued(c, app, n, 10 * 86400);
    static const char *const ages[] = {"1", "2", "3", "10"};
    for (int n = 1; n <= 4; n++) {
        char id[37], sql[256];
        uuid_n(id, n);
        snprintf(sql, sizeof sql,
                 "UPDATE reports SET status = 'failed', error = 'x', blob_bytes = %d,"
                 " analyzed_at = now() - make_interval(days => %s) WHERE id = $1::uuid",
                 n * 100, ages[n - 1]);
        exec1(c, sql, id);
    }
    char **paths = NULL;
    size_t n = 99;
    /* no cap: only the one older than 7 days */
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, 7, 0, &paths, &n), LD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(paths[0], "blobs/4.hprof.zst");
    ld_blob_paths_free(paths, n);
    /* 350 bytes: the newest (100) and the next (200) fit, 300 more would not */
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, 7, 350, &paths, &n), LD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(paths[0], "blobs/3.hprof.zst");
    ld_blob_paths_free(paths, n);
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, 7, 350, &paths, &n), LD_OK);
    assert_int_equal(n, 0);
    assert_null(paths);
    /* a cap below the newest dump leaves none */
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, 7, 50, &paths, &n), LD_OK);
    assert_int_equal(n, 2);
    ld_blob_paths_free(paths, n);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE blob_path IS NOT NULL", NULL), 1);
    char id5[37];
    uuid_n(id5, 5);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE blob_path IS NOT NULL AND id = $1::uuid", id5), 1);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 5); /* rows stay; only their dumps go */
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, -1, 0, &paths, &n), LD_ERR_INVALID);
}

/* Instances with data dirs of their own: a worker claims only the reports whose dump is in its
 * own blob store, or that name none (stored before migration 0017); the purges delete only
 * those dumps, and leave another store's reports with their dumps to its instances. */
static void test_blob_stores(void **state) {
    ctx *c = *state;
    int64_t app = create_app(c, "app-one");
    /* 1 (the oldest) in the other store, 2 in none, 3 in this one */
    static const char *const stores[] = {OTHER_STORE, NULL, STORE};
    char id[3][37];
    for (int n = 1; n <= 3; n++) {
        char blob[64];
        uuid_n(id[n - 1], n);
        snprintf(blob, sizeof blob, "blobs/%d.hprof.zst", n);
        ld_report_in in = heap_in(app, id[n - 1], blob);
        in.blob_store = stores[n - 1];
        int created = 0;
        assert_int_equal(ld_report_insert_queued(c->db, &in, &created), LD_OK);
        assert_int_equal(created, 1);
        char sql[160];
        snprintf(sql, sizeof sql, "UPDATE reports SET received_at = now() - interval '100 days' + interval '%d s'"
                                  " WHERE id = $1::uuid", n);
        exec1(c, sql, id[n - 1]);
    }
    ld_job job;
    assert_int_equal(ld_job_claim(c->db, "host:1", "not-a-store", 60, &job), LD_ERR_INVALID);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_string_equal(job.report_id, id[1]);
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_OK);
    assert_string_equal(job.report_id, id[2]);
    ld_job_clear(&job);
    assert_int_equal(ld_job_claim(c->db, "host:1", STORE, 60, &job), LD_ERR_NOT_FOUND); /* 1 is not ours */
    assert_int_equal(ld_job_claim(c->db, "host:2", OTHER_STORE, 60, &job), LD_OK);
    assert_string_equal(job.report_id, id[0]);
    ld_job_clear(&job);

    /* All three failed 100 days ago, their dumps kept */
    exec1(c, "UPDATE reports SET status = 'failed', lease_owner = NULL, lease_until = NULL, analyzed_at = received_at",
          NULL);
    char **paths = NULL;
    size_t nblobs = 0;
    int64_t deleted = 0;
    assert_int_equal(ld_failed_blobs_purge(c->db, STORE, 30, 0, &paths, &nblobs), LD_OK);
    assert_int_equal(nblobs, 2);
    assert_true((strcmp(paths[0], "blobs/2.hprof.zst") == 0 && strcmp(paths[1], "blobs/3.hprof.zst") == 0) ||
                (strcmp(paths[0], "blobs/3.hprof.zst") == 0 && strcmp(paths[1], "blobs/2.hprof.zst") == 0));
    ld_blob_paths_free(paths, nblobs);
    /* the other store's dump is its instances' to delete, and so is its report meanwhile */
    purge_expect(c, STORE, 1000, 2, NULL);
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports WHERE id = $1::uuid", id[0]), 1);
    purge_expect(c, OTHER_STORE, 1000, 1, "blobs/1.hprof.zst");
    assert_int_equal(scalar(c, "SELECT count(*) FROM reports", NULL), 0);
    assert_int_equal(ld_retention_purge(c->db, "", 90, 1000, &deleted, &paths, &nblobs), LD_ERR_INVALID);
    assert_int_equal(ld_failed_blobs_purge(c->db, NULL, 30, 0, &paths, &nblobs), LD_ERR_INVALID);
}

static void assert_keys(json_t *obj, const char *const *keys, size_t n) {
    assert_true(json_is_object(obj));
    assert_int_equal(json_object_size(obj), n);
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(obj, keys[i])) fail_msg("missing key \"%s\"", keys[i]);
}

static int is_rfc3339_utc(const char *s) {
    /* YYYY-MM-DDTHH:MM:SSZ */
    const char *shape = "dddd-dd-ddTdd:dd:ddZ";
    if (!s || strlen(s) != strlen(shape)) return 0;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i]) return 0;
    return 1;
}

static void test_report_get(void **state) {
    ctx *c = *state;
    static const char *const keys[] = {"id", "app", "status", "mode", "received_at", "app_version", "build",
                                       "attempts", "error", "analyzed_at", "leaks_found", "leaks"};
    int64_t app = create_app(c, "app-one");
    int64_t other = create_app(c, "app-two");
    make_queued(c, app, 1, 10);
    char id[37];
    uuid_n(id, 1);
    json_t *o = NULL;
    assert_int_equal(ld_report_get(c->db, app, id, &o), LD_OK);
    assert_keys(o, keys, sizeof keys / sizeof *keys);
    assert_string_equal(json_string_value(json_object_get(o, "id")), id);
    assert_string_equal(json_string_value(json_object_get(o, "app")), "app-one");
    assert_string_equal(json_string_value(json_object_get(o, "status")), "queued");
    assert_string_equal(json_string_value(json_object_get(o, "mode")), "heap");
    assert_true(is_rfc3339_utc(json_string_value(json_object_get(o, "received_at"))));
    assert_string_equal(json_string_value(json_object_get(o, "app_version")), "1.0");
    assert_int_equal(json_integer_value(json_object_get(o, "build")), 7);
    assert_true(json_is_integer(json_object_get(o, "attempts")));
    assert_true(json_is_null(json_object_get(o, "error")));
    assert_true(json_is_null(json_object_get(o, "analyzed_at")));
    assert_true(json_is_null(json_object_get(o, "leaks_found")));
    assert_true(json_is_array(json_object_get(o, "leaks")));
    assert_int_equal(json_array_size(json_object_get(o, "leaks")), 0);
    json_decref(o);

    /* a retried (not yet failed) job shows no error */
    ld_job job;
    assert_int_equal(ld_job_claim(c->db, "h:1", STORE, 60, &job), LD_OK);
    assert_int_equal(ld_job_fail(c->db, &job, "h:1", "timeout", 0, 3, 0, NULL), LD_OK);
    ld_job_clear(&job);
    assert_int_equal(ld_report_get(c->db, app, id, &o), LD_OK);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "queued");
    assert_int_equal(json_integer_value(json_object_get(o, "attempts")), 1);
    assert_true(json_is_null(json_object_get(o, "error")));
    json_decref(o);

    char *json = leak_json(5, 1, 1, "true");
    assert_int_equal(send_traces(c->db, app, 2, "2.1", 21, "d", json), 1);
    uuid_n(id, 2);
    assert_int_equal(ld_report_get(c->db, app, id, &o), LD_OK);
    assert_keys(o, keys, sizeof keys / sizeof *keys);
    assert_string_equal(json_string_value(json_object_get(o, "status")), "done");
    assert_string_equal(json_string_value(json_object_get(o, "mode")), "traces");
    assert_true(is_rfc3339_utc(json_string_value(json_object_get(o, "analyzed_at"))));
    assert_int_equal(json_integer_value(json_object_get(o, "leaks_found")), 2);
    json_t *leaks = json_object_get(o, "leaks");
    assert_int_equal(json_array_size(leaks), 2);
    static const char *const leak_keys[] = {"signature", "kind", "short_description", "count"};
    json_t *l0 = json_array_get(leaks, 0);
    assert_keys(l0, leak_keys, 4);
    assert_string_equal(json_string_value(json_object_get(l0, "signature")), SIG_GCROOT);
    assert_string_equal(json_string_value(json_object_get(l0, "kind")), "application");
    assert_string_equal(json_string_value(json_object_get(l0, "short_description")), "GcRoot.leak");
    assert_int_equal(json_integer_value(json_object_get(l0, "count")), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(leaks, 1), "kind")), "library");
    json_decref(o);

    assert_int_equal(ld_report_get(c->db, other, id, &o), LD_ERR_NOT_FOUND);
    assert_null(o);
    uuid_n(id, 999);
    assert_int_equal(ld_report_get(c->db, app, id, &o), LD_ERR_NOT_FOUND);
    assert_int_equal(ld_report_get(c->db, app, "garbage", &o), LD_ERR_NOT_FOUND);
    free(json);
}

int main(void) {
    if (!getenv("LEAKD_TEST_DATABASE_URL") || !*getenv("LEAKD_TEST_DATABASE_URL")) {
        printf("test_store: LEAKD_TEST_DATABASE_URL is not set; skipped (run it under tests/server/with_pg.sh)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_insert_queued_idempotent, test_setup),
        cmocka_unit_test_setup(test_insert_conflict_other_app, test_setup),
        cmocka_unit_test_setup(test_traces_report_groups, test_setup),
        cmocka_unit_test_setup(test_devices_and_objects, test_setup),
        cmocka_unit_test_setup(test_same_signature_twice_counts_once, test_setup),
        cmocka_unit_test_setup(test_batch_repeats_and_conflicts, test_setup),
        cmocka_unit_test_setup(test_batch_versions_and_representative, test_setup),
        cmocka_unit_test_setup(test_fixed_regressed_ignored, test_setup),
        cmocka_unit_test_setup(test_first_last_version, test_setup),
        cmocka_unit_test_setup(test_trace_validate, test_setup),
        cmocka_unit_test_setup(test_concurrent_devices, test_setup),
        cmocka_unit_test_setup(test_claim_oldest, test_setup),
        cmocka_unit_test_setup(test_skip_locked, test_setup),
        cmocka_unit_test_setup(test_expired_lease, test_setup),
        cmocka_unit_test_setup(test_lost_lease_gives_its_attempt_back, test_setup),
        cmocka_unit_test_setup(test_fail_and_retry, test_setup),
        cmocka_unit_test_setup(test_failed_attempt_waits_its_delay, test_setup),
        cmocka_unit_test_setup(test_release_refund, test_setup),
        cmocka_unit_test_setup(test_complete_once, test_setup),
        cmocka_unit_test_setup(test_release_owner, test_setup),
        cmocka_unit_test_setup(test_retention, test_setup),
        cmocka_unit_test_setup(test_failed_blobs_purge, test_setup),
        cmocka_unit_test_setup(test_blob_stores, test_setup),
        cmocka_unit_test_setup(test_report_get, test_setup),
    };
    return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
