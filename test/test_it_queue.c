/*  =========================================================================
    test_it_queue - job retry, the dead-letter queue, queue statistics,
    node workers and node history end to end,
    through a real gridbroker, real gridagents and the real gridcli over
    ipc://.

    The fleet: web-01 and web-02 (group web). Their apt-get is a script in
    the test's directory that fails while the file fail-<node> exists
    there, so a test decides which node fails and can let a retry succeed
    (the agent hands its programs only GRID_FAKE_LOG from its environment,
    so that variable names the file).
    The broker knows a viewer and an operator client key besides the
    harness's admin.
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
static char s_viewer [400];     //  Key pair with the viewer role
static char s_operator [400];   //  Key pair with the operator role
static char s_viewer_arg [500];
static char s_operator_arg [500];

//  ---------------------------------------------------------------------
//  Helpers

static void
s_set_failing (const char *node, bool failing)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fail-%s", s_grid.dir, node);
    if (failing) {
        FILE *file = fopen (path, "w");
        assert_non_null (file);
        fclose (file);
    }
    else
        unlink (path);
}

//  Starts agent ID; DISABLE names backends it switches off, or is NULL.
static int
s_start_agent (const char *id, const char *disable)
{
    char tools [400], fail [400];
    snprintf (tools, sizeof tools, "%s/tools", s_grid.dir);
    snprintf (fail, sizeof fail, "%s/fail-%s", s_grid.dir, id);
    setenv ("GRID_FAKE_LOG", fail, 1);
    const char *extra [] = {"--tool-dir", tools, "--concurrency", "2",
                            disable ? "--disable" : NULL, disable, NULL};
    int slot = grid_start_agent (&s_grid, id, "web", NULL, extra);
    unsetenv ("GRID_FAKE_LOG");
    return slot;
}

static int
s_start_broker (void)
{
    static char config [400];
    snprintf (config, sizeof config, "%s/broker.yaml", s_grid.dir);
    const char *extra [] = {"--client-key", s_viewer_arg, "--client-key",
                            s_operator_arg, "--config", config, NULL};
    return grid_start_broker (&s_grid, extra);
}

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
s_expect_code (pv_doc_t *doc, const char *code)
{
    char *actual = grid_reply_code (doc);
    assert_non_null (actual);
    assert_string_equal (actual, code);
    free (actual);
}

static char *
s_str (const pv_t *map, const char *key)
{
    char *text = pv_strdup (pv_map_get (map, key));
    assert_non_null (text);
    return text;
}

//  Waits for JOB to end and checks its status.
static void
s_expect_final (const char *job, const char *status)
{
    pv_doc_t *doc = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    if (!grid_str_is (record, "status", status)) {
        pv_write_json (record, stderr, 2);
        grid_dump_logs (&s_grid);
    }
    assert_true (grid_str_is (record, "status", status));
    pv_doc_destroy (&doc);
}

//  job.retry as KEY_FILE (NULL: the admin).
static pv_doc_t *
s_retry_as (const char *key_file, const char *job, bool failed_only,
            const char *target)
{
    pw_t *writer = pw_new ();
    char id [32];
    snprintf (id, sizeof id, "retry-%d", s_grid.request_seq++);
    proto_request_begin (writer, "job.retry", id,
                         1 + (failed_only ? 1 : 0) + (target ? 1 : 0));
    pw_str (writer, "job");
    pw_str (writer, job);
    if (failed_only) {
        pw_str (writer, "failed_only");
        pw_bool (writer, true);
    }
    if (target) {
        pw_str (writer, "target");
        pw_str (writer, target);
    }
    pv_doc_t *doc = key_file
        ? grid_call_raw_as (&s_grid, key_file, pw_data (writer),
                            pw_size (writer), 10000)
        : grid_call_raw (&s_grid, pw_data (writer), pw_size (writer), 10000);
    pw_destroy (&writer);
    return doc;
}

//  The entries of dlq.list (JOB only when not NULL): its total.
static int64_t
s_dlq_total (const char *job)
{
    pv_doc_t *doc = job ? grid_call (&s_grid, "dlq.list", "job", job, NULL)
                        : grid_call (&s_grid, "dlq.list", NULL);
    int64_t total = -1;
    pv_get_int (pv_map_get (s_data (doc), "total"), &total);
    pv_doc_destroy (&doc);
    return total;
}

static bool
s_contains (const char *text, const char *part)
{
    if (!strstr (text, part)) {
        fprintf (stderr, "expected '%s' in:\n%s\n", part, text);
        return false;
    }
    return true;
}

//  ---------------------------------------------------------------------
//  job.retry

static void
test_it_queue_retry_links_both_ways (void **state)
{
    s_set_failing ("web-02", true);
    char *job = grid_submit_id (&s_grid,
        "target: group:web\n"
        "strategy: continue\n"
        "tasks: [{backend: apt, action: install, params: {package: nginx}}]\n");
    assert_non_null (job);
    s_expect_final (job, "partial_failure");
    //  A fleet job does not dead-letter unless it asks
    assert_int_equal (s_dlq_total (job), 0);

    //  --failed-only: only web-02, which now works
    s_set_failing ("web-02", false);
    pv_doc_t *doc = s_retry_as (NULL, job, true, NULL);
    const pv_t *data = s_data (doc);
    char *retry = s_str (data, "job");
    assert_true (grid_str_is (data, "retry_of", job));
    pv_doc_destroy (&doc);
    doc = grid_wait_job (&s_grid, retry, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    assert_true (grid_str_is (record, "retry_of", job));
    const pv_t *expected = pv_map_get (record, "expected");
    assert_int_equal (pv_size (expected), 1);
    assert_true (pv_str_eq (pv_array_at (expected, 0), "web-02"));
    assert_true (grid_str_is (pv_map_get (record, "target"), "scope", "node"));
    pv_doc_destroy (&doc);

    //  The original names its retry
    doc = grid_call (&s_grid, "job.get", "job", job, NULL);
    record = s_data (doc);
    const pv_t *retried_by = pv_map_get (record, "retried_by");
    assert_int_equal (pv_size (retried_by), 1);
    assert_true (pv_str_eq (pv_array_at (retried_by, 0), retry));
    pv_doc_destroy (&doc);

    //  A whole retry through gridcli: both nodes, a second link
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 15000, "job", "retry", job,
                         NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, "it retries job "));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 15000, "job", "status", job, NULL);
    assert_true (s_contains (out, "retried by"));
    assert_true (s_contains (out, retry));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 15000, "job", "status", retry,
                     NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, "retry of"));
    assert_true (s_contains (out, job));
    free (out);
    free (err);

    //  Nothing failed in the retry: --failed-only has nothing to do
    doc = s_retry_as (NULL, retry, true, NULL);
    s_expect_code (doc, "conflict");
    pv_doc_destroy (&doc);
    //  --target replaces the target; a bad one is refused
    doc = s_retry_as (NULL, job, false, "node:web-01");
    data = s_data (doc);
    char *third = s_str (data, "job");
    pv_doc_destroy (&doc);
    doc = grid_wait_job (&s_grid, third, S_WAIT_MS);
    record = s_data (doc);
    expected = pv_map_get (record, "expected");
    assert_int_equal (pv_size (expected), 1);
    assert_true (pv_str_eq (pv_array_at (expected, 0), "web-01"));
    pv_doc_destroy (&doc);
    doc = s_retry_as (NULL, job, false, "group:");
    s_expect_code (doc, "bad_request");
    pv_doc_destroy (&doc);
    doc = s_retry_as (NULL, "j-000000000000-0000", false, NULL);
    s_expect_code (doc, "not_found");
    pv_doc_destroy (&doc);
    //  A viewer may not retry
    doc = s_retry_as (s_viewer, job, false, NULL);
    s_expect_code (doc, "forbidden");
    pv_doc_destroy (&doc);
    free (third);
    free (retry);
    free (job);
}

//  ---------------------------------------------------------------------
//  Dead-letter queue

static void
test_it_queue_dead_letter_lands_survives_and_clears (void **state)
{
    s_set_failing ("web-01", true);
    s_set_failing ("web-02", true);
    char *job = grid_submit_id (&s_grid,
        "target: any:group:web\n"
        "tasks: [{backend: apt, action: install, max_retries: 1,\n"
        "         params: {package: nginx}}]\n");
    assert_non_null (job);
    s_expect_final (job, "failed");
    assert_int_equal (s_dlq_total (job), 1);
    pv_doc_t *doc = grid_call (&s_grid, "dlq.list", "job", job, NULL);
    const pv_t *entries = pv_map_get (s_data (doc), "entries");
    const pv_t *entry = pv_array_at (entries, 0);
    char *entry_id = s_str (entry, "id");
    assert_true (grid_str_is (entry, "status", "failed"));
    assert_true (grid_str_is (entry, "backend", "apt"));
    assert_true (grid_str_is (entry, "action", "install"));
    int64_t attempts = 0, step = -1;
    pv_get_int (pv_map_get (entry, "attempts"), &attempts);
    pv_get_int (pv_map_get (entry, "step"), &step);
    assert_int_equal (attempts, 2);
    assert_int_equal (step, 0);
    char *error = s_str (entry, "error");
    assert_true (s_contains (error, "simulated failure"));
    free (error);
    pv_doc_destroy (&doc);

    //  A fleet job that asks for it dead-letters too
    char *fleet = grid_submit_id (&s_grid,
        "target: group:web\n"
        "dead_letter: true\n"
        "tasks: [{backend: apt, action: install, params: {package: vim}}]\n");
    s_expect_final (fleet, "failed");
    assert_int_equal (s_dlq_total (fleet), 2);

    //  Entries survive a broker killed hard
    grid_stop_broker (&s_grid, true);
    assert_int_equal (s_start_broker (), 0);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (&s_grid, "web-02", "online", S_WAIT_MS));
    assert_int_equal (s_dlq_total (job), 1);
    doc = grid_call (&s_grid, "dlq.get", "entry", entry_id, NULL);
    assert_true (grid_str_is (s_data (doc), "job", job));
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 15000, "dlq", "list", NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, entry_id));
    assert_true (s_contains (out, "apt install"));
    free (out);
    free (err);

    //  A retry that fails keeps the entry; one that completes clears it
    code = grid_cli (&s_grid, &out, &err, 15000, "dlq", "retry", entry_id,
                     NULL);
    assert_int_equal (code, 0);
    char *retry = strstr (out, "job j-");
    assert_non_null (retry);
    char first [20];
    memcpy (first, retry + 4, 19);
    first [19] = 0;
    free (out);
    free (err);
    s_expect_final (first, "failed");
    assert_int_equal (s_dlq_total (job), 1);
    doc = grid_call (&s_grid, "dlq.get", "entry", entry_id, NULL);
    assert_true (grid_str_is (s_data (doc), "retry_job", first));
    pv_doc_destroy (&doc);
    s_set_failing ("web-01", false);
    s_set_failing ("web-02", false);
    doc = grid_call (&s_grid, "dlq.retry", "entry", entry_id, NULL);
    const pv_t *data = s_data (doc);
    char *second = s_str (data, "job");
    assert_true (grid_str_is (data, "retry_of", job));
    pv_doc_destroy (&doc);
    s_expect_final (second, "completed");
    assert_int_equal (s_dlq_total (job), 0);
    doc = grid_call (&s_grid, "dlq.get", "entry", entry_id, NULL);
    s_expect_code (doc, "not_found");
    pv_doc_destroy (&doc);

    //  Hostile ids are refused, never crash
    doc = grid_call (&s_grid, "dlq.get", "entry", "j-0/x/../web", NULL);
    s_expect_code (doc, "bad_request");
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "dlq.retry", "entry", "j-000000000000-0000",
                     NULL);
    s_expect_code (doc, "not_found");
    pv_doc_destroy (&doc);

    //  Purge: a viewer reads but may not purge; an operator may
    doc = grid_call_as (&s_grid, s_viewer, "dlq.list", NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = grid_call_as (&s_grid, s_viewer, "dlq.purge", "job", fleet, NULL);
    s_expect_code (doc, "forbidden");
    pv_doc_destroy (&doc);
    assert_int_equal (s_dlq_total (fleet), 2);
    code = grid_cli (&s_grid, &out, &err, 15000, "dlq", "purge", NULL);
    assert_int_equal (code, 2);
    free (out);
    free (err);
    code = grid_cli_as (&s_grid, s_operator, &out, &err, 15000, "dlq",
                        "purge", "--job", fleet, NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, "2 dead-letter entries purged"));
    free (out);
    free (err);
    assert_int_equal (s_dlq_total (fleet), 0);
    free (second);
    free (entry_id);
    free (fleet);
    free (job);
}

//  ---------------------------------------------------------------------
//  queue.stats, node.workers, node.history

static int64_t
s_int_at (const pv_t *map, const char *first, const char *second)
{
    int64_t value = -1;
    const pv_t *inner = pv_map_get (map, first);
    pv_get_int (second ? pv_map_get (inner, second) : inner, &value);
    return value;
}

static void
test_it_queue_stats_and_workers (void **state)
{
    char *sleeper = grid_submit_id (&s_grid,
        "target: node:web-01\n"
        "priority: 7\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_non_null (sleeper);
    //  node.workers names it once the agent started it and it reported
    //  its progress
    bool seen = false;
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (!seen && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "node.workers", "node", "web-01",
                                   NULL);
        const pv_t *slots = pv_map_get (s_data (doc), "slots");
        for (size_t index = 0; index < pv_size (slots); index++) {
            const pv_t *slot = pv_array_at (slots, index);
            //  test sleep reports its percent (progress_interval, 1 s)
            if (grid_str_is (slot, "job", sleeper)
                && grid_str_is (slot, "status", "running")
                && pv_map_get (slot, "percent")) {
                int64_t percent = s_int_at (slot, "percent", NULL);
                assert_true (percent >= 0 && percent <= 100);
                assert_true (grid_str_is (slot, "action", "test.sleep"));
                assert_int_equal (s_int_at (slot, "step", NULL), 0);
                assert_int_equal (s_int_at (slot, "attempt", NULL), 1);
                assert_true (pv_type (pv_map_get (slot, "since")) == PV_STR);
                seen = true;
            }
        }
        if (!seen)
            zclock_sleep (50);
        pv_doc_destroy (&doc);
    }
    assert_true (seen);
    pv_doc_t *doc = grid_call (&s_grid, "node.workers", "node", "web-01",
                               NULL);
    const pv_t *data = s_data (doc);
    assert_int_equal (s_int_at (data, "concurrency", NULL), 2);
    //  Earlier tests ran and failed work on web-01
    assert_true (s_int_at (data, "counters", "run") >= 1);
    assert_true (s_int_at (data, "counters", "failed") >= 1);
    assert_true (s_int_at (data, "counters", "retried") >= 1);
    //  Any-node figures: the dead-letter test's any jobs were claimed
    assert_true (s_int_at (data, "counters", "claims") >= 0);
    assert_true (s_int_at (data, "counters", "reclaimed") >= 0);
    assert_true (s_int_at (data, "counters", "lease_expirations") >= 0);
    pv_doc_destroy (&doc);

    doc = grid_call (&s_grid, "queue.stats", NULL);
    data = s_data (doc);
    assert_true (s_int_at (data, "cells", "running") >= 1);
    assert_true (s_int_at (data, "jobs", "running") >= 1);
    assert_true (s_int_at (data, "jobs", "completed") >= 1);
    //  Waits and runs were sampled (the earlier jobs ran)
    assert_true (s_int_at (pv_map_get (data, "wait_ms"), "5m", "count") >= 1);
    assert_true (s_int_at (pv_map_get (data, "run_ms"), "1h", "count") >= 1);
    const pv_t *any_node = pv_map_get (data, "any_node");
    assert_true (s_int_at (any_node, "claims", NULL) >= 3);
    assert_true (s_int_at (any_node, "reclaims", NULL) >= 0);
    assert_true (s_int_at (any_node, "waiting", NULL) >= 0);
    //  The failed retry of the dead-letter test left its own entry
    assert_int_equal (s_int_at (data, "dead_letter", NULL), s_dlq_total (NULL));
    assert_true (s_int_at (data, "dead_letter", NULL) >= 1);
    const pv_t *by_priority = pv_map_get (data, "by_priority");
    assert_true (pv_size (by_priority) >= 1);
    const pv_t *top = pv_array_at (by_priority, 0);
    assert_int_equal (s_int_at (top, "priority", NULL), 7);
    assert_int_equal (s_int_at (top, "jobs", "running"), 1);
    assert_int_equal (s_int_at (top, "cells", "running"), 1);
    const pv_t *by_action = pv_map_get (data, "by_action");
    bool sleep_row = false;
    for (size_t index = 0; index < pv_size (by_action); index++) {
        const pv_t *row = pv_array_at (by_action, index);
        if (grid_str_is (row, "action", "test.sleep")) {
            assert_int_equal (s_int_at (row, "cells", "running"), 1);
            sleep_row = true;
        }
    }
    assert_true (sleep_row);
    assert_int_equal (pv_type (pv_map_get (data, "oldest_pending")), PV_NIL);
    //  The broker's limit and what it covers now
    const pv_t *limits = pv_map_get (data, "limits");
    assert_int_equal (pv_size (limits), 1);
    assert_true (grid_str_is (pv_array_at (limits, 0), "pattern",
                              "test.sleep"));
    assert_int_equal (s_int_at (pv_array_at (limits, 0), "max", NULL), 5);
    assert_int_equal (s_int_at (pv_array_at (limits, 0), "running", NULL), 1);
    pv_doc_destroy (&doc);

    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 15000, "queue", "stats", NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, "test.sleep"));
    assert_true (s_contains (out, "last 5m: p50 "));
    assert_true (s_contains (out, "LIMIT"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 15000, "node", "workers", "web-01",
                     NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, sleeper));
    assert_true (s_contains (out, "test.sleep"));
    assert_true (s_contains (out, "PROGRESS"));
    assert_true (s_contains (out, "%"));
    free (out);
    free (err);
    //  Unknown and hostile node ids
    doc = grid_call (&s_grid, "node.workers", "node", "no-such-node", NULL);
    s_expect_code (doc, "not_found");
    pv_doc_destroy (&doc);
    doc = grid_call (&s_grid, "node.history", "node", "../etc\x01", NULL);
    s_expect_code (doc, "not_found");
    pv_doc_destroy (&doc);

    doc = grid_call (&s_grid, "job.cancel", "job", sleeper, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    s_expect_final (sleeper, "cancelled");
    free (sleeper);
}

static void
test_it_queue_history_after_reregistration (void **state)
{
    //  web-02 comes back without its rke2 backend
    int slot = -1;
    for (size_t index = 0; index < s_grid.agent_count; index++)
        if (s_grid.agent_pids [index]
            && strcmp (s_grid.agent_ids [index], "web-02") == 0)
            slot = (int) index;
    assert_true (slot >= 0);
    grid_stop_agent (&s_grid, slot, false);
    assert_true (s_start_agent ("web-02", "rke2") >= 0);
    pv_doc_t *doc = grid_call (&s_grid, "node.history", "node", "web-02",
                               NULL);
    const pv_t *history = pv_map_get (s_data (doc), "history");
    assert_int_equal (pv_size (history), 2);
    const pv_t *newest = pv_array_at (history, 0);
    assert_true (grid_str_is (newest, "event", "changed"));
    const pv_t *removed = pv_map_get (newest, "removed");
    assert_int_equal (pv_size (removed), 2);
    assert_true (pv_str_eq (pv_array_at (removed, 0), "rke2.start"));
    assert_true (pv_str_eq (pv_array_at (removed, 1), "rke2.stop"));
    assert_int_equal (pv_size (pv_map_get (newest, "added")), 0);
    const pv_t *oldest = pv_array_at (history, 1);
    assert_true (grid_str_is (oldest, "event", "registered"));
    assert_int_equal (s_int_at (oldest, "seq", NULL), 1);
    assert_int_equal (s_int_at (newest, "seq", NULL), 2);
    pv_doc_destroy (&doc);
    //  The same backends again: no new entry
    doc = grid_call (&s_grid, "node.history", "node", "web-01", NULL);
    assert_int_equal (pv_size (pv_map_get (s_data (doc), "history")), 1);
    pv_doc_destroy (&doc);
    //  node info shows each backend's version
    doc = grid_call (&s_grid, "node.get", "node", "web-02", NULL);
    const pv_t *backends = pv_map_get (s_data (doc), "backends");
    assert_true (pv_size (backends) >= 1);
    for (size_t index = 0; index < pv_size (backends); index++) {
        const pv_t *backend = pv_array_at (backends, index);
        //  The test backend is 1.1 (it gained mark), the others 1.0
        assert_true (grid_str_is (backend, "version", "1.0")
                     || grid_str_is (backend, "version", "1.1"));
    }
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 15000, "node", "history",
                         "web-02", NULL);
    assert_int_equal (code, 0);
    assert_true (s_contains (out, "-rke2.start -rke2.stop"));
    assert_true (s_contains (out, "registered"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 15000, "node", "info", "web-02",
                     NULL);
    assert_true (s_contains (out, "VERSION"));
    free (out);
    free (err);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    //  apt-get fails while <dir>/fail-<node> exists
    char path [400];
    snprintf (path, sizeof path, "%s/tools", s_grid.dir);
    if (mkdir (path, 0700) != 0)
        return -1;
    snprintf (path, sizeof path, "%s/tools/apt-get", s_grid.dir);
    FILE *file = fopen (path, "w");
    if (!file)
        return -1;
    fprintf (file, "#!/bin/sh\n"
                   "if [ -e \"$GRID_FAKE_LOG\" ]; then\n"
                   "  echo 'apt-get: simulated failure' >&2\n"
                   "  exit 100\n"
                   "fi\n"
                   "echo \"installed $*\"\n");
    fclose (file);
    chmod (path, 0755);
    snprintf (path, sizeof path, "%s/broker.yaml", s_grid.dir);
    file = fopen (path, "w");
    if (!file)
        return -1;
    fprintf (file, "limits:\n  test.sleep: 5\n");
    fclose (file);
    if (grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL)
        || grid_keygen (&s_grid, "operator", s_operator, sizeof s_operator,
                        NULL))
        return -1;
    snprintf (s_viewer_arg, sizeof s_viewer_arg, "viewer:%s", s_viewer);
    snprintf (s_operator_arg, sizeof s_operator_arg, "operator:%s",
              s_operator);
    if (s_start_broker () != 0 || s_start_agent ("web-01", NULL) < 0
        || s_start_agent ("web-02", NULL) < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_queue_retry_links_both_ways),
        cmocka_unit_test (test_it_queue_dead_letter_lands_survives_and_clears),
        cmocka_unit_test (test_it_queue_stats_and_workers),
        cmocka_unit_test (test_it_queue_history_after_reregistration),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
