/*  =========================================================================
    test_it_claims - any-node work end to end: claims by load, leases and
    reclaims, waiting steps (docs/SCHEDULING.md R17-R20) through a real
    gridbroker, real gridagents and the real gridcli over ipc://.

    The fleet: web-01, web-02 and web-03 in group x, two executor slots
    each. The broker hears heartbeats every 200 ms and calls a node
    offline after three missed ones, so a SIGKILLed agent is noticed in
    well under a second. Nothing waits a fixed time: `test sleep` jobs
    hold slots until the test cancels them, and every check polls with a
    deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen
#define S_NODES 3

static grid_t s_grid;
static const char *s_ids [S_NODES] = {"web-01", "web-02", "web-03"};

static int
s_setup (void **state)
{
    const char *broker [] = {"--heartbeat", "200ms", "--missed-heartbeats",
                             "3", "--offline-grace", "30s", NULL};
    const char *agent [] = {"--concurrency", "2", NULL};
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, broker) != 0)
        return -1;
    for (size_t index = 0; index < S_NODES; index++)
        if (grid_start_agent (&s_grid, s_ids [index], "x", NULL, agent) < 0)
            return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

static const pv_t *
s_data (pv_doc_t *doc)
{
    const pv_t *data = NULL;
    if (!grid_reply_ok (doc, &data) && doc) {
        pv_write_json (pv_doc_root (doc), stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_reply_ok (doc, &data));
    return data;
}

//  Submits an any:group:x `test sleep` of SECONDS; returns its id.
static char *
s_submit_sleep (int seconds, int priority)
{
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "target: any:group:x\n"
              "priority: %d\n"
              "tasks:\n"
              "  - backend: test\n"
              "    action: sleep\n"
              "    params: {seconds: %d, msg: done}\n",
              priority, seconds);
    char *id = grid_submit_id (&s_grid, yaml);
    assert_non_null (id);
    return id;
}

//  The node holding job ID's only column and the status of its step 0
//  cell, as job.get shows them (empty strings when not yet known).
static void
s_holder (const char *id, char *node, size_t node_len, char *status,
          size_t status_len, char *waiting, size_t waiting_len)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", id, NULL);
    const pv_t *record = s_data (doc);
    const pv_t *expected = pv_map_get (record, "expected");
    *node = *status = '\0';
    if (waiting)
        *waiting = '\0';
    if (pv_size (expected) == 1) {
        size_t len = 0;
        const char *text = pv_str (pv_array_at (expected, 0), &len);
        snprintf (node, node_len, "%.*s", (int) len, text);
        const pv_t *cell = grid_cell (record, 0, node);
        const char *value = pv_str (pv_map_get (cell, "status"), &len);
        if (value)
            snprintf (status, status_len, "%.*s", (int) len, value);
        value = pv_str (pv_map_get (cell, "waiting"), &len);
        if (value && waiting)
            snprintf (waiting, waiting_len, "%.*s", (int) len, value);
    }
    pv_doc_destroy (&doc);
}

//  Waits until job ID's step 0 cell reads STATUS; fills NODE.
static bool
s_wait_cell (const char *id, const char *want, char *node, size_t node_len)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char status [32];
    while (grid_now_ms () < deadline) {
        s_holder (id, node, node_len, status, sizeof status, NULL, 0);
        if (strcmp (status, want) == 0)
            return true;
        zclock_sleep (20);
    }
    return false;
}

static int64_t
s_queue_counter (const char *name)
{
    pv_doc_t *doc = grid_call (&s_grid, "status", NULL);
    int64_t value = -1;
    pv_get_int (pv_map_get (pv_map_get (s_data (doc), "queue"), name), &value);
    pv_doc_destroy (&doc);
    return value;
}

static void
s_cancel (const char *id)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.cancel", "job", id, NULL);
    pv_doc_destroy (&doc);
}

//  Any-node steps spread by load: three nodes of two slots take six long
//  steps two each, whatever order they come in; the seventh waits,
//  pending, and says why; it starts where a slot frees.
static void
test_it_claims_spread_by_load (void **state)
{
    char *ids [7];
    size_t per_node [S_NODES] = {0};
    char node [80], status [32], waiting [256];
    for (size_t index = 0; index < 6; index++) {
        ids [index] = s_submit_sleep (600, 0);
        assert_true (s_wait_cell (ids [index], "running", node, sizeof node));
        for (size_t at = 0; at < S_NODES; at++)
            if (strcmp (node, s_ids [at]) == 0)
                per_node [at]++;
    }
    for (size_t at = 0; at < S_NODES; at++)
        assert_int_equal (per_node [at], 2);
    ids [6] = s_submit_sleep (1, 5);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (true) {
        s_holder (ids [6], node, sizeof node, status, sizeof status, waiting,
                  sizeof waiting);
        if (*waiting || grid_now_ms () > deadline)
            break;
        zclock_sleep (20);
    }
    assert_string_equal (status, "pending");
    assert_string_equal (waiting, "waiting: no free slot on any:group:x (3 "
                                  "of 3 nodes busy)");
    assert_true (s_queue_counter ("waiting") >= 1);
    //  The CLI shows why it waits
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job",
                                "status", ids [6], NULL),
                      0);
    assert_non_null (strstr (out, "waiting: no free slot"));
    free (out);
    free (err);
    //  A slot frees on the node of the first job: the waiting step goes
    //  there and finishes
    char first [80];
    s_holder (ids [0], first, sizeof first, status, sizeof status, NULL, 0);
    s_cancel (ids [0]);
    pv_doc_t *doc = grid_wait_job (&s_grid, ids [6], S_WAIT_MS);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    char *holder = pv_strdup (pv_array_at (pv_map_get (record, "expected"), 0));
    assert_non_null (holder);
    assert_string_equal (holder, first);
    free (holder);
    pv_doc_destroy (&doc);
    for (size_t index = 0; index < 7; index++) {
        s_cancel (ids [index]);
        free (ids [index]);
    }
    assert_true (s_queue_counter ("claims") >= 7);
}

//  The holder is SIGKILLed mid-lease: the broker reclaims the step as
//  soon as the node is offline, gives it to another node of the set, and
//  the step finishes there exactly once; events and history say so.
static void
test_it_claims_reclaim_after_kill (void **state)
{
    int64_t reclaims = s_queue_counter ("reclaims");
    char *id = s_submit_sleep (1, 0);
    char holder [80];
    assert_true (s_wait_cell (id, "running", holder, sizeof holder));
    int slot = -1;
    for (size_t index = 0; index < s_grid.agent_count; index++)
        if (strcmp (s_grid.agent_ids [index], holder) == 0)
            slot = (int) index;
    assert_true (slot >= 0);
    grid_stop_agent (&s_grid, slot, true);
    pv_doc_t *doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    if (!grid_str_is (record, "status", "completed")) {
        pv_write_json (record, stderr, 2);
        grid_dump_logs (&s_grid);
    }
    assert_true (grid_str_is (record, "status", "completed"));
    char *now = pv_strdup (pv_array_at (pv_map_get (record, "expected"), 0));
    assert_non_null (now);
    assert_string_not_equal (now, holder);
    const pv_t *cell = grid_cell (record, 0, now);
    assert_true (grid_str_is (cell, "status", "success"));
    //  Exactly one success: the history holds the reclaimed attempt only
    const pv_t *history = pv_map_get (cell, "history");
    assert_int_equal (pv_size (history), 1);
    assert_true (grid_str_is (pv_array_at (history, 0), "status", "lost"));
    assert_true (grid_str_is (pv_array_at (history, 0), "node", holder));
    int64_t attempts = 0;
    pv_get_int (pv_map_get (cell, "attempts"), &attempts);
    assert_int_equal (attempts, 2);          //  It had started: a new attempt
    pv_doc_destroy (&doc);
    //  The events name both nodes
    doc = grid_call (&s_grid, "job.events", "job", id, NULL);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    char want [256];
    snprintf (want, sizeof want,
              "reclaimed from %s (node offline) \xe2\x86\x92 %s", holder, now);
    bool seen = false;
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *event = pv_array_at (events, index);
        if (grid_str_is (event, "event", "reclaimed")
            && grid_str_is (event, "detail", want)
            && grid_str_is (event, "node", holder))
            seen = true;
    }
    assert_true (seen);
    pv_doc_destroy (&doc);
    assert_int_equal (s_queue_counter ("reclaims"), reclaims + 1);
    free (now);
    free (id);
}

//  Starts GRID: a broker whose config file holds LIMITS (YAML), and two
//  agents lim-01 and lim-02 in group lim.
static void
s_start_limited (grid_t *grid, const char *limits)
{
    assert_int_equal (grid_init (grid), 0);
    char path [400];
    snprintf (path, sizeof path, "%s/limits.yaml", grid->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (limits, file);
    fclose (file);
    const char *broker [] = {"--config", path, NULL};
    assert_int_equal (grid_start_broker (grid, broker), 0);
    assert_true (grid_start_agent (grid, "lim-01", "lim", NULL, NULL) >= 0);
    assert_true (grid_start_agent (grid, "lim-02", "lim", NULL, NULL) >= 0);
}

//  A broker limit holds cells pending, with the reason, and lets them go
//  as slots free: a broadcast of `test sleep` under `test.sleep: 1` runs
//  on one node at a time and completes everywhere.
static void
test_it_claims_limit_holds_cells (void **state)
{
    grid_t grid;
    s_start_limited (&grid, "limits:\n  test.sleep: 1\n  per_node:\n"
                            "    apt.*: 1\n");
    char *id = grid_submit_id (&grid,
                               "target: group:lim\n"
                               "tasks:\n"
                               "  - backend: test\n"
                               "    action: sleep\n"
                               "    params: {seconds: 1}\n");
    assert_non_null (id);
    //  While one node sleeps, the other waits and says why
    bool seen = false;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (!seen && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&grid, "job.get", "job", id, NULL);
        const pv_t *record = s_data (doc);
        for (int node = 0; node < 2; node++) {
            const pv_t *cell = grid_cell (record, 0, node ? "lim-02" : "lim-01");
            if (grid_str_is (cell, "status", "pending")
                && grid_str_is (cell, "waiting",
                                "waiting: test.sleep 1/1 running"))
                seen = true;
        }
        pv_doc_destroy (&doc);
        if (!seen)
            zclock_sleep (20);
    }
    assert_true (seen);
    pv_doc_t *doc = grid_wait_job (&grid, id, S_WAIT_MS);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    free (id);
    grid_stop (&grid);
}

//  queue.stats under a per-node limit: the figure to hold against MAX is
//  the busiest node's (the fleet-wide sum is its own column), and cells
//  held by a limit are limit_waiting, not any-node steps waiting for a
//  free node.
static void
test_it_claims_queue_stats_per_node_limit (void **state)
{
    grid_t grid;
    s_start_limited (&grid, "limits:\n  per_node:\n    test.sleep: 1\n");
    const char *spec = "target: group:lim\n"
                       "tasks: [{backend: test, action: sleep, params: "
                       "{seconds: 3}}]\n";
    char *first = grid_submit_id (&grid, spec);
    char *second = grid_submit_id (&grid, spec);
    assert_non_null (first);
    assert_non_null (second);
    //  The first runs on both nodes, the second waits on both
    bool seen = false;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    pv_doc_t *doc = NULL;
    const pv_t *data = NULL;
    while (!seen && grid_now_ms () < deadline) {
        doc = grid_call (&grid, "queue.stats", NULL);
        data = s_data (doc);
        int64_t waiting = 0;
        pv_get_int (pv_map_get (data, "limit_waiting"), &waiting);
        const pv_t *limit = pv_array_at (pv_map_get (data, "limits"), 0);
        int64_t running = 0;
        pv_get_int (pv_map_get (limit, "running"), &running);
        seen = waiting == 2 && running == 2;
        if (!seen) {
            pv_doc_destroy (&doc);
            zclock_sleep (20);
        }
    }
    assert_true (seen);
    const pv_t *limit = pv_array_at (pv_map_get (data, "limits"), 0);
    int64_t busiest = 0, max = 0, any_waiting = -1;
    pv_get_int (pv_map_get (limit, "busiest"), &busiest);
    pv_get_int (pv_map_get (limit, "max"), &max);
    assert_int_equal (busiest, 1);
    assert_int_equal (max, 1);
    assert_true (grid_str_is (limit, "busiest_node", "lim-01"));
    pv_get_int (pv_map_get (pv_map_get (data, "any_node"), "waiting"),
                &any_waiting);
    assert_int_equal (any_waiting, 0);
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&grid, &out, &err, S_WAIT_MS, "queue",
                                "stats", NULL),
                      0);
    assert_true (grid_line_with (out, "test.sleep", "per node", "1 on lim-01",
                                 NULL));
    assert_true (grid_line_with (out, "RUNNING", "MAX", "TOTAL", NULL));
    assert_true (grid_line_with (out, "limit_waiting", "2", NULL));
    assert_true (grid_line_with (out, "any_node", "0 waiting", NULL));
    free (out);
    free (err);
    for (int index = 0; index < 2; index++) {
        doc = grid_wait_job (&grid, index ? second : first, S_WAIT_MS);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        pv_doc_destroy (&doc);
    }
    free (first);
    free (second);
    grid_stop (&grid);
}

//  A running `test sleep` reports its progress: job.progress lists the
//  task with its percent and message, gridcli job status prints it, and
//  the event log has one progress event (the kind changed once).
static void
test_it_claims_progress_while_sleeping (void **state)
{
    char *id = s_submit_sleep (3, 0);
    bool seen = false;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char node [80] = "";
    while (!seen && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "job.progress", "job", id, NULL);
        const pv_t *tasks = pv_map_get (s_data (doc), "tasks");
        if (pv_size (tasks) == 1) {
            const pv_t *task = pv_array_at (tasks, 0);
            int64_t percent = -1;
            pv_get_int (pv_map_get (task, "percent"), &percent);
            char *message = pv_strdup (pv_map_get (task, "message"));
            char *kind = pv_strdup (pv_map_get (task, "kind"));
            char *at = pv_strdup (pv_map_get (task, "node"));
            if (percent > 0 && percent < 100 && message && kind
                && strcmp (kind, "sleeping") == 0
                && strncmp (message, "sleeping ", 9) == 0 && at) {
                seen = true;
                snprintf (node, sizeof node, "%s", at);
            }
            free (message);
            free (kind);
            free (at);
        }
        pv_doc_destroy (&doc);
        if (!seen)
            zclock_sleep (50);
    }
    assert_true (seen);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job",
                                "status", id, NULL),
                      0);
    char want [120];
    snprintf (want, sizeof want, "progress  %s ", node);
    assert_non_null (strstr (out, want));
    assert_non_null (strstr (out, "% sleeping "));
    free (out);
    free (err);
    pv_doc_t *doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.events", "job", id, NULL);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    size_t progress = 0;
    for (size_t index = 0; index < pv_size (events); index++)
        if (grid_str_is (pv_array_at (events, index), "event", "progress"))
            progress++;
    assert_int_equal (progress, 1);
    pv_doc_destroy (&doc);
    free (id);
    //  The --wait line shows it too
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                                "--target", "any:group:x", "--wait", "test",
                                "sleep", "--seconds", "3", NULL),
                      0);
    assert_non_null (strstr (err, "% sleeping "));
    free (out);
    free (err);
}

//  stall_timeout: a running task the broker hears nothing of for that
//  long is a timeout. The agent reports a `test sleep` once a second, so
//  a 300ms stall_timeout runs out between two reports.
static void
test_it_claims_stall_timeout (void **state)
{
    char *id = grid_submit_id (&s_grid,
                               "target: any:group:x\n"
                               "stall_timeout: 300ms\n"
                               "tasks:\n"
                               "  - backend: test\n"
                               "    action: sleep\n"
                               "    params: {seconds: 30}\n");
    assert_non_null (id);
    pv_doc_t *doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "failed"));
    char *node = pv_strdup (pv_array_at (pv_map_get (record, "expected"), 0));
    assert_non_null (node);
    const pv_t *cell = grid_cell (record, 0, node);
    assert_true (grid_str_is (cell, "status", "timeout"));
    assert_true (grid_str_is (cell, "error",
                              "no progress for 300ms (stall_timeout)"));
    free (node);
    pv_doc_destroy (&doc);
    free (id);
}

//  A broker-side timeout cancels that attempt only: the agent must not
//  take it for a cancel of the job, so the retry on the same node runs
//  (and stalls again) instead of ending "cancelled before this step
//  started".
static void
test_it_claims_stall_cancel_keeps_job (void **state)
{
    const char *node = NULL;
    for (size_t index = 0; !node && index < S_NODES; index++)
        if (grid_wait_node (&s_grid, s_ids [index], "online", 0))
            node = s_ids [index];
    assert_non_null (node);
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "target: node:%s\n"
              "stall_timeout: 300ms\n"
              "tasks:\n"
              "  - backend: test\n"
              "    action: sleep\n"
              "    max_retries: 1\n"
              "    params: {seconds: 30}\n", node);
    char *id = grid_submit_id (&s_grid, yaml);
    assert_non_null (id);
    pv_doc_t *doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    const pv_t *cell = grid_cell (record, 0, node);
    if (!grid_str_is (cell, "status", "timeout")) {
        pv_write_json (record, stderr, 2);
        grid_dump_logs (&s_grid);
    }
    assert_true (grid_str_is (cell, "status", "timeout"));
    assert_true (grid_str_is (cell, "error",
                              "no progress for 300ms (stall_timeout)"));
    int64_t attempts = 0;
    pv_get_int (pv_map_get (cell, "attempts"), &attempts);
    assert_int_equal (attempts, 2);
    pv_doc_destroy (&doc);
    free (id);
}

//  A lease the heartbeats cannot renew is refused at submit, with the
//  bound (twice the broker's 200ms heartbeat).
static void
test_it_claims_short_lease_refused (void **state)
{
    pv_doc_t *doc = grid_submit (&s_grid,
                                 "target: any:group:x\n"
                                 "lease_ms: 300\n"
                                 "tasks:\n"
                                 "  - backend: test\n"
                                 "    action: echo\n"
                                 "    params: {msg: hi}\n");
    assert_false (grid_reply_ok (doc, NULL));
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                       "--target", "any:group:x", "--lease", "300ms", "test",
                       "echo", "--msg", "hi", NULL);
    assert_int_not_equal (rc, 0);
    if (!strstr (err, "lease_ms: 300ms is shorter than the agents' "
                      "heartbeats can renew (at least 400ms"))
        fprintf (stderr, "%s", err);
    assert_non_null (strstr (err, "lease_ms: 300ms is shorter than the "
                                  "agents' heartbeats can renew (at least "
                                  "400ms"));
    free (out);
    free (err);
    //  At the bound it is taken
    char *id = grid_submit_id (&s_grid,
                               "target: any:group:x\n"
                               "lease_ms: 400\n"
                               "tasks:\n"
                               "  - backend: test\n"
                               "    action: echo\n"
                               "    params: {msg: hi}\n");
    assert_non_null (id);
    doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    free (id);
}

//  Two nodes, a step bounced A -> B -> A: each reclaim cancels the attempt
//  it takes back, never the job, so the attempt that comes back to A runs
//  there and succeeds.
static void
test_it_claims_reclaim_comes_back (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    const char *broker [] = {"--heartbeat", "200ms", "--missed-heartbeats",
                             "3", "--offline-grace", "30s", NULL};
    assert_int_equal (grid_start_broker (&grid, broker), 0);
    assert_true (grid_start_agent (&grid, "rc-01", "rc", NULL, NULL) >= 0);
    assert_true (grid_start_agent (&grid, "rc-02", "rc", NULL, NULL) >= 0);
    char *id = grid_submit_id (&grid,
                               "target: any:group:rc\n"
                               "tasks:\n"
                               "  - backend: test\n"
                               "    action: sleep\n"
                               "    max_retries: 3\n"
                               "    params: {seconds: 2}\n");
    assert_non_null (id);
    //  Runs on A; A freezes, the step goes to B
    char first [80], now [80];
    *first = '\0';
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&grid, "job.get", "job", id, NULL);
        const pv_t *record = s_data (doc);
        size_t len = 0;
        const char *text = pv_str (pv_array_at (pv_map_get (record,
                                                            "expected"), 0),
                                   &len);
        snprintf (first, sizeof first, "%.*s", text ? (int) len : 0,
                  text ? text : "");
        const pv_t *cell = *first ? grid_cell (record, 0, first) : NULL;
        bool running = cell && grid_str_is (cell, "status", "running");
        if (!running)
            *first = '\0';
        pv_doc_destroy (&doc);
        if (running)
            break;
        zclock_sleep (20);
    }
    assert_true (*first);
    int a = strcmp (first, "rc-01") == 0 ? 0 : 1;
    kill (grid.agent_pids [a], SIGSTOP);
    //  Wait for the other node to run it
    bool moved = false;
    deadline = grid_now_ms () + S_WAIT_MS;
    while (!moved && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&grid, "job.get", "job", id, NULL);
        const pv_t *record = s_data (doc);
        size_t len = 0;
        const char *text = pv_str (pv_array_at (pv_map_get (record,
                                                            "expected"), 0),
                                   &len);
        snprintf (now, sizeof now, "%.*s", text ? (int) len : 0,
                  text ? text : "");
        const pv_t *cell = grid_cell (record, 0, now);
        moved = strcmp (now, first) != 0 && cell
                && grid_str_is (cell, "status", "running");
        pv_doc_destroy (&doc);
        if (!moved)
            zclock_sleep (20);
    }
    assert_true (moved);
    //  A thaws (and hears the cancel of its attempt); then B freezes and
    //  the step comes back to A
    kill (grid.agent_pids [a], SIGCONT);
    assert_true (grid_wait_node (&grid, first, "online", S_WAIT_MS));
    kill (grid.agent_pids [1 - a], SIGSTOP);
    pv_doc_t *doc = grid_wait_job (&grid, id, S_WAIT_MS);
    kill (grid.agent_pids [1 - a], SIGCONT);
    const pv_t *record = s_data (doc);
    if (!grid_str_is (record, "status", "completed")) {
        pv_write_json (record, stderr, 2);
        grid_dump_logs (&grid);
    }
    assert_true (grid_str_is (record, "status", "completed"));
    const pv_t *cell = grid_cell (record, 0, first);
    assert_non_null (cell);
    assert_true (grid_str_is (cell, "status", "success"));
    pv_doc_destroy (&doc);
    free (id);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_claims_spread_by_load),
        cmocka_unit_test (test_it_claims_reclaim_after_kill),
        cmocka_unit_test (test_it_claims_progress_while_sleeping),
        cmocka_unit_test (test_it_claims_stall_timeout),
        cmocka_unit_test (test_it_claims_stall_cancel_keeps_job),
        cmocka_unit_test (test_it_claims_short_lease_refused),
        cmocka_unit_test (test_it_claims_reclaim_comes_back),
        cmocka_unit_test (test_it_claims_limit_holds_cells),
        cmocka_unit_test (test_it_claims_queue_stats_per_node_limit),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
