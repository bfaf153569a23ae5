/* fork_dumper.c — heap dumps from a forked child reaped with a timeout, or in-process. */
#define _GNU_SOURCE
#include "fork_dumper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define POLL_INTERVAL_MS 20 /* without a pidfd, waitpid(WNOHANG) this often */
#define ERR_CAP 512

typedef struct job {
    lw_runtime rt;
    char *path;
    char *err_path;          /* "<path>.err": the child's error message */
    int64_t timeout_ms;
    lwc_fork_dump_done_fn done;
    void *user;
    lwc_log log;
    pid_t pid;
    int64_t forked_at_us;    /* CLOCK_MONOTONIC */
    int64_t pause_us;        /* time spent in fork() */
} job;

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGALRM: return "SIGALRM";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    }
    return "?";
}

static void free_job(job *j) {
    if (!j) return;
    free(j->path);
    free(j->err_path);
    free(j);
}

/* Calls done_cb, then frees the job: the last thing done with the host's pointers. */
static void finish(job *j, int ok, const char *message, int64_t pause_us) {
    int64_t pause_ms = pause_us / 1000;
    if (!ok) unlink(j->path); /* a partial dump is of no use */
    lwc_logf(&j->log, ok ? LW_LOG_INFO : LW_LOG_ERROR, "fork_dumper: %s (app paused %lld.%03lld ms)", message,
            (long long)(pause_us / 1000), (long long)(pause_us % 1000));
    j->done(j->user, ok, message, pause_ms);
    free_job(j);
}

/* ---- in-process ---------------------------------------------------------------------------- */

static void dump_in_process(job *j, const char *why) {
    char err[ERR_CAP] = "";
    char msg[ERR_CAP + 128];
    lwc_logf(&j->log, LW_LOG_INFO, "fork_dumper: dumping in-process (%s)", why);
    int64_t t0 = mono_us();
    int rc = j->rt.dump_heap(j->rt.ctx, j->path, 0, err, sizeof err);
    int64_t pause = mono_us() - t0;
    err[sizeof err - 1] = '\0';
    if (rc == 0)
        snprintf(msg, sizeof msg, "in-process dump written in %lld ms", (long long)(pause / 1000));
    else
        snprintf(msg, sizeof msg, "in-process dump failed: %s", err[0] ? err : "no message from the runtime");
    finish(j, rc == 0, msg, pause);
}

/* ---- the child ------------------------------------------------------------------------------- */

/* Runs in the forked child of a multi-threaded process: async-signal-safe calls only (the
 * adapter's dump_heap is told it is forked). Never returns. */
static void child_main(const job *j) {
    /* The app's crash handlers (crash reporters, the runtime's own) must not run here: a
     * crash should end the child with its signal, and SIGALRM must kill it. */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGALRM, SIGTERM, SIGPIPE};
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigset_t unblock;
    sigemptyset(&unblock);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaction(sigs[i], &dfl, NULL);
        sigaddset(&unblock, sigs[i]);
    }
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);
#ifdef __linux__
    prctl(PR_SET_NAME, "lw-heap-dump", 0, 0, 0);
#endif
    /* A second guard should the parent's reaper be gone: a little after the parent's timeout. */
    int64_t secs = j->timeout_ms / 1000 + 5;
    alarm(secs > 86400 ? 86400u : (unsigned)secs);

    char err[ERR_CAP];
    err[0] = '\0';
    if (j->rt.dump_heap(j->rt.ctx, j->path, 1, err, sizeof err) == 0) _exit(0);
    int fd = open(j->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        size_t len = strnlen(err, sizeof err);
        size_t off = 0;
        while (off < len) {
            ssize_t w = write(fd, err + off, len - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            off += (size_t)w;
        }
        close(fd);
    }
    _exit(1);
}

/* ---- the reaper -------------------------------------------------------------------------------- */

/* LWC_NO_PIDFD forces the polling path (for tests; kernels before 5.3 take it anyway). */
static int open_pidfd(pid_t pid) {
#if defined(SYS_pidfd_open) && !defined(LWC_NO_PIDFD)
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

static void kill_child(pid_t pid, int pidfd) {
#ifdef SYS_pidfd_send_signal
    /* Through the pidfd the signal cannot reach a recycled pid. */
    if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0) return;
#else
    (void)pidfd;
#endif
    kill(pid, SIGKILL);
}

static void read_err_file(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t off = 0;
    while (off + 1 < cap) {
        ssize_t r = read(fd, out + off, cap - 1 - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t)r;
    }
    out[off] = '\0';
    close(fd);
}

static int file_nonempty(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

typedef enum { CHILD_ENDED, CHILD_TIMED_OUT, CHILD_LOST } wait_result;

/* Waits for the child until the job's deadline; kills it when the deadline passes. */
static wait_result wait_child(job *j, int *status) {
    int pidfd = open_pidfd(j->pid);
    int64_t deadline = j->forked_at_us + j->timeout_ms * 1000;
    wait_result res;
    for (;;) {
        pid_t r = waitpid(j->pid, status, WNOHANG);
        if (r == j->pid) {
            res = CHILD_ENDED;
            break;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { /* ECHILD: reaped elsewhere (the host ignores SIGCHLD, or reaps all children) */
            res = CHILD_LOST;
            break;
        }
        int64_t left = deadline - mono_us();
        if (left <= 0) {
            kill_child(j->pid, pidfd);
            while (waitpid(j->pid, status, 0) < 0 && errno == EINTR) {}
            res = CHILD_TIMED_OUT;
            break;
        }
        int wait_ms = (int)(left / 1000 + 1);
        if (pidfd >= 0) {
            struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
            poll(&pfd, 1, wait_ms > 1000 ? 1000 : wait_ms);
        } else {
            if (wait_ms > POLL_INTERVAL_MS) wait_ms = POLL_INTERVAL_MS;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (pidfd >= 0) close(pidfd);
    return res;
}

static void reap(job *j) {
    int status = 0;
    wait_result res = wait_child(j, &status);
    int64_t took_ms = (mono_us() - j->forked_at_us) / 1000;
    char err[ERR_CAP];
    read_err_file(j->err_path, err, sizeof err);
    unlink(j->err_path);
    char msg[ERR_CAP + 160];
    int ok = 0;
    if (res == CHILD_TIMED_OUT) {
        snprintf(msg, sizeof msg, "forked dump timed out after %lld ms; child %d killed", (long long)j->timeout_ms,
                 (int)j->pid);
    } else if (res == CHILD_LOST) {
        /* No exit status: judge by the files the child leaves. */
        if (err[0])
            snprintf(msg, sizeof msg, "forked dump failed: %s", err);
        else if ((ok = file_nonempty(j->path)))
            snprintf(msg, sizeof msg, "forked dump written in %lld ms (child's exit status lost: SIGCHLD ignored?)",
                     (long long)took_ms);
        else
            snprintf(msg, sizeof msg, "forked dump failed: child's exit status lost (SIGCHLD ignored?) and no dump written");
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(msg, sizeof msg, "forked dump failed: child killed by signal %d (%s)%s", sig, signal_name(sig),
                 sig == SIGALRM ? ", its own alarm" : "");
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if ((ok = file_nonempty(j->path)))
            snprintf(msg, sizeof msg, "forked dump written in %lld ms", (long long)took_ms);
        else
            snprintf(msg, sizeof msg, "forked dump failed: child exited 0 but wrote no dump");
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
        snprintf(msg, sizeof msg, "forked dump failed: %s", err[0] ? err : "no message from the runtime");
    } else {
        snprintf(msg, sizeof msg, "forked dump failed: child exited with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    finish(j, ok, msg, j->pause_us);
}

static void *reaper_main(void *arg) {
    reap(arg);
    return NULL;
}

/* ---- entry point ---------------------------------------------------------------------------- */

lw_sdk_status lwc_fork_dump(const lw_runtime *runtime, const char *path, int64_t timeout_ms,
                            lwc_fork_dump_done_fn done_cb, void *user, lwc_log log) {
    if (!runtime || !runtime->dump_heap || !path || !*path || !done_cb || timeout_ms <= 0) return LW_SDK_ERR_USAGE;
    if (timeout_ms > INT64_MAX / 1000 / 2) timeout_ms = INT64_MAX / 1000 / 2;
    job *j = calloc(1, sizeof *j);
    if (!j) return LW_SDK_ERR_NOMEM;
    size_t len = strlen(path);
    j->path = strdup(path);
    j->err_path = malloc(len + sizeof ".err");
    if (!j->path || !j->err_path) {
        free_job(j);
        return LW_SDK_ERR_NOMEM;
    }
    memcpy(j->err_path, path, len);
    memcpy(j->err_path + len, ".err", sizeof ".err");
    j->rt = *runtime;
    j->timeout_ms = timeout_ms;
    j->done = done_cb;
    j->user = user;
    j->log = log;
    unlink(j->err_path); /* a stale message must not be taken for this child's */

    if (!runtime->can_fork) {
        dump_in_process(j, "the runtime cannot dump from a forked child");
        return LW_SDK_OK;
    }

    int64_t t0 = mono_us();
    pid_t pid = fork();
    int64_t t1 = mono_us();
    if (pid == 0) child_main(j);
    if (pid < 0) {
        char why[160];
        snprintf(why, sizeof why, "fork failed: %s", strerror(errno));
        lwc_logf(&j->log, LW_LOG_WARN, "fork_dumper: %s; falling back to an in-process dump", why);
        dump_in_process(j, why);
        return LW_SDK_OK;
    }
    j->pid = pid;
    j->forked_at_us = t1;
    j->pause_us = t1 - t0;
    lwc_logf(&j->log, LW_LOG_DEBUG, "fork_dumper: child %d dumping to %s; parent paused %lld us in fork()", (int)pid,
            j->path, (long long)j->pause_us);

    pthread_t th;
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&th, &attr, reaper_main, j);
        pthread_attr_destroy(&attr);
    }
    if (err != 0) {
        /* The child exists and must be reaped: do it on this thread rather than leak a zombie. */
        lwc_logf(&j->log, LW_LOG_WARN, "fork_dumper: no reaper thread (%s); waiting for child %d here", strerror(err),
                (int)pid);
        reap(j);
    }
    return LW_SDK_OK;
}
