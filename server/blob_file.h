/* blob_file.h — a heap upload's temp file while its body arrives.
 *
 * Written with direct I/O (O_DIRECT) by writer threads, from two buffers per upload: the event
 * thread copies the body into one while the other is being written, and stops reading the
 * connection only while both are full. Direct writes skip the page cache: on a virtual machine
 * whose host takes back the guest's free memory, the first touch of each page-cache page costs
 * a fault in the host (uploads at a third of the disk's speed, the copy a large part of the
 * CPU), and gigabytes of dirty pages flushed at once queue PostgreSQL's WAL flushes behind
 * them. A direct write waits for the device, hence the threads.
 *
 * Past `direct_max` uploads at a time (the buffers' memory), and on a file system that refuses
 * O_DIRECT, an upload is written through the page cache on the calling thread, its writeback
 * started every MiB (as before direct writes). */
#ifndef LD_BLOB_FILE_H
#define LD_BLOB_FILE_H

#include <stddef.h>
#include <stdint.h>

/* ld_blob_file_write: the data was taken, but both buffers are full. */
#define LD_BLOB_FULL 1

/* What the uploads share: the writer threads and the buffers. */
typedef struct ld_blob_files ld_blob_files;

/* Temp files go in `tmp_dir`; at most `direct_max` uploads are written directly at a time (0:
 * none). NULL with the reason in `err`. */
ld_blob_files *ld_blob_files_start(const char *tmp_dir, int direct_max, char *err, size_t cap);
/* Ends the writes under way (those of freed files included) and frees. Once no file is in use. */
void ld_blob_files_stop(ld_blob_files *s);

typedef struct ld_blob_file ld_blob_file;

/* A new empty temp file. NULL with the reason in `err`. */
ld_blob_file *ld_blob_file_create(ld_blob_files *s, char *err, size_t cap);

/* Appends `len` bytes, all of them: 0; LD_BLOB_FULL, when the caller must stop and call
 * ld_blob_file_wait before writing more; -1 with the reason in `err` (a write failed). */
int ld_blob_file_write(ld_blob_file *f, const void *data, size_t len, char *err, size_t cap);

/* After LD_BLOB_FULL: ready(arg) is called once more may be written, on a writer thread or at
 * once on this one. */
void ld_blob_file_wait(ld_blob_file *f, void (*ready)(void *arg), void *arg);

/* Writes what is left, fsyncs and closes the file: 0, or -1 with the reason in `err`. Blocks:
 * not on an event thread. */
int ld_blob_file_sync(ld_blob_file *f, char *err, size_t cap);

/* After ld_blob_file_sync: renames the file to `path` and fsyncs that directory, `dir`. From
 * then on, freeing the file leaves it. 0, or -1 with the reason in `err` (when the directory
 * could not be fsynced, the renamed file is deleted). */
int ld_blob_file_rename(ld_blob_file *f, const char *path, const char *dir, char *err, size_t cap);

/* Bytes written so far; whether they go the direct way. */
uint64_t ld_blob_file_bytes(const ld_blob_file *f);
int ld_blob_file_direct(const ld_blob_file *f);

/* Closes and deletes the file unless renamed. Never waits: a write under way finishes on its
 * thread, which then frees. NULL is a no-op. */
void ld_blob_file_free(ld_blob_file *f);

#endif
