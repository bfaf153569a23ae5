/* api.c — the JSON API dashboards read: reports, leak groups (filters, sorting, cursor
 * pagination), one group with its representative trace, status changes, new leaks of a
 * version, health; and the routing of every request (uploads go on to ingest.c). Read keys see
 * their app; admin keys see theirs, or every app, and may PATCH. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "leakcore.h"
#include "log.h"
#include "report_writer.h"
#include "reports.h"
#include "server.h"
#include "utf8.h"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

#define SEG_MAX 160 /* a path segment, decoded, with its NUL */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes the %XX of src[0, len) into dst (`cap` bytes, NUL included): its length, or -1 when
 * it does not fit or would hold a NUL byte, which would cut it short and so name something
 * else. A '%' without two hex digits stays as it is, as libmicrohttpd's own decoding leaves it. */
static int unescape(const char *src, size_t len, char *dst, size_t cap) {
    size_t j = 0;
    if (cap == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)src[i];
        if (c == '%' && i + 2 < len && hex_digit(src[i + 1]) >= 0 && hex_digit(src[i + 2]) >= 0) {
            c = hex_digit(src[i + 1]) * 16 + hex_digit(src[i + 2]);
            i += 2;
        }
        if (c == 0 || j + 1 >= cap) return -1;
        dst[j++] = (char)c;
    }
    dst[j] = 0;
    return (int)j;
}

/* Whether s is well-formed UTF-8, as PostgreSQL requires of every text parameter: any other
 * byte string a client sends is refused with a 400 before it reaches SQL, not with the 500
 * the database's refusal would make. */
static int utf8_valid(const char *s) {
    size_t len = strlen(s);
    return ld_utf8_prefix(s, len) == len;
}

/* s, to be quoted in an error message: a JSON string must be UTF-8 (json_pack refuses anything
 * else, and the answer would become a 500). */
static const char *shown(const char *s) {
    return utf8_valid(s) ? s : "(not UTF-8)";
}

/* libmicrohttpd hands the query's arguments over undecoded (http.c keeps what the client
 * sent, for the path's sake): they are decoded here, names included. */
typedef struct {
    const char *name;
    char *buf;
    size_t cap;
    int found; /* 1, 0 (absent, or given without a value), -1: did not fit or held a NUL, -2: not UTF-8 */
} arg_search;

static enum MHD_Result match_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    arg_search *a = cls;
    char name[64];
    /* the first argument of that name, compared as libmicrohttpd compares names */
    if (!key || unescape(key, strlen(key), name, sizeof name) < 0 || strcasecmp(name, a->name) != 0) return MHD_YES;
    if (value) a->found = unescape(value, strlen(value), a->buf, a->cap) < 0 ? -1 : utf8_valid(a->buf) ? 1 : -2;
    return MHD_NO;
}

/* The query argument `name`, decoded into buf: *out is buf, or NULL when it is absent or empty
 * (a dashboard may send every parameter, `?status=&kind=...`: an empty one asks for nothing,
 * where `version=` matched no group and the others were a 400). -1, with a 400 prepared, when
 * its value is over `cap` - 1 bytes, holds an escaped NUL or is not UTF-8. */
static int arg(ld_req *r, const char *name, char *buf, size_t cap, const char **out) {
    arg_search a = {name, buf, cap, 0};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, match_arg, &a);
    *out = a.found == 1 && buf[0] ? buf : NULL;
    if (a.found == -2) {
        ld_respond_error(r, 400, "bad_request", "%s must be UTF-8", name);
        return -1;
    }
    if (a.found < 0) {
        ld_respond_error(r, 400, "bad_request", "%s is over %zu bytes, or holds a %%00", name, cap - 1);
        return -1;
    }
    return 0;
}

/* Splits "/v1/apps/{app}/leaks/{sig}" into its segments, then decodes each (so a %2F is a '/'
 * inside its segment); -1 when there are more than `max`, or one is too long or holds a %00.
 * A trailing slash is ignored. */
static int split_path(const char *url, char seg[][SEG_MAX], int max) {
    int n = 0;
    const char *p = url;
    while (*p == '/') p++;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n == max || unescape(p, l, seg[n], SEG_MAX) < 0) return -1;
        n++;
        p += l;
        while (*p == '/') p++;
    }
    return n;
}

static void db_error(ld_req *r, ld_status st, const char *what) {
    if (st == LD_ERR_UNAVAILABLE) {
        ld_respond_error(r, 503, "unavailable", "the database is unreachable; retry later");
        ld_respond_retry_after(r, 5);
    } else {
        ld_respond_error(r, 500, "internal", "%s failed: %s", what, ld_strerror(st));
    }
}

/* The app of the path, as the key may see it: its id, or -1 with the answer prepared. */
static int64_t app_for(ld_req *r, ld_db *db, const char *slug) {
    if (r->who.app_id) {
        if (strcmp(slug, r->who.app_slug) != 0) {
            ld_respond_error(r, 403, "forbidden", "this key is for app \"%s\"", r->who.app_slug);
            return -1;
        }
        return r->who.app_id;
    }
    /* Not an app name (not UTF-8 among them, which PostgreSQL would refuse): no such app. */
    if (!ld_app_slug_valid(slug)) {
        ld_respond_error(r, 404, "not_found", "no app \"%s\"", shown(slug));
        return -1;
    }
    const char *p[1] = {slug};
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, "SELECT id FROM apps WHERE slug = $1", 1, p);
    if (st != LD_OK) {
        db_error(r, st, "looking up the app");
        return -1;
    }
    int64_t id = PQntuples(res) ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : -1;
    PQclear(res);
    if (id < 0) ld_respond_error(r, 404, "not_found", "no app \"%s\"", slug);
    return id;
}

#define GROUP_COLUMNS                                                                                               \
    "g.id, g.signature, g.short_description, g.leaking_class, g.kind, g.library_pattern, g.occurrences, "          \
    "g.leaked_objects, g.devices, " TS("g.first_seen") ", " TS("g.last_seen") ", g.first_version, g.last_version, " \
    "g.first_build, g.last_build, g.status, g.fixed_in_build, g.grouping_version, g.last_seen, g.representative"

static json_t *int_or_null(PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? json_null() : json_integer(strtoll(PQgetvalue(res, row, col), NULL, 10));
}

static json_t *group_json(PGresult *res, int i) {
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:I,s:I,s:I,s:s,s:s,s:s,s:s,s:I,s:I,s:s,s:o,s:i}",
                     "signature", PQgetvalue(res, i, 1), "short_description", PQgetvalue(res, i, 2),
                     "leaking_class", PQgetvalue(res, i, 3), "kind", PQgetvalue(res, i, 4),
                     "library_pattern", PQgetisnull(res, i, 5) ? json_null() : json_string(PQgetvalue(res, i, 5)),
                     "occurrences", (json_int_t)strtoll(PQgetvalue(res, i, 6), NULL, 10),
                     "leaked_objects", (json_int_t)strtoll(PQgetvalue(res, i, 7), NULL, 10),
                     "devices", (json_int_t)strtoll(PQgetvalue(res, i, 8), NULL, 10),
                     "first_seen", PQgetvalue(res, i, 9), "last_seen", PQgetvalue(res, i, 10),
                     "first_version", PQgetvalue(res, i, 11), "last_version", PQgetvalue(res, i, 12),
                     "first_build", (json_int_t)strtoll(PQgetvalue(res, i, 13), NULL, 10),
                     "last_build", (json_int_t)strtoll(PQgetvalue(res, i, 14), NULL, 10),
                     "status", PQgetvalue(res, i, 15), "fixed_in_build", int_or_null(res, i, 16),
                     "grouping_version", atoi(PQgetvalue(res, i, 17)));
}

/* Cursors are opaque to clients: hex of "<sort value>|<id>". */
static void encode_cursor(const char *value, const char *id, char *out, size_t cap) {
    char raw[256];
    snprintf(raw, sizeof raw, "%s|%s", value, id);
    size_t j = 0;
    for (size_t i = 0; raw[i] && j + 2 < cap; i++) j += (size_t)snprintf(out + j, cap - j, "%02x", (unsigned char)raw[i]);
    out[j] = 0;
}

static int decode_cursor(const char *c, char *value, size_t vcap, char *id, size_t icap) {
    char raw[256];
    size_t n = strlen(c);
    if (n % 2 || n / 2 >= sizeof raw) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (!isxdigit((unsigned char)c[2 * i]) || !isxdigit((unsigned char)c[2 * i + 1]) || sscanf(c + 2 * i, "%2x", &v) != 1) return -1;
        raw[i] = (char)v;
    }
    raw[n / 2] = 0;
    char *bar = strrchr(raw, '|');
    if (!bar || strlen(bar + 1) >= icap || (size_t)(bar - raw) >= vcap) return -1;
    *bar = 0;
    for (const char *p = bar + 1; *p; p++)
        if (!isdigit((unsigned char)*p)) return -1;
    memcpy(value, raw, (size_t)(bar - raw) + 1);
    memcpy(id, bar + 1, strlen(bar + 1) + 1);
    return 0;
}

/* Whether a cursor's value has the shape of the sort it continues: digits for occurrences, a
 * timestamp as PostgreSQL writes one ("2026-12-03 22:45:54.123456+00") for last_seen. What
 * passes is parsed by PostgreSQL; the shape keeps out the words it also takes for a time
 * ("now", "infinity", "epoch"), which made a cursor of no listing. */
static int cursor_value_fits(const char *v, int by_occ) {
    if (!isdigit((unsigned char)v[0]) || strlen(v) > 40) return 0;
    for (const char *p = v; *p; p++)
        if (!isdigit((unsigned char)*p) && (by_occ || !strchr(" -:.+", *p))) return 0;
    return by_occ || (strchr(v, '-') && strchr(v, ':'));
}

/* GET /v1/apps/{app}/leaks and /v1/apps/{app}/versions/{version}/leaks */
static void list_groups(ld_req *r, ld_db *db, int64_t app_id, const char *version_path, int only_new) {
    /* Each buffer holds any valid value, and more: a longer one is refused, not cut to fit. */
    char status_b[32], kind_b[32], version_b[1024], sort_b[32], limit_b[32], cursor_b[1024];
    const char *status, *kind, *version = version_path, *sort, *limit_s, *cursor;
    if (arg(r, "status", status_b, sizeof status_b, &status) || arg(r, "kind", kind_b, sizeof kind_b, &kind) ||
        (!version_path && arg(r, "version", version_b, sizeof version_b, &version)) ||
        arg(r, "sort", sort_b, sizeof sort_b, &sort) || arg(r, "limit", limit_b, sizeof limit_b, &limit_s) ||
        arg(r, "cursor", cursor_b, sizeof cursor_b, &cursor))
        return;
    if (version && !utf8_valid(version)) { /* the path's segment (the query's is checked by arg) */
        ld_respond_error(r, 400, "bad_request", "version must be UTF-8");
        return;
    }
    if (status && strcmp(status, "open") && strcmp(status, "ignored") && strcmp(status, "fixed") && strcmp(status, "regressed")) {
        ld_respond_error(r, 400, "bad_request", "status must be open, ignored, fixed or regressed");
        return;
    }
    if (kind && strcmp(kind, "application") && strcmp(kind, "library")) {
        ld_respond_error(r, 400, "bad_request", "kind must be application or library");
        return;
    }
    int by_occ = 0;
    if (sort && strcmp(sort, "last_seen") != 0) {
        if (strcmp(sort, "occurrences") != 0) {
            ld_respond_error(r, 400, "bad_request", "sort must be last_seen or occurrences");
            return;
        }
        by_occ = 1;
    }
    long limit = 50;
    if (limit_s) {
        char *end;
        limit = strtol(limit_s, &end, 10);
        /* digits only: strtol also takes a sign and leading spaces */
        if (*end || !isdigit((unsigned char)limit_s[0]) || limit < 1 || limit > 200) {
            ld_respond_error(r, 400, "bad_request", "limit must be 1 to 200");
            return;
        }
    }
    char cval[128] = "", cid[32] = "";
    if (cursor && decode_cursor(cursor, cval, sizeof cval, cid, sizeof cid) != 0) {
        ld_respond_error(r, 400, "bad_request", "invalid cursor");
        return;
    }
    if (cursor && !cursor_value_fits(cval, by_occ)) {
        ld_respond_error(r, 400, "bad_request", "invalid cursor for sort=%s (a cursor continues the listing it came from)",
                         by_occ ? "occurrences" : "last_seen");
        return;
    }
    char app[32], lim[32];
    snprintf(app, sizeof app, "%lld", (long long)app_id);
    snprintf(lim, sizeof lim, "%ld", limit + 1);
    const char *params[8] = {app, lim};
    int np = 2;
    char sql[2048];
    int n = snprintf(sql, sizeof sql, "SELECT " GROUP_COLUMNS " FROM leak_groups g WHERE g.app_id = $1");
    if (status) {
        params[np++] = status;
        n += snprintf(sql + n, sizeof sql - (size_t)n, " AND g.status = $%d", np);
    }
    if (kind) {
        params[np++] = kind;
        n += snprintf(sql + n, sizeof sql - (size_t)n, " AND g.kind = $%d", np);
    }
    if (version) {
        params[np++] = version;
        if (only_new) n += snprintf(sql + n, sizeof sql - (size_t)n, " AND g.first_version = $%d", np);
        else
            n += snprintf(sql + n, sizeof sql - (size_t)n,
                          " AND EXISTS (SELECT 1 FROM occurrences o WHERE o.group_id = g.id AND o.app_version = $%d)", np);
    }
    if (cursor) {
        params[np++] = cval;
        params[np++] = cid;
        if (by_occ) n += snprintf(sql + n, sizeof sql - (size_t)n, " AND (g.occurrences, g.id) < ($%d::bigint, $%d::bigint)", np - 1, np);
        else n += snprintf(sql + n, sizeof sql - (size_t)n, " AND (g.last_seen, g.id) < ($%d::timestamptz, $%d::bigint)", np - 1, np);
    }
    snprintf(sql + n, sizeof sql - (size_t)n, by_occ ? " ORDER BY g.occurrences DESC, g.id DESC LIMIT $2" : " ORDER BY g.last_seen DESC, g.id DESC LIMIT $2");
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, sql, np, params);
    if (st == LD_ERR_INVALID && cursor) {
        /* a well-formed cursor whose value is not of this sort (one from the other order, or
         * made by hand): PostgreSQL refused the cast */
        PQclear(res);
        ld_respond_error(r, 400, "bad_request", "invalid cursor for sort=%s (a cursor continues the listing it came from)",
                         by_occ ? "occurrences" : "last_seen");
        return;
    }
    if (st == LD_ERR_INVALID) {
        /* The database refused a value (a data exception): of the parameters, only the
         * client's version can be refused, everything else being checked above. */
        PQclear(res);
        ld_respond_error(r, 400, "bad_request", "invalid version (the database refused it)");
        return;
    }
    if (st != LD_OK) {
        db_error(r, st, "listing leaks");
        return;
    }
    json_t *items = json_array();
    int rows = PQntuples(res);
    for (int i = 0; i < rows && i < limit; i++) json_array_append_new(items, group_json(res, i));
    json_t *next = json_null();
    if (rows > limit) {
        char c[600];
        int last = (int)limit - 1;
        /* the raw timestamptz text (column 18) keeps microseconds for an exact cursor */
        encode_cursor(by_occ ? PQgetvalue(res, last, 6) : PQgetvalue(res, last, 18), PQgetvalue(res, last, 0), c, sizeof c);
        json_decref(next);
        next = json_string(c);
    }
    PQclear(res);
    ld_respond_json(r, 200, json_pack("{s:o,s:o}", "leaks", items, "next_cursor", next));
}

/* The stored representative trace, with its LeakCanary-style text. */
static json_t *trace_with_text(const char *rep_json) {
    json_error_t je;
    json_t *trace = json_loads(rep_json, 0, &je);
    if (!trace) return json_null();
    json_t *doc = json_pack("{s:i,s:[{s:s,s:s,s:i,s:[O]}]}", "format", 1, "leaks", "signature",
                            "0000000000000000000000000000000000000000", "kind", "application", "count", 1, "traces", trace);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    lw_leak_report *rep = NULL;
    char *rendered = NULL;
    /* with the limits the trace was stored under: the defaults' 10,000 elements left a longer
     * leak path of a heap report without its text (audit 2026-12-03) */
    static const lw_json_limits lim = LD_RESULT_LIMITS;
    if (text && lw_leak_report_from_json(text, strlen(text), &lim, &rep, NULL) == LW_OK && rep->leak_count)
        rendered = lw_trace_to_text(&rep->leaks[0].traces[0]);
    free(text);
    lw_leak_report_free(rep);
    json_t *out = json_pack("{s:o,s:s}", "json", trace, "text", rendered ? rendered : "(the trace could not be rendered)");
    free(rendered);
    return out;
}

static void get_group(ld_req *r, ld_db *db, int64_t app_id, const char *sig) {
    char app[32];
    snprintf(app, sizeof app, "%lld", (long long)app_id);
    const char *p[2] = {app, sig};
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, "SELECT " GROUP_COLUMNS " FROM leak_groups g WHERE g.app_id = $1 AND g.signature = $2", 2, p);
    if (st != LD_OK) {
        db_error(r, st, "reading the leak");
        return;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        ld_respond_error(r, 404, "not_found", "no leak with signature %s in this app", sig);
        return;
    }
    json_t *g = group_json(res, 0);
    json_object_set_new(g, "representative_trace", trace_with_text(PQgetvalue(res, 0, 19)));
    char gid[32];
    snprintf(gid, sizeof gid, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    const char *q[1] = {gid};
    st = ld_db_exec(db, &res,
                    "SELECT app_version, count(*), sum(leaked_objects), max(build) FROM occurrences WHERE group_id = $1 "
                    "GROUP BY app_version ORDER BY max(seen_at) DESC LIMIT 100", 1, q);
    if (st != LD_OK) {
        json_decref(g);
        db_error(r, st, "reading versions");
        return;
    }
    json_t *versions = json_array();
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(versions, json_pack("{s:s,s:I,s:I,s:I}", "app_version", PQgetvalue(res, i, 0), "occurrences",
                                                  (json_int_t)strtoll(PQgetvalue(res, i, 1), NULL, 10), "leaked_objects",
                                                  (json_int_t)strtoll(PQgetvalue(res, i, 2), NULL, 10), "build",
                                                  (json_int_t)strtoll(PQgetvalue(res, i, 3), NULL, 10)));
    PQclear(res);
    json_object_set_new(g, "versions", versions);
    st = ld_db_exec(db, &res,
                    "SELECT report_id, " TS("seen_at") ", app_version, build, install_id, leaked_objects FROM occurrences "
                    "WHERE group_id = $1 ORDER BY seen_at DESC LIMIT 20", 1, q);
    if (st != LD_OK) {
        json_decref(g);
        db_error(r, st, "reading occurrences");
        return;
    }
    json_t *recent = json_array();
    for (int i = 0; i < PQntuples(res); i++)
        json_array_append_new(recent, json_pack("{s:s,s:s,s:s,s:I,s:s,s:I}", "report_id", PQgetvalue(res, i, 0), "seen_at",
                                                PQgetvalue(res, i, 1), "app_version", PQgetvalue(res, i, 2), "build",
                                                (json_int_t)strtoll(PQgetvalue(res, i, 3), NULL, 10), "install_id",
                                                PQgetvalue(res, i, 4), "leaked_objects",
                                                (json_int_t)strtoll(PQgetvalue(res, i, 5), NULL, 10)));
    PQclear(res);
    json_object_set_new(g, "recent_occurrences", recent);
    ld_respond_json(r, 200, g);
}

/* PATCH body: {"status": "open" | "ignored" | "fixed"} */
#define PATCH_MAX 4096
typedef struct {
    char buf[PATCH_MAX];
    size_t len;
    int too_big;
    int64_t app_id;
    char sig[64];
} patch_state;

static int patch_chunk(ld_req *r, const char *data, size_t len) {
    patch_state *ps = r->state;
    if (len > sizeof ps->buf - ps->len) ps->too_big = 1;
    else {
        memcpy(ps->buf + ps->len, data, len);
        ps->len += len;
    }
    return 0;
}

static void patch_end(ld_req *r) {
    if (ld_req_off_loop(r, patch_end)) return;
    patch_state *ps = r->state;
    if (ps->too_big) {
        ld_respond_error(r, 413, "too_large", "the body is over 4 KiB");
        return;
    }
    json_error_t je;
    json_t *body = json_loadb(ps->buf, ps->len, 0, &je);
    const char *status = body ? json_string_value(json_object_get(body, "status")) : NULL;
    if (!status || (strcmp(status, "open") && strcmp(status, "ignored") && strcmp(status, "fixed"))) {
        json_decref(body);
        ld_respond_error(r, 400, "bad_request", "the body must be {\"status\": \"open\" | \"ignored\" | \"fixed\"}");
        return;
    }
    ld_db *db = ld_req_db(r, 5000, 5);
    if (db) {
        char app[32];
        snprintf(app, sizeof app, "%lld", (long long)ps->app_id);
        const char *p[3] = {app, ps->sig, status};
        PGresult *res = NULL;
        /* Fixed records the highest build seen: only a greater build can regress it. */
        ld_status st = ld_db_exec(db, &res,
                                  "UPDATE leak_groups SET status = $3, fixed_in_build = CASE WHEN $3 = 'fixed' THEN last_build END "
                                  "WHERE app_id = $1 AND signature = $2 RETURNING id",
                                  3, p);
        if (st != LD_OK) db_error(r, st, "updating the leak");
        else if (PQntuples(res) == 0) ld_respond_error(r, 404, "not_found", "no leak with signature %s in this app", ps->sig);
        else {
            ld_info("leak %s of app %lld marked %s", ps->sig, (long long)ps->app_id, status);
            get_group(r, db, ps->app_id, ps->sig);
        }
        PQclear(res);
        ld_pool_put(r->srv->pool, db);
    }
    json_decref(body);
}

static void patch_cleanup(ld_req *r) {
    free(r->state);
    r->state = NULL;
}

static const ld_body_handler patch_body = {patch_chunk, patch_end, patch_cleanup};

static int is_signature(const char *s) {
    if (strlen(s) != 40) return 0;
    for (int i = 0; i < 40; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')) return 0;
    return 1;
}

/* The API's paths, told apart by their segments alone: no key, no database. */
typedef enum {
    PATH_NONE,
    PATH_HEALTHZ,
    PATH_READYZ,
    PATH_UPLOAD, /* the /v1 paths from here on */
    PATH_REPORT,
    PATH_LEAKS,
    PATH_LEAK,
    PATH_VERSION_LEAKS,
} api_path;

/* What each serves: a 405 names them in its Allow header (RFC 9110 §15.5.6). */
static const char *const path_methods[] = {
    [PATH_NONE] = "",        [PATH_HEALTHZ] = "GET, HEAD", [PATH_READYZ] = "GET, HEAD",
    [PATH_UPLOAD] = "POST",  [PATH_REPORT] = "GET, HEAD",  [PATH_LEAKS] = "GET, HEAD",
    [PATH_LEAK] = "GET, HEAD, PATCH", [PATH_VERSION_LEAKS] = "GET, HEAD",
};

static api_path resolve(char seg[][SEG_MAX], int n) {
    if (n == 1 && strcmp(seg[0], "healthz") == 0) return PATH_HEALTHZ;
    if (n == 1 && strcmp(seg[0], "readyz") == 0) return PATH_READYZ;
    if (n < 2 || strcmp(seg[0], "v1") != 0) return PATH_NONE;
    if (strcmp(seg[1], "reports") == 0) return n == 2 ? PATH_UPLOAD : n == 3 ? PATH_REPORT : PATH_NONE;
    if (strcmp(seg[1], "apps") != 0) return PATH_NONE;
    if (n == 4 && strcmp(seg[3], "leaks") == 0) return PATH_LEAKS;
    if (n == 5 && strcmp(seg[3], "leaks") == 0) return PATH_LEAK;
    if (n == 6 && strcmp(seg[3], "versions") == 0 && strcmp(seg[5], "leaks") == 0) return PATH_VERSION_LEAKS;
    return PATH_NONE;
}

/* Whether `method` is in the ", "-separated list (method names are case-sensitive). */
static int serves(const char *list, const char *method) {
    size_t l = strlen(method);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == l && strncmp(p, method, l) == 0) return 1;
        if (!comma) break;
        for (p = comma + 1; *p == ' '; p++) {}
    }
    return 0;
}

/* A CORS preflight carries no key: it is answered on the /v1 paths, whatever the method it
 * asks about, 204 for an allowed Origin (http.c adds its Access-Control-Allow-Origin); a 403,
 * like every error, has its JSON body, for whoever reads it other than a browser. */
static void preflight(ld_req *r) {
    r->route = LD_ROUTE_OPTIONS;
    if (!r->origin[0]) {
        ld_respond_error(r, 403, "forbidden", "this Origin is not one of LEAKD_CORS_ORIGINS");
        return;
    }
    ld_respond_empty(r, 204);
    MHD_add_response_header(r->resp, "Access-Control-Allow-Methods", "GET, PATCH, POST, OPTIONS");
    MHD_add_response_header(r->resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r->resp, "Access-Control-Max-Age", "600");
}

static void readyz(ld_req *r) {
    /* A probe wants its answer within seconds, not after LEAKD_DB_TIMEOUT (30 s): a
     * database that does not answer SELECT 1 within 2 s is not ready. */
    ld_db *db = ld_pool_get_within(r->srv->pool, 2000, 2000);
    PGresult *res = NULL;
    ld_status st = db ? ld_db_exec(db, &res, "SELECT 1", 0, NULL) : LD_ERR_UNAVAILABLE;
    PQclear(res);
    ld_pool_put(r->srv->pool, db);
    if (st == LD_OK) ld_respond_json(r, 200, json_pack("{s:s}", "status", "ready"));
    else {
        ld_respond_json(r, 503, json_pack("{s:{s:s,s:s}}", "error", "code", "unavailable", "message", "the database is unreachable"));
        ld_respond_retry_after(r, 5);
    }
}

/* GET /v1/reports/{id} */
static void get_report(ld_req *r, const char *id) {
    if (!r->who.app_id) {
        /* A report id is unique only within its app, and this path names no app. */
        ld_respond_error(r, 400, "bad_request", "use a key of the report's app to read it");
        return;
    }
    ld_db *db = ld_req_db(r, 5000, 5);
    if (!db) return;
    json_t *obj = NULL;
    ld_status st = ld_report_get(db, r->who.app_id, id, &obj);
    ld_pool_put(r->srv->pool, db);
    if (st == LD_OK) ld_respond_json(r, 200, obj);
    else if (st == LD_ERR_NOT_FOUND || st == LD_ERR_INVALID) ld_respond_error(r, 404, "not_found", "no report %s in this app", shown(id));
    else db_error(r, st, "reading the report");
}

/* The metrics' route of a known path, whatever its answer: a refused request (a revoked key's
 * 401, a 403, a 405) was counted as "other" (audit, 2026-12-03), mixed with scanners' 404s. */
static ld_route route_of(api_path path, const char *method) {
    switch (path) {
    case PATH_HEALTHZ: return LD_ROUTE_HEALTHZ;
    case PATH_READYZ: return LD_ROUTE_READYZ;
    case PATH_UPLOAD: return LD_ROUTE_UPLOAD;
    case PATH_REPORT: return LD_ROUTE_REPORT;
    case PATH_LEAKS: return LD_ROUTE_LEAKS;
    case PATH_LEAK: return strcmp(method, "PATCH") == 0 ? LD_ROUTE_LEAK_PATCH : LD_ROUTE_LEAK;
    case PATH_VERSION_LEAKS: return LD_ROUTE_VERSION_LEAKS;
    default: return LD_ROUTE_OTHER;
    }
}

/* Runs again from the top after a wait for the key cache, and on a task thread for the
 * database: every step before those is cheap and repeatable. */
void ld_api_dispatch(ld_req *r) {
    char seg[6][SEG_MAX];
    int n = split_path(r->url, seg, 6);
    api_path path = n < 0 ? PATH_NONE : resolve(seg, n);
    r->route = route_of(path, r->method);
    /* Path, then method, then key: the first two are public (docs/api.md), so answering them
     * without a key tells nothing; whether an app, a report or a group exists is answered
     * only after the key. */
    if (path == PATH_NONE) {
        ld_respond_error(r, 404, "not_found", "no such endpoint: %s", shown(r->url));
        return;
    }
    if (path >= PATH_UPLOAD && strcmp(r->method, "OPTIONS") == 0) {
        preflight(r);
        return;
    }
    if (!serves(path_methods[path], r->method)) {
        ld_respond_error(r, 405, "method_not_allowed", "%s is not allowed on this path, which allows %s", shown(r->method),
                         path_methods[path]);
        MHD_add_response_header(r->resp, "Allow", path_methods[path]);
        return;
    }
    if (path == PATH_HEALTHZ) {
        ld_respond_json(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    if (path == PATH_READYZ) {
        if (!ld_req_off_loop(r, ld_api_dispatch)) readyz(r);
        return;
    }
    if (path == PATH_UPLOAD) {
        /* it authenticates, and waits for the key cache, by itself */
        ld_ingest_begin(r);
        return;
    }
    int patch = strcmp(r->method, "PATCH") == 0;
    /* On an event thread, a key not cached suspends the request until the keys are reloaded,
     * then it starts again here. */
    if (ld_req_auth(r, ld_api_dispatch) != 0) return;
    /* The rest asks PostgreSQL. */
    if (ld_req_off_loop(r, ld_api_dispatch)) return;
    if (path == PATH_REPORT) {
        get_report(r, seg[2]);
        return;
    }
    /* The advice names the kind of key that would do (docs/api.md, Keys): an ingest key may
     * read its app's reports, not its leak groups. */
    if (patch && r->who.kind != LD_KEY_ADMIN) {
        ld_respond_error(r, 403, "forbidden", "changing a leak's status needs an admin key");
        return;
    }
    if (r->who.kind == LD_KEY_INGEST) {
        ld_respond_error(r, 403, "forbidden",
                         "reading leak groups needs a read or admin key (an ingest key uploads reports and reads them)");
        return;
    }
    ld_db *db = ld_req_db(r, 5000, 5);
    if (!db) return;
    int64_t app_id = app_for(r, db, seg[2]);
    if (app_id < 0) {
        ld_pool_put(r->srv->pool, db);
        return;
    }
    if (path == PATH_LEAKS) {
        list_groups(r, db, app_id, NULL, 0);
    } else if (path == PATH_LEAK && !is_signature(seg[4])) {
        ld_respond_error(r, 400, "bad_request", "a signature is 40 lower-case hex digits");
    } else if (path == PATH_LEAK) {
        if (!patch) get_group(r, db, app_id, seg[4]);
        else if (r->content_length > PATCH_MAX) {
            /* judged on its Content-Length, as an upload: not read */
            ld_respond_error(r, 413, "too_large", "the body is over 4 KiB");
        } else {
            patch_state *ps = calloc(1, sizeof *ps);
            if (!ps) ld_respond_error(r, 503, "unavailable", "out of memory");
            else {
                ps->app_id = app_id;
                memcpy(ps->sig, seg[4], 41); /* is_signature: exactly 40 characters */
                r->state = ps;
                r->body = &patch_body;
            }
        }
    } else {
        char nw_b[32];
        const char *nw;
        if (arg(r, "new", nw_b, sizeof nw_b, &nw) == 0) {
            int only_new = nw && (strcmp(nw, "true") == 0 || strcmp(nw, "1") == 0);
            if (nw && !only_new && strcmp(nw, "false") != 0 && strcmp(nw, "0") != 0)
                ld_respond_error(r, 400, "bad_request", "new must be true, 1, false or 0");
            else
                list_groups(r, db, app_id, seg[4], only_new);
        }
    }
    ld_pool_put(r->srv->pool, db);
}

char *ld_metrics_render(ld_server *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ld_metrics *m = &s->metrics;
    ld_metrics_write(f, m);
    fprintf(f, "# HELP leakd_reports_received_total Uploads, by outcome.\n# TYPE leakd_reports_received_total counter\n");
    fprintf(f, "leakd_reports_received_total{outcome=\"accepted\"} %llu\n", (unsigned long long)atomic_load(&m->reports_accepted));
    fprintf(f, "leakd_reports_received_total{outcome=\"repeated\"} %llu\n", (unsigned long long)atomic_load(&m->reports_repeated));
    fprintf(f, "leakd_reports_received_total{outcome=\"refused\"} %llu\n", (unsigned long long)atomic_load(&m->reports_refused));
    fprintf(f, "# HELP leakd_upload_bytes_total Body bytes of accepted uploads.\n# TYPE leakd_upload_bytes_total counter\n");
    fprintf(f, "leakd_upload_bytes_total %llu\n", (unsigned long long)atomic_load(&m->upload_bytes));
    fprintf(f, "# HELP leakd_unavailable_total Requests answered 503.\n# TYPE leakd_unavailable_total counter\n");
    fprintf(f, "leakd_unavailable_total %llu\n", (unsigned long long)atomic_load(&m->unavailable));
    fprintf(f, "# HELP leakd_header_timeouts_total Connections closed for sending no whole request within "
               "LEAKD_HEADER_TIMEOUT (idle keep-alive ones among them).\n# TYPE leakd_header_timeouts_total counter\n");
    fprintf(f, "leakd_header_timeouts_total %llu\n", (unsigned long long)atomic_load(&m->header_timeouts));
    fprintf(f, "# HELP leakd_lingering_closes_total Connections answered before their body came (refused on the "
               "headers, or over LEAKD_CONNECTIONS_PER_ADDRESS), read to the end of what the client sent "
               "before closing.\n"
               "# TYPE leakd_lingering_closes_total counter\n");
    fprintf(f, "leakd_lingering_closes_total %llu\n", (unsigned long long)atomic_load(&m->lingering_closes));
    fprintf(f, "# HELP leakd_address_refusals_total Connections refused at once (429) because their client "
               "address already had LEAKD_CONNECTIONS_PER_ADDRESS open.\n"
               "# TYPE leakd_address_refusals_total counter\n");
    fprintf(f, "leakd_address_refusals_total %llu\n", (unsigned long long)atomic_load(&m->address_refusals));
    ld_report_writer_counters wc;
    ld_report_writer_stats(s->writer, &wc);
    fprintf(f, "# HELP leakd_traces_batches_total Transactions that stored traces reports (group commit).\n"
               "# TYPE leakd_traces_batches_total counter\nleakd_traces_batches_total %llu\n", wc.batches);
    fprintf(f, "# HELP leakd_traces_batched_reports_total Traces reports in those transactions (divided by the"
               " batches: the mean batch size).\n# TYPE leakd_traces_batched_reports_total counter\n"
               "leakd_traces_batched_reports_total %llu\n", wc.reports);
    fprintf(f, "# HELP leakd_traces_batch_duration_seconds Time of each traces batch's statement and commit"
               " (every request in the batch waited for it).\n# TYPE leakd_traces_batch_duration_seconds histogram\n");
    ld_histogram_write(f, "leakd_traces_batch_duration_seconds", "", ld_batch_bucket_le, LD_BATCH_BUCKETS - 1, wc.bucket,
                       wc.seconds_sum);
    ld_http_gauges g;
    ld_http_gauges_read(&g);
    fprintf(f, "# HELP leakd_uploads_waiting Uploads waiting, unread, for room in LEAKD_INGEST_MEMORY.\n"
               "# TYPE leakd_uploads_waiting gauge\nleakd_uploads_waiting %u\n", g.waiting);
    fprintf(f, "# HELP leakd_uploads_waited_total Uploads that waited for room in LEAKD_INGEST_MEMORY.\n"
               "# TYPE leakd_uploads_waited_total counter\nleakd_uploads_waited_total %llu\n", g.waited);
    fprintf(f, "# HELP leakd_ingest_memory_held_bytes Bytes of LEAKD_INGEST_MEMORY held by traces uploads now.\n"
               "# TYPE leakd_ingest_memory_held_bytes gauge\nleakd_ingest_memory_held_bytes %llu\n",
            (unsigned long long)g.ingest_held);
    fprintf(f, "# HELP leakd_ingest_memory_bytes LEAKD_INGEST_MEMORY (0: no limit).\n"
               "# TYPE leakd_ingest_memory_bytes gauge\nleakd_ingest_memory_bytes %llu\n",
            (unsigned long long)g.ingest_budget);
    fprintf(f, "# HELP leakd_connections_open API connections open now (those waiting in the listen backlog at "
               "the limit are not counted).\n# TYPE leakd_connections_open gauge\nleakd_connections_open %u\n",
            g.connections_open);
    fprintf(f, "# HELP leakd_connection_limit LEAKD_CONNECTION_LIMIT, as applied.\n"
               "# TYPE leakd_connection_limit gauge\nleakd_connection_limit %u\n", g.connection_limit);
    fprintf(f, "# HELP leakd_workers_alive Analysis worker processes running.\n# TYPE leakd_workers_alive gauge\n");
    fprintf(f, "leakd_workers_alive %d\n", atomic_load(&m->workers_alive));
    /* Within a scrape's timeout (Prometheus: 10 s) when PostgreSQL hangs, so that
     * leakd_database_up 0 is seen rather than the whole scrape lost. */
    ld_db *db = ld_pool_get_within(s->pool, 1000, 2000);
    PGresult *res = NULL;
    /* Every status, 0 included: a series that vanishes at 0 reads as "no data" on a dashboard
     * and never fires an alert on "queued > N for 10 min" going back down. */
    int up = db && ld_db_exec(db, &res,
                              "SELECT s, count(r.status) FROM unnest(ARRAY['queued', 'analyzing', 'done', 'failed']) s"
                              " LEFT JOIN reports r ON r.status = s GROUP BY s ORDER BY s",
                              0, NULL) == LD_OK;
    if (up) {
        fprintf(f, "# HELP leakd_reports Reports stored, by status.\n# TYPE leakd_reports gauge\n");
        for (int i = 0; i < PQntuples(res); i++)
            fprintf(f, "leakd_reports{status=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
        PQclear(res);
        res = NULL;
        /* The queue of this instance's workers: the others' are waiting for an instance of
         * their own blob store (docs/operations.md), which this one cannot stand in for. */
        const char *p[] = {s->store_id};
        up = ld_db_exec(db, &res,
                        "SELECT count(*) FROM reports WHERE status IN ('queued', 'analyzing')"
                        " AND (blob_store IS NULL OR blob_store = $1::uuid)",
                        1, p) == LD_OK;
        if (up)
            fprintf(f, "# HELP leakd_reports_claimable Reports queued or under analysis whose dump this instance's "
                       "workers can read (in its blob store, or stored before stores were recorded).\n"
                       "# TYPE leakd_reports_claimable gauge\nleakd_reports_claimable %s\n",
                    PQgetvalue(res, 0, 0));
    }
    fprintf(f, "# HELP leakd_database_up Whether PostgreSQL answered this scrape's query (1) or not (0).\n"
               "# TYPE leakd_database_up gauge\nleakd_database_up %d\n", up);
    PQclear(res);
    ld_pool_put(s->pool, db);
    fclose(f);
    return buf;
}
