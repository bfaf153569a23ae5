/* linger.h — a lingering close for connections answered before their body was read.
 *
 * leakd refuses an upload on its headers (401, 403, 411, 413, 429) without reading its body.
 * A client that waits for `100 Continue` never sends it; one that does not is still sending
 * when libmicrohttpd closes the connection, and a socket closed with data unread answers the
 * rest with a reset: the client gets a broken pipe while it sends, or loses the answer it had
 * not read yet, and never learns why it was refused. The lingerer takes such a socket (a dup
 * of libmicrohttpd's, see conn_watch.h, so libmicrohttpd's close does not reset it), and reads
 * and drops what the client still sends until it closes its side, has been quiet for
 * LD_LINGER_QUIET_MS, or LD_LINGER_MAX_MS have passed; only then is the socket closed. At most
 * LD_LINGER_SOCKETS linger at once: past that a socket is closed at once, as before. */
#ifndef LD_LINGER_H
#define LD_LINGER_H

#include <stdatomic.h>
#include <stddef.h>

#define LD_LINGER_QUIET_MS 2000
#define LD_LINGER_MAX_MS 10000
#define LD_LINGER_SOCKETS 256

typedef struct ld_linger ld_linger;

/* Starts the lingerer's thread; `lingered` counts the sockets it took (may be NULL). NULL with
 * the reason in err. */
ld_linger *ld_linger_start(atomic_ullong *lingered, char *err, size_t cap);
/* Stops the thread and closes every socket still lingering. NULL is a no-op. */
void ld_linger_stop(ld_linger *l);

/* Takes `fd`, a connected socket whose answer has been sent: shuts its write side, drains it,
 * then closes it. Closes it at once when `l` is NULL or full. */
void ld_linger_close(ld_linger *l, int fd);
/* The same, but closes it at once unless more than `keep_free` places stay free for others:
 * for sockets any client can open at will (LEAKD_CONNECTIONS_PER_ADDRESS's refusals), which
 * must not take every place from the refusals ld_linger_close is for. */
void ld_linger_close_sparing(ld_linger *l, int fd, int keep_free);

#endif
