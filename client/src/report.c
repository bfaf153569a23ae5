/* report.c — meta and data of a report. */
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leakcore.h"

extern char **environ;

/* A one-line value from a sysfs file, or NULL. */
static char *read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *r = fgets(buf, (int)cap, f);
    fclose(f);
    if (!r) return NULL;
    buf[strcspn(buf, "\r\n")] = 0;
    return buf[0] ? buf : NULL;
}

static void rfc3339(int64_t wall_ms, char *out, size_t cap) {
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(wall_ms % 1000));
}

char *lwc_meta_json(const lw_config *cfg, const lwc_meta_in *in) {
    struct utsname u;
    int have_uname = uname(&u) == 0;
    char vendor[128], product[128], created[64];
    const char *manufacturer = cfg->device_manufacturer ? cfg->device_manufacturer
                               : read_line("/sys/devices/virtual/dmi/id/sys_vendor", vendor, sizeof vendor);
    const char *model = cfg->device_model ? cfg->device_model
                        : read_line("/sys/devices/virtual/dmi/id/product_name", product, sizeof product);
    rfc3339(in->created_wall_ms, created, sizeof created);
    json_t *retained = json_array();
    for (size_t i = 0; i < in->retained_count; i++) {
        const lwc_retained_info *r = &in->retained[i];
        json_array_append_new(retained, json_pack("{s:s,s:s,s:I,s:I}", "key", r->key, "description",
                                                  r->description ? r->description : "", "watch_ms", (json_int_t)r->watch_ms,
                                                  "retained_ms", (json_int_t)r->retained_ms));
    }
    json_t *meta = json_pack(
        "{s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:s},s:{s:I,s:I},s:s,s:o,s:i}",
        "report_id", in->report_id, "app", cfg->app ? cfg->app : "", "app_version",
        /* the server requires one: it orders a leak's first and last release by it */
        cfg->app_version && *cfg->app_version ? cfg->app_version : "unknown",
        "build", (json_int_t)cfg->build, "sdk_version", LEAKWATCH_VERSION_STRING, "runtime",
        cfg->runtime_name ? cfg->runtime_name : "native", "mode", cfg->mode == LW_MODE_TRACES ? "traces" : "heap",
        "created_at", created, "device", "install_id", in->install_id, "manufacturer", manufacturer ? manufacturer : "unknown",
        "model", model ? model : "unknown", "os", cfg->os_name ? cfg->os_name : have_uname ? u.sysname : "unknown",
        "os_version", cfg->os_version ? cfg->os_version : have_uname ? u.release : "unknown", "abi",
        cfg->abi ? cfg->abi : have_uname ? u.machine : "unknown", "heap", "used_bytes", (json_int_t)in->heap_used, "max_bytes",
        (json_int_t)in->heap_max, "trigger", in->trigger, "retained", retained, "dropped", 0);
    if (!meta) return NULL;
    char *text = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(meta);
    return text;
}

/* traces mode: `<analyzer> analyze --json --quiet DUMP > out`, exit 0 (no leak) or 1 (leaks). */
static int run_analyzer(const lw_config *cfg, const char *dump_path, const char *out_path, char *err, size_t cap) {
    const char *analyzer = cfg->analyzer_path ? cfg->analyzer_path : "leakscan";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    char *argv[] = {(char *)analyzer, "analyze", "--json", "--quiet", (char *)dump_path, NULL};
    pid_t pid;
    /* posix_spawn, not fork: a JVM's threads and memory are not copied. */
    int rc = strchr(analyzer, '/') ? posix_spawn(&pid, analyzer, &fa, NULL, argv, environ)
                                   : posix_spawnp(&pid, analyzer, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the analyzer %s: %s", analyzer, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, cap, "waiting for the analyzer: %s", strerror(errno));
            return -1;
        }
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1)) return 0;
    if (WIFEXITED(status))
        snprintf(err, cap, "the analyzer failed with exit code %d (3 = bad dump, 4 = I/O error)", WEXITSTATUS(status));
    else
        snprintf(err, cap, "the analyzer died of signal %d", WTERMSIG(status));
    unlink(out_path);
    return -1;
}

int lwc_report_data(const lw_config *cfg, const char *dump_path, const char *out_path, char *err, size_t cap) {
    if (cfg->mode == LW_MODE_TRACES) return run_analyzer(cfg, dump_path, out_path, err, cap);
    lw_trim_options o = {sizeof o, 0, 1, NULL, NULL};
    lw_trim_stats st;
    lw_error e = {0};
    if (lw_trim_file(dump_path, out_path, &o, &st, &e) != LW_OK) {
        snprintf(err, cap, "trimming the dump failed: %s", e.message);
        return -1;
    }
    return 0;
}
