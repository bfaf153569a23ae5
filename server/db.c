/* db.c — leakd's PostgreSQL connection over libpq: connect in UTC, typed errors by SQLSTATE,
 * transactions, reconnect-once, and LISTEN/NOTIFY waits. */
#define _POSIX_C_SOURCE 200809L

#include "db.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LD_DB_ERR_CAP 1024
#define LD_DB_MAX_CHANNELS 8
#define LD_DB_CHANNEL_MAX 63 /* NAMEDATALEN - 1 */
#define LD_DB_STMTS 64        /* statements prepared per connection */

struct ld_db {
    PGconn *conn;
    int broken; /* a ROLLBACK failed or an answer never came: reset before the next use */
    int in_tx;  /* between ld_db_begin and its COMMIT or ROLLBACK: a new session would not be in it */
    int timeout_ms; /* ld_db_set_timeout; 0 = wait as long as it takes */
    char err[LD_DB_ERR_CAP];
    char sqlstate[6];
    size_t n_channels; /* LISTENed channels, re-LISTENed after a reconnect */
    char channels[LD_DB_MAX_CHANNELS][LD_DB_CHANNEL_MAX + 1];
    /* The SQL of statement "ld<i>", prepared on this session at first use: parsing and
     * planning a statement like grouping's costs more than running it on a small batch. */
    size_t n_stmts;
    char *stmts[LD_DB_STMTS];
    time_t stmts_since; /* CLOCK_MONOTONIC seconds when the first of them was prepared */
    int generic_plans;  /* ld_db_use_generic_plans: set again on each new session */
};

/* Prepared statements are dropped and prepared again this often. PostgreSQL keeps a prepared
 * statement's generic plan until an ANALYZE of its tables: a plan made while a table was small
 * (a sequential scan of `reports` on a new server) would otherwise stay for the session's life
 * while the table grows; autovacuum's first ANALYZE can be minutes away. */
#define LD_DB_REPLAN_SECONDS 30

static ld_status exec_result(ld_db *db, PGresult *res, PGresult **out);
static ld_status sent_result(ld_db *db, int sent, PGresult **out);
static long long now_ms(void);

static time_t mono_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* A new session (PQreset) has none of the old one's prepared statements. */
static void forget_statements(ld_db *db)
{
    for (size_t i = 0; i < db->n_stmts; i++)
        free(db->stmts[i]);
    db->n_stmts = 0;
}

const char *ld_strerror(ld_status st)
{
    switch (st) {
    case LD_OK: return "ok";
    case LD_ERR_UNAVAILABLE: return "database unavailable";
    case LD_ERR_NOT_FOUND: return "not found";
    case LD_ERR_CONFLICT: return "already exists";
    case LD_ERR_INVALID: return "invalid input";
    case LD_ERR_INTERNAL: return "internal error";
    case LD_ERR_NOMEM: return "out of memory";
    case LD_ERR_SCHEMA: return "database schema mismatch";
    }
    return "unknown error";
}

/* Copies `msg` into db->err without its trailing newlines. */
static void set_err(ld_db *db, const char *msg)
{
    size_t len;

    snprintf(db->err, sizeof db->err, "%s", msg ? msg : "");
    len = strlen(db->err);
    while (len > 0 && (db->err[len - 1] == '\n' || db->err[len - 1] == ' '))
        db->err[--len] = '\0';
    if (len == 0)
        snprintf(db->err, sizeof db->err, "unknown libpq error");
}

ld_status ld_db_fail(ld_db *db, ld_status st, const char *fmt, ...)
{
    va_list ap;

    if (!db)
        return st;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
    db->sqlstate[0] = '\0';
    return st;
}

const char *ld_db_error(const ld_db *db)
{
    if (!db || db->err[0] == '\0')
        return "no error";
    return db->err;
}

void ld_db_describe(const ld_db *db, char *out, size_t cap)
{
    if (!db || !db->conn || PQstatus(db->conn) != CONNECTION_OK) {
        snprintf(out, cap, "(not connected)");
        return;
    }
    int v = PQserverVersion(db->conn); /* major * 10000 + minor since PostgreSQL 10 */
    snprintf(out, cap, "%s on %s:%s as %s (PostgreSQL %d.%d)", PQdb(db->conn), PQhost(db->conn), PQport(db->conn),
             PQuser(db->conn), v / 10000, v % 10000);
}

const char *ld_db_sqlstate(const ld_db *db)
{
    return db ? db->sqlstate : "";
}

PGconn *ld_db_conn(ld_db *db)
{
    return db ? db->conn : NULL;
}

/* The status a SQLSTATE maps to (see db.h). */
static ld_status classify_sqlstate(const char *st)
{
    if (strncmp(st, "08", 2) == 0)           /* connection exception */
        return LD_ERR_UNAVAILABLE;
    if (strcmp(st, "57P01") == 0 ||          /* admin_shutdown */
        strcmp(st, "57P02") == 0 ||          /* crash_shutdown */
        strcmp(st, "57P03") == 0 ||          /* cannot_connect_now (starting up) */
        strcmp(st, "53300") == 0 ||          /* too_many_connections */
        strcmp(st, "40001") == 0 ||          /* serialization_failure */
        strcmp(st, "40P01") == 0)            /* deadlock_detected */
        return LD_ERR_UNAVAILABLE;
    if (strcmp(st, "23505") == 0)            /* unique_violation */
        return LD_ERR_CONFLICT;
    if (strcmp(st, "23514") == 0 || strncmp(st, "22", 2) == 0) /* check violation, data exception */
        return LD_ERR_INVALID;
    return LD_ERR_INTERNAL;
}

ld_status ld_db_classify(ld_db *db, const PGresult *res)
{
    const char *state;
    ld_status st;

    if (!db)
        return LD_ERR_INTERNAL;
    db->sqlstate[0] = '\0';
    if (!db->conn) {
        set_err(db, "not connected");
        return LD_ERR_UNAVAILABLE;
    }
    if (!res) {
        /* No result at all: out of memory, or the query could not be sent. */
        set_err(db, PQerrorMessage(db->conn));
        return PQstatus(db->conn) == CONNECTION_BAD ? LD_ERR_UNAVAILABLE : LD_ERR_NOMEM;
    }
    switch (PQresultStatus(res)) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_EMPTY_QUERY:
    case PGRES_COPY_IN:
    case PGRES_COPY_OUT:
    case PGRES_COPY_BOTH:
    case PGRES_SINGLE_TUPLE:
        return LD_OK;
    default:
        break;
    }
    set_err(db, PQresultErrorMessage(res));
    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (state && strlen(state) == 5) {
        memcpy(db->sqlstate, state, 6);
        st = classify_sqlstate(state);
        /* A server error on a connection that then died is still an outage. */
        if (st == LD_ERR_INTERNAL && PQstatus(db->conn) == CONNECTION_BAD)
            st = LD_ERR_UNAVAILABLE;
        return st;
    }
    /* libpq's own errors carry no SQLSTATE: a lost connection, or a protocol problem. */
    if (PQstatus(db->conn) == CONNECTION_BAD)
        return LD_ERR_UNAVAILABLE;
    return LD_ERR_INTERNAL;
}

/* Server notices ("relation already exists, skipping", the FATAL of a killed backend) are
 * not errors; a library does not print them (libpq's default writes to stderr). */
static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Within the connection's timeout (ld_db_set_timeout), as every statement: a server that
 * accepts a connection and then hangs must not hold a writer forever. */
static ld_status session_set(ld_db *db, const char *sql)
{
    return sent_result(db, PQsendQuery(db->conn, sql), NULL);
}

/* Session settings that a PQreset would lose: UTC (enforced even when the URL's `options`
 * replaced ours), generic plans where asked for, and the LISTENed channels. */
static ld_status session_setup(ld_db *db)
{
    const char *tz = PQparameterStatus(db->conn, "TimeZone");
    PGresult *res;
    ld_status st;
    size_t i;

    if (!tz || (strcmp(tz, "UTC") != 0 && strcmp(tz, "Etc/UTC") != 0)) {
        res = PQexec(db->conn, "SET TimeZone = 'UTC'");
        st = ld_db_classify(db, res);
        PQclear(res);
        if (st != LD_OK)
            return st;
    }
    if (db->generic_plans) {
        st = session_set(db, "SET plan_cache_mode = force_generic_plan");
        if (st != LD_OK)
            return st;
    }
    for (i = 0; i < db->n_channels; i++) {
        char *ident = PQescapeIdentifier(db->conn, db->channels[i], strlen(db->channels[i]));
        char sql[LD_DB_CHANNEL_MAX * 2 + 16];

        if (!ident)
            return ld_db_fail(db, LD_ERR_NOMEM, "escaping channel name: %s", PQerrorMessage(db->conn));
        snprintf(sql, sizeof sql, "LISTEN %s", ident);
        PQfreemem(ident);
        res = PQexec(db->conn, sql);
        st = ld_db_classify(db, res);
        PQclear(res);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

ld_db *ld_db_connect(const char *url, char *err, size_t err_cap)
{
    /* Ours first, the URL last: libpq keeps the last value of a repeated keyword, so
     * whatever the URL says wins (application_name, connect_timeout, options, keepalives...). */
    const char *const keys[] = {"application_name", "connect_timeout", "options", "client_encoding",
                                "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                                "dbname", NULL};
    /* TCP keepalives: a server gone behind a network partition is found within ~25 s instead
     * of the kernel's two hours, while a query waits for its answer. */
    /* client_connection_check_interval: a statement whose answer leakd stopped waiting for
     * (LEAKD_DB_TIMEOUT, then a reset that closes its socket) stops within 2 s, instead of
     * running on, holding its locks, for as long as it takes (PostgreSQL 14+). */
    /* DateStyle: a last_seen cursor is the timestamp's text, which must read the same
     * whatever the database's own setting (SQL, DMY wrote 04/12/2026 ..., refused as a cursor). */
    const char *vals[] = {"leakd", "5", "-c TimeZone=UTC -c DateStyle=ISO,YMD -c client_connection_check_interval=2000",
                          "UTF8", "1", "10", "5", "3", url, NULL};
    ld_db *db = NULL;

    if (err && err_cap)
        err[0] = '\0';
    if (!url || !*url) {
        if (err && err_cap)
            snprintf(err, err_cap, "no database URL given");
        return NULL;
    }
    db = calloc(1, sizeof *db);
    if (!db) {
        if (err && err_cap)
            snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    db->conn = PQconnectdbParams(keys, vals, 1);
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
        set_err(db, db->conn ? PQerrorMessage(db->conn) : "out of memory");
        goto fail;
    }
    PQsetNoticeProcessor(db->conn, ignore_notice, NULL); /* kept across PQreset */
    if (session_setup(db) != LD_OK)
        goto fail;
    db->err[0] = '\0';
    return db;

fail:
    if (err && err_cap)
        snprintf(err, err_cap, "%s", db->err);
    ld_db_close(db);
    return NULL;
}

void ld_db_close(ld_db *db)
{
    if (!db)
        return;
    if (db->conn)
        PQfinish(db->conn);
    forget_statements(db);
    free(db);
}

/* One PQreset, and the session settings it loses. LD_OK or LD_ERR_UNAVAILABLE (LD_ERR_NOMEM). */
static ld_status reconnect(ld_db *db)
{
    ld_status st;

    db->in_tx = 0; /* whatever transaction there was died with the old session */
    PQreset(db->conn);
    forget_statements(db);
    if (PQstatus(db->conn) != CONNECTION_OK) {
        set_err(db, PQerrorMessage(db->conn));
        return LD_ERR_UNAVAILABLE;
    }
    db->broken = 0;
    PQsetnonblocking(db->conn, db->timeout_ms > 0);
    st = session_setup(db);
    if (st != LD_OK)
        return st == LD_ERR_NOMEM ? st : LD_ERR_UNAVAILABLE;
    return LD_OK;
}

ld_status ld_db_use_generic_plans(ld_db *db)
{
    if (!db || !db->conn)
        return LD_ERR_UNAVAILABLE;
    db->generic_plans = 1;
    return session_set(db, "SET plan_cache_mode = force_generic_plan");
}

ld_status ld_db_check(ld_db *db)
{
    if (!db || !db->conn)
        return LD_ERR_UNAVAILABLE;
    if (!db->broken && PQstatus(db->conn) == CONNECTION_OK) {
        /* A transaction someone left open makes the connection unusable for the next user. */
        if (PQtransactionStatus(db->conn) == PQTRANS_INTRANS ||
            PQtransactionStatus(db->conn) == PQTRANS_INERROR)
            ld_db_rollback(db);
        if (!db->broken && PQstatus(db->conn) == CONNECTION_OK) {
            /* libpq learns that the server went away only by talking to it. */
            if (sent_result(db, PQsendQuery(db->conn, "SELECT 1"), NULL) == LD_OK)
                return LD_OK;
        }
    }
    return reconnect(db);
}

int ld_db_set_timeout(ld_db *db, int timeout_ms)
{
    if (!db)
        return 0;
    int was = db->timeout_ms;
    db->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    /* so that sending a large query cannot block either (PQexec still does, by design) */
    if (db->conn)
        PQsetnonblocking(db->conn, db->timeout_ms > 0);
    return was;
}

/* Waits for `conn`'s socket to be ready for `events` until `deadline_ms` (0: no limit). 1
 * ready, 0 timed out, -1 error. */
static int wait_socket(PGconn *conn, short events, long long deadline_ms)
{
    struct pollfd pfd = {PQsocket(conn), events, 0};

    if (pfd.fd < 0)
        return -1;
    for (;;) {
        long long left = deadline_ms ? deadline_ms - now_ms() : -1;
        if (deadline_ms && left <= 0)
            return 0;
        int rc = poll(&pfd, 1, left < 0 ? -1 : left > 1000000 ? 1000000 : (int)left);
        if (rc > 0)
            return 1;
        if (rc == 0)
            continue; /* re-check the deadline */
        if (errno != EINTR)
            return -1;
    }
}

/* After a PQsend* that returned `sent`: flushes the query and collects its result, waiting
 * at most the connection's timeout. A PostgreSQL that hangs with its connection open (stopped,
 * or behind a partition the keepalives have not noticed yet) answers nothing and libpq's own
 * PQexec would wait for ever, holding a request's task thread, a writer, the main loop. On
 * timeout the connection is marked broken (ld_db_check resets it; the pool drops it) and
 * *timed_out is set; NULL otherwise means libpq failed (its message says why). */
static PGresult *await_result(ld_db *db, int sent, int *timed_out)
{
    PGconn *conn = db->conn;
    long long deadline = db->timeout_ms ? now_ms() + db->timeout_ms : 0;
    PGresult *last = NULL, *res;
    int rc;

    *timed_out = 0;
    if (!sent) {
        /* Not even sent (libpq says why: often "another command is already in progress",
         * the state of a connection whose last answer never came): reset before the next use. */
        db->broken = 1;
        return NULL;
    }
    while ((rc = PQflush(conn)) == 1) {
        int w = wait_socket(conn, POLLIN | POLLOUT, deadline);
        if (w == 0)
            goto timeout;
        if (w < 0 || !PQconsumeInput(conn))
            break;
    }
    for (;;) {
        while (PQisBusy(conn)) {
            int w = wait_socket(conn, POLLIN, deadline);
            if (w == 0)
                goto timeout;
            if (w < 0 || !PQconsumeInput(conn))
                break;
        }
        res = PQgetResult(conn);
        if (!res)
            break;
        PQclear(last);
        last = res;
        if (PQstatus(conn) == CONNECTION_BAD)
            break;
    }
    return last;
timeout:
    PQclear(last);
    db->broken = 1;
    *timed_out = 1;
    return NULL;
}

/* The result of a PQsend* call, as ld_db_classify sees it (a timeout is an outage). */
static ld_status sent_result(ld_db *db, int sent, PGresult **out)
{
    int timed_out;
    PGresult *res = await_result(db, sent, &timed_out);

    if (timed_out)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "PostgreSQL did not answer within %d ms", db->timeout_ms);
    if (!sent)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "the query could not be sent: %.300s", PQerrorMessage(db->conn));
    return exec_result(db, res, out);
}

static ld_status exec_result(ld_db *db, PGresult *res, PGresult **out)
{
    ld_status st = ld_db_classify(db, res);

    if (st != LD_OK || !out) {
        PQclear(res);
        return st;
    }
    *out = res;
    return LD_OK;
}

ld_status ld_db_exec(ld_db *db, PGresult **out, const char *sql, int n, const char *const *params)
{
    return ld_db_exec_params(db, out, sql, n, params, NULL, NULL);
}

ld_status ld_db_exec_params(ld_db *db, PGresult **out, const char *sql, int n, const char *const *params,
                            const int *lengths, const int *formats)
{
    if (out)
        *out = NULL;
    if (!db || !sql || n < 0 || (n > 0 && !params))
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_db_exec_params: bad arguments") : LD_ERR_INTERNAL;
    if (!db->conn)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "not connected");
    /* An outage for the caller, who then resets it (ld_db_check): before, the next query went
     * out on a connection still busy with the one that timed out, failed to send, and that
     * read as out of memory, for ever. */
    if (db->broken)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "the connection must be reset: an earlier answer never came");
    /* A connection that died (a restarted server), and that a reset during the outage could
     * not bring back, gets one more reset here: before, the next statement went out on the
     * dead socket, failed, and only then was the connection reset, so that a worker renewing
     * its lease every 20 s failed once more after the server was back. Not inside a
     * transaction of the caller's: a new session would run the rest of it outside it. */
    if (PQstatus(db->conn) == CONNECTION_BAD) {
        if (db->in_tx)
            return ld_db_fail(db, LD_ERR_UNAVAILABLE, "the connection was lost in a transaction: %.300s",
                              PQerrorMessage(db->conn));
        ld_status st = reconnect(db);
        if (st != LD_OK)
            return st;
    }
    if (db->n_stmts && PQtransactionStatus(db->conn) == PQTRANS_IDLE &&
        mono_seconds() - db->stmts_since >= LD_DB_REPLAN_SECONDS) {
        ld_status st = sent_result(db, PQsendQuery(db->conn, "DEALLOCATE ALL"), NULL);
        forget_statements(db);
        if (st != LD_OK)
            return st;
    }
    if (n == 0)
        return sent_result(db, PQsendQueryParams(db->conn, sql, n, NULL, params, lengths, formats, 0), out);
    size_t i;
    char name[32];
    for (i = 0; i < db->n_stmts; i++)
        if (strcmp(db->stmts[i], sql) == 0)
            break;
    if (i == db->n_stmts && i < LD_DB_STMTS) {
        char *copy = strdup(sql);
        if (!copy)
            return ld_db_fail(db, LD_ERR_NOMEM, "out of memory");
        snprintf(name, sizeof name, "ld%zu", i);
        ld_status st = sent_result(db, PQsendPrepare(db->conn, name, sql, n, NULL), NULL);
        if (st != LD_OK) {
            free(copy);
            return st;
        }
        if (db->n_stmts == 0)
            db->stmts_since = mono_seconds();
        db->stmts[db->n_stmts++] = copy;
    }
    if (i == db->n_stmts) /* the cache is full: parse and plan this one each time */
        return sent_result(db, PQsendQueryParams(db->conn, sql, n, NULL, params, lengths, formats, 0), out);
    snprintf(name, sizeof name, "ld%zu", i);
    return sent_result(db, PQsendQueryPrepared(db->conn, name, n, params, lengths, formats, 0), out);
}

ld_status ld_db_exec_script(ld_db *db, const char *sql)
{
    if (!db || !sql)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_db_exec_script: bad arguments") : LD_ERR_INTERNAL;
    if (!db->conn)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "not connected");
    return exec_result(db, PQexec(db->conn, sql), NULL);
}

int ld_db_retryable(ld_db *db, ld_status st)
{
    return st == LD_ERR_UNAVAILABLE && db && db->conn && !db->broken && PQstatus(db->conn) == CONNECTION_OK;
}

ld_status ld_db_begin(ld_db *db)
{
    ld_status st = ld_db_exec(db, NULL, "BEGIN", 0, NULL);

    if (st == LD_OK)
        db->in_tx = 1;
    return st;
}

ld_status ld_db_commit(ld_db *db)
{
    PGresult *res = NULL;
    ld_status st = ld_db_exec(db, &res, "COMMIT", 0, NULL);

    if (db)
        db->in_tx = 0; /* committed, rolled back, or lost with the session: over in any case */
    /* COMMIT of a failed transaction "succeeds" with the tag ROLLBACK. */
    if (st == LD_OK && strcmp(PQcmdStatus(res), "ROLLBACK") == 0)
        st = ld_db_fail(db, LD_ERR_INTERNAL, "COMMIT rolled back a failed transaction");
    PQclear(res);
    return st;
}

void ld_db_rollback(ld_db *db)
{
    PGresult *res;

    if (db)
        db->in_tx = 0;
    if (!db || !db->conn || PQstatus(db->conn) != CONNECTION_OK)
        return;
    if (PQtransactionStatus(db->conn) == PQTRANS_IDLE)
        return;
    res = PQexec(db->conn, "ROLLBACK");
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        db->broken = 1; /* ld_db_check reconnects */
    PQclear(res);
}

ld_status ld_db_listen(ld_db *db, const char *channel)
{
    size_t len, i;
    char *ident = NULL;
    char sql[LD_DB_CHANNEL_MAX * 2 + 16];
    ld_status st;

    if (!db || !channel)
        return db ? ld_db_fail(db, LD_ERR_INTERNAL, "ld_db_listen: bad arguments") : LD_ERR_INTERNAL;
    len = strlen(channel);
    if (len == 0 || len > LD_DB_CHANNEL_MAX)
        return ld_db_fail(db, LD_ERR_INVALID, "channel name must be 1..%d bytes", LD_DB_CHANNEL_MAX);
    if (!db->conn)
        return ld_db_fail(db, LD_ERR_UNAVAILABLE, "not connected");
    for (i = 0; i < db->n_channels; i++)
        if (strcmp(db->channels[i], channel) == 0)
            break;
    if (i == db->n_channels && db->n_channels == LD_DB_MAX_CHANNELS)
        return ld_db_fail(db, LD_ERR_INVALID, "at most %d channels per connection", LD_DB_MAX_CHANNELS);

    ident = PQescapeIdentifier(db->conn, channel, len);
    if (!ident)
        return ld_db_fail(db, LD_ERR_NOMEM, "escaping channel name: %s", PQerrorMessage(db->conn));
    snprintf(sql, sizeof sql, "LISTEN %s", ident);
    PQfreemem(ident);
    st = ld_db_exec(db, NULL, sql, 0, NULL);
    if (st == LD_OK && i == db->n_channels) {
        memcpy(db->channels[i], channel, len + 1);
        db->n_channels++;
    }
    return st;
}

/* Frees every queued notification; 1 when there was one. */
static int drain_notifies(PGconn *conn)
{
    PGnotify *n;
    int got = 0;

    while ((n = PQnotifies(conn)) != NULL) {
        got = 1;
        PQfreemem(n);
    }
    return got;
}

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ld_db_wait(ld_db *db, int timeout_ms)
{
    long long deadline;
    struct pollfd pfd;
    int sock, rc;

    if (!db || !db->conn || PQstatus(db->conn) != CONNECTION_OK)
        return -1;
    /* Notifications may already be buffered (they arrive with any query's results). */
    if (!PQconsumeInput(db->conn)) {
        set_err(db, PQerrorMessage(db->conn));
        return -1;
    }
    if (drain_notifies(db->conn))
        return 1;
    sock = PQsocket(db->conn);
    if (sock < 0) {
        set_err(db, "no socket");
        return -1;
    }
    deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        long long left = timeout_ms < 0 ? -1 : deadline - now_ms();

        if (timeout_ms >= 0 && left < 0)
            left = 0;
        pfd.fd = sock;
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, (int)left);
        if (rc < 0) {
            if (errno == EINTR)
                return 0; /* a signal: let the caller look at its flags (SIGTERM) */
            ld_db_fail(db, LD_ERR_UNAVAILABLE, "poll: %s", strerror(errno));
            return -1;
        }
        if (rc == 0)
            return 0;
        if (!PQconsumeInput(db->conn)) {
            set_err(db, PQerrorMessage(db->conn));
            return -1;
        }
        if (drain_notifies(db->conn))
            return 1;
        if (PQstatus(db->conn) != CONNECTION_OK)
            return -1;
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return 0;
    }
}
