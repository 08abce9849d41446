/*  =========================================================================
    test_qstats - the sample ring behind queue.stats: percentiles by
    nearest rank over a time window, the newest samples kept when it wraps.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../broker/qstats.h"

static void
test_qstats_percentiles_over_a_window (void **state)
{
    qstats_t *ring = qstats_new ();
    int64_t p50 = -1, p99 = -1;
    assert_int_equal (qstats_percentiles (ring, 1000, 300000, &p50, &p99), 0);
    assert_int_equal (p50, 0);
    assert_int_equal (p99, 0);
    //  Old samples: 1000 ms each, taken at t = 0..99
    for (int64_t at = 0; at < 100; at++)
        qstats_add (ring, at, 1000);
    //  New samples: 1..100 ms at t = 400000..400099
    for (int64_t value = 1; value <= 100; value++)
        qstats_add (ring, 400000 + value, value);
    qstats_add (ring, 400200, -5);             //  counts as 0
    assert_int_equal (qstats_percentiles (ring, 400200, 300000, &p50, &p99),
                      101);
    assert_int_equal (p50, 50);
    assert_int_equal (p99, 99);
    //  The hour still holds the old ones
    assert_int_equal (qstats_percentiles (ring, 400200, 3600000, &p50, &p99),
                      201);
    assert_int_equal (p99, 1000);
    qstats_destroy (&ring);
    qstats_destroy (&ring);
    assert_null (ring);
}

static void
test_qstats_wraps_keeping_the_newest (void **state)
{
    qstats_t *ring = qstats_new ();
    for (int64_t index = 0; index < QSTATS_CAPACITY + 10; index++)
        qstats_add (ring, index, index < 10 ? 1000000 : 7);
    int64_t p50 = 0, p99 = 0;
    assert_int_equal (qstats_percentiles (ring, QSTATS_CAPACITY + 10,
                                          INT64_MAX / 2, &p50, &p99),
                      QSTATS_CAPACITY);
    assert_int_equal (p99, 7);
    qstats_destroy (&ring);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_qstats_percentiles_over_a_window),
        cmocka_unit_test (test_qstats_wraps_keeping_the_newest),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
