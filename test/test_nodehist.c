/*  =========================================================================
    test_nodehist - a node's registration history: what a new hello
    changes (actions added and removed, backend and agent versions), kept
    per node, newest first, trimmed to NODEHIST_KEEP.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../broker/nodehist.h"

static proto_action_spec_t s_apt [] = {
    {.name = "install", .help = "h"}, {.name = "update", .help = "h"},
};
static proto_action_spec_t s_apt_new [] = {
    {.name = "install", .help = "h"}, {.name = "upgrade", .help = "h"},
};
static proto_action_spec_t s_test [] = {{.name = "echo", .help = "h"}};

//  A hello with apt (ACTIONS, VERSION) and, when WITH_TEST, test 1.0.
static void
s_hello (proto_msg_t *hello, proto_backend_spec_t *backends,
         proto_action_spec_t *actions, char *version, bool with_test,
         char *agent_version)
{
    memset (hello, 0, sizeof *hello);
    hello->type = PROTO_HELLO;
    hello->node = "web-01";
    backends [0] = (proto_backend_spec_t) {"apt", actions, 2, version};
    backends [1] = (proto_backend_spec_t) {"test", s_test, 1, "1.0"};
    hello->backends = backends;
    hello->backend_count = with_test ? 2 : 1;
    hello->version = agent_version;
}

static pv_doc_t *
s_decode (pw_t *writer)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    return doc;
}

static bool
s_list_is (const pv_t *list, const char *first, const char *second)
{
    size_t count = (first ? 1 : 0) + (second ? 1 : 0);
    return pv_size (list) == count
        && (!first || pv_str_eq (pv_array_at (list, 0), first))
        && (!second || pv_str_eq (pv_array_at (list, 1), second));
}

static void
test_nodehist_diff_names_what_changed (void **state)
{
    proto_msg_t first, same, second;
    proto_backend_spec_t b1 [2], b2 [2], b3 [2];
    s_hello (&first, b1, s_apt, "1.0", true, "0.1.0");
    s_hello (&same, b2, s_apt, "1.0", true, "0.1.0");
    s_hello (&second, b3, s_apt_new, "1.1", false, "0.2.0");
    pw_t *writer = pw_new ();
    //  A new node: registered, with its action count
    assert_true (nodehist_diff (NULL, &first, 1000, writer));
    pv_doc_t *doc = s_decode (writer);
    const pv_t *entry = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (entry, "event"), "registered"));
    int64_t actions = 0;
    pv_get_int (pv_map_get (entry, "actions"), &actions);
    assert_int_equal (actions, 3);
    assert_int_equal (pv_size (pv_map_get (entry, "added")), 0);
    pv_doc_destroy (&doc);
    //  The same hello again: nothing to record
    pw_reset (writer);
    assert_false (nodehist_diff (&first, &same, 2000, writer));
    assert_int_equal (pw_size (writer), 0);
    //  Another backend set and versions
    assert_true (nodehist_diff (&first, &second, 3000, writer));
    doc = s_decode (writer);
    entry = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (entry, "event"), "changed"));
    assert_true (s_list_is (pv_map_get (entry, "added"), "apt.upgrade", NULL));
    assert_true (s_list_is (pv_map_get (entry, "removed"), "apt.update",
                            "test.echo"));
    const pv_t *versions = pv_map_get (entry, "versions");
    assert_int_equal (pv_size (versions), 1);
    assert_true (pv_str_eq (pv_map_get (pv_array_at (versions, 0), "from"),
                            "1.0"));
    assert_true (pv_str_eq (pv_map_get (pv_array_at (versions, 0), "to"),
                            "1.1"));
    assert_true (pv_str_eq (pv_map_get (entry, "previous_agent_version"),
                            "0.1.0"));
    pv_doc_destroy (&doc);
    //  An old agent sends no backend version: that is a change too
    proto_msg_t old_agent;
    proto_backend_spec_t b4 [2];
    s_hello (&old_agent, b4, s_apt_new, NULL, false, "0.2.0");
    pw_reset (writer);
    assert_true (nodehist_diff (&second, &old_agent, 4000, writer));
    doc = s_decode (writer);
    versions = pv_map_get (pv_doc_root (doc), "versions");
    assert_int_equal (pv_type (pv_map_get (pv_array_at (versions, 0), "to")),
                      PV_NIL);
    pv_doc_destroy (&doc);
    //  Two hellos of one interned list (registry.h) hold the same pointer:
    //  nothing changed in it, whatever it holds; the agent's own version
    //  is still compared
    proto_msg_t shared = first;
    pw_reset (writer);
    assert_false (nodehist_diff (&first, &shared, 5000, writer));
    shared.version = "0.3.0";
    assert_true (nodehist_diff (&first, &shared, 5000, writer));
    doc = s_decode (writer);
    entry = pv_doc_root (doc);
    assert_int_equal (pv_size (pv_map_get (entry, "added")), 0);
    assert_int_equal (pv_size (pv_map_get (entry, "removed")), 0);
    assert_int_equal (pv_size (pv_map_get (entry, "versions")), 0);
    pv_get_int (pv_map_get (entry, "actions"), &actions);
    assert_int_equal (actions, 3);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
}

static void
test_nodehist_keeps_the_newest_entries (void **state)
{
    char dir [64];
    strcpy (dir, "/tmp/grid-nodehist-XXXXXX");
    assert_non_null (mkdtemp (dir));
    char err [256];
    store_t *store = store_open (dir, 1 << 20, 64 << 20, err, sizeof err);
    assert_non_null (store);
    store_txn_t *txn = store_begin (store, true);
    pw_t *record = pw_new ();
    for (int index = 1; index <= NODEHIST_KEEP + 5; index++) {
        pw_reset (record);
        pw_map (record, 2);
        pw_str (record, "time_ms");
        pw_int (record, index * 1000);
        pw_str (record, "event");
        pw_str (record, "changed");
        assert_int_equal (nodehist_append (txn, "web-01", pw_data (record),
                                           pw_size (record)), 0);
    }
    //  A node whose id extends the other's keeps its own history
    assert_int_equal (nodehist_append (txn, "web-010", pw_data (record),
                                       pw_size (record)), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (nodehist_write (txn, "web-01", 1000, writer),
                      NODEHIST_KEEP);
    pv_doc_t *doc = s_decode (writer);
    const pv_t *list = pv_doc_root (doc);
    int64_t seq = 0;
    pv_get_int (pv_map_get (pv_array_at (list, 0), "seq"), &seq);
    assert_int_equal (seq, NODEHIST_KEEP + 5);
    pv_get_int (pv_map_get (pv_array_at (list, NODEHIST_KEEP - 1), "seq"),
                &seq);
    assert_int_equal (seq, 6);
    assert_true (pv_str_eq (pv_map_get (pv_array_at (list, 0), "time"),
                            "1970-01-01T00:01:45.000Z"));
    pv_doc_destroy (&doc);
    pw_reset (writer);
    assert_int_equal (nodehist_write (txn, "web-010", 10, writer), 1);
    pw_reset (writer);
    assert_int_equal (nodehist_write (txn, "web-02", 10, writer), 0);
    pw_reset (writer);
    assert_int_equal (nodehist_write (txn, "web-01", 3, writer), 3);
    pw_destroy (&writer);
    pw_destroy (&record);
    store_abort (&txn);
    store_destroy (&store);
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    assert_int_equal (system (command), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_nodehist_diff_names_what_changed),
        cmocka_unit_test (test_nodehist_keeps_the_newest_entries),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
