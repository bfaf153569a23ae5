/* admin.h — leakd's administrative commands: migrate, app create|list, key create|list|revoke. */
#ifndef LD_ADMIN_H
#define LD_ADMIN_H

#include <stdio.h>

/* Exit codes of the administrative commands. */
enum {
    LD_EXIT_OK = 0,
    LD_EXIT_USAGE = 2,       /* bad command line, or no database URL */
    LD_EXIT_REFUSED = 3,     /* refused input: bad name, already exists, not found */
    LD_EXIT_DATABASE = 4,    /* database unreachable, schema mismatch, or internal error */
};

/* Runs one administrative command. `argv[0]` is the command word ("migrate", "app", "key",
 * "help"), i.e. main passes (argc - 1, argv + 1) after "leakd". `--help` or `-h` anywhere
 * prints the command's usage to `out` and runs nothing (LD_EXIT_OK). `db_url` is the database URL
 * (LEAKD_DATABASE_URL; NULL or "" is a usage error for commands that need it);
 * `migrations_dir` holds the NNNN_name.sql files (used by migrate, and by the other commands
 * to refuse an unmigrated or newer database; NULL skips that check). Results go to `out`,
 * errors to `errout`. Returns an LD_EXIT_* code. */
int ld_admin_main(const char *db_url, const char *migrations_dir, int argc, char **argv,
                  FILE *out, FILE *errout);

/* 1 when `word` is an administrative command ("migrate", "app" or "key"), else 0. */
int ld_admin_is_command(const char *word);

/* Prints the usage text of the administrative command `command` ("migrate", "app" or "key"),
 * or of every one when it is NULL or not one of them. */
void ld_admin_usage(FILE *out, const char *command);

/* Prints one line or more per administrative command form, for `leakd --help`'s list. */
void ld_admin_commands(FILE *out);

#endif
