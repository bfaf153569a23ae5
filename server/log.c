/* log.c — one line per event. Lines are whole: each write(2) carries whole lines, at most
 * PIPE_BUF bytes, so lines from threads and processes never interleave, even on a pipe.
 * The executable's only global state: the log's settings, and its writer.
 *
 * In `leakd serve` the lines go through a buffer that a writer thread empties (ld_log_writer_start):
 * the request log is written by the event threads, and a write(2) to a file can block for
 * milliseconds (page-cache allocation, write-back of the page being appended to), holding up
 * every connection of that thread meanwhile. */
#define _GNU_SOURCE
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "utf8.h"

static char log_role[16] = "leakd";
static ld_log_level log_min = LD_INFO;
static int log_json;
/* This process's id, for every line: getpid() is a system call each time (glibc stopped caching
 * it), one of ten a traces report cost leakd. Set by ld_log_init and again in a forked child. */
static pid_t log_pid;

/* How long the writer lets lines gather before it writes them: ~50 lines a write at 5,000
 * requests a second, instead of a write per line. A warning or error is written at once. */
#define LINGER_NS 10000000L
/* Room for ~1 s of the request log at 5,000 requests a second; a thread that finds it full
 * waits for the writer (lines are never dropped). */
#define BUF_BYTES (1u << 20)
/* A log that is a file: the writer starts the write-back of what it wrote every this many bytes.
 * Left to the kernel, a file appended to without pause is written back whole once its oldest
 * dirty page is 30 s old (vm.dirty_expire_centisecs): at 5,000 requests a second, ~30 MB at once,
 * and every commit's fdatasync meanwhile waited behind it (a second with a p99 of 56 ms in the
 * load benchmark, against 12-30 ms in the others). */
#define WRITEBACK_BYTES (1u << 20)

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, room; /* lines to write; room freed */
    pthread_t thread;
    int running, stopping, urgent;
    int regular;       /* stderr is a regular file (set by the writer when it starts) */
    size_t unflushed;  /* bytes the writer wrote since it last started their write-back */
    size_t len;
    char *buf;   /* lines queued: len bytes */
    char *spare; /* the other half of mem, which the writer writes from outside the lock */
    char mem[2][BUF_BYTES];
} logq = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .room = PTHREAD_COND_INITIALIZER};
/* (buf and spare are set by ld_log_writer_start: initialised here, mem would be 2 MiB of the
 * executable's data instead of zero pages.) */

/* Writes buf[0..len) to stderr, at most PIPE_BUF bytes a call, each cut after a newline. */
static void write_lines(const char *buf, size_t len) {
    while (len > 0) {
        size_t n = len;
        if (n > PIPE_BUF) {
            n = PIPE_BUF;
            while (n > 0 && buf[n - 1] != '\n') n--;
            if (n == 0) n = PIPE_BUF; /* no line is that long (ld_log cuts them) */
        }
        ssize_t w = write(STDERR_FILENO, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* nowhere to report it */
        buf += w;
        len -= (size_t)w;
    }
}

/* After the writer wrote n bytes: starts the write-back of the file's dirty pages every
 * WRITEBACK_BYTES, without waiting for it (a pipe or terminal has none). */
static void start_writeback(size_t n) {
#ifdef SYNC_FILE_RANGE_WRITE
    if (!logq.regular) return;
    logq.unflushed += n;
    if (logq.unflushed < WRITEBACK_BYTES) return;
    logq.unflushed = 0;
    if (sync_file_range(STDERR_FILENO, 0, 0, SYNC_FILE_RANGE_WRITE) != 0) logq.regular = 0; /* not supported here */
#else
    (void)n;
#endif
}

static void *writer_main(void *arg) {
    (void)arg;
    struct stat st;
    logq.regular = fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode);
    logq.unflushed = 0;
    pthread_mutex_lock(&logq.mu);
    for (;;) {
        while (logq.len == 0 && !logq.stopping) pthread_cond_wait(&logq.work, &logq.mu);
        if (logq.len == 0) break; /* stopping, and all written */
        if (!logq.urgent && !logq.stopping && logq.len < BUF_BYTES / 2) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_nsec += LINGER_NS;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (!logq.urgent && !logq.stopping && logq.len < BUF_BYTES / 2)
                if (pthread_cond_timedwait(&logq.work, &logq.mu, &until) != 0) break;
        }
        char *out = logq.buf;
        size_t n = logq.len;
        logq.buf = logq.spare;
        logq.spare = out;
        logq.len = 0;
        logq.urgent = 0;
        pthread_cond_broadcast(&logq.room);
        pthread_mutex_unlock(&logq.mu);
        write_lines(out, n);
        start_writeback(n);
        pthread_mutex_lock(&logq.mu);
    }
    logq.running = 0; /* under the lock: a line logged from here on is written by its thread */
    pthread_cond_broadcast(&logq.room);
    pthread_mutex_unlock(&logq.mu);
    return NULL;
}

/* Queues one line for the writer; 0 when there is no writer (the caller writes it). */
static int queue_line(const char *line, size_t len, int urgent) {
    pthread_mutex_lock(&logq.mu);
    if (!logq.running) {
        pthread_mutex_unlock(&logq.mu);
        return 0;
    }
    while (logq.len + len > BUF_BYTES) pthread_cond_wait(&logq.room, &logq.mu);
    int was_empty = logq.len == 0;
    memcpy(logq.buf + logq.len, line, len);
    logq.len += len;
    if (urgent) logq.urgent = 1;
    /* The writer sleeps until lines come, then lingers: only the first line of a lull, a
     * warning, or a half-full buffer wakes it. */
    if (was_empty || urgent || logq.len >= BUF_BYTES / 2) pthread_cond_signal(&logq.work);
    pthread_mutex_unlock(&logq.mu);
    return 1;
}

/* fork(2) in a process with a writer: the child has no writer thread, and writes its own lines
 * (the parent's queued ones stay the parent's to write). */
static void before_fork(void) { pthread_mutex_lock(&logq.mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&logq.mu); }
static void after_fork_child(void) {
    pthread_mutex_init(&logq.mu, NULL);
    pthread_cond_init(&logq.work, NULL);
    pthread_cond_init(&logq.room, NULL);
    logq.running = logq.stopping = logq.urgent = 0;
    logq.len = 0;
}

static void register_atfork(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

int ld_log_writer_start(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&logq.mu);
    int rc = 0;
    if (!logq.running) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the linger */
        pthread_cond_destroy(&logq.work);
        pthread_cond_init(&logq.work, &ca);
        pthread_condattr_destroy(&ca);
        logq.stopping = 0;
        if (!logq.buf) {
            logq.buf = logq.mem[0];
            logq.spare = logq.mem[1];
        }
        rc = pthread_create(&logq.thread, NULL, writer_main, NULL);
        if (rc == 0) logq.running = 1;
    }
    pthread_mutex_unlock(&logq.mu);
    return rc;
}

void ld_log_writer_stop(void) {
    pthread_mutex_lock(&logq.mu);
    if (!logq.running) {
        pthread_mutex_unlock(&logq.mu);
        return;
    }
    logq.stopping = 1;
    pthread_cond_signal(&logq.work);
    pthread_mutex_unlock(&logq.mu);
    pthread_join(logq.thread, NULL);
}

static void pid_after_fork(void) { log_pid = getpid(); }
static void register_pid_atfork(void) { pthread_atfork(NULL, NULL, pid_after_fork); }

void ld_log_init(const char *role, const char *level, const char *format) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_pid_atfork);
    log_pid = getpid();
    snprintf(log_role, sizeof log_role, "%s", role);
    log_json = format && strcmp(format, "json") == 0;
    if (level) {
        if (strcmp(level, "debug") == 0) log_min = LD_DEBUG;
        else if (strcmp(level, "warn") == 0) log_min = LD_WARN;
        else if (strcmp(level, "error") == 0) log_min = LD_ERROR;
        else log_min = LD_INFO;
    }
}

/* Whether msg[0..len) holds a byte that a text line cannot carry as it is. Most messages hold
 * none (the request log: thousands a second), and are copied as they are. */
static int needs_escape(const char *msg, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c < 0x20 || c == 0x7f || c == '\\') return 1;
    }
    return 0;
}

/* Appends msg[0..len) to dst (len_io bytes used of cap) with each control byte escaped (\n,
 * \r, \t, \xNN) and each backslash doubled: a client's percent-decoded %0A in a URL must not
 * start a line of its own making, and a \n in the log can only be an escaped newline. Stops
 * before an escape that does not fit, so none is cut in half. */
static void append_escaped(char *dst, size_t *len_io, size_t cap, const char *msg, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t n = *len_io;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)msg[i];
        char esc[4];
        size_t k;
        if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
            k = 2;
        } else if (c < 0x20 || c == 0x7f) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[c >> 4];
            esc[3] = hex[c & 0xf];
            k = 4;
        } else {
            esc[0] = (char)c;
            k = 1;
        }
        if (n + k > cap) break;
        memcpy(dst + n, esc, k);
        n += k;
    }
    *len_io = n;
}

/* Appends msg[0..len) to dst as the inside of a JSON string, up to `cap` (whole escapes and
 * characters only). JSON text is UTF-8 (RFC 8259 8.1): a byte that is not part of a whole,
 * well-formed character (a client's raw path, a message cut mid-character) is written as
 * the text \xNN, as the text format writes it; control characters and DEL as \u00NN. */
static void append_json_escaped(char *dst, size_t *len_io, size_t cap, const char *msg, size_t len) {
    size_t n = *len_io;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)msg[i];
        char esc[8];
        const char *out = esc;
        size_t k, adv = 1;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            k = 2;
        } else if (c < 0x20 || c == 0x7f) {
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        } else if (c < 0x80) {
            esc[0] = (char)c;
            k = 1;
        } else {
            size_t want = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
            if (want && want <= len - i && ld_utf8_prefix(msg + i, want) == want) {
                out = msg + i;
                k = adv = want;
            } else {
                k = (size_t)snprintf(esc, sizeof esc, "\\\\x%02x", c);
            }
        }
        if (n + k > cap) break;
        memcpy(dst + n, out, k);
        n += k;
        i += adv;
    }
    *len_io = n;
}

void ld_log(ld_log_level level, const char *fmt, ...) {
    if (level < log_min) return;
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char line[4096];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char msg[1800];
    va_list ap;
    va_start(ap, fmt);
    int mn = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t msg_len = mn < 0 ? 0 : (size_t)mn >= sizeof msg ? sizeof msg - 1 : (size_t)mn;
    /* libpq's messages (and libmicrohttpd's) end with a newline: the line's own is enough. */
    while (msg_len > 0 && (msg[msg_len - 1] == '\n' || msg[msg_len - 1] == '\r')) msg_len--;
    msg[msg_len] = '\0';
    char ts[96]; /* room for any int the compiler imagines in each field */
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
    size_t len;
    int pid = log_pid ? (int)log_pid : (int)getpid();
    if (!log_json) {
        /* Room is kept for the newline. */
        int n = snprintf(line, sizeof line - 1, "%s leakd %s[%d] %s: ", ts, log_role, pid, names[level]);
        len = n < 0 ? 0 : (size_t)n >= sizeof line - 1 ? sizeof line - 2 : (size_t)n;
        if (!needs_escape(msg, msg_len)) {
            size_t k = msg_len < sizeof line - 1 - len ? msg_len : sizeof line - 1 - len;
            memcpy(line + len, msg, k);
            len += k;
        } else {
            append_escaped(line, &len, sizeof line - 1, msg, msg_len);
        }
    } else {
        /* One JSON object a line; the message is escaped. */
        int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"process\":\"%s\",\"pid\":%d,\"msg\":\"", ts,
                         names[level], log_role, pid);
        len = n < 0 ? 0 : (size_t)n;
        append_json_escaped(line, &len, sizeof line - 3, msg, msg_len);
        line[len++] = '"';
        line[len++] = '}';
    }
    line[len++] = '\n';
    if (!queue_line(line, len, level >= LD_WARN)) write_lines(line, len);
}
