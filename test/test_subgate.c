/*  =========================================================================
    test_subgate - commands to a node wait for its subscription: held
    while no granted subscription covers the topic, released in order
    once one does (the topic or a prefix of it), or once they waited
    long enough; a subscription ended holds again; a demoted active
    drops what waits; broadcasts of other topics are not held
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../broker/subgate.h"

//  What the gate handed over, as "topic:body" lines.
static char s_sent [4096];

static void
s_send (void *arg, const void *topic, size_t topic_size, const void *body,
        size_t body_size)
{
    (void) arg;
    size_t used = strlen (s_sent);
    snprintf (s_sent + used, sizeof s_sent - used, "%.*s:%.*s;",
              (int) topic_size, (const char *) topic, (int) body_size,
              (const char *) body);
}

static void
s_offer (subgate_t *gate, const char *topic, const char *body, int64_t now,
         bool *held)
{
    *held = subgate_must_wait (gate, topic, strlen (topic));
    if (*held)
        subgate_hold (gate, topic, strlen (topic), body, strlen (body), now);
    else
        s_send (NULL, topic, strlen (topic), body, strlen (body));
}

static void
test_held_until_subscribed (void **state)
{
    (void) state;
    s_sent [0] = 0;
    subgate_t *gate = subgate_new (1000);
    bool held;
    s_offer (gate, "node/a/", "one", 0, &held);
    assert_true (held);
    s_offer (gate, "node/a/", "two", 10, &held);
    assert_true (held);
    //  Nothing goes before the subscription or the time
    assert_int_equal (subgate_release (gate, 500, s_send, NULL), 0);
    assert_string_equal (s_sent, "");
    //  Another node's subscription does not release it
    subgate_subscribed (gate, "node/b/", 7, true);
    assert_int_equal (subgate_release (gate, 600, s_send, NULL), 0);
    subgate_subscribed (gate, "node/a/", 7, true);
    assert_int_equal (subgate_release (gate, 600, s_send, NULL), 2);
    assert_string_equal (s_sent, "node/a/:one;node/a/:two;");
    assert_int_equal (subgate_held (gate), 0);
    //  Subscribed: no wait
    s_offer (gate, "node/a/", "three", 700, &held);
    assert_false (held);
    //  Its subscriber gone: waits again
    subgate_subscribed (gate, "node/a/", 7, false);
    s_offer (gate, "node/a/", "four", 800, &held);
    assert_true (held);
    subgate_destroy (&gate);
    assert_null (gate);
}

static void
test_released_after_hold (void **state)
{
    (void) state;
    s_sent [0] = 0;
    subgate_t *gate = subgate_new (1000);
    bool held;
    s_offer (gate, "node/a/", "one", 0, &held);
    s_offer (gate, "node/b/", "two", 500, &held);
    assert_int_equal (subgate_release (gate, 999, s_send, NULL), 0);
    assert_int_equal (subgate_release (gate, 1000, s_send, NULL), 1);
    assert_string_equal (s_sent, "node/a/:one;");
    assert_int_equal (subgate_release (gate, 1500, s_send, NULL), 1);
    assert_string_equal (s_sent, "node/a/:one;node/b/:two;");
    subgate_destroy (&gate);
}

static void
test_order_and_prefix (void **state)
{
    (void) state;
    s_sent [0] = 0;
    subgate_t *gate = subgate_new (1000);
    bool held;
    //  A subscription that counts twice ends only when both end
    subgate_subscribed (gate, "node/c/", 7, true);
    subgate_subscribed (gate, "node/c/", 7, true);
    subgate_subscribed (gate, "node/c/", 7, false);
    s_offer (gate, "node/c/", "c1", 0, &held);
    assert_false (held);
    //  An end without a start (a refused subscription) counts for
    //  nothing
    subgate_subscribed (gate, "node/d/", 7, false);
    s_offer (gate, "node/d/", "d1", 0, &held);
    assert_true (held);
    s_offer (gate, "node/e/", "e1", 0, &held);
    assert_true (held);
    //  A prefix covers every node under it (a relay's or a tool's)
    subgate_subscribed (gate, "node/", 5, true);
    assert_int_equal (subgate_release (gate, 1, s_send, NULL), 2);
    assert_string_equal (s_sent, "node/c/:c1;node/d/:d1;node/e/:e1;");
    subgate_subscribed (gate, "node/", 5, false);
    //  The empty subscription covers everything
    subgate_subscribed (gate, "", 0, true);
    s_offer (gate, "node/f/", "f1", 0, &held);
    assert_false (held);
    subgate_subscribed (gate, "", 0, false);
    //  A demoted active drops what waits
    s_offer (gate, "node/g/", "g1", 0, &held);
    assert_true (held);
    assert_int_equal (subgate_drop (gate), 1);
    assert_int_equal (subgate_release (gate, 5000, s_send, NULL), 0);
    //  A topic with a NUL or too long is never held (nor counted)
    assert_false (subgate_must_wait (gate, "node/h/\0x", 9));
    char longer [2000];
    memset (longer, 'n', sizeof longer);
    assert_false (subgate_must_wait (gate, longer, sizeof longer));
    subgate_subscribed (gate, longer, sizeof longer, true);
    subgate_destroy (&gate);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_held_until_subscribed),
        cmocka_unit_test (test_released_after_hold),
        cmocka_unit_test (test_order_and_prefix),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
