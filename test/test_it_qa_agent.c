/*  =========================================================================
    test_it_qa_agent - an enrolled agent that turns hostile, against a
    real gridbroker over ipc://: what it sends for its own cells is taken
    only within the bounds an honest agent keeps. Output pieces off the
    1 MiB grid an agent cuts its streams on, or for an attempt its step
    was never given, are acknowledged (so a spool drains) and counted,
    never stored: before, one agent could store 1 MiB at every byte
    offset of every attempt and fill the broker's store. A reply larger
    than a message may hold (a job record with 17 MiB of outputs) is
    answered too_large, where the client's socket used to drop it and
    gridcli said the broker did not answer.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "../proto/pw.h"
#include "lib/fixture.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

//  The grid of fixture_setup with its broker started.
static grid_t *
s_grid (void **state)
{
    grid_t *grid = (grid_t *) *state;
    if (grid_start_broker (grid, NULL) != 0)
        fail_msg ("the broker did not start");
    return grid;
}

//  The value of counter NAME in `status` dropped, or -1.
static int64_t
s_counter (grid_t *grid, const char *name)
{
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "dropped"), name), &value);
    pv_doc_destroy (&reply);
    return value;
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

//  The next message on DEALER of TYPE (others, such as direct re-sends of
//  a command, are skipped), within S_WAIT_MS, or NULL.
static proto_msg_t *
s_next_of (zsock_t *dealer, proto_type_t type)
{
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        zsock_set_rcvtimeo (dealer, (int) (deadline - grid_now_ms ()));
        zframe_t *frame = zframe_recv (dealer);
        if (!frame)
            return NULL;
        proto_msg_t *msg = NULL;
        proto_msg_decode (zframe_data (frame), zframe_size (frame), &msg,
                          NULL, 0);
        zframe_destroy (&frame);
        if (msg && msg->type == type)
            return msg;
        proto_msg_destroy (&msg);
    }
    return NULL;
}

//  A DEALER welcomed as node NODE (its own key, auto-accepted) that
//  offers test echo with an optional msg.
static zsock_t *
s_rogue (grid_t *grid, const char *node)
{
    char key_file [400];
    assert_int_equal (grid_keygen (grid, node, key_file, sizeof key_file,
                                   NULL), 0);
    zsock_t *dealer = grid_dealer (grid, grid->agents_ep, key_file);
    assert_non_null (dealer);
    proto_param_spec_t msg_param = {
        .name = "msg", .required = false, .type = "text", .help = "what"
    };
    proto_action_spec_t echo = {
        .name = "echo", .help = "echo", .params = &msg_param,
        .param_count = 1
    };
    proto_backend_spec_t test = {
        .name = "test", .actions = &echo, .action_count = 1
    };
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = (char *) node, .hostname = "rogue",
        .backends = &test, .backend_count = 1, .version = "0.1.0",
        .concurrency = 1
    };
    s_send_msg (dealer, &hello);
    proto_msg_t *welcome = s_next_of (dealer, PROTO_WELCOME);
    assert_non_null (welcome);
    proto_msg_destroy (&welcome);
    return dealer;
}

//  Sends an output piece of JOB step 0 and waits for its output_ack.
static void
s_piece (zsock_t *dealer, const char *node, const char *job,
         uint32_t attempt, uint64_t offset)
{
    uint8_t bytes [16];
    memset (bytes, '!', sizeof bytes);
    proto_msg_t piece = {
        .type = PROTO_OUTPUT, .node = (char *) node, .job = (char *) job,
        .step = 0, .attempt = attempt, .stream = "stdout", .offset = offset,
        .chunk = bytes, .chunk_len = sizeof bytes,
        .size = offset + sizeof bytes
    };
    s_send_msg (dealer, &piece);
    proto_msg_t *ack = s_next_of (dealer, PROTO_OUTPUT_ACK);
    assert_non_null (ack);
    assert_string_equal (ack->job, job);
    assert_true (ack->offset == offset);
    assert_int_equal (ack->attempt, attempt);
    proto_msg_destroy (&ack);
}

//  Output pieces are taken at the offsets an agent cuts (multiples of
//  1 MiB) and for attempts the step was given; others are acknowledged
//  and counted as output_refused, and the step's output is what the
//  honest pieces said.
static void
test_it_qa_agent_output_pieces_bounded (void **state)
{
    grid_t *grid = s_grid (state);
    zsock_t *dealer = s_rogue (grid, "rogue-01");
    char *job = grid_submit_id (grid,
                                "target: node:rogue-01\n"
                                "tasks:\n"
                                "  - {backend: test, action: echo,"
                                " params: {msg: hi}}\n");
    assert_non_null (job);
    proto_msg_t ack = {
        .type = PROTO_ACK, .node = "rogue-01", .job = job, .step = 0,
        .attempt = 1
    };
    s_send_msg (dealer, &ack);

    int64_t refused = s_counter (grid, "output_refused");
    assert_true (refused >= 0);
    //  Off the grid: would overlap the piece at 0 by all but one byte
    s_piece (dealer, "rogue-01", job, 1, 1);
    assert_int_equal (s_counter (grid, "output_refused"), refused + 1);
    s_piece (dealer, "rogue-01", job, 1, PROTO_MAX_CHUNK / 2);
    assert_int_equal (s_counter (grid, "output_refused"), refused + 2);
    //  Attempt 2 was never given (no retries)
    s_piece (dealer, "rogue-01", job, 2, 0);
    assert_int_equal (s_counter (grid, "output_refused"), refused + 3);
    s_piece (dealer, "rogue-01", job, 1000, 0);
    assert_int_equal (s_counter (grid, "output_refused"), refused + 4);
    //  The honest piece is taken
    s_piece (dealer, "rogue-01", job, 1, 0);
    assert_int_equal (s_counter (grid, "output_refused"), refused + 4);

    proto_msg_t result = {
        .type = PROTO_RESULT, .node = "rogue-01", .job = job, .step = 0,
        .attempt = 1, .status = "success", .output = "!!!!", .error = "",
        .exit_code = 0, .duration_ms = 1, .output_size = 16
    };
    s_send_msg (dealer, &result);
    proto_msg_t *result_ack = s_next_of (dealer, PROTO_RESULT_ACK);
    assert_non_null (result_ack);
    proto_msg_destroy (&result_ack);
    pv_doc_t *record = grid_wait_job (grid, job, S_WAIT_MS);
    assert_non_null (record);
    pv_doc_destroy (&record);

    //  job.output takes an int step: the raw form
    const pv_t *data = NULL;
    pw_t *writer = pw_new ();
    pw_map (writer, 6);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "job.output");
    pw_str (writer, "id");
    pw_str (writer, "qa-output-1");
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, "rogue-01");
    pw_str (writer, "step");
    pw_int (writer, 0);
    pv_doc_t *page = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                          S_WAIT_MS);
    pw_destroy (&writer);
    assert_true (grid_reply_ok (page, &data));
    size_t len = 0;
    const char *bytes = pv_str (pv_map_get (data, "data"), &len);
    assert_non_null (bytes);
    assert_int_equal (len, 16);
    assert_memory_equal (bytes, "!!!!!!!!!!!!!!!!", 16);
    pv_doc_destroy (&page);
    zsock_destroy (&dealer);
    free (job);
}

//  A job record past the 16 MiB a message may hold (17 nodes, each with
//  a 1 MiB output in its result) is answered too_large over ZeroMQ, with
//  what to do, where the client's socket would have dropped it and the
//  client heard nothing; gridcli says so and exits 4.
static void
test_it_qa_agent_reply_too_large (void **state)
{
    grid_t *grid = s_grid (state);
    enum { NODES = 17 };
    zsock_t *dealers [NODES];
    char target [NODES * 12 + 16] = "node:";
    for (int index = 0; index < NODES; index++) {
        char node [16];
        snprintf (node, sizeof node, "big-%02d", index);
        dealers [index] = s_rogue (grid, node);
        strcat (target, index ? "," : "");
        strcat (target, node);
    }
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "target: %s\n"
              "tasks:\n"
              "  - {backend: test, action: echo, params: {msg: hi}}\n",
              target);
    char *job = grid_submit_id (grid, yaml);
    assert_non_null (job);
    size_t output_len = 1000000;
    char *output = (char *) malloc (output_len + 1);
    assert_non_null (output);
    memset (output, 'y', output_len);
    output [output_len] = 0;
    for (int index = 0; index < NODES; index++) {
        char node [16];
        snprintf (node, sizeof node, "big-%02d", index);
        proto_msg_t result = {
            .type = PROTO_RESULT, .node = node, .job = job, .step = 0,
            .attempt = 1, .status = "success", .output = output,
            .error = "", .exit_code = 0, .duration_ms = 1
        };
        s_send_msg (dealers [index], &result);
        proto_msg_t *result_ack = s_next_of (dealers [index],
                                             PROTO_RESULT_ACK);
        assert_non_null (result_ack);
        proto_msg_destroy (&result_ack);
    }
    free (output);

    pv_doc_t *reply = grid_call (grid, "job.get", "job", job, NULL);
    assert_non_null (reply);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, "too_large");
    free (code);
    pv_doc_destroy (&reply);
    //  The broker serves on: a small request is answered
    reply = grid_call (grid, "job.progress", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);

    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, S_WAIT_MS, "job", "status", job,
                       NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "more than the 16 MiB"));
    assert_non_null (strstr (err, "too_large"));
    free (out);
    free (err);
    for (int index = 0; index < NODES; index++)
        zsock_destroy (&dealers [index]);
    free (job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (
            test_it_qa_agent_output_pieces_bounded, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_qa_agent_reply_too_large,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
