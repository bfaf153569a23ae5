/* log.c — one line per event, written with a single write(2) so lines from threads and
 * processes never interleave. The executable's only global state. */
#define _GNU_SOURCE
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static char log_role[16] = "leakd";
static ld_log_level log_min = LD_INFO;
static int log_json;

void ld_log_init(const char *role, const char *level, const char *format) {
    snprintf(log_role, sizeof log_role, "%s", role);
    log_json = format && strcmp(format, "json") == 0;
    if (level) {
        if (strcmp(level, "debug") == 0) log_min = LD_DEBUG;
        else if (strcmp(level, "warn") == 0) log_min = LD_WARN;
        else if (strcmp(level, "error") == 0) log_min = LD_ERROR;
        else log_min = LD_INFO;
    }
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
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char ts[96]; /* room for any int the compiler imagines in each field */
    snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
    size_t len;
    if (!log_json) {
        int n = snprintf(line, sizeof line - 1, "%s leakd %s[%d] %s: %s", ts, log_role, (int)getpid(), names[level], msg);
        len = n < 0 ? 0 : (size_t)n >= sizeof line - 1 ? sizeof line - 2 : (size_t)n;
    } else {
        /* One JSON object a line; the message is escaped. */
        int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"process\":\"%s\",\"pid\":%d,\"msg\":\"", ts,
                         names[level], log_role, (int)getpid());
        len = n < 0 ? 0 : (size_t)n;
        for (const unsigned char *p = (const unsigned char *)msg; *p && len + 8 < sizeof line - 3; p++) {
            if (*p == '"' || *p == '\\') line[len++] = '\\', line[len++] = (char)*p;
            else if (*p < 0x20) len += (size_t)snprintf(line + len, 7, "\\u%04x", *p);
            else line[len++] = (char)*p;
        }
        line[len++] = '"';
        line[len++] = '}';
    }
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
