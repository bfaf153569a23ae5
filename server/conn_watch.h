/* conn_watch.h — the connections that owe leakd a request, and an end to those that take too
 * long to send one.
 *
 * libmicrohttpd's idle timeout starts again with every byte, and its access handler is called
 * only once a request's headers are complete: a client that sends a header byte every few
 * seconds (slowloris) holds a connection for ever, and a few hundred of them hold them all
 * (LEAKD_CONNECTION_LIMIT). The watch gives each connection LEAKD_HEADER_TIMEOUT seconds from
 * its accept, or from the end of its previous request, to get a request's headers in; past
 * that it shuts the socket down, which libmicrohttpd sees as the client going away (and logs so:
 * the watch logs why, at info level, naming the first such peer, at most a line a second).
 * An idle kept-alive connection whose next request already waits unread in its socket is not
 * shut down: its clock starts again, as for that request's headers.
 *
 * It shuts down a dup of the socket taken at accept and closed only once libmicrohttpd says
 * the connection closed, so it can never reach a descriptor that libmicrohttpd closed and the
 * kernel gave to someone else. The same dup lets a connection answered before its body was
 * read outlive libmicrohttpd's close, for a lingering close (linger.h). */
#ifndef LD_CONN_WATCH_H
#define LD_CONN_WATCH_H

#include <stdatomic.h>
#include <stddef.h>

#include "linger.h"

typedef struct ld_conn_watch ld_conn_watch;
typedef struct ld_conn_mark ld_conn_mark;

/* Starts the watch's thread; `timeout_s` 0 ends no connection. `closed` counts the connections
 * it ends (may be NULL); `linger` takes those marked with ld_conn_mark_linger when they close
 * (NULL: none lingers). NULL with the reason in err. */
ld_conn_watch *ld_conn_watch_start(double timeout_s, atomic_ullong *closed, ld_linger *linger, char *err,
                                   size_t cap);
/* Stops the thread and frees every mark (after libmicrohttpd stopped). NULL is a no-op. */
void ld_conn_watch_stop(ld_conn_watch *w);

/* The accepting thread, before it hands `fd` to libmicrohttpd: 0, or -1 when the watch cannot
 * take it (out of descriptors or memory; the connection is then not watched). */
int ld_conn_watch_accepted(ld_conn_watch *w, int fd);
/* libmicrohttpd refused `fd` (it closed it, and will not say it started or closed it). */
void ld_conn_watch_refused(ld_conn_watch *w, int fd);
/* libmicrohttpd started the connection of `fd`: its mark, for the connection's socket context
 * (NULL when it is not watched). */
ld_conn_mark *ld_conn_watch_started(ld_conn_watch *w, int fd);
/* libmicrohttpd closed the connection: forgets it. NULL is a no-op. */
void ld_conn_watch_closed(ld_conn_watch *w, ld_conn_mark *m);
/* A request's headers are in (1), or its answer is done and the next one is owed (0). */
void ld_conn_mark_busy(ld_conn_mark *m, int busy);
/* The connection was answered before the client sent all of its body: when it closes, it goes
 * to the lingerer rather than being closed at once. NULL is a no-op. */
void ld_conn_mark_linger(ld_conn_mark *m);

#endif
