/* key_table.h — a record per API key, for what leakd counts per key in memory: its quota
 * windows (quota.c), the ingest memory its uploads hold (http.c). A key is found by its id in
 * constant time however many keys there are.
 *
 * Records are never removed: there are at most as many as ingest keys that have been used
 * since leakd started, and each is a few tens of bytes. Not thread-safe: its owner locks. */
#ifndef LD_KEY_TABLE_H
#define LD_KEY_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_key_table ld_key_table;

/* Records of `record_size` bytes. NULL when out of memory. */
ld_key_table *ld_key_table_new(size_t record_size);
void ld_key_table_free(ld_key_table *t);

/* The record of key `key_id` (> 0), made, zeroed, when the key has none yet. NULL when it has
 * none and there is no room for it (out of memory). A record stays where it is until the next
 * call that makes one: ld_key_table_find never moves one. */
void *ld_key_table_get(ld_key_table *t, int64_t key_id);
/* The record of key `key_id`, or NULL when it has none. */
void *ld_key_table_find(ld_key_table *t, int64_t key_id);

#endif
