/* spool.c — the crash-safe report spool: reports are whole directories that enter reports/
 * and leave it by rename(2) only, so a process killed at any moment leaves a whole report or
 * none.
 *
 * Why this shape (sentry-native's run directories + Crashpad's new/pending split, plus fsync):
 *  - Work in progress lives in the process's own run directory, locked with flock(2) for the
 *    process's life. The kernel drops the lock when the process dies however it dies, so the
 *    next process to open the spool knows the directory is abandoned and deletes it.
 *  - A report is built in "<run>/.add-<id>/" (meta.json, data, state, each fsynced, then the
 *    directory), renamed to reports/<id>, and reports/ is fsynced. A report is removed by
 *    renaming it into "<run>/.trash-..." first, then deleting it.
 *  - The small files that change (install_id, dropped, a report's state) are replaced with
 *    temp + fsync + rename + fsync of the directory.
 *  - spool.lock is flock'ed around every change, so processes sharing the directory agree on
 *    the order of reports (a sequence number in each state) and on the quota. A process never
 *    holds it for longer than a few file operations.
 * Crash windows that remain, by choice: an eviction or a claim interrupted between its two
 * persisted steps may miscount `dropped` by that one report's share. */
#define _GNU_SOURCE
#include "spool.h"

#include "sdk_log.h"
#include "uuid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DIR_MAX 768          /* longest spool directory accepted */
#define META_MAX (64u << 10) /* the server's limit for the meta part */
#define STATE_MAX 1024
#define SCAN_MAX 100000      /* report directories looked at in one scan */
#define RM_DEPTH 8           /* rm_tree never descends deeper (our layout is 2 deep) */

struct lwc_spool {
    pthread_mutex_t mu;
    int lock_fd;     /* spool.lock */
    int run_lock_fd; /* run-<...>.lock, held until close */
    char dir[DIR_MAX + 1];
    char reports[DIR_MAX + 16];
    char run[DIR_MAX + 64];
    char run_lock[DIR_MAX + 72];
    uint64_t max_bytes;
    unsigned max_reports;
    lwc_log log;
    char install_id[37];
    uint64_t trash_seq; /* names the trash directories of this run */
};

/* What a report's state file says, plus the sizes of its files. */
typedef struct {
    char id[37];
    char kind[8];
    uint64_t seq;
    unsigned attempts;
    int64_t next_ms;
    int64_t created_ms;
    int64_t dropped;
    uint64_t bytes;
} rep_info;

/* ---- small helpers ------------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static void seterr(char *err, size_t cap, const char *fmt, ...) {
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* snprintf that reports truncation: 0 on success. */
__attribute__((format(printf, 3, 4))) static int path_fmt(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int fill_random(void *buf, size_t n) {
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        got += (size_t)r;
    }
    if (got == n) return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return got == n ? 0 : -1;
}

static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int fsync_path(const char *path, int dir) {
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Creates `path` with `data`, fsynced. -1 with errno on failure (the file may remain). */
static int write_file_sync(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int rc = write_all(fd, data, len) == 0 && fsync(fd) == 0 ? 0 : -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    errno = e;
    return rc;
}

/* Replaces dir/name with `data`: temp + fsync + rename + fsync of dir. */
static lw_sdk_status replace_file(const char *dir, const char *name, const void *data, size_t len, char *err,
                                  size_t cap) {
    char path[LWC_SPOOL_PATH_MAX], tmp[LWC_SPOOL_PATH_MAX];
    if (path_fmt(path, sizeof path, "%s/%s", dir, name) || path_fmt(tmp, sizeof tmp, "%s/%s.tmp", dir, name)) {
        seterr(err, cap, "path too long: %s/%s", dir, name);
        return LW_SDK_ERR_USAGE;
    }
    if (write_file_sync(tmp, data, len) != 0) {
        seterr(err, cap, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return LW_SDK_ERR_IO;
    }
    if (rename(tmp, path) != 0) {
        seterr(err, cap, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return LW_SDK_ERR_IO;
    }
    if (fsync_path(dir, 1) != 0) {
        seterr(err, cap, "cannot fsync %s: %s", dir, strerror(errno));
        return LW_SDK_ERR_IO;
    }
    return LW_SDK_OK;
}

/* Reads a small file into buf[cap] (NUL-terminated). -1 with errno (EFBIG when too large). */
static int read_small(const char *path, char *buf, size_t cap, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    int rc = 0;
    for (;;) {
        if (got == cap - 1) {
            char extra;
            ssize_t r = read(fd, &extra, 1);
            if (r != 0) rc = -1, errno = r > 0 ? EFBIG : errno;
            break;
        }
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    int e = errno;
    close(fd);
    errno = e;
    buf[got] = 0;
    if (len) *len = got;
    return rc;
}

static int mkdir_p(const char *dir) {
    char p[DIR_MAX + 1];
    if (path_fmt(p, sizeof p, "%s", dir)) return errno = ENAMETOOLONG, -1;
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        *c = '/';
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(p, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return errno = ENOTDIR, -1;
    return 0;
}

/* Deletes `path` and everything below it (symlinks are unlinked, never followed). 0 when it is
 * gone (or never was). */
static int rm_tree_depth(const char *path, int depth) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    if (depth >= RM_DEPTH) return errno = ELOOP, -1;
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[LWC_SPOOL_PATH_MAX];
        if (path_fmt(child, sizeof child, "%s/%s", path, e->d_name) || rm_tree_depth(child, depth + 1) != 0) rc = -1;
    }
    closedir(d);
    if (rc == 0 && rmdir(path) != 0 && errno != ENOENT) rc = -1;
    return rc;
}

static int rm_tree(const char *path) {
    return rm_tree_depth(path, 0);
}

/* ---- locking --------------------------------------------------------------------------------- */

static lw_sdk_status lock(lwc_spool *s, char *err, size_t cap) {
    pthread_mutex_lock(&s->mu);
    while (flock(s->lock_fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        seterr(err, cap, "cannot lock %s/spool.lock: %s", s->dir, strerror(errno));
        pthread_mutex_unlock(&s->mu);
        return LW_SDK_ERR_IO;
    }
    return LW_SDK_OK;
}

static void unlock(lwc_spool *s) {
    flock(s->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the dropped counter (under the lock) ------------------------------------------------------ */

static uint64_t counter_read(lwc_spool *s) {
    char path[LWC_SPOOL_PATH_MAX], buf[64];
    if (path_fmt(path, sizeof path, "%s/dropped", s->dir)) return 0;
    if (read_small(path, buf, sizeof buf, NULL) != 0) {
        if (errno != ENOENT) lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot read %s (%s); counting dropped reports from 0", path, strerror(errno));
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || end == buf || (*end && *end != '\n')) {
        lwc_logf(&s->log, LW_LOG_WARN, "spool: %s is damaged; counting dropped reports from 0", path);
        return 0;
    }
    return v;
}

static lw_sdk_status counter_write(lwc_spool *s, uint64_t v, char *err, size_t cap) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", v);
    return replace_file(s->dir, "dropped", buf, (size_t)n, err, cap);
}

static void counter_add(lwc_spool *s, uint64_t n) {
    char err[256];
    if (n == 0) return;
    if (counter_write(s, counter_read(s) + n, err, sizeof err) != LW_SDK_OK)
        lwc_logf(&s->log, LW_LOG_ERROR, "spool: %" PRIu64 " dropped report(s) not counted: %s", n, err);
}

/* ---- report state ------------------------------------------------------------------------------ */

static int report_dir(const lwc_spool *s, const char *id, char *out, size_t cap) {
    return path_fmt(out, cap, "%s/%s", s->reports, id);
}

static lw_sdk_status state_write(const char *dir, const rep_info *r, int atomic, char *err, size_t cap) {
    char buf[STATE_MAX];
    int n = snprintf(buf, sizeof buf,
                     "version=1\nseq=%" PRIu64 "\nkind=%s\nattempts=%u\nnext_ms=%" PRId64 "\ncreated_ms=%" PRId64
                     "\ndropped=%" PRId64 "\n",
                     r->seq, r->kind, r->attempts, r->next_ms, r->created_ms, r->dropped);
    if (atomic) return replace_file(dir, "state", buf, (size_t)n, err, cap);
    char path[LWC_SPOOL_PATH_MAX];
    if (path_fmt(path, sizeof path, "%s/state", dir)) {
        seterr(err, cap, "path too long: %s/state", dir);
        return LW_SDK_ERR_USAGE;
    }
    if (write_file_sync(path, buf, (size_t)n) != 0) {
        seterr(err, cap, "cannot write %s: %s", path, strerror(errno));
        return LW_SDK_ERR_IO;
    }
    return LW_SDK_OK;
}

/* Parses a state file; 0 or -1 with a reason in why[cap]. */
static int state_parse(char *text, rep_info *r, char *why, size_t cap) {
    unsigned have = 0;
    long long version = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = line, *v = eq + 1;
        char *end;
        errno = 0;
        if (strcmp(k, "kind") == 0) {
            if (strcmp(v, "heap") != 0 && strcmp(v, "traces") != 0) break;
            snprintf(r->kind, sizeof r->kind, "%s", v);
            have |= 1;
            continue;
        }
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) {
            snprintf(why, cap, "state: bad value of %s", k);
            return -1;
        }
        if (strcmp(k, "version") == 0) version = x, have |= 2;
        else if (strcmp(k, "seq") == 0 && x >= 0) r->seq = (uint64_t)x, have |= 4;
        else if (strcmp(k, "attempts") == 0 && x >= 0 && x <= 1000000) r->attempts = (unsigned)x, have |= 8;
        else if (strcmp(k, "next_ms") == 0) r->next_ms = x, have |= 16;
        else if (strcmp(k, "created_ms") == 0) r->created_ms = x, have |= 32;
        else if (strcmp(k, "dropped") == 0 && x >= -1) r->dropped = x, have |= 64;
    }
    if (have != 127 || version != 1) {
        snprintf(why, cap, "state: incomplete or of an unknown version");
        return -1;
    }
    return 0;
}

/* Reads reports/<id>: its state and sizes. 1 = read, 0 = not there, -1 = damaged (why[cap]). */
static int report_read(const lwc_spool *s, const char *id, rep_info *r, char *why, size_t cap) {
    char dir[LWC_SPOOL_PATH_MAX], path[LWC_SPOOL_PATH_MAX], text[STATE_MAX];
    struct stat st;
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", id);
    if (report_dir(s, id, dir, sizeof dir)) return snprintf(why, cap, "path too long"), -1;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return 0;
        return snprintf(why, cap, "cannot stat it: %s", strerror(errno)), -1;
    }
    if (!S_ISDIR(st.st_mode)) return snprintf(why, cap, "not a directory"), -1;
    path_fmt(path, sizeof path, "%s/state", dir);
    if (read_small(path, text, sizeof text, NULL) != 0) {
        if (errno == ENOENT && lstat(dir, &st) != 0 && errno == ENOENT) return 0; /* removed meanwhile */
        return snprintf(why, cap, "state unreadable: %s", strerror(errno)), -1;
    }
    if (state_parse(text, r, why, cap) != 0) return -1;
    uint64_t bytes = 0;
    static const char *const files[] = {"meta.json", "data"};
    for (int i = 0; i < 2; i++) {
        path_fmt(path, sizeof path, "%s/%s", dir, files[i]);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            return snprintf(why, cap, "%s missing or not a file", files[i]), -1;
        bytes += (uint64_t)st.st_size;
    }
    r->bytes = bytes;
    return 1;
}

/* Moves reports/<id> into the run directory (atomically out of the spool), then deletes it.
 * 1 = removed, 0 = was not there, -1 = error (err). */
static int move_out(lwc_spool *s, const char *id, char *err, size_t cap) {
    char dir[LWC_SPOOL_PATH_MAX], trash[LWC_SPOOL_PATH_MAX];
    if (report_dir(s, id, dir, sizeof dir) ||
        path_fmt(trash, sizeof trash, "%s/.trash-%s-%" PRIu64, s->run, id, s->trash_seq++)) {
        seterr(err, cap, "path too long for report %s", id);
        return -1;
    }
    if (rename(dir, trash) != 0) {
        if (errno == ENOENT) return 0;
        seterr(err, cap, "cannot move %s out of the spool: %s", dir, strerror(errno));
        return -1;
    }
    if (fsync_path(s->reports, 1) != 0)
        lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot fsync %s: %s", s->reports, strerror(errno));
    if (rm_tree(trash) != 0)
        lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot delete %s: %s (it goes with the run directory)", trash, strerror(errno));
    return 1;
}

/* Evicts one report, counting it (and the drops it carried) in `dropped`. */
static void evict(lwc_spool *s, const rep_info *r, const char *reason) {
    char err[512];
    int m = move_out(s, r->id, err, sizeof err);
    if (m < 0) {
        lwc_logf(&s->log, LW_LOG_ERROR, "spool: cannot drop report %s (%s): %s", r->id, reason, err);
        return;
    }
    if (m == 0) return;
    counter_add(s, 1 + (uint64_t)(r->dropped > 0 ? r->dropped : 0));
    lwc_logf(&s->log, LW_LOG_WARN, "spool: dropped report %s (%s, %" PRIu64 " bytes, %u failed attempts): %s", r->id,
         r->kind[0] ? r->kind : "damaged", r->bytes, r->attempts, reason);
}

static int cmp_seq(const void *a, const void *b) {
    const rep_info *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Lists reports/ (under the lock), oldest first; damaged reports are evicted on the way.
 * *list is malloc'ed (NULL when empty). */
static lw_sdk_status scan(lwc_spool *s, rep_info **list, size_t *n, char *err, size_t cap) {
    lw_sdk_status rc = LW_SDK_OK;
    rep_info *v = NULL;
    size_t len = 0, vcap = 0;
    DIR *d = opendir(s->reports);
    *list = NULL;
    *n = 0;
    if (!d) {
        seterr(err, cap, "cannot read %s: %s", s->reports, strerror(errno));
        return LW_SDK_ERR_IO;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!lw__uuid_valid(e->d_name)) continue; /* ".", "..", anything not ours */
        if (len == SCAN_MAX) {
            lwc_logf(&s->log, LW_LOG_WARN, "spool: more than %d entries in %s; the rest are ignored", SCAN_MAX, s->reports);
            break;
        }
        if (len == vcap) {
            size_t ncap = vcap ? vcap * 2 : 32;
            rep_info *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                seterr(err, cap, "out of memory listing the spool");
                rc = LW_SDK_ERR_NOMEM;
                goto out;
            }
            v = nv;
            vcap = ncap;
        }
        char why[256], tmp[LWC_SPOOL_PATH_MAX];
        int got = report_read(s, e->d_name, &v[len], why, sizeof why);
        if (got < 0) {
            char reason[300];
            snprintf(reason, sizeof reason, "damaged (%s)", why);
            v[len].kind[0] = 0;
            evict(s, &v[len], reason);
            continue;
        }
        if (got == 0) continue;
        if (path_fmt(tmp, sizeof tmp, "%s/%s/state.tmp", s->reports, e->d_name) == 0) unlink(tmp);
        len++;
    }
    if (len) qsort(v, len, sizeof *v, cmp_seq);
    *list = v;
    *n = len;
    v = NULL;
out:
    closedir(d);
    free(v);
    return rc;
}

/* Evicts the oldest reports other than `keep` until the quota holds. */
static void enforce_quota(lwc_spool *s, const rep_info *list, size_t n, const char *keep) {
    uint64_t bytes = 0;
    size_t count = n;
    for (size_t i = 0; i < n; i++) bytes += list[i].bytes;
    for (size_t i = 0; i < n && (count > s->max_reports || bytes > s->max_bytes); i++) {
        if (keep && strcmp(list[i].id, keep) == 0) continue;
        char reason[200];
        if (count > s->max_reports)
            snprintf(reason, sizeof reason, "the spool holds more than %u reports (spool_max_reports); the oldest goes",
                     s->max_reports);
        else
            snprintf(reason, sizeof reason,
                     "the spool holds %" PRIu64 " bytes, over %" PRIu64 " (spool_max_bytes); the oldest goes", bytes,
                     s->max_bytes);
        evict(s, &list[i], reason);
        count--;
        bytes -= list[i].bytes;
    }
}

/* ---- open and close ---------------------------------------------------------------------------- */

/* Deletes the run directories whose lock can be taken (their process is dead) and stray temp
 * files. Under the spool lock: a live process creates its lock before its directory while
 * holding it, so a run directory without a lock file is abandoned too. */
static void adopt_dead_runs(lwc_spool *s) {
    DIR *d = opendir(s->dir);
    if (!d) {
        lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot list %s: %s", s->dir, strerror(errno));
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        char path[LWC_SPOOL_PATH_MAX], other[LWC_SPOOL_PATH_MAX];
        if (strcmp(name, "install_id.tmp") == 0 || strcmp(name, "dropped.tmp") == 0) {
            if (path_fmt(path, sizeof path, "%s/%s", s->dir, name) == 0) unlink(path);
            continue;
        }
        if (strncmp(name, "run-", 4) != 0) continue;
        if (len > 5 && strcmp(name + len - 5, ".lock") == 0) {
            if (path_fmt(path, sizeof path, "%s/%s", s->dir, name) ||
                path_fmt(other, sizeof other, "%s/%.*s", s->dir, (int)(len - 5), name))
                continue;
            if (strcmp(path, s->run_lock) == 0) continue;
            int fd = open(path, O_RDWR | O_CLOEXEC);
            if (fd < 0) continue;
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
                if (rm_tree(other) != 0)
                    lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot delete the dead run directory %s: %s", other, strerror(errno));
                else
                    lwc_logf(&s->log, LW_LOG_INFO, "spool: deleted the work area of a dead process (%s)", other);
                unlink(path);
            }
            close(fd);
            continue;
        }
        if (path_fmt(path, sizeof path, "%s/%s", s->dir, name) || path_fmt(other, sizeof other, "%s.lock", path)) continue;
        if (strcmp(path, s->run) == 0) continue;
        struct stat st;
        if (lstat(other, &st) != 0 && errno == ENOENT) {
            if (rm_tree(path) != 0)
                lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot delete the abandoned run directory %s: %s", path, strerror(errno));
        }
    }
    closedir(d);
}

static lw_sdk_status load_install_id(lwc_spool *s, char *err, size_t cap) {
    char path[LWC_SPOOL_PATH_MAX], buf[64];
    size_t len = 0;
    path_fmt(path, sizeof path, "%s/install_id", s->dir);
    if (read_small(path, buf, sizeof buf, &len) == 0) {
        if (len && buf[len - 1] == '\n') buf[--len] = 0;
        if (lw__uuid_valid(buf)) {
            memcpy(s->install_id, buf, 37);
            return LW_SDK_OK;
        }
        lwc_logf(&s->log, LW_LOG_WARN, "spool: %s is damaged; making a new install id", path);
    } else if (errno != ENOENT) {
        lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot read %s (%s); making a new install id", path, strerror(errno));
    }
    char id[37], line[38];
    if (lw__uuid4(id) != 0) {
        seterr(err, cap, "no random numbers for the install id");
        return LW_SDK_ERR_IO;
    }
    snprintf(line, sizeof line, "%s\n", id);
    lw_sdk_status rc = replace_file(s->dir, "install_id", line, 37, err, cap);
    if (rc == LW_SDK_OK) memcpy(s->install_id, id, 37);
    return rc;
}

/* Creates this process's locked run directory (under the spool lock). */
static lw_sdk_status make_run(lwc_spool *s, char *err, size_t cap) {
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t r;
        if (fill_random(&r, sizeof r) != 0) {
            seterr(err, cap, "no random numbers for the run directory");
            return LW_SDK_ERR_IO;
        }
        path_fmt(s->run, sizeof s->run, "%s/run-%ld-%016" PRIx64, s->dir, (long)getpid(), r);
        path_fmt(s->run_lock, sizeof s->run_lock, "%s.lock", s->run);
        int fd = open(s->run_lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            seterr(err, cap, "cannot create %s: %s", s->run_lock, strerror(errno));
            return LW_SDK_ERR_IO;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 || mkdir(s->run, 0700) != 0) {
            seterr(err, cap, "cannot set up the run directory %s: %s", s->run, strerror(errno));
            unlink(s->run_lock);
            close(fd);
            return LW_SDK_ERR_IO;
        }
        s->run_lock_fd = fd;
        return LW_SDK_OK;
    }
    seterr(err, cap, "cannot find a free run directory name in %s", s->dir);
    return LW_SDK_ERR_IO;
}

lw_sdk_status lwc_spool_open(lwc_spool **out, const char *dir, uint64_t max_bytes, unsigned max_reports,
                             lwc_log_fn log, void *log_user, char *err, size_t cap) {
    if (!out) {
        seterr(err, cap, "lwc_spool_open: out is NULL");
        return LW_SDK_ERR_USAGE;
    }
    *out = NULL;
    if (!dir || !dir[0] || strlen(dir) > DIR_MAX) {
        seterr(err, cap, "the spool directory must be a path of 1 to %d bytes", DIR_MAX);
        return LW_SDK_ERR_USAGE;
    }
    lw_sdk_status rc = LW_SDK_ERR_IO;
    int locked = 0;
    rep_info *list = NULL;
    size_t n = 0;
    lwc_spool *s = calloc(1, sizeof *s);
    if (!s) {
        seterr(err, cap, "out of memory");
        return LW_SDK_ERR_NOMEM;
    }
    s->lock_fd = s->run_lock_fd = -1;
    s->max_bytes = max_bytes ? max_bytes : LWC_SPOOL_DEFAULT_MAX_BYTES;
    s->max_reports = max_reports ? max_reports : LWC_SPOOL_DEFAULT_MAX_REPORTS;
    s->log = (lwc_log){log, log_user};
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    for (size_t l = strlen(s->dir); l > 1 && s->dir[l - 1] == '/'; l--) s->dir[l - 1] = 0;
    snprintf(s->reports, sizeof s->reports, "%s/reports", s->dir);
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        seterr(err, cap, "cannot create a mutex");
        return LW_SDK_ERR_NOMEM;
    }

    char path[LWC_SPOOL_PATH_MAX];
    if (mkdir_p(s->dir) != 0) {
        seterr(err, cap, "cannot create the spool directory %s: %s", s->dir, strerror(errno));
        goto out;
    }
    path_fmt(path, sizeof path, "%s/spool.lock", s->dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0) {
        seterr(err, cap, "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    if ((rc = lock(s, err, cap)) != LW_SDK_OK) goto out;
    locked = 1;
    rc = LW_SDK_ERR_IO;
    if (mkdir(s->reports, 0700) != 0 && errno != EEXIST) {
        seterr(err, cap, "cannot create %s: %s", s->reports, strerror(errno));
        goto out;
    }
    if ((rc = make_run(s, err, cap)) != LW_SDK_OK) goto out;
    adopt_dead_runs(s);
    if ((rc = load_install_id(s, err, cap)) != LW_SDK_OK) goto out;
    if ((rc = scan(s, &list, &n, err, cap)) != LW_SDK_OK) goto out;
    enforce_quota(s, list, n, NULL);
    lwc_logf(&s->log, LW_LOG_DEBUG, "spool: opened %s (run %s, %zu reports waiting)", s->dir, s->run, n);
    rc = LW_SDK_OK;
out:
    free(list);
    if (locked) unlock(s);
    if (rc != LW_SDK_OK) {
        lwc_spool_close(s);
        return rc;
    }
    *out = s;
    return LW_SDK_OK;
}

void lwc_spool_close(lwc_spool *s) {
    if (!s) return;
    if (s->run_lock_fd >= 0) {
        /* Under the spool lock, so no opener sees the lock file without its owner. */
        int locked = s->lock_fd >= 0 && lock(s, NULL, 0) == LW_SDK_OK;
        if (rm_tree(s->run) != 0)
            lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot delete %s: %s (the next process will)", s->run, strerror(errno));
        unlink(s->run_lock);
        close(s->run_lock_fd);
        if (locked) unlock(s);
    }
    if (s->lock_fd >= 0) close(s->lock_fd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void lwc_spool_install_id(const lwc_spool *s, char out[37]) {
    memcpy(out, s->install_id, 37);
}

const char *lwc_spool_dir(const lwc_spool *s) {
    return s->dir;
}

const char *lwc_spool_run_dir(const lwc_spool *s) {
    return s->run;
}

lw_sdk_status lwc_spool_work_path(const lwc_spool *s, const char *name, char *out, size_t cap, char *err,
                                  size_t cap_err) {
    if (!s || !name || !out || !cap) {
        seterr(err, cap_err, "lwc_spool_work_path: a NULL argument");
        return LW_SDK_ERR_USAGE;
    }
    if (!name[0] || name[0] == '.' || strchr(name, '/')) {
        seterr(err, cap_err, "work file name \"%.64s\" must be one path component not starting with '.'", name);
        return LW_SDK_ERR_USAGE;
    }
    if (path_fmt(out, cap, "%s/%s", s->run, name)) {
        seterr(err, cap_err, "work path for \"%.64s\" does not fit in %zu bytes", name, cap);
        return LW_SDK_ERR_USAGE;
    }
    return LW_SDK_OK;
}

/* ---- reports ----------------------------------------------------------------------------------- */

lw_sdk_status lwc_spool_add(lwc_spool *s, const char *report_id, const char *meta_json, const char *data_path,
                            const char *data_kind, char *err, size_t cap) {
    if (!s || !report_id || !meta_json || !data_path || !data_kind) {
        seterr(err, cap, "lwc_spool_add: a NULL argument");
        return LW_SDK_ERR_USAGE;
    }
    if (!lw__uuid_valid(report_id)) {
        seterr(err, cap, "report id \"%.40s\" is not a lower-case UUID", report_id);
        return LW_SDK_ERR_USAGE;
    }
    if (strcmp(data_kind, "heap") != 0 && strcmp(data_kind, "traces") != 0) {
        seterr(err, cap, "data kind \"%.16s\" is neither heap nor traces", data_kind);
        return LW_SDK_ERR_USAGE;
    }
    size_t meta_len = strlen(meta_json);
    if (meta_len > META_MAX) {
        seterr(err, cap, "meta is %zu bytes; the server accepts at most %u", meta_len, META_MAX);
        return LW_SDK_ERR_USAGE;
    }
    lw_sdk_status rc = LW_SDK_ERR_IO;
    int locked = 0, moved = 0, staged = 0;
    rep_info *list = NULL, *grown;
    size_t n = 0;
    char stage[LWC_SPOOL_PATH_MAX], path[LWC_SPOOL_PATH_MAX], staged_data[LWC_SPOOL_PATH_MAX],
        final[LWC_SPOOL_PATH_MAX];
    if (path_fmt(stage, sizeof stage, "%s/.add-%s", s->run, report_id) ||
        path_fmt(staged_data, sizeof staged_data, "%s/data", stage) || report_dir(s, report_id, final, sizeof final)) {
        seterr(err, cap, "spool paths too long");
        return LW_SDK_ERR_USAGE;
    }

    /* The data, fsynced, and its size. */
    int fd = open(data_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || fsync(fd) != 0) {
        seterr(err, cap, "cannot use the data file %s: %s", data_path, strerror(errno));
        if (fd >= 0) close(fd);
        return LW_SDK_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        seterr(err, cap, "the data file %s is not a regular file", data_path);
        close(fd);
        return LW_SDK_ERR_USAGE;
    }
    close(fd);
    uint64_t bytes = (uint64_t)st.st_size + meta_len;

    if (rm_tree(stage) != 0 || mkdir(stage, 0700) != 0) {
        seterr(err, cap, "cannot create %s: %s", stage, strerror(errno));
        goto out;
    }
    staged = 1;
    path_fmt(path, sizeof path, "%s/meta.json", stage);
    if (write_file_sync(path, meta_json, meta_len) != 0) {
        seterr(err, cap, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }

    if ((rc = lock(s, err, cap)) != LW_SDK_OK) goto out;
    locked = 1;
    rc = LW_SDK_ERR_IO;
    if (lstat(final, &st) == 0 || errno != ENOENT) {
        seterr(err, cap, "report %s is in the spool already", report_id);
        rc = LW_SDK_ERR_USAGE;
        goto out;
    }
    if (bytes > s->max_bytes) {
        seterr(err, cap, "report %s is %" PRIu64 " bytes, more than the whole spool may hold (%" PRIu64 ")", report_id,
               bytes, s->max_bytes);
        lwc_logf(&s->log, LW_LOG_WARN, "spool: dropped report %s: %" PRIu64 " bytes is over spool_max_bytes (%" PRIu64 ")",
             report_id, bytes, s->max_bytes);
        counter_add(s, 1);
        unlink(data_path);
        rc = LW_SDK_ERR_LIMIT;
        goto out;
    }
    if ((rc = scan(s, &list, &n, err, cap)) != LW_SDK_OK) goto out;
    rc = LW_SDK_ERR_IO;
    grown = realloc(list, (n + 1) * sizeof *list);
    if (!grown) {
        seterr(err, cap, "out of memory");
        rc = LW_SDK_ERR_NOMEM;
        goto out;
    }
    list = grown;
    rep_info *r = &list[n];
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", report_id);
    snprintf(r->kind, sizeof r->kind, "%s", data_kind);
    r->seq = n ? list[n - 1].seq + 1 : 1;
    r->created_ms = wall_ms();
    r->dropped = -1;
    r->bytes = bytes;

    if (rename(data_path, staged_data) != 0) {
        seterr(err, cap, "cannot move %s into the spool (it must be on the spool's file system): %s", data_path,
               strerror(errno));
        goto out;
    }
    moved = 1;
    if ((rc = state_write(stage, r, 0, err, cap)) != LW_SDK_OK) goto out;
    rc = LW_SDK_ERR_IO;
    if (fsync_path(stage, 1) != 0) {
        seterr(err, cap, "cannot fsync %s: %s", stage, strerror(errno));
        goto out;
    }
    if (rename(stage, final) != 0) {
        seterr(err, cap, "cannot rename %s to %s: %s", stage, final, strerror(errno));
        goto out;
    }
    staged = 0;
    moved = 0;
    if (fsync_path(s->reports, 1) != 0) {
        /* It is in the spool; only its durability across a power cut is in doubt. */
        lwc_logf(&s->log, LW_LOG_WARN, "spool: cannot fsync %s: %s", s->reports, strerror(errno));
    }
    lwc_logf(&s->log, LW_LOG_INFO, "spool: report %s (%s, %" PRIu64 " bytes) added", report_id, data_kind, bytes);
    enforce_quota(s, list, n + 1, report_id);
    rc = LW_SDK_OK;
out:
    if (moved && rename(staged_data, data_path) != 0)
        lwc_logf(&s->log, LW_LOG_ERROR, "spool: cannot move %s back to %s: %s", staged_data, data_path, strerror(errno));
    if (staged) rm_tree(stage);
    if (locked) unlock(s);
    free(list);
    return rc;
}

static void fill_spooled(const lwc_spool *s, const rep_info *r, lwc_spooled *out) {
    memset(out, 0, sizeof *out);
    memcpy(out->id, r->id, sizeof out->id);
    memcpy(out->kind, r->kind, sizeof out->kind);
    path_fmt(out->meta_path, sizeof out->meta_path, "%s/%s/meta.json", s->reports, r->id);
    path_fmt(out->data_path, sizeof out->data_path, "%s/%s/data", s->reports, r->id);
    out->bytes = r->bytes;
    out->attempts = r->attempts;
    out->next_attempt_ms = r->next_ms;
    out->created_ms = r->created_ms;
    out->dropped = r->dropped;
}

lw_sdk_status lwc_spool_next(lwc_spool *s, int64_t now_ms, lwc_spooled *out, int *found, int64_t *wake_ms,
                             char *err, size_t cap) {
    if (!s || !out || !found) {
        seterr(err, cap, "lwc_spool_next: a NULL argument");
        return LW_SDK_ERR_USAGE;
    }
    *found = 0;
    if (wake_ms) *wake_ms = INT64_MAX;
    rep_info *list = NULL;
    size_t n = 0;
    lw_sdk_status rc = lock(s, err, cap);
    if (rc != LW_SDK_OK) return rc;
    rc = scan(s, &list, &n, err, cap);
    if (rc != LW_SDK_OK) goto out;
    for (size_t i = 0; i < n; i++) {
        if (wake_ms && list[i].next_ms < *wake_ms) *wake_ms = list[i].next_ms;
        if (!*found && list[i].next_ms <= now_ms) {
            fill_spooled(s, &list[i], out);
            *found = 1;
        }
    }
out:
    unlock(s);
    free(list);
    return rc;
}

/* Reads the state of one report under the lock: 1 found, 0 gone, -1 error (err). */
static int read_one(lwc_spool *s, const char *id, rep_info *r, char *err, size_t cap) {
    char why[256];
    int got = report_read(s, id, r, why, sizeof why);
    if (got < 0) seterr(err, cap, "report %s is damaged: %s", id, why);
    return got;
}

static lw_sdk_status check_id(const lwc_spool *s, const char *id, const char *fn, char *err, size_t cap) {
    if (!s || !id) {
        seterr(err, cap, "%s: a NULL argument", fn);
        return LW_SDK_ERR_USAGE;
    }
    if (!lw__uuid_valid(id)) {
        seterr(err, cap, "%s: \"%.40s\" is not a report id", fn, id);
        return LW_SDK_ERR_USAGE;
    }
    return LW_SDK_OK;
}

lw_sdk_status lwc_spool_backoff(lwc_spool *s, const char *report_id, int64_t next_attempt_ms, char *err, size_t cap) {
    lw_sdk_status rc = check_id(s, report_id, "lwc_spool_backoff", err, cap);
    if (rc != LW_SDK_OK) return rc;
    if ((rc = lock(s, err, cap)) != LW_SDK_OK) return rc;
    rep_info r;
    char dir[LWC_SPOOL_PATH_MAX];
    int got = read_one(s, report_id, &r, err, cap);
    if (got <= 0) {
        rc = got < 0 ? LW_SDK_ERR_IO : LW_SDK_OK;
        if (got == 0) lwc_logf(&s->log, LW_LOG_DEBUG, "spool: report %s is gone; no backoff to record", report_id);
        goto out;
    }
    r.attempts++;
    r.next_ms = next_attempt_ms;
    report_dir(s, report_id, dir, sizeof dir);
    rc = state_write(dir, &r, 1, err, cap);
out:
    unlock(s);
    return rc;
}

lw_sdk_status lwc_spool_claim_dropped(lwc_spool *s, const char *report_id, int64_t *dropped, char *err, size_t cap) {
    lw_sdk_status rc = check_id(s, report_id, "lwc_spool_claim_dropped", err, cap);
    if (rc != LW_SDK_OK) return rc;
    if (!dropped) {
        seterr(err, cap, "lwc_spool_claim_dropped: dropped is NULL");
        return LW_SDK_ERR_USAGE;
    }
    *dropped = 0;
    if ((rc = lock(s, err, cap)) != LW_SDK_OK) return rc;
    rep_info r;
    char dir[LWC_SPOOL_PATH_MAX];
    int got = read_one(s, report_id, &r, err, cap);
    if (got <= 0) {
        if (got == 0) seterr(err, cap, "report %s is not in the spool", report_id);
        rc = got < 0 ? LW_SDK_ERR_IO : LW_SDK_ERR_USAGE;
        goto out;
    }
    if (r.dropped >= 0) {
        *dropped = r.dropped;
        goto out;
    }
    uint64_t c = counter_read(s);
    r.dropped = c > INT64_MAX ? INT64_MAX : (int64_t)c;
    report_dir(s, report_id, dir, sizeof dir);
    /* The report first, then the counter: a crash in between counts these drops twice, never zero times. */
    if ((rc = state_write(dir, &r, 1, err, cap)) != LW_SDK_OK) goto out;
    if (c && (rc = counter_write(s, 0, err, cap)) != LW_SDK_OK) goto out;
    *dropped = r.dropped;
out:
    unlock(s);
    return rc;
}

lw_sdk_status lwc_spool_remove(lwc_spool *s, const char *report_id, lwc_spool_outcome outcome, char *err, size_t cap) {
    lw_sdk_status rc = check_id(s, report_id, "lwc_spool_remove", err, cap);
    if (rc != LW_SDK_OK) return rc;
    if ((rc = lock(s, err, cap)) != LW_SDK_OK) return rc;
    rep_info r;
    char why[256];
    int got = report_read(s, report_id, &r, why, sizeof why);
    int m = got == 0 ? 0 : move_out(s, report_id, err, cap);
    if (m < 0) {
        rc = LW_SDK_ERR_IO;
    } else if (m > 0) {
        if (outcome == LWC_SPOOL_REJECTED && got > 0 && r.dropped > 0) counter_add(s, (uint64_t)r.dropped);
        lwc_logf(&s->log, LW_LOG_DEBUG, "spool: report %s removed (%s)", report_id,
             outcome == LWC_SPOOL_DELIVERED ? "delivered" : "rejected");
    }
    unlock(s);
    return rc;
}

lw_sdk_status lwc_spool_count(lwc_spool *s, unsigned *n_out, uint64_t *bytes_out, char *err, size_t cap) {
    if (!s) {
        seterr(err, cap, "lwc_spool_count: spool is NULL");
        return LW_SDK_ERR_USAGE;
    }
    rep_info *list = NULL;
    size_t n = 0;
    lw_sdk_status rc = lock(s, err, cap);
    if (rc != LW_SDK_OK) return rc;
    rc = scan(s, &list, &n, err, cap);
    unlock(s);
    if (rc == LW_SDK_OK) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < n; i++) bytes += list[i].bytes;
        if (n_out) *n_out = (unsigned)n;
        if (bytes_out) *bytes_out = bytes;
    }
    free(list);
    return rc;
}

uint64_t lwc_spool_take_dropped(lwc_spool *s) {
    if (!s || lock(s, NULL, 0) != LW_SDK_OK) return 0;
    char err[256];
    uint64_t v = counter_read(s);
    if (v && counter_write(s, 0, err, sizeof err) != LW_SDK_OK) {
        lwc_logf(&s->log, LW_LOG_ERROR, "spool: cannot reset the dropped counter: %s", err);
        v = 0;
    }
    unlock(s);
    return v;
}
