/* report_meta.c — the meta part of an upload, read with the trace JSON's parser: a server
 * reads one per report, and a general-purpose JSON tree (jansson's hash tables, an
 * allocation per value) cost leakd about a tenth of its instructions a traces report. */
#include "common.h"
#include "json_reader.h"

/* The string of member `key` of object `obj`, or NULL; *bad when present and not a string. */
static const char *member_string(const lw__jr *jr, long obj, const char *key, size_t *len, int *bad) {
    long i = lw__jr_get(jr, obj, key);
    if (i < 0) return NULL;
    if (jr->v[i].type != LW__JR_STRING) {
        if (bad) *bad = 1;
        return NULL;
    }
    if (len) *len = jr->v[i].str_len;
    return jr->v[i].str;
}

lw_status lw_report_meta_parse(const char *text, size_t len, lw_report_meta *out, lw_error *err) {
    if (!out) return lw__fail(err, LW_ERR_USAGE, "lw_report_meta_parse: no output");
    memset(out, 0, sizeof *out);
    if (!text) return lw__fail(err, LW_ERR_USAGE, "lw_report_meta_parse: no text");
    lw__jr *jr = lw__calloc(1, sizeof *jr);
    if (!jr) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    out->doc_ = jr;
    char msg[96];
    size_t pos = 0;
    int rc = lw__jr_parse(jr, text, len, msg, sizeof msg, &pos);
    if (rc == -2) return lw__fail(err, LW_ERR_NOMEM, "out of memory");
    if (rc != 0) {
        size_t line, col;
        lw__jr_position(text, pos, &line, &col);
        /* "unreadable", not "not JSON": valid JSON with an integer past 64 bits lands here too */
        return lw__fail(err, LW_ERR_FORMAT, "unreadable JSON at line %zu, column %zu: %s", line, col, msg);
    }
    if (jr->v[0].type != LW__JR_OBJECT) return lw__fail(err, LW_ERR_FORMAT, "not a JSON object");
    out->report_id = member_string(jr, 0, "report_id", NULL, NULL);
    out->app = member_string(jr, 0, "app", NULL, NULL);
    out->mode = member_string(jr, 0, "mode", NULL, NULL);
    out->app_version = member_string(jr, 0, "app_version", &out->app_version_len, &out->app_version_bad);
    long b = lw__jr_get(jr, 0, "build");
    if (b >= 0) {
        out->has_build = jr->v[b].type == LW__JR_INT;
        out->build_bad = !out->has_build;
        out->build = out->has_build ? jr->v[b].num : 0;
    }
    /* null is taken for absent, here only: a device may have no install id to give */
    long dev = lw__jr_get(jr, 0, "device");
    if (dev >= 0 && jr->v[dev].type != LW__JR_NULL) {
        if (jr->v[dev].type != LW__JR_OBJECT) {
            out->install_id_bad = 1;
        } else {
            long id = lw__jr_get(jr, dev, "install_id");
            if (id >= 0 && jr->v[id].type != LW__JR_NULL)
                out->install_id = member_string(jr, dev, "install_id", &out->install_id_len, &out->install_id_bad);
        }
    }
    return LW_OK;
}

void lw_report_meta_free(lw_report_meta *meta) {
    if (!meta || !meta->doc_) return;
    lw__jr_free(meta->doc_);
    lw__free(meta->doc_);
    meta->doc_ = NULL;
}
