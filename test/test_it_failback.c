/*  =========================================================================
    test_it_failback - agents with several endpoints return to the first
    once it is back, and the agents a relay dropped do not come back to
    it in the same moment: through real gridbrokers, gridrelays and
    gridagents on ipc://
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <time.h>

#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_AGENTS 5

//  True when node ID's relay is RELAY.
static bool
s_node_relay_is (grid_t *grid, const char *id, const char *relay)
{
    pv_doc_t *doc = grid_call (grid, "node.get", "node", id, NULL);
    const pv_t *data = NULL;
    bool is = grid_reply_ok (doc, &data) && grid_str_is (data, "relay", relay)
              && grid_str_is (data, "status", "online");
    pv_doc_destroy (&doc);
    return is;
}

//  Waits until every agent web-01.. is online through RELAY.
static bool
s_wait_all_through (grid_t *grid, const char *relay, int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () < deadline) {
        int count = 0;
        for (int index = 1; index <= S_AGENTS; index++) {
            char id [16];
            snprintf (id, sizeof id, "web-%02d", index);
            count += s_node_relay_is (grid, id, relay);
        }
        if (count == S_AGENTS)
            return true;
        zclock_sleep (100);
    }
    return false;
}

//  The wall-clock ms of the last line of agent ID's log that holds TEXT
//  (its RFC 3339 stamp), or -1.
static int64_t
s_log_stamp (grid_t *grid, const char *id, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/agent-%s.log", grid->dir, id);
    char *log = grid_slurp (path);
    if (!log)
        return -1;
    int64_t stamp = -1;
    for (char *line = log; line && *line;) {
        char *end = strchr (line, '\n');
        if (end)
            *end = 0;
        struct tm tm;
        memset (&tm, 0, sizeof tm);
        int millis = 0;
        if (strstr (line, text)
            && sscanf (line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                       &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                       &millis) == 7) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            stamp = (int64_t) timegm (&tm) * 1000 + millis;
        }
        line = end ? end + 1 : NULL;
    }
    free (log);
    return stamp;
}

//  How far apart, in ms, the agents' last lines with TEXT are (fails the
//  test when one has none).
static int64_t
s_spread_ms (grid_t *grid, const char *text)
{
    int64_t first = INT64_MAX, last = 0;
    for (int index = 1; index <= S_AGENTS; index++) {
        char id [16];
        snprintf (id, sizeof id, "web-%02d", index);
        int64_t stamp = s_log_stamp (grid, id, text);
        if (stamp < 0)
            fprintf (stderr, "agent %s never logged '%s'\n", id, text);
        assert_true (stamp >= 0);
        if (stamp < first)
            first = stamp;
        if (stamp > last)
            last = stamp;
    }
    fprintf (stderr, "    '%s': %d agents within %lld ms\n", text, S_AGENTS,
             (long long) (last - first));
    return last - first;
}

//  Agents list r1 then r2. r1 stops: they fail over to r2. r1 comes back:
//  each returns to it after its own failback delay (1 s here, +-20 %), so
//  not all in the same moment, and a job then runs through r1.
static void
test_it_failback_to_the_first_relay (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relays [2];
    fixture_start_relays (grid, &broker, "dc1",
                          (const char *[]) {"r1", "r2", NULL},
                          (const char *[]) {"--offline-grace", "15s", NULL},
                          relays);
    int r1 = relays [0];
    fixture_via_t via;
    const char *timers [] = {"--failover", "1s", "--failback", "1s", NULL};
    const char *const *extra = fixture_via (grid, &via, relays, 2, timers);
    for (int index = 1; index <= S_AGENTS; index++) {
        char id [16];
        snprintf (id, sizeof id, "web-%02d", index);
        assert_true (grid_start_agent (grid, id, "web", NULL, extra) >= 0);
    }
    assert_true (s_wait_all_through (grid, "r1", 15000));
    //  Welcomed on the first endpoint: no failback probes
    assert_int_equal (s_log_stamp (grid, "web-01", "answers again"), -1);

    grid_stop_relay (grid, r1, false);
    assert_true (s_wait_all_through (grid, "r2", 30000));
    //  They lost r1 together; each waited its own share past --failover
    assert_true (s_spread_ms (grid, "ms: trying ") >= 20);
    assert_int_equal (grid_start_relay (grid, "r1", -1, true, NULL), r1);
    assert_true (s_wait_all_through (grid, "r1", 30000));
    assert_true (s_spread_ms (grid, "answers again: going back to it") >= 20);
    char *job = grid_submit_id (grid,
                                "target: {scope: group, value: web}\n"
                                "tasks:\n"
                                "  - {backend: test, action: echo, params: "
                                "{msg: back}}\n");
    assert_non_null (job);
    pv_doc_t *doc = grid_wait_job (grid, job, 30000);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
    free (job);
    //  --failback 0 keeps an agent where it is; less than 1 s is refused
    char *err = NULL;
    int rc = grid_run (grid, "gridagent", NULL, &err, 10000, "--config",
                       "none", "--insecure", "--failback", "500ms",
                       "--print-config", NULL);
    assert_int_not_equal (rc, 0);
    assert_non_null (strstr (err, "failback must be 0 (never) or at least "
                                  "1s"));
    free (err);
}

//  A relay whose upstream goes away drops its agents; when the upstream
//  is back, they do not all reconnect and register in the same moment.
static void
test_it_failback_dropped_agents_come_back_spread (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int r1;
    fixture_start_relays (grid, &broker, "dc1", (const char *[]) {"r1", NULL},
                          NULL, &r1);
    fixture_via_t via;
    const char *debug [] = {"--log-level", "debug", NULL};
    const char *const *extra = fixture_via (grid, &via, &r1, 1, debug);
    for (int index = 1; index <= S_AGENTS; index++) {
        char id [16];
        snprintf (id, sizeof id, "web-%02d", index);
        assert_true (grid_start_agent (grid, id, "web", NULL, extra) >= 0);
    }
    assert_true (s_wait_all_through (grid, "r1", 15000));
    grid_stop_broker (grid, true);
    //  Every agent lost the relay
    long long deadline = grid_now_ms () + 15000;
    bool all_lost = false;
    while (!all_lost && grid_now_ms () < deadline) {
        all_lost = true;
        for (int index = 1; index <= S_AGENTS; index++) {
            char id [16];
            snprintf (id, sizeof id, "web-%02d", index);
            if (s_log_stamp (grid, id, "lost the connection") < 0)
                all_lost = false;
        }
        if (!all_lost)
            zclock_sleep (100);
    }
    assert_true (all_lost);
    assert_int_equal (grid_start_broker (grid, broker.args), 0);
    assert_true (s_wait_all_through (grid, "r1", 30000));
    //  Each finds it again at its own jittered, backed-off reconnect time
    //  (the same for all when agents started in the same second seeded
    //  their jitter alike), and says hello then
    assert_true (s_spread_ms (grid, "connected to ") >= 20);
    s_spread_ms (grid, "welcomed by the broker");
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_failback_to_the_first_relay,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_failback_dropped_agents_come_back_spread, fixture_setup,
            fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
