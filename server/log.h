/* log.h — leakd's log lines on stderr: time (UTC), process role and pid, level, message.
 * Lines that help at 3 a.m. say what happened to which report or request, and why. */
#ifndef LD_LOG_H
#define LD_LOG_H

typedef enum { LD_DEBUG = 0, LD_INFO = 1, LD_WARN = 2, LD_ERROR = 3 } ld_log_level;

/* role: "serve", "worker", ...; level: debug|info|warn|error; format: text|json. */
void ld_log_init(const char *role, const char *level, const char *format);
/* A message is always one line, whatever it holds (a client's URL, libpq's multi-line errors):
 * its trailing newlines are dropped; the text format writes other control bytes as \n, \r, \t
 * or \xNN and a backslash as \\, the JSON format escapes them as JSON does. */
void ld_log(ld_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* From here on lines are queued and written by a thread of their own, every 10 ms (a warning
 * or an error at once), so that no thread waits for stderr (`leakd serve`: the request log).
 * A thread that finds ~1 MiB queued waits: no line is dropped. 0, or the pthread_create
 * error. A crash loses what is queued (10 ms of lines at most, unless stderr is stuck). */
int ld_log_writer_start(void);
/* Writes what is queued and stops the thread; lines are written at once again. */
void ld_log_writer_stop(void);

#define ld_debug(...) ld_log(LD_DEBUG, __VA_ARGS__)
#define ld_info(...) ld_log(LD_INFO, __VA_ARGS__)
#define ld_warn(...) ld_log(LD_WARN, __VA_ARGS__)
#define ld_error(...) ld_log(LD_ERROR, __VA_ARGS__)

#endif
