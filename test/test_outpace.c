/*  =========================================================================
    test_outpace - the pace of the acks of live output pieces
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../broker/outpace.h"

//  The ack of piece OFFSET of web-01's j-1, held at HELD_MS.
static outpace_ack_t
s_ack (uint64_t offset, int64_t held_ms)
{
    outpace_ack_t ack = {
        .step = 2, .attempt = 1, .stderr_ = offset % 2 == 1,
        .offset = offset, .held_ms = held_ms
    };
    snprintf (ack.node, sizeof ack.node, "web-01");
    snprintf (ack.job, sizeof ack.job, "j-1");
    return ack;
}

//  At 100 a second the budget holds ten: ten acks go at once, the next
//  is held; it goes when the budget refilled one (10 ms later), not
//  before, whole and as it was held.
static void
test_outpace_budget (void **unused)
{
    outpace_t *pace = outpace_new ();
    assert_non_null (pace);
    for (int index = 0; index < 10; index++)
        assert_true (outpace_take (pace, 100, 1000));
    assert_false (outpace_take (pace, 100, 1000));
    outpace_ack_t held = s_ack (7, 1000);
    assert_true (outpace_hold (pace, &held));
    assert_int_equal (outpace_held (pace), 1);
    outpace_commit (pace);
    outpace_ack_t ack;
    assert_false (outpace_next (pace, 100, 1005, &ack));
    int64_t due_ms = outpace_due_ms (pace, 100, 1005);
    assert_true (due_ms > 1005 && due_ms <= 1011);
    assert_true (outpace_next (pace, 100, 1010, &ack));
    assert_string_equal (ack.node, "web-01");
    assert_string_equal (ack.job, "j-1");
    assert_int_equal (ack.step, 2);
    assert_int_equal (ack.attempt, 1);
    assert_true (ack.stderr_);
    assert_int_equal (ack.offset, 7);
    assert_int_equal (outpace_held (pace), 0);
    assert_true (outpace_due_ms (pace, 100, 1010) == INT64_MAX);
    outpace_destroy (&pace);
    assert_null (pace);
    outpace_destroy (&pace);
}

//  Held acks go first, oldest first: a new piece's ack waits behind them
//  even when the budget has room.
static void
test_outpace_fifo (void **unused)
{
    outpace_t *pace = outpace_new ();
    for (int index = 0; index < 3; index++) {
        outpace_ack_t held = s_ack ((uint64_t) index * 10, 0);
        assert_true (outpace_hold (pace, &held));
    }
    outpace_commit (pace);
    assert_false (outpace_take (pace, 1000, 5000));
    outpace_ack_t ack;
    for (int index = 0; index < 3; index++) {
        assert_true (outpace_next (pace, 1000, 5000, &ack));
        assert_int_equal (ack.offset, index * 10);
    }
    assert_false (outpace_next (pace, 1000, 5000, &ack));
    assert_true (outpace_take (pace, 1000, 5000));
    outpace_destroy (&pace);
}

//  An ack waits OUTPACE_MAX_WAIT_MS at most, whatever the budget (within
//  an agent's re-send interval: the piece is not sent twice).
static void
test_outpace_max_wait (void **unused)
{
    outpace_t *pace = outpace_new ();
    assert_true (outpace_take (pace, 1, 0));
    assert_false (outpace_take (pace, 1, 0));
    outpace_ack_t held = s_ack (0, 0);
    assert_true (outpace_hold (pace, &held));
    held = s_ack (1, 0);
    assert_true (outpace_hold (pace, &held));
    outpace_commit (pace);
    outpace_ack_t ack;
    assert_false (outpace_next (pace, 1, 500, &ack));
    //  One a second: the first goes at 1 s
    assert_true (outpace_next (pace, 1, 1000, &ack));
    assert_int_equal (ack.offset, 0);
    assert_false (outpace_next (pace, 1, 1500, &ack));
    assert_int_equal (outpace_due_ms (pace, 1, 1500), 2000);
    assert_true (outpace_next (pace, 1, OUTPACE_MAX_WAIT_MS, &ack));
    assert_int_equal (ack.offset, 1);
    outpace_destroy (&pace);
}

//  A pass that was not stored drops the acks it held, and only those;
//  one that committed keeps them.
static void
test_outpace_abort (void **unused)
{
    outpace_t *pace = outpace_new ();
    outpace_ack_t held = s_ack (0, 0);
    assert_true (outpace_hold (pace, &held));
    outpace_commit (pace);
    held = s_ack (10, 0);
    assert_true (outpace_hold (pace, &held));
    held = s_ack (20, 0);
    assert_true (outpace_hold (pace, &held));
    assert_int_equal (outpace_held (pace), 3);
    outpace_abort (pace);
    assert_int_equal (outpace_held (pace), 1);
    outpace_ack_t ack;
    assert_true (outpace_next (pace, 0, 0, &ack));
    assert_int_equal (ack.offset, 0);
    assert_false (outpace_next (pace, 0, 0, &ack));
    //  One held and given back within the same pass, then the pass fails:
    //  nothing is left to drop
    held = s_ack (30, 0);
    assert_true (outpace_hold (pace, &held));
    assert_true (outpace_next (pace, 0, 0, &ack));
    outpace_abort (pace);
    assert_int_equal (outpace_held (pace), 0);
    outpace_destroy (&pace);
}

//  Rate 0: no limit, every ack at once. Past OUTPACE_MAX_HELD the pacer
//  refuses to hold more (the caller acks at once); the ring keeps its
//  order across growth and wrapping.
static void
test_outpace_limits (void **unused)
{
    outpace_t *pace = outpace_new ();
    for (int index = 0; index < 100000; index++)
        assert_true (outpace_take (pace, 0, 0));
    assert_true (outpace_take (pace, 1, 0));
    size_t held = 0;
    for (uint64_t offset = 0; offset < OUTPACE_MAX_HELD + 710; offset++) {
        outpace_ack_t ack = s_ack (offset, 0);
        if (outpace_hold (pace, &ack))
            held++;
        //  Wrap the ring early on: give back a few
        if (offset == 1500) {
            outpace_ack_t out;
            for (int index = 0; index < 700; index++) {
                assert_true (outpace_next (pace, 0, 0, &out));
                assert_int_equal (out.offset, (uint64_t) index);
            }
            held -= 700;
        }
    }
    assert_int_equal (held, OUTPACE_MAX_HELD);
    assert_int_equal (outpace_held (pace), OUTPACE_MAX_HELD);
    outpace_commit (pace);
    outpace_ack_t out;
    uint64_t expect = 700;
    while (outpace_next (pace, 0, 0, &out))
        assert_int_equal (out.offset, expect++);
    assert_int_equal (expect - 700, OUTPACE_MAX_HELD);
    outpace_destroy (&pace);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_outpace_budget),
        cmocka_unit_test (test_outpace_fifo),
        cmocka_unit_test (test_outpace_max_wait),
        cmocka_unit_test (test_outpace_abort),
        cmocka_unit_test (test_outpace_limits),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
