/*  =========================================================================
    test_it_delivery - nothing lost: broker and agent crashes, slow
    joiners, stopped agents, drains, a full store, and a crash loop, with
    the real programs over ipc://.

    Every test asserts exactly one final result per (step, node) and the
    precise reason for each non-success.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>

#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_WAIT_MS 20000     //  Deadline for anything that should happen
//  The statuses of a cell whose work an agent has
#define S_BUSY "running|acknowledged"

static void
s_start_fleet (grid_t *grid, const char *const *broker_extra)
{
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    assert_true (grid_start_agent (grid, "web-02", "web", NULL, NULL) >= 0);
    assert_true (grid_start_agent (grid, "db-01", "db", NULL, NULL) >= 0);
}

static const char *s_two_barriers =
    "target: all\n"
    "tasks:\n"
    "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
    "  - {backend: test, action: echo, params: {msg: second}}\n";

static void
test_it_delivery_broker_killed_during_barrier (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid, s_two_barriers);
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-01", NULL},
                                     S_BUSY, S_WAIT_MS));
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    pv_doc_destroy (&doc);
    free (job_id);
}

//  The broker is SIGKILLed while tasks run, and its agents are slow to
//  come back after the restart (frozen here for longer than the ack
//  timeout and its re-sends take): the steps they were running wait for
//  them and end with their real results, never "no acknowledgement".
static void
test_it_delivery_broker_killed_agents_back_late (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-01", "web-02",
                                                       NULL},
                                     "running", S_WAIT_MS));
    grid_stop_broker (grid, true);
    kill (grid->agent_pids [0], SIGSTOP);
    kill (grid->agent_pids [1], SIGSTOP);
    //  The harness's ack timeout (500ms, 3 re-sends) runs out in 2s; the
    //  offline grace leaves the agents longer to come back
    const char *extra [] = {"--offline-grace", "8s", NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    zclock_sleep (3000);    //  The agents' reconnect back-off, made long
    kill (grid->agent_pids [0], SIGCONT);
    kill (grid->agent_pids [1], SIGCONT);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    if (!grid_str_is (record, "status", "completed")) {
        pv_write_json (record, stderr, 2);
        grid_dump_logs (grid);
    }
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    pv_doc_destroy (&doc);
    free (job_id);
}

static void
test_it_delivery_broker_killed_during_pipeline (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - tasks:\n"
        "      - {backend: test, action: echo, params: {msg: one}}\n"
        "      - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "      - {backend: test, action: echo, params: {msg: three}}\n"
        "  - {backend: test, action: echo, params: {msg: barrier}}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 1,
                                     (const char *[]) {"web-02", NULL},
                                     S_BUSY, S_WAIT_MS));
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    assert_true (grid_str_is (grid_cell (record, 3, "web-01"), "output", "barrier\n"));
    pv_doc_destroy (&doc);
    free (job_id);
}

static void
test_it_delivery_agent_killed_reads_interrupted (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 3}}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-01", NULL},
                                     S_BUSY, S_WAIT_MS));
    //  Wait for `running` (the agent has started it), then kill it and
    //  bring it straight back: the restarted agent reports `interrupted`.
    long long deadline = grid_now_ms () + 5000;
    bool running = false;
    while (!running && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (grid, "job.get", "job", job_id, NULL);
        const pv_t *record = NULL;
        running = grid_reply_ok (doc, &record)
                  && grid_str_is (grid_cell (record, 0, "web-01"), "status",
                                  "running");
        pv_doc_destroy (&doc);
    }
    assert_true (running);
    grid_stop_agent (grid, 0, true);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    const pv_t *cell = grid_cell (record, 0, "web-01");
    if (!grid_str_is (cell, "status", "interrupted"))
        pv_write_json (record, stderr, 2);
    assert_true (grid_str_is (cell, "status", "interrupted"));
    assert_true (grid_str_is (grid_cell (record, 0, "web-02"), "status", "success"));
    assert_true (grid_str_is (record, "status", "partial_failure"));
    pv_doc_destroy (&doc);
    free (job_id);
}

static void
test_it_delivery_slow_joiner_runs_once (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    //  Submit the instant the broker lists the agent: its subscriptions
    //  may not have reached the PUB yet, so only the direct re-send after
    //  the ack timeout can deliver.
    for (int round = 0; round < 3; round++) {
        char id [32];
        snprintf (id, sizeof id, "late-%d", round);
        assert_true (grid_start_agent (grid, id, "late", NULL, NULL) >= 0);
        char yaml [256];
        snprintf (yaml, sizeof yaml,
                  "target: {scope: node, value: %s}\n"
                  "tasks:\n  - {backend: test, action: echo, params: {msg: hi}}\n",
                  id);
        char *job_id = grid_submit_id (grid, yaml);
        assert_non_null (job_id);
        pv_doc_t *doc = grid_wait_job (grid, job_id, 20000);
        const pv_t *record = fixture_data (doc);
        assert_true (grid_str_is (record, "status", "completed"));
        fixture_assert_cells (record, "success");
        pv_doc_destroy (&doc);
        free (job_id);
    }
}

static void
test_it_delivery_stopped_agent_counts_once (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}, timeout: 1500ms}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-02", NULL},
                                     S_BUSY, S_WAIT_MS));
    //  Frozen past its deadline and past the offline grace, then thawed.
    kill (grid->agent_pids [1], SIGSTOP);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    kill (grid->agent_pids [1], SIGCONT);
    const pv_t *record = fixture_data (doc);
    const pv_t *cell = grid_cell (record, 0, "web-02");
    assert_true (grid_str_is (cell, "status", "lost")
                 || grid_str_is (cell, "status", "timeout"));
    assert_true (grid_str_is (grid_cell (record, 0, "web-01"), "status", "success"));
    pv_doc_destroy (&doc);
    //  The thawed agent comes back and re-sends its result: it changes
    //  nothing and counts as stale.
    assert_true (grid_wait_node (grid, "web-02", "online", 15000));
    long long deadline = grid_now_ms () + 5000;
    int64_t stale = 0;
    while (stale == 0 && grid_now_ms () < deadline) {
        pv_doc_t *status = grid_call (grid, "status", NULL);
        pv_get_int (pv_map_get (pv_map_get (fixture_data (status), "dropped"), "stale"),
                    &stale);
        pv_doc_destroy (&status);
        zclock_sleep (50);
    }
    doc = grid_call (grid, "job.get", "job", job_id, NULL);
    record = fixture_data (doc);
    cell = grid_cell (record, 0, "web-02");
    assert_true (grid_str_is (cell, "status", "lost")
                 || grid_str_is (cell, "status", "timeout"));
    int64_t attempts = 0;
    pv_get_int (pv_map_get (cell, "attempts"), &attempts);
    assert_int_equal (attempts, 1);
    pv_doc_destroy (&doc);
    free (job_id);
}

//  A node frozen until its step is declared lost, then thawed: its
//  agent's success comes late. The verdict stands whole (lost, no exit
//  code, the time until the verdict) and the late result is recorded
//  beside it, in the record, the events and the table.
static void
test_it_delivery_late_result_beside_verdict (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-02", NULL},
                                     "running", S_WAIT_MS));
    kill (grid->agent_pids [1], SIGSTOP);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    kill (grid->agent_pids [1], SIGCONT);
    assert_true (grid_str_is (grid_cell (fixture_data (doc), 0, "web-02"),
                              "status", "lost"));
    pv_doc_destroy (&doc);
    //  The thawed agent delivers its success
    const pv_t *cell = NULL, *late = NULL;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        doc = grid_call (grid, "job.get", "job", job_id, NULL);
        cell = grid_cell (fixture_data (doc), 0, "web-02");
        late = pv_map_get (cell, "late");
        if (late)
            break;
        pv_doc_destroy (&doc);
        zclock_sleep (50);
    }
    assert_non_null (late);
    assert_true (grid_str_is (cell, "status", "lost"));
    int64_t exit_code = 0, late_exit = -1;
    pv_get_int (pv_map_get (cell, "exit_code"), &exit_code);
    assert_int_equal (exit_code, -1);
    assert_true (grid_str_is (late, "status", "success"));
    pv_get_int (pv_map_get (late, "exit_code"), &late_exit);
    assert_int_equal (late_exit, 0);
    size_t at_len = 0;
    const char *at = pv_str (pv_map_get (late, "at"), &at_len);
    assert_non_null (at);
    char clock [16];
    assert_true (at_len >= 19);
    snprintf (clock, sizeof clock, "%.8s", at + 11);
    pv_doc_destroy (&doc);
    //  The events say so
    doc = grid_call (grid, "job.events", "job", job_id, NULL);
    const pv_t *events = pv_map_get (fixture_data (doc), "events");
    bool seen = false;
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *event = pv_array_at (events, index);
        if (grid_str_is (event, "event", "late")
            && grid_str_is (event, "node", "web-02")
            && grid_str_is (event, "detail",
                            "late result: success from web-02"))
            seen = true;
    }
    assert_true (seen);
    pv_doc_destroy (&doc);
    //  And the table
    char *out = NULL, *err = NULL;
    grid_cli (grid, &out, &err, S_WAIT_MS, "job", "status", job_id, NULL);
    char want [64];
    snprintf (want, sizeof want, "late: success at %s", clock);
    if (!out || !strstr (out, want))
        fprintf (stderr, "%s\n%s\n", out ? out : "", err ? err : "");
    assert_non_null (out);
    assert_non_null (strstr (out, want));
    free (out);
    free (err);
    free (job_id);
}

static void
test_it_delivery_node_drain (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    char *job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n");
    assert_non_null (job_id);
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-01", NULL},
                                     S_BUSY, S_WAIT_MS));
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "node", "drain",
                                "web-01", NULL), 0);
    assert_non_null (strstr (out, "web-01"));
    free (out);
    free (err);
    //  Running work finishes; the node then reads drained.
    pv_doc_t *doc = grid_wait_job (grid, job_id, 20000);
    assert_true (grid_str_is (fixture_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    free (job_id);
    assert_true (grid_wait_node (grid, "web-01", "drained", 10000));
    //  Drained nodes are left out of new targets.
    job_id = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n  - {backend: test, action: echo, params: {msg: x}}\n");
    doc = grid_wait_job (grid, job_id, 20000);
    const pv_t *expected = pv_map_get (fixture_data (doc), "expected");
    assert_int_equal (pv_size (expected), 1);
    assert_true (pv_str_eq (pv_array_at (expected, 0), "web-02"));
    pv_doc_destroy (&doc);
    free (job_id);
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "node", "resume",
                                "web-01", NULL), 0);
    free (out);
    free (err);
    assert_true (grid_wait_node (grid, "web-01", "online", 5000));
}

static void
test_it_delivery_broker_drain_with_queue (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *extra [] = {"--max-concurrent", "1", NULL};
    s_start_fleet (grid, extra);
    const char *sleeper = "target: {scope: node, value: db-01}\n"
                          "tasks:\n  - {backend: test, action: sleep, params: {seconds: 1}}\n";
    char *first = grid_submit_id (grid, sleeper);
    char *second = grid_submit_id (grid, sleeper);
    assert_non_null (first);
    assert_non_null (second);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "broker", "drain", NULL), 0);
    assert_non_null (strstr (out, "draining"));
    free (out);
    free (err);
    //  New work is refused with a clear error.
    pv_doc_t *doc = grid_submit (grid, sleeper);
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "maintenance");
    free (code);
    pv_doc_destroy (&doc);
    //  The running job finishes, the queued one waits.
    doc = grid_wait_job (grid, first, 20000);
    assert_true (grid_str_is (fixture_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    long long deadline = grid_now_ms () + 5000;
    bool maintenance = false;
    while (!maintenance && grid_now_ms () < deadline) {
        doc = grid_call (grid, "status", NULL);
        maintenance = grid_str_is (fixture_data (doc), "state", "maintenance");
        pv_doc_destroy (&doc);
    }
    assert_true (maintenance);
    doc = grid_call (grid, "job.get", "job", second, NULL);
    assert_true (grid_str_is (fixture_data (doc), "status", "pending"));
    pv_doc_destroy (&doc);
    //  Maintenance survives a restart.
    grid_stop_broker (grid, false);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    doc = grid_call (grid, "status", NULL);
    assert_true (grid_str_is (fixture_data (doc), "state", "maintenance"));
    pv_doc_destroy (&doc);
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "broker", "resume", NULL), 0);
    free (out);
    free (err);
    doc = grid_wait_job (grid, second, 20000);
    assert_true (grid_str_is (fixture_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    free (first);
    free (second);
}

static void
test_it_delivery_full_store_refuses_and_keeps_data (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *extra [] = {"--map-size-mb", "1", "--max-map-size-mb", "2", NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_start_agent (grid, "bulk-01", "bulk", NULL, NULL) >= 0);
    const char *bulky = "target: {scope: node, value: bulk-01}\n"
                        "tasks:\n  - {backend: test, action: output, params: {bytes: 60000}}\n";
    char *ids [100];
    size_t count = 0;
    bool refused = false;
    while (count < 100 && !refused) {
        pv_doc_t *reply = grid_submit (grid, bulky);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data)) {
            ids [count] = pv_strdup (pv_map_get (data, "job"));
            pv_doc_t *done = grid_wait_job (grid, ids [count], 20000);
            pv_doc_destroy (&done);
            count++;
        }
        else {
            char *code = grid_reply_code (reply);
            assert_non_null (code);
            assert_string_equal (code, "storage_full");
            free (code);
            refused = true;
        }
        pv_doc_destroy (&reply);
    }
    assert_true (refused);
    assert_true (count >= 3);
    //  Everything accepted reads back intact, and reads still work.
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *doc = grid_call (grid, "job.get", "job", ids [index], NULL);
        const pv_t *record = fixture_data (doc);
        assert_true (grid_str_is (record, "status", "completed"));
        const pv_t *cell = grid_cell (record, 0, "bulk-01");
        assert_true (grid_str_is (cell, "status", "success"));
        size_t len = 0;
        pv_str (pv_map_get (cell, "output"), &len);
        assert_true (len > 0);
        pv_doc_destroy (&doc);
        free (ids [index]);
    }
    pv_doc_t *doc = grid_call (grid, "job.list", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
}

static void
test_it_delivery_retried_submit_makes_one_job (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.submit", "the-same-request-id", 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_str (writer, "group:db");
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "echo");
    pw_str (writer, "params");
    pw_map (writer, 1);
    pw_str (writer, "msg");
    pw_str (writer, "once");
    //  The second send comes after a broker crash: the reply is the
    //  stored one, so it still makes one job.
    pv_doc_t *first = grid_call_raw (grid, pw_data (writer), pw_size (writer), 5000);
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    pv_doc_t *second = grid_call_raw (grid, pw_data (writer), pw_size (writer), 5000);
    if (!grid_reply_ok (first, NULL) || !grid_reply_ok (second, NULL)) {
        pv_write_json (first ? pv_doc_root (first) : NULL, stderr, 0);
        pv_write_json (second ? pv_doc_root (second) : NULL, stderr, 0);
    }
    char *a = pv_strdup (pv_map_get (fixture_data (first), "job"));
    char *b = pv_strdup (pv_map_get (fixture_data (second), "job"));
    assert_string_equal (a, b);
    pv_doc_t *list = grid_call (grid, "job.list", NULL);
    int64_t total = 0;
    pv_get_int (pv_map_get (fixture_data (list), "total"), &total);
    assert_int_equal (total, 1);
    pv_doc_destroy (&list);
    free (a);
    free (b);
    pv_doc_destroy (&first);
    pv_doc_destroy (&second);
    pw_destroy (&writer);
}

static void
test_it_delivery_retention_and_delete (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *extra [] = {"--retention", "2s", NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_start_agent (grid, "db-01", "db", NULL, NULL) >= 0);
    const char *echo = "target: {scope: node, value: db-01}\n"
                       "tasks:\n  - {backend: test, action: echo, params: {msg: x}}\n";
    const char *slow = "target: {scope: node, value: db-01}\n"
                       "tasks:\n  - {backend: test, action: sleep, params: {seconds: 5}}\n";
    //  Delete: a running job must be cancelled first; a finished one goes
    //  with its results and events.
    char *running = grid_submit_id (grid, slow);
    assert_non_null (running);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "job", "delete",
                                running, NULL), 4);
    assert_non_null (strstr (err, "conflict"));
    free (out);
    free (err);
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "job", "cancel",
                                running, NULL), 0);
    free (out);
    free (err);
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "job", "delete",
                                running, NULL), 0);
    assert_non_null (strstr (out, "deleted"));
    free (out);
    free (err);
    pv_doc_t *doc = grid_call (grid, "job.get", "job", running, NULL);
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&doc);
    doc = grid_call (grid, "job.events", "job", running, NULL);
    code = grid_reply_code (doc);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&doc);
    free (running);
    //  Retention: a finished job is purged once it is older than 2s.
    char *job_id = grid_submit_id (grid, echo);
    assert_non_null (job_id);
    doc = grid_wait_job (grid, job_id, 20000);
    assert_true (grid_str_is (fixture_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    long long deadline = grid_now_ms () + 20000;
    bool purged = false;
    while (!purged && grid_now_ms () < deadline) {
        doc = grid_call (grid, "job.get", "job", job_id, NULL);
        code = grid_reply_code (doc);
        purged = code && strcmp (code, "not_found") == 0;
        free (code);
        pv_doc_destroy (&doc);
        zclock_sleep (100);
    }
    assert_true (purged);
    free (job_id);
}

//  The acceptance loop: 20 broker SIGKILL/restart cycles during a
//  3-agent, 5-step job (and a few more jobs submitted along the way).
static void
test_it_delivery_broker_crash_loop (void **state)
{
    grid_t *grid = (grid_t *) *state;
    s_start_fleet (grid, NULL);
    const char *five_steps =
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "  - tasks:\n"
        "      - {backend: test, action: echo, params: {msg: a}}\n"
        "      - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "  - {backend: test, action: echo, params: {msg: b}}\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n";
    char *ids [8];
    size_t count = 0;
    ids [count++] = grid_submit_id (grid, five_steps);
    assert_non_null (ids [0]);
    unsigned int seed = 42;
    for (int cycle = 0; cycle < 20; cycle++) {
        zclock_sleep (100 + rand_r (&seed) % 300);
        grid_stop_broker (grid, true);
        assert_int_equal (grid_start_broker (grid, NULL), 0);
        if (cycle % 5 == 4 && count < 8) {
            //  Right after a restart the agents may not be back yet.
            for (int tries = 0; tries < 100 && count < 8; tries++) {
                pv_doc_t *reply = grid_submit (grid, five_steps);
                const pv_t *data = NULL;
                char *id = grid_reply_ok (reply, &data)
                               ? pv_strdup (pv_map_get (data, "job")) : NULL;
                pv_doc_destroy (&reply);
                if (id) {
                    ids [count++] = id;
                    break;
                }
                zclock_sleep (50);
            }
        }
    }
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *doc = grid_wait_job (grid, ids [index], 60000);
        const pv_t *record = fixture_data (doc);
        if (!grid_str_is (record, "status", "completed"))
            pv_write_json (record, stderr, 2);
        assert_true (grid_str_is (record, "status", "completed"));
        fixture_assert_cells (record, "success");
        pv_doc_destroy (&doc);
        free (ids [index]);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (
            test_it_delivery_broker_killed_during_barrier, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_broker_killed_agents_back_late, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_broker_killed_during_pipeline, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_agent_killed_reads_interrupted, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_delivery_slow_joiner_runs_once,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_stopped_agent_counts_once, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_late_result_beside_verdict, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_delivery_node_drain,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_broker_drain_with_queue, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_full_store_refuses_and_keeps_data, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_delivery_retried_submit_makes_one_job, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_delivery_retention_and_delete,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_delivery_broker_crash_loop,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
