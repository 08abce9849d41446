/*  =========================================================================
    test_it_bench - gridbench's swarm of several processes, small: the
    real gridbroker and gridswarm on loopback, run by gridbench

    100 agents over two gridswarm processes: every agent registers, the
    broadcast, single-node and ingest jobs all complete with nothing lost
    or duplicated, and the figures of both processes are summed; the
    drain (the swarm holds its results, the broker is stopped while they
    are released, then resumed) reports a figure and its CPU per result,
    on the swarm's ZMTP transport and on libzmq. Interrupted (SIGINT)
    while the drain has the broker stopped, gridbench resumes it, stops
    everything and exits; a broker killed then ends the run with an error
    that says so. The same
    through two real gridrelays, each swarm process behind one: each relay
    carries its 50 agents (the broker lists them so), and gridsink's
    libzmq figure is there to set the relays' memory beside. A swarm
    whose processes stall (SIGSTOP) for longer than a ZMTP heartbeat
    allows, over and over: every watch is still answered, so every job
    completes. Then the
    options that shape such a run: bad counts and relay counts are refused,
    and a run through relays whose gridrelay is missing says so in its
    results instead of measuring anything. The live output run, small:
    20 agents stream a `test lines` job while echo jobs run on 2 others;
    every byte of every stream is acknowledged, most of it live, and the
    figures are there. No timing is asserted.
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
    //  The drain ran on the same jobs and reports the broker alone
    assert_true (s_number (json, "results_per_s_drain") > 0);
    assert_true (s_number (json, "drain_results") >= 200);
    assert_true (s_number (json, "broker_cpu_drain_us_per_result") > 0);
    assert_true (s_number (json, "swarm_cpu_drain_us_per_result") >= 0);
    assert_true (s_number (json, "drain_unsent_bytes") >= 0);
    //  The table names the processes, and the drain beside its goal
    assert_true (grid_line_with (stdout_text, "the broker alone (drain)",
                                 "over 200000", NULL));
    assert_false (grid_line_with (stdout_text, "the broker alone (drain)",
                                  " - ", NULL));
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
    //  Through relays the results would wait in the relays: no drain
    assert_true (s_number (json, "results_per_s_drain") < 0);
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
                         "--no-agent", "--no-drain", "--broker-arg",
                         "--ack-timeout", "--broker-arg", "10s", "--out",
                         out, NULL);
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
    //  --no-drain: not measured
    assert_true (s_number (json, "results_per_s_drain") < 0);
    free (json);
}

//  The drain with the swarm on libzmq: the results wait in libzmq's
//  queues and the kernel's, and every one is committed once.
static void
test_drain_libzmq (void **state)
{
    char out [400];
    snprintf (out, sizeof out, "%s/drain.json", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--rounds", "1",
                         "--single-s", "0.2", "--ingest-results", "400",
                         "--swarm-transport", "libzmq", "--no-agent",
                         "--out", out, NULL);
    char *json = grid_slurp (out);
    bool clean = code == 0 && !strstr (json, "\"error\"");
    if (!clean)
        fprintf (stderr, "exit %d\n%s\n%s\n%s\n", code, json, stdout_text,
                 stderr_text);
    free (stdout_text);
    free (stderr_text);
    assert_true (clean);
    assert_non_null (strstr (json, "\"swarm_transport\": \"libzmq\""));
    assert_true (s_number (json, "results_per_s_drain") > 0);
    assert_true (s_number (json, "drain_results") == 400);
    assert_true (s_number (json, "broker_cpu_drain_us_per_result") > 0);
    assert_true (s_number (json, "lost_results") == 0);
    assert_true (s_number (json, "duplicate_results") == 0);
    free (json);
}

//  A gridswarm whose wrapper watches the broker (gridbench's other
//  child): once the drain has it stopped, the wrapper runs ACTION (shell:
//  $pid is the real swarm, $bench gridbench, $broker the broker) and
//  writes to REPORT whether the broker runs again within 5 s ("thawed",
//  "gone" or "stuck").
static void
s_write_watching_swarm (const char *path, const char *real,
                        const char *report, const char *action)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file,
             "#!/bin/sh\n"
             "'%s' \"$@\" &\n"
             "pid=$!\n"
             "bench=$PPID\n"
             "trap 'kill -CONT $pid; kill -TERM $pid' TERM INT\n"
             "state () { read -r line < /proc/$1/stat || return 1; "
             "rest=${line##*) }; echo ${rest%%%% *}; }\n"
             "( broker=\n"
             "  for f in /proc/[0-9]*/stat; do\n"
             "    read -r line < $f 2>/dev/null || continue\n"
             "    case \"$line\" in *'(gridbroker) '*)\n"
             "      set -- ${line##*) }\n"
             "      [ \"$2\" = \"$bench\" ] && broker=${line%%%% *};;\n"
             "    esac\n"
             "  done\n"
             "  [ -n \"$broker\" ] || { echo 'no broker' > '%s'; exit 0; }\n"
             "  while s=$(state $broker) && [ \"$s\" != T ]; do "
             "sleep 0.01; done\n"
             "  [ \"$s\" = T ] || { echo gone > '%s'; exit 0; }\n"
             "  %s\n"
             "  result=stuck\n"
             "  for n in $(seq 500); do\n"
             "    s=$(state $broker) || { result=gone; break; }\n"
             "    [ \"$s\" = T ] || { result=thawed; break; }\n"
             "    sleep 0.01\n"
             "  done\n"
             "  echo $result > '%s'\n"
             "  kill -CONT $pid ) &\n"
             "watcher=$!\n"
             "while kill -0 $pid 2>/dev/null; do wait $pid; done\n"
             //  The watcher writes its report once it saw the broker run
             //  again: give it a moment before ending it
             "for n in $(seq 300); do kill -0 $watcher 2>/dev/null || break; "
             "sleep 0.01; done\n"
             "kill $watcher 2>/dev/null\n", real, report, report, action,
             report);
    fclose (file);
    assert_int_equal (chmod (path, 0755), 0);
}

static void
test_drain_interrupted (void **state)
{
    char out [400], swarm [400], real [700], report [400];
    snprintf (out, sizeof out, "%s/interrupted.json", s_grid.dir);
    snprintf (swarm, sizeof swarm, "%s/interrupting-swarm", s_grid.dir);
    snprintf (real, sizeof real, "%s/../test/tools/gridswarm", s_grid.bin);
    snprintf (report, sizeof report, "%s/interrupted.txt", s_grid.dir);
    //  The real swarm stopped too, so that the broker stays stopped
    s_write_watching_swarm (swarm, real, report,
                            "kill -STOP $pid; kill -INT $bench");
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--rounds", "1",
                         "--single-s", "0.2", "--ingest-results", "200",
                         "--swarm", swarm, "--no-agent", "--out", out, NULL);
    //  The watcher may still be writing its report as gridbench ends
    char *text = grid_slurp (report);
    for (int tries = 0; tries < 100 && !*text; tries++) {
        free (text);
        usleep (50 * 1000);
        text = grid_slurp (report);
    }
    bool thawed = strncmp (text, "thawed", 6) == 0;
    if (code != 1 || !thawed)
        fprintf (stderr, "exit %d, broker %s\n%s\n%s\n", code, text,
                 stdout_text, stderr_text);
    //  Interrupted: no results, and the broker was running again before
    //  gridbench stopped it
    assert_int_equal (code, 1);
    assert_non_null (strstr (stderr_text, "interrupted"));
    assert_true (thawed);
    free (text);
    free (stdout_text);
    free (stderr_text);
}

//  The broker killed (SIGKILL) while the drain has it stopped: the run
//  ends with an error that says so, within the suite's time.
static void
test_drain_broker_killed (void **state)
{
    char out [400], swarm [400], real [700], report [400];
    snprintf (out, sizeof out, "%s/killed.json", s_grid.dir);
    snprintf (swarm, sizeof swarm, "%s/killing-swarm", s_grid.dir);
    snprintf (real, sizeof real, "%s/../test/tools/gridswarm", s_grid.bin);
    snprintf (report, sizeof report, "%s/killed.txt", s_grid.dir);
    s_write_watching_swarm (swarm, real, report, "kill -KILL $broker");
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--agents", "100", "--rounds", "1",
                         "--single-s", "0.2", "--ingest-results", "200",
                         "--swarm", swarm, "--no-agent", "--out", out, NULL);
    char *json = grid_slurp (out);
    bool said = strstr (json, "drain: the broker exited") != NULL;
    if (code != 0 || !said)
        fprintf (stderr, "exit %d\n%s\n%s\n%s\n", code, json, stdout_text,
                 stderr_text);
    assert_int_equal (code, 0);
    assert_true (said);
    assert_true (s_number (json, "results_per_s_drain") < 0);
    assert_true (grid_line_with (stdout_text, "drain: the broker exited",
                                 NULL));
    //  The steady figure before it stands
    assert_true (s_number (json, "results_per_s") > 0);
    free (json);
    free (stdout_text);
    free (stderr_text);
}

static void
test_live_output (void **state)
{
    char out [400];
    snprintf (out, sizeof out, "%s/live.json", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--live", "--live-nodes", "20",
                         "--live-others", "2", "--live-s", "2", "--out", out,
                         NULL);
    char *json = grid_slurp (out);
    bool clean = code == 0 && strstr (json, "\"error\": \"\"");
    if (!clean)
        fprintf (stderr, "exit %d\n%s\n%s\n%s\n", code, json, stdout_text,
                 stderr_text);
    assert_true (clean);
    assert_true (s_number (json, "live_nodes") == 20);
    //  201 lines of each of 20 streams, every byte committed
    assert_true (s_number (json, "live_lines") == 201);
    assert_true (s_number (json, "live_bytes_expected") == 20 * 1701);
    assert_true (s_number (json, "live_bytes_acked") == 20 * 1701);
    assert_true (s_number (json, "live_bytes_sent_live") > 0);
    assert_true (s_number (json, "live_pieces_live") > 20);
    assert_true (s_number (json, "live_lost_cells") == 0);
    assert_true (s_number (json, "live_cpu_s_per_mib") > 0);
    assert_true (s_number (json, "live_mib_per_s") > 0);
    assert_true (s_number (json, "live_other_jobs_idle") > 0);
    assert_true (s_number (json, "live_other_jobs_streaming") > 0);
    assert_true (s_number (json, "live_other_p50_ms_idle") > 0);
    assert_true (s_number (json, "live_other_p50_ms_streaming") > 0);
    assert_true (s_number (json, "live_slowdown_ratio") > 0);
    assert_true (grid_line_with (stdout_text, "broker CPU", "per streamed "
                                 "MiB", NULL));
    assert_true (grid_line_with (stdout_text, "slowdown", "goal", NULL));
    free (json);
    free (stdout_text);
    free (stderr_text);
}

static void
test_bad_options (void **state)
{
    const char *cases [][2] = {
        {"--scale-100k", "--agents=1,2,3,4,5,6,7,8"},
        {"--live-nodes", "0"},
        {"--live-interval-ms", "0"},
        {"--live-s", "-1"},
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
        cmocka_unit_test (test_drain_libzmq),
        cmocka_unit_test (test_drain_interrupted),
        cmocka_unit_test (test_drain_broker_killed),
        cmocka_unit_test (test_live_output),
        cmocka_unit_test (test_bad_options),
        cmocka_unit_test (test_missing_relay),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
