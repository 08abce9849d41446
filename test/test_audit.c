/*  =========================================================================
    test_audit - the audit trail's records: keys sort by time then
    sequence and never go back, entries round-trip through their stored
    form, malformed records are refused, the filters and paging of
    audit_list, the refusals' rate limit, and the retention's prune.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../broker/audit.h"

typedef struct {
    char dir [64];
    store_t *store;
    store_txn_t *txn;
} fixture_t;

static int
s_setup (void **state)
{
    fixture_t *fixture = (fixture_t *) calloc (1, sizeof (fixture_t));
    strcpy (fixture->dir, "/tmp/grid-audit-XXXXXX");
    if (!mkdtemp (fixture->dir))
        return -1;
    char err [256];
    fixture->store = store_open (fixture->dir, 1 << 20, 64 << 20, err,
                                 sizeof err);
    if (!fixture->store)
        return -1;
    fixture->txn = store_begin (fixture->store, true);
    *state = fixture;
    return 0;
}

static int
s_teardown (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    store_abort (&fixture->txn);
    store_destroy (&fixture->store);
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", fixture->dir);
    if (system (command) != 0)
        return -1;
    free (fixture);
    return 0;
}

static void
s_entry (audit_entry_t *entry, int64_t at_ms, const char *who,
         const char *type, const char *object, const char *outcome)
{
    memset (entry, 0, sizeof *entry);
    entry->at_ms = at_ms;
    audit_text_set (entry->face, sizeof entry->face, "zmq");
    audit_text_set (entry->who, sizeof entry->who, who);
    audit_text_set (entry->role, sizeof entry->role, "admin");
    audit_text_set (entry->request, sizeof entry->request, "r-1");
    audit_text_set (entry->type, sizeof entry->type, type);
    audit_text_set (entry->object, sizeof entry->object, object);
    audit_text_set (entry->outcome, sizeof entry->outcome, outcome);
}

static void
test_audit_keys_sort_by_time_then_seq (void **state)
{
    uint8_t a [AUDIT_KEY_LEN], b [AUDIT_KEY_LEN], c [AUDIT_KEY_LEN];
    audit_key_make (1000, 5, a);
    audit_key_make (1000, 6, b);
    audit_key_make (1001, 0, c);
    assert_true (memcmp (a, b, AUDIT_KEY_LEN) < 0);
    assert_true (memcmp (b, c, AUDIT_KEY_LEN) < 0);
    //  Big-endian: a later time sorts later whatever its low bytes
    audit_key_make (0x01FF, 0, a);
    audit_key_make (0x0200, 0, b);
    assert_true (memcmp (a, b, AUDIT_KEY_LEN) < 0);
    int64_t ms;
    uint32_t seq;
    audit_key_make (1733150000123, 0xDEADBEEF, a);
    assert_int_equal (audit_key_parse (a, AUDIT_KEY_LEN, &ms, &seq), 0);
    assert_int_equal (ms, 1733150000123);
    assert_int_equal (seq, 0xDEADBEEF);
    assert_int_equal (audit_key_parse (a, AUDIT_KEY_LEN - 1, &ms, &seq), -1);
    char id [AUDIT_ID_LEN + 1];
    audit_id_format (a, id);
    assert_int_equal (strlen (id), AUDIT_ID_LEN);
    assert_int_equal (audit_id_parse (id, b), 0);
    assert_memory_equal (a, b, AUDIT_KEY_LEN);
    assert_int_equal (audit_id_parse ("zz", b), -1);
    assert_int_equal (audit_id_parse ("00000000000000000000000g", b), -1);
    assert_int_equal (audit_id_parse (NULL, b), -1);
}

static void
test_audit_entry_round_trip (void **state)
{
    audit_entry_t entry, back;
    s_entry (&entry, 1733150000123, "alice", "job.cancel",
             "j-0193a1b2c3d4-0001", "not_found");
    audit_text_set (entry.message, sizeof entry.message, "no job");
    entry.suppressed = 7;
    pw_t *writer = pw_new ();
    audit_entry_encode (&entry, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (audit_entry_decode (pv_doc_root (doc), &back), 0);
    assert_memory_equal (&entry, &back, sizeof entry);
    pv_doc_destroy (&doc);
    //  Without the optional fields
    s_entry (&entry, 5, "bob", "broker.drain", NULL, "ok");
    pw_reset (writer);
    audit_entry_encode (&entry, writer);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_null (pv_map_get (pv_doc_root (doc), "object"));
    assert_null (pv_map_get (pv_doc_root (doc), "suppressed"));
    assert_int_equal (audit_entry_decode (pv_doc_root (doc), &back), 0);
    assert_memory_equal (&entry, &back, sizeof entry);
    pv_doc_destroy (&doc);
    //  Malformed: not a map, a field missing, a field of the wrong type
    pw_reset (writer);
    pw_str (writer, "no");
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (audit_entry_decode (pv_doc_root (doc), &back), -2);
    pv_doc_destroy (&doc);
    pw_reset (writer);
    pw_map (writer, 2);
    pw_str (writer, "at_ms");
    pw_int (writer, 5);
    pw_str (writer, "face");
    pw_int (writer, 5);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (audit_entry_decode (pv_doc_root (doc), &back), -2);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
}

static void
test_audit_text_cut_at_a_character (void **state)
{
    char buf [5];
    audit_text_set (buf, sizeof buf, "abc\xc3\xa9");   //  "abcé": 5 bytes
    assert_string_equal (buf, "abc");
    audit_text_set (buf, sizeof buf, NULL);
    assert_string_equal (buf, "");
    audit_text_set (buf, sizeof buf, "abcd");
    assert_string_equal (buf, "abcd");
}

//  The ids of audit_list's reply in WRITER, and its next (or "").
static size_t
s_listed (pw_t *writer, char ids [][AUDIT_ID_LEN + 1], char *whos [],
          char *next)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *entries = pv_map_get (pv_doc_root (doc), "entries");
    size_t count = pv_size (entries);
    for (size_t index = 0; index < count; index++) {
        char *id = pv_strdup (pv_map_get (pv_array_at (entries, index), "id"));
        snprintf (ids [index], AUDIT_ID_LEN + 1, "%s", id);
        free (id);
        if (whos)
            whos [index] = pv_strdup (pv_map_get (pv_array_at (entries, index),
                                                  "who"));
    }
    char *text = pv_strdup (pv_map_get (pv_doc_root (doc), "next"));
    snprintf (next, AUDIT_ID_LEN + 1, "%s", text ? text : "");
    free (text);
    pv_doc_destroy (&doc);
    return count;
}

static void
test_audit_list_filters_and_pages (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    audit_t *audit = audit_new ();
    audit_entry_t entry;
    const char *whos [] = {"alice", "bob", "alice", "carol", "alice"};
    const char *types [] = {"job.submit", "job.cancel", "node.drain",
                            "key.accept", "job.cancel"};
    const char *outcomes [] = {"ok", "forbidden", "ok", "ok", "not_found"};
    for (int index = 0; index < 5; index++) {
        s_entry (&entry, 1000 + index * 10, whos [index], types [index],
                 index == 2 ? "web-01" : "j-1", outcomes [index]);
        assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    }
    //  The wall clock went back: the key does not
    s_entry (&entry, 500, "dave", "broker.drain", NULL, "ok");
    assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    char ids [10][AUDIT_ID_LEN + 1], next [AUDIT_ID_LEN + 1];
    char *who [10];
    pw_t *writer = pw_new ();
    audit_filter_t filter;
    memset (&filter, 0, sizeof filter);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, who, next), 6);
    //  Newest first: the last put is first although its clock was older
    assert_string_equal (who [0], "dave");
    assert_string_equal (who [1], "alice");
    assert_string_equal (who [5], "alice");
    for (int index = 0; index < 6; index++) {
        if (index > 0)
            assert_true (strcmp (ids [index - 1], ids [index]) > 0);
        free (who [index]);
    }
    assert_string_equal (next, "");
    //  Filters
    filter.who = "alice";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 3);
    filter.type = "job.";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 2);
    filter.type = "job.cancel";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 1);
    memset (&filter, 0, sizeof filter);
    filter.object = "web-01";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 1);
    memset (&filter, 0, sizeof filter);
    filter.outcome = "refused";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 1);
    filter.outcome = "error";
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    assert_int_equal (s_listed (writer, ids, NULL, next), 2);
    memset (&filter, 0, sizeof filter);
    filter.since_ms = 1020;
    pw_reset (writer);
    assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
    //  1020, 1030, 1040 and dave's (keyed at 1040)
    assert_int_equal (s_listed (writer, ids, NULL, next), 4);
    //  Pages of two, each starting before the last page's next
    memset (&filter, 0, sizeof filter);
    filter.limit = 2;
    char seen [10][AUDIT_ID_LEN + 1];
    size_t total = 0;
    for (int page = 0; page < 4; page++) {
        pw_reset (writer);
        assert_int_equal (audit_list (fixture->txn, &filter, writer), 0);
        size_t count = s_listed (writer, ids, NULL, next);
        for (size_t index = 0; index < count; index++)
            memcpy (seen [total++], ids [index], AUDIT_ID_LEN + 1);
        if (!*next)
            break;
        assert_int_equal (count, 2);
        static char before [AUDIT_ID_LEN + 1];
        memcpy (before, next, sizeof before);
        filter.before = before;
    }
    assert_int_equal (total, 6);
    for (size_t index = 1; index < total; index++)
        assert_true (strcmp (seen [index - 1], seen [index]) > 0);
    pw_destroy (&writer);
    audit_destroy (&audit);
}

static void
test_audit_sequence_survives_a_new_trail (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    audit_t *audit = audit_new ();
    audit_entry_t entry;
    s_entry (&entry, 2000, "alice", "job.submit", NULL, "ok");
    assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    audit_destroy (&audit);
    //  A restarted broker's trail reads the last key first: no overwrite
    audit = audit_new ();
    assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    assert_int_equal (store_count (fixture->txn, STORE_DB_AUDIT), 3);
    audit_destroy (&audit);
}

static void
test_audit_refusals_rate_limited (void **state)
{
    audit_t *audit = audit_new ();
    int64_t suppressed = -1;
    assert_true (audit_refusal_admit (audit, "zmq bob", 0, &suppressed));
    assert_int_equal (suppressed, 0);
    assert_false (audit_refusal_admit (audit, "zmq bob", 1000, &suppressed));
    assert_false (audit_refusal_admit (audit, "zmq bob", 9999, &suppressed));
    //  Another caller is not held back by bob
    assert_true (audit_refusal_admit (audit, "zmq carol", 5000, &suppressed));
    assert_true (audit_refusal_admit (audit, "zmq bob", AUDIT_REFUSED_MS,
                                      &suppressed));
    assert_int_equal (suppressed, 2);
    assert_false (audit_refusal_admit (audit, "zmq bob", AUDIT_REFUSED_MS + 1,
                                       &suppressed));
    //  Many callers: memory stays bounded, a new one is still recorded
    char caller [32];
    for (int index = 0; index < AUDIT_CALLERS_MAX + 10; index++) {
        snprintf (caller, sizeof caller, "http c%d", index);
        assert_true (audit_refusal_admit (audit, caller, 20000, &suppressed));
    }
    assert_true (audit_refusal_admit (audit, "http new", 20001, &suppressed));
    audit_destroy (&audit);
}

static void
test_audit_prune_by_age (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    audit_t *audit = audit_new ();
    audit_entry_t entry;
    for (int index = 0; index < 10; index++) {
        s_entry (&entry, 1000 * (index + 1), "alice", "job.submit", NULL,
                 "ok");
        assert_int_equal (audit_put (audit, fixture->txn, &entry), 0);
    }
    //  At most the limit, then the rest of what is older than the cutoff
    assert_int_equal (audit_prune (fixture->txn, 5000, 2), 2);
    assert_int_equal (audit_prune (fixture->txn, 5000, 100), 2);
    assert_int_equal (audit_prune (fixture->txn, 5000, 100), 0);
    assert_int_equal (store_count (fixture->txn, STORE_DB_AUDIT), 6);
    audit_destroy (&audit);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_audit_keys_sort_by_time_then_seq),
        cmocka_unit_test (test_audit_entry_round_trip),
        cmocka_unit_test (test_audit_text_cut_at_a_character),
        cmocka_unit_test_setup_teardown (test_audit_list_filters_and_pages,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_audit_sequence_survives_a_new_trail, s_setup, s_teardown),
        cmocka_unit_test (test_audit_refusals_rate_limited),
        cmocka_unit_test_setup_teardown (test_audit_prune_by_age, s_setup,
                                         s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
