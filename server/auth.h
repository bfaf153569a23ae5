/* auth.h — who is calling: the Authorization header's key, checked against an in-memory
 * cache of key hashes refreshed from PostgreSQL, so a database outage answers 503 and
 * never a false 401. */
#ifndef LD_AUTH_H
#define LD_AUTH_H

#include <stdint.h>

#include "pool.h"

typedef enum { LD_KEY_INGEST = 0, LD_KEY_READ = 1, LD_KEY_ADMIN = 2 } ld_key_kind;

typedef struct ld_principal {
    int64_t key_id;
    ld_key_kind kind;
    int64_t app_id;          /* 0 for an admin key of every app */
    char app_slug[65];       /* "" for an admin key of every app */
} ld_principal;

typedef enum {
    LD_AUTH_OK = 0,
    LD_AUTH_MISSING = 1,     /* no Authorization header, another scheme, or "Bearer" alone: 401 */
    LD_AUTH_UNKNOWN = 2,     /* a well-formed key nobody has (or revoked): 401 */
    LD_AUTH_UNAVAILABLE = 3, /* the key is not cached and PostgreSQL cannot be asked: 503 */
    LD_AUTH_WOULD_WAIT = 4,  /* not cached, and the caller may not wait for a reload */
    LD_AUTH_MALFORMED = 5,   /* a Bearer token that is not a Leakwatch key: 401 */
} ld_auth_result;

typedef struct ld_auth ld_auth;

/* Loads the cache once (fails when PostgreSQL is unreachable at start). */
ld_auth *ld_auth_new(ld_pool *pool, char *err, size_t cap);
void ld_auth_free(ld_auth *a);

/* Refreshes from PostgreSQL; called every few seconds by the server (revocations take
 * effect then) and on a cache miss at most once a second. */
int ld_auth_refresh(ld_auth *a);

/* After a cache miss: waits for the next reload (at most one a second, so a flood of unknown
 * keys never floods the database) unless one happened meanwhile. 0, or -1 when the last
 * reload could not reach PostgreSQL. */
int ld_auth_reload_after_miss(ld_auth *a);

/* Checks "Bearer <key>". A key not in the cache waits for the next reload (up to a second,
 * then a query), unless `may_wait` is 0: then LD_AUTH_WOULD_WAIT. */
ld_auth_result ld_auth_check(ld_auth *a, const char *authorization, int may_wait, ld_principal *who);

#endif
