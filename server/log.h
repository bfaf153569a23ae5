/* log.h — leakd's log lines on stderr: time (UTC), process role and pid, level, message.
 * Lines that help at 3 a.m. say what happened to which report or request, and why. */
#ifndef LD_LOG_H
#define LD_LOG_H

typedef enum { LD_DEBUG = 0, LD_INFO = 1, LD_WARN = 2, LD_ERROR = 3 } ld_log_level;

/* role: "serve", "worker", ...; level: debug|info|warn|error; format: text|json. */
void ld_log_init(const char *role, const char *level, const char *format);
void ld_log(ld_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ld_debug(...) ld_log(LD_DEBUG, __VA_ARGS__)
#define ld_info(...) ld_log(LD_INFO, __VA_ARGS__)
#define ld_warn(...) ld_log(LD_WARN, __VA_ARGS__)
#define ld_error(...) ld_log(LD_ERROR, __VA_ARGS__)

#endif
