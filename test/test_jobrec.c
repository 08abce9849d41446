/*  =========================================================================
    test_jobrec - store layout of jobs: header, cells and events written,
    read back as the client record, and rebuilt for the scheduler.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../broker/jobrec.h"
#include "../proto/conf.h"

typedef struct {
    char dir [64];
    store_t *store;
    store_txn_t *txn;
    pw_t *scratch;
} fixture_t;

static int
s_setup (void **state)
{
    fixture_t *fixture = (fixture_t *) calloc (1, sizeof (fixture_t));
    strcpy (fixture->dir, "/tmp/grid-jobrec-XXXXXX");
    if (!mkdtemp (fixture->dir))
        return -1;
    char err [256];
    fixture->store = store_open (fixture->dir, 1 << 20, 64 << 20, err, sizeof err);
    if (!fixture->store)
        return -1;
    fixture->txn = store_begin (fixture->store, true);
    fixture->scratch = pw_new ();
    *state = fixture;
    return 0;
}

static int
s_teardown (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    store_abort (&fixture->txn);
    store_destroy (&fixture->store);
    pw_destroy (&fixture->scratch);
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", fixture->dir);
    if (system (command) != 0)
        return -1;
    free (fixture);
    return 0;
}

//  A job of [leaf, branch[leaf, leaf]] over two nodes, as the scheduler
//  would hold it mid-run.
static sched_job_t *
s_job (void)
{
    const char *yaml =
        "target: {scope: group, value: web}\n"
        "strategy: continue\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: hi}}\n"
        "  - tasks:\n"
        "      - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "      - {backend: test, action: fail, max_retries: 2}\n";
    pv_doc_t *doc = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &doc, err, sizeof err), 0);
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    assert_int_equal (job_spec_decode (pv_doc_root (doc), &spec, &errors), 0);
    pv_doc_destroy (&doc);
    sched_job_t *job = sched_job_new ("j-0193a1b2c3d4-0001", &spec);
    assert_non_null (job);
    assert_int_equal (job->step_count, 3);
    job->status = SCHED_JOB_RUNNING;
    job->step = 1;
    job->created_at_ms = 1763708451123;
    job->updated_at_ms = 1763708452000;
    job->expected_count = 2;
    job->expected = (char **) calloc (2, sizeof (char *));
    job->expected [0] = strdup ("web-01");
    job->expected [1] = strdup ("web-02");
    job->cells = (sched_cell_t *) calloc (6, sizeof (sched_cell_t));
    //  Step 0 done on both; web-01 retried step 2 once and is running it.
    for (int n = 0; n < 2; n++) {
        sched_cell_t *cell = &job->cells [n];
        cell->status = SCHED_CELL_SUCCESS;
        cell->attempt = 1;
        cell->attempts = (sched_attempt_t *) calloc (1, sizeof (sched_attempt_t));
        cell->attempt_count = 1;
        cell->attempts [0] = (sched_attempt_t) {1, SCHED_CELL_SUCCESS,
                                                strdup ("hi\n"), strdup (""), 0,
                                                12, false, NULL, 0, NULL, false,
                                            0, 0, 0, 0, false, 0, 0, 0};
        cell->attempts [0].data = (proto_kv_t *) calloc (1, sizeof (proto_kv_t));
        cell->attempts [0].data [0].key = strdup ("hostname");
        cell->attempts [0].data [0].value = strdup (n ? "web-02.lan" : "web-01.lan");
        cell->attempts [0].data_count = 1;
    }
    sched_cell_t *cell = &job->cells [2 * 2 + 0];
    cell->status = SCHED_CELL_RUNNING;
    cell->attempt = 2;
    cell->attempts = (sched_attempt_t *) calloc (1, sizeof (sched_attempt_t));
    cell->attempt_count = 1;
    cell->attempts [0] = (sched_attempt_t) {1, SCHED_CELL_FAILED, strdup (""),
                                            strdup ("boom"), 1, 3, false, NULL, 0,
                                            NULL, false,
                                            0, 0, 0, 0, false, 0, 0, 0};
    return job;
}

static void
s_save (fixture_t *fixture, sched_job_t *job)
{
    assert_int_equal (jobrec_save_header (fixture->txn, job, fixture->scratch), 0);
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t n = 0; n < job->expected_count; n++)
            if (job->cells [step * 2 + n].status != SCHED_CELL_PENDING)
                assert_int_equal (jobrec_save_cell (fixture->txn, job,
                                                    (uint32_t) step,
                                                    job->expected [n],
                                                    fixture->scratch), 0);
}

static void
test_jobrec_record_has_grid_shape (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    s_save (fixture, job);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL, NULL, false, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    const pv_t *record = pv_doc_root (doc);
    const char *keys [] = {"id", "target", "tasks", "strategy", "priority",
                           "status", "step", "steps", "expected", "results",
                           "created_at", "updated_at"};
    for (size_t index = 0; index < sizeof keys / sizeof keys [0]; index++)
        assert_non_null (pv_map_get (record, keys [index]));
    assert_true (pv_str_eq (pv_map_get (record, "status"), "running"));
    assert_true (pv_str_eq (pv_map_get (record, "strategy"), "continue"));
    assert_true (pv_str_eq (pv_map_get (record, "created_at"), "2025-11-21T07:00:51.123Z"));
    const pv_t *results = pv_map_get (record, "results");
    assert_int_equal (pv_size (results), 3);
    const pv_t *done = pv_map_get (pv_map_get (results, "0"), "web-02");
    assert_true (pv_str_eq (pv_map_get (done, "status"), "success"));
    assert_true (pv_str_eq (pv_map_get (done, "output"), "hi\n"));
    assert_true (pv_str_eq (pv_map_get (pv_map_get (done, "data"), "hostname"),
                            "web-02.lan"));
    //  Not yet written: pending, with every field present.
    const pv_t *pending = pv_map_get (pv_map_get (results, "1"), "web-01");
    assert_true (pv_str_eq (pv_map_get (pending, "status"), "pending"));
    assert_non_null (pv_map_get (pending, "exit_code"));
    //  A retried cell shows the attempt count and keeps the earlier one.
    const pv_t *retried = pv_map_get (pv_map_get (results, "2"), "web-01");
    assert_true (pv_str_eq (pv_map_get (retried, "status"), "running"));
    int64_t attempts = 0;
    assert_int_equal (pv_get_int (pv_map_get (retried, "attempts"), &attempts), 0);
    assert_int_equal (attempts, 2);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

static void
test_jobrec_load_rebuilds_the_job (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    s_save (fixture, job);
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    assert_string_equal (copy->id, job->id);
    assert_int_equal (copy->status, SCHED_JOB_RUNNING);
    assert_int_equal (copy->step, 1);
    assert_int_equal (copy->expected_count, 2);
    assert_string_equal (copy->expected [1], "web-02");
    assert_int_equal (copy->cells [1].status, SCHED_CELL_SUCCESS);
    assert_string_equal (copy->cells [1].attempts [0].output, "hi\n");
    assert_int_equal (copy->cells [1].attempts [0].data_count, 1);
    assert_string_equal (copy->cells [1].attempts [0].data [0].value, "web-02.lan");
    assert_int_equal (copy->cells [2].status, SCHED_CELL_PENDING);
    assert_int_equal (copy->cells [4].status, SCHED_CELL_RUNNING);
    assert_int_equal (copy->cells [4].attempt, 2);
    assert_string_equal (copy->cells [4].attempts [0].error, "boom");
    assert_int_equal (copy->created_at_ms, job->created_at_ms);
    assert_int_equal (copy->spec->strategy, JOB_STRATEGY_CONTINUE);
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
    assert_int_equal (jobrec_load (fixture->txn, "j-000000000000-0000", &copy),
                      STORE_ENOTFOUND);
}

//  A broadcast's dispatched cells are not stored (docs/SCHEDULING.md
//  R16): the record of a live job takes them from the scheduler's job,
//  and a load tells a cell with a record from one without.
static void
test_jobrec_record_shows_unsaved_live_cells (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    s_save (fixture, job);
    //  Step 1 went out to both nodes after the save
    for (int n = 0; n < 2; n++) {
        job->cells [1 * 2 + n].status = SCHED_CELL_DISPATCHED;
        job->cells [1 * 2 + n].attempt = 1;
    }
    const char *read [] = {"pending", "dispatched"};
    for (int live = 0; live < 2; live++) {
        pw_t *writer = pw_new ();
        assert_int_equal (jobrec_write_record (fixture->txn, job->id,
                                               live ? job : NULL, NULL, false, writer),
                          0);
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer),
                                         &doc, NULL, 0), 0);
        const pv_t *results = pv_map_get (pv_doc_root (doc), "results");
        const pv_t *cell = pv_map_get (pv_map_get (results, "1"), "web-02");
        assert_true (pv_str_eq (pv_map_get (cell, "status"), read [live]));
        assert_non_null (pv_map_get (cell, "exit_code"));
        //  Stored cells read from the store either way
        cell = pv_map_get (pv_map_get (results, "2"), "web-01");
        assert_true (pv_str_eq (pv_map_get (cell, "status"), "running"));
        pv_doc_destroy (&doc);
        pw_destroy (&writer);
    }
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    assert_true (copy->cells [0].stored);
    assert_false (copy->cells [1 * 2 + 1].stored);
    assert_int_equal (copy->cells [1 * 2 + 1].status, SCHED_CELL_PENDING);
    assert_true (copy->cells [2 * 2 + 0].stored);
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
}

static void
test_jobrec_progress_counts_without_outputs (void **state)
{
    sched_job_t *job = s_job ();
    //  Step 1 (current): web-01 pending, web-02 failed for good
    job->cells [1 * 2 + 1].status = SCHED_CELL_FAILED;
    pw_t *writer = pw_new ();
    jobrec_write_progress (job, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *progress = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (progress, "id"), job->id));
    assert_true (pv_str_eq (pv_map_get (progress, "status"), "running"));
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (progress, "step"), &value), 0);
    assert_int_equal (value, 1);
    assert_int_equal (pv_get_int (pv_map_get (progress, "steps"), &value), 0);
    assert_int_equal (value, 3);
    assert_int_equal (pv_get_int (pv_map_get (progress, "nodes"), &value), 0);
    assert_int_equal (value, 2);
    assert_int_equal (pv_get_int (pv_map_get (progress, "done"), &value), 0);
    assert_int_equal (value, 1);
    assert_int_equal (pv_get_int (pv_map_get (progress, "failed"), &value), 0);
    assert_int_equal (value, 1);
    const pv_t *cells = pv_map_get (progress, "cells");
    assert_int_equal (pv_size (cells), 2);
    assert_int_equal (pv_get_int (pv_map_get (cells, "pending"), &value), 0);
    assert_int_equal (value, 1);
    assert_int_equal (pv_get_int (pv_map_get (cells, "failed"), &value), 0);
    assert_int_equal (value, 1);
    assert_true (pv_str_eq (pv_map_get (progress, "updated_at"),
                            "2025-11-21T07:00:52.000Z"));
    //  No per-node output: the answer does not grow with what nodes print
    assert_null (pv_map_get (progress, "results"));
    assert_null (pv_map_get (progress, "reason"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

static void
test_jobrec_events_append_in_order (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    const char *id = "j-0193a1b2c3d4-0002";
    assert_int_equal (jobrec_next_event_seq (fixture->txn, id), 1);
    assert_int_equal (jobrec_save_event (fixture->txn, id, 1, 1000, "submitted",
                                         NULL, -1, NULL, fixture->scratch), 0);
    assert_int_equal (jobrec_save_event (fixture->txn, id, 2, 1001, "dispatched",
                                         NULL, 0, "to 2 nodes", fixture->scratch), 0);
    assert_int_equal (jobrec_save_event (fixture->txn, id, 3, 1002, "succeeded",
                                         "web-01", 0, NULL, fixture->scratch), 0);
    //  Another job's events do not leak in.
    assert_int_equal (jobrec_save_event (fixture->txn, "j-0193a1b2c3d4-0003", 1,
                                         1003, "submitted", NULL, -1, NULL,
                                         fixture->scratch), 0);
    assert_int_equal (jobrec_next_event_seq (fixture->txn, id), 4);
    pw_t *writer = pw_new ();
    jobrec_write_events (fixture->txn, id, 1, 100, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    const pv_t *events = pv_doc_root (doc);
    assert_int_equal (pv_size (events), 2);
    assert_true (pv_str_eq (pv_map_get (pv_array_at (events, 0), "event"), "dispatched"));
    assert_true (pv_str_eq (pv_map_get (pv_array_at (events, 1), "node"), "web-01"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
}

static void
test_jobrec_delete_removes_everything (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    s_save (fixture, job);
    assert_int_equal (jobrec_save_event (fixture->txn, job->id, 1, 1000,
                                         "submitted", NULL, -1, NULL,
                                         fixture->scratch), 0);
    assert_int_equal (jobrec_delete (fixture->txn, job->id), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL, NULL, false, writer),
                      STORE_ENOTFOUND);
    assert_int_equal (store_count (fixture->txn, STORE_DB_RESULTS), 0);
    assert_int_equal (store_count (fixture->txn, STORE_DB_EVENTS), 0);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

//  The idempotency index names the job a key made, with its spec's
//  digest; deleting the job frees the key, but not a key that another job
//  holds now.
static void
test_jobrec_idempotency_index (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    job->spec->idempotency_key = strdup ("deploy-42");
    s_save (fixture, job);
    uint8_t digest [JOBREC_DIGEST_LEN], other [JOBREC_DIGEST_LEN];
    jobrec_digest ("spec", 4, digest);
    jobrec_digest ("spec!", 5, other);
    assert_memory_not_equal (digest, other, JOBREC_DIGEST_LEN);
    char owner [JOB_ID_LEN + 1];
    uint8_t got [JOBREC_DIGEST_LEN];
    assert_int_equal (jobrec_idempotency_get (fixture->txn, "deploy-42", owner,
                                              got), STORE_ENOTFOUND);
    assert_int_equal (jobrec_idempotency_put (fixture->txn, "deploy-42",
                                              job->id, digest), 0);
    assert_int_equal (jobrec_idempotency_get (fixture->txn, "deploy-42", owner,
                                              got), 0);
    assert_string_equal (owner, job->id);
    assert_memory_equal (got, digest, JOBREC_DIGEST_LEN);
    //  A malformed record is reported, not trusted
    assert_int_equal (store_put (fixture->txn, STORE_DB_IDEMPOTENCY, "bad", 3,
                                 "j-1", 3), 0);
    assert_int_equal (jobrec_idempotency_get (fixture->txn, "bad", owner, got),
                      -2);
    //  Deleting the job deletes its key
    assert_int_equal (jobrec_delete (fixture->txn, job->id), 0);
    assert_int_equal (jobrec_idempotency_get (fixture->txn, "deploy-42", owner,
                                              got), STORE_ENOTFOUND);
    //  A key that now names another job stays
    s_save (fixture, job);
    assert_int_equal (jobrec_idempotency_put (fixture->txn, "deploy-42",
                                              "j-0193a1b2c3d4-0002", other), 0);
    assert_int_equal (jobrec_delete (fixture->txn, job->id), 0);
    assert_int_equal (jobrec_idempotency_get (fixture->txn, "deploy-42", owner,
                                              got), 0);
    assert_string_equal (owner, "j-0193a1b2c3d4-0002");
    sched_job_destroy (&job);
}

//  A finished job: its step is its step count after a reload, a named
//  node that did not run keeps its rows and reason, the members a group
//  did not run are listed in not_run, and progress counts every failure
//  kind.
static void
test_jobrec_not_run_survives_reload (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    job->status = SCHED_JOB_PARTIAL_FAILURE;
    job->step = job->step_count;
    job->reason = strdup ("1 of 2 nodes not run: web-02 drained");
    for (size_t step = 0; step < 3; step++) {
        sched_cell_t *cell = &job->cells [step * 2 + 1];
        for (size_t at = 0; at < cell->attempt_count; at++) {
            free (cell->attempts [at].output);
            free (cell->attempts [at].error);
            for (size_t item = 0; item < cell->attempts [at].data_count; item++) {
                free (cell->attempts [at].data [item].key);
                free (cell->attempts [at].data [item].value);
            }
            free (cell->attempts [at].data);
        }
        free (cell->attempts);
        memset (cell, 0, sizeof *cell);
        cell->status = SCHED_CELL_DRAINED;
        cell->reason = strdup ("drained");
        job->cells [step * 2].status = SCHED_CELL_SUCCESS;
    }
    job->not_run_count = 2;
    job->not_run = (sched_not_run_t *) calloc (2, sizeof (sched_not_run_t));
    job->not_run [0] = (sched_not_run_t) {strdup ("web-02"),
                                          SCHED_CELL_DRAINED,
                                          strdup ("drained"), true};
    job->not_run [1] = (sched_not_run_t) {strdup ("web-07"),
                                          SCHED_CELL_OFFLINE,
                                          strdup ("offline since 12:01:07"),
                                          false};
    s_save (fixture, job);

    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    assert_int_equal (copy->step, 3);
    assert_int_equal (copy->not_run_count, 2);
    assert_string_equal (copy->not_run [1].node, "web-07");
    assert_int_equal (copy->not_run [1].status, SCHED_CELL_OFFLINE);
    assert_string_equal (copy->not_run [1].reason, "offline since 12:01:07");
    assert_true (copy->not_run [0].named);
    assert_false (copy->not_run [1].named);
    assert_int_equal (copy->cells [2 * 2 + 1].status, SCHED_CELL_DRAINED);
    assert_string_equal (copy->cells [2 * 2 + 1].reason, "drained");

    pw_t *writer = pw_new ();
    jobrec_write_progress (copy, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (pv_doc_root (doc), "step"),
                                  &value), 0);
    assert_int_equal (value, 3);
    assert_int_equal (pv_get_int (pv_map_get (pv_doc_root (doc), "failed"),
                                  &value), 0);
    assert_int_equal (value, 1);
    pv_doc_destroy (&doc);

    //  The client record: the named node's rows carry the reason; only
    //  the member is in not_run
    pw_reset (writer);
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL, NULL, false, writer), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *record = pv_doc_root (doc);
    const pv_t *cell = pv_map_get (pv_map_get (pv_map_get (record, "results"),
                                               "1"), "web-02");
    assert_true (pv_str_eq (pv_map_get (cell, "status"), "drained"));
    assert_true (pv_str_eq (pv_map_get (cell, "reason"), "drained"));
    const pv_t *ok = pv_map_get (pv_map_get (pv_map_get (record, "results"),
                                             "0"), "web-01");
    assert_null (pv_map_get (ok, "reason"));
    const pv_t *not_run = pv_map_get (record, "not_run");
    assert_int_equal (pv_size (not_run), 1);
    assert_true (pv_str_eq (pv_map_get (pv_array_at (not_run, 0), "node"),
                            "web-07"));
    assert_true (pv_str_eq (pv_map_get (pv_array_at (not_run, 0), "status"),
                            "offline"));
    assert_true (pv_str_eq (pv_map_get (pv_array_at (not_run, 0), "reason"),
                            "offline since 12:01:07"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
}

//  Optional event fields are left out, never nil.
static void
test_jobrec_events_leave_out_optional_fields (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    const char *id = "j-0193a1b2c3d4-0004";
    assert_int_equal (jobrec_save_event (fixture->txn, id, 1, 1000, "submitted",
                                         NULL, -1, NULL, fixture->scratch), 0);
    assert_int_equal (jobrec_save_event (fixture->txn, id, 2, 1001, "lost",
                                         "web-01", 0, "node went offline",
                                         fixture->scratch), 0);
    pw_t *writer = pw_new ();
    jobrec_write_events (fixture->txn, id, 0, 100, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *first = pv_array_at (pv_doc_root (doc), 0);
    assert_int_equal (pv_size (first), 3);
    assert_null (pv_map_get (first, "node"));
    assert_null (pv_map_get (first, "step"));
    assert_null (pv_map_get (first, "detail"));
    const pv_t *second = pv_array_at (pv_doc_root (doc), 1);
    assert_int_equal (pv_size (second), 6);
    assert_true (pv_str_eq (pv_map_get (second, "detail"), "node went offline"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
}

//  A late result of an attempt the broker ended fills the stored cell of
//  a finished job, once; any other result changes nothing.
static void
test_jobrec_fill_cell_from_late_result (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    //  web-01's step 2 attempt 2 was cancelled by the broker
    sched_cell_t *cell = &job->cells [2 * 2 + 0];
    cell->status = SCHED_CELL_CANCELLED;
    cell->attempts = (sched_attempt_t *) realloc (cell->attempts,
                                                  2 * sizeof (sched_attempt_t));
    cell->attempts [1] = (sched_attempt_t) {2, SCHED_CELL_CANCELLED, NULL,
                                            strdup ("cancelled by request"),
                                            -1, 0, false, NULL, 0, NULL, false,
                                            0, 0, 0, 0, false, 0, 0, 0};
    cell->attempt_count = 2;
    s_save (fixture, job);
    proto_msg_t result;
    memset (&result, 0, sizeof result);
    result.type = PROTO_RESULT;
    result.job = job->id;
    result.node = (char *) "web-01";
    result.step = 2;
    result.attempt = 1;
    result.status = (char *) "cancelled";
    result.output = (char *) "half way\n";
    result.exit_code = 143;
    result.duration_ms = 1234;
    //  Another attempt: nothing
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 0);
    result.attempt = 2;
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 1);
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 0);
    //  A cell the agent finished itself: nothing
    result.step = 0;
    result.attempt = 1;
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 0);
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    const sched_attempt_t *filled = &copy->cells [2 * 2].attempts [1];
    assert_int_equal (copy->cells [2 * 2].status, SCHED_CELL_CANCELLED);
    assert_string_equal (filled->output, "half way\n");
    assert_string_equal (filled->error, "cancelled by request");
    assert_int_equal (filled->exit_code, 143);
    assert_int_equal (filled->duration_ms, 1234);
    assert_string_equal (copy->cells [0].attempts [0].output, "hi\n");
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
}

//  A finished job's cell the broker declared lost: the agent's success
//  that comes afterwards is recorded beside the verdict, once, with the
//  time it came; the verdict's status, exit code, duration and output
//  stay, and the record survives a reload and reads as late: {...}.
static void
test_jobrec_late_result_beside_verdict (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    sched_cell_t *cell = &job->cells [2 * 2 + 0];       //  Step 2, web-01
    cell->status = SCHED_CELL_LOST;
    cell->attempts = (sched_attempt_t *) realloc (cell->attempts,
                                                  2 * sizeof (sched_attempt_t));
    cell->attempts [1] = (sched_attempt_t) {2, SCHED_CELL_LOST, NULL,
                                            strdup ("node went offline"),
                                            -1, 700, false, NULL, 0, NULL,
                                            false, 0, 0, 0, 0, false, 0, 0, 0};
    cell->attempt_count = 2;
    s_save (fixture, job);
    proto_msg_t result;
    memset (&result, 0, sizeof result);
    result.type = PROTO_RESULT;
    result.job = job->id;
    result.node = (char *) "web-01";
    result.step = 2;
    result.attempt = 2;
    result.status = (char *) "success";
    result.output = (char *) "all done\n";
    result.exit_code = 0;
    result.duration_ms = 20000;
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result,
                                        1764715267000, fixture->scratch), 2);
    //  Once
    result.status = (char *) "failed";
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1764715268000,
                                        fixture->scratch), 0);
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    const sched_attempt_t *verdict = &copy->cells [2 * 2].attempts [1];
    assert_int_equal (copy->cells [2 * 2].status, SCHED_CELL_LOST);
    assert_int_equal (verdict->status, SCHED_CELL_LOST);
    assert_int_equal (verdict->exit_code, -1);
    assert_int_equal (verdict->duration_ms, 700);
    assert_true (!verdict->output || !*verdict->output);
    assert_true (verdict->has_late);
    assert_int_equal (verdict->late_status, SCHED_CELL_SUCCESS);
    assert_int_equal (verdict->late_exit_code, 0);
    assert_int_equal (verdict->late_at_ms, 1764715267000);
    sched_job_destroy (&copy);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL,
                                           NULL, false, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *shown = pv_map_get (pv_map_get (pv_map_get (pv_doc_root (doc),
                                                            "results"),
                                                "2"),
                                    "web-01");
    assert_true (pv_str_eq (pv_map_get (shown, "status"), "lost"));
    const pv_t *late = pv_map_get (shown, "late");
    assert_non_null (late);
    assert_true (pv_str_eq (pv_map_get (late, "status"), "success"));
    assert_true (pv_str_eq (pv_map_get (late, "at"),
                            "2025-12-02T22:41:07.000Z"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

//  An any-node cell: attempts name their node; a late result stays in the
//  history and does not become the cell's outcome; attempts count by
//  number; a waiting cell says why; all of it survives a reload.
static void
test_jobrec_any_node_history (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    sched_cell_t *cell = &job->cells [0];          //  Step 0, web-01
    sched_cell_clear (cell);
    cell->status = SCHED_CELL_SUCCESS;
    cell->attempt = 1;
    cell->attempts = (sched_attempt_t *) calloc (3, sizeof (sched_attempt_t));
    cell->attempt_count = 3;
    cell->attempts [0] = (sched_attempt_t) {1, SCHED_CELL_LOST, strdup (""),
        strdup ("reclaimed from web-02 (lease expired)"), -1, 0, false, NULL,
        0, strdup ("web-02"), false, 0, 0, 0, 0, false, 0, 0, 0};
    cell->attempts [1] = (sched_attempt_t) {1, SCHED_CELL_SUCCESS,
        strdup ("mine\n"), strdup (""), 0, 5, false, NULL, 0,
        strdup ("web-01"), false, 0, 0, 0, 0, false, 0, 0, 0};
    cell->attempts [2] = (sched_attempt_t) {1, SCHED_CELL_SUCCESS,
        strdup ("late\n"), strdup (""), 0, 9, false, NULL, 0,
        strdup ("web-02"), true, 0, 0, 0, 0, false, 0, 0, 0};
    sched_cell_t *waiting = &job->cells [2 * 2 + 1];  //  Step 2, web-02
    waiting->waiting = strdup ("waiting: test.fail 1/1 running");
    assert_int_equal (jobrec_save_cell (fixture->txn, job, 2, "web-02",
                                        fixture->scratch), 0);
    s_save (fixture, job);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL, NULL, false, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *results = pv_map_get (pv_doc_root (doc), "results");
    const pv_t *any = pv_map_get (pv_map_get (results, "0"), "web-01");
    assert_true (pv_str_eq (pv_map_get (any, "output"), "mine\n"));
    int64_t attempts = 0;
    pv_get_int (pv_map_get (any, "attempts"), &attempts);
    assert_int_equal (attempts, 1);
    const pv_t *history = pv_map_get (any, "history");
    assert_int_equal (pv_size (history), 2);
    assert_true (pv_str_eq (pv_map_get (pv_array_at (history, 0), "node"),
                            "web-02"));
    bool late = false;
    pv_get_bool (pv_map_get (pv_array_at (history, 1), "late"), &late);
    assert_true (late);
    const pv_t *held = pv_map_get (pv_map_get (results, "2"), "web-02");
    assert_true (pv_str_eq (pv_map_get (held, "waiting"),
                            "waiting: test.fail 1/1 running"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    //  Reloaded: the nodes and the late mark come back
    sched_job_t *back = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &back), 0);
    const sched_cell_t *again = &back->cells [0];
    assert_int_equal (again->attempt_count, 3);
    assert_string_equal (again->attempts [0].node, "web-02");
    assert_true (again->attempts [2].late);
    assert_false (again->attempts [1].late);
    sched_job_destroy (&back);
    sched_job_destroy (&job);
}

//  A late result of a finished any-node job, from the node its step was
//  taken from, joins the history of the cell stored under the last
//  holder, once.
static void
test_jobrec_late_result_of_moved_job (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    const char *yaml = "target: any:group:web\n"
                       "tasks: [{backend: test, action: echo}]\n";
    pv_doc_t *doc = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &doc, err, sizeof err), 0);
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    assert_int_equal (job_spec_decode (pv_doc_root (doc), &spec, &errors), 0);
    pv_doc_destroy (&doc);
    sched_job_t *job = sched_job_new ("j-0193a1b2c3d4-0002", &spec);
    job->status = SCHED_JOB_COMPLETED;
    job->expected_count = 1;
    job->expected = (char **) calloc (1, sizeof (char *));
    job->expected [0] = strdup ("web-01");
    job->cells = (sched_cell_t *) calloc (1, sizeof (sched_cell_t));
    sched_cell_t *cell = &job->cells [0];
    cell->status = SCHED_CELL_SUCCESS;
    cell->attempt = 1;
    cell->attempts = (sched_attempt_t *) calloc (2, sizeof (sched_attempt_t));
    cell->attempt_count = 2;
    cell->attempts [0] = (sched_attempt_t) {1, SCHED_CELL_LOST, strdup (""),
        strdup ("reclaimed from web-02 (node offline)"), -1, 0, false, NULL,
        0, strdup ("web-02"), false, 0, 0, 0, 0, false, 0, 0, 0};
    cell->attempts [1] = (sched_attempt_t) {1, SCHED_CELL_SUCCESS,
        strdup ("mine\n"), strdup (""), 0, 5, false, NULL, 0,
        strdup ("web-01"), false, 0, 0, 0, 0, false, 0, 0, 0};
    assert_int_equal (jobrec_save_header (fixture->txn, job, fixture->scratch), 0);
    assert_int_equal (jobrec_save_cell (fixture->txn, job, 0, "web-01",
                                        fixture->scratch), 0);
    proto_msg_t result;
    memset (&result, 0, sizeof result);
    result.type = PROTO_RESULT;
    result.node = (char *) "web-02";
    result.job = job->id;
    result.step = 0;
    result.attempt = 1;
    result.status = (char *) "success";
    result.output = (char *) "late\n";
    result.error = (char *) "";
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 1);
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 1);
    //  A node that never held it: nothing
    result.node = (char *) "web-03";
    assert_int_equal (jobrec_fill_cell (fixture->txn, &result, 1000,
                                        fixture->scratch), 0);
    sched_job_t *back = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &back), 0);
    assert_int_equal (back->cells [0].attempt_count, 3);
    assert_true (back->cells [0].attempts [2].late);
    assert_string_equal (back->cells [0].attempts [2].node, "web-02");
    assert_int_equal (back->cells [0].status, SCHED_CELL_SUCCESS);
    sched_job_destroy (&back);
    sched_job_destroy (&job);
}

//  Decodes a job.output page written by jobrec_write_output_page and
//  checks its data (LEN bytes like EXPECT), next and size.
static void
s_assert_page (pw_t *writer, const char *expect, size_t len, int64_t next,
               int64_t size)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *page = pv_doc_root (doc);
    size_t got_len = 0;
    const char *got = pv_str (pv_map_get (page, "data"), &got_len);
    assert_int_equal (pv_type (pv_map_get (page, "data")), PV_BIN);
    assert_int_equal (got_len, len);
    if (len)
        assert_memory_equal (got, expect, len);
    int64_t value = -1;
    pv_get_int (pv_map_get (page, "next"), &value);
    assert_int_equal (value, next);
    pv_get_int (pv_map_get (page, "size"), &value);
    assert_int_equal (value, size);
    pv_doc_destroy (&doc);
    pw_reset (writer);
}

//  A stream kept in pieces reads back from any offset, across pieces, up
//  to a piece that has not arrived; a stream without pieces is its head;
//  deleting the job deletes the pieces.
static void
test_jobrec_output_pieces (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    job->cells [0].attempts [0].output_size = 35;
    s_save (fixture, job);
    const char *bytes = "0123456789abcdefghij..........VWXYZ";
    store_txn_t *txn = fixture->txn;
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-01", 1, false,
                                          0, bytes, 10), 0);
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-01", 1, false,
                                          10, bytes + 10, 10), 0);
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-01", 1, false,
                                          30, bytes + 30, 5), 0);
    //  Another attempt, stream and node stay apart
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-01", 2, false,
                                          20, "zzzzz", 5), 0);
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-01", 1, true,
                                          20, "eeeee", 5), 0);
    assert_int_equal (jobrec_save_output (txn, job->id, 0, "web-02", 1, false,
                                          20, "nnnnn", 5), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 0,
                                                false, 5, 100, true,
                                                writer), 0);
    s_assert_page (writer, bytes + 5, 15, 20, 35);
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 0,
                                                false, 0, 12, true,
                                                writer), 0);
    s_assert_page (writer, bytes, 12, 12, 35);
    //  Bytes 20..29 have not arrived
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 0,
                                                false, 20, 100, true,
                                                writer), 0);
    s_assert_page (writer, "", 0, 20, 35);
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 1,
                                                false, 32, 100, true,
                                                writer), 0);
    s_assert_page (writer, bytes + 32, 3, 35, 35);
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 0,
                                                false, 35, 100, true,
                                                writer), 0);
    s_assert_page (writer, "", 0, 35, 35);
    //  No error_size: the head is the stream
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-02", 0,
                                                false, 1, 100, true,
                                                writer), 0);
    s_assert_page (writer, "i\n", 2, 3, 3);
    //  No such attempt, cell or job
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 7,
                                                false, 0, 100, true,
                                                writer),
                      STORE_ENOTFOUND);
    assert_int_equal (jobrec_write_output_page (txn, job->id, 1, "web-02", 0,
                                                false, 0, 100, true,
                                                writer),
                      STORE_ENOTFOUND);
    //  Past the end of the stream
    assert_int_equal (jobrec_write_output_page (txn, job->id, 0, "web-01", 0,
                                                false, 36, 100, true, writer),
                      JOBREC_PAST_END);
    pw_reset (writer);
    //  Live: what arrived in a row from the start, pieces that never
    //  overlap but the same piece again
    assert_int_equal (jobrec_output_arrived (txn, job->id, 0, "web-01", 1,
                                             false), 20);
    assert_int_equal (jobrec_output_arrived (txn, job->id, 0, "web-01", 2,
                                             false), 0);
    assert_true (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 20,
                                     10, NULL));
    bool repeat = false;
    assert_true (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 10,
                                     10, &repeat));
    assert_true (repeat);
    assert_true (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 20,
                                     10, &repeat));
    assert_false (repeat);
    assert_false (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 10,
                                      21, NULL));
    assert_false (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 5,
                                      3, NULL));
    assert_false (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 25,
                                      6, NULL));
    assert_true (jobrec_output_fits (txn, job->id, 0, "web-01", 1, false, 35,
                                     100, NULL));
    assert_true (jobrec_output_fits (txn, job->id, 0, "web-01", 3, false, 7,
                                     1, NULL));
    assert_int_equal (jobrec_write_live_page (txn, job->id, 0, "web-01", 1,
                                              false, 4, 100, "running",
                                              writer), 0);
    s_assert_page (writer, bytes + 4, 16, 20, 20);
    assert_int_equal (jobrec_write_live_page (txn, job->id, 0, "web-01", 1,
                                              false, 21, 100, "running",
                                              writer), JOBREC_PAST_END);
    pw_reset (writer);
    assert_true (jobrec_expects (txn, job->id, 2, "web-02"));
    assert_false (jobrec_expects (txn, job->id, 3, "web-02"));
    assert_false (jobrec_expects (txn, job->id, 0, "web-03"));
    assert_false (jobrec_expects (txn, "j-0193a1b2c3d4-0009", 0, "web-01"));
    assert_int_equal (jobrec_delete (txn, job->id), 0);
    assert_int_equal (store_count (txn, STORE_DB_OUTPUTS), 0);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

//  One contract for cells: a lost cell's exit code reads -1 whatever a
//  late result brought; a skipped cell's reason is its error; whole
//  numbers in data stay ints, also once loaded again.
static void
test_jobrec_cell_contract (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ();
    //  web-02's step 0 was lost, then its result came late: exit 0
    sched_cell_t *lost = &job->cells [1];
    lost->status = SCHED_CELL_LOST;
    lost->attempts [0].status = SCHED_CELL_LOST;
    lost->attempts [0].exit_code = 0;
    free (lost->attempts [0].data [0].value);
    lost->attempts [0].data [0].value = strdup ("23639456");
    lost->attempts [0].data [0].number = true;
    //  web-02's step 1 was skipped, with why
    sched_cell_t *skipped = &job->cells [1 * 2 + 1];
    skipped->status = SCHED_CELL_SKIPPED;
    skipped->reason = strdup ("fail-fast: an earlier step failed");
    s_save (fixture, job);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL,
                                           NULL, false, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *results = pv_map_get (pv_doc_root (doc), "results");
    const pv_t *cell = pv_map_get (pv_map_get (results, "0"), "web-02");
    int64_t number = 0;
    assert_int_equal (pv_get_int (pv_map_get (cell, "exit_code"), &number),
                      0);
    assert_int_equal (number, -1);
    const pv_t *fact = pv_map_get (pv_map_get (cell, "data"), "hostname");
    assert_int_equal (pv_type (fact), PV_INT);
    assert_int_equal (pv_get_int (fact, &number), 0);
    assert_int_equal (number, 23639456);
    cell = pv_map_get (pv_map_get (results, "1"), "web-02");
    assert_true (pv_str_eq (pv_map_get (cell, "status"), "skipped"));
    assert_true (pv_str_eq (pv_map_get (cell, "error"),
                            "fail-fast: an earlier step failed"));
    assert_int_equal (pv_get_int (pv_map_get (cell, "exit_code"), &number),
                      0);
    assert_int_equal (number, -1);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    assert_true (copy->cells [1].attempts [0].data [0].number);
    assert_string_equal (copy->cells [1].attempts [0].data [0].value,
                         "23639456");
    assert_string_equal (copy->cells [3].reason,
                         "fail-fast: an earlier step failed");
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_jobrec_output_pieces, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_idempotency_index, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_record_has_grid_shape, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_load_rebuilds_the_job, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_record_shows_unsaved_live_cells, s_setup, s_teardown),
        cmocka_unit_test (test_jobrec_progress_counts_without_outputs),
        cmocka_unit_test_setup_teardown (test_jobrec_events_append_in_order, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_delete_removes_everything, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_not_run_survives_reload, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_fill_cell_from_late_result, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_events_leave_out_optional_fields, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_any_node_history, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_late_result_of_moved_job, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_late_result_beside_verdict, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_jobrec_cell_contract, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
