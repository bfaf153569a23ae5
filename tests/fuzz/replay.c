/* replay.c — runs a fuzz target's LLVMFuzzerTestOneInput on files, without libFuzzer, so
 * ctest re-runs the seed corpus and every regression (each must be handled cleanly: no
 * crash, no sanitizer report, no abort). Link with one fuzz_<target>.c.
 *
 *   fuzz_hprof_replay tests/fuzz/corpus/hprof tests/fuzz/regressions/hprof [file...]
 *
 * Directories are read one level deep (files starting with '.' skipped), in name order.
 * Exits 0 when every input ran, 1 on an unreadable path or no input at all. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *p = realloc(data, cap);
            if (!p) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                free(data);
                fclose(f);
                return -1;
            }
            data = p;
        }
        size_t n = fread(data + size, 1, cap - size, f);
        size += n;
        if (n == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: read error\n", path);
        free(data);
        return -1;
    }
    /* An exact-size copy, so ASan catches a read one past the input's end. */
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact) {
        free(data);
        return -1;
    }
    if (size) memcpy(exact, data, size);
    free(data);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_dir(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) break;
            names = p;
        }
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
            rc = -1;
            break;
        }
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) == 0) (*count)++;
            else rc = -1;
        }
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    int rc = 0;
    size_t count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (run_dir(argv[i], &count) != 0) rc = 1;
        } else if (run_file(argv[i]) == 0) {
            count++;
        } else {
            rc = 1;
        }
    }
    printf("replay: %zu inputs ran\n", count);
    if (count == 0) rc = 1;
    return rc;
}
