/*  =========================================================================
    test_it_nodes - every node a job names is answered for, end to end:
    a real gridbroker, real gridagents and the real gridcli over ipc://.

    The fleet: web-01, web-02 and web-03 (group web) and db-01 (group db)
    run the recording fakes of test/fakes, which log their argv to
    <dir>/fake-<id>.log; web-02 runs with the apt backend disabled, so it
    does not offer apt.update. The broker runs one job at a time, so a
    job can be held in the queue behind another.

    A node is taken offline by stopping its agent (it says bye, and the
    broker marks it offline at once), and brought back by starting it
    again.
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

//  ---------------------------------------------------------------------
//  Helpers

static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

//  Starts agent ID on the working fakes, logging to <dir>/fake-<id>.log;
//  DISABLE names a backend it does not offer (or NULL).
static int
s_start_agent (const char *id, const char *groups, const char *disable)
{
    char log [400], tool_dir [600];
    snprintf (log, sizeof log, "%s/fake-%s.log", s_grid.dir, id);
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes", s_src ());
    const char *extra [] = {"--tool-dir", tool_dir,
                            disable ? "--disable" : NULL, disable, NULL};
    setenv ("GRID_FAKE_LOG", log, 1);
    int slot = grid_start_agent (&s_grid, id, groups, NULL, extra);
    unsetenv ("GRID_FAKE_LOG");
    return slot;
}

static int
s_slot (const char *id)
{
    for (size_t index = s_grid.agent_count; index-- > 0;)
        if (strcmp (s_grid.agent_ids [index], id) == 0
            && s_grid.agent_pids [index] > 0)
            return (int) index;
    return -1;
}

//  Stops agent ID (a clean stop: the broker marks it offline at once).
static void
s_stop_agent (const char *id)
{
    int slot = s_slot (id);
    assert_true (slot >= 0);
    grid_stop_agent (&s_grid, slot, false);
    assert_true (grid_wait_node (&s_grid, id, "offline", S_WAIT_MS));
}

static char *
s_fake_log (const char *id)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", s_grid.dir, id);
    return grid_slurp (path);
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

static void
s_cli_expect (int code, const char *out, const char *err, int got)
{
    if (got != code)
        fprintf (stderr, "gridcli exit %d (expected %d)\nstdout:\n%s\n"
                 "stderr:\n%s\n", got, code, out, err);
    assert_int_equal (got, code);
}

//  The error reply of a submit of YAML: asserts its CODE, returns it.
static pv_doc_t *
s_refused (const char *yaml, const char *code)
{
    pv_doc_t *doc = grid_submit (&s_grid, yaml);
    assert_non_null (doc);
    char *got = grid_reply_code (doc);
    if (!got || strcmp (got, code) != 0) {
        fprintf (stderr, "expected %s, the reply is:\n", code);
        pv_write_json (pv_doc_root (doc), stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_non_null (got);
    assert_string_equal (got, code);
    free (got);
    return doc;
}

//  True when the string MESSAGE of REPLY holds TEXT.
static bool
s_message_has (const pv_doc_t *reply, const char *text)
{
    char *message = pv_strdup (pv_map_get (pv_doc_root (reply), "message"));
    bool has = message && strstr (message, text);
    if (!has)
        fprintf (stderr, "message '%s' lacks '%s'\n", message ? message : "",
                 text);
    free (message);
    return has;
}

//  True when some detail line of REPLY holds TEXT.
static bool
s_detail_has (const pv_doc_t *reply, const char *text)
{
    const pv_t *details = pv_map_get (pv_doc_root (reply), "details");
    for (size_t index = 0; index < pv_size (details); index++) {
        char *line = pv_strdup (pv_array_at (details, index));
        bool has = line && strstr (line, text);
        free (line);
        if (has)
            return true;
    }
    return false;
}

static size_t
s_job_total (void)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.list", NULL);
    int64_t total = -1;
    pv_get_int (pv_map_get (s_data (doc), "total"), &total);
    pv_doc_destroy (&doc);
    return (size_t) total;
}

//  The job id of gridcli's final line ("job j-... STATUS") into ID.
static void
s_job_id (const char *out, char *id, size_t id_len)
{
    const char *line = strstr (out, "\njob j-");
    assert_non_null (line);
    char format [32];
    snprintf (format, sizeof format, "job %%%zus", id_len - 1);
    assert_int_equal (sscanf (line + 1, format, id), 1);
}

static bool
s_str_has (const pv_t *map, const char *key, const char *text)
{
    char *value = pv_strdup (pv_map_get (map, key));
    bool has = value && strstr (value, text);
    free (value);
    return has;
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    const char *extra [] = {"--max-concurrent", "1", NULL};
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, extra) != 0)
        return -1;
    if (s_start_agent ("web-01", "web", NULL) < 0
        || s_start_agent ("web-02", "web", "apt") < 0
        || s_start_agent ("web-03", "web", NULL) < 0
        || s_start_agent ("db-01", "db", NULL) < 0)
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
//  Tests

//  A node id that is not registered refuses the whole submit, naming it:
//  a typo never runs a partial job.
static void
test_it_nodes_typo_is_refused (void **state)
{
    size_t before = s_job_total ();
    pv_doc_t *doc = s_refused (
        "target: node:web-01,web-0l,nosuch\n"
        "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n",
        PROTO_ERR_UNKNOWN_NODE);
    assert_true (s_detail_has (doc, "web-0l: not registered"));
    assert_true (s_detail_has (doc, "nosuch: not registered"));
    assert_false (s_detail_has (doc, "web-01"));
    assert_true (s_message_has (doc, "2 unknown nodes"));
    pv_doc_destroy (&doc);
    assert_int_equal (s_job_total (), before);
    //  The operator sees the id and a non-zero exit
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--target",
                         "node:web-01,nosuch", "--wait", "test", "echo",
                         "--msg", "hi", NULL);
    s_cli_expect (4, out, err, code);
    assert_true (grid_line_with (err, "unknown node nosuch", NULL));
    free (out);
    free (err);
    assert_int_equal (s_job_total (), before);
}

//  A node: term of a target expression is held to the same rule: an
//  unknown id refuses the submit (not a quiet run on the rest), and the
//  dry run lists it as not registered.
static void
test_it_nodes_typo_in_expression_is_refused (void **state)
{
    size_t before = s_job_total ();
    pv_doc_t *doc = s_refused (
        "target: group:web or node:nope\n"
        "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n",
        PROTO_ERR_UNKNOWN_NODE);
    assert_true (s_detail_has (doc, "nope: not registered"));
    assert_true (s_message_has (doc, "unknown node nope"));
    pv_doc_destroy (&doc);
    //  Under not, and named twice: one detail
    doc = s_refused ("target: group:web and not node:web-0l,db-01 or "
                     "(node:web-0l and group:db)\n"
                     "tasks: [{backend: test, action: echo, params: "
                     "{msg: hi}}]\n", PROTO_ERR_UNKNOWN_NODE);
    assert_true (s_detail_has (doc, "web-0l: not registered"));
    assert_false (s_detail_has (doc, "db-01"));
    assert_true (s_message_has (doc, "unknown node web-0l"));
    pv_doc_destroy (&doc);
    assert_int_equal (s_job_total (), before);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--target",
                         "group:web or node:nope", "--wait", "test", "echo",
                         "--msg", "hi", NULL);
    s_cli_expect (4, out, err, code);
    assert_true (grid_line_with (err, "unknown node nope", NULL));
    free (out);
    free (err);
    assert_int_equal (s_job_total (), before);
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--check",
                     "--target", "group:web or node:nope", "test", "echo",
                     "--msg", "hi", NULL);
    s_cli_expect (0, out, err, code);
    assert_true (grid_line_with (out, "nope", "not registered", NULL));
    free (out);
    free (err);
    assert_int_equal (s_job_total (), before);
}

//  An offline node of a list gets a row in every step that says since
//  when; the job runs on the others, ends partial_failure, --wait exits
//  1; alone, the node is refused with the same reason.
static void
test_it_nodes_offline_in_list (void **state)
{
    s_stop_agent ("db-01");
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "node:web-01,db-01", "--wait", "test", "echo",
                         "--msg", "hi", NULL);
    s_cli_expect (1, out, err, code);
    assert_true (grid_line_with (out, "web-01", "success", NULL));
    assert_true (grid_line_with (out, "!", "db-01", "offline",
                              "offline since ", NULL));
    assert_true (grid_line_with (out, "1 step failed (marked !)", NULL));
    assert_true (grid_line_with (out, "job j-", "partial_failure",
                              "1 of 2 nodes not run: db-01 offline since",
                              NULL));
    char job_id [64] = "";
    s_job_id (out, job_id, sizeof job_id);
    free (out);
    free (err);

    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *record = s_data (doc);
    const pv_t *cell = grid_cell (record, 0, "db-01");
    assert_true (grid_str_is (cell, "status", "offline"));
    assert_true (s_str_has (cell, "reason", "offline since "));
    assert_true (grid_str_is (record, "status", "partial_failure"));
    assert_null (pv_map_get (record, "not_run"));
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.progress", "job", job_id, NULL);
    const pv_t *progress = s_data (doc);
    int64_t value = -1;
    pv_get_int (pv_map_get (progress, "failed"), &value);
    assert_int_equal (value, 1);
    pv_get_int (pv_map_get (progress, "step"), &value);
    assert_int_equal (value, 1);
    pv_doc_destroy (&doc);

    //  Alone: refused, naming the node and why
    doc = s_refused ("target: node:db-01\n"
                     "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n",
                     PROTO_ERR_NO_NODES);
    assert_true (s_message_has (doc, "db-01 offline since "));
    assert_true (s_detail_has (doc, "db-01: offline since "));
    pv_doc_destroy (&doc);
    assert_true (s_start_agent ("db-01", "db", NULL) >= 0);
}

//  A drained node of a list reads drained; alone it is refused as
//  drained, not as "no online node".
static void
test_it_nodes_drained_in_list (void **state)
{
    pv_doc_t *doc = grid_call (&s_grid, "node.drain", "node", "web-03", NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "node:web-01,web-03", "--wait", "test", "echo",
                         "--msg", "hi", NULL);
    s_cli_expect (1, out, err, code);
    assert_true (grid_line_with (out, "!", "web-03", "drained", NULL));
    assert_true (grid_line_with (out, "job j-", "partial_failure",
                              "1 of 2 nodes not run: web-03 drained", NULL));
    free (out);
    free (err);
    doc = s_refused ("target: node:web-03\n"
                     "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n",
                     PROTO_ERR_NO_NODES);
    assert_true (s_message_has (doc, "web-03 drained"));
    char *message = pv_strdup (pv_map_get (pv_doc_root (doc), "message"));
    assert_null (strstr (message, "no online node"));
    free (message);
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "node.resume", "node", "web-03", NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
}

//  A group runs on the members that can run it; an offline member and a
//  member lacking the action are listed under the table and in not_run,
//  the latter is never sent the task, and the job completes.
static void
test_it_nodes_group_members_not_run (void **state)
{
    s_stop_agent ("web-03");
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "group:web", "--wait", "apt", "update", NULL);
    s_cli_expect (0, out, err, code);
    assert_true (grid_line_with (out, "web-01", "apt update", "success", NULL));
    assert_false (grid_line_with (out, "web-02", "apt update", NULL));
    assert_true (grid_line_with (out, "2 nodes not run: web-02 does not offer "
                              "apt.update, web-03 offline since ", NULL));
    assert_true (grid_line_with (out, "job j-", "completed", NULL));
    char job_id [64] = "";
    s_job_id (out, job_id, sizeof job_id);
    free (out);
    free (err);
    char *log = s_fake_log ("web-02");
    assert_null (strstr (log, "update"));
    free (log);

    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *record = s_data (doc);
    const pv_t *not_run = pv_map_get (record, "not_run");
    assert_int_equal (pv_size (not_run), 2);
    assert_true (grid_str_is (pv_array_at (not_run, 0), "node", "web-02"));
    assert_true (grid_str_is (pv_array_at (not_run, 0), "status",
                              "unsupported"));
    assert_true (grid_str_is (pv_array_at (not_run, 1), "status", "offline"));
    assert_int_equal (pv_size (pv_map_get (record, "expected")), 1);
    pv_doc_destroy (&doc);

    //  Named, the member lacking the action has its row
    code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                     "node:web-01,web-02", "--wait", "apt", "update", NULL);
    s_cli_expect (1, out, err, code);
    assert_true (grid_line_with (out, "!", "web-02", "unsupported",
                              "does not offer apt.update", NULL));
    free (out);
    free (err);
    log = s_fake_log ("web-02");
    assert_null (strstr (log, "update"));
    free (log);
}

//  A queued job is resolved when it starts: a named node that went
//  offline while it waited gets its rows. The record survives a broker
//  restart, with its real step.
static void
test_it_nodes_queued_job_and_restart (void **state)
{
    //  web-01 holds the only slot
    char *blocker = grid_submit_id (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_non_null (blocker);
    char *queued = grid_submit_id (&s_grid,
        "target: node:web-01,db-01\n"
        "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n");
    assert_non_null (queued);
    char *group = grid_submit_id (&s_grid,
        "target: group:db\n"
        "tasks: [{backend: test, action: echo, params: {msg: hi}}]\n");
    assert_non_null (group);
    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", queued, NULL);
    assert_true (grid_str_is (s_data (doc), "status", "pending"));
    pv_doc_destroy (&doc);
    s_stop_agent ("db-01");
    doc = grid_call (&s_grid, "job.cancel", "job", blocker, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = grid_wait_job (&s_grid, queued, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "partial_failure"));
    assert_true (grid_str_is (grid_cell (record, 0, "db-01"), "status",
                              "offline"));
    assert_true (grid_str_is (grid_cell (record, 0, "web-01"), "status",
                              "success"));
    pv_doc_destroy (&doc);
    //  A group none of whose members can run it when it starts fails,
    //  listing them; the table says no node ran
    doc = grid_wait_job (&s_grid, group, S_WAIT_MS);
    record = s_data (doc);
    assert_true (grid_str_is (record, "status", "failed"));
    assert_true (s_str_has (record, "reason", "no node of group:db can run "
                            "it: db-01 offline since "));
    assert_int_equal (pv_size (pv_map_get (record, "not_run")), 1);
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "status", group,
                         NULL);
    s_cli_expect (1, out, err, code);
    assert_true (grid_line_with (out, "no node ran", NULL));
    assert_true (grid_line_with (out, "1 node not run: db-01 offline since ",
                                 NULL));
    free (out);
    free (err);
    free (group);

    //  After a restart the record and its progress are the same
    grid_stop_broker (&s_grid, false);
    const char *extra [] = {"--max-concurrent", "1", NULL};
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    doc = grid_call (&s_grid, "job.get", "job", queued, NULL);
    record = s_data (doc);
    assert_true (s_str_has (grid_cell (record, 0, "db-01"), "reason",
                            "offline since "));
    assert_true (s_str_has (record, "reason", "db-01 offline since "));
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.progress", "job", queued, NULL);
    const pv_t *progress = s_data (doc);
    int64_t value = -1;
    pv_get_int (pv_map_get (progress, "step"), &value);
    assert_int_equal (value, 1);
    pv_get_int (pv_map_get (progress, "failed"), &value);
    assert_int_equal (value, 1);
    pv_doc_destroy (&doc);
    //  Events leave out what they do not have
    doc = grid_call (&s_grid, "job.events", "job", queued, NULL);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    assert_true (pv_size (events) > 3);
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *event = pv_array_at (events, index);
        for (size_t at = 0; at < pv_size (event); at++)
            assert_int_not_equal (pv_type (pv_map_value_at (event, at)),
                                  PV_NIL);
    }
    assert_true (grid_str_is (pv_array_at (events, 0), "event", "submitted"));
    assert_null (pv_map_get (pv_array_at (events, 0), "node"));
    pv_doc_destroy (&doc);
    free (blocker);
    free (queued);
}

//  A step cancelled while it ran records the time it really ran, and the
//  job's progress reports the real step once it has ended.
static void
test_it_nodes_cancelled_cell_ran (void **state)
{
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
    char *job_id = grid_submit_id (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_non_null (job_id);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    bool running = false;
    while (!running && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
        const pv_t *record = NULL;
        running = grid_reply_ok (doc, &record)
                  && grid_str_is (grid_cell (record, 0, "web-01"), "status",
                                  "running");
        pv_doc_destroy (&doc);
        if (!running)
            zclock_sleep (20);
    }
    assert_true (running);
    zclock_sleep (300);
    pv_doc_t *doc = grid_call (&s_grid, "job.cancel", "job", job_id, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *cell = grid_cell (s_data (doc), 0, "web-01");
    assert_true (grid_str_is (cell, "status", "cancelled"));
    int64_t duration_ms = 0;
    pv_get_int (pv_map_get (cell, "duration_ms"), &duration_ms);
    assert_true (duration_ms >= 300);
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "job.progress", "job", job_id, NULL);
    int64_t step = -1;
    pv_get_int (pv_map_get (s_data (doc), "step"), &step);
    pv_doc_destroy (&doc);
    assert_int_equal (step, 0);
    free (job_id);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_nodes_typo_is_refused),
        cmocka_unit_test (test_it_nodes_typo_in_expression_is_refused),
        cmocka_unit_test (test_it_nodes_offline_in_list),
        cmocka_unit_test (test_it_nodes_drained_in_list),
        cmocka_unit_test (test_it_nodes_group_members_not_run),
        cmocka_unit_test (test_it_nodes_queued_job_and_restart),
        cmocka_unit_test (test_it_nodes_cancelled_cell_ran),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
