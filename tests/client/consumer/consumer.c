/* consumer.c — a program that uses an installed libleakwatch, as an SDK user would. */
#include <leakwatch.h>
#include <stdio.h>
#include <string.h>

static int reclaimed(void *ctx, lw_handle h) { (void)ctx; (void)h; return 1; }
static int gc(void *ctx) { (void)ctx; return 0; }
static void mark(void *ctx, lw_handle h, int64_t uptime_ms) { (void)ctx; (void)h; (void)uptime_ms; }
static int dump(void *ctx, const char *path, int forked, char *err, size_t cap) {
    (void)ctx; (void)path; (void)forked;
    snprintf(err, cap, "no heap here");
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    lw_runtime rt = {sizeof rt, NULL, reclaimed, gc, mark, NULL, dump, 0, NULL, NULL};
    lw_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    cfg.app = "consumer";
    cfg.spool_dir = argv[1];
    char err[256], key[37];
    lw_client *c = NULL;
    if (lw_client_new(&c, &cfg, &rt, err, sizeof err) != LW_SDK_OK) {
        fprintf(stderr, "lw_client_new: %s\n", err);
        return 1;
    }
    int ok = lw_watch(c, (lw_handle)1, "consumer object", key) == LW_SDK_OK && strlen(key) == 36;
    printf("leakwatch %s: client %s, watch key %s, state %s\n", lw_sdk_version(), ok ? "works" : "FAILED", key,
           lw_client_state(c));
    lw_client_free(c, 0);
    return ok ? 0 : 1;
}
