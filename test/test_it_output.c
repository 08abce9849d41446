/*  =========================================================================
    test_it_output - exactly-once submits and whole outputs end to end:
    request ids and idempotency keys (a retry gets the first answer, a
    different body under the same id or key is a conflict, across a broker
    restart), through a real gridbroker, a real gridagent and the real
    gridcli over ipc://.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/conf.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;

static int
s_setup (void **state)
{
    memset (&s_grid, 0, sizeof s_grid);
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0
        || grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0) {
        grid_dump_logs (&s_grid);
        grid_stop (&s_grid);
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

//  A job.submit of the YAML job JOB under request id ID. With REORDER,
//  the request's keys come in another order (same meaning).
static pv_doc_t *
s_submit_as (const char *id, const char *yaml, bool reorder)
{
    pv_doc_t *job = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &job, err, sizeof err),
                      0);
    pw_t *writer = pw_new ();
    if (reorder) {
        pw_map (writer, 4);
        pw_str (writer, "job");
        pw_pv (writer, pv_doc_root (job));
        pw_str (writer, "id");
        pw_str (writer, id);
        pw_str (writer, "type");
        pw_str (writer, "job.submit");
        pw_str (writer, "v");
        pw_int (writer, PROTO_VERSION);
    }
    else {
        proto_request_begin (writer, "job.submit", id, 1);
        pw_str (writer, "job");
        pw_pv (writer, pv_doc_root (job));
    }
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), 5000);
    pw_destroy (&writer);
    pv_doc_destroy (&job);
    return reply;
}

//  The job id of an ok submit reply (caller frees); fails the test on an
//  error reply.
static char *
s_job_of (pv_doc_t *reply)
{
    const pv_t *data = NULL;
    if (!grid_reply_ok (reply, &data)) {
        if (reply)
            pv_write_json (pv_doc_root (reply), stderr, 0);
        fail_msg ("the submit was refused");
    }
    char *id = pv_strdup (pv_map_get (data, "job"));
    assert_non_null (id);
    pv_doc_destroy (&reply);
    return id;
}

//  Asserts REPLY is an error of CODE and destroys it.
static void
s_assert_error (pv_doc_t *reply, const char *code)
{
    char *got = grid_reply_code (reply);
    if (!got || strcmp (got, code) != 0) {
        if (reply)
            pv_write_json (pv_doc_root (reply), stderr, 0);
        fail_msg ("expected error %s, got %s", code, got ? got : "ok/none");
    }
    free (got);
    pv_doc_destroy (&reply);
}

//  How many jobs the broker keeps.
static int64_t
s_job_total (void)
{
    pv_doc_t *reply = grid_call (&s_grid, "job.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t total = -1;
    assert_int_equal (pv_get_int (pv_map_get (data, "total"), &total), 0);
    pv_doc_destroy (&reply);
    return total;
}

static const char *s_echo_a =
    "target: node:web-01\n"
    "tasks:\n"
    "  - {backend: test, action: echo, params: {msg: first}}\n";

static const char *s_echo_b =
    "target: node:web-01\n"
    "tasks:\n"
    "  - {backend: test, action: echo, params: {msg: second}}\n";

//  ---------------------------------------------------------------------
//  A retried request id gets the first reply; another body under the same
//  id is a conflict and makes nothing.

static void
test_it_output_request_id_reuse (void **state)
{
    char *job = s_job_of (s_submit_as ("same-id-1", s_echo_a, false));
    int64_t total = s_job_total ();
    //  A retry, byte for byte and with its keys in another order
    char *again = s_job_of (s_submit_as ("same-id-1", s_echo_a, false));
    assert_string_equal (again, job);
    free (again);
    again = s_job_of (s_submit_as ("same-id-1", s_echo_a, true));
    assert_string_equal (again, job);
    free (again);
    //  Another job under the same id
    s_assert_error (s_submit_as ("same-id-1", s_echo_b, false), "conflict");
    assert_int_equal (s_job_total (), total);
    //  Also after a restart (the submit's reply is kept in the store)
    grid_stop_broker (&s_grid, true);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    again = s_job_of (s_submit_as ("same-id-1", s_echo_a, true));
    assert_string_equal (again, job);
    free (again);
    s_assert_error (s_submit_as ("same-id-1", s_echo_b, false), "conflict");
    assert_int_equal (s_job_total (), total);
    free (job);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
}

//  ---------------------------------------------------------------------
//  The same idempotency key returns the first job (id and status), also
//  after a restart; another spec under it is a conflict; deleting the job
//  frees the key.

static const char *s_keyed_a =
    "target: node:web-01\n"
    "idempotency_key: deploy-42\n"
    "tasks:\n"
    "  - {backend: test, action: echo, params: {msg: keyed}}\n";

static const char *s_keyed_b =
    "target: node:web-01\n"
    "idempotency_key: deploy-42\n"
    "tasks:\n"
    "  - {backend: test, action: echo, params: {msg: other}}\n";

static void
test_it_output_idempotency_key (void **state)
{
    char *job = s_job_of (s_submit_as ("key-1", s_keyed_a, false));
    pv_doc_t *record = grid_wait_job (&s_grid, job, S_WAIT_MS);
    assert_true (grid_reply_ok (record, NULL));
    pv_doc_destroy (&record);
    int64_t total = s_job_total ();

    //  A new request id, the same key and spec: the first job, finished
    pv_doc_t *reply = s_submit_as ("key-2", s_keyed_a, false);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "job", job));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&reply);
    assert_int_equal (s_job_total (), total);

    //  Another spec under the key
    s_assert_error (s_submit_as ("key-3", s_keyed_b, false), "conflict");
    assert_int_equal (s_job_total (), total);

    //  The key is in the record and in `gridcli job status`
    reply = grid_call (&s_grid, "job.get", "job", job, NULL);
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "idempotency_key", "deploy-42"));
    pv_doc_destroy (&reply);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &out, &err, 10000, "job", "status",
                                job, NULL), 0);
    assert_non_null (strstr (out, "deploy-42"));
    free (out);
    free (err);

    //  Across a broker restart
    grid_stop_broker (&s_grid, true);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    char *again = s_job_of (s_submit_as ("key-4", s_keyed_a, false));
    assert_string_equal (again, job);
    free (again);
    s_assert_error (s_submit_as ("key-5", s_keyed_b, false), "conflict");
    assert_int_equal (s_job_total (), total);

    //  Deleting the job frees the key: the next submit makes a new job
    reply = grid_call (&s_grid, "job.delete", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
    char *fresh = s_job_of (s_submit_as ("key-6", s_keyed_b, false));
    assert_string_not_equal (fresh, job);
    record = grid_wait_job (&s_grid, fresh, S_WAIT_MS);
    assert_true (grid_reply_ok (record, NULL));
    pv_doc_destroy (&record);
    free (fresh);
    free (job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_output_request_id_reuse),
        cmocka_unit_test (test_it_output_idempotency_key),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
