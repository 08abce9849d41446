/*  =========================================================================
    test_pieces - when the agent's re-send round sends an output piece again

    A piece is due again once it has waited the interval since it last
    went; one it does not know is due at once (a restarted agent, a new
    session), so that nothing waits on the record for its delivery.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>

#include "../agent/pieces.h"
#include "../agent/spool.h"

static void
test_pieces_due_after_the_interval (void **state)
{
    (void) state;
    pieces_t *pieces = pieces_new (5000);
    assert_non_null (pieces);
    char key [SPOOL_KEY_MAX];
    spool_output_key ("j-1", 0, 1, "stdout", 4096, key, sizeof (key));
    //  Unknown: due at once
    assert_true (pieces_due (pieces, key, 1000));
    pieces_sent (pieces, key, 1000);
    assert_false (pieces_due (pieces, key, 1000));
    assert_false (pieces_due (pieces, key, 5999));
    assert_true (pieces_due (pieces, key, 6000));
    //  Sent again: the interval starts over
    pieces_sent (pieces, key, 6000);
    assert_false (pieces_due (pieces, key, 10999));
    assert_true (pieces_due (pieces, key, 11000));
    //  Acknowledged: forgotten
    pieces_acked (pieces, key);
    assert_int_equal (pieces_size (pieces), 0);
    pieces_acked (pieces, key);
    pieces_destroy (&pieces);
    assert_null (pieces);
    pieces_destroy (&pieces);
}

static void
test_pieces_reset_and_prune (void **state)
{
    (void) state;
    pieces_t *pieces = pieces_new (5000);
    assert_non_null (pieces);
    char key [SPOOL_KEY_MAX];
    for (int index = 0; index < 100; index++) {
        spool_output_key ("j-2", 0, 1, index % 2 ? "stderr" : "stdout",
                          (uint64_t) index * 65536, key, sizeof (key));
        pieces_sent (pieces, key, 1000 + index * 100);
    }
    assert_int_equal (pieces_size (pieces), 100);
    //  At 10,950 ms the first 50 (sent by 5,900) have waited 5 s
    pieces_prune (pieces, 10950);
    assert_int_equal (pieces_size (pieces), 50);
    spool_output_key ("j-2", 0, 1, "stdout", 0, key, sizeof (key));
    assert_true (pieces_due (pieces, key, 10950));
    spool_output_key ("j-2", 0, 1, "stdout", 50 * 65536, key, sizeof (key));
    assert_false (pieces_due (pieces, key, 10950));
    //  A new session: all are due
    pieces_reset (pieces);
    assert_int_equal (pieces_size (pieces), 0);
    assert_true (pieces_due (pieces, key, 10000));
    pieces_destroy (&pieces);
}

static void
test_pieces_keys_of_output (void **state)
{
    (void) state;
    char key [SPOOL_KEY_MAX];
    spool_output_key ("j-3", 2, 1, "stderr", 7, key, sizeof (key));
    assert_true (spool_key_is_output (key));
    spool_key ("j-3", 2, 1, key, sizeof (key));
    assert_false (spool_key_is_output (key));
    assert_false (spool_key_is_output (""));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_pieces_due_after_the_interval),
        cmocka_unit_test (test_pieces_reset_and_prune),
        cmocka_unit_test (test_pieces_keys_of_output),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
