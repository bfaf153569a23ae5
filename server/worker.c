/* worker.c — one claimed report at a time. The analysis runs in a forked child (the worker
 * is single-threaded, so fork is safe) with a memory budget and a wall-clock limit. The budget
 * (LEAKD_ANALYSIS_MEMORY) is libleakcore's own count of what it allocates, which fails with a
 * message naming it; RLIMIT_DATA, set a little above it, is the backstop for what the library
 * does not count (zstd's buffers, libc) — not RLIMIT_AS, which would count the mapped dump and
 * a sanitizer's shadow memory. A crash, running out of memory or a timeout costs an attempt; a
 * corrupt dump, or one that needs more than the budget, fails at once; and SIGTERM gives the
 * report back without using an attempt. */
#define _GNU_SOURCE
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "blob_store.h"
#include "db.h"
#include "leakcore.h"
#include "log.h"
#include "metrics.h"
#include "queue.h"
#include "reports.h"
#include "scratch.h"
#include "uuid.h"

static volatile sig_atomic_t stopping;
static ld_worker_metrics *metrics; /* shared with the supervisor's /metrics; NULL when absent */

static void on_stop(int sig) {
    (void)sig;
    stopping = 1;
}

void ld_worker_owner(int pid, char *out, size_t cap) {
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(out, cap, "%s:%d", host, pid);
}

/* `factor` times LEAKD_DB_TIMEOUT in ms for ld_db_set_timeout (0: none), saturating. */
static int timeout_ms(int seconds, int factor) {
    long long ms = (long long)seconds * 1000 * factor;
    return ms > INT_MAX ? INT_MAX : ms < 0 ? 0 : (int)ms;
}

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

enum {
    CHILD_OK = 0,
    CHILD_BAD_INPUT = 3,
    CHILD_IO = 4,
    CHILD_NOMEM = 5,
    CHILD_NO_ROOM = 6,
    CHILD_OVER_BUDGET = 7,
    CHILD_NO_ROOM_UNSTATED = 8, /* past the free disk, and no frame said how far it goes */
    CHILD_DISK_TOO_SMALL = 9,   /* states more than tmp/'s file system could ever give it */
};
/* A dump that needs more free disk than there is waits this long, without using an attempt:
 * a full disk is rarely cleared within the seconds that three attempts in a row took. */
#define NO_ROOM_RETRY_S 300
/* Free disk a decompressed dump leaves in tmp/: the data dir's disk also takes uploads. */
#define DISK_RESERVE (256ull << 20)
/* RLIMIT_DATA = what the child has mapped + LEAKD_ANALYSIS_MEMORY + this: room for what
 * libleakcore's budget does not count (zstd's decompression window, a few MiB for our SDK's
 * dumps; qsort's and stdio's buffers), so that the budget, with its clear message, is what
 * stops an analysis that needs too much, and the rlimit only what escapes the count. */
#define UNCOUNTED_HEADROOM (64ull << 20)
/* A lease that could not be renewed is tried again this often, on a connection reset first:
 * waiting lease/3 (20 s) let an outage of ~41 s, or a restart of seconds falling on two
 * renewals, lose the lease, an attempt and the analysis under way to another worker. */
#define RENEW_RETRY_S 1.0
/* A failed attempt's wait before the next (LEAKD_RETRY_DELAY, doubled each time) stops here. */
#define RETRY_DELAY_MAX_S 3600
/* The idle worker's reconnect backoff stops here: a failed connect is cheap, and the reports
 * uploaded meanwhile wait this long after the database is back. */
#define RECONNECT_MAX_S 10u
/* Completion stores the whole result and groups it in one transaction: it may take many
 * times what LEAKD_DB_TIMEOUT allows a renewal or a claim. */
#define COMPLETE_TIMEOUT_FACTOR 10
/* In each analysis's scratch dir: the decompressed bytes it was given room for (decimal),
 * locked (flock LOCK_EX) by the analysis child for as long as it lives. */
#define RESERVATION "reserved"

/* The decompressed size the zstd frames of `blob` state, summed into *size (saturating): 1 when
 * every frame states its size, -1 when one does not (or cannot be read: the decompressor
 * will say why), 0 when the blob is no zstd (a plain dump: nothing to decompress). */
static int stated_size(const char *blob, uint64_t *size) {
    *size = 0;
    int fd = open(blob, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    void *m = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0) m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return -1;
    const uint8_t *p = m;
    size_t left = (size_t)sb.st_size;
    int all = lw_zstd_magic(p, left);
    /* each frame's header, and its blocks' headers to find the next; a skippable frame states 0 */
    while (all == 1 && left) {
        unsigned long long fcs = ZSTD_getFrameContentSize(p, left);
        size_t frame = ZSTD_findFrameCompressedSize(p, left);
        if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || ZSTD_isError(frame) || !frame) {
            all = -1;
            break;
        }
        *size = fcs > UINT64_MAX - *size ? UINT64_MAX : *size + fcs;
        p += frame;
        left -= frame;
    }
    munmap(m, (size_t)sb.st_size);
    return all;
}

/* The analysis child: writes the trace JSON, or the error message, to `out_path`. */
/* VmData of this process in bytes (0 when unknown). */
static uint64_t data_in_use(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The bytes the other analyses in the instance's scratch space `space` have been given room
 * for and not written yet: their reservations, less what their job dirs already hold (the free
 * disk counts that). A reservation whose lock can be taken belongs to an analysis that is gone
 * (killed with its worker; the dir is removed later): it counts for nothing. */
static uint64_t reserved_in(const char *space, const char *own_dir) {
    uint64_t pending = 0;
    DIR *d = opendir(space);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "job-", 4) != 0) continue;
        char dir[1700], path[2000], num[32] = {0};
        snprintf(dir, sizeof dir, "%s/%s", space, e->d_name);
        if (strcmp(dir, own_dir) == 0) continue;
        snprintf(path, sizeof path, "%s/" RESERVATION, dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        int live = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        ssize_t n = live ? read(fd, num, sizeof num - 1) : 0;
        close(fd);
        if (n <= 0) continue;
        uint64_t reserved = strtoull(num, NULL, 10), written = 0;
        DIR *jd = opendir(dir);
        for (struct dirent *f; jd && (f = readdir(jd));) {
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
            if (f->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
                written = add_sat(written, (uint64_t)sb.st_blocks * 512);
        }
        if (jd) closedir(jd);
        if (reserved > written) pending = add_sat(pending, reserved - written);
    }
    closedir(d);
    return pending;
}

/* The same over every instance's space in `tmp_root` (LEAKD_DATA_DIR/tmp): instances sharing
 * the data dir share its disk. */
static uint64_t reserved_by_others(const char *tmp_root, const char *own_dir) {
    uint64_t pending = 0;
    DIR *d = opendir(tmp_root);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, "job-", 4) == 0 || strncmp(e->d_name, "upload-", 7) == 0) continue;
        char space[1400];
        if (snprintf(space, sizeof space, "%s/%s", tmp_root, e->d_name) >= (int)sizeof space) continue;
        pending = add_sat(pending, reserved_in(space, own_dir));
    }
    closedir(d);
    return pending;
}

/* Records that the analysis in `tmp_dir` will write `need` bytes, until it closes the
 * descriptor returned, or dies: the file's lock goes with the process, whatever kills it. -1
 * when it cannot be recorded (then the others do not see it, as before reservations). */
static int reserve(const char *tmp_dir, uint64_t need) {
    char path[1300], num[32];
    snprintf(path, sizeof path, "%s/" RESERVATION, tmp_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int len = snprintf(num, sizeof num, "%llu", (unsigned long long)need);
    if (flock(fd, LOCK_EX) != 0 || write(fd, num, (size_t)len) != len) {
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

static void child_analyze(const ld_config *cfg, const char *blob, const char *out_path, const char *tmp_dir,
                          pid_t worker) {
    /* Die with the worker. RLIMIT_DATA counts from what the child already has mapped, so a
     * sanitizer's shadow memory does not eat it; LEAKD_ANALYSIS_MEMORY=0 sets neither limit. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* The worker may have died between fork and prctl: then nothing would ever stop this
     * analysis (up to LEAKD_ANALYSIS_TIMEOUT of CPU and a decompressed dump in tmp/). */
    if (getppid() != worker) _exit(CHILD_IO);
    struct rlimit core = {0, 0};
    if (cfg->analysis_memory) {
        uint64_t limit = data_in_use() + cfg->analysis_memory + UNCOUNTED_HEADROOM;
        struct rlimit data = {limit, limit};
        setrlimit(RLIMIT_DATA, &data);
    }
    setrlimit(RLIMIT_CORE, &core);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    FILE *out = fopen(out_path, "w");
    if (!out) _exit(CHILD_IO);
    /* Room to decompress: the frames state their sizes (our SDK and trimmer always write it). */
    uint64_t need = 0;
    int zstd = stated_size(blob, &need);
    /* Over the cap is the dump's fault, for good; short of disk is the server's, for now. */
    if (need > cfg->max_decompressed) {
        fprintf(out, "the dump decompresses to %llu bytes, over the %llu-byte cap (LEAKD_MAX_DECOMPRESSED_BYTES)",
                (unsigned long long)need, (unsigned long long)cfg->max_decompressed);
        fclose(out);
        _exit(CHILD_BAD_INPUT);
    }
    /* Analyses running at once each saw the same free disk, passed, and filled it together,
     * failing every attempt within a second. So the check and the reservation that follows it
     * are made under an flock of tmp/ (every instance's analyses: on this host, and on shared
     * storage as far as flock works there), and the room the other analyses were given and
     * have not used yet is not free. Without the lock (it failed) the check is as it was, and
     * ENOSPC below still only defers the report. */
    struct statvfs vfs;
    uint64_t free_bytes = UINT64_MAX, promised = 0;
    char root[1100];
    snprintf(root, sizeof root, "%s/tmp", cfg->data_dir);
    int lock = -1;
    if (zstd) {
        lock = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock >= 0 && flock(lock, LOCK_EX) != 0) {
            close(lock);
            lock = -1;
        }
    }
    if (zstd && statvfs(tmp_dir, &vfs) == 0) {
        free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        /* What the disk could ever free for us: all of it but the blocks kept for root (f_bavail
         * never counts those either). Past that less the reserve, waiting cannot help. */
        uint64_t most = (uint64_t)(vfs.f_blocks - (vfs.f_bfree - vfs.f_bavail)) * vfs.f_frsize;
        if (zstd > 0 && (most < DISK_RESERVE || most - DISK_RESERVE < need)) {
            fprintf(out, "the dump decompresses to %llu bytes, more than the file system of %s can ever hold for it: "
                    "%llu bytes in all, less the 256 MB kept free", (unsigned long long)need, root,
                    (unsigned long long)most);
            fclose(out);
            _exit(CHILD_DISK_TOO_SMALL);
        }
        if (lock >= 0) promised = reserved_by_others(root, tmp_dir);
    }
    uint64_t usable = free_bytes > promised ? free_bytes - promised : 0;
    if (usable < DISK_RESERVE || usable - DISK_RESERVE < need || (zstd < 0 && usable == DISK_RESERVE)) {
        if (promised)
            fprintf(out, "not enough free disk in %s to decompress %llu bytes (%llu free, %llu of it reserved by the "
                    "analyses under way)", tmp_dir, (unsigned long long)need, (unsigned long long)free_bytes,
                    (unsigned long long)(free_bytes - usable));
        else
            fprintf(out, "not enough free disk in %s to decompress %llu bytes (%llu free)", tmp_dir,
                    (unsigned long long)need, (unsigned long long)free_bytes);
        fclose(out);
        _exit(CHILD_NO_ROOM);
    }
    /* A dump without stated sizes reserves nothing (its cap below is what the others left); a
     * reservation that cannot be written leaves ENOSPC as the backstop. */
    int reservation = lock >= 0 && zstd > 0 ? reserve(tmp_dir, need) : -1;
    if (lock >= 0) close(lock);
    free_bytes = usable;
    /* What no frame states may take the free disk, not more: a bomb without a size used to be
     * written out to the cap, and fill the data dir's disk on the way (uploads then got 503). */
    uint64_t cap = cfg->max_decompressed, room = free_bytes - DISK_RESERVE;
    int room_caps = zstd < 0 && room < cap;
    if (room_caps) cap = room;
    lw_heap_options ho = {.struct_size = sizeof ho, .max_decompressed_bytes = cap, .tmp_dir = tmp_dir,
                          .memory_budget = cfg->analysis_memory};
    lw_error err = {0};
    lw_heap *heap = NULL;
    lw_status st = lw_heap_open(&heap, blob, &ho, &err);
    /* Decompressed (or failed): nothing more is written to tmp/, and what was is in the free
     * disk's count now (the mapped file is unlinked, so not in this dir's). */
    if (reservation >= 0) {
        char path[1300];
        snprintf(path, sizeof path, "%s/" RESERVATION, tmp_dir);
        unlink(path);
        close(reservation);
    }
    lw_leak_report *rep = NULL;
    if (st == LW_OK) st = lw_heap_analyze(heap, NULL, &rep, &err);
    /* The disk filled up under us all the same (an upload, another instance, a reservation
     * that could not be made): the server's fault, like the check above, not the dump's. An
     * unstated dump uses an attempt for it, as at its cap, so that a bomb does not come back
     * for ever. libleakcore's message carries strerror(errno), not the errno itself. */
    int no_space = st == LW_ERR_IO && (strstr(err.message, strerror(ENOSPC)) || strstr(err.message, strerror(EDQUOT)));
    if (no_space) {
        fprintf(out, "the disk of %s filled up while decompressing: %s", tmp_dir, err.message);
        fclose(out);
        _exit(zstd < 0 ? CHILD_NO_ROOM_UNSTATED : CHILD_NO_ROOM);
    }
    if (st == LW_ERR_LIMIT && room_caps && strstr(err.message, "-byte cap")) {
        /* The disk may have been short for a while only (another analysis's temp file): later,
         * using an attempt, so that a bomb does not come back for ever. */
        fprintf(out, "the dump decompresses to more than the %llu bytes of free disk in %s (less 256 MB), and a zstd "
                "frame of it did not state its size (our SDK and leakscan strip state it, the zstd tool reading a pipe "
                "does not)", (unsigned long long)cap, tmp_dir);
        fclose(out);
        _exit(CHILD_NO_ROOM_UNSTATED);
    }
    if (st != LW_OK) {
        fputs(err.message[0] ? err.message : lw_strerror(st), out);
        fclose(out);
        _exit(st == LW_ERR_FORMAT || st == LW_ERR_LIMIT ? CHILD_BAD_INPUT
              : st == LW_ERR_BUDGET                    ? CHILD_OVER_BUDGET
              : st == LW_ERR_NOMEM                     ? CHILD_NOMEM
                                                       : CHILD_IO);
    }
    char *json = lw_leak_report_to_json(rep, 0);
    if (!json || fputs(json, out) < 0 || fclose(out) != 0) _exit(CHILD_NOMEM);
    _exit(CHILD_OK);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (*len + n + 1 > cap) {
            cap = (*len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + *len, chunk, n);
        *len += n;
    }
    fclose(f);
    if (!buf) buf = calloc(1, 1);
    else buf[*len] = 0;
    return buf;
}

/* Removes every "<data dir>/" from a message: the report's error is read by anyone with the
 * app's keys (ingest keys ship inside apps), and the server's directory layout is none of their
 * business; "blobs/<app>/<report>.hprof.zst" is what the worker's log names too. */
static void unroot(char *msg, const char *data_dir) {
    size_t dl = strlen(data_dir);
    if (!msg || !dl) return;
    for (char *from = msg, *hit; (hit = strstr(from, data_dir));) {
        if (hit[dl] == '/') memmove(hit, hit + dl + 1, strlen(hit + dl + 1) + 1);
        else from = hit + dl;
    }
}

/* Keeps a message printable ASCII (it is stored as text in PostgreSQL). */
static void sanitize(char *msg) {
    for (unsigned char *p = (unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) *p = '?';
}

/* The wait after failed attempt `attempts`: LEAKD_RETRY_DELAY doubled for each attempt after
 * the first, RETRY_DELAY_MAX_S at most. */
static int retry_delay(const ld_config *cfg, int attempts) {
    long long d = cfg->retry_delay_s;
    for (int i = 1; i < attempts && d < RETRY_DELAY_MAX_S; i++) d *= 2;
    return d < RETRY_DELAY_MAX_S ? (int)d : RETRY_DELAY_MAX_S;
}

static void fail_job(const ld_config *cfg, ld_db *db, ld_job *job, const char *owner, char *msg, int permanent) {
    sanitize(msg);
    /* Whether this was the last attempt is the database's to say (ld_job_fail): a worker that
     * lost its lease to this claim may have given its attempt back since it was made. */
    int used = ld_job_attempts_used(job);
    int after = permanent ? 0 : retry_delay(cfg, used);
    int failed = 0;
    ld_status st = ld_job_fail(db, job, owner, msg, permanent, cfg->max_attempts, after, &failed);
    if (st != LD_OK) {
        ld_error("report %s: cannot record its failure (%s: %s); its lease will expire and it will be retried",
                 job->report_id, ld_strerror(st), ld_db_error(db));
        ld_metrics_analysis(metrics, LD_ANALYSIS_RETRIED, 0);
        return;
    }
    ld_metrics_analysis(metrics, failed ? LD_ANALYSIS_FAILED : LD_ANALYSIS_RETRIED, 0);
    if (!failed)
        ld_info("report %s: queued again; attempt %d of %d in %d s", job->report_id, used + 1, cfg->max_attempts, after);
}

/* This worker, alive, lost `job`'s lease to another claim: that claim counted an attempt, and
 * this one, given up, should not count too. */
static void give_back_lost_lease(ld_db *db, const ld_job *job) {
    ld_status st = ld_job_lease_lost(db, job);
    if (st == LD_OK)
        ld_info("report %s: attempt %d given back (another worker took over the lease)", job->report_id,
                ld_job_attempts_used(job));
    else if (st != LD_ERR_NOT_FOUND)
        ld_warn("report %s: cannot give back the attempt of the lost lease (%s: %s)", job->report_id, ld_strerror(st),
                ld_db_error(db));
}

/* Runs one job; the report's fate is written to the database here. */
static void run_job(const ld_config *cfg, ld_db *db, const char *owner, ld_job *job) {
    char blob[2400], out_path[1300], tmp_dir[1200], space[1100];
    /* Attempts also grow when a lease expires and its worker never says it lost it
     * (ld_job_lease_lost), or a dead worker's lease is freed: a report that keeps killing its
     * worker must end too. */
    int used = ld_job_attempts_used(job);
    if (used > cfg->max_attempts) {
        ld_warn("report %s: %d attempts; giving up", job->report_id, used - 1);
        char msg[] = "analysis gave up after repeated worker crashes or expired leases";
        fail_job(cfg, db, job, owner, msg, 1);
        return;
    }
    snprintf(blob, sizeof blob, "%s/%s", cfg->data_dir, job->blob_path);
    /* The child works in a directory of its own, removed whatever becomes of the child: a
     * killed analysis leaves no partly decompressed dump behind. */
    /* in the instance's scratch space (scratch.h), which the supervisor made at start */
    if (ld_scratch_dir(cfg->data_dir, cfg->listen, space, sizeof space) != 0) space[0] = 0;
    snprintf(tmp_dir, sizeof tmp_dir, "%s/job-%d", space, (int)getpid());
    ld_scratch_remove(tmp_dir);
    mkdir(space, 0750); /* should another instance's sweep ever have taken it */
    if (mkdir(tmp_dir, 0700) != 0) {
        ld_error("report %s: cannot create %s: %s; giving it back", job->report_id, tmp_dir, strerror(errno));
        ld_job_release(db, job, owner, 1);
        sleep(5);
        return;
    }
    snprintf(out_path, sizeof out_path, "%s/result-XXXXXX", tmp_dir);
    int fd = mkostemp(out_path, O_CLOEXEC);
    if (fd < 0) {
        ld_error("report %s: cannot create a result file in %s: %s; giving it back", job->report_id, tmp_dir, strerror(errno));
        ld_job_release(db, job, owner, 1);
        ld_scratch_remove(tmp_dir);
        sleep(5);
        return;
    }
    close(fd);
    ld_info("report %s of %s: analyzing %s (%lld bytes, attempt %d)", job->report_id, job->app_slug, job->blob_path,
            (long long)job->blob_bytes, used);
    /* `renewed`: when the lease was last renewed (or claimed), so when it runs out. */
    double t0 = mono(), renewed = t0, next_renew = t0 + cfg->lease_seconds / 3.0;
    int renew_failing = 0;
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid == 0) child_analyze(cfg, blob, out_path, tmp_dir, self);
    if (pid < 0) {
        ld_error("report %s: fork failed: %s; giving it back", job->report_id, strerror(errno));
        ld_job_release(db, job, owner, 1);
        ld_scratch_remove(tmp_dir);
        sleep(1);
        return;
    }
    int status = 0, timed_out = 0, stopped = 0, lost = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        double now = mono();
        if (stopping && !stopped) {
            stopped = 1;
            kill(pid, SIGKILL);
        } else if (now - t0 > cfg->analysis_timeout_s && !timed_out) {
            timed_out = 1;
            kill(pid, SIGKILL);
        } else if (now >= next_renew) {
            /* After a failure, on a connection reset first: the last one may have gone out on
             * the socket of a server that has restarted since. */
            ld_status st = renew_failing ? ld_db_check(db) : LD_OK;
            if (st == LD_OK) st = ld_job_renew(db, job, owner, cfg->lease_seconds);
            if (st == LD_OK) {
                if (renew_failing)
                    ld_info("report %s: lease renewed again, %.1f s after the last renewal", job->report_id, now - renewed);
                renew_failing = 0;
                renewed = now;
                next_renew = now + cfg->lease_seconds / 3.0;
            } else if (st == LD_ERR_NOT_FOUND) {
                ld_warn("report %s: lost its lease; abandoning the analysis", job->report_id);
                lost = 1;
                kill(pid, SIGKILL);
            } else {
                /* Once per outage in the log; tried again every RENEW_RETRY_S until it works or
                 * the lease is gone. */
                if (!renew_failing)
                    ld_warn("report %s: cannot renew the lease (%s: %s); trying again every %.0f s", job->report_id,
                            ld_strerror(st), ld_db_error(db), RENEW_RETRY_S);
                renew_failing = 1;
                next_renew = mono() + RENEW_RETRY_S;
            }
        }
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    double secs = mono() - t0;
    size_t len = 0;
    char *text = read_all(out_path, &len);
    ld_scratch_remove(tmp_dir);
    if (WIFEXITED(status) && WEXITSTATUS(status) != CHILD_OK) unroot(text, cfg->data_dir);
    char msg[700];
    if (lost) {
        give_back_lost_lease(db, job); /* someone else owns it now */
    } else if (stopped) {
        ld_info("report %s: analysis stopped by shutdown; giving it back without using an attempt", job->report_id);
        ld_job_release(db, job, owner, 1);
        ld_metrics_analysis(metrics, LD_ANALYSIS_RELEASED, secs);
    } else if (timed_out) {
        snprintf(msg, sizeof msg, "analysis timed out after %d s", cfg->analysis_timeout_s);
        ld_warn("report %s: %s (attempt %d of %d)", job->report_id, msg, used, cfg->max_attempts);
        fail_job(cfg, db, job, owner, msg, 0);
    } else if (WIFSIGNALED(status)) {
        snprintf(msg, sizeof msg, "analysis crashed (signal %d%s)", WTERMSIG(status),
                 WTERMSIG(status) == SIGKILL ? ", likely out of memory" : "");
        ld_warn("report %s: %s (attempt %d of %d)", job->report_id, msg, used, cfg->max_attempts);
        fail_job(cfg, db, job, owner, msg, 0);
    } else if (WEXITSTATUS(status) == CHILD_BAD_INPUT) {
        snprintf(msg, sizeof msg, "the heap dump cannot be analyzed: %.600s", text ? text : "?");
        ld_warn("report %s: %s", job->report_id, msg);
        fail_job(cfg, db, job, owner, msg, 1);
    } else if (WEXITSTATUS(status) == CHILD_OVER_BUDGET) {
        /* The dump needs more than the budget, and will again: another attempt cannot help. */
        snprintf(msg, sizeof msg, "analysis failed (over its memory budget, LEAKD_ANALYSIS_MEMORY = %llu bytes): %.500s",
                 (unsigned long long)cfg->analysis_memory, text && *text ? text : "?");
        ld_warn("report %s: %s", job->report_id, msg);
        fail_job(cfg, db, job, owner, msg, 1);
    } else if (WEXITSTATUS(status) == CHILD_DISK_TOO_SMALL) {
        /* Deferred every 300 s it stayed 'queued' for ever (until retention deleted it). */
        snprintf(msg, sizeof msg, "analysis failed (the disk is too small): %.560s", text && *text ? text : "?");
        ld_warn("report %s: %s", job->report_id, msg);
        fail_job(cfg, db, job, owner, msg, 1);
    } else if (WEXITSTATUS(status) == CHILD_NO_ROOM) {
        snprintf(msg, sizeof msg, "%.500s; trying again in %d s", text ? text : "not enough free disk", NO_ROOM_RETRY_S);
        sanitize(msg);
        ld_warn("report %s: %s, without using an attempt", job->report_id, msg);
        ld_metrics_analysis(metrics, LD_ANALYSIS_RELEASED, secs);
        if (ld_job_defer(db, job, owner, msg, NO_ROOM_RETRY_S, 1) != LD_OK)
            ld_error("report %s: cannot put it back (%s); its lease will expire and it will be retried", job->report_id,
                     ld_db_error(db));
    } else if (WEXITSTATUS(status) == CHILD_NO_ROOM_UNSTATED) {
        if (used >= cfg->max_attempts) {
            snprintf(msg, sizeof msg, "the heap dump cannot be analyzed: %.600s", text ? text : "?");
            ld_warn("report %s: %s (attempt %d of %d)", job->report_id, msg, used, cfg->max_attempts);
            fail_job(cfg, db, job, owner, msg, 1);
        } else {
            snprintf(msg, sizeof msg, "%.500s; trying again in %d s", text ? text : "not enough free disk",
                     NO_ROOM_RETRY_S);
            sanitize(msg);
            ld_warn("report %s: %s (attempt %d of %d)", job->report_id, msg, used, cfg->max_attempts);
            ld_metrics_analysis(metrics, LD_ANALYSIS_RETRIED, secs);
            if (ld_job_defer(db, job, owner, msg, NO_ROOM_RETRY_S, 0) != LD_OK)
                ld_error("report %s: cannot put it back (%s); its lease will expire and it will be retried",
                         job->report_id, ld_db_error(db));
        }
    } else if (WEXITSTATUS(status) != CHILD_OK) {
        int code = WEXITSTATUS(status);
        if (code == CHILD_NOMEM) /* malloc failed: RLIMIT_DATA, past what the budget counts, or the machine */
            snprintf(msg, sizeof msg, "analysis failed (out of memory; LEAKD_ANALYSIS_MEMORY = %llu bytes): %.500s",
                     (unsigned long long)cfg->analysis_memory, text && *text ? text : "out of memory");
        else if (code == CHILD_IO)
            snprintf(msg, sizeof msg, "analysis failed (I/O error): %.500s", text ? text : "?");
        else /* not one of ours: something in the child exited for it (a sanitizer's report, say) */
            snprintf(msg, sizeof msg, "analysis ended with exit status %d%s%.500s", code, text && *text ? ": " : "",
                     text ? text : "");
        ld_warn("report %s: %s (attempt %d of %d)", job->report_id, msg, used, cfg->max_attempts);
        fail_job(cfg, db, job, owner, msg, 0);
    } else {
        lw_leak_report *rep = NULL;
        lw_error err = {0};
        lw_json_limits lim = LD_RESULT_LIMITS;
        if (!text || lw_leak_report_from_json(text, len, &lim, &rep, &err) != LW_OK) {
            snprintf(msg, sizeof msg, "the analysis result could not be read: %s", err.message);
            ld_error("report %s: %s", job->report_id, msg);
            fail_job(cfg, db, job, owner, msg, 0);
        } else {
            int was = ld_db_set_timeout(db, timeout_ms(cfg->db_timeout_s, COMPLETE_TIMEOUT_FACTOR));
            ld_status st = ld_job_complete(db, job, owner, rep);
            int unanswered = st == LD_ERR_UNAVAILABLE;
            /* The database went away with the result in hand: store it once it is back, while
             * the lease may still be ours. Completion checks the lease's owner, so a report
             * another worker took over meanwhile is not counted twice. Dropping the result
             * instead left the report 'analyzing' until its lease expired (60 s), then analyzed
             * it all over again. */
            if (st == LD_ERR_UNAVAILABLE)
                ld_warn("report %s: the database is unavailable; its result will be stored when it is back",
                        job->report_id);
            double until = renewed + cfg->lease_seconds;
            while (st == LD_ERR_UNAVAILABLE && !stopping && mono() < until) {
                sleep(1);
                if (ld_db_check(db) == LD_OK) st = ld_job_complete(db, job, owner, rep);
            }
            ld_db_set_timeout(db, was);
            /* The lease is gone after a completion whose answer never came: that COMMIT may have
             * been done all the same, and then the report is done by this very attempt. */
            if (st == LD_ERR_NOT_FOUND && unanswered && ld_job_done_by(db, job) == LD_OK) {
                ld_info("report %s: its result was stored after all (the answer to its COMMIT was lost)", job->report_id);
                st = LD_OK;
            }
            if (st == LD_OK) {
                ld_info("report %s of %s: %zu leak group(s) in %.2f s", job->report_id, job->app_slug, rep->leak_count, secs);
                ld_metrics_analysis(metrics, LD_ANALYSIS_DONE, secs);
                /* Analyzed: the dump is not needed any more (LEAKD_KEEP_BLOBS=1 keeps it). */
                if (!cfg->keep_blobs) {
                    if (unlink(blob) != 0 && errno != ENOENT)
                        ld_warn("report %s: cannot delete %s: %s", job->report_id, blob, strerror(errno));
                    else if (ld_report_forget_blob(db, job->app_id, job->report_id) != LD_OK)
                        ld_warn("report %s: blob deleted, but its path could not be cleared", job->report_id);
                }
            }
            else if (st == LD_ERR_NOT_FOUND) {
                ld_warn("report %s: finished after losing the lease; the result is dropped", job->report_id);
                give_back_lost_lease(db, job);
            }
            else if (st == LD_ERR_INVALID) {
                snprintf(msg, sizeof msg, "%.600s", ld_db_error(db));
                ld_error("report %s: %s", job->report_id, msg);
                fail_job(cfg, db, job, owner, msg, 1);
            }
            else
                ld_error("report %s: cannot store the result (%s); it will be analyzed again when its lease expires",
                         job->report_id, ld_strerror(st));
            lw_leak_report_free(rep);
        }
    }
    free(text);
}

int ld_worker_main(const ld_config *cfg) {
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* A worker lives only as long as its supervisor: if `leakd serve` is killed (even with
     * SIGKILL), its workers stop instead of claiming reports nobody supervises. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* The supervisor may have died before that call: compare with the pid it left us (it may
     * itself be PID 1, in a container). */
    const char *sup = getenv("LEAKD_SUPERVISOR_PID");
    if (sup && atoi(sup) > 0 && getppid() != (pid_t)atoi(sup)) stopping = 1;
    char owner[200], store[LD_STORE_ID_LEN + 1], err[1024];
    ld_worker_owner(getpid(), owner, sizeof owner);
    /* the supervisor's (main.c); a worker started by hand reads the data dir's */
    const char *sup_store = getenv("LEAKD_SUPERVISOR_STORE_ID");
    if (lw__uuid_valid(sup_store)) {
        memcpy(store, sup_store, sizeof store);
    } else if (ld_blob_store_id(cfg->data_dir, store, err, sizeof err) != 0) {
        ld_error("%s", err);
        return 1;
    }
    metrics = ld_worker_metrics_attach();
    ld_db *db = NULL;
    unsigned backoff = 1;
    while (!stopping) {
        if (!db) {
            db = ld_db_connect(cfg->database_url, err, sizeof err);
            if (!db || ld_db_listen(db, "leakd_reports") != LD_OK) {
                ld_warn("cannot reach the database (%s); retrying in %u s", db ? ld_db_error(db) : err, backoff);
                ld_db_close(db);
                db = NULL;
                sleep(backoff);
                backoff = backoff * 2 > RECONNECT_MAX_S ? RECONNECT_MAX_S : backoff * 2;
                continue;
            }
            /* Without a limit, a PostgreSQL that hangs with its connection open (stopped, a stuck
             * disk) held the worker in a renewal for as long as it hung, and the analysis's
             * wall-clock limit and SIGTERM waited with it. Completion gets longer (see there). */
            ld_db_set_timeout(db, timeout_ms(cfg->db_timeout_s, 1));
            backoff = 1;
            ld_info("worker %s ready", owner);
        }
        ld_job job;
        ld_status st = ld_job_claim(db, owner, store, cfg->lease_seconds, &job);
        if (st == LD_OK) {
            run_job(cfg, db, owner, &job);
            ld_job_clear(&job);
        } else if (st == LD_ERR_NOT_FOUND) {
            /* Woken by NOTIFY on a new report, or when the first report waiting for its time (a
             * retry's delay, an expired lease) may be claimed; the poll every 5 s is the net. */
            long due = -1, wait_ms = 5000;
            if (ld_job_next_due(db, &due) == LD_OK && due >= 0 && due < wait_ms) wait_ms = due < 10 ? 10 : due;
            if (ld_db_wait(db, (int)wait_ms) < 0) { /* reconnect, and LISTEN again */
                ld_db_close(db);
                db = NULL;
            }
        } else {
            ld_warn("cannot claim a report (%s: %s)", ld_strerror(st), ld_db_error(db));
            if (ld_db_check(db) != LD_OK) {
                ld_db_close(db);
                db = NULL;
            }
            sleep(1);
        }
    }
    ld_db_close(db);
    ld_info("worker %s stopped", owner);
    return 0;
}
