/* trigger.c — the dump trigger's state machine (ARCHITECTURE step 3). */
#define _GNU_SOURCE
#include "trigger.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

struct lwc_trigger {
    pthread_mutex_t mu;
    lw_runtime rt;
    lw_clock clock;
    lw_executor exec;
    lwc_trigger_params p;
    char *spool_dir;
    lwc_log log;

    lwc_trigger_state state;
    int visible;
    int in_progress;          /* from the decision to dump until lwc_trigger_dump_done */
    uint64_t dump_gen;        /* which dump in_progress refers to */
    const char *pending_reason;
    int64_t pending_uptime;
    int has_last;
    int64_t last_dump_uptime;
    int64_t *day;             /* wall times of the dumps of the last 24 h, oldest first */
    size_t day_n;
    int64_t wake_at;          /* uptime of the earliest posted re-evaluation; INT64_MAX: none */
    int disk_skips_in_row;    /* to log the first skip as a warning, the rest at debug */
    lwc_trigger_stats stats;
};

const char *lwc_trigger_state_name(lwc_trigger_state s) {
    switch (s) {
    case LWC_TRIGGER_IDLE: return "idle";
    case LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT: return "waiting_for_retained_count";
    case LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL: return "waiting_for_dump_interval";
    case LWC_TRIGGER_DUMPING: return "dumping";
    case LWC_TRIGGER_ANALYZING: return "analyzing";
    case LWC_TRIGGER_UPLOADING: return "uploading";
    }
    return "unknown";
}

lw_sdk_status lwc_trigger_params_from_config(lwc_trigger_params *out, const lw_config *c) {
    if (!out || !c) return LW_SDK_ERR_USAGE;
    if (c->dump_interval_ms < 0 || c->max_dumps_per_day > LWC_MAX_DUMPS_PER_DAY_LIMIT) return LW_SDK_ERR_USAGE;
    memset(out, 0, sizeof *out);
    out->threshold_visible = c->threshold_visible ? c->threshold_visible : LWC_DEFAULT_THRESHOLD_VISIBLE;
    out->threshold_background = c->threshold_background ? c->threshold_background : LWC_DEFAULT_THRESHOLD_BACKGROUND;
    out->dump_interval_ms = c->dump_interval_ms ? c->dump_interval_ms : LWC_DEFAULT_DUMP_INTERVAL_MS;
    out->max_dumps_per_day = c->max_dumps_per_day ? c->max_dumps_per_day : LWC_DEFAULT_MAX_DUMPS_PER_DAY;
    out->visible = 1;
    out->spool_dir = c->spool_dir;
    return LW_SDK_OK;
}

lw_sdk_status lwc_trigger_new(lwc_trigger **out, const lw_runtime *runtime, const lw_clock *clock,
                              const lw_executor *executor, const lwc_trigger_params *params, lwc_log log) {
    if (!out) return LW_SDK_ERR_USAGE;
    *out = NULL;
    if (!runtime || !clock || !clock->uptime_ms || !clock->wall_ms || !executor || !executor->post || !params)
        return LW_SDK_ERR_USAGE;
    if (!params->retained_count || !params->dump || params->threshold_visible == 0 ||
        params->threshold_background == 0 || params->dump_interval_ms < 0 || params->max_dumps_per_day == 0 ||
        params->max_dumps_per_day > LWC_MAX_DUMPS_PER_DAY_LIMIT)
        return LW_SDK_ERR_USAGE;
    lw_sdk_status rc = LW_SDK_ERR_NOMEM;
    lwc_trigger *t = calloc(1, sizeof *t);
    if (!t) goto out;
    t->day = calloc(params->max_dumps_per_day, sizeof *t->day);
    if (!t->day) goto out;
    if (params->spool_dir && !(t->spool_dir = strdup(params->spool_dir))) goto out;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        rc = LW_SDK_ERR_RUNTIME;
        goto out;
    }
    t->rt = *runtime;
    t->clock = *clock;
    t->exec = *executor;
    t->p = *params;
    t->p.spool_dir = t->spool_dir;
    t->log = log;
    t->state = LWC_TRIGGER_IDLE;
    t->visible = params->visible != 0;
    t->wake_at = INT64_MAX;
    t->stats.last_dump_uptime_ms = -1;
    *out = t;
    t = NULL;
    rc = LW_SDK_OK;
out:
    if (t) {
        free(t->spool_dir);
        free(t->day);
        free(t);
    }
    return rc;
}

void lwc_trigger_free(lwc_trigger *t) {
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t->spool_dir);
    free(t->day);
    free(t);
}

/* ---- timers ------------------------------------------------------------------------------- */

static void eval_task(void *arg) {
    lwc_trigger_evaluate(arg);
}

static void timer_task(void *arg) {
    lwc_trigger *t = arg;
    pthread_mutex_lock(&t->mu);
    t->wake_at = INT64_MAX;
    pthread_mutex_unlock(&t->mu);
    lwc_trigger_evaluate(t);
}

/* Re-evaluate at uptime `due`, unless a re-evaluation is already posted for then or earlier. */
static void wake_at_locked(lwc_trigger *t, int64_t due, int64_t now) {
    if (due >= t->wake_at) return;
    t->wake_at = due;
    t->exec.post(t->exec.ctx, due > now ? due - now : 0, timer_task, t);
}

/* ---- the decision --------------------------------------------------------------------------- */

typedef enum { GATE_NO, GATE_GO } gate_result;

typedef struct gate_out {
    lw_sdk_status rc;
    int log_level;   /* -1: nothing to log */
    char why[200];
} gate_out;

/* Everything but the disk check, under t->mu. Messages are logged by the caller, unlocked
 * (the host's log callback may call back into the SDK). */
static gate_result gate_locked(lwc_trigger *t, size_t count, int manual, gate_out *g) {
    g->rc = LW_SDK_OK;
    g->log_level = -1;
    if (t->in_progress) {
        if (manual) {
            g->rc = LW_SDK_ERR_BUSY;
            g->log_level = LW_LOG_INFO;
            snprintf(g->why, sizeof g->why, "trigger: manual dump refused: a dump is in progress");
        }
        return GATE_NO;
    }
    int64_t now = t->clock.uptime_ms(t->clock.ctx);
    int64_t wall = t->clock.wall_ms(t->clock.ctx);
    if (count == 0) {
        if (!manual) t->state = LWC_TRIGGER_IDLE;
        return GATE_NO;
    }
    if (!manual) {
        unsigned threshold = t->visible ? t->p.threshold_visible : t->p.threshold_background;
        if (count < threshold) {
            t->state = LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT;
            return GATE_NO;
        }
        if (t->has_last && now - t->last_dump_uptime < t->p.dump_interval_ms) {
            t->state = LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL;
            wake_at_locked(t, t->last_dump_uptime + t->p.dump_interval_ms, now);
            return GATE_NO;
        }
    }
    /* The rolling 24 h window, in wall time. A dump stamped in the future (the clock was set
     * back) stays counted until the clock passes it by a day. */
    size_t drop = 0;
    while (drop < t->day_n && wall - t->day[drop] >= LWC_DAY_MS) drop++;
    if (drop) {
        memmove(t->day, t->day + drop, (t->day_n - drop) * sizeof *t->day);
        t->day_n -= drop;
    }
    if (t->day_n >= t->p.max_dumps_per_day) {
        int64_t wait = t->day[0] + LWC_DAY_MS - wall;
        if (wait < 1) wait = 1;
        t->stats.skipped_daily++;
        g->log_level = LW_LOG_INFO;
        snprintf(g->why, sizeof g->why, "trigger: %s dump %s: %zu dumps in the last 24 h (max_dumps_per_day); next allowed in %lld s",
                 manual ? "manual" : "automatic", manual ? "refused" : "deferred", t->day_n, (long long)(wait + 999) / 1000);
        if (manual) {
            g->rc = LW_SDK_ERR_LIMIT;
            return GATE_NO;
        }
        t->state = LWC_TRIGGER_WAITING_FOR_DUMP_INTERVAL;
        wake_at_locked(t, now > INT64_MAX - wait ? INT64_MAX : now + wait, now);
        return GATE_NO;
    }
    return GATE_GO;
}

/* 1 when the spool has at least twice the heap in use free (or when that cannot be known),
 * 0 with `why` filled when it has not. No lock held: it calls the adapter and statvfs. */
static int disk_ok(lwc_trigger *t, char *why, size_t cap) {
    if (!t->p.free_disk && !t->spool_dir) return 1;
    uint64_t used = 0, max = 0;
    if (!t->rt.heap_usage || t->rt.heap_usage(t->rt.ctx, &used, &max) != 0) {
        lwc_logf(&t->log, LW_LOG_DEBUG, "trigger: heap in use unknown; free disk not checked");
        return 1;
    }
    uint64_t free_bytes = 0;
    if (t->p.free_disk) {
        if (t->p.free_disk(t->p.user, &free_bytes) != 0) {
            snprintf(why, cap, "free disk space unknown");
            return 0;
        }
    } else {
        struct statvfs sv;
        if (statvfs(t->spool_dir, &sv) != 0) {
            snprintf(why, cap, "cannot read the free space of %s: %s", t->spool_dir, strerror(errno));
            return 0;
        }
        if (__builtin_mul_overflow((uint64_t)sv.f_bavail, (uint64_t)sv.f_frsize, &free_bytes)) free_bytes = UINT64_MAX;
    }
    uint64_t need;
    if (__builtin_mul_overflow(used, (uint64_t)2, &need)) need = UINT64_MAX;
    if (free_bytes >= need) return 1;
    snprintf(why, cap, "%llu MiB free in the spool, need %llu MiB (2 x %llu MiB of heap in use)",
             (unsigned long long)(free_bytes >> 20), (unsigned long long)(need >> 20), (unsigned long long)(used >> 20));
    return 0;
}

static void start_task(void *arg);

static lw_sdk_status attempt(lwc_trigger *t, int manual, int *started) {
    *started = 0;
    size_t count = t->p.retained_count(t->p.user);
    gate_out g;
    pthread_mutex_lock(&t->mu);
    gate_result r = gate_locked(t, count, manual, &g);
    pthread_mutex_unlock(&t->mu);
    if (g.log_level >= 0) lwc_logf(&t->log, g.log_level, "%s", g.why);
    if (r != GATE_GO) return g.rc;

    char why[200];
    if (!disk_ok(t, why, sizeof why)) {
        pthread_mutex_lock(&t->mu);
        t->stats.skipped_disk++;
        int first = t->disk_skips_in_row++ == 0;
        if (!manual && !t->in_progress) {
            t->state = LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT;
            /* Retry later: disk may be freed even if no new object is retained. */
            int64_t now = t->clock.uptime_ms(t->clock.ctx);
            int64_t delay = t->p.dump_interval_ms > 0 ? t->p.dump_interval_ms : LWC_DEFAULT_DUMP_INTERVAL_MS;
            wake_at_locked(t, now + delay, now);
        }
        pthread_mutex_unlock(&t->mu);
        lwc_logf(&t->log, first || manual ? LW_LOG_WARN : LW_LOG_DEBUG, "trigger: %s dump skipped: %s",
                manual ? "manual" : "automatic", why);
        return manual ? LW_SDK_ERR_LIMIT : LW_SDK_OK;
    }

    /* Decide again: another thread may have started a dump while the disk was checked. */
    pthread_mutex_lock(&t->mu);
    r = gate_locked(t, count, manual, &g);
    int visible = t->visible;
    if (r == GATE_GO) {
        int64_t now = t->clock.uptime_ms(t->clock.ctx);
        t->in_progress = 1;
        t->dump_gen++;
        t->state = LWC_TRIGGER_DUMPING;
        t->has_last = 1;
        t->last_dump_uptime = now;
        t->day[t->day_n++] = t->clock.wall_ms(t->clock.ctx);
        t->pending_reason = manual ? "manual" : "retained_count";
        t->pending_uptime = now;
        t->disk_skips_in_row = 0;
        t->stats.dumps++;
        t->stats.last_dump_uptime_ms = now;
        t->exec.post(t->exec.ctx, 0, start_task, t);
        *started = 1;
    }
    pthread_mutex_unlock(&t->mu);
    if (g.log_level >= 0) lwc_logf(&t->log, g.log_level, "%s", g.why);
    if (r == GATE_GO)
        lwc_logf(&t->log, LW_LOG_INFO, "trigger: dumping (%s, %zu retained, %s)", manual ? "manual" : "retained_count",
                count, visible ? "visible" : "background");
    return r == GATE_GO ? LW_SDK_OK : g.rc;
}

static void start_task(void *arg) {
    lwc_trigger *t = arg;
    pthread_mutex_lock(&t->mu);
    const char *reason = t->pending_reason;
    int64_t uptime = t->pending_uptime;
    uint64_t gen = t->dump_gen;
    pthread_mutex_unlock(&t->mu);
    if (t->p.dump(t->p.user, reason, uptime) == 0) return;
    lwc_logf(&t->log, LW_LOG_ERROR, "trigger: the dump did not start");
    pthread_mutex_lock(&t->mu);
    if (t->in_progress && t->dump_gen == gen) {
        t->in_progress = 0;
        t->stats.dumps_failed++;
        t->state = LWC_TRIGGER_WAITING_FOR_RETAINED_COUNT;
        /* No immediate re-evaluation (a failing dump must not spin): try again after the interval. */
        int64_t now = t->clock.uptime_ms(t->clock.ctx);
        wake_at_locked(t, t->last_dump_uptime + t->p.dump_interval_ms, now);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---- entry points ------------------------------------------------------------------------- */

void lwc_trigger_evaluate(lwc_trigger *t) {
    if (!t) return;
    int started;
    attempt(t, 0, &started);
}

lw_sdk_status lwc_trigger_dump_now(lwc_trigger *t, int *started) {
    int dummy;
    if (!started) started = &dummy;
    *started = 0;
    if (!t) return LW_SDK_ERR_USAGE;
    lw_sdk_status rc = attempt(t, 1, started);
    if (rc == LW_SDK_OK && !*started) lwc_logf(&t->log, LW_LOG_INFO, "trigger: manual dump: nothing is retained");
    return rc;
}

void lwc_trigger_set_visible(lwc_trigger *t, int visible) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    int changed = t->visible != (visible != 0);
    t->visible = visible != 0;
    pthread_mutex_unlock(&t->mu);
    if (changed) t->exec.post(t->exec.ctx, 0, eval_task, t);
}

lw_sdk_status lwc_trigger_set_phase(lwc_trigger *t, lwc_trigger_state phase) {
    if (!t || (phase != LWC_TRIGGER_ANALYZING && phase != LWC_TRIGGER_UPLOADING)) return LW_SDK_ERR_USAGE;
    lw_sdk_status rc = LW_SDK_ERR_USAGE;
    pthread_mutex_lock(&t->mu);
    if (t->in_progress) {
        t->state = phase;
        rc = LW_SDK_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void lwc_trigger_dump_done(lwc_trigger *t, int ok) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    int was = t->in_progress;
    if (was) {
        t->in_progress = 0;
        if (!ok) t->stats.dumps_failed++;
        t->state = LWC_TRIGGER_IDLE; /* until the re-evaluation below says otherwise */
    }
    pthread_mutex_unlock(&t->mu);
    if (!was) {
        lwc_logf(&t->log, LW_LOG_WARN, "trigger: dump_done without a dump in progress (ignored)");
        return;
    }
    lwc_logf(&t->log, ok ? LW_LOG_INFO : LW_LOG_WARN, "trigger: dump %s", ok ? "done" : "failed");
    t->exec.post(t->exec.ctx, 0, eval_task, t);
}

lwc_trigger_state lwc_trigger_get_state(lwc_trigger *t) {
    if (!t) return LWC_TRIGGER_IDLE;
    pthread_mutex_lock(&t->mu);
    lwc_trigger_state s = t->state;
    pthread_mutex_unlock(&t->mu);
    return s;
}

void lwc_trigger_get_stats(lwc_trigger *t, lwc_trigger_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->last_dump_uptime_ms = -1;
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    *out = t->stats;
    pthread_mutex_unlock(&t->mu);
}
