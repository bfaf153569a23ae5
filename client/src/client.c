/* client.c — lw_client: wires the watcher, the trigger, the fork dumper, the report builder,
 * the spool and the uploader together. The watcher and the trigger run on the executor; a
 * dump is processed (trimmed and compressed, or analyzed by the helper executable) on a
 * thread of its own, never on the app's threads; uploads run on the uploader thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "fork_dumper.h"
#include "leakwatch.h"
#include "report.h"
#include "sdk_log.h"
#include "spool.h"
#include "trigger.h"
#include "uploader.h"
#include "uuid.h"
#include "watcher.h"

struct lw_client {
    lw_config cfg;            /* strings point at copies owned below */
    char *strings[16];
    size_t nstrings;
    lw_runtime rt;
    lw_clock clock;
    lwc_executor *own_executor;
    lw_executor exec;
    lwc_spool *spool;
    char install_id[37];
    int sampled_in;           /* this device uploads (sample_rate) */
    lwc_watcher *watcher;
    lwc_trigger *trigger;
    lwc_uploader *uploader;
    /* uploader thread */
    pthread_t up_thread;
    int up_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    int flush_requests;       /* > 0: try every report now, ignoring backoff */
    int uploading;            /* an upload is in flight */
    /* the dump in progress (one at a time: the trigger guarantees it) */
    char report_id[37];
    char dump_path[LWC_SPOOL_PATH_MAX + 16];
    char data_path[LWC_SPOOL_PATH_MAX + 16];
    char reason[32];
    int64_t dump_uptime;
    lwc_retained_list retained;
    uint64_t heap_used, heap_max;
    pthread_t proc_thread;
    int proc_started;
    int dump_active;          /* from a started dump to finish_dump (guarded by mu) */
    /* counters */
    atomic_ullong dumps, reports, uploaded, rejected;
    atomic_llong last_pause_ms;
};

const char *lw_sdk_version(void) { return LEAKWATCH_VERSION_STRING; }

const char *lw_sdk_strerror(lw_sdk_status st) {
    switch (st) {
    case LW_SDK_OK: return "success";
    case LW_SDK_ERR_USAGE: return "invalid argument or configuration";
    case LW_SDK_ERR_NOMEM: return "out of memory";
    case LW_SDK_ERR_IO: return "I/O error";
    case LW_SDK_ERR_BUSY: return "a heap dump is already in progress";
    case LW_SDK_ERR_RUNTIME: return "the runtime adapter failed";
    case LW_SDK_ERR_LIMIT: return "refused by a configured limit";
    case LW_SDK_ERR_CLOSED: return "the client is shutting down";
    }
    return "unknown error";
}

static lwc_log sdk_log(lw_client *c) { return (lwc_log){c->cfg.log, c->cfg.log_user}; }

#define logf_(c, level, ...) lwc_logf(&(lwc_log){(c)->cfg.log, (c)->cfg.log_user}, level, __VA_ARGS__)

static const char *keep(lw_client *c, const char *s) {
    if (!s || c->nstrings == sizeof c->strings / sizeof c->strings[0]) return s ? NULL : NULL;
    char *d = strdup(s);
    if (d) c->strings[c->nstrings++] = d;
    return d;
}

/* ---- the dump: trigger callback -> fork dumper -> processing thread -> spool ------------------ */

static void finish_dump(lw_client *c, int ok) {
    /* Objects watched before the dump leave the set, so the same leak does not trigger again. */
    if (ok) lwc_watcher_forget_before(c->watcher, c->dump_uptime);
    lwc_retained_list_free(&c->retained);
    lwc_trigger_dump_done(c->trigger, ok);
    pthread_mutex_lock(&c->mu);
    c->dump_active = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* CLOCK_REALTIME `ms` from now, for pthread_cond_timedwait and pthread_timedjoin_np. */
static struct timespec deadline_in(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static void wake_uploader(lw_client *c) {
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void *process_dump(void *arg) {
    lw_client *c = arg;
    char err[512];
    int ok = 0;
    lwc_trigger_set_phase(c->trigger, LWC_TRIGGER_ANALYZING);
    lwc_retained_info *info = calloc(c->retained.count + 1, sizeof *info);
    char *meta = NULL;
    if (info) {
        for (size_t i = 0; i < c->retained.count; i++)
            info[i] = (lwc_retained_info){c->retained.items[i].key, c->retained.items[i].description,
                                          c->retained.items[i].watch_ms, c->retained.items[i].retained_ms};
        lwc_meta_in in = {c->report_id, c->install_id, c->reason, c->clock.wall_ms(c->clock.ctx), c->heap_used,
                          c->heap_max, info, c->retained.count};
        meta = lwc_meta_json(&c->cfg, &in);
    }
    if (!meta) {
        logf_(c, LW_LOG_ERROR, "report %s: out of memory building its meta", c->report_id);
    } else if (lwc_report_data(&c->cfg, c->dump_path, c->data_path, err, sizeof err) != 0) {
        logf_(c, LW_LOG_ERROR, "report %s: %s", c->report_id, err);
    } else {
        unlink(c->dump_path); /* the raw dump never leaves the device */
        lwc_trigger_set_phase(c->trigger, LWC_TRIGGER_UPLOADING);
        if (lwc_spool_add(c->spool, c->report_id, meta, c->data_path, c->cfg.mode == LW_MODE_TRACES ? "traces" : "heap",
                          err, sizeof err) != LW_SDK_OK) {
            logf_(c, LW_LOG_ERROR, "report %s: cannot enter the spool: %s", c->report_id, err);
        } else {
            ok = 1;
            atomic_fetch_add(&c->reports, 1);
            logf_(c, LW_LOG_INFO, "report %s (%zu retained object(s)) is in the spool", c->report_id, c->retained.count);
            if (c->cfg.on_report) {
                char path[LWC_SPOOL_PATH_MAX + 64];
                snprintf(path, sizeof path, "%s/reports/%s", lwc_spool_dir(c->spool), c->report_id);
                c->cfg.on_report(c->cfg.on_report_user, c->report_id, path);
            }
            wake_uploader(c);
        }
    }
    unlink(c->dump_path);
    if (!ok) unlink(c->data_path);
    free(meta);
    free(info);
    finish_dump(c, ok);
    return NULL;
}

static void dump_done(void *user, int ok, const char *message, int64_t pause_ms) {
    lw_client *c = user;
    atomic_store(&c->last_pause_ms, pause_ms);
    if (!ok) {
        logf_(c, LW_LOG_ERROR, "heap dump failed: %s", message ? message : "?");
        unlink(c->dump_path);
        finish_dump(c, 0);
        return;
    }
    atomic_fetch_add(&c->dumps, 1);
    logf_(c, LW_LOG_INFO, "heap dump written (the app was paused %" PRId64 " ms); processing it", pause_ms);
    /* Trimming or analyzing takes seconds: a thread of its own, never the app's or the executor's. */
    if (c->proc_started) pthread_join(c->proc_thread, NULL);
    c->proc_started = pthread_create(&c->proc_thread, NULL, process_dump, c) == 0;
    if (!c->proc_started) {
        logf_(c, LW_LOG_ERROR, "cannot start the thread that processes the dump");
        unlink(c->dump_path);
        finish_dump(c, 0);
    }
}

/* The trigger decided to dump (executor thread). 0 = started: dump_done follows. */
static int start_dump(void *user, const char *reason, int64_t dump_uptime_ms) {
    lw_client *c = user;
    char err[512];
    if (!c->sampled_in) {
        logf_(c, LW_LOG_INFO, "a dump is due, but this device is not in the upload sample (sample_rate): skipped");
        return -1;
    }
    if (lw__uuid7(c->report_id) != 0) return -1;
    snprintf(c->reason, sizeof c->reason, "%s", reason);
    c->dump_uptime = dump_uptime_ms;
    char base[LWC_SPOOL_PATH_MAX];
    if (lwc_spool_work_path(c->spool, c->report_id, base, sizeof base, err, sizeof err) != LW_SDK_OK) {
        logf_(c, LW_LOG_ERROR, "no room for the dump: %s", err);
        return -1;
    }
    snprintf(c->dump_path, sizeof c->dump_path, "%s.hprof", base);
    snprintf(c->data_path, sizeof c->data_path, "%s.%s", base, c->cfg.mode == LW_MODE_TRACES ? "json" : "zst");
    c->heap_used = c->heap_max = 0;
    if (c->rt.heap_usage) c->rt.heap_usage(c->rt.ctx, &c->heap_used, &c->heap_max);
    if (lwc_watcher_retained_list(c->watcher, dump_uptime_ms, &c->retained) != LW_SDK_OK) return -1;
    if (c->rt.will_dump) c->rt.will_dump(c->rt.ctx, dump_uptime_ms);
    logf_(c, LW_LOG_INFO, "dumping the heap (%s, %zu retained object(s)) to %s", reason, c->retained.count, c->dump_path);
    pthread_mutex_lock(&c->mu);
    c->dump_active = 1;
    pthread_mutex_unlock(&c->mu);
    if (lwc_fork_dump(&c->rt, c->dump_path, c->cfg.fork_dump_timeout_ms, dump_done, c, sdk_log(c)) != LW_SDK_OK) {
        lwc_retained_list_free(&c->retained);
        pthread_mutex_lock(&c->mu);
        c->dump_active = 0;
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    return 0;
}

static size_t retained_count(void *user) { return lwc_watcher_retained_count(((lw_client *)user)->watcher); }

static void on_batch_done(void *user, size_t retained_now, size_t newly_retained) {
    lw_client *c = user;
    if (newly_retained) logf_(c, LW_LOG_INFO, "%zu object(s) newly retained, %zu in all", newly_retained, retained_now);
    lwc_trigger_evaluate(c->trigger);
}

/* ---- uploads ------------------------------------------------------------------------------------ */

static uint64_t rand64(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
    return r;
}

static void *upload_loop(void *arg) {
    lw_client *c = arg;
    char err[512];
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        int force = c->flush_requests > 0;
        pthread_mutex_unlock(&c->mu);
        int64_t now = c->clock.wall_ms(c->clock.ctx), wake = now + 60000;
        int found = 0, allowed = !c->cfg.may_upload || force || c->cfg.may_upload(c->cfg.may_upload_user);
        lwc_spooled r;
        if (allowed && lwc_spool_next(c->spool, force ? INT64_MAX : now, &r, &found, &wake, err, sizeof err) != LW_SDK_OK) {
            logf_(c, LW_LOG_WARN, "spool: %s", err);
            found = 0;
        }
        if (found) {
            int64_t dropped = -1;
            lwc_spool_claim_dropped(c->spool, r.id, &dropped, err, sizeof err);
            pthread_mutex_lock(&c->mu);
            c->uploading = 1;
            pthread_mutex_unlock(&c->mu);
            lwc_upload_result res;
            lwc_upload(c->uploader, r.meta_path, r.data_path, r.kind, dropped, &res);
            pthread_mutex_lock(&c->mu);
            c->uploading = 0;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            if (res.kind == LWC_UPLOAD_DONE) {
                lwc_spool_remove(c->spool, r.id, LWC_SPOOL_DELIVERED, err, sizeof err);
                atomic_fetch_add(&c->uploaded, 1);
                logf_(c, LW_LOG_INFO, "report %s uploaded (HTTP %ld)", r.id, res.http_status);
            } else if (res.kind == LWC_UPLOAD_REJECTED) {
                lwc_spool_remove(c->spool, r.id, LWC_SPOOL_REJECTED, err, sizeof err);
                atomic_fetch_add(&c->rejected, 1);
                logf_(c, LW_LOG_ERROR, "report %s refused by the server for good, dropped: %s", r.id, res.message);
            } else {
                int64_t delay = lwc_backoff_ms(r.attempts + 1, c->cfg.upload_retry_min_ms, c->cfg.upload_retry_max_ms,
                                               res.retry_after_ms, rand64());
                lwc_spool_backoff(c->spool, r.id, c->clock.wall_ms(c->clock.ctx) + delay, err, sizeof err);
                logf_(c, LW_LOG_WARN, "report %s not uploaded (%s); next try in %" PRId64 " s", r.id, res.message,
                      delay / 1000);
                if (force) {
                    pthread_mutex_lock(&c->mu);
                    if (c->flush_requests > 0) c->flush_requests--;
                    pthread_cond_broadcast(&c->cv);
                    pthread_mutex_unlock(&c->mu);
                }
            }
            pthread_mutex_lock(&c->mu);
            continue;
        }
        pthread_mutex_lock(&c->mu);
        if (force) {
            c->flush_requests = 0; /* nothing more to send */
            pthread_cond_broadcast(&c->cv);
        }
        if (c->stopping || c->flush_requests) continue;
        int64_t wait_ms = !allowed ? 60000 : wake > now ? wake - now : 1000;
        if (wait_ms > 60000) wait_ms = 60000;
        struct timespec ts = deadline_in(wait_ms);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int lw_flush(lw_client *c, int timeout_ms) {
    if (!c) return -1;
    char err[256];
    unsigned n = 0;
    if (c->uploader && c->sampled_in) {
        struct timespec ts = deadline_in(timeout_ms);
        pthread_mutex_lock(&c->mu);
        if (lwc_spool_count(c->spool, &n, NULL, err, sizeof err) == LW_SDK_OK && n > 0) {
            c->flush_requests = (int)n + 1;
            pthread_cond_broadcast(&c->cv);
            while ((c->flush_requests > 0 || c->uploading) && !c->stopping)
                if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (lwc_spool_count(c->spool, &n, NULL, err, sizeof err) != LW_SDK_OK) return -1;
    return (int)n;
}

/* ---- public API ------------------------------------------------------------------------------------ */

static int64_t dflt(int64_t v, int64_t d) { return v > 0 ? v : d; }

/* 1 when this install id falls in the upload sample: a stable choice per device. */
static int in_sample(const char *install_id, double rate) {
    if (rate <= 0 || rate >= 1) return 1;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = install_id; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return (double)(h >> 11) / (double)(1ull << 53) < rate;
}

lw_sdk_status lw_client_new(lw_client **out, const lw_config *config, const lw_runtime *runtime, char *err, size_t cap) {
    char scratch[8];
    if (!err) {
        err = scratch;
        cap = sizeof scratch;
    }
    if (!out || !config || !runtime) {
        snprintf(err, cap, "lw_client_new: missing argument");
        return LW_SDK_ERR_USAGE;
    }
    *out = NULL;
    if (config->struct_size < sizeof *config || runtime->struct_size < sizeof *runtime) {
        snprintf(err, cap, "lw_client_new: set struct_size of lw_config and lw_runtime to their sizeof");
        return LW_SDK_ERR_USAGE;
    }
    if (!config->spool_dir || !config->spool_dir[0]) {
        snprintf(err, cap, "spool_dir is required: reports are written there before any upload");
        return LW_SDK_ERR_USAGE;
    }
    if (config->server_url && (!config->ingest_key || !config->app)) {
        snprintf(err, cap, "uploading to %s needs an ingest_key and an app", config->server_url);
        return LW_SDK_ERR_USAGE;
    }
    if (!runtime->is_reclaimed || !runtime->run_gc || !runtime->mark_retained || !runtime->dump_heap) {
        snprintf(err, cap, "the runtime adapter must provide is_reclaimed, run_gc, mark_retained and dump_heap");
        return LW_SDK_ERR_USAGE;
    }
    lw_sdk_status st = LW_SDK_ERR_NOMEM;
    lw_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of memory");
        return LW_SDK_ERR_NOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->cfg = *config;
    c->rt = *runtime;
    c->cfg.server_url = keep(c, config->server_url);
    c->cfg.ingest_key = keep(c, config->ingest_key);
    c->cfg.app = keep(c, config->app);
    c->cfg.app_version = keep(c, config->app_version);
    c->cfg.runtime_name = keep(c, config->runtime_name);
    c->cfg.spool_dir = keep(c, config->spool_dir);
    c->cfg.ca_file = keep(c, config->ca_file);
    c->cfg.analyzer_path = keep(c, config->analyzer_path);
    c->cfg.device_manufacturer = keep(c, config->device_manufacturer);
    c->cfg.device_model = keep(c, config->device_model);
    c->cfg.os_name = keep(c, config->os_name);
    c->cfg.os_version = keep(c, config->os_version);
    c->cfg.abi = keep(c, config->abi);
    c->cfg.fork_dump_timeout_ms = dflt(config->fork_dump_timeout_ms, 120000);
    c->cfg.upload_retry_min_ms = dflt(config->upload_retry_min_ms, 1000);
    c->cfg.upload_retry_max_ms = dflt(config->upload_retry_max_ms, 3600000);
    if (!c->cfg.spool_dir) goto fail;
    c->clock = config->clock ? *config->clock : lwc_default_clock();
    if (config->executor) {
        c->exec = *config->executor;
    } else {
        st = lwc_executor_new(&c->own_executor, 0, sdk_log(c));
        if (st != LW_SDK_OK) {
            snprintf(err, cap, "cannot start the SDK's thread");
            goto fail;
        }
        c->exec = lwc_executor_iface(c->own_executor);
    }
    st = lwc_spool_open(&c->spool, c->cfg.spool_dir, config->spool_max_bytes, config->spool_max_reports, config->log,
                        config->log_user, err, cap);
    if (st != LW_SDK_OK) goto fail;
    lwc_spool_install_id(c->spool, c->install_id);
    c->sampled_in = in_sample(c->install_id, config->sample_rate);
    lwc_watcher_params wp;
    st = lwc_watcher_params_from_config(&wp, &c->cfg);
    if (st != LW_SDK_OK) {
        snprintf(err, cap, "invalid watcher settings in lw_config");
        goto fail;
    }
    wp.on_batch_done = on_batch_done;
    wp.user = c;
    st = lwc_watcher_new(&c->watcher, &c->rt, &c->clock, &c->exec, &wp, sdk_log(c));
    if (st != LW_SDK_OK) {
        snprintf(err, cap, "cannot create the watcher");
        goto fail;
    }
    lwc_trigger_params tp;
    st = lwc_trigger_params_from_config(&tp, &c->cfg);
    if (st != LW_SDK_OK) {
        snprintf(err, cap, "invalid trigger settings in lw_config");
        goto fail;
    }
    tp.retained_count = retained_count;
    tp.dump = start_dump;
    tp.user = c;
    st = lwc_trigger_new(&c->trigger, &c->rt, &c->clock, &c->exec, &tp, sdk_log(c));
    if (st != LW_SDK_OK) {
        snprintf(err, cap, "cannot create the trigger");
        goto fail;
    }
    if (c->cfg.server_url) {
        lwc_uploader_config uc = {c->cfg.server_url, c->cfg.ingest_key, c->cfg.ca_file, config->insecure_skip_verify,
                                  0, 0, 0, 0, config->log, config->log_user};
        st = lwc_uploader_new(&c->uploader, &uc, err, cap);
        if (st != LW_SDK_OK) goto fail;
        /* Reports left by an earlier run (or a dead process) go out as soon as we start. */
        if (pthread_create(&c->up_thread, NULL, upload_loop, c) != 0) {
            snprintf(err, cap, "cannot start the upload thread");
            st = LW_SDK_ERR_NOMEM;
            goto fail;
        }
        c->up_started = 1;
    }
    logf_(c, LW_LOG_INFO, "leakwatch %s ready: app %s %s (build %" PRId64 "), mode %s, spool %s, install %s%s",
          LEAKWATCH_VERSION_STRING, c->cfg.app ? c->cfg.app : "-", c->cfg.app_version ? c->cfg.app_version : "-",
          c->cfg.build, c->cfg.mode == LW_MODE_TRACES ? "traces" : "heap", c->cfg.spool_dir, c->install_id,
          c->sampled_in ? "" : " (not in the upload sample)");
    *out = c;
    return LW_SDK_OK;
fail:
    if (st == LW_SDK_OK) st = LW_SDK_ERR_NOMEM;
    lw_client_free(c, 0);
    return st;
}

void lw_client_free(lw_client *c, int timeout_ms) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->up_started) {
        /* Let an upload in flight finish for up to timeout_ms, then abort it: it stays spooled. */
        struct timespec ts = deadline_in(timeout_ms);
        if (pthread_timedjoin_np(c->up_thread, NULL, &ts) != 0) {
            lwc_uploader_abort(c->uploader, 1);
            pthread_join(c->up_thread, NULL);
        }
    }
    /* A dump in flight calls back from the fork dumper's reaper or the processing thread:
     * wait for it (the reaper kills a hung child at fork_dump_timeout_ms). */
    pthread_mutex_lock(&c->mu);
    while (c->dump_active) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->own_executor) lwc_executor_shutdown(c->own_executor);
    if (c->proc_started) pthread_join(c->proc_thread, NULL);
    lwc_trigger_free(c->trigger);
    lwc_watcher_free(c->watcher);
    lwc_executor_free(c->own_executor);
    lwc_uploader_free(c->uploader);
    lwc_spool_close(c->spool);
    lwc_retained_list_free(&c->retained);
    for (size_t i = 0; i < c->nstrings; i++) free(c->strings[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

lw_sdk_status lw_watch(lw_client *c, lw_handle handle, const char *description, char key_out[37]) {
    if (!c) return LW_SDK_ERR_USAGE;
    pthread_mutex_lock(&c->mu);
    int stopping = c->stopping;
    pthread_mutex_unlock(&c->mu);
    if (stopping) return LW_SDK_ERR_CLOSED;
    return lwc_watcher_watch(c->watcher, handle, description ? description : "", key_out);
}

void lw_set_visible(lw_client *c, int visible) {
    if (c) lwc_trigger_set_visible(c->trigger, visible);
}

lw_sdk_status lw_dump_now(lw_client *c, int *started) {
    if (started) *started = 0;
    if (!c) return LW_SDK_ERR_USAGE;
    return lwc_trigger_dump_now(c->trigger, started);
}

const char *lw_client_state(lw_client *c) {
    return c ? lwc_trigger_state_name(lwc_trigger_get_state(c->trigger)) : "closed";
}

void lw_client_get_stats(lw_client *c, lw_client_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    lwc_watcher_stats ws;
    lwc_watcher_get_stats(c->watcher, &ws);
    out->watched = ws.watched;
    out->retained = ws.retained;
    out->reclaimed = ws.reclaimed;
    out->dumps = atomic_load(&c->dumps);
    out->reports = atomic_load(&c->reports);
    out->uploaded = atomic_load(&c->uploaded);
    out->rejected = atomic_load(&c->rejected);
    out->dropped = 0;
    out->last_dump_pause_ms = atomic_load(&c->last_pause_ms);
}
