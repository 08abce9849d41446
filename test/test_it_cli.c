/*  =========================================================================
    test_it_cli - gridcli's newer commands end to end: a real gridbroker
    (CURVE, an admin and a viewer key, an enrolled relay), a real gridagent
    and a real gridrelay, driven by the real gridcli as an operator would
    type it
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

#define S_CLI_MS 20000

static grid_t s_grid;
static char s_viewer [400];      //  Key pair with the viewer role
static char s_relay_key [400];   //  Relay r1's key pair

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0
        || grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL))
        return -1;
    char viewer [500], relay [500];
    snprintf (viewer, sizeof viewer, "viewer:%s", s_viewer);
    if (grid_relay_keygen (&s_grid, "r1", s_relay_key, sizeof s_relay_key,
                           NULL))
        return -1;
    //  Relay r1, of pool dc1, is enrolled (started by the relay test)
    snprintf (relay, sizeof relay, "r1@dc1:%s", s_relay_key);
    const char *extra [] = {"--client-key", viewer, "--relay-key", relay,
                            NULL};
    if (grid_start_broker (&s_grid, extra) != 0
        || grid_start_agent (&s_grid, "c-01", "web", NULL, NULL) < 0) {
        grid_dump_logs (&s_grid);
        return -1;
    }
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  job run --limits, --lease, --stall-timeout: the broker takes them and
//  the job runs; a bad value never leaves gridcli
static void
test_cli_job_run_controls (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "run",
                       "--target", "any:group:web", "--limits",
                       "test.*=1,apt.install=2", "--lease", "5s",
                       "--stall-timeout", "1m", "--wait", "test", "echo",
                       "--msg", "controlled", NULL);
    if (rc != 0)
        fprintf (stderr, "out: %s\nerr: %s\n", out, err);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (out, "c-01", "success", "controlled", NULL));
    //  "job j-... completed": the job's id
    const char *line = strstr (out, "\njob j-");
    assert_non_null (line);
    char job [64];
    assert_int_equal (sscanf (line + 5, "%63s", job), 1);
    free (out);
    free (err);

    //  job output of a node the job does not have: refused (exit 4), and
    //  the error names the job's nodes
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "output", job,
                   "--node", "nosuch", NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "node nosuch is not a node of job"));
    assert_non_null (strstr (err, "c-01"));
    free (out);
    free (err);

    //  The broker keeps them with the job
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                   "status", job, NULL);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "\"lease_ms\": 5000"));
    assert_non_null (strstr (out, "\"stall_timeout\": \"1m\""));
    assert_non_null (strstr (out, "\"test.*\": 1"));
    assert_non_null (strstr (out, "\"apt.install\": 2"));
    free (out);
    free (err);

    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                   "all", "--limits", "test=1", "test", "echo", NULL);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (err, "--limits"));
    free (out);
    free (err);
}

//  gridcli metrics: the Prometheus text of metrics.get, for a viewer too
static void
test_cli_metrics (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli_as (&s_grid, s_viewer, &out, &err, S_CLI_MS, "metrics",
                          NULL);
    if (rc != 0)
        fprintf (stderr, "err: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "# TYPE grid_"));
    //  One registered node, online
    assert_true (grid_line_with (out, "grid_nodes", "online", NULL));
    //  Plain text: nothing but printable characters, tabs and line breaks
    for (const char *cursor = out; *cursor; cursor++)
        assert_true ((unsigned char) *cursor >= 0x20 || *cursor == '\n'
                     || *cursor == '\t');
    assert_int_equal (out [strlen (out) - 1], '\n');
    free (out);
    free (err);

    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "--output", "json",
                   "metrics", NULL);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "\"text\": \"# HELP"));
    free (out);
    free (err);
}

//  gridcli with a wrong broker public key (another key's public file):
//  the broker cannot read its hello and closes the connection; gridcli
//  gives up after --request-timeout, exit 3, and says which key to check
static void
test_cli_wrong_broker_key (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "--broker-key",
                       s_viewer, "--request-timeout", "2s", "status", NULL);
    assert_int_equal (rc, 3);
    assert_non_null (strstr (err, "no handshake went through"));
    assert_non_null (strstr (err, "--broker-key"));
    assert_null (strstr (err, "retrying"));
    free (out);
    free (err);
    //  The right key: answered
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "status", NULL);
    assert_int_equal (rc, 0);
    free (out);
    free (err);
}

//  gridcli relay list: a relay while it runs and after it stopped; its
//  key in key list
static void
test_cli_relays (void **state)
{
    char *out = NULL, *err = NULL;
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (s_relay_key, key, why, sizeof why),
                      0);
    int relay = grid_start_relay (&s_grid, "r1", -1, true, NULL);
    assert_true (relay >= 0);
    //  Connected once it has been heard from
    bool seen = false;
    long long deadline = grid_now_ms () + 15000;
    while (!seen && grid_now_ms () < deadline) {
        assert_int_equal (grid_cli_as (&s_grid, s_viewer, &out, &err,
                                       S_CLI_MS, "relay", "list", NULL), 0);
        seen = grid_line_with (out, "r1", key, "yes", NULL);
        if (!seen)
            zclock_sleep (100);
        if (seen) {
            assert_true (grid_line_with (out, "NAME", "KEY", "AGENTS",
                                         "CONNECTED", "LAST-SEEN", NULL));
            //  No row marked: it is connected
            assert_null (strstr (out, "\n! "));
        }
        free (out);
        free (err);
    }
    assert_true (seen);
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_CLI_MS, "--output",
                                "json", "relay", "list", NULL), 0);
    assert_non_null (strstr (out, "\"connected\": true"));
    free (out);
    free (err);
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_CLI_MS, "key", "list",
                                NULL), 0);
    assert_true (grid_line_with (out, key, "relay", "accepted", "dc1", "r1",
                                 NULL));
    free (out);
    free (err);

    //  Stopped: not connected, marked
    grid_stop_relay (&s_grid, relay, true);
    bool gone = false;
    deadline = grid_now_ms () + 15000;
    while (!gone && grid_now_ms () < deadline) {
        assert_int_equal (grid_cli (&s_grid, &out, &err, S_CLI_MS, "relay",
                                    "list", NULL), 0);
        gone = grid_line_with (out, "! r1", key, "no", NULL);
        if (!gone)
            zclock_sleep (100);
        free (out);
        free (err);
    }
    assert_true (gone);
}

//  gridcli token add, list, revoke: the token is shown once, never listed,
//  and refused once revoked; only an admin manages tokens
static void
test_cli_tokens (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "add", "ci",
                       "--role", "operator", NULL);
    if (rc != 0)
        fprintf (stderr, "err: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "token ci added (role operator"));
    assert_non_null (strstr (out, "cannot show it again"));
    //  The token is the indented line after the first blank one
    const char *line = strstr (out, "\n\n  ");
    assert_non_null (line);
    char token [256];
    assert_int_equal (sscanf (line + 4, "%255s", token), 1);
    assert_true (strlen (token) >= 20);
    free (out);
    free (err);

    //  Listed by name and role, never by value
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "list", NULL);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (out, "NAME", "ROLE", "CREATED", "LAST-USED",
                                 NULL));
    assert_true (grid_line_with (out, "ci", "operator", NULL));
    assert_null (strstr (out, token));
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "--output", "json", "token",
                   "list", NULL);
    assert_int_equal (rc, 0);
    assert_null (strstr (out, token));
    free (out);
    free (err);

    //  The name is taken
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "add", "ci",
                   "--role", "viewer", NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "conflict"));
    free (out);
    free (err);

    //  A viewer may not manage tokens
    rc = grid_cli_as (&s_grid, s_viewer, &out, &err, S_CLI_MS, "token",
                      "list", NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "forbidden"));
    free (out);
    free (err);

    //  Revoked: gone from the list; a second revoke finds nothing
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "revoke", "ci",
                   NULL);
    assert_int_equal (rc, 0);
    assert_string_equal (out, "token ci revoked\n");
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "list", NULL);
    assert_int_equal (rc, 0);
    assert_false (grid_line_with (out, "ci", "operator", NULL));
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "token", "revoke", "ci",
                   NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "not_found"));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cli_job_run_controls),
        cmocka_unit_test (test_cli_metrics),
        cmocka_unit_test (test_cli_wrong_broker_key),
        cmocka_unit_test (test_cli_relays),
        cmocka_unit_test (test_cli_tokens),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
