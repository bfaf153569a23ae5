/* blob_file.c — a heap upload's temp file: direct writes from two buffers on writer threads,
 * or page-cache writes on the caller's thread. */
#define _GNU_SOURCE
#include "blob_file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "task_pool.h"

/* A direct write is at least this long: 1 MiB writes ran at the disk's speed here (dd: 1.0-1.2
 * GB/s; 256 KiB: 0.9). */
#define WRITE_BYTES (1u << 20)
/* A buffer holds a write and what came in the same request chunk past it (libmicrohttpd hands
 * over at most its 128 KiB buffer at a time). */
#define BUF_BYTES (WRITE_BYTES + (256u << 10))
/* Direct I/O needs buffers, offsets and lengths aligned to the device's blocks. */
#define ALIGN 4096u
/* Page-cache writes start their writeback every this many bytes, so that the fsync before the
 * answer waits for the tail only, and a large upload does not pile up as dirty pages that the
 * kernel flushes at once, stalling every other fsync on the disk (PostgreSQL's WAL among them).
 * Each start queues that much in the disk at once: with 8 MiB, traces reports at 3,000/s beside
 * two uploads had a p50 of 19-21 ms and 2,500-9,000 of 90,000 at 50 ms or more; with 1 MiB
 * 11-12 ms and 40-1,500 (four runs each), and uploads alone were as fast or faster. */
#define WRITEBACK_CHUNK (1u << 20)
/* Buffers kept for the next uploads rather than given back: touching new memory is slow
 * where the host takes free memory back. Two uploads' worth. */
#define CACHED_BUFFERS 4
#define WRITER_THREADS 4

struct ld_blob_files {
    pthread_mutex_t mu;
    char tmp_dir[1100];
    ld_task_pool *writers;
    int direct_max, direct_now;
    int direct_refused; /* the file system said no: logged once, then not tried again */
    char *cache[CACHED_BUFFERS];
    int ncache;
};

struct ld_blob_file {
    ld_blob_files *s;
    int fd;
    char path[1200];
    int direct;
    int renamed;
    uint64_t bytes;   /* taken from the caller */
    uint64_t flushed; /* page-cache mode: handed to writeback */
    /* direct mode: the writer thread owns wbuf while `writing`; the rest is under mu */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    char *fill;       /* being filled: fill_len bytes, not yet written */
    size_t fill_len;
    char *spare;      /* free; NULL while a write is under way */
    char *wbuf;
    size_t wlen;
    uint64_t woff;    /* where the next write goes (all before it is on disk) */
    int writing;
    int werr;         /* errno of a failed write */
    int abandoned;    /* freed while writing: the writer frees it */
    void (*ready)(void *arg);
    void *ready_arg;
    ld_task task;
};

static char *buffer_get(ld_blob_files *s) {
    char *b = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->ncache) b = s->cache[--s->ncache];
    pthread_mutex_unlock(&s->mu);
    if (!b && posix_memalign((void **)&b, ALIGN, BUF_BYTES) != 0) b = NULL;
    return b;
}

static void buffer_put(ld_blob_files *s, char *b) {
    if (!b) return;
    pthread_mutex_lock(&s->mu);
    if (s->ncache < CACHED_BUFFERS) {
        s->cache[s->ncache++] = b;
        b = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(b);
}

ld_blob_files *ld_blob_files_start(const char *tmp_dir, int direct_max, char *err, size_t cap) {
    ld_blob_files *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    snprintf(s->tmp_dir, sizeof s->tmp_dir, "%s", tmp_dir);
    s->direct_max = direct_max < 0 ? 0 : direct_max;
    pthread_mutex_init(&s->mu, NULL);
    if (s->direct_max) {
        s->writers = ld_task_pool_start(WRITER_THREADS, err, cap);
        if (!s->writers) {
            pthread_mutex_destroy(&s->mu);
            free(s);
            return NULL;
        }
    }
    return s;
}

void ld_blob_files_stop(ld_blob_files *s) {
    if (!s) return;
    ld_task_pool_stop(s->writers);
    for (int i = 0; i < s->ncache; i++) free(s->cache[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Whether direct writes go to `fd`; takes the buffers when they do. */
static int go_direct(ld_blob_file *f) {
    ld_blob_files *s = f->s;
    pthread_mutex_lock(&s->mu);
    int ok = !s->direct_refused && s->direct_now < s->direct_max;
    if (ok) s->direct_now++;
    pthread_mutex_unlock(&s->mu);
    if (!ok) return 0;
    int fl = fcntl(f->fd, F_GETFL);
    if (fl < 0 || fcntl(f->fd, F_SETFL, fl | O_DIRECT) != 0) {
        pthread_mutex_lock(&s->mu);
        if (!s->direct_refused)
            ld_warn("the file system of %s refuses direct I/O (%s): heap uploads go through the page cache",
                    s->tmp_dir, strerror(errno));
        s->direct_refused = 1;
        s->direct_now--;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    f->fill = buffer_get(s);
    f->spare = buffer_get(s);
    if (!f->fill || !f->spare) {
        buffer_put(s, f->fill);
        buffer_put(s, f->spare);
        f->fill = f->spare = NULL;
        (void)fcntl(f->fd, F_SETFL, fl);
        pthread_mutex_lock(&s->mu);
        s->direct_now--;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->idle, NULL);
    return 1;
}

ld_blob_file *ld_blob_file_create(ld_blob_files *s, char *err, size_t cap) {
    ld_blob_file *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    f->s = s;
    snprintf(f->path, sizeof f->path, "%s/upload-XXXXXX", s->tmp_dir);
    f->fd = mkostemp(f->path, O_CLOEXEC);
    if (f->fd < 0) {
        snprintf(err, cap, "cannot create a temp file in %s: %s", s->tmp_dir, strerror(errno));
        free(f);
        return NULL;
    }
    f->direct = go_direct(f);
    return f;
}

/* Writes all of buf at off; 0 or an errno. A direct write the file system refuses after all
 * (EINVAL: a device with larger blocks) is written through the page cache instead. */
static int write_at(int fd, const char *buf, size_t len, uint64_t off) {
    while (len) {
        ssize_t w = pwrite(fd, buf, len, (off_t)off);
        int e = w < 0 ? errno : 0;
        if (e == EINTR) continue;
        if (e == EINVAL) {
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0 && (fl & O_DIRECT) && fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0) continue;
        }
        if (e) return e; /* pwrite's, not what the fcntl calls left in errno */
        if (w == 0) return EIO;
        buf += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static void destroy(ld_blob_file *f) {
    if (f->fd >= 0) close(f->fd);
    if (!f->renamed) unlink(f->path);
    if (f->direct) {
        buffer_put(f->s, f->fill);
        buffer_put(f->s, f->spare);
        pthread_mutex_lock(&f->s->mu);
        f->s->direct_now--;
        pthread_mutex_unlock(&f->s->mu);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->idle);
    }
    free(f);
}

static void write_task(ld_task *t);

/* Under f->mu, no write under way, fill_len >= WRITE_BYTES: hands the aligned part of the
 * buffer to a writer; the rest (under ALIGN bytes) starts the other buffer. */
static void start_write(ld_blob_file *f) {
    size_t n = f->fill_len & ~(size_t)(ALIGN - 1);
    f->wbuf = f->fill;
    f->wlen = n;
    memcpy(f->spare, f->fill + n, f->fill_len - n);
    f->fill = f->spare;
    f->fill_len -= n;
    f->spare = NULL;
    f->writing = 1;
    f->task.fn = write_task;
    /* The pool stops only after the HTTP threads, which write, have stopped: never here. */
    if (ld_task_pool_run(f->s->writers, &f->task) != 0) {
        f->writing = 0;
        f->spare = f->wbuf;
        f->werr = ESHUTDOWN;
    }
}

static void write_task(ld_task *t) {
    ld_blob_file *f = (ld_blob_file *)((char *)t - offsetof(ld_blob_file, task));
    int e = write_at(f->fd, f->wbuf, f->wlen, f->woff);
    pthread_mutex_lock(&f->mu);
    f->writing = 0;
    f->spare = f->wbuf;
    f->wbuf = NULL;
    if (e) f->werr = e;
    else f->woff += f->wlen;
    if (f->abandoned) {
        pthread_mutex_unlock(&f->mu);
        destroy(f);
        return;
    }
    if (!f->werr && f->fill_len >= WRITE_BYTES) start_write(f);
    void (*ready)(void *) = f->ready;
    void *arg = f->ready_arg;
    f->ready = NULL;
    pthread_cond_broadcast(&f->idle);
    pthread_mutex_unlock(&f->mu);
    if (ready) ready(arg);
}

static int page_cache_write(ld_blob_file *f, const char *p, size_t len, char *err, size_t cap) {
    int e = write_at(f->fd, p, len, f->bytes);
    if (e) {
        snprintf(err, cap, "writing %s: %s", f->path, strerror(e));
        return -1;
    }
    f->bytes += len;
    if (f->bytes - f->flushed >= WRITEBACK_CHUNK) {
        (void)sync_file_range(f->fd, (off_t)f->flushed, (off_t)(f->bytes - f->flushed), SYNC_FILE_RANGE_WRITE);
        f->flushed = f->bytes;
    }
    return 0;
}

int ld_blob_file_write(ld_blob_file *f, const void *data, size_t len, char *err, size_t cap) {
    if (!f->direct) return page_cache_write(f, data, len, err, cap);
    const char *p = data;
    pthread_mutex_lock(&f->mu);
    while (len && !f->werr) {
        size_t room = BUF_BYTES - f->fill_len;
        if (!room) {
            /* Only a caller that goes on past LD_BLOB_FULL by more than the slack waits. */
            if (f->writing) pthread_cond_wait(&f->idle, &f->mu);
            else start_write(f);
            continue;
        }
        size_t n = len < room ? len : room;
        memcpy(f->fill + f->fill_len, p, n);
        f->fill_len += n;
        f->bytes += n;
        p += n;
        len -= n;
        if (f->fill_len >= WRITE_BYTES && !f->writing) start_write(f);
    }
    int rc = f->werr ? -1 : f->writing && f->fill_len >= WRITE_BYTES ? LD_BLOB_FULL : 0;
    if (rc < 0) snprintf(err, cap, "writing %s: %s", f->path, strerror(f->werr));
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void ld_blob_file_wait(ld_blob_file *f, void (*ready)(void *arg), void *arg) {
    if (f->direct) {
        pthread_mutex_lock(&f->mu);
        if (f->writing) {
            f->ready = ready;
            f->ready_arg = arg;
            pthread_mutex_unlock(&f->mu);
            return;
        }
        if (!f->werr && f->fill_len >= WRITE_BYTES) start_write(f);
        pthread_mutex_unlock(&f->mu);
    }
    ready(arg);
}

int ld_blob_file_sync(ld_blob_file *f, char *err, size_t cap) {
    int e = 0;
    if (f->direct) {
        pthread_mutex_lock(&f->mu);
        while (f->writing) pthread_cond_wait(&f->idle, &f->mu);
        e = f->werr;
        pthread_mutex_unlock(&f->mu);
        /* The whole blocks direct, the tail (not a whole block) through the page cache. */
        size_t whole = f->fill_len & ~(size_t)(ALIGN - 1);
        if (!e && whole) e = write_at(f->fd, f->fill, whole, f->woff);
        if (!e && f->fill_len > whole) {
            int fl = fcntl(f->fd, F_GETFL);
            if (fl < 0 || fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) != 0) e = errno;
            else e = write_at(f->fd, f->fill + whole, f->fill_len - whole, f->woff + whole);
        }
        if (!e) {
            f->woff += f->fill_len;
            f->fill_len = 0;
        }
    }
    if (!e && fsync(f->fd) != 0) e = errno;
    if (!e && close(f->fd) != 0) e = errno;
    else if (e) close(f->fd);
    f->fd = -1;
    if (e) {
        snprintf(err, cap, "writing %s: %s", f->path, strerror(e));
        return -1;
    }
    return 0;
}

int ld_blob_file_rename(ld_blob_file *f, const char *path, const char *dir, char *err, size_t cap) {
    if (rename(f->path, path) != 0) {
        snprintf(err, cap, "rename %s -> %s: %s", f->path, path, strerror(errno));
        return -1;
    }
    f->renamed = 1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = dfd < 0 ? -1 : fsync(dfd);
    int e = errno;
    if (dfd >= 0) close(dfd);
    if (rc != 0) {
        /* not known to be durable: it must not stay behind the 503 as a blob with no row */
        unlink(path);
        snprintf(err, cap, "fsync %s: %s", dir, strerror(e));
        return -1;
    }
    return 0;
}

uint64_t ld_blob_file_bytes(const ld_blob_file *f) { return f->bytes; }

int ld_blob_file_direct(const ld_blob_file *f) { return f->direct; }

void ld_blob_file_free(ld_blob_file *f) {
    if (!f) return;
    if (f->direct) {
        pthread_mutex_lock(&f->mu);
        if (f->writing) {
            f->abandoned = 1;
            f->ready = NULL;
            pthread_mutex_unlock(&f->mu);
            return;
        }
        pthread_mutex_unlock(&f->mu);
    }
    destroy(f);
}
