/*  =========================================================================
    test_repl - a broker cluster's replication between two stores: passes
    shipped (before their commit, as the broker does) and acknowledged, a
    standby that joins late catches up from a snapshot (copied apart while
    passes go on), the release point waits for the sync set, a silent
    standby leaves it, an older epoch is refused, a pass whose commit
    failed is forgotten only when no standby was sent it, a standby
    whose commits fail (its map full) leaves the sync set without
    stalling the active and catches up once it has room
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

#include "../broker/repl.h"
#include "../proto/log.h"
#include "../proto/pw.h"

typedef struct {
    char dir [2][64];
    store_t *store [2];
    repl_source_t *source;
    repl_sink_t *sink;
    char endpoint [96];
    uint64_t epoch;
    bool etcd_down;              //  The sync set is not recorded
    char pending [REPL_SYNC_NAMES];  //  The sync set asked last
} s_pair_t;

static int s_count;

static int
s_setup (void **state)
{
    s_pair_t *self = (s_pair_t *) calloc (1, sizeof *self);
    for (int which = 0; which < 2; which++) {
        snprintf (self->dir [which], sizeof self->dir [which],
                  "/tmp/grid-repl-XXXXXX");
        if (!mkdtemp (self->dir [which]))
            return -1;
        char err [256];
        self->store [which] = store_open (self->dir [which], 0, 0, err,
                                          sizeof err);
        if (!self->store [which])
            return -1;
    }
    snprintf (self->endpoint, sizeof self->endpoint,
              "inproc://test-repl-%d", s_count++);
    self->epoch = 7;
    *state = self;
    return 0;
}

static int
s_teardown (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    repl_sink_destroy (&self->sink);
    repl_source_destroy (&self->source);
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

static void
s_source (s_pair_t *self, int64_t sync_timeout_ms, bool strict)
{
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert_non_null (router);
    assert_int_equal (zsock_bind (router, "%s", self->endpoint), 0);
    char snapshot [128];
    snprintf (snapshot, sizeof snapshot, "%s/snapshot.mdb", self->dir [0]);
    repl_source_config_t config = { self->epoch, sync_timeout_ms, strict,
                                    snapshot };
    self->source = repl_source_new (&config, &router, self->store [0]);
    assert_non_null (self->source);
}

//  What the broker and the elector do: the sync set the source wants is
//  written to etcd (here at once, unless etcd is "down"), and the
//  source told so.
static void
s_record (s_pair_t *self)
{
    char names [REPL_SYNC_NAMES];
    uint64_t gen;
    if (repl_source_sync_wanted (self->source, names, sizeof names, &gen))
        snprintf (self->pending, sizeof self->pending, "%s", names);
    if (!self->etcd_down && gen)
        repl_source_sync_recorded (self->source, self->pending,
                                   zclock_mono ());
}

static void
s_sink (s_pair_t *self)
{
    self->sink = repl_sink_new ("b", self->dir [1], 0, 0, &self->store [1]);
    char err [256];
    assert_int_equal (repl_sink_follow (self->sink, self->endpoint, NULL,
                                        NULL, err, sizeof err), 0);
}

//  One written pass on the source's store: KEY -> VALUE in jobs, shipped
//  before its commit as the broker does; COMMITS false: the commit fails
//  (the transaction is aborted).
static uint64_t
s_pass_ending (s_pair_t *self, const char *key, const char *value,
               bool commits)
{
    pw_t *journal = pw_new ();
    store_txn_t *txn = store_begin (self->store [0], true);
    store_txn_journal (txn, journal);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, key, strlen (key), value,
                                 strlen (value)), 0);
    uint64_t seq = repl_source_next_seq (self->source);
    assert_int_equal (repl_store_mark (txn, self->epoch, seq), 0);
    repl_source_ship (self->source, seq, pw_data (journal), pw_size (journal),
                      zclock_mono ());
    if (commits)
        assert_int_equal (store_commit (&txn), 0);
    else
        store_abort (&txn);
    pw_destroy (&journal);
    return seq;
}

static uint64_t
s_pass (s_pair_t *self, const char *key, const char *value)
{
    return s_pass_ending (self, key, value, true);
}

//  Turns both sides until the source may release SEQ, or a second passed.
//  SINK_READS: the sink reads (a silent standby does not).
static bool
s_turn_until (s_pair_t *self, uint64_t seq, bool sink_reads, int ms)
{
    int64_t deadline = zclock_mono () + ms;
    while (zclock_mono () < deadline) {
        int64_t now = zclock_mono ();
        repl_source_read (self->source, now);
        repl_source_tick (self->source, now);
        s_record (self);
        if (self->sink && sink_reads) {
            repl_sink_read (self->sink, now);
            repl_sink_tick (self->sink, now);
        }
        if (repl_source_released (self->source) >= seq
            && (!self->sink || repl_source_sync_count (self->source) > 0
                || !sink_reads))
            return true;
        zclock_sleep (2);
    }
    return false;
}

static char *
s_read (store_t *store, const char *key)
{
    store_txn_t *txn = store_begin (store, false);
    const void *value;
    size_t size;
    char *text = NULL;
    if (store_get (txn, STORE_DB_JOBS, key, strlen (key), &value, &size) == 0)
        text = strndup ((const char *) value, size);
    store_abort (&txn);
    return text;
}

static void
s_assert_has (store_t *store, const char *key, const char *value)
{
    char *text = s_read (store, key);
    assert_non_null (text);
    assert_string_equal (text, value);
    free (text);
}

static void
test_repl_passes_and_sync (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    //  Nothing is released before the sync key was written
    uint64_t first = s_pass (self, "a", "1");
    assert_int_equal (repl_source_released (self->source), 0);
    assert_false (repl_source_sync_written (self->source));
    //  Alone (the key names no standby): released at once
    s_record (self);
    assert_true (repl_source_sync_written (self->source));
    assert_int_equal (repl_source_released (self->source), first);
    s_sink (self);
    //  The standby starts empty: a snapshot, then it is in sync
    assert_true (s_turn_until (self, first, true, 5000));
    assert_int_equal (repl_source_sync_count (self->source), 1);
    s_assert_has (self->store [1], "a", "1");
    //  A pass is released once the standby applied it
    uint64_t second = s_pass (self, "b", "2");
    assert_true (repl_source_released (self->source) < second);
    assert_true (s_turn_until (self, second, true, 5000));
    s_assert_has (self->store [1], "b", "2");
    uint64_t epoch, seq;
    repl_store_position (self->store [1], &epoch, &seq);
    assert_int_equal (epoch, self->epoch);
    assert_int_equal (seq, second);
    //  Many passes in a row
    uint64_t last = 0;
    for (int index = 0; index < 200; index++) {
        char key [16];
        snprintf (key, sizeof key, "k%03d", index);
        last = s_pass (self, key, key);
    }
    assert_true (s_turn_until (self, last, true, 5000));
    s_assert_has (self->store [1], "k199", "k199");
    assert_true (repl_sink_in_sync (self->sink)
                 || (s_turn_until (self, last, true, 1500),
                     repl_sink_in_sync (self->sink)));
}

static void
test_repl_late_standby_takes_a_snapshot (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    uint64_t last = 0;
    for (int index = 0; index < 50; index++) {
        char key [16];
        snprintf (key, sizeof key, "j%03d", index);
        last = s_pass (self, key, "x");
    }
    //  The standby's store has something of its own, of an older epoch:
    //  replaced whole
    store_txn_t *txn = store_begin (self->store [1], true);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "stale", 5, "y", 1), 0);
    assert_int_equal (repl_store_mark (txn, 3, 999), 0);
    assert_int_equal (store_commit (&txn), 0);
    s_sink (self);
    assert_true (s_turn_until (self, last, true, 5000));
    s_assert_has (self->store [1], "j049", "x");
    char *stale = s_read (self->store [1], "stale");
    assert_null (stale);
    uint64_t epoch, seq;
    repl_store_position (self->store [1], &epoch, &seq);
    assert_int_equal (epoch, self->epoch);
    assert_int_equal (seq, last);
}

static void
test_repl_silent_standby_leaves_the_sync_set (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 200, false);
    s_sink (self);
    uint64_t first = s_pass (self, "a", "1");
    assert_true (s_turn_until (self, first, true, 5000));
    assert_int_equal (repl_source_sync_count (self->source), 1);
    //  The standby stops reading: the pass waits, then the active goes on
    //  alone after the sync timeout
    uint64_t second = s_pass (self, "b", "2");
    assert_true (repl_source_released (self->source) < second);
    assert_true (s_turn_until (self, second, false, 3000));
    assert_int_equal (repl_source_sync_count (self->source), 0);
    //  Reading again, it catches up and is in sync again
    uint64_t third = s_pass (self, "c", "3");
    assert_true (s_turn_until (self, third, true, 5000));
    s_assert_has (self->store [1], "c", "3");
}

static void
test_repl_dropped_only_once_recorded (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 200, false);
    s_sink (self);
    uint64_t first = s_pass (self, "a", "1");
    assert_true (s_turn_until (self, first, true, 5000));
    assert_int_equal (repl_source_sync_count (self->source), 1);
    //  The standby stops reading and etcd cannot be written: the active
    //  does not go on without it
    self->etcd_down = true;
    uint64_t second = s_pass (self, "b", "2");
    assert_false (s_turn_until (self, second, false, 1500));
    assert_true (repl_source_released (self->source) < second);
    //  The key written without it: released
    self->etcd_down = false;
    assert_true (s_turn_until (self, second, false, 1000));
    assert_int_equal (repl_source_sync_count (self->source), 0);
}

static void
test_repl_added_counts_before_recorded (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    s_record (self);
    self->etcd_down = true;
    s_sink (self);
    uint64_t first = s_pass (self, "a", "1");
    //  Caught up, it is asked for; until the key names it, it is not in
    //  the sync set, but its acks already count
    int64_t deadline = zclock_mono () + 5000;
    char names [REPL_SYNC_NAMES] = "";
    uint64_t gen = 0;
    while (zclock_mono () < deadline) {
        int64_t now = zclock_mono ();
        repl_source_read (self->source, now);
        repl_source_tick (self->source, now);
        repl_sink_read (self->sink, now);
        if (repl_source_sync_wanted (self->source, names, sizeof names, &gen))
            break;
        zclock_sleep (2);
    }
    assert_string_equal (names, "b");
    assert_int_equal (repl_source_sync_count (self->source), 0);
    assert_false (repl_sink_in_sync (self->sink));
    uint64_t second = s_pass (self, "b", "2");
    assert_true (repl_source_released (self->source) >= first);
    assert_true (repl_source_released (self->source) < second);
    repl_source_sync_recorded (self->source, names, zclock_mono ());
    snprintf (self->pending, sizeof self->pending, "%s", names);
    assert_int_equal (repl_source_sync_count (self->source), 1);
    self->etcd_down = false;
    assert_true (s_turn_until (self, second, true, 5000));
}

static void
test_repl_strict_holds (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 200, true);
    //  Strict, no standby: nothing is released
    uint64_t first = s_pass (self, "a", "1");
    s_record (self);
    assert_int_equal (repl_source_released (self->source), 0);
    s_sink (self);
    assert_true (s_turn_until (self, first, true, 5000));
    //  The standby stops: strict, the active holds
    uint64_t second = s_pass (self, "b", "2");
    assert_false (s_turn_until (self, second, false, 1000));
    assert_int_equal (repl_source_sync_count (self->source), 0);
    assert_true (s_turn_until (self, second, true, 5000));
}

//  A pass shipped whose commit failed, sent to no standby: forgotten,
//  and the next pass takes its number
static void
test_repl_unshipped_when_no_standby_has_it (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    s_record (self);
    uint64_t first = s_pass (self, "a", "1");
    uint64_t failed = s_pass_ending (self, "lost", "x", false);
    assert_int_equal (failed, first + 1);
    assert_int_equal (repl_source_unship (self->source, failed), 0);
    assert_int_equal (repl_source_last (self->source), first);
    assert_int_equal (repl_source_released (self->source), first);
    uint64_t next = s_pass (self, "c", "3");
    assert_int_equal (next, failed);
    //  A standby that joins holds what the active holds, not the lost pass
    s_sink (self);
    assert_true (s_turn_until (self, next, true, 5000));
    s_assert_has (self->store [1], "a", "1");
    s_assert_has (self->store [1], "c", "3");
    char *lost = s_read (self->store [1], "lost");
    assert_null (lost);
}

//  A pass shipped to a standby whose commit then failed on the active:
//  the two stores may differ, which the broker must hear (it leaves the
//  lead); nothing of it is released
static void
test_repl_unship_refused_once_a_standby_may_hold_it (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    s_record (self);
    s_sink (self);
    uint64_t first = s_pass (self, "a", "1");
    assert_true (s_turn_until (self, first, true, 5000));
    assert_int_equal (repl_source_sync_count (self->source), 1);
    uint64_t failed = s_pass_ending (self, "lost", "x", false);
    assert_int_equal (repl_source_unship (self->source, failed), -1);
    assert_true (repl_source_released (self->source) < failed);
}

//  A standby joins a store that keeps changing: the snapshot is copied
//  apart while the source commits and ships passes; the standby then
//  holds every record of the source's store, and its last pass
static void
test_repl_snapshot_while_passes_go_on (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 60000, false);
    s_record (self);
    for (int index = 0; index < 2000; index++) {
        char key [16];
        snprintf (key, sizeof key, "old%04d", index);
        s_pass (self, key, "0123456789abcdef0123456789abcdef");
    }
    s_sink (self);
    //  The hello is read: the copy begins, and this thread goes on
    int64_t deadline = zclock_mono () + 5000;
    repl_standby_info_t info = {.state = NULL};
    while (zclock_mono () < deadline
           && !repl_source_standby_at (self->source, 0, zclock_mono (),
                                       &info)) {
        repl_source_read (self->source, zclock_mono ());
        zclock_sleep (1);
    }
    assert_string_equal (info.state, "snapshot");
    uint64_t last = 0;
    for (int index = 0; index < 300; index++) {
        char key [16];
        snprintf (key, sizeof key, "new%04d", index);
        last = s_pass (self, key, "v");
        if (index % 10 == 0) {
            repl_source_read (self->source, zclock_mono ());
            repl_source_tick (self->source, zclock_mono ());
            repl_sink_read (self->sink, zclock_mono ());
        }
    }
    assert_true (s_turn_until (self, last, true, 10000));
    s_assert_has (self->store [1], "old0000", "0123456789abcdef0123456789abcdef");
    s_assert_has (self->store [1], "old1999", "0123456789abcdef0123456789abcdef");
    s_assert_has (self->store [1], "new0000", "v");
    s_assert_has (self->store [1], "new0299", "v");
    store_txn_t *txns [2] = {store_begin (self->store [0], false),
                             store_begin (self->store [1], false)};
    assert_int_equal (store_count (txns [0], STORE_DB_JOBS),
                      store_count (txns [1], STORE_DB_JOBS));
    store_abort (&txns [0]);
    store_abort (&txns [1]);
    uint64_t epoch, seq;
    repl_store_position (self->store [1], &epoch, &seq);
    assert_int_equal (epoch, self->epoch);
    assert_int_equal (seq, last);
}

//  Sends the sink a PASS of EPOCH, SEQ that puts KEY over ROUTER to the
//  peer ROUTING.
static void
s_raw_pass (zsock_t *router, zframe_t *routing, uint64_t epoch, uint64_t seq,
            const char *key)
{
    //  A journal written by a store of its own
    char dir [64] = "/tmp/grid-repl-raw-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char err [256];
    store_t *store = store_open (dir, 0, 0, err, sizeof err);
    assert_non_null (store);
    pw_t *journal = pw_new ();
    store_txn_t *txn = store_begin (store, true);
    store_txn_journal (txn, journal);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, key, strlen (key), "v", 1),
                      0);
    assert_int_equal (repl_store_mark (txn, epoch, seq), 0);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
    char command [128];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    assert_int_equal (system (command), 0);
    uint8_t number [8];
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, zframe_data (routing), zframe_size (routing));
    zmsg_addstr (msg, "PASS");
    for (int index = 0; index < 8; index++)
        number [index] = (uint8_t) (epoch >> (56 - 8 * index));
    zmsg_addmem (msg, number, 8);
    for (int index = 0; index < 8; index++)
        number [index] = (uint8_t) (seq >> (56 - 8 * index));
    zmsg_addmem (msg, number, 8);
    zmsg_addmem (msg, pw_data (journal), pw_size (journal));
    assert_int_equal (zmsg_send (&msg, router), 0);
    pw_destroy (&journal);
}

static void
test_repl_older_epoch_refused (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert_int_equal (zsock_bind (router, "%s", self->endpoint), 0);
    s_sink (self);
    zmsg_t *hello = zmsg_recv (router);
    assert_non_null (hello);
    zframe_t *routing = zmsg_pop (hello);
    zmsg_destroy (&hello);
    //  Epoch 7 is heard first; then one of epoch 5 (a demoted leader)
    s_raw_pass (router, routing, 7, 1, "new");
    s_raw_pass (router, routing, 5, 2, "old");
    for (int round = 0; round < 100; round++) {
        repl_sink_read (self->sink, zclock_mono ());
        zclock_sleep (2);
    }
    s_assert_has (self->store [1], "new", "v");
    char *old = s_read (self->store [1], "old");
    assert_null (old);
    uint64_t epoch, seq;
    repl_sink_position (self->sink, &epoch, &seq);
    assert_int_equal (epoch, 7);
    assert_int_equal (seq, 1);
    assert_int_equal (repl_sink_epoch_seen (self->sink), 7);
    //  A gap in seq is not applied either (the sink says hello again)
    s_raw_pass (router, routing, 7, 5, "gap");
    for (int round = 0; round < 50; round++) {
        repl_sink_read (self->sink, zclock_mono ());
        zclock_sleep (2);
    }
    char *gap = s_read (self->store [1], "gap");
    assert_null (gap);
    zframe_destroy (&routing);
    repl_sink_destroy (&self->sink);
    zsock_destroy (&router);
}

//  Turns both sides for MS.
static void
s_turn_for (s_pair_t *self, int ms)
{
    int64_t deadline = zclock_mono () + ms;
    while (zclock_mono () < deadline) {
        int64_t now = zclock_mono ();
        repl_source_read (self->source, now);
        repl_source_tick (self->source, now);
        s_record (self);
        repl_sink_read (self->sink, now);
        repl_sink_tick (self->sink, now);
        zclock_sleep (2);
    }
}

//  A standby whose commits fail (its map full at its ceiling): the active
//  drops it from the sync set after the sync timeout and releases alone;
//  given room, the standby asks again (after REPL_RETRY_MS) and catches
//  up, in sync again.
static void
test_repl_standby_that_cannot_commit (void **state)
{
    s_pair_t *self = (s_pair_t *) *state;
    s_source (self, 200, false);
    s_sink (self);
    uint64_t first = s_pass (self, "a", "1");
    assert_true (s_turn_until (self, first, true, 5000));
    assert_int_equal (repl_source_sync_count (self->source), 1);
    store_test_fail_commits (self->store [1], STORE_EFULL, -1);
    uint64_t second = s_pass (self, "b", "2");
    s_turn_for (self, 600);
    assert_true (repl_source_released (self->source) >= second);
    assert_int_equal (repl_source_sync_count (self->source), 0);
    assert_false (repl_sink_in_sync (self->sink));
    char *held = s_read (self->store [1], "b");
    assert_null (held);
    //  Room again: caught up by itself
    store_test_fail_commits (self->store [1], STORE_OK, 0);
    uint64_t third = s_pass (self, "c", "3");
    assert_true (s_turn_until (self, third, true,
                               REPL_RETRY_MS * 4 + 3000));
    s_assert_has (self->store [1], "b", "2");
    s_assert_has (self->store [1], "c", "3");
    assert_int_equal (repl_source_sync_count (self->source), 1);
}

int
main (void)
{
    zsys_init ();
    zsys_set_logsender (NULL);
    log_init ("test_repl");
    log_set_level (LOG_LEVEL_ERROR);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_repl_passes_and_sync, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_late_standby_takes_a_snapshot,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_repl_silent_standby_leaves_the_sync_set, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_dropped_only_once_recorded,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_added_counts_before_recorded,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_strict_holds, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_older_epoch_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_standby_that_cannot_commit,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_repl_unshipped_when_no_standby_has_it, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_repl_unship_refused_once_a_standby_may_hold_it, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown (test_repl_snapshot_while_passes_go_on,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
