/* sdk_log.h — where the SDK's modules send their messages: the host's log callback
 * (lw_config.log); the SDK itself never prints. */
#ifndef LWC_SDK_LOG_H
#define LWC_SDK_LOG_H

#include <stdarg.h>

typedef struct lwc_log {
    void (*fn)(void *user, int level, const char *message); /* NULL: messages are dropped */
    void *user;
} lwc_log;

/* Formats and hands one message (LW_LOG_* level) to `l`; long messages are cut at 1 KiB. */
void lwc_logf(const lwc_log *l, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lwc_vlogf(const lwc_log *l, int level, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
