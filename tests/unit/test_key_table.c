/* test_key_table.c — records per API key (server/key_table.c) and the quotas kept in them
 * (server/quota.c): a new record is zeroed, a key keeps its record and its values through the
 * table's growth, keys that are not ids have none, and each key's quota counts on its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "key_table.h"
#include "quota.h"

typedef struct {
    uint64_t a;
    uint32_t b;
} rec;

static void test_new_record_is_zeroed_and_kept(void **state) {
    (void)state;
    ld_key_table *t = ld_key_table_new(sizeof(rec));
    assert_non_null(t);
    assert_null(ld_key_table_find(t, 7));
    rec *r = ld_key_table_get(t, 7);
    assert_non_null(r);
    assert_int_equal(r->a, 0);
    assert_int_equal(r->b, 0);
    r->a = 42;
    r->b = 9;
    assert_ptr_equal(ld_key_table_find(t, 7), r);
    rec *again = ld_key_table_get(t, 7);
    assert_ptr_equal(again, r);
    assert_int_equal(again->a, 42);
    assert_null(ld_key_table_find(t, 8));
    ld_key_table_free(t);
}

static void test_ids_that_are_not_keys_have_no_record(void **state) {
    (void)state;
    ld_key_table *t = ld_key_table_new(sizeof(rec));
    assert_non_null(t);
    assert_null(ld_key_table_get(t, 0));
    assert_null(ld_key_table_get(t, -1));
    assert_null(ld_key_table_get(t, INT64_MIN));
    assert_null(ld_key_table_find(t, 0));
    assert_non_null(ld_key_table_get(t, INT64_MAX));
    ld_key_table_free(t);
}

/* 100,000 keys through many doublings, ids close together and far apart, with a record of an
 * odd size: each keeps its own values, aligned, and keys never made have none. */
static void test_many_keys_keep_their_records_through_growth(void **state) {
    (void)state;
    enum { N = 100000 };
    ld_key_table *t = ld_key_table_new(12);
    assert_non_null(t);
    for (int64_t i = 1; i <= N; i++) {
        int64_t id = i % 2 ? i : i * 1000003;
        uint64_t *r = ld_key_table_get(t, id);
        assert_non_null(r);
        assert_int_equal((uintptr_t)r % 8, 0);
        assert_int_equal(r[0], 0);
        r[0] = (uint64_t)id * 3;
        ((uint32_t *)r)[2] = (uint32_t)i;
    }
    for (int64_t i = 1; i <= N; i++) {
        int64_t id = i % 2 ? i : i * 1000003;
        uint64_t *r = ld_key_table_find(t, id);
        assert_non_null(r);
        assert_int_equal(r[0], (uint64_t)id * 3);
        assert_int_equal(((uint32_t *)r)[2], (uint32_t)i);
    }
    for (int64_t i = 2; i <= 2000; i += 2) assert_null(ld_key_table_find(t, i));
    ld_key_table_free(t);
}

static void test_quota_counts_each_key_on_its_own(void **state) {
    (void)state;
    ld_quota *q = ld_quota_new(3, 0);
    assert_non_null(q);
    /* 2,000 keys: the table grows under the quota's lock */
    for (int64_t k = 1; k <= 2000; k++)
        for (int n = 0; n < 3; n++) assert_int_equal(ld_quota_take(q, k, 10), 0);
    for (int64_t k = 1; k <= 2000; k++) {
        int wait = ld_quota_take(q, k, 10);
        assert_in_range(wait, 1, 60);
    }
    /* a report given back may be taken again, once */
    ld_quota_give_back(q, 5, 10);
    assert_int_equal(ld_quota_take(q, 5, 10), 0);
    assert_in_range(ld_quota_take(q, 5, 10), 1, 60);
    assert_int_equal(ld_quota_take(q, 2001, 10), 0);
    /* giving back for a key that took nothing changes nothing */
    ld_quota_give_back(q, 9999, 10);
    ld_quota_free(q);
}

static void test_quota_counts_bytes_a_day(void **state) {
    (void)state;
    ld_quota *q = ld_quota_new(0, 150);
    assert_non_null(q);
    assert_int_equal(ld_quota_take(q, 1, 100), 0);
    int wait = ld_quota_take(q, 1, 60);
    assert_in_range(wait, 1, 86400);
    assert_int_equal(ld_quota_take(q, 2, 150), 0);
    /* 20 of the 100 were never sent: 80 + 60 fits */
    ld_quota_give_back_bytes(q, 1, 20);
    assert_int_equal(ld_quota_take(q, 1, 60), 0);
    assert_in_range(ld_quota_take(q, 1, 20), 1, 86400);
    ld_quota_free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_record_is_zeroed_and_kept),
        cmocka_unit_test(test_ids_that_are_not_keys_have_no_record),
        cmocka_unit_test(test_many_keys_keep_their_records_through_growth),
        cmocka_unit_test(test_quota_counts_each_key_on_its_own),
        cmocka_unit_test(test_quota_counts_bytes_a_day),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
