/* fuzz_trace_json.c — libFuzzer target for the trace JSON decoder (untrusted: the server
 * ingests it from devices). A document that decodes must re-encode into one that decodes
 * again; every trace goes through the suspect, signature, text and propagation code.
 *
 * Build: see tests/fuzz/README.md. Linked with replay.c into fuzz_trace_json_replay. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_reader.h"
#include "leakcore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small limits so the fuzzer reaches every cap. */
static const lw_json_limits k_limits = {
    .max_bytes = 64 * 1024,
    .max_leaks = 8,
    .max_traces = 4,
    .max_elements = 32,
    .max_string = 256,
};

static void exercise_traces(lw_leak_report *report) {
    for (size_t l = 0; l < report->leak_count; l++) {
        lw_leak *leak = &report->leaks[l];
        for (size_t t = 0; t < leak->trace_count; t++) {
            lw_trace *trace = &leak->traces[t];
            char sig[41];
            lw_trace_signature(trace, sig);
            if (strlen(sig) != 40) {
                fprintf(stderr, "bad signature length %zu\n", strlen(sig));
                abort();
            }
            char *text = lw_trace_to_text(trace);
            if (text) (void)strlen(text);
            free(text);
            (void)lw_trace_update_suspects(trace);
            /* Flags now agree with the statuses: recomputing changes nothing. */
            if (lw_trace_update_suspects(trace) != 0) {
                fprintf(stderr, "lw_trace_update_suspects is not idempotent\n");
                abort();
            }
            lw_trace_signature(trace, sig);
            /* Status propagation (what the analyzer applies before rendering) on untrusted
             * statuses; afterwards the flags again agree with the statuses. */
            lw_trace_propagate(trace);
            if (lw_trace_update_suspects(trace) != 0) {
                fprintf(stderr, "lw_trace_propagate left suspect flags that disagree with the statuses\n");
                abort();
            }
            text = lw_trace_to_text(trace);
            if (text) (void)strlen(text);
            free(text);
        }
    }
}

/* libleakcore's own JSON parser must accept exactly what jansson accepts (with duplicate keys
 * refused), but for its depth cap; for reals too large for a double, which jansson refuses
 * and which no field of the trace JSON is; and for NUL bytes between tokens, which jansson
 * 2.14 lets pass (`{"a":1\0}`) and which RFC 8259 does not allow. */
static void differential(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    lw__jr jr;
    char msg[96] = "";
    size_t pos = 0;
    int ours = lw__jr_parse(&jr, (const char *)data, size, msg, sizeof msg, &pos);
    lw__jr_free(&jr);
    if (ours == -2) {
        json_decref(j);
        return; /* out of memory: nothing to compare */
    }
    if (j && ours != 0 && strcmp(msg, "nesting too deep") != 0 && !memchr(data, 0, size)) {
        fprintf(stderr, "jansson accepts, lw__jr_parse refuses at byte %zu: %s\n", pos, msg);
        abort();
    }
    if (!j && ours == 0 && !strstr(je.text, "real number overflow")) {
        fprintf(stderr, "jansson refuses (%s), lw__jr_parse accepts\n", je.text);
        abort();
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    differential(data, size);
    lw_leak_report *report = NULL;
    lw_error err;
    memset(&err, 0, sizeof err);
    if (lw_leak_report_from_json((const char *)data, size, &k_limits, &report, &err) != LW_OK) {
        if (err.status == LW_OK || err.message[0] == '\0') {
            fprintf(stderr, "failure without an lw_error: status %d\n", (int)err.status);
            abort();
        }
        return 0;
    }

    /* Round trip: what we encode, we must decode under the same limits — except the
     * document size, since the encoder may escape differently than the input did. */
    char *json = lw_leak_report_to_json(report, 0);
    if (json) {
        lw_json_limits relaxed = k_limits;
        relaxed.max_bytes = 0;
        lw_leak_report *again = NULL;
        lw_error err2;
        memset(&err2, 0, sizeof err2);
        if (lw_leak_report_from_json(json, strlen(json), &relaxed, &again, &err2) != LW_OK) {
            fprintf(stderr, "re-encoded report does not decode: %s\n%s\n", err2.message, json);
            abort();
        }
        if (again->leak_count != report->leak_count) {
            fprintf(stderr, "round trip changed the leak count: %zu -> %zu\n", report->leak_count, again->leak_count);
            abort();
        }
        lw_leak_report_free(again);
        free(json);
    }

    exercise_traces(report);
    char *text = lw_leak_report_to_text(report);
    if (text) (void)strlen(text);
    free(text);

    lw_leak_report_free(report);
    return 0;
}
