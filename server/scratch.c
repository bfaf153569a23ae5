/* scratch.c — directories under LEAKD_DATA_DIR/tmp. */
#define _GNU_SOURCE
#include "scratch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ld_scratch_dir(const char *data_dir, const char *listen, char *buf, size_t cap) {
    char host[128] = "localhost", name[256];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    int n = snprintf(name, sizeof name, "%s-%s", host, listen);
    if (n < 0 || (size_t)n >= sizeof name) return -1;
    for (char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
            *p = '_';
    n = snprintf(buf, cap, "%s/tmp/%s", data_dir, name);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* Removes what `fd` (a directory, closed here) holds, `depth` levels down. */
static void empty_at(int fd, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(fd, e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM)) continue;
        int sub = depth > 0 ? openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (sub >= 0) empty_at(sub, depth - 1);
        unlinkat(fd, e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

static void empty_dir(const char *dir, int depth) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) empty_at(fd, depth);
}

void ld_scratch_remove(const char *path) {
    if (unlink(path) == 0 || (errno != EISDIR && errno != EPERM)) return;
    empty_dir(path, 1);
    rmdir(path);
}

int ld_scratch_prepare(const char *dir, char *err, size_t cap) {
    char parent[1200];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = 0;
    if ((slash && mkdir(parent, 0750) != 0 && errno != EEXIST) || (mkdir(dir, 0750) != 0 && errno != EEXIST)) {
        snprintf(err, cap, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    empty_dir(dir, 1);
    return 0;
}

void ld_scratch_touch(const char *dir) { utimensat(AT_FDCWD, dir, NULL, 0); }

int ld_scratch_sweep(const char *data_dir, const char *own, double max_age_s) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s/tmp", data_dir);
    const char *own_name = strrchr(own, '/');
    own_name = own_name ? own_name + 1 : own;
    DIR *d = opendir(tmp);
    if (!d) return 0;
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, own_name)) continue;
        char p[2400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", tmp, e->d_name);
        if (lstat(p, &st) != 0 || difftime(now, st.st_mtime) < max_age_s) continue;
        ld_scratch_remove(p);
        removed++;
    }
    closedir(d);
    return removed;
}
