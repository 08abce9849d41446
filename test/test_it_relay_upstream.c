/*  =========================================================================
    test_it_relay_upstream - how long gridrelay waits for a silent
    upstream: a broker that stops answering for a few seconds (stopped
    with SIGSTOP, as a broker busy registering thousands of agents reads
    late) keeps a relay of the default upstream_timeout serving its
    agents, while a relay with a short --upstream-timeout drops them and
    has them back once the broker answers again. And the setting itself:
    flag, config key, --print-config, bad values.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>

#include "lib/fixture.h"

#define S_WAIT_MS 40000     //  Generous: the machine may be busy
#define S_STALL_MS 5000     //  Longer than the 3 s the relay once waited

static void
test_it_relay_upstream_busy_broker (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char patient_arg [600], hasty_arg [600];
    const char *broker_extra [] = {
        "--relay-key", fixture_relay_arg (grid, "patient", NULL, patient_arg,
                                          sizeof patient_arg),
        "--relay-key", fixture_relay_arg (grid, "hasty", NULL, hasty_arg,
                                          sizeof hasty_arg),
        NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    int patient = grid_start_relay (grid, "patient", -1, true, NULL);
    const char *hasty_extra [] = {"--upstream-timeout", "2s", NULL};
    int hasty = grid_start_relay (grid, "hasty", -1, true, hasty_extra);
    assert_true (patient >= 0);
    assert_true (hasty >= 0);
    assert_true (fixture_start_agent_via (grid, "calm-01", NULL, patient) >= 0);
    assert_true (fixture_start_agent_via (grid, "rush-01", NULL, hasty) >= 0);
    char patient_log [400], hasty_log [400];
    snprintf (patient_log, sizeof patient_log, "%s/relay-patient.log",
              grid->dir);
    snprintf (hasty_log, sizeof hasty_log, "%s/relay-hasty.log", grid->dir);
    char rush_log [400];
    snprintf (rush_log, sizeof rush_log, "%s/agent-rush-01.log", grid->dir);
    //  The broker lists an agent online before the agent logs its welcome
    assert_true (fixture_wait_file (rush_log, "welcomed by the broker", 1,
                                    S_WAIT_MS));

    //  The broker goes silent (its ZMTP pongs too)
    long long stopped_ms = grid_now_ms ();
    assert_int_equal (kill (grid->broker_pid, SIGSTOP), 0);
    //  The short timeout gives up and drops its agents...
    assert_true (fixture_wait_file (hasty_log, "stopped serving agents", 1,
                                    S_WAIT_MS));
    //  What the logs said until now must not pass for the way back (on a
    //  busy machine an agent may have been welcomed twice already: a
    //  hello that timed out is sent again). No welcome can come while the
    //  broker is stopped, and the relay dropped the connection any late
    //  one would have come on.
    int serving = fixture_file_count (hasty_log, "serving agents on");
    int welcomes = fixture_file_count (rush_log, "welcomed by the broker");
    //  The default one waits the stall out
    long long left = stopped_ms + S_STALL_MS - grid_now_ms ();
    if (left > 0)
        zclock_sleep ((int) left);
    assert_int_equal (kill (grid->broker_pid, SIGCONT), 0);
    assert_false (fixture_file_has (patient_log, "stopped serving agents"));
    assert_false (fixture_file_has (patient_log, "lost the upstream"));

    //  Both relays' agents are online, the dropped one after coming back
    assert_true (grid_wait_node (grid, "calm-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (grid, "rush-01", "online", S_WAIT_MS));
    assert_true (fixture_wait_file (hasty_log, "serving agents on",
                                    serving + 1, S_WAIT_MS));
    //  The dropped agent is welcomed again (the broker may not yet have
    //  noticed it was gone: online alone does not say it is back)
    assert_true (fixture_wait_file (rush_log, "welcomed by the broker",
                                    welcomes + 1, S_WAIT_MS));
    char *id = grid_submit_id (grid,
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: back}}\n");
    assert_non_null (id);
    const pv_t *data = NULL;
    pv_doc_t *record = grid_wait_job (grid, id, S_WAIT_MS);
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (grid_cell (data, 0, "calm-01"), "status",
                              "success"));
    assert_true (grid_str_is (grid_cell (data, 0, "rush-01"), "status",
                              "success"));
    pv_doc_destroy (&record);
    free (id);
    assert_false (fixture_file_has (patient_log, "stopped serving agents"));
}

static void
test_it_relay_upstream_setting (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *out = NULL, *err = NULL;
    //  The default, a flag, and the config key
    assert_int_equal (grid_run (grid, "gridrelay", &out, &err, 10000,
                                "--config", "none", "--print-config", NULL),
                      0);
    assert_true (grid_line_with (out, "upstream_timeout", "15s", NULL));
    free (out);
    free (err);
    assert_int_equal (grid_run (grid, "gridrelay", &out, &err, 10000,
                                "--config", "none", "--upstream-timeout",
                                "40s", "--print-config", NULL), 0);
    assert_true (grid_line_with (out, "upstream_timeout", "40s",
                                 "--upstream-timeout", NULL));
    free (out);
    free (err);
    char path [400];
    snprintf (path, sizeof path, "%s/relay.yaml", grid->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "upstream_timeout: 1m\n");
    fclose (file);
    assert_int_equal (grid_run (grid, "gridrelay", &out, &err, 10000,
                                "--config", path, "--print-config", NULL), 0);
    assert_true (grid_line_with (out, "upstream_timeout", "1m", NULL));
    free (out);
    free (err);
    //  Bad values: a clear error, exit 2
    const char *bad [] = {"1s", "2h", "soon", "-5s"};
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        assert_int_equal (grid_run (grid, "gridrelay", &out, &err, 10000,
                                    "--config", "none", "--upstream-timeout",
                                    bad [index], NULL), 2);
        assert_non_null (strstr (err, "upstream"));
        free (out);
        free (err);
    }
    file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "upstream_timeout: 500ms\n");
    fclose (file);
    assert_int_equal (grid_run (grid, "gridrelay", &out, &err, 10000,
                                "--config", path, NULL), 2);
    assert_non_null (strstr (err, "upstream_timeout: expected 2s to 1h"));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_relay_upstream_setting,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_upstream_busy_broker,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
