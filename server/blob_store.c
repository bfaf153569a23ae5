/* blob_store.c — the id of LEAKD_DATA_DIR's blob store (blob_store.h). */
#define _GNU_SOURCE
#include "blob_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "uuid.h"

/* 1 read, 0 no file yet, -1 error (in err). */
static int read_id(const char *path, char id[LD_STORE_ID_LEN + 1], char *err, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, cap, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[LD_STORE_ID_LEN + 8];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int saved = errno;
    close(fd);
    if (n < 0) {
        snprintf(err, cap, "cannot read %s: %s", path, strerror(saved));
        return -1;
    }
    buf[n] = 0;
    if (n > 0 && buf[n - 1] == '\n') buf[--n] = 0;
    if (!lw__uuid_valid(buf)) {
        snprintf(err, cap,
                 "%s holds no store id (a lower-case UUID); it names the reports whose dumps this data dir "
                 "holds, so leakd will not replace it: see docs/operations.md",
                 path);
        return -1;
    }
    memcpy(id, buf, LD_STORE_ID_LEN + 1);
    return 1;
}

int ld_blob_store_id(const char *data_dir, char id[LD_STORE_ID_LEN + 1], char *err, size_t cap) {
    char path[4096], tmp[4200];
    int fd = -1, rc = -1;
    if (snprintf(path, sizeof path, "%s/store-id", data_dir) >= (int)sizeof path) {
        snprintf(err, cap, "LEAKD_DATA_DIR %s is too long", data_dir);
        return -1;
    }
    tmp[0] = 0;
    int got = read_id(path, id, err, cap);
    if (got != 0) return got > 0 ? 0 : -1;
    /* None yet: written whole under a name of our own, then linked into place, which fails
     * when another instance linked its own first (we then read that one). */
    char mine[LD_STORE_ID_LEN + 2];
    if (lw__uuid4(mine) != 0) {
        snprintf(err, cap, "getrandom: %s", strerror(errno));
        goto out;
    }
    /* named after the id: two hosts sharing the dir may run leakd under the same pid */
    snprintf(tmp, sizeof tmp, "%s.%s.tmp", path, mine);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
    strcat(mine, "\n");
    if (fd < 0 || write(fd, mine, LD_STORE_ID_LEN + 1) != LD_STORE_ID_LEN + 1 || fsync(fd) != 0) {
        snprintf(err, cap, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (link(tmp, path) != 0 && errno != EEXIST) {
        snprintf(err, cap, "cannot create %s: %s", path, strerror(errno));
        goto out;
    }
    int dfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        snprintf(err, cap, "cannot fsync %s: %s", data_dir, strerror(errno));
        if (dfd >= 0) close(dfd);
        goto out;
    }
    close(dfd);
    got = read_id(path, id, err, cap);
    if (got == 0) snprintf(err, cap, "%s vanished as it was made", path);
    if (got > 0) rc = 0;

out:
    if (fd >= 0) close(fd);
    if (tmp[0]) unlink(tmp);
    return rc;
}
