/*  =========================================================================
    test_nodeseen - nodes' last-seen times saved apart from their records
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../broker/nodeseen.h"

static void
s_hello (registry_t *registry, const char *id, int64_t now_ms,
         int64_t wall_ms)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup (id);
    hello->hostname = strdup ("box");
    hello->version = strdup ("1.0");
    hello->concurrency = 1;
    assert_non_null (registry_hello (registry, &hello, "rr", 2, now_ms,
                                     wall_ms));
}

//  Saved oldest first, at most the limit at a time; only nodes heard from
//  since their last save, and up to the time given; a fresh registry of
//  the same nodes gets the saved times where they are later.
static void
test_nodeseen_saves_a_bounded_number_oldest_first (void **state)
{
    char dir [64];
    strcpy (dir, "/tmp/grid-nodeseen-XXXXXX");
    assert_non_null (mkdtemp (dir));
    char err [256];
    store_t *store = store_open (dir, 1 << 20, 64 << 20, err, sizeof err);
    assert_non_null (store);
    store_txn_t *txn = store_begin (store, true);
    registry_t *registry = registry_new ();
    const char *ids [] = {"n-1", "n-2", "n-3", "n-4", "n-5"};
    for (int index = 0; index < 5; index++)
        s_hello (registry, ids [index], 1000 + index, 50000);
    //  Their hellos were their records' last save
    while (registry_unsaved_first (registry))
        registry_seen_saved (registry_unsaved_first (registry));
    assert_false (nodeseen_due (registry, INT64_MAX));
    for (int index = 4; index >= 0; index--)
        registry_touch (registry_lookup (registry, ids [index]),
                        2000 + (4 - index), 60000 + index);
    //  n-5 was heard from first, at 2000
    assert_false (nodeseen_due (registry, 1999));
    assert_true (nodeseen_due (registry, 2000));
    assert_int_equal (nodeseen_save (txn, registry, 2001, 10), 2);
    assert_int_equal (nodeseen_save (txn, registry, 9999, 2), 2);
    //  Heard from again: queued again, behind n-1
    registry_touch (registry_lookup (registry, "n-5"), 3000, 70000);
    assert_int_equal (nodeseen_save (txn, registry, 9999, 10), 2);
    assert_false (nodeseen_due (registry, INT64_MAX));
    assert_int_equal (nodeseen_save (txn, registry, INT64_MAX, 10), 0);
    assert_int_equal (store_commit (&txn), 0);

    registry_t *restored = registry_new ();
    for (int index = 0; index < 5; index++)
        s_hello (restored, ids [index], 1000, 60001);
    s_hello (restored, "n-6", 1000, 60001);
    txn = store_begin (store, false);
    //  n-1 (60000) and n-2 (60001) are older than their records
    assert_int_equal (nodeseen_restore (txn, restored), 3);
    store_abort (&txn);
    assert_int_equal (registry_lookup (restored, "n-1")->last_seen_wall_ms,
                      60001);
    assert_int_equal (registry_lookup (restored, "n-3")->last_seen_wall_ms,
                      60002);
    assert_int_equal (registry_lookup (restored, "n-4")->last_seen_wall_ms,
                      60003);
    assert_int_equal (registry_lookup (restored, "n-5")->last_seen_wall_ms,
                      70000);
    assert_int_equal (registry_lookup (restored, "n-6")->last_seen_wall_ms,
                      60001);
    registry_destroy (&restored);
    registry_destroy (&registry);
    store_destroy (&store);
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    assert_int_equal (system (command), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_nodeseen_saves_a_bounded_number_oldest_first),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
