/*  =========================================================================
    test_it_qa_relay - a relay and its agents as an operator meets them
    for the first time: a relay whose key is not enrolled says how to
    accept it with a command that a shell runs as written (the key's
    Z85 holds ( ) ! & < > and the like), and an agent whose key is not
    enrolled gets nothing through an enrolled relay until it is accepted
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "lib/harness.h"

static int
s_setup (void **state)
{
    grid_t *grid = (grid_t *) calloc (1, sizeof (grid_t));
    assert_int_equal (grid_init (grid), 0);
    *state = grid;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid_stop (grid);
    free (grid);
    return 0;
}

//  True when the log NAME in the grid's directory holds TEXT within
//  TIMEOUT_MS.
static bool
s_log_has (grid_t *grid, const char *name, const char *text, int timeout_ms)
{
    char path [400];
    snprintf (path, sizeof path, "%s/%s", grid->dir, name);
    long long deadline = grid_now_ms () + timeout_ms;
    while (true) {
        char *log = grid_slurp (path);
        bool found = log && strstr (log, text) != NULL;
        free (log);
        if (found)
            return true;
        if (grid_now_ms () > deadline)
            return false;
        zclock_sleep (50);
    }
}

//  A pending relay's logs (the broker's and its own) give the command
//  that accepts it with the key quoted for a shell
static void
test_qa_relay_pending_says_how (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "late", -1, true, NULL);
    assert_true (relay >= 0);
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    char command [KEYS_TEXT_SIZE + 40];
    snprintf (command, sizeof command, "gridcli key accept '%s'", key);
    bool said = s_log_has (grid, "broker.log", command, 10000);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    assert_true (s_log_has (grid, "relay-late.log", command, 10000));
    //  The command works as shown (gridcli's argument, unquoted)
    pv_doc_t *doc = grid_call (grid, "key.accept", "key", key, NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
}

//  An agent with a key nobody accepted, through an enrolled relay: pending,
//  never a node, until an admin accepts it
static void
test_qa_relay_unenrolled_agent (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->manual_accept = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "late", -1, true, NULL);
    assert_true (relay >= 0);
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    pv_doc_t *doc = grid_call (grid, "key.accept", "key", key, NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  The broker accepts no agent key by itself here
    int slot = grid_spawn_agent (grid, "web-01", "web", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [relay], "--publish",
        grid->relay_publish_ep [relay], "--broker-key",
        grid->relay_key [relay], NULL});
    assert_true (slot >= 0);
    assert_true (s_log_has (grid, "agent-web-01.log", "pending", 10000));
    doc = grid_call (grid, "node.get", "node", "web-01", NULL);
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  Accepted, it comes through the relay
    doc = grid_call (grid, "key.accept", "node", "web-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_wait_node (grid, "web-01", "online", 10000));
    doc = grid_call (grid, "node.get", "node", "web-01", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "relay", "late"));
    pv_doc_destroy (&doc);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_qa_relay_pending_says_how,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_unenrolled_agent,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
