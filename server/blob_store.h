/* blob_store.h — which blob store (LEAKD_DATA_DIR) holds a heap report's dump.
 *
 * Instances may share one data dir (a shared file system: any worker analyzes any upload) or
 * each have their own (each analyzes the uploads it took). A report records the id of the
 * store its dump went to, and a worker claims only reports of its own store (or of none: those
 * stored before migration 0017). Without it, a worker of an instance with another data dir
 * claimed the report, found no file, and used one of its attempts; three such claims failed
 * a report whose dump was safe on its own disk.
 *
 * The id is a random UUID kept in LEAKD_DATA_DIR/store-id, made by the first leakd that
 * starts on the dir. Instances that share the dir read the same file; a copied data dir (a
 * cloned disk) carries its id along, and must then get a new one before a second instance
 * uses it (docs/operations.md). */
#ifndef LD_BLOB_STORE_H
#define LD_BLOB_STORE_H

#include <stddef.h>

#define LD_STORE_ID_LEN 36 /* a lower-case UUID */

/* The store id of `data_dir` (which exists) in `id`, made first when the dir has none: 0, or -1
 * with the reason in err (the file unreadable, or not a store id: leakd must not guess). Safe
 * against instances starting at once on a shared dir: exactly one id wins. */
int ld_blob_store_id(const char *data_dir, char id[LD_STORE_ID_LEN + 1], char *err, size_t cap);

#endif
