/*  =========================================================================
    test_journal - a transaction's journal, applied to another store,
    makes it the same store; a journal that is not one changes nothing
    =========================================================================
*/

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/pw.h"
#include "../store/journal.h"
#include "../store/store.h"

typedef struct {
    char dir [2][64];
    store_t *store [2];
} s_pair_t;

static int
s_setup (void **state)
{
    s_pair_t *self = (s_pair_t *) calloc (1, sizeof *self);
    for (int which = 0; which < 2; which++) {
        snprintf (self->dir [which], sizeof self->dir [which],
                  "/tmp/grid-journal-XXXXXX");
        if (!mkdtemp (self->dir [which]))
            return -1;
        char err [256];
        self->store [which] = store_open (self->dir [which], 0, 0, err,
                                          sizeof err);
        if (!self->store [which])
            return -1;
    }
    *state = self;
    return 0;
}

static int
s_teardown (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    for (int which = 0; which < 2; which++) {
        store_destroy (&self->store [which]);
        char command [128];
        snprintf (command, sizeof command, "rm -rf '%s'", self->dir [which]);
        if (system (command) != 0)
            return -1;
    }
    free (self);
    return 0;
}

//  Asserts that both stores hold the same keys and values in DB.
static void
s_assert_same (s_pair_t *self, store_db_t db)
{
    store_txn_t *txn [2] = { store_begin (self->store [0], false),
                             store_begin (self->store [1], false) };
    store_cursor_t *cursor [2] = { store_cursor_new (txn [0], db),
                                   store_cursor_new (txn [1], db) };
    const void *k [2], *v [2];
    size_t k_len [2], v_len [2];
    int rc [2];
    for (int which = 0; which < 2; which++)
        rc [which] = store_cursor_seek (cursor [which], "", 0, &k [which],
                                        &k_len [which], &v [which],
                                        &v_len [which]);
    size_t count = 0;
    while (rc [0] == 0 || rc [1] == 0) {
        assert_int_equal (rc [0], rc [1]);
        assert_int_equal (k_len [0], k_len [1]);
        assert_memory_equal (k [0], k [1], k_len [0]);
        assert_int_equal (v_len [0], v_len [1]);
        if (v_len [0])
            assert_memory_equal (v [0], v [1], v_len [0]);
        count++;
        for (int which = 0; which < 2; which++)
            rc [which] = store_cursor_next (cursor [which], &k [which],
                                            &k_len [which], &v [which],
                                            &v_len [which]);
    }
    for (int which = 0; which < 2; which++) {
        store_cursor_destroy (&cursor [which]);
        store_abort (&txn [which]);
    }
}

//  Many passes of puts, overwrites, deletes (found and not) and prefix
//  deletes on the first store, each journaled and applied to the second:
//  they stay the same.
static void
test_journal_makes_the_same_store (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    pw_t *journal = pw_new ();
    const store_db_t dbs [] = { STORE_DB_JOBS, STORE_DB_RESULTS,
                                STORE_DB_EVENTS, STORE_DB_META };
    unsigned seed = 7;
    for (int pass = 0; pass < 40; pass++) {
        pw_reset (journal);
        store_txn_t *txn = store_begin (self->store [0], true);
        assert_non_null (txn);
        store_txn_journal (txn, journal);
        for (int change = 0; change < 50; change++) {
            seed = seed * 1103515245 + 12345;
            store_db_t db = dbs [(seed >> 8) % 4];
            char key [32];
            int key_len = snprintf (key, sizeof key, "k%02u-%u",
                                    (seed >> 12) % 20, (seed >> 16) % 7);
            unsigned what = (seed >> 20) % 10;
            if (what < 6) {
                char value [64];
                size_t value_len = (seed >> 3) % sizeof value;
                for (size_t at = 0; at < value_len; at++)
                    value [at] = (char) (seed >> (at % 24));
                assert_int_equal (store_put (txn, db, key, (size_t) key_len,
                                             value, value_len), 0);
            }
            else
            if (what < 9)
                store_del (txn, db, key, (size_t) key_len);
            else
                assert_true (store_del_prefix (txn, db, key, 3) >= 0);
        }
        assert_int_equal (store_commit (&txn), 0);
        txn = store_begin (self->store [1], true);
        char err [256];
        assert_true (store_apply (txn, pw_data (journal), pw_size (journal),
                                  err, sizeof err) >= 0);
        assert_int_equal (store_commit (&txn), 0);
    }
    for (size_t index = 0; index < 4; index++)
        s_assert_same (self, dbs [index]);
    pw_destroy (&journal);
}

//  Entries that are not a journal's are refused whole: nothing of the
//  journal is applied, and the sentence says which entry.
static void
test_journal_refuses_what_is_not_one (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    pw_t *good = pw_new ();
    pw_array (good, 4);
    pw_str (good, "p");
    pw_str (good, "jobs");
    pw_bin (good, "a", 1);
    pw_bin (good, "1", 1);
    pw_t *writers [7];
    for (int index = 0; index < 7; index++)
        writers [index] = pw_new ();
    //  An unknown database
    pw_array (writers [0], 4);
    pw_str (writers [0], "p");
    pw_str (writers [0], "jobz");
    pw_bin (writers [0], "a", 1);
    pw_bin (writers [0], "1", 1);
    //  An unknown op
    pw_array (writers [1], 3);
    pw_str (writers [1], "q");
    pw_str (writers [1], "jobs");
    pw_bin (writers [1], "a", 1);
    //  A key too long
    char long_key [STORE_MAX_KEY + 1];
    memset (long_key, 'k', sizeof long_key);
    pw_array (writers [2], 3);
    pw_str (writers [2], "d");
    pw_str (writers [2], "jobs");
    pw_bin (writers [2], long_key, sizeof long_key);
    //  A put without its value; a key that is text
    pw_array (writers [3], 3);
    pw_str (writers [3], "p");
    pw_str (writers [3], "jobs");
    pw_bin (writers [3], "a", 1);
    pw_array (writers [4], 3);
    pw_str (writers [4], "d");
    pw_str (writers [4], "jobs");
    pw_str (writers [4], "a");
    //  Not an array; an empty key
    pw_map (writers [5], 0);
    pw_array (writers [6], 3);
    pw_str (writers [6], "d");
    pw_str (writers [6], "jobs");
    pw_bin (writers [6], "", 0);
    for (int index = 0; index < 7; index++) {
        pw_t *journal = pw_new ();
        pw_raw (journal, pw_data (good), pw_size (good));
        pw_raw (journal, pw_data (writers [index]), pw_size (writers [index]));
        store_txn_t *txn = store_begin (self->store [1], true);
        char err [256] = "";
        assert_int_equal (store_apply (txn, pw_data (journal),
                                       pw_size (journal), err, sizeof err),
                          STORE_EINVAL);
        assert_non_null (strstr (err, "journal entry 1"));
        //  The good first entry was not applied either
        assert_int_equal (store_get (txn, STORE_DB_JOBS, "a", 1, NULL, NULL),
                          STORE_ENOTFOUND);
        store_abort (&txn);
        pw_destroy (&journal);
        pw_destroy (&writers [index]);
    }
    //  Bytes cut short, and bytes that are no msgpack
    store_txn_t *txn = store_begin (self->store [1], true);
    char err [256] = "";
    assert_int_equal (store_apply (txn, pw_data (good), pw_size (good) - 1,
                                   err, sizeof err), STORE_EINVAL);
    assert_non_null (strstr (err, "journal entry 0"));
    assert_int_equal (store_apply (txn, "\xc1\xc1", 2, err, sizeof err),
                      STORE_EINVAL);
    //  ... and the good one alone is taken; an empty journal changes nothing
    assert_int_equal (store_apply (txn, pw_data (good), pw_size (good), err,
                                   sizeof err), 1);
    assert_int_equal (store_apply (txn, NULL, 0, err, sizeof err), 0);
    assert_int_equal (store_commit (&txn), 0);
    pw_destroy (&good);
}

//  Only what landed is journaled: a delete that found nothing, a prefix
//  that matched nothing, and a read-only transaction write nothing.
static void
test_journal_holds_what_landed (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    pw_t *journal = pw_new ();
    store_txn_t *txn = store_begin (self->store [0], true);
    store_txn_journal (txn, journal);
    assert_int_equal (store_del (txn, STORE_DB_JOBS, "none", 4),
                      STORE_ENOTFOUND);
    assert_int_equal (store_del_prefix (txn, STORE_DB_JOBS, "no", 2), 0);
    assert_int_equal (pw_size (journal), 0);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "j1", 2, NULL, 0), 0);
    size_t after_put = pw_size (journal);
    assert_true (after_put > 0);
    store_txn_journal (txn, NULL);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "j2", 2, "x", 1), 0);
    assert_int_equal (pw_size (journal), after_put);
    assert_int_equal (store_commit (&txn), 0);
    txn = store_begin (self->store [1], true);
    char err [256];
    assert_int_equal (store_apply (txn, pw_data (journal), pw_size (journal),
                                   err, sizeof err), 1);
    const void *value = NULL;
    size_t len = 9;
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "j1", 2, &value, &len),
                      0);
    assert_int_equal (len, 0);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "j2", 2, NULL, NULL),
                      STORE_ENOTFOUND);
    assert_int_equal (store_commit (&txn), 0);
    pw_destroy (&journal);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_journal_makes_the_same_store,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_journal_refuses_what_is_not_one,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_journal_holds_what_landed,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
