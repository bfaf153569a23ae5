/* test_fork_dumper.c — real forks: a child that writes the dump, one that fails with a
 * message, one that crashes, one that hangs past the timeout; and the in-process paths. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fork_dumper.h"

typedef enum { DUMP_OK, DUMP_FAIL, DUMP_CRASH, DUMP_HANG } behaviour;

/* The fake adapter. In the child it uses only async-signal-safe calls, as a real one must. */
typedef struct fake_rt {
    behaviour how;
    int calls_in_parent; /* dump_heap calls seen by this process (in-process dumps only) */
    int last_forked;
} fake_rt;

static const char HPROF_HEAD[] = "JAVA PROFILE 1.0.2";

static int rt_dump_heap(void *ctx, const char *path, int forked, char *err, size_t cap) {
    fake_rt *r = ctx;
    r->calls_in_parent++;
    r->last_forked = forked;
    switch (r->how) {
    case DUMP_OK: {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return 1;
        ssize_t w = write(fd, HPROF_HEAD, sizeof HPROF_HEAD);
        close(fd);
        return w == (ssize_t)sizeof HPROF_HEAD ? 0 : 1;
    }
    case DUMP_FAIL: {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600); /* a partial file */
        if (fd >= 0) {
            if (write(fd, "JAVA", 4) < 0) {}
            close(fd);
        }
        static const char msg[] = "no space left on device (fake)";
        size_t n = sizeof msg < cap ? sizeof msg : cap;
        memcpy(err, msg, n);
        err[n - 1] = '\0';
        return 1;
    }
    case DUMP_CRASH:
        abort();
    case DUMP_HANG:
        for (;;) pause();
    }
    return 1;
}

/* ---- waiting for done_cb ------------------------------------------------------------------------ */

typedef struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int called;
    int ok;
    char message[1024];
    int64_t pause_ms;
    pthread_t thread;
} result;

static void on_done(void *user, int ok, const char *message, int64_t pause_ms) {
    result *r = user;
    pthread_mutex_lock(&r->mu);
    r->called++;
    r->ok = ok;
    snprintf(r->message, sizeof r->message, "%s", message);
    r->pause_ms = pause_ms;
    r->thread = pthread_self();
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void result_init(result *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void result_destroy(result *r) {
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

/* Waits up to `secs` for done_cb; returns how many times it was called. */
static int result_wait(result *r, int secs) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&r->mu);
    while (!r->called)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT) break;
    int n = r->called;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

typedef struct ctx {
    char dir[64];
    char path[128];
    char err_path[160];
    char log[8192];
    pthread_mutex_t log_mu;
} ctx;

static void capture_log(void *user, int level, const char *msg) {
    ctx *c = user;
    (void)level;
    pthread_mutex_lock(&c->log_mu);
    size_t len = strlen(c->log);
    snprintf(c->log + len, sizeof c->log - len, "%s\n", msg);
    pthread_mutex_unlock(&c->log_mu);
}

static int setup(void **state) {
    ctx *c = calloc(1, sizeof *c);
    if (!c) return -1;
    snprintf(c->dir, sizeof c->dir, "/tmp/lw_fork_test_XXXXXX");
    if (!mkdtemp(c->dir)) return -1;
    snprintf(c->path, sizeof c->path, "%s/dump.hprof", c->dir);
    snprintf(c->err_path, sizeof c->err_path, "%s.err", c->path);
    pthread_mutex_init(&c->log_mu, NULL);
    *state = c;
    return 0;
}

static int teardown(void **state) {
    ctx *c = *state;
    unlink(c->path);
    unlink(c->err_path);
    rmdir(c->dir);
    pthread_mutex_destroy(&c->log_mu);
    free(c);
    return 0;
}

static lw_runtime make_rt(fake_rt *f, int can_fork) {
    lw_runtime rt;
    memset(&rt, 0, sizeof rt);
    rt.struct_size = sizeof rt;
    rt.ctx = f;
    rt.dump_heap = rt_dump_heap;
    rt.can_fork = can_fork;
    return rt;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_fork_success(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_OK};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    lwc_log log = {capture_log, c};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 1);
    assert_non_null(strstr(r.message, "forked dump written"));
    assert_false(pthread_equal(r.thread, pthread_self())); /* reported from the reaper */
    assert_int_equal(f.calls_in_parent, 0);                /* the dump ran in the child only */
    assert_true(r.pause_ms >= 0 && r.pause_ms < 1000);
    assert_non_null(strstr(c->log, "app paused"));
    char buf[64] = "";
    int fd = open(c->path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof buf), sizeof HPROF_HEAD);
    close(fd);
    assert_string_equal(buf, HPROF_HEAD);
    assert_false(exists(c->err_path));
    result_destroy(&r);
}

static void test_fork_child_fails_with_message(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_FAIL};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    lwc_log log = {capture_log, c};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "no space left on device (fake)"));
    assert_false(exists(c->path));     /* the partial dump is removed */
    assert_false(exists(c->err_path)); /* and the message file */
    result_destroy(&r);
}

static void test_fork_child_crashes(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_CRASH};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    lwc_log log = {capture_log, c};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "signal 6 (SIGABRT)"));
    assert_false(exists(c->path));
    result_destroy(&r);
}

static void test_fork_child_hangs(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_HANG};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    lwc_log log = {capture_log, c};
    int64_t t0 = now_ms();
    assert_int_equal(lwc_fork_dump(&rt, c->path, 300, on_done, &r, log), LW_SDK_OK);
    assert_true(now_ms() - t0 < 250); /* the parent returns at once */
    assert_int_equal(result_wait(&r, 10), 1);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "timed out after 300 ms"));
    assert_non_null(strstr(r.message, "killed"));
    assert_true(took >= 300);
    assert_true(took < 3000);
    result_destroy(&r);
}

/* A host that ignores SIGCHLD has its children reaped by the kernel: no exit status, so the
 * result is judged by the files the child left. */
static void test_sigchld_ignored(void **state) {
    ctx *c = *state;
    struct sigaction ign, old;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &ign, &old);
    lwc_log log = {capture_log, c};

    fake_rt f = {.how = DUMP_OK};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 1);
    assert_non_null(strstr(r.message, "exit status lost"));
    result_destroy(&r);

    f.how = DUMP_FAIL;
    result_init(&r);
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "no space left on device (fake)"));
    result_destroy(&r);

    f.how = DUMP_CRASH;
    result_init(&r);
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(result_wait(&r, 10), 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "no dump written"));
    result_destroy(&r);
    sigaction(SIGCHLD, &old, NULL);
}

static void test_in_process_when_cannot_fork(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_OK, .last_forked = -1};
    lw_runtime rt = make_rt(&f, 0);
    result r;
    result_init(&r);
    lwc_log log = {capture_log, c};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(r.called, 1); /* before lwc_fork_dump returned, on this thread */
    assert_true(pthread_equal(r.thread, pthread_self()));
    assert_int_equal(r.ok, 1);
    assert_int_equal(f.calls_in_parent, 1);
    assert_int_equal(f.last_forked, 0);
    assert_true(exists(c->path));
    assert_non_null(strstr(c->log, "in-process"));
    result_destroy(&r);
}

static void test_in_process_failure(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_FAIL};
    lw_runtime rt = make_rt(&f, 0);
    result r;
    result_init(&r);
    lwc_log log = {NULL, NULL};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 10000, on_done, &r, log), LW_SDK_OK);
    assert_int_equal(r.called, 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.message, "in-process dump failed: no space left on device (fake)"));
    assert_false(exists(c->path));
    result_destroy(&r);
}

static void test_usage_errors(void **state) {
    ctx *c = *state;
    fake_rt f = {.how = DUMP_OK};
    lw_runtime rt = make_rt(&f, 1);
    result r;
    result_init(&r);
    lwc_log log = {NULL, NULL};
    assert_int_equal(lwc_fork_dump(&rt, c->path, 0, on_done, &r, log), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_fork_dump(&rt, "", 1000, on_done, &r, log), LW_SDK_ERR_USAGE);
    assert_int_equal(lwc_fork_dump(&rt, c->path, 1000, NULL, &r, log), LW_SDK_ERR_USAGE);
    rt.dump_heap = NULL;
    assert_int_equal(lwc_fork_dump(&rt, c->path, 1000, on_done, &r, log), LW_SDK_ERR_USAGE);
    assert_int_equal(r.called, 0);
    result_destroy(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fork_success, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_fails_with_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_crashes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_hangs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigchld_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_process_when_cannot_fork, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_process_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
