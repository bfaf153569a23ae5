/* peers.h — connections open per client address (LEAKD_CONNECTIONS_PER_ADDRESS).
 *
 * LEAKD_CONNECTION_LIMIT is one pool for every client: a few hundred sockets from one host
 * that each send half a request would fill it, and everyone else would wait in the listen
 * backlog. The accepting thread counts each connection against its client's address here
 * before handing it on, and refuses one over that address's limit at once. An address is an
 * IPv4 address, or an IPv6 /64 (one host is usually given a whole /64, so counting single IPv6
 * addresses would limit nothing); an IPv4-mapped IPv6 address counts as its IPv4 address.
 * Other families (a Unix socket) are not limited. Thread-safe. */
#ifndef LD_PEERS_H
#define LD_PEERS_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct ld_peers ld_peers;

/* `limit` connections per address, among at most `max_open` open at once (the connection
 * limit: the table is sized for that many addresses). NULL with the reason in err. */
ld_peers *ld_peers_new(unsigned limit, unsigned max_open, char *err, size_t cap);
void ld_peers_free(ld_peers *p);

/* Counts a new connection from `sa`: 1, or 0 (not counted) when its address already has
 * `limit` open. NULL counts nothing and always answers 1. */
int ld_peers_enter(ld_peers *p, const struct sockaddr *sa);
/* A connection counted by ld_peers_enter has closed. */
void ld_peers_leave(ld_peers *p, const struct sockaddr *sa);
/* Connections open from the address of `sa` (0 when not limited). */
unsigned ld_peers_count(ld_peers *p, const struct sockaddr *sa);

/* The address as it is counted, for logs: "192.0.2.7", "2001:db8:1:2::/64". */
void ld_peers_name(const struct sockaddr *sa, char *buf, size_t cap);

#endif
