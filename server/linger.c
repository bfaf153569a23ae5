/* linger.c — see linger.h. One thread waits on every lingering socket with epoll. */
#define _GNU_SOURCE

#include "linger.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;                /* -1: free */
    long long since_ms;    /* taken */
    long long heard_ms;    /* last read data */
} slot;

struct ld_linger {
    pthread_mutex_t mu;
    slot slots[LD_LINGER_SOCKETS];
    int used;              /* slots taken */
    int ep;                /* epoll: the sockets (data = slot index) and `stop` */
    int stop;              /* eventfd, written to end the thread */
    atomic_ullong *lingered;
    pthread_t thread;
    char sink[64 * 1024]; /* what the clients still send, dropped */
};

#define STOP_TAG UINT32_MAX

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Locked. */
static void release(ld_linger *l, slot *s) {
    epoll_ctl(l->ep, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    s->fd = -1;
    l->used--;
}

/* Locked. Reads and drops what the socket holds; 1 when it is done with (the client closed its
 * side, or an error). */
static int drain(ld_linger *l, slot *s, long long now) {
    for (;;) {
        ssize_t n = recv(s->fd, l->sink, sizeof l->sink, MSG_DONTWAIT);
        if (n > 0) {
            s->heard_ms = now;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
}

static void *linger_main(void *arg) {
    ld_linger *l = arg;
    struct epoll_event ev[64];
    for (;;) {
        int n = epoll_wait(l->ep, ev, 64, 250);
        if (n < 0 && errno != EINTR) break;
        long long now = now_ms();
        pthread_mutex_lock(&l->mu);
        int stopping = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u32 == STOP_TAG) {
                stopping = 1;
                continue;
            }
            slot *s = &l->slots[ev[i].data.u32];
            if (s->fd >= 0 && drain(l, s, now)) release(l, s);
        }
        for (int i = 0; i < LD_LINGER_SOCKETS; i++) {
            slot *s = &l->slots[i];
            if (s->fd >= 0 && (stopping || now - s->heard_ms >= LD_LINGER_QUIET_MS || now - s->since_ms >= LD_LINGER_MAX_MS))
                release(l, s);
        }
        pthread_mutex_unlock(&l->mu);
        if (stopping) break;
    }
    return NULL;
}

ld_linger *ld_linger_start(atomic_ullong *lingered, char *err, size_t cap) {
    ld_linger *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    for (int i = 0; i < LD_LINGER_SOCKETS; i++) l->slots[i].fd = -1;
    l->lingered = lingered;
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = STOP_TAG};
    int rc = 0;
    if (l->ep < 0 || l->stop < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->stop, &ev) != 0) {
        snprintf(err, cap, "cannot start the lingering close: %s", strerror(errno));
        goto fail;
    }
    pthread_mutex_init(&l->mu, NULL);
    rc = pthread_create(&l->thread, NULL, linger_main, l);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the lingering close: %s", strerror(rc));
        pthread_mutex_destroy(&l->mu);
        goto fail;
    }
    return l;
fail:
    if (l->ep >= 0) close(l->ep);
    if (l->stop >= 0) close(l->stop);
    free(l);
    return NULL;
}

void ld_linger_stop(ld_linger *l) {
    if (!l) return;
    uint64_t one = 1;
    if (write(l->stop, &one, sizeof one) != (ssize_t)sizeof one) { /* cannot fail on a fresh eventfd */ }
    pthread_join(l->thread, NULL);
    for (int i = 0; i < LD_LINGER_SOCKETS; i++)
        if (l->slots[i].fd >= 0) release(l, &l->slots[i]);
    close(l->ep);
    close(l->stop);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void ld_linger_close_sparing(ld_linger *l, int fd, int keep_free) {
    if (fd < 0) return;
    if (!l) {
        close(fd);
        return;
    }
    /* The answer is in the kernel's hands: the client sees its end, then our FIN. */
    shutdown(fd, SHUT_WR);
    long long now = now_ms();
    pthread_mutex_lock(&l->mu);
    int i = 0;
    while (i < LD_LINGER_SOCKETS && l->slots[i].fd >= 0) i++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
    if (i == LD_LINGER_SOCKETS || LD_LINGER_SOCKETS - l->used <= keep_free ||
        epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
    } else {
        l->slots[i] = (slot){fd, now, now};
        l->used++;
        if (l->lingered) atomic_fetch_add(l->lingered, 1);
    }
    pthread_mutex_unlock(&l->mu);
}

void ld_linger_close(ld_linger *l, int fd) {
    ld_linger_close_sparing(l, fd, 0);
}
