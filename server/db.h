/* db.h — leakd's PostgreSQL connection: one connection per thread or process, typed
 * errors that tell a transient outage (answer 503) from a bad request, transactions, and
 * LISTEN/NOTIFY. Every other server module reaches PostgreSQL through this. */
#ifndef LD_DB_H
#define LD_DB_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* Result codes of every db-backed server function. Only ever added. */
typedef enum ld_status {
    LD_OK = 0,
    LD_ERR_UNAVAILABLE = 1, /* cannot reach PostgreSQL now, or a serialization/deadlock retry failed: 503 */
    LD_ERR_NOT_FOUND = 2,
    LD_ERR_CONFLICT = 3,    /* a unique value already exists */
    LD_ERR_INVALID = 4,     /* the caller's input is refused (bad slug, bad kind, ...) */
    LD_ERR_INTERNAL = 5,    /* a bug or a schema mismatch: logged with the SQL error */
    LD_ERR_NOMEM = 6,
    LD_ERR_SCHEMA = 7,      /* the database is newer than this leakd, or not migrated */
} ld_status;

const char *ld_strerror(ld_status st);

typedef struct ld_db ld_db;

/* Connects to `url` (a libpq conninfo or postgres:// URL). Returns NULL with a message in
 * `err` when PostgreSQL cannot be reached. The connection is in UTC. */
ld_db *ld_db_connect(const char *url, char *err, size_t err_cap);
void ld_db_close(ld_db *db); /* NULL is a no-op */

/* From now on a statement whose answer has not come within `timeout_ms` (0: no limit, the
 * default) fails with LD_ERR_UNAVAILABLE and leaves the connection broken (ld_db_check resets
 * it): against a PostgreSQL that hangs with its connection open. The connection is put in
 * libpq's non-blocking mode so that sending cannot hang either. Returns the limit it replaces
 * (0 for NULL). */
int ld_db_set_timeout(ld_db *db, int timeout_ms);

/* From now on, and after every reconnect, each prepared statement of this session runs its
 * generic plan (plan_cache_mode = force_generic_plan), never one planned for its parameters:
 * for a connection that runs one large statement many times a second (the traces batch),
 * whose plan does not depend on its parameters' values. LD_OK, or the failure of the SET. */
ld_status ld_db_use_generic_plans(ld_db *db);

/* Makes sure the connection is usable, reconnecting once if it broke (a restarted server).
 * LD_OK or LD_ERR_UNAVAILABLE. */
ld_status ld_db_check(ld_db *db);

/* The last error's text (from libpq or the module that failed), for logs. Never NULL. */
const char *ld_db_error(const ld_db *db);

/* "DB on HOST:PORT as USER (PostgreSQL MAJOR.MINOR)" into out[0..cap), for the log at start:
 * which database a server uses, without the password a URL may hold. */
void ld_db_describe(const ld_db *db, char *out, size_t cap);

/* Runs `sql` with `n` text parameters (NULL = SQL NULL). A statement with parameters is
 * prepared once per session (and again every 30 s, so no plan outlives a table's growth);
 * one without is sent as it is. On success *out is the result
 * (the caller PQclear()s it; may be NULL when `out` is NULL). Maps failures: connection
 * loss, admin shutdown, serialization failure, deadlock -> LD_ERR_UNAVAILABLE; unique
 * violation -> LD_ERR_CONFLICT; check violation / invalid text -> LD_ERR_INVALID; the rest ->
 * LD_ERR_INTERNAL. A connection found dead (a restarted server) is reset once first, unless
 * a transaction of ld_db_begin's is open on it: then LD_ERR_UNAVAILABLE. */
ld_status ld_db_exec(ld_db *db, PGresult **out, const char *sql, int n, const char *const *params);

/* ld_db_exec with libpq's `lengths` and `formats` per parameter (formats[i] = 1: params[i] is
 * lengths[i] bytes in the type's binary format; 0 or formats NULL: text). */
ld_status ld_db_exec_params(ld_db *db, PGresult **out, const char *sql, int n, const char *const *params,
                            const int *lengths, const int *formats);

/* 1 when a transaction that failed with `st` is worth one more try on the same connection:
 * a serialization failure or deadlock leaves the connection up, a lost connection does not. */
int ld_db_retryable(ld_db *db, ld_status st);

/* BEGIN / COMMIT / ROLLBACK. ld_db_rollback never fails (it drops a broken connection). */
ld_status ld_db_begin(ld_db *db);
ld_status ld_db_commit(ld_db *db);
void ld_db_rollback(ld_db *db);

/* LISTEN on `channel`; then ld_db_wait waits up to `timeout_ms` for a notification (1),
 * a timeout or a signal (0), or a broken connection (-1). */
ld_status ld_db_listen(ld_db *db, const char *channel);
int ld_db_wait(ld_db *db, int timeout_ms);

/* The raw connection, for modules that need libpq directly (COPY, escaping). */
PGconn *ld_db_conn(ld_db *db);

/* ---- Added with db.c (helpers for modules built on this one) ---- */

/* Runs `sql`, which may hold several statements separated by ';' (no parameters), like
 * `psql -f`; used by migrations. The last statement's result is discarded. Errors are mapped
 * as by ld_db_exec. */
ld_status ld_db_exec_script(ld_db *db, const char *sql);

/* Maps a libpq result (NULL = the call returned none) to a status, exactly as ld_db_exec
 * does, and records the error text for ld_db_error. For modules that call libpq directly
 * through ld_db_conn (COPY). Does not PQclear `res`. */
ld_status ld_db_classify(ld_db *db, const PGresult *res);

/* Records a module's own error text (printf format) for ld_db_error and returns `st`, so a
 * failure reads `return ld_db_fail(db, LD_ERR_NOT_FOUND, "no app %s", slug);`. */
ld_status ld_db_fail(ld_db *db, ld_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The SQLSTATE of the last failed ld_db_* call ("" when it had none, e.g. a lost connection
 * or a module error). For logs and tests. Never NULL. */
const char *ld_db_sqlstate(const ld_db *db);

#endif
