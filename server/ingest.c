/* ingest.c — POST /v1/reports. The key, Content-Type, Content-Length, quota and free disk
 * are judged from the headers; then the multipart body streams through: `meta` (buffered,
 * at most 64 KiB) and one data part — `heap` to a temp file in the data dir, `traces` to a
 * bounded buffer. leakd answers 202 only once the blob is fsynced and renamed and the
 * report row committed; on any failure the client gets an error and nothing stays behind. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "apps.h"
#include "blob_file.h"
#include "grouping.h"
#include "leakcore.h"
#include "log.h"
#include "multipart.h"
#include "report_writer.h"
#include "reports.h"
#include "server.h"
#include "uuid.h"

#define META_MAX (64u << 10)
/* The largest body a traces report may have: meta, the traces part, and the multipart
 * framing around them. Bodies up to this size share LEAKD_INGEST_MEMORY (ld_req_admit); a
 * longer one may carry a heap part only. */
static uint64_t traces_body_max(const ld_server *s) { return s->cfg.max_traces_bytes + META_MAX + (64u << 10); }
typedef struct {
    ld_mp *mp;
    int part;                 /* parts begun */
    int failed;               /* a response is prepared; the rest of the body is only drained */
    char want[8];             /* "heap" or "traces": the data part meta announced */
    /* meta */
    char *meta;               /* as sent, '\0'-terminated: stored as it is once checked */
    size_t meta_len;
    lw_report_meta meta_doc;  /* meta parsed (check_meta) */
    int meta_ok;
    char report_id[37];
    char app_version[129];
    long long build;
    char install_id[65];
    int64_t app_id;
    char app_slug[65];
    /* data */
    int in_data;
    ld_blob_file *blob;       /* the heap part's temp file */
    int blob_full;            /* its buffers are full: stop reading until it catches up */
    uint64_t data_bytes;
    char *traces;
    size_t traces_len, traces_cap;
    /* at the end */
    lw_leak_report *rep;      /* a traces report being stored, */
    char *result_json;        /* its trace JSON with the server's signatures */
    ld_traces_item item;      /* and what the report writer stores */
    ld_status store_st;
} ingest;

static void fail(ld_req *r, unsigned status, const char *code, const char *msg) {
    ingest *in = r->state;
    if (in->failed) return;
    in->failed = 1;
    ld_respond_error(r, status, code, "%s", msg);
}

/* Validates meta; returns 0 or prepares the answer. */
static int check_meta(ld_req *r) {
    ingest *in = r->state;
    char msg[600];
    lw_error e;
    lw_report_meta *m = &in->meta_doc;
    if (lw_report_meta_parse(in->meta, in->meta_len, m, &e) != LW_OK) {
        if (e.status == LW_ERR_NOMEM) {
            fail(r, 503, "unavailable", "out of memory");
        } else {
            snprintf(msg, sizeof msg, "meta: %s", e.message); /* "not a JSON object", or where it is not JSON */
            fail(r, 400, "bad_meta", msg);
        }
        return -1;
    }
    in->meta_ok = 1;
    const char *id = m->report_id, *app = m->app, *mode = m->mode;
    if (!id || !lw__uuid_valid(id)) {
        fail(r, 400, "bad_meta", "meta.report_id must be a lower-case UUID");
        return -1;
    }
    if (!app) {
        fail(r, 400, "bad_meta", "meta.app is required");
        return -1;
    }
    if (!mode || (strcmp(mode, "heap") != 0 && strcmp(mode, "traces") != 0)) {
        fail(r, 400, "bad_meta", "meta.mode must be \"heap\" or \"traces\"");
        return -1;
    }
    /* Required, as the wire protocol says: a report without them would still be grouped, and
     * its "" and build 0 would become the group's first version, taking the group out of
     * what that release brought in (`new=true`). An install id is not: an app may choose not
     * to send one, and its reports then count no device. */
    if (!m->app_version || m->app_version_len == 0 || m->app_version_len > 128) {
        fail(r, 400, "bad_meta", "meta.app_version must be a string of 1-128 bytes");
        return -1;
    }
    if (!m->has_build || m->build < 0) {
        fail(r, 400, "bad_meta", "meta.build must be a non-negative integer");
        return -1;
    }
    const char *install = m->install_id;
    if (m->install_id_bad) {
        fail(r, 400, "bad_meta", "meta.device must be an object, and its install_id a string");
        return -1;
    }
    if (install && m->install_id_len > 64) {
        fail(r, 400, "bad_meta", "meta.device.install_id must be at most 64 bytes");
        return -1;
    }
    snprintf(in->report_id, sizeof in->report_id, "%s", id);
    snprintf(in->app_version, sizeof in->app_version, "%s", m->app_version);
    in->build = m->build;
    snprintf(in->install_id, sizeof in->install_id, "%s", install ? install : "");
    snprintf(in->want, sizeof in->want, "%s", mode);
    if (!r->who.app_id) {
        /* An admin key of every app: which one is looked up at the end, off the event loop
         * (resolve_app). A name no app can have is refused whole, not cut to app_slug's 64
         * bytes, which could name another app. */
        if (!ld_app_slug_valid(app)) {
            fail(r, 400, "bad_meta", "meta.app must be an app name: 1-64 characters a-z 0-9 . _ -, starting with a letter or digit");
            return -1;
        }
        snprintf(in->app_slug, sizeof in->app_slug, "%s", app);
    } else {
        if (strcmp(app, r->who.app_slug) != 0) {
            /* quoted whole or not at all: cut, it could end inside a UTF-8 sequence, which no
             * JSON string may hold */
            snprintf(msg, sizeof msg, "this key uploads for app \"%s\", not \"%s\"", r->who.app_slug,
                     strlen(app) <= LD_SLUG_MAX ? app : "(a name over 64 bytes)");
            fail(r, 403, "forbidden", msg);
            return -1;
        }
        in->app_id = r->who.app_id;
        snprintf(in->app_slug, sizeof in->app_slug, "%s", r->who.app_slug);
    }
    return 0;
}

static int on_part_begin(void *user, const char *name, const char *ctype) {
    ld_req *r = user;
    ingest *in = r->state;
    in->part++;
    if (in->failed) return 0;
    char msg[256];
    if (in->part == 1) {
        if (strcmp(name, "meta") != 0) {
            snprintf(msg, sizeof msg, "the first part must be \"meta\", not \"%.40s\"", name);
            fail(r, 400, "bad_multipart", msg);
        } else if (strcmp(ctype, "application/json") != 0) {
            fail(r, 415, "unsupported_media_type", "the meta part must be application/json");
        }
        return 0;
    }
    if (in->part > 2) {
        fail(r, 400, "bad_multipart", "exactly one data part (heap or traces) must follow meta");
        return 0;
    }
    if (strcmp(name, "heap") != 0 && strcmp(name, "traces") != 0) {
        snprintf(msg, sizeof msg, "unknown part \"%.40s\": expected heap or traces", name);
        fail(r, 400, "bad_multipart", msg);
        return 0;
    }
    if (strcmp(name, in->want) != 0) {
        snprintf(msg, sizeof msg, "meta.mode is \"%s\" but the data part is \"%s\"", in->want, name);
        fail(r, 400, "mode_mismatch", msg);
        return 0;
    }
    const char *want_type = strcmp(name, "heap") == 0 ? "application/zstd" : "application/json";
    if (strcmp(ctype, want_type) != 0) {
        snprintf(msg, sizeof msg, "the %s part must be %s, not \"%.60s\"", name, want_type, ctype);
        fail(r, 415, "unsupported_media_type", msg);
        return 0;
    }
    if (strcmp(name, "traces") == 0 && r->content_length > traces_body_max(r->srv)) {
        snprintf(msg, sizeof msg, "a traces report's body is at most %llu bytes (LEAKD_MAX_TRACES_BYTES + 128 KiB)",
                 (unsigned long long)traces_body_max(r->srv));
        fail(r, 413, "too_large", msg);
        return 0;
    }
    in->in_data = 1;
    if (strcmp(name, "heap") == 0) {
        char err[1400];
        in->blob = ld_blob_file_create(r->srv->blobs, err, sizeof err);
        if (!in->blob) {
            ld_error("%s", err);
            fail(r, 503, "unavailable", "the server cannot store the upload now; retry later");
            ld_respond_retry_after(r, 30);
        }
    }
    return 0;
}

static int on_part_data(void *user, const void *data, size_t len) {
    ld_req *r = user;
    ingest *in = r->state;
    if (in->failed) return 0;
    if (in->part == 1) {
        if (in->meta_len + len > META_MAX) {
            fail(r, 413, "too_large", "the meta part is over 64 KiB");
            return 0;
        }
        char *n = realloc(in->meta, in->meta_len + len + 1);
        if (!n) {
            fail(r, 503, "unavailable", "out of memory");
            return 0;
        }
        in->meta = n;
        memcpy(in->meta + in->meta_len, data, len);
        in->meta_len += len;
        in->meta[in->meta_len] = '\0';
        return 0;
    }
    if (!in->in_data) return 0;
    if (in->blob) {
        char err[1400];
        int rc = ld_blob_file_write(in->blob, data, len, err, sizeof err);
        if (rc < 0) {
            ld_error("%s", err);
            fail(r, 503, "unavailable", "the server cannot store the upload now; retry later");
            ld_respond_retry_after(r, 60);
            return 0;
        }
        in->blob_full |= rc == LD_BLOB_FULL;
        in->data_bytes += len;
        return 0;
    }
    if (in->traces_len + len > r->srv->cfg.max_traces_bytes) {
        fail(r, 413, "too_large", "the traces part is over the server's limit (LEAKD_MAX_TRACES_BYTES)");
        return 0;
    }
    if (in->traces_len + len + 1 > in->traces_cap) {
        /* Sized once from Content-Length (which bounds the part), not regrown chunk by chunk. */
        size_t cap = in->traces_len + len + 1;
        if (cap < r->content_length + 1) cap = (size_t)r->content_length + 1;
        char *n = realloc(in->traces, cap);
        if (!n) {
            fail(r, 503, "unavailable", "out of memory");
            return 0;
        }
        in->traces = n;
        in->traces_cap = cap;
    }
    memcpy(in->traces + in->traces_len, data, len);
    in->traces_len += len;
    in->data_bytes += len;
    return 0;
}

static int on_part_end(void *user) {
    ld_req *r = user;
    ingest *in = r->state;
    if (in->failed) return 0;
    if (in->part == 1) check_meta(r);
    return 0;
}

static const ld_mp_callbacks mp_callbacks = {on_part_begin, on_part_data, on_part_end};

static void blob_caught_up(void *arg) { ld_req_resume(arg); }

static int on_chunk(ld_req *r, const char *data, size_t len) {
    ingest *in = r->state;
    if (in->failed) return 0; /* drain: the answer is decided */
    if (ld_mp_feed(in->mp, data, len) < 0 && !in->failed) fail(r, 400, "bad_multipart", ld_mp_error(in->mp));
    if (in->blob_full && !in->failed) {
        /* The disk is behind: read no more of this connection until it catches up. */
        in->blob_full = 0;
        r->suspended_at_end = 0;
        if (ld_req_suspend(r, NULL) == 0) ld_blob_file_wait(in->blob, blob_caught_up, r);
        else in->failed = 1; /* shutting down: the 503 is prepared */
    }
    return 0;
}

static void cleanup(ld_req *r) {
    ingest *in = r->state;
    if (!in) return;
    ld_blob_file_free(in->blob);
    ld_mp_free(in->mp);
    lw_report_meta_free(&in->meta_doc);
    free(in->meta);
    free(in->traces);
    free(in->result_json);
    lw_leak_report_free(in->rep);
    free(in);
    r->state = NULL;
}

/* Counts the answer prepared for a report (202 for a new one, 200 for a repeat) and notes it
 * on the request's log line. */
static void answered(ld_req *r, int created) {
    ingest *in = r->state;
    atomic_fetch_add(created ? &r->srv->metrics.reports_accepted : &r->srv->metrics.reports_repeated, 1);
    if (created) atomic_fetch_add(&r->srv->metrics.upload_bytes, r->body_bytes);
    /* On the request's own line (one line a request): a second line per report cost a
     * formatted write(2) for each of thousands a second. */
    char note[sizeof r->note];
    snprintf(note, sizeof note, "report=%s %s %s%s%.90s", in->report_id, in->want, created ? "accepted" : "repeat",
             r->note[0] ? " " : "", r->note);
    memcpy(r->note, note, sizeof note);
}

/* Answers with the stored report object: 202 for a new one, 200 for a repeat. */
static void answer_report(ld_req *r, ld_db *db, int created) {
    ingest *in = r->state;
    json_t *obj = NULL;
    ld_status st = ld_report_get(db, in->app_id, in->report_id, &obj);
    if (st != LD_OK) {
        ld_respond_error(r, 503, "unavailable", "stored, but the report cannot be read back now");
        ld_respond_retry_after(r, 5);
        return;
    }
    ld_respond_json(r, created ? 202 : 200, obj);
    answered(r, created);
}

static void store_heap_locked(ld_req *r, ld_db *db, ld_report_in *rin) {
    ingest *in = r->state;
    char dir[1300], final[1400], rel[180];
    snprintf(rel, sizeof rel, "blobs/%s/%s.hprof.zst", in->app_slug, in->report_id);
    snprintf(dir, sizeof dir, "%s/%s", r->srv->blob_dir, in->app_slug);
    snprintf(final, sizeof final, "%s/%s", r->srv->cfg.data_dir, rel);
    /* A repeat of a stored report: answer with it, store nothing. */
    json_t *existing = NULL;
    if (ld_report_get(db, in->app_id, in->report_id, &existing) == LD_OK) {
        json_decref(existing);
        answer_report(r, db, 0);
        return;
    }
    char err[2900];
    if (ld_blob_file_sync(in->blob, err, sizeof err) != 0) {
        ld_error("%s", err);
        ld_respond_error(r, 503, "unavailable", "the server cannot store the upload now; retry later");
        ld_respond_retry_after(r, 60);
        return;
    }
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        ld_error("mkdir %s: %s", dir, strerror(errno));
        ld_respond_error(r, 503, "unavailable", "the server cannot store the upload now; retry later");
        ld_respond_retry_after(r, 60);
        return;
    }
    /* An orphan blob of the same id (a crash between rename and commit) is replaced; another
     * upload of this report cannot be between its check and its commit (store_heap's lock). */
    if (ld_blob_file_rename(in->blob, final, dir, err, sizeof err) != 0) {
        ld_error("%s", err);
        ld_respond_error(r, 503, "unavailable", "the server cannot store the upload now; retry later");
        ld_respond_retry_after(r, 60);
        return;
    }
    rin->blob_path = rel;
    rin->blob_store = r->srv->store_id;
    rin->blob_bytes = (int64_t)in->data_bytes;
    int created = 0;
    ld_status st = ld_report_insert_queued(db, rin, &created);
    if (st == LD_OK) {
        /* Not created under the lock: the row is a traces report of this id, stored between
         * the check above and the insert (the report writer takes no lock). No row names the
         * blob, which stayed in blobs/ for ever (audit 2026-12-04). */
        if (!created) unlink(final);
        answer_report(r, db, created);
        return;
    }
    /* Not committed: the blob must not stay behind (a retry will bring it again). */
    unlink(final);
    if (st == LD_ERR_CONFLICT) {
        ld_respond_error(r, 409, "conflict", "this report_id belongs to another app");
    } else {
        ld_respond_error(r, 503, "unavailable", "the report could not be recorded (%s); retry later", ld_strerror(st));
        ld_respond_retry_after(r, 10);
    }
}

/* Two uploads of one report at once (a retry while the first is still being stored) both saw
 * no row, then both renamed onto the same blob path: the second's failed insert deleted the
 * first's committed blob, or its rename left a file no row names once a worker had analyzed
 * and deleted the first's. A session lock on (app, report id) makes the check, the rename and
 * the commit one step per report; the second then finds the first's row and answers 200. */
static void store_heap(ld_req *r, ld_db *db, ld_report_in *rin) {
    ingest *in = r->state;
    char key[200];
    snprintf(key, sizeof key, "leakd heap %lld/%s", (long long)in->app_id, in->report_id);
    const char *p[] = {key};
    if (ld_db_exec(db, NULL, "SELECT pg_advisory_lock(hashtextextended($1, 0))", 1, p) != LD_OK) {
        ld_respond_error(r, 503, "unavailable", "the database is unreachable; retry later");
        ld_respond_retry_after(r, 10);
        return;
    }
    store_heap_locked(r, db, rin);
    /* A connection that failed meanwhile lost its session, and the lock with it. */
    ld_db_exec(db, NULL, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", 1, p);
}

/* The answer to a traces report, once the report writer is done with it. */
static void traces_answer(ld_req *r) {
    ingest *in = r->state;
    ld_status st = in->store_st;
    if (st == LD_OK) st = in->item.st;
    if (st == LD_OK && in->item.created) {
        char *text = ld_report_traces_json(&in->item, in->app_slug, in->rep);
        if (!text) {
            ld_respond_error(r, 503, "unavailable", "stored, but out of memory; retry to read it");
            return;
        }
        ld_respond_json_text(r, 202, text);
        answered(r, 1);
    } else if (st == LD_OK) {
        if (ld_req_off_loop(r, traces_answer)) return; /* a repeat: read back */
        ld_db *db = ld_req_db(r, 10000, 10);
        if (db) answer_report(r, db, 0);
        ld_pool_put(r->srv->pool, db);
    } else if (st == LD_ERR_CONFLICT) {
        ld_respond_error(r, 409, "conflict", "this report_id belongs to another app");
    } else {
        ld_respond_error(r, 503, "unavailable", "the report could not be recorded (%s); retry later", ld_strerror(st));
        ld_respond_retry_after(r, 10);
    }
}

/* "batch_wait=..ms batch=..ms" on the request's log line: a slow answer tells whether it
 * waited for a writer or for its batch's commit (a slow disk). */
static void note_batch(ld_req *r, const ld_writer_timing *t) {
    if (t->waited_s <= 0 && t->stored_s <= 0) return; /* never queued (the writer is stopping) */
    snprintf(r->note, sizeof r->note, "batch_wait=%.1fms batch=%.1fms", t->waited_s * 1e3, t->stored_s * 1e3);
}

/* Called by a report writer thread. */
static void traces_stored(void *arg, ld_status st, const ld_writer_timing *t) {
    ld_req *r = arg;
    ingest *in = r->state;
    in->store_st = st;
    note_batch(r, t);
    ld_req_resume(r);
}

/* Validated here, stored by the report writer with whatever else is waiting (one commit for
 * the batch) while the connection is suspended; the 202 is built from memory, a repeat is
 * read back. */
static void store_traces(ld_req *r, ld_report_in *rin) {
    ingest *in = r->state;
    lw_error err = {0};
    lw_json_limits lim = {r->srv->cfg.max_traces_bytes, 1000, 100, 10000, 64 << 10};
    lw_status parsed = lw_leak_report_from_json(in->traces ? in->traces : "", in->traces_len, &lim, &in->rep, &err);
    /* Not needed once parsed (the stored JSON is written from the parsed report): not held
     * while the report waits for its batch. */
    free(in->traces);
    in->traces = NULL;
    if (parsed != LW_OK) {
        ld_respond_error(r, err.status == LW_ERR_LIMIT ? 413 : 400, "bad_traces", "%s", err.message);
        return;
    }
    char msg[512];
    ld_status st = ld_trace_validate(in->rep, msg, sizeof msg);
    if (st != LD_OK) {
        ld_respond_error(r, 400, "bad_traces", "%s", msg);
        return;
    }
    in->result_json = lw_leak_report_to_json(in->rep, 0);
    if (!in->result_json) {
        ld_respond_error(r, 503, "unavailable", "out of memory");
        return;
    }
    in->item = (ld_traces_item){.in = *rin, .rep = in->rep, .result_json = in->result_json,
                                .result_len = strlen(in->result_json)};
    if (r->on_task) {
        ld_writer_timing t = {0};
        in->store_st = ld_report_writer_store(r->srv->writer, &in->item, &t);
        note_batch(r, &t);
        traces_answer(r);
        return;
    }
    if (ld_req_suspend(r, traces_answer) != 0) return;
    st = ld_report_writer_submit(r->srv->writer, &in->item, traces_stored, r);
    if (st != LD_OK) {
        in->store_st = st;
        ld_req_resume(r);
    }
}

/* An admin key of every app may upload for any app: which, looked up now (off the event
 * loop). */
static int resolve_app(ld_req *r) {
    ingest *in = r->state;
    if (in->app_id) return 0;
    ld_db *db = ld_pool_get(r->srv->pool, 5000);
    ld_status st = db ? ld_app_id(db, in->app_slug, &in->app_id) : LD_ERR_UNAVAILABLE;
    ld_pool_put(r->srv->pool, db);
    if (st == LD_ERR_NOT_FOUND) {
        ld_respond_error(r, 403, "forbidden", "no app \"%.64s\"", in->app_slug);
        return -1;
    }
    if (st != LD_OK) {
        ld_respond_error(r, 503, "unavailable", "the database is unreachable; retry later");
        ld_respond_retry_after(r, 10);
        return -1;
    }
    return 0;
}

static void on_end(ld_req *r) {
    ingest *in = r->state;
    if (in->failed) return;
    /* A heap's fsync, rename and insert, and an admin key's app lookup, block: off the loop. */
    if ((strcmp(in->want, "heap") == 0 || !in->app_id) && ld_req_off_loop(r, on_end)) return;
    if (ld_mp_finish(in->mp) != 0) {
        fail(r, 400, "bad_multipart", ld_mp_error(in->mp));
        return;
    }
    if (!in->meta_ok) {
        fail(r, 400, "bad_multipart", "the meta part is missing");
        return;
    }
    if (in->part < 2) {
        fail(r, 400, "bad_multipart", "the data part (heap or traces) is missing");
        return;
    }
    if (resolve_app(r) != 0) return;
    /* Stored as sent: check_meta has parsed it (no NUL, valid UTF-8, no duplicate key), and
     * writing it out again cost as much as reading it. */
    ld_report_in rin = {in->report_id, in->app_id, in->want, in->app_version, in->build, in->install_id, in->meta, NULL, NULL, 0};
    if (strcmp(in->want, "traces") == 0) {
        store_traces(r, &rin);
    } else {
        ld_db *db = ld_req_db(r, 10000, 10);
        if (db) store_heap(r, db, &rin);
        ld_pool_put(r->srv->pool, db);
    }
}

static const ld_body_handler ingest_body = {on_chunk, on_end, cleanup};

/* The multipart boundary from Content-Type: 0, or -1 with the 415 prepared. Judged from the
 * headers, and again once the body may be read (the boundary is not kept while it waits). */
static int body_boundary(ld_req *r, char *boundary, size_t cap) {
    const char *ctype = ld_req_header(r, "Content-Type");
    if (ctype && ld_mp_boundary(ctype, boundary, cap) == 0) return 0;
    ld_respond_error(r, 415, "unsupported_media_type", "the body must be multipart/form-data with a boundary");
    return -1;
}

/* Once the body may be read (ld_req_admit): its handler. */
static void read_body(ld_req *r) {
    char boundary[80];
    if (body_boundary(r, boundary, sizeof boundary) != 0) return;
    ingest *in = calloc(1, sizeof *in);
    if (!in) {
        ld_respond_error(r, 503, "unavailable", "out of memory");
        return;
    }
    r->state = in;
    r->body = &ingest_body;
    in->mp = ld_mp_new(boundary, NULL, &mp_callbacks, r);
    if (!in->mp) fail(r, 503, "unavailable", "out of memory");
}

void ld_ingest_begin(ld_req *r) {
    ld_server *s = r->srv;
    if (ld_req_auth(r, ld_ingest_begin) != 0) return;
    if (r->who.kind == LD_KEY_READ) {
        ld_respond_error(r, 403, "forbidden", "a read key cannot upload reports; use the app's ingest key");
        return;
    }
    char boundary[80];
    if (body_boundary(r, boundary, sizeof boundary) != 0) return;
    /* A body framed by Transfer-Encoding is read by it, whatever Content-Length says: the
     * length judged below would not be the length read (RFC 9112 §6.3 lets a server refuse). */
    if (ld_req_header(r, "Transfer-Encoding")) {
        ld_respond_error(r, 411, "length_required",
                         "a body sent with Transfer-Encoding (chunked) is not accepted; send Content-Length");
        return;
    }
    const char *clen = ld_req_header(r, "Content-Length");
    if (!clen) {
        ld_respond_error(r, 411, "length_required", "Content-Length is required");
        return;
    }
    char *end;
    errno = 0;
    unsigned long long length = strtoull(clen, &end, 10);
    if (errno || end == clen || *end) {
        ld_respond_error(r, 400, "bad_request", "Content-Length is not a number");
        return;
    }
    if (length > s->cfg.max_upload_bytes) {
        ld_respond_error(r, 413, "too_large", "the body is %llu bytes; this server accepts at most %llu", length,
                         (unsigned long long)s->cfg.max_upload_bytes);
        return;
    }
    if (s->cfg.quota_bytes_per_day && length > s->cfg.quota_bytes_per_day) {
        /* no wait would make it fit: not a 429 to retry for ever */
        ld_respond_error(r, 413, "too_large", "the body is %llu bytes, over this key's daily quota of %llu bytes",
                         length, (unsigned long long)s->cfg.quota_bytes_per_day);
        return;
    }
    int wait = ld_quota_take(s->quota, r->who.key_id, length);
    if (!wait) {
        r->quota_bytes = length;
        r->quota_taken = 1;
    }
    if (wait) {
        ld_respond_error(r, 429, "rate_limited", "this key's upload quota is spent; retry in %d s", wait);
        ld_respond_retry_after(r, wait);
        return;
    }
    /* A body too large to be a traces report is a dump, written to the data dir: refused at once
     * when it would not fit. A smaller one is held in memory and stored in PostgreSQL (a traces
     * report), or is a small dump whose write answers the same 503 if the disk fills: the check,
     * a system call, was one of ten that a traces report cost leakd. */
    struct statvfs vfs;
    if (length > traces_body_max(s) && statvfs(s->cfg.data_dir, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < length + (64ull << 20)) {
        ld_respond_error(r, 503, "unavailable", "the server's disk is full; retry later");
        ld_respond_retry_after(r, 300);
        return;
    }
    /* A body that may be a traces report is held in memory: it takes its share of the budget. */
    if (ld_req_admit(r, length <= traces_body_max(s) ? length : 0, read_body) == 0) read_body(r);
}
