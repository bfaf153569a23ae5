/* migrate.h — applies migrations/NNNN_name.sql in order and records them in
 * schema_migrations; tells `serve` whether the database matches this leakd. */
#ifndef LD_MIGRATE_H
#define LD_MIGRATE_H

#include "db.h"

/* The advisory lock key held while migrating ("leakdmig" in ASCII), so that instances
 * starting together apply each file once. */
#define LD_MIGRATE_LOCK_KEY 0x6c65616b646d6967LL

/* Applies every migration file in `dir` whose version is not yet recorded, in version order,
 * each in its own transaction together with its schema_migrations row, while holding a
 * session advisory lock. Files are named NNNN_name.sql (four digits, version >= 1; other
 * names are ignored; a version used twice is refused) and must not contain BEGIN/COMMIT.
 * On return *applied (may be NULL) is how many files were applied and *version (may be NULL)
 * the database's schema version. Errors (with a message in `err`, `cap` bytes):
 * LD_ERR_SCHEMA when the database was migrated by a newer leakd (its version is above the
 * highest file); LD_ERR_INVALID for an unreadable directory or a misnamed/duplicate file;
 * the file's SQL failure as ld_db_exec maps it (a syntax error is LD_ERR_INTERNAL), naming
 * the file. */
ld_status ld_migrate(ld_db *db, const char *dir, int *applied, int *version, char *err, size_t cap);

/* LD_OK when the database's schema version is exactly `expected_version`; LD_ERR_SCHEMA with
 * a message saying what to do when it is unmigrated, older or newer; LD_ERR_UNAVAILABLE /
 * LD_ERR_INTERNAL when it cannot be read. */
ld_status ld_schema_check(ld_db *db, int expected_version, char *err, size_t cap);

/* The highest migration version in `dir` (0 when it holds none), for `serve` to pass to
 * ld_schema_check. LD_ERR_INVALID when `dir` cannot be read or holds duplicate versions. */
ld_status ld_migrations_latest(const char *dir, int *version, char *err, size_t cap);

#endif
