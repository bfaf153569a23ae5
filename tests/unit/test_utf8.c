/* test_utf8.c — the well-formed prefix of a byte string (server/utf8.c): whole characters of
 * every length pass, a character cut at the end is dropped, and what RFC 3629 forbids
 * (overlong forms, surrogates, past U+10FFFF, stray continuation bytes) stops the prefix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static size_t prefix(const char *s) { return ld_utf8_prefix(s, strlen(s)); }

static void test_whole_characters_pass(void **state) {
    (void)state;
    assert_int_equal(prefix(""), 0);
    assert_int_equal(prefix("plain ascii"), 11);
    assert_int_equal(prefix("\xc3\xa9t\xc3\xa9"), 5);                 /* été */
    assert_int_equal(prefix("\xe2\x82\xac"), 3);                      /* € */
    assert_int_equal(prefix("\xf0\x9f\x90\x9b"), 4);                  /* U+1F41B */
    assert_int_equal(prefix("\xf4\x8f\xbf\xbf"), 4);                  /* U+10FFFF */
    assert_int_equal(prefix("\xed\x9f\xbf"), 3);                      /* U+D7FF */
}

static void test_a_character_cut_at_the_end_is_dropped(void **state) {
    (void)state;
    const char *s = "ab\xf0\x9f\x90\x9b";
    for (size_t len = 3; len < 6; len++) assert_int_equal(ld_utf8_prefix(s, len), 2);
    assert_int_equal(ld_utf8_prefix(s, 6), 6);
    assert_int_equal(ld_utf8_prefix("x\xc3\xa9", 2), 1);
    /* 600 x é cut at an odd byte count, as a 404's message of 1,023 bytes was */
    char buf[1201];
    for (int i = 0; i < 600; i++) memcpy(buf + 2 * i, "\xc3\xa9", 2);
    buf[1200] = 0;
    assert_int_equal(ld_utf8_prefix(buf, 1023), 1022);
    assert_int_equal(ld_utf8_prefix(buf, 1022), 1022);
}

static void test_forbidden_forms_stop_the_prefix(void **state) {
    (void)state;
    assert_int_equal(prefix("ok\xc0\x80"), 2);         /* overlong NUL */
    assert_int_equal(prefix("ok\xc1\xbf"), 2);         /* overlong */
    assert_int_equal(prefix("ok\xe0\x9f\xbf"), 2);     /* overlong 3-byte */
    assert_int_equal(prefix("ok\xf0\x8f\xbf\xbf"), 2); /* overlong 4-byte */
    assert_int_equal(prefix("ok\xed\xa0\x80"), 2);     /* surrogate U+D800 */
    assert_int_equal(prefix("ok\xf4\x90\x80\x80"), 2); /* U+110000 */
    assert_int_equal(prefix("ok\xf5\x80\x80\x80"), 2);
    assert_int_equal(prefix("ok\x80"), 2);             /* a continuation byte alone */
    assert_int_equal(prefix("ok\xc3("), 2);            /* a lead byte without its continuation */
    assert_int_equal(prefix("ok\xe2\x82("), 2);
    assert_int_equal(prefix("ok\xff"), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_characters_pass),
        cmocka_unit_test(test_a_character_cut_at_the_end_is_dropped),
        cmocka_unit_test(test_forbidden_forms_stop_the_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
