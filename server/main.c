/* main.c — leakd: `serve` runs the HTTP API and supervises the analysis workers; `migrate`
 * and the app/key commands administer the database. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "leakcore.h"
#include "linger.h"
#include "log.h"
#include "migrate.h"
#include "queue.h"
#include "report_writer.h"
#include "reports.h"
#include "scratch.h"
#include "server.h"
#include "worker.h"

/* Reports per group commit: enough to amortize a commit, small enough that one statement
 * stays a few milliseconds. */
#define REPORT_BATCH_MAX 64

extern char **environ;

/* The full usage is this head, a line or more per administrative command from admin.c
 * (ld_admin_commands), this tail, and the settings of config.c (ld_config_help). */
static const char usage_head[] =
    "usage: leakd <command> [settings]\n"
    "\n"
    "Leakwatch's server: receives leak reports, analyzes heap dumps, groups leaks, serves the API.\n"
    "\n"
    "commands:\n"
    "  serve                       run the HTTP API and the analysis workers\n";
static const char usage_tail[] =
    "  help [COMMAND]              this help, or a command's (as does COMMAND --help, or -h)\n"
    "  --version                   print the version\n";

static void usage(FILE *out, int settings) {
    fputs(usage_head, out);
    ld_admin_commands(out);
    fputs(usage_tail, out);
    fputc('\n', out);
    fputs(settings ? ld_config_help : "`leakd --help` lists the settings too.\n", out);
}

/* ---- serve ------------------------------------------------------------------------------- */

/* An instance's scratch space (scratch.h) that no one touched for this long is gone. */
#define SCRATCH_GONE_S 3600.0

typedef struct {
    _Atomic(pid_t) pid; /* read by the stop watch too; 0: to be started at `started` */
    double started;
    int restarts;
    int spawn_failures; /* in a row: the next try waits 1 s, doubling to 60 s */
} worker_slot;

/* The key cache is reloaded this often whatever happens (the net under watch_keys). */
#define KEYS_RELOAD_S 10

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* SIGTERM and SIGINT are taken by a thread of their own, which wakes the main loop and then
 * keeps the shutdown's promise. A PostgreSQL that stops answering without closing its
 * connections (hung, or behind a network partition) keeps whatever waits on it: the main loop
 * (refreshing keys), requests and writers up to LEAKD_DB_TIMEOUT (30 s), workers without a
 * limit; they would otherwise hold leakd past LEAKD_SHUTDOWN_TIMEOUT, or for ever. Their
 * reports are safe: nothing uncommitted was answered. */
typedef struct {
    pthread_t main_thread;
    _Atomic int sig; /* SIGTERM or SIGINT, once one came */
    int timeout_s;
    worker_slot *workers;
    int n;
} stopper;

static void *stop_watch(void *arg) {
    stopper *w = arg;
    pthread_setname_np(pthread_self(), "leakd-signals");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    atomic_store(&w->sig, sig);
    pthread_kill(w->main_thread, SIGUSR1); /* out of its sigtimedwait */
    double at = mono() + w->timeout_s + 3, left;
    while ((left = at - mono()) > 0) {
        struct timespec t = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&t, NULL);
    }
    ld_error("shutdown: not done %d s after %s (is PostgreSQL answering?); killing the workers and exiting; "
             "requests still waiting get no answer and their clients retry",
             w->timeout_s + 3, sig == SIGTERM ? "SIGTERM" : "SIGINT");
    for (int i = 0; i < w->n; i++) {
        pid_t pid = w->workers[i].pid;
        if (pid > 0) kill(pid, SIGKILL);
    }
    ld_log_writer_stop();
    _exit(1);
}

/* A new worker process: its pid, or -1 with errno set. */
static pid_t spawn_worker(void) {
    char exe[1024];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l <= 0) return -1;
    exe[l] = 0;
    char *argv[] = {exe, "worker", NULL};
    pid_t pid;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawn(&pid, exe, NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) errno = rc; /* posix_spawn returns its error, and leaves errno as it was */
    return rc == 0 ? pid : -1;
}

/* Starts slot i's worker. One that cannot be started (EAGAIN: RLIMIT_NPROC, memory) is tried
 * again later, and said each time: once, the slot stayed empty for good, its -1 taken for a
 * worker, and with one worker no heap report was analyzed again (audit 2026-12-03). */
static void start_worker(ld_server *s, worker_slot *w, int i, int restart) {
    pid_t pid = spawn_worker();
    if (pid > 0) {
        w->pid = pid;
        w->started = mono();
        w->spawn_failures = 0;
        atomic_fetch_add(&s->metrics.workers_alive, 1);
        if (restart) atomic_fetch_add(&s->metrics.worker_restarts, 1);
        return;
    }
    int wait_s = w->spawn_failures < 6 ? 1 << w->spawn_failures : 60;
    w->spawn_failures++;
    w->pid = 0;
    w->started = mono() + wait_s;
    ld_error("cannot start worker %d: %s; trying again in %d s", i, strerror(errno), wait_s);
}

/* A dead worker's job dir: what it was decompressing (up to LEAKD_MAX_DECOMPRESSED_BYTES),
 * which no one else removed until leakd started again (audit 2026-12-03). Its analysis child
 * died with it (PDEATHSIG). */
static void remove_job_dir(ld_server *s, pid_t pid) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/job-%d", s->tmp_dir, (int)pid);
    ld_scratch_remove(dir);
}

static void release_leases(ld_server *s, pid_t pid, int refund) {
    char owner[200];
    ld_worker_owner(pid, owner, sizeof owner);
    ld_db *db = ld_pool_get(s->pool, 5000);
    if (!db) {
        ld_warn("cannot release the leases of %s now: database unreachable (they expire by themselves)", owner);
        return;
    }
    int64_t n = 0;
    if (ld_jobs_release_owner(db, owner, refund, &n) == LD_OK && n > 0)
        ld_info("released %lld report(s) held by %s%s", (long long)n, owner, refund ? ", their attempts given back" : "");
    ld_pool_put(s->pool, db);
}

static void delete_blobs(ld_server *s, char **paths, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char full[2400];
        snprintf(full, sizeof full, "%s/%s", s->cfg.data_dir, paths[i]);
        if (unlink(full) != 0 && errno != ENOENT) ld_warn("retention: cannot delete %s: %s", full, strerror(errno));
    }
    ld_blob_paths_free(paths, n);
}

/* Reports deleted per transaction (ld_retention_purge), and at most this many transactions
 * each time the supervisor's loop calls purge_old (a second apart while there is more, ~10,000
 * reports a second), so that it still reaps workers and sees SIGTERM within a second or two
 * during a long purge. */
#define PURGE_BATCH 5000
#define PURGE_BATCHES_PER_CALL 4

/* At start and hourly: reports past LEAKD_RETENTION_DAYS, and failed reports' dumps past
 * LEAKD_FAILED_BLOB_DAYS or beyond the newest LEAKD_FAILED_BLOB_MAX_BYTES of them. Returns 1
 * when expired reports are left for the next call. */
static int purge_old(ld_server *s, int64_t *purged) {
    ld_db *db = ld_pool_get(s->pool, 5000);
    if (!db) return 0;
    int64_t n = 0;
    char **paths = NULL;
    size_t np = 0;
    for (int b = 0; s->cfg.retention_days > 0; b++) {
        if (b == PURGE_BATCHES_PER_CALL) {
            ld_pool_put(s->pool, db);
            return 1;
        }
        if (ld_retention_purge(db, s->store_id, s->cfg.retention_days, PURGE_BATCH, &n, &paths, &np) != LD_OK) break;
        delete_blobs(s, paths, np);
        *purged += n;
        if (n < PURGE_BATCH) break;
    }
    if (*purged) ld_info("retention: deleted %lld report(s) older than %d days", (long long)*purged, s->cfg.retention_days);
    *purged = 0;
    if (!s->cfg.keep_blobs &&
        ld_failed_blobs_purge(db, s->store_id, s->cfg.failed_blob_days, s->cfg.failed_blob_max_bytes, &paths, &np) == LD_OK) {
        delete_blobs(s, paths, np);
        char cap[64] = "";
        if (s->cfg.failed_blob_max_bytes)
            snprintf(cap, sizeof cap, " or beyond the newest %llu bytes", (unsigned long long)s->cfg.failed_blob_max_bytes);
        if (np)
            ld_info("retention: deleted the dumps of %zu failed report(s) older than %d days%s", np,
                    s->cfg.failed_blob_days, cap);
    }
    ld_pool_put(s->pool, db);
    return 0;
}

/* Each connection may hold its socket, conn_watch's dup of it and an upload's temp file,
 * besides the sockets lingering after their close (linger.h), the database connections and
 * the files of the process: raise the soft descriptor limit (often 1024) to what the
 * connection limit needs, up to the hard limit, and say so when that is too low. */
static void raise_fd_limit(const ld_config *c) {
    rlim_t need = (rlim_t)c->connection_limit * 3 + LD_LINGER_SOCKETS + (rlim_t)c->db_pool + (rlim_t)c->db_writers + 64;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return;
    rlim_t to = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ? rl.rlim_max : need;
    if (to > rl.rlim_cur) {
        rl.rlim_cur = to;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) ld_warn("cannot raise the open files limit: %s", strerror(errno));
    }
    if (to < need)
        ld_warn("LEAKD_CONNECTION_LIMIT=%d needs about %llu open files, and the hard limit is %llu: connections "
                "beyond it wait until descriptors free up (lower the limit, or raise the hard limit: ulimit -Hn, "
                "LimitNOFILE= in a systemd unit)",
                c->connection_limit, (unsigned long long)need, (unsigned long long)rl.rlim_max);
}

/* A connection that LISTENs on leakd_keys, which migration 0015's trigger notifies on every
 * change to api_keys: a key revoked anywhere is refused here within about a second, not at
 * the next 10 s reload. NULL (and a warning) when it cannot be made. */
static ld_db *watch_keys(const ld_config *c) {
    char err[512];
    ld_db *db = ld_db_connect(c->database_url, err, sizeof err);
    /* A PostgreSQL that hangs just now must not hold the loop in the LISTEN (the connect
     * itself has libpq's connect_timeout, 5 s); ld_db_wait(.., 0) never blocks after. */
    ld_db_set_timeout(db, 2000);
    if (db && ld_db_listen(db, "leakd_keys") == LD_OK) return db;
    ld_warn("cannot watch API key changes (%s); a revoked key is refused within 10 s", db ? ld_db_error(db) : err);
    ld_db_close(db);
    return NULL;
}

static int serve(ld_server *s) {
    ld_config *c = &s->cfg;
    /* Signals are taken by this thread with sigtimedwait; every thread inherits the mask, so
     * it is set before any starts (a thread that did not block SIGTERM could take it, and die
     * of it, while this one is between two waits). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGCHLD);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    sigdelset(&sigs, SIGTERM); /* the stop watch's (stop_watch) */
    sigdelset(&sigs, SIGINT);
    int rc = ld_log_writer_start();
    if (rc != 0) ld_warn("log lines are written by each thread itself: %s", strerror(rc));
    snprintf(s->blob_dir, sizeof s->blob_dir, "%s/blobs", c->data_dir);
    if ((mkdir(c->data_dir, 0750) && errno != EEXIST) || (mkdir(s->blob_dir, 0750) && errno != EEXIST)) {
        ld_error("cannot create the data directory %s: %s", c->data_dir, strerror(errno));
        return 1;
    }
    char err[1024];
    if (ld_scratch_dir(c->data_dir, c->listen, s->tmp_dir, sizeof s->tmp_dir) != 0) {
        ld_error("LEAKD_DATA_DIR %s is too long for its scratch directories", c->data_dir);
        return 1;
    }
    /* partial uploads and analyses of a previous run; the spaces of instances long gone */
    if (ld_scratch_prepare(s->tmp_dir, err, sizeof err) != 0) {
        ld_error("%s", err);
        return 1;
    }
    if (ld_blob_store_id(c->data_dir, s->store_id, err, sizeof err) != 0) {
        ld_error("%s", err);
        return 1;
    }
    int swept = ld_scratch_sweep(c->data_dir, s->tmp_dir, SCRATCH_GONE_S);
    if (swept) ld_info("removed %d entr%s of tmp/ untouched for an hour (instances gone)", swept, swept > 1 ? "ies" : "y");
    raise_fd_limit(c);
    ld_db *db = ld_db_connect(c->database_url, err, sizeof err);
    if (!db) {
        ld_error("cannot connect to the database: %s", err);
        return 1;
    }
    int latest = 0;
    ld_status st = ld_migrations_latest(c->migrations_dir, &latest, err, sizeof err);
    if (st == LD_OK) st = ld_schema_check(db, latest, err, sizeof err);
    if (st == LD_OK) {
        char where[512];
        ld_db_describe(db, where, sizeof where);
        ld_info("database %s, schema version %d", where, latest);
    }
    ld_db_close(db);
    if (st != LD_OK) {
        ld_error("%s", err);
        return 1;
    }
    s->pool = ld_pool_new(c->database_url, c->db_pool, c->db_timeout_s * 1000);
    s->quota = ld_quota_new(c->quota_reports_per_min, c->quota_bytes_per_day);
    s->auth = s->pool ? ld_auth_new(s->pool, err, sizeof err) : NULL;
    if (!s->pool || !s->quota || !s->auth) {
        ld_error("cannot start: %s", s->auth ? "out of memory" : err);
        return 1;
    }
    s->writer = ld_report_writer_start(c->database_url, c->db_timeout_s * 1000, c->db_writers, REPORT_BATCH_MAX, err,
                                       sizeof err);
    if (!s->writer) {
        ld_error("cannot start: %s", err);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    ld_config_export(c);
    char self_pid[16];
    snprintf(self_pid, sizeof self_pid, "%d", (int)getpid());
    setenv("LEAKD_SUPERVISOR_PID", self_pid, 1); /* workers stop if it dies (worker.c) */
    /* The id ingest records: a worker that read store-id itself after it was deleted would
     * make a new one, and claim none of the reports this instance takes. */
    setenv("LEAKD_SUPERVISOR_STORE_ID", s->store_id, 1);
    if (ld_metrics_init(&s->metrics) != 0) ld_warn("no shared memory for the workers' metrics: analysis counters are off");
    worker_slot *workers = calloc((size_t)c->workers, sizeof *workers);
    if (!workers) {
        ld_error("out of memory for %d workers", c->workers);
        return 1;
    }
    for (int i = 0; i < c->workers; i++) start_worker(s, &workers[i], i, 0);
    if (ld_http_start(s, err, sizeof err) != 0) {
        ld_error("%s", err);
        for (int i = 0; i < c->workers; i++)
            if (workers[i].pid > 0) kill(workers[i].pid, SIGTERM);
        free(workers);
        return 1;
    }
    ld_info("leakd %s serving on %s (metrics %s), %d worker(s), data in %s (blob store %s)", LEAKD_VERSION, c->listen,
            c->metrics_listen, c->workers, c->data_dir, s->store_id);
    /* The first purge runs at once: mono() counts from boot, so "last purged at 0" would wait
     * for the host's first hour of uptime. */
    /* The keys are reloaded at the first tick too, which makes the watching connection. */
    double last_keys = mono() - KEYS_RELOAD_S, last_purge = 0, last_touch = mono();
    ld_db *keys_watch = NULL;
    int purge_more = 0, purged_once = 0;
    int64_t purged = 0;
    stopper stop = {pthread_self(), 0, c->shutdown_timeout_s, workers, c->workers};
    pthread_t stop_thread;
    int stop_rc = pthread_create(&stop_thread, NULL, stop_watch, &stop), stop_up = stop_rc == 0;
    if (!stop_up) {
        /* without it SIGTERM would stay pending for ever */
        ld_error("cannot start the signal thread: %s; a shutdown will wait for PostgreSQL", strerror(stop_rc));
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
    }
    for (;;) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) atomic_store(&stop.sig, sig);
        if (atomic_load(&stop.sig)) {
            sig = atomic_load(&stop.sig);
            ld_info("%s: shutting down (up to %d s)", sig == SIGTERM ? "SIGTERM" : "SIGINT", c->shutdown_timeout_s);
            break;
        }
        /* Reap dead workers: free their leases at once and start new ones. */
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < c->workers; i++) {
                if (workers[i].pid != pid) continue;
                atomic_fetch_sub(&s->metrics.workers_alive, 1);
                if (WIFSIGNALED(status)) ld_error("worker %d died of signal %d; restarting it", pid, WTERMSIG(status));
                else ld_error("worker %d exited with status %d; restarting it", pid, WEXITSTATUS(status));
                release_leases(s, pid, 0);
                remove_job_dir(s, pid);
                /* A worker that keeps dying is restarted less and less often. */
                workers[i].restarts = mono() - workers[i].started < 10 ? workers[i].restarts + 1 : 0;
                workers[i].pid = 0;
                workers[i].started = mono() + (workers[i].restarts > 3 ? 10 : 0);
            }
        }
        for (int i = 0; i < c->workers; i++)
            if (workers[i].pid == 0 && mono() >= workers[i].started) start_worker(s, &workers[i], i, 1);
        if (mono() - last_touch >= 60) {
            last_touch = mono();
            ld_scratch_touch(s->tmp_dir);
        }
        if (keys_watch) {
            int changed = ld_db_wait(keys_watch, 0); /* never blocks: a hung database cannot hold the loop */
            if (changed < 0) {
                ld_db_close(keys_watch); /* made again after the next reload that reaches the database */
                keys_watch = NULL;
            } else if (changed > 0) {
                last_keys = mono();
                ld_auth_refresh(s->auth);
            }
        }
        if (mono() - last_keys >= KEYS_RELOAD_S) {
            last_keys = mono();
            /* Connecting only after a reload that worked: the database is answering, and the
             * connect cannot hang the loop. The reload after LISTEN catches a change made
             * between the two. */
            if (ld_auth_refresh(s->auth) == 0 && !keys_watch && (keys_watch = watch_keys(c)) != NULL)
                ld_auth_refresh(s->auth);
        }
        if (purge_more || !purged_once || mono() - last_purge >= 3600) {
            if (!purge_more) last_purge = mono();
            purged_once = 1;
            purge_more = purge_old(s, &purged);
            if (!purge_more) ld_scratch_sweep(c->data_dir, s->tmp_dir, SCRATCH_GONE_S);
        }
    }
    /* The workers give their reports back while the requests under way finish. */
    double deadline = mono() + c->shutdown_timeout_s;
    for (int i = 0; i < c->workers; i++)
        if (workers[i].pid > 0) kill(workers[i].pid, SIGTERM);
    ld_http_stop(s, deadline);
    ld_report_writer_stop(s->writer); /* after the requests that use it are gone */
    s->writer = NULL;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < c->workers; i++) {
            if (workers[i].pid <= 0) continue;
            if (waitpid(workers[i].pid, NULL, WNOHANG) == workers[i].pid) workers[i].pid = 0;
            else alive++;
        }
        if (!alive) break;
        if (mono() > deadline) {
            for (int i = 0; i < c->workers; i++)
                if (workers[i].pid > 0) {
                    ld_warn("worker %d did not stop in time: killing it", workers[i].pid);
                    kill(workers[i].pid, SIGKILL);
                    waitpid(workers[i].pid, NULL, 0);
                    release_leases(s, workers[i].pid, 1); /* stopped, not crashed: no attempt used */
                    remove_job_dir(s, workers[i].pid);
                    workers[i].pid = 0;
                }
            break;
        }
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    if (stop_up) {
        pthread_cancel(stop_thread); /* asleep in nanosleep, a cancellation point */
        pthread_join(stop_thread, NULL);
    }
    free(workers);
    ld_db_close(keys_watch);
    ld_auth_free(s->auth);
    ld_quota_free(s->quota);
    ld_pool_free(s->pool);
    ld_info("stopped");
    return 0;
}

/* The command a mistyped `word` most likely meant, or NULL when none is close: one edit away
 * (a letter added, dropped or changed), or two for a command longer than 3 letters. */
static const char *closest_command(const char *word) {
    static const char *const commands[] = {"serve", "migrate", "app", "key", "help"};
    size_t wl = strlen(word), best_d = 3; /* more than any distance taken */
    const char *best = NULL;
    if (wl > 16) return NULL;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        const char *cmd = commands[c];
        size_t cl = strlen(cmd), prev[17], cur[17];
        for (size_t j = 0; j <= wl; j++) prev[j] = j;
        for (size_t i = 1; i <= cl; i++) {
            cur[0] = i;
            for (size_t j = 1; j <= wl; j++) {
                char w = word[j - 1] >= 'A' && word[j - 1] <= 'Z' ? (char)(word[j - 1] - 'A' + 'a') : word[j - 1];
                size_t sub = prev[j - 1] + (w != cmd[i - 1]);
                size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
                cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            }
            memcpy(prev, cur, sizeof cur);
        }
        if (prev[wl] <= (cl > 3 ? 2u : 1u) && prev[wl] < best_d) {
            best = cmd;
            best_d = prev[wl];
        }
    }
    return best;
}

static int unknown_command(const char *word) {
    const char *near = closest_command(word);
    fprintf(stderr, "leakd: unknown command \"%.80s\"", word);
    if (near) fprintf(stderr, "; did you mean %s?", near);
    fputs("\n\n", stderr);
    usage(stderr, 0);
    return 2;
}

/* Help on `cmd` (NULL: on leakd) to stdout. */
static int help(const char *cmd) {
    if (cmd && ld_admin_is_command(cmd)) {
        ld_admin_usage(stdout, cmd);
        return 0;
    }
    if (cmd && strcmp(cmd, "serve") != 0 && strcmp(cmd, "worker") != 0 && strcmp(cmd, "help") != 0)
        return unknown_command(cmd);
    usage(stdout, 1);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr, 1);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("leakd %s (libleakcore %s)\n", LEAKD_VERSION, lw_core_version());
        return 0;
    }
    /* --help or -h anywhere asks for help and never runs the command (`app create --help` must
     * not create an app "--help"). They are taken out before the settings are read, so that
     * `--workers --help` is help too, not a setting without a value. */
    int wants_help = strcmp(argv[1], "help") == 0, kept = 1;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) wants_help = 1;
        else argv[kept++] = argv[a];
    }
    argc = kept;
    argv[argc] = NULL;
    static ld_server server;
    char err[1024];
    if (ld_config_load(&server.cfg, &argc, argv, err, sizeof err) != 0) {
        if (wants_help) return help(NULL); /* a bad setting is no reason to refuse help */
        fprintf(stderr, "leakd: %s\n", err);
        return 2;
    }
    if (argc >= 2 && strcmp(argv[1], "help") == 0) {
        wants_help = 1;
        argc--;
        argv++;
    }
    const char *cmd = argc >= 2 ? argv[1] : NULL;
    if (wants_help) return help(cmd);
    if (!cmd) {
        fputs("leakd: missing command\n\n", stderr);
        usage(stderr, 0);
        return 2;
    }
    if (strcmp(cmd, "serve") == 0) {
        if (argc != 2) {
            fprintf(stderr, "leakd serve: unexpected argument %s\n\n", argv[2]);
            usage(stderr, 0);
            return 2;
        }
        ld_log_init("serve", server.cfg.log_level, server.cfg.log_format);
        int rc = serve(&server);
        ld_log_writer_stop();
        return rc;
    }
    if (strcmp(cmd, "worker") == 0) {
        ld_log_init("worker", server.cfg.log_level, server.cfg.log_format);
        return ld_worker_main(&server.cfg);
    }
    if (!ld_admin_is_command(cmd)) return unknown_command(cmd);
    ld_log_init(cmd, server.cfg.log_level, server.cfg.log_format);
    return ld_admin_main(server.cfg.database_url, server.cfg.migrations_dir, argc - 1, argv + 1, stdout, stderr);
}
