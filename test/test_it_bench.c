/*  =========================================================================
    test_it_bench - gridbench's swarm of several processes, small: the
    real gridbroker and gridswarm on loopback, run by gridbench

    100 agents over two gridswarm processes: every agent registers, the
    broadcast, single-node and ingest jobs all complete with nothing lost
    or duplicated, and the figures of both processes are summed. The same
    through two real gridrelays, each swarm process behind one: each relay
    carries its 50 agents (the broker lists them so), and gridsink's
    libzmq figure is there to set the relays' memory beside. A swarm
    whose processes stall (SIGSTOP) for longer than a ZMTP heartbeat
    allows, over and over: every watch is still answered, so every job
    completes. Then the
    options that shape such a run: bad counts and relay counts are refused,
    and a run through relays whose gridrelay is missing says so in its
    results instead of measuring anything. No timing is asserted.
    =========================================================================
*/
#include <setjmp.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "lib/harness.h"

#define S_BENCH "../test/tools/gridbench"   //  From the binaries' directory
#define S_RUN_MS 120000

static grid_t s_grid;

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    //  gridbench keeps its own directory under ours
    setenv ("TMPDIR", s_grid.dir, 1);
    return 0;
}

static int
s_teardown (void **state)
{
    unsetenv ("TMPDIR");
    grid_stop (&s_grid);
    return 0;
}

//  The JSON number of KEY in TEXT (the first one), or -1 when it is absent
//  or null.
static double
s_number (const char *text, const char *key)
{
    char quoted [128];
    snprintf (quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = strstr (text, quoted);
    if (!at || strncmp (at + strlen (quoted), "null", 4) == 0)
        return -1;
    return strtod (at + strlen (quoted), NULL);
}

static void
test_two_swarm_processes (void **state)
{
    char out [400];
    snprintf (out, sizeof out, "%s/bench.json", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--swarm-procs", "2",
                         "--rounds", "3", "--single-s", "0.5",
                         "--ingest-results", "200", "--no-agent", "--out",
                         out, NULL);
    if (code != 0)
        fprintf (stderr, "%s\n%s\n", stdout_text, stderr_text);
    assert_int_equal (code, 0);
    char *json = grid_slurp (out);
    if (strstr (json, "\"error\""))
        fprintf (stderr, "%s\n%s\n", json, stderr_text);
    assert_null (strstr (json, "\"error\""));
    assert_true (s_number (json, "agents") == 100);
    assert_true (s_number (json, "swarm_processes") == 2);
    assert_true (s_number (json, "relays") == 0);
    assert_true (s_number (json, "register_s") >= 0);
    assert_true (s_number (json, "broadcast_jobs") == 3);
    assert_true (s_number (json, "broadcast_p50_ms") >= 0);
    assert_true (s_number (json, "single_node_jobs") > 0);
    //  Every broadcast result of both processes was counted: the ingest
    //  jobs reached all 100 agents
    assert_true (s_number (json, "ingest_results") >= 200);
    assert_true (s_number (json, "lost_results") == 0);
    assert_true (s_number (json, "duplicate_results") == 0);
    assert_non_null (strstr (json, "\"load_average_after\": ["));
    //  The table names the processes
    assert_true (grid_line_with (stdout_text, "swarm processes", "2", NULL));
    assert_true (grid_line_with (stdout_text, "lost results", "0", NULL));
    free (json);
    free (stdout_text);
    free (stderr_text);
}

static void
test_through_relays (void **state)
{
    char out [400];
    snprintf (out, sizeof out, "%s/relays.json", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--relays", "2",
                         "--rounds", "3", "--single-s", "0.5",
                         "--ingest-results", "200", "--no-agent", "--out",
                         out, NULL);
    char *json = grid_slurp (out);
    bool clean = code == 0 && !strstr (json, "\"error\"");
    if (!clean)
        fprintf (stderr, "exit %d\n%s\n%s\n%s\n", code, json, stdout_text,
                 stderr_text);
    free (stdout_text);
    free (stderr_text);
    assert_true (clean);
    assert_true (s_number (json, "agents") == 100);
    assert_true (s_number (json, "relays") == 2);
    assert_true (s_number (json, "swarm_processes") == 2);
    assert_true (s_number (json, "register_s") >= 0);
    assert_true (s_number (json, "broadcast_jobs") == 3);
    assert_true (s_number (json, "ingest_results") >= 200);
    assert_true (s_number (json, "lost_results") == 0);
    assert_true (s_number (json, "duplicate_results") == 0);
    assert_true (s_number (json, "libzmq_bytes_per_agent") > 0);
    //  Both relays, each with its half, as the broker's relay.list has it
    const char *relay = strstr (json, "\"relay_memory\"");
    assert_non_null (relay);
    for (int at = 1; at <= 2; at++) {
        char name [32];
        snprintf (name, sizeof name, "\"name\": \"relay-%d\"", at);
        const char *entry = strstr (relay, name);
        assert_non_null (entry);
        assert_true (s_number (entry, "agents") == 50);
        assert_true (s_number (entry, "listed_agents") == 50);
        assert_true (s_number (entry, "rss_registered_kib")
                     > s_number (entry, "rss_base_kib"));
    }
    free (json);
}

//  A gridswarm that stops (SIGSTOP) for 4 s in every 5: its control
//  socket stays silent longer than a ZMTP heartbeat timeout (3 s), as a
//  swarm starved of CPU behind relays does. SIGTERM goes on to it, and
//  the script ends after it. Its agents answer after 1.5 s, so that
//  every job spans a stall.
static void
s_write_stalling_swarm (const char *path, const char *real)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file,
             "#!/bin/sh\n"
             "'%s' \"$@\" &\n"
             "pid=$!\n"
             "trap 'kill -CONT $pid; kill -TERM $pid' TERM INT\n"
             "( while kill -0 $pid 2>/dev/null; do sleep 1; "
             "kill -STOP $pid 2>/dev/null; sleep 4; "
             "kill -CONT $pid 2>/dev/null; done ) &\n"
             "stall=$!\n"
             "while kill -0 $pid 2>/dev/null; do wait $pid; done\n"
             "kill $stall 2>/dev/null\n", real);
    fclose (file);
    assert_int_equal (chmod (path, 0755), 0);
}

static void
test_stalling_swarm (void **state)
{
    char out [400], swarm [400], real [700];
    snprintf (out, sizeof out, "%s/stall.json", s_grid.dir);
    snprintf (swarm, sizeof swarm, "%s/stalling-swarm", s_grid.dir);
    snprintf (real, sizeof real, "%s/../test/tools/gridswarm", s_grid.bin);
    s_write_stalling_swarm (swarm, real);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--swarm-procs", "2",
                         "--swarm", swarm, "--swarm-arg", "--delay-ms",
                         "--swarm-arg", "1500", "--rounds", "2",
                         "--single-s", "0.5", "--ingest-results", "200",
                         "--no-agent", "--broker-arg", "--ack-timeout",
                         "--broker-arg", "10s", "--out", out, NULL);
    char *json = grid_slurp (out);
    bool clean = code == 0 && !strstr (json, "\"error\"");
    if (!clean)
        fprintf (stderr, "exit %d\n%s\n%s\n%s\n", code, json, stdout_text,
                 stderr_text);
    free (stdout_text);
    free (stderr_text);
    assert_true (clean);
    assert_true (s_number (json, "broadcast_jobs") == 2);
    assert_true (s_number (json, "single_node_jobs") > 0);
    assert_true (s_number (json, "ingest_results") >= 200);
    assert_true (s_number (json, "lost_results") == 0);
    assert_true (s_number (json, "duplicate_results") == 0);
    free (json);
}

static void
test_bad_options (void **state)
{
    const char *cases [][2] = {
        {"--relays", "17"},
        {"--relays", "-1"},
        {"--relays", "two"},
        {"--swarm-procs", "x"},
        {"--agents", "0"},
    };
    for (size_t at = 0; at < sizeof cases / sizeof cases [0]; at++) {
        char *stdout_text = NULL, *stderr_text = NULL;
        int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                             10000, cases [at][0], cases [at][1], NULL);
        bool named = strstr (stderr_text, "gridbench") != NULL;
        if (code != 2 || !named)
            fprintf (stderr, "%s %s: exit %d\n%s", cases [at][0],
                     cases [at][1], code, stderr_text);
        free (stdout_text);
        free (stderr_text);
        assert_int_equal (code, 2);
        assert_true (named);
    }
}

static void
test_missing_relay (void **state)
{
    char out [400], relay [400];
    snprintf (out, sizeof out, "%s/relay.json", s_grid.dir);
    snprintf (relay, sizeof relay, "%s/no-such-gridrelay", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--relays", "2",
                         "--relay", relay, "--no-agent", "--out", out, NULL);
    assert_int_equal (code, 0);
    char *json = grid_slurp (out);
    assert_true (s_number (json, "relays") == 2);
    assert_true (s_number (json, "register_s") < 0);
    assert_non_null (strstr (json, "no-such-gridrelay"));
    assert_true (grid_line_with (stdout_text, "registered in under", "not "
                                 "measured", NULL));
    free (json);
    free (stdout_text);
    free (stderr_text);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_two_swarm_processes),
        cmocka_unit_test (test_through_relays),
        cmocka_unit_test (test_stalling_swarm),
        cmocka_unit_test (test_bad_options),
        cmocka_unit_test (test_missing_relay),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
