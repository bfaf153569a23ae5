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

void ld_log_init(const char *role, const char *level) {
    snprintf(log_role, sizeof log_role, "%s", role);
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
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ leakd %s[%d] %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), log_role,
                     (int)getpid(), names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m > sizeof line - (size_t)n - 2 ? sizeof line - (size_t)n - 2 : (size_t)m);
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
