/* test_conn_watch.c — the end of connections that owe leakd a request (server/conn_watch.c),
 * on real loopback TCP connections: a kept-alive connection idle past the timeout is shut
 * down; one whose next request already waits unread in its socket is not (its request was
 * sent while the connection was open, and its event thread was only busy), but it then has
 * the timeout again for that request's headers; a request under way is never cut off. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn_watch.h"

/* Short, for the tests that only wait for an end; the one that checks a connection is still
 * open past the timeout uses a longer one, for slack on a busy machine (the sweep runs every
 * quarter of it). */
#define TIMEOUT_S 0.2
#define LONG_TIMEOUT_S 1.0

typedef struct {
    int client, server;
    ld_conn_watch *watch;
    ld_conn_mark *mark;
    atomic_ullong closed;
} pair;

static void nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

/* A connected loopback pair, its server side watched as leakd's accepting thread and
 * libmicrohttpd would have it. */
static void pair_open(pair *p, double timeout_s) {
    memset(p, 0, sizeof *p);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    p->client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(p->client, (struct sockaddr *)&a, sizeof a), 0);
    p->server = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(p->server >= 0);
    close(l);
    char err[200];
    p->watch = ld_conn_watch_start(timeout_s, &p->closed, NULL, err, sizeof err);
    assert_non_null(p->watch);
    assert_int_equal(ld_conn_watch_accepted(p->watch, p->server), 0);
    p->mark = ld_conn_watch_started(p->watch, p->server);
    assert_non_null(p->mark);
}

static void pair_close(pair *p) {
    ld_conn_watch_closed(p->watch, p->mark);
    ld_conn_watch_stop(p->watch);
    close(p->server);
    close(p->client);
}

/* 1 when the server side was shut down (the client reads its end), 0 when it is still open
 * after waiting up to wait_ms for it. */
static int shut_within(const pair *p, int wait_ms) {
    struct pollfd f = {.fd = p->client, .events = POLLIN | POLLRDHUP};
    int n = poll(&f, 1, wait_ms);
    assert_true(n >= 0);
    if (n == 0) return 0;
    char c;
    ssize_t r = recv(p->client, &c, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* What a client that has seen its connection end finds counted: the watch counts a connection
 * before it shuts it down (it once counted after its whole sweep, and a client on a busy machine
 * read /metrics in between). */
static unsigned long long counted(pair *p) { return atomic_load(&p->closed); }

/* One request answered: its headers in, then its answer done; it now owes the next one. */
static void answer_one(pair *p) {
    ld_conn_mark_busy(p->mark, 1);
    ld_conn_mark_busy(p->mark, 0);
}

static void test_an_idle_kept_alive_connection_is_shut_down(void **state) {
    (void)state;
    pair p;
    pair_open(&p, TIMEOUT_S);
    answer_one(&p);
    assert_int_equal(shut_within(&p, 3000), 1);
    assert_int_equal(counted(&p), 1);
    pair_close(&p);
}

static void test_a_next_request_waiting_unread_is_not_cut_off(void **state) {
    (void)state;
    pair p;
    pair_open(&p, LONG_TIMEOUT_S);
    answer_one(&p);
    /* The next request arrives at once; nobody reads it (its event thread is held up). */
    static const char next[] = "POST /v1/reports HTTP/1.1\r\nHost: x\r\n";
    assert_int_equal(send(p.client, next, sizeof next - 1, 0), (ssize_t)(sizeof next - 1));
    /* Past the timeout and the sweep after it (every 250 ms): still open. Without the check,
     * the watch shut it down 1-1.25 s after the answer, its request unread. With it, the sweep
     * that found the request gives it a timeout more: open until 2 s at least. */
    nap_ms(1500);
    assert_int_equal(atomic_load(&p.closed), 0);
    assert_int_equal(shut_within(&p, 0), 0);
    /* Its headers never complete: it is shut down a timeout after the sweep that saw them. */
    assert_int_equal(shut_within(&p, 5000), 1);
    assert_int_equal(counted(&p), 1);
    pair_close(&p);
}

static void test_a_request_under_way_is_not_timed_out(void **state) {
    (void)state;
    pair p;
    pair_open(&p, TIMEOUT_S);
    ld_conn_mark_busy(p.mark, 1);
    nap_ms(600);
    assert_int_equal(shut_within(&p, 0), 0);
    /* answered: from now on it is idle, and ends a timeout later */
    ld_conn_mark_busy(p.mark, 0);
    assert_int_equal(shut_within(&p, 3000), 1);
    pair_close(&p);
}

static void test_a_silent_new_connection_is_shut_down(void **state) {
    (void)state;
    pair p;
    pair_open(&p, TIMEOUT_S);
    assert_int_equal(shut_within(&p, 3000), 1);
    assert_int_equal(counted(&p), 1);
    pair_close(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_idle_kept_alive_connection_is_shut_down),
        cmocka_unit_test(test_a_next_request_waiting_unread_is_not_cut_off),
        cmocka_unit_test(test_a_request_under_way_is_not_timed_out),
        cmocka_unit_test(test_a_silent_new_connection_is_shut_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
