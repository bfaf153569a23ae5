/* uuid.h — UUIDs for watch keys, install ids (version 4, random) and report ids (version 7). */
#ifndef LWC_UUID_H
#define LWC_UUID_H

/* Writes a lower-case random UUID (version 4) and a NUL into `out`. Returns 0, or -1 when
 * the kernel's random source failed. */
int lwc_uuid4(char out[37]);

/* The same for a time-ordered UUID (version 7, RFC 9562): the first 48 bits are the Unix
 * time in milliseconds, the rest random. Report ids are these: leakd indexes them in B-trees
 * (reports, occurrences), where ids that grow with time are inserted at the right edge, a few
 * hot pages, instead of all over the index, which after each checkpoint writes every page it
 * touches whole to the WAL. */
int lwc_uuid7(char out[37]);

#endif
