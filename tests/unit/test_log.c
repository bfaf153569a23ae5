/* test_log.c — leakd's log lines (server/log.c) with and without the writer thread: every line
 * is written whole, once, in each thread's order, in writes of whole lines no larger than
 * PIPE_BUF; a lone line is written without waiting for more; stopping the writer writes what
 * was queued; a child forked from a process with a writer writes its own lines; a log that is
 * a file does not keep megabytes dirty in the page cache.
 *
 * stderr is a SOCK_SEQPACKET socket here: each write(2) arrives as one message, so the tests
 * see the writes themselves, not only the bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

#define THREADS 4
#define LINES_EACH 5000

/* What arrived on the socket that stands for stderr. */
typedef struct {
    int fd;
    char *text;
    size_t len, cap;
    size_t writes, too_large, cut; /* writes over PIPE_BUF, writes not ending with a newline */
    int stop;
} sink;

static sink s;
static int saved_stderr = -1;
static pthread_t reader;

static void *read_all(void *arg) {
    (void)arg;
    char buf[65536];
    for (;;) {
        struct pollfd p = {s.fd, POLLIN, 0};
        if (poll(&p, 1, 50) == 0) {
            if (__atomic_load_n(&s.stop, __ATOMIC_ACQUIRE)) break;
            continue;
        }
        ssize_t n = recv(s.fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        s.writes++;
        if ((size_t)n > PIPE_BUF) s.too_large++;
        if (buf[n - 1] != '\n') s.cut++;
        if (s.len + (size_t)n + 1 > s.cap) {
            s.cap = (s.len + (size_t)n + 1) * 2;
            s.text = realloc(s.text, s.cap);
        }
        memcpy(s.text + s.len, buf, (size_t)n);
        s.len += (size_t)n;
        s.text[s.len] = '\0';
    }
    return NULL;
}

/* stderr becomes one end of a fresh socket pair, read by a thread into `s`. */
static int setup(void **state) {
    (void)state;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return -1;
    memset(&s, 0, sizeof s);
    s.fd = sv[0];
    saved_stderr = dup(STDERR_FILENO);
    dup2(sv[1], STDERR_FILENO);
    close(sv[1]);
    ld_log_init("test", "info", "text");
    return pthread_create(&reader, NULL, read_all, NULL);
}

/* Ends the capture: what was written so far is in `s`. */
static void capture_end(void) {
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(reader, NULL);
}

/* Puts stderr back, and passes on what was not a log line: cmocka's own messages (a failed
 * assertion's) went to the socket too. */
static int teardown(void **state) {
    (void)state;
    ld_log_writer_stop();
    if (!s.stop) capture_end();
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    char buf[65536];
    ssize_t n;
    while ((n = recv(s.fd, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0) {
        buf[n] = '\0';
        fputs(buf, stderr);
    }
    for (char *l = s.text, *end; l && *l; l = end + 1) {
        end = strchr(l, '\n');
        if (!end) end = l + strlen(l) - 1;
        if (!memmem(l, (size_t)(end - l), " leakd test[", 12) && !memmem(l, (size_t)(end - l), "\"process\":\"test\"", 16))
            fprintf(stderr, "%.*s\n", (int)(end - l), l);
    }
    close(s.fd);
    free(s.text);
    return 0;
}

static size_t count(const char *needle) {
    size_t n = 0;
    for (const char *p = s.text ? strstr(s.text, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Waits up to 5 s for `needle` to have arrived. */
static int arrives(const char *needle) {
    for (int i = 0; i < 500; i++) {
        if (s.text && strstr(s.text, needle)) return 1;
        usleep(10000);
    }
    return 0;
}

static void *log_many(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int n = 0; n < LINES_EACH; n++)
        ld_info("line t=%d n=%05d %.*s", t, n, (n * 7) % 300, "................................................"
                                                              "................................................"
                                                              "................................................"
                                                              "................................................"
                                                              "................................................"
                                                              "................................................"
                                                              "................................................");
    return NULL;
}

/* Every line once and whole, each thread's in order, in writes of whole lines of at most
 * PIPE_BUF bytes, many lines a write. */
static void test_writer_keeps_lines_whole_and_in_order(void **state) {
    (void)state;
    assert_int_equal(ld_log_writer_start(), 0);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, log_many, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    ld_log_writer_stop();
    capture_end();

    assert_int_equal(s.too_large, 0);
    assert_int_equal(s.cut, 0);
    int next[THREADS] = {0};
    size_t lines = 0;
    for (char *l = s.text, *end; l && *l; l = end + 1) {
        end = strchr(l, '\n');
        assert_non_null(end);
        const char *m = strstr(l, "info: line t=");
        assert_true(m && m < end);
        int t, n;
        assert_int_equal(sscanf(m, "info: line t=%d n=%d", &t, &n), 2);
        assert_true(t >= 0 && t < THREADS);
        assert_int_equal(n, next[t]); /* in order, none missing, none twice */
        next[t]++;
        const char *after = m + strlen("info: line t=0 n=00000");
        const char *dots = memchr(after, '.', (size_t)(end - after));
        assert_int_equal(dots ? end - dots : 0, (n * 7) % 300); /* whole */
        lines++;
    }
    for (int t = 0; t < THREADS; t++) assert_int_equal(next[t], LINES_EACH);
    assert_int_equal(lines, THREADS * LINES_EACH);
    assert_true(s.writes * 2 < lines); /* gathered, not a write a line */
}

/* A line alone is written without waiting for others, and a warning too; the writer keeps
 * running. */
static void test_lone_lines_are_written(void **state) {
    (void)state;
    assert_int_equal(ld_log_writer_start(), 0);
    ld_info("a lone info line");
    assert_true(arrives("info: a lone info line\n"));
    ld_warn("a warning");
    assert_true(arrives("warn: a warning\n"));
    ld_log_writer_stop();
    capture_end();
    assert_int_equal(count("a lone info line"), 1);
}

/* Without a writer each line is written by its own thread, at once. */
static void test_without_writer_lines_are_written_at_once(void **state) {
    (void)state;
    ld_info("written by the caller");
    assert_true(arrives("info: written by the caller\n"));
    capture_end();
    assert_int_equal(s.writes, 1);
}

/* A child forked while the writer runs writes its own lines (it has no writer thread), and
 * the parent's queued lines are written once, by the parent. */
static void test_forked_child_writes_its_own_lines(void **state) {
    (void)state;
    assert_int_equal(ld_log_writer_start(), 0);
    ld_info("the parent's line");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ld_info("the child's line");
        _exit(0); /* no flush: a queued line would be lost */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(arrives("info: the child's line\n"));
    ld_log_writer_stop();
    capture_end();
    assert_int_equal(count("the child's line"), 1);
    assert_int_equal(count("the parent's line"), 1);
}

/* A message's control bytes never reach a text log raw: a URL's percent-decoded %0A would
 * otherwise start a line of the client's making (a forged timestamp and level). A backslash is
 * escaped too, so that `\n` in a line can only mean an escaped newline. */
static void test_text_escapes_control_bytes(void **state) {
    (void)state;
    ld_info("GET /x\n2026-12-03T11:15:00.000Z leakd serve[1] error: FORGED\r\tx\x01y\x7fz C:\\dir 404");
    capture_end();
    assert_int_equal(count("\n"), 1); /* the line's own end */
    assert_non_null(strstr(s.text, "info: GET /x\\n2026-12-03T11:15:00.000Z leakd serve[1] error: FORGED"
                                    "\\r\\tx\\x01y\\x7fz C:\\\\dir 404\n"));
}

/* libpq's messages end with a newline (and may hold more lines): the last one is dropped, the
 * others are escaped, so its error is one line. */
static void test_text_drops_a_trailing_newline(void **state) {
    (void)state;
    ld_error("cannot connect to the database: %s",
             "connection to server at \"127.0.0.1\", port 55998 failed: Connection refused\n"
             "\tIs the server running on that host and accepting TCP/IP connections?\n");
    capture_end();
    assert_int_equal(count("\n"), 1);
    assert_non_null(strstr(s.text, "error: cannot connect to the database: connection to server at \"127.0.0.1\", port "
                                   "55998 failed: Connection refused\\n\\tIs the server running on that host and "
                                   "accepting TCP/IP connections?\n"));
}

/* A message of control bytes, escaped to four times its size, is cut at the line's limit
 * between escapes, never inside one, and the line still ends with its newline. */
static void test_text_escapes_are_cut_whole(void **state) {
    (void)state;
    char msg[1700];
    memset(msg, 0x01, sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    ld_info("%s", msg);
    capture_end();
    assert_int_equal(count("\n"), 1);
    assert_true(s.len <= 4096);
    assert_true(s.len > 3000);
    const char *m = strstr(s.text, "info: ") + strlen("info: ");
    assert_int_equal((size_t)(s.text + s.len - 1 - m) % 4, 0);
    for (const char *p = m; p < s.text + s.len - 1; p += 4) assert_memory_equal(p, "\\x01", 4);
}

/* JSON escapes as JSON does (\u00XX, \\, \"); a trailing newline is dropped there too. */
static void test_json_escapes_and_drops_a_trailing_newline(void **state) {
    (void)state;
    ld_log_init("test", "info", "json");
    ld_info("a\nb\rc\td\x01" "e\\f\"g\n");
    capture_end();
    assert_int_equal(count("\n"), 1);
    assert_non_null(strstr(s.text, "\"msg\":\"a\\u000ab\\u000dc\\u0009d\\u0001e\\\\f\\\"g\"}\n"));
}

/* JSON text is UTF-8: whole characters pass as they are; a byte that is no part of one (a
 * client's raw path, a message cut mid-character) is written as the text \xNN, and DEL as
 * \u007f. They were copied raw: Python's json.loads refused such lines (audit, 2026-12-03). */
static void test_json_lines_are_utf8_whatever_the_message(void **state) {
    (void)state;
    ld_log_init("test", "info", "json");
    ld_info("GET /\xff\xfe a\x7f" "b \xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x9b \xc0\xaf \xed\xa0\x80 \xe2\x82");
    capture_end();
    assert_non_null(strstr(s.text, "\"msg\":\"GET /\\\\xff\\\\xfe a\\u007fb \xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x9b "
                                   "\\\\xc0\\\\xaf \\\\xed\\\\xa0\\\\x80 \\\\xe2\\\\x82\"}\n"));
}

/* A long message of 2-byte characters is cut at 1,799 bytes, inside one: the half left over
 * is escaped, never written raw. */
static void test_json_message_cut_inside_a_character_stays_utf8(void **state) {
    (void)state;
    ld_log_init("test", "info", "json");
    char msg[2000];
    for (size_t i = 0; i + 1 < sizeof msg; i += 2) memcpy(msg + i, "\xc3\xa9", 2);
    msg[sizeof msg - 1] = 0;
    ld_info("%s", msg);
    capture_end();
    const char *m = strstr(s.text, "\"msg\":\"");
    assert_non_null(m);
    for (const unsigned char *p = (const unsigned char *)m; *p; p++) assert_true(*p != 0xc3 || p[1] == 0xa9);
    assert_non_null(strstr(s.text, "\xc3\xa9\\\\xc3\"}\n"));
}

/* cachestat(2) (Linux 6.5; Debian 12's headers predate it): how many of a file's pages in the
 * page cache are dirty. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct cachestat_range_ {
    uint64_t off, len;
};
struct cachestat_ {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* The writer starts the write-back of a log file as it goes (log.c, WRITEBACK_BYTES): of 3 MiB
 * logged, no more than half is still dirty when the writer stops. Without it the kernel keeps
 * all of it dirty for 30 s, then writes it at once while the database's commits wait. */
static void test_file_log_is_written_back_as_it_goes(void **state) {
    (void)state;
    char path[] = "test_log_writeback.XXXXXX"; /* in the build tree: a disk, not tmpfs */
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    ld_log_init("test", "info", "text");
    assert_int_equal(ld_log_writer_start(), 0);
    static const char pad[] = "................................................................"
                              "................................................................"
                              "................................................................";
    for (int n = 0; n < 16000; n++) ld_info("line %05d %s", n, pad); /* ~3.4 MB */
    ld_log_writer_stop();
    dup2(saved, STDERR_FILENO);
    close(saved);

    off_t size = lseek(fd, 0, SEEK_END);
    assert_true(size > 3 * (1 << 20));
    struct cachestat_range_ range = {0, (uint64_t)size};
    struct cachestat_ cs;
    if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0) {
        print_message("cachestat(2) unavailable here (%s): the write-back is not checked\n", strerror(errno));
        close(fd);
        return;
    }
    uint64_t pages = ((uint64_t)size + 4095) / 4096;
    print_message("log file: %llu pages, %llu dirty, %llu under write-back\n", (unsigned long long)pages,
                  (unsigned long long)cs.nr_dirty, (unsigned long long)cs.nr_writeback);
    assert_true(cs.nr_dirty * 2 <= pages);
    close(fd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writer_keeps_lines_whole_and_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lone_lines_are_written, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_writer_lines_are_written_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forked_child_writes_its_own_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_escapes_control_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_drops_a_trailing_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_escapes_are_cut_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_escapes_and_drops_a_trailing_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_lines_are_utf8_whatever_the_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_message_cut_inside_a_character_stays_utf8, setup, teardown),
        cmocka_unit_test(test_file_log_is_written_back_as_it_goes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
