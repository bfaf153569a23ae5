/* pool.h — a bounded set of PostgreSQL connections shared by the HTTP handler threads. */
#ifndef LD_POOL_H
#define LD_POOL_H

#include "db.h"

typedef struct ld_pool ld_pool;

/* At most `size` connections to `url`, each waiting at most `db_timeout_ms` for an answer
 * (ld_db_set_timeout; 0: no limit). */
ld_pool *ld_pool_new(const char *url, int size, int db_timeout_ms);
void ld_pool_free(ld_pool *p);

/* A checked connection, waiting up to `wait_ms` for a free one. NULL when none could be had
 * (all busy, or PostgreSQL unreachable): the caller answers 503. */
ld_db *ld_pool_get(ld_pool *p, int wait_ms);
/* Returns it; a connection that went bad is closed rather than kept. */
void ld_pool_put(ld_pool *p, ld_db *db);

#endif
