/*  =========================================================================
    test_it_dag - DAG jobs and rolling batches end to end: a real
    gridbroker, three real gridagents (web-01..03, group web, two executor
    slots each) and the real gridcli over ipc://.

    Only the test backend runs: echo, sleep and fail need no fakes.
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

static grid_t s_grid;
static int s_web03 = -1;        //  web-03's agent slot

//  ---------------------------------------------------------------------
//  Helpers

//  The ok reply's data, or a failed test.
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

static void
s_assert_cell (const pv_t *record, int step, const char *node,
               const char *status)
{
    const pv_t *cell = grid_cell (record, step, node);
    if (!grid_str_is (cell, "status", status)) {
        fprintf (stderr, "step %d on %s: expected %s, got ", step, node,
                 status);
        pv_write_json (cell, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (cell, "status", status));
}

static void
s_assert_status (const pv_t *record, const char *status)
{
    if (!grid_str_is (record, "status", status)) {
        fprintf (stderr, "expected job status %s, the record is:\n", status);
        pv_write_json (record, stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (record, "status", status));
}

//  Index in EVENTS of the first event EVENT at STEP (-1: any) for NODE
//  (NULL: a job-level event), or -1.
static int
s_event_at (const pv_t *events, const char *event, int step, const char *node)
{
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *item = pv_array_at (events, index);
        int64_t at = -1;
        pv_get_int (pv_map_get (item, "step"), &at);
        const pv_t *who = pv_map_get (item, "node");
        if (!grid_str_is (item, "event", event) || (step >= 0 && at != step))
            continue;
        if (node ? grid_str_is (item, "node", node)
                 : pv_type (who) != PV_STR)
            return (int) index;
    }
    return -1;
}

static char *
s_data_file (const char *name)
{
    const char *src = getenv ("GRID_SRC");
    char path [512];
    snprintf (path, sizeof path, "%s/test/data/%s", src && *src ? src : ".",
              name);
    char *text = NULL;
    size_t size = 0;
    FILE *file = fopen (path, "rb");
    assert_non_null (file);
    FILE *memory = open_memstream (&text, &size);
    char buf [4096];
    size_t got;
    while ((got = fread (buf, 1, sizeof buf, file)) > 0)
        fwrite (buf, 1, got, memory);
    fclose (memory);
    fclose (file);
    return text;
}

//  The data file's path (for gridcli -f).
static void
s_data_path (const char *name, char *path, size_t path_len)
{
    const char *src = getenv ("GRID_SRC");
    snprintf (path, path_len, "%s/test/data/%s", src && *src ? src : ".",
              name);
}

static void
s_assert_exit (int code, int expected, const char *out, const char *err)
{
    if (code != expected)
        fprintf (stderr, "gridcli exit %d (expected %d)\nstdout:\n%s\n"
                 "stderr:\n%s\n", code, expected, out ? out : "",
                 err ? err : "");
    assert_int_equal (code, expected);
}

//  TEXT contains PART (the text is shown when it does not).
static void
s_assert_has (const char *text, const char *part)
{
    if (!text || !strstr (text, part))
        fprintf (stderr, "expected '%s' in:\n%s\n", part, text ? text : "");
    assert_non_null (text);
    assert_non_null (strstr (text, part));
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    const char *extra [] = {"--concurrency", "2", NULL};
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    if (grid_start_agent (&s_grid, "web-01", "web", NULL, extra) < 0
        || grid_start_agent (&s_grid, "web-02", "web", NULL, extra) < 0
        || (s_web03 = grid_start_agent (&s_grid, "web-03", "web", NULL,
                                        extra)) < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  DAG jobs

//  fetch and build run side by side on each node (build sleeps, fetch
//  finishes first); deploy joins them per node; smoke waits for every
//  node (a barrier); rollback is skipped where nothing failed.
static void
test_it_dag_join_on_three_agents (void **state)
{
    char *yaml = s_data_file ("dag-join.yaml");
    char *job_id = grid_submit_id (&s_grid, yaml);
    free (yaml);
    assert_non_null (job_id);
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    s_assert_status (record, "completed");
    const char *nodes [] = {"web-01", "web-02", "web-03"};
    for (int node = 0; node < 3; node++) {
        for (int step = 0; step < 4; step++)
            s_assert_cell (record, step, nodes [node], "success");
        s_assert_cell (record, 4, nodes [node], "skipped");
    }
    pv_doc_destroy (&doc);

    doc = grid_call (&s_grid, "job.events", "job", job_id, NULL);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    for (int node = 0; node < 3; node++) {
        const char *id = nodes [node];
        //  Side by side: fetch (step 0) ended while build (step 1, a
        //  one-second sleep) was already under way on the same node
        int build_sent = s_event_at (events, "dispatched", 1, id);
        int fetch_done = s_event_at (events, "succeeded", 0, id);
        int build_done = s_event_at (events, "succeeded", 1, id);
        int deploy_sent = s_event_at (events, "dispatched", 2, id);
        assert_true (build_sent >= 0 && fetch_done >= 0 && build_done >= 0);
        assert_true (build_sent < fetch_done);
        assert_true (fetch_done < build_done);
        //  The join: deploy only after both
        assert_true (build_done < deploy_sent);
        //  The barrier: smoke goes out once, after every node's deploy
        int deploy_done = s_event_at (events, "succeeded", 2, id);
        int smoke_sent = s_event_at (events, "dispatched", 3, NULL);
        assert_true (deploy_done >= 0 && deploy_done < smoke_sent);
    }
    pv_doc_destroy (&doc);

    //  job status shows the order and what each task needs
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "status", job_id,
                         NULL);
    s_assert_exit (code, 0, out, err);
    assert_non_null (strstr (out, "order (each task starts on a node once"));
    assert_non_null (strstr (out, "fetch, build"));
    assert_non_null (strstr (out, "deploy (barrier)"));
    free (out);
    free (err);
    free (job_id);
}

//  A cycle is refused at submit, naming the tasks
static void
test_it_dag_cycle_is_invalid (void **state)
{
    pv_doc_t *doc = grid_submit (&s_grid,
        "target: group:web\n"
        "tasks:\n"
        "  - {name: a, backend: test, action: echo, params: {msg: a},"
        " needs: [b]}\n"
        "  - {name: b, backend: test, action: echo, params: {msg: b},"
        " needs: [a]}\n");
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    char path [512];
    s_data_path ("dag-invalid.yaml", path, sizeof path);
    int rc = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "-f", path,
                       NULL);
    s_assert_exit (rc, 2, out, err);
    assert_non_null (strstr (err, "tasks[1].needs[1]: unknown task 'ghost'"));
    free (out);
    free (err);
}

//  ---------------------------------------------------------------------
//  Rolling batches

//  One node at a time with no failure allowed: the first node fails, the
//  two others are never started, and the job fails with the reason.
static void
test_it_dag_batch_budget_exhausted (void **state)
{
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run",
                         "--target", "group:web", "--batch", "1",
                         "--max-failures", "0", "--wait", "test", "fail",
                         "--msg", "broken", NULL);
    //  The job failed (the progress lines, when the job lasts long enough
    //  to be polled while it runs, read "batch 1/3": see test_cli)
    assert_int_equal (code, 1);
    free (err);
    char job_id [64] = "";
    const char *found = strstr (out, "j-");
    assert_non_null (found);
    sscanf (found, "%63[A-Za-z0-9_-]", job_id);
    free (out);
    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *record = s_data (doc);
    s_assert_status (record, "failed");
    s_assert_cell (record, 0, "web-01", "failed");
    s_assert_cell (record, 0, "web-02", "skipped");
    s_assert_cell (record, 0, "web-03", "skipped");
    assert_true (grid_str_is (record, "reason",
                              "1 of 3 nodes failed at step 0 (test fail); "
                              "2 nodes not started: failure budget 0 "
                              "exceeded in batch 1"));
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.progress", "job", job_id, NULL);
    const pv_t *progress = s_data (doc);
    int64_t batch = 0, batches = 0;
    pv_get_int (pv_map_get (progress, "batch"), &batch);
    pv_get_int (pv_map_get (progress, "batches"), &batches);
    assert_int_equal (batch, 1);
    assert_int_equal (batches, 3);
    pv_doc_destroy (&doc);
}

//  A canary node first, then the rest two at a time: every batch runs
//  the whole job before the next starts.
static void
test_it_dag_batch_rolls_through (void **state)
{
    char *out = NULL, *err = NULL;
    char path [512];
    s_data_path ("rolling-batch.yaml", path, sizeof path);
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "-f",
                         path, "--batch", "2", "--wait", NULL);
    s_assert_exit (code, 0, out, err);
    char job_id [64] = "";
    const char *found = strstr (out, "j-");
    assert_non_null (found);
    sscanf (found, "%63[A-Za-z0-9_-]", job_id);
    free (out);
    free (err);
    pv_doc_t *doc = grid_call (&s_grid, "job.events", "job", job_id, NULL);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    //  Canary web-01, then web-02 and web-03 together
    int canary_done = s_event_at (events, "succeeded", 0, "web-01");
    int second = s_event_at (events, "batch", -1, NULL);
    int rest_sent = s_event_at (events, "dispatched", 0, "web-02");
    assert_true (canary_done >= 0 && canary_done < second);
    assert_true (rest_sent < 0 || second < rest_sent);
    const pv_t *item = pv_array_at (events, (size_t) second);
    assert_true (grid_str_is (item, "detail", "batch 2/2: 2 nodes, from "
                                              "web-02"));
    pv_doc_destroy (&doc);
}


//  ---------------------------------------------------------------------
//  Dry run

//  How many jobs the broker keeps.
static int64_t
s_job_count (void)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.list", NULL);
    int64_t total = -1;
    pv_get_int (pv_map_get (s_data (doc), "total"), &total);
    pv_doc_destroy (&doc);
    assert_true (total >= 0);
    return total;
}

//  --check resolves the target, says which nodes would not run and why,
//  shows the plan and the batches, and runs and stores nothing. Last in
//  the suite: it stops web-03 and adds a node without the test backend.
static void
test_it_dag_check_runs_nothing (void **state)
{
    const char *no_test [] = {"--disable", "test", NULL};
    assert_true (grid_start_agent (&s_grid, "web-04", "web", NULL, no_test)
                 >= 0);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "node", "drain",
                         "web-02", NULL);
    s_assert_exit (code, 0, out, err);
    free (out);
    free (err);
    grid_stop_agent (&s_grid, s_web03, false);
    assert_true (grid_wait_node (&s_grid, "web-03", "offline", S_WAIT_MS));
    int64_t jobs = s_job_count ();

    char path [512];
    s_data_path ("dag-join.yaml", path, sizeof path);
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--check",
                     "-f", path, "--batch", "1", NULL);
    s_assert_exit (code, 0, out, err);
    s_assert_has (out, "1 node: web-01");
    s_assert_has (out, "would not run on 3 nodes");
    s_assert_has (out, "web-02  drained");
    s_assert_has (out, "web-03  offline since ");
    s_assert_has (out, "web-04  does not offer test.echo");
    s_assert_has (out, "plan (DAG order");
    s_assert_has (out, "steps 0,1");
    s_assert_has (out, "steps 2 (barrier)");
    s_assert_has (out, "nothing was run");
    free (out);
    free (err);

    //  The wire form: phases, batches and the budget
    pv_doc_t *doc = grid_call (&s_grid, "node.resume", "node", "web-02",
                               NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    code = grid_cli (&s_grid, &out, &err, 10000, "--output", "json", "job",
                     "run", "--check", "--target", "group:web", "--batch",
                     "1", "--max-failures", "0", "test", "echo", "--msg",
                     "hi", NULL);
    s_assert_exit (code, 0, out, err);
    assert_non_null (strstr (out, "\"order\": \"phases\""));
    assert_non_null (strstr (out, "\"max_failures\": 0"));
    assert_non_null (strstr (out, "\"batches\": ["));
    free (out);
    free (err);

    //  A bad param is found as at submit; a target with no usable node
    //  exits 1
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--check",
                     "--target", "group:web", "test", "sleep", "--seconds",
                     "soon", NULL);
    assert_int_equal (code, 4);
    s_assert_has (err, "tasks[0].params.seconds");
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--check",
                     "--target", "node:web-03", "test", "echo", "--msg",
                     "hi", NULL);
    s_assert_exit (code, 1, out, err);
    s_assert_has (out, "0 nodes");
    free (out);
    free (err);
    //  Nothing was stored
    assert_int_equal (s_job_count (), jobs);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_dag_join_on_three_agents),
        cmocka_unit_test (test_it_dag_cycle_is_invalid),
        cmocka_unit_test (test_it_dag_batch_budget_exhausted),
        cmocka_unit_test (test_it_dag_batch_rolls_through),
        cmocka_unit_test (test_it_dag_check_runs_nothing),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
