/* uuid.h — UUIDs from getrandom(2): the SDK's watch keys, install ids (version 4, random) and
 * report ids (version 7); leakd's blob store ids (version 4). */
#ifndef LW_UUID_H
#define LW_UUID_H

/* Writes a lower-case random UUID (version 4) and a NUL into `out`. Returns 0, or -1 when
 * the kernel's random source failed. */
int lw__uuid4(char out[37]);

/* The same for a time-ordered UUID (version 7, RFC 9562): the first 48 bits are the Unix
 * time in milliseconds, the rest random. Report ids are these: leakd indexes them in B-trees
 * (reports, occurrences), where ids that grow with time are inserted at the right edge, a few
 * hot pages, instead of all over the index, which after each checkpoint writes every page it
 * touches whole to the WAL. */
int lw__uuid7(char out[37]);

/* 1 when `s` is a lower-case UUID in its canonical 8-4-4-4-12 form, else 0 (NULL too). */
int lw__uuid_valid(const char *s);

#endif
