/*  =========================================================================
    test_it_output - exactly-once submits and whole outputs end to end:
    request ids and idempotency keys (a retry gets the first answer, a
    different body under the same id or key is a conflict, across a broker
    restart), and outputs of several MiB kept whole, byte for byte, and
    read back with `gridcli job output ... | sha256sum`, through a real
    gridbroker, a real gridagent and the real gridcli over ipc://.
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

//  How many stored jobs job.list counts with STATUS (its by_status).
static int64_t
s_job_count (const char *status)
{
    pv_doc_t *reply = grid_call (&s_grid, "job.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t count = -1;
    assert_int_equal (
        pv_get_int (pv_map_get (pv_map_get (data, "by_status"), status),
                    &count),
        0);
    pv_doc_destroy (&reply);
    return count;
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

    //  Deleting the job frees the key: the next submit makes a new job.
    //  It is no longer counted by status either.
    int64_t completed = s_job_count ("completed");
    reply = grid_call (&s_grid, "job.delete", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    assert_int_equal (s_job_count ("completed"), completed - 1);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
    char *fresh = s_job_of (s_submit_as ("key-6", s_keyed_b, false));
    assert_string_not_equal (fresh, job);
    record = grid_wait_job (&s_grid, fresh, S_WAIT_MS);
    assert_true (grid_reply_ok (record, NULL));
    pv_doc_destroy (&record);
    free (fresh);
    free (job);
}

//  ---------------------------------------------------------------------
//  Whole outputs

//  The bytes `test output --bytes LEN --seed SEED` writes.
static uint8_t *
s_expected (size_t len, uint32_t seed)
{
    uint8_t *bytes = (uint8_t *) malloc (len ? len : 1);
    assert_non_null (bytes);
    uint32_t state = seed;
    for (size_t index = 0; index < len; index++) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        bytes [index] = (uint8_t) (state & 0xff);
    }
    return bytes;
}

//  The first line printed by sh -c COMMAND (caller frees), or NULL.
static char *
s_shell_line (const char *command)
{
    FILE *pipe = popen (command, "r");
    assert_non_null (pipe);
    char line [512] = "";
    char *got = fgets (line, sizeof line, pipe);
    int status = pclose (pipe);
    if (!got || status != 0)
        return NULL;
    line [strcspn (line, "\n")] = 0;
    return strdup (line);
}

//  sha256sum of LEN bytes at DATA (as the first 64 characters of its line).
static char *
s_sha256 (const uint8_t *data, size_t len)
{
    char path [400];
    snprintf (path, sizeof path, "%s/expected.bin", s_grid.dir);
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (data, 1, len, file), len);
    fclose (file);
    char command [600];
    snprintf (command, sizeof command, "sha256sum '%s'", path);
    char *line = s_shell_line (command);
    assert_non_null (line);
    line [64] = 0;
    return line;
}

//  sha256sum of what `gridcli job output JOB ARGS` writes to a pipe.
static char *
s_cli_output_sha256 (const char *job, const char *args)
{
    char command [2048];
    snprintf (command, sizeof command,
              "timeout 60 '%s/gridcli' --broker "
              "'%s' --key '%s' --broker-key '%s' job output %s %s | sha256sum",
              s_grid.bin, s_grid.client_ep, s_grid.admin_key,
              s_grid.broker_key, job, args);
    char *line = s_shell_line (command);
    assert_non_null (line);
    line [64] = 0;
    return line;
}

//  Runs `test output` with PARAMS on web-01 and waits for it; returns the
//  job id (caller frees) and its record in *RECORD_P.
static char *
s_run_output (const char *params, pv_doc_t **record_p)
{
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "target: node:web-01\n"
              "tasks:\n"
              "  - {backend: test, action: output, params: {%s}}\n", params);
    static int seq = 0;
    char id [32];
    snprintf (id, sizeof id, "output-%d", ++seq);
    char *job = s_job_of (s_submit_as (id, yaml, false));
    *record_p = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (*record_p, &record));
    assert_true (grid_str_is (record, "status", "completed"));
    return job;
}

//  The cell of step 0 on web-01 in a job.get reply.
static const pv_t *
s_cell_of (const pv_doc_t *reply)
{
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (reply, &record));
    const pv_t *cell = grid_cell (record, 0, "web-01");
    assert_non_null (cell);
    return cell;
}

//  A program that writes 3 MB of every byte value: the record keeps the
//  first 4 KiB and the size, `gridcli job output` gives back every byte in
//  order, the table says how much more there is.
static void
test_it_output_whole_stdout (void **state)
{
    size_t len = 3000000;
    pv_doc_t *doc = NULL;
    char *job = s_run_output ("bytes: 3000000, seed: 7", &doc);
    const pv_t *cell = s_cell_of (doc);
    assert_true (pv_size (pv_map_get (cell, "output")) <= 4096);
    int64_t size = 0;
    assert_int_equal (pv_get_int (pv_map_get (cell, "output_size"), &size), 0);
    assert_int_equal (size, len);
    assert_null (pv_map_get (cell, "output_dropped"));
    pv_doc_destroy (&doc);

    uint8_t *expected = s_expected (len, 7);
    char *want = s_sha256 (expected, len);
    char *got = s_cli_output_sha256 (job, "--node web-01 --step 0");
    assert_string_equal (got, want);
    free (got);
    //  The node and the step are the job's only ones
    got = s_cli_output_sha256 (job, "");
    assert_string_equal (got, want);
    free (got);
    free (want);

    //  One page through the API: an offset inside a piece
    char offset [32];
    snprintf (offset, sizeof offset, "%d", 1048570);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.output", "page-1", 5);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    pw_str (writer, "step");
    pw_int (writer, 0);
    pw_str (writer, "offset");
    pw_int (writer, 1048570);
    pw_str (writer, "limit");
    pw_int (writer, 20);
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), 5000);
    pw_destroy (&writer);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    size_t page_len = 0;
    const char *page = pv_str (pv_map_get (data, "data"), &page_len);
    assert_int_equal (page_len, 20);
    assert_memory_equal (page, expected + 1048570, 20);
    int64_t next = 0;
    pv_get_int (pv_map_get (data, "next"), &next);
    assert_int_equal (next, 1048590);
    pv_doc_destroy (&reply);
    free (expected);

    //  The table points at the rest
    char *out = NULL, *err = NULL;
    grid_cli (&s_grid, &out, &err, 10000, "job", "status", job, NULL);
    assert_non_null (strstr (out, "MiB more: gridcli job output"));
    assert_non_null (strstr (out, "--node web-01"));
    free (out);
    free (err);

    //  Deleting the job deletes its output
    reply = grid_call (&s_grid, "job.delete", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    s_assert_error (grid_call (&s_grid, "job.output", "job", job, "node",
                               "web-01", NULL), "bad_request");
    free (job);
}

//  A step the one-step job JOB does not have is refused, saying how many
//  it has, through the API and gridcli (not "no output for step 5 yet").
static void
s_assert_step_refused (const char *job)
{
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.output", "step-5", 3);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    pw_str (writer, "step");
    pw_int (writer, 5);
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), 5000);
    pw_destroy (&writer);
    char *message = pv_strdup (pv_map_get (pv_doc_root (reply), "message"));
    assert_non_null (message);
    assert_non_null (strstr (message, "has 1 step (step 0): there is no "
                                      "step 5"));
    free (message);
    s_assert_error (reply, "not_found");
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "output", job,
                         "--node", "web-01", "--step", "5", NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "has 1 step (step 0): there is no step 5"));
    assert_null (strstr (err, "yet"));
    free (out);
    free (err);
}

//  Standard error is kept whole the same way, and a short output without
//  pieces is served from the record.
static void
test_it_output_whole_stderr (void **state)
{
    size_t len = 1500000;
    pv_doc_t *doc = NULL;
    char *job = s_run_output ("bytes: 1500000, seed: 11, stream: stderr",
                              &doc);
    const pv_t *cell = s_cell_of (doc);
    int64_t size = 0;
    assert_int_equal (pv_get_int (pv_map_get (cell, "error_size"), &size), 0);
    assert_int_equal (size, len);
    assert_null (pv_map_get (cell, "output_size"));
    pv_doc_destroy (&doc);
    uint8_t *expected = s_expected (len, 11);
    char *want = s_sha256 (expected, len);
    char *got = s_cli_output_sha256 (job, "--stderr");
    assert_string_equal (got, want);
    free (got);
    free (want);
    free (expected);
    free (job);

    job = s_run_output ("bytes: 100", &doc);
    cell = s_cell_of (doc);
    assert_null (pv_map_get (cell, "output_size"));
    assert_int_equal (pv_size (pv_map_get (cell, "output")), 100);
    pv_doc_destroy (&doc);
    uint8_t xs [100];
    memset (xs, 'x', sizeof xs);
    want = s_sha256 (xs, sizeof xs);
    got = s_cli_output_sha256 (job, "");
    assert_string_equal (got, want);
    free (got);
    free (want);
    s_assert_step_refused (job);
    free (job);
}

//  The value of counter NAME in `status` dropped.
static int64_t
s_counter (const char *name)
{
    pv_doc_t *reply = grid_call (&s_grid, "status", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "dropped"), name), &value);
    pv_doc_destroy (&reply);
    return value;
}

//  The next message on DEALER (within S_WAIT_MS) decoded, or NULL.
static proto_msg_t *
s_next_msg (zsock_t *dealer)
{
    zsock_set_rcvtimeo (dealer, S_WAIT_MS);
    zframe_t *frame = zframe_recv (dealer);
    if (!frame)
        return NULL;
    proto_msg_t *msg = NULL;
    proto_msg_decode (zframe_data (frame), zframe_size (frame), &msg, NULL,
                      0);
    zframe_destroy (&frame);
    return msg;
}

static void
s_send_msg (zsock_t *dealer, const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    pw_destroy (&writer);
}

//  An agent's output pieces are taken only for its own cells: a piece for
//  a cell it has none in is acknowledged (so its spool drains), counted,
//  and never stored; one for another node's cell is forbidden; a piece
//  that is not binary is malformed.
static void
test_it_output_foreign_pieces_refused (void **state)
{
    pv_doc_t *doc = NULL;
    char *job = s_run_output ("bytes: 100", &doc);
    pv_doc_destroy (&doc);
    char key_file [400];
    assert_int_equal (grid_keygen (&s_grid, "rogue", key_file,
                                   sizeof key_file, NULL), 0);
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (dealer);
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = "rogue-01", .hostname = "rogue",
        .version = "0.1.0", .concurrency = 1
    };
    s_send_msg (dealer, &hello);
    proto_msg_t *welcome = s_next_msg (dealer);
    assert_non_null (welcome);
    assert_int_equal (welcome->type, PROTO_WELCOME);
    assert_true (welcome->max_output == 16 << 20);
    proto_msg_destroy (&welcome);

    int64_t refused = s_counter ("output_refused");
    uint8_t junk [16];
    memset (junk, '!', sizeof junk);
    proto_msg_t piece = {
        .type = PROTO_OUTPUT, .node = "rogue-01", .job = job, .step = 0,
        .attempt = 1, .stream = "stdout", .offset = 0, .chunk = junk,
        .chunk_len = sizeof junk, .size = sizeof junk
    };
    s_send_msg (dealer, &piece);
    proto_msg_t *ack = s_next_msg (dealer);
    assert_non_null (ack);
    assert_int_equal (ack->type, PROTO_OUTPUT_ACK);
    assert_string_equal (ack->job, job);
    proto_msg_destroy (&ack);
    assert_int_equal (s_counter ("output_refused"), refused + 1);

    piece.node = "web-01";
    s_send_msg (dealer, &piece);
    proto_msg_t *error = s_next_msg (dealer);
    assert_non_null (error);
    assert_int_equal (error->type, PROTO_ERROR);
    assert_string_equal (error->code, "forbidden");
    proto_msg_destroy (&error);

    //  data as a str: malformed
    pw_t *writer = pw_new ();
    pw_map (writer, 10);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "output");
    pw_str (writer, "node");
    pw_str (writer, "rogue-01");
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "step");
    pw_int (writer, 0);
    pw_str (writer, "attempt");
    pw_int (writer, 1);
    pw_str (writer, "stream");
    pw_str (writer, "stdout");
    pw_str (writer, "offset");
    pw_int (writer, 0);
    pw_str (writer, "data");
    pw_str (writer, "text");
    pw_str (writer, "size");
    pw_int (writer, 4);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    pw_destroy (&writer);
    error = s_next_msg (dealer);
    assert_non_null (error);
    assert_int_equal (error->type, PROTO_ERROR);
    assert_string_equal (error->code, "malformed");
    proto_msg_destroy (&error);
    zsock_destroy (&dealer);

    //  web-01's output is untouched
    char want [101];
    memset (want, 'x', 100);
    want [100] = 0;
    char *sha_want = s_sha256 ((const uint8_t *) want, 100);
    char *sha_got = s_cli_output_sha256 (job, "--node web-01");
    assert_string_equal (sha_got, sha_want);
    free (sha_want);
    free (sha_got);
    free (job);
}

//  Past results.max_output the node keeps the first and the last halves,
//  and the record and gridcli say how much was dropped.
static void
test_it_output_cap_keeps_head_and_tail (void **state)
{
    char path [400];
    snprintf (path, sizeof path, "%s/capped.yaml", s_grid.dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "results:\n  max_output: 1MiB\n");
    fclose (file);
    grid_stop_broker (&s_grid, false);
    const char *extra [] = {"--config", path, NULL};
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));

    size_t len = 3000000, cap = 1 << 20;
    pv_doc_t *doc = NULL;
    char *job = s_run_output ("bytes: 3000000, seed: 5", &doc);
    const pv_t *cell = s_cell_of (doc);
    int64_t size = 0, dropped = 0;
    assert_int_equal (pv_get_int (pv_map_get (cell, "output_size"), &size), 0);
    assert_int_equal (pv_get_int (pv_map_get (cell, "output_dropped"),
                                  &dropped), 0);
    assert_int_equal (size, cap);
    assert_int_equal (dropped, len - cap);
    bool truncated = false;
    pv_get_bool (pv_map_get (cell, "truncated"), &truncated);
    assert_true (truncated);
    pv_doc_destroy (&doc);

    uint8_t *full = s_expected (len, 5);
    uint8_t *kept = (uint8_t *) malloc (cap);
    memcpy (kept, full, cap / 2);
    memcpy (kept + cap / 2, full + len - cap / 2, cap / 2);
    char *want = s_sha256 (kept, cap);
    char *got = s_cli_output_sha256 (job, "");
    assert_string_equal (got, want);
    free (got);
    free (want);
    free (kept);
    free (full);
    free (job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_output_request_id_reuse),
        cmocka_unit_test (test_it_output_idempotency_key),
        cmocka_unit_test (test_it_output_whole_stdout),
        cmocka_unit_test (test_it_output_whole_stderr),
        cmocka_unit_test (test_it_output_foreign_pieces_refused),
        cmocka_unit_test (test_it_output_cap_keeps_head_and_tail),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
