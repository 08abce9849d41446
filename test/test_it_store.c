/*  =========================================================================
    test_it_store - the store at its edges, through the real programs: one
    owner per data and state directory, and a disk or a map that fills up
    while jobs come and go.

    The full-disk tests mount a small tmpfs and so run only as root; as
    any other user they say so and pass without checking anything.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/harness.h"

static int
s_setup (void **state)
{
    grid_t *grid = (grid_t *) zmalloc (sizeof (grid_t));
    if (grid_init (grid) != 0)
        return -1;
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

//  ---------------------------------------------------------------------
//  One owner per directory

//  A second broker on a running broker's data dir refuses to start and
//  names the first one; the first goes on serving.
static void
test_it_store_second_broker_is_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    char data_dir [400], client [400], agents [400], publish [400];
    snprintf (data_dir, sizeof data_dir, "%s/broker-data", grid->dir);
    snprintf (client, sizeof client, "ipc://%s/client2.ipc", grid->dir);
    snprintf (agents, sizeof agents, "ipc://%s/agents2.ipc", grid->dir);
    snprintf (publish, sizeof publish, "ipc://%s/publish2.ipc", grid->dir);
    char *out = NULL, *err = NULL;
    int code = grid_run (grid, "gridbroker", &out, &err, 10000, "--data-dir",
                         data_dir, "--client", client, "--agents", agents,
                         "--publish", publish, "--insecure", NULL);
    assert_int_equal (code, 1);
    char expected [600];
    snprintf (expected, sizeof expected,
              "data dir %s is in use by gridbroker pid %d", data_dir,
              (int) grid->broker_pid);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    free (out);
    free (err);
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    //  Once the first is gone the directory is free again.
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
}

//  A second agent on a running agent's state dir refuses to start.
static void
test_it_store_second_agent_is_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int slot = grid_start_agent (grid, "web-01", NULL, NULL, NULL);
    assert_true (slot >= 0);
    char state_dir [400];
    snprintf (state_dir, sizeof state_dir, "%s/agent-web-01", grid->dir);
    char *out = NULL, *err = NULL;
    int code = grid_run (grid, "gridagent", &out, &err, 10000, "--id",
                         "web-02", "--broker", grid->agents_ep, "--publish",
                         grid->publish_ep, "--state-dir", state_dir,
                         "--insecure", NULL);
    assert_int_not_equal (code, 0);
    char expected [600];
    snprintf (expected, sizeof expected,
              "state dir %s is in use by gridagent pid %d", state_dir,
              (int) grid->agent_pids [slot]);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    free (out);
    free (err);
    assert_true (grid_wait_node (grid, "web-01", "online", 5000));
    //  A SIGKILLed agent leaves no lock behind: its successor starts.
    grid_stop_agent (grid, slot, true);
    assert_true (grid_start_agent (grid, "web-01", NULL, NULL, NULL) >= 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_store_second_broker_is_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_second_agent_is_refused,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
