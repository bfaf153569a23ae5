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
/* The same, with each answer of PostgreSQL awaited `answer_ms` at most instead of the pool's
 * timeout, the check included, until the connection is put back: for a probe or a scrape,
 * which must answer within seconds when PostgreSQL hangs (a new connection may still take
 * libpq's connect_timeout, 5 s). */
ld_db *ld_pool_get_within(ld_pool *p, int wait_ms, int answer_ms);
/* Returns it, with the pool's timeout again; a connection that went bad is closed rather than
 * kept. */
void ld_pool_put(ld_pool *p, ld_db *db);

#endif
