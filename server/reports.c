/* reports.c — the reports table: idempotent inserts, the API's report object, retention. */
#define _POSIX_C_SOURCE 200809L

#include "reports.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouping.h"
#include "uuid.h"

ld_status ld_report_insert_queued(ld_db *db, const ld_report_in *in, int *created) {
    if (!db || !in || !created) return LD_ERR_INVALID;
    if (!in->mode || strcmp(in->mode, "heap") != 0) return LD_ERR_INVALID;
    ld_status st;
    PGresult *res = NULL;
    char app[32], build[32], bytes[32];

    *created = 0;
    if (!lw__uuid_valid(in->report_id) || !in->meta_json) return LD_ERR_INVALID;
    snprintf(app, sizeof app, "%" PRId64, in->app_id);
    snprintf(build, sizeof build, "%" PRId64, in->build);
    snprintf(bytes, sizeof bytes, "%" PRId64, in->blob_bytes);
    const char *p[] = {in->report_id, app, in->app_version ? in->app_version : "", build,
                       in->install_id ? in->install_id : "", in->meta_json, in->blob_path, bytes, in->blob_store};
    /* NOTIFY in the same statement: delivered at commit, it wakes an idle worker. */
    st = ld_db_exec(db, &res,
                    "WITH ins AS ("
                    "  INSERT INTO reports (id, app_id, mode, status, app_version, build, install_id, meta,"
                    "    blob_path, blob_bytes, blob_store)"
                    "  VALUES ($1::uuid, $2, 'heap', 'queued', $3, $4, $5, $6::json, $7, $8, $9::uuid)"
                    "  ON CONFLICT DO NOTHING RETURNING id),"
                    " notified AS (SELECT pg_notify('leakd_reports', id::text) FROM ins)"
                    " SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM notified),"
                    "  (SELECT app_id FROM reports WHERE id = $1::uuid)",
                    9, p);
    if (st != LD_OK) goto out;
    if (strcmp(PQgetvalue(res, 0, 0), "1") == 0) {
        *created = 1;
        goto out;
    }
    if (PQgetisnull(res, 0, 2)) {
        /* Inserted by a transaction that committed after this statement's snapshot. */
        PQclear(res);
        res = NULL;
        const char *q[] = {in->report_id};
        st = ld_db_exec(db, &res, "SELECT app_id FROM reports WHERE id = $1::uuid", 1, q);
        if (st != LD_OK) goto out;
        if (PQntuples(res) != 1) {
            st = LD_ERR_UNAVAILABLE; /* deleted meanwhile: let the client retry */
            goto out;
        }
        st = strcmp(PQgetvalue(res, 0, 0), app) == 0 ? LD_OK : LD_ERR_CONFLICT;
        goto out;
    }
    st = strcmp(PQgetvalue(res, 0, 2), app) == 0 ? LD_OK : LD_ERR_CONFLICT;

out:
    PQclear(res);
    return st;
}

/* A growing text buffer; `failed` sticks after an allocation failure. */
typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} text_buf;

static void buf_add(text_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(text_buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* `s` as a JSON string (it is UTF-8: it came out of a JSON document). */
static void buf_json_string(text_buf *b, const char *s) {
    buf_add(b, "\"", 1);
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && c >= 0x20 && c != '"' && c != '\\') continue;
        buf_add(b, run, (size_t)(s - run));
        if (!c) break;
        char esc[8];
        snprintf(esc, sizeof esc, c == '"' ? "\\\"" : c == '\\' ? "\\\\" : "\\u%04x", c);
        buf_str(b, esc);
        run = s + 1;
    }
    buf_add(b, "\"", 1);
}

static void buf_be32(text_buf *b, uint32_t v) {
    char x[4] = {(char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v};
    buf_add(b, x, 4);
}

/* One-dimensional arrays in PostgreSQL's binary format (array_recv): no quoting, no parsing. */
#define INT4_OID 23u
#define INT8_OID 20u
#define TEXT_OID 25u

typedef struct {
    text_buf b;
    size_t count;
    int has_null;
} bin_array;

static void arr_begin(bin_array *a, uint32_t oid) {
    buf_be32(&a->b, 1);   /* dimensions */
    buf_be32(&a->b, 0);   /* has NULLs: set at the end */
    buf_be32(&a->b, oid); /* element type */
    buf_be32(&a->b, 0);   /* length: set at the end */
    buf_be32(&a->b, 1);   /* lower bound */
}

/* An element of n bytes at s (NULL: a NULL element). */
static void arr_text_n(bin_array *a, const char *s, size_t n) {
    a->count++;
    if (!s) {
        a->has_null = 1;
        buf_be32(&a->b, UINT32_MAX); /* -1: NULL */
        return;
    }
    if (n > INT32_MAX) a->b.failed = 1;
    buf_be32(&a->b, (uint32_t)n);
    buf_add(&a->b, s, n);
}

static void arr_text(bin_array *a, const char *s) { arr_text_n(a, s, s ? strlen(s) : 0); }

static void arr_int8(bin_array *a, int64_t v) {
    a->count++;
    buf_be32(&a->b, 8);
    buf_be32(&a->b, (uint32_t)((uint64_t)v >> 32));
    buf_be32(&a->b, (uint32_t)v);
}

static void arr_int4(bin_array *a, int32_t v) {
    a->count++;
    buf_be32(&a->b, 4);
    buf_be32(&a->b, (uint32_t)v);
}

static void arr_end(bin_array *a) {
    if (a->b.failed || a->b.len < 20 || a->count > INT32_MAX || a->b.len > INT32_MAX) {
        a->b.failed = 1;
        return;
    }
    unsigned char *h = (unsigned char *)a->b.p;
    h[7] = (unsigned char)a->has_null;
    for (int k = 0; k < 4; k++) h[12 + k] = (unsigned char)(a->count >> (24 - 8 * k));
}

/* The parameters of insert_traces_sql, in its order: per report ($1-$9), per leak ($10-$17). */
enum { P_ID, P_APP, P_VERSION, P_BUILD, P_INSTALL, P_META, P_RESULT, P_NLEAKS, P_VRANK,
       P_LREP, P_SIG, P_KIND, P_DESCR, P_PATTERN, P_CLASS, P_COUNT, P_LIDX, P_TRACE, P_COUNT_OF };

typedef struct {
    bin_array a[P_COUNT_OF];
    text_buf ids; /* all the ids, as an array literal, for the repeats' lookup */
    size_t *take; /* the items sent, in batch order */
} batch_params;

static void batch_params_free(batch_params *bp) {
    for (int k = 0; k < P_COUNT_OF; k++) free(bp->a[k].b.p);
    free(bp->ids.p);
    free(bp->take);
}

/* The batch for insert_traces_sql. A report listed twice in the batch goes in once (its
 * first listing; the other finds it stored and is a repeat), and each report's leaks once per
 * signature (the first listing): the statement then needs neither DISTINCT nor sorts of its
 * own. Reports are ranked by (build, place) for the groups' first and last versions. */
static ld_status batch_build(const ld_traces_item *items, size_t n, batch_params *bp) {
    static const uint32_t oid[P_COUNT_OF] = {TEXT_OID, INT8_OID, TEXT_OID, INT8_OID, TEXT_OID, TEXT_OID, TEXT_OID,
                                             INT4_OID, INT4_OID, INT4_OID, TEXT_OID, TEXT_OID, TEXT_OID, TEXT_OID,
                                             TEXT_OID, INT8_OID, INT4_OID, TEXT_OID};
    size_t m = 0;
    memset(bp, 0, sizeof *bp);
    size_t *take = bp->take = malloc((n ? n : 1) * sizeof *take);
    if (!take) return LD_ERR_NOMEM;
    for (int k = 0; k < P_COUNT_OF; k++) arr_begin(&bp->a[k], oid[k]);
    buf_str(&bp->ids, "{");
    for (size_t i = 0; i < n; i++) {
        const ld_report_in *in = &items[i].in;
        if (!lw__uuid_valid(in->report_id) || !in->meta_json || !items[i].result_json || !items[i].result_json[0] ||
            !items[i].rep || in->blob_path || !in->mode || strcmp(in->mode, "traces") != 0)
            return LD_ERR_INVALID;
        buf_str(&bp->ids, i ? "," : "");
        buf_str(&bp->ids, in->report_id);
        size_t k = 0;
        while (k < m && strcmp(items[take[k]].in.report_id, in->report_id) != 0) k++;
        if (k == m) take[m++] = i;
    }
    buf_str(&bp->ids, "}");
    for (size_t t = 0; t < m; t++) {
        const ld_traces_item *it = &items[take[t]];
        const lw_leak_report *rep = it->rep;
        size_t rank = 1; /* 1 + the reports before it in (build, place) order */
        for (size_t u = 0; u < m; u++) {
            int64_t bu = items[take[u]].in.build;
            if (bu < it->in.build || (bu == it->in.build && u < t)) rank++;
        }
        arr_text(&bp->a[P_ID], it->in.report_id);
        arr_int8(&bp->a[P_APP], it->in.app_id);
        arr_text(&bp->a[P_VERSION], it->in.app_version ? it->in.app_version : "");
        arr_int8(&bp->a[P_BUILD], it->in.build);
        arr_text(&bp->a[P_INSTALL], it->in.install_id ? it->in.install_id : "");
        arr_text(&bp->a[P_META], it->in.meta_json);
        arr_text_n(&bp->a[P_RESULT], it->result_json, it->result_len ? it->result_len : strlen(it->result_json));
        arr_int4(&bp->a[P_NLEAKS], rep->leak_count > INT32_MAX ? INT32_MAX : (int32_t)rep->leak_count);
        arr_int4(&bp->a[P_VRANK], (int32_t)rank);
        for (size_t j = 0; j < rep->leak_count; j++) {
            const lw_leak *l = &rep->leaks[j];
            size_t e = 0;
            while (e < j && strcmp(rep->leaks[e].signature, l->signature) != 0) e++;
            if (e < j) continue; /* this signature was listed before in this report */
            /* its leaked objects are those of every listing (two leaks the device told apart
             * may have one signature here, where it is recomputed) */
            uint64_t count = l->count;
            for (e = j + 1; e < rep->leak_count; e++)
                if (strcmp(rep->leaks[e].signature, l->signature) == 0)
                    count = count + rep->leaks[e].count < count ? UINT64_MAX : count + rep->leaks[e].count;
            const lw_trace *tr = l->trace_count ? &l->traces[0] : NULL;
            arr_int4(&bp->a[P_LREP], (int32_t)(t + 1));
            arr_text(&bp->a[P_SIG], l->signature);
            arr_text(&bp->a[P_KIND], l->library ? "library" : "application");
            arr_text(&bp->a[P_DESCR], l->short_description);
            arr_text(&bp->a[P_PATTERN], l->library_pattern);
            arr_text(&bp->a[P_CLASS], tr && tr->element_count ? tr->elements[tr->element_count - 1].class_name : NULL);
            arr_int8(&bp->a[P_COUNT], count > INT64_MAX ? INT64_MAX : (int64_t)count);
            arr_int4(&bp->a[P_LIDX], (int32_t)j);
            /* The representative, should the group be new. Cut out of the stored result in SQL,
             * it costs a parse of the whole result per new group: fine for a report of one leak
             * (the usual one, and that parse is done only if its group is new), but a report of
             * 1,000 new leaks in 8 MB held PostgreSQL for two minutes. A report of several
             * leaks sends each leak's first trace instead (NULL: cut it out). */
            char *trace = rep->leak_count > 1 && tr ? lw_trace_to_json(tr) : NULL;
            if (rep->leak_count > 1 && tr && !trace) bp->a[P_TRACE].b.failed = 1;
            arr_text(&bp->a[P_TRACE], trace);
            free(trace);
        }
    }
    int failed = bp->ids.failed;
    for (int k = 0; k < P_COUNT_OF; k++) {
        arr_end(&bp->a[k]);
        failed |= bp->a[k].b.failed;
    }
    return failed ? LD_ERR_NOMEM : LD_OK;
}

/* The batch's reports inserted and the new ones grouped, in one statement, from arrays: per
 * report (id, app, version, build, install, meta, result, leak count, vrank) and per distinct
 * leak of each (its report's place, signature, kind, short description, library pattern,
 * class, count, index in its report, and its first trace when the report has several leaks).
 * Returns the new reports as "id|received_at". */
#define LEAK_AT(k) "($" #k "::text[])[p.rep_pos]"
static const char insert_traces_sql[] =
    "WITH ins AS ("
    "  INSERT INTO reports (id, app_id, mode, status, app_version, build, install_id, meta, result,"
    "    leaks_found, analyzed_at)"
    "  SELECT id::uuid, app_id, 'traces', 'done', version, build, install, meta::json, result, nleaks, now()"
    "  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[],"
    "    $8::int[]) AS b(id, app_id, version, build, install, meta, result, nleaks)"
    "  ON CONFLICT DO NOTHING RETURNING id, received_at),"
    " src AS ("
    "  SELECT $2[l.r] AS app_id, ins.id AS report_id, $3[l.r] AS app_version, $4[l.r] AS build,"
    "    $5[l.r] AS install_id, l.sig, l.objects, l.pos, ($9::int[])[l.r] AS vrank"
    "  FROM unnest($10::int[], $11::text[], $16::bigint[]) WITH ORDINALITY AS l(r, sig, objects, pos)"
    "  JOIN ins ON ins.id = ($1[l.r])::uuid),"
    LD_GROUPING_CTES(LEAK_AT(12), LEAK_AT(13), LEAK_AT(14), LEAK_AT(15),
                     "$3[array_position($9, p.first_r::int)]", "$3[array_position($9, p.last_r::int)]",
                     "COALESCE((" LEAK_AT(18) ")::json, json_extract_path($7[$10[p.rep_pos]]::json, 'leaks',"
                     " ($17::int[])[p.rep_pos]::text, 'traces', '0'))")
    " SELECT coalesce(array_agg(id::text || '|' ||"
    "   to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')), '{}') FROM ins";
#undef LEAK_AT

/* One attempt of ld_reports_insert_traces. The statement is its own transaction (one round
 * trip, where BEGIN and COMMIT were two more): it stores and groups all or nothing. */
static ld_status insert_traces_once(ld_db *db, ld_traces_item *items, size_t n, const batch_params *bp) {
    PGresult *res = NULL;
    ld_status st;

    for (size_t i = 0; i < n; i++) {
        items[i].st = LD_OK;
        items[i].created = 0;
        items[i].received_at[0] = '\0';
    }
    const char *p[P_COUNT_OF];
    int lengths[P_COUNT_OF], formats[P_COUNT_OF];
    for (int k = 0; k < P_COUNT_OF; k++) {
        p[k] = bp->a[k].b.p;
        lengths[k] = (int)bp->a[k].b.len;
        formats[k] = 1;
    }
    if ((st = ld_db_exec_params(db, &res, insert_traces_sql, P_COUNT_OF, p, lengths, formats)) != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = ld_db_fail(db, LD_ERR_INTERNAL, "storing traces returned %d rows", PQntuples(res));
        goto out;
    }
    /* {id|time,...}: ids and times hold no character the array text would quote. Committed:
     * a report found here is stored even if what follows fails. */
    size_t created = 0;
    const char *list = PQgetvalue(res, 0, 0);
    for (const char *e = list + 1; *e && *e != '}';) {
        const char *bar = strchr(e, '|'), *end = strpbrk(e, ",}");
        if (!bar || !end || bar > end || bar - e != 36) {
            st = ld_db_fail(db, LD_ERR_INTERNAL, "unexpected list of stored reports: %.80s", list);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (!items[i].created && strncmp(items[i].in.report_id, e, 36) == 0) {
                items[i].created = 1;
                snprintf(items[i].received_at, sizeof items[i].received_at, "%.*s", (int)(end - bar - 1), bar + 1);
                created++;
                break;
            }
        e = *end == ',' ? end + 1 : end;
    }
    PQclear(res);
    res = NULL;
    if (created < n) {
        /* Stored before (or by a transaction that committed meanwhile): whose is it? */
        const char *q[] = {bp->ids.p};
        st = ld_db_exec(db, &res, "SELECT id::text, app_id FROM reports WHERE id = ANY($1::uuid[])", 1, q);
        for (size_t i = 0; i < n; i++) {
            if (items[i].created) continue;
            items[i].st = LD_ERR_UNAVAILABLE; /* deleted meanwhile, or the lookup failed: let the client retry */
            for (int r = 0; st == LD_OK && r < PQntuples(res); r++)
                if (strcmp(items[i].in.report_id, PQgetvalue(res, r, 0)) == 0)
                    items[i].st = strtoll(PQgetvalue(res, r, 1), NULL, 10) == items[i].in.app_id ? LD_OK : LD_ERR_CONFLICT;
        }
        st = LD_OK;
    }

out:
    PQclear(res);
    return st;
}

ld_status ld_reports_insert_traces(ld_db *db, ld_traces_item *items, size_t n) {
    if (!db || (n && !items)) return LD_ERR_INVALID;
    if (n == 0) return LD_OK;
    batch_params bp;
    ld_status st = batch_build(items, n, &bp);
    if (st == LD_OK) st = insert_traces_once(db, items, n, &bp);
    if (ld_db_retryable(db, st)) st = insert_traces_once(db, items, n, &bp);
    batch_params_free(&bp);
    return st;
}

ld_status ld_report_insert_traces(ld_db *db, const ld_report_in *in, const lw_leak_report *rep, int *created) {
    if (!db || !in || !rep || !created) return LD_ERR_INVALID;
    *created = 0;
    ld_traces_item it = {.in = *in, .rep = rep};
    char *json = lw_leak_report_to_json(rep, 0);
    if (!json) return LD_ERR_NOMEM;
    it.result_json = json;
    ld_status st = ld_reports_insert_traces(db, &it, 1);
    free(json);
    if (st != LD_OK) return st;
    *created = it.created;
    return it.st;
}

char *ld_report_traces_json(const ld_traces_item *it, const char *app_slug, const lw_leak_report *rep) {
    text_buf b = {0};
    char num[96];
    buf_str(&b, "{\"id\":\"");
    buf_str(&b, it->in.report_id);
    buf_str(&b, "\",\"app\":");
    buf_json_string(&b, app_slug);
    buf_str(&b, ",\"status\":\"done\",\"mode\":\"traces\",\"received_at\":");
    buf_json_string(&b, it->received_at);
    buf_str(&b, ",\"app_version\":");
    buf_json_string(&b, it->in.app_version ? it->in.app_version : "");
    snprintf(num, sizeof num, ",\"build\":%" PRId64 ",\"attempts\":0,\"error\":null,\"analyzed_at\":", it->in.build);
    buf_str(&b, num);
    buf_json_string(&b, it->received_at);
    snprintf(num, sizeof num, ",\"leaks_found\":%zu,\"leaks\":[", rep->leak_count);
    buf_str(&b, num);
    for (size_t i = 0; i < rep->leak_count; i++) {
        const lw_leak *l = &rep->leaks[i];
        buf_str(&b, i ? ",{\"signature\":\"" : "{\"signature\":\"");
        buf_str(&b, l->signature); /* hex */
        buf_str(&b, l->library ? "\",\"kind\":\"library\",\"short_description\":"
                               : "\",\"kind\":\"application\",\"short_description\":");
        /* "" for none, as the stored result has it (and as the report reads back) */
        buf_json_string(&b, l->short_description ? l->short_description : "");
        snprintf(num, sizeof num, ",\"count\":%" PRIu64 "}", l->count > INT64_MAX ? (uint64_t)INT64_MAX : l->count);
        buf_str(&b, num);
    }
    buf_str(&b, "]}\n");
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

ld_status ld_report_get(ld_db *db, int64_t app_id, const char *report_id, json_t **out) {
    if (!db || !out) return LD_ERR_INVALID;
    *out = NULL;
    if (!lw__uuid_valid(report_id)) return LD_ERR_NOT_FOUND;
    ld_status st;
    PGresult *res = NULL;
    char app[32];
    snprintf(app, sizeof app, "%" PRId64, app_id);
    const char *p[] = {app, report_id};
    st = ld_db_exec(db, &res,
                    "SELECT json_build_object("
                    "  'id', r.id, 'app', a.slug, 'status', r.status, 'mode', r.mode,"
                    "  'received_at', to_char(r.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
                    "  'app_version', r.app_version, 'build', r.build, 'attempts', GREATEST(r.attempts - r.lost_leases, 0),"
                    "  'error', CASE WHEN r.status = 'failed' THEN r.error END,"
                    "  'analyzed_at', CASE WHEN r.status = 'done' THEN"
                    "    to_char(r.analyzed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') END,"
                    "  'leaks_found', CASE WHEN r.status = 'done' THEN r.leaks_found END,"
                    "  'leaks', CASE WHEN r.status = 'done' THEN COALESCE(("
                    "    SELECT json_agg(json_build_object('signature', l->'signature', 'kind', l->'kind',"
                    "      'short_description', l->'short_description', 'count', l->'count') ORDER BY n)"
                    "    FROM json_array_elements(r.result::json->'leaks') WITH ORDINALITY AS x(l, n)), '[]'::json)"
                    "    ELSE '[]'::json END)"
                    " FROM reports r JOIN apps a ON a.id = r.app_id"
                    " WHERE r.app_id = $1 AND r.id = $2::uuid",
                    2, p);
    if (st != LD_OK) goto out;
    if (PQntuples(res) != 1) {
        st = LD_ERR_NOT_FOUND;
        goto out;
    }
    json_error_t je;
    *out = json_loads(PQgetvalue(res, 0, 0), 0, &je);
    if (!*out) st = LD_ERR_INTERNAL;

out:
    PQclear(res);
    return st;
}

void ld_blob_paths_free(char **paths, size_t n) {
    if (!paths) return;
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* `then`, with $1 the ids of column 1 of `res`'s rows (uuids) as an array. */
static ld_status exec_on_ids(ld_db *db, const char *then, PGresult *res) {
    int rows = PQntuples(res);
    char *ids = malloc((size_t)rows * 37 + 3);
    if (!ids) return LD_ERR_NOMEM;
    size_t len = 0;
    ids[len++] = '{';
    for (int i = 0; i < rows; i++) {
        const char *id = PQgetvalue(res, i, 1);
        size_t l = strlen(id);
        if (l > 36) l = 36; /* a uuid's text */
        if (i) ids[len++] = ',';
        memcpy(ids + len, id, l);
        len += l;
    }
    ids[len++] = '}';
    ids[len] = 0;
    const char *p[] = {ids};
    PGresult *r2 = NULL;
    ld_status st = ld_db_exec(db, &r2, then, 1, p);
    PQclear(r2);
    free(ids);
    return st;
}

/* Runs `sql` (parameters p[0..np)) in a transaction and collects the non-NULL blob paths of
 * column 0 of its RETURNING rows: a list the caller deletes from disk after the commit. Then,
 * when not NULL, `then` in the same transaction with $1 the uuids of column 1: a statement of
 * its own, so that under READ COMMITTED it sees what was committed while `sql` waited for
 * its rows' locks. */
static ld_status purge_returning_paths(ld_db *db, const char *sql, int np, const char *const *p, const char *then,
                                       int64_t *rows_out, char ***blob_paths_out, size_t *nblobs) {
    *rows_out = 0;
    *blob_paths_out = NULL;
    *nblobs = 0;
    ld_status st;
    PGresult *res = NULL;
    char **paths = NULL;
    size_t n = 0;
    /* One transaction: if the path list cannot be built, nothing is changed (no orphan blob). */
    if ((st = ld_db_begin(db)) != LD_OK) return st;
    st = ld_db_exec(db, &res, sql, np, p);
    if (st == LD_OK && then && PQntuples(res) > 0) st = exec_on_ids(db, then, res);
    if (st != LD_OK) goto out;
    int rows = PQntuples(res);
    if (rows > 0) {
        paths = calloc((size_t)rows, sizeof *paths);
        if (!paths) {
            st = LD_ERR_NOMEM;
            goto out;
        }
    }
    for (int i = 0; i < rows; i++) {
        if (PQgetisnull(res, i, 0)) continue;
        paths[n] = strdup(PQgetvalue(res, i, 0));
        if (!paths[n]) {
            st = LD_ERR_NOMEM;
            goto out;
        }
        n++;
    }
    if ((st = ld_db_commit(db)) != LD_OK) goto out;
    *rows_out = rows;
    if (n) {
        *blob_paths_out = paths;
        *nblobs = n;
        paths = NULL;
    }

out:
    if (st != LD_OK) ld_db_rollback(db);
    ld_blob_paths_free(paths, n);
    PQclear(res);
    return st;
}

ld_status ld_retention_purge(ld_db *db, const char *store, int days, int64_t limit, int64_t *reports_deleted,
                             char ***blob_paths_out, size_t *nblobs) {
    if (!db || !lw__uuid_valid(store) || days < 1 || limit < 1 || !reports_deleted || !blob_paths_out || !nblobs)
        return LD_ERR_INVALID;
    char d[16], l[24];
    snprintf(d, sizeof d, "%d", days);
    snprintf(l, sizeof l, "%" PRId64, limit);
    const char *p[] = {d, l, store};
    /* Reports analyzed or failed: one queued or under analysis is left until it is (a worker
     * completing it waited for the DELETE, then found no row to complete, or its occurrences
     * were left behind). Their occurrences go in a second statement: one in the same, reading
     * with its snapshot, missed those a worker's completion committed while the DELETE waited
     * for its lock, and they stayed for ever (audit 2026-12-03). */
    return purge_returning_paths(db,
                                 "DELETE FROM reports WHERE id IN ("
                                 "   SELECT id FROM reports WHERE received_at < now() - make_interval(days => $1::int)"
                                 "   AND status IN ('done', 'failed')"
                                 "   AND (blob_path IS NULL OR blob_store IS NULL OR blob_store = $3::uuid)"
                                 "   ORDER BY received_at LIMIT $2::bigint FOR UPDATE SKIP LOCKED)"
                                 " RETURNING blob_path, id",
                                 3, p, "DELETE FROM occurrences WHERE report_id = ANY($1::uuid[])", reports_deleted,
                                 blob_paths_out, nblobs);
}

ld_status ld_failed_blobs_purge(ld_db *db, const char *store, int days, uint64_t max_bytes, char ***blob_paths_out,
                                size_t *nblobs) {
    if (!db || !lw__uuid_valid(store) || days < 0 || !blob_paths_out || !nblobs) return LD_ERR_INVALID;
    if (max_bytes > INT64_MAX) max_bytes = 0; /* bigint: no cap that large is a cap */
    int64_t rows;
    char d[16], b[24];
    snprintf(d, sizeof d, "%d", days);
    snprintf(b, sizeof b, "%" PRIu64, max_bytes);
    const char *p[] = {d, b, store};
    /* The newest failed dumps of the store are kept up to max_bytes; a window function cannot lock
     * its rows, hence `kept` then `old`, whose own conditions are checked again on the row it
     * locks. */
    return purge_returning_paths(db,
                                 "WITH kept AS (SELECT app_id, id, coalesce(analyzed_at, received_at) AS at,"
                                 "   sum(blob_bytes) OVER (ORDER BY coalesce(analyzed_at, received_at) DESC, id) AS newer"
                                 "   FROM reports WHERE status = 'failed' AND blob_path IS NOT NULL"
                                 "   AND (blob_store IS NULL OR blob_store = $3::uuid)),"
                                 " old AS (SELECT r.app_id, r.id, r.blob_path FROM reports r"
                                 "   JOIN kept k ON k.app_id = r.app_id AND k.id = r.id"
                                 "   WHERE r.status = 'failed' AND r.blob_path IS NOT NULL"
                                 "   AND (k.at < now() - make_interval(days => $1::int) OR ($2::bigint > 0 AND k.newer > $2::bigint))"
                                 "   FOR UPDATE OF r)"
                                 " UPDATE reports r SET blob_path = NULL FROM old"
                                 " WHERE r.app_id = old.app_id AND r.id = old.id RETURNING old.blob_path",
                                 3, p, NULL, &rows, blob_paths_out, nblobs);
}

ld_status ld_report_forget_blob(ld_db *db, int64_t app_id, const char *report_id) {
    char app[32];
    snprintf(app, sizeof app, "%lld", (long long)app_id);
    const char *p[] = {app, report_id};
    return ld_db_exec(db, NULL, "UPDATE reports SET blob_path = NULL WHERE app_id = $1 AND id = $2::uuid", 2, p);
}
