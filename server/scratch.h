/* scratch.h — an instance's scratch space: LEAKD_DATA_DIR/tmp/<host>-<listen>/, where uploads
 * are written before their rename into blobs/ (the same file system) and each worker
 * decompresses and analyzes in job-<pid>/.
 *
 * Several instances may share LEAKD_DATA_DIR (docs/operations.md). Each cleans only its own
 * space: at start (what a previous run left) and when a worker dies (its job dir). When all
 * shared tmp/, a starting instance deleted the uploads and analyses under way on the others
 * (audit 2026-12-03), and two containers' workers of the same pid shared one job dir. The
 * space of an instance gone for good (a host or container replaced) is swept by the others
 * once it has not been touched for an hour: a live instance touches its own every minute. */
#ifndef LD_SCRATCH_H
#define LD_SCRATCH_H

#include <stddef.h>

/* This instance's space: data_dir/tmp/<host>-<listen>, in `buf` (`cap` bytes). Two instances
 * on one host cannot listen on one address; the name keeps [A-Za-z0-9.-] and turns the rest
 * into '_'. -1 when it does not fit. */
int ld_scratch_dir(const char *data_dir, const char *listen, char *buf, size_t cap);

/* Makes `dir` (and its parent) if need be and empties it: what a previous run of this instance
 * left. -1 with the reason in err. */
int ld_scratch_prepare(const char *dir, char *err, size_t cap);

/* Removes `path`: a file, or a directory with what it holds (two levels down at most: an
 * instance's space holds files and job dirs of files). Quiet: what cannot go stays. */
void ld_scratch_remove(const char *path);

/* Marks `dir` as in use (its mtime, which the others' sweeps read). */
void ld_scratch_touch(const char *dir);

/* Removes what sits in data_dir/tmp besides `own` and has not changed for `max_age_s` seconds:
 * the space of an instance gone, or files an older leakd left directly in tmp/. Returns how
 * many entries went. */
int ld_scratch_sweep(const char *data_dir, const char *own, double max_age_s);

#endif
