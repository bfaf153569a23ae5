/* sdk_log.c — formatting for the host's log callback. */
#include "sdk_log.h"

#include <stdio.h>

void lwc_vlogf(const lwc_log *l, int level, const char *fmt, va_list ap) {
    if (!l || !l->fn) return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    l->fn(l->user, level, buf);
}

void lwc_logf(const lwc_log *l, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lwc_vlogf(l, level, fmt, ap);
    va_end(ap);
}
