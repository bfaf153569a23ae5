/* peers.c — see peers.h. An open-addressing table (linear probing, deletion by shifting back)
 * of address → connections, sized for twice the addresses that can be open at once, so it
 * never fills and probes stay short. The hash is keyed at random: the addresses are chosen by
 * the clients, who must not be able to line them up in one run of the table. */
#define _GNU_SOURCE

#include "peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

typedef struct {
    uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d; IPv6 with its last 64 bits zero */
    unsigned open;    /* 0: free */
} entry;

struct ld_peers {
    pthread_mutex_t mu;
    unsigned limit;
    size_t mask;      /* slots - 1, slots a power of two */
    size_t used;      /* addresses in the table */
    uint64_t seed[2];
    entry *slots;
};

/* The address `sa` is counted under; 0 for a family that is not limited. */
static int key_of(const struct sockaddr *sa, uint8_t key[16]) {
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &in->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) memcpy(key, &in6->sin6_addr, 16);
        else memcpy(key, &in6->sin6_addr, 8);
        return 1;
    }
    return 0;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t home(const ld_peers *p, const uint8_t key[16]) {
    uint64_t a, b;
    memcpy(&a, key, 8);
    memcpy(&b, key + 8, 8);
    return (size_t)mix(mix(a ^ p->seed[0]) + (b ^ p->seed[1])) & p->mask;
}

/* The slot holding `key`, or the free slot where it would go (locked). */
static size_t find(const ld_peers *p, const uint8_t key[16]) {
    size_t i = home(p, key);
    while (p->slots[i].open && memcmp(p->slots[i].addr, key, 16) != 0) i = (i + 1) & p->mask;
    return i;
}

ld_peers *ld_peers_new(unsigned limit, unsigned max_open, char *err, size_t cap) {
    size_t slots = 16;
    while (slots < 2 * (size_t)max_open + 2) slots *= 2;
    ld_peers *p = calloc(1, sizeof *p);
    if (p) p->slots = calloc(slots, sizeof *p->slots);
    if (!p || !p->slots) {
        snprintf(err, cap, "out of memory for the table of %zu client addresses", slots);
        free(p);
        return NULL;
    }
    if (getrandom(p->seed, sizeof p->seed, GRND_NONBLOCK) != (ssize_t)sizeof p->seed) {
        /* no entropy yet (early boot): the clock still keeps the layout unknown to clients */
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        p->seed[0] = mix((uint64_t)t.tv_nsec ^ (uint64_t)(uintptr_t)p);
        p->seed[1] = mix((uint64_t)t.tv_sec ^ p->seed[0]);
    }
    pthread_mutex_init(&p->mu, NULL);
    p->limit = limit;
    p->mask = slots - 1;
    return p;
}

void ld_peers_free(ld_peers *p) {
    if (!p) return;
    pthread_mutex_destroy(&p->mu);
    free(p->slots);
    free(p);
}

int ld_peers_enter(ld_peers *p, const struct sockaddr *sa) {
    uint8_t key[16];
    if (!p || !key_of(sa, key)) return 1;
    pthread_mutex_lock(&p->mu);
    size_t i = find(p, key);
    int ok = p->slots[i].open < p->limit;
    /* (never full while max_open holds; if it ever did not, the connection goes uncounted
     * rather than a lookup running round a table with no free slot) */
    if (ok && (p->slots[i].open || p->used + 1 < p->mask)) {
        if (!p->slots[i].open) p->used++;
        memcpy(p->slots[i].addr, key, 16);
        p->slots[i].open++;
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

void ld_peers_leave(ld_peers *p, const struct sockaddr *sa) {
    uint8_t key[16];
    if (!p || !key_of(sa, key)) return;
    pthread_mutex_lock(&p->mu);
    size_t i = find(p, key);
    if (p->slots[i].open && --p->slots[i].open == 0) {
        p->used--;
        /* Shift back the entries after it that probed past slot i, so no lookup stops at the
         * hole: j moves into i unless its home lies cyclically in (i, j]. */
        size_t j = i;
        for (;;) {
            j = (j + 1) & p->mask;
            if (!p->slots[j].open) break;
            size_t h = home(p, p->slots[j].addr);
            if (((j - h) & p->mask) < ((j - i) & p->mask)) continue;
            p->slots[i] = p->slots[j];
            p->slots[j].open = 0;
            i = j;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

unsigned ld_peers_count(ld_peers *p, const struct sockaddr *sa) {
    uint8_t key[16];
    if (!p || !key_of(sa, key)) return 0;
    pthread_mutex_lock(&p->mu);
    unsigned n = p->slots[find(p, key)].open;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void ld_peers_name(const struct sockaddr *sa, char *buf, size_t cap) {
    uint8_t key[16];
    char text[INET6_ADDRSTRLEN] = "";
    if (!key_of(sa, key)) {
        snprintf(buf, cap, "(a local socket)");
        return;
    }
    if (key[10] == 0xff && key[11] == 0xff && !memcmp(key, "\0\0\0\0\0\0\0\0\0\0", 10)) {
        inet_ntop(AF_INET, key + 12, text, sizeof text);
        snprintf(buf, cap, "%s", text);
        return;
    }
    inet_ntop(AF_INET6, key, text, sizeof text);
    snprintf(buf, cap, "%s/64", text);
}
