/*  =========================================================================
    test_brokerkey - the broker key's rotation as a cluster's store holds
    it (broker/brokerkey.h brokerkey_record, brokerkey_adopt): a member
    that shares the active's pair takes up a running rotation, a retired
    one, or nothing; a row that is not grid's changes no file
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <unistd.h>

#include "../broker/brokerkey.h"
#include "../proto/keynext.h"
#include "../proto/keys.h"
#include "../store/store.h"

static char s_dir [256];

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "%s/grid-brokerkey-XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static void
s_public (const char *path, char *out)
{
    char why [256];
    assert_int_equal (keys_read_public (path, out, why, sizeof why), 0);
}

//  Copies the pair at FROM (public file) to the directory TO_DIR.
static void
s_copy_pair (const char *from, const char *to_dir)
{
    char command [2200];
    snprintf (command, sizeof command, "mkdir -p '%s' && cp -p '%s' "
              "'%s_secret' '%s/'", to_dir, from, from, to_dir);
    assert_int_equal (system (command), 0);
}

static void
s_put_row (store_t *store, const char *row)
{
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (store_put (txn, STORE_DB_META, "broker_key", 10, row,
                                 strlen (row)), 0);
    assert_int_equal (store_commit (&txn), 0);
}

static void
test_brokerkey_adopt (void **state)
{
    char err [1024], active_dir [400], standby_dir [400], late_dir [400];
    char active [500], standby [500], late [500], old [KEYS_TEXT_SIZE];
    snprintf (active_dir, sizeof active_dir, "%s/a", s_dir);
    snprintf (standby_dir, sizeof standby_dir, "%s/b", s_dir);
    snprintf (late_dir, sizeof late_dir, "%s/c", s_dir);
    assert_int_equal (keys_generate (active_dir, "broker", false, NULL, old,
                                     err, sizeof err), 0);
    snprintf (active, sizeof active, "%s/broker.key", active_dir);
    snprintf (standby, sizeof standby, "%s/broker.key", standby_dir);
    snprintf (late, sizeof late, "%s/broker.key", late_dir);
    s_copy_pair (active, standby_dir);
    s_copy_pair (active, late_dir);
    char data [400];
    snprintf (data, sizeof data, "%s/data", s_dir);
    store_t *store = store_open (data, 0, 0, err, sizeof err);
    assert_non_null (store);

    //  No rotation in the store: nothing to do
    assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err), 0);

    //  A rotation started on the active and recorded: the standby takes
    //  the same next pair and its deadline
    brokerkey_t *keys = brokerkey_new (active, err, sizeof err);
    assert_non_null (keys);
    int64_t now_ms = zclock_time ();
    assert_int_equal (brokerkey_start (keys, now_ms, now_ms + 60000, err,
                                       sizeof err), 0);
    char next [KEYS_TEXT_SIZE];
    snprintf (next, sizeof next, "%s", brokerkey_next (keys));
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (brokerkey_record (keys, txn, false), 0);
    assert_int_equal (store_commit (&txn), 0);
    assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err), 1);
    char text [KEYS_TEXT_SIZE], path [600];
    snprintf (path, sizeof path, "%s.next", standby);
    s_public (path, text);
    assert_string_equal (text, next);
    s_public (standby, text);
    assert_string_equal (text, old);
    assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err), 0);
    brokerkey_t *taken = brokerkey_new (standby, err, sizeof err);
    assert_non_null (taken);
    assert_string_equal (brokerkey_next (taken), next);
    assert_true (brokerkey_deadline_ms (taken) == now_ms + 60000);
    brokerkey_destroy (&taken);

    //  Retired on the active: the standby's pair becomes the new one, and
    //  so does that of a member that never saw the rotation run
    txn = store_begin (store, true);
    assert_int_equal (brokerkey_record (keys, txn, true), 0);
    assert_int_equal (store_commit (&txn), 0);
    brokerkey_set_recorded (keys, 7);
    assert_true (brokerkey_recorded (keys) == 7);
    zcert_t *cert = brokerkey_commit (keys, err, sizeof err);
    assert_non_null (cert);
    assert_true (brokerkey_recorded (keys) == 0);
    zcert_destroy (&cert);
    //  Nothing to record once the rotation is over
    txn = store_begin (store, true);
    assert_int_equal (brokerkey_record (keys, txn, true), -1);
    store_abort (&txn);
    assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err), 1);
    s_public (standby, text);
    assert_string_equal (text, next);
    assert_int_not_equal (access (path, F_OK), 0);
    assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err), 0);
    assert_int_equal (brokerkey_adopt (late, store, err, sizeof err), 1);
    s_public (late, text);
    assert_string_equal (text, next);
    zcert_t *pair = keys_load_pair (late, err, sizeof err);
    assert_non_null (pair);
    zcert_destroy (&pair);
    brokerkey_destroy (&keys);

    //  A row that is not grid's changes nothing
    const char *hostile [] = {
        "garbage", "1 running short short 1 2", "2 retired x y 1 2",
        "1 paused AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA "
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA 1 2",
        "1 retired ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ "
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA 1 2"};
    for (size_t index = 0; index < 5; index++) {
        s_put_row (store, hostile [index]);
        assert_int_equal (brokerkey_adopt (standby, store, err, sizeof err),
                          0);
        s_public (standby, text);
        assert_string_equal (text, next);
    }
    store_destroy (&store);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_brokerkey_adopt, s_setup,
                                         s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
