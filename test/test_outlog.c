/*  =========================================================================
    test_outlog - the ring of output pieces the broker kept lately
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "../broker/outlog.h"

//  Pieces come back per job in the order they were noted, each once,
//  from any sequence number on; an empty log has none.
static void
test_outlog_per_job (void **unused)
{
    outlog_t *log = outlog_new (16);
    assert_non_null (log);
    assert_null (outlog_next (log, "j-a", 0));
    assert_int_equal (outlog_last (log), 0);
    assert_int_equal (outlog_add (log, "j-a", 0, "web-01", 1, false, 0, 7),
                      1);
    assert_int_equal (outlog_add (log, "j-b", 1, "web-02", 2, true, 0, 3),
                      2);
    assert_int_equal (outlog_add (log, "j-a", 0, "web-01", 1, false, 7, 7),
                      3);
    const outlog_entry_t *entry = outlog_next (log, "j-a", 0);
    assert_non_null (entry);
    assert_int_equal (entry->seq, 1);
    assert_int_equal (entry->offset, 0);
    assert_string_equal (entry->node, "web-01");
    entry = outlog_next (log, "j-a", entry->seq);
    assert_non_null (entry);
    assert_int_equal (entry->seq, 3);
    assert_int_equal (entry->offset, 7);
    assert_null (outlog_next (log, "j-a", 3));
    entry = outlog_next (log, "j-b", 0);
    assert_non_null (entry);
    assert_true (entry->stderr_);
    assert_int_equal (entry->attempt, 2);
    assert_int_equal (outlog_last (log), 3);
    assert_false (outlog_lost (log, 0));
    outlog_destroy (&log);
    assert_null (log);
    outlog_destroy (&log);
}

//  Past its capacity the oldest pieces go, and a reader from before them
//  is told so.
static void
test_outlog_wraps (void **unused)
{
    outlog_t *log = outlog_new (4);
    for (uint64_t index = 0; index < 10; index++)
        outlog_add (log, "j-a", 0, "web-01", 1, false, index * 10, 10);
    assert_int_equal (outlog_last (log), 10);
    const outlog_entry_t *entry = outlog_next (log, "j-a", 0);
    assert_non_null (entry);
    assert_int_equal (entry->seq, 7);
    assert_int_equal (entry->offset, 60);
    assert_true (outlog_lost (log, 0));
    assert_true (outlog_lost (log, 5));
    assert_false (outlog_lost (log, 6));
    assert_false (outlog_lost (log, 10));
    assert_null (outlog_next (log, "j-a", 10));
    outlog_destroy (&log);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_outlog_per_job),
        cmocka_unit_test (test_outlog_wraps),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
