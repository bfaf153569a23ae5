/* load.c — leakd_load: the load generator and the baselines of leakd's load benchmark
 * (tests/bench/leakd/run.sh drives it; README.md beside it says how to read the figures).
 *
 *   leakd_load traces  --server H:P --key K --app A [--sigs N] [--size B] [--conns C]
 *                      (--count N | --seconds S) [--rate R] [--warmup-sigs] [--pss-pid P]...
 *   leakd_load heap    --server H:P --key K --app A --mb M [--conns C] (--count N | --seconds S)
 *                      [--pss-pid P]...
 *   leakd_load healthz --server H:P [--conns C] (--count N | --seconds S)
 *   leakd_load fsync DIR [--seconds S]     fsync'd 4 KiB appends per second in DIR
 *   leakd_load fsync DIR --every-ms T [--seconds S]
 *                                          one 4 KiB overwrite + fdatasync every T ms, as a
 *                                          commit flushes the WAL: its latency, p50/p99/max
 *   leakd_load seqwrite DIR [--mb M] [--count N] [--conns C] [--direct]
 *                                          N files of M MB by C writers, each fsync'd: MB/s;
 *                                          --direct: with O_DIRECT, as leakd writes an upload
 *   leakd_load pss PID...                  PSS (kB) of each PID's process tree, summed
 *
 * One thread, epoll, raw non-blocking sockets with HTTP/1.1 keep-alive: C connections, each
 * with at most one request in flight. Bodies are built before the clock starts: a request is
 * a small per-request prefix (headers + the meta part, with a fresh report_id) followed by a
 * shared, read-only data part and a shared suffix, sent with writev — no copy per request.
 *
 * Closed loop (no --rate): every connection sends its next request as soon as its previous
 * answer is in. Open loop (--rate R): request i is due at t0 + i/R whether or not earlier
 * ones are answered; it goes out on the first free connection (the generator wakes once a
 * millisecond, to send and to read what was answered meanwhile, so a request goes out up to
 * 1 ms late), and its latency counts from the time it was due (no coordinated omission: a
 * stalled server shows up in the latency) to the time the kernel received its answer
 * (SO_TIMESTAMPNS), which the tick does not delay. A request due while every connection waits
 * for an answer goes out when one is free, still timed from when it was due; the result line
 * counts those (waited_for_conn): the server then sees fewer requests at once than were due.
 *
 * Only loopback addresses are accepted. Every run is bounded by --count or --seconds (and a
 * hard stop at 2 × seconds + 30 s). The last line on stdout is `key=value ...` for run.sh.
 * Exit status: 0 when every request got a 2xx, 1 otherwise, 2 on usage errors. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 4096
/* Open loop: the generator wakes to send at most once per TICK (seconds). */
#define TICK 0.001
/* A connection idle this long (seconds) is closed and opened anew before its next request.
 * leakd closes a kept-alive connection that has sent no request for LEAKD_HEADER_TIMEOUT (10 s),
 * and a request sent as it does so can cross the close and fail, as with any HTTP server. In
 * the open loop the last of 256 connections are used only when a stall has the first ones
 * busy, after idling for longer than that: in one fixed-rate minute (session 37) 2 requests
 * failed on closed connections, and leakd had logged neither. HTTP clients keep an idle
 * connection for less time than the server does (or retry a request that met a close before
 * any answer). */
#define IDLE_MAX 5.0
/* The fixed-rate target: a request (or a probe's flush) that takes this long or more is slow,
 * and the p99 holds while slow requests stay under 1 % of the run. */
#define SLOW_S 0.050
#define MAX_PSS_PIDS 4
#define BOUNDARY "leakdloadb7d1c0a9e5f34f28"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CLOCK_MONOTONIC - CLOCK_REALTIME now: turns the kernel's receive times into now()'s clock. */
static double real_to_mono(void) {
    struct timespec r;
    clock_gettime(CLOCK_REALTIME, &r);
    return now() - ((double)r.tv_sec + (double)r.tv_nsec / 1e9);
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("leakd_load: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- options ----------------------------------------------------------------------------- */

typedef struct {
    const char *mode;
    const char *server, *key, *app;
    int conns;
    long count;
    double seconds;
    double rate;
    int sigs;
    long size;   /* traces JSON bytes */
    long mb;     /* heap part MB */
    int warmup_sigs;
    double timeline; /* --timeline SECONDS: latency per window of due times, to stderr */
    double every_ms; /* fsync --every-ms: a paced probe of fdatasync latency */
    pid_t pss_pids[MAX_PSS_PIDS];
    int npss;
    const char *dir;
    int direct;      /* seqwrite --direct: O_DIRECT, as leakd writes an upload (blob_file.c) */
} opts;

/* ---- PSS of process trees ----------------------------------------------------------------- */

static long pss_kb_of(pid_t pid) {
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    long kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Pss:", 4) == 0) {
            kb = strtol(line + 4, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

/* The PSS of `root` and all its descendants (one scan of /proc for the parent links). */
static long pss_tree_kb(pid_t root) {
    enum { MAXP = 65536 };
    static pid_t pids[MAXP], ppids[MAXP];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAXP) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300], buf[512];
        snprintf(p, sizeof p, "/proc/%.255s/stat", e->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t l = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (l <= 0) continue;
        buf[l] = 0;
        char *rp = strrchr(buf, ')');
        if (!rp) continue;
        int ppid = 0;
        char st;
        if (sscanf(rp + 2, "%c %d", &st, &ppid) != 2) continue;
        pids[n] = (pid_t)atoi(e->d_name);
        ppids[n] = (pid_t)ppid;
        n++;
    }
    closedir(d);
    /* Breadth-first over the parent links from root. */
    static pid_t tree[MAXP];
    int nt = 0, head = 0;
    tree[nt++] = root;
    while (head < nt) {
        pid_t p = tree[head++];
        for (int i = 0; i < n && nt < MAXP; i++)
            if (ppids[i] == p) tree[nt++] = pids[i];
    }
    long kb = 0;
    for (int i = 0; i < nt; i++) kb += pss_kb_of(tree[i]);
    return kb;
}

typedef struct {
    pid_t pids[MAX_PSS_PIDS];
    int npids;
    volatile int stop;
    long max_kb[MAX_PSS_PIDS], first_kb[MAX_PSS_PIDS], max_sum_kb;
    double sum_kb[MAX_PSS_PIDS];
    long samples;
    pthread_t th;
} pss_sampler;

static void *pss_loop(void *arg) {
    pss_sampler *s = arg;
    while (!s->stop) {
        long sum = 0;
        for (int i = 0; i < s->npids; i++) {
            long kb = pss_tree_kb(s->pids[i]);
            if (s->samples == 0) s->first_kb[i] = kb;
            if (kb > s->max_kb[i]) s->max_kb[i] = kb;
            s->sum_kb[i] += (double)kb;
            sum += kb;
        }
        if (sum > s->max_sum_kb) s->max_sum_kb = sum;
        s->samples++;
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

/* ---- HTTP engine ------------------------------------------------------------------------- */

typedef struct {
    int fd;
    int busy;          /* a request is in flight */
    int connected;     /* a connect() completed */
    int want_out;      /* EPOLLOUT is on: part of the request waits to be sent */
    struct iovec iov[3];
    int iovcnt;
    size_t to_send, sent;
    double due, started;
    char prefix[4096];
    char rbuf[16384];
    size_t rlen;
    int early;         /* answered before the body was all sent: close after */
    int waited;        /* open loop: every connection was busy when it was due */
    double rx_at;      /* open loop: when the kernel received the last bytes read (CLOCK_MONOTONIC), or 0 */
    double idle_since; /* its connect, or its last answer (now()) */
} conn;

typedef struct {
    opts *o;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char hostport[128];
    int ep;
    conn *conns;        /* o->conns of them */
    int inflight;       /* conns with a request in flight */
    /* request bodies */
    char **traces;      /* sigs JSON documents */
    size_t *traces_len;
    char *heap;         /* mb MiB of random bytes */
    size_t heap_len;
    uint64_t run_tag;   /* makes report ids unique across runs */
    /* progress */
    long issued, done, ok, bad, errors;
    long starved_upto;  /* open loop: requests before this one found every connection busy when due */
    long waited_for_conn; /* ...and how many of them were sent late for that */
    long reopened;      /* connections closed for IDLE_MAX and opened anew */
    long status_count[6];
    int last_bad_status;
    char last_bad_body[300];
    double *lat;        /* seconds, per answered request */
    double *lat_due;    /* --timeline: when each of them was due, seconds after the start */
    double *ontime;     /* open loop: latency of those that found a free connection when due... */
    double *ontime_lag; /* ...and how late the generator sent them (its own delay) */
    long nontime;
    double t0;
    long lat_cap, nlat;
    uint64_t body_bytes;
    int rx_stamps;      /* open loop: answers are timed by the kernel's receive time (SO_TIMESTAMPNS) */
    double real_to_mono; /* CLOCK_MONOTONIC - CLOCK_REALTIME, for those times */
} engine;

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int is_loopback(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
    }
    return 0;
}

static void resolve(engine *g, const char *spec) {
    char host[128];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec) die("--server must be host:port, not %s", spec);
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof host) die("--server: host too long");
    memcpy(host, spec, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res) die("cannot resolve %s", spec);
    memcpy(&g->addr, res->ai_addr, res->ai_addrlen);
    g->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    if (!is_loopback(&g->addr)) die("%s is not a loopback address: this benchmark only talks to this machine", spec);
    snprintf(g->hostport, sizeof g->hostport, "%s", spec);
}

static void conn_close(engine *g, conn *c) {
    if (c->fd >= 0) {
        epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->connected = 0;
}

static int conn_open(engine *g, conn *c) {
    c->fd = socket(g->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (g->rx_stamps) setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    /* A blocking connect (loopback: immediate), then non-blocking I/O. */
    if (connect(c->fd, (struct sockaddr *)&g->addr, g->addrlen) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    set_nonblock(c->fd);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    epoll_ctl(g->ep, EPOLL_CTL_ADD, c->fd, &ev);
    c->connected = 1;
    c->want_out = 0;
    c->idle_since = now();
    return 0;
}

/* EPOLLOUT only while something waits to be sent: a writable idle socket must not spin. */
static void want_out(engine *g, conn *c, int on) {
    if (c->fd < 0 || c->want_out == on) return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

/* Report i's id, time-ordered as the SDK makes them (UUID version 7: 48 bits of Unix time in
 * ms, then the run's tag and i, unique across runs). */
static void uuid_of(engine *g, long i, char out[37]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    uint64_t b = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ g->run_tag;
    snprintf(out, 37, "%08x-%04x-7%03x-%04x-%012llx", (unsigned)(ms >> 16), (unsigned)ms & 0xffff,
             (unsigned)(g->run_tag >> 52), (unsigned)(0x8000 | ((b >> 48) & 0x3fff)),
             (unsigned long long)(((uint64_t)i << 24) ^ (b & 0xffffff)) & 0xffffffffffffull);
}

static const char suffix[] = "\r\n--" BOUNDARY "--\r\n";

/* Fills c's iovecs with request number i. */
static void build_request(engine *g, conn *c, long i) {
    opts *o = g->o;
    if (strcmp(o->mode, "healthz") == 0) {
        int n = snprintf(c->prefix, sizeof c->prefix, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", g->hostport);
        c->iov[0] = (struct iovec){c->prefix, (size_t)n};
        c->iovcnt = 1;
        c->to_send = (size_t)n;
        return;
    }
    int heap = strcmp(o->mode, "heap") == 0;
    char id[37];
    uuid_of(g, i, id);
    const void *data;
    size_t dlen;
    if (heap) {
        data = g->heap;
        dlen = g->heap_len;
    } else {
        long s = o->warmup_sigs ? i % o->sigs : (long)(rnd() % (uint64_t)o->sigs);
        data = g->traces[s];
        dlen = g->traces_len[s];
    }
    char part[1400];
    int pl = snprintf(part, sizeof part,
                      "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n"
                      "{\"report_id\":\"%s\",\"app\":\"%s\",\"app_version\":\"1.%ld\",\"build\":%ld,\"sdk_version\":\"0.1.0\","
                      "\"runtime\":\"jvm\",\"mode\":\"%s\",\"created_at\":\"2026-01-01T00:00:00Z\","
                      "\"device\":{\"install_id\":\"bench-device-%04ld\",\"manufacturer\":\"Bench\",\"model\":\"VM\",\"os\":\"linux\","
                      "\"os_version\":\"6.1\",\"abi\":\"x86_64\"},\"heap\":{\"used_bytes\":1000000,\"max_bytes\":4000000},"
                      "\"trigger\":\"manual\",\"retained\":[],\"dropped\":0}\r\n"
                      "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"\r\nContent-Type: %s\r\n\r\n",
                      id, o->app, i % 7, 100 + i % 50, heap ? "heap" : "traces", i % 5000, heap ? "heap" : "traces",
                      heap ? "application/zstd" : "application/json");
    size_t clen = (size_t)pl + dlen + sizeof suffix - 1;
    int n = snprintf(c->prefix, sizeof c->prefix,
                     "POST /v1/reports HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: multipart/form-data; boundary=" BOUNDARY "\r\nContent-Length: %zu\r\n\r\n%s",
                     g->hostport, o->key, clen, part);
    if (n >= (int)sizeof c->prefix) die("request prefix too long");
    c->iov[0] = (struct iovec){c->prefix, (size_t)n};
    c->iov[1] = (struct iovec){(void *)data, dlen};
    c->iov[2] = (struct iovec){(void *)suffix, sizeof suffix - 1};
    c->iovcnt = 3;
    c->to_send = (size_t)n + dlen + sizeof suffix - 1;
    g->body_bytes += clen;
}

static void do_send(engine *g, conn *c);

static void issue(engine *g, conn *c, double due) {
    if (c->fd >= 0 && now() - c->idle_since >= IDLE_MAX) {
        conn_close(g, c);
        g->reopened++;
    }
    if (c->fd < 0 && conn_open(g, c) != 0) {
        g->issued++;
        g->errors++;
        g->done++;
        return;
    }
    c->waited = g->issued < g->starved_upto;
    if (c->waited) g->waited_for_conn++;
    build_request(g, c, g->issued++);
    c->busy = 1;
    g->inflight++;
    c->sent = 0;
    c->rlen = 0;
    c->early = 0;
    c->due = due;
    c->rx_at = 0;
    c->started = now();
    do_send(g, c);
}

static void finish(engine *g, conn *c, int status, double t) {
    c->busy = 0;
    c->idle_since = now();
    g->inflight--;
    g->done++;
    if (status >= 200 && status < 300) g->ok++;
    else if (status > 0) {
        g->bad++;
        g->last_bad_status = status;
    } else g->errors++;
    if (status >= 100 && status < 600) g->status_count[status / 100]++;
    if (status > 0 && g->nlat < g->lat_cap) {
        if (g->lat_due) g->lat_due[g->nlat] = c->due - g->t0;
        g->lat[g->nlat++] = t - c->due;
        if (g->ontime && !c->waited) {
            g->ontime_lag[g->nontime] = c->started - c->due;
            g->ontime[g->nontime++] = t - c->due;
        }
    }
}

static void fail_conn(engine *g, conn *c) {
    if (c->busy) finish(g, c, 0, now());
    conn_close(g, c);
}

/* Sends what the socket takes. */
static void do_send(engine *g, conn *c) {
    while (c->busy && c->sent < c->to_send) {
        struct iovec v[3];
        int nv = 0;
        size_t skip = c->sent;
        for (int i = 0; i < c->iovcnt; i++) {
            if (skip >= c->iov[i].iov_len) {
                skip -= c->iov[i].iov_len;
                continue;
            }
            v[nv].iov_base = (char *)c->iov[i].iov_base + skip;
            v[nv].iov_len = c->iov[i].iov_len - skip;
            skip = 0;
            nv++;
        }
        ssize_t w = writev(c->fd, v, nv);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                want_out(g, c, 1);
                return;
            }
            fail_conn(g, c);
            return;
        }
        c->sent += (size_t)w;
    }
    want_out(g, c, 0);
}

/* Parses a complete response in rbuf: returns its status, or 0 if incomplete, -1 if bad. */
static int parse_response(conn *c, size_t *total, int *close_after) {
    c->rbuf[c->rlen < sizeof c->rbuf ? c->rlen : sizeof c->rbuf - 1] = 0;
    char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (!end) return c->rlen >= sizeof c->rbuf - 1 ? -1 : 0;
    int status = 0;
    if (sscanf(c->rbuf, "HTTP/1.%*d %d", &status) != 1) return -1;
    size_t hlen = (size_t)(end - c->rbuf) + 4;
    long clen = -1;
    *close_after = 0;
    for (char *p = strstr(c->rbuf, "\r\n"); p && p < end; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, "Content-Length:", 15) == 0) clen = strtol(p + 17, NULL, 10);
        if (strncasecmp(p + 2, "Connection: close", 17) == 0) *close_after = 1;
    }
    if (clen < 0) {
        if (strncmp(c->rbuf, "HTTP/1.0", 8) == 0) *close_after = 1;
        clen = 0;
    }
    if (hlen + (size_t)clen > sizeof c->rbuf - 1) return -1;
    if (c->rlen < hlen + (size_t)clen) return 0;
    *total = hlen + (size_t)clen;
    return status;
}

static void do_recv(engine *g, conn *c) {
    for (;;) {
        if (c->rlen >= sizeof c->rbuf - 1) {
            fail_conn(g, c);
            return;
        }
        struct iovec v = {c->rbuf + c->rlen, sizeof c->rbuf - 1 - c->rlen};
        union {
            char buf[CMSG_SPACE(sizeof(struct timespec))];
            struct cmsghdr align;
        } cm;
        struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = g->rx_stamps ? cm.buf : NULL,
                            .msg_controllen = g->rx_stamps ? sizeof cm.buf : 0};
        ssize_t r = recvmsg(c->fd, &mh, 0);
        for (struct cmsghdr *h = r > 0 && g->rx_stamps ? CMSG_FIRSTHDR(&mh) : NULL; h; h = CMSG_NXTHDR(&mh, h))
            if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(h), sizeof ts);
                c->rx_at = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + g->real_to_mono;
            }
        if (r == 0) { /* the server closed */
            fail_conn(g, c);
            return;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            fail_conn(g, c);
            return;
        }
        c->rlen += (size_t)r;
        if (!c->busy) { /* bytes nobody asked for */
            conn_close(g, c);
            return;
        }
        size_t total = 0;
        int close_after = 0;
        int st = parse_response(c, &total, &close_after);
        if (st == 0) continue;
        if (st < 0) {
            fail_conn(g, c);
            return;
        }
        if (st < 200 || st >= 300) {
            char *body = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
            snprintf(g->last_bad_body, sizeof g->last_bad_body, "%.*s", (int)(total - (size_t)(body + 4 - c->rbuf)),
                     body + 4);
        }
        int early = c->sent < c->to_send;
        finish(g, c, st, c->rx_at > 0 ? c->rx_at : now());
        if (close_after || early) conn_close(g, c);
        else c->rlen = 0;
        return;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, long n, double p) {
    if (n <= 0) return 0;
    long i = (long)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* Latency by window of due time: where in a run the slow requests were (a stall shows as a
 * window whose max is the stall and whose followers drain the backlog). */
static void print_timeline(engine *g, double window) {
    long nw = 0;
    for (long i = 0; i < g->nlat; i++)
        if ((long)(g->lat_due[i] / window) + 1 > nw) nw = (long)(g->lat_due[i] / window) + 1;
    double *w = malloc((size_t)(g->nlat ? g->nlat : 1) * sizeof *w);
    if (!w) die("out of memory");
    /* over_50ms: the window's share of what the run's p99 allows (1 % of its requests) */
    fprintf(stderr, "timeline: window_s count p50_ms p99_ms max_ms over_50ms\n");
    for (long k = 0; k < nw; k++) {
        long n = 0, over = 0;
        for (long i = 0; i < g->nlat; i++)
            if ((long)(g->lat_due[i] / window) == k) {
                w[n++] = g->lat[i];
                over += g->lat[i] >= SLOW_S;
            }
        qsort(w, (size_t)n, sizeof *w, cmp_double);
        fprintf(stderr, "timeline: %7.2f %6ld %7.2f %7.2f %7.2f %6ld\n", (double)k * window, n, pct(w, n, 0.5) * 1e3,
                pct(w, n, 0.99) * 1e3, n ? w[n - 1] * 1e3 : 0.0, over);
    }
    free(w);
}

/* ---- request bodies ------------------------------------------------------------------------ */

/* A ~`size`-byte trace JSON document: one application leak, one trace of NO elements, then
 * UNKNOWN ones (suspect references), then the leaking YES object. Signature `s` renames a
 * suspect element's class, so the server's recomputed signature differs per s. */
static char *make_traces(int s, long size, size_t *len) {
    size_t cap = (size_t)size + 8192;
    char *b = malloc(cap);
    if (!b) die("out of memory");
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
    PUT("{\"format\":1,\"analyzer\":{\"name\":\"leakwatch\",\"version\":\"0.1.0\"},\"duration_ms\":{\"index\":12,\"paths\":3},"
        "\"leaks\":[{\"signature\":\"0000000000000000000000000000000000000000\",\"kind\":\"application\","
        "\"short_description\":\"BenchHolder%04d.listeners\",\"count\":1,\"traces\":[{\"gc_root\":\"STICKY_CLASS\",\"elements\":[",
        s);
    /* Pick the element count so the document lands near `size`: ~340 bytes an element. */
    long elements = size / 340;
    if (elements < 4) elements = 4;
    if (elements > 9000) elements = 9000;
    long no_count = elements / 3;
    for (long k = 0; k + 1 < elements; k++) {
        int is_no = k < no_count;
        int suspect = !is_no || k + 1 == no_count;
        const char *kind = k == 0 ? "class" : "instance";
        if (k == no_count) /* the first suspect: the one that names the signature */
            PUT("{\"class\":\"com.example.bench.BenchHolder%04d\",\"object_kind\":\"instance\",\"leaking\":\"UNKNOWN\","
                "\"reason\":\"no inspector knows this class; its state is unknown in this trace\","
                "\"labels\":[\"bench element %ld\",\"retained by a chain of application objects\"],"
                "\"reference\":{\"kind\":\"instance_field\",\"name\":\"listeners%04d\",\"suspect\":true}},",
                s, k, s);
        else
            PUT("{\"class\":\"com.example.bench.layer%02ld.Component%02ld$Inner\",\"object_kind\":\"%s\",\"leaking\":\"%s\","
                "\"reason\":\"%s\",\"labels\":[\"bench element %ld\",\"mId=0x7f0a%04lx\",\"state=RESUMED\"],"
                "\"reference\":{\"kind\":\"%s\",\"name\":\"m%sField%02ld\",\"suspect\":%s}},",
                k % 20, k % 50, kind, is_no ? "NO" : "UNKNOWN",
                is_no ? "a GC root or an object that outlives the leaking screen (the application singleton)"
                      : "no inspector knows this class; its state is unknown in this trace",
                k, k, k == 0 ? "static_field" : "instance_field", is_no ? "Root" : "Chain", k, suspect ? "true" : "false");
    }
    PUT("{\"class\":\"com.example.bench.LeakedScreen\",\"object_kind\":\"instance\",\"leaking\":\"YES\","
        "\"reason\":\"ObjectWatcher was watching this because LeakedScreen received onDestroy\","
        "\"key\":\"b3c8a7e0-0000-4000-8000-%012d\",\"description\":\"LeakedScreen destroyed\",\"watch_ms\":5012,\"retained_ms\":5003}"
        "]}]}]}",
        s);
#undef PUT
    if (n >= cap) die("trace document overflow");
    *len = n;
    return b;
}

/* ---- the load run ------------------------------------------------------------------------- */

static int run_load(opts *o) {
    static engine g;
    g.o = o;
    resolve(&g, o->server);
    if (strcmp(o->mode, "healthz") != 0 && (!o->key || !o->app)) die("--key and --app are required for %s", o->mode);
    if (o->conns < 1 || o->conns > MAX_CONNS) die("--conns must be 1..%d", MAX_CONNS);
    if (o->count <= 0 && o->seconds <= 0) die("give --count or --seconds");
    if (o->rate > 0 && o->seconds <= 0 && o->count <= 0) die("--rate needs --seconds or --count");
    rng_state ^= (uint64_t)time(NULL) * 0x100000001b3ull ^ (uint64_t)getpid();
    g.run_tag = rnd();

    if (strcmp(o->mode, "traces") == 0) {
        if (o->sigs < 1 || o->sigs > 100000) die("--sigs must be 1..100000");
        g.traces = calloc((size_t)o->sigs, sizeof *g.traces);
        g.traces_len = calloc((size_t)o->sigs, sizeof *g.traces_len);
        size_t total = 0;
        for (int s = 0; s < o->sigs; s++) {
            g.traces[s] = make_traces(s, o->size, &g.traces_len[s]);
            total += g.traces_len[s];
        }
        fprintf(stderr, "traces: %d signature(s), %.1f KB per document\n", o->sigs, (double)total / o->sigs / 1000);
    } else if (strcmp(o->mode, "heap") == 0) {
        if (o->mb < 1 || o->mb > 2048) die("--mb must be 1..2048");
        g.heap_len = (size_t)o->mb << 20;
        g.heap = malloc(g.heap_len);
        if (!g.heap) die("out of memory");
        uint64_t *w = (uint64_t *)g.heap;
        for (size_t i = 0; i < g.heap_len / 8; i++) w[i] = rnd();
        /* Not a zstd frame: the worker fails it at its first bytes and goes back to sleep. */
        memcpy(g.heap, "LEAKD-BENCH-NOT-ZSTD", 20);
    }

    long limit = o->count > 0 ? o->count : 0;
    if (o->rate > 0 && limit == 0) limit = (long)(o->rate * o->seconds + 0.5);
    g.lat_cap = limit > 0 ? limit : (long)(o->seconds * 200000) + 1000;
    g.lat = calloc((size_t)g.lat_cap, sizeof *g.lat);
    if (!g.lat) die("out of memory");
    if (o->rate > 0 && (!(g.ontime = calloc((size_t)g.lat_cap, sizeof *g.ontime)) ||
                        !(g.ontime_lag = calloc((size_t)g.lat_cap, sizeof *g.ontime_lag))))
        die("out of memory");
    if (o->timeline > 0 && !(g.lat_due = calloc((size_t)g.lat_cap, sizeof *g.lat_due))) die("out of memory");

    signal(SIGPIPE, SIG_IGN);
    /* A file for each connection (--conns up to MAX_CONNS): many systems start processes with
     * 1,024 open files at most. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)o->conns + 64) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)o->conns + 64 ? rl.rlim_max : (rlim_t)o->conns + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    g.conns = calloc((size_t)o->conns, sizeof *g.conns);
    struct epoll_event *evs = calloc((size_t)o->conns, sizeof *evs);
    if (!g.conns || !evs) die("out of memory");
    g.ep = epoll_create1(EPOLL_CLOEXEC);
    g.rx_stamps = o->rate > 0;
    g.real_to_mono = real_to_mono();
    for (int i = 0; i < o->conns; i++) g.conns[i].fd = -1;
    /* Connect everyone before the clock starts. */
    for (int i = 0; i < o->conns; i++)
        if (conn_open(&g, &g.conns[i]) != 0) die("cannot connect to %s: %s", o->server, strerror(errno));

    pss_sampler ps = {0};
    if (o->npss) {
        ps.npids = o->npss;
        memcpy(ps.pids, o->pss_pids, sizeof ps.pids);
        pthread_create(&ps.th, NULL, pss_loop, &ps);
    }

    double t0 = g.t0 = now();
    double stop_issuing = o->seconds > 0 ? t0 + o->seconds : 1e300;
    double hard_stop = t0 + (o->seconds > 0 ? 2 * o->seconds : 600) + 30;
    double interval = o->rate > 0 ? 1.0 / o->rate : 0;
    long due_next = 0; /* open loop: requests due so far */
    for (;;) {
        double t = now();
        int more = (limit == 0 || g.issued < limit) && t < stop_issuing;
        if (o->rate > 0) {
            while ((limit == 0 || due_next < limit) && t0 + (double)due_next * interval <= t && t0 + (double)due_next * interval < stop_issuing)
                due_next++;
            for (int i = 0; i < o->conns && g.issued < due_next && g.inflight < o->conns; i++)
                if (!g.conns[i].busy) issue(&g, &g.conns[i], t0 + (double)g.issued * interval);
            /* Every connection busy: what is due waits, and says so (the run then measures the
             * generator's limit as much as the server). */
            if (g.issued < due_next) g.starved_upto = due_next;
            more = g.issued < due_next || ((limit == 0 || due_next < limit) && t0 + (double)due_next * interval < stop_issuing);
        } else if (more) {
            for (int i = 0; i < o->conns && (limit == 0 || g.issued < limit); i++)
                if (!g.conns[i].busy) issue(&g, &g.conns[i], now());
        }
        int inflight = g.inflight;
        if (!inflight && !more) break;
        if (t > hard_stop) {
            fprintf(stderr, "leakd_load: hard time limit reached with %d request(s) in flight\n", inflight);
            for (int i = 0; i < o->conns; i++) fail_conn(&g, &g.conns[i]);
            break;
        }
        /* Open loop: sleep to the next TICK whatever comes meanwhile, then take every answer
         * that came and send what is due; each answer is timed by when the kernel received
         * it, not when it was read. The generator shares the server's two cores: spinning
         * here took one away, and waking for every answer cost it 38-41 us of CPU a report
         * at 3,000/s (27-33 without) against 9-15 in the closed loop. A request sent up to a
         * TICK late has that in its latency, which counts from the due time. Closed loop:
         * sleep until an answer. */
        int n;
        if (o->rate > 0) {
            double next = t0 + ceil((now() - t0) / TICK + 1e-9) * TICK;
            struct timespec at = {(time_t)next, (long)((next - (double)(time_t)next) * 1e9)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {}
            g.real_to_mono = real_to_mono();
            n = epoll_wait(g.ep, evs, o->conns, 0);
        } else {
            struct timespec ts = {0, 100000000L};
            n = epoll_pwait2(g.ep, evs, o->conns, &ts, NULL);
        }
        for (int k = 0; k < n; k++) {
            conn *c = evs[k].data.ptr;
            if (c->fd < 0) continue;
            if (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) do_recv(&g, c);
            if (c->fd >= 0 && (evs[k].events & EPOLLOUT) && c->busy) do_send(&g, c);
        }
    }
    double elapsed = now() - t0;
    if (o->npss) {
        ps.stop = 1;
        pthread_join(ps.th, NULL);
    }
    for (int i = 0; i < o->conns; i++) conn_close(&g, &g.conns[i]);
    free(evs);

    long nl = g.nlat;
    if (g.lat_due) print_timeline(&g, o->timeline);
    qsort(g.lat, (size_t)nl, sizeof *g.lat, cmp_double);
    if (g.ontime) {
        qsort(g.ontime, (size_t)g.nontime, sizeof *g.ontime, cmp_double);
        qsort(g.ontime_lag, (size_t)g.nontime, sizeof *g.ontime_lag, cmp_double);
    }
    double rate = (double)g.done / elapsed;
    double mbps = (double)g.body_bytes / elapsed / 1e6;
    long over_50ms = 0; /* the p99 target holds while this stays under 1 % of the requests */
    for (long i = nl; i > 0 && g.lat[i - 1] >= SLOW_S; i--) over_50ms++;
    fprintf(stderr, "%s: %ld requests in %.2f s (%ld 2xx, %ld other status, %ld connection errors)", o->mode, g.done, elapsed,
            g.ok, g.bad, g.errors);
    if (g.reopened) fprintf(stderr, ", %ld connection(s) idle %.0f s opened anew", g.reopened, IDLE_MAX);
    if (o->rate > 0) fprintf(stderr, ", scheduled at %.0f/s", o->rate);
    fprintf(stderr, "\n");
    if (g.bad) fprintf(stderr, "  last non-2xx: %d %s\n", g.last_bad_status, g.last_bad_body);
    printf("mode=%s requests=%ld ok=%ld bad=%ld errors=%ld seconds=%.3f rate=%.1f mbps=%.1f p50_ms=%.2f p90_ms=%.2f "
           "p99_ms=%.2f max_ms=%.2f over_50ms=%ld waited_for_conn=%ld reopened=%ld",
           o->mode, g.done, g.ok, g.bad, g.errors, elapsed, rate, mbps, pct(g.lat, nl, 0.5) * 1e3, pct(g.lat, nl, 0.9) * 1e3,
           pct(g.lat, nl, 0.99) * 1e3, nl ? g.lat[nl - 1] * 1e3 : 0.0, over_50ms, g.waited_for_conn, g.reopened);
    /* The generator's own CPU: it shares the machine with the server. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf(" cpu_us=%.0f", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    /* A request that waited for a connection has that wait in its latency; these tell the
     * server's share of the tail from the generator's queue. */
    if (g.ontime)
        printf(" ontime=%ld ontime_p99_ms=%.2f ontime_send_lag_p99_ms=%.2f", g.nontime, pct(g.ontime, g.nontime, 0.99) * 1e3,
               pct(g.ontime_lag, g.nontime, 0.99) * 1e3);
    for (int i = 0; i < ps.npids; i++)
        printf(" pss%d_max_kb=%ld pss%d_avg_kb=%.0f pss%d_first_kb=%ld", i, ps.max_kb[i], i,
               ps.samples ? ps.sum_kb[i] / (double)ps.samples : 0.0, i, ps.first_kb[i]);
    if (o->npss) printf(" pss_sum_max_kb=%ld pss_samples=%ld", ps.max_sum_kb, ps.samples);
    printf("\n");
    return g.ok == g.done && g.done > 0 ? 0 : 1;
}

/* ---- baselines ------------------------------------------------------------------------------ */

/* A scratch file DIR/leakd-bench-WHAT.PID of the disk baselines, created empty; the caller
 * unlinks it. */
static int scratch_file(const opts *o, const char *what, char *path, size_t cap) {
    snprintf(path, cap, "%s/leakd-bench-%s.%d", o->dir, what, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("%s: %s", path, strerror(errno));
    return fd;
}

/* Sectors written to block device `dev` (a file's st_dev), from /proc/diskstats; -1 when its
 * file system is not on a device listed there (tmpfs, overlay, btrfs). */
static long long device_sectors_written(dev_t dev) {
    FILE *f = fopen("/proc/diskstats", "r");
    if (!f) return -1;
    char line[512];
    long long sectors = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned maj, min;
        long long written;
        /* major minor name reads merged sectors ms writes merged sectors_written ... */
        if (sscanf(line, "%u %u %*s %*s %*s %*s %*s %*s %*s %lld", &maj, &min, &written) == 3 && maj == major(dev) &&
            min == minor(dev)) {
            sectors = written;
            break;
        }
    }
    fclose(f);
    return sectors;
}

/* The page cache's dirty data (kB) waiting for write-back, from /proc/meminfo; -1 unknown. */
static long dirty_kb(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Dirty: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* The probes' clock: sleep until `due` (now() time), and the due time after `due` once the
 * work that ended at `t` is done: every `every` s, a missed one skipped, not made up in a
 * burst. */
static void sleep_until(double due) {
    double d = due - now();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}
static double next_due(double due, double every, double t) {
    due += every;
    return due < t ? t + every - fmod(t - due, every) : due;
}

/* fsync --every-ms: what one fdatasync costs while something else uses the disk (run.sh runs
 * it beside the fixed-rate run). Like PostgreSQL's WAL, it overwrites blocks of a file written
 * and fsync'd beforehand, so each fdatasync flushes 4 KiB of data and no metadata. Due times
 * are fixed (t0 + i * T); one that is missed is skipped, not made up in a burst.
 * Beside each, what the whole device writes: a slow fdatasync that waited behind a burst of
 * write-back (the kernel writing out the page cache's dirty data at once) can then be told
 * from one of a disk that stalled on its own. */
#define PROBE_BLOCKS 256
static int run_fsync_probe(opts *o) {
    char path[4096];
    int fd = scratch_file(o, "fsync-probe", path, sizeof path);
    char block[4096];
    memset(block, 'p', sizeof block);
    for (int b = 0; b < PROBE_BLOCKS; b++)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) die("%s: %s", path, strerror(errno));
    if (fsync(fd) != 0) die("fsync %s: %s", path, strerror(errno));
    double secs = o->seconds > 0 ? o->seconds : 2, every = o->every_ms / 1e3;
    long cap = (long)(secs / every) + 2, n = 0, slow = 0;
    double *lat = malloc((size_t)cap * sizeof *lat);
    if (!lat) die("out of memory");
    struct stat st;
    if (fstat(fd, &st) != 0) die("%s: %s", path, strerror(errno));
    /* write-back: the busiest 100-ms (or longer, when a probe was slower) window of the device */
    double t0 = now(), due = t0, t, win_t = t0, burst = -1, burst_at = 0;
    long long win_s = device_sectors_written(st.st_dev);
    long dirty_max = dirty_kb();
    while ((t = now()) - t0 < secs && n < cap) {
        sleep_until(due);
        /* sampled before the timed flush, so that reading /proc is not in its latency */
        double ts = now();
        long long sa = win_s >= 0 ? device_sectors_written(st.st_dev) : -1;
        if (sa >= 0 && ts - win_t >= 0.1) {
            double mbps = (double)(sa - win_s) * 512 / 1e6 / (ts - win_t);
            if (mbps > burst) {
                burst = mbps;
                burst_at = win_t - t0;
            }
            long dk = dirty_kb();
            if (dk > dirty_max) dirty_max = dk;
            win_t = ts;
            win_s = sa;
        }
        double a = now();
        if (pwrite(fd, block, sizeof block, (off_t)(n % PROBE_BLOCKS) * (off_t)sizeof block) != (ssize_t)sizeof block ||
            fdatasync(fd) != 0)
            die("%s: %s", path, strerror(errno));
        double b = now();
        lat[n++] = b - a;
        if (b - a >= SLOW_S) {
            slow++;
            long long sb = sa >= 0 ? device_sectors_written(st.st_dev) : -1;
            if (sb >= 0)
                fprintf(stderr, "fsync_probe: at %.2f s: %.1f ms; meanwhile the device wrote %.0f MB, %.0f MB dirty\n",
                        a - t0, (b - a) * 1e3, (double)(sb - sa) * 512 / 1e6, (double)dirty_kb() / 1024);
            else fprintf(stderr, "fsync_probe: at %.2f s: %.1f ms\n", a - t0, (b - a) * 1e3);
        }
        due = next_due(due, every, b);
    }
    close(fd);
    unlink(path);
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    printf("mode=fsync_probe fsyncs=%ld seconds=%.3f every_ms=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f over_50ms=%ld "
           "device_write_max_mbps=%.0f device_write_max_at_s=%.1f dirty_max_mb=%.0f\n",
           n, t - t0, o->every_ms, pct(lat, n, 0.5) * 1e3, pct(lat, n, 0.99) * 1e3, n ? lat[n - 1] * 1e3 : 0.0, slow, burst,
           burst_at, dirty_max >= 0 ? (double)dirty_max / 1024 : -1.0);
    free(lat);
    return 0;
}

/* speed --every-ms: how fast the host runs a fixed piece of work (run.sh runs it beside the
 * closed loop and beside the fixed-rate run). The machine is a virtual one on a shared host: a
 * run at a rate set in a fast minute can fall behind in a slow one. The work is a chain of
 * integer operations in registers (no memory), timed in this thread's CPU time, so neither the
 * wait for a CPU while the server is busy nor time stolen by the hypervisor (run.sh measures
 * that apart) is in it: what is left is how many cycles a second the host gives this machine's
 * CPUs (their frequency, another machine on the same core's other hyperthread). One a tick
 * (~43 us, under 0.1 % of a CPU at 100 ms); a line a second on stderr with that second's
 * median, and one with the machine's busy and stolen CPU % in that second (/proc/stat, read in
 * this process: run.sh's shell loop that did it started five processes a second, ~3.6 % of the
 * machine under the fixed-rate run's load).
 *
 * Beside the loop, each tick, a chain of dependent loads through 8 MiB in a random order
 * (mem_once): the loop needs no memory, and PostgreSQL and leakd need a lot of it. On this
 * host the two drift apart: in session 38 the fixed-rate runs that fell into spells of a fully
 * busy machine had the chain 1.11-1.12 times as slow as beside their closed loops, against
 * 0.86-1.07 in those that did not, while the loop read 0.98-1.06 in all: another machine on the
 * host using its caches and memory, which the loop cannot see. It hints, it does not decide:
 * in session 39 four runs with the chain 1.09-1.10 times as slow met the p99 as well
 * (tests/bench/leakd/README.md). The chain is slower under this machine's own load too, so
 * compare runs at a like busy %, not one second with the next.
 *
 * And each tick, a system call (getppid, 50 of them, ns each in this thread's CPU time): on
 * this paravirtual guest a system call goes through the host. Beside pgbench -S holding the
 * machine 100 % busy for 10 minutes (capacity.sh), its 5-s means correlated -0.74 with
 * pgbench's transactions a second in one run and -0.19 in another; the memory chain's -0.51 to
 * -0.68 in three, the loop's -0.10 to -0.24 (session 41, tests/bench/leakd/README.md). None
 * follows the host closely: they hint at a slow second, and the CPU a report in run.sh's
 * table tells more. */
/* This thread's CPU time in ns: what each probe is timed in. */
static double thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define SPEED_ITERS 20000
static double speed_once(void) {
    volatile uint64_t sink;
    uint64_t x = 88172645463325252ull;
    double a = thread_cpu_ns();
    for (int i = 0; i < SPEED_ITERS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    double b = thread_cpu_ns();
    sink = x;
    (void)sink;
    return (b - a) / 1e3;
}

#define SYS_CALLS 50
static double sys_once(void) {
    double a = thread_cpu_ns();
    for (int i = 0; i < SYS_CALLS; i++) (void)syscall(SYS_getppid);
    return (thread_cpu_ns() - a) / SYS_CALLS;
}

/* The memory chain: MEM_BYTES in 64-byte lines, each holding the index of the next, in one
 * random cycle through all of them (so no prefetcher guesses the next), built once. */
#define MEM_BYTES (8u << 20)
#define MEM_LOADS 1000
#define MEM_STRIDE (64 / sizeof(size_t))
typedef struct {
    size_t *next; /* next[line * MEM_STRIDE]: the line after it */
    size_t at;
} mem_chain;

static void mem_chain_build(mem_chain *c) {
    size_t lines = MEM_BYTES / 64;
    size_t *order = malloc(lines * sizeof *order);
    c->next = aligned_alloc(64, MEM_BYTES);
    if (!order || !c->next) die("out of memory");
    for (size_t i = 0; i < lines; i++) order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = (size_t)(rnd() % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++) c->next[order[i] * MEM_STRIDE] = order[(i + 1) % lines] * MEM_STRIDE;
    c->at = 0;
    free(order);
}

/* ns a load over MEM_LOADS dependent loads of the chain, in this thread's CPU time. */
static double mem_once(mem_chain *c) {
    size_t at = c->at;
    double a = thread_cpu_ns();
    for (int i = 0; i < MEM_LOADS; i++) at = c->next[at];
    /* The chain's memory never escapes, so the compiler may move the loads past the clock
     * (they measured 1 ns): the barrier keeps them between its two reads. */
    __asm__ volatile("" : "+r"(at) : : "memory");
    double b = thread_cpu_ns();
    c->at = at; /* the next tick goes on from here */
    return (b - a) / MEM_LOADS;
}

/* The machine's CPU jiffies from /proc/stat: busy (user, nice, system, irq, softirq, steal),
 * all of them (idle and iowait too) and stolen; 0 when it cannot be read. */
typedef struct {
    unsigned long long busy, total, steal;
} cpu_ticks;
static int read_cpu_ticks(cpu_ticks *c) {
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(f);
    if (n != 8) return 0;
    c->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    c->total = c->busy + v[3] + v[4];
    c->steal = v[7];
    return 1;
}

/* "cpu_probe: SECOND BUSY% STOLEN%" of the whole machine over one second, on stderr. */
static void cpu_second(int second, const cpu_ticks *a, const cpu_ticks *b) {
    unsigned long long t = b->total - a->total;
    if (t == 0) return;
    fprintf(stderr, "cpu_probe: %d %.0f %.0f\n", second, 100.0 * (double)(b->busy - a->busy) / (double)t,
            100.0 * (double)(b->steal - a->steal) / (double)t);
}

/* "speed_probe: SECOND LOOP_US MEM_NS SYS_NS": the medians of one second's samples; none:
 * nothing. */
static void speed_second(int second, double *v, double *m, double *y, long n) {
    if (n == 0) return;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    qsort(m, (size_t)n, sizeof *m, cmp_double);
    qsort(y, (size_t)n, sizeof *y, cmp_double);
    fprintf(stderr, "speed_probe: %d %.1f %.0f %.0f\n", second, pct(v, n, 0.5), pct(m, n, 0.5), pct(y, n, 0.5));
}

static int run_speed_probe(opts *o) {
    double secs = o->seconds > 0 ? o->seconds : 2, every = (o->every_ms > 0 ? o->every_ms : 100) / 1e3;
    long cap = (long)(secs / every) + 2, n = 0, in_sec = 0;
    double *us = malloc((size_t)cap * sizeof *us), *sec = malloc((size_t)cap * sizeof *sec);
    double *ns = malloc((size_t)cap * sizeof *ns), *msec = malloc((size_t)cap * sizeof *msec);
    double *ys = malloc((size_t)cap * sizeof *ys), *ysec = malloc((size_t)cap * sizeof *ysec);
    if (!us || !sec || !ns || !msec || !ys || !ysec) die("out of memory");
    mem_chain chain;
    mem_chain_build(&chain);
    double t0 = now(), due = t0, t;
    int cur = 0;
    cpu_ticks ca, cb;
    int cpu_ok = read_cpu_ticks(&ca);
    while ((t = now()) - t0 < secs && n < cap) {
        sleep_until(due);
        int s = (int)(now() - t0);
        if (s != cur) {
            speed_second(cur, sec, msec, ysec, in_sec);
            if (cpu_ok && (cpu_ok = read_cpu_ticks(&cb))) {
                cpu_second(cur, &ca, &cb);
                ca = cb;
            }
            in_sec = 0;
        }
        cur = s;
        us[n] = sec[in_sec] = speed_once();
        ys[n] = ysec[in_sec] = sys_once();
        ns[n++] = msec[in_sec++] = mem_once(&chain);
        due = next_due(due, every, now());
    }
    speed_second(cur, sec, msec, ysec, in_sec);
    if (cpu_ok && read_cpu_ticks(&cb)) cpu_second(cur, &ca, &cb);
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    qsort(ns, (size_t)n, sizeof *ns, cmp_double);
    qsort(ys, (size_t)n, sizeof *ys, cmp_double);
    printf("mode=speed_probe samples=%ld seconds=%.3f every_ms=%.1f p10_us=%.1f p50_us=%.1f p90_us=%.1f max_us=%.1f "
           "mem_p10_ns=%.0f mem_p50_ns=%.0f mem_p90_ns=%.0f sys_p10_ns=%.0f sys_p50_ns=%.0f sys_p90_ns=%.0f\n",
           n, t - t0, every * 1e3, pct(us, n, 0.1), pct(us, n, 0.5), pct(us, n, 0.9), n ? us[n - 1] : 0.0, pct(ns, n, 0.1),
           pct(ns, n, 0.5), pct(ns, n, 0.9), pct(ys, n, 0.1), pct(ys, n, 0.5), pct(ys, n, 0.9));
    free(us);
    free(ys);
    free(ysec);
    free(sec);
    free(ns);
    free(msec);
    free(chain.next);
    return 0;
}

static int run_fsync(opts *o) {
    char path[4096];
    int fd = scratch_file(o, "fsync", path, sizeof path);
    char block[4096];
    memset(block, 'f', sizeof block);
    double secs = o->seconds > 0 ? o->seconds : 2, t0 = now(), t;
    long n = 0;
    while ((t = now()) - t0 < secs && n < 10000000) {
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block || fsync(fd) != 0) die("%s: %s", path, strerror(errno));
        n++;
    }
    close(fd);
    unlink(path);
    printf("mode=fsync fsyncs=%ld seconds=%.3f rate=%.1f\n", n, t - t0, (double)n / (t - t0));
    return 0;
}

/* seqwrite's 1 MiB chunks per writeback range through the page cache: what leakd does when
 * direct I/O is refused or off (server/blob_file.c). */
#define WRITEBACK_CHUNKS 1

/* One writer of run_seqwrite: files first, first + step, ... below files. */
typedef struct {
    const opts *o;
    long first, step, files, mb;
    const char *buf;
    size_t chunk;
    int direct; /* out: the file system took O_DIRECT */
} seq_writer;

static void seq_path(char *path, size_t cap, const opts *o, long f) {
    snprintf(path, cap, "%s/leakd-bench-seq.%d.%ld", o->dir, (int)getpid(), f);
}

static void *seq_write_files(void *arg) {
    seq_writer *sw = arg;
    char path[4096];
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, sw->chunk) != 0) die("out of memory");
    memcpy(buf, sw->buf, sw->chunk);
    uint64_t *w = (uint64_t *)buf;
    for (long f = sw->first; f < sw->files; f += sw->step) {
        seq_path(path, sizeof path, sw->o, f);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) die("%s: %s", path, strerror(errno));
        /* as leakd: O_DIRECT set on the open file, the page cache where it is refused */
        sw->direct = sw->o->direct && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) == 0;
        for (long i = 0; i < sw->mb; i++) {
            w[0] = (uint64_t)(f * sw->mb + i); /* no two chunks alike */
            if (write(fd, buf, sw->chunk) != (ssize_t)sw->chunk) die("%s: %s", path, strerror(errno));
            if (!sw->direct && (i + 1) % WRITEBACK_CHUNKS == 0)
                (void)sync_file_range(fd, (off_t)(i + 1 - WRITEBACK_CHUNKS) * (off_t)sw->chunk,
                                      WRITEBACK_CHUNKS * (off_t)sw->chunk, SYNC_FILE_RANGE_WRITE);
        }
        if (fsync(fd) != 0) die("fsync %s: %s", path, strerror(errno));
        close(fd);
    }
    free(buf);
    return NULL;
}

/* N files of M MB (--count, --mb) by C writers at once (--conns), each file written in 1 MiB
 * chunks and fsync'd before its writer starts the next; all kept until the end, as uploads
 * stay on disk. Through the page cache with writeback started every 1 MiB, or (--direct) with
 * O_DIRECT: the two ways leakd stores an upload. */
static int run_seqwrite(opts *o) {
    long files = o->count > 0 ? o->count : 1;
    long mb = o->mb > 0 ? o->mb : 256;
    int nw = o->conns > 0 ? o->conns : 1;
    if (nw > files) nw = (int)files;
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    seq_writer *sw = calloc((size_t)nw, sizeof *sw);
    pthread_t *th = calloc((size_t)nw, sizeof *th);
    if (!buf || !sw || !th) die("out of memory");
    uint64_t *w = (uint64_t *)buf;
    for (size_t i = 0; i < chunk / 8; i++) w[i] = rnd();
    double t0 = now();
    for (int i = 0; i < nw; i++) {
        sw[i] = (seq_writer){o, i, nw, files, mb, buf, chunk, 0};
        if (pthread_create(&th[i], NULL, seq_write_files, &sw[i]) != 0) die("pthread_create failed");
    }
    for (int i = 0; i < nw; i++) pthread_join(th[i], NULL);
    double t = now() - t0;
    char path[4096];
    for (long f = 0; f < files; f++) {
        seq_path(path, sizeof path, o, f);
        unlink(path);
    }
    int direct = sw[0].direct;
    free(th);
    free(sw);
    free(buf);
    double mbps = (double)(mb * files) * (double)chunk / t / 1e6;
    printf("mode=seqwrite mb=%ld files=%ld writers=%d direct=%d seconds=%.3f mbps=%.1f\n", mb, files, nw, direct, t,
           mbps);
    return 0;
}

/* ---- main ----------------------------------------------------------------------------------- */

static const char usage[] =
    "usage: leakd_load traces|heap|healthz --server HOST:PORT [--key K --app A] [--conns C]\n"
    "                  (--count N | --seconds S) [--rate R] [--sigs N] [--size BYTES] [--mb M]\n"
    "                  [--warmup-sigs] [--pss-pid PID]... [--timeline SECONDS]\n"
    "       leakd_load fsync DIR [--every-ms T] [--seconds S]\n"
    "       leakd_load speed [--every-ms T] [--seconds S]\n"
    "       leakd_load seqwrite DIR [--mb M] [--count N] [--conns C] [--direct]\n"
    "       leakd_load pss PID...\n";

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    opts o = {.mode = argv[1], .conns = -1, .sigs = 1000, .size = 10240, .mb = 0};
    if (strcmp(o.mode, "pss") == 0) {
        long sum = 0;
        printf("mode=pss");
        for (int i = 2; i < argc; i++) {
            long kb = pss_tree_kb((pid_t)atoi(argv[i]));
            printf(" pss%d_kb=%ld", i - 2, kb);
            sum += kb;
        }
        printf(" pss_sum_kb=%ld\n", sum);
        return 0;
    }
    int a = 2;
    if (strcmp(o.mode, "fsync") == 0 || strcmp(o.mode, "seqwrite") == 0) {
        if (argc < 3) die("%s needs a directory", o.mode);
        o.dir = argv[a++];
    }
    for (; a < argc; a++) {
        const char *f = argv[a];
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
#define ARG(name) (strcmp(f, name) == 0 && (v || (die("%s needs a value", name), 0)) && ++a)
        if (ARG("--server")) o.server = v;
        else if (ARG("--key")) o.key = v;
        else if (ARG("--app")) o.app = v;
        else if (ARG("--conns")) o.conns = atoi(v);
        else if (ARG("--count")) o.count = atol(v);
        else if (ARG("--seconds")) o.seconds = atof(v);
        else if (ARG("--rate")) o.rate = atof(v);
        else if (ARG("--sigs")) o.sigs = atoi(v);
        else if (ARG("--size")) o.size = atol(v);
        else if (ARG("--mb")) o.mb = atol(v);
        else if (ARG("--timeline")) o.timeline = atof(v);
        else if (ARG("--every-ms")) o.every_ms = atof(v);
        else if (ARG("--pss-pid")) {
            if (o.npss == MAX_PSS_PIDS) die("at most %d --pss-pid", MAX_PSS_PIDS);
            o.pss_pids[o.npss++] = (pid_t)atoi(v);
        } else if (strcmp(f, "--warmup-sigs") == 0) o.warmup_sigs = 1;
        else if (strcmp(f, "--direct") == 0) o.direct = 1;
        else die("unknown argument %s\n%s", f, usage);
#undef ARG
    }
    if (o.seconds > 600) die("--seconds is at most 600");
    if (o.timeline < 0 || (o.timeline > 0 && o.timeline < 0.01)) die("--timeline must be at least 0.01 (seconds)");
    if (o.count > 10000000) die("--count is at most 10000000");
    if (strcmp(o.mode, "seqwrite") == 0 &&
        (o.mb < 0 || o.mb > 65536 || o.count < 0 || o.count > 1000 || /* conns -1: not given */
         (o.conns != -1 && (o.conns < 1 || o.conns > 64))))
        die("seqwrite: --mb is at most 65536, --count at most 1000 and --conns 1..64");
    if (o.every_ms != 0 && ((strcmp(o.mode, "fsync") != 0 && strcmp(o.mode, "speed") != 0) ||
                            !(o.every_ms >= 1 && o.every_ms <= 10000)))
        die("--every-ms is for fsync and speed, 1..10000");
    if (strcmp(o.mode, "speed") == 0) return run_speed_probe(&o);
    if (strcmp(o.mode, "fsync") == 0) return o.every_ms > 0 ? run_fsync_probe(&o) : run_fsync(&o);
    if (strcmp(o.mode, "seqwrite") == 0) return run_seqwrite(&o);
    if (strcmp(o.mode, "traces") == 0 || strcmp(o.mode, "heap") == 0 || strcmp(o.mode, "healthz") == 0) {
        if (!o.server) die("--server is required");
        if (strcmp(o.mode, "heap") == 0 && o.mb == 0) o.mb = 50;
        if (o.conns == -1) o.conns = 16;
        return run_load(&o);
    }
    die("unknown mode %s\n%s", o.mode, usage);
    return 2;
}
