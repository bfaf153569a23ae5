/* uuid.h — random (version 4) UUIDs for watch keys, report ids and install ids. */
#ifndef LWC_UUID_H
#define LWC_UUID_H

/* Writes a lower-case UUID v4 and a NUL into `out`. Returns 0, or -1 when the kernel's
 * random source failed. */
int lwc_uuid4(char out[37]);

#endif
