/*  =========================================================================
    test_it_qa_keys - a wrong public key for the broker, as a new operator
    makes it (another key's file): the broker cannot read the hello and
    closes the connection without a word, as a restarting broker would.
    The agent and the relay keep trying, and after a few failures in a
    row say once which option to check; with the right key they come in.
    (gridcli's side is in test_it_cli.)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "lib/fixture.h"

#define S_WAIT_MS 30000

//  An agent given the admin's public key as the broker's: warned once
//  about --broker-key, never a node; the same agent with the right key
//  comes online
static void
test_qa_keys_agent_wrong_broker_key (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int slot = grid_spawn_agent (grid, "wk-01", NULL, NULL, (const char *[]) {
        "--broker-key", grid->admin_key, NULL});
    assert_true (slot >= 0);
    bool said = fixture_log_has (grid, "agent-wk-01.log",
                                 "check that --broker-key is its public key",
                                 S_WAIT_MS);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    pv_doc_t *doc = grid_call (grid, "node.get", "node", "wk-01", NULL);
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_start_agent (grid, "wk-02", NULL, NULL, NULL) >= 0);
}

//  A relay given the admin's public key as its upstream's: warned once
//  about --upstream-key, it never serves
static void
test_qa_keys_relay_wrong_upstream_key (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "wk", -1, false, (const char *[]) {
        "--upstream-key", grid->admin_key, NULL});
    assert_true (relay >= 0);
    bool said = fixture_log_has (grid, "relay-wk.log",
                                 "check that --upstream-key is its public key",
                                 S_WAIT_MS);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    char path [400];
    snprintf (path, sizeof path, "%s/relay-wk.log", grid->dir);
    char *log = grid_slurp (path);
    assert_null (strstr (log, "serving agents on"));
    free (log);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_qa_keys_agent_wrong_broker_key,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_keys_relay_wrong_upstream_key,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
