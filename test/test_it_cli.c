/*  =========================================================================
    test_it_cli - gridcli's newer commands end to end: a real gridbroker
    (CURVE, an admin and a viewer key) and a real gridagent, driven by the
    real gridcli as an operator would type it
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_CLI_MS 20000

static grid_t s_grid;
static char s_viewer [400];      //  Key pair with the viewer role

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0
        || grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL))
        return -1;
    char viewer [500];
    snprintf (viewer, sizeof viewer, "viewer:%s", s_viewer);
    const char *extra [] = {"--client-key", viewer, NULL};
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

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cli_job_run_controls),
        cmocka_unit_test (test_cli_metrics),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
