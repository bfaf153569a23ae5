/* test_peers.c — connections counted per client address (server/peers.c): the limit per
 * address, IPv6 counted by /64, IPv4-mapped IPv6 as IPv4, local sockets not limited, and a
 * table that stays right through long runs of connections coming and going (the deletions
 * shift entries back; a mistake there loses or duplicates an address). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "peers.h"

static struct sockaddr_storage v4(const char *text) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, text, &in->sin_addr), 1);
    return ss;
}

static struct sockaddr_storage v6(const char *text) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, text, &in6->sin6_addr), 1);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static ld_peers *new_peers(unsigned limit, unsigned max_open) {
    char err[200];
    ld_peers *p = ld_peers_new(limit, max_open, err, sizeof err);
    assert_non_null(p);
    return p;
}

static void test_the_limit_is_per_address(void **state) {
    (void)state;
    ld_peers *p = new_peers(2, 16);
    struct sockaddr_storage a = v4("192.0.2.7"), b = v4("192.0.2.8");
    assert_int_equal(ld_peers_enter(p, SA(a)), 1);
    assert_int_equal(ld_peers_enter(p, SA(a)), 1);
    assert_int_equal(ld_peers_enter(p, SA(a)), 0);
    assert_int_equal(ld_peers_count(p, SA(a)), 2); /* the refused one was not counted */
    assert_int_equal(ld_peers_enter(p, SA(b)), 1);
    assert_int_equal(ld_peers_count(p, SA(b)), 1);
    ld_peers_leave(p, SA(a));
    assert_int_equal(ld_peers_enter(p, SA(a)), 1);
    assert_int_equal(ld_peers_enter(p, SA(a)), 0);
    ld_peers_leave(p, SA(a));
    ld_peers_leave(p, SA(a));
    assert_int_equal(ld_peers_count(p, SA(a)), 0);
    ld_peers_leave(p, SA(a)); /* one too many: nothing goes below zero */
    assert_int_equal(ld_peers_count(p, SA(a)), 0);
    assert_int_equal(ld_peers_count(p, SA(b)), 1);
    ld_peers_free(p);
}

/* `a` and `b` count as one address, shown as `name`, with a limit of 2; `apart` is another. */
static void expect_one_address(struct sockaddr_storage a, struct sockaddr_storage b, struct sockaddr_storage apart,
                               const char *name) {
    ld_peers *p = new_peers(2, 16);
    assert_int_equal(ld_peers_enter(p, SA(a)), 1);
    assert_int_equal(ld_peers_enter(p, SA(b)), 1);
    assert_int_equal(ld_peers_enter(p, SA(b)), 0);
    assert_int_equal(ld_peers_enter(p, SA(a)), 0);
    assert_int_equal(ld_peers_enter(p, SA(apart)), 1);
    char shown[80];
    ld_peers_name(SA(a), shown, sizeof shown);
    assert_string_equal(shown, name);
    ld_peers_name(SA(b), shown, sizeof shown);
    assert_string_equal(shown, name);
    ld_peers_free(p);
}

static void test_ipv6_is_counted_by_its_64(void **state) {
    (void)state;
    expect_one_address(v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff:1:2:3"), v6("2001:db8:1:3::1"),
                       "2001:db8:1:2::/64");
}

static void test_ipv4_mapped_counts_as_ipv4(void **state) {
    (void)state;
    expect_one_address(v4("198.51.100.20"), v6("::ffff:198.51.100.20"), v6("::ffff:198.51.100.21"), "198.51.100.20");
}

static void test_local_sockets_and_no_table_are_not_limited(void **state) {
    (void)state;
    ld_peers *p = new_peers(1, 16);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    for (int i = 0; i < 5; i++) assert_int_equal(ld_peers_enter(p, (struct sockaddr *)&un), 1);
    assert_int_equal(ld_peers_count(p, (struct sockaddr *)&un), 0);
    struct sockaddr_storage a = v4("192.0.2.1");
    for (int i = 0; i < 5; i++) assert_int_equal(ld_peers_enter(NULL, SA(a)), 1);
    ld_peers_leave(NULL, SA(a));
    ld_peers_free(NULL);
    ld_peers_free(p);
}

/* Connections from 12 addresses come and go at random, never more than max_open at once, in
 * a table of 32 slots (many collisions, many shifts back): the table's count of every address
 * matches a plain array's after each step. */
static void test_counts_hold_through_churn(void **state) {
    (void)state;
    enum { ADDRS = 12, MAX_OPEN = 14, LIMIT = 3 };
    ld_peers *p = new_peers(LIMIT, MAX_OPEN);
    struct sockaddr_storage addr[ADDRS];
    unsigned model[ADDRS] = {0}, open = 0;
    for (int i = 0; i < ADDRS; i++) {
        char text[64];
        if (i % 3 == 0) snprintf(text, sizeof text, "2001:db8:%x::%x", i, i);
        else snprintf(text, sizeof text, "10.0.%d.%d", i, i * 7);
        addr[i] = i % 3 == 0 ? v6(text) : v4(text);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < 200000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % ADDRS);
        if ((x >> 32) % 2 && open < MAX_OPEN) {
            int ok = ld_peers_enter(p, SA(addr[i]));
            assert_int_equal(ok, model[i] < LIMIT);
            if (ok) model[i]++, open++;
        } else if (model[i]) {
            ld_peers_leave(p, SA(addr[i]));
            model[i]--, open--;
        }
        for (int k = 0; k < ADDRS; k++) assert_int_equal(ld_peers_count(p, SA(addr[k])), model[k]);
    }
    ld_peers_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_limit_is_per_address),
        cmocka_unit_test(test_ipv6_is_counted_by_its_64),
        cmocka_unit_test(test_ipv4_mapped_counts_as_ipv4),
        cmocka_unit_test(test_local_sockets_and_no_table_are_not_limited),
        cmocka_unit_test(test_counts_hold_through_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
